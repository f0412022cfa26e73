/* importers/onnx/ops_math.c - ONNX math ops the graph dialect has no op
 * for, decomposed: the inverse trigonometric functions Atan, Asin, Acos,
 * BitShift of unsigned operands, and Det.
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

/* BitShift of unsigned operands. uint8, uint16 and uint32 arrive
 * widened (zero-extended to i32, i32 and i64: unsigned.c) and leave
 * narrowed back (the low n bits): with the amount clamped to n (from n on
 * every bit is shifted out), x << y is x * t[y] with t[y] = 2^y below n
 * and 0 at n, and x >> y is x / t[y] with 2^n at n, through a constant
 * table of the n + 1 amounts. uint64 is decomposed (fzOnnxBitShift64). */
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
  if (fzOnnxUnsignedBits(im, in[0]) == 64 &&
      fzOnnxUnsignedBits(im, in[1]) == 64)
    return fzOnnxBitShift64(im, in[0], in[1], left, &out[0]);
  if (!im->widenedUnsigned || fzOnnxElt(in[0]) != fzOnnxElt(in[1]))
    return fzOnnxError(im, "unsupported operands: BitShift takes two "
                           "unsigned integers of one type");
  int64_t bits = im->widenedBits, t[65], n = bits + 1;
  for (int64_t y = 0; y <= bits; ++y)
    t[y] = y < bits ? (int64_t)1 << y : left ? 0 : (int64_t)1 << bits;
  FzType *wide = fzOnnxElt(in[0]);
  FzValue *table = fzOnnxCast(im, fzOnnxConstI64(im, 1, &n, t), wide);
  FzValue *amount = bin(im, "graph.min", in[1], k(im, in[1], (double)bits));
  FzValue *ops[2] = {table, amount};
  FzValue *f = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                          fzIntegerAttrGet(im->ctx,
                                           fzIntegerTypeGet(im->ctx, 64), 0),
                          NULL);
  out[0] = bin(im, left ? "graph.mul" : "graph.div", in[0], f);
  return out[0] != NULL;
}

/* The largest matrix Det eliminates (each column unrolls ~20 ops). */
#define DET_MAX_ORDER 64

/* Det of [..., M, M] by Gaussian elimination with partial pivoting,
 * unrolled over the M columns (as LAPACK's LU that numpy.linalg.det
 * uses): in column k the row of largest |a| at or below k (the first
 * among equals) is swapped with row k (a graph.gather of the matrices'
 * rows at positions computed at run time), the pivot joins the product
 * and flips the sign when a swap happened, and the rows below lose their
 * multiple of row k. A zero pivot makes the product 0 (its rows are
 * divided by 1 instead, so no NaN appears). */
