/* lowering/llvm/emit_vector.c - explicit vector loops for the innermost
 * dimension of a parallel nest, with aligned (and streaming) stores.
 *
 * LLVM's loop vectorizer handles most loops, but it cannot know that a
 * store is aligned (it keeps the scalar store's alignment), and it
 * refuses to vectorize a loop whose stores are non-temporal unless they
 * are. Streaming stores matter for fused elementwise kernels: a normal
 * store reads the line first (read-for-ownership), so a kernel that
 * reads one tensor and writes one moves three bytes for every two, and
 * stays below the memcpy bandwidth of the machine.
 *
 * So when the body of the innermost dimension is straight-line code that
 * the emitter can widen (no loop, no call, scalar values; every load and
 * store either independent of the dimension's index or contiguous along
 * it: last index == the index, last stride 1), the loop is emitted as
 *   prologue  scalar, up to the first element of the first stored buffer
 *             (the anchor) at a 64-byte boundary (computed at run time
 *             from the address, so any element-aligned buffer works);
 *   main      W lanes at a time (W = vector bits / element bits of the
 *             anchor), every value <W x T>: the anchor's stores are
 *             aligned, and non-temporal when its buffer spans at least
 *             options.nontemporalMinBytes and the nest never reads it;
 *   epilogue  scalar, the last < W iterations.
 * The scalar parts are ordinary emission (LLVM may vectorize them too).
 *
 * Invariants: nothing is emitted when the body does not qualify (the
 * analysis runs first); E->varying is set only while the main loop's
 * body is emitted.
 */
#include <string.h>

#include "lowering/llvm/emit_internal.h"

/* Ops an explicit vector loop can contain besides loads and stores:
 * everything fzLLEmitScalarOp widens. */
static bool widenable(FzLoopOpcode c) {
  switch (c) {
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_VIEW:
  case FZ_LOOP_OP_DIM:
  case FZ_LOOP_OP_CONSTANT_BUFFER:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_PREFETCH:
  case FZ_LOOP_OP_SPLAT:
  case FZ_LOOP_OP_UNKNOWN:
    return false;
  default:
    return true;
  }
}

static bool last_stride_is_one(FzType *bt) {
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *s = fzBufferTypeGetStrides(bt);
  return rank > 0 && (!s || s[rank - 1] == 1);
}

/* A memory access's indices: *varying when one depends on the loop; it
 * qualifies when only the last one does and it is the index itself. */
static bool access_ok(FzOp *op, size_t first, FzValue *iv, FzPtrMap *var,
                      bool *varying) {
  size_t n = fzOpGetNumOperands(op);
  FzValue *buf = fzOpGetOperand(op, first - 1);
  *varying = false;
  for (size_t k = first; k < n; ++k)
    if (fzPtrMapContains(var, fzOpGetOperand(op, k)))
      *varying = true;
  if (!*varying)
    return true;
  for (size_t k = first; k + 1 < n; ++k)
    if (fzPtrMapContains(var, fzOpGetOperand(op, k)))
      return false;
  return n > first && fzOpGetOperand(op, n - 1) == iv &&
         last_stride_is_one(fzValueGetType(buf));
}

/* Whether the access's indices but the last are available before body
 * runs (the anchor's address is computed before the loop). */
static bool indices_before(FzOp *op, size_t first, FzBlock *body) {
  size_t n = fzOpGetNumOperands(op);
  for (size_t k = first; k + 1 < n; ++k) {
    FzValue *x = fzOpGetOperand(op, k);
    if (!fzValueIsBlockArgument(x) && fzValueGetParentBlock(x) == body)
      return false;
  }
  return true;
}

/* Decides whether body qualifies; fills var (varying values and ops) and
 * *anchor (the first contiguous store whose other indices are known
 * before the loop). */
