/* lowering/llvm/native_cache.c - the CPU's warm start (native_cache.h):
 * compiled modules in the kernel cache under a key of their loop-level
 * IR, so that a hit skips the loop transforms (weight packing), the
 * translation to LLVM IR and the bitcode that objcache.c hashes.
 *
 * The key hashes the module as a structure, never as text: each op's
 * name, location, operands (numbered by first appearance), result types,
 * properties and attributes, regions and block arguments, in order;
 * dense constants (the weights) by their type and fzHash128, so that
 * ResNet-50's 100 MB are hashed at memory speed. What else decides the
 * code goes in first: the cache prefix (fuse's build, LLVM's version),
 * the target machine, every codegen option, and the FZ_CPU_CONV and
 * FZ_CPU_CONV_TILE switches of the loop transforms (cpu_loop.c).
 *
 * An entry (FZ_CACHE_NATIVE) holds the run-time check sites, each as its
 * message and its location (unknown, file:line:col, name, fused without
 * metadata, callsite), then the object files that the JIT links. A
 * module whose sites cannot be written (a fused location with metadata)
 * is not stored. A payload that does not parse is treated as a miss.
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"
#include "lowering/llvm/native_cache.h"

struct FzNativeCacheSession {
  FzContext *ctx;
  FzCache *cache;
  FzCacheKey key;
  FzCodegenOptions o; /* for the timing sink */
};

/*===--- The key --------------------------------------------------------===*/

typedef struct Hasher {
  FzSha256 h;
  FzPtrMap ids; /* FzValue -> 1 + its number */
  uint64_t next;
  bool failed;
} Hasher;

static void on_text(FzStringRef chunk, void *ud) {
  fzSha256Update(ud, chunk.data, chunk.length);
}

static void hash_ref(Hasher *H, FzStringRef s) {
  fzSha256UpdateU64(&H->h, s.length);
  fzSha256Update(&H->h, s.data, s.length);
}

static void hash_type(Hasher *H, const FzType *t) {
  fzSha256UpdateU64(&H->h, 0x7479706500000000ull); /* "type" */
  if (t)
    fzTypePrint(t, on_text, &H->h);
}

static void hash_attr(Hasher *H, const FzAttr *a) {
  if (!a) {
    fzSha256UpdateU64(&H->h, ~0ull);
    return;
  }
  FzAttrKind k = fzAttrGetKind(a);
  fzSha256UpdateU64(&H->h, (uint64_t)k);
  switch (k) {
  case FZ_ATTR_DENSE: {
    uint8_t d[FZ_HASH128_BYTES];
    size_t n = fzDenseAttrGetNumBytes(a);
    hash_type(H, fzAttrGetType(a));
    fzSha256UpdateU64(&H->h, fzDenseAttrIsSplat(a));
    fzSha256UpdateU64(&H->h, n);
    fzHash128(fzDenseAttrGetData(a), n, 0, d);
    fzSha256Update(&H->h, d, sizeof d);
    return;
  }
  case FZ_ATTR_ARRAY: {
    size_t n = fzArrayAttrGetSize(a);
    fzSha256UpdateU64(&H->h, n);
    for (size_t i = 0; i < n; ++i)
      hash_attr(H, fzArrayAttrGetElement(a, i));
    return;
  }
  case FZ_ATTR_DICT: {
    size_t n = fzDictAttrGetSize(a);
    fzSha256UpdateU64(&H->h, n);
    for (size_t i = 0; i < n; ++i) {
      FzNamedAttr e = fzDictAttrGetEntry(a, i);
      hash_ref(H, fzIdentGetString(e.name));
      hash_attr(H, e.value);
    }
    return;
  }
  default:
    fzAttrPrint(a, on_text, &H->h);
    fzSha256UpdateU64(&H->h, 0); /* the end of the text */
    return;
  }
}

/* The number of v, given at its first appearance. */
static void hash_value(Hasher *H, FzValue *v) {
  uintptr_t id = (uintptr_t)fzPtrMapGet(&H->ids, v);
  if (!id) {
    id = (uintptr_t)++H->next;
    if (!fzPtrMapPut(&H->ids, v, (void *)id))
      H->failed = true;
  }
  fzSha256UpdateU64(&H->h, (uint64_t)id);
  hash_type(H, fzValueGetType(v));
}

