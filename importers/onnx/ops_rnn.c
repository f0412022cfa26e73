/* importers/onnx/ops_rnn.c - ONNX RNN, GRU and LSTM, unrolled over their
 * static sequence length into graph ops.
 *
 * Per direction, the input projection of every step is one graph.matmul
 * (X [seq, batch, input] by W^T, plus Wb); each step then slices its rows,
 * adds H_{t-1} R^T + Rb (a matmul per step: the recurrence), applies the
 * gates' activations and updates the state, exactly as the ONNX
 * definitions write the equations (gate orders: LSTM i, o, f, c; GRU z, r,
 * h; peepholes P i, o, f). `clip` clamps every gate's pre-activation;
 * LSTM's input_forget couples the forget gate to 1 - i; GRU's
 * linear_before_reset applies the reset gate after R_h's product.
 *
 * sequence_lens (any values, constant or not): at step t, batch entry b
 * takes the new state only when t < len[b] (a select), and its output row
 * is zero otherwise, so the reverse direction starts each sequence at its
 * own last step and Y_h holds each sequence's last valid state, as ONNX
 * Runtime computes them. layout = 1 (version 14) puts the batch first in
 * X, Y, Y_h and Y_c (transposes around the same code).
 *
 * Activations: Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu,
 * ScaledTanh, HardSigmoid, Elu, Softsign, Softplus, with
 * activation_alpha/beta consumed in order by the activations that take
 * them (defaults as the ONNX ops of those names).
 *
 * Unrolling makes the graph grow with the sequence: at most
 * RNN_MAX_STEPS steps per direction, else an `unsupported` error.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

#define RNN_MAX_STEPS 4096
#define MAX_ACTS 6 /* 3 per direction */

typedef enum Kind { K_RNN, K_GRU, K_LSTM } Kind;

typedef struct Act {
  const char *name;
  double alpha, beta;
} Act;

typedef struct Rnn {
  Kind kind;
  int64_t hidden, seq, batch, input, numDir, gates;
  double clip; /* 0: none */
  bool inputForget, linearBeforeReset;
  Act acts[MAX_ACTS];
  FzType *elt;
  FzValue *lens; /* [batch] i64, or NULL */
} Rnn;

/*===--- Activations -----------------------------------------------------===*/

static FzValue *scalar(FzOnnxImporter *im, FzValue *like, double v) {
  return fzOnnxConstScalar(im, fzOnnxElt(like), v);
}

static FzValue *apply(FzOnnxImporter *im, const Act *a, FzValue *x) {
  const char *n = a->name;
  if (!strcmp(n, "Sigmoid"))
    return fzOnnxUnary(im, "graph.sigmoid", x);
  if (!strcmp(n, "Tanh"))
    return fzOnnxUnary(im, "graph.tanh", x);
  if (!strcmp(n, "Relu"))
    return fzOnnxUnary(im, "graph.relu", x);
  if (!strcmp(n, "Softsign"))
    return fzOnnxBinary(
        im, "graph.div", x,
        fzOnnxBinary(im, "graph.add", scalar(im, x, 1),
                     fzOnnxUnary(im, "graph.abs", x)));
  if (!strcmp(n, "Softplus"))
    return fzOnnxUnary(im, "graph.softplus", x);
  if (!strcmp(n, "Affine"))
    return fzOnnxBinary(
        im, "graph.add",
        fzOnnxBinary(im, "graph.mul", x, scalar(im, x, a->alpha)),
        scalar(im, x, a->beta));
  if (!strcmp(n, "ScaledTanh"))
    return fzOnnxBinary(
        im, "graph.mul", scalar(im, x, a->alpha),
        fzOnnxUnary(im, "graph.tanh",
                    fzOnnxBinary(im, "graph.mul", x,
                                 scalar(im, x, a->beta))));
  if (!strcmp(n, "ThresholdedRelu"))
    return fzOnnxSelect(im, fzOnnxCompare(im, "gt", x, scalar(im, x, a->alpha)),
                        x, scalar(im, x, 0));
  FzAttr *alpha = fzOnnxFloatAttr(im, a->alpha);
  if (!strcmp(n, "LeakyRelu"))
    return fzOnnxEmit(im, "graph.leaky_relu", 1, &x, NULL, "alpha", alpha,
                      NULL);
  if (!strcmp(n, "Elu"))
    return fzOnnxEmit(im, "graph.elu", 1, &x, NULL, "alpha", alpha, NULL);
  /* HardSigmoid (read_acts admits nothing else). */
  return fzOnnxEmit(im, "graph.hard_sigmoid", 1, &x, NULL, "alpha", alpha,
                    "beta", fzOnnxFloatAttr(im, a->beta), NULL);
}

