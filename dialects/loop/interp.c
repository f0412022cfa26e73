/* dialects/loop/interp.c - the loop dialect's reference interpreter.
 *
 * A function is first compiled into a flat program: every SSA value gets
 * a slot number, every block becomes an array of instructions holding
 * their operand and result slots, so execution never hashes a value.
 * A slot holds a scalar (double or int64, see eval.c), a pointer to its
 * own lane array (vectors), or a pointer to its own buffer descriptor
 * (buffers); storage for lanes and descriptors is allocated once per
 * slot at compile time, and an SSA value defined inside a loop body
 * simply overwrites its slot in each iteration.
 *
 * Memory: argument buffers point into the caller's FzTensors; loop.alloc
 * mallocs (through the context), and anything not freed by loop.dealloc
 * is freed at the end. Every access is bounds-checked twice: each index
 * against its dimension, and the final address against the underlying
 * allocation (which catches a bad view). Constant buffers are read-only.
 *
 * Ownership: the interpreter never keeps the caller's tensors; all its
 * state is freed before fzLoopInterpretFunction returns.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dialects/loop/loop_internal.h"

#define MAX_RANK FZ_GRAPH_MAX_RANK
#define MAX_LANES 256
#define DEFAULT_MAX_ALLOC ((int64_t)1 << 32)
#define MAX_CALL_DEPTH 64

typedef struct Buf {
  char *data;     /* address of element (0, ..., 0) */
  FzType *elt;
  size_t esz;     /* storage size of one element */
  size_t rank;
  int64_t shape[MAX_RANK];
  int64_t strides[MAX_RANK];
  char *lo, *hi;  /* the underlying allocation, for address checks */
  bool readOnly;  /* a constant buffer */
} Buf;

typedef struct Slot {
  FzLoopScalar s;
  void *p; /* FzLoopScalar[lanes] for vectors, Buf for buffers */
} Slot;

typedef struct Block Block;
typedef struct Program Program;

typedef enum InstKind { I_LOOP, I_RETURN, I_CALL, I_EXT } InstKind;

typedef struct Inst {
  FzOp *op;
  InstKind kind;
  FzLoopOpcode opc;
  int pred;
  FzType *type;    /* scalar type of the result (or of a stored value) */
  FzType *otype;   /* scalar type of operand 0 (1 for select) */
  uint32_t lanes;  /* vector lanes of the result/value; 0 for scalars */
  uint32_t nops, nres;
  uint32_t *ops, *res;
  Block *body;     /* for / parallel */
  Program *callee; /* func.call */
  Buf *constBuf;   /* constant_buffer */
} Inst;

struct Block {
  Inst *insts;
  size_t n;
  uint32_t *args;
  size_t nargs;
};

struct Program {
  FzOp *func;
  Block *entry;
  size_t numSlots;
  /* Per slot: what kind of storage it needs. */
  uint32_t *slotLanes; /* lanes for vectors, 0 otherwise */
  bool *slotIsBuf;
};

typedef struct Interp {
  FzContext *ctx;
  FzArena arena;     /* programs, instructions, constant data */
  FzPtrMap values;   /* FzValue -> slot + 1 (while compiling one program) */
  FzPtrMap programs; /* func.func -> Program */
  FzPtrMap allocs;   /* live loop.alloc data -> itself */
  FzPtrVec allocList; /* every loop.alloc data pointer, for the end */
  FzOp *module;
  int64_t maxAlloc;
  bool poison, quiet;
  char *capture;
  size_t captureCap;
  unsigned depth;
  const FzLoopInterpExtension *ext; /* foreign ops (NULL: none) */
  int64_t steps, maxSteps; /* ops executed; the budget (0: none) */
} Interp;

static bool interp_error(Interp *in, FzOp *op, const char *fmt, ...)
    FZ_PRINTF(3, 4);
static bool interp_error(Interp *in, FzOp *op, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!in->quiet)
    return fzOpEmitError(op, "%s", msg);
  if (in->capture && in->captureCap && !in->capture[0]) {
    FzStringRef name = fzIdentGetString(fzOpGetName(op));
    snprintf(in->capture, in->captureCap, "'%.*s' op %s", (int)name.length,
             name.data, msg);
  }
  return false;
}

/*===--- Compilation ----------------------------------------------------===*/

static Program *compile_function(Interp *in, FzOp *func);

typedef struct SlotList {
  uint32_t *lanes;
  bool *isBuf;
  size_t n, cap;
} SlotList;

/* The lanes of a vector type, at most MAX_LANES + 1: a type with more
 * (up to 2^40) must not wrap around in 32 bits to a small count; the op
 * using it then reports "more than MAX_LANES vector lanes". */
static uint32_t vector_lanes(const FzType *t) {
  int64_t n = fzShapedTypeGetDim(t, 0);
  return n > MAX_LANES ? MAX_LANES + 1 : (uint32_t)n;
}

