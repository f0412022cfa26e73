/* importers/onnx/model.c - the ONNX importer's driver: decodes a
 * ModelProto with the generated protobuf-c code, reads the opset, builds
 * builtin.module { func.func @main }, binds graph inputs to arguments,
 * imports each node through the op table, returns the graph outputs, and
 * verifies the result.
 *
 * Invariants. The value map holds, for every ONNX value name seen so far,
 * its FzValue, or the poison marker when the node that defines it failed
 * (its consumers are then skipped silently, so each bad node gets exactly
 * one error). Initializers are materialized as graph.constant on first
 * use. While a node is imported a diagnostic handler captures the first
 * error the dialect reports (a shape mismatch, say) so that it can be
 * re-reported in the node's words.
 *
 * Ownership. The decoded ModelProto is allocated through the context's
 * allocator and freed before returning; the module is returned detached
 * to the caller, or destroyed on error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "importers/onnx/onnx_internal.h"

static char kPoison; /* the value-map marker of a failed value */
#define POISON ((void *)&kPoison)
/* The marker of an output of the node being imported (its inputs are
 * resolved before its outputs are marked; one left behind when binding an
 * output ran out of memory reads as poison). */
static char kPending;
#define PENDING ((void *)&kPending)

/*===--- The op table ----------------------------------------------------===*/

static const FzOnnxOpDef *const kTables[] = {
    fzOnnxElementwiseOps, fzOnnxMiscOps,  fzOnnxNnOps,
    fzOnnxReduceOps,      fzOnnxShapeOps, fzOnnxLossOps,
    fzOnnxResizeOps,      fzOnnxIndexOps, fzOnnxRnnOps,
    fzOnnxControlOps,
    fzOnnxDataDependentOps,
    fzOnnxSampleOps,
    fzOnnxMathOps,
    fzOnnxTextOps,
    fzOnnxSignalOps,
    fzOnnxQuantOps,
    fzOnnxUnpoolOps,
    fzOnnxRoiAlignOps,
};

const FzOnnxOpDef *fzOnnxLookupOp(const char *opType) {
  for (size_t t = 0; t < sizeof kTables / sizeof kTables[0]; ++t)
    for (const FzOnnxOpDef *row = kTables[t]; row->opType; ++row)
      if (!strcmp(row->opType, opType))
        return row;
  return NULL;
}

/*===--- Errors ---------------------------------------------------------===*/

bool fzOnnxError(FzOnnxImporter *im, const char *fmt, ...) {
  if (im->node && im->nodeFailed)
    return false;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  im->numErrors++;
  if (im->node)
    im->nodeFailed = true;
  if (im->quiet && !fzContextHadAllocationFailure(im->ctx))
    return false; /* probing; out of memory is always said */
  im->reporting = true;
  FzDiagnostic *d =
      im->node ? fzDiagBegin(im->ctx, FZ_SEVERITY_ERROR, im->errorLoc,
                             "node '%s' (%s): %s", im->nodeName,
                             im->node->op_type ? im->node->op_type : "", msg)
               : fzDiagBegin(im->ctx, FZ_SEVERITY_ERROR, im->errorLoc, "%s",
                             msg);
  /* A node that needs a static shape: say which inputs are symbolic. */
  if (im->node && !im->notedDynamic && strstr(msg, "dynamic")) {
    im->notedDynamic = true;
    fzOnnxNoteSymbolicDims(im, d);
  }
  fzDiagReport(d);
  im->reporting = false;
  return false;
}

bool fzOnnxModelError(FzOnnxImporter *im, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  im->numErrors++;
  if (im->quiet && !fzContextHadAllocationFailure(im->ctx))
    return false; /* probing; out of memory is always said */
  im->reporting = true;
  fzEmitError(im->ctx, im->errorLoc, "%s", msg);
  im->reporting = false;
  return false;
}

static FzValue *lookup_value(FzOnnxImporter *im, const char *name);

bool fzOnnxErrorNotConstant(FzOnnxImporter *im, size_t i, const char *what) {
  const char *name = im->node && i < im->node->n_input
                         ? im->node->input[i]
                         : "";
  /* The graph inputs it comes from, for a caller that can bind them. */
  FzValue *v = *name ? lookup_value(im, name) : NULL;
  if (v && v != POISON)
    fzOnnxDemandInputs(im, v);
  return fzOnnxError(im, "unsupported non-constant %s (input #%zu '%s'): it "
                         "must be computable at import time", what, i, name);
}

/* Captures the first error reported while a node is imported. */
static bool capture_handler(const FzDiagnostic *diag, void *ud) {
  FzOnnxImporter *im = ud;
  /* Out of memory goes to the caller as it is: the node's own error may
   * say something else (found by test_oom's specialized import). */
  if (im->reporting || fzDiagnosticGetSeverity(diag) != FZ_SEVERITY_ERROR ||
      fzContextHadAllocationFailure(im->ctx))
    return false;
  if (!im->captured) {
    FzStringRef m = fzDiagnosticGetMessage(diag);
    snprintf(im->capturedError, sizeof im->capturedError, "%.*s",
             (int)m.length, m.data);
    im->captured = true;
  }
  return true;
}

/*===--- Values ---------------------------------------------------------===*/

static FzIdent *ident(FzOnnxImporter *im, const char *name) {
  return fzIdentGet(im->ctx, fzStringRefFromCString(name));
}