/* The activation named n: its default alpha and beta, and how many of
 * activation_alpha (*na) and activation_beta (*nb) it takes. */
static bool act_defaults(const char *n, double *alpha, double *beta, int *na,
                         int *nb) {
  static const struct {
    const char *name;
    double alpha, beta;
    int na, nb;
  } kActs[] = {
      {"Sigmoid", 0, 0, 0, 0},         {"Tanh", 0, 0, 0, 0},
      {"Relu", 0, 0, 0, 0},            {"Softsign", 0, 0, 0, 0},
      {"Softplus", 0, 0, 0, 0},        {"Affine", 1, 0, 1, 1},
      {"LeakyRelu", 0.01, 0, 1, 0},    {"ThresholdedRelu", 1, 0, 1, 0},
      {"ScaledTanh", 1, 1, 1, 1},      {"HardSigmoid", 0.2, 0.5, 1, 1},
      {"Elu", 1, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof kActs / sizeof kActs[0]; ++i)
    if (!strcmp(kActs[i].name, n)) {
      *alpha = kActs[i].alpha;
      *beta = kActs[i].beta;
      *na = kActs[i].na;
      *nb = kActs[i].nb;
      return true;
    }
  return false;
}

/* Reads `activations` (per direction: perDir names, the defaults when
 * absent) and their alphas and betas. */
static bool read_acts(FzOnnxImporter *im, Rnn *R) {
  static const char *const kDefault[3][3] = {
      {"Tanh", NULL, NULL},
      {"Sigmoid", "Tanh", NULL},
      {"Sigmoid", "Tanh", "Tanh"},
  };
  size_t perDir = R->kind == K_RNN ? 1 : R->kind == K_GRU ? 2 : 3;
  size_t want = perDir * (size_t)R->numDir;
  const Onnx__AttributeProto *a = fzOnnxAttr(im, "activations");
  double *al = NULL, *be = NULL;
  size_t nal = 0, nbe = 0, ial = 0, ibe = 0;
  bool pa, pb;
  if (!fzOnnxAttrFloats(im, "activation_alpha", &al, &nal, &pa) ||
      !fzOnnxAttrFloats(im, "activation_beta", &be, &nbe, &pb))
    return false;
  if (a && a->n_strings != want)
    return fzOnnxError(im, "attribute 'activations' has %zu entries; %s "
                           "with %lld direction%s takes %zu",
                       a->n_strings, im->node->op_type,
                       (long long)R->numDir, R->numDir > 1 ? "s" : "", want);
  for (size_t i = 0; i < want; ++i) {
    Act *x = &R->acts[i];
    if (a) {
      const ProtobufCBinaryData *s = &a->strings[i];
      char *n = fzOnnxAlloc(im, s->len + 1);
      if (!n)
        return false;
      if (s->len)
        memcpy(n, s->data, s->len);
      n[s->len] = '\0';
      x->name = n;
    } else {
      x->name = kDefault[perDir - 1][i % perDir];
    }
    int na, nb;
    if (!act_defaults(x->name, &x->alpha, &x->beta, &na, &nb))
      return fzOnnxErrorAttrValue(im, "activations", x->name);
    if (na && ial < nal)
      x->alpha = al[ial++];
    if (nb && ibe < nbe)
      x->beta = be[ibe++];
  }
  return true;
}

/*===--- Building blocks -------------------------------------------------===*/

/* Rows [from, from + n) of dim `axis` of x (rank r). */
static FzValue *take(FzOnnxImporter *im, FzValue *x, size_t axis,
                     int64_t from, int64_t n) {
  size_t r = fzOnnxRank(x);
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK],
          strides[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0; d < r; ++d) {
    limits[d] = fzOnnxDim(x, d);
    strides[d] = 1;
  }
  starts[axis] = from;
  limits[axis] = from + n;
  return fzOnnxSlice(im, x, starts, limits, strides);
}

