/* ir/attrs.c - uniqued attributes.
 *
 * Same scheme as types: a stack key, a structural hash, one arena copy
 * per distinct attribute. Dictionaries are stored sorted by name so that
 * equal dictionaries are the same pointer and lookups are binary
 * searches. Dense element data is copied once into the arena, so a large
 * constant used in many places is stored once.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "ir/internal.h"

static uint32_t attr_hash(const FzAttr *k) {
  uint32_t h = fzHashCombine(0xa77u, (uint64_t)k->kind);
  h = fzHashCombine(h, (uint64_t)(uintptr_t)k->type);
  switch (k->kind) {
  case FZ_ATTR_INTEGER:
    return fzHashCombine(h, (uint64_t)k->u.i);
  case FZ_ATTR_FLOAT: {
    uint64_t bits;
    memcpy(&bits, &k->u.f, 8);
    return fzHashCombine(h, bits);
  }
  case FZ_ATTR_BOOL:
    return fzHashCombine(h, k->u.b);
  case FZ_ATTR_STRING:
    return fzHashBytes(k->u.str.data, k->u.str.len, h);
  case FZ_ATTR_TYPE:
    return fzHashCombine(h, (uint64_t)(uintptr_t)k->u.type);
  case FZ_ATTR_ARRAY:
    h = fzHashCombine(h, k->u.array.n);
    for (size_t i = 0; i < k->u.array.n; ++i)
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.array.elts[i]);
    return h;
  case FZ_ATTR_DICT:
    h = fzHashCombine(h, k->u.dict.n);
    for (size_t i = 0; i < k->u.dict.n; ++i) {
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.dict.entries[i].name);
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.dict.entries[i].value);
    }
    return h;
  case FZ_ATTR_SYMBOL_REF:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.sym.root);
    for (size_t i = 0; i < k->u.sym.n; ++i)
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.sym.nested[i]);
    return h;
  case FZ_ATTR_DENSE:
    h = fzHashCombine(h, k->u.dense.splat);
    return fzHashBytes(k->u.dense.data, k->u.dense.nbytes, h);
  case FZ_ATTR_DENSE_ARRAY:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.darray.elt);
    h = fzHashCombine(h, k->u.darray.n);
    return fzHashBytes(k->u.darray.data,
                       k->u.darray.n * fzTypeGetStorageSize(k->u.darray.elt),
                       h);
  case FZ_ATTR_OPAQUE:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.opaque.dialect);
    return fzHashCombine(h, (uint64_t)(uintptr_t)k->u.opaque.body);
  case FZ_ATTR_LOC:
    return fzHashCombine(h, (uint64_t)(uintptr_t)k->u.loc);
  case FZ_ATTR_UNIT:
    return h;
  }
  return h;
}

static bool attr_eq(const void *ev, const void *kv) {
  const FzAttr *e = ev, *k = kv;
  if (e->kind != k->kind || e->type != k->type)
    return false;
  switch (k->kind) {
  case FZ_ATTR_INTEGER:
    return e->u.i == k->u.i;
  case FZ_ATTR_FLOAT:
    return !memcmp(&e->u.f, &k->u.f, sizeof(double));
  case FZ_ATTR_BOOL:
    return e->u.b == k->u.b;
  case FZ_ATTR_STRING:
    return e->u.str.len == k->u.str.len &&
           !memcmp(e->u.str.data, k->u.str.data, k->u.str.len);
  case FZ_ATTR_TYPE:
    return e->u.type == k->u.type;
  case FZ_ATTR_ARRAY:
    return e->u.array.n == k->u.array.n &&
           (k->u.array.n == 0 ||
            !memcmp(e->u.array.elts, k->u.array.elts,
                    k->u.array.n * sizeof(FzAttr *)));
  case FZ_ATTR_DICT:
    return e->u.dict.n == k->u.dict.n &&
           (k->u.dict.n == 0 ||
            !memcmp(e->u.dict.entries, k->u.dict.entries,
                    k->u.dict.n * sizeof(FzNamedAttr)));
  case FZ_ATTR_SYMBOL_REF:
    return e->u.sym.root == k->u.sym.root && e->u.sym.n == k->u.sym.n &&
           (k->u.sym.n == 0 || !memcmp(e->u.sym.nested, k->u.sym.nested,
                                       k->u.sym.n * sizeof(FzIdent *)));
  case FZ_ATTR_DENSE:
    return e->u.dense.splat == k->u.dense.splat &&
           e->u.dense.nbytes == k->u.dense.nbytes &&
           (k->u.dense.nbytes == 0 ||
            !memcmp(e->u.dense.data, k->u.dense.data, k->u.dense.nbytes));
  case FZ_ATTR_DENSE_ARRAY:
    return e->u.darray.elt == k->u.darray.elt &&
           e->u.darray.n == k->u.darray.n &&
           !memcmp(e->u.darray.data, k->u.darray.data,
                   k->u.darray.n * fzTypeGetStorageSize(k->u.darray.elt));
  case FZ_ATTR_OPAQUE:
    return e->u.opaque.dialect == k->u.opaque.dialect &&
           e->u.opaque.body == k->u.opaque.body;
  case FZ_ATTR_LOC:
    return e->u.loc == k->u.loc;
  case FZ_ATTR_UNIT:
    return true;
  }
  return false;
}

static void *attr_make(FzContext *ctx, const void *kv) {
  const FzAttr *k = kv;
  FzArena *ar = &ctx->arena;
  FzAttr *a = fzArenaAlloc(ar, sizeof *a);
  if (!a)
    return NULL;
  *a = *k;
  a->ctx = ctx;
  switch (k->kind) {
  case FZ_ATTR_STRING: {
    char *s = fzArenaAlloc(ar, k->u.str.len + 1);
    if (!s)
      return NULL;
    if (k->u.str.len)
      memcpy(s, k->u.str.data, k->u.str.len);
    s[k->u.str.len] = 0;
    a->u.str.data = s;
    break;
  }
  case FZ_ATTR_ARRAY:
    if (k->u.array.n &&
        !(a->u.array.elts = fzArenaDup(ar, k->u.array.elts,
                                       k->u.array.n * sizeof(FzAttr *))))
      return NULL;
    break;
  case FZ_ATTR_DICT:
    if (k->u.dict.n &&
        !(a->u.dict.entries = fzArenaDup(ar, k->u.dict.entries,
                                         k->u.dict.n * sizeof(FzNamedAttr))))
      return NULL;
    break;
  case FZ_ATTR_SYMBOL_REF:
    if (k->u.sym.n &&
        !(a->u.sym.nested = fzArenaDup(ar, k->u.sym.nested,
                                       k->u.sym.n * sizeof(FzIdent *))))
      return NULL;
    break;
  case FZ_ATTR_DENSE:
    if (!(a->u.dense.data = fzArenaDup(ar, k->u.dense.data ? k->u.dense.data
                                                           : (const void *)"",
                                       k->u.dense.nbytes)))
      return NULL;
    break;
  case FZ_ATTR_DENSE_ARRAY: {
    size_t n = k->u.darray.n * fzTypeGetStorageSize(k->u.darray.elt);
    if (!(a->u.darray.data = fzArenaDup(ar, k->u.darray.data, n)))
      return NULL;
    break;
  }
  default:
    break;
  }
  return a;
}

static FzAttr *attr_get(FzContext *ctx, const FzAttr *key) {
  return fzUniqueGet(ctx, &ctx->attrs, attr_hash(key), key, attr_eq,
                     attr_make);
}

static FzAttr attr_key(FzAttrKind kind, FzType *type) {
  FzAttr k;
  memset(&k, 0, sizeof k);
  k.kind = kind;
  k.type = type;
  return k;
}

static int64_t sign_extend(int64_t v, unsigned width) {
  if (width >= 64)
    return v;
  uint64_t m = (uint64_t)1 << (width - 1);
  uint64_t x = (uint64_t)v & (((uint64_t)1 << width) - 1);
  return (int64_t)((x ^ m) - m);
}

FzAttr *fzIntegerAttrGet(FzContext *ctx, FzType *type, int64_t value) {
  if (!type || !fzTypeIsIntOrIndex(type))
    return NULL;
  if (type->kind == FZ_TYPE_INTEGER && type->u.width == 1)
    return fzBoolAttrGet(ctx, value & 1);
  FzAttr k = attr_key(FZ_ATTR_INTEGER, type);
  k.u.i = sign_extend(value, fzTypeGetBitWidth(type));
  return attr_get(ctx, &k);
}

FzAttr *fzFloatAttrGet(FzContext *ctx, FzType *type, double value) {
  if (!type || !fzTypeIsFloat(type))
    return NULL;
  FzAttr k = attr_key(FZ_ATTR_FLOAT, type);
  k.u.f = fzRoundToFloatType(type, value);
  return attr_get(ctx, &k);
}

FzAttr *fzBoolAttrGet(FzContext *ctx, bool value) {
  FzAttr *cached = value ? ctx->boolTrue : ctx->boolFalse;
  if (cached)
    return cached;
  FzAttr k = attr_key(FZ_ATTR_BOOL, ctx->i1);
  k.u.b = value;
  return attr_get(ctx, &k);
}

FzAttr *fzUnitAttrGet(FzContext *ctx) {
  if (ctx->unit)
    return ctx->unit;
  FzAttr k = attr_key(FZ_ATTR_UNIT, NULL);
  return attr_get(ctx, &k);
}

FzAttr *fzStringAttrGet(FzContext *ctx, FzStringRef value) {
  FzAttr k = attr_key(FZ_ATTR_STRING, NULL);
  k.u.str.data = value.data ? value.data : "";
  k.u.str.len = value.length;
  return attr_get(ctx, &k);
}

FzAttr *fzTypeAttrGet(FzContext *ctx, FzType *type) {
  if (!type)
    return NULL;
  FzAttr k = attr_key(FZ_ATTR_TYPE, NULL);
  k.u.type = type;
  return attr_get(ctx, &k);
}

FzAttr *fzLocAttrGet(FzContext *ctx, FzLoc *loc) {
  if (!loc)
    return NULL;
  FzAttr k = attr_key(FZ_ATTR_LOC, NULL);
  k.u.loc = loc;
  return attr_get(ctx, &k);
}

FzLoc *fzLocAttrGetValue(const FzAttr *a) { return a->u.loc; }

FzAttr *fzArrayAttrGet(FzContext *ctx, size_t n, FzAttr *const *elements) {
  for (size_t i = 0; i < n; ++i)
    if (!elements[i])
      return NULL;
  FzAttr k = attr_key(FZ_ATTR_ARRAY, NULL);
  k.u.array.n = n;
  k.u.array.elts = (FzAttr **)elements;
  return attr_get(ctx, &k);
}

static int ident_cmp(const FzIdent *a, const FzIdent *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->str, b->str, n);
  if (c)
    return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

static int named_cmp(const void *a, const void *b) {
  return ident_cmp(((const FzNamedAttr *)a)->name,
                   ((const FzNamedAttr *)b)->name);
}

FzAttr *fzDictAttrGet(FzContext *ctx, size_t n, const FzNamedAttr *entries,
                      FzLoc *loc) {
  if (n == 0 && ctx->emptyDict)
    return ctx->emptyDict;
  FzNamedAttr small[16];
  FzNamedAttr *sorted = small;
  if (n > 16 && !(sorted = fzCalloc(ctx, n, sizeof *sorted)))
    return NULL;
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    sorted[i] = entries[i];
    if (!entries[i].name || !entries[i].value)
      ok = false;
  }
  if (!ok) {
    if (sorted != small)
      fzFree(ctx, sorted);
    return NULL;
  }
  /* Most dictionaries arrive sorted (from the parser or another dict). */
  bool isSorted = true;
  for (size_t i = 1; i < n && isSorted; ++i)
    isSorted = ident_cmp(sorted[i - 1].name, sorted[i].name) < 0;
  if (!isSorted)
    qsort(sorted, n, sizeof *sorted, named_cmp);
  for (size_t i = 1; i < n; ++i) {
    if (sorted[i - 1].name == sorted[i].name) {
      fzEmitError(ctx, loc, "duplicate key '%s' in dictionary attribute",
                  sorted[i].name->str);
      if (sorted != small)
        fzFree(ctx, sorted);
      return NULL;
    }
  }
  FzAttr k = attr_key(FZ_ATTR_DICT, NULL);
  k.u.dict.n = n;
  k.u.dict.entries = sorted;
  FzAttr *a = attr_get(ctx, &k);
  if (sorted != small)
    fzFree(ctx, sorted);
  return a;
}

