/* tests/unit/test_ir.c - Check suite for the mutable IR: use lists
 * (link, unlink, replace-all-uses, growing operand lists), the builder's
 * insertion points, moving, cloning with a mapping (regions included),
 * erasing, walking (pre/post order, skip, interrupt, erasing while
 * walking), block arguments, op order queries after many insertions,
 * regions, attributes/properties and symbol tables.
 */
#include "test_helpers.h"

/* Checks that v's use list is exact: every use points back at v from
 * the operand slot its owner has at that index; returns its length. */
static size_t check_uses(FzValue *v) {
  size_t n = 0;
  for (FzOpOperand *u = fzValueGetFirstUse(v); u; u = fzOpOperandGetNextUse(u)) {
    ck_assert_ptr_eq(fzOpOperandGetValue(u), v);
    FzOp *owner = fzOpOperandGetOwner(u);
    size_t i = fzOpOperandGetIndex(u);
    ck_assert_uint_lt(i, fzOpGetNumOperands(owner));
    ck_assert_ptr_eq(fzOpGetOpOperand(owner, i), u);
    ck_assert_ptr_eq(fzOpGetOperand(owner, i), v);
    ++n;
    ck_assert_uint_lt(n, 100000); /* no cycle */
  }
  ck_assert_uint_eq(n, fzValueGetNumUses(v));
  ck_assert(fzValueHasUses(v) == (n > 0));
  ck_assert(fzValueHasOneUse(v) == (n == 1));
  return n;
}

/* Counts the operands of op that are v. */
static size_t count_operand(FzOp *op, FzValue *v) {
  size_t n = 0;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    n += fzOpGetOperand(op, i) == v;
  return n;
}

/* A module with one block, for tests that need a place to put ops. */
typedef struct Fixture {
  FzContext *ctx;
  FzOp *module;
  FzBlock *body;
  FzType *f32, *i32;
} Fixture;

static void fixture_init(Fixture *f) {
  f->ctx = new_context();
  f->module = make_module(f->ctx);
  ck_assert_ptr_nonnull(f->module);
  f->body = fzRegionGetFirstBlock(fzOpGetRegion(f->module, 0));
  f->f32 = fzF32TypeGet(f->ctx);
  f->i32 = fzIntegerTypeGet(f->ctx, 32);
}

static void fixture_fini(Fixture *f) {
  fzOpDestroy(f->module);
  ck_assert(!fzContextHadAllocationFailure(f->ctx));
  fzContextDestroy(f->ctx);
}

static FzValue *def_value(Fixture *f, const char *name) {
  FzOp *op = add_op(f->body, name, NULL, 0, NULL, 1, &f->f32, 0);
  ck_assert_ptr_nonnull(op);
  return fzOpGetResult(op, 0);
}

/*===--- Use lists ------------------------------------------------------===*/

START_TEST(test_use_lists) {
  Fixture f;
  fixture_init(&f);
  FzValue *a = def_value(&f, "test.a");
  FzValue *b = def_value(&f, "test.b");
  ck_assert_uint_eq(check_uses(a), 0);
  FzValue *ops1[] = {a, a, b};
  FzOp *u1 = add_op(f.body, "test.use", NULL, 3, ops1, 0, NULL, 0);
  FzOp *u2 = add_op(f.body, "test.use", NULL, 1, &a, 0, NULL, 0);
  ck_assert_uint_eq(check_uses(a), 3);
  ck_assert_uint_eq(check_uses(b), 1);
  ck_assert_ptr_eq(fzOpOperandGetOwner(fzValueGetFirstUse(b)), u1);
  ck_assert_uint_eq(fzOpOperandGetIndex(fzValueGetFirstUse(b)), 2);

  /* Re-pointing one operand moves exactly one use. */
  fzOpSetOperand(u1, 0, b);
  ck_assert_uint_eq(check_uses(a), 2);
  ck_assert_uint_eq(check_uses(b), 2);
  fzOpSetOperand(u1, 0, b); /* same value: nothing changes */
  ck_assert_uint_eq(check_uses(b), 2);
  /* A NULL operand is unlinked from every list. */
  fzOpSetOperand(u1, 1, NULL);
  ck_assert_ptr_null(fzOpGetOperand(u1, 1));
  ck_assert_uint_eq(check_uses(a), 1);
  ck_assert_ptr_eq(fzOpOperandGetOwner(fzValueGetFirstUse(a)), u2);
  fzOpOperandSet(fzOpGetOpOperand(u1, 1), a);
  ck_assert_uint_eq(check_uses(a), 2);
  ck_assert_uint_eq(count_operand(u1, a), 1);

  /* Unlinking from the middle, the head and the tail of a list. */
  FzOp *users[5];
  for (int i = 0; i < 5; ++i)
    users[i] = add_op(f.body, "test.use", NULL, 1, &b, 0, NULL, 0);
  ck_assert_uint_eq(check_uses(b), 7);
  fzOpSetOperand(users[2], 0, a);
  fzOpSetOperand(users[4], 0, a);
  fzOpSetOperand(users[0], 0, a);
  ck_assert_uint_eq(check_uses(b), 4);
  ck_assert_uint_eq(check_uses(a), 5);
  fzOpErase(users[3]);
  ck_assert_uint_eq(check_uses(b), 3);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_replace_all_uses) {
  Fixture f;
  fixture_init(&f);
  FzValue *a = def_value(&f, "test.a");
  FzValue *b = def_value(&f, "test.b");
  FzValue *ops[] = {a, b, a};
  FzOp *u1 = add_op(f.body, "test.use", NULL, 3, ops, 0, NULL, 0);
  /* A use inside a nested region moves too. */
  FzOp *wrap = add_op(f.body, "test.wrap", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *inner = add_block(wrap, 0, 0, NULL);
  FzOp *u2 = add_op(inner, "test.use", NULL, 1, &a, 0, NULL, 0);
  ck_assert_uint_eq(check_uses(a), 3);

  fzValueReplaceAllUsesWith(a, b);
  ck_assert_uint_eq(check_uses(a), 0);
  ck_assert_uint_eq(check_uses(b), 4);
  ck_assert_uint_eq(count_operand(u1, b), 3);
  ck_assert_ptr_eq(fzOpGetOperand(u2, 0), b);
  fzValueReplaceAllUsesWith(b, b); /* no-op */
  ck_assert_uint_eq(check_uses(b), 4);
  /* And back, to a block argument. */
  FzValue *arg = fzBlockAddArgument(inner, f.f32, NULL);
  fzValueReplaceAllUsesWith(b, arg);
  ck_assert_uint_eq(check_uses(arg), 4);
  ck_assert_uint_eq(check_uses(b), 0);
  fzValueReplaceAllUsesWith(arg, a);
  ck_assert_uint_eq(check_uses(a), 4);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_set_operands_growing) {
  Fixture f;
  fixture_init(&f);
  FzValue *v[40];
  for (int i = 0; i < 40; ++i)
    v[i] = def_value(&f, "test.def");
  FzOp *user = add_op(f.body, "test.use", NULL, 1, v, 0, NULL, 0);
  ck_assert_uint_eq(check_uses(v[0]), 1);

  /* Grow past the inline storage, grow again, shrink, empty. */
  size_t sizes[] = {10, 30, 40, 2, 0, 5, 40};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    size_t n = sizes[k];
    FzValue *vals[40];
    for (size_t i = 0; i < n; ++i)
      vals[i] = v[(i * 7 + k) % 40];
    ck_assert(fzOpSetOperands(user, n, vals));
    ck_assert_uint_eq(fzOpGetNumOperands(user), n);
    for (size_t i = 0; i < n; ++i) {
      ck_assert_ptr_eq(fzOpGetOperand(user, i), vals[i]);
      ck_assert_uint_eq(fzOpOperandGetIndex(fzOpGetOpOperand(user, i)), i);
    }
    size_t total = 0;
    for (int i = 0; i < 40; ++i) {
      size_t uses = check_uses(v[i]);
      ck_assert_uint_eq(uses, count_operand(user, v[i]));
      total += uses;
    }
    ck_assert_uint_eq(total, n);
  }
  /* Operands may repeat and be NULL. */
  FzValue *rep[] = {v[1], NULL, v[1], v[1]};
  ck_assert(fzOpSetOperands(user, 4, rep));
  ck_assert_uint_eq(check_uses(v[1]), 3);
  ck_assert_ptr_null(fzOpGetOperand(user, 1));
  fixture_fini(&f);
}
END_TEST

