/* dialects/graph/interp.c - the reference interpreter's driver: binds a
 * function's arguments, runs each op's kernel in block order, follows
 * func.call, and collects what func.return returns.
 *
 * Values live in a map from FzValue to FzTensor. A tensor is freed as
 * soon as its last use has run (use counts come from the IR), so peak
 * memory follows liveness; the caller's inputs are borrowed, never freed.
 * Kernels create their results through fzGraphInterpInferResults or
 * fzGraphInterpCreateResult, which resolve the declared result type's
 * dynamic dims from the concrete operand shapes; the driver then checks
 * every result against its declared type, so a kernel can never hand a
 * later op a tensor of the wrong dtype or shape.
 *
 * Errors are reported at the location of the op that failed; the
 * function's inputs are checked first, by argument.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

#define DEFAULT_MAX_ELEMENTS   ((int64_t)1 << 30)
#define DEFAULT_MAX_CALL_DEPTH 64

void fzGraphInterpInit(FzGraphInterp *in, FzContext *ctx,
                       const FzInterpOptions *options) {
  in->ctx = ctx;
  in->maxElements = options && options->maxElements > 0 ? options->maxElements
                                                        : DEFAULT_MAX_ELEMENTS;
  in->maxCallDepth = options && options->maxCallDepth ? options->maxCallDepth
                                                      : DEFAULT_MAX_CALL_DEPTH;
  in->depth = 0;
  in->quiet = options && options->quiet;
  in->capture = in->quiet ? options->errorMessage : NULL;
  in->captureCap = in->quiet ? options->errorMessageSize : 0;
  if (in->capture && in->captureCap)
    in->capture[0] = '\0';
}

FzGraphDiag fzGraphInterpDiag(FzGraphInterp *in, FzOp *op) {
  FzGraphDiag d = fzGraphDiagForOp(op);
  d.quiet = in->quiet;
  return d;
}

bool fzGraphInterpError(FzGraphInterp *in, FzOp *op, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!in->quiet)
    return fzOpEmitError(op, "%s", msg);
  const FzOpDef *def = fzOpGetDef(op);
  if (in->capture && in->captureCap && !in->capture[0])
    snprintf(in->capture, in->captureCap, "'%s' op %s",
             def ? def->name : "?", msg);
  return false;
}

FzContext *fzGraphInterpGetContext(const FzGraphInterp *in) {
  return in->ctx;
}

FzTensor *fzGraphInterpCreateTensor(FzGraphInterp *in, FzOp *op, FzType *dtype,
                                    size_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      fzGraphInterpError(in, op,
                         "cannot create a result with dimension %zu = %lld", i,
                         (long long)shape[i]);
      return NULL;
    }
    if (shape[i] && n > in->maxElements / shape[i] + 1) {
      n = in->maxElements + 1;
      break;
    }
    n *= shape[i];
  }
  if (n > in->maxElements) {
    fzGraphInterpError(in, op,
                       "a result would have more elements than the "
                       "interpreter's limit (%lld)",
                       (long long)in->maxElements);
    return NULL;
  }
  return fzTensorCreate(in->ctx, dtype, rank, shape);
}

FzTensor *fzGraphInterpCreateResult(FzGraphInterp *in, FzOp *op, size_t i,
                                    size_t rank, const int64_t *shape) {
  FzType *declared = fzValueGetType(fzOpGetResult(op, i));
  char bt[160], bs[160];
  if (fzTypeGetKind(declared) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(declared) != rank) {
    fzGraphInterpError(in, op,
                       "result #%zu is declared '%s' but the operands give "
                       "shape %s at run time",
                       i, fzGraphTypeStr(declared, bt, sizeof bt),
                       fzGraphShapeStr(rank, shape, bs, sizeof bs));
    return NULL;
  }
  int64_t dims[FZ_GRAPH_MAX_RANK];
  for (size_t k = 0; k < rank; ++k) {
    int64_t want = fzShapedTypeGetDim(declared, k);
    dims[k] = shape[k];
    if (want != FZ_DYNAMIC) {
      if (shape[k] != FZ_DYNAMIC && shape[k] != want) {
        fzGraphInterpError(in, op,
                           "result #%zu is declared '%s' but the operands "
                           "give shape %s at run time",
                           i, fzGraphTypeStr(declared, bt, sizeof bt),
                           fzGraphShapeStr(rank, shape, bs, sizeof bs));
        return NULL;
      }
      dims[k] = want;
    } else if (shape[k] == FZ_DYNAMIC) {
      fzGraphInterpError(in, op,
                         "cannot resolve dynamic dimension %zu of result #%zu "
                         "('%s') from the inputs",
                         k, i, fzGraphTypeStr(declared, bt, sizeof bt));
      return NULL;
    }
  }
  return fzGraphInterpCreateTensor(in, op, fzShapedTypeGetElementType(declared),
                                   rank, dims);
}

bool fzGraphInterpInferResults(FzGraphInterp *in, FzOp *op,
                               FzTensor *const *operands, FzTensor **results) {
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  FzType *small[8], **types = small;
  if (n > 8 && !(types = fzMalloc(in->ctx, n * sizeof *types)))
    return false;
  bool ok = true;
  for (size_t i = 0; ok && i < n; ++i)
    ok = (types[i] = fzTensorGetType(operands[i])) != NULL;
  FzType *out[4] = {NULL, NULL, NULL, NULL};
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  if (ok && info && info->shape)
    ok = info->shape(&d, n, types, &a, out);
  for (size_t i = 0; ok && i < r && i < 4; ++i) {
    FzType *t = out[i] ? out[i] : fzValueGetType(fzOpGetResult(op, i));
    ok = (results[i] =
              fzGraphInterpCreateResult(in, op, i, fzShapedTypeGetRank(t),
                                        fzShapedTypeGetShape(t))) != NULL;
  }
  if (types != small)
    fzFree(in->ctx, types);
  return ok;
}

/*===--- Running ops ----------------------------------------------------===*/

