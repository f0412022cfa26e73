/* lowering/loop_to_kernel/attention.h - the flash-attention mapping of
 * lower-loop-to-kernel: one kernel per graph.attention nest.
 *
 * lower-graph-to-loop lowers graph.attention (with its prologue: the
 * head split as index maps of its loads) to one online-softmax nest
 * (lowering/graph_to_loop_attention.c):
 *
 *   loop.parallel (%b..., %i) {              batch dims, then the query row
 *     row ops (index arithmetic of i and b)
 *     loop.for %d < Dv { store 0, acc[b.., i, d] }                  init
 *     %m, %l = loop.for %j < Sk (or i + c: causal) iter(-FLT_MAX, 0) {
 *       %dot = loop.for %t < D iter(0) { fma(ext(q[..]), ext(k[..]), acc) }
 *       score chain: %s from %dot, b, i, j (scale, mask loads, select)
 *       %mn = maxf(%m, %s); %a = exp(%m - %mn); %p = exp(%s - %mn)
 *       %ln = fma(%l, %a, %p)
 *       loop.for %d < Dv { acc[..] = fma(acc[..], %a, %p * ext(v[..])) }
 *       yield %mn, %ln
 *     }
 *     loop.for %d < Dv { x = load acc[b.., i, d]; ... divf(x, %l) ...;
 *                        store(s) }                                   final
 *   }
 *
 * fzKernelMatchAttentionNest recognizes it: q, k and v each one load of
 * a 16-bit buffer (f16 or bf16, all three alike) whose indices are
 * affine in the nest's ivs, contiguous along the head dim; the score
 * chain and the final loop of region-free scalar ops and loads (the
 * final loop's stores are the kernel's, at any index map: a head merge
 * folded there stays folded). fzKernelBuildAttentionBody builds the
 * kernel (attention.c; docs/codegen.md "Flash attention").
 *
 * Ownership: the description points into the IR; nothing is allocated.
 */
#ifndef FZ_LOWERING_ATTENTION_H
#define FZ_LOWERING_ATTENTION_H

#include "lowering/loop_to_kernel/matmul.h"

/* The variables of an operand's affine index maps: the nest's parallel
 * dims (0 .. numDims-1), then the key iv j, then the inner iv (t of the
 * dot loop or d of the P V loop). */
#define FZ_ATTN_MAX_VARS (FZ_MATMUL_MAX_DIMS + 2)

/* q, k or v as the nest reads it: one load whose index d is
 * cst[d] + sum_v coef[d][v] * var_v (copied by cp.async), or `computed`:
 * a value of scalar ops and loads (a fused producer: a bias add) that
 * the kernel clones per element (slice) and stores into shared memory. */
typedef struct FzAttnOperand {
  FzValue *buffer; /* a global buffer defined outside the nest */
  FzOp *load;
  bool computed;
  FzValue *value;  /* the f32 value the dot or P V loop uses */
  FzValue *inner;  /* that loop's iv (t or d) */
  FzOp *slice[64]; /* computed: the nest's ops value depends on, in order */
  size_t numSlice;
  size_t rank;
  int64_t coef[FZ_MATMUL_MAX_DIMS][FZ_ATTN_MAX_VARS];
  int64_t cst[FZ_MATMUL_MAX_DIMS];
} FzAttnOperand;

typedef struct FzAttnNest {
  FzOp *par;     /* the loop.parallel */
  FzOp *init;    /* the loop zeroing acc */
  FzOp *kloop;   /* the key loop (m, l) */
  FzOp *dot;     /* the q . k loop */
  FzOp *pv;      /* the acc update loop */
  FzOp *fin;     /* the final loop (acc / l, stores) */
  FzOp *finLoad; /* its load of acc */
  FzValue *acc;  /* the accumulator buffer (the output for f32 results) */
  FzValue *score; /* %s: the score chain's result */
  FzType *elt;   /* f16 or bf16: q's, k's and v's */
  size_t numDims;
  int64_t extent[FZ_MATMUL_MAX_DIMS];
  int64_t batch;          /* product of the extents but the last */
  int64_t Sq, Sk, D, Dv;
  /* The key loop runs to i + causalC (keys j < i + causalC: Sk = Sq +
   * causalC - 1): fully hidden key tiles are skipped and the diagonal
   * ones masked. Other masks (additive, a causal select) are in the
   * score chain. */
  bool causal;
  int64_t causalC;
  FzAttnOperand q, k, v;
  /* The ops of the key loop that compute %s from %dot (cloned per score
   * element), in block order. */
  FzOp *chain[64];
  size_t numChain;
  /* Values used in the nest and defined outside it. */
  FzValue *captures[FZ_MATMUL_MAX_CAPTURES];
  size_t numCaptures;
  /* The kernel's query rows per block: 64 (a warp per 16 rows) or 128
   * (32 rows, two m16 tiles, per warp; Q's fragments are then loaded
   * from shared memory in every key tile when D > 64); set by
   * fzAttentionChooseTile. */
  int bm;
} FzAttnNest;

/* Recognizes `par` as an attention nest and fills *out. False when it is
 * not one: *isAttn says whether par has the shape of one at all (a key
 * loop carrying two floats whose body holds an exp), and then `why`
 * (may be NULL) receives the reason, one line, for a remark. Never
 * reports errors. */
bool fzKernelMatchAttentionNest(FzOp *par, FzAttnNest *out, bool *isAttn,
                                char *why, size_t whyLen);

/* Tile of the kernel: FzAttnNest.bm query rows per block (4 warps of
 * bm / 4 rows), FZ_ATTN_BN keys per streamed tile. */
#define FZ_ATTN_BN 64
#define FZ_ATTN_WARPS 4

/* Sets a->bm: `text` ("64" or "128") when not NULL/empty, else
 * $FZ_GPU_ATTN_BM when set, else 128 when Sq > 64 and both head dims are
 * at most 64, else 64. False with the reason for a bad text. */
bool fzAttentionChooseTile(FzAttnNest *a, const char *text, char *why,
                           size_t whyLen);

/* The launch: grid.x the query tiles, grid.z the batch (heads
 * included), 128 threads, the dynamic shared bytes (Q tile and two
 * stages of K and V). */
void fzAttentionGetLaunch(const FzAttnNest *a, int64_t grid[3],
                          int64_t block[3], int64_t *sharedBytes);
/* The kernel's one-line plan. */
void fzAttentionDescribe(const FzAttnNest *a, char *buf, size_t n);
/* 2 batch Sq Sk (D + Dv), about half of it for causal nests. */
int64_t fzAttentionGetFlops(const FzAttnNest *a);

/* Builds the kernel body at `at` (the end of a kernel.func's entry
 * block whose ops define caps[i], the kernel's value of
 * a->captures[i]). False after reporting an error at the nest. */
bool fzKernelBuildAttentionBody(const FzAttnNest *a, FzBuilder *at,
                                FzValue *const *caps);

#endif /* FZ_LOWERING_ATTENTION_H */
