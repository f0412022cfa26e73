/* importers/onnx/build.c - how node handlers build graph ops: creation
 * with inferred result types and import-time folding, constants, reading
 * constants back, value shapes, and the node's attributes.
 *
 * Folding. fzOnnxEmit evaluates an op whose operands are all constants
 * with the graph interpreter (fzInterpretOp) and replaces it by a
 * graph.constant, provided the result has at most FZ_ONNX_FOLD_LIMIT
 * elements. This is what turns shape subgraphs (Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape) into constants before the ops that
 * need them (reshape targets, slice bounds) read them. A fold that cannot
 * run (an op without a kernel) leaves the op in place, silently; a fold
 * that fails on the values (integer division by zero, a Gather index out
 * of range) is the node's error. Constants left without users are
 * removed at the end of the import (model.c).
 *
 * Sizes. The checked helpers (fzOnnxMulI64, fzOnnxFloatToInt,
 * fzOnnxCheckDim, fzOnnxCheckBuilt) are how handlers turn model data into
 * sizes: nothing read from a model is multiplied, converted from a float
 * or allocated without them. Constants the importer builds itself are
 * bounded by FZ_ONNX_FOLD_LIMIT elements, as folded ones are.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

void *fzOnnxAlloc(FzOnnxImporter *im, size_t size) {
  return fzArenaAlloc(&im->arena, size ? size : 1);
}

/*===--- Checked sizes ---------------------------------------------------===*/

bool fzOnnxFloatToInt(FzOnnxImporter *im, double v, int64_t lo, int64_t hi,
                      const char *what, int64_t *out) {
  /* The comparisons are false for NaN; 2^63 itself is out of range. */
  double t = trunc(v);
  if (!(t >= (double)lo && t <= (double)hi && t < 9223372036854775808.0))
    return fzOnnxError(im, "%s must be an integer in [%lld, %lld], got %g",
                       what, (long long)lo, (long long)hi, v);
  *out = (int64_t)t;
  return true;
}

bool fzOnnxCheckDim(FzOnnxImporter *im, int64_t d, const char *what) {
  if (d >= 0 && d <= FZ_MAX_DIM)
    return true;
  if (d == FZ_DYNAMIC)
    return fzOnnxError(im, "unsupported dynamic %s", what);
  return fzOnnxError(im, "%s %lld is out of range [0, 2^40]", what,
                     (long long)d);
}

bool fzOnnxCheckBuilt(FzOnnxImporter *im, size_t rank, const int64_t *shape,
                      const char *what, int64_t *count) {
  int64_t n = 1;
  bool ok = true;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] == FZ_DYNAMIC)
      return fzOnnxError(im, "unsupported dynamic dimension in the %s",
                         what);
    ok = ok && shape[i] >= 0 && fzOnnxMulI64(n, shape[i], &n);
  }
  /* A zero dim makes the product 0 whatever overflowed before it. */
  for (size_t i = 0; i < rank; ++i)
    if (shape[i] == 0)
      ok = true, n = 0;
  if (!ok || n > FZ_ONNX_FOLD_LIMIT)
    return fzOnnxError(im, "unsupported %s of more than %lld elements (the "
                           "importer builds at most that many)", what,
                       (long long)FZ_ONNX_FOLD_LIMIT);
  if (count)
    *count = n;
  return true;
}

FzValue *fzOnnxIota(FzOnnxImporter *im, size_t r, size_t axis, int64_t d) {
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = i == axis ? d : 1;
  if (!fzOnnxCheckBuilt(im, r, shape, "index table", NULL))
    return NULL;
  int64_t *vals = fzOnnxAlloc(im, (size_t)(d ? d : 1) * sizeof *vals);
  if (!vals)
    return NULL;
  for (int64_t i = 0; i < d; ++i)
    vals[i] = i;
  return fzOnnxConstI64(im, r, shape, vals);
}

/*===--- Value shapes ----------------------------------------------------===*/

FzType *fzOnnxElt(FzValue *v) {
  return fzShapedTypeGetElementType(fzValueGetType(v));
}
size_t fzOnnxRank(FzValue *v) { return fzShapedTypeGetRank(fzValueGetType(v)); }
int64_t fzOnnxDim(FzValue *v, size_t i) {
  return fzShapedTypeGetDim(fzValueGetType(v), i);
}
const int64_t *fzOnnxShape(FzValue *v) {
  return fzShapedTypeGetShape(fzValueGetType(v));
}

bool fzOnnxRequireStatic(FzOnnxImporter *im, FzValue *v, const char *what) {
  if (fzShapedTypeHasStaticShape(fzValueGetType(v)))
    return true;
  return fzOnnxError(im, "unsupported dynamic shape of %s", what);
}

