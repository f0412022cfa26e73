/* fuzz_diff.c - differential libFuzzer target: graph-optimize and the CPU
 * backend against the reference interpreter.
 *
 * The input bytes drive a grammar that always yields a valid graph
 * program. The first byte picks the dtype of the whole program: f32
 * (most), f64, f16, bf16 or i32. Values have rank 1-4, dims 1-4 (at most
 * 512 elements). Ops, by fusion kind:
 *  - elementwise: continuous unary math (for f16 only the bounded ones,
 *    and the positive-domain ones sqrt/rsqrt/log/reciprocal on
 *    |x| + 0.5), clamp/leaky_relu/elu/hard_sigmoid/softplus/selu, casts
 *    through another float type and back;
 *  - broadcast: add sub mul max min, div by |b| + 0.5, pow by 2 or 3,
 *    select on a mask that compares exact values (an input against a
 *    constant no input equals), weighted_sum, scalar (rank-0) and splat
 *    constants, full dense constants, broadcast to a leading dim;
 *  - injective: transpose (any permutation), reshape, concat, slice (also
 *    negative strides), pad (also cropping), gather with constant indices;
 *  - reduction: reduce_{sum,mean,max,min,prod} over one or two axes,
 *    softmax, log_softmax, layer_norm and rms_norm (with a scale);
 *  - contraction: matmul (also batched, transpose_b);
 *  - the primitive forms recognize-composites rebuilds: softmax
 *    (exp(x - max) / sum), gelu (erf form), silu, layer norm from means,
 *    weighted sums x*c1 + y*c2.
 * i32 programs use the integer-safe subset (wrapping arithmetic, max/min,
 * neg/abs/relu/sign/clamp, sum/max/min reductions, data movement, compare
 * and select, matmul). The function returns one or two values. Inputs are
 * pseudo-random in [-2, 2] (small integers for i32) from a seed byte.
 *
 * Checks, in order (each failure aborts, i.e. is a libFuzzer crash):
 *   1. the generated text parses and verifies (else the generator or the
 *      parser/verifier is wrong);
 *   2. the interpreter runs the original;
 *   3. graph-optimize succeeds on a clone, and the interpreter's results
 *      on it match the original's within tolerance;
 *   4. when FZ_FUZZ_DIFF_CPU is not "0": the CPU backend
 *      (fz/runtime.h) compiles and runs the original and matches the
 *      interpreter within tolerance. A compile failure (an error
 *      diagnostic: an op the backend does not support yet) is tolerated
 *      unless FZ_FUZZ_DIFF_STRICT=1; a wrong result never is.
 * FZ_FUZZ_DUMP=1 prints each generated program to stderr.
 * Tolerance |a - b| <= atol + rtol * |b|: f32 and f64 1e-4 and 1e-3, f16
 * 2e-2 and 2e-2, bf16 8e-2 and 8e-2 (rounding after every op against a
 * composite rounded once), i32 exact; NaN matches NaN, an infinity the
 * same infinity. The ops are chosen continuous on their domains so that
 * legal reassociation stays within it.
 */
#include <math.h>

#include "fuzz/fuzz_common.h"

#define MAX_VALUES 40
#define MAX_RANK 4
#define MAX_ELEMS 512

typedef struct Reader {
  const uint8_t *data;
  size_t size, pos;
} Reader;

/* The next byte modulo n (0 once the input is exhausted). */
static unsigned pick(Reader *r, unsigned n) {
  if (r->pos >= r->size || n == 0) return 0;
  return r->data[r->pos++] % n;
}

typedef enum DType { DT_F32, DT_F64, DT_F16, DT_BF16, DT_I32 } DType;
static const char *const kDTypeName[] = {"f32", "f64", "f16", "bf16", "i32"};

typedef struct Val {
  size_t rank;
  int64_t shape[MAX_RANK];
} Val;

typedef struct Gen {
  FuzzBuf body;
  DType dt;
  const char *elt; /* kDTypeName[dt] */
  bool isInt, bounded; /* i32; f16 (no op that can overflow) */
  Val vals[MAX_VALUES];
  char names[MAX_VALUES][16];
  size_t numVals, numArgs, nextSsa;
} Gen;

static void emit(Gen *g, const char *fmt, ...) FZ_PRINTF(2, 3);
static void emit(Gen *g, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) abort();
  fuzz_buf_append((FzStringRef){tmp, (size_t)n}, &g->body);
}

static int64_t num_elems(const Val *v) {
  int64_t n = 1;
  for (size_t i = 0; i < v->rank; ++i) n *= v->shape[i];
  return n;
}

/* "tensor<2x3xELT>" into out (one of a few rotating buffers). */
static const char *ty(const Gen *g, const Val *v, const char *elt) {
  static char bufs[16][96];
  static unsigned next;
  char *out = bufs[next++ % 16];
  char *p = out + sprintf(out, "tensor<");
  for (size_t i = 0; i < v->rank; ++i)
    p += sprintf(p, "%lldx", (long long)v->shape[i]);
  sprintf(p, "%s>", elt ? elt : g->elt);
  return out;
}

/* Records a new SSA value of shape v; returns its index. */
static size_t add_val(Gen *g, Val v) {
  size_t i = g->numVals++;
  g->vals[i] = v;
  snprintf(g->names[i], sizeof g->names[i], "%%%zu", g->nextSsa++);
  return i;
}

/* A fresh temporary name (not a pool value; valid for the next 31
 * calls). */
static const char *tmp_name(Gen *g) {
  static char bufs[32][16];
  static unsigned next;
  char *out = bufs[next++ % 32];
  snprintf(out, 16, "%%%zu", g->nextSsa++);
  return out;
}

/* A scalar literal of the program's dtype: v for floats, trunc(v) for
 * integers. */
