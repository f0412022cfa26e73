/* transforms/graph/recognize_attention.c - the recognize-attention pass:
 * the scaled dot-product attention that exporters spell out becomes one
 * graph.attention (dialects/graph/ops_attention.c), which lowers to one
 * streaming loop nest instead of two matmuls and a softmax around an
 * Sq x Sk score tensor in memory.
 *
 * The root is the second matmul; the chain, outermost first:
 *
 *   matmul(P, V)                       no transposes, batch dims equal
 *   P = softmax(X) {axis = last}
 *   X = add(Y, M) | add(M, Y)          additive mask M (broadcasts to Y)
 *     | select(C, F, Y)                masked_fill: F a splat <= -1e30;
 *     | select(C, Y, F)                C constant and equal to j > i
 *     | Y                              (+ Sk - Sq) (or j <= i for the
 *                                      second form): causal; otherwise
 *                                      M = select(C, F, 0) (or (C, 0, F))
 *   Y = mul(S, c) | mul(c, S) | div(S, c) | S     c a splat constant
 *   S = matmul(Q, Kt) {transpose_b}    Kt = transpose(K) over the last
 *                                      two dims, or K itself under
 *                                      transpose_b
 *
 * K is rebuilt as a transpose of the transpose's operand with the
 * composed permutation (a head split transpose stays one op). Every
 * intermediate (S, Y, X, P) must have no other use. Each softmax-fed
 * matmul that does not match gets a remark saying why (dropout between
 * the softmax and the matmul, another axis, broadcast batch dims, an
 * intermediate used elsewhere...), so a model that keeps its score
 * tensor says so.
 *
 * A second pattern splits the batch dim of a rank-3 graph.attention
 * whose N = B * H is a merge the operands' producers make: PyTorch's
 * sequence-first multi-head attention (ViT) reads q as
 * transpose(reshape([S, B, H*D] -> [S, B*H, D])), so the nest's batch iv
 * n reaches the projection through n / H and n % H, which no affine
 * load (the GPU's flash-attention copies) can express. On [B, H, S, D]
 * (each operand reshaped, the result reshaped back: renumberings that
 * fusion folds into index maps) the loads are affine again. B and H are
 * read off the first reshape on q's producer chain (through elementwise
 * ops with a scalar operand and transposes): the common refinement of
 * its operand's and result's shapes must cut the dim that becomes N into
 * exactly two factors, and k and v must be cut the same way (or read
 * nothing that tells: then the split is still exact). Attention with a
 * mask is left as it is.
 */
#include <stdio.h>
#include <string.h>

#include "fz/tensor.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_ATTENTION, STAT_SPLIT, NUM_STATS };

typedef struct Match {
  FzValue *q, *k, *kt, *v, *mask;
  FzOp *kTranspose; /* transpose defining kt, or NULL (transpose_b) */
  double scale;
  bool causal;
  FzValue *cond, *fill; /* a select mask that is not causal */
  bool fillFirst;       /* select(C, F, Y) rather than select(C, Y, F) */
  FzOp *ops[8];
  size_t nops;
} Match;

static bool decline(FzOp *root, const char *why, const void *ud) {
  if (!fzGraphOptGetOptions(ud)->remarks)
    return false;
  fzEmitRemark(fzOpGetContext(root), fzOpGetLoc(root),
               "not recognized as attention: %s", why);
  return false;
}

static bool bool_attr(const FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr((FzOp *)op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a);
}

static int64_t dim(const FzValue *v, size_t i) {
  return fzShapedTypeGetDim(fzValueGetType((FzValue *)v), i);
}

static bool static_shape(const FzValue *v) {
  FzType *t = fzValueGetType((FzValue *)v);
  return fzTypeGetKind(t) == FZ_TYPE_TENSOR && fzShapedTypeHasStaticShape(t);
}

/* Whether constant C (i1, rank <= 2 after leading ones, [Sq, Sk]) is the
 * causal pattern: C[i, j] == (j > i + Sk - Sq) when `upper`, or its
 * negation. */
