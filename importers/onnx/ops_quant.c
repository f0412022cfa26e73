/* importers/onnx/ops_quant.c - ONNX's quantization ops: QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv, and the uint8 bookkeeping of the importer
 * (docs/quantization.md).
 *
 * uint8. fuse's integers are signless: an ONNX UINT8 tensor is imported
 * as a tensor of i8 holding the same bits, and the importer remembers
 * which values are unsigned (im->unsignedValues). The quantization ops
 * read that mark (graph.quantize / graph.dequantize / graph.sub_zero_point
 * take `unsigned`); data movement (Identity, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose) and Add, Sub, Mul (modulo 2^8, the same bits
 * signed or not) pass it on; Cast converts from and to UINT8 exactly;
 * every other op refuses a uint8 operand with a located error, since the
 * graph dialect would read its bits as signed.
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

/*===--- uint8 marks --------------------------------------------------===*/

void fzOnnxMarkUnsigned(FzOnnxImporter *im, FzValue *v) {
  if (v)
    (void)fzPtrMapPut(&im->unsignedValues, v, (void *)1);
}

bool fzOnnxIsUnsigned(FzOnnxImporter *im, FzValue *v) {
  return v && fzPtrMapGet(&im->unsignedValues, v) != NULL;
}

static bool is_op(const char *a, const char *b) {
  return a && !strcmp(a, b);
}

unsigned fzOnnxUnsignedBits(FzOnnxImporter *im, FzValue *v) {
  return fzOnnxIsUnsigned(im, v) ? fzTypeGetBitWidth(fzOnnxElt(v)) : 0;
}

bool fzOnnxDataTypeIsUnsigned(int32_t dataType) {
  return dataType == DT(UINT8) || dataType == DT(UINT16) ||
         dataType == DT(UINT32) || dataType == DT(UINT64);
}

/* "UINT8" ... "UINT64" for an unsigned width. */
static const char *unsigned_name(unsigned bits) {
  return bits == 8 ? "UINT8" : bits == 16 ? "UINT16" : bits == 32 ? "UINT32"
                                                                   : "UINT64";
}

/* The quantization ops: they take uint8 (not wider) operands. */
static bool quantizes(const char *op) {
  static const char *const ops[] = {
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
      "MatMulInteger",  "ConvInteger",      "QLinearMatMul",
      "QLinearConv",    NULL};
  for (size_t i = 0; ops[i]; ++i)
    if (is_op(op, ops[i]))
      return true;
  return false;
}

/* Data movement: the output holds the input's bits. */
static bool moves_data(const char *op) {
  static const char *const ops[] = {
      "Identity",  "Reshape", "Flatten", "Squeeze", "Unsqueeze",
      "Transpose", "Gather",  "Slice",   "Expand",  "Tile",
      NULL};
  for (size_t i = 0; ops[i]; ++i)
    if (is_op(op, ops[i]))
      return true;
  return false;
}

/* Arithmetic modulo 2^n: the signless result has the unsigned result's
 * bits. */
static bool wraps(const char *op) {
  return is_op(op, "Add") || is_op(op, "Sub") || is_op(op, "Mul");
}

/* Ops that order, compare or divide their operands: uint8 and uint16
 * operands are zero-extended to i32 (f32 for MaxPool), uint32 operands
 * to i64, for them, and their results of that type narrowed back (exact:
 * each is an operand's value, a quotient or a remainder of values in
 * range). uint64 operands of the ops that only order them are biased
 * instead (x + 2^63 modulo 2^64, which maps the unsigned order onto i64's
 * signed order) and their results unbiased; uint64 Div, Mod and BitShift
 * are decomposed (fzOnnxImportUnsigned64, h_bitshift). */
static bool widens(const char *op) {
  static const char *const ops[] = {
      "Max",     "Min",         "Div",     "Mod",          "MaxPool",
      "Greater", "GreaterOrEqual", "Less", "LessOrEqual",  "ReduceMax",
      "ReduceMin", "ArgMax",    "ArgMin",  "Clip",         "TopK",
      "BitShift",  NULL};
  for (size_t i = 0; ops[i]; ++i)
    if (is_op(op, ops[i]))
      return true;
  return false;
}