static const char *lit(const Gen *g, double v) {
  static char bufs[8][32];
  static unsigned next;
  char *out = bufs[next++ % 8];
  if (g->isInt)
    snprintf(out, 32, "%lld", (long long)v);
  else
    snprintf(out, 32, "%.6e", v);
  return out;
}

/* A rank-0 constant of the program's dtype; returns its name. */
static const char *scalar_const(Gen *g, double v) {
  const char *n = tmp_name(g);
  emit(g, "  %s = graph.constant dense<%s> : tensor<%s>\n", n, lit(g, v),
       g->elt);
  return n;
}

/* A value whose shape is a suffix of a's (for broadcasting), or a. */
static size_t pick_broadcast_partner(Gen *g, Reader *r, size_t a) {
  size_t cand[MAX_VALUES], n = 0;
  for (size_t i = 0; i < g->numVals; ++i) {
    const Val *v = &g->vals[i], *w = &g->vals[a];
    if (v->rank > w->rank) continue;
    if (memcmp(v->shape, w->shape + (w->rank - v->rank),
               v->rank * sizeof(int64_t)) == 0)
      cand[n++] = i;
  }
  return n ? cand[pick(r, (unsigned)n)] : a;
}

/* A value of exactly a's shape, or a. */
static size_t pick_same_shape(Gen *g, Reader *r, size_t a) {
  size_t cand[MAX_VALUES], n = 0;
  for (size_t i = 0; i < g->numVals; ++i)
    if (g->vals[i].rank == g->vals[a].rank &&
        !memcmp(g->vals[i].shape, g->vals[a].shape,
                g->vals[a].rank * sizeof(int64_t)))
      cand[n++] = i;
  return n ? cand[pick(r, (unsigned)n)] : a;
}

/* Emits "%name = graph.OP a, b : A, B -> A" (b a suffix of a's shape);
 * returns the result's index. */
static size_t emit_binary(Gen *g, const char *op, size_t a, size_t b,
                          bool swap) {
  Val va = g->vals[a], vb = g->vals[b];
  size_t res = add_val(g, va);
  if (vb.rank == va.rank)
    emit(g, "  %s = graph.%s %s, %s : %s\n", g->names[res], op,
         g->names[swap ? b : a], g->names[swap ? a : b], ty(g, &va, NULL));
  else
    emit(g, "  %s = graph.%s %s, %s : %s, %s -> %s\n", g->names[res], op,
         g->names[swap ? b : a], g->names[swap ? a : b],
         ty(g, swap ? &vb : &va, NULL), ty(g, swap ? &va : &vb, NULL),
         ty(g, &va, NULL));
  return res;
}

/* "%t = graph.OP src, %c : T, tensor<ELT> -> T" with a scalar constant. */
static void emit_with_scalar(Gen *g, const char *dst, const char *op,
                             const char *src, const Val *v, double c) {
  const char *cn = scalar_const(g, c);
  emit(g, "  %s = graph.%s %s, %s : %s, tensor<%s> -> %s\n", dst, op, src, cn,
       ty(g, v, NULL), g->elt, ty(g, v, NULL));
}

/* |a| + 0.5 into a temporary (a positive value of a's shape); floats. */
static const char *positive(Gen *g, size_t a) {
  const char *t = tmp_name(g), *p = tmp_name(g);
  emit(g, "  %s = graph.abs %s : %s\n", t, g->names[a],
       ty(g, &g->vals[a], NULL));
  emit_with_scalar(g, p, "add", t, &g->vals[a], 0.5);
  return p;
}

static const char *axes_str(const size_t *axes, size_t n) {
  static char buf[64];
  char *p = buf;
  for (size_t i = 0; i < n; ++i)
    p += sprintf(p, "%s%zu", i ? ", " : "", axes[i]);
  return buf;
}

static const char *i64_list(const int64_t *v, size_t n, char *buf) {
  char *p = buf;
  for (size_t i = 0; i < n; ++i)
    p += sprintf(p, "%s%lld", i ? ", " : "", (long long)v[i]);
  return buf;
}

/* Reduces a over one axis or two (keepdims or not) with op. */
static size_t gen_reduce(Gen *g, Reader *r, size_t a, const char *op,
                         bool keepOnly) {
  Val va = g->vals[a];
  size_t axes[2] = {pick(r, (unsigned)va.rank), 0}, nAxes = 1;
  if (va.rank > 1 && pick(r, 3) == 0) {
    axes[1] = (axes[0] + 1 + pick(r, (unsigned)va.rank - 1)) % va.rank;
    if (axes[1] < axes[0]) {
      size_t t = axes[0];
      axes[0] = axes[1];
      axes[1] = t;
    }
    nAxes = 2;
  }
  bool keep = keepOnly || va.rank == nAxes || pick(r, 2);
  Val vr = va;
  if (keep) {
    for (size_t i = 0; i < nAxes; ++i) vr.shape[axes[i]] = 1;
  } else {
    vr.rank = 0;
    for (size_t d = 0; d < va.rank; ++d)
      if (d != axes[0] && (nAxes < 2 || d != axes[1]))
        vr.shape[vr.rank++] = va.shape[d];
  }
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.%s %s {axes = array<i64: %s>%s} : %s -> %s\n",
       g->names[res], op, g->names[a], axes_str(axes, nAxes),
       keep ? ", keepdims = true" : "", ty(g, &va, NULL), ty(g, &vr, NULL));
  return res;
}

/* A reshape of a to another factorization of its element count. */
static void gen_reshape(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a], vr = {0, {0}};
  int64_t n = num_elems(&va);
  size_t rank = 1 + pick(r, MAX_RANK);
  for (size_t i = 0; i + 1 < rank; ++i) {
    int64_t divs[16], nd = 0;
    for (int64_t d = 1; d <= n && d <= 8 && nd < 16; ++d)
      if (n % d == 0) divs[nd++] = d;
    int64_t d = divs[pick(r, (unsigned)nd)];
    vr.shape[vr.rank++] = d;
    n /= d;
  }
  vr.shape[vr.rank++] = n;
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.reshape %s : %s -> %s\n", g->names[res], g->names[a],
       ty(g, &va, NULL), ty(g, &vr, NULL));
}

