/* python/src/ir.c - fuse.Module and the handles that walk its IR:
 * fuse.Operation, fuse.Block, fuse.Region, fuse.Value.
 *
 * A Module owns one detached builtin.module (parsed from text, read from
 * a file, imported from ONNX, or cloned) and keeps its Context alive.
 * The other handles point into a module's IR and keep the Module alive.
 * The IR they show is read-only from Python; it changes only when a
 * pass manager runs on the module, which bumps the module's generation:
 * a handle made before then raises fuse.Error on use instead of reading
 * IR a pass may have erased (walk the module again). Every access holds
 * the context's lock, so a pass running on another thread is waited for.
 */
#include <string.h>

#include "fzpy.h"

PyTypeObject *FzpyModuleType;
PyTypeObject *FzpyOperationType;
PyTypeObject *FzpyBlockType;
PyTypeObject *FzpyRegionType;
PyTypeObject *FzpyValueType;

/*===--- Shared helpers ---------------------------------------------------===*/

static PyObject *str_ref(FzStringRef s) {
  return PyUnicode_DecodeUTF8(s.data ? s.data : "", (Py_ssize_t)s.length,
                              "replace");
}

static bool is_func(FzOp *op) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == 9 && memcmp(n.data, "func.func", 9) == 0;
}

static bool has_body(FzOp *op) {
  return fzOpGetNumRegions(op) > 0 &&
         fzRegionGetFirstBlock(fzOpGetRegion(op, 0)) != NULL;
}

FzOp *fzpyFindEntry(FzOp *module, const char *entry, char *why,
                    size_t whySize) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  if (entry) {
    FzOp *f = fzSymbolTableLookupIn(module, fzStringRefFromCString(entry));
    if (!f || !is_func(f) || !has_body(f)) {
      snprintf(why, whySize, "the module has no function @%s with a body",
               entry);
      return NULL;
    }
    return f;
  }
  FzOp *main = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (main && is_func(main) && has_body(main))
    return main;
  FzOp *only = NULL;
  size_t count = 0;
  for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op;
       op = fzOpGetNextInBlock(op))
    if (is_func(op) && has_body(op)) {
      only = op;
      count++;
    }
  if (count == 1)
    return only;
  snprintf(why, whySize, "%s; choose one with entry=NAME",
           count ? "the module has several functions and no @main"
                 : "the module has no function with a body");
  return NULL;
}

/*===--- fuse.Module --------------------------------------------------------===*/

static void destroy_op(void *op) { fzOpDestroy(op); }

ModuleObject *fzpyModuleNew(ContextObject *ctx, FzOp *op) {
  ModuleObject *m = PyObject_New(ModuleObject, FzpyModuleType);
  if (!m) {
    fzpyDestroy(ctx, destroy_op, op);
    return NULL;
  }
  Py_INCREF((PyObject *)ctx);
  m->ctx = ctx;
  m->op = op;
  m->generation = 0;
  return m;
}

static void module_dealloc(PyObject *self) {
  ModuleObject *m = (ModuleObject *)self;
  if (m->op)
    fzpyDestroy(m->ctx, destroy_op, m->op);
  Py_XDECREF((PyObject *)m->ctx);
  FZPY_TYPE_FREE(self);
}

int fzpyOnnxOptions(PyObject *shapes, FzOnnxImportOptions *o,
                    FzOnnxInputShape **storage, int64_t **dims);

/* The source of a parse or import: text/bytes/path, kept alive while the
 * GIL is released. */
static PyObject *module_parse(PyObject *cls, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"text", "context", "name", NULL};
  PyObject *text, *ctxArg = NULL;
  const char *name = "<string>";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Os", kw, &text, &ctxArg,
                                   &name))
    return NULL;
  const char *data;
  Py_ssize_t len;
  if (PyUnicode_Check(text)) {
    if (!(data = PyUnicode_AsUTF8AndSize(text, &len)))
      return NULL;
  } else if (PyBytes_Check(text)) {
    if (PyBytes_AsStringAndSize(text, (char **)&data, &len) < 0)
      return NULL;
  } else {
    PyErr_Format(PyExc_TypeError, "Module.parse takes str or bytes, not %R",
                 (PyObject *)Py_TYPE(text));
    return NULL;
  }
  ContextObject *c = fzpyContextOrNew(ctxArg);
  if (!c)
    return NULL;
  FzOp *op;
  fzpyEnter(c);
  Py_BEGIN_ALLOW_THREADS
  op = fzParseSource(c->ctx, (FzStringRef){data, (size_t)len},
                     fzStringRefFromCString(name), 0);
  Py_END_ALLOW_THREADS
  PyObject *r = NULL;
  if (fzpyFinish(c, op != NULL, NULL) == 0)
    r = (PyObject *)fzpyModuleNew(c, op);
  Py_DECREF((PyObject *)c);
  return r;
}

