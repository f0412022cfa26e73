/* lowering/llvm/emit_internal.h - what the files of the LLVM emitter
 * share: the emitter state, type and value helpers, and the entry points
 * of each part.
 *
 *   emit_module.c  module and functions, the ABI wrappers, fzEmitLLVM
 *   emit_memory.c  buffers: alloc, views, constants, loads and stores
 *   emit_loops.c   loop.for, loop.parallel (serial, or outlined for the
 *                  thread pool)
 *   emit_scalar.c  constants, arithmetic, comparisons, casts
 *   math.c         exp/log/log1p/tanh/erf/pow: inline approximations or
 *                  C library calls
 *   target.c       target machine, O3, printing and code generation
 *   jit.c          FzNativeModule (ORC LLJIT)
 *
 * Private to lowering/llvm: the only place in fuse that includes llvm-c.
 * Values: every FzValue of the function being emitted maps to one
 * LLVMValueRef (E->values). Types: index is i64, bf16 values are kept
 * as their i16 bits (arithmetic widens to f32 and rounds back), i1 is
 * i1 in registers and one byte in memory.
 */
#ifndef FZ_LOWERING_LLVM_EMIT_INTERNAL_H
#define FZ_LOWERING_LLVM_EMIT_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "fz/loop.h"
#include "fz/lowering.h"
#include "ir/cache.h"
#include "ir/util.h"

/* A run-time check in generated code (emit_check.c): when it fails, the
 * code records the site's number (1-based) and one value (an index, a
 * step) in the module's status global `fz_status` ([2 x i64]), and the
 * runtime reports `message` at loc, "%lld" in it replaced by the value. */
typedef struct FzLLSite {
  FzLoc *loc;
  char *message; /* the context's */
} FzLLSite;
typedef struct FzLLSites {
  FzLLSite *v; /* the context's */
  size_t n, cap;
} FzLLSites;
void fzLLSitesFree(FzContext *ctx, FzLLSites *s);

/* Memory of the code-generation threads (fzLLOptimizeModule's message,
 * lowering/nvptx/codegen.c's texts and messages): the C library's, since
 * a context's allocator is called only on the thread using the context
 * (docs/api.md, "Allocation"). Freed with fzLLThreadFree on any thread;
 * NULL when out of memory (nothing recorded: the caller says so). */
void *fzLLThreadAlloc(size_t size);
void fzLLThreadFree(void *p);
char *fzLLThreadPrintf(const char *fmt, ...) FZ_PRINTF(1, 2);

/* Parallel code generation on the CPU (cpu_codegen.c): the module is
 * translated into units, each an LLVMContext and module of its own:
 * unit 0 holds the top-level functions (and the large constants), every
 * outlined parallel region (emit_loops.c) is a unit of its trampoline
 * and body. What one unit uses of another is external with hidden
 * visibility (the trampolines, the constants of unit 0), its name kept
 * in `exported` so that a link into one module can make them local
 * again. */
typedef struct FzLLUnit {
  LLVMContextRef llctx; /* NULL once disposed */
  LLVMModuleRef mod;
  int64_t work;             /* instructions: the schedule's order */
  LLVMMemoryBufferRef out;  /* the unit's object file or bitcode */
  char *error, *llvmError;  /* fzLLThreadAlloc'ed; NULL: none */
  double seconds;           /* on its thread */
  char *name; /* the context's: its trampoline's; NULL for unit 0 */
} FzLLUnit;
typedef struct FzLLUnits {
  FzLLUnit *v; /* the context's; v[0] is the emitter's own module */
  size_t n, cap;
  FzPtrVec exported; /* char * (the context's): names made external */
} FzLLUnits;

