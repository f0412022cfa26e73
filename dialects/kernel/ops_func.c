/* dialects/kernel/ops_func.c - kernel.func, kernel.return, kernel.launch,
 * and the helpers every kernel op's hooks share.
 *
 * Custom forms:
 *   kernel.func @k(%x: buffer<64xf32>, %n: index) attributes {...} {
 *     ...
 *     kernel.return
 *   }
 *   kernel.launch @k blocks(%g0, %g1, %g2) threads(%b0, %b1, %b2)
 *       shared(%bytes) args(%x, %n) : buffer<64xf32>, index
 *
 * A kernel.func is a symbol, isolated from above, with one block ending
 * in kernel.return; its signature (`function_type`, no results) takes
 * global-memory buffers and scalars. kernel.launch names a kernel.func of
 * the nearest symbol table and passes it arguments of exactly its types;
 * it is host code, never nested in a kernel.func.
 */
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

/*===--- Helpers --------------------------------------------------------===*/

FzType *fzKernelOperandType(const FzOp *op, size_t i) {
  FzValue *v = i < fzOpGetNumOperands(op) ? fzOpGetOperand(op, i) : NULL;
  return v ? fzValueGetType(v) : NULL;
}

FzType *fzKernelResultType(const FzOp *op, size_t i) {
  return i < fzOpGetNumResults(op) ? fzValueGetType(fzOpGetResult(op, i))
                                   : NULL;
}

bool fzKernelIsBuffer(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_BUFFER;
}

bool fzKernelIsIndex(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INDEX;
}

bool fzKernelVerifyInKernel(FzOp *op) {
  if (!fzKernelGetEnclosingFunc(fzOpGetParentOp(op)))
    return fzOpEmitError(op, "must be inside a kernel.func");
  return true;
}

void fzKernelPrintAttrs(FzAsmPrinter *p, FzOp *op) {
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
}

void fzKernelPrintIndices(FzAsmPrinter *p, FzOp *op, size_t from) {
  fzAsmPrint(p, "[");
  for (size_t i = from; i < fzOpGetNumOperands(op); ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzAsmPrint(p, "]");
}

bool fzKernelParseIndices(FzAsmParser *p, FzUnresolvedOperand *out,
                          size_t *n) {
  FzUnresolvedOperand *ops;
  if (!fzAsmParsePunct(p, "[") || !fzAsmParseOperandList(p, &ops, n) ||
      !fzAsmParsePunct(p, "]"))
    return false;
  if (*n > FZ_GRAPH_MAX_RANK)
    return fzAsmEmitError(p, "too many indices (at most %d)",
                          FZ_GRAPH_MAX_RANK);
  if (*n)
    memcpy(out, ops, *n * sizeof *ops);
  return true;
}

bool fzKernelResolveIndices(FzAsmParser *p, const FzUnresolvedOperand *u,
                            size_t n, FzLoc *loc, FzOpState *st) {
  FzType *idx = fzIndexTypeGet(fzAsmParserGetContext(p));
  for (size_t i = 0; i < n; ++i)
    if (!fzAsmResolveOperands(p, &u[i], 1, &idx, 1, loc, st))
      return false;
  return true;
}

bool fzKernelCheckIndices(FzOp *op, size_t from, size_t rank) {
  if (fzOpGetNumOperands(op) != from + rank)
    return fzOpEmitError(op, "expects %zu indices (the buffer's rank), got "
                             "%zu", rank, fzOpGetNumOperands(op) - from);
  for (size_t i = from; i < from + rank; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "index #%zu must have type index", i - from);
  return true;
}

FzStringRef fzKernelStringProp(const FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_STRING)
    return (FzStringRef){NULL, 0};
  return fzStringAttrGetValue(a);
}

/*===--- kernel.func ----------------------------------------------------===*/

static FzType *kfunc_type(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("function_type"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_TYPE)
    return NULL;
  FzType *t = fzTypeAttrGetValue(a);
  return fzTypeGetKind(t) == FZ_TYPE_FUNCTION ? t : NULL;
}

static bool is_scalar(const FzType *t) {
  return t && (fzTypeIsFloat(t) || fzTypeIsIntOrIndex(t));
}

