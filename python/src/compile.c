/* python/src/compile.c - fuse.compile's C half and fuse.CompiledModel
 * (the Executable type): a model compiled for the CPU or the GPU.
 *
 * _fuse.compile(source, ...) takes a fuse.Module (compiled from a clone),
 * ONNX bytes, or a path (.onnx imported, anything else parsed), and
 * follows fuse-run's compile path with the options fuse-run has
 * (tools/fuse_run.c): the precision policy (bf16/fp16 rewrite the
 * contractions first), fusion (with its report and one remark per op
 * collected as data), then fzCpuExecutableCreate on a pool of threads,
 * or fzCudaCompileModule and one FzCudaCall made without inputs, whose
 * device buffers and CUDA graph every call reuses. device='auto' takes
 * the GPU when fzCudaProbeDevice finds one, the CPU otherwise.
 * Everything runs with the context's lock held and the GIL released.
 *
 * Ownership: the Executable keeps its Context and the compiled Module
 * alive; it destroys the call, the program and the FzCuda, or the CPU
 * executable and its runtime, in that order, before dropping them.
 */
#include <string.h>
#include <time.h>

#include "fzpy.h"

PyTypeObject *FzpyExecutableType;

int fzpyOnnxOptions(PyObject *shapes, FzOnnxImportOptions *o,
                    FzOnnxInputShape **storage, int64_t **dims);

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*===--- ONNX import options ------------------------------------------------===*/

/* input_shapes: {name: shape} or [shape, ...] (by position) into o, whose
 * arrays (*storage, *dims) the caller frees with PyMem_Free. */
int fzpyOnnxOptions(PyObject *shapes, FzOnnxImportOptions *o,
                    FzOnnxInputShape **storage, int64_t **dims) {
  memset(o, 0, sizeof *o);
  *storage = NULL;
  *dims = NULL;
  if (!shapes || shapes == Py_None)
    return 0;
  bool isDict = PyDict_Check(shapes);
  PyObject *items = isDict ? PyDict_Items(shapes) : PySequence_List(shapes);
  if (!items) {
    PyErr_SetString(PyExc_TypeError, "input_shapes must be a dict {input "
                                     "name: shape} or a list of shapes");
    return -1;
  }
  Py_ssize_t n = PyList_Size(items);
  *storage = PyMem_Calloc((size_t)n + 1, sizeof **storage);
  *dims = PyMem_Calloc((size_t)n * FZ_MAX_RANK + 1, sizeof **dims);
  int rc = *storage && *dims ? 0 : -1;
  if (rc < 0)
    PyErr_NoMemory();
  for (Py_ssize_t i = 0; rc == 0 && i < n; ++i) {
    PyObject *it = PyList_GetItem(items, i);
    PyObject *name = isDict ? PyTuple_GetItem(it, 0) : NULL;
    PyObject *shape = isDict ? PyTuple_GetItem(it, 1) : it;
    FzOnnxInputShape *s = &(*storage)[i];
    if (name) {
      s->name = PyUnicode_AsUTF8AndSize(name, NULL); /* kept by `shapes` */
      if (!s->name) {
        rc = -1;
        break;
      }
    } else {
      s->index = (size_t)i;
    }
    PyObject *seq = PySequence_Fast(shape, "an input shape must be a "
                                           "sequence of ints");
    if (!seq) {
      rc = -1;
      break;
    }
    Py_ssize_t r = PySequence_Size(seq);
    if (r > FZ_MAX_RANK) {
      PyErr_Format(PyExc_ValueError, "an input shape has rank %zd (at most %d)",
                   r, FZ_MAX_RANK);
      rc = -1;
    }
    int64_t *d = *dims + (size_t)i * FZ_MAX_RANK;
    for (Py_ssize_t k = 0; rc == 0 && k < r; ++k) {
      PyObject *v = PySequence_GetItem(seq, k);
      long long x = v && v != Py_None ? PyLong_AsLongLong(v) : FZ_DYNAMIC;
      Py_XDECREF(v);
      if (!v || (x == -1 && PyErr_Occurred())) {
        rc = -1;
      } else if (x < 0 && x != FZ_DYNAMIC) {
        PyErr_SetString(PyExc_ValueError, "an input shape has a negative dim");
        rc = -1;
      }
      d[k] = x;
    }
    Py_DECREF(seq);
    s->rank = (size_t)r;
    s->shape = d;
  }
  Py_DECREF(items);
  o->numInputShapes = (size_t)n;
  o->inputShapes = *storage;
  return rc;
}

