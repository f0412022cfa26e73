/* main.c - embedding fuse in a C program (docs/api.md walks through it).
 *
 * 1. Create a context; install a diagnostic handler; register fuse's
 *    dialects and passes, then our own (scale_dialect.c); replace the
 *    fusion cost model with one that wraps the default.
 * 2. Parse a graph program that uses emb.scale; verify it; print it, and
 *    check that the printed text parses back to the same text.
 * 3. Run a textual pipeline that mixes our pass with canonicalize and
 *    fuse; print the result and our pass's statistic.
 * 4. Execute @main on host tensors, on the reference interpreter and
 *    compiled for this CPU (fz/runtime.h), and check both against C.
 * 5. Feed malformed input and report the diagnostics it produces.
 *
 * Exit status 0 when every step did what it should. Every fuse call that
 * can fail is checked; fuse has already reported why through our handler
 * by the time it returns false or NULL.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scale_dialect.h"

/*---- diagnostics ----------------------------------------------------------*/

typedef struct DiagState {
  const char *prefix; /* printed before each diagnostic */
  size_t errors;      /* errors seen by this handler */
} DiagState;

static void print_to_stdout(FzStringRef chunk, void *userData) {
  (void)userData;
  fwrite(chunk.data, 1, chunk.length, stdout);
}

/* Our handler: prints each diagnostic (with its source line and caret)
 * to stdout behind a prefix, counts errors, and claims it (returns true)
 * so that fuse's default printer stays quiet. */
static bool on_diagnostic(const FzDiagnostic *diag, void *userData) {
  DiagState *s = userData;
  if (fzDiagnosticGetSeverity(diag) == FZ_SEVERITY_ERROR)
    s->errors++;
  fputs(s->prefix, stdout);
  fzDiagnosticPrint(diag, true, print_to_stdout, NULL);
  return true;
}

/* Collects printed text in a growing malloc'ed buffer. */
typedef struct Text {
  char *data;
  size_t len, cap;
  bool failed;
} Text;

static void print_to_text(FzStringRef chunk, void *userData) {
  Text *t = userData;
  if (t->failed || chunk.length == 0)
    return;
  if (t->len + chunk.length + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 1024;
    while (cap < t->len + chunk.length + 1)
      cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) {
      t->failed = true;
      return;
    }
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->len, chunk.data, chunk.length);
  t->len += chunk.length;
  t->data[t->len] = '\0';
}

/* Prints module, parses that text again and prints the result: custom
 * print and parse hooks must give the same text back. */
static bool round_trips(FzContext *ctx, FzOp *module) {
  Text first = {0}, second = {0};
  fzOpPrint(module, 0, print_to_text, &first);
  FzOp *again = NULL;
  if (!first.failed && first.data)
    again = fzParseSource(ctx, (FzStringRef){first.data, first.len},
                          FZ_STR("printed.fuse"), 0);
  if (again)
    fzOpPrint(again, 0, print_to_text, &second);
  bool same = again && !second.failed && second.data &&
              strcmp(first.data, second.data) == 0;
  fzOpDestroy(again);
  free(first.data);
  free(second.data);
  return same;
}

/*---- a replacement cost model ---------------------------------------------*/

/* The default roofline estimate, counting how often the fuse pass asks. */
static bool counting_estimate(const FzFusionCostModel *model,
                              const FzFusionTarget *target,
                              const FzFusionKernelDesc *kernel,
                              FzFusionEstimate *out) {
  unsigned long *calls = model->userData;
  ++*calls;
  return fzFusionEstimateDefault(target, kernel, out);
}

/*---- the program ----------------------------------------------------------*/

/* relu((x + b) * 2 * 0.5 * 3), with the scales written in our dialect. */
static const char kProgram[] =
    "func.func @main(%x: tensor<2x4xf32>, %b: tensor<4xf32>)\n"
    "    -> tensor<2x4xf32> {\n"
    "  %0 = graph.add %x, %b : tensor<2x4xf32>, tensor<4xf32>"
    " -> tensor<2x4xf32>\n"
    "  %1 = emb.scale %0 by 2.0 : tensor<2x4xf32>\n"
    "  %2 = emb.scale %1 by 0.5 : tensor<2x4xf32>\n"
    "  %3 = \"emb.scale\"(%2) <{factor = 3.0 : f64}>"
    " : (tensor<2x4xf32>) -> tensor<2x4xf32>\n"
    "  %4 = graph.relu %3 : tensor<2x4xf32>\n"
    "  return %4 : tensor<2x4xf32>\n"
    "}\n";