FzAttr *fzSymbolRefAttrGet(FzContext *ctx, FzStringRef root,
                           size_t numNested, const FzStringRef *nested) {
  FzIdent *small[8];
  FzIdent **ids = small;
  if (numNested > 8 && !(ids = fzCalloc(ctx, numNested, sizeof *ids)))
    return NULL;
  FzAttr *result = NULL;
  FzAttr k = attr_key(FZ_ATTR_SYMBOL_REF, NULL);
  k.u.sym.root = fzIdentGet(ctx, root);
  bool ok = k.u.sym.root != NULL;
  for (size_t i = 0; i < numNested && ok; ++i)
    ok = (ids[i] = fzIdentGet(ctx, nested[i])) != NULL;
  if (ok) {
    k.u.sym.n = numNested;
    k.u.sym.nested = ids;
    result = attr_get(ctx, &k);
  }
  if (ids != small)
    fzFree(ctx, ids);
  return result;
}

FzAttr *fzDenseAttrGet(FzContext *ctx, FzType *shapedType, const void *data,
                       size_t numBytes) {
  if (!shapedType || (shapedType->kind != FZ_TYPE_TENSOR &&
                      shapedType->kind != FZ_TYPE_VECTOR) ||
      !fzShapedTypeHasStaticShape(shapedType))
    return NULL;
  FzType *elt = shapedType->u.shaped.elt;
  if (!fzTypeIsFloat(elt) && !fzTypeIsIntOrIndex(elt))
    return NULL;
  size_t eltSize = fzTypeGetStorageSize(elt);
  int64_t count = fzShapedTypeGetNumElements(shapedType);
  size_t total;
  if (!fzMulSize((size_t)count, eltSize, &total))
    return NULL;
  bool splat = numBytes == eltSize && count != 0;
  if (!splat && numBytes != total)
    return NULL;
  /* A full list whose elements are all equal is stored as a splat, as
   * MLIR does, so both spellings unique to one attribute. */
  if (!splat && count > 1) {
    const unsigned char *p = data;
    bool same = true;
    for (int64_t i = 1; i < count && same; ++i)
      same = !memcmp(p, p + (size_t)i * eltSize, eltSize);
    if (same) {
      splat = true;
      numBytes = eltSize;
    }
  }
  FzAttr k = attr_key(FZ_ATTR_DENSE, shapedType);
  k.u.dense.data = data;
  k.u.dense.nbytes = numBytes;
  k.u.dense.splat = splat;
  return attr_get(ctx, &k);
}

