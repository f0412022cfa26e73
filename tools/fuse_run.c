/* tools/fuse_run.c - fuse-run: execute a function of a .fuse file.
 *
 *   fuse-run FILE [--entry NAME] [--device interp]
 *            [--input a.npy [b.npy ...]] [--random-inputs SEED]
 *            [--output-dir DIR] [--save-inputs]
 *            [--compare DIR] [--rtol R] [--atol A] [--print-limit N]
 *            [--max-steps N] [--precision P] [--layout L]
 *
 * Inputs bind to the entry function's arguments in order, from .npy
 * files (--input takes every following argument up to the next option,
 * and may be repeated) or from seeded random data. The outputs are
 * written to DIR/output_0.npy, output_1.npy, ... (with --save-inputs,
 * the inputs to DIR/input_N.npy too), all or nothing; without
 * --output-dir and --compare they are printed. --compare DIR checks each
 * output against DIR/output_N.npy with numpy.allclose's rule and prints
 * the largest absolute and relative errors.
 *
 * The entry is --entry NAME, else @main, else the only function with a
 * body. Devices: `interp` (the reference interpreter), `loop-interp`,
 * `sim` (loop-interp with kernel.launch run by the kernel simulator),
 * `cpu` (native code through LLVM, tools/fuse_run_cpu.c: --threads,
 * --bench, --check-interp, ...), and `auto`, the default: cpu when the
 * module compiles to native code, else the interpreter (with a note on
 * stderr saying why).
 *
 * --precision P (fz/precision.h) is the precision policy of f32 matmuls
 * and convolutions: bf16 and fp16 rewrite the module's contractions
 * (fzModuleApplyPrecision) for every device; default, ieee and tf32
 * choose the GPU kernels (cuda, sim: default is tf32) and leave the CPU
 * and the interpreters exact. FZ_GPU_TF32=1 (=0), from before the
 * option, still means tf32 (ieee) when --precision is not given.
 *
 * --layout L (fz/layout.h): nhwc runs convert-layout in the pipeline of
 * every compiled device (cpu, cuda, loop-interp, sim), so --check-interp
 * and --compare check it against the model's own NCHW interpretation.
 *
 * Exit status: 0 success, 1 an error (input, evaluation, I/O) or a
 * mismatch, 2 bad usage. No output file is left behind after an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "fz/dialects.h"
#include "fz/graph.h"
#include "fz/kernel.h" /* --device sim */
#include "fz/loop.h" /* --device loop-interp */
#include "tools/common_input.h" /* .onnx inputs: the ONNX importer */
#include "tools/common_options.h"
#include "tools/common_timing.h" /* --timing */
#include "fz/cuda.h" /* --device auto: is there a GPU? */
#include "tools/fuse_run_cpu.h" /* --device cpu */
#include "tools/fuse_run_cuda.h" /* --device cuda */
#include "tools/fuse_run_internal.h"

/* parse_args's result for --help: the usage was printed, exit 0. */
#define HELP_PRINTED (-1)

typedef struct RunOptions {
  const char *file;
  const char *entry;
  const char *device;
  const char **inputs;
  size_t numInputs;
  bool haveSeed;
  unsigned long long seed;
  bool inInputs;      /* parsing: positionals after --input are inputs */
  bool havePrecision; /* parsing: --precision was given */
  bool haveLayout;    /* parsing: --layout was given */
  bool help;          /* --help */
  const char *outputDir;
  bool saveInputs;
  const char *compareDir;
  double rtol, atol;
  int64_t printLimit;
  int64_t maxSteps; /* --max-steps: loop-interp and sim budgets; 0: none */
  bool simStats;      /* --sim-stats */
  ToolInputShapes shapes; /* --input-shape NAME=DIMS (ONNX models) */
  FuseRunCpuOptions cpu; /* --device cpu's options */
} RunOptions;

static int usage_error(const char *fmt, const char *arg) {
  return toolUsageError("fuse-run", fmt, arg);
}

#define FIELD(f) offsetof(RunOptions, f)

static const char *const kDevices[] = {"auto",       "cpu", "cuda", "interp",
                                       "loop-interp", "sim", NULL};

static int input_flag(void *opts, const char *value) {
  RunOptions *o = opts;
  if (value)
    o->inputs[o->numInputs++] = value;
  o->inInputs = true;
  return 0;
}

