/* importers/onnx/ops_quant.c - ONNX's quantization ops: QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv (docs/quantization.md). They take INT8 and
 * UINT8 tensors, the latter marked unsigned by the importer (unsigned.c),
 * and give the mark to graph.quantize / graph.dequantize /
 * graph.sub_zero_point as their `unsigned` attribute.
 *
 * Scales and zero points. A per-tensor scale (rank 0 or one element) is
 * used as a scalar; a per-axis one (1-D of x's dim along `axis`) is
 * reshaped to broadcast along that axis. Blocked quantization (opset 21's
 * block_size) is refused with an error naming it. A constant scale must
 * be positive and finite (a zero, negative, NaN or infinite one is an
 * error at the node); the zero point must have the scale's shape and the
 * element type of the quantized tensor.
 *
 * QLinearMatMul and QLinearConv follow ONNX's reference implementation:
 * the i32 accumulator times the f32 multiplier a_scale * b_scale / y_scale
 * computed in f64 (numpy's int32 * float32), rounded half to even, plus
 * the output zero point, saturated.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

/*===--- Helpers --------------------------------------------------------===*/

static FzContext *ctx_of(FzOnnxImporter *im) {
  return im->ctx;
}

static FzType *i8_type(FzOnnxImporter *im) {
  return fzIntegerTypeGet(ctx_of(im), 8);
}

static FzAttr *unit_attr(FzOnnxImporter *im) {
  return fzUnitAttrGet(ctx_of(im));
}

/* Emits a quantization op with `unsigned` set when u. */
static FzValue *emit_q(FzOnnxImporter *im, const char *name, size_t n,
                       FzValue *const *ops, bool u) {
  FzValue *v = u ? fzOnnxEmit(im, name, n, ops, NULL, "unsigned",
                              unit_attr(im), NULL)
                 : fzOnnxEmit(im, name, n, ops, NULL, NULL);
  if (u && v && fzOnnxElt(v) == i8_type(im))
    fzOnnxMarkUnsigned(im, v);
  return v;
}

/* Whether v is an 8-bit integer tensor (int8 or uint8). */
static bool is_8bit(FzOnnxImporter *im, FzValue *v) {
  return v && fzOnnxElt(v) == i8_type(im);
}

static bool is_f32(FzOnnxImporter *im, FzValue *v) {
  return v && fzOnnxElt(v) == fzF32TypeGet(ctx_of(im));
}

/* Checks a constant scale: positive and finite. */
static bool check_scale_values(FzOnnxImporter *im, FzValue *s,
                               const char *what) {
  double *vals;
  size_t n;
  if (!fzOnnxGetConstFloats(im, s, &vals, &n))
    return true; /* a run-time scale: IEEE arithmetic decides */
  for (size_t i = 0; i < n; ++i)
    if (!(vals[i] > 0) || isinf(vals[i]))
      return fzOnnxError(im, "%s must be positive and finite, but element "
                             "%zu is %g", what, i, vals[i]);
  return true;
}

/* The number of elements of a static value, -1 when dynamic. */
static int64_t num_elements(FzValue *v) {
  int64_t n = 1;
  for (size_t i = 0; i < fzOnnxRank(v); ++i) {
    if (fzOnnxDim(v, i) < 0)
      return -1;
    n *= fzOnnxDim(v, i);
  }
  return n;
}

/* Reshapes a per-tensor (one element) or per-axis (1-D of x's dim along
 * axis) parameter p to broadcast against x; blocked forms are refused.
 * `what` names the input in messages. NULL after an error. */
static FzValue *shape_param(FzOnnxImporter *im, FzValue *x, FzValue *p,
                            int64_t axisAttr, const char *what) {
  size_t r = fzOnnxRank(x), rp = fzOnnxRank(p), axis;
  if (num_elements(p) == 1)
    return fzOnnxReshape(im, p, 0, NULL);
  /* The axis matters (and must be valid) for a per-axis parameter only. */
  if (axisAttr < -(int64_t)r || axisAttr >= (int64_t)r) {
    fzOnnxError(im, "attribute 'axis' (%lld) is out of range for an input "
                    "of rank %zu", (long long)axisAttr, r);
    return NULL;
  }
  axis = (size_t)(axisAttr < 0 ? axisAttr + (int64_t)r : axisAttr);
  if (rp != 1) {
    fzOnnxError(im, "unsupported blocked quantization: %s has rank %zu "
                    "(only per-tensor and per-axis %ss are supported)",
                what, rp, what);
    return NULL;
  }
  if (r == 0 || fzOnnxDim(p, 0) != fzOnnxDim(x, axis) ||
      fzOnnxDim(p, 0) < 0) {
    fzOnnxError(im, "%s has %lld elements but the input's dim %zu along "
                    "the axis is %lld", what, (long long)fzOnnxDim(p, 0), axis,
                r ? (long long)fzOnnxDim(x, axis) : 0LL);
    return NULL;
  }
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = i == axis ? fzOnnxDim(p, 0) : 1;
  return fzOnnxReshape(im, p, r, shape);
}

