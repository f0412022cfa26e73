/* dialects/graph/interp_reduce.c - interpreter kernels of the reductions
 * and normalizations.
 *
 * Sums use Neumaier's compensated summation in double, so the oracle's
 * error does not grow with the reduction length. Reductions over an empty
 * set give the identity (sum 0, prod 1, max -inf, min +inf, mean NaN);
 * for integers, max/min of nothing is an error. NaN propagates through
 * max and min.
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD };

/* Neumaier's compensated sum: s + c is the running total. */
static void kahan_add(double *s, double *c, double v) {
  double t = *s + v;
  if (fabs(*s) >= fabs(v))
    *c += (*s - t) + v;
  else
    *c += (v - t) + *s;
  *s = t;
}

static bool read_axes(FzGraphInterp *in, FzOp *op, size_t rank, bool *reduced) {
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t n;
  bool present;
  if (!fzGraphGetI64Array(&d, &a, "axes", FZ_GRAPH_MAX_RANK, axes, &n,
                          &present))
    return false;
  for (size_t i = 0; i < rank; ++i)
    reduced[i] = !present;
  for (size_t i = 0; i < n; ++i) {
    size_t ax;
    if (!fzGraphNormAxis(&d, "axes", axes[i], rank, &ax))
      return false;
    reduced[ax] = true;
  }
  return true;
}

