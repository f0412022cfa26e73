/* tests/unit/test_helpers.h - helpers shared by the Check suites of the IR
 * (test_context.c, test_ir.c, test_verifier.c, test_parser.c).
 *
 * A header of static inline functions, so that each test_*.c stays one
 * executable with no extra object to link:
 *  - DiagLog: a diagnostic handler that records every diagnostic (claims
 *    it, so nothing reaches stderr) with its file, line, column, severity
 *    and message;
 *  - CountingAlloc: an FzAllocator that counts live blocks and bytes and
 *    can fail the Nth allocation (or every one from the Nth on), and
 *    check_pass_allocation_failures, a pass pipeline run under it;
 *  - TextBuf: a print callback that accumulates printed text;
 *  - small builders for ops, blocks and func.func bodies.
 * Everything a helper allocates is plain malloc'ed memory owned by the
 * test; IR objects belong to the context as documented in fz/ir.h.
 */
#ifndef FZ_TEST_HELPERS_H
#define FZ_TEST_HELPERS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/dialects.h"
#include "fz/ir.h"
#include "fz/kernel.h"
#include "fz/pass.h"

/*===--- Recording diagnostics ------------------------------------------===*/

#define DIAG_LOG_MAX 64

typedef struct DiagRecord {
  FzSeverity severity;
  char file[128];
  unsigned line, col; /* 0 when the location has no file:line:col */
  char message[512];
  size_t numNotes;
  char note[512]; /* first note's message */
  unsigned noteLine, noteCol;
} DiagRecord;

typedef struct DiagLog {
  size_t count; /* every diagnostic seen, even past DIAG_LOG_MAX */
  size_t numErrors;
  DiagRecord rec[DIAG_LOG_MAX];
  FzDiagHandlerId id;
  FzContext *ctx;
} DiagLog;

static inline void copy_ref(char *dst, size_t cap, FzStringRef s) {
  size_t n = s.length < cap - 1 ? s.length : cap - 1;
  if (n)
    memcpy(dst, s.data, n);
  dst[n] = 0;
}

static inline bool diag_log_handler(const FzDiagnostic *d, void *ud) {
  DiagLog *log = ud;
  if (fzDiagnosticGetSeverity(d) == FZ_SEVERITY_ERROR)
    log->numErrors++;
  if (log->count < DIAG_LOG_MAX) {
    DiagRecord *r = &log->rec[log->count];
    memset(r, 0, sizeof *r);
    r->severity = fzDiagnosticGetSeverity(d);
    FzLoc *flc = fzLocFindFileLineCol(fzDiagnosticGetLoc(d));
    if (flc) {
      copy_ref(r->file, sizeof r->file, fzLocGetFile(flc));
      r->line = fzLocGetLine(flc);
      r->col = fzLocGetColumn(flc);
    }
    copy_ref(r->message, sizeof r->message, fzDiagnosticGetMessage(d));
    r->numNotes = fzDiagnosticGetNumNotes(d);
    if (r->numNotes) {
      const FzDiagnostic *n = fzDiagnosticGetNote(d, 0);
      copy_ref(r->note, sizeof r->note, fzDiagnosticGetMessage(n));
      FzLoc *nl = fzLocFindFileLineCol(fzDiagnosticGetLoc(n));
      if (nl) {
        r->noteLine = fzLocGetLine(nl);
        r->noteCol = fzLocGetColumn(nl);
      }
    }
  }
  log->count++;
  return true;
}

/* Starts recording every diagnostic of ctx into log. */
static inline void diag_log_begin(DiagLog *log, FzContext *ctx) {
  memset(log, 0, sizeof *log);
  log->ctx = ctx;
  log->id = fzContextPushDiagHandler(ctx, diag_log_handler, log);
}

static inline void diag_log_end(DiagLog *log) {
  if (log->id)
    fzContextPopDiagHandler(log->ctx, log->id);
  log->id = 0;
}

