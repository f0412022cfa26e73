/* dialects/kernel/ops_mem.c - memory and matrix ops of the kernel level:
 * atomics, aligned vector accesses, tensor-core mma.
 *
 * Custom forms:
 *   %old = kernel.atomic add %v, %b[%i, %j] : buffer<4x8xf32>
 *   %v = kernel.vector_load %b[%i, %j] : buffer<4x8xf32>, vector<4xf32>
 *   %v = kernel.vector_load stream %b[%i, %j] : buffer<...>, vector<...>
 *   kernel.vector_store %v, %b[%i, %j] : buffer<4x8xf32>, vector<4xf32>
 *   %d0, %d1 = kernel.mma m16n8k16 [%a0, %a1, %a2, %a3], [%b0, %b1],
 *        [%c0, %c1] : vector<2xbf16>, vector<2xf32>
 *   %d0, %d1 = kernel.mma m16n8k8 [%a0, %a1, %a2, %a3], [%b0, %b1],
 *        [%c0, %c1] : f32, vector<2xf32>
 *
 * kernel.vector_load/store differ from loop's by the hardware contract:
 * a vector of 4, 8 or 16 bytes (ld/st.v2/.v4), the last dimension of
 * stride 1, and an address aligned to the vector's size (the simulator
 * checks it; buffers start 16-byte aligned). `stream` (a unit `stream`
 * property, global memory only) marks data read once: PTX's
 * .L1::no_allocate, so that it does not evict from L1 what other loads
 * reuse; the value is the same. kernel.mma is PTX
 * mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 with
 * one operand per PTX register: A is four .b32 registers of two 16-bit
 * values (vector<2xbf16>), B two, C and D four f32 registers as two
 * vector<2xf32> pairs; the per-lane layout is PTX's
 * (docs/dialects/kernel.md). The m16n8k8 form is
 * mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 on f32 registers
 * (A four, B two: one element each), each rounded to tf32 first as
 * cvt.rna.tf32.f32 does (to nearest, ties away from zero, 10-bit
 * mantissa); C and D as for m16n8k16.
 */
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

/*===--- atomics --------------------------------------------------------===*/

static const char *const kKinds[FZ_KERNEL_ATOMIC_NUM] = {"add", "max", "min",
                                                         "exch"};

int fzKernelAtomicGetKind(const FzOp *op) {
  FzStringRef s = fzKernelStringProp(op, "kind");
  for (int i = 0; i < FZ_KERNEL_ATOMIC_NUM; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(kKinds[i])))
      return i;
  return -1;
}

static bool atomic_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  if (fzKernelAtomicGetKind(op) < 0)
    return fzOpEmitError(op, "requires 'kind' to be \"add\", \"max\", "
                             "\"min\" or \"exch\"");
  FzType *bt = fzKernelOperandType(op, 1);
  if (!fzKernelIsBuffer(bt))
    return fzOpEmitError(op, "operand #1 must be a buffer");
  unsigned space = fzBufferTypeGetMemorySpace(bt);
  if (space != FZ_KERNEL_SPACE_GLOBAL && space != FZ_KERNEL_SPACE_SHARED)
    return fzOpEmitError(op, "the buffer must be in global (0) or shared "
                             "(3) memory");
  FzType *elt = fzShapedTypeGetElementType(bt);
  FzTypeKind k = fzTypeGetKind(elt);
  bool ok = k == FZ_TYPE_F32 || k == FZ_TYPE_F64 ||
            (fzTypeIsInteger(elt) && (fzTypeGetBitWidth(elt) == 32 ||
                                      fzTypeGetBitWidth(elt) == 64));
  if (!ok)
    return fzOpEmitError(op, "atomics act on i32, i64, f32 or f64 elements");
  if (fzKernelOperandType(op, 0) != elt || fzKernelResultType(op, 0) != elt)
    return fzOpEmitError(op, "the value and the result must have the "
                             "buffer's element type");
  return fzKernelCheckIndices(op, 2, fzShapedTypeGetRank(bt));
}

static void atomic_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"kind", NULL};
  int k = fzKernelAtomicGetKind(op);
  fzAsmPrintf(p, " %s ", k >= 0 ? kKinds[k] : "?");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 1));
  fzKernelPrintIndices(p, op, 2);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 1));
}