/* The value named `name`: NULL when unknown, POISON when failed. */
static FzValue *lookup_value(FzOnnxImporter *im, const char *name) {
  FzIdent *id = ident(im, name);
  if (!id)
    return NULL;
  FzValue *v = fzPtrMapGet(&im->values, id);
  if (v == PENDING) /* left by a node whose outputs failed to bind (OOM) */
    return POISON;
  if (v)
    return v;
  const Onnx__TensorProto *init = fzPtrMapGet(&im->initializers, id);
  if (!init)
    return NULL;
  /* First use of an initializer: a constant at the current point. */
  char what[300];
  snprintf(what, sizeof what, "initializer '%s'", name);
  const Onnx__NodeProto *node = im->node;
  FzLoc *loc = im->nodeLoc;
  im->node = NULL;
  FzLoc *nameLoc = fzNameLocGet(im->ctx, fzStringRefFromCString(name),
                                im->fileLoc);
  FzAttr *meta = fzStringAttrGet(im->ctx, FZ_STR("Initializer"));
  im->nodeLoc = fzFusedLocGet(im->ctx, 1, &nameLoc, meta);
  FzAttr *a = fzOnnxTensorToAttr(im, init, what);
  v = a ? fzOnnxConstAttr(im, a) : NULL;
  if (v && fzOnnxDataTypeIsUnsigned(init->data_type))
    fzOnnxMarkUnsigned(im, v);
  im->node = node;
  im->nodeLoc = loc;
  if (!fzPtrMapPut(&im->values, id, v ? (void *)v : POISON))
    return POISON;
  return v ? v : POISON;
}

bool fzOnnxDefineValue(FzOnnxImporter *im, const char *name, FzValue *v) {
  FzIdent *id = ident(im, name);
  return id && fzPtrMapPut(&im->values, id, v ? (void *)v : POISON);
}
#define define_value fzOnnxDefineValue

/*===--- Nodes ----------------------------------------------------------===*/

/* Looks `name` up in a row's attribute list (see FzOnnxOpDef): 0 when
 * the op has no such attribute, 1 when `version` has it, -1 when only
 * other versions do (*bound and *since then say which: since `bound`, or
 * before it). */
static int attr_known(const char *list, const char *name, int version,
                      int *bound, bool *since) {
  size_t len = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ')
      ++p;
    const char *e = p;
    while (*e && *e != ' ' && *e != '<' && *e != '>')
      ++e;
    bool match = (size_t)(e - p) == len && !strncmp(p, name, len);
    int cond = 0, v = 0; /* cond: 0 none, 1 since v, 2 before v */
    if (*e == '<' || *e == '>') {
      cond = *e == '<' ? 2 : 1;
      e += cond == 1 ? 2 : 1; /* ">=" or "<" */
      while (*e >= '0' && *e <= '9')
        v = v * 10 + (*e++ - '0');
    }
    if (match) {
      bool ok = cond == 0 || (cond == 1 ? version >= v : version < v);
      *bound = v;
      *since = cond == 1;
      return ok ? 1 : -1;
    }
    p = e;
  }
  return 0;
}

/* Checks the node against its row: domain, input/output counts and
 * attribute names. */
static bool check_node(FzOnnxImporter *im, const FzOnnxOpDef *row) {
  const Onnx__NodeProto *n = im->node;
  if (row->maxInputs >= 0 && n->n_input > (size_t)row->maxInputs) {
    /* Trailing absent optional inputs are harmless. */
    for (size_t i = (size_t)row->maxInputs; i < n->n_input; ++i)
      if (n->input[i][0])
        return fzOnnxError(im, "unsupported input #%zu ('%s'): %s takes at "
                               "most %d inputs", i, n->input[i], n->op_type,
                           row->maxInputs);
  }
  size_t present = 0;
  for (size_t i = 0; i < n->n_input; ++i)
    present = n->input[i][0] ? i + 1 : present;
  if ((int)present < row->minInputs)
    return fzOnnxError(im, "expects at least %d inputs, got %zu",
                       row->minInputs, present);
  /* An empty name marks an absent optional input; a required one must be
   * there (found by fuzz_onnx: Conv with inputs "", "w" reached its
   * handler with a NULL x). */
  for (int i = 0; i < row->minInputs; ++i)
    if (!n->input[i][0])
      return fzOnnxError(im, "required input #%d is missing (its name is "
                             "empty)", i);
  for (size_t i = (size_t)row->maxOutputs; i < n->n_output; ++i)
    if (n->output[i][0])
      return fzOnnxError(im, "unsupported output #%zu ('%s')", i,
                         n->output[i]);
  for (size_t i = 0; i < n->n_attribute; ++i) {
    const Onnx__AttributeProto *a = n->attribute[i];
    /* proto2 leaves a missing name NULL (found by fuzz_onnx). */
    if (!a->name || !*a->name)
      return fzOnnxError(im, "attribute #%zu has no name", i);
    if (a->ref_attr_name && *a->ref_attr_name)
      return fzOnnxError(im, "unsupported attribute reference '%s'",
                         a->name);
    int bound;
    bool since;
    int k = attr_known(row->attrs, a->name, im->opVersion, &bound, &since);
    if (k == 0)
      return fzOnnxError(im, "unsupported attribute '%s'", a->name);
    if (k < 0)
      return fzOnnxError(im, "attribute '%s' is not part of %s-%d (only of "
                             "versions %s %d)", a->name, n->op_type,
                         im->opVersion, since ? "from" : "before", bound);
    for (size_t j = 0; j < i; ++j)
      if (!strcmp(n->attribute[j]->name, a->name))
        return fzOnnxError(im, "attribute '%s' is given twice", a->name);
  }
  return true;
}