static int random_inputs(void *opts, const char *value) {
  RunOptions *o = opts;
  char *end;
  errno = 0;
  o->seed = strtoull(value, &end, 10);
  if (!*value || *end || errno || value[0] == '-')
    return usage_error("--random-inputs expects a non-negative integer seed, "
                       "got '%s'",
                       value);
  o->haveSeed = true;
  return 0;
}

static int layout(void *opts, const char *value) {
  RunOptions *o = opts;
  o->haveLayout = true;
  return toolParseLayout("fuse-run", value, &o->cpu.layout);
}

static int precision(void *opts, const char *value) {
  RunOptions *o = opts;
  if (!fzPrecisionParse(fzStringRefFromCString(value), &o->cpu.precision))
    return toolUsageError("fuse-run", "--precision expects %s, got '%s'",
                          fzPrecisionGetChoicesText(), value);
  o->havePrecision = true;
  return 0;
}

/* The options of every device, in --help order (common_options.h); the
 * CPU and benchmark options have their table in fuse_run_cpu.c. */
static const ToolOption kOptions[] = {
    TOOL_STRING("entry", NULL, "NAME", FIELD(entry),
                "Function to run (default: @main, or the only function with "
                "a body)"),
    TOOL_CHOICE("device", NULL, "DEV", FIELD(device), kDevices,
                "Where to run: auto (cuda when a driver and a device are "
                "present, else cpu when the module compiles to native code, "
                "else interp, saying why), cpu (LLVM, this machine), cuda "
                "(PTX on an NVIDIA GPU), interp (the reference "
                "interpreter), loop-interp (fuse, lower to loops, run the "
                "loop interpreter), sim (the GPU path on the kernel "
                "simulator)"),
    TOOL_CALL("precision", NULL, "P", precision,
              "f32 matmuls and convolutions: default (cuda, sim: tf32; cpu, "
              "interpreters: exact f32), ieee (exact f32 everywhere), tf32 "
              "(tf32 tensor cores; cpu and interpreters: exact f32), bf16 or "
              "fp16 (16-bit operands, f32 accumulation; every device). "
              "Without it, FZ_GPU_TF32=1 means tf32 and =0 ieee "
              "(deprecated)"),
    TOOL_CALL("layout", NULL, "L", layout,
              "Layout of convolution regions in compiled code: nchw (the "
              "model's; the default on cpu and loop-interp), nhwc "
              "(convert-layout before fusion) or auto (nhwc where the "
              "convolutions hold most of the work; the default on cuda "
              "and sim). The interpreter's reference stays NCHW"),
    TOOL_CALL("input", NULL, NULL, input_flag,
              "Inputs: the .npy files that follow, one per argument, in "
              "order"),
    TOOL_CALL("random-inputs", NULL, "SEED", random_inputs,
              "Seeded random inputs instead"),
    TOOL_INPUT_SHAPE(FIELD(shapes)),
    TOOL_STRING("output-dir", NULL, "DIR", FIELD(outputDir),
                "Write DIR/output_N.npy"),
    TOOL_FLAG("save-inputs", NULL, FIELD(saveInputs),
              "Also write the inputs as DIR/input_N.npy"),
    TOOL_STRING("compare", NULL, "DIR", FIELD(compareDir),
                "Compare with DIR/output_N.npy"),
    TOOL_DOUBLE("rtol", NULL, "R", FIELD(rtol), 0, 1e300,
                "Relative comparison tolerance (default 1e-5)"),
    TOOL_DOUBLE("atol", NULL, "A", FIELD(atol), 0, 1e300,
                "Absolute comparison tolerance (default 1e-8)"),
    TOOL_INT("print-limit", NULL, "N", FIELD(printLimit), -1, 1e15,
             "Print at most N elements per output (default 256; -1: all)"),
    TOOL_INT("max-steps", NULL, "N", FIELD(maxSteps), 1, 9e18,
             "loop-interp, sim: stop with an error after N ops of the loop "
             "interpreter, and after N thread-steps of each simulated launch "
             "(default: no limit, and 2^32 per launch)"),
    TOOL_FLAG("sim-stats", NULL, FIELD(simStats),
              "sim: after each launch, the bytes its threads read and wrote "
              "in global and shared memory"),
    TOOL_FLAG("help", "h", FIELD(help), "Print this help and exit"),
};

