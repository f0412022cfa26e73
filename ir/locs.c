/* ir/locs.c - uniqued locations.
 *
 * Every op carries one. Fused locations are kept flat (no fused inside
 * fused), without unknowns or duplicates, so that a fused kernel's
 * location lists each source op once.
 */
#include "ir/internal.h"

static uint32_t loc_hash(const FzLoc *k) {
  uint32_t h = fzHashCombine(0x10cu, (uint64_t)k->kind);
  switch (k->kind) {
  case FZ_LOC_FILE_LINE_COL:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.flc.file);
    return fzHashCombine(h, ((uint64_t)k->u.flc.line << 32) | k->u.flc.col);
  case FZ_LOC_NAME:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.name.name);
    return fzHashCombine(h, (uint64_t)(uintptr_t)k->u.name.child);
  case FZ_LOC_FUSED:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.fused.meta);
    for (size_t i = 0; i < k->u.fused.n; ++i)
      h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.fused.locs[i]);
    return h;
  case FZ_LOC_CALLSITE:
    h = fzHashCombine(h, (uint64_t)(uintptr_t)k->u.callsite.callee);
    return fzHashCombine(h, (uint64_t)(uintptr_t)k->u.callsite.caller);
  case FZ_LOC_UNKNOWN:
    return h;
  }
  return h;
}

static bool loc_eq(const void *ev, const void *kv) {
  const FzLoc *e = ev, *k = kv;
  if (e->kind != k->kind)
    return false;
  switch (k->kind) {
  case FZ_LOC_FILE_LINE_COL:
    return e->u.flc.file == k->u.flc.file && e->u.flc.line == k->u.flc.line &&
           e->u.flc.col == k->u.flc.col;
  case FZ_LOC_NAME:
    return e->u.name.name == k->u.name.name &&
           e->u.name.child == k->u.name.child;
  case FZ_LOC_FUSED:
    return e->u.fused.meta == k->u.fused.meta &&
           e->u.fused.n == k->u.fused.n &&
           (k->u.fused.n == 0 || !memcmp(e->u.fused.locs, k->u.fused.locs,
                   k->u.fused.n * sizeof(FzLoc *)));
  case FZ_LOC_CALLSITE:
    return e->u.callsite.callee == k->u.callsite.callee &&
           e->u.callsite.caller == k->u.callsite.caller;
  case FZ_LOC_UNKNOWN:
    return true;
  }
  return false;
}

static void *loc_make(FzContext *ctx, const void *kv) {
  const FzLoc *k = kv;
  FzLoc *l = fzArenaAlloc(&ctx->arena, sizeof *l);
  if (!l)
    return NULL;
  *l = *k;
  l->ctx = ctx;
  if (k->kind == FZ_LOC_FUSED && k->u.fused.n &&
      !(l->u.fused.locs = fzArenaDup(&ctx->arena, k->u.fused.locs,
                                     k->u.fused.n * sizeof(FzLoc *))))
    return NULL;
  return l;
}

static FzLoc *loc_get(FzContext *ctx, const FzLoc *key) {
  return fzUniqueGet(ctx, &ctx->locs, loc_hash(key), key, loc_eq, loc_make);
}

static FzLoc loc_key(FzLocKind kind) {
  FzLoc k;
  memset(&k, 0, sizeof k);
  k.kind = kind;
  return k;
}

FzLoc *fzUnknownLocGet(FzContext *ctx) {
  if (ctx->unknownLoc)
    return ctx->unknownLoc;
  FzLoc k = loc_key(FZ_LOC_UNKNOWN);
  return loc_get(ctx, &k);
}

/* File:line:col locations take a fast path beside the uniquing table,
 * because a parser makes one for nearly every op and argument, in
 * increasing (line, col) order: each file has a run (FzLocRun) sorted by
 * (line, col). Invariant: a file:line:col location is either in its
 * file's run or in ctx->locs, never both, and one in ctx->locs was made
 * when its key was not above the run's last key. Since the run's last
 * key only grows, a key above it is in neither place and is appended
 * without a lookup; any other key is looked up in the run (binary
 * search), then in ctx->locs. */
static uint64_t flc_key(unsigned line, unsigned col) {
  return ((uint64_t)line << 32) | col;
}

static uint64_t flc_key_of(const FzLoc *l) {
  return flc_key(l->u.flc.line, l->u.flc.col);
}

static FzLocRun *loc_run(FzContext *ctx, FzIdent *file) {
  if (file->locRun)
    return file->locRun;
  FzLocRun *run = fzArenaAlloc(&ctx->arena, sizeof *run);
  if (!run)
    return NULL;
  memset(run, 0, sizeof *run);
  run->nextRun = ctx->locRuns;
  ctx->locRuns = run;
  file->locRun = run;
  return run;
}

void fzLocRunsFree(FzContext *ctx) {
  for (FzLocRun *r = ctx->locRuns; r; r = r->nextRun)
    fzFree(ctx, r->locs);
  ctx->locRuns = NULL;
}