static bool same_shape(const FzTensor *t, const FzType *type) {
  if (fzShapedTypeGetRank(type) != t->rank ||
      fzShapedTypeGetElementType(type) != t->dtype)
    return false;
  for (size_t k = 0; k < t->rank; ++k) {
    int64_t want = fzShapedTypeGetDim(type, k);
    if (want != FZ_DYNAMIC && want != t->shape[k])
      return false;
  }
  return true;
}

static bool run_kernel(FzGraphInterp *in, FzOp *op, FzTensor *const *operands,
                       FzTensor **results) {
  const FzOpDef *def = fzOpGetDef(op);
  size_t r = fzOpGetNumResults(op);
  for (size_t i = 0; i < r; ++i)
    results[i] = NULL;
  const FzGraphKernel *k =
      def && strncmp(def->name, "graph.", 6) == 0 ? def->interpret : NULL;
  if (!k || !k->fn)
    return fzGraphInterpError(in, op,
                              "cannot be interpreted: the interpreter runs "
                              "graph ops, func.call and func.return");
  bool ok = k->fn(in, op, operands, results);
  for (size_t i = 0; ok && i < r; ++i) {
    FzType *declared = fzValueGetType(fzOpGetResult(op, i));
    char bt[160], bs[160];
    if (!results[i])
      ok = fzGraphInterpError(
          in, op, "internal error: the kernel made no result #%zu", i);
    else if (!same_shape(results[i], declared))
      ok = fzGraphInterpError(
          in, op,
          "internal error: the kernel made result #%zu of "
          "shape %s, but it is declared '%s'",
          i,
          fzGraphShapeStr(results[i]->rank, results[i]->shape, bs, sizeof bs),
          fzGraphTypeStr(declared, bt, sizeof bt));
  }
  if (!ok)
    for (size_t i = 0; i < r; ++i) {
      fzTensorDestroy(results[i]);
      results[i] = NULL;
    }
  return ok;
}

