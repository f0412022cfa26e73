/* python/src/passes.c - fuse.PassManager, and the lists of registered
 * passes and named pipelines.
 *
 * A PassManager is an FzPassManager of the Context it keeps alive,
 * built from the pipeline text fuse-opt's --pass-pipeline takes (the
 * same registry of passes, options and named pipelines:
 * fzRegisterAllPasses). run() holds the context's lock and releases the
 * GIL; it bumps the module's generation first, so every Operation,
 * Block, Region and Value obtained before it raises instead of reading
 * IR the pipeline may have erased. IR dumps (enable_ir_printing) are
 * collected as text instead of going to stderr.
 */
#include <string.h>

#include "fzpy.h"

PyTypeObject *FzpyPassManagerType;

typedef struct PassManagerObject {
  PyObject_HEAD
  ContextObject *ctx;
  FzPassManager *pm;
  FzpyText dumps; /* IR printing's output (FZPY_MALLOC) */
} PassManagerObject;

static void destroy_pm(void *pm) { fzPassManagerDestroy(pm); }

static void pm_dealloc(PyObject *self) {
  PassManagerObject *p = (PassManagerObject *)self;
  if (p->pm)
    fzpyDestroy(p->ctx, destroy_pm, p->pm);
  FZPY_FREE(p->dumps.data);
  Py_XDECREF((PyObject *)p->ctx);
  FZPY_TYPE_FREE(self);
}

static PassManagerObject *pm_create(PyTypeObject *type, PyObject *ctxArg,
                                    const char *anchor) {
  ContextObject *c = fzpyContextOrNew(ctxArg);
  if (!c)
    return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  PassManagerObject *p = (PassManagerObject *)alloc(type, 0);
  if (!p) {
    Py_DECREF((PyObject *)c);
    return NULL;
  }
  p->ctx = c;
  fzpyEnter(c);
  p->pm = fzPassManagerCreate(c->ctx, anchor);
  if (fzpyFinish(c, p->pm != NULL, NULL) < 0) {
    Py_DECREF((PyObject *)p);
    return NULL;
  }
  return p;
}

/* Appends the passes of text; 0 or -1 with fuse.Error. */
static int pm_add_text(PassManagerObject *p, const char *text, Py_ssize_t len) {
  fzpyEnter(p->ctx);
  bool ok = fzPassManagerParsePipeline(p->pm, (FzStringRef){text, (size_t)len});
  return fzpyFinish(p->ctx, ok, NULL);
}

static PyObject *pm_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"anchor", "context", NULL};
  const char *anchor = "builtin.module";
  PyObject *ctxArg = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|sO", kw, &anchor, &ctxArg))
    return NULL;
  return (PyObject *)pm_create(type, ctxArg, anchor);
}

static PyObject *pm_parse(PyObject *cls, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"pipeline", "context", NULL};
  const char *text;
  Py_ssize_t len;
  PyObject *ctxArg = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#|O", kw, &text, &len,
                                   &ctxArg))
    return NULL;
  /* Modules are what run() takes: `builtin.module(...)` adds its
   * contents, anything else nests (`func.func(cse)`), as in fuse-opt. */
  PassManagerObject *p =
      pm_create((PyTypeObject *)cls, ctxArg, "builtin.module");
  if (p && pm_add_text(p, text, len) < 0)
    Py_CLEAR(p);
  return (PyObject *)p;
}

