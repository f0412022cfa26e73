/* runtime/cpu_pool.c - the CPU runtime's thread pool: the
 * FzParallelRuntime that generated code calls for its outer parallel
 * loops (fz/lowering.h).
 *
 * numThreads - 1 workers wait for work, spinning briefly and then
 * sleeping on a condition variable; parallelFor publishes one job (body,
 * env, n, parts) under a new generation number, runs part 0 on the
 * calling thread, and waits (spinning, then sleeping) until every worker
 * has finished the generation. Parts are contiguous and static ([n*i/parts,
 * n*(i+1)/parts)): for memory-bound loops each thread streams its own
 * slice. A loop whose estimated work is small runs on the caller alone,
 * so tiny kernels pay no wake-up. One job at a time: a caller that finds
 * the pool busy (another thread's loop) runs its loop alone.
 *
 * Ownership: the runtime owns its threads; fzCpuRuntimeDestroy joins
 * them. No global state.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz/runtime.h"
#include "ir/util.h"

/* Scalar operations below which a loop is not worth waking threads for,
 * the least work one part should get, and how long a thread spins
 * (pause instructions) before it sleeps. */
enum {
  kMinParallelWork = 1 << 16,
  kMinPartWork = 1 << 14,
  kSpins = 4000,
};

/* A worker thread and what it is told at its start (it outlives the
 * start: no allocation on the worker's side, which never touches the
 * context). */
typedef struct Worker {
  pthread_t thread;
  struct FzCpuRuntime *rt;
  unsigned index; /* 1..numThreads-1 */
} Worker;

struct FzCpuRuntime {
  FzContext *ctx;
  unsigned numThreads;
  unsigned numWorkers; /* started */
  Worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  /* The current job, written before `generation` is bumped (release)
   * and read after it is seen (acquire); valid while pending > 0. */
  FzParallelBodyFn body;
  void *env;
  int64_t n;
  unsigned parts;
  atomic_uint_fast64_t generation;
  atomic_uint pending; /* workers yet to finish the generation */
  atomic_bool quit;
  atomic_flag busy;
  FzParallelRuntime par;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void run_part(FzParallelBodyFn body, void *env, int64_t n,
                     unsigned parts, unsigned i) {
  int64_t b = n * (int64_t)i / (int64_t)parts;
  int64_t e = n * (int64_t)(i + 1) / (int64_t)parts;
  if (b < e)
    body(env, b, e);
}

/* Waits (spinning, then sleeping) for a generation other than seen. */
static uint64_t wait_generation(FzCpuRuntime *rt, uint64_t seen) {
  uint64_t g = seen;
  for (int k = 0; k < kSpins; ++k) {
    g = atomic_load_explicit(&rt->generation, memory_order_acquire);
    if (g != seen || atomic_load(&rt->quit))
      return g;
    cpu_relax();
  }
  pthread_mutex_lock(&rt->mu);
  while ((g = atomic_load_explicit(&rt->generation, memory_order_acquire)) ==
             seen &&
         !atomic_load(&rt->quit))
    pthread_cond_wait(&rt->wake, &rt->mu);
  pthread_mutex_unlock(&rt->mu);
  return g;
}

static void *worker_main(void *p) {
  const Worker *w = p;
  FzCpuRuntime *rt = w->rt;
  unsigned index = w->index;
  uint64_t seen = 0;
  for (;;) {
    seen = wait_generation(rt, seen);
    if (atomic_load(&rt->quit))
      break;
    if (index < rt->parts)
      run_part(rt->body, rt->env, rt->n, rt->parts, index);
    if (atomic_fetch_sub_explicit(&rt->pending, 1, memory_order_acq_rel) ==
        1) {
      pthread_mutex_lock(&rt->mu);
      pthread_cond_signal(&rt->done);
      pthread_mutex_unlock(&rt->mu);
    }
  }
  return NULL;
}

static void parallel_for(void *pool, FzParallelBodyFn body, void *env,
                         int64_t n, int64_t work) {
  FzCpuRuntime *rt = pool;
  if (n <= 0)
    return;
  int64_t total = work > 0 && n > INT64_MAX / work ? INT64_MAX : n * work;
  if (rt->numWorkers == 0 || n == 1 || total < kMinParallelWork ||
      atomic_flag_test_and_set(&rt->busy)) {
    body(env, 0, n);
    return;
  }
  int64_t parts = rt->numWorkers + 1;
  if (parts > n)
    parts = n;
  if (parts > total / kMinPartWork)
    parts = total / kMinPartWork > 1 ? total / kMinPartWork : 1;
  rt->body = body;
  rt->env = env;
  rt->n = n;
  rt->parts = (unsigned)parts;
  atomic_store_explicit(&rt->pending, rt->numWorkers, memory_order_relaxed);
  atomic_fetch_add_explicit(&rt->generation, 1, memory_order_release);
  /* Sleepers check the generation under the mutex: no lost wake-up. */
  pthread_mutex_lock(&rt->mu);
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->mu);
  run_part(body, env, n, (unsigned)parts, 0);
  int k = 0;
  while (atomic_load_explicit(&rt->pending, memory_order_acquire) != 0 &&
         k++ < kSpins)
    cpu_relax();
  if (atomic_load_explicit(&rt->pending, memory_order_acquire) != 0) {
    pthread_mutex_lock(&rt->mu);
    while (atomic_load_explicit(&rt->pending, memory_order_acquire) != 0)
      pthread_cond_wait(&rt->done, &rt->mu);
    pthread_mutex_unlock(&rt->mu);
  }
  atomic_flag_clear(&rt->busy);
}

