/* importers/onnx/nesting.c - how deep the sub-messages of a serialized
 * protobuf message nest, found without recursion.
 *
 * Why: protobuf-c's unpack (and free_unpacked) recurse once per level of
 * nested messages, with no limit, so a model whose subgraphs nest a few
 * hundred thousand deep (AttributeProto.g -> GraphProto -> NodeProto ->
 * AttributeProto ...: a 7 MB file) overflows the stack inside protobuf-c
 * before anything can fail. This pre-pass walks the wire format with an
 * explicit stack, using the generated descriptors to tell sub-messages
 * from strings and bytes, and stops at a limit. It only measures: data it
 * cannot walk (a truncated field, a group, a bad wire type) is left to
 * protobuf-c, which rejects it.
 */
#include "importers/onnx/onnx_internal.h"

/* Reads a varint at *p (< end); false when it is cut off or too long. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p >= end)
      return false;
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

bool fzOnnxNestingWithin(const ProtobufCMessageDescriptor *desc,
                         const uint8_t *data, size_t size, unsigned max) {
  /* stack[d]: the descriptor and the end of the message open at depth d. */
  enum { CAP = 1024 };
  const ProtobufCMessageDescriptor *descs[CAP];
  const uint8_t *ends[CAP];
  if (max >= CAP)
    max = CAP - 1;
  unsigned depth = 0;
  descs[0] = desc;
  ends[0] = data + size;
  const uint8_t *p = data;
  for (;;) {
    while (depth > 0 && p == ends[depth])
      --depth;
    if (p >= ends[depth])
      return true; /* the top-level message is done */
    uint64_t key, len;
    if (!read_varint(&p, ends[depth], &key))
      return true; /* malformed: protobuf-c reports it */
    switch (key & 7) {
    case 0: /* varint */
      if (!read_varint(&p, ends[depth], &len))
        return true;
      break;
    case 1: /* 64-bit */
    case 5: /* 32-bit */ {
      size_t n = (key & 7) == 1 ? 8 : 4;
      if ((size_t)(ends[depth] - p) < n)
        return true;
      p += n;
      break;
    }
    case 2: { /* length-delimited: a sub-message, or strings and bytes */
      if (!read_varint(&p, ends[depth], &len) ||
          len > (uint64_t)(ends[depth] - p))
        return true;
      const ProtobufCFieldDescriptor *f =
          key >> 3 <= UINT32_MAX
              ? protobuf_c_message_descriptor_get_field(descs[depth],
                                                        (unsigned)(key >> 3))
              : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && f->descriptor) {
        if (depth + 1 > max)
          return false;
        ++depth;
        descs[depth] = f->descriptor;
        ends[depth] = p + len;
      } else {
        p += len;
      }
      break;
    }
    default: /* groups (3, 4) and invalid wire types */
      return true;
    }
  }
}