static void gen_transpose(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a];
  size_t perm[MAX_RANK];
  for (size_t i = 0; i < va.rank; ++i) perm[i] = i;
  for (size_t i = va.rank; i > 1; --i) { /* Fisher-Yates from the bytes */
    size_t j = pick(r, (unsigned)i), t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  Val vr = va;
  for (size_t i = 0; i < va.rank; ++i) vr.shape[i] = va.shape[perm[i]];
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.transpose %s {perm = array<i64: %s>} : %s -> %s\n",
       g->names[res], g->names[a], axes_str(perm, va.rank), ty(g, &va, NULL),
       ty(g, &vr, NULL));
}

static void gen_slice(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a], vr = va;
  int64_t st[MAX_RANK], li[MAX_RANK], sd[MAX_RANK];
  for (size_t d = 0; d < va.rank; ++d) {
    int64_t n = va.shape[d];
    if (pick(r, 3) == 0) { /* negative stride: start > limit >= -1 */
      sd[d] = -(int64_t)(1 + pick(r, 2));
      st[d] = n - 1 - (int64_t)pick(r, (unsigned)n);
      li[d] = -1 + (int64_t)pick(r, (unsigned)(st[d] + 1));
      vr.shape[d] = (st[d] - li[d] + (-sd[d]) - 1) / (-sd[d]);
    } else {
      sd[d] = 1 + pick(r, 2);
      st[d] = pick(r, (unsigned)n);
      li[d] = st[d] + 1 + (int64_t)pick(r, (unsigned)(n - st[d]));
      vr.shape[d] = (li[d] - st[d] + sd[d] - 1) / sd[d];
    }
  }
  char b1[64], b2[64], b3[64];
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.slice %s {starts = array<i64: %s>, limits = "
          "array<i64: %s>, strides = array<i64: %s>} : %s -> %s\n",
       g->names[res], g->names[a], i64_list(st, va.rank, b1),
       i64_list(li, va.rank, b2), i64_list(sd, va.rank, b3), ty(g, &va, NULL),
       ty(g, &vr, NULL));
}

static void gen_pad(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a], vr = va;
  int64_t pads[2 * MAX_RANK];
  for (size_t d = 0; d < va.rank; ++d) {
    pads[d] = (int64_t)pick(r, 4) - 1;
    pads[va.rank + d] = (int64_t)pick(r, 4) - 1;
    vr.shape[d] = va.shape[d] + pads[d] + pads[va.rank + d];
    if (vr.shape[d] < 1) { /* cropped away: no padding on this dim */
      pads[d] = pads[va.rank + d] = 0;
      vr.shape[d] = va.shape[d];
    }
  }
  if (num_elems(&vr) > MAX_ELEMS) vr = va, memset(pads, 0, sizeof pads);
  char b[96];
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.pad %s {pads = array<i64: %s>, value = %s : %s} : %s "
          "-> %s\n",
       g->names[res], g->names[a], i64_list(pads, 2 * va.rank, b),
       g->isInt ? "3" : "5.000000e-01", g->isInt ? "i32" : g->elt,
       ty(g, &va, NULL), ty(g, &vr, NULL));
}

static void gen_concat(Gen *g, Reader *r, size_t a) {
  size_t b = pick_same_shape(g, r, a);
  Val va = g->vals[a], vr = va;
  size_t axis = pick(r, (unsigned)va.rank);
  vr.shape[axis] *= 2;
  if (num_elems(&vr) > MAX_ELEMS) return;
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.concat %s, %s {axis = %zu : i64} : %s, %s -> %s\n",
       g->names[res], g->names[a], g->names[b], axis, ty(g, &va, NULL),
       ty(g, &va, NULL), ty(g, &vr, NULL));
}

static void gen_gather(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a];
  size_t axis = pick(r, (unsigned)va.rank);
  int64_t n = 1 + pick(r, 4), idx[4];
  for (int64_t i = 0; i < n; ++i) /* negative ones count from the end */
    idx[i] = (int64_t)pick(r, (unsigned)(2 * va.shape[axis])) - va.shape[axis];
  char b[64];
  const char *in = tmp_name(g);
  emit(g, "  %s = graph.constant dense<[%s]> : tensor<%lldxi64>\n", in,
       i64_list(idx, (size_t)n, b), (long long)n);
  Val vr = va;
  vr.shape[axis] = n;
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.gather %s, %s {axis = %zu : i64} : %s, "
          "tensor<%lldxi64> -> %s\n",
       g->names[res], g->names[a], in, axis, ty(g, &va, NULL), (long long)n,
       ty(g, &vr, NULL));
}

static void gen_broadcast(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a], vr;
  if (va.rank == MAX_RANK) return;
  vr.rank = va.rank + 1;
  vr.shape[0] = 2 + pick(r, 2);
  memcpy(vr.shape + 1, va.shape, va.rank * sizeof(int64_t));
  if (num_elems(&vr) > MAX_ELEMS) return;
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.broadcast %s : %s -> %s\n", g->names[res],
       g->names[a], ty(g, &va, NULL), ty(g, &vr, NULL));
}

