/* dialects/kernel/ops_thread.c - the thread hierarchy and what threads
 * share: thread/block ids and dims, lane ids, shared memory, barriers and
 * warp shuffles.
 *
 * Custom forms:
 *   %t = kernel.thread_id x          (also block_id, block_dim, grid_dim;
 *                                     dimension x, y or z; index result)
 *   %l = kernel.lane_id              (linear thread id mod 32)
 *   %s = kernel.shared_alloc : buffer<32xf32, 3>
 *   %d = kernel.dynamic_shared : buffer<?xf32, 3>
 *   kernel.barrier
 *   %r, %ok = kernel.shuffle xor %v, %offset, 32 : f32
 *
 * All of them must be nested in a kernel.func; shared memory is declared
 * in the kernel's entry block (one allocation per block per op, like a
 * __shared__ variable). Ids are pure; allocations, barriers and shuffles
 * are not (a shuffle is a collective over the warp: it must not be moved
 * across control flow).
 */
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

static const char *const kDims[3] = {"x", "y", "z"};

int fzKernelGetDimension(const FzOp *op) {
  FzStringRef s = fzKernelStringProp(op, "dimension");
  for (int i = 0; i < 3; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(kDims[i])))
      return i;
  return -1;
}

/*===--- ids ------------------------------------------------------------===*/

static bool id_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_LANE_ID &&
      fzKernelGetDimension(op) < 0)
    return fzOpEmitError(op, "requires 'dimension' to be \"x\", \"y\" or "
                             "\"z\"");
  if (!fzKernelIsIndex(fzKernelResultType(op, 0)))
    return fzOpEmitError(op, "result must have type index");
  return true;
}

static void id_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"dimension", NULL};
  int d = fzKernelGetDimension(op);
  if (d >= 0)
    fzAsmPrintf(p, " %s", kDims[d]);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
}

static bool id_parse_common(FzAsmParser *p, FzOpState *st, bool withDim) {
  FzContext *ctx = fzAsmParserGetContext(p);
  if (withDim) {
    FzStringRef d;
    FzLoc *loc = fzAsmParserGetCurrentLoc(p);
    if (!fzAsmParseOptionalIdentifier(p, &d) ||
        !(fzStringRefEqual(d, FZ_STR("x")) ||
          fzStringRefEqual(d, FZ_STR("y")) || fzStringRefEqual(d, FZ_STR("z"))))
      return fzAsmEmitErrorAt(p, loc, "expected dimension x, y or z");
    fzOpStateAddProp(st, FZ_STR("dimension"), fzStringAttrGet(ctx, d));
  }
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  FzType *idx = fzIndexTypeGet(ctx);
  fzOpStateAddResults(st, 1, &idx);
  return true;
}

static bool id_parse(FzAsmParser *p, FzOpState *st) {
  return id_parse_common(p, st, true);
}

static bool lane_parse(FzAsmParser *p, FzOpState *st) {
  return id_parse_common(p, st, false);
}

static const char *const kDimAttr[] = {"dimension", NULL};

/* clang-format off */
FZ_KERNEL_OP(THREAD_ID, "kernel.thread_id", "the thread's index in its "
             "block along x, y or z", FZ_TRAIT_PURE, 0, 1, 0, kDimAttr,
             id_verify, id_print, id_parse)
FZ_KERNEL_OP(BLOCK_ID, "kernel.block_id", "the block's index in the grid "
             "along x, y or z", FZ_TRAIT_PURE, 0, 1, 0, kDimAttr, id_verify,
             id_print, id_parse)
FZ_KERNEL_OP(BLOCK_DIM, "kernel.block_dim", "threads per block along x, y "
             "or z", FZ_TRAIT_PURE, 0, 1, 0, kDimAttr, id_verify, id_print,
             id_parse)
FZ_KERNEL_OP(GRID_DIM, "kernel.grid_dim", "blocks per grid along x, y or z",
             FZ_TRAIT_PURE, 0, 1, 0, kDimAttr, id_verify, id_print, id_parse)
FZ_KERNEL_OP(LANE_ID, "kernel.lane_id", "the thread's lane in its warp "
             "(linear thread id mod 32)", FZ_TRAIT_PURE, 0, 1, 0, NULL,
             id_verify, id_print, lane_parse)
/* clang-format on */

/*===--- shared memory --------------------------------------------------===*/