static bool is_causal_mask(const FzValue *c, int64_t Sq, int64_t Sk,
                           bool upper) {
  FzType *elt = fzGraphOptElementType(c);
  size_t r = fzGraphOptRank(c);
  if (!elt || fzTypeGetKind(elt) != FZ_TYPE_INTEGER ||
      fzTypeGetBitWidth(elt) != 1 || r < 2 || dim(c, r - 2) != Sq ||
      dim(c, r - 1) != Sk)
    return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (dim(c, i) != 1)
      return false;
  FzTensor *t = fzGraphOptTensor(c);
  if (!t)
    return false;
  bool ok = t->numElements == Sq * Sk;
  for (int64_t i = 0; ok && i < Sq; ++i)
    for (int64_t j = 0; ok && j < Sk; ++j) {
      bool masked = j > i + Sk - Sq;
      ok = (fzTensorGetI64(t, i * Sk + j) != 0) == (upper ? masked : !masked);
    }
  fzTensorDestroy(t);
  return ok;
}

/* A fill value that makes a score vanish: a splat at most -1e30. */
static bool is_neg_fill(const FzValue *v) {
  double f;
  return fzGraphOptSplat(v, &f) && f <= -1e30;
}

/* Whether mask shape m broadcasts to s (trailing alignment) without
 * growing it. */
static bool broadcasts_into(const FzValue *m, const FzValue *s) {
  size_t rm = fzGraphOptRank(m), rs = fzGraphOptRank(s);
  if (rm > rs || !static_shape(m))
    return false;
  for (size_t j = 0; j < rm; ++j) {
    int64_t a = dim(m, j), b = dim(s, j + rs - rm);
    if (a != 1 && a != b)
      return false;
  }
  return true;
}

/* Matches the chain under root into M; remarks on a softmax-fed root
 * that does not match. */
