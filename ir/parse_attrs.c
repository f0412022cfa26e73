/* ir/parse_attrs.c - attributes.
 *
 * Grammar:
 *   attribute ::= '-'? (integer | float) (':' type)?
 *               | 'true' | 'false' | 'unit' | string
 *               | '[' (attribute (',' attribute)*)? ']'
 *               | dictionary-attribute
 *               | '@' name ('::' '@' name)*
 *               | 'dense' '<' dense-literal? '>' ':' type
 *               | 'array' '<' type (':' element (',' element)*)? '>'
 *               | '#' alias-name | '#' dialect '.' body pretty? | '#' dialect pretty
 *               | type
 *   dictionary-attribute ::= '{' (entry (',' entry)*)? '}'
 *   entry     ::= (bare-id | string) ('=' attribute)?
 *   dense-literal ::= element | nested-list | string  (hex "0x..." bytes)
 *
 * A bare integer is i64 and a bare float f64 unless a type follows (or
 * the caller supplies one). Signless integer literals may use the full
 * unsigned range of their width, as in MLIR. Dense literals are checked
 * against their type's shape and packed into the little-endian storage
 * that fzDenseAttrGet expects. Nested lists are walked iteratively, with
 * their depth charged to the nesting limit.
 */
#include <math.h>
#include <stdlib.h>

#include "ir/parser.h"

/* Formats a type for a message; free with fzFree. */
static char *type_text(FzAsmParser *p, const FzType *t) {
  FzBuf b;
  fzBufInit(&b, p->ctx);
  fzTypePrintToBuf(&b, t);
  return b.data;
}

static bool type_error(FzAsmParser *p, const FzToken *at, const char *fmt,
                       const FzType *t) {
  char *s = type_text(p, t);
  fzpErrorAt(p, at, fmt, s ? s : "?");
  fzFree(p->ctx, s);
  return false;
}

/*===--- Numbers ----------------------------------------------------------===*/

static bool is_hex_token(const FzToken *t) {
  return t->len > 2 && t->start[0] == '0' && t->start[1] == 'x';
}

/* Converts an integer token (with sign) to a value of int/index type,
 * checking that it fits the width (as signed or as unsigned). */
static bool int_value(FzAsmParser *p, const FzToken *t, bool neg,
                      const FzType *type, int64_t *out) {
  unsigned w = fzTypeGetBitWidth(type);
  uint64_t mag;
  bool fits = fzpTokenToU64(t, &mag);
  if (fits) {
    uint64_t umax = w >= 64 ? UINT64_MAX : (((uint64_t)1 << w) - 1);
    uint64_t nmax = (uint64_t)1 << (w - 1);
    fits = neg ? mag <= nmax : mag <= umax;
  }
  if (!fits)
    return type_error(p, t, "integer value too large for %s", type);
  *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return true;
}

/* Raw bits of a hex literal for a float type. */
static bool float_from_bits(FzAsmParser *p, const FzToken *t,
                            const FzType *type, double *out) {
  uint64_t bits;
  unsigned w = fzTypeGetBitWidth(type);
  if (!fzpTokenToU64(t, &bits) || (w < 64 && (bits >> w) != 0))
    return type_error(p, t, "hexadecimal float constant out of range for %s",
                      type);
  unsigned mantBits = 52;
  switch (fzTypeGetKind(type)) {
  case FZ_TYPE_F16:
    mantBits = 10;
    *out = fzHalfBitsToFloat((uint16_t)bits);
    break;
  case FZ_TYPE_BF16:
    mantBits = 7;
    *out = fzBF16BitsToFloat((uint16_t)bits);
    break;
  case FZ_TYPE_F32: {
    mantBits = 23;
    uint32_t b32 = (uint32_t)bits;
    float f;
    memcpy(&f, &b32, sizeof f);
    *out = f;
    break;
  }
  default:
    memcpy(out, &bits, sizeof *out);
    return true;
  }
  if (*out != *out) {
    /* Widen a NaN by hand: a hardware conversion would quiet a
     * signaling NaN, and its payload is part of the value. */
    uint64_t mant = bits & (((uint64_t)1 << mantBits) - 1);
    uint64_t sign = (bits >> (w - 1)) & 1;
    uint64_t d = (sign << 63) | ((uint64_t)0x7FF << 52) |
                 (mant << (52 - mantBits));
    memcpy(out, &d, sizeof *out);
  }
  return true;
}

