/* tools/verify_diagnostics.c - fuse-opt's --verify-diagnostics.
 *
 * Matches the diagnostics of one chunk against its `expected-*` comments
 * with mlir-opt's rules:
 *  - an expectation line matches
 *      expected-(error|warning|remark|note)(-re)? *(@designator)? *{{TEXT}}
 *    where TEXT runs from that `{{` to the `}}` ending the line (trailing
 *    blanks ignored); designators are @+N, @-N, @above (the closest line
 *    above that holds no expectation), @below (the closest such line
 *    below) and @unknown (a diagnostic without a file location);
 *  - a diagnostic (and each of its notes) matches an expectation of the
 *    same severity on the same line whose TEXT occurs in its message; for
 *    the -re form TEXT is literal text with embedded {{regex}} parts (POSIX
 *    extended), searched anywhere in the message. One expectation may
 *    match several diagnostics.
 * Lines are those of the whole input file: the chunk's first line is
 * lineOffset + 1.
 *
 * Ownership: the verifier owns its expectation array, compiled regexes
 * and the copies of mismatch messages; the chunk text and file name are
 * borrowed. Mismatches are collected while the chunk runs and printed by
 * fzDiagVerifierFinish, so nothing is printed from inside a handler.
 */
#include "tools/verify_diagnostics.h"

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Expectation {
  FzSeverity severity;
  bool isRegex;
  bool unknownLoc; /* @unknown: expects a diagnostic with no file loc */
  bool matched;
  bool regexReady;      /* `re` holds a compiled regex to free */
  long line;            /* the line the diagnostic is expected on */
  unsigned commentLine; /* where `expected-` is written */
  unsigned commentCol;
  FzStringRef text; /* between the outer {{ and }}; into the chunk */
  regex_t re;
} Expectation;

/* One mismatch to print, in the order found. */
typedef struct Report {
  char *file; /* NULL: no location */
  unsigned line, col;
  bool inChunk; /* the location is in this chunk: show its source line */
  char *message;
} Report;

struct FzDiagVerifier {
  FzContext *ctx;
  FzDiagHandlerId handler;
  const char *fileName;
  FzStringRef text;
  unsigned lineOffset;
  unsigned numLines; /* lines of the chunk */
  FILE *err;
  Expectation *exps;
  size_t numExps, capExps;
  Report *reports;
  size_t numReports, capReports;
  bool outOfMemory;
};

static const char *severity_name(FzSeverity s) {
  switch (s) {
  case FZ_SEVERITY_ERROR:
    return "error";
  case FZ_SEVERITY_WARNING:
    return "warning";
  case FZ_SEVERITY_REMARK:
    return "remark";
  case FZ_SEVERITY_NOTE:
    return "note";
  }
  return "error";
}

/*===--- Reports ----------------------------------------------------------===*/

static char *str_dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Records a mismatch at file:line:col (file NULL: no location). */
static void add_report(FzDiagVerifier *v, const char *file, size_t fileLen,
                       unsigned line, unsigned col, const char *fmt, ...)
    FZ_PRINTF(6, 7);
static void add_report(FzDiagVerifier *v, const char *file, size_t fileLen,
                       unsigned line, unsigned col, const char *fmt, ...) {
  if (v->numReports == v->capReports) {
    size_t cap = v->capReports ? v->capReports * 2 : 8;
    Report *r = realloc(v->reports, cap * sizeof *r);
    if (!r) {
      v->outOfMemory = true;
      return;
    }
    v->reports = r;
    v->capReports = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
  char *f = file ? str_dup_n(file, fileLen) : NULL;
  if (!msg || (file && !f)) {
    free(msg);
    free(f);
    v->outOfMemory = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)n + 1, fmt, ap);
  va_end(ap);
  bool inChunk = file && strlen(v->fileName) == fileLen &&
                 memcmp(v->fileName, file, fileLen) == 0 &&
                 line > v->lineOffset && line - v->lineOffset <= v->numLines;
  v->reports[v->numReports++] = (Report){f, line, col, inChunk, msg};
}