/*===--- The Executable type ----------------------------------------------===*/

static void release_native(ExecutableObject *e) {
  if (e->cu && !fzCudaMakeCurrent(e->cu)) {
    /* Reported; the resources below go with the process. */
  }
  fzCudaCallDestroy(e->call);
  fzGpuProgramDestroy(e->prog);
  fzCudaDestroy(e->cu);
  fzCpuExecutableDestroy(e->exe);
  fzCpuRuntimeDestroy(e->rt);
  e->call = NULL;
  e->prog = NULL;
  e->cu = NULL;
  e->exe = NULL;
  e->rt = NULL;
}

/* release_native on a copy of the handles (the object is gone by the
 * time a deferred destruction runs). */
static void destroy_native(void *arg) {
  release_native(arg);
  FZPY_FREE(arg);
}

static void exe_dealloc(PyObject *self) {
  ExecutableObject *e = (ExecutableObject *)self;
  if (e->ctx && (e->cu || e->exe || e->rt)) {
    ExecutableObject *copy = FZPY_MALLOC(sizeof *copy);
    if (copy) {
      memcpy(copy, e, sizeof *copy);
      fzpyDestroy(e->ctx, destroy_native, copy);
    } else { /* out of memory: release them now, waiting for the lock */
      fzpyEnter(e->ctx);
      release_native(e);
      FzpyDiagList l;
      fzpyLeave(e->ctx, &l);
      fzpyDiagListFree(&l);
    }
  }
  for (size_t i = 0; e->args && i < e->numIn + e->numOut; ++i)
    Py_XDECREF(e->args[i].shape_tuple);
  PyMem_Free(e->args);
  Py_XDECREF(e->report);
  Py_XDECREF(e->remarks);
  Py_XDECREF(e->module);
  Py_XDECREF((PyObject *)e->ctx);
  FZPY_TYPE_FREE(self);
}

/* Fills spec from a (static) buffer or tensor type; false with why. */
static bool spec_of(FzType *t, FzpyArgSpec *spec, char *why, size_t whySize) {
  spec->dtype = fzpyDTypeOf(fzShapedTypeGetElementType(t));
  size_t rank = fzShapedTypeGetRank(t);
  if (spec->dtype == FZPY_NO_DTYPE) {
    snprintf(why, whySize, "an argument's element type has no numpy dtype");
    return false;
  }
  if (rank == FZ_UNRANKED || rank > FZ_TENSOR_MAX_RANK ||
      !fzShapedTypeHasStaticShape(t)) {
    snprintf(why, whySize,
             "an argument has a dynamic or unranked shape (give the model's "
             "inputs static shapes: input_shapes={name: shape})");
    return false;
  }
  spec->rank = rank;
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    spec->shape[i] = fzShapedTypeGetDim(t, i);
    n *= (size_t)spec->shape[i];
  }
  spec->bytes = n * fzpyDTypeSize(spec->dtype);
  return true;
}

/*===--- _fuse.compile -------------------------------------------------------===*/

typedef struct CompileOptions {
  const char *device, *entry, *precision, *fusionMode, *gpuArch, *name;
  const char *layout; /* NULL: auto on cuda, nchw on cpu (as fuse-run) */
  int fuse, fastMath, exactMath, tile, stageRows, remarks;
  unsigned threads, vectorWidth, codegenThreads;
  int cache; /* the kernel cache (docs/codegen.md), default on */
} CompileOptions;

/* What the no-GIL part needs and produces. */
typedef struct CompileJob {
  ContextObject *ctx;
  const CompileOptions *o;
  FzPrecision precision;
  bool haveLayout;         /* layout= was given */
  FzGraphLayout layout;
  FzOp *source;            /* a Module's op to clone, or NULL */
  const char *path;        /* or a file */
  const char *bytes;       /* or ONNX bytes */
  size_t numBytes;
  FzOnnxImportOptions onnx;
  FzOp *module;            /* the graph-level module (result) */
  FzpyText report;
  char why[512];           /* an error of our own (no diagnostic) */
  ExecutableObject *e;
} CompileJob;

