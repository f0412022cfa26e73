/* python/src/arrays.c - arrays in and out of fuse: element types, the
 * buffer protocol and DLPack on the way in, numpy arrays on the way out.
 *
 * Input order of preference (fzpyArrayGet): the buffer protocol (numpy
 * arrays: no Python call at all), then `__dlpack__` (torch tensors, on
 * the CPU or, for a model compiled for CUDA, on the GPU), then
 * fuse._as_array (numpy.ascontiguousarray, ml_dtypes' bfloat16 viewed
 * as its uint16 bits). Contiguous data with the alignment asked for is
 * used in place (zero copy); anything else is copied into a contiguous,
 * aligned buffer for the call (and, for an output, copied back). The
 * element type and shape must be the function's exactly: fuse converts
 * nothing silently.
 */
#include <string.h>

#include "dlpack.h"
#include "fzpy.h"

/*===--- Element types ------------------------------------------------------===*/

static const struct {
  const char *name;    /* numpy's name */
  size_t size;
  uint8_t dlCode, dlBits;
  char format;         /* struct-module format of the buffer protocol */
} kDTypes[FZPY_NUM_DTYPES] = {
    [FZPY_F16] = {"float16", 2, kDLFloat, 16, 'e'},
    [FZPY_BF16] = {"bfloat16", 2, kDLBfloat, 16, 0},
    [FZPY_F32] = {"float32", 4, kDLFloat, 32, 'f'},
    [FZPY_F64] = {"float64", 8, kDLFloat, 64, 'd'},
    [FZPY_BOOL] = {"bool", 1, kDLBool, 8, '?'},
    [FZPY_I8] = {"int8", 1, kDLInt, 8, 'b'},
    [FZPY_I16] = {"int16", 2, kDLInt, 16, 'h'},
    [FZPY_I32] = {"int32", 4, kDLInt, 32, 'i'},
    [FZPY_I64] = {"int64", 8, kDLInt, 64, 'q'},
};

FzpyDType fzpyDTypeOf(const FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
    return FZPY_F16;
  case FZ_TYPE_BF16:
    return FZPY_BF16;
  case FZ_TYPE_F32:
    return FZPY_F32;
  case FZ_TYPE_F64:
    return FZPY_F64;
  case FZ_TYPE_INTEGER:
    switch (fzTypeGetBitWidth(t)) {
    case 1:
      return FZPY_BOOL;
    case 8:
      return FZPY_I8;
    case 16:
      return FZPY_I16;
    case 32:
      return FZPY_I32;
    case 64:
      return FZPY_I64;
    }
    return FZPY_NO_DTYPE;
  default:
    return FZPY_NO_DTYPE;
  }
}

const char *fzpyDTypeName(FzpyDType d) {
  return d >= 0 && d < FZPY_NUM_DTYPES ? kDTypes[d].name : "?";
}

size_t fzpyDTypeSize(FzpyDType d) {
  return d >= 0 && d < FZPY_NUM_DTYPES ? kDTypes[d].size : 0;
}

FzType *fzpyDTypeType(FzContext *ctx, FzpyDType d) {
  switch (d) {
  case FZPY_F16:
    return fzF16TypeGet(ctx);
  case FZPY_BF16:
    return fzBF16TypeGet(ctx);
  case FZPY_F32:
    return fzF32TypeGet(ctx);
  case FZPY_F64:
    return fzF64TypeGet(ctx);
  case FZPY_BOOL:
    return fzIntegerTypeGet(ctx, 1);
  case FZPY_I8:
    return fzIntegerTypeGet(ctx, 8);
  case FZPY_I16:
    return fzIntegerTypeGet(ctx, 16);
  case FZPY_I32:
    return fzIntegerTypeGet(ctx, 32);
  case FZPY_I64:
    return fzIntegerTypeGet(ctx, 64);
  default:
    return NULL;
  }
}

void fzpyFormatSpec(char *buf, size_t size, FzpyDType d, size_t rank,
                    const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, size, "%s[", fzpyDTypeName(d));
  for (size_t i = 0; i < rank && n < size; ++i)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  if (n < size)
    snprintf(buf + n, size - n, "]");
}

/*===--- numpy, imported on first use ---------------------------------------===*/

