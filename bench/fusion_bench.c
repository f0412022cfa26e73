/* bench/fusion_bench.c - how long the fusion pass takes on random DAGs.
 *
 *   fusion_bench [--ops N[,N...]] [--seed S] [--mode cost|rules]
 *                [--window W] [--far P] [--budget G] [--repeat R]
 *                [FILE.fuse]
 *
 * Builds a random function of N graph ops through the C API (no parsing
 * in the measurement), in the style of bench/fusion_gen.py: elementwise
 * chains, broadcasts of row vectors, row reductions, softmax and
 * layer_norm composites, matmuls; each op reads mostly from the last W
 * values and with probability P from anywhere before (long skip edges).
 * Then it times fzFuseFunction alone (best of R runs, each on a fresh
 * copy) and prints one line per size:
 *
 *   ops=100000 mode=cost time_ms=412.3 us_per_op=4.12 kernels=100000->31234
 *
 * With FILE.fuse it times the pass on every function of that file.
 * Build with bench/fusion_bench.sh (links the library of a build folder).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fz/dialects.h"
#include "fz/fusion.h"

static uint64_t rng_state;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

static double rndf(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct Gen {
  FzContext *ctx;
  FzBuilder b;
  FzLoc *loc;
  FzType *full, *row, *mat, *scalar;
  FzValue **vals;  /* every value so far */
  bool *isRow;
  size_t n, cap;
  size_t *uses;
  size_t window;
  double far;
} Gen;

static void push(Gen *g, FzValue *v, bool row) {
  if (g->n == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 1024;
    g->vals = realloc(g->vals, g->cap * sizeof *g->vals);
    g->isRow = realloc(g->isRow, g->cap * sizeof *g->isRow);
    g->uses = realloc(g->uses, g->cap * sizeof *g->uses);
    if (!g->vals || !g->isRow || !g->uses) {
      fprintf(stderr, "fusion_bench: out of memory\n");
      exit(1);
    }
  }
  g->vals[g->n] = v;
  g->isRow[g->n] = row;
  g->uses[g->n] = 0;
  g->n++;
}

/* A value of the wanted kind: recent with probability 1 - far. */
static FzValue *pick(Gen *g, bool row) {
  for (int tries = 0; tries < 64; ++tries) {
    size_t i;
    if (rndf() < g->far || g->n <= g->window)
      i = rnd() % g->n;
    else
      i = g->n - 1 - rnd() % g->window;
    if (g->isRow[i] == row) {
      g->uses[i]++;
      return g->vals[i];
    }
  }
  for (size_t i = g->n; i-- > 0;)
    if (g->isRow[i] == row) {
      g->uses[i]++;
      return g->vals[i];
    }
  return NULL;
}

static FzValue *op(Gen *g, const char *name, size_t n, FzValue **ops,
                   FzType *rt, FzAttr *axes) {
  FzOpState st;
  fzOpStateInit(&st, g->ctx, fzStringRefFromCString(name), g->loc);
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddResults(&st, 1, &rt);
  if (axes) {
    fzOpStateAddProp(&st, FZ_STR("axes"), axes);
    fzOpStateAddProp(&st, FZ_STR("keepdims"), fzBoolAttrGet(g->ctx, true));
  }
  FzOp *o = fzBuilderCreate(&g->b, &st);
  if (!o) {
    fprintf(stderr, "fusion_bench: cannot create %s\n", name);
    exit(1);
  }
  return fzOpGetResult(o, 0);
}

static const char *const kUnary[] = {"graph.tanh", "graph.sigmoid",
                                     "graph.relu", "graph.neg", "graph.abs"};
static const char *const kBinary[] = {"graph.add", "graph.mul", "graph.sub",
                                      "graph.max", "graph.min"};
static const char *const kReduce[] = {"graph.reduce_sum", "graph.reduce_max",
                                      "graph.reduce_mean"};

