/* ir/print_float.c - float literals printed exactly as MLIR 19 prints them.
 *
 * MLIR's printFloatValue first tries APFloat::toString with 6 digits in
 * exponent form ("1.000000e+00") and keeps it when it reads back to the
 * same bits; otherwise it uses APFloat's default form (enough digits for
 * the type, plain or "1.2345678900000001E-10"), when that has a '.';
 * otherwise (and for inf/NaN) the IEEE bits in hex. Byte-identical output
 * needs APFloat's digit generation reproduced exactly, quirks included:
 * it computes the exact decimal expansion with big integers, then drops
 * low digits by truncating division before rounding half-up on the
 * remaining digit string (so f16 0.1 prints 9.997550e-02, not ...560e-02).
 * This file does the same with a small fixed-size big integer.
 *
 * Values arrive as doubles that are exactly representable in the
 * attribute's float type, so the decomposition sig * 2^exp of the double
 * is the type's own. Nothing here allocates.
 */
#include <math.h>
#include <stdlib.h>

#include "ir/print_internal.h"

/* Enough 32-bit limbs for 2^53 * 5^1126 (f64 subnormals) and 2^1024. */
#define BIG_LIMBS 88

typedef struct Big {
  uint32_t n; /* limbs in use; d[n-1] != 0 unless n == 0 */
  uint32_t d[BIG_LIMBS];
} Big;

static void big_set_u64(Big *b, uint64_t v) {
  b->n = 0;
  while (v) {
    b->d[b->n++] = (uint32_t)v;
    v >>= 32;
  }
}

static void big_mul_small(Big *b, uint32_t m) {
  uint64_t carry = 0;
  for (uint32_t i = 0; i < b->n; i++) {
    uint64_t t = (uint64_t)b->d[i] * m + carry;
    b->d[i] = (uint32_t)t;
    carry = t >> 32;
  }
  if (carry && b->n < BIG_LIMBS)
    b->d[b->n++] = (uint32_t)carry;
}

static void big_shl(Big *b, unsigned s) {
  if (b->n == 0)
    return;
  unsigned limbs = s / 32, bits = s % 32;
  uint32_t n = b->n;
  if (n + limbs + 1 > BIG_LIMBS)
    return; /* cannot happen for IEEE doubles */
  b->d[n + limbs] = 0;
  for (uint32_t i = n; i-- > 0;) {
    uint64_t v = (uint64_t)b->d[i] << bits;
    b->d[i + limbs + 1] |= (uint32_t)(v >> 32);
    b->d[i + limbs] = (uint32_t)v;
  }
  for (unsigned i = 0; i < limbs; i++)
    b->d[i] = 0;
  b->n = n + limbs + 1;
  while (b->n && b->d[b->n - 1] == 0)
    b->n--;
}

static void big_div_small(Big *b, uint32_t m) {
  uint64_t rem = 0;
  for (uint32_t i = b->n; i-- > 0;) {
    uint64_t cur = (rem << 32) | b->d[i];
    b->d[i] = (uint32_t)(cur / m);
    rem = cur % m;
  }
  while (b->n && b->d[b->n - 1] == 0)
    b->n--;
}

static unsigned big_active_bits(const Big *b) {
  if (b->n == 0)
    return 0;
  uint32_t top = b->d[b->n - 1];
  unsigned bits = 0;
  while (top) {
    bits++;
    top >>= 1;
  }
  return (b->n - 1) * 32 + bits;
}

/* Divides by 10^t, truncating (floor of floors is the floor). */
static void big_div_pow10(Big *b, unsigned t) {
  while (t >= 9) {
    big_div_small(b, 1000000000u);
    t -= 9;
  }
  uint32_t m = 1;
  while (t--)
    m *= 10;
  if (m > 1)
    big_div_small(b, m);
}

/* APFloat's AdjustToPrecision on the digit buffer (least significant
 * digit first): round half-up to `prec` digits, dropping trailing zeros. */
static void adjust_digits(char *buf, unsigned *n, int *exp, unsigned prec) {
  unsigned count = *n;
  if (count <= prec)
    return;
  unsigned first = count - prec;
  if (buf[first - 1] < '5') {
    while (first < count && buf[first] == '0')
      first++;
  } else {
    unsigned i;
    for (i = first; i != count; ++i) {
      if (buf[i] == '9') {
        first++;
      } else {
        buf[i]++;
        break;
      }
    }
    if (first == count) {
      *exp += (int)first;
      buf[0] = '1';
      *n = 1;
      return;
    }
  }
  *exp += (int)first;
  memmove(buf, buf + first, count - first);
  *n = count - first;
}

/* APFloat::toString for a finite non-zero value sig * 2^exp, into out
 * (at least 64 bytes); returns the length. semPrecision is the type's
 * significand width (11, 8, 24, 53). */
