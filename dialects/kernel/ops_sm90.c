/* dialects/kernel/ops_sm90.c - the Hopper (sm_90) ops: mbarriers, bulk
 * asynchronous copies, the async-proxy fence and the warp-group mma
 * (PTX mbarrier.*, cp.async.bulk, fence.proxy.async, wgmma.*).
 *
 * Custom forms:
 *   kernel.mbarrier_init %bar[%i], %count : buffer<4xi64, 3>
 *   kernel.mbarrier_arrive %bar[%i] : buffer<4xi64, 3>
 *   kernel.mbarrier_arrive %bar[%i], expect_tx %bytes : buffer<4xi64, 3>
 *   kernel.mbarrier_wait %bar[%i], %parity : buffer<4xi64, 3>
 *   kernel.bulk_copy %s[%o], %g[%r, %c], %bytes, %bar[%i]
 *       : buffer<?xbf16, 3>, buffer<64x64xbf16>, buffer<4xi64, 3>
 *   kernel.fence_proxy_async
 *   %f:16 = kernel.wgmma_fence %c0, ..., %c15 : vector<2xf32>
 *   %d:16 = kernel.wgmma m64n64k16 %s[%a], %s[%b], %f#0, ..., %f#15
 *       {sbo_a = 1024, lbo_b = 8192, sbo_b = 1024, trans_b}
 *       : buffer<?xbf16, 3>, buffer<?xbf16, 3>
 *   kernel.wgmma_commit
 *   %r:16 = kernel.wgmma_wait 0, %d#0, ..., %d#15 : vector<2xf32>
 *
 * An mbarrier is one i64 of shared memory (its state is opaque). The
 * warp-group mma runs on the 128 threads of a warp group together; its
 * accumulators are N/4 vector<2xf32> pairs per thread (PTX's m64nNk16
 * f32 fragment: pair p of lane l of warp w holds row 16 w + l / 4 +
 * 8 (p % 2), columns 8 (p / 2) + 2 (l % 4) + {0, 1}). Their asynchrony
 * is in the SSA form: a wgmma's accumulator operands come from a
 * kernel.wgmma_fence or a previous kernel.wgmma, and its results may be
 * used only by another kernel.wgmma or by kernel.wgmma_wait, whose
 * results are the registers once the mma completed (so code generation
 * cannot move a read of them before the wait). Semantics, the PTX and
 * the simulator's checks: docs/dialects/kernel.md "Hopper".
 */
#include <stdio.h>
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

/*===--- Helpers --------------------------------------------------------===*/

/* Whether t is a shared buffer with elements `elt` (NULL: any). */
static bool is_shared(const FzType *t, const FzType *elt) {
  return fzKernelIsBuffer(t) &&
         fzBufferTypeGetMemorySpace(t) == FZ_KERNEL_SPACE_SHARED &&
         (!elt || fzShapedTypeGetElementType(t) == elt);
}

static bool is_pair(FzContext *ctx, const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_VECTOR &&
         fzShapedTypeGetRank(t) == 1 && fzShapedTypeGetDim(t, 0) == 2 &&
         fzShapedTypeGetElementType(t) == fzF32TypeGet(ctx);
}

/* The rank of buffer operand i (0 when it is not a buffer). */
static size_t rank_of(const FzOp *op, size_t i) {
  FzType *t = fzKernelOperandType(op, i);
  return fzKernelIsBuffer(t) ? fzShapedTypeGetRank(t) : 0;
}

/* Checks that operand `at` is an mbarrier (a shared buffer of i64) whose
 * rank's indices follow it; *next is past them. */
static bool check_barrier(FzOp *op, size_t at, size_t *next) {
  FzContext *ctx = fzOpGetContext(op);
  FzType *t = fzKernelOperandType(op, at);
  if (!is_shared(t, fzIntegerTypeGet(ctx, 64)))
    return fzOpEmitError(op, "operand #%zu must be an mbarrier: a buffer of "
                             "i64 in shared memory (3)", at);
  size_t r = fzShapedTypeGetRank(t);
  if (fzOpGetNumOperands(op) < at + 1 + r)
    return fzOpEmitError(op, "expects %zu indices of the mbarrier buffer",
                         r);
  for (size_t i = at + 1; i < at + 1 + r; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "mbarrier index #%zu must have type index",
                           i - at - 1);
  *next = at + 1 + r;
  return true;
}