bool fzOnnxNormAxis(FzOnnxImporter *im, int64_t axis, size_t rank,
                    size_t *out) {
  int64_t r = (int64_t)rank;
  if (axis < -r || axis >= r)
    return fzOnnxError(im, "axis %lld is out of range for rank %zu",
                       (long long)axis, rank);
  *out = (size_t)(axis < 0 ? axis + r : axis);
  return true;
}

/*===--- Constants -------------------------------------------------------===*/

FzAttr *fzOnnxGetConst(FzValue *v) {
  FzOp *def = v ? fzValueGetDefiningOp(v) : NULL;
  if (!def || !fzStringRefEqual(fzIdentGetString(fzOpGetName(def)),
                                FZ_STR("graph.constant")))
    return NULL;
  return fzOpGetInherentAttr(def, FZ_STR("value"));
}

bool fzOnnxGetConstInts(FzOnnxImporter *im, FzValue *v, int64_t **vals,
                        size_t *n) {
  FzAttr *a = fzOnnxGetConst(v);
  if (!a || !fzTypeIsInteger(fzOnnxElt(v)))
    return false;
  int64_t count = fzShapedTypeGetNumElements(fzAttrGetType(a));
  *vals = fzOnnxAlloc(im, (size_t)count * sizeof **vals);
  if (!*vals)
    return false;
  for (int64_t i = 0; i < count; ++i)
    (*vals)[i] = fzDenseAttrGetInt(a, i);
  *n = (size_t)count;
  return true;
}

bool fzOnnxGetConstFloats(FzOnnxImporter *im, FzValue *v, double **vals,
                          size_t *n) {
  FzAttr *a = fzOnnxGetConst(v);
  if (!a)
    return false;
  bool isInt = fzTypeIsInteger(fzOnnxElt(v));
  int64_t count = fzShapedTypeGetNumElements(fzAttrGetType(a));
  *vals = fzOnnxAlloc(im, (size_t)count * sizeof **vals);
  if (!*vals)
    return false;
  for (int64_t i = 0; i < count; ++i)
    (*vals)[i] = isInt ? (double)fzDenseAttrGetInt(a, i)
                       : fzDenseAttrGetFloat(a, i);
  *n = (size_t)count;
  return true;
}

