/* lowering/loop_to_kernel/small_m.c - the small-M mapping: which nests
 * it takes, the shape of their kernels (fzSmallMChoose, documented in
 * docs/codegen.md "Small-M contractions on the GPU"), and what both
 * kernel builders share: ids, the loads of x and W, the epilogue.
 *
 * The mapping is first in lower-loop-to-kernel's list: a nest of at
 * most FZ_SMALL_M_MAX_ROWS rows takes it before the tensor-core tiles
 * (of which it would use one row in 64); a larger one goes on to them.
 * Every thread accumulates in f32 with fma (exact f32 products of bf16,
 * f16 or f32 operands) whatever the precision policy: the kernel is
 * bound by the weight's bytes, not by arithmetic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/type_text.h"
#include "lowering/loop_to_kernel/small_m.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v && p < ((int64_t)1 << 40))
    p <<= 1;
  return p;
}

static int64_t elt_bytes(FzType *t) {
  return (int64_t)fzTypeGetStorageSize(t);
}

/* Whether loads of `lanes` consecutive elements along x's last index
 * are aligned to their size wherever that index is a multiple of
 * `lanes`: stride 1 there, every other stride a multiple of lanes, the
 * buffer 16-byte aligned, and kernel.vector_load's sizes (2+ lanes, 4,
 * 8 or 16 bytes). */
static bool vector_ok(const FzSmallMOperand *x, int64_t lanes) {
  int64_t bytes = lanes * elt_bytes(x->elt);
  if (lanes < 2 || (bytes != 4 && bytes != 8 && bytes != 16) || !x->aligned ||
      x->strides[x->rank - 1] != 1)
    return false;
  for (size_t i = 0; i + 1 < x->rank; ++i)
    if (x->strides[i] % lanes != 0)
      return false;
  return true;
}

/* x's loads along k: `lanes` at a time where k is its last index. */
static unsigned x_vector(const FzSmallMNest *m, unsigned lanes) {
  if (m->x.idx[m->x.rank - 1].dim != FZ_SMALL_M_K)
    return 1;
  unsigned v = lanes;
  while (v > 1 && (int64_t)v * elt_bytes(m->x.elt) > 16)
    v /= 2;
  return vector_ok(&m->x, v) ? v : 1;
}

/* The shape's numbers forced by `small-m-shape` / FZ_GPU_SMALL_M_SHAPE
 * (0: chosen; cols concerns a W contiguous along k only). */
typedef struct Force {
  int64_t cols, unroll, warps, blocks;
  /* The switches, 0: chosen, 1: off, 2: on: tensor cores, W's loads
   * `stream` (not kept in L1), the register cap of 16 warps per SM. */
  int64_t mma, stream, cap;
} Force;

enum { NUM_NUMBERS = 4, NUM_KEYS = 7 };

/* Parses "cols=C,unroll=U,warps=S,blocks=B,mma=0|1,stream=0|1,cap=0|1"
 * (any of them, any order). */
static bool parse_force(const char *text, Force *f, char *why,
                        size_t whyLen) {
  memset(f, 0, sizeof *f);
  for (const char *p = text; p && *p;) {
    static const char *const keys[NUM_KEYS] = {
        "cols", "unroll", "warps", "blocks", "mma", "stream", "cap"};
    int64_t *vals[NUM_KEYS] = {&f->cols, &f->unroll, &f->warps, &f->blocks,
                               &f->mma,  &f->stream, &f->cap};
    size_t k = 0;
    while (k < NUM_KEYS && (strncmp(p, keys[k], strlen(keys[k])) ||
                            p[strlen(keys[k])] != '='))
      ++k;
    if (k == NUM_KEYS)
      return fzReasonf(why, whyLen, "expected cols=, unroll=, warps=, "
                                    "blocks=, mma=, stream= or cap= at '%s'",
                       p);
    p += strlen(keys[k]) + 1;
    char *end;
    long long v = strtoll(p, &end, 10);
    bool sw = k >= NUM_NUMBERS;
    long long lo = sw ? 0 : 1, hi = sw ? 1 : 65535;
    if (end == p || v < lo || v > hi || (*end && *end != ','))
      return fzReasonf(why, whyLen, "%s: expected a number from %lld to %lld",
                       keys[k], lo, hi);
    *vals[k] = sw ? v + 1 : v;
    p = *end ? end + 1 : end;
  }
  return true;
}

static bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/* The k split across blocks: slices of a multiple of `gran`, at most
 * sb of them. */
static void split_blocks(const FzSmallMNest *m, FzSmallMShape *s, int64_t sb,
                         int64_t gran) {
  s->splitBlocks = 1;
  s->sliceK = m->sliceK;
  if (sb > 1) {
    s->sliceK = ceil_div(ceil_div(m->K, sb), gran) * gran;
    s->splitBlocks = ceil_div(m->K, s->sliceK);
  }
}

/* The time of splitting K into sb slices of `gran` units shared by S
 * warps, in units of one warp's trip: the slowest warp's trips (its
 * slice the longest, its share rounded up). */
