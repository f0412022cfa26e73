/* dialects/kernel/sim.c - the kernel simulator: runs a kernel.func over a
 * grid on the host, for tests on machines without a GPU.
 *
 * Design: lockstep SIMT with active masks. The blocks of the grid run one
 * after the other; inside a block, every op runs for all the block's
 * threads before the next op starts, over a mask of the threads that are
 * executing it. Each SSA value has one slot per thread. Control flow in
 * kernels is structured (loop.for), so divergence is just a mask: a loop
 * iterates while any thread of the mask has iterations left, running its
 * body for those threads only.
 *
 * Why not one OS thread (or coroutine) per GPU thread: a block of 1024
 * threads would need 1024 stacks, an FzContext is single-threaded, and
 * ucontext-style switching confuses ASan. Lockstep needs neither, is
 * deterministic, and makes the collective ops exact and cheap:
 *  - kernel.barrier: every thread reaches it together by construction;
 *    the barrier is correct exactly when its mask holds every thread of
 *    the block, so a divergent barrier (a thread that skipped it, or left
 *    a loop early while others wait in it) is diagnosed, never a hang;
 *  - kernel.shuffle / kernel.mma read their source lanes' operands, which
 *    the lockstep order has computed; a source lane outside the mask is a
 *    diagnosed error (undefined on hardware);
 *  - atomics run thread by thread, so they are trivially atomic;
 *  - ldmatrix reads the rows its lanes address, per warp; cp.async copies
 *    stay pending until the issuing thread's cp_async_wait completes
 *    their group (sim_async.c says what is checked).
 * Programs that are correct on a GPU (no data races) give the same
 * results under any schedule, lockstep included. A data race on shared
 * memory (two threads touching a byte, one writing, with no barrier
 * between) is detected with per-byte shadow state (sim_ops.c); global
 * memory races are not checked.
 *
 * Kernel bodies may use the loop dialect's scalar ops (through
 * fzLoopEvalScalar, so semantics equal the loop interpreter's), loads,
 * stores, vector accesses, views, dims, constants, read-only constant
 * buffers and loop.for. Not simulated (an error at the op):
 * loop.parallel, loop.barrier, loop.alloc/dealloc, calls.
 *
 * Limits (sim_internal.h): 1024 threads per block, 65536 blocks and 2^20
 * threads per launch, 227 KiB shared memory per block, and a budget of
 * thread-steps per launch (FzKernelSimOptions.maxSteps), so that an
 * endless loop is an error instead of a hang. Shared memory is
 * filled with 0xff bytes (NaN, -1) at the start of every block to expose
 * reads of uninitialized memory.
 *
 * Ownership: nothing outlives fzKernelSimulate; argument buffers belong
 * to the caller.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dialects/kernel/sim_internal.h"

bool fzKernelSimError(Sim *s, const SimInst *ins, int64_t t, const char *fmt,
                      ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (t < 0)
    return fzOpEmitError(ins->op, "%s (block (%lld, %lld, %lld))", msg,
                         (long long)s->blockId[0], (long long)s->blockId[1],
                         (long long)s->blockId[2]);
  int64_t bx = s->block[0], by = s->block[1];
  return fzOpEmitError(ins->op, "%s (block (%lld, %lld, %lld), thread "
                                "(%lld, %lld, %lld))",
                       msg, (long long)s->blockId[0],
                       (long long)s->blockId[1], (long long)s->blockId[2],
                       (long long)(t % bx), (long long)(t / bx % by),
                       (long long)(t / (bx * by)));
}

/*===--- Compilation ----------------------------------------------------===*/

/* The lanes of a vector type, at most SIM_MAX_LANES + 1 (a type with
 * more must not wrap around in 32 bits; compile_op reports it). */
static uint32_t vector_lanes(const FzType *t) {
  int64_t n = fzShapedTypeGetDim(t, 0);
  return n > SIM_MAX_LANES ? SIM_MAX_LANES + 1 : (uint32_t)n;
}

static bool slot_new(Sim *s, FzValue *v, uint32_t *out) {
  if (s->numSlots == s->capSlots) {
    size_t cap = s->capSlots ? s->capSlots * 2 : 64;
    SimSlot *n = fzRealloc(s->ctx, s->slots, cap * sizeof *n);
    if (!n)
      return false;
    s->slots = n;
    s->capSlots = cap;
  }
  FzType *t = fzValueGetType(v);
  SimSlot *sl = &s->slots[s->numSlots];
  memset(sl, 0, sizeof *sl);
  if (fzTypeGetKind(t) == FZ_TYPE_BUFFER)
    sl->kind = SLOT_BUF;
  else if (fzTypeGetKind(t) == FZ_TYPE_VECTOR) {
    sl->kind = SLOT_VECTOR;
    sl->lanes = vector_lanes(t);
  }
  *out = (uint32_t)s->numSlots++;
  return fzPtrMapPut(&s->values, v, (void *)(uintptr_t)(*out + 1));
}

