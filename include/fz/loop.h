/* fz/loop.h - the loop dialect (buffers, loop nests, scalar and vector
 * arithmetic), its reference interpreter, and the passes that produce and
 * tidy it: lower-graph-to-loop and plan-memory.
 *
 * The loop level sits between the graph dialect (tensors, value
 * semantics) and code generation. Every op, its syntax and semantics is
 * documented in docs/dialects/loop.md; the summary below is the contract
 * that code generators (emit-llvm, loop->kernel) rely on.
 *
 * Values.
 *  - Scalars: i1 i8 i16 i32 i64 index f16 bf16 f32 f64. Arithmetic ops
 *    also accept vector<NxT> of those (lane-wise), with every operand and
 *    the result of the same type (cmp: i1 lanes; select: an i1 or
 *    vector<Nxi1> condition).
 *  - Buffers: buffer<d0x...xT, strides [s0, ...], space>. A buffer value
 *    designates the address of its element (0, ..., 0); element
 *    (i0, ..., in) lives at that address + sum(ik * sk) elements. Without
 *    explicit strides the layout is row-major contiguous. Shapes are
 *    static in everything lower-graph-to-loop produces; a `?` dim is
 *    allowed in the dialect (loop.alloc takes its size, loop.dim reads
 *    it) but code generators may reject it.
 *
 * Control flow is structured: loop.for (sequential, with loop-carried
 * iteration arguments) and loop.parallel (iterations independent, in any
 * order or concurrently). Both end in loop.yield. loop.barrier separates
 * the phases of one loop.parallel iteration (see the op's contract); it
 * has no effect on sequential execution.
 *
 * Functions stay func.func. After lower-graph-to-loop a function has the
 * calling convention documented at fzLowerGraphToLoop below.
 */
#ifndef FZ_LOOP_H
#define FZ_LOOP_H

