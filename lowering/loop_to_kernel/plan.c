/* lowering/loop_to_kernel/plan.c - the generic planner: how one
 * top-level loop.parallel nest maps onto the GPU (the kernel is then
 * built by elementwise.c or grouped.c). The heuristic is documented in
 * docs/codegen.md ("GPU mappings"); the plan reads only the loop IR and
 * the options.
 *
 *  ROWS      the nest's body holds inner loops (loop.for reductions,
 *            1-D loop.parallel phases) whose iteration variable indexes
 *            only the last (contiguous) dimension of every access: G
 *            consecutive threads share one outer iteration (a row), each
 *            taking chunks of V consecutive elements (16 bytes), chunk
 *            c = g + k*G. G <= 32: several rows per block, combined by
 *            warp shuffles; G > 32: one row per block, shuffles then
 *            shared memory.
 *  COLUMNS   the inner loops (reductions and phases) have iteration
 *            variables that index a non-last dimension while the outer
 *            last variable indexes the last one (column sums, a layer
 *            norm over the channels of NCHW): 32 outer iterations per
 *            block along threadIdx % 32 (coalesced), each inner loop
 *            split over blockDim / 32 threads, reductions combined in
 *            shared memory; a phase's stores along its own variable (an
 *            NHWC result) go through a shared-memory tile and are
 *            written out along it.
 *  ELEMENTWISE  anything else: one iteration per thread (fz/gpu.h).
 *
 * A ROWS nest of one row per block whose chunks are not unrolled (long
 * rows: 65536 f32) and whose inner loops compute the same values of the
 * row gets the on-chip row (stage.c).
 */
#include <string.h>

#include "fz/pass.h" /* fzOpIsEffectFree */
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static unsigned pow2_ceil(int64_t v) {
  unsigned p = 1;
  while ((int64_t)p < v && p < (1u << 30))
    p <<= 1;
  return p;
}

static bool is_combine_op(FzLoopOpcode c) {
  switch (c) {
  case FZ_LOOP_OP_ADDF:
  case FZ_LOOP_OP_MULF:
  case FZ_LOOP_OP_MAXF:
  case FZ_LOOP_OP_MINF:
  case FZ_LOOP_OP_ADDI:
  case FZ_LOOP_OP_MULI:
  case FZ_LOOP_OP_MAXSI:
  case FZ_LOOP_OP_MINSI:
  case FZ_LOOP_OP_ANDI:
  case FZ_LOOP_OP_ORI:
  case FZ_LOOP_OP_XORI:
    return true;
  default:
    return false;
  }
}

FzOp *fzLkReductionCombine(FzOp *forOp, size_t i) {
  FzBlock *body = fzLoopGetBody(forOp);
  FzOp *yield = body ? fzBlockGetLastOp(body) : NULL;
  if (!yield || fzLoopGetOpcode(yield) != FZ_LOOP_OP_YIELD ||
      i >= fzOpGetNumOperands(yield) ||
      i + 1 >= fzBlockGetNumArguments(body))
    return NULL;
  FzOp *def = fzValueGetDefiningOp(fzOpGetOperand(yield, i));
  FzValue *iter = fzBlockGetArgument(body, i + 1);
  if (!def || fzOpGetBlock(def) != body ||
      !is_combine_op(fzLoopGetOpcode(def)) ||
      fzOpGetNumOperands(def) != 2 || !fzValueHasOneUse(iter))
    return NULL;
  if (fzOpGetOperand(def, 0) != iter && fzOpGetOperand(def, 1) != iter)
    return NULL;
  return def;
}

/* A scalar of 8..64 bits (what the shuffles and shared memory carry). */
static bool combinable_type(FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
  case FZ_TYPE_INDEX:
    return true;
  case FZ_TYPE_INTEGER:
    return fzTypeGetBitWidth(t) >= 8;
  default:
    return false;
  }
}

