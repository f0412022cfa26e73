/* tests/unit/test_cache.c - Check suite of the kernel cache
 * (ir/cache.c, sha256.c, hash128.c; its users lowering/nvptx/codegen.c
 * and lowering/llvm/objcache.c).
 *
 * SHA-256 against FIPS 180-4's vectors, the 128-bit hash against
 * SMHasher's verification value; entries stored and loaded; a
 * corrupt, truncated or foreign entry is a miss that the next store
 * rewrites; processes that store and load the same keys at once (fork)
 * leave sound entries and no temporary file; eviction keeps the most
 * recently used entries under the limit; a folder that cannot be written
 * is a warning and the compile succeeds. Through the compilers: the
 * second fzGpuCompile of a module finds every kernel in the cache and
 * gives the same PTX and checks, a corrupted entry is rebuilt (a
 * warning, the same PTX), and the CPU's object file is reused. Every
 * test works in a fresh folder under $TMPDIR (or /tmp), never the
 * user's cache.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fz/fz.h"
#include "fz/gpu.h"
#include "ir/cache.h"
#include "tests/unit/test_helpers.h"

/*===--- Helpers --------------------------------------------------------===*/

/* A fresh folder (mkdtemp), its path in buf. */
static void temp_dir(char *buf, size_t size) {
  const char *t = getenv("TMPDIR");
  snprintf(buf, size, "%s/fz-cache-test-XXXXXX", t && *t ? t : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(buf));
}

static void remove_tree(const char *path) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  ck_assert_int_eq(system(cmd), 0);
}

static void hex(const uint8_t *d, size_t n, char *out) {
  for (size_t i = 0; i < n; ++i)
    sprintf(out + 2 * i, "%02x", d[i]);
}

static void sha_hex(const char *msg, size_t len, char out[65]) {
  FzSha256 s;
  uint8_t d[FZ_SHA256_BYTES];
  fzSha256Init(&s);
  fzSha256Update(&s, msg, len);
  fzSha256Final(&s, d);
  hex(d, sizeof d, out);
}

static FzCacheKey key_of(const char *text) {
  FzCacheKey k;
  FzSha256 s;
  fzCacheKeyBegin(&s, FZ_CACHE_PTX);
  fzSha256UpdateString(&s, text);
  fzSha256Final(&s, k.bytes);
  return k;
}

/* The entries (not temporaries) of the cache's folder; *tmps the
 * temporaries. */
static size_t count_entries(const char *root, size_t *tmps) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/kernels", root);
  DIR *d = opendir(dir);
  size_t n = 0, t = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] != '.')
      ++n;
    else if (!strncmp(e->d_name, ".tmp-", 5))
      ++t;
  }
  if (d)
    closedir(d);
  if (tmps)
    *tmps = t;
  return n;
}

/* The path of every entry, each passed to fn. */
static void each_entry(const char *root, void (*fn)(const char *path)) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/kernels", root);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    fn(path);
  }
  closedir(d);
}

static char *entry_path(const char *root, const FzCacheKey *k,
                        const char *ext) {
  char h[65];
  hex(k->bytes, sizeof k->bytes, h);
  static char path[1400];
  snprintf(path, sizeof path, "%s/kernels/%s.%s", root, h, ext);
  return path;
}

