/* dialects/kernel/sim_sm90.c - the simulator's Hopper ops: mbarriers,
 * bulk copies, fence.proxy.async and the warp-group mma (ops_sm90.c).
 *
 * The model keeps PTX's rules so that a kernel relying on more fails:
 *  - mbarrier: state beside shared memory (Sim.mbars: arrivals pending
 *    per phase, transaction bytes, phases completed). A phase completes
 *    when its arrivals and transaction bytes are all in; its wait (by
 *    parity) passes once it has. In lockstep nothing runs while a thread
 *    waits, so a wait on a phase that has not completed is reported (on a
 *    GPU: a deadlock, or a producer in another branch, which lockstep
 *    cannot run beside its consumers). A wait that passes counts as a
 *    barrier for race detection. Other threads may use an mbarrier only
 *    after a kernel.barrier that follows its init.
 *  - bulk copy: the issuing thread's write of the destination (race
 *    checked); the bytes are read from global memory and land at issue
 *    but stay pending until the mbarrier's current phase completes: any
 *    access before is an error. They are async-proxy writes.
 *  - proxies: a wgmma reads shared memory through the async proxy; a byte
 *    written by a thread through the generic proxy (a store, a cp.async)
 *    must be followed by that thread's kernel.fence_proxy_async before a
 *    wgmma reads it (then, as for any cross-thread read, a barrier).
 *  - wgmma: all 128 threads of a warp group execute it (an error
 *    otherwise) with the same operand addresses; its shared operands are
 *    read at issue through the PTX canonical layouts and the swizzle
 *    (fzKernelWgmmaAddress), rounded to tf32 for k8, the products summed
 *    in double and rounded to f32 once (as the mma.sync model); the
 *    bytes it reads stay "being read" until a wgmma_wait completes its
 *    group: a write to them before is an error.
 */
#include <stdio.h>
#include <string.h>

#include "dialects/kernel/sim_internal.h"

#define WG 128 /* threads of a warp group */

/*===--- State ----------------------------------------------------------===*/

bool fzKernelSimSm90Alloc(Sim *s) {
  size_t bytes = (size_t)s->sharedBytes + 1;
  size_t groups = (size_t)(s->nthreads / WG) + 1;
  s->fenceCount = fzCalloc(s->ctx, (size_t)s->nthreads, sizeof(uint32_t));
  s->proxyWriter = fzCalloc(s->ctx, bytes, sizeof(int32_t));
  s->proxyFence = fzCalloc(s->ctx, bytes, sizeof(uint32_t));
  s->wgReadBy = fzCalloc(s->ctx, bytes, sizeof(int32_t));
  s->wgReadGroup = fzCalloc(s->ctx, bytes, sizeof(int32_t));
  s->bulkBy = fzCalloc(s->ctx, bytes, sizeof(int32_t));
  s->wgCommitted = fzCalloc(s->ctx, groups, sizeof(int32_t));
  s->wgDone = fzCalloc(s->ctx, groups, sizeof(int32_t));
  return s->fenceCount && s->proxyWriter && s->proxyFence && s->wgReadBy &&
         s->wgReadGroup && s->bulkBy && s->wgCommitted && s->wgDone;
}

void fzKernelSimSm90Reset(Sim *s) {
  size_t bytes = (size_t)s->sharedBytes + 1;
  size_t groups = (size_t)(s->nthreads / WG) + 1;
  memset(s->fenceCount, 0, (size_t)s->nthreads * sizeof(uint32_t));
  memset(s->proxyWriter, 0, bytes * sizeof(int32_t));
  memset(s->wgReadBy, 0, bytes * sizeof(int32_t));
  memset(s->bulkBy, 0, bytes * sizeof(int32_t));
  memset(s->wgCommitted, 0, groups * sizeof(int32_t));
  memset(s->wgDone, 0, groups * sizeof(int32_t));
  s->numMbars = 0;
}

void fzKernelSimSm90Free(Sim *s) {
  fzFree(s->ctx, s->fenceCount);
  fzFree(s->ctx, s->proxyWriter);
  fzFree(s->ctx, s->proxyFence);
  fzFree(s->ctx, s->wgReadBy);
  fzFree(s->ctx, s->wgReadGroup);
  fzFree(s->ctx, s->bulkBy);
  fzFree(s->ctx, s->wgCommitted);
  fzFree(s->ctx, s->wgDone);
  fzFree(s->ctx, s->mbars);
}

