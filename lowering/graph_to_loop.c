/* lowering/graph_to_loop.c - the lower-graph-to-loop pass: bufferizes
 * each function at its boundary (the calling convention of fz/loop.h),
 * gives every tensor that must live in memory a buffer, and lowers each
 * graph.fusion group, and each graph op outside a group, to loop nests
 * (graph_to_loop_nest.c builds them).
 *
 * Buffers. Function arguments become buffer arguments; each returned
 * value is computed straight into its output argument when it is the
 * result of an op of the function (returned once); anything else (an
 * argument, a constant, a value returned twice) is copied by a nest at
 * the return. Other results get a loop.alloc before the code of their op
 * and a loop.dealloc right after the code of their last user. Splat
 * constants need no memory; other constants become loop.constant_buffer.
 * A reshape outside a group is a loop.view of its operand (no copy).
 *
 * Nests. The outputs of a group are partitioned by shape; outputs of one
 * shape share one nest (so their common producers are computed once per
 * element). The nest over a shape S is one loop.parallel over the dims
 * of S, except when the group holds row reductions of an S-shaped value
 * (softmax, layer_norm, x - mean(x)...): then the reduced dims form an
 * inner loop.parallel (the consumer phase) inside the outer one over the
 * other dims, the reductions run as loop.for accumulator loops in the
 * outer body, and a loop.barrier separates them from the inner phase.
 *
 * The pass runs on builtin.module so that calls can be rewritten with
 * their callee; a function already lowered (it carries
 * loop.num_outputs) is left alone.
 */
#include <string.h>

#include "dialects/loop/nest_rewrite.h"
#include "fz/pass.h"
#include "lowering/graph_to_loop_internal.h"
#include "lowering/passes.h"

/*===--- Nests for a set of outputs -------------------------------------===*/

static bool same_shape(FzType *a, FzType *b) {
  size_t r = fzShapedTypeGetRank(a);
  if (r != fzShapedTypeGetRank(b))
    return false;
  for (size_t i = 0; i < r; ++i)
    if (fzShapedTypeGetDim(a, i) != fzShapedTypeGetDim(b, i))
      return false;
  return true;
}

/* Dims of out's shape that row reductions in the group reduce (see the
 * file comment). */
static uint32_t inner_dims(FzOp *const *ops, size_t nops, FzValue *out) {
  uint32_t mask = 0;
  for (size_t i = 0; i < nops; ++i) {
    FzFusionOpInfo info;
    fzFusionDescribeOp(ops[i], &info);
    if (info.kind != FZ_FUSION_REDUCTION || info.reduceOperand < 0 ||
        (size_t)info.reduceOperand >= fzOpGetNumOperands(ops[i]))
      continue;
    FzValue *x = fzOpGetOperand(ops[i], (size_t)info.reduceOperand);
    if (same_shape(fzValueGetType(x), fzValueGetType(out)))
      mask |= info.reduceAxes;
  }
  return mask;
}

/* Whether the body of `loop` holds a loop.for before `before`. */
static bool has_phase_before(FzOp *before) {
  for (FzOp *op = fzOpGetPrevInBlock(before); op; op = fzOpGetPrevInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR)
      return true;
  return false;
}