static void print_range(FzAsmPrinter *p, FzOp *op, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
}

/* %buf[indices] starting at operand `at`; returns the operand after. */
static size_t print_access(FzAsmPrinter *p, FzOp *op, size_t at) {
  size_t r = rank_of(op, at);
  fzAsmPrintOperand(p, fzOpGetOperand(op, at));
  fzAsmPrint(p, "[");
  print_range(p, op, at + 1, at + 1 + r);
  fzAsmPrint(p, "]");
  return at + 1 + r;
}

/* The properties (but `elided`) and the discardable attributes, as one
 * attribute dictionary each (the parser sends inherent names back to
 * the properties). */
static void print_dicts(FzAsmPrinter *p, FzOp *op, const char *const *elided) {
  fzAsmPrintOptionalAttrDict(p, fzOpGetPropDict(op), elided, false);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
}

static bool parse_dicts(FzAsmParser *p, FzOpState *st) {
  FzAttr *a, *b = NULL;
  if (!fzAsmParseOptionalAttrDict(p, &a) ||
      (a && !fzAsmParseOptionalAttrDict(p, &b)))
    return false;
  fzOpStateAddAttrDict(st, a);
  fzOpStateAddAttrDict(st, b);
  return true;
}

/* An access %buf[indices] not yet resolved. */
typedef struct Access {
  FzUnresolvedOperand buf, idx[FZ_GRAPH_MAX_RANK];
  size_t n;
} Access;

static bool parse_access(FzAsmParser *p, Access *a) {
  return fzAsmParseOperand(p, &a->buf) &&
         fzKernelParseIndices(p, a->idx, &a->n);
}

static bool resolve_access(FzAsmParser *p, const Access *a, FzType *t,
                           FzLoc *loc, FzOpState *st) {
  return fzAsmResolveOperands(p, &a->buf, 1, &t, 1, loc, st) &&
         fzKernelResolveIndices(p, a->idx, a->n, loc, st);
}

static int64_t int_prop(const FzOp *op, const char *name, int64_t dflt) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : dflt;
}

static bool unit_prop(const FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  return a && (fzAttrGetKind(a) == FZ_ATTR_UNIT ||
               (fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a)));
}

static bool plain_verify(FzOp *op) { return fzKernelVerifyInKernel(op); }

static void plain_print(FzOp *op, FzAsmPrinter *p) { print_dicts(p, op, NULL); }

static bool plain_parse(FzAsmParser *p, FzOpState *st) {
  return parse_dicts(p, st);
}

/*===--- mbarriers ------------------------------------------------------===*/

bool fzKernelMbarrierArriveHasTx(const FzOp *op) {
  return fzKernelGetOpcode(op) == FZ_KERNEL_OP_MBARRIER_ARRIVE &&
         fzOpGetNumOperands(op) == 1 + rank_of(op, 0) + 1;
}

/* init and wait: %bar[indices], %x (index). */
static bool mbar_value_verify(FzOp *op) {
  size_t next;
  if (!fzKernelVerifyInKernel(op) || !check_barrier(op, 0, &next))
    return false;
  if (fzOpGetNumOperands(op) != next + 1 ||
      !fzKernelIsIndex(fzKernelOperandType(op, next)))
    return fzOpEmitError(op, "expects the mbarrier, its indices and one "
                             "index operand (%s)",
                         fzKernelGetOpcode(op) == FZ_KERNEL_OP_MBARRIER_INIT
                             ? "the arrival count"
                             : "the phase parity");
  return true;
}

static bool arrive_verify(FzOp *op) {
  size_t next;
  if (!fzKernelVerifyInKernel(op) || !check_barrier(op, 0, &next))
    return false;
  size_t n = fzOpGetNumOperands(op);
  if (n > next + 1 || (n == next + 1 &&
                       !fzKernelIsIndex(fzKernelOperandType(op, next))))
    return fzOpEmitError(op, "expects the mbarrier, its indices and an "
                             "optional transaction count (index)");
  return true;
}

static void mbar_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  size_t next = print_access(p, op, 0);
  if (next < fzOpGetNumOperands(op)) {
    fzAsmPrint(p, fzKernelGetOpcode(op) == FZ_KERNEL_OP_MBARRIER_ARRIVE
                      ? ", expect_tx "
                      : ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, next));
  }
  print_dicts(p, op, NULL);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
}

