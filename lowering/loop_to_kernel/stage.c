/* lowering/loop_to_kernel/stage.c - the on-chip row: long rows (one row
 * per block, chunks not unrolled: 65536 f32) whose inner loops compute
 * the same values of the row are read from global memory once
 * (docs/codegen.md "Long rows on chip"; grouped.c builds it).
 *
 * Short rows need none of this: their chunks are unrolled, every access
 * has a constant offset, and LLVM keeps the row in registers across the
 * loops. A long row does not fit in registers; each loop used to read
 * it again (three reads of softmax's x). Here the loops that deal the
 * same elements to the same threads (same bounds, step and chunks: the
 * staged layout) are compared op by op: a value that an earlier loop
 * computes and a later one computes again from the same elements (a
 * load of a buffer the nest never writes, with the same row indices, or
 * an effect-free op of such values and row-uniform ones) is staged: the
 * first loop that computes it (its producer) keeps it on chip, the
 * later ones take it instead of computing it (their loads of it then
 * have no use and are not emitted).
 *
 * Which values: the cut that the later loops need, i.e. a value is
 * staged when a later loop uses it for something that is not itself
 * staged (layer_norm of x + r stages x + r, not x and r), unless its
 * operands take fewer bytes than it (a bf16 row converted to f32 stages
 * the bf16 load). Where: each thread's first R chunks in registers, R =
 * min(chunks every thread has, rowRegisters / (vec * registers per
 * element of all staged values)), the rest of the row in dynamic shared
 * memory; values are staged in order (producer loop, then body order)
 * while the shared memory (static included) stays within the block's
 * limit (o->maxSharedBytes, 227 KiB), the last ones are dropped
 * otherwise (they are recomputed from global memory, as before).
 */
#include <stdlib.h>
#include <string.h>

#include "fz/pass.h" /* fzOpIsEffectFree */
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

/* Candidate values of one nest (at most kMaxCand). */
enum { kMaxCand = 64, kMaxDepth = 32 };

/* Follows views back to the buffer they view. */
static FzValue *root_of(FzValue *v) {
  for (FzOp *d = fzValueGetDefiningOp(v);
       d && fzLoopGetOpcode(d) == FZ_LOOP_OP_VIEW;
       d = fzValueGetDefiningOp(v))
    v = fzOpGetOperand(d, 0);
  return v;
}

typedef struct Stored {
  FzValue *roots[64];
  size_t n;
  bool overflow;
} Stored;

static FzWalkResult collect_stored(FzOp *op, void *ud) {
  Stored *s = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (c != FZ_LOOP_OP_STORE && c != FZ_LOOP_OP_VECTOR_STORE)
    return FZ_WALK_ADVANCE;
  FzValue *root = root_of(fzOpGetOperand(op, fzLoopMemGetBufferOperand(op)));
  for (size_t i = 0; i < s->n; ++i)
    if (s->roots[i] == root)
      return FZ_WALK_ADVANCE;
  if (s->n == 64) {
    s->overflow = true;
    return FZ_WALK_INTERRUPT;
  }
  s->roots[s->n++] = root;
  return FZ_WALK_ADVANCE;
}

static bool is_stored(const Stored *s, FzValue *buf) {
  FzValue *root = root_of(buf);
  for (size_t i = 0; i < s->n; ++i)
    if (s->roots[i] == root)
      return true;
  return false;
}

/* A scalar of 8 to 64 bits other than index: what shared memory and
 * registers keep. */
static bool keepable_type(FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
    return true;
  case FZ_TYPE_INTEGER:
    return fzTypeGetBitWidth(t) >= 8 && fzTypeGetBitWidth(t) <= 64;
  default:
    return false;
  }
}

static FzOp *op_in(FzValue *v, FzBlock *body) {
  FzOp *d = fzValueGetDefiningOp(v);
  return d && fzOpGetBlock(d) == body ? d : NULL;
}

/* Whether a (a value of loop body A) and b (of loop body B, a loop of
 * the same layout) hold the same value at the same iteration: the same
 * value defined outside both loops, both loops' variables, or ops of
 * the same kind on such values; a load must read a buffer the nest never
 * stores into (stored NULL: already checked). */
