/* ir/extensions.c - keyed extension slots on a context.
 *
 * A subsystem outside the IR core (the pass registry, for one) keeps its
 * per-context state here instead of in a global. The slots form a short
 * singly linked list, newest first: there are only a handful of them and
 * lookups happen once per pipeline parse, not per op. Each entry owns its
 * value through the destroy callback given with it; fzContextDestroy
 * calls fzContextDestroyExtensions before tearing anything else down, so
 * destroy callbacks may still use the context (fzFree, diagnostics).
 */
#include "ir/internal.h"

struct FzExtension {
  struct FzExtension *next;
  const void *key;
  void *value;
  FzExtensionDestroyFn destroy;
};

void *fzContextGetExtension(const FzContext *ctx, const void *key) {
  for (const struct FzExtension *e = ctx->extensions; e; e = e->next)
    if (e->key == key)
      return e->value;
  return NULL;
}

bool fzContextSetExtension(FzContext *ctx, const void *key, void *value,
                           FzExtensionDestroyFn destroy) {
  for (struct FzExtension *e = ctx->extensions; e; e = e->next) {
    if (e->key != key)
      continue;
    if (e->value != value && e->destroy)
      e->destroy(ctx, e->value);
    e->value = value;
    e->destroy = destroy;
    return true;
  }
  struct FzExtension *e = fzMalloc(ctx, sizeof *e);
  if (!e)
    return false;
  e->key = key;
  e->value = value;
  e->destroy = destroy;
  e->next = ctx->extensions;
  ctx->extensions = e;
  return true;
}

void fzContextDestroyExtensions(FzContext *ctx) {
  /* Newest first: a later extension may depend on an earlier one. */
  while (ctx->extensions) {
    struct FzExtension *e = ctx->extensions;
    ctx->extensions = e->next;
    if (e->destroy)
      e->destroy(ctx, e->value);
    fzFree(ctx, e);
  }
}
