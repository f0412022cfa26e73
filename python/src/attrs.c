/* python/src/attrs.c - fuse.Type, fuse.Attribute and fuse.Location.
 *
 * Each wraps a uniqued, immortal object of its context (compared by
 * pointer: equal handles are equal objects, and hash alike) and keeps
 * the Context alive. Values convert to Python where there is an obvious
 * Python value (Attribute.value: int, float, bool, str, list, dict,
 * Type, a numpy array for dense elements).
 */
#include <string.h>

#include "fzpy.h"

PyTypeObject *FzpyTypeType;
PyTypeObject *FzpyAttributeType;
PyTypeObject *FzpyLocationType;

PyObject *fzpyHandleNew(PyTypeObject *type, ContextObject *ctx, void *ptr) {
  if (!ptr)
    Py_RETURN_NONE;
  HandleObject *h = PyObject_New(HandleObject, type);
  if (!h)
    return NULL;
  Py_INCREF((PyObject *)ctx);
  h->ctx = ctx;
  h->ptr = ptr;
  return (PyObject *)h;
}

PyObject *fzpyTypeNew(ContextObject *c, FzType *t) {
  return fzpyHandleNew(FzpyTypeType, c, t);
}
PyObject *fzpyAttrNew(ContextObject *c, FzAttr *a) {
  return fzpyHandleNew(FzpyAttributeType, c, a);
}
PyObject *fzpyLocNew(ContextObject *c, FzLoc *l) {
  return fzpyHandleNew(FzpyLocationType, c, l);
}

static void handle_dealloc(PyObject *self) {
  Py_XDECREF((PyObject *)((HandleObject *)self)->ctx);
  FZPY_TYPE_FREE(self);
}

Py_hash_t fzpyHashPointer(const void *p) {
  /* Rotated: the low bits of an aligned pointer are zero. */
  uintptr_t v = (uintptr_t)p;
  Py_hash_t h = (Py_hash_t)((v >> 4) | (v << (8 * sizeof v - 4)));
  return h == -1 ? -2 : h;
}

static Py_hash_t handle_hash(PyObject *self) {
  return fzpyHashPointer(((HandleObject *)self)->ptr);
}

static PyObject *handle_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
    Py_RETURN_NOTIMPLEMENTED;
  bool eq = ((HandleObject *)a)->ptr == ((HandleObject *)b)->ptr;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *context_of(PyObject *self, void *closure) {
  return Py_NewRef((PyObject *)((HandleObject *)self)->ctx);
}

/* The printed text of a type, attribute or location. */
enum { PRINT_TYPE, PRINT_ATTR, PRINT_LOC };
static PyObject *print_handle(PyObject *self, int what) {
  HandleObject *h = (HandleObject *)self;
  FzpyText t = {0};
  fzpyEnter(h->ctx);
  if (what == PRINT_TYPE)
    fzTypePrint(h->ptr, fzpyTextAppend, &t);
  else if (what == PRINT_ATTR)
    fzAttrPrint(h->ptr, fzpyTextAppend, &t);
  else
    fzLocPrint(h->ptr, fzpyTextAppend, &t);
  if (fzpyFinish(h->ctx, true, NULL) < 0) {
    FZPY_FREE(t.data);
    return NULL;
  }
  return fzpyTextTake(&t);
}

static PyObject *repr_handle(PyObject *self, const char *cls, int what) {
  PyObject *s = print_handle(self, what);
  if (!s)
    return NULL;
  PyObject *r = PyUnicode_FromFormat("%s(%U)", cls, s);
  Py_DECREF(s);
  return r;
}

/* Parses text with fzTypeParse or fzAttrParse in context (or a new one). */
static PyObject *parse_handle(PyObject *args, PyObject *kwargs, bool type) {
  static char *kw[] = {"text", "context", NULL};
  const char *text;
  Py_ssize_t len;
  PyObject *ctxArg = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#|O", kw, &text, &len,
                                   &ctxArg))
    return NULL;
  ContextObject *c = fzpyContextOrNew(ctxArg);
  if (!c)
    return NULL;
  fzpyEnter(c);
  FzStringRef s = {text, (size_t)len};
  void *p = type ? (void *)fzTypeParse(c->ctx, s) : (void *)fzAttrParse(c->ctx, s);
  PyObject *r = NULL;
  if (fzpyFinish(c, p != NULL, NULL) == 0)
    r = type ? fzpyTypeNew(c, p) : fzpyAttrNew(c, p);
  Py_DECREF((PyObject *)c);
  return r;
}

