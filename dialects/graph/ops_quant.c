/* dialects/graph/ops_quant.c - the quantization ops: graph.quantize,
 * graph.dequantize and graph.sub_zero_point, with their interpreter
 * kernels (docs/quantization.md).
 *
 * Integers are signless in fuse; an 8-bit quantized tensor is a tensor of
 * i8 whose bits the op reads as signed (int8) or, with the `unsigned`
 * attribute, as unsigned (uint8: 0..255), as MLIR's arith ops choose
 * between extsi and extui. The scale and the zero point broadcast to x
 * (numpy rules): a per-axis scale of ONNX is reshaped by the importer to
 * a shape like [1, C, 1, 1].
 *
 * Exact semantics (equal to ONNX's reference implementation and to the
 * lowered code bit for bit):
 *   quantize(x, s, z)    = sat(rint(x / s) + z), x / s an f32 division,
 *                          rint ties to even, sat clamps to [-128, 127]
 *                          (unsigned: [0, 255]); NaN gives 0.
 *   dequantize(x, s, z)  = f32(x - z) * s, the difference exact in i32,
 *                          the product one f32 rounding; x is i8 (signed
 *                          or unsigned) or i32 (signed).
 *   sub_zero_point(x, z) = x - z as i32 (the widened operand of an
 *                          integer matmul or convolution).
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

static const char *const quant_attrs[] = {"unsigned", NULL};

/*===--- Shapes and checks ----------------------------------------------===*/

static FzType *elt_of(FzType *t) {
  return fzShapedTypeGetElementType(t);
}

static bool is_int(FzType *t, unsigned width) {
  return fzTypeGetKind(t) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(t) == width;
}

/* The n operands broadcast together; the result of element type elt. */
static bool bcast_result(FzGraphDiag *d, size_t n, FzType *const *in,
                         FzType *elt, FzType **out) {
  static const size_t idx[3] = {0, 1, 2};
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t rank = 0;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i))
      return false;
  if (!fzGraphBroadcast(d, in, n, idx, shape, &rank))
    return false;
  out[0] = fzGraphTensorType(d, rank, shape, elt);
  return out[0] != NULL;
}

static bool get_unsigned(FzGraphDiag *d, const FzGraphAttrs *a, bool *u) {
  return fzGraphGetBool(d, a, "unsigned", false, u);
}

/* Operand i must have element type want (named in messages). */
static bool require_elt(FzGraphDiag *d, FzType *const *in, size_t i,
                        FzType *want, const char *what) {
  char buf[128], wbuf[32];
  if (elt_of(in[i]) == want)
    return true;
  return fzGraphError(d, "operand #%zu (%s) must be a tensor of %s, but got "
                         "'%s'", i, what, fzGraphTypeStr(want, wbuf,
                                                         sizeof wbuf),
                      fzGraphTypeStr(in[i], buf, sizeof buf));
}

/* quantize(x f32|f64, scale like x, zero_point i8) -> i8 */
static bool shape_quantize(FzGraphDiag *d, size_t n, FzType *const *in,
                           const FzGraphAttrs *a, FzType **out) {
  bool u;
  char buf[128];
  FzType *i8 = fzIntegerTypeGet(d->ctx, 8);
  if (!fzGraphCheckCount(d, n, 3, 3) || !bcast_result(d, 3, in, i8, out) ||
      !get_unsigned(d, a, &u))
    return false;
  FzType *xe = elt_of(in[0]);
  if (fzTypeGetKind(xe) != FZ_TYPE_F32 && fzTypeGetKind(xe) != FZ_TYPE_F64)
    return fzGraphError(d, "operand #0 (x) must be a tensor of f32 or f64, "
                           "but got '%s'", fzGraphTypeStr(in[0], buf,
                                                          sizeof buf));
  return require_elt(d, in, 1, xe, "the scale, of x's element type") &&
         require_elt(d, in, 2, i8, "the zero point");
}
FZ_GRAPH_INFER_HOOK(shape_quantize)

/* dequantize(x i8|i32, scale f32, zero_point like x) -> f32 */
static bool shape_dequantize(FzGraphDiag *d, size_t n, FzType *const *in,
                             const FzGraphAttrs *a, FzType **out) {
  bool u;
  char buf[128];
  FzType *f32 = fzF32TypeGet(d->ctx);
  if (!fzGraphCheckCount(d, n, 3, 3) || !bcast_result(d, 3, in, f32, out) ||
      !get_unsigned(d, a, &u))
    return false;
  FzType *xe = elt_of(in[0]);
  if (!is_int(xe, 8) && !is_int(xe, 32))
    return fzGraphError(d, "operand #0 (x) must be a tensor of i8 or i32, "
                           "but got '%s'", fzGraphTypeStr(in[0], buf,
                                                          sizeof buf));
  if (u && !is_int(xe, 8))
    return fzGraphError(d, "'unsigned' applies to i8 operands only");
  return require_elt(d, in, 1, f32, "the scale") &&
         require_elt(d, in, 2, xe, "the zero point, of x's element type");
}
FZ_GRAPH_INFER_HOOK(shape_dequantize)

