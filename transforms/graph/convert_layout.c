/* transforms/graph/convert_layout.c - the convert-layout pass: runs the
 * convolution regions of an NCHW graph in NHWC (channels last), with
 * transposes only where the layout must change, in the manner of ONNX
 * Runtime's transpose optimizer, TVM's ConvertLayout and XLA's layout
 * assignment (docs/passes.md "convert-layout").
 *
 * This file holds the forms of values (convert_layout.h), the transposes
 * made of them, and the driver: one walk over the function body in order
 * (convert_layout_ops.c decides each op), then every use that still reads
 * a converted value in NCHW (an op left alone, a function result) gets a
 * transpose of its form, and the converted ops are erased. The pass never
 * changes what the function computes: every rewrite is exact (a transpose
 * moves data, a reshape renames it; folded constants are permuted
 * copies), except batch_norm, which becomes a multiply-add with the
 * per-channel scale and shift computed once (the rounding of
 * fold-batchnorm).
 *
 * Memory: forms and cache entries live in an arena freed with the pass
 * run; everything it makes is IR of the function.
 */
#include <string.h>

#include "transforms/graph/convert_layout.h"

const int64_t kClToNhwc[4] = {0, 2, 3, 1}, kClToNchw[4] = {0, 3, 1, 2};

static bool is_identity(const int64_t *p) {
  for (int64_t i = 0; i < 4; ++i)
    if (p[i] != i)
      return false;
  return true;
}

/* out = x after y: transpose(transpose(b, x), y) = transpose(b, out). */
static void compose(const int64_t *x, const int64_t *y, int64_t *out) {
  int64_t r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = x[y[i]];
  memcpy(out, r, sizeof r);
}

static bool is_named(const FzOp *op, const char *name) {
  const FzOpDef *d = op ? fzOpGetDef(op) : NULL;
  return d && strcmp(d->name, name) == 0;
}

static bool rank4(const FzValue *v) {
  FzType *t = fzValueGetType(v);
  return fzTypeGetKind(t) == FZ_TYPE_TENSOR && fzShapedTypeGetRank(t) == 4;
}

/* The perm of a rank-4 transpose op into p. */
static bool transpose_perm(FzOp *op, int64_t *p) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("perm"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetSize(a) != 4 || !rank4(fzOpGetOperand(op, 0)))
    return false;
  for (size_t i = 0; i < 4; ++i)
    p[i] = fzDenseArrayAttrGetInt(a, i);
  return true;
}

/*===--- Forms ----------------------------------------------------------===*/

static ClForm form_at(ClLayout *L, FzValue *v, int depth) {
  ClForm *f = fzPtrMapGet(&L->forms, v);
  if (f)
    return *f;
  ClForm r;
  memset(&r, 0, sizeof r);
  r.base = v;
  memcpy(r.perm, kClToNhwc, sizeof r.perm);
  /* A transpose in the input: nhwc(v) = transpose(base(x),
   * perm(x) . toNchw . P . toNhwc). Chains are short (canonicalize
   * composes them); a long one is cut. */
  FzOp *def = fzValueGetDefiningOp(v);
  int64_t p[4];
  if (depth < 8 && is_named(def, "graph.transpose") && transpose_perm(def, p)) {
    ClForm x = form_at(L, fzOpGetOperand(def, 0), depth + 1);
    r.base = x.base;
    compose(x.perm, kClToNchw, r.perm);
    compose(r.perm, p, r.perm);
    compose(r.perm, kClToNhwc, r.perm);
  }
  return r;
}

ClForm clGetForm(ClLayout *L, FzValue *v) {
  return form_at(L, v, 0);
}

bool clIsFree(ClLayout *L, FzValue *v) {
  ClForm f = clGetForm(L, v);
  return is_identity(f.perm);
}

/* Whether transposing a value of type t by perm only renames it: the dims
 * that are not 1 keep their order (a reshape does it). */