/* Every option ends a run of inputs after --input; then the CPU table. */
static int cpu_option(void *opts, int argc, char **argv, int i) {
  RunOptions *o = opts;
  o->inInputs = false;
  return fuseRunCpuParseArg(&o->cpu, argc, argv, i);
}

static void cpu_names(void *opts, void (*add)(void *ctx, const char *name),
                      void *ctx) {
  (void)opts;
  for (size_t i = 0; i < fuseRunCpuParser.numOptions; ++i)
    add(ctx, fuseRunCpuParser.options[i].name);
}

static int positional(void *opts, const char *arg) {
  RunOptions *o = opts;
  if (o->inInputs)
    o->inputs[o->numInputs++] = arg;
  else if (!o->file)
    o->file = arg;
  else
    return usage_error("unexpected argument '%s'", arg);
  return 0;
}

static const ToolParser kParser = {
    .tool = "fuse-run",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .extra = cpu_option,
    .extraNames = cpu_names,
    .positional = positional,
};

static void print_help(FILE *out) {
  fputs("usage: fuse-run FILE [options]\n\n"
        "Runs a function of FILE (.fuse or .onnx) as native code or on an\n"
        "interpreter.\n\nOPTIONS:\n",
        out);
  toolPrintOptions(&kParser, out);
  fputs("\nCPU AND BENCHMARK OPTIONS:\n", out);
  toolPrintOptions(&fuseRunCpuParser, out);
}

/* Fills o from argv; 0, HELP_PRINTED after --help, or the exit status
 * of a usage error. */
static int parse_args(int argc, char **argv, RunOptions *o) {
  memset(o, 0, sizeof *o);
  o->rtol = 1e-5;
  o->atol = 1e-8;
  o->printLimit = 256;
  o->device = "auto";
  o->inputs = calloc((size_t)argc, sizeof *o->inputs);
  if (!o->inputs)
    return usage_error("%s", "out of memory");
  int rc = toolParseArgs(&kParser, argc, argv, o);
  if (rc)
    return rc;
  if (o->help) {
    print_help(stdout);
    return HELP_PRINTED;
  }
  if (!o->file)
    return usage_error("%s", "no input file");
  o->cpu.rtol = o->rtol;
  o->cpu.atol = o->atol;
  /* The switch from before --precision: FZ_GPU_TF32=1 turned tf32 on. */
  const char *tf32 = getenv("FZ_GPU_TF32");
  if (!o->havePrecision && tf32 && *tf32) {
    if (strcmp(tf32, "1") != 0 && strcmp(tf32, "0") != 0)
      return usage_error("FZ_GPU_TF32 (deprecated: use --precision) "
                         "expects 1 (tf32) or 0 (ieee), got '%s'",
                         tf32);
    o->cpu.precision = tf32[0] == '1' ? FZ_PRECISION_TF32 : FZ_PRECISION_IEEE;
  }
  if (o->haveSeed && o->numInputs)
    return usage_error("%s", "give either --input or --random-inputs, not "
                             "both");
  if (o->saveInputs && !o->outputDir)
    return usage_error("%s", "--save-inputs needs --output-dir");
  if (o->simStats && strcmp(o->device, "sim") != 0)
    return usage_error("%s", "--sim-stats needs --device sim");
  if (o->cpu.profile && strcmp(o->device, "cuda") != 0)
    return usage_error("%s", "--profile needs --device cuda");
  if (o->cpu.benchLock && o->cpu.bench <= 0)
    return usage_error("%s", "--bench-lock needs --bench N");
  if (o->cpu.benchCold && o->cpu.bench <= 0)
    return usage_error("%s", "--bench-cold needs --bench N");
  return 0;
}

/* --sim-stats: one line per launch. */
static void report_launch(void *ud, FzOp *launch, FzOp *kernel,
                          const FzKernelSimStats *st) {
  (void)ud;
  (void)launch;
  FzStringRef name = fzSymbolGetName(kernel);
  printf("sim-stats: @%.*s: global memory %lld bytes read, %lld written; "
         "shared memory %lld read, %lld written\n",
         (int)name.length, name.data, (long long)st->globalRead,
         (long long)st->globalWritten, (long long)st->sharedRead,
         (long long)st->sharedWritten);
}

