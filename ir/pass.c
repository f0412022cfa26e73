/* ir/pass.c - pass instances (options, statistics, state) and the
 * per-context registry of passes and named pipelines.
 *
 * A pass instance holds one FzOptionValue per option of its definition,
 * always valid: defaults are parsed at creation and every later value is
 * parsed and checked before it replaces the old one. String values are
 * heap copies owned by the instance.
 *
 * The registry lives in a context extension (see fzContextSetExtension)
 * keyed by the address of kRegistryKey: no global state. It holds
 * pointers to pass definitions (static tables owned by their definers)
 * and copies of named pipelines' strings.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ir/pass_internal.h"

/*===--- Option values ----------------------------------------------------===*/

const FzPassOptionDef *fzPassFindOption(const FzPassDef *def,
                                        FzStringRef name, size_t *index) {
  for (size_t i = 0; i < def->numOptions; ++i) {
    const char *n = def->options[i].name;
    if (strlen(n) == name.length && memcmp(n, name.data, name.length) == 0) {
      if (index)
        *index = i;
      return &def->options[i];
    }
  }
  return NULL;
}

static bool text_equals(FzStringRef s, const char *lit) {
  return strlen(lit) == s.length && memcmp(lit, s.data, s.length) == 0;
}

bool fzPassParseOptionValue(FzContext *ctx, const FzPassOptionDef *od,
                            FzStringRef value, FzOptionValue *out,
                            FzBuf *err) {
  memset(out, 0, sizeof *out);
  char tmp[128];
  switch (od->kind) {
  case FZ_PASS_OPTION_BOOL:
    if (text_equals(value, "true") || text_equals(value, "1")) {
      out->b = true;
      return true;
    }
    if (text_equals(value, "false") || text_equals(value, "0"))
      return true;
    fzBufPuts(err, "expected 'true' or 'false'");
    return false;
  case FZ_PASS_OPTION_INT:
  case FZ_PASS_OPTION_FLOAT: {
    if (value.length == 0 || value.length >= sizeof tmp) {
      fzBufPuts(err, od->kind == FZ_PASS_OPTION_INT ? "expected an integer"
                                                    : "expected a number");
      return false;
    }
    memcpy(tmp, value.data, value.length);
    tmp[value.length] = 0;
    char *end;
    errno = 0;
    if (od->kind == FZ_PASS_OPTION_FLOAT) {
      out->f = strtod(tmp, &end);
      if (*end || errno || isnan(out->f)) {
        fzBufPuts(err, "expected a number");
        return false;
      }
      return true;
    }
    long long v = strtoll(tmp, &end, 10);
    if (*end || errno || tmp[0] == ' ' || tmp[0] == '+') {
      fzBufPuts(err, "expected an integer");
      return false;
    }
    if ((od->minValue || od->maxValue) &&
        (v < od->minValue || v > od->maxValue)) {
      fzBufPrintf(err, "expected an integer in [%lld, %lld]",
                  (long long)od->minValue, (long long)od->maxValue);
      return false;
    }
    out->i = v;
    return true;
  }
  case FZ_PASS_OPTION_STRING:
    if (od->choices) {
      bool found = false;
      for (const char *const *c = od->choices; *c && !found; ++c)
        found = text_equals(value, *c);
      if (!found) {
        fzBufPuts(err, "expected one of");
        for (const char *const *c = od->choices; *c; ++c)
          fzBufPrintf(err, "%s '%s'", c == od->choices ? "" : ",", *c);
        return false;
      }
    }
    out->s = fzMalloc(ctx, value.length + 1);
    if (!out->s) {
      fzBufPuts(err, "out of memory");
      return false;
    }
    if (value.length)
      memcpy(out->s, value.data, value.length);
    out->s[value.length] = 0;
    out->slen = value.length;
    return true;
  }
  fzBufPuts(err, "unknown option kind");
  return false;
}

void fzPassStoreOption(FzPass *pass, size_t index, FzOptionValue *v) {
  fzFree(pass->ctx, pass->options[index].s);
  pass->options[index] = *v;
  v->s = NULL;
}

/*===--- Pass instances ---------------------------------------------------===*/