FzValue *fzOnnxConstAttr(FzOnnxImporter *im, FzAttr *dense) {
  if (!dense)
    return NULL;
  FzOp *op = fzGraphCreateConstant(&im->b, dense, im->nodeLoc);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzOnnxConstSplat(FzOnnxImporter *im, FzType *elt, size_t rank,
                          const int64_t *shape, double v) {
  FzTensor *one = fzTensorCreate(im->ctx, elt, 0, NULL);
  if (!one)
    return NULL;
  fzTensorSetF64(one, 0, v);
  FzType *t = fzTensorTypeGet(im->ctx, rank, shape, elt, NULL);
  /* A splat needs one element; an empty tensor has no bytes. */
  size_t bytes = t && fzShapedTypeGetNumElements(t) == 0
                     ? 0
                     : fzTypeGetStorageSize(elt);
  FzAttr *a = t ? fzDenseAttrGet(im->ctx, t, one->data, bytes) : NULL;
  fzTensorDestroy(one);
  return fzOnnxConstAttr(im, a);
}

FzValue *fzOnnxConstScalar(FzOnnxImporter *im, FzType *elt, double v) {
  return fzOnnxConstSplat(im, elt, 0, NULL, v);
}

FzValue *fzOnnxConstI64(FzOnnxImporter *im, size_t rank,
                        const int64_t *shape, const int64_t *vals) {
  FzType *t = fzTensorTypeGet(im->ctx, rank, shape,
                              fzIntegerTypeGet(im->ctx, 64), NULL);
  int64_t count = t ? fzShapedTypeGetNumElements(t) : 0, none = 0;
  FzAttr *a = t ? fzDenseAttrGet(im->ctx, t, count ? vals : &none,
                                 (size_t)count * sizeof(int64_t))
                : NULL;
  return fzOnnxConstAttr(im, a);
}

FzValue *fzOnnxConstTensor(FzOnnxImporter *im, const FzTensor *t) {
  return fzOnnxConstAttr(im, t ? fzTensorToDenseAttr(t) : NULL);
}

/*===--- Emitting ops ----------------------------------------------------===*/

/* Whether a quiet interpreter failure only means that the op cannot be
 * folded (no kernel for it or its types), not that its inputs are bad. */
static bool fold_unsupported(const char *why) {
  return strstr(why, "no kernel") || strstr(why, "cannot be interpreted");
}

/* Replaces op by a constant when its operands are all constants. The
 * interpreter runs quietly: a diagnostic it reported would count as an
 * error of the context with nothing printed. A failure on the values
 * (an integer division by zero, an index out of range) is the node's
 * error: the model cannot run; erases op and returns NULL then. */
static FzValue *try_fold(FzOnnxImporter *im, FzOp *op) {
  FzValue *result = fzOpGetResult(op, 0);
  size_t n = fzOpGetNumOperands(op);
  const FzOpDef *def = fzOpGetDef(op);
  FzType *rt = fzValueGetType(result);
  /* A dequantized constant (a QDQ model's weight) stays an op: fold-qdq
   * reads it as the integer weight of a contraction (ops_quant.c). */
  if (fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                       FZ_STR("graph.dequantize")))
    return result;
  if (n == 0 || n > 16 || !def || !def->interpret ||
      fzOpGetNumResults(op) != 1 || !fzShapedTypeHasStaticShape(rt) ||
      fzShapedTypeGetNumElements(rt) > FZ_ONNX_FOLD_LIMIT)
    return result;
  FzTensor *in[16] = {NULL};
  bool ok = true;
  for (size_t i = 0; ok && i < n; ++i) {
    FzAttr *a = fzOnnxGetConst(fzOpGetOperand(op, i));
    ok = a && (in[i] = fzTensorFromDenseAttr(im->ctx, a)) != NULL;
  }
  FzTensor *out[1] = {NULL};
  char why[512] = "";
  bool ran = ok;
  if (ok) {
    FzInterpOptions opts;
    memset(&opts, 0, sizeof opts);
    opts.quiet = true;
    opts.errorMessage = why;
    opts.errorMessageSize = sizeof why;
    ok = fzInterpretOp(op, in, &opts, out);
  }
  for (size_t i = 0; i < n; ++i)
    fzTensorDestroy(in[i]);
  if (!ok && ran && why[0] && !fold_unsupported(why)) {
    fzOnnxError(im, "cannot be computed from its constant inputs: %s", why);
    fzOpErase(op);
    return NULL;
  }
  if (!ok)
    return result;
  FzAttr *a = fzTensorToDenseAttr(out[0]);
  fzTensorDestroy(out[0]);
  FzOp *c = a ? fzGraphCreateConstant(&im->b, a, fzOpGetLoc(op)) : NULL;
  if (!c)
    return result;
  fzOpErase(op);
  return fzOpGetResult(c, 0);
}

#define MAX_PROPS 8

FzValue *fzOnnxEmitV(FzOnnxImporter *im, const char *opName, size_t n,
                     FzValue *const *operands, FzType *resultType,
                     va_list ap) {
  FzNamedAttr props[MAX_PROPS];
  size_t np = 0;
  bool ok = true;
  for (const char *name; (name = va_arg(ap, const char *));) {
    FzAttr *value = va_arg(ap, FzAttr *);
    if (!value || np == MAX_PROPS) {
      ok = false;
      continue;
    }
    props[np].name = fzIdentGet(im->ctx, fzStringRefFromCString(name));
    props[np++].value = value;
  }
  for (size_t i = 0; i < n; ++i)
    ok = ok && operands[i];
  if (!ok)
    return NULL;
  const FzOpDef *def =
      fzContextLookupOpDef(im->ctx, fzStringRefFromCString(opName));
  if (!def) {
    fzOnnxError(im, "internal error: op '%s' is not registered", opName);
    return NULL;
  }
  FzType *rt = resultType;
  if (!rt) {
    FzType *small[16], **types = small, *out[4] = {NULL, NULL, NULL, NULL};
    /* Variadic ops (Concat, Sum) may have any number of operands. */
    if (n > 16 && !(types = fzOnnxAlloc(im, n * sizeof *types)))
      return NULL;
    if (!def->inferResultTypes) {
      fzOnnxError(im, "internal error: op '%s' cannot infer its result "
                      "type", opName);
      return NULL;
    }
    for (size_t i = 0; i < n; ++i)
      types[i] = fzValueGetType(operands[i]);
    FzAttr *dict = fzDictAttrGet(im->ctx, np, props, im->nodeLoc);
    if (!dict ||
        !def->inferResultTypes(im->ctx, im->nodeLoc, n, types, NULL, dict,
                               out) ||
        !(rt = out[0]))
      return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, im->ctx, fzStringRefFromCString(opName), im->nodeLoc);
  fzOpStateAddOperands(&st, n, operands);
  for (size_t i = 0; i < np; ++i)
    fzOpStateAddProp(&st, fzIdentGetString(props[i].name), props[i].value);
  fzOpStateAddResults(&st, 1, &rt);
  FzOp *op = fzBuilderCreate(&im->b, &st);
  if (!op)
    return NULL;
  if (!fzOpVerify(op)) {
    fzOpErase(op);
    return NULL;
  }
  return try_fold(im, op);
}

