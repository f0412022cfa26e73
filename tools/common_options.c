/* tools/common_options.c - the tools' command-line parser
 * (common_options.h). */
#include "tools/common_options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int toolUsageError(const char *tool, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", tool);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n%s: note: run '%s --help' for the list of options\n",
          tool, tool);
  va_end(ap);
  return TOOL_EXIT_USAGE;
}

static bool name_is(const char *name, const char *s, size_t len) {
  return name && strlen(name) == len && memcmp(name, s, len) == 0;
}

const ToolOption *toolFindOption(const ToolParser *p, const char *name,
                                 size_t len) {
  for (size_t i = 0; i < p->numOptions; ++i)
    if (name_is(p->options[i].name, name, len) ||
        name_is(p->options[i].alias, name, len))
      return &p->options[i];
  return NULL;
}

/*===--- "did you mean" ---------------------------------------------------===*/

typedef struct Suggest {
  const char *given; /* without dashes, up to '=' */
  size_t len;
  const char *best;
  size_t bestDist;
} Suggest;

/* Levenshtein distance of a[0..n) and b, capped at 64 characters. */
static size_t edit_distance(const char *a, size_t n, const char *b) {
  size_t m = strlen(b);
  if (n > 64 || m > 64)
    return (size_t)-1;
  size_t row[65];
  for (size_t j = 0; j <= m; ++j)
    row[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m];
}

static void consider(void *ctx, const char *name) {
  Suggest *s = ctx;
  if (!name)
    return;
  size_t d = edit_distance(s->given, s->len, name);
  if (d < s->bestDist) {
    s->bestDist = d;
    s->best = name;
  }
}

/* The known spelling closest to the unknown option, or NULL when none is
 * close (at most 2 edits, or a third of the name for long names). */
static const char *suggest(const ToolParser *p, void *opts, const char *name,
                           size_t len) {
  Suggest s = {name, len, NULL, (size_t)-1};
  for (size_t i = 0; i < p->numOptions; ++i) {
    consider(&s, p->options[i].name);
    consider(&s, p->options[i].alias);
  }
  if (p->extraNames)
    p->extraNames(opts, consider, &s);
  size_t limit = len / 3 > 2 ? len / 3 : 2;
  return s.best && s.bestDist <= limit && s.bestDist > 0 ? s.best : NULL;
}

/*===--- Values -----------------------------------------------------------===*/

/* "a positive integer", "a non-negative number", "an integer in [a, b]"
 * for a range [min, max] (max from 1e15 up counts as unbounded). */
static void range_text(char *buf, size_t size, const char *what, double min,
                       double max) {
  bool open = max >= 1e15;
  if (open && min == 1)
    snprintf(buf, size, "a positive %s", what);
  else if (open && min == 0)
    snprintf(buf, size, "a non-negative %s", what);
  else if (open)
    snprintf(buf, size, what[0] == 'i' ? "an %s >= %.0f" : "a %s >= %g", what,
             min);
  else
    snprintf(buf, size,
             what[0] == 'i' ? "an %s in [%.0f, %.0f]" : "a %s in [%g, %g]",
             what, min, max);
}

/* "NAME=2x3x4" ("NAME=" for a scalar, '?' for a dynamic dim) into the
 * next shape of s. The text is argv's (writable): the last '=' becomes
 * the name's terminator. */
