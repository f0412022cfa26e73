/* transforms/fusion/analyze.c - what a candidate group would be.
 *
 * Given a set of groups (union-find roots) that might become one kernel,
 * decides whether that kernel is legal and summarizes it for the cost
 * model. Legality by group kind (docs/fusion.md, "Legality"):
 *
 *  - contraction: one matmul/conv/pooling window; every other op is
 *    elementwise or broadcast with the contraction's result shape (or,
 *    when not an output, a shape that broadcasts to it); nothing in the
 *    group feeds the contraction (no prologue).
 *  - reduction: every reduction has the same reduced input shape S and
 *    the same reduced axes (the same rows); every other op has shape S or
 *    the rows' shape R (reduced dims kept as 1 or dropped), or, when not
 *    an output, a shape that broadcasts to S.
 *  - loop: elementwise, broadcast and injective ops; every output has
 *    the same number of elements (one loop nest writes them all); other
 *    ops are computed inline where they are used.
 *
 * Then the limits: ops, inputs, outputs, and the registers and shared
 * memory the cost model estimates against the target's limits. The cost
 * is O(ops in the candidate x their uses): groups are bounded by max-ops,
 * so a candidate costs O(1) in the size of the function.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "transforms/fusion/fusion_internal.h"

double ffNumElements(const FzType *t) {
  if (!t || fzTypeGetKind(t) != FZ_TYPE_TENSOR)
    return 1;
  size_t r = fzShapedTypeGetRank(t);
  if (r == FZ_UNRANKED)
    return 1;
  double n = 1;
  for (size_t i = 0; i < r; ++i) {
    int64_t d = fzShapedTypeGetDim(t, i);
    n *= d == FZ_DYNAMIC ? 1.0 : (double)d;
  }
  return n;
}

static size_t elt_bytes(const FzType *t) {
  if (!t)
    return 4;
  FzType *e = fzTypeGetKind(t) == FZ_TYPE_TENSOR
                  ? fzShapedTypeGetElementType(t)
                  : (FzType *)t;
  unsigned bits = fzTypeGetBitWidth(e);
  return bits ? (bits + 7) / 8 : 4;
}

double ffTypeBytes(const FzType *t) {
  return ffNumElements(t) * (double)elt_bytes(t);
}

/* A shape as a view on a type, or built (for reduced shapes). */
typedef struct Shape {
  size_t rank;
  int64_t dims[32];
} Shape;

static void shape_of(const FzType *t, Shape *s) {
  s->rank = 0;
  if (!t || fzTypeGetKind(t) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(t) == FZ_UNRANKED)
    return;
  s->rank = fzShapedTypeGetRank(t);
  if (s->rank > 32)
    s->rank = 32;
  for (size_t i = 0; i < s->rank; ++i)
    s->dims[i] = fzShapedTypeGetDim(t, i);
}

static bool shape_eq(const Shape *a, const Shape *b) {
  return a->rank == b->rank &&
         (a->rank == 0 ||
          memcmp(a->dims, b->dims, a->rank * sizeof a->dims[0]) == 0);
}

/* numpy broadcasting of a to b (a's dims are 1 or equal, right-aligned). */
static bool broadcasts_to(const Shape *a, const Shape *b) {
  if (a->rank > b->rank)
    return false;
  for (size_t i = 0; i < a->rank; ++i) {
    int64_t da = a->dims[a->rank - 1 - i], db = b->dims[b->rank - 1 - i];
    if (da != 1 && da != db)
      return false;
  }
  return true;
}

static double shape_numel(const Shape *s) {
  double n = 1;
  for (size_t i = 0; i < s->rank; ++i)
    n *= s->dims[i] == FZ_DYNAMIC ? 1.0 : (double)s->dims[i];
  return n;
}

static bool static_shape(const Shape *s) {
  for (size_t i = 0; i < s->rank; ++i)
    if (s->dims[i] == FZ_DYNAMIC)
      return false;
  return true;
}

/* A reshaped view of a reduction's levels (ONNX's expanded layer norm
 * reshapes [2,3,4,5] to [2,60] and back): s has one element per row (a
 * row value in another layout), or, when the reduced dims are the
 * trailing ones, the reduced input's elements with the rows as a leading
 * block of dims (each row stays contiguous). Static shapes only. */
