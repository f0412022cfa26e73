/* ir/parse_ssa.c - SSA name scopes, forward references and block labels.
 *
 * Scoping follows MLIR. A value defined in a region is visible there and
 * in the regions nested in it; an op that is isolated from above starts a
 * fresh name scope in which outer names do not exist. All names live in
 * one hash map keyed by (name, tag) where the tag identifies the isolated
 * name scope, so entering an isolated op is O(1) and outer names simply
 * miss. Names ending in a number (what printers and generators write:
 * %0, %arg3, %v12) skip the hash map: each isolated scope has arrays
 * indexed by that number, one per prefix (families), dropped when the
 * scope ends. Each region scope records the entries defined in it (defStack)
 * and, when it ends, marks them undefined again, so sibling regions may
 * reuse a name.
 *
 * A use before the definition creates a placeholder value: a private
 * FzValue of the use's type, owned by the parse arena, that the operands
 * of the using ops point at. The definition replaces all its uses and the
 * placeholder is dropped; names still undefined when their isolated scope
 * ends are errors. Placeholders never escape a successful parse; after a
 * failed one the IR that still uses them is destroyed before the arena.
 *
 * Entry invariant: numDefined > 0 means slots[0..numDefined) hold the
 * defined values; numDefined == 0 means every non-NULL slot value is a
 * placeholder (numFwd of them).
 */
#include "ir/parser.h"

#include <stdlib.h>

typedef struct FzpSsaSlot {
  FzValue *value;
  FzType *type;       /* value's type, kept here so that checking a use
                       * does not touch the value (a cache miss) */
  uint32_t line, col; /* definition, or first use of a placeholder */
} FzpSsaSlot;

/* What resolving a use reads comes first, to share a cache line. */
typedef struct FzpSsaEntry {
  FzpSsaSlot *slots;
  FzpSsaSlot inlineSlot;
  uint32_t numDefined;
  uint32_t numSlots, capSlots;
  bool onFwdStack;
  bool poisoned; /* its defining op failed: uses are silently accepted */
  uint32_t numFwd;
  uint32_t defLine, defCol;
  const char *name; /* without '%' */
  uint32_t len;
} FzpSsaEntry;

typedef struct FzpLabel {
  uint32_t line, col;
} FzpLabel;

/* Keys must outlive the parse: names from the buffer are used in place,
 * others (a hook's own strings) are copied into the arena. */
static const char *stable_key(FzAsmParser *p, const char *name, size_t len) {
  if (name >= p->lx.buf && name + len <= p->lx.end)
    return name;
  return fzArenaDup(&p->arena, name, len ? len : 1);
}

static FzpSsaEntry *new_entry(FzAsmParser *p, const char *name, size_t len) {
  const char *key = stable_key(p, name, len);
  FzpSsaEntry *e = fzArenaAlloc(&p->arena, sizeof *e);
  if (!key || !e) {
    fzpOutOfMemory(p);
    return NULL;
  }
  memset(e, 0, sizeof *e);
  e->name = key;
  e->len = (uint32_t)len;
  e->slots = &e->inlineSlot;
  e->capSlots = 1;
  return e;
}

/* Splits a name into a prefix and a trailing canonical decimal number
 * ("v12" -> "v", 12; "7" -> "", 7): at most 7 digits, no leading zero
 * unless the number is 0, so that each name has one split. */
static bool split_numbered(const char *s, size_t len, size_t *prefixLen,
                           size_t *number) {
  size_t i = len;
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
    --i;
  size_t digits = len - i;
  if (digits == 0 || digits > 7 || (s[i] == '0' && digits > 1))
    return false;
  size_t v = 0;
  for (size_t k = i; k < len; ++k)
    v = v * 10 + (size_t)(s[k] - '0');
  *prefixLen = i;
  *number = v;
  return true;
}