static int64_t split_cost(const FzSmallMNest *m, int64_t sb, int64_t gran,
                          int64_t S) {
  int64_t units = ceil_div(ceil_div(m->K, sb), gran);
  return ceil_div(units, S) * S * ceil_div(m->K, units * gran);
}

/* Of the splits from two thirds of `want` to want, the one whose warps
 * waste the fewest trips (slices and warps' shares that divide evenly:
 * K = 4096 in 8 slices of 64 units for 16 warps rather than 9 of 57),
 * the larger on a tie; forced: that one. */
static int64_t balanced_blocks(const FzSmallMNest *m, const FzSmallMShape *s,
                               int64_t want, int64_t forced, int64_t gran) {
  if (forced || want <= 2)
    return forced ? forced : want;
  int64_t best = want, bestCost = split_cost(m, want, gran, s->splitWarps);
  for (int64_t sb = want - 1; sb >= 2 && 3 * sb >= 2 * want; --sb) {
    int64_t c = split_cost(m, sb, gran, s->splitWarps);
    if (c < bestCost)
      best = sb, bestCost = c;
  }
  return best;
}

/* The warps that share one column group's k (forced, or doubled while
 * the groups' warps are under the target and each lane keeps two trips
 * of chunks: a chunk is shared by `lanes` lanes of the warp, 32 or 1), at
 * most maxS; the block has max(8, S) warps. */
static bool choose_warps(FzSmallMShape *s, const Force *f, int64_t chunks,
                         int64_t lanes, int64_t maxS, int64_t hardMax,
                         char *why, size_t whyLen) {
  int64_t T = FZ_SMALL_M_SMS * FZ_SMALL_M_WARPS_PER_SM, S = 1;
  while (!f->warps && S < maxS && s->groups * S < T &&
         chunks / (2 * lanes * S) >= s->unroll)
    S *= 2;
  if (f->warps)
    S = f->warps;
  if (!is_pow2(S) || S > hardMax)
    return fzReasonf(why, whyLen, "warps=%lld: a power of two up to %lld "
                                  "per column group", (long long)S,
                     (long long)hardMax);
  s->splitWarps = (unsigned)S;
  s->warps = S > 8 ? (unsigned)S : 8;
  return true;
}

/* The split across blocks wanted for `warps` warps in `blocks` blocks
 * (each warp of `chunks` chunks of its slice, `perTrip` per loop trip)
 * and the partials' bytes: none from a quarter of the target of warps on
 * while the blocks cover three quarters of the SMs (the second kernel
 * costs a launch); else to the target of warps and to a block per SM
 * (an SM without a block streams nothing: W of 11008 bf16 columns along
 * n was 43 blocks on 132 SMs, 0.32 of the copy rate), at least a trip
 * of chunks each, partials under an eighth of W's bytes. */
static int64_t want_blocks(const FzSmallMNest *m, int64_t warps,
                           int64_t blocks, int64_t chunks, int64_t perTrip) {
  int64_t T = FZ_SMALL_M_SMS * FZ_SMALL_M_WARPS_PER_SM;
  bool fewBlocks = blocks * 4 < FZ_SMALL_M_SMS * 3;
  if (warps * 4 > T && !fewBlocks)
    return 1;
  int64_t sb = ceil_div(T, warps);
  if (fewBlocks && sb < ceil_div(FZ_SMALL_M_SMS, blocks))
    sb = ceil_div(FZ_SMALL_M_SMS, blocks);
  int64_t byChunks = chunks / perTrip;
  int64_t byBytes = m->K * elt_bytes(m->w.elt) / (64 * m->M);
  sb = sb < byChunks ? sb : byChunks;
  return sb < byBytes ? sb : byBytes;
}

static const char kNoMma[] =
    "mma=1: tensor cores need a bf16 or f16 W, x of its type, K a "
    "multiple of 32, 16-byte loads of both (W along n: N a multiple of 8)";

/* The tensor-core form (small_m_mma.c): a 16-bit W and x of the same
 * type, 16-byte loads of both (W along its contiguous dim, x along k), K
 * a multiple of 32; W along n: N a multiple of 8. */
static bool mma_ok(const FzSmallMNest *m) {
  FzTypeKind k = fzTypeGetKind(m->w.elt);
  return (k == FZ_TYPE_BF16 || k == FZ_TYPE_F16) && m->x.elt == m->w.elt &&
         m->K % 32 == 0 && m->sliceK % 32 == 0 &&
         (m->kContig || m->N % 8 == 0) && vector_ok(&m->w, 8) &&
         m->x.idx[m->x.rank - 1].dim == FZ_SMALL_M_K && vector_ok(&m->x, 8);
}

/* Tensor cores: a warp per `cols` (8 T) columns (W along n: 64),
 * chunks of 32 k. */
