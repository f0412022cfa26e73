/* importers/onnx/tensor.c - ONNX TensorProto contents: the dtype mapping,
 * decoding of the typed fields, raw_data and external data into packed
 * little-endian bytes (the storage format of dense attributes and host
 * tensors), and the public readers of serialized TensorProto files used
 * by the conformance runner.
 *
 * dtypes: FLOAT f32, DOUBLE f64, FLOAT16 f16, BFLOAT16 bf16, INT8 i8,
 * INT16 i16, INT32 i32, INT64 i64, BOOL i1; UINT8, UINT16, UINT32 and
 * UINT64 as i8, i16, i32 and i64 holding the same bits where the importer
 * reads them (tensors; the importer marks the value unsigned:
 * unsigned.c). Strings and complex numbers are unsupported.
 *
 * The host is assumed little-endian (raw_data is little-endian by the
 * ONNX spec and is copied as is).
 *
 * External data (data_location EXTERNAL) is read from a file named by
 * the "location" entry relative to the model's folder; absolute paths
 * and ".." components are refused, as the ONNX checker does, and so is a
 * location whose real path (through symbolic links) leaves the folder.
 */
/* realpath is XSI (the build defines _POSIX_C_SOURCE only). */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "importers/onnx/onnx_internal.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

FzType *fzOnnxElementType(FzContext *ctx, int32_t dataType) {
  switch (dataType) {
  case DT(FLOAT): return fzF32TypeGet(ctx);
  case DT(DOUBLE): return fzF64TypeGet(ctx);
  case DT(FLOAT16): return fzF16TypeGet(ctx);
  case DT(BFLOAT16): return fzBF16TypeGet(ctx);
  case DT(INT8): return fzIntegerTypeGet(ctx, 8);
  case DT(INT16): return fzIntegerTypeGet(ctx, 16);
  case DT(INT32): return fzIntegerTypeGet(ctx, 32);
  case DT(INT64): return fzIntegerTypeGet(ctx, 64);
  case DT(BOOL): return fzIntegerTypeGet(ctx, 1);
  default: return NULL;
  }
}

FzType *fzOnnxElementTypeU8(FzContext *ctx, int32_t dataType,
                            bool *isUnsigned) {
  unsigned bits = dataType == DT(UINT8)    ? 8
                  : dataType == DT(UINT16) ? 16
                  : dataType == DT(UINT32) ? 32
                  : dataType == DT(UINT64) ? 64
                                           : 0;
  *isUnsigned = bits != 0;
  return bits ? fzIntegerTypeGet(ctx, bits)
              : fzOnnxElementType(ctx, dataType);
}

const char *fzOnnxDataTypeName(int32_t dataType) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",
      "INT16",     "INT32",  "INT64",     "STRING",     "BOOL",
      "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",     "COMPLEX64",
      "COMPLEX128", "BFLOAT16",
      /* Newer than Debian's onnx.proto (its enum ends at BFLOAT16); the
       * fields are plain int32s, so models carry them all the same. */
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
  if (dataType >= 0 && (size_t)dataType < sizeof names / sizeof names[0])
    return names[dataType];
  return "an unknown dtype";
}

/*===--- Decoding --------------------------------------------------------===*/

/* The decoded contents of one TensorProto. */
typedef struct Decoded {
  FzType *elt;
  size_t rank;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  int64_t count;
  void *data; /* count * storage size bytes, fzMalloc'd (NULL if 0) */
  size_t numBytes;
} Decoded;

/* Where decoding writes its error message (the caller reports it: as a
 * node's error during an import, at the file otherwise). */
typedef struct Reporter {
  FzContext *ctx;
  char msg[512];
} Reporter;

static bool report(Reporter *r, const char *fmt, ...) FZ_PRINTF(2, 3);
static bool report(Reporter *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  return false;
}

/* Parses an external-data "offset" or "length" value: decimal digits
 * only, at most INT64_MAX; false otherwise. */
static bool parse_size(const char *s, long long *out) {
  if (!*s)
    return false;
  long long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9' || v > (INT64_MAX - (*s - '0')) / 10)
      return false;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return true;
}

/* Whether the real path `path` lies inside the real folder `dir`. */
static bool path_within(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return path[0] == '/';
  return !strncmp(path, dir, n) && path[n] == '/';
}