static bool same_value(FzValue *a, FzBlock *A, FzValue *b, FzBlock *B,
                       const Stored *stored, int depth) {
  FzOp *oa = op_in(a, A), *ob = op_in(b, B);
  bool argA = fzValueIsBlockArgument(a) && fzValueGetParentBlock(a) == A;
  bool argB = fzValueIsBlockArgument(b) && fzValueGetParentBlock(b) == B;
  if (argA || argB) /* the variables match; accumulators never do */
    return argA && argB && fzValueGetIndex(a) == 0 && fzValueGetIndex(b) == 0;
  if (!oa || !ob)
    return !oa && !ob && a == b;
  if (depth > kMaxDepth || fzOpGetName(oa) != fzOpGetName(ob) ||
      fzOpGetAttrDict(oa) != fzOpGetAttrDict(ob) ||
      fzOpGetPropDict(oa) != fzOpGetPropDict(ob) ||
      fzOpGetNumResults(oa) != 1 || fzOpGetNumResults(ob) != 1 ||
      fzValueGetType(a) != fzValueGetType(b) ||
      fzOpGetNumOperands(oa) != fzOpGetNumOperands(ob) ||
      fzOpGetNumRegions(oa) != 0)
    return false;
  if (fzLoopGetOpcode(oa) == FZ_LOOP_OP_LOAD) {
    if (stored && is_stored(stored, fzOpGetOperand(oa, 0)))
      return false;
  } else if (!fzOpIsEffectFree(oa)) {
    return false;
  }
  for (size_t k = 0; k < fzOpGetNumOperands(oa); ++k)
    if (!same_value(fzOpGetOperand(oa, k), A, fzOpGetOperand(ob, k), B,
                    stored, depth + 1))
      return false;
  return true;
}

/* Whether v (of loop body A) depends on the loop's variable: a value the
 * same for the whole row is not worth a place per element. */
static bool depends_on_iv(FzValue *v, FzBlock *A, int depth) {
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) == A && fzValueGetIndex(v) == 0;
  FzOp *d = op_in(v, A);
  if (!d || depth > kMaxDepth)
    return false;
  for (size_t k = 0; k < fzOpGetNumOperands(d); ++k)
    if (depends_on_iv(fzOpGetOperand(d, k), A, depth + 1))
      return true;
  return false;
}

/* Whether loops a and b deal the same elements to the same threads. */
static bool same_layout(const FzLkInnerPlan *a, const FzLkInnerPlan *b) {
  return a->lb == b->lb && a->step == b->step && a->trips == b->trips &&
         a->vec == b->vec && a->contiguous && b->contiguous;
}

/* The op of later loop body B that computes what `op` (of an earlier
 * loop's body A) computes, or NULL. */
static FzOp *match_in(FzOp *op, FzBlock *A, FzBlock *B, const Stored *s) {
  for (FzOp *x = fzBlockGetFirstOp(B); x; x = fzOpGetNextInBlock(x))
    if (fzOpGetNumResults(x) == 1 &&
        same_value(fzOpGetResult(op, 0), A, fzOpGetResult(x, 0), B, s, 0))
      return x;
  return NULL;
}

int fzLkStagedValueOf(const FzLkNestPlan *p, const FzLkInnerPlan *ip,
                      FzOp *op) {
  if (!ip->staged || fzOpGetNumResults(op) != 1)
    return -1;
  FzBlock *B = fzLoopGetBody(ip->loop);
  for (size_t s = 0; s < p->numStaged; ++s) {
    const FzLkStagedValue *sv = &p->staged[s];
    if (sv->op == op)
      return (int)s;
    FzBlock *A = fzLoopGetBody(p->inner[sv->producer].loop);
    if (A != B && same_value(fzOpGetResult(sv->op, 0), A,
                             fzOpGetResult(op, 0), B, NULL, 0))
      return (int)s;
  }
  return -1;
}

/* The candidates: ops of staged-layout loops whose value a later loop
 * of that layout computes again (the op in the first loop computing
 * it), and per candidate and later loop, its op there. */
