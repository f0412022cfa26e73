/* ir/verifier.c - structural and semantic verification of IR.
 *
 * Checks, for an op and everything nested in it: use-list consistency,
 * operand/result/region counts from the op definition, terminators and
 * single-block regions, dominance of every operand over its use (values
 * flow down into nested regions; sibling blocks of a region are only
 * dominated by the entry block, since fuse's IR has no CFG successors),
 * isolation from above, and finally each op's own verify hook. Regions
 * of unregistered ops and of ops with the graph-region trait are not
 * dominance-checked (their order carries no meaning), as in MLIR.
 *
 * Every error found is reported; verification goes on after an error
 * wherever the IR is still safe to inspect. Recursion is bounded by the
 * context's nesting limit.
 */
#include "ir/internal.h"

typedef struct Verifier {
  FzContext *ctx;
  unsigned depth;
  size_t errors;
} Verifier;

#define FZ_VERIFY_MAX_ERRORS 200

static bool verify_op(Verifier *v, FzOp *op);

static bool region_is_graph(const FzRegion *r) {
  const FzOp *p = r->parentOp;
  return !p || !p->def || (p->def->traits & FZ_TRAIT_GRAPH_REGION);
}

/* Reports a dominance failure for operand `i` of `op`. */
static void dominance_error(FzOp *op, size_t i, FzValue *val,
                            const char *why) {
  FzDiagnostic *d = fzOpDiagBegin(op, FZ_SEVERITY_ERROR, "%s #%zu %s",
                                  "operand", i, why);
  FzLoc *defLoc = fzValueGetLoc(val);
  fzDiagAttachNote(d, defLoc, "operand defined here");
  fzDiagReport(d);
}

/* Checks that operand i of op (value val) is visible and dominates. */
static bool check_operand(FzOp *op, size_t i, FzValue *val) {
  FzBlock *defBlock = fzValueGetParentBlock(val);
  if (!defBlock) {
    dominance_error(op, i, val, "is defined by an operation that is not "
                                "in any block");
    return false;
  }
  FzRegion *defRegion = defBlock->parent;
  /* Climb from the user until we reach an op in defRegion, checking
   * isolation on the way. */
  FzOp *anc = op;
  while (anc && (!anc->block || anc->block->parent != defRegion)) {
    FzOp *parent = fzOpGetParentOp(anc);
    if (parent && fzOpHasTrait(parent, FZ_TRAIT_ISOLATED_FROM_ABOVE)) {
      /* A value defined elsewhere inside the isolated op (a sibling or
       * deeper region) is a dominance error, not an isolation one. */
      if (defRegion && defRegion->parentOp &&
          fzOpIsAncestor(parent, defRegion->parentOp)) {
        dominance_error(op, i, val, "does not dominate this use");
        return false;
      }
      FzDiagnostic *d = fzOpDiagBegin(op, FZ_SEVERITY_ERROR,
                                      "using value defined outside the "
                                      "region");
      fzDiagAttachNote(d, parent->loc,
                       "required by region isolation constraints");
      fzDiagReport(d);
      return false;
    }
    anc = parent;
  }
  if (!anc) {
    dominance_error(op, i, val, "does not dominate this use");
    return false;
  }
  if (!defRegion || region_is_graph(defRegion))
    return true;
  if (anc->block != defBlock) {
    if (defBlock == defRegion->first)
      return true;
    dominance_error(op, i, val, "does not dominate this use");
    return false;
  }
  if (val->isArg)
    return true;
  FzOp *defOp = val->owner.op;
  if (defOp == anc || !fzOpIsBeforeInBlock(defOp, anc)) {
    dominance_error(op, i, val, "does not dominate this use");
    return false;
  }
  return true;
}

/* Use lists are checked link by link from the operands, never by walking
 * a list: walking is a chain of dependent cache misses, while the loads
 * below are independent of one another (this was most of the verifier's
 * time on large functions). For every operand u of value v:
 *   (a) *u->prevUse == u, and u->prevUse is either &v->firstUse or the
 *       nextUse field of a use of v;
 *   (b) u->nextUse is NULL or links back to u;
 * and for every value, its first use links back to it (head_ok). Then, by
 * induction from the head, every use in v's list is a use of v, and every
 * verified operand of v is reached from v's head. */