static void gen_matmul(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a];
  if (va.rank < 2) { /* a row vector: [k] x [k, n] from a's own values */
    Val vk = {2, {va.shape[0], 1}};
    size_t col = add_val(g, vk);
    emit(g, "  %s = graph.reshape %s : %s -> %s\n", g->names[col],
         g->names[a], ty(g, &va, NULL), ty(g, &vk, NULL));
    Val vr = {1, {1}};
    size_t res = add_val(g, vr);
    emit(g, "  %s = graph.matmul %s, %s : %s, %s -> %s\n", g->names[res],
         g->names[a], g->names[col], ty(g, &va, NULL), ty(g, &vk, NULL),
         ty(g, &vr, NULL));
    return;
  }
  /* [..., m, k] x [..., m, k]^T = [..., m, m], through transpose_b or an
   * explicit transpose of a value of a's shape. */
  size_t b = pick_same_shape(g, r, a);
  Val vr = va;
  vr.shape[va.rank - 1] = va.shape[va.rank - 2];
  if (num_elems(&vr) > MAX_ELEMS) return;
  if (pick(r, 2)) {
    size_t res = add_val(g, vr);
    emit(g, "  %s = graph.matmul %s, %s {transpose_b = true} : %s, %s -> "
            "%s\n",
         g->names[res], g->names[a], g->names[b], ty(g, &va, NULL),
         ty(g, &va, NULL), ty(g, &vr, NULL));
    return;
  }
  Val vt = va;
  vt.shape[va.rank - 1] = va.shape[va.rank - 2];
  vt.shape[va.rank - 2] = va.shape[va.rank - 1];
  size_t perm[MAX_RANK];
  for (size_t i = 0; i < va.rank; ++i) perm[i] = i;
  perm[va.rank - 1] = va.rank - 2;
  perm[va.rank - 2] = va.rank - 1;
  size_t t = add_val(g, vt);
  emit(g, "  %s = graph.transpose %s {perm = array<i64: %s>} : %s -> %s\n",
       g->names[t], g->names[b], axes_str(perm, va.rank), ty(g, &va, NULL),
       ty(g, &vt, NULL));
  size_t res = add_val(g, vr);
  emit(g, "  %s = graph.matmul %s, %s : %s, %s -> %s\n", g->names[res],
       g->names[a], g->names[t], ty(g, &va, NULL), ty(g, &vt, NULL),
       ty(g, &vr, NULL));
}

/* select(mask, a, c) with c a broadcast partner of a. The mask compares
 * exact values only, so that it cannot flip between two legal
 * evaluations: for integers any partner b; for floats an argument whose
 * shape is a suffix of a's, against a constant no input equals (inputs
 * have three decimals). */
static void gen_select(Gen *g, Reader *r, size_t a) {
  static const char *const preds[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  Val va = g->vals[a];
  size_t b = a;
  if (g->isInt) {
    b = pick_broadcast_partner(g, r, a);
  } else {
    size_t cand[MAX_VALUES], n = 0;
    for (size_t i = 0; i < g->numArgs; ++i) {
      const Val *v = &g->vals[i];
      if (v->rank <= va.rank &&
          !memcmp(v->shape, va.shape + (va.rank - v->rank),
                  v->rank * sizeof(int64_t)))
        cand[n++] = i;
    }
    if (!n)
      return;
    b = cand[pick(r, (unsigned)n)];
  }
  size_t c = pick_broadcast_partner(g, r, a);
  Val vb = g->vals[b], vc = g->vals[c];
  const char *m = tmp_name(g);
  const char *pred = preds[pick(r, 6)];
  if (g->isInt) {
    emit(g, "  %s = graph.compare %s, %s, %s : %s, %s -> %s\n", m, pred,
         g->names[a], g->names[b], ty(g, &va, NULL), ty(g, &vb, NULL),
         ty(g, &va, "i1"));
  } else {
    const char *k = scalar_const(g, 0.1234 * ((int)pick(r, 9) - 4) + 0.0001);
    char T[96];
    snprintf(T, sizeof T, "%s", ty(g, &vb, NULL));
    const char *mb = tmp_name(g);
    emit(g, "  %s = graph.compare %s, %s, %s : %s, tensor<%s> -> %s\n", mb,
         pred, g->names[b], k, T, g->elt, ty(g, &vb, "i1"));
    /* The mask at a's shape. */
    if (vb.rank == va.rank)
      m = mb;
    else
      emit(g, "  %s = graph.broadcast %s : %s -> %s\n", m, mb,
           ty(g, &vb, "i1"), ty(g, &va, "i1"));
  }
  size_t res = add_val(g, va);
  emit(g, "  %s = graph.select %s, %s, %s : %s, %s, %s -> %s\n",
       g->names[res], m, g->names[a], g->names[c], ty(g, &va, "i1"),
       ty(g, &va, NULL), ty(g, &vc, NULL), ty(g, &va, NULL));
}

/* A full (non-splat) constant of a's shape added to a. */
static void gen_dense_const(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a];
  int64_t n = num_elems(&va);
  if (n > 64) return;
  FuzzBuf lits = {0};
  for (int64_t i = 0; i < n; ++i) {
    char one[40];
    int len = snprintf(one, sizeof one, "%s%s", i ? ", " : "",
                       lit(g, ((int)pick(r, 9) - 4) * (g->isInt ? 1.0 : 0.25)));
    fuzz_buf_append((FzStringRef){one, (size_t)len}, &lits);
  }
  const char *c = tmp_name(g);
  /* A flat list reshaped: the literal's nesting need not follow the shape. */
  Val flat = {1, {n}};
  const char *f = tmp_name(g);
  emit(g, "  %s = graph.constant dense<[%s]> : %s\n", f, lits.data,
       ty(g, &flat, NULL));
  emit(g, "  %s = graph.reshape %s : %s -> %s\n", c, f, ty(g, &flat, NULL),
       ty(g, &va, NULL));
  free(lits.data);
  size_t res = add_val(g, va);
  emit(g, "  %s = graph.add %s, %s : %s\n", g->names[res], g->names[a], c,
       ty(g, &va, NULL));
}

