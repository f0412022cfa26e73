/* tests/unit/test_verifier.c - Check suite for fzOpVerify on IR built
 * through the API: dominance within a block, across nested regions and
 * across blocks; isolation from above; terminators; op counts; the
 * func dialect's rules (func.func signatures, func.return operands,
 * func.call callees); nesting limits; and that every error is reported,
 * at the offending op's location.
 */
#include "test_helpers.h"

#include "ir/internal.h" /* to corrupt use lists on purpose */

typedef struct V {
  FzContext *ctx;
  FzOp *module;
  FzBlock *body;
  FzType *f32, *i32;
  DiagLog log;
} V;

static void v_init(V *v) {
  v->ctx = new_context();
  v->module = make_module(v->ctx);
  ck_assert_ptr_nonnull(v->module);
  v->body = fzRegionGetFirstBlock(fzOpGetRegion(v->module, 0));
  v->f32 = fzF32TypeGet(v->ctx);
  v->i32 = fzIntegerTypeGet(v->ctx, 32);
  diag_log_begin(&v->log, v->ctx);
}

static void v_fini(V *v) {
  diag_log_end(&v->log);
  fzOpDestroy(v->module);
  fzContextDestroy(v->ctx);
}

/* Verifies the module; returns whether it passed. On pass, no errors
 * may have been reported; on failure, at least one. */
static bool v_run(V *v) {
  diag_log_clear(&v->log);
  bool ok = fzOpVerify(v->module);
  if (ok)
    ck_assert_uint_eq(v->log.numErrors, 0);
  else
    ck_assert_uint_gt(v->log.numErrors, 0);
  return ok;
}

#define ck_assert_verifies(v)                                              \
  do {                                                                     \
    bool ok_ = v_run(v);                                                   \
    if (!ok_)                                                              \
      diag_log_dump(&(v)->log);                                            \
    ck_assert_msg(ok_, "verification failed unexpectedly");                \
  } while (0)

#define ck_assert_fails_with(v, needle)                                    \
  do {                                                                     \
    ck_assert_msg(!v_run(v), "verification passed unexpectedly");          \
    ck_assert_diag(&(v)->log, needle);                                     \
  } while (0)

static FzLoc *L(V *v, unsigned line) { return loc_at(v->ctx, line, 5); }

/* %r = "name"(operands) : f32 in block. */
static FzValue *def(V *v, FzBlock *b, const char *name, unsigned line,
                    size_t n, FzValue *const *operands) {
  FzOp *op = add_op(b, name, L(v, line), n, operands, 1, &v->f32, 0);
  ck_assert_ptr_nonnull(op);
  return fzOpGetResult(op, 0);
}

static FzOp *use(V *v, FzBlock *b, const char *name, unsigned line,
                 size_t n, FzValue *const *operands) {
  FzOp *op = add_op(b, name, L(v, line), n, operands, 0, NULL, 0);
  ck_assert_ptr_nonnull(op);
  return op;
}

static FzOp *ret(V *v, FzBlock *b, unsigned line, size_t n,
                 FzValue *const *operands) {
  return use(v, b, "func.return", line, n, operands);
}

/* An unregistered op with one region holding one block; the block is
 * returned through *inner. */
static FzOp *wrap(V *v, FzBlock *b, unsigned line, FzBlock **inner) {
  FzOp *w = add_op(b, "test.wrap", L(v, line), 0, NULL, 0, NULL, 1);
  ck_assert_ptr_nonnull(w);
  *inner = add_block(w, 0, 0, NULL);
  return w;
}

/* A func.func @name() -> () with its entry block. */
static FzBlock *func0(V *v, const char *name) {
  FzBlock *entry = NULL;
  ck_assert_ptr_nonnull(add_func(v->body, name, 0, NULL, 0, NULL, &entry));
  return entry;
}

/*===--- Corrupt use lists --------------------------------------------===*/