static int add_input_shape(const ToolParser *p, ToolInputShapes *s,
                           const char *value) {
  char *spec = (char *)value;
  char *eq = strrchr(spec, '=');
  if (!eq || eq == spec)
    return toolUsageError(p->tool, "--input-shape expects NAME=DIMS (e.g. "
                                   "x=1x3x224x224), got '%s'", spec);
  if (s->n == TOOL_MAX_INPUT_SHAPES)
    return toolUsageError(p->tool, "too many --input-shape options (at "
                                   "most %d)", TOOL_MAX_INPUT_SHAPES);
  size_t k = s->n;
  FzOnnxInputShape *o = &s->shapes[k];
  size_t maxRank = sizeof s->dims[0] / sizeof s->dims[0][0];
  *eq = '\0';
  o->name = spec;
  o->index = 0;
  o->shape = s->dims[k];
  o->rank = 0;
  for (char *q = eq + 1; *q;) {
    char *end = q;
    long long d = 0;
    errno = 0;
    if (*q == '?') {
      d = FZ_DYNAMIC;
      end = q + 1;
    } else if (*q >= '0' && *q <= '9') {
      d = strtoll(q, &end, 10);
    }
    if (end == q || errno || (d != FZ_DYNAMIC && d > FZ_MAX_DIM) ||
        o->rank == maxRank || (*end && *end != 'x') ||
        (*end == 'x' && !end[1])) {
      *eq = '=';
      return toolUsageError(p->tool, "--input-shape '%s': DIMS must be "
                                     "sizes (at most 2^40) or '?' joined "
                                     "by 'x', at most %zu of them", spec,
                            maxRank);
    }
    s->dims[k][o->rank++] = d;
    q = *end ? end + 1 : end;
  }
  for (size_t j = 0; j < k; ++j)
    if (!strcmp(s->shapes[j].name, spec))
      return toolUsageError(p->tool, "--input-shape: '%s' is given twice",
                            spec);
  s->n++;
  return 0;
}

static int set_value(const ToolParser *p, const ToolOption *o, void *opts,
                     const char *arg, const char *value) {
  char *field = (char *)opts + o->field;
  switch (o->kind) {
  case TOOL_OPT_FLAG:
    if (!value || !strcmp(value, "true") || !strcmp(value, "1")) {
      *(bool *)(void *)field = true;
    } else if (!strcmp(value, "false") || !strcmp(value, "0")) {
      *(bool *)(void *)field = false;
    } else {
      return toolUsageError(p->tool,
                            "option '--%s' takes no value (or true/false), "
                            "got '%s'",
                            o->name, value);
    }
    return 0;
  case TOOL_OPT_STRING:
    *(const char **)(void *)field = value;
    return 0;
  case TOOL_OPT_INT: {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (!*value || *end || errno || (double)v < o->min || (double)v > o->max) {
      char range[96];
      range_text(range, sizeof range, "integer", o->min, o->max);
      return toolUsageError(p->tool, "--%s expects %s, got '%s'", o->name,
                            range, value);
    }
    *(int64_t *)(void *)field = (int64_t)v;
    return 0;
  }
  case TOOL_OPT_DOUBLE: {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (!*value || *end || errno || !isfinite(v) || v < o->min ||
        v > o->max) {
      char range[96];
      range_text(range, sizeof range, "number", o->min, o->max);
      return toolUsageError(p->tool, "--%s expects %s, got '%s'", o->name,
                            range, value);
    }
    *(double *)(void *)field = v;
    return 0;
  }
  case TOOL_OPT_CHOICE:
    for (size_t i = 0; o->choices && o->choices[i]; ++i)
      if (!strcmp(o->choices[i], value)) {
        *(const char **)(void *)field = o->choices[i];
        return 0;
      }
    {
      char list[512] = "";
      size_t n = 0;
      for (size_t i = 0; o->choices && o->choices[i]; ++i)
        n += (size_t)snprintf(list + n, n < sizeof list ? sizeof list - n : 0,
                              "%s'%s'", i ? ", " : "", o->choices[i]);
      return toolUsageError(p->tool, "option '%s': '%s' is not one of %s",
                            arg, value, list);
    }
  case TOOL_OPT_CALL:
    return o->call(opts, value);
  case TOOL_OPT_SHAPE:
    return add_input_shape(p, (ToolInputShapes *)(void *)field, value);
  }
  return toolUsageError(p->tool, "option '%s': internal error", arg);
}

