/* ir/print_attrs.c - textual form of types, attributes and locations.
 *
 * Output is MLIR 19's for everything MLIR also has (builtin types, builtin
 * attributes, inline locations), so that fuse's generic form parses in
 * mlir-opt and reads the same; buffer<...> is fuse's own. Notable MLIR
 * rules reproduced here: string escapes are \XX in uppercase hex (so '"'
 * is \22), an i1 integer prints as true/false, array elements omit
 * ": i64" / ": f64", dense elements whose values are all equal print as
 * a splat, and a non-splat dense constant of more than 100 elements
 * prints as a hex string of its little-endian bytes (i1 packed 8 per
 * byte, low bit first).
 *
 * Everything appends to a caller-owned FzBuf; the public fz*Print
 * functions build a temporary buffer and hand it to the callback once.
 */
#include <math.h>

#include "ir/print_internal.h"

/* Elements of a non-splat dense constant above which MLIR prints hex. */
#define HEX_ELEMENTS_THRESHOLD 100

/*===------------------------------------------------------------------===*
 * Text helpers
 *===------------------------------------------------------------------===*/

void fzBufAppendU64(FzBuf *b, uint64_t v) {
  static const char pairs[] =
      "00010203040506070809101112131415161718192021222324"
      "25262728293031323334353637383940414243444546474849"
      "50515253545556575859606162636465666768697071727374"
      "75767778798081828384858687888990919293949596979899";
  if (v < 10) {
    fzPrintPutc(b, (char)('0' + v));
    return;
  }
  unsigned digits = 2;
  for (uint64_t t = v / 100; t; t /= 10)
    digits++;
  if (b->len + digits >= b->cap) { /* grow through the slow path */
    fzPrintPut(b, "00000000000000000000", digits);
    if (b->failed)
      return;
    b->len -= digits;
  }
  /* Digits go straight into the buffer, two at a time from the end. */
  char *end = b->data + b->len + digits;
  b->len += digits;
  *end = 0;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    end -= 2;
    memcpy(end, pairs + 2 * r, 2);
  }
  if (v >= 10)
    memcpy(end - 2, pairs + 2 * v, 2);
  else
    end[-1] = (char)('0' + v);
}

void fzBufAppendI64(FzBuf *b, int64_t v) {
  if (v < 0) {
    fzPrintPutc(b, '-');
    fzBufAppendU64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    fzBufAppendU64(b, (uint64_t)v);
  }
}

static const char kHexDigits[] = "0123456789ABCDEF";

void fzBufAppendEscaped(FzBuf *b, FzStringRef s) {
  size_t start = 0;
  for (size_t i = 0; i < s.length; i++) {
    unsigned char c = (unsigned char)s.data[i];
    if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\')
      continue;
    fzPrintPut(b, s.data + start, i - start);
    char esc[3] = {'\\', '\\', 0};
    if (c == '\\') {
      fzPrintPut(b, esc, 2);
    } else {
      esc[1] = kHexDigits[c >> 4];
      esc[2] = kHexDigits[c & 15];
      fzPrintPut(b, esc, 3);
    }
    start = i + 1;
  }
  fzPrintPut(b, s.data + start, s.length - start);
}

void fzBufAppendQuoted(FzBuf *b, FzStringRef s) {
  fzPrintPutc(b, '"');
  fzBufAppendEscaped(b, s);
  fzPrintPutc(b, '"');
}

