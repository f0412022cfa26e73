/* lowering/nvptx/emit_rows.c - the grouped mappings of plan.c: several
 * threads share one outer iteration of a nest (a row, or a column).
 *
 * Kernel shape (ROWS; COLUMNS differs where said):
 *   for (blk = ctaid; blk < numBlocks; blk += nctaid)     block-uniform
 *     item = blk * itemsPerBlock + tid / G   (COLUMNS: tid % 32)
 *     g    = tid % G                          (COLUMNS: tid / 32)
 *     an item past the end is clamped to the last one (its loads stay in
 *     bounds and it takes part in every shuffle and barrier); its stores
 *     are skipped.
 *     the body's ops in order:
 *       row-level ops      every thread computes them (uniform values);
 *                          stores by the group's thread 0 only
 *       loop.for reduction each thread folds its chunks (c = g + k*G,
 *                          `vec` consecutive iterations each) into a
 *                          partial started at the combining op's
 *                          identity; partials are combined by butterfly
 *                          shuffles within the warp, then (G > 32)
 *                          through shared memory; every thread gets the
 *                          total (COLUMNS: shared memory [G][32]); the
 *                          loop's init is folded in last
 *       loop.parallel      its chunks are dealt to the group's threads
 *       loop.barrier       bar.sync (G <= 32: bar.warp.sync); nothing
 *                          when the nest stores into no buffer it reads
 *                          (no phase reads what another one wrote)
 *     bar.sync when shared memory was used and the block has another
 *     item to do (the arrays are reused)
 * The combining op is the reduction's own (the yield's operand), emitted
 * by the CPU emitter on the partials, so NaN and rounding rules are the
 * same as in the loop (only the association order differs).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

typedef struct Group {
  FzLLEmitter *E;
  const FzNvNestPlan *p;
  LLVMValueRef tid;    /* i32 */
  LLVMValueRef g;      /* i64: this thread's rank in its group */
  LLVMValueRef valid;  /* i1: the thread's item exists */
  LLVMValueRef leader; /* i1: valid and g == 0 */
  bool usedShared;
} Group;

static LLVMValueRef sreg(FzLLEmitter *E, const char *name) {
  return fzLLCallIntrinsic(E, name, NULL, 0, NULL, 0);
}

static LLVMValueRef i32c(FzLLEmitter *E, int64_t v) {
  return LLVMConstInt(E->tI32, (unsigned long long)v, 0);
}

static void block_barrier(FzLLEmitter *E) {
  fzLLCallIntrinsic(E, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

static void warp_barrier(FzLLEmitter *E) {
  LLVMValueRef all = i32c(E, -1);
  fzLLCallIntrinsic(E, "llvm.nvvm.bar.warp.sync", NULL, 0, &all, 1);
}

/* Emits an op without regions through the CPU emitter. */
static bool emit_plain(FzLLEmitter *E, FzOp *op) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  switch (c) {
  case FZ_LOOP_OP_LOAD:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VIEW:
  case FZ_LOOP_OP_DIM:
  case FZ_LOOP_OP_CONSTANT_BUFFER:
    return fzLLEmitMemoryOp(E, op, c);
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_UNKNOWN:
    return fzLLError(E, op, "emit-ptx: internal error: op not expected in "
                            "a grouped GPU nest");
  default:
    return fzLLEmitScalarOp(E, op, c);
  }
}

/* Runs emit(...) only where cond holds (a branch around it). */
static LLVMBasicBlockRef open_if(FzLLEmitter *E, LLVMValueRef cond,
                                 LLVMBasicBlockRef *merge) {
  LLVMBasicBlockRef then =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "then");
  *merge = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "endif");
  LLVMBuildCondBr(E->b, cond, then, *merge);
  LLVMPositionBuilderAtEnd(E->b, then);
  return then;
}

static void close_if(FzLLEmitter *E, LLVMBasicBlockRef merge) {
  LLVMBuildBr(E->b, merge);
  LLVMPositionBuilderAtEnd(E->b, merge);
}

/*===--- Combining partial results ----------------------------------------===*/

/* cop applied to (acc, x): acc takes the place of the loop's iteration
 * argument. Operand mappings are restored afterwards. */