/* mbarrier_init ::= access `,` %count attrs `:` type
 * mbarrier_arrive ::= access (`,` `expect_tx` %bytes)? attrs `:` type
 * mbarrier_wait ::= access `,` %parity attrs `:` type */
static bool mbar_parse_common(FzAsmParser *p, FzOpState *st, bool arrive) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  Access a;
  FzUnresolvedOperand x;
  FzType *t;
  if (!parse_access(p, &a))
    return false;
  bool hasX = fzAsmParseOptionalPunct(p, ",");
  if (hasX && ((arrive && !fzAsmParseKeyword(p, "expect_tx")) ||
               !fzAsmParseOperand(p, &x)))
    return false;
  if (!hasX && !arrive)
    return fzAsmEmitError(p, "expected ',' and an index operand");
  if (!parse_dicts(p, st) || !fzAsmParseColonType(p, &t))
    return false;
  FzType *idx = fzIndexTypeGet(fzAsmParserGetContext(p));
  return resolve_access(p, &a, t, loc, st) &&
         (!hasX || fzAsmResolveOperands(p, &x, 1, &idx, 1, loc, st));
}

static bool mbar_parse(FzAsmParser *p, FzOpState *st) {
  return mbar_parse_common(p, st, false);
}

static bool arrive_parse(FzAsmParser *p, FzOpState *st) {
  return mbar_parse_common(p, st, true);
}

/* clang-format off */
FZ_KERNEL_OP(MBARRIER_INIT, "kernel.mbarrier_init", "initializes an "
             "mbarrier for a number of arrivals per phase (mbarrier.init)",
             0, FZ_VARIADIC, 0, 0, NULL, mbar_value_verify, mbar_print,
             mbar_parse)
FZ_KERNEL_OP(MBARRIER_ARRIVE, "kernel.mbarrier_arrive", "arrives on an "
             "mbarrier, optionally expecting a number of transaction bytes "
             "first (mbarrier.arrive[.expect_tx])", 0, FZ_VARIADIC, 0, 0,
             NULL, arrive_verify, mbar_print, arrive_parse)
FZ_KERNEL_OP(MBARRIER_WAIT, "kernel.mbarrier_wait", "waits until the "
             "mbarrier's phase of the given parity has completed "
             "(mbarrier.try_wait.parity in a loop)", 0, FZ_VARIADIC, 0, 0,
             NULL, mbar_value_verify, mbar_print, mbar_parse)
/* clang-format on */

/*===--- bulk copies ----------------------------------------------------===*/

size_t fzKernelBulkCopyGetSourceOperand(const FzOp *op) {
  return 1 + rank_of(op, 0);
}

size_t fzKernelBulkCopyGetBarrierOperand(const FzOp *op) {
  size_t si = fzKernelBulkCopyGetSourceOperand(op);
  return si + 1 + rank_of(op, si) + 1;
}

static bool bulk_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzType *dt = fzKernelOperandType(op, 0);
  if (!is_shared(dt, NULL))
    return fzOpEmitError(op, "the destination (operand #0) must be a buffer "
                             "in shared memory (3)");
  size_t si = fzKernelBulkCopyGetSourceOperand(op);
  FzType *gt = fzKernelOperandType(op, si);
  if (!fzKernelIsBuffer(gt) ||
      fzBufferTypeGetMemorySpace(gt) != FZ_KERNEL_SPACE_GLOBAL)
    return fzOpEmitError(op, "the source (operand #%zu) must be a buffer in "
                             "global memory (0)", si);
  if (fzShapedTypeGetElementType(gt) != fzShapedTypeGetElementType(dt))
    return fzOpEmitError(op, "source and destination must have the same "
                             "element type");
  for (size_t i = 1; i < si; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "destination index #%zu must have type index",
                           i - 1);
  size_t bi = fzKernelBulkCopyGetBarrierOperand(op);
  for (size_t i = si + 1; i < bi && i < fzOpGetNumOperands(op); ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "%s must have type index",
                           i + 1 < bi ? "a source index" : "the byte count");
  size_t next;
  if (bi >= fzOpGetNumOperands(op) || !check_barrier(op, bi, &next))
    return bi >= fzOpGetNumOperands(op)
               ? fzOpEmitError(op, "expects the destination, the source, "
                                   "the byte count and the mbarrier")
               : false;
  if (next != fzOpGetNumOperands(op))
    return fzOpEmitError(op, "has operands after the mbarrier's indices");
  return true;
}

