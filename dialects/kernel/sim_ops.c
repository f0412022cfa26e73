/* dialects/kernel/sim_ops.c - the kernel simulator's memory and
 * collective ops: loads and stores (bounds, alignment and shared-memory
 * race checks), views, atomics, barriers, warp shuffles and mma. Each
 * function runs one op for every thread of a mask (sim.c's lockstep
 * design explains why collectives can read other lanes' operands).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dialects/kernel/sim_internal.h"

/*===--- Shared-memory race detection -----------------------------------===*/

enum { READERS_MANY = -2 };

static void thread_name(const Sim *s, int64_t t, char *buf, size_t n) {
  int64_t bx = s->block[0], by = s->block[1];
  snprintf(buf, n, "thread (%lld, %lld, %lld)", (long long)(t % bx),
           (long long)(t / bx % by), (long long)(t / (bx * by)));
}

bool fzKernelSimRaceCheck(Sim *s, const SimInst *ins, int64_t t, const char *p,
                          int64_t n, bool write) {
  int64_t base = p - s->shared;
  int32_t me = (int32_t)t;
  for (int64_t k = base; k < base + n; ++k) {
    if (!fzKernelSimSm90Access(s, ins, t, k, write))
      return false;
    if (s->pendingBy[k]) {
      char who[64];
      thread_name(s, s->pendingBy[k] - 1, who, sizeof who);
      return fzKernelSimError(s, ins, t, "%s shared memory (byte %lld) that "
                              "a pending cp.async of %s writes: that thread's "
                              "kernel.cp_async_wait (then a kernel.barrier "
                              "for other threads) must come first",
                              write ? "writes" : "reads", (long long)k, who);
    }
    bool wNow = s->wEpoch[k] == s->epoch, rNow = s->rEpoch[k] == s->epoch;
    int32_t other = -1;
    if (wNow && s->writer[k] != me)
      other = s->writer[k];
    else if (write && rNow && s->reader[k] != me)
      other = s->reader[k];
    if (other != -1) {
      char who[64] = "several threads";
      if (other >= 0)
        thread_name(s, other, who, sizeof who);
      return fzKernelSimError(s, ins, t, "data race on shared memory (byte "
                              "%lld): %s it after %s %s it with no "
                              "kernel.barrier between",
                              (long long)k, write ? "writes" : "reads", who,
                              wNow && s->writer[k] != me ? "wrote" : "read");
    }
    if (write) {
      s->wEpoch[k] = s->epoch;
      s->writer[k] = me;
    } else if (!rNow) {
      s->rEpoch[k] = s->epoch;
      s->reader[k] = me;
    } else if (s->reader[k] != me) {
      s->reader[k] = READERS_MANY;
    }
  }
  return true;
}

/*===--- Loads and stores -----------------------------------------------===*/

char *fzKernelSimAddress(Sim *s, const SimInst *ins, int64_t t,
                         const SimBuf *b, uint32_t from, int64_t span) {
  int64_t off = 0;
  for (size_t d = 0; d < b->rank; ++d) {
    int64_t i = sim_scalar(s, ins->ops[from + d], t)->i;
    int64_t extent = d + 1 == b->rank ? span : 1;
    if (i < 0 || i > b->shape[d] - extent) {
      fzKernelSimError(s, ins, t, "index %lld%s is out of bounds for "
                       "dimension %zu (size %lld)", (long long)i,
                       extent > 1 ? " (+ vector lanes)" : "", d,
                       (long long)b->shape[d]);
      return NULL;
    }
    off += i * b->strides[d];
  }
  char *p = b->data + off * (int64_t)b->esz;
  if (!b->data || p < b->lo || p + span * (int64_t)b->esz > b->hi) {
    fzKernelSimError(s, ins, t, "accesses memory outside the buffer's "
                     "allocation");
    return NULL;
  }
  return p;
}

