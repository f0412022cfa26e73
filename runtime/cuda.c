/* runtime/cuda.c - the CUDA Driver API, opened with dlopen (fz/cuda.h).
 *
 * No CUDA header is needed: the few types, enum values and function
 * signatures used are declared here, as the driver's ABI fixes them
 * (CUresult is an int, handles are pointers, CUdeviceptr is 64 bits; the
 * `_v2` entry points are the ones current drivers export for memory).
 * The table of entry points is resolved once per FzCuda; a missing
 * symbol is reported like a missing driver.
 *
 * The module cache is a list of (hash, PTX copy, CUmodule); a lookup
 * compares the 64-bit FNV-1a hash and then the text, so two modules are
 * never confused. Modules live until fzCudaDestroy. The kernels handed
 * out are remembered with their names and the dynamic shared memory
 * they were allowed (cuFuncSetAttribute, once per kernel and size).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/cuda.h"
#include "ir/cache.h"
#include "ir/util.h"

/*===--- The driver's ABI (the subset fuse uses) --------------------------===*/

typedef int CUresult; /* CUDA_SUCCESS is 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
/* CUDA_KERNEL_NODE_PARAMS (v1: what the unversioned
 * cuGraphAddKernelNode takes). */
typedef struct CudaKernelNodeParams {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void **kernelParams;
  void **extra;
} CudaKernelNodeParams;

enum {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};
enum { /* CUfunction_attribute */
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};
/* Dynamic shared memory every kernel may use without opting in. */
enum { DEFAULT_DYNAMIC_SHARED = 48 * 1024 };
enum { /* CUjit_option */
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/* X(return-less name, symbol, parameter list) */
#define FZ_CUDA_FUNCS(X)                                                      \
  X(cuInit, "cuInit", (unsigned))                                             \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                            \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                            \
  X(cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))              \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, CUdevice))     \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                     \
    (CUcontext *, CUdevice))                                                  \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))    \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                          \
  X(cuCtxSynchronize, "cuCtxSynchronize", (void))                             \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                 \
    (CUmodule *, const void *, unsigned, int *, void **))                     \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule))                             \
  X(cuModuleGetFunction, "cuModuleGetFunction",                               \
    (CUfunction *, CUmodule, const char *))                                   \
  X(cuModuleGetGlobal, "cuModuleGetGlobal_v2",                                \
    (CUdeviceptr *, size_t *, CUmodule, const char *))                        \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", (int *, int, CUfunction))      \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))        \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                     \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                 \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))     \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t))           \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", (CUdeviceptr, CUdeviceptr, size_t))      \
  X(cuMemsetD8, "cuMemsetD8_v2", (CUdeviceptr, unsigned char, size_t))        \
  X(cuLaunchKernel, "cuLaunchKernel",                                         \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,  \
     unsigned, CUstream, void **, void **))                                   \
  X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                    \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                           \
  X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                      \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                      \
  X(cuEventElapsedTime, "cuEventElapsedTime", (float *, CUevent, CUevent))    \
  X(cuGraphCreate, "cuGraphCreate", (CUgraph *, unsigned))                   \
  X(cuGraphAddKernelNode, "cuGraphAddKernelNode",                             \
    (CUgraphNode *, CUgraph, const CUgraphNode *, size_t,                     \
     const CudaKernelNodeParams *))                                           \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",               \
    (CUgraphExec *, CUgraph, unsigned long long))                             \
  X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                  \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                  \
  X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))                              \
  X(cuGetErrorString, "cuGetErrorString", (CUresult, const char **))

/* Entry points the cubin cache uses when the driver has them (the fake
 * driver of the tests has them too); without them PTX is loaded as is. */
typedef struct CUlinkState_st *CUlinkState;
enum { CU_JIT_INPUT_PTX = 1 };
#define FZ_CUDA_OPTIONAL_FUNCS(X)                                             \
  X(cuDriverGetVersion, "cuDriverGetVersion", (int *))                        \
  X(cuLinkCreate, "cuLinkCreate_v2",                                          \
    (unsigned, int *, void **, CUlinkState *))                                \
  X(cuLinkAddData, "cuLinkAddData_v2",                                        \
    (CUlinkState, int, void *, size_t, const char *, unsigned, int *,         \
     void **))                                                                \
  X(cuLinkComplete, "cuLinkComplete", (CUlinkState, void **, size_t *))       \
  X(cuLinkDestroy, "cuLinkDestroy", (CUlinkState))

