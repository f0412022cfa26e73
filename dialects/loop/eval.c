/* dialects/loop/eval.c - the meaning of every scalar loop op, in one
 * function shared by the folder and the interpreter, so a fold can never
 * disagree with execution.
 *
 * Representation: a float value is a double already rounded to its type
 * (f16/bf16/f32 values are exactly representable in double); an integer
 * value is an int64 holding the low `width` bits sign-extended, except
 * i1, which holds 0 or 1. index is a 64-bit integer. Every result is
 * normalized to its type before it is returned, so f32 arithmetic is
 * computed in double and rounded once: for + - * / and sqrt that equals
 * the IEEE f32 result (double has more than 2*24+2 bits).
 */
#include <math.h>
#include <string.h>

#include "dialects/loop/loop_internal.h"

static unsigned int_width(FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_INDEX ? 64 : fzTypeGetBitWidth(t);
}

FzLoopScalar fzLoopNormalize(FzType *t, FzLoopScalar v) {
  if (fzTypeIsFloat(t)) {
    v.f = fzRoundToFloatType(t, v.f);
    return v;
  }
  unsigned w = int_width(t);
  if (w == 1)
    v.i &= 1;
  else if (w < 64) {
    uint64_t m = (UINT64_C(1) << w) - 1, u = (uint64_t)v.i & m;
    if (u >> (w - 1))
      u |= ~m;
    v.i = (int64_t)u;
  }
  return v;
}

/* The unsigned value of an integer of width w. */
static uint64_t as_unsigned(int64_t v, unsigned w) {
  return w >= 64 ? (uint64_t)v : (uint64_t)v & ((UINT64_C(1) << w) - 1);
}

/* Round half to even without depending on the floating-point
 * environment's rounding mode. */
static double round_even(double x) {
  double r = floor(x), d = x - r;
  if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0))
    r += 1.0;
  return isfinite(x) ? r : x;
}

static double max_nan(double a, double b) {
  if (isnan(a) || isnan(b))
    return NAN;
  if (a == b) /* max(-0, +0) is +0 */
    return signbit(a) ? b : a;
  return a > b ? a : b;
}

static double min_nan(double a, double b) {
  if (isnan(a) || isnan(b))
    return NAN;
  if (a == b)
    return signbit(a) ? a : b;
  return a < b ? a : b;
}

static bool cmpf(int pred, double a, double b) {
  bool uno = isnan(a) || isnan(b);
  switch (pred) {
  case FZ_LOOP_CMPF_OEQ: return !uno && a == b;
  case FZ_LOOP_CMPF_ONE: return !uno && a != b;
  case FZ_LOOP_CMPF_OLT: return !uno && a < b;
  case FZ_LOOP_CMPF_OLE: return !uno && a <= b;
  case FZ_LOOP_CMPF_OGT: return !uno && a > b;
  case FZ_LOOP_CMPF_OGE: return !uno && a >= b;
  case FZ_LOOP_CMPF_UEQ: return uno || a == b;
  case FZ_LOOP_CMPF_UNE: return uno || a != b;
  case FZ_LOOP_CMPF_ULT: return uno || a < b;
  case FZ_LOOP_CMPF_ULE: return uno || a <= b;
  case FZ_LOOP_CMPF_UGT: return uno || a > b;
  case FZ_LOOP_CMPF_UGE: return uno || a >= b;
  case FZ_LOOP_CMPF_ORD: return !uno;
  case FZ_LOOP_CMPF_UNO: return uno;
  default: return false;
  }
}

static bool cmpi(int pred, int64_t a, int64_t b, unsigned w) {
  uint64_t ua = as_unsigned(a, w), ub = as_unsigned(b, w);
  switch (pred) {
  case FZ_LOOP_CMPI_EQ: return a == b;
  case FZ_LOOP_CMPI_NE: return a != b;
  case FZ_LOOP_CMPI_SLT: return a < b;
  case FZ_LOOP_CMPI_SLE: return a <= b;
  case FZ_LOOP_CMPI_SGT: return a > b;
  case FZ_LOOP_CMPI_SGE: return a >= b;
  case FZ_LOOP_CMPI_ULT: return ua < ub;
  case FZ_LOOP_CMPI_ULE: return ua <= ub;
  case FZ_LOOP_CMPI_UGT: return ua > ub;
  case FZ_LOOP_CMPI_UGE: return ua >= ub;
  default: return false;
  }
}

/* Float to a signed integer of width w: toward zero, saturating, NaN
 * gives 0 (LLVM's llvm.fptosi.sat). */
static int64_t fptosi_sat(double x, unsigned w) {
  if (isnan(x))
    return 0;
  double hi = ldexp(1.0, (int)w - 1); /* 2^(w-1) */
  if (x >= hi)
    return w >= 64 ? INT64_MAX : (int64_t)(hi - 1);
  if (x <= -hi)
    return w >= 64 ? INT64_MIN : -(int64_t)hi;
  return (int64_t)trunc(x);
}

