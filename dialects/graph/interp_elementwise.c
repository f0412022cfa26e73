/* dialects/graph/interp_elementwise.c - interpreter kernels of the
 * elementwise ops: the unary and binary families, prelu, cast, compare
 * and select.
 *
 * Floats are computed in double from the operands' exact values and
 * rounded once to the result dtype. Integer tensors use the families'
 * int64 functions where they have one (exact, wrapping); otherwise the
 * double function, whose result is truncated and saturated.
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

bool fzGraphKernelUnary(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                        FzTensor **res) {
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  double p[4] = {0, 0, 0, 0};
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  if (info->params && !info->params(&d, &a, p))
    return false;
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  FzTensor *y = res[0];
  int64_t n = x->numElements;
  if (fzGraphIsIntType(x->dtype) && info->unaryI) {
    for (int64_t i = 0; i < n; ++i)
      fzTensorSetI64(y, i, info->unaryI(fzTensorGetI64(x, i), p));
    return true;
  }
  if (!info->unaryF)
    return fzGraphInterpError(in, op,
                              "has no kernel for element type of operand #0");
  double *v = fzGraphLoadF64(x);
  if (!v)
    return false;
  for (int64_t i = 0; i < n; ++i)
    v[i] = info->unaryF(v[i], p);
  fzGraphStoreF64(y, v);
  fzFree(in->ctx, v);
  return true;
}

bool fzGraphKernelBinary(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 2, (const FzTensor *const *)ops);
  int64_t n = y->numElements;
  if (fzGraphIsIntType(y->dtype) && info->binaryI) {
    int64_t *a = fzGraphLoadI64(ops[0]), *b = fzGraphLoadI64(ops[1]);
    bool ok = a && b;
    for (int64_t i = 0; ok && i < n; ++i, fzGraphBcastNext(&it)) {
      int64_t r;
      if (!info->binaryI(a[it.off[0]], b[it.off[1]], &r))
        ok = fzGraphInterpError(in, op,
                                "integer division by zero (at result element "
                                "%lld)",
                                (long long)i);
      else
        fzTensorSetI64(y, i, r);
    }
    fzFree(in->ctx, a);
    fzFree(in->ctx, b);
    return ok;
  }
  if (!info->binaryF)
    return fzGraphInterpError(in, op,
                              "has no kernel for element type of operand #0");
  double *a = fzGraphLoadF64(ops[0]), *b = fzGraphLoadF64(ops[1]);
  double *r = fzMalloc(in->ctx, (size_t)(n ? n : 1) * sizeof *r);
  bool ok = a && b && r;
  for (int64_t i = 0; ok && i < n; ++i, fzGraphBcastNext(&it))
    r[i] = info->binaryF(a[it.off[0]], b[it.off[1]]);
  if (ok)
    fzGraphStoreF64(y, r);
  fzFree(in->ctx, a);
  fzFree(in->ctx, b);
  fzFree(in->ctx, r);
  return ok;
}

bool fzGraphKernelPrelu(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                        FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 2, (const FzTensor *const *)ops);
  double *x = fzGraphLoadF64(ops[0]), *s = fzGraphLoadF64(ops[1]);
  bool ok = x && s;
  for (int64_t i = 0; ok && i < y->numElements; ++i, fzGraphBcastNext(&it)) {
    double v = x[it.off[0]];
    fzTensorSetF64(y, i, v >= 0 ? v : s[it.off[1]] * v);
  }
  fzFree(in->ctx, x);
  fzFree(in->ctx, s);
  return ok;
}

bool fzGraphKernelCast(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                       FzTensor **res) {
  const FzTensor *x = ops[0];
  FzTensor *y = res[0] =
      fzGraphInterpCreateResult(in, op, 0, x->rank, x->shape);
  if (!y)
    return false;
  bool srcInt = fzGraphIsIntType(x->dtype), dstInt = fzGraphIsIntType(y->dtype);
  bool toBool = dstInt && fzTypeGetBitWidth(y->dtype) == 1;
  for (int64_t i = 0; i < x->numElements; ++i) {
    if (toBool)
      fzTensorSetI64(
          y, i, srcInt ? fzTensorGetI64(x, i) != 0 : fzTensorGetF64(x, i) != 0);
    else if (srcInt)
      fzTensorSetI64(y, i, fzTensorGetI64(x, i));
    else
      fzTensorSetF64(y, i, fzTensorGetF64(x, i));
  }
  return true;
}

enum { P_EQ, P_NE, P_LT, P_LE, P_GT, P_GE };

static int predicate_of(FzOp *op) {
  static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("predicate"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_STRING)
    return -1;
  FzStringRef s = fzStringAttrGetValue(a);
  for (int i = 0; i < 6; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(names[i])))
      return i;
  return -1;
}

static bool compare_f(int p, double a, double b) {
  switch (p) {
  case P_EQ:
    return a == b;
  case P_NE:
    return a != b;
  case P_LT:
    return a < b;
  case P_LE:
    return a <= b;
  case P_GT:
    return a > b;
  default:
    return a >= b;
  }
}

static bool compare_i(int p, int64_t a, int64_t b) {
  switch (p) {
  case P_EQ:
    return a == b;
  case P_NE:
    return a != b;
  case P_LT:
    return a < b;
  case P_LE:
    return a <= b;
  case P_GT:
    return a > b;
  default:
    return a >= b;
  }
}

bool fzGraphKernelCompare(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                          FzTensor **res) {
  int p = predicate_of(op);
  if (p < 0)
    return fzGraphInterpError(in, op, "has an invalid 'predicate'");
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  unsigned char *out = y->data;
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 2, (const FzTensor *const *)ops);
  bool isInt = fzGraphIsIntType(ops[0]->dtype);
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it))
    out[i] = isInt ? compare_i(p, fzTensorGetI64(ops[0], it.off[0]),
                               fzTensorGetI64(ops[1], it.off[1]))
                   : compare_f(p, fzTensorGetF64(ops[0], it.off[0]),
                               fzTensorGetF64(ops[1], it.off[1]));
  return true;
}

bool fzGraphKernelSelect(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  size_t esz = fzTypeGetStorageSize(y->dtype);
  const unsigned char *c = ops[0]->data;
  const unsigned char *a = ops[1]->data, *b = ops[2]->data;
  unsigned char *out = y->data;
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 3, (const FzTensor *const *)ops);
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it)) {
    const unsigned char *src = (c[it.off[0]] & 1) ? a + (size_t)it.off[1] * esz
                                                  : b + (size_t)it.off[2] * esz;
    memcpy(out + (size_t)i * esz, src, esz);
  }
  return true;
}
