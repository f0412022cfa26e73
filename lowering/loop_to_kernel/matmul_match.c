/* lowering/loop_to_kernel/matmul_match.c - recognizes the loop nest that
 * lower-graph-to-loop makes of a matmul group (matmul.h shows it).
 *
 * Accepted: a loop.parallel with constant bounds 0..extent, step 1, whose
 * body holds exactly one loop.for, over k = 0..K step 1 (or a k slice of
 * a split nest: matmul.h, FzMatmulNest.splitK) with one f32
 * accumulator starting at 0.0, whose body is exactly
 *   load A, extf, load B, extf, mulf, addf(acc, product), yield
 * (A and B both bf16 or both f16), or
 *   load A, load B, mulf, addf(acc, product), yield
 * (A and B both f32: the tf32 kernels, which the mapping takes only under
 * its tf32 option; each load's last two indices are k and
 * a parallel iv, its leading indices parallel ivs or constants); and,
 * around the loop, an epilogue of region-free loop ops: scalar math,
 * loads (of any buffer the nest does not write, or of a written one at
 * exactly the store's indices: plan-memory's in-place form) and stores.
 * Everything else is refused with a one-line reason, and the nest is left
 * to the generic lowering.
 *
 * Nothing is allocated: the description points into the IR.
 */
#include <string.h>

#include "dialects/loop/nest_match.h" /* splitMatchBounds */
#include "ir/util.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h" /* fzLkGcd */
#include "lowering/loop_to_kernel/matmul_internal.h"

static bool const_int(FzValue *v, int64_t *out) {
  return v && fzLoopValueGetConstantInt(v, out);
}

/* The float value of a loop.constant, or false. */
static bool const_float(FzValue *v, double *out) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
    return false;
  FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("value"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_FLOAT)
    return false;
  *out = fzFloatAttrGetValue(a);
  return true;
}

/* Whether v is defined inside op (in one of its regions). */
static bool defined_inside(FzValue *v, FzOp *op) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
  return owner && fzOpIsAncestor(op, owner);
}

/* The parallel dim whose iv is v, or -1. */
static int iv_dim(FzOp *par, FzValue *v) {
  FzBlock *body = fzLoopGetBody(par);
  if (!fzValueIsBlockArgument(v) || fzValueGetParentBlock(v) != body)
    return -1;
  return (int)fzValueGetIndex(v);
}

static int64_t elt_bytes(FzType *buf) {
  return (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(buf));
}

/* Whether buffer value v starts at a multiple of `bytes` from its
 * allocation: function arguments and loop.alloc results do (the
 * calling convention's 16-byte alignment; device allocations are
 * 256-byte aligned), and so do constant buffers (a large one is a device
 * allocation the launch passes, a small one a global of 64-byte
 * alignment: lowering/llvm/emit_memory.c); a view does when its source
 * does and its constant offset keeps it. */
bool mmAlignedBase(FzValue *v, int64_t bytes) {
  for (int depth = 0; depth < 16; ++depth) {
    FzOp *def = fzValueGetDefiningOp(v);
    if (!def)
      return true; /* a function argument */
    FzLoopOpcode opc = fzLoopGetOpcode(def);
    if (opc == FZ_LOOP_OP_ALLOC)
      return true;
    if (opc == FZ_LOOP_OP_CONSTANT_BUFFER)
      return bytes <= 64;
    if (opc != FZ_LOOP_OP_VIEW)
      return false;
    int64_t off = 0;
    if (fzOpGetNumOperands(def) > 1 &&
        !const_int(fzOpGetOperand(def, 1), &off))
      return false;
    if ((off * elt_bytes(fzValueGetType(v))) % bytes != 0)
      return false;
    v = fzOpGetOperand(def, 0);
  }
  return false;
}