/*===--- Builder and moves ----------------------------------------------===*/

static FzOp *build(FzBuilder *b, const char *name) {
  FzOpState st;
  fzOpStateInit(&st, b->ctx, fzStringRefFromCString(name), NULL);
  return fzBuilderCreate(b, &st);
}

START_TEST(test_builder_insertion_points) {
  Fixture f;
  fixture_init(&f);
  FzBuilder b;
  fzBuilderInit(&b, f.ctx);
  ck_assert_ptr_eq(b.ctx, f.ctx);
  ck_assert_ptr_null(b.block);
  char names[256];

  fzBuilderSetInsertionPointToEnd(&b, f.body);
  FzOp *a = build(&b, "test.a");
  FzOp *bb = build(&b, "test.b");
  fzBuilderSetInsertionPointToStart(&b, f.body);
  build(&b, "test.c");
  fzBuilderSetInsertionPointBefore(&b, bb);
  FzOp *d = build(&b, "test.d");
  build(&b, "test.d2"); /* the point stays before b */
  op_names(f.body, names, sizeof names);
  ck_assert_str_eq(names, "test.c,test.a,test.d,test.d2,test.b");
  fzBuilderSetInsertionPointAfter(&b, a);
  build(&b, "test.e");
  FzOp *e2 = build(&b, "test.e2"); /* still right before d */
  fzBuilderSetInsertionPointAfter(&b, bb);
  build(&b, "test.f"); /* after the last op: at the end */
  op_names(f.body, names, sizeof names);
  ck_assert_str_eq(names,
                   "test.c,test.a,test.e,test.e2,test.d,test.d2,test.b,test.f");
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), 8);
  ck_assert_ptr_eq(fzOpGetPrevInBlock(d), e2);
  ck_assert_ptr_eq(fzOpGetNextInBlock(e2), d);

  /* Start of an empty block. */
  FzOp *w = add_op(f.body, "test.w", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *inner = add_block(w, 0, 0, NULL);
  fzBuilderSetInsertionPointToStart(&b, inner);
  FzOp *x = build(&b, "test.x");
  build(&b, "test.y");
  op_names(inner, names, sizeof names);
  ck_assert_str_eq(names, "test.x,test.y");
  ck_assert_ptr_eq(fzOpGetParentOp(x), w);

  /* Without a block, ops are created detached. */
  fzBuilderInit(&b, f.ctx);
  FzOp *det = build(&b, "test.detached");
  ck_assert_ptr_nonnull(det);
  ck_assert_ptr_null(fzOpGetBlock(det));
  fzBuilderInsert(&b, det); /* no-op */
  ck_assert_ptr_null(fzOpGetBlock(det));
  fzOpDestroy(det);

  /* A failing creation inserts nothing. */
  fzContextSetAllowUnregisteredDialects(f.ctx, false);
  DiagLog log;
  diag_log_begin(&log, f.ctx);
  fzBuilderSetInsertionPointToEnd(&b, f.body);
  size_t before = fzBlockGetNumOps(f.body);
  ck_assert_ptr_null(build(&b, "test.refused"));
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), before);
  ck_assert_diag(&log, "unregistered dialect");
  diag_log_end(&log);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_move_and_remove) {
  Fixture f;
  fixture_init(&f);
  FzOp *ops[4];
  const char *names[] = {"test.0", "test.1", "test.2", "test.3"};
  for (int i = 0; i < 4; ++i)
    ops[i] = add_op(f.body, names[i], NULL, 0, NULL, 0, NULL, 0);
  char s[256];
  fzOpMoveBefore(ops[3], ops[0]);
  op_names(f.body, s, sizeof s);
  ck_assert_str_eq(s, "test.3,test.0,test.1,test.2");
  ck_assert(fzOpIsBeforeInBlock(ops[3], ops[0]));
  fzOpMoveAfter(ops[3], ops[2]);
  op_names(f.body, s, sizeof s);
  ck_assert_str_eq(s, "test.0,test.1,test.2,test.3");
  ck_assert(fzOpIsBeforeInBlock(ops[2], ops[3]));
  fzOpMoveBefore(ops[1], ops[1]); /* onto itself: nothing */
  fzOpMoveAfter(ops[1], ops[1]);
  op_names(f.body, s, sizeof s);
  ck_assert_str_eq(s, "test.0,test.1,test.2,test.3");
  ck_assert_ptr_eq(fzBlockGetFirstOp(f.body), ops[0]);
  ck_assert_ptr_eq(fzBlockGetLastOp(f.body), ops[3]);

  /* Across blocks (into a nested region). */
  FzOp *w = add_op(f.body, "test.w", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *inner = add_block(w, 0, 0, NULL);
  FzOp *anchor = add_op(inner, "test.anchor", NULL, 0, NULL, 0, NULL, 0);
  fzOpMoveBefore(ops[2], anchor);
  ck_assert_ptr_eq(fzOpGetBlock(ops[2]), inner);
  ck_assert_uint_eq(fzBlockGetNumOps(inner), 2);
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), 4);
  ck_assert_ptr_eq(fzOpGetParentOp(ops[2]), w);
  ck_assert(fzOpIsAncestor(w, ops[2]));
  ck_assert(fzOpIsAncestor(f.module, ops[2]));
  ck_assert(!fzOpIsAncestor(ops[2], w));
  ck_assert(fzOpIsAncestor(w, w));

  /* Removing hands the op to the caller; it can be re-inserted. */
  fzOpRemoveFromBlock(ops[1]);
  ck_assert_ptr_null(fzOpGetBlock(ops[1]));
  ck_assert_ptr_null(fzOpGetParentOp(ops[1]));
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), 3);
  fzBlockPrependOp(inner, ops[1]);
  op_names(inner, s, sizeof s);
  ck_assert_str_eq(s, "test.1,test.2,test.anchor");
  fzOpRemoveFromBlock(ops[1]);
  fzOpRemoveFromBlock(ops[1]); /* already detached: nothing */
  /* Moving a detached op. */
  fzOpMoveAfter(ops[1], anchor);
  op_names(inner, s, sizeof s);
  ck_assert_str_eq(s, "test.2,test.anchor,test.1");
  /* Removing the only op of a block empties it. */
  FzOp *w2 = add_op(f.body, "test.w2", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *lone = add_block(w2, 0, 0, NULL);
  FzOp *only = add_op(lone, "test.only", NULL, 0, NULL, 0, NULL, 0);
  fzOpRemoveFromBlock(only);
  ck_assert_ptr_null(fzBlockGetFirstOp(lone));
  ck_assert_ptr_null(fzBlockGetLastOp(lone));
  fzOpDestroy(only);
  fixture_fini(&f);
}
END_TEST

