/* fuzz_diff.c - differential libFuzzer target: graph-optimize and the CPU
 * backend against the reference interpreter.
 *
 * The input bytes drive a small grammar that always yields a valid graph
 * program (f32 tensors of rank 1-3, dims 1-4): unary elementwise ops,
 * binary ops with equal or suffix-broadcast shapes, reductions over one
 * axis, transpose, softmax, clamp/leaky_relu, matmul of a matrix with its
 * transpose, and splat constants. The function returns one or two
 * values. Inputs are pseudo-random values in [-2, 2] from a seed byte.
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
 * Tolerance: |a - b| <= 1e-4 + 1e-3 * |b|; NaN matches NaN, an infinity
 * the same infinity. The ops are chosen continuous so that legal
 * reassociation stays within it.
 */
#include <math.h>

#include "fuzz/fuzz_common.h"

#define MAX_VALUES 24
#define MAX_RANK 3

typedef struct Reader {
  const uint8_t *data;
  size_t size, pos;
} Reader;

/* The next byte modulo n (0 once the input is exhausted). */
static unsigned pick(Reader *r, unsigned n) {
  if (r->pos >= r->size || n == 0) return 0;
  return r->data[r->pos++] % n;
}

typedef struct Val {
  size_t rank;
  int64_t shape[MAX_RANK];
} Val;

typedef struct Gen {
  FuzzBuf body;
  Val vals[MAX_VALUES];
  char names[MAX_VALUES][16];
  size_t numVals, numArgs, nextSsa;
} Gen;

static void emit(Gen *g, const char *fmt, ...) FZ_PRINTF(2, 3);
static void emit(Gen *g, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) abort();
  fuzz_buf_append((FzStringRef){tmp, (size_t)n}, &g->body);
}

static const char *type_str(const Val *v, char *out) {
  char *p = out + sprintf(out, "tensor<");
  for (size_t i = 0; i < v->rank; ++i)
    p += sprintf(p, "%lldx", (long long)v->shape[i]);
  sprintf(p, "f32>");
  return out;
}

/* Records a new SSA value of shape v; returns its index. */
static size_t add_val(Gen *g, Val v) {
  size_t i = g->numVals++;
  g->vals[i] = v;
  snprintf(g->names[i], sizeof g->names[i], "%%%zu", g->nextSsa++);
  return i;
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

static void gen_op(Gen *g, Reader *r) {
  static const char *unary[] = {"neg", "abs", "tanh", "sigmoid", "relu",
                                "gelu", "silu", "erf", "exp", "sin", "cos"};
  static const char *binary[] = {"add", "sub", "mul", "max", "min"};
  static const char *reduce[] = {"reduce_sum", "reduce_max", "reduce_mean",
                                 "reduce_min"};
  char ta[64], tb[64], tr[64];
  size_t a = pick(r, (unsigned)g->numVals);
  Val va = g->vals[a];
  switch (pick(r, 8)) {
  case 0: { /* unary */
    const char *op = unary[pick(r, sizeof unary / sizeof *unary)];
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.%s %s : %s\n", g->names[res], op, g->names[a],
         type_str(&va, ta));
    break;
  }
  case 1: { /* binary with broadcasting of a suffix-shaped operand */
    const char *op = binary[pick(r, sizeof binary / sizeof *binary)];
    size_t b = pick_broadcast_partner(g, r, a);
    Val vb = g->vals[b];
    bool swap = pick(r, 2);
    size_t res = add_val(g, va);
    if (vb.rank == va.rank)
      emit(g, "  %s = graph.%s %s, %s : %s\n", g->names[res], op,
           g->names[swap ? b : a], g->names[swap ? a : b], type_str(&va, ta));
    else
      emit(g, "  %s = graph.%s %s, %s : %s, %s -> %s\n", g->names[res], op,
           g->names[swap ? b : a], g->names[swap ? a : b],
           type_str(swap ? &vb : &va, ta), type_str(swap ? &va : &vb, tb),
           type_str(&va, tr));
    break;
  }
  case 2: { /* reduction over one axis */
    const char *op = reduce[pick(r, sizeof reduce / sizeof *reduce)];
    size_t axis = pick(r, (unsigned)va.rank);
    bool keep = va.rank == 1 || pick(r, 2);
    Val vr = va;
    if (keep) {
      vr.shape[axis] = 1;
    } else {
      memmove(vr.shape + axis, vr.shape + axis + 1,
              (vr.rank - axis - 1) * sizeof(int64_t));
      vr.rank--;
    }
    size_t res = add_val(g, vr);
    emit(g, "  %s = graph.%s %s {axes = array<i64: %zu>%s} : %s -> %s\n",
         g->names[res], op, g->names[a], axis,
         keep ? ", keepdims = true" : "", type_str(&va, ta),
         type_str(&vr, tr));
    break;
  }
  case 3: { /* transpose: a rotation or a swap of two dims */
    if (va.rank < 2) goto unary_fallback;
    size_t perm[MAX_RANK];
    unsigned rot = 1 + pick(r, (unsigned)va.rank - 1);
    for (size_t i = 0; i < va.rank; ++i) perm[i] = (i + rot) % va.rank;
    Val vr = va;
    for (size_t i = 0; i < va.rank; ++i) vr.shape[i] = va.shape[perm[i]];
    size_t res = add_val(g, vr);
    char ps[64], *p = ps;
    for (size_t i = 0; i < va.rank; ++i)
      p += sprintf(p, "%s%zu", i ? ", " : "", perm[i]);
    emit(g, "  %s = graph.transpose %s {perm = array<i64: %s>} : %s -> %s\n",
         g->names[res], g->names[a], ps, type_str(&va, ta), type_str(&vr, tr));
    break;
  }
  case 4: { /* softmax */
    size_t axis = pick(r, (unsigned)va.rank);
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.softmax %s {axis = %zu : i64} : %s\n", g->names[res],
         g->names[a], axis, type_str(&va, ta));
    break;
  }
  case 5: { /* clamp or leaky_relu */
    size_t res = add_val(g, va);
    if (pick(r, 2))
      emit(g, "  %s = graph.clamp %s {max = %d.0 : f32, min = -%d.0 : f32} : %s\n",
           g->names[res], g->names[a], 1 + (int)pick(r, 3), (int)pick(r, 3),
           type_str(&va, ta));
    else
      emit(g, "  %s = graph.leaky_relu %s {alpha = 0.25 : f32} : %s\n",
           g->names[res], g->names[a], type_str(&va, ta));
    break;
  }
  case 6: { /* matmul of a 2-D value with its transpose: [m,k] x [k,m] */
    if (va.rank != 2) goto unary_fallback;
    Val vt = {2, {va.shape[1], va.shape[0]}};
    size_t t = add_val(g, vt);
    emit(g, "  %s = graph.transpose %s {perm = array<i64: 1, 0>} : %s -> %s\n",
         g->names[t], g->names[a], type_str(&va, ta), type_str(&vt, tb));
    Val vr = {2, {va.shape[0], va.shape[0]}};
    size_t res = add_val(g, vr);
    emit(g, "  %s = graph.matmul %s, %s : %s, %s -> %s\n", g->names[res],
         g->names[a], g->names[t], type_str(&va, ta), type_str(&vt, tb),
         type_str(&vr, tr));
    break;
  }
  default: { /* a splat constant added to a */
    size_t c = add_val(g, va);
    emit(g, "  %s = graph.constant dense<%d.5> : %s\n", g->names[c],
         (int)pick(r, 5) - 2, type_str(&va, ta));
    size_t res = add_val(g, va);
    emit(g, "  %s = graph.add %s, %s : %s\n", g->names[res], g->names[a],
         g->names[c], type_str(&va, ta));
    break;
  }
  }
  return;