typedef struct CudaApi {
#define FZ_CUDA_FIELD(name, sym, params) CUresult(*name) params;
  FZ_CUDA_FUNCS(FZ_CUDA_FIELD)
  FZ_CUDA_OPTIONAL_FUNCS(FZ_CUDA_FIELD)
#undef FZ_CUDA_FIELD
} CudaApi;

typedef struct CachedModule {
  uint64_t hash;
  char *ptx; /* NUL-terminated copy */
  size_t len;
  CUmodule module;
} CachedModule;

/* A kernel handed out by fzCudaGetKernel: its name (for messages) and
 * the dynamic shared memory it was allowed so far (the driver's
 * per-function attribute; 48 KiB without one). */
typedef struct KnownKernel {
  CUfunction func;
  char *name;
  /* Dynamic shared bytes a launch may use now: without an opt-in, 48 KiB
   * less the kernel's static shared memory (the driver's limit is on
   * their sum); -1 until the static size has been asked for. */
  int64_t dynamicAllowed;
} KnownKernel;

struct FzCuda {
  FzContext *ctx;
  void *lib;
  CudaApi api;
  CUdevice device;
  CUcontext context;
  char name[256];
  int cc, numSMs;
  int sharedOptin; /* static + dynamic shared memory a block may opt in
                      to (bytes; 227 KiB on sm_90) */
  CachedModule *modules;
  size_t numModules, capModules;
  KnownKernel *kernels;
  size_t numKernels, capKernels;
  /* The cubin cache (fzCudaSetKernelCache): off when noCache; dir NULL
   * for the default folder (the context's). */
  bool noCache;
  char *cacheDir;
  size_t cacheHits, cacheMisses;
};

/*===--- Opening the driver -----------------------------------------------===*/

static const char *library_name(void) {
  const char *env = getenv("FZ_CUDA_LIBRARY");
  return env && *env ? env : "libcuda.so.1";
}

/* Opens the library and resolves every entry point; on failure writes
 * the reason to why and returns NULL. */
static void *open_driver(CudaApi *api, char *why, size_t whySize) {
  const char *lib = library_name();
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, whySize, "no CUDA driver found (%s): %s", lib,
             e ? e : "dlopen failed");
    return NULL;
  }
  const char *missing = NULL;
  void *sym;
#define FZ_CUDA_RESOLVE(name, symbol, params)                                 \
  sym = dlsym(h, symbol);                                                     \
  if (!sym && !missing)                                                       \
    missing = symbol;                                                         \
  memcpy(&api->name, &sym, sizeof sym);
  FZ_CUDA_FUNCS(FZ_CUDA_RESOLVE)
#undef FZ_CUDA_RESOLVE
#define FZ_CUDA_RESOLVE_OPTIONAL(name, symbol, params)                        \
  sym = dlsym(h, symbol);                                                     \
  memcpy(&api->name, &sym, sizeof sym);
  FZ_CUDA_OPTIONAL_FUNCS(FZ_CUDA_RESOLVE_OPTIONAL)
#undef FZ_CUDA_RESOLVE_OPTIONAL
  if (missing) {
    snprintf(why, whySize,
             "no CUDA driver found (%s): the library has no '%s' (not a "
             "CUDA driver, or too old)",
             lib, missing);
    dlclose(h);
    return NULL;
  }
  return h;
}

static const char *err_text(const CudaApi *api, CUresult r) {
  const char *s = NULL;
  if (api->cuGetErrorString && api->cuGetErrorString(r, &s) == 0 && s)
    return s;
  return "unknown CUDA error";
}

/* Initializes the driver and counts devices; the reason in why when
 * none can be used. */
static bool init_driver(const CudaApi *api, int *count, char *why,
                        size_t whySize) {
  CUresult r = api->cuInit(0);
  if (r != 0) {
    snprintf(why, whySize, "the CUDA driver failed to initialize (%s): %s",
             library_name(), err_text(api, r));
    return false;
  }
  *count = 0;
  r = api->cuDeviceGetCount(count);
  if (r != 0 || *count <= 0) {
    snprintf(why, whySize, "the CUDA driver reports no device%s%s",
             r ? ": " : "", r ? err_text(api, r) : "");
    return false;
  }
  return true;
}