static bool only_unit_dims_move(FzType *t, const int64_t *perm) {
  int64_t last = -1;
  for (int i = 0; i < 4; ++i) {
    if (fzShapedTypeGetDim(t, (size_t)perm[i]) == 1)
      continue;
    if (perm[i] < last)
      return false;
    last = perm[i];
  }
  return true;
}

bool clNeedsTranspose(ClLayout *L, FzValue *v) {
  if (fzValueGetConstant(v))
    return false;
  ClForm f = clGetForm(L, v);
  return !is_identity(f.perm) &&
         !only_unit_dims_move(fzValueGetType(f.base), f.perm);
}

bool clIsAvailable(ClLayout *L, FzValue *v) {
  ClForm f = clGetForm(L, v);
  if (is_identity(f.perm) || fzPtrMapContains(&L->wanted, v))
    return true;
  for (ClMade *m = fzPtrMapGet(&L->made, f.base); m; m = m->next)
    if (!memcmp(m->perm, f.perm, sizeof m->perm))
      return true;
  return false;
}

/*===--- Making transposes ----------------------------------------------===*/

FzType *clPermuteType(FzContext *ctx, FzType *t, const int64_t *perm) {
  int64_t shape[4];
  for (int i = 0; i < 4; ++i)
    shape[i] = fzShapedTypeGetDim(t, (size_t)perm[i]);
  return fzTensorTypeGet(ctx, 4, shape, fzShapedTypeGetElementType(t), NULL);
}

FzAttr *clI64Array(ClLayout *L, size_t n, const int64_t *v) {
  FzAttr *a = fzDenseArrayAttrGet(L->ctx, fzIntegerTypeGet(L->ctx, 64), n, v);
  if (!a)
    L->failed = true;
  return a;
}

/* b's insertion point right after v's definition (the start of the body
 * for an argument): what is made there dominates every use of v. */
static void after_definition(ClLayout *L, FzBuilder *b, FzValue *v) {
  fzBuilderInit(b, L->ctx);
  FzOp *def = fzValueGetDefiningOp(v);
  if (def)
    fzBuilderSetInsertionPointAfter(b, def);
  else
    fzBuilderSetInsertionPointToStart(b, fzValueGetParentBlock(v));
}

/* The constant c (a dense attribute of static shape src4, its dims seen
 * as 4) transposed by perm into type `to` (the same elements, reshaped
 * to it), as a graph.constant after c's definition. */
static FzValue *permuted_constant(ClLayout *L, FzValue *v, FzAttr *c,
                                  const int64_t *src4, const int64_t *perm,
                                  FzType *to) {
  FzTensor *in = fzTensorFromDenseAttr(L->ctx, c);
  FzTensor *out = in ? fzTensorCreateFromType(L->ctx, to) : NULL;
  FzAttr *attr = NULL;
  if (out && out->numElements == in->numElements) {
    size_t es = fzTypeGetStorageSize(in->dtype);
    int64_t strides[4], dst[4];
    strides[3] = 1;
    for (int i = 3; i > 0; --i)
      strides[i - 1] = strides[i] * src4[i];
    for (int i = 0; i < 4; ++i)
      dst[i] = src4[perm[i]];
    int64_t idx[4] = {0, 0, 0, 0};
    for (int64_t o = 0; o < out->numElements; ++o) {
      int64_t s = 0;
      for (int i = 0; i < 4; ++i)
        s += idx[i] * strides[perm[i]];
      memcpy((char *)out->data + (size_t)o * es,
             (const char *)in->data + (size_t)s * es, es);
      for (int i = 3; i >= 0; --i) {
        if (++idx[i] < dst[i])
          break;
        idx[i] = 0;
      }
    }
    attr = fzTensorToDenseAttr(out);
  }
  fzTensorDestroy(in);
  fzTensorDestroy(out);
  FzOp *k = NULL;
  if (attr) {
    FzBuilder b;
    after_definition(L, &b, v);
    k = fzGraphCreateConstant(&b, attr, fzValueGetLoc(v));
  }
  if (!k) {
    L->failed = true;
    return NULL;
  }
  return fzOpGetResult(k, 0);
}

