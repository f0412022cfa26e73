/* importers/onnx/ops_control.c - ONNX control flow where it is static:
 * If with a condition known at import (folded to the branch it takes),
 * Loop with a trip count and conditions known at import, and Scan (from
 * version 9) over a static length, both unrolled.
 *
 * A body is imported once per iteration through fzOnnxImportSubgraph
 * (model.c): its inputs are bound to the iteration's values (the
 * iteration number and condition as constants, the loop-carried values,
 * a Scan's slices), its outer-scope references read the enclosing values,
 * and its outputs feed the next iteration. Import-time folding then turns
 * what depends only on the iteration number into constants, which is how
 * a Loop's condition is known after each iteration.
 *
 * What is not static is an error, never a guess: an If whose condition
 * is computed at run time and whose branches differ in their output
 * types, a Loop whose trip count or condition is computed at run time (the
 * error names the operand, so that a caller with the run's inputs can
 * bind them: FzOnnxInputValue.ifNeeded), a Loop with neither (endless), a
 * Loop of more than CF_MAX_ITERATIONS iterations, a Loop that runs no
 * iteration but has scan outputs (their shape comes from the body), and
 * Scan-8's sequence_lens shorter than the sequence (Scan-8, the batched
 * form, runs the scan once per batch entry).
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

#define CF_MAX_ITERATIONS 4096
/* Scan outputs of one Loop or Scan (each keeps a value per iteration). */
#define CF_MAX_SCAN_OUTPUTS 64

static FzAttr *i64_attr(FzOnnxImporter *im, int64_t v) {
  return fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), v);
}

/* The subgraph attribute `name`; NULL after an error. */
static const Onnx__GraphProto *graph_attr(FzOnnxImporter *im,
                                          const char *name) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  if (!a) {
    fzOnnxError(im, "requires attribute '%s'", name);
    return NULL;
  }
  if (!a->g) {
    fzOnnxError(im, "attribute '%s' must be a graph", name);
    return NULL;
  }
  return a->g;
}

/* A constant scalar (one element) of input i as an integer; false after
 * the not-constant error naming `what`. */
static bool const_scalar(FzOnnxImporter *im, FzValue *v, size_t i,
                         const char *what, int64_t *out) {
  int64_t *vals;
  size_t n;
  if (!fzOnnxGetConstInts(im, v, &vals, &n) || n != 1)
    return fzOnnxErrorNotConstant(im, i, what);
  *out = vals[0];
  return true;
}

/* If. A condition known at import takes its branch. A run-time one
 * imports both branches and selects each output by the condition, when
 * the branches' outputs have the same types (both are computed; the
 * graph ops are pure, and the one not taken is thrown away). Otherwise
 * the condition must be known at import: the not-constant error, and a
 * caller with the inputs binds it. */
static bool h_if(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                 FzValue **out, size_t nOut) {
  (void)nIn;
  const Onnx__GraphProto *thenG = graph_attr(im, "then_branch");
  const Onnx__GraphProto *elseG = thenG ? graph_attr(im, "else_branch") : NULL;
  if (!elseG)
    return false;
  int64_t *cv;
  size_t n;
  if (fzOnnxGetConstInts(im, in[0], &cv, &n) && n == 1)
    return fzOnnxImportSubgraph(im, cv[0] ? thenG : elseG, 0, NULL, nOut,
                                out);
  const char *what = "condition (an If of a run-time condition needs "
                     "branches whose outputs have the same types)";
  for (size_t i = 0; i < fzOnnxRank(in[0]); ++i)
    if (fzOnnxDim(in[0], i) != 1)
      return fzOnnxErrorNotConstant(im, 0, what);
  /* Should a branch fail to import, binding the condition may still
   * help: the retry then imports only the branch it takes. */
  fzOnnxDemandInputs(im, in[0]);
  FzValue **thenV = fzOnnxAlloc(im, (nOut ? nOut : 1) * sizeof *thenV);
  FzValue **elseV = fzOnnxAlloc(im, (nOut ? nOut : 1) * sizeof *elseV);
  if (!thenV || !elseV ||
      !fzOnnxImportSubgraph(im, thenG, 0, NULL, nOut, thenV) ||
      !fzOnnxImportSubgraph(im, elseG, 0, NULL, nOut, elseV))
    return false;
  for (size_t i = 0; i < nOut; ++i)
    if (thenV[i] && elseV[i] &&
        fzValueGetType(thenV[i]) != fzValueGetType(elseV[i]))
      return fzOnnxErrorNotConstant(im, 0, what);
  FzValue *c = fzOnnxReshape(im, in[0], 0, NULL);
  for (size_t i = 0; i < nOut; ++i)
    if (!(out[i] = fzOnnxSelect(im, c, thenV[i], elseV[i])))
      return false;
  return true;
}

