/* runtime/npy.c - reading and writing NumPy .npy files as FzTensor.
 *
 * Format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor
 * version byte, the header length (2 bytes little-endian in version 1, 4
 * in versions 2 and 3), then the header: a Python dict literal with the
 * keys 'descr', 'fortran_order' and 'shape', padded with spaces and a
 * newline; then the raw elements.
 *
 * Read: versions 1-3; byte orders '<', '|', '=' (the host is
 * little-endian) and '>' (swapped); dtypes f2 f4 f8, i1 i2 i4 i8, b1 / ?,
 * and V2 as bf16 (numpy has no bfloat16: ml_dtypes arrays save as 2-byte
 * void, which is how we write bf16 too); C or Fortran order (Fortran is
 * transposed to C). Any malformed, truncated or oversized input is one
 * error naming the file and what is wrong, never a crash; trailing bytes
 * after the data are an error too (they mean the header lied).
 * Write: version 1 (2 when the header would not fit), C order, the
 * header padded so the data starts at a multiple of 64 bytes, as numpy
 * does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fz/graph.h"
#include "ir/util.h"

#define NPY_MAX_HEADER (1u << 20)

typedef struct Reader {
  FzContext *ctx;
  const char *name;
  const char *begin, *p, *end; /* the header text */
} Reader;

static bool npy_error(FzContext *ctx, const char *name, const char *fmt, ...)
    FZ_PRINTF(3, 4);
static bool npy_error(FzContext *ctx, const char *name, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return fzEmitError(ctx, NULL, "%s: %s", name, msg);
}

static void skip_space(Reader *r) {
  while (r->p < r->end &&
         (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
    r->p++;
}

static bool expect(Reader *r, char c) {
  skip_space(r);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return true;
  }
  return npy_error(r->ctx, r->name,
                   "malformed header: expected '%c' at "
                   "header offset %td",
                   c, r->p - r->begin);
}

/* A Python string literal in single or double quotes (no escapes). */
static bool read_string(Reader *r, const char **s, size_t *len) {
  skip_space(r);
  if (r->p >= r->end || (*r->p != '\'' && *r->p != '"'))
    return npy_error(r->ctx, r->name,
                     "malformed header: expected a quoted "
                     "string");
  char q = *r->p++;
  const char *start = r->p;
  while (r->p < r->end && *r->p != q)
    r->p++;
  if (r->p >= r->end)
    return npy_error(r->ctx, r->name,
                     "malformed header: unterminated "
                     "string");
  *s = start;
  *len = (size_t)(r->p - start);
  r->p++;
  return true;
}

static bool read_int(Reader *r, int64_t *out) {
  skip_space(r);
  int64_t v = 0;
  const char *start = r->p;
  while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
    if (v > (INT64_MAX - 9) / 10)
      return npy_error(r->ctx, r->name, "shape dimension is too large");
    v = v * 10 + (*r->p++ - '0');
  }
  if (r->p == start)
    return npy_error(r->ctx, r->name,
                     "malformed header: expected a "
                     "non-negative integer in 'shape'");
  if (r->p < r->end && (*r->p == 'L' || *r->p == 'l'))
    r->p++; /* Python 2 long */
  *out = v;
  return true;
}

typedef struct Header {
  char order;  /* '<' or '>' after normalization */
  char kind;   /* f i b V */
  size_t size; /* bytes per element */
  bool fortran;
  size_t rank;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  bool haveDescr, haveOrder, haveShape;
} Header;

static bool parse_descr(Reader *r, Header *h, const char *s, size_t len) {
  char buf[32];
  if (len == 0 || len >= sizeof buf)
    return npy_error(r->ctx, r->name,
                     "unsupported dtype descr of length "
                     "%zu",
                     len);
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (strcmp(buf, "?") == 0 || strcmp(buf, "bool") == 0) {
    h->order = '<';
    h->kind = 'b';
    h->size = 1;
    return true;
  }
  char o = buf[0];
  const char *rest = buf;
  if (o == '<' || o == '>' || o == '|' || o == '=')
    rest++;
  else
    o = '=';
  h->order = o == '>' ? '>' : '<';
  h->kind = rest[0];
  char *endp;
  long size = strtol(rest + 1, &endp, 10);
  if (rest[0] == '\0' || *endp != '\0' || size <= 0)
    return npy_error(r->ctx, r->name, "unsupported dtype '%s'", buf);
  h->size = (size_t)size;
  bool ok =
      (h->kind == 'f' && (size == 2 || size == 4 || size == 8)) ||
      (h->kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8)) ||
      (h->kind == 'b' && size == 1) || (h->kind == 'V' && size == 2);
  if (!ok) {
    if (h->kind == 'u')
      return npy_error(r->ctx, r->name,
                       "unsupported dtype '%s': unsigned "
                       "integers are not supported (convert "
                       "to a signed type)",
                       buf);
    return npy_error(r->ctx, r->name,
                     "unsupported dtype '%s' (supported: "
                     "f2 f4 f8 i1 i2 i4 i8 b1, and V2 as "
                     "bf16)",
                     buf);
  }
  return true;
}