bool fzKernelSimSm90Access(Sim *s, const SimInst *ins, int64_t t, int64_t k,
                           bool write) {
  if (s->bulkBy[k])
    return fzKernelSimError(s, ins, t, "%s shared memory (byte %lld) that a "
                            "pending kernel.bulk_copy writes: wait for the "
                            "mbarrier phase it completes first",
                            write ? "writes" : "reads", (long long)k);
  if (!write)
    return true;
  int32_t wg = s->wgReadBy[k];
  if (wg && s->wgReadGroup[k] >= s->wgDone[wg - 1])
    return fzKernelSimError(s, ins, t, "writes shared memory (byte %lld) "
                            "that a kernel.wgmma of warp group %d still "
                            "reads: a kernel.wgmma_wait must complete its "
                            "group first", (long long)k, (int)wg - 1);
  s->proxyWriter[k] = (int32_t)t + 1;
  s->proxyFence[k] = s->fenceCount[t];
  return true;
}

/*===--- mbarriers and bulk copies --------------------------------------===*/

/* Thread t's mbarrier at operands [at, ...): its entry (created when
 * `create`), NULL after an error. */
static SimMbarrier *mbarrier(Sim *s, const SimInst *ins, int64_t t,
                             uint32_t at, bool create) {
  const SimBuf *b = sim_buf(s, ins->ops[at], t);
  char *p = fzKernelSimAddress(s, ins, t, b, at + 1, 1);
  if (!p)
    return NULL;
  if (!b->shared || (p - s->shared) % 8 != 0) {
    fzKernelSimError(s, ins, t, "an mbarrier must be 8 aligned bytes of "
                     "shared memory");
    return NULL;
  }
  int64_t off = p - s->shared;
  for (size_t i = 0; i < s->numMbars; ++i)
    if (s->mbars[i].offset == off) {
      SimMbarrier *m = &s->mbars[i];
      if (!create && m->initBy != (int32_t)t && m->initEpoch == s->epoch) {
        fzKernelSimError(s, ins, t, "uses an mbarrier that another thread "
                         "initialized with no kernel.barrier between");
        return NULL;
      }
      return m;
    }
  if (!create) {
    fzKernelSimError(s, ins, t, "uses an mbarrier (shared byte %lld) that "
                     "no kernel.mbarrier_init initialized", (long long)off);
    return NULL;
  }
  if (s->numMbars == s->capMbars) {
    size_t cap = s->capMbars ? 2 * s->capMbars : 8;
    SimMbarrier *n = fzRealloc(s->ctx, s->mbars, cap * sizeof *n);
    if (!n)
      return NULL;
    s->mbars = n;
    s->capMbars = cap;
  }
  SimMbarrier *m = &s->mbars[s->numMbars++];
  memset(m, 0, sizeof *m);
  m->offset = off;
  return m;
}

/* Completes m's phase when its arrivals and bytes are in: the bulk
 * copies it tracked are no longer pending. */
static void mbarrier_settle(Sim *s, SimMbarrier *m) {
  if (m->pending != 0 || m->tx != 0)
    return;
  m->phase++;
  m->pending = m->expected;
  int32_t id = (int32_t)(m - s->mbars) + 1;
  for (int64_t k = 0; k < s->sharedBytes; ++k)
    if (s->bulkBy[k] == id)
      s->bulkBy[k] = 0;
}

