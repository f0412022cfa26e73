/* tools/fuse_run_internal.h - what fuse_run.c (options, main) and
 * fuse_run_io.c (random inputs, printing, writing and comparing outputs)
 * share.
 */
#ifndef FUSE_RUN_INTERNAL_H
#define FUSE_RUN_INTERNAL_H

#include <stdio.h>

#include "fz/graph.h"

/* Random inputs, one per argument of the first nIn arguments of the
 * function type `ft` (tensors, or identity-layout buffers of a lowered
 * function), from the seed: floats uniform in +-[0.125, 2] (never zero or tiny), integers in
 * +-[1, 4], i1 random bools. A dynamic dim is an error naming the
 * argument. On success *out is a malloc'ed array of n tensors. */
bool fuseRunRandomInputs(FzContext *ctx, FzType *ft, size_t nIn,
                         unsigned long long seed, FzTensor ***out,
                         size_t *n);

/* Prints "name: type" and the elements (all of them, or a summary beyond
 * limit elements) to f. */
void fuseRunPrintTensor(FILE *f, const char *name, const FzTensor *t,
                        int64_t limit);

/* Writes tensors[i] as DIR/PREFIX_i.npy, all or nothing: every file goes
 * to a temporary name first and is renamed only when all were written. */
bool fuseRunWriteAll(FzContext *ctx, const char *dir, const char *prefix,
                     size_t n, FzTensor *const *tensors);

/* Reads an input or expected output: a serialized ONNX TensorProto when
 * path ends in ".pb" (the ONNX backend tests' files), else a .npy file.
 * NULL after an error. */
FzTensor *fuseRunReadTensor(FzContext *ctx, const char *path);
/* As fuseRunReadTensor; *uint16 says whether the file held ONNX UINT16
 * data (an i16 tensor of its bits). */
FzTensor *fuseRunReadTensorUint16(FzContext *ctx, const char *path,
                                  bool *uint16);

/* Compares outputs with DIR/output_i.npy (else DIR/output_i.pb) (numpy.allclose's rule: |got -
 * expected| <= atol + rtol * |expected|; NaN matches NaN). Prints one
 * line per output to f. Returns 0 when all match, 1 otherwise (after
 * printing why). */
int fuseRunCompare(FzContext *ctx, FILE *f, const char *dir, size_t n,
                   FzTensor *const *outputs, double rtol, double atol);

#endif /* FUSE_RUN_INTERNAL_H */
