/* importers/onnx/ops_text.c - TfIdfVectorizer over integer tokens.
 *
 * TfIdfVectorizer(X) counts, in each row of X ([C] or [N, C], INT32 or
 * INT64), the n-grams of its pool: pool_int64s holds them one after the
 * other, the n-grams of size n from ngram_counts[n-1] to the next entry
 * (or the pool's end), and ngram_indexes[k] is the output column of the
 * pool's k-th n-gram. As ONNX's reference and ONNX Runtime count, an
 * n-gram of size n in [min_gram_length, max_gram_length] matches at
 * position i with skip s when X[i + j (s + 1)] is its token j for every j;
 * n-grams of two tokens or more are counted for every s in 0 ..
 * max_skip_count, unigrams once (their tokens are adjacent for any s).
 * The mode turns the counts f into the output: TF f, IDF weight where
 * f > 0 (else 0), TFIDF f * weight (weights default to 1).
 *
 * Lowered at import into graph ops: for each n-gram size n and skip s,
 * the n shifted slices of X compared against the pool's tokens j
 * ([N, L, 1] against [1, 1, K]), ANDed, counted by a reduce_sum over the
 * L positions; the columns gathered into place (a zero column for the
 * outputs no n-gram maps to). Counts are sums of ones in f32, exact
 * below 2^24. pool_strings (string tokens) is an error, as strings are.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* The most input slices one node emits (the sum over the n-gram sizes
 * of n times the skips that fit). */
#define TFIDF_MAX_SLICES 65536

/* The pool's n-grams of one size: K of them, tokens[k * n + j]. */
typedef struct Grams {
  int64_t n, k;
  const int64_t *tokens;
} Grams;

/* Counts of g in x ([N, C]) for skip distance d = s + 1: [N, K] f32, or
 * NULL when no n-gram fits (L < 1: then the caller adds nothing). */
static FzValue *count_grams(FzOnnxImporter *im, FzValue *x, const Grams *g,
                            int64_t d, bool *fits) {
  int64_t N = fzOnnxDim(x, 0), C = fzOnnxDim(x, 1);
  int64_t span = (g->n - 1) * d, L = C - span;
  *fits = L >= 1;
  if (!*fits)
    return NULL;
  FzType *xe = fzOnnxElt(x);
  FzValue *match = NULL;
  int64_t *col = fzOnnxAlloc(im, (size_t)g->k * sizeof *col);
  if (!col)
    return NULL;
  for (int64_t j = 0; j < g->n; ++j) {
    int64_t starts[2] = {0, j * d}, limits[2] = {N, j * d + L},
            strides[2] = {1, 1}, wshape[3] = {N, L, 1}, pshape[3] = {1, 1,
                                                                    g->k};
    FzValue *w = fzOnnxReshape(im, fzOnnxSlice(im, x, starts, limits,
                                               strides),
                               3, wshape);
    for (int64_t k = 0; k < g->k; ++k)
      col[k] = g->tokens[k * g->n + j];
    FzValue *p = fzOnnxCast(im, fzOnnxConstI64(im, 3, pshape, col), xe);
    FzValue *eq = fzOnnxCompare(im, "eq", w, p);
    match = match ? fzOnnxBinary(im, "graph.and", match, eq) : eq;
  }
  FzValue *f = fzOnnxCast(im, match, fzF32TypeGet(im->ctx));
  int64_t axis = 1;
  return fzOnnxReduce(im, "graph.reduce_sum", f, 1, &axis, false);
}

