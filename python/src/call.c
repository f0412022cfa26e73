/* python/src/call.c - calling a compiled model, and fuse.DeviceArray.
 *
 * A call checks every input against the function's signature (element
 * type and shape exactly; a mismatch is a fuse.Error naming the input),
 * makes the outputs (numpy.empty, or the out= arrays given), then runs
 * with the context's lock held and the GIL released:
 *  - cpu: fzCpuFunctionCall on the arrays' own memory (zero copy when
 *    it is contiguous and 16-byte aligned, as numpy's and torch's CPU
 *    memory is); the run-time checks' errors are raised.
 *  - cuda: the executable's one FzCudaCall: inputs copied into its
 *    device buffers (from the host, or from CUDA memory when the input
 *    is a CUDA tensor), its CUDA graph launched, the device synchronized
 *    (kernel errors raised), outputs copied out: to numpy arrays, or,
 *    when any input or out= array is on the GPU, to GPU memory: the out=
 *    tensors, or new DeviceArrays (DLPack: torch.from_dlpack takes them
 *    without a copy).
 */
#include <string.h>
#include <time.h>

#include "dlpack.h"
#include "fzpy.h"

PyTypeObject *FzpyDeviceArrayType;

PyObject *fzpyNumpyEmptyShaped(FzpyDType d, PyObject *shape);
PyObject *fzpyNumpyFinish(FzpyDType d, PyObject *arr);

/*===--- fuse.DeviceArray ---------------------------------------------------===*/

typedef struct DeviceArrayObject {
  PyObject_HEAD
  ExecutableObject *exe; /* its FzCuda allocated the memory */
  FzCudaPtr ptr;
  FzpyDType dtype;
  size_t rank;
  int64_t shape[FZ_TENSOR_MAX_RANK];
  size_t bytes;
} DeviceArrayObject;

static DeviceArrayObject *device_array_new(ExecutableObject *e,
                                           const FzpyArgSpec *s) {
  DeviceArrayObject *d = PyObject_New(DeviceArrayObject, FzpyDeviceArrayType);
  if (!d)
    return NULL;
  Py_INCREF((PyObject *)e);
  d->exe = e;
  d->ptr = 0;
  d->dtype = s->dtype;
  d->rank = s->rank;
  memcpy(d->shape, s->shape, sizeof d->shape);
  d->bytes = s->bytes;
  return d;
}

typedef struct DeviceMemory {
  FzCuda *cu;
  FzCudaPtr ptr;
} DeviceMemory;

static void free_device_memory(void *arg) {
  DeviceMemory *m = arg;
  if (fzCudaMakeCurrent(m->cu))
    fzCudaFree(m->cu, m->ptr);
  FZPY_FREE(m);
}

static void device_array_dealloc(PyObject *self) {
  DeviceArrayObject *d = (DeviceArrayObject *)self;
  DeviceMemory *m = d->ptr && d->exe->cu ? FZPY_MALLOC(sizeof *m) : NULL;
  if (m) {
    /* The FzCuda outlives the free, deferred or not: the executable's
     * destruction (the decref below may start it) comes after it, and
     * deferred destructions run in order. */
    m->cu = d->exe->cu;
    m->ptr = d->ptr;
    fzpyDestroy(d->exe->ctx, free_device_memory, m);
  }
  Py_XDECREF((PyObject *)d->exe);
  FZPY_TYPE_FREE(self);
}

static PyObject *device_array_shape(PyObject *self, void *closure) {
  DeviceArrayObject *d = (DeviceArrayObject *)self;
  PyObject *t = PyTuple_New((Py_ssize_t)d->rank);
  for (size_t i = 0; t && i < d->rank; ++i) {
    PyObject *v = PyLong_FromLongLong(d->shape[i]);
    if (!v)
      Py_CLEAR(t);
    else
      PyTuple_SetItem(t, (Py_ssize_t)i, v);
  }
  return t;
}

static PyObject *device_array_dtype(PyObject *self, void *closure) {
  return PyUnicode_FromString(
      fzpyDTypeName(((DeviceArrayObject *)self)->dtype));
}

static PyObject *device_array_nbytes(PyObject *self, void *closure) {
  return PyLong_FromSize_t(((DeviceArrayObject *)self)->bytes);
}

static PyObject *device_array_ptr(PyObject *self, void *closure) {
  return PyLong_FromUnsignedLongLong(((DeviceArrayObject *)self)->ptr);
}