static bool analyze(FzBlock *body, FzValue *iv, FzPtrMap *var,
                    FzOp **anchor) {
  *anchor = NULL;
  if (!fzPtrMapPut(var, iv, iv))
    return false;
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (op == last && c == FZ_LOOP_OP_YIELD)
      break;
    if (c == FZ_LOOP_OP_BARRIER)
      continue;
    if (!widenable(c) || fzOpGetNumResults(op) > 1 ||
        fzOpGetNumRegions(op) != 0)
      return false;
    for (size_t r = 0; r < fzOpGetNumResults(op); ++r) {
      FzTypeKind k = fzTypeGetKind(fzValueGetType(fzOpGetResult(op, r)));
      if (k == FZ_TYPE_VECTOR || k == FZ_TYPE_BUFFER)
        return false;
    }
    bool varying = false;
    if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE) {
      size_t first = c == FZ_LOOP_OP_LOAD ? 1 : 2;
      if (!access_ok(op, first, iv, var, &varying))
        return false;
      if (c == FZ_LOOP_OP_STORE) {
        if (!varying) /* the same element every iteration */
          return false;
        if (!*anchor && indices_before(op, first, body))
          *anchor = op;
      }
    } else {
      for (size_t k = 0; k < fzOpGetNumOperands(op); ++k)
        if (fzPtrMapContains(var, fzOpGetOperand(op, k)))
          varying = true;
    }
    if (varying) {
      if (!fzPtrMapPut(var, op, op))
        return false;
      if (fzOpGetNumResults(op) == 1 &&
          !fzPtrMapPut(var, fzOpGetResult(op, 0), op))
        return false;
    }
  }
  return *anchor != NULL;
}

/* Whether par (the whole outlined nest) loads from root anywhere. */
typedef struct RootSearch {
  FzLLEmitter *E;
  const void *root;
  bool found;
} RootSearch;

static FzWalkResult find_load(FzOp *op, void *ud) {
  RootSearch *s = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if ((c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD) &&
      fzLLGetRoot(s->E, fzOpGetOperand(op, 0)) == s->root) {
    s->found = true;
    return FZ_WALK_INTERRUPT;
  }
  return FZ_WALK_ADVANCE;
}

static bool streaming(FzLLEmitter *E, FzOp *par, FzOp *anchor) {
  FzValue *buf = fzOpGetOperand(anchor, 1);
  if (E->opts.nontemporalMinBytes <= 0 ||
      fzLLBufferSpanBytes(fzValueGetType(buf)) < E->opts.nontemporalMinBytes)
    return false;
  /* Only x86 is known to lower aligned !nontemporal vector stores. */
  if (!E->features || !strstr(E->features, "+sse2"))
    return false;
  RootSearch s = {E, fzLLGetRoot(E, buf), false};
  fzOpWalk(par, FZ_WALK_PRE_ORDER, find_load, &s);
  return !s.found;
}

static size_t storage_bytes(FzType *elt) {
  size_t s = fzTypeGetStorageSize(elt);
  return s ? s : 1;
}

/* The address of the access op's element with the loop index at j
 * (scalar); other indices are uniform. */
static LLVMValueRef address(FzLLEmitter *E, FzOp *op, size_t first,
                            FzValue *iv, LLVMValueRef ivScalar) {
  FzValue *buf = fzOpGetOperand(op, first - 1);
  FzType *bt = fzValueGetType(buf);
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *st = fzBufferTypeGetStrides(bt);
  LLVMValueRef lin = NULL, base = fzLLGet(E, buf);
  if (!base)
    return NULL;
  int64_t acc = 1;
  int64_t strides[64];
  if (rank > 64)
    return NULL;
  for (size_t k = rank; k-- > 0;) {
    strides[k] = st ? st[k] : acc;
    acc *= fzShapedTypeGetDim(bt, k) > 0 ? fzShapedTypeGetDim(bt, k) : 1;
  }
  for (size_t k = 0; k < rank; ++k) {
    FzValue *x = fzOpGetOperand(op, first + k);
    LLVMValueRef i = x == iv ? ivScalar : fzLLGet(E, x);
    if (!i)
      return NULL;
    if (strides[k] == 0)
      continue;
    LLVMValueRef term =
        strides[k] == 1 ? i
                        : LLVMBuildNSWMul(E->b, i, fzLLIndex(E, strides[k]), "");
    lin = lin ? LLVMBuildNSWAdd(E->b, lin, term, "") : term;
  }
  if (!lin)
    return base;
  LLVMTypeRef elt = fzLLStorageType(E, fzShapedTypeGetElementType(bt));
  return LLVMBuildInBoundsGEP2(E->b, elt, base, &lin, 1, "");
}