/* The steps of --layout=nhwc and auto before graph-to-loop
 * (fzModuleApplyLayout on the other devices). */
#define LAYOUT_NHWC_STEPS "func.func(convert-layout),canonicalize,cse,"
#define LAYOUT_AUTO_STEPS                                                    \
  "func.func(convert-layout{conv=auto}),canonicalize,cse,"

static const char *layout_steps(const RunOptions *o) {
  return o->cpu.layout == FZ_GRAPH_LAYOUT_NHWC   ? LAYOUT_NHWC_STEPS
         : o->cpu.layout == FZ_GRAPH_LAYOUT_AUTO ? LAYOUT_AUTO_STEPS
                                                 : "";
}

/* The pipeline --device sim lowers a graph-level function with into
 * buf: graph-to-kernel with the precision policy (as --device cuda). */
static const char *sim_pipeline(const RunOptions *o, char *buf, size_t size) {
  bool wgmma = o->cpu.gpuArch && !strcmp(o->cpu.gpuArch, "sm_90a");
  snprintf(buf, size,
           "%sgraph-to-loop,lower-loop-to-kernel{precision=%s%s}",
           layout_steps(o),
           fzPrecisionGetName(o->cpu.precision), wgmma ? " wgmma=true" : "");
  return buf;
}

/* The pipeline of --device loop-interp (NULL: graph-to-loop). */
static const char *loop_pipeline(const RunOptions *o) {
  return o->cpu.layout == FZ_GRAPH_LAYOUT_NHWC
             ? LAYOUT_NHWC_STEPS "graph-to-loop"
         : o->cpu.layout == FZ_GRAPH_LAYOUT_AUTO
             ? LAYOUT_AUTO_STEPS "graph-to-loop"
             : NULL;
}

/* The entry function of module, or NULL after printing why. */
static FzOp *find_entry(FzOp *module, const char *want) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  if (want) {
    FzOp *f = fzSymbolTableLookupIn(module, fzStringRefFromCString(want));
    if (!f || !fzOpGetDef(f) || strcmp(fzOpGetDef(f)->name, "func.func")) {
      fprintf(stderr, "fuse-run: error: no function @%s in the input\n", want);
      return NULL;
    }
    return f;
  }
  FzOp *main = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (main && fzOpGetDef(main) &&
      strcmp(fzOpGetDef(main)->name, "func.func") == 0)
    return main;
  FzOp *only = NULL;
  size_t count = 0;
  for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    const FzOpDef *d = fzOpGetDef(op);
    if (d && strcmp(d->name, "func.func") == 0 &&
        fzRegionGetFirstBlock(fzOpGetRegion(op, 0))) {
      only = op;
      count++;
    }
  }
  if (count == 1)
    return only;
  fprintf(stderr, "fuse-run: error: %s; choose one with --entry NAME\n",
          count ? "the input has several functions and no @main"
                : "the input has no function with a body");
  return NULL;
}

static FzType *function_type(FzOp *func) {
  FzAttr *a = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  return a && fzAttrGetKind(a) == FZ_ATTR_TYPE ? fzTypeAttrGetValue(a) : NULL;
}

/* The .npy (or .pb) inputs of an ONNX model, read before it is
 * imported: the importer takes their shapes for the symbolic dims and
 * binds those it needs at compile time (shape operands) as constants.
 * NULL after an error (said). */
static FzTensor **read_onnx_inputs(const RunOptions *o, FzContext *ctx,
                                   bool *uint16) {
  FzTensor **pre = calloc(o->numInputs ? o->numInputs : 1, sizeof *pre);
  for (size_t i = 0; pre && i < o->numInputs; ++i)
    if (!(pre[i] = fuseRunReadTensorUint16(ctx, o->inputs[i], &uint16[i]))) {
      fprintf(stderr, "fuse-run: error: cannot read input #%zu\n", i);
      for (size_t k = 0; k < i; ++k)
        fzTensorDestroy(pre[k]);
      free(pre);
      return NULL;
    }
  return pre;
}

/* UINT16 data given for an f16/bf16 argument holds that type's bits (the
 * importer accepted it: FzOnnxInputValue.uint16Bits): the tensors of the
 * unbound inputs take the arguments' element types. */
