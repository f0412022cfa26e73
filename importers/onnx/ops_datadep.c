/* importers/onnx/ops_datadep.c - ONNX ops whose output shape depends on
 * the values of an input: NonZero, Compress, Unique, NonMaxSuppression.
 *
 * fuse compiles static shapes, so the input that decides the output's
 * shape must be known at import, as a shape operand must: an initializer,
 * a Constant, a computation that folds, or a graph input whose value the
 * caller binds (fuse-run and the conformance runner bind such inputs
 * from their data with FzOnnxInputValue.ifNeeded: the inputs are demanded
 * here, exactly as for a reshape's shape). When it is not, the node's
 * error says so: "unsupported data-dependent output shape: ...".
 *
 * With that input known:
 * - Compress is a graph.gather of the data (which stays a run-time
 *   value) at the constant positions where the condition is true;
 * - NonZero is the constant [rank, count] table of the true positions;
 * - Unique groups the elements (or the slices along `axis`) with a stable
 *   sort, and Y is a graph.gather of the input at each group's first
 *   occurrence (which folds); indices, inverse_indices and counts are
 *   constants;
 * - NonMaxSuppression runs the greedy selection at import (ONNX
 *   Runtime's order: per batch and class, boxes by decreasing score, ties
 *   by index; a box is kept when its IoU with every kept box is at most
 *   iou_threshold, in float as ONNX Runtime computes it; scores above
 *   score_threshold), giving the constant [count, 3] table.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzAttr *i64_attr(FzOnnxImporter *im, int64_t v) {
  return fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), v);
}

/* Reports that the output shape depends on input i, which is not known
 * at import; demands the graph inputs it is computed from. */
static bool data_dependent(FzOnnxImporter *im, FzValue *const *in, size_t i,
                           const char *what) {
  if (in[i])
    fzOnnxDemandInputs(im, in[i]);
  return fzOnnxError(im,
                     "unsupported data-dependent output shape: it depends "
                     "on the values of %s (input #%zu '%s'), which are "
                     "non-constant; they must be computable at import time "
                     "(a constant, or a graph input given a value)",
                     what, i, im->node->input[i]);
}

/* The values of constant v as doubles and as integers, bounded by the
 * fold limit; false after data_dependent's error when not a constant. */
typedef struct ConstVals {
  size_t n;
  double *f;  /* every type */
  int64_t *i; /* integer types, else NULL */
} ConstVals;

static bool read_const(FzOnnxImporter *im, FzValue *const *in, size_t i,
                       const char *what, ConstVals *cv) {
  FzValue *v = in[i];
  cv->i = NULL;
  if (!fzOnnxGetConst(v))
    return data_dependent(im, in, i, what);
  if (!fzOnnxRequireStatic(im, v, what) ||
      !fzOnnxCheckBuilt(im, fzOnnxRank(v), fzOnnxShape(v), what, NULL))
    return false;
  if (!fzOnnxGetConstFloats(im, v, &cv->f, &cv->n))
    return fzOnnxError(im, "out of memory reading %s", what);
  if (fzTypeIsInteger(fzOnnxElt(v))) {
    size_t n;
    if (!fzOnnxGetConstInts(im, v, &cv->i, &n))
      return fzOnnxError(im, "out of memory reading %s", what);
  }
  return true;
}

/* The positions where the 1-D condition is true, among the first `limit`
 * (entries beyond it must be false). */
static bool true_positions(FzOnnxImporter *im, const ConstVals *c,
                           int64_t limit, int64_t **pos, int64_t *count) {
  *pos = fzOnnxAlloc(im, (c->n ? c->n : 1) * sizeof **pos);
  if (!*pos)
    return fzOnnxError(im, "out of memory");
  int64_t k = 0;
  for (size_t j = 0; j < c->n; ++j) {
    if (c->f[j] == 0)
      continue;
    if ((int64_t)j >= limit)
      return fzOnnxError(im, "the condition selects entry %zu, beyond the "
                             "%lld entries of the axis",
                         j, (long long)limit);
    (*pos)[k++] = (int64_t)j;
  }
  *count = k;
  return true;
}