static SimBlock *compile_block(Sim *s, FzBlock *b);

/* Loop ops a kernel body may use; the rest are reported. */
static bool loop_op_supported(FzLoopOpcode opc) {
  switch (opc) {
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_UNKNOWN:
    return false;
  default:
    return true;
  }
}

/* A loop.constant_buffer's memory, built once from its dense value (a
 * constant a kernel recomputes instead of taking it as an argument). */
static SimBuf *constant_buffer(Sim *s, FzOp *op) {
  FzTensor *t =
      fzTensorFromDenseAttr(s->ctx, fzOpGetInherentAttr(op, FZ_STR("value")));
  SimBuf *b = t && t->rank <= SIM_MAX_RANK
                  ? fzArenaAlloc(&s->arena, sizeof *b)
                  : NULL;
  size_t bytes = t ? fzTensorGetNumBytes(t) : 0;
  char *data = b ? fzArenaAlloc(&s->arena, bytes ? bytes : 1) : NULL;
  if (data) {
    memcpy(data, t->data, bytes);
    memset(b, 0, sizeof *b);
    b->data = b->lo = data;
    b->hi = data + bytes;
    b->elt = t->dtype;
    b->esz = fzTypeGetStorageSize(t->dtype);
    b->rank = t->rank;
    int64_t st = 1;
    for (size_t i = t->rank; i-- > 0;) {
      b->shape[i] = t->shape[i];
      b->strides[i] = st;
      st *= t->shape[i];
    }
    b->readOnly = true;
  }
  fzTensorDestroy(t);
  return data ? b : NULL;
}