static size_t apfloat_to_string(char *out, bool neg, uint64_t sig, int exp,
                                unsigned semPrecision, unsigned prec,
                                unsigned maxPad, bool truncZero) {
  size_t len = 0;
  if (neg)
    out[len++] = '-';
  if (!prec)
    prec = 2 + semPrecision * 59 / 196;

  while (!(sig & 1)) {
    sig >>= 1;
    exp++;
  }
  Big big;
  big_set_u64(&big, sig);
  if (exp > 0) {
    big_shl(&big, (unsigned)exp);
    exp = 0;
  } else if (exp < 0) {
    unsigned texp = (unsigned)-exp;
    while (texp >= 13) {
      big_mul_small(&big, 1220703125u); /* 5^13 */
      texp -= 13;
    }
    uint32_t m = 1;
    while (texp--)
      m *= 5;
    if (m > 1)
      big_mul_small(&big, m);
  }

  /* AdjustToPrecision on the integer: truncate digits we cannot need. */
  unsigned bits = big_active_bits(&big);
  unsigned bitsRequired = (prec * 196 + 58) / 59;
  if (bits > bitsRequired) {
    unsigned tens = (bits - bitsRequired) * 59 / 196;
    if (tens) {
      exp += (int)tens;
      big_div_pow10(&big, tens);
    }
  }
  uint64_t v = 0;
  for (uint32_t i = big.n; i-- > 0;)
    v = (v << 32) | big.d[i];

  char digits[32];
  unsigned nd = 0;
  bool inTrail = true;
  while (v) {
    unsigned d = (unsigned)(v % 10);
    v /= 10;
    if (inTrail && !d) {
      exp++;
    } else {
      digits[nd++] = (char)('0' + d);
      inTrail = false;
    }
  }
  adjust_digits(digits, &nd, &exp, prec);

  bool scientific;
  if (!maxPad) {
    scientific = true;
  } else if (exp >= 0) {
    scientific = ((unsigned)exp > maxPad || nd + (unsigned)exp > prec);
  } else {
    int msd = exp + (int)(nd - 1);
    scientific = msd >= 0 ? false : ((unsigned)-msd) > maxPad;
  }

  if (scientific) {
    exp += (int)(nd - 1);
    out[len++] = digits[nd - 1];
    out[len++] = '.';
    if (nd == 1 && truncZero) {
      out[len++] = '0';
    } else {
      for (unsigned i = 1; i != nd; ++i)
        out[len++] = digits[nd - 1 - i];
    }
    if (!truncZero && prec > nd - 1)
      for (unsigned i = 0; i < prec - nd + 1; i++)
        out[len++] = '0';
    out[len++] = truncZero ? 'E' : 'e';
    out[len++] = exp >= 0 ? '+' : '-';
    unsigned e = (unsigned)(exp < 0 ? -exp : exp);
    char ebuf[8];
    unsigned ne = 0;
    do {
      ebuf[ne++] = (char)('0' + e % 10);
      e /= 10;
    } while (e);
    if (!truncZero && ne < 2)
      ebuf[ne++] = '0';
    while (ne)
      out[len++] = ebuf[--ne];
    return len;
  }

  if (exp >= 0) {
    for (unsigned i = 0; i != nd; ++i)
      out[len++] = digits[nd - 1 - i];
    for (int i = 0; i != exp; ++i)
      out[len++] = '0';
    return len;
  }

  int wholeDigits = exp + (int)nd;
  unsigned i = 0;
  if (wholeDigits > 0) {
    for (; i != (unsigned)wholeDigits; ++i)
      out[len++] = digits[nd - i - 1];
    out[len++] = '.';
  } else {
    unsigned zeros = 1 + (unsigned)-wholeDigits;
    out[len++] = '0';
    out[len++] = '.';
    for (unsigned z = 1; z != zeros; ++z)
      out[len++] = '0';
  }
  for (; i != nd; ++i)
    out[len++] = digits[nd - i - 1];
  return len;
}

/* Format parameters of the four float types. */
typedef struct FloatSem {
  unsigned precision; /* significand bits, implicit bit included */
  int minExp, maxExp; /* of normal numbers (unbiased) */
  unsigned totalBits;
} FloatSem;

static FloatSem sem_of(const FzType *t) {
  switch (t ? t->kind : FZ_TYPE_F64) {
  case FZ_TYPE_F16:
    return (FloatSem){11, -14, 15, 16};
  case FZ_TYPE_BF16:
    return (FloatSem){8, -126, 127, 16};
  case FZ_TYPE_F32:
    return (FloatSem){24, -126, 127, 32};
  default:
    return (FloatSem){53, -1022, 1023, 64};
  }
}

