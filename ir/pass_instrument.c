/* ir/pass_instrument.c - what the pass manager does around passes: IR
 * dumps, print-after-change fingerprints, timing and statistics reports,
 * user instrumentations, and failure reproducers.
 *
 * All of it hangs off the top-level manager's FzPMInstr; passes never
 * see it. Dumps follow mlir-opt's format:
 *   // -----// IR Dump After CSE (cse) ('func.func' operation: @f) //----- //
 * A fingerprint is a 64-bit hash of the structure of the IR (op
 * identities and order, operands, attributes, types, locations), cheaper
 * than printing and exact enough to tell whether a pass changed anything.
 *
 * Ownership: FzPMInstr owns copies of every string in the printing
 * config, the user instrumentation array, and the captured input text.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "ir/pass_internal.h"

struct FzPMInstr {
  bool verify;
  bool timing;
  bool printing;
  FzIRPrintingConfig print; /* strings below are owned copies */
  char **before, **after;   /* NULL-terminated */
  char *treeDir;
  size_t dumpCounter;       /* numbering of tree-dir files */
  FzPassInstrumentation *user;
  size_t numUser;
  char *reproducerPath;
  FzBuf captured;           /* the input IR, when a reproducer is on */
  FzOp *topOp;
  double verifierSeconds;
};

double fzNowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

FzPMInstr *fzPMInstrGet(FzPassManager *top) {
  if (top->instr)
    return top->instr;
  FzPMInstr *in = fzCalloc(top->ctx, 1, sizeof *in);
  if (!in)
    return NULL;
  in->verify = true;
  fzBufInit(&in->captured, top->ctx);
  top->instr = in;
  return in;
}

static void free_list(FzContext *ctx, char **list) {
  for (size_t i = 0; list && list[i]; ++i)
    fzFree(ctx, list[i]);
  fzFree(ctx, list);
}

void fzPMInstrDestroy(FzContext *ctx, FzPMInstr *in) {
  free_list(ctx, in->before);
  free_list(ctx, in->after);
  fzFree(ctx, in->treeDir);
  fzFree(ctx, in->user);
  fzFree(ctx, in->reproducerPath);
  fzBufFree(&in->captured);
  fzFree(ctx, in);
}

bool fzPMInstrVerifyEnabled(const FzPassManager *top) {
  return top->instr && top->instr->verify;
}

bool fzPMInstrTimingEnabled(const FzPassManager *top) {
  return top->instr && top->instr->timing;
}

void fzPMInstrAddVerifierTime(FzPassManager *top, double seconds) {
  if (top->instr)
    top->instr->verifierSeconds += seconds;
}

void fzPMInstrSetTopOp(FzPassManager *top, FzOp *op) {
  if (top->instr)
    top->instr->topOp = op;
}

void fzPassManagerEnableVerifier(FzPassManager *pm, bool enable) {
  FzPMInstr *in = fzPMInstrGet(pm->top);
  if (in)
    in->verify = enable;
}

void fzPassManagerEnableTiming(FzPassManager *pm, bool enable) {
  FzPMInstr *in = fzPMInstrGet(pm->top);
  if (in)
    in->timing = enable;
}

static bool copy_list(FzContext *ctx, const char *const *src, char ***dst) {
  *dst = NULL;
  if (!src)
    return true;
  size_t n = 0;
  while (src[n])
    ++n;
  char **l = fzCalloc(ctx, n + 1, sizeof *l);
  if (!l)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!(l[i] = fzStrDup(ctx, src[i]))) {
      free_list(ctx, l);
      return false;
    }
  *dst = l;
  return true;
}

bool fzPassManagerEnableIRPrinting(FzPassManager *pm,
                                   const FzIRPrintingConfig *config) {
  FzContext *ctx = pm->ctx;
  FzPMInstr *in = fzPMInstrGet(pm->top);
  if (!in)
    return false;
  free_list(ctx, in->before);
  free_list(ctx, in->after);
  fzFree(ctx, in->treeDir);
  in->before = in->after = NULL;
  in->treeDir = NULL;
  in->printing = false;
  if (!config)
    return true;
  in->print = *config;
  if (!copy_list(ctx, config->beforePasses, &in->before) ||
      !copy_list(ctx, config->afterPasses, &in->after) ||
      (config->treeDir && !(in->treeDir = fzStrDup(ctx, config->treeDir))))
    return false;
  in->print.beforePasses = (const char *const *)in->before;
  in->print.afterPasses = (const char *const *)in->after;
  in->print.treeDir = in->treeDir;
  in->printing = true;
  return true;
}