/*===--- Clone ----------------------------------------------------------===*/

START_TEST(test_clone_with_mapping) {
  Fixture f;
  fixture_init(&f);
  FzValue *outer = def_value(&f, "test.outer");
  FzValue *kept = def_value(&f, "test.kept");
  FzValue *replacement = def_value(&f, "test.replacement");

  /* %r:2 = "test.region"(%outer) ({
   *   ^bb0(%x: f32):
   *     %y = "test.inner"(%x, %outer, %kept)
   *     "test.nested"() ({ "test.deep"(%y, %x, %outer) })
   *   ^bb1(%z: i32):
   *     "test.other"(%z, %y)
   * }) {tag = "t"} */
  FzType *two[] = {f.f32, f.i32};
  FzOpState st;
  fzOpStateInit(&st, f.ctx, FZ_STR("test.region"), loc_at(f.ctx, 5, 1));
  fzOpStateAddOperands(&st, 1, &outer);
  fzOpStateAddResults(&st, 2, two);
  fzOpStateAddAttr(&st, FZ_STR("tag"), fzStringAttrGet(f.ctx, FZ_STR("t")));
  fzOpStateAddProp(&st, FZ_STR("p"), fzUnitAttrGet(f.ctx));
  fzOpStateAddRegion(&st);
  fzOpStateAddRegion(&st);
  FzOp *orig = fzOpCreate(&st);
  ck_assert_ptr_nonnull(orig);
  fzBlockAppendOp(f.body, orig);
  FzBlock *b0 = add_block(orig, 0, 1, &f.f32);
  FzBlock *b1 = add_block(orig, 0, 1, &f.i32);
  FzValue *x = fzBlockGetArgument(b0, 0);
  FzValue *innerOps[] = {x, outer, kept};
  FzOp *inner = add_op(b0, "test.inner", NULL, 3, innerOps, 1, &f.f32, 0);
  FzValue *y = fzOpGetResult(inner, 0);
  FzOp *nested = add_op(b0, "test.nested", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *nb = add_block(nested, 0, 0, NULL);
  FzValue *deepOps[] = {y, x, outer};
  add_op(nb, "test.deep", NULL, 3, deepOps, 0, NULL, 0);
  FzValue *otherOps[] = {fzBlockGetArgument(b1, 0), y};
  add_op(b1, "test.other", NULL, 2, otherOps, 0, NULL, 0);
  size_t outerUses = check_uses(outer), keptUses = check_uses(kept);

  FzIRMapping *m = fzIRMappingCreate(f.ctx);
  fzIRMappingMap(m, outer, replacement);
  FzOp *c = fzOpClone(orig, m);
  ck_assert_ptr_nonnull(c);
  ck_assert_ptr_null(fzOpGetBlock(c)); /* detached */
  ck_assert_ptr_ne(c, orig);
  ck_assert_ptr_eq(fzOpGetName(c), fzOpGetName(orig));
  ck_assert_ptr_eq(fzOpGetLoc(c), fzOpGetLoc(orig));
  ck_assert_ptr_eq(fzOpGetAttrDict(c), fzOpGetAttrDict(orig));
  ck_assert_ptr_eq(fzOpGetPropDict(c), fzOpGetPropDict(orig));
  ck_assert_uint_eq(fzOpGetNumRegions(c), 2);
  ck_assert(fzRegionIsEmpty(fzOpGetRegion(c, 1)));
  ck_assert_uint_eq(fzOpGetNumResults(c), 2);
  ck_assert_ptr_eq(fzValueGetType(fzOpGetResult(c, 1)), f.i32);
  /* Outer operands remapped or kept. */
  ck_assert_ptr_eq(fzOpGetOperand(c, 0), replacement);
  /* The mapping records results and block arguments. */
  ck_assert_ptr_eq(fzIRMappingLookup(m, fzOpGetResult(orig, 0)),
                   fzOpGetResult(c, 0));
  ck_assert_ptr_eq(fzIRMappingLookup(m, fzOpGetResult(orig, 1)),
                   fzOpGetResult(c, 1));
  FzRegion *cr = fzOpGetRegion(c, 0);
  ck_assert_uint_eq(fzRegionGetNumBlocks(cr), 2);
  FzBlock *c0 = fzRegionGetFirstBlock(cr);
  FzBlock *c1 = fzBlockGetNext(c0);
  ck_assert_ptr_eq(fzBlockGetParentOp(c0), c);
  FzValue *cx = fzBlockGetArgument(c0, 0);
  ck_assert_ptr_eq(fzIRMappingLookup(m, x), cx);
  ck_assert_ptr_eq(fzValueGetType(fzBlockGetArgument(c1, 0)), f.i32);
  /* Nested ops use the clone's values, never the original's. */
  FzOp *cInner = fzBlockGetFirstOp(c0);
  ck_assert_ptr_eq(fzOpGetOperand(cInner, 0), cx);
  ck_assert_ptr_eq(fzOpGetOperand(cInner, 1), replacement);
  ck_assert_ptr_eq(fzOpGetOperand(cInner, 2), kept);
  FzValue *cy = fzOpGetResult(cInner, 0);
  ck_assert_ptr_ne(cy, y);
  ck_assert_ptr_eq(fzIRMappingLookup(m, y), cy);
  FzOp *cNested = fzOpGetNextInBlock(cInner);
  FzOp *cDeep = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(cNested,
                                                                       0)));
  ck_assert_ptr_eq(fzOpGetOperand(cDeep, 0), cy);
  ck_assert_ptr_eq(fzOpGetOperand(cDeep, 1), cx);
  ck_assert_ptr_eq(fzOpGetOperand(cDeep, 2), replacement);
  FzOp *cOther = fzBlockGetFirstOp(c1);
  ck_assert_ptr_eq(fzOpGetOperand(cOther, 0), fzBlockGetArgument(c1, 0));
  ck_assert_ptr_eq(fzOpGetOperand(cOther, 1), cy);
  /* The original is untouched; use lists account for the clone. */
  ck_assert_uint_eq(check_uses(outer), outerUses);
  ck_assert_uint_eq(check_uses(kept), keptUses + 1);
  ck_assert_uint_eq(check_uses(replacement), 3);
  ck_assert_uint_eq(check_uses(y), 2);
  ck_assert_uint_eq(check_uses(cy), 2);
  ck_assert_ptr_eq(fzOpGetOperand(inner, 0), x);

  /* Clone without a mapping: inner values are still remapped. */
  FzOp *c2 = fzOpClone(orig, NULL);
  ck_assert_ptr_nonnull(c2);
  FzBlock *d0 = fzRegionGetFirstBlock(fzOpGetRegion(c2, 0));
  FzOp *dInner = fzBlockGetFirstOp(d0);
  ck_assert_ptr_eq(fzOpGetOperand(dInner, 0), fzBlockGetArgument(d0, 0));
  ck_assert_ptr_eq(fzOpGetOperand(dInner, 1), outer);
  fzBlockAppendOp(f.body, c2);
  fzBlockAppendOp(f.body, c);
  fzIRMappingDestroy(m);
  ck_assert(fzOpVerify(f.module));
  /* Destroying the original leaves the clones' uses intact. */
  fzOpErase(orig);
  ck_assert_uint_eq(check_uses(kept), 2);
  ck_assert_uint_eq(check_uses(outer), 3);
  fixture_fini(&f);
}
END_TEST

