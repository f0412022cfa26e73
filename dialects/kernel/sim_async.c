/* dialects/kernel/sim_async.c - the simulator's ldmatrix and cp.async.
 *
 * ldmatrix runs once per warp (all 32 lanes must execute it, as for
 * mma): lane l < 8 * num supplies the address of row l % 8 of matrix
 * l / 8; each row read counts as that lane's read of 16 shared bytes for
 * race detection.
 *
 * cp.async keeps PTX's weak guarantees so that a kernel which relies on
 * more fails here:
 *  - at issue, the 16 destination bytes count as a write by the issuing
 *    thread (a race with another thread's access since the last barrier
 *    is reported) and become pending; the source bytes are read then;
 *  - kernel.cp_async_commit puts the thread's uncommitted copies into its
 *    next group; kernel.cp_async_wait N completes the copies of the
 *    thread's groups older than its N most recent (uncommitted copies are
 *    not waited for, as in PTX);
 *  - only completion writes the bytes, as a write by the issuing thread at
 *    that moment: other threads need a barrier after the wait;
 *  - any access to a pending byte (a load, store, ldmatrix or another
 *    cp.async, by any thread, the issuer included) is an error naming the
 *    issuing thread (fzKernelSimRaceCheck);
 *  - copies still pending when the block ends are dropped (nothing can
 *    read them any more).
 */
#include <string.h>

#include "dialects/kernel/sim_internal.h"

/*===--- ldmatrix -------------------------------------------------------===*/

bool fzKernelSimLdmatrix(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int num = (int)ins->nres;
  bool trans = fzKernelLdmatrixIsTransposed(ins->op);
  for (int64_t w0 = 0; w0 < s->nthreads; w0 += SIM_WARP) {
    bool any;
    if (!fzKernelSimWarpCheck(s, ins, mask, w0, &any))
      return false;
    if (!any)
      continue;
    /* m[q][r][c]: element c of row r of matrix q. */
    FzLoopScalar m[4][8][8];
    for (int64_t l = 0; l < 8 * num; ++l) {
      const SimBuf *b = sim_buf(s, ins->ops[0], w0 + l);
      char *p = fzKernelSimAddress(s, ins, w0 + l, b, 1, 8);
      if (!p)
        return false;
      if ((p - b->lo) % 16 != 0)
        return fzKernelSimError(s, ins, w0 + l, "reads a matrix row at an "
                                "address that is not a multiple of 16 bytes");
      if (!b->shared)
        return fzKernelSimError(s, ins, w0 + l, "reads rows outside shared "
                                "memory");
      if (!fzKernelSimRaceCheck(s, ins, w0 + l, p, 16, false))
        return false;
      s->stats.sharedRead += 16;
      for (int c = 0; c < 8; ++c)
        m[l / 8][l % 8][c] =
            fzLoopReadElement(b->elt, p + c * (int64_t)b->esz);
    }
    for (int64_t l = 0; l < SIM_WARP; ++l) {
      int row = (int)l / 4, col = 2 * ((int)l % 4);
      for (int q = 0; q < num; ++q) {
        FzLoopScalar *r = sim_scalar(s, ins->res[q], w0 + l);
        for (int h = 0; h < 2; ++h)
          r[h] = trans ? m[q][col + h][row] : m[q][row][col + h];
      }
    }
  }
  return true;
}

/*===--- cp.async -------------------------------------------------------===*/

static bool push_copy(Sim *s, const SimAsyncCopy *c) {
  if (s->numCopies == s->capCopies) {
    size_t cap = s->capCopies ? s->capCopies * 2 : 256;
    SimAsyncCopy *n = fzRealloc(s->ctx, s->copies, cap * sizeof *n);
    if (!n)
      return false;
    s->copies = n;
    s->capCopies = cap;
  }
  s->copies[s->numCopies++] = *c;
  return true;
}