enum { TO_NHWC, TO_NCHW };

/* Says why a transpose stays (remarks=true), at user's location. */
static void remark_kept(ClLayout *L, FzValue *base, FzOp *user, int dir) {
  if (!L->remarks || !user)
    return;
  FzOp *def = fzValueGetDefiningOp(base);
  const char *userName = fzOpGetDef(user) ? fzOpGetDef(user)->name : "?";
  if (dir == TO_NCHW && fzOpHasTrait(user, FZ_TRAIT_RETURN_LIKE))
    fzEmitRemark(L->ctx, fzOpGetLoc(user),
                 "convert-layout: kept a transpose to NCHW: a function "
                 "result is NCHW");
  else if (dir == TO_NCHW)
    fzEmitRemark(L->ctx, fzOpGetLoc(user),
                 "convert-layout: kept a transpose to NCHW: '%s' reads "
                 "NCHW (it has no NHWC form here)",
                 userName);
  else if (!def)
    fzEmitRemark(L->ctx, fzOpGetLoc(user),
                 "convert-layout: kept a transpose to NHWC: function "
                 "argument #%zu is NCHW",
                 fzValueGetIndex(base));
  else
    fzEmitRemark(L->ctx, fzOpGetLoc(user),
                 "convert-layout: kept a transpose to NHWC: '%s' stays "
                 "NCHW",
                 fzOpGetDef(def) ? fzOpGetDef(def)->name : "?");
}

/* transpose(base, perm) of type `to` (or base reshaped to `to` when perm
 * only moves unit dims), made once after base's definition. */
static FzValue *make(ClLayout *L, FzValue *base, const int64_t *perm,
                     FzType *to, FzOp *user, int dir) {
  FzType *from = fzValueGetType(base);
  if (is_identity(perm) && from == to)
    return base;
  for (ClMade *m = fzPtrMapGet(&L->made, base); m; m = m->next)
    if (!memcmp(m->perm, perm, sizeof m->perm) &&
        fzValueGetType(m->value) == to)
      return m->value;
  FzValue *out = NULL;
  /* A change of rank (perm the identity) is a reshape too. */
  bool reshape = fzShapedTypeGetRank(from) != 4 ||
                 fzShapedTypeGetRank(to) != 4 ||
                 only_unit_dims_move(from, perm);
  FzAttr *c = fzValueGetConstant(base);
  if (c && fzAttrGetKind(c) == FZ_ATTR_DENSE &&
      fzShapedTypeHasStaticShape(from) && fzShapedTypeGetRank(from) == 4) {
    out = permuted_constant(L, base, c, fzShapedTypeGetShape(from), perm, to);
  } else {
    FzOpState st;
    fzOpStateInit(&st, L->ctx,
                  reshape ? FZ_STR("graph.reshape") : FZ_STR("graph.transpose"),
                  fzValueGetLoc(base));
    fzOpStateAddOperands(&st, 1, &base);
    fzOpStateAddResults(&st, 1, &to);
    if (!reshape) {
      FzAttr *p = clI64Array(L, 4, perm);
      if (p)
        fzOpStateAddProp(&st, FZ_STR("perm"), p);
    }
    FzBuilder b;
    after_definition(L, &b, base);
    FzOp *op = fzBuilderCreate(&b, &st);
    if (!op) {
      L->failed = true;
      return NULL;
    }
    out = fzOpGetResult(op, 0);
    if (!fzPtrVecPush(&L->madeOps, op))
      L->failed = true;
    L->stats[reshape ? CL_STAT_RESHAPES : CL_STAT_TRANSPOSES]++;
    if (!reshape)
      remark_kept(L, base, user, dir);
  }
  ClMade *m = out ? fzArenaAlloc(&L->arena, sizeof *m) : NULL;
  if (!m) {
    L->failed = true;
    return NULL;
  }
  m->base = base;
  memcpy(m->perm, perm, sizeof m->perm);
  m->value = out;
  m->next = fzPtrMapGet(&L->made, base);
  if (!fzPtrMapPut(&L->made, base, m))
    L->failed = true;
  return out;
}