/* One nest storing outs[k] (graph values of one shape) into bufs[k]. */
static bool lower_nest(LgFunc *F, FzLoc *loc, size_t n, FzValue *const *outs,
                       FzValue *const *bufs, uint32_t mask,
                       const FzPtrMap *alias) {
  LgNest N;
  lgNestInit(&N, F, loc);
  N.alias = alias;
  FzValue *out0 = outs[0];
  size_t r = lgRank(out0);
  FzValue *idx[LG_MAX_RANK], *ivs[LG_MAX_RANK];
  int64_t ext[LG_MAX_RANK];
  size_t outer[LG_MAX_RANK], inner[LG_MAX_RANK], no = 0, ni = 0;
  for (size_t d = 0; d < r; ++d) {
    if (mask & (1u << d))
      inner[ni++] = d;
    else
      outer[no++] = d;
  }
  LgSaved so, si;
  bool ok = true;
  FzOp *flat = NULL;
  if (no) {
    for (size_t k = 0; k < no; ++k)
      ext[k] = lgDim(out0, outer[k]);
    ok = lgOpenParallel(&N, 0, no, ext, ivs, &so);
    flat = ok && !ni ? N.path[N.depth - 1].loop : NULL;
    for (size_t k = 0; ok && k < no; ++k)
      idx[outer[k]] = ivs[k];
  }
  if (ok && ni) {
    for (size_t k = 0; k < ni; ++k)
      ext[k] = lgDim(out0, inner[k]);
    ok = lgOpenParallel(&N, N.depth - 1, ni, ext, ivs, &si);
    for (size_t k = 0; ok && k < ni; ++k)
      idx[inner[k]] = ivs[k];
  }
  for (size_t k = 0; ok && k < n; ++k) { /* from the compute type */
    FzValue *v = lgEmit(&N, outs[k], idx);
    FzType *elt = fzShapedTypeGetElementType(fzValueGetType(bufs[k]));
    ok = v && fzBStore(&N.b, fzBConvertF(&N.b, v, elt), bufs[k], idx) &&
         !F->failed;
  }
  if (ni && N.depth > (no ? 2u : 1u)) {
    FzOp *innerLoop = lgClose(&N, 0, NULL, &si);
    if (no && has_phase_before(innerLoop)) {
      FzLoopBuilder b = fzBBefore(&N.b, innerLoop);
      ok = fzBOp(&b, "loop.barrier", 0, NULL, NULL) != NULL && ok;
    }
  }
  if (no && N.depth > 1)
    lgClose(&N, 0, NULL, &so);
  lgNestFree(&N);
  /* A flat nest whose reductions turned out to depend on its leading
   * dims only (their operand reaches the output through a transpose or
   * reshape, so inner_dims saw no row reduction of the output's shape)
   * takes the rows form, so that each row's reductions run once rather
   * than once per element (nest_rewrite.h). */
  if (ok && flat && !F->failed && !fzLoopSplitRowNest(flat))
    F->failed = true;
  return ok && !F->failed;
}

/* Lowers the outputs of one group (ops: the group's ops, for choosing
 * nests) into their buffers. */
static bool lower_outputs(LgFunc *F, FzLoc *loc, size_t n,
                          FzValue *const *outs, FzValue *const *bufs,
                          FzOp *const *ops, size_t nops,
                          const FzPtrMap *alias) {
  bool *done = fzCalloc(F->ctx, n + 1, sizeof *done);
  FzValue **so = fzMalloc(F->ctx, (2 * n + 1) * sizeof *so);
  uint32_t *masks = fzMalloc(F->ctx, (n + 1) * sizeof *masks);
  bool ok = done && so && masks;
  for (size_t k = 0; ok && k < n; ++k)
    masks[k] = inner_dims(ops, nops, outs[k]);
  for (size_t k = 0; ok && k < n; ++k) {
    if (done[k])
      continue;
    size_t m = 0;
    for (size_t j = k; j < n; ++j) {
      if (done[j] || masks[j] != masks[k] ||
          !same_shape(fzValueGetType(outs[j]), fzValueGetType(outs[k])))
        continue;
      done[j] = true;
      so[m] = outs[j];
      so[n + m] = bufs[j];
      m++;
    }
    ok = lower_nest(F, loc, m, so, so + n, masks[k], alias);
  }
  fzFree(F->ctx, done);
  fzFree(F->ctx, so);
  fzFree(F->ctx, masks);
  return ok;
}

/*===--- Functions ------------------------------------------------------===*/

static bool is_named(FzOp *op, const char *name) {
  return fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                          fzStringRefFromCString(name));
}

static FzType *func_type(FzOp *func) {
  FzAttr *a = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  return a && fzAttrGetKind(a) == FZ_ATTR_TYPE ? fzTypeAttrGetValue(a) : NULL;
}

/* buffer<shape x elt> of a static tensor type; NULL after an error. */
static FzType *buffer_of(FzContext *ctx, FzOp *at, FzType *t,
                         const char *what, size_t i) {
  if (!t || fzTypeGetKind(t) != FZ_TYPE_TENSOR || !fzShapedTypeHasStaticShape(t) ||
      !fzTensorDTypeIsSupported(fzShapedTypeGetElementType(t))) {
    fzOpEmitError(at, "cannot be lowered to loops: %s #%zu must be a "
                      "statically shaped tensor", what, i);
    return NULL;
  }
  return fzBufferTypeGet(ctx, fzShapedTypeGetRank(t), fzShapedTypeGetShape(t),
                         fzShapedTypeGetElementType(t), NULL, 0, NULL);
}