/* atomic ::= kind %v `,` %b `[` indices `]` attr-dict? `:` buffer-type */
static bool atomic_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzStringRef kind;
  if (!fzAsmParseOptionalIdentifier(p, &kind))
    return fzAsmEmitError(p, "expected an atomic kind (add, max, min, exch)");
  FzUnresolvedOperand v, b, idx[FZ_GRAPH_MAX_RANK];
  size_t n;
  FzAttr *attrs;
  FzType *bt;
  if (!fzAsmParseOperand(p, &v) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseOperand(p, &b) || !fzKernelParseIndices(p, idx, &n) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &bt))
    return false;
  if (!fzKernelIsBuffer(bt))
    return fzAsmEmitError(p, "expected a buffer type");
  FzType *elt = fzShapedTypeGetElementType(bt);
  if (!fzAsmResolveOperands(p, &v, 1, &elt, 1, loc, st) ||
      !fzAsmResolveOperands(p, &b, 1, &bt, 1, loc, st) ||
      !fzKernelResolveIndices(p, idx, n, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("kind"), fzStringAttrGet(ctx, kind));
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddResults(st, 1, &elt);
  return true;
}

static const char *const kKindAttr[] = {"kind", NULL};

FZ_KERNEL_OP(ATOMIC, "kernel.atomic", "read-modify-writes one element "
             "atomically (add, max, min, exch); returns the old value", 0, 
             FZ_VARIADIC, 1, 0, kKindAttr, atomic_verify, atomic_print,
             atomic_parse)

/*===--- vector load / store --------------------------------------------===*/

static bool vector_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  bool isStore = fzKernelGetOpcode(op) == FZ_KERNEL_OP_VECTOR_STORE;
  size_t bi = isStore ? 1 : 0;
  FzType *bt = fzKernelOperandType(op, bi);
  FzType *vt = isStore ? fzKernelOperandType(op, 0) : fzKernelResultType(op, 0);
  if (!fzKernelIsBuffer(bt))
    return fzOpEmitError(op, "operand #%zu must be a buffer", bi);
  size_t rank = fzShapedTypeGetRank(bt);
  if (!fzKernelCheckIndices(op, bi + 1, rank))
    return false;
  FzType *elt = fzShapedTypeGetElementType(bt);
  if (!vt || fzTypeGetKind(vt) != FZ_TYPE_VECTOR ||
      fzShapedTypeGetRank(vt) != 1 || fzShapedTypeGetElementType(vt) != elt)
    return fzOpEmitError(op, "expects a 1-d vector of the buffer's element "
                             "type");
  if (rank == 0)
    return fzOpEmitError(op, "cannot access a vector in a rank-0 buffer");
  const int64_t *strides = fzBufferTypeGetStrides(bt);
  if (strides && strides[rank - 1] != 1)
    return fzOpEmitError(op, "the buffer's last dimension must have stride 1");
  int64_t lanes = fzShapedTypeGetDim(vt, 0);
  int64_t bytes = lanes * (int64_t)fzTypeGetStorageSize(elt);
  if (lanes < 2 || (bytes != 4 && bytes != 8 && bytes != 16))
    return fzOpEmitError(op, "moves %lld bytes in %lld lanes; a vector "
                             "access moves 4, 8 or 16 bytes in 2 or more "
                             "lanes", (long long)bytes, (long long)lanes);
  FzAttr *stream = fzOpGetInherentAttr(op, FZ_STR("stream"));
  if (stream && (isStore || fzAttrGetKind(stream) != FZ_ATTR_UNIT))
    return fzOpEmitError(op, "'stream' is a unit property of vector loads");
  if (stream && fzBufferTypeGetMemorySpace(bt) != FZ_KERNEL_SPACE_GLOBAL)
    return fzOpEmitError(op, "'stream' loads read global memory (space 0)");
  return true;
}

bool fzKernelVectorLoadIsStream(const FzOp *op) {
  return fzKernelGetOpcode(op) == FZ_KERNEL_OP_VECTOR_LOAD &&
         fzOpGetInherentAttr(op, FZ_STR("stream")) != NULL;
}