static bool is_i1(FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(t) == 1;
}

typedef struct VecLoop {
  FzValue *iv;
  LLVMValueRef ivScalar; /* lb + j */
  FzOp *anchor;
  unsigned anchorAlign;
  bool nontemporal;
} VecLoop;

static bool emit_vector_access(FzLLEmitter *E, FzOp *op, const VecLoop *v) {
  bool load = fzLoopGetOpcode(op) == FZ_LOOP_OP_LOAD;
  size_t first = load ? 1 : 2;
  FzValue *buf = fzOpGetOperand(op, first - 1);
  FzType *elt = fzShapedTypeGetElementType(fzValueGetType(buf));
  LLVMTypeRef mem = LLVMVectorType(fzLLStorageType(E, elt), E->vecLanes);
  LLVMValueRef p = address(E, op, first, v->iv, v->ivScalar);
  if (!p)
    return false;
  unsigned align = (unsigned)storage_bytes(elt);
  if (load) {
    LLVMValueRef x = LLVMBuildLoad2(E->b, mem, p, "");
    LLVMSetAlignment(x, align);
    if (is_i1(elt))
      x = LLVMBuildTrunc(E->b, x, LLVMVectorType(E->tI1, E->vecLanes), "");
    fzLLSet(E, fzOpGetResult(op, 0), x);
    return true;
  }
  LLVMValueRef x = fzLLGet(E, fzOpGetOperand(op, 0));
  if (!x)
    return false;
  if (LLVMGetTypeKind(LLVMTypeOf(x)) != LLVMVectorTypeKind) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), E->vecLanes);
    x = LLVMBuildInsertElement(E->b, LLVMGetPoison(vt), x,
                               LLVMConstInt(E->tI32, 0, 0), "");
    x = LLVMBuildShuffleVector(
        E->b, x, LLVMGetPoison(vt),
        LLVMConstNull(LLVMVectorType(E->tI32, E->vecLanes)), "");
  }
  if (is_i1(elt))
    x = LLVMBuildZExt(E->b, x, mem, "");
  LLVMValueRef s = LLVMBuildStore(E->b, x, p);
  if (op == v->anchor) {
    LLVMSetAlignment(s, v->anchorAlign);
    if (v->nontemporal) {
      LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(E->tI32, 1, 0));
      LLVMSetMetadata(s, LLVMGetMDKindIDInContext(E->llctx, "nontemporal", 11),
                      LLVMMetadataAsValue(E->llctx,
                                          LLVMMDNodeInContext2(E->llctx,
                                                               &one, 1)));
      E->usedNontemporal = true;
    }
  } else {
    LLVMSetAlignment(s, align);
  }
  return true;
}

