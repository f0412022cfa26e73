/* ir/printer.c - printing operations, blocks and regions: MLIR 19's
 * generic form, custom forms through the ops' print hooks, and the
 * FzAsmPrinter those hooks use.
 *
 * SSA names are assigned before printing, in one pass that follows
 * MLIR's SSANameState exactly, so that output matches mlir-opt's byte for
 * byte: starting from the numbering root, the values of a region are
 * numbered (entry-block arguments %argN, other block arguments and op
 * results %N, one number per op's result group), then the regions of its
 * ops are queued on a stack and taken last-in first-out. In custom form a
 * queued region restarts from the counters its parent region left off at
 * (so sibling regions reuse names); in generic form the counters never
 * restart (MLIR's --mlir-print-unique-ssa-ids, implied by generic form).
 * The numbering root is the outermost ancestor of the printed op, or with
 * FZ_PRINT_LOCAL_SCOPE its nearest isolated-from-above ancestor (itself
 * included); values outside it print as <<UNKNOWN SSA VALUE>>.
 *
 * Numbers are found without per-value storage: a block's entry (in a
 * hash table over blocks) holds its first argument's number and the start
 * of its ops' numbers in one flat array, indexed by the op's position in
 * the block (read from orderIndex after fzBlockRecomputeOrder, which the
 * numbering pass calls on every block it visits). Text goes to
 * one FzBuf that is handed to the callback whenever it passes 64 KiB and
 * at the end. The printer never fails on malformed IR: NULL operands,
 * types and attributes print as MLIR's <<NULL ...>> markers.
 */
#include "ir/print_internal.h"

/* Bytes buffered before the callback gets them. */
#define FLUSH_THRESHOLD (64 * 1024)

/* Op or block -> number; open addressing, power-of-two size, key and
 * value side by side so that a lookup touches one cache line. */
typedef struct NumSlot {
  const void *key; /* NULL: empty */
  size_t val;
} NumSlot;

typedef struct NumTable {
  NumSlot *slots;
  size_t count, cap;
} NumTable;

/* Numbers of one block's values. An op is found by its position, which
 * fzBlockRecomputeOrder makes an arithmetic progression of orderIndex;
 * should that ever not hold, the block's ops go to a hash table. */
typedef struct BlockInfo {
  size_t argBase; /* number of argument 0 */
  size_t opBase;  /* index of the block's first op in opIds */
  size_t numOps;
  uint32_t first;  /* orderIndex of the first op */
  uint32_t stride; /* orderIndex step between consecutive ops */
  bool hashed;     /* ops are in opTable instead */
} BlockInfo;

/* No number (an op without results, or outside the numbered scope). */
#define NO_ID   ((size_t)-1)
#define NO_ID32 UINT32_MAX

struct FzAsmPrinter {
  FzContext *ctx;
  unsigned flags;
  FzPrintCallback cb;
  void *userData;
  FzBuf buf;
  unsigned indent;
  /* SSA numbers (see number_values). */
  NumTable blockIndex; /* FzBlock -> index in blocks */
  BlockInfo *blocks;
  size_t numBlocks, capBlocks;
  uint32_t *opIds; /* per numbered block, its ops' numbers in order */
  size_t numOpIds, capOpIds;
  NumTable opTable; /* FzOp -> number, for blocks with `hashed` */
  const FzOp *root; /* the numbering root (in no numbered block) */
  size_t rootId;
  const FzBlock *lastBlock; /* one-entry cache of block_info */
  const BlockInfo *lastInfo;
  /* Default dialects of the enclosing regions (MLIR's stack, which
   * starts with "builtin"); the top one may be elided from op names. */
  const char **dialects;
  size_t numDialects, capDialects;
  size_t droppedDialects; /* pushes lost to allocation failure */
};

/*===------------------------------------------------------------------===*
 * Number tables
 *===------------------------------------------------------------------===*/

static size_t hash_ptr(const void *p) {
  uint64_t v = (uint64_t)(uintptr_t)p;
  v ^= v >> 29;
  v *= UINT64_C(0xbf58476d1ce4e5b9);
  v ^= v >> 32;
  return (size_t)v;
}

static bool table_grow(FzContext *ctx, NumTable *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  NumSlot *slots = fzCalloc(ctx, cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slots[i].key)
      continue;
    size_t j = hash_ptr(t->slots[i].key) & (cap - 1);
    while (slots[j].key)
      j = (j + 1) & (cap - 1);
    slots[j] = t->slots[i];
  }
  fzFree(ctx, t->slots);
  t->slots = slots;
  t->cap = cap;
  return true;
}