static bool relaid_level(const Shape *s, const Shape *S, uint32_t axes,
                         double rows) {
  if (!static_shape(s) || !static_shape(S))
    return false;
  double n = shape_numel(s);
  if (n == rows)
    return true;
  if (n != shape_numel(S))
    return false;
  size_t k0 = S->rank;
  while (k0 > 0 && (axes & (1u << (k0 - 1))))
    k0--;
  for (size_t i = 0; i < k0; ++i)
    if (axes & (1u << i))
      return false; /* reduced dims are not trailing */
  double prefix = 1;
  for (size_t j = 0; j <= s->rank; ++j) {
    if (prefix == rows)
      return true;
    if (j < s->rank)
      prefix *= (double)s->dims[j];
  }
  return false;
}

/* Whether s has S's dims in another order (same rank, same dims as a
 * multiset, not S itself). Static shapes only. */
static bool permuted_shape(const Shape *s, const Shape *S) {
  if (s->rank != S->rank || s->rank == 0 || shape_eq(s, S) ||
      !static_shape(s) || !static_shape(S))
    return false;
  bool used[32] = {false};
  for (size_t i = 0; i < s->rank; ++i) {
    size_t j = 0;
    while (j < S->rank && (used[j] || S->dims[j] != s->dims[i]))
      ++j;
    if (j == S->rank)
      return false;
    used[j] = true;
  }
  return true;
}

/* Elements per row of s reduced over axes, when the reduced dims are the
 * trailing ones (each row contiguous in memory); 0 otherwise. */
static double trailing_row_length(const Shape *s, uint32_t axes) {
  size_t k0 = s->rank;
  while (k0 > 0 && (axes & (1u << (k0 - 1))))
    k0--;
  for (size_t i = 0; i < k0; ++i)
    if (axes & (1u << i))
      return 0;
  double n = 1;
  for (size_t i = k0; i < s->rank; ++i)
    n *= (double)s->dims[i];
  return n;
}

/* Two reductions over the same rows seen through a reshape (ONNX's
 * expanded layer norm reduces a [2,60] view of a [2,3,4,5] tensor that
 * layer_norm reduces over [1,2,3]): static shapes, same number of
 * elements, contiguous rows of the same length. */
static bool same_rows_relaid(const Shape *a, uint32_t axesA, const Shape *b,
                             uint32_t axesB) {
  if (!static_shape(a) || !static_shape(b) ||
      shape_numel(a) != shape_numel(b))
    return false;
  double la = trailing_row_length(a, axesA);
  return la > 0 && la == trailing_row_length(b, axesB);
}

static const char *shape_str(const Shape *s, char *buf, size_t cap) {
  if (s->rank == 0) {
    snprintf(buf, cap, "scalar");
    return buf;
  }
  size_t k = 0;
  buf[0] = 0;
  for (size_t i = 0; i < s->rank && k + 24 < cap; ++i) {
    if (s->dims[i] == FZ_DYNAMIC)
      k += (size_t)snprintf(buf + k, cap - k, "%s?", i ? "x" : "");
    else
      k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "x" : "",
                            (long long)s->dims[i]);
  }
  return buf;
}

static const char *axes_str(uint32_t axes, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  bool first = true;
  for (unsigned i = 0; i < 32 && k + 8 < cap; ++i)
    if (axes & (1u << i)) {
      k += (size_t)snprintf(buf + k, cap - k, "%s%u", first ? "" : ", ", i);
      first = false;
    }
  snprintf(buf + k, cap - k, "]");
  return buf;
}

static FzType *result_type(const FNode *n) {
  return fzValueGetType(fzOpGetResult(n->op, 0));
}

static const char *op_name(const FNode *n) {
  FzStringRef s = fzIdentGetString(fzOpGetName(n->op));
  return s.data;
}

/* "a contraction" (matmul, conv) or "a window op" (pooling). */
static const char *root_word(const FNode *n) {
  return n->kind == FZ_FUSION_CONTRACTION ? "a contraction" : "a window op";
}

/* The reduced input shape S and the axes of a reduction node. */
static void reduction_sig(const FNode *n, Shape *s) {
  shape_of(fzValueGetType(fzOpGetOperand(n->op, (size_t)n->reduceOperand)),
           s);
}

static void reduced_shapes(const Shape *s, uint32_t axes, Shape *keep,
                           Shape *drop) {
  keep->rank = s->rank;
  drop->rank = 0;
  for (size_t i = 0; i < s->rank; ++i) {
    bool red = i < 32 && (axes & (1u << i));
    keep->dims[i] = red ? 1 : s->dims[i];
    if (!red)
      drop->dims[drop->rank++] = s->dims[i];
  }
}

