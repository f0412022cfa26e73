/* lowering/llvm/math.c - exp, log, log1p, tanh, erf and pow as inline,
 * vectorizable LLVM IR (straight-line arithmetic, integer bit tricks and
 * selects: no call), or as C library calls with options.exactMath.
 *
 * A libm call in a loop stops the vectorizer and costs ~10x on the
 * memory-bound kernels fuse generates (PERFORMANCE.md), so by default
 * these are inlined. The algorithms (errors measured in docs/codegen.md):
 *   exp    k = rint(x log2 e) (a shifter constant), r = x - k ln2
 *          (two-constant split),
 *          e^r by a polynomial (f32: degree 6 minimax; f64: Taylor, 13),
 *          times 2^k applied in two halves so that results down to the
 *          subnormals and up to overflow come out right;
 *   expm1  the same reduction, the polynomial of e^r - 1, then
 *          2^k (e^r - 1) + (2^k - 1): accurate near 0 (used by tanh);
 *   tanh   e/(e + 2) with e = expm1(2|x|), sign restored;
 *   log    x = 2^e m with m in [sqrt(1/2), sqrt(2)), s = (m-1)/(m+1),
 *          log m = 2s + s R(s^2) (the atanh series), plus e ln2;
 *   log1p  log(u) * x / (u - 1) with u = 1 + x (exact for the rounding
 *          of u), x itself when u == 1;
 *   erf    (f32) x P(x^2) below 0.875, 1 - exp(-x^2) Q(1/(1+|x|/2))
 *          above, coefficients fitted by bench/cpu/fit_erf.py; f64 erf
 *          calls the C library; `1 + erf(x)` (gelu) is computed as
 *          erfc(-x) in one branch for every x: exp(-x^2) Q1(1/(1 +
 *          0.42|x|)), accurate in relative terms, with its own
 *          bounded exp (erfc_one_branch32);
 *   pow    exp(y log|x|) with the C99 special cases (x <= 0, y == 0,
 *          x == 1, odd integer y).
 * On the GPU (E->libdevice, set by lowering/nvptx when the CUDA toolkit's
 * libdevice is found) every function calls libdevice's __nv_* instead,
 * and 1 + erf(x) is 1 + __nv_erff(x).
 * NaN inputs give NaN (pow(NaN, 0) = 1, as in C). Internal arithmetic
 * carries `contract` only, never the caller's fast-math flags, so that
 * the range reductions keep their precision.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

typedef struct Math {
  FzLLEmitter *E;
  LLVMTypeRef ty;  /* float, double or a vector of them */
  LLVMTypeRef ity; /* i32 / i64 with the same lanes */
  bool f64;
} Math;

static void math_init(Math *m, FzLLEmitter *E, LLVMTypeRef ty) {
  m->E = E;
  m->ty = ty;
  LLVMTypeRef s = LLVMGetTypeKind(ty) == LLVMVectorTypeKind
                      ? LLVMGetElementType(ty)
                      : ty;
  m->f64 = s == E->tF64;
  LLVMTypeRef is = m->f64 ? E->tI64 : E->tI32;
  m->ity = LLVMGetTypeKind(ty) == LLVMVectorTypeKind
               ? LLVMVectorType(is, LLVMGetVectorSize(ty))
               : is;
}

static LLVMValueRef C(Math *m, double v) { return fzLLConstF(m->ty, v); }
static LLVMValueRef CI(Math *m, int64_t v) { return fzLLConstI(m->ity, v); }

static LLVMValueRef fl(Math *m, LLVMValueRef v) {
  (void)m;
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
  return v;
}
static LLVMValueRef add(Math *m, LLVMValueRef a, LLVMValueRef b) {
  return fl(m, LLVMBuildFAdd(m->E->b, a, b, ""));
}
static LLVMValueRef sub(Math *m, LLVMValueRef a, LLVMValueRef b) {
  return fl(m, LLVMBuildFSub(m->E->b, a, b, ""));
}
static LLVMValueRef mul(Math *m, LLVMValueRef a, LLVMValueRef b) {
  return fl(m, LLVMBuildFMul(m->E->b, a, b, ""));
}
static LLVMValueRef dvd(Math *m, LLVMValueRef a, LLVMValueRef b) {
  return fl(m, LLVMBuildFDiv(m->E->b, a, b, ""));
}
static LLVMValueRef intr1(Math *m, const char *name, LLVMValueRef a) {
  return fzLLCallIntrinsic(m->E, name, &m->ty, 1, &a, 1);
}
static LLVMValueRef intr2(Math *m, const char *name, LLVMValueRef a,
                          LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return fzLLCallIntrinsic(m->E, name, &m->ty, 1, args, 2);
}
static LLVMValueRef fcmp(Math *m, LLVMRealPredicate p, LLVMValueRef a,
                         LLVMValueRef b) {
  return LLVMBuildFCmp(m->E->b, p, a, b, "");
}
static LLVMValueRef sel(Math *m, LLVMValueRef c, LLVMValueRef a,
                        LLVMValueRef b) {
  return LLVMBuildSelect(m->E->b, c, a, b, "");
}