int mmAlignedCopyBytes(FzValue *buf, int cb, int64_t eb) {
  while (cb && !mmAlignedBase(buf, cb))
    cb = cb / 2 >= 4 && cb / 2 >= eb ? cb / 2 : 0;
  return cb;
}

/* The strides of a buffer type (identity layout computed). */
void mmStridesOf(FzType *t, int64_t *st) {
  size_t r = fzShapedTypeGetRank(t);
  const int64_t *s = fzBufferTypeGetStrides(t);
  int64_t acc = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = s ? s[d] : acc;
    acc *= fzShapedTypeGetDim(t, d);
  }
}

/* A static-shaped global buffer defined outside the nest. */
bool mmPlainBuffer(FzValue *v, FzOp *par) {
  FzType *t = fzValueGetType(v);
  return fzTypeGetKind(t) == FZ_TYPE_BUFFER && !defined_inside(v, par) &&
         fzBufferTypeGetMemorySpace(t) == 0 && fzShapedTypeHasStaticShape(t);
}

/* The load feeding a k-loop product through extf, or NULL. */
static FzOp *operand_load(FzValue *v, FzType **elt) {
  FzOp *ext = fzValueGetDefiningOp(v);
  if (ext && fzLoopGetOpcode(ext) == FZ_LOOP_OP_LOAD &&
      fzTypeGetKind(fzValueGetType(v)) == FZ_TYPE_F32) {
    *elt = fzValueGetType(v); /* an f32 operand, no extension */
    return ext;
  }
  if (!ext || fzLoopGetOpcode(ext) != FZ_LOOP_OP_EXTF)
    return NULL;
  FzOp *load = fzValueGetDefiningOp(fzOpGetOperand(ext, 0));
  if (!load || fzLoopGetOpcode(load) != FZ_LOOP_OP_LOAD)
    return NULL;
  *elt = fzValueGetType(fzOpGetResult(load, 0));
  return load;
}

/* Fills op's indices into x; mn gets the parallel dim of the matrix row
 * or column index. */
static bool classify_load(FzOp *par, FzValue *kiv, FzOp *load,
                          FzMatmulOperand *x, int *mn, char *why,
                          size_t whyLen) {
  memset(x, 0, sizeof *x);
  x->load = load;
  x->buffer = fzOpGetOperand(load, 0);
  if (!mmPlainBuffer(x->buffer, par))
    return fzReasonf(why, whyLen, "an operand is not a static global buffer "
                               "defined outside the nest");
  x->rank = fzShapedTypeGetRank(fzValueGetType(x->buffer));
  if (x->rank < 2 || x->rank > FZ_MATMUL_MAX_DIMS)
    return fzReasonf(why, whyLen, "an operand of rank %zu (a matrix-vector "
                               "product; tensor cores need two matrices)",
                  x->rank);
  FzValue *last = fzOpGetOperand(load, x->rank);
  FzValue *prev = fzOpGetOperand(load, x->rank - 1);
  FzValue *other;
  if (last == kiv && prev != kiv) {
    x->kLast = true;
    other = prev;
  } else if (prev == kiv && last != kiv) {
    x->kLast = false;
    other = last;
  } else {
    return fzReasonf(why, whyLen, "the k index is not one of an operand's two "
                               "last indices");
  }
  *mn = iv_dim(par, other);
  if (*mn < 0)
    return fzReasonf(why, whyLen, "an operand's row or column index is not a "
                               "loop index");
  x->numBatch = x->rank - 2;
  for (size_t d = 0; d < x->numBatch; ++d) {
    FzValue *v = fzOpGetOperand(load, 1 + d);
    int dim = iv_dim(par, v);
    int64_t c = 0;
    if (dim < 0 && !const_int(v, &c))
      return fzReasonf(why, whyLen, "a batch index of an operand is neither a "
                                 "loop index nor a constant");
    if (v == kiv)
      return fzReasonf(why, whyLen, "k indexes a batch dimension");
    x->batch[d] = (FzMatmulIndex){dim, c};
  }
  return true;
}