/* x with a unit dim inserted at `axis`. */
static FzValue *unsqueeze(FzOnnxImporter *im, FzValue *x, size_t axis) {
  size_t r = fzOnnxRank(x);
  if (!x || r + 1 > FZ_GRAPH_MAX_RANK)
    return NULL;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0, j = 0; d <= r; ++d)
    shape[d] = d == axis ? 1 : fzOnnxDim(x, j++);
  return fzOnnxReshape(im, x, r + 1, shape);
}

/* The n values of vals (each with a unit dim at axis already) joined
 * along axis. */
static FzValue *join(FzOnnxImporter *im, size_t n, FzValue **vals,
                     size_t axis) {
  if (n == 1)
    return vals[0];
  return fzOnnxEmit(im, "graph.concat", n, vals, NULL, "axis",
                    i64_attr(im, (int64_t)axis), NULL);
}

static bool h_loop(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  const Onnx__GraphProto *body = graph_attr(im, "body");
  if (!body)
    return false;
  size_t nCarried = nIn >= 2 ? nIn - 2 : 0;
  if (body->n_output < 1 + nCarried || body->n_input != 2 + nCarried)
    return fzOnnxError(im, "its body must take %zu inputs (iteration, "
                           "condition, %zu carried) and return the "
                           "condition, the %zu carried values and the scan "
                           "outputs",
                       2 + nCarried, nCarried, nCarried);
  size_t nScan = body->n_output - 1 - nCarried;
  if (nScan > CF_MAX_SCAN_OUTPUTS)
    return fzOnnxError(im, "unsupported Loop with %zu scan outputs (at most "
                           "%d)", nScan, CF_MAX_SCAN_OUTPUTS);
  if (nOut > nCarried + nScan)
    return fzOnnxError(im, "has %zu outputs; its body gives %zu", nOut,
                       nCarried + nScan);
  bool haveM = nIn > 0 && in[0], haveCond = nIn > 1 && in[1];
  int64_t trips = CF_MAX_ITERATIONS + 1, cond = 1;
  if (haveM && !const_scalar(im, in[0], 0, "trip count (a Loop is "
                                           "unrolled)", &trips))
    return false;
  if (haveCond && !const_scalar(im, in[1], 1, "condition (a Loop is "
                                              "unrolled)", &cond))
    return false;
  if (!haveM && !haveCond)
    return fzOnnxError(im, "unsupported Loop without a trip count or a "
                           "condition (it never ends)");
  if (haveM && trips > CF_MAX_ITERATIONS)
    return fzOnnxError(im, "unsupported trip count %lld: a Loop is "
                           "unrolled, up to %d iterations",
                       (long long)trips, CF_MAX_ITERATIONS);
  FzValue **vals = fzOnnxAlloc(im, (2 + nCarried + nScan) * sizeof *vals);
  FzValue **res = fzOnnxAlloc(im, (1 + nCarried + nScan) * sizeof *res);
  FzValue ***scans = fzOnnxAlloc(im, (nScan ? nScan : 1) * sizeof *scans);
  if (!vals || !res || !scans)
    return false;
  for (size_t k = 0; k < nScan; ++k)
    if (!(scans[k] = fzOnnxAlloc(im, CF_MAX_ITERATIONS * sizeof **scans)))
      return false;
  for (size_t k = 0; k < nCarried; ++k)
    vals[2 + k] = in[2 + k];
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64), *i1 = fzIntegerTypeGet(im->ctx, 1);
  int64_t it = 0;
  for (; it < trips && cond; ++it) {
    if (it == CF_MAX_ITERATIONS)
      return fzOnnxError(im, "unsupported Loop of more than %d iterations: "
                             "a Loop is unrolled",
                         CF_MAX_ITERATIONS);
    vals[0] = fzOnnxConstScalar(im, i64, (double)it);
    vals[1] = fzOnnxConstScalar(im, i1, 1);
    if (!fzOnnxImportSubgraph(im, body, 2 + nCarried, vals,
                              1 + nCarried + nScan, res))
      return false;
    int64_t *cv;
    size_t cn;
    if (!fzOnnxGetConstInts(im, res[0], &cv, &cn) || cn != 1)
      return fzOnnxError(im, "unsupported Loop whose body computes its "
                             "condition at run time (a Loop is unrolled)");
    cond = cv[0];
    for (size_t k = 0; k < nCarried; ++k)
      vals[2 + k] = res[1 + k];
    for (size_t k = 0; k < nScan; ++k)
      if (!(scans[k][it] = unsqueeze(im, res[1 + nCarried + k], 0)))
        return false;
  }
  for (size_t k = 0; k < nCarried && k < nOut; ++k)
    out[k] = vals[2 + k];
  for (size_t k = 0; k < nScan && nCarried + k < nOut; ++k) {
    if (it == 0)
      return fzOnnxError(im, "unsupported Loop that runs no iteration but "
                             "has scan outputs (their shape comes from the "
                             "body)");
    if (!(out[nCarried + k] = join(im, (size_t)it, scans[k], 0)))
      return false;
  }
  return true;
}

