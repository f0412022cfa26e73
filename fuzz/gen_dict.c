/* gen_dict.c - writes libFuzzer dictionaries (-dict=FILE) for the fuzz
 * targets, from the registries of a context with everything registered,
 * so that they always match the ops and passes of this build.
 *
 *   gen_fuzz_dict parser    tokens of the textual format (ir/lexer.h),
 *                           type and attribute keywords, the keywords of
 *                           the custom syntaxes, every registered op name
 *                           (with and without its dialect prefix) and its
 *                           inherent attribute names
 *   gen_fuzz_dict kernel    the parser's, plus the kernel dialect's
 *                           fragments (its ops, memory spaces, types)
 *   gen_fuzz_dict pipeline  the pipeline grammar's punctuation, anchor
 *                           op names, every pass and named pipeline, and
 *                           every pass option as `name=` (with its
 *                           choices)
 *   gen_fuzz_dict run       fuse-run's flags (fuzz_run)
 *   gen_fuzz_dict onnx      ONNX op types and attribute names whose
 *                           sizes the importer checks, and the protobuf
 *                           encodings of extreme values (int64 varints,
 *                           NaN, inf, 1e30 as float bits) (fuzz_onnx)
 *
 * Writes to stdout; exits 2 on a bad argument (a tool, not the library).
 * Entries are libFuzzer's "..." syntax: \\ and \" escaped, other bytes
 * outside printable ASCII as \xNN.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/fz.h"

static void entry_n(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      printf("\\x%02X", c);
    else
      putchar(c);
  }
  puts("\"");
}

static void entry(const char *s) { entry_n(s, strlen(s)); }

static void entries(const char *const *list) {
  for (; *list; ++list)
    entry(*list);
}

static const char *const kTokens[] = {
    "(", ")", "[", "]", "{", "}", "<", ">", ",", ":", "=", "->", "?", "*",
    "+", "-", "...", "%", "%0", "%arg0", "^bb0", "^bb1", "@main", "@\"q\"",
    "#map", "!t", "0x", "0x7FC00000", "1.5", "1e-3", "-0.0", "\"s\"",
    "\\n", "\\\"", "\\00", "//", "\n", " : ", " = ", "#0", "%0#1", NULL};

static const char *const kTypes[] = {
    "i1", "i8", "i16", "i32", "i64", "i65", "si32", "ui8", "index", "f16",
    "bf16", "f32", "f64", "none", "tensor<", "vector<", "buffer<", "?x",
    "x", "4x", "0x", "tensor<*xf32>", "tensor<?x?xf32>", "complex<f32>",
    "() -> ()", "1x1x1x1x1x1x1x1x", "vector<[4]xi32>", "[4]x",
    "tensor<16xf64, \"sparse\">", ", #enc>", NULL};

static const char *const kAttrs[] = {
    "dense<", "dense<[", "dense<\"0x", "array<i64: ", "array<f32: ",
    "true", "false", "unit", "loc(", "loc(\"f\":1:2)", "loc(unknown)",
    "fused<", "callsite(", " at ", "#loc", "{", "<{", "}>", ": i64", ": f32",
    "attributes", "sym_name", "function_type", "sym_visibility", "private",
    "nested", "public", "arg_attrs", "res_attrs", "value", "res_attrs = [{}]",
    "array<i7: ", "array<i1: ", "#loc = loc(\"a\":1:2)", "{l = #loc}",
    "\"x\" : i32", "dense_resource<", "sparse<", "dense<[\"a\", \"b\"]>",
    "-> (f32 {", "{foo.x = 1}", NULL};

static const char *const kCustom[] = {
    "func.func", "module", "builtin.module", "return", "func.return",
    "func.call", "func.constant", "func.call_indirect", "call_indirect",
    "constant", "builtin.unrealized_conversion_cast",
    "unrealized_conversion_cast", "in", "iter_args", "step", "to", "strides", "m16n8k16",
    "attributes", "inf", "nan", "0x7F800000", NULL};

static const char *const kKernel[] = {
    "kernel.", "shared", "global", "local", "workgroup", "thread_id",
    "block_id", "block_dim", "grid_dim", "x", "y", "z", "barrier", "launch",
    "blocks", "threads", "memref", "buffer<4xf32>", "buffer<?xf32>",
    "index", NULL};

static const char *const kPipeline[] = {
    "(", ")", "{", "}", ",", "=", " ", "\"", "builtin.module(",
    "func.func(", "any(", "kernel.func(", "loop.func(", "foo.bar(",
    "func.funk(", "true", "false",
    "0", "-1", "9223372036854775807", "1e308", NULL};

static const char *const kRun[] = {
    "--random-inputs", "--device", "cpu", "interp", "sim", "cuda",
    "--compare", "--output-dir", "--rtol", "--atol", "--bench", "--threads",
    "--entry", "--input", "--pass-pipeline", "--graph-optimize", "--fuse",
    "--seed", "--repeat", "--help", "--", "=", "nan", "1e400", "-0",
    "0x10", NULL};

static const char *const kOnnx[] = {
    "OneHot", "Reshape", "Resize", "Upsample", "Range", "Tile", "Expand",
    "ConstantOfShape", "Pad", "Slice", "Split", "Concat", "CumSum",
    "EyeLike", "Trilu", "GatherElements", "Gather", "ArgMax", "Hardmax",
    "LRN", "ConvTranspose", "DepthToSpace", "SpaceToDepth", "Einsum", "Div",
    "Mod", "axis", "axes", "blocksize", "size", "strides", "dilations",
    "pads", "group", "mode", "linear", "cubic", "edge", "reflect",
    "equation", "allowzero", "output_shape", "location", "offset",
    "length", "../", "/etc/passwd", "9223372036854775807", NULL};

/* Protobuf encodings with NUL bytes: varints of INT64_MAX, 2^62, 2^40,
 * -1 and INT64_MIN; NaN, inf, 1e30 and 2^61 as little-endian f32. */