static bool slot_new(Interp *in, SlotList *sl, FzValue *v, uint32_t *out) {
  if (sl->n == sl->cap) {
    size_t cap = sl->cap ? sl->cap * 2 : 64;
    uint32_t *l = fzRealloc(in->ctx, sl->lanes, cap * sizeof *l);
    if (!l)
      return false;
    sl->lanes = l;
    bool *b = fzRealloc(in->ctx, sl->isBuf, cap * sizeof *b);
    if (!b)
      return false;
    sl->isBuf = b;
    sl->cap = cap;
  }
  FzType *t = fzValueGetType(v);
  FzTypeKind k = fzTypeGetKind(t);
  sl->lanes[sl->n] = k == FZ_TYPE_VECTOR ? vector_lanes(t) : 0;
  sl->isBuf[sl->n] = k == FZ_TYPE_BUFFER;
  *out = (uint32_t)sl->n++;
  return fzPtrMapPut(&in->values, v, (void *)(uintptr_t)(*out + 1));
}

static bool slot_of(Interp *in, FzOp *op, FzValue *v, uint32_t *out) {
  void *s = fzPtrMapGet(&in->values, v);
  if (!s)
    return interp_error(in, op, "uses a value defined outside the function "
                                "being interpreted");
  *out = (uint32_t)((uintptr_t)s - 1);
  return true;
}

static Block *compile_block(Interp *in, SlotList *sl, FzBlock *b);

/* A constant buffer's memory, built once from the dense attribute. */
static Buf *make_const_buf(Interp *in, FzOp *op) {
  FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("value"));
  FzTensor *t = fzTensorFromDenseAttr(in->ctx, v);
  if (!t)
    return NULL;
  Buf *b = fzArenaAlloc(&in->arena, sizeof *b);
  size_t bytes = fzTensorGetNumBytes(t);
  char *data = fzArenaAlloc(&in->arena, bytes ? bytes : 1);
  if (!b || !data) {
    fzTensorDestroy(t);
    return NULL;
  }
  memcpy(data, t->data, bytes);
  memset(b, 0, sizeof *b);
  b->data = b->lo = data;
  b->hi = data + bytes;
  b->elt = t->dtype;
  b->esz = fzTypeGetStorageSize(t->dtype);
  b->rank = t->rank;
  int64_t st = 1;
  for (size_t i = t->rank; i-- > 0;) {
    b->shape[i] = t->shape[i];
    b->strides[i] = st;
    st *= t->shape[i];
  }
  b->readOnly = true;
  fzTensorDestroy(t);
  return b;
}

static bool compile_op(Interp *in, SlotList *sl, FzOp *op, Inst *ins) {
  memset(ins, 0, sizeof *ins);
  ins->op = op;
  ins->opc = fzLoopGetOpcode(op);
  ins->kind = I_LOOP;
  FzStringRef name = fzIdentGetString(fzOpGetName(op));
  if (ins->opc == FZ_LOOP_OP_UNKNOWN) {
    if (fzStringRefEqual(name, FZ_STR("func.return")))
      ins->kind = I_RETURN;
    else if (fzStringRefEqual(name, FZ_STR("func.call")))
      ins->kind = I_CALL;
    else if (in->ext && fzOpGetNumResults(op) == 0 &&
             in->ext->handles(in->ext->userData, op))
      ins->kind = I_EXT;
    else
      return interp_error(in, op, "is not a loop-level op; the loop "
                                  "interpreter cannot run it (was the "
                                  "function lowered?)");
  }
  ins->nops = (uint32_t)fzOpGetNumOperands(op);
  ins->nres = (uint32_t)fzOpGetNumResults(op);
  ins->ops = fzArenaAlloc(&in->arena, (ins->nops + 1) * sizeof(uint32_t));
  ins->res = fzArenaAlloc(&in->arena, (ins->nres + 1) * sizeof(uint32_t));
  if (!ins->ops || !ins->res)
    return false;
  for (uint32_t i = 0; i < ins->nops; ++i)
    if (!slot_of(in, op, fzOpGetOperand(op, i), &ins->ops[i]))
      return false;
  FzType *rt = ins->nres ? fzValueGetType(fzOpGetResult(op, 0)) : NULL;
  FzType *vt = rt;
  if (ins->opc == FZ_LOOP_OP_STORE || ins->opc == FZ_LOOP_OP_VECTOR_STORE)
    vt = fzValueGetType(fzOpGetOperand(op, 0));
  if (vt) {
    ins->type = fzLoopScalarOf(vt);
    if (fzTypeGetKind(vt) == FZ_TYPE_VECTOR)
      ins->lanes = vector_lanes(vt);
  }
  if (ins->nops) {
    size_t oi = ins->opc == FZ_LOOP_OP_SELECT ? 1 : 0;
    ins->otype = fzLoopScalarOf(fzValueGetType(fzOpGetOperand(op, oi)));
  }
  ins->pred = fzLoopCmpGetPredicate(op);
  if (ins->lanes > MAX_LANES)
    return interp_error(in, op, "has more than %d vector lanes", MAX_LANES);
  if (ins->opc == FZ_LOOP_OP_FOR || ins->opc == FZ_LOOP_OP_PARALLEL) {
    ins->body = compile_block(in, sl, fzLoopGetBody(op));
    if (!ins->body)
      return false;
  }
  if (ins->opc == FZ_LOOP_OP_CONSTANT_BUFFER &&
      !(ins->constBuf = make_const_buf(in, op)))
    return false;
  if (ins->kind == I_CALL) {
    FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("callee"));
    FzOp *f = callee && in->module
                  ? fzSymbolTableLookupIn(in->module,
                                          fzSymbolRefAttrGetRoot(callee))
                  : NULL;
    if (!f)
      return interp_error(in, op, "calls a function the interpreter cannot "
                                  "find");
    ins->callee = compile_function(in, f);
    if (!ins->callee)
      return false;
  }
  /* Results are numbered after the regions: their slots are fresh. */
  for (uint32_t i = 0; i < ins->nres; ++i)
    if (!slot_new(in, sl, fzOpGetResult(op, i), &ins->res[i]))
      return false;
  return true;
}