/*===--- The parser -------------------------------------------------------===*/

int toolParseOption(const ToolParser *p, void *opts, int argc, char **argv,
                    int i) {
  const char *arg = argv[i];
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  const char *eq = strchr(body, '=');
  size_t len = eq ? (size_t)(eq - body) : strlen(body);
  const char *value = eq ? eq + 1 : NULL;
  const ToolOption *o = toolFindOption(p, body, len);
  if (!o && arg[1] != '-' && len > 1) {
    /* -oFILE: a one-letter option glued to its value. */
    o = toolFindOption(p, body, 1);
    if (o && o->metavar)
      value = body + 1;
    else
      o = NULL;
  }
  if (!o)
    return 0;
  int used = 1;
  if (o->metavar && !value) {
    if (i + 1 >= argc) {
      toolUsageError(p->tool, "option '%s' requires a value (%s)", arg,
                     o->metavar);
      return -1;
    }
    value = argv[i + 1];
    used = 2;
  } else if (!o->metavar && value && o->kind != TOOL_OPT_FLAG &&
             o->kind != TOOL_OPT_CALL) {
    toolUsageError(p->tool, "option '--%s' takes no value", o->name);
    return -1;
  }
  return set_value(p, o, opts, arg, value) ? -1 : used;
}

int toolParseArgs(const ToolParser *p, int argc, char **argv, void *opts) {
  bool ended = false;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (ended || arg[0] != '-' || arg[1] == '\0') {
      int rc = p->positional(opts, arg);
      if (rc)
        return rc;
      continue;
    }
    if (!strcmp(arg, "--")) {
      ended = true;
      continue;
    }
    int used = p->extra ? p->extra(opts, argc, argv, i) : 0;
    if (used == 0)
      used = toolParseOption(p, opts, argc, argv, i);
    if (used < 0)
      return TOOL_EXIT_USAGE;
    if (used > 0) {
      i += used - 1;
      continue;
    }
    const char *body = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(body, '=');
    size_t len = eq ? (size_t)(eq - body) : strlen(body);
    int shown = (int)(len + (size_t)(body - arg));
    const char *near = suggest(p, opts, body, len);
    if (near)
      return toolUsageError(p->tool,
                            "unknown option '%.*s'; did you mean '--%s'?",
                            shown, arg, near);
    return toolUsageError(p->tool, "unknown option '%.*s'", shown, arg);
  }
  return 0;
}

/*===--- --help -----------------------------------------------------------===*/

static void spelling(char *buf, size_t size, const ToolOption *o,
                     const char *name) {
  bool one = strlen(name) == 1;
  snprintf(buf, size, "%s%s%s%s", one ? "-" : "--", name,
           o->metavar ? (one ? " " : "=") : "", o->metavar ? o->metavar : "");
}

void toolPrintOptions(const ToolParser *p, FILE *out) {
  for (size_t i = 0; i < p->numOptions; ++i) {
    const ToolOption *o = &p->options[i];
    char s[96];
    spelling(s, sizeof s, o, o->name);
    fprintf(out, "  %-32s %s", s, o->help);
    if (o->kind == TOOL_OPT_CHOICE && o->choices) {
      fputs(" (", out);
      for (size_t c = 0; o->choices[c]; ++c)
        fprintf(out, "%s%s", c ? ", " : "", o->choices[c]);
      fputs(")", out);
    }
    fputc('\n', out);
    if (o->alias) {
      char a[96];
      spelling(a, sizeof a, o, o->alias);
      fprintf(out, "  %-32s Alias for %s\n", a, s);
    }
  }
}

int toolParseLayout(const char *tool, const char *value, FzGraphLayout *out) {
  if (!value || !fzGraphLayoutParse(fzStringRefFromCString(value), out))
    return toolUsageError(tool, "--layout expects %s, got '%s'",
                          fzGraphLayoutGetChoicesText(), value ? value : "");
  return 0;
}