/* Reads `axis` (versions >= 13; 1 before: per-tensor only). */
static bool read_axis(FzOnnxImporter *im, int64_t *axis) {
  *axis = 1;
  return im->opVersion < 13 || fzOnnxAttrInt(im, "axis", 1, axis);
}

/* Refuses opset 21's block_size (blocked quantization). */
static bool refuse_blocked(FzOnnxImporter *im) {
  int64_t bs = 0;
  if (!fzOnnxAttrInt(im, "block_size", 0, &bs))
    return false;
  if (bs != 0)
    return fzOnnxError(im, "unsupported blocked quantization (block_size "
                           "%lld): only per-tensor and per-axis scales are "
                           "supported", (long long)bs);
  return true;
}

/* The scale and zero point of x, shaped to broadcast against it. zp may
 * be NULL (then a zero of zpElt, unsigned when zpUnsigned). */
static bool quant_params(FzOnnxImporter *im, FzValue *x, FzValue *scale,
                         FzValue *zp, FzType *zpElt, int64_t axis,
                         const char *prefix, FzValue **sOut, FzValue **zOut) {
  char what[64];
  snprintf(what, sizeof what, "%sscale", prefix);
  if (!is_f32(im, scale))
    return fzOnnxError(im, "unsupported %s dtype: only FLOAT scales are "
                           "supported", what);
  if (!check_scale_values(im, scale, what))
    return false;
  if (zp) {
    if (fzOnnxElt(zp) != zpElt)
      return fzOnnxError(im, "%szero_point has another element type than "
                             "the quantized tensor", prefix);
    bool same = fzOnnxRank(zp) == fzOnnxRank(scale) ||
                (num_elements(zp) == 1 && num_elements(scale) == 1);
    for (size_t i = 0; same && i < fzOnnxRank(zp) &&
                       fzOnnxRank(zp) == fzOnnxRank(scale); ++i)
      same = fzOnnxDim(zp, i) == fzOnnxDim(scale, i);
    if (!same)
      return fzOnnxError(im, "%szero_point's shape differs from %s's",
                         prefix, what);
  }
  *sOut = shape_param(im, x, scale, axis, what);
  if (!*sOut)
    return false;
  if (zp) {
    snprintf(what, sizeof what, "%szero_point", prefix);
    *zOut = shape_param(im, x, zp, axis, what);
  } else {
    *zOut = fzOnnxConstScalar(im, zpElt, 0.0);
  }
  return *zOut != NULL;
}

/*===--- QuantizeLinear, DequantizeLinear -------------------------------===*/

static bool h_quantize(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *s, *z, *zp = nIn > 2 ? in[2] : NULL;
  int64_t axis;
  if (!refuse_blocked(im) || !read_axis(im, &axis))
    return false;
  int64_t odt = 0;
  if (!fzOnnxAttrInt(im, "output_dtype", 0, &odt))
    return false;
  if (odt != 0 && odt != DT(UINT8) && odt != DT(INT8))
    return fzOnnxError(im, "unsupported output_dtype %s: only INT8 and "
                           "UINT8 are supported",
                       fzOnnxDataTypeName((int32_t)odt));
  if (!is_f32(im, x))
    return fzOnnxError(im, "unsupported input dtype: only FLOAT inputs are "
                           "quantized");
  if (zp && !is_8bit(im, zp))
    return fzOnnxError(im, "unsupported y_zero_point dtype: only INT8 and "
                           "UINT8 are supported");
  /* Without a zero point the output is uint8 (or output_dtype's). */
  bool u = zp ? fzOnnxIsUnsigned(im, zp) : odt != DT(INT8);
  if (zp && odt && (odt == DT(UINT8)) != u)
    return fzOnnxError(im, "output_dtype %s differs from y_zero_point's "
                           "dtype", fzOnnxDataTypeName((int32_t)odt));
  if (!quant_params(im, x, in[1], zp, i8_type(im), axis, "y_", &s, &z))
    return false;
  FzValue *ops[3] = {x, s, z};
  out[0] = emit_q(im, "graph.quantize", 3, ops, u);
  return out[0] != NULL;
}

