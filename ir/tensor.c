/* ir/tensor.c - host tensors (FzTensor, fz/tensor.h): creation, element
 * access with the interpreter's conversion rules, dense attributes.
 *
 * Storage is the dense-attribute format (packed little-endian, i1 one
 * byte of 0/1, f16/bf16 as IEEE bits); the host is assumed little-endian
 * as everywhere in fuse. Conversions: to a float type rounds to nearest
 * even once (fzDoubleToHalfBits/BF16Bits for the 16-bit types); from a
 * double to an integer truncates toward zero and saturates (NaN gives
 * 0); from an int64 to a narrower integer wraps. A tensor's memory comes
 * from its context and goes back there in fzTensorDestroy.
 *
 * The type lives in ir/ so that the graph interpreter, the runtimes and
 * the tools share it without the runtime depending on a dialect.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fz/tensor.h"
#include "ir/util.h"
#include "ir/type_text.h"

static bool is_int(const FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_INTEGER;
}

bool fzTensorDTypeIsSupported(const FzType *t) {
  if (!t)
    return false;
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
    return true;
  case FZ_TYPE_INTEGER: {
    unsigned w = fzTypeGetBitWidth(t);
    return w == 1 || w == 8 || w == 16 || w == 32 || w == 64;
  }
  default:
    return false;
  }
}

FzTensor *fzTensorCreate(FzContext *ctx, FzType *dtype, size_t rank,
                         const int64_t *shape) {
  char buf[64];
  if (!fzTensorDTypeIsSupported(dtype)) {
    fzEmitError(ctx, NULL, "unsupported tensor element type '%s'",
                fzTypeText(dtype, buf, sizeof buf));
    return NULL;
  }
  if (rank > FZ_TENSOR_MAX_RANK) {
    fzEmitError(ctx, NULL, "tensor rank %zu is above the maximum (%d)", rank,
                FZ_TENSOR_MAX_RANK);
    return NULL;
  }
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0 || shape[i] > FZ_MAX_DIM) {
      fzEmitError(ctx, NULL, "invalid tensor dimension %lld",
                  (long long)shape[i]);
      return NULL;
    }
    if (shape[i] != 0 && n > FZ_MAX_ELEMENTS / shape[i]) {
      fzEmitError(ctx, NULL, "tensor has too many elements");
      return NULL;
    }
    n *= shape[i];
  }
  size_t esz = fzTypeGetStorageSize(dtype), bytes;
  if (!fzMulSize((size_t)n, esz, &bytes)) {
    fzEmitError(ctx, NULL, "tensor has too many elements");
    return NULL;
  }
  FzTensor *t = fzCalloc(ctx, 1, sizeof *t);
  if (!t)
    return NULL;
  t->ctx = ctx;
  t->dtype = dtype;
  t->rank = rank;
  t->numElements = n;
  if (rank && !(t->shape = fzMalloc(ctx, rank * sizeof *t->shape))) {
    fzFree(ctx, t);
    return NULL;
  }
  if (rank)
    memcpy(t->shape, shape, rank * sizeof *shape);
  t->data = fzCalloc(ctx, bytes ? bytes : 1, 1);
  if (!t->data) {
    fzFree(ctx, t->shape);
    fzFree(ctx, t);
    return NULL;
  }
  return t;
}

FzTensor *fzTensorCreateFromType(FzContext *ctx, FzType *type) {
  char buf[128];
  if (!type || fzTypeGetKind(type) != FZ_TYPE_TENSOR ||
      !fzShapedTypeHasStaticShape(type)) {
    fzEmitError(ctx, NULL,
                "expected a statically shaped tensor type, got "
                "'%s'",
                fzTypeText(type, buf, sizeof buf));
    return NULL;
  }
  return fzTensorCreate(ctx, fzShapedTypeGetElementType(type),
                        fzShapedTypeGetRank(type), fzShapedTypeGetShape(type));
}

FzTensor *fzTensorClone(const FzTensor *t) {
  FzTensor *c = fzTensorCreate(t->ctx, t->dtype, t->rank, t->shape);
  if (c)
    memcpy(c->data, t->data, fzTensorGetNumBytes(t));
  return c;
}

void fzTensorDestroy(FzTensor *t) {
  if (!t)
    return;
  FzContext *ctx = t->ctx;
  fzFree(ctx, t->data);
  fzFree(ctx, t->shape);
  fzFree(ctx, t);
}

void fzTensorArrayDestroy(FzContext *ctx, size_t n, FzTensor **tensors) {
  if (!tensors)
    return;
  for (size_t i = 0; i < n; ++i)
    fzTensorDestroy(tensors[i]);
  fzFree(ctx, tensors);
}

FzType *fzTensorGetType(const FzTensor *t) {
  return fzTensorTypeGet(t->ctx, t->rank, t->shape, t->dtype, NULL);
}

size_t fzTensorGetNumBytes(const FzTensor *t) {
  return (size_t)t->numElements * fzTypeGetStorageSize(t->dtype);
}

/*===--- Elements -------------------------------------------------------===*/

static int64_t wrap_int(int64_t v, unsigned width) {
  if (width >= 64)
    return v;
  if (width == 1)
    return v & 1;
  uint64_t m = (UINT64_C(1) << width) - 1;
  uint64_t u = (uint64_t)v & m;
  if (u >> (width - 1))
    u |= ~m;
  return (int64_t)u;
}