static bool choose_mma(const FzSmallMNest *m, FzSmallMShape *s, bool split,
                       const Force *f, char *why, size_t whyLen) {
  s->mma = true;
  s->xvec = 8;
  /* Along n, 64 columns per warp (16-byte loads) where the groups fill
   * the SMs, else 32 (8-byte loads: twice the groups). */
  int64_t cols = f->cols           ? f->cols
                 : !m->kContig     ? (ceil_div(m->N, 64) >= FZ_SMALL_M_SMS
                                          ? 64
                                          : 32)
                 : ceil_div(m->N, 8) * 8 < 32 ? ceil_div(m->N, 8) * 8
                                              : 32;
  /* 256 bytes of W in flight per lane (16 16-byte loads): 128 left an
   * SM of 8 warps with 32 KiB in flight, 0.32-0.38 of the copy rate on
   * an H200 (docs/benchmarks.md, "GPU: small-M contractions"). */
  int64_t unroll = f->unroll ? f->unroll : cols == 64 ? 2 : 4;
  /* W's bytes in flight per lane, in 16-byte loads. */
  int64_t loads = unroll * cols / 8;
  if (cols % 8 != 0 || cols > 64 || unroll > 8 || loads > 16 ||
      (!m->kContig && cols != 32 && cols != 64))
    return fzReasonf(why, whyLen, "cols=%lld, unroll=%lld: tensor cores "
                                  "take multiples of 8 columns up to 64 "
                                  "(along n: 32 or 64), at most 8 chunks "
                                  "per trip and 256 bytes of W per lane "
                                  "(unroll x cols / 8 16-byte loads)",
                     (long long)cols, (long long)unroll);
  s->vec = m->kContig ? 8 : (unsigned)(cols / 8);
  s->cols = (unsigned)cols;
  s->unroll = (unsigned)unroll;
  s->groups = ceil_div(m->N, cols);
  int64_t chunks = m->sliceK / 32;
  /* Up to 16 warps along k (a block of 16) where the column groups
   * alone cover the SMs: 128 groups (N = 4096) by 8 warps were one block
   * of 8 warps per SM; as many as the sums' shared array ([warps][cols /
   * 2][32] f32) allows in the 48 KiB of static shared memory (64
   * columns: 8). Fewer groups keep 8 and split k across more blocks. */
  int64_t hardMax = 48 * 1024 / ((cols / 2) * 32 * 4) >= 16 ? 16 : 8;
  int64_t maxS =
      ceil_div(m->N, cols) * 4 >= FZ_SMALL_M_SMS * 3 ? hardMax : 8;
  if (!choose_warps(s, f, chunks, 1, maxS, hardMax, why, whyLen))
    return false;
  int64_t S = s->splitWarps;
  /* Warps with 8 16-byte loads in flight per lane, as the target
   * counts them. */
  int64_t warps = s->groups * S * loads / 8;
  s->blocks = ceil_div(s->groups, s->warps / S);
  int64_t sb = split ? want_blocks(m, warps > 1 ? warps : 1, s->blocks,
                                   chunks, S * unroll)
                     : 1;
  split_blocks(m, s, balanced_blocks(m, s, sb, split ? f->blocks : 0, 32),
               32);
  s->sharedBytes = S > 1 ? (int64_t)s->warps * (cols / 2) * 32 * 4 : 0;
  return true;
}

/* W contiguous along k: a warp per `cols` columns, its lanes along k. */
static bool choose_k(const FzSmallMNest *m, FzSmallMShape *s, bool split,
                     const Force *f, char *why, size_t whyLen) {
  unsigned v = (unsigned)(16 / elt_bytes(m->w.elt));
  if (m->K % v != 0 || m->sliceK % v != 0 || !vector_ok(&m->w, v))
    v = 1;
  /* Tensor cores from 5 rows on, where the fma per row and weight would
   * take most of the SM's issue rate. */
  bool canMma = v == 8 && mma_ok(m);
  if (f->mma == 2 && !canMma)
    return fzReasonf(why, whyLen, "%s", kNoMma);
  if (f->mma ? f->mma == 2 : canMma && m->M > 4)
    return choose_mma(m, s, split, f, why, whyLen);
  s->vec = v;
  s->xvec = v > 1 ? x_vector(m, v) : 1;
  int64_t cols = f->cols ? f->cols : m->M >= 8 ? 4 : m->M >= 3 ? 2 : 1;
  if (cols > m->N)
    cols = m->N;
  int64_t unroll = f->unroll ? f->unroll : 8 / cols;
  if (cols > 4 || m->M * cols > FZ_SMALL_M_MAX_ACC || unroll * cols > 8)
    return fzReasonf(why, whyLen, "cols=%lld, unroll=%lld: at most 4 "
                                  "columns, %d accumulators (rows x cols) "
                                  "and 8 loads (unroll x cols) per lane",
                     (long long)cols, (long long)unroll, FZ_SMALL_M_MAX_ACC);
  s->cols = (unsigned)cols;
  s->unroll = (unsigned)unroll;
  s->groups = ceil_div(m->N, s->cols);
  int64_t chunks = ceil_div(m->sliceK, v);
  if (!choose_warps(s, f, chunks, 32, 8, 8, why, whyLen))
    return false;
  int64_t S = s->splitWarps;
  s->blocks = ceil_div(s->groups, s->warps / S);
  int64_t sb = split ? want_blocks(m, s->groups * S, s->blocks, chunks,
                                   32 * S * s->unroll)
                     : 1;
  int64_t gran = 32 * (int64_t)v;
  split_blocks(m, s, balanced_blocks(m, s, sb, split ? f->blocks : 0, gran),
               gran);
  s->sharedBytes = S > 1 ? (int64_t)s->warps * pow2_ceil(m->M * s->cols) * 4
                         : 0;
  return true;
}