/* uint64 ops decomposed rather than biased. */
static bool decomposes64(const char *op) {
  return is_op(op, "Div") || is_op(op, "Mod") || is_op(op, "BitShift");
}

/* Whether operand i of a Concat or Where is data of one unsigned type
 * with the other data operands (Concat: every input; Where: #1, #2), so
 * that the output holds their bits. */
static bool selects(FzOnnxImporter *im, const char *op, FzValue *const *in,
                    size_t n, size_t i) {
  size_t first = is_op(op, "Where") ? 1 : 0, last = first ? 2 : n - 1;
  if (!(is_op(op, "Concat") || (is_op(op, "Where") && n == 3)) || i < first)
    return false;
  for (size_t k = first; k <= last; ++k)
    if (!in[k] || !fzOnnxIsUnsigned(im, in[k]) ||
        fzOnnxElt(in[k]) != fzOnnxElt(in[i]))
      return false;
  return true;
}

/* Ops whose operands all hold values of one type (ONNX's T): an unsigned
 * one with a signed one would be read under two meanings (uint64 with
 * int64 even has the same graph type). Equal compares bits. */
static bool one_type(const char *op) {
  static const char *const ops[] = {
      "Max",  "Min",         "Div",    "Mod",       "Greater",
      "Less", "GreaterOrEqual", "LessOrEqual", "BitShift", "Equal",
      "Add",  "Sub",         "Mul",    NULL};
  for (size_t i = 0; ops[i]; ++i)
    if (is_op(op, ops[i]))
      return true;
  return false;
}

bool fzOnnxCheckUnsignedInputs(FzOnnxImporter *im, FzValue *const *in,
                               size_t n) {
  const char *op = im->node->op_type;
  if (one_type(op)) {
    size_t u = 0, given = 0;
    for (size_t i = 0; i < n; ++i) {
      given += in[i] != NULL;
      u += fzOnnxIsUnsigned(im, in[i]);
    }
    for (size_t i = 0; u && u != given && i < n; ++i)
      if (in[i] && !fzOnnxIsUnsigned(im, in[i]))
        return fzOnnxError(im, "unsupported operand #%zu: a signed or "
                               "float operand with unsigned ones (%s takes "
                               "operands of one type)", i, op);
    if (u && is_op(op, "Equal"))
      return true;
  }
  for (size_t i = 0; i < n; ++i) {
    unsigned bits = fzOnnxUnsignedBits(im, in[i]);
    if (!bits || is_op(op, "Cast") || is_op(op, "CastLike") || wraps(op))
      continue;
    if (quantizes(op)) {
      if (bits == 8)
        continue;
    } else if (widens(op)) {
      /* MaxPool pools floats: f32 holds uint8 and uint16 exactly only;
       * Clip takes its bounds as f64 attributes, exact below 2^53. */
      if (!(is_op(op, "MaxPool") && bits > 16) &&
          !(is_op(op, "Clip") && bits == 64))
        continue;
    } else if (selects(im, op, in, n, i)) {
      continue;
    } else if ((moves_data(op) && i == 0) || is_op(op, "Shape") ||
               is_op(op, "Size") || (is_op(op, "Pow") && i == 1)) {
      continue;
    }
    return fzOnnxError(im, "unsupported %s operand #%zu: unsigned tensors "
                           "are read by Cast, Add, Sub, Mul, the ops that "
                           "order or divide (Max, Min, Div, Mod, "
                           "comparisons, BitShift, MaxPool of UINT8 and "
                           "UINT16, ...), Pow's exponent, data movement "
                           "(Concat and Where of one unsigned type) and "
                           "(UINT8) the quantization ops only "
                           "(docs/onnx.md)", unsigned_name(bits), i);
  }
  return true;
}

