/* lowering/llvm/emit_memory.c - buffers in LLVM IR: allocation, views,
 * read-only constants, dims, and (vector) loads and stores.
 *
 * A buffer is a pointer to its element (0, ..., 0); element (i...) is at
 * that pointer + sum(ik * sk) elements, with the strides of its type
 * (row-major when the type has none). Addresses are `getelementptr
 * inbounds` of the element's storage type with an `nsw` linear index,
 * which is what the vectorizer needs to see consecutive accesses.
 *
 * loop.alloc: statically shaped only. Up to kStackBytes it is an alloca
 * in the entry block of the function being emitted (an outlined parallel
 * body gets its own, so each thread has private scratch); larger ones
 * call aligned_alloc / free (64-byte aligned). Each buffer value is
 * mapped to its root (argument, alloc or constant) for the aliasing
 * facts of emit_loops.c.
 */
#include <string.h>

#include "lowering/llvm/emit_internal.h"

enum { kStackBytes = 64 * 1024, kAllocAlign = 64 };

void fzLLSetRoot(FzLLEmitter *E, FzValue *buffer, const void *root) {
  if (!fzPtrMapPut(&E->roots, buffer, (void *)(uintptr_t)root))
    E->failed = true;
}

const void *fzLLGetRoot(FzLLEmitter *E, FzValue *buffer) {
  const void *r = fzPtrMapGet(&E->roots, buffer);
  return r ? r : buffer;
}

static size_t storage_size(FzType *elt) {
  size_t s = fzTypeGetStorageSize(elt);
  return s ? s : 1;
}

/* The strides of a buffer type (its own, or row-major). */
static void buffer_strides(FzType *t, int64_t *out) {
  size_t rank = fzShapedTypeGetRank(t);
  const int64_t *s = fzBufferTypeGetStrides(t);
  int64_t acc = 1;
  for (size_t k = rank; k-- > 0;) {
    out[k] = s ? s[k] : acc;
    int64_t d = fzShapedTypeGetDim(t, k);
    acc *= d > 0 ? d : 1;
  }
}

int64_t fzLLBufferSpanBytes(FzType *t) {
  size_t rank = fzShapedTypeGetRank(t);
  if (rank > FZ_GRAPH_MAX_RANK * 4 || !fzShapedTypeHasStaticShape(t))
    return -1;
  int64_t strides[FZ_GRAPH_MAX_RANK * 4];
  buffer_strides(t, strides);
  int64_t span = 1;
  for (size_t k = 0; k < rank; ++k) {
    int64_t d = fzShapedTypeGetDim(t, k);
    if (d == 0)
      return 0;
    span += (d - 1) * (strides[k] < 0 ? -strides[k] : strides[k]);
  }
  return span * (int64_t)storage_size(fzShapedTypeGetElementType(t));
}

LLVMValueRef fzLLElementPtr(FzLLEmitter *E, FzOp *op, FzValue *buf,
                            size_t firstIndex) {
  size_t rank = fzShapedTypeGetRank(fzValueGetType(buf));
  if (fzOpGetNumOperands(op) != firstIndex + rank) {
    fzLLError(E, op, "emit-llvm: expected %zu indices", rank);
    return NULL;
  }
  return fzLLElementPtrAt(E, op, buf, firstIndex);
}

/* The element's address; `plain`: with no inbounds and no nsw, for an
 * address that may lie outside the buffer (loop.prefetch). */