FzPass *fzPassCreate(FzContext *ctx, const FzPassDef *def) {
  if (!def || !def->argument || !def->run) {
    fzEmitError(ctx, NULL, "invalid pass definition '%s'",
                def && def->argument ? def->argument : "<unnamed>");
    return NULL;
  }
  FzPass *p = fzCalloc(ctx, 1, sizeof *p);
  if (!p)
    return NULL;
  p->ctx = ctx;
  p->def = def;
  if (def->numOptions) {
    p->options = fzCalloc(ctx, def->numOptions, sizeof *p->options);
    if (!p->options) {
      fzPassDestroy(p);
      return NULL;
    }
  }
  if (def->numStatistics) {
    p->stats = fzCalloc(ctx, def->numStatistics, sizeof *p->stats);
    if (!p->stats) {
      fzPassDestroy(p);
      return NULL;
    }
  }
  FzBuf err;
  fzBufInit(&err, ctx);
  for (size_t i = 0; i < def->numOptions; ++i) {
    const FzPassOptionDef *od = &def->options[i];
    const char *dv = od->defaultValue;
    if (!dv)
      dv = od->kind == FZ_PASS_OPTION_STRING ? "" : "0";
    if (!dv[0] && od->kind == FZ_PASS_OPTION_BOOL)
      dv = "false";
    FzOptionValue v;
    /* An empty string default is fine even with choices. */
    if (od->kind == FZ_PASS_OPTION_STRING && !dv[0]) {
      memset(&v, 0, sizeof v);
    } else if (!fzPassParseOptionValue(ctx, od, fzStringRefFromCString(dv),
                                       &v, &err)) {
      fzEmitError(ctx, NULL,
                  "invalid default value '%s' for option '%s' of pass "
                  "'%s': %s",
                  dv, od->name, def->argument, err.data ? err.data : "");
      fzBufFree(&err);
      fzPassDestroy(p);
      return NULL;
    }
    fzPassStoreOption(p, i, &v);
  }
  fzBufFree(&err);
  return p;
}

void fzPassDestroy(FzPass *pass) {
  if (!pass)
    return;
  if (pass->def->destroy)
    pass->def->destroy(pass);
  for (size_t i = 0; pass->options && i < pass->def->numOptions; ++i)
    fzFree(pass->ctx, pass->options[i].s);
  fzFree(pass->ctx, pass->options);
  fzFree(pass->ctx, pass->stats);
  fzFree(pass->ctx, pass);
}

const FzPassDef *fzPassGetDef(const FzPass *pass) { return pass->def; }
FzContext *fzPassGetContext(const FzPass *pass) { return pass->ctx; }
void *fzPassGetState(const FzPass *pass) { return pass->state; }
void fzPassSetState(FzPass *pass, void *state) { pass->state = state; }

bool fzPassSetOption(FzPass *pass, FzStringRef name, FzStringRef value) {
  size_t index;
  const FzPassOptionDef *od = fzPassFindOption(pass->def, name, &index);
  if (!od)
    return fzEmitError(pass->ctx, NULL, "pass '%s' has no option '%.*s'",
                       pass->def->argument, (int)name.length, name.data);
  FzBuf err;
  fzBufInit(&err, pass->ctx);
  FzOptionValue v;
  bool ok = fzPassParseOptionValue(pass->ctx, od, value, &v, &err);
  if (ok)
    fzPassStoreOption(pass, index, &v);
  else
    fzEmitError(pass->ctx, NULL,
                "invalid value '%.*s' for option '%s' of pass '%s': %s",
                (int)value.length, value.data, od->name, pass->def->argument,
                err.data ? err.data : "");
  fzBufFree(&err);
  return ok;
}

static const FzOptionValue *option_of_kind(const FzPass *pass,
                                           const char *name,
                                           FzPassOptionKind kind) {
  size_t index;
  const FzPassOptionDef *od =
      fzPassFindOption(pass->def, fzStringRefFromCString(name), &index);
  return od && od->kind == kind ? &pass->options[index] : NULL;
}

bool fzPassGetBoolOption(const FzPass *pass, const char *name) {
  const FzOptionValue *v = option_of_kind(pass, name, FZ_PASS_OPTION_BOOL);
  return v ? v->b : false;
}

int64_t fzPassGetIntOption(const FzPass *pass, const char *name) {
  const FzOptionValue *v = option_of_kind(pass, name, FZ_PASS_OPTION_INT);
  return v ? v->i : 0;
}

double fzPassGetFloatOption(const FzPass *pass, const char *name) {
  const FzOptionValue *v = option_of_kind(pass, name, FZ_PASS_OPTION_FLOAT);
  return v ? v->f : 0.0;
}

FzStringRef fzPassGetStringOption(const FzPass *pass, const char *name) {
  const FzOptionValue *v = option_of_kind(pass, name, FZ_PASS_OPTION_STRING);
  FzStringRef r = {"", 0};
  if (v && v->s) {
    r.data = v->s;
    r.length = v->slen;
  }
  return r;
}

/* Whether a string value must be quoted to be read back. */
static bool needs_quotes(const char *s, size_t n) {
  if (n == 0)
    return true;
  for (size_t i = 0; i < n; ++i)
    if (strchr(" \t\r\n{}\"'=,()", s[i]))
      return true;
  return false;
}

