/* python/src/context.c - fuse.Context, its lock, and diagnostics.
 *
 * A Context owns one FzContext with every dialect and pass registered.
 * Its diagnostic handler (pushed at creation, at the bottom of the
 * context's stack) claims every diagnostic: nothing reaches the default
 * printer on stderr. The handler runs on the thread that holds the
 * context's lock, maybe without the GIL, so it only copies the
 * diagnostic (severity, location, message, the rendered text with its
 * source line and caret, the notes) into malloc memory (FZPY_MALLOC); fzpyDispatch
 * later turns them into fuse.Diagnostic objects, offers them to the
 * Python handlers of Context.attach_diagnostic_handler, and raises
 * fuse.Error for the errors of a failed call (warnings become
 * fuse.Warning; remarks go to whoever asked for them).
 */
#include <stdarg.h>
#include <string.h>

#include "fzpy.h"

PyObject *FzpyError;
PyObject *FzpyWarning;
PyTypeObject *FzpyContextType;
PyTypeObject *FzpyDiagnosticType;

/*===--- Text buffers --------------------------------------------------===*/

void fzpyTextAppend(FzStringRef chunk, void *userData) {
  FzpyText *t = userData;
  if (t->failed || chunk.length == 0)
    return;
  if (t->len + chunk.length + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + chunk.length + 1)
      cap *= 2;
    char *d = FZPY_REALLOC(t->data, cap);
    if (!d) {
      t->failed = true;
      return;
    }
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->len, chunk.data, chunk.length);
  t->len += chunk.length;
  t->data[t->len] = 0;
}

PyObject *fzpyTextTake(FzpyText *t) {
  PyObject *s = t->failed ? PyErr_NoMemory()
                          : PyUnicode_DecodeUTF8(t->data ? t->data : "",
                                                 (Py_ssize_t)t->len,
                                                 "replace");
  FZPY_FREE(t->data);
  memset(t, 0, sizeof *t);
  return s;
}

static char *raw_strdup(FzStringRef s) {
  char *d = FZPY_MALLOC(s.length + 1);
  if (d) {
    if (s.length)
      memcpy(d, s.data, s.length);
    d[s.length] = 0;
  }
  return d;
}

/*===--- Catching diagnostics (no GIL needed) ---------------------------===*/

static void diag_free(FzpyDiag *d) {
  FZPY_FREE(d->message);
  FZPY_FREE(d->text);
  for (size_t i = 0; i < d->numNotes; ++i)
    diag_free(&d->notes[i]);
  FZPY_FREE(d->notes);
}

void fzpyDiagListFree(FzpyDiagList *l) {
  for (size_t i = 0; i < l->count; ++i)
    diag_free(&l->items[i]);
  FZPY_FREE(l->items);
  memset(l, 0, sizeof *l);
}

/* Copies diag into *d; false when memory ran out (d is then freed). */
static bool diag_copy(const FzDiagnostic *diag, FzpyDiag *d) {
  memset(d, 0, sizeof *d);
  d->severity = fzDiagnosticGetSeverity(diag);
  d->loc = fzDiagnosticGetLoc(diag);
  d->message = raw_strdup(fzDiagnosticGetMessage(diag));
  FzpyText text = {0};
  fzDiagnosticPrint(diag, true, fzpyTextAppend, &text);
  d->text = text.failed ? NULL : text.data;
  if (text.failed)
    FZPY_FREE(text.data);
  size_t n = fzDiagnosticGetNumNotes(diag);
  bool ok = d->message && d->text;
  if (ok && n) {
    d->notes = FZPY_CALLOC(n, sizeof *d->notes);
    ok = d->notes != NULL;
    for (size_t i = 0; ok && i < n; ++i) {
      ok = diag_copy(fzDiagnosticGetNote(diag, i), &d->notes[i]);
      d->numNotes = ok ? i + 1 : i;
    }
  }
  if (!ok)
    diag_free(d);
  return ok;
}

static bool catch_diag(const FzDiagnostic *diag, void *userData) {
  ContextObject *c = userData;
  FzpyDiagList *l = &c->pending;
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    FzpyDiag *items = FZPY_REALLOC(l->items, cap * sizeof *items);
    if (!items)
      return true; /* lost; the call's result still says it failed */
    l->items = items;
    l->cap = cap;
  }
  if (diag_copy(diag, &l->items[l->count]))
    l->count++;
  return true;
}