static bool match(FzOp *root, Match *M, const void *ud) {
  memset(M, 0, sizeof *M);
  if (fzOpGetNumOperands(root) != 2 || fzOpGetNumResults(root) != 1)
    return false;
  FzValue *p = fzOpGetOperand(root, 0);
  FzOp *sm = fzGraphOptProducer(p, "graph.softmax");
  if (!sm) {
    /* Something between a softmax and this matmul (dropout, a cast)? */
    FzOp *mid = fzValueGetDefiningOp(p);
    for (size_t i = 0; mid && i < fzOpGetNumOperands(mid); ++i)
      if (fzGraphOptProducer(fzOpGetOperand(mid, i), "graph.softmax")) {
        FzStringRef n = fzIdentGetString(fzOpGetName(mid));
        char buf[128];
        snprintf(buf, sizeof buf,
                 "'%.*s' between the softmax and the matmul (dropout?)",
                 (int)n.length, n.data);
        return decline(root, buf, ud);
      }
    return false;
  }
  if (!fzGraphOptIsFloatTensor(p))
    return false;
  size_t r = fzGraphOptRank(p);
  FzAttr *ax = fzOpGetInherentAttr(sm, FZ_STR("axis"));
  int64_t axis = ax && fzAttrGetKind(ax) == FZ_ATTR_INTEGER
                     ? fzIntegerAttrGetValue(ax)
                     : -1;
  if (axis < 0)
    axis += (int64_t)r;
  if (r < 2 || axis != (int64_t)r - 1)
    return decline(root, "the softmax is not over the last axis", ud);
  if (bool_attr(root, "transpose_a") || bool_attr(root, "transpose_b"))
    return decline(root, "the matmul with the values has a transpose flag", ud);
  M->v = fzOpGetOperand(root, 1);
  FzValue *x = fzOpGetOperand(sm, 0);
  M->ops[M->nops++] = root;
  M->ops[M->nops++] = sm;
  /* The mask. */
  FzValue *y = x;
  FzOp *xop = fzValueGetDefiningOp(x);
  if (fzGraphOptIsOp(xop, "graph.add")) {
    for (size_t i = 0; i < 2; ++i) {
      FzValue *cand = fzOpGetOperand(xop, i);
      FzOp *d = fzValueGetDefiningOp(cand);
      if (fzGraphOptIsOp(d, "graph.matmul") || fzGraphOptIsOp(d, "graph.mul") ||
          fzGraphOptIsOp(d, "graph.div")) {
        y = cand;
        M->mask = fzOpGetOperand(xop, 1 - i);
        break;
      }
    }
    if (!M->mask)
      return decline(root, "the softmax's input is an add of no scores", ud);
    M->ops[M->nops++] = xop;
  } else if (fzGraphOptIsOp(xop, "graph.select")) {
    FzValue *c = fzOpGetOperand(xop, 0), *a = fzOpGetOperand(xop, 1),
            *b = fzOpGetOperand(xop, 2);
    if (is_neg_fill(a)) {
      y = b;
      M->fill = a;
      M->fillFirst = true;
    } else if (is_neg_fill(b)) {
      y = a;
      M->fill = b;
    } else {
      return decline(root,
                     "a select before the softmax that is not a "
                     "masked fill with -inf",
                     ud);
    }
    M->cond = c;
    M->ops[M->nops++] = xop;
  }
  /* The scale. */
  FzValue *s = y;
  FzOp *yop = fzValueGetDefiningOp(y);
  M->scale = 1.0;
  double c;
  if (fzGraphOptIsOp(yop, "graph.mul") || fzGraphOptIsOp(yop, "graph.div")) {
    bool div = fzGraphOptIsOp(yop, "graph.div");
    FzValue *a = fzOpGetOperand(yop, 0), *b = fzOpGetOperand(yop, 1);
    if (fzGraphOptSplat(b, &c) && fzValueGetType(a) == fzValueGetType(y)) {
      s = a;
    } else if (!div && fzGraphOptSplat(a, &c) &&
               fzValueGetType(b) == fzValueGetType(y)) {
      s = b;
    } else {
      return decline(root,
                     "the scores are scaled by a tensor, not a "
                     "constant",
                     ud);
    }
    if (div && c == 0)
      return decline(root, "the scores are divided by zero", ud);
    M->scale = div ? 1.0 / c : c;
    M->ops[M->nops++] = yop;
  }
  FzOp *mm = fzGraphOptProducer(s, "graph.matmul");
  if (!mm || fzOpGetNumOperands(mm) != 2)
    return decline(root,
                   "the softmax's input is not a matmul of the "
                   "queries and keys (scaled, masked)",
                   ud);
  if (bool_attr(mm, "transpose_a"))
    return decline(root, "the query matmul has transpose_a", ud);
  M->ops[M->nops++] = mm;
  M->q = fzOpGetOperand(mm, 0);
  M->kt = fzOpGetOperand(mm, 1);
  if (bool_attr(mm, "transpose_b")) {
    M->k = M->kt;
    M->kt = NULL;
  }
  /* Ranks and batch dims: equal, static. */
  FzValue *out = fzOpGetResult(root, 0);
  const FzValue *all[5] = {M->q, M->kt ? M->kt : M->k, M->v, s, out};
  for (size_t i = 0; i < 5; ++i)
    if (fzGraphOptRank(all[i]) != r || !static_shape(all[i]) ||
        !fzGraphOptIsFloatTensor(all[i]) ||
        fzGraphOptElementType(all[i]) != fzGraphOptElementType(p))
      return decline(root,
                     "operands of other ranks, element types or "
                     "dynamic shapes",
                     ud);
  for (size_t d = 0; d + 2 < r; ++d)
    for (size_t i = 1; i < 5; ++i)
      if (dim(all[i], d) != dim(M->q, d))
        return decline(root,
                       "the batch dims broadcast (an unusual "
                       "broadcast: heads shared?)",
                       ud);
  /* Interior values used only inside the chain. */
  for (size_t i = 1; i < M->nops; ++i)
    if (!fzGraphOptUsesWithin(fzOpGetResult(M->ops[i], 0), M->ops, M->nops))
      return decline(root,
                     "the scores or the probabilities have another "
                     "use",
                     ud);
  if (M->mask && !broadcasts_into(M->mask, s))
    return decline(root,
                   "the mask does not broadcast to the scores (an "
                   "unusual broadcast)",
                   ud);
  if (M->mask && fzGraphOptElementType(M->mask) != fzGraphOptElementType(p))
    return decline(root, "the mask's element type is not the scores'", ud);
  if (M->cond) {
    int64_t Sq = dim(s, r - 2), Sk = dim(s, r - 1);
    if (is_causal_mask(M->cond, Sq, Sk, M->fillFirst)) {
      M->causal = true;
      M->cond = NULL;
    } else if (!broadcasts_into(M->cond, s)) {
      return decline(root,
                     "the masked fill's condition does not broadcast "
                     "to the scores",
                     ud);
    }
  }
  if (M->kt) {
    M->kTranspose = fzGraphOptProducer(M->kt, "graph.transpose");
  }
  return true;
}

