/* tools/fuse_opt_passes.c - fuse-opt's pass flags (see
 * fuse_opt_passes.h): parsing them, listing passes, checking the pipeline
 * once up front, and running it on each chunk with the instrumentation
 * the flags ask for.
 *
 * Per-pass flags (--cse, --canonicalize=max-iterations=3) are turned
 * into pipeline text with mlir-opt's implicit nesting: consecutive passes
 * anchored on the same op (func.func) share one nested pipeline; passes
 * that run on any op, or on builtin.module, run on the module. Knowing
 * which names are passes needs a registry, hence a scratch context per
 * lookup (the registry is per context; the tool keeps no globals).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fz/dialects.h"
#include "tools/common_options.h"
#include "tools/fuse_opt_passes.h"

#define F(f) offsetof(FzOptPassFlags, f)

static int set_pipeline(void *opts, const char *value) {
  FzOptPassFlags *f = opts;
  /* As in mlir-opt: one pipeline; a second would silently replace the
   * first. */
  if (f->pipeline)
    return toolUsageError("fuse-opt",
                          "option '--pass-pipeline' may only be given once "
                          "(to run several pipelines, join them with ',')");
  f->pipeline = value;
  return 0;
}

static int add_print(const char **list, size_t *n, const char *value,
                     const char *name) {
  if (*n == FZ_OPT_MAX_PRINT_LISTS)
    return toolUsageError("fuse-opt", "too many '--%s' options", name);
  list[(*n)++] = value;
  return 0;
}
static int add_before(void *opts, const char *value) {
  FzOptPassFlags *f = opts;
  return add_print(f->before, &f->numBefore, value, "print-ir-before");
}
static int add_after(void *opts, const char *value) {
  FzOptPassFlags *f = opts;
  return add_print(f->after, &f->numAfter, value, "print-ir-after");
}

/* --verify-each[=true|false]: the opposite of --no-verify-each. */
static int set_verify_each(void *opts, const char *value) {
  FzOptPassFlags *f = opts;
  if (!value || !strcmp(value, "true") || !strcmp(value, "1"))
    f->noVerifyEach = false;
  else if (!strcmp(value, "false") || !strcmp(value, "0"))
    f->noVerifyEach = true;
  else
    return toolUsageError("fuse-opt",
                          "option '--verify-each' takes no value (or "
                          "true/false), got '%s'",
                          value);
  return 0;
}

static const char *const kFusionModes[] = {"cost", "rules", NULL};

static int set_layout(void *opts, const char *value) {
  FzOptPassFlags *f = opts;
  FzGraphLayout l;
  if (toolParseLayout("fuse-opt", value, &l))
    return TOOL_EXIT_USAGE;
  f->layout = fzGraphLayoutGetName(l);
  return 0;
}

/* The pass options, in --help order (common_options.h's table over
 * FzOptPassFlags). --verify-each=false is --no-verify-each. */