static bool compile_cpu(CompileJob *j, FzFusionOptions *fo, FzOp *func) {
  const CompileOptions *o = j->o;
  ExecutableObject *e = j->e;
  FzContext *ctx = j->ctx->ctx;
  /* bf16, fp16: the contractions' operands, on a clone (fuse-run does it
   * in place before any device sees the module). */
  FzOp *work = j->module;
  if (j->precision == FZ_PRECISION_BF16 || j->precision == FZ_PRECISION_FP16) {
    work = fzOpClone(j->module, NULL);
    if (!work || !fzModuleApplyPrecision(work, j->precision, o->fuse)) {
      if (work)
        fzOpDestroy(work);
      return false;
    }
  }
  FzCpuCompileOptions co;
  fzCpuCompileOptionsInit(&co);
  co.pipeline.fusion = fo;
  co.pipeline.fuse = o->fuse;
  co.pipeline.layout = j->haveLayout ? j->layout : FZ_GRAPH_LAYOUT_NCHW;
  co.codegen.fastMath = o->fastMath;
  co.codegen.exactMath = o->exactMath;
  co.codegen.tileContractions = o->tile;
  co.codegen.tileConvolutions = o->tile;
  co.codegen.stageRows = o->stageRows;
  co.codegen.preferVectorWidth = o->vectorWidth;
  co.codegen.noCache = !o->cache;
  co.codegen.codegenThreads = o->codegenThreads;
  e->rt = fzCpuRuntimeCreate(ctx, o->threads);
  if (e->rt)
    e->exe = fzCpuExecutableCreate(e->rt, work, &co);
  if (work != j->module)
    fzOpDestroy(work);
  if (!e->exe)
    return false;
  FzStringRef name = fzSymbolGetName(func);
  e->fn = fzCpuExecutableLookup(e->exe, name);
  if (!e->fn) {
    snprintf(j->why, sizeof j->why, "the compiled code has no @%.*s",
             (int)name.length, name.data);
    return false;
  }
  e->numIn = fzCpuFunctionGetNumInputs(e->fn);
  e->numOut = fzCpuFunctionGetNumOutputs(e->fn);
  return true;
}

static bool compile_cuda(CompileJob *j, FzFusionOptions *fo, FzOp *func) {
  const CompileOptions *o = j->o;
  ExecutableObject *e = j->e;
  if (!(e->cu = fzCudaCreate(j->ctx->ctx, 0)) ||
      !fzCudaSetKernelCache(e->cu, o->cache, NULL))
    return false;
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.fastMath = o->fastMath;
  go.precision = j->precision; /* bf16/fp16 applied by fzCudaCompileModule */
  go.codegenThreads = o->codegenThreads;
  go.layout = j->haveLayout ? j->layout : FZ_GRAPH_LAYOUT_AUTO;
  go.noCache = !o->cache;
  /* As fuse-run's --gpu-arch: sm_90a puts every nest that allows it on
   * wgmma, another arch none. */
  if (o->gpuArch)
    go.arch = o->gpuArch;
  if (o->gpuArch && !strcmp(o->gpuArch, "sm_90a"))
    go.wgmmaMinTiles = 1;
  else if (o->gpuArch)
    go.noWgmma = true;
  go.fusion = fo;
  if (!(e->prog = fzCudaCompileModule(e->cu, j->module, o->fuse, &go)))
    return false;
  const FzGpuFunction *f = fzGpuProgramLookup(e->prog, e->entry);
  if (!f) {
    snprintf(j->why, sizeof j->why, "the compiled program has no @%s",
             e->entry);
    return false;
  }
  e->numIn = f->numArgs - f->numOutputs;
  e->numOut = f->numOutputs;
  snprintf(e->deviceName, sizeof e->deviceName, "%s",
           fzCudaGetDeviceName(e->cu));
  (void)func;
  return (e->call = fzCudaCallCreate(e->cu, e->prog, e->entry, e->numIn,
                                     NULL)) != NULL;
}

