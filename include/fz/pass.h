/* fz/pass.h - passes, pass managers, textual pipelines, patterns, the
 * rewriter and the greedy pattern driver.
 *
 * Layers, bottom up:
 *  - Patterns (FzPattern, FzPatternSet): plain C callbacks that match a
 *    root op and rewrite it through an FzRewriter.
 *  - The rewriter (FzRewriter): every IR mutation made by a pattern goes
 *    through it, so that a listener (the greedy driver's worklist) sees
 *    each inserted, modified, replaced and erased op.
 *  - The greedy driver (fzApplyPatternsGreedily): folds, then applies
 *    patterns by benefit, until a fixed point or a limit.
 *  - Passes (FzPassDef, FzPass): a named transformation with typed
 *    options and statistics, anchored on an op name or on any op.
 *  - Pass managers (FzPassManager): nested pipelines anchored on op
 *    names, built from text (`builtin.module(func.func(cse))`), with the
 *    instrumentation (verifier, IR printing, timing, statistics,
 *    reproducers) owned by the top-level manager.
 *  - The registry of passes and named pipelines hangs off the context.
 *
 * Ownership: pattern sets, rewriters and pass managers are created and
 * destroyed by the caller; a pass added to a pass manager belongs to it.
 * Definitions (FzPassDef, option tables, strings in FzPattern) are static
 * tables that must outlive the context they are used with. Every Destroy
 * function here ignores NULL.
 *
 * Callbacks (patterns, listeners, pass hooks, instrumentation, print
 * callbacks) run on the thread that drives the pass manager or driver,
 * i.e. the one using the context; they may use that context freely but
 * must not destroy the pass manager or pattern set that called them.
 */
#ifndef FZ_PASS_H
#define FZ_PASS_H

#include "fz/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzPatternSet FzPatternSet;
typedef struct FzRewriter FzRewriter;
typedef struct FzPass FzPass;
typedef struct FzPassManager FzPassManager;

/*===------------------------------------------------------------------===*
 * Patterns
 *===------------------------------------------------------------------===*/

/* Matches `op` and, on a match, rewrites it through `rewriter`. Returns
 * true when it changed the IR; false when it did not match, in which case
 * it must not have changed anything. Every change goes through the
 * rewriter (create, replace, erase, modify in place). */
typedef bool (*FzMatchAndRewriteFn)(FzOp *op, FzRewriter *rewriter,
                                    void *userData);

typedef struct FzPattern {
  const char *rootName;  /* "graph.add": the op it matches; NULL: any op */
  unsigned benefit;      /* patterns of higher benefit are tried first */
  FzMatchAndRewriteFn matchAndRewrite;
  void *userData;        /* passed to matchAndRewrite */
  const char *debugName; /* for diagnostics and debugging; may be NULL */
} FzPattern;

/* An empty set of patterns. NULL on allocation failure. The caller owns
 * it (fzPatternSetDestroy); drivers and passes only borrow it. */
FZ_API FzPatternSet *fzPatternSetCreate(FzContext *ctx);
FZ_API void fzPatternSetDestroy(FzPatternSet *set);
FZ_API FzContext *fzPatternSetGetContext(const FzPatternSet *set);
/* Adds a copy of *pattern. Returns false on allocation failure (or a
 * pattern without a callback), which is also recorded in the set: a
 * driver given a failed set reports it and fails. Patterns of equal
 * benefit are tried in the order they were added. */
FZ_API bool fzPatternSetAdd(FzPatternSet *set, const FzPattern *pattern);
FZ_API size_t fzPatternSetGetNumPatterns(const FzPatternSet *set);
/* Adds the canonicalization patterns of every op registered in the
 * set's context (their getCanonicalizationPatterns hooks). False when the
 * set has failed (an Add ran out of memory), now or before. */
FZ_API bool fzPatternSetAddCanonicalizationPatterns(FzPatternSet *set);