FzValue *clNhwc(ClLayout *L, FzValue *v, FzOp *user) {
  FzContext *ctx = L->ctx;
  ClForm f = clGetForm(L, v);
  if (fzValueGetConstant(v))
    f.base = v, memcpy(f.perm, kClToNhwc, sizeof f.perm);
  FzType *t = clPermuteType(ctx, fzValueGetType(f.base), f.perm);
  if (!t) {
    L->failed = true;
    return NULL;
  }
  return make(L, f.base, f.perm, t, user, TO_NHWC);
}

/* The NCHW value of a converted v, for `user`. */
static FzValue *nchw(ClLayout *L, const ClForm *f, FzOp *user) {
  if (f->plain)
    return f->plain;
  int64_t perm[4];
  compose(f->perm, kClToNchw, perm);
  FzType *t = clPermuteType(L->ctx, fzValueGetType(f->base), perm);
  if (!t) {
    L->failed = true;
    return NULL;
  }
  return make(L, f->base, perm, t, user, TO_NCHW);
}

FzValue *clRelayoutOperand(ClLayout *L, FzValue *v, FzOp *user) {
  FzType *t = fzValueGetType(v);
  size_t r = fzShapedTypeGetRank(t);
  if (r == 4)
    return clNhwc(L, v, user);
  /* Aligned to the right: [1]*(4 - r) + shape, then permuted; leading
   * 1s dropped again down to rank r where they allow it. */
  int64_t s4[4], p4[4];
  for (size_t i = 0; i < 4; ++i)
    s4[i] = i < 4 - r ? 1 : fzShapedTypeGetDim(t, i - (4 - r));
  for (int i = 0; i < 4; ++i)
    p4[i] = s4[kClToNhwc[i]];
  size_t lead = 0;
  while (lead < 4 - r && p4[lead] == 1)
    ++lead;
  size_t rr = 4 - lead;
  FzType *elt = fzShapedTypeGetElementType(t);
  FzType *to = fzTensorTypeGet(L->ctx, rr, p4 + lead, elt, NULL);
  FzType *t4 = fzTensorTypeGet(L->ctx, 4, s4, elt, NULL);
  if (!to || !t4) {
    L->failed = true;
    return NULL;
  }
  if (to == t && only_unit_dims_move(t4, kClToNhwc))
    return v; /* the same elements in the same order */
  FzAttr *c = fzValueGetConstant(v);
  if (c && fzAttrGetKind(c) == FZ_ATTR_DENSE && fzShapedTypeHasStaticShape(t))
    return permuted_constant(L, v, c, s4, kClToNhwc, to);
  static const int64_t id[4] = {0, 1, 2, 3};
  FzValue *v4 = make(L, v, id, t4, user, TO_NHWC);
  FzType *pt = v4 ? clPermuteType(L->ctx, t4, kClToNhwc) : NULL;
  FzValue *p = pt ? make(L, v4, kClToNhwc, pt, user, TO_NHWC) : NULL;
  return p ? make(L, p, id, to, user, TO_NHWC) : NULL;
}

/*===--- Converted ops ----------------------------------------------------===*/

static ClForm *new_form(ClLayout *L, FzOp *op) {
  ClForm *f = fzArenaAlloc(&L->arena, sizeof *f);
  if (!f || !fzPtrVecPush(&L->converted, op) ||
      !fzPtrMapPut(&L->forms, fzOpGetResult(op, 0), f)) {
    L->failed = true;
    return NULL;
  }
  memset(f, 0, sizeof *f);
  f->converted = true;
  return f;
}