void fzOnnxPropagateUnsigned(FzOnnxImporter *im, FzValue *const *in,
                             size_t nIn, FzValue *const *out, size_t nOut) {
  const char *op = im->node->op_type;
  if (nIn && nOut && (moves_data(op) || wraps(op) || is_op(op, "Concat")) &&
      fzOnnxIsUnsigned(im, in[0]))
    fzOnnxMarkUnsigned(im, out[0]);
  if (nIn == 3 && nOut && is_op(op, "Where") && fzOnnxIsUnsigned(im, in[1]))
    fzOnnxMarkUnsigned(im, out[0]);
}

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

static FzType *int_type(FzOnnxImporter *im, unsigned bits) {
  return fzIntegerTypeGet(ctx_of(im), bits);
}

/* A scalar constant of x's element type holding the bits of v. */
static FzValue *iconst(FzOnnxImporter *im, FzType *elt, int64_t v) {
  FzValue *c = fzOnnxConstI64(im, 0, NULL, &v);
  return elt == int_type(im, 64) ? c : fzOnnxCast(im, c, elt);
}

static FzValue *bin(FzOnnxImporter *im, const char *op, FzValue *a,
                    FzValue *b) {
  return fzOnnxBinary(im, op, a, b);
}

/* x zero-extended from its width to the wider integer type `to`. */
static FzValue *zext(FzOnnxImporter *im, FzValue *x, FzType *to) {
  unsigned bits = fzTypeGetBitWidth(fzOnnxElt(x));
  FzValue *w = fzOnnxCast(im, x, to); /* sign-extends */
  FzValue *neg = fzOnnxCompare(im, "lt", w, iconst(im, to, 0));
  return fzOnnxSelect(
      im, neg, bin(im, "graph.add", w, iconst(im, to, (int64_t)1 << bits)),
      w);
}

/* The uint64 bits x as i64 biased by 2^63 (modulo 2^64): the unsigned
 * order of x is the signed order of the result. Its own inverse. */
static FzValue *bias64(FzOnnxImporter *im, FzValue *x) {
  return bin(im, "graph.add", x, iconst(im, fzOnnxElt(x), INT64_MIN));
}

/* a < b for the uint64 bits a and b. */
static FzValue *ult64(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  return fzOnnxCompare(im, "lt", bias64(im, a), bias64(im, b));
}

/* x >> 1 for the uint64 bits x (logical): non-negative as i64. */
static FzValue *lsr1_64(FzOnnxImporter *im, FzValue *x) {
  FzType *e = fzOnnxElt(x);
  FzValue *two = iconst(im, e, 2);
  FzValue *neg = fzOnnxCompare(im, "lt", x, iconst(im, e, 0));
  FzValue *hi = bin(im, "graph.add",
                    bin(im, "graph.div", bias64(im, x), two),
                    iconst(im, e, (int64_t)1 << 62));
  return fzOnnxSelect(im, neg, hi, bin(im, "graph.div", x, two));
}

/* i32; f32 for MaxPool, whose lowerings pool floats only (0..65535 are
 * exact in f32, and the pool returns one of them); i64 for uint32 and
 * (biased) uint64. */
static FzType *widened_type(FzOnnxImporter *im, unsigned bits) {
  if (bits >= 32)
    return int_type(im, 64);
  return is_op(im->node->op_type, "MaxPool") ? fzF32TypeGet(ctx_of(im))
                                             : int_type(im, 32);
}

bool fzOnnxWidenUnsignedInputs(FzOnnxImporter *im, FzValue **in, size_t n,
                               bool *widened) {
  *widened = false;
  im->widenedUnsigned = false;
  im->widenedBits = 0;
  const char *op = im->node->op_type;
  if (!widens(op))
    return true;
  for (size_t i = 0; i < n; ++i) {
    unsigned bits = fzOnnxUnsignedBits(im, in[i]);
    if (!bits || (bits == 64 && decomposes64(op)))
      continue;
    FzType *wide = widened_type(im, bits);
    if (bits == 8) {
      if (!fzOnnxCastUnsigned(im, in[i], wide, false, &in[i]))
        return false;
    } else {
      in[i] = bits == 64 ? bias64(im, in[i])
              : fzTypeIsFloat(wide)
                  ? fzOnnxCast(im, zext(im, in[i], int_type(im, 32)), wide)
                  : zext(im, in[i], wide);
      if (!in[i])
        return false;
    }
    *widened = true;
    im->widenedBits = bits;
  }
  im->widenedUnsigned = *widened;
  return true;
}