/* The verifier checks use lists link by link (ir/verifier.c): each kind of
 * broken link below is reported, and the IR verifies again once the link
 * is restored. x has the uses u0 (by s1) and u1 (by s2), y the use w. */
START_TEST(test_corrupt_use_lists) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzValue *x = def(&v, e, "test.x", 2, 0, NULL);
  FzValue *y = def(&v, e, "test.y", 3, 0, NULL);
  FzOp *s1 = use(&v, e, "test.s1", 4, 1, &x);
  FzOp *s2 = use(&v, e, "test.s2", 5, 1, &x);
  FzOp *s3 = use(&v, e, "test.s3", 6, 1, &y);
  ret(&v, e, 7, 0, NULL);
  ck_assert_verifies(&v);
  FzOpOperand *u1 = &s1->operands[0], *u2 = &s2->operands[0];
  FzOpOperand *w = &s3->operands[0];
  ck_assert_ptr_eq(x->firstUse->nextUse, x->firstUse == u1 ? u2 : u1);

  /* A value whose list starts with another value's use. */
  FzOpOperand *saved = x->firstUse;
  x->firstUse = w;
  ck_assert_fails_with(&v, "result #0 has a corrupt use list");
  x->firstUse = saved;
  ck_assert_verifies(&v);

  /* A use whose back link points at the wrong place. */
  FzOpOperand **savedPrev = u2->prevUse;
  u2->prevUse = &y->firstUse;
  ck_assert_fails_with(&v, "operand #0 has a corrupt use list");
  u2->prevUse = savedPrev;
  ck_assert_verifies(&v);

  /* A use spliced into another value's list (its operand still names
   * x): y's list now runs w -> (x's second use). */
  FzOpOperand *second = x->firstUse->nextUse;
  FzOpOperand **secondPrev = second->prevUse;
  x->firstUse->nextUse = NULL;
  w->nextUse = second;
  second->prevUse = &w->nextUse;
  ck_assert_fails_with(&v, "operand #0 has a corrupt use list");
  w->nextUse = NULL;
  second->prevUse = secondPrev;
  x->firstUse->nextUse = second;
  ck_assert_verifies(&v);

  /* A forward link whose target does not link back. */
  x->firstUse->nextUse = w;
  ck_assert_fails_with(&v, "operand #0 has a corrupt use list");
  x->firstUse->nextUse = second;
  ck_assert_verifies(&v);
  v_fini(&v);
}
END_TEST

/*===--- Valid IR -------------------------------------------------------===*/

START_TEST(test_valid_function) {
  V v;
  v_init(&v);
  FzType *ins[] = {v.f32, v.i32};
  FzBlock *e = NULL;
  FzOp *fn = add_func(v.body, "main", 2, ins, 1, &v.f32, &e);
  FzValue *a = fzBlockGetArgument(e, 0);
  FzValue *x = def(&v, e, "test.x", 2, 1, &a);
  FzBlock *inner;
  wrap(&v, e, 3, &inner);
  /* Outer values flow into nested regions. */
  FzValue *y = def(&v, inner, "test.y", 4, 2, (FzValue *[]){x, a});
  use(&v, inner, "test.sink", 5, 1, &y);
  ret(&v, e, 6, 1, &x);
  ck_assert_verifies(&v);
  ck_assert(fzOpVerify(fn)); /* any op can be verified on its own */
  /* A graph region (the module body) allows any order. */
  FzValue *late = NULL;
  FzOp *early = use(&v, v.body, "test.early", 7, 0, NULL);
  late = def(&v, v.body, "test.late", 8, 0, NULL);
  ck_assert(fzOpSetOperands(early, 1, &late));
  ck_assert_verifies(&v);
  /* So does the region of an unregistered op. */
  FzValue *after = def(&v, inner, "test.after", 9, 0, NULL);
  FzOp *sink2 = use(&v, inner, "test.sink2", 10, 0, NULL);
  fzOpMoveBefore(sink2, fzBlockGetFirstOp(inner));
  ck_assert(fzOpSetOperands(sink2, 1, &after));
  ck_assert_verifies(&v);
  v_fini(&v);
}
END_TEST