typedef struct Access {
  FzValue *iv;        /* the inner loop's iteration variable */
  FzValue *outerLast; /* the nest's last outer variable */
  FzOp *nest;         /* the nest's loop.parallel */
  int ivLast, ivOther, outerLastLast;
  /* Stores whose last index is iv (ivLast counts them too), and those
   * whose indices are not pure functions of the nest's variables (the
   * columns mapping cannot recompute their addresses for another
   * column). */
  int ivLastStores, impureStores;
  size_t ivLastStoreBytes; /* their elements' sizes, summed */
  /* Loads whose last index is iv and whose address depends on outer
   * variables but not on the last one (a row of a row-major operand that
   * the threads of a warp share: x[i, k] of a matmul). A load along iv
   * that uses the outer last variable too (a layer norm's input computed
   * from an NHWC tensor, x[n, h, w, c]) reads 32 rows per warp, each
   * thread of a column its chunk: the block reads the 32 rows whole
   * (through L1), and the columns mapping takes it. */
  int ivLastRowLoads;
  size_t widest;
  bool straight;
  bool stores;
} Access;

size_t fzLkAccessLastIndex(FzOp *op) {
  size_t bi = fzLoopMemGetBufferOperand(op);
  size_t n = fzOpGetNumOperands(op);
  FzType *bt = fzValueGetType(fzOpGetOperand(op, bi));
  size_t rank = fzShapedTypeGetRank(bt);
  size_t k = n - 1;
  while (k > bi + 1 && rank == n - bi - 1 &&
         fzShapedTypeGetDim(bt, k - bi - 1) == 1)
    --k;
  return k;
}

/* Which variables of nest's own body (the outer ones) index value v
 * depends on: bit 0 the last one, bit 1 another; both when unsure (too
 * deep). */
static unsigned uses_outer(FzOp *nest, FzValue *v, unsigned depth) {
  if (depth > 16)
    return 3;
  FzBlock *body = fzLoopGetBody(nest);
  if (fzValueIsBlockArgument(v)) {
    if (fzValueGetParentBlock(v) != body)
      return 0;
    return fzValueGetIndex(v) + 1 == fzBlockGetNumArguments(body) ? 1 : 2;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || !fzOpIsAncestor(nest, def))
    return 0;
  unsigned m = 0;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    m |= uses_outer(nest, fzOpGetOperand(def, i), depth + 1);
  return m;
}

bool fzLkIndexIsPure(FzOp *nest, FzValue *v, unsigned depth) {
  if (depth > 32)
    return false;
  if (fzValueIsBlockArgument(v)) {
    FzOp *owner = fzBlockGetParentOp(fzValueGetParentBlock(v));
    if (!owner || !fzOpIsAncestor(nest, owner))
      return true; /* outside the nest */
    FzLoopOpcode c = fzLoopGetOpcode(owner);
    return c == FZ_LOOP_OP_PARALLEL ||
           (c == FZ_LOOP_OP_FOR && fzValueGetIndex(v) == 0);
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || !fzOpIsAncestor(nest, def))
    return true;
  if (fzOpGetNumRegions(def) != 0 || !fzOpIsEffectFree(def) ||
      fzLoopGetOpcode(def) == FZ_LOOP_OP_LOAD)
    return false;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!fzLkIndexIsPure(nest, fzOpGetOperand(def, i), depth + 1))
      return false;
  return true;
}

static FzWalkResult scan_inner(FzOp *op, void *ud) {
  Access *a = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  switch (c) {
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_UNKNOWN:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VECTOR_STORE:
    a->straight = false;
    return FZ_WALK_INTERRUPT;
  default:
    break;
  }
  if (c != FZ_LOOP_OP_LOAD && c != FZ_LOOP_OP_STORE)
    return FZ_WALK_ADVANCE;
  bool store = c == FZ_LOOP_OP_STORE;
  if (store)
    a->stores = true;
  size_t bi = fzLoopMemGetBufferOperand(op);
  FzType *bt = fzValueGetType(fzOpGetOperand(op, bi));
  size_t sz = fzTypeGetStorageSize(fzShapedTypeGetElementType(bt));
  if (sz > a->widest)
    a->widest = sz;
  size_t n = fzOpGetNumOperands(op), lastAt = fzLkAccessLastIndex(op);
  for (size_t k = bi + 1; k < n; ++k) {
    FzValue *v = fzOpGetOperand(op, k);
    bool last = k == lastAt;
    if (v == a->iv) {
      last ? a->ivLast++ : a->ivOther++;
      if (last && !store) {
        unsigned m = 0;
        for (size_t j = bi + 1; j < lastAt; ++j)
          m |= uses_outer(a->nest, fzOpGetOperand(op, j), 0);
        a->ivLastRowLoads += m == 2;
      }
      if (last && store) {
        a->ivLastStores++;
        a->ivLastStoreBytes += sz;
      }
    } else if (last && v == a->outerLast) {
      a->outerLastLast++;
    }
    if (store && !fzLkIndexIsPure(a->nest, v, 0))
      a->impureStores++;
  }
  if (store && !fzLkIndexIsPure(a->nest, fzOpGetOperand(op, bi), 0))
    a->impureStores++;
  return FZ_WALK_ADVANCE;
}