static bool kfunc_verify(FzOp *op) {
  FzAttr *name = fzOpGetInherentAttr(op, FZ_STR("sym_name"));
  if (!name || fzAttrGetKind(name) != FZ_ATTR_STRING)
    return fzOpEmitError(op, "requires string attribute 'sym_name'");
  FzType *ft = kfunc_type(op);
  if (!ft)
    return fzOpEmitError(op, "requires attribute 'function_type' holding a "
                             "function type");
  if (fzFunctionTypeGetNumResults(ft) != 0)
    return fzOpEmitError(op, "must not return values (kernels write "
                             "buffers)");
  if (fzKernelGetEnclosingFunc(fzOpGetParentOp(op)))
    return fzOpEmitError(op, "cannot be nested in another kernel.func");
  size_t n = fzFunctionTypeGetNumInputs(ft);
  for (size_t i = 0; i < n; ++i) {
    FzType *t = fzFunctionTypeGetInput(ft, i);
    if (fzKernelIsBuffer(t)) {
      if (fzBufferTypeGetMemorySpace(t) != FZ_KERNEL_SPACE_GLOBAL)
        return fzOpEmitError(op, "argument #%zu must be in the global "
                                 "memory space (0)", i);
    } else if (!is_scalar(t)) {
      return fzOpEmitError(op, "argument #%zu must be a buffer or a "
                               "scalar", i);
    }
  }
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
  if (!entry)
    return fzOpEmitError(op, "requires a body");
  if (fzBlockGetNumArguments(entry) != n)
    return fzOpEmitError(op, "entry block must have %zu arguments to match "
                             "the signature", n);
  for (size_t i = 0; i < n; ++i)
    if (fzValueGetType(fzBlockGetArgument(entry, i)) !=
        fzFunctionTypeGetInput(ft, i))
      return fzOpEmitError(op, "type of entry block argument #%zu does not "
                               "match the signature", i);
  FzOp *term = fzBlockGetLastOp(entry);
  if (!term || fzKernelGetOpcode(term) != FZ_KERNEL_OP_RETURN)
    return fzOpEmitError(op, "body must end with kernel.return");
  FzAttr *mb = fzOpGetAttr(op, FZ_STR("kernel.min_blocks_per_sm"));
  if (mb && (fzAttrGetKind(mb) != FZ_ATTR_INTEGER ||
             fzIntegerAttrGetValue(mb) < 1 || fzIntegerAttrGetValue(mb) > 32))
    return fzOpEmitError(op, "'kernel.min_blocks_per_sm' must be an integer "
                             "from 1 to 32");
  return true;
}

int64_t fzKernelFuncGetMinBlocksPerSm(const FzOp *op) {
  FzAttr *mb = fzOpGetAttr(op, FZ_STR("kernel.min_blocks_per_sm"));
  return mb && fzAttrGetKind(mb) == FZ_ATTR_INTEGER
             ? fzIntegerAttrGetValue(mb)
             : 0;
}

static void kfunc_print(FzOp *op, FzAsmPrinter *p) {
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
  FzStringRef name = fzSymbolGetName(op);
  fzAsmPrint(p, " ");
  fzAsmPrintSymbolName(p, name.data ? name : FZ_STR("<unnamed>"));
  fzAsmPrint(p, "(");
  size_t n = entry ? fzBlockGetNumArguments(entry) : 0;
  for (size_t i = 0; i < n; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintArgumentDecl(p, fzBlockGetArgument(entry, i));
  }
  fzAsmPrint(p, ")");
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, true);
  fzAsmPrintRegion(p, fzOpGetRegion(op, 0), false);
}

/* kernel-func ::= `@`name `(` (arg (`,` arg)*)? `)`
 *                 (`attributes` attr-dict)? region */
