/* transforms/cse.c - common subexpression elimination.
 *
 * Walks each block in order with a scoped hash table of the pure ops seen
 * so far; an op equal to a visible one (same name, attributes,
 * properties, operands - as a multiset for commutative ops - and result
 * types) has its results replaced by the earlier op's and is erased.
 * Scopes follow dominance in structured IR: a block sees the ops of the
 * blocks enclosing it; a region of an isolated-from-above op starts from
 * an empty table, so no value crosses that boundary. Ops that are not
 * FZ_TRAIT_PURE (unregistered ones included) and ops with regions are
 * never eliminated (their regions are still processed). As in MLIR, a
 * pure op whose results are unused when the walk reaches it is erased
 * (statistic num-dce'd); ops it used are not revisited.
 *
 * The table is open addressing with linear probing. Entries are removed
 * only when their scope ends, in reverse order of insertion, so a removal
 * never breaks another entry's probe chain; growing re-inserts in
 * insertion order to keep that property.
 */
#include <stdlib.h>

#include "fz/pass.h"
#include "ir/util.h"
#include "transforms/passes.h"

typedef struct CseEntry {
  FzOp *op;
  uint32_t hash;
} CseEntry;

typedef struct CseTable {
  FzContext *ctx;
  CseEntry *slots; /* cap entries; op NULL: empty */
  size_t cap;
  CseEntry *stack; /* live entries in insertion order */
  size_t len, stackCap;
  bool failed;
} CseTable;

typedef struct Cse {
  FzContext *ctx;
  uint64_t numCse;
  uint64_t numDce; /* unused pure ops erased */
  bool failed;
} Cse;

static uint32_t op_hash(FzOp *op) {
  uint32_t h = fzHashPtr(fzOpGetName(op));
  h = fzHashCombine(h, (uint64_t)(uintptr_t)fzOpGetAttrDict(op));
  h = fzHashCombine(h, (uint64_t)(uintptr_t)fzOpGetPropDict(op));
  size_t n = fzOpGetNumResults(op);
  for (size_t i = 0; i < n; ++i)
    h = fzHashCombine(h, (uint64_t)(uintptr_t)fzValueGetType(
                             fzOpGetResult(op, i)));
  n = fzOpGetNumOperands(op);
  if (fzOpHasTrait(op, FZ_TRAIT_COMMUTATIVE)) {
    /* Order-independent: a sum of per-operand hashes. */
    uint32_t sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += fzHashPtr(fzOpGetOperand(op, i));
    return fzHashCombine(h, sum ^ (uint32_t)n);
  }
  for (size_t i = 0; i < n; ++i)
    h = fzHashCombine(h, (uint64_t)(uintptr_t)fzOpGetOperand(op, i));
  return h;
}

/* Operands of a and b equal as multisets (commutative ops). */
static bool same_operand_multiset(FzOp *a, FzOp *b, size_t n) {
  if (n == 2) {
    FzValue *a0 = fzOpGetOperand(a, 0), *a1 = fzOpGetOperand(a, 1);
    FzValue *b0 = fzOpGetOperand(b, 0), *b1 = fzOpGetOperand(b, 1);
    return (a0 == b0 && a1 == b1) || (a0 == b1 && a1 == b0);
  }
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(a, i);
    size_t ca = 0, cb = 0;
    for (size_t j = 0; j < n; ++j) {
      ca += fzOpGetOperand(a, j) == v;
      cb += fzOpGetOperand(b, j) == v;
    }
    if (ca != cb)
      return false;
  }
  return true;
}

static bool ops_equal(FzOp *a, FzOp *b) {
  if (fzOpGetName(a) != fzOpGetName(b) ||
      fzOpGetAttrDict(a) != fzOpGetAttrDict(b) ||
      fzOpGetPropDict(a) != fzOpGetPropDict(b))
    return false;
  size_t n = fzOpGetNumResults(a);
  if (n != fzOpGetNumResults(b))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (fzValueGetType(fzOpGetResult(a, i)) !=
        fzValueGetType(fzOpGetResult(b, i)))
      return false;
  n = fzOpGetNumOperands(a);
  if (n != fzOpGetNumOperands(b))
    return false;
  if (fzOpHasTrait(a, FZ_TRAIT_COMMUTATIVE))
    return same_operand_multiset(a, b, n);
  for (size_t i = 0; i < n; ++i)
    if (fzOpGetOperand(a, i) != fzOpGetOperand(b, i))
      return false;
  return true;
}

static void table_init(CseTable *t, FzContext *ctx) {
  memset(t, 0, sizeof *t);
  t->ctx = ctx;
}

static void table_free(CseTable *t) {
  fzFree(t->ctx, t->slots);
  fzFree(t->ctx, t->stack);
}

static void slot_insert(CseTable *t, CseEntry e) {
  size_t mask = t->cap - 1, i = e.hash & mask;
  while (t->slots[i].op)
    i = (i + 1) & mask;
  t->slots[i] = e;
}