/* Whether output #i of node n names a new value: not another of its
 * outputs, an initializer, a graph input or an earlier node's output;
 * reports the node's error otherwise. A new name is marked PENDING in the
 * value map (a map, not a scan of the outputs before it: a node may list
 * millions). */
static bool check_fresh_output(FzOnnxImporter *im, const Onnx__NodeProto *n,
                               size_t i) {
  const char *name = n->output[i];
  if (!name[0])
    return true;
  FzIdent *id = ident(im, name);
  if (!id)
    return false;
  void *v = fzPtrMapGet(&im->values, id);
  if (v == PENDING)
    return fzOnnxError(im, "output '%s' is listed twice", name);
  if (fzPtrMapContains(&im->initializers, id))
    return fzOnnxError(im, "output '%s' redefines an initializer", name);
  if (fzPtrMapContains(&im->inputNames, id))
    return fzOnnxError(im, "output '%s' redefines a graph input", name);
  if (v)
    return fzOnnxError(im, "output '%s' is already defined by an earlier "
                           "node", name);
  return fzPtrMapPut(&im->values, id, PENDING);
}

/* An op type without a row: unsupported, with the reason when known. */
static bool refuse_op(FzOnnxImporter *im, const char *opType) {
  const char *why = fzOnnxRefusedReason(opType);
  if (why)
    return fzOnnxError(im, "unsupported op type '%s': %s", opType, why);
  return fzOnnxError(im, "unsupported op type '%s'", opType);
}

/* Sets im->opVersion: the version of the node's op that the model's
 * opset means. A node of an opset newer than the version table knows is
 * an error (its op may have changed since), and so is an op that the
 * opset does not define yet. */
static bool resolve_version(FzOnnxImporter *im, const char *opType) {
  int first, newest;
  int v = fzOnnxOpVersion(opType, im->opset, &first, &newest);
  im->opVersion = v;
  if (v < 0)
    return fzOnnxError(im, "internal error: no versions known for '%s'",
                       opType);
  if (im->opset > FZ_ONNX_MAX_OPSET)
    return fzOnnxError(im, "unsupported version: opset %lld of the default "
                           "domain is newer than the importer knows (%d, "
                           "where %s is %s-%d); it cannot tell which "
                           "version of %s that opset means",
                       (long long)im->opset, FZ_ONNX_MAX_OPSET, opType,
                       opType, newest, opType);
  if (v == 0)
    return fzOnnxError(im, "%s is not defined in opset %lld of the default "
                           "domain (it is from opset %d)", opType,
                       (long long)im->opset, first);
  return true;
}

static void import_node(FzOnnxImporter *im, const Onnx__NodeProto *n,
                        size_t index) {
  char fallback[32];
  im->node = n;
  im->nodeFailed = false;
  im->captured = false;
  /* The node's name, else its first named output's, else its index. */
  snprintf(fallback, sizeof fallback, "#%zu", index);
  im->nodeName = fallback;
  if (n->name && *n->name)
    im->nodeName = n->name;
  for (size_t i = n->n_output; !(n->name && *n->name) && i-- > 0;)
    if (*n->output[i])
      im->nodeName = n->output[i];
  FzLoc *nameLoc = fzNameLocGet(
      im->ctx, fzStringRefFromCString(im->nodeName), im->fileLoc);
  FzAttr *meta = fzStringAttrGet(im->ctx,
                                 fzStringRefFromCString(n->op_type));
  im->nodeLoc = fzFusedLocGet(im->ctx, 1, &nameLoc, meta);

  FzValue *small[8], **in = small, *smallOut[8], **out = smallOut;
  if (n->n_input > 8)
    in = fzOnnxAlloc(im, n->n_input * sizeof *in);
  if (n->n_output > 8)
    out = fzOnnxAlloc(im, n->n_output * sizeof *out);
  bool ok = in && out;
  bool poisoned = false;
  for (size_t i = 0; ok && i < n->n_input; ++i) {
    in[i] = NULL;
    if (!n->input[i][0])
      continue;
    FzValue *v = lookup_value(im, n->input[i]);
    if (v == POISON) {
      poisoned = true;
    } else if (!v) {
      ok = fzOnnxError(im, "input '%s' is not defined before its use (the "
                           "graph must be topologically sorted)",
                       n->input[i]);
    } else {
      in[i] = v;
    }
  }
  for (size_t i = 0; out && i < n->n_output; ++i)
    out[i] = NULL;

  /* ONNX graphs are in SSA form: an output redefining a name would
   * silently rebind it for the nodes after this one. */
  bool fresh = true;
  for (size_t i = 0; i < n->n_output; ++i)
    fresh = check_fresh_output(im, n, i) && fresh;
  ok = ok && fresh;

  const FzOnnxOpDef *row = NULL;
  if (ok && !poisoned) {
    if (n->domain && !strcmp(n->domain, "ai.onnx.preview.training") &&
        n->op_type && (row = fzOnnxLookupTrainingOp(n->op_type))) {
      im->opVersion = 1; /* the domain's only version (ops_training.c) */
      ok = check_node(im, row);
    } else if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
      ok = fzOnnxError(im, "unsupported op domain '%s'", n->domain);
    else if (im->opset == FZ_ONNX_NO_OPSET)
      ok = fzOnnxError(im, "the model imports no opset of the default ONNX "
                           "domain");
    else if (!n->op_type || !*n->op_type) /* proto2: may be absent */
      ok = fzOnnxError(im, "node has no op_type");
    else if (!(row = fzOnnxLookupOp(n->op_type)))
      ok = refuse_op(im, n->op_type);
    else
      ok = resolve_version(im, n->op_type) && check_node(im, row);
    ok = ok && fzOnnxCheckUnsignedInputs(im, in, n->n_input);
  }
  im->row = row;
  if (ok && !poisoned) {
    fzBuilderSetInsertionPointToEnd(&im->b, im->b.block);
    FzDiagHandlerId h =
        fzContextPushDiagHandler(im->ctx, capture_handler, im);
    bool widened = false, done = false;
    ok = fzOnnxImportUnsigned64(im, in, n->n_input, out, &done) &&
         (done ||
          (fzOnnxWidenUnsignedInputs(im, in, n->n_input, &widened) &&
           row->fn(im, in, n->n_input, out, n->n_output) &&
           (!widened || fzOnnxNarrowUnsignedOutputs(im, out, n->n_output))));
    fzContextPopDiagHandler(im->ctx, h);
    for (size_t i = 0; ok && i < n->n_output; ++i)
      if (n->output[i][0] && !out[i])
        ok = false;
    if (ok)
      fzOnnxPropagateUnsigned(im, in, n->n_input, out, n->n_output);
    /* A captured error was counted by the context even when the handler
     * recovered from it: report it, or the import would fail without a
     * word. */
    if ((!ok || im->captured) && !im->nodeFailed) {
      ok = false;
      if (im->captured)
        fzOnnxError(im, "%s", im->capturedError);
      else
        fzOnnxError(im, "internal error: no value for an output");
    }
  }
  /* Every PENDING mark is replaced (by poison after a failure). */
  for (size_t i = 0; i < n->n_output; ++i) {
    FzIdent *id = n->output[i][0] ? ident(im, n->output[i]) : NULL;
    if (id && fzPtrMapGet(&im->values, id) == PENDING)
      define_value(im, n->output[i],
                   ok && !poisoned && out ? out[i] : NULL);
  }
  im->node = NULL;
}