/*===--- The lock -------------------------------------------------------===*/

void fzpyEnter(ContextObject *c) {
  unsigned long me = PyThread_get_thread_ident();
  if (c->depth > 0 && c->owner == me) {
    c->depth++;
    return;
  }
  if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
  c->owner = me;
  c->depth = 1;
}

typedef struct FzpyDeferred {
  FzpyDestroyFn fn;
  void *arg;
} FzpyDeferred;

/* Runs the destructions other threads left, in the order they came (a
 * DeviceArray's memory before its executable's FzCuda); lock and GIL
 * held; what they report is dropped. */
static void run_deferred(ContextObject *c) {
  for (size_t i = 0; i < c->numDeferred; ++i)
    c->deferred[i].fn(c->deferred[i].arg);
  c->numDeferred = 0;
  fzpyDiagListFree(&c->pending);
}

void fzpyLeave(ContextObject *c, FzpyDiagList *out) {
  if (--c->depth > 0) {
    /* A nested entry: the outer one collects the diagnostics. */
    memset(out, 0, sizeof *out);
    return;
  }
  *out = c->pending;
  memset(&c->pending, 0, sizeof c->pending);
  if (c->numDeferred) {
    c->depth = 1;
    run_deferred(c);
    c->depth = 0;
  }
  c->owner = 0;
  PyThread_release_lock(c->lock);
}

void fzpyDestroy(ContextObject *c, FzpyDestroyFn fn, void *arg) {
  bool mine = c->depth > 0 && c->owner == PyThread_get_thread_ident();
  if (!mine && !PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
    if (c->numDeferred == c->capDeferred) {
      size_t cap = c->capDeferred ? 2 * c->capDeferred : 8;
      FzpyDeferred *d = FZPY_REALLOC(c->deferred, cap * sizeof *d);
      if (!d) { /* no room to defer: wait for the lock after all */
        fzpyEnter(c);
        fn(arg);
        FzpyDiagList l;
        fzpyLeave(c, &l);
        fzpyDiagListFree(&l);
        return;
      }
      c->deferred = d;
      c->capDeferred = cap;
    }
    c->deferred[c->numDeferred++] = (FzpyDeferred){fn, arg};
    return;
  }
  if (mine) {
    c->depth++;
  } else {
    c->owner = PyThread_get_thread_ident();
    c->depth = 1;
  }
  /* Its diagnostics are not the caller's. */
  FzpyDiagList keep = c->pending;
  memset(&c->pending, 0, sizeof c->pending);
  fn(arg);
  fzpyDiagListFree(&c->pending);
  c->pending = keep;
  FzpyDiagList l;
  fzpyLeave(c, &l);
  fzpyDiagListFree(&l);
}

/*===--- fuse.Diagnostic ------------------------------------------------===*/

typedef struct DiagnosticObject {
  PyObject_HEAD
  PyObject *severity; /* "error", "warning", "remark", "note" */
  PyObject *message;
  PyObject *location;
  PyObject *notes; /* tuple */
  PyObject *text;
} DiagnosticObject;

static const char *severity_name(FzSeverity s) {
  switch (s) {
  case FZ_SEVERITY_ERROR:
    return "error";
  case FZ_SEVERITY_WARNING:
    return "warning";
  case FZ_SEVERITY_REMARK:
    return "remark";
  default:
    return "note";
  }
}

static PyObject *diagnostic_new(ContextObject *c, const FzpyDiag *d) {
  DiagnosticObject *o = PyObject_New(DiagnosticObject, FzpyDiagnosticType);
  if (!o)
    return NULL;
  o->severity = PyUnicode_FromString(severity_name(d->severity));
  o->message = PyUnicode_DecodeUTF8(d->message, (Py_ssize_t)strlen(d->message),
                                    "replace");
  o->location = fzpyLocNew(c, d->loc);
  o->text = PyUnicode_DecodeUTF8(d->text, (Py_ssize_t)strlen(d->text),
                                 "replace");
  o->notes = PyTuple_New((Py_ssize_t)d->numNotes);
  if (!o->severity || !o->message || !o->location || !o->text || !o->notes) {
    Py_DECREF((PyObject *)o);
    return NULL;
  }
  for (size_t i = 0; i < d->numNotes; ++i) {
    PyObject *n = diagnostic_new(c, &d->notes[i]);
    if (!n) {
      Py_DECREF((PyObject *)o);
      return NULL;
    }
    PyTuple_SetItem(o->notes, (Py_ssize_t)i, n);
  }
  return (PyObject *)o;
}

