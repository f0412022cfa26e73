/* ir/cache.c - the kernel cache's folder (cache.h): where it
 * is, the entries' format, loads and stores that any thread and any
 * process may run at once, and eviction by size.
 *
 * Layout: ROOT/kernels/HEX.EXT, HEX the 64 hex digits of the key, EXT
 * the kind's (ptx, ll, o, cubin). Temporary files are ROOT/kernels/.tmp-PID-N-
 * HEX; the rename that publishes one is atomic, so readers never see a
 * partial entry, and two processes that store the same key leave one of
 * their (identical) entries.
 *
 * Memory: the cache and the payloads it loads are the C library's
 * (cache_alloc), since the code-generation threads use them; the
 * counters are atomic, the first failure is kept under a mutex.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fz/lowering.h" /* FzTimingSink */
#include "ir/cache.h"

static const char kMagic[8] = {'F', 'Z', 'K', 'C', 'A', 'C', 'H', 'E'};
enum { kTmpMaxAgeSeconds = 3600 };

struct FzCache {
  char *root; /* the folder given or found */
  char *dir;  /* root/kernels */
  uint64_t maxBytes;
  atomic_size_t hits, misses, corrupt, stored, evicted;
  atomic_uint serial;   /* temporary names */
  atomic_bool madeDir;  /* dir exists (made or found) */
  atomic_bool broken;   /* a store failed to create something: stop */
  pthread_mutex_t lock; /* error */
  char *error;          /* the first failure, or NULL */
};

/* The C library's memory: the code-generation threads load and store
 * entries, and a context's allocator is for its own thread only
 * (docs/architecture.md, "Memory"). */
static void *cache_alloc(size_t n) {
  return malloc(n ? n : 1); /* plain-alloc: kernel cache, any thread */
}

static void cache_free(void *p) {
  free(p); /* plain-alloc: kernel cache, any thread */
}

static char *cache_printf(const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? cache_alloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

static char *dup_printf(const char *fmt, const char *a, const char *b) {
  return cache_printf(fmt, a, b);
}

FzCache *fzCacheOpen(const char *dir) {
  char *root = NULL;
  const char *env = getenv("FZ_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (dir && *dir)
    root = dup_printf("%s%s", dir, "");
  else if (env && *env)
    root = dup_printf("%s%s", env, "");
  else if (xdg && *xdg)
    root = dup_printf("%s%s", xdg, "/fuse");
  else if (home && *home)
    root = dup_printf("%s%s", home, "/.cache/fuse");
  else
    return NULL;
  FzCache *c = root ? cache_alloc(sizeof *c) : NULL;
  if (!c) {
    cache_free(root);
    return NULL;
  }
  memset(c, 0, sizeof *c);
  c->root = root;
  c->dir = dup_printf("%s%s", root, "/kernels");
  if (!c->dir) {
    cache_free(root);
    cache_free(c);
    return NULL;
  }
  c->maxBytes = (uint64_t)FZ_CACHE_DEFAULT_MAX_MB << 20;
  const char *mb = getenv("FZ_CACHE_MAX_MB");
  if (mb && *mb) {
    char *end = NULL;
    unsigned long long v = strtoull(mb, &end, 10);
    if (end && !*end && v > 0 && v < (1ull << 44))
      c->maxBytes = (uint64_t)v << 20;
  }
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

void fzCacheClose(FzCache *c) {
  if (!c)
    return;
  pthread_mutex_destroy(&c->lock);
  cache_free(c->error);
  cache_free(c->dir);
  cache_free(c->root);
  cache_free(c);
}

const char *fzCacheGetDir(const FzCache *c) {
  return c->root;
}

void fzCacheSetMaxBytes(FzCache *c, uint64_t maxBytes) {
  c->maxBytes = maxBytes;
}

void fzCacheFree(void *payload) {
  cache_free(payload);
}

/*===--- The build id ---------------------------------------------------===*/

typedef struct BuildIdSearch {
  uintptr_t addr; /* an address inside fuse's code */
  FzSha256 *h;
  bool found;
} BuildIdSearch;

/* The NT_GNU_BUILD_ID note of the object that holds s->addr, or the
 * identity of its file. */
static int on_object(struct dl_phdr_info *info, size_t size, void *ud) {
  (void)size;
  BuildIdSearch *s = ud;
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + p->p_vaddr;
    holds = p->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + p->p_memsz;
  }
  if (!holds)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type != PT_NOTE)
      continue;
    const uint8_t *at = (const uint8_t *)(info->dlpi_addr + p->p_vaddr);
    const uint8_t *end = at + p->p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)at;
      size_t nameLen = (n->n_namesz + 3) & ~(size_t)3;
      size_t descLen = (n->n_descsz + 3) & ~(size_t)3;
      const uint8_t *name = at + sizeof *n, *desc = name + nameLen;
      if (desc + descLen > end)
        break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
          !memcmp(name, "GNU", 4)) {
        fzSha256UpdateString(s->h, "build-id");
        fzSha256Update(s->h, desc, n->n_descsz);
        s->found = true;
        return 1;
      }
      at = desc + descLen;
    }
  }
  /* No note: the file (the executable when the name is empty). */
  struct stat st;
  const char *path =
      info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
  if (stat(path, &st) == 0) {
    fzSha256UpdateString(s->h, "file");
    fzSha256UpdateU64(s->h, (uint64_t)st.st_dev);
    fzSha256UpdateU64(s->h, (uint64_t)st.st_ino);
    fzSha256UpdateU64(s->h, (uint64_t)st.st_size);
    fzSha256UpdateU64(s->h, (uint64_t)st.st_mtim.tv_sec);
    fzSha256UpdateU64(s->h, (uint64_t)st.st_mtim.tv_nsec);
    s->found = true;
  }
  return 1;
}