typedef struct FzLLEmitter {
  FzContext *ctx;
  FzCodegenOptions opts;
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTargetMachineRef tm; /* for intrinsic availability; may be NULL */
  const char *cpu, *features; /* function attributes; may be NULL */
  LLVMTypeRef tVoid, tI1, tI8, tI16, tI32, tI64, tF16, tF32, tF64, tPtr;

  /* The LLVM function being filled, and its entry block (allocas). */
  LLVMValueRef fn;
  LLVMBasicBlockRef entry;
  /* FzValue -> LLVMValueRef of the function being emitted. */
  FzPtrMap values;
  /* FzValue (buffer) -> its root (a function argument, an alloc or a
   * constant buffer): buffers of different roots never overlap. */
  FzPtrMap roots;
  /* FzOp -> non-NULL: float ops accumulating a loop.for reduction. */
  FzPtrMap reductions;
  /* The FzParallelRuntime argument of the top-level function. */
  LLVMValueRef rtArg;
  FzOp *func;         /* the func.func being emitted */
  FzStringRef funcName;
  unsigned numOutlined;
  unsigned loopDepth; /* loop ops enclosing the op being emitted */
  bool outlined;      /* emitting an outlined parallel body */
  /* Explicit vector loops (emit_vector.c): while one is emitted, the ops
   * in `varying` produce <vecLanes x T> values (operands that are scalars
   * are splatted); NULL otherwise. usedNontemporal: the function being
   * filled has streaming stores (it ends with a store fence). */
  FzPtrMap *varying;
  unsigned vecLanes;
  bool usedNontemporal;
  /* GPU only (false on the CPU): exp/log/tanh/erf/pow/sin/cos call the
   * CUDA toolkit's libdevice (__nv_expf, ...), linked in afterwards. */
  bool libdevice;
  /* GPU only: f32 -> bf16 by the target's own conversion (fptrunc to
   * bfloat: cvt.rn.bf16.f32 on sm_80+) rather than integer rounding. */
  bool nativeBF16;
  /* Ops of other dialects met by fzLLEmitBlock (the kernel dialect's,
   * in a GPU kernel body: lowering/nvptx): called for an op that is not
   * a loop op, func.call or func.return; false after an error. NULL:
   * such ops are errors. */
  bool (*emitForeignOp)(struct FzLLEmitter *E, FzOp *op);
  void *foreignData; /* for emitForeignOp */
  /* Run-time checks (emit_check.c): the sites emitted so far, the
   * status global (NULL until the first check), and the value ranges
   * computed for index analysis (FzValue -> 1 + index into rangePool). */
  FzLLSites sites;
  LLVMValueRef status;
  FzPtrMap rangeMemo;
  void *rangePool;
  size_t rangeN, rangeCap;
  /* Non-NULL: each outlined parallel region goes to a unit of its own
   * (emit_loops.c); NULL: everything in mod. */
  FzLLUnits *units;
  LLVMFastMathFlags fmf;       /* on every float op */
  LLVMFastMathFlags fmfReduce; /* on reduction accumulations */
  bool failed;
} FzLLEmitter;

/*===--- emit_module.c ----------------------------------------------------===*/

/* Builds the LLVM module of `module` into E (E->llctx and E->tm set by
 * the caller). False after reporting errors. */
bool fzLLTranslateModule(FzLLEmitter *E, FzOp *module);
/* The LLVM value of v (reports an internal error when unmapped). */
LLVMValueRef fzLLGet(FzLLEmitter *E, FzValue *v);
void fzLLSet(FzLLEmitter *E, FzValue *v, LLVMValueRef value);
/* Emits the ops of block in order, up to (not including) its terminator
 * when skipTerminator. False after an error. */
bool fzLLEmitBlock(FzLLEmitter *E, FzBlock *block, bool skipTerminator);
/* Adds attribute `name` (an enum attribute; value for int ones) at
 * index (LLVMAttributeFunctionIndex, LLVMAttributeReturnIndex, or
 * 1 + argument number). */
void fzLLAddAttr(FzLLEmitter *E, LLVMValueRef fn, unsigned index,
                 const char *name, uint64_t value);
/* Target attributes, nounwind and the like on a new function. */
void fzLLSetFunctionAttrs(FzLLEmitter *E, LLVMValueRef fn);
/* Error at op (sets E->failed); returns false. */
bool fzLLError(FzLLEmitter *E, FzOp *op, const char *fmt, ...)
    FZ_PRINTF(3, 4);

/*===--- emit_units.c -----------------------------------------------------===*/

