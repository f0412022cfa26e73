/* tests/unit/test_parser.c - Check suite for the textual format through
 * the library API: fzParseSource on valid input (the module it returns,
 * locations, printing and round trips) and on malformed input (NULL, with
 * every error located at file:line:col and captured by a handler);
 * fzTypeParse and fzAttrParse; nesting limits; binary input; allocation
 * failures while parsing and printing (no crash, no leak).
 */
#include <fcntl.h>
#include <unistd.h>

#include "test_helpers.h"

/* Parses src as "in.fuse" in ctx; the module or NULL. */
static FzOp *parse(FzContext *ctx, const char *src) {
  return fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("in.fuse"),
                       0);
}

/* The printed text of op (caller frees). */
static char *print_op(FzOp *op, unsigned flags) {
  TextBuf b = {0};
  fzOpPrint(op, flags, text_cb, &b);
  return b.data ? b.data : calloc(1, 1);
}

/*===--- Valid input ----------------------------------------------------===*/

static const char kProgram[] =
    "// a comment\n"
    "func.func @add(%a: tensor<4xf32>, %b: f32) -> tensor<4xf32> {\n"
    "  %0 = \"test.scale\"(%a, %b) {alpha = 2.5 : f32} : "
    "(tensor<4xf32>, f32) -> tensor<4xf32>\n"
    "  %1:2 = \"test.split\"(%0) : (tensor<4xf32>) -> (tensor<4xf32>, i1)\n"
    "  return %1#0 : tensor<4xf32>\n"
    "}\n"
    "func.func private @decl(i32) -> i32\n"
    "func.func @caller(%x: i32) -> i32 {\n"
    "  %r = call @decl(%x) : (i32) -> i32\n"
    "  return %r : i32\n"
    "}\n";

static const char kProgramPrinted[] =
    "module {\n"
    "  func.func @add(%arg0: tensor<4xf32>, %arg1: f32) -> tensor<4xf32> {\n"
    "    %0 = \"test.scale\"(%arg0, %arg1) {alpha = 2.500000e+00 : f32} : "
    "(tensor<4xf32>, f32) -> tensor<4xf32>\n"
    "    %1:2 = \"test.split\"(%0) : (tensor<4xf32>) -> (tensor<4xf32>, i1)\n"
    "    return %1#0 : tensor<4xf32>\n"
    "  }\n"
    "  func.func private @decl(i32) -> i32\n"
    "  func.func @caller(%arg0: i32) -> i32 {\n"
    "    %0 = call @decl(%arg0) : (i32) -> i32\n"
    "    return %0 : i32\n"
    "  }\n"
    "}\n";

