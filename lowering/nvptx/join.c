/* lowering/nvptx/join.c - the PTX of every kernel's module joined into
 * the one module the driver loads.
 *
 * NVPTX prints each module as: a comment banner, `.version`, `.target`,
 * `.address_size`, then module-level declarations and the functions. The
 * joined text keeps the first banner, one header (the highest .version of
 * the units: each is the least its module needs; .target and
 * .address_size must agree), then the declarations that several modules
 * make of the same symbol, once each, before any use: the `.extern`
 * statements (fz_dyn_smem, the dynamic shared memory) and the definition
 * of fz_status (the run-time checks' status, `.visible` so that the
 * driver finds it); then every unit's remaining text in kernel order.
 * Everything else a module defines is its own: its kernel's `.entry`,
 * and local symbols that codegen.c named ENTRY$NAME; labels are local to
 * their function in PTX.
 *
 * Only lines that start in column 0 are module-level statements; a
 * moved statement ends with the first line that ends in ';' (a function
 * declaration spans lines: its parameters, then ";"); a function's body
 * is indented or between braces, and nothing in it is moved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static void put(FzBuf *t, const char *s, size_t n) {
  if (n)
    fzBufAppend(t, s, n);
}

static bool starts(const char *s, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  return n >= k && !memcmp(s, prefix, k);
}

/* The line at *at of text (len bytes): its start and length without the
 * newline; *at moves past it. */
static const char *next_line(const char *text, size_t len, size_t *at,
                             size_t *n) {
  const char *s = text + *at;
  const char *nl = memchr(s, '\n', len - *at);
  *n = nl ? (size_t)(nl - s) : len - *at;
  *at += *n + (nl != NULL);
  return s;
}

/* Whether the module-level statement starting with line s declares
 * fz_status. */
static bool is_status(const char *s, size_t n) {
  if (!starts(s, n, ".visible .global ") && !starts(s, n, ".global ") &&
      !starts(s, n, ".extern .global "))
    return false;
  for (size_t i = 0; i + 11 <= n; ++i)
    if (!memcmp(s + i, " fz_status[", 11))
      return true;
  return false;
}

static bool ends_statement(const char *s, size_t n) {
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    --n;
  return n && s[n - 1] == ';';
}

/* "X.Y" of `.version X.Y` as X * 1000 + Y. */
static long version_of(const char *s, size_t n) {
  int major = 0, minor = 0;
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)(n < 31 ? n : 31), s);
  return sscanf(buf, ".version %d.%d", &major, &minor) == 2
             ? major * 1000L + minor
             : -1;
}

typedef struct Shared {
  FzBuf decls;   /* the hoisted statements, each once */
  FzPtrVec seen; /* their texts (the context's), to drop repeats */
  bool haveStatus;
} Shared;

static bool seen_before(Shared *sh, const char *s, size_t n) {
  for (size_t i = 0; i < sh->seen.len; ++i) {
    const char *t = sh->seen.data[i];
    if (strlen(t) == n && !memcmp(t, s, n))
      return true;
  }
  char *copy = fzStrDupN(sh->seen.ctx, s, n);
  if (!copy || !fzPtrVecPush(&sh->seen, copy)) {
    fzFree(sh->seen.ctx, copy);
    sh->decls.failed = true;
    return true;
  }
  return false;
}

/* Appends unit U's text after its header to body, moving the shared
 * declarations to sh. */
static void split_body(const FzNvUnit *U, size_t bodyAt, FzBuf *body,
                       Shared *sh) {
  size_t at = bodyAt;
  while (at < U->len) {
    size_t n;
    const char *s = next_line(U->text, U->len, &at, &n);
    bool ext = starts(s, n, ".extern ");
    bool status = !ext && is_status(s, n);
    if (!ext && !status) {
      put(body, s, n);
      put(body, "\n", 1);
      continue;
    }
    /* The whole statement, which may span lines. */
    const char *first = s;
    size_t total = n;
    while (!ends_statement(s, n) && at < U->len) {
      s = next_line(U->text, U->len, &at, &n);
      total = (size_t)(s + n - first);
    }
    if (status && sh->haveStatus)
      continue;
    if (!status && seen_before(sh, first, total))
      continue;
    sh->haveStatus |= status;
    put(&sh->decls, first, total);
    put(&sh->decls, "\n", 1);
  }
}

char *fzNvJoinPtx(FzContext *ctx, const FzNvUnit *units, size_t numUnits,
                  size_t *len) {
  bool error = false;
  FzBuf head, body;
  fzBufInit(&head, ctx);
  fzBufInit(&body, ctx);
  Shared sh = {.haveStatus = false};
  fzBufInit(&sh.decls, ctx);
  fzPtrVecInit(&sh.seen, ctx);
  const char *target = NULL, *addr = NULL;
  size_t targetLen = 0, addrLen = 0;
  const char *version = NULL;
  size_t versionLen = 0;
  long best = -1;
  for (size_t u = 0; u < numUnits && !error; ++u) {
    const FzNvUnit *U = &units[u];
    size_t at = 0;
    bool done = false;
    const char *t = NULL, *a = NULL;
    size_t tn = 0, an = 0;
    long v = -1;
    while (at < U->len && !done) {
      size_t n;
      const char *s = next_line(U->text, U->len, &at, &n);
      if (starts(s, n, ".version ")) {
        v = version_of(s, n);
        if (v > best)
          best = v, version = s, versionLen = n;
      } else if (starts(s, n, ".target ")) {
        t = s, tn = n;
      } else if (starts(s, n, ".address_size ")) {
        a = s, an = n;
        done = true;
      } else if (u == 0) {
        put(&head, s, n); /* the banner */
        put(&head, "\n", 1);
      }
    }
    if (!t || !a || v < 0) {
      fzEmitError(ctx, NULL,
                  "emit-ptx: internal error: the PTX of a kernel has no "
                  ".version, .target or .address_size");
      error = true;
      break;
    }
    if (!target) {
      target = t, targetLen = tn, addr = a, addrLen = an;
    } else if (tn != targetLen || memcmp(t, target, tn) || an != addrLen ||
               memcmp(a, addr, an)) {
      fzEmitError(ctx, NULL,
                  "emit-ptx: internal error: the PTX of kernel '%s' has "
                  "another .target or .address_size",
                  U->name);
      error = true;
      break;
    }
    split_body(U, at, &body, &sh);
  }
  char *out = NULL;
  if (!error) {
    FzBuf all;
    fzBufInit(&all, ctx);
    put(&all, head.data ? head.data : "", head.len);
    put(&all, version, versionLen);
    put(&all, "\n", 1);
    put(&all, target, targetLen);
    put(&all, "\n", 1);
    put(&all, addr, addrLen);
    put(&all, "\n", 1);
    if (sh.decls.len) {
      put(&all, "\n", 1);
      put(&all, sh.decls.data, sh.decls.len);
    }
    put(&all, body.data ? body.data : "", body.len);
    if (all.failed || head.failed || body.failed || sh.decls.failed ||
        !all.data) {
      fzNoteAllocationFailure(ctx); /* (once: a failed append noted it) */
      fzBufFree(&all);
    } else {
      out = all.data;
      *len = all.len;
    }
  }
  fzBufFree(&head);
  fzBufFree(&body);
  fzBufFree(&sh.decls);
  for (size_t i = 0; i < sh.seen.len; ++i)
    fzFree(ctx, sh.seen.data[i]);
  fzPtrVecFree(&sh.seen);
  return out;
}