/*===--- Subgraphs --------------------------------------------------------===*/

/* The node state import_node keeps in the importer, saved around a
 * subgraph's nodes. */
typedef struct NodeState {
  const Onnx__NodeProto *node;
  const FzOnnxOpDef *row;
  int opVersion;
  const char *nodeName;
  FzLoc *nodeLoc;
  bool nodeFailed, captured;
  char capturedError[512];
} NodeState;

static void save_node(const FzOnnxImporter *im, NodeState *s) {
  s->node = im->node;
  s->row = im->row;
  s->opVersion = im->opVersion;
  s->nodeName = im->nodeName;
  s->nodeLoc = im->nodeLoc;
  s->nodeFailed = im->nodeFailed;
  s->captured = im->captured;
  memcpy(s->capturedError, im->capturedError, sizeof s->capturedError);
}

static void restore_node(FzOnnxImporter *im, const NodeState *s) {
  im->node = s->node;
  im->row = s->row;
  im->opVersion = s->opVersion;
  im->nodeName = s->nodeName;
  im->nodeLoc = s->nodeLoc;
  im->nodeFailed = s->nodeFailed;
  im->captured = s->captured;
  memcpy(im->capturedError, s->capturedError, sizeof s->capturedError);
}

/* Forgets name (an input, initializer or node output of a subgraph), so
 * that the next import of the same body can define it again. */
static void forget(FzOnnxImporter *im, const char *name) {
  FzIdent *id = name && *name ? ident(im, name) : NULL;
  if (!id)
    return;
  fzPtrMapRemove(&im->values, id);
  fzPtrMapRemove(&im->initializers, id);
}

bool fzOnnxImportSubgraph(FzOnnxImporter *im, const Onnx__GraphProto *g,
                          size_t nIn, FzValue *const *in, size_t nOut,
                          FzValue **out) {
  if (g->n_input != nIn)
    return fzOnnxError(im, "its body takes %zu inputs, %zu are given",
                       g->n_input, nIn);
  if (g->n_output != nOut)
    return fzOnnxError(im, "its body has %zu outputs, %zu are expected",
                       g->n_output, nOut);
  if (g->n_node > (size_t)(FZ_ONNX_MAX_UNROLLED - im->unrolledNodes))
    return fzOnnxError(im, "unsupported: unrolling it would import more "
                           "than %lld nodes",
                       (long long)FZ_ONNX_MAX_UNROLLED);
  im->unrolledNodes += (int64_t)g->n_node;
  NodeState saved;
  save_node(im, &saved);
  size_t errors = im->numErrors;
  bool ok = true;
  /* Body names shadow nothing (ONNX names are unique across scopes);
   * a name already bound is an error in the model. */
  for (size_t i = 0; ok && i < nIn; ++i) {
    const char *name = g->input[i]->name ? g->input[i]->name : "";
    FzIdent *id = *name ? ident(im, name) : NULL;
    if (id && (fzPtrMapContains(&im->values, id) ||
               fzPtrMapContains(&im->initializers, id)))
      ok = fzOnnxError(im, "body input '%s' redefines a name of an outer "
                           "graph", name);
    else if (id)
      ok = define_value(im, name, in[i]);
  }
  for (size_t i = 0; ok && i < g->n_initializer; ++i) {
    const Onnx__TensorProto *t = g->initializer[i];
    FzIdent *id = t->name ? ident(im, t->name) : NULL;
    ok = id && fzPtrMapPut(&im->initializers, id, (void *)t);
  }
  for (size_t i = 0; ok && i < g->n_node; ++i)
    import_node(im, g->node[i], i);
  restore_node(im, &saved);
  ok = ok && im->numErrors == errors;
  for (size_t i = 0; ok && i < nOut; ++i) {
    FzValue *v = lookup_value(im, g->output[i]->name ? g->output[i]->name
                                                     : "");
    if (!v || v == POISON)
      ok = v ? false
             : fzOnnxError(im, "body output '%s' is not defined",
                           g->output[i]->name ? g->output[i]->name : "");
    else
      out[i] = v;
  }
  /* The body's names go (its values stay in the IR). */
  for (size_t i = 0; i < nIn; ++i)
    forget(im, g->input[i]->name);
  for (size_t i = 0; i < g->n_initializer; ++i)
    forget(im, g->initializer[i]->name);
  for (size_t i = 0; i < g->n_node; ++i)
    for (size_t k = 0; k < g->node[i]->n_output; ++k)
      forget(im, g->node[i]->output[k]);
  if (!ok && im->numErrors != errors)
    im->nodeFailed = true; /* its body's errors say why */
  return ok;
}

