/* lowering/nvptx/kernel_ops.c - the kernel dialect's ops in NVPTX LLVM
 * IR: one emitter per op, in one table (kOps) indexed by the op's
 * FzKernelOpcode. Adding a kernel op to the GPU back end is one entry
 * and one function here.
 *
 * The CPU emitter (lowering/llvm) translates the loop ops of a kernel
 * body and calls fzNvEmitKernelOp (its emitForeignOp hook) for every
 * other op. Values follow the CPU emitter's conventions: index is i64,
 * bf16 lives as its i16 bits, a buffer is a pointer to its element
 * (0, ..., 0); a shared-memory buffer is a pointer in NVPTX's address
 * space 3 (so its loads and stores are ld/st.shared).
 *
 *   thread_id, block_id,   zext of %tid, %ctaid, %ntid, %nctaid (.x/.y/.z)
 *   block_dim, grid_dim,   and %laneid
 *   lane_id
 *   shared_alloc           an internal addrspace(3) global [n x T], align 16
 *   dynamic_shared         the module's one external addrspace(3) [0 x i8]
 *                          (every op aliases it, like extern __shared__)
 *   barrier                bar.sync 0 (llvm.nvvm.barrier0)
 *   shuffle                shfl.sync.{bfly,down,up,idx}.b32 (the .p form
 *                          when the lane-in-range flag is used); 64-bit
 *                          values in two halves, narrower ones widened
 *   atomic                 atomicrmw (monotonic); float max/min, which
 *                          NVPTX has no instruction for, as a
 *                          compare-and-swap loop on the bits computing
 *                          llvm.maximum/minimum (loop.maxf's NaN rule)
 *   vector_load/store      one <N x T> access aligned to its size; a
 *                          `stream` load: inline ld.global[.nc].L1::no_allocate
 *   mma                    llvm.nvvm.mma.m16n8k16.row.col.{bf16,f32.f32};
 *                          m16n8k8: llvm.nvvm.f2tf32.rna per A/B register,
 *                          then llvm.nvvm.mma.m16n8k8.row.col.tf32
 *   ldmatrix               llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{1,2,4}
 *                          [.trans].b16 on the shared pointer; each i32
 *                          bitcast to the result's vector<2xT>
 *   cp_async               cp.async.cg.shared.global as inline assembly
 *                          (32-bit shared address, the source
 *                          addrspacecast to global, the optional byte
 *                          count an i32): LLVM 19 selects its intrinsic
 *                          only for 64-bit shared pointers
 *   cp_async_commit/wait   llvm.nvvm.cp.async.{commit,wait}.group
 *   extract, from_elements extractelement / insertelement
 *   mbarrier_*, bulk_copy, inline PTX (kernel_ops_sm90.c)
 *   fence_proxy_async,
 *   wgmma*
 * Fragment and copy ops count as synchronizing (warp collectives, copies
 * that complete at a wait): the kernel loses `nosync`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static LLVMValueRef i32c(FzLLEmitter *E, int64_t v) {
  return LLVMConstInt(E->tI32, (unsigned long long)v, 0);
}

static FzNvKernelState *state(FzLLEmitter *E) { return E->foreignData; }

/* The index of op's string property `name` among names (n of them), or
 * -1 (the verifier accepted only these spellings). */
static int string_prop(const FzOp *op, const char *name,
                       const char *const *names, int n) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_STRING)
    return -1;
  FzStringRef s = fzStringAttrGetValue(a);
  for (int i = 0; i < n; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(names[i])))
      return i;
  return -1;
}

/* kernel.shuffle's `mode` and kernel.atomic's `kind`, in the order of
 * docs/dialects/kernel.md. */
enum { SHFL_XOR, SHFL_DOWN, SHFL_UP, SHFL_IDX, SHFL_NUM };
enum { ATOM_ADD, ATOM_MAX, ATOM_MIN, ATOM_EXCH, ATOM_NUM };

/*===--- ids --------------------------------------------------------------===*/