static FzOp *build(FzContext *ctx, size_t numOps, uint64_t seed,
                   size_t window, double far) {
  rng_state = seed * 2654435761u + 88172645463325252ull;
  Gen g;
  memset(&g, 0, sizeof g);
  g.ctx = ctx;
  g.window = window;
  g.far = far;
  g.loc = fzFileLineColLocGet(ctx, FZ_STR("bench"), 1, 1);
  FzType *f32 = fzF32TypeGet(ctx);
  int64_t B = 64, N = 256;
  g.full = fzTensorTypeGet(ctx, 2, (int64_t[]){B, N}, f32, NULL);
  g.row = fzTensorTypeGet(ctx, 2, (int64_t[]){B, 1}, f32, NULL);
  g.mat = fzTensorTypeGet(ctx, 2, (int64_t[]){N, N}, f32, NULL);
  g.scalar = fzTensorTypeGet(ctx, 1, (int64_t[]){1}, f32, NULL);
  FzAttr *axes = fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), 1,
                                     (int64_t[]){1});
  FzType *ins[4] = {g.full, g.full, g.row, g.mat};
  FzBlock *body = fzBlockCreate(ctx, 4, ins, NULL);
  fzBuilderInit(&g.b, ctx);
  fzBuilderSetInsertionPointToEnd(&g.b, body);
  for (size_t i = 0; i < 3; ++i)
    push(&g, fzBlockGetArgument(body, i), i == 2);
  FzValue *w = fzBlockGetArgument(body, 3);
  float one = 1.0f;
  FzOpState cs;
  fzOpStateInit(&cs, ctx, FZ_STR("graph.constant"), g.loc);
  fzOpStateAddProp(&cs, FZ_STR("value"),
                   fzDenseAttrGet(ctx, g.scalar, &one, sizeof one));
  fzOpStateAddResults(&cs, 1, &g.scalar);
  FzValue *c1 = fzOpGetResult(fzBuilderCreate(&g.b, &cs), 0);
  size_t made = 0;
  while (made < numOps) {
    double r = rndf();
    if (r < 0.30) {
      bool row = rndf() >= 0.8;
      FzValue *x = pick(&g, row);
      push(&g, op(&g, kUnary[rnd() % 5], 1, &x, row ? g.row : g.full, NULL),
           row);
      made += 1;
    } else if (r < 0.55) {
      FzValue *xy[2] = {pick(&g, false), pick(&g, rndf() < 0.35)};
      push(&g, op(&g, kBinary[rnd() % 5], 2, xy, g.full, NULL), false);
      made += 1;
    } else if (r < 0.70) {
      FzValue *x = pick(&g, false);
      push(&g, op(&g, kReduce[rnd() % 3], 1, &x, g.row, axes), true);
      made += 1;
    } else if (r < 0.78) {
      FzValue *y = pick(&g, true);
      FzValue *a = op(&g, "graph.abs", 1, &y, g.row, NULL);
      FzValue *s[2] = {a, c1};
      FzValue *d = op(&g, "graph.add", 2, s, g.row, NULL);
      FzValue *q[2] = {pick(&g, false), d};
      push(&g, op(&g, "graph.div", 2, q, g.full, NULL), false);
      made += 3;
    } else if (r < 0.86) {
      FzValue *x = pick(&g, false);
      push(&g, op(&g, rndf() < 0.5 ? "graph.softmax" : "graph.layer_norm", 1,
                  &x, g.full, NULL),
           false);
      made += 1;
    } else {
      FzValue *mw[2] = {pick(&g, false), w};
      FzValue *m = op(&g, "graph.matmul", 2, mw, g.full, NULL);
      push(&g, op(&g, "graph.tanh", 1, &m, g.full, NULL), false);
      made += 2;
    }
  }
  /* Return every value nobody reads. */
  size_t nr = 0;
  FzValue **rets = malloc(g.n * sizeof *rets);
  FzType **rtypes = malloc(g.n * sizeof *rtypes);
  for (size_t i = 3; i < g.n; ++i)
    if (g.uses[i] == 0) {
      rets[nr] = g.vals[i];
      rtypes[nr++] = fzValueGetType(g.vals[i]);
    }
  FzOpState rs;
  fzOpStateInit(&rs, ctx, FZ_STR("func.return"), g.loc);
  fzOpStateAddOperands(&rs, nr, rets);
  if (!fzBuilderCreate(&g.b, &rs))
    exit(1);
  FzOpState fs;
  fzOpStateInit(&fs, ctx, FZ_STR("func.func"), g.loc);
  fzOpStateAddProp(&fs, FZ_STR("sym_name"), fzStringAttrGet(ctx, FZ_STR("main")));
  fzOpStateAddProp(&fs, FZ_STR("function_type"),
                   fzTypeAttrGet(ctx, fzFunctionTypeGet(ctx, 4, ins, nr,
                                                        rtypes)));
  FzRegion *region = fzOpStateAddRegion(&fs);
  fzRegionAppendBlock(region, body);
  FzOp *func = fzOpCreate(&fs);
  free(rets);
  free(rtypes);
  free(g.vals);
  free(g.isRow);
  free(g.uses);
  return func;
}