static bool run_mbarrier(Sim *s, const SimInst *ins, const uint8_t *mask) {
  uint32_t last = ins->ops[ins->nops - 1];
  bool hasValue = ins->kopc != FZ_KERNEL_OP_MBARRIER_ARRIVE ||
                  fzKernelMbarrierArriveHasTx(ins->op);
  bool passed = false;
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    int64_t v = hasValue ? sim_scalar(s, last, t)->i : 0;
    SimMbarrier *m =
        mbarrier(s, ins, t, 0, ins->kopc == FZ_KERNEL_OP_MBARRIER_INIT);
    if (!m)
      return false;
    switch (ins->kopc) {
    case FZ_KERNEL_OP_MBARRIER_INIT:
      if (v < 1 || v >= (1 << 20))
        return fzKernelSimError(s, ins, t, "arrival count %lld is outside "
                                "[1, 2^20)", (long long)v);
      m->expected = m->pending = v;
      m->tx = m->phase = 0;
      m->initBy = (int32_t)t;
      m->initEpoch = s->epoch;
      break;
    case FZ_KERNEL_OP_MBARRIER_ARRIVE:
      if (v < 0 || v >= (1 << 20))
        return fzKernelSimError(s, ins, t, "transaction count %lld is "
                                "outside [0, 2^20)", (long long)v);
      if (m->pending == 0)
        return fzKernelSimError(s, ins, t, "arrives on an mbarrier whose "
                                "phase has all its arrivals");
      m->tx += v;
      m->pending--;
      mbarrier_settle(s, m);
      break;
    default: /* wait */
      if (v != 0 && v != 1)
        return fzKernelSimError(s, ins, t, "phase parity %lld is not 0 or 1",
                                (long long)v);
      if ((m->phase & 1) == v)
        return fzKernelSimError(s, ins, t, "waits for a phase of the "
                                "mbarrier that has not completed (%lld "
                                "arrivals and %lld transaction bytes "
                                "missing); in the simulator's lockstep "
                                "order nothing else can complete it",
                                (long long)m->pending, (long long)m->tx);
      passed = true;
      break;
    }
  }
  if (passed)
    s->epoch++;
  return true;
}

static bool run_bulk_copy(Sim *s, const SimInst *ins, const uint8_t *mask) {
  uint32_t si = (uint32_t)fzKernelBulkCopyGetSourceOperand(ins->op);
  uint32_t bi = (uint32_t)fzKernelBulkCopyGetBarrierOperand(ins->op);
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    const SimBuf *d = sim_buf(s, ins->ops[0], t);
    const SimBuf *g = sim_buf(s, ins->ops[si], t);
    int64_t bytes = sim_scalar(s, ins->ops[bi - 1], t)->i;
    int64_t esz = (int64_t)d->esz;
    if (bytes <= 0 || bytes % 16 || bytes >= (1 << 20))
      return fzKernelSimError(s, ins, t, "copies %lld bytes: a positive "
                              "multiple of 16 below 2^20 is required",
                              (long long)bytes);
    /* The bytes are contiguous across rows: the first element must be
     * in bounds and the whole range inside each allocation. */
    char *dp = fzKernelSimAddress(s, ins, t, d, 1, 1);
    char *gp = dp ? fzKernelSimAddress(s, ins, t, g, si + 1, 1) : NULL;
    if (!gp)
      return false;
    (void)esz;
    if (bytes > d->hi - dp || bytes > g->hi - gp)
      return fzKernelSimError(s, ins, t, "copies %lld bytes past the end of "
                              "its %s", (long long)bytes,
                              bytes > d->hi - dp ? "destination" : "source");
    if ((dp - s->shared) % 16 || (gp - g->lo) % 16)
      return fzKernelSimError(s, ins, t, "copies %s an address that is not "
                              "a multiple of 16 bytes",
                              (dp - s->shared) % 16 ? "to" : "from");
    SimMbarrier *m = mbarrier(s, ins, t, bi, false);
    if (!m || !fzKernelSimRaceCheck(s, ins, t, dp, bytes, true))
      return false;
    memcpy(dp, gp, (size_t)bytes);
    s->stats.globalRead += bytes;
    s->stats.sharedWritten += bytes;
    int64_t base = dp - s->shared;
    for (int64_t k = base; k < base + bytes; ++k) {
      s->bulkBy[k] = (int32_t)(m - s->mbars) + 1;
      s->proxyWriter[k] = 0;
    }
    m->tx -= bytes;
    mbarrier_settle(s, m);
  }
  return true;
}

/*===--- wgmma ----------------------------------------------------------===*/

/* Whether warp group w0..w0+127 executes ins: all of it (true, *any) or
 * none of it (true); false after reporting a partial one. */
