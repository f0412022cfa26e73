/* lowering/loop_to_kernel/dedup.c - identical kernels compiled once.
 *
 * A model repeats its blocks (ResNet-50's bottlenecks within a stage,
 * ViT's twelve encoder layers), and since weights are kernel parameters
 * (outline.c), the kernels of repeated blocks are the same function under
 * different names. This step, the last of lower-loop-to-kernel, keeps
 * the first kernel.func of each group of structurally identical ones and
 * points every kernel.launch of the others at it, then erases them: the
 * PTX, LLVM's work on it and the driver's JIT shrink with the number of
 * distinct kernels instead of the number of nests.
 *
 * Identical means: the generic form of the kernel.func (its body, types,
 * attributes and properties, fuse.plan included) is the same text once
 * the symbol name is set aside; locations are not compared, so the kept
 * kernel carries the location of its first instance (a run-time error
 * raised in it names that one).
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

static void append(FzStringRef s, void *ud) {
  fzBufAppend(ud, s.data, s.length);
}

typedef struct Kernel {
  FzOp *op;
  FzStringRef name; /* its symbol (immortal: the context's) */
  FzBuf text;       /* generic form with the name set aside (data NULL:
                       not compared) */
  uint32_t hash;
  FzOp *same; /* the kept kernel it duplicates, or NULL */
} Kernel;

static bool is_kernel_func(FzOp *op) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == 11 && memcmp(n.data, "kernel.func", 11) == 0;
}

/* The generic form of kernel k with its sym_name property set to a fixed
 * string while printing (and restored). False when out of memory. */
static bool print_kernel(FzContext *ctx, Kernel *k) {
  FzAttr *name = fzOpGetProp(k->op, FZ_STR("sym_name"));
  if (!name || fzAttrGetKind(name) != FZ_ATTR_STRING)
    return true; /* not compared: kept as it is */
  k->name = fzStringAttrGetValue(name);
  if (!fzOpSetProp(k->op, FZ_STR("sym_name"),
                   fzStringAttrGet(ctx, FZ_STR("fz.dedup"))))
    return false;
  fzBufInit(&k->text, ctx);
  fzOpPrint(k->op, FZ_PRINT_GENERIC | FZ_PRINT_LOCAL_SCOPE, append,
            &k->text);
  bool ok = fzOpSetProp(k->op, FZ_STR("sym_name"), name) &&
            !k->text.failed && k->text.data;
  if (!ok) {
    fzBufFree(&k->text);
    return false;
  }
  k->hash = fzHashBytes(k->text.data, k->text.len, 0);
  return true;
}

static Kernel *find(Kernel *ks, size_t n, FzStringRef name) {
  for (size_t i = 0; i < n; ++i)
    if (ks[i].text.data && fzStringRefEqual(ks[i].name, name))
      return &ks[i];
  return NULL;
}

typedef struct Retarget {
  FzContext *ctx;
  Kernel *ks;
  size_t n;
  bool ok;
} Retarget;

static FzWalkResult retarget(FzOp *op, void *ud) {
  Retarget *r = ud;
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_LAUNCH)
    return FZ_WALK_ADVANCE;
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("kernel"));
  Kernel *k = callee && fzAttrGetKind(callee) == FZ_ATTR_SYMBOL_REF
                  ? find(r->ks, r->n, fzSymbolRefAttrGetRoot(callee))
                  : NULL;
  if (!k || !k->same)
    return FZ_WALK_ADVANCE;
  FzAttr *kept = fzOpGetProp(k->same, FZ_STR("sym_name"));
  if (!fzOpSetProp(op, FZ_STR("kernel"),
                   fzSymbolRefAttrGet(r->ctx, fzStringAttrGetValue(kept), 0,
                                      NULL))) {
    r->ok = false;
    return FZ_WALK_INTERRUPT;
  }
  return FZ_WALK_ADVANCE;
}

bool fzLkDedupKernels(FzOp *module) {
  FzContext *ctx = fzOpGetContext(module);
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  size_t n = 0;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op))
    n += is_kernel_func(op);
  if (n < 2)
    return true;
  Kernel *ks = fzCalloc(ctx, n, sizeof *ks);
  bool ok = ks != NULL;
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(top); ok && op;
       op = fzOpGetNextInBlock(op))
    if (is_kernel_func(op)) {
      ks[i].op = op;
      ok = print_kernel(ctx, &ks[i++]);
    }
  size_t dups = 0;
  for (i = 0; ok && i < n; ++i) {
    if (!ks[i].text.data)
      continue;
    for (size_t j = 0; j < i && !ks[i].same; ++j)
      if (ks[j].text.data && !ks[j].same && ks[j].hash == ks[i].hash &&
          ks[j].text.len == ks[i].text.len &&
          memcmp(ks[j].text.data, ks[i].text.data, ks[i].text.len) == 0)
        ks[i].same = ks[j].op;
    dups += ks[i].same != NULL;
  }
  /* Every launch of a duplicate goes to the kept kernel. */
  if (ok && dups) {
    Retarget r = {ctx, ks, n, true};
    fzOpWalk(module, FZ_WALK_PRE_ORDER, retarget, &r);
    ok = r.ok;
  }
  for (i = 0; ok && i < n; ++i)
    if (ks[i].same)
      fzOpErase(ks[i].op);
  for (i = 0; ks && i < n; ++i)
    if (ks[i].text.data)
      fzBufFree(&ks[i].text);
  fzFree(ctx, ks);
  if (!ok)
    return fzEmitError(ctx, fzOpGetLoc(module),
                       "lower-loop-to-kernel: out of memory while merging "
                       "identical kernels");
  return true;
}