/* The primitive forms recognize-composites turns back into composites. */
static void gen_composite_form(Gen *g, Reader *r, size_t a) {
  Val va = g->vals[a];
  const char *T = ty(g, &va, NULL);
  char Tbuf[96];
  snprintf(Tbuf, sizeof Tbuf, "%s", T);
  switch (pick(r, 5)) {
  case 0: { /* softmax: exp(x - max) / sum */
    size_t axis = va.rank - 1;
    Val vk = va;
    vk.shape[axis] = 1;
    char K[96];
    snprintf(K, sizeof K, "%s", ty(g, &vk, NULL));
    const char *mx = tmp_name(g), *s = tmp_name(g), *e = tmp_name(g),
               *sm = tmp_name(g);
    emit(g, "  %s = graph.reduce_max %s {axes = array<i64: %zu>, keepdims = "
            "true} : %s -> %s\n", mx, g->names[a], axis, Tbuf, K);
    emit(g, "  %s = graph.sub %s, %s : %s, %s -> %s\n", s, g->names[a], mx,
         Tbuf, K, Tbuf);
    emit(g, "  %s = graph.exp %s : %s\n", e, s, Tbuf);
    emit(g, "  %s = graph.reduce_sum %s {axes = array<i64: %zu>, keepdims = "
            "true} : %s -> %s\n", sm, e, axis, Tbuf, K);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.div %s, %s : %s, %s -> %s\n", g->names[res], e, sm,
         Tbuf, K, Tbuf);
    break;
  }
  case 1: { /* gelu: x * 0.5 * (1 + erf(x * 0.70710678)) */
    const char *h = tmp_name(g), *k = tmp_name(g), *er = tmp_name(g),
               *e1 = tmp_name(g);
    emit_with_scalar(g, h, "mul", g->names[a], &va, 0.5);
    emit_with_scalar(g, k, "mul", g->names[a], &va, 0.70710678);
    emit(g, "  %s = graph.erf %s : %s\n", er, k, Tbuf);
    emit_with_scalar(g, e1, "add", er, &va, 1.0);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.mul %s, %s : %s\n", g->names[res], h, e1, Tbuf);
    break;
  }
  case 2: { /* silu: x * sigmoid(x) */
    const char *s = tmp_name(g);
    emit(g, "  %s = graph.sigmoid %s : %s\n", s, g->names[a], Tbuf);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.mul %s, %s : %s\n", g->names[res], g->names[a], s,
         Tbuf);
    break;
  }
  case 3: { /* layer norm: (x - mean) / sqrt(mean((x - mean)^2) + eps) */
    size_t axis = va.rank - 1;
    Val vk = va;
    vk.shape[axis] = 1;
    char K[96];
    snprintf(K, sizeof K, "%s", ty(g, &vk, NULL));
    const char *m = tmp_name(g), *d = tmp_name(g), *d2 = tmp_name(g),
               *v = tmp_name(g), *ve = tmp_name(g), *sd = tmp_name(g);
    emit(g, "  %s = graph.reduce_mean %s {axes = array<i64: %zu>, keepdims "
            "= true} : %s -> %s\n", m, g->names[a], axis, Tbuf, K);
    emit(g, "  %s = graph.sub %s, %s : %s, %s -> %s\n", d, g->names[a], m,
         Tbuf, K, Tbuf);
    emit(g, "  %s = graph.mul %s, %s : %s\n", d2, d, d, Tbuf);
    emit(g, "  %s = graph.reduce_mean %s {axes = array<i64: %zu>, keepdims "
            "= true} : %s -> %s\n", v, d2, axis, Tbuf, K);
    emit_with_scalar(g, ve, "add", v, &vk, 0.25);
    emit(g, "  %s = graph.sqrt %s : %s\n", sd, ve, K);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.div %s, %s : %s, %s -> %s\n", g->names[res], d, sd,
         Tbuf, K, Tbuf);
    break;
  }
  default: { /* weighted sum: x * c1 + y * c2 */
    size_t b = pick_broadcast_partner(g, r, a);
    Val vb = g->vals[b];
    const char *p = tmp_name(g), *q = tmp_name(g);
    emit_with_scalar(g, p, "mul", g->names[a], &va, 0.25 * (1 + pick(r, 8)));
    emit_with_scalar(g, q, "mul", g->names[b], &vb, -0.5 * (1 + pick(r, 4)));
    size_t res = add_val(g, va);
    if (vb.rank == va.rank)
      emit(g, "  %s = graph.%s %s, %s : %s\n", g->names[res],
           pick(r, 2) ? "add" : "sub", p, q, Tbuf);
    else
      emit(g, "  %s = graph.add %s, %s : %s, %s -> %s\n", g->names[res], p,
           q, Tbuf, ty(g, &vb, NULL), Tbuf);
    break;
  }
  }
}