/* Whether output i of op carries operand values (not indices). */
static bool carries_values(const char *op, size_t i) {
  if (is_op(op, "ArgMax") || is_op(op, "ArgMin"))
    return false;
  return i == 0 || !(is_op(op, "TopK") || is_op(op, "MaxPool"));
}

bool fzOnnxNarrowUnsignedOutputs(FzOnnxImporter *im, FzValue **out,
                                 size_t n) {
  unsigned bits = im->widenedBits;
  if (!bits)
    return true;
  FzType *wide = widened_type(im, bits);
  for (size_t i = 0; i < n; ++i) {
    if (!out[i] || fzOnnxElt(out[i]) != wide ||
        !carries_values(im->node->op_type, i))
      continue;
    if (bits == 8) {
      if (!fzOnnxCastUnsigned(im, out[i], i8_type(im), true, &out[i]))
        return false;
      continue;
    }
    out[i] = bits == 64 ? bias64(im, out[i])
                        : fzOnnxCast(im, out[i], int_type(im, bits));
    if (!out[i])
      return false;
    fzOnnxMarkUnsigned(im, out[i]);
  }
  return true;
}

/* a / b for the uint64 bits a and b (Hacker's Delight 9-3): a divisor of
 * 2^63 or more gives a >= b; otherwise q = ((a >> 1) / b) * 2, from
 * non-negative i64s, is the quotient or one less. A zero divisor is the
 * i64 division's error. */
static FzValue *udiv64(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  FzType *e = fzOnnxElt(a);
  FzValue *zero = iconst(im, e, 0), *one = iconst(im, e, 1);
  FzValue *big = fzOnnxCompare(im, "lt", b, zero);
  FzValue *qBig = fzOnnxSelect(im, ult64(im, a, b), zero, one);
  /* Where b is big the division below is not the result: divide by 1
   * there, so that it can never be INT64_MIN / -1. */
  FzValue *bs = fzOnnxSelect(im, big, one, b);
  FzValue *q = bin(im, "graph.mul", bin(im, "graph.div", lsr1_64(im, a), bs),
                   iconst(im, e, 2));
  FzValue *r = bin(im, "graph.sub", a, bin(im, "graph.mul", q, bs));
  q = fzOnnxSelect(im, ult64(im, r, bs), q, bin(im, "graph.add", q, one));
  return fzOnnxSelect(im, big, qBig, q);
}

bool fzOnnxImportUnsigned64(FzOnnxImporter *im, FzValue *const *in,
                            size_t nIn, FzValue **out, bool *done) {
  const char *op = im->node->op_type;
  *done = false;
  if (!(is_op(op, "Div") || is_op(op, "Mod")) || nIn != 2 ||
      fzOnnxUnsignedBits(im, in[0]) != 64 ||
      fzOnnxUnsignedBits(im, in[1]) != 64)
    return true;
  *done = true;
  FzValue *a = in[0], *b = in[1]; /* the ops broadcast */
  FzValue *q = udiv64(im, a, b);
  out[0] = is_op(op, "Div")
               ? q
               : bin(im, "graph.sub", a, bin(im, "graph.mul", q, b));
  if (!out[0])
    return false;
  fzOnnxMarkUnsigned(im, out[0]);
  return true;
}

/* x >> y and x << y for the uint64 bits x, y (BitShift): y clamped to
 * 64 (from 64 on every bit is shifted out), x * 2^y modulo 2^64 to the
 * left, (x >> 1) / 2^(y-1) to the right (non-negative i64s). */