/* The part that runs without the GIL, the context's lock held. */
static bool compile_job(CompileJob *j) {
  FzContext *ctx = j->ctx->ctx;
  const CompileOptions *o = j->o;
  if (j->source)
    j->module = fzOpClone(j->source, NULL);
  else if (j->bytes)
    j->module = fzImportOnnxBufferWithOptions(ctx, j->bytes, j->numBytes,
                                              o->name, NULL, &j->onnx);
  else if (fzOnnxIsModelPath(j->path))
    j->module = fzImportOnnxFileWithOptions(ctx, j->path, &j->onnx);
  else
    j->module = fzParseFile(ctx, j->path);
  if (!j->module || !fzOpVerify(j->module))
    return false;
  FzOp *func = fzpyFindEntry(j->module, o->entry, j->why, sizeof j->why);
  if (!func)
    return false;
  FzStringRef name = fzSymbolGetName(func);
  snprintf(j->e->entry, sizeof j->e->entry, "%.*s", (int)name.length,
           name.data);

  bool cuda = strcmp(o->device, "cuda") == 0;
  if (strcmp(o->device, "auto") == 0) {
    char why[256];
    cuda = fzCudaProbeDevice(why, sizeof why) == FZ_CUDA_PROBE_READY;
  }
  j->e->device = cuda ? FZPY_DEVICE_CUDA : FZPY_DEVICE_CPU;
  FzFusionOptions fo;
  fzFusionOptionsInit(&fo);
  fo.mode = strcmp(o->fusionMode, "rules") == 0 ? FZ_FUSION_MODE_RULES
                                                 : FZ_FUSION_MODE_COST;
  fo.report = true;
  fo.reportOut = fzpyTextAppend;
  fo.reportUserData = &j->report;
  fo.remarks = o->remarks;
  return cuda ? compile_cuda(j, &fo, func) : compile_cpu(j, &fo, func);
}

/* The argument specs and their shape tuples (GIL held). */
static int fill_specs(ExecutableObject *e) {
  size_t n = e->numIn + e->numOut;
  e->args = PyMem_Calloc(n + 1, sizeof *e->args);
  if (!e->args) {
    PyErr_NoMemory();
    return -1;
  }
  const FzGpuFunction *g =
      e->prog ? fzGpuProgramLookup(e->prog, e->entry) : NULL;
  for (size_t i = 0; i < n; ++i) {
    FzType *t = g ? g->argTypes[i] : fzCpuFunctionGetArgType(e->fn, i);
    char why[256];
    if (!spec_of(t, &e->args[i], why, sizeof why)) {
      fzpyRaise("fuse: cannot call @%s from Python: %s", e->entry, why);
      return -1;
    }
    FzpyArgSpec *s = &e->args[i];
    s->shape_tuple = PyTuple_New((Py_ssize_t)s->rank);
    if (!s->shape_tuple)
      return -1;
    for (size_t k = 0; k < s->rank; ++k) {
      PyObject *v = PyLong_FromLongLong(s->shape[k]);
      if (!v)
        return -1;
      PyTuple_SetItem(s->shape_tuple, (Py_ssize_t)k, v);
    }
  }
  return 0;
}