static Block *compile_block(Interp *in, SlotList *sl, FzBlock *b) {
  if (!b)
    return NULL;
  Block *blk = fzArenaAlloc(&in->arena, sizeof *blk);
  if (!blk)
    return NULL;
  blk->nargs = fzBlockGetNumArguments(b);
  blk->args = fzArenaAlloc(&in->arena, (blk->nargs + 1) * sizeof(uint32_t));
  blk->n = fzBlockGetNumOps(b);
  blk->insts = fzArenaAlloc(&in->arena, (blk->n + 1) * sizeof(Inst));
  if (!blk->args || !blk->insts)
    return NULL;
  for (size_t i = 0; i < blk->nargs; ++i)
    if (!slot_new(in, sl, fzBlockGetArgument(b, i), &blk->args[i]))
      return NULL;
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op))
    if (!compile_op(in, sl, op, &blk->insts[i++]))
      return NULL;
  return blk;
}

static Program *compile_function(Interp *in, FzOp *func) {
  Program *prog = fzPtrMapGet(&in->programs, func);
  if (prog)
    return prog;
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *entry = r ? fzRegionGetFirstBlock(r) : NULL;
  if (!entry) {
    interp_error(in, func, "has no body to interpret");
    return NULL;
  }
  prog = fzArenaAlloc(&in->arena, sizeof *prog);
  if (!prog || !fzPtrMapPut(&in->programs, func, prog))
    return NULL;
  memset(prog, 0, sizeof *prog);
  prog->func = func;
  SlotList sl = {0};
  prog->entry = compile_block(in, &sl, entry);
  prog->numSlots = sl.n;
  prog->slotLanes = fzArenaAlloc(&in->arena, (sl.n + 1) * sizeof *sl.lanes);
  prog->slotIsBuf = fzArenaAlloc(&in->arena, (sl.n + 1) * sizeof *sl.isBuf);
  if (prog->slotLanes && prog->slotIsBuf && sl.n) {
    memcpy(prog->slotLanes, sl.lanes, sl.n * sizeof *sl.lanes);
    memcpy(prog->slotIsBuf, sl.isBuf, sl.n * sizeof *sl.isBuf);
  }
  fzFree(in->ctx, sl.lanes);
  fzFree(in->ctx, sl.isBuf);
  if (!prog->entry || !prog->slotLanes || !prog->slotIsBuf) {
    fzPtrMapRemove(&in->programs, func);
    return NULL;
  }
  return prog;
}

/*===--- Memory ---------------------------------------------------------===*/

static FzLoopScalar read_elem(const Buf *b, const char *p) {
  return fzLoopReadElement(b->elt, p);
}

static void write_elem(const Buf *b, char *p, FzLoopScalar v) {
  fzLoopWriteElement(b->elt, p, v);
}

/* The address of the element at the indices in slots ops[from..], with
 * `span` elements along the last dimension; NULL after an error. */
static char *address(Interp *in, const Inst *ins, const Slot *slots,
                     const Buf *b, uint32_t from, int64_t span) {
  int64_t off = 0;
  for (size_t d = 0; d < b->rank; ++d) {
    int64_t i = slots[ins->ops[from + d]].s.i;
    int64_t extent = d + 1 == b->rank ? span : 1;
    if (i < 0 || i + extent > b->shape[d]) {
      interp_error(in, ins->op, "index %lld%s is out of bounds for dimension "
                   "%zu (size %lld) of operand #%u", (long long)i,
                   extent > 1 ? " (+ vector lanes)" : "", d,
                   (long long)b->shape[d], from - 1);
      return NULL;
    }
    off += i * b->strides[d];
  }
  char *p = b->data + off * (int64_t)b->esz;
  if (p < b->lo || p + span * (int64_t)b->esz > b->hi) {
    interp_error(in, ins->op, "accesses memory outside the buffer's "
                              "allocation (a view out of range)");
    return NULL;
  }
  return p;
}