/* Extra canonicalization patterns that belong to no op definition, e.g.
 * graph rewrites that live in transforms/ (a dialect may not depend on
 * transforms). Every provider registered in a context is called by
 * fzPatternSetAddCanonicalizationPatterns after the ops' own hooks.
 * Registering the same function twice is a no-op; false on allocation
 * failure (reported). */
typedef void (*FzCanonicalizationProvider)(FzPatternSet *set,
                                           FzContext *ctx);
FZ_API FZ_MUST_CHECK bool
fzContextAddCanonicalizationProvider(FzContext *ctx,
                                     FzCanonicalizationProvider fn);

/*===------------------------------------------------------------------===*
 * Rewriter
 *===------------------------------------------------------------------===*/

/* Observes the changes made through a rewriter. Every callback may be
 * NULL. notifyOpErased is called before the op is destroyed (still in
 * the IR, operands intact), once for the op and once for every op nested
 * in it (innermost first). notifyOpReplaced is called before the uses of
 * op are redirected to newValues (numResults of them). notifyOpModified
 * is called after an in-place change: an operand, attribute or region
 * changed, including operands redirected by a replace-all-uses. */
typedef struct FzRewriteListener {
  void (*notifyOpInserted)(FzOp *op, void *userData);
  void (*notifyOpModified)(FzOp *op, void *userData);
  void (*notifyOpReplaced)(FzOp *op, FzValue *const *newValues,
                           void *userData);
  void (*notifyOpErased)(FzOp *op, void *userData);
  void *userData;
} FzRewriteListener;

/* A rewriter with no insertion point; `listener` (copied) may be NULL.
 * NULL on allocation failure. */
FZ_API FzRewriter *fzRewriterCreate(FzContext *ctx,
                                    const FzRewriteListener *listener);
/* Frees the rewriter (not the IR it changed). */
FZ_API void fzRewriterDestroy(FzRewriter *rw);
FZ_API FzContext *fzRewriterGetContext(const FzRewriter *rw);

/* The insertion point for new ops. The greedy driver sets it before the
 * op being rewritten before calling a pattern. */
FZ_API void fzRewriterSetInsertionPointBefore(FzRewriter *rw, FzOp *op);
FZ_API void fzRewriterSetInsertionPointAfter(FzRewriter *rw, FzOp *op);
FZ_API void fzRewriterSetInsertionPointToStart(FzRewriter *rw, FzBlock *block);
FZ_API void fzRewriterSetInsertionPointToEnd(FzRewriter *rw, FzBlock *block);
/* The block ops are inserted into (NULL: none). */
FZ_API FzBlock *fzRewriterGetInsertionBlock(const FzRewriter *rw);

/* Creates an op from st (consumed) at the insertion point and notifies
 * the listener. NULL after an error (reported). */
FZ_API FZ_MUST_CHECK FzOp *fzRewriterCreateOp(FzRewriter *rw, FzOpState *st);
/* Inserts a detached op (e.g. a clone) at the insertion point and
 * notifies the listener of it and of every op nested in it. */
FZ_API void fzRewriterInsertOp(FzRewriter *rw, FzOp *op);
/* Clones op (see fzOpClone) at the insertion point. NULL on OOM. */
FZ_API FzOp *fzRewriterCloneOp(FzRewriter *rw, FzOp *op, FzIRMapping *mapping);
/* Creates a constant through `dialect`'s materializeConstant hook at the
 * insertion point; returns its result, or NULL when the dialect cannot. */
FZ_API FzValue *fzRewriterMaterializeConstant(FzRewriter *rw,
                                              const FzDialectDef *dialect,
                                              FzAttr *value, FzType *type,
                                              FzLoc *loc);

/* Replaces every use of op's results with newValues (exactly
 * fzOpGetNumResults(op) of them; none NULL) and erases op. */
FZ_API void fzRewriterReplaceOp(FzRewriter *rw, FzOp *op,
                                FzValue *const *newValues);
