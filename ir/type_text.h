/* ir/type_text.h - a type's text in a fixed buffer, for diagnostics
 * (ir/util.c); shared by host tensors (ir/tensor.c) and the graph
 * dialect's messages (fzGraphTypeStr). Private to the library. */
#ifndef FZ_IR_TYPE_TEXT_H
#define FZ_IR_TYPE_TEXT_H

#include "fz/ir.h"

/* t's text into buf (cap > 4 bytes; "<null>" for NULL), truncated with
 * "..." when it does not fit; returns buf. */
const char *fzTypeText(const FzType *t, char *buf, size_t cap);

#endif /* FZ_IR_TYPE_TEXT_H */