static inline void diag_log_clear(DiagLog *log) {
  log->count = 0;
  log->numErrors = 0;
}

/* The first recorded diagnostic whose message contains `needle`. */
static inline const DiagRecord *diag_log_find(const DiagLog *log,
                                              const char *needle) {
  size_t n = log->count < DIAG_LOG_MAX ? log->count : DIAG_LOG_MAX;
  for (size_t i = 0; i < n; ++i)
    if (strstr(log->rec[i].message, needle))
      return &log->rec[i];
  return NULL;
}

/* Prints what was recorded (to help read a failing test). */
static inline void diag_log_dump(const DiagLog *log) {
  size_t n = log->count < DIAG_LOG_MAX ? log->count : DIAG_LOG_MAX;
  for (size_t i = 0; i < n; ++i)
    fprintf(stderr, "  [%zu] %s:%u:%u: %s\n", i, log->rec[i].file,
            log->rec[i].line, log->rec[i].col, log->rec[i].message);
}

/* Asserts that a diagnostic containing `needle` was recorded. */
#define ck_assert_diag(log, needle)                                        \
  do {                                                                     \
    if (!diag_log_find((log), (needle)))                                   \
      diag_log_dump(log);                                                  \
    ck_assert_msg(diag_log_find((log), (needle)) != NULL,                  \
                  "no diagnostic containing \"%s\" (%zu recorded)",        \
                  (needle), (log)->count);                                 \
  } while (0)

/* Asserts a diagnostic containing `needle` at file:line:col. */
#define ck_assert_diag_at(log, needle, fname, ln, cl)                      \
  do {                                                                     \
    ck_assert_diag(log, needle);                                           \
    const DiagRecord *r_ = diag_log_find((log), (needle));                 \
    ck_assert_str_eq(r_->file, (fname));                                   \
    ck_assert_uint_eq(r_->line, (ln));                                     \
    ck_assert_uint_eq(r_->col, (cl));                                      \
  } while (0)

/*===--- A counting, failing allocator ----------------------------------===*/

typedef struct CountingAlloc {
  size_t liveBlocks;
  long long liveBytes;
  size_t numAllocs;   /* allocations and growing reallocs attempted */
  size_t failAt;      /* 1-based attempt to fail; 0 = never */
  bool failOnward;    /* fail every attempt from failAt on */
  size_t numFailures; /* attempts refused */
  size_t badFrees;    /* frees whose oldSize was 0 (a bookkeeping bug) */
} CountingAlloc;

static inline void *counting_realloc(void *ud, void *ptr, size_t oldSize,
                                     size_t newSize) {
  CountingAlloc *c = ud;
  if (newSize == 0) {
    if (ptr) {
      if (oldSize == 0)
        c->badFrees++;
      c->liveBlocks--;
      c->liveBytes -= (long long)oldSize;
      free(ptr);
    }
    return NULL;
  }
  c->numAllocs++;
  if (c->failAt && (c->numAllocs == c->failAt ||
                    (c->failOnward && c->numAllocs > c->failAt))) {
    c->numFailures++;
    return NULL;
  }
  void *p = realloc(ptr, newSize);
  if (!p)
    return NULL;
  if (!ptr)
    c->liveBlocks++;
  c->liveBytes += (long long)newSize - (long long)(ptr ? oldSize : 0);
  return p;
}

static inline FzAllocator counting_allocator(CountingAlloc *c) {
  FzAllocator a = {counting_realloc, c};
  return a;
}

/* A context with every dialect, the kernel dialect included. */
static inline FzContext *ctx_with_kernel(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterKernelDialect(ctx));
  return ctx;
}

/* src with its first `from` replaced by `to` (from must occur);
 * malloc'ed. */
