/* dialects/loop/ops_struct.c - structured control flow: loop.for,
 * loop.parallel, loop.yield, loop.barrier.
 *
 * Custom forms (attributes, when any, follow the region as in MLIR):
 *   %r:2 = loop.for %i = %lb to %ub step %s iter_args(%a = %x, %b = %y)
 *              -> (f32, f32) { ... loop.yield %a2, %b2 : f32, f32 }
 *   loop.for %i = %lb to %ub step %s { ... loop.yield }
 *   loop.parallel (%i, %j) = (%l0, %l1) to (%u0, %u1) step (%s0, %s1) {
 *     ... loop.yield }
 *   loop.barrier
 *
 * Invariants (verified): bounds and steps are index values; a for body
 * has arguments (index, iter types...) and yields the iter types, which
 * are also its results; a parallel body has one index argument per
 * dimension and yields nothing. Both ops are PURE in the recursive
 * sense: effect-free exactly when their bodies are (fzOpIsEffectFree).
 */
#include "dialects/loop/loop_internal.h"

#define MAX_PAR_DIMS FZ_GRAPH_MAX_RANK
#define MAX_ITERS 256 /* a 64x64 warp tile has 64 accumulator pairs, plus loop state */

FzBlock *fzLoopGetBody(const FzOp *op) {
  if (fzOpGetNumRegions(op) != 1)
    return NULL;
  return fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
}

size_t fzLoopParallelGetNumDims(const FzOp *op) {
  return fzOpGetNumOperands(op) / 3;
}

static bool is_index(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INDEX;
}

/* The body ends in a loop.yield whose operand types are types[0..n). */
static bool check_yield(FzOp *op, FzBlock *body, size_t n,
                        FzType *const *types) {
  FzOp *term = fzBlockGetLastOp(body);
  if (!term || fzLoopGetOpcode(term) != FZ_LOOP_OP_YIELD)
    return fzOpEmitError(op, "body must end with loop.yield");
  if (fzOpGetNumOperands(term) != n)
    return fzOpEmitError(op, "body yields %zu values, expected %zu",
                         fzOpGetNumOperands(term), n);
  for (size_t i = 0; i < n; ++i)
    if (fzLoopOperandType(term, i) != types[i])
      return fzOpEmitError(op, "type of yielded value #%zu does not match "
                               "iteration argument #%zu", i, i);
  return true;
}

/*===--- loop.for -------------------------------------------------------===*/

static bool for_verify(FzOp *op) {
  size_t n = fzOpGetNumOperands(op);
  if (n < 3)
    return fzOpEmitError(op, "expects lower bound, upper bound and step");
  for (size_t i = 0; i < 3; ++i)
    if (!is_index(fzLoopOperandType(op, i)))
      return fzOpEmitError(op, "%s must have type index",
                           i == 0 ? "lower bound"
                                  : i == 1 ? "upper bound" : "step");
  size_t iters = n - 3;
  if (fzOpGetNumResults(op) != iters)
    return fzOpEmitError(op, "has %zu iteration arguments but %zu results",
                         iters, fzOpGetNumResults(op));
  FzBlock *body = fzLoopGetBody(op);
  if (!body)
    return fzOpEmitError(op, "expects a body (one block)");
  if (fzBlockGetNumArguments(body) != iters + 1)
    return fzOpEmitError(op, "body must have %zu arguments (the induction "
                             "variable and the iteration arguments)",
                         iters + 1);
  if (!is_index(fzValueGetType(fzBlockGetArgument(body, 0))))
    return fzOpEmitError(op, "induction variable must have type index");
  FzType *types[MAX_ITERS];
  if (iters > MAX_ITERS)
    return fzOpEmitError(op, "has more than %d iteration arguments",
                         MAX_ITERS);
  for (size_t i = 0; i < iters; ++i) {
    types[i] = fzLoopOperandType(op, 3 + i);
    if (fzValueGetType(fzBlockGetArgument(body, i + 1)) != types[i] ||
        fzLoopResultType(op, i) != types[i])
      return fzOpEmitError(op, "iteration argument #%zu: initial value, "
                               "body argument and result types differ", i);
  }
  if (!check_yield(op, body, iters, types))
    return false;
  /* A constant step that is not positive would never end (a computed one
   * is an error when the loop runs). */
  int64_t step;
  if (fzLoopValueGetConstantInt(fzOpGetOperand(op, 2), &step) && step <= 0)
    return fzOpEmitError(op, "step must be positive, got %lld",
                         (long long)step);
  return true;
}