/* What belongs to the LLVMContext being filled. */
typedef struct FzLLCtxSave {
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef tVoid, tI1, tI8, tI16, tI32, tI64, tF16, tF32, tF64, tPtr;
  LLVMValueRef status;
  LLVMBasicBlockRef insert; /* where the builder was */
} FzLLCtxSave;

/* E's types for E->llctx. */
void fzLLSetTypes(FzLLEmitter *E);
/* Starts a new unit (E->units; name: for --timing) and makes E fill it (its own context,
 * module, builder, types), saving E's in *save. False when out of
 * memory (E->failed set, E unchanged). */
bool fzLLUnitBegin(FzLLEmitter *E, FzLLCtxSave *save, const char *name);
/* Makes E fill what *save held again. */
void fzLLUnitEnd(FzLLEmitter *E, const FzLLCtxSave *save);
/* t (of another context) in E->llctx; NULL for a type it does not map
 * (structs, functions). */
LLVMTypeRef fzLLMapType(FzLLEmitter *E, LLVMTypeRef t);
/* Whether fzLLMoveConst takes c: an integer, float, null, undef or
 * poison scalar, or a global variable. */
bool fzLLConstMovable(LLVMValueRef c);
/* c (a constant of the saved context, fzLLConstMovable) in the unit
 * being filled: scalars rebuilt; a global of at most 4 KiB copied
 * (private), a larger one declared and exported from its module. NULL
 * after an error (E->failed). */
LLVMValueRef fzLLMoveConst(FzLLEmitter *E, LLVMValueRef c);
/* Makes gv (a function or global of unit 0) external and hidden, and
 * records its name. False when out of memory. */
bool fzLLExport(FzLLEmitter *E, LLVMValueRef gv);

/*===--- types and constants (emit_scalar.c) ------------------------------===*/

/* The most lanes of a vector type that emit-llvm lowers (the loop
 * interpreter's limit too). */
#define FZ_LL_MAX_LANES 256

/* The register type of a scalar or vector fz type (bf16 -> i16); NULL
 * for a type it does not lower (a vector of more than FZ_LL_MAX_LANES). */
LLVMTypeRef fzLLType(FzLLEmitter *E, FzType *t);
/* The in-memory type of one element of a buffer (i1 -> i8). */
LLVMTypeRef fzLLStorageType(FzLLEmitter *E, FzType *elt);
/* The element type of a scalar or vector type. */
FzType *fzLLScalarOf(FzType *t);
/* Number of lanes (1 for a scalar; FZ_LL_MAX_LANES + 1 for a longer
 * vector, which fzLLType refuses). */
unsigned fzLLLanes(FzType *t);
/* A float constant of LLVM type ty (scalar or vector: splat). */
LLVMValueRef fzLLConstF(LLVMTypeRef ty, double v);
/* An integer constant of LLVM type ty (scalar or vector: splat). */
LLVMValueRef fzLLConstI(LLVMTypeRef ty, int64_t v);
/* i64 constant. */
LLVMValueRef fzLLIndex(FzLLEmitter *E, int64_t v);

/* bf16 bits (i16 or <N x i16>) <-> f32 (or <N x float>). */
LLVMValueRef fzLLBF16ToF32(FzLLEmitter *E, LLVMValueRef bits);
LLVMValueRef fzLLF32ToBF16(FzLLEmitter *E, LLVMValueRef f);
/* A float value of fz type t (scalar or vector) widened to the type it is
 * computed in (f16/bf16 -> f32; others unchanged), and back. */
LLVMValueRef fzLLWiden(FzLLEmitter *E, LLVMValueRef v, FzType *t);
LLVMValueRef fzLLNarrow(FzLLEmitter *E, LLVMValueRef v, FzType *t);

/* Calls intrinsic `name` overloaded on `overload` types. */
LLVMValueRef fzLLCallIntrinsic(FzLLEmitter *E, const char *name,
                               LLVMTypeRef *overload, unsigned numOverload,
                               LLVMValueRef *args, unsigned numArgs);
/* Sets E->fmf (| extra) on v when v is a float instruction. */
LLVMValueRef fzLLFlags(FzLLEmitter *E, LLVMValueRef v,
                       LLVMFastMathFlags extra);