static bool parse_header(Reader *r, Header *h) {
  memset(h, 0, sizeof *h);
  if (!expect(r, '{'))
    return false;
  for (;;) {
    skip_space(r);
    if (r->p < r->end && *r->p == '}') {
      r->p++;
      break;
    }
    const char *key;
    size_t klen;
    if (!read_string(r, &key, &klen) || !expect(r, ':'))
      return false;
    skip_space(r);
    if (klen == 5 && memcmp(key, "descr", 5) == 0) {
      const char *s;
      size_t len;
      if (r->p < r->end && *r->p == '[')
        return npy_error(r->ctx, r->name,
                         "structured dtypes are not "
                         "supported");
      if (!read_string(r, &s, &len) || !parse_descr(r, h, s, len))
        return false;
      h->haveDescr = true;
    } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
      if (r->end - r->p >= 4 && memcmp(r->p, "True", 4) == 0) {
        h->fortran = true;
        r->p += 4;
      } else if (r->end - r->p >= 5 && memcmp(r->p, "False", 5) == 0) {
        h->fortran = false;
        r->p += 5;
      } else {
        return npy_error(r->ctx, r->name,
                         "malformed header: "
                         "'fortran_order' must be True or "
                         "False");
      }
      h->haveOrder = true;
    } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
      if (!expect(r, '('))
        return false;
      skip_space(r);
      while (r->p < r->end && *r->p != ')') {
        int64_t d = 0;
        if (h->rank >= FZ_GRAPH_MAX_RANK)
          return npy_error(r->ctx, r->name, "rank above the maximum (%d)",
                           FZ_GRAPH_MAX_RANK);
        if (!read_int(r, &d))
          return false;
        h->shape[h->rank++] = d;
        skip_space(r);
        if (r->p < r->end && *r->p == ',')
          r->p++;
        else
          break;
        skip_space(r);
      }
      if (!expect(r, ')'))
        return false;
      h->haveShape = true;
    } else {
      return npy_error(r->ctx, r->name,
                       "malformed header: unknown key "
                       "'%.*s'",
                       (int)klen, key);
    }
    skip_space(r);
    if (r->p < r->end && *r->p == ',')
      r->p++;
  }
  if (!h->haveDescr || !h->haveOrder || !h->haveShape)
    return npy_error(r->ctx, r->name, "malformed header: missing '%s'",
                     !h->haveDescr   ? "descr"
                     : !h->haveOrder ? "fortran_order"
                                     : "shape");
  return true;
}

static FzType *dtype_of(FzContext *ctx, const Header *h) {
  switch (h->kind) {
  case 'f':
    return h->size == 2   ? fzF16TypeGet(ctx)
           : h->size == 4 ? fzF32TypeGet(ctx)
                          : fzF64TypeGet(ctx);
  case 'i':
    return fzIntegerTypeGet(ctx, (unsigned)h->size * 8);
  case 'b':
    return fzIntegerTypeGet(ctx, 1);
  default:
    return fzBF16TypeGet(ctx);
  }
}

FzTensor *fzNpyReadBuffer(FzContext *ctx, const void *data, size_t size,
                          const char *name) {
  const unsigned char *b = data;
  if (!name)
    name = "<buffer>";
  if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
    npy_error(ctx, name, "not a .npy file (missing the \\x93NUMPY magic)");
    return NULL;
  }
  unsigned major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      npy_error(ctx, name, "truncated header");
      return NULL;
    }
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
           (size_t)b[11] << 24;
    hstart = 12;
  } else {
    npy_error(ctx, name, "unsupported .npy format version %u.%u", major, b[7]);
    return NULL;
  }
  if (hlen > NPY_MAX_HEADER || hlen > size - hstart) {
    npy_error(ctx, name,
              "truncated header (%zu bytes announced, %zu in the "
              "file)",
              hlen, size - hstart);
    return NULL;
  }
  Reader r = {ctx, name, (const char *)b + hstart, (const char *)b + hstart,
              (const char *)b + hstart + hlen};
  Header h;
  if (!parse_header(&r, &h))
    return NULL;
  int64_t n = 1;
  for (size_t i = 0; i < h.rank; ++i) {
    if (h.shape[i] > FZ_MAX_DIM ||
        (h.shape[i] && n > FZ_MAX_ELEMENTS / h.shape[i])) {
      npy_error(ctx, name, "shape is too large");
      return NULL;
    }
    n *= h.shape[i];
  }
  size_t dataStart = hstart + hlen, avail = size - dataStart, need;
  if (!fzMulSize((size_t)n, h.size, &need)) {
    npy_error(ctx, name, "shape is too large");
    return NULL;
  }
  if (avail < need) {
    npy_error(ctx, name, "truncated data: %zu bytes expected, %zu present",
              need, avail);
    return NULL;
  }
  if (avail > need) {
    npy_error(ctx, name, "%zu unexpected bytes after the data", avail - need);
    return NULL;
  }
  FzTensor *t = fzTensorCreate(ctx, dtype_of(ctx, &h), h.rank, h.shape);
  if (!t)
    return NULL;
  const unsigned char *src = b + dataStart;
  unsigned char *dst = t->data;
  size_t esz = h.size;
  int64_t fstr[FZ_GRAPH_MAX_RANK];
  int64_t idx[FZ_GRAPH_MAX_RANK] = {0};
  int64_t s = 1;
  for (size_t i = 0; i < h.rank; ++i) {
    fstr[i] = s;
    s *= h.shape[i];
  }
  int64_t off = 0; /* Fortran offset of the current C-order element */
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char *e = src + (size_t)(h.fortran ? off : i) * esz;
    unsigned char *o = dst + (size_t)i * esz;
    for (size_t k = 0; k < esz; ++k)
      o[k] = h.order == '>' ? e[esz - 1 - k] : e[k];
    if (h.kind == 'b')
      o[0] = o[0] != 0;
    if (h.fortran)
      for (size_t d = h.rank; d-- > 0;) {
        off += fstr[d];
        if (++idx[d] < h.shape[d])
          break;
        off -= fstr[d] * h.shape[d];
        idx[d] = 0;
      }
  }
  return t;
}