bool fzPassManagerAddInstrumentation(FzPassManager *pm,
                                     const FzPassInstrumentation *instr) {
  FzPMInstr *in = fzPMInstrGet(pm->top);
  if (!in)
    return false;
  FzPassInstrumentation *u =
      fzRealloc(pm->ctx, in->user, (in->numUser + 1) * sizeof *u);
  if (!u)
    return false;
  u[in->numUser++] = *instr;
  in->user = u;
  return true;
}

bool fzPassManagerEnableReproducer(FzPassManager *pm, const char *path) {
  FzPMInstr *in = fzPMInstrGet(pm->top);
  if (!in)
    return false;
  fzFree(pm->ctx, in->reproducerPath);
  in->reproducerPath = NULL;
  if (path && !(in->reproducerPath = fzStrDup(pm->ctx, path)))
    return false;
  return true;
}

/*===--- Fingerprints -----------------------------------------------------===*/

static inline uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 29);
}

static FzWalkResult fingerprint_fn(FzOp *op, void *ud) {
  uint64_t *h = ud;
  uint64_t x = mix64(*h, (uint64_t)(uintptr_t)op);
  x = mix64(x, (uint64_t)(uintptr_t)fzOpGetName(op));
  x = mix64(x, (uint64_t)(uintptr_t)fzOpGetAttrDict(op));
  x = mix64(x, (uint64_t)(uintptr_t)fzOpGetPropDict(op));
  x = mix64(x, (uint64_t)(uintptr_t)fzOpGetLoc(op));
  size_t n = fzOpGetNumOperands(op);
  for (size_t i = 0; i < n; ++i)
    x = mix64(x, (uint64_t)(uintptr_t)fzOpGetOperand(op, i));
  n = fzOpGetNumResults(op);
  for (size_t i = 0; i < n; ++i)
    x = mix64(x, (uint64_t)(uintptr_t)fzValueGetType(fzOpGetResult(op, i)));
  n = fzOpGetNumRegions(op);
  for (size_t r = 0; r < n; ++r) {
    x = mix64(x, 0x5eed + r);
    for (FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(op, r)); b;
         b = fzBlockGetNext(b)) {
      x = mix64(x, (uint64_t)(uintptr_t)b);
      size_t na = fzBlockGetNumArguments(b);
      for (size_t a = 0; a < na; ++a) {
        FzValue *arg = fzBlockGetArgument(b, a);
        x = mix64(x, (uint64_t)(uintptr_t)arg);
        x = mix64(x, (uint64_t)(uintptr_t)fzValueGetType(arg));
      }
    }
  }
  *h = x;
  return FZ_WALK_ADVANCE;
}

static uint64_t fingerprint(FzOp *op) {
  uint64_t h = 0x6a09e667f3bcc909ULL;
  (void)fzOpWalk(op, FZ_WALK_PRE_ORDER, fingerprint_fn, &h);
  return h;
}

/*===--- IR dumps ---------------------------------------------------------===*/

static bool in_list(char **list, const char *name) {
  for (size_t i = 0; list && list[i]; ++i)
    if (strcmp(list[i], name) == 0)
      return true;
  return false;
}

static bool wants_before(const FzPMInstr *in, const FzPass *pass) {
  return in && in->printing &&
         (in->print.beforeAll || in_list(in->before, pass->def->argument));
}

/* After-dumps: selected passes; print-after-change or a tree dir alone
 * select every pass. */
static bool wants_after(const FzPMInstr *in, const FzPass *pass) {
  if (!in || !in->printing)
    return false;
  if (in->print.afterAll || in_list(in->after, pass->def->argument))
    return true;
  bool anySelection = in->print.beforeAll || in->before || in->after ||
                      in->print.afterFailure;
  return (in->print.afterChange && !in->after) ||
         (in->treeDir && !anySelection);
}