/* Inserts or overwrites; on allocation failure the key stays unnamed. */
static void table_put(FzContext *ctx, NumTable *t, const void *key,
                      size_t val) {
  if ((t->count + 1) * 2 > t->cap && !table_grow(ctx, t))
    return;
  size_t j = hash_ptr(key) & (t->cap - 1);
  while (t->slots[j].key && t->slots[j].key != key)
    j = (j + 1) & (t->cap - 1);
  if (!t->slots[j].key) {
    t->slots[j].key = key;
    t->count++;
  }
  t->slots[j].val = val;
}

/* The number stored for key, or (size_t)-1. */
static size_t table_get(const NumTable *t, const void *key) {
  if (!t->cap)
    return (size_t)-1;
  size_t j = hash_ptr(key) & (t->cap - 1);
  for (;;) {
    const NumSlot *s = &t->slots[j];
    if (s->key == key)
      return s->val;
    if (!s->key)
      return (size_t)-1;
    j = (j + 1) & (t->cap - 1);
  }
}

static void table_free(FzContext *ctx, NumTable *t) {
  fzFree(ctx, t->slots);
  memset(t, 0, sizeof *t);
}

/*===------------------------------------------------------------------===*
 * SSA numbering
 *===------------------------------------------------------------------===*/

typedef struct NumberFrame {
  FzRegion *region;
  size_t nextValue, nextArg;
} NumberFrame;

typedef struct NumberStack {
  NumberFrame *frames;
  size_t len, cap;
} NumberStack;

static bool stack_push(FzContext *ctx, NumberStack *s, FzRegion *region,
                       size_t nextValue, size_t nextArg) {
  if (s->len == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    NumberFrame *f = fzRealloc(ctx, s->frames, cap * sizeof *f);
    if (!f)
      return false;
    s->frames = f;
    s->cap = cap;
  }
  s->frames[s->len++] = (NumberFrame){region, nextValue, nextArg};
  return true;
}

/* Numbers the arguments and results of one block. */
static void number_block(FzAsmPrinter *p, FzBlock *b, bool entry,
                         size_t *nextValue, size_t *nextArg) {
  if (p->numBlocks == p->capBlocks) {
    size_t cap = p->capBlocks ? p->capBlocks * 2 : 64;
    BlockInfo *v = fzRealloc(p->ctx, p->blocks, cap * sizeof *v);
    if (!v)
      return;
    p->blocks = v;
    p->capBlocks = cap;
  }
  size_t need = p->numOpIds + b->numOps;
  if (need > p->capOpIds) {
    size_t cap = p->capOpIds ? p->capOpIds : 1024;
    while (cap < need)
      cap *= 2;
    uint32_t *v = fzRealloc(p->ctx, p->opIds, cap * sizeof *v);
    if (!v)
      return;
    p->opIds = v;
    p->capOpIds = cap;
  }
  fzBlockRecomputeOrder(b);
  BlockInfo info = {0, p->numOpIds, 0, 0, 1, false};
  if (b->numArgs) {
    size_t *next = entry ? nextArg : nextValue;
    info.argBase = *next;
    *next += b->numArgs;
  }
  if (b->first) {
    info.first = b->first->orderIndex;
    if (b->first->next && b->first->next->orderIndex > info.first)
      info.stride = b->first->next->orderIndex - info.first;
  }
  uint64_t expect = info.first;
  for (FzOp *op = b->first; op && info.numOps < b->numOps; op = op->next) {
    if (op->orderIndex != expect)
      info.hashed = true;
    expect += info.stride;
    p->opIds[p->numOpIds++] =
        op->numResults ? (uint32_t)(*nextValue)++ : NO_ID32;
    info.numOps++;
  }
  if (info.hashed) {
    size_t i = info.opBase;
    for (FzOp *op = b->first; op && i < p->numOpIds; op = op->next, i++)
      if (p->opIds[i] != NO_ID32)
        table_put(p->ctx, &p->opTable, op, p->opIds[i]);
  }
  table_put(p->ctx, &p->blockIndex, b, p->numBlocks);
  p->blocks[p->numBlocks++] = info;
}

/* MLIR's SSANameState constructor, iteratively: the root's results, then
 * regions from a stack, each region's blocks before its ops' regions. */