/*===--- Dominance ------------------------------------------------------===*/

START_TEST(test_dominance_in_block) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzOp *user = use(&v, e, "test.user", 2, 0, NULL);
  FzValue *d = def(&v, e, "test.def", 3, 0, NULL);
  ret(&v, e, 4, 0, NULL);
  ck_assert(fzOpSetOperands(user, 1, &d));
  ck_assert_fails_with(&v, "operand #0 does not dominate this use");
  const DiagRecord *r = diag_log_find(&v.log, "does not dominate");
  ck_assert_str_eq(r->message, "'test.user' op operand #0 does not dominate "
                               "this use");
  ck_assert_uint_eq(r->line, 2);
  ck_assert_uint_eq(r->col, 5);
  ck_assert_uint_eq(r->numNotes, 1);
  ck_assert_str_eq(r->note, "operand defined here");
  ck_assert_uint_eq(r->noteLine, 3);

  /* Fixing the order fixes the error. */
  fzOpMoveAfter(user, fzValueGetDefiningOp(d));
  ck_assert_verifies(&v);

  /* An op using its own result. */
  FzOp *self = add_op(e, "test.self", L(&v, 5), 0, NULL, 1, &v.f32, 0);
  fzOpMoveBefore(self, fzBlockGetLastOp(e));
  FzValue *sr = fzOpGetResult(self, 0);
  ck_assert(fzOpSetOperands(self, 1, &sr));
  ck_assert_fails_with(&v, "'test.self' op operand #0 does not dominate");
  v_fini(&v);
}
END_TEST

START_TEST(test_dominance_across_regions) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzBlock *inner;
  wrap(&v, e, 2, &inner);
  /* Defined after the region op, used inside it. */
  FzOp *u = use(&v, inner, "test.inside", 3, 0, NULL);
  FzValue *later = def(&v, e, "test.later", 4, 0, NULL);
  FzOp *r = ret(&v, e, 5, 0, NULL);
  ck_assert(fzOpSetOperands(u, 1, &later));
  ck_assert_fails_with(&v, "'test.inside' op operand #0 does not dominate "
                           "this use");
  /* Moved before the region op: fine. */
  fzOpMoveBefore(fzValueGetDefiningOp(later), fzBlockGetFirstOp(e));
  ck_assert_verifies(&v);
  /* Deeper nesting: two levels in. */
  FzBlock *inner2;
  FzOp *w2 = wrap(&v, inner, 6, &inner2);
  FzOp *deepUse = use(&v, inner2, "test.deep", 7, 1, &later);
  ck_assert_verifies(&v);
  FzValue *late2 = def(&v, e, "test.late2", 8, 0, NULL);
  fzOpMoveBefore(fzValueGetDefiningOp(late2), r);
  ck_assert(fzOpSetOperands(deepUse, 1, &late2));
  ck_assert_fails_with(&v, "'test.deep' op operand #0 does not dominate");
  fzOpSetOperand(deepUse, 0, later);
  ck_assert_verifies(&v);
  (void)w2;
  v_fini(&v);
}
END_TEST

