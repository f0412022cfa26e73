/* transforms/fusion/canonical.c - the canonical order of the nodes, and
 * sorting by it.
 *
 * Positions come from a post-order depth-first walk from the terminator's
 * operands (in operand order), visiting each op's producers in operand
 * order. It depends only on the graph, never on the order of independent
 * ops in the input, and it follows the order a program is naturally
 * written in. Ops that the terminator does not reach (dead ones, side
 * effects) are walked from their sinks, taken in the order of a
 * structural hash of their ancestry (op names, attributes, types: their
 * contents, never pointers), ties in block order. Every decision of the
 * pass visits candidates by position, which makes its groups independent
 * of the input's order. The walk is iterative: a chain of a million ops
 * is fine.
 */
#include <stdlib.h>
#include <string.h>

#include "transforms/fusion/fusion_internal.h"

/*===--- Canonical order ------------------------------------------------===*/

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return mix(h, n);
}

static uint64_t hash_str(uint64_t h, FzStringRef s) {
  return hash_bytes(h, s.data, s.length);
}

static uint64_t hash_type(uint64_t h, const FzType *t) {
  if (!t)
    return mix(h, 0);
  FzTypeKind k = fzTypeGetKind(t);
  h = mix(h, (uint64_t)k + 1);
  switch (k) {
  case FZ_TYPE_INTEGER:
    return mix(h, fzTypeGetBitWidth(t));
  case FZ_TYPE_TENSOR:
  case FZ_TYPE_VECTOR:
  case FZ_TYPE_BUFFER: {
    size_t r = fzShapedTypeGetRank(t);
    h = mix(hash_type(h, fzShapedTypeGetElementType(t)), (uint64_t)r);
    for (size_t i = 0; r != FZ_UNRANKED && i < r; ++i)
      h = mix(h, (uint64_t)fzShapedTypeGetDim(t, i));
    return h;
  }
  case FZ_TYPE_FUNCTION:
    for (size_t i = 0; i < fzFunctionTypeGetNumInputs(t); ++i)
      h = hash_type(h, fzFunctionTypeGetInput(t, i));
    for (size_t i = 0; i < fzFunctionTypeGetNumResults(t); ++i)
      h = hash_type(mix(h, 7), fzFunctionTypeGetResult(t, i));
    return h;
  case FZ_TYPE_OPAQUE:
    return hash_str(hash_str(h, fzOpaqueTypeGetDialect(t)),
                    fzOpaqueTypeGetBody(t));
  default:
    return h;
  }
}

static uint64_t hash_attr(uint64_t h, const FzAttr *a) {
  if (!a)
    return mix(h, 0);
  FzAttrKind k = fzAttrGetKind(a);
  h = mix(h, (uint64_t)k + 1);
  switch (k) {
  case FZ_ATTR_INTEGER:
    return hash_type(mix(h, (uint64_t)fzIntegerAttrGetValue(a)),
                     fzAttrGetType(a));
  case FZ_ATTR_FLOAT: {
    double d = fzFloatAttrGetValue(a);
    return hash_type(hash_bytes(h, &d, sizeof d), fzAttrGetType(a));
  }
  case FZ_ATTR_BOOL:
    return mix(h, fzBoolAttrGetValue(a));
  case FZ_ATTR_STRING:
    return hash_str(h, fzStringAttrGetValue(a));
  case FZ_ATTR_TYPE:
    return hash_type(h, fzTypeAttrGetValue(a));
  case FZ_ATTR_ARRAY:
    for (size_t i = 0; i < fzArrayAttrGetSize(a); ++i)
      h = hash_attr(h, fzArrayAttrGetElement(a, i));
    return h;
  case FZ_ATTR_DICT:
    for (size_t i = 0; i < fzDictAttrGetSize(a); ++i) {
      FzNamedAttr e = fzDictAttrGetEntry(a, i);
      h = hash_attr(hash_str(h, fzIdentGetString(e.name)), e.value);
    }
    return h;
  case FZ_ATTR_SYMBOL_REF:
    h = hash_str(h, fzSymbolRefAttrGetRoot(a));
    for (size_t i = 0; i < fzSymbolRefAttrGetNumNested(a); ++i)
      h = hash_str(h, fzSymbolRefAttrGetNested(a, i));
    return h;
  case FZ_ATTR_DENSE:
    return hash_bytes(hash_type(h, fzAttrGetType(a)), fzDenseAttrGetData(a),
                      fzDenseAttrGetNumBytes(a));
  case FZ_ATTR_DENSE_ARRAY:
    for (size_t i = 0; i < fzDenseArrayAttrGetSize(a); ++i)
      h = mix(h, (uint64_t)fzDenseArrayAttrGetInt(a, i));
    return h;
  case FZ_ATTR_OPAQUE:
    return hash_str(hash_str(h, fzOpaqueAttrGetDialect(a)),
                    fzOpaqueAttrGetBody(a));
  default:
    return h;
  }
}

/* Structural hashes of every node's ancestry, in block order (which is a
 * topological order of the body). */
