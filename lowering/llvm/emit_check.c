/* lowering/llvm/emit_check.c - run-time checks in generated code, and the
 * index range analysis that decides where they are needed.
 *
 * The loop dialect defines errors that hardware would turn into a fault
 * or a hang: an index outside its buffer, integer division by zero, a
 * loop.for step that is not positive. The interpreters report them; the
 * generated code must too, without paying for it where it cannot happen.
 *
 * Ranges. Every index-like value gets an interval and a kind: KNOWN (the
 * interval holds: constants, static dims, loop induction variables, whose
 * range is [lb, ub - 1] of their bounds' ranges (its top rounded down to
 * lb + a multiple of the step when lb and the step are constants), and
 * integer arithmetic
 * on those), TRUSTED (computed from the GPU's thread and block ids, which
 * the loop-to-kernel mappings bound by construction: not checked) or DATA
 * (computed from a loaded value, an iteration argument, or an operation
 * the analysis does not follow: always checked). An access dimension is
 * checked when its index is DATA, or KNOWN with an interval that is not
 * inside [0, dim - lanes]. So the affine nests of elementwise, reduction,
 * matmul and conv kernels get no check, and a gather gets one per
 * gathered index.
 *
 * A failed check stores its site number (1-based) and one value into the
 * module's global `fz_status` ([2 x i64]; the first failure wins, by a
 * compare-and-swap) and the code goes on without the faulting operation
 * (the load yields 0, the store is skipped, the division divides by 1,
 * the loop does not run). The runtime reads the global after the call
 * (fzNativeModuleTakeStatus) and reports the site's message at the op's
 * location. The sites are the emitter's (E->sites), handed to the caller
 * of fzLLBuildOptimized.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

enum { R_KNOWN, R_TRUSTED, R_DATA };

typedef struct Range {
  int64_t lo, hi;
  int kind;
} Range;

enum { kMaxDepth = 64 };

void fzLLSitesFree(FzContext *ctx, FzLLSites *s) {
  for (size_t i = 0; i < s->n; ++i)
    fzFree(ctx, s->v[i].message);
  fzFree(ctx, s->v);
  memset(s, 0, sizeof *s);
}

void fzLLChecksFinish(FzLLEmitter *E) {
  if (E->rangePool)
    fzPtrMapFree(&E->rangeMemo);
  fzFree(E->ctx, E->rangePool);
  E->rangePool = NULL;
  E->rangeN = E->rangeCap = 0;
}

static Range r_data(void) { return (Range){INT64_MIN, INT64_MAX, R_DATA}; }
static Range r_exact(int64_t c) { return (Range){c, c, R_KNOWN}; }
static Range r_kind(int kind) {
  return kind == R_KNOWN ? r_data() : (Range){INT64_MIN, INT64_MAX, kind};
}
static int worst(Range a, Range b) { return a.kind > b.kind ? a.kind : b.kind; }

static int64_t min2(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* The known range spanned by the four corner values of a product or a
 * quotient of two ranges. */
static Range r_corners(const int64_t c[4]) {
  Range r = {c[0], c[0], R_KNOWN};
  for (int k = 1; k < 4; ++k) {
    r.lo = min2(r.lo, c[k]);
    r.hi = max2(r.hi, c[k]);
  }
  return r;
}

static Range r_add(Range a, Range b, bool sub) {
  if (worst(a, b) != R_KNOWN)
    return r_kind(worst(a, b));
  Range r = {0, 0, R_KNOWN};
  bool o = sub ? __builtin_sub_overflow(a.lo, b.hi, &r.lo) ||
                     __builtin_sub_overflow(a.hi, b.lo, &r.hi)
               : __builtin_add_overflow(a.lo, b.lo, &r.lo) ||
                     __builtin_add_overflow(a.hi, b.hi, &r.hi);
  return o ? r_data() : r;
}

static Range r_mul(Range a, Range b) {
  if (worst(a, b) != R_KNOWN)
    return r_kind(worst(a, b));
  int64_t p[4];
  if (__builtin_mul_overflow(a.lo, b.lo, &p[0]) ||
      __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
      __builtin_mul_overflow(a.hi, b.lo, &p[2]) ||
      __builtin_mul_overflow(a.hi, b.hi, &p[3]))
    return r_data();
  return r_corners(p);
}

/* Truncating division by a positive divisor range: the extremes are at
 * the corners. */
