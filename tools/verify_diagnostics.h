/* tools/verify_diagnostics.h - fuse-opt's --verify-diagnostics.
 *
 * A verifier checks the diagnostics reported while one chunk of an input
 * file is processed against the `expected-*` comments written in that
 * chunk, as mlir-opt's --verify-diagnostics does:
 *
 *   // expected-error {{substring of the message}}
 *   // expected-warning @+1 {{...}}     (also @-N, @above, @below, @unknown)
 *   // expected-note-re {{text with {{[0-9]+}} regex parts}}
 *
 * Begin one per chunk (it scans the text and installs a diagnostic
 * handler that claims every diagnostic of the context), process the
 * chunk, then finish it: that removes the handler, prints each mismatch
 * to `err` as `file:line:col: error: ...` with the source line and a
 * caret, and reports whether everything matched.
 */
#ifndef FZ_TOOLS_VERIFY_DIAGNOSTICS_H
#define FZ_TOOLS_VERIFY_DIAGNOSTICS_H

#include <stdio.h>

#include "fz/ir.h"

typedef struct FzDiagVerifier FzDiagVerifier;

/* Scans `text` (one chunk of the file `fileName`, whose first line is line
 * lineOffset + 1 of the file) for expectations and pushes a handler on
 * ctx. `fileName` and `text` must outlive the verifier. Returns NULL when
 * out of memory (after printing an error to err). */
FzDiagVerifier *fzDiagVerifierBegin(FzContext *ctx, const char *fileName,
                                    FzStringRef text, unsigned lineOffset,
                                    FILE *err);

/* Pops the handler, prints every unexpected diagnostic, every near miss
 * (right message, wrong severity), every malformed expectation and every
 * expectation that was not produced, then frees the verifier. Returns true
 * when there were none. */
bool fzDiagVerifierFinish(FzDiagVerifier *v);

/* --test-emit-diagnostics, a testing aid for --verify-diagnostics: for
 * every op nested in `root` that carries a string attribute
 * `test.diag = "SEVERITY: message"` (SEVERITY is error, warning or remark;
 * without it, error), reports that diagnostic at the op's location, with
 * a note `test.note = "message"` when present, located at the defining op
 * of the op's first operand (or at the op itself). Returns false when an
 * error was reported. */
bool fzTestEmitDiagnostics(FzOp *root);

#endif /* FZ_TOOLS_VERIFY_DIAGNOSTICS_H */