static pthread_once_t gBuildIdOnce = PTHREAD_ONCE_INIT;
static uint8_t gBuildId[FZ_SHA256_BYTES]; /* set once, then read-only */

static void compute_build_id(void) {
  FzSha256 h;
  fzSha256Init(&h);
  BuildIdSearch s = {(uintptr_t)&fzCacheKeyBegin, &h, false};
  dl_iterate_phdr(on_object, &s);
  if (!s.found) /* nothing identifies the build: this process only */
    fzSha256UpdateU64(&h, (uint64_t)getpid() ^ (uint64_t)time(NULL));
  fzSha256Final(&h, gBuildId);
}

const uint8_t *fzCacheBuildId(void) {
  pthread_once(&gBuildIdOnce, compute_build_id);
  return gBuildId;
}

void fzCacheKeyBegin(FzSha256 *h, FzCacheKind kind) {
  fzSha256Init(h);
  fzSha256Update(h, kMagic, sizeof kMagic);
  fzSha256UpdateU64(h, FZ_CACHE_FORMAT);
  fzSha256UpdateU64(h, (uint64_t)kind);
  fzSha256UpdateString(h, fzGetVersionString());
#ifdef FZ_GIT_COMMIT
  fzSha256UpdateString(h, FZ_GIT_COMMIT);
#endif
  fzSha256Update(h, fzCacheBuildId(), FZ_SHA256_BYTES);
}

/*===--- Entries --------------------------------------------------------===*/

static const char *kind_ext(FzCacheKind kind) {
  switch (kind) {
  case FZ_CACHE_PTX:
    return "ptx";
  case FZ_CACHE_LLVM_IR:
    return "ll";
  case FZ_CACHE_OBJECT:
    return "o";
  case FZ_CACHE_CUBIN:
    return "cubin";
  case FZ_CACHE_NATIVE:
    return "native";
  }
  return "bin";
}

static void to_hex(const FzCacheKey *key, char out[2 * FZ_SHA256_BYTES + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < FZ_SHA256_BYTES; ++i) {
    out[2 * i] = digits[key->bytes[i] >> 4];
    out[2 * i + 1] = digits[key->bytes[i] & 15];
  }
  out[2 * FZ_SHA256_BYTES] = '\0';
}