START_TEST(test_dominance_escaping_region) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzBlock *inner, *inner2;
  wrap(&v, e, 2, &inner);
  FzValue *hidden = def(&v, inner, "test.hidden", 3, 0, NULL);
  /* Used after the region op, outside it. */
  FzOp *outside = use(&v, e, "test.outside", 4, 1, &hidden);
  FzOp *r = ret(&v, e, 5, 0, NULL);
  ck_assert(!v_run(&v));
  /* The value is defined deeper than its use, not outside an isolated
   * region: a dominance error, as in MLIR (regression: it used to be
   * reported as an isolation violation). */
  ck_assert_uint_ge(v.log.numErrors, 1);
  ck_assert_str_eq(v.log.rec[0].message,
                   "'test.outside' op operand #0 does not dominate this use");
  ck_assert_uint_eq(v.log.rec[0].line, 4);
  fzOpErase(outside);
  ck_assert_verifies(&v);
  /* A sibling region cannot see it either. */
  FzOp *w2 = wrap(&v, e, 6, &inner2);
  fzOpMoveAfter(r, w2); /* the return stays last */
  use(&v, inner2, "test.sibling", 7, 1, &hidden);
  ck_assert(!v_run(&v));
  ck_assert_str_eq(v.log.rec[0].message,
                   "'test.sibling' op operand #0 does not dominate this use");
  v_fini(&v);
}
END_TEST

START_TEST(test_dominance_across_blocks) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzOp *fn = fzBlockGetParentOp(e);
  FzValue *top = def(&v, e, "test.top", 2, 0, NULL);
  ret(&v, e, 3, 0, NULL);
  FzBlock *b1 = add_block(fn, 0, 1, &v.f32);
  FzBlock *b2 = add_block(fn, 0, 0, NULL);
  FzValue *arg1 = fzBlockGetArgument(b1, 0);
  /* The entry block dominates the others. */
  use(&v, b1, "test.use_top", 4, 1, &top);
  FzValue *mid = def(&v, b1, "test.mid", 5, 1, &arg1);
  ret(&v, b1, 6, 0, NULL);
  ck_assert(fzValueGetParentBlock(mid) == b1);
  FzOp *bad = use(&v, b2, "test.use_arg", 7, 0, NULL);
  ret(&v, b2, 8, 0, NULL);
  ck_assert_verifies(&v);
  /* Sibling blocks do not dominate each other (no CFG). */
  ck_assert(fzOpSetOperands(bad, 1, &arg1));
  ck_assert_fails_with(&v, "'test.use_arg' op operand #0 does not dominate");
  ck_assert(fzOpSetOperands(bad, 1, &mid));
  ck_assert_fails_with(&v, "'test.use_arg' op operand #0 does not dominate");
  ck_assert(fzOpSetOperands(bad, 1, &top));
  ck_assert_verifies(&v);
  v_fini(&v);
}
END_TEST

START_TEST(test_isolated_from_above) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "outer");
  FzValue *x = def(&v, e, "test.x", 2, 0, NULL);
  FzBlock *inner;
  wrap(&v, e, 3, &inner);
  ret(&v, e, 9, 0, NULL);
  /* A function nested in the region cannot see %x. */
  FzBlock *ie = NULL;
  FzOp *innerFn = add_func(inner, "inner", 0, NULL, 0, NULL, &ie);
  fzOpSetLoc(innerFn, L(&v, 4));
  FzOp *u = use(&v, ie, "test.capture", 5, 1, &x);
  ret(&v, ie, 6, 0, NULL);
  ck_assert_fails_with(&v, "'test.capture' op using value defined outside "
                           "the region");
  const DiagRecord *r = diag_log_find(&v.log, "outside the region");
  ck_assert_uint_eq(r->line, 5);
  ck_assert_str_eq(r->note, "required by region isolation constraints");
  ck_assert_uint_eq(r->noteLine, 4);
  /* Values defined inside the isolated function are fine, at any depth. */
  fzOpErase(u);
  FzValue *own = def(&v, ie, "test.own", 5, 0, NULL);
  fzOpMoveBefore(fzValueGetDefiningOp(own), fzBlockGetFirstOp(ie));
  FzBlock *deeper;
  FzOp *w = wrap(&v, ie, 6, &deeper);
  fzOpMoveAfter(w, fzValueGetDefiningOp(own));
  use(&v, deeper, "test.deep", 7, 1, &own);
  ck_assert_verifies(&v);
  /* Capturing from two levels out through a non-isolated op fails too. */
  use(&v, deeper, "test.deep_capture", 8, 1, &x);
  ck_assert_fails_with(&v, "'test.deep_capture' op using value defined "
                           "outside the region");
  v_fini(&v);
}
END_TEST