START_TEST(test_parse_valid_module) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = parse(ctx, kProgram);
  ck_assert_ptr_nonnull(m);
  ck_assert_uint_eq(log.count, 0);
  ck_assert(fzStringRefEqual(fzIdentGetString(fzOpGetName(m)),
                             FZ_STR("builtin.module")));
  ck_assert_ptr_null(fzOpGetBlock(m)); /* detached: the caller owns it */
  ck_assert(fzOpVerify(m));
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(m, 0));
  ck_assert_uint_eq(fzBlockGetNumOps(body), 3);
  FzOp *add = fzSymbolTableLookupIn(m, FZ_STR("add"));
  ck_assert_ptr_nonnull(add);
  ck_assert_ptr_eq(fzOpGetDef(add),
                   fzContextLookupOpDef(ctx, FZ_STR("func.func")));
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(add, 0));
  ck_assert_uint_eq(fzBlockGetNumArguments(entry), 2);
  FzOp *scale = fzBlockGetFirstOp(entry);
  ck_assert_ptr_eq(fzOpGetOperand(scale, 0), fzBlockGetArgument(entry, 0));
  ck_assert_ptr_eq(fzOpGetOperand(scale, 1), fzBlockGetArgument(entry, 1));
  int64_t four[] = {4};
  FzType *t4 = fzTensorTypeGet(ctx, 1, four, fzF32TypeGet(ctx), NULL);
  ck_assert_ptr_eq(fzValueGetType(fzOpGetResult(scale, 0)), t4);
  FzAttr *alpha = fzOpGetAttr(scale, FZ_STR("alpha"));
  ck_assert_ptr_eq(alpha, fzFloatAttrGet(ctx, fzF32TypeGet(ctx), 2.5));
  FzOp *split = fzOpGetNextInBlock(scale);
  ck_assert_uint_eq(fzOpGetNumResults(split), 2);
  FzOp *ret = fzBlockGetTerminator(entry);
  ck_assert_ptr_eq(fzOpGetOperand(ret, 0), fzOpGetResult(split, 0));
  /* Properties of the custom forms. */
  ck_assert_ptr_nonnull(fzOpGetProp(add, FZ_STR("function_type")));
  FzOp *decl = fzSymbolTableLookupIn(m, FZ_STR("decl"));
  ck_assert(fzRegionIsEmpty(fzOpGetRegion(decl, 0)));
  ck_assert(fzStringRefEqual(
      fzStringAttrGetValue(fzOpGetProp(decl, FZ_STR("sym_visibility"))),
      FZ_STR("private")));
  FzOp *call = fzBlockGetFirstOp(
      fzRegionGetFirstBlock(fzOpGetRegion(fzSymbolTableLookupIn(
                                              m, FZ_STR("caller")),
                                          0)));
  ck_assert_int_eq(fzAttrGetKind(fzOpGetProp(call, FZ_STR("callee"))),
                   FZ_ATTR_SYMBOL_REF);

  /* Parsed ops carry the location of their first token. */
  FzLoc *l = fzOpGetLoc(scale);
  ck_assert_int_eq(fzLocGetKind(l), FZ_LOC_FILE_LINE_COL);
  ck_assert(fzStringRefEqual(fzLocGetFile(l), FZ_STR("in.fuse")));
  ck_assert_uint_eq(fzLocGetLine(l), 3);
  ck_assert_uint_eq(fzLocGetColumn(l), 8);
  ck_assert_uint_eq(fzLocGetLine(fzOpGetLoc(add)), 2);
  ck_assert_uint_eq(fzLocGetColumn(fzOpGetLoc(add)), 1);
  ck_assert_uint_eq(fzLocGetLine(fzValueGetLoc(fzBlockGetArgument(entry, 1))),
                    2);

  char *text = print_op(m, 0);
  ck_assert_str_eq(text, kProgramPrinted);
  /* Printing, parsing and printing again is a fixed point, in both forms. */
  FzOp *m2 = parse(ctx, text);
  ck_assert_ptr_nonnull(m2);
  char *text2 = print_op(m2, 0);
  ck_assert_str_eq(text2, text);
  char *gen = print_op(m, FZ_PRINT_GENERIC);
  ck_assert_ptr_nonnull(strstr(gen, "\"func.func\"() <{function_type = "
                                    "(tensor<4xf32>, f32) -> tensor<4xf32>, "
                                    "sym_name = \"add\"}> ({\n"));
  /* Numbered as mlir-opt numbers the generic form (which does not restart
   * inside each function). */
  ck_assert_ptr_nonnull(strstr(gen, "\"func.return\"(%2#0) : "
                                    "(tensor<4xf32>) -> ()\n"));
  FzOp *m3 = parse(ctx, gen);
  ck_assert_ptr_nonnull(m3);
  char *gen2 = print_op(m3, FZ_PRINT_GENERIC);
  ck_assert_str_eq(gen2, gen);
  char *custom3 = print_op(m3, 0);
  ck_assert_str_eq(custom3, text);
  free(text);
  free(text2);
  free(gen);
  free(gen2);
  free(custom3);
  fzOpDestroy(m);
  fzOpDestroy(m2);
  fzOpDestroy(m3);
  ck_assert_uint_eq(log.count, 0);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_module_wrapping) {
  FzContext *ctx = new_context();
  /* Top-level ops are wrapped in a new module. */
  FzOp *m = parse(ctx, "\"test.a\"() : () -> ()\n\"test.b\"() : () -> ()\n");
  ck_assert_ptr_nonnull(m);
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(m, 0));
  ck_assert_uint_eq(fzBlockGetNumOps(body), 2);
  fzOpDestroy(m);
  /* A single top-level module is returned itself. */
  m = parse(ctx, "module @named attributes {x.y = 1} {\n}\n");
  ck_assert_ptr_nonnull(m);
  ck_assert(fzStringRefEqual(fzSymbolGetName(m), FZ_STR("named")));
  ck_assert_ptr_nonnull(fzOpGetAttr(m, FZ_STR("x.y")));
  ck_assert_ptr_nonnull(fzRegionGetFirstBlock(fzOpGetRegion(m, 0)));
  fzOpDestroy(m);
  /* Two modules are wrapped in a third. */
  m = parse(ctx, "module @a {\n}\nmodule @b {\n}\n");
  ck_assert_ptr_nonnull(m);
  ck_assert_ptr_null(fzSymbolGetName(m).data);
  ck_assert_ptr_nonnull(fzSymbolTableLookupIn(m, FZ_STR("b")));
  fzOpDestroy(m);
  /* Empty input: an empty module. */
  m = parse(ctx, "");
  ck_assert_ptr_nonnull(m);
  ck_assert_uint_eq(fzBlockGetNumOps(fzRegionGetFirstBlock(
                        fzOpGetRegion(m, 0))),
                    0);
  char *t = print_op(m, 0);
  ck_assert_str_eq(t, "module {\n}\n");
  free(t);
  fzOpDestroy(m);
  m = parse(ctx, "  // only a comment\n\n");
  ck_assert_ptr_nonnull(m);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_locations) {
  FzContext *ctx = new_context();
  FzOp *m = parse(ctx,
                  "#l = loc(\"model.onnx\":7:2)\n"
                  "\"test.a\"() : () -> () loc(\"x.py\":10:20)\n"
                  "\"test.b\"() : () -> () loc(#l)\n"
                  "\"test.c\"() : () -> () loc(\"conv\"(\"y.py\":1:2))\n"
                  "\"test.d\"() : () -> () loc(fused[\"a\":1:1, \"b\":2:2])\n"
                  "\"test.e\"() : () -> () loc(unknown)\n");
  ck_assert_ptr_nonnull(m);
  FzOp *o = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(m, 0)));
  ck_assert_ptr_eq(fzOpGetLoc(o),
                   fzFileLineColLocGet(ctx, FZ_STR("x.py"), 10, 20));
  o = fzOpGetNextInBlock(o);
  ck_assert_ptr_eq(fzOpGetLoc(o),
                   fzFileLineColLocGet(ctx, FZ_STR("model.onnx"), 7, 2));
  o = fzOpGetNextInBlock(o);
  ck_assert_ptr_eq(fzOpGetLoc(o),
                   fzNameLocGet(ctx, FZ_STR("conv"),
                                fzFileLineColLocGet(ctx, FZ_STR("y.py"), 1,
                                                    2)));
  o = fzOpGetNextInBlock(o);
  ck_assert_int_eq(fzLocGetKind(fzOpGetLoc(o)), FZ_LOC_FUSED);
  ck_assert_uint_eq(fzLocGetNumFused(fzOpGetLoc(o)), 2);
  o = fzOpGetNextInBlock(o);
  ck_assert_ptr_eq(fzOpGetLoc(o), fzUnknownLocGet(ctx));
  char *t = print_op(m, FZ_PRINT_DEBUGINFO | FZ_PRINT_LOCAL_SCOPE);
  ck_assert_ptr_nonnull(strstr(t, "loc(\"x.py\":10:20)"));
  ck_assert_ptr_nonnull(strstr(t, "loc(\"model.onnx\":7:2)"));
  ck_assert_ptr_nonnull(strstr(t, "loc(\"conv\"(\"y.py\":1:2))"));
  ck_assert_ptr_nonnull(strstr(t, "loc(fused[\"a\":1:1, \"b\":2:2])"));
  free(t);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Malformed input ------------------------------------------------===*/

