/* dialects/loop/ops_mem.c - buffers and memory access: alloc, dealloc,
 * view, dim, constant_buffer, load, store, vector_load, vector_store,
 * prefetch.
 *
 * Custom forms:
 *   %b = loop.alloc() : buffer<4x8xf32>          (%n per `?` dim, in order)
 *   loop.dealloc %b : buffer<4x8xf32>
 *   %v = loop.view %b[%off] : buffer<32xf32> -> buffer<4x8xf32>
 *   %v = loop.view %b : buffer<4x8xf32> -> buffer<8x4xf32, strides [1, 8]>
 *   %d = loop.dim %b, 0 : buffer<?x8xf32>
 *   %c = loop.constant_buffer dense<[1.0, 2.0]> : tensor<2xf32>
 *   %x = loop.load %b[%i, %j] : buffer<4x8xf32>
 *   loop.store %x, %b[%i, %j] : buffer<4x8xf32>
 *   %x = loop.vector_load %b[%i, %j] : buffer<4x8xf32>, vector<4xf32>
 *   loop.vector_store %x, %b[%i, %j] : buffer<4x8xf32>, vector<4xf32>
 *   loop.prefetch %b[%i, %j] : buffer<4x8xf32>
 *
 * Loads and stores are not pure (memory may change between them); views,
 * dims and constant buffers are. A prefetch changes nothing a program
 * can observe; it is not pure either, so that nothing removes it as dead
 * (it has no result to use). A view never copies: it re-describes
 * the source's memory, starting `offset` elements after the source's
 * address, with the result type's shape and strides.
 */
#include "dialects/loop/loop_internal.h"

static bool is_buffer(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_BUFFER;
}

static bool is_index(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INDEX;
}

static bool check_indices(FzOp *op, size_t from, size_t count) {
  if (fzOpGetNumOperands(op) != from + count)
    return fzOpEmitError(op, "expects %zu indices (the buffer's rank), got "
                             "%zu", count, fzOpGetNumOperands(op) - from);
  for (size_t i = from; i < from + count; ++i)
    if (!is_index(fzLoopOperandType(op, i)))
      return fzOpEmitError(op, "index #%zu must have type index", i - from);
  return true;
}

static void print_indices(FzAsmPrinter *p, FzOp *op, size_t from) {
  fzAsmPrint(p, "[");
  fzLoopPrintOperandRange(p, op, from, fzOpGetNumOperands(op));
  fzAsmPrint(p, "]");
}

/*===--- alloc / dealloc -------------------------------------------------===*/

static bool alloc_verify(FzOp *op) {
  FzType *t = fzLoopResultType(op, 0);
  if (!is_buffer(t))
    return fzOpEmitError(op, "result must be a buffer");
  if (fzBufferTypeGetStrides(t))
    return fzOpEmitError(op, "allocates only the identity layout");
  size_t dyn = 0, rank = fzShapedTypeGetRank(t);
  for (size_t i = 0; i < rank; ++i)
    dyn += fzShapedTypeGetDim(t, i) == FZ_DYNAMIC;
  if (fzOpGetNumOperands(op) != dyn)
    return fzOpEmitError(op, "expects one size per dynamic dimension (%zu), "
                             "got %zu", dyn, fzOpGetNumOperands(op));
  for (size_t i = 0; i < dyn; ++i)
    if (!is_index(fzLoopOperandType(op, i)))
      return fzOpEmitError(op, "size #%zu must have type index", i);
  return true;
}

static void alloc_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, "(");
  fzAsmPrintOperands(p, op);
  fzAsmPrint(p, ")");
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopResultType(op, 0));
}

static bool alloc_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand ops[FZ_GRAPH_MAX_RANK];
  size_t n;
  FzAttr *attrs;
  FzType *t;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParsePunct(p, "(") ||
      !fzLoopParseOperands(p, ops, FZ_GRAPH_MAX_RANK, &n) ||
      !fzAsmParsePunct(p, ")") || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &t))
    return false;
  FzType *idx = fzIndexTypeGet(fzAsmParserGetContext(p));
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &ops[i], 1, &idx, 1, loc, st))
      return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddResults(st, 1, &t);
  return true;
}