static void number_values(FzAsmPrinter *p, FzOp *root) {
  bool unique = (p->flags & FZ_PRINT_GENERIC) != 0;
  size_t nextValue = 0, nextArg = 0;
  NumberStack stack = {0};
  for (uint32_t i = 0; i < root->numRegions; i++)
    stack_push(p->ctx, &stack, &root->regions[i], 0, 0);
  p->root = root;
  p->rootId = root->numResults ? nextValue++ : NO_ID;

  while (stack.len) {
    NumberFrame f = stack.frames[--stack.len];
    if (!unique) {
      nextValue = f.nextValue;
      nextArg = f.nextArg;
    }
    for (FzBlock *b = f.region->first; b; b = b->next)
      number_block(p, b, b == f.region->first, &nextValue, &nextArg);
    for (FzBlock *b = f.region->first; b; b = b->next)
      for (FzOp *op = b->first; op; op = op->next)
        for (uint32_t i = 0; i < op->numRegions; i++)
          stack_push(p->ctx, &stack, &op->regions[i], nextValue, nextArg);
  }
  fzFree(p->ctx, stack.frames);
}

static const BlockInfo *block_info(FzAsmPrinter *p, const FzBlock *b) {
  if (!b)
    return NULL;
  if (b == p->lastBlock)
    return p->lastInfo;
  size_t i = table_get(&p->blockIndex, b);
  if (i == NO_ID)
    return NULL;
  p->lastBlock = b;
  p->lastInfo = &p->blocks[i];
  return p->lastInfo;
}

/* The number of op's result group, or NO_ID. */
static size_t result_id(FzAsmPrinter *p, const FzOp *op) {
  if (op == p->root)
    return p->rootId;
  const BlockInfo *bi = block_info(p, op->block);
  if (!bi)
    return NO_ID;
  if (bi->hashed)
    return table_get(&p->opTable, op);
  uint32_t off = op->orderIndex - bi->first;
  if (op->orderIndex < bi->first || off % bi->stride)
    return NO_ID;
  size_t pos = off / bi->stride;
  if (pos >= bi->numOps)
    return NO_ID;
  uint32_t id = p->opIds[bi->opBase + pos];
  return id == NO_ID32 ? NO_ID : id;
}

/*===------------------------------------------------------------------===*
 * Low-level output
 *===------------------------------------------------------------------===*/

static void flush(FzAsmPrinter *p) {
  if (p->buf.len && p->cb)
    p->cb((FzStringRef){p->buf.data, p->buf.len}, p->userData);
  fzBufClear(&p->buf);
}

static void maybe_flush(FzAsmPrinter *p) {
  if (p->buf.len >= FLUSH_THRESHOLD)
    flush(p);
}

static void put_indent(FzAsmPrinter *p, unsigned n) {
  static const char spaces[] = "                                ";
  while (n) {
    unsigned k = n < sizeof spaces - 1 ? n : (unsigned)(sizeof spaces - 1);
    fzPrintPut(&p->buf, spaces, k);
    n -= k;
  }
}

static void push_dialect(FzAsmPrinter *p, const char *d) {
  if (p->numDialects == p->capDialects) {
    size_t cap = p->capDialects ? p->capDialects * 2 : 16;
    const char **v = fzRealloc(p->ctx, p->dialects, cap * sizeof *v);
    if (!v) { /* out of memory: no elision below here */
      p->droppedDialects++;
      return;
    }
    p->dialects = v;
    p->capDialects = cap;
  }
  p->dialects[p->numDialects++] = d;
}

static void pop_dialect(FzAsmPrinter *p) {
  if (p->droppedDialects)
    p->droppedDialects--;
  else if (p->numDialects)
    p->numDialects--;
}

/* %N, %N#i (a result of a multi-result op, with printResultNo) or %argN;
 * MLIR's markers for a NULL value and one outside the numbered scope. */