static bool emit_id(FzLLEmitter *E, FzOp *op) {
  static const char *const regs[4] = {"tid", "ctaid", "ntid", "nctaid"};
  static const char *const dims[3] = {"x", "y", "z"};
  char name[64];
  FzKernelOpcode k = fzKernelGetOpcode(op);
  if (k == FZ_KERNEL_OP_LANE_ID) {
    snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.laneid");
  } else {
    int d = fzKernelGetDimension(op);
    int r = k == FZ_KERNEL_OP_THREAD_ID  ? 0
            : k == FZ_KERNEL_OP_BLOCK_ID ? 1
            : k == FZ_KERNEL_OP_BLOCK_DIM ? 2
                                          : 3;
    if (d < 0)
      return fzLLError(E, op, "emit-ptx: bad dimension");
    snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%s", regs[r],
             dims[d]);
  }
  LLVMValueRef v = fzLLCallIntrinsic(E, name, NULL, 0, NULL, 0);
  fzLLSet(E, fzOpGetResult(op, 0), LLVMBuildZExt(E->b, v, E->tI64, ""));
  return true;
}

/*===--- shared memory ----------------------------------------------------===*/

static bool emit_shared_alloc(FzLLEmitter *E, FzOp *op) {
  FzValue *res = fzOpGetResult(op, 0);
  FzType *t = fzValueGetType(res);
  int64_t n = fzShapedTypeGetNumElements(t);
  if (n < 0)
    return fzLLError(E, op, "emit-ptx: shared memory of a dynamic size");
  LLVMTypeRef at = LLVMArrayType2(
      fzLLStorageType(E, fzShapedTypeGetElementType(t)), (uint64_t)n);
  LLVMValueRef gv = LLVMAddGlobalInAddressSpace(E->mod, at, "fz_smem", 3);
  LLVMSetLinkage(gv, LLVMInternalLinkage);
  LLVMSetInitializer(gv, LLVMGetUndef(at));
  LLVMSetAlignment(gv, 16);
  fzLLSet(E, res, gv);
  fzLLSetRoot(E, res, res);
  return true;
}

/* An `align` above 16 (kernel.wgmma's swizzled operands) is its own
 * extern array, fz_dyn_smem_aN: every extern shared array starts at the
 * dynamic shared memory, and the joined PTX declares each name once. */
static bool emit_dynamic_shared(FzLLEmitter *E, FzOp *op) {
  int64_t align = fzKernelDynamicSharedGetAlign(op);
  char name[48] = "fz_dyn_smem";
  if (align > 16)
    snprintf(name, sizeof name, "fz_dyn_smem_a%lld", (long long)align);
  LLVMValueRef gv = LLVMGetNamedGlobal(E->mod, name);
  if (!gv) {
    LLVMTypeRef at = LLVMArrayType2(E->tI8, 0);
    gv = LLVMAddGlobalInAddressSpace(E->mod, at, name, 3);
    LLVMSetLinkage(gv, LLVMExternalLinkage);
    LLVMSetAlignment(gv, align > 16 ? (unsigned)align : 16);
  }
  FzValue *res = fzOpGetResult(op, 0);
  fzLLSet(E, res, gv);
  fzLLSetRoot(E, res, gv);
  return true;
}

/*===--- barrier, shuffle -------------------------------------------------===*/

static bool emit_barrier(FzLLEmitter *E, FzOp *op) {
  (void)op;
  fzLLCallIntrinsic(E, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
  return true;
}

static unsigned bit_width(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMHalfTypeKind:
  case LLVMBFloatTypeKind:
    return 16;
  case LLVMFloatTypeKind:
    return 32;
  case LLVMDoubleTypeKind:
    return 64;
  default:
    return LLVMGetIntTypeWidth(t);
  }
}

/* One 32-bit shfl.sync; *valid receives the in-range flag when wanted. */
static LLVMValueRef shfl32(FzLLEmitter *E, const char *mode,
                           LLVMValueRef mask, LLVMValueRef v,
                           LLVMValueRef off, LLVMValueRef c,
                           LLVMValueRef *valid) {
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.i32%s", mode,
           valid ? "p" : "");
  LLVMValueRef args[4] = {mask, v, off, c};
  LLVMValueRef r = fzLLCallIntrinsic(E, name, NULL, 0, args, 4);
  if (!valid)
    return r;
  *valid = LLVMBuildExtractValue(E->b, r, 1, "");
  return LLVMBuildExtractValue(E->b, r, 0, "");
}