static const ToolOption kFlags[] = {
    TOOL_CALL("pass-pipeline", NULL, "PIPELINE", set_pipeline,
              "Run a textual pipeline, e.g. 'builtin.module(func.func(cse))'"),
    TOOL_FLAG("list-passes", NULL, F(listPasses),
              "List the registered passes, their options, and named "
              "pipelines"),
    TOOL_FLAG("dump-pass-pipeline", NULL, F(dumpPipeline),
              "Print the pipeline that will run (all options spelled out) to "
              "stderr"),
    TOOL_FLAG("no-verify-each", NULL, F(noVerifyEach),
              "Do not verify the IR after each pass"),
    TOOL_CALL("verify-each", NULL, NULL, set_verify_each,
              "Verify the IR after each pass (default; =false turns it off)"),
    TOOL_CALL("print-ir-before", "mlir-print-ir-before", "PASS[,PASS...]",
              add_before, "Print the IR before the passes named"),
    TOOL_CALL("print-ir-after", "mlir-print-ir-after", "PASS[,PASS...]",
              add_after, "Print the IR after the passes named"),
    TOOL_FLAG("print-ir-before-all", "mlir-print-ir-before-all", F(beforeAll),
              "Print the IR before every pass"),
    TOOL_FLAG("print-ir-after-all", "mlir-print-ir-after-all", F(afterAll),
              "Print the IR after every pass"),
    TOOL_FLAG("print-ir-after-change", "mlir-print-ir-after-change",
              F(afterChange),
              "Print the IR after a pass only when the pass changed it"),
    TOOL_FLAG("print-ir-after-failure", "mlir-print-ir-after-failure",
              F(afterFailure), "Print the IR after a pass that failed"),
    TOOL_FLAG("print-ir-module-scope", "mlir-print-ir-module-scope",
              F(moduleScope),
              "Print the whole module in IR dumps, not only the pass's op"),
    TOOL_STRING("print-ir-tree-dir", "mlir-print-ir-tree-dir", "DIR",
                F(treeDir),
                "Write IR dumps to numbered files in DIR instead of stderr"),
    TOOL_FLAG("pass-timing", "mlir-timing", F(timing),
              "Print a wall-clock time report of the passes to stderr"),
    TOOL_FLAG("pass-statistics", "mlir-pass-statistics", F(statistics),
              "Print the passes' statistics to stderr"),
    TOOL_STRING("reproducer", "mlir-pass-pipeline-crash-reproducer", "FILE",
                F(reproducer),
                "When a pass fails, write the input IR and pipeline to FILE"),
    TOOL_FLAG("run-reproducer", NULL, F(runReproducer),
              "Run the pipeline named on the input's '// fuse-reproducer:' "
              "line"),
    TOOL_FLAG("fusion-remarks", NULL, F(fusionRemarks),
              "Set remarks=true on every fuse pass: a remark per op (its "
              "group, or why not)"),
    TOOL_FLAG("fusion-report", NULL, F(fusionReport),
              "Set report=true on every fuse pass: kernels and bytes "
              "before/after"),
    TOOL_CHOICE("fusion-mode", NULL, "MODE", F(fusionMode), kFusionModes,
                "Set mode= on every fuse pass"),
    TOOL_CALL("layout", NULL, "L", set_layout,
              "Set conv=L on every convert-layout pass (graph-optimize has "
              "one, conv=nchw by default): nchw, nhwc or auto"),
};

static const ToolParser kParser = {
    .tool = "fuse-opt",
    .options = kFlags,
    .numOptions = sizeof kFlags / sizeof kFlags[0],
};

/*===--- Test passes (fuse-opt only, for the lit tests) -------------------===*/

/* Fails with an error at the op it runs on. */
static bool test_failure_run(FzPass *pass, FzOp *op) {
  (void)pass;
  return fzOpEmitError(op, "test-pass-failure: failing as asked");
}

/* Erases the terminator of a function's body: invalid IR that only the
 * verifier after the pass catches. */
static bool test_break_run(FzPass *pass, FzOp *op) {
  (void)pass;
  FzBlock *b = fzOpGetNumRegions(op)
                   ? fzRegionGetFirstBlock(fzOpGetRegion(op, 0))
                   : NULL;
  FzOp *last = b ? fzBlockGetLastOp(b) : NULL;
  if (last)
    fzOpErase(last);
  return true;
}

static const FzPassDef kTestFailure = {
    .argument = "test-pass-failure",
    .summary = "Testing: fail with an error at each function",
    .anchor = "func.func",
    .run = test_failure_run};
static const FzPassDef kTestBreak = {
    .argument = "test-break-verifier",
    .summary = "Testing: erase each function's terminator (invalid IR)",
    .anchor = "func.func",
    .run = test_break_run};