static bool is_alpha(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_alnum(unsigned char c) {
  return is_alpha(c) || (c >= '0' && c <= '9');
}

bool fzIsBareIdentifier(FzStringRef s) {
  if (s.length == 0)
    return false;
  unsigned char c0 = (unsigned char)s.data[0];
  if (!is_alpha(c0) && c0 != '_')
    return false;
  for (size_t i = 1; i < s.length; i++) {
    unsigned char c = (unsigned char)s.data[i];
    if (!is_alnum(c) && c != '_' && c != '$' && c != '.')
      return false;
  }
  return true;
}

/* A bare identifier as is, anything else quoted (attribute names,
 * symbol names). */
static void append_keyword_or_string(FzBuf *b, FzStringRef s) {
  if (fzIsBareIdentifier(s))
    fzPrintPut(b, s.data, s.length);
  else
    fzBufAppendQuoted(b, s);
}

static FzStringRef ident_ref(const FzIdent *id) {
  if (!id)
    return (FzStringRef){"", 0};
  return (FzStringRef){id->str, id->len};
}

/* @name; MLIR's marker for an empty one. */
static void append_symbol(FzBuf *b, const FzIdent *id) {
  if (!id || id->len == 0) {
    FZ_PRINT_LIT(b, "@<<INVALID EMPTY SYMBOL>>");
    return;
  }
  fzPrintPutc(b, '@');
  append_keyword_or_string(b, ident_ref(id));
}

/* MLIR prints an unregistered dialect's symbol as prefix.body when the
 * body is an identifier optionally followed by <...>, else prefix<body>. */
static void append_dialect_symbol(FzBuf *b, char prefix, const FzIdent *dialect,
                                  const FzIdent *body) {
  FzStringRef d = ident_ref(dialect), s = ident_ref(body);
  fzPrintPutc(b, prefix);
  fzPrintPut(b, d.data, d.length);
  bool pretty = s.length > 0 && is_alpha((unsigned char)s.data[0]);
  if (pretty) {
    size_t i = 0;
    while (i < s.length && (is_alnum((unsigned char)s.data[i]) ||
                            s.data[i] == '.' || s.data[i] == '_'))
      i++;
    pretty = i == s.length || (s.data[i] == '<' && s.data[s.length - 1] == '>');
  }
  fzPrintPutc(b, pretty ? '.' : '<');
  fzPrintPut(b, s.data, s.length);
  if (!pretty)
    fzPrintPutc(b, '>');
}

/*===------------------------------------------------------------------===*
 * Types
 *===------------------------------------------------------------------===*/

/* "2x?x4x" (every dim followed by 'x'). */
static void append_dims(FzBuf *b, size_t rank, const int64_t *shape) {
  for (size_t i = 0; i < rank; i++) {
    if (shape[i] == FZ_DYNAMIC)
      fzPrintPutc(b, '?');
    else
      fzBufAppendI64(b, shape[i]);
    fzPrintPutc(b, 'x');
  }
}

/* A function type's results: one non-function type bare, else (...). */
static void append_result_list(FzBuf *b, size_t n, FzType *const *types) {
  bool wrap = n != 1 || (types[0] && types[0]->kind == FZ_TYPE_FUNCTION);
  if (wrap)
    fzPrintPutc(b, '(');
  for (size_t i = 0; i < n; i++) {
    if (i)
      fzPrintPut(b, ", ", 2);
    fzTypePrintToBuf(b, types[i]);
  }
  if (wrap)
    fzPrintPutc(b, ')');
}

void fzTypePrintToBuf(FzBuf *b, const FzType *t) {
  if (!t) {
    FZ_PRINT_LIT(b, "<<NULL TYPE>>");
    return;
  }
  switch (t->kind) {
  case FZ_TYPE_INTEGER:
    fzPrintPutc(b, 'i');
    fzBufAppendU64(b, t->u.width);
    return;
  case FZ_TYPE_INDEX:
    FZ_PRINT_LIT(b, "index");
    return;
  case FZ_TYPE_F16:
    FZ_PRINT_LIT(b, "f16");
    return;
  case FZ_TYPE_BF16:
    FZ_PRINT_LIT(b, "bf16");
    return;
  case FZ_TYPE_F32:
    FZ_PRINT_LIT(b, "f32");
    return;
  case FZ_TYPE_F64:
    FZ_PRINT_LIT(b, "f64");
    return;
  case FZ_TYPE_NONE:
    FZ_PRINT_LIT(b, "none");
    return;
  case FZ_TYPE_TENSOR:
    FZ_PRINT_LIT(b, "tensor<");
    if (t->u.shaped.rank == FZ_UNRANKED)
      fzPrintPut(b, "*x", 2);
    else
      append_dims(b, t->u.shaped.rank, t->u.shaped.shape);
    fzTypePrintToBuf(b, t->u.shaped.elt);
    fzPrintPutc(b, '>');
    return;
  case FZ_TYPE_VECTOR:
    FZ_PRINT_LIT(b, "vector<");
    append_dims(b, t->u.shaped.rank, t->u.shaped.shape);
    fzTypePrintToBuf(b, t->u.shaped.elt);
    fzPrintPutc(b, '>');
    return;
  case FZ_TYPE_BUFFER:
    FZ_PRINT_LIT(b, "buffer<");
    append_dims(b, t->u.shaped.rank, t->u.shaped.shape);
    fzTypePrintToBuf(b, t->u.shaped.elt);
    if (t->u.shaped.strides) {
      FZ_PRINT_LIT(b, ", strides [");
      for (size_t i = 0; i < t->u.shaped.rank; i++) {
        if (i)
          fzPrintPut(b, ", ", 2);
        if (t->u.shaped.strides[i] == FZ_DYNAMIC)
          fzPrintPutc(b, '?');
        else
          fzBufAppendI64(b, t->u.shaped.strides[i]);
      }
      fzPrintPutc(b, ']');
    }
    if (t->u.shaped.space) {
      fzPrintPut(b, ", ", 2);
      fzBufAppendU64(b, t->u.shaped.space);
    }
    fzPrintPutc(b, '>');
    return;
  case FZ_TYPE_FUNCTION: {
    size_t ni = t->u.func.numInputs;
    fzPrintPutc(b, '(');
    for (size_t i = 0; i < ni; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      fzTypePrintToBuf(b, t->u.func.types[i]);
    }
    fzPrintPut(b, ") -> ", 5);
    append_result_list(b, t->u.func.numResults,
                       t->u.func.types ? t->u.func.types + ni : NULL);
    return;
  }
  case FZ_TYPE_OPAQUE:
    append_dialect_symbol(b, '!', t->u.opaque.dialect, t->u.opaque.body);
    return;
  }
  FZ_PRINT_LIT(b, "<<INVALID TYPE>>");
}

/*===------------------------------------------------------------------===*
 * Dense elements
 *===------------------------------------------------------------------===*/

static int64_t num_elements(const FzType *shaped) {
  int64_t n = 1;
  for (size_t i = 0; i < shaped->u.shaped.rank; i++)
    n *= shaped->u.shaped.shape[i];
  return n;
}

/* Bit width of an integer element (index: 64). */
static unsigned int_width(const FzType *elt) {
  return elt->kind == FZ_TYPE_INTEGER ? elt->u.width : 64;
}

/* Reads the raw little-endian bits of element i (storage size esz). */
static uint64_t read_raw(const uint8_t *data, size_t esz, int64_t i) {
  const uint8_t *p = data + (size_t)i * esz;
  uint64_t v = 0;
  for (size_t k = esz > 8 ? 8 : esz; k-- > 0;)
    v = (v << 8) | p[k];
  return v;
}

/* Integer element i, sign-extended from the element width. */
static int64_t read_int(const uint8_t *data, size_t esz, unsigned width,
                        int64_t i) {
  uint64_t v = read_raw(data, esz, i);
  if (width < 64) {
    uint64_t m = UINT64_C(1) << (width - 1);
    v &= (m << 1) - 1;
    v = (v ^ m) - m;
  }
  return (int64_t)v;
}

static double half_to_double(uint16_t h, bool bf16) {
  unsigned mantBits = bf16 ? 7 : 10, expBits = bf16 ? 8 : 5;
  unsigned expMax = (1u << expBits) - 1, bias = expMax / 2;
  unsigned e = (h >> mantBits) & expMax;
  uint64_t m = h & ((1u << mantBits) - 1);
  uint64_t sign = (uint64_t)(h >> 15) << 63;
  uint64_t bits;
  if (e == expMax) { /* inf/NaN: keep the payload bits */
    bits = sign | (UINT64_C(0x7ff) << 52) | (m << (52 - mantBits));
  } else if (e == 0) {
    double v = ldexp((double)m, 1 - (int)bias - (int)mantBits);
    return h >> 15 ? -v : v;
  } else {
    bits = sign | ((uint64_t)(e - bias + 1023) << 52) | (m << (52 - mantBits));
  }
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* Float element i of a float element type, as a double. */
static double read_float(const uint8_t *data, const FzType *elt, int64_t i) {
  switch (elt->kind) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
    return half_to_double((uint16_t)read_raw(data, 2, i),
                          elt->kind == FZ_TYPE_BF16);
  case FZ_TYPE_F32: {
    uint32_t u = (uint32_t)read_raw(data, 4, i);
    float f;
    memcpy(&f, &u, sizeof f);
    if (f != f) { /* NaN: widen by hand so a signaling one stays so */
      uint64_t bits = ((uint64_t)(u >> 31) << 63) | (UINT64_C(0x7ff) << 52) |
                      ((uint64_t)(u & 0x7fffff) << 29);
      double d;
      memcpy(&d, &bits, sizeof d);
      return d;
    }
    return f;
  }
  default: {
    uint64_t u = read_raw(data, 8, i);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
  }
  }
}

static void append_dense_element(FzBuf *b, const uint8_t *data, size_t esz,
                                 const FzType *elt, int64_t i) {
  if (elt->kind == FZ_TYPE_INTEGER || elt->kind == FZ_TYPE_INDEX) {
    unsigned width = int_width(elt);
    int64_t v = read_int(data, esz, width, i);
    if (width == 1)
      fzBufPuts(b, v ? "true" : "false");
    else
      fzBufAppendI64(b, v);
  } else {
    fzFloatPrintToBuf(b, elt, read_float(data, elt, i), NULL);
  }
}

/* MLIR's raw bytes of the elements: i1 packed low bit first, other
 * integers in ceil(width/8) bytes with bits above the width cleared. */
static void append_dense_hex(FzBuf *b, const uint8_t *data, size_t esz,
                             const FzType *elt, int64_t n) {
  fzPrintPut(b, "\"0x", 3);
  bool isInt = elt->kind == FZ_TYPE_INTEGER || elt->kind == FZ_TYPE_INDEX;
  unsigned width = isInt ? int_width(elt) : 0;
  if (width == 1) {
    for (int64_t i = 0; i < n; i += 8) {
      unsigned byte = 0;
      for (int64_t k = 0; k < 8 && i + k < n; k++)
        if (data[(size_t)(i + k) * esz])
          byte |= 1u << k;
      fzPrintPutc(b, kHexDigits[byte >> 4]);
      fzPrintPutc(b, kHexDigits[byte & 15]);
    }
  } else {
    size_t outBytes = isInt ? (width + 7) / 8 : esz;
    uint64_t mask =
        !isInt || width >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << width) - 1;
    char tmp[16];
    for (int64_t i = 0; i < n; i++) {
      uint64_t v = read_raw(data, esz, i) & mask;
      for (size_t k = 0; k < outBytes; k++) {
        unsigned byte =
            k < 8 ? (unsigned)(v >> (8 * k)) & 0xff : data[(size_t)i * esz + k];
        tmp[2 * (k % 8)] = kHexDigits[byte >> 4];
        tmp[2 * (k % 8) + 1] = kHexDigits[byte & 15];
        if (k % 8 == 7 || k + 1 == outBytes)
          fzPrintPut(b, tmp, 2 * (k % 8 + 1));
      }
    }
  }
  fzPrintPutc(b, '"');
}