static LLVMValueRef combine(FzLLEmitter *E, FzOp *cop, LLVMValueRef acc,
                            LLVMValueRef x) {
  FzBlock *body = fzOpGetBlock(cop);
  FzValue *a = fzOpGetOperand(cop, 0), *b = fzOpGetOperand(cop, 1);
  bool accFirst = fzValueIsBlockArgument(a) && fzValueGetParentBlock(a) ==
                                                   body &&
                  fzValueGetIndex(a) > 0;
  LLVMValueRef oldA = fzPtrMapGet(&E->values, a);
  LLVMValueRef oldB = fzPtrMapGet(&E->values, b);
  fzLLSet(E, a, accFirst ? acc : x);
  fzLLSet(E, b, accFirst ? x : acc);
  bool ok = fzLLEmitScalarOp(E, cop, fzLoopGetOpcode(cop));
  LLVMValueRef r = ok ? fzLLGet(E, fzOpGetResult(cop, 0)) : NULL;
  if (oldA)
    fzLLSet(E, a, oldA);
  if (oldB)
    fzLLSet(E, b, oldB);
  return r;
}

/* The identity of cop's operation in fz type t. */
static LLVMValueRef identity(FzLLEmitter *E, FzOp *cop, FzType *t) {
  LLVMTypeRef lt = fzLLType(E, t);
  FzTypeKind k = fzTypeGetKind(t);
  unsigned w = k == FZ_TYPE_INDEX ? 64 : fzTypeGetBitWidth(t);
  double f = 0;
  int64_t i = 0;
  switch (fzLoopGetOpcode(cop)) {
  case FZ_LOOP_OP_ADDF:
    f = -0.0;
    break;
  case FZ_LOOP_OP_MULF:
    f = 1.0;
    break;
  case FZ_LOOP_OP_MAXF:
    f = -INFINITY;
    break;
  case FZ_LOOP_OP_MINF:
    f = INFINITY;
    break;
  case FZ_LOOP_OP_MULI:
    i = 1;
    break;
  case FZ_LOOP_OP_ANDI:
    i = -1;
    break;
  case FZ_LOOP_OP_MAXSI:
    i = w >= 64 ? INT64_MIN : -((int64_t)1 << (w - 1));
    break;
  case FZ_LOOP_OP_MINSI:
    i = w >= 64 ? INT64_MAX : ((int64_t)1 << (w - 1)) - 1;
    break;
  default: /* addi, ori, xori */
    break;
  }
  if (!fzTypeIsFloat(t))
    return fzLLConstI(lt, i);
  if (k == FZ_TYPE_BF16)
    return fzLLF32ToBF16(E, fzLLConstF(E->tF32, f));
  return fzLLConstF(lt, f);
}

static unsigned bit_width(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMHalfTypeKind:
  case LLVMBFloatTypeKind:
    return 16;
  case LLVMFloatTypeKind:
    return 32;
  case LLVMDoubleTypeKind:
    return 64;
  default:
    return LLVMGetIntTypeWidth(t);
  }
}

static LLVMValueRef shfl32(FzLLEmitter *E, LLVMValueRef v, unsigned off) {
  LLVMValueRef args[4] = {i32c(E, -1), v, i32c(E, off), i32c(E, 0x1f)};
  return fzLLCallIntrinsic(E, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args,
                           4);
}

/* v from the lane whose id differs from ours in bit `off`. */
static LLVMValueRef shfl_xor(FzLLEmitter *E, LLVMValueRef v, unsigned off) {
  LLVMTypeRef t = LLVMTypeOf(v);
  unsigned bits = bit_width(t);
  LLVMTypeRef it = LLVMIntTypeInContext(E->llctx, bits);
  bool isInt = LLVMGetTypeKind(t) == LLVMIntegerTypeKind;
  LLVMValueRef x = isInt ? v : LLVMBuildBitCast(E->b, v, it, "");
  LLVMValueRef r;
  if (bits <= 32) {
    LLVMValueRef w = bits < 32 ? LLVMBuildZExt(E->b, x, E->tI32, "") : x;
    r = shfl32(E, w, off);
    if (bits < 32)
      r = LLVMBuildTrunc(E->b, r, it, "");
  } else {
    LLVMValueRef lo = LLVMBuildTrunc(E->b, x, E->tI32, "");
    LLVMValueRef hi = LLVMBuildTrunc(
        E->b, LLVMBuildLShr(E->b, x, LLVMConstInt(it, 32, 0), ""), E->tI32,
        "");
    lo = LLVMBuildZExt(E->b, shfl32(E, lo, off), it, "");
    hi = LLVMBuildZExt(E->b, shfl32(E, hi, off), it, "");
    r = LLVMBuildOr(E->b, lo, LLVMBuildShl(E->b, hi, LLVMConstInt(it, 32, 0),
                                           ""),
                    "");
  }
  return isInt ? r : LLVMBuildBitCast(E->b, r, t, "");
}