static int64_t saturate_int(double v, unsigned width) {
  if (v != v)
    return 0;
  if (width == 1)
    return v != 0;
  double lim = ldexp(1.0, (int)width - 1);
  if (v >= lim)
    return width == 64 ? INT64_MAX : (int64_t)lim - 1;
  if (v < -lim)
    return width == 64 ? INT64_MIN : -(int64_t)lim;
  return (int64_t)v; /* truncates toward zero */
}

double fzTensorGetF64(const FzTensor *t, int64_t i) {
  const unsigned char *p = t->data;
  switch (fzTypeGetKind(t->dtype)) {
  case FZ_TYPE_F16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return fzHalfBitsToFloat(h);
  }
  case FZ_TYPE_BF16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return fzBF16BitsToFloat(h);
  }
  case FZ_TYPE_F32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  case FZ_TYPE_F64: {
    double d;
    memcpy(&d, p + 8 * i, 8);
    return d;
  }
  default:
    return (double)fzTensorGetI64(t, i);
  }
}

int64_t fzTensorGetI64(const FzTensor *t, int64_t i) {
  const unsigned char *p = t->data;
  if (!is_int(t->dtype))
    return saturate_int(fzTensorGetF64(t, i), 64);
  switch (fzTypeGetBitWidth(t->dtype)) {
  case 1:
    return p[i] & 1;
  case 8:
    return (int8_t)p[i];
  case 16: {
    int16_t v;
    memcpy(&v, p + 2 * i, 2);
    return v;
  }
  case 32: {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  default: {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return v;
  }
  }
}

static void store_int(FzTensor *t, int64_t i, int64_t v) {
  unsigned char *p = t->data;
  switch (fzTypeGetBitWidth(t->dtype)) {
  case 1:
    p[i] = (unsigned char)(v & 1);
    return;
  case 8: {
    int8_t x = (int8_t)wrap_int(v, 8);
    memcpy(p + i, &x, 1);
    return;
  }
  case 16: {
    int16_t x = (int16_t)wrap_int(v, 16);
    memcpy(p + 2 * i, &x, 2);
    return;
  }
  case 32: {
    int32_t x = (int32_t)wrap_int(v, 32);
    memcpy(p + 4 * i, &x, 4);
    return;
  }
  default:
    memcpy(p + 8 * i, &v, 8);
    return;
  }
}

void fzTensorSetF64(FzTensor *t, int64_t i, double v) {
  unsigned char *p = t->data;
  switch (fzTypeGetKind(t->dtype)) {
  case FZ_TYPE_F16: {
    uint16_t h = fzDoubleToHalfBits(v);
    memcpy(p + 2 * i, &h, 2);
    return;
  }
  case FZ_TYPE_BF16: {
    uint16_t h = fzDoubleToBF16Bits(v);
    memcpy(p + 2 * i, &h, 2);
    return;
  }
  case FZ_TYPE_F32: {
    float f = (float)v;
    memcpy(p + 4 * i, &f, 4);
    return;
  }
  case FZ_TYPE_F64:
    memcpy(p + 8 * i, &v, 8);
    return;
  default: {
    unsigned w = fzTypeGetBitWidth(t->dtype);
    store_int(t, i, w == 1 ? (v != 0) : saturate_int(v, w));
    return;
  }
  }
}

void fzTensorSetI64(FzTensor *t, int64_t i, int64_t v) {
  if (is_int(t->dtype))
    store_int(t, i, v);
  else
    fzTensorSetF64(t, i, (double)v);
}

/*===--- Dense attributes -----------------------------------------------===*/

FzTensor *fzTensorFromDenseAttr(FzContext *ctx, const FzAttr *a) {
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE) {
    fzEmitError(ctx, NULL, "expected a dense elements attribute");
    return NULL;
  }
  FzType *type = fzAttrGetType(a);
  FzTensor *t = fzTensorCreateFromType(ctx, type);
  if (!t)
    return NULL;
  size_t esz = fzTypeGetStorageSize(t->dtype);
  const unsigned char *src = fzDenseAttrGetData(a);
  unsigned char *dst = t->data;
  if (fzDenseAttrIsSplat(a)) {
    for (int64_t i = 0; i < t->numElements; ++i)
      memcpy(dst + (size_t)i * esz, src, esz);
  } else {
    memcpy(dst, src, fzTensorGetNumBytes(t));
  }
  if (fzTypeGetBitWidth(t->dtype) == 1 && is_int(t->dtype))
    for (int64_t i = 0; i < t->numElements; ++i)
      dst[i] &= 1;
  return t;
}

FzAttr *fzTensorToDenseAttr(const FzTensor *t) {
  FzType *type = fzTensorGetType(t);
  if (!type)
    return NULL;
  size_t esz = fzTypeGetStorageSize(t->dtype);
  size_t bytes = fzTensorGetNumBytes(t);
  const unsigned char *d = t->data;
  bool splat = t->numElements > 0;
  for (int64_t i = 1; splat && i < t->numElements; ++i)
    splat = memcmp(d, d + (size_t)i * esz, esz) == 0;
  return fzDenseAttrGet(t->ctx, type, d, splat ? esz : bytes);
}