/* The cp.async copies of operand x (FzMatmulOperand.asyncCopies and
 * copyBytes): the contiguous extent is `extent` (K, or M or N); it and
 * every other stride are whole copies, 16 bytes where they can be (8
 * 16-bit elements, 4 f32), else 8 or 4. */
static void set_copies(FzMatmulOperand *x, int64_t extent) {
  FzType *t = fzValueGetType(x->buffer);
  int64_t st[FZ_MATMUL_MAX_DIMS];
  mmStridesOf(t, st);
  int64_t eb = elt_bytes(t);
  x->asyncCopies = false;
  if ((eb != 2 && eb != 4) || st[x->rank - 1] != 1)
    return;
  int cb = mmCopyBytesOf(extent, eb);
  for (size_t d = 0; d + 1 < x->rank && cb; ++d) {
    int c = mmCopyBytesOf(st[d], eb);
    cb = c < cb ? c : cb;
  }
  cb = mmAlignedCopyBytes(x->buffer, cb, eb);
  x->asyncCopies = cb > 0;
  x->copyBytes = cb;
}

FzOp *mmKLoopProduct(FzOp *kl, char *why, size_t whyLen) {
  FzBlock *body = fzLoopGetBody(kl);
  FzValue *acc = fzBlockGetArgument(body, 1);
  FzOp *yield = fzBlockGetLastOp(body);
  FzOp *add = yield && fzOpGetNumOperands(yield) == 1
                  ? fzValueGetDefiningOp(fzOpGetOperand(yield, 0))
                  : NULL;
  if (!add || fzLoopGetOpcode(add) != FZ_LOOP_OP_ADDF)
    return fzReasonf(why, whyLen, "the reduction is not a sum"), NULL;
  FzValue *x = fzOpGetOperand(add, 0), *y = fzOpGetOperand(add, 1);
  FzValue *prod = x == acc ? y : y == acc ? x : NULL;
  FzOp *mul = prod ? fzValueGetDefiningOp(prod) : NULL;
  if (!mul || fzLoopGetOpcode(mul) != FZ_LOOP_OP_MULF)
    return fzReasonf(why, whyLen, "the reduction does not add a product to the "
                               "accumulator"), NULL;
  return mul;
}

/* The k loop's bounds: 0..K step 1, or a k slice of a split nest
 * (splitMatchBounds) along the nest's last dim. */
static bool match_bounds(FzOp *par, FzOp *kl, FzMatmulNest *m) {
  int64_t lb, ub, step;
  if (const_int(fzOpGetOperand(kl, 0), &lb) &&
      const_int(fzOpGetOperand(kl, 1), &ub) &&
      const_int(fzOpGetOperand(kl, 2), &step) && lb == 0 && step == 1 &&
      ub >= 1) {
    m->K = ub;
    return true;
  }
  int d;
  if (!splitMatchBounds(par, kl, &d, &m->sliceK, &m->K) ||
      d != (int)m->numDims - 1)
    return false;
  m->dimSplit = d;
  m->splitK = m->extent[d];
  return true;
}

/* The k loop: bounds 0..K step 1 (or a slice), one f32 accumulator from
 * 0.0, body load/extf x2 (f32: loads alone), mulf, addf, yield. */