/* The converted function type (inputs, then one output per result). */
static FzType *lowered_type(FzContext *ctx, FzOp *func, FzType *ft) {
  size_t ni = fzFunctionTypeGetNumInputs(ft), nr = fzFunctionTypeGetNumResults(ft);
  FzType **types = fzMalloc(ctx, (ni + nr + 1) * sizeof *types);
  if (!types)
    return NULL;
  bool ok = true;
  for (size_t i = 0; ok && i < ni; ++i)
    ok = (types[i] = buffer_of(ctx, func, fzFunctionTypeGetInput(ft, i),
                               "argument", i)) != NULL;
  for (size_t i = 0; ok && i < nr; ++i)
    ok = (types[ni + i] = buffer_of(ctx, func, fzFunctionTypeGetResult(ft, i),
                                    "result", i)) != NULL;
  FzType *r = ok ? fzFunctionTypeGet(ctx, ni + nr, types, 0, NULL) : NULL;
  fzFree(ctx, types);
  return r;
}

static LgStorage *new_storage(LgFunc *F, FzValue *gv, FzValue *buffer) {
  LgStorage *s = fzArenaAlloc(&F->arena, sizeof *s);
  if (!s)
    return NULL;
  s->buffer = buffer;
  s->splat = NULL;
  return fzPtrMapPut(&F->storage, gv, s) ? s : NULL;
}

typedef struct FuncState {
  LgFunc F;
  FzPtrMap dest;    /* returned graph value -> output argument */
  FzPtrMap lastUse; /* graph value -> its last top-level user */
  FzPtrMap temp;    /* graph value -> its loop.alloc'd buffer */
  FzPtrMap root;    /* view result -> the value whose memory it views */
} FuncState;

static FzValue *alloc_buffer(FuncState *S, FzValue *gv, FzLoc *loc) {
  LgFunc *F = &S->F;
  FzType *bt = buffer_of(F->ctx, fzValueGetDefiningOp(gv), fzValueGetType(gv),
                         "result", fzValueGetIndex(gv));
  if (!bt)
    return NULL;
  FzLoopBuilder at = lgFuncBuilder(F, &F->top, loc);
  FzValue *b = fzBOp1(&at, "loop.alloc", 0, NULL, bt);
  if (!b || !fzPtrMapPut(&S->temp, gv, b))
    return NULL;
  return b;
}

/* The buffer a result of op is computed into. Its storage is recorded
 * by the caller once the result is computed (before, a nest computing it
 * would read it). */
static FzValue *result_buffer(FuncState *S, FzValue *gv, FzLoc *loc) {
  FzValue *out = fzPtrMapGet(&S->dest, gv);
  return out ? out : alloc_buffer(S, gv, loc);
}

/* loop.dealloc of the temporary of gv right before `before`. */
static bool dealloc_before(FuncState *S, FzValue *gv, FzOp *before) {
  FzValue *b = fzPtrMapGet(&S->temp, gv);
  if (!b)
    return true;
  fzPtrMapRemove(&S->temp, gv);
  FzLoopBuilder top = lgFuncBuilder(&S->F, &S->F.top, fzOpGetLoc(before));
  FzLoopBuilder at = fzBBefore(&top, before);
  return fzBOp(&at, "loop.dealloc", 1, &b, NULL) != NULL;
}

/* After the code of op (inserted before it): frees the temporaries whose
 * last user it is, and those of its results nobody uses. */
static bool free_dead(FuncState *S, FzOp *op) {
  bool ok = true;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i), *r;
    while ((r = fzPtrMapGet(&S->root, v)))
      v = r;
    if (fzPtrMapGet(&S->lastUse, v) == op)
      ok = dealloc_before(S, v, op) && ok;
  }
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i) {
    FzValue *v = fzOpGetResult(op, i);
    if (!fzValueHasUses(v) && !fzPtrMapGet(&S->root, v))
      ok = dealloc_before(S, v, op) && ok;
  }
  return ok;
}