static bool emit_shuffle(FzLLEmitter *E, FzOp *op) {
  static const char *const spellings[SHFL_NUM] = {"xor", "down", "up",
                                                  "idx"};
  static const char *const modes[SHFL_NUM] = {"bfly", "down", "up", "idx"};
  int mode = string_prop(op, "mode", spellings, SHFL_NUM);
  FzAttr *wa = fzOpGetInherentAttr(op, FZ_STR("width"));
  int64_t width = wa && fzAttrGetKind(wa) == FZ_ATTR_INTEGER
                      ? fzIntegerAttrGetValue(wa)
                      : -1;
  LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, 0));
  LLVMValueRef off = fzLLGet(E, fzOpGetOperand(op, 1));
  if (!v || !off)
    return false;
  if (mode < 0 || width < 1 || width > 32)
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.shuffle'");
  /* c: the segment mask (32 - width) in bits 8..12, the clamp in 0..4
   * (31; up: 0), as CUDA's __shfl_*_sync(mask, v, offset, width). */
  int64_t seg = 32 - width;
  LLVMValueRef c =
      i32c(E, (seg << 8) | (mode == SHFL_UP ? 0 : 31));
  /* The member mask: the whole warp when every launch of the kernel has
   * whole warps, else the lanes active here. */
  LLVMValueRef mask = state(E)->wholeWarps
                          ? i32c(E, -1)
                          : fzLLCallIntrinsic(E, "llvm.nvvm.activemask",
                                              NULL, 0, NULL, 0);
  bool wantValid = fzValueHasUses(fzOpGetResult(op, 1));
  LLVMTypeRef t = LLVMTypeOf(v);
  unsigned bits = bit_width(t);
  LLVMTypeRef it = LLVMIntTypeInContext(E->llctx, bits);
  bool isInt = LLVMGetTypeKind(t) == LLVMIntegerTypeKind;
  LLVMValueRef x = isInt ? v : LLVMBuildBitCast(E->b, v, it, "");
  LLVMValueRef r, valid = NULL;
  if (bits <= 32) {
    LLVMValueRef w = bits < 32 ? LLVMBuildZExt(E->b, x, E->tI32, "") : x;
    r = shfl32(E, modes[mode], mask, w, off, c, wantValid ? &valid : NULL);
    if (bits < 32)
      r = LLVMBuildTrunc(E->b, r, it, "");
  } else {
    LLVMValueRef k32 = LLVMConstInt(it, 32, 0);
    LLVMValueRef lo = LLVMBuildTrunc(E->b, x, E->tI32, "");
    LLVMValueRef hi =
        LLVMBuildTrunc(E->b, LLVMBuildLShr(E->b, x, k32, ""), E->tI32, "");
    lo = shfl32(E, modes[mode], mask, lo, off, c, wantValid ? &valid : NULL);
    hi = shfl32(E, modes[mode], mask, hi, off, c, NULL);
    r = LLVMBuildOr(E->b, LLVMBuildZExt(E->b, lo, it, ""),
                    LLVMBuildShl(E->b, LLVMBuildZExt(E->b, hi, it, ""), k32,
                                 ""),
                    "");
  }
  fzLLSet(E, fzOpGetResult(op, 0),
          isInt ? r : LLVMBuildBitCast(E->b, r, t, ""));
  fzLLSet(E, fzOpGetResult(op, 1),
          valid ? valid : LLVMConstInt(E->tI1, 1, 0));
  return true;
}

/*===--- atomics ----------------------------------------------------------===*/

/* A compare-and-swap loop: old = *p; do new = op(old, v) while the swap
 * fails. Returns the old value. */