static bool operand_links_ok(const FzOpOperand *u) {
  FzValue *v = u->value;
  if (!u->prevUse || *u->prevUse != u)
    return false;
  if (u->prevUse != &v->firstUse) {
    const FzOpOperand *prev =
        (const FzOpOperand *)((const char *)u->prevUse -
                              offsetof(FzOpOperand, nextUse));
    if (prev->value != v)
      return false;
  }
  return !u->nextUse || u->nextUse->prevUse == &((FzOpOperand *)u)->nextUse;
}

static bool head_ok(const FzValue *v) {
  return !v->firstUse || (v->firstUse->value == v &&
                          v->firstUse->prevUse == &((FzValue *)v)->firstUse);
}

static bool count_ok(FzOp *op, int expected, size_t actual,
                     const char *what) {
  if (expected == FZ_VARIADIC || (size_t)expected == actual)
    return true;
  return fzOpEmitError(op, "expected %d %s%s, but found %zu", expected, what,
                       expected == 1 ? "" : "s", actual);
}

/* Asks for the memory that verify_op will read through op's links (the
 * values its operands use, their neighbours in the use lists, its
 * results' first uses): on a large function these are cache misses,
 * and fetching them an op ahead overlaps them with the work on the
 * current op. */
static void prefetch_links(const FzOp *op) {
  for (uint32_t i = 0; i < op->numOperands; ++i) {
    const FzOpOperand *u = &op->operands[i];
    FZ_PREFETCH(u->value);
    FZ_PREFETCH(u->prevUse);
    FZ_PREFETCH(u->nextUse);
  }
  for (uint32_t i = 0; i < op->numResults; ++i)
    FZ_PREFETCH(op->results[i].firstUse);
}

static bool verify_block(Verifier *v, FzBlock *b, FzOp *parent) {
  bool ok = true;
  for (size_t i = 0; i < b->numArgs; ++i) {
    FzValue *a = b->args[i];
    if (!a->type) {
      ok = fzEmitError(v->ctx, a->loc, "block argument #%zu has no type", i);
    }
    if (a->owner.block != b || a->index != i)
      ok = fzEmitError(v->ctx, a->loc,
                       "block argument #%zu has a corrupt owner", i);
    if (!head_ok(a))
      ok = fzEmitError(v->ctx, a->loc,
                       "block argument #%zu has a corrupt use list", i);
  }
  for (FzOp *o = b->first; o; o = o->next) {
    if (o->next && o->next->next)
      prefetch_links(o->next->next);
    if (o->block != b) {
      ok = fzOpEmitError(o, "has a corrupt parent block");
      continue;
    }
    if (o->next && o->def && (o->def->traits & FZ_TRAIT_TERMINATOR))
      ok = fzOpEmitError(o, "must be the last operation in the parent "
                            "block");
    if (!verify_op(v, o))
      ok = false;
    if (v->errors > FZ_VERIFY_MAX_ERRORS)
      return false;
  }
  /* A registered parent op needs a terminator unless it says otherwise. */
  if (parent->def && !(parent->def->traits & FZ_TRAIT_NO_TERMINATOR)) {
    FzOp *last = b->last;
    if (!last) {
      FzLoc *loc = parent->loc;
      FzDiagnostic *d = fzDiagBegin(v->ctx, FZ_SEVERITY_ERROR, loc,
                                    "empty block: expect at least a "
                                    "terminator");
      fzDiagReport(d);
      ok = false;
    } else if (last->def && !(last->def->traits & FZ_TRAIT_TERMINATOR)) {
      FzDiagnostic *d = fzOpDiagBegin(last, FZ_SEVERITY_ERROR,
                                      "block with no terminator, has this "
                                      "op last");
      fzDiagReport(d);
      ok = false;
    }
  }
  return ok;
}

