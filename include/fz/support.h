/* fz/support.h - basic vocabulary of the fuse C API.
 *
 * Sized non-owning strings, the version, and the result convention: a
 * function that can fail returns bool (true on success) and is marked
 * FZ_MUST_CHECK; the reason for a failure has already been reported as a
 * diagnostic through the context's handlers by the time it returns.
 */
#ifndef FZ_SUPPORT_H
#define FZ_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers (compile time). fzGetVersionString gives
 * the version of the library actually linked; docs/api.md states what a
 * change of each component promises. */
#define FZ_VERSION_MAJOR 0
#define FZ_VERSION_MINOR 1
#define FZ_VERSION_PATCH 0
#define FZ_VERSION_STRING "0.1.0"

/* FZ_MUST_CHECK marks a result the caller must test (a warning when it is
 * ignored, with GCC and Clang). FZ_PRINTF marks printf-style arguments
 * for format checking. */
#if defined(__GNUC__) || defined(__clang__)
#define FZ_MUST_CHECK __attribute__((warn_unused_result))
#define FZ_PRINTF(fmtIndex, firstArg) \
  __attribute__((format(printf, fmtIndex, firstArg)))
#else
#define FZ_MUST_CHECK
#define FZ_PRINTF(fmtIndex, firstArg)
#endif

/* FZ_API marks what the library exports: every function declared in
 * include/fz carries it, and nothing else is visible outside libfuse.so
 * (the library is compiled with -fvisibility=hidden; a test compares
 * the exported symbols with these declarations). */
#if defined(__GNUC__) || defined(__clang__)
#define FZ_API __attribute__((visibility("default")))
#else
#define FZ_API
#endif

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
FZ_API const char *fzGetVersionString(void);

/* A sized string that does not own its bytes. `data` need not be
 * NUL-terminated; it may be NULL only when `length` is 0. */
typedef struct FzStringRef {
  const char *data;
  size_t length;
} FzStringRef;

/* A string literal as an FzStringRef (a compound literal: C only; `lit`
 * must be a literal, not a pointer). */
#define FZ_STR(lit) ((FzStringRef){(lit), sizeof(lit) - 1})

/* A NUL-terminated string as an FzStringRef (NULL gives the empty string). */
FZ_API FzStringRef fzStringRefFromCString(const char *s);

/* Byte-wise equality of two sized strings. */
FZ_API bool fzStringRefEqual(FzStringRef a, FzStringRef b);

/* Receives printed text in chunks; `chunk` is valid only during the call
 * (copy what must outlive it) and is not NUL-terminated. A printer may
 * call it any number of times, also with empty chunks. userData is the
 * pointer given next to the callback. */
typedef void (*FzPrintCallback)(FzStringRef chunk, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* FZ_SUPPORT_H */
