/* fz/cuda.h - running PTX on an NVIDIA GPU through the CUDA Driver API.
 *
 * The driver (libcuda.so.1) is opened with dlopen at run time: fuse has
 * no link-time dependency on CUDA, so every binary builds and runs on a
 * machine without a GPU; there, fzCudaCreate reports "no CUDA driver
 * found (libcuda.so.1): <why>" and returns NULL. The environment
 * variable FZ_CUDA_LIBRARY names another library to open instead (for
 * tests and unusual installs).
 *
 * An FzCuda is one device's primary context made current on the calling
 * thread, with a cache of loaded modules keyed by their PTX text (the
 * same text is JIT-compiled once). Everything runs on the legacy default
 * stream, in order: copies are synchronous, launches are asynchronous
 * and ordered before the next copy. Errors are diagnostics of the
 * context given at creation ("cuda: <call> failed: <driver message>").
 *
 * Ownership: the caller owns the FzCuda and destroys it before the
 * context; device memory from fzCudaAlloc is freed with fzCudaFree (or
 * left to the driver at process exit). Kernels belong to the FzCuda's
 * module cache. One FzCuda per thread at a time (fzCudaMakeCurrent moves
 * it to another).
 */
#ifndef FZ_CUDA_H
#define FZ_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fz/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzCuda FzCuda;
typedef struct FzCudaKernel FzCudaKernel; /* a loaded kernel (driver handle) */
typedef struct FzCudaEvent FzCudaEvent;   /* a driver event */
typedef uint64_t FzCudaPtr; /* a device address; 0 is null */

/* What fzCudaProbeDevice found. */
typedef enum FzCudaProbeResult {
  FZ_CUDA_PROBE_NO_DRIVER, /* no library, or not a CUDA driver */
  FZ_CUDA_PROBE_NO_DEVICE, /* the driver loads, but cuInit fails, it
                              counts no device, or device 0 does not
                              open (cuDeviceGet, its attributes) */
  FZ_CUDA_PROBE_READY,     /* device 0 is there */
} FzCudaProbeResult;

/* Opens the driver, initializes it and queries device 0 (cuDeviceGet,
 * its compute capability). Reports nothing: unless READY, why (whySize
 * bytes, may be NULL) receives the reason. For `--device auto`, which
 * falls back to the CPU on anything but READY, with a note when the
 * driver loaded (NO_DEVICE). */
FZ_API FzCudaProbeResult fzCudaProbeDevice(char *why, size_t whySize);
/* fzCudaProbeDevice(why, whySize) == FZ_CUDA_PROBE_READY. */
FZ_API bool fzCudaProbe(char *why, size_t whySize);

/* Opens the driver, initializes it and makes device `ordinal`'s primary
 * context current. NULL after reporting an error to ctx (no driver, no
 * device, a failing call). */
FZ_API FzCuda *fzCudaCreate(FzContext *ctx, int ordinal);
/* Unloads the cached modules and releases the primary context. NULL is
 * ignored. The library stays open (drivers do not like dlclose). */
FZ_API void fzCudaDestroy(FzCuda *cu);

/* Makes cu's device context (the primary context fzCudaCreate made
 * current) current on the calling thread, for a caller that hands an
 * FzCuda from one thread to another (one thread at a time; the Python
 * package, whose calls come from whichever thread calls the model).
 * Cheap; false after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzCudaMakeCurrent(FzCuda *cu);

/* The context errors are reported to (the one given at creation). */
FZ_API FzContext *fzCudaGetContext(const FzCuda *cu);
/* "NVIDIA H100 80GB HBM3" etc. */
FZ_API const char *fzCudaGetDeviceName(const FzCuda *cu);
/* Compute capability as 10 * major + minor (90 for sm_90). */
FZ_API int fzCudaGetComputeCapability(const FzCuda *cu);
FZ_API int fzCudaGetNumSMs(const FzCuda *cu);
/* Shared memory (static + dynamic, bytes) a block may use after opting
 * in: CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (227 KiB on
 * sm_80/sm_90). */
FZ_API int fzCudaGetSharedMemoryOptin(const FzCuda *cu);

/* Device memory. Alloc of 0 bytes allocates 1. False after an error. */
FZ_API FZ_MUST_CHECK bool fzCudaAlloc(FzCuda *cu, size_t bytes, FzCudaPtr *out);
FZ_API void fzCudaFree(FzCuda *cu, FzCudaPtr p);
FZ_API FZ_MUST_CHECK bool fzCudaCopyToDevice(FzCuda *cu, FzCudaPtr dst,
                                             const void *src, size_t bytes);
FZ_API FZ_MUST_CHECK bool fzCudaCopyToHost(FzCuda *cu, void *dst, FzCudaPtr src,
                                           size_t bytes);
FZ_API FZ_MUST_CHECK bool fzCudaCopyOnDevice(FzCuda *cu, FzCudaPtr dst,
                                             FzCudaPtr src, size_t bytes);
FZ_API FZ_MUST_CHECK bool fzCudaMemset(FzCuda *cu, FzCudaPtr dst,
                                       unsigned char v, size_t bytes);

