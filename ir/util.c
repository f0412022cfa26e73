/* ir/util.c - context-backed allocation and the small containers of
 * ir/util.h.
 *
 * Every heap block carries a 16-byte header holding its size, so that the
 * embedder's Lua-style allocator always receives the old size and callers
 * of fzFree need not remember it. Allocation failures set the context's
 * sticky flag and are reported once as an error diagnostic; nothing here
 * aborts.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ir/internal.h"
#include "ir/type_text.h"

#define FZ_HEADER 16

void fzNoteAllocationFailure(FzContext *ctx) {
  if (!ctx)
    return;
  bool first = !ctx->allocFailed;
  ctx->allocFailed = true;
  if (first && !ctx->reportingAllocFailure) {
    ctx->reportingAllocFailure = true;
    fzEmitError(ctx, NULL, "out of memory");
    ctx->reportingAllocFailure = false;
  }
}

void *fzMalloc(FzContext *ctx, size_t size) {
  size_t total;
  if (!fzAddSize(size, FZ_HEADER, &total)) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  char *p = ctx->alloc.realloc(ctx->alloc.userData, NULL, 0, total);
  if (!p) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  memcpy(p, &size, sizeof size);
  return p + FZ_HEADER;
}

void *fzCalloc(FzContext *ctx, size_t count, size_t size) {
  size_t total;
  if (!fzMulSize(count, size, &total)) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  void *p = fzMalloc(ctx, total);
  if (p)
    memset(p, 0, total);
  return p;
}

void *fzRealloc(FzContext *ctx, void *ptr, size_t newSize) {
  if (!ptr)
    return fzMalloc(ctx, newSize);
  if (newSize == 0) {
    fzFree(ctx, ptr);
    return NULL;
  }
  char *base = (char *)ptr - FZ_HEADER;
  size_t oldSize, total;
  memcpy(&oldSize, base, sizeof oldSize);
  if (!fzAddSize(newSize, FZ_HEADER, &total)) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  char *p = ctx->alloc.realloc(ctx->alloc.userData, base,
                               oldSize + FZ_HEADER, total);
  if (!p) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  memcpy(p, &newSize, sizeof newSize);
  return p + FZ_HEADER;
}

void fzFree(FzContext *ctx, void *ptr) {
  if (!ptr)
    return;
  char *base = (char *)ptr - FZ_HEADER;
  size_t size;
  memcpy(&size, base, sizeof size);
  ctx->alloc.realloc(ctx->alloc.userData, base, size + FZ_HEADER, 0);
}

char *fzStrDupN(FzContext *ctx, const char *s, size_t n) {
  size_t total;
  if (!fzAddSize(n, 1, &total)) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  char *d = fzMalloc(ctx, total);
  if (!d)
    return NULL;
  if (n)
    memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *fzStrDup(FzContext *ctx, const char *s) {
  return fzStrDupN(ctx, s, strlen(s));
}

char *fzStrVPrintf(FzContext *ctx, const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  char *d = n >= 0 ? fzMalloc(ctx, (size_t)n + 1) : NULL;
  if (d)
    vsnprintf(d, (size_t)n + 1, fmt, ap);
  return d;
}

char *fzStrPrintf(FzContext *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *d = fzStrVPrintf(ctx, fmt, ap);
  va_end(ap);
  return d;
}

bool fzMulSize(size_t a, size_t b, size_t *out) {
  if (a && b > SIZE_MAX / a)
    return false;
  *out = a * b;
  return true;
}

bool fzAddSize(size_t a, size_t b, size_t *out) {
  if (a > SIZE_MAX - b)
    return false;
  *out = a + b;
  return true;
}

/*===--- Arena ----------------------------------------------------------===*/

struct FzArenaChunk {
  FzArenaChunk *next;
  size_t size;
  /* data follows, 16-byte aligned */
};

#define FZ_CHUNK_HEADER ((sizeof(FzArenaChunk) + 15) & ~(size_t)15)
#define FZ_CHUNK_DEFAULT (64 * 1024)

void fzArenaInit(FzArena *a, FzContext *ctx) {
  a->ctx = ctx;
  a->chunks = NULL;
  a->cur = a->end = NULL;
}