typedef struct Cands {
  FzOp *op[kMaxCand];
  size_t loop[kMaxCand];
  FzOp *later[kMaxCand][FZ_LK_MAX_INNER]; /* per inner loop, or NULL */
  bool staged[kMaxCand];
  size_t n;
} Cands;

static long cand_of(const Cands *C, FzOp *op) {
  for (size_t c = 0; c < C->n; ++c)
    if (C->op[c] == op)
      return (long)c;
  return -1;
}

/* Whether op (of loop i) is the later copy of some candidate. */
static bool is_copy(const Cands *C, size_t i, FzOp *op) {
  for (size_t c = 0; c < C->n; ++c)
    if (C->later[c][i] == op)
      return true;
  return false;
}

static int64_t bytes_of(FzOp *op) {
  return (int64_t)fzTypeGetStorageSize(fzValueGetType(fzOpGetResult(op, 0)));
}

/* Whether v (of loop i's body A) is computed from a load that an
 * earlier loop of the layout reads too: then its inputs are on chip
 * already when it is, and keeping it too would only save arithmetic
 * (softmax's exp(x - max), which its sum and normalization loops both
 * compute, is not kept: x is). */
static bool reads_earlier(const FzLkNestPlan *p, const bool *layout,
                          const Stored *s, size_t i, FzValue *v, int depth) {
  FzBlock *A = fzLoopGetBody(p->inner[i].loop);
  FzOp *d = op_in(v, A);
  if (!d || depth > kMaxDepth)
    return false;
  if (fzLoopGetOpcode(d) == FZ_LOOP_OP_LOAD) {
    for (size_t k = 0; k < i; ++k)
      if (layout[k] && match_in(d, A, fzLoopGetBody(p->inner[k].loop), s))
        return true;
    return false;
  }
  for (size_t k = 0; k < fzOpGetNumOperands(d); ++k)
    if (reads_earlier(p, layout, s, i, fzOpGetOperand(d, k), depth + 1))
      return true;
  return false;
}

static void find_candidates(const FzLkNestPlan *p, const bool *layout,
                            const Stored *s, Cands *C) {
  memset(C, 0, sizeof *C);
  for (size_t i = 0; i < p->numInner; ++i) {
    if (!layout[i])
      continue;
    FzBlock *A = fzLoopGetBody(p->inner[i].loop);
    for (FzOp *op = fzBlockGetFirstOp(A); op && C->n < kMaxCand;
         op = fzOpGetNextInBlock(op)) {
      if (fzOpGetNumResults(op) != 1 ||
          !keepable_type(fzValueGetType(fzOpGetResult(op, 0))) ||
          !depends_on_iv(fzOpGetResult(op, 0), A, 0))
        continue;
      if (reads_earlier(p, layout, s, i, fzOpGetResult(op, 0), 0))
        continue; /* an earlier loop computes it, or reads its inputs */
      size_t c = C->n;
      bool any = false;
      for (size_t j = i + 1; j < p->numInner; ++j)
        if (layout[j] &&
            (C->later[c][j] =
                 match_in(op, A, fzLoopGetBody(p->inner[j].loop), s)))
          any = true;
      if (!any) {
        memset(C->later[c], 0, sizeof C->later[c]);
        continue;
      }
      C->op[c] = op;
      C->loop[c] = i;
      C->n++;
    }
  }
}

/* Marks the cut: candidate c is staged when one of its later copies has
 * a user that is not a later copy of a candidate; then an op whose
 * candidate operands take fewer bytes is replaced by them. */