static void gen_float_op(Gen *g, Reader *r, size_t a) {
  /* Continuous ones only (no floor/round/sign): graph-optimize may
   * legally change the last bits of an operand, which must not move a
   * result by more than the tolerance. */
  static const char *const unary[] = {"neg", "abs", "tanh", "sigmoid", "relu",
                                      "gelu", "silu", "erf", "sin", "cos",
                                      "exp", "softplus"};
  static const char *const bounded = "neg abs tanh sigmoid relu gelu silu "
                                     "erf sin cos";
  static const char *const binary[] = {"add", "sub", "mul", "max", "min"};
  static const char *const reduce[] = {"reduce_sum", "reduce_mean",
                                       "reduce_max", "reduce_min",
                                       "reduce_prod"};
  Val va = g->vals[a];
  const char *T = ty(g, &va, NULL);
  char Tbuf[96];
  snprintf(Tbuf, sizeof Tbuf, "%s", T);
  switch (pick(r, 20)) {
  case 0:
  case 1: { /* unary */
    const char *op = unary[pick(r, sizeof unary / sizeof *unary)];
    if (g->bounded && !strstr(bounded, op)) op = "tanh";
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.%s %s : %s\n", g->names[res], op, g->names[a], Tbuf);
    break;
  }
  case 2:
  case 3: { /* binary with broadcasting of a suffix-shaped operand */
    const char *op = binary[pick(r, sizeof binary / sizeof *binary)];
    size_t b = pick_broadcast_partner(g, r, a);
    emit_binary(g, op, a, b, pick(r, 2));
    break;
  }
  case 4: {
    const char *op = reduce[pick(r, sizeof reduce / sizeof *reduce)];
    if (g->bounded && !strcmp(op, "reduce_prod")) op = "reduce_mean";
    gen_reduce(g, r, a, op, false);
    break;
  }
  case 5:
    gen_transpose(g, r, a);
    break;
  case 6: { /* softmax, log_softmax, layer_norm, rms_norm */
    int which = (int)pick(r, 4);
    size_t axis = pick(r, (unsigned)va.rank);
    size_t res = add_val(g, va);
    if (which < 2) {
      emit(g, "  %s = graph.%s %s {axis = %zu : i64} : %s\n", g->names[res],
           which ? "log_softmax" : "softmax", g->names[a], axis, Tbuf);
      break;
    }
    /* A scale of x.shape[axis:], constant. */
    Val vs = {va.rank - axis, {0}};
    memcpy(vs.shape, va.shape + axis, vs.rank * sizeof(int64_t));
    const char *s = tmp_name(g);
    emit(g, "  %s = graph.constant dense<%s> : %s\n", s,
         lit(g, 0.5 + 0.25 * pick(r, 4)), ty(g, &vs, NULL));
    emit(g, "  %s = graph.%s %s, %s {axis = %zu : i64, epsilon = "
            "1.000000e-01 : f32} : %s, %s -> %s\n",
         g->names[res], which == 2 ? "layer_norm" : "rms_norm", g->names[a], s,
         axis, Tbuf, ty(g, &vs, NULL), Tbuf);
    break;
  }
  case 7: { /* clamp and the parameterized activations */
    static const char *const acts[][2] = {
        {"clamp", " {max = 1.0 : f32, min = -0.5 : f32}"},
        {"leaky_relu", " {alpha = 0.25 : f32}"},
        {"elu", " {alpha = 0.5 : f32}"},
        {"hard_sigmoid", ""},
        {"selu", ""},
        {"clamp", " {min = 0.0 : f32}"}};
    unsigned k = pick(r, sizeof acts / sizeof *acts);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.%s %s%s : %s\n", g->names[res], acts[k][0],
         g->names[a], acts[k][1], Tbuf);
    break;
  }
  case 8:
    gen_matmul(g, r, a);
    break;
  case 9: { /* a splat constant, rank-0 or full shape, combined with a */
    size_t res = add_val(g, va);
    double v = (int)pick(r, 5) - 2 + 0.5;
    if (pick(r, 2)) {
      emit_with_scalar(g, g->names[res], pick(r, 2) ? "add" : "mul",
                       g->names[a], &va, v);
    } else {
      const char *c = tmp_name(g);
      emit(g, "  %s = graph.constant dense<%s> : %s\n", c, lit(g, v), Tbuf);
      emit(g, "  %s = graph.add %s, %s : %s\n", g->names[res], g->names[a], c,
           Tbuf);
    }
    break;
  }
  case 10: { /* division by |b| + 0.5; pow by 2 or 3 */
    size_t b = pick_broadcast_partner(g, r, a);
    Val vb = g->vals[b];
    if (pick(r, 2) && !g->bounded) {
      size_t res = add_val(g, va);
      emit_with_scalar(g, g->names[res], "pow", g->names[a], &va,
                       2 + pick(r, 2));
      break;
    }
    const char *d = positive(g, b);
    size_t res = add_val(g, va);
    if (vb.rank == va.rank)
      emit(g, "  %s = graph.div %s, %s : %s\n", g->names[res], g->names[a], d,
           Tbuf);
    else
      emit(g, "  %s = graph.div %s, %s : %s, %s -> %s\n", g->names[res],
           g->names[a], d, Tbuf, ty(g, &vb, NULL), Tbuf);
    break;
  }
  case 11: { /* sqrt, rsqrt, log, reciprocal of |a| + 0.5 */
    static const char *const pos[] = {"sqrt", "rsqrt", "log", "reciprocal"};
    const char *p = positive(g, a);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.%s %s : %s\n", g->names[res], pos[pick(r, 4)], p,
         Tbuf);
    break;
  }
  case 12:
    gen_reshape(g, r, a);
    break;
  case 13:
    switch (pick(r, 3)) {
    case 0: gen_concat(g, r, a); break;
    case 1: gen_slice(g, r, a); break;
    default: gen_pad(g, r, a); break;
    }
    break;
  case 14:
    if (pick(r, 2)) gen_gather(g, r, a);
    else gen_broadcast(g, r, a);
    break;
  case 15:
    gen_select(g, r, a);
    break;
  case 16: { /* a cast through another float type and back */
    static const char *const via[] = {"f16", "bf16", "f32", "f64"};
    const char *v = via[pick(r, 4)];
    if (!strcmp(v, g->elt)) v = "f64";
    const char *c = tmp_name(g);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.cast %s : %s -> %s\n", c, g->names[a], Tbuf,
         ty(g, &va, v));
    emit(g, "  %s = graph.cast %s : %s -> %s\n", g->names[res], c,
         ty(g, &va, v), Tbuf);
    break;
  }
  case 17: { /* weighted_sum written directly */
    size_t b = pick_broadcast_partner(g, r, a);
    Val vb = g->vals[b];
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.weighted_sum %s, %s {coeffs = array<f64: %s, %s>} "
            ": %s, %s -> %s\n",
         g->names[res], g->names[a], g->names[b],
         lit(g, 0.25 * ((int)pick(r, 9) - 4)),
         lit(g, 0.5 * ((int)pick(r, 5) - 2)), Tbuf, ty(g, &vb, NULL), Tbuf);
    break;
  }
  case 18:
    gen_dense_const(g, r, a);
    break;
  default:
    gen_composite_form(g, r, a);
    break;
  }
}

