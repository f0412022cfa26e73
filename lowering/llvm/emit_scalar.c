/* lowering/llvm/emit_scalar.c - types, constants and the scalar (and
 * lane-wise vector) ops of the loop dialect: arithmetic, math,
 * comparisons, selects and casts.
 *
 * Float ops carry E->fmf (contract by default; every flag under
 * fast-math) and, when they accumulate a loop.for reduction, reassoc.
 * f16 and bf16 arithmetic is done in f32 and rounded back after every op
 * (round to nearest even), as the loop interpreter does; bf16 lives in
 * registers as its i16 bits so that no bf16 instruction (and no libgcc
 * helper for it) is ever needed.
 */
#include <math.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

/*===--- Types and constants ---------------------------------------------===*/

LLVMTypeRef fzLLType(FzLLEmitter *E, FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_INTEGER:
    return LLVMIntTypeInContext(E->llctx, fzTypeGetBitWidth(t));
  case FZ_TYPE_INDEX:
    return E->tI64;
  case FZ_TYPE_F16:
    return E->tF16;
  case FZ_TYPE_BF16:
    return E->tI16;
  case FZ_TYPE_F32:
    return E->tF32;
  case FZ_TYPE_F64:
    return E->tF64;
  case FZ_TYPE_BUFFER:
    return E->tPtr;
  case FZ_TYPE_VECTOR: {
    /* At most FZ_LL_MAX_LANES lanes (as the loop interpreter): a longer
     * vector would not fit LLVM's 32-bit lane count (up to 2^40). */
    if (fzShapedTypeGetRank(t) != 1 ||
        fzShapedTypeGetDim(t, 0) > FZ_LL_MAX_LANES)
      return NULL;
    LLVMTypeRef elt = fzLLType(E, fzShapedTypeGetElementType(t));
    return elt ? LLVMVectorType(elt, (unsigned)fzShapedTypeGetDim(t, 0))
               : NULL;
  }
  default:
    return NULL;
  }
}

LLVMTypeRef fzLLStorageType(FzLLEmitter *E, FzType *elt) {
  if (fzTypeGetKind(elt) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(elt) == 1)
    return E->tI8;
  return fzLLType(E, elt);
}

FzType *fzLLScalarOf(FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_VECTOR ? fzShapedTypeGetElementType(t)
                                             : t;
}

unsigned fzLLLanes(FzType *t) {
  if (fzTypeGetKind(t) != FZ_TYPE_VECTOR)
    return 1;
  int64_t n = fzShapedTypeGetDim(t, 0);
  return n > FZ_LL_MAX_LANES ? FZ_LL_MAX_LANES + 1 : (unsigned)n;
}

static LLVMValueRef splat_const(LLVMTypeRef ty, LLVMValueRef scalar) {
  if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind)
    return scalar;
  unsigned n = LLVMGetVectorSize(ty);
  LLVMValueRef elts[64];
  if (n > 64)
    n = 64; /* vector<> types of the loop dialect are short */
  for (unsigned i = 0; i < n; ++i)
    elts[i] = scalar;
  return LLVMConstVector(elts, n);
}

static LLVMTypeRef scalar_type(LLVMTypeRef ty) {
  return LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetElementType(ty)
                                                    : ty;
}

LLVMValueRef fzLLConstF(LLVMTypeRef ty, double v) {
  return splat_const(ty, LLVMConstReal(scalar_type(ty), v));
}

LLVMValueRef fzLLConstI(LLVMTypeRef ty, int64_t v) {
  return splat_const(ty, LLVMConstInt(scalar_type(ty), (uint64_t)v, 1));
}

LLVMValueRef fzLLIndex(FzLLEmitter *E, int64_t v) {
  return LLVMConstInt(E->tI64, (uint64_t)v, 1);
}

/* ty with its scalar element replaced by elt (same lane count). */
static LLVMTypeRef like(LLVMTypeRef ty, LLVMTypeRef elt) {
  return LLVMGetTypeKind(ty) == LLVMVectorTypeKind
             ? LLVMVectorType(elt, LLVMGetVectorSize(ty))
             : elt;
}

LLVMValueRef fzLLBF16ToF32(FzLLEmitter *E, LLVMValueRef bits) {
  LLVMTypeRef ty = LLVMTypeOf(bits);
  LLVMValueRef w = LLVMBuildZExt(E->b, bits, like(ty, E->tI32), "");
  w = LLVMBuildShl(E->b, w, fzLLConstI(like(ty, E->tI32), 16), "");
  return LLVMBuildBitCast(E->b, w, like(ty, E->tF32), "");
}