/* Module.read(path) and Module.from_onnx(path or bytes): .onnx (or
 * bytes) through the ONNX importer, anything else through the parser. */
static PyObject *module_load(PyObject *args, PyObject *kwargs, bool onnx) {
  static char *kw[] = {"source", "context", "input_shapes", "name", NULL};
  PyObject *src, *ctxArg = NULL, *shapes = NULL;
  const char *name = "model.onnx";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOs", kw, &src, &ctxArg,
                                   &shapes, &name))
    return NULL;
  PyObject *pathObj = NULL;
  const char *bytes = NULL;
  Py_ssize_t len = 0;
  if (PyBytes_Check(src) || PyByteArray_Check(src)) {
    if (!onnx) {
      PyErr_SetString(PyExc_TypeError, "Module.read takes a path; use "
                                       "Module.parse or Module.from_onnx for "
                                       "contents");
      return NULL;
    }
    Py_INCREF(src);
    pathObj = src;
    if (PyBytes_Check(src))
      PyBytes_AsStringAndSize(src, (char **)&bytes, &len);
    else {
      bytes = PyByteArray_AsString(src);
      len = PyByteArray_Size(src);
    }
  } else if (!PyUnicode_FSConverter(src, &pathObj)) {
    return NULL;
  }
  const char *path = bytes ? NULL : PyBytes_AsString(pathObj);
  FzOnnxImportOptions o;
  FzOnnxInputShape *storage = NULL;
  int64_t *dims = NULL;
  if (fzpyOnnxOptions(shapes, &o, &storage, &dims) < 0) {
    Py_DECREF(pathObj);
    return NULL;
  }
  ContextObject *c = fzpyContextOrNew(ctxArg);
  if (!c) {
    Py_DECREF(pathObj);
    PyMem_Free(storage);
    PyMem_Free(dims);
    return NULL;
  }
  bool asOnnx = bytes || onnx || fzOnnxIsModelPath(path);
  FzOp *op;
  fzpyEnter(c);
  Py_BEGIN_ALLOW_THREADS
  if (bytes)
    op = fzImportOnnxBufferWithOptions(c->ctx, bytes, (size_t)len, name, NULL,
                                       &o);
  else if (asOnnx)
    op = fzImportOnnxFileWithOptions(c->ctx, path, &o);
  else
    op = fzParseFile(c->ctx, path);
  Py_END_ALLOW_THREADS
  PyObject *r = NULL;
  if (fzpyFinish(c, op != NULL, NULL) == 0)
    r = (PyObject *)fzpyModuleNew(c, op);
  Py_DECREF((PyObject *)c);
  Py_DECREF(pathObj);
  PyMem_Free(storage);
  PyMem_Free(dims);
  return r;
}

static PyObject *module_read(PyObject *cls, PyObject *args, PyObject *kw) {
  return module_load(args, kw, false);
}
static PyObject *module_from_onnx(PyObject *cls, PyObject *args, PyObject *kw) {
  return module_load(args, kw, true);
}

static PyObject *print_op(ContextObject *c, FzOp *op, unsigned flags) {
  FzpyText t = {0};
  fzOpPrint(op, flags, fzpyTextAppend, &t);
  return fzpyTextTake(&t);
}

static unsigned print_flags(PyObject *args, PyObject *kwargs, bool *ok) {
  static char *kw[] = {"generic", "debug_info", NULL};
  int generic = 0, debug = 0;
  *ok = PyArg_ParseTupleAndKeywords(args, kwargs, "|$pp", kw, &generic, &debug);
  return (generic ? FZ_PRINT_GENERIC : 0) | (debug ? FZ_PRINT_DEBUGINFO : 0);
}