/* The same with the results of newOp (same number of results). */
FZ_API void fzRewriterReplaceOpWithOp(FzRewriter *rw, FzOp *op, FzOp *newOp);
/* Erases op, whose results must have no uses left. */
FZ_API void fzRewriterEraseOp(FzRewriter *rw, FzOp *op);
/* Redirects every use of from to to; each user is notified as modified. */
FZ_API void fzRewriterReplaceAllUsesWith(FzRewriter *rw, FzValue *from,
                                         FzValue *to);

/* In-place modification: call Start, change op's operands, attributes or
 * properties directly, then Finalize (notifies the listener) or Cancel
 * (when nothing changed after all). */
FZ_API void fzRewriterStartModify(FzRewriter *rw, FzOp *op);
FZ_API void fzRewriterFinalizeModify(FzRewriter *rw, FzOp *op);
FZ_API void fzRewriterCancelModify(FzRewriter *rw, FzOp *op);
/* Start + fzOpSetOperand + Finalize. */
FZ_API void fzRewriterSetOperand(FzRewriter *rw, FzOp *op, size_t i,
                                 FzValue *v);

/* Moves op before/after anchor (same or another block); notifies the
 * listener as modified. */
FZ_API void fzRewriterMoveOpBefore(FzRewriter *rw, FzOp *op, FzOp *anchor);
FZ_API void fzRewriterMoveOpAfter(FzRewriter *rw, FzOp *op, FzOp *anchor);
/* Moves every op of `source` before `before` (in another block),
 * replacing uses of source's arguments with argValues (one per argument;
 * may be NULL when it has none), then destroys the empty, detached-or-
 * attached source block. The moved ops are notified as inserted. */
FZ_API void fzRewriterInlineBlockBefore(FzRewriter *rw, FzBlock *source,
                                        FzOp *before,
                                        FzValue *const *argValues);

/* For a pattern's early exits: `return fzRewriterNotifyMatchFailure(rw,
 * op, "operand is not constant");`. Returns false. The reason is kept
 * only while debugging output is on; it is never an error. */
FZ_API bool fzRewriterNotifyMatchFailure(FzRewriter *rw, FzOp *op,
                                         const char *fmt, ...) FZ_PRINTF(3, 4);

/*===------------------------------------------------------------------===*
 * Folding and constants
 *===------------------------------------------------------------------===*/

/* The constant a value holds: the "value" inherent attribute of its
 * defining op when that op has FZ_TRAIT_CONSTANT_LIKE; NULL otherwise. */
FZ_API FzAttr *fzValueGetConstant(const FzValue *v);
/* Calls op's fold hook with its operands' constants. On true, results[i]
 * (room for fzOpGetNumResults(op)) says what result i folded to; an
 * in-place fold gives results[0].value == fzOpGetResult(op, 0). False
 * when the op has no hook, is constant-like, or did not fold. */
FZ_API bool fzOpTryFold(FzOp *op, FzFoldResult *results);
/* The registered dialect an op belongs to (the name's prefix before the
 * first '.'), or NULL. */
FZ_API const FzDialectDef *fzOpGetDialect(const FzOp *op);
/* True when op has no side effects, nested ops included: it is
 * FZ_TRAIT_PURE and every op in its regions is pure or a return-like
 * terminator. False for unregistered ops. */
FZ_API bool fzOpIsEffectFree(const FzOp *op);
/* True when op can be erased: effect-free, not a terminator, and none of
 * its results is used. */
FZ_API bool fzOpIsTriviallyDead(const FzOp *op);

/*===------------------------------------------------------------------===*
 * Greedy pattern driver
 *===------------------------------------------------------------------===*/

/* Use as a limit: no limit at all. */
#define FZ_GREEDY_NO_LIMIT ((size_t)-1)

