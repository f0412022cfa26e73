/* fz/lowering.h - code generation from the loop level: LLVM IR, assembly
 * and object files through the LLVM C API (LLVM 19), and native code
 * loaded into this process (an ORC LLJIT).
 *
 * Input. A builtin.module whose func.func bodies are at the loop level
 * (fz/loop.h: buffer arguments, the calling convention documented at
 * fzLowerGraphToLoop, loop-dialect ops only). fzLowerModuleForCpu runs
 * the graph -> loop pipeline first for a module still at the graph level.
 *
 * What a lowered function @f becomes (the machine ABI; docs/codegen.md):
 *
 *   void f(T0 *in0, ..., T1 *out0, ..., const FzParallelRuntime *rt);
 *       every buffer argument in order, as a pointer to its element
 *       (0, ..., 0); inputs `noalias readonly`, outputs `noalias`, each
 *       `align` options.alignment and `dereferenceable` to its size. rt
 *       may be NULL: the function then runs on the calling thread.
 *   void f.packed(void *const *buffers, const FzParallelRuntime *rt);
 *       the same, with the buffer pointers in an array (what the runtime
 *       calls: one C type for every function).
 *
 * Each top-level loop.parallel nest is outlined into a function
 * `f.parN(void *env, int64_t begin, int64_t end)` that runs iterations
 * [begin, end) of the nest's linearized index space, and the nest itself
 * into a call of rt->parallelFor (or of the outlined body on [0, n) when
 * rt is NULL).
 *
 * Ownership: nothing here takes ownership of the module; output goes
 * through the caller's callback. A FzNativeModule owns its JIT and the
 * code in it.
 */
#ifndef FZ_LOWERING_H
#define FZ_LOWERING_H

#include "fz/fusion.h"
#include "fz/ir.h"
#include "fz/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * Options
 *===------------------------------------------------------------------===*/

typedef struct FzCodegenOptions {
  /* LLVM optimization level 0..3 (default 3: O3 of the new pass
   * manager, then the code generator at its aggressive level). */
  unsigned optLevel;
  /* Every fast-math flag on every float op (default off). Off, results
   * match the reference interpreter within f32 rtol 1e-5. */
  bool fastMath;
  /* `reassoc` on the accumulation of loop.for reductions, so that they
   * vectorize (default on). */
  bool reassocReductions;
  /* `contract` on float ops: a*b+c may become one fma (default off:
   * an fma skips the rounding of a*b that the interpreter does, which
   * near cancellation exceeds any relative tolerance; fastMath sets it
   * too). */
  bool contract;
  /* exp/log/log1p/tanh/erf/pow as calls of the C library instead of the
   * inline vectorizable approximations (default off; errors of the
   * approximations are in docs/codegen.md). */
  bool exactMath;
  /* Outline top-level loop.parallel nests for FzParallelRuntime
   * (default on). Off: every nest runs on the calling thread. */
  bool parallel;
  /* Widest vectors (bits) the vectorizer should prefer: 0 means 512 on
   * a target with AVX-512F, else LLVM's choice. */
  unsigned preferVectorWidth;
  /* Emit the innermost dimension of a parallel nest as explicit vector
   * code with aligned stores when its body allows (default on); off,
   * LLVM's loop vectorizer does all the vectorizing. */
  bool explicitVectors;
  /* Stores that stream a buffer of at least this many bytes, which the
   * nest does not read, bypass the caches (non-temporal; x86). 0: never.
   * Default 16 MiB. */
  int64_t nontemporalMinBytes;
  /* The byte alignment promised for every buffer argument (a power of
   * two, at least 1; default 16). Callers must honour it. */
  unsigned alignment;
  /* CPU loop transforms run before translation (default on; see
   * fzPrepareLoopModuleForCpu): tile-contractions with the target's
   * vector width. */
  bool tileContractions;
  /* ... tile-convolutions, conv2d nests as register tiles along the
   * output width (default on). */
  bool tileConvolutions;
  /* ... and stage-rows (softmax's exp stored by the sum, loaded by the
   * normalization; default on). */
  bool stageRows;
  /* The threads that parallel loops will be split over (a hint for the
   * loop transforms: the small-M contractions split k into that many
   * chunks); 0: unknown, as for an object file (then 16).
   * fzCpuExecutableCreate sets its runtime's. */
  unsigned threads;
  /* The target: NULL means the host (its triple, CPU name and CPU
   * features, as LLVMGetHostCPUName/Features report them). When cpu is
   * given without features, the CPU's default features are used. */
  const char *triple;
  const char *cpu;
  const char *features;
  /* The persistent cache of compiled code (docs/codegen.md "Kernel
   * cache"): an object file (fzEmitLLVM's FZ_CODEGEN_OBJECT,
   * fzNativeModuleCreate) is looked up by a hash of the module's LLVM
   * IR, the target, these options and fuse's build, and stored after a
   * miss. noCache (default false) skips it; cacheDir (NULL: $FZ_CACHE_DIR,
   * else $XDG_CACHE_HOME/fuse, else ~/.cache/fuse; not owned) moves it. */
  bool noCache;
  const char *cacheDir;
  /* Receives the phases of the CPU's code generation and the "kernel
   * cache" record (NULL: none). */
  const struct FzTimingSink *timing;
  /* Threads for LLVM's optimization and code generation: every outlined
   * parallel region is a module of its own (docs/codegen.md, "Compile
   * time"); 0 (default): one per core, at most 16. The output is the
   * same for any number. */
  unsigned codegenThreads;
} FzCodegenOptions;