/*===--- Compress --------------------------------------------------------===*/

static bool h_compress(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  const Onnx__AttributeProto *axisAttr = fzOnnxAttr(im, "axis");
  int64_t axisIn = 0;
  if (!fzOnnxAttrInt(im, "axis", 0, &axisIn))
    return false;
  if (fzOnnxRank(in[1]) != 1)
    return fzOnnxError(im, "the condition must be 1-D, has rank %zu",
                       fzOnnxRank(in[1]));
  ConstVals c;
  if (!read_const(im, in, 1, "the condition", &c))
    return false;
  size_t axis = 0;
  if (!axisAttr) { /* over the flattened input */
    if (!fzOnnxRequireStatic(im, x, "the input"))
      return false;
    int64_t total = fzShapedTypeGetNumElements(fzValueGetType(x));
    x = fzOnnxReshape(im, x, 1, &total);
  } else if (!fzOnnxNormAxis(im, axisIn, fzOnnxRank(x), &axis)) {
    return false;
  }
  int64_t dim = fzOnnxDim(x, axis);
  if (dim == FZ_DYNAMIC)
    return fzOnnxError(im, "unsupported dynamic dimension %zu of the input",
                       axis);
  int64_t *pos, count;
  if (!true_positions(im, &c, dim, &pos, &count))
    return false;
  FzValue *idx = fzOnnxConstI64(im, 1, &count, pos);
  FzValue *ops[2] = {x, idx};
  out[0] = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                      i64_attr(im, (int64_t)axis), NULL);
  return out[0] != NULL;
}

/*===--- NonZero ---------------------------------------------------------===*/

static bool h_nonzero(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  ConstVals c;
  if (!read_const(im, in, 0, "the input", &c))
    return false;
  size_t r = fzOnnxRank(in[0]);
  const int64_t *shape = fzOnnxShape(in[0]);
  size_t rr = r ? r : 1; /* a scalar counts as 1-D, as numpy's */
  int64_t count = 0;
  for (size_t j = 0; j < c.n; ++j)
    count += c.f[j] != 0;
  int64_t oshape[2] = {(int64_t)rr, count};
  if (!fzOnnxCheckBuilt(im, 2, oshape, "result", NULL))
    return false;
  int64_t *vals = fzOnnxAlloc(im, (size_t)(rr * count + 1) * sizeof *vals);
  if (!vals)
    return fzOnnxError(im, "out of memory");
  int64_t k = 0;
  for (size_t j = 0; j < c.n; ++j) {
    if (c.f[j] == 0)
      continue;
    int64_t rem = (int64_t)j;
    for (size_t d = r; d-- > 0;) {
      vals[(int64_t)d * count + k] = rem % shape[d];
      rem /= shape[d];
    }
    if (!r)
      vals[k] = 0;
    ++k;
  }
  out[0] = fzOnnxConstI64(im, 2, oshape, vals);
  return out[0] != NULL;
}

/*===--- Unique ----------------------------------------------------------===*/

/* The K slices along the axis: slice k holds elements (o, k, i) for o <
 * outer, i < inner. */
typedef struct Slices {
  const ConstVals *v;
  int64_t outer, k, inner;
} Slices;

static int cmp_slices(const Slices *s, int64_t a, int64_t b) {
  for (int64_t o = 0; o < s->outer; ++o)
    for (int64_t i = 0; i < s->inner; ++i) {
      int64_t pa = (o * s->k + a) * s->inner + i;
      int64_t pb = (o * s->k + b) * s->inner + i;
      if (s->v->i) {
        if (s->v->i[pa] != s->v->i[pb])
          return s->v->i[pa] < s->v->i[pb] ? -1 : 1;
      } else if (s->v->f[pa] != s->v->f[pb]) {
        return s->v->f[pa] < s->v->f[pb] ? -1 : 1;
      }
    }
  return 0;
}