static bool group_check(Sim *s, const SimInst *ins, const uint8_t *mask,
                        int64_t w0, bool *any) {
  *any = false;
  for (int64_t l = 0; l < WG && w0 + l < s->nthreads; ++l)
    *any = *any || mask[w0 + l];
  if (!*any)
    return true;
  for (int64_t l = 0; l < WG; ++l)
    if (w0 + l >= s->nthreads || !mask[w0 + l])
      return fzKernelSimError(s, ins, w0, "is a warp-group operation, but "
                              "thread %lld of this warp group (128 threads) "
                              "does not execute it", (long long)l);
  return true;
}

/* Copies operands [from, ...) to the results for the threads of mask. */
static void pass_through(Sim *s, const SimInst *ins, const uint8_t *mask,
                         uint32_t from) {
  for (int64_t t = 0; t < s->nthreads; ++t)
    if (mask[t])
      for (uint32_t i = 0; i < ins->nres; ++i)
        memcpy(sim_scalar(s, ins->res[i], t),
               sim_scalar(s, ins->ops[from + i], t), 2 * sizeof(FzLoopScalar));
}

static bool run_group_op(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int64_t keep = fzKernelWgmmaWaitGetPending(ins->op);
  for (int64_t w0 = 0; w0 < s->nthreads; w0 += WG) {
    bool any;
    if (!group_check(s, ins, mask, w0, &any))
      return false;
    if (!any)
      continue;
    int64_t g = w0 / WG;
    if (ins->kopc == FZ_KERNEL_OP_WGMMA_COMMIT)
      s->wgCommitted[g]++;
    else if (ins->kopc == FZ_KERNEL_OP_WGMMA_WAIT &&
             s->wgCommitted[g] - keep > s->wgDone[g])
      s->wgDone[g] = (int32_t)(s->wgCommitted[g] - keep);
  }
  pass_through(s, ins, mask, 0);
  return true;
}

/* The shared byte offset of thread t's operand at ops[at] (buffer, one
 * index); -1 after an error. */
static int64_t operand_start(Sim *s, const SimInst *ins, int64_t t,
                             uint32_t at) {
  const SimBuf *b = sim_buf(s, ins->ops[at], t);
  int64_t i = sim_scalar(s, ins->ops[at + 1], t)->i;
  if (i < 0 || i >= b->shape[0]) {
    fzKernelSimError(s, ins, t, "operand %s starts at element %lld, outside "
                     "its buffer of %lld", at ? "B" : "A", (long long)i,
                     (long long)b->shape[0]);
    return -1;
  }
  return (b->data - s->shared) + i * b->strides[0] * (int64_t)b->esz;
}

/* Reads element (mn, k) of one operand into *out after the checks. */
static bool read_operand(Sim *s, const SimInst *ins, int64_t w0, bool isB,
                         const FzKernelWgmmaLayout *L, int64_t start,
                         const SimBuf *b, int64_t mn, int64_t k, double *out) {
  int64_t esz = (int64_t)b->esz;
  int64_t a = fzKernelWgmmaAddress(L, start, mn, k, esz);
  if (a < b->lo - s->shared || a + esz > b->hi - s->shared)
    return fzKernelSimError(s, ins, w0, "reads %c[%lld][%lld] at shared "
                            "byte %lld, outside its buffer", isB ? 'B' : 'A',
                            (long long)(isB ? k : mn),
                            (long long)(isB ? mn : k), (long long)a);
  if (!fzKernelSimRaceCheck(s, ins, w0, s->shared + a, esz, false))
    return false;
  for (int64_t x = a; x < a + esz; ++x) {
    int32_t w = s->proxyWriter[x];
    if (w && s->fenceCount[w - 1] == s->proxyFence[x])
      return fzKernelSimError(s, ins, w0, "reads shared memory (byte %lld) "
                              "that thread %d wrote through the generic "
                              "proxy with no kernel.fence_proxy_async of "
                              "that thread since", (long long)x,
                              (int)w - 1);
    s->wgReadBy[x] = (int32_t)(w0 / WG) + 1;
    s->wgReadGroup[x] = s->wgCommitted[w0 / WG];
  }
  s->stats.sharedRead += esz;
  FzLoopScalar v = fzLoopReadElement(b->elt, s->shared + a);
  *out = fzTypeGetKind(b->elt) == FZ_TYPE_F32 ? fzKernelRoundTf32(v.f) : v.f;
  return true;
}

