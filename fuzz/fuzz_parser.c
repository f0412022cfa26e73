/* fuzz_parser.c - libFuzzer target for the textual parser, the verifier
 * and the printer (ir/parse*.c, ir/lexer.c, ir/print*.c, ir/verify*.c,
 * and every dialect's custom parse/print hooks).
 *
 * Invariant: when the input parses and verifies, printing it (custom
 * form, and generic form) and reparsing the text must succeed, verify,
 * and print to exactly the same text. Unregistered dialects are allowed
 * so that the generic syntax is exercised too. Rejected input must be
 * diagnostics only (no crash, leak or sanitizer report).
 */
#include "fuzz/fuzz_common.h"

/* Prints module with flags, reparses the text, and checks that the
 * reparsed module verifies and prints to the same text. */
static void check_round_trip(FzContext *ctx, FzOp *module, unsigned flags) {
  FuzzBuf first = {0}, second = {0};
  fzOpPrint(module, flags, fuzz_buf_append, &first);
  FzOp *again = fzParseSource(ctx, fuzz_buf_ref(&first),
                              FZ_STR("printed.fuse"), 0);
  if (!again)
    fuzz_fail("printed text does not parse", fuzz_buf_ref(&first),
              FZ_STR(""));
  if (!fzOpVerify(again))
    fuzz_fail("printed text does not verify", fuzz_buf_ref(&first),
              FZ_STR(""));
  fzOpPrint(again, flags, fuzz_buf_append, &second);
  if (!fzStringRefEqual(fuzz_buf_ref(&first), fuzz_buf_ref(&second)))
    fuzz_fail("print -> parse -> print differs", fuzz_buf_ref(&first),
              fuzz_buf_ref(&second));
  fzOpDestroy(again);
  free(first.data);
  free(second.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  fzContextSetAllowUnregisteredDialects(ctx, true);
  FzOp *module = fzParseSource(ctx, (FzStringRef){(const char *)data, size},
                               FZ_STR("fuzz.fuse"), 0);
  if (module) {
    if (fzOpVerify(module)) {
      check_round_trip(ctx, module, 0);
      check_round_trip(ctx, module, FZ_PRINT_GENERIC);
    }
    fzOpDestroy(module);
  }
  fzContextDestroy(ctx);
  return 0;
}