FzCudaProbeResult fzCudaProbeDevice(char *why, size_t whySize) {
  char local[512];
  if (!why || whySize == 0) {
    why = local;
    whySize = sizeof local;
  }
  why[0] = '\0';
  CudaApi api;
  void *h = open_driver(&api, why, whySize);
  if (!h)
    return FZ_CUDA_PROBE_NO_DRIVER;
  /* The library stays loaded: drivers do not support being unloaded
   * and reloaded in one process. */
  int count, dev = 0, major = 0;
  if (!init_driver(&api, &count, why, whySize))
    return FZ_CUDA_PROBE_NO_DEVICE;
  CUresult r = api.cuDeviceGet(&dev, 0);
  const char *what = "cuDeviceGet";
  if (r == 0) {
    what = "cuDeviceGetAttribute";
    r = api.cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  }
  if (r != 0) {
    snprintf(why, whySize, "CUDA device 0 does not open: %s failed: %s",
             what, err_text(&api, r));
    return FZ_CUDA_PROBE_NO_DEVICE;
  }
  return FZ_CUDA_PROBE_READY;
}

bool fzCudaProbe(char *why, size_t whySize) {
  return fzCudaProbeDevice(why, whySize) == FZ_CUDA_PROBE_READY;
}

static bool cu_check(FzCuda *cu, CUresult r, const char *what) {
  if (r == 0)
    return true;
  return fzEmitError(cu->ctx, NULL, "cuda: %s failed: %s (error %d)", what,
                     err_text(&cu->api, r), r);
}

FzCuda *fzCudaCreate(FzContext *ctx, int ordinal) {
  char why[512];
  FzCuda *cu = fzCalloc(ctx, 1, sizeof *cu);
  if (!cu) {
    fzEmitError(ctx, NULL, "cuda: out of memory");
    return NULL;
  }
  cu->ctx = ctx;
  cu->lib = open_driver(&cu->api, why, sizeof why);
  int count = 0;
  if (!cu->lib || !init_driver(&cu->api, &count, why, sizeof why)) {
    fzEmitError(ctx, NULL, "%s", why);
    fzFree(ctx, cu);
    return NULL;
  }
  if (ordinal < 0 || ordinal >= count) {
    fzEmitError(ctx, NULL, "cuda: device %d does not exist (%d device%s)",
                ordinal, count, count == 1 ? "" : "s");
    fzFree(ctx, cu);
    return NULL;
  }
  const CudaApi *a = &cu->api;
  int major = 0, minor = 0;
  bool ok = cu_check(cu, a->cuDeviceGet(&cu->device, ordinal),
                     "cuDeviceGet") &&
            cu_check(cu,
                     a->cuDeviceGetName(cu->name, (int)sizeof cu->name - 1,
                                        cu->device),
                     "cuDeviceGetName") &&
            cu_check(cu,
                     a->cuDeviceGetAttribute(
                         &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                         cu->device),
                     "cuDeviceGetAttribute") &&
            cu_check(cu,
                     a->cuDeviceGetAttribute(
                         &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                         cu->device),
                     "cuDeviceGetAttribute") &&
            cu_check(cu,
                     a->cuDeviceGetAttribute(
                         &cu->numSMs, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                         cu->device),
                     "cuDeviceGetAttribute") &&
            cu_check(cu,
                     a->cuDeviceGetAttribute(
                         &cu->sharedOptin,
                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                         cu->device),
                     "cuDeviceGetAttribute") &&
            cu_check(cu, a->cuDevicePrimaryCtxRetain(&cu->context, cu->device),
                     "cuDevicePrimaryCtxRetain");
  if (ok && !cu_check(cu, a->cuCtxSetCurrent(cu->context), "cuCtxSetCurrent")) {
    a->cuDevicePrimaryCtxRelease(cu->device);
    ok = false;
  }
  if (!ok) {
    fzFree(ctx, cu);
    return NULL;
  }
  cu->cc = 10 * major + minor;
  return cu;
}

void fzCudaDestroy(FzCuda *cu) {
  if (!cu)
    return;
  for (size_t i = 0; i < cu->numModules; ++i) {
    cu->api.cuModuleUnload(cu->modules[i].module);
    fzFree(cu->ctx, cu->modules[i].ptx);
  }
  fzFree(cu->ctx, cu->modules);
  for (size_t i = 0; i < cu->numKernels; ++i)
    fzFree(cu->ctx, cu->kernels[i].name);
  fzFree(cu->ctx, cu->kernels);
  fzFree(cu->ctx, cu->cacheDir);
  cu->api.cuDevicePrimaryCtxRelease(cu->device);
  fzFree(cu->ctx, cu);
}