static bool dealloc_verify(FzOp *op) {
  if (!is_buffer(fzLoopOperandType(op, 0)))
    return fzOpEmitError(op, "operand must be a buffer");
  return true;
}

/* ` %b : type` for one-operand, no-result ops. */
static void unary_buffer_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopOperandType(op, 0));
}

static bool dealloc_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand u;
  FzAttr *attrs;
  FzType *t;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOperand(p, &u) || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &t))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return fzAsmResolveOperands(p, &u, 1, &t, 1, loc, st);
}

/*===--- view / dim / constant_buffer ------------------------------------===*/

static bool view_verify(FzOp *op) {
  FzType *s = fzLoopOperandType(op, 0), *r = fzLoopResultType(op, 0);
  if (!is_buffer(s) || !is_buffer(r))
    return fzOpEmitError(op, "source and result must be buffers");
  if (fzShapedTypeGetElementType(s) != fzShapedTypeGetElementType(r))
    return fzOpEmitError(op, "source and result must have one element type");
  if (fzBufferTypeGetMemorySpace(s) != fzBufferTypeGetMemorySpace(r))
    return fzOpEmitError(op, "source and result must be in one memory space");
  if (fzOpGetNumOperands(op) > 2)
    return fzOpEmitError(op, "expects a source and an optional offset");
  if (fzOpGetNumOperands(op) == 2 && !is_index(fzLoopOperandType(op, 1)))
    return fzOpEmitError(op, "offset must have type index");
  return true;
}

static void view_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  if (fzOpGetNumOperands(op) > 1)
    print_indices(p, op, 1);
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopOperandType(op, 0));
  fzAsmPrint(p, " -> ");
  fzAsmPrintType(p, fzLoopResultType(op, 0));
}

static bool view_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand src, off;
  bool hasOff = false;
  FzAttr *attrs;
  FzType *s, *r;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOperand(p, &src))
    return false;
  if (fzAsmParseOptionalPunct(p, "[")) {
    if (!fzAsmParseOperand(p, &off) || !fzAsmParsePunct(p, "]"))
      return false;
    hasOff = true;
  }
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &s) ||
      !fzAsmParsePunct(p, "->") || !fzAsmParseType(p, &r))
    return false;
  FzType *idx = fzIndexTypeGet(fzAsmParserGetContext(p));
  if (!fzAsmResolveOperands(p, &src, 1, &s, 1, loc, st) ||
      (hasOff && !fzAsmResolveOperands(p, &off, 1, &idx, 1, loc, st)))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddResults(st, 1, &r);
  return true;
}

static bool dim_verify(FzOp *op) {
  FzType *s = fzLoopOperandType(op, 0);
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("index"));
  if (!is_buffer(s))
    return fzOpEmitError(op, "operand must be a buffer");
  if (!a || fzAttrGetKind(a) != FZ_ATTR_INTEGER)
    return fzOpEmitError(op, "requires integer attribute 'index'");
  int64_t i = fzIntegerAttrGetValue(a);
  if (i < 0 || (size_t)i >= fzShapedTypeGetRank(s))
    return fzOpEmitError(op, "index %lld is out of range for rank %zu",
                         (long long)i, fzShapedTypeGetRank(s));
  if (!is_index(fzLoopResultType(op, 0)))
    return fzOpEmitError(op, "result must have type index");
  return true;
}

static void dim_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"index", NULL};
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("index"));
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzAsmPrintf(p, ", %lld", a ? (long long)fzIntegerAttrGetValue(a) : -1LL);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopOperandType(op, 0));
}

