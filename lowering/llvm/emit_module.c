/* lowering/llvm/emit_module.c - loop-level module to LLVM module: the
 * functions, their ABI (fz/lowering.h), and the walk over op lists.
 *
 * Each func.func with a body becomes `void @f(ptr..., ptr %rt)` whose
 * buffer parameters carry what the calling convention of
 * lower-graph-to-loop promises (distinct buffers: noalias; inputs never
 * written: readonly; the alignment the options promise; static sizes:
 * dereferenceable), plus `@f.packed(ptr %buffers, ptr %rt)` for the
 * runtime. A function without a body is skipped.
 *
 * Ownership: the emitter borrows the fz module; the LLVM module and
 * context belong to the caller of fzLLTranslateModule.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

bool fzLLError(FzLLEmitter *E, FzOp *op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(E->ctx, FZ_SEVERITY_ERROR,
                                 op ? fzOpGetLoc(op) : NULL, fmt, ap);
  va_end(ap);
  fzDiagReport(d);
  E->failed = true;
  return false;
}

LLVMValueRef fzLLGet(FzLLEmitter *E, FzValue *v) {
  LLVMValueRef r = fzPtrMapGet(&E->values, v);
  if (!r) {
    FzOp *def = fzValueGetDefiningOp(v);
    fzLLError(E, def, "emit-llvm: internal error: a value is used before "
                      "it was translated");
  }
  return r;
}

void fzLLSet(FzLLEmitter *E, FzValue *v, LLVMValueRef value) {
  if (!fzPtrMapPut(&E->values, v, value))
    E->failed = true;
}

void fzLLAddAttr(FzLLEmitter *E, LLVMValueRef fn, unsigned index,
                 const char *name, uint64_t value) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  if (kind == 0)
    return;
  LLVMAddAttributeAtIndex(fn, index,
                          LLVMCreateEnumAttribute(E->llctx, kind, value));
}

static void add_string_attr(FzLLEmitter *E, LLVMValueRef fn, const char *k,
                            const char *v) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(E->llctx, k, strlen(k), v,
                                                    strlen(v)));
}

void fzLLSetFunctionAttrs(FzLLEmitter *E, LLVMValueRef fn) {
  fzLLAddAttr(E, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  fzLLAddAttr(E, fn, LLVMAttributeFunctionIndex, "nosync", 0);
  fzLLAddAttr(E, fn, LLVMAttributeFunctionIndex, "willreturn", 0);
  if (E->cpu && *E->cpu)
    add_string_attr(E, fn, "target-cpu", E->cpu);
  if (E->features && *E->features)
    add_string_attr(E, fn, "target-features", E->features);
  /* LLVM keeps to 256-bit vectors on AVX-512 machines by default; the
   * math approximations are compute-bound enough to gain from 512. */
  unsigned width = E->opts.preferVectorWidth;
  if (width == 0 && E->features && strstr(E->features, "+avx512f"))
    width = 512;
  if (width) {
    char w[16];
    snprintf(w, sizeof w, "%u", width);
    add_string_attr(E, fn, "prefer-vector-width", w);
  }
  /* --fast-math is the flags on each float op of the loop IR (E->fmf),
   * never the function-level "unsafe-fp-math" / "no-infs-fp-math"
   * attributes: those let the backend fold the math approximations'
   * internal arithmetic too (the exponent shifter's (x + s) - s, whose
   * rounding is the point), which made erf in vector epilogues off by
   * up to 0.08 (tests/lit/cpu/fast-math-epilogue.fuse). */
}

/*===--- The walk over a block ------------------------------------------===*/

static bool is_named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

/* The LLVM function of @name (declared by declare_function). */
static LLVMValueRef lookup_function(FzLLEmitter *E, FzStringRef name) {
  char buf[512];
  if (name.length >= sizeof buf)
    return NULL;
  memcpy(buf, name.data, name.length);
  buf[name.length] = '\0';
  return LLVMGetNamedFunction(E->mod, buf);
}

/* func.call @g(buffers...): g's inputs then its output buffers, which
 * the caller allocated; the thread pool is passed along (NULL inside an
 * outlined parallel body: the call then runs on that thread). */