static void gen_int_op(Gen *g, Reader *r, size_t a) {
  static const char *const unary[] = {"neg", "abs", "relu", "sign"};
  static const char *const binary[] = {"add", "sub", "mul", "max", "min"};
  static const char *const reduce[] = {"reduce_sum", "reduce_max",
                                       "reduce_min"};
  Val va = g->vals[a];
  char Tbuf[96];
  snprintf(Tbuf, sizeof Tbuf, "%s", ty(g, &va, NULL));
  switch (pick(r, 14)) {
  case 0: {
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.%s %s : %s\n", g->names[res], unary[pick(r, 4)],
         g->names[a], Tbuf);
    break;
  }
  case 1:
  case 2:
    emit_binary(g, binary[pick(r, 5)], a, pick_broadcast_partner(g, r, a),
                pick(r, 2));
    break;
  case 3:
    gen_reduce(g, r, a, reduce[pick(r, 3)], false);
    break;
  case 4:
    gen_transpose(g, r, a);
    break;
  case 5:
    gen_reshape(g, r, a);
    break;
  case 6:
    gen_matmul(g, r, a);
    break;
  case 7:
    gen_select(g, r, a);
    break;
  case 8: {
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.clamp %s {max = 3.0 : f32, min = -2.0 : f32} : "
            "%s\n", g->names[res], g->names[a], Tbuf);
    break;
  }
  case 9: gen_concat(g, r, a); break;
  case 10: gen_slice(g, r, a); break;
  case 11: gen_pad(g, r, a); break;
  case 12:
    if (pick(r, 2)) gen_gather(g, r, a);
    else gen_broadcast(g, r, a);
    break;
  default:
    gen_dense_const(g, r, a);
    break;
  }
}

/* Builds the whole program text into *out (a NUL-terminated string). */
static void gen_program(Reader *r, FuzzBuf *out, Gen *g) {
  static const DType dts[] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F64,
                              DT_F16, DT_BF16, DT_I32};
  g->dt = dts[pick(r, sizeof dts / sizeof *dts)];
  g->elt = kDTypeName[g->dt];
  g->isInt = g->dt == DT_I32;
  g->bounded = g->dt == DT_F16;
  Val base = {1 + pick(r, MAX_RANK), {0}};
  for (size_t i = 0; i < base.rank; ++i) base.shape[i] = 1 + pick(r, 4);
  g->numArgs = 1 + pick(r, 3);
  for (size_t i = 0; i < g->numArgs; ++i) {
    Val v = base;
    if (i > 0 && base.rank > 1 && pick(r, 2)) { /* a suffix-shaped input */
      size_t drop = 1 + pick(r, (unsigned)base.rank - 1);
      v.rank = base.rank - drop;
      memmove(v.shape, base.shape + drop, v.rank * sizeof(int64_t));
    }
    g->vals[g->numVals] = v;
    snprintf(g->names[g->numVals], sizeof g->names[0], "%%arg%zu", i);
    g->numVals++;
  }
  unsigned numOps = 1 + pick(r, 12);
  for (unsigned i = 0; i < numOps && g->numVals + 4 < MAX_VALUES; ++i) {
    size_t a = pick(r, (unsigned)g->numVals);
    if (g->isInt)
      gen_int_op(g, r, a);
    else
      gen_float_op(g, r, a);
  }
  /* Results: the last value, and sometimes another one. */
  size_t res[2] = {g->numVals - 1, 0};
  size_t numRes = 1;
  if (pick(r, 2) && g->numVals > 1) res[numRes++] = pick(r, (unsigned)g->numVals - 1);
  FuzzBuf *o = out;
  char line[512];
  int n = snprintf(line, sizeof line, "func.func @main(");
  fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  for (size_t i = 0; i < g->numArgs; ++i) {
    n = snprintf(line, sizeof line, "%s%%arg%zu: %s", i ? ", " : "", i,
                 ty(g, &g->vals[i], NULL));
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR(") -> ("), o);
  for (size_t i = 0; i < numRes; ++i) {
    n = snprintf(line, sizeof line, "%s%s", i ? ", " : "",
                 ty(g, &g->vals[res[i]], NULL));
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR(") {\n"), o);
  fuzz_buf_append(fuzz_buf_ref(&g->body), o);
  fuzz_buf_append(FZ_STR("  return "), o);
  for (size_t i = 0; i < numRes; ++i) {
    n = snprintf(line, sizeof line, "%s%s", i ? ", " : "", g->names[res[i]]);
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR(" : "), o);
  for (size_t i = 0; i < numRes; ++i) {
    n = snprintf(line, sizeof line, "%s%s", i ? ", " : "",
                 ty(g, &g->vals[res[i]], NULL));
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR("\n}\n"), o);
}

static FzOp *find_main(FzOp *module) {
  FzOp *f = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (!f) abort();
  return f;
}

static bool close_enough(DType dt, double a, double b) {
  static const double tol[][2] = {
      [DT_F32] = {1e-4, 1e-3}, [DT_F64] = {1e-4, 1e-3},
      [DT_F16] = {2e-2, 2e-2}, [DT_BF16] = {8e-2, 8e-2}, [DT_I32] = {0, 0}};
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol[dt][0] + tol[dt][1] * fabs(b);
}