static void vector_print(FzOp *op, FzAsmPrinter *p) {
  bool isStore = fzKernelGetOpcode(op) == FZ_KERNEL_OP_VECTOR_STORE;
  size_t bi = isStore ? 1 : 0;
  static const char *const elided[] = {"stream", NULL};
  fzAsmPrint(p, fzKernelVectorLoadIsStream(op) ? " stream " : " ");
  if (isStore) {
    fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
    fzAsmPrint(p, ", ");
  }
  fzAsmPrintOperand(p, fzOpGetOperand(op, bi));
  fzKernelPrintIndices(p, op, bi + 1);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, bi));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, isStore ? fzKernelOperandType(op, 0)
                            : fzKernelResultType(op, 0));
}

/* vector_load ::= `stream`? %b `[` indices `]` attr-dict? `:` buffer-type
 *                 `,` vtype
 * vector_store ::= %v `,` %b `[` indices `]` attr-dict? `:` buffer-type
 *                  `,` vtype */
static bool vector_parse_common(FzAsmParser *p, FzOpState *st, bool isStore) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!isStore && fzAsmParseOptionalKeyword(p, "stream"))
    fzOpStateAddProp(st, FZ_STR("stream"),
                     fzUnitAttrGet(fzAsmParserGetContext(p)));
  FzUnresolvedOperand v, b, idx[FZ_GRAPH_MAX_RANK];
  size_t n;
  FzAttr *attrs;
  FzType *bt, *vt;
  if (isStore && (!fzAsmParseOperand(p, &v) || !fzAsmParsePunct(p, ",")))
    return false;
  if (!fzAsmParseOperand(p, &b) || !fzKernelParseIndices(p, idx, &n) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &bt) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &vt))
    return false;
  if (isStore && !fzAsmResolveOperands(p, &v, 1, &vt, 1, loc, st))
    return false;
  if (!fzAsmResolveOperands(p, &b, 1, &bt, 1, loc, st) ||
      !fzKernelResolveIndices(p, idx, n, loc, st))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  if (!isStore)
    fzOpStateAddResults(st, 1, &vt);
  return true;
}

static bool vload_parse(FzAsmParser *p, FzOpState *st) {
  return vector_parse_common(p, st, false);
}

static bool vstore_parse(FzAsmParser *p, FzOpState *st) {
  return vector_parse_common(p, st, true);
}

/* clang-format off */
static const char *const kStreamAttr[] = {"stream", NULL};

FZ_KERNEL_OP(VECTOR_LOAD, "kernel.vector_load", "reads 4, 8 or 16 aligned "
             "contiguous bytes as a vector", 0, FZ_VARIADIC, 1, 0, kStreamAttr,
             vector_verify, vector_print, vload_parse)
FZ_KERNEL_OP(VECTOR_STORE, "kernel.vector_store", "writes a vector of 4, 8 "
             "or 16 bytes to aligned contiguous memory", 0, FZ_VARIADIC, 0, 0,
             NULL, vector_verify, vector_print, vstore_parse)
/* clang-format on */

/*===--- mma ------------------------------------------------------------===*/

static bool is_vec(const FzType *t, int64_t lanes, FzType *elt) {
  return t && fzTypeGetKind(t) == FZ_TYPE_VECTOR &&
         fzShapedTypeGetRank(t) == 1 && fzShapedTypeGetDim(t, 0) == lanes &&
         fzShapedTypeGetElementType(t) == elt;
}