static LLVMValueRef cas_loop(FzLLEmitter *E, LLVMValueRef p, LLVMValueRef v,
                             bool isMax) {
  LLVMTypeRef ft = LLVMTypeOf(v);
  LLVMTypeRef it = LLVMIntTypeInContext(E->llctx, bit_width(ft));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(E->llctx, E->fn,
                                                         "cas");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(E->llctx, E->fn,
                                                         "cas.done");
  LLVMValueRef first = LLVMBuildLoad2(E->b, it, p, "");
  LLVMSetAlignment(first, bit_width(ft) / 8);
  LLVMBuildBr(E->b, loop);
  LLVMPositionBuilderAtEnd(E->b, loop);
  LLVMValueRef cur = LLVMBuildPhi(E->b, it, "");
  LLVMAddIncoming(cur, &first, &pre, 1);
  LLVMValueRef args[2] = {LLVMBuildBitCast(E->b, cur, ft, ""), v};
  LLVMValueRef nv = fzLLCallIntrinsic(
      E, isMax ? "llvm.maximum" : "llvm.minimum", &ft, 1, args, 2);
  LLVMValueRef pair = LLVMBuildAtomicCmpXchg(
      E->b, p, cur, LLVMBuildBitCast(E->b, nv, it, ""),
      LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef seen = LLVMBuildExtractValue(E->b, pair, 0, "");
  LLVMValueRef ok = LLVMBuildExtractValue(E->b, pair, 1, "");
  LLVMAddIncoming(cur, &seen, &loop, 1);
  LLVMBuildCondBr(E->b, ok, done, loop);
  LLVMPositionBuilderAtEnd(E->b, done);
  return LLVMBuildBitCast(E->b, seen, ft, "");
}

static bool emit_atomic(FzLLEmitter *E, FzOp *op) {
  static const char *const kinds[ATOM_NUM] = {"add", "max", "min", "exch"};
  int kind = string_prop(op, "kind", kinds, ATOM_NUM);
  FzValue *buf = fzOpGetOperand(op, 1);
  LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, 0));
  LLVMValueRef p = fzLLElementPtr(E, op, buf, 2);
  if (!v || !p)
    return false;
  LLVMTypeRef t = LLVMTypeOf(v);
  bool isFloat = LLVMGetTypeKind(t) != LLVMIntegerTypeKind;
  LLVMValueRef r = NULL;
  if (isFloat && (kind == ATOM_MAX ||
                  kind == ATOM_MIN)) {
    r = cas_loop(E, p, v, kind == ATOM_MAX);
  } else if (kind == ATOM_EXCH && isFloat) {
    LLVMTypeRef it = LLVMIntTypeInContext(E->llctx, bit_width(t));
    r = LLVMBuildAtomicRMW(E->b, LLVMAtomicRMWBinOpXchg, p,
                           LLVMBuildBitCast(E->b, v, it, ""),
                           LLVMAtomicOrderingMonotonic, 0);
    r = LLVMBuildBitCast(E->b, r, t, "");
  } else {
    LLVMAtomicRMWBinOp bop;
    switch (kind) {
    case ATOM_ADD:
      bop = isFloat ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd;
      break;
    case ATOM_MAX:
      bop = LLVMAtomicRMWBinOpMax;
      break;
    case ATOM_MIN:
      bop = LLVMAtomicRMWBinOpMin;
      break;
    case ATOM_EXCH:
      bop = LLVMAtomicRMWBinOpXchg;
      break;
    default:
      return fzLLError(E, op, "emit-ptx: malformed 'kernel.atomic'");
    }
    r = LLVMBuildAtomicRMW(E->b, bop, p, v, LLVMAtomicOrderingMonotonic, 0);
  }
  fzLLSet(E, fzOpGetResult(op, 0), r);
  return true;
}

/*===--- vector accesses --------------------------------------------------===*/

/* Whether buf is a kernel parameter that no thread writes and no other
 * argument aliases (its loads may be ld.global.nc). */
static bool invariant_param(FzLLEmitter *E, FzValue *buf) {
  const FzNvKernelState *st = E->foreignData;
  FzValue *root = (FzValue *)fzLLGetRoot(E, buf);
  if (!st || !st->info || !root || !fzValueIsBlockArgument(root))
    return false;
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(st->info->func, 0));
  size_t i = fzValueGetIndex(root);
  return fzValueGetParentBlock(root) == entry && i < st->info->numParams &&
         st->info->noalias[i] && !st->info->written[i];
}

/* A `stream` load (data read once): ld.global[.nc].L1::no_allocate of
 * one, two or four b32 registers, as inline PTX (LLVM 19 has no cache
 * eviction hints on NVPTX loads). From a parameter no thread writes
 * (.nc) it has no side effects: the data does not change while the
 * kernel runs, so LLVM may move or merge it like the !invariant.load it
 * replaces; otherwise it clobbers memory, which keeps it in order with
 * the kernel's stores. */