LLVMValueRef fzLLF32ToBF16(FzLLEmitter *E, LLVMValueRef f) {
  LLVMTypeRef ty = LLVMTypeOf(f);
  if (E->nativeBF16) {
    LLVMValueRef h =
        LLVMBuildFPTrunc(E->b, f, like(ty, LLVMBFloatTypeInContext(E->llctx)),
                         "");
    return LLVMBuildBitCast(E->b, h, like(ty, E->tI16), "");
  }
  LLVMTypeRef ti = like(ty, E->tI32);
  LLVMValueRef u = LLVMBuildBitCast(E->b, f, ti, "");
  LLVMValueRef hi = LLVMBuildLShr(E->b, u, fzLLConstI(ti, 16), "");
  /* Round to nearest even: add 0x7fff plus the lowest kept bit. */
  LLVMValueRef lsb = LLVMBuildAnd(E->b, hi, fzLLConstI(ti, 1), "");
  LLVMValueRef r = LLVMBuildAdd(E->b, u, fzLLConstI(ti, 0x7fff), "");
  r = LLVMBuildAdd(E->b, r, lsb, "");
  r = LLVMBuildLShr(E->b, r, fzLLConstI(ti, 16), "");
  /* NaN stays a (quiet) NaN: rounding could carry it into infinity. */
  LLVMValueRef isNan = LLVMBuildFCmp(E->b, LLVMRealUNO, f, f, "");
  LLVMValueRef q = LLVMBuildOr(E->b, hi, fzLLConstI(ti, 0x40), "");
  r = LLVMBuildSelect(E->b, isNan, q, r, "");
  return LLVMBuildTrunc(E->b, r, like(ty, E->tI16), "");
}

LLVMValueRef fzLLWiden(FzLLEmitter *E, LLVMValueRef v, FzType *t) {
  switch (fzTypeGetKind(fzLLScalarOf(t))) {
  case FZ_TYPE_BF16:
    return fzLLBF16ToF32(E, v);
  case FZ_TYPE_F16:
    return LLVMBuildFPExt(E->b, v, like(LLVMTypeOf(v), E->tF32), "");
  default:
    return v;
  }
}

LLVMValueRef fzLLNarrow(FzLLEmitter *E, LLVMValueRef v, FzType *t) {
  switch (fzTypeGetKind(fzLLScalarOf(t))) {
  case FZ_TYPE_BF16:
    return fzLLF32ToBF16(E, v);
  case FZ_TYPE_F16:
    return LLVMBuildFPTrunc(E->b, v, like(LLVMTypeOf(v), E->tF16), "");
  default:
    return v;
  }
}

LLVMValueRef fzLLCallIntrinsic(FzLLEmitter *E, const char *name,
                               LLVMTypeRef *overload, unsigned numOverload,
                               LLVMValueRef *args, unsigned numArgs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn =
      LLVMGetIntrinsicDeclaration(E->mod, id, overload, numOverload);
  LLVMTypeRef fty = LLVMIntrinsicGetType(E->llctx, id, overload, numOverload);
  return LLVMBuildCall2(E->b, fty, fn, args, numArgs, "");
}

LLVMValueRef fzLLFlags(FzLLEmitter *E, LLVMValueRef v,
                       LLVMFastMathFlags extra) {
  if (v && LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, E->fmf | extra);
  return v;
}

/* loop.dot4 (acc, a, b: i32 or <N x i32>): acc + the sum over the 4
 * bytes of each lane of u8(a) * s8(b). On x86 with AVX-512 VNNI (16
 * lanes) or AVX-VNNI / AVX-512 VNNI+VL (8 lanes) one vpdpbusd; elsewhere
 * the bytes widened to i32, multiplied and summed in groups of 4 (exact:
 * each sum is below 2^17 in magnitude, the add to acc wraps as the
 * instruction's does). */