/* The built-in passes plus fuse-opt's test passes. */
static bool register_passes(FzContext *ctx) {
  return fzRegisterAllPasses(ctx) && fzContextRegisterPass(ctx, &kTestFailure) &&
         fzContextRegisterPass(ctx, &kTestBreak);
}

/* A context with every dialect and pass registered (NULL on failure). */
static FzContext *scratch_context(void) {
  FzContext *ctx = fzContextCreate();
  if (ctx && (!fzRegisterAllDialects(ctx) || !register_passes(ctx))) {
    fzContextDestroy(ctx);
    return NULL;
  }
  return ctx;
}

static bool is_pass_or_pipeline(const char *name, size_t len) {
  FzContext *ctx = scratch_context();
  if (!ctx)
    return false;
  FzStringRef n = {name, len};
  bool found = fzContextLookupPass(ctx, n) ||
               fzContextLookupPassPipeline(ctx, n, NULL).data;
  fzContextDestroy(ctx);
  return found;
}

int fzOptPassFlagsParse(FzOptPassFlags *f, int argc, char **argv, int i) {
  const char *arg = argv[i];
  if (arg[0] != '-' || arg[1] == '\0' || !strcmp(arg, "--"))
    return 0;
  int used = toolParseOption(&kParser, f, argc, argv, i);
  if (used != 0) {
    f->any = used > 0;
    return used;
  }
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  const char *eq = strchr(body, '=');
  size_t nameLen = eq ? (size_t)(eq - body) : strlen(body);
  if (!is_pass_or_pipeline(body, nameLen))
    return 0;
  if (f->numShorthand == FZ_OPT_MAX_PASS_FLAGS) {
    toolUsageError("fuse-opt", "too many pass flags (at '%s')", arg);
    return -1;
  }
  f->shorthand[f->numShorthand++] = body;
  f->any = true;
  return 1;
}

typedef struct NameSink {
  void (*add)(void *ctx, const char *name);
  void *ctx;
} NameSink;

static void pass_name(const FzPassDef *def, void *ud) {
  NameSink *s = ud;
  s->add(s->ctx, def->argument);
}

static void pipeline_name(const char *name, const char *summary,
                          const char *pipeline, void *ud) {
  (void)summary;
  (void)pipeline;
  NameSink *s = ud;
  s->add(s->ctx, name);
}

/* add(ctx, name) for each pass option, registered pass and pipeline. */
void fzOptPassFlagsNames(void (*add)(void *ctx, const char *name),
                         void *ctx) {
  for (size_t k = 0; k < kParser.numOptions; ++k) {
    add(ctx, kFlags[k].name);
    add(ctx, kFlags[k].alias);
  }
  FzContext *c = scratch_context();
  if (!c)
    return;
  NameSink sink = {add, ctx};
  fzContextForEachPass(c, pass_name, &sink);
  fzContextForEachPassPipeline(c, pipeline_name, &sink);
  fzContextDestroy(c);
}

void fzOptPassFlagsPrintHelp(FILE *out) {
  fprintf(out, "\nPASS OPTIONS:\n");
  toolPrintOptions(&kParser, out);
  fprintf(out, "  %-32s %s\n", "--PASS[=OPTIONS]",
          "Run a registered pass or named pipeline (see --list-passes)");
}

/*===--- --list-passes ----------------------------------------------------===*/

static const char *kind_name(FzPassOptionKind k) {
  switch (k) {
  case FZ_PASS_OPTION_BOOL:
    return "<bool>";
  case FZ_PASS_OPTION_INT:
    return "<int>";
  case FZ_PASS_OPTION_FLOAT:
    return "<number>";
  case FZ_PASS_OPTION_STRING:
    return "<string>";
  }
  return "";
}