static double float_token_value(const FzToken *t, bool neg) {
  double v = strtod(t->start, NULL);
  return neg ? -v : v;
}

/* A literal (token + sign) of the given type as an attribute. */
static FzAttr *number_attr(FzAsmParser *p, const FzToken *t, bool neg,
                           const FzToken *signTok, FzType *type) {
  FzContext *ctx = p->ctx;
  FzAttr *a = NULL;
  if (t->kind == FZ_TOK_FLOAT) {
    if (!fzTypeIsFloat(type)) {
      fzpErrorAt(p, t, "floating point value not valid for specified type");
      return NULL;
    }
    a = fzFloatAttrGet(ctx, type, float_token_value(t, neg));
  } else if (fzTypeIsFloat(type)) {
    if (!is_hex_token(t)) {
      uint32_t line, col;
      fzpErrorPos(p, t, &line, &col);
      FzDiagnostic *d = fzpDiagBegin(
          p, line, col,
          "unexpected decimal integer literal for a floating point value");
      if (d)
        fzDiagAttachNote(d, fzpLocAt(p, line, col),
                         "add a trailing dot to make the literal a float");
      fzpDiagReport(p, d);
      return NULL;
    }
    if (neg) {
      fzpErrorAt(p, signTok,
                 "hexadecimal float literal should not have a leading minus");
      return NULL;
    }
    double v;
    if (!float_from_bits(p, t, type, &v))
      return NULL;
    a = fzFloatAttrGet(ctx, type, v);
  } else if (fzTypeIsIntOrIndex(type)) {
    int64_t v;
    if (!int_value(p, t, neg, type, &v))
      return NULL;
    a = fzIntegerAttrGet(ctx, type, v);
  } else {
    fzpErrorAt(p, t, "integer literal not valid for specified type");
    return NULL;
  }
  if (!a)
    fzpOutOfMemory(p);
  return a;
}

static FzAttr *parse_number(FzAsmParser *p, FzType *type) {
  FzToken signTok = p->tok;
  bool neg = fzpConsumeIf(p, FZ_TOK_MINUS);
  FzToken t = p->tok;
  if (t.kind != FZ_TOK_INTEGER && t.kind != FZ_TOK_FLOAT) {
    fzpErrorAt(p, &t, "expected integer or floating point literal");
    return NULL;
  }
  fzpAdvance(p);
  if (!type) {
    if (fzpConsumeIf(p, FZ_TOK_COLON)) {
      if (!(type = fzpParseType(p)))
        return NULL;
    } else {
      type = t.kind == FZ_TOK_FLOAT ? fzF64TypeGet(p->ctx)
                                    : fzIntegerTypeGet(p->ctx, 64);
    }
  }
  return number_attr(p, &t, neg, &signTok, type);
}

/*===--- Element literals (dense, array) ----------------------------------===*/

typedef struct FzpElt {
  FzToken tok; /* INTEGER, FLOAT or BARE_IDENT true/false */
  bool neg;
} FzpElt;

static bool is_bool_token(const FzToken *t) {
  return t->kind == FZ_TOK_BARE_IDENT &&
         ((t->len == 4 && !memcmp(t->start, "true", 4)) ||
          (t->len == 5 && !memcmp(t->start, "false", 5)));
}

/* One element: '-'? (integer | float) | true | false. */
static bool parse_elt(FzAsmParser *p, FzpElt *e) {
  e->neg = fzpConsumeIf(p, FZ_TOK_MINUS);
  e->tok = p->tok;
  bool ok = e->tok.kind == FZ_TOK_INTEGER || e->tok.kind == FZ_TOK_FLOAT ||
            (!e->neg && is_bool_token(&e->tok));
  if (!ok && !e->neg && e->tok.kind == FZ_TOK_STRING)
    return fzpErrorAt(p, &p->tok, "string elements (dense<[\"a\", ...]>) are "
                                  "not supported by fuse");
  if (!ok)
    return fzpErrorAt(p, &p->tok, "expected element literal");
  fzpAdvance(p);
  return true;
}

static void put_le(FzBuf *out, uint64_t bits, size_t size) {
  unsigned char b[8];
  for (size_t i = 0; i < size; ++i)
    b[i] = (unsigned char)(bits >> (8 * i));
  fzBufAppend(out, b, size);
}