static void print_value_id(FzAsmPrinter *p, const FzValue *v,
                           bool printResultNo) {
  FzBuf *b = &p->buf;
  if (!v) {
    FZ_PRINT_LIT(b, "<<NULL VALUE>>");
    return;
  }
  if (v->isArg) {
    const FzBlock *blk = v->owner.block;
    const BlockInfo *bi = block_info(p, blk);
    if (!bi) {
      FZ_PRINT_LIT(b, "<<UNKNOWN SSA VALUE>>");
      return;
    }
    bool entry = blk->parent && blk->parent->first == blk;
    fzPrintPut(b, entry ? "%arg" : "%", entry ? 4 : 1);
    fzBufAppendU64(b, bi->argBase + v->index);
    return;
  }
  const FzOp *op = v->owner.op;
  size_t id = op ? result_id(p, op) : NO_ID;
  if (id == NO_ID) {
    FZ_PRINT_LIT(b, "<<UNKNOWN SSA VALUE>>");
    return;
  }
  fzPrintPutc(b, '%');
  fzBufAppendU64(b, id);
  if (printResultNo && op->numResults > 1) {
    fzPrintPutc(b, '#');
    fzBufAppendU64(b, v->index);
  }
}

static void print_value(FzAsmPrinter *p, const FzValue *v) {
  print_value_id(p, v, true);
}

static void print_loc_suffix(FzAsmPrinter *p, const FzLoc *loc) {
  if (!(p->flags & FZ_PRINT_DEBUGINFO))
    return;
  fzPrintPutc(&p->buf, ' ');
  fzLocPrintToBuf(&p->buf, loc);
}

/*===------------------------------------------------------------------===*
 * Ops, blocks, regions
 *===------------------------------------------------------------------===*/

static void print_region(FzAsmPrinter *p, FzRegion *region, bool printEntryArgs,
                         bool printEmptyBlock);

static void print_full_op(FzAsmPrinter *p, FzOp *op);

static void print_block(FzAsmPrinter *p, FzBlock *block, bool header,
                        size_t index) {
  FzBuf *b = &p->buf;
  if (header) {
    put_indent(p, p->indent);
    fzPrintPut(b, "^bb", 3);
    fzBufAppendU64(b, index);
    if (block->numArgs) {
      fzPrintPutc(b, '(');
      for (size_t i = 0; i < block->numArgs; i++) {
        if (i)
          fzPrintPut(b, ", ", 2);
        fzAsmPrintArgumentDecl(p, block->args[i]);
      }
      fzPrintPutc(b, ')');
    }
    fzPrintPutc(b, ':');
    /* fuse has no successors, so only entry blocks have a predecessor
     * story; MLIR says this of every other block without one. */
    if (index != 0)
      FZ_PRINT_LIT(b, "  // no predecessors");
    fzPrintPutc(b, '\n');
  }
  p->indent += 2;
  for (FzOp *op = block->first; op; op = op->next) {
    print_full_op(p, op);
    fzPrintPutc(b, '\n');
    maybe_flush(p);
  }
  p->indent -= 2;
}

/* "{\n" blocks "}" with the closing brace at the op's indentation. */
static void print_region(FzAsmPrinter *p, FzRegion *region, bool printEntryArgs,
                         bool printEmptyBlock) {
  fzPrintPut(&p->buf, "{\n", 2);
  if (region && region->first) {
    const FzOp *parent = region->parentOp;
    const char *dd = parent && parent->def && parent->def->defaultDialect
                         ? parent->def->defaultDialect
                         : "";
    push_dialect(p, dd);
    FzBlock *entry = region->first;
    bool header = (printEmptyBlock && entry->first == NULL) ||
                  (printEntryArgs && entry->numArgs != 0);
    print_block(p, entry, header, 0);
    size_t index = 1;
    for (FzBlock *blk = entry->next; blk; blk = blk->next)
      print_block(p, blk, true, index++);
    pop_dialect(p);
  }
  put_indent(p, p->indent);
  fzPrintPutc(&p->buf, '}');
}