static LLVMValueRef emit_dot4(FzLLEmitter *E, LLVMValueRef acc, LLVMValueRef a,
                              LLVMValueRef b) {
  LLVMTypeRef ty = LLVMTypeOf(acc);
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  unsigned n = vec ? LLVMGetVectorSize(ty) : 1;
  const char *f = E->features;
  bool vnni = f && strstr(f, "+avx512vnni");
  bool vnni256 = f && ((vnni && strstr(f, "+avx512vl")) || strstr(f, "+avxvnni"));
  if (vec && ((n == 16 && vnni) || (n == 8 && vnni256))) {
    LLVMValueRef args[3] = {acc, a, b};
    return fzLLCallIntrinsic(E, n == 16 ? "llvm.x86.avx512.vpdpbusd.512"
                                        : "llvm.x86.avx512.vpdpbusd.256",
                             NULL, 0, args, 3);
  }
  LLVMTypeRef i8 = LLVMInt8TypeInContext(E->llctx);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(E->llctx);
  LLVMTypeRef bytes = LLVMVectorType(i8, 4 * n), wide = LLVMVectorType(i32, 4 * n);
  LLVMValueRef ua = LLVMBuildZExt(E->b, LLVMBuildBitCast(E->b, a, bytes, ""), wide, "");
  LLVMValueRef sb = LLVMBuildSExt(E->b, LLVMBuildBitCast(E->b, b, bytes, ""), wide, "");
  LLVMValueRef p = LLVMBuildMul(E->b, ua, sb, "");
  LLVMValueRef sum = NULL;
  LLVMValueRef mask[64];
  if (n > 64)
    return NULL;
  for (unsigned t = 0; t < 4; ++t) {
    for (unsigned l = 0; l < n; ++l)
      mask[l] = LLVMConstInt(i32, 4 * l + t, 0);
    LLVMValueRef part = LLVMBuildShuffleVector(E->b, p, LLVMGetPoison(wide),
                                               LLVMConstVector(mask, n), "");
    sum = sum ? LLVMBuildAdd(E->b, sum, part, "") : part;
  }
  if (!vec)
    sum = LLVMBuildExtractElement(E->b, sum, LLVMConstInt(i32, 0, 0), "");
  return LLVMBuildAdd(E->b, acc, sum, "");
}

/*===--- Ops ---------------------------------------------------------------===*/

/* Operand i of op; in an explicit vector loop, a scalar operand of a
 * varying op is splatted to the loop's lanes. */
static LLVMValueRef operand(FzLLEmitter *E, FzOp *op, size_t i) {
  LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, i));
  if (v && E->varying && fzPtrMapContains(E->varying, op) &&
      LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMVectorTypeKind) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), E->vecLanes);
    v = LLVMBuildInsertElement(E->b, LLVMGetPoison(vt), v,
                               LLVMConstInt(E->tI32, 0, 0), "");
    v = LLVMBuildShuffleVector(
        E->b, v, LLVMGetPoison(vt),
        LLVMConstNull(LLVMVectorType(E->tI32, E->vecLanes)), "");
  }
  return v;
}

static FzType *operand_type(FzOp *op, size_t i) {
  return fzValueGetType(fzOpGetOperand(op, i));
}

/* The constant of loop.constant's `value` as an LLVM constant of ty. */
static LLVMValueRef emit_constant(FzLLEmitter *E, FzOp *op, FzType *t,
                                  LLVMTypeRef ty) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("value"));
  FzType *elt = fzLLScalarOf(t);
  if (!a) {
    fzLLError(E, op, "emit-llvm: 'loop.constant' has no value");
    return NULL;
  }
  bool isFloat = fzTypeIsFloat(elt);
  double f = 0;
  int64_t i = 0;
  switch (fzAttrGetKind(a)) {
  case FZ_ATTR_INTEGER:
    i = fzIntegerAttrGetValue(a);
    f = (double)i;
    break;
  case FZ_ATTR_BOOL:
    i = fzBoolAttrGetValue(a);
    f = (double)i;
    break;
  case FZ_ATTR_FLOAT:
    f = fzFloatAttrGetValue(a);
    /* Only an integer-typed constant needs i; converting -inf (the start
     * of every reduce_max) or NaN to int64 is undefined behaviour. */
    i = (f == f && f > -9.2e18 && f < 9.2e18) ? (int64_t)f : 0;
    break;
  case FZ_ATTR_DENSE:
    if (!fzDenseAttrIsSplat(a)) {
      fzLLError(E, op, "emit-llvm: a vector 'loop.constant' must be a "
                       "splat");
      return NULL;
    }
    f = fzDenseAttrGetFloat(a, 0);
    i = fzDenseAttrGetInt(a, 0);
    break;
  default:
    fzLLError(E, op, "emit-llvm: unsupported 'loop.constant' value");
    return NULL;
  }
  if (!isFloat)
    return fzLLConstI(ty, i);
  if (fzTypeGetKind(elt) == FZ_TYPE_BF16)
    return fzLLConstI(ty, (int16_t)fzDoubleToBF16Bits(f));
  return fzLLConstF(ty, f);
}

static const LLVMRealPredicate kFPred[FZ_LOOP_CMPF_NUM] = {
    LLVMRealOEQ, LLVMRealONE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT,
    LLVMRealOGE, LLVMRealUEQ, LLVMRealUNE, LLVMRealULT, LLVMRealULE,
    LLVMRealUGT, LLVMRealUGE, LLVMRealORD, LLVMRealUNO};