/* Numbers below this use a family's array: large in the outer name
 * scopes (file, module, function), small in deeper isolated ops, so that
 * odd input cannot make every nested scope allocate big arrays. At most
 * FZP_MAX_FAMILIES prefixes per isolated scope get a family; names with
 * other prefixes go to the hash map. Both bounds depend only on the
 * scope and on which prefixes came first in it, so a name always lands
 * in the same table. */
#define FZP_MAX_FAMILIES 4

static size_t numbered_limit(const FzAsmParser *p) {
  return p->isoDepth <= 3 ? (size_t)1 << 20 : (size_t)1 << 12;
}

/* The index of the current scope's family of `prefix`, made if there is
 * room, or SIZE_MAX. */
static size_t family_index(FzAsmParser *p, const char *prefix, size_t len) {
  for (size_t i = p->famBase; i < p->numFamilies; ++i) {
    const FzpFamily *f = &p->families[i];
    if (f->len == len && memcmp(f->prefix, prefix, len) == 0)
      return i;
  }
  if (p->numFamilies - p->famBase >= FZP_MAX_FAMILIES)
    return SIZE_MAX;
  if (p->numFamilies == p->capFamilies) {
    size_t cap = p->capFamilies ? p->capFamilies * 2 : 8;
    FzpFamily *fs = fzRealloc(p->ctx, p->families, cap * sizeof *fs);
    if (!fs) {
      fzpOutOfMemory(p);
      return SIZE_MAX;
    }
    p->families = fs;
    p->capFamilies = cap;
  }
  const char *key = stable_key(p, prefix, len);
  if (!key) {
    fzpOutOfMemory(p);
    return SIZE_MAX;
  }
  p->families[p->numFamilies] = (FzpFamily){key, (uint32_t)len, NULL, 0};
  return p->numFamilies++;
}

static FzpSsaEntry *get_entry(FzAsmParser *p, const char *name, size_t len) {
  size_t prefixLen, idx, fam;
  if (split_numbered(name, len, &prefixLen, &idx) &&
      idx < numbered_limit(p) &&
      (fam = family_index(p, name, prefixLen)) != SIZE_MAX) {
    FzpFamily *f = &p->families[fam];
    if (idx < f->cap && f->slots[idx])
      return f->slots[idx];
    if (idx >= f->cap) {
      size_t cap = f->cap ? f->cap * 2 : 64;
      while (cap <= idx)
        cap *= 2;
      void **arr = fzRealloc(p->ctx, f->slots, cap * sizeof *arr);
      if (!arr) {
        fzpOutOfMemory(p);
        return NULL;
      }
      memset(arr + f->cap, 0, (cap - f->cap) * sizeof *arr);
      f->slots = arr;
      f->cap = cap;
    }
    FzpSsaEntry *e = new_entry(p, name, len);
    f->slots[idx] = e;
    return e;
  }
  uint32_t hash = fzpStrHash(name, len, p->ssaTag);
  FzpSsaEntry *e = fzpStrMapGet(&p->ssa, name, len, p->ssaTag, hash);
  if (e)
    return e;
  if (!(e = new_entry(p, name, len)))
    return NULL;
  if (!fzpStrMapPut(&p->ssa, e->name, len, p->ssaTag, hash, e)) {
    fzpOutOfMemory(p);
    return NULL;
  }
  return e;
}

static bool reserve_slots(FzAsmParser *p, FzpSsaEntry *e, size_t n) {
  if (n <= e->capSlots)
    return true;
  if (n > UINT32_MAX / 2)
    return fzpOutOfMemory(p);
  size_t cap = e->capSlots * 2;
  while (cap < n)
    cap *= 2;
  FzpSsaSlot *s = fzArenaAlloc(&p->arena, cap * sizeof *s);
  if (!s)
    return fzpOutOfMemory(p);
  memcpy(s, e->slots, e->numSlots * sizeof *s);
  e->slots = s;
  e->capSlots = (uint32_t)cap;
  return true;
}