static bool shared_verify(FzOp *op) {
  FzOp *k = fzOpGetParentOp(op);
  if (fzKernelGetOpcode(k) != FZ_KERNEL_OP_FUNC)
    return fzOpEmitError(op, "must be in the entry block of a kernel.func");
  FzType *t = fzKernelResultType(op, 0);
  if (!fzKernelIsBuffer(t) ||
      fzBufferTypeGetMemorySpace(t) != FZ_KERNEL_SPACE_SHARED)
    return fzOpEmitError(op, "result must be a buffer in the shared memory "
                             "space (3)");
  if (fzBufferTypeGetStrides(t))
    return fzOpEmitError(op, "result must have the identity layout");
  FzType *elt = fzShapedTypeGetElementType(t);
  if (fzTypeGetKind(elt) == FZ_TYPE_INDEX)
    return fzOpEmitError(op, "cannot hold index values (no fixed size)");
  if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_DYNAMIC_SHARED) {
    if (fzShapedTypeGetRank(t) != 1 ||
        fzShapedTypeGetDim(t, 0) != FZ_DYNAMIC)
      return fzOpEmitError(op, "result must be a 1-d buffer of dynamic "
                               "size (buffer<?xT, 3>)");
    int64_t align = fzKernelDynamicSharedGetAlign(op);
    if (align < 16 || align > 1024 || (align & (align - 1)))
      return fzOpEmitError(op, "requires 'align' to be a power of two from "
                               "16 to 1024 (bytes)");
    return true;
  }
  if (!fzShapedTypeHasStaticShape(t))
    return fzOpEmitError(op, "result must have a static shape");
  int64_t bytes = fzShapedTypeGetNumElements(t) *
                  (int64_t)fzTypeGetStorageSize(elt);
  if (bytes > 227 * 1024)
    return fzOpEmitError(op, "allocates %lld bytes, more than the 227 KiB "
                             "of shared memory a block can have",
                         (long long)bytes);
  return true;
}

int64_t fzKernelDynamicSharedGetAlign(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_DYNAMIC_SHARED)
    return 0;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("align"));
  if (!a)
    return 16;
  return fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a) : -1;
}

static void shared_print(FzOp *op, FzAsmPrinter *p) {
  /* `align` (a property) prints in the same dictionary syntax and parses
   * back into the property. */
  fzAsmPrintOptionalAttrDict(p, fzOpGetPropDict(op), NULL, false);
  fzKernelPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelResultType(op, 0));
}

static bool shared_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs, *more = NULL;
  FzType *t;
  if (!fzAsmParseOptionalAttrDict(p, &attrs) ||
      (attrs && !fzAsmParseOptionalAttrDict(p, &more)) ||
      !fzAsmParseColonType(p, &t))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddAttrDict(st, more);
  fzOpStateAddResults(st, 1, &t);
  return true;
}

static const char *const kAlignAttr[] = {"align", NULL};

/* clang-format off */
FZ_KERNEL_OP(SHARED_ALLOC, "kernel.shared_alloc", "a statically sized "
             "buffer in shared memory, one per block", 0, 0, 1, 0, NULL,
             shared_verify, shared_print, shared_parse)
FZ_KERNEL_OP(DYNAMIC_SHARED, "kernel.dynamic_shared", "the block's dynamic "
             "shared memory (kernel.launch's size) as a 1-d buffer, aligned "
             "to 16 bytes or its 'align'", 0, 0, 1, 0, kAlignAttr,
             shared_verify, shared_print, shared_parse)
/* clang-format on */

/*===--- barrier --------------------------------------------------------===*/

static bool barrier_verify(FzOp *op) {
  return fzKernelVerifyInKernel(op);
}

static void barrier_print(FzOp *op, FzAsmPrinter *p) {
  fzKernelPrintAttrs(p, op);
}

static bool barrier_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

FZ_KERNEL_OP(BARRIER, "kernel.barrier", "waits until every thread of the "
             "block reaches it; orders their memory accesses", 0, 0, 0, 0,
             NULL, barrier_verify, barrier_print, barrier_parse)

/*===--- shuffle --------------------------------------------------------===*/

static const char *const kModes[FZ_KERNEL_SHUFFLE_NUM] = {"xor", "down",
                                                          "up", "idx"};

