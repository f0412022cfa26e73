/* dialects/graph/ops_nn.c - contractions and windows: matmul, conv2d,
 * max_pool, avg_pool, global_avg_pool and global_max_pool.
 *
 * matmul follows numpy.matmul: operands of rank >= 1; a rank-1 lhs is a
 * row vector and a rank-1 rhs a column vector (their unit dim dropped
 * from the result); dims before the last two broadcast. transpose_a /
 * transpose_b (bool, default false) swap the last two dims of an operand
 * of rank >= 2 first.
 *
 * conv2d and the pools work on NCHW, or on NHWC (channels last) with
 * layout = "nhwc". Window attributes, as ONNX:
 *   strides    array<i64: sh, sw>          default 1, 1
 *   pads       array<i64: top, left, bottom, right>   default 0
 *   dilations  array<i64: dh, dw>          default 1, 1
 *   groups     i64 (conv2d)                default 1
 *   kernel     array<i64: kh, kw> (pools, required)
 *   ceil_mode  bool (pools; a window starting in the end padding is
 *              dropped, as ONNX and PyTorch do)
 *   count_include_pad  bool (avg_pool: divide by the full window)
 *   layout     "nchw" (default) or "nhwc" (conv2d and every pool)
 * conv2d: x [N, C, H, W], weight [M, C / groups, kh, kw], optional bias
 * [M]; result [N, M, OH, OW] with OH = (H + top + bottom - dh * (kh - 1)
 * - 1) / sh + 1 (floor). With "nhwc", x is [N, H, W, C] and the result
 * [N, OH, OW, M]; the weight keeps ONNX's [M, C / groups, kh, kw] (a
 * constant that back ends repack as they like), so only the data
 * layout changes. The pools likewise: [N, H, W, C] -> [N, OH, OW, C];
 * the global pools [N, spatial..., C] -> [N, 1..., C].
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

/*===--- matmul ---------------------------------------------------------===*/

static const char *const matmul_attrs[] = {"transpose_a", "transpose_b", NULL};

static bool shape_matmul(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 2, 2) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1) || !fzGraphCheckSameElement(d, in, 0, 1))
    return false;
  bool ta, tb;
  if (!fzGraphGetBool(d, a, "transpose_a", false, &ta) ||
      !fzGraphGetBool(d, a, "transpose_b", false, &tb))
    return false;
  size_t ra = fzShapedTypeGetRank(in[0]), rb = fzShapedTypeGetRank(in[1]);
  if (ra == 0 || rb == 0)
    return fzGraphError(d, "operand #%d must have rank >= 1", ra == 0 ? 0 : 1);
  if ((ta && ra < 2) || (tb && rb < 2))
    return fzGraphError(d, "attribute '%s' needs an operand of rank >= 2",
                        ta && ra < 2 ? "transpose_a" : "transpose_b");
  const int64_t *sa = fzShapedTypeGetShape(in[0]);
  const int64_t *sb = fzShapedTypeGetShape(in[1]);
  /* Contraction dims: a's K and b's K, with their positions. */
  size_t ka = ra == 1 ? 0 : (ta ? ra - 2 : ra - 1);
  size_t kb = rb == 1 ? 0 : (tb ? rb - 1 : rb - 2);
  int64_t kA = sa[ka], kB = sb[kb];
  if (kA != FZ_DYNAMIC && kB != FZ_DYNAMIC && kA != kB)
    return fzGraphError(d,
                        "operand #1 dimension %zu (%lld) does not match "
                        "operand #0 dimension %zu (%lld): the contraction "
                        "dimensions differ",
                        kb, (long long)kB, ka, (long long)kA);
  /* Batch dims: all but the last two, broadcast. */
  size_t ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
  size_t br = ba > bb ? ba : bb;
  int64_t shape[FZ_GRAPH_MAX_RANK + 2];
  for (size_t j = 0; j < br; ++j) {
    int64_t x = j + ba >= br ? sa[j + ba - br] : 1;
    int64_t y = j + bb >= br ? sb[j + bb - br] : 1;
    if (x == 1)
      shape[j] = y;
    else if (y == 1)
      shape[j] = x;
    else if (x == FZ_DYNAMIC)
      shape[j] = y;
    else if (y == FZ_DYNAMIC || x == y)
      shape[j] = x;
    else
      return fzGraphError(d,
                          "operand #1 dimension %zu (%lld) is not "
                          "broadcast-compatible with operand #0 dimension "
                          "%zu (%lld)",
                          j + bb - br, (long long)y, j + ba - br, (long long)x);
  }
  size_t k = br;
  if (ra >= 2)
    shape[k++] = ta ? sa[ra - 1] : sa[ra - 2];
  if (rb >= 2)
    shape[k++] = tb ? sb[rb - 2] : sb[rb - 1];
  if (k > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d, "the result rank %zu is above the maximum (%d)", k,
                        FZ_GRAPH_MAX_RANK);
  out[0] = fzGraphTensorType(d, k, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_matmul)