/* K = Kt with its last two dims swapped: a transpose with the composed
 * permutation when Kt is itself a transpose. */
static FzValue *build_k(FzRewriter *rw, Match *M, FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  size_t r = fzGraphOptRank(M->kt);
  int64_t perm[FZ_GRAPH_MAX_RANK];
  FzValue *src = M->kt;
  for (size_t i = 0; i < r; ++i)
    perm[i] = (int64_t)i;
  if (M->kTranspose) {
    FzAttr *p = fzOpGetInherentAttr(M->kTranspose, FZ_STR("perm"));
    if (!p || fzAttrGetKind(p) != FZ_ATTR_DENSE_ARRAY ||
        fzDenseArrayAttrGetSize(p) != r)
      return NULL;
    for (size_t i = 0; i < r; ++i)
      perm[i] = fzDenseArrayAttrGetInt(p, i);
    src = fzOpGetOperand(M->kTranspose, 0);
  }
  int64_t t = perm[r - 1];
  perm[r - 1] = perm[r - 2];
  perm[r - 2] = t;
  bool identity = true;
  for (size_t i = 0; i < r; ++i)
    identity = identity && perm[i] == (int64_t)i;
  if (identity)
    return src;
  FzGraphOptProp prop = {
      "perm", fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), r, perm)};
  if (!prop.value)
    return NULL;
  return fzGraphOptCreate(rw, "graph.transpose", loc, 1, &src, NULL, 1, &prop);
}

static bool recognize(FzOp *root, FzRewriter *rw, void *ud) {
  Match M;
  if (!match(root, &M, ud))
    return false;
  FzType *elt = fzGraphOptElementType(M.q);
  if (!fzGraphOptGetOptions(ud)->attentionF32 && elt &&
      fzTypeGetKind(elt) != FZ_TYPE_F16 && fzTypeGetKind(elt) != FZ_TYPE_BF16)
    return decline(root,
                   "its operands are not f16 or bf16 (f32=false: the GPU's "
                   "flash-attention kernel takes 16-bit operands, and the "
                   "tensor-core matmuls and softmax are faster than the "
                   "attention nest's generic mapping)",
                   ud);
  FzContext *ctx = fzRewriterGetContext(rw);
  FzLoc *loc = fzGraphOptFusedLoc(M.ops, M.nops);
  if (M.kt && !(M.k = build_k(rw, &M, loc)))
    return false;
  if (M.cond) {
    /* An additive mask: select(C, F, 0) (or (C, 0, F)). */
    FzType *ft = fzValueGetType(M.fill);
    FzValue *zero = fzGraphOptSplatConstant(rw, ft, 0.0, loc);
    FzValue *ops[3] = {M.cond, M.fillFirst ? M.fill : zero,
                       M.fillFirst ? zero : M.fill};
    M.mask =
        zero ? fzGraphOptCreate(rw, "graph.select", loc, 3, ops, NULL, 0, NULL)
             : NULL;
    if (!M.mask)
      return false;
  }
  FzValue *ops[4] = {M.q, M.k, M.v, M.mask};
  FzGraphOptProp props[2] = {
      {"scale", fzFloatAttrGet(ctx, fzF64TypeGet(ctx), M.scale)},
      {"causal", fzBoolAttrGet(ctx, true)}};
  FzValue *att = fzGraphOptCreate(rw, "graph.attention", loc, M.mask ? 4 : 3,
                                  ops, fzValueGetType(fzOpGetResult(root, 0)),
                                  M.causal ? 2 : 1, props);
  if (!att)
    return false;
  if (fzGraphOptGetOptions(ud)->remarks)
    fzEmitRemark(ctx, fzOpGetLoc(root), "recognized as attention (%s%s)",
                 M.causal ? "causal"
                 : M.mask ? "masked"
                          : "unmasked",
                 M.kt ? "" : ", keys from transpose_b");
  fzRewriterReplaceOp(rw, root, &att);
  return true;
}

