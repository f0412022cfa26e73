/* transforms/fusion/pass.c - the `fuse` pass and the C entry point
 * fzFuseFunction; the per-context registries of describers and targets.
 *
 * fzFuseFunction runs, on one function: build the node graph (graph.c,
 * canonical.c), decide the groups (fuse.c, analyze.c, merge.c), number
 * them canonically, rebuild the body (materialize.c), then explain
 * (explain.c). The pass is a thin wrapper
 * that turns its textual options into FzFusionOptions once per instance.
 *
 * Registries live in context extensions (no global state): describers
 * by dialect name (strings copied), targets by pointer (caller-owned).
 */
#include <string.h>

#include "dialects/graph/fusion_op.h"
#include "fz/pass.h"
#include "transforms/fusion/fusion_internal.h"

/*===--- Describers -----------------------------------------------------===*/

typedef struct DescEntry {
  char *dialect;
  FzFusionDescribeFn fn;
} DescEntry;

typedef struct DescTable {
  DescEntry *e;
  size_t n, cap;
} DescTable;

static const char kDescKey = 0;

static void destroy_desc(FzContext *ctx, void *v) {
  DescTable *t = v;
  for (size_t i = 0; i < t->n; ++i)
    fzFree(ctx, t->e[i].dialect);
  fzFree(ctx, t->e);
  fzFree(ctx, t);
}

bool fzContextRegisterFusionDescriber(FzContext *ctx, const char *dialect,
                                      FzFusionDescribeFn fn) {
  DescTable *t = fzContextGetExtension(ctx, &kDescKey);
  if (!t) {
    t = fzCalloc(ctx, 1, sizeof *t);
    if (!t)
      return false;
    if (!fzContextSetExtension(ctx, &kDescKey, t, destroy_desc)) {
      fzFree(ctx, t);
      return false;
    }
  }
  for (size_t i = 0; i < t->n; ++i)
    if (strcmp(t->e[i].dialect, dialect) == 0) {
      t->e[i].fn = fn;
      return true;
    }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 4;
    DescEntry *e = fzRealloc(ctx, t->e, cap * sizeof *e);
    if (!e)
      return false;
    t->e = e;
    t->cap = cap;
  }
  size_t len = strlen(dialect);
  char *copy = fzMalloc(ctx, len + 1);
  if (!copy)
    return false;
  memcpy(copy, dialect, len + 1);
  t->e[t->n++] = (DescEntry){copy, fn};
  return true;
}

static FzFusionDescribeFn lookup_describer(const FzContext *ctx,
                                           FzStringRef opName) {
  size_t dot = 0;
  while (dot < opName.length && opName.data[dot] != '.')
    dot++;
  const DescTable *t = fzContextGetExtension(ctx, &kDescKey);
  for (size_t i = 0; t && i < t->n; ++i)
    if (strlen(t->e[i].dialect) == dot &&
        memcmp(t->e[i].dialect, opName.data, dot) == 0)
      return t->e[i].fn;
  if (dot == 5 && memcmp(opName.data, "graph", 5) == 0)
    return fzGraphDescribeFusion;
  return NULL;
}

/* Reduced axes from types alone: a keepdims reduction of operand 0. */
static void infer_axes(FzOp *op, FzFusionOpInfo *info) {
  if (fzOpGetNumOperands(op) < 1 || fzOpGetNumResults(op) != 1)
    return;
  FzType *in = fzValueGetType(fzOpGetOperand(op, 0));
  FzType *out = fzValueGetType(fzOpGetResult(op, 0));
  if (fzTypeGetKind(in) != FZ_TYPE_TENSOR ||
      fzTypeGetKind(out) != FZ_TYPE_TENSOR)
    return;
  size_t r = fzShapedTypeGetRank(in);
  if (r == FZ_UNRANKED || r > 32 || r != fzShapedTypeGetRank(out))
    return;
  uint32_t axes = 0;
  for (size_t i = 0; i < r; ++i) {
    int64_t a = fzShapedTypeGetDim(in, i), b = fzShapedTypeGetDim(out, i);
    if (b == 1 && a != 1)
      axes |= 1u << i;
    else if (a != b)
      return;
  }
  if (axes) {
    info->reduceOperand = 0;
    info->reduceAxes = axes;
  }
}

void fzFusionDescribeOp(FzOp *op, FzFusionOpInfo *info) {
  const FzOpDef *def = fzOpGetDef(op);
  memset(info, 0, sizeof *info);
  info->kind = def ? def->fusionKind : FZ_FUSION_OPAQUE;
  info->reduceOperand = -1;
  info->flopsPerElement = 1;
  if (!def)
    return;
  FzFusionDescribeFn fn =
      lookup_describer(fzOpGetContext(op), fzIdentGetString(fzOpGetName(op)));
  if (fn) {
    FzFusionOpInfo d = *info;
    if (fn(op, &d))
      *info = d;
  } else if (info->kind == FZ_FUSION_REDUCTION) {
    infer_axes(op, info);
  }
}

