/* tools/fuse_run.c - fuse-run: execute a function of a .fuse file.
 *
 *   fuse-run FILE [--entry NAME] [--device interp]
 *            [--input a.npy [b.npy ...]] [--random-inputs SEED]
 *            [--output-dir DIR] [--save-inputs]
 *            [--compare DIR] [--rtol R] [--atol A] [--print-limit N]
 *            [--max-steps N]
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
 * Exit status: 0 success, 1 an error (input, evaluation, I/O) or a
 * mismatch, 2 bad usage. No output file is left behind after an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/dialects.h"
#include "fz/graph.h"
#include "fz/kernel.h" /* --device sim */
#include "fz/loop.h" /* --device loop-interp */
#include "tools/common_input.h" /* .onnx inputs: the ONNX importer */
#include "tools/common_timing.h" /* --timing */
#include "fz/cuda.h" /* --device auto: is there a GPU? */
#include "tools/fuse_run_cpu.h" /* --device cpu */
#include "tools/fuse_run_cuda.h" /* --device cuda */
#include "tools/fuse_run_internal.h"

#define EXIT_USAGE 2
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
  const char *outputDir;
  bool saveInputs;
  const char *compareDir;
  double rtol, atol;
  long long printLimit;
  long long maxSteps; /* --max-steps: loop-interp and sim budgets; 0: none */
  bool simStats;      /* --sim-stats */
  FuseRunCpuOptions cpu; /* --device cpu's options */
} RunOptions;

static const char kUsage[] =
    "usage: fuse-run FILE [options]\n"
    "\n"
    "Runs a function of FILE (.fuse or .onnx) as native code or on an\n"
    "interpreter.\n"
    "\n"
    "  --entry NAME          function to run (default: @main, or the only\n"
    "                        function with a body)\n"
    "  --device DEV          auto (default: cpu when the module compiles to\n"
    "                        native code, else interp, saying why), cpu\n"
    "                        (LLVM, this machine), interp (the reference\n"
    "                        interpreter), or loop-interp (fuse, lower to\n"
    "                        loops, run the loop interpreter), or cuda\n"
    "                        (PTX on an NVIDIA GPU; auto picks it when a\n"
    "                        driver and a device are present), or sim\n"
    "                        (the GPU path on the kernel simulator: a\n"
    "                        graph-level function is lowered with\n"
    "                        graph-to-kernel, then the loop interpreter\n"
    "                        runs it, each kernel.launch in the simulator)\n"
    "                        FZ_GPU_TF32=1 (cuda, sim): f32 matmuls on tf32\n"
    "                        tensor cores (operands rounded to 10 mantissa\n"
    "                        bits)\n"    "  --input A.npy ...     inputs, one per argument, in order\n"
    "  --random-inputs SEED  seeded random inputs instead\n"
    "  --output-dir DIR      write DIR/output_N.npy\n"
    "  --save-inputs         also write the inputs as DIR/input_N.npy\n"
    "  --compare DIR         compare with DIR/output_N.npy\n"
    "  --rtol R, --atol A    comparison tolerances (default 1e-5, 1e-8)\n"
    "  --print-limit N       print at most N elements per output (default\n"
    "                        256; -1: all)\n"
    "  --max-steps N         loop-interp, sim: stop with an error after N\n"
    "                        ops of the loop interpreter, and after N\n"
    "                        thread-steps of each simulated launch\n"
    "                        (default: no limit, and 2^32 per launch)\n"
    "  --sim-stats           sim: after each launch, the bytes its threads\n"
    "                        read and wrote in global and shared memory\n"
    "  --help                this text\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fuse-run: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(run 'fuse-run --help' for usage)\n");
  return EXIT_USAGE;
}