/* Direction dir's [rows, cols] matrix of a [numDir, rows, cols] weight. */
static FzValue *of_dir(FzOnnxImporter *im, FzValue *w, int64_t dir) {
  if (!w)
    return NULL;
  FzValue *s = take(im, w, 0, dir, 1);
  int64_t shape[2] = {fzOnnxDim(w, 1), fzOnnxDim(w, 2)};
  return fzOnnxReshape(im, s, 2, shape);
}

/* x @ w^T for x [m, k], w [n, k]. */
static FzValue *mul_t(FzOnnxImporter *im, FzValue *x, FzValue *w) {
  FzValue *ops[2] = {x, w};
  return fzOnnxEmit(im, "graph.matmul", 2, ops, NULL, "transpose_a",
                    fzBoolAttrGet(im->ctx, false), "transpose_b",
                    fzBoolAttrGet(im->ctx, true), NULL);
}

static FzValue *clip(FzOnnxImporter *im, const Rnn *R, FzValue *x) {
  if (R->clip <= 0)
    return x;
  return fzOnnxEmit(im, "graph.clamp", 1, &x, NULL, "min",
                    fzOnnxFloatAttr(im, -R->clip), "max",
                    fzOnnxFloatAttr(im, R->clip), NULL);
}

/* Gate g ([batch, hidden]) of a [batch, gates * hidden] pre-activation. */
static FzValue *gate(FzOnnxImporter *im, const Rnn *R, FzValue *pre,
                     int64_t g) {
  return take(im, pre, 1, g * R->hidden, R->hidden);
}

static FzValue *add3(FzOnnxImporter *im, FzValue *a, FzValue *b, FzValue *c) {
  FzValue *s = b ? fzOnnxBinary(im, "graph.add", a, b) : a;
  return c ? fzOnnxBinary(im, "graph.add", s, c) : s;
}

/*===--- One direction -----------------------------------------------------===*/

typedef struct DirOut {
  FzValue *y; /* [seq, 1, batch, hidden] */
  FzValue *h, *c; /* [1, batch, hidden] */
} DirOut;