/* W contiguous along n: a thread per `vec` columns, warps along k. */
static bool choose_n(const FzSmallMNest *m, FzSmallMShape *s, bool split,
                     const Force *f, char *why, size_t whyLen) {
  int64_t T = FZ_SMALL_M_SMS * FZ_SMALL_M_WARPS_PER_SM;
  unsigned v = (unsigned)(16 / elt_bytes(m->w.elt));
  while (v > 1 && m->M * v > FZ_SMALL_M_MAX_ACC)
    v /= 2;
  if (m->N % v != 0 || !vector_ok(&m->w, v))
    v = 1;
  s->vec = v;
  int64_t u = f->unroll ? f->unroll : 8;
  while (!f->unroll && u > 1 && (m->K % u != 0 || m->sliceK % u != 0))
    u /= 2;
  if (!is_pow2(u) || u > 8 || m->K % u != 0 || m->sliceK % u != 0)
    return fzReasonf(why, whyLen, "unroll=%lld: 1, 2, 4 or 8, dividing K "
                                  "(%lld)", (long long)u, (long long)m->K);
  bool canMma = mma_ok(m);
  if (f->mma == 2 && !canMma)
    return fzReasonf(why, whyLen, "%s", kNoMma);
  if (f->mma ? f->mma == 2 : canMma && m->M > 4)
    return choose_mma(m, s, split, f, why, whyLen);
  s->unroll = (unsigned)u;
  s->xvec = x_vector(m, s->unroll);
  s->cols = 32 * v;
  s->groups = ceil_div(m->N, s->cols);
  int64_t P = m->M * v, chunks = m->sliceK / u;
  int64_t maxS = 256 / P > 16 ? 16 : 256 / P;
  int64_t S = 1;
  while (!f->warps && S < maxS && s->groups * S < T && chunks / (2 * S) >= 2)
    S *= 2;
  if (f->warps)
    S = f->warps;
  if (!is_pow2(S) || S > 32 || S * P * 32 * 4 > 48 * 1024)
    return fzReasonf(why, whyLen, "warps=%lld: a power of two, at most 32, "
                                  "and %lld x %lld partial sums of 128 "
                                  "bytes within 48 KiB",
                     (long long)S, (long long)S, (long long)P);
  s->splitWarps = (unsigned)S;
  s->warps = (unsigned)S;
  s->blocks = s->groups;
  int64_t sb = split ? want_blocks(m, s->groups * S, s->blocks, chunks, 2 * S)
                     : 1;
  split_blocks(m, s, balanced_blocks(m, s, sb, split ? f->blocks : 0, u), u);
  s->sharedBytes = S > 1 ? S * P * 32 * 4 : 0;
  return true;
}

bool fzSmallMChoose(const FzSmallMNest *m, const FzLoopToKernelOptions *o,
                    FzSmallMShape *s, bool *bad, char *why, size_t whyLen) {
  memset(s, 0, sizeof *s);
  *bad = false;
  if (o->noSmallM)
    return fzReasonf(why, whyLen, "the small-M mapping is off");
  if (m->M > FZ_SMALL_M_MAX_ROWS)
    return fzReasonf(why, whyLen, "%lld rows (the small-M mapping takes up "
                                  "to %d)",
                     (long long)m->M, FZ_SMALL_M_MAX_ROWS);
  const char *text = o->smallMShape && *o->smallMShape
                         ? o->smallMShape
                         : getenv("FZ_GPU_SMALL_M_SHAPE");
  Force f;
  char inner[200];
  bool split = m->dimSplit < 0;
  bool ok = parse_force(text, &f, inner, sizeof inner) &&
            (m->kContig ? choose_k(m, s, split, &f, inner, sizeof inner)
                        : choose_n(m, s, split, &f, inner, sizeof inner));
  if (!ok) {
    *bad = true;
    return fzReasonf(why, whyLen, "small-m-shape=%s: %s", text, inner);
  }
  s->stream = f.stream != 1;
  /* CUDA-core kernels of 48 accumulators and more (f32 with 16 rows):
   * at most 128 registers a thread, so that 16 warps fit on an SM. ptxas
   * gave them 168-212 (8-12 warps, 32-48 KiB of W in flight per SM);
   * under the cap it spills 32-48 bytes (ptxas -v). Not for the others:
   * asked for the cap, ptxas spends up to it (M = 1 along k: 86
   * registers instead of 35, 23 warps an SM instead of 64). */
  int64_t acc = m->M * (m->kContig ? s->cols : s->vec);
  bool cap = f.cap ? f.cap == 2 : !s->mma && acc >= 48;
  s->minBlocksPerSm = cap && s->warps < 16 ? 16 / s->warps : 0;
  if (m->dimSplit >= 0)
    s->splitBlocks = m->extent[m->dimSplit];
  if (s->blocks > 0x7fffffff || s->splitBlocks > 65535)
    return fzReasonf(why, whyLen, "a grid of %lld x %lld blocks",
                     (long long)s->blocks, (long long)s->splitBlocks);
  return true;
}