FzTensor *fzNpyReadFile(FzContext *ctx, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    npy_error(ctx, path, "cannot open: %s", strerror(errno));
    return NULL;
  }
  FzBuf buf;
  fzBufInit(&buf, ctx);
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
    fzBufAppend(&buf, chunk, got);
  bool readError = ferror(f) != 0;
  fclose(f);
  FzTensor *t = NULL;
  if (readError)
    npy_error(ctx, path, "read error");
  else if (buf.failed)
    npy_error(ctx, path, "out of memory while reading");
  else
    t = fzNpyReadBuffer(ctx, buf.data ? buf.data : "", buf.len, path);
  fzBufFree(&buf);
  return t;
}

/*===--- Writing --------------------------------------------------------===*/

static const char *descr_of(const FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
    return "<f2";
  case FZ_TYPE_BF16:
    return "<V2";
  case FZ_TYPE_F32:
    return "<f4";
  case FZ_TYPE_F64:
    return "<f8";
  default:
    switch (fzTypeGetBitWidth(t)) {
    case 1:
      return "|b1";
    case 8:
      return "|i1";
    case 16:
      return "<i2";
    case 32:
      return "<i4";
    default:
      return "<i8";
    }
  }
}

void fzNpySerialize(const FzTensor *t, FzPrintCallback cb, void *ud) {
  char dict[64 + 24 * FZ_GRAPH_MAX_RANK];
  int len = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr_of(t->dtype));
  for (size_t i = 0; i < t->rank; ++i)
    len += snprintf(dict + len, sizeof dict - (size_t)len, "%s%lld",
                    i ? ", " : "", (long long)t->shape[i]);
  len += snprintf(dict + len, sizeof dict - (size_t)len, "%s), }",
                  t->rank == 1 ? "," : "");
  /* Pad with spaces so that the data starts at a multiple of 64. */
  size_t total = 10 + (size_t)len + 1;
  size_t padded = (total + 63) / 64 * 64;
  size_t hlen = padded - 10;
  unsigned char pre[10] = {0x93,
                           'N',
                           'U',
                           'M',
                           'P',
                           'Y',
                           1,
                           0,
                           (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  cb((FzStringRef){(const char *)pre, 10}, ud);
  cb((FzStringRef){dict, (size_t)len}, ud);
  char spaces[64];
  memset(spaces, ' ', sizeof spaces);
  cb((FzStringRef){spaces, hlen - (size_t)len - 1}, ud);
  cb(FZ_STR("\n"), ud);
  cb((FzStringRef){t->data, fzTensorGetNumBytes(t)}, ud);
}

typedef struct FileSink {
  FILE *f;
  bool failed;
} FileSink;

static void file_put(FzStringRef chunk, void *ud) {
  FileSink *s = ud;
  if (chunk.length && fwrite(chunk.data, 1, chunk.length, s->f) != chunk.length)
    s->failed = true;
}

bool fzNpyWriteFile(const FzTensor *t, const char *path) {
  FzContext *ctx = t->ctx;
  size_t plen = strlen(path);
  char *tmp = fzMalloc(ctx, plen + 16);
  if (!tmp)
    return false;
  snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    npy_error(ctx, path, "cannot create a temporary file: %s", strerror(errno));
    fzFree(ctx, tmp);
    return false;
  }
  (void)fchmod(fd, 0644); /* mkstemp creates 0600 */
  FileSink s = {fdopen(fd, "wb"), false};
  if (!s.f) {
    close(fd);
    s.failed = true;
  } else {
    fzNpySerialize(t, file_put, &s);
    if (fclose(s.f) != 0)
      s.failed = true;
  }
  bool ok = !s.failed && rename(tmp, path) == 0;
  if (!ok) {
    npy_error(ctx, path, "cannot write: %s", strerror(errno));
    unlink(tmp);
  }
  fzFree(ctx, tmp);
  return ok;
}