/* Symbols directly inside a symbol table must have distinct names. */
static bool verify_unique_symbols(FzOp *table) {
  FzBlock *b = table->numRegions ? table->regions[0].first : NULL;
  if (!b)
    return true;
  FzPtrMap seen;
  fzPtrMapInit(&seen, table->ctx);
  bool ok = true;
  for (FzOp *o = b->first; o; o = o->next) {
    FzStringRef name = fzSymbolGetName(o);
    if (!name.data)
      continue;
    FzIdent *id = fzIdentGet(table->ctx, name);
    if (!id)
      break;
    FzOp *prev = fzPtrMapGet(&seen, id);
    if (prev) {
      FzDiagnostic *d = fzDiagBegin(table->ctx, FZ_SEVERITY_ERROR, o->loc,
                                    "redefinition of symbol named '%s'",
                                    id->str);
      fzDiagAttachNote(d, prev->loc, "see existing symbol definition here");
      fzDiagReport(d);
      ok = false;
    } else if (!fzPtrMapPut(&seen, id, o)) {
      break;
    }
  }
  fzPtrMapFree(&seen);
  return ok;
}

static bool verify_op(Verifier *v, FzOp *op) {
  size_t errorsBefore = v->ctx->numErrors;
  bool ok = true;
  /* Use lists and operands. */
  for (uint32_t i = 0; i < op->numOperands; ++i) {
    FzOpOperand *u = &op->operands[i];
    if (!u->value) {
      ok = fzOpEmitError(op, "operand #%u is null", i);
      continue;
    }
    if (u->owner != op || u->index != i || !operand_links_ok(u))
      ok = fzOpEmitError(op, "operand #%u has a corrupt use list", i);
    else if (!check_operand(op, i, u->value))
      ok = false;
  }
  for (uint32_t i = 0; i < op->numResults; ++i) {
    FzValue *r = &op->results[i];
    if (!r->type)
      ok = fzOpEmitError(op, "result #%u has no type", i);
    if (!head_ok(r))
      ok = fzOpEmitError(op, "result #%u has a corrupt use list", i);
  }
  const FzOpDef *def = op->def;
  bool countsOk = true;
  if (def) {
    countsOk &= count_ok(op, def->numOperands, op->numOperands, "operand");
    countsOk &= count_ok(op, def->numResults, op->numResults, "result");
    countsOk &= count_ok(op, def->numRegions, op->numRegions, "region");
    ok &= countsOk;
    if (def->traits & FZ_TRAIT_SINGLE_BLOCK)
      for (uint32_t i = 0; i < op->numRegions; ++i)
        if (op->regions[i].numBlocks > 1)
          ok = fzOpEmitError(op, "expects region #%u to have 0 or 1 blocks",
                             i);
  }
  /* Nested regions. */
  if (op->numRegions) {
    if (v->depth >= v->ctx->maxNesting) {
      return fzOpEmitError(op, "nesting too deep (limit %u)",
                           v->ctx->maxNesting);
    }
    v->depth++;
    for (uint32_t i = 0; i < op->numRegions; ++i)
      for (FzBlock *b = op->regions[i].first; b; b = b->next) {
        if (b->parent != &op->regions[i]) {
          ok = fzOpEmitError(op, "region #%u has a corrupt block", i);
          break;
        }
        if (!verify_block(v, b, op))
          ok = false;
      }
    v->depth--;
  }
  if (ok && (op->def && (op->def->traits & FZ_TRAIT_SYMBOL_TABLE)) &&
      !verify_unique_symbols(op))
    ok = false;
  /* The op's own rules, only when its structure is sound. */
  if (ok && countsOk && def && def->verify && !def->verify(op))
    ok = false;
  if (!ok && v->ctx->numErrors == errorsBefore)
    fzOpEmitError(op, "failed to verify");
  if (!ok)
    v->errors++;
  return ok;
}

bool fzOpVerify(FzOp *op) {
  Verifier v = {op->ctx, 0, 0};
  return verify_op(&v, op);
}
