/* dialects/loop/nest_collapse.c - fzLoopCollapseParallelDims
 * (nest_rewrite.h): two adjacent dims of a loop.parallel become one.
 *
 * The check comes first and touches nothing: every use of the two ivs
 * must be an index pair of a load or store into a buffer whose two dims
 * there merge (nest_rewrite.h). Then, before the nest, one loop.view
 * per (buffer, position) with the two dims merged; the accesses are
 * pointed at the views with the pair replaced by the first iv, which now
 * runs over the product; the second block argument is erased; and a new
 * loop.parallel with one dim fewer takes the old one's region.
 */
#include <string.h>

#include "dialects/loop/nest_rewrite.h"
#include "ir/util.h"

#define MAX_RANK 16

static bool const_int(FzValue *v, int64_t *out) {
  return v && fzLoopValueGetConstantInt(v, out);
}

/* Whether v is defined inside op (in one of its regions). */
static bool defined_inside(FzValue *v, FzOp *op) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
  return owner && fzOpIsAncestor(op, owner);
}

static void strides_of(FzType *t, int64_t *st) {
  size_t r = fzShapedTypeGetRank(t);
  const int64_t *s = fzBufferTypeGetStrides(t);
  int64_t acc = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = s ? s[d] : acc;
    acc *= fzShapedTypeGetDim(t, d);
  }
}

typedef struct Collapse {
  FzOp *par;
  FzValue *ivD, *ivE;
  int64_t extD, extE;
  FzPtrVec ops; /* the accesses (ops); qs[i]: the pair's position */
  size_t *qs;
  size_t numQs, capQs;
} Collapse;

/* Checks the access `op` whose operand `use` is ivD. */
static bool check_access(Collapse *c, FzOp *op, size_t use, size_t *q,
                         char *why, size_t whyLen) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  if (opc != FZ_LOOP_OP_LOAD && opc != FZ_LOOP_OP_STORE)
    return fzReasonf(why, whyLen, "an iv of the merged dims is used by '%.*s', "
                                  "not only as a load or store index",
                     (int)fzIdentGetString(fzOpGetName(op)).length,
                     fzIdentGetString(fzOpGetName(op)).data);
  size_t b = fzLoopMemGetBufferOperand(op);
  size_t n = fzOpGetNumOperands(op);
  if (use <= b || use + 1 >= n || fzOpGetOperand(op, use + 1) != c->ivE)
    return fzReasonf(why, whyLen, "the ivs of the merged dims are not "
                                  "adjacent indices of an access, in order");
  for (size_t i = b + 1; i < n; ++i)
    if (i != use && i != use + 1 &&
        (fzOpGetOperand(op, i) == c->ivD || fzOpGetOperand(op, i) == c->ivE))
      return fzReasonf(why, whyLen, "an access uses an iv of the merged dims "
                                    "twice");
  FzValue *buf = fzOpGetOperand(op, b);
  FzType *t = fzValueGetType(buf);
  if (defined_inside(buf, c->par) || !fzShapedTypeHasStaticShape(t) ||
      fzShapedTypeGetRank(t) > MAX_RANK)
    return fzReasonf(why, whyLen, "an access's buffer is defined in the nest "
                                  "or not static");
  *q = use - b - 1;
  int64_t st[MAX_RANK];
  strides_of(t, st);
  if (fzShapedTypeGetDim(t, *q) != c->extD ||
      fzShapedTypeGetDim(t, *q + 1) != c->extE ||
      st[*q] != c->extE * st[*q + 1])
    return fzReasonf(why, whyLen, "a buffer's two dims at the merged indices "
                                  "are not one contiguous run");
  return true;
}

static bool push_q(Collapse *c, size_t q) {
  if (c->numQs == c->capQs) {
    size_t cap = c->capQs ? 2 * c->capQs : 16;
    size_t *n = fzRealloc(fzOpGetContext(c->par), c->qs, cap * sizeof *n);
    if (!n)
      return false;
    c->qs = n;
    c->capQs = cap;
  }
  c->qs[c->numQs++] = q;
  return true;
}

