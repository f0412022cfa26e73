/* lowering/loop_to_kernel/pass.c - lower-loop-to-kernel: every top-level
 * loop.parallel nest of a loop-level function becomes a kernel.func and
 * a kernel.launch (fz/kernel.h; docs/passes.md).
 *
 * Per function: top-level sequential nests are first wrapped into
 * one-iteration loop.parallel nests (fzKernelWrapSequentialNests); then each
 * top-level loop.parallel, in order, is planned by the first mapping of
 * kMappings that accepts it and outlined (outline.c) into kernel
 * `<function>_kN`; finally the setup ops no longer used at the host level
 * are erased, so that the function holds only what a host runs:
 * temporaries, constants, launches. A function without top-level nests
 * (already lowered, or a declaration) is left alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/pass.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul.h" /* fzMatmulTileParse */
#include "lowering/loop_to_kernel/small_m.h"
#include "lowering/passes.h"

/* Tried in order: the first whose plan accepts a nest builds its kernel.
 * The specialized mappings (small-M contractions, depthwise convolutions,
 * then the tensor-core matmul) go in front of the generic ones; elementwise accepts every
 * nest. */
static const FzLkMapping *const kMappings[] = {
    &fzLkSmallMMapping,
    &fzLkDepthwiseMapping,
    &fzLkAttentionMapping,
    &fzLkMatmulMapping,
    &fzLkGroupedMapping,
    &fzLkElementwiseMapping,
};

void fzLoopToKernelOptionsInit(FzLoopToKernelOptions *o) {
  memset(o, 0, sizeof *o);
  o->blockSize = 256;
  o->rowRegisters = 32;
}

static bool is_named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

typedef struct Scan {
  FzLkNest *nest;
  bool ok;
} Scan;

static FzWalkResult scan_nest(FzOp *op, void *ud) {
  Scan *s = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (op != s->nest->par &&
      (c == FZ_LOOP_OP_FOR || c == FZ_LOOP_OP_PARALLEL ||
       c == FZ_LOOP_OP_ALLOC))
    s->nest->straightLine = false;
  if (c == FZ_LOOP_OP_UNKNOWN) {
    FzStringRef nm = fzIdentGetString(fzOpGetName(op));
    s->ok = fzOpEmitError(op, "lower-loop-to-kernel: '%.*s' in a loop nest "
                              "has no kernel translation",
                          (int)nm.length, nm.data);
    return FZ_WALK_INTERRUPT;
  }
  if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE ||
      c == FZ_LOOP_OP_VECTOR_LOAD || c == FZ_LOOP_OP_VECTOR_STORE) {
    FzValue *buf = fzOpGetOperand(op, fzLoopMemGetBufferOperand(op));
    size_t sz =
        fzTypeGetStorageSize(fzShapedTypeGetElementType(fzValueGetType(buf)));
    if (sz > s->nest->widestBytes)
      s->nest->widestBytes = sz;
  }
  return FZ_WALK_ADVANCE;
}

/* Fills nest for par. False after an error (reported). */
static bool analyze(FzOp *func, FzOp *par, FzLkNest *nest) {
  memset(nest, 0, sizeof *nest);
  nest->ctx = fzOpGetContext(par);
  nest->par = par;
  nest->func = func;
  nest->widestBytes = 1;
  nest->straightLine = true;
  size_t n = fzLoopParallelGetNumDims(par);
  if (n == 0 || n > FZ_LK_MAX_DIMS || !fzLoopGetBody(par))
    return fzOpEmitError(par, "lower-loop-to-kernel: a nest of %zu "
                              "dimensions (1 to %d are supported)",
                         n, FZ_LK_MAX_DIMS);
  nest->numDims = n;
  nest->items = 1;
  for (size_t d = 0; d < n; ++d) {
    int64_t ub;
    if (!fzLoopValueGetConstantInt(fzOpGetOperand(par, d), &nest->lb[d]) ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(par, n + d), &ub) ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(par, 2 * n + d),
                                   &nest->step[d]) ||
        nest->step[d] <= 0)
      return fzOpEmitError(par, "lower-loop-to-kernel: a kernel needs a "
                                "loop.parallel with constant bounds and "
                                "positive steps");
    int64_t tr = ub > nest->lb[d]
                     ? (ub - nest->lb[d] + nest->step[d] - 1) / nest->step[d]
                     : 0;
    nest->trips[d] = tr;
    nest->items = tr > 0 && nest->items <= ((int64_t)1 << 50) / tr
                      ? nest->items * tr
                      : (tr == 0 ? 0 : ((int64_t)1 << 50));
  }
  Scan s = {nest, true};
  fzOpWalk(par, FZ_WALK_PRE_ORDER, scan_nest, &s);
  return s.ok;
}