static LLVMValueRef stream_load(FzLLEmitter *E, FzValue *buf, LLVMValueRef p,
                                LLVMTypeRef mem, unsigned bytes) {
  unsigned words = bytes / 4;
  LLVMTypeRef global = LLVMPointerTypeInContext(E->llctx, 1);
  LLVMValueRef addr = LLVMBuildAddrSpaceCast(E->b, p, global, "");
  LLVMTypeRef elems[4] = {E->tI32, E->tI32, E->tI32, E->tI32};
  LLVMTypeRef ret =
      words == 1 ? E->tI32 : LLVMStructTypeInContext(E->llctx, elems, words, 0);
  LLVMTypeRef fty = LLVMFunctionType(ret, &global, 1, 0);
  bool invariant = invariant_param(E, buf);
  const char *nc = invariant ? ".nc" : "";
  char text[96], cons[32];
  if (words == 1)
    snprintf(text, sizeof text, "ld.global%s.L1::no_allocate.u32 $0, [$1];",
             nc);
  else
    snprintf(text, sizeof text,
             "ld.global%s.L1::no_allocate.v%u.u32 {%s}, [$%u];", nc, words,
             words == 2 ? "$0, $1" : "$0, $1, $2, $3", words);
  snprintf(cons, sizeof cons, "%s,l%s",
           words == 1 ? "=r" : words == 2 ? "=r,=r" : "=r,=r,=r,=r",
           invariant ? "" : ",~{memory}");
  LLVMValueRef fn =
      LLVMGetInlineAsm(fty, text, strlen(text), cons, strlen(cons),
                       /*sideEffects=*/!invariant, /*alignStack=*/0,
                       LLVMInlineAsmDialectATT, /*canThrow=*/0);
  LLVMValueRef r = LLVMBuildCall2(E->b, fty, fn, &addr, 1, "");
  LLVMValueRef v = r;
  if (words > 1) {
    v = LLVMGetPoison(LLVMVectorType(E->tI32, words));
    for (unsigned w = 0; w < words; ++w)
      v = LLVMBuildInsertElement(E->b, v, LLVMBuildExtractValue(E->b, r, w, ""),
                                 i32c(E, w), "");
  }
  return LLVMBuildBitCast(E->b, v, mem, "");
}

static bool emit_vector_access(FzLLEmitter *E, FzOp *op) {
  bool isStore = fzKernelGetOpcode(op) == FZ_KERNEL_OP_VECTOR_STORE;
  size_t bi = isStore ? 1 : 0;
  FzValue *buf = fzOpGetOperand(op, bi);
  FzType *vt = isStore ? fzValueGetType(fzOpGetOperand(op, 0))
                       : fzValueGetType(fzOpGetResult(op, 0));
  FzType *elt = fzShapedTypeGetElementType(fzValueGetType(buf));
  unsigned lanes = fzLLLanes(vt);
  unsigned align = lanes * (unsigned)fzTypeGetStorageSize(elt);
  LLVMValueRef p = fzLLElementPtr(E, op, buf, bi + 1);
  if (!p)
    return false;
  LLVMTypeRef mem = LLVMVectorType(fzLLStorageType(E, elt), lanes);
  if (isStore) {
    LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, 0));
    if (!v)
      return false;
    LLVMSetAlignment(LLVMBuildStore(E->b, v, p), align);
    return true;
  }
  /* .L1::no_allocate needs PTX 7.4, which LLVM picks from sm_90 on (sm_80
   * gets 7.0): a plain load there. */
  if (fzKernelVectorLoadIsStream(op) && E->cpu &&
      strncmp(E->cpu, "sm_", 3) == 0 && atoi(E->cpu + 3) >= 90) {
    fzLLSet(E, fzOpGetResult(op, 0), stream_load(E, buf, p, mem, align));
    return true;
  }
  LLVMValueRef v = LLVMBuildLoad2(E->b, mem, p, "");
  LLVMSetAlignment(v, align);
  fzLLSet(E, fzOpGetResult(op, 0), v);
  return true;
}

/*===--- mma --------------------------------------------------------------===*/

