/* dialects/kernel/ops_frag.c - register fragments: kernel.ldmatrix (PTX
 * ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16, the loads
 * that feed kernel.mma from shared memory) and the two ops that move
 * between vectors and scalars, kernel.extract and kernel.from_elements
 * (an mma's accumulator pairs to the scalars of a fused epilogue and
 * back to a pair for a 4- or 8-byte store).
 *
 * Custom forms:
 *   %r:4 = kernel.ldmatrix x4 %s[%o] : buffer<?xbf16, 3>, vector<2xbf16>
 *   %r:2 = kernel.ldmatrix x2 trans %s[%i, %j] : buffer<64x32xf16, 3>, vector<2xf16>
 *   %x = kernel.extract %v[1] : vector<2xf32>
 *   %v = kernel.from_elements %a, %b : vector<2xbf16>
 *
 * ldmatrix is a collective of the warp: lane l (l < 8 * num) gives the
 * address of row l % 8 of matrix l / 8 (8 contiguous 16-bit elements,
 * 16-byte aligned); result r of lane l is matrix r's elements (l / 4,
 * 2 (l % 4) + h) for h = 0, 1, or with `trans` its elements
 * (2 (l % 4) + h, l / 4): exactly the register fragments of kernel.mma
 * (docs/dialects/kernel.md has the tables).
 */
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

/*===--- ldmatrix -------------------------------------------------------===*/

int fzKernelLdmatrixGetNum(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_LDMATRIX)
    return -1;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("num"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_INTEGER)
    return -1;
  int64_t n = fzIntegerAttrGetValue(a);
  return n == 1 || n == 2 || n == 4 ? (int)n : -1;
}

bool fzKernelLdmatrixIsTransposed(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("trans"));
  return a && (fzAttrGetKind(a) == FZ_ATTR_UNIT ||
               (fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a)));
}

static bool is_16bit(const FzType *t) {
  FzTypeKind k = fzTypeGetKind(t);
  return k == FZ_TYPE_F16 || k == FZ_TYPE_BF16 ||
         (fzTypeIsInteger(t) && fzTypeGetBitWidth(t) == 16);
}

static bool ldmatrix_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  int num = fzKernelLdmatrixGetNum(op);
  if (num < 0)
    return fzOpEmitError(op, "requires 'num' (the number of 8x8 matrices) "
                             "to be 1, 2 or 4");
  FzType *bt = fzKernelOperandType(op, 0);
  if (!fzKernelIsBuffer(bt) ||
      fzBufferTypeGetMemorySpace(bt) != FZ_KERNEL_SPACE_SHARED)
    return fzOpEmitError(op, "operand #0 must be a buffer in shared memory "
                             "(3)");
  size_t rank = fzShapedTypeGetRank(bt);
  if (rank == 0 || !fzKernelCheckIndices(op, 1, rank))
    return rank == 0 ? fzOpEmitError(op, "cannot read rows of a rank-0 "
                                         "buffer")
                     : false;
  const int64_t *strides = fzBufferTypeGetStrides(bt);
  if (strides && strides[rank - 1] != 1)
    return fzOpEmitError(op, "the buffer's last dimension must have stride "
                             "1 (each row is 8 contiguous elements)");
  FzType *elt = fzShapedTypeGetElementType(bt);
  if (!is_16bit(elt))
    return fzOpEmitError(op, "reads 16-bit elements (f16, bf16, i16)");
  if (fzOpGetNumResults(op) != (size_t)num)
    return fzOpEmitError(op, "has %zu results; x%d gives %d registers",
                         fzOpGetNumResults(op), num, num);
  for (size_t i = 0; i < (size_t)num; ++i) {
    FzType *r = fzKernelResultType(op, i);
    if (fzTypeGetKind(r) != FZ_TYPE_VECTOR || fzShapedTypeGetRank(r) != 1 ||
        fzShapedTypeGetDim(r, 0) != 2 || fzShapedTypeGetElementType(r) != elt)
      return fzOpEmitError(op, "result #%zu must be vector<2x...> of the "
                               "buffer's element type", i);
  }
  return true;
}

static void ldmatrix_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"num", "trans", NULL};
  fzAsmPrintf(p, " x%d", fzKernelLdmatrixGetNum(op));
  if (fzKernelLdmatrixIsTransposed(op))
    fzAsmPrint(p, " trans");
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzKernelPrintIndices(p, op, 1);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelResultType(op, 0));
}

/* ldmatrix ::= (`x1` | `x2` | `x4`) `trans`? %b `[` indices `]`
 *              attr-dict? `:` buffer-type `,` register-type */
static bool ldmatrix_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  int num = fzAsmParseOptionalKeyword(p, "x1")   ? 1
            : fzAsmParseOptionalKeyword(p, "x2") ? 2
            : fzAsmParseOptionalKeyword(p, "x4") ? 4
                                                 : 0;
  if (!num)
    return fzAsmEmitError(p, "expected x1, x2 or x4");
  bool trans = fzAsmParseOptionalKeyword(p, "trans");
  FzUnresolvedOperand b, idx[FZ_GRAPH_MAX_RANK];
  size_t n;
  FzAttr *attrs;
  FzType *bt, *rt;
  if (!fzAsmParseOperand(p, &b) || !fzKernelParseIndices(p, idx, &n) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &bt) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &rt))
    return false;
  if (!fzAsmResolveOperands(p, &b, 1, &bt, 1, loc, st) ||
      !fzKernelResolveIndices(p, idx, n, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("num"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32), num));
  if (trans)
    fzOpStateAddProp(st, FZ_STR("trans"), fzUnitAttrGet(ctx));
  fzOpStateAddAttrDict(st, attrs);
  FzType *res[4] = {rt, rt, rt, rt};
  fzOpStateAddResults(st, (size_t)num, res);
  return true;
}