/* Bits of a float value of type t (f16/bf16/f32/f64) as an integer. */
static int64_t float_bits(FzType *t, double v) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16: return fzDoubleToHalfBits(v);
  case FZ_TYPE_BF16: return fzDoubleToBF16Bits(v);
  case FZ_TYPE_F32: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (int64_t)u;
  }
  default: {
    int64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  }
}

static double bits_float(FzType *t, int64_t bits) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16: return fzHalfBitsToFloat((uint16_t)bits);
  case FZ_TYPE_BF16: return fzBF16BitsToFloat((uint16_t)bits);
  case FZ_TYPE_F32: {
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  default: {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  }
}

static int64_t shift_left(int64_t a, int64_t b, unsigned w) {
  if (b < 0 || b >= (int64_t)w)
    return 0;
  return (int64_t)((uint64_t)a << b);
}

static int64_t shift_right(int64_t a, int64_t b, unsigned w) {
  if (b < 0 || b >= (int64_t)w)
    return a < 0 ? -1 : 0;
  return a >> b; /* arithmetic on every compiler we build with */
}

bool fzLoopEvalScalar(FzLoopOpcode opc, int pred, FzType *t, FzType *ot,
                      size_t n, const FzLoopScalar *in, FzLoopScalar *out) {
  (void)n;
  FzLoopScalar r = {0};
  double a = in[0].f, b = n > 1 ? in[1].f : 0;
  int64_t x = in[0].i, y = n > 1 ? in[1].i : 0;
  unsigned w = int_width(t);
  switch (opc) {
  case FZ_LOOP_OP_ADDF: r.f = a + b; break;
  case FZ_LOOP_OP_SUBF: r.f = a - b; break;
  case FZ_LOOP_OP_MULF: r.f = a * b; break;
  case FZ_LOOP_OP_DIVF: r.f = a / b; break;
  case FZ_LOOP_OP_REMF: r.f = fmod(a, b); break;
  case FZ_LOOP_OP_MAXF: r.f = max_nan(a, b); break;
  case FZ_LOOP_OP_MINF: r.f = min_nan(a, b); break;
  case FZ_LOOP_OP_POWF: r.f = pow(a, b); break;
  case FZ_LOOP_OP_FMA: r.f = fma(a, b, in[2].f); break;
  case FZ_LOOP_OP_DOT4: {
    /* acc + sum u8(a.t) * s8(b.t): |sum| < 2^17, the i32 add wraps. */
    uint64_t acc = (uint64_t)x;
    for (unsigned t = 0; t < 4; ++t) {
      int64_t ua = (int64_t)(((uint64_t)y >> (8 * t)) & 255);
      int64_t sb = (int64_t)(int8_t)(uint8_t)(((uint64_t)in[2].i >> (8 * t)) & 255);
      acc += (uint64_t)(ua * sb);
    }
    r.i = (int64_t)(int32_t)(uint32_t)acc;
    break;
  }
  case FZ_LOOP_OP_NEGF: r.f = -a; break;
  case FZ_LOOP_OP_ABSF: r.f = fabs(a); break;
  case FZ_LOOP_OP_EXP: r.f = exp(a); break;
  case FZ_LOOP_OP_LOG: r.f = log(a); break;
  case FZ_LOOP_OP_LOG1P: r.f = log1p(a); break;
  case FZ_LOOP_OP_TANH: r.f = tanh(a); break;
  case FZ_LOOP_OP_ERF: r.f = erf(a); break;
  case FZ_LOOP_OP_SQRT: r.f = sqrt(a); break;
  case FZ_LOOP_OP_RSQRT: r.f = 1.0 / sqrt(a); break;
  case FZ_LOOP_OP_FLOOR: r.f = floor(a); break;
  case FZ_LOOP_OP_CEIL: r.f = ceil(a); break;
  case FZ_LOOP_OP_ROUNDEVEN: r.f = round_even(a); break;
  case FZ_LOOP_OP_SIN: r.f = sin(a); break;
  case FZ_LOOP_OP_COS: r.f = cos(a); break;
  case FZ_LOOP_OP_ADDI: r.i = (int64_t)((uint64_t)x + (uint64_t)y); break;
  case FZ_LOOP_OP_SUBI: r.i = (int64_t)((uint64_t)x - (uint64_t)y); break;
  case FZ_LOOP_OP_MULI: r.i = (int64_t)((uint64_t)x * (uint64_t)y); break;
  case FZ_LOOP_OP_DIVSI:
    if (y == 0)
      return false;
    r.i = (x == INT64_MIN && y == -1) ? x : x / y;
    break;
  case FZ_LOOP_OP_REMSI:
    if (y == 0)
      return false;
    r.i = y == -1 ? 0 : x % y;
    break;
  case FZ_LOOP_OP_MAXSI: r.i = x > y ? x : y; break;
  case FZ_LOOP_OP_MINSI: r.i = x < y ? x : y; break;
  case FZ_LOOP_OP_ANDI: r.i = x & y; break;
  case FZ_LOOP_OP_ORI: r.i = x | y; break;
  case FZ_LOOP_OP_XORI: r.i = x ^ y; break;
  case FZ_LOOP_OP_SHLI: r.i = shift_left(x, y, w); break;
  case FZ_LOOP_OP_SHRSI: r.i = shift_right(x, y, w); break;
  case FZ_LOOP_OP_CMPF: r.i = cmpf(pred, a, b); break;
  case FZ_LOOP_OP_CMPI: r.i = cmpi(pred, x, y, int_width(ot)); break;
  case FZ_LOOP_OP_SELECT: r = (in[0].i & 1) ? in[1] : in[2]; break;
  case FZ_LOOP_OP_EXTF:
  case FZ_LOOP_OP_TRUNCF: r.f = a; break;
  case FZ_LOOP_OP_SITOFP:
    r.f = int_width(ot) == 1 ? -(double)(x & 1) : (double)x;
    break;
  case FZ_LOOP_OP_UITOFP: r.f = (double)as_unsigned(x, int_width(ot)); break;
  case FZ_LOOP_OP_FPTOSI: r.i = fptosi_sat(a, w); break;
  case FZ_LOOP_OP_EXTSI:
    r.i = int_width(ot) == 1 ? -(x & 1) : x;
    break;
  case FZ_LOOP_OP_EXTUI: r.i = (int64_t)as_unsigned(x, int_width(ot)); break;
  case FZ_LOOP_OP_TRUNCI:
  case FZ_LOOP_OP_INDEX_CAST:
    r.i = int_width(ot) == 1 ? (x & 1) : x;
    break;
  case FZ_LOOP_OP_BITCAST:
    if (fzTypeIsFloat(ot) && !fzTypeIsFloat(t))
      r.i = float_bits(ot, a);
    else if (!fzTypeIsFloat(ot) && fzTypeIsFloat(t))
      r.f = bits_float(t, x);
    else if (fzTypeIsFloat(ot))
      r.f = bits_float(t, float_bits(ot, a)); /* f16 <-> bf16 */
    else
      r.i = x;
    break;
  default:
    return false;
  }
  *out = fzLoopNormalize(t, r);
  return true;
}