typedef struct BadCase {
  const char *src;
  unsigned line, col;
  const char *message; /* a substring of the first error */
} BadCase;

static const BadCase kBad[] = {
    {"func.func @f() -> i32 {\n  return %9 : i32\n}\n", 2, 10,
     "use of undeclared SSA value name '%9'"},
    {"%0 = \"test.a\"() : () -> i32\n%0 = \"test.a\"() : () -> i32\n", 2, 1,
     "redefinition of SSA value '%0'"},
    {"\"test.a\"() : () -> tensor<4xq32>\n", 1, 29, "unknown type 'q32'"},
    {"func.func @f() {\n  return\n}\n}\n", 4, 1,
     "unexpected '}' at the top level"},
    {"func.func @f() {\n  return\n", 2, 9,
     "unexpected end of file: expected '}' to end region"},
    {"\"test.a\"() : () -> ()\n  \x01\n", 2, 3, "invalid character"},
    {"\"test.a\"() {s = \"abc\n", 1, 21, "expected '\"' in string literal"},
    {"%0 = \"test.a\"() : () -> i32\n\"test.b\"(%0) : (f32) -> ()\n", 2, 10,
     "use of value '%0' expects different type than prior uses: 'f32' vs "
     "'i32'"},
    {"\"test.a\"() : () -> tensor<1048576x1048576x1048576xf32>\n", 1, 20,
     "tensor has too many elements"},
    {"\"test.a\"() : () -> tensor<99999999999999999999xf32>\n", 1, 27,
     "dimension too large"},
    {"\"test.a\"() {x = 300 : i8} : () -> ()\n", 1, 17,
     "integer value too large for i8"},
    {"%0:2 = \"test.a\"() : () -> i32\n", 1, 1,
     "operation defines 1 results but was provided 2 to bind"},
    {"\"test.a\"() {x = #undefined} : () -> ()\n", 1, 17,
     "undefined symbol alias id 'undefined'"},
    {"\"func.frobnicate\"() : () -> ()\n", 1, 1,
     "unregistered operation 'func.frobnicate' found in dialect 'func'"},
    {"func.func @f() {\n  frob\n  return\n}\n", 2, 3,
     "custom op 'frob' is unknown"},
    {"\"test.a\"() {x = 1, x = 2} : () -> ()\n", 1, 20,
     "duplicate key 'x' in dictionary attribute"},
};