bool fzInterpretOp(FzOp *op, FzTensor *const *operands,
                   const FzInterpOptions *options, FzTensor **results) {
  FzGraphInterp in;
  fzGraphInterpInit(&in, fzOpGetContext(op), options);
  if (fzOpGetNumRegions(op) != 0) {
    for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
      results[i] = NULL;
    return fzGraphInterpError(&in, op,
                              "cannot be interpreted on its own (it has "
                              "regions)");
  }
  return run_kernel(&in, op, operands, results);
}

static bool run_function(FzGraphInterp *in, FzOp *func, FzLoc *callLoc,
                         size_t n, FzTensor *const *inputs, size_t *numOut,
                         FzTensor ***outputs);

static bool run_call(FzGraphInterp *in, FzOp *op, FzTensor *const *operands,
                     FzTensor **results) {
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("callee"));
  if (!callee || fzAttrGetKind(callee) != FZ_ATTR_SYMBOL_REF)
    return fzGraphInterpError(in, op, "requires a 'callee' symbol reference");
  FzStringRef name = fzSymbolRefAttrGetRoot(callee);
  FzOp *table = fzSymbolTableGetNearest(fzOpGetParentOp(op));
  FzOp *fn = table ? fzSymbolTableLookupIn(table, name) : NULL;
  if (!fn)
    return fzGraphInterpError(in, op, "callee @%.*s not found",
                              (int)name.length, name.data);
  if (in->depth >= in->maxCallDepth)
    return fzGraphInterpError(in, op,
                              "calls nest deeper than the interpreter's limit "
                              "(%u)",
                              in->maxCallDepth);
  size_t nOut = 0;
  FzTensor **outs = NULL;
  in->depth++;
  bool ok = run_function(in, fn, fzOpGetLoc(op), fzOpGetNumOperands(op),
                         operands, &nOut, &outs);
  in->depth--;
  if (!ok)
    return false;
  if (nOut != fzOpGetNumResults(op)) {
    fzTensorArrayDestroy(in->ctx, nOut, outs);
    return fzGraphInterpError(in, op,
                              "callee returned %zu values for %zu results",
                              nOut, fzOpGetNumResults(op));
  }
  for (size_t i = 0; i < nOut; ++i)
    results[i] = outs[i];
  fzFree(in->ctx, outs);
  return true;
}

/* Uses left per value, stored as count + 1 so that 0 means "absent". */
typedef struct Env {
  FzPtrMap tensors;  /* FzValue* -> FzTensor* */
  FzPtrMap usesLeft; /* FzValue* -> (uintptr_t)(uses + 1) */
  FzPtrMap borrowed; /* FzTensor* -> non-NULL when not ours to free */
} Env;

static void env_release(Env *e, FzValue *v) {
  uintptr_t left = (uintptr_t)fzPtrMapGet(&e->usesLeft, v);
  if (left > 1)
    left--;
  if (left > 1) {
    fzPtrMapPut(&e->usesLeft, v, (void *)left);
    return;
  }
  FzTensor *t = fzPtrMapGet(&e->tensors, v);
  fzPtrMapRemove(&e->usesLeft, v);
  fzPtrMapRemove(&e->tensors, v);
  if (t && !fzPtrMapContains(&e->borrowed, t))
    fzTensorDestroy(t);
}

/* Binds v to t (borrowed: not freed by the env). On failure nothing is
 * bound and the caller still owns t. */
static bool env_bind(Env *e, FzValue *v, FzTensor *t, bool borrowed) {
  size_t uses = fzValueGetNumUses(v);
  if (uses == 0) {
    if (!borrowed)
      fzTensorDestroy(t);
    return true;
  }
  if (borrowed && !fzPtrMapPut(&e->borrowed, t, (void *)1))
    return false;
  if (!fzPtrMapPut(&e->tensors, v, t))
    return false;
  if (!fzPtrMapPut(&e->usesLeft, v, (void *)(uintptr_t)(uses + 1))) {
    /* Unbound again: the caller still owns t (and frees it). */
    fzPtrMapRemove(&e->tensors, v);
    return false;
  }
  return true;
}

