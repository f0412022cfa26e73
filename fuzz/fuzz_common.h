/* fuzz_common.h - helpers shared by the libFuzzer targets of fuzz/.
 *
 * Header-only (every target is one .c file): a diagnostic handler that
 * swallows the expected errors, a growable byte buffer for printers, and
 * a context with every dialect and pass registered. A harness aborts
 * (which libFuzzer reports as a crash) only on a broken invariant of the
 * library, never on an input the library rightly rejects.
 */
#ifndef FZ_FUZZ_COMMON_H
#define FZ_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/fz.h"

/* Claims every diagnostic: rejected input is expected and not printed
 * (set FZ_FUZZ_VERBOSE=1 to see them while minimizing a crash). */
static inline bool fuzz_quiet_handler(const FzDiagnostic *d, void *ud) {
  (void)ud;
  if (getenv("FZ_FUZZ_VERBOSE")) {
    FzStringRef m = fzDiagnosticGetMessage(d);
    fprintf(stderr, "diag: %.*s\n", (int)m.length, m.data);
  }
  return true;
}

typedef struct FuzzBuf {
  char *data;
  size_t size, cap;
} FuzzBuf;

static inline void fuzz_buf_append(FzStringRef chunk, void *ud) {
  FuzzBuf *b = ud;
  if (b->size + chunk.length + 1 > b->cap) {
    size_t cap = (b->cap + chunk.length + 1) * 2;
    char *p = realloc(b->data, cap);
    if (!p) abort();
    b->data = p;
    b->cap = cap;
  }
  if (chunk.length) memcpy(b->data + b->size, chunk.data, chunk.length);
  b->size += chunk.length;
  b->data[b->size] = '\0';
}

static inline FzStringRef fuzz_buf_ref(const FuzzBuf *b) {
  return (FzStringRef){b->data ? b->data : "", b->size};
}

/* A context with every dialect and pass registered and diagnostics
 * swallowed; aborts only when registration itself fails. */
static inline FzContext *fuzz_context_create(void) {
  FzContext *ctx = fzContextCreate();
  if (!ctx || !fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx) ||
      !fzContextPushDiagHandler(ctx, fuzz_quiet_handler, NULL))
    abort();
  return ctx;
}

/* Reports a broken invariant with both texts, then aborts. */
static inline void fuzz_fail(const char *what, FzStringRef a, FzStringRef b) {
  fprintf(stderr, "fuzz invariant broken: %s\n---- first\n%.*s\n---- second\n%.*s\n",
          what, (int)a.length, a.data, (int)b.length, b.data);
  abort();
}

#endif /* FZ_FUZZ_COMMON_H */