static void for_print(FzOp *op, FzAsmPrinter *p) {
  FzBlock *body = fzLoopGetBody(op);
  size_t iters = fzOpGetNumOperands(op) - 3;
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzBlockGetArgument(body, 0));
  fzAsmPrint(p, " = ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzAsmPrint(p, " to ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 1));
  fzAsmPrint(p, " step ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 2));
  if (iters) {
    fzAsmPrint(p, " iter_args(");
    for (size_t i = 0; i < iters; ++i) {
      if (i)
        fzAsmPrint(p, ", ");
      fzAsmPrintOperand(p, fzBlockGetArgument(body, i + 1));
      fzAsmPrint(p, " = ");
      fzAsmPrintOperand(p, fzOpGetOperand(op, 3 + i));
    }
    fzAsmPrint(p, ") -> (");
    for (size_t i = 0; i < iters; ++i) {
      if (i)
        fzAsmPrint(p, ", ");
      fzAsmPrintType(p, fzLoopOperandType(op, 3 + i));
    }
    fzAsmPrint(p, ")");
  }
  fzAsmPrintRegion(p, fzOpGetRegion(op, 0), false);
  fzLoopPrintAttrs(p, op);
}

static bool for_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzType *idx = fzIndexTypeGet(ctx);
  FzAsmArgument args[MAX_ITERS + 1];
  FzUnresolvedOperand bounds[3], inits[MAX_ITERS];
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  size_t iters = 0;
  args[0].attrs = NULL;
  args[0].type = idx;
  args[0].loc = loc;
  if (!fzAsmParseOperand(p, &args[0].ssa) || !fzAsmParsePunct(p, "=") ||
      !fzAsmParseOperand(p, &bounds[0]) || !fzAsmParseKeyword(p, "to") ||
      !fzAsmParseOperand(p, &bounds[1]) || !fzAsmParseKeyword(p, "step") ||
      !fzAsmParseOperand(p, &bounds[2]))
    return false;
  args[0].loc = args[0].ssa.loc;
  FzType *types[3] = {idx, idx, idx};
  if (!fzAsmResolveOperands(p, bounds, 3, types, 3, loc, st))
    return false;
  if (fzAsmParseOptionalKeyword(p, "iter_args")) {
    if (!fzAsmParsePunct(p, "("))
      return false;
    do {
      if (iters == MAX_ITERS)
        return fzAsmEmitError(p, "too many iteration arguments");
      FzAsmArgument *a = &args[iters + 1];
      a->attrs = NULL;
      if (!fzAsmParseOperand(p, &a->ssa) || !fzAsmParsePunct(p, "=") ||
          !fzAsmParseOperand(p, &inits[iters]))
        return false;
      a->loc = a->ssa.loc;
      iters++;
    } while (fzAsmParseOptionalPunct(p, ","));
    FzType **tl;
    size_t nt;
    if (!fzAsmParsePunct(p, ")") || !fzAsmParsePunct(p, "->") ||
        !fzAsmParseArrowTypeList(p, &tl, &nt))
      return false;
    if (nt != iters)
      return fzAsmEmitError(p, "expected %zu result types, got %zu", iters,
                            nt);
    for (size_t i = 0; i < iters; ++i)
      args[i + 1].type = tl[i];
    for (size_t i = 0; i < iters; ++i)
      if (!fzAsmResolveOperands(p, &inits[i], 1, &args[i + 1].type, 1, loc,
                                st))
        return false;
    for (size_t i = 0; i < iters; ++i)
      fzOpStateAddResults(st, 1, &args[i + 1].type);
  }
  FzRegion *region = fzOpStateAddRegion(st);
  FzAttr *attrs;
  if (!region || !fzAsmParseRegion(p, region, iters + 1, args, true) ||
      !fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

/*===--- loop.parallel --------------------------------------------------===*/

static bool parallel_verify(FzOp *op) {
  size_t n = fzOpGetNumOperands(op);
  if (n == 0 || n % 3 != 0)
    return fzOpEmitError(op, "expects lower bounds, upper bounds and steps "
                             "for at least one dimension");
  for (size_t i = 0; i < n; ++i)
    if (!is_index(fzLoopOperandType(op, i)))
      return fzOpEmitError(op, "bounds and steps must have type index");
  size_t dims = n / 3;
  FzBlock *body = fzLoopGetBody(op);
  if (!body)
    return fzOpEmitError(op, "expects a body (one block)");
  if (fzBlockGetNumArguments(body) != dims)
    return fzOpEmitError(op, "body must have %zu index arguments", dims);
  for (size_t i = 0; i < dims; ++i)
    if (!is_index(fzValueGetType(fzBlockGetArgument(body, i))))
      return fzOpEmitError(op, "body argument #%zu must have type index", i);
  if (!check_yield(op, body, 0, NULL))
    return false;
  for (size_t d = 0; d < dims; ++d) {
    int64_t step;
    if (fzLoopValueGetConstantInt(fzOpGetOperand(op, 2 * dims + d), &step) &&
        step <= 0)
      return fzOpEmitError(op, "step of dimension %zu must be positive, got "
                               "%lld",
                           d, (long long)step);
  }
  return true;
}

static void print_group(FzAsmPrinter *p, FzOp *op, size_t from, size_t n) {
  fzAsmPrint(p, "(");
  fzLoopPrintOperandRange(p, op, from, from + n);
  fzAsmPrint(p, ")");
}

static void parallel_print(FzOp *op, FzAsmPrinter *p) {
  FzBlock *body = fzLoopGetBody(op);
  size_t dims = fzLoopParallelGetNumDims(op);
  fzAsmPrint(p, " (");
  for (size_t i = 0; i < dims; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzBlockGetArgument(body, i));
  }
  fzAsmPrint(p, ") = ");
  print_group(p, op, 0, dims);
  fzAsmPrint(p, " to ");
  print_group(p, op, dims, dims);
  fzAsmPrint(p, " step ");
  print_group(p, op, 2 * dims, dims);
  fzAsmPrintRegion(p, fzOpGetRegion(op, 0), false);
  fzLoopPrintAttrs(p, op);
}