/*===--- Reading ---------------------------------------------------------===*/

bool fzOnnxLooksLikeProtobuf(const void *data, size_t size) {
  if (size == 0)
    return true;
  unsigned char b = *(const unsigned char *)data;
  unsigned wire = b & 7;
  /* A field key: wire type varint, 64-bit, length-delimited or 32-bit
   * (onnx.proto has no groups), and a field number above 0. */
  if (wire != 0 && wire != 1 && wire != 2 && wire != 5)
    return false;
  return (b & 0x80) || (b >> 3) != 0;
}

/* Reads the varint at d[*p..len): 1 when read (*p moves past it), 0
 * when it runs past len, -1 when longer than 10 bytes. */
static int read_varint(const unsigned char *d, size_t len, size_t *p,
                       uint64_t *v) {
  *v = 0;
  for (unsigned i = 0; i < 10; ++i) {
    if (*p + i >= len)
      return 0;
    *v |= (uint64_t)(d[*p + i] & 0x7F) << (7 * i);
    if (!(d[*p + i] & 0x80)) {
      *p += i + 1;
      return 1;
    }
  }
  return -1;
}

/* Walks the top-level fields of a serialized message from `pos` (where a
 * field starts) through d[0..len): returns where the first field not
 * read whole starts (or ends, when only its payload is missing), or
 * SIZE_MAX when a key or a length is malformed. Any valid message passes;
 * random bytes fail within a few fields. */
static size_t scan_fields(const unsigned char *d, size_t len, size_t pos) {
  while (pos < len) {
    size_t p = pos;
    uint64_t key, v;
    int k = read_varint(d, len, &p, &key);
    if (k <= 0)
      return k < 0 ? SIZE_MAX : pos;
    if ((key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF)
      return SIZE_MAX;
    switch (key & 7) {
    case 0: k = read_varint(d, len, &p, &v); break;
    case 1: p += 8, k = 1; break;
    case 5: p += 4, k = 1; break;
    case 2:
      k = read_varint(d, len, &p, &v);
      if (k > 0 && v > FZ_ONNX_MAX_MODEL_SIZE)
        return SIZE_MAX;
      p += k > 0 ? (size_t)v : 0;
      break;
    default: return SIZE_MAX;
    }
    if (k <= 0)
      return k < 0 ? SIZE_MAX : pos;
    pos = p;
  }
  return pos;
}

bool fzOnnxReadFile(FzContext *ctx, const char *path, FzBuf *b) {
  FzLoc *loc = fzNameLocGet(ctx, fzStringRefFromCString(path), NULL);
  FILE *f = fopen(path, "rb");
  if (!f)
    return fzEmitError(ctx, loc, "cannot open file: %s", strerror(errno));
  struct stat st;
  bool ok = true, stated = fstat(fileno(f), &st) == 0;
  if (stated && S_ISDIR(st.st_mode))
    ok = fzEmitError(ctx, loc, "cannot read file: it is a directory");
  else if (stated && S_ISREG(st.st_mode) &&
           (unsigned long long)st.st_size > FZ_ONNX_MAX_MODEL_SIZE)
    ok = fzEmitError(ctx, loc, "the file has %lld bytes, more than the "
                               "%zu of the largest protobuf message (keep "
                               "large tensors as external data)",
                     (long long)st.st_size, FZ_ONNX_MAX_MODEL_SIZE);
  /* Devices and pipes have no size: the read is bounded instead, and
   * stops at the first chunk that shows the data is no protobuf message
   * (the importer then says so): /dev/zero's first byte, a few bytes of
   * /dev/urandom. */
  char chunk[65536];
  size_t n, scan = 0;
  while (ok && !b->failed && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (n > FZ_ONNX_MAX_MODEL_SIZE - b->len) {
      ok = fzEmitError(ctx, loc, "the file has more than the %zu bytes of "
                                 "the largest protobuf message (keep large "
                                 "tensors as external data)",
                       FZ_ONNX_MAX_MODEL_SIZE);
      break;
    }
    fzBufAppend(b, chunk, n);
    if (!b->failed &&
        (scan = scan_fields((const unsigned char *)b->data, b->len,
                            scan)) == SIZE_MAX)
      break;
  }
  if (ok && ferror(f))
    ok = fzEmitError(ctx, loc, "cannot read file: %s", strerror(errno));
  fclose(f);
  return ok && !b->failed;
}

/*===--- The model -------------------------------------------------------===*/

static void *pb_alloc(void *ud, size_t size) { return fzMalloc(ud, size); }
static void pb_free(void *ud, void *p) {
  if (p)
    fzFree(ud, p);
}

/* The opset of the default domain (FZ_ONNX_NO_OPSET when the model
 * imports none). Any number is accepted here: versions are told node by
 * node. */
static void read_opset(FzOnnxImporter *im, const Onnx__ModelProto *m) {
  im->opset = FZ_ONNX_NO_OPSET;
  for (size_t i = 0; i < m->n_opset_import; ++i) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) &&
        o->has_version)
      im->opset = o->version;
  }
  /* A model without the default domain may still use other domains'
   * ops: each gets its "unsupported op domain" error. */
}