static void write_file_cb(FzStringRef chunk, void *ud) {
  fwrite(chunk.data, 1, chunk.length, (FILE *)ud);
}

static void emit(FzPMInstr *in, const char *text, size_t len) {
  FzStringRef s = {text, len};
  if (in->print.out)
    in->print.out(s, in->print.outUserData);
  else
    fwrite(text, 1, len, stderr);
}

typedef struct DumpSink {
  FzPMInstr *in;
} DumpSink;

static void dump_cb(FzStringRef chunk, void *ud) {
  DumpSink *s = ud;
  emit(s->in, chunk.data, chunk.length);
}

/* Writes DIR/NNN_<pass>[_before].fuse. */
static void dump_to_tree(FzPMInstr *in, FzPass *pass, FzOp *op,
                         const char *kind) {
  FzContext *ctx = pass->ctx;
  if (mkdir(in->treeDir, 0777) != 0 && errno != EEXIST) {
    fzEmitError(ctx, NULL, "cannot create directory '%s': %s", in->treeDir,
                strerror(errno));
    return;
  }
  FzBuf path;
  fzBufInit(&path, ctx);
  fzBufPrintf(&path, "%s/%03zu_%s%s.fuse", in->treeDir, in->dumpCounter++,
              pass->def->argument, kind);
  FILE *f = path.data ? fopen(path.data, "wb") : NULL;
  if (!f) {
    fzEmitError(ctx, NULL, "cannot write '%s': %s",
                path.data ? path.data : in->treeDir, strerror(errno));
    fzBufFree(&path);
    return;
  }
  fzOpPrint(op, in->print.printFlags, write_file_cb, f);
  errno = 0;
  int err = fflush(f) != 0 || ferror(f) ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && !err)
    err = errno ? errno : EIO;
  if (err)
    fzEmitError(ctx, NULL, "cannot write '%s': %s", path.data, strerror(err));
  fzBufFree(&path);
}

/* when: "Before" or "After"; failed adds " Failed" after the name. */
static void dump(FzPMInstr *in, FzPass *pass, FzOp *op, const char *when,
                 bool failed) {
  FzOp *shown = in->print.moduleScope && in->topOp ? in->topOp : op;
  if (in->treeDir) {
    dump_to_tree(in, pass, shown,
                 strcmp(when, "Before") == 0 ? "_before" : "");
    return;
  }
  FzBuf b;
  fzBufInit(&b, pass->ctx);
  const char *display =
      pass->def->displayName ? pass->def->displayName : pass->def->argument;
  fzBufPrintf(&b, "// -----// IR Dump %s %s%s (%s)", when, display,
              failed ? " Failed" : "", pass->def->argument);
  if (shown != in->topOp) {
    fzBufPrintf(&b, " ('%s' operation", fzIdentGetString(fzOpGetName(op)).data);
    FzStringRef sym = fzSymbolGetName(op);
    if (sym.data)
      fzBufPrintf(&b, ": @%.*s", (int)sym.length, sym.data);
    fzBufPutc(&b, ')');
  }
  fzBufPuts(&b, " //----- //\n");
  if (b.data)
    emit(in, b.data, b.len);
  fzBufFree(&b);
  DumpSink sink = {in};
  fzOpPrint(shown, in->print.printFlags, dump_cb, &sink);
  emit(in, "\n", 1);
}

void fzPMInstrBeforePass(FzPassManager *top, FzPass *pass, FzOp *op,
                         FzPassRunToken *token) {
  FzPMInstr *in = top->instr;
  token->haveFingerprint = false;
  if (!in)
    return;
  for (size_t i = 0; i < in->numUser; ++i)
    if (in->user[i].runBeforePass)
      in->user[i].runBeforePass(pass, op, in->user[i].userData);
  if (wants_before(in, pass))
    dump(in, pass, op, "Before", false);
  if (in->printing && in->print.afterChange && wants_after(in, pass)) {
    token->fingerprint = fingerprint(op);
    token->haveFingerprint = true;
  }
}

