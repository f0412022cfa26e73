/* ir/cache.h - the persistent cache of compiled code
 * (docs/codegen.md "Kernel cache"): a folder of files, one per compiled
 * LLVM module, named by a SHA-256 key of everything the code depends on.
 *
 *   sha256.c   the hash of keys
 *   hash128.c  a fast hash of bulk data (weights, payloads)
 *   cache.c    the folder: where it is, entries (load, store), eviction
 *
 * It sits in ir/, below every layer that uses it: the GPU back end
 * stores every kernel's PTX (lowering/nvptx/codegen.c), the CPU back end
 * the object file of the module (lowering/llvm/objcache.c), the CUDA
 * runtime the driver's cubin of a PTX module (runtime/cuda.c). A key
 * starts with fzCacheKeyBegin (the cache format, the kind of entry,
 * fuse's version and the build id of the binary that holds this code),
 * then the caller hashes what else the code depends on (LLVM's version,
 * the target, the options, the module's bitcode; the driver's version
 * and the device).
 *
 * An entry is a 96-byte header (magic "FZKCACHE", format, kind, flags,
 * payload length, key, fzHash128 of the payload), then the payload. A load
 * checks all of it; an entry that fails a check is corrupt: a miss,
 * counted, and rewritten by the store that follows. Stores write a
 * unique temporary file in the folder and rename it over the entry, so
 * a reader in another process sees the old entry, the new one or none,
 * never half of one. The folder is kept under a size (FZ_CACHE_MAX_MB,
 * default 1024) by fzCacheEvict, which removes the entries used longest
 * ago (a hit refreshes its entry's modification time).
 *
 * Threads: fzCacheLoad and fzCacheStore may run on any thread at once
 * (the code-generation threads); nothing here touches a FzContext, and
 * payloads are the C library's memory (fzCacheFree). Failures are never
 * errors: a cache that cannot be written only stores nothing, and the
 * caller warns once with fzCacheGetError.
 */
#ifndef FZ_LOWERING_CACHE_CACHE_H
#define FZ_LOWERING_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FZ_SHA256_BYTES 32

typedef struct FzSha256 {
  uint32_t h[8];
  uint64_t bytes; /* hashed so far */
  uint8_t buf[64];
  size_t fill; /* bytes in buf */
} FzSha256;

void fzSha256Init(FzSha256 *s);
void fzSha256Update(FzSha256 *s, const void *data, size_t len);
/* str's length (8 bytes, little endian; NULL hashes as a length no
 * string has) then its bytes. */
void fzSha256UpdateString(FzSha256 *s, const char *str);
/* v as 8 bytes, little endian. */
void fzSha256UpdateU64(FzSha256 *s, uint64_t v);
/* The digest; s must be initialized again before further use. */
void fzSha256Final(FzSha256 *s, uint8_t out[FZ_SHA256_BYTES]);

/* A fast 128-bit hash of bulk data (hash128.c: the MurmurHash3_x64_128
 * algorithm; not cryptographic), the two 64-bit halves little endian. */
#define FZ_HASH128_BYTES 16
void fzHash128(const void *data, size_t len, uint32_t seed,
               uint8_t out[FZ_HASH128_BYTES]);

typedef struct FzCacheKey {
  uint8_t bytes[FZ_SHA256_BYTES];
} FzCacheKey;

typedef enum FzCacheKind {
  FZ_CACHE_PTX = 1,     /* a kernel's PTX (flag 1: it uses fz_status) */
  FZ_CACHE_LLVM_IR = 2, /* a kernel's LLVM IR after O3 (the same flag) */
  FZ_CACHE_OBJECT = 3,  /* a CPU module's object file */
  FZ_CACHE_CUBIN = 4,   /* the driver's cubin of a PTX module */
  FZ_CACHE_NATIVE = 5,  /* a CPU module by its loop IR: run-time check
                           sites and object files (native_cache.c) */
} FzCacheKind;

/* The format of the entries; a new one makes every old entry a miss. */
#define FZ_CACHE_FORMAT       1
#define FZ_CACHE_HEADER_BYTES 96
/* FZ_CACHE_MAX_MB's default. */
#define FZ_CACHE_DEFAULT_MAX_MB 1024

typedef struct FzCache FzCache;

/* The folder of entries: dir when not NULL or "", else $FZ_CACHE_DIR,
 * else $XDG_CACHE_HOME/fuse, else $HOME/.cache/fuse (entries go in its
 * `kernels` subfolder, made on the first store). NULL when there is no
 * HOME or no memory. The size limit is $FZ_CACHE_MAX_MB (a positive
 * number of MiB) or the default. */
FzCache *fzCacheOpen(const char *dir);
void fzCacheClose(FzCache *c);
/* The root folder (as given or found). */
const char *fzCacheGetDir(const FzCache *c);
void fzCacheSetMaxBytes(FzCache *c, uint64_t maxBytes);

/* Starts the hash of a key of this kind (see above). */
void fzCacheKeyBegin(FzSha256 *h, FzCacheKind kind);
/* The build id of the binary that holds fuse's code (its ELF
 * NT_GNU_BUILD_ID note, else the file's identity: device, inode, size,
 * modification time), hashed; computed once. */
const uint8_t *fzCacheBuildId(void);

/* The entry for key, when there is a sound one of kind: *payload (with a
 * NUL after its len bytes; fzCacheFree) and its flags. False on a miss;
 * a corrupt entry is counted and reads as a miss. */
bool fzCacheLoad(FzCache *c, const FzCacheKey *key, FzCacheKind kind,
                 char **payload, size_t *len, uint32_t *flags);
/* Writes the entry (temporary file, then rename). False when it could
 * not be written (the first reason is kept: fzCacheGetError; after a
 * failure to create the folder or a file in it no further store is
 * tried). */
bool fzCacheStore(FzCache *c, const FzCacheKey *key, FzCacheKind kind,
                  uint32_t flags, const void *payload, size_t len);
void fzCacheFree(void *payload);

/* Removes the least recently used entries until the folder holds at
 * most the size limit, and temporary files over an hour old (left by a
 * process that died while writing). Call it on one thread, after a
 * compile that stored entries. */
void fzCacheEvict(FzCache *c);

typedef struct FzCacheStats {
  size_t hits;    /* sound entries loaded */
  size_t misses;  /* lookups without one (corrupt ones included) */
  size_t corrupt; /* entries that failed a check */
  size_t stored;  /* entries written */
  size_t evicted; /* entries removed by fzCacheEvict */
} FzCacheStats;

void fzCacheGetStats(FzCache *c, FzCacheStats *stats);
/* "cannot write 'PATH': REASON" for the first store that failed, or NULL
 * (the cache's; valid until it is closed). */
const char *fzCacheGetError(FzCache *c);

/* What a compile does last with its cache (c may be NULL: nothing):
 * evicts when it stored entries, hands the counters to sink as the
 * "kernel cache" record (fz/lowering.h; sink may be NULL), and warns on
 * ctx once about a store that failed and once about corrupt entries. */
struct FzContext;
struct FzTimingSink;
void fzCacheFinish(FzCache *c, struct FzContext *ctx,
                   const struct FzTimingSink *sink);

#endif /* FZ_LOWERING_CACHE_CACHE_H */