bool clConverted(ClLayout *L, FzOp *op, FzValue *nhwcValue, FzValue *plain) {
  if (!nhwcValue && !plain)
    return false; /* the rule failed (reported) */
  ClForm *f = new_form(L, op);
  if (!f)
    return false;
  f->base = nhwcValue;
  for (int i = 0; i < 4; ++i)
    f->perm[i] = i;
  f->plain = plain;
  return true;
}

bool clConvertedForm(ClLayout *L, FzOp *op, const ClForm *form) {
  ClForm *f = new_form(L, op);
  if (!f)
    return false;
  *f = *form;
  f->converted = true;
  f->plain = NULL;
  return true;
}

FzOp *clCloneOp(ClLayout *L, FzOp *op, size_t n, FzValue *const *ops,
                FzType *type, size_t numProps, const char *const *names,
                FzAttr *const *values) {
  if (!type) {
    L->failed = true;
    return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, L->ctx, fzIdentGetString(fzOpGetName(op)),
                fzOpGetLoc(op));
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddResults(&st, 1, &type);
  FzAttr *props = fzOpGetPropDict(op), *attrs = fzOpGetAttrDict(op);
  for (size_t i = 0; i < fzDictAttrGetSize(props); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(props, i);
    bool replaced = false;
    for (size_t k = 0; k < numProps; ++k)
      replaced = replaced ||
                 fzStringRefEqual(fzIdentGetString(e.name),
                                  fzStringRefFromCString(names[k]));
    if (!replaced)
      fzOpStateAddProp(&st, fzIdentGetString(e.name), e.value);
  }
  for (size_t k = 0; k < numProps; ++k) {
    if (!values[k]) {
      fzOpStateDispose(&st);
      L->failed = true;
      return NULL;
    }
    fzOpStateAddProp(&st, fzStringRefFromCString(names[k]), values[k]);
  }
  for (size_t i = 0; i < fzDictAttrGetSize(attrs); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(attrs, i);
    fzOpStateAddAttr(&st, fzIdentGetString(e.name), e.value);
  }
  FzBuilder b;
  fzBuilderInit(&b, L->ctx);
  fzBuilderSetInsertionPointBefore(&b, op);
  FzOp *created = fzBuilderCreate(&b, &st);
  if (!created)
    L->failed = true;
  return created;
}

FzValue *clCreate(ClLayout *L, FzOp *before, const char *name, size_t n,
                  FzValue *const *ops, FzType *type) {
  for (size_t i = 0; i < n; ++i)
    if (!ops[i])
      return NULL;
  FzOpState st;
  fzOpStateInit(&st, L->ctx, fzStringRefFromCString(name),
                fzOpGetLoc(before));
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddResults(&st, 1, &type);
  FzBuilder b;
  fzBuilderInit(&b, L->ctx);
  fzBuilderSetInsertionPointBefore(&b, before);
  FzOp *op = type ? fzBuilderCreate(&b, &st) : NULL;
  if (!type)
    fzOpStateDispose(&st);
  if (!op) {
    L->failed = true;
    return NULL;
  }
  return fzOpGetResult(op, 0);
}

/*===--- The driver -------------------------------------------------------===*/

/* Gives every use of a converted value outside the converted ops its
 * NCHW value, then erases the converted ops (users first). */