static void print_generic(FzAsmPrinter *p, FzOp *op) {
  FzBuf *b = &p->buf;
  if (op->name)
    fzBufAppendQuoted(b, (FzStringRef){op->name->str, op->name->len});
  else
    FZ_PRINT_LIT(b, "\"<<NULL NAME>>\"");
  fzPrintPutc(b, '(');
  for (uint32_t i = 0; i < op->numOperands; i++) {
    if (i)
      fzPrintPut(b, ", ", 2);
    print_value(p, op->operands[i].value);
  }
  fzPrintPutc(b, ')');
  if (op->props && op->props->kind == FZ_ATTR_DICT && op->props->u.dict.n) {
    fzPrintPut(b, " <", 2);
    fzAttrPrintToBuf(b, op->props);
    fzPrintPutc(b, '>');
  }
  if (op->numRegions) {
    fzPrintPut(b, " (", 2);
    for (uint32_t i = 0; i < op->numRegions; i++) {
      if (i)
        fzPrintPut(b, ", ", 2);
      print_region(p, &op->regions[i], true, true);
    }
    fzPrintPutc(b, ')');
  }
  if (op->attrs && op->attrs->kind == FZ_ATTR_DICT && op->attrs->u.dict.n) {
    fzPrintPutc(b, ' ');
    fzAttrPrintToBuf(b, op->attrs);
  }
  fzPrintPut(b, " : (", 4);
  for (uint32_t i = 0; i < op->numOperands; i++) {
    if (i)
      fzPrintPut(b, ", ", 2);
    const FzValue *v = op->operands[i].value;
    fzTypePrintToBuf(b, v ? v->type : NULL);
  }
  fzPrintPut(b, ") -> ", 5);
  uint32_t nr = op->numResults;
  bool wrap = nr != 1 || (op->results[0].type &&
                          op->results[0].type->kind == FZ_TYPE_FUNCTION);
  if (wrap)
    fzPrintPutc(b, '(');
  for (uint32_t i = 0; i < nr; i++) {
    if (i)
      fzPrintPut(b, ", ", 2);
    fzTypePrintToBuf(b, op->results[i].type);
  }
  if (wrap)
    fzPrintPutc(b, ')');
}

/* The op name for a custom form: MLIR drops "<default dialect>." when
 * the rest has no further dot. */
static void print_custom_name(FzAsmPrinter *p, const FzOp *op) {
  const char *name = op->name->str;
  size_t len = op->name->len;
  const char *dd = p->numDialects && !p->droppedDialects
                       ? p->dialects[p->numDialects - 1]
                       : "";
  size_t ddLen = strlen(dd);
  const char *dot = memchr(name, '.', len);
  bool oneDot = dot && !memchr(dot + 1, '.', len - (size_t)(dot + 1 - name));
  if (oneDot && ddLen && (size_t)(dot - name) == ddLen &&
      memcmp(name, dd, ddLen) == 0) {
    name = dot + 1;
    len -= ddLen + 1;
  }
  fzPrintPut(&p->buf, name, len);
}

static void print_op(FzAsmPrinter *p, FzOp *op) {
  FzBuf *b = &p->buf;
  if (op->numResults) {
    print_value_id(p, &op->results[0], false);
    if (op->numResults > 1) {
      fzPrintPutc(b, ':');
      fzBufAppendU64(b, op->numResults);
    }
    fzPrintPut(b, " = ", 3);
  }
  const FzOpDef *def = op->def;
  if (!(p->flags & FZ_PRINT_GENERIC) && def && def->print && op->name) {
    print_custom_name(p, op);
    def->print(op, p);
  } else {
    print_generic(p, op);
  }
}

static void print_full_op(FzAsmPrinter *p, FzOp *op) {
  put_indent(p, p->indent);
  print_op(p, op);
  print_loc_suffix(p, op->loc);
}

/*===------------------------------------------------------------------===*
 * Entry points
 *===------------------------------------------------------------------===*/

static FzOp *parent_op(const FzOp *op) {
  return op->block && op->block->parent ? op->block->parent->parentOp : NULL;
}

static bool is_isolated(const FzOp *op) {
  return op->def && (op->def->traits & FZ_TRAIT_ISOLATED_FROM_ABOVE);
}

void fzOpPrint(FzOp *op, unsigned flags, FzPrintCallback cb, void *userData) {
  if (!op) {
    if (cb)
      cb(FZ_STR("<<NULL OPERATION>>\n"), userData);
    return;
  }
  FzAsmPrinter p;
  memset(&p, 0, sizeof p);
  p.ctx = op->ctx;
  p.flags = flags;
  p.cb = cb;
  p.userData = userData;
  fzBufInit(&p.buf, op->ctx);
  push_dialect(&p, "builtin");

  FzOp *root = op;
  for (;;) {
    if ((flags & FZ_PRINT_LOCAL_SCOPE) && is_isolated(root))
      break;
    FzOp *parent = parent_op(root);
    if (!parent)
      break;
    root = parent;
  }
  number_values(&p, root);

  print_full_op(&p, op);
  fzPrintPutc(&p.buf, '\n');
  flush(&p);

  fzBufFree(&p.buf);
  table_free(p.ctx, &p.blockIndex);
  table_free(p.ctx, &p.opTable);
  fzFree(p.ctx, p.blocks);
  fzFree(p.ctx, p.opIds);
  fzFree(p.ctx, p.dialects);
}