bool fzGraphKernelReduce(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  int kind = info->kind;
  const FzTensor *x = ops[0];
  bool reduced[FZ_GRAPH_MAX_RANK];
  if (!read_axes(in, op, x->rank, reduced) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  /* Output strides in the input's index space (0 along reduced dims). */
  int64_t os[FZ_GRAPH_MAX_RANK], idx[FZ_GRAPH_MAX_RANK] = {0}, s = 1;
  int64_t count = 1;
  for (size_t d = x->rank; d-- > 0;) {
    os[d] = reduced[d] ? 0 : s;
    if (!reduced[d])
      s *= x->shape[d];
    else
      count *= x->shape[d];
  }
  size_t m = (size_t)(y->numElements ? y->numElements : 1);
  bool isInt = fzGraphIsIntType(x->dtype);
  if (isInt && (kind == R_MAX || kind == R_MIN) && count == 0 &&
      y->numElements > 0)
    return fzGraphInterpError(in, op, "reduces over an empty set of integers");
  double *acc = fzCalloc(in->ctx, m, sizeof *acc);
  double *comp = fzCalloc(in->ctx, m, sizeof *comp);
  int64_t *iacc = fzCalloc(in->ctx, m, sizeof *iacc);
  bool ok = acc && comp && iacc;
  for (size_t j = 0; ok && j < m; ++j) {
    acc[j] = kind == R_PROD  ? 1.0
             : kind == R_MAX ? -HUGE_VAL
             : kind == R_MIN ? HUGE_VAL
                             : 0.0;
    iacc[j] = kind == R_PROD  ? 1
              : kind == R_MAX ? INT64_MIN
              : kind == R_MIN ? INT64_MAX
                              : 0;
  }
  int64_t off = 0;
  for (int64_t i = 0; ok && i < x->numElements; ++i) {
    if (isInt) {
      int64_t v = fzTensorGetI64(x, i), *a = &iacc[off];
      switch (kind) {
      case R_SUM:
      case R_MEAN:
        *a = (int64_t)((uint64_t)*a + (uint64_t)v);
        break;
      case R_PROD:
        *a = (int64_t)((uint64_t)*a * (uint64_t)v);
        break;
      case R_MAX:
        *a = v > *a ? v : *a;
        break;
      default:
        *a = v < *a ? v : *a;
        break;
      }
    } else {
      double v = fzTensorGetF64(x, i), *a = &acc[off];
      switch (kind) {
      case R_SUM:
      case R_MEAN:
        kahan_add(a, &comp[off], v);
        break;
      case R_PROD:
        *a *= v;
        break;
      case R_MAX:
        if (isnan(v) || v > *a)
          *a = isnan(*a) ? *a : v;
        break;
      default:
        if (isnan(v) || v < *a)
          *a = isnan(*a) ? *a : v;
        break;
      }
    }
    for (size_t d = x->rank; d-- > 0;) {
      off += os[d];
      if (++idx[d] < x->shape[d])
        break;
      off -= os[d] * x->shape[d];
      idx[d] = 0;
    }
  }
  for (int64_t j = 0; ok && j < y->numElements; ++j) {
    if (isInt) {
      int64_t v = iacc[j];
      if (kind == R_MEAN)
        v = count ? v / count : 0;
      fzTensorSetI64(y, j, v);
    } else {
      double v = acc[j] + comp[j];
      if (kind == R_MEAN)
        v /= (double)count;
      fzTensorSetF64(y, j, v);
    }
  }
  fzFree(in->ctx, acc);
  fzFree(in->ctx, comp);
  fzFree(in->ctx, iacc);
  return ok;
}

/* Splits shape at axis into outer * len * inner. */
static void split_axis(const FzTensor *t, size_t axis, int64_t *outer,
                       int64_t *len, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (size_t k = 0; k < axis; ++k)
    *outer *= t->shape[k];
  for (size_t k = axis + 1; k < t->rank; ++k)
    *inner *= t->shape[k];
  *len = t->shape[axis];
}

static bool read_axis(FzGraphInterp *in, FzOp *op, size_t rank, size_t *axis) {
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  int64_t ax;
  return fzGraphGetInt(&d, &a, "axis", -1, &ax) &&
         fzGraphNormAxis(&d, "axis", ax, rank, axis);
}

bool fzGraphKernelSoftmax(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                          FzTensor **res) {
  bool logForm = fzGraphOpInfo(fzOpGetDef(op))->kind == 1;
  size_t axis;
  if (!read_axis(in, op, ops[0]->rank, &axis) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  int64_t outer, len, inner;
  split_axis(ops[0], axis, &outer, &len, &inner);
  double *x = fzGraphLoadF64(ops[0]);
  if (!x)
    return false;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double *row = x + o * len * inner + i;
      double mx = -HUGE_VAL, s = 0, c = 0;
      for (int64_t k = 0; k < len; ++k)
        if (isnan(row[k * inner]) || row[k * inner] > mx)
          mx = isnan(mx) ? mx : row[k * inner];
      for (int64_t k = 0; k < len; ++k)
        kahan_add(&s, &c, exp(row[k * inner] - mx));
      s += c;
      for (int64_t k = 0; k < len; ++k) {
        double v = row[k * inner] - mx;
        row[k * inner] = logForm ? v - log(s) : exp(v) / s;
      }
    }
  fzGraphStoreF64(res[0], x);
  fzFree(in->ctx, x);
  return true;
}

/* t broadcast to (rank, shape) as doubles; NULL t gives `dflt` everywhere.
 * NULL on allocation failure. */
static double *expand(FzContext *ctx, const FzTensor *t, size_t rank,
                      const int64_t *shape, double dflt) {
  FzTensor target;
  memset(&target, 0, sizeof target);
  target.rank = rank;
  target.shape = (int64_t *)shape;
  int64_t n = fzGraphNumElements(rank, shape);
  double *v = fzMalloc(ctx, (size_t)(n ? n : 1) * sizeof *v);
  if (!v)
    return NULL;
  if (!t) {
    for (int64_t i = 0; i < n; ++i)
      v[i] = dflt;
    return v;
  }
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, &target, 1, &t);
  for (int64_t i = 0; i < n; ++i, fzGraphBcastNext(&it))
    v[i] = fzTensorGetF64(t, it.off[0]);
  return v;
}