/* sub_zero_point(x i8|i32, zero_point like x) -> i32 */
static bool shape_sub_zero_point(FzGraphDiag *d, size_t n, FzType *const *in,
                                 const FzGraphAttrs *a, FzType **out) {
  bool u;
  char buf[128];
  if (!fzGraphCheckCount(d, n, 2, 2) ||
      !bcast_result(d, 2, in, fzIntegerTypeGet(d->ctx, 32), out) ||
      !get_unsigned(d, a, &u))
    return false;
  FzType *xe = elt_of(in[0]);
  if (!is_int(xe, 8) && !is_int(xe, 32))
    return fzGraphError(d, "operand #0 (x) must be a tensor of i8 or i32, "
                           "but got '%s'", fzGraphTypeStr(in[0], buf,
                                                          sizeof buf));
  if (u && !is_int(xe, 8))
    return fzGraphError(d, "'unsigned' applies to i8 operands only");
  return require_elt(d, in, 1, xe, "the zero point, of x's element type");
}
FZ_GRAPH_INFER_HOOK(shape_sub_zero_point)

/*===--- Scalar semantics (shared with the lowering's documentation) ----===*/

/* Element i of an integer tensor, read unsigned when u (i8 only). */
static int64_t get_int(const FzTensor *t, int64_t i, bool u) {
  int64_t v = fzTensorGetI64(t, i);
  return u ? (v & 0xff) : v;
}

/* sat(rint(x / scale) + zp) with the division in f32 (f64 when wide). */
static double quantize_scalar(double x, double scale, int64_t zp, bool u,
                              bool wide) {
  double q = wide ? x / scale : (double)((float)x / (float)scale);
  if (isnan(q))
    return 0.0;
  double t = nearbyint(q) + (double)zp;
  double lo = u ? 0.0 : -128.0, hi = u ? 255.0 : 127.0;
  return t < lo ? lo : t > hi ? hi : t;
}

/*===--- Kernels --------------------------------------------------------===*/

static bool read_unsigned(FzGraphInterp *in, FzOp *op, bool *u) {
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  return get_unsigned(&d, &a, u);
}

static bool kernel_quantize_fn(FzGraphInterp *in, FzOp *op,
                               FzTensor *const *ops, FzTensor **res) {
  bool u;
  if (!read_unsigned(in, op, &u) || !fzGraphInterpInferResults(in, op, ops,
                                                               res))
    return false;
  FzTensor *y = res[0];
  bool wide = fzTypeGetKind(ops[0]->dtype) == FZ_TYPE_F64;
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 3, (const FzTensor *const *)ops);
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it)) {
    double q = quantize_scalar(fzTensorGetF64(ops[0], it.off[0]),
                               fzTensorGetF64(ops[1], it.off[1]),
                               get_int(ops[2], it.off[2], u), u, wide);
    fzTensorSetI64(y, i, (int64_t)q);
  }
  return true;
}

static bool kernel_dequantize_fn(FzGraphInterp *in, FzOp *op,
                                 FzTensor *const *ops, FzTensor **res) {
  bool u;
  if (!read_unsigned(in, op, &u) || !fzGraphInterpInferResults(in, op, ops,
                                                               res))
    return false;
  FzTensor *y = res[0];
  const float *s = ops[1]->data;
  float *out = y->data;
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 3, (const FzTensor *const *)ops);
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it)) {
    /* i32 arithmetic as the lowering (wraps only for an i32 x with a
     * non-zero zero point, which ONNX does not allow). */
    int32_t diff = (int32_t)((uint32_t)get_int(ops[0], it.off[0], u) -
                             (uint32_t)get_int(ops[2], it.off[2], u));
    out[i] = (float)diff * s[it.off[1]];
  }
  return true;
}

static bool kernel_sub_zero_point_fn(FzGraphInterp *in, FzOp *op,
                                     FzTensor *const *ops, FzTensor **res) {
  bool u;
  if (!read_unsigned(in, op, &u) || !fzGraphInterpInferResults(in, op, ops,
                                                               res))
    return false;
  FzTensor *y = res[0];
  int32_t *out = y->data;
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 2, (const FzTensor *const *)ops);
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it))
    out[i] = (int32_t)((uint32_t)get_int(ops[0], it.off[0], u) -
                       (uint32_t)get_int(ops[1], it.off[1], u));
  return true;
}

static const FzGraphKernel kernel_quantize = {kernel_quantize_fn};
static const FzGraphKernel kernel_dequantize = {kernel_dequantize_fn};
static const FzGraphKernel kernel_sub_zero_point = {kernel_sub_zero_point_fn};

/*===--- Op definitions -------------------------------------------------===*/

/* No fold hook: a dequantize of a constant weight stays in the IR (the
 * fold-qdq pass reads it as the weight of an integer contraction);
 * fold-constants still evaluates these ops through their kernels. */
#define DEFINE_QUANT_OP(id, summ, nOps, shapeFn, kern)                         \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {shapeFn, NULL, 0,    NULL, NULL,     \
                                          NULL,    NULL, NULL, 0};             \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE,                          \
      .numOperands = nOps,                                                     \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = FZ_FUSION_BROADCAST,                                       \
      .inherentAttrs = quant_attrs,                                            \
      .verify = fzGraphVerify,                                                 \
      .inferResultTypes = shapeFn##_hook,                                      \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &kern,                                                      \
      .extra = &id##_info,                                                     \
  };

DEFINE_QUANT_OP(quantize,
                "sat(rint(x / scale) + zero_point) to i8 (ties to even; "
                "'unsigned': uint8 bits)",
                3, shape_quantize, kernel_quantize)
DEFINE_QUANT_OP(dequantize, "(x - zero_point) * scale as f32 (x: i8 or i32)",
                3, shape_dequantize, kernel_dequantize)
DEFINE_QUANT_OP(sub_zero_point,
                "x - zero_point widened to i32 (the operand of an integer "
                "contraction)",
                2, shape_sub_zero_point, kernel_sub_zero_point)