static const LLVMIntPredicate kIPred[FZ_LOOP_CMPI_NUM] = {
    LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT, LLVMIntSLE, LLVMIntSGT,
    LLVMIntSGE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};

/* A float value converted between float types src and dst (through f32
 * or f64, rounding once: f64 -> bf16/f16 go through f32 rounded to odd). */
/* f64 -> f32 rounded to odd (truncate, then set the last bit when
 * inexact): rounding that to bf16 or f16 afterwards rounds only once
 * (LLVM's own f64 -> f16 goes through f32 rounded to nearest, twice). */
static LLVMValueRef trunc_to_odd(FzLLEmitter *E, LLVMValueRef d) {
  LLVMTypeRef ty = LLVMTypeOf(d);
  LLVMTypeRef tf = like(ty, E->tF32), ti = like(ty, E->tI32);
  LLVMValueRef f = LLVMBuildFPTrunc(E->b, d, tf, "");
  LLVMValueRef back = LLVMBuildFPExt(E->b, f, ty, "");
  LLVMValueRef fb = LLVMBuildBitCast(E->b, f, ti, "");
  LLVMTypeRef tt = ty;
  LLVMValueRef ab = fzLLCallIntrinsic(E, "llvm.fabs", &tt, 1, &back, 1);
  LLVMValueRef ad = fzLLCallIntrinsic(E, "llvm.fabs", &tt, 1, &d, 1);
  LLVMValueRef over = LLVMBuildFCmp(E->b, LLVMRealOGT, ab, ad, "");
  fb = LLVMBuildSelect(E->b, over,
                       LLVMBuildSub(E->b, fb, fzLLConstI(ti, 1), ""), fb, "");
  LLVMValueRef inexact = LLVMBuildFCmp(E->b, LLVMRealUNE, back, d, "");
  fb = LLVMBuildSelect(E->b, inexact,
                       LLVMBuildOr(E->b, fb, fzLLConstI(ti, 1), ""), fb, "");
  return LLVMBuildBitCast(E->b, fb, tf, "");
}

static LLVMValueRef convert_float(FzLLEmitter *E, LLVMValueRef v,
                                  FzType *src, FzType *dst) {
  LLVMValueRef w = fzLLWiden(E, v, src);
  FzTypeKind dk = fzTypeGetKind(fzLLScalarOf(dst));
  if ((dk == FZ_TYPE_BF16 || dk == FZ_TYPE_F16) &&
      scalar_type(LLVMTypeOf(w)) == E->tF64)
    return fzLLNarrow(E, trunc_to_odd(E, w), dst);
  LLVMTypeRef want = like(LLVMTypeOf(w), dk == FZ_TYPE_F64 ? E->tF64
                                                           : E->tF32);
  LLVMTypeRef have = scalar_type(LLVMTypeOf(w));
  if (have == E->tF32 && dk == FZ_TYPE_F64)
    w = LLVMBuildFPExt(E->b, w, want, "");
  else if (have == E->tF64 && dk != FZ_TYPE_F64)
    w = LLVMBuildFPTrunc(E->b, w, want, "");
  return fzLLNarrow(E, w, dst);
}

/* True when v is a loop.constant equal to 1 (scalar, or a splat). */
static bool is_one(FzValue *v) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
    return false;
  FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("value"));
  if (a && fzAttrGetKind(a) == FZ_ATTR_FLOAT)
    return fzFloatAttrGetValue(a) == 1.0;
  return a && fzAttrGetKind(a) == FZ_ATTR_DENSE && fzDenseAttrIsSplat(a) &&
         fzDenseAttrGetFloat(a, 0) == 1.0;
}

/* For addf(1, erf(z)) (either order): z, else NULL. gelu's x·Φ(x) is
 * lowered as ½x(1 + erf(x/√2)); computing 1 + erf(z) as erfc(-z) keeps
 * its relative accuracy where erf(z) is close to -1. */
static FzValue *one_plus_erf_arg(FzOp *op) {
  for (size_t k = 0; k < 2; ++k) {
    FzOp *e = fzValueGetDefiningOp(fzOpGetOperand(op, 1 - k));
    if (is_one(fzOpGetOperand(op, k)) && e &&
        fzLoopGetOpcode(e) == FZ_LOOP_OP_ERF)
      return fzOpGetOperand(e, 0);
  }
  return NULL;
}

/* The float constant a loop.constant holds, in *out. */
static bool const_float(FzValue *v, double *out) {
  FzOp *def = fzValueGetDefiningOp(v);
  FzAttr *a = def && fzLoopGetOpcode(def) == FZ_LOOP_OP_CONSTANT
                  ? fzOpGetInherentAttr(def, FZ_STR("value"))
                  : NULL;
  if (a && fzAttrGetKind(a) == FZ_ATTR_FLOAT) {
    *out = fzFloatAttrGetValue(a);
    return true;
  }
  return false;
}