/* A parse error our parse hook reports, and a verifier error our verify
 * hook reports (the generic form bypasses the parse hook). */
static const char kMalformed[] =
    "func.func @bad(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = emb.scale %x by \"two\" : tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n"
    "}\n";
static const char kInvalid[] =
    "func.func @bad(%x: tensor<4xi32>) -> tensor<4xi32> {\n"
    "  %0 = \"emb.scale\"(%x) <{factor = 2.0 : f64}>"
    " : (tensor<4xi32>) -> tensor<4xi32>\n"
    "  return %0 : tensor<4xi32>\n"
    "}\n";

static const char kPipeline[] =
    "builtin.module(func.func(canonicalize,emb-expand-scale,canonicalize,"
    "cse,fuse))";

/*---- steps ----------------------------------------------------------------*/

static bool setup(FzContext *ctx, FzFusionCostModel *model) {
  if (!fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx) ||
      !embRegister(ctx))
    return false;
  return fzContextSetFusionCostModel(ctx, model); /* copied */
}

static bool run_pipeline(FzContext *ctx, FzOp *module) {
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm)
    return false;
  bool ok = fzPassManagerParsePipeline(pm, FZ_STR(kPipeline));
  if (ok) {
    printf("--- running %s ---\n", kPipeline);
    ok = fzPassManagerRun(pm, module);
  }
  if (ok) {
    puts("--- after the pipeline ---");
    fzOpPrint(module, 0, print_to_stdout, NULL);
    puts("--- pass statistics ---");
    fzPassManagerPrintStatistics(pm, print_to_stdout, NULL);
  }
  fzPassManagerDestroy(pm); /* also destroys the passes it owns */
  return ok;
}

/* The fixed inputs of @main: x[i] = i - 3.5, b[j] = j / 4. NULL entries
 * after an error. */
static void make_inputs(FzContext *ctx, FzTensor **x, FzTensor **b) {
  const int64_t xShape[2] = {2, 4}, bShape[1] = {4};
  *x = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, xShape);
  *b = fzTensorCreate(ctx, fzF32TypeGet(ctx), 1, bShape);
  for (int64_t i = 0; *x && i < 8; ++i)
    fzTensorSetF64(*x, i, (double)i - 3.5);
  for (int64_t i = 0; *b && i < 4; ++i)
    fzTensorSetF64(*b, i, 0.25 * (double)i);
}

/* Prints t's elements and returns the largest difference from the same
 * arithmetic in C: relu((x + b) * 3). */
static double print_and_compare(const FzTensor *t) {
  double worst = 0;
  for (int64_t i = 0; i < t->numElements; ++i) {
    double xi = (double)i - 3.5, bi = 0.25 * (double)(i % 4);
    double want = (xi + bi) * 3.0 > 0 ? (xi + bi) * 3.0 : 0.0;
    double got = fzTensorGetF64(t, i);
    worst = fmax(worst, fabs(got - want));
    printf("%s%g", i ? " " : "", got);
  }
  printf("\n");
  return worst;
}

/* Runs @main on the reference interpreter. */
static bool interpret(FzContext *ctx, FzOp *module, FzTensor *const *inputs) {
  FzOp *func = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (!func)
    return fzEmitError(ctx, fzOpGetLoc(module), "no function @main");
  size_t numOutputs = 0;
  FzTensor **outputs = NULL;
  if (!fzInterpretFunction(func, 2, inputs, NULL, &numOutputs, &outputs))
    return false;
  puts("--- @main on the reference interpreter ---");
  double worst = print_and_compare(outputs[0]);
  printf("max |interpreter - C| = %g\n", worst);
  fzTensorArrayDestroy(ctx, numOutputs, outputs);
  return worst < 1e-6;
}