unary_fallback: {
  size_t res = add_val(g, va);
  emit(g, "  %s = graph.tanh %s : %s\n", g->names[res], g->names[a],
       type_str(&va, ta));
}
}

/* Builds the whole program text into *out (a NUL-terminated string). */
static void gen_program(Reader *r, FuzzBuf *out, Gen *g) {
  Val base = {1 + pick(r, MAX_RANK), {0}};
  for (size_t i = 0; i < base.rank; ++i) base.shape[i] = 1 + pick(r, 4);
  g->numArgs = 1 + pick(r, 3);
  char t[64];
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
  unsigned numOps = 1 + pick(r, 10);
  for (unsigned i = 0; i < numOps && g->numVals + 2 < MAX_VALUES; ++i)
    gen_op(g, r);
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
                 type_str(&g->vals[i], t));
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR(") -> ("), o);
  for (size_t i = 0; i < numRes; ++i) {
    n = snprintf(line, sizeof line, "%s%s", i ? ", " : "",
                 type_str(&g->vals[res[i]], t));
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
                 type_str(&g->vals[res[i]], t));
    fuzz_buf_append((FzStringRef){line, (size_t)n}, o);
  }
  fuzz_buf_append(FZ_STR("\n}\n"), o);
}

static FzOp *find_main(FzOp *module) {
  FzOp *f = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (!f) abort();
  return f;
}

static bool close_enough(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= 1e-4 + 1e-3 * fabs(b);
}

static void compare(const char *what, const char *program, size_t n,
                    FzTensor **got, FzTensor **want) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i]->numElements != want[i]->numElements) abort();
    for (int64_t k = 0; k < want[i]->numElements; ++k) {
      double a = fzTensorGetF64(got[i], k), b = fzTensorGetF64(want[i], k);
      if (!close_enough(a, b)) {
        fprintf(stderr, "%s: result %zu element %lld: got %.9g, want %.9g\n",
                what, i, (long long)k, a, b);
        fuzz_fail(what, fzStringRefFromCString(program), FZ_STR(""));
      }
    }
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
  if (!module || !fzOpVerify(module))
    fuzz_fail("generated program does not parse or verify",
              fuzz_buf_ref(&text), FZ_STR(""));

  /* Inputs: pseudo-random in [-2, 2] (a small LCG; deterministic). */
  FzTensor *inputs[MAX_RANK + 1] = {0};
  FzType *f32 = fzF32TypeGet(ctx);
  for (size_t i = 0; i < g.numArgs; ++i) {
    inputs[i] = fzTensorCreate(ctx, f32, g.vals[i].rank, g.vals[i].shape);
    if (!inputs[i]) abort();
    for (int64_t k = 0; k < inputs[i]->numElements; ++k) {
      seed = seed * 1103515245u + 12345u;
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
  compare("graph-optimize changed the results", text.data, nWant, got, want);
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
      compare("CPU backend differs from the interpreter", text.data, nWant,
              got, want);
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