static const char *const kLdmatrixAttrs[] = {"num", "trans", NULL};

/* clang-format off */
FZ_KERNEL_OP(LDMATRIX, "kernel.ldmatrix", "loads 1, 2 or 4 8x8 matrices of "
             "16-bit elements from shared memory into the warp's mma "
             "fragment registers (ldmatrix.sync)", 0, FZ_VARIADIC,
             FZ_VARIADIC, 0, kLdmatrixAttrs, ldmatrix_verify, ldmatrix_print,
             ldmatrix_parse)
/* clang-format on */

/*===--- extract, from_elements -----------------------------------------===*/

int64_t fzKernelExtractGetPosition(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_EXTRACT)
    return -1;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("position"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : -1;
}

static bool is_vector1(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_VECTOR &&
         fzShapedTypeGetRank(t) == 1;
}

static bool extract_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzType *vt = fzKernelOperandType(op, 0);
  if (!is_vector1(vt))
    return fzOpEmitError(op, "operand must be a 1-d vector");
  int64_t pos = fzKernelExtractGetPosition(op);
  if (pos < 0 || pos >= fzShapedTypeGetDim(vt, 0))
    return fzOpEmitError(op, "position %lld is outside the vector's %lld "
                             "lanes", (long long)pos,
                         (long long)fzShapedTypeGetDim(vt, 0));
  if (fzKernelResultType(op, 0) != fzShapedTypeGetElementType(vt))
    return fzOpEmitError(op, "result must have the vector's element type");
  return true;
}

static void extract_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"position", NULL};
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzAsmPrintf(p, "[%lld]", (long long)fzKernelExtractGetPosition(op));
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
}

/* extract ::= %v `[` integer `]` attr-dict? `:` vector-type */
static bool extract_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand v;
  int64_t pos;
  FzAttr *attrs;
  FzType *vt;
  if (!fzAsmParseOperand(p, &v) || !fzAsmParsePunct(p, "[") ||
      !fzAsmParseInteger(p, &pos) || !fzAsmParsePunct(p, "]") ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParsePunct(p, ":"))
    return false;
  FzLoc *tloc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseType(p, &vt))
    return false;
  if (!is_vector1(vt))
    return fzAsmEmitErrorAt(p, tloc, "expected a 1-d vector type");
  if (!fzAsmResolveOperands(p, &v, 1, &vt, 1, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("position"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), pos));
  fzOpStateAddAttrDict(st, attrs);
  FzType *elt = fzShapedTypeGetElementType(vt);
  fzOpStateAddResults(st, 1, &elt);
  return true;
}

static bool from_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzType *vt = fzKernelResultType(op, 0);
  if (!is_vector1(vt))
    return fzOpEmitError(op, "result must be a 1-d vector");
  if ((int64_t)fzOpGetNumOperands(op) != fzShapedTypeGetDim(vt, 0))
    return fzOpEmitError(op, "expects one operand per lane (%lld), got %zu",
                         (long long)fzShapedTypeGetDim(vt, 0),
                         fzOpGetNumOperands(op));
  FzType *elt = fzShapedTypeGetElementType(vt);
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    if (fzKernelOperandType(op, i) != elt)
      return fzOpEmitError(op, "operand #%zu must have the vector's element "
                               "type", i);
  return true;
}

static void from_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzKernelPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelResultType(op, 0));
}

/* The simulator's limit on vector lanes (sim_internal.h). */
enum { MAX_LANES = 64 };

/* from_elements ::= operand-list attr-dict? `:` vector-type */
static bool from_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand *u, ops[MAX_LANES];
  size_t n;
  FzAttr *attrs;
  FzType *vt;
  if (!fzAsmParseOperandList(p, &u, &n))
    return false;
  if (n > MAX_LANES)
    return fzAsmEmitError(p, "at most %d lanes", MAX_LANES);
  if (n)
    memcpy(ops, u, n * sizeof *u);
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParsePunct(p, ":"))
    return false;
  FzLoc *tloc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseType(p, &vt))
    return false;
  if (!is_vector1(vt))
    return fzAsmEmitErrorAt(p, tloc, "expected a 1-d vector type");
  FzType *elt = fzShapedTypeGetElementType(vt);
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &ops[i], 1, &elt, 1, loc, st))
      return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddResults(st, 1, &vt);
  return true;
}

static const char *const kPositionAttr[] = {"position", NULL};

/* clang-format off */
FZ_KERNEL_OP(EXTRACT, "kernel.extract", "reads one lane of a vector (an "
             "mma accumulator element)", FZ_TRAIT_PURE, 1, 1, 0,
             kPositionAttr, extract_verify, extract_print, extract_parse)
FZ_KERNEL_OP(FROM_ELEMENTS, "kernel.from_elements", "builds a vector from "
             "one scalar per lane", FZ_TRAIT_PURE, FZ_VARIADIC, 1, 0, NULL,
             from_verify, from_print, from_parse)
/* clang-format on */