static bool dim_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand u;
  int64_t i;
  FzAttr *attrs;
  FzType *t;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzContext *ctx = fzAsmParserGetContext(p);
  if (!fzAsmParseOperand(p, &u) || !fzAsmParsePunct(p, ",") ||
      !fzAsmParseInteger(p, &i) || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &t) ||
      !fzAsmResolveOperands(p, &u, 1, &t, 1, loc, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("index"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), i));
  fzOpStateAddAttrDict(st, attrs);
  FzType *idx = fzIndexTypeGet(ctx);
  fzOpStateAddResults(st, 1, &idx);
  return true;
}

static bool dim_fold(FzOp *op, FzAttr *const *c, FzFoldResult *res) {
  (void)c;
  FzType *s = fzLoopOperandType(op, 0);
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("index"));
  if (!is_buffer(s) || !a)
    return false;
  int64_t d = fzShapedTypeGetDim(s, (size_t)fzIntegerAttrGetValue(a));
  if (d == FZ_DYNAMIC)
    return false;
  FzContext *ctx = fzOpGetContext(op);
  res[0].attr = fzIntegerAttrGet(ctx, fzIndexTypeGet(ctx), d);
  return res[0].attr != NULL;
}

static bool constant_buffer_verify(FzOp *op) {
  FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("value"));
  FzType *r = fzLoopResultType(op, 0);
  if (!v || fzAttrGetKind(v) != FZ_ATTR_DENSE)
    return fzOpEmitError(op, "requires dense attribute 'value'");
  FzType *vt = fzAttrGetType(v);
  if (!is_buffer(r) || fzBufferTypeGetStrides(r) ||
      fzShapedTypeGetElementType(r) != fzShapedTypeGetElementType(vt) ||
      fzShapedTypeGetRank(r) != fzShapedTypeGetRank(vt) ||
      fzShapedTypeGetNumElements(r) != fzShapedTypeGetNumElements(vt))
    return fzOpEmitError(op, "result must be an identity-layout buffer of "
                             "the value's shape and element type");
  for (size_t i = 0; i < fzShapedTypeGetRank(r); ++i)
    if (fzShapedTypeGetDim(r, i) != fzShapedTypeGetDim(vt, i))
      return fzOpEmitError(op, "result dimension %zu does not match the "
                               "value's", i);
  return true;
}

static void constant_buffer_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"value", NULL};
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " ");
  fzAsmPrintAttr(p, fzOpGetInherentAttr(op, FZ_STR("value")));
  FzType *r = fzLoopResultType(op, 0);
  if (fzBufferTypeGetMemorySpace(r) != 0)
    fzAsmPrintf(p, " in %u", fzBufferTypeGetMemorySpace(r));
}

static bool constant_buffer_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs, *v;
  int64_t space = 0;
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseAttr(p, NULL, &v))
    return false;
  if (fzAttrGetKind(v) != FZ_ATTR_DENSE)
    return fzAsmEmitError(p, "expected a dense attribute");
  if (fzAsmParseOptionalKeyword(p, "in") && !fzAsmParseInteger(p, &space))
    return false;
  FzType *vt = fzAttrGetType(v);
  FzType *r = fzBufferTypeGet(fzAsmParserGetContext(p),
                              fzShapedTypeGetRank(vt), fzShapedTypeGetShape(vt),
                              fzShapedTypeGetElementType(vt), NULL,
                              (unsigned)space, NULL);
  if (!r)
    return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddProp(st, FZ_STR("value"), v);
  fzOpStateAddResults(st, 1, &r);
  return true;
}

/*===--- load / store / vector forms ---------------------------------------===*/

size_t fzLoopMemGetBufferOperand(const FzOp *op) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  return opc == FZ_LOOP_OP_STORE || opc == FZ_LOOP_OP_VECTOR_STORE ? 1 : 0;
}