/* c[0] + t (c[1] + t (c[2] + ...)). */
static LLVMValueRef horner(Math *m, LLVMValueRef t, const double *c,
                           size_t n) {
  LLVMValueRef r = C(m, c[n - 1]);
  for (size_t k = n - 1; k-- > 0;)
    r = add(m, mul(m, r, t), C(m, c[k]));
  return r;
}

/* ln 2 as hi + lo, hi with few enough bits that k * hi is exact. */
static void ln2_split(bool f64, double *hi, double *lo) {
  const double ln2 = 0.6931471805599453094, ln2Tail = 2.3190468138462996e-17;
  int bits = f64 ? 40 : 16;
  *hi = floor(ln2 * ldexp(1.0, bits)) / ldexp(1.0, bits);
  *lo = (ln2 - *hi) + ln2Tail;
}

/* 2^k for an integer-valued float k within the exponent range. */
static LLVMValueRef pow2i(Math *m, LLVMValueRef ki) {
  int mant = m->f64 ? 52 : 23, bias = m->f64 ? 1023 : 127;
  LLVMValueRef e = LLVMBuildAdd(m->E->b, ki, CI(m, bias), "");
  e = LLVMBuildShl(m->E->b, e, CI(m, mant), "");
  return LLVMBuildBitCast(m->E->b, e, m->ty, "");
}

/* k = rint(x log2 e) and r = x - k ln2. */
static void reduce_ln2(Math *m, LLVMValueRef x, LLVMValueRef *k,
                       LLVMValueRef *r) {
  double hi, lo;
  ln2_split(m->f64, &hi, &lo);
  *k = intr1(m, "llvm.rint", mul(m, x, C(m, 1.4426950408889634)));
  LLVMValueRef t = sub(m, x, mul(m, *k, C(m, hi)));
  *r = sub(m, t, mul(m, *k, C(m, lo)));
}

static const double kInvFact[] = {
    1.0,
    1.0,
    1.0 / 2,
    1.0 / 6,
    1.0 / 24,
    1.0 / 120,
    1.0 / 720,
    1.0 / 5040,
    1.0 / 40320,
    1.0 / 362880,
    1.0 / 3628800,
    1.0 / 39916800,
    1.0 / 479001600,
    1.0 / 6227020800.0,
    1.0 / 87178291200.0,
    1.0 / 1307674368000.0,
};

/* e^r on [-ln2/2, ln2/2] in f32: 1 + r E6(r), degree 6 minimax in
 * relative terms (bench/cpu/fit_erf.py: 2.0e-9, against 1.2e-9 for the
 * degree-7 Taylor polynomial it replaces, one fma fewer). */
static const double kExpF32[] = {1.0,
                                 1.000000032e+00,
                                 4.999999421e-01,
                                 1.666643121e-01,
                                 4.166800235e-02,
                                 8.374160073e-03,
                                 1.384364824e-03};

static LLVMValueRef is_nan(Math *m, LLVMValueRef x) {
  return fcmp(m, LLVMRealUNO, x, x);
}

/* x clamped to [lo, hi] by selects that keep a NaN (x86: one min and
 * one max, NaN flowing through, so no NaN select is needed after). */
static LLVMValueRef clamp_keep_nan(Math *m, LLVMValueRef x, double lo,
                                   double hi) {
  x = sel(m, fcmp(m, LLVMRealOLT, C(m, hi), x), C(m, hi), x);
  return sel(m, fcmp(m, LLVMRealOLT, x, C(m, lo)), C(m, lo), x);
}