START_TEST(test_erased_definition) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "f");
  FzValue *d = def(&v, e, "test.def", 2, 0, NULL);
  use(&v, e, "test.user", 3, 1, &d);
  ret(&v, e, 4, 0, NULL);
  ck_assert_verifies(&v);
  /* Erasing a definition that still has uses leaves a null operand. */
  fzOpErase(fzValueGetDefiningOp(d));
  ck_assert_fails_with(&v, "'test.user' op operand #0 is null");
  v_fini(&v);
}
END_TEST

/*===--- Terminators and structure --------------------------------------===*/

START_TEST(test_terminators) {
  V v;
  v_init(&v);
  /* An empty function body. */
  FzBlock *e = func0(&v, "empty");
  ck_assert_fails_with(&v, "empty block: expect at least a terminator");
  ret(&v, e, 2, 0, NULL);
  ck_assert_verifies(&v);
  /* A registered non-terminator last. */
  FzBlock *e2 = func0(&v, "noterm");
  FzOp *call = add_op(e2, "func.call", L(&v, 3), 0, NULL, 0, NULL, 0);
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("empty"), 0, NULL)));
  ck_assert_fails_with(&v, "'func.call' op block with no terminator, has "
                           "this op last");
  ck_assert_uint_eq(v.log.numErrors, 1);
  /* A terminator in the middle. */
  ret(&v, e2, 4, 0, NULL);
  ck_assert_verifies(&v);
  FzOp *r = fzBlockGetLastOp(e2);
  fzOpMoveBefore(r, call);
  use(&v, e2, "test.after_return", 5, 0, NULL);
  ck_assert_fails_with(&v, "'func.return' op must be the last operation in "
                           "the parent block");
  /* An unregistered op last is accepted (it may be a terminator). */
  fzOpErase(r);
  ck_assert_verifies(&v);
  v_fini(&v);
}
END_TEST

START_TEST(test_op_counts) {
  V v;
  v_init(&v);
  FzValue *x = def(&v, v.body, "test.x", 1, 0, NULL);
  /* builtin.module takes no operands and one single-block region. */
  FzOp *m = make_op(v.ctx, "builtin.module", L(&v, 2), 1, &x, 0, NULL, 1);
  fzBlockAppendOp(v.body, m);
  add_block(m, 0, 0, NULL);
  ck_assert_fails_with(&v, "'builtin.module' op expected 0 operands, but "
                           "found 1");
  ck_assert(fzOpSetOperands(m, 0, NULL));
  ck_assert_verifies(&v);
  add_block(m, 0, 0, NULL);
  ck_assert_fails_with(&v, "'builtin.module' op expects region #0 to have 0 "
                           "or 1 blocks");
  fzBlockDestroy(fzRegionGetLastBlock(fzOpGetRegion(m, 0)));
  ck_assert_verifies(&v);
  /* func.func with two regions and a result. */
  FzType *ft = fzFunctionTypeGet(v.ctx, 0, NULL, 0, NULL);
  FzOpState st;
  fzOpStateInit(&st, v.ctx, FZ_STR("func.func"), L(&v, 3));
  fzOpStateAddProp(&st, FZ_STR("sym_name"),
                   fzStringAttrGet(v.ctx, FZ_STR("two")));
  fzOpStateAddProp(&st, FZ_STR("function_type"), fzTypeAttrGet(v.ctx, ft));
  fzOpStateAddResults(&st, 1, &v.f32);
  fzOpStateAddRegion(&st);
  fzOpStateAddRegion(&st);
  FzOp *fn = fzOpCreate(&st);
  ck_assert_ptr_nonnull(fn);
  fzBlockAppendOp(v.body, fn);
  ck_assert_fails_with(&v, "'func.func' op expected 0 results, but found 1");
  ck_assert_diag(&v.log, "'func.func' op expected 1 region, but found 2");
  /* The op's own verify hook does not run on a malformed op. */
  ck_assert_ptr_null(diag_log_find(&v.log, "symbol declaration"));
  v_fini(&v);
}
END_TEST