/*===--- Windows --------------------------------------------------------===*/

typedef struct Window {
  int64_t kernel[2], strides[2], pads[4], dilations[2];
  int64_t groups;
  bool ceilMode, countIncludePad;
  bool nhwc; /* layout = "nhwc" */
} Window;

static bool read_pair(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                      int64_t dflt, size_t count, int64_t min, int64_t *out,
                      bool required) {
  size_t n;
  bool present;
  if (!fzGraphGetI64Array(d, a, name, 4, out, &n, &present))
    return false;
  if (!present) {
    if (required)
      return fzGraphError(d,
                          "requires attribute '%s' (array<i64: ...> with "
                          "%zu entries)",
                          name, count);
    for (size_t i = 0; i < count; ++i)
      out[i] = dflt;
    return true;
  }
  if (n != count)
    return fzGraphError(d, "attribute '%s' needs %zu entries, but has %zu",
                        name, count, n);
  for (size_t i = 0; i < count; ++i)
    if (out[i] < min)
      return fzGraphError(d,
                          "attribute '%s' entry %zu (%lld) must be >= "
                          "%lld",
                          name, i, (long long)out[i], (long long)min);
  /* At most FZ_MAX_DIM, like a dimension: window_out's sums cannot
   * overflow then. */
  for (size_t i = 0; i < count; ++i)
    if (out[i] > FZ_MAX_DIM)
      return fzGraphError(d,
                          "attribute '%s' entry %zu (%lld) must be <= "
                          "%lld",
                          name, i, (long long)out[i], (long long)FZ_MAX_DIM);
  return true;
}

/*===--- Layouts (fz/layout.h) -------------------------------------------===*/

/* Indexed by FzGraphLayout. */
#define NAME(id, name) name,
static const char *const kLayoutNames[FZ_GRAPH_NUM_LAYOUTS + 1] = {
    FZ_GRAPH_LAYOUTS(NAME) NULL};
#undef NAME

bool fzGraphLayoutParse(FzStringRef text, FzGraphLayout *out) {
  for (int i = 0; i < FZ_GRAPH_NUM_LAYOUTS; ++i)
    if (fzStringRefEqual(text, fzStringRefFromCString(kLayoutNames[i]))) {
      *out = (FzGraphLayout)i;
      return true;
    }
  return false;
}

const char *fzGraphLayoutGetName(FzGraphLayout l) {
  return (unsigned)l < FZ_GRAPH_NUM_LAYOUTS ? kLayoutNames[l] : NULL;
}

const char *fzGraphLayoutGetChoicesText(void) {
  return "nchw, nhwc or auto";
}

/* The `layout` attribute into *nhwc: "nchw" (or absent) or "nhwc". */
static bool read_layout(FzGraphDiag *d, const FzGraphAttrs *a, bool *nhwc) {
  FzStringRef s;
  FzGraphLayout l = FZ_GRAPH_LAYOUT_NCHW;
  *nhwc = false;
  if (!fzGraphGetString(d, a, "layout", "nchw", &s))
    return false;
  /* "auto" is a choice of the tools and convert-layout, not a layout an
   * op can have. */
  if (!fzGraphLayoutParse(s, &l) || l == FZ_GRAPH_LAYOUT_AUTO)
    return fzGraphError(d,
                        "attribute 'layout' must be \"nchw\" or \"nhwc\", "
                        "got \"%.*s\"",
                        (int)(s.length > 64 ? 64 : s.length), s.data);
  *nhwc = l == FZ_GRAPH_LAYOUT_NHWC;
  return true;
}