static bool h_det(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (r < 2 || !fzTypeIsFloat(fzOnnxElt(x)))
    return fzOnnxError(im, "the input must be a float tensor of rank >= 2");
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t m = fzOnnxDim(x, r - 1), b = 1;
  if (fzOnnxDim(x, r - 2) != m)
    return fzOnnxError(im, "the input's last two dims must be equal");
  if (m > DET_MAX_ORDER)
    return fzOnnxError(im, "unsupported Det of %lld x %lld matrices (at "
                           "most %d: the elimination is unrolled)",
                       (long long)m, (long long)m, DET_MAX_ORDER);
  for (size_t i = 0; i + 2 < r; ++i)
    b *= fzOnnxDim(x, i); /* x is a tensor: its count is in range */
  FzType *elt = fzOnnxElt(x), *i64 = fzIntegerTypeGet(im->ctx, 64);
  if (m == 0 || b == 0) {
    out[0] = fzOnnxConstSplat(im, elt, r - 2, fzOnnxShape(x), 1.0);
    return out[0] != NULL;
  }
  int64_t s3[3] = {b, m, m}, s2[2] = {b * m, m}, bm[2] = {b, m};
  int64_t b1[2] = {b, 1}, bm1[3] = {b, m, 1};
  FzValue *a = fzOnnxReshape(im, x, 3, s3);
  FzValue *row = fzOnnxIota(im, 2, 1, m); /* [1, M] */
  FzValue *base = bin(im, "graph.mul", fzOnnxIota(im, 2, 0, b),
                      fzOnnxConstScalar(im, i64, (double)m)); /* [B, 1] */
  FzValue *det = NULL;
  FzValue *zero = fzOnnxConstScalar(im, elt, 0), *one = k(im, x, 1);
  for (int64_t c = 0; c < m && a; ++c) {
    FzValue *kc = fzOnnxConstScalar(im, i64, (double)c);
    int64_t st[3] = {0, 0, c}, lim[3] = {b, m, c + 1}, step[3] = {1, 1, 1};
    FzValue *col =
        fzOnnxReshape(im, fzOnnxSlice(im, a, st, lim, step), 2, bm);
    /* The pivot row: the first largest |a| at or below row c. */
    FzValue *mag = fzOnnxSelect(im, fzOnnxCompare(im, "lt", row, kc),
                                fzOnnxConstScalar(im, elt, -1),
                                fzOnnxUnary(im, "graph.abs", col));
    int64_t ax = 1;
    FzValue *top = fzOnnxReduce(im, "graph.reduce_max", mag, 1, &ax, true);
    FzValue *p = fzOnnxReduce(
        im, "graph.reduce_min",
        fzOnnxSelect(im, fzOnnxCompare(im, "eq", mag, top), row,
                     fzOnnxConstScalar(im, i64, (double)m)),
        1, &ax, true); /* [B, 1] */
    FzValue *src = fzOnnxSelect(
        im, fzOnnxCompare(im, "eq", row, kc), p,
        fzOnnxSelect(im, fzOnnxCompare(im, "eq", row, p), kc, row));
    FzValue *gops[2] = {fzOnnxReshape(im, a, 2, s2),
                        bin(im, "graph.add", src, base)};
    a = fzOnnxEmit(im, "graph.gather", 2, gops, NULL, "axis",
                   fzIntegerAttrGet(im->ctx, i64, 0), NULL);
    int64_t pst[3] = {0, c, c}, plim[3] = {b, c + 1, c + 1};
    FzValue *pivot = fzOnnxReshape(
        im, fzOnnxSlice(im, a, pst, plim, step), 2, b1);
    FzValue *sign = fzOnnxSelect(im, fzOnnxCompare(im, "ne", p, kc),
                                 k(im, x, -1), one);
    FzValue *term = bin(im, "graph.mul", pivot, sign);
    det = det ? bin(im, "graph.mul", det, term) : term;
    if (c + 1 == m || !a)
      break;
    FzValue *safe = fzOnnxSelect(im, fzOnnxCompare(im, "eq", pivot, zero),
                                 one, pivot);
    FzValue *col2 =
        fzOnnxReshape(im, fzOnnxSlice(im, a, st, lim, step), 2, bm);
    FzValue *f = fzOnnxSelect(im, fzOnnxCompare(im, "gt", row, kc),
                              bin(im, "graph.div", col2, safe), zero);
    int64_t rst[3] = {0, c, 0}, rlim[3] = {b, c + 1, m};
    FzValue *pivotRow = fzOnnxSlice(im, a, rst, rlim, step);
    a = bin(im, "graph.sub", a,
            bin(im, "graph.mul", fzOnnxReshape(im, f, 3, bm1), pivotRow));
  }
  out[0] = det ? fzOnnxReshape(im, det, r - 2, fzOnnxShape(x)) : NULL;
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxMathOps[] = {
    {"Det", h_det, NULL, "", 1, 1, 1},
    {"BitShift", h_bitshift, NULL, "direction", 2, 2, 1},
    {"Acos", h_inverse_trig, NULL, "", 1, 1, 1},
    {"Asin", h_inverse_trig, NULL, "", 1, 1, 1},
    {"Atan", h_inverse_trig, NULL, "", 1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