/* Checks a vector access of type vt on buffer type bt. */
static bool check_vector(FzOp *op, FzType *bt, FzType *vt) {
  if (!vt || fzTypeGetKind(vt) != FZ_TYPE_VECTOR ||
      fzShapedTypeGetRank(vt) != 1 ||
      fzShapedTypeGetElementType(vt) != fzShapedTypeGetElementType(bt))
    return fzOpEmitError(op, "expects a 1-d vector of the buffer's element "
                             "type");
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *strides = fzBufferTypeGetStrides(bt);
  if (rank == 0)
    return fzOpEmitError(op, "cannot access a vector in a rank-0 buffer");
  if (strides && strides[rank - 1] != 1)
    return fzOpEmitError(op, "the buffer's last dimension must have stride 1");
  return true;
}

static bool mem_verify(FzOp *op) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  size_t bi = fzLoopMemGetBufferOperand(op);
  FzType *bt = fzLoopOperandType(op, bi);
  if (!is_buffer(bt))
    return fzOpEmitError(op, "operand #%zu must be a buffer", bi);
  if (!check_indices(op, bi + 1, fzShapedTypeGetRank(bt)))
    return false;
  FzType *elt = fzShapedTypeGetElementType(bt);
  switch (opc) {
  case FZ_LOOP_OP_LOAD:
    if (fzLoopResultType(op, 0) != elt)
      return fzOpEmitError(op, "result type must be the element type");
    return true;
  case FZ_LOOP_OP_STORE:
    if (fzLoopOperandType(op, 0) != elt)
      return fzOpEmitError(op, "stored value must have the element type");
    return true;
  case FZ_LOOP_OP_VECTOR_LOAD:
    return check_vector(op, bt, fzLoopResultType(op, 0));
  case FZ_LOOP_OP_VECTOR_STORE:
    return check_vector(op, bt, fzLoopOperandType(op, 0));
  default:
    return true;
  }
}

static void mem_print(FzOp *op, FzAsmPrinter *p) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  size_t bi = fzLoopMemGetBufferOperand(op);
  fzAsmPrint(p, " ");
  if (bi == 1) {
    fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
    fzAsmPrint(p, ", ");
  }
  fzAsmPrintOperand(p, fzOpGetOperand(op, bi));
  print_indices(p, op, bi + 1);
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopOperandType(op, bi));
  if (opc == FZ_LOOP_OP_VECTOR_LOAD) {
    fzAsmPrint(p, ", ");
    fzAsmPrintType(p, fzLoopResultType(op, 0));
  } else if (opc == FZ_LOOP_OP_VECTOR_STORE) {
    fzAsmPrint(p, ", ");
    fzAsmPrintType(p, fzLoopOperandType(op, 0));
  }
}

/* load ::= %b `[` indices `]` attrs? `:` buffer-type (`,` vector-type)?
 * store ::= %v `,` load-syntax */
static bool mem_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzIdentGetString(st->name));
  FzLoopOpcode opc = ((const FzLoopOpInfo *)def->extra)->opcode;
  bool isStore = opc == FZ_LOOP_OP_STORE || opc == FZ_LOOP_OP_VECTOR_STORE;
  bool isVector = opc == FZ_LOOP_OP_VECTOR_LOAD ||
                  opc == FZ_LOOP_OP_VECTOR_STORE;
  FzUnresolvedOperand val, buf, idx[FZ_GRAPH_MAX_RANK];
  size_t n;
  FzAttr *attrs;
  FzType *bt, *vt = NULL;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (isStore && (!fzAsmParseOperand(p, &val) || !fzAsmParsePunct(p, ",")))
    return false;
  if (!fzAsmParseOperand(p, &buf) || !fzAsmParsePunct(p, "[") ||
      !fzLoopParseOperands(p, idx, FZ_GRAPH_MAX_RANK, &n) ||
      !fzAsmParsePunct(p, "]") || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &bt))
    return false;
  if (isVector && (!fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &vt)))
    return false;
  if (!is_buffer(bt))
    return fzAsmEmitError(p, "expected a buffer type");
  FzType *elt = fzShapedTypeGetElementType(bt);
  FzType *vty = isVector ? vt : elt;
  if (isStore && !fzAsmResolveOperands(p, &val, 1, &vty, 1, loc, st))
    return false;
  if (!fzAsmResolveOperands(p, &buf, 1, &bt, 1, loc, st))
    return false;
  FzType *it = fzIndexTypeGet(ctx);
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &idx[i], 1, &it, 1, loc, st))
      return false;
  fzOpStateAddAttrDict(st, attrs);
  if (!isStore && opc != FZ_LOOP_OP_PREFETCH)
    fzOpStateAddResults(st, 1, &vty);
  return true;
}

