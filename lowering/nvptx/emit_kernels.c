/* lowering/nvptx/emit_kernels.c - loop-level functions to NVPTX kernels
 * (the mapping is documented in fz/gpu.h).
 *
 * The body of each kernel is translated by the CPU back end's emitter
 * (lowering/llvm/emit_internal.h: fzLLEmitBlock and the per-op
 * emitters), which is target independent below the function level; this
 * file adds what differs on the GPU: the kernel signature and metadata,
 * the thread-index mapping with its grid-stride loop, and the split of a
 * function into kernels plus a launch plan (FzGpuFunction).
 *
 * Invariants: every kernel of a function takes the same parameters (the
 * function's arguments, then its top-level temporaries), so the runtime
 * passes one pointer array to all of them. Ownership: the LLVM module
 * belongs to the caller of fzNvTranslateModule; the plan's arrays are
 * malloc'ed and freed by fzGpuProgramDestroy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static bool is_named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

/*===--- Per-function state -----------------------------------------------===*/

typedef struct FnState {
  FzOp *func;
  FzBlock *body;
  size_t numArgs, numIn;
  FzPtrVec temps;   /* FzValue* results of top-level loop.alloc */
  FzPtrMap needed;  /* top-level setup op -> non-NULL: used by the kernel */
  FzGpuFunction *plan;
} FnState;

/* Index among the roots (arguments then temporaries) of buffer v, or -1
 * when v is not a root. */
static long root_index(FnState *S, FzValue *v) {
  if (fzValueIsBlockArgument(v) && fzValueGetParentBlock(v) == S->body) {
    for (size_t i = 0; i < S->numArgs; ++i)
      if (fzBlockGetArgument(S->body, i) == v)
        return (long)i;
    return -1;
  }
  for (size_t i = 0; i < S->temps.len; ++i)
    if (S->temps.data[i] == v)
      return (long)(S->numArgs + i);
  return -1;
}

/* Follows views back to the root buffer. */
static FzValue *trace_root(FzValue *v) {
  for (FzOp *d = fzValueGetDefiningOp(v);
       d && fzLoopGetOpcode(d) == FZ_LOOP_OP_VIEW;
       d = fzValueGetDefiningOp(v))
    v = fzOpGetOperand(d, 0);
  return v;
}

static bool is_setup_op(FzLoopOpcode c) {
  switch (c) {
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_UNKNOWN:
    return false;
  default:
    return true;
  }
}

/* Marks the top-level setup op defining v (and what it uses) as needed.
 * False after an error (v comes from something a kernel cannot redo). */
static bool need_value(FzLLEmitter *E, FnState *S, FzValue *v, FzOp *user) {
  if (root_index(S, v) >= 0)
    return true;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzOpGetBlock(def) != S->body)
    return true; /* defined inside the nest */
  if (fzPtrMapContains(&S->needed, def))
    return true;
  if (!is_setup_op(fzLoopGetOpcode(def)))
    return fzLLError(E, user,
                     "emit-ptx: this op uses a value computed outside any "
                     "loop.parallel by an op the GPU path cannot recompute "
                     "in a kernel yet");
  if (!fzPtrMapPut(&S->needed, def, def))
    return E->failed = true, false;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!need_value(E, S, fzOpGetOperand(def, i), def))
      return false;
  return true;
}

typedef struct NestScan {
  FzLLEmitter *E;
  FnState *S;
  FzOp *par;
  bool straightLine;  /* no nested loops or allocations */
  size_t widestBytes; /* largest element size loaded or stored */
  bool *touched;      /* roots the nest accesses */
  bool ok;
} NestScan;

static bool defined_inside(FzValue *v, FzOp *par) {
  FzBlock *b = fzValueGetParentBlock(v);
  for (FzOp *p = b ? fzBlockGetParentOp(b) : NULL; p; p = fzOpGetParentOp(p))
    if (p == par)
      return true;
  return false;
}