START_TEST(test_parse_errors_located) {
  const BadCase *c = &kBad[_i];
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = parse(ctx, c->src);
  if (m)
    fzOpDestroy(m);
  ck_assert_msg(m == NULL, "case %d parsed: %s", _i, c->src);
  ck_assert_uint_ge(log.numErrors, 1);
  ck_assert_int_eq(log.rec[0].severity, FZ_SEVERITY_ERROR);
  if (!strstr(log.rec[0].message, c->message))
    diag_log_dump(&log);
  ck_assert_msg(strstr(log.rec[0].message, c->message) != NULL,
                "case %d: got \"%s\", want \"%s\"", _i, log.rec[0].message,
                c->message);
  ck_assert_str_eq(log.rec[0].file, "in.fuse");
  ck_assert_msg(log.rec[0].line == c->line && log.rec[0].col == c->col,
                "case %d: at %u:%u, want %u:%u", _i, log.rec[0].line,
                log.rec[0].col, c->line, c->col);
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), log.numErrors);
  ck_assert(!fzContextHadAllocationFailure(ctx));
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_unregistered_flag) {
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRegisterAllDialects(ctx));
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_null(parse(ctx, "\n  \"test.a\"() : () -> ()\n"));
  ck_assert_diag_at(&log, "use --allow-unregistered-dialect to allow it: "
                          "'test.a'",
                    "in.fuse", 2, 3);
  fzContextSetAllowUnregisteredDialects(ctx, true);
  diag_log_clear(&log);
  FzOp *m = parse(ctx, "\n  \"test.a\"() : () -> ()\n");
  ck_assert_ptr_nonnull(m);
  ck_assert_uint_eq(log.count, 0);
  fzOpDestroy(m);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_line_offset) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  const char src[] = "\n\"test.b\"(%nope) : (i32) -> ()\n";
  ck_assert_ptr_null(fzParseSource(ctx, fzStringRefFromCString(src),
                                   FZ_STR("split.fuse"), 40));
  ck_assert_diag_at(&log, "use of undeclared SSA value name", "split.fuse",
                    42, 10);
  /* Locations of parsed ops are shifted the same way. */
  FzOp *m = fzParseSource(ctx, FZ_STR("\n\n\"test.a\"() : () -> ()\n"),
                          FZ_STR("split.fuse"), 100);
  ck_assert_ptr_nonnull(m);
  FzOp *a = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(m, 0)));
  ck_assert_uint_eq(fzLocGetLine(fzOpGetLoc(a)), 103);
  fzOpDestroy(m);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/* A handler that renders each diagnostic as the default printer does. */
static bool render_handler(const FzDiagnostic *d, void *ud) {
  fzDiagnosticPrint(d, true, text_cb, ud);
  return true;
}

START_TEST(test_parse_error_shows_source) {
  FzContext *ctx = new_context();
  TextBuf out = {0};
  FzDiagHandlerId id = fzContextPushDiagHandler(ctx, render_handler, &out);
  ck_assert_ptr_null(parse(ctx, "\"test.a\"() : () -> ()\n"
                                "\"test.b\"() : () -> f33\n"));
  ck_assert_str_eq(out.data, "in.fuse:2:20: error: unknown type 'f33'\n"
                             "\"test.b\"() : () -> f33\n"
                             "                   ^\n");
  fzContextPopDiagHandler(ctx, id);
  text_free(&out);
  fzContextDestroy(ctx);
}
END_TEST

/* fzParseSourceInPlace borrows a NUL-terminated buffer (diagnostics
 * point into it) and copies one that is not NUL-terminated. */
START_TEST(test_parse_in_place) {
  FzContext *ctx = new_context();
  TextBuf out = {0};
  FzDiagHandlerId id = fzContextPushDiagHandler(ctx, render_handler, &out);
  char good[] = "\"test.a\"() : () -> ()\n";
  FzOp *m = fzParseSourceInPlace(ctx, fzStringRefFromCString(good),
                                 FZ_STR("in.fuse"));
  ck_assert_ptr_nonnull(m);
  char *text = print_op(m, FZ_PRINT_GENERIC);
  ck_assert_ptr_nonnull(strstr(text, "\"test.a\"() : () -> ()"));
  free(text);
  fzOpDestroy(m);
  char bad[] = "\"test.b\"() : () -> f33\n";
  ck_assert_ptr_null(fzParseSourceInPlace(ctx, fzStringRefFromCString(bad),
                                          FZ_STR("in.fuse")));
  ck_assert_str_eq(out.data, "in.fuse:1:20: error: unknown type 'f33'\n"
                             "\"test.b\"() : () -> f33\n"
                             "                   ^\n");
  /* Not NUL-terminated: copied, so the parse stops at the length given
   * and never sees the "i32" after it. */
  text_free(&out);
  char cut[] = "\"test.c\"() : () -> i32";
  FzStringRef head = {cut, strlen(cut) - 3};
  ck_assert_ptr_null(fzParseSourceInPlace(ctx, head, FZ_STR("in2.fuse")));
  ck_assert_ptr_nonnull(out.data);
  ck_assert_ptr_nonnull(strstr(out.data, "in2.fuse:1:"));
  fzContextPopDiagHandler(ctx, id);
  text_free(&out);
  fzContextDestroy(ctx);
}
END_TEST

/* SSA names ending in a number are looked up per prefix by number
 * (parse_ssa.c): distinct spellings stay distinct ("%v1" and "%v01"),
 * more prefixes than get an array, numbers too long for one, and the
 * same names in an isolated scope all behave like any other name. */
