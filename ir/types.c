/* ir/types.c - uniqued types.
 *
 * A type is built as a key on the stack, hashed, and looked up in the
 * context's type table; on a miss the key is copied into the arena
 * (arrays included). Equal types are therefore the same pointer. Shaped
 * types check their dimensions here, so no caller can build a tensor
 * whose element count overflows.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "ir/internal.h"

static uint32_t type_hash(const FzType *k) {
  uint32_t h = fzHashCombine(0x7e57u, (uint64_t)k->kind);
  switch (k->kind) {
  case FZ_TYPE_INTEGER:
    h = fzHashCombine(h, k->u.width);
    break;
  case FZ_TYPE_TENSOR:
  case FZ_TYPE_VECTOR:
  case FZ_TYPE_BUFFER: {
    size_t rank = k->u.shaped.rank;
    h = fzHashCombine(h, rank);
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.shaped.elt);
    if (rank != FZ_UNRANKED)
      for (size_t i = 0; i < rank; ++i) {
        h = fzHashCombine(h, (uint64_t)k->u.shaped.shape[i]);
        if (k->u.shaped.strides)
          h = fzHashCombine(h, (uint64_t)k->u.shaped.strides[i]);
      }
    h = fzHashCombine(h, k->u.shaped.space);
    break;
  }
  case FZ_TYPE_FUNCTION: {
    size_t n = k->u.func.numInputs + k->u.func.numResults;
    h = fzHashCombine(h, k->u.func.numInputs);
    for (size_t i = 0; i < n; ++i)
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.func.types[i]);
    break;
  }
  case FZ_TYPE_OPAQUE:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.opaque.dialect);
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.opaque.body);
    break;
  default:
    break;
  }
  return h;
}

static bool type_eq(const void *ev, const void *kv) {
  const FzType *e = ev, *k = kv;
  if (e->kind != k->kind)
    return false;
  switch (k->kind) {
  case FZ_TYPE_INTEGER:
    return e->u.width == k->u.width;
  case FZ_TYPE_TENSOR:
  case FZ_TYPE_VECTOR:
  case FZ_TYPE_BUFFER: {
    size_t rank = k->u.shaped.rank;
    if (e->u.shaped.rank != rank || e->u.shaped.elt != k->u.shaped.elt ||
        e->u.shaped.space != k->u.shaped.space ||
        (e->u.shaped.strides == NULL) != (k->u.shaped.strides == NULL))
      return false;
    if (rank == FZ_UNRANKED || rank == 0)
      return true;
    if (memcmp(e->u.shaped.shape, k->u.shaped.shape, rank * sizeof(int64_t)))
      return false;
    return !k->u.shaped.strides ||
           !memcmp(e->u.shaped.strides, k->u.shaped.strides,
                   rank * sizeof(int64_t));
  }
  case FZ_TYPE_FUNCTION: {
    size_t n = k->u.func.numInputs + k->u.func.numResults;
    return e->u.func.numInputs == k->u.func.numInputs &&
           e->u.func.numResults == k->u.func.numResults &&
           (n == 0 || !memcmp(e->u.func.types, k->u.func.types,
                              n * sizeof(FzType *)));
  }
  case FZ_TYPE_OPAQUE:
    return e->u.opaque.dialect == k->u.opaque.dialect &&
           e->u.opaque.body == k->u.opaque.body;
  default:
    return true;
  }
}

static void *type_make(FzContext *ctx, const void *kv) {
  const FzType *k = kv;
  FzType *t = fzArenaAlloc(&ctx->arena, sizeof *t);
  if (!t)
    return NULL;
  *t = *k;
  t->ctx = ctx;
  switch (k->kind) {
  case FZ_TYPE_TENSOR:
  case FZ_TYPE_VECTOR:
  case FZ_TYPE_BUFFER: {
    size_t rank = k->u.shaped.rank;
    if (rank != FZ_UNRANKED && rank > 0) {
      t->u.shaped.shape =
          fzArenaDup(&ctx->arena, k->u.shaped.shape, rank * sizeof(int64_t));
      if (!t->u.shaped.shape)
        return NULL;
      if (k->u.shaped.strides) {
        t->u.shaped.strides = fzArenaDup(&ctx->arena, k->u.shaped.strides,
                                         rank * sizeof(int64_t));
        if (!t->u.shaped.strides)
          return NULL;
      }
    } else {
      t->u.shaped.shape = NULL;
    }
    break;
  }
  case FZ_TYPE_FUNCTION: {
    size_t n = k->u.func.numInputs + k->u.func.numResults;
    t->u.func.types =
        n ? fzArenaDup(&ctx->arena, k->u.func.types, n * sizeof(FzType *))
          : NULL;
    if (n && !t->u.func.types)
      return NULL;
    break;
  }
  default:
    break;
  }
  return t;
}

static FzType *type_get(FzContext *ctx, const FzType *key) {
  return fzUniqueGet(ctx, &ctx->types, type_hash(key), key, type_eq,
                     type_make);
}

static FzType *simple_type(FzContext *ctx, FzTypeKind kind) {
  FzType k;
  memset(&k, 0, sizeof k);
  k.kind = kind;
  return type_get(ctx, &k);
}

FzType *fzIntegerTypeGet(FzContext *ctx, unsigned width) {
  if (width == 0 || width > 64)
    return NULL;
  FzType k;
  memset(&k, 0, sizeof k);
  k.kind = FZ_TYPE_INTEGER;
  k.u.width = width;
  return type_get(ctx, &k);
}

FzType *fzIndexTypeGet(FzContext *ctx) {
  return ctx->index ? ctx->index : simple_type(ctx, FZ_TYPE_INDEX);
}
FzType *fzF16TypeGet(FzContext *ctx) {
  return ctx->f16 ? ctx->f16 : simple_type(ctx, FZ_TYPE_F16);
}
FzType *fzBF16TypeGet(FzContext *ctx) {
  return ctx->bf16 ? ctx->bf16 : simple_type(ctx, FZ_TYPE_BF16);
}
FzType *fzF32TypeGet(FzContext *ctx) {
  return ctx->f32 ? ctx->f32 : simple_type(ctx, FZ_TYPE_F32);
}
FzType *fzF64TypeGet(FzContext *ctx) {
  return ctx->f64 ? ctx->f64 : simple_type(ctx, FZ_TYPE_F64);
}
FzType *fzNoneTypeGet(FzContext *ctx) {
  return ctx->none ? ctx->none : simple_type(ctx, FZ_TYPE_NONE);
}

static bool is_element_type(const FzType *t, bool allowIndex) {
  if (!t)
    return false;
  switch (t->kind) {
  case FZ_TYPE_INTEGER:
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
  case FZ_TYPE_OPAQUE:
    return true;
  case FZ_TYPE_INDEX:
    return allowIndex;
  default:
    return false;
  }
}

static FzType *shaped_get(FzContext *ctx, FzTypeKind kind, size_t rank,
                          const int64_t *shape, FzType *elt,
                          const int64_t *strides, unsigned space,
                          FzLoc *loc) {
  const char *what = kind == FZ_TYPE_TENSOR   ? "tensor"
                     : kind == FZ_TYPE_VECTOR ? "vector"
                                              : "buffer";
  if (!is_element_type(elt, true) &&
      !(kind == FZ_TYPE_TENSOR && elt && elt->kind == FZ_TYPE_VECTOR)) {
    fzEmitError(ctx, loc, "invalid %s element type", what);
    return NULL;
  }
  if (rank == FZ_UNRANKED && kind != FZ_TYPE_TENSOR) {
    fzEmitError(ctx, loc, "%s types must be ranked", what);
    return NULL;
  }
  if (rank != FZ_UNRANKED) {
    if (rank > FZ_MAX_RANK) {
      fzEmitError(ctx, loc, "%s rank %zu exceeds the limit of %d", what,
                  rank, FZ_MAX_RANK);
      return NULL;
    }
    int64_t count = 1;
    for (size_t i = 0; i < rank; ++i) {
      int64_t d = shape[i];
      if (d == FZ_DYNAMIC) {
        if (kind == FZ_TYPE_VECTOR) {
          fzEmitError(ctx, loc, "vector types must have static dimensions");
          return NULL;
        }
        continue;
      }
      if (d < 0) {
        fzEmitError(ctx, loc, "%s dimension %zu is negative (%lld)", what, i,
                    (long long)d);
        return NULL;
      }
      if (d == 0 && kind == FZ_TYPE_VECTOR) { /* as MLIR: no empty vectors */
        fzEmitError(ctx, loc, "vector types must have positive constant "
                              "sizes (dimension %zu is 0)", i);
        return NULL;
      }
      if (d > FZ_MAX_DIM) {
        fzEmitError(ctx, loc,
                    "%s dimension %zu is too large (%lld > %lld)", what, i,
                    (long long)d, (long long)FZ_MAX_DIM);
        return NULL;
      }
      if (d != 0 && count > FZ_MAX_ELEMENTS / d) {
        fzEmitError(ctx, loc,
                    "%s has too many elements (more than %lld)", what,
                    (long long)FZ_MAX_ELEMENTS);
        return NULL;
      }
      count *= d;
    }
    if (kind == FZ_TYPE_VECTOR && rank == 0) {
      fzEmitError(ctx, loc, "vector types must have at least one dimension");
      return NULL;
    }
  }
  FzType k;
  memset(&k, 0, sizeof k);
  k.kind = kind;
  k.u.shaped.rank = rank;
  k.u.shaped.shape = (int64_t *)shape;
  k.u.shaped.elt = elt;
  k.u.shaped.strides = (int64_t *)strides;
  k.u.shaped.space = space;
  return type_get(ctx, &k);
}