/*===--- The table ------------------------------------------------------===*/

static const char *const kIndexAttr[] = {"index", NULL};
static const char *const kValueAttr[] = {"value", NULL};

#define MEM_OP(ID, NAME, SUMMARY, TRAITS, NOPS, NRES, VERIFY, PRINT, PARSE,   \
               FOLD, ATTRS)                                                   \
  static const FzLoopOpInfo info_##ID = {FZ_LOOP_OP_##ID, FZ_LOOP_FAM_OTHER}; \
  const FzOpDef fzLoopOp_##ID = {                                             \
      .name = NAME,                                                           \
      .summary = SUMMARY,                                                     \
      .traits = TRAITS,                                                       \
      .numOperands = NOPS,                                                    \
      .numResults = NRES,                                                     \
      .numRegions = 0,                                                        \
      .fusionKind = FZ_FUSION_OPAQUE,                                         \
      .inherentAttrs = ATTRS,                                                 \
      .verify = VERIFY,                                                       \
      .print = PRINT,                                                         \
      .parse = PARSE,                                                         \
      .fold = FOLD,                                                           \
      .extra = &info_##ID,                                                    \
  };

/* clang-format off */
MEM_OP(ALLOC, "loop.alloc", "allocates an uninitialized buffer", 0,
       FZ_VARIADIC, 1, alloc_verify, alloc_print, alloc_parse, NULL, NULL)
MEM_OP(DEALLOC, "loop.dealloc", "frees a buffer made by loop.alloc", 0, 1, 0,
       dealloc_verify, unary_buffer_print, dealloc_parse, NULL, NULL)
MEM_OP(VIEW, "loop.view", "re-describes a buffer's memory (shape, strides, "
       "offset); never copies", FZ_TRAIT_PURE, FZ_VARIADIC, 1, view_verify,
       view_print, view_parse, NULL, NULL)
MEM_OP(DIM, "loop.dim", "the size of one dimension of a buffer",
       FZ_TRAIT_PURE, 1, 1, dim_verify, dim_print, dim_parse, dim_fold,
       kIndexAttr)
MEM_OP(CONSTANT_BUFFER, "loop.constant_buffer", "read-only memory holding a "
       "dense constant", FZ_TRAIT_PURE, 0, 1, constant_buffer_verify,
       constant_buffer_print, constant_buffer_parse, NULL, kValueAttr)
MEM_OP(LOAD, "loop.load", "reads one element", 0, FZ_VARIADIC, 1, mem_verify,
       mem_print, mem_parse, NULL, NULL)
MEM_OP(STORE, "loop.store", "writes one element", 0, FZ_VARIADIC, 0,
       mem_verify, mem_print, mem_parse, NULL, NULL)
MEM_OP(VECTOR_LOAD, "loop.vector_load", "reads N consecutive elements of the "
       "last dimension", 0, FZ_VARIADIC, 1, mem_verify, mem_print, mem_parse,
       NULL, NULL)
MEM_OP(VECTOR_STORE, "loop.vector_store", "writes N consecutive elements of "
       "the last dimension", 0, FZ_VARIADIC, 0, mem_verify, mem_print,
       mem_parse, NULL, NULL)
MEM_OP(PREFETCH, "loop.prefetch", "hints that an element will be read "
       "soon (no effect; indices may lie outside the buffer)", 0,
       FZ_VARIADIC, 0, mem_verify, mem_print, mem_parse, NULL, NULL)
/* clang-format on */