static void bulk_print(FzOp *op, FzAsmPrinter *p) {
  size_t si = fzKernelBulkCopyGetSourceOperand(op);
  size_t bi = fzKernelBulkCopyGetBarrierOperand(op);
  fzAsmPrint(p, " ");
  print_access(p, op, 0);
  fzAsmPrint(p, ", ");
  print_access(p, op, si);
  fzAsmPrint(p, ", ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, bi - 1));
  fzAsmPrint(p, ", ");
  print_access(p, op, bi);
  print_dicts(p, op, NULL);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelOperandType(op, si));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelOperandType(op, bi));
}

/* bulk_copy ::= access `,` access `,` %bytes `,` access attrs
 *               `:` type `,` type `,` type */
static bool bulk_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  Access d, g, b;
  FzUnresolvedOperand bytes;
  FzType *dt, *gt, *bt;
  if (!parse_access(p, &d) || !fzAsmParsePunct(p, ",") ||
      !parse_access(p, &g) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseOperand(p, &bytes) || !fzAsmParsePunct(p, ",") ||
      !parse_access(p, &b) || !parse_dicts(p, st) ||
      !fzAsmParseColonType(p, &dt) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseType(p, &gt) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseType(p, &bt))
    return false;
  FzType *idx = fzIndexTypeGet(fzAsmParserGetContext(p));
  return resolve_access(p, &d, dt, loc, st) &&
         resolve_access(p, &g, gt, loc, st) &&
         fzAsmResolveOperands(p, &bytes, 1, &idx, 1, loc, st) &&
         resolve_access(p, &b, bt, loc, st);
}

/* clang-format off */
FZ_KERNEL_OP(BULK_COPY, "kernel.bulk_copy", "starts an asynchronous bulk "
             "copy of contiguous bytes from global to shared memory that "
             "completes a transaction count of an mbarrier "
             "(cp.async.bulk.shared::cluster.global.mbarrier::complete_tx)",
             0, FZ_VARIADIC, 0, 0, NULL, bulk_verify, bulk_print, bulk_parse)
FZ_KERNEL_OP(FENCE_PROXY_ASYNC, "kernel.fence_proxy_async", "orders the "
             "thread's shared-memory accesses through the generic proxy "
             "before later ones of the async proxy (wgmma, bulk copies): "
             "fence.proxy.async.shared::cta", 0, 0, 0, 0, NULL, plain_verify,
             plain_print, plain_parse)
FZ_KERNEL_OP(WGMMA_COMMIT, "kernel.wgmma_commit", "closes the warp "
             "group's open group of wgmma operations (wgmma.commit_group)",
             0, 0, 0, 0, NULL, plain_verify, plain_print, plain_parse)
/* clang-format on */

/*===--- wgmma_fence and wgmma_wait -------------------------------------===*/

int64_t fzKernelWgmmaWaitGetPending(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_WGMMA_WAIT)
    return -1;
  return int_prop(op, "pending", -1);
}

/* Operands [from, n) and the results are accumulator pairs, as many. */
static bool check_pairs(FzOp *op, size_t from) {
  FzContext *ctx = fzOpGetContext(op);
  size_t n = fzOpGetNumOperands(op) - from;
  if (fzOpGetNumResults(op) != n)
    return fzOpEmitError(op, "has %zu results for %zu accumulator operands",
                         fzOpGetNumResults(op), n);
  for (size_t i = 0; i < n; ++i)
    if (!is_pair(ctx, fzKernelOperandType(op, from + i)) ||
        !is_pair(ctx, fzKernelResultType(op, i)))
      return fzOpEmitError(op, "accumulator #%zu must be vector<2xf32>", i);
  return true;
}

static bool fence_verify(FzOp *op) {
  return fzKernelVerifyInKernel(op) && check_pairs(op, 0);
}

/* PTX's wgmma.wait_group takes N in 0..7. */
enum { MAX_WGMMA_PENDING = 7 };

static bool wait_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  int64_t n = fzKernelWgmmaWaitGetPending(op);
  if (n < 0 || n > MAX_WGMMA_PENDING)
    return fzOpEmitError(op, "requires 'pending' to be an integer from 0 to "
                             "%d", MAX_WGMMA_PENDING);
  return check_pairs(op, 0);
}