/*===--- Erase ----------------------------------------------------------===*/

START_TEST(test_erase) {
  Fixture f;
  fixture_init(&f);
  FzValue *a = def_value(&f, "test.a");
  FzOp *w = add_op(f.body, "test.w", NULL, 1, &a, 1, &f.f32, 1);
  FzBlock *inner = add_block(w, 0, 1, &f.f32);
  FzValue *arg = fzBlockGetArgument(inner, 0);
  /* Values defined and used inside w, in both orders. */
  FzOp *i1 = add_op(inner, "test.i1", NULL, 1, &a, 1, &f.f32, 0);
  FzValue *i1r = fzOpGetResult(i1, 0);
  FzValue *i2ops[] = {i1r, arg, a};
  FzOp *i2 = add_op(inner, "test.i2", NULL, 3, i2ops, 1, &f.f32, 0);
  fzOpSetOperand(i1, 0, fzOpGetResult(i2, 0)); /* a cycle, as graph regions allow */
  ck_assert_uint_eq(check_uses(a), 2);
  FzValue *wr = fzOpGetResult(w, 0);
  FzOp *later = add_op(f.body, "test.later", NULL, 1, &wr, 0, NULL, 0);

  fzOpErase(later);
  ck_assert_uint_eq(check_uses(wr), 0);
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), 2);
  fzOpErase(w);
  ck_assert_uint_eq(check_uses(a), 0);
  ck_assert_uint_eq(fzBlockGetNumOps(f.body), 1);
  ck_assert_ptr_eq(fzBlockGetLastOp(f.body), fzValueGetDefiningOp(a));

  /* Detached ops and blocks are destroyed by their owner. */
  FzOp *det = make_op(f.ctx, "test.det", NULL, 1, &a, 0, NULL, 1);
  ck_assert_uint_eq(check_uses(a), 1);
  add_block(det, 0, 2, (FzType *[]){f.f32, f.i32});
  fzOpDestroy(det);
  ck_assert_uint_eq(check_uses(a), 0);
  fzOpDestroy(NULL);
  FzBlock *blk = fzBlockCreate(f.ctx, 1, &f.f32, NULL);
  add_op(blk, "test.in_block", NULL, 1, &a, 0, NULL, 0);
  ck_assert_uint_eq(check_uses(a), 1);
  fzBlockDestroy(blk);
  ck_assert_uint_eq(check_uses(a), 0);
  fixture_fini(&f);
}
END_TEST

/*===--- Walk -----------------------------------------------------------===*/

typedef struct WalkLog {
  char seq[512];
  const char *skipAt, *interruptAt, *eraseName;
  size_t visits;
} WalkLog;

static FzWalkResult log_walk(FzOp *op, void *ud) {
  WalkLog *w = ud;
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  /* Record the part after the dialect ("test.a1" -> "a1"). */
  const char *dot = memchr(n.data, '.', n.length);
  const char *s = dot ? dot + 1 : n.data;
  size_t len = n.length - (size_t)(s - n.data);
  size_t cur = strlen(w->seq);
  snprintf(w->seq + cur, sizeof w->seq - cur, "%s%.*s", cur ? "," : "",
           (int)len, s);
  w->visits++;
  if (w->interruptAt && fzStringRefEqual(n, fzStringRefFromCString(
                                                w->interruptAt)))
    return FZ_WALK_INTERRUPT;
  if (w->skipAt && fzStringRefEqual(n, fzStringRefFromCString(w->skipAt)))
    return FZ_WALK_SKIP;
  if (w->eraseName && fzStringRefEqual(n, fzStringRefFromCString(
                                              w->eraseName))) {
    if (fzOpGetBlock(op))
      fzOpErase(op);
  }
  return FZ_WALK_ADVANCE;
}

/* module { a { a1; a2 { a21 } ; ^bb: a3 }; b } */
static void build_walk_tree(Fixture *f) {
  FzOp *a = add_op(f->body, "test.a", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *ab = add_block(a, 0, 0, NULL);
  add_op(ab, "test.a1", NULL, 0, NULL, 0, NULL, 0);
  FzOp *a2 = add_op(ab, "test.a2", NULL, 0, NULL, 0, NULL, 1);
  add_op(add_block(a2, 0, 0, NULL), "test.a21", NULL, 0, NULL, 0, NULL, 0);
  add_op(add_block(a, 0, 0, NULL), "test.a3", NULL, 0, NULL, 0, NULL, 0);
  add_op(f->body, "test.b", NULL, 0, NULL, 0, NULL, 0);
}

START_TEST(test_walk_orders) {
  Fixture f;
  fixture_init(&f);
  build_walk_tree(&f);
  WalkLog w;
  memset(&w, 0, sizeof w);
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_PRE_ORDER, log_walk, &w),
                   FZ_WALK_ADVANCE);
  ck_assert_str_eq(w.seq, "module,a,a1,a2,a21,a3,b");
  memset(&w, 0, sizeof w);
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_POST_ORDER, log_walk, &w),
                   FZ_WALK_ADVANCE);
  ck_assert_str_eq(w.seq, "a1,a21,a2,a3,a,b,module");

  /* SKIP in pre-order: the op is visited, its regions are not. */
  memset(&w, 0, sizeof w);
  w.skipAt = "test.a";
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_PRE_ORDER, log_walk, &w),
                   FZ_WALK_ADVANCE);
  ck_assert_str_eq(w.seq, "module,a,b");
  memset(&w, 0, sizeof w);
  w.skipAt = "test.a2";
  fzOpWalk(f.module, FZ_WALK_PRE_ORDER, log_walk, &w);
  ck_assert_str_eq(w.seq, "module,a,a1,a2,a3,b");

  /* INTERRUPT stops everything, in both orders. */
  memset(&w, 0, sizeof w);
  w.interruptAt = "test.a2";
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_PRE_ORDER, log_walk, &w),
                   FZ_WALK_INTERRUPT);
  ck_assert_str_eq(w.seq, "module,a,a1,a2");
  memset(&w, 0, sizeof w);
  w.interruptAt = "test.a21";
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_POST_ORDER, log_walk, &w),
                   FZ_WALK_INTERRUPT);
  ck_assert_str_eq(w.seq, "a1,a21");
  /* Walking a leaf visits just it. */
  memset(&w, 0, sizeof w);
  fzOpWalk(fzBlockGetLastOp(f.body), FZ_WALK_PRE_ORDER, log_walk, &w);
  ck_assert_str_eq(w.seq, "b");
  fixture_fini(&f);
}
END_TEST