FzType *fzTensorTypeGet(FzContext *ctx, size_t rank, const int64_t *shape,
                        FzType *elementType, FzLoc *loc) {
  return shaped_get(ctx, FZ_TYPE_TENSOR, rank, shape, elementType, NULL, 0,
                    loc);
}

FzType *fzVectorTypeGet(FzContext *ctx, size_t rank, const int64_t *shape,
                        FzType *elementType, FzLoc *loc) {
  return shaped_get(ctx, FZ_TYPE_VECTOR, rank, shape, elementType, NULL, 0,
                    loc);
}

FzType *fzBufferTypeGet(FzContext *ctx, size_t rank, const int64_t *shape,
                        FzType *elementType, const int64_t *strides,
                        unsigned memorySpace, FzLoc *loc) {
  if (strides && rank != FZ_UNRANKED) {
    /* The elements a static layout spans, sum((dim - 1) * stride), stay
     * within FZ_MAX_ELEMENTS, so that no index computation on the buffer
     * (i * stride summed over the dims) can overflow int64. */
    int64_t span = 0;
    for (size_t i = 0; i < rank; ++i) {
      if (strides[i] == FZ_DYNAMIC)
        continue;
      if (strides[i] < 0) {
        fzEmitError(ctx, loc, "buffer stride %zu is negative", i);
        return NULL;
      }
      int64_t d = shape[i] == FZ_DYNAMIC ? 1 : shape[i];
      if (strides[i] > FZ_MAX_ELEMENTS ||
          (d > 1 && (d - 1 > FZ_MAX_ELEMENTS / (strides[i] ? strides[i] : 1) ||
                     span > FZ_MAX_ELEMENTS - (d - 1) * strides[i]))) {
        fzEmitError(ctx, loc,
                    "buffer layout spans more than %lld elements (stride "
                    "%zu is %lld)",
                    (long long)FZ_MAX_ELEMENTS, i, (long long)strides[i]);
        return NULL;
      }
      if (d > 1)
        span += (d - 1) * strides[i];
    }
    /* The identity layout is stored as NULL so equal buffers unique. */
    bool identity = true;
    int64_t expect = 1;
    for (size_t i = rank; i-- > 0;) {
      if (strides[i] != expect || shape[i] == FZ_DYNAMIC) {
        identity = false;
        break;
      }
      expect *= shape[i] ? shape[i] : 1;
    }
    if (identity)
      strides = NULL;
  }
  return shaped_get(ctx, FZ_TYPE_BUFFER, rank, shape, elementType, strides,
                    memorySpace, loc);
}