/* Compiles the module for this CPU (graph -> loop -> LLVM -> native code
 * in this process) and runs @main on a pool of two threads. */
static bool run_on_cpu(FzContext *ctx, FzOp *module, FzTensor *const *inputs) {
  FzCpuRuntime *rt = fzCpuRuntimeCreate(ctx, 2);
  FzCpuExecutable *exe = rt ? fzCpuExecutableCreate(rt, module, NULL) : NULL;
  FzCpuFunction *f = exe ? fzCpuExecutableLookup(exe, FZ_STR("main")) : NULL;
  if (exe && !f)
    fzEmitError(ctx, fzOpGetLoc(module), "no compiled function @main");
  size_t numOutputs = 0;
  FzTensor **outputs = NULL;
  bool ok = f && fzCpuFunctionRun(f, 2, inputs, &numOutputs, &outputs);
  if (ok) {
    printf("--- @main compiled for the CPU (%zu inputs, %zu output, "
           "%u threads) ---\n",
           fzCpuFunctionGetNumInputs(f), fzCpuFunctionGetNumOutputs(f),
           fzCpuRuntimeGetNumThreads(rt));
    double worst = print_and_compare(outputs[0]);
    printf("max |cpu - C| = %g\n", worst);
    ok = worst < 1e-6;
    fzTensorArrayDestroy(ctx, numOutputs, outputs);
  }
  fzCpuExecutableDestroy(exe); /* executables before their runtime */
  fzCpuRuntimeDestroy(rt);
  return ok;
}

static bool execute(FzContext *ctx, FzOp *module) {
  FzTensor *x = NULL, *b = NULL;
  make_inputs(ctx, &x, &b);
  FzTensor *inputs[2] = {x, b};
  bool ok = x && b && interpret(ctx, module, inputs) &&
            run_on_cpu(ctx, module, inputs);
  fzTensorDestroy(x);
  fzTensorDestroy(b);
  return ok;
}

/* Parsing (and verifying) bad input must fail with our handler having
 * seen the errors; nothing leaks and the context stays usable. */
static bool expect_rejected(FzContext *ctx, const char *name,
                            const char *text, DiagState *diags) {
  size_t before = diags->errors;
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(text),
                          fzStringRefFromCString(name), 0);
  bool accepted = m && fzOpVerify(m);
  fzOpDestroy(m); /* NULL is ignored */
  return !accepted && diags->errors > before;
}

int main(void) {
  printf("fuse %s (headers %s)\n", fzGetVersionString(), FZ_VERSION_STRING);
  FzContext *ctx = fzContextCreate();
  if (!ctx)
    return 1;
  DiagState diags = {"[embed] ", 0};
  FzDiagHandlerId handler = fzContextPushDiagHandler(ctx, on_diagnostic,
                                                     &diags);
  unsigned long estimates = 0;
  FzFusionCostModel model = {"counting", counting_estimate, &estimates};

  bool ok = setup(ctx, &model);
  FzOp *module = NULL;
  if (ok) {
    module = fzParseSource(ctx, FZ_STR(kProgram), FZ_STR("example.fuse"), 0);
    ok = module && fzOpVerify(module);
  }
  if (ok) {
    puts("--- parsed ---");
    fzOpPrint(module, 0, print_to_stdout, NULL);
    ok = round_trips(ctx, module);
    printf("print -> parse -> print: %s\n", ok ? "same text" : "DIFFERS");
  }
  if (ok)
    ok = run_pipeline(ctx, module);
  if (ok)
    printf("cost model consulted: %s\n", estimates > 0 ? "yes" : "no");
  ok = ok && execute(ctx, module);
  fzOpDestroy(module);

  if (ok) {
    puts("--- malformed input ---");
    diags.prefix = "caught: ";
    ok = expect_rejected(ctx, "malformed.fuse", kMalformed, &diags) &&
         expect_rejected(ctx, "invalid.fuse", kInvalid, &diags);
  }

  fzContextPopDiagHandler(ctx, handler);
  fzContextDestroy(ctx);
  puts(ok ? "embed: OK" : "embed: FAILED");
  return ok ? 0 : 1;
}