static inline char *text_replace(const char *src, const char *from,
                                 const char *to) {
  const char *at = strstr(src, from);
  ck_assert_msg(at != NULL, "'%s' not in the text", from);
  char *s = malloc(strlen(src) + strlen(to) + 1);
  ck_assert_ptr_nonnull(s);
  size_t pre = (size_t)(at - src);
  memcpy(s, src, pre);
  strcpy(s + pre, to);
  strcat(s, at + strlen(from));
  return s;
}

/* The module of src ("t.fuse"), parsed and verified (asserted). */
static inline FzOp *parse_verified(FzContext *ctx, const char *src) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"),
                          0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

/* Runs `pipeline` (anchored on builtin.module) over the module parsed
 * from src once per allocation the run makes, that allocation failing:
 * each run either succeeds or reports an error, and leaks nothing. Stops
 * at the first run that no failure reaches and returns the number of
 * allocations it covered. */
static inline size_t check_pass_allocation_failures(const char *src,
                                                    const char *pipeline) {
  for (size_t failAt = 1;; ++failAt) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert(fzRegisterAllDialects(ctx));
    ck_assert(fzRegisterAllPasses(ctx));
    FzOp *m = parse_verified(ctx, src);
    FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
    ck_assert_ptr_nonnull(pm);
    ck_assert(fzPassManagerParsePipeline(pm,
                                         fzStringRefFromCString(pipeline)));
    DiagLog log;
    diag_log_begin(&log, ctx);
    c.failAt = c.numAllocs + failAt;
    bool ok = fzPassManagerRun(pm, m);
    c.failAt = 0;
    diag_log_end(&log);
    if (!ok)
      ck_assert_uint_gt(log.numErrors, 0);
    fzPassManagerDestroy(pm);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_msg(c.liveBlocks == 0, "failAt %zu: %zu blocks leaked", failAt,
                  c.liveBlocks);
    if (ok && c.numFailures == 0)
      return failAt - 1;
    ck_assert_uint_lt(failAt, 200000);
  }
}

/*===--- Capturing printed text -----------------------------------------===*/

typedef struct TextBuf {
  char *data;
  size_t len, cap;
} TextBuf;

static inline void text_cb(FzStringRef chunk, void *ud) {
  TextBuf *t = ud;
  if (t->len + chunk.length + 1 > t->cap) {
    size_t c = t->cap ? t->cap : 256;
    while (c < t->len + chunk.length + 1)
      c *= 2;
    char *d = realloc(t->data, c);
    if (!d)
      return;
    t->data = d;
    t->cap = c;
  }
  if (chunk.length)
    memcpy(t->data + t->len, chunk.data, chunk.length);
  t->len += chunk.length;
  t->data[t->len] = 0;
}

static inline void text_free(TextBuf *t) {
  free(t->data);
  memset(t, 0, sizeof *t);
}

/* The text of a type / attribute / op (caller frees with free()). */
static inline char *type_str(const FzType *t) {
  TextBuf b = {0};
  fzTypePrint(t, text_cb, &b);
  return b.data ? b.data : calloc(1, 1);
}
static inline char *attr_str(const FzAttr *a) {
  TextBuf b = {0};
  fzAttrPrint(a, text_cb, &b);
  return b.data ? b.data : calloc(1, 1);
}

/*===--- Building IR ----------------------------------------------------===*/

/* A context with every built-in dialect and unregistered ops allowed. */
static inline FzContext *new_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  fzContextSetAllowUnregisteredDialects(ctx, true);
  return ctx;
}

static inline FzLoc *loc_at(FzContext *ctx, unsigned line, unsigned col) {
  return fzFileLineColLocGet(ctx, FZ_STR("test.fuse"), line, col);
}

/* A detached op `name` with the given operands, result types and number
 * of (empty) regions. NULL when creation fails. */
