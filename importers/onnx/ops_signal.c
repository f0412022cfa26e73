/* importers/onnx/ops_signal.c - ONNX signal ops: DFT, STFT and
 * MelWeightMatrix.
 *
 * DFT (17, 20) is two matmuls per input part with constant cos and sin
 * tables [N, K] (K = N, or N/2 + 1 when onesided), the angle 2 pi ((n k)
 * mod N) / N reduced exactly before the cos and sin in double:
 *   forward  Yr = xr C + xi S,        Yi = xi C - xr S
 *   inverse  Yr = (xr C - xi S) / N,  Yi = (xi C + xr S) / N
 * along the DFT axis moved last (transposes around), the input first
 * zero-padded or cut to dft_length, and the real and imaginary parts
 * joined as the last dim. dft_length (and version 20's axis) must be
 * known at import.
 *
 * STFT (17) gathers the frames with a constant [frames, frame_length]
 * index table, multiplies them by the window (a run-time input, or ones),
 * and takes the DFT of each frame (onesided by default). frame_step and
 * frame_length must be known at import.
 *
 * MelWeightMatrix (17) is a constant computed as ONNX's definition does
 * (triangular filters between mel-spaced bins, the bins rounded down);
 * all its inputs must be known at import.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* A scalar integer input known at import; false after an error. */
static bool const_int(FzOnnxImporter *im, FzValue *const *in, size_t i,
                      const char *what, int64_t *out) {
  int64_t *v;
  size_t n;
  if (!fzOnnxGetConstInts(im, in[i], &v, &n) || n != 1)
    return fzOnnxErrorNotConstant(im, i, what);
  *out = v[0];
  return true;
}

/* x with its last dim at `axis` moved last (or back: inverse). */
static FzValue *move_last(FzOnnxImporter *im, FzValue *x, size_t axis,
                          bool back) {
  size_t r = fzOnnxRank(x);
  if (axis == r - 1)
    return x;
  int64_t perm[FZ_GRAPH_MAX_RANK];
  size_t k = 0;
  if (!back) {
    for (size_t i = 0; i < r; ++i)
      if (i != axis)
        perm[k++] = (int64_t)i;
    perm[k] = (int64_t)axis;
  } else {
    for (size_t i = 0; i < r; ++i)
      perm[i] = i < axis ? (int64_t)i : i == axis ? (int64_t)(r - 1)
                                                  : (int64_t)(i - 1);
  }
  return fzOnnxTranspose(im, x, r, perm);
}

/* x [..., N_in] (the DFT axis last) cut or zero-padded to n. */
static FzValue *fit_length(FzOnnxImporter *im, FzValue *x, int64_t n) {
  size_t r = fzOnnxRank(x);
  int64_t len = fzOnnxDim(x, r - 1);
  if (len == n)
    return x;
  if (len > n) {
    int64_t st[FZ_GRAPH_MAX_RANK] = {0}, lim[FZ_GRAPH_MAX_RANK],
            one[FZ_GRAPH_MAX_RANK];
    for (size_t i = 0; i < r; ++i)
      lim[i] = fzOnnxDim(x, i), one[i] = 1;
    lim[r - 1] = n;
    return fzOnnxSlice(im, x, st, lim, one);
  }
  int64_t pads[2 * FZ_GRAPH_MAX_RANK] = {0};
  pads[2 * r - 1] = n - len;
  return fzOnnxEmit(im, "graph.pad", 1, &x, NULL, "pads",
                    fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                        2 * r, pads),
                    NULL);
}

/* The table [n, k] of cos (or sin) of 2 pi (i j mod n) / n, scaled. */
static FzValue *table(FzOnnxImporter *im, FzType *elt, int64_t n, int64_t k,
                      bool isSin, double scale) {
  int64_t shape[2] = {n, k};
  if (!fzOnnxCheckBuilt(im, 2, shape, "DFT matrix", NULL))
    return NULL;
  FzTensor *t = fzTensorCreate(im->ctx, elt, 2, shape);
  if (!t)
    return NULL;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      /* i, j < 2^22: the product fits. */
      double a = 2 * pi * (double)((i * j) % n) / (double)n;
      fzTensorSetF64(t, i * k + j, scale * (isSin ? sin(a) : cos(a)));
    }
  FzValue *v = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return v;
}