/*===--- Batch split ---------------------------------------------------===*/

/* The common refinement of the shapes a[na] and b[nb] (equal element
 * counts): for b's dim `want`, its factors in the refinement; their
 * count, 0 when the shapes do not refine (a zero dim, dynamic dims). */
static size_t refined_factors(const int64_t *a, size_t na, const int64_t *b,
                              size_t nb, size_t want, int64_t *f,
                              size_t maxF) {
  size_t i = 0, j = 0, n = 0;
  int64_t ra = na ? a[0] : 1, rb = nb ? b[0] : 1;
  while (i < na && j < nb) {
    if (ra <= 0 || rb <= 0)
      return 0;
    int64_t piece = ra < rb ? ra : rb;
    if (ra % piece || rb % piece)
      return 0; /* not a refinement: gcd pieces would be needed */
    if (j == want && piece > 1) {
      if (n == maxF)
        return 0;
      f[n++] = piece;
    }
    ra /= piece;
    rb /= piece;
    if (ra == 1 && ++i < na)
      ra = a[i];
    if (rb == 1) {
      if (j == want && n == 0)
        return 0; /* a unit dim */
      if (++j < nb)
        rb = b[j];
    }
  }
  return n;
}

/* From x, through elementwise ops whose other operand is a scalar and
 * through transposes, to a reshape: the two factors its refinement cuts
 * the dim of x's dim `d` into. False when the chain says nothing. */
static bool batch_factors(FzValue *x, size_t d, int64_t *B, int64_t *H) {
  for (int depth = 0; depth < 16 && x; ++depth) {
    FzOp *op = fzValueGetDefiningOp(x);
    if (!op)
      return false;
    if (fzGraphOptIsOp(op, "graph.transpose")) {
      FzAttr *p = fzOpGetInherentAttr(op, FZ_STR("perm"));
      if (!p || fzAttrGetKind(p) != FZ_ATTR_DENSE_ARRAY ||
          d >= fzDenseArrayAttrGetSize(p))
        return false;
      d = (size_t)fzDenseArrayAttrGetInt(p, d);
      x = fzOpGetOperand(op, 0);
      continue;
    }
    if (fzGraphOptIsOp(op, "graph.reshape")) {
      FzValue *in = fzOpGetOperand(op, 0);
      if (!static_shape(in) || !static_shape(x))
        return false;
      FzType *ti = fzValueGetType(in), *to = fzValueGetType(x);
      int64_t f[3];
      size_t n = refined_factors(
          fzShapedTypeGetShape(ti), fzShapedTypeGetRank(ti),
          fzShapedTypeGetShape(to), fzShapedTypeGetRank(to), d, f, 3);
      if (n != 2)
        return false;
      *B = f[0];
      *H = f[1];
      return true;
    }
    bool unary = fzOpGetNumOperands(op) == 1;
    bool scalarOther = false;
    if (fzOpGetNumOperands(op) == 2) {
      FzValue *o = fzOpGetOperand(op, 1);
      double c;
      scalarOther = fzGraphOptSplat(o, &c) && fzGraphOptRank(o) == 0;
    }
    if (fzOpGetNumResults(op) != 1 || (!unary && !scalarOther) ||
        fzGraphOptRank(fzOpGetOperand(op, 0)) != fzGraphOptRank(x) ||
        fzGraphOptIsOp(op, "graph.attention"))
      return false;
    x = fzOpGetOperand(op, 0);
  }
  return false;
}

static FzValue *reshaped(FzRewriter *rw, FzValue *x, size_t rank,
                         const int64_t *shape, FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  FzType *t = fzTensorTypeGet(ctx, rank, shape, fzGraphOptElementType(x),
                              NULL);
  return t ? fzGraphOptCreate(rw, "graph.reshape", loc, 1, &x, t, 0, NULL)
           : NULL;
}

/* The elementwise ops an operand's chain may pass through when it is
 * rebuilt on four dims (their only attribute-free forms). */
