/* ir/print_internal.h - helpers shared by the files of the textual
 * printer (printer.c, print_attrs.c, print_float.c). Private to ir/.
 *
 * Everything here appends to an FzBuf; none of it flushes. The op printer
 * (printer.c) owns flushing to the user's callback.
 */
#ifndef FZ_IR_PRINT_INTERNAL_H
#define FZ_IR_PRINT_INTERNAL_H

#include "ir/internal.h"

/* Appends that skip the function call while the buffer has room (the
 * printer's hot path); they keep FzBuf's NUL terminator. */
static inline void fzPrintPut(FzBuf *b, const char *s, size_t n) {
  if (b->len + n < b->cap) {
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
  } else {
    fzBufAppend(b, s, n);
  }
}

static inline void fzPrintPutc(FzBuf *b, char c) {
  if (b->len + 1 < b->cap) {
    b->data[b->len++] = c;
    b->data[b->len] = 0;
  } else {
    fzBufPutc(b, c);
  }
}

/* A string literal. */
#define FZ_PRINT_LIT(b, lit) fzPrintPut((b), (lit), sizeof(lit) - 1)

/* Decimal integers, without printf. */
void fzBufAppendU64(FzBuf *b, uint64_t v);
void fzBufAppendI64(FzBuf *b, int64_t v);

/* The bytes of s escaped as in an MLIR string literal (printable ASCII
 * other than '"' and '\\' verbatim, '\\' doubled, everything else as \XX
 * with uppercase hex), without the surrounding quotes. */
void fzBufAppendEscaped(FzBuf *b, FzStringRef s);

/* A float value of float type `type` (f16, bf16, f32, f64) exactly as
 * MLIR 19's printFloatValue prints it: "%e"-like with 6 digits when that
 * reads back to the same value in the type, else APFloat's default
 * decimal form when it holds a '.', else the IEEE bits in hex ("0x7FC00000").
 * `value` must be exactly representable in `type`. *printedHex (may be
 * NULL) is set when the hex form was used. */
void fzFloatPrintToBuf(FzBuf *b, const FzType *type, double value,
                       bool *printedHex);

/* An attribute; with mayElideType, an i64 integer or an f64 float printed
 * in decimal omits its ": type" (MLIR's AttrTypeElision::May, used for
 * array elements). */
void fzAttrPrintToBufElided(FzBuf *b, const FzAttr *a, bool mayElideType);

/* One dictionary entry: "name = value", or just "name" for a unit value;
 * a name that is not a bare identifier is quoted. */
void fzNamedAttrPrintToBuf(FzBuf *b, const FzNamedAttr *na);

#endif /* FZ_IR_PRINT_INTERNAL_H */
