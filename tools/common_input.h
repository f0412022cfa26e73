/* tools/common_input.h - reading a tool's input file: fuse IR text or an
 * ONNX model, chosen by the file's extension. Linked into every tool. */
#ifndef FZ_TOOLS_COMMON_INPUT_H
#define FZ_TOOLS_COMMON_INPUT_H

#include "fz/ir.h"
#include "fz/onnx.h"

/* Imports `path` with the ONNX importer when it ends in ".onnx" (any
 * case), else parses it as fuse IR ("-" is stdin). Returns a detached
 * module owned by the caller, or NULL after errors were reported through
 * ctx's diagnostic handlers. The dialects the input needs are registered
 * by the callee for ONNX; for IR text the caller registers them first. */
FzOp *fzParseOrImportFile(FzContext *ctx, const char *path);

/* As above, importing an ONNX model with `onnx` (NULL: the defaults).
 * Shapes or values given for a file that is not an ONNX model are an
 * error (`tool` names the option in it). */
FzOp *fzParseOrImportFileWithOptions(FzContext *ctx, const char *path,
                                     const FzOnnxImportOptions *onnx,
                                     const char *tool);

/* True when `path` names an ONNX model (by its extension). */
bool fzInputIsOnnx(const char *path);

#endif /* FZ_TOOLS_COMMON_INPUT_H */