/* Prints line `line` of the chunk and a caret under column `col`. */
static void print_source_line(const FzDiagVerifier *v, unsigned line,
                              unsigned col) {
  const char *p = v->text.data, *end = p + v->text.length;
  for (unsigned l = v->lineOffset + 1; l < line && p < end; ++p)
    if (*p == '\n')
      ++l;
  const char *eol = p;
  while (eol < end && *eol != '\n' && *eol != '\r')
    ++eol;
  size_t len = (size_t)(eol - p);
  if (len > 400)
    len = 400;
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)p[i];
    fputc((c == '\t' || (c >= 0x20 && c != 0x7f)) ? c : '?', v->err);
  }
  fputc('\n', v->err);
  for (unsigned i = 1; i < col && i <= len; ++i)
    fputc(p[i - 1] == '\t' ? '\t' : ' ', v->err);
  fputs("^\n", v->err);
}

static void print_report(const FzDiagVerifier *v, const Report *r) {
  if (r->file)
    fprintf(v->err, "%s:%u:%u: error: %s\n", r->file, r->line, r->col,
            r->message);
  else
    fprintf(v->err, "<unknown>: error: %s\n", r->message);
  if (r->inChunk)
    print_source_line(v, r->line, r->col);
}

/*===--- Scanning expectations -------------------------------------------===*/

static bool starts_with(const char *p, const char *end, const char *s) {
  size_t n = strlen(s);
  return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* Tries to read an expectation starting at `p` (which points at
 * "expected-") in the line [p, end) whose trailing blanks are trimmed.
 * `designator` receives the text after '@' (empty when absent). */
static bool parse_expectation(const char *p, const char *end, Expectation *e,
                              FzStringRef *designator) {
  static const struct {
    const char *word;
    FzSeverity sev;
  } kinds[] = {{"expected-error", FZ_SEVERITY_ERROR},
               {"expected-warning", FZ_SEVERITY_WARNING},
               {"expected-remark", FZ_SEVERITY_REMARK},
               {"expected-note", FZ_SEVERITY_NOTE}};
  size_t k = 0;
  while (k < 4 && !starts_with(p, end, kinds[k].word))
    ++k;
  if (k == 4)
    return false;
  memset(e, 0, sizeof *e);
  e->severity = kinds[k].sev;
  p += strlen(kinds[k].word);
  if (starts_with(p, end, "-re")) {
    e->isRegex = true;
    p += 3;
  }
  while (p < end && *p == ' ')
    ++p;
  *designator = (FzStringRef){p, 0};
  if (p < end && *p == '@') {
    const char *d = ++p;
    if (p < end && (*p == '+' || *p == '-')) {
      ++p;
      const char *digits = p;
      while (p < end && *p >= '0' && *p <= '9')
        ++p;
      if (p == digits)
        return false;
    } else if (starts_with(p, end, "above") || starts_with(p, end, "below")) {
      p += 5;
    } else if (starts_with(p, end, "unknown")) {
      p += 7;
    } else {
      return false;
    }
    *designator = (FzStringRef){d, (size_t)(p - d)};
    while (p < end && *p == ' ')
      ++p;
  }
  /* "{{" ... "}}" where the "}}" ends the (trimmed) line. */
  if (!starts_with(p, end, "{{") || end - p < 4 || end[-1] != '}' ||
      end[-2] != '}')
    return false;
  e->text = (FzStringRef){p + 2, (size_t)(end - 2 - (p + 2))};
  return true;
}

/* Escapes the POSIX ERE metacharacters of [s, s+n) into buf. */
static void append_escaped(char *buf, size_t *len, const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (strchr(".[]{}()\\*+?^$|", s[i]) && s[i] != '\0')
      buf[(*len)++] = '\\';
    buf[(*len)++] = s[i];
  }
}

/* Compiles the -re text "lit{{re}}lit..." into e->re. Records a report
 * and returns false when it is malformed. */