static PyObject *gEmpty;                    /* numpy.empty */
static PyObject *gDTypes[FZPY_NUM_DTYPES];  /* numpy dtype objects */
static PyObject *gBF16;                     /* ml_dtypes.bfloat16, or None */
PyObject *fzpyAsArray;                      /* fuse._as_array */

static int import_numpy(void) {
  if (gEmpty)
    return 0;
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np)
    return -1;
  PyObject *dtype = PyObject_GetAttrString(np, "dtype");
  gEmpty = PyObject_GetAttrString(np, "empty");
  int rc = dtype && gEmpty ? 0 : -1;
  for (int d = 0; rc == 0 && d < FZPY_NUM_DTYPES; ++d) {
    const char *name = d == FZPY_BF16 ? "uint16" : kDTypes[d].name;
    gDTypes[d] = PyObject_CallFunction(dtype, "s", name);
    if (!gDTypes[d])
      rc = -1;
  }
  Py_XDECREF(dtype);
  Py_DECREF(np);
  PyObject *ml = rc == 0 ? PyImport_ImportModule("ml_dtypes") : NULL;
  if (ml) {
    gBF16 = PyObject_GetAttrString(ml, "bfloat16");
    Py_DECREF(ml);
  }
  if (!gBF16) {
    PyErr_Clear();
    gBF16 = Py_NewRef(Py_None);
  }
  if (rc < 0)
    Py_CLEAR(gEmpty);
  return rc;
}

PyObject *fzpyNumpyDType(FzpyDType d) {
  if (import_numpy() < 0)
    return NULL;
  return gDTypes[d];
}

PyObject *fzpyNumpyEmpty(FzpyDType d, size_t rank, const int64_t *shape) {
  if (import_numpy() < 0)
    return NULL;
  PyObject *tup = PyTuple_New((Py_ssize_t)rank);
  for (size_t i = 0; tup && i < rank; ++i) {
    PyObject *v = PyLong_FromLongLong(shape[i]);
    if (!v)
      Py_CLEAR(tup);
    else
      PyTuple_SetItem(tup, (Py_ssize_t)i, v);
  }
  PyObject *a = tup ? PyObject_CallFunctionObjArgs(gEmpty, tup, gDTypes[d],
                                                   NULL)
                    : NULL;
  Py_XDECREF(tup);
  return a;
}

/* numpy.empty of a precomputed shape tuple. */
PyObject *fzpyNumpyEmptyShaped(FzpyDType d, PyObject *shape) {
  if (import_numpy() < 0)
    return NULL;
  return PyObject_CallFunctionObjArgs(gEmpty, shape, gDTypes[d], NULL);
}

/* bf16 outputs are made as uint16 and viewed as ml_dtypes.bfloat16 when
 * it is installed. Steals arr. */
PyObject *fzpyNumpyFinish(FzpyDType d, PyObject *arr) {
  if (d != FZPY_BF16 || !arr || gBF16 == Py_None)
    return arr;
  PyObject *v = PyObject_CallMethod(arr, "view", "O", gBF16);
  Py_DECREF(arr);
  return v;
}

PyObject *fzpyNumpyEmptyView(FzpyDType d, size_t rank, const int64_t *shape,
                             Py_buffer *view) {
  PyObject *a = fzpyNumpyEmpty(d, rank, shape);
  if (a && PyObject_GetBuffer(a, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) <
               0)
    Py_CLEAR(a);
  return a;
}

PyObject *fzpyTensorToNumpy(const FzTensor *t) {
  FzpyDType d = fzpyDTypeOf(t->dtype);
  if (d == FZPY_NO_DTYPE)
    return fzpyRaise("fuse: a result has an element type numpy cannot hold");
  Py_buffer v;
  PyObject *a = fzpyNumpyEmptyView(d, t->rank, t->shape, &v);
  if (!a)
    return NULL;
  size_t bytes = fzTensorGetNumBytes(t);
  if (bytes && (size_t)v.len == bytes)
    memcpy(v.buf, t->data, bytes);
  PyBuffer_Release(&v);
  return fzpyNumpyFinish(d, a);
}

/*===--- Reading an array argument ------------------------------------------===*/

/* The element type of a buffer format ("f", "<f", "=q", ...); uint16
 * ('H') is bf16's bits. NO_DTYPE for anything else. */