static bool emit_call(FzLLEmitter *E, FzOp *op) {
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("callee"));
  if (!callee || fzAttrGetKind(callee) != FZ_ATTR_SYMBOL_REF ||
      fzOpGetNumResults(op) != 0)
    return fzLLError(E, op, "emit-llvm: 'func.call' must name its callee "
                            "and return nothing at the loop level");
  LLVMValueRef fn = lookup_function(E, fzSymbolRefAttrGetRoot(callee));
  size_t n = fzOpGetNumOperands(op);
  if (!fn || LLVMCountParams(fn) != n + 1)
    return fzLLError(E, op, "emit-llvm: 'func.call' of an unknown function, "
                            "or with the wrong number of buffers");
  LLVMValueRef *args = fzCalloc(E->ctx, n + 1, sizeof *args);
  if (!args)
    return E->failed = true, false;
  for (size_t i = 0; i < n; ++i)
    if (!(args[i] = fzLLGet(E, fzOpGetOperand(op, i)))) {
      fzFree(E->ctx, args);
      return false;
    }
  args[n] = E->outlined ? LLVMConstPointerNull(E->tPtr) : E->rtArg;
  LLVMBuildCall2(E->b, LLVMGlobalGetValueType(fn), fn, args,
                 (unsigned)n + 1, "");
  fzFree(E->ctx, args);
  return true;
}

bool fzLLEmitBlock(FzLLEmitter *E, FzBlock *block, bool skipTerminator) {
  FzOp *last = fzBlockGetLastOp(block);
  for (FzOp *op = fzBlockGetFirstOp(block); op && !E->failed;
       op = fzOpGetNextInBlock(op)) {
    if (skipTerminator && op == last && fzOpHasTrait(op, FZ_TRAIT_TERMINATOR))
      break;
    FzLoopOpcode code = fzLoopGetOpcode(op);
    bool ok = true;
    switch (code) {
    case FZ_LOOP_OP_FOR:
      ok = fzLLEmitFor(E, op);
      break;
    case FZ_LOOP_OP_PARALLEL:
      ok = fzLLEmitParallel(E, op);
      break;
    case FZ_LOOP_OP_BARRIER:
      /* A loop.parallel iteration runs on one thread from its first
       * phase to its last: the barrier orders nothing more. */
      break;
    case FZ_LOOP_OP_YIELD:
      ok = fzLLError(E, op, "emit-llvm: 'loop.yield' outside the end of a "
                            "loop body");
      break;
    case FZ_LOOP_OP_ALLOC:
    case FZ_LOOP_OP_DEALLOC:
    case FZ_LOOP_OP_VIEW:
    case FZ_LOOP_OP_DIM:
    case FZ_LOOP_OP_CONSTANT_BUFFER:
    case FZ_LOOP_OP_LOAD:
    case FZ_LOOP_OP_STORE:
    case FZ_LOOP_OP_VECTOR_LOAD:
    case FZ_LOOP_OP_VECTOR_STORE:
    case FZ_LOOP_OP_PREFETCH:
      ok = fzLLEmitMemoryOp(E, op, code);
      break;
    case FZ_LOOP_OP_UNKNOWN: {
      if (is_named(op, "func.call")) {
        ok = emit_call(E, op);
        break;
      }
      if (E->emitForeignOp) {
        ok = E->emitForeignOp(E, op);
        break;
      }
      FzStringRef n = fzIdentGetString(fzOpGetName(op));
      ok = fzLLError(E, op,
                     "emit-llvm: '%.*s' has no translation to LLVM IR (only "
                     "loop-dialect ops are; run lower-graph-to-loop first)",
                     (int)n.length, n.data);
      break;
    }
    default:
      ok = fzLLEmitScalarOp(E, op, code);
      break;
    }
    if (!ok)
      return false;
  }
  return !E->failed;
}

/*===--- Functions --------------------------------------------------------===*/

static FzType *function_type(FzOp *func) {
  FzAttr *a = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  return a && fzAttrGetKind(a) == FZ_ATTR_TYPE ? fzTypeAttrGetValue(a) : NULL;
}