/* `(` operands `)` with exactly n entries. */
static bool parse_group(FzAsmParser *p, FzUnresolvedOperand *out, size_t n) {
  size_t got;
  if (!fzAsmParsePunct(p, "(") ||
      !fzLoopParseOperands(p, out, MAX_PAR_DIMS, &got) ||
      !fzAsmParsePunct(p, ")"))
    return false;
  if (got != n)
    return fzAsmEmitError(p, "expected %zu values, one per dimension", n);
  return true;
}

static bool parallel_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzType *idx = fzIndexTypeGet(ctx);
  FzAsmArgument args[MAX_PAR_DIMS];
  FzUnresolvedOperand ivs[MAX_PAR_DIMS], ops[3][MAX_PAR_DIMS];
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  size_t dims;
  if (!fzAsmParsePunct(p, "(") ||
      !fzLoopParseOperands(p, ivs, MAX_PAR_DIMS, &dims) ||
      !fzAsmParsePunct(p, ")") || !fzAsmParsePunct(p, "="))
    return false;
  if (dims == 0)
    return fzAsmEmitErrorAt(p, loc, "expected at least one dimension");
  if (!parse_group(p, ops[0], dims) || !fzAsmParseKeyword(p, "to") ||
      !parse_group(p, ops[1], dims) || !fzAsmParseKeyword(p, "step") ||
      !parse_group(p, ops[2], dims))
    return false;
  for (size_t g = 0; g < 3; ++g)
    for (size_t i = 0; i < dims; ++i)
      if (!fzAsmResolveOperands(p, &ops[g][i], 1, &idx, 1, loc, st))
        return false;
  for (size_t i = 0; i < dims; ++i)
    args[i] = (FzAsmArgument){ivs[i], idx, NULL, ivs[i].loc};
  FzRegion *region = fzOpStateAddRegion(st);
  FzAttr *attrs;
  if (!region || !fzAsmParseRegion(p, region, dims, args, true) ||
      !fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

/*===--- loop.yield / loop.barrier --------------------------------------===*/

static bool yield_verify(FzOp *op) {
  FzOp *parent = fzOpGetParentOp(op);
  FzLoopOpcode opc = parent ? fzLoopGetOpcode(parent) : FZ_LOOP_OP_UNKNOWN;
  if (opc != FZ_LOOP_OP_FOR && opc != FZ_LOOP_OP_PARALLEL)
    return fzOpEmitError(op, "expects parent op 'loop.for' or "
                             "'loop.parallel'");
  return true;
}

static void yield_print(FzOp *op, FzAsmPrinter *p) {
  size_t n = fzOpGetNumOperands(op);
  if (n == 0)
    return;
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzAsmPrint(p, " : ");
  for (size_t i = 0; i < n; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintType(p, fzLoopOperandType(op, i));
  }
}

static bool yield_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand ops[MAX_ITERS];
  size_t n, nt;
  FzType **types;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzLoopParseOperands(p, ops, MAX_ITERS, &n))
    return false;
  if (n == 0)
    return true;
  return fzAsmParsePunct(p, ":") && fzAsmParseTypeList(p, &types, &nt) &&
         fzAsmResolveOperands(p, ops, n, types, nt, loc, st);
}