/* One W-lane iteration of body at index j. */
static bool emit_vector_body(FzLLEmitter *E, FzBlock *body, VecLoop *v,
                             int64_t lb, LLVMValueRef j) {
  v->ivScalar = LLVMBuildNSWAdd(E->b, fzLLIndex(E, lb), j, "");
  LLVMValueRef lanes[64];
  for (unsigned k = 0; k < E->vecLanes; ++k)
    lanes[k] = LLVMConstInt(E->tI64, k, 0);
  LLVMTypeRef vt = LLVMVectorType(E->tI64, E->vecLanes);
  LLVMValueRef ivv = LLVMBuildInsertElement(E->b, LLVMGetPoison(vt),
                                            v->ivScalar,
                                            LLVMConstInt(E->tI32, 0, 0), "");
  ivv = LLVMBuildShuffleVector(E->b, ivv, LLVMGetPoison(vt),
                               LLVMConstNull(LLVMVectorType(E->tI32,
                                                            E->vecLanes)),
                               "");
  ivv = LLVMBuildAdd(E->b, ivv, LLVMConstVector(lanes, E->vecLanes), "");
  fzLLSet(E, v->iv, ivv);
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op && !E->failed;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (op == last && c == FZ_LOOP_OP_YIELD)
      break;
    bool ok = true;
    if (c == FZ_LOOP_OP_BARRIER)
      continue;
    if ((c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE) &&
        fzPtrMapContains(E->varying, op))
      ok = emit_vector_access(E, op, v);
    else if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE)
      ok = fzLLEmitMemoryOp(E, op, c);
    else
      ok = fzLLEmitScalarOp(E, op, c);
    if (!ok)
      return false;
  }
  return !E->failed;
}

