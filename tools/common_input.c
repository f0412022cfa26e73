/* tools/common_input.c - the tools' shared input hook: a path ending in
 * .onnx is imported with the ONNX importer (fz/onnx.h), anything else is
 * parsed as fuse IR. Keeping the dispatch here lets fuse-opt and fuse-run
 * accept .onnx files with a one-line change each. */
#include "tools/common_input.h"

#include <stdio.h>

bool fzInputIsOnnx(const char *path) { return fzOnnxIsModelPath(path); }

FzOp *fzParseOrImportFile(FzContext *ctx, const char *path) {
  return fzParseOrImportFileWithOptions(ctx, path, NULL, NULL);
}

FzOp *fzParseOrImportFileWithOptions(FzContext *ctx, const char *path,
                                     const FzOnnxImportOptions *onnx,
                                     const char *tool) {
  if (fzOnnxIsModelPath(path))
    return fzImportOnnxFileWithOptions(ctx, path, onnx);
  if (onnx && onnx->numInputShapes) {
    fprintf(stderr, "%s: error: --input-shape applies to ONNX models (.onnx) "
                    "only, not to '%s'\n",
            tool ? tool : "fuse", path);
    return NULL;
  }
  return fzParseFile(ctx, path);
}