/* A fresh shared-memory array of n elements of type elt. */
static LLVMValueRef shared_array(FzLLEmitter *E, LLVMTypeRef elt,
                                 unsigned n) {
  LLVMTypeRef at = LLVMArrayType2(elt, n);
  LLVMValueRef gv = LLVMAddGlobalInAddressSpace(E->mod, at, "fz_smem", 3);
  LLVMSetLinkage(gv, LLVMInternalLinkage);
  LLVMSetInitializer(gv, LLVMGetUndef(at));
  LLVMSetAlignment(gv, 16);
  return gv;
}

static LLVMValueRef shared_at(FzLLEmitter *E, LLVMValueRef arr,
                              LLVMTypeRef elt, unsigned n, LLVMValueRef i) {
  LLVMValueRef idx[2] = {i32c(E, 0), i};
  return LLVMBuildInBoundsGEP2(E->b, LLVMArrayType2(elt, n), arr, idx, 2, "");
}

/* The combination of the partials v of the group's threads, in every
 * thread of the group. */
static LLVMValueRef group_combine(Group *G, FzOp *cop, LLVMValueRef v) {
  FzLLEmitter *E = G->E;
  unsigned gs = G->p->group;
  LLVMTypeRef t = LLVMTypeOf(v);
  if (G->p->mapping == FZ_NV_MAP_ROWS) {
    for (unsigned off = (gs < 32 ? gs : 32) / 2; off >= 1 && v; off /= 2)
      v = combine(E, cop, v, shfl_xor(E, v, off));
    if (gs <= 32 || !v)
      return v;
    /* One row per block: lane 0's total of each warp (every lane holds
     * it: all store the same value), then every thread folds them. */
    unsigned nw = gs / 32;
    LLVMValueRef arr = shared_array(E, t, nw);
    LLVMValueRef warp = LLVMBuildLShr(E->b, G->tid, i32c(E, 5), "");
    LLVMBuildStore(E->b, v, shared_at(E, arr, t, nw, warp));
    block_barrier(E);
    G->usedShared = true;
    LLVMValueRef r = LLVMBuildLoad2(E->b, t, shared_at(E, arr, t, nw,
                                                       i32c(E, 0)),
                                    "");
    for (unsigned w = 1; w < nw && r; ++w)
      r = combine(E, cop, r,
                  LLVMBuildLoad2(E->b, t,
                                 shared_at(E, arr, t, nw, i32c(E, w)), ""));
    return r;
  }
  /* COLUMNS: partial of (column x, slice y) at [y][x] = [tid]. */
  unsigned n = gs * 32;
  LLVMValueRef arr = shared_array(E, t, n);
  LLVMBuildStore(E->b, v, shared_at(E, arr, t, n, G->tid));
  block_barrier(E);
  G->usedShared = true;
  LLVMValueRef x = LLVMBuildAnd(E->b, G->tid, i32c(E, 31), "");
  LLVMValueRef r = LLVMBuildLoad2(E->b, t, shared_at(E, arr, t, n, x), "");
  for (unsigned y = 1; y < gs && r; ++y)
    r = combine(E, cop, r,
                LLVMBuildLoad2(E->b, t,
                               shared_at(E, arr, t, n,
                                         LLVMBuildAdd(E->b, x,
                                                      i32c(E, y * 32), "")),
                               ""));
  return r;
}

/*===--- Inner loops ------------------------------------------------------===*/

/* The vec iterations of chunk c of inner loop ip, side by side
 * (emit_unroll.c), the accumulators acc carried through in order. */