static bool refuse(FAnalysis *a, FReasonCode code, const char *fmt, ...)
    FZ_PRINTF(3, 4);
static bool refuse(FAnalysis *a, FReasonCode code, const char *fmt, ...) {
  a->legal = false;
  a->why.code = (uint8_t)code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->why.detail, sizeof a->why.detail, fmt, ap);
  va_end(ap);
  return false;
}

static void refuse_limit(FAnalysis *a, const char *limit, double value,
                         double max) {
  a->legal = false;
  a->why.code = R_LIMIT;
  a->why.limit = limit;
  a->why.value = value;
  a->why.max = max;
}

/* One analysis: views on F->an, the scratch arrays kept between calls. */
typedef struct Cand {
  FFuser *F;
  uint32_t epoch, virt;
  uint32_t *m;        /* members, canonical order */
  size_t nm;
  FzValue **in;       /* inputs */
  uint32_t *inFirst, *inLast, *inNode; /* inNode: producer or NO_NODE */
  size_t nin;
  bool *isOut;
  uint32_t *last;     /* last in-group use of member i's value */
  uint32_t *depth;    /* reductions upstream of member i */
  int64_t *delta;
} Cand;

static bool grow_array(FzContext *ctx, void **p, size_t n, size_t elt) {
  void *q = fzRealloc(ctx, *p, n * elt);
  if (!q)
    return false;
  *p = q;
  return true;
}

/* Room for `total` members and an index over every node. */
static bool reserve(FFuser *F, size_t total) {
  FzContext *ctx = F->ctx;
  if (total + 1 > F->an.cap) {
    size_t cap = F->an.cap ? F->an.cap : 64;
    while (cap < total + 1)
      cap *= 2;
    if (!grow_array(ctx, (void **)&F->an.m, cap, sizeof *F->an.m) ||
        !grow_array(ctx, (void **)&F->an.last, cap, sizeof *F->an.last) ||
        !grow_array(ctx, (void **)&F->an.depth, cap, sizeof *F->an.depth) ||
        !grow_array(ctx, (void **)&F->an.isOut, cap, sizeof *F->an.isOut) ||
        !grow_array(ctx, (void **)&F->an.delta, cap, sizeof *F->an.delta))
      return !(F->failed = true);
    F->an.cap = cap;
  }
  if (F->n > F->an.capIndex) {
    size_t cap = F->cap > F->n ? F->cap : F->n;
    if (!grow_array(ctx, (void **)&F->an.index, cap, sizeof *F->an.index))
      return !(F->failed = true);
    F->an.capIndex = cap;
  }
  return true;
}

static bool in_set(const Cand *c, uint32_t node) {
  if (node == c->virt)
    return true;
  FFuser *F = c->F;
  return F->stamp[ffFind(F, node)] == c->epoch;
}

static bool add_input(Cand *c, FzValue *v, uint32_t producer, uint32_t user) {
  for (size_t i = 0; i < c->nin; ++i)
    if (c->in[i] == v) {
      c->inLast[i] = user;
      return true;
    }
  FFuser *F = c->F;
  if (c->nin == F->an.capIn) {
    size_t cap = F->an.capIn ? F->an.capIn * 2 : 16;
    if (!grow_array(F->ctx, (void **)&F->an.in, cap, sizeof *F->an.in) ||
        !grow_array(F->ctx, (void **)&F->an.inFirst, cap,
                    sizeof *F->an.inFirst) ||
        !grow_array(F->ctx, (void **)&F->an.inLast, cap,
                    sizeof *F->an.inLast) ||
        !grow_array(F->ctx, (void **)&F->an.inNode, cap,
                    sizeof *F->an.inNode))
      return !(F->failed = true);
    F->an.capIn = cap;
    c->in = F->an.in;
    c->inFirst = F->an.inFirst;
    c->inLast = F->an.inLast;
    c->inNode = F->an.inNode;
  }
  c->in[c->nin] = v;
  c->inNode[c->nin] = producer;
  c->inFirst[c->nin] = c->inLast[c->nin] = user;
  c->nin++;
  return true;
}

static bool is_output(const Cand *c, uint32_t node) {
  const FNode *n = &c->F->nodes[node];
  if (node == c->virt)
    return false;
  if (n->usedOutside)
    return true;
  for (uint32_t k = 0; k < n->nsucc; ++k) {
    uint32_t s = n->succ[k];
    if (s != NO_NODE && c->F->nodes[s].role != ROLE_DEAD && !in_set(c, s))
      return true;
  }
  return false;
}