static const struct {
  const char *bytes;
  size_t n;
} kOnnxBytes[] = {
    {"\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9},
    {"\x80\x80\x80\x80\x80\x80\x80\x80\x40", 9},
    {"\x80\x80\x80\x80\x80\x20", 6},
    {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    {"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 10},
    {"\x00\x00\xc0\x7f", 4},
    {"\x00\x00\x80\x7f", 4},
    {"\xca\xf2\x49\x71", 4},
    {"\x00\x00\x00\x5e", 4},
};

static void on_op(const FzOpDef *def, void *ud) {
  (void)ud;
  entry(def->name);
  const char *dot = strchr(def->name, '.');
  if (dot)
    entry(dot + 1);
  if (def->inherentAttrs)
    for (const char *const *a = def->inherentAttrs; *a; ++a) {
      char buf[256];
      snprintf(buf, sizeof buf, "%s = ", *a);
      entry(buf);
    }
}

static void on_pass(const FzPassDef *def, void *ud) {
  (void)ud;
  entry(def->argument);
  for (size_t i = 0; i < def->numOptions; ++i) {
    const FzPassOptionDef *o = &def->options[i];
    char buf[256];
    snprintf(buf, sizeof buf, "%s=", o->name);
    entry(buf);
    if (o->choices)
      entries(o->choices);
  }
}

static void on_pipeline(const char *name, const char *summary,
                        const char *pipeline, void *ud) {
  (void)summary, (void)pipeline, (void)ud;
  entry(name);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: gen_fuzz_dict parser|kernel|pipeline|run|onnx\n");
    return 2;
  }
  FzContext *ctx = fzContextCreate();
  if (!ctx || !fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx)) {
    fprintf(stderr, "gen_fuzz_dict: registration failed\n");
    return 1;
  }
  const char *what = argv[1];
  if (!strcmp(what, "parser") || !strcmp(what, "kernel")) {
    entries(kTokens);
    entries(kTypes);
    entries(kAttrs);
    entries(kCustom);
    fzContextForEachOpDef(ctx, on_op, NULL);
    if (!strcmp(what, "kernel"))
      entries(kKernel);
  } else if (!strcmp(what, "pipeline")) {
    entries(kPipeline);
    fzContextForEachPass(ctx, on_pass, NULL);
    fzContextForEachPassPipeline(ctx, on_pipeline, NULL);
  } else if (!strcmp(what, "run")) {
    entries(kRun);
  } else if (!strcmp(what, "onnx")) {
    entries(kOnnx);
    for (size_t i = 0; i < sizeof kOnnxBytes / sizeof kOnnxBytes[0]; ++i)
      entry_n(kOnnxBytes[i].bytes, kOnnxBytes[i].n);
  } else {
    fprintf(stderr, "gen_fuzz_dict: unknown dictionary '%s'\n", what);
    fzContextDestroy(ctx);
    return 2;
  }
  fzContextDestroy(ctx);
  return 0;
}