static inline FzOp *make_op(FzContext *ctx, const char *name, FzLoc *loc,
                            size_t nOperands, FzValue *const *operands,
                            size_t nResults, FzType *const *types,
                            size_t nRegions) {
  FzOpState st;
  fzOpStateInit(&st, ctx, fzStringRefFromCString(name), loc);
  if (nOperands)
    fzOpStateAddOperands(&st, nOperands, operands);
  if (nResults)
    fzOpStateAddResults(&st, nResults, types);
  for (size_t i = 0; i < nRegions; ++i)
    fzOpStateAddRegion(&st);
  return fzOpCreate(&st);
}

/* make_op + append at the end of block. */
static inline FzOp *add_op(FzBlock *block, const char *name, FzLoc *loc,
                           size_t nOperands, FzValue *const *operands,
                           size_t nResults, FzType *const *types,
                           size_t nRegions) {
  FzOp *op = make_op(fzBlockGetContext(block), name, loc, nOperands,
                     operands, nResults, types, nRegions);
  if (op)
    fzBlockAppendOp(block, op);
  return op;
}

/* Appends a new block with arguments to region i of op. */
static inline FzBlock *add_block(FzOp *op, size_t region, size_t nArgs,
                                 FzType *const *types) {
  FzBlock *b = fzBlockCreate(fzOpGetContext(op), nArgs, types, NULL);
  if (b)
    fzRegionAppendBlock(fzOpGetRegion(op, region), b);
  return b;
}

/* A detached builtin.module with its (empty) body block. */
static inline FzOp *make_module(FzContext *ctx) {
  FzOp *m = make_op(ctx, "builtin.module", NULL, 0, NULL, 0, NULL, 1);
  if (m && !add_block(m, 0, 0, NULL)) {
    fzOpDestroy(m);
    return NULL;
  }
  return m;
}

/* A func.func @name : (ins) -> (outs) appended to `block` (a module body)
 * with an entry block whose arguments match the inputs. The entry block
 * is returned through *entry. */
static inline FzOp *add_func(FzBlock *block, const char *name, size_t nIn,
                             FzType *const *ins, size_t nOut,
                             FzType *const *outs, FzBlock **entry) {
  FzContext *ctx = fzBlockGetContext(block);
  if (entry)
    *entry = NULL;
  FzType *ft = fzFunctionTypeGet(ctx, nIn, ins, nOut, outs);
  if (!ft)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("func.func"), NULL);
  fzOpStateAddProp(&st, FZ_STR("sym_name"),
                   fzStringAttrGet(ctx, fzStringRefFromCString(name)));
  fzOpStateAddProp(&st, FZ_STR("function_type"), fzTypeAttrGet(ctx, ft));
  fzOpStateAddRegion(&st);
  FzOp *f = fzOpCreate(&st);
  if (!f)
    return NULL;
  fzBlockAppendOp(block, f);
  FzBlock *e = add_block(f, 0, nIn, ins);
  if (entry)
    *entry = e;
  return e ? f : NULL;
}

/* Names of ops as "a,b,c" (for checking order). */
static inline void op_names(FzBlock *b, char *out, size_t cap) {
  out[0] = 0;
  size_t len = 0;
  for (FzOp *o = fzBlockGetFirstOp(b); o; o = fzOpGetNextInBlock(o)) {
    FzStringRef n = fzIdentGetString(fzOpGetName(o));
    int w = snprintf(out + len, cap - len, "%s%.*s", len ? "," : "",
                     (int)n.length, n.data);
    if (w < 0 || (size_t)w >= cap - len)
      return;
    len += (size_t)w;
  }
}

/* Runs a suite and returns the process exit status: a failure also when
 * nothing ran (a CK_RUN_CASE that names no case, as a ctest entry per
 * case would after a rename). */
static inline int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists each test */
  int failed = srunner_ntests_failed(sr);
  int ran = srunner_ntests_run(sr);
  srunner_free(sr);
  if (ran == 0)
    fprintf(stderr, "no test ran (CK_RUN_CASE names no case?)\n");
  return failed == 0 && ran > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* FZ_TEST_HELPERS_H */