static bool emit_mma(FzLLEmitter *E, FzOp *op) {
  FzType *t0 = fzValueGetType(fzOpGetOperand(op, 0));
  bool tf32 = fzTypeGetKind(t0) == FZ_TYPE_F32;
  FzType *ab = tf32 ? t0 : fzShapedTypeGetElementType(t0);
  const char *name = tf32 ? "llvm.nvvm.mma.m16n8k8.row.col.tf32"
                     : fzTypeGetKind(ab) == FZ_TYPE_BF16
                         ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
                         : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
  LLVMValueRef cvt = NULL;
  LLVMTypeRef cvtTy = NULL;
  if (tf32) {
    /* Each A and B register: cvt.rna.tf32.f32 (a b32 holding the tf32). */
    const char *cn = "llvm.nvvm.f2tf32.rna";
    unsigned cid = LLVMLookupIntrinsicID(cn, strlen(cn));
    if (!cid)
      return fzLLError(E, op, "emit-ptx: this LLVM has no %s", cn);
    cvtTy = LLVMIntrinsicGetType(E->llctx, cid, NULL, 0);
    cvt = LLVMGetIntrinsicDeclaration(E->mod, cid, NULL, 0);
  }
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMTypeRef fty = LLVMIntrinsicGetType(E->llctx, id, NULL, 0);
  if (LLVMCountParamTypes(fty) != 10)
    return fzLLError(E, op, "emit-ptx: unexpected signature of %s", name);
  LLVMTypeRef params[10];
  LLVMGetParamTypes(fty, params);
  LLVMValueRef args[10];
  for (size_t i = 0; i < 6; ++i) { /* A, B: one 32-bit register each */
    LLVMValueRef r = fzLLGet(E, fzOpGetOperand(op, i));
    if (!r)
      return false;
    if (tf32)
      r = LLVMBuildCall2(E->b, cvtTy, cvt, &r, 1, "");
    args[i] = LLVMBuildBitCast(E->b, r, params[i], "");
  }
  for (size_t i = 0; i < 2; ++i) { /* C: two f32 pairs */
    LLVMValueRef r = fzLLGet(E, fzOpGetOperand(op, 6 + i));
    if (!r)
      return false;
    for (unsigned h = 0; h < 2; ++h)
      args[6 + 2 * i + h] = LLVMBuildExtractElement(E->b, r, i32c(E, h), "");
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(E->mod, id, NULL, 0);
  LLVMValueRef d = LLVMBuildCall2(E->b, fty, fn, args, 10, "");
  for (unsigned i = 0; i < 2; ++i) {
    LLVMValueRef pair = LLVMGetUndef(LLVMVectorType(E->tF32, 2));
    for (unsigned h = 0; h < 2; ++h)
      pair = LLVMBuildInsertElement(
          E->b, pair, LLVMBuildExtractValue(E->b, d, 2 * i + h, ""),
          i32c(E, h), "");
    fzLLSet(E, fzOpGetResult(op, i), pair);
  }
  return true;
}

/*===--- fragments and asynchronous copies ------------------------------===*/

/* The declaration and type of NVVM intrinsic `name`, overloaded on
 * `ptr` when it is (ldmatrix takes any pointer type); false when this
 * LLVM does not know it. */
static bool nvvm_intrinsic(FzLLEmitter *E, const char *name, LLVMTypeRef ptr,
                           LLVMValueRef *fn, LLVMTypeRef *fty) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id)
    return false;
  size_t n = LLVMIntrinsicIsOverloaded(id) ? 1 : 0;
  *fn = LLVMGetIntrinsicDeclaration(E->mod, id, &ptr, n);
  *fty = LLVMIntrinsicGetType(E->llctx, id, &ptr, n);
  return *fn && *fty;
}

/* ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: one i32 per
 * matrix, each the bits of the result's vector<2xbf16/f16/i16>. */