/* Flips one byte of the file at offset (from the end when negative). */
static void flip_byte(const char *path, long offset) {
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  off_t at = offset >= 0 ? offset : st.st_size + offset;
  unsigned char c;
  ck_assert_int_eq(pread(fd, &c, 1, at), 1);
  c ^= 0x5a;
  ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

static void corrupt_payload(const char *path) {
  flip_byte(path, -1);
}

/*===--- SHA-256 --------------------------------------------------------===*/

START_TEST(test_sha256_vectors) {
  char h[65];
  sha_hex("", 0, h);
  ck_assert_str_eq(
      h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha_hex("abc", 3, h);
  ck_assert_str_eq(
      h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha_hex(two, strlen(two), h);
  ck_assert_str_eq(
      h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A million 'a's, fed in uneven pieces. */
  FzSha256 s;
  fzSha256Init(&s);
  char block[997];
  memset(block, 'a', sizeof block);
  size_t left = 1000000;
  for (size_t piece = 1; left; piece = piece % 983 + 13) {
    size_t n = piece < left ? piece : left; /* piece <= 995 < 997 */
    fzSha256Update(&s, block, n);
    left -= n;
  }
  uint8_t d[FZ_SHA256_BYTES];
  fzSha256Final(&s, d);
  hex(d, sizeof d, h);
  ck_assert_str_eq(
      h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* SMHasher's verification of MurmurHash3_x64_128: keys 0, 0 1, 0 1 2,
 * ... of lengths 0..255 hashed with seeds 256..1, their hashes hashed
 * with seed 0; the first 4 bytes, little endian, are 0x6384BA69. */
START_TEST(test_hash128_verification) {
  uint8_t key[256], hashes[256 * FZ_HASH128_BYTES], final[FZ_HASH128_BYTES];
  for (int i = 0; i < 256; ++i) {
    key[i] = (uint8_t)i;
    fzHash128(key, (size_t)i, (uint32_t)(256 - i),
              &hashes[i * FZ_HASH128_BYTES]);
  }
  fzHash128(hashes, sizeof hashes, 0, final);
  uint32_t v = (uint32_t) final[0] | (uint32_t) final[1] << 8 |
               (uint32_t) final[2] << 16 | (uint32_t) final[3] << 24;
  ck_assert_uint_eq(v, 0x6384BA69u);
  /* Every byte counts, at every position of a tail. */
  uint8_t a[FZ_HASH128_BYTES], b[FZ_HASH128_BYTES];
  for (size_t len = 1; len < 40; ++len)
    for (size_t at = 0; at < len; ++at) {
      uint8_t buf[40] = {0};
      fzHash128(buf, len, 0, a);
      buf[at] = 1;
      fzHash128(buf, len, 0, b);
      ck_assert(memcmp(a, b, sizeof a) != 0);
    }
}
END_TEST

START_TEST(test_key_depends_on_kind_and_text) {
  FzCacheKey a = key_of("x"), b = key_of("y"), a2 = key_of("x");
  ck_assert(memcmp(a.bytes, b.bytes, sizeof a.bytes) != 0);
  ck_assert(memcmp(a.bytes, a2.bytes, sizeof a.bytes) == 0);
  FzSha256 s;
  FzCacheKey o;
  fzCacheKeyBegin(&s, FZ_CACHE_OBJECT);
  fzSha256UpdateString(&s, "x");
  fzSha256Final(&s, o.bytes);
  ck_assert(memcmp(a.bytes, o.bytes, sizeof a.bytes) != 0);
  /* The build id is the same on every call. */
  ck_assert(memcmp(fzCacheBuildId(), fzCacheBuildId(), FZ_SHA256_BYTES) == 0);
}
END_TEST

/*===--- Entries --------------------------------------------------------===*/

START_TEST(test_store_load) {
  char root[512];
  temp_dir(root, sizeof root);
  FzCache *c = fzCacheOpen(root);
  ck_assert_ptr_nonnull(c);
  ck_assert_str_eq(fzCacheGetDir(c), root);
  FzCacheKey k = key_of("kernel"), other = key_of("other");
  char *p = NULL;
  size_t n = 0;
  uint32_t flags = 7;
  ck_assert(!fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert_ptr_null(p);
  const char text[] = ".version 8.0\n.target sm_90\n";
  ck_assert(fzCacheStore(c, &k, FZ_CACHE_PTX, 1, text, sizeof text - 1));
  ck_assert(fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert_uint_eq(n, sizeof text - 1);
  ck_assert_str_eq(p, text); /* NUL-terminated */
  ck_assert_uint_eq(flags, 1);
  fzCacheFree(p);
  /* Another key, another kind: misses. */
  ck_assert(!fzCacheLoad(c, &other, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert(!fzCacheLoad(c, &k, FZ_CACHE_OBJECT, &p, &n, &flags));
  /* An empty payload is an entry too. */
  ck_assert(fzCacheStore(c, &other, FZ_CACHE_OBJECT, 0, "", 0));
  ck_assert(fzCacheLoad(c, &other, FZ_CACHE_OBJECT, &p, &n, &flags));
  ck_assert_uint_eq(n, 0);
  fzCacheFree(p);
  FzCacheStats st;
  fzCacheGetStats(c, &st);
  ck_assert_uint_eq(st.hits, 2);
  ck_assert_uint_eq(st.misses, 3);
  ck_assert_uint_eq(st.corrupt, 0);
  ck_assert_uint_eq(st.stored, 2);
  ck_assert_ptr_null(fzCacheGetError(c));
  fzCacheClose(c);
  /* Another FzCache on the folder (another process, later) finds them. */
  c = fzCacheOpen(root);
  ck_assert(fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert_str_eq(p, text);
  fzCacheFree(p);
  fzCacheClose(c);
  remove_tree(root);
}
END_TEST

START_TEST(test_location_from_environment) {
  char root[512];
  temp_dir(root, sizeof root);
  char *saved = getenv("FZ_CACHE_DIR") ? strdup(getenv("FZ_CACHE_DIR")) : NULL;
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char *xdg =
      getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  setenv("FZ_CACHE_DIR", root, 1);
  FzCache *c = fzCacheOpen(NULL);
  ck_assert_str_eq(fzCacheGetDir(c), root);
  fzCacheClose(c);
  /* Without it: $XDG_CACHE_HOME/fuse, then $HOME/.cache/fuse (only the
   * names are looked at: nothing is written). */
  unsetenv("FZ_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/nonexistent/xdg", 1);
  c = fzCacheOpen(NULL);
  ck_assert_str_eq(fzCacheGetDir(c), "/nonexistent/xdg/fuse");
  fzCacheClose(c);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/nonexistent/home", 1);
  c = fzCacheOpen(NULL);
  ck_assert_str_eq(fzCacheGetDir(c), "/nonexistent/home/.cache/fuse");
  fzCacheClose(c);
  /* The argument wins over the environment. */
  setenv("FZ_CACHE_DIR", "/nonexistent/env", 1);
  c = fzCacheOpen(root);
  ck_assert_str_eq(fzCacheGetDir(c), root);
  fzCacheClose(c);
  /* As it was (for CK_FORK=no runs). */
  if (saved)
    setenv("FZ_CACHE_DIR", saved, 1);
  else
    unsetenv("FZ_CACHE_DIR");
  if (home)
    setenv("HOME", home, 1);
  if (xdg)
    setenv("XDG_CACHE_HOME", xdg, 1);
  free(saved);
  free(home);
  free(xdg);
  remove_tree(root);
}
END_TEST

/* An entry damaged by `damage` is a corrupt miss; storing again makes it
 * sound. */
static void check_damaged(void (*damage)(const char *path)) {
  char root[512];
  temp_dir(root, sizeof root);
  FzCache *c = fzCacheOpen(root);
  FzCacheKey k = key_of("damaged");
  char payload[4000];
  for (size_t i = 0; i < sizeof payload; ++i)
    payload[i] = (char)('a' + i % 26);
  ck_assert(fzCacheStore(c, &k, FZ_CACHE_PTX, 0, payload, sizeof payload));
  damage(entry_path(root, &k, "ptx"));
  char *p = NULL;
  size_t n = 0;
  uint32_t flags = 0;
  ck_assert(!fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert_ptr_null(p);
  FzCacheStats st;
  fzCacheGetStats(c, &st);
  ck_assert_uint_eq(st.corrupt, 1);
  ck_assert_uint_eq(st.misses, 1);
  ck_assert(fzCacheStore(c, &k, FZ_CACHE_PTX, 0, payload, sizeof payload));
  ck_assert(fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  ck_assert_uint_eq(n, sizeof payload);
  ck_assert(memcmp(p, payload, n) == 0);
  fzCacheFree(p);
  fzCacheClose(c);
  remove_tree(root);
}

static void truncate_half(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
}
static void truncate_header(const char *path) {
  ck_assert_int_eq(truncate(path, 40), 0);
}
static void bad_magic(const char *path) {
  flip_byte(path, 0);
}
static void bad_format(const char *path) {
  flip_byte(path, 8);
}
static void bad_length(const char *path) {
  flip_byte(path, 24);
}
static void bad_key(const char *path) {
  flip_byte(path, 40);
}
static void bad_sum(const char *path) {
  flip_byte(path, 70);
}
static void appended(const char *path) {
  FILE *f = fopen(path, "ab");
  ck_assert_ptr_nonnull(f);
  fputs("tail", f);
  fclose(f);
}

START_TEST(test_corrupt_entries) {
  check_damaged(corrupt_payload);
  check_damaged(truncate_half);
  check_damaged(truncate_header);
  check_damaged(bad_magic);
  check_damaged(bad_format);
  check_damaged(bad_length);
  check_damaged(bad_key);
  check_damaged(bad_sum);
  check_damaged(appended);
}
END_TEST

/* Eight processes store and load the same 16 keys (and one key each of
 * their own) at once. */
START_TEST(test_concurrent_processes) {
  char root[512];
  temp_dir(root, sizeof root);
  enum { kProcs = 8, kKeys = 16 };
  pid_t pids[kProcs];
  for (int p = 0; p < kProcs; ++p) {
    pids[p] = fork();
    ck_assert_int_ge(pids[p], 0);
    if (pids[p])
      continue;
    FzCache *c = fzCacheOpen(root);
    int bad = !c;
    for (int round = 0; round < 20 && !bad; ++round)
      for (int i = 0; i < kKeys + 1; ++i) {
        char name[32], text[8192];
        snprintf(name, sizeof name, i < kKeys ? "shared %d" : "own %d",
                 i < kKeys ? i : p);
        FzCacheKey k = key_of(name);
        size_t len = 1000 + 400 * (size_t)i;
        for (size_t j = 0; j < len; ++j)
          text[j] = name[j % strlen(name)];
        char *got = NULL;
        size_t n = 0;
        uint32_t flags = 0;
        if (fzCacheLoad(c, &k, FZ_CACHE_PTX, &got, &n, &flags)) {
          bad |= n != len || memcmp(got, text, len) != 0 || flags != 3;
          fzCacheFree(got);
        } else {
          bad |= !fzCacheStore(c, &k, FZ_CACHE_PTX, 3, text, len);
        }
      }
    FzCacheStats st;
    if (c)
      fzCacheGetStats(c, &st);
    bad |= !c || st.corrupt != 0;
    fzCacheClose(c);
    _exit(bad);
  }
  for (int p = 0; p < kProcs; ++p) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
  }
  size_t tmps = 1;
  ck_assert_uint_eq(count_entries(root, &tmps), kKeys + kProcs);
  ck_assert_uint_eq(tmps, 0);
  remove_tree(root);
}
END_TEST

/* Sets the modification time of the entry of key to `age` seconds ago. */
static void age_entry(const char *root, const FzCacheKey *k, long age) {
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age;
  t[1] = t[0];
  ck_assert_int_eq(utimensat(AT_FDCWD, entry_path(root, k, "ptx"), t, 0), 0);
}

START_TEST(test_eviction) {
  char root[512];
  temp_dir(root, sizeof root);
  FzCache *c = fzCacheOpen(root);
  enum { kEntries = 10, kBytes = 10000 };
  static char payload[kBytes];
  memset(payload, 'p', sizeof payload);
  FzCacheKey keys[kEntries];
  for (int i = 0; i < kEntries; ++i) {
    char name[16];
    snprintf(name, sizeof name, "entry %d", i);
    keys[i] = key_of(name);
    ck_assert(fzCacheStore(c, &keys[i], FZ_CACHE_PTX, 0, payload, kBytes));
    age_entry(root, &keys[i], 1000 - 10 * i); /* entry 0 the oldest */
  }
  /* A hit refreshes entry 1: it is now the most recently used. */
  char *p = NULL;
  size_t n = 0;
  uint32_t flags = 0;
  ck_assert(fzCacheLoad(c, &keys[1], FZ_CACHE_PTX, &p, &n, &flags));
  fzCacheFree(p);
  /* Under the limit: nothing goes. */
  fzCacheEvict(c);
  ck_assert_uint_eq(count_entries(root, NULL), kEntries);
  /* Room for four entries (header included): the six least recently
   * used go (0, 2, 3, 4, 5, 6). */
  fzCacheSetMaxBytes(c, 4 * (kBytes + FZ_CACHE_HEADER_BYTES) + 10);
  fzCacheEvict(c);
  ck_assert_uint_eq(count_entries(root, NULL), 4);
  static const int kept[] = {1, 7, 8, 9}, gone[] = {0, 2, 3, 4, 5, 6};
  for (size_t i = 0; i < 4; ++i)
    ck_assert_int_eq(access(entry_path(root, &keys[kept[i]], "ptx"), F_OK), 0);
  for (size_t i = 0; i < 6; ++i)
    ck_assert_int_ne(access(entry_path(root, &keys[gone[i]], "ptx"), F_OK), 0);
  FzCacheStats st;
  fzCacheGetStats(c, &st);
  ck_assert_uint_eq(st.evicted, 6);
  /* A temporary file left by a dead writer goes once it is an hour old;
   * a young one stays (a writer may be at work). */
  char old[1200], young[1200];
  snprintf(old, sizeof old, "%s/kernels/.tmp-1-0-old", root);
  snprintf(young, sizeof young, "%s/kernels/.tmp-1-1-young", root);
  FILE *f = fopen(old, "w");
  fclose(f);
  f = fopen(young, "w");
  fclose(f);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= 7200;
  t[1] = t[0];
  ck_assert_int_eq(utimensat(AT_FDCWD, old, t, 0), 0);
  fzCacheEvict(c);
  ck_assert_int_ne(access(old, F_OK), 0);
  ck_assert_int_eq(access(young, F_OK), 0);
  fzCacheClose(c);
  /* FZ_CACHE_MAX_MB sets the limit. */
  setenv("FZ_CACHE_MAX_MB", "1", 1);
  c = fzCacheOpen(root);
  for (int i = 0; i < 200; ++i) {
    char name[16];
    snprintf(name, sizeof name, "big %d", i);
    FzCacheKey k = key_of(name);
    ck_assert(fzCacheStore(c, &k, FZ_CACHE_PTX, 0, payload, kBytes));
  }
  fzCacheEvict(c);
  ck_assert_uint_le(count_entries(root, NULL),
                    (1 << 20) / (kBytes + FZ_CACHE_HEADER_BYTES) + 1);
  unsetenv("FZ_CACHE_MAX_MB");
  fzCacheClose(c);
  remove_tree(root);
}
END_TEST

START_TEST(test_unwritable) {
  char root[512], file[600];
  temp_dir(root, sizeof root);
  /* A folder below a regular file can be made by nobody, root included. */
  snprintf(file, sizeof file, "%s/file", root);
  FILE *f = fopen(file, "w");
  fclose(f);
  char below[700];
  snprintf(below, sizeof below, "%s/cache", file);
  FzCache *c = fzCacheOpen(below);
  FzCacheKey k = key_of("k");
  ck_assert(!fzCacheStore(c, &k, FZ_CACHE_PTX, 0, "x", 1));
  ck_assert_ptr_nonnull(fzCacheGetError(c));
  ck_assert_ptr_nonnull(strstr(fzCacheGetError(c), "cannot write"));
  char *p = NULL;
  size_t n = 0;
  uint32_t flags = 0;
  ck_assert(!fzCacheLoad(c, &k, FZ_CACHE_PTX, &p, &n, &flags));
  fzCacheEvict(c); /* nothing to do, and no crash */
  fzCacheClose(c);
  remove_tree(root);
}
END_TEST

/*===--- Through the compilers ------------------------------------------===*/

/* Four kernels: a gather (a run-time check), a softmax (exp), a chain. */
static const char kModule[] =
    "func.func @main(%x: tensor<8x64xf32>, %i: tensor<3xi64>,\n"
    "                %y: tensor<4096xf32>)\n"
    "    -> (tensor<3x64xf32>, tensor<8x64xf32>, tensor<4096xf32>) {\n"
    "  %0 = graph.gather %x, %i {axis = 0 : i64} : tensor<8x64xf32>, "
    "tensor<3xi64> -> tensor<3x64xf32>\n"
    "  %1 = graph.softmax %x {axis = 1 : i64} : tensor<8x64xf32>\n"
    "  %2 = graph.tanh %y : tensor<4096xf32>\n"
    "  %3 = graph.exp %2 : tensor<4096xf32>\n"
    "  return %0, %1, %3 : tensor<3x64xf32>, tensor<8x64xf32>, "
    "tensor<4096xf32>\n"
    "}\n";

typedef struct Counts {
  size_t hits, misses, corrupt, records, progressCalls, lastDone, total;
} Counts;

static void on_record(const FzTimingRecord *r, void *ud) {
  Counts *c = ud;
  if (strcmp(r->phase, "kernel cache"))
    return;
  c->hits += r->cacheHits;
  c->misses += r->cacheMisses;
  c->corrupt += r->cacheCorrupt;
  c->records++;
}

static void on_progress(const char *what, size_t done, size_t total, void *ud) {
  Counts *c = ud;
  ck_assert_str_eq(what, "compiling kernels");
  ck_assert_uint_le(done, total);
  if (c->progressCalls++ == 0)
    ck_assert_uint_eq(done, 0);
  else
    ck_assert_uint_eq(done, c->lastDone + 1);
  c->lastDone = done;
  c->total = total;
}

static FzOp *loop_module(FzContext *ctx) {
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(kModule), FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzLowerModuleForCpu(m, NULL));
  return m;
}

static FzGpuProgram *compile_gpu(FzOp *m, const char *dir, unsigned threads,
                                 Counts *counts) {
  memset(counts, 0, sizeof *counts);
  FzTimingSink sink = {on_record, counts};
  FzProgressSink progress = {on_progress, counts};
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.libdevice = ""; /* the same text with or without a CUDA toolkit */
  go.cacheDir = dir;
  go.codegenThreads = threads;
  go.timing = &sink;
  go.progress = &progress;
  FzGpuProgram *p = fzGpuCompile(m, &go);
  ck_assert_ptr_nonnull(p);
  return p;
}

static void same_program(const FzGpuProgram *a, const FzGpuProgram *b) {
  ck_assert_uint_eq(a->ptxLen, b->ptxLen);
  ck_assert(memcmp(a->ptx, b->ptx, a->ptxLen) == 0);
  ck_assert_uint_eq(a->numChecks, b->numChecks);
  for (size_t i = 0; i < a->numChecks; ++i)
    ck_assert_str_eq(a->checks[i].message, b->checks[i].message);
}

START_TEST(test_gpu_hits) {
  char root[512];
  temp_dir(root, sizeof root);
  FzContext *ctx = fzContextCreate();
  FzOp *m = loop_module(ctx);
  Counts cold, warm, again;
  FzGpuProgram *p1 = compile_gpu(m, root, 2, &cold);
  ck_assert_uint_eq(cold.records, 1);
  ck_assert_uint_eq(cold.hits, 0);
  ck_assert_uint_ge(cold.misses, 3);
  ck_assert_uint_eq(cold.progressCalls, cold.misses + 1);
  ck_assert_uint_eq(cold.lastDone, cold.total);
  ck_assert_uint_eq(count_entries(root, NULL), cold.misses);
  ck_assert_uint_ge(p1->numChecks, 1);
  /* Warm, on another thread count: every kernel from the cache. */
  FzGpuProgram *p2 = compile_gpu(m, root, 1, &warm);
  ck_assert_uint_eq(warm.hits, cold.misses);
  ck_assert_uint_eq(warm.misses, 0);
  ck_assert_uint_eq(warm.lastDone, warm.total);
  same_program(p1, p2);
  fzGpuProgramDestroy(p2);
  /* Another arch is another key. */
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.libdevice = "";
  go.cacheDir = root;
  go.arch = "sm_80";
  Counts other;
  memset(&other, 0, sizeof other);
  FzTimingSink sink = {on_record, &other};
  go.timing = &sink;
  FzGpuProgram *p80 = fzGpuCompile(m, &go);
  ck_assert_ptr_nonnull(p80);
  ck_assert_uint_eq(other.hits, 0);
  ck_assert_uint_eq(other.misses, cold.misses);
  fzGpuProgramDestroy(p80);
  /* noCache: neither read nor written. */
  go.arch = "sm_90";
  go.noCache = true;
  memset(&other, 0, sizeof other);
  FzGpuProgram *p3 = fzGpuCompile(m, &go);
  ck_assert_uint_eq(other.records, 0);
  same_program(p1, p3);
  fzGpuProgramDestroy(p3);
  /* Corrupt entries: a warning, rebuilt, the same program. */
  each_entry(root, corrupt_payload);
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzGpuProgram *p4 = compile_gpu(m, root, 3, &again);
  diag_log_end(&log);
  ck_assert_uint_eq(log.numErrors, 0);
  ck_assert_ptr_nonnull(diag_log_find(&log, "corrupt entr"));
  ck_assert_uint_eq(again.hits, 0);
  ck_assert_uint_eq(again.corrupt, cold.misses); /* sm_90's (not sm_80's) */
  same_program(p1, p4);
  fzGpuProgramDestroy(p4);
  FzGpuProgram *p5 = compile_gpu(m, root, 0, &again);
  ck_assert_uint_eq(again.hits, cold.misses);
  ck_assert_uint_eq(again.corrupt, 0);
  same_program(p1, p5);
  fzGpuProgramDestroy(p5);
  fzGpuProgramDestroy(p1);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
  remove_tree(root);
}
END_TEST

START_TEST(test_gpu_unwritable) {
  char root[512], below[700];
  temp_dir(root, sizeof root);
  snprintf(below, sizeof below, "%s/file", root);
  FILE *f = fopen(below, "w");
  fclose(f);
  strcat(below, "/cache");
  FzContext *ctx = fzContextCreate();
  FzOp *m = loop_module(ctx);
  Counts counts;
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzGpuProgram *p = compile_gpu(m, below, 2, &counts);
  diag_log_end(&log);
  ck_assert_uint_eq(log.numErrors, 0);
  const DiagRecord *w = diag_log_find(&log, "kernel cache: cannot write");
  ck_assert_ptr_nonnull(w);
  ck_assert_int_eq(w->severity, FZ_SEVERITY_WARNING);
  ck_assert_uint_eq(log.count, 1); /* once, not once per kernel */
  ck_assert_ptr_nonnull(strstr(p->ptx, ".visible .entry"));
  fzGpuProgramDestroy(p);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
  remove_tree(root);
}
END_TEST

static bool emit_obj(FzOp *m, const char *dir, TextBuf *out, Counts *counts) {
  memset(counts, 0, sizeof *counts);
  FzTimingSink sink = {on_record, counts};
  FzCodegenOptions co;
  fzCodegenOptionsInit(&co);
  co.cacheDir = dir;
  co.timing = &sink;
  memset(out, 0, sizeof *out);
  return fzEmitLLVM(m, &co, FZ_CODEGEN_OBJECT, text_cb, out);
}

START_TEST(test_cpu_object) {
  char root[512];
  temp_dir(root, sizeof root);
  FzContext *ctx = fzContextCreate();
  FzOp *m = loop_module(ctx);
  TextBuf a, b, c;
  Counts cold, warm, again;
  ck_assert(emit_obj(m, root, &a, &cold));
  ck_assert_uint_eq(cold.misses, 1);
  ck_assert_uint_eq(cold.hits, 0);
  ck_assert(emit_obj(m, root, &b, &warm));
  ck_assert_uint_eq(warm.hits, 1);
  ck_assert_uint_eq(a.len, b.len);
  ck_assert(memcmp(a.data, b.data, a.len) == 0);
  /* The JIT loads the cached object and it runs. */
  FzCodegenOptions co;
  fzCodegenOptionsInit(&co);
  co.cacheDir = root;
  co.parallel = false;
  FzNativeModule *nm = fzNativeModuleCreate(m, &co);
  ck_assert_ptr_nonnull(nm);
  ck_assert(fzNativeModuleLookupSymbol(nm, "main") != 0);
  fzNativeModuleDestroy(nm);
  /* Corrupt: rebuilt, with a warning; the same bytes. */
  each_entry(root, corrupt_payload);
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(emit_obj(m, root, &c, &again));
  diag_log_end(&log);
  ck_assert_ptr_nonnull(diag_log_find(&log, "corrupt entr"));
  ck_assert_uint_eq(again.corrupt, 1);
  ck_assert_uint_eq(a.len, c.len);
  ck_assert(memcmp(a.data, c.data, a.len) == 0);
  text_free(&a);
  text_free(&b);
  text_free(&c);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
  remove_tree(root);
}
END_TEST

/* @main adds a constant of 2048 f32 (8 KiB: hashed apart from the
 * bitcode, objcache.c) whose element `which` is 1.0 instead of 0.5. */
static FzOp *weights_module(FzContext *ctx, int which) {
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  enum { kN = 2048 };
  size_t cap = 8 * kN + 512;
  char *src = malloc(cap);
  ck_assert_ptr_nonnull(src);
  int at = snprintf(src, cap,
                    "func.func @main(%%x: tensor<%dxf32>) -> tensor<%dxf32> "
                    "{\n  %%w = graph.constant dense<\"0x",
                    kN, kN);
  for (int i = 0; i < kN; ++i) /* 0.5: 0x3F000000, 1.0: 0x3F800000 */
    at += snprintf(src + at, cap - (size_t)at, "%s",
                   i == which ? "0000803F" : "0000003F");
  snprintf(src + at, cap - (size_t)at,
           "\"> : tensor<%dxf32>\n  %%0 = graph.add %%x, %%w : "
           "tensor<%dxf32>, tensor<%dxf32> -> tensor<%dxf32>\n  return %%0 "
           ": tensor<%dxf32>\n}\n",
           kN, kN, kN, kN, kN);
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("w.fuse"), 0);
  free(src);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzLowerModuleForCpu(m, NULL));
  return m;
}

/* One weight differs: another key (a miss, another object); the same
 * weights again: a hit with the first object. */
START_TEST(test_cpu_weights_in_key) {
  char root[512];
  temp_dir(root, sizeof root);
  FzContext *ctx = fzContextCreate();
  FzOp *m1 = weights_module(ctx, 7), *m2 = weights_module(ctx, 1500);
  TextBuf a, b, c;
  Counts k1, k2, k3;
  ck_assert(emit_obj(m1, root, &a, &k1));
  ck_assert(emit_obj(m2, root, &b, &k2));
  ck_assert_uint_eq(k1.misses, 1);
  ck_assert_uint_eq(k2.misses, 1);
  ck_assert_uint_eq(k2.hits, 0);
  ck_assert(a.len != b.len || memcmp(a.data, b.data, a.len) != 0);
  ck_assert_uint_eq(count_entries(root, NULL), 2);
  ck_assert(emit_obj(m1, root, &c, &k3));
  ck_assert_uint_eq(k3.hits, 1);
  ck_assert_uint_eq(a.len, c.len);
  ck_assert(memcmp(a.data, c.data, a.len) == 0);
  /* The module itself is left as it was: --emit=llvm shows the weights. */
  TextBuf ll;
  memset(&ll, 0, sizeof ll);
  FzCodegenOptions co;
  fzCodegenOptionsInit(&co);
  co.optLevel = 0;
  ck_assert(fzEmitLLVM(m1, &co, FZ_CODEGEN_LLVM_IR, text_cb, &ll));
  ck_assert_ptr_nonnull(strstr(ll.data, "\\00\\00\\80?"));
  text_free(&ll);
  text_free(&a);
  text_free(&b);
  text_free(&c);
  fzOpDestroy(m1);
  fzOpDestroy(m2);
  fzContextDestroy(ctx);
  remove_tree(root);
}
END_TEST

static Suite *cache_suite(void) {
  Suite *s = suite_create("cache");
  TCase *tc = tcase_create("cache");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_sha256_vectors);
  tcase_add_test(tc, test_hash128_verification);
  tcase_add_test(tc, test_key_depends_on_kind_and_text);
  tcase_add_test(tc, test_store_load);
  tcase_add_test(tc, test_location_from_environment);
  tcase_add_test(tc, test_corrupt_entries);
  tcase_add_test(tc, test_concurrent_processes);
  tcase_add_test(tc, test_eviction);
  tcase_add_test(tc, test_unwritable);
  tcase_add_test(tc, test_gpu_hits);
  tcase_add_test(tc, test_gpu_unwritable);
  tcase_add_test(tc, test_cpu_object);
  tcase_add_test(tc, test_cpu_weights_in_key);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(cache_suite());
}