static FzpyDType dtype_of_format(const char *fmt, Py_ssize_t itemsize,
                                 bool *bigEndian) {
  *bigEndian = false;
  if (!fmt)
    fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') {
    fmt++;
  } else if (*fmt == '>' || *fmt == '!') {
    *bigEndian = true;
    fmt++;
  }
  if (!fmt[0] || fmt[1])
    return FZPY_NO_DTYPE;
  char c = fmt[0];
  if ((c == 'l' || c == 'q') && itemsize == 8)
    return FZPY_I64;
  if (c == 'i' || (c == 'l' && itemsize == 4))
    return itemsize == 4 ? FZPY_I32 : FZPY_NO_DTYPE;
  if (c == 'H' && itemsize == 2)
    return FZPY_BF16;
  for (int d = 0; d < FZPY_NUM_DTYPES; ++d)
    if (kDTypes[d].format == c && (size_t)itemsize == kDTypes[d].size)
      return (FzpyDType)d;
  return FZPY_NO_DTYPE;
}

static FzpyDType dtype_of_dlpack(DLDataType t) {
  if (t.lanes != 1)
    return FZPY_NO_DTYPE;
  for (int d = 0; d < FZPY_NUM_DTYPES; ++d)
    if (kDTypes[d].dlCode == t.code && kDTypes[d].dlBits == t.bits)
      return (FzpyDType)d;
  /* uint16 holds bf16's bits, as in the buffer protocol. */
  if (t.code == kDLUInt && t.bits == 16)
    return FZPY_BF16;
  return FZPY_NO_DTYPE;
}

/* Raises the error of an element type fuse has not, named as obj says
 * ("uint8", ...); returns -1. */
static int unsupported_dtype(PyObject *obj, const char *what) {
  PyObject *dt = PyObject_GetAttrString(obj, "dtype");
  PyObject *d = dt ? PyObject_Str(dt) : NULL;
  if (!dt) {
    PyErr_Clear();
    d = PyObject_Repr((PyObject *)Py_TYPE(obj));
  }
  Py_XDECREF(dt);
  fzpyRaise("fuse: %s has element type %S, which fuse does not support", what,
            d ? d : Py_None);
  Py_XDECREF(d);
  return -1;
}

static bool is_contiguous(size_t rank, const int64_t *shape,
                          const int64_t *strides, size_t itemsize) {
  int64_t want = (int64_t)itemsize;
  for (size_t i = rank; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != want)
      return false;
    want *= shape[i];
  }
  return true;
}

/* Copies between the strided layout (byte strides) and contiguous dst,
 * one dimension at a time. */
static void strided_copy(char *contig, char *strided, size_t rank,
                         const int64_t *shape, const int64_t *strides,
                         size_t itemsize, bool toContig) {
  if (rank == 0) {
    if (toContig)
      memcpy(contig, strided, itemsize);
    else
      memcpy(strided, contig, itemsize);
    return;
  }
  size_t inner = itemsize;
  for (size_t i = 1; i < rank; ++i)
    inner *= (size_t)shape[i];
  for (int64_t k = 0; k < shape[0]; ++k)
    strided_copy(contig + (size_t)k * inner, strided + k * strides[0],
                 rank - 1, shape + 1, strides + 1, itemsize, toContig);
}

/* Gives a its own contiguous copy aligned to align (from the strided
 * data at src with byte strides, or the contiguous data at src when
 * strides is NULL); -1 on out of memory. */
static int make_copy(FzpyArray *a, void *src, const int64_t *strides,
                     size_t align, bool fill) {
  size_t al = align ? align : 16;
  a->copy = FZPY_MALLOC(a->bytes + al);
  if (!a->copy) {
    PyErr_NoMemory();
    return -1;
  }
  char *at = (char *)(((uintptr_t)a->copy + al - 1) / al * al);
  if (fill && a->bytes) {
    if (strides)
      strided_copy(at, src, a->rank, a->shape, strides,
                   fzpyDTypeSize(a->dtype), true);
    else
      memcpy(at, src, a->bytes);
  }
  if (strides) {
    a->strided = src;
    memcpy(a->strides, strides, a->rank * sizeof *strides);
  } else {
    a->strided = NULL;
  }
  a->data = at;
  return 0;
}