bool fzKernelSimMemory(Sim *s, const SimInst *ins, const uint8_t *mask) {
  bool isStore = ins->lopc == FZ_LOOP_OP_STORE ||
                 ins->lopc == FZ_LOOP_OP_VECTOR_STORE ||
                 ins->kopc == FZ_KERNEL_OP_VECTOR_STORE;
  bool aligned = ins->kopc != FZ_KERNEL_OP_UNKNOWN;
  uint32_t bi = isStore ? 1 : 0;
  int64_t span = ins->lanes ? ins->lanes : 1;
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    const SimBuf *b = sim_buf(s, ins->ops[bi], t);
    if (isStore && b->readOnly)
      return fzKernelSimError(s, ins, t, "writes a read-only buffer");
    char *p = fzKernelSimAddress(s, ins, t, b, bi + 1, span);
    if (!p)
      return false;
    int64_t bytes = span * (int64_t)b->esz;
    if (aligned && (p - b->lo) % bytes != 0)
      return fzKernelSimError(s, ins, t, "accesses %lld bytes at an "
                              "address that is not a multiple of %lld",
                              (long long)bytes, (long long)bytes);
    if (b->shared && !fzKernelSimRaceCheck(s, ins, t, p, bytes, isStore))
      return false;
    *(b->shared ? (isStore ? &s->stats.sharedWritten : &s->stats.sharedRead)
                : (isStore ? &s->stats.globalWritten : &s->stats.globalRead)) +=
        bytes;
    if (isStore) {
      const FzLoopScalar *v = sim_scalar(s, ins->ops[0], t);
      for (int64_t l = 0; l < span; ++l)
        fzLoopWriteElement(b->elt, p + l * (int64_t)b->esz, v[l]);
    } else {
      FzLoopScalar *r = sim_scalar(s, ins->res[0], t);
      for (int64_t l = 0; l < span; ++l)
        r[l] = fzLoopReadElement(b->elt, p + l * (int64_t)b->esz);
    }
  }
  return true;
}

bool fzKernelSimView(Sim *s, const SimInst *ins, const uint8_t *mask) {
  FzType *rt = fzValueGetType(fzOpGetResult(ins->op, 0));
  size_t rank = fzShapedTypeGetRank(rt);
  const int64_t *strides = fzBufferTypeGetStrides(rt);
  if (rank > SIM_MAX_RANK)
    return fzKernelSimError(s, ins, -1, "has rank above %d", SIM_MAX_RANK);
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    const SimBuf *src = sim_buf(s, ins->ops[0], t);
    SimBuf *b = sim_buf(s, ins->res[0], t);
    SimBuf v = *src;
    int64_t off = ins->nops > 1 ? sim_scalar(s, ins->ops[1], t)->i : 0;
    v.rank = rank;
    int64_t st = 1, lo = 0, hi = 0;
    bool empty = false;
    for (size_t d = rank; d-- > 0;) {
      v.shape[d] = fzShapedTypeGetDim(rt, d);
      if (v.shape[d] == FZ_DYNAMIC)
        return fzKernelSimError(s, ins, t, "views with a dynamic size are "
                                "not simulated");
      v.strides[d] = strides ? strides[d] : st;
      /* Keep every later sum far from int64 overflow (types may hold
       * any strides). */
      if (v.strides[d] == FZ_DYNAMIC ||
          fabs((double)v.shape[d] * (double)v.strides[d]) > 0x1p56 ||
          fabs((double)st * (double)v.shape[d]) > 0x1p56)
        return fzKernelSimError(s, ins, t, "view's extent is too large for "
                                "the simulator");
      st *= v.shape[d];
      empty = empty || v.shape[d] == 0;
      int64_t ext = (v.shape[d] - 1) * v.strides[d];
      if (ext > 0)
        hi += ext;
      else
        lo += ext;
    }
    int64_t total = (src->hi - src->lo) / (int64_t)src->esz;
    if (off < -total || off > total)
      return fzKernelSimError(s, ins, t, "view (offset %lld) reaches outside "
                              "its source's memory", (long long)off);
    int64_t first = (src->data - src->lo) / (int64_t)src->esz + off;
    if (!empty && (first + lo < 0 || first + hi >= total))
      return fzKernelSimError(s, ins, t, "view (offset %lld) reaches outside "
                              "its source's memory", (long long)off);
    v.data = src->lo + first * (int64_t)src->esz;
    if (first < 0 || first > total)
      v.data = src->lo;
    *b = v;
  }
  return true;
}

/*===--- Atomics --------------------------------------------------------===*/

