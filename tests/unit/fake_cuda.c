/* tests/unit/fake_cuda.c - a stand-in for the CUDA driver (libcuda.so.1)
 * that runtime/cuda.c opens through FZ_CUDA_LIBRARY, so that the runtime
 * is tested on machines without a GPU (test_cuda, the lit tests of
 * fuse-run --device cuda): built as build/lib/libfz_fake_cuda.so.
 *
 * No kernel runs (device memory is host memory, outputs stay as copied
 * or zero), but the rules of the real driver that fuse must follow are
 * enforced with the real driver's error code (CUDA_ERROR_INVALID_VALUE):
 *  - a launch or a graph kernel node whose dynamic shared memory and the
 *    function's static shared memory (the `.shared` arrays declared in
 *    its .entry, with sizes: CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) exceed
 *    48 KiB together needs cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
 *    of at least its dynamic size on its function first;
 *  - that attribute plus the static size may not exceed the device's
 *    opt-in limit (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
 *  - blocks of at most 1024 threads, sizes at least 1; a function named
 *    by cuModuleGetFunction must be an .entry of the module's PTX.
 * The device is "sm_90" with 132 SMs. Environment:
 *  FZ_FAKE_CUDA_OPTIN  the opt-in limit in bytes (default 232448, 227 KiB)
 *  FZ_FAKE_CUDA_MS     what cuEventElapsedTime reports (default 1.0)
 * Single-threaded; leaks nothing it is asked to free.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, NOT_FOUND = 500 };
enum { DEFAULT_DYNAMIC_SHARED = 48 * 1024 };

typedef struct Func {
  char name[256];
  int maxDynamic; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  int statics;    /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
  struct Func *next;
} Func;

typedef struct Module {
  char *ptx;
  Func *funcs;
  int64_t status[2]; /* its fz_status global, when the PTX declares one */
} Module;

/* The fz_status handed out last: FZ_FAKE_CUDA_STATUS=SITE,VALUE makes
 * every launch record that failed check there, as a kernel whose check
 * failed would (no kernel runs here). */
static int64_t *g_status;
static void fake_status(void) {
  const char *e = getenv("FZ_FAKE_CUDA_STATUS");
  long long site, value;
  if (g_status && e && sscanf(e, "%lld,%lld", &site, &value) == 2 &&
      g_status[0] == 0) {
    g_status[0] = site;
    g_status[1] = value;
  }
}

typedef struct Node {
  Func *func;
  unsigned shared;
} Node;

typedef struct Graph {
  size_t numNodes;
} Graph;

typedef struct KernelNodeParams { /* CUDA_KERNEL_NODE_PARAMS (v1) */
  Func *func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void **kernelParams;
  void **extra;
} KernelNodeParams;

static int optin(void) {
  const char *e = getenv("FZ_FAKE_CUDA_OPTIN");
  return e && *e ? atoi(e) : 232448;
}

static int g_context; /* the primary context's handle points here */

/* FZ_FAKE_CUDA_FAIL=init: cuInit fails (CUDA_ERROR_NO_DEVICE, what a
 * machine with a driver and no GPU gives); =device: cuDeviceGet fails
 * (CUDA_ERROR_INVALID_DEVICE). */
static int fail(const char *what) {
  const char *e = getenv("FZ_FAKE_CUDA_FAIL");
  return e && !strcmp(e, what);
}

CUresult cuInit(unsigned flags) {
  if (fail("init"))
    return 100;
  return flags == 0 ? OK : INVALID_VALUE;
}
CUresult cuDeviceGetCount(int *n) {
  *n = 1;
  return OK;
}
CUresult cuDeviceGet(int *d, int ordinal) {
  if (fail("device"))
    return 101;
  *d = ordinal;
  return ordinal == 0 ? OK : INVALID_VALUE;
}
CUresult cuDeviceGetName(char *name, int len, int d) {
  (void)d;
  snprintf(name, (size_t)len, "fuse fake CUDA device");
  return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
  (void)d;
  switch (attr) {
  case 16: /* MULTIPROCESSOR_COUNT */
    *v = 132;
    return OK;
  case 75: /* COMPUTE_CAPABILITY_MAJOR */
    *v = 9;
    return OK;
  case 76: /* COMPUTE_CAPABILITY_MINOR */
    *v = 0;
    return OK;
  case 97: /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    *v = optin();
    return OK;
  default:
    return INVALID_VALUE;
  }
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) {
  (void)d;
  *ctx = &g_context;
  return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int d) {
  (void)d;
  return OK;
}
CUresult cuCtxSetCurrent(void *ctx) {
  return ctx == &g_context ? OK : INVALID_VALUE;
}
CUresult cuCtxSynchronize(void) { return OK; }

