/* lowering/llvm/emit_units.c - the units of parallel CPU code generation
 * (emit_internal.h, FzLLUnits): switching the emitter between LLVM
 * contexts, and carrying what an outlined region uses of its function
 * (constants, the large constants' globals) into its unit.
 *
 * A unit's module has the target triple and data layout of unit 0's.
 * Constants: integers and floats are rebuilt by value, globals of at most
 * kCopyBytes copied (so that O3 still sees small tables), larger ones
 * (a model's weights) declared with the same type, alignment and
 * constness and defined once, in unit 0, made external and hidden there.
 */
#include <string.h>

#include "lowering/llvm/emit_internal.h"

enum { kCopyBytes = 4096 };

void fzLLSetTypes(FzLLEmitter *E) {
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
}

static void save_ctx(const FzLLEmitter *E, FzLLCtxSave *s) {
  s->llctx = E->llctx;
  s->mod = E->mod;
  s->b = E->b;
  s->tVoid = E->tVoid;
  s->tI1 = E->tI1;
  s->tI8 = E->tI8;
  s->tI16 = E->tI16;
  s->tI32 = E->tI32;
  s->tI64 = E->tI64;
  s->tF16 = E->tF16;
  s->tF32 = E->tF32;
  s->tF64 = E->tF64;
  s->tPtr = E->tPtr;
  s->status = E->status;
  s->insert = LLVMGetInsertBlock(E->b);
}

bool fzLLUnitBegin(FzLLEmitter *E, FzLLCtxSave *save, const char *name) {
  FzLLUnits *u = E->units;
  if (u->n == u->cap) {
    size_t cap = u->cap ? 2 * u->cap : 16;
    FzLLUnit *v = fzRealloc(E->ctx, u->v, cap * sizeof *v);
    if (!v)
      return E->failed = true, false;
    u->v = v;
    u->cap = cap;
  }
  char *copy = fzStrDup(E->ctx, name);
  if (!copy)
    return E->failed = true, false;
  save_ctx(E, save);
  FzLLUnit *unit = &u->v[u->n++];
  memset(unit, 0, sizeof *unit);
  unit->name = copy;
  unit->llctx = LLVMContextCreate();
  unit->mod = LLVMModuleCreateWithNameInContext(name, unit->llctx);
  LLVMSetTarget(unit->mod, LLVMGetTarget(save->mod));
  LLVMSetDataLayout(unit->mod, LLVMGetDataLayoutStr(save->mod));
  E->llctx = unit->llctx;
  E->mod = unit->mod;
  E->b = LLVMCreateBuilderInContext(E->llctx);
  E->status = NULL;
  fzLLSetTypes(E);
  return true;
}

void fzLLUnitEnd(FzLLEmitter *E, const FzLLCtxSave *s) {
  LLVMDisposeBuilder(E->b);
  E->llctx = s->llctx;
  E->mod = s->mod;
  E->b = s->b;
  E->tVoid = s->tVoid;
  E->tI1 = s->tI1;
  E->tI8 = s->tI8;
  E->tI16 = s->tI16;
  E->tI32 = s->tI32;
  E->tI64 = s->tI64;
  E->tF16 = s->tF16;
  E->tF32 = s->tF32;
  E->tF64 = s->tF64;
  E->tPtr = s->tPtr;
  E->status = s->status;
  if (s->insert)
    LLVMPositionBuilderAtEnd(E->b, s->insert);
}

LLVMTypeRef fzLLMapType(FzLLEmitter *E, LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMPointerTypeKind:
    return LLVMPointerTypeInContext(E->llctx, LLVMGetPointerAddressSpace(t));
  case LLVMIntegerTypeKind:
    return LLVMIntTypeInContext(E->llctx, LLVMGetIntTypeWidth(t));
  case LLVMHalfTypeKind:
    return LLVMHalfTypeInContext(E->llctx);
  case LLVMBFloatTypeKind:
    return LLVMBFloatTypeInContext(E->llctx);
  case LLVMFloatTypeKind:
    return LLVMFloatTypeInContext(E->llctx);
  case LLVMDoubleTypeKind:
    return LLVMDoubleTypeInContext(E->llctx);
  case LLVMVectorTypeKind: {
    LLVMTypeRef e = fzLLMapType(E, LLVMGetElementType(t));
    return e ? LLVMVectorType(e, LLVMGetVectorSize(t)) : NULL;
  }
  case LLVMArrayTypeKind: {
    LLVMTypeRef e = fzLLMapType(E, LLVMGetElementType(t));
    return e ? LLVMArrayType2(e, LLVMGetArrayLength2(t)) : NULL;
  }
  default:
    return NULL;
  }
}