static bool do_alloc(Interp *in, const Inst *ins, Slot *slots) {
  FzType *t = fzValueGetType(fzOpGetResult(ins->op, 0));
  Buf *b = slots[ins->res[0]].p;
  memset(b, 0, sizeof *b);
  b->elt = fzShapedTypeGetElementType(t);
  b->esz = fzTypeGetStorageSize(b->elt);
  b->rank = fzShapedTypeGetRank(t);
  if (b->rank > MAX_RANK)
    return interp_error(in, ins->op, "rank above %d", MAX_RANK);
  uint32_t dyn = 0;
  int64_t n = 1;
  for (size_t d = 0; d < b->rank; ++d) {
    int64_t s = fzShapedTypeGetDim(t, d);
    if (s == FZ_DYNAMIC)
      s = slots[ins->ops[dyn++]].s.i;
    if (s < 0)
      return interp_error(in, ins->op, "dimension %zu has negative size "
                                       "%lld", d, (long long)s);
    b->shape[d] = s;
    if (s && n > in->maxAlloc / s)
      n = in->maxAlloc + 1;
    else
      n *= s;
  }
  for (size_t d = b->rank, st = 1; d-- > 0;) {
    b->strides[d] = (int64_t)st;
    st *= (size_t)b->shape[d];
  }
  if (n > in->maxAlloc / (int64_t)b->esz)
    return interp_error(in, ins->op, "allocates more than the interpreter's "
                                     "limit of %lld bytes",
                        (long long)in->maxAlloc);
  size_t bytes = (size_t)n * b->esz;
  char *data = fzMalloc(in->ctx, bytes ? bytes : 1);
  if (!data || !fzPtrVecPush(&in->allocList, data) ||
      !fzPtrMapPut(&in->allocs, data, data)) {
    fzFree(in->ctx, data);
    return false;
  }
  if (in->poison && fzTypeIsFloat(b->elt)) {
    FzLoopScalar nan = {.f = NAN};
    for (int64_t i = 0; i < n; ++i)
      write_elem(b, data + i * (int64_t)b->esz, nan);
  } else {
    memset(data, in->poison ? 0x5a : 0, bytes);
  }
  b->data = b->lo = data;
  b->hi = data + bytes;
  return true;
}

static bool do_view(Interp *in, const Inst *ins, Slot *slots) {
  const Buf *src = slots[ins->ops[0]].p;
  Buf *b = slots[ins->res[0]].p;
  FzType *t = fzValueGetType(fzOpGetResult(ins->op, 0));
  int64_t off = ins->nops > 1 ? slots[ins->ops[1]].s.i : 0;
  /* Layouts span at most FZ_MAX_ELEMENTS (fzBufferTypeGet): with the
   * offset bounded too, nothing below overflows. */
  if (off < -FZ_MAX_ELEMENTS || off > FZ_MAX_ELEMENTS)
    return interp_error(in, ins->op, "view (offset %lld) reaches outside "
                                     "its source's memory", (long long)off);
  *b = *src;
  b->rank = fzShapedTypeGetRank(t);
  const int64_t *st = fzBufferTypeGetStrides(t);
  int64_t run = 1, lo = off, hi = off;
  bool empty = false;
  for (size_t d = b->rank; d-- > 0;) {
    b->shape[d] = fzShapedTypeGetDim(t, d);
    if (b->shape[d] == FZ_DYNAMIC)
      return interp_error(in, ins->op, "views with dynamic shapes are not "
                                       "supported by the interpreter");
    b->strides[d] = st ? st[d] : run;
    if (st && st[d] == FZ_DYNAMIC)
      return interp_error(in, ins->op, "dynamic strides are not supported "
                                       "by the interpreter");
    run *= b->shape[d];
    empty = empty || b->shape[d] == 0;
    int64_t ext = (b->shape[d] - 1) * b->strides[d];
    if (ext > 0)
      hi += ext;
    else
      lo += ext;
  }
  b->data = src->data + off * (int64_t)src->esz;
  if (!empty && (src->data + lo * (int64_t)b->esz < src->lo ||
                 src->data + (hi + 1) * (int64_t)b->esz > src->hi))
    return interp_error(in, ins->op, "view (offset %lld) reaches outside "
                                     "its source's memory", (long long)off);
  return true;
}

/*===--- Execution ------------------------------------------------------===*/

static bool run_block(Interp *in, const Block *blk, Slot *slots);