static LLVMValueRef element_ptr(FzLLEmitter *E, FzOp *op, FzValue *buf,
                                size_t firstIndex, bool plain) {
  FzType *bt = fzValueGetType(buf);
  size_t rank = fzShapedTypeGetRank(bt);
  if (rank > FZ_GRAPH_MAX_RANK * 4 ||
      fzOpGetNumOperands(op) < firstIndex + rank) {
    fzLLError(E, op, "emit-llvm: expected %zu indices", rank);
    return NULL;
  }
  int64_t strides[FZ_GRAPH_MAX_RANK * 4];
  buffer_strides(bt, strides);
  LLVMValueRef base = fzLLGet(E, buf), lin = NULL;
  if (!base)
    return NULL;
  for (size_t k = 0; k < rank; ++k) {
    LLVMValueRef i = fzLLGet(E, fzOpGetOperand(op, firstIndex + k));
    if (!i)
      return NULL;
    if (strides[k] == 0 || (LLVMIsAConstantInt(i) &&
                            LLVMConstIntGetSExtValue(i) == 0))
      continue;
    LLVMValueRef st = fzLLIndex(E, strides[k]);
    LLVMValueRef term = strides[k] == 1 ? i
                        : plain         ? LLVMBuildMul(E->b, i, st, "")
                                        : LLVMBuildNSWMul(E->b, i, st, "");
    lin = !lin    ? term
          : plain ? LLVMBuildAdd(E->b, lin, term, "")
                  : LLVMBuildNSWAdd(E->b, lin, term, "");
  }
  if (!lin)
    return base;
  LLVMTypeRef elt = fzLLStorageType(E, fzShapedTypeGetElementType(bt));
  return plain ? LLVMBuildGEP2(E->b, elt, base, &lin, 1, "")
               : LLVMBuildInBoundsGEP2(E->b, elt, base, &lin, 1, "");
}

LLVMValueRef fzLLElementPtrAt(FzLLEmitter *E, FzOp *op, FzValue *buf,
                              size_t firstIndex) {
  return element_ptr(E, op, buf, firstIndex, false);
}

static bool is_i1(FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(t) == 1;
}

/* The run-time bounds checks of an access (emit_check.c): one per
 * dimension whose index is not known to be inside it, each reporting
 * the index as the loop interpreter does. Returns the conjunction of the
 * checks (the access may run), or NULL when none was needed or after an
 * error (E->failed). */
static LLVMValueRef check_indices(FzLLEmitter *E, FzOp *op, FzValue *buf,
                                  size_t first, unsigned lanes) {
  FzType *bt = fzValueGetType(buf);
  size_t rank = fzShapedTypeGetRank(bt);
  if (fzOpGetNumOperands(op) != first + rank)
    return NULL; /* fzLLElementPtr reports it */
  LLVMValueRef all = NULL;
  for (size_t k = 0; k < rank; ++k) {
    if (!fzLLIndexNeedsCheck(E, op, buf, first, k, lanes))
      continue;
    LLVMValueRef i = fzLLGet(E, fzOpGetOperand(op, first + k));
    if (!i)
      return NULL;
    int64_t dim = fzShapedTypeGetDim(bt, k);
    int64_t extent = k + 1 == rank ? (int64_t)lanes : 1;
    /* 0 <= i <= dim - extent, as one unsigned compare. */
    LLVMValueRef ok =
        dim - extent < 0
            ? LLVMConstInt(E->tI1, 0, 0)
            : LLVMBuildICmp(E->b, LLVMIntULE, i,
                            fzLLIndex(E, dim - extent), "inbounds");
    FzStringRef name = fzIdentGetString(fzOpGetName(op));
    fzLLEmitCheck(E, op, ok, i,
                  "'%.*s' op index %%lld%s is out of bounds for dimension "
                  "%zu (size %lld) of operand #%zu",
                  (int)name.length, name.data,
                  extent > 1 ? " (+ vector lanes)" : "", k, (long long)dim,
                  first - 1);
    if (E->failed)
      return NULL;
    all = all ? LLVMBuildAnd(E->b, all, ok, "") : ok;
  }
  return all;
}

/* Opens `if (ok)` around a guarded access; *join is where it ends. */
static void guard_begin(FzLLEmitter *E, LLVMValueRef ok,
                        LLVMBasicBlockRef *from, LLVMBasicBlockRef *join) {
  LLVMBasicBlockRef then =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "guarded");
  *join = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "guard.end");
  *from = LLVMGetInsertBlock(E->b);
  LLVMBuildCondBr(E->b, ok, then, *join);
  LLVMPositionBuilderAtEnd(E->b, then);
}