/* "s" unless n is 1. */
static const char *plural(int64_t n) { return n == 1 ? "" : "s"; }

void fzSmallMDescribe(const FzSmallMNest *m, const FzSmallMShape *s,
                      char *buf, size_t n) {
  char wt[16], xt[16], split[240] = "";
  fzTypeText(m->w.elt, wt, sizeof wt);
  fzTypeText(m->x.elt, xt, sizeof xt);
  size_t at = 0;
  if (m->dimSplit >= 0)
    at = (size_t)snprintf(split, sizeof split,
                          ", k split over %lld blocks of %lld (partial sums; "
                          "a second kernel adds them)",
                          (long long)s->splitBlocks, (long long)s->sliceK);
  if (s->minBlocksPerSm > 0 && at < sizeof split)
    at += (size_t)snprintf(split + at, sizeof split - at,
                           ", registers for %lld blocks per SM",
                           (long long)s->minBlocksPerSm);
  if (!s->stream && at < sizeof split)
    snprintf(split + at, sizeof split - at, ", W kept in L1");
  if (s->mma)
    snprintf(buf, n,
             "small-m %lldx%lldx%lld, W %s contiguous along %s, x %s: "
             "tensor cores (mma m16n8k16, x's rows as A), a warp per %u "
             "columns, %lld-byte loads of W (%u chunks of 32 k per trip), "
             "%u warp%s per column group, %u warps per block, %lld "
             "block%s%s",
             (long long)m->M, (long long)m->N, (long long)m->K, wt,
             m->kContig ? "k" : "n", xt, s->cols,
             (long long)s->vec * elt_bytes(m->w.elt), s->unroll, s->splitWarps,
             s->splitWarps == 1 ? "" : "s along k", s->warps,
             (long long)s->blocks, plural(s->blocks), split);
  else if (m->kContig)
    snprintf(buf, n,
             "small-m %lldx%lldx%lld, W %s contiguous along k, x %s: a warp "
             "per %u column%s, lanes along k (%u-element loads, %u per "
             "column in flight), %u warp%s per column group, %u warps per "
             "block, %lld block%s%s",
             (long long)m->M, (long long)m->N, (long long)m->K, wt, xt,
             s->cols, plural(s->cols), s->vec, s->unroll, s->splitWarps,
             s->splitWarps == 1 ? "" : "s along k", s->warps,
             (long long)s->blocks, plural(s->blocks), split);
  else
    snprintf(buf, n,
             "small-m %lldx%lldx%lld, W %s contiguous along n, x %s: %u "
             "column%s per thread, %u k row%s per step, %u warp%s along k "
             "per block, %lld block%s%s",
             (long long)m->M, (long long)m->N, (long long)m->K, wt, xt,
             s->vec, plural(s->vec), s->unroll, plural(s->unroll),
             s->splitWarps, plural(s->splitWarps), (long long)s->blocks,
             plural(s->blocks), split);
}

/*===--- What both builders share -----------------------------------------===*/

/* kernel.block_id y. */
static FzValue *block_id_y(FzLkBuild *kb) {
  FzType *idx = fzIndexTypeGet(kb->ctx);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.block_id"), kb->loc);
  fzOpStateAddProp(&st, FZ_STR("dimension"),
                   fzStringAttrGet(kb->ctx, FZ_STR("y")));
  fzOpStateAddResults(&st, 1, &idx);
  FzOp *op = kb->failed ? NULL : fzBuilderCreate(&kb->b, &st);
  if (!op) {
    if (kb->failed)
      fzOpStateDispose(&st);
    kb->failed = true;
    return NULL;
  }
  return fzOpGetResult(op, 0);
}

bool fzSmallMGenInit(FzSmallMGen *g, FzLkBuild *kb, const FzSmallMNest *m,
                     const FzSmallMShape *s) {
  memset(g, 0, sizeof *g);
  g->kb = kb, g->m = m, g->s = s;
  g->f32 = fzF32TypeGet(kb->ctx);
  g->idx = fzIndexTypeGet(kb->ctx);
  FzValue *c32 = fzLkIndex(kb, 32), *cS = fzLkIndex(kb, s->splitWarps);
  g->tid = fzLkId(kb, "kernel.thread_id");
  g->lane = fzLkRem(kb, g->tid, c32);
  g->warp = fzLkDiv(kb, g->tid, c32);
  g->sIdx = fzLkRem(kb, g->warp, cS);
  g->gIdx = fzLkDiv(kb, g->warp, cS);
  g->group = fzLkAdd(kb,
                     fzLkMul(kb, fzLkId(kb, "kernel.block_id"),
                             fzLkIndex(kb, s->warps / s->splitWarps)),
                     g->gIdx);
  g->ragged = s->groups * s->cols != m->N ||
              s->blocks * (s->warps / s->splitWarps) != s->groups;
  if (m->dimSplit >= 0) {
    g->sb = block_id_y(kb);
    g->kLo = fzLkMul(kb, g->sb, fzLkIndex(kb, m->sliceK));
    g->kHi = fzLkBin(kb, "loop.minsi",
                     fzLkAdd(kb, g->kLo, fzLkIndex(kb, m->sliceK)),
                     fzLkIndex(kb, m->K));
  } else {
    g->sb = fzLkIndex(kb, 0);
    g->kLo = fzLkIndex(kb, 0);
    g->kHi = fzLkIndex(kb, m->K);
  }
  return !kb->failed;
}