unsigned fzCpuGetNumCores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

FzCpuRuntime *fzCpuRuntimeCreate(FzContext *ctx, unsigned numThreads) {
  if (numThreads == 0)
    numThreads = fzCpuGetNumCores();
  if (numThreads > 1024)
    numThreads = 1024;
  FzCpuRuntime *rt = fzCalloc(ctx, 1, sizeof *rt);
  if (!rt)
    return NULL;
  rt->ctx = ctx;
  rt->numThreads = numThreads;
  atomic_init(&rt->generation, 0);
  atomic_init(&rt->pending, 0);
  atomic_init(&rt->quit, false);
  atomic_flag_clear(&rt->busy);
  rt->par.parallelFor = parallel_for;
  rt->par.pool = rt;
  pthread_mutex_init(&rt->mu, NULL);
  pthread_cond_init(&rt->wake, NULL);
  pthread_cond_init(&rt->done, NULL);
  if (numThreads > 1) {
    rt->workers = fzCalloc(ctx, numThreads - 1, sizeof *rt->workers);
    if (!rt->workers) {
      fzCpuRuntimeDestroy(rt);
      return NULL;
    }
  }
  for (unsigned i = 1; i < numThreads; ++i) {
    Worker *w = &rt->workers[i - 1];
    w->rt = rt;
    w->index = i;
    if (pthread_create(&w->thread, NULL, worker_main, w)) {
      fzEmitError(ctx, NULL, "cpu runtime: cannot start thread %u of %u", i,
                  numThreads);
      fzCpuRuntimeDestroy(rt);
      return NULL;
    }
    rt->numWorkers++;
  }
  return rt;
}

void fzCpuRuntimeDestroy(FzCpuRuntime *rt) {
  if (!rt)
    return;
  pthread_mutex_lock(&rt->mu);
  atomic_store(&rt->quit, true);
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->mu);
  for (unsigned i = 0; i < rt->numWorkers; ++i)
    pthread_join(rt->workers[i].thread, NULL);
  pthread_mutex_destroy(&rt->mu);
  pthread_cond_destroy(&rt->wake);
  pthread_cond_destroy(&rt->done);
  fzFree(rt->ctx, rt->workers);
  fzFree(rt->ctx, rt);
}

unsigned fzCpuRuntimeGetNumThreads(const FzCpuRuntime *rt) {
  return rt->numThreads;
}

const FzParallelRuntime *fzCpuRuntimeGetParallel(const FzCpuRuntime *rt) {
  return &rt->par;
}