/* Copies the value in slot `from` (a Slot snapshot) into slot `to`. */
static void assign(const Program *prog, Slot *slots, uint32_t to,
                   const Slot *from) {
  uint32_t lanes = prog->slotLanes[to];
  if (lanes)
    memcpy(slots[to].p, from->p, lanes * sizeof(FzLoopScalar));
  else if (prog->slotIsBuf[to])
    memcpy(slots[to].p, from->p, sizeof(Buf));
  else
    slots[to].s = from->s;
}

static bool run_elementwise(Interp *in, const Inst *ins, Slot *slots) {
  FzLoopScalar a[3], out;
  if (!ins->lanes) {
    for (uint32_t k = 0; k < ins->nops; ++k)
      a[k] = slots[ins->ops[k]].s;
    if (!fzLoopEvalScalar(ins->opc, ins->pred, ins->type, ins->otype,
                          ins->nops, a, &out))
      return interp_error(in, ins->op, "integer division by zero");
    slots[ins->res[0]].s = out;
    return true;
  }
  FzLoopScalar *r = slots[ins->res[0]].p;
  for (uint32_t l = 0; l < ins->lanes; ++l) {
    /* A scalar operand (an i1 select condition) applies to every lane. */
    for (uint32_t k = 0; k < ins->nops; ++k) {
      const Slot *s = &slots[ins->ops[k]];
      a[k] = s->p ? ((const FzLoopScalar *)s->p)[l] : s->s;
    }
    if (!fzLoopEvalScalar(ins->opc, ins->pred, ins->type, ins->otype,
                          ins->nops, a, &r[l]))
      return interp_error(in, ins->op, "integer division by zero");
  }
  return true;
}

static bool run_for(Interp *in, const Program *prog, const Inst *ins,
                    Slot *slots) {
  int64_t lb = slots[ins->ops[0]].s.i, ub = slots[ins->ops[1]].s.i,
          step = slots[ins->ops[2]].s.i;
  if (step <= 0)
    return interp_error(in, ins->op, "step %lld is not positive",
                        (long long)step);
  const Block *body = ins->body;
  size_t iters = ins->nops - 3;
  for (size_t k = 0; k < iters; ++k)
    assign(prog, slots, body->args[k + 1], &slots[ins->ops[3 + k]]);
  const Inst *yield = &body->insts[body->n - 1];
  /* Yielded values are snapshot before being assigned, since a yield may
   * permute the iteration arguments; wide values (vectors, buffer
   * descriptors) are copied into scratch storage. */
  size_t wide = 0;
  for (size_t k = 0; k < iters; ++k) {
    uint32_t a = body->args[k + 1];
    wide += prog->slotLanes[a] * sizeof(FzLoopScalar) +
            (prog->slotIsBuf[a] ? sizeof(Buf) : 0);
  }
  Slot *tmp = fzMalloc(in->ctx, (iters + 1) * sizeof *tmp + wide);
  if (!tmp)
    return false;
  char *scratch = (char *)(tmp + iters + 1);
  bool ok = true;
  for (int64_t i = lb; ok && i < ub; i += step) {
    slots[body->args[0]].s.i = i;
    if (!(ok = run_block(in, body, slots)))
      break;
    char *w = scratch;
    for (size_t k = 0; k < iters; ++k) {
      uint32_t a = body->args[k + 1];
      size_t sz = prog->slotLanes[a] * sizeof(FzLoopScalar) +
                  (prog->slotIsBuf[a] ? sizeof(Buf) : 0);
      tmp[k] = slots[yield->ops[k]];
      if (sz) {
        memcpy(w, tmp[k].p, sz);
        tmp[k].p = w;
        w += sz;
      }
    }
    for (size_t k = 0; k < iters; ++k)
      assign(prog, slots, body->args[k + 1], &tmp[k]);
    if (i > INT64_MAX - step)
      break;
  }
  fzFree(in->ctx, tmp);
  if (!ok)
    return false;
  for (size_t k = 0; k < iters; ++k)
    assign(prog, slots, ins->res[k], &slots[body->args[k + 1]]);
  return true;
}

static bool run_parallel(Interp *in, const Inst *ins, Slot *slots) {
  size_t dims = ins->nops / 3;
  int64_t lb[MAX_RANK], ub[MAX_RANK], st[MAX_RANK], iv[MAX_RANK];
  if (dims > MAX_RANK)
    return interp_error(in, ins->op, "has more than %d dimensions", MAX_RANK);
  for (size_t d = 0; d < dims; ++d) {
    lb[d] = slots[ins->ops[d]].s.i;
    ub[d] = slots[ins->ops[dims + d]].s.i;
    st[d] = slots[ins->ops[2 * dims + d]].s.i;
    if (st[d] <= 0)
      return interp_error(in, ins->op, "step %lld of dimension %zu is not "
                                       "positive", (long long)st[d], d);
    if (lb[d] >= ub[d])
      return true; /* no iterations */
    iv[d] = lb[d];
  }
  const Block *body = ins->body;
  for (;;) {
    for (size_t d = 0; d < dims; ++d)
      slots[body->args[d]].s.i = iv[d];
    if (!run_block(in, body, slots))
      return false;
    size_t d = dims;
    while (d-- > 0) {
      iv[d] += st[d];
      if (iv[d] < ub[d])
        break;
      iv[d] = lb[d];
    }
    if (d == (size_t)-1)
      return true;
  }
}