bool fzOnnxBitShift64(FzOnnxImporter *im, FzValue *x, FzValue *y, bool left,
                      FzValue **out) {
  FzType *e = fzOnnxElt(x);
  FzValue *k64 = iconst(im, e, 64);
  FzValue *yc = fzOnnxSelect(im, ult64(im, y, k64), y, k64);
  int64_t t[65], n = 65;
  for (int s = 0; s <= 64; ++s)
    t[s] = left ? (s < 64 ? (int64_t)((uint64_t)1 << s) : 0)
                : (s >= 1 && s < 64 ? (int64_t)1 << (s - 1) : 1);
  FzValue *ops[2] = {fzOnnxConstI64(im, 1, &n, t), yc};
  FzValue *f = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                          fzIntegerAttrGet(ctx_of(im), int_type(im, 64), 0),
                          NULL);
  if (left) {
    *out = bin(im, "graph.mul", x, f);
  } else {
    FzValue *q = bin(im, "graph.div", lsr1_64(im, x), f);
    FzValue *zero = iconst(im, e, 0);
    q = fzOnnxSelect(im, fzOnnxCompare(im, "eq", yc, k64), zero, q);
    *out = fzOnnxSelect(im, fzOnnxCompare(im, "eq", yc, zero), x, q);
  }
  if (!*out)
    return false;
  fzOnnxMarkUnsigned(im, *out);
  return true;
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

/*===--- Cast from and to unsigned integers -------------------------------===*/

/* The uint64 bits x as the float type `to`, rounded once: x below 2^63
 * converts as i64; above, (x >> 1) with x's low bit ORed into its own
 * (round to odd, so that the doubling cannot round twice) converts and
 * doubles. */
static FzValue *u64_to_float(FzOnnxImporter *im, FzValue *x, FzType *to) {
  FzType *e = fzOnnxElt(x);
  FzValue *zero = iconst(im, e, 0), *two = iconst(im, e, 2);
  FzValue *h = lsr1_64(im, x);
  FzValue *low = bin(im, "graph.sub", x, bin(im, "graph.mul", h, two));
  FzValue *hOdd = bin(im, "graph.sub", h,
                      bin(im, "graph.mul", bin(im, "graph.div", h, two), two));
  FzValue *sticky = fzOnnxSelect(im, fzOnnxCompare(im, "eq", hOdd, zero),
                                 bin(im, "graph.add", h, low), h);
  FzValue *f = fzOnnxCast(im, sticky, to);
  FzValue *big = bin(im, "graph.add", f, f);
  return fzOnnxSelect(im, fzOnnxCompare(im, "lt", x, zero), big,
                      fzOnnxCast(im, x, to));
}

/* The float x as `bits`-bit unsigned bits in an integer of that width:
 * truncated toward zero and saturated (NaN gives 0; ONNX leaves values
 * out of range undefined), computed in f64, which holds every bound. */
static FzValue *float_to_unsigned(FzOnnxImporter *im, FzValue *x,
                                  unsigned bits) {
  FzContext *ctx = ctx_of(im);
  FzType *f64 = fzF64TypeGet(ctx), *i64 = int_type(im, 64);
  FzValue *xf = fzOnnxElt(x) == f64 ? x : fzOnnxCast(im, x, f64);
  FzValue *fz = fzOnnxConstScalar(im, f64, 0.0);
  xf = fzOnnxSelect(im, fzOnnxCompare(im, "ne", xf, xf), fz, xf);
  FzValue *t = fzOnnxSelect(im, fzOnnxCompare(im, "lt", xf, fz),
                            fzOnnxUnary(im, "graph.ceil", xf),
                            fzOnnxUnary(im, "graph.floor", xf));
  /* The largest double below 2^64 for uint64. */
  double hi = bits == 64 ? 18446744073709549568.0 : ldexp(1, (int)bits) - 1;
  t = fzOnnxEmit(im, "graph.clamp", 1, &t, NULL, "min",
                 fzFloatAttrGet(ctx, f64, 0.0), "max",
                 fzFloatAttrGet(ctx, f64, hi), NULL);
  if (bits < 64)
    return fzOnnxCast(im, fzOnnxCast(im, t, i64), int_type(im, bits));
  FzValue *two63 = fzOnnxConstScalar(im, f64, 9223372036854775808.0);
  FzValue *above = fzOnnxCompare(im, "ge", t, two63);
  FzValue *lowPart = fzOnnxCast(
      im, fzOnnxSelect(im, above, bin(im, "graph.sub", t, two63), t), i64);
  return fzOnnxSelect(im, above, bias64(im, lowPart), lowPart);
}