void *fzArenaAlloc(FzArena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0)
    size = 16;
  if ((size_t)(a->end - a->cur) < size || !a->cur) {
    size_t chunk = size > FZ_CHUNK_DEFAULT / 4 ? size : FZ_CHUNK_DEFAULT;
    size_t total;
    if (!fzAddSize(chunk, FZ_CHUNK_HEADER, &total)) {
      fzNoteAllocationFailure(a->ctx);
      return NULL;
    }
    FzArenaChunk *c = fzMalloc(a->ctx, total);
    if (!c)
      return NULL;
    c->size = chunk;
    char *data = (char *)c + FZ_CHUNK_HEADER;
    if (chunk != FZ_CHUNK_DEFAULT && a->chunks) {
      /* A big one-off block: keep the current chunk for small ones. */
      c->next = a->chunks->next;
      a->chunks->next = c;
      return data;
    }
    c->next = a->chunks;
    a->chunks = c;
    a->cur = data;
    a->end = data + chunk;
  }
  void *p = a->cur;
  a->cur += size;
  return p;
}

void *fzArenaDup(FzArena *a, const void *data, size_t size) {
  void *p = fzArenaAlloc(a, size);
  if (p && size)
    memcpy(p, data, size);
  return p;
}

void fzArenaReset(FzArena *a) {
  FzArenaChunk *c = a->chunks;
  while (c) {
    FzArenaChunk *next = c->next;
    fzFree(a->ctx, c);
    c = next;
  }
  a->chunks = NULL;
  a->cur = a->end = NULL;
}

/*===--- Byte buffer ----------------------------------------------------===*/

void fzBufInit(FzBuf *b, FzContext *ctx) {
  b->ctx = ctx;
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = false;
}