int fzKernelShuffleGetMode(const FzOp *op) {
  FzStringRef s = fzKernelStringProp(op, "mode");
  for (int i = 0; i < FZ_KERNEL_SHUFFLE_NUM; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(kModes[i])))
      return i;
  return -1;
}

int64_t fzKernelShuffleGetWidth(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("width"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : -1;
}

/* Shuffled values: what shfl.sync moves in one or two 32-bit halves. */
static bool shuffle_type_ok(const FzType *t) {
  if (!t)
    return false;
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
    return true;
  default:
    return fzTypeIsInteger(t) && fzTypeGetBitWidth(t) >= 8;
  }
}

static bool shuffle_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  if (fzKernelShuffleGetMode(op) < 0)
    return fzOpEmitError(op, "requires 'mode' to be \"xor\", \"down\", "
                             "\"up\" or \"idx\"");
  int64_t w = fzKernelShuffleGetWidth(op);
  if (w < 1 || w > 32 || (w & (w - 1)))
    return fzOpEmitError(op, "requires 'width' to be a power of two from 1 "
                             "to 32, got %lld", (long long)w);
  FzType *t = fzKernelOperandType(op, 0);
  if (!shuffle_type_ok(t))
    return fzOpEmitError(op, "shuffles an integer (i8..i64) or float "
                             "scalar");
  FzType *ot = fzKernelOperandType(op, 1);
  if (!ot || !fzTypeIsInteger(ot) || fzTypeGetBitWidth(ot) != 32)
    return fzOpEmitError(op, "offset must have type i32");
  if (fzKernelResultType(op, 0) != t)
    return fzOpEmitError(op, "result #0 must have the shuffled value's "
                             "type");
  FzType *r1 = fzKernelResultType(op, 1);
  if (!r1 || !fzTypeIsInteger(r1) || fzTypeGetBitWidth(r1) != 1)
    return fzOpEmitError(op, "result #1 (the lane-in-range flag) must have "
                             "type i1");
  FzOp *def = fzValueGetDefiningOp(fzOpGetOperand(op, 1));
  FzAttr *c = def && fzOpHasTrait(def, FZ_TRAIT_CONSTANT_LIKE)
                  ? fzOpGetInherentAttr(def, FZ_STR("value"))
                  : NULL;
  if (c && fzAttrGetKind(c) == FZ_ATTR_INTEGER) {
    int64_t off = fzIntegerAttrGetValue(c);
    if (off < 0 || off > 31)
      return fzOpEmitError(op, "constant offset %lld is outside [0, 31]",
                           (long long)off);
  }
  return true;
}

static void shuffle_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"mode", "width", NULL};
  int m = fzKernelShuffleGetMode(op);
  fzAsmPrintf(p, " %s ", m >= 0 ? kModes[m] : "?");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 1));
  fzAsmPrintf(p, ", %lld", (long long)fzKernelShuffleGetWidth(op));
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
}

/* shuffle ::= mode %value `,` %offset `,` width attr-dict? `:` type */
static bool shuffle_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef mode;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOptionalIdentifier(p, &mode))
    return fzAsmEmitError(p, "expected a shuffle mode (xor, down, up, idx)");
  FzUnresolvedOperand v, off;
  int64_t w;
  FzAttr *attrs;
  FzType *t;
  if (!fzAsmParseOperand(p, &v) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseOperand(p, &off) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseInteger(p, &w) || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &t))
    return false;
  FzType *i32 = fzIntegerTypeGet(ctx, 32), *i1 = fzIntegerTypeGet(ctx, 1);
  if (!fzAsmResolveOperands(p, &v, 1, &t, 1, loc, st) ||
      !fzAsmResolveOperands(p, &off, 1, &i32, 1, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("mode"), fzStringAttrGet(ctx, mode));
  fzOpStateAddProp(st, FZ_STR("width"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32), w));
  fzOpStateAddAttrDict(st, attrs);
  FzType *res[2] = {t, i1};
  fzOpStateAddResults(st, 2, res);
  return true;
}

static const char *const kShuffleAttrs[] = {"mode", "width", NULL};

FZ_KERNEL_OP(SHUFFLE, "kernel.shuffle", "exchanges a value among the lanes "
             "of a warp (shfl.sync: xor, down, up, idx)", 0, 2, 2, 0,
             kShuffleAttrs, shuffle_verify, shuffle_print, shuffle_parse)