START_TEST(test_nesting_limit) {
  V v;
  v_init(&v);
  FzBlock *e = func0(&v, "deep");
  FzBlock *b = e;
  for (int i = 0; i < 300; ++i)
    wrap(&v, b, 2, &b);
  use(&v, b, "test.leaf", 3, 0, NULL);
  ret(&v, e, 4, 0, NULL);
  ck_assert_fails_with(&v, "nesting too deep (limit 256)");
  fzContextSetMaxNesting(v.ctx, 400);
  ck_assert_verifies(&v);
  fzContextSetMaxNesting(v.ctx, 10);
  ck_assert_fails_with(&v, "nesting too deep (limit 10)");
  v_fini(&v);
}
END_TEST

/*===--- The func dialect -----------------------------------------------===*/

START_TEST(test_func_return) {
  V v;
  v_init(&v);
  FzBlock *e = NULL;
  add_func(v.body, "f", 0, NULL, 0, NULL, &e);
  FzValue *x = def(&v, e, "test.x", 2, 0, NULL);
  FzOp *r = ret(&v, e, 3, 1, &x);
  ck_assert_fails_with(&v, "'func.return' op has 1 operands, but enclosing "
                           "function (@f) returns 0");
  const DiagRecord *rec = diag_log_find(&v.log, "enclosing function");
  ck_assert_uint_eq(rec->line, 3);
  ck_assert(fzOpSetOperands(r, 0, NULL));
  ck_assert_verifies(&v);

  FzBlock *g = NULL;
  FzType *outs[] = {v.f32, v.i32};
  add_func(v.body, "g", 0, NULL, 2, outs, &g);
  FzValue *gx = def(&v, g, "test.x", 5, 0, NULL);
  FzOp *gr = ret(&v, g, 6, 1, &gx);
  ck_assert_fails_with(&v, "'func.return' op has 1 operands, but enclosing "
                           "function (@g) returns 2");
  FzValue *two[] = {gx, gx};
  ck_assert(fzOpSetOperands(gr, 2, two));
  ck_assert_fails_with(&v, "'func.return' op type of return operand 1 "
                           "doesn't match function result type in function "
                           "@g");
  FzOp *ix = add_op(g, "test.i", L(&v, 5), 0, NULL, 1, &v.i32, 0);
  fzOpMoveBefore(ix, gr);
  fzOpSetOperand(gr, 1, fzOpGetResult(ix, 0));
  ck_assert_verifies(&v);

  /* func.return outside a function. */
  FzBlock *inner;
  wrap(&v, v.body, 7, &inner);
  ret(&v, inner, 8, 0, NULL);
  ck_assert_fails_with(&v, "'func.return' op expects parent op 'func.func'");
  v_fini(&v);
}
END_TEST