/* k = rint(x log2 e) by a shifter constant (x log2 e + 1.5 2^mant
 * rounds to an integer, k's bits are its float bits less the shifter's:
 * no fptosi, whose NaN is poison), r = x - k ln2, e^r by a polynomial,
 * 2^k applied in two halves. A NaN x flows through (the clamps keep it,
 * r and so the polynomial are NaN). */
static LLVMValueRef emit_exp(Math *m, LLVMValueRef x) {
  FzLLEmitter *E = m->E;
  LLVMValueRef xc = clamp_keep_nan(m, x, m->f64 ? -1080 : -110,
                                   m->f64 ? 1025 : 89);
  double shifter = m->f64 ? 6755399441055744.0 : 12582912.0; /* 1.5 2^mant */
  LLVMValueRef kf =
      add(m, mul(m, xc, C(m, 1.4426950408889634)), C(m, shifter));
  LLVMValueRef k = sub(m, kf, C(m, shifter));
  double hi, lo;
  ln2_split(m->f64, &hi, &lo);
  LLVMValueRef r = sub(m, xc, mul(m, k, C(m, hi)));
  r = sub(m, r, mul(m, k, C(m, lo)));
  LLVMValueRef p =
      m->f64 ? horner(m, r, kInvFact, 14) : horner(m, r, kExpF32, 7);
  LLVMValueRef ki = LLVMBuildSub(
      E->b, LLVMBuildBitCast(E->b, kf, m->ity, ""),
      LLVMBuildBitCast(E->b, C(m, shifter), m->ity, ""), "");
  LLVMValueRef k1 = LLVMBuildAShr(E->b, ki, CI(m, 1), "");
  LLVMValueRef k2 = LLVMBuildSub(E->b, ki, k1, "");
  return mul(m, mul(m, p, pow2i(m, k1)), pow2i(m, k2));
}

/* e^x - 1 for x in [0, 40] (no NaN handling: callers do it). */
static LLVMValueRef emit_expm1_pos(Math *m, LLVMValueRef x) {
  LLVMValueRef k, r;
  reduce_ln2(m, x, &k, &r);
  /* q = r + r^2 (1/2 + r/6 + ...) = e^r - 1 */
  LLVMValueRef q = horner(m, r, kInvFact + 2, m->f64 ? 13 : 7);
  q = add(m, r, mul(m, mul(m, r, r), q));
  LLVMValueRef s = pow2i(m, LLVMBuildFPToSI(m->E->b, k, m->ity, ""));
  return add(m, mul(m, s, q), sub(m, s, C(m, 1.0)));
}

static LLVMValueRef emit_tanh(Math *m, LLVMValueRef x) {
  LLVMValueRef a = intr1(m, "llvm.fabs", x);
  LLVMValueRef a2 =
      intr2(m, "llvm.minnum", add(m, a, a), C(m, m->f64 ? 40 : 20));
  LLVMValueRef e = emit_expm1_pos(m, a2);
  LLVMValueRef t = dvd(m, e, add(m, e, C(m, 2.0)));
  t = intr2(m, "llvm.copysign", t, x);
  return sel(m, is_nan(m, x), x, t);
}