static bool lower_fusion(FuncState *S, FzOp *op) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
  FzOp *yield = body ? fzBlockGetLastOp(body) : NULL;
  size_t nr = fzOpGetNumResults(op), nops = 0;
  if (!yield || fzOpGetNumOperands(yield) != nr)
    return fzOpEmitError(op, "malformed graph.fusion");
  FzContext *ctx = S->F.ctx;
  FzValue **vals = fzMalloc(ctx, (2 * nr + 1) * sizeof *vals);
  FzOp **ops = fzMalloc(ctx, (fzBlockGetNumOps(body) + 1) * sizeof *ops);
  FzPtrMap alias;
  fzPtrMapInit(&alias, ctx);
  bool ok = vals && ops;
  for (size_t i = 0; ok && i < nr; ++i) {
    vals[i] = fzOpGetOperand(yield, i);
    ok = (vals[nr + i] = result_buffer(S, fzOpGetResult(op, i),
                                       fzOpGetLoc(op))) != NULL;
  }
  for (FzOp *o = body ? fzBlockGetFirstOp(body) : NULL; ok && o != yield;
       o = fzOpGetNextInBlock(o))
    ops[nops++] = o;
  for (size_t i = 0; ok && i < fzBlockGetNumArguments(body); ++i)
    ok = fzPtrMapPut(&alias, fzBlockGetArgument(body, i),
                     fzOpGetOperand(op, i));
  /* A group around a graph.attention (its prologue: fusion's
   * prologueRoot) is that op's nest, reading through the prologue. */
  FzOp *att = nr == 1 && ok ? fzValueGetDefiningOp(vals[0]) : NULL;
  FzOp *epi[LG_MAX_EPILOGUE];
  size_t ne = 0;
  /* Its epilogue: transposes and reshapes of its result (the head
   * merge), walked back from the group's output. */
  while (att && ne < LG_MAX_EPILOGUE &&
         (is_named(att, "graph.transpose") || is_named(att, "graph.reshape")) &&
         fzOpGetNumOperands(att) == 1 && fzOpGetBlock(att) == body) {
    epi[ne++] = att;
    att = fzValueGetDefiningOp(fzOpGetOperand(att, 0));
  }
  for (size_t i = 0; i < ne / 2; ++i) {
    FzOp *t = epi[i];
    epi[i] = epi[ne - 1 - i];
    epi[ne - 1 - i] = t;
  }
  if (att && is_named(att, "graph.attention") && fzOpGetBlock(att) == body)
    ok = lgLowerAttention(&S->F, att, vals[nr], &alias, epi, ne);
  else if (ok)
    ok = lower_outputs(&S->F, fzOpGetLoc(op), nr, vals, vals + nr, ops, nops,
                       &alias);
  for (size_t i = 0; ok && i < nr; ++i)
    ok = new_storage(&S->F, fzOpGetResult(op, i), vals[nr + i]) != NULL;
  fzPtrMapFree(&alias);
  fzFree(ctx, vals);
  fzFree(ctx, ops);
  return ok;
}

/* A reshape outside a group reads its operand's memory through a view. */
static bool try_reshape_view(FuncState *S, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0), *r = fzOpGetResult(op, 0);
  LgStorage *s = fzPtrMapGet(&S->F.storage, x);
  if (!s || !s->buffer || fzPtrMapGet(&S->dest, r) ||
      fzBufferTypeGetStrides(fzValueGetType(s->buffer)))
    return false;
  FzType *bt = buffer_of(S->F.ctx, op, fzValueGetType(r), "result", 0);
  if (!bt)
    return false;
  FzLoopBuilder at = lgFuncBuilder(&S->F, &S->F.top, fzOpGetLoc(op));
  FzValue *v = fzBOp1(&at, "loop.view", 1, &s->buffer, bt);
  if (!v || !new_storage(&S->F, r, v))
    return false;
  /* The viewed memory lives as long as the view's last user. */
  FzValue *root = x, *up;
  while ((up = fzPtrMapGet(&S->root, root)))
    root = up;
  fzPtrMapPut(&S->root, r, root);
  FzOp *lr = fzPtrMapGet(&S->lastUse, r), *lx = fzPtrMapGet(&S->lastUse, root);
  if (lr && (!lx || fzOpIsBeforeInBlock(lx, lr)))
    fzPtrMapPut(&S->lastUse, root, lr);
  return true;
}