typedef struct FzGreedyConfig {
  /* Times the worklist is rebuilt from every op and drained before giving
   * up (MLIR's max-iterations); 0 means 10. FZ_GREEDY_NO_LIMIT: none. */
  size_t maxIterations;
  /* Total rewrites (folds + pattern applications) before giving up; 0
   * means automatic: 64 per op present at the start, plus 1024 (catches
   * cycles of patterns inside one iteration). FZ_GREEDY_NO_LIMIT: none. */
  size_t maxRewrites;
  bool topDown;  /* seed the worklist in pre-order (true, default) */
  bool fold;     /* call fold hooks before patterns (default true) */
  /* Report not converging as an error at the location of the
   * isolated-from-above op (e.g. the function) holding the last rewrite,
   * and return false (default true). When false, not converging is
   * silent and the driver returns true. */
  bool reportNonConvergence;
} FzGreedyConfig;

/* Fills the defaults described above. */
FZ_API void fzGreedyConfigInit(FzGreedyConfig *config);

/* What a run of the driver did (all counters cumulative). */
typedef struct FzGreedyStats {
  size_t iterations;    /* worklist rebuilds */
  size_t folds;         /* ops folded (replaced or updated in place) */
  size_t rewrites;      /* successful pattern applications */
  size_t erased;        /* ops erased (trivially dead or by patterns) */
  size_t constantsMade; /* constants materialized for folds */
  bool changed;         /* the IR changed */
  bool converged;       /* a fixed point was reached within the limits */
} FzGreedyStats;

/* Applies folds and patterns to every op nested in root's regions (not
 * root itself) until nothing changes. Trivially dead ops (pure, unused)
 * are erased. Worklist: an op is revisited when its operands change, when
 * a value it uses is replaced, when it is created, or when a user of one
 * of its results is erased. config and stats may be NULL. Returns false
 * after reporting an error: no convergence within the limits (when
 * config->reportNonConvergence), an allocation failure, or a failed
 * pattern set. */
FZ_API FZ_MUST_CHECK bool fzApplyPatternsGreedily(FzOp *root,
                                                  FzPatternSet *patterns,
                                                  const FzGreedyConfig *config,
                                                  FzGreedyStats *stats);

/*===------------------------------------------------------------------===*
 * Passes
 *===------------------------------------------------------------------===*/

typedef enum FzPassOptionKind {
  FZ_PASS_OPTION_BOOL,   /* true/false/1/0; `{flag}` alone means true */
  FZ_PASS_OPTION_INT,    /* int64, within [minValue, maxValue] */
  FZ_PASS_OPTION_FLOAT,  /* double */
  FZ_PASS_OPTION_STRING, /* any text, or one of `choices` */
} FzPassOptionKind;

typedef struct FzPassOptionDef {
  const char *name;         /* "max-iterations" */
  FzPassOptionKind kind;
  const char *defaultValue; /* as text; NULL means false / 0 / "" */
  const char *description;  /* one line, for --help and docs */
  const char *const *choices; /* STRING: allowed values, NULL-terminated;
                                 NULL: any */
  int64_t minValue, maxValue; /* INT: bounds; both 0 means unbounded */
} FzPassOptionDef;

typedef struct FzPassStatisticDef {
  const char *name;        /* "num-cse'd" */
  const char *description; /* "Number of operations CSE'd" */
} FzPassStatisticDef;

typedef struct FzPassDef {
  const char *argument;    /* name in pipelines and flags: "cse" */
  const char *displayName; /* in dumps and reports: "CSE"; NULL: argument */
  const char *summary;     /* one line, for --list-passes */
  /* The op name the pass runs on ("func.func", "builtin.module"), or
   * NULL for any op (then it should not assume what it runs on). */
  const char *anchor;
  const FzPassOptionDef *options;
  size_t numOptions;
  const FzPassStatisticDef *statistics;
  size_t numStatistics;
  /* Once per pass instance, after its options are set and before its
   * first run: builds state kept with fzPassSetState. May be NULL.
   * Returns false after reporting an error. */
  bool (*initialize)(FzPass *pass, FzContext *ctx);
  /* Runs on one op of the anchor's name. Returns false after reporting
   * an error (the pass manager reports a generic one if it did not). The
   * pass may change only op and what is nested in it. */
  bool (*run)(FzPass *pass, FzOp *op);
  /* Frees the state set by initialize; called when the instance is
   * destroyed, also when initialize never ran (state NULL). May be NULL. */
  void (*destroy)(FzPass *pass);
  void *userData; /* for the definer: fzPassGetDef(p)->userData */
} FzPassDef;