void fzBufFree(FzBuf *b) {
  fzFree(b->ctx, b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void fzBufClear(FzBuf *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = 0;
}

static bool buf_reserve(FzBuf *b, size_t extra) {
  size_t need;
  if (b->failed || !fzAddSize(b->len, extra + 1, &need)) {
    b->failed = true;
    return false;
  }
  if (need <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = fzRealloc(b->ctx, b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void fzBufAppend(FzBuf *b, const void *data, size_t len) {
  if (!buf_reserve(b, len))
    return;
  if (len)
    memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = 0;
}

void fzBufPuts(FzBuf *b, const char *s) { fzBufAppend(b, s, strlen(s)); }

void fzBufPutc(FzBuf *b, char c) {
  if (!buf_reserve(b, 1))
    return;
  b->data[b->len++] = c;
  b->data[b->len] = 0;
}

void fzBufVPrintf(FzBuf *b, const char *fmt, va_list ap) {
  char small[256];
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n < 0)
    return;
  if ((size_t)n < sizeof small) {
    fzBufAppend(b, small, (size_t)n);
    return;
  }
  if (!buf_reserve(b, (size_t)n))
    return;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

bool fzReasonf(char *why, size_t n, const char *fmt, ...) {
  if (why && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
  }
  return false;
}

void fzBufPrintf(FzBuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fzBufVPrintf(b, fmt, ap);
  va_end(ap);
}

FzStringRef fzBufRef(const FzBuf *b) {
  FzStringRef r = {b->data ? b->data : "", b->len};
  return r;
}

/*===--- Pointer vector -------------------------------------------------===*/

void fzPtrVecInit(FzPtrVec *v, FzContext *ctx) {
  v->ctx = ctx;
  v->data = NULL;
  v->len = v->cap = 0;
}

void fzPtrVecFree(FzPtrVec *v) {
  fzFree(v->ctx, v->data);
  v->data = NULL;
  v->len = v->cap = 0;
}

bool fzPtrVecPush(FzPtrVec *v, void *p) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    size_t bytes;
    if (!fzMulSize(cap, sizeof(void *), &bytes))
      return false;
    void **d = fzRealloc(v->ctx, v->data, bytes);
    if (!d)
      return false;
    v->data = d;
    v->cap = cap;
  }
  v->data[v->len++] = p;
  return true;
}

/*===--- Pointer map ----------------------------------------------------===*/

static const char fz_tombstone_storage;
#define FZ_TOMBSTONE ((const void *)&fz_tombstone_storage)

void fzPtrMapInit(FzPtrMap *m, FzContext *ctx) {
  memset(m, 0, sizeof *m);
  m->ctx = ctx;
}

void fzPtrMapFree(FzPtrMap *m) {
  fzFree(m->ctx, m->keys);
  fzFree(m->ctx, m->values);
  m->keys = NULL;
  m->values = NULL;
  m->count = m->cap = m->tombstones = 0;
}

static size_t map_find(const FzPtrMap *m, const void *key, bool *found) {
  size_t mask = m->cap - 1;
  size_t i = fzHashPtr(key) & mask;
  size_t firstTomb = SIZE_MAX;
  for (;;) {
    const void *k = m->keys[i];
    if (k == NULL) {
      *found = false;
      return firstTomb != SIZE_MAX ? firstTomb : i;
    }
    if (k == FZ_TOMBSTONE) {
      if (firstTomb == SIZE_MAX)
        firstTomb = i;
    } else if (k == key) {
      *found = true;
      return i;
    }
    i = (i + 1) & mask;
  }
}

static bool map_grow(FzPtrMap *m) {
  size_t cap = m->cap ? m->cap * 2 : 16;
  if (m->count * 4 < m->cap)
    cap = m->cap; /* mostly tombstones: rehash in place */
  const void **keys = fzCalloc(m->ctx, cap, sizeof *keys);
  void **values = fzCalloc(m->ctx, cap, sizeof *values);
  if (!keys || !values) {
    fzFree(m->ctx, keys);
    fzFree(m->ctx, values);
    return false;
  }
  FzPtrMap n = {m->ctx, keys, values, 0, cap, 0};
  for (size_t i = 0; i < m->cap; ++i) {
    if (m->keys[i] && m->keys[i] != FZ_TOMBSTONE) {
      bool found;
      size_t j = map_find(&n, m->keys[i], &found);
      n.keys[j] = m->keys[i];
      n.values[j] = m->values[i];
      n.count++;
    }
  }
  fzFree(m->ctx, m->keys);
  fzFree(m->ctx, m->values);
  *m = n;
  return true;
}

bool fzPtrMapPut(FzPtrMap *m, const void *key, void *value) {
  if ((m->count + m->tombstones + 1) * 4 > m->cap * 3 && !map_grow(m))
    return false;
  bool found;
  size_t i = map_find(m, key, &found);
  if (!found) {
    if (m->keys[i] == FZ_TOMBSTONE)
      m->tombstones--;
    m->keys[i] = key;
    m->count++;
  }
  m->values[i] = value;
  return true;
}

void *fzPtrMapGet(const FzPtrMap *m, const void *key) {
  if (!m->cap)
    return NULL;
  bool found;
  size_t i = map_find(m, key, &found);
  return found ? m->values[i] : NULL;
}

bool fzPtrMapContains(const FzPtrMap *m, const void *key) {
  if (!m->cap)
    return false;
  bool found;
  map_find(m, key, &found);
  return found;
}

void fzPtrMapRemove(FzPtrMap *m, const void *key) {
  if (!m->cap)
    return;
  bool found;
  size_t i = map_find(m, key, &found);
  if (found) {
    m->keys[i] = FZ_TOMBSTONE;
    m->values[i] = NULL;
    m->count--;
    m->tombstones++;
  }
}

uint32_t fzHashBytes(const void *data, size_t len, uint32_t seed) {
  const unsigned char *p = data;
  uint32_t h = 2166136261u ^ seed;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = fzHashCombine(h, w);
  }
  for (; i < len; ++i)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

/*===--- Strings --------------------------------------------------------===*/

typedef struct TextSink {
  char *buf;
  size_t cap, len;
} TextSink;

static void sink_put(FzStringRef chunk, void *ud) {
  TextSink *s = ud;
  for (size_t i = 0; i < chunk.length && s->len + 1 < s->cap; ++i)
    s->buf[s->len++] = chunk.data[i];
  s->buf[s->len] = '\0';
}

const char *fzTypeText(const FzType *t, char *buf, size_t cap) {
  TextSink s = {buf, cap, 0};
  buf[0] = '\0';
  if (!t) {
    snprintf(buf, cap, "<null>");
    return buf;
  }
  fzTypePrint(t, sink_put, &s);
  if (s.len + 1 >= cap && cap > 4)
    memcpy(buf + cap - 4, "...", 4);
  return buf;
}

const char *fzGetVersionString(void) { return FZ_VERSION_STRING; }

FzStringRef fzStringRefFromCString(const char *s) {
  FzStringRef r = {s ? s : "", s ? strlen(s) : 0};
  return r;
}

bool fzStringRefEqual(FzStringRef a, FzStringRef b) {
  return a.length == b.length &&
         (a.length == 0 || memcmp(a.data, b.data, a.length) == 0);
}