static Range r_div(Range a, Range b) {
  if (worst(a, b) != R_KNOWN)
    return r_kind(worst(a, b));
  if (b.lo <= 0)
    return r_data();
  int64_t q[4] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
  return r_corners(q);
}

/* C remainder by a positive divisor range: the sign of the dividend,
 * magnitude below the divisor's largest value. */
static Range r_rem(Range a, Range b) {
  if (worst(a, b) != R_KNOWN)
    return r_kind(worst(a, b));
  if (b.lo <= 0)
    return r_data();
  int64_t m = b.hi - 1;
  Range r = {a.lo >= 0 ? 0 : max2(a.lo, -m), a.hi <= 0 ? 0 : min2(a.hi, m),
             R_KNOWN};
  if (a.lo >= 0 && a.hi < b.lo) /* smaller than every divisor */
    r = a;
  return r;
}

static Range r_union(Range a, Range b) {
  if (worst(a, b) != R_KNOWN)
    return r_kind(worst(a, b));
  return (Range){min2(a.lo, b.lo), max2(a.hi, b.hi), R_KNOWN};
}

static unsigned int_width(FzType *t) {
  if (fzTypeGetKind(t) == FZ_TYPE_INTEGER)
    return fzTypeGetBitWidth(t);
  return 64; /* index */
}

/* Whether [lo, hi] fits a signed integer of width w. */
static bool fits(Range a, unsigned w) {
  if (w >= 64)
    return true;
  int64_t lim = (int64_t)1 << (w - 1);
  return a.lo >= -lim && a.hi <= lim - 1;
}

static Range range_of(FzLLEmitter *E, FzValue *v, unsigned depth);

static Range arg_range(FzLLEmitter *E, FzValue *v, unsigned depth) {
  FzOp *owner = fzBlockGetParentOp(fzValueGetParentBlock(v));
  FzLoopOpcode c = owner ? fzLoopGetOpcode(owner) : FZ_LOOP_OP_UNKNOWN;
  size_t i = fzValueGetIndex(v), lbAt, ubAt, stAt;
  if (c == FZ_LOOP_OP_FOR && i == 0) {
    lbAt = 0;
    ubAt = 1;
    stAt = 2;
  } else if (c == FZ_LOOP_OP_PARALLEL &&
             i < fzLoopParallelGetNumDims(owner)) {
    lbAt = i;
    ubAt = fzLoopParallelGetNumDims(owner) + i;
    stAt = 2 * fzLoopParallelGetNumDims(owner) + i;
  } else {
    /* Iteration arguments and function arguments: unknown; in a GPU
     * kernel, the launch's own values. */
    return r_kind(E->emitForeignOp ? R_TRUSTED : R_DATA);
  }
  Range lb = range_of(E, fzOpGetOperand(owner, lbAt), depth + 1);
  Range ub = range_of(E, fzOpGetOperand(owner, ubAt), depth + 1);
  if (worst(lb, ub) != R_KNOWN)
    return r_kind(worst(lb, ub));
  /* lb <= iv < ub inside the body (which does not run when lb >= ub). */
  if (ub.hi == INT64_MIN)
    return r_data();
  Range r = {lb.lo, max2(lb.lo, ub.hi - 1), R_KNOWN};
  /* With a constant lb and step s, iv is lb + n s: the last value is
   * below ub - 1 when s does not divide the trip (a loop of step W over
   * vectors of W lanes then reads up to ub - 1, not ub + W - 2). */
  int64_t s;
  if (lb.lo == lb.hi && r.hi > r.lo &&
      fzLoopValueGetConstantInt(fzOpGetOperand(owner, stAt), &s) && s > 1)
    r.hi = r.lo + (r.hi - r.lo) / s * s;
  return r;
}