static bool emit_chunk(Group *G, const FzNvInnerPlan *ip, LLVMValueRef c,
                       LLVMValueRef *acc, size_t numAcc) {
  FzLLEmitter *E = G->E;
  FzBlock *body = fzLoopGetBody(ip->loop);
  FzOp *last = fzBlockGetLastOp(body);
  FzNvUnroll U;
  if (!fzNvUnrollInit(&U, E, body, 1, ip->vec))
    return false;
  FzValue *args[1 + FZ_NV_MAX_ACCUMULATORS];
  for (size_t i = 0; i <= numAcc; ++i)
    args[i] = fzBlockGetArgument(body, i);
  bool ok = true;
  for (unsigned ph = 0; ph < 3 && ok; ++ph)
    for (unsigned u = 0; u < ip->vec && ok; ++u) {
      if (ph == 0) {
        LLVMValueRef j = LLVMBuildNSWAdd(
            E->b, LLVMBuildNSWMul(E->b, c, fzLLIndex(E, ip->vec), ""),
            fzLLIndex(E, u), "");
        LLVMValueRef iv = LLVMBuildNSWAdd(
            E->b, fzLLIndex(E, ip->lb),
            LLVMBuildNSWMul(E->b, j, fzLLIndex(E, ip->step), ""), "");
        ok = fzNvUnrollEmit(&U, u, 0, args, &iv, 1);
      } else if (ph == 1) {
        ok = fzNvUnrollEmit(&U, u, 1, args + 1, acc, numAcc);
        for (size_t i = 0; i < numAcc && ok; ++i)
          ok = (acc[i] = fzLLGet(E, fzOpGetOperand(last, i))) != NULL;
      } else {
        ok = fzNvUnrollEmit(&U, u, 2, NULL, NULL, 0);
      }
    }
  fzNvUnrollFree(&U);
  return ok && !E->failed;
}

/* This thread's chunks of ip: unrolled (each guarded where some threads
 * have fewer chunks), or a loop. acc are carried through. */
static bool emit_chunks(Group *G, const FzNvInnerPlan *ip, LLVMValueRef *acc,
                        size_t numAcc) {
  FzLLEmitter *E = G->E;
  unsigned gs = G->p->group;
  LLVMValueRef chunks = fzLLIndex(E, ip->chunks);
  if (ip->unroll) {
    for (int64_t k = 0; k < ip->perThread; ++k) {
      LLVMValueRef c =
          LLVMBuildNUWAdd(E->b, G->g, fzLLIndex(E, k * (int64_t)gs), "");
      if ((k + 1) * (int64_t)gs <= ip->chunks) {
        if (!emit_chunk(G, ip, c, acc, numAcc))
          return false;
        continue;
      }
      LLVMValueRef before[FZ_NV_MAX_ACCUMULATORS];
      for (size_t i = 0; i < numAcc; ++i)
        before[i] = acc[i];
      LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b), merge;
      open_if(E, LLVMBuildICmp(E->b, LLVMIntULT, c, chunks, ""), &merge);
      if (!emit_chunk(G, ip, c, acc, numAcc))
        return false;
      LLVMBasicBlockRef thenEnd = LLVMGetInsertBlock(E->b);
      close_if(E, merge);
      for (size_t i = 0; i < numAcc; ++i) {
        LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(before[i]), "");
        LLVMAddIncoming(phi, &before[i], &pre, 1);
        LLVMAddIncoming(phi, &acc[i], &thenEnd, 1);
        acc[i] = phi;
      }
    }
    return true;
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  LLVMBasicBlockRef head =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "chunk");
  LLVMBasicBlockRef bodyBB =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "chunk.body");
  LLVMBasicBlockRef exit =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "chunk.end");
  LLVMBuildBr(E->b, head);
  LLVMPositionBuilderAtEnd(E->b, head);
  LLVMValueRef c = LLVMBuildPhi(E->b, E->tI64, "c");
  LLVMValueRef phis[FZ_NV_MAX_ACCUMULATORS];
  for (size_t i = 0; i < numAcc; ++i) {
    phis[i] = LLVMBuildPhi(E->b, LLVMTypeOf(acc[i]), "");
    LLVMAddIncoming(phis[i], &acc[i], &pre, 1);
  }
  LLVMAddIncoming(c, &G->g, &pre, 1);
  LLVMBuildCondBr(E->b, LLVMBuildICmp(E->b, LLVMIntULT, c, chunks, ""),
                  bodyBB, exit);
  LLVMPositionBuilderAtEnd(E->b, bodyBB);
  LLVMValueRef cur[FZ_NV_MAX_ACCUMULATORS];
  for (size_t i = 0; i < numAcc; ++i)
    cur[i] = phis[i];
  /* Four chunks per trip when every thread has a multiple of four: four
   * loads in flight per thread instead of one. */
  int64_t per = ip->chunks % gs == 0 && ip->perThread % 4 == 0 ? 4 : 1;
  for (int64_t k = 0; k < per; ++k)
    if (!emit_chunk(G, ip,
                    k ? LLVMBuildNUWAdd(E->b, c, fzLLIndex(E, k * gs), "")
                      : c,
                    cur, numAcc))
      return false;
  LLVMValueRef next = LLVMBuildNUWAdd(E->b, c, fzLLIndex(E, per * gs), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
  LLVMBuildBr(E->b, head);
  LLVMAddIncoming(c, &next, &latch, 1);
  for (size_t i = 0; i < numAcc; ++i)
    LLVMAddIncoming(phis[i], &cur[i], &latch, 1);
  LLVMPositionBuilderAtEnd(E->b, exit);
  for (size_t i = 0; i < numAcc; ++i)
    acc[i] = phis[i];
  return true;
}