static bool h_dequantize(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *s, *z, *zp = nIn > 2 ? in[2] : NULL;
  int64_t axis;
  if (!refuse_blocked(im) || !read_axis(im, &axis))
    return false;
  FzType *i32 = fzIntegerTypeGet(ctx_of(im), 32);
  if (!is_8bit(im, x) && fzOnnxElt(x) != i32)
    return fzOnnxError(im, "unsupported input dtype: only INT8, UINT8 and "
                           "INT32 inputs are dequantized");
  bool u = fzOnnxIsUnsigned(im, x);
  if (zp && fzOnnxIsUnsigned(im, zp) != u)
    return fzOnnxError(im, "x_zero_point has another element type than "
                           "x (%s)", u ? "UINT8" : "INT8");
  if (!quant_params(im, x, in[1], zp, fzOnnxElt(x), axis, "x_", &s, &z))
    return false;
  if (fzOnnxElt(x) == i32) {
    int64_t *zv;
    size_t n;
    if (zp && (!fzOnnxGetConstInts(im, zp, &zv, &n) || (n && zv[0] != 0)))
      return fzOnnxError(im, "x_zero_point of an INT32 input must be the "
                             "constant 0");
  }
  FzValue *ops[3] = {x, s, z};
  out[0] = emit_q(im, "graph.dequantize", 3, ops, u);
  return out[0] != NULL;
}

/*===--- DynamicQuantizeLinear ------------------------------------------===*/

/* scale = (max(0, max x) - min(0, min x)) / 255, zero point =
 * sat(rint(-min / scale)), y = quantize(x, scale, zero point), uint8. */
static bool h_dynamic_quantize(FzOnnxImporter *im, FzValue *const *in,
                               size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  FzValue *x = in[0];
  if (!is_f32(im, x))
    return fzOnnxError(im, "unsupported input dtype: only FLOAT inputs are "
                           "quantized");
  FzType *f32 = fzF32TypeGet(ctx_of(im));
  FzValue *zero = fzOnnxConstScalar(im, f32, 0.0);
  FzValue *mx = fzOnnxBinary(
      im, "graph.max", fzOnnxReduce(im, "graph.reduce_max", x, 0, NULL, false),
      zero);
  FzValue *mn = fzOnnxBinary(
      im, "graph.min", fzOnnxReduce(im, "graph.reduce_min", x, 0, NULL, false),
      zero);
  FzValue *scale =
      fzOnnxBinary(im, "graph.div", fzOnnxBinary(im, "graph.sub", mx, mn),
                   fzOnnxConstScalar(im, f32, 255.0));
  FzValue *zq[3] = {fzOnnxUnary(im, "graph.neg", mn), scale,
                    fzOnnxConstScalar(im, i8_type(im), 0.0)};
  FzValue *zp = emit_q(im, "graph.quantize", 3, zq, true);
  FzValue *yq[3] = {x, scale, zp};
  out[0] = emit_q(im, "graph.quantize", 3, yq, true);
  if (nOut > 1)
    out[1] = scale;
  if (nOut > 2)
    out[2] = zp;
  return out[0] && scale && zp;
}

/*===--- Integer contractions ------------------------------------------===*/

/* x - zp as i32; zp NULL: x widened. */
static FzValue *widen(FzOnnxImporter *im, FzValue *x, FzValue *zp) {
  bool u = fzOnnxIsUnsigned(im, x);
  FzValue *ops[2] = {x, zp ? zp : fzOnnxConstScalar(im, fzOnnxElt(x), 0.0)};
  return emit_q(im, "graph.sub_zero_point", 2, ops, u);
}