static FzWalkResult scan_nest(FzOp *op, void *ud) {
  NestScan *n = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (op != n->par && (c == FZ_LOOP_OP_FOR || c == FZ_LOOP_OP_PARALLEL ||
                       c == FZ_LOOP_OP_ALLOC))
    n->straightLine = false;
  if (((c == FZ_LOOP_OP_SIN || c == FZ_LOOP_OP_COS) && !n->E->libdevice) ||
      c == FZ_LOOP_OP_UNKNOWN) {
    FzStringRef nm = fzIdentGetString(fzOpGetName(op));
    n->ok = fzLLError(n->E, op,
                      "emit-ptx: '%.*s' is not supported on the GPU yet",
                      (int)nm.length, nm.data);
    return FZ_WALK_INTERRUPT;
  }
  if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE ||
      c == FZ_LOOP_OP_VECTOR_LOAD || c == FZ_LOOP_OP_VECTOR_STORE) {
    FzValue *buf = fzOpGetOperand(op, fzLoopMemGetBufferOperand(op));
    size_t sz =
        fzTypeGetStorageSize(fzShapedTypeGetElementType(fzValueGetType(buf)));
    if (sz > n->widestBytes)
      n->widestBytes = sz;
    long r = root_index(n->S, trace_root(buf));
    if (r >= 0)
      n->touched[r] = true;
  }
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (!defined_inside(v, n->par) && !need_value(n->E, n->S, v, op)) {
      n->ok = false;
      return FZ_WALK_INTERRUPT;
    }
  }
  return FZ_WALK_ADVANCE;
}

/*===--- Kernels ----------------------------------------------------------===*/

static LLVMValueRef sreg(FzLLEmitter *E, const char *name) {
  return fzLLCallIntrinsic(E, name, NULL, 0, NULL, 0);
}

static void add_annotation(FzLLEmitter *E, LLVMValueRef fn, const char *key,
                           int value) {
  LLVMMetadataRef md[3] = {
      LLVMValueAsMetadata(fn),
      LLVMMDStringInContext2(E->llctx, key, strlen(key)),
      LLVMValueAsMetadata(LLVMConstInt(E->tI32, (unsigned)value, 0))};
  LLVMAddNamedMetadataOperand(
      E->mod, "nvvm.annotations",
      LLVMMetadataAsValue(E->llctx, LLVMMDNodeInContext2(E->llctx, md, 3)));
}

/* Declares kernel `name` taking one pointer per root. */
static LLVMValueRef declare_kernel(FzLLEmitter *E, FnState *S,
                                   const char *name, unsigned blockSize,
                                   const bool *touched) {
  size_t numRoots = S->numArgs + S->temps.len;
  LLVMTypeRef *params = calloc(numRoots + 1, sizeof *params);
  if (!params)
    return NULL;
  for (size_t i = 0; i < numRoots; ++i)
    params[i] = E->tPtr;
  LLVMValueRef fn = LLVMAddFunction(
      E->mod, name,
      LLVMFunctionType(E->tVoid, params, (unsigned)numRoots, 0));
  free(params);
  LLVMSetFunctionCallConv(fn, 71 /* CallingConv::PTX_Kernel */);
  fzLLSetFunctionAttrs(E, fn);
  for (size_t i = 0; i < numRoots; ++i) {
    unsigned idx = (unsigned)i + 1;
    FzType *t = i < S->numArgs
                    ? fzValueGetType(fzBlockGetArgument(S->body, i))
                    : fzValueGetType(S->temps.data[i - S->numArgs]);
    fzLLAddAttr(E, fn, idx, "noalias", 0);
    fzLLAddAttr(E, fn, idx, "nocapture", 0);
    fzLLAddAttr(E, fn, idx, "noundef", 0);
    fzLLAddAttr(E, fn, idx, "align", 16);
    int64_t span = fzLLBufferSpanBytes(t);
    if (span > 0)
      fzLLAddAttr(E, fn, idx, "dereferenceable", (uint64_t)span);
    if (i < S->numIn || !touched[i])
      fzLLAddAttr(E, fn, idx, "readonly", 0);
  }
  add_annotation(E, fn, "kernel", 1);
  add_annotation(E, fn, "maxntidx", (int)blockSize);
  add_annotation(E, fn, "maxntidy", 1);
  add_annotation(E, fn, "maxntidz", 1);
  return fn;
}

/* The grid-stride loop over `items` work items; each runs `vec`
 * consecutive iterations of the last dimension. */
