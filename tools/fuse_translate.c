/* tools/fuse_translate.c - fuse-translate: translations between fuse IR
 * and other formats, in the manner of mlir-translate.
 *
 *   fuse-translate --import-onnx model.onnx [-o out.fuse]
 *                  [--input-shape NAME=2x3x224x224 ...]
 *   fuse-translate --emit=llvm|asm|obj [-O3] [--fast-math] [...] in.fuse
 *                  (or model.onnx, or with --import-onnx) [-o out]
 *
 * Each translation is one row of kTranslations (a flag, a help line and
 * a function) and an option of the command line (common_options.h);
 * exactly one must be chosen. --import-onnx reads an ONNX
 * model (a file, or "-" for stdin) and prints the graph-dialect module
 * the importer builds; --input-shape (repeatable; common_options.h)
 * gives the shape of a graph input, e.g. to fix a symbolic batch dim.
 * --emit=KIND compiles the module (the input file, or what the chosen
 * translation produced) to LLVM IR, assembly or an object file through
 * fz/lowering.h (tools/fuse_translate_emit.c).
 *
 * Invariants. Nothing reaches stdout unless the translation succeeded;
 * errors go to stderr as diagnostics. Output to `-o FILE` is written to
 * a unique temporary beside FILE and renamed over it only on success
 * (tools/common_output.c). Exit status: 0 success, 1 an error (usage,
 * input or I/O), as mlir-translate.
 *
 * Ownership: main owns the context, the input buffer and the module.
 */
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "fz/dialects.h"
#include "fz/ir.h"
#include "fz/onnx.h"
#include "tools/common_input.h"
#include "tools/common_options.h"
#include "tools/common_output.h"
#include "tools/common_timing.h"
#include "tools/fuse_translate_emit.h"

typedef struct TranslateOptions {
  const char *input;
  const char *output;
  const char *translation; /* the chosen row's flag */
  bool printGeneric, printDebugInfo, printLocalScope;
  bool help, version;
  bool timing; /* --timing: the compile-time report on stderr */
  size_t maxInput; /* --max-input-size: longest input read, in bytes */
  ToolInputShapes shapes; /* --input-shape NAME=DIMS */
  FuseEmitOptions emit; /* --emit=... and the code generation options */
} TranslateOptions;

/*===--- Translations ----------------------------------------------------===*/

/* Whether the first byte read can start a protobuf message (a field key
 * with wire type 0, 1, 2 or 5 and a field number above 0); the importer
 * says why not. */
static bool starts_protobuf(const char *buf, size_t n) {
  unsigned char b = n ? (unsigned char)buf[0] : 0x08;
  unsigned wire = b & 7;
  return (wire == 0 || wire == 1 || wire == 2 || wire == 5) &&
         ((b & 0x80) || (b >> 3) != 0);
}

/* Reads path ("-": stdin) into a malloc'ed buffer, at most
 * FZ_ONNX_MAX_MODEL_SIZE bytes (stdin may be /dev/zero: it stops after
 * the first chunk when that cannot start a model); false after printing
 * an error. */
static bool read_all(const char *path, size_t limit, char **data,
                     size_t *len) {
  bool isStdin = !strcmp(path, "-");
  FILE *f = isStdin ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuse-translate: error: cannot open input file '%s': "
                    "%s\n", path, strerror(errno));
    return false;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  bool ok = buf != NULL;
  while (ok) {
    if (n > FZ_ONNX_MAX_MODEL_SIZE) {
      fprintf(stderr, "fuse-translate: error: '%s' has more than the %zu "
                      "bytes of the largest ONNX model\n", path,
              FZ_ONNX_MAX_MODEL_SIZE);
      if (!isStdin)
        fclose(f);
      free(buf);
      return false;
    }
    if (n && !starts_protobuf(buf, n))
      break;
    if (n == cap) {
      char *b = realloc(buf, cap * 2);
      if (!(ok = b != NULL))
        break;
      buf = b;
      cap *= 2;
    }
    size_t want = cap - n;
    if (want > limit + 1 - n)
      want = limit + 1 - n;
    size_t got = fread(buf + n, 1, want, f);
    n += got;
    if (n > limit || got == 0)
      break;
  }
  if (ok && n > limit) {
    fprintf(stderr, "fuse-translate: error: input file '%s' is larger than "
                    "the limit of %zu bytes (--max-input-size)\n", path,
            limit);
    ok = false;
  } else if (ok && ferror(f)) {
    fprintf(stderr, "fuse-translate: error: cannot read '%s': %s\n", path,
            strerror(errno));
    ok = false;
  } else if (!ok) {
    fprintf(stderr, "fuse-translate: error: out of memory reading '%s'\n",
            path);
  }
  if (!isStdin)
    fclose(f);
  if (!ok) {
    free(buf);
    return false;
  }
  *data = buf;
  *len = n;
  return true;
}