static bool barrier_verify(FzOp *op) {
  for (FzOp *a = fzOpGetParentOp(op); a; a = fzOpGetParentOp(a))
    if (fzLoopGetOpcode(a) == FZ_LOOP_OP_PARALLEL)
      return true;
  return fzOpEmitError(op, "must be nested in a loop.parallel");
}

static void barrier_print(FzOp *op, FzAsmPrinter *p) {
  fzLoopPrintAttrs(p, op);
}

static bool barrier_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

/*===--- The table ------------------------------------------------------===*/

#define STRUCT_OP(ID, NAME, SUMMARY, TRAITS, NOPS, NRES, NREG, PREFIX)        \
  static const FzLoopOpInfo info_##ID = {FZ_LOOP_OP_##ID, FZ_LOOP_FAM_OTHER}; \
  const FzOpDef fzLoopOp_##ID = {                                             \
      .name = NAME,                                                           \
      .summary = SUMMARY,                                                     \
      .traits = TRAITS,                                                       \
      .numOperands = NOPS,                                                    \
      .numResults = NRES,                                                     \
      .numRegions = NREG,                                                     \
      .fusionKind = FZ_FUSION_OPAQUE,                                         \
      .verify = PREFIX##_verify,                                              \
      .print = PREFIX##_print,                                                \
      .parse = PREFIX##_parse,                                                \
      .extra = &info_##ID,                                                    \
  };

/* clang-format off */
STRUCT_OP(FOR, "loop.for", "a sequential loop with loop-carried values",
          FZ_TRAIT_PURE | FZ_TRAIT_SINGLE_BLOCK, FZ_VARIADIC, FZ_VARIADIC, 1,
          for)
STRUCT_OP(PARALLEL, "loop.parallel", "a multi-dimensional loop whose "
          "iterations are independent", FZ_TRAIT_PURE | FZ_TRAIT_SINGLE_BLOCK,
          FZ_VARIADIC, 0, 1, parallel)
STRUCT_OP(YIELD, "loop.yield", "ends a loop body (the next iteration values "
          "of a loop.for)", FZ_TRAIT_PURE | FZ_TRAIT_TERMINATOR |
          FZ_TRAIT_RETURN_LIKE, FZ_VARIADIC, 0, 0, yield)
STRUCT_OP(BARRIER, "loop.barrier", "separates the phases of one "
          "loop.parallel iteration", 0, 0, 0, 0, barrier)
/* clang-format on */