/* Scalar ops: constants, arithmetic, comparisons, selects, casts.
 * False after an error. */
bool fzLLEmitScalarOp(FzLLEmitter *E, FzOp *op, FzLoopOpcode code);

/*===--- emit_memory.c ----------------------------------------------------===*/

bool fzLLEmitMemoryOp(FzLLEmitter *E, FzOp *op, FzLoopOpcode code);
/* Records the root of a buffer function argument. */
void fzLLSetRoot(FzLLEmitter *E, FzValue *buffer, const void *root);
const void *fzLLGetRoot(FzLLEmitter *E, FzValue *buffer);
/* The address of the element of buffer `buf` whose indices are op's
 * operands from firstIndex on (one per dimension). NULL after an error
 * (reported). */
LLVMValueRef fzLLElementPtr(FzLLEmitter *E, FzOp *op, FzValue *buf,
                            size_t firstIndex);
/* The same for an op whose indices of buf, operands firstIndex to
 * firstIndex + rank - 1, are followed by other operands. */
LLVMValueRef fzLLElementPtrAt(FzLLEmitter *E, FzOp *op, FzValue *buf,
                              size_t firstIndex);
/* Size in bytes that a buffer type spans (largest offset + 1 element). */
int64_t fzLLBufferSpanBytes(FzType *bufferType);

/*===--- emit_check.c -----------------------------------------------------===*/

/* The checks generated code makes where the loop dialect defines an
 * error that hardware would turn into a fault (docs/codegen.md, "Run-time
 * errors"): an index out of bounds, integer division by zero, a
 * non-positive loop step. Only where static facts do not rule it out: an
 * index whose range (from constants, loop bounds and integer arithmetic)
 * lies inside its dimension gets no check; on the GPU, indices computed
 * from thread and block ids are trusted (the mappings bound them), so
 * only indices computed from loaded values are checked. */

/* Whether the access op (a load or store whose indices of buf are op's
 * operands from firstIndex on) needs a run-time check of dimension k;
 * lanes: elements read along the last dimension. */
bool fzLLIndexNeedsCheck(FzLLEmitter *E, FzOp *op, FzValue *buf,
                         size_t firstIndex, size_t k, unsigned lanes);
/* The same for any index-like value that must lie in [0, size - extent]. */
bool fzLLValueNeedsCheck(FzLLEmitter *E, FzValue *index, int64_t size,
                         int64_t extent);
/* Whether a loop.for step needs its run-time check (> 0): it is not
 * known positive (a constant, or a GPU launch value). */
bool fzLLStepNeedsCheck(FzLLEmitter *E, FzValue *step);
/* Whether integer division op (divsi/remsi) needs its zero check: its
 * divisor may be zero (computed from data, or a range holding 0; GPU
 * launch values are trusted). */
bool fzLLDivisorNeedsCheck(FzLLEmitter *E, FzOp *op);
/* Whether anything in block (nested regions included) needs a check. */
bool fzLLBlockNeedsChecks(FzLLEmitter *E, FzBlock *block);
/* Emits `if (!ok) record failure of a new site at op` (ok: i1, or a
 * vector of i1 that must be all true; value: i64 or NULL) and leaves the
 * builder after it. message: printf format, with "%%lld" where the
 * run-time value goes. */
void fzLLEmitCheck(FzLLEmitter *E, FzOp *op, LLVMValueRef ok,
                   LLVMValueRef value, const char *fmt, ...) FZ_PRINTF(5, 6);
/* Frees the range analysis (the sites stay). */
void fzLLChecksFinish(FzLLEmitter *E);

/*===--- emit_loops.c -----------------------------------------------------===*/

bool fzLLEmitFor(FzLLEmitter *E, FzOp *op);
bool fzLLEmitParallel(FzLLEmitter *E, FzOp *op);
/* Marks the float ops of op's regions that accumulate a loop.for
 * reduction (E->reductions). */
void fzLLFindReductions(FzLLEmitter *E, FzOp *func);
/* Scalar operations one execution of block costs (loops multiplied by
 * their trip counts; 16 when unknown). */