bool fzKernelSimCpAsync(Sim *s, const SimInst *ins, const uint8_t *mask) {
  size_t si = fzKernelCpAsyncGetSourceOperand(ins->op);
  bool hasSize = fzKernelCpAsyncHasSourceSize(ins->op);
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    const SimBuf *d = sim_buf(s, ins->ops[0], t);
    const SimBuf *g = sim_buf(s, ins->ops[si], t);
    int64_t bytes = 16;
    if (hasSize) {
      bytes = sim_scalar(s, ins->ops[ins->nops - 1], t)->i;
      if (bytes < 0 || bytes > 16)
        return fzKernelSimError(s, ins, t, "source size %lld is outside "
                                "[0, 16] bytes", (long long)bytes);
    }
    int64_t esz = (int64_t)d->esz;
    char *dp = fzKernelSimAddress(s, ins, t, d, 1, 16 / esz);
    if (!dp)
      return false;
    /* The source must be a valid address even when nothing is read. */
    int64_t span = bytes > 0 ? (bytes + esz - 1) / esz : 1;
    char *gp = fzKernelSimAddress(s, ins, t, g, (uint32_t)si + 1, span);
    if (!gp)
      return false;
    if ((dp - d->lo) % 16 != 0 || (gp - g->lo) % 16 != 0)
      return fzKernelSimError(s, ins, t, "copies 16 bytes %s an address "
                              "that is not a multiple of 16",
                              (dp - d->lo) % 16 != 0 ? "to" : "from");
    if (!d->shared)
      return fzKernelSimError(s, ins, t, "copies to memory outside shared "
                              "memory");
    if (!fzKernelSimRaceCheck(s, ins, t, dp, 16, true))
      return false;
    SimAsyncCopy c = {dp, (int32_t)t, -1, {0}};
    memcpy(c.data, gp, (size_t)bytes);
    s->stats.globalRead += bytes;
    s->stats.sharedWritten += 16;
    if (!push_copy(s, &c))
      return false;
    int64_t base = dp - s->shared;
    for (int64_t k = base; k < base + 16; ++k)
      s->pendingBy[k] = (int32_t)t + 1;
  }
  return true;
}

bool fzKernelSimCpAsyncCommit(Sim *s, const SimInst *ins,
                              const uint8_t *mask) {
  (void)ins;
  for (size_t i = 0; i < s->numCopies; ++i) {
    SimAsyncCopy *c = &s->copies[i];
    if (c->group < 0 && mask[c->thread])
      c->group = s->committed[c->thread];
  }
  for (int64_t t = 0; t < s->nthreads; ++t)
    if (mask[t])
      s->committed[t]++;
  return true;
}

bool fzKernelSimCpAsyncWait(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int64_t keep = fzKernelCpAsyncWaitGetPending(ins->op);
  size_t out = 0;
  for (size_t i = 0; i < s->numCopies; ++i) {
    SimAsyncCopy c = s->copies[i];
    bool done = mask[c.thread] && c.group >= 0 &&
                c.group < s->committed[c.thread] - keep;
    if (!done) {
      s->copies[out++] = c;
      continue;
    }
    memcpy(c.dst, c.data, 16);
    int64_t base = c.dst - s->shared;
    for (int64_t k = base; k < base + 16; ++k) {
      s->pendingBy[k] = 0;
      s->wEpoch[k] = s->epoch;
      s->writer[k] = c.thread;
      /* A generic-proxy write (a wgmma needs the thread's fence). */
      s->proxyWriter[k] = c.thread + 1;
      s->proxyFence[k] = s->fenceCount[c.thread];
    }
  }
  s->numCopies = out;
  return true;
}

void fzKernelSimAsyncReset(Sim *s) {
  s->numCopies = 0;
  memset(s->committed, 0, (size_t)s->nthreads * sizeof *s->committed);
  memset(s->pendingBy, 0, ((size_t)s->sharedBytes + 1) * sizeof *s->pendingBy);
}