/* An op of several results (layer_norm with its statistics): each used
 * result gets a buffer; lower_outputs puts results of one shape in one
 * nest. */
static bool lower_lone_results(FuncState *S, FzOp *op) {
  size_t nr = fzOpGetNumResults(op), k = 0;
  FzValue *outs[4], *bufs[4];
  if (nr > 4)
    return fzOpEmitError(op, "cannot be lowered to loops: more than 4 "
                             "results");
  for (size_t i = 0; i < nr; ++i) {
    FzValue *r = fzOpGetResult(op, i);
    if (!fzValueHasUses(r) && !fzPtrMapGet(&S->dest, r))
      continue;
    outs[k] = r;
    if (!(bufs[k++] = result_buffer(S, r, fzOpGetLoc(op))))
      return false;
  }
  if (k && !lower_outputs(&S->F, fzOpGetLoc(op), k, outs, bufs, &op, 1, NULL))
    return false;
  for (size_t i = 0; i < k; ++i)
    if (!new_storage(&S->F, outs[i], bufs[i]))
      return false;
  return true;
}

static bool lower_lone(FuncState *S, FzOp *op) {
  if (fzOpGetNumResults(op) == 0)
    return fzOpEmitError(op, "cannot be lowered to loops: expected a "
                             "result");
  if (is_named(op, "graph.attention") && fzOpGetNumResults(op) == 1) {
    FzValue *r = fzOpGetResult(op, 0);
    FzValue *buf = result_buffer(S, r, fzOpGetLoc(op));
    return buf && lgLowerAttention(&S->F, op, buf, NULL, NULL, 0) &&
           new_storage(&S->F, r, buf);
  }
  if (!lgFindEmitter(op)) {
    FzStringRef name = fzIdentGetString(fzOpGetName(op));
    return fzOpEmitError(op, "cannot be lowered to loops: '%.*s' is not "
                             "supported by lower-graph-to-loop",
                         (int)name.length, name.data);
  }
  if (fzOpGetNumResults(op) > 1)
    return lower_lone_results(S, op);
  if (is_named(op, "graph.reshape") && try_reshape_view(S, op))
    return true;
  FzValue *r = fzOpGetResult(op, 0);
  FzValue *buf = result_buffer(S, r, fzOpGetLoc(op));
  return buf &&
         lower_outputs(&S->F, fzOpGetLoc(op), 1, &r, &buf, &op, 1, NULL) &&
         new_storage(&S->F, r, buf);
}

/* Storage that can be passed as a call operand: a buffer (a splat gets a
 * constant buffer). */
static FzValue *operand_buffer(FuncState *S, FzOp *at, FzValue *gv) {
  LgStorage *s = fzPtrMapGet(&S->F.storage, gv);
  FzOp *def = fzValueGetDefiningOp(gv);
  FzAttr *value = NULL;
  if (s && s->buffer)
    return s->buffer;
  if (s && s->splat)
    value = s->splat;
  else if (def && is_named(def, "graph.constant"))
    value = fzOpGetInherentAttr(def, FZ_STR("value"));
  if (!value) {
    fzOpEmitError(at, "cannot be lowered to loops: operand has no buffer");
    return NULL;
  }
  FzType *bt = buffer_of(S->F.ctx, at, fzValueGetType(gv), "operand", 0);
  FzOpState st;
  fzOpStateInit(&st, S->F.ctx, FZ_STR("loop.constant_buffer"), fzOpGetLoc(at));
  fzOpStateAddProp(&st, FZ_STR("value"), value);
  fzOpStateAddResults(&st, 1, &bt);
  FzLoopBuilder top = lgFuncBuilder(&S->F, &S->F.top, fzOpGetLoc(at));
  FzOp *c = bt ? fzBCreate(&top, &st) : NULL;
  if (!bt)
    fzOpStateDispose(&st);
  return c && new_storage(&S->F, gv, fzOpGetResult(c, 0))
             ? fzOpGetResult(c, 0)
             : NULL;
}