/* Members, inputs, outputs, liveness and reduction depth. */
static bool gather(Cand *c, const uint32_t *roots, size_t n, size_t total) {
  FFuser *F = c->F;
  if (!reserve(F, total))
    return false;
  c->m = F->an.m;
  c->isOut = F->an.isOut;
  c->last = F->an.last;
  c->depth = F->an.depth;
  c->delta = F->an.delta;
  c->in = F->an.in;
  c->inFirst = F->an.inFirst;
  c->inLast = F->an.inLast;
  c->inNode = F->an.inNode;
  memset(c->depth, 0, total * sizeof *c->depth);
  memset(c->delta, 0, (total + 1) * sizeof *c->delta);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t x = F->groups[roots[r]].head; x != NO_NODE;
         x = F->nodes[x].next)
      c->m[c->nm++] = x;
  if (c->virt != NO_NODE)
    c->m[c->nm++] = c->virt;
  ffSortByPos(F, c->m, c->nm);
  for (size_t i = 0; i < c->nm; ++i)
    F->an.index[c->m[i]] = (uint32_t)i;
  for (size_t i = 0; i < c->nm; ++i) {
    const FNode *nd = &F->nodes[c->m[i]];
    c->last[i] = (uint32_t)i;
    c->isOut[i] = is_output(c, c->m[i]);
    size_t nops = fzOpGetNumOperands(nd->op);
    for (size_t k = 0; k < nops; ++k) {
      /* Members have no regions: pred[k] produces operand k. */
      uint32_t dn = k < nd->npred ? nd->pred[k] : NO_NODE;
      FzValue *v = fzOpGetOperand(nd->op, k);
      if (dn != NO_NODE && in_set(c, dn)) {
        size_t j = F->an.index[dn];
        if (j < c->nm && c->m[j] == dn) {
          c->last[j] = (uint32_t)i;
          uint32_t dd = c->depth[j] +
                        (F->nodes[dn].kind == FZ_FUSION_REDUCTION ? 1u : 0u);
          if (dd > c->depth[i])
            c->depth[i] = dd;
          continue;
        }
      }
      if (dn != NO_NODE && F->nodes[dn].role == ROLE_FREE &&
          F->nodes[dn].smallConst)
        continue; /* copied into the group */
      if (!add_input(c, v, dn, (uint32_t)i))
        return false;
    }
  }
  return true;
}

/* Whether member i of c is a layout op that an attention's epilogue may
 * hold: a transpose or a reshape (pure renumberings of its one operand,
 * stored through their index maps). */
static bool epilogue_op(const FNode *n) {
  FzStringRef s = fzIdentGetString(fzOpGetName(n->op));
  bool named = (s.length == 15 && !memcmp(s.data, "graph.transpose", 15)) ||
               (s.length == 13 && !memcmp(s.data, "graph.reshape", 13));
  return named && fzOpGetNumOperands(n->op) == 1 && n->npred == 1;
}

/* The longest epilogue an attention's kernel takes. */
#define MAX_EPILOGUE 8

static bool in_chain(const uint32_t *chain, size_t n, uint32_t node) {
  for (size_t i = 0; i < n; ++i)
    if (chain[i] == node)
      return true;
  return false;
}

/* The kind rules of a group around a prologue root (graph.attention) at
 * member r: every other member is elementwise or a layout op whose value
 * only feeds the group (the root's prologue: how its operands are read),
 * or one of a chain of transposes and reshapes of the root's result (its
 * epilogue: how the result is stored, as the head merge [B, H, S, D] ->
 * [B, S, H*D]), whose last op is the group's one output. */