static LLVMValueRef emit_log(Math *m, LLVMValueRef x) {
  FzLLEmitter *E = m->E;
  int mant = m->f64 ? 52 : 23, bias = m->f64 ? 1023 : 127;
  double tiny = ldexp(1.0, m->f64 ? -1022 : -126);
  /* Subnormals: scale into the normal range first. */
  LLVMValueRef sub_ = fcmp(m, LLVMRealOLT, x, C(m, tiny));
  LLVMValueRef xs = sel(m, sub_, mul(m, x, C(m, ldexp(1.0, mant))), x);
  LLVMValueRef adj = sel(m, sub_, CI(m, -mant), CI(m, 0));
  LLVMValueRef bits = LLVMBuildBitCast(E->b, xs, m->ity, "");
  LLVMValueRef e = LLVMBuildLShr(E->b, bits, CI(m, mant), "");
  e = LLVMBuildAnd(E->b, e, CI(m, m->f64 ? 0x7ff : 0xff), "");
  e = LLVMBuildAdd(E->b, e, LLVMBuildSub(E->b, adj, CI(m, bias), ""), "");
  int64_t mantMask = (int64_t)((((uint64_t)1) << mant) - 1);
  int64_t one = (int64_t)bias << mant;
  LLVMValueRef mb = LLVMBuildOr(
      E->b, LLVMBuildAnd(E->b, bits, CI(m, mantMask), ""), CI(m, one), "");
  LLVMValueRef mv = LLVMBuildBitCast(E->b, mb, m->ty, "");
  LLVMValueRef big = fcmp(m, LLVMRealOGT, mv, C(m, 1.4142135623730951));
  mv = sel(m, big, mul(m, mv, C(m, 0.5)), mv);
  e = sel(m, big, LLVMBuildAdd(E->b, e, CI(m, 1), ""), e);
  LLVMValueRef f = sub(m, mv, C(m, 1.0));
  LLVMValueRef s = dvd(m, f, add(m, f, C(m, 2.0)));
  LLVMValueRef z = mul(m, s, s);
  static const double kAtanh[] = {2.0 / 3,  2.0 / 5,  2.0 / 7,  2.0 / 9,
                                  2.0 / 11, 2.0 / 13, 2.0 / 15, 2.0 / 17,
                                  2.0 / 19, 2.0 / 21, 2.0 / 23};
  LLVMValueRef R = mul(m, z, horner(m, z, kAtanh, m->f64 ? 11 : 5));
  LLVMValueRef logm = add(m, add(m, s, s), mul(m, s, R));
  double hi, lo;
  ln2_split(m->f64, &hi, &lo);
  LLVMValueRef ef = LLVMBuildSIToFP(E->b, e, m->ty, "");
  LLVMValueRef res =
      add(m, mul(m, ef, C(m, hi)), add(m, logm, mul(m, ef, C(m, lo))));
  /* log(+inf) = +inf, log(0) = -inf, log(x < 0) = log(NaN) = NaN. */
  res = sel(m, fcmp(m, LLVMRealOEQ, x, C(m, INFINITY)), x, res);
  res = sel(m, fcmp(m, LLVMRealOEQ, x, C(m, 0.0)), C(m, -INFINITY), res);
  return sel(m, fcmp(m, LLVMRealULT, x, C(m, 0.0)), C(m, NAN), res);
}

static LLVMValueRef emit_log1p(Math *m, LLVMValueRef x) {
  LLVMValueRef u = add(m, x, C(m, 1.0));
  LLVMValueRef d = sub(m, u, C(m, 1.0));
  LLVMValueRef r = mul(m, emit_log(m, u), dvd(m, x, d));
  r = sel(m, fcmp(m, LLVMRealOEQ, d, C(m, 0.0)), x, r);
  return sel(m, fcmp(m, LLVMRealOEQ, x, C(m, INFINITY)), x, r);
}

/* f32 erf pieces (coefficients from bench/cpu/fit_erf.py): x P(x^2)
 * below 0.875, and erfc(a) = exp(-a^2) Q(1/(1 + a/2) - 0.43) for a in
 * [0.875, 10] (a clamped to 10, beyond which erfc is 0 in f32). a^2 is
 * split into hi + lo (lo exact, by fma) so that exp(-a^2) keeps full
 * relative accuracy: erfc's tail is what 1 + erf(x) is for x < 0. */
static LLVMValueRef erf_small32(Math *m, LLVMValueRef x) {
  static const double P[] = {
      1.128379167e+00, -3.761263885e-01, 1.128379000e-01, -2.686598282e-02,
      5.222961460e-03, -8.518663488e-04, 1.157324887e-04, -1.074044867e-05};
  return mul(m, x, horner(m, mul(m, x, x), P, 8));
}

static LLVMValueRef erfc_tail32(Math *m, LLVMValueRef a, LLVMValueRef aLo) {
  static const double Q[] = {
      2.001112439e-01, 7.282228128e-01,  8.364489321e-01, 6.046082651e-01,
      1.326334299e-01, -1.886640043e-01, -1.112659262e-01, 1.018036831e-01,
      6.416122688e-02, -7.292982084e-02};
  LLVMValueRef ac = intr2(m, "llvm.minnum", a, C(m, 10.0));
  LLVMValueRef t =
      dvd(m, C(m, 1.0), add(m, C(m, 1.0), mul(m, ac, C(m, 0.5))));
  t = sub(m, t, C(m, 0.43));
  LLVMValueRef hi = LLVMBuildFMul(m->E->b, ac, ac, "");
  LLVMValueRef fa[3] = {ac, ac, LLVMBuildFNeg(m->E->b, hi, "")};
  LLVMValueRef lo = fzLLCallIntrinsic(m->E, "llvm.fma", &m->ty, 1, fa, 3);
  if (aLo) /* (a + aLo)^2 = hi + lo + 2 a aLo */
    lo = add(m, lo, mul(m, add(m, ac, ac), aLo));
  LLVMValueRef e = emit_exp(m, LLVMBuildFNeg(m->E->b, hi, ""));
  e = mul(m, e, sub(m, C(m, 1.0), lo));
  return mul(m, e, horner(m, t, Q, 10));
}