/* A copy on the host, as a numpy array. */
static PyObject *device_array_numpy(PyObject *self, PyObject *unused) {
  DeviceArrayObject *d = (DeviceArrayObject *)self;
  Py_buffer v;
  PyObject *a = fzpyNumpyEmptyView(d->dtype, d->rank, d->shape, &v);
  if (!a)
    return NULL;
  ContextObject *c = d->exe->ctx;
  bool ok;
  fzpyEnter(c);
  Py_BEGIN_ALLOW_THREADS
  ok = fzCudaMakeCurrent(d->exe->cu) &&
       (d->bytes == 0 || fzCudaCopyToHost(d->exe->cu, v.buf, d->ptr, d->bytes));
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&v);
  if (fzpyFinish(c, ok, NULL) < 0) {
    Py_DECREF(a);
    return NULL;
  }
  return fzpyNumpyFinish(d->dtype, a);
}

static PyObject *device_array_array(PyObject *self, PyObject *args,
                                    PyObject *kwargs) {
  /* numpy.asarray(device_array): a host copy (dtype and copy ignored but
   * accepted, as numpy passes them). */
  return device_array_numpy(self, NULL);
}

static PyObject *device_array_dlpack_device(PyObject *self, PyObject *unused) {
  return Py_BuildValue("(ii)", (int)kDLCUDA, 0);
}

static void dlpack_deleter(DLManagedTensor *m) {
  PyGILState_STATE st = PyGILState_Ensure();
  Py_XDECREF((PyObject *)m->manager_ctx);
  FZPY_FREE(m);
  PyGILState_Release(st);
}

static void dlpack_capsule_destructor(PyObject *cap) {
  /* Not consumed: the tensor is still ours. */
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
      m->deleter(m);
  }
}

/* __dlpack__(stream=None, max_version=None, dl_device=None, copy=None):
 * the memory is ready for any stream (each call synchronizes before it
 * returns); the capsule is DLPack 0.8's "dltensor", which consumers
 * asking for a newer version accept too. */
static PyObject *device_array_dlpack(PyObject *self, PyObject *args,
                                     PyObject *kwargs) {
  static char *kw[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = NULL, *maxv = NULL, *dev = NULL, *copy = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kw, &stream, &maxv,
                                   &dev, &copy))
    return NULL;
  if (copy && copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "fuse.DeviceArray exports its memory; "
                                       "copy=True is not supported");
    return NULL;
  }
  DeviceArrayObject *d = (DeviceArrayObject *)self;
  DLManagedTensor *m =
      FZPY_CALLOC(1, sizeof *m + d->rank * sizeof(int64_t) + 1);
  if (!m)
    return PyErr_NoMemory();
  int64_t *shape = (int64_t *)(m + 1);
  memcpy(shape, d->shape, d->rank * sizeof *shape);
  static const uint8_t codes[FZPY_NUM_DTYPES][2] = {
      [FZPY_F16] = {kDLFloat, 16}, [FZPY_BF16] = {kDLBfloat, 16},
      [FZPY_F32] = {kDLFloat, 32}, [FZPY_F64] = {kDLFloat, 64},
      [FZPY_BOOL] = {kDLBool, 8},  [FZPY_I8] = {kDLInt, 8},
      [FZPY_I16] = {kDLInt, 16},   [FZPY_I32] = {kDLInt, 32},
      [FZPY_I64] = {kDLInt, 64}};
  m->dl_tensor.data = (void *)(uintptr_t)d->ptr;
  m->dl_tensor.device.device_type = kDLCUDA;
  m->dl_tensor.device.device_id = 0;
  m->dl_tensor.ndim = (int32_t)d->rank;
  m->dl_tensor.dtype.code = codes[d->dtype][0];
  m->dl_tensor.dtype.bits = codes[d->dtype][1];
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = NULL;
  m->dl_tensor.byte_offset = 0;
  Py_INCREF((PyObject *)self);
  m->manager_ctx = self;
  m->deleter = dlpack_deleter;
  PyObject *cap = PyCapsule_New(m, "dltensor", dlpack_capsule_destructor);
  if (!cap) {
    Py_DECREF((PyObject *)self);
    FZPY_FREE(m);
  }
  return cap;
}

static PyObject *device_array_repr(PyObject *self) {
  DeviceArrayObject *d = (DeviceArrayObject *)self;
  char spec[256];
  fzpyFormatSpec(spec, sizeof spec, d->dtype, d->rank, d->shape);
  return PyUnicode_FromFormat("<fuse.DeviceArray %s on cuda:0>", spec);
}

static PyGetSetDef device_array_getset[] = {
    {"shape", device_array_shape, NULL, "the shape (tuple)", NULL},
    {"dtype", device_array_dtype, NULL, "the element type's numpy name", NULL},
    {"nbytes", device_array_nbytes, NULL, "bytes of device memory", NULL},
    {"data_ptr", device_array_ptr, NULL, "the device address", NULL},
    {NULL},
};

