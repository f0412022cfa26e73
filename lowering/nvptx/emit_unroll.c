/* lowering/nvptx/emit_unroll.c - several iterations of a straight-line
 * loop body emitted side by side, loads first and stores last.
 *
 * A thread of a GPU kernel runs `count` consecutive iterations (a 16-byte
 * chunk). LLVM's load/store vectorizer only merges accesses that are a
 * few dozen instructions apart, so emitting the iterations one after the
 * other leaves 2-byte loads and stores wherever the body is long (bf16
 * gelu: ~80 instructions per element). Here each body op is put in one
 * of three phases:
 *   0  loads and the ops their addresses depend on,
 *   1  the rest (arithmetic),
 *   2  stores,
 * and the phases are emitted in order, each for every iteration, so the
 * loads of a chunk are adjacent, and so are its stores. Each iteration
 * keeps its own values: after a phase, the LLVM values of the body's
 * block arguments and results are saved per iteration and restored
 * before the next phase of that iteration.
 * When a load's address depends on a loop-carried value (a block
 * argument after the numIvs induction variables), every op stays in phase 1
 * and the order is the body's.
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static long op_index(const FzNvUnroll *U, FzOp *op) {
  for (size_t i = 0; i < U->numOps; ++i)
    if (U->ops[i] == op)
      return (long)i;
  return -1;
}

/* Puts op (of the body) and what its operands need into phase 0. False
 * when that reaches an iteration argument other than argument 0. */
static bool pull_into_loads(FzNvUnroll *U, FzOp *op) {
  long i = op_index(U, op);
  if (i < 0 || U->phase[i] == 0)
    return true;
  U->phase[i] = 0;
  for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
    FzValue *v = fzOpGetOperand(op, k);
    if (fzValueIsBlockArgument(v)) {
      if (fzValueGetParentBlock(v) == U->body &&
          fzValueGetIndex(v) >= U->numIvs)
        return false;
      continue;
    }
    FzOp *def = fzValueGetDefiningOp(v);
    if (def && fzOpGetBlock(def) == U->body && !pull_into_loads(U, def))
      return false;
  }
  return true;
}

bool fzNvUnrollInit(FzNvUnroll *U, FzLLEmitter *E, FzBlock *body,
                    size_t numIvs, unsigned count) {
  memset(U, 0, sizeof *U);
  U->numIvs = numIvs;
  U->E = E;
  U->body = body;
  U->count = count;
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op && op != last;
       op = fzOpGetNextInBlock(op))
    U->numOps++;
  U->numArgs = fzBlockGetNumArguments(body);
  U->ops = calloc(U->numOps + 1, sizeof *U->ops);
  U->phase = calloc(U->numOps + 1, 1);
  U->width = U->numArgs + U->numOps;
  U->saved = calloc(U->width * count + 1, sizeof *U->saved);
  if (!U->ops || !U->phase || !U->saved) {
    fzNvUnrollFree(U);
    return E->failed = true, false;
  }
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(body); op && op != last;
       op = fzOpGetNextInBlock(op), ++i) {
    U->ops[i] = op;
    FzLoopOpcode c = fzLoopGetOpcode(op);
    U->phase[i] = c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE ? 2
                                                                        : 1;
  }
  bool ok = true;
  for (i = 0; i < U->numOps && ok; ++i) {
    FzLoopOpcode c = fzLoopGetOpcode(U->ops[i]);
    if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD)
      ok = pull_into_loads(U, U->ops[i]);
  }
  for (i = 0; i < U->numOps; ++i)
    if (!ok || count == 1)
      U->phase[i] = 1; /* the body's own order */
  return true;
}

void fzNvUnrollFree(FzNvUnroll *U) {
  free(U->ops);
  free(U->phase);
  free(U->saved);
  U->ops = NULL;
  U->phase = NULL;
  U->saved = NULL;
}

static FzValue *slot_value(const FzNvUnroll *U, size_t s) {
  return s < U->numArgs ? fzBlockGetArgument(U->body, s)
         : fzOpGetNumResults(U->ops[s - U->numArgs]) == 1
             ? fzOpGetResult(U->ops[s - U->numArgs], 0)
             : NULL;
}

bool fzNvUnrollEmit(FzNvUnroll *U, unsigned u, unsigned phase,
                    FzValue *const *bindVals, LLVMValueRef *bindTo,
                    size_t numBind) {
  FzLLEmitter *E = U->E;
  LLVMValueRef *saved = U->saved + (size_t)u * U->width;
  if (phase > 0)
    for (size_t s = 0; s < U->width; ++s) {
      FzValue *v = slot_value(U, s);
      if (v && saved[s])
        fzLLSet(E, v, saved[s]);
    }
  for (size_t k = 0; k < numBind; ++k)
    fzLLSet(E, bindVals[k], bindTo[k]);
  for (size_t i = 0; i < U->numOps && !E->failed; ++i) {
    if (U->phase[i] != phase)
      continue;
    FzOp *op = U->ops[i];
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (fzOpGetNumResults(op) > 1)
      return fzLLError(E, op, "emit-ptx: internal error: an op with several "
                              "results in an unrolled GPU loop body");
    bool ok;
    switch (c) {
    case FZ_LOOP_OP_LOAD:
    case FZ_LOOP_OP_STORE:
    case FZ_LOOP_OP_VECTOR_LOAD:
    case FZ_LOOP_OP_VECTOR_STORE:
    case FZ_LOOP_OP_VIEW:
    case FZ_LOOP_OP_DIM:
    case FZ_LOOP_OP_CONSTANT_BUFFER:
      ok = fzLLEmitMemoryOp(E, op, c);
      break;
    case FZ_LOOP_OP_FOR:
    case FZ_LOOP_OP_PARALLEL:
    case FZ_LOOP_OP_BARRIER:
    case FZ_LOOP_OP_ALLOC:
    case FZ_LOOP_OP_DEALLOC:
    case FZ_LOOP_OP_YIELD:
    case FZ_LOOP_OP_UNKNOWN:
      ok = fzLLError(E, op, "emit-ptx: internal error: op not expected in "
                            "an unrolled GPU loop body");
      break;
    default:
      ok = fzLLEmitScalarOp(E, op, c);
      break;
    }
    if (!ok)
      return false;
  }
  for (size_t s = 0; s < U->width; ++s) {
    FzValue *v = slot_value(U, s);
    saved[s] = v ? fzPtrMapGet(&E->values, v) : NULL;
  }
  return !E->failed;
}