/*===--- fuse.Type ------------------------------------------------------===*/

static FzType *type_of(PyObject *self) { return ((HandleObject *)self)->ptr; }

static const char *type_kind_name(FzTypeKind k) {
  static const char *const names[] = {
      "integer", "index",  "f16",    "bf16",     "f32",   "f64",
      "none",    "tensor", "vector", "buffer", "function", "opaque"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static PyObject *type_str(PyObject *self) { return print_handle(self, PRINT_TYPE); }
static PyObject *type_repr(PyObject *self) {
  return repr_handle(self, "Type", PRINT_TYPE);
}

static PyObject *type_kind(PyObject *self, void *closure) {
  return PyUnicode_FromString(type_kind_name(fzTypeGetKind(type_of(self))));
}

static PyObject *type_shape(PyObject *self, void *closure) {
  FzType *t = type_of(self);
  if (!fzTypeIsShaped(t) || fzShapedTypeGetRank(t) == FZ_UNRANKED)
    Py_RETURN_NONE;
  size_t rank = fzShapedTypeGetRank(t);
  PyObject *tup = PyTuple_New((Py_ssize_t)rank);
  for (size_t i = 0; tup && i < rank; ++i) {
    int64_t d = fzShapedTypeGetDim(t, i);
    PyObject *v = d == FZ_DYNAMIC ? Py_NewRef(Py_None) : PyLong_FromLongLong(d);
    if (!v) {
      Py_CLEAR(tup);
      break;
    }
    PyTuple_SetItem(tup, (Py_ssize_t)i, v);
  }
  return tup;
}

static PyObject *type_rank(PyObject *self, void *closure) {
  FzType *t = type_of(self);
  if (!fzTypeIsShaped(t) || fzShapedTypeGetRank(t) == FZ_UNRANKED)
    Py_RETURN_NONE;
  return PyLong_FromSize_t(fzShapedTypeGetRank(t));
}

static PyObject *type_element(PyObject *self, void *closure) {
  FzType *t = type_of(self);
  if (!fzTypeIsShaped(t))
    Py_RETURN_NONE;
  return fzpyTypeNew(((HandleObject *)self)->ctx, fzShapedTypeGetElementType(t));
}

static PyObject *type_width(PyObject *self, void *closure) {
  unsigned w = fzTypeGetBitWidth(type_of(self));
  if (!w)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLong(w);
}

static PyObject *type_dtype(PyObject *self, void *closure) {
  FzType *t = type_of(self);
  FzpyDType d = fzpyDTypeOf(fzTypeIsShaped(t) ? fzShapedTypeGetElementType(t) : t);
  if (d == FZPY_NO_DTYPE)
    Py_RETURN_NONE;
  return PyUnicode_FromString(fzpyDTypeName(d));
}

static PyObject *type_list(PyObject *self, bool inputs) {
  FzType *t = type_of(self);
  if (fzTypeGetKind(t) != FZ_TYPE_FUNCTION)
    Py_RETURN_NONE;
  size_t n = inputs ? fzFunctionTypeGetNumInputs(t) : fzFunctionTypeGetNumResults(t);
  PyObject *tup = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; tup && i < n; ++i) {
    PyObject *v = fzpyTypeNew(((HandleObject *)self)->ctx,
                              inputs ? fzFunctionTypeGetInput(t, i)
                                     : fzFunctionTypeGetResult(t, i));
    if (!v) {
      Py_CLEAR(tup);
      break;
    }
    PyTuple_SetItem(tup, (Py_ssize_t)i, v);
  }
  return tup;
}
static PyObject *type_inputs(PyObject *self, void *c) { return type_list(self, true); }
static PyObject *type_results(PyObject *self, void *c) { return type_list(self, false); }

static PyObject *type_parse(PyObject *cls, PyObject *args, PyObject *kwargs) {
  return parse_handle(args, kwargs, true);
}

static PyGetSetDef type_getset[] = {
    {"kind", type_kind, NULL, "'f32', 'integer', 'tensor', 'buffer', 'function', ...", NULL},
    {"shape", type_shape, NULL, "dims of a ranked shaped type (None for a dynamic dim); else None", NULL},
    {"rank", type_rank, NULL, "rank of a ranked shaped type; else None", NULL},
    {"element_type", type_element, NULL, "element type of a shaped type; else None", NULL},
    {"width", type_width, NULL, "bit width of an integer or float type; else None", NULL},
    {"dtype", type_dtype, NULL, "the numpy name of the (element) type: 'float32', 'int64', 'bool', ...; else None", NULL},
    {"inputs", type_inputs, NULL, "input types of a function type; else None", NULL},
    {"results", type_results, NULL, "result types of a function type; else None", NULL},
    {"context", context_of, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyMethodDef type_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))type_parse,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Type.parse(text, context=None): a type from its text"},
    {NULL},
};

