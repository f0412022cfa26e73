/* python/src/dlpack.h - the DLPack ABI (v0.8, the unversioned
 * DLManagedTensor that `__dlpack__()` returns in a "dltensor" capsule),
 * declared from the specification (dmlc.github.io/dlpack): the structs
 * and constants fuse reads and makes, nothing more.
 *
 * A consumer takes the DLManagedTensor out of the capsule, renames the
 * capsule "used_dltensor" (so that its destructor leaves the tensor
 * alone) and calls the tensor's deleter when it is done with the
 * memory. A producer's capsule destructor calls the deleter of a tensor
 * that no consumer took.
 */
#ifndef FZPY_DLPACK_H
#define FZPY_DLPACK_H

#include <stdint.h>

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLCUDAManaged = 13,
} DLDeviceType;

typedef struct {
  int32_t device_type; /* DLDeviceType */
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6,
} DLDataTypeCode;

typedef struct {
  uint8_t code; /* DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif /* FZPY_DLPACK_H */
