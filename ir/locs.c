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

FzLoc *fzFileLineColLocGetIdent(FzContext *ctx, FzIdent *file,
                                unsigned line, unsigned col) {
  if (!file)
    return NULL;
  FzLoc k = loc_key(FZ_LOC_FILE_LINE_COL);
  k.u.flc.file = file;
  k.u.flc.line = line;
  k.u.flc.col = col;
  return loc_get(ctx, &k);
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