static PyObject *pm_add(PyObject *self, PyObject *args) {
  const char *text;
  Py_ssize_t len;
  if (!PyArg_ParseTuple(args, "s#", &text, &len))
    return NULL;
  if (pm_add_text((PassManagerObject *)self, text, len) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *pm_run(PyObject *self, PyObject *arg) {
  PassManagerObject *p = (PassManagerObject *)self;
  if (!PyObject_TypeCheck(arg, FzpyModuleType)) {
    PyErr_Format(PyExc_TypeError, "run() takes a fuse.Module, not %R",
                 (PyObject *)Py_TYPE(arg));
    return NULL;
  }
  ModuleObject *m = (ModuleObject *)arg;
  if (m->ctx != p->ctx) {
    PyErr_SetString(PyExc_ValueError,
                    "the module and the pass manager belong to different "
                    "contexts");
    return NULL;
  }
  PyObject *remarks = PyList_New(0);
  if (!remarks)
    return NULL;
  bool ok;
  fzpyEnter(p->ctx);
  m->generation++;
  Py_BEGIN_ALLOW_THREADS
  ok = fzPassManagerRun(p->pm, m->op);
  Py_END_ALLOW_THREADS
  if (fzpyFinish(p->ctx, ok, remarks) < 0)
    Py_CLEAR(remarks);
  return remarks;
}

static PyObject *pm_str(PyObject *self) {
  PassManagerObject *p = (PassManagerObject *)self;
  FzpyText t = {0};
  fzpyEnter(p->ctx);
  fzPassManagerPrintPipeline(p->pm, fzpyTextAppend, &t);
  if (fzpyFinish(p->ctx, true, NULL) < 0) {
    FZPY_FREE(t.data);
    return NULL;
  }
  return fzpyTextTake(&t);
}

static PyObject *pm_repr(PyObject *self) {
  PyObject *s = pm_str(self);
  PyObject *r = s ? PyUnicode_FromFormat("PassManager.parse(%R)", s) : NULL;
  Py_XDECREF(s);
  return r;
}

static PyObject *pm_enable_verifier(PyObject *self, PyObject *args) {
  int enable = 1;
  if (!PyArg_ParseTuple(args, "|p", &enable))
    return NULL;
  PassManagerObject *p = (PassManagerObject *)self;
  fzpyEnter(p->ctx);
  fzPassManagerEnableVerifier(p->pm, enable);
  if (fzpyFinish(p->ctx, true, NULL) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *pm_enable_timing(PyObject *self, PyObject *args) {
  int enable = 1;
  if (!PyArg_ParseTuple(args, "|p", &enable))
    return NULL;
  PassManagerObject *p = (PassManagerObject *)self;
  fzpyEnter(p->ctx);
  fzPassManagerEnableTiming(p->pm, enable);
  if (fzpyFinish(p->ctx, true, NULL) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* Runs a Print function of the manager into a str. */
static PyObject *pm_print_with(PyObject *self,
                               void (*print)(const FzPassManager *,
                                             FzPrintCallback, void *)) {
  PassManagerObject *p = (PassManagerObject *)self;
  FzpyText t = {0};
  fzpyEnter(p->ctx);
  print(p->pm, fzpyTextAppend, &t);
  if (fzpyFinish(p->ctx, true, NULL) < 0) {
    FZPY_FREE(t.data);
    return NULL;
  }
  return fzpyTextTake(&t);
}

static PyObject *pm_timing(PyObject *self, PyObject *unused) {
  return pm_print_with(self, fzPassManagerPrintTiming);
}

static PyObject *pm_statistics(PyObject *self, PyObject *unused) {
  return pm_print_with(self, fzPassManagerPrintStatistics);
}

static PyObject *pm_enable_ir_printing(PyObject *self, PyObject *args,
                                       PyObject *kwargs) {
  static char *kw[] = {"before_all", "after_all",   "after_change",
                       "after_failure", "module_scope", "generic",
                       "debug_info", NULL};
  int before = 0, after = 1, change = 0, failure = 0, scope = 0, generic = 0,
      debug = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$ppppppp", kw, &before,
                                   &after, &change, &failure, &scope, &generic,
                                   &debug))
    return NULL;
  PassManagerObject *p = (PassManagerObject *)self;
  FzIRPrintingConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.beforeAll = before;
  cfg.afterAll = after;
  cfg.afterChange = change;
  cfg.afterFailure = failure;
  cfg.moduleScope = scope;
  cfg.printFlags = (generic ? FZ_PRINT_GENERIC : 0) |
                   (debug ? FZ_PRINT_DEBUGINFO : 0);
  cfg.out = fzpyTextAppend;
  cfg.outUserData = &p->dumps;
  fzpyEnter(p->ctx);
  bool ok = fzPassManagerEnableIRPrinting(p->pm, &cfg);
  if (fzpyFinish(p->ctx, ok, NULL) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* The IR dumps printed so far; clears them. */
static PyObject *pm_take_dumps(PyObject *self, PyObject *unused) {
  PassManagerObject *p = (PassManagerObject *)self;
  fzpyEnter(p->ctx);
  FzpyText t = p->dumps;
  memset(&p->dumps, 0, sizeof p->dumps);
  if (fzpyFinish(p->ctx, true, NULL) < 0) {
    FZPY_FREE(t.data);
    return NULL;
  }
  return fzpyTextTake(&t);
}

static PyObject *pm_context(PyObject *self, void *closure) {
  return Py_NewRef((PyObject *)((PassManagerObject *)self)->ctx);
}

static PyMethodDef pm_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))pm_parse,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "PassManager.parse(pipeline, context=None) -> PassManager\n\nA pass "
     "manager from fuse-opt's --pass-pipeline text, e.g. "
     "'builtin.module(canonicalize,cse,func.func(fuse{remarks=true}))'; "
     "errors point at the offending character."},
    {"add", pm_add, METH_VARARGS,
     "add(pipeline): appends the passes of more pipeline text"},
    {"run", pm_run, METH_O,
     "run(module) -> list of remarks\n\nRuns the pipeline on the module "
     "(in place). Raises fuse.Error after the first failing pass; returns "
     "the remarks (e.g. of fuse{remarks=true}) no handler claimed. "
     "Operations and values obtained from the module before are stale "
     "afterwards."},
    {"enable_verifier", pm_enable_verifier, METH_VARARGS,
     "enable_verifier(enable=True): verify after each pass (default on)"},
    {"enable_timing", pm_enable_timing, METH_VARARGS,
     "enable_timing(enable=True): time each pass (see timing())"},
    {"timing", pm_timing, METH_NOARGS,
     "timing() -> str: the table of fuse-opt --mlir-timing"},
    {"statistics", pm_statistics, METH_NOARGS,
     "statistics() -> str: every pass's statistics"},
    {"enable_ir_printing", (PyCFunction)(void (*)(void))pm_enable_ir_printing,
     METH_VARARGS | METH_KEYWORDS,
     "enable_ir_printing(*, before_all=False, after_all=True, "
     "after_change=False, after_failure=False, module_scope=False, "
     "generic=False, debug_info=False): collect IR dumps around passes "
     "(take them with take_ir_dumps())"},
    {"take_ir_dumps", pm_take_dumps, METH_NOARGS,
     "take_ir_dumps() -> str: the IR dumps collected so far (then cleared)"},
    {NULL},
};

static PyGetSetDef pm_getset[] = {
    {"context", pm_context, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyType_Slot pm_slots[] = {
    {Py_tp_new, pm_new},
    {Py_tp_dealloc, pm_dealloc},
    {Py_tp_str, pm_str},
    {Py_tp_repr, pm_repr},
    {Py_tp_methods, pm_methods},
    {Py_tp_getset, pm_getset},
    {Py_tp_doc, "PassManager(anchor='builtin.module', context=None)\n\nA "
                "pipeline of passes (PassManager.parse takes fuse-opt's "
                "--pass-pipeline text)."},
    {0, NULL},
};
static PyType_Spec pm_spec = {"fuse.PassManager", sizeof(PassManagerObject), 0,
                              Py_TPFLAGS_DEFAULT, pm_slots};

/*===--- What is registered -----------------------------------------------===*/

typedef struct ListState {
  PyObject *list;
} ListState;

static const char *option_kind(FzPassOptionKind k) {
  switch (k) {
  case FZ_PASS_OPTION_BOOL:
    return "bool";
  case FZ_PASS_OPTION_INT:
    return "int";
  case FZ_PASS_OPTION_FLOAT:
    return "float";
  default:
    return "str";
  }
}

static PyObject *str_or_none(const char *s) {
  return s ? PyUnicode_FromString(s) : Py_NewRef(Py_None);
}

static void add_pass(const FzPassDef *def, void *ud) {
  ListState *st = ud;
  if (!st->list)
    return;
  PyObject *opts = PyList_New(0);
  for (size_t i = 0; opts && i < def->numOptions; ++i) {
    const FzPassOptionDef *o = &def->options[i];
    PyObject *choices = Py_NewRef(Py_None);
    if (o->choices) {
      Py_DECREF(choices);
      choices = PyList_New(0);
      for (const char *const *c = o->choices; choices && *c; ++c) {
        PyObject *s = PyUnicode_FromString(*c);
        if (!s || PyList_Append(choices, s) < 0)
          Py_CLEAR(choices);
        Py_XDECREF(s);
      }
    }
    PyObject *d =
        choices ? Py_BuildValue("{s:s,s:s,s:N,s:N,s:O}", "name", o->name,
                                "kind", option_kind(o->kind), "default",
                                str_or_none(o->defaultValue), "description",
                                str_or_none(o->description), "choices", choices)
                : NULL;
    Py_XDECREF(choices);
    if (!d || PyList_Append(opts, d) < 0)
      Py_CLEAR(opts);
    Py_XDECREF((PyObject *)d);
  }
  PyObject *d = opts ? Py_BuildValue("{s:s,s:N,s:N,s:O}", "name", def->argument,
                                     "summary", str_or_none(def->summary),
                                     "anchor", str_or_none(def->anchor),
                                     "options", opts)
                     : NULL;
  Py_XDECREF(opts);
  if (!d || PyList_Append(st->list, d) < 0)
    Py_CLEAR(st->list);
  Py_XDECREF((PyObject *)d);
}

static void add_pipeline(const char *name, const char *summary,
                         const char *pipeline, void *ud) {
  ListState *st = ud;
  if (!st->list)
    return;
  PyObject *d = Py_BuildValue("{s:s,s:N,s:s}", "name", name, "summary",
                              str_or_none(summary), "pipeline", pipeline);
  if (!d || PyList_Append(st->list, d) < 0)
    Py_CLEAR(st->list);
  Py_XDECREF((PyObject *)d);
}

static PyObject *list_registered(PyObject *args, bool passes) {
  PyObject *ctxArg = NULL;
  if (!PyArg_ParseTuple(args, "|O", &ctxArg))
    return NULL;
  ContextObject *c = fzpyContextOrNew(ctxArg);
  if (!c)
    return NULL;
  ListState st = {PyList_New(0)};
  fzpyEnter(c);
  if (passes)
    fzContextForEachPass(c->ctx, add_pass, &st);
  else
    fzContextForEachPassPipeline(c->ctx, add_pipeline, &st);
  if (fzpyFinish(c, true, NULL) < 0)
    Py_CLEAR(st.list);
  Py_DECREF((PyObject *)c);
  return st.list;
}

PyObject *fzpyListPasses(PyObject *self, PyObject *args) {
  return list_registered(args, true);
}

PyObject *fzpyListPipelines(PyObject *self, PyObject *args) {
  return list_registered(args, false);
}

int fzpyInitPasses(PyObject *m) {
  FzpyPassManagerType = (PyTypeObject *)PyType_FromSpec(&pm_spec);
  if (!FzpyPassManagerType ||
      PyModule_AddObjectRef(m, "PassManager", (PyObject *)FzpyPassManagerType) <
          0)
    return -1;
  return 0;
}