static void hash_op(Hasher *H, FzOp *op, unsigned depth) {
  if (depth > 256) { /* deeper than any loop nest fuse makes */
    H->failed = true;
    return;
  }
  hash_ref(H, fzIdentGetString(fzOpGetName(op)));
  fzLocPrint(fzOpGetLoc(op), on_text, &H->h);
  fzSha256UpdateU64(&H->h, fzOpGetNumOperands(op));
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    hash_value(H, fzOpGetOperand(op, i));
  fzSha256UpdateU64(&H->h, fzOpGetNumResults(op));
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    hash_value(H, fzOpGetResult(op, i));
  hash_attr(H, fzOpGetPropDict(op));
  hash_attr(H, fzOpGetAttrDict(op));
  size_t nr = fzOpGetNumRegions(op);
  fzSha256UpdateU64(&H->h, nr);
  for (size_t r = 0; r < nr && !H->failed; ++r) {
    FzRegion *region = fzOpGetRegion(op, r);
    fzSha256UpdateU64(&H->h, fzRegionGetNumBlocks(region));
    for (FzBlock *b = fzRegionGetFirstBlock(region); b && !H->failed;
         b = fzBlockGetNext(b)) {
      size_t na = fzBlockGetNumArguments(b);
      fzSha256UpdateU64(&H->h, na);
      for (size_t i = 0; i < na; ++i)
        hash_value(H, fzBlockGetArgument(b, i));
      size_t nops = 0;
      for (FzOp *o = fzBlockGetFirstOp(b); o && !H->failed;
           o = fzOpGetNextInBlock(o), ++nops)
        hash_op(H, o, depth + 1);
      fzSha256UpdateU64(&H->h, nops);
    }
  }
}

static void hash_env(FzSha256 *h, const char *name) {
  const char *v = getenv(name);
  fzSha256UpdateString(h, name);
  fzSha256UpdateU64(h, v != NULL);
  if (v)
    fzSha256UpdateString(h, v);
}

bool fzLLLoopKey(FzOp *module, const FzCodegenOptions *o, FzCacheKind kind,
                 FzCacheKey *key) {
  FzContext *ctx = fzOpGetContext(module);
  char *cpu = NULL, *features = NULL;
  LLVMTargetMachineRef tm = fzLLCreateTargetMachine(ctx, o, &cpu, &features);
  if (!tm)
    return false;
  Hasher H;
  memset(&H, 0, sizeof H);
  fzLLCacheKeyBegin(&H.h, kind);
  char *triple = LLVMGetTargetMachineTriple(tm);
  fzSha256UpdateString(&H.h, triple);
  LLVMDisposeMessage(triple);
  fzSha256UpdateString(&H.h, cpu ? cpu : "");
  fzSha256UpdateString(&H.h, features ? features : "");
  LLVMDisposeTargetMachine(tm);
  fzFree(ctx, cpu);
  fzFree(ctx, features);
  fzLLHashOptions(&H.h, o);
  hash_env(&H.h, "FZ_CPU_CONV");
  hash_env(&H.h, "FZ_CPU_CONV_TILE");
  fzPtrMapInit(&H.ids, ctx);
  hash_op(&H, module, 0);
  fzPtrMapFree(&H.ids);
  if (H.failed)
    return false;
  fzSha256Final(&H.h, key->bytes);
  return true;
}

/*===--- The payload ----------------------------------------------------===*/

typedef struct Out {
  char *p;
  size_t len, cap;
  bool failed;
} Out;

static void put(Out *w, const void *d, size_t n) {
  if (w->failed)
    return;
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + n)
      cap *= 2;
    char *np = fzLLThreadAlloc(cap);
    if (!np) {
      w->failed = true;
      return;
    }
    if (w->len)
      memcpy(np, w->p, w->len);
    fzLLThreadFree(w->p);
    w->p = np;
    w->cap = cap;
  }
  memcpy(w->p + w->len, d, n);
  w->len += n;
}