static bool compile_op(Sim *s, FzOp *op, SimInst *ins) {
  memset(ins, 0, sizeof *ins);
  ins->op = op;
  ins->lopc = fzLoopGetOpcode(op);
  ins->kopc = fzKernelGetOpcode(op);
  ins->pred = -1;
  if (ins->kopc == FZ_KERNEL_OP_UNKNOWN && !loop_op_supported(ins->lopc))
    return fzOpEmitError(op, "cannot run in the kernel simulator (kernel "
                             "bodies use kernel ops and the loop "
                             "dialect's scalar, memory and loop.for ops)");
  if (ins->kopc == FZ_KERNEL_OP_FUNC || ins->kopc == FZ_KERNEL_OP_LAUNCH)
    return fzOpEmitError(op, "cannot run inside a kernel");
  ins->nops = (uint32_t)fzOpGetNumOperands(op);
  ins->nres = (uint32_t)fzOpGetNumResults(op);
  ins->ops = fzArenaAlloc(&s->arena, (ins->nops + 1) * sizeof(uint32_t));
  ins->res = fzArenaAlloc(&s->arena, (ins->nres + 1) * sizeof(uint32_t));
  if (!ins->ops || !ins->res)
    return false;
  for (uint32_t i = 0; i < ins->nops; ++i) {
    void *v = fzPtrMapGet(&s->values, fzOpGetOperand(op, i));
    if (!v)
      return fzOpEmitError(op, "uses a value defined outside the kernel");
    ins->ops[i] = (uint32_t)((uintptr_t)v - 1);
  }
  FzType *vt = ins->nres ? fzValueGetType(fzOpGetResult(op, 0)) : NULL;
  if (ins->lopc == FZ_LOOP_OP_STORE || ins->lopc == FZ_LOOP_OP_VECTOR_STORE ||
      ins->kopc == FZ_KERNEL_OP_VECTOR_STORE)
    vt = fzValueGetType(fzOpGetOperand(op, 0));
  if (vt && fzTypeGetKind(vt) != FZ_TYPE_BUFFER) {
    bool vec = fzTypeGetKind(vt) == FZ_TYPE_VECTOR;
    ins->type = vec ? fzShapedTypeGetElementType(vt) : vt;
    ins->lanes = vec ? vector_lanes(vt) : 0;
  }
  if (ins->lanes > SIM_MAX_LANES)
    return fzOpEmitError(op, "has more than %d vector lanes", SIM_MAX_LANES);
  if (ins->nops) {
    size_t oi = ins->lopc == FZ_LOOP_OP_SELECT ? 1 : 0;
    FzType *ot = fzValueGetType(fzOpGetOperand(op, oi));
    ins->otype = fzTypeGetKind(ot) == FZ_TYPE_VECTOR
                     ? fzShapedTypeGetElementType(ot)
                     : ot;
  }
  switch (ins->kopc) {
  case FZ_KERNEL_OP_SHUFFLE:
    ins->pred = fzKernelShuffleGetMode(op);
    ins->imm = fzKernelShuffleGetWidth(op);
    break;
  case FZ_KERNEL_OP_ATOMIC:
    ins->pred = fzKernelAtomicGetKind(op);
    break;
  case FZ_KERNEL_OP_EXTRACT:
    ins->imm = fzKernelExtractGetPosition(op);
    break;
  case FZ_KERNEL_OP_THREAD_ID:
  case FZ_KERNEL_OP_BLOCK_ID:
  case FZ_KERNEL_OP_BLOCK_DIM:
  case FZ_KERNEL_OP_GRID_DIM:
    ins->imm = fzKernelGetDimension(op);
    break;
  case FZ_KERNEL_OP_DYNAMIC_SHARED:
    if (fzKernelDynamicSharedGetAlign(op) > s->dynAlign)
      s->dynAlign = fzKernelDynamicSharedGetAlign(op);
    break;
  case FZ_KERNEL_OP_SHARED_ALLOC: {
    FzType *t = fzValueGetType(fzOpGetResult(op, 0));
    ins->imm = s->staticShared;
    int64_t bytes = fzShapedTypeGetNumElements(t) *
                    (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
    s->staticShared += (bytes + 15) / 16 * 16;
    if (s->staticShared > SIM_MAX_SHARED)
      return fzOpEmitError(op, "takes the kernel's shared memory past %d "
                               "bytes", SIM_MAX_SHARED);
    break;
  }
  default:
    ins->pred = ins->lopc == FZ_LOOP_OP_CMPF || ins->lopc == FZ_LOOP_OP_CMPI
                    ? fzLoopCmpGetPredicate(op)
                    : -1;
    break;
  }
  if (ins->lopc == FZ_LOOP_OP_FOR &&
      !(ins->body = compile_block(s, fzLoopGetBody(op))))
    return false;
  if (ins->lopc == FZ_LOOP_OP_CONSTANT_BUFFER &&
      !(ins->constant = constant_buffer(s, op)))
    return fzOpEmitError(op, "cannot build this constant in the simulator");
  for (uint32_t i = 0; i < ins->nres; ++i)
    if (!slot_new(s, fzOpGetResult(op, i), &ins->res[i]))
      return false;
  return true;
}

static SimBlock *compile_block(Sim *s, FzBlock *b) {
  if (!b)
    return NULL;
  SimBlock *blk = fzArenaAlloc(&s->arena, sizeof *blk);
  if (!blk)
    return NULL;
  blk->nargs = fzBlockGetNumArguments(b);
  blk->n = fzBlockGetNumOps(b);
  blk->args = fzArenaAlloc(&s->arena, (blk->nargs + 1) * sizeof(uint32_t));
  blk->insts = fzArenaAlloc(&s->arena, (blk->n + 1) * sizeof(SimInst));
  if (!blk->args || !blk->insts)
    return NULL;
  for (size_t i = 0; i < blk->nargs; ++i)
    if (!slot_new(s, fzBlockGetArgument(b, i), &blk->args[i]))
      return NULL;
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op))
    if (!compile_op(s, op, &blk->insts[i++]))
      return NULL;
  return blk;
}

/*===--- Execution ------------------------------------------------------===*/

static bool run_block(Sim *s, const SimBlock *blk, const uint8_t *mask);

/* Copies thread t's value of slot `from` into slot `to`. */
static void copy_value(Sim *s, uint32_t to, uint32_t from, int64_t t) {
  const SimSlot *sl = &s->slots[to];
  if (sl->kind == SLOT_BUF)
    *sim_buf(s, to, t) = *sim_buf(s, from, t);
  else
    memcpy(sim_scalar(s, to, t), sim_scalar(s, from, t),
           (sl->lanes ? sl->lanes : 1) * sizeof(FzLoopScalar));
}

static size_t value_size(const SimSlot *sl) {
  return sl->kind == SLOT_BUF
             ? sizeof(SimBuf)
             : (sl->lanes ? sl->lanes : 1) * sizeof(FzLoopScalar);
}

static void *value_ptr(Sim *s, uint32_t slot, int64_t t) {
  return s->slots[slot].kind == SLOT_BUF ? (void *)sim_buf(s, slot, t)
                                         : (void *)sim_scalar(s, slot, t);
}