START_TEST(test_parse_numbered_names) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  static const char kNames[] =
      "func.func @f(%v1: i32, %v01: f32) -> (i32, f32) {\n"
      "  %a0 = \"t.a\"(%v1) : (i32) -> i32\n"
      "  %b0 = \"t.b\"(%a0) : (i32) -> i32\n"
      "  %c0 = \"t.c\"(%b0) : (i32) -> i32\n"
      "  %d0 = \"t.d\"(%c0) : (i32) -> i32\n"
      "  %e0 = \"t.e\"(%d0) : (i32) -> i32\n"
      "  %x9999999 = \"t.x\"(%e0, %v01) : (i32, f32) -> i32\n"
      "  %y12345678 = \"t.y\"(%x9999999) : (i32) -> i32\n"
      "  %0 = \"t.z\"(%y12345678) : (i32) -> i32\n"
      "  \"t.region\"() ({\n"
      "    %v2 = \"t.inner\"(%0, %v1) : (i32, i32) -> i32\n"
      "  }) : () -> ()\n"
      "  return %0, %v01 : i32, f32\n"
      "}\n"
      "func.func @g(%v01: i32) -> i32 {\n"
      "  %v1 = \"t.a\"(%v01) : (i32) -> i32\n"
      "  return %v1 : i32\n"
      "}\n";
  FzOp *m = parse(ctx, kNames);
  if (!m)
    diag_log_dump(&log);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  char *text = print_op(m, FZ_PRINT_GENERIC);
  FzOp *again = parse(ctx, text);
  ck_assert_ptr_nonnull(again);
  char *text2 = print_op(again, FZ_PRINT_GENERIC);
  ck_assert_str_eq(text, text2);
  free(text);
  free(text2);
  fzOpDestroy(again);
  fzOpDestroy(m);
  /* Redefinition and use before definition are still found, and %v2 of
   * the region above is gone once its region ends. */
  diag_log_clear(&log);
  ck_assert_ptr_null(parse(ctx,
      "func.func @h(%v1: i32) {\n"
      "  %v1 = \"t.a\"() : () -> i32\n"
      "  \"t.region\"() ({\n"
      "    %v2 = \"t.b\"() : () -> i32\n"
      "  }) : () -> ()\n"
      "  \"t.use\"(%v2) : (i32) -> ()\n"
      "  return\n"
      "}\n"));
  ck_assert_diag_at(&log, "redefinition of SSA value '%v1'", "in.fuse", 2, 3);
  ck_assert_diag_at(&log, "use of undeclared SSA value name '%v2'", "in.fuse",
                    6, 11);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_reports_several_errors) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  /* Two independent errors in two top-level ops. */
  ck_assert_ptr_null(parse(ctx, "\"test.a\"() : () -> f33\n"
                                "\"test.b\"() : () -> ()\n"
                                "\"test.c\"() : () -> f34\n"));
  ck_assert_diag_at(&log, "unknown type 'f33'", "in.fuse", 1, 20);
  ck_assert_diag_at(&log, "unknown type 'f34'", "in.fuse", 3, 20);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_binary_input) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  /* The buffer is sized: a NUL byte is just an invalid character. */
  const char withNul[] = "\"test.a\"() : () -> ()\0\"test.b\"() : () -> ()\n";
  FzStringRef s = {withNul, sizeof withNul - 1};
  ck_assert_ptr_null(fzParseSource(ctx, s, FZ_STR("nul.fuse"), 0));
  ck_assert_diag_at(&log, "invalid character", "nul.fuse", 1, 22);
  /* Random bytes of every value, many times: no crash, always located. */
  unsigned seed = 12345;
  char buf[512];
  for (int round = 0; round < 300; ++round) {
    size_t n = 1 + (size_t)(round * 7) % sizeof buf;
    for (size_t i = 0; i < n; ++i) {
      seed = seed * 1103515245u + 12345u;
      buf[i] = (char)(seed >> 16);
    }
    diag_log_clear(&log);
    FzOp *m = fzParseSource(ctx, (FzStringRef){buf, n}, FZ_STR("rnd.fuse"),
                            0);
    if (m) {
      fzOpDestroy(m);
      continue;
    }
    ck_assert_uint_ge(log.numErrors, 1);
    ck_assert_str_eq(log.rec[0].file, "rnd.fuse");
    ck_assert_uint_ge(log.rec[0].line, 1);
    ck_assert_uint_ge(log.rec[0].col, 1);
  }
  ck_assert(!fzContextHadAllocationFailure(ctx));
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Nesting limits -------------------------------------------------===*/

/* n copies of `open`, then `middle`, then n copies of `close` (malloc'ed). */
static char *nest(const char *prefix, const char *open, const char *middle,
                  const char *close, const char *suffix, size_t n) {
  size_t lo = strlen(open), lc = strlen(close);
  size_t len = strlen(prefix) + n * (lo + lc) + strlen(middle) +
               strlen(suffix);
  char *s = malloc(len + 1), *p = s;
  p += sprintf(p, "%s", prefix);
  for (size_t i = 0; i < n; ++i, p += lo)
    memcpy(p, open, lo);
  p += sprintf(p, "%s", middle);
  for (size_t i = 0; i < n; ++i, p += lc)
    memcpy(p, close, lc);
  sprintf(p, "%s", suffix);
  return s;
}

