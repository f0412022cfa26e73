/* ir/util.h - small containers used inside the library: context-backed
 * allocation, a bump arena, a growable byte buffer, and a pointer-keyed
 * hash map. Private to the library (not installed).
 *
 * All allocation goes through the context so that an embedder's
 * allocator sees everything and an allocation failure is recorded in the
 * context's sticky flag (and reported once as an error). Every function
 * here that can fail returns NULL/false and never aborts.
 */
#ifndef FZ_IR_UTIL_H
#define FZ_IR_UTIL_H

#include <stdarg.h>
#include <string.h>

#include "fz/ir.h"

/* A hint to fetch the memory at p into the cache; never faults, so p
 * may be NULL or dangling. */
#if defined(__GNUC__) || defined(__clang__)
#define FZ_PREFETCH(p) __builtin_prefetch(p)
#else
#define FZ_PREFETCH(p) ((void)(p))
#endif

/* Context-backed heap. fzFree(ctx, NULL) is fine. Sizes are tracked in a
 * header so callers need not remember them. */
void *fzMalloc(FzContext *ctx, size_t size);
void *fzCalloc(FzContext *ctx, size_t count, size_t size);
void *fzRealloc(FzContext *ctx, void *ptr, size_t newSize);
void fzFree(FzContext *ctx, void *ptr);
/* Records an allocation failure (sticky flag + one error diagnostic). */
void fzNoteAllocationFailure(FzContext *ctx);
/* Copies through the context, NUL-terminated; NULL when out of memory
 * (recorded). fzStrDupN copies n bytes of s (which may hold no NUL). */
char *fzStrDup(FzContext *ctx, const char *s);
char *fzStrDupN(FzContext *ctx, const char *s, size_t n);
/* A printf-formatted string through the context; NULL when out of memory
 * (recorded) or the format fails. */
char *fzStrPrintf(FzContext *ctx, const char *fmt, ...) FZ_PRINTF(2, 3);
char *fzStrVPrintf(FzContext *ctx, const char *fmt, va_list ap);

/* Overflow-checked size arithmetic: false on overflow. */
bool fzMulSize(size_t a, size_t b, size_t *out);
bool fzAddSize(size_t a, size_t b, size_t *out);

/* A bump arena: many small allocations freed together. */
typedef struct FzArenaChunk FzArenaChunk;
typedef struct FzArena {
  FzContext *ctx;
  FzArenaChunk *chunks; /* newest first */
  char *cur, *end;
} FzArena;
void fzArenaInit(FzArena *a, FzContext *ctx);
/* 16-byte aligned; NULL on allocation failure. */
void *fzArenaAlloc(FzArena *a, size_t size);
void *fzArenaDup(FzArena *a, const void *data, size_t size);
/* Frees every chunk; the arena can be used again afterwards. */
void fzArenaReset(FzArena *a);

/* A growable byte buffer (always NUL-terminated when data != NULL). */
typedef struct FzBuf {
  FzContext *ctx;
  char *data;
  size_t len, cap;
  bool failed; /* an append ran out of memory */
} FzBuf;
void fzBufInit(FzBuf *b, FzContext *ctx);
void fzBufFree(FzBuf *b);
void fzBufClear(FzBuf *b);
void fzBufAppend(FzBuf *b, const void *data, size_t len);
void fzBufPuts(FzBuf *b, const char *s);
void fzBufPutc(FzBuf *b, char c);
void fzBufPrintf(FzBuf *b, const char *fmt, ...) FZ_PRINTF(2, 3);
void fzBufVPrintf(FzBuf *b, const char *fmt, va_list ap);
FzStringRef fzBufRef(const FzBuf *b);

/* Writes a one-line reason (printf-style) into why[0..n) when why is not
 * NULL and n > 0, and returns false: for matchers that explain a refusal
 * (`return fzReasonf(why, n, "groups > 1");`). */
bool fzReasonf(char *why, size_t n, const char *fmt, ...) FZ_PRINTF(3, 4);

/* A growable array of pointers. */
typedef struct FzPtrVec {
  FzContext *ctx;
  void **data;
  size_t len, cap;
} FzPtrVec;
void fzPtrVecInit(FzPtrVec *v, FzContext *ctx);
void fzPtrVecFree(FzPtrVec *v);
bool fzPtrVecPush(FzPtrVec *v, void *p);
static inline void *fzPtrVecPop(FzPtrVec *v) { return v->data[--v->len]; }

/* Open-addressing hash map from non-NULL pointer keys to pointer values. */
typedef struct FzPtrMap {
  FzContext *ctx;
  const void **keys;
  void **values;
  size_t count, cap; /* cap is 0 or a power of two */
  size_t tombstones;
} FzPtrMap;
void fzPtrMapInit(FzPtrMap *m, FzContext *ctx);
void fzPtrMapFree(FzPtrMap *m);
/* false on allocation failure. */
bool fzPtrMapPut(FzPtrMap *m, const void *key, void *value);
/* NULL when absent. */
void *fzPtrMapGet(const FzPtrMap *m, const void *key);
bool fzPtrMapContains(const FzPtrMap *m, const void *key);
void fzPtrMapRemove(FzPtrMap *m, const void *key);

/* 32-bit FNV-1a style hashing helpers (fast, good enough for uniquing). */
uint32_t fzHashBytes(const void *data, size_t len, uint32_t seed);
static inline uint32_t fzHashCombine(uint32_t h, uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdULL;
  v ^= v >> 33;
  return (h ^ (uint32_t)v ^ (uint32_t)(v >> 32)) * 16777619u;
}
static inline uint32_t fzHashPtr(const void *p) {
  return fzHashCombine(0x9e3779b9u, (uint64_t)(uintptr_t)p);
}

#endif /* FZ_IR_UTIL_H */