START_TEST(test_func_signature) {
  V v;
  v_init(&v);
  FzType *ins[] = {v.f32};
  FzBlock *e = NULL;
  FzOp *fn = add_func(v.body, "f", 1, ins, 0, NULL, &e);
  ret(&v, e, 2, 0, NULL);
  ck_assert_verifies(&v);
  fzValueSetType(fzBlockGetArgument(e, 0), v.i32);
  ck_assert_fails_with(&v, "'func.func' op type of entry block argument #0 "
                           "does not match the function signature");
  fzValueSetType(fzBlockGetArgument(e, 0), v.f32);
  fzBlockAddArgument(e, v.f32, NULL);
  ck_assert_fails_with(&v, "'func.func' op entry block must have 1 arguments "
                           "to match function signature");
  fzBlockEraseArgument(e, 1);
  ck_assert_verifies(&v);

  /* Declarations: private is fine, public is not. */
  FzOp *decl = make_op(v.ctx, "func.func", L(&v, 3), 0, NULL, 0, NULL, 1);
  fzBlockAppendOp(v.body, decl);
  ck_assert_fails_with(&v, "'func.func' op requires string attribute "
                           "'sym_name'");
  ck_assert(fzOpSetProp(decl, FZ_STR("sym_name"),
                        fzStringAttrGet(v.ctx, FZ_STR("decl"))));
  ck_assert_fails_with(&v, "'func.func' op requires attribute "
                           "'function_type'");
  ck_assert(fzOpSetProp(decl, FZ_STR("function_type"),
                        fzTypeAttrGet(v.ctx, v.f32)));
  ck_assert_fails_with(&v, "requires attribute 'function_type' holding a "
                           "function type");
  FzType *ft = fzFunctionTypeGet(v.ctx, 1, ins, 1, ins);
  ck_assert(fzOpSetProp(decl, FZ_STR("function_type"),
                        fzTypeAttrGet(v.ctx, ft)));
  ck_assert_fails_with(&v, "'func.func' op symbol declaration cannot have "
                           "public visibility");
  ck_assert(fzOpSetProp(decl, FZ_STR("sym_visibility"),
                        fzStringAttrGet(v.ctx, FZ_STR("private"))));
  ck_assert_verifies(&v);
  ck_assert(fzOpSetProp(decl, FZ_STR("sym_visibility"),
                        fzUnitAttrGet(v.ctx)));
  ck_assert_fails_with(&v, "'sym_visibility' to be a string");
  ck_assert(fzOpSetProp(decl, FZ_STR("sym_visibility"),
                        fzStringAttrGet(v.ctx, FZ_STR("private"))));
  /* arg_attrs must match the inputs. */
  FzAttr *dicts[] = {fzDictAttrGet(v.ctx, 0, NULL, NULL),
                     fzDictAttrGet(v.ctx, 0, NULL, NULL)};
  ck_assert(fzOpSetProp(fn, FZ_STR("arg_attrs"),
                        fzArrayAttrGet(v.ctx, 2, dicts)));
  ck_assert_fails_with(&v, "'func.func' op expects argument attribute "
                           "array to have the same number of elements as "
                           "the number of function arguments, got 2, but "
                           "expected 1");
  ck_assert(fzOpSetProp(fn, FZ_STR("arg_attrs"),
                        fzArrayAttrGet(v.ctx, 1, dicts)));
  ck_assert_verifies(&v);
  v_fini(&v);
}
END_TEST