static bool parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return *s && !*end && errno == 0 && *out >= 0;
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
  bool inInputs = false;
  int cpuArg;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (a[0] != '-' || a[1] == '\0') {
      if (inInputs)
        o->inputs[o->numInputs++] = a;
      else if (!o->file)
        o->file = a;
      else
        return usage_error("unexpected argument '%s'", a);
      continue;
    }
    inInputs = false;
    const char *name = a + (a[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const char *value = eq ? eq + 1 : NULL;
#define IS(s) (len == strlen(s) && strncmp(name, s, len) == 0)
#define VALUE()                                                                \
  do {                                                                         \
    if (!value) {                                                              \
      if (i + 1 >= argc)                                                       \
        return usage_error("option '%s' requires a value", a);                 \
      value = argv[++i];                                                       \
    }                                                                          \
  } while (0)
    if (IS("help") || IS("h")) {
      fputs(kUsage, stdout);
      fputs(fuseRunCpuUsage, stdout);
      return HELP_PRINTED;
    } else if (IS("entry")) {
      VALUE();
      o->entry = value;
    } else if (IS("device")) {
      VALUE();
      o->device = value;
    } else if (IS("input")) {
      if (value)
        o->inputs[o->numInputs++] = value;
      inInputs = true;
    } else if (IS("random-inputs")) {
      VALUE();
      char *end;
      errno = 0;
      o->seed = strtoull(value, &end, 10);
      if (!*value || *end || errno)
        return usage_error("--random-inputs expects a non-negative integer "
                           "seed, got '%s'",
                           value);
      o->haveSeed = true;
    } else if (IS("output-dir")) {
      VALUE();
      o->outputDir = value;
    } else if (IS("save-inputs")) {
      o->saveInputs = true;
    } else if (IS("compare")) {
      VALUE();
      o->compareDir = value;
    } else if (IS("rtol") || IS("atol")) {
      bool rt = IS("rtol");
      VALUE();
      if (!parse_double(value, rt ? &o->rtol : &o->atol))
        return usage_error("expected a non-negative number, got '%s'", value);
    } else if (IS("sim-stats")) {
      o->simStats = true;
    } else if (IS("print-limit")) {
      VALUE();
      char *end;
      o->printLimit = strtoll(value, &end, 10);
      if (!*value || *end)
        return usage_error("--print-limit expects an integer, got '%s'", value);
    } else if (IS("max-steps")) {
      VALUE();
      char *end;
      errno = 0;
      o->maxSteps = strtoll(value, &end, 10);
      if (!*value || *end || errno || o->maxSteps < 1)
        return usage_error("--max-steps expects a positive integer, got "
                           "'%s'",
                           value);
    } else if ((cpuArg = fuseRunCpuParseArg(&o->cpu, argc, argv, &i))) {
      if (cpuArg == 2)
        return EXIT_USAGE;
    } else {
      return usage_error("unknown option '%s'", a);
    }
#undef IS
#undef VALUE
  }
  if (!o->file)
    return usage_error("%s", "no input file");
  if (strcmp(o->device, "interp") != 0 && strcmp(o->device, "auto") != 0 &&
      strcmp(o->device, "loop-interp") != 0 && strcmp(o->device, "cpu") != 0 &&
      strcmp(o->device, "cuda") != 0 && strcmp(o->device, "sim") != 0)
    return usage_error("device '%s' is not available: this build runs "
                       "'auto', 'cpu', 'cuda', 'interp', 'loop-interp' and "
                       "'sim'",
                       o->device);
  o->cpu.rtol = o->rtol;
  o->cpu.atol = o->atol;
  if (o->haveSeed && o->numInputs)
    return usage_error("%s", "give either --input or --random-inputs, not "
                             "both");
  if (o->saveInputs && !o->outputDir)
    return usage_error("%s", "--save-inputs needs --output-dir");
  if (o->simStats && strcmp(o->device, "sim") != 0)
    return usage_error("%s", "--sim-stats needs --device sim");
  if (o->cpu.benchLock && o->cpu.bench <= 0)
    return usage_error("%s", "--bench-lock needs --bench N");
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

/* The entry function of module, or NULL after printing why. */
/* The pipeline --device sim lowers a graph-level function with:
 * graph-to-kernel, with tf32 matmuls under FZ_GPU_TF32=1 (as --device
 * cuda). */
static const char *sim_pipeline(void) {
  const char *tf32 = getenv("FZ_GPU_TF32");
  return tf32 && !strcmp(tf32, "1")
             ? "graph-to-loop,lower-loop-to-kernel{tf32}"
             : "graph-to-kernel";
}

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

static int run(const RunOptions *o, FzContext *ctx) {
  double t0 = fzToolTimingNow();
  FzOp *module = fzParseOrImportFile(ctx, o->file);
  fzToolTimingAdd(o->cpu.timingReport, "parse/import",
                  fzToolTimingNow() - t0);
  if (!module)
    return 1;
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
  if (o->haveSeed) {
    if (!fuseRunRandomInputs(ctx, ft, want, o->seed, &inputs, &nIn))
      goto done;
  } else {
    FzStringRef fname = fzSymbolGetName(func);
    if (o->numInputs != want) {
      fprintf(stderr,
              "fuse-run: error: function @%.*s takes %zu argument%s "
              "but %zu input%s given%s\n",
              (int)fname.length, fname.data, want, want == 1 ? "" : "s",
              o->numInputs, o->numInputs == 1 ? " was" : "s were",
              o->numInputs ? "" : " (use --input or --random-inputs)");
      goto done;
    }
    inputs = calloc(want ? want : 1, sizeof *inputs);
    if (!inputs)
      goto done;
    for (nIn = 0; nIn < want; ++nIn)
      if (!(inputs[nIn] = fzNpyReadFile(ctx, o->inputs[nIn]))) {
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
          ? !fzLoopRunFunction(func, nIn, inputs, NULL, &loopOptions, &nOut,
                               &outputs)
      : strcmp(o->device, "sim") == 0
          ? !fzLoopRunFunction(func, nIn, inputs, sim_pipeline(),
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