/* Reads the `expected` bytes at `offset` of baseDir/location into a new
 * buffer *dst (NULL when expected is 0). The buffer is allocated only once
 * the file is known to hold those bytes: a tiny model may declare a tensor
 * of 2^48 elements, and its size must not reach the allocator (found by
 * fuzz_onnx: a 4 TB malloc, an out-of-memory abort under ASan).
 *
 * The file must stay inside the model's folder: the location must be
 * relative without "..", and its real path (symbolic links resolved) must
 * lie under the folder's real path, so that a model cannot read
 * /etc/passwd as a constant through a link. It must be a regular file
 * (not a FIFO or a device that would block or never end). */
static bool read_external(Reporter *r, const char *baseDir,
                          const Onnx__TensorProto *t, void **dst,
                          size_t expected) {
  *dst = NULL;
  const char *location = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; ++i) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key || !e->value)
      continue;
    if (!strcmp(e->key, "location")) {
      location = e->value;
    } else if ((!strcmp(e->key, "offset") &&
                !parse_size(e->value, &offset)) ||
               (!strcmp(e->key, "length") &&
                !parse_size(e->value, &length))) {
      return report(r, "external data '%s' must be a non-negative integer "
                       "(at most 2^63 - 1), got '%s'", e->key, e->value);
    }
  }
  if (!location || !*location)
    return report(r, "external data has no 'location'");
  if (!baseDir)
    return report(r, "external data '%s' cannot be read: the model was "
                     "not loaded from a file", location);
  if (location[0] == '/' || strstr(location, ".."))
    return report(r, "external data location '%s' must be a relative path "
                     "inside the model's folder", location);
  if (length >= 0 && (unsigned long long)length != expected)
    return report(r, "external data '%s' has length %lld but the tensor "
                     "needs %zu bytes", location, length, expected);
  size_t plen = strlen(baseDir) + strlen(location) + 2;
  char *path = fzMalloc(r->ctx, plen);
  if (!path)
    return report(r, "out of memory");
  snprintf(path, plen, "%s/%s", baseDir, location);
  char *real = realpath(path, NULL);
  int err = errno;
  char *realBase = real ? realpath(baseDir, NULL) : NULL;
  err = real ? errno : err;
  struct stat st;
  FILE *f = NULL;
  bool ok = false;
  if (!real || !realBase) {
    report(r, "external data file '%s' cannot be read: %s", path,
           strerror(err));
  } else if (!path_within(real, realBase)) {
    report(r, "external data location '%s' leads outside the model's "
              "folder (to '%s')", location, real);
  } else if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
    report(r, "external data file '%s' is not a regular file", path);
  } else if (!(f = fopen(real, "rb"))) {
    report(r, "external data file '%s' cannot be read: %s", path,
           strerror(errno));
  } else if (offset > (long long)st.st_size ||
             expected > (unsigned long long)(st.st_size - offset) ||
             fseeko(f, (off_t)offset, SEEK_SET) != 0) {
    report(r, "external data file '%s' is too short (needs %zu bytes at "
              "offset %lld)", path, expected, offset);
  } else if (expected && !(*dst = fzMalloc(r->ctx, expected))) {
    report(r, "out of memory (%zu bytes)", expected);
  } else if (expected && fread(*dst, 1, expected, f) != expected) {
    report(r, "external data file '%s' is too short (needs %zu bytes at "
              "offset %lld)", path, expected, offset);
  } else {
    ok = true;
  }
  if (f)
    fclose(f);
  free(real);     /* plain-alloc: realpath's */
  free(realBase); /* plain-alloc: realpath's */
  fzFree(r->ctx, path);
  if (!ok) {
    fzFree(r->ctx, *dst);
    *dst = NULL;
  }
  return ok;
}

