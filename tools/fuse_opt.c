/* tools/fuse_opt.c - fuse-opt: parse, verify and print fuse IR.
 *
 *   fuse-opt [options] [input-file|-]
 *
 * A thin main over the library in the manner of mlir-opt: read the input
 * (a file, or stdin for "-" or no argument), optionally split it at lines
 * starting with `// -----`, and for each chunk parse it into a fresh
 * context with every built-in dialect registered, verify it, run the pass
 * pipeline (none yet) and print it to stdout or to `-o FILE`.
 *
 * Invariants. Line numbers in diagnostics are those of the whole input
 * file: a chunk is parsed with lineOffset = (its first line - 1). Output
 * to a regular file is written to a unique temporary beside it and
 * renamed over it only when every chunk succeeded, so a failed run never
 * leaves a partial file behind (tools/common_output.c). The input is
 * read up to --max-input-size bytes (default 1 GiB).
 * Exit status: 0 success, 1 an error in the input (or I/O), 2 bad usage.
 * With --verify-diagnostics the status says whether the diagnostics
 * matched the expected-* comments, as in mlir-opt.
 *
 * Ownership: main owns the input buffer and the output stream; each chunk
 * owns its context (and the module in it) for the time it is processed.
 */
#include <errno.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz/dialects.h"
#include "fz/ir.h"
#include "tools/fuse_opt_passes.h"
#include "tools/common_input.h" /* .onnx inputs: the ONNX importer */
#include "tools/common_output.h"
#include "tools/verify_diagnostics.h"

#define EXIT_USAGE 2

/* Everything the command line can set. */
typedef struct FuseOptOptions {
  const char *input;      /* path, or "-" for stdin */
  const char *output;     /* path, or "-" for stdout */
  const char *maxInput;   /* --max-input-size, or NULL for the default */
  size_t maxInputBytes;   /* maxInput parsed (main) */
  bool printGeneric;      /* --print-op-generic */
  bool printDebugInfo;    /* --print-debuginfo */
  bool printLocalScope;   /* --print-local-scope */
  bool splitInputFile;    /* --split-input-file */
  bool verifyDiagnostics; /* --verify-diagnostics */
  bool allowUnregistered; /* --allow-unregistered-dialect */
  bool noVerify;          /* --no-verify */
  bool testEmitDiags;     /* --test-emit-diagnostics */
  bool help;              /* --help */
  bool version;           /* --version */
  FzOptPassFlags passes;  /* pass pipeline flags (fuse_opt_passes.c) */
  /* The pass-manager issue adds its fields here (e.g. a
   * `const char *passPipeline` for --pass-pipeline=...). */
} FuseOptOptions;

/* One row per option. A row whose metavar is NULL is a boolean flag
 * (also accepted as --flag=true/false); otherwise it takes a value, given
 * as `--name=VALUE` or `--name VALUE` (and `-oVALUE` for one-letter
 * names). Every option may be spelled with one or two dashes. */
typedef struct OptionDef {
  const char *name;    /* without dashes */
  const char *alias;   /* another name, or NULL */
  const char *metavar; /* NULL for a flag */
  size_t field;        /* offsetof(FuseOptOptions, ...): bool or char* */
  const char *help;    /* one line for --help */
} OptionDef;

#define FIELD(f) offsetof(FuseOptOptions, f)

/* The option table, in --help order.
 *
 * PASS PIPELINE PLUG-IN POINT: the pass-manager issue adds its rows here
 * (--pass-pipeline=PIPELINE, one flag per registered pass, timing and
 * IR-printing flags), their fields to FuseOptOptions above, and their
 * effect to run_passes() below. Nothing else in this file needs to change.
 */
static const OptionDef kOptions[] = {
    {"o", NULL, "FILE", FIELD(output),
     "Write the output to FILE (atomically; '-' is stdout)"},
    {"max-input-size", NULL, "BYTES", FIELD(maxInput),
     "Refuse an input larger than BYTES (default 1073741824)"},
    {"allow-unregistered-dialect", NULL, NULL, FIELD(allowUnregistered),
     "Accept operations of dialects that are not registered"},
    {"print-op-generic", "mlir-print-op-generic", NULL, FIELD(printGeneric),
     "Print every operation in the generic form"},
    {"print-debuginfo", "mlir-print-debuginfo", NULL, FIELD(printDebugInfo),
     "Print locations (loc(...)) on operations and block arguments"},
    {"print-local-scope", "mlir-print-local-scope", NULL,
     FIELD(printLocalScope),
     "Print with local scope (inline locations, no aliases)"},
    {"split-input-file", NULL, NULL, FIELD(splitInputFile),
     "Split the input at lines starting with '// -----'; process each "
     "chunk alone"},
    {"verify-diagnostics", NULL, NULL, FIELD(verifyDiagnostics),
     "Check diagnostics against the expected-* comments of the input"},
    {"no-verify", NULL, NULL, FIELD(noVerify),
     "Do not run the verifier after parsing"},
    {"test-emit-diagnostics", NULL, NULL, FIELD(testEmitDiags),
     "Testing: report the diagnostics named by test.diag attributes"},
    {"help", "h", NULL, FIELD(help), "Print this help and exit"},
    {"version", NULL, NULL, FIELD(version), "Print the version and exit"},
};