static bool run_for(Sim *s, const SimInst *ins, const uint8_t *mask) {
  const SimBlock *body = ins->body;
  size_t iters = ins->nops - 3;
  int64_t T = s->nthreads;
  uint32_t iv = body->args[0];
  for (int64_t t = 0; t < T; ++t) {
    if (!mask[t])
      continue;
    int64_t step = sim_scalar(s, ins->ops[2], t)->i;
    if (step <= 0)
      return fzKernelSimError(s, ins, t, "step %lld is not positive",
                              (long long)step);
    sim_scalar(s, iv, t)->i = sim_scalar(s, ins->ops[0], t)->i;
    for (size_t k = 0; k < iters; ++k)
      copy_value(s, body->args[k + 1], ins->ops[3 + k], t);
  }
  size_t wide = 0;
  for (size_t k = 0; k < iters; ++k)
    wide += value_size(&s->slots[body->args[k + 1]]);
  uint8_t *cur = fzMalloc(s->ctx, (size_t)T * 2 + wide + 1);
  if (!cur)
    return false;
  uint8_t *done = cur + T;
  char *tmp = (char *)done + T;
  memset(done, 0, (size_t)T);
  const SimInst *yield = &body->insts[body->n - 1];
  bool ok = true;
  for (;;) {
    bool any = false;
    for (int64_t t = 0; t < T; ++t) {
      cur[t] = mask[t] && !done[t] &&
               sim_scalar(s, iv, t)->i < sim_scalar(s, ins->ops[1], t)->i;
      any = any || cur[t];
    }
    if (!any || !(ok = run_block(s, body, cur)))
      break;
    for (int64_t t = 0; t < T; ++t) {
      if (!cur[t])
        continue;
      /* Snapshot the yielded values first: a yield may permute them. */
      char *w = tmp;
      for (size_t k = 0; k < iters; ++k) {
        size_t sz = value_size(&s->slots[body->args[k + 1]]);
        memcpy(w, value_ptr(s, yield->ops[k], t), sz);
        w += sz;
      }
      w = tmp;
      for (size_t k = 0; k < iters; ++k) {
        size_t sz = value_size(&s->slots[body->args[k + 1]]);
        memcpy(value_ptr(s, body->args[k + 1], t), w, sz);
        w += sz;
      }
      int64_t *i = &sim_scalar(s, iv, t)->i;
      int64_t step = sim_scalar(s, ins->ops[2], t)->i;
      if (*i > INT64_MAX - step)
        done[t] = 1;
      else
        *i += step;
    }
  }
  fzFree(s->ctx, cur);
  if (!ok)
    return false;
  for (int64_t t = 0; t < T; ++t)
    if (mask[t])
      for (size_t k = 0; k < iters; ++k)
        copy_value(s, ins->res[k], body->args[k + 1], t);
  return true;
}

static bool run_elementwise(Sim *s, const SimInst *ins, const uint8_t *mask) {
  FzLoopScalar a[3];
  uint32_t lanes = ins->lanes ? ins->lanes : 1;
  if (ins->nops > 3)
    return fzKernelSimError(s, ins, -1, "has more operands than a scalar op");
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    FzLoopScalar *r = sim_scalar(s, ins->res[0], t);
    for (uint32_t l = 0; l < lanes; ++l) {
      for (uint32_t k = 0; k < ins->nops; ++k) {
        const SimSlot *sl = &s->slots[ins->ops[k]];
        /* A scalar operand (a select's i1 condition) fits every lane. */
        a[k] = sim_scalar(s, ins->ops[k], t)[sl->lanes ? l : 0];
      }
      if (!fzLoopEvalScalar(ins->lopc, ins->pred, ins->type, ins->otype,
                            ins->nops, a, &r[l]))
        return fzKernelSimError(s, ins, t, "integer division by zero");
    }
  }
  return true;
}

static FzLoopScalar constant_value(const SimInst *ins) {
  FzAttr *v = fzOpGetInherentAttr(ins->op, FZ_STR("value"));
  FzLoopScalar c = {0};
  switch (fzAttrGetKind(v)) {
  case FZ_ATTR_DENSE:
    if (fzTypeIsFloat(ins->type))
      c.f = fzDenseAttrGetFloat(v, 0);
    else
      c.i = fzDenseAttrGetInt(v, 0);
    break;
  case FZ_ATTR_FLOAT:
    c.f = fzFloatAttrGetValue(v);
    break;
  case FZ_ATTR_BOOL:
    c.i = fzBoolAttrGetValue(v);
    break;
  default:
    c.i = fzIntegerAttrGetValue(v);
  }
  return fzLoopNormalize(ins->type, c);
}