static void diagnostic_dealloc(PyObject *self) {
  DiagnosticObject *o = (DiagnosticObject *)self;
  Py_XDECREF(o->severity);
  Py_XDECREF(o->message);
  Py_XDECREF(o->location);
  Py_XDECREF(o->notes);
  Py_XDECREF(o->text);
  FZPY_TYPE_FREE(self);
}

static PyObject *diagnostic_str(PyObject *self) {
  PyObject *t = ((DiagnosticObject *)self)->text;
  /* The rendering ends with a newline; str() does not. */
  Py_ssize_t n = PyUnicode_GetLength(t);
  while (n > 0 && PyUnicode_ReadChar(t, n - 1) == '\n')
    n--;
  return PyUnicode_Substring(t, 0, n);
}

static PyObject *diagnostic_repr(PyObject *self) {
  DiagnosticObject *o = (DiagnosticObject *)self;
  return PyUnicode_FromFormat("<fuse.Diagnostic %U at %R: %R>", o->severity,
                              o->location, o->message);
}

static PyMemberDef diagnostic_members[] = {
    {"severity", T_OBJECT_EX, offsetof(DiagnosticObject, severity), READONLY,
     "'error', 'warning', 'remark' or 'note'"},
    {"message", T_OBJECT_EX, offsetof(DiagnosticObject, message), READONLY,
     "the message, without location or severity"},
    {"location", T_OBJECT_EX, offsetof(DiagnosticObject, location), READONLY,
     "where (a fuse.Location)"},
    {"notes", T_OBJECT_EX, offsetof(DiagnosticObject, notes), READONLY,
     "attached notes (fuse.Diagnostic)"},
    {NULL},
};

static PyType_Slot diagnostic_slots[] = {
    {Py_tp_dealloc, diagnostic_dealloc},
    {Py_tp_str, diagnostic_str},
    {Py_tp_repr, diagnostic_repr},
    {Py_tp_members, diagnostic_members},
    {Py_tp_doc, "A diagnostic of fuse: severity, message, location, notes; "
                "str() renders it as fuse's tools print it (source line and "
                "caret)."},
    {0, NULL},
};

static PyType_Spec diagnostic_spec = {
    "fuse.Diagnostic", sizeof(DiagnosticObject), 0, Py_TPFLAGS_DEFAULT,
    diagnostic_slots};

/*===--- Dispatching caught diagnostics (GIL held) -----------------------===*/

PyObject *fzpyRaise(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (!msg)
    return NULL;
  PyObject *exc = PyObject_CallFunctionObjArgs(FzpyError, msg, NULL);
  Py_DECREF(msg);
  if (exc) {
    PyErr_SetObject(FzpyError, exc);
    Py_DECREF(exc);
  }
  return NULL;
}

/* True when a user handler claimed d (-1: a handler raised). */
static int offer(ContextObject *c, PyObject *d) {
  Py_ssize_t n = PyList_Size(c->handlers);
  for (Py_ssize_t i = n - 1; i >= 0; --i) {
    PyObject *h = PyList_GetItem(c->handlers, i);
    if (!h)
      return -1;
    Py_INCREF((PyObject *)h);
    PyObject *r = PyObject_CallFunctionObjArgs(h, d, NULL);
    Py_DECREF((PyObject *)h);
    if (!r)
      return -1;
    int claimed = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (claimed)
      return claimed;
  }
  return 0;
}