static void retag_uint16_inputs(FzOp *module, const char *entry, size_t n,
                                FzTensor **pre, const bool *bound,
                                const bool *uint16) {
  FzOp *func = module && pre && uint16 ? find_entry(module, entry) : NULL;
  FzType *ft = func ? function_type(func) : NULL;
  size_t arg = 0;
  for (size_t i = 0; ft && i < n; ++i) {
    if (bound[i])
      continue;
    if (arg >= fzFunctionTypeGetNumInputs(ft))
      break;
    FzType *t = fzFunctionTypeGetInput(ft, arg++);
    FzType *e = fzTypeIsShaped(t) ? fzShapedTypeGetElementType(t) : NULL;
    if (uint16[i] && e &&
        pre[i]->dtype == fzIntegerTypeGet(fzTypeGetContext(e), 16) &&
        (fzTypeGetKind(e) == FZ_TYPE_BF16 || fzTypeGetKind(e) == FZ_TYPE_F16))
      pre[i]->dtype = e;
  }
}

/* Imports the model; for an ONNX model with inputs, pre receives them
 * and bound[i] whether input i was bound as a constant. */
static FzOp *load(const RunOptions *o, FzContext *ctx, FzTensor ***pre,
                  bool **bound) {
  FzOnnxImportOptions io = {o->shapes.n, o->shapes.shapes, 0, NULL, NULL};
  FzOnnxInputValue *values = NULL;
  bool *uint16 = NULL; /* which inputs held UINT16 data */
  if (fzInputIsOnnx(o->file) && !o->haveSeed && o->numInputs) {
    if (!(uint16 = calloc(o->numInputs, sizeof *uint16)) ||
        !(*pre = read_onnx_inputs(o, ctx, uint16))) {
      free(uint16);
      /* A model input that is no tensor (a sequence) makes its file no
       * TensorProto: the model's own error says more. */
      FzOp *m = fzParseOrImportFileWithOptions(ctx, o->file, &io,
                                               "fuse-run");
      fzOpDestroy(m);
      return NULL;
    }
    values = calloc(o->numInputs, sizeof *values);
    *bound = calloc(o->numInputs, sizeof **bound);
    if (!values || !*bound) {
      free(values);
      fprintf(stderr, "fuse-run: error: out of memory\n");
      return NULL;
    }
    for (size_t i = 0; i < o->numInputs; ++i) {
      values[i].index = i;
      values[i].value = (*pre)[i];
      values[i].ifNeeded = true;
      values[i].uint16Bits = uint16[i];
    }
    io.numInputValues = o->numInputs;
    io.inputValues = values;
    io.boundValues = *bound;
  }
  FzOp *module = fzParseOrImportFileWithOptions(ctx, o->file, &io,
                                                "fuse-run");
  free(values);
  retag_uint16_inputs(module, o->entry, o->numInputs, *pre, *bound, uint16);
  free(uint16);
  for (size_t i = 0; module && *bound && i < o->numInputs; ++i)
    if ((*bound)[i])
      fprintf(stderr, "fuse-run: note: input #%zu (%s) is needed at "
                      "compile time (a shape operand or a control-flow "
                      "condition): the model is specialized to its "
                      "value\n",
              i, o->inputs[i]);
  return module;
}