/* Checks an 8-bit operand and its zero point's dtype. */
static bool check_operand(FzOnnxImporter *im, FzValue *x, FzValue *zp,
                          const char *name) {
  if (!is_8bit(im, x))
    return fzOnnxError(im, "unsupported %s dtype: only INT8 and UINT8 are "
                           "supported", name);
  if (zp && (!is_8bit(im, zp) ||
             fzOnnxIsUnsigned(im, zp) != fzOnnxIsUnsigned(im, x)))
    return fzOnnxError(im, "%s's zero point has another element type than "
                           "%s", name, name);
  return true;
}

/* A's zero point (scalar or per row [M]) shaped for A [..., M, K]. */
static FzValue *row_param(FzOnnxImporter *im, FzValue *a, FzValue *p,
                          const char *what) {
  if (!p || num_elements(p) == 1)
    return p ? fzOnnxReshape(im, p, 0, NULL) : NULL;
  size_t r = fzOnnxRank(a);
  if (fzOnnxRank(p) != 1 || r < 2 || fzOnnxDim(p, 0) != fzOnnxDim(a, r - 2)) {
    fzOnnxError(im, "unsupported %s shape: a scalar or one value per row "
                    "of A is supported", what);
    return NULL;
  }
  int64_t shape[2] = {fzOnnxDim(p, 0), 1};
  return fzOnnxReshape(im, p, 2, shape);
}

/* B's parameter (scalar or per column [N]) for B [..., K, N]: a 1-D one
 * broadcasts along the last dim as it is. */
static FzValue *col_param(FzOnnxImporter *im, FzValue *b, FzValue *p,
                          const char *what) {
  if (!p || num_elements(p) == 1)
    return p ? fzOnnxReshape(im, p, 0, NULL) : NULL;
  size_t r = fzOnnxRank(b);
  if (fzOnnxRank(p) != 1 || r < 1 || fzOnnxDim(p, 0) != fzOnnxDim(b, r - 1)) {
    fzOnnxError(im, "unsupported %s shape: a scalar or one value per column "
                    "of B is supported", what);
    return NULL;
  }
  return p;
}

/* The output channel parameter of a convolution (scalar or [M]) shaped to
 * broadcast against w [M, C, kh, kw] (asW) or y [N, M, oh, ow]. */
static FzValue *channel_param(FzOnnxImporter *im, FzValue *w, FzValue *p,
                              bool asW, const char *what) {
  if (!p || num_elements(p) == 1)
    return p ? fzOnnxReshape(im, p, 0, NULL) : NULL;
  size_t r = fzOnnxRank(w);
  if (fzOnnxRank(p) != 1 || r < 3 || fzOnnxDim(p, 0) != fzOnnxDim(w, 0)) {
    fzOnnxError(im, "unsupported %s shape: a scalar or one value per output "
                    "channel is supported", what);
    return NULL;
  }
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = (asW ? i == 0 : i == 1) ? fzOnnxDim(p, 0) : 1;
  return fzOnnxReshape(im, p, r, shape);
}

static bool call_row(FzOnnxImporter *im, const char *opType, FzValue **ops,
                     size_t n, FzValue **out) {
  const FzOnnxOpDef *row = fzOnnxLookupOp(opType);
  if (!row)
    return fzOnnxError(im, "internal error: no %s handler", opType);
  return row->fn(im, ops, n, out, 1);
}

static bool h_matmul_integer(FzOnnxImporter *im, FzValue *const *in,
                             size_t nIn, FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *a = in[0], *b = in[1];
  FzValue *az = nIn > 2 ? in[2] : NULL, *bz = nIn > 3 ? in[3] : NULL;
  if (!check_operand(im, a, az, "A") || !check_operand(im, b, bz, "B"))
    return false;
  if ((az && !(az = row_param(im, a, az, "a_zero_point"))) ||
      (bz && !(bz = col_param(im, b, bz, "b_zero_point"))))
    return false;
  FzValue *ops[2] = {widen(im, a, az), widen(im, b, bz)};
  return ops[0] && ops[1] && call_row(im, "MatMul", ops, 2, out);
}