FzAttr *fzDenseArrayAttrGet(FzContext *ctx, FzType *elementType, size_t n,
                            const void *data) {
  if (!elementType || !(fzTypeIsInteger(elementType) ||
                        elementType->kind == FZ_TYPE_F32 ||
                        elementType->kind == FZ_TYPE_F64))
    return NULL;
  static const char none[1];
  FzAttr k = attr_key(FZ_ATTR_DENSE_ARRAY, NULL);
  k.u.darray.elt = elementType;
  k.u.darray.n = n;
  k.u.darray.data = n ? data : (const void *)none;
  return attr_get(ctx, &k);
}

FzAttr *fzOpaqueAttrGet(FzContext *ctx, FzStringRef dialect,
                        FzStringRef body) {
  FzAttr k = attr_key(FZ_ATTR_OPAQUE, NULL);
  k.u.opaque.dialect = fzIdentGet(ctx, dialect);
  k.u.opaque.body = fzIdentGet(ctx, body);
  if (!k.u.opaque.dialect || !k.u.opaque.body)
    return NULL;
  return attr_get(ctx, &k);
}

/*===--- Queries --------------------------------------------------------===*/

FzAttrKind fzAttrGetKind(const FzAttr *a) { return a->kind; }
FzContext *fzAttrGetContext(const FzAttr *a) { return a->ctx; }
FzType *fzAttrGetType(const FzAttr *a) {
  return a->kind == FZ_ATTR_BOOL ? a->ctx->i1 : a->type;
}
int64_t fzIntegerAttrGetValue(const FzAttr *a) {
  return a->kind == FZ_ATTR_BOOL ? (int64_t)a->u.b : a->u.i;
}
double fzFloatAttrGetValue(const FzAttr *a) { return a->u.f; }
bool fzBoolAttrGetValue(const FzAttr *a) { return a->u.b; }
FzStringRef fzStringAttrGetValue(const FzAttr *a) {
  FzStringRef r = {a->u.str.data, a->u.str.len};
  return r;
}
FzType *fzTypeAttrGetValue(const FzAttr *a) {
  assert(a->kind == FZ_ATTR_TYPE && "not a type attribute");
  return a->u.type;
}
size_t fzArrayAttrGetSize(const FzAttr *a) {
  assert(a->kind == FZ_ATTR_ARRAY && "not an array attribute");
  return a->u.array.n;
}
FzAttr *fzArrayAttrGetElement(const FzAttr *a, size_t i) {
  assert(a->kind == FZ_ATTR_ARRAY && i < a->u.array.n &&
         "array index out of range");
  return a->u.array.elts[i];
}
size_t fzDictAttrGetSize(const FzAttr *a) {
  assert(a->kind == FZ_ATTR_DICT && "not a dictionary attribute");
  return a->u.dict.n;
}
FzNamedAttr fzDictAttrGetEntry(const FzAttr *a, size_t i) {
  assert(a->kind == FZ_ATTR_DICT && i < a->u.dict.n &&
         "dictionary index out of range");
  return a->u.dict.entries[i];
}

