/* tests/unit/test_npy.c - Check suite of the .npy reader and writer:
 * round trips of every dtype, Fortran order, big-endian data, header
 * versions 2 and 3, and malformed input (bad magic, bad versions,
 * truncated headers and data, missing keys, unsupported dtypes, trailing
 * bytes, absurd shapes), plus every truncation and single-byte corruption
 * of a valid file: an error or a tensor, never a crash.
 */
#include <unistd.h>

#include "fz/graph.h"
#include "tests/unit/test_helpers.h"

static FzContext *npy_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  return ctx;
}

/* Builds a .npy file from a header dict and raw data (version 1 unless
 * major says otherwise). The caller frees the buffer. */
static unsigned char *make_npy(const char *dict, const void *data,
                               size_t dataLen, unsigned major, size_t *len) {
  size_t dl = strlen(dict);
  size_t pre = major == 1 ? 10 : 12;
  size_t hlen = dl + 1;
  unsigned char *b = malloc(pre + hlen + dataLen);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major;
  b[7] = 0;
  b[8] = (unsigned char)(hlen & 0xff);
  b[9] = (unsigned char)(hlen >> 8);
  if (major != 1) {
    b[10] = 0;
    b[11] = 0;
  }
  memcpy(b + pre, dict, dl);
  b[pre + dl] = '\n';
  if (dataLen)
    memcpy(b + pre + hlen, data, dataLen);
  *len = pre + hlen + dataLen;
  return b;
}

START_TEST(test_roundtrip_every_dtype) {
  FzContext *ctx = npy_context();
  FzType *dtypes[] = {fzF16TypeGet(ctx),         fzBF16TypeGet(ctx),
                      fzF32TypeGet(ctx),         fzF64TypeGet(ctx),
                      fzIntegerTypeGet(ctx, 1),  fzIntegerTypeGet(ctx, 8),
                      fzIntegerTypeGet(ctx, 16), fzIntegerTypeGet(ctx, 32),
                      fzIntegerTypeGet(ctx, 64)};
  int64_t shape[3] = {2, 3, 4};
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; ++d)
    for (size_t rank = 0; rank <= 3; ++rank) {
      FzTensor *t = fzTensorCreate(ctx, dtypes[d], rank, shape);
      ck_assert_ptr_nonnull(t);
      for (int64_t i = 0; i < t->numElements; ++i)
        fzTensorSetF64(t, i, (double)(i % 7) - 3.25 * (i % 2));
      TextBuf buf = {0};
      fzNpySerialize(t, text_cb, &buf);
      ck_assert_uint_eq((buf.len - fzTensorGetNumBytes(t)) % 64, 0);
      FzTensor *r = fzNpyReadBuffer(ctx, buf.data, buf.len, "rt.npy");
      ck_assert_ptr_nonnull(r);
      ck_assert_ptr_eq(r->dtype, t->dtype);
      ck_assert_uint_eq(r->rank, rank);
      for (size_t k = 0; k < rank; ++k)
        ck_assert_int_eq(r->shape[k], shape[k]);
      ck_assert_mem_eq(r->data, t->data, fzTensorGetNumBytes(t));
      fzTensorDestroy(r);
      fzTensorDestroy(t);
      text_free(&buf);
    }
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_layouts) {
  FzContext *ctx = npy_context();
  /* Fortran order: column-major 2x3 holding C-order 0..5. */
  int32_t fdata[6] = {0, 3, 1, 4, 2, 5};
  size_t len;
  unsigned char *b =
      make_npy("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
               fdata, sizeof fdata, 1, &len);
  FzTensor *t = fzNpyReadBuffer(ctx, b, len, "f.npy");
  ck_assert_ptr_nonnull(t);
  for (int i = 0; i < 6; ++i)
    ck_assert_int_eq(fzTensorGetI64(t, i), i);
  fzTensorDestroy(t);
  free(b);
  /* Big-endian floats, version 2 header, keys in another order. */
  unsigned char be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0}; /* 1, -2.5 */
  b = make_npy("{\"shape\": (2,), \"fortran_order\": False, \"descr\": "
               "\">f4\"}",
               be, sizeof be, 2, &len);
  t = fzNpyReadBuffer(ctx, b, len, "be.npy");
  ck_assert_ptr_nonnull(t);
  ck_assert(fzTensorGetF64(t, 0) == 1.0 && fzTensorGetF64(t, 1) == -2.5);
  fzTensorDestroy(t);
  free(b);
  /* Version 3, bool with non-0/1 bytes (normalized), bf16 as void. */
  unsigned char bools[3] = {0, 1, 7};
  b = make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", bools,
               3, 3, &len);
  t = fzNpyReadBuffer(ctx, b, len, "b.npy");
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(fzTensorGetI64(t, 2), 1);
  fzTensorDestroy(t);
  free(b);
  uint16_t bf[2] = {0x3f80, 0xc000};
  b = make_npy("{'descr': '|V2', 'fortran_order': False, 'shape': (2,)}", bf,
               sizeof bf, 1, &len);
  t = fzNpyReadBuffer(ctx, b, len, "bf.npy");
  ck_assert_ptr_nonnull(t);
  ck_assert_ptr_eq(t->dtype, fzBF16TypeGet(ctx));
  ck_assert(fzTensorGetF64(t, 0) == 1.0 && fzTensorGetF64(t, 1) == -2.0);
  fzTensorDestroy(t);
  free(b);
  /* Zero-size arrays and Python 2 longs. */
  b = make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (0L, 3L)}",
               NULL, 0, 1, &len);
  t = fzNpyReadBuffer(ctx, b, len, "z.npy");
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(t->numElements, 0);
  fzTensorDestroy(t);
  free(b);
  fzContextDestroy(ctx);
}
END_TEST