static PyMethodDef device_array_methods[] = {
    {"numpy", device_array_numpy, METH_NOARGS, "numpy() -> a host copy"},
    {"__array__", (PyCFunction)(void (*)(void))device_array_array,
     METH_VARARGS | METH_KEYWORDS, "a host copy, for numpy.asarray"},
    {"__dlpack__", (PyCFunction)(void (*)(void))device_array_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "the DLPack capsule of the device memory (torch.from_dlpack)"},
    {"__dlpack_device__", device_array_dlpack_device, METH_NOARGS,
     "(kDLCUDA, 0)"},
    {NULL},
};

static PyType_Slot device_array_slots[] = {
    {Py_tp_dealloc, device_array_dealloc},
    {Py_tp_repr, device_array_repr},
    {Py_tp_getset, device_array_getset},
    {Py_tp_methods, device_array_methods},
    {Py_tp_doc, "An output of a CUDA model in GPU memory (DLPack: "
                "torch.from_dlpack(a) shares it; a.numpy() copies it)."},
    {0, NULL},
};
static PyType_Spec device_array_spec = {"fuse.DeviceArray",
                                        sizeof(DeviceArrayObject), 0,
                                        Py_TPFLAGS_DEFAULT, device_array_slots};

/*===--- Calls ----------------------------------------------------------------===*/

/* What one call holds. */
typedef struct Call {
  ExecutableObject *e;
  size_t n;           /* numIn + numOut */
  FzpyArray *arrays;  /* inputs, then outputs */
  PyObject **results; /* numOut: the objects returned */
  DeviceArrayObject **fresh; /* numOut: DeviceArrays to allocate (cuda) */
  bool deviceOut;     /* outputs go to GPU memory */
  bool haveOut;       /* out= was given: its arrays are the results */
  FzpyArray local[8];
  PyObject *localResults[8];
  DeviceArrayObject *localFresh[8];
} Call;

static void call_free(Call *k) {
  for (size_t i = 0; k->arrays && i < k->n; ++i)
    fzpyArrayRelease(&k->arrays[i]);
  for (size_t i = 0; k->results && i < k->e->numOut; ++i)
    Py_XDECREF(k->results[i]);
  if (k->arrays != k->local)
    PyMem_Free(k->arrays);
  if (k->results != k->localResults)
    PyMem_Free(k->results);
  if (k->fresh != k->localFresh)
    PyMem_Free(k->fresh);
}

static int check_spec(ExecutableObject *e, const FzpyArray *a, size_t i) {
  const FzpyArgSpec *s = &e->args[i];
  bool same = a->dtype == s->dtype && a->rank == s->rank;
  for (size_t d = 0; same && d < s->rank; ++d)
    same = a->shape[d] == s->shape[d];
  if (same)
    return 0;
  char want[256], got[256];
  fzpyFormatSpec(want, sizeof want, s->dtype, s->rank, s->shape);
  fzpyFormatSpec(got, sizeof got, a->dtype, a->rank, a->shape);
  bool in = i < e->numIn;
  fzpyRaise("fuse: %s #%zu of @%s must be %s, got %s", in ? "input" : "output",
            in ? i : i - e->numIn, e->entry, want, got);
  return -1;
}

