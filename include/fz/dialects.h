/* fz/dialects.h - registration of fuse's built-in dialects.
 *
 * Each function registers one dialect's op table into a context; calling
 * it twice is harmless. They return false only after reporting an error
 * (allocation failure, or a clash with a dialect an embedder registered
 * under the same name).
 */
#ifndef FZ_DIALECTS_H
#define FZ_DIALECTS_H

#include "fz/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

/* builtin.module. */
FZ_API FZ_MUST_CHECK bool fzRegisterBuiltinDialect(FzContext *ctx);
/* func.func, func.return, func.call. */
FZ_API FZ_MUST_CHECK bool fzRegisterFuncDialect(FzContext *ctx);
/* Every dialect that ships with fuse. */
FZ_API FZ_MUST_CHECK bool fzRegisterAllDialects(FzContext *ctx);

#ifdef __cplusplus
}
#endif

#endif /* FZ_DIALECTS_H */
