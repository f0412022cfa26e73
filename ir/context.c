/* ir/context.c - the context: allocator, arena of immortal uniqued
 * objects, identifier interning, uniquing tables, the dialect registry
 * and the source buffers kept for diagnostics.
 *
 * There is no global state: everything hangs off one FzContext, which is
 * used by one thread at a time. Uniqued objects (FzIdent, FzType, FzAttr,
 * FzLoc) are allocated in ctx->arena and live until fzContextDestroy.
 */
#include <stdlib.h>

#include "ir/internal.h"

static void *default_realloc(void *ud, void *ptr, size_t oldSize,
                             size_t newSize) {
  (void)ud;
  (void)oldSize;
  if (newSize == 0) {
    free(ptr); /* plain-alloc: the default allocator */
    return NULL;
  }
  return realloc(ptr, newSize); /* plain-alloc: the default allocator */
}

FzContext *fzContextCreate(void) {
  FzAllocator a = {default_realloc, NULL};
  return fzContextCreateWithAllocator(&a);
}

static bool init_builtins(FzContext *ctx) {
  ctx->i1 = fzIntegerTypeGet(ctx, 1);
  ctx->i8 = fzIntegerTypeGet(ctx, 8);
  ctx->i16 = fzIntegerTypeGet(ctx, 16);
  ctx->i32 = fzIntegerTypeGet(ctx, 32);
  ctx->i64 = fzIntegerTypeGet(ctx, 64);
  ctx->index = fzIndexTypeGet(ctx);
  ctx->f16 = fzF16TypeGet(ctx);
  ctx->bf16 = fzBF16TypeGet(ctx);
  ctx->f32 = fzF32TypeGet(ctx);
  ctx->f64 = fzF64TypeGet(ctx);
  ctx->none = fzNoneTypeGet(ctx);
  ctx->emptyDict = fzDictAttrGet(ctx, 0, NULL, NULL);
  ctx->unit = fzUnitAttrGet(ctx);
  ctx->boolTrue = fzBoolAttrGet(ctx, true);
  ctx->boolFalse = fzBoolAttrGet(ctx, false);
  ctx->unknownLoc = fzUnknownLocGet(ctx);
  return ctx->i1 && ctx->i8 && ctx->i16 && ctx->i32 && ctx->i64 &&
         ctx->index && ctx->f16 && ctx->bf16 && ctx->f32 && ctx->f64 &&
         ctx->none && ctx->emptyDict && ctx->unit && ctx->boolTrue &&
         ctx->boolFalse && ctx->unknownLoc;
}

FzContext *fzContextCreateWithAllocator(const FzAllocator *alloc) {
  if (!alloc || !alloc->realloc)
    return NULL;
  FzContext *ctx = alloc->realloc(alloc->userData, NULL, 0, sizeof *ctx);
  if (!ctx)
    return NULL;
  memset(ctx, 0, sizeof *ctx);
  ctx->alloc = *alloc;
  ctx->maxNesting = 256;
  ctx->maxSourceSize = FZ_DEFAULT_MAX_SOURCE_SIZE;
  ctx->nextHandlerId = 1;
  fzArenaInit(&ctx->arena, ctx);
  if (!init_builtins(ctx)) {
    fzContextDestroy(ctx);
    return NULL;
  }
  return ctx;
}

void fzContextDestroy(FzContext *ctx) {
  if (!ctx)
    return;
  fzContextDestroyExtensions(ctx);
  for (size_t i = 0; i < ctx->numSources; ++i)
    if (ctx->sources[i].owned)
      fzFree(ctx, (char *)ctx->sources[i].data);
  fzFree(ctx, ctx->sources);
  fzFree(ctx, ctx->handlers);
  fzFree(ctx, ctx->dialects);
  fzFree(ctx, ctx->opDefs);
  fzFree(ctx, ctx->identSlots);
  fzUniqueTableFree(ctx, &ctx->types);
  fzUniqueTableFree(ctx, &ctx->attrs);
  fzUniqueTableFree(ctx, &ctx->locs);
  fzLocRunsFree(ctx);
  fzArenaReset(&ctx->arena);
  FzAllocator a = ctx->alloc;
  a.realloc(a.userData, ctx, sizeof *ctx, 0);
}

bool fzContextHadAllocationFailure(const FzContext *ctx) {
  return ctx->allocFailed;
}

void fzContextClearAllocationFailure(FzContext *ctx) {
  ctx->allocFailed = false;
}

void fzContextSetAllowUnregisteredDialects(FzContext *ctx, bool allow) {
  ctx->allowUnregistered = allow;
}