static bool run_program(Interp *in, Program *prog, size_t numArgs,
                        const Buf *args, FzOp *callSite);

static bool run_call(Interp *in, const Inst *ins, Slot *slots) {
  Buf args[64];
  if (ins->nops > 64)
    return interp_error(in, ins->op, "has more than 64 operands");
  if (ins->nres)
    return interp_error(in, ins->op, "returns values; loop-level calls "
                                     "pass output buffers instead");
  for (uint32_t i = 0; i < ins->nops; ++i) {
    const Buf *b = slots[ins->ops[i]].p;
    if (!b)
      return interp_error(in, ins->op, "operand #%u is not a buffer", i);
    args[i] = *b;
  }
  return run_program(in, ins->callee, ins->nops, args, ins->op);
}

/* Hands a foreign op's operands to the extension. */
static bool run_ext(Interp *in, const Inst *ins, Slot *slots) {
  FzLoopInterpValue vals[64];
  if (ins->nops > 64)
    return interp_error(in, ins->op, "has more than 64 operands");
  for (uint32_t i = 0; i < ins->nops; ++i) {
    FzLoopInterpValue *v = &vals[i];
    const Slot *s = &slots[ins->ops[i]];
    memset(v, 0, sizeof *v);
    v->type = fzValueGetType(fzOpGetOperand(ins->op, i));
    if (fzTypeGetKind(v->type) == FZ_TYPE_VECTOR)
      return interp_error(in, ins->op, "operand #%u is a vector; only "
                                       "scalars and buffers can be passed",
                          i);
    if (fzTypeGetKind(v->type) != FZ_TYPE_BUFFER) {
      v->scalar = s->s;
      continue;
    }
    const Buf *b = s->p;
    v->data = b->data;
    v->rank = b->rank;
    v->shape = b->shape;
    v->strides = b->strides;
    v->lo = b->lo;
    v->hi = b->hi;
    v->readOnly = b->readOnly;
  }
  return in->ext->run(in->ext->userData, ins->op, ins->nops, vals);
}

static bool run_inst(Interp *in, const Program *prog, const Inst *ins,
                     Slot *slots) {
  if (ins->kind == I_RETURN)
    return true;
  if (ins->kind == I_CALL)
    return run_call(in, ins, slots);
  if (ins->kind == I_EXT)
    return run_ext(in, ins, slots);
  switch (ins->opc) {
  case FZ_LOOP_OP_CONSTANT: {
    FzAttr *v = fzOpGetInherentAttr(ins->op, FZ_STR("value"));
    FzLoopScalar s = {0};
    FzAttrKind k = fzAttrGetKind(v);
    if (k == FZ_ATTR_DENSE)
      s = fzTypeIsFloat(ins->type)
              ? (FzLoopScalar){.f = fzDenseAttrGetFloat(v, 0)}
              : (FzLoopScalar){.i = fzDenseAttrGetInt(v, 0)};
    else if (k == FZ_ATTR_FLOAT)
      s.f = fzFloatAttrGetValue(v);
    else if (k == FZ_ATTR_BOOL)
      s.i = fzBoolAttrGetValue(v);
    else
      s.i = fzIntegerAttrGetValue(v);
    s = fzLoopNormalize(ins->type, s);
    if (ins->lanes)
      for (uint32_t l = 0; l < ins->lanes; ++l)
        ((FzLoopScalar *)slots[ins->res[0]].p)[l] = s;
    else
      slots[ins->res[0]].s = s;
    return true;
  }
  case FZ_LOOP_OP_SPLAT:
    for (uint32_t l = 0; l < ins->lanes; ++l)
      ((FzLoopScalar *)slots[ins->res[0]].p)[l] = slots[ins->ops[0]].s;
    return true;
  case FZ_LOOP_OP_LOAD:
  case FZ_LOOP_OP_VECTOR_LOAD: {
    const Buf *b = slots[ins->ops[0]].p;
    int64_t span = ins->lanes ? ins->lanes : 1;
    char *p = address(in, ins, slots, b, 1, span);
    if (!p)
      return false;
    if (!ins->lanes) {
      slots[ins->res[0]].s = read_elem(b, p);
      return true;
    }
    FzLoopScalar *r = slots[ins->res[0]].p;
    for (int64_t l = 0; l < span; ++l)
      r[l] = read_elem(b, p + l * (int64_t)b->esz);
    return true;
  }
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE: {
    const Buf *b = slots[ins->ops[1]].p;
    int64_t span = ins->lanes ? ins->lanes : 1;
    if (b->readOnly)
      return interp_error(in, ins->op, "writes a constant buffer");
    char *p = address(in, ins, slots, b, 2, span);
    if (!p)
      return false;
    if (!ins->lanes) {
      write_elem(b, p, slots[ins->ops[0]].s);
      return true;
    }
    const FzLoopScalar *v = slots[ins->ops[0]].p;
    for (int64_t l = 0; l < span; ++l)
      write_elem(b, p + l * (int64_t)b->esz, v[l]);
    return true;
  }
  case FZ_LOOP_OP_PREFETCH:
    return true; /* a hint; its indices may lie outside the buffer */
  case FZ_LOOP_OP_ALLOC:
    return do_alloc(in, ins, slots);
  case FZ_LOOP_OP_DEALLOC: {
    Buf *b = slots[ins->ops[0]].p;
    if (!fzPtrMapContains(&in->allocs, b->lo) || b->data != b->lo)
      return interp_error(in, ins->op, "frees memory that loop.alloc did "
                                       "not return (or freed twice)");
    fzPtrMapRemove(&in->allocs, b->lo);
    fzFree(in->ctx, b->lo);
    b->data = b->lo = b->hi = NULL;
    return true;
  }
  case FZ_LOOP_OP_VIEW:
    return do_view(in, ins, slots);
  case FZ_LOOP_OP_DIM: {
    const Buf *b = slots[ins->ops[0]].p;
    int64_t d = fzIntegerAttrGetValue(
        fzOpGetInherentAttr(ins->op, FZ_STR("index")));
    slots[ins->res[0]].s.i = b->shape[d];
    return true;
  }
  case FZ_LOOP_OP_CONSTANT_BUFFER:
    *(Buf *)slots[ins->res[0]].p = *ins->constBuf;
    return true;
  case FZ_LOOP_OP_FOR:
    return run_for(in, prog, ins, slots);
  case FZ_LOOP_OP_PARALLEL:
    return run_parallel(in, ins, slots);
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_BARRIER:
    return true;
  default:
    return run_elementwise(in, ins, slots);
  }
}