/* Fills ip for inner loop `loop` (a loop.for reduction or a 1-D
 * loop.parallel). False when the loop does not qualify for a grouped
 * mapping. */
static bool plan_inner(FzOp *nest, FzOp *loop, FzValue *outerLast,
                       FzLkInnerPlan *ip, Access *acc) {
  bool isFor = fzLoopGetOpcode(loop) == FZ_LOOP_OP_FOR;
  FzBlock *body = fzLoopGetBody(loop);
  if (!body)
    return false;
  if (!isFor && fzLoopParallelGetNumDims(loop) != 1)
    return false;
  int64_t ub;
  if (!fzLoopValueGetConstantInt(fzOpGetOperand(loop, 0), &ip->lb) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(loop, 1), &ub) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(loop, 2), &ip->step) ||
      ip->step <= 0)
    return false;
  ip->loop = loop;
  ip->trips = ub > ip->lb ? ceil_div(ub - ip->lb, ip->step) : 0;
  ip->isReduction = isFor;
  if (isFor) {
    size_t k = fzOpGetNumResults(loop);
    if (k == 0 || k > FZ_LK_MAX_ACCUMULATORS)
      return false;
    for (size_t i = 0; i < k; ++i)
      if (!fzLkReductionCombine(loop, i) ||
          !combinable_type(fzValueGetType(fzOpGetResult(loop, i))))
        return false;
  }
  memset(acc, 0, sizeof *acc);
  acc->iv = fzBlockGetArgument(body, 0);
  acc->outerLast = outerLast;
  acc->nest = nest;
  acc->widest = 1;
  acc->straight = true;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (op == fzBlockGetLastOp(body) && fzLoopGetOpcode(op) == FZ_LOOP_OP_YIELD)
      break;
    fzOpWalk(op, FZ_WALK_PRE_ORDER, scan_inner, acc);
    if (!acc->straight)
      return false;
  }
  if (isFor && acc->stores)
    return false; /* a reduction that also stores: keep it on one thread */
  return true;
}

static void plan_elementwise(const FzLkNest *n, FzLkNestPlan *p,
                             const FzLoopToKernelOptions *o) {
  unsigned vec = o->vector;
  if (vec == 0)
    vec = n->widestBytes >= 16 ? 1 : (unsigned)(16 / n->widestBytes);
  if (!n->straightLine || vec < 1 || n->trips[n->numDims - 1] % vec != 0)
    vec = 1;
  p->mapping = FZ_LK_MAP_ELEMENTWISE;
  p->vec = vec;
  p->group = 1;
  p->itemsPerBlock = o->blockSize;
  p->blockSize = o->blockSize;
  p->numBlocks = ceil_div(n->items / vec, o->blockSize);
}

/* Whether the body of par has the ROWS or COLUMNS shape; fills the
 * inner plans. */