static bool chain_op(const FzOp *op) {
  static const char *const kOps[] = {"graph.mul", "graph.div", "graph.add",
                                     "graph.sub", "graph.neg", "graph.cast"};
  for (size_t i = 0; i < sizeof kOps / sizeof kOps[0]; ++i)
    if (fzGraphOptIsOp(op, kOps[i]))
      return fzOpGetNumResults(op) == 1 &&
             (fzOpGetNumOperands(op) == 1 ||
              (fzOpGetNumOperands(op) == 2 &&
               fzGraphOptRank(fzOpGetOperand(op, 1)) == 0));
  return false;
}

/* The elementwise ops chain[nc-1..0] re-applied to v (innermost first),
 * each with its other (scalar) operand, on shape sx. */
static FzValue *reapply(FzRewriter *rw, FzValue *v, FzOp *const *chain,
                        size_t nc, const int64_t *sx) {
  FzContext *ctx = fzRewriterGetContext(rw);
  for (size_t c = nc; v && c-- > 0;) {
    FzOp *e = chain[c];
    FzValue *ops[2] = {v, fzOpGetNumOperands(e) == 2 ? fzOpGetOperand(e, 1)
                                                     : NULL};
    FzType *rt = fzTensorTypeGet(
        ctx, 4, sx, fzGraphOptElementType(fzOpGetResult(e, 0)), NULL);
    FzStringRef n = fzIdentGetString(fzOpGetName(e));
    char buf[64];
    if (!rt || n.length >= sizeof buf)
      return NULL;
    memcpy(buf, n.data, n.length);
    buf[n.length] = 0;
    v = fzGraphOptCreate(rw, buf, fzOpGetLoc(e), fzOpGetNumOperands(e), ops,
                         rt, 0, NULL);
  }
  return v;
}

/* x [B*H, S, D] as [B, H, S, D]. When x is ops(transpose(reshape(Y)))
 * (ops: chain_op, at most 8; the transpose optional) and the reshape's
 * dim that becomes N is split into B x H, the chain is rebuilt on four
 * dims: Y reshaped with that dim cut in two, transposed with the
 * permutation widened, then ops again; index maps of such a chain stay
 * affine, and *rebuilt is set. Otherwise x itself is returned (nothing
 * built) and *rebuilt is false. */
static FzValue *split_operand(FzRewriter *rw, FzValue *x, int64_t B, int64_t H,
                              FzLoc *loc, bool *rebuilt) {
  FzContext *ctx = fzRewriterGetContext(rw);
  *rebuilt = false;
  FzOp *chain[8];
  size_t nc = 0;
  FzValue *at = x;
  FzOp *op = fzValueGetDefiningOp(at);
  while (op && nc < 8 && chain_op(op)) {
    chain[nc++] = op;
    at = fzOpGetOperand(op, 0);
    op = fzValueGetDefiningOp(at);
  }
  int64_t perm[3] = {0, 1, 2};
  FzOp *tr = op && fzGraphOptIsOp(op, "graph.transpose") ? op : NULL;
  if (tr) {
    FzAttr *p = fzOpGetInherentAttr(tr, FZ_STR("perm"));
    if (!p || fzAttrGetKind(p) != FZ_ATTR_DENSE_ARRAY ||
        fzDenseArrayAttrGetSize(p) != 3)
      tr = NULL;
    for (size_t i = 0; tr && i < 3; ++i)
      perm[i] = fzDenseArrayAttrGetInt(p, i);
    at = tr ? fzOpGetOperand(tr, 0) : at;
    op = tr ? fzValueGetDefiningOp(at) : op;
  }
  int64_t f0, f1;
  bool rebuild = op && fzGraphOptIsOp(op, "graph.reshape") && fzGraphOptRank(at) == 3 &&
                 batch_factors(at, (size_t)perm[0], &f0, &f1) && f0 == B &&
                 f1 == H;
  int64_t sx[4] = {B, H, dim(x, 1), dim(x, 2)};
  if (!rebuild)
    return x; /* *rebuilt false: the caller reshapes it */
  /* r' = r with r[dr] cut into (B, H); X'[b, h, s, d] = r'[p'..]. */
  size_t dr = (size_t)perm[0];
  int64_t r2[4];
  for (size_t i = 0, o = 0; i < 3; ++i) {
    if (i == dr) {
      r2[o++] = B;
      r2[o++] = H;
    } else {
      r2[o++] = dim(at, i);
    }
  }
  FzValue *y = fzOpGetOperand(op, 0);
  FzValue *v = reshaped(rw, y, 4, r2, loc);
  int64_t p2[4] = {(int64_t)dr, (int64_t)dr + 1};
  for (size_t i = 1; i < 3; ++i)
    p2[i + 1] = perm[i] < (int64_t)dr ? perm[i] : perm[i] + 1;
  bool identity = true;
  for (int64_t i = 0; i < 4; ++i)
    identity = identity && p2[i] == i;
  if (v && !identity) {
    FzGraphOptProp prop = {
        "perm", fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), 4, p2)};
    v = prop.value ? fzGraphOptCreate(rw, "graph.transpose", loc, 1, &v, NULL,
                                      1, &prop)
                   : NULL;
  }
  *rebuilt = v != NULL;
  return reapply(rw, v, chain, nc, sx);
}