/* Erases the pure ops whose results are unused (constants left behind
 * by folding, unused outputs of decompositions), last to first so that
 * chains go in one sweep. */
static void erase_dead_ops(FzBlock *body) {
  FzOp *op = fzBlockGetLastOp(body);
  while (op) {
    FzOp *prev = fzOpGetPrevInBlock(op);
    bool used = false;
    for (size_t i = 0; i < fzOpGetNumResults(op) && !used; ++i)
      used = fzValueHasUses(fzOpGetResult(op, i));
    if (!used && fzOpGetNumResults(op) > 0 &&
        fzOpHasTrait(op, FZ_TRAIT_PURE))
      fzOpErase(op);
    op = prev;
  }
}

/* Builds @main's body from the graph; false after errors. */
static bool import_graph(FzOnnxImporter *im, const Onnx__GraphProto *g,
                         FzBlock *body, FzType **funcType,
                         const bool *bindNeeded) {
  for (size_t i = 0; i < g->n_sparse_initializer; ++i)
    fzOnnxModelError(im, "unsupported sparse initializer");
  for (size_t i = 0; i < g->n_initializer; ++i) {
    const Onnx__TensorProto *t = g->initializer[i];
    FzIdent *id = t->name ? ident(im, t->name) : NULL;
    if (id && fzPtrMapContains(&im->initializers, id)) {
      fzOnnxModelError(im, "initializer '%s' is given twice", t->name);
      continue;
    }
    if (!id || !fzPtrMapPut(&im->initializers, id, (void *)t))
      return id ? false : fzOnnxModelError(im, "initializer #%zu has no "
                                               "name", i);
  }
  FzPtrVec argTypes;
  fzPtrVecInit(&argTypes, im->ctx);
  im->body = body;
  if (!fzOnnxBindInputs(im, g, body, &argTypes, bindNeeded)) {
    fzPtrVecFree(&argTypes);
    return false;
  }
  for (size_t i = 0; i < g->n_node; ++i)
    import_node(im, g->node[i], i);

  /* Results. */
  FzPtrVec results, resTypes;
  fzPtrVecInit(&results, im->ctx);
  fzPtrVecInit(&resTypes, im->ctx);
  /* A poisoned output has no value: its node or an input of it failed.
   * That failure was reported, but not always counted in numErrors (an
   * allocation failure inside the core, e.g. while materializing an
   * initializer, reports "out of memory" itself), so it fails the import
   * here: a function that silently lost a result must not be returned. */
  bool lost = false;
  for (size_t i = 0; i < g->n_output; ++i) {
    const Onnx__ValueInfoProto *vi = g->output[i];
    FzValue *v = lookup_value(im, vi->name ? vi->name : "");
    if (!v) {
      fzOnnxModelError(im, "graph output '%s' is not defined by any node",
                       vi->name);
      continue;
    }
    if (v == POISON) {
      lost = true;
      continue;
    }
    const Onnx__TypeProto *tp = vi->type;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
        tp->tensor_type->has_elem_type) {
      bool u;
      FzType *want =
          fzOnnxElementTypeU8(im->ctx, tp->tensor_type->elem_type, &u);
      if (want != fzOnnxElt(v) || u != fzOnnxIsUnsigned(im, v))
        fzOnnxModelError(im, "graph output '%s' is declared %s but its "
                             "value has another element type", vi->name,
                         fzOnnxDataTypeName(tp->tensor_type->elem_type));
    }
    fzPtrVecPush(&results, v);
    fzPtrVecPush(&resTypes, fzValueGetType(v));
  }
  bool ok = im->numErrors == 0 && !lost;
  if (ok) {
    FzOpState st;
    fzOpStateInit(&st, im->ctx, FZ_STR("func.return"), im->fileLoc);
    fzOpStateAddOperands(&st, results.len, (FzValue **)results.data);
    fzBuilderSetInsertionPointToEnd(&im->b, body);
    ok = fzBuilderCreate(&im->b, &st) != NULL;
    if (ok)
      erase_dead_ops(body);
    *funcType = fzFunctionTypeGet(im->ctx, argTypes.len,
                                  (FzType **)argTypes.data, resTypes.len,
                                  (FzType **)resTypes.data);
  }
  fzPtrVecFree(&argTypes);
  fzPtrVecFree(&results);
  fzPtrVecFree(&resTypes);
  return ok && *funcType;
}