static void put_u64(Out *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, 8);
}

static void put_str(Out *w, FzStringRef s) {
  put_u64(w, s.length);
  put(w, s.data, s.length);
}

static bool put_loc(Out *w, const FzLoc *loc, unsigned depth) {
  FzLocKind k = fzLocGetKind(loc);
  if (depth > 64)
    return false;
  put_u64(w, (uint64_t)k);
  switch (k) {
  case FZ_LOC_UNKNOWN:
    return true;
  case FZ_LOC_FILE_LINE_COL:
    put_str(w, fzLocGetFile(loc));
    put_u64(w, fzLocGetLine(loc));
    put_u64(w, fzLocGetColumn(loc));
    return true;
  case FZ_LOC_NAME:
    put_str(w, fzLocGetName(loc));
    return put_loc(w, fzLocGetChild(loc), depth + 1);
  case FZ_LOC_FUSED: {
    if (fzLocGetFusedMetadata(loc))
      return false;
    size_t n = fzLocGetNumFused(loc);
    put_u64(w, n);
    for (size_t i = 0; i < n; ++i)
      if (!put_loc(w, fzLocGetFused(loc, i), depth + 1))
        return false;
    return true;
  }
  case FZ_LOC_CALLSITE:
    return put_loc(w, fzLocGetCallee(loc), depth + 1) &&
           put_loc(w, fzLocGetCaller(loc), depth + 1);
  }
  return false;
}

static const char kMagic[8] = {'F', 'Z', 'N', 'A', 'T', 'I', 'V', '1'};

typedef struct In {
  const uint8_t *p;
  size_t left;
  bool bad;
} In;

static uint64_t get_u64(In *r) {
  if (r->left < 8) {
    r->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= (uint64_t)r->p[i] << (8 * i);
  r->p += 8;
  r->left -= 8;
  return v;
}

static FzStringRef get_str(In *r) {
  uint64_t n = get_u64(r);
  if (r->bad || n > r->left) {
    r->bad = true;
    return (FzStringRef){NULL, 0};
  }
  FzStringRef s = {(const char *)r->p, (size_t)n};
  r->p += n;
  r->left -= (size_t)n;
  return s;
}

static FzLoc *get_loc(FzContext *ctx, In *r, unsigned depth) {
  uint64_t k = get_u64(r);
  if (r->bad || depth > 64)
    return r->bad = true, NULL;
  switch (k) {
  case FZ_LOC_UNKNOWN:
    return fzUnknownLocGet(ctx);
  case FZ_LOC_FILE_LINE_COL: {
    FzStringRef f = get_str(r);
    uint64_t line = get_u64(r), col = get_u64(r);
    if (r->bad || line > UINT32_MAX || col > UINT32_MAX)
      return r->bad = true, NULL;
    return fzFileLineColLocGet(ctx, f, (unsigned)line, (unsigned)col);
  }
  case FZ_LOC_NAME: {
    FzStringRef name = get_str(r);
    FzLoc *child = r->bad ? NULL : get_loc(ctx, r, depth + 1);
    return child ? fzNameLocGet(ctx, name, child) : NULL;
  }
  case FZ_LOC_FUSED: {
    uint64_t n = get_u64(r);
    if (r->bad || n > r->left / 8)
      return r->bad = true, NULL;
    FzLoc **v = fzCalloc(ctx, (size_t)n + 1, sizeof *v);
    bool ok = v != NULL;
    for (size_t i = 0; ok && i < n; ++i)
      ok = (v[i] = get_loc(ctx, r, depth + 1)) != NULL;
    FzLoc *l = ok ? fzFusedLocGet(ctx, (size_t)n, v, NULL) : NULL;
    fzFree(ctx, v);
    return l;
  }
  case FZ_LOC_CALLSITE: {
    FzLoc *callee = get_loc(ctx, r, depth + 1);
    FzLoc *caller = callee ? get_loc(ctx, r, depth + 1) : NULL;
    return caller ? fzCallSiteLocGet(ctx, callee, caller) : NULL;
  }
  }
  r->bad = true;
  return NULL;
}

/* The payload: magic, the sites (count; message, location each), the
 * objects (count; length, bytes each). False when it cannot be written
 * (out of memory, or a location it cannot hold). */
static bool write_payload(Out *w, const FzLLSites *sites,
                          LLVMMemoryBufferRef *objs, size_t n) {
  put(w, kMagic, sizeof kMagic);
  put_u64(w, sites->n);
  for (size_t i = 0; i < sites->n; ++i) {
    put_str(w, fzStringRefFromCString(sites->v[i].message));
    if (!put_loc(w, sites->v[i].loc, 0))
      return false;
  }
  put_u64(w, n);
  for (size_t i = 0; i < n; ++i) {
    put_u64(w, LLVMGetBufferSize(objs[i]));
    put(w, LLVMGetBufferStart(objs[i]), LLVMGetBufferSize(objs[i]));
  }
  return !w->failed;
}

static bool push_site(FzContext *ctx, FzLLSites *s, FzLoc *loc,
                      FzStringRef msg) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    FzLLSite *v = fzRealloc(ctx, s->v, cap * sizeof *v);
    if (!v)
      return false;
    s->v = v;
    s->cap = cap;
  }
  char *m = fzStrDupN(ctx, msg.data, msg.length);
  if (!m)
    return false;
  s->v[s->n++] = (FzLLSite){loc, m};
  return true;
}