static PyType_Slot type_slots[] = {
    {Py_tp_dealloc, handle_dealloc},
    {Py_tp_str, type_str},
    {Py_tp_repr, type_repr},
    {Py_tp_hash, handle_hash},
    {Py_tp_richcompare, handle_richcompare},
    {Py_tp_getset, type_getset},
    {Py_tp_methods, type_methods},
    {Py_tp_doc, "A type of fuse's IR (uniqued: == compares identity)."},
    {0, NULL},
};
static PyType_Spec type_spec = {"fuse.Type", sizeof(HandleObject), 0,
                                Py_TPFLAGS_DEFAULT, type_slots};

/*===--- fuse.Attribute ---------------------------------------------------===*/

static FzAttr *attr_of(PyObject *self) { return ((HandleObject *)self)->ptr; }

static const char *attr_kind_name(FzAttrKind k) {
  static const char *const names[] = {
      "integer", "float", "bool",  "unit",        "string",
      "type",    "array", "dict",  "symbol_ref",  "dense",
      "dense_array", "opaque", "location"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static PyObject *attr_str(PyObject *self) { return print_handle(self, PRINT_ATTR); }
static PyObject *attr_repr(PyObject *self) {
  return repr_handle(self, "Attribute", PRINT_ATTR);
}

static PyObject *attr_kind(PyObject *self, void *closure) {
  return PyUnicode_FromString(attr_kind_name(fzAttrGetKind(attr_of(self))));
}

static PyObject *attr_type(PyObject *self, void *closure) {
  return fzpyTypeNew(((HandleObject *)self)->ctx, fzAttrGetType(attr_of(self)));
}

static PyObject *str_ref(FzStringRef s) {
  return PyUnicode_DecodeUTF8(s.data ? s.data : "", (Py_ssize_t)s.length,
                              "replace");
}

/* The Python value of a (GIL held; the context's lock is taken for the
 * dense conversion, which allocates). */
static PyObject *attr_value_of(ContextObject *c, FzAttr *a) {
  switch (fzAttrGetKind(a)) {
  case FZ_ATTR_INTEGER:
    return PyLong_FromLongLong(fzIntegerAttrGetValue(a));
  case FZ_ATTR_FLOAT:
    return PyFloat_FromDouble(fzFloatAttrGetValue(a));
  case FZ_ATTR_BOOL:
    return PyBool_FromLong(fzBoolAttrGetValue(a));
  case FZ_ATTR_UNIT:
    Py_RETURN_TRUE;
  case FZ_ATTR_STRING:
    return str_ref(fzStringAttrGetValue(a));
  case FZ_ATTR_TYPE:
    return fzpyTypeNew(c, fzTypeAttrGetValue(a));
  case FZ_ATTR_LOC:
    return fzpyLocNew(c, fzLocAttrGetValue(a));
  case FZ_ATTR_ARRAY: {
    size_t n = fzArrayAttrGetSize(a);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; ++i) {
      PyObject *v = attr_value_of(c, fzArrayAttrGetElement(a, i));
      if (!v) {
        Py_CLEAR(l);
        break;
      }
      PyList_SetItem(l, (Py_ssize_t)i, v);
    }
    return l;
  }
  case FZ_ATTR_DICT: {
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < fzDictAttrGetSize(a); ++i) {
      FzNamedAttr e = fzDictAttrGetEntry(a, i);
      PyObject *k = str_ref(fzIdentGetString(e.name));
      PyObject *v = k ? attr_value_of(c, e.value) : NULL;
      if (!v || PyDict_SetItem(d, k, v) < 0)
        Py_CLEAR(d);
      Py_XDECREF(k);
      Py_XDECREF(v);
    }
    return d;
  }
  case FZ_ATTR_SYMBOL_REF: {
    PyObject *root = str_ref(fzSymbolRefAttrGetRoot(a));
    PyObject *s = root ? PyUnicode_FromFormat("@%U", root) : NULL;
    Py_XDECREF(root);
    for (size_t i = 0; s && i < fzSymbolRefAttrGetNumNested(a); ++i) {
      PyObject *n = str_ref(fzSymbolRefAttrGetNested(a, i));
      PyObject *t = n ? PyUnicode_FromFormat("%U::@%U", s, n) : NULL;
      Py_XDECREF(n);
      Py_DECREF(s);
      s = t;
    }
    return s;
  }
  case FZ_ATTR_DENSE_ARRAY: {
    size_t n = fzDenseArrayAttrGetSize(a);
    bool isFloat = fzTypeIsFloat(fzDenseArrayAttrGetElementType(a));
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; ++i) {
      PyObject *v = isFloat ? PyFloat_FromDouble(fzDenseArrayAttrGetFloat(a, i))
                            : PyLong_FromLongLong(fzDenseArrayAttrGetInt(a, i));
      if (!v) {
        Py_CLEAR(l);
        break;
      }
      PyList_SetItem(l, (Py_ssize_t)i, v);
    }
    return l;
  }
  case FZ_ATTR_DENSE: {
    fzpyEnter(c);
    FzTensor *t = fzTensorFromDenseAttr(c->ctx, a);
    if (fzpyFinish(c, t != NULL, NULL) < 0)
      return NULL;
    PyObject *arr = fzpyTensorToNumpy(t);
    fzpyEnter(c);
    fzTensorDestroy(t);
    if (fzpyFinish(c, true, NULL) < 0) {
      Py_XDECREF(arr);
      return NULL;
    }
    return arr;
  }
  default: { /* opaque: its text */
    PyObject *h = fzpyAttrNew(c, a);
    PyObject *text = h ? print_handle(h, PRINT_ATTR) : NULL;
    Py_XDECREF((PyObject *)h);
    return text;
  }
  }
}