/*===--- Targets --------------------------------------------------------===*/

typedef struct TargetTable {
  const FzFusionTarget **t;
  size_t n, cap;
} TargetTable;

static const char kTargetKey = 0;

static void destroy_targets(FzContext *ctx, void *v) {
  TargetTable *t = v;
  fzFree(ctx, t->t);
  fzFree(ctx, t);
}

bool fzContextRegisterFusionTarget(FzContext *ctx,
                                   const FzFusionTarget *target) {
  if (!target || !target->name)
    return false;
  TargetTable *t = fzContextGetExtension(ctx, &kTargetKey);
  if (!t) {
    t = fzCalloc(ctx, 1, sizeof *t);
    if (!t)
      return false;
    if (!fzContextSetExtension(ctx, &kTargetKey, t, destroy_targets)) {
      fzFree(ctx, t);
      return false;
    }
  }
  for (size_t i = 0; i < t->n; ++i)
    if (strcmp(t->t[i]->name, target->name) == 0) {
      t->t[i] = target;
      return true;
    }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 4;
    const FzFusionTarget **a = fzRealloc(ctx, t->t, cap * sizeof *a);
    if (!a)
      return false;
    t->t = a;
    t->cap = cap;
  }
  t->t[t->n++] = target;
  return true;
}

const FzFusionTarget *fzFusionTargetLookup(const FzContext *ctx,
                                           FzStringRef name) {
  const TargetTable *t = ctx ? fzContextGetExtension(ctx, &kTargetKey) : NULL;
  for (size_t i = 0; t && i < t->n; ++i)
    if (fzStringRefEqual(fzStringRefFromCString(t->t[i]->name), name))
      return t->t[i];
  if (fzStringRefEqual(name, FZ_STR("cuda")))
    return &fzFusionTargetCUDA;
  if (fzStringRefEqual(name, FZ_STR("cpu")))
    return &fzFusionTargetCPU;
  return NULL;
}

/*===--- fzFuseFunction -------------------------------------------------===*/

void fzFusionOptionsInit(FzFusionOptions *o) {
  memset(o, 0, sizeof *o);
  o->mode = FZ_FUSION_MODE_COST;
  o->maxOps = 64;
  o->maxInputs = 64;
  o->maxOutputs = 16;
  o->allowRecompute = true;
  o->searchBudget = 1024;
}

static void resolve(FFuser *F, const FzFusionOptions *o) {
  F->resolved = *o;
  FzFusionOptions *r = &F->resolved;
  F->target = o->target ? o->target : &fzFusionTargetCUDA;
  F->model = o->costModel ? o->costModel : fzContextGetFusionCostModel(F->ctx);
  if (!r->maxOps)
    r->maxOps = 64;
  if (!r->maxInputs)
    r->maxInputs = 64;
  if (!r->maxOutputs)
    r->maxOutputs = 16;
  if (!r->maxRegisters)
    r->maxRegisters = F->target->maxRegisters;
  if (!r->maxSharedBytes)
    r->maxSharedBytes = F->target->maxSharedBytes;
  if (!r->searchBudget)
    r->searchBudget = 1024;
}

/* Totals of the estimates of every current group (constants excluded). */
static void totals(FFuser *F, double *bytes, double *seconds) {
  *bytes = *seconds = 0;
  for (uint32_t i = 0; i < F->n; ++i) {
    const FNode *n = &F->nodes[i];
    if (n->role == ROLE_FREE || n->role == ROLE_DEAD || ffFind(F, i) != i)
      continue;
    FzFusionEstimate e;
    if (ffGroupEstimate(F, i, &e, NULL)) {
      *bytes += e.bytes;
      *seconds += e.seconds;
    }
  }
}

