/* tools/fuse_run_io.c - fuse-run's tensors in and out: seeded random
 * inputs, printing, writing .npy outputs all-or-nothing, and comparing
 * with expected .npy files.
 *
 * The random generator is splitmix64, so a seed gives the same inputs on
 * every machine. Numbers print in the shortest form that reads back to
 * the same value of the tensor's dtype.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fz/onnx.h" /* .pb tensors (TensorProto) */
#include "tools/fuse_run_internal.h"

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double uniform(uint64_t *state) {
  return (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

bool fuseRunRandomInputs(FzContext *ctx, FzType *ft, size_t nIn,
                         unsigned long long seed, FzTensor ***out,
                         size_t *n) {
  FzTensor **ts = calloc(nIn ? nIn : 1, sizeof *ts);
  char buf[160];
  if (!ts) {
    fprintf(stderr, "fuse-run: error: out of memory\n");
    return false;
  }
  for (size_t i = 0; i < nIn; ++i) {
    FzType *t = fzFunctionTypeGetInput(ft, i);
    FzType *elt = fzTypeIsShaped(t) ? fzShapedTypeGetElementType(t) : NULL;
    /* A lowered function's inputs are identity-layout buffers. */
    bool ok = (fzTypeGetKind(t) == FZ_TYPE_TENSOR ||
               (fzTypeGetKind(t) == FZ_TYPE_BUFFER &&
                !fzBufferTypeGetStrides(t))) &&
              fzShapedTypeHasStaticShape(t) && fzTensorDTypeIsSupported(elt);
    if (!ok) {
      FILE *m = fmemopen(buf, sizeof buf, "w");
      if (m) {
        fzTypeDump(t, m);
        fclose(m);
      }
      fprintf(stderr,
              "fuse-run: error: argument #%zu (%%arg%zu) has type %s: "
              "random inputs need a statically shaped tensor of a "
              "supported dtype (give --input files instead, or "
              "--input-shape for a symbolic dim of an ONNX model)\n",
              i, i, m ? buf : "?");
      for (size_t k = 0; k < i; ++k)
        fzTensorDestroy(ts[k]);
      free(ts);
      return false;
    }
    ts[i] = fzTensorCreate(ctx, elt, fzShapedTypeGetRank(t),
                           fzShapedTypeGetShape(t));
    if (!ts[i]) {
      for (size_t k = 0; k < i; ++k)
        fzTensorDestroy(ts[k]);
      free(ts);
      return false;
    }
    uint64_t state = seed * 0x100000001b3ULL + i * 0x9e3779b97f4a7c15ULL;
    bool isInt = fzTypeIsInteger(elt);
    unsigned w = fzTypeGetBitWidth(elt);
    for (int64_t k = 0; k < ts[i]->numElements; ++k) {
      double u = uniform(&state);
      bool neg = splitmix64(&state) & 1;
      if (isInt && w == 1)
        fzTensorSetI64(ts[i], k, neg);
      else if (isInt)
        fzTensorSetI64(ts[i], k, (neg ? -1 : 1) * (1 + (int64_t)(u * 4)));
      else
        fzTensorSetF64(ts[i], k, (neg ? -1 : 1) * (0.125 + u * 1.875));
    }
  }
  *out = ts;
  *n = nIn;
  return true;
}

/*===--- Printing -------------------------------------------------------===*/

/* The shortest %g form of v that reads back to the same dtype value. */
static void format_value(char *buf, size_t cap, const FzTensor *t, int64_t i) {
  if (fzTypeIsInteger(t->dtype)) {
    int64_t v = fzTensorGetI64(t, i);
    if (fzTypeGetBitWidth(t->dtype) == 1)
      snprintf(buf, cap, "%s", v ? "true" : "false");
    else
      snprintf(buf, cap, "%lld", (long long)v);
    return;
  }
  double v = fzTensorGetF64(t, i);
  if (isnan(v)) {
    snprintf(buf, cap, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, cap, v < 0 ? "-inf" : "inf");
    return;
  }
  if (v == floor(v) && fabs(v) < 1e16) {
    snprintf(buf, cap, "%.0f", v); /* integral: no exponent */
    return;
  }
  for (int p = 1; p <= 17; ++p) {
    snprintf(buf, cap, "%.*g", p, v);
    if (fzRoundToFloatType(t->dtype, strtod(buf, NULL)) == v)
      return;
  }
}

static void print_nested(FILE *f, const FzTensor *t, size_t d, int64_t *i) {
  char buf[64];
  if (d == t->rank) {
    format_value(buf, sizeof buf, t, (*i)++);
    fputs(buf, f);
    return;
  }
  fputc('[', f);
  for (int64_t k = 0; k < t->shape[d]; ++k) {
    if (k)
      fputs(", ", f);
    print_nested(f, t, d + 1, i);
  }
  fputc(']', f);
}

void fuseRunPrintTensor(FILE *f, const char *name, const FzTensor *t,
                        int64_t limit) {
  FzType *type = fzTensorGetType(t);
  fprintf(f, "%s: ", name);
  if (type)
    fzTypeDump(type, f);
  fputc('\n', f);
  int64_t n = t->numElements;
  if (limit < 0 || n <= limit) {
    int64_t i = 0;
    print_nested(f, t, 0, &i);
    fputc('\n', f);
    return;
  }
  /* A flat summary: the first and last limit / 2 elements. */
  char buf[64];
  int64_t half = limit / 2 > 0 ? limit / 2 : 1;
  fputc('[', f);
  for (int64_t i = 0; i < n; ++i) {
    if (i == half && n - half > i) {
      fputs(", ...", f);
      i = n - half;
    }
    if (i)
      fputs(", ", f);
    format_value(buf, sizeof buf, t, i);
    fputs(buf, f);
  }
  fprintf(f, "] (flattened; %lld elements)\n", (long long)n);
}

/*===--- Writing --------------------------------------------------------===*/

static void file_put(FzStringRef chunk, void *ud) {
  FILE *f = ud;
  if (chunk.length)
    fwrite(chunk.data, 1, chunk.length, f);
}

bool fuseRunWriteAll(FzContext *ctx, const char *dir, const char *prefix,
                     size_t n, FzTensor *const *tensors) {
  (void)ctx;
  char **tmp = calloc(n ? n : 1, sizeof *tmp);
  char **final = calloc(n ? n : 1, sizeof *final);
  bool ok = tmp && final;
  for (size_t i = 0; ok && i < n; ++i) {
    size_t len = strlen(dir) + strlen(prefix) + 64;
    final[i] = malloc(len);
    tmp[i] = malloc(len + 16);
    if (!final[i] || !tmp[i]) {
      ok = false;
      break;
    }
    snprintf(final[i], len, "%s/%s_%zu.npy", dir, prefix, i);
    snprintf(tmp[i], len + 16, "%s.tmp.XXXXXX", final[i]);
    int fd = mkstemp(tmp[i]);
    if (fd < 0) {
      fprintf(stderr, "fuse-run: error: cannot create '%s': %s\n", tmp[i],
              strerror(errno));
      free(tmp[i]);
      tmp[i] = NULL;
      ok = false;
      break;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
      close(fd);
      ok = false;
    } else {
      fzNpySerialize(tensors[i], file_put, f);
      bool bad = ferror(f) != 0;
      if (fclose(f) != 0 || bad)
        ok = false;
    }
    if (!ok)
      fprintf(stderr, "fuse-run: error: cannot write '%s': %s\n", final[i],
              strerror(errno));
  }
  for (size_t i = 0; ok && i < n; ++i) {
    if (chmod(tmp[i], 0644) != 0 || rename(tmp[i], final[i]) != 0) {
      fprintf(stderr, "fuse-run: error: cannot create '%s': %s\n", final[i],
              strerror(errno));
      ok = false;
    } else {
      free(tmp[i]);
      tmp[i] = NULL;
    }
  }
  /* Temporaries left (after a failure) are removed; a rename that
   * failed midway leaves the outputs renamed before it (rename itself is
   * atomic, so no file is ever partial). */
  for (size_t i = 0; i < n && tmp && final; ++i) {
    if (tmp[i]) {
      unlink(tmp[i]);
      free(tmp[i]);
    }
    free(final[i]);
  }
  free(tmp);
  free(final);
  return ok;
}

/*===--- Comparing ------------------------------------------------------===*/

static void format_index(char *buf, size_t cap, const FzTensor *t, int64_t i) {
  size_t len = 0;
  int64_t idx[FZ_GRAPH_MAX_RANK];
  for (size_t d = t->rank; d-- > 0;) {
    idx[d] = t->shape[d] ? i % t->shape[d] : 0;
    i = t->shape[d] ? i / t->shape[d] : 0;
  }
  len += (size_t)snprintf(buf + len, cap - len, "[");
  for (size_t d = 0; d < t->rank && len < cap; ++d)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "",
                            (long long)idx[d]);
  if (len < cap)
    snprintf(buf + len, cap - len, "]");
}

FzTensor *fuseRunReadTensorUint16(FzContext *ctx, const char *path,
                                  bool *uint16) {
  size_t n = strlen(path);
  *uint16 = false;
  if (n >= 3 && !strcmp(path + n - 3, ".pb")) {
    int32_t dataType;
    FzTensor *t = fzOnnxReadTensorFileWithDataType(ctx, path, &dataType);
    *uint16 = dataType == 4; /* TensorProto.UINT16 */
    return t;
  }
  return fzNpyReadFile(ctx, path);
}

FzTensor *fuseRunReadTensor(FzContext *ctx, const char *path) {
  bool uint16;
  return fuseRunReadTensorUint16(ctx, path, &uint16);
}

static bool same_shape(const FzTensor *a, const FzTensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank)
    return false;
  for (size_t d = 0; d < a->rank; ++d)
    if (a->shape[d] != b->shape[d])
      return false;
  return true;
}