FzAttr *fzDictAttrLookup(const FzAttr *a, FzStringRef name) {
  size_t lo = 0, hi = a->u.dict.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const FzIdent *k = a->u.dict.entries[mid].name;
    size_t n = k->len < name.length ? k->len : name.length;
    int c = n ? memcmp(k->str, name.data, n) : 0;
    if (!c)
      c = k->len < name.length ? -1 : k->len > name.length;
    if (c == 0)
      return a->u.dict.entries[mid].value;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

FzStringRef fzSymbolRefAttrGetRoot(const FzAttr *a) {
  return fzIdentGetString(a->u.sym.root);
}
size_t fzSymbolRefAttrGetNumNested(const FzAttr *a) { return a->u.sym.n; }
FzStringRef fzSymbolRefAttrGetNested(const FzAttr *a, size_t i) {
  assert(a->kind == FZ_ATTR_SYMBOL_REF && i < a->u.sym.n &&
         "nested reference index out of range");
  return fzIdentGetString(a->u.sym.nested[i]);
}
bool fzDenseAttrIsSplat(const FzAttr *a) { return a->u.dense.splat; }
const void *fzDenseAttrGetData(const FzAttr *a) { return a->u.dense.data; }
size_t fzDenseAttrGetNumBytes(const FzAttr *a) { return a->u.dense.nbytes; }

static double load_float(const FzType *elt, const unsigned char *p) {
  switch (elt->kind) {
  case FZ_TYPE_F16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return fzHalfBitsToFloat(h);
  }
  case FZ_TYPE_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return fzBF16BitsToFloat(h);
  }
  case FZ_TYPE_F32: {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  case FZ_TYPE_F64: {
    double d;
    memcpy(&d, p, 8);
    return d;
  }
  default:
    return 0;
  }
}