static PyObject *module_print(PyObject *self, PyObject *args, PyObject *kwargs) {
  ModuleObject *m = (ModuleObject *)self;
  bool ok;
  unsigned flags = print_flags(args, kwargs, &ok);
  if (!ok)
    return NULL;
  fzpyEnter(m->ctx);
  PyObject *s = print_op(m->ctx, m->op, flags);
  if (fzpyFinish(m->ctx, true, NULL) < 0)
    Py_CLEAR(s);
  return s;
}

static PyObject *module_str(PyObject *self) {
  PyObject *args = PyTuple_New(0);
  PyObject *r = args ? module_print(self, args, NULL) : NULL;
  Py_XDECREF(args);
  return r;
}

static PyObject *module_verify(PyObject *self, PyObject *unused) {
  ModuleObject *m = (ModuleObject *)self;
  fzpyEnter(m->ctx);
  bool ok = fzOpVerify(m->op);
  if (fzpyFinish(m->ctx, ok, NULL) < 0)
    return NULL;
  Py_RETURN_TRUE;
}

static PyObject *module_clone(PyObject *self, PyObject *unused) {
  ModuleObject *m = (ModuleObject *)self;
  fzpyEnter(m->ctx);
  FzOp *op = fzOpClone(m->op, NULL);
  if (fzpyFinish(m->ctx, op != NULL, NULL) < 0)
    return NULL;
  return (PyObject *)fzpyModuleNew(m->ctx, op);
}

static PyObject *module_operation(PyObject *self, void *closure) {
  ModuleObject *m = (ModuleObject *)self;
  return fzpyIRNew(FzpyOperationType, m, m->op);
}

static PyObject *module_body(PyObject *self, void *closure) {
  ModuleObject *m = (ModuleObject *)self;
  fzpyEnter(m->ctx);
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(m->op, 0));
  if (fzpyFinish(m->ctx, true, NULL) < 0)
    return NULL;
  return fzpyIRNew(FzpyBlockType, m, b);
}

static PyObject *module_functions(PyObject *self, void *closure) {
  ModuleObject *m = (ModuleObject *)self;
  PyObject *l = PyList_New(0);
  fzpyEnter(m->ctx);
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(m->op, 0));
  for (FzOp *op = b ? fzBlockGetFirstOp(b) : NULL; l && op;
       op = fzOpGetNextInBlock(op)) {
    if (!is_func(op))
      continue;
    PyObject *o = fzpyIRNew(FzpyOperationType, m, op);
    if (!o || PyList_Append(l, o) < 0)
      Py_CLEAR(l);
    Py_XDECREF((PyObject *)o);
  }
  if (fzpyFinish(m->ctx, true, NULL) < 0)
    Py_CLEAR(l);
  return l;
}

static PyObject *module_context(PyObject *self, void *closure) {
  return Py_NewRef((PyObject *)((ModuleObject *)self)->ctx);
}

static PyMethodDef module_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))module_parse,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Module.parse(text, context=None, name='<string>') -> Module\n\nParses "
     ".fuse text (custom or generic form; MLIR's generic syntax). Raises "
     "fuse.Error with every error found. `name` is the file name of "
     "locations and diagnostics."},
    {"read", (PyCFunction)(void (*)(void))module_read,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Module.read(path, context=None, input_shapes=None) -> Module\n\nA "
     ".fuse/.mlir file parsed, or a .onnx model imported."},
    {"from_onnx", (PyCFunction)(void (*)(void))module_from_onnx,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Module.from_onnx(model, context=None, input_shapes=None, "
     "name='model.onnx') -> Module\n\nImports an ONNX model: a path or the "
     "model's bytes. input_shapes: {input name: shape} or [shape, ...] "
     "giving the symbolic dims of inputs."},
    {"print", (PyCFunction)(void (*)(void))module_print,
     METH_VARARGS | METH_KEYWORDS,
     "print(*, generic=False, debug_info=False) -> str\n\nThe module's "
     "text: the custom form, or MLIR's generic form; debug_info adds "
     "loc(...)."},
    {"verify", module_verify, METH_NOARGS,
     "verify() -> True\n\nRuns the verifier; raises fuse.Error with every "
     "error found."},
    {"clone", module_clone, METH_NOARGS, "clone() -> Module (a deep copy)"},
    {NULL},
};