static void choose_cut(const FzLkNestPlan *p, Cands *C) {
  for (size_t c = 0; c < C->n; ++c)
    for (size_t j = 0; j < p->numInner && !C->staged[c]; ++j) {
      FzOp *x = C->later[c][j];
      if (!x)
        continue;
      for (FzOpOperand *u = fzValueGetFirstUse(fzOpGetResult(x, 0));
           u && !C->staged[c]; u = fzOpOperandGetNextUse(u))
        C->staged[c] = !is_copy(C, j, fzOpOperandGetOwner(u));
    }
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t c = 0; c < C->n; ++c) {
      if (!C->staged[c] || fzLoopGetOpcode(C->op[c]) == FZ_LOOP_OP_LOAD)
        continue;
      FzBlock *A = fzLoopGetBody(p->inner[C->loop[c]].loop);
      int64_t operandBytes = 0;
      bool allCands = true;
      for (size_t k = 0; k < fzOpGetNumOperands(C->op[c]); ++k) {
        FzOp *d = op_in(fzOpGetOperand(C->op[c], k), A);
        if (!d)
          continue; /* row-uniform, or the loop variable */
        long dc = cand_of(C, d);
        if (dc < 0) {
          allCands = false;
          break;
        }
        if (!C->staged[dc])
          operandBytes += bytes_of(d);
      }
      if (!allCands || operandBytes >= bytes_of(C->op[c]))
        continue;
      C->staged[c] = false;
      for (size_t k = 0; k < fzOpGetNumOperands(C->op[c]); ++k) {
        FzOp *d = op_in(fzOpGetOperand(C->op[c], k), A);
        if (d)
          C->staged[cand_of(C, d)] = true;
      }
      changed = true;
    }
  }
}

static int64_t round16(int64_t b) { return (b + 15) / 16 * 16; }

/* 32-bit registers a value of t takes. */
static int64_t regs_of(FzType *t) {
  return ((int64_t)fzTypeGetStorageSize(t) + 3) / 4;
}

/* Shared memory of n staged values of `elems` elements each. */
static int64_t stage_bytes(FzOp *const *ops, size_t n, int64_t elems) {
  int64_t bytes = 0;
  for (size_t k = 0; k < n; ++k)
    bytes += round16(elems * bytes_of(ops[k]));
  return bytes;
}

/* Whether load is v or an operand (transitively) of v, in body A. */
static bool in_tree(FzOp *load, FzValue *v, FzBlock *A, int depth) {
  FzOp *d = op_in(v, A);
  if (!d || depth > kMaxDepth)
    return false;
  if (d == load)
    return true;
  for (size_t k = 0; k < fzOpGetNumOperands(d); ++k)
    if (in_tree(load, fzOpGetOperand(d, k), A, depth + 1))
      return true;
  return false;
}

/* Registers per element of the loads a staged loop still makes besides
 * the staged values (layer_norm's gamma and beta in its last loop), the
 * most of any loop: their chunks' loads are in flight beside the
 * register chunks, so they take registers too (where there are any,
 * the staged values get half the budget). */
static int64_t other_load_regs(const FzLkNestPlan *p, const bool *layout,
                               const Stored *s, FzOp *const *ops, size_t n) {
  int64_t most = 0;
  for (size_t i = 0; i < p->numInner; ++i) {
    if (!layout[i])
      continue;
    FzBlock *A = fzLoopGetBody(p->inner[i].loop);
    int64_t regs = 0;
    for (FzOp *op = fzBlockGetFirstOp(A); op; op = fzOpGetNextInBlock(op)) {
      if (fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD ||
          reads_earlier(p, layout, s, i, fzOpGetResult(op, 0), 0))
        continue;
      bool staged = false;
      for (size_t k = 0; k < n && !staged; ++k)
        staged = fzOpGetBlock(ops[k]) == A &&
                 in_tree(op, fzOpGetResult(ops[k], 0), A, 0);
      if (!staged)
        regs += regs_of(fzValueGetType(fzOpGetResult(op, 0)));
    }
    if (regs > most)
      most = regs;
  }
  return most;
}