static void pairs_print(FzOp *op, FzAsmPrinter *p, bool wait) {
  static const char *const elided[] = {"pending", NULL};
  size_t n = fzOpGetNumOperands(op);
  if (wait)
    fzAsmPrintf(p, " %lld", (long long)fzKernelWgmmaWaitGetPending(op));
  if (n) {
    fzAsmPrint(p, wait ? ", " : " ");
    print_range(p, op, 0, n);
  }
  print_dicts(p, op, elided);
  if (n) {
    fzAsmPrint(p, " : ");
    fzAsmPrintType(p, fzKernelOperandType(op, 0));
  }
}

static void fence_print(FzOp *op, FzAsmPrinter *p) {
  pairs_print(op, p, false);
}

static void wait_print(FzOp *op, FzAsmPrinter *p) { pairs_print(op, p, true); }

/* wgmma_fence ::= operands? attrs (`:` type)?
 * wgmma_wait ::= integer (`,` operands)? attrs (`:` type)? */
static bool pairs_parse(FzAsmParser *p, FzOpState *st, bool wait) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  int64_t pending = 0;
  if (wait) {
    if (!fzAsmParseInteger(p, &pending))
      return false;
    fzOpStateAddProp(st, FZ_STR("pending"),
                     fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32),
                                      pending));
  }
  FzUnresolvedOperand *ops = NULL;
  size_t n = 0;
  if ((!wait || fzAsmParseOptionalPunct(p, ",")) &&
      !fzAsmParseOperandList(p, &ops, &n))
    return false;
  FzType *t = NULL;
  if (!parse_dicts(p, st) || (n && !fzAsmParseColonType(p, &t)))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &ops[i], 1, &t, 1, loc, st))
      return false;
  for (size_t i = 0; i < n; ++i)
    fzOpStateAddResults(st, 1, &t);
  return true;
}

static bool fence_parse(FzAsmParser *p, FzOpState *st) {
  return pairs_parse(p, st, false);
}

static bool wait_parse(FzAsmParser *p, FzOpState *st) {
  return pairs_parse(p, st, true);
}

static const char *const kPendingAttr[] = {"pending", NULL};

/* clang-format off */
FZ_KERNEL_OP(WGMMA_FENCE, "kernel.wgmma_fence", "orders the warp group's "
             "register and shared-memory accesses before the kernel.wgmma "
             "ops that use its results (wgmma.fence); passes accumulators "
             "through", 0, FZ_VARIADIC, FZ_VARIADIC, 0, NULL, fence_verify,
             fence_print, fence_parse)
FZ_KERNEL_OP(WGMMA_WAIT, "kernel.wgmma_wait", "waits until at most N of "
             "the warp group's committed wgmma groups are pending "
             "(wgmma.wait_group N); its results are the accumulators "
             "then", 0, FZ_VARIADIC, FZ_VARIADIC, 0, kPendingAttr,
             wait_verify, wait_print, wait_parse)
/* clang-format on */

/*===--- wgmma ----------------------------------------------------------===*/

bool fzKernelWgmmaGetShape(const FzOp *op, int *m, int *n, int *k) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_WGMMA)
    return false;
  FzStringRef s = fzKernelStringProp(op, "shape");
  char buf[32];
  int mm, nn, kk, used = 0;
  if (!s.data || s.length >= sizeof buf)
    return false;
  memcpy(buf, s.data, s.length);
  buf[s.length] = 0;
  if (sscanf(buf, "m%dn%dk%d%n", &mm, &nn, &kk, &used) != 3 ||
      used != (int)s.length)
    return false;
  *m = mm;
  *n = nn;
  *k = kk;
  return true;
}

FzKernelWgmmaLayout fzKernelWgmmaGetLayout(const FzOp *op, bool isB) {
  FzKernelWgmmaLayout L;
  L.swizzle = (int)int_prop(op, "swizzle", 128);
  L.lbo = int_prop(op, isB ? "lbo_b" : "lbo_a", 0);
  L.sbo = int_prop(op, isB ? "sbo_b" : "sbo_a", 0);
  L.mnMajor = unit_prop(op, isB ? "trans_b" : "trans_a");
  return L;
}