/* A new value with x's bits and type (an identity graph.cast, which
 * canonicalize drops): the signedness marks belong to values, and a Cast
 * between uint16 and int16 must not mark its input. */
static FzValue *retag(FzOnnxImporter *im, FzValue *x) {
  return x ? fzOnnxEmit(im, "graph.cast", 1, &x, fzValueGetType(x), NULL)
           : NULL;
}

/* Cast with an unsigned operand or to an unsigned type (ops_elementwise.c
 * calls it): uint8 -> float is a dequantize with scale 1, uint8 ->
 * integer a sub_zero_point (then a cast); uint16 and uint32 are
 * zero-extended (to i32 and i64) before a conversion to float, uint64
 * converts through u64_to_float; a wider integer target zero-extends,
 * a narrower or equal one keeps the low bits (as numpy's astype). float
 * -> uint8 truncates toward zero and saturates (out of range is undefined
 * in ONNX), and so does float -> uint16/32/64 (float_to_unsigned);
 * integer -> unsigned keeps the low bits or sign-extends, as numpy. */
bool fzOnnxCastUnsigned(FzOnnxImporter *im, FzValue *x, FzType *to,
                        bool toUnsigned, FzValue **out) {
  FzContext *ctx = ctx_of(im);
  FzType *f32 = fzF32TypeGet(ctx), *i32 = fzIntegerTypeGet(ctx, 32);
  unsigned ub = fzOnnxUnsignedBits(im, x);
  bool u = ub != 0;
  FzType *xe = fzOnnxElt(x);
  FzValue *z8 = ub == 8 ? fzOnnxConstScalar(im, i8_type(im), 0.0) : NULL;
  unsigned toBits = fzTypeIsInteger(to) ? fzTypeGetBitWidth(to) : 0;
  if (xe == to) {
    *out = u == toUnsigned ? x : retag(im, x);
  } else if (ub == 8 && toBits != 1) {
    if (fzTypeIsFloat(to)) {
      FzValue *ops[3] = {x, fzOnnxConstScalar(im, f32, 1.0), z8};
      FzValue *f = emit_q(im, "graph.dequantize", 3, ops, true);
      *out = to == f32 ? f : fzOnnxCast(im, f, to);
    } else {
      FzValue *ops[2] = {x, z8};
      FzValue *w = emit_q(im, "graph.sub_zero_point", 2, ops, true);
      *out = to == i32 ? w : fzOnnxCast(im, w, to);
    }
  } else if (u && fzTypeIsFloat(to)) {
    *out = ub == 64 ? u64_to_float(im, x, to)
                    : fzOnnxCast(im, zext(im, x, int_type(im, ub == 32 ? 64
                                                                       : 32)),
                                 to);
  } else if (u) {
    *out = toBits > ub ? zext(im, x, to) : fzOnnxCast(im, x, to);
  } else if (fzTypeIsFloat(xe)) { /* float -> unsigned */
    if (toBits == 8) {
      FzValue *xf = xe == f32 ? x : fzOnnxCast(im, x, f32);
      FzValue *neg =
          fzOnnxCompare(im, "lt", xf, fzOnnxConstScalar(im, f32, 0));
      FzValue *t = fzOnnxSelect(im, neg, fzOnnxUnary(im, "graph.ceil", xf),
                                fzOnnxUnary(im, "graph.floor", xf));
      FzValue *ops[3] = {t, fzOnnxConstScalar(im, f32, 1.0),
                         fzOnnxConstScalar(im, i8_type(im), 0.0)};
      *out = emit_q(im, "graph.quantize", 3, ops, true);
    } else {
      *out = float_to_unsigned(im, x, toBits);
    }
  } else { /* integers: the low bits (graph.cast between integers wraps) */
    *out = fzOnnxCast(im, x, to);
  }
  if (*out && toUnsigned)
    fzOnnxMarkUnsigned(im, *out);
  return *out != NULL;
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
  bool u;
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
  bool u;
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