static bool lower_call(FuncState *S, FzOp *op) {
  size_t ni = fzOpGetNumOperands(op), nr = fzOpGetNumResults(op);
  FzContext *ctx = S->F.ctx;
  FzValue **ops = fzMalloc(ctx, (ni + nr + 1) * sizeof *ops);
  bool ok = ops != NULL;
  for (size_t i = 0; ok && i < ni; ++i)
    ok = (ops[i] = operand_buffer(S, op, fzOpGetOperand(op, i))) != NULL;
  for (size_t i = 0; ok && i < nr; ++i)
    ok = (ops[ni + i] = result_buffer(S, fzOpGetResult(op, i),
                                      fzOpGetLoc(op))) != NULL &&
         new_storage(&S->F, fzOpGetResult(op, i), ops[ni + i]);
  if (ok) {
    FzOpState st;
    fzOpStateInit(&st, ctx, FZ_STR("func.call"), fzOpGetLoc(op));
    fzOpStateAddOperands(&st, ni + nr, ops);
    fzOpStateAddProp(&st, FZ_STR("callee"),
                     fzOpGetInherentAttr(op, FZ_STR("callee")));
    FzLoopBuilder at = lgFuncBuilder(&S->F, &S->F.top, fzOpGetLoc(op));
    ok = fzBCreate(&at, &st) != NULL;
  }
  fzFree(ctx, ops);
  return ok;
}

/* Copies returned values that were not computed into their outputs. */
static bool lower_return(FuncState *S, FzOp *ret, FzBlock *entry,
                         size_t numInputs) {
  bool ok = true;
  for (size_t i = 0; ok && i < fzOpGetNumOperands(ret); ++i) {
    FzValue *v = fzOpGetOperand(ret, i);
    FzValue *out = fzBlockGetArgument(entry, numInputs + i);
    LgStorage *s = fzPtrMapGet(&S->F.storage, v);
    if (s && s->buffer == out)
      continue;
    ok = lower_outputs(&S->F, fzOpGetLoc(ret), 1, &v, &out, NULL, 0, NULL);
  }
  return ok && free_dead(S, ret) && fzOpSetOperands(ret, 0, NULL);
}

/* Chooses output destinations and last users, before anything changes. */
static bool plan_function(FuncState *S, FzOp **ops, size_t n, FzOp *ret,
                          FzBlock *entry, size_t numInputs) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < fzOpGetNumOperands(ops[i]); ++k)
      if (!fzPtrMapPut(&S->lastUse, fzOpGetOperand(ops[i], k), ops[i]))
        return false;
  for (size_t i = 0; ret && i < fzOpGetNumOperands(ret); ++i) {
    FzValue *v = fzOpGetOperand(ret, i);
    FzOp *def = fzValueGetDefiningOp(v);
    if (!def || is_named(def, "graph.constant") ||
        fzOpGetBlock(def) != entry || fzPtrMapGet(&S->dest, v))
      continue;
    if (!fzPtrMapPut(&S->dest, v, fzBlockGetArgument(entry, numInputs + i)))
      return false;
  }
  return true;
}

static bool lower_body(FuncState *S, FzOp *func, FzBlock *entry,
                       size_t numInputs, size_t numOutputs) {
  FzContext *ctx = S->F.ctx;
  size_t n = fzBlockGetNumOps(entry);
  FzOp **ops = fzMalloc(ctx, (n + 1) * sizeof *ops);
  if (!ops)
    return false;
  size_t k = 0;
  for (FzOp *op = fzBlockGetFirstOp(entry); op; op = fzOpGetNextInBlock(op))
    ops[k++] = op;
  FzOp *ret = n && is_named(ops[n - 1], "func.return") ? ops[n - 1] : NULL;
  size_t nbody = ret ? n - 1 : n;
  bool ok = ret != NULL ||
            fzOpEmitError(func, "cannot be lowered to loops: its body does "
                                "not end in func.return");
  if (ok && fzOpGetNumOperands(ret) != numOutputs)
    ok = fzOpEmitError(ret, "returns %zu values, the function type says %zu",
                       fzOpGetNumOperands(ret), numOutputs);
  ok = ok && plan_function(S, ops, n, ret, entry, numInputs);
  for (size_t i = 0; ok && i < nbody; ++i) {
    FzOp *op = ops[i];
    fzBuilderSetInsertionPointBefore(&S->F.top, op);
    if (is_named(op, "graph.constant"))
      continue;
    if (is_named(op, "graph.fusion"))
      ok = lower_fusion(S, op);
    else if (is_named(op, "func.call"))
      ok = lower_call(S, op);
    else
      ok = lower_lone(S, op);
    ok = ok && !S->F.failed && free_dead(S, op);
  }
  if (ok) {
    fzBuilderSetInsertionPointBefore(&S->F.top, ret);
    ok = lower_return(S, ret, entry, numInputs);
  }
  /* The graph ops are dead now: erase them, users first. */
  for (size_t i = nbody; ok && i-- > 0;)
    fzOpErase(ops[i]);
  fzFree(ctx, ops);
  return ok && !S->F.failed;
}