static PyGetSetDef module_getset[] = {
    {"operation", module_operation, NULL, "the builtin.module operation", NULL},
    {"body", module_body, NULL, "the module's block", NULL},
    {"functions", module_functions, NULL, "the func.func operations of the body", NULL},
    {"context", module_context, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyType_Slot module_slots[] = {
    {Py_tp_dealloc, module_dealloc},
    {Py_tp_str, module_str},
    {Py_tp_methods, module_methods},
    {Py_tp_getset, module_getset},
    {Py_tp_doc, "A builtin.module of fuse's IR (Module.parse, Module.read, "
                "Module.from_onnx). Keeps its Context alive."},
    {0, NULL},
};
static PyType_Spec module_spec = {"fuse.Module", sizeof(ModuleObject), 0,
                                  Py_TPFLAGS_DEFAULT, module_slots};

/*===--- Handles into the IR ------------------------------------------------===*/

PyObject *fzpyIRNew(PyTypeObject *type, ModuleObject *m, void *ptr) {
  if (!ptr)
    Py_RETURN_NONE;
  IRObject *o = PyObject_New(IRObject, type);
  if (!o)
    return NULL;
  Py_INCREF((PyObject *)m);
  o->module = m;
  o->generation = m->generation;
  o->ptr = ptr;
  return (PyObject *)o;
}

static void ir_dealloc(PyObject *self) {
  Py_XDECREF((PyObject *)((IRObject *)self)->module);
  FZPY_TYPE_FREE(self);
}

static Py_hash_t ir_hash(PyObject *self) {
  return fzpyHashPointer(((IRObject *)self)->ptr);
}

static PyObject *ir_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
    Py_RETURN_NOTIMPLEMENTED;
  bool eq = ((IRObject *)a)->ptr == ((IRObject *)b)->ptr;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* Takes the lock and checks the handle is current: the pointer, or NULL
 * (lock released, fuse.Error raised). */
static void *ir_enter(PyObject *self) {
  IRObject *o = (IRObject *)self;
  fzpyEnter(o->module->ctx);
  if (o->generation == o->module->generation)
    return o->ptr;
  fzpyFinish(o->module->ctx, true, NULL);
  fzpyRaise("this %s is stale: a pass manager ran on its module since it "
            "was obtained (walk the module again)",
            Py_TYPE(self) == FzpyOperationType ? "operation"
            : Py_TYPE(self) == FzpyBlockType   ? "block"
            : Py_TYPE(self) == FzpyRegionType  ? "region"
                                               : "value");
  return NULL;
}

/* Releases the lock; r, or NULL when dispatching failed. */
static PyObject *ir_leave(PyObject *self, PyObject *r, bool ok) {
  if (fzpyFinish(((IRObject *)self)->module->ctx, ok, NULL) < 0)
    Py_CLEAR(r);
  return r;
}

#define IR_MODULE(self) (((IRObject *)(self))->module)
#define IR_CTX(self) (((IRObject *)(self))->module->ctx)

/* A tuple of n handles of `type`, the i-th from get(ptr, i). */
static PyObject *ir_tuple(PyObject *self, PyTypeObject *type, size_t n,
                          void *(*get)(void *, size_t), void *ptr) {
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; ++i) {
    PyObject *o = fzpyIRNew(type, IR_MODULE(self), get(ptr, i));
    if (!o) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SetItem(t, (Py_ssize_t)i, o);
  }
  return t;
}

static void *get_operand(void *op, size_t i) { return fzOpGetOperand(op, i); }
static void *get_result(void *op, size_t i) { return fzOpGetResult(op, i); }
static void *get_region(void *op, size_t i) { return fzOpGetRegion(op, i); }
static void *get_argument(void *b, size_t i) { return fzBlockGetArgument(b, i); }

/*===--- fuse.Operation -----------------------------------------------------===*/

static PyObject *op_name(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self, str_ref(fzIdentGetString(fzOpGetName(op))), true);
}

static PyObject *op_location(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self, fzpyLocNew(IR_CTX(self), fzOpGetLoc(op)), true);
}

static PyObject *op_operands(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self,
                  ir_tuple(self, FzpyValueType, fzOpGetNumOperands(op),
                           get_operand, op),
                  true);
}