/* The DFT of xr + i xi (xi may be NULL) along `axis` of the parts (rank
 * r, the axis of length n after fit_length), as [..., K, ..., 2]. */
static FzValue *dft(FzOnnxImporter *im, FzValue *xr, FzValue *xi,
                    size_t axis, int64_t n, bool onesided, bool inverse) {
  if (!xr)
    return NULL;
  if (n < 1) {
    fzOnnxError(im, "the DFT length must be at least 1, got %lld",
                (long long)n);
    return NULL;
  }
  FzType *elt = fzOnnxElt(xr);
  int64_t kk = onesided ? n / 2 + 1 : n;
  double scale = inverse ? 1.0 / (double)n : 1.0;
  FzValue *c = table(im, elt, n, kk, false, scale);
  FzValue *s = table(im, elt, n, kk, true, scale);
  xr = fit_length(im, move_last(im, xr, axis, false), n);
  if (xi)
    xi = fit_length(im, move_last(im, xi, axis, false), n);
  FzValue *rc = fzOnnxBinary(im, "graph.matmul", xr, c);
  FzValue *rs = fzOnnxBinary(im, "graph.matmul", xr, s);
  FzValue *yr, *yi;
  if (xi) {
    FzValue *ic = fzOnnxBinary(im, "graph.matmul", xi, c);
    FzValue *is = fzOnnxBinary(im, "graph.matmul", xi, s);
    yr = fzOnnxBinary(im, inverse ? "graph.sub" : "graph.add", rc, is);
    yi = fzOnnxBinary(im, inverse ? "graph.add" : "graph.sub", ic, rs);
  } else {
    yr = rc;
    yi = inverse ? rs : fzOnnxUnary(im, "graph.neg", rs);
  }
  yr = move_last(im, yr, axis, true);
  yi = move_last(im, yi, axis, true);
  if (!yr || !yi)
    return NULL;
  size_t r = fzOnnxRank(yr);
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = fzOnnxDim(yr, i);
  shape[r] = 1;
  FzValue *parts[2] = {fzOnnxReshape(im, yr, r + 1, shape),
                       fzOnnxReshape(im, yi, r + 1, shape)};
  return fzOnnxEmit(im, "graph.concat", 2, parts, NULL, "axis",
                    fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                     (int64_t)r),
                    NULL);
}

/* The real and imaginary parts of x [..., 1 or 2] (imaginary NULL for a
 * real signal). */
