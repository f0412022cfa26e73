/* ir/pipeline_parser.c - textual pass pipelines: parsing and printing.
 *
 *   pipeline ::= element (',' element)*
 *   element  ::= op-name '(' pipeline? ')'      nested manager ('any' too;
 *                                               the op must be registered,
 *                                               or its dialect unregistered
 *                                               where the context allows)
 *              | pass-name ('{' option* '}')?   a pass with options
 *              | pipeline-name                  a named pipeline
 *   option   ::= key ('=' value)?               separated by spaces
 *   value    ::= '"' chars '"' | "'" chars "'" | '{' balanced '}' | bare
 *
 * The text is parsed into a scratch manager and spliced into the target
 * only when all of it is valid, so a failed parse leaves the target as it
 * was. The first error is reported at its character: the text is
 * registered as the source buffer "<pipeline>", so the default printer
 * shows the text with a caret under the offending character. An error
 * inside a named pipeline's own text is reported at the place that named
 * it, with the inner message.
 */
#include <stdarg.h>

#include "ir/pass_internal.h"

#define MAX_PIPELINE_NESTING 32

typedef struct Parser Parser;
struct Parser {
  FzContext *ctx;
  const char *base, *cur, *end; /* the text being parsed */
  Parser *outer;                /* parser of the text naming this one */
  size_t refPos;                /* offset in outer's text of the name */
  const char *name;             /* this named pipeline's name */
  size_t nameLen;
  unsigned depth;               /* named pipelines being expanded */
  unsigned nesting;             /* nested op(...) managers open */
  bool *failed;                 /* shared by the whole chain */
  FzStringRef topText;
};

static bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == '$';
}

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(Parser *p) {
  while (p->cur < p->end && is_space(*p->cur))
    ++p->cur;
}

/* Reports msg at `at` (a pointer into p's text), once per parse. */
static bool error_at(Parser *p, const char *at, const char *fmt, ...)
    FZ_PRINTF(3, 4);