static bool lower_function(FzOp *func) {
  FzContext *ctx = fzOpGetContext(func);
  if (fzOpGetAttr(func, FZ_STR("loop.num_outputs")))
    return true; /* already lowered */
  FzType *ft = func_type(func);
  if (!ft)
    return fzOpEmitError(func, "has no function type");
  FzType *nt = lowered_type(ctx, func, ft);
  if (!nt)
    return false;
  size_t ni = fzFunctionTypeGetNumInputs(ft), nr = fzFunctionTypeGetNumResults(ft);
  FzRegion *region = fzOpGetRegion(func, 0);
  FzBlock *entry = fzRegionGetFirstBlock(region);
  FuncState S;
  memset(&S, 0, sizeof S);
  S.F.ctx = ctx;
  S.F.func = func;
  fzBuilderInit(&S.F.top, ctx);
  fzArenaInit(&S.F.arena, ctx);
  fzPtrMapInit(&S.F.storage, ctx);
  fzPtrMapInit(&S.F.constants, ctx);
  fzPtrMapInit(&S.dest, ctx);
  fzPtrMapInit(&S.lastUse, ctx);
  fzPtrMapInit(&S.temp, ctx);
  fzPtrMapInit(&S.root, ctx);
  bool ok = true;
  if (entry) {
    if (fzRegionGetNumBlocks(region) != 1)
      ok = fzOpEmitError(func, "cannot be lowered to loops: expected a "
                               "single-block body");
    for (size_t i = 0; ok && i < ni; ++i) {
      FzValue *arg = fzBlockGetArgument(entry, i);
      fzValueSetType(arg, fzFunctionTypeGetInput(nt, i));
      ok = new_storage(&S.F, arg, arg) != NULL;
    }
    for (size_t i = 0; ok && i < nr; ++i)
      ok = fzBlockAddArgument(entry, fzFunctionTypeGetInput(nt, ni + i),
                              fzOpGetLoc(func)) != NULL;
    ok = ok && lower_body(&S, func, entry, ni, nr);
  }
  if (ok)
    ok = fzOpSetProp(func, FZ_STR("function_type"), fzTypeAttrGet(ctx, nt)) &&
         fzOpSetAttr(func, FZ_STR("loop.num_outputs"),
                     fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64),
                                      (int64_t)nr));
  fzPtrMapFree(&S.root);
  fzPtrMapFree(&S.temp);
  fzPtrMapFree(&S.lastUse);
  fzPtrMapFree(&S.dest);
  fzPtrMapFree(&S.F.storage);
  fzPtrMapFree(&S.F.constants);
  fzArenaReset(&S.F.arena);
  return ok;
}

bool fzLowerGraphToLoop(FzOp *module) {
  /* The ops made belong to the loop dialect (MLIR's dependent dialects). */
  if (!fzRegisterLoopDialect(fzOpGetContext(module)))
    return false;
  FzRegion *r = fzOpGetNumRegions(module) ? fzOpGetRegion(module, 0) : NULL;
  FzBlock *body = r ? fzRegionGetFirstBlock(r) : NULL;
  bool ok = true;
  for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op;
       op = fzOpGetNextInBlock(op))
    if (is_named(op, "func.func"))
      ok = lower_function(op) && ok;
  return ok;
}

/*===--- Passes ---------------------------------------------------------===*/

static bool lower_run(FzPass *pass, FzOp *op) {
  (void)pass;
  return fzLowerGraphToLoop(op);
}

const FzPassDef fzLowerGraphToLoopPassDef = {
    .argument = "lower-graph-to-loop",
    .displayName = "LowerGraphToLoop",
    .summary = "Bufferize functions and lower graph ops and graph.fusion "
               "groups to loop nests (one nest per group)",
    .anchor = "builtin.module",
    .run = lower_run,
};
