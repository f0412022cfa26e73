/* dialects/graph/common.c - helpers shared by the graph dialect's files:
 * the diagnostic context of shape functions, typed attribute accessors,
 * and type-to-text for messages.
 *
 * Accessors never allocate; messages are formatted into bounded stack
 * buffers (a type too long for them is truncated with "...").
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"
#include "ir/type_text.h"

/*===--- Diagnostics ----------------------------------------------------===*/

bool fzGraphError(FzGraphDiag *d, const char *fmt, ...) {
  if (d->quiet)
    return false;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (d->opName)
    return fzEmitError(d->ctx, d->loc, "'%s' op %s", d->opName, msg);
  return fzEmitError(d->ctx, d->loc, "%s", msg);
}

FzGraphDiag fzGraphDiagForOp(FzOp *op) {
  FzGraphDiag d;
  d.ctx = fzOpGetContext(op);
  d.loc = fzOpGetLoc(op);
  d.opName = fzOpGetDef(op) ? fzOpGetDef(op)->name : NULL;
  d.quiet = false;
  return d;
}

const char *fzGraphTypeStr(const FzType *t, char *buf, size_t cap) {
  return fzTypeText(t, buf, cap);
}

const char *fzGraphShapeStr(size_t rank, const int64_t *shape, char *buf,
                            size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  if (rank == 0) {
    snprintf(buf, cap, "scalar");
    return buf;
  }
  for (size_t i = 0; i < rank && len + 1 < cap; ++i) {
    int k;
    if (shape[i] == FZ_DYNAMIC)
      k = snprintf(buf + len, cap - len, "%s?", i ? "x" : "");
    else
      k = snprintf(buf + len, cap - len, "%s%lld", i ? "x" : "",
                   (long long)shape[i]);
    if (k < 0)
      break;
    len += (size_t)k;
  }
  return buf;
}

/*===--- Attributes -----------------------------------------------------===*/

FzGraphAttrs fzGraphAttrsOfOp(const FzOp *op) {
  FzGraphAttrs a = {fzOpGetPropDict(op), fzOpGetAttrDict(op)};
  return a;
}

FzAttr *fzGraphAttrsLookup(const FzGraphAttrs *a, const char *name) {
  FzStringRef n = fzStringRefFromCString(name);
  FzAttr *v = NULL;
  if (a->props && fzAttrGetKind(a->props) == FZ_ATTR_DICT)
    v = fzDictAttrLookup(a->props, n);
  if (!v && a->attrs && fzAttrGetKind(a->attrs) == FZ_ATTR_DICT)
    v = fzDictAttrLookup(a->attrs, n);
  return v;
}

bool fzGraphGetInt(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                   int64_t dflt, int64_t *out) {
  FzAttr *v = fzGraphAttrsLookup(a, name);
  *out = dflt;
  if (!v)
    return true;
  if (fzAttrGetKind(v) != FZ_ATTR_INTEGER)
    return fzGraphError(d,
                        "attribute '%s' must be an integer (e.g. "
                        "%s = 1 : i64)",
                        name, name);
  *out = fzIntegerAttrGetValue(v);
  return true;
}

bool fzGraphGetFloat(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                     double dflt, double *out) {
  FzAttr *v = fzGraphAttrsLookup(a, name);
  *out = dflt;
  if (!v)
    return true;
  if (fzAttrGetKind(v) == FZ_ATTR_FLOAT) {
    *out = fzFloatAttrGetValue(v);
    return true;
  }
  if (fzAttrGetKind(v) == FZ_ATTR_INTEGER) {
    *out = (double)fzIntegerAttrGetValue(v);
    return true;
  }
  return fzGraphError(d,
                      "attribute '%s' must be a float (e.g. %s = 1.0 : "
                      "f32)",
                      name, name);
}

bool fzGraphGetBool(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                    bool dflt, bool *out) {
  FzAttr *v = fzGraphAttrsLookup(a, name);
  *out = dflt;
  if (!v)
    return true;
  if (fzAttrGetKind(v) == FZ_ATTR_BOOL) {
    *out = fzBoolAttrGetValue(v);
    return true;
  }
  if (fzAttrGetKind(v) == FZ_ATTR_UNIT) {
    *out = true;
    return true;
  }
  return fzGraphError(d, "attribute '%s' must be a bool (true or false)", name);
}

bool fzGraphGetString(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                      const char *dflt, FzStringRef *out) {
  FzAttr *v = fzGraphAttrsLookup(a, name);
  *out = fzStringRefFromCString(dflt);
  if (!v)
    return true;
  if (fzAttrGetKind(v) != FZ_ATTR_STRING)
    return fzGraphError(d, "attribute '%s' must be a string", name);
  *out = fzStringAttrGetValue(v);
  return true;
}

bool fzGraphGetI64Array(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                        size_t maxN, int64_t *vals, size_t *n, bool *present) {
  FzAttr *v = fzGraphAttrsLookup(a, name);
  *n = 0;
  *present = v != NULL;
  if (!v)
    return true;
  if (fzAttrGetKind(v) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetElementType(v) != fzIntegerTypeGet(d->ctx, 64))
    return fzGraphError(d,
                        "attribute '%s' must be a dense i64 array "
                        "(array<i64: ...>)",
                        name);
  size_t m = fzDenseArrayAttrGetSize(v);
  if (m > maxN)
    return fzGraphError(d,
                        "attribute '%s' has %zu elements; at most %zu "
                        "are allowed",
                        name, m, maxN);
  for (size_t i = 0; i < m; ++i)
    vals[i] = fzDenseArrayAttrGetInt(v, i);
  *n = m;
  return true;
}

/*===--- Op info --------------------------------------------------------===*/

const FzGraphOpInfo *fzGraphOpInfo(const FzOpDef *def) {
  return def ? (const FzGraphOpInfo *)def->extra : NULL;
}

bool fzGraphRequireInferred(FzGraphDiag *d, FzType **out) {
  if (out[0])
    return true;
  return fzGraphError(d, "the result type cannot be inferred from the "
                         "operands; write it explicitly ('-> type')");
}