static void compare(DType dt, const char *what, const char *program, size_t n,
                    FzTensor **got, FzTensor **want) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i]->numElements != want[i]->numElements) abort();
    for (int64_t k = 0; k < want[i]->numElements; ++k) {
      double a = fzTensorGetF64(got[i], k), b = fzTensorGetF64(want[i], k);
      if (!close_enough(dt, a, b)) {
        fprintf(stderr, "%s: result %zu element %lld: got %.9g, want %.9g\n",
                what, i, (long long)k, a, b);
        fuzz_fail(what, fzStringRefFromCString(program), FZ_STR(""));
      }
    }
  }
}

static FzType *dtype_type(FzContext *ctx, DType dt) {
  switch (dt) {
  case DT_F64: return fzF64TypeGet(ctx);
  case DT_F16: return fzF16TypeGet(ctx);
  case DT_BF16: return fzBF16TypeGet(ctx);
  case DT_I32: return fzIntegerTypeGet(ctx, 32);
  default: return fzF32TypeGet(ctx);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader r = {data, size, 0};
  Gen g;
  memset(&g, 0, sizeof g);
  FuzzBuf text = {0};
  unsigned seed = 1 + pick(&r, 255);
  gen_program(&r, &text, &g);

  if (getenv("FZ_FUZZ_DUMP")) /* the program, for minimizing a crash */
    fprintf(stderr, "%s", text.data);
  FzContext *ctx = fuzz_context_create();
  FzOp *module = fzParseSource(ctx, fuzz_buf_ref(&text), FZ_STR("diff.fuse"), 0);
  if (!module || !fzOpVerify(module)) {
    /* Show why: a context with the default diagnostic printer. */
    FzContext *loud = fzContextCreate();
    if (loud && fzRegisterAllDialects(loud)) {
      FzOp *again = fzParseSource(loud, fuzz_buf_ref(&text),
                                  FZ_STR("diff.fuse"), 0);
      if (again) (void)fzOpVerify(again);
    }
    fuzz_fail("generated program does not parse or verify",
              fuzz_buf_ref(&text), FZ_STR(""));
  }

  /* Inputs: pseudo-random in [-2, 2], integers in [-4, 4] (a small LCG;
   * deterministic). */
  FzTensor *inputs[MAX_RANK + 1] = {0};
  FzType *elt = dtype_type(ctx, g.dt);
  for (size_t i = 0; i < g.numArgs; ++i) {
    inputs[i] = fzTensorCreate(ctx, elt, g.vals[i].rank, g.vals[i].shape);
    if (!inputs[i]) abort();
    for (int64_t k = 0; k < inputs[i]->numElements; ++k) {
      seed = seed * 1103515245u + 12345u;
      if (g.isInt)
        fzTensorSetI64(inputs[i], k, (int64_t)((seed >> 8) % 9) - 4);
      else
        fzTensorSetF64(inputs[i], k, ((seed >> 8) % 4001) / 1000.0 - 2.0);
    }
  }

  size_t nWant = 0, nGot = 0;
  FzTensor **want = NULL, **got = NULL;
  if (!fzInterpretFunction(find_main(module), g.numArgs, inputs, NULL, &nWant,
                           &want))
    fuzz_fail("interpreter fails on a valid program", fuzz_buf_ref(&text),
              FZ_STR(""));

  /* graph-optimize on a clone, then the interpreter again. */
  FzOp *opt = fzOpClone(module, NULL);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!opt || !pm) abort();
  if (!fzPassManagerParsePipeline(pm, FZ_STR("graph-optimize")) ||
      !fzPassManagerRun(pm, opt))
    fuzz_fail("graph-optimize fails on a valid program", fuzz_buf_ref(&text),
              FZ_STR(""));
  if (!fzInterpretFunction(find_main(opt), g.numArgs, inputs, NULL, &nGot, &got))
    fuzz_fail("interpreter fails after graph-optimize", fuzz_buf_ref(&text),
              FZ_STR(""));
  if (nGot != nWant) abort();
  compare(g.dt, "graph-optimize changed the results", text.data, nWant, got,
          want);
  fzTensorArrayDestroy(ctx, nGot, got);
  fzPassManagerDestroy(pm);
  fzOpDestroy(opt);

  /* The CPU backend against the interpreter. */
  const char *cpuEnv = getenv("FZ_FUZZ_DIFF_CPU");
  if (!cpuEnv || strcmp(cpuEnv, "0") != 0) {
    const char *strict = getenv("FZ_FUZZ_DIFF_STRICT");
    FzCpuRuntime *rt = fzCpuRuntimeCreate(ctx, 1);
    if (!rt) abort();
    FzCpuExecutable *exe = fzCpuExecutableCreate(rt, module, NULL);
    if (!exe) {
      if (strict && strcmp(strict, "1") == 0)
        fuzz_fail("CPU backend cannot compile a valid program",
                  fuzz_buf_ref(&text), FZ_STR(""));
    } else {
      FzCpuFunction *f = fzCpuExecutableLookup(exe, FZ_STR("main"));
      if (!f) abort();
      if (!fzCpuFunctionRun(f, g.numArgs, inputs, &nGot, &got))
        fuzz_fail("CPU backend fails to run a valid program",
                  fuzz_buf_ref(&text), FZ_STR(""));
      if (nGot != nWant) abort();
      compare(g.dt, "CPU backend differs from the interpreter", text.data,
              nWant, got, want);
      fzTensorArrayDestroy(ctx, nGot, got);
      fzCpuExecutableDestroy(exe);
    }
    fzCpuRuntimeDestroy(rt);
  }

  fzTensorArrayDestroy(ctx, nWant, want);
  for (size_t i = 0; i < g.numArgs; ++i) fzTensorDestroy(inputs[i]);
  fzOpDestroy(module);
  fzContextDestroy(ctx);
  free(text.data);
  free(g.body.data);
  return 0;
}