static PyObject *op_results(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self,
                  ir_tuple(self, FzpyValueType, fzOpGetNumResults(op),
                           get_result, op),
                  true);
}

static PyObject *op_result(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  size_t n = fzOpGetNumResults(op);
  PyObject *r = n == 1 ? fzpyIRNew(FzpyValueType, IR_MODULE(self),
                                   fzOpGetResult(op, 0))
                       : NULL;
  r = ir_leave(self, r, true);
  if (n != 1 && !PyErr_Occurred())
    PyErr_Format(PyExc_ValueError, "the operation has %zu results, not one "
                                   "(use .results)", n);
  return r;
}

static PyObject *op_regions(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self,
                  ir_tuple(self, FzpyRegionType, fzOpGetNumRegions(op),
                           get_region, op),
                  true);
}

/* Properties and discardable attributes, one dict. */
static PyObject *op_attributes(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  PyObject *d = PyDict_New();
  FzAttr *dicts[2] = {fzOpGetPropDict(op), fzOpGetAttrDict(op)};
  for (int k = 0; d && k < 2; ++k)
    for (size_t i = 0; d && dicts[k] && i < fzDictAttrGetSize(dicts[k]); ++i) {
      FzNamedAttr e = fzDictAttrGetEntry(dicts[k], i);
      PyObject *key = str_ref(fzIdentGetString(e.name));
      PyObject *v = key ? fzpyAttrNew(IR_CTX(self), e.value) : NULL;
      if (!v || PyDict_SetItem(d, key, v) < 0)
        Py_CLEAR(d);
      Py_XDECREF(key);
      Py_XDECREF(v);
    }
  return ir_leave(self, d, true);
}

static PyObject *op_parent(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self,
                  fzpyIRNew(FzpyOperationType, IR_MODULE(self),
                            fzOpGetParentOp(op)),
                  true);
}

static PyObject *op_block(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self,
                  fzpyIRNew(FzpyBlockType, IR_MODULE(self), fzOpGetBlock(op)),
                  true);
}

static PyObject *op_registered(PyObject *self, void *closure) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  return ir_leave(self, PyBool_FromLong(fzOpGetDef(op) != NULL), true);
}

static PyObject *ir_module(PyObject *self, void *closure) {
  return Py_NewRef((PyObject *)IR_MODULE(self));
}

static PyObject *ir_context(PyObject *self, void *closure) {
  return Py_NewRef((PyObject *)IR_CTX(self));
}

static PyObject *op_print(PyObject *self, PyObject *args, PyObject *kwargs) {
  bool ok;
  unsigned flags = print_flags(args, kwargs, &ok);
  if (!ok)
    return NULL;
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  /* A nested op prints with the value names of its function's dump. */
  if (fzOpGetParentOp(op))
    flags |= FZ_PRINT_LOCAL_SCOPE;
  return ir_leave(self, print_op(IR_CTX(self), op, flags), true);
}

static PyObject *op_str(PyObject *self) {
  PyObject *args = PyTuple_New(0);
  PyObject *r = args ? op_print(self, args, NULL) : NULL;
  Py_XDECREF(args);
  return r;
}

static PyObject *op_repr(PyObject *self) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  PyObject *name = str_ref(fzIdentGetString(fzOpGetName(op)));
  PyObject *r = name ? PyUnicode_FromFormat("<fuse.Operation '%U'>", name) : NULL;
  Py_XDECREF(name);
  return ir_leave(self, r, true);
}

static PyObject *op_verify(PyObject *self, PyObject *unused) {
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  bool ok = fzOpVerify(op);
  PyObject *r = ir_leave(self, Py_NewRef(Py_True), ok);
  return r;
}

typedef struct WalkState {
  PyObject *self;
  PyObject *list;
} WalkState;

static FzWalkResult walk_one(FzOp *op, void *ud) {
  WalkState *w = ud;
  PyObject *o = fzpyIRNew(FzpyOperationType, IR_MODULE(w->self), op);
  if (!o || PyList_Append(w->list, o) < 0) {
    Py_XDECREF((PyObject *)o);
    return FZ_WALK_INTERRUPT;
  }
  Py_DECREF((PyObject *)o);
  return FZ_WALK_ADVANCE;
}