/* The index of parallel dim d for output row `row` (index) and column
 * col: row-major over the row dims. */
static FzValue *dim_value(FzSmallMGen *g, int d, FzValue *row,
                          FzValue *col) {
  const FzSmallMNest *m = g->m;
  if (d == m->dimN)
    return col;
  if (d == m->dimSplit)
    return g->sb;
  int64_t stride = 1;
  for (int e = (int)m->numDims - 1; e > d; --e)
    if (e != m->dimN && e != m->dimSplit)
      stride *= m->extent[e];
  FzLkBuild *kb = g->kb;
  return fzLkRem(kb, fzLkDiv(kb, row, fzLkIndex(kb, stride)),
                 fzLkIndex(kb, m->extent[d]));
}

FzValue *fzSmallMExtract(FzLkBuild *kb, FzValue *vec, unsigned lane) {
  FzType *vt = vec ? fzValueGetType(vec) : NULL;
  if (!vt)
    return kb->failed = true, NULL;
  FzType *et = fzShapedTypeGetElementType(vt);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.extract"), kb->loc);
  fzOpStateAddOperands(&st, 1, &vec);
  fzOpStateAddProp(&st, FZ_STR("position"),
                   fzIntegerAttrGet(kb->ctx, fzIntegerTypeGet(kb->ctx, 64),
                                    lane));
  fzOpStateAddResults(&st, 1, &et);
  FzOp *op = kb->failed ? NULL : fzBuilderCreate(&kb->b, &st);
  if (!op) {
    if (kb->failed)
      fzOpStateDispose(&st);
    return kb->failed = true, NULL;
  }
  return fzOpGetResult(op, 0);
}

/* x's (or W's) `lanes` elements from indices idx (the last one
 * advancing): one kernel.vector_load where lanes > 1, else a load. W's
 * vector loads are `stream` (PTX .L1::no_allocate): W is read once, and
 * in L1 it would evict x, which every warp of the SM reads again (W
 * contiguous along k with f32 M = 4..16: x from L2 at M / cols times W's
 * bytes, the rows of the H200 table that ran at 0.29-0.55 of the copy
 * rate fit L2 at 6-7 TB/s). */
static FzValue *load_raw(FzSmallMGen *g, const FzSmallMOperand *x,
                         FzValue **idx, unsigned lanes) {
  FzLkBuild *kb = g->kb;
  size_t r = x->rank;
  FzValue *buf = fzLkMapGet(&kb->base, x->buffer);
  if (!buf)
    return kb->failed = true, NULL;
  if (lanes == 1)
    return fzLkLoad(kb, buf, r, idx);
  int64_t n = lanes;
  FzType *vt = fzVectorTypeGet(kb->ctx, 1, &n, x->elt, kb->loc);
  FzValue *ops[FZ_SMALL_M_MAX_RANK + 1] = {buf};
  for (size_t i = 0; i < r; ++i)
    ops[1 + i] = idx[i];
  FzValue *v = vt ? fzLkOp(kb, "kernel.vector_load", vt, r + 1, ops) : NULL;
  if (v && x == &g->m->w && g->s->stream &&
      !fzOpSetProp(fzValueGetDefiningOp(v), FZ_STR("stream"),
                   fzUnitAttrGet(kb->ctx)))
    v = NULL;
  if (!v)
    kb->failed = true;
  return v;
}

/* The same, each element widened to f32 into out. */
static bool load_elems(FzSmallMGen *g, const FzSmallMOperand *x,
                       FzValue **idx, unsigned lanes, FzValue **out) {
  FzLkBuild *kb = g->kb;
  FzValue *v = load_raw(g, x, idx, lanes);
  for (unsigned u = 0; u < lanes; ++u)
    out[u] = fzLkCast(kb, "loop.extf",
                      lanes > 1 ? fzSmallMExtract(kb, v, u) : v, g->f32);
  return !kb->failed;
}

/* x's indices for output row `row` (index) and k. */
static void x_indices(FzSmallMGen *g, FzValue *row, FzValue *k,
                      FzValue **idx) {
  const FzSmallMOperand *x = &g->m->x;
  for (size_t i = 0; i < x->rank; ++i) {
    int d = x->idx[i].dim;
    idx[i] = d == FZ_SMALL_M_K      ? k
             : d == FZ_SMALL_M_CONST ? fzLkIndex(g->kb, x->idx[i].value)
                                     : dim_value(g, d, row, NULL);
  }
}