/* Stable merge sort of idx[0..n) by the slices (tmp: n entries). */
static void sort_slices(const Slices *s, int64_t *idx, int64_t *tmp,
                        int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n;
      int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t a = lo, b = mid, k = lo;
      while (a < mid && b < hi)
        tmp[k++] = cmp_slices(s, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
      while (a < mid)
        tmp[k++] = idx[a++];
      while (b < hi)
        tmp[k++] = idx[b++];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
  }
}

static bool h_unique(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  FzValue *x = in[0];
  const Onnx__AttributeProto *axisAttr = fzOnnxAttr(im, "axis");
  int64_t axisIn = 0, sorted = 1;
  if (!fzOnnxAttrInt(im, "axis", 0, &axisIn) ||
      !fzOnnxAttrInt(im, "sorted", 1, &sorted))
    return false;
  ConstVals c;
  if (!read_const(im, in, 0, "the input", &c))
    return false;
  size_t axis = 0, r = fzOnnxRank(x);
  if (!axisAttr) {
    int64_t total = (int64_t)c.n;
    x = fzOnnxReshape(im, x, 1, &total);
    r = 1;
  } else if (!fzOnnxNormAxis(im, axisIn, r, &axis)) {
    return false;
  }
  Slices s = {&c, 1, fzOnnxDim(x, axis), 1};
  for (size_t d = 0; d < r; ++d) {
    if (d < axis)
      s.outer *= fzOnnxDim(x, d);
    else if (d > axis)
      s.inner *= fzOnnxDim(x, d);
  }
  int64_t K = s.k;
  size_t bytes = (size_t)(K + 1) * sizeof(int64_t);
  int64_t *idx = fzOnnxAlloc(im, bytes), *tmp = fzOnnxAlloc(im, bytes);
  int64_t *group = fzOnnxAlloc(im, bytes), *first = fzOnnxAlloc(im, bytes);
  int64_t *counts = fzOnnxAlloc(im, bytes), *rank = fzOnnxAlloc(im, bytes);
  int64_t *order = fzOnnxAlloc(im, bytes), *inverse = fzOnnxAlloc(im, bytes);
  if (!idx || !tmp || !group || !first || !counts || !rank || !order ||
      !inverse)
    return fzOnnxError(im, "out of memory");
  for (int64_t k = 0; k < K; ++k)
    idx[k] = k;
  sort_slices(&s, idx, tmp, K);
  /* Groups of equal slices in sorted order; each one's first entry is
   * its first occurrence (the sort is stable). */
  int64_t ng = 0;
  for (int64_t j = 0; j < K; ++j) {
    if (j == 0 || cmp_slices(&s, idx[j - 1], idx[j]) != 0) {
      first[ng] = idx[j];
      counts[ng] = 0;
      ++ng;
    }
    group[idx[j]] = ng - 1;
    ++counts[ng - 1];
  }
  /* order[u]: the group of unique entry u (sorted, or by first
   * occurrence); rank[g]: the position of group g. */
  for (int64_t g = 0; g < ng; ++g)
    order[g] = g;
  if (!sorted) { /* by first occurrence: group g's first entry */
    int64_t u = 0;
    for (int64_t k = 0; k < K; ++k)
      if (first[group[k]] == k)
        order[u++] = group[k];
  }
  for (int64_t u = 0; u < ng; ++u)
    rank[order[u]] = u;
  int64_t *yIdx = tmp, *cnt = idx;
  for (int64_t u = 0; u < ng; ++u) {
    yIdx[u] = first[order[u]];
    cnt[u] = counts[order[u]];
  }
  for (int64_t k = 0; k < K; ++k)
    inverse[k] = rank[group[k]];
  FzValue *positions = fzOnnxConstI64(im, 1, &ng, yIdx);
  FzValue *ops[2] = {x, positions};
  out[0] = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                      i64_attr(im, (int64_t)axis), NULL);
  if (nOut > 1)
    out[1] = positions;
  if (nOut > 2)
    out[2] = fzOnnxConstI64(im, 1, &K, inverse);
  if (nOut > 3)
    out[3] = fzOnnxConstI64(im, 1, &ng, cnt);
  return out[0] != NULL;
}