static char *entry_path(const FzCache *c, const FzCacheKey *key,
                        FzCacheKind kind) {
  char hex[2 * FZ_SHA256_BYTES + 1];
  to_hex(key, hex);
  return cache_printf("%s/%s.%s", c->dir, hex, kind_ext(kind));
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) {
  return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* The header: magic (8), format, kind, flags, reserved (4 each), payload
 * length (8), key (32), fzHash128 of the payload (16) and 16 zero
 * bytes. */
static void make_header(uint8_t h[FZ_CACHE_HEADER_BYTES], const FzCacheKey *key,
                        FzCacheKind kind, uint32_t flags, const void *payload,
                        size_t len) {
  memset(h, 0, FZ_CACHE_HEADER_BYTES);
  memcpy(h, kMagic, 8);
  put_u32(h + 8, FZ_CACHE_FORMAT);
  put_u32(h + 12, (uint32_t)kind);
  put_u32(h + 16, flags);
  put_u64(h + 24, (uint64_t)len);
  memcpy(h + 32, key->bytes, FZ_SHA256_BYTES);
  fzHash128(payload, len, 0, h + 64); /* bytes 80..95 stay 0 */
}

static bool read_all(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static bool write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool fzCacheLoad(FzCache *c, const FzCacheKey *key, FzCacheKind kind,
                 char **payload, size_t *len, uint32_t *flags) {
  *payload = NULL;
  *len = 0;
  *flags = 0;
  char *path = entry_path(c, key, kind);
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  cache_free(path);
  if (fd < 0) {
    atomic_fetch_add(&c->misses, 1);
    return false;
  }
  bool sound = false;
  struct stat st;
  uint8_t h[FZ_CACHE_HEADER_BYTES];
  char *data = NULL;
  if (fstat(fd, &st) == 0 && st.st_size >= FZ_CACHE_HEADER_BYTES &&
      read_all(fd, h, sizeof h) && !memcmp(h, kMagic, 8) &&
      get_u32(h + 8) == FZ_CACHE_FORMAT && get_u32(h + 12) == (uint32_t)kind &&
      !memcmp(h + 32, key->bytes, FZ_SHA256_BYTES) &&
      get_u64(h + 24) == (uint64_t)st.st_size - FZ_CACHE_HEADER_BYTES) {
    size_t n = (size_t)get_u64(h + 24);
    data = cache_alloc(n + 1);
    if (data && read_all(fd, (uint8_t *)data, n)) {
      uint8_t sum[FZ_SHA256_BYTES] = {0};
      fzHash128(data, n, 0, sum);
      sound = !memcmp(sum, h + 64, FZ_SHA256_BYTES);
      data[n] = '\0';
      *len = n;
    }
  }
  if (sound)
    (void)futimens(fd, NULL); /* used now: last to be evicted */
  close(fd);
  if (!sound) {
    cache_free(data);
    *len = 0;
    atomic_fetch_add(&c->corrupt, 1);
    atomic_fetch_add(&c->misses, 1);
    return false;
  }
  *payload = data;
  *flags = get_u32(h + 16);
  atomic_fetch_add(&c->hits, 1);
  return true;
}

/* Keeps the first failure ("cannot write 'PATH': REASON"). */
static void note_failure(FzCache *c, const char *path, int err) {
  char reason[128];
  snprintf(reason, sizeof reason, "%s", err ? strerror(err) : "short write");
  pthread_mutex_lock(&c->lock);
  if (!c->error)
    c->error = cache_printf("cannot write '%s': %s", path, reason);
  pthread_mutex_unlock(&c->lock);
}

/* mkdir -p of c->dir. */
static bool make_dir(FzCache *c) {
  if (atomic_load(&c->madeDir))
    return true;
  char *p = cache_printf("%s", c->dir);
  if (!p)
    return false;
  int err = 0;
  for (char *s = p + 1;; ++s) {
    if (*s != '/' && *s != '\0')
      continue;
    char saved = *s;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
      err = errno;
    else
      err = 0;
    *s = saved;
    if (!saved)
      break;
  }
  struct stat st;
  bool ok = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
  if (!ok) {
    note_failure(c, p, err ? err : ENOTDIR);
    atomic_store(&c->broken, true);
  }
  cache_free(p);
  if (ok)
    atomic_store(&c->madeDir, true);
  return ok;
}

bool fzCacheStore(FzCache *c, const FzCacheKey *key, FzCacheKind kind,
                  uint32_t flags, const void *payload, size_t len) {
  if (atomic_load(&c->broken) || !make_dir(c))
    return false;
  char hex[2 * FZ_SHA256_BYTES + 1];
  to_hex(key, hex);
  unsigned n = atomic_fetch_add(&c->serial, 1);
  char *tmp = cache_printf("%s/.tmp-%ld-%u-%s", c->dir, (long)getpid(), n, hex);
  char *path = entry_path(c, key, kind);
  if (!tmp || !path) {
    cache_free(tmp);
    cache_free(path);
    return false;
  }
  uint8_t h[FZ_CACHE_HEADER_BYTES];
  make_header(h, key, kind, flags, payload, len);
  bool ok = false;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    note_failure(c, tmp, errno);
    atomic_store(&c->broken, true);
  } else {
    errno = 0;
    ok = write_all(fd, h, sizeof h) && write_all(fd, payload, len);
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (ok && rename(tmp, path) != 0) {
      err = errno;
      ok = false;
    }
    if (!ok) {
      note_failure(c, path, err);
      unlink(tmp);
    }
  }
  cache_free(tmp);
  cache_free(path);
  if (ok)
    atomic_fetch_add(&c->stored, 1);
  return ok;
}

/*===--- Eviction -------------------------------------------------------===*/

typedef struct Entry {
  char *name;
  uint64_t bytes;
  struct timespec used;
} Entry;

static int by_age(const void *a, const void *b) {
  const Entry *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec)
    return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  if (x->used.tv_nsec != y->used.tv_nsec)
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

void fzCacheEvict(FzCache *c) {
  DIR *d = opendir(c->dir);
  if (!d)
    return;
  Entry *v = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  bool ok = true;
  for (struct dirent *e; ok && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (!strncmp(e->d_name, ".tmp-", 5)) {
      if (now - st.st_mtim.tv_sec > kTmpMaxAgeSeconds)
        (void)unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      Entry *nv = cache_alloc(ncap * sizeof *nv);
      if (!nv) {
        ok = false;
        break;
      }
      if (v)
        memcpy(nv, v, n * sizeof *v);
      cache_free(v);
      v = nv;
      cap = ncap;
    }
    v[n].name = cache_printf("%s", e->d_name);
    if (!v[n].name) {
      ok = false;
      break;
    }
    v[n].bytes = (uint64_t)st.st_size;
    v[n].used = st.st_mtim;
    total += v[n].bytes;
    ++n;
  }
  if (ok && total > c->maxBytes) {
    qsort(v, n, sizeof *v, by_age);
    for (size_t i = 0; i < n && total > c->maxBytes; ++i)
      if (unlinkat(dirfd(d), v[i].name, 0) == 0 || errno == ENOENT) {
        total -= v[i].bytes;
        atomic_fetch_add(&c->evicted, 1);
      }
  }
  for (size_t i = 0; i < n; ++i)
    cache_free(v[i].name);
  cache_free(v);
  closedir(d);
}

void fzCacheGetStats(FzCache *c, FzCacheStats *s) {
  s->hits = atomic_load(&c->hits);
  s->misses = atomic_load(&c->misses);
  s->corrupt = atomic_load(&c->corrupt);
  s->stored = atomic_load(&c->stored);
  s->evicted = atomic_load(&c->evicted);
}

const char *fzCacheGetError(FzCache *c) {
  pthread_mutex_lock(&c->lock);
  const char *e = c->error;
  pthread_mutex_unlock(&c->lock);
  return e;
}

void fzCacheFinish(FzCache *c, FzContext *ctx, const FzTimingSink *sink) {
  if (!c)
    return;
  FzCacheStats st;
  fzCacheGetStats(c, &st);
  if (st.stored)
    fzCacheEvict(c);
  if (sink && sink->record) {
    FzTimingRecord r = {"kernel cache", c->root,   0,         0, 1, 0,
                        st.hits,        st.misses, st.corrupt};
    sink->record(&r, sink->userData);
  }
  const char *err = fzCacheGetError(c);
  if (err)
    fzEmitWarning(ctx, NULL,
                  "kernel cache: %s; the compiled code is not cached", err);
  if (st.corrupt)
    fzEmitWarning(ctx, NULL,
                  "kernel cache: %zu corrupt entr%s in '%s' ignored and "
                  "rebuilt",
                  st.corrupt, st.corrupt == 1 ? "y" : "ies", c->dir);
}