START_TEST(test_walk_post_order_erase) {
  Fixture f;
  fixture_init(&f);
  /* Dead ops everywhere: first, last, consecutive, nested, and a dead op
   * whose region holds more dead ops. */
  FzBlock *body = f.body;
  add_op(body, "test.dead", NULL, 0, NULL, 0, NULL, 0);
  add_op(body, "test.live", NULL, 0, NULL, 0, NULL, 0);
  add_op(body, "test.dead", NULL, 0, NULL, 0, NULL, 0);
  add_op(body, "test.dead", NULL, 0, NULL, 0, NULL, 0);
  FzOp *w = add_op(body, "test.wrap", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *wb = add_block(w, 0, 0, NULL);
  add_op(wb, "test.dead", NULL, 0, NULL, 0, NULL, 0);
  add_op(wb, "test.keep", NULL, 0, NULL, 0, NULL, 0);
  FzOp *dw = add_op(body, "test.dead", NULL, 0, NULL, 0, NULL, 1);
  FzBlock *dwb = add_block(dw, 0, 0, NULL);
  add_op(dwb, "test.dead", NULL, 0, NULL, 0, NULL, 0);
  add_op(dwb, "test.keep", NULL, 0, NULL, 0, NULL, 0);
  add_op(body, "test.dead", NULL, 0, NULL, 0, NULL, 0);

  WalkLog log;
  memset(&log, 0, sizeof log);
  log.eraseName = "test.dead";
  ck_assert_int_eq(fzOpWalk(f.module, FZ_WALK_POST_ORDER, log_walk, &log),
                   FZ_WALK_ADVANCE);
  /* Every op was visited exactly once before being erased. */
  ck_assert_str_eq(log.seq, "dead,live,dead,dead,dead,keep,wrap,dead,keep,"
                            "dead,dead,module");
  char names[256];
  op_names(body, names, sizeof names);
  ck_assert_str_eq(names, "test.live,test.wrap");
  op_names(wb, names, sizeof names);
  ck_assert_str_eq(names, "test.keep");
  ck_assert(fzOpVerify(f.module));
  fixture_fini(&f);
}
END_TEST

/*===--- Blocks and regions ---------------------------------------------===*/

START_TEST(test_block_arguments) {
  Fixture f;
  fixture_init(&f);
  FzType *types[] = {f.f32, f.i32, fzIndexTypeGet(f.ctx)};
  FzLoc *locs[] = {loc_at(f.ctx, 1, 1), NULL, loc_at(f.ctx, 1, 3)};
  FzBlock *b = fzBlockCreate(f.ctx, 3, types, locs);
  ck_assert_ptr_nonnull(b);
  ck_assert_uint_eq(fzBlockGetNumArguments(b), 3);
  ck_assert_ptr_eq(fzBlockGetContext(b), f.ctx);
  for (size_t i = 0; i < 3; ++i) {
    FzValue *a = fzBlockGetArgument(b, i);
    ck_assert(fzValueIsBlockArgument(a));
    ck_assert_uint_eq(fzValueGetIndex(a), i);
    ck_assert_ptr_eq(fzValueGetType(a), types[i]);
    ck_assert_ptr_eq(fzValueGetParentBlock(a), b);
    ck_assert_ptr_null(fzValueGetDefiningOp(a));
    ck_assert_ptr_eq(fzValueGetContext(a), f.ctx);
  }
  ck_assert_ptr_eq(fzValueGetLoc(fzBlockGetArgument(b, 0)), locs[0]);
  ck_assert_ptr_eq(fzValueGetLoc(fzBlockGetArgument(b, 1)),
                   fzUnknownLocGet(f.ctx));
  FzValue *a3 = fzBlockAddArgument(b, f.f32, NULL);
  ck_assert_uint_eq(fzValueGetIndex(a3), 3);
  fzValueSetLoc(a3, loc_at(f.ctx, 9, 9));
  ck_assert_ptr_eq(fzValueGetLoc(a3), loc_at(f.ctx, 9, 9));
  /* Many arguments (the array grows). */
  for (int i = 0; i < 50; ++i)
    ck_assert_ptr_nonnull(fzBlockAddArgument(b, f.i32, NULL));
  ck_assert_uint_eq(fzBlockGetNumArguments(b), 54);

  FzValue *keep0 = fzBlockGetArgument(b, 0), *keep2 = fzBlockGetArgument(b, 2);
  fzBlockEraseArgument(b, 1);
  ck_assert_uint_eq(fzBlockGetNumArguments(b), 53);
  ck_assert_ptr_eq(fzBlockGetArgument(b, 0), keep0);
  ck_assert_ptr_eq(fzBlockGetArgument(b, 1), keep2); /* same value object */
  ck_assert_uint_eq(fzValueGetIndex(keep2), 1);
  ck_assert_ptr_eq(fzBlockGetArgument(b, 2), a3);
  ck_assert_uint_eq(fzValueGetIndex(a3), 2);
  fzBlockEraseArgument(b, 52); /* the last */
  fzBlockEraseArgument(b, 0);  /* the first */
  ck_assert_uint_eq(fzBlockGetNumArguments(b), 51);
  ck_assert_ptr_eq(fzBlockGetArgument(b, 0), keep2);
  for (size_t i = 0; i < 51; ++i)
    ck_assert_uint_eq(fzValueGetIndex(fzBlockGetArgument(b, i)), i);

  /* Used arguments keep their uses while others are erased. */
  FzOp *user = add_op(b, "test.use", NULL, 1, &a3, 0, NULL, 0);
  fzBlockEraseArgument(b, 0);
  ck_assert_ptr_eq(fzOpGetOperand(user, 0), a3);
  ck_assert_uint_eq(fzValueGetIndex(a3), 0);
  ck_assert_uint_eq(check_uses(a3), 1);
  fzValueSetType(a3, f.i32);
  ck_assert_ptr_eq(fzValueGetType(a3), f.i32);
  fzBlockDestroy(b);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_regions_and_blocks) {
  Fixture f;
  fixture_init(&f);
  /* Build a body in a standalone region, then hand it to an op. */
  FzRegion *r = fzRegionCreate(f.ctx);
  ck_assert_ptr_nonnull(r);
  ck_assert(fzRegionIsEmpty(r));
  ck_assert_ptr_null(fzRegionGetParentOp(r));
  FzBlock *b1 = fzBlockCreate(f.ctx, 0, NULL, NULL);
  FzBlock *b2 = fzBlockCreate(f.ctx, 1, &f.f32, NULL);
  FzBlock *b0 = fzBlockCreate(f.ctx, 0, NULL, NULL);
  fzRegionAppendBlock(r, b1);
  fzRegionAppendBlock(r, b2);
  fzRegionInsertBlockBefore(r, b1, b0);
  ck_assert_uint_eq(fzRegionGetNumBlocks(r), 3);
  ck_assert_ptr_eq(fzRegionGetFirstBlock(r), b0);
  ck_assert_ptr_eq(fzRegionGetLastBlock(r), b2);
  ck_assert_ptr_eq(fzBlockGetNext(b0), b1);
  ck_assert_ptr_eq(fzBlockGetPrev(b2), b1);
  ck_assert_ptr_eq(fzBlockGetParent(b1), r);
  add_op(b2, "test.in_b2", NULL, 1, (FzValue *[]){fzBlockGetArgument(b2, 0)},
         0, NULL, 0);

  FzOpState st;
  fzOpStateInit(&st, f.ctx, FZ_STR("test.holder"), NULL);
  fzOpStateAddRegion(&st);
  fzOpStateAddRegionTaken(&st, r);
  FzOp *h = fzOpCreate(&st);
  ck_assert_ptr_nonnull(h);
  fzBlockAppendOp(f.body, h);
  FzRegion *hr = fzOpGetRegion(h, 1);
  ck_assert(fzRegionIsEmpty(fzOpGetRegion(h, 0)));
  ck_assert_uint_eq(fzRegionGetNumBlocks(hr), 3);
  ck_assert_ptr_eq(fzRegionGetParentOp(hr), h);
  ck_assert_uint_eq(fzRegionGetIndex(hr), 1);
  ck_assert_ptr_eq(fzRegionGetContext(hr), f.ctx);
  ck_assert_ptr_eq(fzBlockGetParentOp(b2), h);
  FzOp *inB2 = fzBlockGetFirstOp(b2);
  ck_assert_ptr_eq(fzOpGetParentRegion(inB2), hr);

  /* Unlink a block, re-insert it elsewhere; move a whole body. */
  fzBlockRemoveFromRegion(b0);
  ck_assert_ptr_null(fzBlockGetParent(b0));
  ck_assert_uint_eq(fzRegionGetNumBlocks(hr), 2);
  ck_assert_ptr_eq(fzRegionGetFirstBlock(hr), b1);
  fzRegionAppendBlock(fzOpGetRegion(h, 0), b0);
  fzRegionTakeBody(fzOpGetRegion(h, 0), hr);
  ck_assert(fzRegionIsEmpty(hr));
  ck_assert_uint_eq(fzRegionGetNumBlocks(fzOpGetRegion(h, 0)), 3);
  ck_assert_ptr_eq(fzBlockGetParentOp(b2), h);
  ck_assert_ptr_eq(fzRegionGetLastBlock(fzOpGetRegion(h, 0)), b2);

  /* A region that is never attached is destroyed by its owner. */
  FzRegion *lost = fzRegionCreate(f.ctx);
  FzBlock *lb = fzBlockCreate(f.ctx, 1, &f.f32, NULL);
  fzRegionAppendBlock(lost, lb);
  add_op(lb, "test.x", NULL, 1, (FzValue *[]){fzBlockGetArgument(lb, 0)}, 0,
         NULL, 0);
  fzRegionDestroy(lost);
  fzRegionDestroy(NULL);
  /* And a state abandoned with its regions. */
  fzOpStateInit(&st, f.ctx, FZ_STR("test.abandoned"), NULL);
  FzRegion *sr = fzOpStateAddRegion(&st);
  FzBlock *sb = fzBlockCreate(f.ctx, 0, NULL, NULL);
  fzRegionAppendBlock(sr, sb);
  add_op(sb, "test.z", NULL, 0, NULL, 0, NULL, 0);
  fzOpStateDispose(&st);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_terminators_and_traits) {
  Fixture f;
  fixture_init(&f);
  FzBlock *entry = NULL;
  FzOp *fn = add_func(f.body, "f", 0, NULL, 0, NULL, &entry);
  ck_assert_ptr_null(fzBlockGetTerminator(entry)); /* empty */
  FzOp *call = add_op(entry, "func.call", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_null(fzBlockGetTerminator(entry)); /* registered, not one */
  FzOp *ret = add_op(entry, "func.return", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_eq(fzBlockGetTerminator(entry), ret);
  FzOp *unk = add_op(entry, "test.unknown", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_eq(fzBlockGetTerminator(entry), unk); /* might be one */
  fzOpErase(unk);
  ck_assert(fzOpHasTrait(ret, FZ_TRAIT_TERMINATOR));
  ck_assert(fzOpHasTrait(ret, FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE));
  ck_assert(!fzOpHasTrait(ret, FZ_TRAIT_TERMINATOR | FZ_TRAIT_SYMBOL));
  ck_assert(fzOpHasTrait(fn, FZ_TRAIT_ISOLATED_FROM_ABOVE));
  ck_assert(fzOpHasTrait(f.module, FZ_TRAIT_SYMBOL_TABLE));
  ck_assert(!fzOpHasTrait(call, FZ_TRAIT_TERMINATOR));
  ck_assert_ptr_nonnull(fzOpGetDef(call));
  FzOp *u = make_op(f.ctx, "test.u", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_null(fzOpGetDef(u));
  ck_assert(!fzOpHasTrait(u, FZ_TRAIT_PURE));
  fzOpDestroy(u);
  fixture_fini(&f);
}
END_TEST

/*===--- Order queries --------------------------------------------------===*/

/* Checks fzOpIsBeforeInBlock against list positions for many pairs. */
static void check_order(FzBlock *b, unsigned seed) {
  size_t n = fzBlockGetNumOps(b);
  FzOp **ops = malloc(n * sizeof *ops);
  size_t i = 0;
  for (FzOp *o = fzBlockGetFirstOp(b); o; o = fzOpGetNextInBlock(o))
    ops[i++] = o;
  ck_assert_uint_eq(i, n);
  for (size_t k = 0; k + 1 < n; ++k) {
    ck_assert(fzOpIsBeforeInBlock(ops[k], ops[k + 1]));
    ck_assert(!fzOpIsBeforeInBlock(ops[k + 1], ops[k]));
  }
  for (size_t k = 0; k < n; ++k)
    ck_assert(!fzOpIsBeforeInBlock(ops[k], ops[k]));
  unsigned s = seed;
  for (int q = 0; q < 2000 && n > 1; ++q) {
    s = s * 1103515245u + 12345u;
    size_t x = (s >> 8) % n;
    s = s * 1103515245u + 12345u;
    size_t y = (s >> 8) % n;
    ck_assert(fzOpIsBeforeInBlock(ops[x], ops[y]) == (x < y));
  }
  free(ops);
}

START_TEST(test_is_before_after_many_inserts) {
  Fixture f;
  fixture_init(&f);
  FzBlock *b = f.body;
  FzOp *first = add_op(b, "test.first", NULL, 0, NULL, 0, NULL, 0);
  FzOp *last = add_op(b, "test.last", NULL, 0, NULL, 0, NULL, 0);
  ck_assert(fzOpIsBeforeInBlock(first, last));
  /* Always right before `last`: the gap halves until it runs out. */
  for (int i = 0; i < 200; ++i) {
    FzOp *o = make_op(f.ctx, "test.mid", NULL, 0, NULL, 0, NULL, 0);
    fzBlockInsertOpBefore(b, last, o);
    ck_assert(fzOpIsBeforeInBlock(o, last));
    ck_assert(fzOpIsBeforeInBlock(first, o));
  }
  check_order(b, 1);
  /* Always at the front. */
  for (int i = 0; i < 300; ++i) {
    FzOp *o = make_op(f.ctx, "test.front", NULL, 0, NULL, 0, NULL, 0);
    fzBlockPrependOp(b, o);
    ck_assert(fzOpIsBeforeInBlock(o, first));
  }
  check_order(b, 2);
  /* Random positions, with queries interleaved (so the cached order is
   * sometimes valid and sometimes stale when an insertion happens). */
  unsigned s = 7;
  for (int i = 0; i < 1500; ++i) {
    size_t n = fzBlockGetNumOps(b);
    s = s * 1103515245u + 12345u;
    size_t pos = (s >> 8) % (n + 1);
    FzOp *before = fzBlockGetFirstOp(b);
    for (size_t k = 0; k < pos && before; ++k)
      before = fzOpGetNextInBlock(before);
    FzOp *o = make_op(f.ctx, "test.rand", NULL, 0, NULL, 0, NULL, 0);
    fzBlockInsertOpBefore(b, before, o);
    if (before)
      ck_assert(fzOpIsBeforeInBlock(o, before));
    if (fzOpGetPrevInBlock(o))
      ck_assert(fzOpIsBeforeInBlock(fzOpGetPrevInBlock(o), o));
    if (i % 100 == 0)
      check_order(b, (unsigned)i);
  }
  /* Moves and removals keep answers right. */
  for (int i = 0; i < 100; ++i) {
    FzOp *o = fzBlockGetFirstOp(b);
    fzOpMoveAfter(o, fzBlockGetLastOp(b));
    ck_assert(fzOpIsBeforeInBlock(fzBlockGetFirstOp(b), o));
  }
  check_order(b, 99);
  ck_assert_uint_eq(fzBlockGetNumOps(b), 2002);
  fixture_fini(&f);
}
END_TEST

/*===--- Attributes and properties on ops -------------------------------===*/

START_TEST(test_op_attributes) {
  Fixture f;
  fixture_init(&f);
  FzContext *ctx = f.ctx;
  FzType *i64 = fzIntegerTypeGet(ctx, 64);
  FzOp *op = add_op(f.body, "test.op", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_eq(fzOpGetAttrDict(op), fzDictAttrGet(ctx, 0, NULL, NULL));
  ck_assert_uint_eq(fzDictAttrGetSize(fzOpGetPropDict(op)), 0);
  ck_assert(fzOpSetAttr(op, FZ_STR("b"), fzIntegerAttrGet(ctx, i64, 1)));
  ck_assert(fzOpSetAttr(op, FZ_STR("a"), fzUnitAttrGet(ctx)));
  ck_assert_uint_eq(fzDictAttrGetSize(fzOpGetAttrDict(op)), 2);
  ck_assert(fzStringRefEqual(
      fzIdentGetString(fzDictAttrGetEntry(fzOpGetAttrDict(op), 0).name),
      FZ_STR("a")));
  ck_assert(fzOpSetAttr(op, FZ_STR("b"), fzIntegerAttrGet(ctx, i64, 2)));
  ck_assert_int_eq(fzIntegerAttrGetValue(fzOpGetAttr(op, FZ_STR("b"))), 2);
  ck_assert_uint_eq(fzDictAttrGetSize(fzOpGetAttrDict(op)), 2);
  ck_assert(fzOpSetAttr(op, FZ_STR("a"), NULL)); /* removes */
  ck_assert_ptr_null(fzOpGetAttr(op, FZ_STR("a")));
  ck_assert(fzOpSetAttr(op, FZ_STR("zz"), NULL)); /* removing nothing */
  ck_assert_uint_eq(fzDictAttrGetSize(fzOpGetAttrDict(op)), 1);
  /* Equal dictionaries are one attribute. */
  FzOp *op2 = add_op(f.body, "test.op", NULL, 0, NULL, 0, NULL, 0);
  ck_assert(fzOpSetAttr(op2, FZ_STR("b"), fzIntegerAttrGet(ctx, i64, 2)));
  ck_assert_ptr_eq(fzOpGetAttrDict(op), fzOpGetAttrDict(op2));
  fzOpSetAttrDict(op2, NULL);
  ck_assert_uint_eq(fzDictAttrGetSize(fzOpGetAttrDict(op2)), 0);

  /* Properties are a separate dictionary. */
  ck_assert(fzOpSetProp(op, FZ_STR("b"), fzStringAttrGet(ctx, FZ_STR("p"))));
  ck_assert_int_eq(fzAttrGetKind(fzOpGetProp(op, FZ_STR("b"))),
                   FZ_ATTR_STRING);
  ck_assert_int_eq(fzAttrGetKind(fzOpGetAttr(op, FZ_STR("b"))),
                   FZ_ATTR_INTEGER);
  ck_assert_int_eq(fzAttrGetKind(fzOpGetInherentAttr(op, FZ_STR("b"))),
                   FZ_ATTR_STRING);
  fzOpSetPropDict(op, NULL);
  ck_assert_int_eq(fzAttrGetKind(fzOpGetInherentAttr(op, FZ_STR("b"))),
                   FZ_ATTR_INTEGER);
  FzLoc *l = loc_at(ctx, 3, 4);
  fzOpSetLoc(op, l);
  ck_assert_ptr_eq(fzOpGetLoc(op), l);
  fzOpSetLoc(op, NULL);
  ck_assert_ptr_eq(fzOpGetLoc(op), fzUnknownLocGet(ctx));

  /* A registered op's inherent attributes given as discardable ones
   * become properties; an unregistered op keeps them as attributes. */
  FzType *ft = fzFunctionTypeGet(ctx, 0, NULL, 0, NULL);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("func.func"), NULL);
  fzOpStateAddAttr(&st, FZ_STR("sym_name"), fzStringAttrGet(ctx, FZ_STR("g")));
  fzOpStateAddAttr(&st, FZ_STR("function_type"), fzTypeAttrGet(ctx, ft));
  fzOpStateAddAttr(&st, FZ_STR("note"), fzUnitAttrGet(ctx));
  fzOpStateAddRegion(&st);
  FzOp *fn = fzOpCreate(&st);
  ck_assert_ptr_nonnull(fn);
  ck_assert_ptr_nonnull(fzOpGetProp(fn, FZ_STR("sym_name")));
  ck_assert_ptr_nonnull(fzOpGetProp(fn, FZ_STR("function_type")));
  ck_assert_ptr_null(fzOpGetAttr(fn, FZ_STR("sym_name")));
  ck_assert_ptr_nonnull(fzOpGetAttr(fn, FZ_STR("note")));
  ck_assert(fzStringRefEqual(fzSymbolGetName(fn), FZ_STR("g")));
  fzOpDestroy(fn);
  fzOpStateInit(&st, ctx, FZ_STR("test.func"), NULL);
  fzOpStateAddAttr(&st, FZ_STR("sym_name"), fzStringAttrGet(ctx, FZ_STR("g")));
  FzOp *tf = fzOpCreate(&st);
  ck_assert_ptr_nonnull(fzOpGetAttr(tf, FZ_STR("sym_name")));
  ck_assert(fzStringRefEqual(fzSymbolGetName(tf), FZ_STR("g")));
  fzOpDestroy(tf);
  fixture_fini(&f);
}
END_TEST

START_TEST(test_op_create_errors) {
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRegisterAllDialects(ctx));
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzLoc *l = loc_at(ctx, 7, 2);
  /* Unregistered dialect, not allowed. */
  FzOp *op = make_op(ctx, "test.op", l, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_null(op);
  ck_assert_diag_at(&log, "--allow-unregistered-dialect", "test.fuse", 7, 2);
  ck_assert_diag(&log, "'test.op'");
  /* Unknown op of a registered dialect, even when unregistered ones are
   * allowed. */
  fzContextSetAllowUnregisteredDialects(ctx, true);
  diag_log_clear(&log);
  ck_assert_ptr_null(make_op(ctx, "func.nope", l, 0, NULL, 0, NULL, 0));
  ck_assert_diag(&log, "unregistered operation 'func.nope' found in dialect "
                       "'func'");
  /* Duplicate attribute names. */
  diag_log_clear(&log);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("test.dup"), l);
  fzOpStateAddAttr(&st, FZ_STR("x"), fzUnitAttrGet(ctx));
  fzOpStateAddAttr(&st, FZ_STR("x"), fzBoolAttrGet(ctx, true));
  fzOpStateAddRegion(&st); /* the state's region is freed too */
  ck_assert_ptr_null(fzOpCreate(&st));
  ck_assert_diag_at(&log, "duplicate key 'x'", "test.fuse", 7, 2);
  /* A result without a type. */
  diag_log_clear(&log);
  FzType *none = NULL;
  ck_assert_ptr_null(make_op(ctx, "test.untyped", l, 0, NULL, 1, &none, 0));
  ck_assert_diag(&log, "has no type");
  /* An attribute value that failed to build (NULL) fails the creation. */
  diag_log_clear(&log);
  fzOpStateInit(&st, ctx, FZ_STR("test.badattr"), l);
  fzOpStateAddAttr(&st, FZ_STR("x"), NULL);
  /* Reported as what it is, a missing value: not an allocation failure. */
  ck_assert(st.invalid);
  ck_assert(!st.failed);
  ck_assert_diag(&log, "attribute 'x' of 'test.badattr' has no value");
  ck_assert_ptr_null(fzOpCreate(&st));
  ck_assert(!fzContextHadAllocationFailure(ctx));
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/* Regression: in a region where a use may precede its definition, the
 * clone's use must read the clone's value, not the original's. */
START_TEST(test_clone_forward_reference) {
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRegisterAllDialects(ctx));
  fzContextSetAllowUnregisteredDialects(ctx, true);
  const char *text = "\"foo.wrap\"() ({\n"
                     "  \"foo.use\"(%v) : (i32) -> ()\n"
                     "  %v = \"foo.def\"() : () -> i32\n"
                     "}) : () -> ()\n";
  FzOp *module = fzParseSource(ctx, fzStringRefFromCString(text),
                               FZ_STR("fwd.fuse"), 0);
  ck_assert_ptr_nonnull(module);
  FzOp *wrap = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(module, 0)));
  FzOp *copy = fzOpClone(wrap, NULL);
  ck_assert_ptr_nonnull(copy);
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(copy, 0));
  FzOp *use = fzBlockGetFirstOp(b);
  FzOp *defOp = fzOpGetNextInBlock(use);
  ck_assert_ptr_eq(fzOpGetOperand(use, 0), fzOpGetResult(defOp, 0));
  fzOpDestroy(copy);
  fzOpDestroy(module);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Symbols --------------------------------------------------------===*/

START_TEST(test_symbol_tables) {
  Fixture f;
  fixture_init(&f);
  FzBlock *e1 = NULL, *e2 = NULL, *e3 = NULL;
  FzOp *fa = add_func(f.body, "a", 0, NULL, 0, NULL, &e1);
  FzOp *fb = add_func(f.body, "b", 0, NULL, 0, NULL, &e2);
  add_op(f.body, "test.not_a_symbol", NULL, 0, NULL, 0, NULL, 0);
  /* A nested module with its own @a. */
  FzOp *inner = make_module(f.ctx);
  ck_assert(fzOpSetProp(inner, FZ_STR("sym_name"),
                        fzStringAttrGet(f.ctx, FZ_STR("inner"))));
  fzBlockAppendOp(f.body, inner);
  FzBlock *ib = fzRegionGetFirstBlock(fzOpGetRegion(inner, 0));
  FzOp *ia = add_func(ib, "a", 0, NULL, 0, NULL, &e3);
  FzOp *deep = add_op(e3, "test.deep", NULL, 0, NULL, 0, NULL, 0);
  FzOp *shallow = add_op(e1, "test.shallow", NULL, 0, NULL, 0, NULL, 0);

  ck_assert_ptr_eq(fzSymbolTableLookupIn(f.module, FZ_STR("a")), fa);
  ck_assert_ptr_eq(fzSymbolTableLookupIn(f.module, FZ_STR("b")), fb);
  ck_assert_ptr_eq(fzSymbolTableLookupIn(f.module, FZ_STR("inner")), inner);
  ck_assert_ptr_null(fzSymbolTableLookupIn(f.module, FZ_STR("c")));
  ck_assert_ptr_null(fzSymbolTableLookupIn(f.module, FZ_STR("")));
  ck_assert_ptr_eq(fzSymbolTableLookupIn(inner, FZ_STR("a")), ia);
  ck_assert_ptr_null(fzSymbolTableLookupIn(inner, FZ_STR("b")));
  ck_assert_ptr_eq(fzSymbolTableGetNearest(deep), inner);
  ck_assert_ptr_eq(fzSymbolTableGetNearest(shallow), f.module);
  ck_assert_ptr_eq(fzSymbolTableGetNearest(f.module), f.module);
  FzOp *loose = make_op(f.ctx, "test.loose", NULL, 0, NULL, 0, NULL, 0);
  ck_assert_ptr_null(fzSymbolTableGetNearest(loose));
  ck_assert_ptr_null(fzSymbolGetName(loose).data);
  fzOpDestroy(loose);
  ck_assert_ptr_null(fzSymbolTableLookupIn(fa, FZ_STR("x")));

  FzSymbolTable *t = fzSymbolTableCreate(f.module);
  ck_assert_ptr_nonnull(t);
  ck_assert_ptr_eq(fzSymbolTableLookup(t, FZ_STR("a")), fa);
  ck_assert_ptr_eq(fzSymbolTableLookup(t, FZ_STR("b")), fb);
  ck_assert_ptr_eq(fzSymbolTableLookup(t, FZ_STR("inner")), inner);
  ck_assert_ptr_null(fzSymbolTableLookup(t, FZ_STR("nothing")));
  fzSymbolTableDestroy(t);
  fzSymbolTableDestroy(NULL);

  /* Many symbols. */
  for (int i = 0; i < 300; ++i) {
    char name[16];
    snprintf(name, sizeof name, "fn%d", i);
    ck_assert_ptr_nonnull(add_func(ib, name, 0, NULL, 0, NULL, NULL));
  }
  t = fzSymbolTableCreate(inner);
  for (int i = 0; i < 300; ++i) {
    char name[16];
    snprintf(name, sizeof name, "fn%d", i);
    FzOp *s = fzSymbolTableLookup(t, fzStringRefFromCString(name));
    ck_assert_ptr_nonnull(s);
    ck_assert(fzStringRefEqual(fzSymbolGetName(s),
                               fzStringRefFromCString(name)));
    ck_assert_ptr_eq(s, fzSymbolTableLookupIn(inner,
                                              fzStringRefFromCString(name)));
  }
  ck_assert_ptr_eq(fzSymbolTableLookup(t, FZ_STR("a")), ia);
  fzSymbolTableDestroy(t);
  fixture_fini(&f);
}
END_TEST

/*===--- Suite ----------------------------------------------------------===*/

static Suite *ir_suite(void) {
  Suite *s = suite_create("ir");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_use_lists);
  tcase_add_test(tc, test_replace_all_uses);
  tcase_add_test(tc, test_set_operands_growing);
  tcase_add_test(tc, test_builder_insertion_points);
  tcase_add_test(tc, test_move_and_remove);
  tcase_add_test(tc, test_clone_with_mapping);
  tcase_add_test(tc, test_erase);
  tcase_add_test(tc, test_walk_orders);
  tcase_add_test(tc, test_walk_post_order_erase);
  tcase_add_test(tc, test_block_arguments);
  tcase_add_test(tc, test_regions_and_blocks);
  tcase_add_test(tc, test_terminators_and_traits);
  tcase_add_test(tc, test_is_before_after_many_inserts);
  tcase_add_test(tc, test_op_attributes);
  tcase_add_test(tc, test_op_create_errors);
  tcase_add_test(tc, test_symbol_tables);
  tcase_add_test(tc, test_clone_forward_reference);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(ir_suite()); }