/* True when every element equals the first (MLIR stores those as splats). */
static bool dense_all_equal(const uint8_t *data, size_t esz, const FzType *elt,
                            int64_t n) {
  bool isInt = elt->kind == FZ_TYPE_INTEGER || elt->kind == FZ_TYPE_INDEX;
  if (isInt) {
    unsigned width = int_width(elt);
    int64_t first = read_int(data, esz, width, 0);
    for (int64_t i = 1; i < n; i++)
      if (read_int(data, esz, width, i) != first)
        return false;
    return true;
  }
  for (int64_t i = 1; i < n; i++)
    if (memcmp(data, data + (size_t)i * esz, esz) != 0)
      return false;
  return true;
}

static void append_dense(FzBuf *b, const FzAttr *a) {
  const FzType *type = a->type;
  const FzType *elt = type ? type->u.shaped.elt : NULL;
  FZ_PRINT_LIT(b, "dense<");
  if (!type || !elt || !a->u.dense.data) {
    FZ_PRINT_LIT(b, "<<INVALID DENSE>>>");
    return;
  }
  int64_t n = num_elements(type);
  size_t esz = fzTypeGetStorageSize(elt);
  const uint8_t *data = a->u.dense.data;
  if (n == 0 || esz == 0) {
    fzPrintPutc(b, '>');
  } else if (a->u.dense.splat || dense_all_equal(data, esz, elt, n)) {
    append_dense_element(b, data, esz, elt, 0);
    fzPrintPutc(b, '>');
  } else if (n > HEX_ELEMENTS_THRESHOLD) {
    append_dense_hex(b, data, esz, elt, n);
    fzPrintPutc(b, '>');
  } else {
    /* A mixed-radix counter over the shape: a ']' closes each dimension
     * that rolls over, and the next element reopens them. */
    size_t rank = type->u.shaped.rank;
    const int64_t *shape = type->u.shaped.shape;
    int64_t small[16] = {0};
    int64_t *counter = small;
    if (rank > 16 && !(counter = fzCalloc(a->ctx, rank, sizeof *counter))) {
      FZ_PRINT_LIT(b, "<<OUT OF MEMORY>>>");
      return;
    }
    size_t open = 0;
    for (int64_t i = 0; i < n; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      while (open < rank) {
        fzPrintPutc(b, '[');
        open++;
      }
      append_dense_element(b, data, esz, elt, i);
      if (rank == 0)
        continue;
      counter[rank - 1]++;
      for (size_t d = rank - 1; d > 0; d--) {
        if (counter[d] >= shape[d]) {
          counter[d] = 0;
          counter[d - 1]++;
          open--;
          fzPrintPutc(b, ']');
        }
      }
    }
    while (open-- > 0)
      fzPrintPutc(b, ']');
    fzPrintPutc(b, '>');
    if (counter != small)
      fzFree(a->ctx, counter);
  }
  fzPrintPut(b, " : ", 3);
  fzTypePrintToBuf(b, type);
}

