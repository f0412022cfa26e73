/* importers/onnx/ops_math.c - ONNX math ops the graph dialect has no op
 * for, decomposed: the inverse trigonometric functions Atan, Asin, Acos,
 * and BitShift of uint8 operands.
 *
 * atan(x) is Cephes' atanf: with a = |x|, the argument is reduced to
 * [-tan(pi/8), tan(pi/8)] (a > tan(3pi/8): pi/2 + atan(-1/a); a >
 * tan(pi/8): pi/4 + atan((a-1)/(a+1))), and a degree-9 odd polynomial
 * gives the rest; the sign is restored (about 2 ulp in f32; in f64 the
 * same float-precision polynomial, about 1e-7 relative). Then
 * asin(x) = atan(x / sqrt((1-x)(1+x))) (x = +-1: +-pi/2 through
 * atan(+-inf)) and acos(x) = 2 atan(sqrt((1-x)/(1+x))) (accurate near 1,
 * where pi/2 - asin(x) would cancel; x = -1 gives pi). NaN and inputs
 * outside [-1, 1] give NaN, as sqrt of a negative number does.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzValue *k(FzOnnxImporter *im, FzValue *like, double v) {
  return like ? fzOnnxConstScalar(im, fzOnnxElt(like), v) : NULL;
}

static FzValue *bin(FzOnnxImporter *im, const char *op, FzValue *a,
                    FzValue *b) {
  return fzOnnxBinary(im, op, a, b);
}

static FzValue *atan_of(FzOnnxImporter *im, FzValue *x) {
  const double pi = 3.14159265358979323846;
  FzValue *a = fzOnnxUnary(im, "graph.abs", x);
  FzValue *big = fzOnnxCompare(im, "gt", a, k(im, a, 2.414213562373095));
  FzValue *mid = fzOnnxCompare(im, "gt", a, k(im, a, 0.4142135623730950));
  FzValue *one = k(im, a, 1);
  FzValue *inv = bin(im, "graph.div", k(im, a, -1), a);
  FzValue *shifted = bin(im, "graph.div", bin(im, "graph.sub", a, one),
                         bin(im, "graph.add", a, one));
  FzValue *r = fzOnnxSelect(im, big, inv, fzOnnxSelect(im, mid, shifted, a));
  FzValue *y0 = fzOnnxSelect(im, big, k(im, a, pi / 2),
                             fzOnnxSelect(im, mid, k(im, a, pi / 4),
                                          k(im, a, 0)));
  FzValue *z = bin(im, "graph.mul", r, r);
  FzValue *p = k(im, a, 8.05374449538e-2);
  static const double c[3] = {-1.38776856032e-1, 1.99777106478e-1,
                              -3.33329491539e-1};
  for (int i = 0; i < 3; ++i)
    p = bin(im, "graph.add", bin(im, "graph.mul", p, z), k(im, a, c[i]));
  FzValue *y = bin(im, "graph.add",
                   bin(im, "graph.mul", bin(im, "graph.mul", p, z), r), r);
  y = bin(im, "graph.add", y, y0);
  FzValue *neg = fzOnnxCompare(im, "lt", x, k(im, x, 0));
  return fzOnnxSelect(im, neg, fzOnnxUnary(im, "graph.neg", y), y);
}

static bool h_inverse_trig(FzOnnxImporter *im, FzValue *const *in,
                           size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  if (!fzTypeIsFloat(fzOnnxElt(x)))
    return fzOnnxError(im, "the input must be a float tensor");
  const char *op = im->node->op_type;
  FzValue *one = k(im, x, 1);
  if (!strcmp(op, "Atan")) {
    out[0] = atan_of(im, x);
  } else if (!strcmp(op, "Asin")) {
    FzValue *d = fzOnnxUnary(
        im, "graph.sqrt",
        bin(im, "graph.mul", bin(im, "graph.sub", one, x),
            bin(im, "graph.add", one, x)));
    out[0] = atan_of(im, bin(im, "graph.div", x, d));
  } else {
    FzValue *q = bin(im, "graph.div", bin(im, "graph.sub", one, x),
                     bin(im, "graph.add", one, x));
    out[0] = bin(im, "graph.mul", k(im, x, 2),
                 atan_of(im, fzOnnxUnary(im, "graph.sqrt", q)));
  }
  return out[0] != NULL;
}

/* BitShift of uint8 operands, which arrive widened to i32 (ops_quant.c)
 * and leave narrowed back (the low 8 bits): x << y is x * t[y] with
 * t[y] = 2^y below 8 and 0 from 8 (the bits shifted past the byte), and
 * x >> y is x / t[y] with 256 from 8, both through a constant table of
 * the 256 amounts. The other unsigned types are refused as dtypes. */
static bool h_bitshift(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  const char *dir;
  if (!fzOnnxAttrString(im, "direction", "", &dir))
    return false;
  bool left = !strcmp(dir, "LEFT");
  if (!left && strcmp(dir, "RIGHT"))
    return fzOnnxErrorAttrValue(im, "direction", dir);
  if (!im->widenedUnsigned)
    return fzOnnxError(im, "unsupported operands: BitShift takes unsigned "
                           "integers, and UINT8 is the only one imported");
  int64_t t[256], n = 256;
  for (int64_t y = 0; y < n; ++y)
    t[y] = y < 8 ? (int64_t)1 << y : left ? 0 : 256;
  FzType *i32 = fzIntegerTypeGet(im->ctx, 32);
  FzValue *table = fzOnnxCast(im, fzOnnxConstI64(im, 1, &n, t), i32);
  FzValue *ops[2] = {table, in[1]};
  FzValue *f = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                          fzIntegerAttrGet(im->ctx,
                                           fzIntegerTypeGet(im->ctx, 64), 0),
                          NULL);
  out[0] = bin(im, left ? "graph.mul" : "graph.div", in[0], f);
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxMathOps[] = {
    {"BitShift", h_bitshift, NULL, "direction", 2, 2, 1},
    {"Acos", h_inverse_trig, NULL, "", 1, 1, 1},
    {"Asin", h_inverse_trig, NULL, "", 1, 1, 1},
    {"Atan", h_inverse_trig, NULL, "", 1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