static bool match_kloop(FzOp *par, FzOp *kl, FzMatmulNest *m, char *why,
                        size_t whyLen) {
  double init;
  if (fzOpGetNumOperands(kl) != 4 || fzOpGetNumResults(kl) != 1 ||
      !match_bounds(par, kl, m))
    return fzReasonf(why, whyLen, "the reduction loop is not 0..K step 1 with "
                               "one accumulator");
  if (fzTypeGetKind(fzValueGetType(fzOpGetResult(kl, 0))) != FZ_TYPE_F32 ||
      !const_float(fzOpGetOperand(kl, 3), &init) || init != 0.0)
    return fzReasonf(why, whyLen, "the accumulator is not an f32 starting at "
                               "0.0");
  FzBlock *body = fzLoopGetBody(kl);
  FzValue *kiv = fzBlockGetArgument(body, 0);
  FzOp *mul = mmKLoopProduct(kl, why, whyLen);
  if (!mul)
    return false;
  FzType *ta = NULL, *tb = NULL;
  FzOp *la = operand_load(fzOpGetOperand(mul, 0), &ta);
  FzOp *lb2 = operand_load(fzOpGetOperand(mul, 1), &tb);
  if (!la || !lb2)
    return fzReasonf(why, whyLen, "the product's factors are not plain loads "
                               "(a producer is fused into the operands)");
  FzTypeKind ka = fzTypeGetKind(ta);
  bool f32 = ka == FZ_TYPE_F32;
  if (fzBlockGetNumOps(body) != (f32 ? 5u : 7u))
    return fzReasonf(why, whyLen, "the reduction loop computes more than "
                               "A * B");
  if (ta != tb || (ka != FZ_TYPE_BF16 && ka != FZ_TYPE_F16 && !f32))
    return fzReasonf(why, whyLen, "operands must be both bf16, both f16 or "
                               "both f32");
  m->elt = ta;
  int mnA, mnB;
  if (!classify_load(par, kiv, la, &m->a, &mnA, why, whyLen) ||
      !classify_load(par, kiv, lb2, &m->b, &mnB, why, whyLen))
    return false;
  if (mnA == mnB)
    return fzReasonf(why, whyLen, "both operands use the same output index");
  if (m->splitK && (mnA == m->dimSplit || mnB == m->dimSplit))
    return fzReasonf(why, whyLen, "the k slice indexes a matrix row or "
                               "column");
  /* B supplies the columns: prefer the last (contiguous) output dim (a
   * split nest's before its slice). */
  if (mnA == (int)m->numDims - (m->splitK ? 2 : 1)) {
    FzMatmulOperand t = m->a;
    m->a = m->b;
    m->b = t;
    int s = mnA;
    mnA = mnB;
    mnB = s;
  }
  m->dimI = mnA;
  m->dimJ = mnB;
  for (size_t d = 0; d < m->a.numBatch; ++d)
    if (m->a.batch[d].dim == mnA || m->a.batch[d].dim == mnB)
      return fzReasonf(why, whyLen, "a row or column index also indexes a "
                                 "batch dimension");
  for (size_t d = 0; d < m->b.numBatch; ++d)
    if (m->b.batch[d].dim == mnA || m->b.batch[d].dim == mnB)
      return fzReasonf(why, whyLen, "a row or column index also indexes a "
                                 "batch dimension");
  return true;
}

static bool add_capture(FzMatmulNest *m, FzValue *v, char *why,
                        size_t whyLen) {
  for (size_t i = 0; i < m->numCaptures; ++i)
    if (m->captures[i] == v)
      return true;
  if (m->numCaptures == FZ_MATMUL_MAX_CAPTURES)
    return fzReasonf(why, whyLen, "the nest uses more than %d outside values",
                  FZ_MATMUL_MAX_CAPTURES);
  FzType *t = fzValueGetType(v);
  FzOp *def = fzValueGetDefiningOp(v);
  bool constant = def && fzLoopGetOpcode(def) == FZ_LOOP_OP_CONSTANT;
  bool scalar = fzTypeIsFloat(t) || fzTypeIsIntOrIndex(t);
  bool buffer = fzTypeGetKind(t) == FZ_TYPE_BUFFER &&
                fzBufferTypeGetMemorySpace(t) == 0 &&
                fzShapedTypeHasStaticShape(t);
  if (!constant && !scalar && !buffer)
    return fzReasonf(why, whyLen, "the nest uses an outside value of a type a "
                               "kernel cannot take");
  m->captures[m->numCaptures++] = v;
  return true;
}