static LLVMValueRef emit_erf32(Math *m, LLVMValueRef x) {
  LLVMValueRef a = intr1(m, "llvm.fabs", x);
  LLVMValueRef small = erf_small32(m, x);
  LLVMValueRef large = sub(m, C(m, 1.0), erfc_tail32(m, a, NULL));
  large = intr2(m, "llvm.copysign", large, x);
  LLVMValueRef r =
      sel(m, fcmp(m, LLVMRealOLT, a, C(m, 0.875)), small, large);
  return sel(m, is_nan(m, x), x, r);
}

/* erfc(s a) for a >= 0 in one branch, s^2 = sq in {1, 1/2} (gelu's
 * 1 + erf(v / sqrt 2) passes a = |v|, sq = 1/2), coefficients from
 * bench/cpu/fit_erf.py:
 *   erfc(b) = e^(-b^2) Q1(1/(1 + 0.42 b)), b = s a clamped to 10.2,
 * Q1 of degree 8, minimax in relative terms on [0, 9.4] (where gelu is
 * still a normal f32), a polynomial in t = 1/(1 + 0.42 b) itself: t is
 * small where Q1 is, so there is no cancellation (a shifted t - 0.59
 * measured twice the error in gelu's tail). e^(-b^2) is evaluated here
 * rather than by emit_exp, as its argument is bounded:
 * - b^2 = sq (x2 + lo2) exactly, x2 = a^2 rounded and lo2 = fma(a, a,
 *   -x2): no rounding of s a enters the exponential (erfc's tail would
 *   magnify it by 2 b^2);
 * - k = rint(-b^2 log2 e) in [-150, 0] comes from a shifter constant:
 *   x2 * -sq log2 e + (1.5 2^23 + 127 + 32) rounds to an integer whose
 *   float bits end in the biased exponent of 2^(k + 32), so 2^(k + 32)
 *   is one shift and always a normal f32. Q1's coefficients carry the
 *   2^-32, so e^r 2^(k+32) (Q1 2^-32) rounds once, into the subnormals
 *   where erfc's value is there: no two-step 2^k, no exponent clamps;
 * - the reduction runs in units of sq: r' = -x2 - k (ln2/sq) - lo2 (ln2
 *   split in two, k ln2_hi/sq exact), e^r = e^(sq r') by exp's degree-6
 *   polynomial with its coefficients scaled by sq^i (exact);
 * - a is clamped by a select that keeps a NaN, so a NaN stays NaN
 *   through every step; an infinite a is clamped like any large one.
 * At b = 10.2, erfc's value (3.6e-47) rounds to 0, as for every larger
 * b. exp(-b^2) and Q1 are independent chains (the division only feeds
 * Q1). */
