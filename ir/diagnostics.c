/* ir/diagnostics.c - errors, warnings, remarks and notes.
 *
 * A diagnostic is built (begin, attach notes), then reported: the
 * context's handlers are tried from the top of the stack down until one
 * claims it; unclaimed ones go to the default printer on stderr, which
 * shows `file:line:col: error: message`, the source line and a caret (or
 * `model.onnx: node: error: message` for a location without a line
 * inside a name, as an imported model's nodes have).
 * A diagnostic is heap-allocated while in flight and freed by
 * fzDiagReport. On allocation failure a static diagnostic is used, so
 * reporting never fails and never aborts.
 */
#include <stdio.h>

#include "ir/internal.h"


FzDiagnostic *fzDiagBeginV(FzContext *ctx, FzSeverity sev, FzLoc *loc,
                           const char *fmt, va_list ap) {
  if (!loc)
    loc = ctx->unknownLoc;
  FzDiagnostic *d = fzCalloc(ctx, 1, sizeof *d);
  if (!d) {
    /* The context's preallocated diagnostic: reporting never fails. */
    FzDiagnostic *o = &ctx->oomDiag;
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->severity = sev;
    o->loc = loc;
    o->message = (char *)"out of memory";
    o->messageLen = 13;
    o->isStatic = true;
    return o;
  }
  d->ctx = ctx;
  d->severity = sev;
  d->loc = loc;
  FzBuf b;
  fzBufInit(&b, ctx);
  fzBufVPrintf(&b, fmt, ap);
  if (b.failed || !b.data) {
    fzBufFree(&b);
    d->message = NULL;
  } else {
    d->message = b.data;
    d->messageLen = b.len;
  }
  return d;
}

FzDiagnostic *fzDiagBegin(FzContext *ctx, FzSeverity sev, FzLoc *loc,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(ctx, sev, loc, fmt, ap);
  va_end(ap);
  return d;
}

void fzDiagAttachNote(FzDiagnostic *diag, FzLoc *loc, const char *fmt, ...) {
  if (diag->isStatic)
    return;
  FzContext *ctx = diag->ctx;
  if (diag->numNotes == diag->capNotes) {
    size_t c = diag->capNotes ? diag->capNotes * 2 : 2;
    FzDiagnostic **n = fzRealloc(ctx, diag->notes, c * sizeof *n);
    if (!n)
      return;
    diag->notes = n;
    diag->capNotes = c;
  }
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *note = fzDiagBeginV(ctx, FZ_SEVERITY_NOTE, loc, fmt, ap);
  va_end(ap);
  if (note->isStatic)
    return;
  diag->notes[diag->numNotes++] = note;
}

static void diag_free(FzDiagnostic *d) {
  if (d->isStatic)
    return;
  for (size_t i = 0; i < d->numNotes; ++i)
    diag_free(d->notes[i]);
  fzFree(d->ctx, d->notes);
  fzFree(d->ctx, d->message);
  fzFree(d->ctx, d);
}

static void stderr_cb(FzStringRef chunk, void *ud) {
  fwrite(chunk.data, 1, chunk.length, (FILE *)ud);
}

void fzDiagReport(FzDiagnostic *diag) {
  FzContext *ctx = diag->ctx;
  if (diag->severity == FZ_SEVERITY_ERROR)
    ctx->numErrors++;
  bool handled = false;
  for (size_t i = ctx->numHandlers; i-- > 0 && !handled;) {
    FzDiagHandlerEntry e = ctx->handlers[i];
    handled = e.fn(diag, e.userData);
  }
  if (!handled) {
    fzDiagnosticPrint(diag, true, stderr_cb, stderr);
    fflush(stderr);
  }
  diag_free(diag);
}

FzDiagHandlerId fzContextPushDiagHandler(FzContext *ctx, FzDiagHandler fn,
                                         void *userData) {
  if (ctx->numHandlers == ctx->capHandlers) {
    size_t c = ctx->capHandlers ? ctx->capHandlers * 2 : 4;
    FzDiagHandlerEntry *h = fzRealloc(ctx, ctx->handlers, c * sizeof *h);
    if (!h)
      return 0;
    ctx->handlers = h;
    ctx->capHandlers = c;
  }
  FzDiagHandlerEntry e = {ctx->nextHandlerId++, fn, userData};
  ctx->handlers[ctx->numHandlers++] = e;
  return e.id;
}