static void append_dense_array(FzBuf *b, const FzAttr *a) {
  const FzType *elt = a->u.darray.elt;
  FZ_PRINT_LIT(b, "array<");
  fzTypePrintToBuf(b, elt);
  if (elt && a->u.darray.n) {
    fzPrintPut(b, ": ", 2);
    size_t esz = fzTypeGetStorageSize(elt);
    for (size_t i = 0; i < a->u.darray.n; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      append_dense_element(b, a->u.darray.data, esz, elt, (int64_t)i);
    }
  }
  fzPrintPutc(b, '>');
}

/*===------------------------------------------------------------------===*
 * Attributes
 *===------------------------------------------------------------------===*/

void fzNamedAttrPrintToBuf(FzBuf *b, const FzNamedAttr *na) {
  append_keyword_or_string(b, ident_ref(na->name));
  if (na->value && na->value->kind == FZ_ATTR_UNIT)
    return;
  fzPrintPut(b, " = ", 3);
  fzAttrPrintToBuf(b, na->value);
}

static bool is_i64(const FzType *t) {
  return t && t->kind == FZ_TYPE_INTEGER && t->u.width == 64;
}

void fzAttrPrintToBufElided(FzBuf *b, const FzAttr *a, bool mayElideType) {
  if (!a) {
    FZ_PRINT_LIT(b, "<<NULL ATTRIBUTE>>");
    return;
  }
  switch (a->kind) {
  case FZ_ATTR_INTEGER:
    if (a->type && a->type->kind == FZ_TYPE_INTEGER && a->type->u.width == 1) {
      fzBufPuts(b, a->u.i ? "true" : "false");
      return;
    }
    fzBufAppendI64(b, a->u.i);
    if (mayElideType && is_i64(a->type))
      return;
    fzPrintPut(b, " : ", 3);
    fzTypePrintToBuf(b, a->type);
    return;
  case FZ_ATTR_FLOAT: {
    bool hex = false;
    fzFloatPrintToBuf(b, a->type, a->u.f, &hex);
    if (mayElideType && !hex && a->type && a->type->kind == FZ_TYPE_F64)
      return;
    fzPrintPut(b, " : ", 3);
    fzTypePrintToBuf(b, a->type);
    return;
  }
  case FZ_ATTR_BOOL:
    fzBufPuts(b, a->u.b ? "true" : "false");
    return;
  case FZ_ATTR_UNIT:
    FZ_PRINT_LIT(b, "unit");
    return;
  case FZ_ATTR_STRING:
    fzBufAppendQuoted(b, (FzStringRef){a->u.str.data, a->u.str.len});
    return;
  case FZ_ATTR_TYPE:
    fzTypePrintToBuf(b, a->u.type);
    return;
  case FZ_ATTR_ARRAY:
    fzPrintPutc(b, '[');
    for (size_t i = 0; i < a->u.array.n; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      fzAttrPrintToBufElided(b, a->u.array.elts[i], true);
    }
    fzPrintPutc(b, ']');
    return;
  case FZ_ATTR_DICT:
    fzPrintPutc(b, '{');
    for (size_t i = 0; i < a->u.dict.n; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      fzNamedAttrPrintToBuf(b, &a->u.dict.entries[i]);
    }
    fzPrintPutc(b, '}');
    return;
  case FZ_ATTR_SYMBOL_REF:
    append_symbol(b, a->u.sym.root);
    for (size_t i = 0; i < a->u.sym.n; i++) {
      fzPrintPut(b, "::", 2);
      append_symbol(b, a->u.sym.nested[i]);
    }
    return;
  case FZ_ATTR_DENSE:
    append_dense(b, a);
    return;
  case FZ_ATTR_DENSE_ARRAY:
    append_dense_array(b, a);
    return;
  case FZ_ATTR_OPAQUE:
    append_dialect_symbol(b, '#', a->u.opaque.dialect, a->u.opaque.body);
    return;
  case FZ_ATTR_LOC:
    fzLocPrintToBuf(b, a->u.loc);
    return;
  }
  FZ_PRINT_LIT(b, "<<INVALID ATTRIBUTE>>");
}