typedef struct Malformed {
  const char *dict; /* NULL: use `raw` */
  const char *raw;
  size_t rawLen;
  size_t dataLen;
  unsigned major;
  const char *message;
} Malformed;

START_TEST(test_malformed) {
  static const Malformed cases[] = {
      {NULL, "hello world, not numpy", 22, 0, 1, "missing the \\x93NUMPY"},
      {NULL, "\x93NUMPY", 6, 0, 1, "missing the \\x93NUMPY"},
      {NULL, "\x93NUMPY\x09\x00\x10\x00{}", 12, 0, 1, "format version 9"},
      {NULL, "\x93NUMPY\x01\x00\xff\x00{'descr'", 18, 0, 1, "truncated header"},
      {"{'descr': '<f4', 'fortran_order': False}", NULL, 0, 0, 1,
       "missing 'shape'"},
      {"{'descr': '<f4', 'shape': (2,)}", NULL, 0, 8, 1,
       "missing 'fortran_order'"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (2,)}", NULL, 0, 4, 1,
       "unsigned integers are not supported"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}", NULL, 0, 16,
       1, "unsupported dtype '<c8'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", NULL,
       0, 8, 1, "structured dtypes are not supported"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", NULL, 0, 8, 1,
       "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", NULL, 0, 8,
       1, "expected a non-negative integer in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", NULL, 0, 8,
       1, "expected a non-negative integer in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", NULL,
       0, 8, 1, "unknown key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", NULL, 0, 8, 1,
       "truncated data: 12 bytes expected, 8 present"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", NULL, 0, 9, 1,
       "1 unexpected bytes after the data"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999, 99999999999)}",
       NULL, 0, 8, 1, "shape is too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999999999999,)}",
       NULL, 0, 8, 1, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,"
       "1,1,1,1,1,1,1,1)}",
       NULL, 0, 4, 1, "rank above the maximum"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", NULL, 0, 8, 1,
       "unsupported dtype '<f4, '"},
  };
  FzContext *ctx = npy_context();
  unsigned char zeros[64] = {0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const Malformed *c = &cases[i];
    size_t len;
    unsigned char *b = NULL;
    if (c->dict) {
      b = make_npy(c->dict, zeros, c->dataLen, c->major, &len);
    } else {
      b = malloc(c->rawLen);
      memcpy(b, c->raw, c->rawLen);
      len = c->rawLen;
    }
    DiagLog log;
    diag_log_begin(&log, ctx);
    FzTensor *t = fzNpyReadBuffer(ctx, b, len, "bad.npy");
    ck_assert_msg(t == NULL, "case %zu was accepted", i);
    ck_assert_uint_eq(log.numErrors, 1);
    ck_assert_diag(&log, c->message);
    ck_assert_diag(&log, "bad.npy: ");
    diag_log_end(&log);
    free(b);
  }
  fzContextDestroy(ctx);
}
END_TEST