bool fzFuseFunction(FzOp *func, const FzFusionOptions *options,
                    FzFusionStats *stats) {
  FzContext *ctx = fzOpGetContext(func);
  FzFusionStats local;
  FzFusionOptions defaults;
  if (!options) {
    fzFusionOptionsInit(&defaults);
    options = &defaults;
  }
  if (!stats)
    stats = &local;
  memset(stats, 0, sizeof *stats);
  if (fzOpGetNumRegions(func) != 1)
    return fzOpEmitError(func, "fuse: expects an op with one region (a "
                               "func.func)");
  FzRegion *region = fzOpGetRegion(func, 0);
  size_t nb = fzRegionGetNumBlocks(region);
  if (nb == 0)
    return true;
  if (nb > 1) {
    if (options->remarks)
      fzEmitRemark(ctx, fzOpGetLoc(func), "not fused: the body has %zu "
                   "blocks; fuse groups single-block bodies", nb);
    return true;
  }
  FFuser F;
  memset(&F, 0, sizeof F);
  F.ctx = ctx;
  F.opts = options;
  fzPtrMapInit(&F.opIndex, ctx);
  fzArenaInit(&F.arena, ctx);
  fzPtrVecInit(&F.list, ctx);
  resolve(&F, options);
  bool ok = true;
  if (options->remarks)
    ok = (F.why = fzCalloc(ctx, 1, sizeof *F.why)) != NULL;
  ok = ok && ffBuild(&F, func);
  if (ok) {
    F.duplicatedInto = fzCalloc(ctx, F.n ? F.n : 1, sizeof *F.duplicatedInto);
    ok = F.duplicatedInto != NULL;
  }
  for (uint32_t i = 0; ok && i < F.n; ++i)
    if (F.nodes[i].role != ROLE_FREE)
      stats->ops++;
  stats->kernelsBefore = stats->ops;
  if (ok && options->report)
    totals(&F, &stats->bytesBefore, &stats->secondsBefore);
  ok = ok && ffRun(&F);
  if (ok && options->report)
    totals(&F, &stats->bytesAfter, &stats->secondsAfter);
  uint32_t *ids = ok ? fzMalloc(ctx, (F.n ? F.n : 1) * sizeof *ids) : NULL;
  uint32_t numKernels = 0;
  bool materialized = false;
  if (ok && ids) {
    numKernels = ffNumberGroups(&F, ids);
    materialized = !F.failed && ffMaterialize(&F, stats);
    ok = materialized && !F.failed;
  } else {
    ok = false;
  }
  if (ok && options->remarks)
    ffEmitRemarks(&F, ids);
  if (materialized)
    ffEraseDead(&F); /* unused copies' originals: always safe */
  if (ok) {
    stats->kernelsAfter = numKernels;
    stats->duplicated = F.n - F.numOrdered;
  }
  if (ok && options->report)
    ffReport(&F, ids, numKernels, stats);
  if (!ok && !fzContextHadAllocationFailure(ctx) && fzContextGetNumErrors(ctx) == 0)
    fzOpEmitError(func, "fuse: failed");
  ok = ok && !F.failed;
  fzFree(ctx, ids);
  ffFree(&F);
  return ok;
}

/*===--- The pass -------------------------------------------------------===*/

static const char *const kModes[] = {"cost", "rules", NULL};

static const FzPassOptionDef kOptions[] = {
    {"mode", FZ_PASS_OPTION_STRING, "cost",
     "cost: fuse when legal and the estimate improves; rules: whenever "
     "legal", kModes, 0, 0},
    {"target", FZ_PASS_OPTION_STRING, "cuda",
     "target of the estimates and limits: cuda, cpu, or a registered one",
     NULL, 0, 0},
    {"max-ops", FZ_PASS_OPTION_INT, "64", "most ops in a group", NULL, 1,
     1 << 30},
    {"max-inputs", FZ_PASS_OPTION_INT, "64", "most tensors a group reads",
     NULL, 1, 1 << 30},
    {"max-outputs", FZ_PASS_OPTION_INT, "16", "most tensors a group writes",
     NULL, 1, 1 << 30},
    {"max-registers", FZ_PASS_OPTION_INT, "0",
     "registers per thread a group may need (0: the target's limit)", NULL,
     0, 1 << 30},
    {"max-shared-bytes", FZ_PASS_OPTION_INT, "0",
     "shared memory a group may need (0: the target's limit)", NULL, 0,
     (int64_t)1 << 40},
    {"allow-recompute", FZ_PASS_OPTION_BOOL, "true",
     "cost mode may copy cheap producers into several consumers", NULL, 0,
     0},
    {"disable", FZ_PASS_OPTION_STRING, "",
     "comma-separated: reduction, epilogue, horizontal, multi-output", NULL,
     0, 0},
    {"remarks", FZ_PASS_OPTION_BOOL, "false",
     "a remark at each op: its group, or why it was not fused", NULL, 0, 0},
    {"report", FZ_PASS_OPTION_BOOL, "false",
     "print kernels, bytes and time before and after, per function", NULL, 0,
     0},
    {"wrap-single", FZ_PASS_OPTION_BOOL, "false",
     "put lone ops in graph.fusion too (one region per kernel)", NULL, 0, 0},
    {"search-budget", FZ_PASS_OPTION_INT, "1024",
     "edges a cycle check may examine before it refuses the merge", NULL, 1,
     1 << 30},
};