int64_t fzLLEstimateWork(FzBlock *block);

/*===--- emit_vector.c ----------------------------------------------------===*/

/* Emits `for j in [lo, hi)` around body (a loop.parallel body whose
 * argument ivArg is lb + j) as explicit vector code: a scalar prologue
 * up to the first 64-byte aligned element of the first stored buffer, a
 * main loop of <W x T> operations whose stores to that buffer are
 * aligned (and non-temporal when the buffer is large and not read in
 * the nest `par`), and a scalar epilogue. Returns false, having emitted
 * nothing, when the body does not qualify (then emit the scalar loop);
 * sets E->failed on an error. */
bool fzLLEmitVectorLoop(FzLLEmitter *E, FzOp *par, FzBlock *body,
                        FzValue *ivArg, int64_t lb, LLVMValueRef lo,
                        LLVMValueRef hi);
/* Ends an outlined function that used non-temporal stores with a store
 * fence (x86 sfence), so that its writes are visible once the pool
 * reports the loop finished. */
void fzLLEmitStoreFence(FzLLEmitter *E);

/*===--- math.c -----------------------------------------------------------===*/

typedef enum FzLLMathFn {
  FZ_LL_EXP,
  FZ_LL_LOG,
  FZ_LL_LOG1P,
  FZ_LL_TANH,
  FZ_LL_ERF,
  FZ_LL_ONE_PLUS_ERF, /* 1 + erf(x), i.e. erfc(-x); y: NULL, or v with
                         x = v * c, c the f32 nearest 1/sqrt(2) (gelu):
                         the inline f32 form then computes 1 + erf(v /
                         sqrt(2)) from v, without x's rounding */
  FZ_LL_POW,          /* two operands */
  FZ_LL_SIN,
  FZ_LL_COS,
} FzLLMathFn;

/* fn applied lane-wise to x (and y for pow): x of LLVM type float,
 * double, or a vector of them. Inline approximation, or a C library
 * call per lane when E->opts.exactMath (sin and cos always call). */
LLVMValueRef fzLLEmitMath(FzLLEmitter *E, FzLLMathFn fn, LLVMValueRef x,
                          LLVMValueRef y);

/*===--- target.c ---------------------------------------------------------===*/

/* Initializes LLVM's native target once per process (thread-safe). */
void fzLLInitNative(void);
/* Monotonic seconds. */
double fzLLNowSeconds(void);
/* Hands phase `phase` (static storage), started at t0 (fzLLNowSeconds),
 * to o->timing when set: wall time, `threads` threads busy for busy
 * seconds in all (busy < 0: the wall time), split into `items` parts. */
void fzLLReportPhase(const FzCodegenOptions *o, const char *phase, double t0,
                     double busy, unsigned threads, size_t items);
/* A target machine for options (host when triple is NULL). The CPU name
 * and features actually used are copied into *cpu / *features (the
 * context's, freed by the caller; may be NULL). NULL after reporting an
 * error. */
LLVMTargetMachineRef fzLLCreateTargetMachine(FzContext *ctx,
                                             const FzCodegenOptions *o,
                                             char **cpu, char **features);
/* Runs the optimization pipeline at o->optLevel. False after an error. */
bool fzLLOptimize(FzContext *ctx, LLVMModuleRef mod, LLVMTargetMachineRef tm,
                  const FzCodegenOptions *o);
/* The same for any thread: verifies mod and runs the pipeline at
 * optLevel, touching nothing but mod (in its own LLVMContext) and tm
 * (used by this thread only) and reporting no diagnostic. False with
 * the message in *error (fzLLThreadAlloc'ed; NULL when out of
 * memory). */
bool fzLLOptimizeModule(LLVMModuleRef mod, LLVMTargetMachineRef tm,
                        unsigned optLevel, char **error);
/* fzPrepareLoopModuleForCpu for a target with the given CPU features
 * (cpu_loop.c). */
bool fzLLPrepareLoopModule(FzOp *module, const FzCodegenOptions *o,
                           const char *features);