/* A pass instance with its options at their defaults. NULL after an
 * error (allocation failure, or a default value the option rejects). */
FZ_API FzPass *fzPassCreate(FzContext *ctx, const FzPassDef *def);
/* Destroys a pass that was not added to a pass manager. */
FZ_API void fzPassDestroy(FzPass *pass);
FZ_API const FzPassDef *fzPassGetDef(const FzPass *pass);
FZ_API FzContext *fzPassGetContext(const FzPass *pass);

/* Sets option `name` from text, as a pipeline's `{name=value}` does.
 * Returns false after reporting an error (unknown option, bad value). */
FZ_API FZ_MUST_CHECK bool fzPassSetOption(FzPass *pass, FzStringRef name,
                                          FzStringRef value);
/* Typed option values; the option must exist and have that kind (else
 * false / 0 / 0.0 / an empty string). */
FZ_API bool fzPassGetBoolOption(const FzPass *pass, const char *name);
FZ_API int64_t fzPassGetIntOption(const FzPass *pass, const char *name);
FZ_API double fzPassGetFloatOption(const FzPass *pass, const char *name);
FZ_API FzStringRef fzPassGetStringOption(const FzPass *pass, const char *name);
/* Prints the pass as in a pipeline: `name{opt=value ...}`, every option
 * with its current value (no braces when it has none). */
FZ_API void fzPassPrint(const FzPass *pass, FzPrintCallback cb, void *userData);

/* Per-instance state owned by the pass definition's hooks. */
FZ_API void *fzPassGetState(const FzPass *pass);
FZ_API void fzPassSetState(FzPass *pass, void *state);

/* Adds to statistic `index` (into def->statistics). Statistics add up
 * over every op the instance runs on. */
FZ_API void fzPassAddStatistic(FzPass *pass, size_t index, uint64_t amount);
FZ_API uint64_t fzPassGetStatistic(const FzPass *pass, size_t index);

/*===------------------------------------------------------------------===*
 * Registry of passes and named pipelines (per context)
 *===------------------------------------------------------------------===*/

/* Registers a pass definition under def->argument. The same definition
 * twice is a no-op; another definition of the same argument (or of the
 * name of a registered pipeline) is an error. */
FZ_API FZ_MUST_CHECK bool fzContextRegisterPass(FzContext *ctx,
                                                const FzPassDef *def);
FZ_API const FzPassDef *fzContextLookupPass(const FzContext *ctx,
                                            FzStringRef argument);
/* Calls fn for every registered pass, sorted by argument. */
FZ_API void fzContextForEachPass(const FzContext *ctx,
                                 void (*fn)(const FzPassDef *def, void *ud),
                                 void *ud);

/* Registers a named pipeline: `name` expands to `pipeline` (text in the
 * pipeline grammar, e.g. "canonicalize,cse" or "func.func(cse)") where it
 * appears in a pipeline string. Strings are copied. The text is checked
 * when the pipeline is used. */
FZ_API FZ_MUST_CHECK bool fzContextRegisterPassPipeline(FzContext *ctx,
                                                        const char *name,
                                                        const char *summary,
                                                        const char *pipeline);
/* The expansion of a named pipeline (NULL data when there is none); its
 * summary into *summary when summary is not NULL. */
FZ_API FzStringRef fzContextLookupPassPipeline(const FzContext *ctx,
                                               FzStringRef name,
                                               FzStringRef *summary);