void fzContextPopDiagHandler(FzContext *ctx, FzDiagHandlerId id) {
  for (size_t i = 0; i < ctx->numHandlers; ++i) {
    if (ctx->handlers[i].id == id) {
      memmove(&ctx->handlers[i], &ctx->handlers[i + 1],
              (ctx->numHandlers - i - 1) * sizeof ctx->handlers[0]);
      ctx->numHandlers--;
      return;
    }
  }
}

FzSeverity fzDiagnosticGetSeverity(const FzDiagnostic *d) {
  return d->severity;
}
FzLoc *fzDiagnosticGetLoc(const FzDiagnostic *d) { return d->loc; }
FzStringRef fzDiagnosticGetMessage(const FzDiagnostic *d) {
  FzStringRef r = {d->message ? d->message : "<message lost: out of memory>",
                   d->message ? d->messageLen : 29};
  return r;
}
size_t fzDiagnosticGetNumNotes(const FzDiagnostic *d) { return d->numNotes; }
const FzDiagnostic *fzDiagnosticGetNote(const FzDiagnostic *d, size_t i) {
  return i < d->numNotes ? d->notes[i] : NULL;
}

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

/* Appends the source line of a file:line:col location and a caret under
 * the column, when the file's buffer is known. */
static void append_source_line(FzBuf *b, const FzContext *ctx,
                               const FzLoc *flc) {
  const FzSourceBuffer *sb = fzContextFindSource(ctx, flc->u.flc.file);
  if (!sb || flc->u.flc.line == 0)
    return;
  const char *p = sb->data, *end = sb->data + sb->len;
  for (unsigned line = 1; line < flc->u.flc.line && p < end; ++p)
    if (*p == '\n')
      ++line;
  if (p >= end && flc->u.flc.line > 1)
    return;
  const char *eol = p;
  while (eol < end && *eol != '\n' && *eol != '\r')
    ++eol;
  size_t len = (size_t)(eol - p);
  if (len > 400)
    len = 400; /* a minified line: show its start only */
  /* Show the line with non-printable bytes replaced, so a diagnostic on
   * binary garbage stays readable and never emits control codes. */
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)p[i];
    fzBufPutc(b, (c == '\t' || (c >= 0x20 && c != 0x7f)) ? (char)c : '?');
  }
  fzBufPutc(b, '\n');
  unsigned col = flc->u.flc.col ? flc->u.flc.col : 1;
  for (unsigned i = 1; i < col && i <= len; ++i)
    fzBufPutc(b, p[i - 1] == '\t' ? '\t' : ' ');
  fzBufPuts(b, "^\n");
}

/* The first file:line:col inside loc, as fzLocFindFileLineCol finds it,
 * and in *name the innermost name location on the way to it (NULL when
 * none). */
static FzLoc *find_named_flc(FzLoc *loc, const FzLoc **name) {
  const FzLoc *innermost = NULL;
  while (loc) {
    switch (loc->kind) {
    case FZ_LOC_FILE_LINE_COL:
      *name = innermost;
      return loc;
    case FZ_LOC_NAME:
      innermost = loc;
      loc = loc->u.name.child;
      break;
    case FZ_LOC_CALLSITE: {
      FzLoc *r = find_named_flc(loc->u.callsite.callee, name);
      if (r) {
        *name = *name ? *name : innermost;
        return r;
      }
      loc = loc->u.callsite.caller;
      break;
    }
    case FZ_LOC_FUSED:
      for (size_t i = 0; i < loc->u.fused.n; ++i) {
        FzLoc *r = find_named_flc(loc->u.fused.locs[i], name);
        if (r) {
          *name = *name ? *name : innermost;
          return r;
        }
      }
      return NULL;
    case FZ_LOC_UNKNOWN:
      return NULL;
    }
  }
  return NULL;
}

/* Appends what fzLocPrintPosition prints; false when nothing. A file
 * location without a line (an imported model's nodes are at
 * "model.onnx":0:0) shows the name around it instead of ":0:0": the
 * name is all that tells the user where. */