/* --import-onnx: the module, or NULL after errors. */
static FzOp *import_onnx(FzContext *ctx, const TranslateOptions *opts) {
  FzOnnxImportOptions io = {opts->shapes.n, opts->shapes.shapes, 0, NULL,
                            NULL};
  if (strcmp(opts->input, "-"))
    return fzImportOnnxFileWithOptions(ctx, opts->input, &io);
  char *data;
  size_t len;
  if (!read_all("-", opts->maxInput, &data, &len))
    return NULL;
  FzOp *module =
      fzImportOnnxBufferWithOptions(ctx, data, len, "<stdin>", NULL, &io);
  free(data);
  return module;
}

typedef struct Translation {
  const char *flag; /* without dashes */
  const char *help;
  FzOp *(*run)(FzContext *ctx, const TranslateOptions *opts);
} Translation;

static const Translation kTranslations[] = {
    {"import-onnx", "Import an ONNX model (.onnx) into the graph dialect",
     import_onnx},
};
#define NUM_TRANSLATIONS (sizeof kTranslations / sizeof kTranslations[0])

/*===--- Command line ----------------------------------------------------===*/

#define FIELD(f) offsetof(TranslateOptions, f)

static int set_max_input(void *opts, const char *v) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || n == 0 || n > SIZE_MAX / 2)
    return toolUsageError("fuse-translate",
                          "--max-input-size expects a positive number of "
                          "bytes, got '%s'",
                          v);
  ((TranslateOptions *)opts)->maxInput = (size_t)n;
  return 0;
}

static int choose_translation(TranslateOptions *o, const char *flag) {
  if (o->translation)
    return toolUsageError("fuse-translate",
                          "only one translation may be chosen (extra: "
                          "'--%s')",
                          flag);
  o->translation = flag;
  return 0;
}
static int import_onnx_flag(void *opts, const char *v) {
  (void)v;
  return choose_translation(opts, "import-onnx");
}

static const ToolOption kOptions[] = {
    TOOL_CALL("import-onnx", NULL, NULL, import_onnx_flag,
              "Translation: import an ONNX model (.onnx) into the graph "
              "dialect"),
    TOOL_STRING("o", NULL, "FILE", FIELD(output),
                "Write the output to FILE (atomically; '-' is stdout)"),
    TOOL_INPUT_SHAPE(FIELD(shapes)),
    TOOL_FLAG("print-op-generic", "mlir-print-op-generic", FIELD(printGeneric),
              "Print every operation in the generic form"),
    TOOL_FLAG("print-debuginfo", "mlir-print-debuginfo", FIELD(printDebugInfo),
              "Print locations (loc(...))"),
    TOOL_FLAG("print-local-scope", "mlir-print-local-scope",
              FIELD(printLocalScope), "Print with local scope"),
    TOOL_CALL("max-input-size", NULL, "BYTES", set_max_input,
              "Refuse a larger input (default 1073741824)"),
    TOOL_FLAG("timing", NULL, FIELD(timing),
              "Print the time of each phase on stderr"),
    TOOL_FLAG("help", "h", FIELD(help), "Print this help and exit"),
    TOOL_FLAG("version", NULL, FIELD(version), "Print the version and exit"),
};

static int emit_option(void *opts, int argc, char **argv, int i) {
  return fuseEmitParseArg(&((TranslateOptions *)opts)->emit, argc, argv, i);
}

static void emit_names(void *opts, void (*add)(void *ctx, const char *name),
                       void *ctx) {
  (void)opts;
  for (size_t i = 0; i < fuseEmitParser.numOptions; ++i)
    add(ctx, fuseEmitParser.options[i].name);
}