static LLVMValueRef erfc_one_branch32(Math *m, LLVMValueRef a, double sq) {
  static const double Q1[] = {
      2.589715577e-05, 2.363274598e-01,  2.435668398e-01,
      1.773235915e-01, 3.141662448e-01,  -2.031447608e-01,
      5.102763811e-01, -3.569259465e-01, 7.838433340e-02};
  const double B = 10.2, s = sqrt(sq);
  const int kScale = 32; /* 2^(k + kScale) stays normal for k >= -150 */
  FzLLEmitter *E = m->E;
  /* a > B/s ? B/s : a, which keeps a NaN */
  LLVMValueRef ac =
      sel(m, fcmp(m, LLVMRealOLT, C(m, B / s), a), C(m, B / s), a);
  LLVMValueRef t =
      dvd(m, C(m, 1.0), add(m, mul(m, ac, C(m, 0.42 * s)), C(m, 1.0)));
  LLVMValueRef x2 = LLVMBuildFMul(E->b, ac, ac, "");
  LLVMValueRef fa[3] = {ac, ac, LLVMBuildFNeg(E->b, x2, "")};
  LLVMValueRef lo2 = fzLLCallIntrinsic(E, "llvm.fma", &m->ty, 1, fa, 3);
  const double shifter = 12582912.0 + 127 + kScale; /* 1.5 2^23 + bias */
  LLVMValueRef kf =
      add(m, mul(m, x2, C(m, -sq * 1.4426950408889634)), C(m, shifter));
  LLVMValueRef k = sub(m, kf, C(m, shifter));
  double ln2hi, ln2lo;
  ln2_split(false, &ln2hi, &ln2lo);
  LLVMValueRef r =
      sub(m, LLVMBuildFNeg(E->b, x2, ""), mul(m, k, C(m, ln2hi / sq)));
  r = sub(m, r, lo2);
  r = sub(m, r, mul(m, k, C(m, ln2lo / sq)));
  double ce[7], qs[9];
  for (size_t i = 0; i < 7; ++i)
    ce[i] = kExpF32[i] * pow(sq, (double)i);
  for (size_t i = 0; i < 9; ++i)
    qs[i] = ldexp(Q1[i], -kScale);
  LLVMValueRef p = horner(m, r, ce, 7);
  LLVMValueRef bits = LLVMBuildBitCast(E->b, kf, m->ity, "");
  bits = LLVMBuildShl(E->b, bits, CI(m, 23), "");
  LLVMValueRef e = mul(m, p, LLVMBuildBitCast(E->b, bits, m->ty, ""));
  return mul(m, e, horner(m, t, qs, 9));
}

/* 1 + erf(x) = erfc(-x) without cancellation for negative x, or, with
 * v (gelu's Φ: x = v * c, c the f32 nearest 1/sqrt 2), 1 + erf(v /
 * sqrt 2) from v itself. One branch (erfc_one_branch32) for every x; a
 * NaN gives NaN through it. */
static LLVMValueRef emit_one_plus_erf32(Math *m, LLVMValueRef x,
                                        LLVMValueRef v) {
  LLVMValueRef in = v ? v : x;
  LLVMValueRef a = intr1(m, "llvm.fabs", in);
  /* the sign bit (-0 and NaN with it set give erfc's branch, the same
     value): x86 blends and masks take it as it is, no compare */
  LLVMValueRef neg = LLVMBuildICmp(
      m->E->b, LLVMIntSLT, LLVMBuildBitCast(m->E->b, in, m->ity, ""), CI(m, 0),
      "");
  LLVMValueRef ec = erfc_one_branch32(m, a, v ? 0.5 : 1.0);
  return sel(m, neg, ec, sub(m, C(m, 2.0), ec));
}

static LLVMValueRef emit_pow(Math *m, LLVMValueRef x, LLVMValueRef y) {
  LLVMValueRef ax = intr1(m, "llvm.fabs", x);
  LLVMValueRef r = emit_exp(m, mul(m, y, emit_log(m, ax)));
  LLVMValueRef yInt = fcmp(m, LLVMRealOEQ, intr1(m, "llvm.rint", y), y);
  LLVMValueRef half = mul(m, y, C(m, 0.5));
  LLVMValueRef odd = LLVMBuildAnd(
      m->E->b, yInt, fcmp(m, LLVMRealONE, intr1(m, "llvm.rint", half), half),
      "");
  LLVMValueRef neg = fcmp(m, LLVMRealOLT, x, C(m, 0.0));
  r = sel(m, LLVMBuildAnd(m->E->b, neg, odd, ""), LLVMBuildFNeg(m->E->b, r, ""),
          r);
  LLVMValueRef notInt = LLVMBuildNot(m->E->b, yInt, "");
  r = sel(m, LLVMBuildAnd(m->E->b, neg, notInt, ""), C(m, NAN), r);
  r = sel(m, fcmp(m, LLVMRealOEQ, x, C(m, 1.0)), C(m, 1.0), r);
  return sel(m, fcmp(m, LLVMRealOEQ, y, C(m, 0.0)), C(m, 1.0), r);
}

/*===--- C library calls --------------------------------------------------===*/