/* Prints a type into a NUL-terminated heap string for a message. */
static char *type_text(FzAsmParser *p, const FzType *t) {
  FzBuf b;
  fzBufInit(&b, p->ctx);
  fzTypePrintToBuf(&b, t);
  return b.data;
}

static void type_mismatch(FzAsmParser *p, const FzpUse *u, FzType *want,
                          const FzpSsaSlot *prior) {
  char *a = type_text(p, want), *b = type_text(p, prior->value->type);
  FzDiagnostic *d = fzpDiagBegin(
      p, u->line, u->col,
      "use of value '%%%.*s' expects different type than prior uses: '%s' "
      "vs '%s'",
      (int)u->len, u->name, a ? a : "?", b ? b : "?");
  if (d)
    fzDiagAttachNote(d, fzpLocAt(p, prior->line, prior->col),
                     "prior use here");
  fzpDiagReport(p, d);
  fzFree(p->ctx, a);
  fzFree(p->ctx, b);
}

FzValue *fzpResolveUse(FzAsmParser *p, const FzpUse *u, FzType *type) {
  FzpSsaEntry *e = get_entry(p, u->name, u->len);
  if (!e)
    return NULL;
  if (e->poisoned && !e->numDefined) {
    /* The parse has already failed at the definition; a stand-in value
     * avoids a cascade of errors about this name. */
    if (!type) {
      p->failed = true;
      return NULL;
    }
    FzValue *v = fzArenaAlloc(&p->arena, sizeof *v);
    if (!v) {
      fzpOutOfMemory(p);
      return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
  }
  if (e->numDefined) {
    if (u->number >= e->numDefined) {
      fzpErrorAtLineCol(p, u->line, u->col,
                        "reference to invalid result number");
      return NULL;
    }
    FzpSsaSlot *s = &e->slots[u->number];
    if (type && s->type != type) {
      type_mismatch(p, u, type, s);
      return NULL;
    }
    return s->value;
  }
  /* A forward reference. */
  if (!type) {
    fzpErrorAtLineCol(p, u->line, u->col,
                      "use of undeclared SSA value name '%%%.*s'",
                      (int)u->len, u->name);
    return NULL;
  }
  if (!reserve_slots(p, e, (size_t)u->number + 1))
    return NULL;
  while (e->numSlots <= u->number) {
    e->slots[e->numSlots].value = NULL;
    e->numSlots++;
  }
  FzpSsaSlot *s = &e->slots[u->number];
  if (s->value) {
    if (s->type != type) {
      type_mismatch(p, u, type, s);
      return NULL;
    }
    return s->value;
  }
  FzValue *ph = fzArenaAlloc(&p->arena, sizeof *ph);
  if (!ph) {
    fzpOutOfMemory(p);
    return NULL;
  }
  memset(ph, 0, sizeof *ph);
  ph->type = type;
  ph->index = u->number;
  s->value = ph;
  s->type = type;
  s->line = u->line;
  s->col = u->col;
  e->numFwd++;
  if (!e->onFwdStack) {
    if (!fzPtrVecPush(&p->fwdStack, e)) {
      fzpOutOfMemory(p);
      return NULL;
    }
    e->onFwdStack = true;
  }
  return ph;
}

bool fzpDefineValues(FzAsmParser *p, const char *name, size_t len,
                     uint32_t line, uint32_t col, FzValue *const *vals,
                     size_t n) {
  FzpSsaEntry *e = get_entry(p, name, len);
  if (!e)
    return false;
  if (e->numDefined) {
    FzDiagnostic *d = fzpDiagBegin(p, line, col,
                                   "redefinition of SSA value '%%%.*s'",
                                   (int)len, name);
    if (d)
      fzDiagAttachNote(d, fzpLocAt(p, e->defLine, e->defCol),
                       "previously defined here");
    fzpDiagReport(p, d);
    return false;
  }
  bool ok = true;
  for (uint32_t i = 0; i < e->numSlots; ++i) {
    FzpSsaSlot *s = &e->slots[i];
    if (!s->value)
      continue;
    if (i >= n) {
      ok = fzpErrorAtLineCol(p, s->line, s->col,
                             "reference to invalid result number");
      continue;
    }
    if (s->value->type != vals[i]->type) {
      char *a = type_text(p, vals[i]->type);
      char *b = type_text(p, s->value->type);
      FzDiagnostic *d = fzpDiagBegin(
          p, line, col, "definition of SSA value '%%%.*s#%u' has type '%s'",
          (int)len, name, i, a ? a : "?");
      if (d)
        fzDiagAttachNote(d, fzpLocAt(p, s->line, s->col),
                         "previously used here with type '%s'", b ? b : "?");
      fzpDiagReport(p, d);
      fzFree(p->ctx, a);
      fzFree(p->ctx, b);
      ok = false;
      continue;
    }
    fzValueReplaceAllUsesWith(s->value, vals[i]);
  }
  e->numFwd = 0;
  if (!reserve_slots(p, e, n))
    return false;
  for (size_t i = 0; i < n; ++i) {
    e->slots[i].value = vals[i];
    e->slots[i].type = vals[i]->type;
    e->slots[i].line = line;
    e->slots[i].col = col;
  }
  e->numSlots = (uint32_t)n;
  e->numDefined = (uint32_t)n;
  e->defLine = line;
  e->defCol = col;
  if (n && !fzPtrVecPush(&p->defStack, e))
    return fzpOutOfMemory(p);
  return ok;
}

void fzpPoisonValues(FzAsmParser *p, const char *name, size_t len) {
  p->failed = true;
  FzpSsaEntry *e = get_entry(p, name, len);
  if (!e || e->numDefined || e->poisoned)
    return;
  e->poisoned = true;
  e->numFwd = 0;
  e->numSlots = 0;
  if (!fzPtrVecPush(&p->defStack, e))
    fzpOutOfMemory(p);
}

/*===--- Scopes -------------------------------------------------------------===*/

bool fzpPushScope(FzAsmParser *p, bool isolated) {
  if (p->numScopes == p->capScopes) {
    size_t cap = p->capScopes ? p->capScopes * 2 : 16;
    FzpScope *s = fzRealloc(p->ctx, p->scopes, cap * sizeof *s);
    if (!s)
      return fzpOutOfMemory(p);
    p->scopes = s;
    p->capScopes = cap;
  }
  FzpScope *s = &p->scopes[p->numScopes++];
  s->isolated = isolated;
  s->regionTag = ++p->nextTag;
  s->defMark = p->defStack.len;
  s->fwdMark = p->fwdStack.len;
  s->savedSsaTag = p->ssaTag;
  s->savedFamBase = p->famBase;
  if (isolated) {
    ++p->isoDepth;
    p->ssaTag = ++p->nextTag;
    p->famBase = p->numFamilies;
  }
  return true;
}

typedef struct FzpUndef {
  uint32_t line, col, number;
  const FzpSsaEntry *e;
} FzpUndef;

static int undef_cmp(const void *a, const void *b) {
  const FzpUndef *x = a, *y = b;
  if (x->line != y->line)
    return x->line < y->line ? -1 : 1;
  if (x->col != y->col)
    return x->col < y->col ? -1 : 1;
  return 0;
}

/* Reports the names used in the ending isolated scope but never defined,
 * in source order. */
static void report_undefined(FzAsmParser *p, size_t mark) {
  size_t count = 0;
  for (size_t i = mark; i < p->fwdStack.len; ++i) {
    const FzpSsaEntry *e = p->fwdStack.data[i];
    if (!e->numDefined)
      for (uint32_t j = 0; j < e->numSlots; ++j)
        count += e->slots[j].value != NULL;
  }
  if (!count)
    return;
  FzpUndef *list = fzMalloc(p->ctx, count * sizeof *list);
  if (!list) {
    fzpOutOfMemory(p);
    return;
  }
  size_t n = 0;
  for (size_t i = mark; i < p->fwdStack.len; ++i) {
    const FzpSsaEntry *e = p->fwdStack.data[i];
    if (e->numDefined)
      continue;
    for (uint32_t j = 0; j < e->numSlots; ++j)
      if (e->slots[j].value)
        list[n++] = (FzpUndef){e->slots[j].line, e->slots[j].col, j, e};
  }
  qsort(list, n, sizeof *list, undef_cmp);
  for (size_t i = 0; i < n && !p->fatal; ++i) {
    if (list[i].number)
      fzpErrorAtLineCol(p, list[i].line, list[i].col,
                        "use of undeclared SSA value name '%%%.*s#%u'",
                        (int)list[i].e->len, list[i].e->name, list[i].number);
    else
      fzpErrorAtLineCol(p, list[i].line, list[i].col,
                        "use of undeclared SSA value name '%%%.*s'",
                        (int)list[i].e->len, list[i].e->name);
  }
  fzFree(p->ctx, list);
}

void fzpPopScope(FzAsmParser *p) {
  FzpScope *s = &p->scopes[--p->numScopes];
  for (size_t i = s->defMark; i < p->defStack.len; ++i) {
    FzpSsaEntry *e = p->defStack.data[i];
    e->numDefined = 0;
    e->numSlots = 0;
    e->poisoned = false;
  }
  p->defStack.len = s->defMark;
  if (s->isolated) {
    report_undefined(p, s->fwdMark);
    for (size_t i = s->fwdMark; i < p->fwdStack.len; ++i) {
      FzpSsaEntry *e = p->fwdStack.data[i];
      e->onFwdStack = false;
      e->numFwd = 0;
    }
    p->fwdStack.len = s->fwdMark;
    p->ssaTag = s->savedSsaTag;
    for (size_t i = p->famBase; i < p->numFamilies; ++i)
      fzFree(p->ctx, p->families[i].slots);
    p->numFamilies = p->famBase;
    p->famBase = s->savedFamBase;
    --p->isoDepth;
  }
}

bool fzpDefineLabel(FzAsmParser *p, const FzToken *t) {
  const char *name = t->start + 1;
  size_t len = t->len - 1;
  uint32_t tag = p->numScopes ? p->scopes[p->numScopes - 1].regionTag : 0;
  uint32_t hash = fzpStrHash(name, len, tag);
  FzpLabel *prior = fzpStrMapGet(&p->labels, name, len, tag, hash);
  if (prior) {
    FzDiagnostic *d = fzpDiagBegin(p, t->line, t->col,
                                   "redefinition of block '^%.*s'", (int)len,
                                   name);
    if (d)
      fzDiagAttachNote(d, fzpLocAt(p, prior->line, prior->col),
                       "previously defined here");
    fzpDiagReport(p, d);
    return false;
  }
  FzpLabel *l = fzArenaAlloc(&p->arena, sizeof *l);
  if (!l)
    return fzpOutOfMemory(p);
  l->line = t->line;
  l->col = t->col;
  if (!fzpStrMapPut(&p->labels, name, len, tag, hash, l))
    return fzpOutOfMemory(p);
  return true;
}

void fzpSsaFree(FzAsmParser *p) {
  for (size_t i = 0; i < p->numFamilies; ++i)
    fzFree(p->ctx, p->families[i].slots);
  fzFree(p->ctx, p->families);
  p->families = NULL;
  p->numFamilies = p->capFamilies = p->famBase = 0;
  fzpStrMapFree(&p->ssa);
  fzpStrMapFree(&p->labels);
  fzFree(p->ctx, p->scopes);
  p->scopes = NULL;
  p->numScopes = p->capScopes = 0;
  fzPtrVecFree(&p->defStack);
  fzPtrVecFree(&p->fwdStack);
}