bool fzCudaMakeCurrent(FzCuda *cu) {
  return cu_check(cu, cu->api.cuCtxSetCurrent(cu->context), "cuCtxSetCurrent");
}

FzContext *fzCudaGetContext(const FzCuda *cu) { return cu->ctx; }
const char *fzCudaGetDeviceName(const FzCuda *cu) { return cu->name; }
int fzCudaGetComputeCapability(const FzCuda *cu) { return cu->cc; }
int fzCudaGetNumSMs(const FzCuda *cu) { return cu->numSMs; }
int fzCudaGetSharedMemoryOptin(const FzCuda *cu) { return cu->sharedOptin; }

/*===--- Memory -----------------------------------------------------------===*/

bool fzCudaAlloc(FzCuda *cu, size_t bytes, FzCudaPtr *out) {
  CUdeviceptr p = 0;
  if (!cu_check(cu, cu->api.cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc"))
    return false;
  *out = (FzCudaPtr)p;
  return true;
}

void fzCudaFree(FzCuda *cu, FzCudaPtr p) {
  if (p)
    (void)cu_check(cu, cu->api.cuMemFree((CUdeviceptr)p), "cuMemFree");
}

bool fzCudaCopyToDevice(FzCuda *cu, FzCudaPtr dst, const void *src,
                        size_t bytes) {
  return bytes == 0 ||
         cu_check(cu, cu->api.cuMemcpyHtoD((CUdeviceptr)dst, src, bytes),
                  "cuMemcpyHtoD");
}

bool fzCudaCopyToHost(FzCuda *cu, void *dst, FzCudaPtr src, size_t bytes) {
  return bytes == 0 ||
         cu_check(cu, cu->api.cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes),
                  "cuMemcpyDtoH");
}

bool fzCudaCopyOnDevice(FzCuda *cu, FzCudaPtr dst, FzCudaPtr src,
                        size_t bytes) {
  return bytes == 0 ||
         cu_check(cu,
                  cu->api.cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src,
                                       bytes),
                  "cuMemcpyDtoD");
}

bool fzCudaMemset(FzCuda *cu, FzCudaPtr dst, unsigned char v, size_t bytes) {
  return bytes == 0 ||
         cu_check(cu, cu->api.cuMemsetD8((CUdeviceptr)dst, v, bytes),
                  "cuMemsetD8");
}

/*===--- Modules and kernels ----------------------------------------------===*/

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/*===--- The cubin cache -------------------------------------------------===*/

bool fzCudaSetKernelCache(FzCuda *cu, bool enabled, const char *dir) {
  char *copy = dir && *dir ? fzStrDup(cu->ctx, dir) : NULL;
  if (dir && *dir && !copy)
    return false;
  fzFree(cu->ctx, cu->cacheDir);
  cu->cacheDir = copy;
  cu->noCache = !enabled;
  return true;
}

void fzCudaGetKernelCacheStats(const FzCuda *cu, size_t *hits,
                               size_t *misses) {
  *hits = cu->cacheHits;
  *misses = cu->cacheMisses;
}

/* The key of ptx's cubin: the driver's version, the device (name and
 * compute capability) and the text. */
static void cubin_key(const FzCuda *cu, const char *ptx, size_t len,
                      FzCacheKey *key) {
  int version = 0;
  if (cu->api.cuDriverGetVersion)
    (void)cu->api.cuDriverGetVersion(&version);
  FzSha256 h;
  fzCacheKeyBegin(&h, FZ_CACHE_CUBIN);
  fzSha256UpdateU64(&h, (uint64_t)version);
  fzSha256UpdateU64(&h, (uint64_t)cu->cc);
  fzSha256UpdateString(&h, cu->name);
  fzSha256Update(&h, ptx, len);
  fzSha256Final(&h, key->bytes);
}

/* The module of ptx (copy: NUL-terminated) through the cubin cache: the
 * cached cubin when there is a sound one the driver loads, else the
 * driver's link of the PTX (cuLinkCreate, cuLinkAddData,
 * cuLinkComplete), stored. False (nothing reported) when the cache is
 * off, the driver has no link API, or the link failed: the caller then
 * loads the PTX as is, which reports the JIT's log. */