bool fzGraphKernelLayerNorm(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                            FzTensor **res) {
  bool rms = fzGraphOpInfo(fzOpGetDef(op))->kind == 1;
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  const FzTensor *x = ops[0];
  size_t axis, n = fzOpGetNumOperands(op);
  double eps;
  if (!read_axis(in, op, x->rank, &axis) ||
      !fzGraphGetFloat(&d, &a, "epsilon", 1e-5, &eps) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  int64_t outer = 1, len = 1;
  for (size_t k = 0; k < axis; ++k)
    outer *= x->shape[k];
  for (size_t k = axis; k < x->rank; ++k)
    len *= x->shape[k];
  size_t nr = x->rank - axis;
  /* layer_norm's optional results #1 and #2: the mean and 1/sqrt(var +
   * eps) of each row (x.shape[:axis] followed by ones). */
  bool stats = fzOpGetNumResults(op) == 3;
  double *v = fzGraphLoadF64(x);
  double *scale =
      expand(in->ctx, n > 1 ? ops[1] : NULL, nr, x->shape + axis, 1.0);
  double *bias =
      expand(in->ctx, n > 2 ? ops[2] : NULL, nr, x->shape + axis, 0.0);
  double *means = stats ? fzMalloc(in->ctx, (size_t)(outer ? outer : 1) *
                                                 sizeof *means)
                        : NULL;
  double *invs = stats ? fzMalloc(in->ctx, (size_t)(outer ? outer : 1) *
                                                sizeof *invs)
                       : NULL;
  bool ok = v && scale && bias && (!stats || (means && invs));
  for (int64_t o = 0; ok && o < outer; ++o) {
    double *row = v + o * len, mean = 0, s = 0, c = 0;
    if (!rms) {
      for (int64_t k = 0; k < len; ++k)
        kahan_add(&s, &c, row[k]);
      mean = (s + c) / (double)len;
      s = c = 0;
    }
    for (int64_t k = 0; k < len; ++k)
      kahan_add(&s, &c, (row[k] - mean) * (row[k] - mean));
    double inv = 1.0 / sqrt((s + c) / (double)len + eps);
    for (int64_t k = 0; k < len; ++k)
      row[k] = (row[k] - mean) * inv * scale[k] + bias[k];
    if (stats) {
      means[o] = mean;
      invs[o] = inv;
    }
  }
  if (ok)
    fzGraphStoreF64(res[0], v);
  if (ok && stats) {
    fzGraphStoreF64(res[1], means);
    fzGraphStoreF64(res[2], invs);
  }
  fzFree(in->ctx, means);
  fzFree(in->ctx, invs);
  fzFree(in->ctx, v);
  fzFree(in->ctx, scale);
  fzFree(in->ctx, bias);
  return ok;
}

bool fzGraphKernelBatchNorm(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                            FzTensor **res) {
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  double eps;
  if (!fzGraphGetFloat(&d, &a, "epsilon", 1e-5, &eps) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  int64_t nb = x->shape[0], ch = x->shape[1], inner = 1;
  for (size_t k = 2; k < x->rank; ++k)
    inner *= x->shape[k];
  for (size_t k = 1; k < 5; ++k)
    if (ops[k]->shape[0] != ch)
      return fzGraphInterpError(in, op,
                                "operand #%zu has %lld entries at run time "
                                "but operand #0 has %lld channels",
                                k, (long long)ops[k]->shape[0], (long long)ch);
  double *v = fzGraphLoadF64(x);
  if (!v)
    return false;
  for (int64_t c = 0; c < ch; ++c) {
    double scale = fzTensorGetF64(ops[1], c), bias = fzTensorGetF64(ops[2], c);
    double mean = fzTensorGetF64(ops[3], c), var = fzTensorGetF64(ops[4], c);
    double inv = 1.0 / sqrt(var + eps);
    for (int64_t b = 0; b < nb; ++b) {
      double *p = v + (b * ch + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        p[i] = (p[i] - mean) * inv * scale + bias;
    }
  }
  fzGraphStoreF64(res[0], v);
  fzFree(in->ctx, v);
  return true;
}