static bool compile_regex(FzDiagVerifier *v, Expectation *e) {
  const char *s = e->text.data, *end = s + e->text.length;
  /* Each byte becomes at most two, plus "()" per regex part. */
  char *pattern = malloc(e->text.length * 2 + 1);
  if (!pattern) {
    v->outOfMemory = true;
    return false;
  }
  size_t len = 0;
  while (s < end) {
    const char *open = s;
    while (open < end && !starts_with(open, end, "{{"))
      ++open;
    append_escaped(pattern, &len, s, (size_t)(open - s));
    if (open == end)
      break;
    const char *body = open + 2, *close = body;
    while (close < end && !starts_with(close, end, "}}"))
      ++close;
    if (close == end) {
      free(pattern);
      add_report(v, v->fileName, strlen(v->fileName), e->commentLine,
                 e->commentCol, "found start of regex with no end '}}'");
      return false;
    }
    pattern[len++] = '(';
    memcpy(pattern + len, body, (size_t)(close - body));
    len += (size_t)(close - body);
    pattern[len++] = ')';
    s = close + 2;
  }
  pattern[len] = '\0';
  int rc = regcomp(&e->re, pattern, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[256];
    regerror(rc, &e->re, why, sizeof why);
    add_report(v, v->fileName, strlen(v->fileName), e->commentLine,
               e->commentCol, "invalid regex '%s': %s", pattern, why);
    free(pattern);
    return false;
  }
  free(pattern);
  e->regexReady = true;
  return true;
}

static bool push_expectation(FzDiagVerifier *v, const Expectation *e) {
  if (v->numExps == v->capExps) {
    size_t cap = v->capExps ? v->capExps * 2 : 16;
    Expectation *x = realloc(v->exps, cap * sizeof *x);
    if (!x) {
      v->outOfMemory = true;
      return false;
    }
    v->exps = x;
    v->capExps = cap;
  }
  v->exps[v->numExps++] = *e;
  return true;
}

/* Scans every line of the chunk; resolves the designators. */
static void scan_expectations(FzDiagVerifier *v) {
  if (v->text.length == 0)
    return;
  const char *p = v->text.data, *end = p + v->text.length;
  long lastPlain = v->lineOffset + 1; /* last line without expectation */
  size_t firstPendingBelow = 0, numPendingBelow = 0;
  size_t *pendingBelow = NULL; /* indices of @below expectations */
  unsigned line = v->lineOffset;
  for (;;) {
    ++line;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      eol = end;
    const char *trim = eol;
    while (trim > p &&
           (trim[-1] == ' ' || trim[-1] == '\t' || trim[-1] == '\r'))
      --trim;
    bool found = false;
    Expectation e;
    FzStringRef designator;
    for (const char *q = p; q + 9 <= trim && !found; ++q)
      if (memcmp(q, "expected-", 9) == 0 &&
          parse_expectation(q, trim, &e, &designator)) {
        found = true;
        e.commentLine = line;
        e.commentCol = (unsigned)(q - p) + 1;
      }
    if (!found) {
      for (size_t i = firstPendingBelow; i < numPendingBelow; ++i)
        v->exps[pendingBelow[i]].line = line;
      firstPendingBelow = numPendingBelow;
      lastPlain = line;
    } else {
      e.line = line;
      FzStringRef d = designator;
      if (d.length && (d.data[0] == '+' || d.data[0] == '-')) {
        long n = 0; /* saturates: a huge offset just never matches */
        for (size_t i = 1; i < d.length && n < 1000000000L; ++i)
          n = n * 10 + (d.data[i] - '0');
        e.line = d.data[0] == '+' ? (long)line + n : (long)line - n;
      } else if (d.length && d.data[0] == 'a') {
        e.line = lastPlain;
      } else if (d.length && d.data[0] == 'b') {
        /* Until a plain line follows, a dangling @below never matches. */
        e.line = (long)v->lineOffset + (long)v->numLines + 1;
      } else if (d.length && d.data[0] == 'u') {
        e.unknownLoc = true;
        e.line = 0;
      }
      bool isBelow = d.length && d.data[0] == 'b';
      if (e.line < 1 && !e.unknownLoc) {
        add_report(v, v->fileName, strlen(v->fileName), e.commentLine,
                   e.commentCol,
                   "expected %s refers to line %ld, before "
                   "the start of the file",
                   severity_name(e.severity), e.line);
      } else if (!e.isRegex || compile_regex(v, &e)) {
        size_t *pb = NULL;
        if (isBelow) {
          pb = realloc(pendingBelow, (numPendingBelow + 1) * sizeof *pb);
          if (pb)
            pendingBelow = pb;
        }
        if ((isBelow && !pb) || !push_expectation(v, &e)) {
          v->outOfMemory = true;
          if (e.regexReady)
            regfree(&e.re);
          break;
        }
        if (isBelow)
          pendingBelow[numPendingBelow++] = v->numExps - 1;
      }
    }
    if (eol == end || eol + 1 == end)
      break;
    p = eol + 1;
  }
  free(pendingBelow);
}