static PyObject *op_walk(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"order", NULL};
  const char *order = "pre";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|s", kw, &order))
    return NULL;
  bool pre = strcmp(order, "pre") == 0;
  if (!pre && strcmp(order, "post") != 0) {
    PyErr_Format(PyExc_ValueError, "order must be 'pre' or 'post', not '%s'",
                 order);
    return NULL;
  }
  FzOp *op = ir_enter(self);
  if (!op)
    return NULL;
  WalkState w = {self, PyList_New(0)};
  if (w.list &&
      fzOpWalk(op, pre ? FZ_WALK_PRE_ORDER : FZ_WALK_POST_ORDER, walk_one,
               &w) == FZ_WALK_INTERRUPT)
    Py_CLEAR(w.list);
  return ir_leave(self, w.list, true);
}

static PyGetSetDef op_getset[] = {
    {"name", op_name, NULL, "the op's name ('graph.add')", NULL},
    {"location", op_location, NULL, "its fuse.Location", NULL},
    {"operands", op_operands, NULL, "tuple of fuse.Value", NULL},
    {"results", op_results, NULL, "tuple of fuse.Value", NULL},
    {"result", op_result, NULL, "the only result (ValueError otherwise)", NULL},
    {"attributes", op_attributes, NULL, "{name: fuse.Attribute}: properties and discardable attributes", NULL},
    {"regions", op_regions, NULL, "tuple of fuse.Region", NULL},
    {"parent", op_parent, NULL, "the op holding this one, or None", NULL},
    {"block", op_block, NULL, "the block holding this op, or None", NULL},
    {"is_registered", op_registered, NULL, "whether a dialect defines the op", NULL},
    {"module", ir_module, NULL, "the fuse.Module", NULL},
    {"context", ir_context, NULL, "the fuse.Context", NULL},
    {NULL},
};

static PyMethodDef op_methods[] = {
    {"print", (PyCFunction)(void (*)(void))op_print, METH_VARARGS | METH_KEYWORDS,
     "print(*, generic=False, debug_info=False) -> str"},
    {"verify", op_verify, METH_NOARGS, "verify() -> True; raises fuse.Error"},
    {"walk", (PyCFunction)(void (*)(void))op_walk, METH_VARARGS | METH_KEYWORDS,
     "walk(order='pre') -> list of this op and every op nested in it"},
    {NULL},
};

static PyType_Slot op_slots[] = {
    {Py_tp_dealloc, ir_dealloc},
    {Py_tp_str, op_str},
    {Py_tp_repr, op_repr},
    {Py_tp_hash, ir_hash},
    {Py_tp_richcompare, ir_richcompare},
    {Py_tp_getset, op_getset},
    {Py_tp_methods, op_methods},
    {Py_tp_doc, "An operation of a fuse.Module (read-only)."},
    {0, NULL},
};
static PyType_Spec op_spec = {"fuse.Operation", sizeof(IRObject), 0,
                              Py_TPFLAGS_DEFAULT, op_slots};

/*===--- fuse.Block and fuse.Region -----------------------------------------===*/

static PyObject *block_arguments(PyObject *self, void *closure) {
  FzBlock *b = ir_enter(self);
  if (!b)
    return NULL;
  return ir_leave(self,
                  ir_tuple(self, FzpyValueType, fzBlockGetNumArguments(b),
                           get_argument, b),
                  true);
}

static PyObject *block_operations(PyObject *self, void *closure) {
  FzBlock *b = ir_enter(self);
  if (!b)
    return NULL;
  PyObject *t = PyTuple_New((Py_ssize_t)fzBlockGetNumOps(b));
  Py_ssize_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(b); t && op; op = fzOpGetNextInBlock(op)) {
    PyObject *o = fzpyIRNew(FzpyOperationType, IR_MODULE(self), op);
    if (!o)
      Py_CLEAR(t);
    else
      PyTuple_SetItem(t, i++, o);
  }
  return ir_leave(self, t, true);
}

static PyObject *block_parent(PyObject *self, void *closure) {
  FzBlock *b = ir_enter(self);
  if (!b)
    return NULL;
  return ir_leave(self,
                  fzpyIRNew(FzpyOperationType, IR_MODULE(self),
                            fzBlockGetParentOp(b)),
                  true);
}