/* Calls fn for every named pipeline, sorted by name. */
FZ_API void
fzContextForEachPassPipeline(const FzContext *ctx,
                             void (*fn)(const char *name, const char *summary,
                                        const char *pipeline, void *ud),
                             void *ud);

/* Registers the built-in passes (canonicalize, cse, dce, symbol-dce, ...)
 * and named pipelines. Calling it twice is harmless. */
FZ_API FZ_MUST_CHECK bool fzRegisterAllPasses(FzContext *ctx);

/*===------------------------------------------------------------------===*
 * Pass managers
 *===------------------------------------------------------------------===*/

/* A top-level pass manager that runs on ops named `anchor`
 * ("builtin.module"; NULL: any op). Verification after each pass is on.
 * NULL on allocation failure. */
FZ_API FzPassManager *fzPassManagerCreate(FzContext *ctx, const char *anchor);
/* Destroys a top-level manager with its nested managers and passes. */
FZ_API void fzPassManagerDestroy(FzPassManager *pm);
FZ_API FzContext *fzPassManagerGetContext(const FzPassManager *pm);
/* The anchor op name, or "any". */
FZ_API const char *fzPassManagerGetAnchor(const FzPassManager *pm);

/* Appends a nested manager that runs on every op named `anchor` (NULL or
 * "any": every op) directly nested in the regions of the op this manager
 * runs on. Owned by pm. NULL on allocation failure. */
FZ_API FzPassManager *fzPassManagerNest(FzPassManager *pm, const char *anchor);
/* Appends pass, which pm then owns (also on failure, when it destroys
 * it). Fails with an error when the pass's anchor is not pm's anchor. */
FZ_API FZ_MUST_CHECK bool fzPassManagerAddPass(FzPassManager *pm, FzPass *pass);
/* Like AddPass, but a pass anchored elsewhere is put in a nested manager
 * for its anchor (reusing the last entry when it is one), as mlir-opt
 * does for its per-pass flags. */
FZ_API FZ_MUST_CHECK bool fzPassManagerAddPassNested(FzPassManager *pm,
                                                     FzPass *pass);
/* Number of entries (passes and nested managers) directly in pm. */
FZ_API size_t fzPassManagerGetNumEntries(const FzPassManager *pm);
/* Calls fn on every pass in pm and in its nested managers, in pipeline
 * order; fn returning false stops the walk, and then this returns false.
 * Tools use it to apply an option to every instance of a pass (e.g.
 * fuse-opt's --fusion-remarks sets remarks=true on each `fuse`). */
FZ_API bool fzPassManagerForEachPass(FzPassManager *pm,
                                     bool (*fn)(FzPass *pass, void *ud),
                                     void *ud);

/* Appends the passes of a textual pipeline to pm:
 *   pipeline ::= element (',' element)*
 *   element  ::= op-name '(' pipeline? ')'     -- a nested manager
 *              | pass-name ('{' option* '}')?  -- a pass
 *              | pipeline-name                 -- a named pipeline
 *   option   ::= key ('=' value)?   (separated by spaces)
 * When the whole text is `ANCHOR(...)` with pm's anchor, its contents are
 * added to pm itself. Errors (unknown pass, bad option, malformed text)
 * are reported at the offending character of the text, registered as the
 * source buffer "<pipeline>" so that the default printer shows it with a
 * caret. Returns false after an error, leaving pm unchanged. */
FZ_API FZ_MUST_CHECK bool fzPassManagerParsePipeline(FzPassManager *pm,
                                                     FzStringRef text);
/* Prints the pipeline as text: `builtin.module(func.func(cse))` (every
 * pass with all its options), which ParsePipeline reads back. */
FZ_API void fzPassManagerPrintPipeline(const FzPassManager *pm,
                                       FzPrintCallback cb, void *userData);