/* slots[-1].p is the running program (set by run_program). */
static bool run_block(Interp *in, const Block *blk, Slot *slots) {
  const Program *prog = (const Program *)slots[-1].p;
  if (in->maxSteps && blk->n) {
    in->steps += (int64_t)blk->n;
    if (in->steps > in->maxSteps)
      return interp_error(in, blk->insts[0].op,
                          "the run exceeds its budget of %lld steps "
                          "(FzLoopInterpOptions.maxSteps; fuse-run "
                          "--max-steps)",
                          (long long)in->maxSteps);
  }
  for (size_t i = 0; i < blk->n; ++i)
    if (!run_inst(in, prog, &blk->insts[i], slots))
      return false;
  return true;
}

/* Runs prog with its arguments bound to copies of args. Slot storage is
 * per activation (calls may nest). slots[-1] holds the program. */
static bool run_program(Interp *in, Program *prog, size_t numArgs,
                        const Buf *args, FzOp *callSite) {
  if (in->depth >= MAX_CALL_DEPTH)
    return interp_error(in, callSite ? callSite : prog->func,
                        "calls nest deeper than %d", MAX_CALL_DEPTH);
  if (numArgs != prog->entry->nargs)
    return interp_error(in, callSite ? callSite : prog->func,
                        "passes %zu buffers to a function of %zu arguments",
                        numArgs, prog->entry->nargs);
  size_t extra = 0;
  for (size_t i = 0; i < prog->numSlots; ++i)
    extra += prog->slotLanes[i] * sizeof(FzLoopScalar) +
             (prog->slotIsBuf[i] ? sizeof(Buf) : 0);
  size_t bytes = (prog->numSlots + 1) * sizeof(Slot) + extra;
  Slot *mem = fzCalloc(in->ctx, 1, bytes);
  if (!mem)
    return false;
  Slot *slots = mem + 1;
  mem[0].p = prog;
  char *store = (char *)(slots + prog->numSlots);
  for (size_t i = 0; i < prog->numSlots; ++i) {
    if (prog->slotLanes[i]) {
      slots[i].p = store;
      store += prog->slotLanes[i] * sizeof(FzLoopScalar);
    } else if (prog->slotIsBuf[i]) {
      slots[i].p = store;
      store += sizeof(Buf);
    }
  }
  for (size_t i = 0; i < numArgs; ++i) {
    uint32_t s = prog->entry->args[i];
    if (!prog->slotIsBuf[s]) {
      fzFree(in->ctx, mem);
      return interp_error(in, prog->func, "argument #%zu is not a buffer; "
                                          "the interpreter binds buffers "
                                          "only", i);
    }
    *(Buf *)slots[s].p = args[i];
  }
  in->depth++;
  bool ok = run_block(in, prog->entry, slots);
  in->depth--;
  fzFree(in->ctx, mem);
  return ok;
}