/* Frees every tensor still bound to an argument or result of block. */
static void env_free(Env *e, FzBlock *block) {
  for (size_t i = 0; i < fzBlockGetNumArguments(block); ++i)
    fzPtrMapRemove(&e->tensors, fzBlockGetArgument(block, i));
  for (FzOp *op = fzBlockGetFirstOp(block); op; op = fzOpGetNextInBlock(op))
    for (size_t i = 0; i < fzOpGetNumResults(op); ++i) {
      FzTensor *t = fzPtrMapGet(&e->tensors, fzOpGetResult(op, i));
      if (t && !fzPtrMapContains(&e->borrowed, t))
        fzTensorDestroy(t);
    }
  fzPtrMapFree(&e->tensors);
  fzPtrMapFree(&e->usesLeft);
  fzPtrMapFree(&e->borrowed);
}

/* The tensors of op's operands into ops; reports a missing one. */
static bool gather_operands(Env *e, FzOp *op, FzTensor **ops) {
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    ops[i] = fzPtrMapGet(&e->tensors, fzOpGetOperand(op, i));
    if (!ops[i])
      return fzOpEmitError(op,
                           "operand #%zu has no value in the interpreter "
                           "(defined outside the block being run?)",
                           i);
  }
  return true;
}

/* Runs one non-terminator op and binds its results. */
static bool run_op(FzGraphInterp *in, Env *e, FzOp *op) {
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  FzTensor *smallOps[8], *smallRes[4];
  FzTensor **ops = n <= 8 ? smallOps : fzMalloc(in->ctx, n * sizeof *ops);
  FzTensor **res = r <= 4 ? smallRes : fzCalloc(in->ctx, r, sizeof *res);
  bool ok = ops && res && gather_operands(e, op, ops);
  if (ok) {
    const FzOpDef *def = fzOpGetDef(op);
    if (def && strcmp(def->name, "func.call") == 0)
      ok = run_call(in, op, ops, res);
    else
      ok = run_kernel(in, op, ops, res);
  }
  for (size_t i = 0; ok && i < r; ++i)
    if (!env_bind(e, fzOpGetResult(op, i), res[i], false)) {
      fzTensorDestroy(res[i]);
      for (size_t j = i + 1; j < r; ++j)
        fzTensorDestroy(res[j]);
      ok = false;
    }
  if (ok)
    for (size_t i = 0; i < n; ++i)
      env_release(e, fzOpGetOperand(op, i));
  if (ops && ops != smallOps)
    fzFree(in->ctx, ops);
  if (res && res != smallRes)
    fzFree(in->ctx, res);
  return ok;
}

bool fzGraphInterpRunBlock(FzGraphInterp *in, FzBlock *block,
                           FzTensor *const *args, FzTensor **results) {
  Env e;
  fzPtrMapInit(&e.tensors, in->ctx);
  fzPtrMapInit(&e.usesLeft, in->ctx);
  fzPtrMapInit(&e.borrowed, in->ctx);
  bool ok = true, done = false;
  for (size_t i = 0; ok && i < fzBlockGetNumArguments(block); ++i)
    ok = env_bind(&e, fzBlockGetArgument(block, i), args[i], true);
  for (FzOp *op = fzBlockGetFirstOp(block); ok && op && !done;
       op = fzOpGetNextInBlock(op)) {
    if (!fzOpHasTrait(op, FZ_TRAIT_TERMINATOR)) {
      ok = run_op(in, &e, op);
      continue;
    }
    size_t n = fzOpGetNumOperands(op);
    FzTensor **ops = fzCalloc(in->ctx, n ? n : 1, sizeof *ops);
    ok = ops && gather_operands(&e, op, ops);
    for (size_t i = 0; ok && i < n; ++i)
      ok = (results[i] = fzTensorClone(ops[i])) != NULL;
    if (!ok)
      for (size_t i = 0; i < n; ++i) {
        fzTensorDestroy(results[i]);
        results[i] = NULL;
      }
    fzFree(in->ctx, ops);
    done = true;
  }
  if (ok && !done)
    ok = fzEmitError(in->ctx, NULL,
                     "the interpreted block has no "
                     "terminator");
  env_free(&e, block);
  return ok;
}