/* Per-input (or output) int list attribute of Scan: n entries, default 0. */
static bool scan_ints(FzOnnxImporter *im, const char *name, size_t n,
                      int64_t *out) {
  int64_t *v;
  size_t k;
  bool present;
  if (!fzOnnxAttrInts(im, name, &v, &k, &present))
    return false;
  if (present && k != n)
    return fzOnnxError(im, "attribute '%s' needs %zu entries, has %zu", name,
                       n, k);
  for (size_t i = 0; i < n; ++i)
    out[i] = present ? v[i] : 0;
  return true;
}

/* What a Scan runs: its body over nIn inputs (nState states, then the
 * scan inputs), with the per-input and per-output axes and directions. */
typedef struct ScanSpec {
  const Onnx__GraphProto *body;
  size_t nIn, nState, nScanIn, nScanOut;
  int64_t *inAxes, *inDirs, *outAxes, *outDirs;
} ScanSpec;

/* x without its dim `axis`, at position pos of it. */
static FzValue *slice_at(FzOnnxImporter *im, FzValue *x, size_t axis,
                         int64_t pos) {
  size_t r = fzOnnxRank(x);
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK],
          strides[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0, k = 0; d < r; ++d) {
    limits[d] = fzOnnxDim(x, d);
    strides[d] = 1;
    if (d != axis)
      shape[k++] = fzOnnxDim(x, d);
  }
  starts[axis] = pos;
  limits[axis] = pos + 1;
  return fzOnnxReshape(im, fzOnnxSlice(im, x, starts, limits, strides),
                       r - 1, shape);
}

/* Runs S over in (states, then scan inputs); out gets the final states
 * and the scan outputs (nState + nScanOut values). */
