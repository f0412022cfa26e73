/* dialects/graph/ops_attention.c - graph.attention: scaled dot-product
 * attention in one op, its shape function, verifier and interpreter
 * kernel.
 *
 *   %o = graph.attention %q, %k, %v [, %mask] {scale = 0.125 : f64,
 *          causal = true} : Q, K, V [, M] -> O
 *
 *   q [B..., Sq, D], k [B..., Sk, D], v [B..., Sk, Dv] (the batch dims B...,
 *   heads included, equal across the three), one float element type;
 *   mask (optional, additive, same element type) broadcasts to
 *   [B..., Sq, Sk] (numpy rules, aligned at the end); result [B..., Sq, Dv].
 *
 *   o[b, i, :] = sum_j p_ij v[b, j, :],  p_i = softmax_j(s_ij),
 *   s_ij = scale * <q[b, i, :], k[b, j, :]> + mask[b, i, j]
 *          (-inf where causal and j > i + Sk - Sq).
 *
 * `scale` defaults to 1 / sqrt(D), `causal` to false. A row whose every
 * score is -inf is NaN, as graph.softmax of such a row is. The
 * interpreter computes in f64 and rounds once; recognize-attention
 * builds the op from the matmul / scale / mask / softmax / matmul chains
 * exporters write, and lower-graph-to-loop streams over the keys with an
 * online softmax (never the Sq x Sk scores).
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

static const char *const attention_attrs[] = {"scale", "causal", NULL};

static const char *const kNames[] = {"query", "key", "value", "mask"};

static bool shape_attention(FzGraphDiag *d, size_t n, FzType *const *in,
                            const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 3, 4))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  size_t r = fzShapedTypeGetRank(in[0]);
  if (r < 2)
    return fzGraphError(d, "operand #0 (query) must have rank >= 2, got %zu",
                        r);
  for (size_t i = 1; i < 3; ++i)
    if (fzShapedTypeGetRank(in[i]) != r)
      return fzGraphError(d,
                          "operand #%zu (%s) has rank %zu; the query has "
                          "rank %zu",
                          i, kNames[i], fzShapedTypeGetRank(in[i]), r);
  /* Batch dims equal (no broadcasting: exporters spell that out). */
  for (size_t dim = 0; dim + 2 < r; ++dim)
    for (size_t i = 1; i < 3; ++i) {
      int64_t x = fzShapedTypeGetDim(in[0], dim);
      int64_t y = fzShapedTypeGetDim(in[i], dim);
      if (x != FZ_DYNAMIC && y != FZ_DYNAMIC && x != y)
        return fzGraphError(d,
                            "operand #%zu (%s) batch dimension %zu (%lld) "
                            "does not match the query's (%lld)",
                            i, kNames[i], dim, (long long)y, (long long)x);
    }
  int64_t D = fzShapedTypeGetDim(in[0], r - 1);
  int64_t Dk = fzShapedTypeGetDim(in[1], r - 1);
  int64_t Sk = fzShapedTypeGetDim(in[1], r - 2);
  int64_t Sv = fzShapedTypeGetDim(in[2], r - 2);
  if (D != FZ_DYNAMIC && Dk != FZ_DYNAMIC && D != Dk)
    return fzGraphError(d,
                        "operand #1 (key) head dimension (%lld) does not "
                        "match the query's (%lld)",
                        (long long)Dk, (long long)D);
  if (Sk != FZ_DYNAMIC && Sv != FZ_DYNAMIC && Sk != Sv)
    return fzGraphError(d,
                        "operand #2 (value) has %lld keys; the key operand "
                        "has %lld",
                        (long long)Sv, (long long)Sk);
  int64_t scores[FZ_GRAPH_MAX_RANK];
  for (size_t dim = 0; dim < r; ++dim)
    scores[dim] = fzShapedTypeGetDim(in[0], dim);
  scores[r - 1] = Sk;
  if (n == 4) {
    size_t rm = fzShapedTypeGetRank(in[3]);
    if (rm > r)
      return fzGraphError(d,
                          "operand #3 (mask) has rank %zu, more than the "
                          "scores' %zu",
                          rm, r);
    for (size_t j = 0; j < rm; ++j) {
      int64_t m = fzShapedTypeGetDim(in[3], j), s = scores[j + r - rm];
      if (m != 1 && m != FZ_DYNAMIC && s != FZ_DYNAMIC && m != s)
        return fzGraphError(d,
                            "operand #3 (mask) dimension %zu (%lld) does not "
                            "broadcast to the scores' (%lld)",
                            j, (long long)m, (long long)s);
    }
  }
  double scale;
  bool causal;
  if (!fzGraphGetFloat(d, a, "scale", 1.0, &scale) ||
      !fzGraphGetBool(d, a, "causal", false, &causal))
    return false;
  if (!isfinite(scale))
    return fzGraphError(d, "attribute 'scale' must be finite");
  int64_t shape[FZ_GRAPH_MAX_RANK];
  memcpy(shape, scores, r * sizeof *shape);
  shape[r - 1] = fzShapedTypeGetDim(in[2], r - 1);
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_attention)