static Range op_range(FzLLEmitter *E, FzOp *def, FzValue *v,
                      unsigned depth) {
  FzLoopOpcode c = fzLoopGetOpcode(def);
  if (c == FZ_LOOP_OP_UNKNOWN)
    return r_kind(E->emitForeignOp ? R_TRUSTED : R_DATA);
  int64_t k;
  FzValue *a0 = fzOpGetNumOperands(def) > 0 ? fzOpGetOperand(def, 0) : NULL;
  FzValue *a1 = fzOpGetNumOperands(def) > 1 ? fzOpGetOperand(def, 1) : NULL;
#define R(x) range_of(E, (x), depth + 1)
  switch (c) {
  case FZ_LOOP_OP_CONSTANT:
    return fzLoopValueGetConstantInt(v, &k) ? r_exact(k) : r_data();
  case FZ_LOOP_OP_DIM: {
    FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("index"));
    int64_t d = a && fzAttrGetKind(a) == FZ_ATTR_INTEGER
                    ? fzIntegerAttrGetValue(a)
                    : -1;
    FzType *t = fzValueGetType(a0);
    if (d < 0 || (size_t)d >= fzShapedTypeGetRank(t) ||
        fzShapedTypeGetDim(t, (size_t)d) == FZ_DYNAMIC)
      return r_data();
    return r_exact(fzShapedTypeGetDim(t, (size_t)d));
  }
  case FZ_LOOP_OP_ADDI:
    return r_add(R(a0), R(a1), false);
  case FZ_LOOP_OP_SUBI:
    return r_add(R(a0), R(a1), true);
  case FZ_LOOP_OP_MULI:
    return r_mul(R(a0), R(a1));
  case FZ_LOOP_OP_DIVSI:
    return r_div(R(a0), R(a1));
  case FZ_LOOP_OP_REMSI:
    return r_rem(R(a0), R(a1));
  case FZ_LOOP_OP_MAXSI:
  case FZ_LOOP_OP_MINSI: {
    Range a = R(a0), b = R(a1);
    if (worst(a, b) != R_KNOWN)
      return r_kind(worst(a, b));
    return c == FZ_LOOP_OP_MAXSI
               ? (Range){max2(a.lo, b.lo), max2(a.hi, b.hi), R_KNOWN}
               : (Range){min2(a.lo, b.lo), min2(a.hi, b.hi), R_KNOWN};
  }
  case FZ_LOOP_OP_ANDI: {
    Range a = R(a0), b = R(a1);
    if (worst(a, b) != R_KNOWN)
      return r_kind(worst(a, b));
    if (a.lo >= 0 && b.lo >= 0)
      return (Range){0, min2(a.hi, b.hi), R_KNOWN};
    if (a.lo >= 0 || b.lo >= 0)
      return (Range){0, a.lo >= 0 ? a.hi : b.hi, R_KNOWN};
    return r_data();
  }
  case FZ_LOOP_OP_SHLI:
  case FZ_LOOP_OP_SHRSI: {
    Range a = R(a0), b = R(a1);
    if (worst(a, b) != R_KNOWN)
      return r_kind(worst(a, b));
    if (b.lo != b.hi || b.lo < 0 || b.lo > 62)
      return r_data();
    if (c == FZ_LOOP_OP_SHLI)
      return r_mul(a, r_exact((int64_t)1 << b.lo));
    return (Range){a.lo >> b.lo, a.hi >> b.lo, R_KNOWN};
  }
  case FZ_LOOP_OP_SELECT:
    return r_union(R(fzOpGetOperand(def, 1)), R(fzOpGetOperand(def, 2)));
  case FZ_LOOP_OP_CMPI:
  case FZ_LOOP_OP_CMPF:
    return (Range){0, 1, R_KNOWN};
  case FZ_LOOP_OP_INDEX_CAST:
  case FZ_LOOP_OP_EXTSI:
    return R(a0);
  case FZ_LOOP_OP_EXTUI: {
    Range a = R(a0);
    unsigned w = int_width(fzValueGetType(a0));
    if (a.kind != R_KNOWN || a.lo >= 0)
      return a;
    return w < 63 ? (Range){0, ((int64_t)1 << w) - 1, R_KNOWN} : r_data();
  }
  case FZ_LOOP_OP_TRUNCI: {
    Range a = R(a0);
    if (a.kind != R_KNOWN || fits(a, int_width(fzValueGetType(v))))
      return a;
    return r_data();
  }
  default:
    return r_data(); /* loads, float-to-int conversions, ... */
  }
#undef R
}