/* for (j = lo; j < hi; ++j) body, scalar. */
static bool emit_scalar_range(FzLLEmitter *E, FzBlock *body, FzValue *iv,
                              int64_t lb, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  LLVMBasicBlockRef head =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "tail");
  LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "");
  LLVMBuildBr(E->b, head);
  LLVMPositionBuilderAtEnd(E->b, head);
  LLVMValueRef j = LLVMBuildPhi(E->b, E->tI64, "j");
  LLVMAddIncoming(j, &lo, &pre, 1);
  LLVMBuildCondBr(E->b, LLVMBuildICmp(E->b, LLVMIntSLT, j, hi, ""), bb, exit);
  LLVMPositionBuilderAtEnd(E->b, bb);
  fzLLSet(E, iv, LLVMBuildNSWAdd(E->b, fzLLIndex(E, lb), j, ""));
  if (!fzLLEmitBlock(E, body, true))
    return false;
  LLVMValueRef next = LLVMBuildNSWAdd(E->b, j, fzLLIndex(E, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
  LLVMBuildBr(E->b, head);
  LLVMAddIncoming(j, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(E->b, exit);
  return true;
}

static LLVMValueRef smin(FzLLEmitter *E, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  LLVMTypeRef ty = E->tI64;
  return fzLLCallIntrinsic(E, "llvm.smin", &ty, 1, args, 2);
}

bool fzLLEmitVectorLoop(FzLLEmitter *E, FzOp *par, FzBlock *body,
                        FzValue *ivArg, int64_t lb, LLVMValueRef lo,
                        LLVMValueRef hi) {
  /* A body with run-time checks (a gather, an integer division) stays
   * scalar: a check's branch has no vector form here. */
  if (!E->opts.explicitVectors || E->varying ||
      fzLLBlockNeedsChecks(E, body))
    return false;
  FzPtrMap var;
  fzPtrMapInit(&var, E->ctx);
  VecLoop v;
  memset(&v, 0, sizeof v);
  v.iv = ivArg;
  bool ok = analyze(body, ivArg, &var, &v.anchor);
  FzType *elt =
      ok ? fzShapedTypeGetElementType(
               fzValueGetType(fzOpGetOperand(v.anchor, 1)))
         : NULL;
  size_t esz = elt ? storage_bytes(elt) : 1;
  unsigned bits = E->opts.preferVectorWidth;
  if (bits == 0)
    bits = E->features && strstr(E->features, "+avx512f") ? 512
           : E->features && strstr(E->features, "+avx")   ? 256
                                                          : 128;
  unsigned lanes = (unsigned)(bits / 8 / esz);
  if (!ok || lanes < 2 || lanes > 64 || esz > 8) {
    fzPtrMapFree(&var);
    return false;
  }
  v.anchorAlign = lanes * esz < 64 ? (unsigned)(lanes * esz) : 64;
  v.nontemporal = streaming(E, par, v.anchor);

  /* ja: the first j >= lo whose anchor element is 64-byte aligned (hi
   * when the buffer is not even element-aligned). */
  fzLLSet(E, ivArg, LLVMBuildNSWAdd(E->b, fzLLIndex(E, lb), lo, ""));
  VecLoop at = v;
  at.ivScalar = fzLLGet(E, ivArg);
  LLVMValueRef p0 = address(E, v.anchor, 2, ivArg, at.ivScalar);
  if (!p0) {
    fzPtrMapFree(&var);
    return false;
  }
  LLVMValueRef addr = LLVMBuildPtrToInt(E->b, p0, E->tI64, "");
  LLVMValueRef mis = LLVMBuildAnd(E->b, addr, fzLLIndex(E, 63), "");
  LLVMValueRef gapBytes = LLVMBuildAnd(
      E->b, LLVMBuildSub(E->b, fzLLIndex(E, 64), mis, ""), fzLLIndex(E, 63),
      "");
  LLVMValueRef peel =
      LLVMBuildUDiv(E->b, gapBytes, fzLLIndex(E, (int64_t)esz), "");
  LLVMValueRef odd = LLVMBuildICmp(
      E->b, LLVMIntNE,
      LLVMBuildAnd(E->b, addr, fzLLIndex(E, (int64_t)esz - 1), ""),
      fzLLIndex(E, 0), "");
  LLVMValueRef ja = smin(E, LLVMBuildNSWAdd(E->b, lo, peel, ""), hi);
  ja = LLVMBuildSelect(E->b, odd, hi, ja, "");
  LLVMValueRef n = LLVMBuildSub(E->b, hi, ja, "");
  LLVMValueRef nv = LLVMBuildAnd(E->b, n, fzLLIndex(E, -(int64_t)lanes), "");
  LLVMValueRef jb = LLVMBuildSelect(
      E->b, LLVMBuildICmp(E->b, LLVMIntSGT, n, fzLLIndex(E, 0), ""),
      LLVMBuildNSWAdd(E->b, ja, nv, ""), ja, "");

  ok = emit_scalar_range(E, body, ivArg, lb, lo, ja);
  if (ok) {
    /* Main loop: j = ja, ja + W, ... < jb. */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
    LLVMBasicBlockRef head =
        LLVMAppendBasicBlockInContext(E->llctx, E->fn, "vec");
    LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "");
    LLVMBasicBlockRef exit =
        LLVMAppendBasicBlockInContext(E->llctx, E->fn, "");
    LLVMBuildBr(E->b, head);
    LLVMPositionBuilderAtEnd(E->b, head);
    LLVMValueRef j = LLVMBuildPhi(E->b, E->tI64, "j");
    LLVMAddIncoming(j, &ja, &pre, 1);
    LLVMBuildCondBr(E->b, LLVMBuildICmp(E->b, LLVMIntSLT, j, jb, ""), bb,
                    exit);
    LLVMPositionBuilderAtEnd(E->b, bb);
    E->varying = &var;
    E->vecLanes = lanes;
    ok = emit_vector_body(E, body, &v, lb, j);
    E->varying = NULL;
    E->vecLanes = 0;
    if (ok) {
      LLVMValueRef next =
          LLVMBuildNSWAdd(E->b, j, fzLLIndex(E, (int64_t)lanes), "");
      LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
      LLVMBuildBr(E->b, head);
      LLVMAddIncoming(j, &next, &latch, 1);
      LLVMPositionBuilderAtEnd(E->b, exit);
      ok = emit_scalar_range(E, body, ivArg, lb, jb, hi);
    }
  }
  fzPtrMapFree(&var);
  if (!ok)
    E->failed = true;
  return true;
}

void fzLLEmitStoreFence(FzLLEmitter *E) {
  if (!E->usedNontemporal)
    return;
  fzLLCallIntrinsic(E, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
  E->usedNontemporal = false;
}