/* Fills the defaults listed above. */
FZ_API void fzCodegenOptionsInit(FzCodegenOptions *options);

/* Checks a target before LLVM sees it (LLVM ignores an unknown CPU or
 * feature with a warning on stderr, and ends the process on a 32-bit
 * x86 CPU under a 64-bit triple): for x86 triples, cpu must be one of
 * LLVM 19's x86 CPUs (with a 64-bit mode for x86_64) and features a
 * comma-separated list of +name/-name of its x86 features, the x86-64
 * baseline (sse, sse2, x87, 64bit) never off; for NVPTX, cpu must pass
 * fzGpuArchValidate. Other architectures are not checked. NULL or empty
 * cpu/features pass. False after reporting an error. fzEmitLLVM,
 * fzNativeModuleCreate and the PTX emitter call it; tools may call it
 * early to report a bad option before any work. */
FZ_API FZ_MUST_CHECK bool fzTargetValidate(FzContext *ctx, const char *triple,
                                           const char *cpu,
                                           const char *features);
/* Checks a GPU arch: sm_NN or sm_NNa, an NVPTX processor of LLVM 19 that
 * fuse's kernels support (sm_80 and newer: sm_80, sm_86, sm_87, sm_89,
 * sm_90, sm_90a). False after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzGpuArchValidate(FzContext *ctx, const char *arch);

/* Runs, in place on a loop-level module, the loop transforms that only
 * the CPU code generator wants, as options selects them, with the
 * parameters of options' target (the host when it names none):
 * tile-contractions (vector width: preferVectorWidth, else 512 with
 * AVX-512F, 256 with AVX, else 128; 6 rows; 4 vectors per row at 512
 * bits, else 2); tile-convolutions (the same vector width; 24 vector
 * accumulators at 512 bits, else 12); stage-rows (per-row scratch up to
 * 64 KiB). fzEmitLLVM and fzNativeModuleCreate run this on a copy of
 * their input; the loop IR of fzLowerModuleForCpu, which the GPU path
 * also reads, never contains it. Running it twice changes nothing more.
 * False after reporting an error. */
FZ_API FZ_MUST_CHECK bool
fzPrepareLoopModuleForCpu(FzOp *module, const FzCodegenOptions *options);

/*===------------------------------------------------------------------===*
 * The ABI shared with the CPU runtime
 *===------------------------------------------------------------------===*/

/* An outlined parallel body: runs iterations [begin, end). */
typedef void (*FzParallelBodyFn)(void *env, int64_t begin, int64_t end);

/* How generated code asks for parallel execution. parallelFor must run
 * body(env, b, e) over ranges that partition [0, n) exactly once each,
 * possibly concurrently, and return when all have finished.
 * workPerIteration estimates the scalar operations of one iteration,
 * so that a small loop can run on the calling thread. */
typedef struct FzParallelRuntime {
  void (*parallelFor)(void *pool, FzParallelBodyFn body, void *env,
                      int64_t n, int64_t workPerIteration);
  void *pool;
} FzParallelRuntime;

/* The entry `f.packed` of every lowered function. */
typedef void (*FzPackedEntryFn)(void *const *buffers,
                                const FzParallelRuntime *rt);

/*===------------------------------------------------------------------===*
 * LLVM IR, assembly, objects
 *===------------------------------------------------------------------===*/