static int input_file(void *opts, const char *arg) {
  TranslateOptions *o = opts;
  if (o->input)
    return toolUsageError("fuse-translate",
                          "too many input files (extra: '%s')", arg);
  o->input = arg;
  return 0;
}

static const ToolParser kParser = {
    .tool = "fuse-translate",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .extra = emit_option,
    .extraNames = emit_names,
    .positional = input_file,
};

static void print_help(FILE *out) {
  fprintf(out,
          "OVERVIEW: fuse-translate - translate between fuse IR and other "
          "formats\n\n"
          "USAGE: fuse-translate <translation> [options] [input-file|-]\n\n"
          "OPTIONS:\n");
  toolPrintOptions(&kParser, out);
  fprintf(out, "\nCODE GENERATION OPTIONS:\n");
  toolPrintOptions(&fuseEmitParser, out);
}

static int parse_command_line(int argc, char **argv, TranslateOptions *o) {
  int rc = toolParseArgs(&kParser, argc, argv, o);
  if (rc)
    return rc;
  if (!o->input)
    o->input = "-";
  if (!o->output)
    o->output = "-";
  if (!o->maxInput)
    o->maxInput = FZ_DEFAULT_MAX_SOURCE_SIZE;
  return 0;
}

/*===--- Output ----------------------------------------------------------===*/

/* Prints module to path ("-": stdout), atomically for a regular file
 * (tools/common_output.c). */
static bool write_module(FzOp *module, unsigned flags, const char *path) {
  FzToolOutput out;
  if (!fzToolOutputOpen(&out, "fuse-translate", path))
    return false;
  fzOpPrint(module, flags, fzToolOutputWrite, &out);
  return fzToolOutputClose(&out, true);
}

int main(int argc, char **argv) {
  TranslateOptions opts;
  memset(&opts, 0, sizeof opts);
  fuseEmitOptionsInit(&opts.emit);
  int status = parse_command_line(argc, argv, &opts);
  if (status)
    return status;
  if (opts.help) {
    print_help(stdout);
    return 0;
  }
  if (opts.version) {
    printf("fuse-translate version %s\n", fzGetVersionString());
    return 0;
  }
  if (!opts.translation && !opts.emit.kind)
    return toolUsageError("fuse-translate",
                          "no translation chosen (e.g. --import-onnx)");
  const Translation *t = NULL;
  for (size_t k = 0; opts.translation && k < NUM_TRANSLATIONS; ++k)
    if (!strcmp(kTranslations[k].flag, opts.translation))
      t = &kTranslations[k];

  FzContext *ctx = fzContextCreate();
  if (!ctx) {
    fprintf(stderr, "fuse-translate: error: cannot create a context\n");
    return 1;
  }
  fzContextSetMaxSourceSize(ctx, opts.maxInput);
  FzToolTiming timing;
  fzToolTimingInit(&timing);
  if (opts.timing)
    opts.emit.timing = &timing;
  bool ok = fzRegisterAllDialects(ctx);
  double t0 = fzToolTimingNow();
  FzOp *module = !ok ? NULL
                 : t  ? t->run(ctx, &opts)
                      : fzParseOrImportFileWithOptions(
                            ctx, opts.input,
                            &(FzOnnxImportOptions){opts.shapes.n,
                                                   opts.shapes.shapes, 0,
                                                   NULL, NULL},
                            "fuse-translate");
  fzToolTimingAdd(opts.emit.timing, "parse/import", fzToolTimingNow() - t0);
  ok = module && fzContextGetNumErrors(ctx) == 0 &&
       !fzContextHadAllocationFailure(ctx);
  if (ok && opts.emit.kind) {
    ok = fzOpVerify(module) && fuseEmitModule(module, &opts.emit,
                                              opts.output);
  } else if (ok) {
    unsigned flags = (opts.printGeneric ? FZ_PRINT_GENERIC : 0u) |
                     (opts.printDebugInfo ? FZ_PRINT_DEBUGINFO : 0u) |
                     (opts.printLocalScope ? FZ_PRINT_LOCAL_SCOPE : 0u);
    ok = write_module(module, flags, opts.output);
  }
  if (module)
    fzOpDestroy(module);
  fzContextDestroy(ctx);
  if (opts.timing)
    fzToolTimingPrint(&timing, stderr);
  return ok ? 0 : 1;
}