/*===--- Functions ------------------------------------------------------===*/

static FzType *function_type(FzOp *func) {
  FzAttr *a = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_TYPE)
    return NULL;
  FzType *t = fzTypeAttrGetValue(a);
  return fzTypeGetKind(t) == FZ_TYPE_FUNCTION ? t : NULL;
}

static bool run_function(FzGraphInterp *in, FzOp *func, FzLoc *callLoc,
                         size_t n, FzTensor *const *inputs, size_t *numOut,
                         FzTensor ***outputs) {
  FzContext *ctx = in->ctx;
  const FzOpDef *def = fzOpGetDef(func);
  FzStringRef name = fzSymbolGetName(func);
  int nl = (int)name.length;
  const char *ns = name.data ? name.data : "";
  *numOut = 0;
  *outputs = NULL;
  if (!def || strcmp(def->name, "func.func") != 0)
    return fzEmitError(ctx, callLoc ? callLoc : fzOpGetLoc(func),
                       "@%.*s is not a func.func", nl, ns);
  FzType *ft = function_type(func);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  if (!ft || !entry)
    return fzEmitError(ctx, callLoc ? callLoc : fzOpGetLoc(func),
                       "function @%.*s has no body to interpret", nl, ns);
  size_t nIn = fzFunctionTypeGetNumInputs(ft);
  if (n != nIn)
    return fzEmitError(ctx, fzOpGetLoc(func),
                       "function @%.*s expects %zu input%s, but got %zu", nl,
                       ns, nIn, nIn == 1 ? "" : "s", n);
  for (size_t i = 0; i < n; ++i) {
    FzType *want = fzFunctionTypeGetInput(ft, i);
    char bw[160], bg[160];
    if (!inputs[i])
      return fzEmitError(ctx, fzOpGetLoc(func),
                         "argument #%zu (%%arg%zu) "
                         "has no input",
                         i, i);
    if (fzTypeGetKind(want) != FZ_TYPE_TENSOR ||
        fzShapedTypeGetRank(want) == FZ_UNRANKED ||
        !same_shape(inputs[i], want)) {
      FzType *got = fzTensorGetType(inputs[i]);
      return fzEmitError(ctx, fzOpGetLoc(func),
                         "argument #%zu (%%arg%zu) of "
                         "@%.*s expects %s but got %s",
                         i, i, nl, ns, fzGraphTypeStr(want, bw, sizeof bw),
                         fzGraphTypeStr(got, bg, sizeof bg));
    }
  }
  FzOp *term = fzBlockGetLastOp(entry);
  size_t nRes = term ? fzOpGetNumOperands(term) : 0;
  FzTensor **outs = fzCalloc(ctx, nRes ? nRes : 1, sizeof *outs);
  if (!outs)
    return false;
  if (!fzGraphInterpRunBlock(in, entry, inputs, outs)) {
    fzTensorArrayDestroy(ctx, nRes, outs);
    return false;
  }
  *numOut = nRes;
  *outputs = outs;
  return true;
}

bool fzInterpretFunction(FzOp *func, size_t numInputs, FzTensor *const *inputs,
                         const FzInterpOptions *options, size_t *numOutputs,
                         FzTensor ***outputs) {
  FzGraphInterp in;
  fzGraphInterpInit(&in, fzOpGetContext(func), options);
  return run_function(&in, func, NULL, numInputs, inputs, numOutputs, outputs);
}