static const FzPassStatisticDef kStats[] = {
    {"num-groups", "graph.fusion ops created"},
    {"num-fused-ops", "ops moved into groups"},
    {"num-duplicated", "producers copied into consumers"},
    {"kernels-before", "kernels before fusion (one per op)"},
    {"kernels-after", "kernels after fusion"},
};

static bool parse_disable(FzContext *ctx, FzStringRef s, unsigned *bits) {
  static const struct {
    const char *name;
    unsigned bit;
  } kNames[] = {{"reduction", FZ_FUSION_DISABLE_REDUCTION},
                {"epilogue", FZ_FUSION_DISABLE_EPILOGUE},
                {"horizontal", FZ_FUSION_DISABLE_HORIZONTAL},
                {"multi-output", FZ_FUSION_DISABLE_MULTI_OUTPUT}};
  *bits = 0;
  size_t i = 0;
  while (i < s.length) {
    size_t j = i;
    while (j < s.length && s.data[j] != ',')
      j++;
    FzStringRef item = {s.data + i, j - i};
    bool found = item.length == 0;
    for (size_t k = 0; !found && k < sizeof kNames / sizeof kNames[0]; ++k)
      if (fzStringRefEqual(item, fzStringRefFromCString(kNames[k].name))) {
        *bits |= kNames[k].bit;
        found = true;
      }
    if (!found)
      return fzEmitError(ctx, NULL, "fuse: unknown item '%.*s' in "
                                    "disable= (expected reduction, epilogue, "
                                    "horizontal, multi-output)",
                         (int)item.length, item.data);
    i = j + 1;
  }
  return true;
}

static bool pass_initialize(FzPass *pass, FzContext *ctx) {
  FzFusionOptions *o = fzMalloc(ctx, sizeof *o);
  if (!o)
    return false;
  fzFusionOptionsInit(o);
  FzStringRef mode = fzPassGetStringOption(pass, "mode");
  o->mode = fzStringRefEqual(mode, FZ_STR("rules")) ? FZ_FUSION_MODE_RULES
                                                    : FZ_FUSION_MODE_COST;
  FzStringRef target = fzPassGetStringOption(pass, "target");
  o->target = fzFusionTargetLookup(ctx, target);
  o->maxOps = (size_t)fzPassGetIntOption(pass, "max-ops");
  o->maxInputs = (size_t)fzPassGetIntOption(pass, "max-inputs");
  o->maxOutputs = (size_t)fzPassGetIntOption(pass, "max-outputs");
  o->maxRegisters = fzPassGetIntOption(pass, "max-registers");
  o->maxSharedBytes = fzPassGetIntOption(pass, "max-shared-bytes");
  o->allowRecompute = fzPassGetBoolOption(pass, "allow-recompute");
  o->remarks = fzPassGetBoolOption(pass, "remarks");
  o->report = fzPassGetBoolOption(pass, "report");
  o->wrapSingle = fzPassGetBoolOption(pass, "wrap-single");
  o->searchBudget = (size_t)fzPassGetIntOption(pass, "search-budget");
  bool ok = parse_disable(ctx, fzPassGetStringOption(pass, "disable"),
                          &o->disable);
  if (ok && !o->target)
    ok = fzEmitError(ctx, NULL, "fuse: unknown target '%.*s' (expected cuda, "
                                "cpu, or a registered target)",
                     (int)target.length, target.data);
  if (!ok) {
    fzFree(ctx, o);
    return false;
  }
  fzPassSetState(pass, o);
  return true;
}

static bool pass_run(FzPass *pass, FzOp *op) {
  const FzFusionOptions *o = fzPassGetState(pass);
  FzFusionStats s;
  if (!fzFuseFunction(op, o, &s))
    return false;
  fzPassAddStatistic(pass, 0, s.groups);
  fzPassAddStatistic(pass, 1, s.fusedOps);
  fzPassAddStatistic(pass, 2, s.duplicated);
  fzPassAddStatistic(pass, 3, s.kernelsBefore);
  fzPassAddStatistic(pass, 4, s.kernelsAfter);
  return true;
}

static void pass_destroy(FzPass *pass) {
  fzFree(fzPassGetContext(pass), fzPassGetState(pass));
}

static const FzPassDef kFusePass = {
    .argument = "fuse",
    .displayName = "Fuse",
    .summary = "Group graph ops into graph.fusion kernels (docs/fusion.md)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .initialize = pass_initialize,
    .run = pass_run,
    .destroy = pass_destroy,
};

bool fzRegisterFusionPass(FzContext *ctx) {
  return fzContextRegisterPass(ctx, &kFusePass);
}
