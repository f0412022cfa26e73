/* dialects/kernel/sim_internal.h - the kernel simulator's program and
 * machine state, shared by sim.c (compilation, control flow, launch) and
 * sim_ops.c (memory, atomics, shuffles, mma, barriers). See sim.c's
 * opening comment for the design. Private to dialects/kernel.
 */
#ifndef FZ_KERNEL_SIM_INTERNAL_H
#define FZ_KERNEL_SIM_INTERNAL_H

#include "dialects/kernel/kernel_internal.h"

#define SIM_MAX_RANK FZ_GRAPH_MAX_RANK
#define SIM_MAX_LANES 64
#define SIM_WARP 32
#define SIM_MAX_BLOCK_THREADS 1024
#define SIM_MAX_BLOCKS 65536
#define SIM_MAX_THREADS ((int64_t)1 << 20)
#define SIM_MAX_SHARED (227 * 1024)

/* One thread's view of a buffer value. */
typedef struct SimBuf {
  char *data; /* address of element (0, ..., 0) */
  FzType *elt;
  size_t esz;
  size_t rank;
  int64_t shape[SIM_MAX_RANK];
  int64_t strides[SIM_MAX_RANK];
  char *lo, *hi;  /* the allocation it lies in */
  bool shared;    /* in the block's shared memory (race-checked) */
  bool readOnly;
} SimBuf;

typedef enum SimSlotKind { SLOT_SCALAR, SLOT_VECTOR, SLOT_BUF } SimSlotKind;

typedef struct SimBlock SimBlock;

typedef struct SimInst {
  FzOp *op;
  FzLoopOpcode lopc;   /* a loop op, or FZ_LOOP_OP_UNKNOWN */
  FzKernelOpcode kopc; /* a kernel op, or FZ_KERNEL_OP_UNKNOWN */
  int pred;            /* cmp predicate, shuffle mode, atomic kind */
  int64_t imm;         /* shuffle width, id dimension, shared offset */
  FzType *type;        /* scalar type of the result / stored value */
  FzType *otype;       /* scalar type of operand 0 (1 for select) */
  uint32_t lanes;      /* vector lanes of the result / stored value */
  uint32_t nops, nres;
  uint32_t *ops, *res;
  SimBlock *body;      /* loop.for */
  SimBuf *constant;    /* loop.constant_buffer: its read-only memory */
} SimInst;

struct SimBlock {
  SimInst *insts;
  size_t n;
  uint32_t *args;
  size_t nargs;
};

/* Per-slot storage: threads x (lanes or 1) scalars, or threads SimBufs. */
typedef struct SimSlot {
  SimSlotKind kind;
  uint32_t lanes;
  void *mem;
} SimSlot;

/* A cp.async issued and not yet completed by a kernel.cp_async_wait: the
 * bytes it will write, read from global memory at issue. */
typedef struct SimAsyncCopy {
  char *dst;      /* 16 bytes of this block's shared memory */
  int32_t thread; /* the issuing thread */
  int32_t group;  /* the thread's group number; -1 while not committed */
  unsigned char data[16];
} SimAsyncCopy;

/* An mbarrier (kernel.mbarrier_init made it): its state, kept beside
 * shared memory rather than in its 8 bytes (whose layout is opaque on
 * the GPU). */
typedef struct SimMbarrier {
  int64_t offset;   /* its byte in shared memory */
  int64_t expected; /* arrivals per phase */
  int64_t pending;  /* arrivals still missing in the current phase */
  int64_t tx;       /* transaction bytes still expected */
  int64_t phase;    /* phases completed */
  int32_t initBy;   /* the initializing thread, and the epoch then */
  uint32_t initEpoch;
} SimMbarrier;