static bool split_parts(FzOnnxImporter *im, FzValue *x, FzValue **re,
                        FzValue **imag) {
  size_t r = fzOnnxRank(x);
  if (r < 2 || !fzOnnxRequireStatic(im, x, "the input"))
    return r < 2 ? fzOnnxError(im, "the input must have rank 2 or more")
                 : false;
  int64_t c = fzOnnxDim(x, r - 1);
  if (c != 1 && c != 2)
    return fzOnnxError(im, "the last dimension of the input must be 1 "
                           "(real) or 2 (complex), got %lld", (long long)c);
  if (!fzTypeIsFloat(fzOnnxElt(x)))
    return fzOnnxError(im, "the input must be a float tensor");
  int64_t st[FZ_GRAPH_MAX_RANK] = {0}, lim[FZ_GRAPH_MAX_RANK],
          one[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    lim[i] = fzOnnxDim(x, i), one[i] = 1;
  lim[r - 1] = 1;
  *re = fzOnnxReshape(im, fzOnnxSlice(im, x, st, lim, one), r - 1,
                      fzOnnxShape(x));
  *imag = NULL;
  if (c == 2) {
    st[r - 1] = 1, lim[r - 1] = 2;
    *imag = fzOnnxReshape(im, fzOnnxSlice(im, x, st, lim, one), r - 1,
                          fzOnnxShape(x));
  }
  return *re && (c == 1 || *imag);
}

static bool h_dft(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0];
  int64_t axis, inverse, onesided;
  bool v20 = im->opVersion >= 20;
  if ((!v20 && !fzOnnxAttrInt(im, "axis", 1, &axis)) ||
      !fzOnnxAttrInt(im, "inverse", 0, &inverse) ||
      !fzOnnxAttrInt(im, "onesided", 0, &onesided))
    return false;
  if (v20) {
    axis = -2;
    if (nIn > 2 && in[2] && !const_int(im, in, 2, "axis", &axis))
      return false;
  }
  FzValue *re, *imag;
  if (!split_parts(im, x, &re, &imag))
    return false;
  int64_t r = (int64_t)fzOnnxRank(x);
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r - 1)
    return fzOnnxError(im, "axis must be a signal axis (in [%lld, %lld] "
                           "or [0, %lld]), got %lld",
                       (long long)-r, -2LL, (long long)(r - 2),
                       (long long)axis);
  if (inverse && onesided)
    return fzOnnxError(im, "unsupported onesided inverse DFT");
  int64_t n = fzOnnxDim(x, (size_t)axis);
  if (nIn > 1 && in[1] && !const_int(im, in, 1, "dft_length", &n))
    return false;
  if (n < 1 || n > FZ_ONNX_FOLD_LIMIT)
    return fzOnnxError(im, "dft_length must be in [1, 2^22], got %lld",
                       (long long)n);
  out[0] = dft(im, re, imag, (size_t)axis, n, onesided != 0, inverse != 0);
  return out[0] != NULL;
}

static bool h_stft(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *window = nIn > 2 ? in[2] : NULL;
  int64_t onesided, step = 0, len = -1;
  if (!fzOnnxAttrInt(im, "onesided", 1, &onesided) ||
      !const_int(im, in, 1, "frame_step", &step))
    return false;
  if (nIn > 3 && in[3] && !const_int(im, in, 3, "frame_length", &len))
    return false;
  if (window) {
    if (fzOnnxRank(window) != 1 || fzOnnxDim(window, 0) == FZ_DYNAMIC ||
        (len >= 0 && fzOnnxDim(window, 0) != len))
      return fzOnnxError(im, "the window must be 1-D, of frame_length "
                             "elements");
    len = fzOnnxDim(window, 0);
  }
  if (len < 0)
    return fzOnnxError(im, "needs a window or a frame_length");
  FzValue *re, *imag;
  if (fzOnnxRank(x) != 3)
    return fzOnnxError(im, "the signal must be [batch, length, 1 or 2]");
  if (!split_parts(im, x, &re, &imag))
    return false;
  int64_t total = fzOnnxDim(x, 1);
  if (step < 1 || len < 1 || len > total)
    return fzOnnxError(im, "frame_step must be positive and frame_length "
                           "in [1, %lld], got %lld and %lld",
                       (long long)total, (long long)step, (long long)len);
  int64_t frames = (total - len) / step + 1;
  int64_t ishape[2] = {frames, len};
  if (!fzOnnxCheckBuilt(im, 2, ishape, "frame index table", NULL))
    return false;
  int64_t *idx = fzOnnxAlloc(im, (size_t)(frames * len) * sizeof *idx);
  if (!idx)
    return fzOnnxError(im, "out of memory");
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < len; ++j)
      idx[f * len + j] = f * step + j; /* < total */
  FzValue *table = fzOnnxConstI64(im, 2, ishape, idx);
  FzAttr *one = fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), 1);
  FzValue *ops[2] = {re, table};
  re = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis", one, NULL);
  if (imag) {
    ops[0] = imag;
    imag = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis", one, NULL);
  }
  if (window) {
    if (fzOnnxElt(window) != fzOnnxElt(x))
      return fzOnnxError(im, "the window must have the signal's type");
    re = fzOnnxBinary(im, "graph.mul", re, window);
    if (imag)
      imag = fzOnnxBinary(im, "graph.mul", imag, window);
  }
  out[0] = dft(im, re, imag, 2, len, onesided != 0, false);
  return out[0] != NULL;
}

