/* dialects/registry/registry.c - fzRegisterAllDialects: the one place
 * that knows every dialect shipped with fuse. A new dialect adds its
 * registration call here and nowhere else.
 */
#include "fz/dialects.h"
#include "fz/graph.h"
#include "fz/kernel.h"
#include "fz/loop.h"

bool fzRegisterAllDialects(FzContext *ctx) {
  return fzRegisterBuiltinDialect(ctx) && fzRegisterFuncDialect(ctx) &&
         fzRegisterGraphDialect(ctx) &&
         fzRegisterLoopDialect(ctx) &&   /* dialects/loop */
         fzRegisterKernelDialect(ctx);   /* dialects/kernel */
}