static bool lower_nest(FzOp *func, FzOp *par, const FzLoopToKernelOptions *o,
                       unsigned *index) {
  if (!o->noMma && !(par = fzLkFoldMatmulBatch(par)))
    return false;
  FzContext *ctx = fzOpGetContext(par);
  FzLkNest *nest = fzCalloc(ctx, 1, sizeof *nest);
  if (!nest) /* recorded */
    return false;
  bool ok = analyze(func, par, nest);
  if (ok && nest->items == 0) { /* nothing to do */
    fzOpErase(par);
    fzFree(ctx, nest);
    return true;
  }
  for (size_t i = 0; ok && i < sizeof kMappings / sizeof kMappings[0]; ++i) {
    FzLkPlan plan;
    memset(&plan, 0, sizeof plan);
    plan.ctx = ctx;
    /* A plan that ran out of memory (its analyses among them) fails the
     * pass: another mapping, or a plan without what it could not
     * allocate, would give other kernels after an error. */
    bool hadFailure = fzContextHadAllocationFailure(ctx);
    bool took = kMappings[i]->plan(nest, o, &plan);
    if (!hadFailure && fzContextHadAllocationFailure(ctx))
      plan.failed = true;
    if (!took || plan.failed) {
      if (took && kMappings[i]->release)
        kMappings[i]->release(&plan);
      if (!plan.failed)
        continue;
      ok = false;
      break;
    }
    ok = fzLkOutline(nest, kMappings[i], &plan, o, (*index)++);
    if (kMappings[i]->release)
      kMappings[i]->release(&plan);
    fzFree(ctx, nest);
    return ok;
  }
  if (ok)
    ok = fzOpEmitError(par, "lower-loop-to-kernel: no mapping takes this "
                            "nest");
  fzFree(ctx, nest);
  return ok;
}

/* Whether op at the host level may go once nothing uses its results. */
static bool removable(FzOp *op) {
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    if (fzValueHasUses(fzOpGetResult(op, i)))
      return false;
  if (fzOpGetNumResults(op) == 0 || fzOpGetNumRegions(op) != 0)
    return false;
  switch (fzLoopGetOpcode(op)) {
  case FZ_LOOP_OP_LOAD:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VIEW:
  case FZ_LOOP_OP_DIM:
  case FZ_LOOP_OP_CONSTANT_BUFFER:
    return true;
  default:
    return fzOpIsEffectFree(op);
  }
}

static void erase_dead_setup(FzBlock *body) {
  bool changed = true;
  while (changed) {
    changed = false;
    FzOp *prev;
    for (FzOp *op = fzBlockGetLastOp(body); op; op = prev) {
      prev = fzOpGetPrevInBlock(op);
      if (removable(op)) {
        fzOpErase(op);
        changed = true;
      }
    }
  }
}

static bool has_nests(FzBlock *body) {
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (c == FZ_LOOP_OP_PARALLEL || c == FZ_LOOP_OP_FOR ||
        c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE)
      return true;
  }
  return false;
}