/* Translates and optimizes module: on success *llctx, *mod and *tm are
 * the caller's to dispose, and so are the run-time check sites in
 * *sites (fzLLSitesFree; may be NULL: they are freed). */
bool fzLLBuildOptimized(FzOp *module, const FzCodegenOptions *o,
                        LLVMContextRef *llctx, LLVMModuleRef *mod,
                        LLVMTargetMachineRef *tm, FzLLSites *sites);
/* The same without the optimization (the module as translated). With
 * units (parallel code generation), every outlined parallel region goes
 * to a unit of its own and unit 0 is *llctx and *mod: the caller then
 * disposes them through fzLLUnitsFree only. */
bool fzLLBuildTranslated(FzOp *module, const FzCodegenOptions *o,
                         LLVMContextRef *llctx, LLVMModuleRef *mod,
                         LLVMTargetMachineRef *tm, FzLLSites *sites,
                         FzLLUnits *units);
/* The object file of module for o (--emit=obj): looked up in the
 * kernel cache (o->noCache, o->cacheDir; docs/codegen.md "Kernel
 * cache") by fzLLLoopKey, else translated into units, optimized on
 * threads, linked and compiled, and stored. *obj is the caller's
 * (LLVMDisposeMemoryBuffer). The "kernel cache" record goes to
 * o->timing. False after reporting errors. (objcache.c) */
bool fzLLBuildObject(FzOp *module, const FzCodegenOptions *o,
                     LLVMMemoryBufferRef *obj);
/* A native module (jit.c) of the objects objs[0..n) (all taken, also on
 * failure) linked into one JIT dylib, with the run-time check sites
 * *sites (taken: *sites is emptied). NULL after reporting errors. */
struct FzNativeModule *fzLLNativeFromObjects(FzContext *ctx,
                                             LLVMMemoryBufferRef *objs,
                                             size_t n, FzLLSites *sites,
                                             const FzCodegenOptions *o);
/* *o = *options (defaults when NULL), checked to target this process.
 * False after reporting an error. (jit.c) */
bool fzLLNativeHostOptions(FzContext *ctx, const FzCodegenOptions *options,
                           FzCodegenOptions *o);
void fzNativeModuleSetCompileSeconds(struct FzNativeModule *m,
                                     double seconds);
/* The options, field by field, into a key (objcache.c). */
void fzLLHashOptions(FzSha256 *h, const FzCodegenOptions *o);
/*===--- cpu_codegen.c ----------------------------------------------------===*/

/* Disposes what the units still hold and frees them. */
void fzLLUnitsFree(FzContext *ctx, FzLLUnits *u);
/* The threads for n units: o->codegenThreads, or one per core (at most
 * 16); at most n. */
unsigned fzLLCodegenThreads(const FzCodegenOptions *o, size_t n);
/* Optimizes every unit and makes its object file (objects) or optimized
 * bitcode (U->out), on fzLLCodegenThreads threads (tm for this one; the
 * others get theirs); with keepFirst, unit 0 is optimized in place and
 * kept. Every other unit's module is disposed. Reports "LLVM
 * optimize+codegen" to o->timing. False after reporting errors. */
bool fzLLCompileUnits(FzContext *ctx, FzLLUnits *u, const FzCodegenOptions *o,
                      LLVMTargetMachineRef tm, bool objects, bool keepFirst);
/* Links the bitcode of units 1.. into unit 0's module (kept by
 * fzLLCompileUnits) and makes what they shared local again. False after
 * reporting an error. */
bool fzLLLinkUnits(FzContext *ctx, FzLLUnits *u);
/* The key (native_cache.c) of module compiled with o, as kind: the
 * cache's prefix, the target machine, o and the module's structure.
 * False when it could not be made. */
bool fzLLLoopKey(FzOp *module, const FzCodegenOptions *o, FzCacheKind kind,
                 FzCacheKey *key);

/* fzCacheKeyBegin (ir/cache.h), then LLVM's version: what every key of
 * code LLVM made starts with. (objcache.c) */
void fzLLCacheKeyBegin(FzSha256 *h, FzCacheKind kind);

#endif /* FZ_LOWERING_LLVM_EMIT_INTERNAL_H */
