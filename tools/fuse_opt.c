/* tools/fuse_opt.c - fuse-opt: parse, verify and print fuse IR.
 *
 *   fuse-opt [options] [input-file|-]
 *
 * A thin main over the library in the manner of mlir-opt: read the input
 * (a file, or stdin for "-" or no argument), optionally split it at lines
 * starting with `// -----`, and for each chunk parse it into a fresh
 * context with every built-in dialect registered, verify it, run the pass
 * passes the flags ask for and print it to stdout or to `-o FILE`.
 *
 * Invariants. Line numbers in diagnostics are those of the whole input
 * file: a chunk is parsed with lineOffset = (its first line - 1). Output
 * to a regular file is written to a unique temporary beside it and
 * renamed over it only when every chunk succeeded, so a failed run never
 * leaves a partial file behind (tools/common_output.c). The input is
 * read up to --max-input-size bytes (default 1 GiB).
 * Exit status: 0 success, 1 an error (usage, input or I/O), as mlir-opt.
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
#include "tools/common_options.h"
#include "tools/common_output.h"
#include "tools/verify_diagnostics.h"


/* Everything the command line can set. */
typedef struct FuseOptOptions {
  const char *input;      /* path, or "-" for stdin */
  const char *output;     /* path, or "-" for stdout */
  size_t maxInputBytes;   /* --max-input-size, or 0 for the default */
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
  ToolInputShapes shapes; /* --input-shape NAME=DIMS (ONNX inputs) */
  FzOptPassFlags passes;  /* pass pipeline flags (fuse_opt_passes.c) */
  /* The pass-manager issue adds its fields here (e.g. a
   * `const char *passPipeline` for --pass-pipeline=...). */
} FuseOptOptions;

#define FIELD(f) offsetof(FuseOptOptions, f)

/* --max-input-size=BYTES: a positive byte count. */
static int set_max_input(void *opts, const char *value) {
  FuseOptOptions *o = opts;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(value, &end, 10);
  if (errno || end == value || *end || value[0] == '-' || v == 0 ||
      v > SIZE_MAX / 2)
    return toolUsageError("fuse-opt",
                          "--max-input-size expects a positive number of "
                          "bytes, got '%s'",
                          value);
  o->maxInputBytes = (size_t)v;
  return 0;
}

/* The option table, in --help order (common_options.h); the pass flags
 * have theirs in fuse_opt_passes.c. */
static const ToolOption kOptions[] = {
    TOOL_STRING("o", NULL, "FILE", FIELD(output),
                "Write the output to FILE (atomically; '-' is stdout)"),
    TOOL_CALL("max-input-size", NULL, "BYTES", set_max_input,
              "Refuse an input larger than BYTES (default 1073741824)"),
    TOOL_INPUT_SHAPE(FIELD(shapes)),
    TOOL_FLAG("allow-unregistered-dialect", NULL, FIELD(allowUnregistered),
              "Accept operations of dialects that are not registered"),
    TOOL_FLAG("print-op-generic", "mlir-print-op-generic", FIELD(printGeneric),
              "Print every operation in the generic form"),
    TOOL_FLAG("print-debuginfo", "mlir-print-debuginfo", FIELD(printDebugInfo),
              "Print locations (loc(...)) on operations and block arguments"),
    TOOL_FLAG("print-local-scope", "mlir-print-local-scope",
              FIELD(printLocalScope),
              "Print with local scope (inline locations, no aliases)"),
    TOOL_FLAG("split-input-file", NULL, FIELD(splitInputFile),
              "Split the input at lines starting with '// -----'; process "
              "each chunk alone"),
    TOOL_FLAG("verify-diagnostics", NULL, FIELD(verifyDiagnostics),
              "Check diagnostics against the expected-* comments of the "
              "input"),
    TOOL_FLAG("no-verify", NULL, FIELD(noVerify),
              "Do not run the verifier after parsing"),
    TOOL_FLAG("test-emit-diagnostics", NULL, FIELD(testEmitDiags),
              "Testing: report the diagnostics named by test.diag attributes"),
    TOOL_FLAG("help", "h", FIELD(help), "Print this help and exit"),
    TOOL_FLAG("version", NULL, FIELD(version), "Print the version and exit"),
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

static void print_help(FILE *out);

static int pass_flag(void *opts, int argc, char **argv, int i) {
  return fzOptPassFlagsParse(&((FuseOptOptions *)opts)->passes, argc, argv, i);
}

static void pass_names(void *opts, void (*add)(void *ctx, const char *name),
                       void *ctx) {
  (void)opts;
  fzOptPassFlagsNames(add, ctx);
}

static int input_file(void *opts, const char *arg) {
  FuseOptOptions *o = opts;
  if (o->input)
    return toolUsageError("fuse-opt", "too many input files (extra: '%s')",
                          arg);
  o->input = arg;
  return 0;
}

static const ToolParser kParser = {
    .tool = "fuse-opt",
    .options = kOptions,
    .numOptions = NUM_OPTIONS,
    .extra = pass_flag,
    .extraNames = pass_names,
    .positional = input_file,
};

static void print_help(FILE *out) {
  fprintf(out, "OVERVIEW: fuse-opt - parse, verify and print fuse IR\n\n"
               "USAGE: fuse-opt [options] [input-file|-]\n\n"
               "  The input defaults to '-' (stdin); the output to stdout.\n\n"
               "OPTIONS:\n");
  toolPrintOptions(&kParser, out);
  fzOptPassFlagsPrintHelp(out);
}

/* Fills opts from argv; returns 0, or the exit status of a usage error
 * (after printing it). */
static int parse_command_line(int argc, char **argv, FuseOptOptions *opts) {
  int rc = toolParseArgs(&kParser, argc, argv, opts);
  if (rc)
    return rc;
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
    FzOnnxImportOptions io = {opts->shapes.n, opts->shapes.shapes, 0, NULL,
                              NULL};
    if (!fzInputIsOnnx(fileName) && opts->shapes.n)
      fprintf(stderr, "fuse-opt: error: --input-shape applies to ONNX "
                      "models (.onnx) only\n");
    else
      module = fzInputIsOnnx(fileName)
                   ? fzParseOrImportFileWithOptions(ctx, fileName, &io,
                                                    "fuse-opt")
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

  size_t limit =
      opts.maxInputBytes ? opts.maxInputBytes : FZ_DEFAULT_MAX_SOURCE_SIZE;
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