/* Stores count elements from a typed field into d->data. */
static bool decode_typed(Reporter *r, const Onnx__TensorProto *t,
                         int32_t dataType, Decoded *d) {
  size_t have = 0;
  unsigned char *p = d->data;
  int64_t n = d->count;
  switch (dataType) {
  case DT(FLOAT):
    have = t->n_float_data;
    if (have && (int64_t)have == n)
      memcpy(p, t->float_data, have * sizeof(float));
    break;
  case DT(DOUBLE):
    have = t->n_double_data;
    if (have && (int64_t)have == n)
      memcpy(p, t->double_data, have * sizeof(double));
    break;
  case DT(INT64):
    have = t->n_int64_data;
    if (have && (int64_t)have == n)
      memcpy(p, t->int64_data, have * sizeof(int64_t));
    break;
  case DT(INT32):
  case DT(INT16):
  case DT(INT8):
  case DT(UINT8):
  case DT(UINT16):
  case DT(BOOL):
  case DT(FLOAT16):
  case DT(BFLOAT16): {
    have = t->n_int32_data;
    if ((int64_t)have != n)
      break;
    size_t sz = fzTypeGetStorageSize(d->elt);
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = t->int32_data[i];
      if (dataType == DT(BOOL))
        v = v != 0;
      if (sz == 4) {
        memcpy(p + 4 * i, &v, 4);
      } else if (sz == 2) {
        int16_t h = (int16_t)(uint16_t)(uint32_t)v;
        memcpy(p + 2 * i, &h, 2);
      } else {
        p[i] = (unsigned char)v;
      }
    }
    break;
  }
  case DT(UINT32):
  case DT(UINT64): {
    /* Both live in uint64_data (onnx.proto); UINT32 keeps the low bits. */
    have = t->n_uint64_data;
    if ((int64_t)have != n)
      break;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = t->uint64_data[i];
      if (dataType == DT(UINT32)) {
        uint32_t w = (uint32_t)v;
        memcpy(p + 4 * i, &w, 4);
      } else {
        memcpy(p + 8 * i, &v, 8);
      }
    }
    break;
  }
  default:
    break;
  }
  if ((int64_t)have != n)
    return report(r, "holds %zu values but its shape has %lld elements",
                  have, (long long)n);
  return true;
}

/* Decodes t; on success the caller frees d->data (fzFree). `as16`, when
 * f16 or bf16, is the type UINT16 data is reinterpreted as. */
static bool decode(Reporter *r, const char *baseDir,
                   const Onnx__TensorProto *t, FzType *as16, Decoded *d) {
  memset(d, 0, sizeof *d);
  if (t->segment)
    return report(r, "unsupported segmented tensor");
  bool isUnsigned;
  d->elt = fzOnnxElementTypeU8(r->ctx, t->data_type, &isUnsigned);
  int32_t dataType = t->data_type;
  if (dataType == DT(UINT16) && as16 &&
      (fzTypeGetKind(as16) == FZ_TYPE_BF16 ||
       fzTypeGetKind(as16) == FZ_TYPE_F16)) {
    d->elt = as16;
    dataType = DT(INT16);
  }
  if (!d->elt)
    return report(r, "unsupported dtype %s",
                  fzOnnxDataTypeName(t->data_type));
  if (t->n_dims > FZ_GRAPH_MAX_RANK)
    return report(r, "unsupported rank %zu (at most %d)", t->n_dims,
                  FZ_GRAPH_MAX_RANK);
  d->rank = t->n_dims;
  d->count = 1;
  for (size_t i = 0; i < t->n_dims; ++i) {
    int64_t dim = t->dims[i];
    if (dim < 0 || dim > FZ_MAX_DIM)
      return report(r, "has an invalid dimension %lld", (long long)dim);
    d->shape[i] = dim;
    if (dim && d->count > FZ_MAX_ELEMENTS / dim)
      return report(r, "has too many elements");
    d->count *= dim;
  }
  size_t sz = fzTypeGetStorageSize(d->elt);
  d->numBytes = (size_t)d->count * sz;
  /* Never allocate what the proto cannot fill: a 25-byte model declaring
   * a billion elements must not make us allocate gigabytes (found by
   * fuzz_onnx). Inline data has to hold at least `count` elements;
   * external data is checked against the file by read_external. */
  bool external = t->has_data_location &&
      t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (!external) {
    size_t have = t->has_raw_data
                      ? t->raw_data.len / (sz ? sz : 1)
                      : t->n_float_data + t->n_int32_data + t->n_int64_data +
                            t->n_double_data + t->n_uint64_data;
    if ((size_t)d->count > have)
      return report(r, "holds %zu elements but its shape needs %lld", have,
                    (long long)d->count);
  }
  if (!external && d->numBytes && !(d->data = fzMalloc(r->ctx, d->numBytes)))
    return report(r, "out of memory (%zu bytes)", d->numBytes);
  bool ok;
  if (external) {
    ok = read_external(r, baseDir, t, &d->data, d->numBytes);
  } else if (t->has_raw_data) {
    ok = t->raw_data.len == d->numBytes;
    if (!ok)
      report(r, "raw_data holds %zu bytes but %lld elements of %s need %zu",
             t->raw_data.len, (long long)d->count,
             fzOnnxDataTypeName(t->data_type), d->numBytes);
    else if (d->numBytes)
      memcpy(d->data, t->raw_data.data, d->numBytes);
  } else {
    ok = decode_typed(r, t, dataType, d);
  }
  if (ok && t->data_type == DT(BOOL)) {
    unsigned char *p = d->data;
    for (int64_t i = 0; i < d->count; ++i)
      p[i] = p[i] != 0;
  }
  if (!ok) {
    fzFree(r->ctx, d->data);
    d->data = NULL;
  }
  return ok;
}