static bool kfunc_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef name;
  if (!fzAsmParseSymbolName(p, &name) || !fzAsmParsePunct(p, "("))
    return false;
  fzOpStateAddProp(st, FZ_STR("sym_name"), fzStringAttrGet(ctx, name));
  FzAsmArgument args[64];
  FzType *types[64];
  size_t n = 0;
  if (!fzAsmParseOptionalPunct(p, ")")) {
    do {
      if (n == 64)
        return fzAsmEmitError(p, "a kernel takes at most 64 arguments");
      if (!fzAsmParseArgument(p, &args[n], false))
        return false;
      types[n] = args[n].type;
      ++n;
    } while (fzAsmParseOptionalPunct(p, ","));
    if (!fzAsmParsePunct(p, ")"))
      return false;
  }
  FzAttr *attrs = NULL;
  if (!fzAsmParseOptionalAttrDictWithKeyword(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  FzType *ft = fzFunctionTypeGet(ctx, n, types, 0, NULL);
  if (!ft)
    return false;
  fzOpStateAddProp(st, FZ_STR("function_type"), fzTypeAttrGet(ctx, ft));
  FzRegion *body = fzOpStateAddRegion(st);
  return body && fzAsmParseRegion(p, body, n, args, true);
}

static const char *const kfunc_inherent[] = {"sym_name", "function_type",
                                             NULL};

FZ_KERNEL_OP(FUNC, "kernel.func", "a GPU entry point run by every thread "
             "of a grid", FZ_TRAIT_ISOLATED_FROM_ABOVE | FZ_TRAIT_SYMBOL |
             FZ_TRAIT_SINGLE_BLOCK, 0, 0, 1, kfunc_inherent, kfunc_verify,
             kfunc_print, kfunc_parse)

/*===--- kernel.return --------------------------------------------------===*/

static bool return_verify(FzOp *op) {
  if (fzKernelGetOpcode(fzOpGetParentOp(op)) != FZ_KERNEL_OP_FUNC)
    return fzOpEmitError(op, "must be the terminator of a kernel.func");
  return true;
}

static void return_print(FzOp *op, FzAsmPrinter *p) {
  fzKernelPrintAttrs(p, op);
}

static bool return_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

FZ_KERNEL_OP(RETURN, "kernel.return", "ends a kernel.func's body",
             FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE, 0, 0, 0, NULL,
             return_verify, return_print, return_parse)

/*===--- kernel.launch --------------------------------------------------===*/

static const char *const kConfigNames[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {
    "grid x", "grid y", "grid z", "block x", "block y", "block z",
    "dynamic shared memory size"};

static bool launch_verify(FzOp *op) {
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("kernel"));
  if (!callee || fzAttrGetKind(callee) != FZ_ATTR_SYMBOL_REF ||
      fzSymbolRefAttrGetNumNested(callee) != 0)
    return fzOpEmitError(op, "requires a flat 'kernel' symbol reference");
  if (fzKernelGetEnclosingFunc(fzOpGetParentOp(op)))
    return fzOpEmitError(op, "cannot launch a kernel from inside a "
                             "kernel.func");
  size_t n = fzOpGetNumOperands(op);
  if (n < FZ_KERNEL_LAUNCH_NUM_CONFIG)
    return fzOpEmitError(op, "expects 3 grid sizes, 3 block sizes and a "
                             "shared memory size before the arguments");
  for (size_t i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "%s must have type index", kConfigNames[i]);
  FzStringRef name = fzSymbolRefAttrGetRoot(callee);
  FzOp *table = fzSymbolTableGetNearest(fzOpGetParentOp(op));
  FzOp *k = table ? fzSymbolTableLookupIn(table, name) : NULL;
  if (!k || fzKernelGetOpcode(k) != FZ_KERNEL_OP_FUNC)
    return fzOpEmitError(op, "'%.*s' does not reference a kernel.func",
                         (int)name.length, name.data);
  FzType *ft = kfunc_type(k);
  if (!ft)
    return true; /* the kernel's own verifier reports it */
  size_t nargs = n - FZ_KERNEL_LAUNCH_NUM_CONFIG;
  if (nargs != fzFunctionTypeGetNumInputs(ft))
    return fzOpEmitError(op, "passes %zu arguments to a kernel of %zu",
                         nargs, fzFunctionTypeGetNumInputs(ft));
  for (size_t i = 0; i < nargs; ++i)
    if (fzKernelOperandType(op, FZ_KERNEL_LAUNCH_NUM_CONFIG + i) !=
        fzFunctionTypeGetInput(ft, i))
      return fzOpEmitError(op, "argument #%zu's type does not match the "
                               "kernel's signature", i);
  return true;
}

static void print_group(FzAsmPrinter *p, FzOp *op, const char *kw,
                        size_t from, size_t to) {
  size_t n = fzOpGetNumOperands(op); /* an unverified op may be short */
  if (to > n)
    to = n;
  fzAsmPrintf(p, " %s(", kw);
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzAsmPrint(p, ")");
}

static void launch_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"kernel", NULL};
  size_t n = fzOpGetNumOperands(op);
  fzAsmPrint(p, " ");
  fzAsmPrintAttr(p, fzOpGetInherentAttr(op, FZ_STR("kernel")));
  print_group(p, op, "blocks", 0, 3);
  print_group(p, op, "threads", 3, 6);
  print_group(p, op, "shared", 6, 7);
  print_group(p, op, "args", 7, n);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  if (n > FZ_KERNEL_LAUNCH_NUM_CONFIG) {
    fzAsmPrint(p, " : ");
    for (size_t i = FZ_KERNEL_LAUNCH_NUM_CONFIG; i < n; ++i) {
      if (i > FZ_KERNEL_LAUNCH_NUM_CONFIG)
        fzAsmPrint(p, ", ");
      fzAsmPrintType(p, fzKernelOperandType(op, i));
    }
  }
}