static bool table_grow(CseTable *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  CseEntry *s = fzCalloc(t->ctx, cap, sizeof *s);
  if (!s)
    return false;
  fzFree(t->ctx, t->slots);
  t->slots = s;
  t->cap = cap;
  for (size_t i = 0; i < t->len; ++i)
    slot_insert(t, t->stack[i]);
  return true;
}

static FzOp *table_lookup(const CseTable *t, FzOp *op, uint32_t h) {
  if (!t->cap)
    return NULL;
  size_t mask = t->cap - 1, i = h & mask;
  for (; t->slots[i].op; i = (i + 1) & mask)
    if (t->slots[i].hash == h && ops_equal(t->slots[i].op, op))
      return t->slots[i].op;
  return NULL;
}

static bool table_insert(CseTable *t, FzOp *op, uint32_t h) {
  if (t->len == t->stackCap) {
    size_t cap = t->stackCap ? t->stackCap * 2 : 256;
    CseEntry *s = fzRealloc(t->ctx, t->stack, cap * sizeof *s);
    if (!s)
      return false;
    t->stack = s;
    t->stackCap = cap;
  }
  if ((t->len + 1) * 2 > t->cap && !table_grow(t))
    return false;
  CseEntry e = {op, h};
  t->stack[t->len++] = e;
  slot_insert(t, e);
  return true;
}

/* Ends a scope: removes the entries inserted after `mark`, newest first. */
static void table_pop_to(CseTable *t, size_t mark) {
  size_t mask = t->cap - 1;
  while (t->len > mark) {
    CseEntry e = t->stack[--t->len];
    size_t i = e.hash & mask;
    while (t->slots[i].op != e.op)
      i = (i + 1) & mask;
    t->slots[i].op = NULL;
  }
}

static void cse_region(Cse *c, CseTable *t, FzRegion *region);

static void cse_isolated(Cse *c, FzOp *op) {
  CseTable fresh;
  table_init(&fresh, c->ctx);
  size_t n = fzOpGetNumRegions(op);
  for (size_t r = 0; r < n; ++r)
    cse_region(c, &fresh, fzOpGetRegion(op, r));
  if (fresh.failed)
    c->failed = true;
  table_free(&fresh);
}

/* A pure op without regions whose results are all unused, and that is
 * no terminator (MLIR's isOpTriviallyDead for such ops). */
static bool trivially_dead(FzOp *op) {
  if (!fzOpHasTrait(op, FZ_TRAIT_PURE) || fzOpHasTrait(op, FZ_TRAIT_TERMINATOR))
    return false;
  size_t n = fzOpGetNumResults(op);
  for (size_t i = 0; i < n; ++i)
    if (fzValueHasUses(fzOpGetResult(op, i)))
      return false;
  return true;
}

static void cse_block(Cse *c, CseTable *t, FzBlock *block) {
  for (FzOp *op = fzBlockGetFirstOp(block); op;) {
    FzOp *next = fzOpGetNextInBlock(op);
    size_t nr = fzOpGetNumRegions(op);
    if (nr) {
      if (fzOpHasTrait(op, FZ_TRAIT_ISOLATED_FROM_ABOVE)) {
        cse_isolated(c, op);
      } else {
        for (size_t r = 0; r < nr; ++r)
          cse_region(c, t, fzOpGetRegion(op, r));
      }
    } else if (trivially_dead(op)) {
      /* As MLIR's cse: an unused pure op is erased when it is reached
       * (not its operands' producers, which were visited before and
       * still had this use then). */
      fzOpErase(op);
      c->numDce++;
    } else if (fzOpHasTrait(op, FZ_TRAIT_PURE)) {
      uint32_t h = op_hash(op);
      FzOp *existing = table_lookup(t, op, h);
      if (existing) {
        size_t n = fzOpGetNumResults(op);
        for (size_t i = 0; i < n; ++i)
          fzValueReplaceAllUsesWith(fzOpGetResult(op, i),
                                    fzOpGetResult(existing, i));
        fzOpErase(op);
        c->numCse++;
      } else if (!table_insert(t, op, h)) {
        t->failed = true;
      }
    }
    op = next;
  }
}

static void cse_region(Cse *c, CseTable *t, FzRegion *region) {
  for (FzBlock *b = fzRegionGetFirstBlock(region); b; b = fzBlockGetNext(b)) {
    size_t mark = t->len;
    cse_block(c, t, b);
    table_pop_to(t, mark);
  }
}

static bool cse_run(FzPass *pass, FzOp *op) {
  Cse c = {fzPassGetContext(pass), 0, 0, false};
  cse_isolated(&c, op);
  fzPassAddStatistic(pass, 0, c.numCse);
  fzPassAddStatistic(pass, 1, c.numDce);
  return !c.failed && !fzContextHadAllocationFailure(c.ctx);
}

static const FzPassStatisticDef kStats[] = {
    {"num-cse'd", "Number of operations CSE'd"},
    {"num-dce'd", "Number of operations DCE'd"},
};

const FzPassDef fzCSEPass = {
    .argument = "cse",
    .displayName = "CSE",
    .summary = "Eliminate common subexpressions (pure ops, by dominance "
               "scope)",
    .anchor = NULL,
    .statistics = kStats,
    .numStatistics = 2,
    .run = cse_run,
};