/* x [B, H, S, D] (an operand of a rank-4 attention) when it is ops(R(x3))
 * with R splitting x3 [B*H, S, D]'s batch dim (PyTorch 2's
 * multi-head attention: q.view(S, B*H, D).transpose(0, 1).view(B, H, S,
 * D)): x3 rebuilt by split_operand, then ops; *rebuilt false (x is
 * returned) when x3 is not of a form split_operand rebuilds. */
static FzValue *split_operand4(FzRewriter *rw, FzValue *x, FzLoc *loc,
                               bool *rebuilt) {
  *rebuilt = false;
  FzOp *chain[8];
  size_t nc = 0;
  FzOp *op = fzValueGetDefiningOp(x);
  while (op && nc < 8 && chain_op(op)) {
    chain[nc++] = op;
    op = fzValueGetDefiningOp(fzOpGetOperand(op, 0));
  }
  if (!op || !fzGraphOptIsOp(op, "graph.reshape"))
    return x;
  FzValue *x3 = fzOpGetOperand(op, 0);
  int64_t B = dim(x, 0), H = dim(x, 1), b, h;
  if (fzGraphOptRank(x3) != 3 || !static_shape(x3) ||
      dim(x3, 0) != B * H || dim(x3, 1) != dim(x, 2) ||
      dim(x3, 2) != dim(x, 3) || !batch_factors(x3, 0, &b, &h) || b != B ||
      h != H)
    return x;
  bool rb = false;
  FzValue *v = split_operand(rw, x3, B, H, loc, &rb);
  if (!v || !rb)
    return v ? x : NULL; /* v is x3: nothing was built */
  int64_t sx[4] = {B, H, dim(x, 2), dim(x, 3)};
  *rebuilt = true;
  return reapply(rw, v, chain, nc, sx);
}

/* root's scale and causal flag as the props of a new attention. */
static size_t attention_props(FzOp *root, FzContext *ctx,
                              FzGraphOptProp *props) {
  size_t np = 0;
  FzAttr *scale = fzOpGetInherentAttr(root, FZ_STR("scale"));
  if (scale)
    props[np++] = (FzGraphOptProp){"scale", scale};
  if (bool_attr(root, "causal"))
    props[np++] = (FzGraphOptProp){"causal", fzBoolAttrGet(ctx, true)};
  return np;
}

/* A rank-4 attention whose operands are ops(reshape([B*H, S, D] ->
 * [B, H, S, D])) of the rank-3 form split_operand rebuilds: those
 * operands rebuilt (the mask, if any, stays). False when none is. */
static bool split_rank4(FzOp *root, FzRewriter *rw) {
  size_t n = fzOpGetNumOperands(root);
  FzValue *y[4];
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    y[i] = fzOpGetOperand(root, i);
    if (i >= 3 || fzGraphOptRank(y[i]) != 4 || !static_shape(y[i]))
      continue;
    bool rb = false;
    FzValue *v = split_operand4(rw, y[i], fzOpGetLoc(root), &rb);
    if (!v)
      return false;
    any = any || rb;
    y[i] = v;
  }
  if (!any)
    return false;
  FzContext *ctx = fzRewriterGetContext(rw);
  FzGraphOptProp props[2];
  size_t np = attention_props(root, ctx, props);
  FzValue *att = fzGraphOptCreate(rw, "graph.attention", fzOpGetLoc(root), n,
                                  y, fzValueGetType(fzOpGetResult(root, 0)),
                                  np, props);
  if (!att)
    return false;
  fzRewriterReplaceOp(rw, root, &att);
  return true;
}