PyObject *fzpyCompile(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"source",     "context",      "device",     "entry",
                       "precision",  "fuse",         "threads",    "fast_math",
                       "exact_math", "tile",         "stage_rows", "vector_width",
                       "fusion_mode", "remarks",     "input_shapes", "gpu_arch",
                       "codegen_threads", "name",    "layout",     "cache",
                       NULL};
  PyObject *source, *ctxArg = Py_None, *shapes = Py_None;
  CompileOptions o = {"auto", NULL, "default", "cost", NULL, "model.onnx",
                      NULL, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1};
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "O|$OszspIppppIspOzIszp", kw, &source, &ctxArg,
          &o.device, &o.entry, &o.precision, &o.fuse, &o.threads, &o.fastMath,
          &o.exactMath, &o.tile, &o.stageRows, &o.vectorWidth, &o.fusionMode,
          &o.remarks, &shapes, &o.gpuArch, &o.codegenThreads, &o.name,
          &o.layout, &o.cache))
    return NULL;
  CompileJob j;
  memset(&j, 0, sizeof j);
  j.o = &o;
  if (!fzPrecisionParse(fzStringRefFromCString(o.precision), &j.precision)) {
    PyErr_Format(PyExc_ValueError, "precision must be %s, not '%s'",
                 fzPrecisionGetChoicesText(), o.precision);
    return NULL;
  }
  if (o.layout) {
    if (!fzGraphLayoutParse(fzStringRefFromCString(o.layout), &j.layout)) {
      PyErr_Format(PyExc_ValueError, "layout must be %s, not '%s'",
                   fzGraphLayoutGetChoicesText(), o.layout);
      return NULL;
    }
    j.haveLayout = true;
  }
  if (strcmp(o.device, "auto") && strcmp(o.device, "cpu") &&
      strcmp(o.device, "cuda")) {
    PyErr_Format(PyExc_ValueError,
                 "device must be 'auto', 'cpu' or 'cuda', not '%s'", o.device);
    return NULL;
  }
  if (strcmp(o.fusionMode, "cost") && strcmp(o.fusionMode, "rules")) {
    PyErr_Format(PyExc_ValueError,
                 "fusion_mode must be 'cost' or 'rules', not '%s'",
                 o.fusionMode);
    return NULL;
  }
  PyObject *keep = NULL; /* what the pointers below point into */
  ContextObject *c;
  if (PyObject_TypeCheck(source, FzpyModuleType)) {
    ModuleObject *m = (ModuleObject *)source;
    if (ctxArg != Py_None && ctxArg != (PyObject *)m->ctx) {
      PyErr_SetString(PyExc_ValueError, "the module belongs to another "
                                        "context than `context`");
      return NULL;
    }
    c = m->ctx;
    Py_INCREF((PyObject *)c);
    j.source = m->op;
    keep = Py_NewRef(source);
  } else {
    if (PyBytes_Check(source)) {
      keep = Py_NewRef(source);
      char *b;
      Py_ssize_t n;
      PyBytes_AsStringAndSize(source, &b, &n);
      j.bytes = b;
      j.numBytes = (size_t)n;
    } else if (PyUnicode_FSConverter(source, &keep)) {
      j.path = PyBytes_AsString(keep);
    } else {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "fuse.compile takes an ONNX file path, ONNX bytes or a "
                   "fuse.Module, not %R",
                   (PyObject *)Py_TYPE(source));
      return NULL;
    }
    if (!(c = fzpyContextOrNew(ctxArg))) {
      Py_DECREF(keep);
      return NULL;
    }
  }
  FzOnnxInputShape *storage = NULL;
  int64_t *dims = NULL;
  if (fzpyOnnxOptions(shapes, &j.onnx, &storage, &dims) < 0) {
    Py_DECREF(keep);
    Py_DECREF((PyObject *)c);
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(FzpyExecutableType, Py_tp_alloc);
  ExecutableObject *e = (ExecutableObject *)alloc(FzpyExecutableType, 0);
  PyObject *remarks = PyList_New(0);
  if (!e || !remarks) {
    Py_XDECREF((PyObject *)e);
    Py_XDECREF(remarks);
    Py_DECREF(keep);
    Py_DECREF((PyObject *)c);
    PyMem_Free(storage);
    PyMem_Free(dims);
    return NULL;
  }
  e->ctx = c; /* the reference taken above */
  e->remarks = remarks;
  j.ctx = c;
  j.e = e;

  double t0 = now_seconds();
  bool ok;
  fzpyEnter(c);
  Py_BEGIN_ALLOW_THREADS
  ok = compile_job(&j);
  if (!ok)
    release_native(e);
  Py_END_ALLOW_THREADS
  e->seconds = now_seconds() - t0;
  FzOp *module = j.module;
  if (!ok && module) {
    fzOpDestroy(module);
    module = NULL;
  }
  int rc = fzpyFinish(c, ok || j.why[0], remarks);
  Py_DECREF(keep);
  PyMem_Free(storage);
  PyMem_Free(dims);
  if (rc == 0 && !ok) {
    fzpyRaise("fuse: %s", j.why);
    rc = -1;
  }
  e->report = fzpyTextTake(&j.report);
  if (module) {
    /* Owned by the Module (which destroys it when it cannot be made). */
    e->module = (PyObject *)fzpyModuleNew(c, module);
  }
  if (rc < 0 || !e->report || !e->module || fill_specs(e) < 0) {
    Py_DECREF((PyObject *)e);
    return NULL;
  }
  return (PyObject *)e;
}