/* The location in run with key k, or NULL. */
static FzLoc *run_find(const FzLocRun *run, uint64_t k) {
  size_t lo = 0, hi = run->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t m = flc_key_of(run->locs[mid]);
    if (m == k)
      return run->locs[mid];
    if (m < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static FzLoc *run_append(FzContext *ctx, FzLocRun *run, const FzLoc *key) {
  if (run->len == run->cap) {
    size_t cap = run->cap ? run->cap * 2 : 256;
    FzLoc **locs = fzRealloc(ctx, run->locs, cap * sizeof *locs);
    if (!locs)
      return NULL;
    run->locs = locs;
    run->cap = cap;
  }
  FzLoc *l = loc_make(ctx, key);
  if (!l)
    return NULL;
  l->hash = loc_hash(key);
  run->locs[run->len++] = l;
  return l;
}

FzLoc *fzFileLineColLocGetIdent(FzContext *ctx, FzIdent *file,
                                unsigned line, unsigned col) {
  if (!file)
    return NULL;
  FzLoc k = loc_key(FZ_LOC_FILE_LINE_COL);
  k.u.flc.file = file;
  k.u.flc.line = line;
  k.u.flc.col = col;
  FzLocRun *run = loc_run(ctx, file);
  if (!run)
    return NULL;
  uint64_t key = flc_key(line, col);
  if (run->len == 0)
    return run_append(ctx, run, &k);
  FzLoc *last = run->locs[run->len - 1];
  uint64_t lastKey = flc_key_of(last);
  if (key > lastKey)
    return run_append(ctx, run, &k);
  if (key == lastKey)
    return last;
  FzLoc *found = run_find(run, key);
  return found ? found : loc_get(ctx, &k);
}

FzLoc *fzFileLineColLocGet(FzContext *ctx, FzStringRef file, unsigned line,
                           unsigned col) {
  return fzFileLineColLocGetIdent(ctx, fzIdentGet(ctx, file), line, col);
}

FzLoc *fzNameLocGet(FzContext *ctx, FzStringRef name, FzLoc *child) {
  FzLoc k = loc_key(FZ_LOC_NAME);
  k.u.name.name = fzIdentGet(ctx, name);
  k.u.name.child = child ? child : fzUnknownLocGet(ctx);
  return k.u.name.name ? loc_get(ctx, &k) : NULL;
}

FzLoc *fzCallSiteLocGet(FzContext *ctx, FzLoc *callee, FzLoc *caller) {
  FzLoc k = loc_key(FZ_LOC_CALLSITE);
  k.u.callsite.callee = callee ? callee : fzUnknownLocGet(ctx);
  k.u.callsite.caller = caller ? caller : fzUnknownLocGet(ctx);
  return loc_get(ctx, &k);
}

/* Appends loc's flattened parts to vec, skipping unknowns and repeats. */
static bool flatten(FzPtrVec *vec, FzLoc *loc) {
  if (!loc || loc->kind == FZ_LOC_UNKNOWN)
    return true;
  if (loc->kind == FZ_LOC_FUSED && !loc->u.fused.meta) {
    for (size_t i = 0; i < loc->u.fused.n; ++i)
      if (!flatten(vec, loc->u.fused.locs[i]))
        return false;
    return true;
  }
  for (size_t i = 0; i < vec->len; ++i)
    if (vec->data[i] == loc)
      return true;
  return fzPtrVecPush(vec, loc);
}

FzLoc *fzFusedLocGet(FzContext *ctx, size_t n, FzLoc *const *locs,
                     FzAttr *metadata) {
  FzPtrVec vec;
  fzPtrVecInit(&vec, ctx);
  for (size_t i = 0; i < n; ++i)
    if (!flatten(&vec, locs[i])) {
      fzPtrVecFree(&vec);
      return NULL;
    }
  FzLoc *result;
  if (vec.len == 0 && !metadata) {
    result = fzUnknownLocGet(ctx);
  } else if (vec.len == 1 && !metadata) {
    result = vec.data[0];
  } else {
    FzLoc k = loc_key(FZ_LOC_FUSED);
    k.u.fused.n = vec.len;
    k.u.fused.locs = (FzLoc **)vec.data;
    k.u.fused.meta = metadata;
    result = loc_get(ctx, &k);
  }
  fzPtrVecFree(&vec);
  return result;
}

FzLocKind fzLocGetKind(const FzLoc *loc) { return loc->kind; }
FzStringRef fzLocGetFile(const FzLoc *loc) {
  return fzIdentGetString(loc->u.flc.file);
}
unsigned fzLocGetLine(const FzLoc *loc) { return loc->u.flc.line; }
unsigned fzLocGetColumn(const FzLoc *loc) { return loc->u.flc.col; }
FzStringRef fzLocGetName(const FzLoc *loc) {
  return fzIdentGetString(loc->u.name.name);
}
FzLoc *fzLocGetChild(const FzLoc *loc) { return loc->u.name.child; }
size_t fzLocGetNumFused(const FzLoc *loc) { return loc->u.fused.n; }
FzLoc *fzLocGetFused(const FzLoc *loc, size_t i) {
  return loc->u.fused.locs[i];
}
FzAttr *fzLocGetFusedMetadata(const FzLoc *loc) { return loc->u.fused.meta; }
FzLoc *fzLocGetCallee(const FzLoc *loc) { return loc->u.callsite.callee; }
FzLoc *fzLocGetCaller(const FzLoc *loc) { return loc->u.callsite.caller; }

FzLoc *fzLocFindFileLineCol(FzLoc *loc) {
  /* Iterative: locations built by the library are shallow, but one
   * parsed from text could nest up to the nesting limit. */
  while (loc) {
    switch (loc->kind) {
    case FZ_LOC_FILE_LINE_COL:
      return loc;
    case FZ_LOC_NAME:
      loc = loc->u.name.child;
      break;
    case FZ_LOC_CALLSITE: {
      /* The callee's source first (where the code is), as MLIR does. */
      FzLoc *r = fzLocFindFileLineCol(loc->u.callsite.callee);
      if (r)
        return r;
      loc = loc->u.callsite.caller;
      break;
    }
    case FZ_LOC_FUSED:
      for (size_t i = 0; i < loc->u.fused.n; ++i) {
        FzLoc *r = fzLocFindFileLineCol(loc->u.fused.locs[i]);
        if (r)
          return r;
      }
      return NULL;
    case FZ_LOC_UNKNOWN:
      return NULL;
    }
  }
  return NULL;
}