static bool scalar_kind(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMPointerTypeKind:
  case LLVMHalfTypeKind:
  case LLVMBFloatTypeKind:
  case LLVMFloatTypeKind:
  case LLVMDoubleTypeKind:
    return true;
  case LLVMIntegerTypeKind:
    return LLVMGetIntTypeWidth(t) <= 64;
  default:
    return false;
  }
}

bool fzLLConstMovable(LLVMValueRef c) {
  if (LLVMIsAGlobalVariable(c))
    return true;
  return scalar_kind(LLVMTypeOf(c)) &&
         (LLVMIsAConstantInt(c) || LLVMIsAConstantFP(c) ||
          LLVMIsAConstantPointerNull(c) || LLVMIsUndef(c) || LLVMIsPoison(c));
}

bool fzLLExport(FzLLEmitter *E, LLVMValueRef gv) {
  if (LLVMGetLinkage(gv) == LLVMExternalLinkage)
    return true; /* done for an earlier unit */
  size_t n = 0;
  const char *name = LLVMGetValueName2(gv, &n);
  char *copy = fzStrDupN(E->ctx, name, n);
  if (!copy || !fzPtrVecPush(&E->units->exported, copy)) {
    fzFree(E->ctx, copy);
    return E->failed = true, false;
  }
  LLVMSetLinkage(gv, LLVMExternalLinkage);
  LLVMSetVisibility(gv, LLVMHiddenVisibility);
  return true;
}

static LLVMValueRef move_global(FzLLEmitter *E, LLVMValueRef g) {
  LLVMTypeRef ty = fzLLMapType(E, LLVMGlobalGetValueType(g));
  LLVMValueRef init = LLVMGetInitializer(g);
  size_t n = 0;
  const char *name = LLVMGetValueName2(g, &n);
  if (!ty || !init) {
    E->failed = true;
    return NULL;
  }
  size_t len = 0;
  const char *data = NULL;
  if (LLVMIsAConstantDataSequential(init) && LLVMIsConstantString(init))
    data = LLVMGetAsString(init, &len);
  LLVMValueRef u;
  if (data && len <= kCopyBytes) {
    u = LLVMAddGlobal(E->mod, ty, "fz.const");
    LLVMSetInitializer(u, LLVMConstStringInContext2(E->llctx, data, len, 1));
    LLVMSetLinkage(u, LLVMGetLinkage(g));
    LLVMSetUnnamedAddress(u, LLVMGetUnnamedAddress(g));
  } else {
    char *cname = fzStrDupN(E->ctx, name, n);
    if (!cname || !fzLLExport(E, g)) {
      fzFree(E->ctx, cname);
      E->failed = true;
      return NULL;
    }
    u = LLVMGetNamedGlobal(E->mod, cname);
    if (!u) {
      u = LLVMAddGlobal(E->mod, ty, cname);
      LLVMSetVisibility(u, LLVMHiddenVisibility);
      LLVMSetUnnamedAddress(u, LLVMGetUnnamedAddress(g));
    }
    fzFree(E->ctx, cname);
  }
  LLVMSetGlobalConstant(u, LLVMIsGlobalConstant(g));
  LLVMSetAlignment(u, LLVMGetAlignment(g));
  return u;
}

LLVMValueRef fzLLMoveConst(FzLLEmitter *E, LLVMValueRef c) {
  if (LLVMIsAGlobalVariable(c))
    return move_global(E, c);
  LLVMTypeRef t = fzLLMapType(E, LLVMTypeOf(c));
  if (!t) {
    E->failed = true;
    return NULL;
  }
  if (LLVMIsPoison(c))
    return LLVMGetPoison(t);
  if (LLVMIsUndef(c))
    return LLVMGetUndef(t);
  if (LLVMIsAConstantInt(c))
    return LLVMConstInt(t, LLVMConstIntGetZExtValue(c), 0);
  if (LLVMIsAConstantFP(c)) {
    LLVMBool lossy = 0;
    return LLVMConstReal(t, LLVMConstRealGetDouble(c, &lossy));
  }
  return LLVMConstNull(t);
}