/* kw `(` operands `)` with exactly `want` operands (any when want < 0). */
static bool parse_group(FzAsmParser *p, const char *kw, int want,
                        FzUnresolvedOperand **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!fzAsmParseKeyword(p, kw) || !fzAsmParsePunct(p, "("))
    return false;
  if (!fzAsmParseOptionalPunct(p, ")")) {
    if (!fzAsmParseOperandList(p, out, n) || !fzAsmParsePunct(p, ")"))
      return false;
  }
  if (want >= 0 && *n != (size_t)want)
    return fzAsmEmitError(p, "expected %d operands in %s(...)", want, kw);
  return true;
}

/* launch ::= @k `blocks` `(` x, y, z `)` `threads` `(` x, y, z `)`
 *            `shared` `(` bytes `)` `args` `(` operands `)` attr-dict?
 *            (`:` types)? */
static bool launch_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef name;
  if (!fzAsmParseSymbolName(p, &name))
    return false;
  fzOpStateAddProp(st, FZ_STR("kernel"),
                   fzSymbolRefAttrGet(ctx, name, 0, NULL));
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand cfg[FZ_KERNEL_LAUNCH_NUM_CONFIG], *u;
  size_t n;
  if (!parse_group(p, "blocks", 3, &u, &n))
    return false;
  memcpy(cfg, u, 3 * sizeof *u);
  if (!parse_group(p, "threads", 3, &u, &n))
    return false;
  memcpy(cfg + 3, u, 3 * sizeof *u);
  if (!parse_group(p, "shared", 1, &u, &n))
    return false;
  cfg[6] = u[0];
  FzUnresolvedOperand args[64];
  size_t nargs;
  if (!parse_group(p, "args", -1, &u, &nargs))
    return false;
  if (nargs > 64)
    return fzAsmEmitError(p, "a kernel takes at most 64 arguments");
  if (nargs)
    memcpy(args, u, nargs * sizeof *u);
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  FzType **types = NULL;
  size_t ntypes = 0;
  if (fzAsmParseOptionalPunct(p, ":") &&
      !fzAsmParseTypeList(p, &types, &ntypes))
    return false;
  FzType *idx = fzIndexTypeGet(ctx);
  for (size_t i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i)
    if (!fzAsmResolveOperands(p, &cfg[i], 1, &idx, 1, loc, st))
      return false;
  if (!fzAsmResolveOperands(p, args, nargs, types, ntypes, loc, st))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

static const char *const launch_inherent[] = {"kernel", NULL};

FZ_KERNEL_OP(LAUNCH, "kernel.launch", "runs a kernel.func over a grid of "
             "thread blocks", 0, FZ_VARIADIC, 0, 0, launch_inherent,
             launch_verify, launch_print, launch_parse)