bool fzContextGetAllowUnregisteredDialects(const FzContext *ctx) {
  return ctx->allowUnregistered;
}

void fzContextSetMaxNesting(FzContext *ctx, unsigned depth) {
  ctx->maxNesting = depth ? depth : 1;
}

unsigned fzContextGetMaxNesting(const FzContext *ctx) {
  return ctx->maxNesting;
}

void fzContextSetMaxSourceSize(FzContext *ctx, size_t bytes) {
  ctx->maxSourceSize = bytes ? bytes : 1;
}

size_t fzContextGetMaxSourceSize(const FzContext *ctx) {
  return ctx->maxSourceSize;
}

size_t fzContextGetNumErrors(const FzContext *ctx) { return ctx->numErrors; }

/*===--- Identifiers ----------------------------------------------------===*/

static bool ident_grow(FzContext *ctx) {
  size_t cap = ctx->identCap ? ctx->identCap * 2 : 1024;
  FzIdent **slots = fzCalloc(ctx, cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < ctx->identCap; ++i) {
    FzIdent *id = ctx->identSlots[i];
    if (!id)
      continue;
    size_t j = id->hash & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = id;
  }
  fzFree(ctx, ctx->identSlots);
  ctx->identSlots = slots;
  ctx->identCap = cap;
  return true;
}

FzIdent *fzIdentGet(FzContext *ctx, FzStringRef str) {
  if ((ctx->identCount + 1) * 4 > ctx->identCap * 3 && !ident_grow(ctx))
    return NULL;
  uint32_t h = fzHashBytes(str.data, str.length, 0x1d);
  size_t mask = ctx->identCap - 1;
  size_t i = h & mask;
  for (;;) {
    FzIdent *id = ctx->identSlots[i];
    if (!id)
      break;
    if (id->hash == h && id->len == str.length &&
        memcmp(id->str, str.data, str.length) == 0)
      return id;
    i = (i + 1) & mask;
  }
  FzIdent *id = fzArenaAlloc(&ctx->arena, sizeof *id);
  char *s = fzArenaAlloc(&ctx->arena, str.length + 1);
  if (!id || !s)
    return NULL;
  if (str.length)
    memcpy(s, str.data, str.length);
  s[str.length] = 0;
  id->str = s;
  id->len = str.length;
  id->hash = h;
  id->opDef = NULL;
  id->dialect = NULL;
  id->locRun = NULL;
  ctx->identSlots[i] = id;
  ctx->identCount++;
  return id;
}

FzStringRef fzIdentGetString(const FzIdent *ident) {
  FzStringRef r = {ident->str, ident->len};
  return r;
}

/*===--- Uniquing tables ------------------------------------------------===*/

static bool unique_grow(FzContext *ctx, FzUniqueTable *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  FzUniqueSlot *slots = fzCalloc(ctx, cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < t->cap; ++i) {
    FzUniqueSlot s = t->slots[i];
    if (!s.obj)
      continue;
    size_t j = s.hash & (cap - 1);
    while (slots[j].obj)
      j = (j + 1) & (cap - 1);
    slots[j] = s;
  }
  fzFree(ctx, t->slots);
  t->slots = slots;
  t->cap = cap;
  return true;
}

void *fzUniqueGet(FzContext *ctx, FzUniqueTable *t, uint32_t hash,
                  const void *key, FzUniqueEqFn eq, FzUniqueMakeFn make) {
  /* Load factor at most 1/2: probes stay short. */
  if ((t->count + 1) * 2 > t->cap && !unique_grow(ctx, t))
    return NULL;
  size_t mask = t->cap - 1;
  size_t i = hash & mask;
  for (;;) {
    FzUniqueSlot *s = &t->slots[i];
    if (!s->obj)
      break;
    if (s->hash == hash && eq(s->obj, key))
      return s->obj;
    i = (i + 1) & mask;
  }
  void *o = make(ctx, key);
  if (!o)
    return NULL;
  ((FzType *)o)->hash = hash;
  t->slots[i].hash = hash;
  t->slots[i].obj = o;
  t->count++;
  return o;
}

void fzUniqueTableFree(FzContext *ctx, FzUniqueTable *t) {
  fzFree(ctx, t->slots);
  t->slots = NULL;
  t->count = t->cap = 0;
}

/*===--- Dialect registry -----------------------------------------------===*/

static bool push_ptr(FzContext *ctx, const void ***arr, size_t *n,
                     size_t *cap, const void *p) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 8;
    const void **a = fzRealloc(ctx, (void *)*arr, c * sizeof *a);
    if (!a)
      return false;
    *arr = a;
    *cap = c;
  }
  (*arr)[(*n)++] = p;
  return true;
}