static bool run_wgmma(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int M, N, Kd;
  if (!fzKernelWgmmaGetShape(ins->op, &M, &N, &Kd))
    return fzKernelSimError(s, ins, -1, "malformed kernel.wgmma");
  FzKernelWgmmaLayout la = fzKernelWgmmaGetLayout(ins->op, false);
  FzKernelWgmmaLayout lb = fzKernelWgmmaGetLayout(ins->op, true);
  FzType *f32 = fzF32TypeGet(s->ctx);
  double *a = fzMalloc(s->ctx, (size_t)(64 * 16 + 16 * 256) * sizeof *a);
  if (!a)
    return false;
  double *b = a + 64 * 16;
  bool ok = true;
  for (int64_t w0 = 0; ok && w0 < s->nthreads; w0 += WG) {
    bool any;
    if (!(ok = group_check(s, ins, mask, w0, &any)) || !any)
      continue;
    int64_t sa = operand_start(s, ins, w0, 0), sb = operand_start(s, ins,
                                                                 w0, 2);
    for (int64_t l = 1; ok && l < WG && sa >= 0 && sb >= 0; ++l)
      if (operand_start(s, ins, w0 + l, 0) != sa ||
          operand_start(s, ins, w0 + l, 2) != sb)
        ok = fzKernelSimError(s, ins, w0 + l, "gives other operand "
                              "addresses than thread 0 of its warp group "
                              "(a wgmma's descriptors are uniform)");
    if (!ok || sa < 0 || sb < 0) {
      ok = false;
      break;
    }
    const SimBuf *ba = sim_buf(s, ins->ops[0], w0);
    const SimBuf *bb = sim_buf(s, ins->ops[2], w0);
    for (int m = 0; ok && m < 64; ++m)
      for (int k = 0; ok && k < Kd; ++k)
        ok = read_operand(s, ins, w0, false, &la, sa, ba, m, k,
                          &a[m * 16 + k]);
    for (int n = 0; ok && n < N; ++n)
      for (int k = 0; ok && k < Kd; ++k)
        ok = read_operand(s, ins, w0, true, &lb, sb, bb, n, k,
                          &b[k * 256 + n]);
    /* Pair p of lane l of warp w: row 16 w + l / 4 + 8 (p % 2), columns
     * 8 (p / 2) + 2 (l % 4) + h. */
    for (int64_t t = 0; ok && t < WG; ++t) {
      int w = (int)t / 32, l = (int)t % 32;
      for (int p = 0; p < N / 4; ++p) {
        int row = 16 * w + l / 4 + 8 * (p % 2);
        FzLoopScalar *c = sim_scalar(s, ins->ops[4 + p], w0 + t);
        FzLoopScalar *d = sim_scalar(s, ins->res[p], w0 + t);
        for (int h = 0; h < 2; ++h) {
          int col = 8 * (p / 2) + 2 * (l % 4) + h;
          double acc = c[h].f;
          for (int k = 0; k < Kd; ++k)
            acc += a[row * 16 + k] * b[k * 256 + col];
          d[h] = fzLoopNormalize(f32, (FzLoopScalar){.f = acc});
        }
      }
    }
  }
  fzFree(s->ctx, a);
  return ok;
}

bool fzKernelSimSm90(Sim *s, const SimInst *ins, const uint8_t *mask) {
  switch (ins->kopc) {
  case FZ_KERNEL_OP_MBARRIER_INIT:
  case FZ_KERNEL_OP_MBARRIER_ARRIVE:
  case FZ_KERNEL_OP_MBARRIER_WAIT:
    return run_mbarrier(s, ins, mask);
  case FZ_KERNEL_OP_BULK_COPY:
    return run_bulk_copy(s, ins, mask);
  case FZ_KERNEL_OP_FENCE_PROXY_ASYNC:
    for (int64_t t = 0; t < s->nthreads; ++t)
      if (mask[t])
        s->fenceCount[t]++;
    return true;
  case FZ_KERNEL_OP_WGMMA:
    return run_wgmma(s, ins, mask);
  case FZ_KERNEL_OP_WGMMA_FENCE:
  case FZ_KERNEL_OP_WGMMA_COMMIT:
  case FZ_KERNEL_OP_WGMMA_WAIT:
    return run_group_op(s, ins, mask);
  default:
    return fzKernelSimError(s, ins, -1, "is not an sm_90 op");
  }
}