static bool check_prologue(Cand *c, FAnalysis *a, size_t r) {
  FFuser *F = c->F;
  FzFusionKernelDesc *d = &a->desc;
  const FNode *rn = &F->nodes[c->m[r]];
  Shape o;
  shape_of(result_type(rn), &o);
  d->kind = FZ_FUSION_GROUP_CONTRACTION;
  d->points = shape_numel(&o);
  d->flops += rn->flops > 0 ? rn->flops : rn->flopsPerElement * shape_numel(&o);
  /* The epilogue: members reached from the root through their one
   * operand, each the only reader in the group of what it reads. */
  uint32_t chain[MAX_EPILOGUE + 1] = {c->m[r]};
  size_t nc = 1, tailAt = r;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < c->nm; ++i) {
      const FNode *n = &F->nodes[c->m[i]];
      if (i == r || in_chain(chain, nc, c->m[i]) || n->npred < 1 ||
          n->pred[0] != chain[nc - 1])
        continue;
      if (!epilogue_op(n))
        return refuse(a, R_KIND, "'%s' reads '%s': its epilogue holds "
                                 "transposes and reshapes only (the head "
                                 "merge)", op_name(n), op_name(rn));
      if (c->isOut[tailAt])
        return refuse(a, R_KIND, "'%s' is used outside the group and by "
                                 "'%s': '%s' has one result",
                      op_name(&F->nodes[chain[nc - 1]]), op_name(n),
                      op_name(rn));
      if (nc > MAX_EPILOGUE)
        return refuse(a, R_KIND, "the epilogue of '%s' would be longer "
                                 "than %d ops", op_name(rn), MAX_EPILOGUE);
      chain[nc++] = c->m[i];
      tailAt = i;
      grew = true;
      break;
    }
  }
  for (size_t i = 0; i < c->nm; ++i) {
    const FNode *n = &F->nodes[c->m[i]];
    if (i == r || in_chain(chain, nc, c->m[i]))
      continue;
    if (n->contraction || n->prologueRoot || n->kind == FZ_FUSION_REDUCTION)
      return refuse(a, R_KIND, "'%s' cannot join '%s': its kernel holds "
                               "elementwise and layout ops besides it",
                    op_name(n), op_name(rn));
    if (n->kind != FZ_FUSION_ELEMENTWISE && n->kind != FZ_FUSION_BROADCAST &&
        n->kind != FZ_FUSION_INJECTIVE)
      return refuse(a, R_KIND, "'%s' is neither elementwise nor a layout op: "
                               "the prologue of '%s' holds those only",
                    op_name(n), op_name(rn));
    if (c->isOut[i])
      return refuse(a, R_KIND, "'%s' is used outside the group: the "
                               "prologue of '%s' feeds it only",
                    op_name(n), op_name(rn));
    for (uint32_t k = 0; k < n->npred; ++k) {
      if (in_chain(chain, nc, n->pred[k]))
        return refuse(a, R_KIND, "'%s' reads '%s''s result: the epilogue "
                                 "of '%s' is one chain of transposes and "
                                 "reshapes",
                      op_name(n), op_name(rn), op_name(rn));
    }
    Shape s;
    shape_of(result_type(n), &s);
    d->flops += n->flopsPerElement * shape_numel(&s);
  }
  return true;
}