bool mmEpilogueOpOk(FzOp *op) {
  if (fzOpGetNumRegions(op) != 0)
    return false;
  switch (fzLoopGetOpcode(op)) {
  case FZ_LOOP_OP_UNKNOWN:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_CONSTANT_BUFFER:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_VIEW:
  case FZ_LOOP_OP_DIM:
    return false;
  default:
    return true;
  }
}

bool mmSameIndices(FzOp *load, FzOp *store) {
  size_t n = fzOpGetNumOperands(load);
  if (n + 1 != fzOpGetNumOperands(store))
    return false;
  for (size_t i = 1; i < n; ++i)
    if (fzOpGetOperand(load, i) != fzOpGetOperand(store, i + 1))
      return false;
  return true;
}

/* Stores of pairs (j, j + 1) as one vector store (FzMatmulNest). */
static bool pair_store_ok(const FzMatmulNest *m, FzOp *st) {
  FzValue *buf = fzOpGetOperand(st, 1);
  FzType *t = fzValueGetType(buf);
  size_t r = fzShapedTypeGetRank(t);
  int64_t esz = elt_bytes(t), strides[FZ_MATMUL_MAX_DIMS];
  if (r == 0 || (esz != 2 && esz != 4) || m->N % 2 != 0)
    return false;
  if (iv_dim(m->par, fzOpGetOperand(st, 1 + r)) != m->dimJ)
    return false;
  for (size_t d = 0; d + 1 < r; ++d)
    if (fzOpGetOperand(st, 2 + d) == fzOpGetOperand(st, 1 + r))
      return false;
  for (size_t d = 0; d < r; ++d) {
    FzValue *v = fzOpGetOperand(st, 2 + d);
    int64_t c;
    if (iv_dim(m->par, v) < 0 && !const_int(v, &c))
      return false;
  }
  mmStridesOf(t, strides);
  if (strides[r - 1] != 1)
    return false;
  for (size_t d = 0; d + 1 < r; ++d)
    if (strides[d] % 2 != 0)
      return false;
  return mmAlignedBase(buf, 2 * esz);
}

static bool collect_operand_captures(FzMatmulNest *m, FzOp *op, char *why,
                                     size_t whyLen) {
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (!defined_inside(v, m->par) && !add_capture(m, v, why, whyLen))
      return false;
  }
  return true;
}

bool mmMatchEpilogue(FzMatmulNest *m, char *why, size_t whyLen) {
  FzOp *par = m->par;
  FzBlock *body = fzLoopGetBody(par);
  FzOp *term = fzBlockGetLastOp(body);
  if (!add_capture(m, m->a.buffer, why, whyLen) ||
      !add_capture(m, m->b.buffer, why, whyLen))
    return false;
  /* The epilogue. */
  bool usesAcc = false;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (op == m->kloop || op == term)
      continue;
    if (!mmEpilogueOpOk(op))
      return fzReasonf(why, whyLen, "the nest holds '%.*s', which the matmul "
                                 "epilogue does not take",
                    (int)fzIdentGetString(fzOpGetName(op)).length,
                    fzIdentGetString(fzOpGetName(op)).data);
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      usesAcc = usesAcc || fzOpGetOperand(op, i) == fzOpGetResult(m->kloop, 0);
    if (!collect_operand_captures(m, op, why, whyLen))
      return false;
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    if (m->numStores == FZ_MATMUL_MAX_STORES)
      return fzReasonf(why, whyLen, "more than %d stores",
                    FZ_MATMUL_MAX_STORES);
    FzValue *buf = fzOpGetOperand(op, 1);
    if (!mmPlainBuffer(buf, par))
      return fzReasonf(why, whyLen, "a store to a buffer that is not a static "
                                 "global buffer defined outside the nest");
    if (buf == m->a.buffer || buf == m->b.buffer)
      return fzReasonf(why, whyLen, "the nest writes one of the matmul's "
                                 "operands");
    m->stores[m->numStores++] = op;
  }
  if (!m->numStores)
    return fzReasonf(why, whyLen, "the nest stores nothing");
  if (!usesAcc)
    return fzReasonf(why, whyLen, "the reduction's result is not used");
  /* Loads of a written buffer: only the element the same iteration
   * writes (each element is read before it is overwritten). */
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD)
      continue;
    for (size_t s = 0; s < m->numStores; ++s)
      if (fzOpGetOperand(m->stores[s], 1) == fzOpGetOperand(op, 0) &&
          !mmSameIndices(op, m->stores[s]))
        return fzReasonf(why, whyLen, "the epilogue reads a buffer the nest "
                                   "writes, at other indices");
  }
  /* An NHWC conv's columns are its output channels, contiguous. */
  m->pairStores = !m->conv.on || m->conv.nhwc;
  for (size_t s = 0; s < m->numStores; ++s)
    m->pairStores = m->pairStores && pair_store_ok(m, m->stores[s]);
  return true;
}

