/* lowering/nvptx/nvptx_internal.h - what the files of the NVPTX back end
 * share. It builds on the CPU back end's emitter state and per-op
 * translation (lowering/llvm/emit_internal.h, the only other place that
 * includes llvm-c): a kernel body is the same LLVM IR on both targets,
 * plus the kernel dialect's ops.
 *
 *   ptx.c          options, target machines, fzGpuCompile/fzEmitPTX
 *                  (a module with loop nests is lowered first with
 *                  lower-loop-to-kernel, fz/kernel.h), the timing
 *   translate.c    a kernel-level module to one LLVM module per kernel
 *   codegen.c      libdevice, O3 and NVPTX on every kernel's module, on
 *                  a pool of threads
 *   join.c         the PTX of the modules joined into one text
 *   launches.c     host functions -> launch plans (FzGpuFunction)
 *   kernel_func.c  kernel.func -> PTX entry (signature, metadata, body)
 *   kernel_ops.c   every kernel op, one table (kernel_ops_sm90.c: the
 *                  Hopper ops)
 */
#ifndef FZ_LOWERING_NVPTX_INTERNAL_H
#define FZ_LOWERING_NVPTX_INTERNAL_H

#include "fz/gpu.h"
#include "fz/kernel.h"
#include "ir/cache.h"
#include "lowering/llvm/emit_internal.h"

/* One kernel's LLVM module, compiled on its own: translated on the
 * calling thread (translate.c), then optimized and compiled to PTX on
 * any one thread of the pool (codegen.c), which disposes the module and
 * its context and leaves the text or the error (text, error and
 * llvmError are made there: fzLLThreadAlloc'ed). */
typedef struct FzNvUnit {
  char *name;            /* the PTX entry ("fuse_gpu": no kernel; the
                            context's) */
  LLVMContextRef llctx;  /* NULL once disposed */
  LLVMModuleRef mod;
  size_t size;           /* LLVM instructions before O3: the schedule */
  char *text;            /* PTX, or the LLVM IR after O3 */
  size_t len;
  char *error;           /* what failed, or NULL */
  char *llvmError;       /* LLVM's first error diagnostic */
  bool usesStatus;       /* fz_status is still referenced after O3 */
  bool cached;           /* the text came from the kernel cache */
  double seconds;        /* the thread's time on this unit */
} FzNvUnit;

typedef struct FzNvUnits {
  FzContext *ctx;
  FzNvUnit *v; /* in kernel order (the context's) */
  size_t n;
  double planSeconds; /* of the translation: the host functions' plans */
} FzNvUnits;

void fzNvUnitsFree(FzNvUnits *units);

/* Translates a kernel-level module into units, one LLVM module per
 * kernel.func in module order (E's ctx, opts, tm, cpu, features,
 * libdevice, nativeBF16 set by the caller; E->sites collects the run-time
 * checks of all of them), filling prog's functions (not its PTX). False
 * after reporting errors, units freed. (translate.c) */
bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, FzGpuProgram *prog,
                         FzNvUnits *units);

/* What codegen.c does to every unit. */
typedef struct FzNvCodegenJob {
  FzNvUnit *units;
  size_t numUnits;
  /* One target machine per thread (tms[0]: the calling thread's); the
   * threads are at most numThreads, at most numUnits. */
  LLVMTargetMachineRef *tms;
  unsigned numThreads;
  unsigned optLevel;
  /* libdevice's bitcode (read once, shared read-only by the threads), or
   * NULL; linked into the modules that call __nv_ functions. */
  const char *libdevice;
  size_t libdeviceLen;
  const char *libdevicePath; /* for messages */
  bool emitIR;      /* LLVM IR text after O3 instead of PTX */
  /* The kernel cache (NULL: none): a unit's key is the SHA-256 of
   * keyPrefix (the target, options and libdevice: ptx.c) and its
   * module's bitcode before anything is done to it. */
  FzCache *cache;
  uint8_t keyPrefix[FZ_SHA256_BYTES];
  /* Told as units are done (NULL: nobody). */
  const FzProgressSink *progress;
  unsigned threadsUsed; /* out: the threads that ran */
} FzNvCodegenJob;

/* Links libdevice, optimizes, makes module-local names unique across
 * the units (ENTRY$NAME) and generates the PTX (or prints the IR) of
 * every unit, each on one thread: units must hold each module and its
 * context (disposed here). Reports nothing but running out of ctx's
 * memory for the schedule (then false, nothing done): the outcome of
 * each unit is its text or its error. (codegen.c) */
bool fzNvCodegenRun(FzContext *ctx, FzNvCodegenJob *job);
/* Whether mod calls libdevice (declares an __nv_ function). */
bool fzNvUsesLibdevice(LLVMModuleRef mod);
/* Seconds on the monotonic clock (codegen.c). */
double fzNvNowSeconds(void);

/* The PTX of units (each a whole module from NVPTX) as one module: one
 * header (.version, the highest; .target and .address_size, which must
 * agree), every module-level `.extern` declaration and the definition of
 * fz_status once, right after it, then each unit's body in order. The
 * text (ctx's, NUL-terminated) or NULL after reporting an error to ctx.
 * (join.c) */
char *fzNvJoinPtx(FzContext *ctx, const FzNvUnit *units, size_t numUnits,
                  size_t *len);

/* One kernel.func of the module: what its launches say about it
 * (launches.c) and what its emission learns (kernel_func.c). */
typedef struct FzNvKernelInfo {
  FzOp *func;        /* the kernel.func */
  char *name;        /* its PTX entry name (the context's) */
  size_t numParams;
  bool launched;     /* at least one kernel.launch names it */
  unsigned block[3]; /* every launch's block size, when they agree */
  bool sameBlock;    /* launched, and every launch has the same block */
  bool wholeWarps;   /* every launch's block is a multiple of 32 threads */
  /* Per parameter (the context's, numParams): noalias: no launch passes the
   * buffer together with another argument of the same root; written /
   * accessed: the kernel stores through it / loads or stores. */
  bool *noalias, *written, *accessed;
} FzNvKernelInfo;

/* E->foreignData while a kernel body is emitted. */
typedef struct FzNvKernelState {
  const FzNvKernelInfo *info;
  bool wholeWarps; /* shuffles may name the whole warp as members */
} FzNvKernelState;

/* The translation of one kernel op (kernel_ops.c; E->emitForeignOp). */
bool fzNvEmitKernelOp(FzLLEmitter *E, FzOp *op);
/* The Hopper ops (mbarriers, bulk copies, the proxy fence, wgmma) as
 * inline PTX (kernel_ops_sm90.c). */
bool fzNvEmitSm90Op(FzLLEmitter *E, FzOp *op);
/* Whether op is a kernel op that synchronizes or communicates with other
 * threads (barriers, shuffles, atomics, mma). */
bool fzNvKernelOpSynchronizes(const FzOp *op);
/* Emits K's kernel.func as a PTX entry (kernel_func.c); fills K's
 * written/accessed. False after reporting errors. */
bool fzNvEmitKernel(FzLLEmitter *E, FzNvKernelInfo *K);
/* The launch plan of host function func (launches.c): its arguments,
 * temporaries and kernel.launch ops, each of which must name one of the
 * numKernels kernels (whose launch facts it updates) with constant
 * configurations. False after reporting errors. */
bool fzNvTranslateHost(FzContext *ctx, FzOp *func, FzNvKernelInfo *kernels,
                       size_t numKernels, FzGpuFunction *out);

#endif /* FZ_LOWERING_NVPTX_INTERNAL_H */