/*===--- Matching ---------------------------------------------------------===*/

static bool contains(FzStringRef hay, FzStringRef needle) {
  if (needle.length == 0)
    return true;
  for (size_t i = 0; i + needle.length <= hay.length; ++i)
    if (memcmp(hay.data + i, needle.data, needle.length) == 0)
      return true;
  return false;
}

static bool exp_matches(FzDiagVerifier *v, const Expectation *e,
                        FzStringRef msg) {
  if (!e->isRegex)
    return contains(msg, e->text);
  char *z = str_dup_n(msg.data, msg.length);
  if (!z) {
    v->outOfMemory = true;
    return false;
  }
  bool m = regexec(&e->re, z, 0, NULL, 0) == 0;
  free(z);
  return m;
}

/* Matches one diagnostic (not its notes) against the expectations. */
static void process_one(FzDiagVerifier *v, const FzDiagnostic *d) {
  FzSeverity sev = fzDiagnosticGetSeverity(d);
  FzStringRef msg = fzDiagnosticGetMessage(d);
  FzLoc *loc = fzDiagnosticGetLoc(d);
  FzLoc *flc = loc ? fzLocFindFileLineCol(loc) : NULL;
  FzStringRef file = flc ? fzLocGetFile(flc) : (FzStringRef){NULL, 0};
  unsigned line = flc ? fzLocGetLine(flc) : 0;
  unsigned col = flc ? fzLocGetColumn(flc) : 0;
  bool inInput =
      flc && fzStringRefEqual(file, fzStringRefFromCString(v->fileName));
  if (!flc || inInput) {
    Expectation *nearMiss = NULL;
    for (size_t i = 0; i < v->numExps; ++i) {
      Expectation *e = &v->exps[i];
      bool sameLine =
          flc ? !e->unknownLoc && e->line == (long)line : e->unknownLoc;
      if (!sameLine || !exp_matches(v, e, msg))
        continue;
      if (e->severity == sev) {
        e->matched = true;
        return;
      }
      nearMiss = e;
    }
    if (nearMiss) {
      add_report(v, v->fileName, strlen(v->fileName), nearMiss->commentLine,
                 nearMiss->commentCol,
                 "'%s' diagnostic emitted when expecting a '%s'",
                 severity_name(sev), severity_name(nearMiss->severity));
      return;
    }
  }
  add_report(v, file.data, file.length, line, col, "unexpected %s: %.*s",
             severity_name(sev), (int)msg.length, msg.data);
}

static bool handle_diag(const FzDiagnostic *d, void *userData) {
  FzDiagVerifier *v = userData;
  process_one(v, d);
  for (size_t i = 0, n = fzDiagnosticGetNumNotes(d); i < n; ++i)
    process_one(v, fzDiagnosticGetNote(d, i));
  return true; /* claimed: the default printer stays silent */
}

/*===--- Entry points -----------------------------------------------------===*/