static PyObject *block_iter(PyObject *self) {
  PyObject *ops = block_operations(self, NULL);
  PyObject *it = ops ? PyObject_GetIter(ops) : NULL;
  Py_XDECREF(ops);
  return it;
}

static Py_ssize_t block_len(PyObject *self) {
  FzBlock *b = ir_enter(self);
  if (!b)
    return -1;
  Py_ssize_t n = (Py_ssize_t)fzBlockGetNumOps(b);
  return fzpyFinish(IR_CTX(self), true, NULL) < 0 ? -1 : n;
}

static PyGetSetDef block_getset[] = {
    {"arguments", block_arguments, NULL, "tuple of fuse.Value", NULL},
    {"operations", block_operations, NULL, "tuple of fuse.Operation, in order", NULL},
    {"parent", block_parent, NULL, "the op holding the block", NULL},
    {"module", ir_module, NULL, "the fuse.Module", NULL},
    {NULL},
};

static PyType_Slot block_slots[] = {
    {Py_tp_dealloc, ir_dealloc},
    {Py_tp_hash, ir_hash},
    {Py_tp_richcompare, ir_richcompare},
    {Py_tp_getset, block_getset},
    {Py_tp_iter, block_iter},
    {Py_sq_length, block_len},
    {Py_tp_doc, "A block: arguments and operations (iterable)."},
    {0, NULL},
};
static PyType_Spec block_spec = {"fuse.Block", sizeof(IRObject), 0,
                                 Py_TPFLAGS_DEFAULT, block_slots};

static PyObject *region_blocks(PyObject *self, void *closure) {
  FzRegion *r = ir_enter(self);
  if (!r)
    return NULL;
  PyObject *t = PyTuple_New((Py_ssize_t)fzRegionGetNumBlocks(r));
  Py_ssize_t i = 0;
  for (FzBlock *b = fzRegionGetFirstBlock(r); t && b; b = fzBlockGetNext(b)) {
    PyObject *o = fzpyIRNew(FzpyBlockType, IR_MODULE(self), b);
    if (!o)
      Py_CLEAR(t);
    else
      PyTuple_SetItem(t, i++, o);
  }
  return ir_leave(self, t, true);
}

static PyObject *region_parent(PyObject *self, void *closure) {
  FzRegion *r = ir_enter(self);
  if (!r)
    return NULL;
  return ir_leave(self,
                  fzpyIRNew(FzpyOperationType, IR_MODULE(self),
                            fzRegionGetParentOp(r)),
                  true);
}

static PyObject *region_iter(PyObject *self) {
  PyObject *bs = region_blocks(self, NULL);
  PyObject *it = bs ? PyObject_GetIter(bs) : NULL;
  Py_XDECREF(bs);
  return it;
}

static Py_ssize_t region_len(PyObject *self) {
  PyObject *bs = region_blocks(self, NULL);
  if (!bs)
    return -1;
  Py_ssize_t n = PyTuple_Size(bs);
  Py_DECREF(bs);
  return n;
}

static PyGetSetDef region_getset[] = {
    {"blocks", region_blocks, NULL, "tuple of fuse.Block", NULL},
    {"parent", region_parent, NULL, "the op holding the region", NULL},
    {"module", ir_module, NULL, "the fuse.Module", NULL},
    {NULL},
};

static PyType_Slot region_slots[] = {
    {Py_tp_dealloc, ir_dealloc},
    {Py_tp_hash, ir_hash},
    {Py_tp_richcompare, ir_richcompare},
    {Py_tp_getset, region_getset},
    {Py_tp_iter, region_iter},
    {Py_sq_length, region_len},
    {Py_tp_doc, "A region: its blocks (iterable)."},
    {0, NULL},
};
static PyType_Spec region_spec = {"fuse.Region", sizeof(IRObject), 0,
                                  Py_TPFLAGS_DEFAULT, region_slots};

/*===--- fuse.Value ---------------------------------------------------------===*/

static PyObject *value_type(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  return ir_leave(self, fzpyTypeNew(IR_CTX(self), fzValueGetType(v)), true);
}