static void usage(void) {
  fprintf(stderr, "usage: fusion_bench [--ops N[,N...]] [--seed S] "
                  "[--mode cost|rules] [--window W] [--far P] [--budget G] "
                  "[--repeat R] "
                  "[FILE.fuse]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *sizes = "10000,100000,1000000", *file = NULL;
  uint64_t seed = 1;
  size_t window = 8, repeat = 1, budget = 0;
  double far = 0.1;
  FzFusionMode mode = FZ_FUSION_MODE_COST;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--ops") && i + 1 < argc)
      sizes = argv[++i];
    else if (!strcmp(a, "--seed") && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--window") && i + 1 < argc)
      window = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--far") && i + 1 < argc)
      far = atof(argv[++i]);
    else if (!strcmp(a, "--budget") && i + 1 < argc)
      budget = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--repeat") && i + 1 < argc)
      repeat = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--mode") && i + 1 < argc)
      mode = !strcmp(argv[++i], "rules") ? FZ_FUSION_MODE_RULES
                                         : FZ_FUSION_MODE_COST;
    else if (a[0] != '-' && !file)
      file = a;
    else
      usage();
  }
  FzFusionOptions opts;
  fzFusionOptionsInit(&opts);
  opts.mode = mode;
  opts.searchBudget = budget;
  const char *modeName = mode == FZ_FUSION_MODE_COST ? "cost" : "rules";
  if (file) {
    FzContext *ctx = fzContextCreate();
    if (!fzRegisterAllDialects(ctx))
      return 1;
    FzOp *module = fzParseFile(ctx, file);
    if (!module)
      return 1;
    FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
    for (FzOp *f = fzBlockGetFirstOp(top); f; f = fzOpGetNextInBlock(f)) {
      FzFusionStats s;
      double t0 = now();
      if (!fzFuseFunction(f, &opts, &s))
        return 1;
      double t = now() - t0;
      printf("%s ops=%zu mode=%s time_ms=%.1f kernels=%zu->%zu\n", file,
             s.ops, modeName, t * 1e3, s.kernelsBefore, s.kernelsAfter);
    }
    fzOpDestroy(module);
    fzContextDestroy(ctx);
    return 0;
  }
  for (const char *p = sizes; *p;) {
    size_t n = strtoull(p, NULL, 10);
    double best = 1e30;
    FzFusionStats s;
    memset(&s, 0, sizeof s);
    for (size_t r = 0; r < repeat; ++r) {
      FzContext *ctx = fzContextCreate();
      if (!fzRegisterAllDialects(ctx))
        return 1;
      FzOp *func = build(ctx, n, seed, window, far);
      if (!func || !fzOpVerify(func))
        return 1;
      double t0 = now();
      if (!fzFuseFunction(func, &opts, &s))
        return 1;
      double t = now() - t0;
      best = t < best ? t : best;
      if (r == 0 && n <= 20000 && !fzOpVerify(func))
        return 1;
      fzOpDestroy(func);
      fzContextDestroy(ctx);
    }
    printf("ops=%zu mode=%s time_ms=%.1f us_per_op=%.2f kernels=%zu->%zu "
           "groups=%zu duplicated=%zu\n", s.ops, modeName, best * 1e3,
           best * 1e6 / (double)(s.ops ? s.ops : 1), s.kernelsBefore,
           s.kernelsAfter, s.groups, s.duplicated);
    fflush(stdout);
    p = strchr(p, ',');
    if (!p)
      break;
    p++;
  }
  return 0;
}