/* Reads the inputs and makes (or reads) the outputs into k. */
static int call_prepare(Call *k, ExecutableObject *e, PyObject *args,
                        PyObject *kwargs, bool allowOut) {
  memset(k, 0, sizeof *k);
  k->e = e;
  k->n = e->numIn + e->numOut;
  PyObject *out = NULL;
  if (kwargs && PyDict_Size(kwargs)) {
    out = PyDict_GetItemString(kwargs, "out");
    if (!allowOut || !out || PyDict_Size(kwargs) != 1) {
      PyErr_SetString(PyExc_TypeError, "a compiled model takes its inputs "
                                       "and, optionally, out=[arrays]");
      return -1;
    }
  }
  Py_ssize_t nArgs = PyTuple_Size(args);
  if ((size_t)nArgs != e->numIn) {
    PyErr_Format(PyExc_TypeError, "@%s takes %zu input%s, %zd given",
                 e->entry, e->numIn, e->numIn == 1 ? "" : "s", nArgs);
    return -1;
  }
  k->arrays = k->n <= 8 ? k->local : PyMem_Calloc(k->n, sizeof *k->arrays);
  k->results = e->numOut <= 8 ? k->localResults
                              : PyMem_Calloc(e->numOut, sizeof *k->results);
  k->fresh = e->numOut <= 8 ? k->localFresh
                            : PyMem_Calloc(e->numOut, sizeof *k->fresh);
  if (!k->arrays || !k->results || !k->fresh) {
    PyErr_NoMemory();
    return -1;
  }
  memset(k->arrays, 0, k->n * sizeof *k->arrays);
  memset(k->results, 0, e->numOut * sizeof *k->results);
  memset(k->fresh, 0, e->numOut * sizeof *k->fresh);
  bool cuda = e->device == FZPY_DEVICE_CUDA;
  size_t align = cuda ? 0 : 16;
  char what[64];
  for (size_t i = 0; i < e->numIn; ++i) {
    snprintf(what, sizeof what, "input #%zu", i);
    if (fzpyArrayGet(PyTuple_GetItem(args, (Py_ssize_t)i), &k->arrays[i],
                     align, false, cuda, what) < 0 ||
        check_spec(e, &k->arrays[i], i) < 0)
      return -1;
    k->deviceOut = k->deviceOut || k->arrays[i].device;
  }
  if (out) {
    k->haveOut = true;
    PyObject *seq = PySequence_Check(out) ? PySequence_Tuple(out) : NULL;
    if (!seq) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, "out= must be a sequence of arrays");
      return -1;
    }
    if ((size_t)PyTuple_Size(seq) != e->numOut) {
      PyErr_Format(PyExc_TypeError, "out= must hold %zu array%s, not %zd",
                   e->numOut, e->numOut == 1 ? "" : "s", PyTuple_Size(seq));
      Py_DECREF(seq);
      return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < e->numOut; ++i) {
      PyObject *o = PySequence_GetItem(seq, (Py_ssize_t)i);
      snprintf(what, sizeof what, "out[%zu]", i);
      FzpyArray *a = &k->arrays[e->numIn + i];
      rc = o ? fzpyArrayGet(o, a, align, true, cuda, what) : -1;
      if (rc == 0)
        rc = check_spec(e, a, e->numIn + i);
      k->results[i] = o; /* the reference from GetItem */
      k->deviceOut = k->deviceOut || a->device;
    }
    Py_DECREF(seq);
    return rc;
  }
  for (size_t i = 0; i < e->numOut; ++i) {
    const FzpyArgSpec *s = &e->args[e->numIn + i];
    if (cuda && k->deviceOut) {
      /* Memory on the GPU, allocated with the lock held (call_run). */
      k->fresh[i] = device_array_new(e, s); /* owned by results[i] */
      k->results[i] = (PyObject *)k->fresh[i];
      if (!k->results[i])
        return -1;
      FzpyArray *a = &k->arrays[e->numIn + i];
      a->dtype = s->dtype;
      a->rank = s->rank;
      memcpy(a->shape, s->shape, sizeof a->shape);
      a->bytes = s->bytes;
      a->device = true;
      continue;
    }
    PyObject *arr = fzpyNumpyEmptyShaped(s->dtype, s->shape_tuple);
    if (!arr)
      return -1;
    k->results[i] = arr;
    snprintf(what, sizeof what, "output #%zu", i);
    if (fzpyArrayGet(arr, &k->arrays[e->numIn + i], align, true, false,
                     what) < 0)
      return -1;
  }
  return 0;
}

/* The run itself: the lock held, no GIL. */
static bool call_run_cpu(Call *k) {
  void *local[16] = {0};
  void **bufs = k->n <= 16 ? local : FZPY_MALLOC(k->n * sizeof *bufs);
  if (!bufs)
    return false;
  for (size_t i = 0; i < k->n; ++i)
    bufs[i] = k->arrays[i].data;
  bool ok = fzCpuFunctionCall(k->e->fn, bufs);
  if (bufs != local)
    FZPY_FREE(bufs);
  return ok;
}