/*===--- NonMaxSuppression -----------------------------------------------===*/

/* The corners (ymin, xmin, ymax, xmax) of box b. */
static void corners(const double *b, bool center, float *c) {
  if (center) {
    float xc = (float)b[0], yc = (float)b[1], w = (float)b[2],
          h = (float)b[3];
    c[0] = yc - h / 2, c[1] = xc - w / 2;
    c[2] = yc + h / 2, c[3] = xc + w / 2;
  } else {
    c[0] = fminf((float)b[0], (float)b[2]);
    c[1] = fminf((float)b[1], (float)b[3]);
    c[2] = fmaxf((float)b[0], (float)b[2]);
    c[3] = fmaxf((float)b[1], (float)b[3]);
  }
}

/* Whether boxes a and b overlap by more than the threshold (ONNX
 * Runtime's SuppressByIOU). */
static bool suppresses(const float *a, const float *b, float threshold) {
  float ih = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
  float iw = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
  if (ih <= 0 || iw <= 0)
    return false;
  float inter = ih * iw;
  float areaA = (a[2] - a[0]) * (a[3] - a[1]);
  float areaB = (b[2] - b[0]) * (b[3] - b[1]);
  if (areaA <= 0 || areaB <= 0)
    return false;
  float uni = areaA + areaB - inter;
  return uni > 0 && inter / uni > threshold;
}