/* Ids, lane ids and shared memory: values every thread computes alone. */
static bool run_thread_op(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int64_t bx = s->block[0], by = s->block[1];
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    FzLoopScalar *r = ins->nres && s->slots[ins->res[0]].kind != SLOT_BUF
                          ? sim_scalar(s, ins->res[0], t)
                          : NULL;
    int64_t tid[3] = {t % bx, t / bx % by, t / (bx * by)};
    switch (ins->kopc) {
    case FZ_KERNEL_OP_THREAD_ID:
      r->i = tid[ins->imm];
      break;
    case FZ_KERNEL_OP_BLOCK_ID:
      r->i = s->blockId[ins->imm];
      break;
    case FZ_KERNEL_OP_BLOCK_DIM:
      r->i = s->block[ins->imm];
      break;
    case FZ_KERNEL_OP_GRID_DIM:
      r->i = s->grid[ins->imm];
      break;
    case FZ_KERNEL_OP_LANE_ID:
      r->i = t % SIM_WARP;
      break;
    case FZ_KERNEL_OP_SHARED_ALLOC:
    case FZ_KERNEL_OP_DYNAMIC_SHARED: {
      FzType *bt = fzValueGetType(fzOpGetResult(ins->op, 0));
      SimBuf *b = sim_buf(s, ins->res[0], t);
      memset(b, 0, sizeof *b);
      b->elt = fzShapedTypeGetElementType(bt);
      b->esz = fzTypeGetStorageSize(b->elt);
      b->rank = fzShapedTypeGetRank(bt);
      b->shared = true;
      b->lo = s->shared;
      b->hi = s->shared + s->sharedBytes;
      if (ins->kopc == FZ_KERNEL_OP_DYNAMIC_SHARED) {
        b->data = s->shared + s->dynOffset;
        b->shape[0] = s->dynShared / (int64_t)b->esz;
        b->strides[0] = 1;
        break;
      }
      b->data = s->shared + ins->imm;
      int64_t st = 1;
      for (size_t d = b->rank; d-- > 0;) {
        b->shape[d] = fzShapedTypeGetDim(bt, d);
        b->strides[d] = st;
        st *= b->shape[d];
      }
      break;
    }
    default:
      break;
    }
  }
  return true;
}

/* kernel.extract (ins->imm: the lane) and kernel.from_elements. */
static bool run_lanes(Sim *s, const SimInst *ins, const uint8_t *mask) {
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    FzLoopScalar *r = sim_scalar(s, ins->res[0], t);
    if (ins->kopc == FZ_KERNEL_OP_EXTRACT)
      *r = sim_scalar(s, ins->ops[0], t)[ins->imm];
    else
      for (uint32_t l = 0; l < ins->nops; ++l)
        r[l] = *sim_scalar(s, ins->ops[l], t);
  }
  return true;
}

static bool run_inst(Sim *s, const SimInst *ins, const uint8_t *mask) {
  switch (ins->kopc) {
  case FZ_KERNEL_OP_RETURN:
    return true;
  case FZ_KERNEL_OP_BARRIER:
    return fzKernelSimBarrier(s, ins, mask);
  case FZ_KERNEL_OP_SHUFFLE:
    return fzKernelSimShuffle(s, ins, mask);
  case FZ_KERNEL_OP_MMA:
    return fzKernelSimMma(s, ins, mask);
  case FZ_KERNEL_OP_ATOMIC:
    return fzKernelSimAtomic(s, ins, mask);
  case FZ_KERNEL_OP_VECTOR_LOAD:
  case FZ_KERNEL_OP_VECTOR_STORE:
    return fzKernelSimMemory(s, ins, mask);
  case FZ_KERNEL_OP_LDMATRIX:
    return fzKernelSimLdmatrix(s, ins, mask);
  case FZ_KERNEL_OP_CP_ASYNC:
    return fzKernelSimCpAsync(s, ins, mask);
  case FZ_KERNEL_OP_CP_ASYNC_COMMIT:
    return fzKernelSimCpAsyncCommit(s, ins, mask);
  case FZ_KERNEL_OP_CP_ASYNC_WAIT:
    return fzKernelSimCpAsyncWait(s, ins, mask);
  case FZ_KERNEL_OP_EXTRACT:
  case FZ_KERNEL_OP_FROM_ELEMENTS:
    return run_lanes(s, ins, mask);
  case FZ_KERNEL_OP_MBARRIER_INIT:
  case FZ_KERNEL_OP_MBARRIER_ARRIVE:
  case FZ_KERNEL_OP_MBARRIER_WAIT:
  case FZ_KERNEL_OP_BULK_COPY:
  case FZ_KERNEL_OP_FENCE_PROXY_ASYNC:
  case FZ_KERNEL_OP_WGMMA_FENCE:
  case FZ_KERNEL_OP_WGMMA:
  case FZ_KERNEL_OP_WGMMA_COMMIT:
  case FZ_KERNEL_OP_WGMMA_WAIT:
    return fzKernelSimSm90(s, ins, mask);
  case FZ_KERNEL_OP_UNKNOWN:
    break;
  default:
    return run_thread_op(s, ins, mask);
  }
  switch (ins->lopc) {
  case FZ_LOOP_OP_CONSTANT: {
    FzLoopScalar c = constant_value(ins);
    uint32_t lanes = ins->lanes ? ins->lanes : 1;
    for (int64_t t = 0; t < s->nthreads; ++t)
      if (mask[t])
        for (uint32_t l = 0; l < lanes; ++l)
          sim_scalar(s, ins->res[0], t)[l] = c;
    return true;
  }
  case FZ_LOOP_OP_SPLAT:
    for (int64_t t = 0; t < s->nthreads; ++t)
      if (mask[t])
        for (uint32_t l = 0; l < ins->lanes; ++l)
          sim_scalar(s, ins->res[0], t)[l] = *sim_scalar(s, ins->ops[0], t);
    return true;
  case FZ_LOOP_OP_LOAD:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VECTOR_STORE:
    return fzKernelSimMemory(s, ins, mask);
  case FZ_LOOP_OP_VIEW:
    return fzKernelSimView(s, ins, mask);
  case FZ_LOOP_OP_CONSTANT_BUFFER:
    for (int64_t t = 0; t < s->nthreads; ++t)
      if (mask[t])
        *sim_buf(s, ins->res[0], t) = *ins->constant;
    return true;
  case FZ_LOOP_OP_DIM: {
    int64_t d = fzIntegerAttrGetValue(
        fzOpGetInherentAttr(ins->op, FZ_STR("index")));
    for (int64_t t = 0; t < s->nthreads; ++t)
      if (mask[t])
        sim_scalar(s, ins->res[0], t)->i = sim_buf(s, ins->ops[0], t)->shape[d];
    return true;
  }
  case FZ_LOOP_OP_FOR:
    return run_for(s, ins, mask);
  case FZ_LOOP_OP_YIELD:
    return true;
  default:
    return run_elementwise(s, ins, mask);
  }
}