/* Checks the kind rules; fills the kind-specific parts of the desc. */
static bool check_kinds(Cand *c, FAnalysis *a) {
  FFuser *F = c->F;
  FzFusionKernelDesc *d = &a->desc;
  char b1[96], b2[96], b3[48], b4[48];
  uint32_t contraction = NO_NODE, reduction = NO_NODE;
  unsigned numContr = 0;
  for (size_t i = 0; i < c->nm; ++i) {
    const FNode *n = &F->nodes[c->m[i]];
    if (n->contraction) {
      numContr++;
      if (contraction == NO_NODE)
        contraction = c->m[i];
    } else if (n->kind == FZ_FUSION_REDUCTION) {
      d->numReductions++;
      if (reduction == NO_NODE)
        reduction = c->m[i];
    }
  }
  bool multi = c->nm > 1;
  const unsigned disable = F->resolved.disable;
  for (size_t i = 0; multi && i < c->nm; ++i)
    if (F->nodes[c->m[i]].prologueRoot)
      return check_prologue(c, a, i);
  if (numContr > 1)
    return refuse(a, R_KIND, "a kernel holds one contraction or window op; "
                             "'%s' would meet another",
                  op_name(&F->nodes[contraction]));
  if (numContr && d->numReductions)
    return refuse(a, R_KIND, "%s ('%s') and a reduction cannot share a "
                             "kernel", root_word(&F->nodes[contraction]),
                  op_name(&F->nodes[contraction]));
  if (multi && numContr && (disable & FZ_FUSION_DISABLE_EPILOGUE))
    return refuse(a, R_DISABLED, "epilogue fusion is disabled");
  if (multi && d->numReductions && (disable & FZ_FUSION_DISABLE_REDUCTION))
    return refuse(a, R_DISABLED, "reduction fusion is disabled");
  if (contraction != NO_NODE) {
    const FNode *cn = &F->nodes[contraction];
    Shape o, s;
    shape_of(result_type(cn), &o);
    d->kind = FZ_FUSION_GROUP_CONTRACTION;
    d->points = shape_numel(&o);
    d->flops += cn->flops > 0 ? cn->flops
                              : cn->flopsPerElement * shape_numel(&o);
    for (size_t k = 0; k < fzOpGetNumOperands(cn->op) && k < cn->npred; ++k) {
      uint32_t dn = cn->pred[k];
      if (dn != NO_NODE && in_set(c, dn))
        return refuse(a, R_KIND, "'%s' feeds '%s' (no prologue fusion into "
                                 "%s)", op_name(&F->nodes[dn]), op_name(cn),
                      root_word(cn));
    }
    for (size_t i = 0; i < c->nm; ++i) {
      const FNode *n = &F->nodes[c->m[i]];
      if (c->m[i] == contraction)
        continue;
      if (n->kind != FZ_FUSION_ELEMENTWISE && n->kind != FZ_FUSION_BROADCAST)
        return refuse(a, R_KIND, "'%s' is not elementwise: the epilogue of "
                                 "'%s' holds elementwise ops only",
                      op_name(n), op_name(cn));
      shape_of(result_type(n), &s);
      if (!shape_eq(&s, &o) && (c->isOut[i] || !broadcasts_to(&s, &o)))
        return refuse(a, R_KIND, "'%s' has shape %s, not the shape %s of "
                                 "'%s'", op_name(n),
                      shape_str(&s, b1, sizeof b1),
                      shape_str(&o, b2, sizeof b2), op_name(cn));
      d->flops += n->flopsPerElement * shape_numel(&o);
    }
    return true;
  }
  if (reduction != NO_NODE) {
    const FNode *rn = &F->nodes[reduction];
    Shape S, keep, drop, s, P;
    reduction_sig(rn, &S);
    reduced_shapes(&S, rn->reduceAxes, &keep, &drop);
    /* The reduced input's elements in another order P: the result of an
     * injective op (a transpose) of an S-shaped value, as LayerNorm2d
     * permutes NHWC back to NCHW. lower-graph-to-loop then iterates over
     * P, its rows being the dims of P that S keeps (nest_rewrite.h). One
     * such order per group. */
    P.rank = 0;
    for (size_t i = 0; i < c->nm; ++i) {
      const FNode *n = &F->nodes[c->m[i]];
      if (n->kind != FZ_FUSION_INJECTIVE || fzOpGetNumOperands(n->op) < 1)
        continue;
      shape_of(result_type(n), &s);
      Shape o;
      shape_of(fzValueGetType(fzOpGetOperand(n->op, 0)), &o);
      if (!shape_eq(&o, &S) || !permuted_shape(&s, &S))
        continue;
      if (P.rank && !shape_eq(&s, &P))
        return refuse(a, R_KIND, "the reduced input %s in two other orders: "
                                 "%s and %s",
                      shape_str(&S, b1, sizeof b1),
                      shape_str(&P, b2, sizeof b2),
                      shape_str(&s, b3, sizeof b3));
      P = s;
    }
    d->kind = FZ_FUSION_GROUP_REDUCTION;
    d->points = shape_numel(&S);
    d->rows = shape_numel(&drop);
    d->rowLength = d->rows > 0 ? d->points / d->rows : 0;
    for (size_t i = 0; i < c->nm; ++i) {
      const FNode *n = &F->nodes[c->m[i]];
      if (n->kind == FZ_FUSION_REDUCTION) {
        reduction_sig(n, &s);
        bool same = (shape_eq(&s, &S) && n->reduceAxes == rn->reduceAxes) ||
                    same_rows_relaid(&S, rn->reduceAxes, &s, n->reduceAxes);
        if (!same)
          return refuse(a, R_KIND, "reductions over different rows: %s "
                                   "reducing %s vs %s reducing %s",
                        shape_str(&S, b1, sizeof b1),
                        axes_str(rn->reduceAxes, b3, sizeof b3),
                        shape_str(&s, b2, sizeof b2),
                        axes_str(n->reduceAxes, b4, sizeof b4));
        d->flops += n->flopsPerElement * shape_numel(&S);
        continue;
      }
      shape_of(result_type(n), &s);
      bool level = shape_eq(&s, &S) || shape_eq(&s, &keep) ||
                   shape_eq(&s, &drop) || (P.rank && shape_eq(&s, &P)) ||
                   relaid_level(&s, &S, rn->reduceAxes, d->rows);
      if (!level && (c->isOut[i] || !broadcasts_to(&s, &S)))
        return refuse(a, R_KIND, "'%s' of shape %s is neither the reduced "
                                 "input %s nor its rows %s", op_name(n),
                      shape_str(&s, b1, sizeof b1),
                      shape_str(&S, b2, sizeof b2),
                      shape_str(&keep, b3, sizeof b3));
      d->flops += n->flopsPerElement *
                  (level ? shape_numel(&s) : shape_numel(&S));
    }
    for (size_t i = 0; i < c->nm; ++i)
      if (c->depth[i] + 1 > d->phases)
        d->phases = c->depth[i] + 1;
    for (size_t i = 0; i < c->nin; ++i) {
      Shape t;
      shape_of(fzValueGetType(c->in[i]), &t);
      if (shape_eq(&t, &S))
        d->rowInputBytes += ffTypeBytes(fzValueGetType(c->in[i]));
    }
    return true;
  }
  /* A loop group: every output has the same number of elements. */
  d->kind = FZ_FUSION_GROUP_LOOP;
  double outN = -1, maxN = 0, sumFlops = 0;
  size_t first = 0;
  Shape s, t;
  for (size_t i = 0; i < c->nm; ++i) {
    const FNode *n = &F->nodes[c->m[i]];
    double nn = n->numel;
    maxN = nn > maxN ? nn : maxN;
    sumFlops += n->flopsPerElement;
    if (!c->isOut[i])
      continue;
    if (outN < 0) {
      outN = nn;
      first = i;
    } else if (nn != outN) {
      shape_of(result_type(&F->nodes[c->m[first]]), &s);
      shape_of(result_type(n), &t);
      return refuse(a, R_KIND, "its results would have different sizes: "
                               "%s ('%s') and %s ('%s')",
                    shape_str(&s, b1, sizeof b1),
                    op_name(&F->nodes[c->m[first]]),
                    shape_str(&t, b2, sizeof b2), op_name(n));
    }
  }
  d->points = outN >= 0 ? outN : maxN;
  d->flops = sumFlops * d->points;
  return true;
}