FzType *fzFunctionTypeGet(FzContext *ctx, size_t numInputs,
                          FzType *const *inputs, size_t numResults,
                          FzType *const *results) {
  FzType *small[16];
  FzType **types = small;
  size_t n;
  if (!fzAddSize(numInputs, numResults, &n))
    return NULL;
  if (n > 16) {
    types = fzCalloc(ctx, n, sizeof *types);
    if (!types)
      return NULL;
  }
  for (size_t i = 0; i < numInputs; ++i)
    types[i] = inputs[i];
  for (size_t i = 0; i < numResults; ++i)
    types[numInputs + i] = results[i];
  FzType k;
  memset(&k, 0, sizeof k);
  k.kind = FZ_TYPE_FUNCTION;
  k.u.func.numInputs = numInputs;
  k.u.func.numResults = numResults;
  k.u.func.types = types;
  FzType *t = type_get(ctx, &k);
  if (types != small)
    fzFree(ctx, types);
  return t;
}

FzType *fzOpaqueTypeGet(FzContext *ctx, FzStringRef dialect,
                        FzStringRef body) {
  FzType k;
  memset(&k, 0, sizeof k);
  k.kind = FZ_TYPE_OPAQUE;
  k.u.opaque.dialect = fzIdentGet(ctx, dialect);
  k.u.opaque.body = fzIdentGet(ctx, body);
  if (!k.u.opaque.dialect || !k.u.opaque.body)
    return NULL;
  return type_get(ctx, &k);
}