/* Appends element e converted to `elt` in storage layout. */
static bool encode_elt(FzAsmParser *p, const FzpElt *e, const FzType *elt,
                       FzBuf *out) {
  size_t size = fzTypeGetStorageSize(elt);
  const FzToken *t = &e->tok;
  if (fzTypeIsFloat(elt)) {
    double v;
    if (t->kind == FZ_TOK_FLOAT) {
      v = float_token_value(t, e->neg);
    } else if (t->kind == FZ_TOK_INTEGER && is_hex_token(t) && !e->neg) {
      /* Raw bits are stored as written (NaN payloads included). */
      if (!float_from_bits(p, t, elt, &v))
        return false;
      uint64_t raw;
      fzpTokenToU64(t, &raw);
      put_le(out, raw, size);
      return true;
    } else if (t->kind == FZ_TOK_INTEGER) {
      return fzpErrorAt(p, t,
                        "expected floating-point elements, but parsed "
                        "integer");
    } else {
      return fzpErrorAt(p, t,
                        "expected floating-point elements, but parsed "
                        "boolean");
    }
    uint64_t bits;
    switch (fzTypeGetKind(elt)) {
    case FZ_TYPE_F16:
      bits = fzFloatToHalfBits((float)fzRoundToFloatType(elt, v));
      break;
    case FZ_TYPE_BF16:
      bits = fzFloatToBF16Bits((float)fzRoundToFloatType(elt, v));
      break;
    case FZ_TYPE_F32: {
      float f = (float)v;
      uint32_t b32;
      memcpy(&b32, &f, sizeof b32);
      bits = b32;
      break;
    }
    default:
      memcpy(&bits, &v, sizeof bits);
      break;
    }
    put_le(out, bits, size);
    return true;
  }
  int64_t v;
  if (is_bool_token(t)) {
    if (fzTypeGetKind(elt) != FZ_TYPE_INTEGER || fzTypeGetBitWidth(elt) != 1)
      return fzpErrorAt(p, t,
                        "expected i1 type for 'true' or 'false' values");
    v = t->start[0] == 't';
  } else if (t->kind == FZ_TOK_FLOAT) {
    return fzpErrorAt(p, t,
                      "expected integer elements, but parsed floating-point");
  } else if (!int_value(p, t, e->neg, elt, &v)) {
    return false;
  }
  if (fzTypeGetBitWidth(elt) == 1)
    v &= 1;
  put_le(out, (uint64_t)v, size);
  return true;
}

/* Appends "[d0, d1]" to b. */
static void put_shape(FzBuf *b, const int64_t *dims, size_t n) {
  fzBufPutc(b, '[');
  for (size_t i = 0; i < n; ++i)
    fzBufPrintf(b, "%s%lld", i ? ", " : "", (long long)dims[i]);
  fzBufPutc(b, ']');
}

/* A nested list of elements: pushes them on elts and their inferred shape
 * on dims (FzBuf of int64_t). Walked with an explicit stack of counts. */