int fuseRunCompare(FzContext *ctx, FILE *f, const char *dir, size_t n,
                   FzTensor *const *outputs, double rtol, double atol) {
  int status = 0;
  for (size_t i = 0; i < n; ++i) {
    char path[4096], bg[160], be[160];
    snprintf(path, sizeof path, "%s/output_%zu.npy", dir, i);
    /* An ONNX test's folder holds output_N.pb instead. */
    if (access(path, F_OK) != 0) {
      char pb[4096];
      snprintf(pb, sizeof pb, "%s/output_%zu.pb", dir, i);
      if (access(pb, F_OK) == 0)
        memcpy(path, pb, sizeof pb);
    }
    FzTensor *e = fuseRunReadTensor(ctx, path);
    if (!e) {
      status = 1;
      continue;
    }
    const FzTensor *g = outputs[i];
    if (!same_shape(g, e)) {
      FzType *tg = fzTensorGetType(g), *te = fzTensorGetType(e);
      FILE *m1 = fmemopen(bg, sizeof bg, "w"),
           *m2 = fmemopen(be, sizeof be, "w");
      if (m1) {
        fzTypeDump(tg, m1);
        fclose(m1);
      }
      if (m2) {
        fzTypeDump(te, m2);
        fclose(m2);
      }
      fprintf(f, "output_%zu: MISMATCH: got %s but %s holds %s\n", i,
              m1 ? bg : "?", path, m2 ? be : "?");
      fzTensorDestroy(e);
      status = 1;
      continue;
    }
    double maxAbs = 0, maxRel = 0;
    int64_t bad = 0, firstBad = -1;
    for (int64_t k = 0; k < g->numElements; ++k) {
      double a = fzTensorGetF64(g, k), b = fzTensorGetF64(e, k);
      if (isnan(a) || isnan(b)) {
        if (!(isnan(a) && isnan(b)) && bad++ == 0)
          firstBad = k;
        continue;
      }
      if (a == b)
        continue;
      double diff = fabs(a - b);
      if (isnan(diff)) /* inf - inf of the same sign was caught above */
        diff = HUGE_VAL;
      if (diff > maxAbs)
        maxAbs = diff;
      if (b != 0 && diff / fabs(b) > maxRel)
        maxRel = diff / fabs(b);
      if (!(diff <= atol + rtol * fabs(b)) && bad++ == 0)
        firstBad = k;
    }
    fprintf(f, "output_%zu: max abs error %.3g, max rel error %.3g", i, maxAbs,
            maxRel);
    if (bad) {
      char ib[128], vg[64], ve[64];
      format_index(ib, sizeof ib, g, firstBad);
      snprintf(vg, sizeof vg, "%.9g", fzTensorGetF64(g, firstBad));
      snprintf(ve, sizeof ve, "%.9g", fzTensorGetF64(e, firstBad));
      fprintf(f,
              ": MISMATCH (%lld of %lld elements beyond atol %g + rtol "
              "%g * |expected|; first at %s: got %s, expected %s)\n",
              (long long)bad, (long long)g->numElements, atol, rtol, ib, vg,
              ve);
      status = 1;
    } else {
      fprintf(f, ": ok\n");
    }
    fzTensorDestroy(e);
  }
  /* An expected output the function does not produce is a mismatch. */
  char extra[4096];
  snprintf(extra, sizeof extra, "%s/output_%zu.npy", dir, n);
  if (access(extra, F_OK) == 0) {
    fprintf(f, "MISMATCH: %s exists but the function returns %zu value%s\n",
            extra, n, n == 1 ? "" : "s");
    status = 1;
  }
  return status;
}