static bool h_tfidf(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  FzContext *ctx = im->ctx;
  FzType *xe = fzOnnxElt(x);
  if (fzOnnxIsUnsigned(im, x) ||
      (xe != fzIntegerTypeGet(ctx, 32) && xe != fzIntegerTypeGet(ctx, 64)))
    return fzOnnxError(im, "unsupported input dtype: TfIdfVectorizer takes "
                           "INT32 or INT64 tokens");
  size_t rank = fzOnnxRank(x);
  if (rank != 1 && rank != 2)
    return fzOnnxError(im, "the input must have rank 1 or 2, not %zu", rank);
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t minN, maxN, skips;
  const char *mode;
  int64_t *counts, *indexes, *pool;
  double *weights;
  size_t nCounts, nIndexes, nPool, nWeights;
  bool present, hasWeights, hasPool;
  if (!fzOnnxAttrInt(im, "min_gram_length", 0, &minN) ||
      !fzOnnxAttrInt(im, "max_gram_length", 0, &maxN) ||
      !fzOnnxAttrInt(im, "max_skip_count", 0, &skips) ||
      !fzOnnxAttrString(im, "mode", "", &mode) ||
      !fzOnnxAttrInts(im, "ngram_counts", &counts, &nCounts, &present) ||
      !fzOnnxAttrInts(im, "ngram_indexes", &indexes, &nIndexes, &present) ||
      !fzOnnxAttrInts(im, "pool_int64s", &pool, &nPool, &hasPool) ||
      !fzOnnxAttrFloats(im, "weights", &weights, &nWeights, &hasWeights))
    return false;
  if (fzOnnxAttr(im, "pool_strings"))
    return fzOnnxError(im, "unsupported attribute 'pool_strings' (string "
                           "tokens)");
  int m = !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1
                                  : !strcmp(mode, "TFIDF") ? 2 : -1;
  if (m < 0)
    return fzOnnxErrorAttrValue(im, "mode", mode);
  if (minN < 1 || maxN < minN || maxN > FZ_MAX_DIM)
    return fzOnnxError(im, "min_gram_length (%lld) and max_gram_length "
                           "(%lld) must satisfy 1 <= min <= max",
                       (long long)minN, (long long)maxN);
  if (skips < 0 || skips > FZ_MAX_DIM)
    return fzOnnxError(im, "max_skip_count (%lld) is out of range",
                       (long long)skips);
  if (!fzOnnxCheckBuilt(im, 1, (const int64_t[]){(int64_t)nPool}, "pool",
                        NULL))
    return false;
  /* The sizes: ngram_counts[n-1] starts the n-grams, non-decreasing. */
  Grams *grams = fzOnnxAlloc(im, (nCounts ? nCounts : 1) * sizeof *grams);
  if (!grams)
    return false;
  int64_t total = 0;
  for (size_t i = 0; i < nCounts; ++i) {
    int64_t start = counts[i],
            end = i + 1 < nCounts ? counts[i + 1] : (int64_t)nPool;
    int64_t n = (int64_t)i + 1;
    if (start < 0 || end < start || end > (int64_t)nPool ||
        (end - start) % n)
      return fzOnnxError(im, "ngram_counts[%zu] (%lld) does not start a "
                             "run of %lld-grams in the pool of %zu tokens",
                         i, (long long)start, (long long)n, nPool);
    grams[i] = (Grams){n, (end - start) / n, pool ? pool + start : NULL};
    total += grams[i].k;
  }
  if (nCounts && counts[0] != 0)
    return fzOnnxError(im, "ngram_counts[0] must be 0, not %lld",
                       (long long)counts[0]);
  if ((int64_t)nIndexes != total)
    return fzOnnxError(im, "ngram_indexes has %zu entries for the pool's "
                           "%lld n-grams", nIndexes, (long long)total);
  if (hasWeights && (int64_t)nWeights != total)
    return fzOnnxError(im, "weights has %zu entries for the pool's %lld "
                           "n-grams", nWeights, (long long)total);
  if (!total)
    return fzOnnxError(im, "unsupported pool: it holds no n-gram");
  int64_t cols = 0;
  for (size_t k = 0; k < nIndexes; ++k) {
    if (indexes[k] < 0 || indexes[k] >= FZ_ONNX_FOLD_LIMIT)
      return fzOnnxError(im, "ngram_indexes[%zu] (%lld) is out of range",
                         k, (long long)indexes[k]);
    cols = indexes[k] + 1 > cols ? indexes[k] + 1 : cols;
  }
  /* Where each output column comes from: the n-gram mapped to it, or the
   * zero column `total` (the others). Two n-grams in one column have no
   * defined meaning: refused. (An n-gram twice in the pool is counted in
   * both of its columns.) */
  int64_t *from = fzOnnxAlloc(im, (size_t)(cols ? cols : 1) * sizeof *from);
  if (!from)
    return false;
  for (int64_t c = 0; c < cols; ++c)
    from[c] = total;
  for (size_t k = 0; k < nIndexes; ++k) {
    if (from[indexes[k]] != total)
      return fzOnnxError(im, "unsupported ngram_indexes: n-grams %lld and "
                             "%zu both map to output %lld",
                         (long long)from[indexes[k]], k,
                         (long long)indexes[k]);
    from[indexes[k]] = (int64_t)k;
  }

  int64_t N = rank == 2 ? fzOnnxDim(x, 0) : 1, C = fzOnnxDim(x, rank - 1);
  int64_t shape2[2] = {N, C}, work;
  if (!fzOnnxMulI64(N, C, &work) || !fzOnnxMulI64(work, total, &work) ||
      work > FZ_MAX_ELEMENTS)
    return fzOnnxError(im, "unsupported size: %lld rows of %lld tokens "
                           "against %lld n-grams",
                       (long long)N, (long long)C, (long long)total);
  FzValue *x2 = fzOnnxReshape(im, x, 2, shape2);
  FzType *f32 = fzF32TypeGet(ctx);
  FzValue **parts = fzOnnxAlloc(im, (nCounts + 1) * sizeof *parts);
  if (!x2 || !parts)
    return false;
  size_t np = 0;
  int64_t slices = 0;
  for (size_t i = 0; i < nCounts; ++i) {
    const Grams *g = &grams[i];
    if (!g->k)
      continue;
    int64_t kshape[2] = {N, g->k};
    FzValue *sum = NULL;
    if (g->n >= minN && g->n <= maxN) {
      int64_t passes = g->n == 1 ? 1 : skips + 1;
      for (int64_t s = 0; s < passes; ++s) {
        bool fits;
        if (C - (g->n - 1) * (s + 1) < 1)
          break; /* a longer skip fits no better */
        /* Each pass emits n slices and compares: bounded per node. */
        if ((slices += g->n) > TFIDF_MAX_SLICES)
          return fzOnnxError(im, "unsupported TfIdfVectorizer: more than "
                                 "%d slices of the input (n-gram sizes "
                                 "times skips)", TFIDF_MAX_SLICES);
        FzValue *c = count_grams(im, x2, g, s + 1, &fits);
        if (!fits)
          break; /* a longer skip fits no better */
        if (!c)
          return false;
        sum = sum ? fzOnnxBinary(im, "graph.add", sum, c) : c;
      }
    }
    parts[np++] = sum ? sum : fzOnnxConstSplat(im, f32, 2, kshape, 0.0);
  }
  int64_t zshape[2] = {N, 1};
  parts[np++] = fzOnnxConstSplat(im, f32, 2, zshape, 0.0);
  FzValue *f = np == 1 ? parts[0]
                       : fzOnnxEmit(im, "graph.concat", np, parts, NULL,
                                    "axis",
                                    fzIntegerAttrGet(ctx,
                                                     fzIntegerTypeGet(ctx, 64),
                                                     1),
                                    NULL);
  if (m > 0) {
    /* The weights of the n-grams, 1 by default; 0 for the zero column. */
    FzTensor *wt = fzTensorCreate(ctx, f32, 1, (int64_t[]){total + 1});
    if (!wt)
      return fzOnnxError(im, "out of memory");
    for (int64_t k = 0; k <= total; ++k)
      fzTensorSetF64(wt, k, k == total ? 0.0 : hasWeights ? weights[k] : 1.0);
    FzValue *w = fzOnnxConstTensor(im, wt);
    fzTensorDestroy(wt);
    f = m == 1 ? fzOnnxSelect(im,
                              fzOnnxCompare(im, "gt", f,
                                            fzOnnxConstScalar(im, f32, 0.0)),
                              fzOnnxBroadcastTo(im, w, 2,
                                                (int64_t[]){N, total + 1}),
                              fzOnnxConstScalar(im, f32, 0.0))
               : fzOnnxBinary(im, "graph.mul", f, w);
  }
  int64_t ncols = cols;
  FzValue *ops[2] = {f, fzOnnxConstI64(im, 1, &ncols, from)};
  FzValue *y = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                          fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), 1),
                          NULL);
  out[0] = rank == 1 ? fzOnnxReshape(im, y, 1, &ncols) : y;
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxTextOps[] = {
    {"TfIdfVectorizer", h_tfidf, NULL,
     "max_gram_length min_gram_length max_skip_count mode ngram_counts "
     "ngram_indexes pool_int64s pool_strings weights",
     1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