FzValue *fzOnnxEmit(FzOnnxImporter *im, const char *opName, size_t n,
                    FzValue *const *operands, FzType *resultType, ...) {
  va_list ap;
  va_start(ap, resultType);
  FzValue *v = fzOnnxEmitV(im, opName, n, operands, resultType, ap);
  va_end(ap);
  return v;
}

FzValue *fzOnnxUnary(FzOnnxImporter *im, const char *opName, FzValue *x) {
  return fzOnnxEmit(im, opName, 1, &x, NULL, NULL);
}

FzValue *fzOnnxBinary(FzOnnxImporter *im, const char *opName, FzValue *a,
                      FzValue *b) {
  FzValue *ops[2] = {a, b};
  return fzOnnxEmit(im, opName, 2, ops, NULL, NULL);
}

FzValue *fzOnnxCompare(FzOnnxImporter *im, const char *pred, FzValue *a,
                       FzValue *b) {
  FzValue *ops[2] = {a, b};
  return fzOnnxEmit(im, "graph.compare", 2, ops, NULL, "predicate",
                    fzStringAttrGet(im->ctx, fzStringRefFromCString(pred)),
                    NULL);
}

FzValue *fzOnnxSelect(FzOnnxImporter *im, FzValue *c, FzValue *a,
                      FzValue *b) {
  FzValue *ops[3] = {c, a, b};
  return fzOnnxEmit(im, "graph.select", 3, ops, NULL, NULL);
}

FzValue *fzOnnxCast(FzOnnxImporter *im, FzValue *x, FzType *elt) {
  if (!x || fzOnnxElt(x) == elt)
    return x;
  FzType *t = fzTensorTypeGet(im->ctx, fzOnnxRank(x), fzOnnxShape(x), elt,
                              NULL);
  return t ? fzOnnxEmit(im, "graph.cast", 1, &x, t, NULL) : NULL;
}

FzValue *fzOnnxReshape(FzOnnxImporter *im, FzValue *x, size_t rank,
                       const int64_t *shape) {
  if (!x)
    return NULL;
  if (fzOnnxRank(x) == rank &&
      (rank == 0 || !memcmp(fzOnnxShape(x), shape, rank * sizeof *shape)))
    return x;
  FzType *t = fzTensorTypeGet(im->ctx, rank, shape, fzOnnxElt(x), NULL);
  return t ? fzOnnxEmit(im, "graph.reshape", 1, &x, t, NULL) : NULL;
}

FzValue *fzOnnxBroadcastTo(FzOnnxImporter *im, FzValue *x, size_t rank,
                           const int64_t *shape) {
  if (!x)
    return NULL;
  if (fzOnnxRank(x) == rank &&
      (rank == 0 || !memcmp(fzOnnxShape(x), shape, rank * sizeof *shape)))
    return x;
  FzType *t = fzTensorTypeGet(im->ctx, rank, shape, fzOnnxElt(x), NULL);
  return t ? fzOnnxEmit(im, "graph.broadcast", 1, &x, t, NULL) : NULL;
}

static FzAttr *i64_array(FzOnnxImporter *im, size_t n, const int64_t *v) {
  return fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), n, v);
}

FzValue *fzOnnxTranspose(FzOnnxImporter *im, FzValue *x, size_t rank,
                         const int64_t *perm) {
  bool identity = true;
  for (size_t i = 0; i < rank; ++i)
    identity = identity && perm[i] == (int64_t)i;
  if (!x || identity)
    return x;
  return fzOnnxEmit(im, "graph.transpose", 1, &x, NULL, "perm",
                    i64_array(im, rank, perm), NULL);
}

FzValue *fzOnnxReduce(FzOnnxImporter *im, const char *opName, FzValue *x,
                      size_t numAxes, const int64_t *axes, bool keepdims) {
  FzAttr *keep = fzBoolAttrGet(im->ctx, keepdims);
  if (!axes)
    return fzOnnxEmit(im, opName, 1, &x, NULL, "keepdims", keep, NULL);
  return fzOnnxEmit(im, opName, 1, &x, NULL, "axes",
                    i64_array(im, numAxes, axes), "keepdims", keep, NULL);
}