bool fzLowerLoopToKernel(FzOp *module, const FzLoopToKernelOptions *options) {
  FzLoopToKernelOptions defaults;
  if (!options) {
    fzLoopToKernelOptionsInit(&defaults);
    options = &defaults;
  }
  FzContext *ctx = fzOpGetContext(module);
  if (options->blockSize == 0 || options->blockSize > 1024 ||
      options->blockSize % 32)
    return fzEmitError(ctx, fzOpGetLoc(module),
                       "lower-loop-to-kernel: the block size must be a "
                       "multiple of 32 up to 1024, got %u",
                       options->blockSize);
  if (!fzPrecisionGetName(options->precision))
    return fzEmitError(ctx, fzOpGetLoc(module),
                       "lower-loop-to-kernel: precision %d is not one of "
                       "the policies of fz/precision.h (%s)",
                       (int)options->precision, fzPrecisionGetChoicesText());
  if (options->rowRegisters > 64)
    return fzEmitError(ctx, fzOpGetLoc(module),
                       "lower-loop-to-kernel: row-registers must be at most "
                       "64, got %u",
                       options->rowRegisters);
  FzMatmulTile probe;
  char why[256];
  if (!options->noMma && options->mmaTile && *options->mmaTile &&
      !fzMatmulTileParse(fzStringRefFromCString(options->mmaTile), &probe,
                         why, sizeof why))
    return fzEmitError(ctx, fzOpGetLoc(module),
                       "lower-loop-to-kernel: mma-tile=%s: %s",
                       options->mmaTile, why);
  int64_t split;
  if (!options->noMma &&
      !fzLkSplitKParse(options->splitK, &split, why, sizeof why))
    return fzEmitError(ctx, fzOpGetLoc(module), "lower-loop-to-kernel: %s",
                       why);
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  if (!fzKernelWrapSequentialNests(module))
    return false;
  bool ok = true;
  FzOp *next;
  for (FzOp *f = top ? fzBlockGetFirstOp(top) : NULL; f && ok; f = next) {
    next = fzOpGetNextInBlock(f);
    FzBlock *body = is_named(f, "func.func")
                        ? fzRegionGetFirstBlock(fzOpGetRegion(f, 0))
                        : NULL;
    if (!body || !has_nests(body))
      continue;
    unsigned index = 0;
    FzOp *after;
    for (FzOp *op = fzBlockGetFirstOp(body); op && ok; op = after) {
      /* A small-M nest, or a tensor-core one of few output tiles, cut
       * along k becomes two nests: the next one is the second
       * (fzSmallMSplit, fzLkMatmulSplitK). */
      bool par = fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL;
      ok = !par || (fzLkRepackConvWeights(op, options) &&
                    fzSmallMSplit(f, &op, options) &&
                    fzLkMatmulSplitK(f, &op, options));
      after = fzOpGetNextInBlock(op);
      if (ok && fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL)
        ok = lower_nest(f, op, options, &index);
    }
    if (ok)
      erase_dead_setup(body);
  }
  return ok && (options->noDedup || fzLkDedupKernels(module));
}

/*===--- The pass ---------------------------------------------------------===*/

#define PRECISION_NAME(id, name) name,
static const char *const kPrecisions[] = {FZ_PRECISIONS(PRECISION_NAME) NULL};
#undef PRECISION_NAME

static const FzPassOptionDef kOptions[] = {
    {"block-size", FZ_PASS_OPTION_INT, "256",
     "Threads per block of elementwise kernels and of grouped ones with "
     "up to 32 threads per row (a multiple of 32)",
     NULL, 32, 1024},
    {"vector", FZ_PASS_OPTION_INT, "0",
     "Iterations of the last dimension per thread for straight-line "
     "bodies (0: 16 bytes of the widest element; 1: off)",
     NULL, 0, 64},
    {"row-chunks", FZ_PASS_OPTION_INT, "0",
     "Rows mapping: 16-byte chunks per thread aimed at (0: 4)", NULL, 0,
     64},
    {"row-stage", FZ_PASS_OPTION_BOOL, "true",
     "Rows mapping: a row that several phases read and whose chunks are "
     "not unrolled is read from global memory once, kept in registers and "
     "shared memory (false: each phase reads it again)",
     NULL, 0, 0},
    {"row-registers", FZ_PASS_OPTION_INT, "32",
     "Rows mapping: 32-bit registers per thread holding the first chunks "
     "of a row kept on chip (0: shared memory only)",
     NULL, 0, 64},
    {"max-shared", FZ_PASS_OPTION_INT, "0",
     "Shared memory per block (bytes, static plus dynamic) the mappings "
     "may use (0: 227 KiB, sm_90's opt-in limit)",
     NULL, 0, 227 * 1024},
    {"small-m", FZ_PASS_OPTION_BOOL, "true",
     "Contractions of at most 16 rows (x @ W at batch 1) stream the "
     "weight on CUDA cores at the memory's rate, k cut across blocks "
     "where the columns cannot fill the GPU (false: they take the "
     "tensor-core or generic mappings)",
     NULL, 0, 0},
    {"small-m-shape", FZ_PASS_OPTION_STRING, NULL,
     "Small-M kernels' shape, numbers forced: cols=C,unroll=U,warps=S,"
     "blocks=B, any of them (default: $FZ_GPU_SMALL_M_SHAPE, else chosen "
     "by size)",
     NULL, 0, 0},
    {"mma", FZ_PASS_OPTION_BOOL, "true",
     "Matmul nests (bf16/f16) become tensor-core kernels (false: they "
     "take the generic mappings)",
     NULL, 0, 0},
    {"mma-tile", FZ_PASS_OPTION_STRING, NULL,
     "Tensor-core tile BMxBNxBK:Ww:Ss[:gG][:sync] (default: "
     "$FZ_GPU_MMA_TILE, else chosen by size)",
     NULL, 0, 0},
    {"split-k", FZ_PASS_OPTION_STRING, NULL,
     "Split-K of tensor-core matmul and conv2d kernels whose output tiles "
     "cannot fill the GPU: auto (chosen by a cost rule), off, or a number "
     "of k slices forced on every tensor-core nest (default: "
     "$FZ_GPU_SPLIT_K, else auto)",
     NULL, 0, 0},
    {"precision", FZ_PASS_OPTION_STRING, "default",
     "Precision policy of f32 matmul and conv2d nests: default and tf32 "
     "make them tensor-core kernels on tf32 (mma m16n8k8: operands rounded "
     "to a 10-bit mantissa, f32 accumulation), ieee keeps them exact f32 "
     "(bf16 and fp16 act at the graph level: convert-contractions; here "
     "they mean tf32)",
     kPrecisions, 0, 0},
    {"wgmma", FZ_PASS_OPTION_BOOL, "false",
     "bf16/f16 matmul nests become warp-group mma kernels (kernel.wgmma: "
     "sm_90a) instead of mma.sync ones",
     NULL, 0, 0},
    {"wgmma-min-tiles", FZ_PASS_OPTION_INT, "0",
     "Under wgmma: only nests of N and K >= 128 and at least this many 128x128 "
     "output tiles (times the batch) take it; the others keep mma.sync (0 "
     "or 1: every nest)",
     NULL, 0, 1 << 30},
    {"dedup", FZ_PASS_OPTION_BOOL, "true",
     "Structurally identical kernels (a model's repeated blocks) become one "
     "kernel.func that every launch of them calls",
     NULL, 0, 0},
    {"remarks", FZ_PASS_OPTION_BOOL, "false",
     "A remark per nest with a loop: the matmul kernel it became, or why "
     "the matmul mapping refused it",
     NULL, 0, 0},
};