static void list_pass(const FzPassDef *def, void *ud) {
  FILE *out = ud;
  fprintf(out, "  %s (runs on %s)\n    %s\n", def->argument,
          def->anchor ? def->anchor : "any op",
          def->summary ? def->summary : "");
  for (size_t i = 0; i < def->numOptions; ++i) {
    const FzPassOptionDef *o = &def->options[i];
    char spelling[96];
    snprintf(spelling, sizeof spelling, "%s=%s", o->name, kind_name(o->kind));
    fprintf(out, "      %-28s %s (default: %s)\n", spelling,
            o->description ? o->description : "",
            o->defaultValue ? o->defaultValue : "");
  }
}

static void list_pipeline(const char *name, const char *summary,
                          const char *pipeline, void *ud) {
  FILE *out = ud;
  fprintf(out, "  %s\n    %s\n    = %s\n", name, summary, pipeline);
}

/*===--- Pipelines --------------------------------------------------------===*/

typedef struct Text {
  char *data;
  size_t len, cap;
} Text;

static bool text_add(Text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d)
      return false;
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = 0;
  return true;
}

static bool text_puts(Text *t, const char *s) {
  return text_add(t, s, strlen(s));
}

/* The pipeline text the flags ask for (malloc'ed; NULL on OOM). */
static char *pipeline_text(const FzOptPassFlags *f, FzContext *ctx) {
  Text t = {NULL, 0, 0};
  bool ok = text_puts(&t, "");
  if (f->runReproducer)
    ok = text_puts(&t, f->reproPipeline);
  else if (f->pipeline)
    ok = text_puts(&t, f->pipeline);
  const char *open = NULL; /* anchor of the open nested group */
  for (size_t i = 0; ok && i < f->numShorthand; ++i) {
    const char *s = f->shorthand[i];
    const char *eq = strchr(s, '=');
    size_t nameLen = eq ? (size_t)(eq - s) : strlen(s);
    const FzPassDef *def =
        fzContextLookupPass(ctx, (FzStringRef){s, nameLen});
    const char *anchor = def ? def->anchor : NULL;
    if (anchor && (!strcmp(anchor, "any") ||
                   !strcmp(anchor, "builtin.module")))
      anchor = NULL;
    bool sameGroup = open && anchor && !strcmp(open, anchor);
    if (open && !sameGroup) {
      ok = ok && text_puts(&t, ")");
      open = NULL;
    }
    if (t.len)
      ok = ok && text_puts(&t, ",");
    if (anchor && !sameGroup) {
      ok = ok && text_puts(&t, anchor) && text_puts(&t, "(");
      open = anchor;
    }
    ok = ok && text_add(&t, s, nameLen);
    if (eq)
      ok = ok && text_puts(&t, "{") && text_puts(&t, eq + 1) &&
           text_puts(&t, "}");
  }
  if (open)
    ok = ok && text_puts(&t, ")");
  if (!ok) {
    free(t.data);
    return NULL;
  }
  return t.data;
}

/* Applies --fusion-remarks/--fusion-report/--fusion-mode to one pass
 * when it is `fuse`; counts the instances. */
typedef struct FusionFlagsApply {
  const FzOptPassFlags *flags;
  size_t applied;
} FusionFlagsApply;

static bool apply_fusion_flags(FzPass *pass, void *ud) {
  FusionFlagsApply *a = ud;
  const FzPassDef *def = fzPassGetDef(pass);
  if (strcmp(def->argument, "fuse") != 0)
    return true;
  a->applied++;
  const FzOptPassFlags *f = a->flags;
  if (f->fusionRemarks &&
      !fzPassSetOption(pass, FZ_STR("remarks"), FZ_STR("true")))
    return false;
  if (f->fusionReport &&
      !fzPassSetOption(pass, FZ_STR("report"), FZ_STR("true")))
    return false;
  if (f->fusionMode &&
      !fzPassSetOption(pass, FZ_STR("mode"),
                       fzStringRefFromCString(f->fusionMode)))
    return false;
  return true;
}

/* Applies --layout to one pass when it is convert-layout; counts the
 * instances. */
typedef struct LayoutApply {
  const char *layout;
  size_t applied;
} LayoutApply;