/* The merged view of buf at q (dims q, q + 1 as one), created before
 * the nest, or the one made already for the same (buf, q). */
static FzValue *view_of(Collapse *c, FzValue *buf, size_t q, FzPtrVec *made,
                        size_t *madeQ) {
  for (size_t i = 0; i < made->len; ++i) {
    FzOp *v = made->data[i];
    if (fzOpGetOperand(v, 0) == buf && madeQ[i] == q)
      return fzOpGetResult(v, 0);
  }
  FzContext *ctx = fzOpGetContext(c->par);
  FzType *t = fzValueGetType(buf);
  size_t r = fzShapedTypeGetRank(t);
  int64_t shape[MAX_RANK], st[MAX_RANK], nshape[MAX_RANK], nst[MAX_RANK];
  strides_of(t, st);
  for (size_t d = 0; d < r; ++d)
    shape[d] = fzShapedTypeGetDim(t, d);
  size_t k = 0;
  for (size_t d = 0; d < r; ++d) {
    if (d == q + 1)
      continue;
    nshape[k] = d == q ? shape[q] * shape[q + 1] : shape[d];
    nst[k] = d == q ? st[q + 1] : st[d];
    ++k;
  }
  bool identity = true;
  int64_t acc = 1;
  for (size_t d = k; d-- > 0;) {
    identity = identity && nst[d] == acc;
    acc *= nshape[d];
  }
  FzType *vt = fzBufferTypeGet(ctx, k, nshape, fzShapedTypeGetElementType(t),
                               identity ? NULL : nst,
                               fzBufferTypeGetMemorySpace(t), NULL);
  if (!vt)
    return NULL;
  FzOpState s;
  fzOpStateInit(&s, ctx, FZ_STR("loop.view"), fzOpGetLoc(c->par));
  fzOpStateAddOperands(&s, 1, &buf);
  fzOpStateAddResults(&s, 1, &vt);
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointBefore(&b, c->par);
  FzOp *v = fzBuilderCreate(&b, &s);
  if (!v)
    return NULL;
  if (!fzPtrVecPush(made, v))
    return NULL;
  madeQ[made->len - 1] = q;
  return fzOpGetResult(v, 0);
}

/* Points each access at its view with (ivD, ivE) replaced by ivD. */
static bool rewrite_accesses(Collapse *c) {
  FzContext *ctx = fzOpGetContext(c->par);
  FzPtrVec made;
  fzPtrVecInit(&made, ctx);
  size_t *madeQ = fzCalloc(ctx, c->ops.len + 1, sizeof *madeQ);
  bool ok = madeQ != NULL;
  for (size_t i = 0; ok && i < c->ops.len; ++i) {
    FzOp *op = c->ops.data[i];
    size_t b = fzLoopMemGetBufferOperand(op), q = c->qs[i];
    size_t n = fzOpGetNumOperands(op);
    FzValue *view = view_of(c, fzOpGetOperand(op, b), q, &made, madeQ);
    FzValue *ops[2 + MAX_RANK];
    size_t k = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j == b + 2 + q)
        continue; /* ivE */
      ops[k++] = j == b ? view : fzOpGetOperand(op, j);
    }
    ok = view && fzOpSetOperands(op, k, ops);
  }
  fzFree(ctx, madeQ);
  fzPtrVecFree(&made);
  return ok;
}