static FzLkMappingKind classify(const FzLkNest *n, FzLkNestPlan *p) {
  FzBlock *body = fzLoopGetBody(n->par);
  FzValue *outerLast = fzBlockGetArgument(body, n->numDims - 1);
  int ivLast = 0, ivOther = 0, outerLastLast = 0, ivLastStores = 0;
  int impureStores = 0, ivLastRowLoads = 0;
  p->numInner = 0;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (op == fzBlockGetLastOp(body) && c == FZ_LOOP_OP_YIELD)
      break;
    switch (c) {
    case FZ_LOOP_OP_FOR:
    case FZ_LOOP_OP_PARALLEL: {
      if (p->numInner == FZ_LK_MAX_INNER)
        return FZ_LK_MAP_ELEMENTWISE;
      Access a;
      FzLkInnerPlan *ip = &p->inner[p->numInner];
      memset(ip, 0, sizeof *ip);
      if (!plan_inner(n->par, op, outerLast, ip, &a))
        return FZ_LK_MAP_ELEMENTWISE;
      ip->widest = a.widest;
      ip->contiguous = a.ivOther == 0 && a.ivLast > 0;
      ip->transposed = (unsigned)a.ivLastStores;
      ip->transposedBytes = a.ivLastStoreBytes;
      ivLast += a.ivLast;
      ivOther += a.ivOther;
      outerLastLast += a.outerLastLast;
      ivLastStores += a.ivLastStores;
      impureStores += a.impureStores;
      ivLastRowLoads += a.ivLastRowLoads;
      p->numInner++;
      break;
    }
    case FZ_LOOP_OP_ALLOC:
    case FZ_LOOP_OP_DEALLOC:
    case FZ_LOOP_OP_UNKNOWN:
    case FZ_LOOP_OP_VECTOR_STORE:
      return FZ_LK_MAP_ELEMENTWISE;
    default:
      break;
    }
  }
  if (p->numInner == 0)
    return FZ_LK_MAP_ELEMENTWISE;
  if (ivOther == 0 && ivLast > 0)
    return FZ_LK_MAP_ROWS;
  /* Columns: the inner variables index strided dims, the outer last one
   * the contiguous dim. A phase may also store along the inner variable
   * (a layer norm over NCHW channels stored NHWC): those stores go
   * through shared memory, their addresses computed again for the
   * columns a thread writes out, so they must be pure index arithmetic.
   * Loads along the inner variable are read as they are when they are
   * the same for every column (a layer norm's scale and shift); a load
   * of rows along it (x[i, k] of a matmul) is not a columns nest. */
  if (ivOther > 0 && outerLastLast > 0 && ivLastRowLoads == 0 &&
      (ivLastStores == 0 || impureStores == 0) &&
      ivLastStores <= FZ_LK_MAX_TRANSPOSED)
    return FZ_LK_MAP_COLUMNS;
  return FZ_LK_MAP_ELEMENTWISE;
}

static void plan_rows(const FzLkNest *n, FzLkNestPlan *p,
                      const FzLoopToKernelOptions *o) {
  int64_t maxChunks = 1;
  for (size_t i = 0; i < p->numInner; ++i) {
    FzLkInnerPlan *ip = &p->inner[i];
    unsigned v = ip->widest >= 16 ? 1 : (unsigned)(16 / ip->widest);
    if (!ip->contiguous || ip->step != 1 || ip->trips % v != 0)
      v = 1;
    ip->vec = v;
    ip->chunks = ceil_div(ip->trips, v);
    if (ip->chunks > maxChunks)
      maxChunks = ip->chunks;
  }
  /* About four 16-byte chunks per thread (o->rowChunks): the row stays
   * in registers and each thread has several loads in flight. */
  unsigned g = pow2_ceil(ceil_div(maxChunks, o->rowChunks ? o->rowChunks : 4));
  if (g > 1024)
    g = 1024;
  p->mapping = FZ_LK_MAP_ROWS;
  p->group = g;
  p->vec = 1;
  if (g <= 32) {
    p->blockSize = o->blockSize;
    p->itemsPerBlock = o->blockSize / g;
  } else {
    p->blockSize = g;
    p->itemsPerBlock = 1;
  }
  p->numBlocks = ceil_div(n->items, p->itemsPerBlock);
}

static void plan_columns(const FzLkNest *n, FzLkNestPlan *p) {
  /* Enough threads to fill the GPU (~2^18) with 32 columns per block;
   * 4..32 threads share each column's inner loops, no more than their
   * longest has iterations. */
  int64_t cols32 = ceil_div(n->items, 32) * 32;
  int64_t ty = ((int64_t)1 << 18) / cols32;
  int64_t maxTrips = 1;
  for (size_t i = 0; i < p->numInner; ++i)
    if (p->inner[i].trips > maxTrips)
      maxTrips = p->inner[i].trips;
  unsigned g = 4;
  while ((int64_t)g * 2 <= ty && g < 32 && (int64_t)g < maxTrips)
    g *= 2;
  while (g > 1 && (int64_t)g / 2 >= maxTrips)
    g /= 2;
  for (size_t i = 0; i < p->numInner; ++i) {
    p->inner[i].vec = 1;
    p->inner[i].chunks = p->inner[i].trips;
  }
  p->mapping = FZ_LK_MAP_COLUMNS;
  p->group = g;
  p->vec = 1;
  p->itemsPerBlock = 32;
  p->blockSize = 32 * g;
  p->numBlocks = ceil_div(n->items, 32);
}