static void write_to_file(FzStringRef chunk, void *userData) {
  fwrite(chunk.data, 1, chunk.length, (FILE *)userData);
}

void fzOpDump(FzOp *op, unsigned flags, FILE *out) {
  fzOpPrint(op, flags, write_to_file, out ? out : stderr);
}

/*===------------------------------------------------------------------===*
 * FzAsmPrinter
 *===------------------------------------------------------------------===*/

void fzAsmPrint(FzAsmPrinter *p, const char *text) {
  if (text)
    fzBufPuts(&p->buf, text);
}

void fzAsmPrintf(FzAsmPrinter *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fzBufVPrintf(&p->buf, fmt, ap);
  va_end(ap);
}

void fzAsmPrintString(FzAsmPrinter *p, FzStringRef text) {
  fzPrintPut(&p->buf, text.data, text.length);
}

void fzAsmPrintOperand(FzAsmPrinter *p, FzValue *v) {
  print_value(p, v);
}

void fzAsmPrintOperands(FzAsmPrinter *p, FzOp *op) {
  for (uint32_t i = 0; i < op->numOperands; i++) {
    if (i)
      fzPrintPut(&p->buf, ", ", 2);
    print_value(p, op->operands[i].value);
  }
}

void fzAsmPrintType(FzAsmPrinter *p, const FzType *t) {
  fzTypePrintToBuf(&p->buf, t);
}

void fzAsmPrintTypes(FzAsmPrinter *p, size_t n, FzType *const *types) {
  for (size_t i = 0; i < n; i++) {
    if (i)
      fzPrintPut(&p->buf, ", ", 2);
    fzTypePrintToBuf(&p->buf, types[i]);
  }
}

void fzAsmPrintAttr(FzAsmPrinter *p, const FzAttr *a) {
  fzAttrPrintToBuf(&p->buf, a);
}

static bool is_elided(const FzIdent *name, const char *const *elided) {
  if (!elided || !name)
    return false;
  for (size_t i = 0; elided[i]; i++)
    if (strlen(elided[i]) == name->len &&
        memcmp(elided[i], name->str, name->len) == 0)
      return true;
  return false;
}

void fzAsmPrintOptionalAttrDict(FzAsmPrinter *p, const FzAttr *dict,
                                const char *const *elided, bool withKeyword) {
  if (!dict || dict->kind != FZ_ATTR_DICT)
    return;
  size_t n = dict->u.dict.n;
  const FzNamedAttr *e = dict->u.dict.entries;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    kept += !is_elided(e[i].name, elided);
  if (!kept)
    return;
  FzBuf *b = &p->buf;
  if (withKeyword)
    FZ_PRINT_LIT(b, " attributes");
  fzPrintPut(b, " {", 2);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (is_elided(e[i].name, elided))
      continue;
    if (!first)
      fzPrintPut(b, ", ", 2);
    first = false;
    fzNamedAttrPrintToBuf(b, &e[i]);
  }
  fzPrintPutc(b, '}');
}

void fzAsmPrintSymbolName(FzAsmPrinter *p, FzStringRef name) {
  FzBuf *b = &p->buf;
  if (name.length == 0) {
    FZ_PRINT_LIT(b, "@<<INVALID EMPTY SYMBOL>>");
    return;
  }
  fzPrintPutc(b, '@');
  if (fzIsBareIdentifier(name))
    fzPrintPut(b, name.data, name.length);
  else
    fzBufAppendQuoted(b, name);
}

void fzAsmPrintArgumentDecl(FzAsmPrinter *p, FzValue *arg) {
  print_value(p, arg);
  fzPrintPut(&p->buf, ": ", 2);
  fzTypePrintToBuf(&p->buf, arg ? arg->type : NULL);
  if (arg)
    print_loc_suffix(p, arg->isArg ? arg->loc : arg->owner.op->loc);
}

void fzAsmPrintOptionalLoc(FzAsmPrinter *p, FzLoc *loc) {
  print_loc_suffix(p, loc);
}

void fzAsmPrintRegion(FzAsmPrinter *p, FzRegion *region, bool printEntryArgs) {
  fzPrintPutc(&p->buf, ' ');
  print_region(p, region, printEntryArgs, false);
}

FzContext *fzAsmPrinterGetContext(const FzAsmPrinter *p) {
  return p->ctx;
}

unsigned fzAsmPrinterGetFlags(const FzAsmPrinter *p) {
  return p->flags;
}