static int64_t load_int(const FzType *elt, const unsigned char *p) {
  switch (fzTypeGetStorageSize(elt)) {
  case 1: {
    int8_t v;
    memcpy(&v, p, 1);
    return elt->kind == FZ_TYPE_INTEGER && elt->u.width == 1 ? (v & 1) : v;
  }
  case 2: {
    int16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  default: {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  }
}

/* double -> int64 without undefined behaviour: truncates toward zero,
 * saturates out-of-range values, and maps NaN to 0. */
static int64_t saturate_to_i64(double d) {
  if (d != d)
    return 0;
  if (d >= 9223372036854775807.0)
    return INT64_MAX;
  if (d <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)d;
}

static const unsigned char *dense_elt(const FzAttr *a, int64_t i) {
  size_t sz = fzTypeGetStorageSize(a->type->u.shaped.elt);
  return a->u.dense.data + (a->u.dense.splat ? 0 : (size_t)i * sz);
}

double fzDenseAttrGetFloat(const FzAttr *a, int64_t i) {
  const FzType *elt = a->type->u.shaped.elt;
  const unsigned char *p = dense_elt(a, i);
  return fzTypeIsFloat(elt) ? load_float(elt, p) : (double)load_int(elt, p);
}

int64_t fzDenseAttrGetInt(const FzAttr *a, int64_t i) {
  const FzType *elt = a->type->u.shaped.elt;
  const unsigned char *p = dense_elt(a, i);
  return fzTypeIsFloat(elt) ? saturate_to_i64(load_float(elt, p))
                            : load_int(elt, p);
}

FzType *fzDenseArrayAttrGetElementType(const FzAttr *a) {
  return a->u.darray.elt;
}
size_t fzDenseArrayAttrGetSize(const FzAttr *a) { return a->u.darray.n; }
const void *fzDenseArrayAttrGetData(const FzAttr *a) {
  return a->u.darray.data;
}
int64_t fzDenseArrayAttrGetInt(const FzAttr *a, size_t i) {
  assert(a->kind == FZ_ATTR_DENSE_ARRAY && i < a->u.darray.n &&
         "dense array index out of range");
  const FzType *elt = a->u.darray.elt;
  const unsigned char *p = a->u.darray.data + i * fzTypeGetStorageSize(elt);
  return fzTypeIsFloat(elt) ? saturate_to_i64(load_float(elt, p))
                            : load_int(elt, p);
}
double fzDenseArrayAttrGetFloat(const FzAttr *a, size_t i) {
  assert(a->kind == FZ_ATTR_DENSE_ARRAY && i < a->u.darray.n &&
         "dense array index out of range");
  const FzType *elt = a->u.darray.elt;
  const unsigned char *p = a->u.darray.data + i * fzTypeGetStorageSize(elt);
  return fzTypeIsFloat(elt) ? load_float(elt, p) : (double)load_int(elt, p);
}
FzStringRef fzOpaqueAttrGetDialect(const FzAttr *a) {
  return fzIdentGetString(a->u.opaque.dialect);
}
FzStringRef fzOpaqueAttrGetBody(const FzAttr *a) {
  return fzIdentGetString(a->u.opaque.body);
}