static PyObject *attr_value(PyObject *self, void *closure) {
  HandleObject *h = (HandleObject *)self;
  return attr_value_of(h->ctx, h->ptr);
}

static PyObject *attr_parse(PyObject *cls, PyObject *args, PyObject *kwargs) {
  return parse_handle(args, kwargs, false);
}

static PyGetSetDef attr_getset[] = {
    {"kind", attr_kind, NULL, "'integer', 'float', 'string', 'array', 'dict', 'dense', ...", NULL},
    {"type", attr_type, NULL, "the attribute's type (integer, float, dense), else None", NULL},
    {"value", attr_value, NULL, "the value as Python (int, float, bool, str, list, dict, Type, Location; dense: a numpy array)", NULL},
    {"context", context_of, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyMethodDef attr_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))attr_parse,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Attribute.parse(text, context=None): an attribute from its text"},
    {NULL},
};

static PyType_Slot attr_slots[] = {
    {Py_tp_dealloc, handle_dealloc},
    {Py_tp_str, attr_str},
    {Py_tp_repr, attr_repr},
    {Py_tp_hash, handle_hash},
    {Py_tp_richcompare, handle_richcompare},
    {Py_tp_getset, attr_getset},
    {Py_tp_methods, attr_methods},
    {Py_tp_doc, "An attribute of fuse's IR (uniqued: == compares identity)."},
    {0, NULL},
};
static PyType_Spec attr_spec = {"fuse.Attribute", sizeof(HandleObject), 0,
                                Py_TPFLAGS_DEFAULT, attr_slots};

/*===--- fuse.Location ----------------------------------------------------===*/

static FzLoc *loc_of(PyObject *self) { return ((HandleObject *)self)->ptr; }

static PyObject *loc_str(PyObject *self) { return print_handle(self, PRINT_LOC); }
static PyObject *loc_repr(PyObject *self) {
  return repr_handle(self, "Location", PRINT_LOC);
}

static PyObject *loc_kind(PyObject *self, void *closure) {
  static const char *const names[] = {"unknown", "file", "name", "fused",
                                      "callsite"};
  FzLocKind k = fzLocGetKind(loc_of(self));
  return PyUnicode_FromString((unsigned)k < 5 ? names[k] : "?");
}