/* loop.num_outputs of func; 0 when absent. */
static int64_t num_outputs(FzOp *func) {
  FzAttr *a = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  if (!a)
    a = fzOpGetInherentAttr(func, FZ_STR("loop.num_outputs"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                   : 0;
}

/* Checks that every argument is a statically shaped buffer. */
static bool check_signature(FzLLEmitter *E, FzOp *func, FzBlock *body) {
  FzType *ft = function_type(func);
  if (ft && fzFunctionTypeGetNumResults(ft) != 0)
    return fzLLError(E, func,
                     "emit-llvm: function @%.*s returns values; lower it "
                     "with lower-graph-to-loop (results become output "
                     "buffers)",
                     (int)E->funcName.length, E->funcName.data);
  for (size_t i = 0; i < fzBlockGetNumArguments(body); ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(body, i));
    if (fzTypeGetKind(t) != FZ_TYPE_BUFFER || !fzShapedTypeHasStaticShape(t))
      return fzLLError(E, func,
                       "emit-llvm: argument #%zu of @%.*s is not a statically "
                       "shaped buffer (the loop-level calling convention "
                       "passes buffers only)",
                       i, (int)E->funcName.length, E->funcName.data);
  }
  return true;
}

static char *name_with_suffix(FzLLEmitter *E, const char *suffix) {
  size_t n = E->funcName.length, s = strlen(suffix);
  char *buf = fzMalloc(E->ctx, n + s + 1);
  if (!buf)
    return NULL;
  memcpy(buf, E->funcName.data, n);
  memcpy(buf + n, suffix, s + 1);
  return buf;
}

/* @f.packed(ptr %buffers, ptr %rt): loads each buffer pointer and calls
 * @f. */
static void emit_packed(FzLLEmitter *E, LLVMValueRef fn, LLVMTypeRef fnTy,
                        size_t numArgs) {
  char *name = name_with_suffix(E, ".packed");
  if (!name)
    return;
  LLVMTypeRef params[2] = {E->tPtr, E->tPtr};
  LLVMTypeRef ty = LLVMFunctionType(E->tVoid, params, 2, 0);
  LLVMValueRef packed = LLVMAddFunction(E->mod, name, ty);
  fzFree(E->ctx, name);
  fzLLSetFunctionAttrs(E, packed);
  LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(E->llctx, packed, "");
  LLVMPositionBuilderAtEnd(E->b, bb);
  LLVMValueRef *args = fzCalloc(E->ctx, numArgs + 1, sizeof *args);
  if (!args) {
    E->failed = true;
    return;
  }
  for (size_t i = 0; i < numArgs; ++i) {
    LLVMValueRef idx = fzLLIndex(E, (int64_t)i);
    LLVMValueRef slot =
        LLVMBuildGEP2(E->b, E->tPtr, LLVMGetParam(packed, 0), &idx, 1, "");
    args[i] = LLVMBuildLoad2(E->b, E->tPtr, slot, "");
  }
  args[numArgs] = LLVMGetParam(packed, 1);
  LLVMBuildCall2(E->b, fnTy, fn, args, (unsigned)numArgs + 1, "");
  LLVMBuildRetVoid(E->b);
  fzFree(E->ctx, args);
}

/* Declares @f(ptr..., ptr %rt) with the ABI's parameter attributes. */
static bool declare_function(FzLLEmitter *E, FzOp *func) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  FzType *ft = function_type(func);
  E->funcName = fzSymbolGetName(func);
  size_t numArgs = body ? fzBlockGetNumArguments(body)
                        : ft ? fzFunctionTypeGetNumInputs(ft) : 0;
  if (body && !check_signature(E, func, body))
    return false;
  int64_t numOut = num_outputs(func);
  if (numOut < 0 || (size_t)numOut > numArgs)
    numOut = 0;
  size_t numIn = numArgs - (size_t)numOut;
  LLVMTypeRef *params = fzCalloc(E->ctx, numArgs + 1, sizeof *params);
  char *name = fzMalloc(E->ctx, E->funcName.length + 1);
  if (!params || !name) {
    fzFree(E->ctx, params);
    fzFree(E->ctx, name);
    E->failed = true;
    return false;
  }
  for (size_t i = 0; i <= numArgs; ++i)
    params[i] = E->tPtr;
  memcpy(name, E->funcName.data, E->funcName.length);
  name[E->funcName.length] = '\0';
  LLVMTypeRef fnTy =
      LLVMFunctionType(E->tVoid, params, (unsigned)numArgs + 1, 0);
  LLVMValueRef fn = LLVMAddFunction(E->mod, name, fnTy);
  fzFree(E->ctx, params);
  fzFree(E->ctx, name);
  fzLLSetFunctionAttrs(E, fn);
  for (size_t i = 0; i < numArgs; ++i) {
    LLVMValueRef p = LLVMGetParam(fn, (unsigned)i);
    char pname[32];
    snprintf(pname, sizeof pname, i < numIn ? "in%zu" : "out%zu",
             i < numIn ? i : i - numIn);
    LLVMSetValueName2(p, pname, strlen(pname));
    unsigned idx = (unsigned)i + 1;
    fzLLAddAttr(E, fn, idx, "noalias", 0);
    fzLLAddAttr(E, fn, idx, "nocapture", 0);
    fzLLAddAttr(E, fn, idx, "noundef", 0);
    fzLLAddAttr(E, fn, idx, "nonnull", 0);
    if (E->opts.alignment > 1)
      fzLLAddAttr(E, fn, idx, "align", E->opts.alignment);
    FzType *t = body ? fzValueGetType(fzBlockGetArgument(body, i))
                     : fzFunctionTypeGetInput(ft, i);
    int64_t span = fzLLBufferSpanBytes(t);
    if (span > 0)
      fzLLAddAttr(E, fn, idx, "dereferenceable", (uint64_t)span);
    if (i < numIn) /* outputs may be read after they are written */
      fzLLAddAttr(E, fn, idx, "readonly", 0);
  }
  LLVMSetValueName2(LLVMGetParam(fn, (unsigned)numArgs), "rt", 2);
  return true;
}