/* W's indices for (a, b): its constants, then a and b. */
static void w_indices(FzSmallMGen *g, FzValue *a, FzValue *b,
                      FzValue **idx) {
  const FzSmallMOperand *w = &g->m->w;
  for (size_t i = 0; i + 2 < w->rank; ++i)
    idx[i] = fzLkIndex(g->kb, w->idx[i].value);
  idx[w->rank - 2] = a;
  idx[w->rank - 1] = b;
}

/* n elements of W (w: at (a, b ..)) or x (at row a, k b ..), `vec` per
 * load where n allows, widened to f32 into out. */
static bool load_run(FzSmallMGen *g, bool w, FzValue *a, FzValue *b,
                     unsigned n, unsigned vec, FzValue **out) {
  FzLkBuild *kb = g->kb;
  unsigned lanes = vec > 1 && n % vec == 0 ? vec : 1;
  for (unsigned u = 0; u < n; u += lanes) {
    FzValue *idx[FZ_SMALL_M_MAX_RANK];
    FzValue *bu = fzLkAdd(kb, b, fzLkIndex(kb, u));
    if (w)
      w_indices(g, a, bu, idx);
    else
      x_indices(g, a, bu, idx);
    if (!load_elems(g, w ? &g->m->w : &g->m->x, idx, lanes, out + u))
      return false;
  }
  return true;
}

bool fzSmallMLoadX(FzSmallMGen *g, int64_t row, FzValue *k, unsigned n,
                   FzValue **out) {
  return load_run(g, false, fzLkIndex(g->kb, row), k, n, g->s->xvec, out);
}

bool fzSmallMLoadW(FzSmallMGen *g, FzValue *a, FzValue *b, unsigned n,
                   FzValue **out) {
  return load_run(g, true, a, b, n, g->s->vec, out);
}

FzValue *fzSmallMLoadXVector(FzSmallMGen *g, FzValue *row, FzValue *k,
                             unsigned lanes) {
  FzValue *idx[FZ_SMALL_M_MAX_RANK];
  x_indices(g, row, k, idx);
  return load_raw(g, &g->m->x, idx, lanes);
}

FzValue *fzSmallMLoadWVector(FzSmallMGen *g, FzValue *a, FzValue *b,
                             unsigned lanes) {
  FzValue *idx[FZ_SMALL_M_MAX_RANK];
  w_indices(g, a, b, idx);
  return load_raw(g, &g->m->w, idx, lanes);
}

FzValue *fzSmallMAnd(FzLkBuild *kb, FzValue *a, FzValue *b) {
  return !a ? b : !b ? a : fzLkBin(kb, "loop.andi", a, b);
}

/* One loop: for c = lb to ub step `step`, n chunks per trip. */
static bool chunk_loop(FzSmallMGen *g, FzValue *lb, FzValue *ub,
                       FzValue *step, unsigned n, size_t na, FzValue **acc,
                       FzSmallMTrip trip, void *ud) {
  FzLkBuild *kb = g->kb;
  FzValue *c;
  FzOp *loop = fzLkForBegin(kb, lb, ub, step, na, acc, &c, acc);
  if (!loop || !trip(ud, c, n) || !fzLkForEnd(kb, loop, na, acc))
    return false;
  for (size_t i = 0; i < na; ++i)
    acc[i] = fzOpGetResult(loop, i);
  return true;
}

bool fzSmallMChunkLoops(FzSmallMGen *g, FzValue *start, FzValue *end,
                        int64_t stride, unsigned unroll, size_t numAcc,
                        FzValue **acc, FzSmallMTrip trip, void *ud) {
  FzLkBuild *kb = g->kb;
  if (unroll > 1) {
    int64_t big = stride * unroll;
    FzValue *ub = fzLkAdd(
        kb, end, fzLkIndex(kb, -(int64_t)(unroll - 1) * stride));
    if (!chunk_loop(g, start, ub, fzLkIndex(kb, big), unroll, numAcc, acc,
                    trip, ud))
      return false;
    /* The rest starts after the trips the main loop made. */
    FzValue *span = fzLkBin(kb, "loop.maxsi",
                            fzLkBin(kb, "loop.subi", ub, start),
                            fzLkIndex(kb, 0));
    FzValue *trips = fzLkDiv(kb, fzLkAdd(kb, span, fzLkIndex(kb, big - 1)),
                             fzLkIndex(kb, big));
    start = fzLkAdd(kb, start, fzLkMul(kb, trips, fzLkIndex(kb, big)));
  }
  return chunk_loop(g, start, end, fzLkIndex(kb, stride), 1, numAcc, acc,
                    trip, ud);
}

FzValue *fzSmallMShareVals(FzSmallMGen *g, FzValue *const *vals,
                           unsigned nv) {
  FzLkBuild *kb = g->kb;
  FzValue *red = fzLkSharedAlloc(kb, g->f32, (int64_t)g->s->warps * nv * 32);
  FzValue *mine = fzLkMul(kb, g->warp, fzLkIndex(kb, (int64_t)nv * 32));
  for (unsigned v = 0; v < nv; ++v) {
    FzValue *at = fzLkAdd(kb, fzLkAdd(kb, mine, fzLkIndex(kb, v * 32)),
                          g->lane);
    if (!fzLkStore(kb, vals[v], red, 1, &at))
      return NULL;
  }
  return fzLkBarrier(kb) ? red : NULL;
}