/* builtin.module { func.func @main } around body's region; NULL after an
 * error (the region is then destroyed). */
static FzOp *make_module(FzOnnxImporter *im, FzRegion *funcBody,
                         FzType *funcType, const char *graphName) {
  FzOpState st;
  /* @main is at the graph's name (errors about the whole function, such
   * as a lowering refusing its dynamic arguments, print "model.onnx:
   * NAME: error: ..."). */
  FzLoc *loc = graphName && *graphName
                   ? fzNameLocGet(im->ctx, fzStringRefFromCString(graphName),
                                  im->fileLoc)
                   : im->fileLoc;
  fzOpStateInit(&st, im->ctx, FZ_STR("func.func"), loc ? loc : im->fileLoc);
  fzOpStateAddProp(&st, FZ_STR("sym_name"),
                   fzStringAttrGet(im->ctx, FZ_STR("main")));
  fzOpStateAddProp(&st, FZ_STR("function_type"),
                   fzTypeAttrGet(im->ctx, funcType));
  fzOpStateAddRegionTaken(&st, funcBody);
  FzOp *func = fzOpCreate(&st);
  if (!func)
    return NULL;
  fzOpStateInit(&st, im->ctx, FZ_STR("builtin.module"), im->fileLoc);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *blk = fzBlockCreate(im->ctx, 0, NULL, NULL);
  if (r && blk)
    fzRegionAppendBlock(r, blk);
  else if (blk)
    fzBlockDestroy(blk);
  FzOp *module = r && blk ? fzOpCreate(&st) : NULL;
  if (!r || !blk)
    fzOpStateDispose(&st);
  if (!module) {
    fzOpDestroy(func);
    return NULL;
  }
  fzBlockAppendOp(blk, func);
  return module;
}

/* Swallows the diagnostics of a probing import, but for those after an
 * allocation failure (out of memory must reach the caller's handlers). */
static bool quiet_handler(const FzDiagnostic *diag, void *ud) {
  (void)diag;
  return !fzContextHadAllocationFailure(ud);
}

/* One import of the decoded model, with the inputValues entries marked
 * in bindNeeded bound; quiet reports nothing. Returns the verified
 * module, or NULL. With `needed`, sets needed[k] for the ifNeeded entries
 * the import found it needs (*grew when one is new). With `bound`, fills
 * it from the inputs as bound. */
static FzOp *import_once(FzOnnxImporter *base, const Onnx__ModelProto *m,
                         bool quiet, const bool *bindNeeded, bool *needed,
                         bool *grew, bool *bound) {
  FzOnnxImporter imv = *base, *im = &imv;
  FzContext *ctx = im->ctx;
  bool oomBefore = fzContextHadAllocationFailure(ctx);
  im->quiet = quiet;
  FzDiagHandlerId h = 0;
  if (quiet)
    h = fzContextPushDiagHandler(ctx, quiet_handler, ctx);
  read_opset(im, m);
  fzArenaInit(&im->arena, ctx);
  fzPtrMapInit(&im->values, ctx);
  fzPtrMapInit(&im->initializers, ctx);
  fzPtrMapInit(&im->inputNames, ctx);
  fzPtrMapInit(&im->unsignedValues, ctx);
  fzPtrVecInit(&im->inputs, ctx);
  fzPtrVecInit(&im->argInputs, ctx);
  fzBuilderInit(&im->b, ctx);
  FzRegion *region = fzRegionCreate(ctx);
  FzBlock *body = fzBlockCreate(ctx, 0, NULL, NULL);
  FzType *funcType = NULL;
  FzOp *module = NULL;
  if (region && body) {
    fzRegionAppendBlock(region, body);
    fzBuilderSetInsertionPointToEnd(&im->b, body);
    if (import_graph(im, m->graph, body, &funcType, bindNeeded)) {
      module = make_module(im, region, funcType, m->graph->name);
      region = NULL;
    }
  } else if (body) {
    fzBlockDestroy(body);
  }
  if (needed)
    *grew = fzOnnxInputsDemanded(im, needed);
  for (size_t k = 0; bound && k < im->options->numInputValues; ++k)
    bound[k] = fzOnnxInputIsBound(im, k);
  if (region)
    fzRegionDestroy(region);
  fzPtrMapFree(&im->values);
  fzPtrMapFree(&im->initializers);
  fzPtrMapFree(&im->inputNames);
  fzPtrMapFree(&im->unsignedValues);
  fzPtrVecFree(&im->inputs);
  fzPtrVecFree(&im->argInputs);
  fzArenaReset(&im->arena);
  /* An allocation that failed may have been absorbed (a fold not done):
   * the module could differ from the one memory allows, so none. */
  if (module && (!fzOpVerify(module) ||
                 (!oomBefore && fzContextHadAllocationFailure(ctx)))) {
    fzOpDestroy(module);
    module = NULL;
  }
  if (quiet)
    fzContextPopDiagHandler(ctx, h);
  base->numErrors += im->numErrors;
  return module;
}

/* Imports the decoded model. Inputs offered with ifNeeded are bound
 * only when an import needs them: while one fails and finds an input it
 * needs that is not bound yet, it is imported again (quietly) with that
 * input bound; the last import reports its errors. */