static bool run_block(Sim *s, const SimBlock *blk, const uint8_t *mask) {
  /* The budget: every op counts the block's threads (masked or not). */
  if (blk->n) {
    s->steps += (int64_t)blk->n * s->nthreads;
    if (s->steps > s->maxSteps)
      return fzKernelSimError(s, &blk->insts[0], -1,
                              "the launch exceeds its budget of %lld "
                              "thread-steps (an endless loop? "
                              "FzKernelSimOptions.maxSteps; fuse-run "
                              "--max-steps)",
                              (long long)s->maxSteps);
  }
  for (size_t i = 0; i < blk->n; ++i)
    if (!run_inst(s, &blk->insts[i], mask))
      return false;
  return true;
}

/*===--- Launch ---------------------------------------------------------===*/

static bool check_config(FzOp *at, const FzKernelLaunchConfig *cfg) {
  static const char *const xyz[3] = {"x", "y", "z"};
  static const int64_t blockMax[3] = {1024, 1024, 64};
  int64_t blocks = 1, threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (cfg->grid[d] < 1 || cfg->grid[d] > SIM_MAX_BLOCKS)
      return fzOpEmitError(at, "grid size %lld along %s is outside [1, %d]",
                           (long long)cfg->grid[d], xyz[d], SIM_MAX_BLOCKS);
    if (cfg->block[d] < 1 || cfg->block[d] > blockMax[d])
      return fzOpEmitError(at, "block size %lld along %s is outside [1, "
                               "%lld]", (long long)cfg->block[d], xyz[d],
                           (long long)blockMax[d]);
    blocks *= cfg->grid[d];
    threads *= cfg->block[d];
  }
  if (threads > SIM_MAX_BLOCK_THREADS)
    return fzOpEmitError(at, "blocks of %lld threads exceed the limit of %d",
                         (long long)threads, SIM_MAX_BLOCK_THREADS);
  if (blocks > SIM_MAX_BLOCKS || blocks * threads > SIM_MAX_THREADS)
    return fzOpEmitError(at, "a grid of %lld blocks of %lld threads is too "
                             "large for the simulator (at most %d blocks and "
                             "%lld threads)", (long long)blocks,
                         (long long)threads, SIM_MAX_BLOCKS,
                         (long long)SIM_MAX_THREADS);
  if (cfg->sharedBytes < 0 || cfg->sharedBytes > SIM_MAX_SHARED)
    return fzOpEmitError(at, "dynamic shared memory of %lld bytes is outside "
                             "[0, %d]", (long long)cfg->sharedBytes,
                         SIM_MAX_SHARED);
  return true;
}