FzValue *fzSmallMSumVal(FzSmallMGen *g, FzValue *red, unsigned nv,
                        FzValue *v) {
  FzLkBuild *kb = g->kb;
  unsigned S = g->s->splitWarps;
  FzValue *first = fzLkAdd(kb, fzLkMul(kb, g->gIdx, fzLkIndex(kb, S * nv)), v);
  FzValue *at0 =
      fzLkAdd(kb, fzLkMul(kb, first, fzLkIndex(kb, 32)), g->lane);
  FzValue *sum = NULL;
  for (unsigned w = 0; w < S; ++w) {
    FzValue *at = fzLkAdd(kb, at0, fzLkIndex(kb, (int64_t)w * nv * 32));
    FzValue *x = fzLkLoad(kb, red, 1, &at);
    sum = sum ? fzLkBin(kb, "loop.addf", sum, x) : x;
  }
  return sum;
}

bool fzSmallMEpilogue(FzSmallMGen *g, FzValue *row, FzValue *col,
                      FzValue *acc, FzValue *cond) {
  FzLkBuild *kb = g->kb;
  const FzSmallMNest *m = g->m;
  FzOp *guard = cond ? fzLkIfBegin(kb, cond, 0, NULL, NULL) : NULL;
  if (cond && !guard)
    return false;
  FzLkMap map;
  fzLkMapInit(&map, kb->ctx, &kb->base);
  FzBlock *body = fzLoopGetBody(m->par);
  bool ok = fzLkMapPut(&map, fzOpGetResult(m->kloop, 0), acc);
  for (size_t d = 0; ok && d < m->numDims; ++d)
    ok = fzLkMapPut(&map, fzBlockGetArgument(body, d),
                    dim_value(g, (int)d, row, col));
  FzOp *term = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); ok && op;
       op = fzOpGetNextInBlock(op))
    if (op != m->kloop && op != term)
      ok = fzLkClone(kb, &map, op) != NULL;
  fzLkMapFree(&map);
  if (ok && guard)
    ok = fzLkForEnd(kb, guard, 0, NULL);
  if (!ok)
    kb->failed = true;
  return ok && !kb->failed;
}

/*===--- The mapping ------------------------------------------------------===*/

typedef struct SmallMPlan {
  FzSmallMNest m;
  FzSmallMShape s;
} SmallMPlan;

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  if (o->noSmallM)
    return false;
  SmallMPlan *sp = fzCalloc(p->ctx, 1, sizeof *sp);
  if (!sp) { /* recorded */
    p->failed = true;
    return false;
  }
  char why[256];
  bool bad = false;
  if (!fzSmallMMatch(nest->par, &sp->m, why, sizeof why) ||
      !fzSmallMChoose(&sp->m, o, &sp->s, &bad, why, sizeof why)) {
    fzFree(p->ctx, sp);
    /* A bad shape text is an error, not a fallback: a benchmark never
     * measures something else by mistake. */
    if (bad)
      p->failed = !fzEmitError(nest->ctx, fzOpGetLoc(nest->par),
                               "lower-loop-to-kernel: %s", why);
    return false;
  }
  /* A split that fzSmallMSplit declined: one block per column group. */
  if (sp->m.dimSplit < 0 && sp->s.splitBlocks > 1) {
    sp->s.splitBlocks = 1;
    sp->s.sliceK = sp->m.K;
  }
  p->grid[0] = sp->s.blocks;
  p->grid[1] = sp->s.splitBlocks;
  p->grid[2] = 1;
  p->block[0] = 32 * (int64_t)sp->s.warps;
  p->block[1] = p->block[2] = 1;
  p->sharedBytes = 0;
  fzSmallMDescribe(&sp->m, &sp->s, p->desc, sizeof p->desc);
  p->state = sp;
  return true;
}

static void release(FzLkPlan *p) {
  fzFree(p->ctx, p->state);
  p->state = NULL;
}

static bool build(FzLkBuild *kb, const FzLkPlan *p) {
  const SmallMPlan *sp = p->state;
  bool ok = sp->s.mma       ? fzSmallMBuildMma(kb, &sp->m, &sp->s)
            : sp->m.kContig ? fzSmallMBuildK(kb, &sp->m, &sp->s)
                            : fzSmallMBuildN(kb, &sp->m, &sp->s);
  if (ok && sp->s.minBlocksPerSm > 0 &&
      !fzOpSetAttr(kb->kernel, FZ_STR("kernel.min_blocks_per_sm"),
                   fzIntegerAttrGet(kb->ctx, fzIntegerTypeGet(kb->ctx, 64),
                                    sp->s.minBlocksPerSm)))
    ok = false;
  if (ok && kb->opts->remarks) {
    FzStringRef name = fzSymbolGetName(kb->kernel);
    fzEmitRemark(kb->ctx, kb->loc, "%s -> @%.*s", p->desc, (int)name.length,
                 name.data);
  }
  return ok;
}

const FzLkMapping fzLkSmallMMapping = {
    .name = "small-m",
    .plan = plan,
    .build = build,
    .release = release,
};