void fzPassPrint(const FzPass *pass, FzPrintCallback cb, void *userData) {
  FzBuf b;
  fzBufInit(&b, pass->ctx);
  fzBufPuts(&b, pass->def->argument);
  for (size_t i = 0; i < pass->def->numOptions; ++i) {
    const FzPassOptionDef *od = &pass->def->options[i];
    const FzOptionValue *v = &pass->options[i];
    fzBufPuts(&b, i == 0 ? "{" : " ");
    fzBufPrintf(&b, "%s=", od->name);
    switch (od->kind) {
    case FZ_PASS_OPTION_BOOL:
      fzBufPuts(&b, v->b ? "true" : "false");
      break;
    case FZ_PASS_OPTION_INT:
      fzBufPrintf(&b, "%lld", (long long)v->i);
      break;
    case FZ_PASS_OPTION_FLOAT: {
      char tmp[40];
      snprintf(tmp, sizeof tmp, "%.15g", v->f);
      if (strtod(tmp, NULL) != v->f)
        snprintf(tmp, sizeof tmp, "%.17g", v->f);
      fzBufPuts(&b, tmp);
      break;
    }
    case FZ_PASS_OPTION_STRING: {
      const char *s = v->s ? v->s : "";
      if (!needs_quotes(s, v->slen)) {
        fzBufAppend(&b, s, v->slen);
        break;
      }
      fzBufPutc(&b, '"');
      for (size_t k = 0; k < v->slen; ++k) {
        if (s[k] == '"' || s[k] == '\\')
          fzBufPutc(&b, '\\');
        fzBufPutc(&b, s[k]);
      }
      fzBufPutc(&b, '"');
      break;
    }
    }
  }
  if (pass->def->numOptions)
    fzBufPutc(&b, '}');
  if (b.data)
    cb(fzBufRef(&b), userData);
  fzBufFree(&b);
}

void fzPassAddStatistic(FzPass *pass, size_t index, uint64_t amount) {
  if (index < pass->def->numStatistics)
    pass->stats[index] += amount;
}

uint64_t fzPassGetStatistic(const FzPass *pass, size_t index) {
  return index < pass->def->numStatistics ? pass->stats[index] : 0;
}

/*===--- Registry ---------------------------------------------------------===*/

typedef struct NamedPipeline {
  char *name, *summary, *text;
} NamedPipeline;

typedef struct PassRegistry {
  const FzPassDef **passes;
  size_t numPasses, capPasses;
  NamedPipeline *pipelines;
  size_t numPipelines, capPipelines;
} PassRegistry;

static const char kRegistryKey = 0;

static void registry_destroy(FzContext *ctx, void *value) {
  PassRegistry *r = value;
  for (size_t i = 0; i < r->numPipelines; ++i) {
    fzFree(ctx, r->pipelines[i].name);
    fzFree(ctx, r->pipelines[i].summary);
    fzFree(ctx, r->pipelines[i].text);
  }
  fzFree(ctx, r->pipelines);
  fzFree(ctx, r->passes);
  fzFree(ctx, r);
}

static PassRegistry *registry_get(const FzContext *ctx) {
  return fzContextGetExtension(ctx, &kRegistryKey);
}

static PassRegistry *registry_get_or_create(FzContext *ctx) {
  PassRegistry *r = registry_get(ctx);
  if (r)
    return r;
  r = fzCalloc(ctx, 1, sizeof *r);
  if (!r)
    return NULL;
  if (!fzContextSetExtension(ctx, &kRegistryKey, r, registry_destroy)) {
    fzFree(ctx, r);
    return NULL;
  }
  return r;
}

static const NamedPipeline *find_pipeline(const PassRegistry *r,
                                          FzStringRef name) {
  for (size_t i = 0; r && i < r->numPipelines; ++i)
    if (text_equals(name, r->pipelines[i].name))
      return &r->pipelines[i];
  return NULL;
}

const FzPassDef *fzContextLookupPass(const FzContext *ctx,
                                     FzStringRef argument) {
  const PassRegistry *r = registry_get(ctx);
  for (size_t i = 0; r && i < r->numPasses; ++i)
    if (text_equals(argument, r->passes[i]->argument))
      return r->passes[i];
  return NULL;
}

/* Pass and pipeline names: [A-Za-z0-9_.-]+, not starting with '-'. */
static bool valid_name(const char *s) {
  if (!s || !*s || *s == '-')
    return false;
  for (; *s; ++s)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
      return false;
  return true;
}