FzOp *fzLoopCollapseParallelDims(FzOp *par, size_t d, bool *failed,
                                 char *why, size_t whyLen) {
  *failed = false;
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL) {
    fzReasonf(why, whyLen, "not a loop.parallel");
    return NULL;
  }
  size_t n = fzLoopParallelGetNumDims(par);
  FzBlock *body = fzLoopGetBody(par);
  if (!body || d + 1 >= n || n > MAX_RANK) {
    fzReasonf(why, whyLen, "no dims %zu and %zu among the nest's %zu", d,
              d + 1, n);
    return NULL;
  }
  Collapse c = {.par = par};
  for (size_t k = d; k <= d + 1; ++k) {
    int64_t lb, ub, st;
    if (!const_int(fzOpGetOperand(par, k), &lb) ||
        !const_int(fzOpGetOperand(par, n + k), &ub) ||
        !const_int(fzOpGetOperand(par, 2 * n + k), &st) || lb != 0 ||
        st != 1 || ub < 1) {
      fzReasonf(why, whyLen, "the merged dims are not constants 0..N step 1");
      return NULL;
    }
    *(k == d ? &c.extD : &c.extE) = ub;
  }
  if (c.extD > INT64_MAX / c.extE) {
    fzReasonf(why, whyLen, "the merged extent overflows");
    return NULL;
  }
  c.ivD = fzBlockGetArgument(body, d);
  c.ivE = fzBlockGetArgument(body, d + 1);
  FzContext *ctx = fzOpGetContext(par);
  fzPtrVecInit(&c.ops, ctx);
  bool ok = true, oom = false;
  for (FzOpOperand *u = fzValueGetFirstUse(c.ivD); u && ok;
       u = fzOpOperandGetNextUse(u)) {
    size_t q = 0;
    ok = check_access(&c, fzOpOperandGetOwner(u), fzOpOperandGetIndex(u), &q,
                      why, whyLen);
    if (ok && (!fzPtrVecPush(&c.ops, fzOpOperandGetOwner(u)) || !push_q(&c, q)))
      ok = !(oom = true);
  }
  /* Every use of ivE follows ivD in an access checked above. */
  for (FzOpOperand *u = fzValueGetFirstUse(c.ivE); u && ok;
       u = fzOpOperandGetNextUse(u)) {
    size_t i = fzOpOperandGetIndex(u);
    if (i == 0 || fzOpGetOperand(fzOpOperandGetOwner(u), i - 1) != c.ivD)
      ok = fzReasonf(why, whyLen, "an iv of the merged dims is used alone");
  }
  FzOp *np = NULL;
  if (ok) {
    /* The new nest: bounds with dim d + 1 dropped, d's extent the product. */
    FzBuilder b;
    fzBuilderInit(&b, ctx);
    fzBuilderSetInsertionPointBefore(&b, par);
    FzValue *ext = fzLoopCreateIndexConstant(&b, fzOpGetLoc(par),
                                             c.extD * c.extE);
    FzValue *ops[3 * MAX_RANK];
    size_t k = 0;
    for (size_t g = 0; g < 3; ++g)
      for (size_t j = 0; j < n; ++j)
        if (j != d + 1)
          ops[k++] = g == 1 && j == d ? ext : fzOpGetOperand(par, g * n + j);
    FzRegion *region = ext ? fzRegionCreate(ctx) : NULL;
    ok = region && rewrite_accesses(&c);
    if (ok) {
      fzBlockEraseArgument(body, d + 1);
      fzRegionTakeBody(region, fzOpGetRegion(par, 0));
      FzOpState s;
      fzOpStateInit(&s, ctx, FZ_STR("loop.parallel"), fzOpGetLoc(par));
      fzOpStateAddOperands(&s, k, ops);
      fzOpStateAddRegionTaken(&s, region);
      region = NULL;
      np = fzBuilderCreate(&b, &s);
      ok = np != NULL;
    }
    if (region)
      fzRegionDestroy(region);
    if (ok)
      fzOpErase(par);
    else
      oom = true;
  }
  fzPtrVecFree(&c.ops);
  fzFree(ctx, c.qs);
  if (oom) {
    *failed = true;
    fzOpEmitError(par, "collapsing parallel dims: out of memory");
    return NULL;
  }
  return np;
}