static bool h_nms(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t center;
  if (!fzOnnxAttrInt(im, "center_point_box", 0, &center))
    return false;
  if (center != 0 && center != 1)
    return fzOnnxError(im, "attribute 'center_point_box' must be 0 or 1, "
                           "got %lld", (long long)center);
  if (fzOnnxRank(in[0]) != 3 || fzOnnxRank(in[1]) != 3 ||
      fzOnnxDim(in[0], 2) != 4)
    return fzOnnxError(im, "boxes must be [batches, boxes, 4] and scores "
                           "[batches, classes, boxes]");
  ConstVals boxes, scores, maxOut = {0}, iou = {0}, thr = {0};
  if (!read_const(im, in, 0, "the boxes", &boxes) ||
      !read_const(im, in, 1, "the scores", &scores))
    return false;
  const char *names[3] = {"max_output_boxes_per_class", "iou_threshold",
                          "score_threshold"};
  ConstVals *opt[3] = {&maxOut, &iou, &thr};
  for (size_t i = 2; i < 5; ++i) {
    if (i >= nIn || !in[i])
      continue;
    if (!read_const(im, in, i, names[i - 2], opt[i - 2]))
      return false;
    if (opt[i - 2]->n != 1)
      return fzOnnxError(im, "%s must hold one value, has %zu",
                         names[i - 2], opt[i - 2]->n);
  }
  int64_t nb = fzOnnxDim(in[0], 0), nbox = fzOnnxDim(in[0], 1);
  int64_t nc = fzOnnxDim(in[1], 1);
  if (fzOnnxDim(in[1], 0) != nb || fzOnnxDim(in[1], 2) != nbox)
    return fzOnnxError(im, "scores [%lld, %lld, %lld] do not match boxes "
                           "[%lld, %lld, 4]",
                       (long long)fzOnnxDim(in[1], 0), (long long)nc,
                       (long long)fzOnnxDim(in[1], 2), (long long)nb,
                       (long long)nbox);
  int64_t maxPer = maxOut.n ? (maxOut.i ? maxOut.i[0] : 0) : 0;
  if (maxOut.n && !maxOut.i)
    return fzOnnxError(im, "max_output_boxes_per_class must be an integer");
  if (maxPer < 0)
    maxPer = 0;
  if (maxPer > nbox)
    maxPer = nbox;
  float iouThr = iou.n ? (float)iou.f[0] : 0.0f;
  bool hasThr = thr.n != 0;
  float scoreThr = hasThr ? (float)thr.f[0] : 0.0f;
  if (!(iouThr >= 0 && iouThr <= 1))
    return fzOnnxError(im, "iou_threshold must be in [0, 1], got %g",
                       (double)iouThr);
  size_t bytes = (size_t)(nbox + 1) * sizeof(int64_t);
  int64_t *cand = fzOnnxAlloc(im, bytes), *tmp = fzOnnxAlloc(im, bytes);
  int64_t *kept = fzOnnxAlloc(im, bytes);
  float *cs = fzOnnxAlloc(im, (size_t)(nbox + 1) * 4 * sizeof(float));
  int64_t cap;
  if (!fzOnnxMulI64(nb, nc, &cap) || !fzOnnxMulI64(cap, maxPer, &cap) ||
      !fzOnnxMulI64(cap, 3, &cap) || cap > FZ_ONNX_FOLD_LIMIT)
    return fzOnnxError(im, "unsupported result of more than %lld elements",
                       (long long)FZ_ONNX_FOLD_LIMIT);
  int64_t *res = fzOnnxAlloc(im, (size_t)(cap + 1) * sizeof *res);
  if (!cand || !tmp || !kept || !cs || !res)
    return fzOnnxError(im, "out of memory");
  int64_t count = 0;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t j = 0; j < nbox; ++j)
      corners(&boxes.f[(b * nbox + j) * 4], center != 0, &cs[j * 4]);
    for (int64_t c = 0; c < nc; ++c) {
      const double *sc = &scores.f[(b * nc + c) * nbox];
      int64_t n = 0;
      for (int64_t j = 0; j < nbox; ++j)
        if (!hasThr || (float)sc[j] > scoreThr)
          cand[n++] = j;
      /* Stable sort by decreasing score: ties keep the index order. */
      for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
          int64_t mid = lo + w < n ? lo + w : n;
          int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
          int64_t p = lo, q = mid, k = lo;
          while (p < mid && q < hi)
            tmp[k++] = (float)sc[cand[q]] > (float)sc[cand[p]] ? cand[q++]
                                                               : cand[p++];
          while (p < mid)
            tmp[k++] = cand[p++];
          while (q < hi)
            tmp[k++] = cand[q++];
        }
        memcpy(cand, tmp, (size_t)n * sizeof *cand);
      }
      int64_t nk = 0;
      for (int64_t j = 0; j < n && nk < maxPer; ++j) {
        bool keep = true;
        for (int64_t q = 0; q < nk && keep; ++q)
          keep = !suppresses(&cs[kept[q] * 4], &cs[cand[j] * 4], iouThr);
        if (!keep)
          continue;
        kept[nk++] = cand[j];
        res[count * 3] = b;
        res[count * 3 + 1] = c;
        res[count * 3 + 2] = cand[j];
        ++count;
      }
    }
  }
  int64_t shape[2] = {count, 3};
  out[0] = fzOnnxConstI64(im, 2, shape, res);
  return out[0] != NULL;
}

/*===--- The table -------------------------------------------------------===*/

const FzOnnxOpDef fzOnnxDataDependentOps[] = {
    {"Compress", h_compress, NULL, "axis", 2, 2, 1},
    {"NonZero", h_nonzero, NULL, "", 1, 1, 1},
    {"Unique", h_unique, NULL, "axis sorted", 1, 1, 4},
    {"NonMaxSuppression", h_nms, NULL, "center_point_box", 2, 5, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