/* Runs direction dir (reverse when `reverse`) over x [seq, batch, input]. */
static bool run_dir(FzOnnxImporter *im, const Rnn *R, FzValue *const *in,
                    size_t nIn, FzValue *x, int64_t dir, bool reverse,
                    DirOut *o) {
  int64_t H = R->hidden, G = R->gates, B = R->batch;
  const Act *act = &R->acts[dir * (R->kind == K_RNN ? 1 : R->kind == K_GRU
                                                          ? 2
                                                          : 3)];
  FzValue *W = of_dir(im, in[1], dir), *Rm = of_dir(im, in[2], dir);
  FzValue *bias = nIn > 3 && in[3] ? in[3] : NULL, *Wb = NULL, *Rb = NULL;
  if (bias) {
    int64_t bs[1] = {2 * G * H};
    FzValue *bd = fzOnnxReshape(im, take(im, bias, 0, dir, 1), 1, bs);
    Wb = take(im, bd, 0, 0, G * H);
    Rb = take(im, bd, 0, G * H, G * H);
  }
  /* The input projection of every step: [seq * batch, G*H]. */
  int64_t flat[2] = {R->seq * B, R->input};
  FzValue *xw = add3(im, mul_t(im, fzOnnxReshape(im, x, 2, flat), W), Wb,
                     NULL);
  size_t hIdx = 5, cIdx = 6, pIdx = 7; /* initial_h, initial_c, P */
  FzValue *h = NULL, *c = NULL;
  int64_t bh[2] = {B, H}, one[3] = {1, B, H};
  if (nIn > hIdx && in[hIdx])
    h = fzOnnxReshape(im, take(im, in[hIdx], 0, dir, 1), 2, bh);
  else
    h = fzOnnxConstSplat(im, R->elt, 2, bh, 0);
  if (R->kind == K_LSTM)
    c = nIn > cIdx && in[cIdx]
            ? fzOnnxReshape(im, take(im, in[cIdx], 0, dir, 1), 2, bh)
            : fzOnnxConstSplat(im, R->elt, 2, bh, 0);
  FzValue *pi = NULL, *po = NULL, *pf = NULL;
  if (R->kind == K_LSTM && nIn > pIdx && in[pIdx]) {
    int64_t ps[1] = {3 * H};
    FzValue *p = fzOnnxReshape(im, take(im, in[pIdx], 0, dir, 1), 1, ps);
    pi = take(im, p, 0, 0, H);
    po = take(im, p, 0, H, H);
    pf = take(im, p, 0, 2 * H, H);
  }
  FzValue **ys = fzOnnxAlloc(im, (size_t)R->seq * sizeof *ys);
  if (!ys || !h || (R->kind == K_LSTM && !c))
    return false;
  FzValue *rzrh = NULL, *rbz = NULL;
  if (R->kind == K_GRU) {
    /* R_h and Rb_h alone (linear_before_reset needs them apart). */
    rzrh = take(im, Rm, 0, 0, 2 * H);
    rbz = Rb ? take(im, Rb, 0, 0, 2 * H) : NULL;
  }
  for (int64_t s = 0; s < R->seq; ++s) {
    int64_t t = reverse ? R->seq - 1 - s : s;
    FzValue *xt = take(im, xw, 0, t * B, B); /* [batch, G*H] */
    FzValue *hn = NULL, *cn = NULL;
    if (R->kind == K_RNN) {
      FzValue *pre = add3(im, xt, mul_t(im, h, Rm), Rb);
      hn = apply(im, &act[0], clip(im, R, pre));
    } else if (R->kind == K_GRU) {
      FzValue *xzr = take(im, xt, 1, 0, 2 * H), *xh = take(im, xt, 1, 2 * H, H);
      FzValue *zr = add3(im, xzr, mul_t(im, h, rzrh), rbz);
      FzValue *z = apply(im, &act[0], clip(im, R, gate(im, R, zr, 0)));
      FzValue *r = apply(im, &act[0], clip(im, R, gate(im, R, zr, 1)));
      FzValue *Rh = take(im, Rm, 0, 2 * H, H);
      FzValue *rbh = Rb ? take(im, Rb, 0, 2 * H, H) : NULL;
      FzValue *hh;
      if (R->linearBeforeReset)
        hh = fzOnnxBinary(im, "graph.add", xh,
                          fzOnnxBinary(im, "graph.mul", r,
                                       add3(im, mul_t(im, h, Rh), rbh, NULL)));
      else
        hh = add3(im, xh,
                  mul_t(im, fzOnnxBinary(im, "graph.mul", r, h), Rh), rbh);
      FzValue *cand = apply(im, &act[1], clip(im, R, hh));
      /* (1 - z) * cand + z * h */
      FzValue *oneMinus = fzOnnxBinary(im, "graph.sub", scalar(im, z, 1), z);
      hn = fzOnnxBinary(im, "graph.add",
                        fzOnnxBinary(im, "graph.mul", oneMinus, cand),
                        fzOnnxBinary(im, "graph.mul", z, h));
    } else {
      FzValue *pre = add3(im, xt, mul_t(im, h, Rm), Rb);
      FzValue *gi = gate(im, R, pre, 0), *go = gate(im, R, pre, 1),
              *gf = gate(im, R, pre, 2), *gc = gate(im, R, pre, 3);
      if (pi)
        gi = fzOnnxBinary(im, "graph.add", gi,
                          fzOnnxBinary(im, "graph.mul", pi, c));
      if (pf)
        gf = fzOnnxBinary(im, "graph.add", gf,
                          fzOnnxBinary(im, "graph.mul", pf, c));
      FzValue *i = apply(im, &act[0], clip(im, R, gi));
      FzValue *f = R->inputForget
                       ? fzOnnxBinary(im, "graph.sub", scalar(im, i, 1), i)
                       : apply(im, &act[0], clip(im, R, gf));
      FzValue *cc = apply(im, &act[1], clip(im, R, gc));
      cn = fzOnnxBinary(im, "graph.add", fzOnnxBinary(im, "graph.mul", f, c),
                        fzOnnxBinary(im, "graph.mul", i, cc));
      if (po)
        go = fzOnnxBinary(im, "graph.add", go,
                          fzOnnxBinary(im, "graph.mul", po, cn));
      FzValue *ot = apply(im, &act[0], clip(im, R, go));
      hn = fzOnnxBinary(im, "graph.mul", ot, apply(im, &act[2], cn));
    }
    FzValue *yt = hn;
    if (R->lens) {
      /* Entry b steps only while t < len[b]; its output row is 0 after. */
      int64_t b1[2] = {B, 1};
      FzValue *valid = fzOnnxReshape(
          im,
          fzOnnxCompare(im, "gt", R->lens,
                        fzOnnxConstScalar(im, fzIntegerTypeGet(im->ctx, 64),
                                          (double)t)),
          2, b1);
      yt = fzOnnxSelect(im, valid, hn, scalar(im, hn, 0));
      hn = fzOnnxSelect(im, valid, hn, h);
      if (cn)
        cn = fzOnnxSelect(im, valid, cn, c);
    }
    int64_t ys4[4] = {1, 1, B, H};
    ys[t] = fzOnnxReshape(im, yt, 4, ys4);
    h = hn;
    c = cn ? cn : c;
    if (!h || !ys[t] || im->nodeFailed)
      return false;
  }
  o->y = R->seq == 1 ? ys[0]
                     : fzOnnxEmit(im, "graph.concat", (size_t)R->seq, ys, NULL,
                                  "axis",
                                  fzIntegerAttrGet(im->ctx,
                                                   fzIntegerTypeGet(im->ctx,
                                                                    64),
                                                   0),
                                  NULL);
  o->h = fzOnnxReshape(im, h, 3, one);
  o->c = c ? fzOnnxReshape(im, c, 3, one) : NULL;
  return o->y && o->h;
}