static bool split_batch(FzOp *root, FzRewriter *rw, void *ud) {
  (void)ud;
  if (fzOpGetNumResults(root) != 1 || fzOpGetNumOperands(root) < 3 ||
      fzOpGetNumOperands(root) > 4)
    return false;
  if (fzGraphOptRank(fzOpGetOperand(root, 0)) == 4)
    return split_rank4(root, rw);
  if (fzOpGetNumOperands(root) != 3)
    return false;
  FzValue *x[3] = {fzOpGetOperand(root, 0), fzOpGetOperand(root, 1),
                   fzOpGetOperand(root, 2)};
  FzValue *res = fzOpGetResult(root, 0);
  for (int i = 0; i < 3; ++i)
    if (fzGraphOptRank(x[i]) != 3 || !static_shape(x[i]))
      return false;
  if (!static_shape(res) || fzGraphOptRank(res) != 3)
    return false;
  int64_t B = 0, H = 0;
  if (!batch_factors(x[0], 0, &B, &H))
    return false;
  for (int i = 1; i < 3; ++i) {
    int64_t b, h;
    if (batch_factors(x[i], 0, &b, &h) && (b != B || h != H))
      return false;
  }
  if (dim(x[0], 0) != B * H || dim(x[1], 0) != B * H || dim(x[2], 0) != B * H)
    return false;
  FzLoc *loc = fzOpGetLoc(root);
  FzValue *y[3];
  for (int i = 0; i < 3; ++i) {
    bool rb;
    int64_t sx[4] = {B, H, dim(x[i], 1), dim(x[i], 2)};
    if (!(y[i] = split_operand(rw, x[i], B, H, loc, &rb)) ||
        (!rb && !(y[i] = reshaped(rw, x[i], 4, sx, loc))))
      return false;
  }
  FzContext *ctx = fzRewriterGetContext(rw);
  int64_t rs[4] = {B, H, dim(res, 1), dim(res, 2)};
  FzType *rt = fzTensorTypeGet(ctx, 4, rs, fzGraphOptElementType(res), NULL);
  FzGraphOptProp props[2];
  size_t np = attention_props(root, ctx, props);
  FzValue *att = rt ? fzGraphOptCreate(rw, "graph.attention", loc, 3, y, rt,
                                       np, props)
                    : NULL;
  int64_t back[3] = {B * H, dim(res, 1), dim(res, 2)};
  FzValue *out = att ? reshaped(rw, att, 3, back, loc) : NULL;
  if (!out)
    return false;
  fzRewriterReplaceOp(rw, root, &out);
  return true;
}

/*===--- The pass -------------------------------------------------------===*/

static const FzGraphOptRow kRows[] = {
    {"graph.matmul", recognize, "attention", 1, -1, STAT_ATTENTION},
    {"graph.attention", split_batch, "attention-batch-split", 1, -1,
     STAT_SPLIT},
};

static const FzGraphOptTable kTable = {kRows, 2, NULL, 0, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"remarks", FZ_PASS_OPTION_BOOL, "false",
     "A remark at each softmax-fed matmul: recognized, or why not", NULL, 0, 0},
    {"f32", FZ_PASS_OPTION_BOOL, "true",
     "Recognize attention over f32 (and other non-16-bit) operands too "
     "(the GPU pipeline sets false)",
     NULL, 0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-attention", "graph.attention recognized"},
    {"num-batch-split", "graph.attention batch dims split into B x H"},
};

const FzPassDef fzRecognizeAttentionPass = {
    .argument = "recognize-attention",
    .displayName = "RecognizeAttention",
    .summary = "Turn matmul(softmax(scale * q k^T + mask), v) chains into "
               "graph.attention",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};