static bool swallow(const FzDiagnostic *d, void *ud) {
  (void)d;
  (*(size_t *)ud)++;
  return true;
}

START_TEST(test_truncations_and_corruptions) {
  FzContext *ctx = npy_context();
  int64_t shape[2] = {3, 5};
  FzTensor *t = fzTensorCreate(ctx, fzF64TypeGet(ctx), 2, shape);
  for (int64_t i = 0; i < t->numElements; ++i)
    fzTensorSetF64(t, i, (double)i);
  TextBuf buf = {0};
  fzNpySerialize(t, text_cb, &buf);
  size_t errors = 0;
  FzDiagHandlerId h = fzContextPushDiagHandler(ctx, swallow, &errors);
  /* Every proper prefix is an error. */
  for (size_t n = 0; n < buf.len; ++n) {
    size_t before = errors;
    FzTensor *r = fzNpyReadBuffer(ctx, buf.data, n, "cut.npy");
    ck_assert_msg(r == NULL, "prefix of %zu bytes accepted", n);
    ck_assert_uint_eq(errors, before + 1);
  }
  /* Every byte of the header replaced by a few values: a tensor or one
   * error, never a crash (the sanitizer build checks the memory). */
  static const unsigned char values[] = {0,   ' ',  '\'', '(', ')', ',',
                                         '9', 0xff, '}',  '{', ':', 'T'};
  char *copy = malloc(buf.len);
  for (size_t k = 0; k < 128 && k < buf.len; ++k)
    for (size_t v = 0; v < sizeof values; ++v) {
      memcpy(copy, buf.data, buf.len);
      copy[k] = (char)values[v];
      size_t before = errors;
      FzTensor *r = fzNpyReadBuffer(ctx, copy, buf.len, "flip.npy");
      if (r)
        fzTensorDestroy(r);
      else
        ck_assert_uint_eq(errors, before + 1);
    }
  free(copy);
  fzContextPopDiagHandler(ctx, h);
  text_free(&buf);
  fzTensorDestroy(t);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_write_file) {
  FzContext *ctx = npy_context();
  char dir[] = "/tmp/fz-npy-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/t.npy", dir);
  int64_t shape[1] = {4};
  FzTensor *t = fzTensorCreate(ctx, fzIntegerTypeGet(ctx, 16), 1, shape);
  for (int i = 0; i < 4; ++i)
    fzTensorSetI64(t, i, -i * 1000);
  ck_assert(fzNpyWriteFile(t, path));
  FzTensor *r = fzNpyReadFile(ctx, path);
  ck_assert_ptr_nonnull(r);
  ck_assert_mem_eq(r->data, t->data, 8);
  fzTensorDestroy(r);
  unlink(path);
  /* A missing directory: an error, and nothing left behind. */
  snprintf(path, sizeof path, "%s/missing/t.npy", dir);
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzNpyWriteFile(t, path));
  ck_assert_diag(&log, "cannot create a temporary file");
  ck_assert_ptr_null(fzNpyReadFile(ctx, path));
  ck_assert_diag(&log, "cannot open");
  diag_log_end(&log);
  ck_assert_int_eq(rmdir(dir), 0); /* empty: no temporary file left */
  fzTensorDestroy(t);
  fzContextDestroy(ctx);
}
END_TEST

static Suite *npy_suite(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_roundtrip_every_dtype);
  tcase_add_test(tc, test_layouts);
  tcase_add_test(tc, test_malformed);
  tcase_add_test(tc, test_truncations_and_corruptions);
  tcase_add_test(tc, test_write_file);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(npy_suite());
}