static bool append_position(FzBuf *b, FzLoc *loc) {
  const FzLoc *name = NULL;
  FzLoc *flc = loc ? find_named_flc(loc, &name) : NULL;
  if (flc && flc->u.flc.line == 0 && name)
    fzBufPrintf(b, "%s: %s", flc->u.flc.file->str, name->u.name.name->str);
  else if (flc)
    fzBufPrintf(b, "%s:%u:%u", flc->u.flc.file->str, flc->u.flc.line,
                flc->u.flc.col);
  else if (loc && loc->kind == FZ_LOC_NAME)
    fzBufPuts(b, loc->u.name.name->str);
  else
    return false;
  return true;
}

bool fzLocPrintPosition(const FzLoc *loc, FzPrintCallback cb,
                        void *userData) {
  if (!loc)
    return false;
  FzBuf b;
  fzBufInit(&b, loc->ctx);
  bool any = append_position(&b, (FzLoc *)loc);
  if (any && !b.failed && b.data)
    cb(fzBufRef(&b), userData);
  fzBufFree(&b);
  return any;
}

static void print_one(FzBuf *b, const FzDiagnostic *d, bool showSource) {
  FzLoc *flc = d->loc ? fzLocFindFileLineCol(d->loc) : NULL;
  if (append_position(b, d->loc))
    fzBufPuts(b, ": ");
  fzBufPrintf(b, "%s: ", severity_name(d->severity));
  FzStringRef m = fzDiagnosticGetMessage(d);
  fzBufAppend(b, m.data, m.length);
  fzBufPutc(b, '\n');
  if (showSource && flc && d->ctx)
    append_source_line(b, d->ctx, flc);
}

void fzDiagnosticPrint(const FzDiagnostic *diag, bool showSource,
                       FzPrintCallback cb, void *userData) {
  FzContext *ctx = diag->ctx;
  FzBuf b;
  fzBufInit(&b, ctx);
  print_one(&b, diag, showSource);
  for (size_t i = 0; i < diag->numNotes; ++i)
    print_one(&b, diag->notes[i], showSource);
  if (b.failed || !b.data) {
    FzStringRef m = fzDiagnosticGetMessage(diag);
    cb(FZ_STR("error: "), userData);
    cb(m, userData);
    cb(FZ_STR("\n"), userData);
  } else {
    cb(fzBufRef(&b), userData);
  }
  fzBufFree(&b);
}

/*===--- One-shot helpers -----------------------------------------------===*/

bool fzEmitError(FzContext *ctx, FzLoc *loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(ctx, FZ_SEVERITY_ERROR, loc, fmt, ap);
  va_end(ap);
  fzDiagReport(d);
  return false;
}

void fzEmitWarning(FzContext *ctx, FzLoc *loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(ctx, FZ_SEVERITY_WARNING, loc, fmt, ap);
  va_end(ap);
  fzDiagReport(d);
}

void fzEmitRemark(FzContext *ctx, FzLoc *loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(ctx, FZ_SEVERITY_REMARK, loc, fmt, ap);
  va_end(ap);
  fzDiagReport(d);
}

static FzDiagnostic *op_diag_v(FzOp *op, FzSeverity sev, const char *fmt,
                               va_list ap) {
  FzContext *ctx = op->ctx;
  FzBuf b;
  fzBufInit(&b, ctx);
  fzBufPrintf(&b, "'%s' op ", op->name->str);
  fzBufVPrintf(&b, fmt, ap);
  FzDiagnostic *d = fzDiagBegin(ctx, sev, op->loc, "%s",
                                b.data ? b.data : "(out of memory)");
  fzBufFree(&b);
  return d;
}

bool fzOpEmitError(FzOp *op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = op_diag_v(op, FZ_SEVERITY_ERROR, fmt, ap);
  va_end(ap);
  fzDiagReport(d);
  return false;
}

FzDiagnostic *fzOpDiagBegin(FzOp *op, FzSeverity sev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = op_diag_v(op, sev, fmt, ap);
  va_end(ap);
  return d;
}