static bool emit_kernel_body(FzLLEmitter *E, FzOp *par, const int64_t *lb,
                             const int64_t *step, const int64_t *trips,
                             size_t n, unsigned vec, int64_t items) {
  bool narrow = items * (int64_t)vec < ((int64_t)1 << 31);
  LLVMTypeRef ity = narrow ? E->tI32 : E->tI64;
  LLVMValueRef tid = sreg(E, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef ctaid = sreg(E, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef ntid = sreg(E, "llvm.nvvm.read.ptx.sreg.ntid.x");
  LLVMValueRef nctaid = sreg(E, "llvm.nvvm.read.ptx.sreg.nctaid.x");
  if (!narrow) {
    tid = LLVMBuildZExt(E->b, tid, ity, "");
    ctaid = LLVMBuildZExt(E->b, ctaid, ity, "");
    ntid = LLVMBuildZExt(E->b, ntid, ity, "");
    nctaid = LLVMBuildZExt(E->b, nctaid, ity, "");
  }
  LLVMValueRef start =
      LLVMBuildNUWAdd(E->b, LLVMBuildNUWMul(E->b, ctaid, ntid, ""), tid, "");
  LLVMValueRef stride = LLVMBuildNUWMul(E->b, nctaid, ntid, "");
  LLVMValueRef total = LLVMConstInt(ity, (unsigned long long)items, 0);

  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(E->llctx, E->fn,
                                                         "grid");
  LLVMBasicBlockRef bodyBB = LLVMAppendBasicBlockInContext(E->llctx, E->fn,
                                                           "item");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(E->llctx, E->fn,
                                                         "done");
  LLVMBuildBr(E->b, head);
  LLVMPositionBuilderAtEnd(E->b, head);
  LLVMValueRef t = LLVMBuildPhi(E->b, ity, "t");
  LLVMAddIncoming(t, &start, &pre, 1);
  LLVMBuildCondBr(E->b, LLVMBuildICmp(E->b, LLVMIntULT, t, total, ""), bodyBB,
                  exit);
  LLVMPositionBuilderAtEnd(E->b, bodyBB);

  /* Delinearize: the last dimension counts items of `vec` iterations. */
  FzBlock *body = fzLoopGetBody(par);
  LLVMValueRef q = t, k[64];
  for (size_t d = n; d-- > 0;) {
    int64_t tr = d == n - 1 ? trips[d] / vec : trips[d];
    if (d > 0) {
      LLVMValueRef c = LLVMConstInt(ity, (unsigned long long)tr, 0);
      k[d] = LLVMBuildURem(E->b, q, c, "");
      q = LLVMBuildUDiv(E->b, q, c, "");
    } else {
      k[d] = q;
    }
    if (narrow)
      k[d] = LLVMBuildZExt(E->b, k[d], E->tI64, "");
  }
  for (size_t d = 0; d + 1 < n; ++d)
    fzLLSet(E, fzBlockGetArgument(body, d),
            LLVMBuildNSWAdd(E->b, fzLLIndex(E, lb[d]),
                            LLVMBuildNSWMul(E->b, k[d],
                                            fzLLIndex(E, step[d]), ""),
                            ""));
  LLVMValueRef base =
      LLVMBuildNSWMul(E->b, k[n - 1], fzLLIndex(E, (int64_t)vec), "");
  if (vec == 1) {
    fzLLSet(E, fzBlockGetArgument(body, n - 1),
            LLVMBuildNSWAdd(E->b, fzLLIndex(E, lb[n - 1]),
                            LLVMBuildNSWMul(E->b, base,
                                            fzLLIndex(E, step[n - 1]), ""),
                            ""));
    if (!fzLLEmitBlock(E, body, true))
      return false;
  } else {
    /* vec > 1 only for straight-line bodies: loads of the vec iterations
     * first, stores last, so that they form 16-byte accesses. */
    FzNvUnroll U;
    if (!fzNvUnrollInit(&U, E, body, n, vec))
      return false;
    FzValue *iv = fzBlockGetArgument(body, n - 1);
    bool ok = true;
    for (unsigned ph = 0; ph < 3 && ok; ++ph)
      for (unsigned u = 0; u < vec && ok; ++u) {
        LLVMValueRef ivVal = NULL;
        if (ph == 0) {
          LLVMValueRef j = LLVMBuildNSWAdd(E->b, base, fzLLIndex(E, u), "");
          ivVal = LLVMBuildNSWAdd(
              E->b, fzLLIndex(E, lb[n - 1]),
              LLVMBuildNSWMul(E->b, j, fzLLIndex(E, step[n - 1]), ""), "");
        }
        ok = fzNvUnrollEmit(&U, u, ph, &iv, &ivVal, ph == 0 ? 1 : 0);
      }
    fzNvUnrollFree(&U);
    if (!ok)
      return false;
  }
  LLVMValueRef next = LLVMBuildNUWAdd(E->b, t, stride, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
  LLVMBuildBr(E->b, head);
  LLVMAddIncoming(t, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(E->b, exit);
  LLVMBuildRetVoid(E->b);
  return true;
}

/* Loads through a read-only kernel parameter get !invariant.load, so
 * that GVN may reuse them across barriers and shuffles (a row read in
 * several phases stays in registers). */
static void mark_invariant_loads(FzLLEmitter *E, LLVMValueRef fn,
                                 const bool *readonly, size_t numParams) {
  unsigned kind = LLVMGetMDKindIDInContext(E->llctx, "invariant.load", 14);
  LLVMValueRef empty =
      LLVMMetadataAsValue(E->llctx, LLVMMDNodeInContext2(E->llctx, NULL, 0));
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
         in = LLVMGetNextInstruction(in)) {
      if (LLVMGetInstructionOpcode(in) != LLVMLoad)
        continue;
      LLVMValueRef ptr = LLVMGetOperand(in, 0);
      while (LLVMIsAGetElementPtrInst(ptr) || LLVMIsAConstantExpr(ptr))
        ptr = LLVMGetOperand(ptr, 0);
      if (!LLVMIsAArgument(ptr))
        continue;
      for (size_t i = 0; i < numParams; ++i)
        if (LLVMGetParam(fn, (unsigned)i) == ptr) {
          if (readonly[i])
            LLVMSetMetadata(in, kind, empty);
          break;
        }
    }
}

static bool emit_kernel(FzLLEmitter *E, FnState *S, FzOp *par,
                        const FzGpuOptions *o, FzGpuKernel *out) {
  FzNvNestPlan *plan = malloc(sizeof *plan);
  if (!plan)
    return E->failed = true, false;
  size_t numRoots = S->numArgs + S->temps.len;
  NestScan scan = {E, S, par, true, 1, calloc(numRoots + 1, sizeof(bool)),
                   true};
  if (!scan.touched) {
    free(plan);
    return E->failed = true, false;
  }
  fzPtrMapFree(&S->needed);
  fzPtrMapInit(&S->needed, E->ctx);
  fzOpWalk(par, FZ_WALK_PRE_ORDER, scan_nest, &scan);
  bool ok = scan.ok;
  if (ok && !fzNvPlanNest(par, o, scan.widestBytes, scan.straightLine, plan))
    ok = fzLLError(E, par, "emit-ptx: a GPU kernel needs a loop.parallel "
                           "with constant bounds and positive steps");
  if (!ok) {
    free(scan.touched);
    free(plan);
    return false;
  }

  char name[300];
  unsigned index = (unsigned)S->plan->numKernels;
  snprintf(name, sizeof name, "%s_k%u", S->plan->name, index);
  for (char *c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '_'))
      *c = '_';
  LLVMValueRef fn = declare_kernel(E, S, name, plan->blockSize, scan.touched);
  bool grouped = plan->mapping != FZ_NV_MAP_ELEMENTWISE;
  if (fn && grouped) /* barriers and shuffles synchronize */
    LLVMRemoveEnumAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMGetEnumAttributeKindForName("nosync", 6));
  out->name = strdup(name);
  out->mapping = strdup(fzNvMappingName(plan->mapping));
  char why[512];
  fzNvPlanDescribe(plan, why, sizeof why);
  out->plan = strdup(why);
  int64_t numItems = grouped ? plan->numBlocks * plan->blockSize
                             : plan->items / plan->vec;
  int64_t blocks = (numItems + plan->blockSize - 1) / plan->blockSize;
  out->grid[0] = (unsigned)(blocks > 0x7fffffff ? 0x7fffffff : blocks);
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = plan->blockSize;
  out->block[1] = out->block[2] = 1;
  out->numArgs = numRoots;
  out->args = calloc(numRoots + 1, sizeof *out->args);
  for (size_t i = 0; out->args && i < numRoots; ++i) {
    out->args[i].kind = FZ_GPU_ARG_BUFFER;
    out->args[i].root = i;
  }
  out->bytesMoved = 0;
  bool *readonly = calloc(numRoots + 1, sizeof(bool));
  for (size_t i = 0; i < numRoots; ++i) {
    if (scan.touched[i])
      out->bytesMoved += fzLLBufferSpanBytes(
          i < S->numArgs ? fzValueGetType(fzBlockGetArgument(S->body, i))
                         : fzValueGetType(S->temps.data[i - S->numArgs]));
    if (readonly)
      readonly[i] = i < S->numIn || !scan.touched[i];
  }
  free(scan.touched);
  if (!fn || !out->name || !out->plan || !out->mapping || !out->args ||
      !readonly) {
    free(plan);
    free(readonly);
    return E->failed = true, false;
  }

  /* Fresh value maps: roots are parameters; needed setup ops re-run. */
  fzPtrMapFree(&E->values);
  fzPtrMapInit(&E->values, E->ctx);
  fzPtrMapFree(&E->roots);
  fzPtrMapInit(&E->roots, E->ctx);
  E->fn = fn;
  E->entry = LLVMAppendBasicBlockInContext(E->llctx, fn, "entry");
  LLVMPositionBuilderAtEnd(E->b, E->entry);
  for (size_t i = 0; i < numRoots; ++i) {
    FzValue *v = i < S->numArgs ? fzBlockGetArgument(S->body, i)
                                : S->temps.data[i - S->numArgs];
    fzLLSet(E, v, LLVMGetParam(fn, (unsigned)i));
    fzLLSetRoot(E, v, v);
  }
  for (FzOp *op = fzBlockGetFirstOp(S->body); op && op != par && ok;
       op = fzOpGetNextInBlock(op)) {
    if (!fzPtrMapContains(&S->needed, op))
      continue;
    FzLoopOpcode c = fzLoopGetOpcode(op);
    ok = c == FZ_LOOP_OP_VIEW || c == FZ_LOOP_OP_DIM ||
                 c == FZ_LOOP_OP_CONSTANT_BUFFER || c == FZ_LOOP_OP_LOAD ||
                 c == FZ_LOOP_OP_VECTOR_LOAD
             ? fzLLEmitMemoryOp(E, op, c)
             : fzLLEmitScalarOp(E, op, c);
  }
  E->loopDepth = 1; /* nested loop.parallel: serial */
  E->outlined = true;
  if (ok && plan->items == 0)
    LLVMBuildRetVoid(E->b);
  else if (ok && grouped)
    ok = fzNvEmitGroupedNest(E, par, plan);
  else if (ok)
    ok = emit_kernel_body(E, par, plan->lb, plan->step, plan->trips,
                          plan->numDims, plan->vec, plan->items / plan->vec);
  if (ok)
    mark_invariant_loads(E, fn, readonly, numRoots);
  free(readonly);
  free(plan);
  return ok;
}

/*===--- Functions --------------------------------------------------------===*/

static int64_t num_outputs(FzOp *func) {
  FzAttr *a = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  if (!a)
    a = fzOpGetInherentAttr(func, FZ_STR("loop.num_outputs"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                   : 0;
}

static bool translate_function(FzLLEmitter *E, FzOp *func,
                               const FzGpuOptions *o, FzGpuFunction *plan) {
  FnState S;
  memset(&S, 0, sizeof S);
  S.func = func;
  S.body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  S.plan = plan;
  S.numArgs = fzBlockGetNumArguments(S.body);
  int64_t numOut = num_outputs(func);
  if (numOut < 0 || (size_t)numOut > S.numArgs)
    numOut = 0;
  S.numIn = S.numArgs - (size_t)numOut;
  FzStringRef fname = fzSymbolGetName(func);
  plan->name = strndup(fname.data, fname.length);
  plan->numArgs = S.numArgs;
  plan->numOutputs = (size_t)numOut;
  plan->argTypes = calloc(S.numArgs + 1, sizeof *plan->argTypes);
  if (!plan->name || !plan->argTypes)
    return E->failed = true, false;
  for (size_t i = 0; i < S.numArgs; ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(S.body, i));
    plan->argTypes[i] = t;
    if (fzTypeGetKind(t) != FZ_TYPE_BUFFER || !fzShapedTypeHasStaticShape(t))
      return fzLLError(E, func,
                       "emit-ptx: argument #%zu of @%s is not a statically "
                       "shaped buffer (lower the module to the loop level "
                       "first)",
                       i, plan->name);
  }
  fzPtrVecInit(&S.temps, E->ctx);
  fzPtrMapInit(&S.needed, E->ctx);
  E->func = func;
  E->funcName = fname;
  fzPtrMapFree(&E->reductions);
  fzPtrMapInit(&E->reductions, E->ctx);
  fzLLFindReductions(E, func);

  size_t numPar = 0;
  for (FzOp *op = fzBlockGetFirstOp(S.body); op; op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL)
      numPar++;
  for (FzOp *op = fzBlockGetFirstOp(S.body); op; op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_ALLOC) {
      if (fzOpGetNumOperands(op) != 0)
        return fzLLError(E, op, "emit-ptx: dynamically sized 'loop.alloc' "
                                "is not supported on the GPU");
      if (!fzPtrVecPush(&S.temps, fzOpGetResult(op, 0)))
        return E->failed = true, false;
    }
  plan->kernels = calloc(numPar + 1, sizeof *plan->kernels);
  plan->numTemps = S.temps.len;
  plan->tempBytes = calloc(S.temps.len + 1, sizeof *plan->tempBytes);
  if (!plan->kernels || !plan->tempBytes)
    return E->failed = true, false;
  for (size_t i = 0; i < S.temps.len; ++i)
    plan->tempBytes[i] =
        fzLLBufferSpanBytes(fzValueGetType(S.temps.data[i]));

  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(S.body); op && ok;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (c == FZ_LOOP_OP_PARALLEL) {
      ok = emit_kernel(E, &S, op, o, &plan->kernels[plan->numKernels]);
      if (plan->kernels[plan->numKernels].name)
        plan->numKernels++;
    } else if (c == FZ_LOOP_OP_ALLOC || c == FZ_LOOP_OP_DEALLOC ||
               is_setup_op(c)) {
      continue;
    } else if (is_named(op, "func.return") && fzOpGetNumOperands(op) == 0) {
      continue;
    } else {
      FzStringRef nm = fzIdentGetString(fzOpGetName(op));
      ok = fzLLError(E, op,
                     "emit-ptx: '%.*s' outside a loop.parallel is not "
                     "supported on the GPU yet (every top-level nest must be "
                     "a loop.parallel)",
                     (int)nm.length, nm.data);
    }
  }
  fzPtrVecFree(&S.temps);
  fzPtrMapFree(&S.needed);
  return ok && !E->failed;
}

bool fzNvTranslateLoopModule(FzLLEmitter *E, FzOp *module,
                             const FzGpuOptions *o, FzGpuProgram *prog) {
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  size_t numFuncs = 0;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op))
    if (is_named(op, "func.func") &&
        fzRegionGetFirstBlock(fzOpGetRegion(op, 0)))
      numFuncs++;
  prog->functions = calloc(numFuncs + 1, sizeof *prog->functions);
  bool ok = prog->functions != NULL;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op && ok;
       op = fzOpGetNextInBlock(op)) {
    if (!is_named(op, "func.func") ||
        !fzRegionGetFirstBlock(fzOpGetRegion(op, 0)))
      continue;
    E->failed = false;
    ok = translate_function(E, op, o, &prog->functions[prog->numFunctions++]);
  }
  if (ok && numFuncs == 0)
    ok = fzEmitError(E->ctx, fzOpGetLoc(module),
                     "emit-ptx: the module holds no func.func with a body");
  return ok;
}