/*===--- The handler -------------------------------------------------------===*/

static FzValue *concat2(FzOnnxImporter *im, FzValue *a, FzValue *b,
                        int64_t axis) {
  if (!b)
    return a;
  FzValue *ops[2] = {a, b};
  return fzOnnxEmit(im, "graph.concat", 2, ops, NULL, "axis",
                    fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                     axis),
                    NULL);
}

static bool h_rnn(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  Rnn R;
  memset(&R, 0, sizeof R);
  const char *op = im->node->op_type;
  R.kind = !strcmp(op, "LSTM") ? K_LSTM : !strcmp(op, "GRU") ? K_GRU : K_RNN;
  R.gates = R.kind == K_LSTM ? 4 : R.kind == K_GRU ? 3 : 1;
  const char *direction;
  int64_t layout, inputForget, lbr;
  if (!fzOnnxAttrInt(im, "hidden_size", 0, &R.hidden) ||
      !fzOnnxAttrString(im, "direction", "forward", &direction) ||
      !fzOnnxAttrFloat(im, "clip", 0, &R.clip) ||
      !fzOnnxAttrInt(im, "layout", 0, &layout) ||
      !fzOnnxAttrInt(im, "input_forget", 0, &inputForget) ||
      !fzOnnxAttrInt(im, "linear_before_reset", 0, &lbr))
    return false;
  R.inputForget = inputForget != 0;
  R.linearBeforeReset = lbr != 0;
  bool fwd = !strcmp(direction, "forward"), rev = !strcmp(direction, "reverse"),
       bi = !strcmp(direction, "bidirectional");
  if (!fwd && !rev && !bi)
    return fzOnnxErrorAttrValue(im, "direction", direction);
  R.numDir = bi ? 2 : 1;
  if (fzOnnxAttr(im, "clip") && !(R.clip > 0))
    return fzOnnxError(im, "attribute 'clip' must be positive, got %g",
                       R.clip);
  if (layout != 0 && layout != 1)
    return fzOnnxError(im, "attribute 'layout' must be 0 or 1, got %lld",
                       (long long)layout);
  FzValue *x = in[0], *W = in[1], *Rm = in[2];
  for (size_t i = 0; i < 3; ++i)
    if (!fzOnnxRequireStatic(im, in[i], i == 0 ? "X" : i == 1 ? "W" : "R"))
      return false;
  if (fzOnnxRank(x) != 3 || fzOnnxRank(W) != 3 || fzOnnxRank(Rm) != 3)
    return fzOnnxError(im, "X, W and R must have rank 3");
  if (layout)
    x = fzOnnxTranspose(im, x, 3, (const int64_t[]){1, 0, 2});
  if (!x)
    return false;
  R.seq = fzOnnxDim(x, 0);
  R.batch = fzOnnxDim(x, 1);
  R.input = fzOnnxDim(x, 2);
  R.elt = fzOnnxElt(x);
  if (!fzTypeIsFloat(R.elt))
    return fzOnnxError(im, "X must be a float tensor");
  if (!fzOnnxAttr(im, "hidden_size"))
    R.hidden = fzOnnxDim(Rm, 2);
  if (R.hidden < 1 || R.hidden > FZ_MAX_DIM)
    return fzOnnxError(im, "attribute 'hidden_size' must be in [1, 2^40], "
                           "got %lld", (long long)R.hidden);
  int64_t H = R.hidden, G = R.gates;
  if (H < 1 || fzOnnxDim(W, 0) != R.numDir || fzOnnxDim(W, 1) != G * H ||
      fzOnnxDim(W, 2) != R.input || fzOnnxDim(Rm, 0) != R.numDir ||
      fzOnnxDim(Rm, 1) != G * H || fzOnnxDim(Rm, 2) != H)
    return fzOnnxError(im, "W must be [%lld, %lld, %lld] and R [%lld, %lld, "
                           "%lld] (directions, %lld gates x hidden_size %lld, "
                           "input or hidden size)",
                       (long long)R.numDir, (long long)(G * H),
                       (long long)R.input, (long long)R.numDir,
                       (long long)(G * H), (long long)H, (long long)G,
                       (long long)H);
  if (R.seq > RNN_MAX_STEPS)
    return fzOnnxError(im, "unsupported sequence length %lld: recurrent ops "
                           "are unrolled, up to %d steps",
                       (long long)R.seq, RNN_MAX_STEPS);
  if (R.seq < 1 || R.batch < 1)
    return fzOnnxError(im, "unsupported empty sequence or batch");
  /* Optional inputs: their shapes. */
  int64_t wantB[2] = {R.numDir, 2 * G * H};
  if (nIn > 3 && in[3] &&
      (fzOnnxRank(in[3]) != 2 || fzOnnxDim(in[3], 0) != wantB[0] ||
       fzOnnxDim(in[3], 1) != wantB[1]))
    return fzOnnxError(im, "B must be [%lld, %lld]", (long long)wantB[0],
                       (long long)wantB[1]);
  if (nIn > 4 && in[4]) {
    if (fzOnnxRank(in[4]) != 1 || fzOnnxDim(in[4], 0) != R.batch)
      return fzOnnxError(im, "sequence_lens must be [%lld]",
                         (long long)R.batch);
    R.lens = fzOnnxCast(im, in[4], fzIntegerTypeGet(im->ctx, 64));
  }
  FzValue *states[3] = {nIn > 5 ? in[5] : NULL, nIn > 6 ? in[6] : NULL,
                        NULL};
  for (size_t k = 0; k < 2; ++k) {
    FzValue *st = states[k];
    if (!st)
      continue;
    if (layout)
      st = fzOnnxTranspose(im, st, 3, (const int64_t[]){1, 0, 2});
    if (!st || fzOnnxRank(st) != 3 || fzOnnxDim(st, 0) != R.numDir ||
        fzOnnxDim(st, 1) != R.batch || fzOnnxDim(st, 2) != H)
      return fzOnnxError(im, "initial_%s must hold [directions, batch, "
                             "hidden] = [%lld, %lld, %lld] (batch first "
                             "with layout 1)",
                         k ? "c" : "h", (long long)R.numDir,
                         (long long)R.batch, (long long)H);
    states[k] = st;
  }
  if (R.kind == K_LSTM && nIn > 7 && in[7] &&
      (fzOnnxRank(in[7]) != 2 || fzOnnxDim(in[7], 0) != R.numDir ||
       fzOnnxDim(in[7], 1) != 3 * H))
    return fzOnnxError(im, "P must be [%lld, %lld]", (long long)R.numDir,
                       (long long)(3 * H));
  if (!read_acts(im, &R))
    return false;
  /* The inputs as run_dir reads them (states in seq-first layout). */
  FzValue *args[8] = {x, W, Rm, NULL, NULL, NULL, NULL, NULL};
  for (size_t i = 3; i < nIn && i < 8; ++i)
    args[i] = in[i];
  args[5] = states[0];
  args[6] = R.kind == K_LSTM ? states[1] : NULL;
  DirOut d0, d1;
  memset(&d1, 0, sizeof d1);
  if (!run_dir(im, &R, args, 8, x, 0, rev, &d0) ||
      (bi && !run_dir(im, &R, args, 8, x, 1, true, &d1)))
    return false;
  FzValue *y = concat2(im, d0.y, d1.y, 1);      /* [seq, dir, batch, H] */
  FzValue *yh = concat2(im, d0.h, d1.h, 0);     /* [dir, batch, H] */
  FzValue *yc = d0.c ? concat2(im, d0.c, d1.c, 0) : NULL;
  if (layout) {
    y = fzOnnxTranspose(im, y, 4, (const int64_t[]){2, 0, 1, 3});
    yh = fzOnnxTranspose(im, yh, 3, (const int64_t[]){1, 0, 2});
    yc = yc ? fzOnnxTranspose(im, yc, 3, (const int64_t[]){1, 0, 2}) : NULL;
  }
  out[0] = y;
  if (nOut > 1)
    out[1] = yh;
  if (nOut > 2)
    out[2] = yc;
  return y && yh && (R.kind != K_LSTM || yc);
}

const FzOnnxOpDef fzOnnxRnnOps[] = {
    {"RNN", h_rnn, NULL,
     "activation_alpha activation_beta activations clip direction "
     "hidden_size layout>=14 output_sequence<7",
     3, 6, 2},
    {"GRU", h_rnn, NULL,
     "activation_alpha activation_beta activations clip direction "
     "hidden_size layout>=14 linear_before_reset>=3 output_sequence<7",
     3, 6, 2},
    {"LSTM", h_rnn, NULL,
     "activation_alpha activation_beta activations clip direction "
     "hidden_size input_forget layout>=14 output_sequence<7",
     3, 8, 3},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