/* Runs the pipeline on op (which must be named as pm's anchor: else an
 * error at op). Returns false after the first failing pass (or
 * verification) has reported its errors; op may then be partly
 * transformed, but stays structurally valid unless a pass broke it (the
 * verifier's errors say how). Reports are not printed by Run (see the
 * Print functions). pm may be run again, on the same or another op. */
FZ_API FZ_MUST_CHECK bool fzPassManagerRun(FzPassManager *pm, FzOp *op);

/*===------------------------------------------------------------------===*
 * Instrumentation (set on the top-level manager; covers nested ones)
 *===------------------------------------------------------------------===*/

/* Verify the op a pass ran on after each pass (default on). */
FZ_API void fzPassManagerEnableVerifier(FzPassManager *pm, bool enable);

/* Which IR dumps to print. A dump is headed as in mlir-opt:
 *   // -----// IR Dump After CSE (cse) //----- //
 * and shows the op the pass ran on (or the top-level op: moduleScope). */
typedef struct FzIRPrintingConfig {
  const char *const *beforePasses; /* pass arguments; NULL-terminated or NULL */
  const char *const *afterPasses;
  bool beforeAll;
  bool afterAll;
  bool afterChange;  /* print "after" dumps only when the IR changed */
  bool afterFailure; /* dump the IR after a failing pass */
  bool moduleScope;  /* print the top-level op, not the pass's op */
  /* A directory: every dump also goes to DIR/NNN_<pass>.fuse (NNN counts
   * pass runs from 000), after-dumps only unless beforeAll/beforePasses.
   * NULL: none. The directory is created when missing. */
  const char *treeDir;
  unsigned printFlags;  /* FZ_PRINT_* for the dumped IR */
  FzPrintCallback out;  /* where dumps go; NULL: stderr */
  void *outUserData;
} FzIRPrintingConfig;

/* Copies the config (and its strings; the out callback's userData is
 * kept as a pointer). Returns false on OOM (reported). */
FZ_API bool fzPassManagerEnableIRPrinting(FzPassManager *pm,
                                          const FzIRPrintingConfig *config);

/* Wall-clock time of each pass (and of nested pipelines). */
FZ_API void fzPassManagerEnableTiming(FzPassManager *pm, bool enable);
/* Prints the timing table as mlir-opt's --mlir-timing does. */
FZ_API void fzPassManagerPrintTiming(const FzPassManager *pm,
                                     FzPrintCallback cb, void *userData);
/* Prints every pass's statistics (by pipeline position). */
FZ_API void fzPassManagerPrintStatistics(const FzPassManager *pm,
                                         FzPrintCallback cb, void *userData);

/* When a run fails, writes to `path` the IR as it was before the run
 * (generic form, with locations) preceded by the line
 *   // fuse-reproducer: --pass-pipeline='<pipeline>'
 * so that `fuse-opt path --run-reproducer` repeats the failure. NULL
 * turns it off. Returns false on OOM. */
FZ_API bool fzPassManagerEnableReproducer(FzPassManager *pm, const char *path);

/* Reads the pipeline from a reproducer's first line (see above) in
 * source. Returns false (data NULL) when there is none. */
FZ_API bool fzReproducerGetPipeline(FzStringRef source, FzStringRef *pipeline);

/* Callbacks around every pass run, for embedders. Any may be NULL. */
typedef struct FzPassInstrumentation {
  void (*runBeforePass)(FzPass *pass, FzOp *op, void *userData);
  void (*runAfterPass)(FzPass *pass, FzOp *op, void *userData);
  void (*runAfterPassFailed)(FzPass *pass, FzOp *op, void *userData);
  void *userData;
} FzPassInstrumentation;
/* Adds a copy of instr (called in the order added). False on OOM. */
FZ_API bool fzPassManagerAddInstrumentation(FzPassManager *pm,
                                            const FzPassInstrumentation *instr);

#ifdef __cplusplus
}
#endif

#endif /* FZ_PASS_H */