bool fzContextRegisterPass(FzContext *ctx, const FzPassDef *def) {
  if (!def || !valid_name(def->argument) || !def->run)
    return fzEmitError(ctx, NULL,
                       "cannot register pass '%s': it needs a name of "
                       "letters, digits, '_', '-', '.' and a run hook",
                       def && def->argument ? def->argument : "");
  FzStringRef name = fzStringRefFromCString(def->argument);
  const FzPassDef *old = fzContextLookupPass(ctx, name);
  if (old == def)
    return true;
  if (old || find_pipeline(registry_get(ctx), name))
    return fzEmitError(ctx, NULL, "pass '%s' is already registered",
                       def->argument);
  PassRegistry *r = registry_get_or_create(ctx);
  if (!r)
    return false;
  if (r->numPasses == r->capPasses) {
    size_t cap = r->capPasses ? r->capPasses * 2 : 16;
    const FzPassDef **p = fzRealloc(ctx, r->passes, cap * sizeof *p);
    if (!p)
      return false;
    r->passes = p;
    r->capPasses = cap;
  }
  r->passes[r->numPasses++] = def;
  return true;
}

static int compare_defs(const void *a, const void *b) {
  return strcmp((*(const FzPassDef *const *)a)->argument,
                (*(const FzPassDef *const *)b)->argument);
}

void fzContextForEachPass(const FzContext *ctx,
                          void (*fn)(const FzPassDef *def, void *ud),
                          void *ud) {
  const PassRegistry *r = registry_get(ctx);
  if (!r || !r->numPasses)
    return;
  FzContext *mctx = (FzContext *)ctx;
  const FzPassDef **sorted = fzMalloc(mctx, r->numPasses * sizeof *sorted);
  if (!sorted)
    return;
  memcpy(sorted, r->passes, r->numPasses * sizeof *sorted);
  qsort(sorted, r->numPasses, sizeof *sorted, compare_defs);
  for (size_t i = 0; i < r->numPasses; ++i)
    fn(sorted[i], ud);
  fzFree(mctx, sorted);
}

bool fzContextRegisterPassPipeline(FzContext *ctx, const char *name,
                                   const char *summary,
                                   const char *pipeline) {
  if (!valid_name(name) || !pipeline)
    return fzEmitError(ctx, NULL, "cannot register pipeline '%s': invalid "
                                  "name or no pipeline text",
                       name ? name : "");
  FzStringRef n = fzStringRefFromCString(name);
  const NamedPipeline *old = find_pipeline(registry_get(ctx), n);
  if (old && strcmp(old->text, pipeline) == 0)
    return true;
  if (old || fzContextLookupPass(ctx, n))
    return fzEmitError(ctx, NULL, "pass or pipeline '%s' is already "
                                  "registered",
                       name);
  PassRegistry *r = registry_get_or_create(ctx);
  if (!r)
    return false;
  if (r->numPipelines == r->capPipelines) {
    size_t cap = r->capPipelines ? r->capPipelines * 2 : 8;
    NamedPipeline *p = fzRealloc(ctx, r->pipelines, cap * sizeof *p);
    if (!p)
      return false;
    r->pipelines = p;
    r->capPipelines = cap;
  }
  NamedPipeline np = {fzStrDup(ctx, name),
                      fzStrDup(ctx, summary ? summary : ""),
                      fzStrDup(ctx, pipeline)};
  if (!np.name || !np.summary || !np.text) {
    fzFree(ctx, np.name);
    fzFree(ctx, np.summary);
    fzFree(ctx, np.text);
    return false;
  }
  r->pipelines[r->numPipelines++] = np;
  return true;
}

FzStringRef fzContextLookupPassPipeline(const FzContext *ctx, FzStringRef name,
                                        FzStringRef *summary) {
  const NamedPipeline *p = find_pipeline(registry_get(ctx), name);
  FzStringRef none = {NULL, 0};
  if (summary)
    *summary = p ? fzStringRefFromCString(p->summary) : none;
  return p ? fzStringRefFromCString(p->text) : none;
}

static int compare_pipelines(const void *a, const void *b) {
  return strcmp((*(const NamedPipeline *const *)a)->name,
                (*(const NamedPipeline *const *)b)->name);
}

void fzContextForEachPassPipeline(const FzContext *ctx,
                                  void (*fn)(const char *name,
                                             const char *summary,
                                             const char *pipeline, void *ud),
                                  void *ud) {
  const PassRegistry *r = registry_get(ctx);
  if (!r || !r->numPipelines)
    return;
  FzContext *mctx = (FzContext *)ctx;
  const NamedPipeline **sorted =
      fzMalloc(mctx, r->numPipelines * sizeof *sorted);
  if (!sorted)
    return;
  for (size_t i = 0; i < r->numPipelines; ++i)
    sorted[i] = &r->pipelines[i];
  qsort(sorted, r->numPipelines, sizeof *sorted, compare_pipelines);
  for (size_t i = 0; i < r->numPipelines; ++i)
    fn(sorted[i]->name, sorted[i]->summary, sorted[i]->text, ud);
  fzFree(mctx, sorted);
}