static bool emit_load(FzLLEmitter *E, FzOp *op, bool vector) {
  FzValue *buf = fzOpGetOperand(op, 0);
  FzType *elt = fzShapedTypeGetElementType(fzValueGetType(buf));
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  if (vector && fzLLLanes(rt) > FZ_LL_MAX_LANES)
    return fzLLError(E, op, "emit-llvm: vectors of more than %d lanes are "
                            "not supported", FZ_LL_MAX_LANES);
  LLVMValueRef ok = check_indices(E, op, buf, 1, vector ? fzLLLanes(rt) : 1);
  if (E->failed)
    return false;
  LLVMBasicBlockRef from = NULL, join = NULL;
  if (ok)
    guard_begin(E, ok, &from, &join);
  LLVMValueRef p = fzLLElementPtr(E, op, buf, 1);
  if (!p)
    return false;
  LLVMTypeRef mem = fzLLStorageType(E, elt);
  if (vector)
    mem = LLVMVectorType(mem, fzLLLanes(rt));
  LLVMValueRef v = LLVMBuildLoad2(E->b, mem, p, "");
  LLVMSetAlignment(v, (unsigned)storage_size(elt));
  if (is_i1(elt))
    v = LLVMBuildTrunc(E->b, v, fzLLType(E, rt), "");
  if (ok) {
    /* An index out of bounds reads 0 (the run then reports the error). */
    LLVMBasicBlockRef loaded = LLVMGetInsertBlock(E->b);
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(v), "");
    LLVMValueRef vals[2] = {v, LLVMConstNull(LLVMTypeOf(v))};
    LLVMBasicBlockRef blocks[2] = {loaded, from};
    LLVMAddIncoming(phi, vals, blocks, 2);
    v = phi;
  }
  fzLLSet(E, fzOpGetResult(op, 0), v);
  return true;
}

static bool emit_store(FzLLEmitter *E, FzOp *op) {
  FzValue *buf = fzOpGetOperand(op, 1);
  FzType *elt = fzShapedTypeGetElementType(fzValueGetType(buf));
  LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, 0));
  if (!v)
    return false;
  LLVMValueRef ok = check_indices(E, op, buf, 2, fzLLLanes(
      fzValueGetType(fzOpGetOperand(op, 0))));
  if (E->failed)
    return false;
  LLVMBasicBlockRef from = NULL, join = NULL;
  if (ok)
    guard_begin(E, ok, &from, &join);
  LLVMValueRef p = fzLLElementPtr(E, op, buf, 2);
  if (!p)
    return false;
  if (is_i1(elt)) {
    LLVMTypeRef ty = LLVMTypeOf(v);
    LLVMTypeRef mem = LLVMGetTypeKind(ty) == LLVMVectorTypeKind
                          ? LLVMVectorType(E->tI8, LLVMGetVectorSize(ty))
                          : E->tI8;
    v = LLVMBuildZExt(E->b, v, mem, "");
  }
  LLVMValueRef st = LLVMBuildStore(E->b, v, p);
  LLVMSetAlignment(st, (unsigned)storage_size(elt));
  if (ok) {
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, join);
  }
  return true;
}

static LLVMValueRef declare(FzLLEmitter *E, const char *name, LLVMTypeRef ret,
                            LLVMTypeRef *params, unsigned n) {
  LLVMValueRef f = LLVMGetNamedFunction(E->mod, name);
  if (f)
    return f;
  f = LLVMAddFunction(E->mod, name, LLVMFunctionType(ret, params, n, 0));
  fzLLAddAttr(E, f, LLVMAttributeFunctionIndex, "nounwind", 0);
  return f;
}

static bool on_heap(FzType *t) {
  return fzLLBufferSpanBytes(t) > kStackBytes;
}

