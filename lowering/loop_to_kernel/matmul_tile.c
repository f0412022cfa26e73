/* lowering/loop_to_kernel/matmul_tile.c - the tile configurations of the
 * tensor-core GEMM (FzMatmulTile: text form, checks, the choice for a
 * problem).
 *
 * Text form: "BMxBNxBK:Ww:Ss[:gG][:sync]": block tile BM x BN, k step BK,
 * W warps (or WMxWN for the warp grid; a count is split as squarely as
 * the tile allows, rows first), S shared-memory stages, G block rows
 * launched together (default 8), `sync` to force the scalar-load path.
 * Example: 128x256x32:8w:4s is 8 warps of 64x64, 4 stages of 24 KiB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/loop_to_kernel/matmul.h"

static bool fail(char *why, size_t n, const char *msg) {
  if (why && n)
    snprintf(why, n, "%s", msg);
  return false;
}

static bool is_pow2(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}

/* Chunks (8 elements, 16 bytes) per row of a tile with `cols` columns:
 * the swizzle needs a power of two below 8, or a multiple of 8. */
static bool chunk_rows_ok(int cols) {
  int c = cols / 8;
  return cols % 8 == 0 && (c >= 8 ? c % 8 == 0 : is_pow2(c));
}

bool fzMatmulTileCheck(const FzMatmulTile *t, char *why, size_t whyLen) {
  char msg[160];
  if (t->bm <= 0 || t->bn <= 0 || t->bk <= 0 || t->warpsM <= 0 ||
      t->warpsN <= 0)
    return fail(why, whyLen, "tile sizes and warps must be positive");
  if (t->bk % 16 != 0)
    return fail(why, whyLen, "BK must be a multiple of 16 (the mma's k)");
  if (t->bm % (16 * t->warpsM) != 0 || t->bn % (16 * t->warpsN) != 0) {
    snprintf(msg, sizeof msg, "warp tiles %dx%d must be multiples of 16x16",
             t->bm / t->warpsM, t->bn / t->warpsN);
    return fail(why, whyLen, msg);
  }
  int threads = 32 * t->warpsM * t->warpsN;
  if (threads > 1024)
    return fail(why, whyLen, "more than 32 warps (1024 threads)");
  if (t->stages < 2 || t->stages > 8)
    return fail(why, whyLen, "stages must be 2 to 8");
  if (t->groupM < 1)
    return fail(why, whyLen, "the launch group must be at least 1");
  int64_t bytes = (int64_t)t->stages * (t->bm + t->bn) * t->bk * 2;
  if (bytes > 227 * 1024) {
    snprintf(msg, sizeof msg, "%lld bytes of shared memory, more than the "
             "227 KiB of a block", (long long)bytes);
    return fail(why, whyLen, msg);
  }
  if ((t->bm * t->bk / 8) % threads != 0 ||
      (t->bn * t->bk / 8) % threads != 0)
    return fail(why, whyLen, "the 16-byte chunks of a stage do not divide "
                             "evenly among the threads");
  if (!chunk_rows_ok(t->bk) || !chunk_rows_ok(t->bm) || !chunk_rows_ok(t->bn))
    return fail(why, whyLen, "BM, BN and BK must be powers of two of 8 "
                             "or more, or multiples of 64");
  return true;
}

/* Splits `warps` into a grid for a bm x bn tile, as square as the warp
 * tiles allow (rows get the extra factor of two). */
static bool split_warps(int warps, int bm, int bn, int *wm, int *wn) {
  int best = -1;
  for (int m = 1; m <= warps; ++m) {
    if (warps % m != 0)
      continue;
    int n = warps / m;
    if (bm % (16 * m) != 0 || bn % (16 * n) != 0)
      continue;
    int a = bm / m, b = bn / n;
    int score = a > b ? a / b : b / a;
    if (best < 0 || score < best || (score == best && a >= b)) {
      best = score;
      *wm = m;
      *wn = n;
    }
  }
  return best >= 0;
}

static bool parse_int(const char **p, const char *end, int *out) {
  const char *s = *p;
  long v = 0;
  if (s >= end || *s < '0' || *s > '9')
    return false;
  while (s < end && *s >= '0' && *s <= '9') {
    v = v * 10 + (*s++ - '0');
    if (v > 1 << 20)
      return false;
  }
  *p = s;
  *out = (int)v;
  return true;
}