/*===--- Executable: what it is, what it did -------------------------------===*/

static PyObject *specs_list(ExecutableObject *e, size_t first, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; ++i) {
    FzpyArgSpec *s = &e->args[first + i];
    PyObject *t = Py_BuildValue("(sO)", fzpyDTypeName(s->dtype), s->shape_tuple);
    if (!t)
      Py_CLEAR(l);
    else
      PyList_SetItem(l, (Py_ssize_t)i, t);
  }
  return l;
}

static PyObject *exe_inputs(PyObject *self, void *c) {
  ExecutableObject *e = (ExecutableObject *)self;
  return specs_list(e, 0, e->numIn);
}
static PyObject *exe_outputs(PyObject *self, void *c) {
  ExecutableObject *e = (ExecutableObject *)self;
  return specs_list(e, e->numIn, e->numOut);
}
static PyObject *exe_device(PyObject *self, void *c) {
  return PyUnicode_FromString(((ExecutableObject *)self)->device ==
                                      FZPY_DEVICE_CUDA
                                  ? "cuda"
                                  : "cpu");
}
static PyObject *exe_device_name(PyObject *self, void *c) {
  ExecutableObject *e = (ExecutableObject *)self;
  if (e->device == FZPY_DEVICE_CPU)
    Py_RETURN_NONE;
  return PyUnicode_FromString(e->deviceName);
}
static PyObject *exe_entry(PyObject *self, void *c) {
  return PyUnicode_FromString(((ExecutableObject *)self)->entry);
}
static PyObject *exe_module(PyObject *self, void *c) {
  return Py_NewRef(((ExecutableObject *)self)->module);
}
static PyObject *exe_context(PyObject *self, void *c) {
  return Py_NewRef((PyObject *)((ExecutableObject *)self)->ctx);
}
static PyObject *exe_remarks(PyObject *self, void *c) {
  return PySequence_List(((ExecutableObject *)self)->remarks);
}
static PyObject *exe_seconds(PyObject *self, void *c) {
  return PyFloat_FromDouble(((ExecutableObject *)self)->seconds);
}
static PyObject *exe_threads(PyObject *self, void *c) {
  ExecutableObject *e = (ExecutableObject *)self;
  if (!e->rt)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLong(fzCpuRuntimeGetNumThreads(e->rt));
}

static PyObject *exe_report(PyObject *self, PyObject *unused) {
  return Py_NewRef(((ExecutableObject *)self)->report);
}

/* The code compiled: the loop-level module (cpu) or the PTX (cuda). */
static PyObject *exe_lowered(PyObject *self, PyObject *unused) {
  ExecutableObject *e = (ExecutableObject *)self;
  FzpyText t = {0};
  fzpyEnter(e->ctx);
  if (e->exe)
    fzOpPrint(fzCpuExecutableGetLoopModule(e->exe), 0, fzpyTextAppend, &t);
  else if (e->prog)
    fzpyTextAppend((FzStringRef){e->prog->ptx, e->prog->ptxLen}, &t);
  if (fzpyFinish(e->ctx, true, NULL) < 0) {
    FZPY_FREE(t.data);
    return NULL;
  }
  return fzpyTextTake(&t);
}