static bool read_window(FzGraphDiag *d, const FzGraphAttrs *a, bool pool,
                        Window *w) {
  memset(w, 0, sizeof *w);
  w->groups = 1;
  if (!read_layout(d, a, &w->nhwc) ||
      !read_pair(d, a, "strides", 1, 2, 1, w->strides, false) ||
      !read_pair(d, a, "pads", 0, 4, 0, w->pads, false) ||
      !read_pair(d, a, "dilations", 1, 2, 1, w->dilations, false))
    return false;
  if (pool)
    return read_pair(d, a, "kernel", 1, 2, 1, w->kernel, true) &&
           fzGraphGetBool(d, a, "ceil_mode", false, &w->ceilMode) &&
           fzGraphGetBool(d, a, "count_include_pad", false,
                          &w->countIncludePad);
  if (!fzGraphGetInt(d, a, "groups", 1, &w->groups))
    return false;
  if (w->groups < 1 || w->groups > FZ_MAX_DIM) /* a channel count */
    return fzGraphError(d, "attribute 'groups' (%lld) must be in [1, %lld]",
                        (long long)w->groups, (long long)FZ_MAX_DIM);
  return true;
}

/* The output size of one spatial dim; -1 (after an error) when the
 * window does not fit. */
static int64_t window_out(FzGraphDiag *d, const Window *w, size_t i, int64_t in,
                          int64_t k) {
  if (in == FZ_DYNAMIC || k == FZ_DYNAMIC)
    return FZ_DYNAMIC;
  int64_t padded = in + w->pads[i] + w->pads[i + 2];
  /* dilation * (k - 1) may not fit int64 (both up to 2^40): such a
   * window is larger than any padded input. */
  if (k > 1 && w->dilations[i] > (INT64_MAX - 1) / (k - 1)) {
    fzGraphError(d,
                 "spatial dimension %zu: the window (kernel %lld, dilation "
                 "%lld) is larger than the padded input (%lld)",
                 i, (long long)k, (long long)w->dilations[i],
                 (long long)padded);
    return -1;
  }
  int64_t span = w->dilations[i] * (k - 1) + 1;
  if (span > padded) {
    fzGraphError(d,
                 "spatial dimension %zu: the window (%lld with dilation) "
                 "is larger than the padded input (%lld)",
                 i, (long long)span, (long long)padded);
    return -1;
  }
  int64_t num = padded - span, s = w->strides[i];
  int64_t out = num / s + 1;
  if (w->ceilMode && num % s != 0) {
    out = num / s + 2;
    /* A window that would start in the end padding is dropped. */
    if ((out - 1) * s >= in + w->pads[i])
      out--;
  }
  return out;
}

static const char *const conv_attrs[] = {"strides", "pads", "dilations",
                                         "groups", "layout", NULL};