typedef struct Sim {
  FzContext *ctx;
  FzArena arena;
  FzPtrMap values; /* FzValue -> slot + 1, while compiling */
  SimSlot *slots;
  size_t numSlots, capSlots;
  SimBlock *entry;
  int64_t staticShared; /* bytes of shared_alloc, laid out 16-aligned */
  /* The launch. */
  int64_t grid[3], block[3], dynShared;
  int64_t nthreads;     /* per block */
  int64_t blockId[3];   /* the block running */
  char *shared;         /* this block's shared memory */
  int64_t sharedBytes;
  /* Race detection on shared memory: per byte, the epoch and thread of
   * the last write and of the last read(s) (reader -2: several). The
   * epoch grows at every barrier and block, so nothing is ever reset. */
  uint32_t *wEpoch, *rEpoch;
  int32_t *writer, *reader;
  uint32_t epoch;
  /* cp.async: the block's pending copies, per thread the number of groups
   * it committed, per shared byte the issuing thread + 1 of a pending
   * copy that writes it (0: none). */
  SimAsyncCopy *copies;
  size_t numCopies, capCopies;
  int32_t *committed;
  int32_t *pendingBy;
  /* sm_90 (sim_sm90.c). The proxies: per thread its
   * kernel.fence_proxy_async count; per shared byte the thread + 1 that
   * last wrote it through the generic proxy (0: none, or an async-proxy
   * write) and that thread's fence count then; a wgmma reading a byte
   * whose writer has not fenced since is an error. wgmma: per warp group
   * its committed and completed groups; per byte the warp group + 1 of
   * the last wgmma reading it and that wgmma's group (a write before the
   * group completes is an error). Bulk copies: per byte the mbarrier + 1
   * whose current phase completes it (until then its bytes are pending). */
  int64_t dynOffset; /* dynamic shared memory: after the static, aligned */
  int64_t dynAlign;
  uint32_t *fenceCount;
  int32_t *proxyWriter;
  uint32_t *proxyFence;
  int32_t *wgCommitted, *wgDone;
  int32_t *wgReadBy, *wgReadGroup;
  int32_t *bulkBy;
  SimMbarrier *mbars;
  size_t numMbars, capMbars;
  int64_t steps, maxSteps; /* thread-steps run; the launch's budget */
  FzKernelSimStats stats;   /* what the launch moved so far */
} Sim;

static inline FzLoopScalar *sim_scalar(const Sim *s, uint32_t slot,
                                       int64_t t) {
  const SimSlot *sl = &s->slots[slot];
  return (FzLoopScalar *)sl->mem + t * (sl->lanes ? sl->lanes : 1);
}

static inline SimBuf *sim_buf(const Sim *s, uint32_t slot, int64_t t) {
  return (SimBuf *)s->slots[slot].mem + t;
}

/* Reports msg at ins's op with the block and thread t (t < 0: none). */
bool fzKernelSimError(Sim *s, const SimInst *ins, int64_t t, const char *fmt,
                      ...) FZ_PRINTF(4, 5);

/* Records thread t's access to [p, p+n) of shared memory: reports a race
 * with another thread's access since the last barrier, or an access to
 * bytes that a pending cp.async writes. */
bool fzKernelSimRaceCheck(Sim *s, const SimInst *ins, int64_t t, const char *p,
                          int64_t n, bool write);
/* Thread t's address of the element at the indices in operands from...,
 * spanning `span` elements of the last dimension; NULL after an error. */
char *fzKernelSimAddress(Sim *s, const SimInst *ins, int64_t t,
                         const SimBuf *b, uint32_t from, int64_t span);
/* Reports, at warp-wide ins, a warp of which some lane (from w0) is not in
 * mask; false then. *any is whether any lane of the warp is. */
bool fzKernelSimWarpCheck(Sim *s, const SimInst *ins, const uint8_t *mask,
                          int64_t w0, bool *any);

/* sim_ops.c: one op for every thread of mask (mask[t] != 0). */
bool fzKernelSimMemory(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimAtomic(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimView(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimShuffle(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimMma(Sim *s, const SimInst *ins, const uint8_t *mask);
/* v (an f32 value) rounded to tf32 as cvt.rna.tf32.f32 does: 10 mantissa
 * bits, to nearest with ties away from zero; NaN and infinities kept. */
double fzKernelRoundTf32(double v);
bool fzKernelSimBarrier(Sim *s, const SimInst *ins, const uint8_t *mask);
/* sim_async.c: ldmatrix and the cp.async family. */
bool fzKernelSimLdmatrix(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimCpAsync(Sim *s, const SimInst *ins, const uint8_t *mask);
bool fzKernelSimCpAsyncCommit(Sim *s, const SimInst *ins,
                              const uint8_t *mask);
bool fzKernelSimCpAsyncWait(Sim *s, const SimInst *ins, const uint8_t *mask);
/* Drops the pending copies of the block that ended (a new block starts
 * with none). */
void fzKernelSimAsyncReset(Sim *s);
/* sim_sm90.c: mbarriers, bulk copies, the proxy fence, wgmma. */
bool fzKernelSimSm90(Sim *s, const SimInst *ins, const uint8_t *mask);
/* The sm_90 checks of thread t's access to shared byte k (a write: no
 * pending wgmma reads it; records the generic-proxy write) and of a read
 * of a byte a bulk copy has not completed. False after an error. */
bool fzKernelSimSm90Access(Sim *s, const SimInst *ins, int64_t t, int64_t k,
                           bool write);
/* Allocates and resets the per-launch and per-block state. */
bool fzKernelSimSm90Alloc(Sim *s);
void fzKernelSimSm90Reset(Sim *s);
void fzKernelSimSm90Free(Sim *s);

#endif /* FZ_KERNEL_SIM_INTERNAL_H */
