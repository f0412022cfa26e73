/* fz/tensor.h - host tensors (FzTensor) and .npy files.
 *
 * A host tensor is what the reference interpreter, the CPU and CUDA
 * runtimes and the tools pass around. It belongs to no dialect: the type
 * and its element access live in ir/tensor.c (below every dialect and
 * the runtime), .npy reading and writing in runtime/npy.c.
 *
 * Ownership. A tensor owns its shape and data, allocated through the
 * context it was created with; fzTensorDestroy frees both.
 */
#ifndef FZ_TENSOR_H
#define FZ_TENSOR_H

#include "fz/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest rank of a host tensor. */
#define FZ_TENSOR_MAX_RANK 16

/*===------------------------------------------------------------------===*
 * Host tensors
 *===------------------------------------------------------------------===*/

/* A dense, contiguous, row-major tensor on the host. Elements are stored
 * as in dense attributes: packed little-endian in their storage size
 * (i1: one byte holding 0 or 1; f16/bf16: the 2-byte IEEE bits). The
 * fields are read-only to users; change elements through the Set
 * functions or by writing `data` directly in that storage format. */
typedef struct FzTensor {
  FzContext *ctx; /* allocates shape and data */
  FzType *dtype;  /* element type: f16 bf16 f32 f64 i1 i8 i16 i32 i64 */
  size_t rank;
  int64_t *shape;      /* rank dims, all >= 0; NULL when rank is 0 */
  int64_t numElements; /* product of shape (1 for rank 0) */
  void *data;          /* numElements * fzTypeGetStorageSize(dtype) bytes */
} FzTensor;

/* True for the element types that tensors, .npy files and the
 * interpreter support: f16 bf16 f32 f64 and i1 i8 i16 i32 i64. */
FZ_API bool fzTensorDTypeIsSupported(const FzType *dtype);

/* A zero-filled tensor. NULL after an error (unsupported dtype, negative
 * dim, rank above FZ_TENSOR_MAX_RANK, too many elements, out of memory). */
FZ_API FzTensor *fzTensorCreate(FzContext *ctx, FzType *dtype, size_t rank,
                                const int64_t *shape);
/* A zero-filled tensor of a statically shaped tensor type. */
FZ_API FzTensor *fzTensorCreateFromType(FzContext *ctx, FzType *tensorType);
/* A deep copy; NULL on allocation failure. */
FZ_API FzTensor *fzTensorClone(const FzTensor *t);
/* Frees the tensor and its data. NULL is ignored. */
FZ_API void fzTensorDestroy(FzTensor *t);
/* Destroys the first n tensors of the array (NULL entries skipped) and
 * frees the array itself, which was allocated through ctx. */
FZ_API void fzTensorArrayDestroy(FzContext *ctx, size_t n, FzTensor **tensors);

/* tensor<shape x dtype>; NULL on allocation failure. */
FZ_API FzType *fzTensorGetType(const FzTensor *t);
/* Size of the data in bytes. */
FZ_API size_t fzTensorGetNumBytes(const FzTensor *t);

/* Element i (row-major linear index, 0 <= i < numElements) as a double /
 * an int64 (floats are truncated toward zero; NaN gives 0). */
FZ_API double fzTensorGetF64(const FzTensor *t, int64_t i);
FZ_API int64_t fzTensorGetI64(const FzTensor *t, int64_t i);
/* Stores element i. Floats round to nearest even; integers take the
 * value truncated toward zero, saturated to the type's range (NaN is
 * 0); i1 stores v != 0. */
FZ_API void fzTensorSetF64(FzTensor *t, int64_t i, double v);
/* Integers wrap modulo 2^width (sign-extended); i1 stores v & 1; floats
 * take the nearest value. */
FZ_API void fzTensorSetI64(FzTensor *t, int64_t i, int64_t v);

/* A tensor holding the elements of a dense attribute (splats expanded).
 * NULL after an error. */
FZ_API FzTensor *fzTensorFromDenseAttr(FzContext *ctx, const FzAttr *dense);
/* A dense attribute holding t (a splat when every element is the same).
 * NULL after an error. */
FZ_API FzAttr *fzTensorToDenseAttr(const FzTensor *t);

/*===------------------------------------------------------------------===*
 * .npy files (runtime/npy.c)
 *
 * Read: format versions 1, 2 and 3; byte orders '<', '|', '=' and '>'
 * (big-endian data is byte-swapped); dtypes f2 f4 f8 i1 i2 i4 i8 b1, and
 * bf16 stored as 2-byte void ('<V2' or '|V2': what numpy writes for
 * ml_dtypes.bfloat16 arrays); C or Fortran order (Fortran is transposed
 * to C). Write: version 1 (2 when the header needs it), C order,
 * little-endian; bf16 as '<V2'.
 * Malformed, truncated or oversized input is an error diagnostic naming
 * the file (never a crash); so is trailing data after the elements.
 *===------------------------------------------------------------------===*/

/* Reads a .npy file. NULL after an error. */
FZ_API FzTensor *fzNpyReadFile(FzContext *ctx, const char *path);
/* Reads .npy bytes; `name` is used in error messages. */
FZ_API FzTensor *fzNpyReadBuffer(FzContext *ctx, const void *data, size_t size,
                                 const char *name);
/* Writes the .npy bytes of t through cb (header, then data). */
FZ_API void fzNpySerialize(const FzTensor *t, FzPrintCallback cb,
                           void *userData);
/* Writes t to `path` atomically (a temporary file renamed over it); no
 * file is left behind on error. False after an error. */
FZ_API FZ_MUST_CHECK bool fzNpyWriteFile(const FzTensor *t, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* FZ_TENSOR_H */