static int set_shape(FzpyArray *a, int ndim, const Py_ssize_t *pyShape,
                     const int64_t *dlShape, const char *what) {
  if (ndim < 0 || ndim > FZ_TENSOR_MAX_RANK) {
    fzpyRaise("fuse: %s has rank %d; fuse takes at most %d", what, ndim,
              FZ_TENSOR_MAX_RANK);
    return -1;
  }
  a->rank = (size_t)ndim;
  size_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    a->shape[i] = pyShape ? (int64_t)pyShape[i] : dlShape[i];
    if (a->shape[i] < 0) {
      fzpyRaise("fuse: %s has a negative dimension", what);
      return -1;
    }
    n *= (size_t)a->shape[i];
  }
  a->bytes = n * fzpyDTypeSize(a->dtype);
  return 0;
}

/* The buffer protocol. 1: not an exporter (try another way), 0, -1. */
static int from_buffer(PyObject *obj, FzpyArray *a, size_t align,
                       bool writable, const char *what) {
  if (!PyObject_CheckBuffer(obj))
    return 1;
  int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, &a->view, flags) < 0) {
    if (writable) {
      PyErr_Clear();
      if (PyObject_GetBuffer(obj, &a->view, PyBUF_RECORDS_RO) == 0) {
        PyBuffer_Release(&a->view);
        fzpyRaise("fuse: %s is read-only", what);
        return -1;
      }
    }
    PyErr_Clear();
    return 1; /* e.g. a dtype the buffer protocol cannot name */
  }
  a->haveView = true;
  a->writable = !a->view.readonly;
  bool big;
  a->dtype = dtype_of_format(a->view.format, a->view.itemsize, &big);
  if (big) {
    fzpyRaise("fuse: %s is big-endian; fuse takes native (little-endian) "
              "data", what);
    return -1;
  }
  if (a->dtype == FZPY_NO_DTYPE)
    return unsupported_dtype(obj, what);
  if (set_shape(a, a->view.ndim, a->view.shape, NULL, what) < 0)
    return -1;
  int64_t strides[FZ_TENSOR_MAX_RANK];
  for (size_t i = 0; i < a->rank; ++i)
    strides[i] = a->view.strides ? (int64_t)a->view.strides[i] : 0;
  bool contig = !a->view.strides ||
                is_contiguous(a->rank, a->shape, strides, a->view.itemsize);
  a->data = a->view.buf;
  if (contig && (!align || (uintptr_t)a->data % align == 0))
    return 0;
  return make_copy(a, a->view.buf, contig ? NULL : strides, align, true);
}

/* The DLManagedTensor of obj.__dlpack__(**kw) (kw may be NULL), taken
 * out of its capsule; NULL with an exception. */
static DLManagedTensor *take_dlpack(PyObject *fn, PyObject *kw) {
  PyObject *none = PyTuple_New(0);
  PyObject *cap = none ? PyObject_Call(fn, none, kw) : NULL;
  Py_XDECREF(none);
  if (!cap)
    return NULL;
  DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
  if (m && PyCapsule_SetName(cap, "used_dltensor") < 0)
    m = NULL;
  Py_DECREF(cap);
  return m;
}

static void drop_dlpack(DLManagedTensor *m) {
  if (m && m->deleter)
    m->deleter(m);
}