static Range range_of(FzLLEmitter *E, FzValue *v, unsigned depth) {
  if (!E->rangePool) {
    fzPtrMapInit(&E->rangeMemo, E->ctx);
    E->rangeCap = 64;
    E->rangePool = fzMalloc(E->ctx, E->rangeCap * sizeof(Range));
    if (!E->rangePool) { /* recorded; the emission fails */
      fzPtrMapFree(&E->rangeMemo);
      E->failed = true;
      return r_data();
    }
  }
  uintptr_t at = (uintptr_t)fzPtrMapGet(&E->rangeMemo, v);
  if (at)
    return ((Range *)E->rangePool)[at - 1];
  if (depth > kMaxDepth)
    return r_data();
  Range r = fzValueIsBlockArgument(v)
                ? arg_range(E, v, depth)
                : op_range(E, fzValueGetDefiningOp(v), v, depth);
  if (E->rangeN == E->rangeCap) {
    void *grown =
        fzRealloc(E->ctx, E->rangePool, 2 * E->rangeCap * sizeof(Range));
    if (!grown) {
      E->failed = true;
      return r;
    }
    E->rangePool = grown;
    E->rangeCap *= 2;
  }
  ((Range *)E->rangePool)[E->rangeN++] = r;
  if (!fzPtrMapPut(&E->rangeMemo, v, (void *)(uintptr_t)E->rangeN)) {
    --E->rangeN;
    E->failed = true;
  }
  return r;
}

bool fzLLValueNeedsCheck(FzLLEmitter *E, FzValue *index, int64_t size,
                         int64_t extent) {
  Range r = range_of(E, index, 0);
  if (r.kind == R_TRUSTED)
    return false;
  if (r.kind == R_DATA)
    return true;
  return r.lo < 0 || r.hi > size - extent;
}

bool fzLLIndexNeedsCheck(FzLLEmitter *E, FzOp *op, FzValue *buf,
                         size_t firstIndex, size_t k, unsigned lanes) {
  FzType *bt = fzValueGetType(buf);
  size_t rank = fzShapedTypeGetRank(bt);
  int64_t dim = fzShapedTypeGetDim(bt, k);
  if (dim == FZ_DYNAMIC || firstIndex + k >= fzOpGetNumOperands(op))
    return false; /* not emitted (dynamic shapes are refused) */
  return fzLLValueNeedsCheck(E, fzOpGetOperand(op, firstIndex + k), dim,
                             k + 1 == rank ? (int64_t)lanes : 1);
}

bool fzLLStepNeedsCheck(FzLLEmitter *E, FzValue *step) {
  Range r = range_of(E, step, 0);
  return r.kind == R_DATA || (r.kind == R_KNOWN && r.lo <= 0);
}

bool fzLLDivisorNeedsCheck(FzLLEmitter *E, FzOp *op) {
  Range r = range_of(E, fzOpGetOperand(op, 1), 0);
  return r.kind == R_DATA || (r.kind == R_KNOWN && r.lo <= 0 && r.hi >= 0);
}

typedef struct NeedsWalk {
  FzLLEmitter *E;
  bool found;
} NeedsWalk;

static FzWalkResult needs_walk(FzOp *op, void *ud) {
  NeedsWalk *w = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  switch (c) {
  case FZ_LOOP_OP_DIVSI:
  case FZ_LOOP_OP_REMSI:
    w->found = fzLLDivisorNeedsCheck(w->E, op);
    break;
  case FZ_LOOP_OP_LOAD:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE: {
    bool load = c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD;
    size_t first = load ? 1 : 2;
    FzValue *buf = fzOpGetOperand(op, first - 1);
    FzType *vt = fzValueGetType(load ? fzOpGetResult(op, 0)
                                     : fzOpGetOperand(op, 0));
    unsigned lanes = fzLLLanes(vt);
    size_t rank = fzShapedTypeGetRank(fzValueGetType(buf));
    for (size_t k = 0; k < rank && !w->found; ++k)
      w->found = fzLLIndexNeedsCheck(w->E, op, buf, first, k, lanes);
    break;
  }
  case FZ_LOOP_OP_VIEW: {
    if (fzOpGetNumOperands(op) < 2)
      break;
    FzType *st = fzValueGetType(fzOpGetOperand(op, 0));
    FzType *vt = fzValueGetType(fzOpGetResult(op, 0));
    int64_t esz = (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(st));
    int64_t src = fzLLBufferSpanBytes(st), view = fzLLBufferSpanBytes(vt);
    if (esz > 0 && src >= 0 && view > 0)
      w->found = fzLLValueNeedsCheck(w->E, fzOpGetOperand(op, 1), src / esz,
                                     view / esz);
    break;
  }
  case FZ_LOOP_OP_FOR:
    w->found = fzLLStepNeedsCheck(w->E, fzOpGetOperand(op, 2));
    break;
  default:
    break;
  }
  return w->found ? FZ_WALK_INTERRUPT : FZ_WALK_ADVANCE;
}