/*===--- Queries --------------------------------------------------------===*/

FzTypeKind fzTypeGetKind(const FzType *t) { return t->kind; }
FzContext *fzTypeGetContext(const FzType *t) { return t->ctx; }

bool fzTypeIsFloat(const FzType *t) {
  return t->kind == FZ_TYPE_F16 || t->kind == FZ_TYPE_BF16 ||
         t->kind == FZ_TYPE_F32 || t->kind == FZ_TYPE_F64;
}
bool fzTypeIsInteger(const FzType *t) { return t->kind == FZ_TYPE_INTEGER; }
bool fzTypeIsIntOrIndex(const FzType *t) {
  return t->kind == FZ_TYPE_INTEGER || t->kind == FZ_TYPE_INDEX;
}
bool fzTypeIsShaped(const FzType *t) {
  return t->kind == FZ_TYPE_TENSOR || t->kind == FZ_TYPE_VECTOR ||
         t->kind == FZ_TYPE_BUFFER;
}

unsigned fzTypeGetBitWidth(const FzType *t) {
  switch (t->kind) {
  case FZ_TYPE_INTEGER:
    return t->u.width;
  case FZ_TYPE_INDEX:
    return 64;
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
    return 16;
  case FZ_TYPE_F32:
    return 32;
  case FZ_TYPE_F64:
    return 64;
  default:
    return 0;
  }
}

size_t fzTypeGetStorageSize(const FzType *t) {
  if (t->kind == FZ_TYPE_INTEGER)
    return t->u.width <= 8 ? 1 : t->u.width <= 16 ? 2 : t->u.width <= 32 ? 4 : 8;
  return fzTypeGetBitWidth(t) / 8;
}

FzType *fzShapedTypeGetElementType(const FzType *t) {
  assert(fzTypeIsShaped(t) && "not a shaped type");
  return t->u.shaped.elt;
}
size_t fzShapedTypeGetRank(const FzType *t) {
  assert(fzTypeIsShaped(t) && "not a shaped type");
  return t->u.shaped.rank;
}
int64_t fzShapedTypeGetDim(const FzType *t, size_t i) {
  assert(fzTypeIsShaped(t) && t->u.shaped.rank != FZ_UNRANKED &&
         i < t->u.shaped.rank && "dim index out of range");
  return t->u.shaped.shape[i];
}
const int64_t *fzShapedTypeGetShape(const FzType *t) {
  assert(fzTypeIsShaped(t) && "not a shaped type");
  return t->u.shaped.shape;
}

bool fzShapedTypeHasStaticShape(const FzType *t) {
  if (t->u.shaped.rank == FZ_UNRANKED)
    return false;
  for (size_t i = 0; i < t->u.shaped.rank; ++i)
    if (t->u.shaped.shape[i] == FZ_DYNAMIC)
      return false;
  return true;
}

int64_t fzShapedTypeGetNumElements(const FzType *t) {
  if (!fzShapedTypeHasStaticShape(t))
    return -1;
  int64_t n = 1;
  for (size_t i = 0; i < t->u.shaped.rank; ++i)
    n *= t->u.shaped.shape[i]; /* bounded by FZ_MAX_ELEMENTS at creation */
  return n;
}

const int64_t *fzBufferTypeGetStrides(const FzType *t) {
  return t->u.shaped.strides;
}
unsigned fzBufferTypeGetMemorySpace(const FzType *t) {
  return t->u.shaped.space;
}

size_t fzFunctionTypeGetNumInputs(const FzType *t) {
  return t->u.func.numInputs;
}
FzType *fzFunctionTypeGetInput(const FzType *t, size_t i) {
  assert(t->kind == FZ_TYPE_FUNCTION && i < t->u.func.numInputs &&
         "function input index out of range");
  return t->u.func.types[i];
}
size_t fzFunctionTypeGetNumResults(const FzType *t) {
  return t->u.func.numResults;
}
FzType *fzFunctionTypeGetResult(const FzType *t, size_t i) {
  assert(t->kind == FZ_TYPE_FUNCTION && i < t->u.func.numResults &&
         "function result index out of range");
  return t->u.func.types[t->u.func.numInputs + i];
}