/* __dlpack__. 1: not a DLPack object, 0, -1. */
static int from_dlpack(PyObject *obj, FzpyArray *a, size_t align,
                       bool allowDevice, const char *what) {
  PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__");
  if (!fn) {
    PyErr_Clear();
    return 1;
  }
  /* Asked without a stream first: __dlpack_device__ can cost more than
   * the export (12 us in PyTorch 1.13), and CPU memory needs none. */
  DLManagedTensor *m = take_dlpack(fn, NULL);
  if (!m) {
    /* An export the producer refuses (PyTorch 1.13's bool tensors): the
     * slow path (numpy.ascontiguousarray) may still take it. */
    Py_DECREF(fn);
    PyErr_Clear();
    return 1;
  }
  int32_t dev = m->dl_tensor.device.device_type;
  bool cuda = dev == kDLCUDA || dev == kDLCUDAManaged;
  if (cuda && !allowDevice) {
    drop_dlpack(m);
    Py_DECREF(fn);
    fzpyRaise("fuse: %s is on a CUDA device, but the model was compiled for "
              "the CPU (compile with device='cuda', or move it: .cpu())",
              what);
    return -1;
  }
  if (cuda) {
    /* Again with stream 1, the legacy default stream that fuse's copies
     * and launches use: the producer orders its pending work before it. */
    drop_dlpack(m);
    PyObject *kw = Py_BuildValue("{s:i}", "stream", 1);
    m = kw ? take_dlpack(fn, kw) : NULL;
    Py_XDECREF(kw);
  }
  Py_DECREF(fn);
  if (!m)
    return -1;
  a->dlpack = m;
  DLTensor *t = &m->dl_tensor;
  a->dtype = dtype_of_dlpack(t->dtype);
  if (a->dtype == FZPY_NO_DTYPE)
    return unsupported_dtype(obj, what);
  if (set_shape(a, t->ndim, NULL, t->shape, what) < 0)
    return -1;
  a->device = t->device.device_type == kDLCUDA ||
              t->device.device_type == kDLCUDAManaged;
  if (a->device && t->device.device_id != 0) {
    fzpyRaise("fuse: %s is on CUDA device %d; fuse runs on device 0", what,
              (int)t->device.device_id);
    return -1;
  }
  if (!a->device && t->device.device_type != kDLCPU &&
      t->device.device_type != kDLCUDAHost) {
    fzpyRaise("fuse: %s is on DLPack device type %d; fuse takes CPU and "
              "CUDA memory", what, (int)t->device.device_type);
    return -1;
  }
  a->writable = true;
  a->data = (char *)t->data + t->byte_offset;
  size_t itemsize = fzpyDTypeSize(a->dtype);
  int64_t strides[FZ_TENSOR_MAX_RANK];
  for (size_t i = 0; i < a->rank; ++i)
    strides[i] = t->strides ? t->strides[i] * (int64_t)itemsize : 0;
  bool contig = !t->strides ||
                is_contiguous(a->rank, a->shape, strides, itemsize);
  if (a->device) {
    if (!contig) {
      fzpyRaise("fuse: %s is a non-contiguous CUDA tensor (call "
                ".contiguous() first)", what);
      return -1;
    }
    return 0;
  }
  if (contig && (!align || (uintptr_t)a->data % align == 0))
    return 0;
  return make_copy(a, a->data, contig ? NULL : strides, align, true);
}

int fzpyArrayGet(PyObject *obj, FzpyArray *a, size_t align, bool writable,
                 bool allowDevice, const char *what) {
  memset(a, 0, sizeof *a);
  int rc = from_buffer(obj, a, align, writable, what);
  if (rc == 1)
    rc = from_dlpack(obj, a, align, allowDevice, what);
  if (rc == 1 && fzpyAsArray && !writable) {
    /* Lists, scalars, ml_dtypes' bfloat16: converted by Python. */
    PyObject *conv = PyObject_CallFunctionObjArgs(fzpyAsArray, obj, NULL);
    if (!conv)
      return -1;
    a->keep = conv;
    rc = from_buffer(conv, a, align, false, what);
  }
  if (rc == 1) {
    PyErr_Format(PyExc_TypeError,
                 "fuse: %s must be an array (numpy, or an object with "
                 "__dlpack__), not %R",
                 what, (PyObject *)Py_TYPE(obj));
    return -1;
  }
  return rc;
}

void fzpyArrayWriteBack(FzpyArray *a) {
  if (a->copy && a->strided && a->bytes)
    strided_copy(a->data, a->strided, a->rank, a->shape, a->strides,
                 fzpyDTypeSize(a->dtype), false);
  else if (a->copy && a->haveView && a->bytes && a->view.buf != a->data)
    memcpy(a->view.buf, a->data, a->bytes);
  else if (a->copy && a->dlpack && a->bytes) {
    DLTensor *t = &((DLManagedTensor *)a->dlpack)->dl_tensor;
    void *dst = (char *)t->data + t->byte_offset;
    if (dst != a->data)
      memcpy(dst, a->data, a->bytes);
  }
}

void fzpyArrayRelease(FzpyArray *a) {
  if (a->haveView)
    PyBuffer_Release(&a->view);
  a->haveView = false;
  if (a->dlpack) {
    DLManagedTensor *m = a->dlpack;
    if (m->deleter)
      m->deleter(m);
    a->dlpack = NULL;
  }
  Py_CLEAR(a->keep);
  FZPY_FREE(a->copy);
  a->copy = NULL;
}