static bool emit_ldmatrix(FzLLEmitter *E, FzOp *op) {
  int num = fzKernelLdmatrixGetNum(op);
  bool trans = fzKernelLdmatrixIsTransposed(op);
  if (num != 1 && num != 2 && num != 4)
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.ldmatrix'");
  char name[80];
  snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16",
           num, trans ? ".trans" : "");
  LLVMValueRef fn, p = fzLLElementPtr(E, op, fzOpGetOperand(op, 0), 1);
  LLVMTypeRef fty;
  if (!p)
    return false;
  if (!nvvm_intrinsic(E, name, LLVMTypeOf(p), &fn, &fty))
    return fzLLError(E, op, "emit-ptx: this LLVM has no %s", name);
  LLVMValueRef r = LLVMBuildCall2(E->b, fty, fn, &p, 1, "");
  for (int q = 0; q < num; ++q) {
    FzValue *res = fzOpGetResult(op, (size_t)q);
    LLVMValueRef bits = num == 1 ? r : LLVMBuildExtractValue(E->b, r, q, "");
    fzLLSet(E, res,
            LLVMBuildBitCast(E->b, bits, fzLLType(E, fzValueGetType(res)),
                             ""));
  }
  return true;
}

/* cp.async.cg.shared.global [dst], [src], 16{, src_size} (.ca for 4 or
 * 8 bytes: .cg caches in L2 only and copies only 16). Shared pointers
 * are 32-bit (ptx.c sets LLVM's nvptx-short-ptr), and LLVM 19 selects
 * the cp.async intrinsics only for 64-bit ones, so the instruction is
 * inline assembly: the 32-bit shared address ("r"), the global one
 * ("l", the source addrspacecast to global), the byte count an i32; it
 * clobbers memory, so LLVM keeps it in order with every access (as with
 * the intrinsic, which reads and writes memory). */
static bool emit_cp_async(FzLLEmitter *E, FzOp *op) {
  size_t si = fzKernelCpAsyncGetSourceOperand(op);
  bool sized = fzKernelCpAsyncHasSourceSize(op);
  int64_t size = fzKernelCpAsyncGetSize(op);
  if (size < 0)
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.cp_async' size");
  LLVMValueRef dst = fzLLElementPtrAt(E, op, fzOpGetOperand(op, 0), 1);
  LLVMValueRef src = fzLLElementPtrAt(E, op, fzOpGetOperand(op, si), si + 1);
  LLVMValueRef bytes =
      sized ? fzLLGet(E, fzOpGetOperand(op, fzOpGetNumOperands(op) - 1))
            : NULL;
  if (!dst || !src || (sized && !bytes))
    return false;
  LLVMTypeRef global = LLVMPointerTypeInContext(E->llctx, 1);
  LLVMValueRef args[3] = {LLVMBuildPtrToInt(E->b, dst, E->tI32, ""),
                          LLVMBuildAddrSpaceCast(E->b, src, global, ""),
                          sized ? LLVMBuildTrunc(E->b, bytes, E->tI32, "")
                                : NULL};
  LLVMTypeRef params[3] = {E->tI32, global, E->tI32};
  unsigned n = sized ? 3 : 2;
  LLVMTypeRef fty = LLVMFunctionType(E->tVoid, params, n, 0);
  char text[64];
  snprintf(text, sizeof text, "cp.async.%s.shared.global [$0], [$1], %lld%s;",
           size == 16 ? "cg" : "ca", (long long)size, sized ? ", $2" : "");
  const char *cons = sized ? "r,l,r,~{memory}" : "r,l,~{memory}";
  LLVMValueRef fn =
      LLVMGetInlineAsm(fty, text, strlen(text), (char *)cons, strlen(cons),
                       /*sideEffects=*/1, /*alignStack=*/0,
                       LLVMInlineAsmDialectATT, /*canThrow=*/0);
  LLVMBuildCall2(E->b, fty, fn, args, n, "");
  return true;
}

static bool emit_cp_async_commit(FzLLEmitter *E, FzOp *op) {
  (void)op;
  fzLLCallIntrinsic(E, "llvm.nvvm.cp.async.commit.group", NULL, 0, NULL, 0);
  return true;
}

static bool emit_cp_async_wait(FzLLEmitter *E, FzOp *op) {
  int64_t n = fzKernelCpAsyncWaitGetPending(op);
  if (n < 0)
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.cp_async_wait'");
  LLVMValueRef arg = i32c(E, n);
  fzLLCallIntrinsic(E, "llvm.nvvm.cp.async.wait.group", NULL, 0, &arg, 1);
  return true;
}