/* Follows views back to the buffer they view. */
static FzValue *root_of(FzValue *v) {
  for (FzOp *d = fzValueGetDefiningOp(v);
       d && fzLoopGetOpcode(d) == FZ_LOOP_OP_VIEW;
       d = fzValueGetDefiningOp(v))
    v = fzOpGetOperand(d, 0);
  return v;
}

typedef struct Roots {
  FzValue *loaded[64], *stored[64];
  size_t numLoaded, numStored;
  bool overflow;
} Roots;

static FzWalkResult collect_roots(FzOp *op, void *ud) {
  Roots *r = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  bool load = c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD;
  bool store = c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE;
  if (!load && !store)
    return FZ_WALK_ADVANCE;
  FzValue *root = root_of(fzOpGetOperand(op, fzLoopMemGetBufferOperand(op)));
  FzValue **set = load ? r->loaded : r->stored;
  size_t *n = load ? &r->numLoaded : &r->numStored;
  for (size_t i = 0; i < *n; ++i)
    if (set[i] == root)
      return FZ_WALK_ADVANCE;
  if (*n == 64) {
    r->overflow = true;
    return FZ_WALK_INTERRUPT;
  }
  set[(*n)++] = root;
  return FZ_WALK_ADVANCE;
}

static bool shares_memory(FzOp *par) {
  Roots r;
  memset(&r, 0, sizeof r);
  fzOpWalk(par, FZ_WALK_PRE_ORDER, collect_roots, &r);
  if (r.overflow)
    return true;
  for (size_t i = 0; i < r.numStored; ++i)
    for (size_t k = 0; k < r.numLoaded; ++k)
      if (r.stored[i] == r.loaded[k])
        return true;
  return false;
}

/* Static shared memory the grouped kernel needs: per reduction result,
 * one slot per warp of a row (rows, G > 32) or per thread (columns);
 * per store of a columns phase along its inner variable, two tiles of
 * G x 33 elements (FZ_LK_TILE_PITCH). */
static int64_t shared_bytes(const FzLkNestPlan *p) {
  int64_t slots = p->mapping == FZ_LK_MAP_COLUMNS ? (int64_t)p->group * 32
                  : p->group > 32                 ? p->group / 32
                                                  : 0;
  int64_t total = 0;
  for (size_t i = 0; i < p->numInner; ++i) {
    FzOp *loop = p->inner[i].loop;
    if (p->mapping == FZ_LK_MAP_COLUMNS)
      total += 2 * (int64_t)p->group * FZ_LK_TILE_PITCH *
               (int64_t)p->inner[i].transposedBytes;
    if (!p->inner[i].isReduction)
      continue;
    for (size_t k = 0; k < fzOpGetNumResults(loop); ++k) {
      FzType *t = fzValueGetType(fzOpGetResult(loop, k));
      total += slots * (fzTypeGetKind(t) == FZ_TYPE_INDEX
                            ? 8
                            : (int64_t)fzTypeGetStorageSize(t));
    }
  }
  return total;
}

void fzLkPlanNest(const FzLkNest *n, const FzLoopToKernelOptions *o,
                  FzLkNestPlan *p) {
  memset(p, 0, sizeof *p);
  FzLkMappingKind m = classify(n, p);
  if (m == FZ_LK_MAP_ROWS)
    plan_rows(n, p, o);
  else if (m == FZ_LK_MAP_COLUMNS)
    plan_columns(n, p);
  else
    plan_elementwise(n, p, o);
  for (size_t i = 0; p->mapping != FZ_LK_MAP_COLUMNS && i < p->numInner;
       ++i) {
    p->inner[i].transposed = 0; /* the columns mapping's only */
    p->inner[i].transposedBytes = 0;
  }
  if (p->mapping != FZ_LK_MAP_ELEMENTWISE && shared_bytes(p) > 40 * 1024)
    plan_elementwise(n, p, o); /* static limit */
  p->phasesShareMemory = shares_memory(n->par);
  for (size_t i = 0; p->mapping != FZ_LK_MAP_ELEMENTWISE && i < p->numInner;
       ++i) {
    FzLkInnerPlan *ip = &p->inner[i];
    ip->perThread = ceil_div(ip->chunks, p->group);
    /* Unrolled: every access of a thread has a constant offset, so the
     * loads of later phases are the same SSA values as the first ones
     * (with !invariant.load, GVN keeps the row in registers). */
    ip->unroll = ip->perThread * ip->vec <= 32 && ip->perThread <= 16;
  }
  fzLkPlanStaging(n, p, o, shared_bytes(p));
}

