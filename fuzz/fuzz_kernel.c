/* fuzz_kernel.c - libFuzzer target for the kernel dialect: its parser
 * hooks, verifiers and printer, and the kernel simulator
 * (dialects/kernel/, fz/kernel.h) with the loop interpreter that runs
 * kernel.launch through it.
 *
 * The input is text. When it parses and verifies:
 *  1. it prints, reparses, verifies and prints to the same text (custom
 *     form), as in fuzz_parser;
 *  2. every top-level kernel.func is simulated directly
 *     (fzKernelSimulate) on one small launch picked by a hash of the
 *     input (at most 256 threads in all, 2^20 thread-steps), with buffer
 *     arguments of its
 *     signature's shape (a dynamic dim is 8; strided layouts get memory
 *     covering their span; nothing above 1 MiB) filled with small values,
 *     and scalar arguments set to small numbers;
 *  3. every top-level func.func with a body and static, identity-layout
 *     buffer arguments runs in the loop interpreter with kernel.launch
 *     handled by the simulator (what `fuse-run --device sim` does), both
 *     with budgets of 2^20 steps.
 * Simulation errors are expected (races, out-of-bounds accesses, bad
 * launches); a crash, a sanitizer report, a leak or a hang (libFuzzer's
 * -timeout) is a bug: the simulator must report, never fail otherwise.
 */
#include "fuzz/fuzz_common.h"

#define MAX_ARGS 16
#define MAX_BYTES (1 << 20)
/* Step budgets (a loop of 2^60 iterations is an error, not a hang). */
#define MAX_STEPS (1 << 20)

/* The launches tried: grid x, y, z, block x, y, z, dynamic shared. */
static const FzKernelLaunchConfig kConfigs[] = {
    {{1, 1, 1}, {1, 1, 1}, 0},     {{2, 1, 1}, {32, 1, 1}, 0},
    {{1, 1, 1}, {64, 1, 1}, 256},  {{2, 2, 1}, {4, 2, 2}, 64},
    {{1, 2, 1}, {32, 2, 1}, 1024}, {{3, 1, 1}, {7, 1, 1}, 12},
};
static const FzKernelSimOptions kLimits = {.maxSteps = MAX_STEPS};

static uint32_t hash_bytes(const uint8_t *data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 16777619u;
  return h;
}

/* Fills n elements of type elt at p with small non-zero values. */
static void fill(FzType *elt, char *p, int64_t n, uint32_t seed) {
  size_t esz = fzTypeGetStorageSize(elt);
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    FzLoopScalar v;
    if (fzTypeIsFloat(elt))
      v.f = (double)((int)((seed >> 8) % 17) - 8) / 4.0;
    else
      v.i = (int64_t)((seed >> 8) % 9) - 4;
    fzLoopWriteElement(elt, p + (size_t)i * esz, fzLoopNormalize(elt, v));
  }
}

typedef struct Arg {
  FzLoopInterpValue v;
  int64_t shape[FZ_GRAPH_MAX_RANK], strides[FZ_GRAPH_MAX_RANK];
  char *mem;
} Arg;

/* Sets up argument a of type t; false when the harness skips the kernel
 * (a rank, layout or size it does not build). */
static bool make_arg(Arg *a, FzType *t, uint32_t seed) {
  memset(a, 0, sizeof *a);
  a->v.type = t;
  if (fzTypeGetKind(t) != FZ_TYPE_BUFFER) {
    if (fzTypeIsFloat(t))
      a->v.scalar.f = 1.5;
    else
      a->v.scalar = fzLoopNormalize(t, (FzLoopScalar){.i = 3 + seed % 5});
    return true;
  }
  size_t rank = fzShapedTypeGetRank(t);
  FzType *elt = fzShapedTypeGetElementType(t);
  size_t esz = fzTypeGetStorageSize(elt);
  const int64_t *strides = fzBufferTypeGetStrides(t);
  if (rank > FZ_GRAPH_MAX_RANK || esz == 0)
    return false;
  int64_t span = 1, dense = 1;
  for (size_t d = rank; d-- > 0;) {
    int64_t n = fzShapedTypeGetDim(t, d);
    a->shape[d] = n == FZ_DYNAMIC ? 8 : n;
    a->strides[d] = strides ? strides[d] : dense;
    if (a->strides[d] < 0 || a->strides[d] > MAX_BYTES || a->shape[d] > MAX_BYTES)
      return false;
    if (a->shape[d] == 0)
      span = 0;
    else if (span)
      span += (a->shape[d] - 1) * a->strides[d];
    dense *= a->shape[d] ? a->shape[d] : 1;
    if (span > MAX_BYTES || dense > MAX_BYTES)
      return false;
  }
  if ((uint64_t)span * esz > MAX_BYTES)
    return false;
  a->mem = calloc((size_t)span * esz + 1, 1);
  if (!a->mem)
    abort();
  fill(elt, a->mem, span, seed);
  a->v.data = a->v.lo = a->mem;
  a->v.hi = a->mem + (size_t)span * esz;
  a->v.rank = rank;
  a->v.shape = a->shape;
  a->v.strides = a->strides;
  return true;
}