static void finish(ClLayout *L) {
  FzPtrMap dying;
  fzPtrMapInit(&dying, L->ctx);
  for (size_t i = 0; i < L->converted.len; ++i)
    if (!fzPtrMapPut(&dying, L->converted.data[i], L->converted.data[i]))
      L->failed = true;
  for (size_t i = 0; !L->failed && i < L->converted.len; ++i) {
    FzOp *op = L->converted.data[i];
    FzValue *r = fzOpGetResult(op, 0);
    ClForm *f = fzPtrMapGet(&L->forms, r);
    for (FzOpOperand *u = fzValueGetFirstUse(r), *next; u && !L->failed;
         u = next) {
      next = fzOpOperandGetNextUse(u);
      FzOp *owner = fzOpOperandGetOwner(u);
      if (fzPtrMapContains(&dying, owner))
        continue;
      FzValue *v = nchw(L, f, owner);
      /* reshape(reshape(y)) is reshape(y): a flatten after an NHWC
       * global pool reads the pool's result directly. */
      FzOp *def = v ? fzValueGetDefiningOp(v) : NULL;
      if (is_named(owner, "graph.reshape") && is_named(def, "graph.reshape"))
        v = fzOpGetOperand(def, 0);
      if (v)
        fzOpOperandSet(u, v);
    }
  }
  for (size_t i = L->converted.len; !L->failed && i-- > 0;) {
    FzOp *op = L->converted.data[i];
    if (!fzValueHasUses(fzOpGetResult(op, 0)))
      fzOpErase(op);
  }
  /* A reshape made for a flatten that now reads around it. */
  for (size_t i = L->madeOps.len; !L->failed && i-- > 0;) {
    FzOp *op = L->madeOps.data[i];
    if (!fzValueHasUses(fzOpGetResult(op, 0))) {
      L->stats[is_named(op, "graph.reshape") ? CL_STAT_RESHAPES
                                             : CL_STAT_TRANSPOSES]--;
      fzOpErase(op);
    }
  }
  fzPtrMapFree(&dying);
}

static bool results_used(FzOp *op) {
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    if (fzValueHasUses(fzOpGetResult(op, i)))
      return true;
  return false;
}

/* Erases the pure ops of ops (block order) that had users before the
 * walk and have none now: a model transpose whose users all read its
 * operand's form instead (ConvNeXt's permute back), and what only it
 * read. Dead code the input had stays (that is dce's to remove). */
static void erase_orphans(FzPtrVec *ops, const bool *used) {
  for (size_t i = ops->len; i-- > 0;) {
    FzOp *op = ops->data[i];
    if (op && used[i] && fzOpIsEffectFree(op) && fzOpGetNumRegions(op) == 0 &&
        !results_used(op))
      fzOpErase(op);
  }
}

/*===--- conv=auto -------------------------------------------------------===*/

/* Element count of t with dynamic dims counted as 1 (a size to weigh
 * work by, not to allocate); 0 for a non-shaped type. */
static double weight_elems(const FzType *t) {
  if (fzTypeGetKind(t) != FZ_TYPE_TENSOR)
    return 0;
  double n = 1;
  for (size_t i = 0; i < fzShapedTypeGetRank(t); ++i) {
    int64_t d = fzShapedTypeGetDim(t, i);
    n *= d == FZ_DYNAMIC || d < 1 ? 1.0 : (double)d;
  }
  return n;
}

static int64_t static_dim(const FzValue *v, int64_t i) {
  FzType *t = fzValueGetType(v);
  if (fzTypeGetKind(t) != FZ_TYPE_TENSOR || i < 0 ||
      (size_t)i >= fzShapedTypeGetRank(t))
    return 1;
  int64_t d = fzShapedTypeGetDim(t, (size_t)i);
  return d == FZ_DYNAMIC || d < 1 ? 1 : d;
}

/* Multiply-adds of a contraction op (matmul, conv2d, attention), 0 for
 * anything else. */