FzValue *fzOnnxSlice(FzOnnxImporter *im, FzValue *x, const int64_t *starts,
                     const int64_t *limits, const int64_t *strides) {
  if (!x)
    return NULL;
  size_t r = fzOnnxRank(x);
  bool whole = true;
  for (size_t i = 0; i < r; ++i)
    whole = whole && starts[i] == 0 && limits[i] == fzOnnxDim(x, i) &&
            strides[i] == 1;
  if (whole)
    return x;
  return fzOnnxEmit(im, "graph.slice", 1, &x, NULL, "starts",
                    i64_array(im, r, starts), "limits",
                    i64_array(im, r, limits), "strides",
                    i64_array(im, r, strides), NULL);
}

/*===--- Attributes -------------------------------------------------------===*/

const Onnx__AttributeProto *fzOnnxAttr(FzOnnxImporter *im,
                                       const char *name) {
  const Onnx__NodeProto *n = im->node;
  for (size_t i = 0; n && i < n->n_attribute; ++i)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
      return n->attribute[i];
  return NULL;
}

#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

/* The attribute's type (guessed from its fields when the old-style
 * producer left it unset). */
static int attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type)
    return a->type;
  if (a->has_f) return AT(FLOAT);
  if (a->has_i) return AT(INT);
  if (a->has_s) return AT(STRING);
  if (a->t) return AT(TENSOR);
  if (a->n_floats) return AT(FLOATS);
  if (a->n_ints) return AT(INTS);
  return AT(UNDEFINED);
}

static bool wrong_type(FzOnnxImporter *im, const char *name,
                       const char *want) {
  return fzOnnxError(im, "attribute '%s' must be %s", name, want);
}

bool fzOnnxAttrInt(FzOnnxImporter *im, const char *name, int64_t dflt,
                   int64_t *out) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  *out = dflt;
  if (!a)
    return true;
  if (attr_type(a) != AT(INT))
    return wrong_type(im, name, "an int");
  *out = a->i;
  return true;
}

bool fzOnnxAttrFloat(FzOnnxImporter *im, const char *name, double dflt,
                     double *out) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  *out = dflt;
  if (!a)
    return true;
  if (attr_type(a) != AT(FLOAT))
    return wrong_type(im, name, "a float");
  *out = a->f;
  return true;
}

bool fzOnnxAttrString(FzOnnxImporter *im, const char *name,
                      const char *dflt, const char **out) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  *out = dflt;
  if (!a)
    return true;
  if (attr_type(a) != AT(STRING))
    return wrong_type(im, name, "a string");
  char *s = fzOnnxAlloc(im, a->s.len + 1);
  if (!s)
    return false;
  if (a->s.len)
    memcpy(s, a->s.data, a->s.len);
  s[a->s.len] = '\0';
  *out = s;
  return true;
}

bool fzOnnxAttrInts(FzOnnxImporter *im, const char *name, int64_t **vals,
                    size_t *n, bool *present) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  *vals = NULL;
  *n = 0;
  *present = a != NULL;
  if (!a)
    return true;
  if (attr_type(a) != AT(INTS))
    return wrong_type(im, name, "a list of ints");
  *vals = fzOnnxAlloc(im, a->n_ints * sizeof **vals);
  if (!*vals)
    return false;
  if (a->n_ints)
    memcpy(*vals, a->ints, a->n_ints * sizeof **vals);
  *n = a->n_ints;
  return true;
}

bool fzOnnxAttrFloats(FzOnnxImporter *im, const char *name, double **vals,
                      size_t *n, bool *present) {
  const Onnx__AttributeProto *a = fzOnnxAttr(im, name);
  *vals = NULL;
  *n = 0;
  *present = a != NULL;
  if (!a)
    return true;
  if (attr_type(a) != AT(FLOATS))
    return wrong_type(im, name, "a list of floats");
  *vals = fzOnnxAlloc(im, a->n_floats * sizeof **vals);
  if (!*vals)
    return false;
  for (size_t i = 0; i < a->n_floats; ++i)
    (*vals)[i] = a->floats[i];
  *n = a->n_floats;
  return true;
}

FzAttr *fzOnnxFloatAttr(FzOnnxImporter *im, double v) {
  bool exact = (double)(float)v == v || v != v;
  return fzFloatAttrGet(im->ctx, exact ? fzF32TypeGet(im->ctx)
                                       : fzF64TypeGet(im->ctx), v);
}

bool fzOnnxErrorAttrValue(FzOnnxImporter *im, const char *name,
                          const char *value) {
  return fzOnnxError(im, "unsupported attribute '%s' value '%s'", name,
                     value);
}
