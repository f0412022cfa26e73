/* tools/common_input.h - reading a tool's input file: fuse IR text or an
 * ONNX model, chosen by the file's extension. Linked into every tool. */
#ifndef FZ_TOOLS_COMMON_INPUT_H
#define FZ_TOOLS_COMMON_INPUT_H

#include "fz/ir.h"

/* Imports `path` with the ONNX importer when it ends in ".onnx" (any
 * case), else parses it as fuse IR ("-" is stdin). Returns a detached
 * module owned by the caller, or NULL after errors were reported through
 * ctx's diagnostic handlers. The dialects the input needs are registered
 * by the callee for ONNX; for IR text the caller registers them first. */
FzOp *fzParseOrImportFile(FzContext *ctx, const char *path);

/* True when `path` names an ONNX model (by its extension). */
bool fzInputIsOnnx(const char *path);

#endif /* FZ_TOOLS_COMMON_INPUT_H */