START_TEST(test_func_call) {
  V v;
  v_init(&v);
  FzType *ins[] = {v.f32, v.i32};
  FzBlock *ce = NULL;
  add_func(v.body, "callee", 2, ins, 1, &v.f32, &ce);
  ret(&v, ce, 2, 1, (FzValue *[]){fzBlockGetArgument(ce, 0)});
  FzBlock *e = NULL;
  add_func(v.body, "caller", 2, ins, 0, NULL, &e);
  FzValue *args[] = {fzBlockGetArgument(e, 0), fzBlockGetArgument(e, 1)};
  FzOp *call = add_op(e, "func.call", L(&v, 4), 2, args, 1, &v.f32, 0);
  ret(&v, e, 5, 0, NULL);

  ck_assert_fails_with(&v, "'func.call' op requires a 'callee' symbol "
                           "reference");
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("nope"), 0, NULL)));
  ck_assert_fails_with(&v, "'func.call' op 'nope' does not reference a valid "
                           "function");
  const DiagRecord *r = diag_log_find(&v.log, "does not reference");
  ck_assert_uint_eq(r->line, 4);
  ck_assert_uint_eq(r->col, 5);
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("callee"), 0, NULL)));
  ck_assert_verifies(&v);
  /* A symbol that is not a function. */
  FzOp *m = make_module(v.ctx);
  ck_assert(fzOpSetProp(m, FZ_STR("sym_name"),
                        fzStringAttrGet(v.ctx, FZ_STR("mod"))));
  fzBlockAppendOp(v.body, m);
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("mod"), 0, NULL)));
  ck_assert_fails_with(&v, "'mod' does not reference a valid function");
  /* A nested reference is not resolved through a function. */
  FzStringRef nested[] = {FZ_STR("x")};
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("callee"), 1,
                                           nested)));
  ck_assert_fails_with(&v, "does not reference a valid function");
  ck_assert(fzOpSetProp(call, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("callee"), 0, NULL)));
  ck_assert_verifies(&v);

  /* Operand and result mismatches. */
  ck_assert(fzOpSetOperands(call, 1, args));
  ck_assert_fails_with(&v, "'func.call' op incorrect number of operands for "
                           "callee");
  FzValue *swapped[] = {args[1], args[0]};
  ck_assert(fzOpSetOperands(call, 2, swapped));
  ck_assert_fails_with(&v, "'func.call' op operand type mismatch for operand "
                           "number 0");
  ck_assert(fzOpSetOperands(call, 2, args));
  ck_assert_verifies(&v);
  fzValueSetType(fzOpGetResult(call, 0), v.i32);
  ck_assert_fails_with(&v, "'func.call' op result type mismatch at index 0");
  fzValueSetType(fzOpGetResult(call, 0), v.f32);
  FzOp *call0 = add_op(e, "func.call", L(&v, 6), 2, args, 0, NULL, 0);
  fzOpMoveBefore(call0, call);
  ck_assert(fzOpSetProp(call0, FZ_STR("callee"),
                        fzSymbolRefAttrGet(v.ctx, FZ_STR("callee"), 0, NULL)));
  ck_assert_fails_with(&v, "'func.call' op incorrect number of results for "
                           "callee");
  v_fini(&v);
}
END_TEST

START_TEST(test_reports_every_error) {
  V v;
  v_init(&v);
  const char *names[] = {"f1", "f2", "f3"};
  for (int i = 0; i < 3; ++i) {
    FzBlock *e = func0(&v, names[i]);
    FzValue *x = def(&v, e, "test.x", (unsigned)(10 * i + 1), 0, NULL);
    ret(&v, e, (unsigned)(10 * i + 2), 1, &x);
  }
  ck_assert(!v_run(&v));
  ck_assert_diag(&v.log, "(@f1) returns 0");
  ck_assert_diag(&v.log, "(@f2) returns 0");
  ck_assert_diag(&v.log, "(@f3) returns 0");
  ck_assert_uint_eq(v.log.numErrors, 3);
  ck_assert_uint_eq(diag_log_find(&v.log, "@f2")->line, 12);
  v_fini(&v);
}
END_TEST

/*===--- Suite ----------------------------------------------------------===*/

static Suite *verifier_suite(void) {
  Suite *s = suite_create("verifier");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_valid_function);
  tcase_add_test(tc, test_dominance_in_block);
  tcase_add_test(tc, test_dominance_across_regions);
  tcase_add_test(tc, test_dominance_escaping_region);
  tcase_add_test(tc, test_dominance_across_blocks);
  tcase_add_test(tc, test_isolated_from_above);
  tcase_add_test(tc, test_erased_definition);
  tcase_add_test(tc, test_terminators);
  tcase_add_test(tc, test_op_counts);
  tcase_add_test(tc, test_nesting_limit);
  tcase_add_test(tc, test_func_return);
  tcase_add_test(tc, test_func_signature);
  tcase_add_test(tc, test_func_call);
  tcase_add_test(tc, test_reports_every_error);
  tcase_add_test(tc, test_corrupt_use_lists);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(verifier_suite()); }
