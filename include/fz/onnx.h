/* fz/onnx.h - importing ONNX models into the graph dialect.
 *
 * An ONNX model (a ModelProto, decoded with the protobuf-c code generated
 * from the onnx.proto that ONNX ships) becomes a builtin.module holding
 * one func.func @main: one argument per graph input that is not an
 * initializer, one result per graph output. Initializers and Constant
 * nodes become graph.constant; every supported node becomes one or more
 * graph ops; shape computations on static shapes (Shape, Gather, Slice,
 * Concat, ConstantOfShape, Unsqueeze, Range, ...) are folded to constants
 * as they are imported. docs/onnx.md lists the supported op types.
 *
 * Locations. Every op made from node N carries
 *   loc(fused<"OpType">["node_name"("model.onnx":0:0)])
 * (ONNX has no line numbers: line and column are 0). A node without a
 * name is named after its first named output (else "#index").
 *
 * Errors. Each offending node gets one error, reported through the
 * context's diagnostic handlers at the location `"model.onnx"` (a name
 * location, which prints as `model.onnx: error: ...`), worded
 *   node 'conv1' (Conv): unsupported attribute 'auto_pad' value 'FOO'
 * Errors about unsupported op types, attributes, dtypes and dynamic
 * shapes contain the word "unsupported"; other errors (a malformed
 * model) do not. The import goes on after an error to report the other
 * nodes, then returns NULL.
 *
 * Ownership: the returned module is detached and owned by the caller
 * (fzOpDestroy). Tensors returned are owned by the caller
 * (fzTensorDestroy).
 */
#ifndef FZ_ONNX_H
#define FZ_ONNX_H

#include "fz/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options name a graph input by its name, or (name NULL) by its position
 * among the graph inputs that are not initializers: the order in which
 * the model expects data (input_0.pb, input_1.pb, ... in ONNX tests). */

/* Gives the shape of one graph input, making its symbolic (`dim_param`)
 * or missing dims static. It must have the declared rank and the declared
 * size at every dim the model declares static (an error otherwise). A
 * symbol's size applies to every graph input with a dim of that symbol.
 * A name that is no graph input but a symbol (a dim_param of a graph
 * input), with rank 1, gives that symbol's size: {"batch", 0, 1, &n}. */
typedef struct FzOnnxInputShape {
  const char *name;     /* the graph input's (or symbol's) name; NULL:
                           use index */
  size_t index;
  size_t rank;
  const int64_t *shape; /* rank dims, >= 0 (or FZ_DYNAMIC) */
} FzOnnxInputShape;

/* Binds one graph input to a value: the input becomes a constant (and no
 * argument of @main), so that ops needing it at import time (a reshape's
 * shape, a reduction's axes) see it: the model is specialized to it. The
 * value must have the input's dtype, rank and static dims; it gives the
 * symbolic ones (as an FzOnnxInputShape would).
 *
 * With ifNeeded, the input is bound only if the model needs its value at
 * import: when a node needs a constant operand (a Reshape's shape, Slice
 * bounds, TopK's k, ...) computed from it. The importer then imports
 * again with it bound (a few passes at most, one per such input, only
 * when the first fails); otherwise the input stays an argument of @main
 * with the value's shape. This is how a tool that has the inputs of a run
 * (fuse-run) compiles any model for them. */
typedef struct FzOnnxInputValue {
  const char *name; /* the graph input's name; NULL: use index */
  size_t index;
  const FzTensor *value; /* borrowed */
  bool ifNeeded;
  /* value is an i16 tensor read from UINT16 data: for a FLOAT16 or
   * BFLOAT16 graph input it holds that type's bits (ONNX 1.12's backend
   * tests store bfloat16 data as UINT16); the caller retags it
   * (value->dtype) before running with it. */
  bool uint16Bits;
} FzOnnxInputValue;

typedef struct FzOnnxImportOptions {
  size_t numInputShapes;
  const FzOnnxInputShape *inputShapes;
  size_t numInputValues;
  const FzOnnxInputValue *inputValues;
  /* NULL, or numInputValues entries: after a successful import,
   * boundValues[k] says whether inputValues[k] was bound as a constant
   * (always, for an entry without ifNeeded). */
  bool *boundValues;
} FzOnnxImportOptions;

/* The largest model (and TensorProto file) read, in bytes: protobuf's
 * limit on a message (2 GiB - 1). Larger models keep their weights as
 * external data. A larger file or buffer is an error, found before it is
 * read whole: the file readers stop there (a device such as /dev/zero
 * never ends), and at the first bytes when they cannot start a protobuf
 * message. */
#define FZ_ONNX_MAX_MODEL_SIZE ((size_t)0x7FFFFFFF)

/* Reads and imports the .onnx file at path. External tensor data is
 * looked up relative to the file's folder. The graph, builtin and func
 * dialects are registered into ctx. Returns a verified module, or NULL
 * after reporting every error found. */
FZ_API FzOp *fzImportOnnxFile(FzContext *ctx, const char *path);

/* Imports a model held in memory. `name` names the model in locations
 * and diagnostics (e.g. "model.onnx"); `baseDir` is the folder external
 * data is looked up in (NULL: external data is an error). */
FZ_API FzOp *fzImportOnnxBuffer(FzContext *ctx, const void *data, size_t size,
                                const char *name, const char *baseDir);

/* As above, with options (NULL: the defaults). An input shape naming no
 * graph input is an error. */
FZ_API FzOp *fzImportOnnxFileWithOptions(FzContext *ctx, const char *path,
                                         const FzOnnxImportOptions *options);
FZ_API FzOp *fzImportOnnxBufferWithOptions(FzContext *ctx, const void *data,
                                           size_t size, const char *name,
                                           const char *baseDir,
                                           const FzOnnxImportOptions *options);

/* Reads a serialized TensorProto (a file such as the input_0.pb of the
 * ONNX backend tests) into a new host tensor. UINT8, UINT16, UINT32 and
 * UINT64 data becomes i8, i16, i32 and i64 holding the same bits. NULL
 * after an error (malformed file, unsupported dtype such as strings or
 * complex numbers: the message then contains "unsupported"). */
FZ_API FzTensor *fzOnnxReadTensorFile(FzContext *ctx, const char *path);
FZ_API FzTensor *fzOnnxReadTensorBuffer(FzContext *ctx, const void *data,
                                        size_t size, const char *name);
/* As above, checking that the tensor has element type `dtype` (NULL: any).
 * With dtype f16 or bf16, UINT16 data is read as that type's bits: the
 * ONNX 1.12 backend tests store bfloat16 data that way. */
FZ_API FzTensor *fzOnnxReadTensorFileAs(FzContext *ctx, const char *path,
                                        FzType *dtype);
FZ_API FzTensor *fzOnnxReadTensorBufferAs(FzContext *ctx, const void *data,
                                          size_t size, const char *name,
                                          FzType *dtype);
/* As fzOnnxReadTensorFile; *dataType receives the file's ONNX dtype
 * (onnx.proto's TensorProto.DataType: 4 for UINT16, ...). */
FZ_API FzTensor *fzOnnxReadTensorFileWithDataType(FzContext *ctx,
                                                  const char *path,
                                                  int32_t *dataType);

/* True when path names an ONNX model by its extension (".onnx", any
 * case). */
FZ_API bool fzOnnxIsModelPath(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* FZ_ONNX_H */