static double contraction_macs(const FzOp *op) {
  if (fzOpGetNumOperands(op) < 2 || fzOpGetNumResults(op) < 1)
    return 0;
  FzValue *a = fzOpGetOperand(op, 0), *b = fzOpGetOperand(op, 1);
  double out = weight_elems(fzValueGetType(fzOpGetResult((FzOp *)op, 0)));
  if (is_named(op, "graph.conv2d")) {
    /* Each output element reads C/groups x KH x KW weights: the weight's
     * elements over its output channels. */
    int64_t oc = static_dim(b, 0);
    return out * weight_elems(fzValueGetType(b)) / (double)oc;
  }
  if (is_named(op, "graph.matmul")) {
    size_t r = fzShapedTypeGetRank(fzValueGetType(a));
    FzAttr *ta = fzOpGetInherentAttr((FzOp *)op, FZ_STR("transpose_a"));
    bool t = ta && fzAttrGetKind(ta) == FZ_ATTR_BOOL && fzBoolAttrGetValue(ta);
    int64_t k = r <= 1 ? static_dim(a, 0)
                       : static_dim(a, (int64_t)r - (t ? 2 : 1));
    return out * (double)k;
  }
  if (is_named(op, "graph.attention")) {
    /* Q K^T and P V: each query row meets every key twice. */
    size_t r = fzShapedTypeGetRank(fzValueGetType(b));
    return 2.0 * weight_elems(fzValueGetType(a)) *
           (double)static_dim(b, (int64_t)r - 2);
  }
  return 0;
}

/* conv=auto: NHWC when the conv2d ops the pass would convert hold at
 * least half of the function's contraction work (multiply-adds of
 * matmul, conv2d and attention): a convolutional network (ResNet,
 * MobileNet) gains the channels-last implicit GEMM, while a network whose
 * work is in matmuls (ConvNeXt's MLPs, ViT after its patch embedding, a
 * transformer) keeps its layout and pays no transposes. */
static bool auto_wants_nhwc(ClLayout *L, FzBlock *body, FzOp *func) {
  double conv = 0, all = 0;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    double m = contraction_macs(op);
    int64_t c, min;
    all += m;
    if (m > 0 && clConvConverts(L, op, &c, &min))
      conv += m;
  }
  bool nhwc = conv > 0 && conv >= 0.5 * all;
  if (L->remarks)
    fzEmitRemark(L->ctx, fzOpGetLoc(func),
                 "convert-layout: conv=auto chose %s: the convolutions it "
                 "would convert hold %.0f%% of the contraction work (%.3g "
                 "of %.3g multiply-adds; nhwc from 50%%)",
                 nhwc ? "nhwc" : "nchw", all > 0 ? 100.0 * conv / all : 0.0,
                 conv, all);
  return nhwc;
}

static const char *const kLayouts[] = {"nhwc", "nchw", "auto", NULL};

static const FzPassOptionDef kOptions[] = {
    {"conv", FZ_PASS_OPTION_STRING, "nhwc",
     "Layout of the convolution regions: nhwc (channels last), nchw "
     "(nothing changes) or auto (nhwc when the convolutions it converts "
     "hold at least half of the contraction work)",
     kLayouts, 0, 0},
    {"min-channels", FZ_PASS_OPTION_INT, "0",
     "A conv2d with fewer input channels stays NCHW (0: a 16-byte vector "
     "of its element type: 4 for f32, 8 for bf16/f16)",
     NULL, 0, 1 << 30},
    {"remarks", FZ_PASS_OPTION_BOOL, "false",
     "A remark at each transpose that stays and each conv2d left NCHW, "
     "saying why",
     NULL, 0, 0},
};

static const FzPassStatisticDef kStats[CL_NUM_STATS] = {
    {"num-convs", "conv2d ops rewritten to NHWC"},
    {"num-convs-kept", "conv2d ops left NCHW (fewer than min-channels)"},
    {"num-ops", "Other ops rewritten to NHWC (pools, elementwise, ...)"},
    {"num-transposes", "Transposes made where the layout changes"},
    {"num-reshapes", "Layout changes that move only size-1 dims (reshapes)"},
    {"num-cancelled", "Transposes of the input absorbed (no data moves)"},
};

