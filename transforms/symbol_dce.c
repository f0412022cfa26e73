/* transforms/symbol_dce.c - erase private symbols nothing refers to.
 *
 * Runs on a symbol-table op (builtin.module). Liveness is computed from
 * roots: every op of the table's body that is not a symbol, and every
 * symbol that is not private (its "sym_visibility" is not "private"). A
 * live op makes live every symbol named (by the root of a symbol
 * reference, anywhere in the attributes or properties of it or of the ops
 * nested in it) in the table. What is left - private symbols reachable
 * only from dead ones, or from nowhere - is erased. References into
 * nested symbol tables keep the nested table alive as a whole; nested
 * tables are not cleaned themselves.
 */
#include "fz/pass.h"
#include "ir/util.h"
#include "transforms/passes.h"

typedef struct SymDce {
  FzSymbolTable *table;
  FzPtrMap live;     /* symbol op -> (void *)1 */
  FzPtrVec worklist; /* live ops whose references are not yet scanned */
  bool failed;
} SymDce;

static bool is_private(FzOp *op) {
  FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("sym_visibility"));
  return v && fzAttrGetKind(v) == FZ_ATTR_STRING &&
         fzStringRefEqual(fzStringAttrGetValue(v), FZ_STR("private"));
}

static void mark_live(SymDce *s, FzOp *op) {
  if (fzPtrMapContains(&s->live, op))
    return;
  if (!fzPtrMapPut(&s->live, op, (void *)1) ||
      !fzPtrVecPush(&s->worklist, op))
    s->failed = true;
}

static void scan_attr(SymDce *s, const FzAttr *a) {
  switch (fzAttrGetKind(a)) {
  case FZ_ATTR_SYMBOL_REF: {
    FzOp *sym = fzSymbolTableLookup(s->table, fzSymbolRefAttrGetRoot(a));
    if (sym)
      mark_live(s, sym);
    break;
  }
  case FZ_ATTR_ARRAY: {
    size_t n = fzArrayAttrGetSize(a);
    for (size_t i = 0; i < n; ++i)
      scan_attr(s, fzArrayAttrGetElement(a, i));
    break;
  }
  case FZ_ATTR_DICT: {
    size_t n = fzDictAttrGetSize(a);
    for (size_t i = 0; i < n; ++i)
      scan_attr(s, fzDictAttrGetEntry(a, i).value);
    break;
  }
  default:
    break;
  }
}

static FzWalkResult scan_op(FzOp *op, void *ud) {
  SymDce *s = ud;
  scan_attr(s, fzOpGetAttrDict(op));
  scan_attr(s, fzOpGetPropDict(op));
  return FZ_WALK_ADVANCE;
}

static bool symbol_dce_run(FzPass *pass, FzOp *op) {
  if (!fzOpHasTrait(op, FZ_TRAIT_SYMBOL_TABLE))
    return fzOpEmitError(op, "symbol-dce runs on symbol-table ops only");
  FzContext *ctx = fzPassGetContext(pass);
  FzBlock *body = fzOpGetNumRegions(op)
                      ? fzRegionGetFirstBlock(fzOpGetRegion(op, 0))
                      : NULL;
  if (!body)
    return true;
  SymDce s;
  memset(&s, 0, sizeof s);
  s.table = fzSymbolTableCreate(op);
  if (!s.table)
    return false;
  fzPtrMapInit(&s.live, ctx);
  fzPtrVecInit(&s.worklist, ctx);
  for (FzOp *o = fzBlockGetFirstOp(body); o; o = fzOpGetNextInBlock(o))
    if (!fzSymbolGetName(o).data || !is_private(o))
      mark_live(&s, o);
  while (s.worklist.len && !s.failed)
    (void)fzOpWalk(fzPtrVecPop(&s.worklist), FZ_WALK_PRE_ORDER, scan_op, &s);
  uint64_t erased = 0;
  if (!s.failed) {
    for (FzOp *o = fzBlockGetFirstOp(body); o;) {
      FzOp *next = fzOpGetNextInBlock(o);
      if (!fzPtrMapContains(&s.live, o)) {
        fzOpErase(o);
        ++erased;
      }
      o = next;
    }
  }
  fzPassAddStatistic(pass, 0, erased);
  fzSymbolTableDestroy(s.table);
  fzPtrMapFree(&s.live);
  fzPtrVecFree(&s.worklist);
  return !s.failed;
}

static const FzPassStatisticDef kStats[] = {
    {"num-dce'd", "Number of symbols DCE'd"},
};

const FzPassDef fzSymbolDCEPass = {
    .argument = "symbol-dce",
    .displayName = "SymbolDCE",
    .summary = "Erase private symbols (functions) that nothing refers to",
    .anchor = NULL,
    .statistics = kStats,
    .numStatistics = 1,
    .run = symbol_dce_run,
};
