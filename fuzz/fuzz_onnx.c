/* fuzz_onnx.c - libFuzzer target for the ONNX importer (importers/onnx)
 * and protobuf-c's decoding of onnx.proto.
 *
 * Arbitrary bytes go to fzImportOnnxBuffer (no base directory, so
 * external data is never read from disk). A module it returns must
 * verify (the importer's contract) and print. Rejections must be
 * diagnostics only. The same bytes also go to fzOnnxReadTensorBuffer
 * (TensorProto files, as in the conformance tests' .pb inputs).
 */
#include "fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  FzOp *module = fzImportOnnxBuffer(ctx, data, size, "fuzz.onnx", NULL);
  if (module) {
    if (!fzOpVerify(module))
      fuzz_fail("imported module does not verify", FZ_STR(""), FZ_STR(""));
    FuzzBuf text = {0};
    fzOpPrint(module, 0, fuzz_buf_append, &text);
    free(text.data);
    fzOpDestroy(module);
  }
  FzTensor *t = fzOnnxReadTensorBuffer(ctx, data, size, "fuzz.pb");
  fzTensorDestroy(t);
  fzContextDestroy(ctx);
  return 0;
}