static bool scan_run(FzOnnxImporter *im, const ScanSpec *S,
                     FzValue *const *in, FzValue **out) {
  size_t nState = S->nState, nScanIn = S->nScanIn, nScanOut = S->nScanOut;
  int64_t len = -1;
  size_t *ax = fzOnnxAlloc(im, nScanIn * sizeof *ax);
  if (!ax)
    return false;
  for (size_t j = 0; j < nScanIn; ++j) {
    FzValue *x = in[nState + j];
    if (!fzOnnxRequireStatic(im, x, "a scan input") ||
        !fzOnnxNormAxis(im, S->inAxes[j], fzOnnxRank(x), &ax[j]))
      return false;
    int64_t d = fzOnnxDim(x, ax[j]);
    if (len >= 0 && d != len)
      return fzOnnxError(im, "scan inputs of different lengths (%lld and "
                             "%lld)", (long long)len, (long long)d);
    len = d;
  }
  if (len > CF_MAX_ITERATIONS)
    return fzOnnxError(im, "unsupported scan length %lld: a Scan is "
                           "unrolled, up to %d steps",
                       (long long)len, CF_MAX_ITERATIONS);
  if (len == 0 && nScanOut)
    return fzOnnxError(im, "unsupported Scan of length 0 with scan outputs "
                           "(their shape comes from the body)");
  FzValue **vals = fzOnnxAlloc(im, S->nIn * sizeof *vals);
  FzValue **res = fzOnnxAlloc(im, (nState + nScanOut) * sizeof *res);
  FzValue **elems = fzOnnxAlloc(im, (nScanOut ? nScanOut : 1) *
                                        (size_t)(len ? len : 1) *
                                        sizeof *elems);
  if (!vals || !res || !elems)
    return false;
  for (size_t k = 0; k < nState; ++k)
    vals[k] = in[k];
  for (int64_t t = 0; t < len; ++t) {
    for (size_t j = 0; j < nScanIn; ++j)
      vals[nState + j] = slice_at(im, in[nState + j], ax[j],
                                  S->inDirs[j] ? len - 1 - t : t);
    if (!fzOnnxImportSubgraph(im, S->body, S->nIn, vals, nState + nScanOut,
                              res))
      return false;
    for (size_t k = 0; k < nState; ++k)
      vals[k] = res[k];
    for (size_t k = 0; k < nScanOut; ++k)
      elems[k * (size_t)len + (size_t)t] = res[nState + k];
  }
  for (size_t k = 0; k < nState; ++k)
    out[k] = vals[k];
  for (size_t k = 0; k < nScanOut; ++k) {
    FzValue **e = &elems[k * (size_t)len];
    size_t r = fzOnnxRank(e[0]), axis;
    if (!fzOnnxNormAxis(im, S->outAxes[k], r + 1, &axis))
      return false;
    /* A reverse output holds step t at position len - 1 - t. */
    FzValue **ordered = fzOnnxAlloc(im, (size_t)len * sizeof *ordered);
    if (!ordered)
      return false;
    for (int64_t t = 0; t < len; ++t)
      if (!(ordered[S->outDirs[k] ? len - 1 - t : t] =
                unsqueeze(im, e[t], axis)))
        return false;
    if (!(out[nState + k] = join(im, (size_t)len, ordered, axis)))
      return false;
  }
  return true;
}

/* Scan-8: the batched form. Input #0 is sequence_lens (absent, or every
 * entry the full length), and dim 0 of every other input and output is
 * the batch: the scan runs once per batch entry. */
static bool scan8(FzOnnxImporter *im, ScanSpec *S, FzValue *const *in,
                  size_t nIn, FzValue **out, size_t nOut) {
  FzValue *const *data = in + 1;
  if (!fzOnnxRequireStatic(im, data[0], "the first state"))
    return false;
  int64_t batch = fzOnnxDim(data[0], 0), *lens;
  size_t nl;
  for (size_t j = 0; j < S->nIn; ++j)
    if (fzOnnxRank(data[j]) < 1 || fzOnnxDim(data[j], 0) != batch)
      return fzOnnxError(im, "every input of Scan-8 must start with the "
                             "batch dim (%lld)", (long long)batch);
  if (in[0]) {
    if (!fzOnnxGetConstInts(im, in[0], &lens, &nl))
      return fzOnnxErrorNotConstant(im, 0, "sequence_lens");
    for (size_t b = 0; b < nl; ++b) {
      size_t axis;
      FzValue *x = data[S->nState];
      if (!fzOnnxNormAxis(im, S->inAxes[0], fzOnnxRank(x) - 1, &axis))
        return false;
      if (lens[b] != fzOnnxDim(x, axis + 1))
        return fzOnnxError(im, "unsupported sequence_lens shorter than the "
                               "scanned dim");
    }
  }
  (void)nIn;
  size_t nRes = S->nState + S->nScanOut;
  FzValue **vals = fzOnnxAlloc(im, S->nIn * sizeof *vals);
  FzValue **res = fzOnnxAlloc(im, nRes * sizeof *res);
  FzValue **per = fzOnnxAlloc(im, nRes * (size_t)(batch ? batch : 1) *
                                      sizeof *per);
  if (!vals || !res || !per || batch < 1)
    return batch < 1 ? fzOnnxError(im, "unsupported empty batch") : false;
  for (int64_t b = 0; b < batch; ++b) {
    for (size_t j = 0; j < S->nIn; ++j)
      vals[j] = slice_at(im, data[j], 0, b);
    if (!scan_run(im, S, vals, res))
      return false;
    for (size_t k = 0; k < nRes; ++k)
      per[k * (size_t)batch + (size_t)b] = unsqueeze(im, res[k], 0);
  }
  for (size_t k = 0; k < nRes && k < nOut; ++k)
    if (!(out[k] = join(im, (size_t)batch, &per[k * (size_t)batch], 0)))
      return false;
  return true;
}