void fzLkPlanLaunch(const FzLkNestPlan *p, FzLkPlan *out) {
  int64_t blocks = p->numBlocks;
  out->grid[0] = blocks > 0x7fffffff ? 0x7fffffff : blocks < 1 ? 1 : blocks;
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = p->blockSize;
  out->block[1] = out->block[2] = 1;
  out->sharedBytes = p->mapping == FZ_LK_MAP_ROWS ? p->stageBytes : 0;
}

void fzLkPlanDescribe(const FzLkNest *nest, const FzLkNestPlan *p, char *buf,
                      size_t size) {
  int n = 0;
  switch (p->mapping) {
  case FZ_LK_MAP_ROWS:
    n = snprintf(buf, size,
                 "rows: %lld rows, inner loops on the contiguous last "
                 "dimension; %u threads per row, %u rows per block of %u",
                 (long long)nest->items, p->group, p->itemsPerBlock,
                 p->blockSize);
    break;
  case FZ_LK_MAP_COLUMNS:
    n = snprintf(buf, size,
                 "columns: %lld columns, reduced along a strided dimension; "
                 "32 columns per block, %u threads per column",
                 (long long)nest->items, p->group);
    break;
  default:
    n = snprintf(buf, size,
                 "elementwise: %lld iterations, %u per thread (no inner "
                 "loop on the contiguous dimension to share)",
                 (long long)nest->items, p->vec);
    break;
  }
  for (size_t i = 0; p->mapping != FZ_LK_MAP_ELEMENTWISE && i < p->numInner &&
                     n > 0 && (size_t)n < size;
       ++i) {
    const FzLkInnerPlan *ip = &p->inner[i];
    char how[96];
    bool produces = false;
    for (size_t k = 0; k < p->numStaged; ++k)
      produces |= p->staged[k].producer == i;
    if (ip->staged)
      snprintf(how, sizeof how, " (%lld in registers, %lld in shared "
               "memory%s)", (long long)p->regChunks,
               (long long)(ip->perThread - p->regChunks),
               produces ? "; keeps the row" : "");
    else if (ip->transposed)
      snprintf(how, sizeof how, " (%s; %u store%s along it through "
               "shared memory)", ip->unroll ? "unrolled" : "loop",
               ip->transposed, ip->transposed == 1 ? "" : "s");
    else
      snprintf(how, sizeof how, ip->unroll ? " (unrolled)" : " (loop)");
    n += snprintf(buf + n, size - (size_t)n,
                  "; %s of %lld: %lld chunks of %u, %lld per thread%s",
                  ip->isReduction ? "reduction" : "phase",
                  (long long)ip->trips, (long long)ip->chunks, ip->vec,
                  (long long)ip->perThread, how);
  }
  if (p->mapping != FZ_LK_MAP_ROWS || n <= 0 || (size_t)n >= size)
    return;
  if (p->numStaged)
    n += snprintf(buf + n, size - (size_t)n,
                  "; row on chip: %zu value%s computed once, %lld chunks "
                  "per thread in registers, %lld bytes of shared memory",
                  p->numStaged, p->numStaged == 1 ? "" : "s",
                  (long long)p->regChunks, (long long)p->stageBytes);
  if (p->numUnstaged && n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n,
             "; %zu value%s (%lld bytes per row) recomputed from global "
             "memory by each loop: beyond the on-chip budget",
             p->numUnstaged, p->numUnstaged == 1 ? "" : "s",
             (long long)p->unstagedBytes);
}
