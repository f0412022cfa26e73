/* tests/unit/test_pass_dialect.h - a tiny dialect "tp" for the Check
 * suites of the pass infrastructure (test_pass*.c, test_greedy*.c).
 *
 * Ops (generic syntax only; i32 scalars):
 *   tp.const  {value}     constant-like, pure
 *   tp.add    (a, b)      pure, commutative; folds c1+c2 and x+0
 *   tp.mul    (a, b)      pure, commutative; folds c1*c2
 *   tp.neg    (a)         pure; pattern neg(neg(x)) -> x
 *   tp.spin   {n}         pure; pattern bumps n forever (non-convergence)
 *   tp.ping / tp.pong     pure; patterns turn each into the other
 *   tp.effect (...)       side effects (no traits)
 *   tp.wrap   (...) {r}   pure, one region ending in tp.yield
 *   tp.iso    {r}         isolated from above, one region (any blocks)
 *   tp.yield  (...)       pure, return-like terminator
 * Constants are materialized as tp.const. Static inline, header only.
 */
#ifndef FZ_TEST_PASS_DIALECT_H
#define FZ_TEST_PASS_DIALECT_H

#include "fz/pass.h"
#include "test_helpers.h"

static const char *const tp_value_attrs[] = {"value", NULL};

static inline FzAttr *tp_int(FzContext *ctx, int64_t v) {
  return fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32), v);
}

static inline bool tp_is_int(const FzAttr *a) {
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER;
}

static inline bool tp_fold_add(FzOp *op, FzAttr *const *c, FzFoldResult *r) {
  FzContext *ctx = fzOpGetContext(op);
  if (tp_is_int(c[0]) && tp_is_int(c[1])) {
    r[0].attr = tp_int(ctx, fzIntegerAttrGetValue(c[0]) +
                                fzIntegerAttrGetValue(c[1]));
    return true;
  }
  if (tp_is_int(c[1]) && fzIntegerAttrGetValue(c[1]) == 0) {
    r[0].value = fzOpGetOperand(op, 0);
    return true;
  }
  if (tp_is_int(c[0]) && fzIntegerAttrGetValue(c[0]) == 0) {
    r[0].value = fzOpGetOperand(op, 1);
    return true;
  }
  return false;
}

static inline bool tp_fold_mul(FzOp *op, FzAttr *const *c, FzFoldResult *r) {
  if (tp_is_int(c[0]) && tp_is_int(c[1])) {
    r[0].attr = tp_int(fzOpGetContext(op), fzIntegerAttrGetValue(c[0]) *
                                               fzIntegerAttrGetValue(c[1]));
    return true;
  }
  return false;
}

/* neg(neg(x)) -> x */
static inline bool tp_neg_neg(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *inner = fzValueGetDefiningOp(fzOpGetOperand(op, 0));
  if (!inner || fzOpGetName(inner) != fzOpGetName(op))
    return fzRewriterNotifyMatchFailure(rw, op, "operand is not a neg");
  FzValue *x = fzOpGetOperand(inner, 0);
  fzRewriterReplaceOp(rw, op, &x);
  return true;
}

/* Bumps attribute n in place, forever. */
static inline bool tp_spin(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *n = fzOpGetAttr(op, FZ_STR("n"));
  int64_t v = n ? fzIntegerAttrGetValue(n) : 0;
  fzRewriterStartModify(rw, op);
  if (!fzOpSetAttr(op, FZ_STR("n"), tp_int(fzOpGetContext(op), v + 1))) {
    fzRewriterCancelModify(rw, op);
    return false;
  }
  fzRewriterFinalizeModify(rw, op);
  return true;
}

/* Replaces op by a fresh op named ud (same operands and result types). */
static inline bool tp_rename(FzOp *op, FzRewriter *rw, void *ud) {
  FzContext *ctx = fzOpGetContext(op);
  FzOpState st;
  fzOpStateInit(&st, ctx, fzStringRefFromCString(ud), fzOpGetLoc(op));
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    fzOpStateAddOperands(&st, 1, &v);
  }
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i) {
    FzType *t = fzValueGetType(fzOpGetResult(op, i));
    fzOpStateAddResults(&st, 1, &t);
  }
  FzOp *n = fzRewriterCreateOp(rw, &st);
  if (!n)
    return false;
  fzRewriterReplaceOpWithOp(rw, op, n);
  return true;
}

static inline void tp_neg_patterns(FzPatternSet *set, FzContext *ctx) {
  (void)ctx;
  FzPattern p = {"tp.neg", 1, tp_neg_neg, NULL, "tp-neg-neg"};
  fzPatternSetAdd(set, &p);
}

static inline void tp_spin_patterns(FzPatternSet *set, FzContext *ctx) {
  (void)ctx;
  FzPattern p = {"tp.spin", 1, tp_spin, NULL, "tp-spin"};
  fzPatternSetAdd(set, &p);
}

static inline void tp_pingpong_patterns(FzPatternSet *set, FzContext *ctx) {
  (void)ctx;
  FzPattern a = {"tp.ping", 1, tp_rename, (void *)"tp.pong", "ping-to-pong"};
  FzPattern b = {"tp.pong", 1, tp_rename, (void *)"tp.ping", "pong-to-ping"};
  fzPatternSetAdd(set, &a);
  fzPatternSetAdd(set, &b);
}