int64_t fzKernelWgmmaAddress(const FzKernelWgmmaLayout *L, int64_t start,
                             int64_t mn, int64_t k, int64_t esz) {
  int64_t W = L->swizzle, off;
  if (W == 0) {
    /* 8 x 16-byte core matrices, each 128 contiguous bytes. */
    int64_t kb = k * esz;
    if (L->mnMajor) {
      int64_t mb = mn * esz;
      off = mb % 16 + (mb / 16) * L->sbo + (k % 8) * 16 + (k / 8) * L->lbo;
    } else {
      off = (mn % 8) * 16 + (mn / 8) * L->sbo + kb % 16 + (kb / 16) * L->lbo;
    }
    return start + off;
  }
  if (L->mnMajor) {
    int64_t mb = mn * esz;
    off = mb % W + (mb / W) * L->lbo + (k % 8) * W + (k / 8) * L->sbo;
  } else {
    off = (mn % 8) * W + (mn / 8) * L->sbo + k * esz;
  }
  int64_t a = start + off;
  return a ^ (((a >> 7) & (W / 16 - 1)) << 4);
}

/* Whether v comes from a kernel.wgmma_fence or a kernel.wgmma. */
static bool fenced(FzValue *v) {
  FzOp *d = fzValueGetDefiningOp(v);
  FzKernelOpcode k = d ? fzKernelGetOpcode(d) : FZ_KERNEL_OP_UNKNOWN;
  return k == FZ_KERNEL_OP_WGMMA_FENCE || k == FZ_KERNEL_OP_WGMMA;
}

static bool check_layout(FzOp *op, bool isB) {
  FzKernelWgmmaLayout L = fzKernelWgmmaGetLayout(op, isB);
  char ab = isB ? 'b' : 'a';
  if (L.lbo < 0 || L.lbo % 16 || L.lbo >= (1 << 18) || L.sbo < 0 ||
      L.sbo % 16 || L.sbo >= (1 << 18))
    return fzOpEmitError(op, "'lbo_%c' and 'sbo_%c' must be multiples of 16 "
                             "bytes below 2^18 (the descriptor's 14 bits)",
                         ab, ab);
  return true;
}

static bool wgmma_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzContext *ctx = fzOpGetContext(op);
  int m, n, k;
  if (!fzKernelWgmmaGetShape(op, &m, &n, &k) || m != 64 || n < 8 ||
      n > 256 || n % 8 || (k != 16 && k != 8))
    return fzOpEmitError(op, "requires 'shape' to be \"m64nNk16\" or "
                             "\"m64nNk8\" with N a multiple of 8 from 8 to "
                             "256");
  for (size_t i = 0; i < 4; i += 2) {
    FzType *t = fzKernelOperandType(op, i);
    if (!is_shared(t, NULL) || fzShapedTypeGetRank(t) != 1 ||
        !fzKernelIsIndex(fzKernelOperandType(op, i + 1)))
      return fzOpEmitError(op, "operand %s must be a 1-d buffer in shared "
                               "memory (3) and an index",
                           i ? "B" : "A");
  }
  FzType *elt = fzShapedTypeGetElementType(fzKernelOperandType(op, 0));
  if (fzShapedTypeGetElementType(fzKernelOperandType(op, 2)) != elt)
    return fzOpEmitError(op, "A and B must have the same element type");
  FzTypeKind ek = fzTypeGetKind(elt);
  bool half = ek == FZ_TYPE_BF16 || ek == FZ_TYPE_F16;
  if ((k == 16 && !half) || (k == 8 && ek != FZ_TYPE_F32))
    return fzOpEmitError(op, "k16 multiplies bf16 or f16 operands, k8 f32 "
                             "ones (tf32)");
  int64_t sw = int_prop(op, "swizzle", 128);
  if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
    return fzOpEmitError(op, "requires 'swizzle' to be 128, 64, 32 or 0 "
                             "(bytes)");
  FzKernelWgmmaLayout la = fzKernelWgmmaGetLayout(op, false);
  FzKernelWgmmaLayout lb = fzKernelWgmmaGetLayout(op, true);
  if (k == 8 && (la.mnMajor || lb.mnMajor))
    return fzOpEmitError(op, "tf32 operands must be K-major (no 'trans_a' "
                             "or 'trans_b')");
  if (!check_layout(op, false) || !check_layout(op, true))
    return false;
  size_t pairs = (size_t)n / 4;
  if (fzOpGetNumOperands(op) != 4 + pairs)
    return fzOpEmitError(op, "m64n%dk%d takes %zu accumulator pairs, got "
                             "%zu", n, k, pairs,
                         fzOpGetNumOperands(op) - 4);
  for (size_t i = 0; i < pairs; ++i) {
    FzValue *v = fzOpGetOperand(op, 4 + i);
    if (!is_pair(ctx, fzValueGetType(v)))
      return fzOpEmitError(op, "accumulator #%zu must be vector<2xf32>", i);
    if (!fenced(v))
      return fzOpEmitError(op, "accumulator #%zu must come from a "
                               "kernel.wgmma_fence or a kernel.wgmma (the "
                               "fence orders other accesses of the "
                               "registers before the mma)", i);
  }
  if (fzOpGetNumResults(op) != pairs)
    return fzOpEmitError(op, "has %zu results for %zu accumulator pairs",
                         fzOpGetNumResults(op), pairs);
  for (size_t i = 0; i < pairs; ++i) {
    FzValue *r = fzOpGetResult(op, i);
    if (!is_pair(ctx, fzValueGetType(r)))
      return fzOpEmitError(op, "result #%zu must be vector<2xf32>", i);
    for (FzOpOperand *u = fzValueGetFirstUse(r); u;
         u = fzOpOperandGetNextUse(u)) {
      FzKernelOpcode uk = fzKernelGetOpcode(fzOpOperandGetOwner(u));
      if (uk != FZ_KERNEL_OP_WGMMA && uk != FZ_KERNEL_OP_WGMMA_WAIT)
        return fzOpEmitError(op, "result #%zu is used before a "
                                 "kernel.wgmma_wait (only a kernel.wgmma or "
                                 "kernel.wgmma_wait may take it)", i);
    }
  }
  return true;
}