/* The sites and objects of a payload; false when it does not parse (or
 * out of memory), nothing kept. */
static bool read_payload(FzContext *ctx, const char *data, size_t len,
                         FzLLSites *sites, LLVMMemoryBufferRef **objsOut,
                         size_t *nOut) {
  In r = {(const uint8_t *)data, len, false};
  if (len < sizeof kMagic || memcmp(data, kMagic, sizeof kMagic))
    return false;
  r.p += sizeof kMagic;
  r.left -= sizeof kMagic;
  uint64_t ns = get_u64(&r);
  if (r.bad || ns > r.left / 16)
    return false;
  for (uint64_t i = 0; i < ns && !r.bad; ++i) {
    FzStringRef msg = get_str(&r);
    FzLoc *loc = r.bad ? NULL : get_loc(ctx, &r, 0);
    if (!loc || !push_site(ctx, sites, loc, msg))
      r.bad = true;
  }
  uint64_t n = r.bad ? 0 : get_u64(&r);
  LLVMMemoryBufferRef *objs = NULL;
  size_t got = 0;
  if (!r.bad && n <= r.left / 8)
    objs = fzCalloc(ctx, (size_t)n + 1, sizeof *objs);
  if (!objs)
    r.bad = true;
  for (; !r.bad && got < n; ++got) {
    uint64_t olen = get_u64(&r);
    if (r.bad || olen > r.left) {
      r.bad = true;
      break;
    }
    objs[got] = LLVMCreateMemoryBufferWithMemoryRangeCopy(
        (const char *)r.p, (size_t)olen, "fuse.o");
    if (!objs[got]) {
      r.bad = true;
      break;
    }
    r.p += olen;
    r.left -= (size_t)olen;
  }
  if (r.bad || r.left) {
    for (size_t i = 0; i < got; ++i)
      LLVMDisposeMemoryBuffer(objs[i]);
    fzFree(ctx, objs);
    fzLLSitesFree(ctx, sites);
    return false;
  }
  *objsOut = objs;
  *nOut = (size_t)n;
  return true;
}

/*===--- Sessions -------------------------------------------------------===*/

FzNativeCacheSession *fzNativeCacheOpen(FzOp *loopModule,
                                        const FzCodegenOptions *o) {
  FzContext *ctx = fzOpGetContext(loopModule);
  if (!o || o->noCache)
    return NULL;
  double t0 = fzLLNowSeconds();
  FzNativeCacheSession *s = fzCalloc(ctx, 1, sizeof *s);
  if (!s)
    return NULL;
  s->ctx = ctx;
  s->o = *o;
  if (!fzLLLoopKey(loopModule, o, FZ_CACHE_NATIVE, &s->key) ||
      !(s->cache = fzCacheOpen(o->cacheDir))) {
    fzFree(ctx, s);
    return NULL;
  }
  fzLLReportPhase(o, "cache key", t0, -1, 1, 0);
  return s;
}