bool fzMatmulTileParse(FzStringRef text, FzMatmulTile *out, char *why,
                       size_t whyLen) {
  const char *p = text.data, *end = text.data + text.length;
  FzMatmulTile t = {0, 0, 0, 0, 0, 3, 8, false};
  int warps = 0;
  if (!p || !parse_int(&p, end, &t.bm) || p >= end || *p++ != 'x' ||
      !parse_int(&p, end, &t.bn) || p >= end || *p++ != 'x' ||
      !parse_int(&p, end, &t.bk))
    return fail(why, whyLen, "expected BMxBNxBK first (e.g. "
                             "128x256x32:8w:4s)");
  bool haveWarps = false;
  while (p < end) {
    if (*p++ != ':')
      return fail(why, whyLen, "expected ':' between the fields");
    if (end - p >= 4 && memcmp(p, "sync", 4) == 0) {
      t.sync = true;
      p += 4;
      continue;
    }
    char kind = 0;
    int v, v2 = 0;
    if (p < end && *p == 'g') {
      kind = 'g';
      ++p;
    }
    if (!parse_int(&p, end, &v))
      return fail(why, whyLen, "expected a number in a field");
    if (!kind && p < end && *p == 'x') {
      ++p;
      if (!parse_int(&p, end, &v2))
        return fail(why, whyLen, "expected WMxWN warps");
    }
    if (!kind && p < end)
      kind = *p++;
    switch (kind) {
    case 'w':
      haveWarps = true;
      if (v2) {
        t.warpsM = v;
        t.warpsN = v2;
      } else {
        warps = v;
      }
      break;
    case 's':
      t.stages = v;
      break;
    case 'g':
      t.groupM = v;
      break;
    default:
      return fail(why, whyLen, "unknown field (Nw, WMxWNw, Ns, gN, sync)");
    }
  }
  if (!haveWarps)
    return fail(why, whyLen, "missing the warps field (e.g. :8w)");
  if (warps && !split_warps(warps, t.bm, t.bn, &t.warpsM, &t.warpsN))
    return fail(why, whyLen, "the warps do not split the tile into warp "
                             "tiles of multiples of 16x16");
  if (!fzMatmulTileCheck(&t, why, whyLen))
    return false;
  *out = t;
  return true;
}

void fzMatmulTileFormat(const FzMatmulTile *t, char *buf, size_t n) {
  snprintf(buf, n, "%dx%dx%d:%dx%dw:%ds:g%d%s", t->bm, t->bn, t->bk,
           t->warpsM, t->warpsN, t->stages, t->groupM,
           t->sync ? ":sync" : "");
}

bool fzMatmulTileChoose(const FzMatmulNest *m, FzStringRef text,
                        FzMatmulTile *out, char *why, size_t whyLen) {
  if (text.data && text.length)
    return fzMatmulTileParse(text, out, why, whyLen);
  const char *env = getenv("FZ_GPU_MMA_TILE");
  if (env && *env) {
    if (fzMatmulTileParse(fzStringRefFromCString(env), out, why, whyLen))
      return true;
    if (why && whyLen) {
      char inner[160];
      snprintf(inner, sizeof inner, "%s", why);
      snprintf(why, whyLen, "FZ_GPU_MMA_TILE=%s: %s", env, inner);
    }
    return false;
  }
  /* Measured on an H100 (docs/benchmarks.md, bench/gpu/run.sh's sweep):
   * 128x128x32:4w:4s was the fastest tile at 4096^3 and 8192^3 (two
   * blocks of 4 warps per SM, 64 KiB each); 128x256 tiles with 8 warps
   * were 15-20% slower. */
  const char *def = m->M >= 256 && m->N >= 256 ? "128x128x32:4w:4s"
                                               : "64x64x32:4w:3s";
  /* A conv2d's gather keeps its loads in registers across the compute
   * (128x128x32:4w:4s spills there, ptxas -v). Measured on an H100
   * (docs/benchmarks.md "GPU: conv2d on tensor cores", bench/gpu/conv.sh's
   * sweep of five tiles): above 64 output channels 64x128x32:4w:3s was
   * the fastest (3x3 stride 2, 128 -> 128: 118.2 TFLOP/s against 101.7
   * for 128x128x32:4w:3s; 3x3 256 -> 256 at 14x14: 85.9 against 78.7);
   * at 64, 128x64x32:4w:4s (within 2% of the best on the 3x3, the best
   * on the 7x7 stem). A 1x1 conv is a GEMM per image whose K is the
   * input channels: 128x64x64:4w:3s (one k step of 64) ran 64 -> 256 at
   * 56x56 at 78.9 TFLOP/s against 56.5 for the matmul's default. */
  if (m->conv.on && !m->conv.pointwise && m->M >= 256)
    def = m->N > 64 ? "64x128x32:4w:3s" : "128x64x32:4w:4s";
  if (m->conv.on && m->conv.pointwise && m->M >= 256 && m->N >= 256)
    def = m->K >= 64 ? "128x64x64:4w:3s" : "128x64x32:4w:4s";
  return fzMatmulTileParse(fzStringRefFromCString(def), out, why, whyLen);
}