/* 1 + erf(z), z's value widened to f32. When z = x * c with c the f32
 * nearest 1/sqrt(2) (gelu), x itself is passed on: the inline form
 * computes 1 + erf(x / sqrt(2)) from it, since erfc's tail would
 * magnify the product's rounding (and c's) by 2 z^2. */
static LLVMValueRef one_plus_erf(FzLLEmitter *E, FzValue *z, FzType *t) {
  LLVMValueRef w = fzLLWiden(E, fzLLGet(E, z), t);
  LLVMValueRef v = NULL;
  FzOp *mul = fzValueGetDefiningOp(z);
  const double invSqrt2 = 0.70710678118654752440;
  if (mul && fzLoopGetOpcode(mul) == FZ_LOOP_OP_MULF &&
      fzTypeGetKind(fzLLScalarOf(t)) == FZ_TYPE_F32) {
    for (size_t k = 0; k < 2 && !v; ++k) {
      double c;
      if (const_float(fzOpGetOperand(mul, k), &c) &&
          fabs(c - invSqrt2) <= 1e-7)
        v = fzLLGet(E, fzOpGetOperand(mul, 1 - k));
    }
  }
  return fzLLNarrow(E, fzLLEmitMath(E, FZ_LL_ONE_PLUS_ERF, w, v), t);
}

static LLVMValueRef float_binary(FzLLEmitter *E, FzOp *op, FzLoopOpcode code,
                                 FzType *t) {
  FzValue *z = code == FZ_LOOP_OP_ADDF ? one_plus_erf_arg(op) : NULL;
  if (z && fzLLGet(E, z))
    return one_plus_erf(E, z, t);
  LLVMValueRef a = fzLLWiden(E, operand(E, op, 0), t);
  LLVMValueRef b = fzLLWiden(E, operand(E, op, 1), t);
  LLVMFastMathFlags extra =
      fzPtrMapGet(&E->reductions, op) ? E->fmfReduce : 0;
  LLVMValueRef r = NULL;
  LLVMTypeRef ty = LLVMTypeOf(a);
  switch (code) {
  case FZ_LOOP_OP_ADDF:
    r = LLVMBuildFAdd(E->b, a, b, "");
    break;
  case FZ_LOOP_OP_SUBF:
    r = LLVMBuildFSub(E->b, a, b, "");
    break;
  case FZ_LOOP_OP_MULF:
    r = LLVMBuildFMul(E->b, a, b, "");
    break;
  case FZ_LOOP_OP_DIVF:
    r = LLVMBuildFDiv(E->b, a, b, "");
    break;
  case FZ_LOOP_OP_REMF:
    r = LLVMBuildFRem(E->b, a, b, "");
    break;
  case FZ_LOOP_OP_MAXF:
  case FZ_LOOP_OP_MINF: {
    /* NaN-propagating maximum/minimum; maxnum/minnum when no NaN can
     * occur (fast-math). */
    bool max = code == FZ_LOOP_OP_MAXF;
    const char *name = E->opts.fastMath
                           ? (max ? "llvm.maxnum" : "llvm.minnum")
                           : (max ? "llvm.maximum" : "llvm.minimum");
    LLVMValueRef args[2] = {a, b};
    r = fzLLCallIntrinsic(E, name, &ty, 1, args, 2);
    break;
  }
  case FZ_LOOP_OP_POWF:
    r = fzLLEmitMath(E, FZ_LL_POW, a, b);
    break;
  default:
    return NULL;
  }
  fzLLFlags(E, r, extra);
  return fzLLNarrow(E, r, t);
}