FzStringRef fzOpaqueTypeGetDialect(const FzType *t) {
  return fzIdentGetString(t->u.opaque.dialect);
}
FzStringRef fzOpaqueTypeGetBody(const FzType *t) {
  return fzIdentGetString(t->u.opaque.body);
}

/*===--- Half and bfloat conversions ------------------------------------===*/

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t fzFloatToBF16Bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40); /* quiet NaN, sign kept */
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)((u + rounding) >> 16);
}

float fzBF16BitsToFloat(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t fzFloatToHalfBits(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u); /* NaN */
  if (absu >= 0x477ff000u) {
    /* >= 65520 rounds to infinity (65504 is the largest half). */
    return (uint16_t)(sign | 0x7c00u);
  }
  if (absu < 0x38800000u) {
    /* Subnormal half (or zero): scale so the rounding happens in the
     * float addition, which rounds to nearest even. */
    float a = bits_float(absu) + 0.5f;
    return (uint16_t)(sign | (float_bits(a) - 0x3f000000u));
  }
  uint32_t mant_odd = (absu >> 13) & 1u;
  absu += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) + round */
  return (uint16_t)(sign | (absu >> 13));
}

float fzHalfBitsToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float f = (float)mant * 5.9604644775390625e-8f; /* 2^-24 */
    return sign ? -f : f;
  }
  if (exp == 31)
    return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Rounds v once to a binary format with `mant` explicit mantissa bits,
 * smallest normal exponent `emin` and largest finite value `maxFinite`,
 * to nearest even (gradual underflow included). The result is exactly
 * representable in float for the formats used here (f16, bf16). */
static double round_to_format(double v, int mant, int emin,
                              double maxFinite) {
  if (v != v || v == 0 || v - v != 0) /* NaN, zero, infinity */
    return v;
  int e;
  (void)frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
  int q = e - 1 - mant; /* exponent of the last kept bit */
  if (q < emin - mant)
    q = emin - mant; /* subnormal: a fixed quantum */
  double r = ldexp(nearbyint(ldexp(v, -q)), q); /* both scalings exact */
  if (fabs(r) > maxFinite)
    return v < 0 ? -HUGE_VAL : HUGE_VAL;
  return r;
}

uint16_t fzDoubleToHalfBits(double v) {
  if (v != v)
    return (uint16_t)(signbit(v) ? 0xfe00u : 0x7e00u);
  return fzFloatToHalfBits((float)round_to_format(v, 10, -14, 65504.0));
}

uint16_t fzDoubleToBF16Bits(double v) {
  if (v != v)
    return (uint16_t)(signbit(v) ? 0xffc0u : 0x7fc0u);
  return fzFloatToBF16Bits(
      (float)round_to_format(v, 7, -126, ldexp(255.0 / 128.0, 127)));
}

/* A NaN narrowed to a format with `mant` mantissa bits by hand, as the
 * NaN's bits: its sign and the top of its payload are kept (a hardware
 * conversion would quiet a signaling NaN). A payload that lives only in
 * the dropped bits would leave an infinity: it becomes the quiet NaN. */
static double narrow_nan(double v, int mant) {
  uint64_t d;
  memcpy(&d, &v, sizeof d);
  uint64_t dropped = ((uint64_t)1 << (52 - mant)) - 1;
  d &= ~dropped;
  if ((d & (((uint64_t)1 << 52) - 1)) == 0)
    d |= (uint64_t)1 << 51;
  memcpy(&v, &d, sizeof v);
  return v;
}

double fzRoundToFloatType(const FzType *t, double v) {
  if (v != v) {
    switch (t->kind) {
    case FZ_TYPE_F16:
      return narrow_nan(v, 10);
    case FZ_TYPE_BF16:
      return narrow_nan(v, 7);
    case FZ_TYPE_F32:
      return narrow_nan(v, 23);
    default:
      return v;
    }
  }
  switch (t->kind) {
  case FZ_TYPE_F16:
    return fzHalfBitsToFloat(fzDoubleToHalfBits(v));
  case FZ_TYPE_BF16:
    return fzBF16BitsToFloat(fzDoubleToBF16Bits(v));
  case FZ_TYPE_F32:
    return (float)v;
  default:
    return v;
  }
}
