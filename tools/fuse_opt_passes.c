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
#include <stdlib.h>
#include <string.h>

#include "fz/dialects.h"
#include "tools/fuse_opt_passes.h"

enum { KIND_FLAG, KIND_VALUE, KIND_LIST };

typedef struct PassFlag {
  const char *name;
  const char *alias; /* mlir-opt's spelling, or NULL */
  int kind;
  const char *help;
} PassFlag;

static const PassFlag kFlags[] = {
    {"pass-pipeline", NULL, KIND_VALUE,
     "Run a textual pipeline, e.g. 'builtin.module(func.func(cse))'"},
    {"list-passes", NULL, KIND_FLAG,
     "List the registered passes, their options, and named pipelines"},
    {"dump-pass-pipeline", NULL, KIND_FLAG,
     "Print the pipeline that will run (all options spelled out) to stderr"},
    {"no-verify-each", NULL, KIND_FLAG,
     "Do not verify the IR after each pass"},
    {"verify-each", NULL, KIND_FLAG,
     "Verify the IR after each pass (default; =false turns it off)"},
    {"print-ir-before", "mlir-print-ir-before", KIND_LIST,
     "Print the IR before the passes named (comma-separated)"},
    {"print-ir-after", "mlir-print-ir-after", KIND_LIST,
     "Print the IR after the passes named (comma-separated)"},
    {"print-ir-before-all", "mlir-print-ir-before-all", KIND_FLAG,
     "Print the IR before every pass"},
    {"print-ir-after-all", "mlir-print-ir-after-all", KIND_FLAG,
     "Print the IR after every pass"},
    {"print-ir-after-change", "mlir-print-ir-after-change", KIND_FLAG,
     "Print the IR after a pass only when the pass changed it"},
    {"print-ir-after-failure", "mlir-print-ir-after-failure", KIND_FLAG,
     "Print the IR after a pass that failed"},
    {"print-ir-module-scope", "mlir-print-ir-module-scope", KIND_FLAG,
     "Print the whole module in IR dumps, not only the pass's op"},
    {"print-ir-tree-dir", "mlir-print-ir-tree-dir", KIND_VALUE,
     "Write IR dumps to numbered files in DIR instead of stderr"},
    {"pass-timing", "mlir-timing", KIND_FLAG,
     "Print a wall-clock time report of the passes to stderr"},
    {"pass-statistics", "mlir-pass-statistics", KIND_FLAG,
     "Print the passes' statistics to stderr"},
    {"reproducer", "mlir-pass-pipeline-crash-reproducer", KIND_VALUE,
     "When a pass fails, write the input IR and pipeline to FILE"},
    {"run-reproducer", NULL, KIND_FLAG,
     "Run the pipeline named on the input's '// fuse-reproducer:' line"},
    {"fusion-remarks", NULL, KIND_FLAG,
     "Set remarks=true on every fuse pass: a remark per op (its group, or "
     "why not)"},
    {"fusion-report", NULL, KIND_FLAG,
     "Set report=true on every fuse pass: kernels and bytes before/after"},
    {"fusion-mode", NULL, KIND_VALUE,
     "Set mode=cost|rules on every fuse pass"},
};

#define NUM_FLAGS (sizeof kFlags / sizeof kFlags[0])