static bool parse_elt_tree(FzAsmParser *p, FzBuf *elts, FzBuf *dims,
                           FzBuf *counts, size_t *rankOut) {
  size_t rank = (size_t)-1; /* unknown until the first leaf */
  size_t level = 0;         /* open '[' */
  unsigned depthAtStart = p->depth;
  bool ok = false;
  for (;;) {
    if (fzpIs(p, FZ_TOK_LSQUARE)) {
      if (!fzpEnterNesting(p))
        goto done;
      fzpAdvance(p);
      int64_t zero = 0;
      fzBufAppend(counts, &zero, sizeof zero);
      if (counts->failed) {
        fzpOutOfMemory(p);
        goto done;
      }
      ++level;
      if (!fzpIs(p, FZ_TOK_RSQUARE))
        continue;
    } else {
      /* A leaf element at depth `level`. */
      FzToken at = p->tok;
      FzpElt e;
      if (!parse_elt(p, &e))
        goto done;
      if (rank == (size_t)-1)
        rank = level;
      if (rank != level) {
        fzpErrorAt(p, &at, "tensor literal is invalid; ranks are not "
                           "consistent between elements");
        goto done;
      }
      fzBufAppend(elts, &e, sizeof e);
      ((int64_t *)counts->data)[level - 1]++;
    }
    /* After an element or a list: close as many lists as end here. */
    for (;;) {
      if (fzpIs(p, FZ_TOK_COMMA)) {
        fzpAdvance(p);
        break;
      }
      if (!fzpIs(p, FZ_TOK_RSQUARE)) {
        fzpErrorAt(p, &p->tok, "expected ',' or ']'");
        goto done;
      }
      FzToken close = p->tok;
      fzpAdvance(p);
      int64_t n = ((int64_t *)counts->data)[level - 1];
      if (n == 0) {
        /* An empty list: its elements would sit at this level. */
        if (rank == (size_t)-1)
          rank = level;
        if (rank != level) {
          fzpErrorAt(p, &close, "tensor literal is invalid; ranks are not "
                                "consistent between elements");
          goto done;
        }
      }
      size_t known = dims->len / sizeof(int64_t);
      while (known < level) {
        int64_t unknown = -1;
        fzBufAppend(dims, &unknown, sizeof unknown);
        ++known;
      }
      if (dims->failed) {
        fzpOutOfMemory(p);
        goto done;
      }
      int64_t *d = (int64_t *)dims->data + (level - 1);
      if (*d == -1) {
        *d = n;
      } else if (*d != n) {
        fzpErrorAt(p, &close, "tensor literal is invalid; ranks are not "
                              "consistent between elements");
        goto done;
      }
      counts->len -= sizeof(int64_t);
      --level;
      fzpLeaveNesting(p);
      if (level == 0) {
        ok = true;
        goto done;
      }
      ((int64_t *)counts->data)[level - 1]++;
    }
    if (elts->failed || dims->failed || counts->failed) {
      fzpOutOfMemory(p);
      goto done;
    }
  }
done:
  p->depth = depthAtStart;
  *rankOut = rank == (size_t)-1 ? level : rank;
  if (ok && (elts->failed || dims->failed))
    return fzpOutOfMemory(p);
  return ok;
}