static FzType *signature(FzOp *func) {
  FzAttr *a = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  return a && fzAttrGetKind(a) == FZ_ATTR_TYPE ? fzTypeAttrGetValue(a) : NULL;
}

static void simulate_kernel(FzOp *kernel, const FzKernelLaunchConfig *cfg,
                            uint32_t seed) {
  FzType *ft = signature(kernel);
  if (!ft || fzFunctionTypeGetNumInputs(ft) > MAX_ARGS)
    return;
  size_t n = fzFunctionTypeGetNumInputs(ft);
  Arg args[MAX_ARGS];
  FzLoopInterpValue vals[MAX_ARGS];
  size_t made = 0;
  bool ok = true;
  for (; made < n && ok; ++made) {
    ok = make_arg(&args[made], fzFunctionTypeGetInput(ft, made), seed + made);
    vals[made] = args[made].v;
  }
  if (ok)
    (void)fzKernelSimulateWithOptions(kernel, NULL, cfg, &kLimits, n, vals);
  for (size_t i = 0; i < made; ++i)
    free(args[i].mem);
}

/* A loop-level host function: every argument a static identity buffer
 * of a dtype tensors support. */
static void run_host(FzContext *ctx, FzOp *func, uint32_t seed) {
  FzType *ft = signature(func);
  if (!ft || !fzRegionGetFirstBlock(fzOpGetRegion(func, 0)) ||
      fzFunctionTypeGetNumResults(ft) != 0 ||
      fzFunctionTypeGetNumInputs(ft) > MAX_ARGS)
    return;
  size_t n = fzFunctionTypeGetNumInputs(ft);
  FzTensor *tensors[MAX_ARGS] = {0};
  size_t made = 0;
  bool ok = true;
  for (; made < n; ++made) {
    FzType *t = fzFunctionTypeGetInput(ft, made);
    if (fzTypeGetKind(t) != FZ_TYPE_BUFFER || fzBufferTypeGetStrides(t) ||
        fzBufferTypeGetMemorySpace(t) != 0 || !fzShapedTypeHasStaticShape(t) ||
        !fzTensorDTypeIsSupported(fzShapedTypeGetElementType(t)) ||
        fzShapedTypeGetNumElements(t) > MAX_BYTES / 8) {
      ok = false;
      break;
    }
    tensors[made] = fzTensorCreate(ctx, fzShapedTypeGetElementType(t),
                                   fzShapedTypeGetRank(t),
                                   fzShapedTypeGetShape(t));
    if (!tensors[made]) {
      ok = false;
      break;
    }
    fill(tensors[made]->dtype, tensors[made]->data,
         tensors[made]->numElements, seed + made);
  }
  if (ok) {
    FzLoopInterpExtension ext;
    fzKernelSimExtensionInit(&ext, &kLimits);
    FzLoopInterpOptions o = {.extension = &ext, .maxAllocBytes = MAX_BYTES,
                             .maxSteps = MAX_STEPS};
    (void)fzLoopInterpretFunction(func, n, tensors, &o);
  }
  for (size_t i = 0; i < made; ++i)
    fzTensorDestroy(tensors[i]);
}

static void check_round_trip(FzContext *ctx, FzOp *module) {
  FuzzBuf first = {0}, second = {0};
  fzOpPrint(module, 0, fuzz_buf_append, &first);
  FzOp *again = fzParseSource(ctx, fuzz_buf_ref(&first),
                              FZ_STR("printed.fuse"), 0);
  if (!again || !fzOpVerify(again))
    fuzz_fail("printed kernel IR does not parse or verify",
              fuzz_buf_ref(&first), FZ_STR(""));
  fzOpPrint(again, 0, fuzz_buf_append, &second);
  if (!fzStringRefEqual(fuzz_buf_ref(&first), fuzz_buf_ref(&second)))
    fuzz_fail("print -> parse -> print differs", fuzz_buf_ref(&first),
              fuzz_buf_ref(&second));
  fzOpDestroy(again);
  free(first.data);
  free(second.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  FzOp *module = fzParseSource(ctx, (FzStringRef){(const char *)data, size},
                               FZ_STR("fuzz.fuse"), 0);
  if (module && fzOpVerify(module)) {
    check_round_trip(ctx, module);
    uint32_t h = hash_bytes(data, size);
    const FzKernelLaunchConfig *cfg =
        &kConfigs[h % (sizeof kConfigs / sizeof *kConfigs)];
    FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
    for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op;
         op = fzOpGetNextInBlock(op)) {
      if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_FUNC)
        simulate_kernel(op, cfg, h);
      else if (fzOpGetDef(op) &&
               strcmp(fzOpGetDef(op)->name, "func.func") == 0)
        run_host(ctx, op, h);
    }
  }
  fzOpDestroy(module);
  fzContextDestroy(ctx);
  return 0;
}