static bool shape_conv2d(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 2, 3))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  Window w;
  if (!read_window(d, a, false, &w))
    return false;
  for (int i = 0; i < 2; ++i)
    if (fzShapedTypeGetRank(in[i]) != 4)
      return fzGraphError(d,
                          "operand #%d must have rank 4 (%s), but has "
                          "rank %zu",
                          i,
                          i      ? "M, C/groups, kH, kW"
                          : w.nhwc ? "N, H, W, C"
                                   : "N, C, H, W",
                          fzShapedTypeGetRank(in[i]));
  const int64_t *x = fzShapedTypeGetShape(in[0]);
  const int64_t *k = fzShapedTypeGetShape(in[1]);
  /* The input's channel and first spatial dims. */
  size_t cd = w.nhwc ? 3 : 1, hd = w.nhwc ? 1 : 2;
  if (x[cd] != FZ_DYNAMIC && k[1] != FZ_DYNAMIC && x[cd] != k[1] * w.groups)
    return fzGraphError(d,
                        "operand #1 dimension 1 (%lld) times groups "
                        "(%lld) does not match operand #0 dimension %zu "
                        "(%lld, the input channels)",
                        (long long)k[1], (long long)w.groups, cd,
                        (long long)x[cd]);
  if (k[0] != FZ_DYNAMIC && k[0] % w.groups != 0)
    return fzGraphError(d,
                        "operand #1 dimension 0 (%lld, the output "
                        "channels) is not a multiple of groups (%lld)",
                        (long long)k[0], (long long)w.groups);
  if (n == 3) {
    if (fzShapedTypeGetRank(in[2]) != 1)
      return fzGraphError(d,
                          "operand #2 (the bias) must have rank 1, but "
                          "has rank %zu",
                          fzShapedTypeGetRank(in[2]));
    int64_t b = fzShapedTypeGetDim(in[2], 0);
    if (b != FZ_DYNAMIC && k[0] != FZ_DYNAMIC && b != k[0])
      return fzGraphError(d,
                          "operand #2 dimension 0 (%lld) does not match "
                          "operand #1 dimension 0 (%lld, the output "
                          "channels)",
                          (long long)b, (long long)k[0]);
  }
  int64_t shape[4] = {x[0], 0, 0, 0};
  shape[cd] = k[0];
  for (size_t i = 0; i < 2; ++i)
    if ((shape[hd + i] = window_out(d, &w, i, x[hd + i], k[2 + i])) == -1)
      return false;
  out[0] = fzGraphTensorType(d, 4, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_conv2d)

static const char *const pool_attrs[] = {
    "kernel",    "strides",           "pads",   "dilations",
    "ceil_mode", "count_include_pad", "layout", NULL};
static const char *const global_pool_attrs[] = {"layout", NULL};

static bool shape_pool(FzGraphDiag *d, size_t n, FzType *const *in,
                       const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  Window w;
  if (!read_window(d, a, true, &w))
    return false;
  if (fzShapedTypeGetRank(in[0]) != 4)
    return fzGraphError(d,
                        "operand #0 must have rank 4 (%s), but has rank %zu",
                        w.nhwc ? "N, H, W, C" : "N, C, H, W",
                        fzShapedTypeGetRank(in[0]));
  const int64_t *x = fzShapedTypeGetShape(in[0]);
  for (size_t i = 0; i < 2; ++i)
    if (w.pads[i] >= w.kernel[i] || w.pads[i + 2] >= w.kernel[i])
      return fzGraphError(d,
                          "attribute 'pads' must be smaller than the "
                          "kernel (dimension %zu: kernel %lld, pads %lld "
                          "and %lld)",
                          i, (long long)w.kernel[i], (long long)w.pads[i],
                          (long long)w.pads[i + 2]);
  size_t hd = w.nhwc ? 1 : 2; /* the first spatial dim */
  int64_t shape[4] = {x[0], x[1], x[2], x[3]};
  for (size_t i = 0; i < 2; ++i)
    if ((shape[hd + i] = window_out(d, &w, i, x[hd + i], w.kernel[i])) == -1)
      return false;
  out[0] = fzGraphTensorType(d, 4, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_pool)

static bool shape_global_pool(FzGraphDiag *d, size_t n, FzType *const *in,
                              const FzGraphAttrs *a, FzType **out) {
  bool nhwc;
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0) ||
      !read_layout(d, a, &nhwc))
    return false;
  size_t r = fzShapedTypeGetRank(in[0]);
  if (r < 3)
    return fzGraphError(d,
                        "operand #0 must have rank >= 3 (%s), but has rank "
                        "%zu",
                        nhwc ? "N, spatial dims..., C"
                             : "N, C, spatial dims...",
                        r);
  /* Every dim but the batch and the channels becomes 1. */
  size_t cd = nhwc ? r - 1 : 1;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = i == 0 || i == cd ? fzShapedTypeGetDim(in[0], i) : 1;
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_global_pool)

/*===--- Window readers for the kernels ---------------------------------===*/