bool fzKernelSimAtomic(Sim *s, const SimInst *ins, const uint8_t *mask) {
  bool isFloat = fzTypeIsFloat(ins->type);
  FzLoopOpcode opc;
  switch (ins->pred) {
  case FZ_KERNEL_ATOMIC_ADD:
    opc = isFloat ? FZ_LOOP_OP_ADDF : FZ_LOOP_OP_ADDI;
    break;
  case FZ_KERNEL_ATOMIC_MAX:
    opc = isFloat ? FZ_LOOP_OP_MAXF : FZ_LOOP_OP_MAXSI;
    break;
  case FZ_KERNEL_ATOMIC_MIN:
    opc = isFloat ? FZ_LOOP_OP_MINF : FZ_LOOP_OP_MINSI;
    break;
  default:
    opc = FZ_LOOP_OP_UNKNOWN; /* exch */
  }
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    const SimBuf *b = sim_buf(s, ins->ops[1], t);
    if (b->readOnly)
      return fzKernelSimError(s, ins, t, "writes a read-only buffer");
    char *p = fzKernelSimAddress(s, ins, t, b, 2, 1);
    if (!p)
      return false;
    FzLoopScalar in[2] = {fzLoopReadElement(b->elt, p),
                          *sim_scalar(s, ins->ops[0], t)};
    FzLoopScalar nv = in[1];
    if (opc != FZ_LOOP_OP_UNKNOWN &&
        !fzLoopEvalScalar(opc, -1, ins->type, ins->type, 2, in, &nv))
      return fzKernelSimError(s, ins, t, "cannot evaluate the atomic");
    fzLoopWriteElement(b->elt, p, nv);
    *sim_scalar(s, ins->res[0], t) = in[0];
  }
  return true;
}

/*===--- Barrier --------------------------------------------------------===*/

bool fzKernelSimBarrier(Sim *s, const SimInst *ins, const uint8_t *mask) {
  int64_t missing = -1, present = 0;
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (mask[t])
      present++;
    else if (missing < 0)
      missing = t;
  }
  if (missing >= 0)
    return fzKernelSimError(s, ins, missing, "divergent barrier: %lld of the "
                            "block's %lld threads reach it together, this "
                            "thread does not", (long long)present,
                            (long long)s->nthreads);
  s->epoch++;
  return true;
}

/*===--- Shuffle --------------------------------------------------------===*/

/* PTX shfl.sync: the source lane for `lane` and whether it is in range,
 * for a width w segment (CUDA's c operand: ((32 - w) << 8) | clamp). */
static int64_t shuffle_source(int mode, int64_t lane, int64_t bval,
                              int64_t w, bool *inRange) {
  int64_t segMask = 32 - w;
  int64_t clamp = mode == FZ_KERNEL_SHUFFLE_UP ? 0 : 31;
  int64_t maxLane = (lane & segMask) | (clamp & ~segMask);
  int64_t minLane = lane & segMask;
  int64_t j;
  bool p;
  switch (mode) {
  case FZ_KERNEL_SHUFFLE_UP:
    j = lane - bval;
    p = j >= maxLane;
    break;
  case FZ_KERNEL_SHUFFLE_DOWN:
    j = lane + bval;
    p = j <= maxLane;
    break;
  case FZ_KERNEL_SHUFFLE_XOR:
    j = lane ^ bval;
    p = j <= maxLane;
    break;
  default: /* idx */
    j = minLane | (bval & ~segMask & 31);
    p = j <= maxLane;
    break;
  }
  *inRange = p;
  return p ? j : lane;
}

bool fzKernelSimShuffle(Sim *s, const SimInst *ins, const uint8_t *mask) {
  for (int64_t t = 0; t < s->nthreads; ++t) {
    if (!mask[t])
      continue;
    int64_t lane = t % SIM_WARP, warp0 = t - lane;
    int64_t bval = sim_scalar(s, ins->ops[1], t)->i & 31;
    bool inRange;
    int64_t j = shuffle_source(ins->pred, lane, bval, ins->imm, &inRange);
    int64_t src = warp0 + j;
    if (src >= s->nthreads || !mask[src])
      return fzKernelSimError(s, ins, t, "reads lane %lld of its warp, which "
                              "does not execute this shuffle with it",
                              (long long)j);
    *sim_scalar(s, ins->res[0], t) = *sim_scalar(s, ins->ops[0], src);
    sim_scalar(s, ins->res[1], t)->i = inRange;
  }
  return true;
}

/*===--- mma ------------------------------------------------------------===*/

/* PTX's m16n8k16 fragment layouts (.row A, .col B, f32 C/D): element i
 * of lane's fragment, with group = lane / 4 and tig = lane % 4. */
static void frag_a(int64_t lane, int i, int *row, int *col) {
  int g = (int)lane / 4, tig = (int)lane % 4;
  *row = g + ((i % 4) >= 2 ? 8 : 0);
  *col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}