CUresult cuModuleLoadDataEx(Module **m, const void *image, unsigned n,
                            int *opts, void **vals) {
  (void)n, (void)opts, (void)vals;
  const char *text = image;
  if (!strstr(text, ".version") || !strstr(text, ".target"))
    return 218; /* CUDA_ERROR_INVALID_PTX */
  Module *mod = calloc(1, sizeof *mod);
  if (!mod || !(mod->ptx = strdup(text))) {
    free(mod);
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  }
  *m = mod;
  return OK;
}
/* The link API, for the cubin cache (runtime/cuda.c): the "cubin" is
 * the PTX behind a comment line, which cuModuleLoadDataEx takes as it
 * takes PTX. */
typedef struct Link {
  char *cubin;
  size_t size;
} Link;

CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return OK;
}
CUresult cuLinkCreate_v2(unsigned n, int *opts, void **vals, Link **out) {
  (void)n, (void)opts, (void)vals;
  *out = calloc(1, sizeof **out);
  return *out ? OK : 2;
}
CUresult cuLinkAddData_v2(Link *l, int type, void *data, size_t size,
                          const char *name, unsigned n, int *opts,
                          void **vals) {
  (void)name, (void)n, (void)opts, (void)vals;
  static const char head[] = "// fake cubin\n";
  if (type != 1 || l->cubin || !size)
    return INVALID_VALUE;
  const char *text = data;
  if (!strstr(text, ".version") || !strstr(text, ".target"))
    return 218; /* CUDA_ERROR_INVALID_PTX */
  l->size = sizeof head - 1 + size;
  l->cubin = malloc(l->size);
  if (!l->cubin)
    return 2;
  memcpy(l->cubin, head, sizeof head - 1);
  memcpy(l->cubin + sizeof head - 1, data, size); /* with its NUL */
  return OK;
}
CUresult cuLinkComplete(Link *l, void **cubin, size_t *size) {
  if (!l->cubin)
    return INVALID_VALUE;
  *cubin = l->cubin;
  *size = l->size;
  return OK;
}
CUresult cuLinkDestroy(Link *l) {
  free(l->cubin);
  free(l);
  return OK;
}

CUresult cuModuleUnload(Module *m) {
  for (Func *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f);
  }
  if (g_status == m->status)
    g_status = NULL;
  free(m->ptx);
  free(m);
  return OK;
}
/* The static shared bytes of the .entry whose text starts at `entry`:
 * the sizes of its `.shared ... name[N]` declarations (`.extern` ones,
 * the dynamic memory, excluded), up to the next .entry. */
static int static_shared(const char *entry) {
  if (!entry)
    return 0;
  const char *end = strstr(entry + 1, ".entry ");
  int64_t total = 0;
  for (const char *s = strstr(entry, ".shared "); s && (!end || s < end);
       s = strstr(s + 1, ".shared ")) {
    const char *line = s;
    while (line > entry && line[-1] != '\n')
      --line;
    const char *eol = strchr(s, '\n');
    const char *br = strchr(s, '[');
    const char *ext = strstr(line, ".extern");
    if (!br || (eol && br > eol) || (ext && ext < s))
      continue;
    int64_t n = strtoll(br + 1, NULL, 10);
    if (n > 0 && n < (1 << 24))
      total += n; /* .b8 arrays: the sizes are bytes */
  }
  return (int)total;
}

/* Only fz_status, 16 bytes, when the PTX declares it. */
CUresult cuModuleGetGlobal_v2(uint64_t *p, size_t *bytes, Module *m,
                              const char *name) {
  char pat[300];
  /* As the driver: only a .visible global has a name to look up. */
  snprintf(pat, sizeof pat, ".visible .global .align 8 .b8 %s[16];", name);
  if (strcmp(name, "fz_status") || !strstr(m->ptx, pat))
    return NOT_FOUND;
  *p = (uint64_t)(uintptr_t)m->status;
  *bytes = sizeof m->status;
  g_status = m->status;
  return OK;
}