static bool apply_layout(FzPass *pass, void *ud) {
  LayoutApply *a = ud;
  if (strcmp(fzPassGetDef(pass)->argument, "convert-layout") != 0)
    return true;
  a->applied++;
  return fzPassSetOption(pass, FZ_STR("conv"),
                         fzStringRefFromCString(a->layout));
}

/* Builds the manager for ctx from the flags; NULL after errors. */
static FzPassManager *build_pm(const FzOptPassFlags *f, FzContext *ctx) {
  if (!register_passes(ctx))
    return NULL;
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  char *text = pm ? pipeline_text(f, ctx) : NULL;
  bool ok = text &&
            fzPassManagerParsePipeline(pm, fzStringRefFromCString(text));
  free(text);
  if (ok && (f->fusionRemarks || f->fusionReport || f->fusionMode)) {
    FusionFlagsApply a = {f, 0};
    ok = fzPassManagerForEachPass(pm, apply_fusion_flags, &a);
    if (ok && a.applied == 0) {
      fprintf(stderr, "fuse-opt: error: --fusion-remarks/--fusion-report/"
                      "--fusion-mode need a 'fuse' pass in the pipeline "
                      "(e.g. --fuse or --graph-optimize)\n");
      ok = false;
    }
  }
  if (ok && f->layout) {
    LayoutApply a = {f->layout, 0};
    ok = fzPassManagerForEachPass(pm, apply_layout, &a);
    if (ok && a.applied == 0) {
      fprintf(stderr, "fuse-opt: error: --layout needs a 'convert-layout' "
                      "pass in the pipeline (e.g. --graph-optimize)\n");
      ok = false;
    }
  }
  if (!ok) {
    fzPassManagerDestroy(pm);
    return NULL;
  }
  return pm;
}

/* Splits the comma-separated names of list into a NULL-terminated
 * malloc'ed array of malloc'ed strings. */
static char **split_names(const char *const *list, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i)
    for (const char *p = list[i]; p; p = strchr(p, ','), p = p ? p + 1 : p)
      ++count;
  char **out = calloc(count + 1, sizeof *out);
  size_t k = 0;
  for (size_t i = 0; out && i < n; ++i) {
    const char *p = list[i];
    while (p) {
      const char *c = strchr(p, ',');
      size_t len = c ? (size_t)(c - p) : strlen(p);
      out[k] = malloc(len + 1);
      if (out[k]) {
        memcpy(out[k], p, len);
        out[k++][len] = 0;
      }
      p = c ? c + 1 : NULL;
    }
  }
  return out;
}

static void free_names(char **names) {
  for (size_t i = 0; names && names[i]; ++i)
    free(names[i]);
  free(names);
}

static void write_stderr(FzStringRef chunk, void *ud) {
  (void)ud;
  fwrite(chunk.data, 1, chunk.length, stderr);
}

