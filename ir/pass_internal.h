/* ir/pass_internal.h - layouts behind fz/pass.h's handles, shared by the
 * pass-infrastructure files of ir/ (pass.c, pass_manager.c,
 * pass_instrument.c, pipeline_parser.c, rewriter.c, greedy.c).
 *
 * Invariants:
 *  - a pass belongs to at most one pass manager, which destroys it;
 *  - a nested pass manager belongs to its parent entry; only the
 *    top-level manager (parent NULL) owns the instrumentation state, and
 *    every nested manager reaches it through `top`;
 *  - option values are always valid for their definitions (parsed and
 *    range-checked before being stored).
 */
#ifndef FZ_IR_PASS_INTERNAL_H
#define FZ_IR_PASS_INTERNAL_H

#include "fz/pass.h"
#include "ir/internal.h"

/*===--- Rewriter ---------------------------------------------------------===*/

struct FzRewriter {
  FzContext *ctx;
  FzRewriteListener listener;
  FzBuilder builder; /* the insertion point */
  FzOp *erasing;     /* op whose erasure is being notified, else NULL */
  FzPtrVec scratch;  /* users collected by replace-all-uses */
};

/* Notifies the listener that op and every op nested in it were inserted. */
void fzRewriterNotifyInsertedTree(FzRewriter *rw, FzOp *op);

/*===--- Patterns ---------------------------------------------------------===*/

/* Patterns of one root name, best benefit first (ties: insertion order). */
typedef struct FzPatternList {
  size_t num;
  const FzPattern **items;
} FzPatternList;

struct FzPatternSet {
  FzContext *ctx;
  FzPattern *patterns;
  size_t num, cap;
  bool failed; /* an Add ran out of memory or was invalid */
  /* Frozen index, rebuilt when patterns were added since. */
  bool frozen;
  FzArena arena;   /* lists and their items */
  FzPtrMap byName; /* FzIdent* -> FzPatternList* (with any-root merged) */
  FzPatternList anyRoot;
};

/* Builds the index if needed; false on OOM (reported). */
bool fzPatternSetFreeze(FzPatternSet *set);
/* The patterns to try on ops named `name`, best first. */
const FzPatternList *fzPatternSetLookup(const FzPatternSet *set,
                                        const FzIdent *name);

/*===--- Passes -----------------------------------------------------------===*/

/* The current value of one option. */
typedef struct FzOptionValue {
  bool b;
  int64_t i;
  double f;
  char *s; /* STRING: heap copy (fzMalloc), NUL-terminated; may be NULL */
  size_t slen;
} FzOptionValue;

struct FzPass {
  FzContext *ctx;
  const FzPassDef *def;
  FzOptionValue *options; /* def->numOptions */
  uint64_t *stats;        /* def->numStatistics */
  void *state;
  bool initialized;
  double seconds;         /* wall time over every run (timing) */
  size_t runs;
};

/* Parses `value` for option `od` into *out (a string is copied). On
 * failure returns false with a message in *err (static or built into
 * errBuf) and stores nothing. */
bool fzPassParseOptionValue(FzContext *ctx, const FzPassOptionDef *od,
                            FzStringRef value, FzOptionValue *out,
                            FzBuf *err);
/* The option definition named `name`, or NULL; its index in *index. */
const FzPassOptionDef *fzPassFindOption(const FzPassDef *def,
                                        FzStringRef name, size_t *index);
/* Replaces option `index`'s value with *v (taking over its string). */
void fzPassStoreOption(FzPass *pass, size_t index, FzOptionValue *v);

/*===--- Pass managers ----------------------------------------------------===*/

typedef struct FzPMEntry {
  FzPass *pass;          /* exactly one of pass / nested is set */
  FzPassManager *nested;
} FzPMEntry;

/* The instrumentation state of a top-level manager (pass_instrument.c). */
typedef struct FzPMInstr FzPMInstr;

struct FzPassManager {
  FzContext *ctx;
  char *anchor;          /* heap copy; NULL: any op */
  FzIdent *anchorIdent;  /* NULL: any op */
  FzPMEntry *entries;
  size_t num, cap;
  FzPassManager *parent; /* NULL for a top-level manager */
  FzPassManager *top;    /* the top-level manager (itself when top) */
  FzPMInstr *instr;      /* top-level only */
  double seconds;        /* time spent in this nested pipeline */
  size_t runs;
};

/* Creates a manager (top-level when parent is NULL). */
FzPassManager *fzPassManagerCreateInternal(FzContext *ctx, const char *anchor,
                                           FzPassManager *parent);
/* Destroys pm and what it owns (works for nested ones too). */
void fzPassManagerDestroyInternal(FzPassManager *pm);
/* Appends an entry; takes ownership of what it holds even on failure. */
bool fzPassManagerAppendEntry(FzPassManager *pm, FzPMEntry entry);
/* Moves every entry of src to the end of dst (src is left empty). */
bool fzPassManagerSpliceEntries(FzPassManager *dst, FzPassManager *src);
/* Whether a manager anchored `anchor` can run the pass def. */
bool fzPassDefRunsOn(const FzPassDef *def, const char *anchor);

/*===--- Instrumentation hooks (pass_instrument.c) --------------------------===*/

/* The instrumentation state; created on demand. NULL on OOM. */
FzPMInstr *fzPMInstrGet(FzPassManager *top);
void fzPMInstrDestroy(FzContext *ctx, FzPMInstr *in);
bool fzPMInstrVerifyEnabled(const FzPassManager *top);

/* Called by the run loop around each pass run. `token` carries the
 * fingerprint taken before the pass (print-after-change). */
typedef struct FzPassRunToken {
  uint64_t fingerprint;
  bool haveFingerprint;
} FzPassRunToken;
void fzPMInstrBeforePass(FzPassManager *top, FzPass *pass, FzOp *op,
                         FzPassRunToken *token);
void fzPMInstrAfterPass(FzPassManager *top, FzPass *pass, FzOp *op,
                        const FzPassRunToken *token);
void fzPMInstrAfterPassFailed(FzPassManager *top, FzPass *pass, FzOp *op);
bool fzPMInstrTimingEnabled(const FzPassManager *top);
void fzPMInstrAddVerifierTime(FzPassManager *top, double seconds);
double fzPMInstrGetVerifierSeconds(const FzPassManager *top);
/* The op the whole run started on (for module-scope dumps). */
void fzPMInstrSetTopOp(FzPassManager *top, FzOp *op);
/* Reproducer: capture before the run; write after a failure. */
bool fzPMInstrCaptureInput(FzPassManager *top, FzOp *op);
void fzPMInstrWriteReproducer(FzPassManager *top);

/* Monotonic wall-clock seconds. */
double fzNowSeconds(void);

#endif /* FZ_IR_PASS_INTERNAL_H */