static bool define_function(FzLLEmitter *E, FzOp *func) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  if (!body)
    return true; /* a declaration: defined elsewhere */
  E->func = func;
  E->funcName = fzSymbolGetName(func);
  E->numOutlined = 0;
  E->loopDepth = 0;
  E->outlined = false;
  E->usedNontemporal = false;
  LLVMValueRef fn = lookup_function(E, E->funcName);
  size_t numArgs = fzBlockGetNumArguments(body);
  if (!fn)
    return fzLLError(E, func, "emit-llvm: internal error: @%.*s was not "
                              "declared", (int)E->funcName.length,
                     E->funcName.data);
  fzPtrMapFree(&E->values);
  fzPtrMapInit(&E->values, E->ctx);
  fzPtrMapFree(&E->roots);
  fzPtrMapInit(&E->roots, E->ctx);
  for (size_t i = 0; i < numArgs; ++i) {
    FzValue *arg = fzBlockGetArgument(body, i);
    fzLLSet(E, arg, LLVMGetParam(fn, (unsigned)i));
    fzLLSetRoot(E, arg, arg);
  }
  E->rtArg = LLVMGetParam(fn, (unsigned)numArgs);
  E->fn = fn;
  E->entry = LLVMAppendBasicBlockInContext(E->llctx, fn, "entry");
  LLVMPositionBuilderAtEnd(E->b, E->entry);
  fzPtrMapFree(&E->reductions);
  fzPtrMapInit(&E->reductions, E->ctx);
  fzLLFindReductions(E, func);
  if (!fzLLEmitBlock(E, body, true))
    return false;
  FzOp *term = fzBlockGetLastOp(body);
  if (!term || !is_named(term, "func.return") ||
      fzOpGetNumOperands(term) != 0)
    return fzLLError(E, term ? term : func,
                     "emit-llvm: a loop-level function must end in "
                     "'func.return' with no operands");
  fzLLEmitStoreFence(E);
  LLVMBuildRetVoid(E->b);
  emit_packed(E, fn, LLVMGlobalGetValueType(fn), numArgs);
  return !E->failed;
}

bool fzLLTranslateModule(FzLLEmitter *E, FzOp *module) {
  E->b = LLVMCreateBuilderInContext(E->llctx);
  E->tVoid = LLVMVoidTypeInContext(E->llctx);
  E->tI1 = LLVMInt1TypeInContext(E->llctx);
  E->tI8 = LLVMInt8TypeInContext(E->llctx);
  E->tI16 = LLVMInt16TypeInContext(E->llctx);
  E->tI32 = LLVMInt32TypeInContext(E->llctx);
  E->tI64 = LLVMInt64TypeInContext(E->llctx);
  E->tF16 = LLVMHalfTypeInContext(E->llctx);
  E->tF32 = LLVMFloatTypeInContext(E->llctx);
  E->tF64 = LLVMDoubleTypeInContext(E->llctx);
  E->tPtr = LLVMPointerTypeInContext(E->llctx, 0);
  E->fmf = 0;
  if (E->opts.contract)
    E->fmf |= LLVMFastMathAllowContract;
  if (E->opts.fastMath)
    E->fmf |= LLVMFastMathAll;
  E->fmfReduce = E->opts.reassocReductions ? LLVMFastMathAllowReassoc : 0;
  fzPtrMapInit(&E->values, E->ctx);
  fzPtrMapInit(&E->roots, E->ctx);
  fzPtrMapInit(&E->reductions, E->ctx);

  bool ok = true;
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  size_t numFuncs = 0;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    if (!is_named(op, "func.func"))
      continue;
    numFuncs++;
    E->failed = false;
    if (!declare_function(E, op))
      ok = false;
  }
  for (FzOp *op = top && ok ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    if (!is_named(op, "func.func"))
      continue;
    E->failed = false;
    if (!define_function(E, op))
      ok = false;
  }
  if (ok && numFuncs == 0)
    ok = fzEmitError(E->ctx, fzOpGetLoc(module),
                     "emit-llvm: the module holds no func.func");
  fzPtrMapFree(&E->values);
  fzPtrMapFree(&E->roots);
  fzPtrMapFree(&E->reductions);
  fzLLChecksFinish(E);
  LLVMDisposeBuilder(E->b);
  E->b = NULL;
  return ok;
}