static bool load_through_cache(FzCuda *cu, char *copy, size_t len,
                               CUmodule *out) {
  const CudaApi *a = &cu->api;
  if (cu->noCache || !a->cuLinkCreate || !a->cuLinkAddData ||
      !a->cuLinkComplete || !a->cuLinkDestroy)
    return false;
  FzCache *cache = fzCacheOpen(cu->cacheDir);
  if (!cache)
    return false;
  FzCacheKey key;
  cubin_key(cu, copy, len, &key);
  char *data = NULL;
  size_t n = 0;
  uint32_t flags = 0;
  bool ok = false;
  if (fzCacheLoad(cache, &key, FZ_CACHE_CUBIN, &data, &n, &flags)) {
    ok = a->cuModuleLoadDataEx(out, data, 0, NULL, NULL) == 0;
    fzCacheFree(data);
    cu->cacheHits += ok;
  }
  if (!ok) {
    /* A miss (or a cubin this driver refuses: compiled again). */
    char errorLog[256];
    int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {errorLog, (void *)(uintptr_t)sizeof errorLog};
    CUlinkState link = NULL;
    void *cubin = NULL;
    size_t size = 0;
    ok = a->cuLinkCreate(2, opts, vals, &link) == 0 &&
         a->cuLinkAddData(link, CU_JIT_INPUT_PTX, copy, len + 1, "fuse.ptx", 0,
                          NULL, NULL) == 0 &&
         a->cuLinkComplete(link, &cubin, &size) == 0 && cubin && size &&
         a->cuModuleLoadDataEx(out, cubin, 0, NULL, NULL) == 0;
    if (ok) {
      cu->cacheMisses++;
      (void)fzCacheStore(cache, &key, FZ_CACHE_CUBIN, 0, cubin, size);
    }
    if (link)
      a->cuLinkDestroy(link);
  }
  fzCacheFinish(cache, cu->ctx, NULL);
  fzCacheClose(cache);
  return ok;
}