void ffAnalyze(FFuser *F, const uint32_t *roots, size_t n, uint32_t virt,
               FAnalysis *a) {
  memset(a, 0, sizeof *a);
  a->why.other = a->why.witness = NO_NODE;
  const FzFusionOptions *o = &F->resolved;
  size_t total = virt != NO_NODE ? 1 : 0;
  for (size_t i = 0; i < n; ++i)
    total += F->groups[roots[i]].size;
  if (total > o->maxOps) {
    refuse_limit(a, "max-ops", (double)total, (double)o->maxOps);
    return;
  }
  Cand c;
  memset(&c, 0, sizeof c);
  c.F = F;
  c.virt = virt;
  c.epoch = ffMarkSet(F, roots, n);
  if (!gather(&c, roots, n, total)) {
    refuse(a, R_NO_ESTIMATE, "out of memory");
    return;
  }
  a->legal = true;
  FzFusionKernelDesc *d = &a->desc;
  d->numOps = c.nm;
  d->numInputs = c.nin;
  d->phases = 1;
  size_t eb = 0;
  for (size_t i = 0; i < c.nm; ++i) {
    const FNode *nd = &F->nodes[c.m[i]];
    eb = nd->eltBytes > eb ? nd->eltBytes : eb;
    if (c.isOut[i]) {
      d->numOutputs++;
      d->bytesWritten += nd->bytes;
    }
  }
  for (size_t i = 0; i < c.nin; ++i) {
    uint32_t dn = c.inNode[i];
    if (dn != NO_NODE && fzValueGetIndex(c.in[i]) == 0) {
      eb = F->nodes[dn].eltBytes > eb ? F->nodes[dn].eltBytes : eb;
      d->bytesRead += F->nodes[dn].bytes;
      continue;
    }
    FzType *t = fzValueGetType(c.in[i]);
    eb = elt_bytes(t) > eb ? elt_bytes(t) : eb;
    d->bytesRead += ffTypeBytes(t);
  }
  d->elementBytes = eb;
  (void)check_kinds(&c, a);
  if (a->legal && c.nin > o->maxInputs)
    refuse_limit(a, "max-inputs", (double)c.nin, (double)o->maxInputs);
  if (a->legal && d->numOutputs > o->maxOutputs)
    refuse_limit(a, "max-outputs", (double)d->numOutputs,
                 (double)o->maxOutputs);
  if (a->legal && c.nm > 1 && d->numOutputs > 1 &&
      (o->disable & FZ_FUSION_DISABLE_MULTI_OUTPUT))
    refuse(a, R_DISABLED, "multi-output groups are disabled");
  if (a->legal) {
    /* Most values live at once: member values from definition to last
     * use, inputs from first to last use. */
    for (size_t i = 0; i < c.nm; ++i) {
      c.delta[i]++;
      c.delta[c.last[i] + 1]--;
    }
    for (size_t i = 0; i < c.nin; ++i) {
      c.delta[c.inFirst[i]]++;
      c.delta[c.inLast[i] + 1]--;
    }
    int64_t live = 0, best = 0;
    for (size_t i = 0; i < c.nm; ++i) {
      live += c.delta[i];
      best = live > best ? live : best;
    }
    d->maxLive = (size_t)best;
    a->hasEstimate = F->model->estimate(F->model, F->target, d, &a->est);
    if (!a->hasEstimate) {
      refuse(a, R_NO_ESTIMATE, "the cost model '%s' gave no estimate",
             F->model->name ? F->model->name : "?");
    } else if (o->maxRegisters > 0 && c.nm > 1 &&
               a->est.registers > o->maxRegisters) {
      refuse_limit(a, "registers", (double)a->est.registers,
                   (double)o->maxRegisters);
    } else if (o->maxSharedBytes > 0 && c.nm > 1 &&
               a->est.sharedBytes > o->maxSharedBytes) {
      refuse_limit(a, "shared memory", (double)a->est.sharedBytes,
                   (double)o->maxSharedBytes);
    }
  }
}