static bool emit_reduction(Group *G, const FzNvInnerPlan *ip) {
  FzLLEmitter *E = G->E;
  FzOp *loop = ip->loop;
  size_t k = fzOpGetNumResults(loop);
  LLVMValueRef acc[FZ_NV_MAX_ACCUMULATORS];
  FzOp *cops[FZ_NV_MAX_ACCUMULATORS];
  for (size_t i = 0; i < k; ++i) {
    cops[i] = fzNvReductionCombine(loop, i);
    acc[i] = identity(E, cops[i], fzValueGetType(fzOpGetResult(loop, i)));
  }
  if (!emit_chunks(G, ip, acc, k))
    return false;
  for (size_t i = 0; i < k; ++i) {
    LLVMValueRef total = group_combine(G, cops[i], acc[i]);
    LLVMValueRef init = total ? fzLLGet(E, fzOpGetOperand(loop, 3 + i)) : NULL;
    LLVMValueRef r = init ? combine(E, cops[i], init, total) : NULL;
    if (!r)
      return false;
    fzLLSet(E, fzOpGetResult(loop, i), r);
  }
  return !E->failed;
}

static bool emit_phase(Group *G, const FzNvInnerPlan *ip) {
  FzLLEmitter *E = G->E;
  const FzNvNestPlan *p = G->p;
  /* Items past the end write nothing (their reads were clamped). */
  bool ragged = p->items % p->itemsPerBlock != 0;
  LLVMBasicBlockRef merge = NULL;
  if (ragged)
    open_if(E, G->valid, &merge);
  if (!emit_chunks(G, ip, NULL, 0))
    return false;
  if (ragged)
    close_if(E, merge);
  return true;
}

/*===--- The nest ---------------------------------------------------------===*/

static const FzNvInnerPlan *inner_plan(const FzNvNestPlan *p, FzOp *op) {
  for (size_t i = 0; i < p->numInner; ++i)
    if (p->inner[i].loop == op)
      return &p->inner[i];
  return NULL;
}

static bool emit_item(Group *G, FzOp *par, LLVMValueRef item) {
  FzLLEmitter *E = G->E;
  const FzNvNestPlan *p = G->p;
  FzBlock *body = fzLoopGetBody(par);
  /* Delinearize (row-major) into the nest's variables. */
  LLVMValueRef q = item;
  for (size_t d = p->numDims; d-- > 0;) {
    LLVMValueRef k = q;
    if (d > 0) {
      LLVMValueRef tr = fzLLIndex(E, p->trips[d]);
      k = LLVMBuildURem(E->b, q, tr, "");
      q = LLVMBuildUDiv(E->b, q, tr, "");
    }
    fzLLSet(E, fzBlockGetArgument(body, d),
            LLVMBuildNSWAdd(E->b, fzLLIndex(E, p->lb[d]),
                            LLVMBuildNSWMul(E->b, k, fzLLIndex(E, p->step[d]),
                                            ""),
                            ""));
  }
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op && !E->failed;
       op = fzOpGetNextInBlock(op)) {
    if (op == last && fzLoopGetOpcode(op) == FZ_LOOP_OP_YIELD)
      break;
    FzLoopOpcode c = fzLoopGetOpcode(op);
    bool ok = true;
    if (c == FZ_LOOP_OP_FOR || c == FZ_LOOP_OP_PARALLEL) {
      const FzNvInnerPlan *ip = inner_plan(p, op);
      if (!ip)
        return fzLLError(E, op, "emit-ptx: internal error: unplanned loop");
      ok = c == FZ_LOOP_OP_FOR ? emit_reduction(G, ip) : emit_phase(G, ip);
    } else if (c == FZ_LOOP_OP_BARRIER) {
      if (!p->phasesShareMemory)
        continue;
      if (p->mapping == FZ_NV_MAP_ROWS && p->group <= 32)
        warp_barrier(E);
      else
        block_barrier(E);
    } else if (c == FZ_LOOP_OP_STORE) {
      LLVMBasicBlockRef merge;
      open_if(E, G->leader, &merge);
      ok = emit_plain(E, op);
      close_if(E, merge);
    } else {
      ok = emit_plain(E, op);
    }
    if (!ok)
      return false;
  }
  return !E->failed;
}