/* extractelement / insertelement: register moves in PTX. */
static bool emit_extract(FzLLEmitter *E, FzOp *op) {
  LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, 0));
  int64_t pos = fzKernelExtractGetPosition(op);
  if (!v)
    return false;
  if (pos < 0 || pos >= (int64_t)fzLLLanes(fzValueGetType(fzOpGetOperand(op,
                                                                        0))))
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.extract'");
  fzLLSet(E, fzOpGetResult(op, 0),
          LLVMBuildExtractElement(E->b, v, i32c(E, pos), ""));
  return true;
}

static bool emit_from_elements(FzLLEmitter *E, FzOp *op) {
  FzValue *res = fzOpGetResult(op, 0);
  LLVMValueRef v = LLVMGetPoison(fzLLType(E, fzValueGetType(res)));
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    LLVMValueRef x = fzLLGet(E, fzOpGetOperand(op, i));
    if (!x)
      return false;
    v = LLVMBuildInsertElement(E->b, v, x, i32c(E, (int64_t)i), "");
  }
  fzLLSet(E, res, v);
  return true;
}

/*===--- The table --------------------------------------------------------===*/

typedef struct KernelOpEmitter {
  bool (*emit)(FzLLEmitter *E, FzOp *op);
  /* The op synchronizes or communicates with other threads (the kernel
   * then loses LLVM's `nosync`). */
  bool syncs;
} KernelOpEmitter;

static const KernelOpEmitter kOps[FZ_KERNEL_NUM_OPS] = {
    [FZ_KERNEL_OP_THREAD_ID] = {emit_id, false},
    [FZ_KERNEL_OP_BLOCK_ID] = {emit_id, false},
    [FZ_KERNEL_OP_BLOCK_DIM] = {emit_id, false},
    [FZ_KERNEL_OP_GRID_DIM] = {emit_id, false},
    [FZ_KERNEL_OP_LANE_ID] = {emit_id, false},
    [FZ_KERNEL_OP_SHARED_ALLOC] = {emit_shared_alloc, false},
    [FZ_KERNEL_OP_DYNAMIC_SHARED] = {emit_dynamic_shared, false},
    [FZ_KERNEL_OP_BARRIER] = {emit_barrier, true},
    [FZ_KERNEL_OP_SHUFFLE] = {emit_shuffle, true},
    [FZ_KERNEL_OP_ATOMIC] = {emit_atomic, true},
    [FZ_KERNEL_OP_VECTOR_LOAD] = {emit_vector_access, false},
    [FZ_KERNEL_OP_VECTOR_STORE] = {emit_vector_access, false},
    [FZ_KERNEL_OP_MMA] = {emit_mma, true},
    [FZ_KERNEL_OP_LDMATRIX] = {emit_ldmatrix, true},
    [FZ_KERNEL_OP_CP_ASYNC] = {emit_cp_async, true},
    [FZ_KERNEL_OP_CP_ASYNC_COMMIT] = {emit_cp_async_commit, true},
    [FZ_KERNEL_OP_CP_ASYNC_WAIT] = {emit_cp_async_wait, true},
    [FZ_KERNEL_OP_EXTRACT] = {emit_extract, false},
    [FZ_KERNEL_OP_FROM_ELEMENTS] = {emit_from_elements, false},
    [FZ_KERNEL_OP_MBARRIER_INIT] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_MBARRIER_ARRIVE] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_MBARRIER_WAIT] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_BULK_COPY] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_FENCE_PROXY_ASYNC] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_WGMMA_FENCE] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_WGMMA] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_WGMMA_COMMIT] = {fzNvEmitSm90Op, true},
    [FZ_KERNEL_OP_WGMMA_WAIT] = {fzNvEmitSm90Op, true},
};

bool fzNvEmitKernelOp(FzLLEmitter *E, FzOp *op) {
  FzKernelOpcode k = fzKernelGetOpcode(op);
  if (k < FZ_KERNEL_NUM_OPS && kOps[k].emit)
    return kOps[k].emit(E, op);
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return fzLLError(E, op,
                   "emit-ptx: '%.*s' has no translation in a kernel body "
                   "(kernel bodies hold kernel ops and the loop dialect's "
                   "ops)",
                   (int)n.length, n.data);
}

bool fzNvKernelOpSynchronizes(const FzOp *op) {
  FzKernelOpcode k = fzKernelGetOpcode(op);
  return k < FZ_KERNEL_NUM_OPS && kOps[k].syncs;
}