FzNativeModule *fzNativeCacheLookup(FzNativeCacheSession *s) {
  if (!s)
    return NULL;
  double t0 = fzLLNowSeconds();
  char *data = NULL;
  size_t len = 0;
  uint32_t flags = 0;
  if (!fzCacheLoad(s->cache, &s->key, FZ_CACHE_NATIVE, &data, &len, &flags))
    return NULL;
  FzLLSites sites = {0};
  LLVMMemoryBufferRef *objs = NULL;
  size_t n = 0;
  bool parsed = read_payload(s->ctx, data, len, &sites, &objs, &n);
  fzCacheFree(data);
  if (!parsed)
    return NULL; /* counted a hit; compiled and stored again */
  fzLLReportPhase(&s->o, "cache load", t0, -1, 1, 0);
  FzCodegenOptions o;
  FzNativeModule *m = NULL;
  if (fzLLNativeHostOptions(s->ctx, &s->o, &o))
    m = fzLLNativeFromObjects(s->ctx, objs, n, &sites, &o);
  else {
    for (size_t i = 0; i < n; ++i)
      LLVMDisposeMemoryBuffer(objs[i]);
    fzLLSitesFree(s->ctx, &sites);
  }
  fzFree(s->ctx, objs);
  if (m)
    fzNativeModuleSetCompileSeconds(m, fzLLNowSeconds() - t0);
  return m;
}

/* Translates module into units, compiles them to objects on threads
 * (cpu_codegen.c), stores them under s's key (s may be NULL) and links
 * them into a JIT. */
static FzNativeModule *compile(FzNativeCacheSession *s, FzOp *module,
                               const FzCodegenOptions *options) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions o;
  if (!fzLLNativeHostOptions(ctx, options, &o))
    return NULL;
  double t0 = fzLLNowSeconds();
  FzLLSites sites = {0};
  FzLLUnits units;
  memset(&units, 0, sizeof units);
  fzPtrVecInit(&units.exported, ctx);
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  if (!fzLLBuildTranslated(module, &o, &llctx, &mod, &tm, &sites, &units))
    return NULL;
  bool ok = fzLLCompileUnits(ctx, &units, &o, tm, true, false);
  LLVMDisposeTargetMachine(tm);
  size_t n = units.n;
  LLVMMemoryBufferRef *objs = ok ? fzCalloc(ctx, n + 1, sizeof *objs) : NULL;
  if (objs) {
    for (size_t i = 0; i < n; ++i) {
      objs[i] = units.v[i].out;
      units.v[i].out = NULL;
    }
    Out w = {0};
    if (s && write_payload(&w, &sites, objs, n))
      (void)fzCacheStore(s->cache, &s->key, FZ_CACHE_NATIVE, 0, w.p, w.len);
    fzLLThreadFree(w.p);
  }
  fzLLUnitsFree(ctx, &units);
  if (!objs) {
    fzLLSitesFree(ctx, &sites);
    return NULL;
  }
  FzNativeModule *m = fzLLNativeFromObjects(ctx, objs, n, &sites, &o);
  fzFree(ctx, objs);
  if (m)
    fzNativeModuleSetCompileSeconds(m, fzLLNowSeconds() - t0);
  return m;
}

FzNativeModule *fzNativeCacheCompile(FzNativeCacheSession *s,
                                     FzOp *loopModule,
                                     const FzCodegenOptions *o) {
  return compile(s, loopModule, o);
}

FzNativeModule *fzNativeModuleCreate(FzOp *module,
                                     const FzCodegenOptions *options) {
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  FzNativeCacheSession *s = fzNativeCacheOpen(module, options);
  FzNativeModule *m = fzNativeCacheLookup(s);
  if (!m)
    m = compile(s, module, options);
  fzNativeCacheClose(s);
  return m;
}

void fzNativeCacheClose(FzNativeCacheSession *s) {
  if (!s)
    return;
  fzCacheFinish(s->cache, s->ctx, s->o.timing);
  fzCacheClose(s->cache);
  fzFree(s->ctx, s);
}