bool fzLLBlockNeedsChecks(FzLLEmitter *E, FzBlock *block) {
  NeedsWalk w = {E, false};
  for (FzOp *op = fzBlockGetFirstOp(block); op && !w.found;
       op = fzOpGetNextInBlock(op))
    fzOpWalk(op, FZ_WALK_PRE_ORDER, needs_walk, &w);
  return w.found;
}

/* The status global, created with the first check. */
static LLVMValueRef status_global(FzLLEmitter *E) {
  if (E->status)
    return E->status;
  LLVMTypeRef ty = LLVMArrayType2(E->tI64, 2);
  /* Global memory (address space 1) on NVPTX; weak on the CPU, so that
   * several objects from fuse link into one program. */
  bool gpu = E->emitForeignOp != NULL;
  LLVMValueRef g = LLVMGetNamedGlobal(E->mod, "fz_status");
  if (!g) {
    g = gpu ? LLVMAddGlobalInAddressSpace(E->mod, ty, "fz_status", 1)
            : LLVMAddGlobal(E->mod, ty, "fz_status");
    LLVMSetInitializer(g, LLVMConstNull(ty));
    LLVMSetLinkage(g, gpu ? LLVMExternalLinkage : LLVMWeakAnyLinkage);
    LLVMSetAlignment(g, 8);
  }
  return E->status = g;
}

static bool add_site(FzLLEmitter *E, FzOp *op, const char *fmt, va_list ap) {
  FzLLSites *s = &E->sites;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    FzLLSite *v = fzRealloc(E->ctx, s->v, cap * sizeof *v);
    if (!v)
      return false;
    s->v = v;
    s->cap = cap;
  }
  char *msg = fzStrVPrintf(E->ctx, fmt, ap);
  if (!msg)
    return false;
  s->v[s->n++] = (FzLLSite){fzOpGetLoc(op), msg};
  return true;
}

void fzLLEmitCheck(FzLLEmitter *E, FzOp *op, LLVMValueRef ok,
                   LLVMValueRef value, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool added = add_site(E, op, fmt, ap);
  va_end(ap);
  if (!added) {
    fzLLError(E, op, "emit-llvm: out of memory");
    return;
  }
  LLVMTypeRef ty = LLVMTypeOf(ok);
  if (LLVMGetTypeKind(ty) == LLVMVectorTypeKind)
    ok = fzLLCallIntrinsic(E, "llvm.vector.reduce.and", &ty, 1, &ok, 1);
  LLVMValueRef args[2] = {ok, LLVMConstInt(E->tI1, 1, 0)};
  LLVMTypeRef i1 = E->tI1;
  ok = fzLLCallIntrinsic(E, "llvm.expect", &i1, 1, args, 2);
  LLVMBasicBlockRef fail =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "check.fail");
  LLVMBasicBlockRef cont =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "check.ok");
  LLVMBuildCondBr(E->b, ok, cont, fail);
  LLVMPositionBuilderAtEnd(E->b, fail);
  LLVMValueRef g = status_global(E);
  LLVMTypeRef gty = LLVMArrayType2(E->tI64, 2);
  LLVMValueRef idx[2] = {LLVMConstInt(E->tI32, 0, 0),
                         LLVMConstInt(E->tI32, 1, 0)};
  LLVMValueRef slot = LLVMBuildInBoundsGEP2(E->b, gty, g, idx, 2, "");
  LLVMValueRef site = fzLLIndex(E, (int64_t)E->sites.n);
  LLVMValueRef cas = LLVMBuildAtomicCmpXchg(
      E->b, g, fzLLIndex(E, 0), site, LLVMAtomicOrderingMonotonic,
      LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef won = LLVMBuildExtractValue(E->b, cas, 1, "");
  LLVMBasicBlockRef first =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "check.first");
  LLVMBuildCondBr(E->b, won, first, cont);
  LLVMPositionBuilderAtEnd(E->b, first);
  LLVMValueRef st = LLVMBuildStore(E->b, value ? value : fzLLIndex(E, 0), slot);
  LLVMSetVolatile(st, 1);
  LLVMBuildBr(E->b, cont);
  LLVMPositionBuilderAtEnd(E->b, cont);
}
