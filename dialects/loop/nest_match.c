/* dialects/loop/nest_match.c - the basic queries on a contraction nest
 * (nest_match.h): dependence masks, the ops a nest may hold, whether a
 * value is defined inside it. */
#include "dialects/loop/nest_match.h"

uint64_t tileDeps(const TileNest *T, FzValue *v) {
  void *m = fzPtrMapGet(&T->deps, v);
  return m ? (uint64_t)(uintptr_t)m - 1 : 0;
}

/* Ops allowed in the nest besides the reduction loop and stores. */
bool tilePlainOp(FzOp *op) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  switch (c) {
  case FZ_LOOP_OP_UNKNOWN:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_VIEW:
  case FZ_LOOP_OP_DIM:
  case FZ_LOOP_OP_CONSTANT_BUFFER:
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_LOAD:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_SPLAT:
    return false;
  default:
    break;
  }
  if (fzOpGetNumRegions(op) || fzOpGetNumResults(op) != 1)
    return false;
  return fzTypeGetKind(fzValueGetType(fzOpGetResult(op, 0))) !=
         FZ_TYPE_VECTOR;
}

bool tileInNest(TileNest *T, FzValue *v) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *p = b ? fzBlockGetParentOp(b) : NULL;
  return p && fzOpIsAncestor(T->par, p);
}