/* The first file:line:col inside (what diagnostics point at). */
static PyObject *loc_file(PyObject *self, void *closure) {
  FzLoc *f = fzLocFindFileLineCol(loc_of(self));
  if (!f)
    Py_RETURN_NONE;
  return str_ref(fzLocGetFile(f));
}
static PyObject *loc_line(PyObject *self, void *closure) {
  FzLoc *f = fzLocFindFileLineCol(loc_of(self));
  if (!f)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLong(fzLocGetLine(f));
}
static PyObject *loc_column(PyObject *self, void *closure) {
  FzLoc *f = fzLocFindFileLineCol(loc_of(self));
  if (!f)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLong(fzLocGetColumn(f));
}

static PyObject *loc_name(PyObject *self, void *closure) {
  FzLoc *l = loc_of(self);
  if (fzLocGetKind(l) != FZ_LOC_NAME)
    Py_RETURN_NONE;
  return str_ref(fzLocGetName(l));
}

static PyObject *loc_children(PyObject *self, void *closure) {
  FzLoc *l = loc_of(self);
  ContextObject *c = ((HandleObject *)self)->ctx;
  FzLocKind k = fzLocGetKind(l);
  size_t n = k == FZ_LOC_FUSED ? fzLocGetNumFused(l)
             : k == FZ_LOC_NAME  ? 1
             : k == FZ_LOC_CALLSITE ? 2
                                    : 0;
  PyObject *tup = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; tup && i < n; ++i) {
    FzLoc *ch = k == FZ_LOC_FUSED ? fzLocGetFused(l, i)
                : k == FZ_LOC_NAME ? fzLocGetChild(l)
                : i == 0           ? fzLocGetCallee(l)
                                   : fzLocGetCaller(l);
    PyObject *v = fzpyLocNew(c, ch);
    if (!v) {
      Py_CLEAR(tup);
      break;
    }
    PyTuple_SetItem(tup, (Py_ssize_t)i, v);
  }
  return tup;
}

static PyObject *loc_position(PyObject *self, void *closure) {
  HandleObject *h = (HandleObject *)self;
  FzpyText t = {0};
  fzpyEnter(h->ctx);
  bool any = fzLocPrintPosition(h->ptr, fzpyTextAppend, &t);
  if (fzpyFinish(h->ctx, true, NULL) < 0 || !any) {
    FZPY_FREE(t.data);
    if (PyErr_Occurred())
      return NULL;
    Py_RETURN_NONE;
  }
  return fzpyTextTake(&t);
}

static PyGetSetDef loc_getset[] = {
    {"kind", loc_kind, NULL, "'unknown', 'file', 'name', 'fused' or 'callsite'", NULL},
    {"file", loc_file, NULL, "file of the first file:line:col location inside, else None", NULL},
    {"line", loc_line, NULL, "its line (0 for ONNX nodes), else None", NULL},
    {"column", loc_column, NULL, "its column, else None", NULL},
    {"name", loc_name, NULL, "the name of a name location (an ONNX node's), else None", NULL},
    {"children", loc_children, NULL, "the locations inside: fused ones, a name's child, a call site's callee and caller", NULL},
    {"position", loc_position, NULL, "what diagnostics show: 'file:3:7', 'model.onnx: node', or None", NULL},
    {"context", context_of, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyType_Slot loc_slots[] = {
    {Py_tp_dealloc, handle_dealloc},
    {Py_tp_str, loc_str},
    {Py_tp_repr, loc_repr},
    {Py_tp_hash, handle_hash},
    {Py_tp_richcompare, handle_richcompare},
    {Py_tp_getset, loc_getset},
    {Py_tp_doc, "A source location (uniqued: == compares identity)."},
    {0, NULL},
};
static PyType_Spec loc_spec = {"fuse.Location", sizeof(HandleObject), 0,
                               Py_TPFLAGS_DEFAULT, loc_slots};

int fzpyInitAttrs(PyObject *m) {
  FzpyTypeType = (PyTypeObject *)PyType_FromSpec(&type_spec);
  FzpyAttributeType = (PyTypeObject *)PyType_FromSpec(&attr_spec);
  FzpyLocationType = (PyTypeObject *)PyType_FromSpec(&loc_spec);
  if (!FzpyTypeType || !FzpyAttributeType || !FzpyLocationType)
    return -1;
  if (PyModule_AddObjectRef(m, "Type", (PyObject *)FzpyTypeType) < 0 ||
      PyModule_AddObjectRef(m, "Attribute", (PyObject *)FzpyAttributeType) < 0 ||
      PyModule_AddObjectRef(m, "Location", (PyObject *)FzpyLocationType) < 0)
    return -1;
  return 0;
}
