/* tests/unit/test_onnx_tensor.c - the ONNX TensorProto reader on hostile
 * input: it must refuse, with a diagnostic, to allocate what the bytes
 * cannot hold. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fz/graph.h"
#include "fz/onnx.h"

static bool count_errors(const FzDiagnostic *d, void *ud) {
  if (fzDiagnosticGetSeverity(d) == FZ_SEVERITY_ERROR) {
    FzStringRef m = fzDiagnosticGetMessage(d);
    char *last = ud;
    size_t n = m.length < 255 ? m.length : 255;
    memcpy(last, m.data, n);
    last[n] = 0;
  }
  return true;
}

/* Regression (fuzz_onnx, a CI dry run): 25 bytes declaring dims
 * {3409255093} of float with 3 floats of data made the reader allocate
 * 13 GB (libFuzzer: malloc(3669322468) past its limit) before noticing
 * the data was short. */
START_TEST(test_declared_size_beyond_data) {
  static const unsigned char bytes[] = {
      0x08, 0xb5, 0xb5, 0xb5, 0xb5, 0x03, 0x10, 0x01, 0x42, 0x01, 0x78,
      0x4a, 0x0c, 0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x80, 0x3f};
  FzContext *ctx = fzContextCreate();
  char last[256] = "";
  fzContextPushDiagHandler(ctx, count_errors, last);
  FzTensor *t = fzOnnxReadTensorBuffer(ctx, bytes, sizeof bytes, "t.pb");
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(last, "elements but its shape needs") ||
                    strstr(last, "invalid dimension"),
                "unexpected message: %s", last);
  ck_assert(!fzContextHadAllocationFailure(ctx));
  fzContextDestroy(ctx);
}
END_TEST

/* UINT64, UINT32 (both in uint64_data) and UINT16 (in int32_data) read
 * as i64, i32 and i16 holding the same bits: the top of each range is -1
 * read signed. */
START_TEST(test_unsigned_typed_fields) {
  static const unsigned char u64[] = {
      0x08, 0x02, 0x10, 0x0d, 0x58, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0x01, 0x58, 0x05};
  static const unsigned char u32[] = {0x08, 0x02, 0x10, 0x0c, 0x58, 0xff,
                                      0xff, 0xff, 0xff, 0x0f, 0x58, 0x07};
  static const unsigned char u16[] = {0x08, 0x02, 0x10, 0x04, 0x28,
                                      0xff, 0xff, 0x03, 0x28, 0x09};
  const struct {
    const unsigned char *bytes;
    size_t size;
    unsigned bits;
    int64_t second;
  } cases[] = {{u64, sizeof u64, 64, 5}, {u32, sizeof u32, 32, 7},
               {u16, sizeof u16, 16, 9}};
  FzContext *ctx = fzContextCreate();
  for (size_t i = 0; i < 3; ++i) {
    FzTensor *t = fzOnnxReadTensorBuffer(ctx, cases[i].bytes, cases[i].size,
                                         "u.pb");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(t->dtype, fzIntegerTypeGet(ctx, cases[i].bits));
    ck_assert_int_eq(t->numElements, 2);
    ck_assert_int_eq(fzTensorGetI64(t, 0), -1);
    ck_assert_int_eq(fzTensorGetI64(t, 1), cases[i].second);
    fzTensorDestroy(t);
  }
  fzContextDestroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_tensor");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_declared_size_beyond_data);
  tcase_add_test(tc, test_unsigned_typed_fields);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
