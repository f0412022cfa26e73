/* tools/common_input.c - the tools' shared input hook: a path ending in
 * .onnx is imported with the ONNX importer (fz/onnx.h), anything else is
 * parsed as fuse IR. Keeping the dispatch here lets fuse-opt and fuse-run
 * accept .onnx files with a one-line change each. */
#include "tools/common_input.h"

#include "fz/onnx.h"

bool fzInputIsOnnx(const char *path) { return fzOnnxIsModelPath(path); }

FzOp *fzParseOrImportFile(FzContext *ctx, const char *path) {
  if (fzOnnxIsModelPath(path))
    return fzImportOnnxFile(ctx, path);
  return fzParseFile(ctx, path);
}