static LLVMValueRef int_binary(FzLLEmitter *E, FzOp *op, FzLoopOpcode code) {
  LLVMValueRef a = operand(E, op, 0), b = operand(E, op, 1);
  LLVMTypeRef ty = LLVMTypeOf(a);
  LLVMValueRef args[2] = {a, b};
  switch (code) {
  case FZ_LOOP_OP_ADDI:
    return LLVMBuildAdd(E->b, a, b, "");
  case FZ_LOOP_OP_SUBI:
    return LLVMBuildSub(E->b, a, b, "");
  case FZ_LOOP_OP_MULI:
    return LLVMBuildMul(E->b, a, b, "");
  case FZ_LOOP_OP_DIVSI:
  case FZ_LOOP_OP_REMSI: {
    /* MIN / -1 wraps to MIN and MIN % -1 is 0 (x86 would trap): divide
     * by 1 instead and fix the result up. */
    LLVMValueRef m1 = LLVMBuildICmp(E->b, LLVMIntEQ, b, fzLLConstI(ty, -1), "");
    LLVMValueRef bs = LLVMBuildSelect(E->b, m1, fzLLConstI(ty, 1), b, "");
    if (fzLLDivisorNeedsCheck(E, op)) {
      /* Division by zero is an error of the run (emit_check.c); the
       * code divides by 1 instead of trapping. */
      LLVMValueRef nz =
          LLVMBuildICmp(E->b, LLVMIntNE, b, fzLLConstI(ty, 0), "");
      fzLLEmitCheck(E, op, nz, NULL, "'%s' op integer division by zero",
                    fzLoopOpcodeGetName(code));
      bs = LLVMBuildSelect(E->b, nz, bs, fzLLConstI(ty, 1), "");
    }
    if (code == FZ_LOOP_OP_DIVSI)
      return LLVMBuildSelect(E->b, m1, LLVMBuildNeg(E->b, a, ""),
                             LLVMBuildSDiv(E->b, a, bs, ""), "");
    return LLVMBuildSelect(E->b, m1, fzLLConstI(ty, 0),
                           LLVMBuildSRem(E->b, a, bs, ""), "");
  }
  case FZ_LOOP_OP_MAXSI:
    return fzLLCallIntrinsic(E, "llvm.smax", &ty, 1, args, 2);
  case FZ_LOOP_OP_MINSI:
    return fzLLCallIntrinsic(E, "llvm.smin", &ty, 1, args, 2);
  case FZ_LOOP_OP_ANDI:
    return LLVMBuildAnd(E->b, a, b, "");
  case FZ_LOOP_OP_ORI:
    return LLVMBuildOr(E->b, a, b, "");
  case FZ_LOOP_OP_XORI:
    return LLVMBuildXor(E->b, a, b, "");
  case FZ_LOOP_OP_SHLI:
  case FZ_LOOP_OP_SHRSI: {
    /* An amount outside [0, width) gives 0 / the sign fill (LLVM: poison). */
    unsigned w = LLVMGetIntTypeWidth(LLVMGetTypeKind(ty) == LLVMVectorTypeKind
                                         ? LLVMGetElementType(ty)
                                         : ty);
    LLVMValueRef out = LLVMBuildICmp(E->b, LLVMIntUGE, b,
                                     fzLLConstI(ty, (int64_t)w), "");
    if (code == FZ_LOOP_OP_SHLI)
      return LLVMBuildSelect(E->b, out, fzLLConstI(ty, 0),
                             LLVMBuildShl(E->b, a, b, ""), "");
    LLVMValueRef amt =
        LLVMBuildSelect(E->b, out, fzLLConstI(ty, (int64_t)w - 1), b, "");
    return LLVMBuildAShr(E->b, a, amt, "");
  }
  default:
    return NULL;
  }
}

static LLVMValueRef float_unary(FzLLEmitter *E, FzOp *op, FzLoopOpcode code,
                                FzType *t) {
  LLVMValueRef a = fzLLWiden(E, operand(E, op, 0), t);
  LLVMTypeRef ty = LLVMTypeOf(a);
  LLVMValueRef r = NULL;
  switch (code) {
  case FZ_LOOP_OP_NEGF:
    r = LLVMBuildFNeg(E->b, a, "");
    break;
  case FZ_LOOP_OP_ABSF:
    r = fzLLCallIntrinsic(E, "llvm.fabs", &ty, 1, &a, 1);
    break;
  case FZ_LOOP_OP_SQRT:
    r = fzLLCallIntrinsic(E, "llvm.sqrt", &ty, 1, &a, 1);
    break;
  case FZ_LOOP_OP_RSQRT:
    r = fzLLFlags(E, fzLLCallIntrinsic(E, "llvm.sqrt", &ty, 1, &a, 1), 0);
    r = LLVMBuildFDiv(E->b, fzLLConstF(ty, 1.0), r, "");
    break;
  case FZ_LOOP_OP_FLOOR:
    r = fzLLCallIntrinsic(E, "llvm.floor", &ty, 1, &a, 1);
    break;
  case FZ_LOOP_OP_CEIL:
    r = fzLLCallIntrinsic(E, "llvm.ceil", &ty, 1, &a, 1);
    break;
  case FZ_LOOP_OP_ROUNDEVEN:
    r = fzLLCallIntrinsic(E, "llvm.roundeven", &ty, 1, &a, 1);
    break;
  case FZ_LOOP_OP_EXP:
    r = fzLLEmitMath(E, FZ_LL_EXP, a, NULL);
    break;
  case FZ_LOOP_OP_LOG:
    r = fzLLEmitMath(E, FZ_LL_LOG, a, NULL);
    break;
  case FZ_LOOP_OP_LOG1P:
    r = fzLLEmitMath(E, FZ_LL_LOG1P, a, NULL);
    break;
  case FZ_LOOP_OP_TANH:
    r = fzLLEmitMath(E, FZ_LL_TANH, a, NULL);
    break;
  case FZ_LOOP_OP_ERF:
    r = fzLLEmitMath(E, FZ_LL_ERF, a, NULL);
    break;
  case FZ_LOOP_OP_SIN:
    r = fzLLEmitMath(E, FZ_LL_SIN, a, NULL);
    break;
  case FZ_LOOP_OP_COS:
    r = fzLLEmitMath(E, FZ_LL_COS, a, NULL);
    break;
  default:
    return NULL;
  }
  fzLLFlags(E, r, 0);
  return fzLLNarrow(E, r, t);
}