void fzLkPlanStaging(const FzLkNest *n, FzLkNestPlan *p,
                     const FzLoopToKernelOptions *o, int64_t staticShared) {
  if (o->noRowStage || p->mapping != FZ_LK_MAP_ROWS ||
      p->itemsPerBlock != 1 || n->items < 1)
    return;
  const FzLkInnerPlan *ref = NULL;
  for (size_t i = 0; i < p->numInner && !ref; ++i)
    if (!p->inner[i].unroll && p->inner[i].contiguous)
      ref = &p->inner[i];
  if (!ref)
    return;
  bool layout[FZ_LK_MAX_INNER];
  for (size_t i = 0; i < p->numInner; ++i)
    layout[i] = same_layout(&p->inner[i], ref);
  Stored stored;
  memset(&stored, 0, sizeof stored);
  fzOpWalk(n->par, FZ_WALK_PRE_ORDER, collect_stored, &stored);
  Cands *C = stored.overflow ? NULL : fzCalloc(n->ctx, 1, sizeof *C);
  if (!C) /* out of memory: recorded, and the pass fails */
    return;
  find_candidates(p, layout, &stored, C);
  choose_cut(p, C);
  size_t keep[kMaxCand], numKeep = 0;
  for (size_t i = 0; i < p->numInner; ++i) /* producer, then body order */
    for (size_t c = 0; c < C->n; ++c)
      if (C->staged[c] && C->loop[c] == i)
        keep[numKeep++] = c;
  int64_t limit = o->maxSharedBytes ? o->maxSharedBytes : 227 * 1024;
  int64_t vec = ref->vec, g = p->group;
  int64_t full = ref->chunks / g; /* chunks every thread has */
  size_t take = numKeep < FZ_LK_MAX_STAGED ? numKeep : FZ_LK_MAX_STAGED;
  for (; take > 0; --take) {
    FzOp *ops[FZ_LK_MAX_STAGED];
    int64_t regs = 0;
    for (size_t k = 0; k < take; ++k) {
      ops[k] = C->op[keep[k]];
      regs += regs_of(fzValueGetType(fzOpGetResult(ops[k], 0)));
    }
    int64_t extra = other_load_regs(p, layout, &stored, ops, take);
    /* The staged values take rowRegisters; half of it where the staged
     * loops make other loads (layer_norm's gamma and beta, rms_norm's
     * gamma), whatever their number: those loads are made chunk by chunk
     * while the register chunks are consumed. Measured with ptxas at
     * 64 registers a thread (1024 threads): 16 staged registers beside
     * such loads fit without spills, 20 or more spill, and 32 fit with
     * none (softmax). Before, rowRegisters / (vec (regs + extra)) gave
     * layer_norm of x + r 2 register chunks (8 registers): 0.80 of the
     * copy rate on an H100 against 0.89 with 4 (docs/benchmarks.md). */
    int64_t R = (int64_t)o->rowRegisters / (vec * regs);
    if (extra > 0)
      R /= 2;
    int64_t most = 2 * (int64_t)o->rowRegisters / (vec * regs);
    if (most > full)
      most = full;
    if (R > most)
      R = most;
    while (R < most && stage_bytes(ops, take, ref->trips - R * g * vec) +
                               staticShared >
                           limit)
      ++R;
    int64_t elems = ref->trips - R * g * vec;
    int64_t bytes = stage_bytes(ops, take, elems);
    if (bytes + staticShared > limit)
      continue;
    bytes = 0;
    for (size_t k = 0; k < take; ++k) {
      FzLkStagedValue *sv = &p->staged[k];
      sv->op = ops[k];
      sv->producer = C->loop[keep[k]];
      sv->elt = fzValueGetType(fzOpGetResult(sv->op, 0));
      sv->sharedOffset = bytes;
      sv->sharedElems = elems;
      bytes += round16(elems * (int64_t)fzTypeGetStorageSize(sv->elt));
    }
    p->numStaged = take;
    p->regChunks = R;
    p->stageBytes = bytes;
    break;
  }
  for (size_t k = p->numStaged; k < numKeep; ++k) {
    p->numUnstaged++;
    p->unstagedBytes += ref->trips * bytes_of(C->op[keep[k]]);
  }
  /* The loops that take part: producers and consumers of staged values. */
  for (size_t k = 0; k < p->numStaged; ++k) {
    long c = cand_of(C, p->staged[k].op);
    p->inner[p->staged[k].producer].staged = true;
    for (size_t j = 0; j < p->numInner; ++j)
      if (C->later[c][j])
        p->inner[j].staged = true;
  }
  fzFree(n->ctx, C);
}