static FzOp *import_model(FzOnnxImporter *im, const Onnx__ModelProto *m) {
  const FzOnnxImportOptions *o = im->options;
  size_t nv = o->numInputValues;
  bool anyIfNeeded = false;
  for (size_t k = 0; k < nv; ++k)
    anyIfNeeded = anyIfNeeded || o->inputValues[k].ifNeeded;
  if (!anyIfNeeded)
    return import_once(im, m, false, NULL, NULL, NULL, o->boundValues);
  bool *needed = fzCalloc(im->ctx, nv, sizeof *needed);
  if (!needed)
    return NULL;
  FzOp *module = NULL;
  bool oom = fzContextHadAllocationFailure(im->ctx);
  /* Each probe binds at least one more input, so nv + 1 imports at most. */
  for (size_t attempt = 0; attempt <= nv; ++attempt) {
    bool grew = false;
    size_t errors = im->numErrors;
    module = import_once(im, m, true, needed, needed, &grew, o->boundValues);
    im->numErrors = errors;
    if (module || !grew ||
        (!oom && fzContextHadAllocationFailure(im->ctx)))
      break;
  }
  /* Once more, saying why (not after running out of memory: that was
   * said, and the probe's demands are incomplete). */
  if (!module && (oom || !fzContextHadAllocationFailure(im->ctx)))
    module = import_once(im, m, false, needed, NULL, NULL, o->boundValues);
  fzFree(im->ctx, needed);
  return module;
}

FzOp *fzImportOnnxBuffer(FzContext *ctx, const void *data, size_t size,
                         const char *name, const char *baseDir) {
  return fzImportOnnxBufferWithOptions(ctx, data, size, name, baseDir, NULL);
}

FzOp *fzImportOnnxBufferWithOptions(FzContext *ctx, const void *data,
                                    size_t size, const char *name,
                                    const char *baseDir,
                                    const FzOnnxImportOptions *options) {
  static const FzOnnxImportOptions kDefaults = {0, NULL, 0, NULL, NULL};
  if (!fzRegisterBuiltinDialect(ctx) || !fzRegisterFuncDialect(ctx) ||
      !fzRegisterGraphDialect(ctx))
    return NULL;
  FzOnnxImporter im;
  memset(&im, 0, sizeof im);
  im.ctx = ctx;
  im.modelName = name ? name : "<onnx>";
  im.baseDir = baseDir;
  im.options = options ? options : &kDefaults;
  im.errorLoc = fzNameLocGet(ctx, fzStringRefFromCString(im.modelName),
                             NULL);
  im.fileLoc = fzFileLineColLocGet(
      ctx, fzStringRefFromCString(im.modelName), 0, 0);
  if (!im.errorLoc || !im.fileLoc)
    return NULL;
  if (size == 0) {
    fzOnnxModelError(&im, "not an ONNX model: the file is empty");
    return NULL;
  }
  if (size > FZ_ONNX_MAX_MODEL_SIZE) {
    fzOnnxModelError(&im, "not a supported ONNX model: it has %zu bytes, "
                          "more than the %zu of the largest protobuf "
                          "message", size, FZ_ONNX_MAX_MODEL_SIZE);
    return NULL;
  }
  if (!fzOnnxLooksLikeProtobuf(data, size)) {
    fzOnnxModelError(&im, "not a valid ONNX model: the protobuf data is "
                          "truncated or malformed (its first byte, 0x%02x, "
                          "starts no protobuf field)",
                     *(const unsigned char *)data);
    return NULL;
  }
  /* protobuf-c recurses once per nested message: bound the depth first
   * (as deep as IR may nest). */
  unsigned maxNesting = fzContextGetMaxNesting(ctx);
  if (!fzOnnxNestingWithin(&onnx__model_proto__descriptor, data, size,
                           maxNesting)) {
    fzOnnxModelError(&im, "not a supported ONNX model: its messages "
                          "(subgraphs, types) nest more than %u deep",
                     maxNesting);
    return NULL;
  }
  ProtobufCAllocator alloc = {pb_alloc, pb_free, ctx};
  Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, size, data);
  if (!m) {
    fzOnnxModelError(&im, "not a valid ONNX model: the protobuf data is "
                          "truncated or malformed");
    return NULL;
  }
  FzOp *module = NULL;
  if (!m->has_ir_version || !m->graph) {
    fzOnnxModelError(&im, "not an ONNX model: no %s",
                     m->has_ir_version ? "graph" : "ir_version");
  } else {
    module = import_model(&im, m);
  }
  onnx__model_proto__free_unpacked(m, &alloc);
  return module;
}

FzOp *fzImportOnnxFile(FzContext *ctx, const char *path) {
  return fzImportOnnxFileWithOptions(ctx, path, NULL);
}

FzOp *fzImportOnnxFileWithOptions(FzContext *ctx, const char *path,
                                  const FzOnnxImportOptions *options) {
  FzBuf b;
  fzBufInit(&b, ctx);
  FzOp *module = NULL;
  if (fzOnnxReadFile(ctx, path, &b)) {
    /* External data lives beside the model. */
    char *dir = fzMalloc(ctx, strlen(path) + 2);
    if (dir) {
      strcpy(dir, path);
      char *slash = strrchr(dir, '/');
      if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
      else
        strcpy(dir, ".");
      module = fzImportOnnxBufferWithOptions(ctx, b.data ? b.data : "",
                                             b.len, path, dir, options);
      fzFree(ctx, dir);
    }
  }
  fzBufFree(&b);
  return module;
}

bool fzOnnxIsModelPath(const char *path) {
  size_t n = path ? strlen(path) : 0;
  return n >= 5 && !strcasecmp(path + n - 5, ".onnx");
}