FzDiagVerifier *fzDiagVerifierBegin(FzContext *ctx, const char *fileName,
                                    FzStringRef text, unsigned lineOffset,
                                    FILE *err) {
  FzDiagVerifier *v = calloc(1, sizeof *v);
  if (!v) {
    fprintf(err, "fuse-opt: error: out of memory\n");
    return NULL;
  }
  v->ctx = ctx;
  v->fileName = fileName;
  v->text = text;
  v->lineOffset = lineOffset;
  v->err = err;
  v->numLines = 1;
  for (size_t i = 0; i < text.length; ++i)
    if (text.data[i] == '\n' && i + 1 < text.length)
      ++v->numLines;
  scan_expectations(v);
  v->handler = fzContextPushDiagHandler(ctx, handle_diag, v);
  if (v->handler == 0)
    v->outOfMemory = true;
  return v;
}

bool fzDiagVerifierFinish(FzDiagVerifier *v) {
  if (v->handler)
    fzContextPopDiagHandler(v->ctx, v->handler);
  bool ok = !v->outOfMemory && v->numReports == 0;
  for (size_t i = 0; i < v->numReports; ++i)
    print_report(v, &v->reports[i]);
  for (size_t i = 0; i < v->numExps; ++i) {
    Expectation *e = &v->exps[i];
    if (!e->matched) {
      fprintf(v->err,
              "%s:%u:%u: error: expected %s \"%.*s\" was not "
              "produced\n",
              v->fileName, e->commentLine, e->commentCol,
              severity_name(e->severity), (int)e->text.length, e->text.data);
      print_source_line(v, e->commentLine, e->commentCol);
      ok = false;
    }
    if (e->regexReady)
      regfree(&e->re);
  }
  if (v->outOfMemory)
    fprintf(v->err, "fuse-opt: error: out of memory while verifying "
                    "diagnostics\n");
  for (size_t i = 0; i < v->numReports; ++i) {
    free(v->reports[i].file);
    free(v->reports[i].message);
  }
  free(v->reports);
  free(v->exps);
  free(v);
  return ok;
}

/*===--- --test-emit-diagnostics -----------------------------------------===*/

static FzWalkResult emit_test_diag(FzOp *op, void *userData) {
  bool *hadError = userData;
  FzAttr *diag = fzOpGetAttr(op, FZ_STR("test.diag"));
  if (!diag || fzAttrGetKind(diag) != FZ_ATTR_STRING)
    return FZ_WALK_ADVANCE;
  FzStringRef text = fzStringAttrGetValue(diag);
  static const struct {
    const char *prefix;
    FzSeverity sev;
  } kinds[] = {{"error: ", FZ_SEVERITY_ERROR},
               {"warning: ", FZ_SEVERITY_WARNING},
               {"remark: ", FZ_SEVERITY_REMARK}};
  FzSeverity sev = FZ_SEVERITY_ERROR;
  for (size_t i = 0; i < 3; ++i) {
    if (starts_with(text.data, text.data + text.length, kinds[i].prefix)) {
      sev = kinds[i].sev;
      text.data += strlen(kinds[i].prefix);
      text.length -= strlen(kinds[i].prefix);
      break;
    }
  }
  FzDiagnostic *d = fzDiagBegin(fzOpGetContext(op), sev, fzOpGetLoc(op), "%.*s",
                                (int)text.length, text.data);
  FzAttr *note = fzOpGetAttr(op, FZ_STR("test.note"));
  if (note && fzAttrGetKind(note) == FZ_ATTR_STRING) {
    FzLoc *at = fzOpGetLoc(op);
    FzOp *def = fzOpGetNumOperands(op)
                    ? fzValueGetDefiningOp(fzOpGetOperand(op, 0))
                    : NULL;
    if (def)
      at = fzOpGetLoc(def);
    FzStringRef n = fzStringAttrGetValue(note);
    fzDiagAttachNote(d, at, "%.*s", (int)n.length, n.data);
  }
  fzDiagReport(d);
  if (sev == FZ_SEVERITY_ERROR)
    *hadError = true;
  return FZ_WALK_ADVANCE;
}

bool fzTestEmitDiagnostics(FzOp *root) {
  bool hadError = false;
  (void)fzOpWalk(root, FZ_WALK_PRE_ORDER, emit_test_diag, &hadError);
  return !hadError;
}