/*===--- The kernel ----------------------------------------------------===*/

/* The scale of op: the attribute, or 1 / sqrt(D). */
static double scale_of(const FzOp *op, int64_t D) {
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  FzAttr *s = fzGraphAttrsLookup(&a, "scale");
  if (s && fzAttrGetKind(s) == FZ_ATTR_FLOAT)
    return fzFloatAttrGetValue(s);
  return D > 0 ? 1.0 / sqrt((double)D) : 1.0;
}

static bool causal_of(const FzOp *op) {
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  FzAttr *c = fzGraphAttrsLookup(&a, "causal");
  return c && fzAttrGetKind(c) == FZ_ATTR_BOOL && fzBoolAttrGetValue(c);
}

static bool kernel_fn(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                      FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *q = ops[0], *k = ops[1], *v = ops[2];
  const FzTensor *mask = fzOpGetNumOperands(op) > 3 ? ops[3] : NULL;
  FzTensor *o = res[0];
  size_t r = q->rank;
  int64_t Sq = q->shape[r - 2], D = q->shape[r - 1], Sk = k->shape[r - 2];
  int64_t Dv = v->shape[r - 1];
  int64_t nb = 1;
  for (size_t i = 0; i + 2 < r; ++i)
    nb *= q->shape[i];
  double scale = scale_of(op, D);
  bool causal = causal_of(op);
  double *qd = fzGraphLoadF64(q), *kd = fzGraphLoadF64(k);
  double *vd = fzGraphLoadF64(v), *md = mask ? fzGraphLoadF64(mask) : NULL;
  double *od = fzCalloc(in->ctx, (size_t)(o->numElements ? o->numElements : 1),
                        sizeof *od);
  double *p = fzCalloc(in->ctx, (size_t)(Sk ? Sk : 1), sizeof *p);
  bool ok = qd && kd && vd && od && p && (!mask || md);
  /* The mask's strides in the scores' index space [B..., Sq, Sk]. */
  int64_t ms[FZ_GRAPH_MAX_RANK] = {0}, sshape[FZ_GRAPH_MAX_RANK];
  if (ok && mask) {
    memcpy(sshape, q->shape, r * sizeof *sshape);
    sshape[r - 1] = Sk;
    fzGraphBroadcastStrides(mask, r, sshape, ms);
  }
  for (int64_t b = 0; ok && b < nb; ++b) {
    /* Mask offset of batch b: decompose b over the batch dims. */
    int64_t moff = 0, rem = b;
    for (size_t dim = r - 2; dim-- > 0;) {
      moff += (rem % q->shape[dim]) * ms[dim];
      rem /= q->shape[dim];
    }
    for (int64_t i = 0; i < Sq; ++i) {
      const double *qi = qd + (b * Sq + i) * D;
      double mx = -HUGE_VAL;
      for (int64_t j = 0; j < Sk; ++j) {
        double s = -HUGE_VAL;
        if (!causal || j <= i + Sk - Sq) {
          const double *kj = kd + (b * Sk + j) * D;
          double dot = 0;
          for (int64_t t = 0; t < D; ++t)
            dot += qi[t] * kj[t];
          s = scale * dot;
          if (md)
            s += md[moff + i * ms[r - 2] + j * ms[r - 1]];
        }
        p[j] = s;
        if (s > mx || isnan(s))
          mx = isnan(mx) ? mx : s;
      }
      double sum = 0;
      for (int64_t j = 0; j < Sk; ++j)
        sum += (p[j] = exp(p[j] - mx));
      double *oi = od + (b * Sq + i) * Dv;
      for (int64_t j = 0; j < Sk; ++j) {
        double w = p[j] / sum;
        const double *vj = vd + (b * Sk + j) * Dv;
        for (int64_t t = 0; t < Dv; ++t)
          oi[t] += w * vj[t];
      }
    }
  }
  if (ok)
    fzGraphStoreF64(o, od);
  fzFree(in->ctx, qd);
  fzFree(in->ctx, kd);
  fzFree(in->ctx, vd);
  fzFree(in->ctx, md);
  fzFree(in->ctx, od);
  fzFree(in->ctx, p);
  return ok;
}
static const FzGraphKernel kernel_attention = {kernel_fn};

/*===--- Definition -----------------------------------------------------===*/

static const FzGraphOpInfo attention_info = {
    shape_attention, NULL, G_FLOAT_ONLY, NULL, NULL, NULL, NULL, NULL, 0};

const FzOpDef fzGraphOp_attention = {
    .name = "graph.attention",
    .summary = "softmax(scale * q k^T + mask [causal]) v over the last two "
               "dims",
    .traits = FZ_TRAIT_PURE,
    .numOperands = FZ_VARIADIC,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_REDUCTION,
    .inherentAttrs = attention_attrs,
    .verify = fzGraphVerify,
    .inferResultTypes = shape_attention_hook,
    .print = fzGraphPrint,
    .parse = fzGraphParse,
    .interpret = &kernel_attention,
    .extra = &attention_info,
};