static bool emit_alloc(FzLLEmitter *E, FzOp *op) {
  FzValue *res = fzOpGetResult(op, 0);
  FzType *t = fzValueGetType(res);
  int64_t bytes = fzLLBufferSpanBytes(t);
  if (bytes < 0 || fzOpGetNumOperands(op) != 0)
    return fzLLError(E, op, "emit-llvm: 'loop.alloc' of a dynamically shaped "
                            "buffer is not supported");
  if (bytes == 0)
    bytes = 1;
  bytes = (bytes + kAllocAlign - 1) / kAllocAlign * kAllocAlign;
  LLVMValueRef p;
  if (!on_heap(t)) {
    /* In the entry block, so that a loop around the alloc reuses it. */
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(E->llctx);
    LLVMValueRef first = LLVMGetFirstInstruction(E->entry);
    if (first)
      LLVMPositionBuilderBefore(eb, first);
    else
      LLVMPositionBuilderAtEnd(eb, E->entry);
    p = LLVMBuildAlloca(eb, LLVMArrayType2(E->tI8, (uint64_t)bytes), "tmp");
    LLVMSetAlignment(p, kAllocAlign);
    LLVMDisposeBuilder(eb);
  } else {
    LLVMTypeRef params[2] = {E->tI64, E->tI64};
    LLVMValueRef fn = declare(E, "aligned_alloc", E->tPtr, params, 2);
    fzLLAddAttr(E, fn, LLVMAttributeReturnIndex, "noalias", 0);
    LLVMValueRef args[2] = {fzLLIndex(E, kAllocAlign), fzLLIndex(E, bytes)};
    p = LLVMBuildCall2(E->b, LLVMFunctionType(E->tPtr, params, 2, 0), fn,
                       args, 2, "heap");
  }
  fzLLSet(E, res, p);
  fzLLSetRoot(E, res, res);
  return true;
}

static bool emit_dealloc(FzLLEmitter *E, FzOp *op) {
  FzValue *buf = fzOpGetOperand(op, 0);
  FzOp *def = fzValueGetDefiningOp(buf);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_ALLOC ||
      !on_heap(fzValueGetType(buf)))
    return true; /* stack memory, or not ours to free */
  LLVMValueRef p = fzLLGet(E, buf);
  if (!p)
    return false;
  LLVMTypeRef param = E->tPtr;
  LLVMValueRef fn = declare(E, "free", E->tVoid, &param, 1);
  LLVMBuildCall2(E->b, LLVMFunctionType(E->tVoid, &param, 1, 0), fn, &p, 1,
                 "");
  return true;
}

static bool emit_view(FzLLEmitter *E, FzOp *op) {
  FzValue *src = fzOpGetOperand(op, 0);
  LLVMValueRef p = fzLLGet(E, src);
  if (!p)
    return false;
  if (fzOpGetNumOperands(op) > 1) {
    LLVMValueRef off = fzLLGet(E, fzOpGetOperand(op, 1));
    if (!off)
      return false;
    /* A data-dependent offset (a gather on the GPU) is checked like an
     * index: the view must lie inside its source's elements. */
    FzType *st = fzValueGetType(src), *vt = fzValueGetType(fzOpGetResult(op, 0));
    int64_t esz = (int64_t)storage_size(fzShapedTypeGetElementType(st));
    int64_t srcSpan = fzLLBufferSpanBytes(st), viewSpan = fzLLBufferSpanBytes(vt);
    if (srcSpan >= 0 && viewSpan > 0 &&
        fzLLValueNeedsCheck(E, fzOpGetOperand(op, 1), srcSpan / esz,
                            viewSpan / esz)) {
      int64_t last = (srcSpan - viewSpan) / esz;
      LLVMValueRef ok = last < 0 ? LLVMConstInt(E->tI1, 0, 0)
                                 : LLVMBuildICmp(E->b, LLVMIntULE, off,
                                                 fzLLIndex(E, last), "");
      fzLLEmitCheck(E, op, ok, off,
                    "'loop.view' op view (offset %%lld) reaches outside its "
                    "source's memory");
      off = LLVMBuildSelect(E->b, ok, off, fzLLIndex(E, 0), "");
    }
    LLVMTypeRef elt = fzLLStorageType(
        E, fzShapedTypeGetElementType(fzValueGetType(src)));
    p = LLVMBuildInBoundsGEP2(E->b, elt, p, &off, 1, "");
  }
  FzValue *res = fzOpGetResult(op, 0);
  fzLLSet(E, res, p);
  fzLLSetRoot(E, res, fzLLGetRoot(E, src));
  return true;
}