bool fzContextRegisterDialect(FzContext *ctx, const FzDialectDef *def) {
  FzStringRef name = fzStringRefFromCString(def->name);
  FzIdent *id = fzIdentGet(ctx, name);
  if (!id)
    return false;
  if (id->dialect == def)
    return true;
  if (id->dialect)
    return fzEmitError(ctx, NULL, "a different dialect named '%s' is "
                       "already registered", def->name);
  /* Check every op first so that a bad table registers nothing. */
  for (size_t i = 0; i < def->numOps; ++i) {
    const char *opName = def->ops[i]->name;
    size_t n = name.length;
    if (strncmp(opName, def->name, n) != 0 || opName[n] != '.' ||
        opName[n + 1] == 0)
      return fzEmitError(ctx, NULL, "op '%s' is not in the namespace of "
                         "dialect '%s'", opName, def->name);
    FzIdent *opId = fzIdentGet(ctx, fzStringRefFromCString(opName));
    if (!opId)
      return false;
    if (opId->opDef)
      return fzEmitError(ctx, NULL, "op '%s' is registered twice", opName);
  }
  if (!push_ptr(ctx, (const void ***)&ctx->dialects, &ctx->numDialects,
                &ctx->capDialects, def))
    return false;
  for (size_t i = 0; i < def->numOps; ++i) {
    FzIdent *opId = fzIdentGet(ctx, fzStringRefFromCString(def->ops[i]->name));
    if (!opId || !push_ptr(ctx, (const void ***)&ctx->opDefs, &ctx->numOpDefs,
                           &ctx->capOpDefs, def->ops[i]))
      return false;
    opId->opDef = def->ops[i];
  }
  id->dialect = def;
  return true;
}

const FzDialectDef *fzContextLookupDialect(const FzContext *ctx,
                                           FzStringRef name) {
  for (size_t i = 0; i < ctx->numDialects; ++i)
    if (fzStringRefEqual(fzStringRefFromCString(ctx->dialects[i]->name), name))
      return ctx->dialects[i];
  return NULL;
}

const FzOpDef *fzContextLookupOpDef(const FzContext *ctx, FzStringRef name) {
  /* Interning is a mutation of the table, not of observable state. */
  FzIdent *id = fzIdentGet((FzContext *)ctx, name);
  return id ? id->opDef : NULL;
}

void fzContextForEachOpDef(const FzContext *ctx,
                           void (*fn)(const FzOpDef *def, void *ud),
                           void *ud) {
  for (size_t i = 0; i < ctx->numOpDefs; ++i)
    fn(ctx->opDefs[i], ud);
}

/*===--- Source buffers -------------------------------------------------===*/

const char *fzContextRegisterSource(FzContext *ctx, FzStringRef name,
                                    const char *data, size_t len,
                                    bool owned) {
  FzIdent *id = fzIdentGet(ctx, name);
  if (!id)
    goto fail;
  /* The newest buffer of a name wins; older ones stay alive because
   * earlier parses may still point into them. */
  if (ctx->numSources == ctx->capSources) {
    size_t c = ctx->capSources ? ctx->capSources * 2 : 4;
    FzSourceBuffer *s = fzRealloc(ctx, ctx->sources, c * sizeof *s);
    if (!s)
      goto fail;
    ctx->sources = s;
    ctx->capSources = c;
  }
  FzSourceBuffer *sb = &ctx->sources[ctx->numSources++];
  sb->name = id;
  sb->data = data;
  sb->len = len;
  sb->owned = owned;
  return data;
fail:
  if (owned)
    fzFree(ctx, (char *)data);
  return NULL;
}

const char *fzContextAddSourceBuffer(FzContext *ctx, FzStringRef name,
                                     FzStringRef contents) {
  size_t size;
  if (!fzAddSize(contents.length, 1, &size)) {
    fzNoteAllocationFailure(ctx);
    return NULL;
  }
  char *copy = fzMalloc(ctx, size);
  if (!copy)
    return NULL;
  if (contents.length)
    memcpy(copy, contents.data, contents.length);
  copy[contents.length] = 0;
  return fzContextRegisterSource(ctx, name, copy, contents.length, true);
}

const FzSourceBuffer *fzContextFindSource(const FzContext *ctx,
                                          const FzIdent *name) {
  for (size_t i = ctx->numSources; i-- > 0;)
    if (ctx->sources[i].name == name)
      return &ctx->sources[i];
  return NULL;
}