void fzAttrPrintToBuf(FzBuf *b, const FzAttr *a) {
  fzAttrPrintToBufElided(b, a, false);
}

/*===------------------------------------------------------------------===*
 * Locations
 *===------------------------------------------------------------------===*/

static void append_loc_body(FzBuf *b, const FzLoc *loc) {
  if (!loc) {
    FZ_PRINT_LIT(b, "unknown");
    return;
  }
  switch (loc->kind) {
  case FZ_LOC_UNKNOWN:
    FZ_PRINT_LIT(b, "unknown");
    return;
  case FZ_LOC_FILE_LINE_COL:
    fzBufAppendQuoted(b, ident_ref(loc->u.flc.file));
    fzPrintPutc(b, ':');
    fzBufAppendU64(b, loc->u.flc.line);
    fzPrintPutc(b, ':');
    fzBufAppendU64(b, loc->u.flc.col);
    return;
  case FZ_LOC_NAME:
    fzBufAppendQuoted(b, ident_ref(loc->u.name.name));
    if (loc->u.name.child && loc->u.name.child->kind != FZ_LOC_UNKNOWN) {
      fzPrintPutc(b, '(');
      append_loc_body(b, loc->u.name.child);
      fzPrintPutc(b, ')');
    }
    return;
  case FZ_LOC_FUSED:
    FZ_PRINT_LIT(b, "fused");
    if (loc->u.fused.meta) {
      fzPrintPutc(b, '<');
      fzAttrPrintToBuf(b, loc->u.fused.meta);
      fzPrintPutc(b, '>');
    }
    fzPrintPutc(b, '[');
    for (size_t i = 0; i < loc->u.fused.n; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      append_loc_body(b, loc->u.fused.locs[i]);
    }
    fzPrintPutc(b, ']');
    return;
  case FZ_LOC_CALLSITE:
    FZ_PRINT_LIT(b, "callsite(");
    append_loc_body(b, loc->u.callsite.callee);
    FZ_PRINT_LIT(b, " at ");
    append_loc_body(b, loc->u.callsite.caller);
    fzPrintPutc(b, ')');
    return;
  }
  FZ_PRINT_LIT(b, "unknown");
}