static int usage(const char *fmt, const char *arg) {
  fputs("fuse-opt: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return -1;
}

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

static bool parse_bool(const char *value, bool *out) {
  if (!value || !strcmp(value, "true") || !strcmp(value, "1"))
    return (*out = true);
  if (!strcmp(value, "false") || !strcmp(value, "0")) {
    *out = false;
    return true;
  }
  return false;
}

static bool *flag_field(FzOptPassFlags *f, const char *name) {
  static const struct {
    const char *name;
    size_t offset;
  } fields[] = {
      {"list-passes", offsetof(FzOptPassFlags, listPasses)},
      {"dump-pass-pipeline", offsetof(FzOptPassFlags, dumpPipeline)},
      {"no-verify-each", offsetof(FzOptPassFlags, noVerifyEach)},
      {"print-ir-before-all", offsetof(FzOptPassFlags, beforeAll)},
      {"print-ir-after-all", offsetof(FzOptPassFlags, afterAll)},
      {"print-ir-after-change", offsetof(FzOptPassFlags, afterChange)},
      {"print-ir-after-failure", offsetof(FzOptPassFlags, afterFailure)},
      {"print-ir-module-scope", offsetof(FzOptPassFlags, moduleScope)},
      {"pass-timing", offsetof(FzOptPassFlags, timing)},
      {"pass-statistics", offsetof(FzOptPassFlags, statistics)},
      {"run-reproducer", offsetof(FzOptPassFlags, runReproducer)},
      {"fusion-remarks", offsetof(FzOptPassFlags, fusionRemarks)},
      {"fusion-report", offsetof(FzOptPassFlags, fusionReport)},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i)
    if (!strcmp(fields[i].name, name))
      return (bool *)(void *)((char *)f + fields[i].offset);
  return NULL;
}

int fzOptPassFlagsParse(FzOptPassFlags *f, int argc, char **argv, int i) {
  const char *arg = argv[i];
  if (arg[0] != '-' || arg[1] == '\0' || !strcmp(arg, "--"))
    return 0;
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  const char *eq = strchr(body, '=');
  size_t nameLen = eq ? (size_t)(eq - body) : strlen(body);
  const char *value = eq ? eq + 1 : NULL;
  const PassFlag *flag = NULL;
  for (size_t k = 0; k < NUM_FLAGS && !flag; ++k) {
    const PassFlag *p = &kFlags[k];
    if ((strlen(p->name) == nameLen && !strncmp(p->name, body, nameLen)) ||
        (p->alias && strlen(p->alias) == nameLen &&
         !strncmp(p->alias, body, nameLen)))
      flag = p;
  }
  if (!flag) {
    if (!is_pass_or_pipeline(body, nameLen))
      return 0;
    if (f->numShorthand == FZ_OPT_MAX_PASS_FLAGS)
      return usage("too many pass flags (at '%s')", arg);
    f->shorthand[f->numShorthand++] = body;
    f->any = true;
    return 1;
  }
  int used = 1;
  if (flag->kind != KIND_FLAG && !value) {
    if (i + 1 >= argc)
      return usage("option '%s' requires a value", arg);
    value = argv[i + 1];
    used = 2;
  }
  f->any = true;
  if (!strcmp(flag->name, "pass-pipeline")) {
    /* As in mlir-opt: one pipeline; a second would silently replace the
     * first. */
    if (f->pipeline)
      return usage("option '--pass-pipeline' may only be given once (to "
                   "run several pipelines, join them with ',')%s", "");
    f->pipeline = value;
  } else if (!strcmp(flag->name, "print-ir-tree-dir")) {
    f->treeDir = value;
  } else if (!strcmp(flag->name, "reproducer")) {
    f->reproducer = value;
  } else if (!strcmp(flag->name, "fusion-mode")) {
    f->fusionMode = value;
  } else if (flag->kind == KIND_LIST) {
    bool before = !strcmp(flag->name, "print-ir-before");
    size_t *n = before ? &f->numBefore : &f->numAfter;
    if (*n == FZ_OPT_MAX_PRINT_LISTS)
      return usage("too many '%s' options", flag->name);
    (before ? f->before : f->after)[(*n)++] = value;
  } else if (!strcmp(flag->name, "verify-each")) {
    bool on;
    if (!parse_bool(value, &on))
      return usage("option '%s' takes no value (or true/false)", arg);
    f->noVerifyEach = !on;
  } else {
    bool on;
    if (!parse_bool(value, &on))
      return usage("option '%s' takes no value (or true/false)", arg);
    *flag_field(f, flag->name) = on;
  }
  return used;
}

void fzOptPassFlagsPrintHelp(FILE *out) {
  fprintf(out, "\nPASS OPTIONS:\n");
  for (size_t k = 0; k < NUM_FLAGS; ++k) {
    char spelling[96];
    snprintf(spelling, sizeof spelling, "--%s%s", kFlags[k].name,
             kFlags[k].kind == KIND_VALUE  ? "=VALUE"
             : kFlags[k].kind == KIND_LIST ? "=PASS[,PASS...]"
                                           : "");
    fprintf(out, "  %-32s %s\n", spelling, kFlags[k].help);
    if (kFlags[k].alias)
      fprintf(out, "  --%-30s Alias for --%s\n", kFlags[k].alias,
              kFlags[k].name);
  }
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