bool fzNvEmitGroupedNest(FzLLEmitter *E, FzOp *par, const FzNvNestPlan *p) {
  if (p->numBlocks >= ((int64_t)1 << 31))
    return fzLLError(E, par, "emit-ptx: this nest needs %lld blocks; at most "
                             "2^31 - 1 are supported",
                     (long long)p->numBlocks);
  Group G;
  memset(&G, 0, sizeof G);
  G.E = E;
  G.p = p;
  G.tid = sreg(E, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef ctaid = sreg(E, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef nctaid = sreg(E, "llvm.nvvm.read.ptx.sreg.nctaid.x");
  unsigned shift = 0;
  while ((1u << shift) < p->group)
    ++shift;
  LLVMValueRef g32, local;
  if (p->mapping == FZ_NV_MAP_ROWS) {
    g32 = LLVMBuildAnd(E->b, G.tid, i32c(E, p->group - 1), "");
    local = LLVMBuildLShr(E->b, G.tid, i32c(E, shift), "");
  } else {
    g32 = LLVMBuildLShr(E->b, G.tid, i32c(E, 5), "");
    local = LLVMBuildAnd(E->b, G.tid, i32c(E, 31), "");
  }
  G.g = LLVMBuildZExt(E->b, g32, E->tI64, "");
  LLVMValueRef local64 = LLVMBuildZExt(E->b, local, E->tI64, "");

  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  LLVMBasicBlockRef head =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "blocks");
  LLVMBasicBlockRef bodyBB =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "block");
  LLVMBasicBlockRef exit =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "done");
  LLVMBuildBr(E->b, head);
  LLVMPositionBuilderAtEnd(E->b, head);
  LLVMValueRef blk = LLVMBuildPhi(E->b, E->tI32, "blk");
  LLVMAddIncoming(blk, &ctaid, &pre, 1);
  LLVMBuildCondBr(E->b,
                  LLVMBuildICmp(E->b, LLVMIntULT, blk,
                                i32c(E, p->numBlocks), ""),
                  bodyBB, exit);
  LLVMPositionBuilderAtEnd(E->b, bodyBB);
  LLVMValueRef item = LLVMBuildNUWAdd(
      E->b,
      LLVMBuildNUWMul(E->b, LLVMBuildZExt(E->b, blk, E->tI64, ""),
                      fzLLIndex(E, p->itemsPerBlock), ""),
      local64, "");
  G.valid = LLVMBuildICmp(E->b, LLVMIntULT, item, fzLLIndex(E, p->items), "");
  item = LLVMBuildSelect(E->b, G.valid, item, fzLLIndex(E, p->items - 1), "");
  G.leader = LLVMBuildAnd(
      E->b, G.valid, LLVMBuildICmp(E->b, LLVMIntEQ, g32, i32c(E, 0), ""), "");
  if (!emit_item(&G, par, item))
    return false;
  LLVMValueRef next = LLVMBuildNUWAdd(E->b, blk, nctaid, "");
  if (G.usedShared) { /* a next item (block-uniform) reuses the arrays */
    LLVMBasicBlockRef merge;
    open_if(E,
            LLVMBuildICmp(E->b, LLVMIntULT, next, i32c(E, p->numBlocks), ""),
            &merge);
    block_barrier(E);
    close_if(E, merge);
  }
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
  LLVMBuildBr(E->b, head);
  LLVMAddIncoming(blk, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(E->b, exit);
  LLVMBuildRetVoid(E->b);
  return !E->failed;
}