START_TEST(test_parse_deep_nesting) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  char *regions = nest("", "\"test.r\"() ({\n", "", "}) : () -> ()\n", "",
                       20000);
  ck_assert_ptr_null(parse(ctx, regions));
  ck_assert_diag_at(&log, "nesting too deep (limit 256)", "in.fuse", 257, 13);
  free(regions);
  diag_log_clear(&log);
  char *arrays = nest("\"test.a\"() {x = ", "[", "", "]",
                      "} : () -> ()\n", 100000);
  ck_assert_ptr_null(parse(ctx, arrays));
  ck_assert_diag(&log, "nesting too deep");
  free(arrays);
  diag_log_clear(&log);
  char *types = nest("\"test.a\"() : () -> ", "tensor<", "f32", ">", "\n",
                     100000);
  ck_assert_ptr_null(parse(ctx, types));
  ck_assert_diag(&log, "nesting too deep");
  free(types);

  /* The limit is the context's: raise it and deeper input parses (and
   * verifies, and prints). */
  fzContextSetMaxNesting(ctx, 1000);
  diag_log_clear(&log);
  char *ok = nest("", "\"test.r\"() ({\n", "", "}) : () -> ()\n", "", 600);
  FzOp *m = parse(ctx, ok);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  char *printed = print_op(m, 0);
  ck_assert_ptr_nonnull(strstr(printed, "\"test.r\"() ({"));
  free(printed);
  fzOpDestroy(m);
  free(ok);
  char *okArrays = nest("\"test.a\"() {x = ", "[", "", "]", "} : () -> ()\n",
                        900);
  m = parse(ctx, okArrays);
  ck_assert_ptr_nonnull(m);
  fzOpDestroy(m);
  free(okArrays);
  fzContextSetMaxNesting(ctx, 8);
  ck_assert_ptr_null(parse(ctx, "\"test.a\"() {x = [[[[[[[[[[1]]]]]]]]]]} : "
                                "() -> ()\n"));
  ck_assert_diag(&log, "nesting too deep (limit 8)");
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Types and attributes from text ---------------------------------===*/