static bool bind_args(Sim *s, FzOp *at, FzBlock *entry, size_t n,
                      const FzLoopInterpValue *args, uint32_t *argSlots) {
  if (n != fzBlockGetNumArguments(entry))
    return fzOpEmitError(at, "passes %zu arguments to a kernel of %zu", n,
                         fzBlockGetNumArguments(entry));
  for (size_t i = 0; i < n; ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(entry, i));
    if (args[i].type != t)
      return fzOpEmitError(at, "argument #%zu's type does not match the "
                               "kernel's", i);
    uint32_t slot = argSlots[i];
    for (int64_t th = 0; th < s->nthreads; ++th) {
      if (fzTypeGetKind(t) != FZ_TYPE_BUFFER) {
        *sim_scalar(s, slot, th) = args[i].scalar;
        continue;
      }
      SimBuf *b = sim_buf(s, slot, th);
      memset(b, 0, sizeof *b);
      b->elt = fzShapedTypeGetElementType(t);
      b->esz = fzTypeGetStorageSize(b->elt);
      b->rank = args[i].rank;
      if (b->rank > SIM_MAX_RANK)
        return fzOpEmitError(at, "argument #%zu has rank above %d", i,
                             SIM_MAX_RANK);
      for (size_t d = 0; d < b->rank; ++d) {
        b->shape[d] = args[i].shape[d];
        b->strides[d] = args[i].strides[d];
      }
      b->data = args[i].data;
      b->lo = args[i].lo;
      b->hi = args[i].hi;
      b->readOnly = args[i].readOnly;
    }
  }
  return true;
}

static bool alloc_state(Sim *s) {
  for (size_t i = 0; i < s->numSlots; ++i) {
    s->slots[i].mem = fzCalloc(s->ctx, (size_t)s->nthreads,
                               value_size(&s->slots[i]));
    if (!s->slots[i].mem)
      return false;
  }
  size_t bytes = (size_t)s->sharedBytes + 1;
  s->shared = fzMalloc(s->ctx, bytes);
  s->wEpoch = fzCalloc(s->ctx, bytes, sizeof *s->wEpoch);
  s->rEpoch = fzCalloc(s->ctx, bytes, sizeof *s->rEpoch);
  s->writer = fzCalloc(s->ctx, bytes, sizeof *s->writer);
  s->reader = fzCalloc(s->ctx, bytes, sizeof *s->reader);
  s->pendingBy = fzCalloc(s->ctx, bytes, sizeof *s->pendingBy);
  s->committed = fzCalloc(s->ctx, (size_t)s->nthreads, sizeof *s->committed);
  return s->shared && s->wEpoch && s->rEpoch && s->writer && s->reader &&
         s->pendingBy && s->committed && fzKernelSimSm90Alloc(s);
}

static void free_state(Sim *s) {
  for (size_t i = 0; i < s->numSlots; ++i)
    fzFree(s->ctx, s->slots[i].mem);
  fzFree(s->ctx, s->slots);
  fzFree(s->ctx, s->shared);
  fzFree(s->ctx, s->wEpoch);
  fzFree(s->ctx, s->rEpoch);
  fzFree(s->ctx, s->writer);
  fzFree(s->ctx, s->reader);
  fzFree(s->ctx, s->pendingBy);
  fzFree(s->ctx, s->committed);
  fzFree(s->ctx, s->copies);
  fzKernelSimSm90Free(s);
  fzPtrMapFree(&s->values);
  fzArenaReset(&s->arena);
}

bool fzKernelSimulate(FzOp *kernel, FzOp *site,
                      const FzKernelLaunchConfig *cfg, size_t numArgs,
                      const FzLoopInterpValue *args) {
  return fzKernelSimulateWithOptions(kernel, site, cfg, NULL, numArgs, args);
}