/* Rounds a finite double to the format (round to nearest, ties to even),
 * overflowing to infinity. Exact for f16/bf16 ranges. */
static double round_to_sem(double x, FloatSem s) {
  if (x == 0 || isnan(x) || isinf(x))
    return x;
  int e;
  (void)frexp(x, &e);
  int lead = e - 1;
  if (lead < s.minExp)
    lead = s.minExp;
  int shift = (int)s.precision - 1 - lead;
  double q = nearbyint(ldexp(x, shift));
  double r = ldexp(q, -shift);
  double maxFinite = ldexp(2.0 - ldexp(1.0, 1 - (int)s.precision), s.maxExp);
  if (fabs(r) > maxFinite)
    return x < 0 ? -HUGE_VAL : HUGE_VAL;
  return r;
}

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* IEEE bits of value (exactly representable) in the type's format. */
static uint64_t bits_in_sem(double value, FloatSem s) {
  uint64_t db = double_bits(value);
  if (s.totalBits == 64)
    return db;
  if (s.totalBits == 32 && !isnan(value)) {
    float f = (float)value;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
  }
  /* NaNs (kept bit for bit: a conversion would quiet a signaling one),
   * and 16-bit formats: sign, exponent field, mantissa. */
  unsigned mantBits = s.precision - 1;
  unsigned expBits = s.totalBits - 1 - mantBits;
  uint64_t sign = (db >> 63) << (s.totalBits - 1);
  uint64_t expMask = ((UINT64_C(1) << expBits) - 1) << mantBits;
  if (isnan(value)) {
    uint64_t mant = (db & ((UINT64_C(1) << 52) - 1)) >> (52 - mantBits);
    if (!mant)
      mant = UINT64_C(1) << (mantBits - 1);
    return sign | expMask | mant;
  }
  if (isinf(value))
    return sign | expMask;
  if (value == 0)
    return sign;
  double a = fabs(value);
  int e;
  (void)frexp(a, &e);
  int lead = e - 1;
  int bias = (1 << (expBits - 1)) - 1;
  if (lead < s.minExp) /* subnormal */
    return sign | (uint64_t)ldexp(a, (int)mantBits - s.minExp);
  uint64_t mant =
      (uint64_t)ldexp(a, (int)mantBits - lead) - (UINT64_C(1) << mantBits);
  return sign | ((uint64_t)(lead + bias) << mantBits) | mant;
}

/* Does text read back (correctly rounded) to exactly value in sem? */
static bool reads_back(const char *text, double value, FloatSem s) {
  double parsed;
  if (s.totalBits == 32)
    parsed = strtof(text, NULL);
  else if (s.totalBits == 64)
    parsed = strtod(text, NULL);
  else /* a short decimal is never within double rounding of a midpoint */
    parsed = round_to_sem(strtod(text, NULL), s);
  return double_bits(parsed) == double_bits(value);
}

static void append_hex_bits(FzBuf *b, uint64_t bits) {
  static const char hex[] = "0123456789ABCDEF";
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = hex[bits & 15];
    bits >>= 4;
  } while (bits);
  fzBufAppend(b, "0x", 2);
  while (n)
    fzBufPutc(b, tmp[--n]);
}

void fzFloatPrintToBuf(FzBuf *b, const FzType *type, double value,
                       bool *printedHex) {
  FloatSem s = sem_of(type);
  if (printedHex)
    *printedHex = false;
  if (!isnan(value) && !isinf(value)) {
    char text[72];
    size_t len;
    if (value == 0) {
      /* APFloat prints zeros without looking at digits. */
      len = 0;
      if (signbit(value))
        text[len++] = '-';
      memcpy(text + len, "0.000000e+00", 12);
      len += 12;
      fzBufAppend(b, text, len);
      return;
    }
    uint64_t db = double_bits(value);
    bool neg = (db >> 63) != 0;
    int biased = (int)((db >> 52) & 0x7ff);
    uint64_t sig = db & ((UINT64_C(1) << 52) - 1);
    int exp;
    if (biased == 0) {
      exp = -1074;
    } else {
      sig |= UINT64_C(1) << 52;
      exp = biased - 1075;
    }
    len = apfloat_to_string(text, neg, sig, exp, s.precision, 6, 0, false);
    text[len] = '\0';
    if (reads_back(text, value, s)) {
      fzBufAppend(b, text, len);
      return;
    }
    len = apfloat_to_string(text, neg, sig, exp, s.precision, 0, 3, true);
    if (memchr(text, '.', len)) {
      fzBufAppend(b, text, len);
      return;
    }
  }
  if (printedHex)
    *printedHex = true;
  append_hex_bits(b, bits_in_sem(value, s));
}