void fzLocPrintToBuf(FzBuf *b, const FzLoc *loc) {
  fzPrintPut(b, "loc(", 4);
  append_loc_body(b, loc);
  fzPrintPutc(b, ')');
}

/*===------------------------------------------------------------------===*
 * Public entry points
 *===------------------------------------------------------------------===*/

static void emit_buf(FzBuf *b, FzPrintCallback cb, void *userData) {
  if (cb && b->len)
    cb((FzStringRef){b->data, b->len}, userData);
  fzBufFree(b);
}

void fzTypePrint(const FzType *t, FzPrintCallback cb, void *userData) {
  if (!t) {
    if (cb)
      cb(FZ_STR("<<NULL TYPE>>"), userData);
    return;
  }
  FzBuf b;
  fzBufInit(&b, t->ctx);
  fzTypePrintToBuf(&b, t);
  emit_buf(&b, cb, userData);
}

void fzAttrPrint(const FzAttr *a, FzPrintCallback cb, void *userData) {
  if (!a) {
    if (cb)
      cb(FZ_STR("<<NULL ATTRIBUTE>>"), userData);
    return;
  }
  FzBuf b;
  fzBufInit(&b, a->ctx);
  fzAttrPrintToBuf(&b, a);
  emit_buf(&b, cb, userData);
}

void fzLocPrint(const FzLoc *loc, FzPrintCallback cb, void *userData) {
  if (!loc) {
    if (cb)
      cb(FZ_STR("loc(unknown)"), userData);
    return;
  }
  FzBuf b;
  fzBufInit(&b, loc->ctx);
  fzLocPrintToBuf(&b, loc);
  emit_buf(&b, cb, userData);
}

static void write_to_file(FzStringRef chunk, void *userData) {
  fwrite(chunk.data, 1, chunk.length, (FILE *)userData);
}

void fzTypeDump(const FzType *t, FILE *out) {
  fzTypePrint(t, write_to_file, out ? out : stderr);
}

void fzAttrDump(const FzAttr *a, FILE *out) {
  fzAttrPrint(a, write_to_file, out ? out : stderr);
}