/*===--- Element access -------------------------------------------------===*/

FzLoopScalar fzLoopReadElement(FzType *elt, const void *p) {
  FzLoopScalar v = {0};
  switch (fzTypeGetKind(elt)) {
  case FZ_TYPE_F16: {
    uint16_t h;
    memcpy(&h, p, 2);
    v.f = fzHalfBitsToFloat(h);
    return v;
  }
  case FZ_TYPE_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    v.f = fzBF16BitsToFloat(h);
    return v;
  }
  case FZ_TYPE_F32: {
    float f;
    memcpy(&f, p, 4);
    v.f = f;
    return v;
  }
  case FZ_TYPE_F64:
    memcpy(&v.f, p, 8);
    return v;
  default:
    break;
  }
  switch (fzTypeGetStorageSize(elt)) {
  case 1: {
    int8_t x;
    memcpy(&x, p, 1);
    v.i = x;
    break;
  }
  case 2: {
    int16_t x;
    memcpy(&x, p, 2);
    v.i = x;
    break;
  }
  case 4: {
    int32_t x;
    memcpy(&x, p, 4);
    v.i = x;
    break;
  }
  default:
    memcpy(&v.i, p, 8);
  }
  return fzLoopNormalize(elt, v);
}

void fzLoopWriteElement(FzType *elt, void *p, FzLoopScalar v) {
  switch (fzTypeGetKind(elt)) {
  case FZ_TYPE_F16: {
    uint16_t h = fzDoubleToHalfBits(v.f);
    memcpy(p, &h, 2);
    return;
  }
  case FZ_TYPE_BF16: {
    uint16_t h = fzDoubleToBF16Bits(v.f);
    memcpy(p, &h, 2);
    return;
  }
  case FZ_TYPE_F32: {
    float f = (float)v.f;
    memcpy(p, &f, 4);
    return;
  }
  case FZ_TYPE_F64:
    memcpy(p, &v.f, 8);
    return;
  default:
    break;
  }
  int64_t x = v.i;
  if (fzTypeGetBitWidth(elt) == 1)
    x &= 1;
  switch (fzTypeGetStorageSize(elt)) {
  case 1: {
    int8_t y = (int8_t)x;
    memcpy(p, &y, 1);
    return;
  }
  case 2: {
    int16_t y = (int16_t)x;
    memcpy(p, &y, 2);
    return;
  }
  case 4: {
    int32_t y = (int32_t)x;
    memcpy(p, &y, 4);
    return;
  }
  default:
    memcpy(p, &x, 8);
  }
}