#define NUM_OPTIONS (sizeof kOptions / sizeof kOptions[0])

/* The passes, run on each chunk's module after verification and before
 * printing: --test-emit-diagnostics, then the pipeline built from the
 * pass flags (fuse_opt_passes.c). Errors are reported as diagnostics;
 * false on failure. */
static bool run_passes(FzOp *module, const FuseOptOptions *opts) {
  bool ok = true;
  if (opts->testEmitDiags)
    ok = fzTestEmitDiagnostics(module) && ok;
  unsigned flags = (opts->printGeneric ? FZ_PRINT_GENERIC : 0u) |
                   (opts->printDebugInfo ? FZ_PRINT_DEBUGINFO : 0u) |
                   (opts->printLocalScope ? FZ_PRINT_LOCAL_SCOPE : 0u);
  if (ok)
    ok = fzOptRunPasses(&opts->passes, module, flags);
  return ok;
}

/*===--- Command line ----------------------------------------------------===*/

/* "--name=METAVAR", "-o FILE" or "--flag" into buf. */
static void option_spelling(char *buf, size_t size, const OptionDef *o,
                            const char *name) {
  bool shortName = strlen(name) == 1;
  snprintf(buf, size, "%s%s%s%s", shortName ? "-" : "--", name,
           o->metavar ? (shortName ? " " : "=") : "",
           o->metavar ? o->metavar : "");
}

static void print_help(FILE *out) {
  fprintf(out, "OVERVIEW: fuse-opt - parse, verify and print fuse IR\n\n"
               "USAGE: fuse-opt [options] [input-file|-]\n\n"
               "  The input defaults to '-' (stdin); the output to stdout.\n\n"
               "OPTIONS:\n");
  for (size_t i = 0; i < NUM_OPTIONS; ++i) {
    const OptionDef *o = &kOptions[i];
    char spelling[96], alias[96];
    option_spelling(spelling, sizeof spelling, o, o->name);
    fprintf(out, "  %-32s %s\n", spelling, o->help);
    if (o->alias) {
      option_spelling(alias, sizeof alias, o, o->alias);
      fprintf(out, "  %-32s Alias for %s\n", alias, spelling);
    }
  }
  fzOptPassFlagsPrintHelp(out);
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("fuse-opt: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nfuse-opt: note: run 'fuse-opt --help' for the list of options\n",
        stderr);
  return EXIT_USAGE;
}

static const OptionDef *find_option(const char *name, size_t len) {
  for (size_t i = 0; i < NUM_OPTIONS; ++i) {
    const OptionDef *o = &kOptions[i];
    if ((strlen(o->name) == len && memcmp(o->name, name, len) == 0) ||
        (o->alias && strlen(o->alias) == len &&
         memcmp(o->alias, name, len) == 0))
      return o;
  }
  return NULL;
}

/* Fills opts from argv; returns 0, or the exit status of a usage error
 * (after printing it). */
static int parse_command_line(int argc, char **argv, FuseOptOptions *opts) {
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (optionsEnded || arg[0] != '-' || arg[1] == '\0') {
      if (opts->input)
        return usage_error("too many input files (extra: '%s')", arg);
      opts->input = arg;
      continue;
    }
    if (strcmp(arg, "--") == 0) {
      optionsEnded = true;
      continue;
    }
    const char *body = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(body, '=');
    size_t nameLen = eq ? (size_t)(eq - body) : strlen(body);
    const char *value = eq ? eq + 1 : NULL;
    int used = fzOptPassFlagsParse(&opts->passes, argc, argv, i);
    if (used < 0)
      return EXIT_USAGE;
    if (used > 0) {
      i += used - 1;
      continue;
    }
    const OptionDef *o = find_option(body, nameLen);
    if (!o && arg[1] != '-' && body[0] != '\0') {
      /* -oFILE: a one-letter option glued to its value. */
      o = find_option(body, 1);
      if (o && o->metavar)
        value = body + 1;
      else
        o = NULL;
    }
    if (!o)
      return usage_error("unknown option '%s'", arg);
    char *field = (char *)opts + o->field;
    if (o->metavar) {
      if (!value) {
        if (i + 1 >= argc)
          return usage_error("option '%s' requires a value", arg);
        value = argv[++i];
      }
      *(const char **)(void *)field = value;
    } else if (!value || strcmp(value, "true") == 0 ||
               strcmp(value, "1") == 0) {
      *(bool *)(void *)field = true;
    } else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0) {
      *(bool *)(void *)field = false;
    } else {
      return usage_error("option '%s' takes no value (or true/false)", arg);
    }
  }
  if (!opts->input)
    opts->input = "-";
  if (!opts->output)
    opts->output = "-";
  return 0;
}