static LLVMValueRef emit_cast(FzLLEmitter *E, FzOp *op, FzLoopOpcode code,
                              FzType *dst, LLVMTypeRef dstTy) {
  FzType *src = operand_type(op, 0);
  LLVMValueRef a = operand(E, op, 0);
  FzType *se = fzLLScalarOf(src), *de = fzLLScalarOf(dst);
  switch (code) {
  case FZ_LOOP_OP_EXTF:
  case FZ_LOOP_OP_TRUNCF:
    return convert_float(E, a, src, dst);
  case FZ_LOOP_OP_SITOFP:
  case FZ_LOOP_OP_UITOFP: {
    FzTypeKind dk = fzTypeGetKind(de);
    LLVMTypeRef via = dk == FZ_TYPE_F64 ? E->tF64 : E->tF32;
    via = like(LLVMTypeOf(a), via);
    LLVMValueRef f = code == FZ_LOOP_OP_SITOFP
                         ? LLVMBuildSIToFP(E->b, a, via, "")
                         : LLVMBuildUIToFP(E->b, a, via, "");
    return fzLLNarrow(E, f, dst);
  }
  case FZ_LOOP_OP_FPTOSI: {
    /* Saturating: out-of-range values clamp, NaN gives 0 (no poison). */
    LLVMValueRef w = fzLLWiden(E, a, src);
    LLVMTypeRef ov[2] = {dstTy, LLVMTypeOf(w)};
    return fzLLCallIntrinsic(E, "llvm.fptosi.sat", ov, 2, &w, 1);
  }
  case FZ_LOOP_OP_EXTSI:
    return LLVMBuildSExt(E->b, a, dstTy, "");
  case FZ_LOOP_OP_EXTUI:
    return LLVMBuildZExt(E->b, a, dstTy, "");
  case FZ_LOOP_OP_TRUNCI:
    return LLVMBuildTrunc(E->b, a, dstTy, "");
  case FZ_LOOP_OP_INDEX_CAST: {
    unsigned ws = fzTypeGetBitWidth(se), wd = fzTypeGetBitWidth(de);
    if (wd > ws)
      return LLVMBuildSExt(E->b, a, dstTy, "");
    if (wd < ws)
      return LLVMBuildTrunc(E->b, a, dstTy, "");
    return a;
  }
  case FZ_LOOP_OP_BITCAST:
    return LLVMTypeOf(a) == dstTy ? a : LLVMBuildBitCast(E->b, a, dstTy, "");
  default:
    return NULL;
  }
}