FzAttr *fzOnnxTensorToAttr(FzOnnxImporter *im, const Onnx__TensorProto *t,
                           const char *what) {
  Reporter r = {im->ctx, ""};
  Decoded d;
  if (!decode(&r, im->baseDir, t, NULL, &d)) {
    if (im->node)
      fzOnnxError(im, "%s: %s", what, r.msg);
    else
      fzOnnxModelError(im, "%s: %s", what, r.msg);
    return NULL;
  }
  FzType *type = fzTensorTypeGet(im->ctx, d.rank, d.shape, d.elt, NULL);
  static const char kEmpty[1] = {0}; /* data of an empty tensor */
  FzAttr *a = type ? fzDenseAttrGet(im->ctx, type,
                                    d.data ? (const void *)d.data : kEmpty,
                                    d.numBytes)
                   : NULL;
  fzFree(im->ctx, d.data);
  return a;
}

/*===--- Public readers of TensorProto files -------------------------===*/

static void *pb_alloc(void *ud, size_t size) { return fzMalloc(ud, size); }
static void pb_free(void *ud, void *p) {
  if (p)
    fzFree(ud, p);
}

static FzTensor *read_buffer(FzContext *ctx, const void *data, size_t size,
                             const char *name, FzType *dtype,
                             int32_t *dataType) {
  *dataType = 0;
  ProtobufCAllocator alloc = {pb_alloc, pb_free, ctx};
  FzLoc *loc = fzNameLocGet(ctx, fzStringRefFromCString(name), NULL);
  Onnx__TensorProto *t =
      size <= FZ_ONNX_MAX_MODEL_SIZE && fzOnnxLooksLikeProtobuf(data, size)
          ? onnx__tensor_proto__unpack(&alloc, size, data)
          : NULL;
  if (!t) {
    fzEmitError(ctx, loc, "not a valid serialized ONNX TensorProto (the "
                          "protobuf data is truncated or malformed)");
    return NULL;
  }
  Reporter r = {ctx, ""};
  Decoded d;
  FzTensor *out = NULL;
  *dataType = t->data_type;
  if (!decode(&r, NULL, t, dtype, &d)) {
    fzEmitError(ctx, loc, "tensor '%s': %s",
                t->name && *t->name ? t->name : "", r.msg);
  } else if (dtype && d.elt != dtype) {
    fzEmitError(ctx, loc, "tensor '%s': has dtype %s, not the one expected",
                t->name ? t->name : "", fzOnnxDataTypeName(t->data_type));
    fzFree(ctx, d.data);
  } else {
    out = fzTensorCreate(ctx, d.elt, d.rank, d.shape);
    if (out && d.numBytes)
      memcpy(out->data, d.data, d.numBytes);
    fzFree(ctx, d.data);
  }
  onnx__tensor_proto__free_unpacked(t, &alloc);
  return out;
}

FzTensor *fzOnnxReadTensorBufferAs(FzContext *ctx, const void *data,
                                   size_t size, const char *name,
                                   FzType *dtype) {
  int32_t dataType;
  return read_buffer(ctx, data, size, name, dtype, &dataType);
}

FzTensor *fzOnnxReadTensorBuffer(FzContext *ctx, const void *data,
                                 size_t size, const char *name) {
  return fzOnnxReadTensorBufferAs(ctx, data, size, name, NULL);
}

FzTensor *fzOnnxReadTensorFile(FzContext *ctx, const char *path) {
  return fzOnnxReadTensorFileAs(ctx, path, NULL);
}

static FzTensor *read_file(FzContext *ctx, const char *path, FzType *dtype,
                           int32_t *dataType) {
  FzBuf b;
  fzBufInit(&b, ctx);
  FzTensor *t = NULL;
  *dataType = 0;
  if (fzOnnxReadFile(ctx, path, &b))
    t = read_buffer(ctx, b.data ? b.data : "", b.len, path, dtype, dataType);
  fzBufFree(&b);
  return t;
}

FzTensor *fzOnnxReadTensorFileAs(FzContext *ctx, const char *path,
                                 FzType *dtype) {
  int32_t dataType;
  return read_file(ctx, path, dtype, &dataType);
}

FzTensor *fzOnnxReadTensorFileWithDataType(FzContext *ctx, const char *path,
                                           int32_t *dataType) {
  return read_file(ctx, path, NULL, dataType);
}