static bool h_conv_integer(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                           FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *w = in[1];
  FzValue *xz = nIn > 2 ? in[2] : NULL, *wz = nIn > 3 ? in[3] : NULL;
  if (!check_operand(im, x, xz, "x") || !check_operand(im, w, wz, "w"))
    return false;
  if (xz && num_elements(xz) != 1)
    return fzOnnxError(im, "unsupported x_zero_point shape: only a scalar "
                           "is supported");
  if ((xz && !(xz = fzOnnxReshape(im, xz, 0, NULL))) ||
      (wz && !(wz = channel_param(im, w, wz, true, "w_zero_point"))))
    return false;
  FzValue *ops[2] = {widen(im, x, xz), widen(im, w, wz)};
  return ops[0] && ops[1] && call_row(im, "Conv", ops, 2, out);
}

/* quantize(f64(acc) * f64(a_scale * b_scale / y_scale), 1, y_zero_point):
 * the requantization of ONNX's reference QLinearMatMul / QLinearConv.
 * scale is the product's multiplier, already shaped. */
static FzValue *requantize(FzOnnxImporter *im, FzValue *acc, FzValue *mult,
                           FzValue *yz, bool u) {
  FzType *f64 = fzF64TypeGet(ctx_of(im));
  FzValue *d = fzOnnxBinary(im, "graph.mul", fzOnnxCast(im, acc, f64),
                            fzOnnxCast(im, mult, f64));
  FzValue *ops[3] = {d, fzOnnxConstScalar(im, f64, 1.0),
                     yz ? yz : fzOnnxConstScalar(im, i8_type(im), 0.0)};
  return emit_q(im, "graph.quantize", 3, ops, u);
}

/* a_scale * b_scale / y_scale in f32 (each checked, per-tensor or already
 * shaped). */
static FzValue *multiplier(FzOnnxImporter *im, FzValue *as, FzValue *bs,
                           FzValue *ys) {
  if (!is_f32(im, as) || !is_f32(im, bs) || !is_f32(im, ys)) {
    fzOnnxError(im, "unsupported scale dtype: only FLOAT scales are "
                    "supported");
    return NULL;
  }
  if (!check_scale_values(im, as, "the input's scale") ||
      !check_scale_values(im, bs, "the weight's scale") ||
      !check_scale_values(im, ys, "y_scale"))
    return NULL;
  return fzOnnxBinary(im, "graph.div", fzOnnxBinary(im, "graph.mul", as, bs),
                      ys);
}

static bool check_output_zp(FzOnnxImporter *im, FzValue *yz, bool *u) {
  if (!is_8bit(im, yz))
    return fzOnnxError(im, "unsupported y_zero_point dtype: only INT8 and "
                           "UINT8 are supported");
  if (num_elements(yz) != 1)
    return fzOnnxError(im, "unsupported y_zero_point shape: only a scalar "
                           "is supported");
  *u = fzOnnxIsUnsigned(im, yz);
  return true;
}

/* Checks that the inputs named in `names` (space-separated, one per
 * entry of in[0..n)) are present; "-" entries are optional. */
static bool require_inputs(FzOnnxImporter *im, FzValue *const *in, size_t n,
                           const char *const *names) {
  for (size_t i = 0; i < n; ++i)
    if (!in[i] && names[i][0] != '-')
      return fzOnnxError(im, "requires input #%zu (%s)", i, names[i]);
  return true;
}

/* An absent zero point: 0 of x's type. */
static FzValue *zp_or_zero(FzOnnxImporter *im, FzValue *x, FzValue *zp) {
  return zp ? zp : fzOnnxConstScalar(im, fzOnnxElt(x), 0.0);
}

static FzValue *scalar_of(FzOnnxImporter *im, FzValue *v, const char *what) {
  if (num_elements(v) != 1) {
    fzOnnxError(im, "unsupported %s shape: only a scalar is supported", what);
    return NULL;
  }
  return fzOnnxReshape(im, v, 0, NULL);
}