static bool mma_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzStringRef shape = fzKernelStringProp(op, "shape");
  bool k8 = fzStringRefEqual(shape, FZ_STR("m16n8k8"));
  if (!k8 && !fzStringRefEqual(shape, FZ_STR("m16n8k16")))
    return fzOpEmitError(op, "requires 'shape' to be \"m16n8k16\" or "
                             "\"m16n8k8\"");
  FzContext *ctx = fzOpGetContext(op);
  FzType *f32 = fzF32TypeGet(ctx);
  FzType *a = fzKernelOperandType(op, 0);
  if (k8) {
    /* tf32: one f32 element per A and B register. */
    for (size_t i = 0; i < 6; ++i)
      if (fzKernelOperandType(op, i) != f32)
        return fzOpEmitError(op, "m16n8k8 (tf32): operand #%zu must be "
                                 "f32", i);
  } else {
    FzType *ab = a && fzTypeGetKind(a) == FZ_TYPE_VECTOR
                     ? fzShapedTypeGetElementType(a)
                     : NULL;
    if (!ab || (fzTypeGetKind(ab) != FZ_TYPE_F16 &&
                fzTypeGetKind(ab) != FZ_TYPE_BF16))
      return fzOpEmitError(op, "A and B registers must be vector<2xf16> or "
                               "vector<2xbf16>");
    for (size_t i = 0; i < 6; ++i)
      if (!is_vec(fzKernelOperandType(op, i), 2, ab))
        return fzOpEmitError(op, "operand #%zu must be vector<2x...> of the "
                                 "first register's element type", i);
  }
  for (size_t i = 6; i < 8; ++i)
    if (!is_vec(fzKernelOperandType(op, i), 2, f32))
      return fzOpEmitError(op, "accumulator operand #%zu must be "
                               "vector<2xf32>", i);
  for (size_t i = 0; i < 2; ++i)
    if (!is_vec(fzKernelResultType(op, i), 2, f32))
      return fzOpEmitError(op, "result #%zu must be vector<2xf32>", i);
  return true;
}

static void print_regs(FzAsmPrinter *p, FzOp *op, size_t from, size_t to) {
  fzAsmPrint(p, "[");
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzAsmPrint(p, "]");
}

static void mma_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"shape", NULL};
  bool k8 = fzStringRefEqual(fzKernelStringProp(op, "shape"),
                             FZ_STR("m16n8k8"));
  fzAsmPrint(p, k8 ? " m16n8k8 " : " m16n8k16 ");
  print_regs(p, op, 0, 4);
  fzAsmPrint(p, ", ");
  print_regs(p, op, 4, 6);
  fzAsmPrint(p, ", ");
  print_regs(p, op, 6, 8);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelOperandType(op, 6));
}

/* `[` n operands `]` into out. */
static bool parse_regs(FzAsmParser *p, size_t n, FzUnresolvedOperand *out) {
  FzUnresolvedOperand *u;
  size_t got;
  if (!fzAsmParsePunct(p, "[") || !fzAsmParseOperandList(p, &u, &got) ||
      !fzAsmParsePunct(p, "]"))
    return false;
  if (got != n)
    return fzAsmEmitError(p, "expected %zu registers, got %zu", n, got);
  memcpy(out, u, n * sizeof *u);
  return true;
}

/* mma ::= (`m16n8k16` | `m16n8k8`) `[` a0..a3 `]` `,` `[` b0, b1 `]` `,` `[` c0, c1 `]`
 *         attr-dict? `:` ab-register-type `,` c-register-type */
static bool mma_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand ops[8];
  FzAttr *attrs;
  FzType *ab, *c;
  bool k8 = fzAsmParseOptionalKeyword(p, "m16n8k8");
  if ((!k8 && !fzAsmParseKeyword(p, "m16n8k16")) || !parse_regs(p, 4, ops) ||
      !fzAsmParsePunct(p, ",") || !parse_regs(p, 2, ops + 4) ||
      !fzAsmParsePunct(p, ",") || !parse_regs(p, 2, ops + 6) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &ab) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &c))
    return false;
  FzType *types[8] = {ab, ab, ab, ab, ab, ab, c, c};
  if (!fzAsmResolveOperands(p, ops, 8, types, 8, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("shape"),
                   fzStringAttrGet(ctx, k8 ? FZ_STR("m16n8k8")
                                           : FZ_STR("m16n8k16")));
  fzOpStateAddAttrDict(st, attrs);
  FzType *res[2] = {c, c};
  fzOpStateAddResults(st, 2, res);
  return true;
}

static const char *const kShapeAttr[] = {"shape", NULL};

FZ_KERNEL_OP(MMA, "kernel.mma", "a warp-wide tensor-core multiply-add "
             "D = A*B + C on m16n8k16 (bf16/f16) or m16n8k8 (tf32) register "
             "fragments (mma.sync)", 0, 8,
             2, 0, kShapeAttr, mma_verify, mma_print, mma_parse)