bool fzLLEmitScalarOp(FzLLEmitter *E, FzOp *op, FzLoopOpcode code) {
  if (fzOpGetNumResults(op) != 1)
    return fzLLError(E, op, "emit-llvm: '%s' has no translation to LLVM IR",
                     fzLoopOpcodeGetName(code));
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  LLVMTypeRef ty = fzLLType(E, t);
  if (!ty)
    return fzLLError(E, op, "emit-llvm: unsupported result type");
  if (E->varying && fzPtrMapContains(E->varying, op))
    ty = LLVMVectorType(ty, E->vecLanes);
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    if (!fzLLGet(E, fzOpGetOperand(op, i)))
      return false;
  LLVMValueRef r = NULL;
  switch (code) {
  case FZ_LOOP_OP_CONSTANT:
    r = emit_constant(E, op, t, ty);
    break;
  case FZ_LOOP_OP_SPLAT: {
    LLVMValueRef s = operand(E, op, 0);
    LLVMValueRef v = LLVMBuildInsertElement(
        E->b, LLVMGetPoison(ty), s, LLVMConstInt(E->tI32, 0, 0), "");
    LLVMValueRef mask =
        LLVMConstNull(LLVMVectorType(E->tI32, LLVMGetVectorSize(ty)));
    r = LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(ty), mask, "");
    break;
  }
  case FZ_LOOP_OP_SELECT:
    r = LLVMBuildSelect(E->b, operand(E, op, 0), operand(E, op, 1),
                        operand(E, op, 2), "");
    break;
  case FZ_LOOP_OP_CMPF: {
    int p = fzLoopCmpGetPredicate(op);
    FzType *ot = operand_type(op, 0);
    if (p < 0)
      return fzLLError(E, op, "emit-llvm: unknown cmpf predicate");
    r = LLVMBuildFCmp(E->b, kFPred[p], fzLLWiden(E, operand(E, op, 0), ot),
                      fzLLWiden(E, operand(E, op, 1), ot), "");
    fzLLFlags(E, r, 0);
    break;
  }
  case FZ_LOOP_OP_CMPI: {
    int p = fzLoopCmpGetPredicate(op);
    if (p < 0)
      return fzLLError(E, op, "emit-llvm: unknown cmpi predicate");
    r = LLVMBuildICmp(E->b, kIPred[p], operand(E, op, 0), operand(E, op, 1),
                      "");
    break;
  }
  case FZ_LOOP_OP_ADDF:
  case FZ_LOOP_OP_SUBF:
  case FZ_LOOP_OP_MULF:
  case FZ_LOOP_OP_DIVF:
  case FZ_LOOP_OP_REMF:
  case FZ_LOOP_OP_MAXF:
  case FZ_LOOP_OP_MINF:
  case FZ_LOOP_OP_POWF:
    r = float_binary(E, op, code, t);
    break;
  case FZ_LOOP_OP_ADDI:
  case FZ_LOOP_OP_SUBI:
  case FZ_LOOP_OP_MULI:
  case FZ_LOOP_OP_DIVSI:
  case FZ_LOOP_OP_REMSI:
  case FZ_LOOP_OP_MAXSI:
  case FZ_LOOP_OP_MINSI:
  case FZ_LOOP_OP_ANDI:
  case FZ_LOOP_OP_ORI:
  case FZ_LOOP_OP_XORI:
  case FZ_LOOP_OP_SHLI:
  case FZ_LOOP_OP_SHRSI:
    r = int_binary(E, op, code);
    break;
  case FZ_LOOP_OP_FMA: {
    LLVMValueRef args[3];
    for (unsigned i = 0; i < 3; ++i)
      args[i] = fzLLWiden(E, operand(E, op, i), t);
    LLVMTypeRef wt = LLVMTypeOf(args[0]);
    r = fzLLCallIntrinsic(E, "llvm.fma", &wt, 1, args, 3);
    fzLLFlags(E, r,
              fzPtrMapGet(&E->reductions, op) ? E->fmfReduce : 0);
    r = fzLLNarrow(E, r, t);
    break;
  }
  case FZ_LOOP_OP_DOT4:
    r = emit_dot4(E, operand(E, op, 0), operand(E, op, 1), operand(E, op, 2));
    break;
  case FZ_LOOP_OP_NEGF:
  case FZ_LOOP_OP_ABSF:
  case FZ_LOOP_OP_EXP:
  case FZ_LOOP_OP_LOG:
  case FZ_LOOP_OP_LOG1P:
  case FZ_LOOP_OP_TANH:
  case FZ_LOOP_OP_ERF:
  case FZ_LOOP_OP_SQRT:
  case FZ_LOOP_OP_RSQRT:
  case FZ_LOOP_OP_FLOOR:
  case FZ_LOOP_OP_CEIL:
  case FZ_LOOP_OP_ROUNDEVEN:
  case FZ_LOOP_OP_SIN:
  case FZ_LOOP_OP_COS:
    r = float_unary(E, op, code, t);
    break;
  case FZ_LOOP_OP_EXTF:
  case FZ_LOOP_OP_TRUNCF:
  case FZ_LOOP_OP_SITOFP:
  case FZ_LOOP_OP_UITOFP:
  case FZ_LOOP_OP_FPTOSI:
  case FZ_LOOP_OP_EXTSI:
  case FZ_LOOP_OP_EXTUI:
  case FZ_LOOP_OP_TRUNCI:
  case FZ_LOOP_OP_INDEX_CAST:
  case FZ_LOOP_OP_BITCAST:
    r = emit_cast(E, op, code, t, ty);
    break;
  default:
    break;
  }
  if (!r) {
    if (!E->failed)
      fzLLError(E, op, "emit-llvm: '%s' has no translation to LLVM IR",
                fzLoopOpcodeGetName(code));
    return false;
  }
  fzLLSet(E, fzOpGetResult(op, 0), r);
  return !E->failed;
}