bool mmNestExtents(FzOp *par, int64_t *extent, char *why, size_t whyLen) {
  size_t n = fzLoopParallelGetNumDims(par);
  for (size_t d = 0; d < n; ++d) {
    int64_t lb, ub, st;
    if (!const_int(fzOpGetOperand(par, d), &lb) ||
        !const_int(fzOpGetOperand(par, n + d), &ub) ||
        !const_int(fzOpGetOperand(par, 2 * n + d), &st) || lb != 0 ||
        st != 1 || ub < 1)
      return fzReasonf(why, whyLen, "the nest's bounds are not constants "
                                 "0..N step 1");
    extent[d] = ub;
  }
  return true;
}

FzOp *mmOnlyLoop(FzOp *par, char *why, size_t whyLen) {
  FzOp *loop = NULL;
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(par)); op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_FOR)
      continue;
    if (loop)
      return fzReasonf(why, whyLen, "the nest holds more than one loop"),
             NULL;
    loop = op;
  }
  if (!loop)
    fzReasonf(why, whyLen, "no reduction loop");
  return loop;
}

bool fzKernelMatchMatmulNest(FzOp *par, FzMatmulNest *out, char *why,
                             size_t whyLen) {
  FzMatmulNest *m = out;
  memset(m, 0, sizeof *m);
  m->par = par;
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
    return fzReasonf(why, whyLen, "not a loop.parallel");
  size_t n = fzLoopParallelGetNumDims(par);
  if (n < 2 || n > FZ_MATMUL_MAX_DIMS)
    return fzReasonf(why, whyLen, "a nest of %zu dimensions (a matmul has at "
                               "least rows and columns)", n);
  m->numDims = n;
  if (!mmNestExtents(par, m->extent, why, whyLen) ||
      !(m->kloop = mmOnlyLoop(par, why, whyLen)) ||
      !match_kloop(par, m->kloop, m, why, whyLen))
    return false;
  m->M = m->extent[m->dimI];
  m->N = m->extent[m->dimJ];
  int64_t batch = 1;
  for (size_t d = 0; d < n; ++d)
    if ((int)d != m->dimI && (int)d != m->dimJ &&
        !(m->splitK && (int)d == m->dimSplit))
      batch *= m->extent[d];
  if (batch > 65535)
    return fzReasonf(why, whyLen, "a batch of %lld matrices (more than the "
                               "65535 blocks of grid.z)", (long long)batch);
  /* A slice starts at k = sb KS: a copy's start where KS, like K, is
   * whole copies. */
  int64_t kx = m->splitK ? fzLkGcd(m->K, m->sliceK) : m->K;
  set_copies(&m->a, m->a.kLast ? kx : m->M);
  set_copies(&m->b, m->b.kLast ? kx : m->N);
  return mmMatchEpilogue(m, why, whyLen);
}