static bool h_qlinear_matmul(FzOnnxImporter *im, FzValue *const *in,
                             size_t nIn, FzValue **out, size_t nOut) {
  (void)nOut;
  static const char *const names[] = {"a", "a_scale", "-", "b", "b_scale",
                                      "-", "y_scale", "-"};
  if (!require_inputs(im, in, nIn < 8 ? nIn : 8, names))
    return false;
  FzValue *a = in[0], *b = in[3], *az = in[2], *bz = in[5];
  FzValue *yz = nIn > 7 ? in[7] : NULL;
  bool u = false;
  if (!check_operand(im, a, az, "a") || !check_operand(im, b, bz, "b"))
    return false;
  az = zp_or_zero(im, a, az);
  bz = zp_or_zero(im, b, bz);
  if (!yz) { /* the output takes a's type */
    yz = zp_or_zero(im, a, NULL);
    if (fzOnnxIsUnsigned(im, a))
      fzOnnxMarkUnsigned(im, yz);
  }
  if (!check_output_zp(im, yz, &u))
    return false;
  FzValue *as = scalar_of(im, in[1], "a_scale"),
          *bs = col_param(im, b, in[4], "b_scale"),
          *ys = scalar_of(im, in[6], "y_scale");
  if (!as || !bs || !ys || !(az = row_param(im, a, az, "a_zero_point")) ||
      !(bz = col_param(im, b, bz, "b_zero_point")))
    return false;
  FzValue *ops[2] = {widen(im, a, az), widen(im, b, bz)}, *acc = NULL;
  if (!ops[0] || !ops[1] || !call_row(im, "MatMul", ops, 2, &acc))
    return false;
  FzValue *m = multiplier(im, as, bs, ys);
  out[0] = m ? requantize(im, acc, m, fzOnnxReshape(im, yz, 0, NULL), u)
             : NULL;
  return out[0] != NULL;
}

static bool h_qlinear_conv(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                           FzValue **out, size_t nOut) {
  (void)nOut;
  static const char *const names[] = {"x", "x_scale", "-", "w", "w_scale",
                                      "-", "y_scale", "-"};
  if (!require_inputs(im, in, nIn < 8 ? nIn : 8, names))
    return false;
  FzValue *x = in[0], *w = in[3], *xz = in[2], *wz = in[5];
  FzValue *yz = nIn > 7 ? in[7] : NULL;
  FzValue *bias = nIn > 8 ? in[8] : NULL;
  bool u = false;
  if (!check_operand(im, x, xz, "x") || !check_operand(im, w, wz, "w"))
    return false;
  xz = zp_or_zero(im, x, xz);
  wz = zp_or_zero(im, w, wz);
  if (!yz) {
    yz = zp_or_zero(im, x, NULL);
    if (fzOnnxIsUnsigned(im, x))
      fzOnnxMarkUnsigned(im, yz);
  }
  if (!check_output_zp(im, yz, &u))
    return false;
  if (bias && fzOnnxElt(bias) != fzIntegerTypeGet(ctx_of(im), 32))
    return fzOnnxError(im, "the bias B must be INT32");
  FzValue *xs = scalar_of(im, in[1], "x_scale"),
          *ws = channel_param(im, w, in[4], false, "w_scale"),
          *ys = scalar_of(im, in[6], "y_scale");
  if (!xs || !ws || !ys || !(xz = scalar_of(im, xz, "x_zero_point")) ||
      !(wz = channel_param(im, w, wz, true, "w_zero_point")))
    return false;
  FzValue *ops[3] = {widen(im, x, xz), widen(im, w, wz), bias}, *acc = NULL;
  if (!ops[0] || !ops[1] || !call_row(im, "Conv", ops, bias ? 3 : 2, &acc))
    return false;
  FzValue *m = multiplier(im, xs, ws, ys);
  out[0] = m ? requantize(im, acc, m, fzOnnxReshape(im, yz, 0, NULL), u)
             : NULL;
  return out[0] != NULL;
}

/*===--- The table ------------------------------------------------------===*/

#define CONV_ATTRS "auto_pad dilations group kernel_shape pads strides"

const FzOnnxOpDef fzOnnxQuantOps[] = {
    {"QuantizeLinear", h_quantize, NULL,
     "axis>=13 saturate>=19 block_size>=21 output_dtype>=21", 2, 3, 1},
    {"DequantizeLinear", h_dequantize, NULL, "axis>=13 block_size>=21", 2, 3,
     1},
    {"DynamicQuantizeLinear", h_dynamic_quantize, NULL, "", 1, 1, 3},
    {"MatMulInteger", h_matmul_integer, NULL, "", 2, 4, 1},
    {"ConvInteger", h_conv_integer, NULL, CONV_ATTRS, 2, 4, 1},
    {"QLinearMatMul", h_qlinear_matmul, NULL, "", 7, 8, 1},
    {"QLinearConv", h_qlinear_conv, NULL, CONV_ATTRS, 7, 9, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