static PyObject *value_owner(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  PyObject *r = fzValueIsBlockArgument(v)
                    ? fzpyIRNew(FzpyBlockType, IR_MODULE(self),
                                fzValueGetParentBlock(v))
                    : fzpyIRNew(FzpyOperationType, IR_MODULE(self),
                                fzValueGetDefiningOp(v));
  return ir_leave(self, r, true);
}

static PyObject *value_index(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  return ir_leave(self, PyLong_FromSize_t(fzValueGetIndex(v)), true);
}

static PyObject *value_is_arg(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  return ir_leave(self, PyBool_FromLong(fzValueIsBlockArgument(v)), true);
}

static PyObject *value_location(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  return ir_leave(self, fzpyLocNew(IR_CTX(self), fzValueGetLoc(v)), true);
}

static PyObject *value_uses(PyObject *self, void *closure) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  PyObject *l = PyList_New(0);
  for (FzOpOperand *u = fzValueGetFirstUse(v); l && u;
       u = fzOpOperandGetNextUse(u)) {
    PyObject *op = fzpyIRNew(FzpyOperationType, IR_MODULE(self),
                             fzOpOperandGetOwner(u));
    PyObject *t = op ? Py_BuildValue("(On)", op,
                                     (Py_ssize_t)fzOpOperandGetIndex(u))
                     : NULL;
    if (!t || PyList_Append(l, t) < 0)
      Py_CLEAR(l);
    Py_XDECREF(op);
    Py_XDECREF(t);
  }
  return ir_leave(self, l, true);
}

static PyObject *value_repr(PyObject *self) {
  FzValue *v = ir_enter(self);
  if (!v)
    return NULL;
  FzpyText t = {0};
  fzTypePrint(fzValueGetType(v), fzpyTextAppend, &t);
  PyObject *ty = fzpyTextTake(&t);
  PyObject *r = NULL;
  if (ty && fzValueIsBlockArgument(v)) {
    r = PyUnicode_FromFormat("<fuse.Value block argument #%zu: %U>",
                             fzValueGetIndex(v), ty);
  } else if (ty) {
    PyObject *name =
        str_ref(fzIdentGetString(fzOpGetName(fzValueGetDefiningOp(v))));
    r = name ? PyUnicode_FromFormat("<fuse.Value result #%zu of '%U': %U>",
                                    fzValueGetIndex(v), name, ty)
             : NULL;
    Py_XDECREF(name);
  }
  Py_XDECREF(ty);
  return ir_leave(self, r, true);
}

static PyGetSetDef value_getset[] = {
    {"type", value_type, NULL, "its fuse.Type", NULL},
    {"owner", value_owner, NULL, "the defining Operation, or the Block of a block argument", NULL},
    {"index", value_index, NULL, "result number or argument number", NULL},
    {"is_block_argument", value_is_arg, NULL, "whether it is a block argument", NULL},
    {"location", value_location, NULL, "its fuse.Location", NULL},
    {"uses", value_uses, NULL, "[(user Operation, operand index), ...]", NULL},
    {"module", ir_module, NULL, "the fuse.Module", NULL},
    {NULL},
};

static PyType_Slot value_slots[] = {
    {Py_tp_dealloc, ir_dealloc},
    {Py_tp_repr, value_repr},
    {Py_tp_hash, ir_hash},
    {Py_tp_richcompare, ir_richcompare},
    {Py_tp_getset, value_getset},
    {Py_tp_doc, "An SSA value: an op result or a block argument."},
    {0, NULL},
};
static PyType_Spec value_spec = {"fuse.Value", sizeof(IRObject), 0,
                                 Py_TPFLAGS_DEFAULT, value_slots};

int fzpyInitIR(PyObject *m) {
  struct {
    PyType_Spec *spec;
    PyTypeObject **type;
    const char *name;
  } types[] = {
      {&module_spec, &FzpyModuleType, "Module"},
      {&op_spec, &FzpyOperationType, "Operation"},
      {&block_spec, &FzpyBlockType, "Block"},
      {&region_spec, &FzpyRegionType, "Region"},
      {&value_spec, &FzpyValueType, "Value"},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    *types[i].type = (PyTypeObject *)PyType_FromSpec(types[i].spec);
    if (!*types[i].type ||
        PyModule_AddObjectRef(m, types[i].name, (PyObject *)*types[i].type) < 0)
      return -1;
  }
  return 0;
}