static bool h_mel(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t bins = 0, dftLen = 0, rate = 0, dtype;
  double *lo, *hi;
  size_t n1, n2;
  if (!fzOnnxAttrInt(im, "output_datatype", 1, &dtype) ||
      !const_int(im, in, 0, "num_mel_bins", &bins) ||
      !const_int(im, in, 1, "dft_length", &dftLen) ||
      !const_int(im, in, 2, "sample_rate", &rate))
    return false;
  if (!fzOnnxGetConstFloats(im, in[3], &lo, &n1) || n1 != 1)
    return fzOnnxErrorNotConstant(im, 3, "lower_edge_hertz");
  if (!fzOnnxGetConstFloats(im, in[4], &hi, &n2) || n2 != 1)
    return fzOnnxErrorNotConstant(im, 4, "upper_edge_hertz");
  FzType *elt = dtype < 0 || dtype > INT32_MAX
                    ? NULL
                    : fzOnnxElementType(im->ctx, (int32_t)dtype);
  if (!elt)
    return fzOnnxError(im, "unsupported dtype %lld", (long long)dtype);
  if (bins < 1 || dftLen < 1 || rate < 1 || bins > FZ_ONNX_FOLD_LIMIT ||
      dftLen > FZ_ONNX_FOLD_LIMIT)
    return fzOnnxError(im, "num_mel_bins, dft_length and sample_rate must "
                           "be positive (and at most 2^22)");
  if (!(lo[0] >= 0 && hi[0] >= lo[0] && hi[0] <= 1e9))
    return fzOnnxError(im, "the edges must satisfy 0 <= lower <= upper <= "
                           "1e9 Hz, got %g and %g", lo[0], hi[0]);
  int64_t spec = dftLen / 2 + 1, shape[2] = {spec, bins};
  if (!fzOnnxCheckBuilt(im, 2, shape, "mel weight matrix", NULL))
    return false;
  int64_t *f = fzOnnxAlloc(im, (size_t)(bins + 2) * sizeof *f);
  FzTensor *t = f ? fzTensorCreate(im->ctx, elt, 2, shape) : NULL;
  if (!t)
    return fzOnnxError(im, "out of memory");
  double melLo = 2595 * log10(1 + lo[0] / 700);
  double melHi = 2595 * log10(1 + hi[0] / 700);
  double stepMel = (melHi - melLo) / (double)(bins + 2);
  for (int64_t i = 0; i < bins + 2; ++i) {
    double hz = 700 * (pow(10, ((double)i * stepMel + melLo) / 2595) - 1);
    double b = floor((double)(dftLen + 1) * hz / (double)rate);
    f[i] = b < 0 ? 0 : b > (double)(spec - 1) ? spec - 1 : (int64_t)b;
  }
  for (int64_t i = 0; i < spec * bins; ++i)
    fzTensorSetF64(t, i, 0);
  for (int64_t i = 0; i < bins; ++i) {
    int64_t l = f[i], c = f[i + 1], h = f[i + 2];
    if (c == l) {
      fzTensorSetF64(t, c * bins + i, 1);
    } else {
      for (int64_t j = l; j <= c; ++j)
        fzTensorSetF64(t, j * bins + i,
                       (double)(j - l) / (double)(c - l));
    }
    for (int64_t j = c; h > c && j < h; ++j)
      fzTensorSetF64(t, j * bins + i, (double)(h - j) / (double)(h - c));
  }
  out[0] = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxSignalOps[] = {
    {"DFT", h_dft, NULL, "axis<20 inverse onesided", 1, 3, 1},
    {"STFT", h_stft, NULL, "onesided", 2, 4, 1},
    {"MelWeightMatrix", h_mel, NULL, "output_datatype", 5, 5, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