/* String option `name` NUL-terminated into text[128] for the options
 * struct (the pass's value is a sized string that lives as long as the
 * pass). False after an error (too long). */
static bool string_option(FzPass *pass, FzOp *module, const char *name,
                          char *text) {
  FzStringRef v = fzPassGetStringOption(pass, name);
  if (v.length >= 128)
    return fzEmitError(fzOpGetContext(module), fzOpGetLoc(module),
                       "lower-loop-to-kernel: %s=%.*s: too long", name,
                       (int)v.length, v.data);
  snprintf(text, 128, "%.*s", (int)v.length, v.data ? v.data : "");
  return true;
}

static bool run(FzPass *pass, FzOp *module) {
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  o.blockSize = (unsigned)fzPassGetIntOption(pass, "block-size");
  o.vector = (unsigned)fzPassGetIntOption(pass, "vector");
  o.rowChunks = (unsigned)fzPassGetIntOption(pass, "row-chunks");
  o.noRowStage = !fzPassGetBoolOption(pass, "row-stage");
  o.noDedup = !fzPassGetBoolOption(pass, "dedup");
  o.rowRegisters = (unsigned)fzPassGetIntOption(pass, "row-registers");
  o.maxSharedBytes = (unsigned)fzPassGetIntOption(pass, "max-shared");
  o.noMma = !fzPassGetBoolOption(pass, "mma");
  o.wgmma = fzPassGetBoolOption(pass, "wgmma");
  o.wgmmaMinTiles = fzPassGetIntOption(pass, "wgmma-min-tiles");
  o.noSmallM = !fzPassGetBoolOption(pass, "small-m");
  /* The option's choices are the policies' names: it always parses. */
  if (!fzPrecisionParse(fzPassGetStringOption(pass, "precision"),
                        &o.precision))
    o.precision = FZ_PRECISION_DEFAULT;
  o.remarks = fzPassGetBoolOption(pass, "remarks");
  char tile[128], shape[128], split[128];
  if (!string_option(pass, module, "mma-tile", tile) ||
      !string_option(pass, module, "small-m-shape", shape) ||
      !string_option(pass, module, "split-k", split))
    return false;
  o.mmaTile = tile;
  o.smallMShape = shape;
  o.splitK = split;
  return fzLowerLoopToKernel(module, &o);
}

const FzPassDef fzLowerLoopToKernelPassDef = {
    .argument = "lower-loop-to-kernel",
    .summary = "Top-level loop nests of loop-level functions -> kernel.func "
               "+ kernel.launch (GPU mappings: small-M contractions, tensor-core "
               "matmul, rows, columns, elementwise)",
    .anchor = "builtin.module",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .run = run,
};