int fzpyDispatch(ContextObject *c, FzpyDiagList *list, bool failed,
                 PyObject *remarks) {
  PyObject *errors = PyList_New(0);
  int rc = errors ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < list->count; ++i) {
    const FzpyDiag *d = &list->items[i];
    PyObject *o = diagnostic_new(c, d);
    if (!o) {
      rc = -1;
      break;
    }
    int claimed = PyList_Size(c->handlers) ? offer(c, o) : 0;
    if (claimed < 0) {
      rc = -1;
    } else if (!claimed) {
      if (d->severity == FZ_SEVERITY_ERROR) {
        rc = PyList_Append(errors, o);
      } else if (d->severity == FZ_SEVERITY_REMARK) {
        if (remarks && PyList_Check(remarks))
          rc = PyList_Append(remarks, o);
      } else {
        PyObject *s = PyObject_Str(o);
        rc = s ? PyErr_WarnEx(FzpyWarning, PyUnicode_AsUTF8AndSize(s, NULL), 1) : -1;
        Py_XDECREF(s);
      }
    }
    Py_DECREF((PyObject *)o);
  }
  fzpyDiagListFree(list);
  if (rc == 0 && !failed) {
    /* Errors of a call that succeeded (a CUDA graph the driver refused,
     * launched kernel by kernel instead): warnings, not exceptions. */
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_Size(errors); ++i) {
      PyObject *s = PyObject_Str(PyList_GetItem(errors, i));
      rc = s ? PyErr_WarnEx(FzpyWarning, PyUnicode_AsUTF8AndSize(s, NULL), 1) : -1;
      Py_XDECREF(s);
    }
  } else if (rc == 0) {
    PyObject *msg;
    if (PyList_Size(errors) == 0) {
      msg = PyUnicode_FromString(
          "fuse: the call failed (its errors were claimed by a diagnostic "
          "handler)");
    } else {
      PyObject *sep = PyUnicode_FromString("\n");
      PyObject *parts = PyList_New(0);
      for (Py_ssize_t i = 0; parts && i < PyList_Size(errors); ++i) {
        PyObject *s = PyObject_Str(PyList_GetItem(errors, i));
        if (!s || PyList_Append(parts, s) < 0)
          Py_CLEAR(parts);
        Py_XDECREF(s);
      }
      msg = sep && parts ? PyUnicode_Join(sep, parts) : NULL;
      Py_XDECREF(sep);
      Py_XDECREF(parts);
    }
    PyObject *exc = msg ? PyObject_CallFunctionObjArgs(FzpyError, msg, errors,
                                                       NULL)
                        : NULL;
    Py_XDECREF(msg);
    if (exc) {
      PyErr_SetObject(FzpyError, exc);
      Py_DECREF(exc);
    }
    rc = -1;
  }
  Py_XDECREF(errors);
  return rc;
}

int fzpyFinish(ContextObject *c, bool ok, PyObject *remarks) {
  FzpyDiagList list;
  fzpyLeave(c, &list);
  return fzpyDispatch(c, &list, !ok, remarks);
}

/*===--- fuse.Context ---------------------------------------------------===*/

static void context_dealloc(PyObject *self) {
  ContextObject *c = (ContextObject *)self;
  if (c->numDeferred)
    run_deferred(c); /* nobody holds the lock: nobody refers to c */
  if (c->ctx) {
    fzContextPopDiagHandler(c->ctx, c->handler);
    fzContextDestroy(c->ctx);
  }
  fzpyDiagListFree(&c->pending);
  FZPY_FREE(c->deferred);
  if (c->lock)
    PyThread_free_lock(c->lock);
  Py_XDECREF(c->handlers);
  FZPY_TYPE_FREE(self);
}

static ContextObject *context_alloc(PyTypeObject *type) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  ContextObject *c = (ContextObject *)alloc(type, 0);
  if (!c)
    return NULL;
  c->lock = PyThread_allocate_lock();
  c->handlers = PyList_New(0);
  c->ctx = fzContextCreate();
  if (!c->lock || !c->handlers || !c->ctx) {
    Py_DECREF((PyObject *)c);
    PyErr_NoMemory();
    return NULL;
  }
  c->handler = fzContextPushDiagHandler(c->ctx, catch_diag, c);
  fzpyEnter(c);
  bool ok = c->handler && fzRegisterAllDialects(c->ctx) &&
            fzRegisterAllPasses(c->ctx);
  if (fzpyFinish(c, ok, NULL) < 0) {
    Py_DECREF((PyObject *)c);
    return NULL;
  }
  return c;
}

ContextObject *fzpyContextNew(void) { return context_alloc(FzpyContextType); }

ContextObject *fzpyContextOrNew(PyObject *ctx) {
  if (!ctx || ctx == Py_None)
    return fzpyContextNew();
  if (!PyObject_TypeCheck(ctx, FzpyContextType)) {
    PyErr_Format(PyExc_TypeError, "context must be a fuse.Context, not %R",
                 (PyObject *)Py_TYPE(ctx));
    return NULL;
  }
  Py_INCREF((PyObject *)ctx);
  return (ContextObject *)ctx;
}