FzGraphLayout fzGraphOpGetLayout(const FzOp *op) {
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  FzAttr *v = fzGraphAttrsLookup(&a, "layout");
  FzGraphLayout l = FZ_GRAPH_LAYOUT_NCHW;
  if (v && fzAttrGetKind(v) == FZ_ATTR_STRING &&
      (!fzGraphLayoutParse(fzStringAttrGetValue(v), &l) ||
       l == FZ_GRAPH_LAYOUT_AUTO))
    l = FZ_GRAPH_LAYOUT_NCHW;
  return l;
}

/* Reads op's window attributes (already verified). */
bool fzGraphReadWindow(FzOp *op, bool pool, int64_t *kernel, int64_t *strides,
                       int64_t *pads, int64_t *dilations, int64_t *groups,
                       bool *countIncludePad);

bool fzGraphReadWindow(FzOp *op, bool pool, int64_t *kernel, int64_t *strides,
                       int64_t *pads, int64_t *dilations, int64_t *groups,
                       bool *countIncludePad) {
  FzGraphDiag d = fzGraphDiagForOp(op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  Window w;
  if (!read_window(&d, &a, pool, &w))
    return false;
  memcpy(kernel, w.kernel, sizeof w.kernel);
  memcpy(strides, w.strides, sizeof w.strides);
  memcpy(pads, w.pads, sizeof w.pads);
  memcpy(dilations, w.dilations, sizeof w.dilations);
  *groups = w.groups;
  *countIncludePad = w.countIncludePad;
  return true;
}

/*===--- Kernels (interp_nn.c) and definitions --------------------------===*/

bool fzGraphKernelMatmul(FzGraphInterp *, FzOp *, FzTensor *const *,
                         FzTensor **);
bool fzGraphKernelConv2d(FzGraphInterp *, FzOp *, FzTensor *const *,
                         FzTensor **);
bool fzGraphKernelPool(FzGraphInterp *, FzOp *, FzTensor *const *, FzTensor **);
bool fzGraphKernelGlobalPool(FzGraphInterp *, FzOp *, FzTensor *const *,
                             FzTensor **);

static const FzGraphKernel kernel_matmul = {fzGraphKernelMatmul};
static const FzGraphKernel kernel_conv2d = {fzGraphKernelConv2d};
static const FzGraphKernel kernel_pool = {fzGraphKernelPool};
static const FzGraphKernel kernel_global_pool = {fzGraphKernelGlobalPool};

#define DEFINE_OP FZ_GRAPH_DEFINE_FOLDING_OP

DEFINE_OP(matmul,
          "numpy matmul with optional transposes of the last two "
          "dims",
          2, FZ_FUSION_CONTRACTION, matmul_attrs, shape_matmul, 0,
          kernel_matmul, 0)
DEFINE_OP(conv2d,
          "2-D convolution, NCHW or NHWC (strides, pads, dilations, "
          "groups, layout), optional bias",
          FZ_VARIADIC, FZ_FUSION_CONTRACTION, conv_attrs, shape_conv2d, 0,
          kernel_conv2d, 0)
DEFINE_OP(max_pool, "2-D max pooling, NCHW or NHWC", 1, FZ_FUSION_REDUCTION, pool_attrs,
          shape_pool, 0, kernel_pool, 0)
DEFINE_OP(avg_pool, "2-D average pooling, NCHW or NHWC", 1, FZ_FUSION_REDUCTION,
          pool_attrs, shape_pool, G_FLOAT_ONLY, kernel_pool, 1)
DEFINE_OP(global_avg_pool,
          "mean over every spatial dim (N, C, 1, 1...; NHWC: N, 1, 1, C)", 1,
          FZ_FUSION_REDUCTION, global_pool_attrs, shape_global_pool, G_FLOAT_ONLY,
          kernel_global_pool, 0)
DEFINE_OP(global_max_pool,
          "maximum over every spatial dim (N, C, 1, 1...; NHWC: N, 1, 1, C)",
          1, FZ_FUSION_REDUCTION, global_pool_attrs, shape_global_pool, 0, kernel_global_pool,
          1)