CUresult cuModuleGetFunction(Func **out, Module *m, const char *name) {
  for (Func *f = m->funcs; f; f = f->next)
    if (!strcmp(f->name, name)) {
      *out = f;
      return OK;
    }
  char pat[300];
  snprintf(pat, sizeof pat, ".entry %s(", name);
  if (strlen(name) >= sizeof((Func *)0)->name || !strstr(m->ptx, pat))
    return NOT_FOUND;
  Func *f = calloc(1, sizeof *f);
  if (!f)
    return 2;
  snprintf(f->name, sizeof f->name, "%s", name);
  f->statics = static_shared(strstr(m->ptx, pat));
  f->maxDynamic = f->statics < DEFAULT_DYNAMIC_SHARED
                      ? DEFAULT_DYNAMIC_SHARED - f->statics
                      : 0;
  f->next = m->funcs;
  m->funcs = f;
  *out = f;
  return OK;
}
CUresult cuFuncGetAttribute(int *v, int attr, Func *f) {
  if (attr == 1) { /* SHARED_SIZE_BYTES */
    *v = f->statics;
    return OK;
  }
  if (attr == 8) {
    *v = f->maxDynamic;
    return OK;
  }
  return INVALID_VALUE;
}
CUresult cuFuncSetAttribute(Func *f, int attr, int v) {
  if (attr != 8 || v < 0 || (int64_t)v + f->statics > optin())
    return INVALID_VALUE;
  f->maxDynamic = v;
  return OK;
}

CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes) {
  void *m = calloc(1, bytes ? bytes : 1);
  if (!m)
    return 2;
  *p = (uint64_t)(uintptr_t)m;
  return OK;
}
CUresult cuMemFree_v2(uint64_t p) {
  free((void *)(uintptr_t)p);
  return OK;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return OK;
}
CUresult cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t n) {
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return OK;
}
CUresult cuMemsetD8_v2(uint64_t dst, unsigned char v, size_t n) {
  memset((void *)(uintptr_t)dst, v, n);
  return OK;
}

/* What the driver checks of a kernel's launch configuration. */
static CUresult check_launch(const Func *f, const unsigned grid[3],
                             const unsigned block[3], unsigned shared) {
  if (!f || !grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] ||
      !block[2] || (uint64_t)block[0] * block[1] * block[2] > 1024)
    return INVALID_VALUE;
  return (int64_t)shared > f->maxDynamic ? INVALID_VALUE : OK;
}

CUresult cuLaunchKernel(Func *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params,
                        void **extra) {
  (void)stream, (void)params, (void)extra;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  fake_status();
  return check_launch(f, grid, block, shared);
}

CUresult cuEventCreate(int **e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e ? OK : 2;
}
CUresult cuEventDestroy_v2(int *e) {
  free(e);
  return OK;
}
CUresult cuEventRecord(int *e, void *stream) {
  (void)stream;
  ++*e;
  return OK;
}
CUresult cuEventSynchronize(int *e) { return *e ? OK : INVALID_VALUE; }
CUresult cuEventElapsedTime(float *ms, int *start, int *end) {
  if (!*start || !*end)
    return INVALID_VALUE;
  const char *e = getenv("FZ_FAKE_CUDA_MS");
  *ms = e && *e ? (float)atof(e) : 1.0f;
  return OK;
}

CUresult cuGraphCreate(Graph **g, unsigned flags) {
  (void)flags;
  *g = calloc(1, sizeof **g);
  return *g ? OK : 2;
}
CUresult cuGraphAddKernelNode(Node **node, Graph *g, const Node *const *deps,
                              size_t numDeps, const KernelNodeParams *p) {
  (void)deps, (void)numDeps;
  unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  CUresult r = check_launch(p->func, grid, block, p->sharedMemBytes);
  if (r != OK)
    return r;
  /* A node handle that is never dereferenced. */
  *node = (Node *)(uintptr_t)(++g->numNodes * 16);
  return OK;
}
CUresult cuGraphInstantiateWithFlags(Graph **exec, Graph *g,
                                     unsigned long long flags) {
  (void)flags;
  *exec = g;
  return OK;
}
CUresult cuGraphLaunch(Graph *exec, void *stream) {
  (void)stream;
  fake_status();
  return exec ? OK : INVALID_VALUE;
}
CUresult cuGraphExecDestroy(Graph *exec) {
  (void)exec;
  return OK;
}
CUresult cuGraphDestroy(Graph *g) {
  free(g);
  return OK;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
  switch (r) {
  case OK:
    *s = "no error";
    return OK;
  case INVALID_VALUE:
    *s = "invalid argument";
    return OK;
  case 2:
    *s = "out of memory";
    return OK;
  case 100:
    *s = "no CUDA-capable device is detected";
    return OK;
  case 101:
    *s = "invalid device ordinal";
    return OK;
  case 218:
    *s = "a PTX JIT compilation failed";
    return OK;
  case NOT_FOUND:
    *s = "named symbol not found";
    return OK;
  default:
    *s = NULL;
    return INVALID_VALUE;
  }
}