/* dense '<' ... '>' (':' type unless given). */
static FzAttr *parse_dense(FzAsmParser *p, FzType *type) {
  FzToken kw = p->tok;
  fzpAdvance(p);
  if (!fzpExpect(p, FZ_TOK_LESS, "expected '<' after 'dense'"))
    return NULL;
  FzBuf elts, dims, counts, data;
  fzBufInit(&elts, p->ctx);
  fzBufInit(&dims, p->ctx);
  fzBufInit(&counts, p->ctx);
  fzBufInit(&data, p->ctx);
  FzAttr *result = NULL;
  FzToken hexTok = {FZ_TOK_EOF, 0, 0, NULL, 0};
  bool splat = false, empty = false;
  size_t rank = 0;
  if (fzpIs(p, FZ_TOK_GREATER)) {
    empty = true;
  } else if (fzpIs(p, FZ_TOK_STRING)) {
    hexTok = p->tok;
    fzpAdvance(p);
  } else if (fzpIs(p, FZ_TOK_LSQUARE)) {
    if (!parse_elt_tree(p, &elts, &dims, &counts, &rank))
      goto done;
  } else {
    FzpElt e;
    if (!parse_elt(p, &e))
      goto done;
    fzBufAppend(&elts, &e, sizeof e);
    splat = true;
  }
  if (!fzpExpect(p, FZ_TOK_GREATER, "expected '>' to close dense elements"))
    goto done;
  FzToken typeTok = p->tok;
  if (!type) {
    if (!fzpExpect(p, FZ_TOK_COLON, "expected ':' after dense elements"))
      goto done;
    typeTok = p->tok;
    if (!(type = fzpParseType(p)))
      goto done;
  } else {
    typeTok = kw;
  }
  FzTypeKind tk = fzTypeGetKind(type);
  if ((tk != FZ_TYPE_TENSOR && tk != FZ_TYPE_VECTOR) ||
      fzShapedTypeGetRank(type) == FZ_UNRANKED) {
    fzpErrorAt(p, &typeTok,
               "elements literal must be a ranked tensor or vector type");
    goto done;
  }
  if (!fzShapedTypeHasStaticShape(type)) {
    fzpErrorAt(p, &typeTok, "elements literal type must have static shape");
    goto done;
  }
  FzType *elt = fzShapedTypeGetElementType(type);
  if (!fzTypeIsFloat(elt) && !fzTypeIsIntOrIndex(elt)) {
    type_error(p, &typeTok,
               "dense elements of type '%s' are not supported (expected an "
               "integer, index or float element type)",
               elt);
    goto done;
  }
  int64_t count = fzShapedTypeGetNumElements(type);
  size_t eltSize = fzTypeGetStorageSize(elt);
  if (empty) {
    if (count != 0) {
      type_error(p, &typeTok,
                 "parsed zero elements, but type ('%s') expected at least 1",
                 type);
      goto done;
    }
  } else if (hexTok.kind == FZ_TOK_STRING) {
    bool ok;
    FzStringRef s = fzpStringValue(p, &hexTok, &ok);
    if (!ok)
      goto done;
    if (s.length < 2 || s.data[0] != '0' || s.data[1] != 'x' ||
        (s.length % 2) != 0) {
      fzpErrorAt(p, &hexTok, "expected a hex string \"0x...\" in dense "
                             "elements (string elements are not supported "
                             "by fuse)");
      goto done;
    }
    for (size_t i = 2; i < s.length; i += 2) {
      char hi = s.data[i], lo = s.data[i + 1];
      int h = (hi >= '0' && hi <= '9')   ? hi - '0'
              : (hi >= 'a' && hi <= 'f') ? hi - 'a' + 10
              : (hi >= 'A' && hi <= 'F') ? hi - 'A' + 10
                                         : -1;
      int l = (lo >= '0' && lo <= '9')   ? lo - '0'
              : (lo >= 'a' && lo <= 'f') ? lo - 'a' + 10
              : (lo >= 'A' && lo <= 'F') ? lo - 'A' + 10
                                         : -1;
      if (h < 0 || l < 0) {
        fzpErrorAt(p, &hexTok, "expected a hex string \"0x...\" in dense "
                               "elements");
        goto done;
      }
      fzBufPutc(&data, (char)(h * 16 + l));
    }
    bool isI1 = fzTypeGetKind(elt) == FZ_TYPE_INTEGER &&
                fzTypeGetBitWidth(elt) == 1;
    size_t packed = ((size_t)count + 7) / 8;
    if (isI1 && count > 0 && data.len == packed &&
        data.len != (size_t)count) {
      /* MLIR's i1 storage: 8 elements per byte, low bit first. */
      FzBuf bytes;
      fzBufInit(&bytes, p->ctx);
      for (int64_t i = 0; i < count; ++i)
        fzBufPutc(&bytes,
                  (char)(((unsigned char)data.data[i / 8] >> (i % 8)) & 1));
      fzBufFree(&data);
      data = bytes;
    } else if (!(data.len == eltSize && count > 0) &&
               data.len != (size_t)count * eltSize) {
      type_error(p, &typeTok,
                 "elements hex data size is invalid for provided type: '%s'",
                 type);
      goto done;
    }
  } else {
    size_t n = elts.len / sizeof(FzpElt);
    if (!splat) {
      size_t trank = fzShapedTypeGetRank(type);
      const int64_t *shape = fzShapedTypeGetShape(type);
      const int64_t *got = (const int64_t *)dims.data;
      bool same = rank == trank;
      for (size_t i = 0; same && i < rank; ++i)
        same = got[i] == shape[i];
      if (!same) {
        FzBuf msg;
        fzBufInit(&msg, p->ctx);
        fzBufPuts(&msg, "inferred shape of elements literal (");
        put_shape(&msg, got, rank);
        fzBufPuts(&msg, ") does not match type (");
        put_shape(&msg, shape, trank);
        fzBufPuts(&msg, ")");
        fzpErrorAt(p, &typeTok, "%s", msg.data ? msg.data : "shape mismatch");
        fzBufFree(&msg);
        goto done;
      }
    } else if (count == 0) {
      fzpErrorAt(p, &typeTok,
                 "a splat dense literal needs a type with at least one "
                 "element");
      goto done;
    }
    const FzpElt *e = (const FzpElt *)elts.data;
    for (size_t i = 0; i < n; ++i)
      if (!encode_elt(p, &e[i], elt, &data))
        goto done;
  }
  if (data.failed) {
    fzpOutOfMemory(p);
    goto done;
  }
  result = fzDenseAttrGet(p->ctx, type, data.data ? data.data : "", data.len);
  if (!result)
    fzpOutOfMemory(p);
done:
  fzBufFree(&elts);
  fzBufFree(&dims);
  fzBufFree(&counts);
  fzBufFree(&data);
  return result;
}