/*===--- Entry point ----------------------------------------------------===*/

static bool bind_argument(Interp *in, FzOp *func, size_t i, FzType *t,
                          FzTensor *x, Buf *b) {
  if (!t || fzTypeGetKind(t) != FZ_TYPE_BUFFER)
    return interp_error(in, func, "argument #%zu is not a buffer", i);
  if (fzBufferTypeGetStrides(t))
    return interp_error(in, func, "argument #%zu has a non-identity layout; "
                                  "the interpreter binds contiguous "
                                  "tensors only", i);
  size_t rank = fzShapedTypeGetRank(t);
  bool ok = x && x->dtype == fzShapedTypeGetElementType(t) && x->rank == rank;
  for (size_t d = 0; ok && d < rank; ++d)
    ok = fzShapedTypeGetDim(t, d) == FZ_DYNAMIC ||
         fzShapedTypeGetDim(t, d) == x->shape[d];
  if (!ok)
    return interp_error(in, func, "argument #%zu: the tensor's dtype or "
                                  "shape does not match the buffer type", i);
  memset(b, 0, sizeof *b);
  b->elt = x->dtype;
  b->esz = fzTypeGetStorageSize(x->dtype);
  b->rank = rank;
  int64_t st = 1;
  for (size_t d = rank; d-- > 0;) {
    b->shape[d] = x->shape[d];
    b->strides[d] = st;
    st *= x->shape[d];
  }
  b->data = b->lo = x->data;
  b->hi = (char *)x->data + fzTensorGetNumBytes(x);
  return true;
}

static void free_allocs(Interp *in) {
  for (size_t i = 0; i < in->allocList.len; ++i)
    if (fzPtrMapContains(&in->allocs, in->allocList.data[i])) {
      fzPtrMapRemove(&in->allocs, in->allocList.data[i]);
      fzFree(in->ctx, in->allocList.data[i]);
    }
  fzPtrVecFree(&in->allocList);
}

bool fzLoopInterpretFunction(FzOp *func, size_t numArgs, FzTensor *const *args,
                             const FzLoopInterpOptions *options) {
  FzContext *ctx = fzOpGetContext(func);
  Interp in;
  memset(&in, 0, sizeof in);
  in.ctx = ctx;
  in.maxAlloc = options && options->maxAllocBytes > 0 ? options->maxAllocBytes
                                                      : DEFAULT_MAX_ALLOC;
  in.poison = options && options->poison;
  in.maxSteps = options && options->maxSteps > 0 ? options->maxSteps : 0;
  in.quiet = options && options->quiet;
  in.ext = options && options->extension && options->extension->handles &&
                   options->extension->run
               ? options->extension
               : NULL;
  in.capture = in.quiet ? options->errorMessage : NULL;
  in.captureCap = in.quiet ? options->errorMessageSize : 0;
  if (in.capture && in.captureCap)
    in.capture[0] = '\0';
  fzArenaInit(&in.arena, ctx);
  fzPtrMapInit(&in.values, ctx);
  fzPtrMapInit(&in.programs, ctx);
  fzPtrMapInit(&in.allocs, ctx);
  fzPtrVecInit(&in.allocList, ctx);
  in.module = fzOpGetParentOp(func); /* where func.call finds callees */

  bool ok = true;
  Buf *bufs = fzCalloc(ctx, numArgs + 1, sizeof *bufs);
  FzAttr *fta = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  FzType *ft = fta ? fzTypeAttrGetValue(fta) : NULL;
  if (!bufs || !ft)
    ok = bufs ? interp_error(&in, func, "is not a function") : false;
  if (ok && fzFunctionTypeGetNumInputs(ft) != numArgs)
    ok = interp_error(&in, func, "takes %zu arguments but %zu tensors were "
                                 "given", fzFunctionTypeGetNumInputs(ft),
                      numArgs);
  if (ok && fzFunctionTypeGetNumResults(ft) != 0)
    ok = interp_error(&in, func, "returns values; a loop-level function "
                                 "writes output buffers instead (run "
                                 "lower-graph-to-loop first)");
  for (size_t i = 0; ok && i < numArgs; ++i)
    ok = bind_argument(&in, func, i, fzFunctionTypeGetInput(ft, i), args[i],
                       &bufs[i]);
  Program *prog = ok ? compile_function(&in, func) : NULL;
  if (ok && prog)
    ok = run_program(&in, prog, numArgs, bufs, NULL);
  else
    ok = false;
  free_allocs(&in);
  fzFree(ctx, bufs);
  fzPtrMapFree(&in.allocs);
  fzPtrMapFree(&in.programs);
  fzPtrMapFree(&in.values);
  fzArenaReset(&in.arena);
  return ok;
}