static void wgmma_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"shape", NULL};
  FzStringRef s = fzKernelStringProp(op, "shape");
  fzAsmPrintf(p, " %.*s ", (int)s.length, s.data ? s.data : "");
  print_access(p, op, 0);
  fzAsmPrint(p, ", ");
  print_access(p, op, 2);
  if (fzOpGetNumOperands(op) > 4) {
    fzAsmPrint(p, ", ");
    print_range(p, op, 4, fzOpGetNumOperands(op));
  }
  print_dicts(p, op, elided);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelOperandType(op, 2));
}

/* wgmma ::= shape access `,` access (`,` operands)? attrs
 *           `:` type `,` type */
static bool wgmma_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzStringRef shape;
  Access a, b;
  FzUnresolvedOperand *acc = NULL;
  size_t n = 0;
  FzType *at, *bt;
  if (!fzAsmParseOptionalIdentifier(p, &shape))
    return fzAsmEmitError(p, "expected the shape (m64nNk16 or m64nNk8)");
  if (!parse_access(p, &a) || !fzAsmParsePunct(p, ",") ||
      !parse_access(p, &b))
    return false;
  if (fzAsmParseOptionalPunct(p, ",") && !fzAsmParseOperandList(p, &acc, &n))
    return false;
  if (!parse_dicts(p, st) || !fzAsmParseColonType(p, &at) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &bt))
    return false;
  fzOpStateAddProp(st, FZ_STR("shape"), fzStringAttrGet(ctx, shape));
  FzType *pair = fzVectorTypeGet(ctx, 1, &(int64_t){2}, fzF32TypeGet(ctx),
                                 NULL);
  if (!resolve_access(p, &a, at, loc, st) ||
      !resolve_access(p, &b, bt, loc, st))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &acc[i], 1, &pair, 1, loc, st))
      return false;
  for (size_t i = 0; i < n; ++i)
    fzOpStateAddResults(st, 1, &pair);
  return true;
}

static const char *const kWgmmaAttrs[] = {
    "shape", "swizzle", "lbo_a", "sbo_a", "lbo_b", "sbo_b", "trans_a",
    "trans_b", NULL};

/* clang-format off */
FZ_KERNEL_OP(WGMMA, "kernel.wgmma", "a warp group's asynchronous matrix "
             "multiply-accumulate D += A B, m64nNk16 (bf16, f16) or m64nNk8 "
             "(tf32), f32 accumulators, A and B in shared memory described "
             "by their layout (wgmma.mma_async.sync.aligned)", 0,
             FZ_VARIADIC, FZ_VARIADIC, 0, kWgmmaAttrs, wgmma_verify,
             wgmma_print, wgmma_parse)
/* clang-format on */