static bool h_scan(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  bool v8 = im->opVersion < 9;
  const Onnx__GraphProto *body = graph_attr(im, "body");
  int64_t m;
  if (!body || !fzOnnxAttrInt(im, "num_scan_inputs", -1, &m))
    return false;
  size_t nData = v8 ? (nIn ? nIn - 1 : 0) : nIn;
  if (m < 1 || (size_t)m > nData)
    return fzOnnxError(im, "attribute 'num_scan_inputs' must be in [1, %zu]",
                       nData);
  for (size_t i = v8 ? 1 : 0; i < nIn; ++i)
    if (!in[i])
      return fzOnnxError(im, "input #%zu is absent", i);
  ScanSpec S = {body, nData, nData - (size_t)m, (size_t)m, 0,
                NULL, NULL, NULL, NULL};
  if (body->n_input != nData || body->n_output < S.nState)
    return fzOnnxError(im, "its body must take the %zu states and %zu scan "
                           "slices and return the states first",
                       S.nState, S.nScanIn);
  S.nScanOut = body->n_output - S.nState;
  if (S.nScanOut > CF_MAX_SCAN_OUTPUTS)
    return fzOnnxError(im, "unsupported Scan with %zu scan outputs (at most "
                           "%d)", S.nScanOut, CF_MAX_SCAN_OUTPUTS);
  if (nOut > S.nState + S.nScanOut)
    return fzOnnxError(im, "has %zu outputs; its body gives %zu", nOut,
                       S.nState + S.nScanOut);
  S.inAxes = fzOnnxAlloc(im, S.nScanIn * sizeof *S.inAxes);
  S.inDirs = fzOnnxAlloc(im, S.nScanIn * sizeof *S.inDirs);
  S.outAxes = fzOnnxAlloc(im, (S.nScanOut + 1) * sizeof *S.outAxes);
  S.outDirs = fzOnnxAlloc(im, (S.nScanOut + 1) * sizeof *S.outDirs);
  if (!S.inAxes || !S.inDirs || !S.outAxes || !S.outDirs)
    return false;
  if (v8) {
    /* Scan-8: `directions` for the inputs; outputs forward, on axis 0. */
    for (size_t k = 0; k < S.nScanOut; ++k)
      S.outAxes[k] = S.outDirs[k] = 0;
    for (size_t j = 0; j < S.nScanIn; ++j)
      S.inAxes[j] = 0;
    if (!scan_ints(im, "directions", S.nScanIn, S.inDirs))
      return false;
    return scan8(im, &S, in, nIn, out, nOut);
  }
  if (!scan_ints(im, "scan_input_axes", S.nScanIn, S.inAxes) ||
      !scan_ints(im, "scan_input_directions", S.nScanIn, S.inDirs) ||
      !scan_ints(im, "scan_output_axes", S.nScanOut, S.outAxes) ||
      !scan_ints(im, "scan_output_directions", S.nScanOut, S.outDirs))
    return false;
  FzValue **res = fzOnnxAlloc(im, (S.nState + S.nScanOut) * sizeof *res);
  if (!res || !scan_run(im, &S, in, res))
    return false;
  for (size_t k = 0; k < nOut; ++k)
    out[k] = res[k];
  return true;
}

const FzOnnxOpDef fzOnnxControlOps[] = {
    {"If", h_if, NULL, "then_branch else_branch", 1, 1, 64},
    {"Loop", h_loop, NULL, "body", 0, -1, 64},
    {"Scan", h_scan, NULL,
     "body num_scan_inputs scan_input_axes>=9 scan_input_directions>=9 "
     "scan_output_axes>=9 scan_output_directions>=9 directions<9",
     0, -1, 64},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