/* array '<' type (':' element (',' element)*)? '>' */
static FzAttr *parse_dense_array(FzAsmParser *p) {
  fzpAdvance(p);
  if (!fzpExpect(p, FZ_TOK_LESS, "expected '<' after 'array'"))
    return NULL;
  FzToken typeTok = p->tok;
  FzType *elt = fzpParseType(p);
  if (!elt)
    return NULL;
  if (!fzTypeIsInteger(elt) && fzTypeGetKind(elt) != FZ_TYPE_F32 &&
      fzTypeGetKind(elt) != FZ_TYPE_F64) {
    type_error(p, &typeTok,
               "expected an integer, f32 or f64 element type for array, got "
               "'%s'",
               elt);
    return NULL;
  }
  /* As MLIR: whole bytes per element, or i1 (booleans). */
  unsigned width = fzTypeGetBitWidth(elt);
  if (fzTypeIsInteger(elt) && width != 1 && width % 8 != 0) {
    fzpErrorAt(p, &typeTok, "element type bitwidth must be a multiple of 8");
    return NULL;
  }
  FzBuf data;
  fzBufInit(&data, p->ctx);
  FzAttr *result = NULL;
  size_t n = 0;
  if (fzpConsumeIf(p, FZ_TOK_COLON)) {
    do {
      FzpElt e;
      if (!parse_elt(p, &e) || !encode_elt(p, &e, elt, &data))
        goto done;
      ++n;
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  }
  if (!fzpExpect(p, FZ_TOK_GREATER, "expected '>' to close an array attribute"))
    goto done;
  if (data.failed) {
    fzpOutOfMemory(p);
    goto done;
  }
  result = fzDenseArrayAttrGet(p->ctx, elt, n, data.data);
  if (!result)
    fzpOutOfMemory(p);
done:
  fzBufFree(&data);
  return result;
}

/*===--- Aggregates and symbols -------------------------------------------===*/

static FzAttr *parse_array(FzAsmParser *p) {
  fzpAdvance(p); /* [ */
  size_t base = p->ptrStack.len;
  FzAttr *result = NULL;
  if (!fzpIs(p, FZ_TOK_RSQUARE)) {
    do {
      FzAttr *a = fzpParseAttr(p, NULL);
      if (!a)
        goto done;
      if (fzpIs(p, FZ_TOK_COLON) && fzAttrGetKind(a) == FZ_ATTR_STRING) {
        fzpErrorAt(p, &p->tok, "typed string attributes (\"x\" : type) are "
                               "not supported by fuse");
        goto done;
      }
      if (!fzPtrVecPush(&p->ptrStack, a)) {
        fzpOutOfMemory(p);
        goto done;
      }
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  }
  if (!fzpExpect(p, FZ_TOK_RSQUARE, "expected ',' or ']' in array attribute"))
    goto done;
  result = fzArrayAttrGet(p->ctx, p->ptrStack.len - base,
                          FZP_AT(FzAttr *, p->ptrStack.data, base));
  if (!result)
    fzpOutOfMemory(p);
done:
  p->ptrStack.len = base;
  return result;
}

static bool is_duplicate(FzAsmParser *p, size_t base, FzIdent *name,
                         FzPtrMap *seen) {
  size_t n = p->namedStack.len / sizeof(FzNamedAttr) - base;
  const FzNamedAttr *e = FZP_AT(const FzNamedAttr, p->namedStack.data, base);
  if (n < 32) {
    for (size_t i = 0; i < n; ++i)
      if (e[i].name == name)
        return true;
    return false;
  }
  if (seen->count == 0)
    for (size_t i = 0; i < n; ++i)
      fzPtrMapPut(seen, e[i].name, (void *)e[i].name);
  if (fzPtrMapContains(seen, name))
    return true;
  fzPtrMapPut(seen, name, name);
  return false;
}

bool fzpParseDictEntries(FzAsmParser *p, size_t *base, size_t *n) {
  *base = p->namedStack.len / sizeof(FzNamedAttr);
  *n = 0;
  if (!fzpEnterNesting(p))
    return false;
  fzpAdvance(p); /* { */
  FzPtrMap seen;
  fzPtrMapInit(&seen, p->ctx);
  bool ok = false;
  if (!fzpIs(p, FZ_TOK_RBRACE)) {
    do {
      FzToken keyTok = p->tok;
      FzStringRef key;
      if (keyTok.kind == FZ_TOK_BARE_IDENT) {
        key = (FzStringRef){keyTok.start, keyTok.len};
      } else if (keyTok.kind == FZ_TOK_STRING) {
        bool sok;
        key = fzpStringValue(p, &keyTok, &sok);
        if (!sok)
          goto done;
        if (key.length == 0) {
          fzpErrorAt(p, &keyTok, "expected valid attribute name");
          goto done;
        }
      } else {
        fzpErrorAt(p, &keyTok, "expected attribute name");
        goto done;
      }
      FzIdent *name = fzIdentGet(p->ctx, key);
      if (!name) {
        fzpOutOfMemory(p);
        goto done;
      }
      if (is_duplicate(p, *base, name, &seen)) {
        fzpErrorAt(p, &keyTok, "duplicate key '%.*s' in dictionary attribute",
                   (int)key.length, key.data);
        goto done;
      }
      fzpAdvance(p);
      FzAttr *value;
      if (fzpConsumeIf(p, FZ_TOK_EQUAL)) {
        if (!(value = fzpParseAttr(p, NULL)))
          goto done;
        if (fzpIs(p, FZ_TOK_COLON) && fzAttrGetKind(value) == FZ_ATTR_STRING) {
          fzpErrorAt(p, &p->tok, "typed string attributes (\"x\" : type) are "
                                 "not supported by fuse");
          goto done;
        }
      } else {
        value = fzUnitAttrGet(p->ctx);
      }
      FzNamedAttr entry = {name, value};
      fzBufAppend(&p->namedStack, &entry, sizeof entry);
      if (p->namedStack.failed) {
        fzpOutOfMemory(p);
        goto done;
      }
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  }
  ok = fzpExpect(p, FZ_TOK_RBRACE, "expected '}' in attribute dictionary");
done:
  fzPtrMapFree(&seen);
  fzpLeaveNesting(p);
  *n = p->namedStack.len / sizeof(FzNamedAttr) - *base;
  if (!ok)
    p->namedStack.len = *base * sizeof(FzNamedAttr);
  return ok;
}

FzAttr *fzpParseDictAttr(FzAsmParser *p) {
  size_t base, n;
  if (!fzpParseDictEntries(p, &base, &n))
    return NULL;
  /* fzpParseDictEntries has rejected duplicate keys, the only error
   * fzDictAttrGet reports at its location: no location is made. */
  FzAttr *d = fzDictAttrGet(p->ctx, n,
                            FZP_AT(const FzNamedAttr, p->namedStack.data, base),
                            fzUnknownLocGet(p->ctx));
  p->namedStack.len = base * sizeof(FzNamedAttr);
  if (!d)
    fzpNoteFailure(p);
  return d;
}

static FzAttr *parse_symbol_ref(FzAsmParser *p) {
  bool ok;
  FzStringRef root = fzpStringValue(p, &p->tok, &ok);
  if (!ok)
    return NULL;
  fzpAdvance(p);
  FzStringRef small[8];
  FzStringRef *nested = small;
  size_t n = 0, cap = 8;
  while (fzpIs(p, FZ_TOK_COLON) && p->tok.start[1] == ':') {
    fzpAdvance(p);
    fzpAdvance(p);
    if (!fzpIs(p, FZ_TOK_AT_IDENT)) {
      fzpErrorAt(p, &p->tok,
                 "expected nested symbol reference identifier");
      return NULL;
    }
    if (n == cap) {
      FzStringRef *bigger =
          fzArenaAlloc(&p->arena, 2 * cap * sizeof *bigger);
      if (!bigger) {
        fzpOutOfMemory(p);
        return NULL;
      }
      memcpy(bigger, nested, n * sizeof *bigger);
      nested = bigger;
      cap *= 2;
    }
    nested[n++] = fzpStringValue(p, &p->tok, &ok);
    if (!ok)
      return NULL;
    fzpAdvance(p);
  }
  FzAttr *a = fzSymbolRefAttrGet(p->ctx, root, n, nested);
  if (!a)
    fzpOutOfMemory(p);
  return a;
}

/* '#' alias-name, or an opaque dialect attribute. */
static FzAttr *parse_hash_attr(FzAsmParser *p) {
  FzToken t = p->tok;
  const char *name = t.start + 1;
  size_t len = t.len - 1;
  const char *identEnd = t.start + t.len;
  const char *dot = memchr(name, '.', len);
  if (!dot && *identEnd != '<') {
    FzpAlias *a = fzpLookupAlias(p, name, len, 0);
    if (!a) {
      fzpErrorAt(p, &t, "undefined symbol alias id '%.*s'", (int)len, name);
      return NULL;
    }
    fzpAdvance(p);
    if (a->attr)
      return a->attr;
    /* A location alias as a value is a location attribute, as mlir-opt
     * prints `{l = loc(...)}`: `{l = #loc}`. */
    if (!a->loc) {
      fzpErrorAt(p, &t, "expected attribute, but '#%.*s' is no attribute or "
                 "location alias", (int)len, name);
      return NULL;
    }
    FzAttr *l = fzLocAttrGet(p->ctx, a->loc);
    if (!l)
      fzpOutOfMemory(p);
    return l;
  }
  FzStringRef dialect, body;
  if (!fzpParseDialectBody(p, &t, name, len, &dialect, &body))
    return NULL;
  FzAttr *a = fzOpaqueAttrGet(p->ctx, dialect, body);
  if (!a)
    fzpOutOfMemory(p);
  return a;
}

/*===--- Dispatch ---------------------------------------------------------===*/

static FzAttr *parse_attr_inner(FzAsmParser *p, FzType *type) {
  FzContext *ctx = p->ctx;
  FzToken t = p->tok;
  switch (t.kind) {
  case FZ_TOK_INTEGER:
  case FZ_TOK_FLOAT:
  case FZ_TOK_MINUS:
    return parse_number(p, type);
  case FZ_TOK_STRING: {
    bool ok;
    FzStringRef s = fzpStringValue(p, &t, &ok);
    if (!ok)
      return NULL;
    fzpAdvance(p);
    FzAttr *a = fzStringAttrGet(ctx, s);
    if (!a)
      fzpOutOfMemory(p);
    return a;
  }
  case FZ_TOK_LSQUARE:
    return parse_array(p);
  case FZ_TOK_LBRACE:
    return fzpParseDictAttr(p);
  case FZ_TOK_AT_IDENT:
    return parse_symbol_ref(p);
  case FZ_TOK_HASH_IDENT:
    return parse_hash_attr(p);
  case FZ_TOK_BARE_IDENT:
    if (fzpIsKeyword(p, "true") || fzpIsKeyword(p, "false")) {
      fzpAdvance(p);
      return fzBoolAttrGet(ctx, t.start[0] == 't');
    }
    if (fzpIsKeyword(p, "unit")) {
      fzpAdvance(p);
      return fzUnitAttrGet(ctx);
    }
    if (fzpIsKeyword(p, "dense"))
      return parse_dense(p, type);
    if (fzpIsKeyword(p, "dense_resource") || fzpIsKeyword(p, "sparse")) {
      /* Not in fuse's attribute vocabulary (docs/textual-format.md). */
      fzpErrorAt(p, &t, "'%.*s' elements attributes are not supported by "
                        "fuse (use dense<...>)", (int)t.len, t.start);
      return NULL;
    }
    if (fzpIsKeyword(p, "array"))
      return parse_dense_array(p);
    if (fzpIsKeyword(p, "loc")) {
      /* A location as an attribute value: loc(...). */
      FzLoc *loc = NULL;
      if (!fzpParseLoc(p, &loc, false))
        return NULL;
      FzAttr *a = fzLocAttrGet(ctx, loc);
      if (!a)
        fzpOutOfMemory(p);
      return a;
    }
    if (!fzpIsTypeStart(p))
      break;
    /* A type used as an attribute. */
    /* fall through */
  case FZ_TOK_LPAREN:
  case FZ_TOK_EXCL_IDENT: {
    FzType *ty = fzpParseType(p);
    if (!ty)
      return NULL;
    FzAttr *a = fzTypeAttrGet(ctx, ty);
    if (!a)
      fzpOutOfMemory(p);
    return a;
  }
  default:
    break;
  }
  fzpErrorAt(p, &t, "expected attribute value");
  return NULL;
}

FzAttr *fzpParseAttr(FzAsmParser *p, FzType *type) {
  if (!fzpEnterNesting(p))
    return NULL;
  FzAttr *a = parse_attr_inner(p, type);
  fzpLeaveNesting(p);
  if (!a)
    p->failed = true;
  return a;
}