static bool error_at(Parser *p, const char *at, const char *fmt, ...) {
  if (*p->failed)
    return false;
  *p->failed = true;
  FzBuf msg;
  fzBufInit(&msg, p->ctx);
  va_list ap;
  va_start(ap, fmt);
  fzBufVPrintf(&msg, fmt, ap);
  va_end(ap);
  size_t pos = (size_t)(at - p->base);
  /* Inside a named pipeline: report where it was named. */
  while (p->outer) {
    FzBuf wrapped;
    fzBufInit(&wrapped, p->ctx);
    fzBufPrintf(&wrapped, "in pipeline '%.*s' (at offset %zu of its text): "
                          "%s",
                (int)p->nameLen, p->name, pos, msg.data ? msg.data : "");
    fzBufFree(&msg);
    msg = wrapped;
    pos = p->refPos;
    p = p->outer;
  }
  unsigned line = 1, col = 1;
  for (size_t i = 0; i < pos && i < p->topText.length; ++i) {
    if (p->topText.data[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  FzLoc *loc = fzFileLineColLocGet(p->ctx, FZ_STR("<pipeline>"), line, col);
  fzEmitError(p->ctx, loc, "%s", msg.data ? msg.data : "invalid pipeline");
  fzBufFree(&msg);
  return false;
}

static FzStringRef lex_name(Parser *p) {
  const char *s = p->cur;
  while (p->cur < p->end && is_name_char(*p->cur))
    ++p->cur;
  FzStringRef r = {s, (size_t)(p->cur - s)};
  return r;
}

/* Describes the character at p->cur for error messages. */
static const char *describe(Parser *p, char *buf, size_t size) {
  if (p->cur >= p->end)
    return "the end of the pipeline";
  snprintf(buf, size, "'%c'", *p->cur);
  return buf;
}

/*===--- Suggestions ------------------------------------------------------===*/

static size_t edit_distance(FzStringRef a, const char *b) {
  size_t n = strlen(b);
  if (a.length > 64 || n > 64)
    return (size_t)-1;
  size_t row[65];
  for (size_t j = 0; j <= n; ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.length; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= n; ++j) {
      size_t up = row[j];
      size_t best = diag + (a.data[i - 1] != b[j - 1]);
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      if (up + 1 < best)
        best = up + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[n];
}

typedef struct Suggest {
  FzStringRef name;
  const char *best;
  size_t dist;
} Suggest;

static void suggest_pass(const FzPassDef *def, void *ud) {
  Suggest *s = ud;
  size_t d = edit_distance(s->name, def->argument);
  if (d < s->dist) {
    s->dist = d;
    s->best = def->argument;
  }
}

static void suggest_pipeline(const char *name, const char *summary,
                             const char *text, void *ud) {
  (void)summary;
  (void)text;
  Suggest *s = ud;
  size_t d = edit_distance(s->name, name);
  if (d < s->dist) {
    s->dist = d;
    s->best = name;
  }
}

/*===--- Options ----------------------------------------------------------===*/

/* value ::= quoted | '{' balanced '}' | bare. The unquoted text goes to
 * *out, built in buf. */
static bool lex_value(Parser *p, FzBuf *buf, FzStringRef *out) {
  const char *start = p->cur;
  if (p->cur < p->end && (*p->cur == '"' || *p->cur == '\'')) {
    char q = *p->cur++;
    while (p->cur < p->end && *p->cur != q) {
      if (*p->cur == '\\' && p->cur + 1 < p->end)
        ++p->cur;
      fzBufPutc(buf, *p->cur++);
    }
    if (p->cur >= p->end)
      return error_at(p, start, "unterminated string in option value");
    ++p->cur;
    *out = buf->data ? fzBufRef(buf) : (FzStringRef){"", 0};
    return true;
  }
  if (p->cur < p->end && *p->cur == '{') {
    int depth = 0;
    do {
      if (*p->cur == '{')
        ++depth;
      else if (*p->cur == '}')
        --depth;
      ++p->cur;
    } while (p->cur < p->end && depth > 0);
    if (depth > 0)
      return error_at(p, start, "unbalanced '{' in option value");
    out->data = start + 1;
    out->length = (size_t)(p->cur - start - 2);
    return true;
  }
  while (p->cur < p->end && !is_space(*p->cur) && *p->cur != '}')
    ++p->cur;
  out->data = start;
  out->length = (size_t)(p->cur - start);
  return true;
}

/* '{' (key ('=' value)?)* '}' for pass. */
static bool parse_options(Parser *p, FzPass *pass) {
  const char *open = p->cur++;
  const FzPassDef *def = pass->def;
  FzBuf err, val;
  fzBufInit(&err, p->ctx);
  fzBufInit(&val, p->ctx);
  bool ok = true;
  for (;;) {
    skip_ws(p);
    if (p->cur >= p->end) {
      ok = error_at(p, open, "missing '}' to close the options of pass '%s'",
                    def->argument);
      break;
    }
    if (*p->cur == '}') {
      ++p->cur;
      break;
    }
    const char *keyPos = p->cur;
    FzStringRef key = lex_name(p);
    if (key.length == 0) {
      char tmp[8];
      ok = error_at(p, keyPos, "expected an option name, found %s",
                    describe(p, tmp, sizeof tmp));
      break;
    }
    size_t index;
    const FzPassOptionDef *od = fzPassFindOption(def, key, &index);
    if (!od) {
      FzBuf names;
      fzBufInit(&names, p->ctx);
      for (size_t i = 0; i < def->numOptions; ++i)
        fzBufPrintf(&names, "%s'%s'", i ? ", " : "", def->options[i].name);
      if (def->numOptions)
        ok = error_at(p, keyPos,
                      "pass '%s' has no option '%.*s' (its options: %s)",
                      def->argument, (int)key.length, key.data,
                      names.data ? names.data : "");
      else
        ok = error_at(p, keyPos, "pass '%s' has no option '%.*s' (it takes "
                                 "no options)",
                      def->argument, (int)key.length, key.data);
      fzBufFree(&names);
      break;
    }
    FzStringRef value = FZ_STR("true");
    const char *valPos = p->cur;
    if (p->cur < p->end && *p->cur == '=') {
      valPos = ++p->cur;
      fzBufClear(&val);
      if (!(ok = lex_value(p, &val, &value)))
        break;
    } else if (od->kind != FZ_PASS_OPTION_BOOL) {
      ok = error_at(p, valPos, "option '%s' of pass '%s' needs a value "
                               "('%s=...')",
                    od->name, def->argument, od->name);
      break;
    }
    FzOptionValue v;
    fzBufClear(&err);
    if (!fzPassParseOptionValue(p->ctx, od, value, &v, &err)) {
      ok = error_at(p, valPos,
                    "invalid value '%.*s' for option '%s' of pass '%s': %s",
                    (int)value.length, value.data, od->name, def->argument,
                    err.data ? err.data : "");
      break;
    }
    fzPassStoreOption(pass, index, &v);
  }
  fzBufFree(&err);
  fzBufFree(&val);
  return ok;
}

/*===--- Elements ---------------------------------------------------------===*/

static bool parse_list(Parser *p, FzPassManager *pm, bool nested,
                       size_t *count);

static bool expand_named(Parser *p, FzPassManager *pm, FzStringRef name,
                         const char *at, FzStringRef text) {
  for (Parser *q = p; q; q = q->outer)
    if (q->name && q->nameLen == name.length &&
        memcmp(q->name, name.data, name.length) == 0)
      return error_at(p, at, "pipeline '%.*s' expands into itself",
                      (int)name.length, name.data);
  if (p->depth >= MAX_PIPELINE_NESTING)
    return error_at(p, at, "named pipelines nest too deeply");
  Parser sub = *p;
  sub.base = sub.cur = text.data;
  sub.end = text.data + text.length;
  sub.outer = p;
  sub.refPos = (size_t)(at - p->base);
  sub.name = name.data;
  sub.nameLen = name.length;
  sub.depth = p->depth + 1;
  size_t count;
  return parse_list(&sub, pm, false, &count);
}

static bool parse_element(Parser *p, FzPassManager *pm) {
  const char *at = p->cur;
  FzStringRef name = lex_name(p);
  char tmp[8];
  if (name.length == 0)
    return error_at(p, at, "expected a pass or pipeline name, found %s",
                    describe(p, tmp, sizeof tmp));
  const FzPassDef *def = fzContextLookupPass(p->ctx, name);
  skip_ws(p);
  if (p->cur < p->end && *p->cur == '(') {
    bool isAny = name.length == 3 && memcmp(name.data, "any", 3) == 0;
    if (def)
      return error_at(p, at, "'%.*s' is a pass, not an op name: pass "
                             "options go in '{...}'",
                      (int)name.length, name.data);
    if (!isAny && !memchr(name.data, '.', name.length))
      return error_at(p, at, "expected an op name ('dialect.op') or 'any' "
                             "before '(', found '%.*s'",
                      (int)name.length, name.data);
    /* An anchor that names no op could never run: `func.funk(cse)` would
     * do nothing and succeed. Ops of unregistered dialects are accepted
     * only where the context accepts such ops. */
    if (!isAny && !fzContextLookupOpDef(p->ctx, name)) {
      const char *dot = memchr(name.data, '.', name.length);
      FzStringRef dialect = {name.data, (size_t)(dot - name.data)};
      bool known = fzContextLookupDialect(p->ctx, dialect) != NULL;
      if (known || !fzContextGetAllowUnregisteredDialects(p->ctx))
        return error_at(p, at, "unknown op '%.*s' as a pass manager anchor "
                               "(%s): it would run on nothing",
                        (int)name.length, name.data,
                        known ? "its dialect has no such op"
                              : "its dialect is not registered");
    }
    /* Each level recurses (here, and when the manager runs, prints and
     * is destroyed): as deep as IR may nest, no deeper. */
    unsigned limit = fzContextGetMaxNesting(p->ctx);
    if (p->nesting >= limit)
      return error_at(p, at, "pass pipelines nest too deeply (limit %u)",
                      limit);
    const char *open = p->cur++;
    char *anchor = fzMalloc(p->ctx, name.length + 1);
    if (!anchor)
      return false;
    memcpy(anchor, name.data, name.length);
    anchor[name.length] = 0;
    FzPassManager *n = fzPassManagerNest(pm, anchor);
    fzFree(p->ctx, anchor);
    if (!n)
      return false;
    size_t count;
    p->nesting++;
    bool listOk = parse_list(p, n, true, &count);
    p->nesting--;
    if (!listOk)
      return false;
    skip_ws(p);
    if (p->cur >= p->end || *p->cur != ')')
      return error_at(p, p->cur < p->end ? p->cur : open,
                      p->cur < p->end ? "expected ',' or ')' in the pipeline "
                                        "of '%.*s'"
                                      : "missing ')' to close the pipeline "
                                        "of '%.*s'",
                      (int)name.length, name.data);
    ++p->cur;
    return true;
  }
  if (def) {
    if (!fzPassDefRunsOn(def, pm->anchor))
      return error_at(p, at, "pass '%s' runs on '%s' ops, not on '%s': nest "
                             "it as '%s(%s)'",
                      def->argument, def->anchor, fzPassManagerGetAnchor(pm),
                      def->anchor, def->argument);
    FzPass *pass = fzPassCreate(p->ctx, def);
    if (!pass)
      return false;
    if (p->cur < p->end && *p->cur == '{' && !parse_options(p, pass)) {
      fzPassDestroy(pass);
      return false;
    }
    FzPMEntry e = {pass, NULL};
    return fzPassManagerAppendEntry(pm, e);
  }
  FzStringRef text = fzContextLookupPassPipeline(p->ctx, name, NULL);
  if (text.data) {
    if (p->cur < p->end && *p->cur == '{')
      return error_at(p, p->cur, "pipeline '%.*s' takes no options",
                      (int)name.length, name.data);
    return expand_named(p, pm, name, at, text);
  }
  Suggest s = {name, NULL, (size_t)-1};
  fzContextForEachPass(p->ctx, suggest_pass, &s);
  fzContextForEachPassPipeline(p->ctx, suggest_pipeline, &s);
  size_t limit = name.length / 3 > 1 ? name.length / 3 : 1;
  if (s.best && s.dist <= limit)
    return error_at(p, at, "unknown pass or pipeline '%.*s'; did you mean "
                           "'%s'?",
                    (int)name.length, name.data, s.best);
  return error_at(p, at, "unknown pass or pipeline '%.*s' (see "
                         "--list-passes)",
                  (int)name.length, name.data);
}

/* element (',' element)*, possibly empty when nested. Stops before ')'
 * when nested, at the end of the text otherwise. */
static bool parse_list(Parser *p, FzPassManager *pm, bool nested,
                       size_t *count) {
  *count = 0;
  skip_ws(p);
  if (p->cur >= p->end || (nested && *p->cur == ')'))
    return true;
  for (;;) {
    if (!parse_element(p, pm))
      return false;
    ++*count;
    skip_ws(p);
    if (p->cur < p->end && *p->cur == ',') {
      ++p->cur;
      skip_ws(p);
      continue;
    }
    if (p->cur >= p->end || (nested && *p->cur == ')'))
      return true;
    char tmp[8];
    return error_at(p, p->cur, "expected ',' or the end of the pipeline, "
                               "found %s",
                    describe(p, tmp, sizeof tmp));
  }
}

bool fzPassManagerParsePipeline(FzPassManager *pm, FzStringRef text) {
  FzContext *ctx = pm->ctx;
  const char *buf =
      fzContextAddSourceBuffer(ctx, FZ_STR("<pipeline>"), text);
  if (!buf)
    return false;
  FzPassManager *tmp = fzPassManagerCreateInternal(ctx, pm->anchor, NULL);
  if (!tmp)
    return false;
  bool failed = false;
  Parser p;
  memset(&p, 0, sizeof p);
  p.ctx = ctx;
  p.base = p.cur = buf;
  p.end = buf + text.length;
  p.failed = &failed;
  p.topText = (FzStringRef){buf, text.length};
  size_t count;
  bool ok = parse_list(&p, tmp, false, &count);
  if (ok) {
    /* `ANCHOR(...)` naming pm's own anchor means pm itself, and so does
     * a lone `any(...)`, as in mlir-opt: `any` matches the op pm runs
     * on. */
    FzPassManager *src = tmp;
    if (count == 1 && tmp->num == 1 && tmp->entries[0].nested) {
      const char *a = fzPassManagerGetAnchor(tmp->entries[0].nested);
      if (strcmp(a, fzPassManagerGetAnchor(pm)) == 0 || strcmp(a, "any") == 0)
        src = tmp->entries[0].nested;
    }
    ok = fzPassManagerSpliceEntries(pm, src);
  }
  fzPassManagerDestroyInternal(tmp);
  return ok;
}

/*===--- Printing ---------------------------------------------------------===*/

static void print_entries(const FzPassManager *pm, FzPrintCallback cb,
                          void *ud) {
  for (size_t i = 0; i < pm->num; ++i) {
    if (i)
      cb(FZ_STR(","), ud);
    const FzPMEntry *e = &pm->entries[i];
    if (e->pass) {
      fzPassPrint(e->pass, cb, ud);
      continue;
    }
    cb(fzStringRefFromCString(fzPassManagerGetAnchor(e->nested)), ud);
    cb(FZ_STR("("), ud);
    print_entries(e->nested, cb, ud);
    cb(FZ_STR(")"), ud);
  }
}

void fzPassManagerPrintPipeline(const FzPassManager *pm, FzPrintCallback cb,
                                void *userData) {
  cb(fzStringRefFromCString(fzPassManagerGetAnchor(pm)), userData);
  cb(FZ_STR("("), userData);
  print_entries(pm, cb, userData);
  cb(FZ_STR(")"), userData);
}