static void frag_b(int64_t lane, int i, int *k, int *n) {
  int g = (int)lane / 4, tig = (int)lane % 4;
  *k = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
  *n = g;
}

static void frag_c(int64_t lane, int i, int *row, int *col) {
  int g = (int)lane / 4, tig = (int)lane % 4;
  *row = g + (i >= 2 ? 8 : 0);
  *col = tig * 2 + (i & 1);
}

bool fzKernelSimWarpCheck(Sim *s, const SimInst *ins, const uint8_t *mask,
                          int64_t w0, bool *any) {
  *any = false;
  for (int64_t l = 0; l < SIM_WARP && w0 + l < s->nthreads; ++l)
    *any = *any || mask[w0 + l];
  if (!*any)
    return true;
  for (int64_t l = 0; l < SIM_WARP; ++l)
    if (w0 + l >= s->nthreads || !mask[w0 + l])
      return fzKernelSimError(s, ins, w0, "is a warp-wide operation, but "
                              "lane %lld of this warp does not execute it",
                              (long long)l);
  return true;
}

/* PTX's m16n8k8 tf32 fragments: A element i (one per register) at row
 * g + 8 (i % 2), column tig + 4 (i / 2); B element i at k = tig + 4 i,
 * n = g (C/D as for m16n8k16). */
static void frag_a_tf32(int64_t lane, int i, int *row, int *col) {
  *row = (int)lane / 4 + (i % 2 ? 8 : 0);
  *col = (int)lane % 4 + (i >= 2 ? 4 : 0);
}

static void frag_b_tf32(int64_t lane, int i, int *k, int *n) {
  *k = (int)lane % 4 + (i ? 4 : 0);
  *n = (int)lane / 4;
}

double fzKernelRoundTf32(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) { /* finite: to nearest, ties away */
    u += 0x1000u;
    u &= ~0x1fffu;
  }
  memcpy(&f, &u, sizeof f);
  return f;
}

bool fzKernelSimMma(Sim *s, const SimInst *ins, const uint8_t *mask) {
  FzType *f32 = fzF32TypeGet(s->ctx);
  bool tf32 = fzValueGetType(fzOpGetOperand(ins->op, 0)) == f32;
  int kdim = tf32 ? 8 : 16;
  for (int64_t w0 = 0; w0 < s->nthreads; w0 += SIM_WARP) {
    bool any;
    if (!fzKernelSimWarpCheck(s, ins, mask, w0, &any))
      return false;
    if (!any)
      continue;
    double a[16][16], b[16][8], c[16][8];
    /* Register r of a fragment holds its elements 2r and 2r + 1 (tf32:
     * element r). */
    for (int64_t l = 0; l < SIM_WARP; ++l) {
      int r, q;
      if (tf32) {
        for (int i = 0; i < 4; ++i) {
          frag_a_tf32(l, i, &r, &q);
          a[r][q] = fzKernelRoundTf32(sim_scalar(s, ins->ops[i], w0 + l)->f);
        }
        for (int i = 0; i < 2; ++i) {
          frag_b_tf32(l, i, &r, &q);
          b[r][q] =
              fzKernelRoundTf32(sim_scalar(s, ins->ops[4 + i], w0 + l)->f);
        }
      } else {
        for (int i = 0; i < 8; ++i) {
          frag_a(l, i, &r, &q);
          a[r][q] = sim_scalar(s, ins->ops[i / 2], w0 + l)[i % 2].f;
        }
        for (int i = 0; i < 4; ++i) {
          frag_b(l, i, &r, &q);
          b[r][q] = sim_scalar(s, ins->ops[4 + i / 2], w0 + l)[i % 2].f;
        }
      }
      for (int i = 0; i < 4; ++i) {
        frag_c(l, i, &r, &q);
        c[r][q] = sim_scalar(s, ins->ops[6 + i / 2], w0 + l)[i % 2].f;
      }
    }
    for (int64_t l = 0; l < SIM_WARP; ++l) {
      for (int i = 0; i < 4; ++i) {
        int r, q;
        frag_c(l, i, &r, &q);
        double acc = c[r][q];
        for (int k = 0; k < kdim; ++k)
          acc += a[r][k] * b[k][q];
        sim_scalar(s, ins->res[i / 2], w0 + l)[i % 2] =
            fzLoopNormalize(f32, (FzLoopScalar){.f = acc});
      }
    }
  }
  return true;
}