static bool run(FzPass *pass, FzOp *func) {
  if (fzStringRefEqual(fzPassGetStringOption(pass, "conv"), FZ_STR("nchw")))
    return true;
  FzRegion *region = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *body = region ? fzRegionGetFirstBlock(region) : NULL;
  if (!body || fzBlockGetNext(body))
    return true; /* a declaration, or a body of several blocks */
  ClLayout L;
  memset(&L, 0, sizeof L);
  L.ctx = fzOpGetContext(func);
  L.body = body;
  L.minChannels = fzPassGetIntOption(pass, "min-channels");
  L.remarks = fzPassGetBoolOption(pass, "remarks");
  if (fzStringRefEqual(fzPassGetStringOption(pass, "conv"), FZ_STR("auto")) &&
      !auto_wants_nhwc(&L, body, func))
    return true;
  fzPtrMapInit(&L.forms, L.ctx);
  fzPtrMapInit(&L.made, L.ctx);
  fzPtrMapInit(&L.wanted, L.ctx);
  fzPtrVecInit(&L.converted, L.ctx);
  fzPtrVecInit(&L.madeOps, L.ctx);
  fzArenaInit(&L.arena, L.ctx);
  /* The ops as they are before the walk inserts any. */
  FzPtrVec ops;
  fzPtrVecInit(&ops, L.ctx);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op))
    if (!fzPtrVecPush(&ops, op))
      L.failed = true;
  /* The inputs of the convs that go NHWC get a transpose whatever else
   * happens; an op that reads them (a pool on the same input) may use
   * it, wherever it stands in the block. */
  int64_t c, min;
  for (size_t i = 0; !L.failed && i < ops.len; ++i)
    if (clConvConverts(&L, ops.data[i], &c, &min) &&
        !fzPtrMapPut(&L.wanted, fzOpGetOperand(ops.data[i], 0), &L))
      L.failed = true;
  bool *used = ops.len ? fzCalloc(L.ctx, ops.len, sizeof *used) : NULL;
  if (ops.len && !used)
    L.failed = true;
  for (size_t i = 0; !L.failed && i < ops.len; ++i)
    used[i] = results_used(ops.data[i]);
  for (size_t i = 0; !L.failed && i < ops.len; ++i)
    clConvertOp(&L, ops.data[i]);
  if (!L.failed) {
    /* finish erases the converted ops: forget them first. */
    FzPtrMap gone;
    fzPtrMapInit(&gone, L.ctx);
    for (size_t i = 0; i < L.converted.len; ++i)
      if (!fzPtrMapPut(&gone, L.converted.data[i], &gone))
        L.failed = true;
    for (size_t i = 0; i < ops.len; ++i)
      if (fzPtrMapContains(&gone, ops.data[i]))
        ops.data[i] = NULL;
    fzPtrMapFree(&gone);
  }
  if (!L.failed)
    finish(&L);
  if (!L.failed)
    erase_orphans(&ops, used);
  fzFree(L.ctx, used);
  for (int s = 0; s < CL_NUM_STATS; ++s)
    fzPassAddStatistic(pass, (size_t)s, L.stats[s]);
  bool ok = !L.failed && !fzContextHadAllocationFailure(L.ctx);
  if (!ok)
    fzEmitError(L.ctx, fzOpGetLoc(func),
                "convert-layout: could not rewrite the function (out of "
                "memory)");
  fzPtrVecFree(&ops);
  fzPtrVecFree(&L.converted);
  fzPtrVecFree(&L.madeOps);
  fzPtrMapFree(&L.forms);
  fzPtrMapFree(&L.made);
  fzPtrMapFree(&L.wanted);
  fzArenaReset(&L.arena);
  return ok;
}

const FzPassDef fzConvertLayoutPass = {
    .argument = "convert-layout",
    .displayName = "ConvertLayout",
    .summary = "Run convolution regions in NHWC (channels last), with "
               "transposes only where the layout must change",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = CL_NUM_STATS,
    .run = run,
};