/* The GPU kernels: one dict per launch. */
static PyObject *exe_kernels(PyObject *self, PyObject *unused) {
  ExecutableObject *e = (ExecutableObject *)self;
  PyObject *l = PyList_New(0);
  const FzGpuFunction *f = e->prog ? fzGpuProgramLookup(e->prog, e->entry) : NULL;
  for (size_t k = 0; l && f && k < f->numKernels; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    PyObject *d = Py_BuildValue(
        "{s:s,s:(III),s:(III),s:I,s:s,s:s,s:L,s:L}", "name", K->name, "grid",
        K->grid[0], K->grid[1], K->grid[2], "block", K->block[0], K->block[1],
        K->block[2], "shared_bytes", K->sharedBytes, "plan",
        K->plan ? K->plan : "", "mapping", K->mapping ? K->mapping : "",
        "bytes_moved", (long long)K->bytesMoved, "flops", (long long)K->flops);
    if (!d || PyList_Append(l, d) < 0)
      Py_CLEAR(l);
    Py_XDECREF((PyObject *)d);
  }
  return l;
}

static PyObject *exe_repr(PyObject *self) {
  ExecutableObject *e = (ExecutableObject *)self;
  return PyUnicode_FromFormat("<fuse.CompiledModel @%s on %s: %zu inputs, %zu "
                              "outputs>",
                              e->entry,
                              e->device == FZPY_DEVICE_CUDA ? "cuda" : "cpu",
                              e->numIn, e->numOut);
}

static PyGetSetDef exe_getset[] = {
    {"device", exe_device, NULL, "'cpu' or 'cuda': where the model runs", NULL},
    {"device_name", exe_device_name, NULL, "the GPU's name (cuda), else None", NULL},
    {"entry", exe_entry, NULL, "the function compiled (its symbol)", NULL},
    {"inputs", exe_inputs, NULL, "[(dtype, shape), ...] of the inputs", NULL},
    {"outputs", exe_outputs, NULL, "[(dtype, shape), ...] of the outputs", NULL},
    {"module", exe_module, NULL, "the fuse.Module compiled (graph level, as imported)", NULL},
    {"context", exe_context, NULL, "the fuse.Context", NULL},
    {"remarks", exe_remarks, NULL, "the fusion remarks: one fuse.Diagnostic per op (its group, or why not)", NULL},
    {"compile_seconds", exe_seconds, NULL, "wall time of the import and compilation", NULL},
    {"threads", exe_threads, NULL, "the CPU pool's threads (cpu), else None", NULL},
    {NULL},
};

static PyMethodDef exe_methods[] = {
    {"fusion_report", exe_report, METH_NOARGS,
     "fusion_report() -> str: kernels before and after fusion, estimated "
     "bytes and time, the largest groups (docs/fusion.md)"},
    {"lowered", exe_lowered, METH_NOARGS,
     "lowered() -> str: the loop-level module compiled (cpu) or the PTX "
     "(cuda)"},
    {"kernels", exe_kernels, METH_NOARGS,
     "kernels() -> list of dicts: the GPU launches (name, grid, block, "
     "shared_bytes, plan, mapping, bytes_moved, flops); [] on the CPU"},
    {"_bench", (PyCFunction)(void (*)(void))fzpyExecutableBench,
     METH_VARARGS | METH_KEYWORDS,
     "_bench(*inputs, iterations=1000) -> seconds per call of the C "
     "runtime alone (fzCpuFunctionCall on the same buffers in a C loop)"},
    {NULL},
};

static PyType_Slot exe_slots[] = {
    {Py_tp_dealloc, exe_dealloc},
    {Py_tp_call, fzpyExecutableCall},
    {Py_tp_repr, exe_repr},
    {Py_tp_getset, exe_getset},
    {Py_tp_methods, exe_methods},
    {Py_tp_doc, "A compiled model (fuse.compile): call it with arrays, one "
                "per input; out=[arrays] writes the outputs in place."},
    {0, NULL},
};
static PyType_Spec exe_spec = {"fuse.CompiledModel", sizeof(ExecutableObject),
                               0, Py_TPFLAGS_DEFAULT, exe_slots};

int fzpyInitCompile(PyObject *m) {
  FzpyExecutableType = (PyTypeObject *)PyType_FromSpec(&exe_spec);
  if (!FzpyExecutableType ||
      PyModule_AddObjectRef(m, "CompiledModel", (PyObject *)FzpyExecutableType) <
          0)
    return -1;
  return 0;
}