FzFusionGroupKind ffGroupKind(FFuser *F, uint32_t root) {
  const FNode *n = &F->nodes[root];
  if (F->groups[root].size == 1 && n->role != ROLE_FUSABLE)
    return FZ_FUSION_GROUP_OPAQUE;
  bool red = false;
  for (uint32_t x = F->groups[root].head; x != NO_NODE; x = F->nodes[x].next) {
    if (F->nodes[x].contraction)
      return FZ_FUSION_GROUP_CONTRACTION;
    red |= F->nodes[x].kind == FZ_FUSION_REDUCTION;
  }
  return red ? FZ_FUSION_GROUP_REDUCTION : FZ_FUSION_GROUP_LOOP;
}

/* An estimate for a lone op the pass does not group (its kernel as it
 * stands): bytes of its operands and results. */
static bool opaque_estimate(FFuser *F, uint32_t node, FzFusionEstimate *est) {
  FzOp *op = F->nodes[node].op;
  FzFusionKernelDesc d;
  memset(&d, 0, sizeof d);
  d.kind = FZ_FUSION_GROUP_OPAQUE;
  d.numOps = 1;
  d.phases = 1;
  d.elementBytes = 4;
  for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
    d.bytesRead += ffTypeBytes(fzValueGetType(fzOpGetOperand(op, k)));
    d.numInputs++;
  }
  for (size_t r = 0; r < fzOpGetNumResults(op); ++r) {
    FzType *t = fzValueGetType(fzOpGetResult(op, r));
    d.bytesWritten += ffTypeBytes(t);
    d.points = fmax(d.points, ffNumElements(t));
    d.numOutputs++;
  }
  return F->model->estimate(F->model, F->target, &d, est);
}

bool ffGroupEstimate(FFuser *F, uint32_t root, FzFusionEstimate *est,
                     double *points) {
  FGroup *g = &F->groups[root];
  if (!g->estValid) {
    bool ok;
    if (g->size == 1 && F->nodes[root].role != ROLE_FUSABLE) {
      ok = opaque_estimate(F, root, &g->est);
      g->outputs = fzOpGetNumResults(F->nodes[root].op);
      g->points = ffNumElements(
          fzOpGetNumResults(F->nodes[root].op)
              ? fzValueGetType(fzOpGetResult(F->nodes[root].op, 0))
              : NULL);
    } else {
      FAnalysis a;
      ffAnalyze(F, &root, 1, NO_NODE, &a);
      ok = a.hasEstimate;
      g->est = a.est;
      g->points = a.desc.points;
      g->outputs = a.desc.numOutputs;
    }
    if (!ok)
      return false;
    g->estValid = true;
  }
  *est = g->est;
  if (points)
    *points = g->points;
  return true;
}