static int run(RunOptions *o, FzContext *ctx) {
  double t0 = fzToolTimingNow();
  FzTensor **pre = NULL; /* an ONNX model's inputs, read first */
  bool *bound = NULL;    /* which of them became constants */
  FzOp *module = load(o, ctx, &pre, &bound);
  fzToolTimingAdd(o->cpu.timingReport, "parse/import",
                  fzToolTimingNow() - t0);
  if (!module) {
    for (size_t i = 0; pre && i < o->numInputs; ++i)
      fzTensorDestroy(pre[i]);
    free(pre);
    free(bound);
    return 1;
  }
  int status = 1;
  FzTensor **inputs = NULL, **outputs = NULL, **ref = NULL;
  size_t nIn = 0, nOut = 0, nRef = 0;
  FzOp *func = NULL;
  FzType *ft = NULL;
  FuseRunCpu *cpu = NULL;
  FuseRunCuda *cuda = NULL;
  int cpuStatus = 0;
  FzKernelSimOptions simLimits = {.maxSteps = o->maxSteps};
  if (o->simStats)
    simLimits.report = report_launch;
  FzLoopInterpExtension simExtension;
  fzKernelSimExtensionInit(&simExtension, &simLimits);
  FzLoopInterpOptions loopOptions = {.maxSteps = o->maxSteps};
  char simPipeline[128];
  FzLoopInterpOptions simOptions = {.extension = &simExtension,
                                    .maxSteps = o->maxSteps};
  if (!fzOpVerify(module) || !(func = find_entry(module, o->entry)) ||
      !(ft = function_type(func)))
    goto done;
  size_t want = fzFunctionTypeGetNumInputs(ft);
  FzAttr *nOuts = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  if (nOuts && fzAttrGetKind(nOuts) == FZ_ATTR_INTEGER &&
      (size_t)fzIntegerAttrGetValue(nOuts) <= want)
    want -= (size_t)fzIntegerAttrGetValue(nOuts); /* lowered: outputs */
  size_t given = o->numInputs, numBound = 0;
  for (size_t i = 0; pre && i < o->numInputs; ++i)
    numBound += bound[i];
  if (o->haveSeed) {
    if (!fuseRunRandomInputs(ctx, ft, want, o->seed, &inputs, &nIn))
      goto done;
  } else if (given - numBound != want) {
    FzStringRef fname = fzSymbolGetName(func);
    fprintf(stderr,
            "fuse-run: error: function @%.*s takes %zu argument%s "
            "but %zu input%s given%s\n",
            (int)fname.length, fname.data, want + numBound,
            want + numBound == 1 ? "" : "s", given,
            given == 1 ? " was" : "s were",
            given ? "" : " (use --input or --random-inputs)");
    goto done;
  } else if (pre) {
    /* The inputs that stay arguments, in order; the bound ones are
     * constants of the module now. */
    inputs = calloc(want ? want : 1, sizeof *inputs);
    if (!inputs)
      goto done;
    for (size_t i = 0; i < o->numInputs; ++i)
      if (!bound[i]) {
        inputs[nIn++] = pre[i];
        pre[i] = NULL;
      }
  } else {
    inputs = calloc(want ? want : 1, sizeof *inputs);
    if (!inputs)
      goto done;
    for (nIn = 0; nIn < want; ++nIn)
      if (!(inputs[nIn] = fuseRunReadTensor(ctx, o->inputs[nIn]))) {
        fprintf(stderr,
                "fuse-run: error: cannot read the input of argument "
                "#%zu (%%arg%zu)\n",
                nIn, nIn);
        goto done;
      }
  }
  char cudaWhy[512] = "";
  FzCudaProbeResult probe = strcmp(o->device, "auto")
                                ? FZ_CUDA_PROBE_NO_DRIVER
                                : fzCudaProbeDevice(cudaWhy, sizeof cudaWhy);
  if (probe == FZ_CUDA_PROBE_NO_DEVICE)
    fprintf(stderr, "fuse-run: note: --device auto does not use the GPU "
                    "(it falls back to the CPU): %s\n",
            cudaWhy);
  /* Without --layout: auto for the GPU (cuda, sim), the model's own
   * layout elsewhere (fz/layout.h). */
  if (!o->haveLayout)
    o->cpu.layout = !strcmp(o->device, "cuda") || !strcmp(o->device, "sim") ||
                            probe == FZ_CUDA_PROBE_READY
                        ? FZ_GRAPH_LAYOUT_AUTO
                        : FZ_GRAPH_LAYOUT_NCHW;
  /* bf16, fp16: the contractions' operands, in place for every device,
   * so that --check-interp interprets what the device runs. */
  if (!fzModuleApplyPrecision(module, o->cpu.precision, !o->cpu.noFuse))
    goto done;
  if (!strcmp(o->device, "cuda") || probe == FZ_CUDA_PROBE_READY) {
    if (!(cuda = fuseRunCudaCreate(ctx, module, &o->cpu)))
      goto done;
  } else if (!strcmp(o->device, "cpu")) {
    if (!(cpu = fuseRunCpuCreate(ctx, module, &o->cpu, false, NULL, 0)))
      goto done;
  } else if (!strcmp(o->device, "auto")) {
    char why[256] = "";
    if (!(cpu = fuseRunCpuCreate(ctx, module, &o->cpu, true, why,
                                 sizeof why)))
      fprintf(stderr, "fuse-run: note: --device auto runs the interpreter: "
                      "no native code (%s)\n", why);
  }
  /* --device sim --check-interp: the reference first (the simulator's
   * run lowers the graph-level function in place). */
  bool simCheck = !strcmp(o->device, "sim") && o->cpu.checkInterp;
  if (simCheck && nOuts) {
    fprintf(stderr, "fuse-run: error: --check-interp needs a graph-level "
                    "function (this one is already lowered)\n");
    goto done;
  }
  if (simCheck &&
      !fzInterpretFunction(func, nIn, inputs, NULL, &nRef, &ref))
    goto done;
  if (cuda ? !fuseRunCudaExecute(cuda, func, nIn, inputs, &nOut, &outputs,
                                 stdout, &cpuStatus)
      : cpu ? !fuseRunCpuExecute(cpu, func, nIn, inputs, &nOut, &outputs,
                               stdout, &cpuStatus)
      : strcmp(o->device, "loop-interp") == 0
          ? !fzLoopRunFunction(func, nIn, inputs, loop_pipeline(o),
                               &loopOptions, &nOut, &outputs)
      : strcmp(o->device, "sim") == 0
          ? !fzLoopRunFunction(func, nIn, inputs,
                               sim_pipeline(o, simPipeline, sizeof simPipeline),
                               &simOptions, &nOut, &outputs)
          : !fzInterpretFunction(func, nIn, inputs, NULL, &nOut, &outputs))
    goto done;
  status = cpuStatus;
  if (simCheck) {
    if (nRef != nOut) {
      printf("check-interp: MISMATCH: %zu outputs, the interpreter gives "
             "%zu\n", nOut, nRef);
      status = 1;
    }
    for (size_t i = 0; i < nRef && i < nOut; ++i)
      if (!fuseRunCheckOne(stdout, i, outputs[i], ref[i], o->cpu.rtol,
                           o->cpu.atol))
        status = 1;
  }
  if (o->outputDir) {
    if (o->saveInputs &&
        !fuseRunWriteAll(ctx, o->outputDir, "input", nIn, inputs))
      status = 1;
    if (status == 0 &&
        !fuseRunWriteAll(ctx, o->outputDir, "output", nOut, outputs))
      status = 1;
  }
  if (status == 0 && o->compareDir)
    status = fuseRunCompare(ctx, stdout, o->compareDir, nOut, outputs, o->rtol,
                            o->atol);
  if (status == 0 && !o->outputDir && !o->compareDir)
    for (size_t i = 0; i < nOut; ++i) {
      char name[32];
      snprintf(name, sizeof name, "output_%zu", i);
      fuseRunPrintTensor(stdout, name, outputs[i], o->printLimit);
    }
done:
  for (size_t i = 0; inputs && i < nIn; ++i)
    fzTensorDestroy(inputs[i]);
  free(inputs);
  for (size_t i = 0; pre && i < o->numInputs; ++i)
    fzTensorDestroy(pre[i]);
  free(pre);
  free(bound);
  fzTensorArrayDestroy(ctx, nOut, outputs);
  fzTensorArrayDestroy(ctx, nRef, ref);
  fuseRunCpuDestroy(cpu);
  fuseRunCudaDestroy(cuda);
  fzOpDestroy(module);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "fuse-run: error: cannot write to stdout\n");
    status = 1;
  }
  return status;
}

int main(int argc, char **argv) {
  double start = fuseRunNow();
  RunOptions o;
  int status = parse_args(argc, argv, &o);
  o.cpu.startSeconds = start;
  if (status != 0) {
    free(o.inputs);
    return status == HELP_PRINTED ? 0 : status;
  }
  FzContext *ctx = fzContextCreate();
  if (!ctx || !fzRegisterAllDialects(ctx)) {
    fprintf(stderr, "fuse-run: error: cannot create a context\n");
    fzContextDestroy(ctx);
    free(o.inputs);
    return 1;
  }
  FzToolTiming timing;
  fzToolTimingInit(&timing);
  timing.start = start;
  if (o.cpu.timing)
    o.cpu.timingReport = &timing;
  status = run(&o, ctx);
  if (o.cpu.timing)
    fzToolTimingPrint(&timing, stderr);
  fzContextDestroy(ctx);
  free(o.inputs);
  return status;
}
