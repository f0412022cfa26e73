/* fuzz_pipeline.c - libFuzzer target for the pass-pipeline parser
 * (ir/pipeline_parser.c) and the pass registry's option parsing.
 *
 * Invariant: a pipeline text that parses prints (fzPassManagerPrintPipeline)
 * to a text that parses again and prints identically. A text that does
 * not parse must leave the manager unchanged (no entries added) and be
 * reported as a diagnostic only.
 */
#include "fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm) abort();
  FzStringRef text = {(const char *)data, size};
  if (fzPassManagerParsePipeline(pm, text)) {
    FuzzBuf first = {0}, second = {0};
    fzPassManagerPrintPipeline(pm, fuzz_buf_append, &first);
    FzPassManager *pm2 = fzPassManagerCreate(ctx, "builtin.module");
    if (!pm2) abort();
    if (!fzPassManagerParsePipeline(pm2, fuzz_buf_ref(&first)))
      fuzz_fail("printed pipeline does not parse", text, fuzz_buf_ref(&first));
    fzPassManagerPrintPipeline(pm2, fuzz_buf_append, &second);
    if (!fzStringRefEqual(fuzz_buf_ref(&first), fuzz_buf_ref(&second)))
      fuzz_fail("pipeline print -> parse -> print differs",
                fuzz_buf_ref(&first), fuzz_buf_ref(&second));
    fzPassManagerDestroy(pm2);
    free(first.data);
    free(second.data);
  } else if (fzPassManagerGetNumEntries(pm) != 0) {
    fuzz_fail("failed pipeline parse changed the manager", text, FZ_STR(""));
  }
  fzPassManagerDestroy(pm);
  fzContextDestroy(ctx);
  return 0;
}