START_TEST(test_type_parse) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzType *f32 = fzF32TypeGet(ctx);
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("i32")), fzIntegerTypeGet(ctx, 32));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("  f16  ")), fzF16TypeGet(ctx));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("index")), fzIndexTypeGet(ctx));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("none")), fzNoneTypeGet(ctx));
  int64_t s[] = {4, FZ_DYNAMIC};
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("tensor<4x?xf32>")),
                   fzTensorTypeGet(ctx, 2, s, f32, NULL));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("tensor<*xbf16>")),
                   fzTensorTypeGet(ctx, FZ_UNRANKED, NULL, fzBF16TypeGet(ctx),
                                   NULL));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("tensor<f32>")),
                   fzTensorTypeGet(ctx, 0, NULL, f32, NULL));
  int64_t v[] = {2, 4};
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("vector<2x4xf32>")),
                   fzVectorTypeGet(ctx, 2, v, f32, NULL));
  int64_t strides[] = {8, 1};
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("buffer<2x4xf32, strides [8, 1], "
                                           "1>")),
                   fzBufferTypeGet(ctx, 2, v, f32, strides, 1, NULL));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("buffer<2x4xf32>")),
                   fzBufferTypeGet(ctx, 2, v, f32, NULL, 0, NULL));
  FzType *ins[] = {fzIntegerTypeGet(ctx, 32), f32};
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("(i32, f32) -> (f32)")),
                   fzFunctionTypeGet(ctx, 2, ins, 1, &f32));
  ck_assert_ptr_eq(fzTypeParse(ctx, FZ_STR("!foo.bar")),
                   fzOpaqueTypeGet(ctx, FZ_STR("foo"), FZ_STR("bar")));
  ck_assert_uint_eq(log.count, 0);

  /* Errors: NULL, located in "<string>". */
  const char *bad[] = {"i32 i32", "tensor<4xf32", "", "foo", "i0",
                       "tensor<-1xf32>", "tensor<4x(i32) -> i32>", "!",
                       "vector<?xf32>"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    diag_log_clear(&log);
    ck_assert_msg(fzTypeParse(ctx, fzStringRefFromCString(bad[i])) == NULL,
                  "\"%s\" parsed", bad[i]);
    ck_assert_uint_ge(log.numErrors, 1);
    ck_assert_str_eq(log.rec[0].file, "<string>");
    ck_assert_uint_eq(log.rec[0].line, 1);
  }
  diag_log_clear(&log);
  ck_assert_ptr_null(fzTypeParse(ctx, FZ_STR("i32 i32")));
  ck_assert_uint_eq(log.rec[0].col, 5);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_attr_parse) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzType *i64 = fzIntegerTypeGet(ctx, 64), *f32 = fzF32TypeGet(ctx);
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("5 : i64")),
                   fzIntegerAttrGet(ctx, i64, 5));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("5")), fzIntegerAttrGet(ctx, i64, 5));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("-7 : i8")),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 8), -7));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("1.5 : f16")),
                   fzFloatAttrGet(ctx, fzF16TypeGet(ctx), 1.5));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("0.1 : f32")),
                   fzFloatAttrGet(ctx, f32, 0.1));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("true")), fzBoolAttrGet(ctx, true));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("unit")), fzUnitAttrGet(ctx));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("\"a\\0Ab\"")),
                   fzStringAttrGet(ctx, FZ_STR("a\nb")));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("i32")),
                   fzTypeAttrGet(ctx, fzIntegerTypeGet(ctx, 32)));
  FzAttr *d = fzAttrParse(ctx, FZ_STR("{b = 1, a = 2}"));
  ck_assert_ptr_nonnull(d);
  FzNamedAttr e[] = {{fzIdentGet(ctx, FZ_STR("a")),
                      fzIntegerAttrGet(ctx, i64, 2)},
                     {fzIdentGet(ctx, FZ_STR("b")),
                      fzIntegerAttrGet(ctx, i64, 1)}};
  ck_assert_ptr_eq(d, fzDictAttrGet(ctx, 2, e, NULL));
  FzAttr *arr = fzAttrParse(ctx, FZ_STR("[1, \"s\", [true]]"));
  ck_assert_int_eq(fzAttrGetKind(arr), FZ_ATTR_ARRAY);
  ck_assert_uint_eq(fzArrayAttrGetSize(arr), 3);
  FzStringRef nested[] = {FZ_STR("b")};
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("@a::@b")),
                   fzSymbolRefAttrGet(ctx, FZ_STR("a"), 1, nested));
  int64_t two[] = {2};
  FzType *t2 = fzTensorTypeGet(ctx, 1, two, f32, NULL);
  float vals[] = {1.0f, 2.0f};
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("dense<[1.0, 2.0]> : "
                                           "tensor<2xf32>")),
                   fzDenseAttrGet(ctx, t2, vals, sizeof vals));
  FzAttr *splat = fzAttrParse(ctx, FZ_STR("dense<3.0> : tensor<2xf32>"));
  ck_assert(fzDenseAttrIsSplat(splat));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("dense<[3.0, 3.0]> : "
                                           "tensor<2xf32>")),
                   splat);
  int64_t ints[] = {1, 2};
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("array<i64: 1, 2>")),
                   fzDenseArrayAttrGet(ctx, i64, 2, ints));
  ck_assert_ptr_eq(fzAttrParse(ctx, FZ_STR("#foo.bar")),
                   fzOpaqueAttrGet(ctx, FZ_STR("foo"), FZ_STR("bar")));
  ck_assert_uint_eq(log.count, 0);

  const char *bad[] = {"[1, 2", "{a = 1, a = 2}", "1 : f32", "1 2",
                       "dense<[1.0]> : tensor<2xf32>", "300 : i8", "#undef",
                       "@", "\"open"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    diag_log_clear(&log);
    ck_assert_msg(fzAttrParse(ctx, fzStringRefFromCString(bad[i])) == NULL,
                  "\"%s\" parsed", bad[i]);
    ck_assert_uint_ge(log.numErrors, 1);
    ck_assert_str_eq(log.rec[0].file, "<string>");
  }
  diag_log_clear(&log);
  ck_assert_ptr_null(fzAttrParse(ctx, FZ_STR("{a = 1, a = 2}")));
  ck_assert_diag_at(&log, "duplicate key 'a'", "<string>", 1, 9);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_type_attr_print_parse_round_trip) {
  FzContext *ctx = new_context();
  const char *types[] = {"i1", "i64", "index", "bf16", "f64",
                         "tensor<1x?x3xf16>", "tensor<*xi8>", "tensor<i1>",
                         "vector<4x4xf32>", "buffer<?x8xf32, strides [?, 1]>",
                         "buffer<4xi32, 2>", "() -> ()",
                         "(tensor<2xf32>) -> (i32, (i1) -> i1)",
                         "!foo<\"x\">", "none"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    FzType *t = fzTypeParse(ctx, fzStringRefFromCString(types[i]));
    ck_assert_msg(t != NULL, "%s", types[i]);
    char *s = type_str(t);
    ck_assert_ptr_eq(fzTypeParse(ctx, fzStringRefFromCString(s)), t);
    free(s);
  }
  const char *attrs[] = {"-1 : i16", "9223372036854775807", "2.5 : bf16",
                         "0x7FC00000 : f32", "1.0e+300 : f64",
                         "\"q\\22\\\\\"", "[]", "{}", "{\"a b\" = unit}",
                         "dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>",
                         "dense<true> : tensor<3xi1>",
                         "dense<\"0x0000803F00000040\"> : tensor<2xf32>",
                         "array<f32: 1.5>", "@\"sym bol\"", "tensor<2xf32>",
                         "#foo<[1, 2]>", "false"};
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; ++i) {
    FzAttr *a = fzAttrParse(ctx, fzStringRefFromCString(attrs[i]));
    ck_assert_msg(a != NULL, "%s", attrs[i]);
    char *s = attr_str(a);
    FzAttr *b = fzAttrParse(ctx, fzStringRefFromCString(s));
    ck_assert_msg(a == b, "%s printed as %s does not read back", attrs[i], s);
    free(s);
  }
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Files ----------------------------------------------------------===*/

START_TEST(test_parse_file) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_null(fzParseFile(ctx, "/nonexistent/dir/x.fuse"));
  ck_assert_uint_ge(log.numErrors, 1);
  char path[] = "/tmp/fuse-test-parse-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  const char src[] = "\"test.a\"() : () -> ()\n\"test.b\"() : () -> f33\n";
  ck_assert_int_eq(write(fd, src, sizeof src - 1), (ssize_t)(sizeof src - 1));
  close(fd);
  diag_log_clear(&log);
  ck_assert_ptr_null(fzParseFile(ctx, path));
  ck_assert_diag_at(&log, "unknown type 'f33'", path, 2, 20);
  fd = open(path, O_WRONLY | O_TRUNC);
  ck_assert_int_eq(write(fd, src, 22), 22);
  close(fd);
  FzOp *m = fzParseFile(ctx, path);
  ck_assert_ptr_nonnull(m);
  FzOp *a = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(m, 0)));
  ck_assert(fzStringRefEqual(fzLocGetFile(fzOpGetLoc(a)),
                             fzStringRefFromCString(path)));
  fzOpDestroy(m);
  unlink(path);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Allocation failures --------------------------------------------===*/

