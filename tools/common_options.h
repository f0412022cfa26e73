/* tools/common_options.h - the command-line parser that fuse-opt,
 * fuse-translate and fuse-run share.
 *
 * A tool describes its options in a table (ToolOption rows) over its own
 * options struct; toolParseArgs fills the struct from argv. Every option
 * takes one or two dashes; a value is given as `--name=VALUE` or
 * `--name VALUE` (and `-oVALUE` for one-letter names); a flag also
 * accepts `--flag=true|false|1|0`. `--` ends the options. Values are
 * checked here (integers, numbers, ranges, choices), so a tool never sees
 * a malformed one. An unknown option is refused with the closest known
 * spelling ("did you mean '--device'?"). Usage errors exit with status 1,
 * as mlir-opt's do; the message is `TOOL: error: ...` and a note names
 * `TOOL --help`.
 *
 * Options that a table cannot describe (fuse-opt's one flag per
 * registered pass, fuse-run's CPU options) come through the `extra` hook,
 * tried before the table.
 */
#ifndef FZ_TOOLS_COMMON_OPTIONS_H
#define FZ_TOOLS_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fz/layout.h"
#include "fz/onnx.h" /* FzOnnxInputShape: --input-shape */

/* The exit status of a usage error (mlir-opt's). */
#define TOOL_EXIT_USAGE 1

typedef enum ToolOptionKind {
  TOOL_OPT_FLAG,   /* bool */
  TOOL_OPT_STRING, /* const char * (points into argv) */
  TOOL_OPT_INT,    /* int64_t within [min, max] */
  TOOL_OPT_DOUBLE, /* double within [min, max] (finite) */
  TOOL_OPT_CHOICE, /* const char *, one of `choices` */
  TOOL_OPT_CALL,   /* call(opts, value): the tool's own handling */
  TOOL_OPT_SHAPE,  /* ToolInputShapes: NAME=DIMS appended (repeatable) */
} ToolOptionKind;

typedef struct ToolOption {
  const char *name;    /* without dashes */
  const char *alias;   /* another spelling, or NULL */
  const char *metavar; /* the value in --help; NULL for flags (and for a
                          CALL option that takes no value) */
  ToolOptionKind kind;
  size_t field; /* offsetof into the tool's options struct */
  const char *help;
  const char *const *choices; /* CHOICE: NULL-terminated */
  double min, max;            /* INT, DOUBLE: the accepted range */
  /* CALL: value is NULL for an option without metavar given without
   * `=VALUE` (one given with it gets the text). Returns 0, or
   * TOOL_EXIT_USAGE after printing the error (toolUsageError). */
  int (*call)(void *opts, const char *value);
} ToolOption;

/* Table rows, one macro per kind (every field spelled out). */
#define TOOL_FLAG(name, alias, field, help)                                   \
  {name, alias, NULL, TOOL_OPT_FLAG, field, help, NULL, 0, 0, NULL}
#define TOOL_STRING(name, alias, metavar, field, help)                        \
  {name, alias, metavar, TOOL_OPT_STRING, field, help, NULL, 0, 0, NULL}
#define TOOL_INT(name, alias, metavar, field, min, max, help)                 \
  {name, alias, metavar, TOOL_OPT_INT, field, help, NULL, min, max, NULL}
#define TOOL_DOUBLE(name, alias, metavar, field, min, max, help)              \
  {name, alias, metavar, TOOL_OPT_DOUBLE, field, help, NULL, min, max, NULL}
#define TOOL_CHOICE(name, alias, metavar, field, choices, help)               \
  {name, alias, metavar, TOOL_OPT_CHOICE, field, help, choices, 0, 0, NULL}
#define TOOL_CALL(name, alias, metavar, fn, help)                             \
  {name, alias, metavar, TOOL_OPT_CALL, 0, help, NULL, 0, 0, fn}

/* --input-shape NAME=DIMS (every tool, alias --onnx-input-shape),
 * repeatable: the shape of an ONNX graph input, or the size of a
 * symbolic dimension (NAME a dim_param, one size), for the importer
 * (FzOnnxInputShape: rank and static dims must match the model). DIMS is
 * `1x3x224x224`, `?` for a dim left dynamic, empty for a scalar. */
#define TOOL_MAX_INPUT_SHAPES 64
typedef struct ToolInputShapes {
  size_t n;
  FzOnnxInputShape shapes[TOOL_MAX_INPUT_SHAPES];
  int64_t dims[TOOL_MAX_INPUT_SHAPES][FZ_GRAPH_MAX_RANK];
} ToolInputShapes;
#define TOOL_INPUT_SHAPE(field)                                               \
  {"input-shape", "onnx-input-shape", "NAME=DIMS", TOOL_OPT_SHAPE, field,   \
   "ONNX models: give graph input NAME the shape DIMS (e.g. "                 \
   "x=1x3x224x224), or symbolic dimension NAME a size (batch=8); "            \
   "repeatable",                                                              \
   NULL, 0, 0, NULL}

typedef struct ToolParser {
  const char *tool; /* "fuse-run": the prefix of messages */
  const ToolOption *options;
  size_t numOptions;
  /* Tried on each option before the table: returns how many argv
   * entries it used (0: not its option), or -1 after printing an
   * error. May be NULL. */
  int (*extra)(void *opts, int argc, char **argv, int i);
  /* More option names (without dashes) for "did you mean": called with
   * add(ctx, name) for each. May be NULL. */
  void (*extraNames)(void *opts, void (*add)(void *ctx, const char *name),
                     void *ctx);
  /* A positional argument: returns 0, or TOOL_EXIT_USAGE after printing
   * the error. */
  int (*positional)(void *opts, const char *arg);
} ToolParser;

/* Fills opts from argv[1..argc). Returns 0, or TOOL_EXIT_USAGE after
 * printing the error. */
int toolParseArgs(const ToolParser *p, int argc, char **argv, void *opts);

/* Parses argv[i] (an option) against p's table alone: returns how many
 * argv entries it used, 0 when the table has no such option (nothing
 * printed), or -1 after printing an error. For tools that combine
 * tables (fuse-opt's pass flags). */
int toolParseOption(const ToolParser *p, void *opts, int argc, char **argv,
                    int i);

/* Prints `TOOL: error: <message>` and the --help note on stderr; returns
 * TOOL_EXIT_USAGE. */
int toolUsageError(const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* --layout=VALUE, for every tool alike: the layout of convolution
 * regions (fz/layout.h) into *out. Returns 0, or TOOL_EXIT_USAGE after
 * printing the error. */
int toolParseLayout(const char *tool, const char *value, FzGraphLayout *out);

/* The table's lines for --help ("  --name=METAVAR   help"), with the
 * choices of CHOICE options and a line per alias. */
void toolPrintOptions(const ToolParser *p, FILE *out);

/* The option of the table called `name` (or its alias); NULL if none. */
const ToolOption *toolFindOption(const ToolParser *p, const char *name,
                                 size_t len);

#endif /* FZ_TOOLS_COMMON_OPTIONS_H */