typedef enum FzCodegenFileType {
  FZ_CODEGEN_LLVM_IR,  /* textual LLVM IR (.ll), after optimization */
  FZ_CODEGEN_ASSEMBLY, /* target assembly (.s) */
  FZ_CODEGEN_OBJECT,   /* relocatable object file (.o) */
} FzCodegenFileType;

/* Translates every func.func with a body in `module` (loop level) to one
 * LLVM module, optimizes it at options->optLevel for the target, and
 * writes it in `type`'s form through cb (in one or more chunks; binary
 * for objects). options may be NULL (defaults). Returns false after
 * reporting errors at the offending ops' locations (an op that has no
 * translation, a dynamic shape, an unknown target). */
FZ_API FZ_MUST_CHECK bool fzEmitLLVM(FzOp *module,
                                     const FzCodegenOptions *options,
                                     FzCodegenFileType type, FzPrintCallback cb,
                                     void *userData);

/*===------------------------------------------------------------------===*
 * Native code in this process
 *===------------------------------------------------------------------===*/

typedef struct FzNativeModule FzNativeModule;

/* Compiles `module` (loop level) for the host and loads it into an ORC
 * LLJIT of its own. options may be NULL (defaults); a non-host triple is
 * an error. The FzOp module may be destroyed afterwards. NULL after
 * reporting errors. */
FZ_API FzNativeModule *fzNativeModuleCreate(FzOp *module,
                                            const FzCodegenOptions *options);
/* Frees the JIT and its code. NULL is ignored. */
FZ_API void fzNativeModuleDestroy(FzNativeModule *m);
/* The packed entry of function `name` (without '@'); NULL when the
 * module has no such function. */
FZ_API FzPackedEntryFn fzNativeModuleLookupPacked(FzNativeModule *m,
                                                  FzStringRef name);
/* The address of any symbol of the module (e.g. "f" for the unpacked
 * entry); 0 when absent. */
FZ_API uintptr_t fzNativeModuleLookupSymbol(FzNativeModule *m,
                                            const char *symbol);
/* Seconds spent translating, optimizing and generating code. */
FZ_API double fzNativeModuleGetCompileSeconds(const FzNativeModule *m);
/* Run-time errors. Where the loop dialect defines an error that the
 * hardware would turn into a fault or a hang (an index out of bounds, an
 * integer division by zero, a loop.for step that is not positive) and
 * static facts do not rule it out, the generated code checks, and on
 * failure records it in the module's status (the global `fz_status`,
 * first failure wins) and goes on without the faulting operation
 * (docs/codegen.md, "Run-time errors"). After a call, TakeStatus reports
 * the recorded error to ctx at its op's location, as the loop
 * interpreter words it ("'loop.load' op index 7 is out of bounds for
 * dimension 0 (size 5) of operand #0"), clears it and returns false;
 * true when the code recorded nothing. ClearStatus forgets a recorded
 * error. The status is the module's: concurrent calls share it. */
FZ_API FZ_MUST_CHECK bool fzNativeModuleTakeStatus(FzNativeModule *m,
                                                   FzContext *ctx);
FZ_API void fzNativeModuleClearStatus(FzNativeModule *m);

/*===------------------------------------------------------------------===*
 * Compile-time reports
 *===------------------------------------------------------------------===*/

/* One timed phase of a compilation, handed to an FzTimingSink (fuse-run
 * and fuse-translate --timing print them; docs/codegen.md "Compile
 * time"). The phases the library reports, in the order they run:
 *   "graph passes"           canonicalize, cse, the graph simplifications
 *   "convert-layout"         convert-layout (FzCpuPipelineOptions.layout
 *                            NHWC only; fz/layout.h)
 *   "fusion"                 the fuse pass on every function
 *   "graph->loop"            lower-graph-to-loop and plan-memory
 *   "loop->kernel"           lower-loop-to-kernel (GPU)
 *   "launch plans"           the host functions' kernel launches, with
 *                            their constants' data (GPU)
 *   "LLVM translate"         the kernel dialect to one LLVM module per
 *                            kernel (GPU)
 *   "LLVM optimize+codegen"  libdevice, O3 and NVPTX on every kernel's
 *                            module, on codegenThreads threads, and the
 *                            join of their PTX (GPU)
 *   "kernel cache"           not a phase: what the persistent cache of
 *                            compiled code did (docs/codegen.md "Kernel
 *                            cache"), after the code generation; item is
 *                            the cache's folder, the times are 0 (GPU,
 *                            and the CPU's FzCodegenOptions.timing)
 * A phase may be reported several times (once per call); a record with
 * an item is one part of its phase (a kernel's module: item is its PTX
 * entry), reported before the phase's own record. */