static const char kOomSource[] =
    "#a = 1 : i64\n"
    "module {\n"
    "  func.func @f(%x: tensor<4xf32>, %y: f32) -> tensor<4xf32> {\n"
    "    %0 = \"test.op\"(%x, %y) {k = #a, s = \"str\", d = dense<[1.0, 2.0, "
    "3.0, 4.0]> : tensor<4xf32>} : (tensor<4xf32>, f32) -> tensor<4xf32> "
    "loc(\"m.py\":1:2)\n"
    "    %1:2 = \"test.two\"(%0) ({\n"
    "    ^bb0(%z: f32):\n"
    "      \"test.use\"(%z, %y) : (f32, f32) -> ()\n"
    "    }) : (tensor<4xf32>) -> (tensor<4xf32>, i1)\n"
    "    %2 = call @g(%1#0) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "    return %2 : tensor<4xf32>\n"
    "  }\n"
    "  func.func private @g(tensor<4xf32>) -> tensor<4xf32>\n"
    "}\n";

static void oom_parse_run(size_t failAt, bool onward, size_t *attempts) {
  CountingAlloc c = {0};
  c.failAt = failAt;
  c.failOnward = onward;
  FzAllocator a = counting_allocator(&c);
  FzContext *ctx = fzContextCreateWithAllocator(&a);
  if (ctx) {
    DiagLog log;
    diag_log_begin(&log, ctx);
    if (fzRegisterAllDialects(ctx)) {
      fzContextSetAllowUnregisteredDialects(ctx, true);
      FzOp *m = fzParseSource(ctx, FZ_STR(kOomSource), FZ_STR("oom.fuse"), 0);
      if (m) {
        bool ok = fzOpVerify(m);
        (void)ok;
        TextBuf out = {0};
        fzOpPrint(m, 0, text_cb, &out);
        fzOpPrint(m, FZ_PRINT_GENERIC | FZ_PRINT_DEBUGINFO, text_cb, &out);
        text_free(&out);
        fzOpDestroy(m);
      } else {
        ck_assert_msg(c.numFailures > 0, "parse failed without a failure");
        ck_assert_uint_ge(log.numErrors + (log.id == 0), 1);
      }
      (void)fzTypeParse(ctx, FZ_STR("tensor<2x?xf32>"));
      (void)fzAttrParse(ctx, FZ_STR("{a = [1, 2], b = \"c\"}"));
    }
    if (failAt == 0)
      ck_assert_uint_eq(log.numErrors, 0);
    if (c.numFailures > 0)
      ck_assert_msg(fzContextHadAllocationFailure(ctx),
                    "allocation %zu failed silently", failAt);
    diag_log_end(&log);
    fzContextDestroy(ctx);
  }
  if (attempts)
    *attempts = c.numAllocs;
  ck_assert_msg(c.liveBlocks == 0 && c.liveBytes == 0,
                "failing allocation %zu%s: %zu blocks (%lld bytes) leaked",
                failAt, onward ? " onward" : "", c.liveBlocks, c.liveBytes);
  ck_assert_uint_eq(c.badFrees, 0);
}

START_TEST(test_parse_allocation_failures) {
  fflush(stderr);
  int saved = dup(2);
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0)
    dup2(devnull, 2);
  size_t total = 0;
  oom_parse_run(0, false, &total);
  ck_assert_uint_gt(total, 20);
  for (size_t n = 1; n <= total + 1; ++n) {
    oom_parse_run(n, false, NULL);
    oom_parse_run(n, true, NULL);
  }
  fflush(stderr);
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
  }
  if (devnull >= 0)
    close(devnull);
}
END_TEST

/*===--- Suite ----------------------------------------------------------===*/

static Suite *parser_suite(void) {
  Suite *s = suite_create("parser");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_parse_valid_module);
  tcase_add_test(tc, test_parse_module_wrapping);
  tcase_add_test(tc, test_parse_locations);
  tcase_add_loop_test(tc, test_parse_errors_located, 0,
                      (int)(sizeof kBad / sizeof kBad[0]));
  tcase_add_test(tc, test_parse_unregistered_flag);
  tcase_add_test(tc, test_parse_line_offset);
  tcase_add_test(tc, test_parse_error_shows_source);
  tcase_add_test(tc, test_parse_in_place);
  tcase_add_test(tc, test_parse_numbered_names);
  tcase_add_test(tc, test_parse_reports_several_errors);
  tcase_add_test(tc, test_parse_binary_input);
  tcase_add_test(tc, test_type_parse);
  tcase_add_test(tc, test_attr_parse);
  tcase_add_test(tc, test_type_attr_print_parse_round_trip);
  tcase_add_test(tc, test_parse_file);
  suite_add_tcase(s, tc);
  TCase *slow = tcase_create("limits");
  tcase_set_timeout(slow, 240);
  tcase_add_test(slow, test_parse_deep_nesting);
  tcase_add_test(slow, test_parse_allocation_failures);
  suite_add_tcase(s, slow);
  return s;
}

int main(void) { return run_suite(parser_suite()); }