/* name(f) / name(f, g) for each lane. */
static LLVMValueRef libm_call(Math *m, const char *name, LLVMValueRef x,
                              LLVMValueRef y) {
  FzLLEmitter *E = m->E;
  LLVMTypeRef st = m->f64 ? E->tF64 : E->tF32;
  char fname[32];
  snprintf(fname, sizeof fname, "%s%s", name, m->f64 ? "" : "f");
  LLVMTypeRef params[2] = {st, st};
  unsigned np = y ? 2 : 1;
  LLVMTypeRef fty = LLVMFunctionType(st, params, np, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(E->mod, fname);
  if (!fn) {
    fn = LLVMAddFunction(E->mod, fname, fty);
    fzLLAddAttr(E, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  }
  if (LLVMGetTypeKind(m->ty) != LLVMVectorTypeKind) {
    LLVMValueRef args[2] = {x, y};
    return LLVMBuildCall2(E->b, fty, fn, args, np, "");
  }
  LLVMValueRef out = LLVMGetPoison(m->ty);
  for (unsigned i = 0; i < LLVMGetVectorSize(m->ty); ++i) {
    LLVMValueRef idx = LLVMConstInt(E->tI32, i, 0);
    LLVMValueRef args[2] = {LLVMBuildExtractElement(E->b, x, idx, ""),
                            y ? LLVMBuildExtractElement(E->b, y, idx, "")
                              : NULL};
    LLVMValueRef v = LLVMBuildCall2(E->b, fty, fn, args, np, "");
    out = LLVMBuildInsertElement(E->b, out, v, idx, "");
  }
  return out;
}

/* libdevice's __nv_NAME[f] (GPU; lowering/nvptx links libdevice). */
static LLVMValueRef libdevice_call(Math *m, FzLLMathFn fn, LLVMValueRef x,
                                   LLVMValueRef y) {
  static const char *const names[] = {
      [FZ_LL_EXP] = "__nv_exp",   [FZ_LL_LOG] = "__nv_log",
      [FZ_LL_LOG1P] = "__nv_log1p", [FZ_LL_TANH] = "__nv_tanh",
      [FZ_LL_ERF] = "__nv_erf",   [FZ_LL_ONE_PLUS_ERF] = "__nv_erfc",
      [FZ_LL_POW] = "__nv_pow",   [FZ_LL_SIN] = "__nv_sin",
      [FZ_LL_COS] = "__nv_cos"};
  if (fn == FZ_LL_ONE_PLUS_ERF) /* 1 + erf(x), as CUDA's and PyTorch's
                                   gelu: erfcf costs twice erff */
    return add(m, C(m, 1.0), libm_call(m, names[FZ_LL_ERF], x, NULL));
  return libm_call(m, names[fn], x, fn == FZ_LL_POW ? y : NULL);
}

LLVMValueRef fzLLEmitMath(FzLLEmitter *E, FzLLMathFn fn, LLVMValueRef x,
                          LLVMValueRef y) {
  Math m;
  math_init(&m, E, LLVMTypeOf(x));
  if (E->libdevice)
    return libdevice_call(&m, fn, x, y);
  bool exact = E->opts.exactMath;
  switch (fn) {
  case FZ_LL_EXP:
    return exact ? intr1(&m, "llvm.exp", x) : emit_exp(&m, x);
  case FZ_LL_LOG:
    return exact ? intr1(&m, "llvm.log", x) : emit_log(&m, x);
  case FZ_LL_LOG1P:
    return exact ? libm_call(&m, "log1p", x, NULL) : emit_log1p(&m, x);
  case FZ_LL_TANH:
    return exact ? libm_call(&m, "tanh", x, NULL) : emit_tanh(&m, x);
  case FZ_LL_ERF:
    return exact || m.f64 ? libm_call(&m, "erf", x, NULL)
                          : emit_erf32(&m, x);
  case FZ_LL_ONE_PLUS_ERF:
    if (exact || m.f64) /* erfc(-x) */
      return libm_call(&m, "erfc", LLVMBuildFNeg(E->b, x, ""), NULL);
    return emit_one_plus_erf32(&m, x, y);
  case FZ_LL_POW:
    return exact ? intr2(&m, "llvm.pow", x, y) : emit_pow(&m, x, y);
  case FZ_LL_SIN:
    return intr1(&m, "llvm.sin", x);
  case FZ_LL_COS:
    return intr1(&m, "llvm.cos", x);
  }
  return NULL;
}