/* The kernel `name` of the module whose PTX is ptx[0..len) (text; a NUL
 * is appended internally). The module is JIT-compiled and loaded on
 * first use and cached by the text; a failure reports the JIT's error
 * log. NULL after an error. */
FZ_API FzCudaKernel *fzCudaGetKernel(FzCuda *cu, const char *ptx, size_t len,
                                     const char *name);
/* The device address and size of global `name` of the module of ptx
 * (loaded and cached as fzCudaGetKernel does). False after reporting an
 * error. */
FZ_API bool fzCudaGetGlobal(FzCuda *cu, const char *ptx, size_t len,
                            const char *name, FzCudaPtr *addr, size_t *bytes);
/* Number of modules in the cache (for tests). */
FZ_API size_t fzCudaGetNumCachedModules(const FzCuda *cu);

/* The persistent cubin cache (docs/codegen.md "Kernel cache"): a PTX
 * module is compiled by the driver's linker (cuLinkComplete) and its
 * cubin stored in the kernel cache's folder, keyed by the text, the
 * device and the driver's version; the next process loads the cubin
 * and skips the JIT. On by default in the default folder
 * ($FZ_CACHE_DIR, else $XDG_CACHE_HOME/fuse, else ~/.cache/fuse);
 * enabled false turns it off, dir (copied; NULL: the default) moves
 * it. Drivers without the link API load the PTX as before. False when
 * out of memory (reported; nothing changed). */
FZ_API FZ_MUST_CHECK bool fzCudaSetKernelCache(FzCuda *cu, bool enabled,
                                               const char *dir);
/* PTX modules whose cubin came from the cache, and those linked and
 * stored, since cu was created. */
FZ_API void fzCudaGetKernelCacheStats(const FzCuda *cu, size_t *hits,
                                      size_t *misses);

/* Lets kernel (from fzCudaGetKernel) be launched with `bytes` of dynamic
 * shared memory. Up to 48 KiB every kernel may; above, CUDA needs the
 * function's opt-in, cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_
 * SHARED_SIZE_BYTES, bytes), before a launch and before a CUDA graph
 * holding it is instantiated. Done once per kernel and size (the tensor-
 * core matmul kernels take 64-144 KiB); fzCudaLaunch and
 * fzCudaGraphCreate call it. False after reporting an error: the
 * device's opt-in limit (fzCudaGetSharedMemoryOptin) is smaller than
 * the kernel's static plus dynamic shared memory, named with the
 * kernel. */
FZ_API FZ_MUST_CHECK bool
fzCudaKernelAllowSharedMemory(FzCuda *cu, FzCudaKernel *kernel, unsigned bytes);

/* Launches kernel on a grid of grid[0..3) blocks of block[0..3) threads
 * with sharedBytes of dynamic shared memory (allowed first:
 * fzCudaKernelAllowSharedMemory); args[i] points at the value of
 * parameter i (the driver's convention). Asynchronous: errors of the
 * kernel itself show up at the next synchronizing call. */
FZ_API FZ_MUST_CHECK bool fzCudaLaunch(FzCuda *cu, FzCudaKernel *kernel,
                                       const unsigned grid[3],
                                       const unsigned block[3],
                                       unsigned sharedBytes, void **args);
/* Waits for all work; reports kernel failures. */
FZ_API FZ_MUST_CHECK bool fzCudaSynchronize(FzCuda *cu);

/* A CUDA graph of n kernel launches, each after the previous one
 * (kernels[i] on grid[i] blocks of block[i] threads with sharedBytes[i]
 * bytes of dynamic shared memory, or none when sharedBytes is NULL;
 * kernel i takes the parameters args[i] points at, copied when the graph
 * is built). A function's kernels replay as one graph: one launch call
 * instead of n, about 0.8 us per node instead of ~4 us per
 * cuLaunchKernel. Kernels with more than 48 KiB of dynamic shared memory
 * are allowed it first (fzCudaKernelAllowSharedMemory). NULL after an
 * error. */
typedef struct FzCudaGraph FzCudaGraph;
FZ_API FzCudaGraph *
fzCudaGraphCreate(FzCuda *cu, size_t n, FzCudaKernel *const *kernels,
                  const unsigned (*grid)[3], const unsigned (*block)[3],
                  const unsigned *sharedBytes, void **const *args);
/* Launches the whole graph (asynchronous, on the default stream). */
FZ_API FZ_MUST_CHECK bool fzCudaGraphLaunch(FzCuda *cu, FzCudaGraph *g);
FZ_API void fzCudaGraphDestroy(FzCuda *cu, FzCudaGraph *g);

/* Events for timing. */
FZ_API FzCudaEvent *fzCudaEventCreate(FzCuda *cu);
FZ_API void fzCudaEventDestroy(FzCuda *cu, FzCudaEvent *e);
FZ_API FZ_MUST_CHECK bool fzCudaEventRecord(FzCuda *cu, FzCudaEvent *e);
/* Milliseconds between two recorded events (waits for `end`); a
 * negative value after an error. */
FZ_API float fzCudaEventElapsedMs(FzCuda *cu, FzCudaEvent *start,
                                  FzCudaEvent *end);

#ifdef __cplusplus
}
#endif

#endif /* FZ_CUDA_H */