typedef struct FzTimingRecord {
  const char *phase;  /* static storage */
  const char *item;   /* NULL: the whole phase; valid during the call */
  double wallSeconds; /* elapsed */
  double busySeconds; /* summed over the threads that worked on it */
  unsigned threads;   /* threads that worked on it (1: the caller's) */
  size_t items;       /* parts it was split into (0: not split) */
  /* "kernel cache" only: modules found in the cache, modules compiled
   * (misses), and of those the entries found corrupt and rebuilt. */
  size_t cacheHits, cacheMisses, cacheCorrupt;
} FzTimingRecord;

typedef void (*FzTimingCallback)(const FzTimingRecord *record,
                                 void *userData);

/* Where a compilation reports its phases: set a pointer to one in the
 * options (FzCpuPipelineOptions.timing, FzGpuOptions.timing; NULL, the
 * default, times nothing). The callback runs on the calling thread,
 * after each phase; the library never prints the report itself. */
typedef struct FzTimingSink {
  FzTimingCallback record;
  void *userData;
} FzTimingSink;

/* Progress of a compilation's code generation (fuse-run and
 * fuse-translate show "compiling kernels: 12/56" on a terminal): update
 * receives what is being done ("compiling kernels"), the modules done
 * and their total, first with done 0, last with done == total. It may
 * run on any code-generation thread, but never twice at once (the
 * library serializes the calls); it must not call the library. */
typedef void (*FzProgressCallback)(const char *what, size_t done, size_t total,
                                   void *userData);

typedef struct FzProgressSink {
  FzProgressCallback update;
  void *userData;
} FzProgressSink;

/*===------------------------------------------------------------------===*
 * The graph -> loop pipeline for the CPU
 *===------------------------------------------------------------------===*/

typedef struct FzCpuPipelineOptions {
  /* Run the fuse pass (default true); false lowers every op on its own,
   * one loop nest (one kernel) per op. */
  bool fuse;
  /* Run canonicalize and cse first, and with fuse the graph
   * simplifications of graph-optimize (recognize-composites...)
   * (default true). */
  bool simplify;
  /* The fusion options (NULL: fzFusionOptionsInit's defaults with the
   * built-in "cpu" target). Set report/reportOut there for the fusion
   * report, remarks for per-op remarks. */
  const FzFusionOptions *fusion;
  /* Run plan-memory after lowering (default true). */
  bool planMemory;
  /* Receives "graph passes", "convert-layout", "fusion" and
   * "graph->loop" (NULL: none). */
  const FzTimingSink *timing;
  /* The layout of convolution regions (fz/layout.h): FZ_GRAPH_LAYOUT_NHWC
   * runs convert-layout after the simplifications (fzModuleApplyLayout);
   * FZ_GRAPH_LAYOUT_NCHW (zero, the default) leaves the model's. */
  FzGraphLayout layout;
  /* The graph -> loop half of a GPU compile (default false; set by
   * fzCudaCompileModule, fzGpuCompile's callers in the tools and
   * fuse-translate --emit=ptx): recognize-attention takes only f16/bf16
   * attention, which the flash-attention kernel runs; f32 attention
   * stays tensor-core matmuls and a softmax (docs/passes.md). */
  bool forGpu;
} FzCpuPipelineOptions;

FZ_API void fzCpuPipelineOptionsInit(FzCpuPipelineOptions *options);

/* Runs, in place on module (a builtin.module at the graph level):
 *   canonicalize,cse[,recognize-composites,simplify-algebra,
 *   simplify-reshapes,fold-transpose,fold-batchnorm,canonicalize],
 *   [func.func(convert-layout),canonicalize,cse (layout NHWC)],
 *   fuse (fzFuseFunction on each function), lower-graph-to-loop,
 *   func.func(plan-memory)
 * (the parts that options turn off left out). A module already at the
 * loop level (no tensor-typed function argument or result) is left as
 * it is. The dialects and passes involved are registered in the context
 * if they were not. False after reporting errors. */
FZ_API FZ_MUST_CHECK bool
fzLowerModuleForCpu(FzOp *module, const FzCpuPipelineOptions *options);

/* True when module holds a function still at the graph level (a tensor
 * argument or result). */
FZ_API bool fzModuleIsGraphLevel(FzOp *module);

#ifdef __cplusplus
}
#endif

#endif /* FZ_LOWERING_H */
