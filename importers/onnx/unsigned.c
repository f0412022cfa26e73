/* importers/onnx/unsigned.c - the importer's unsigned integers.
 *
 * fuse's integers are signless, and the interpreter and the lowerings
 * read them as signed: an ONNX UINT8, UINT16, UINT32 or UINT64 tensor is
 * imported as a tensor of i8, i16, i32 or i64 holding the same bits, and
 * the importer remembers which values are unsigned (im->unsignedValues).
 * Every node that reads a marked value either means the same on the bits
 * (data movement, whose output keeps the mark; Add, Sub, Mul modulo 2^n;
 * Equal), or gets its operands in a form where signed arithmetic is exact
 * (docs/onnx.md, Element types):
 *  - uint8 and uint16 zero-extended to i32 (f32 for MaxPool), uint32 to
 *    i64, for the ops that order, compare or divide; their value results
 *    narrowed back (fzOnnxWidenUnsignedInputs, ...NarrowUnsignedOutputs);
 *  - uint64, which has no wider type, biased by 2^63 for the ops that
 *    order (the unsigned order is then i64's signed order), its Div and
 *    Mod decomposed (fzOnnxImportUnsigned64), its BitShift too;
 *  - Cast and CastLike from and to unsigned types converting exactly
 *    (fzOnnxCastUnsigned); the quantization ops (ops_quant.c) read the
 *    uint8 mark as their `unsigned` attribute.
 * Any other op refuses a marked operand with a located error.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

#define DT(x) ONNX__TENSOR_PROTO__DATA_TYPE__##x

/*===--- Marks --------------------------------------------------------===*/

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