static inline FzOp *tp_materialize(FzBuilder *b, FzAttr *value, FzType *type,
                                   FzLoc *loc) {
  if (!tp_is_int(value))
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("tp.const"), loc);
  fzOpStateAddProp(&st, FZ_STR("value"), value);
  fzOpStateAddResults(&st, 1, &type);
  return fzBuilderCreate(b, &st);
}

static const FzOpDef tp_const_def = {
    .name = "tp.const", .traits = FZ_TRAIT_PURE | FZ_TRAIT_CONSTANT_LIKE,
    .numOperands = 0, .numResults = 1, .numRegions = 0,
    .inherentAttrs = tp_value_attrs};
static const FzOpDef tp_add_def = {
    .name = "tp.add", .traits = FZ_TRAIT_PURE | FZ_TRAIT_COMMUTATIVE,
    .numOperands = 2, .numResults = 1, .numRegions = 0,
    .fold = tp_fold_add};
static const FzOpDef tp_mul_def = {
    .name = "tp.mul", .traits = FZ_TRAIT_PURE | FZ_TRAIT_COMMUTATIVE,
    .numOperands = 2, .numResults = 1, .numRegions = 0,
    .fold = tp_fold_mul};
static const FzOpDef tp_neg_def = {
    .name = "tp.neg", .traits = FZ_TRAIT_PURE, .numOperands = 1,
    .numResults = 1, .numRegions = 0,
    .getCanonicalizationPatterns = tp_neg_patterns};
static const FzOpDef tp_spin_def = {
    .name = "tp.spin", .traits = FZ_TRAIT_PURE, .numOperands = 0,
    .numResults = 1, .numRegions = 0,
    .getCanonicalizationPatterns = tp_spin_patterns};
static const FzOpDef tp_ping_def = {
    .name = "tp.ping", .traits = FZ_TRAIT_PURE, .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC, .numRegions = 0,
    .getCanonicalizationPatterns = tp_pingpong_patterns};
static const FzOpDef tp_pong_def = {
    .name = "tp.pong", .traits = FZ_TRAIT_PURE, .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC, .numRegions = 0};
static const FzOpDef tp_effect_def = {
    .name = "tp.effect", .traits = 0, .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC, .numRegions = 0};
static const FzOpDef tp_wrap_def = {
    .name = "tp.wrap", .traits = FZ_TRAIT_PURE | FZ_TRAIT_SINGLE_BLOCK,
    .numOperands = FZ_VARIADIC, .numResults = FZ_VARIADIC, .numRegions = 1};
static const FzOpDef tp_iso_def = {
    .name = "tp.iso",
    .traits = FZ_TRAIT_ISOLATED_FROM_ABOVE,
    .numOperands = 0, .numResults = FZ_VARIADIC, .numRegions = 1};
static const FzOpDef tp_yield_def = {
    .name = "tp.yield",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE,
    .numOperands = FZ_VARIADIC, .numResults = 0, .numRegions = 0};

static const FzOpDef *const tp_ops[] = {
    &tp_const_def, &tp_add_def,   &tp_mul_def,    &tp_neg_def,
    &tp_spin_def,  &tp_ping_def,  &tp_pong_def,   &tp_effect_def,
    &tp_wrap_def,  &tp_iso_def,   &tp_yield_def,
};

static const FzDialectDef tp_dialect = {
    .name = "tp",
    .summary = "pass-infrastructure test ops",
    .ops = tp_ops,
    .numOps = sizeof tp_ops / sizeof tp_ops[0],
    .materializeConstant = tp_materialize,
};

/* A context with the built-in dialects, tp, and the built-in passes. */
static inline FzContext *tp_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzContextRegisterDialect(ctx, &tp_dialect));
  ck_assert(fzRegisterAllPasses(ctx));
  return ctx;
}

/* Parses text (which must be valid) into a module. */
static inline FzOp *tp_parse(FzContext *ctx, const char *text) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(text),
                          FZ_STR("test.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

/* The op printed generically (caller frees). */
static inline char *tp_print(FzOp *op) {
  TextBuf b = {0};
  fzOpPrint(op, FZ_PRINT_GENERIC, text_cb, &b);
  return b.data ? b.data : calloc(1, 1);
}

/* Number of ops named `name` under op. */
typedef struct TpCount {
  FzIdent *name;
  size_t n;
} TpCount;

static inline FzWalkResult tp_count_fn(FzOp *op, void *ud) {
  TpCount *c = ud;
  if (!c->name || fzOpGetName(op) == c->name)
    c->n++;
  return FZ_WALK_ADVANCE;
}

static inline size_t tp_count(FzOp *root, const char *name) {
  TpCount c = {name ? fzIdentGet(fzOpGetContext(root),
                                 fzStringRefFromCString(name))
                    : NULL,
               0};
  (void)fzOpWalk(root, FZ_WALK_PRE_ORDER, tp_count_fn, &c);
  return c.n;
}

/* The first func.func in module. */
static inline FzOp *tp_first_func(FzOp *module) {
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  return fzBlockGetFirstOp(b);
}

#endif /* FZ_TEST_PASS_DIALECT_H */