void fzPMInstrAfterPass(FzPassManager *top, FzPass *pass, FzOp *op,
                        const FzPassRunToken *token) {
  FzPMInstr *in = top->instr;
  if (!in)
    return;
  if (wants_after(in, pass) &&
      !(token->haveFingerprint && token->fingerprint == fingerprint(op)))
    dump(in, pass, op, "After", false);
  for (size_t i = 0; i < in->numUser; ++i)
    if (in->user[i].runAfterPass)
      in->user[i].runAfterPass(pass, op, in->user[i].userData);
}

void fzPMInstrAfterPassFailed(FzPassManager *top, FzPass *pass, FzOp *op) {
  FzPMInstr *in = top->instr;
  if (!in)
    return;
  if (in->printing && in->print.afterFailure)
    dump(in, pass, op, "After", true);
  for (size_t i = 0; i < in->numUser; ++i)
    if (in->user[i].runAfterPassFailed)
      in->user[i].runAfterPassFailed(pass, op, in->user[i].userData);
}

double fzPMInstrGetVerifierSeconds(const FzPassManager *top) {
  return top->instr ? top->instr->verifierSeconds : 0.0;
}

/*===--- Reproducers ------------------------------------------------------===*/

static const char kReproducerTag[] = "// fuse-reproducer: --pass-pipeline='";

static void buf_cb(FzStringRef chunk, void *ud) {
  fzBufAppend((FzBuf *)ud, chunk.data, chunk.length);
}

bool fzPMInstrCaptureInput(FzPassManager *top, FzOp *op) {
  FzPMInstr *in = top->instr;
  if (!in || !in->reproducerPath)
    return true;
  fzBufClear(&in->captured);
  fzOpPrint(op, FZ_PRINT_GENERIC | FZ_PRINT_DEBUGINFO, buf_cb, &in->captured);
  return !in->captured.failed;
}

void fzPMInstrWriteReproducer(FzPassManager *top) {
  FzPMInstr *in = top->instr;
  if (!in || !in->reproducerPath || !in->captured.data)
    return;
  FzContext *ctx = top->ctx;
  FzBuf pipeline;
  fzBufInit(&pipeline, ctx);
  fzPassManagerPrintPipeline(top, buf_cb, &pipeline);
  FILE *f = fopen(in->reproducerPath, "wb");
  if (!f) {
    fzEmitError(ctx, NULL, "cannot write reproducer '%s': %s",
                in->reproducerPath, strerror(errno));
    fzBufFree(&pipeline);
    return;
  }
  fputs(kReproducerTag, f);
  if (pipeline.data)
    fwrite(pipeline.data, 1, pipeline.len, f);
  fputs("'\n", f);
  fwrite(in->captured.data, 1, in->captured.len, f);
  errno = 0;
  int err = fflush(f) != 0 || ferror(f) ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && !err)
    err = errno ? errno : EIO;
  if (err)
    fzEmitError(ctx, NULL, "cannot write reproducer '%s': %s",
                in->reproducerPath, strerror(err));
  else
    fzDiagReport(fzDiagBegin(ctx, FZ_SEVERITY_NOTE, NULL,
                             "reproducer written to '%s'",
                             in->reproducerPath));
  fzBufFree(&pipeline);
}

bool fzReproducerGetPipeline(FzStringRef source, FzStringRef *pipeline) {
  size_t n = sizeof kReproducerTag - 1;
  pipeline->data = NULL;
  pipeline->length = 0;
  if (source.length < n || memcmp(source.data, kReproducerTag, n) != 0)
    return false;
  const char *start = source.data + n;
  const char *end = source.data + source.length;
  const char *eol = memchr(start, '\n', (size_t)(end - start));
  if (!eol)
    eol = end;
  /* The pipeline ends at the last quote of the line. */
  const char *q = eol;
  while (q > start && q[-1] != '\'')
    --q;
  if (q == start)
    return false;
  pipeline->data = start;
  pipeline->length = (size_t)(q - 1 - start);
  return true;
}