static CUmodule load_module(FzCuda *cu, const char *ptx, size_t len) {
  uint64_t h = fnv1a(ptx, len);
  for (size_t i = 0; i < cu->numModules; ++i) {
    CachedModule *m = &cu->modules[i];
    if (m->hash == h && m->len == len && memcmp(m->ptx, ptx, len) == 0)
      return m->module;
  }
  char *copy = fzMalloc(cu->ctx, len + 1);
  if (!copy) {
    fzEmitError(cu->ctx, NULL, "cuda: out of memory");
    return NULL;
  }
  memcpy(copy, ptx, len);
  copy[len] = '\0';
  char errorLog[8192], infoLog[4096];
  errorLog[0] = infoLog[0] = '\0';
  int opts[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                 CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *vals[4] = {errorLog, (void *)(uintptr_t)sizeof errorLog, infoLog,
                   (void *)(uintptr_t)sizeof infoLog};
  CUmodule mod = NULL;
  CUresult r = load_through_cache(cu, copy, len, &mod)
                   ? 0
                   : cu->api.cuModuleLoadDataEx(&mod, copy, 4, opts, vals);
  if (r != 0) {
    fzEmitError(cu->ctx, NULL,
                "cuda: loading the PTX module failed: %s (error %d)%s%s",
                err_text(&cu->api, r), r, errorLog[0] ? "\nptxas log:\n" : "",
                errorLog);
    fzFree(cu->ctx, copy);
    return NULL;
  }
  if (cu->numModules == cu->capModules) {
    size_t cap = cu->capModules ? 2 * cu->capModules : 4;
    CachedModule *grown = fzCalloc(cu->ctx, cap, sizeof *grown);
    if (!grown) {
      cu->api.cuModuleUnload(mod);
      fzFree(cu->ctx, copy);
      fzEmitError(cu->ctx, NULL, "cuda: out of memory");
      return NULL;
    }
    if (cu->numModules)
      memcpy(grown, cu->modules, cu->numModules * sizeof *grown);
    fzFree(cu->ctx, cu->modules);
    cu->modules = grown;
    cu->capModules = cap;
  }
  cu->modules[cu->numModules++] = (CachedModule){h, copy, len, mod};
  return mod;
}

static KnownKernel *known_kernel(FzCuda *cu, CUfunction f) {
  for (size_t i = 0; i < cu->numKernels; ++i)
    if (cu->kernels[i].func == f)
      return &cu->kernels[i];
  return NULL;
}

/* Records f (named name) among the kernels handed out; false when out of
 * memory (reported). */
static bool remember_kernel(FzCuda *cu, CUfunction f, const char *name) {
  if (known_kernel(cu, f))
    return true;
  if (cu->numKernels == cu->capKernels) {
    size_t cap = cu->capKernels ? 2 * cu->capKernels : 8;
    KnownKernel *grown = fzCalloc(cu->ctx, cap, sizeof *grown);
    if (!grown)
      return fzEmitError(cu->ctx, NULL, "cuda: out of memory");
    if (cu->numKernels)
      memcpy(grown, cu->kernels, cu->numKernels * sizeof *grown);
    fzFree(cu->ctx, cu->kernels);
    cu->kernels = grown;
    cu->capKernels = cap;
  }
  size_t n = strlen(name);
  char *copy = fzMalloc(cu->ctx, n + 1);
  if (!copy)
    return fzEmitError(cu->ctx, NULL, "cuda: out of memory");
  memcpy(copy, name, n + 1);
  cu->kernels[cu->numKernels++] =
      (KnownKernel){f, copy, -1};
  return true;
}

FzCudaKernel *fzCudaGetKernel(FzCuda *cu, const char *ptx, size_t len,
                              const char *name) {
  CUmodule mod = load_module(cu, ptx, len);
  if (!mod)
    return NULL;
  CUfunction f = NULL;
  CUresult r = cu->api.cuModuleGetFunction(&f, mod, name);
  if (r != 0) {
    fzEmitError(cu->ctx, NULL, "cuda: the PTX module has no kernel '%s': %s",
                name, err_text(&cu->api, r));
    return NULL;
  }
  return remember_kernel(cu, f, name) ? (FzCudaKernel *)f : NULL;
}

bool fzCudaGetGlobal(FzCuda *cu, const char *ptx, size_t len,
                     const char *name, FzCudaPtr *addr, size_t *bytes) {
  CUmodule mod = load_module(cu, ptx, len);
  if (!mod)
    return false;
  CUdeviceptr p = 0;
  size_t n = 0;
  CUresult r = cu->api.cuModuleGetGlobal(&p, &n, mod, name);
  if (r != 0)
    return fzEmitError(cu->ctx, NULL,
                       "cuda: the PTX module has no global '%s': %s", name,
                       err_text(&cu->api, r));
  *addr = (FzCudaPtr)p;
  *bytes = n;
  return true;
}

bool fzCudaKernelAllowSharedMemory(FzCuda *cu, FzCudaKernel *kernel,
                                   unsigned bytes) {
  CUfunction f = (CUfunction)kernel;
  KnownKernel *k = known_kernel(cu, f);
  if (bytes == 0 || (k && k->dynamicAllowed >= (int64_t)bytes))
    return true;
  const char *name = k ? k->name : "?";
  int statics = 0;
  if (!cu_check(cu,
                cu->api.cuFuncGetAttribute(
                    &statics, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
                "cuFuncGetAttribute"))
    return false;
  /* Without an opt-in the driver allows 48 KiB of static and dynamic
   * shared memory together (a kernel with static arrays and 48 KiB of
   * dynamic memory fails to launch with "invalid argument"). */
  int64_t plain = (int64_t)DEFAULT_DYNAMIC_SHARED - statics;
  if (k && k->dynamicAllowed < plain)
    k->dynamicAllowed = plain;
  if ((int64_t)bytes <= plain)
    return true;
  if ((int64_t)bytes + statics > cu->sharedOptin)
    return fzEmitError(cu->ctx, NULL,
                       "cuda: kernel '%s' needs %u bytes of dynamic shared "
                       "memory (and %d static); %s allows at most %d per "
                       "block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_"
                       "BLOCK_OPTIN): choose a smaller tile "
                       "(FZ_GPU_MMA_TILE)",
                       name, bytes, statics, cu->name, cu->sharedOptin);
  CUresult r = cu->api.cuFuncSetAttribute(
      f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
  if (r != 0)
    return fzEmitError(cu->ctx, NULL,
                       "cuda: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_"
                       "BYTES, %u) failed for kernel '%s': %s (error %d)",
                       bytes, name, err_text(&cu->api, r), r);
  if (k)
    k->dynamicAllowed = bytes;
  return true;
}

size_t fzCudaGetNumCachedModules(const FzCuda *cu) { return cu->numModules; }

bool fzCudaLaunch(FzCuda *cu, FzCudaKernel *kernel, const unsigned grid[3],
                  const unsigned block[3], unsigned sharedBytes,
                  void **args) {
  if (!fzCudaKernelAllowSharedMemory(cu, kernel, sharedBytes))
    return false;
  return cu_check(cu,
                  cu->api.cuLaunchKernel((CUfunction)kernel, grid[0], grid[1],
                                         grid[2], block[0], block[1],
                                         block[2], sharedBytes, NULL, args,
                                         NULL),
                  "cuLaunchKernel");
}

bool fzCudaSynchronize(FzCuda *cu) {
  return cu_check(cu, cu->api.cuCtxSynchronize(), "cuCtxSynchronize");
}

/*===--- Graphs -----------------------------------------------------------===*/

struct FzCudaGraph {
  CUgraph graph;
  CUgraphExec exec;
};

FzCudaGraph *fzCudaGraphCreate(FzCuda *cu, size_t n,
                               FzCudaKernel *const *kernels,
                               const unsigned (*grid)[3],
                               const unsigned (*block)[3],
                               const unsigned *sharedBytes,
                               void **const *args) {
  FzCudaGraph *g = fzCalloc(cu->ctx, 1, sizeof *g);
  if (!g) /* recorded */
    return NULL;
  bool ok = true;
  /* Kernels above 48 KiB of dynamic shared memory opt in before their
   * nodes are added and the graph is instantiated. */
  for (size_t i = 0; i < n && ok && sharedBytes; ++i)
    ok = fzCudaKernelAllowSharedMemory(cu, kernels[i], sharedBytes[i]);
  ok = ok &&
       cu_check(cu, cu->api.cuGraphCreate(&g->graph, 0), "cuGraphCreate");
  CUgraphNode prev = NULL;
  for (size_t i = 0; i < n && ok; ++i) {
    CudaKernelNodeParams p = {(CUfunction)kernels[i],
                              grid[i][0],
                              grid[i][1],
                              grid[i][2],
                              block[i][0],
                              block[i][1],
                              block[i][2],
                              sharedBytes ? sharedBytes[i] : 0,
                              args[i],
                              NULL};
    CUgraphNode node = NULL;
    ok = cu_check(cu,
                  cu->api.cuGraphAddKernelNode(&node, g->graph,
                                               prev ? &prev : NULL,
                                               prev ? 1 : 0, &p),
                  "cuGraphAddKernelNode");
    prev = node;
  }
  ok = ok && cu_check(cu,
                      cu->api.cuGraphInstantiateWithFlags(&g->exec, g->graph,
                                                          0),
                      "cuGraphInstantiateWithFlags");
  if (!ok) {
    fzCudaGraphDestroy(cu, g);
    return NULL;
  }
  return g;
}

bool fzCudaGraphLaunch(FzCuda *cu, FzCudaGraph *g) {
  return cu_check(cu, cu->api.cuGraphLaunch(g->exec, NULL), "cuGraphLaunch");
}

void fzCudaGraphDestroy(FzCuda *cu, FzCudaGraph *g) {
  if (!g)
    return;
  if (g->exec)
    cu->api.cuGraphExecDestroy(g->exec);
  if (g->graph)
    cu->api.cuGraphDestroy(g->graph);
  fzFree(cu->ctx, g);
}

/*===--- Events -----------------------------------------------------------===*/

FzCudaEvent *fzCudaEventCreate(FzCuda *cu) {
  CUevent e = NULL;
  if (!cu_check(cu, cu->api.cuEventCreate(&e, 0), "cuEventCreate"))
    return NULL;
  return (FzCudaEvent *)e;
}

void fzCudaEventDestroy(FzCuda *cu, FzCudaEvent *e) {
  if (e)
    cu->api.cuEventDestroy((CUevent)e);
}

bool fzCudaEventRecord(FzCuda *cu, FzCudaEvent *e) {
  return cu_check(cu, cu->api.cuEventRecord((CUevent)e, NULL),
                  "cuEventRecord");
}

float fzCudaEventElapsedMs(FzCuda *cu, FzCudaEvent *start, FzCudaEvent *end) {
  float ms = -1.0f;
  if (!cu_check(cu, cu->api.cuEventSynchronize((CUevent)end),
                "cuEventSynchronize") ||
      !cu_check(cu, cu->api.cuEventElapsedTime(&ms, (CUevent)start,
                                               (CUevent)end),
                "cuEventElapsedTime"))
    return -1.0f;
  return ms;
}