int fzOptPassFlagsPrepare(FzOptPassFlags *f, const char *input, FILE *out) {
  if (f->listPasses) {
    FzContext *ctx = scratch_context();
    if (!ctx)
      return 1;
    fprintf(out, "Passes (use as --NAME[=OPTIONS] or inside "
                 "--pass-pipeline):\n");
    fzContextForEachPass(ctx, list_pass, out);
    fprintf(out, "\nNamed pipelines:\n");
    fzContextForEachPassPipeline(ctx, list_pipeline, out);
    fzContextDestroy(ctx);
    return 0;
  }
  if (!f->any)
    return -1;
  if (f->pipeline && f->numShorthand) {
    fprintf(stderr, "fuse-opt: error: --pass-pipeline cannot be combined "
                    "with per-pass flags such as --%s\n",
            f->shorthand[0]);
    return 2;
  }
  if (f->runReproducer) {
    if (f->pipeline || f->numShorthand) {
      fprintf(stderr, "fuse-opt: error: --run-reproducer takes its "
                      "pipeline from the input; give no other\n");
      return 2;
    }
    FILE *in = strcmp(input, "-") ? fopen(input, "rb") : NULL;
    if (!in) {
      fprintf(stderr, "fuse-opt: error: --run-reproducer needs a readable "
                      "input file (not stdin): '%s'\n",
              input);
      return 1;
    }
    char *line = f->reproPipeline;
    size_t cap = sizeof f->reproPipeline;
    bool got = fgets(line, (int)cap, in) != NULL;
    fclose(in);
    FzStringRef pipeline;
    if (!got || !fzReproducerGetPipeline(fzStringRefFromCString(line),
                                         &pipeline)) {
      fprintf(stderr, "fuse-opt: error: '%s' does not start with a "
                      "'// fuse-reproducer: --pass-pipeline=...' line\n",
              input);
      return 1;
    }
    memmove(line, pipeline.data, pipeline.length);
    line[pipeline.length] = 0;
  }
  /* Check the pipeline and the pass names once, not once per chunk. */
  FzContext *ctx = scratch_context();
  if (!ctx)
    return 1;
  fzContextSetAllowUnregisteredDialects(ctx, f->allowUnregistered);
  FzPassManager *pm = build_pm(f, ctx);
  int status = pm ? -1 : 1;
  fzPassManagerDestroy(pm);
  for (size_t w = 0; w < 2 && status < 0; ++w) {
    char **names = split_names(w ? f->after : f->before,
                               w ? f->numAfter : f->numBefore);
    for (size_t i = 0; names && names[i] && status < 0; ++i)
      if (!fzContextLookupPass(ctx, fzStringRefFromCString(names[i]))) {
        fprintf(stderr, "fuse-opt: error: unknown pass '%s' in "
                        "--print-ir-%s\n",
                names[i], w ? "after" : "before");
        status = 1;
      }
    free_names(names);
  }
  fzContextDestroy(ctx);
  return status;
}

bool fzOptRunPasses(const FzOptPassFlags *f, FzOp *module,
                    unsigned printFlags) {
  if (!f->any)
    return true;
  FzContext *ctx = fzOpGetContext(module);
  FzPassManager *pm = build_pm(f, ctx);
  if (!pm)
    return false;
  fzPassManagerEnableVerifier(pm, !f->noVerifyEach);
  char **before = split_names(f->before, f->numBefore);
  char **after = split_names(f->after, f->numAfter);
  bool ok = before && after;
  if (ok && (f->numBefore || f->numAfter || f->beforeAll || f->afterAll ||
             f->afterChange || f->afterFailure || f->treeDir)) {
    FzIRPrintingConfig c;
    memset(&c, 0, sizeof c);
    c.beforePasses = f->numBefore ? (const char *const *)before : NULL;
    c.afterPasses = f->numAfter ? (const char *const *)after : NULL;
    c.beforeAll = f->beforeAll;
    c.afterAll = f->afterAll;
    c.afterChange = f->afterChange;
    c.afterFailure = f->afterFailure;
    c.moduleScope = f->moduleScope;
    c.treeDir = f->treeDir;
    c.printFlags = printFlags;
    ok = fzPassManagerEnableIRPrinting(pm, &c);
  }
  if (ok && f->reproducer)
    ok = fzPassManagerEnableReproducer(pm, f->reproducer);
  fzPassManagerEnableTiming(pm, f->timing);
  if (ok && f->dumpPipeline) {
    fzPassManagerPrintPipeline(pm, write_stderr, NULL);
    fputc('\n', stderr);
  }
  if (ok)
    ok = fzPassManagerRun(pm, module);
  if (f->timing)
    fzPassManagerPrintTiming(pm, write_stderr, NULL);
  if (f->statistics)
    fzPassManagerPrintStatistics(pm, write_stderr, NULL);
  free_names(before);
  free_names(after);
  fzPassManagerDestroy(pm);
  return ok;
}