static bool call_run_cuda(Call *k) {
  ExecutableObject *e = k->e;
  FzCuda *cu = e->cu;
  if (!fzCudaMakeCurrent(cu))
    return false;
  for (size_t i = 0; i < e->numIn; ++i) {
    FzpyArray *a = &k->arrays[i];
    FzCudaPtr dst = fzCudaCallGetArgument(e->call, i);
    if (!a->bytes)
      continue;
    bool ok = a->device ? fzCudaCopyOnDevice(cu, dst, (FzCudaPtr)(uintptr_t)a->data,
                                             a->bytes)
                        : fzCudaCopyToDevice(cu, dst, a->data, a->bytes);
    if (!ok)
      return false;
  }
  if (!fzCudaCallLaunch(e->call) || !fzCudaCallSynchronize(e->call))
    return false;
  for (size_t i = 0; i < e->numOut; ++i) {
    FzpyArray *a = &k->arrays[e->numIn + i];
    FzCudaPtr src = fzCudaCallGetArgument(e->call, e->numIn + i);
    if (k->fresh[i]) {
      if (!fzCudaAlloc(cu, a->bytes, &k->fresh[i]->ptr))
        return false;
      a->data = (void *)(uintptr_t)k->fresh[i]->ptr;
    }
    if (!a->bytes)
      continue;
    bool ok = a->device ? fzCudaCopyOnDevice(cu, (FzCudaPtr)(uintptr_t)a->data,
                                             src, a->bytes)
                        : fzCudaCopyToHost(cu, a->data, src, a->bytes);
    if (!ok)
      return false;
  }
  return true;
}

/* The result: one output itself, several as a tuple, none as None. */
static PyObject *call_result(Call *k) {
  size_t n = k->e->numOut;
  if (n == 0)
    Py_RETURN_NONE;
  for (size_t i = 0; !k->haveOut && i < n; ++i) {
    if (k->fresh[i])
      continue;
    /* numpy outputs: bf16 viewed as ml_dtypes.bfloat16 when installed. */
    PyObject *f = fzpyNumpyFinish(k->arrays[k->e->numIn + i].dtype,
                                  k->results[i]);
    k->results[i] = f;
    if (!f)
      return NULL;
  }
  if (n == 1) {
    PyObject *r = k->results[0];
    k->results[0] = NULL;
    return r;
  }
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; ++i) {
    PyTuple_SetItem(t, (Py_ssize_t)i, k->results[i]);
    k->results[i] = NULL;
  }
  return t;
}

PyObject *fzpyExecutableCall(PyObject *self, PyObject *args,
                             PyObject *kwargs) {
  ExecutableObject *e = (ExecutableObject *)self;
  Call k;
  if (call_prepare(&k, e, args, kwargs, true) < 0) {
    call_free(&k);
    return NULL;
  }
  bool ok;
  fzpyEnter(e->ctx);
  Py_BEGIN_ALLOW_THREADS
  ok = e->device == FZPY_DEVICE_CUDA ? call_run_cuda(&k) : call_run_cpu(&k);
  Py_END_ALLOW_THREADS
  PyObject *r = NULL;
  if (fzpyFinish(e->ctx, ok, NULL) == 0) {
    for (size_t i = e->numIn; i < k.n; ++i)
      fzpyArrayWriteBack(&k.arrays[i]);
    r = call_result(&k);
  }
  call_free(&k);
  return r;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

PyObject *fzpyExecutableBench(PyObject *self, PyObject *args,
                              PyObject *kwargs) {
  ExecutableObject *e = (ExecutableObject *)self;
  long iterations = 1000;
  if (kwargs) {
    PyObject *it = PyDict_GetItemString(kwargs, "iterations");
    if (!it || PyDict_Size(kwargs) != 1) {
      PyErr_SetString(PyExc_TypeError, "_bench(*inputs, iterations=N)");
      return NULL;
    }
    iterations = PyLong_AsLong(it);
    if (iterations < 1) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "iterations must be positive");
      return NULL;
    }
  }
  if (e->device != FZPY_DEVICE_CPU) {
    PyErr_SetString(PyExc_ValueError, "_bench times the CPU runtime only");
    return NULL;
  }
  Call k;
  if (call_prepare(&k, e, args, NULL, false) < 0) {
    call_free(&k);
    return NULL;
  }
  bool ok = true;
  double t0 = 0, t1 = 0;
  fzpyEnter(e->ctx);
  Py_BEGIN_ALLOW_THREADS
  ok = call_run_cpu(&k); /* warm-up */
  t0 = now_seconds();
  for (long i = 0; ok && i < iterations; ++i)
    ok = call_run_cpu(&k);
  t1 = now_seconds();
  Py_END_ALLOW_THREADS
  int rc = fzpyFinish(e->ctx, ok, NULL);
  call_free(&k);
  if (rc < 0)
    return NULL;
  return PyFloat_FromDouble((t1 - t0) / (double)iterations);
}

int fzpyInitCall(PyObject *m) {
  FzpyDeviceArrayType = (PyTypeObject *)PyType_FromSpec(&device_array_spec);
  if (!FzpyDeviceArrayType ||
      PyModule_AddObjectRef(m, "DeviceArray", (PyObject *)FzpyDeviceArrayType) <
          0)
    return -1;
  return 0;
}