static bool emit_dim(FzLLEmitter *E, FzOp *op) {
  FzType *t = fzValueGetType(fzOpGetOperand(op, 0));
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("index"));
  int64_t k = a && fzAttrGetKind(a) == FZ_ATTR_INTEGER
                  ? fzIntegerAttrGetValue(a)
                  : -1;
  if (k < 0 || (size_t)k >= fzShapedTypeGetRank(t) ||
      fzShapedTypeGetDim(t, (size_t)k) == FZ_DYNAMIC)
    return fzLLError(E, op, "emit-llvm: 'loop.dim' of a dynamic or missing "
                            "dimension is not supported");
  fzLLSet(E, fzOpGetResult(op, 0),
          fzLLIndex(E, fzShapedTypeGetDim(t, (size_t)k)));
  return true;
}

static bool emit_constant_buffer(FzLLEmitter *E, FzOp *op) {
  FzValue *res = fzOpGetResult(op, 0);
  FzType *t = fzValueGetType(res);
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("value"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE)
    return fzLLError(E, op, "emit-llvm: 'loop.constant_buffer' needs a dense "
                            "value");
  FzType *elt = fzShapedTypeGetElementType(t);
  size_t esz = storage_size(elt);
  int64_t n = fzShapedTypeGetNumElements(fzAttrGetType(a));
  if (n < 0)
    return fzLLError(E, op, "emit-llvm: dynamically shaped constant");
  size_t bytes = (size_t)n * esz;
  const char *data = fzDenseAttrGetData(a);
  char *full = NULL;
  if (fzDenseAttrIsSplat(a) && n > 1) {
    full = fzMalloc(E->ctx, bytes);
    if (!full)
      return E->failed = true, false;
    for (int64_t i = 0; i < n; ++i)
      memcpy(full + (size_t)i * esz, data, esz);
    data = full;
  }
  LLVMValueRef init = LLVMConstStringInContext(E->llctx, data,
                                               (unsigned)bytes, 1);
  fzFree(E->ctx, full);
  LLVMValueRef g = LLVMAddGlobal(E->mod, LLVMTypeOf(init), "fz.const");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  LLVMSetAlignment(g, kAllocAlign);
  fzLLSet(E, res, g);
  fzLLSetRoot(E, res, res);
  return true;
}

/* llvm.prefetch (read, keep in all levels, data) of the element's
 * address. The indices may lie outside the buffer, so the address is a
 * plain getelementptr (no inbounds, no nsw) and nothing is checked: a
 * prefetch never faults. */
static bool emit_prefetch(FzLLEmitter *E, FzOp *op) {
  FzValue *buf = fzOpGetOperand(op, 0);
  size_t rank = fzShapedTypeGetRank(fzValueGetType(buf));
  if (fzOpGetNumOperands(op) != 1 + rank)
    return fzLLError(E, op, "emit-llvm: expected %zu indices", rank);
  LLVMValueRef p = element_ptr(E, op, buf, 1, true);
  if (!p)
    return false;
  LLVMTypeRef ov = E->tPtr;
  LLVMValueRef args[4] = {p, LLVMConstInt(E->tI32, 0, 0),
                          LLVMConstInt(E->tI32, 3, 0),
                          LLVMConstInt(E->tI32, 1, 0)};
  fzLLCallIntrinsic(E, "llvm.prefetch", &ov, 1, args, 4);
  return true;
}

bool fzLLEmitMemoryOp(FzLLEmitter *E, FzOp *op, FzLoopOpcode code) {
  switch (code) {
  case FZ_LOOP_OP_ALLOC:
    return emit_alloc(E, op);
  case FZ_LOOP_OP_DEALLOC:
    return emit_dealloc(E, op);
  case FZ_LOOP_OP_VIEW:
    return emit_view(E, op);
  case FZ_LOOP_OP_DIM:
    return emit_dim(E, op);
  case FZ_LOOP_OP_CONSTANT_BUFFER:
    return emit_constant_buffer(E, op);
  case FZ_LOOP_OP_LOAD:
    return emit_load(E, op, false);
  case FZ_LOOP_OP_VECTOR_LOAD:
    return emit_load(E, op, true);
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE:
    return emit_store(E, op);
  case FZ_LOOP_OP_PREFETCH:
    return emit_prefetch(E, op);
  default:
    return fzLLError(E, op, "emit-llvm: internal error: not a memory op");
  }
}