#include "fz/graph.h" /* FzTensor: host buffers for the interpreter */
#include "fz/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * The op list
 *
 * X(ID, NAME) for every op of the dialect, once. FzLoopOpcode numbers
 * them; fzLoopGetOpcode maps an op to its entry, so code generators can
 * switch over the dialect without comparing names.
 *
 * Operand conventions (T: a scalar or vector type; idx: index):
 *   alloc       (dyn dim sizes: idx...) -> buffer
 *   dealloc     (buffer)
 *   view        (buffer [, offset: idx]) -> buffer   new shape/strides,
 *               element (i...) at src address + offset + sum(ik*sk')
 *   dim         (buffer) -> idx                      property `index`
 *   constant_buffer () -> buffer                     property `value`
 *                                                    (dense, read-only)
 *   for         (lb, ub, step: idx, inits...) -> (iter results...)
 *               body ^bb(iv: idx, iters...), ends in yield(iters...)
 *   parallel    (lbs..., ubs..., steps...: idx)  N dims, 3N operands,
 *               body ^bb(ivs: idx...), ends in yield()
 *   yield       (values...)                      terminator of for/parallel
 *   barrier     ()                               see docs
 *   load        (buffer, indices: idx...) -> elt
 *   store       (value: elt, buffer, indices: idx...)
 *   vector_load (buffer, indices...) -> vector<NxElt>  N consecutive
 *               elements along the last dim (whose stride must be 1)
 *   vector_store(value: vector<NxElt>, buffer, indices...)
 *   prefetch    (buffer, indices...)  a hint that the element's cache
 *               line will be read soon; no effect on values, indices
 *               may lie outside the buffer (then nothing happens)
 *   splat       (scalar) -> vector<NxT>
 *   constant    () -> T          property `value` (integer/float attr;
 *                                a splat dense attr for a vector)
 *   binary      (T, T) -> T      addf..powf, addi..shrsi
 *   unary       (T) -> T         negf..cos
 *   fma         (a, b, c: T) -> T  a*b+c, one rounding
 *   dot4        (acc, a, b: T) -> T  T i32 (or vector of): acc + the
 *               sum over the 4 bytes t of u8(a.t) * s8(b.t), wrapping
 *               (x86's vpdpbusd, AVX-512 VNNI / AVX-VNNI, per lane)
 *   cmpf/cmpi   (T, T) -> i1-of-T  property `predicate` (string)
 *   select      (cond, a: T, b: T) -> T
 *   casts       (A) -> B
 *===------------------------------------------------------------------===*/

/* clang-format off */
#define FZ_LOOP_OPS(X)                                                        \
  /* buffers */                                                               \
  X(ALLOC, "loop.alloc") X(DEALLOC, "loop.dealloc") X(VIEW, "loop.view")      \
  X(DIM, "loop.dim") X(CONSTANT_BUFFER, "loop.constant_buffer")               \
  /* structure */                                                             \
  X(FOR, "loop.for") X(PARALLEL, "loop.parallel") X(YIELD, "loop.yield")      \
  X(BARRIER, "loop.barrier")                                                  \
  /* memory */                                                                \
  X(LOAD, "loop.load") X(STORE, "loop.store")                                 \
  X(VECTOR_LOAD, "loop.vector_load") X(VECTOR_STORE, "loop.vector_store")     \
  X(PREFETCH, "loop.prefetch") X(SPLAT, "loop.splat")                         \
  /* constants and selection */                                               \
  X(CONSTANT, "loop.constant") X(SELECT, "loop.select")                       \
  X(CMPF, "loop.cmpf") X(CMPI, "loop.cmpi")                                   \
  /* float binary: maxf/minf propagate NaN; remf is C fmod */                 \
  X(ADDF, "loop.addf") X(SUBF, "loop.subf") X(MULF, "loop.mulf")              \
  X(DIVF, "loop.divf") X(REMF, "loop.remf") X(MAXF, "loop.maxf")              \
  X(MINF, "loop.minf") X(POWF, "loop.powf")                                   \
  /* integer binary (two's complement, wrapping; iN and index) */             \
  X(ADDI, "loop.addi") X(SUBI, "loop.subi") X(MULI, "loop.muli")              \
  X(DIVSI, "loop.divsi") X(REMSI, "loop.remsi") X(MAXSI, "loop.maxsi")        \
  X(MINSI, "loop.minsi") X(ANDI, "loop.andi") X(ORI, "loop.ori")              \
  X(XORI, "loop.xori") X(SHLI, "loop.shli") X(SHRSI, "loop.shrsi")            \
  /* ternary */                                                               \
  X(FMA, "loop.fma") X(DOT4, "loop.dot4")                                     \
  /* float unary */                                                           \
  X(NEGF, "loop.negf") X(ABSF, "loop.absf") X(EXP, "loop.exp")                \
  X(LOG, "loop.log") X(LOG1P, "loop.log1p") X(TANH, "loop.tanh")              \
  X(ERF, "loop.erf") X(SQRT, "loop.sqrt") X(RSQRT, "loop.rsqrt")              \
  X(FLOOR, "loop.floor") X(CEIL, "loop.ceil") X(ROUNDEVEN, "loop.roundeven")  \
  X(SIN, "loop.sin") X(COS, "loop.cos")                                       \
  /* casts */                                                                 \
  X(EXTF, "loop.extf") X(TRUNCF, "loop.truncf") X(SITOFP, "loop.sitofp")      \
  X(UITOFP, "loop.uitofp") X(FPTOSI, "loop.fptosi") X(EXTSI, "loop.extsi")    \
  X(EXTUI, "loop.extui") X(TRUNCI, "loop.trunci")                             \
  X(INDEX_CAST, "loop.index_cast") X(BITCAST, "loop.bitcast")
/* clang-format on */

typedef enum FzLoopOpcode {
#define FZ_LOOP_ENUM_ENTRY(id, name) FZ_LOOP_OP_##id,
  FZ_LOOP_OPS(FZ_LOOP_ENUM_ENTRY)
#undef FZ_LOOP_ENUM_ENTRY
  FZ_LOOP_NUM_OPS,
  FZ_LOOP_OP_UNKNOWN = FZ_LOOP_NUM_OPS /* not a loop-dialect op */
} FzLoopOpcode;

/* The opcode of a loop-dialect op; FZ_LOOP_OP_UNKNOWN for any other op
 * (or an unregistered one). O(1). */
FZ_API FzLoopOpcode fzLoopGetOpcode(const FzOp *op);
/* "loop.addf" etc.; NULL for FZ_LOOP_OP_UNKNOWN. */
FZ_API const char *fzLoopOpcodeGetName(FzLoopOpcode opcode);

/* Comparison predicates: the `predicate` property of cmpf / cmpi, a
 * string of the spelling given. Float: o* are false when an operand is
 * NaN, u* are true then; ord / uno test for NaN. Integer: s* signed,
 * u* unsigned. */
typedef enum FzLoopCmpFPredicate {
  FZ_LOOP_CMPF_OEQ, FZ_LOOP_CMPF_ONE, FZ_LOOP_CMPF_OLT, FZ_LOOP_CMPF_OLE,
  FZ_LOOP_CMPF_OGT, FZ_LOOP_CMPF_OGE, FZ_LOOP_CMPF_UEQ, FZ_LOOP_CMPF_UNE,
  FZ_LOOP_CMPF_ULT, FZ_LOOP_CMPF_ULE, FZ_LOOP_CMPF_UGT, FZ_LOOP_CMPF_UGE,
  FZ_LOOP_CMPF_ORD, FZ_LOOP_CMPF_UNO,
  FZ_LOOP_CMPF_NUM
} FzLoopCmpFPredicate;
typedef enum FzLoopCmpIPredicate {
  FZ_LOOP_CMPI_EQ, FZ_LOOP_CMPI_NE, FZ_LOOP_CMPI_SLT, FZ_LOOP_CMPI_SLE,
  FZ_LOOP_CMPI_SGT, FZ_LOOP_CMPI_SGE, FZ_LOOP_CMPI_ULT, FZ_LOOP_CMPI_ULE,
  FZ_LOOP_CMPI_UGT, FZ_LOOP_CMPI_UGE,
  FZ_LOOP_CMPI_NUM
} FzLoopCmpIPredicate;

/* The predicate of a (verified) cmpf / cmpi op as its enum's value; -1
 * for any other op or an unknown spelling. */
FZ_API int fzLoopCmpGetPredicate(const FzOp *op);
/* "olt", "sge"... for cmpf (isFloat) or cmpi; NULL when out of range. */
FZ_API const char *fzLoopCmpPredicateName(bool isFloat, int pred);

/* Registers the loop dialect into ctx (twice is harmless). */
FZ_API FZ_MUST_CHECK bool fzRegisterLoopDialect(FzContext *ctx);
/* The dialect's definition (static). */
FZ_API const FzDialectDef *fzLoopDialectGet(void);

/*===------------------------------------------------------------------===*
 * Accessors for code generators
 *===------------------------------------------------------------------===*/

/* loop.parallel: the number of dimensions (operands / 3). */
FZ_API size_t fzLoopParallelGetNumDims(const FzOp *op);
/* loop.for / loop.parallel: the body block (NULL if malformed). */
FZ_API FzBlock *fzLoopGetBody(const FzOp *op);
/* loop.load/store/vector_load/vector_store: the operand index of the
 * buffer (0 for loads, 1 for stores); the indices follow it. */
FZ_API size_t fzLoopMemGetBufferOperand(const FzOp *op);
/* True when v is the result of a loop.constant holding an integer (an
 * index or integer scalar); the value goes to *out. False for anything
 * else (a block argument, a float constant, a computed value). */
FZ_API bool fzLoopValueGetConstantInt(FzValue *v, int64_t *out);

/* Builders (insert at b's insertion point; NULL after an error). */
FZ_API FzValue *fzLoopCreateIndexConstant(FzBuilder *b, FzLoc *loc, int64_t v);
/* A float or integer constant of scalar type t. */
FZ_API FzValue *fzLoopCreateConstant(FzBuilder *b, FzLoc *loc, FzType *t,
                                     double v);

/*===------------------------------------------------------------------===*
 * Scalar semantics, shared by the folder, the loop interpreter and the
 * interpreters of dialects whose bodies reuse loop's scalar ops (the
 * kernel simulator). (eval.c)
 *===------------------------------------------------------------------===*/

/* A scalar value: a double already rounded to its float type, or an
 * int64 holding an integer's low `width` bits sign-extended (i1: 0/1). */
typedef union FzLoopScalar {
  double f;
  int64_t i;
} FzLoopScalar;

/* Evaluates one scalar op (arithmetic, math, cmp, select, cast) on
 * constant operands: `t` is the result's scalar type, `ot` the operands'
 * scalar type, pred the cmp predicate (fzLoopCmpGetPredicate) or -1.
 * Returns false for an integer division by zero. */
FZ_API bool fzLoopEvalScalar(FzLoopOpcode opc, int pred, FzType *t, FzType *ot,
                             size_t n, const FzLoopScalar *in,
                             FzLoopScalar *out);
/* Rounds / wraps a value to scalar type t. */
FZ_API FzLoopScalar fzLoopNormalize(FzType *t, FzLoopScalar v);
/* Reads / writes one element of type elt stored at p (host byte order,
 * f16/bf16 as their bits; p need not be aligned). */
FZ_API FzLoopScalar fzLoopReadElement(FzType *elt, const void *p);
FZ_API void fzLoopWriteElement(FzType *elt, void *p, FzLoopScalar v);

/*===------------------------------------------------------------------===*
 * The loop interpreter
 *
 * Evaluates a loop-level func.func on host memory, op by op, in program
 * order (loop.parallel iterations run in row-major order). Each argument
 * is bound to a caller-owned FzTensor whose data the function reads and
 * writes in place: the tensor's dtype and shape must equal the buffer
 * argument's element type and shape, and the argument's layout must be
 * the identity. Scalars are computed in double (int64 for integers and
 * index) and rounded to their type after every op, exactly as the
 * hardware would for f32/f64 (f16/bf16 arithmetic rounds per op too).
 * loop.alloc'd memory is zero-filled (the generated code does not
 * promise that: reading it before writing is a bug the interpreter's
 * `poison` option can catch by filling it with NaN / 0x5a bytes).
 *
 * Errors are reported at the failing op: an index out of bounds (with
 * the buffer, the dimension and the index), integer division by zero,
 * an allocation above the limit, a step that is not positive, a run
 * longer than its step budget (maxSteps).
 *===------------------------------------------------------------------===*/

/* An operand handed to an interpreter extension: a scalar, or a buffer
 * described by the address of its element (0, ..., 0), its shape and
 * strides (in elements) and the allocation [lo, hi) it lies in. */
typedef struct FzLoopInterpValue {
  FzType *type;        /* the operand's type */
  FzLoopScalar scalar; /* scalars only */
  char *data;          /* buffers only, from here on */
  size_t rank;
  const int64_t *shape, *strides;
  char *lo, *hi;
  bool readOnly;       /* a loop.constant_buffer */
} FzLoopInterpValue;

/* Ops of other dialects that the loop interpreter runs by calling back
 * (kernel.launch through the kernel simulator: fz/kernel.h). Only ops
 * without results qualify. Both hooks run on the interpreter's thread. */
typedef struct FzLoopInterpExtension {
  /* Whether `run` handles op; asked once per foreign op at compile time. */
  bool (*handles)(void *userData, const FzOp *op);
  /* Runs op on its operands (operand i in operands[i]). Reports its own
   * errors (as diagnostics) and returns false after one. */
  bool (*run)(void *userData, FzOp *op, size_t numOperands,
              const FzLoopInterpValue *operands);
  void *userData;
} FzLoopInterpExtension;

typedef struct FzLoopInterpOptions {
  /* Largest loop.alloc in bytes; 0 means the default, 2^32. */
  int64_t maxAllocBytes;
  /* Fill loop.alloc'd memory with NaN (floats) / 0x5a bytes (integers)
   * instead of zeros, to expose reads of uninitialized memory. */
  bool poison;
  /* Report nothing: failures only return false, with the first error's
   * text copied into errorMessage (errorMessageSize bytes). */
  bool quiet;
  char *errorMessage;
  size_t errorMessageSize;
  /* Runs ops of other dialects; NULL: such ops are errors. */
  const FzLoopInterpExtension *extension;
  /* Ops executed (every op of every block run, loop bodies once per
   * iteration) before the run stops with an error; 0: no limit. Ops run
   * by the extension count once (the kernel simulator has its own budget
   * per launch: fz/kernel.h). */
  int64_t maxSteps;
} FzLoopInterpOptions;

/* Runs `func` (a func.func with a body, loop-level: buffer arguments, no
 * results) with argument i bound to args[i]. Output arguments are
 * written in place. options may be NULL. False after reporting an
 * error (then outputs hold whatever was written before it). */
FZ_API FZ_MUST_CHECK bool
fzLoopInterpretFunction(FzOp *func, size_t numArgs, FzTensor *const *args,
                        const FzLoopInterpOptions *options);

/* Runs a function through the loop level, for fuse-run's
 * `--device loop-interp` and for tests. When func is still at the graph
 * level (no `loop.num_outputs`), `pipeline` (textual, on builtin.module;
 * NULL: the named pipeline "graph-to-loop") first runs on func's module,
 * in place (func stays valid). Then the loop interpreter runs func with
 * inputs[0..numInputs) bound to the input buffers and new zeroed tensors
 * for the outputs, which it returns in *outputs (an array of *numOutputs
 * tensors allocated through the context; release it with
 * fzTensorArrayDestroy). options may be NULL. False after reporting an
 * error. (pipelines/loop_run.c) */
FZ_API FZ_MUST_CHECK bool
fzLoopRunFunction(FzOp *func, size_t numInputs, FzTensor *const *inputs,
                  const char *pipeline, const FzLoopInterpOptions *options,
                  size_t *numOutputs, FzTensor ***outputs);

/*===------------------------------------------------------------------===*
 * lower-graph-to-loop
 *
 * Calling convention of a lowered function (what emit-llvm and the
 * runtimes implement). A graph function
 *   func.func @f(%x0: tensor<A>, ..., %xm: tensor<B>) -> (tensor<R0>, ...)
 * becomes
 *   func.func @f(%x0: buffer<A>, ..., %xm: buffer<B>,
 *                %out0: buffer<R0>, ...) attributes {loop.num_outputs = K}
 * returning nothing:
 *  - arguments keep their order; each tensor<S x T> becomes buffer<S x T>
 *    with the identity (row-major, contiguous) layout and memory space 0;
 *    a rank-0 tensor becomes buffer<T> (one element);
 *  - then one output buffer per result, in result order; the function
 *    writes every element of every output and never reads one before
 *    writing it;
 *  - the function attribute `loop.num_outputs` (i64) gives K, the number
 *    of trailing output arguments, so the inputs are the first
 *    (numArgs - K);
 *  - inputs are never written (they may be marked readonly); the caller
 *    passes distinct, non-overlapping output buffers that do not overlap
 *    any input (they may be marked noalias); buffers are the caller's,
 *    who allocates and frees them (align 16 recommended);
 *  - at the machine level a buffer argument is a single pointer to its
 *    element (0, ..., 0): shapes and strides are in the type.
 * Temporaries inside the function are loop.alloc / loop.dealloc pairs
 * (plan-memory may share or remove them); constants the body needs as
 * memory are loop.constant_buffer (read-only data).
 *
 * Structure of the lowered body: each graph.fusion group becomes one
 * loop nest (docs/dialects/loop.md, "Lowering"); every graph op outside a
 * group becomes its own nest. Unsupported ops (and dynamic shapes) are
 * errors at the op's location.
 *===------------------------------------------------------------------===*/

/* Lowers every func.func in module (a builtin.module) in place. Returns
 * false after reporting errors; the module may then be partly lowered. */
FZ_API FZ_MUST_CHECK bool fzLowerGraphToLoop(FzOp *module);

/*===------------------------------------------------------------------===*
 * plan-memory
 *
 * On a lowered function: removes loop.alloc temporaries that are never
 * read, computes an elementwise nest in place when one of its input
 * temporaries dies at it, and reuses a dead temporary's memory for a
 * later one of the same element type and no more elements (liveness by
 * position among the function's top-level ops). The pass option
 * `memory-report` (fuse-opt --plan-memory=memory-report) emits a remark
 * per function with the peak bytes of live temporaries before and after.
 * (transforms/plan_memory.c; docs/dialects/loop.md)
 *===------------------------------------------------------------------===*/

typedef struct FzMemoryPlanStats {
  int64_t peakBytesBefore; /* most temporary bytes live at once */
  int64_t peakBytesAfter;
  size_t allocsBefore, allocsAfter;
  size_t reused;  /* allocs that took over a dead buffer's memory */
  size_t inPlace; /* nests that now write into an input's buffer */
} FzMemoryPlanStats;

/* Plans the temporaries of one lowered func.func. stats may be NULL. */
FZ_API FZ_MUST_CHECK bool fzPlanMemory(FzOp *func, FzMemoryPlanStats *stats);

/*===------------------------------------------------------------------===*
 * tile-contractions (CPU)
 *
 * Rewrites each top-level contraction nest of a lowered function (a
 * matmul as lower-graph-to-loop emits it: a loop.parallel over the
 * output whose body holds one loop.for reduction sum of x * y, x not
 * depending on the last dim, y not on a row dim, then the fused epilogue
 * and stores contiguous in the last dim) into register-blocked tiles of
 * `rows` x `vectors` vectors of vectorBits / 32 f32 lanes: one fma per
 * accumulator and k, the epilogue computed on the accumulators as
 * vector ops, vector stores; y optionally packed into contiguous panels
 * first. Edges get smaller tiles; the last N % lanes columns keep the
 * original nest. Nests that do not match are left alone. A CPU-only
 * step: emit-llvm runs it with the target's vector width
 * (FzCodegenOptions.tileContractions); the loop IR the GPU path reads
 * does not contain it. (transforms/loop/tile_contractions.c,
 * docs/passes.md)
 *===------------------------------------------------------------------===*/

typedef enum FzTilePack {
  FZ_TILE_PACK_AUTO,   /* pack when y is reused by >= 4 row tiles, or
                          when y cannot be read lanes at a time */
  FZ_TILE_PACK_NEVER,  /* never (nests whose y needs packing stay) */
  FZ_TILE_PACK_ALWAYS,
} FzTilePack;

typedef struct FzTileContractionsOptions {
  unsigned vectorBits; /* vector register width (default 256) */
  unsigned rows;       /* MR: rows of a register tile (default 6) */
  unsigned vectors;    /* NV: vectors per row of a tile (default 2) */
  FzTilePack pack;     /* default FZ_TILE_PACK_AUTO */
  /* Nests of at most this many rows (M, the row dim's trip count) take
   * the small-M mappings instead, which stream the weight at memory
   * speed: along j when it is contiguous there, as dot products along k
   * when it is contiguous along k (default 16, at most 16; 0: never). */
  unsigned smallM;
  /* Tuning of the small-M stream form (0: chosen by the shape): values
   * of k per block; chunks of k, each one parallel iteration with its
   * own partial sums, added at the end. */
  unsigned smallMKBlock;
  unsigned smallMKSplit;
  /* The threads the parallel loops will run on (0: unknown, then 16):
   * the small-M stream form makes that many chunks of k. */
  unsigned threads;
  /* Small-M: how far ahead (in elements of the weight, along the
   * contiguous dim) the loops prefetch the weight; 0: chosen by the
   * mapping, negative: no prefetch. */
  int smallMPrefetch;
} FzTileContractionsOptions;

FZ_API void fzTileContractionsOptionsInit(FzTileContractionsOptions *options);
/* Tiles the contraction nests of one lowered func.func in place;
 * *numTiled (may be NULL) counts them. options may be NULL. False after
 * reporting an error. */
FZ_API FZ_MUST_CHECK bool
fzTileContractions(FzOp *func, const FzTileContractionsOptions *options,
                   size_t *numTiled);

/*===------------------------------------------------------------------===*
 * tile-int8-contractions (CPU)
 *
 * Rewrites each top-level integer matmul nest of a lowered function (a
 * loop.parallel whose k loop sums muli(x, y) in i32, x and y 8-bit
 * loads extended with extsi or extui, minus a zero point defined
 * outside the nest) into register tiles of `rows` x `vectors` vectors
 * of vectorBits / 32 i32 lanes accumulated with loop.dot4 (vpdpbusd):
 * both operands packed at run time in 4-byte k groups (A as u8, B as
 * s8, shifted by 128 where their type is the other one), the zero
 * points and the shifts applied after the k loop through row and column
 * byte sums, then the fused epilogue on the accumulators as vector ops.
 * Exact (i32 arithmetic modulo 2^32, as the nest). Before matching, an
 * i32 buffer that one nest fills with ext(byte) [- zp] is narrowed to
 * the bytes (its readers extend them again), so that fold-qdq's
 * sub_zero_point producers leave bytes in memory. The last N % W
 * columns stay the original nest. (transforms/loop/tile_int8.c,
 * docs/codegen.md)
 *===------------------------------------------------------------------===*/

typedef struct FzTileInt8Options {
  unsigned vectorBits; /* vector register width (default 512) */
  unsigned rows;       /* MR (default 6) */
  unsigned vectors;    /* NV (default 4) */
} FzTileInt8Options;

FZ_API void fzTileInt8OptionsInit(FzTileInt8Options *options);
/* Tiles the integer contraction nests of one lowered func.func in
 * place; *numTiled (may be NULL) counts them. options may be NULL. False
 * after reporting an error. */
FZ_API FZ_MUST_CHECK bool
fzTileInt8Contractions(FzOp *func, const FzTileInt8Options *options,
                       size_t *numTiled);

/*===------------------------------------------------------------------===*
 * tile-convolutions (CPU)
 *
 * Rewrites each top-level conv2d nest of a lowered function (what
 * lower-graph-to-loop makes of a `graph.conv2d` in NCHW and its fused
 * epilogue: a loop.parallel over the output [N, M, OH, OW] whose body
 * holds three nested loop.for reductions over (c, kh, kw) summing
 * x[n, ch(m, c), oh*sh + kh*dh - pt, ow*sw + kw*dw - pl] * w(m, c, kh, kw),
 * padding as clamped indices and a select, then the epilogue and stores
 * contiguous in ow) into register tiles of MR output channels x NV
 * vectors of W = vectorBits / 32 output columns: the weights packed
 * [M / MR][C/g * KH * KW][MR] f32 and broadcast, the input read as
 * vectors along ow (from a zero-padded copy split by column phase
 * (ow*sw mod sw) when the conv pads, strides along ow or reads bf16/f16;
 * directly otherwise), one fma per accumulator and term, the epilogue on
 * the accumulators as vector ops, vector stores. Columns left over get
 * half-width vectors (down to 4 lanes), the last few the original nest.
 * Nests that do not match are left alone. A CPU-only step: emit-llvm
 * runs it with the target's vector width
 * (FzCodegenOptions.tileConvolutions). (transforms/loop/conv_tile.c,
 * docs/passes.md)
 *===------------------------------------------------------------------===*/

typedef struct FzTileConvolutionsOptions {
  unsigned vectorBits;   /* vector register width (default 256) */
  unsigned accumulators; /* most vector accumulators of a tile (MR * NV);
                            0: 24 at 512 bits, else 12 (default 0) */
  unsigned rows;         /* MR; 0: chosen by the cost model (default) */
  unsigned vectors;      /* NV; 0: chosen by the cost model (default) */
  unsigned mapping;      /* FZ_CONV_MAPPING_*: which tiles (default auto) */
} FzTileConvolutionsOptions;

/* The register tiles of tile-convolutions (docs/codegen.md): vectors
 * along one output row (rows), or along the whole output plane through a
 * padded, stride-phase-split copy of the input (flat), or along the
 * output channels with the output positions broadcast from that copy
 * (channels; groups == 1, M a multiple of the vector); auto takes
 * channels for groups == 1 convs with taps (KH KW > 1) and M a multiple
 * of the vector at 512 bits, else flat where the output width is no
 * multiple of the vector. */
enum {
  FZ_CONV_MAPPING_AUTO = 0,
  FZ_CONV_MAPPING_ROWS = 1,
  FZ_CONV_MAPPING_FLAT = 2,
  FZ_CONV_MAPPING_CHANNELS = 3,
};

FZ_API void fzTileConvolutionsOptionsInit(FzTileConvolutionsOptions *options);
/* Tiles the conv2d nests of one lowered func.func in place; *numTiled
 * (may be NULL) counts them. options may be NULL. False after reporting
 * an error. */
FZ_API FZ_MUST_CHECK bool
fzTileConvolutions(FzOp *func, const FzTileConvolutionsOptions *options,
                   size_t *numTiled);

/*===------------------------------------------------------------------===*
 * stage-rows (CPU)
 *
 * In each top-level loop.parallel (a row), when a loop.for reduction
 * accumulates a term whose computation holds a math function (exp, log,
 * tanh, erf, ...) and a later 1-d loop.parallel phase of the row over
 * the same range recomputes that same term, the reduction stores it
 * into a per-row scratch buffer (loop.alloc in the row, at most maxBytes)
 * and the phase loads it: softmax evaluates exp once per element. A
 * CPU-only step run by emit-llvm (FzCodegenOptions.stageRows).
 * (transforms/loop/stage_rows.c, docs/passes.md)
 *===------------------------------------------------------------------===*/

/* *numStaged (may be NULL) counts the phases changed. False after
 * reporting an error. */
FZ_API FZ_MUST_CHECK bool fzStageRows(FzOp *func, int64_t maxBytes,
                                      size_t *numStaged);

/* Registers lower-graph-to-loop (on builtin.module), plan-memory (on
 * func.func) and the named pipeline graph-to-loop
 * (func.func(fuse),lower-graph-to-loop,func.func(plan-memory)). Twice is
 * harmless. */
FZ_API FZ_MUST_CHECK bool fzRegisterLoopPasses(FzContext *ctx);

#ifdef __cplusplus
}
#endif

#endif /* FZ_LOOP_H */