/*===--- Input and output ------------------------------------------------===*/

/* Reads the whole input, at most `limit` bytes, into a malloc'ed buffer
 * (NUL-terminated). An input longer than that (/dev/zero, say) is an
 * error after limit + 1 bytes. */
static bool read_input(const char *path, size_t limit, char **data,
                       size_t *len) {
  bool isStdin = strcmp(path, "-") == 0;
  FILE *f = isStdin ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuse-opt: error: cannot open input file '%s': %s\n", path,
            strerror(errno));
    return false;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  bool ok = buf != NULL;
  while (ok) {
    if (cap - n < 2) {
      char *b = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!b) {
        ok = false;
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t want = cap - n - 1;
    if (want > limit + 1 - n)
      want = limit + 1 - n;
    size_t got = fread(buf + n, 1, want, f);
    n += got;
    if (n > limit || got == 0)
      break;
  }
  if (!ok) {
    fprintf(stderr, "fuse-opt: error: out of memory reading '%s'\n", path);
  } else if (n > limit) {
    fprintf(stderr, "fuse-opt: error: input file '%s' is larger than the "
                    "limit of %zu bytes (--max-input-size)\n", path, limit);
    ok = false;
  } else if (ferror(f)) {
    fprintf(stderr, "fuse-opt: error: cannot read input file '%s': %s\n", path,
            strerror(errno));
    ok = false;
  }
  if (!isStdin)
    fclose(f);
  if (!ok) {
    free(buf);
    return false;
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return true;
}

/*===--- Processing ------------------------------------------------------===*/

/* Parses one chunk whose first line is line lineOffset + 1 of the file.
 * The chunk is handed to the parser behind lineOffset empty lines (rather
 * than with fzParseSource's lineOffset), so that the source buffer the
 * context keeps for diagnostics has the file's line numbering and parse
 * errors show the right source line under their caret. The first chunk
 * (the whole input without --split-input-file) is parsed in place: the
 * context borrows the input buffer, which outlives it, instead of
 * copying it. */
static FzOp *parse_chunk(FzContext *ctx, const char *fileName, FzStringRef text,
                         unsigned lineOffset) {
  FzStringRef name = fzStringRefFromCString(fileName);
  if (lineOffset == 0)
    return fzParseSourceInPlace(ctx, text, name);
  char *padded = malloc((size_t)lineOffset + text.length + 1);
  if (!padded) {
    /* Fall back to the offset: right locations, no source line. */
    return fzParseSource(ctx, text, name, lineOffset);
  }
  memset(padded, '\n', lineOffset);
  if (text.length)
    memcpy(padded + lineOffset, text.data, text.length);
  FzStringRef whole = {padded, (size_t)lineOffset + text.length};
  FzOp *module = fzParseSource(ctx, whole, name, 0);
  free(padded);
  return module;
}

/* Parses, verifies, transforms and prints one chunk. Returns whether it
 * succeeded (with --verify-diagnostics: whether the diagnostics matched). */
static bool process_chunk(const FuseOptOptions *opts, const char *fileName,
                          FzStringRef text, unsigned lineOffset,
                          FzToolOutput *out) {
  FzContext *ctx = fzContextCreate();
  if (!ctx) {
    fprintf(stderr, "fuse-opt: error: cannot create a context\n");
    return false;
  }
  fzContextSetAllowUnregisteredDialects(ctx, opts->allowUnregistered);
  /* read_input applied the limit; the parser must not apply another
   * (a chunk is padded with the empty lines before it). */
  fzContextSetMaxSourceSize(ctx, SIZE_MAX);
  FzDiagVerifier *verifier = NULL;
  if (opts->verifyDiagnostics) {
    verifier = fzDiagVerifierBegin(ctx, fileName, text, lineOffset, stderr);
    if (!verifier) {
      fzContextDestroy(ctx);
      return false;
    }
  }
  bool ok = fzRegisterAllDialects(ctx);
  FzOp *module = NULL;
  if (ok) {
    module = fzInputIsOnnx(fileName)
                 ? fzParseOrImportFile(ctx, fileName)
                 : parse_chunk(ctx, fileName, text, lineOffset);
    ok = module != NULL;
  }
  if (ok && !opts->noVerify)
    ok = fzOpVerify(module);
  if (ok)
    ok = run_passes(module, opts);
  /* A diagnostic error reported by anything above fails the chunk even
   * when the call that reported it returned success. */
  if (ok && fzContextGetNumErrors(ctx) != 0)
    ok = false;
  if (ok) {
    unsigned flags = (opts->printGeneric ? FZ_PRINT_GENERIC : 0u) |
                     (opts->printDebugInfo ? FZ_PRINT_DEBUGINFO : 0u) |
                     (opts->printLocalScope ? FZ_PRINT_LOCAL_SCOPE : 0u);
    fzOpPrint(module, flags, fzToolOutputWrite, out);
  }
  if (module)
    fzOpDestroy(module);
  if (fzContextHadAllocationFailure(ctx))
    ok = false;
  if (verifier)
    ok = fzDiagVerifierFinish(verifier);
  fzContextDestroy(ctx);
  return ok;
}

/* Length of the marker line starting at p (up to and including its
 * newline) when p starts a `// -----` line, else 0. */
static size_t marker_length(const char *p, const char *end) {
  static const char kMarker[] = "// -----";
  size_t n = sizeof kMarker - 1;
  if ((size_t)(end - p) < n || memcmp(p, kMarker, n) != 0)
    return 0;
  const char *eol = memchr(p + n, '\n', (size_t)(end - p - n));
  return eol ? (size_t)(eol + 1 - p) : (size_t)(end - p);
}

/* Processes the input as one chunk, or split at marker lines, writing the
 * outputs joined by "// -----\n". Returns whether every chunk succeeded. */
static bool process_input(const FuseOptOptions *opts, const char *fileName,
                          const char *data, size_t len, FzToolOutput *out) {
  if (!opts->splitInputFile)
    return process_chunk(opts, fileName, (FzStringRef){data, len}, 0, out);
  bool ok = true;
  const char *end = data + len, *chunk = data, *p = data;
  unsigned line = 1, chunkLine = 1;
  for (;;) {
    size_t marker = p < end ? marker_length(p, end) : 0;
    if (p == end || marker) {
      FzStringRef text = {chunk, (size_t)(p - chunk)};
      if (!process_chunk(opts, fileName, text, chunkLine - 1, out))
        ok = false;
      if (p == end)
        break;
      fzToolOutputWrite(FZ_STR("// -----\n"), out);
      p += marker;
      chunk = p;
      chunkLine = ++line;
      continue;
    }
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    p = eol ? eol + 1 : end;
    if (eol)
      ++line;
  }
  return ok;
}

int main(int argc, char **argv) {
  FuseOptOptions opts;
  memset(&opts, 0, sizeof opts);
  int status = parse_command_line(argc, argv, &opts);
  if (status != 0)
    return status;
  if (opts.help) {
    print_help(stdout);
    return 0;
  }
  if (opts.version) {
    printf("fuse-opt version %s\n", fzGetVersionString());
    return 0;
  }
  opts.passes.allowUnregistered = opts.allowUnregistered;
  status = fzOptPassFlagsPrepare(&opts.passes, opts.input, stdout);
  if (status >= 0)
    return status;

  size_t limit = FZ_DEFAULT_MAX_SOURCE_SIZE;
  if (opts.maxInput) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(opts.maxInput, &end, 10);
    if (errno || end == opts.maxInput || *end || opts.maxInput[0] == '-' ||
        v == 0 || v > SIZE_MAX / 2)
      return usage_error("--max-input-size expects a positive number of "
                         "bytes, got '%s'", opts.maxInput);
    limit = (size_t)v;
  }
  opts.maxInputBytes = limit;
  char *data = NULL;
  size_t len = 0;
  if (!read_input(opts.input, limit, &data, &len))
    return 1;
  FzToolOutput out;
  if (!fzToolOutputOpen(&out, "fuse-opt", opts.output)) {
    free(data);
    return 1;
  }
  /* Printing goes through many small callbacks: buffer generously
   * (but keep a terminal line-buffered). */
  if (out.file != stdout || !isatty(fileno(stdout)))
    setvbuf(out.file, NULL, _IOFBF, (size_t)1 << 20);
  const char *fileName = strcmp(opts.input, "-") == 0 ? "<stdin>" : opts.input;
  bool ok = process_input(&opts, fileName, data, len, &out);
  if (!fzToolOutputClose(&out, ok))
    ok = false;
  free(data);
  return ok ? 0 : 1;
}
