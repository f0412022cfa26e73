/* fuzz_npy.c - libFuzzer target for the .npy reader (runtime/npy.c).
 *
 * Arbitrary bytes go to fzNpyReadBuffer. Whatever it accepts must
 * serialize and read back to the same dtype, shape and bytes. Every
 * rejection must be a diagnostic, never a crash, a leak or a sanitizer
 * report.
 */
#include "fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  FzTensor *t = fzNpyReadBuffer(ctx, data, size, "fuzz.npy");
  if (t) {
    FuzzBuf b = {0};
    fzNpySerialize(t, fuzz_buf_append, &b);
    FzTensor *u = fzNpyReadBuffer(ctx, b.data, b.size, "roundtrip.npy");
    if (!u || u->dtype != t->dtype || u->rank != t->rank ||
        u->numElements != t->numElements ||
        (t->rank && memcmp(u->shape, t->shape, t->rank * sizeof *t->shape)) ||
        memcmp(u->data, t->data, fzTensorGetNumBytes(t)) != 0)
      fuzz_fail("npy serialize -> read is not the identity",
                (FzStringRef){(const char *)data, size}, fuzz_buf_ref(&b));
    fzTensorDestroy(u);
    fzTensorDestroy(t);
    free(b.data);
  }
  fzContextDestroy(ctx);
  return 0;
}