static uint64_t *ancestry_hashes(FFuser *F) {
  uint64_t *h = fzCalloc(F->ctx, F->n ? F->n : 1, sizeof *h);
  if (!h)
    return NULL;
  for (uint32_t i = 0; i < F->n; ++i) {
    FzOp *op = F->nodes[i].op;
    uint64_t x = hash_str(1, fzIdentGetString(fzOpGetName(op)));
    x = hash_attr(hash_attr(x, fzOpGetPropDict(op)), fzOpGetAttrDict(op));
    for (size_t r = 0; r < fzOpGetNumResults(op); ++r)
      x = hash_type(x, fzValueGetType(fzOpGetResult(op, r)));
    for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
      FzValue *v = fzOpGetOperand(op, k);
      FzOp *d = fzValueGetDefiningOp(v);
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      if (dn != NO_NODE)
        x = mix(mix(x, h[dn]), fzValueGetIndex(v));
      else
        x = mix(mix(x, 0x5151), fzValueGetIndex(v));
    }
    h[i] = x;
  }
  return h;
}

typedef struct Frame {
  uint32_t node, next;
} Frame;

/* Post-order from root over producers; appends to F->order. */
static bool dfs_from(FFuser *F, uint32_t root, bool *seen, Frame **stack,
                     size_t *cap) {
  if (seen[root])
    return true;
  size_t sp = 0;
  seen[root] = true;
  (*stack)[sp++] = (Frame){root, 0};
  while (sp) {
    Frame *f = &(*stack)[sp - 1];
    FNode *n = &F->nodes[f->node];
    if (f->next < n->npred) {
      uint32_t p = n->pred[f->next++];
      if (p == NO_NODE || seen[p])
        continue;
      seen[p] = true;
      if (sp == *cap) {
        size_t nc = *cap * 2;
        Frame *s = fzRealloc(F->ctx, *stack, nc * sizeof *s);
        if (!s)
          return !(F->failed = true);
        *stack = s;
        *cap = nc;
      }
      (*stack)[sp++] = (Frame){p, 0};
      continue;
    }
    F->nodes[f->node].pos = F->numOrdered;
    F->order[F->numOrdered++] = f->node;
    --sp;
  }
  return true;
}

static int cmp_sink(const void *a, const void *b) {
  const uint64_t *x = a, *y = b; /* {hash, index} pairs */
  if (x[0] != y[0])
    return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

bool ffCanonicalOrder(FFuser *F) {
  bool *seen = fzCalloc(F->ctx, F->n ? F->n : 1, sizeof *seen);
  size_t cap = 256;
  Frame *stack = fzMalloc(F->ctx, cap * sizeof *stack);
  bool ok = seen && stack;
  F->numOrdered = 0;
  if (ok && F->terminator)
    for (size_t k = 0; ok && k < fzOpGetNumOperands(F->terminator); ++k) {
      FzOp *d = fzValueGetDefiningOp(fzOpGetOperand(F->terminator, k));
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      if (dn != NO_NODE)
        ok = dfs_from(F, dn, seen, &stack, &cap);
    }
  if (ok && F->numOrdered < F->n) {
    /* Sinks the terminator does not reach, by ancestry hash. */
    uint64_t *h = ancestry_hashes(F);
    uint64_t *sinks = fzMalloc(F->ctx, 2 * sizeof *sinks * F->n);
    size_t ns = 0;
    ok = h && sinks;
    for (uint32_t i = 0; ok && i < F->n; ++i)
      if (!seen[i] && F->nodes[i].nsucc == 0) {
        sinks[2 * ns] = h[i];
        sinks[2 * ns + 1] = i;
        ns++;
      }
    if (ok)
      qsort(sinks, ns, 2 * sizeof *sinks, cmp_sink);
    for (size_t s = 0; ok && s < ns; ++s)
      ok = dfs_from(F, (uint32_t)sinks[2 * s + 1], seen, &stack, &cap);
    /* Anything left (impossible in a DAG) in block order. */
    for (uint32_t i = 0; ok && i < F->n; ++i)
      ok = dfs_from(F, i, seen, &stack, &cap);
    fzFree(F->ctx, h);
    fzFree(F->ctx, sinks);
  }
  fzFree(F->ctx, seen);
  fzFree(F->ctx, stack);
  return ok && !F->failed;
}

/* Sorts ids by canonical position: insertion sort for short lists, merge
 * sort otherwise (C11's qsort takes no context pointer, and the pass keeps
 * no global state). */
static void sort_ids_rec(FFuser *F, uint32_t *a, uint32_t *tmp, size_t n) {
  if (n <= 16) {
    for (size_t i = 1; i < n; ++i) {
      uint32_t v = a[i];
      size_t j = i;
      while (j > 0) {
        const FNode *p = &F->nodes[a[j - 1]], *q = &F->nodes[v];
        if (p->pos < q->pos || (p->pos == q->pos && p->sub <= q->sub))
          break;
        a[j] = a[j - 1];
        --j;
      }
      a[j] = v;
    }
    return;
  }
  size_t h = n / 2;
  sort_ids_rec(F, a, tmp, h);
  sort_ids_rec(F, a + h, tmp, n - h);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) {
    const FNode *p = &F->nodes[a[i]], *q = &F->nodes[a[j]];
    bool le = p->pos < q->pos || (p->pos == q->pos && p->sub <= q->sub);
    tmp[k++] = le ? a[i++] : a[j++];
  }
  while (i < h)
    tmp[k++] = a[i++];
  while (j < n)
    tmp[k++] = a[j++];
  memcpy(a, tmp, n * sizeof *a);
}

void ffSortByPos(FFuser *F, uint32_t *ids, size_t n) {
  if (n <= 16) {
    sort_ids_rec(F, ids, NULL, n);
    return;
  }
  uint32_t *tmp = fzMalloc(F->ctx, n * sizeof *tmp);
  if (!tmp) {
    F->failed = true;
    return;
  }
  sort_ids_rec(F, ids, tmp, n);
  fzFree(F->ctx, tmp);
}