static PyObject *context_new(PyTypeObject *type, PyObject *args,
                             PyObject *kwargs) {
  static char *kw[] = {"allow_unregistered_dialects", NULL};
  int allow = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p", kw, &allow))
    return NULL;
  ContextObject *c = context_alloc(type);
  if (c && allow)
    fzContextSetAllowUnregisteredDialects(c->ctx, true);
  return (PyObject *)c;
}

static PyObject *context_attach(PyObject *self, PyObject *fn) {
  ContextObject *c = (ContextObject *)self;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "the handler must be callable");
    return NULL;
  }
  if (PyList_Append(c->handlers, fn) < 0)
    return NULL;
  Py_INCREF(fn);
  return fn;
}

static PyObject *context_detach(PyObject *self, PyObject *fn) {
  ContextObject *c = (ContextObject *)self;
  for (Py_ssize_t i = PyList_Size(c->handlers) - 1; i >= 0; --i)
    if (PyList_GetItem(c->handlers, i) == fn)
      return PySequence_DelItem(c->handlers, i) < 0 ? NULL : Py_NewRef(Py_None);
  PyErr_SetString(PyExc_ValueError, "that handler is not attached");
  return NULL;
}

static PyObject *context_get_allow(PyObject *self, void *closure) {
  ContextObject *c = (ContextObject *)self;
  fzpyEnter(c);
  bool v = fzContextGetAllowUnregisteredDialects(c->ctx);
  if (fzpyFinish(c, true, NULL) < 0)
    return NULL;
  return PyBool_FromLong(v);
}

static int context_set_allow(PyObject *self, PyObject *v, void *closure) {
  ContextObject *c = (ContextObject *)self;
  int b = v ? PyObject_IsTrue(v) : 0;
  if (b < 0)
    return -1;
  fzpyEnter(c);
  fzContextSetAllowUnregisteredDialects(c->ctx, b);
  return fzpyFinish(c, true, NULL);
}

static PyMethodDef context_methods[] = {
    {"attach_diagnostic_handler", context_attach, METH_O,
     "attach_diagnostic_handler(fn) -> fn\n\nfn(diagnostic) sees every "
     "diagnostic of this context first (newest handler first); returning "
     "True claims it (an error it claims is not raised)."},
    {"detach_diagnostic_handler", context_detach, METH_O,
     "detach_diagnostic_handler(fn): removes a handler attached before."},
    {NULL},
};

static PyGetSetDef context_getset[] = {
    {"allow_unregistered_dialects", context_get_allow, context_set_allow,
     "whether ops of unregistered dialects parse and verify", NULL},
    {NULL},
};

static PyType_Slot context_slots[] = {
    {Py_tp_new, context_new},
    {Py_tp_dealloc, context_dealloc},
    {Py_tp_methods, context_methods},
    {Py_tp_getset, context_getset},
    {Py_tp_doc, "Context(*, allow_unregistered_dialects=False)\n\nOwns "
                "everything fuse makes (types, attributes, IR, compiled "
                "models); every dialect and pass is registered. Its "
                "diagnostics are raised as fuse.Error or handed to the "
                "handlers attached to it, never printed."},
    {0, NULL},
};

static PyType_Spec context_spec = {"fuse.Context", sizeof(ContextObject), 0,
                                   Py_TPFLAGS_DEFAULT, context_slots};

int fzpyInitContext(PyObject *m) {
  FzpyError = PyExc_RuntimeError;
  FzpyWarning = PyExc_RuntimeWarning;
  Py_INCREF(FzpyError);
  Py_INCREF(FzpyWarning);
  FzpyContextType = (PyTypeObject *)PyType_FromSpec(&context_spec);
  FzpyDiagnosticType = (PyTypeObject *)PyType_FromSpec(&diagnostic_spec);
  if (!FzpyContextType || !FzpyDiagnosticType)
    return -1;
  if (PyModule_AddObjectRef(m, "Context", (PyObject *)FzpyContextType) < 0 ||
      PyModule_AddObjectRef(m, "Diagnostic", (PyObject *)FzpyDiagnosticType) <
          0)
    return -1;
  return 0;
}