bool fzKernelSimulateWithOptions(FzOp *kernel, FzOp *site,
                                 const FzKernelLaunchConfig *cfg,
                                 const FzKernelSimOptions *options,
                                 size_t numArgs,
                                 const FzLoopInterpValue *args) {
  FzOp *at = site ? site : kernel;
  if (fzKernelGetOpcode(kernel) != FZ_KERNEL_OP_FUNC)
    return fzOpEmitError(at, "does not launch a kernel.func");
  if (!check_config(at, cfg))
    return false;
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(kernel, 0));
  if (!entry)
    return fzOpEmitError(kernel, "has no body to simulate");
  Sim s;
  memset(&s, 0, sizeof s);
  s.ctx = fzOpGetContext(kernel);
  fzArenaInit(&s.arena, s.ctx);
  fzPtrMapInit(&s.values, s.ctx);
  for (int d = 0; d < 3; ++d) {
    s.grid[d] = cfg->grid[d];
    s.block[d] = cfg->block[d];
  }
  s.dynShared = cfg->sharedBytes;
  s.nthreads = s.block[0] * s.block[1] * s.block[2];
  s.maxSteps = options && options->maxSteps > 0 ? options->maxSteps
                                                : FZ_KERNEL_SIM_DEFAULT_STEPS;
  s.dynAlign = 16;
  s.entry = compile_block(&s, entry);
  bool ok = s.entry != NULL;
  /* Dynamic shared memory follows the static allocations at its
   * alignment (as the PTX's .extern .shared .align places it). */
  s.dynOffset = (s.staticShared + s.dynAlign - 1) / s.dynAlign * s.dynAlign;
  if (ok && s.dynOffset + s.dynShared > SIM_MAX_SHARED)
    ok = fzOpEmitError(at, "needs %lld bytes of shared memory per block, "
                           "more than %d", (long long)(s.dynOffset +
                                                       s.dynShared),
                       SIM_MAX_SHARED);
  s.sharedBytes = s.dynOffset + s.dynShared;
  ok = ok && alloc_state(&s) &&
       bind_args(&s, at, entry, numArgs, args, s.entry->args);
  uint8_t *mask = ok ? fzMalloc(s.ctx, (size_t)s.nthreads) : NULL;
  ok = ok && mask;
  if (ok)
    memset(mask, 1, (size_t)s.nthreads);
  for (int64_t bz = 0; ok && bz < s.grid[2]; ++bz)
    for (int64_t by = 0; ok && by < s.grid[1]; ++by)
      for (int64_t bx = 0; ok && bx < s.grid[0]; ++bx) {
        s.blockId[0] = bx;
        s.blockId[1] = by;
        s.blockId[2] = bz;
        memset(s.shared, 0xff, (size_t)s.sharedBytes);
        fzKernelSimAsyncReset(&s);
        fzKernelSimSm90Reset(&s);
        s.epoch++;
        ok = run_block(&s, s.entry, mask);
      }
  fzFree(s.ctx, mask);
  FzKernelSimStats *stats = options ? options->stats : NULL;
  if (stats) {
    stats->globalRead += s.stats.globalRead;
    stats->globalWritten += s.stats.globalWritten;
    stats->sharedRead += s.stats.sharedRead;
    stats->sharedWritten += s.stats.sharedWritten;
  }
  free_state(&s);
  return ok;
}

/*===--- The loop-interpreter extension ---------------------------------===*/

static bool ext_handles(void *ud, const FzOp *op) {
  (void)ud;
  return fzKernelGetOpcode(op) == FZ_KERNEL_OP_LAUNCH;
}

static bool ext_run(void *ud, FzOp *op, size_t n,
                    const FzLoopInterpValue *vals) {
  const FzKernelSimOptions *o = ud;
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("kernel"));
  FzOp *table = fzSymbolTableGetNearest(fzOpGetParentOp(op));
  FzOp *k = callee && table
                ? fzSymbolTableLookupIn(table, fzSymbolRefAttrGetRoot(callee))
                : NULL;
  if (!k || n < FZ_KERNEL_LAUNCH_NUM_CONFIG)
    return fzOpEmitError(op, "does not reference a kernel.func");
  FzKernelLaunchConfig cfg;
  for (int d = 0; d < 3; ++d) {
    cfg.grid[d] = vals[d].scalar.i;
    cfg.block[d] = vals[3 + d].scalar.i;
  }
  cfg.sharedBytes = vals[6].scalar.i;
  if (!o || !o->report)
    return fzKernelSimulateWithOptions(k, op, &cfg, o,
                                       n - FZ_KERNEL_LAUNCH_NUM_CONFIG,
                                       vals + FZ_KERNEL_LAUNCH_NUM_CONFIG);
  /* Reported: this launch's bytes alone, then added to o->stats. */
  FzKernelSimStats launch = {0, 0, 0, 0};
  FzKernelSimOptions one = *o;
  one.stats = &launch;
  bool ok = fzKernelSimulateWithOptions(k, op, &cfg, &one,
                                        n - FZ_KERNEL_LAUNCH_NUM_CONFIG,
                                        vals + FZ_KERNEL_LAUNCH_NUM_CONFIG);
  if (o->stats) {
    o->stats->globalRead += launch.globalRead;
    o->stats->globalWritten += launch.globalWritten;
    o->stats->sharedRead += launch.sharedRead;
    o->stats->sharedWritten += launch.sharedWritten;
  }
  if (ok)
    o->report(o->reportData, op, k, &launch);
  return ok;
}

static const FzLoopInterpExtension sim_extension = {ext_handles, ext_run,
                                                    NULL};

const FzLoopInterpExtension *fzKernelSimExtension(void) {
  return &sim_extension;
}

void fzKernelSimExtensionInit(FzLoopInterpExtension *ext,
                              const FzKernelSimOptions *options) {
  *ext = sim_extension;
  ext->userData = (void *)options;
}
