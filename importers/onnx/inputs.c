/* importers/onnx/inputs.c - the graph inputs of a model: their declared
 * types, their symbolic dimensions, and the import options that give
 * their shapes and values (FzOnnxImportOptions).
 *
 * Symbols. A dim declared with `dim_param` ("batch") is a symbol: every
 * dim of every graph input with the same symbol has the same size. A
 * size given for one (an input's shape or value from the options, or a
 * symbol bound by name) fixes it for all of them; two different sizes
 * for one symbol are an error. A dim neither given nor bound stays
 * dynamic ('?'), and a node that needs it static fails with a note that
 * names the symbolic dims of the graph inputs (fzOnnxNoteSymbolicDims).
 *
 * Checks. A shape or a value given for an input must have the declared
 * rank, and the declared size wherever the model declares a static dim:
 * the options make symbolic dims static, they never contradict the model.
 *
 * Demand. fzOnnxDemandInputs (called when a node needs a constant
 * operand that is not one) finds the graph inputs the operand's value is
 * computed from, so that the driver can bind those of them whose values
 * the options offer with `ifNeeded` and import again (model.c).
 */
#include <stdio.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* One graph input that is not an initializer. */
struct FzOnnxInput {
  const char *name;
  size_t pos;   /* among the graph inputs that are not initializers */
  FzType *elt;  /* NULL: its type was refused (reported) */
  bool isUnsigned; /* UINT8..UINT64 (elt is i8..i64) */
  size_t rank;
  int64_t shape[FZ_GRAPH_MAX_RANK];            /* declared; FZ_DYNAMIC */
  const char *symbols[FZ_GRAPH_MAX_RANK];      /* dim_param, or NULL */
  bool given;                                  /* shape from the options */
  int64_t givenShape[FZ_GRAPH_MAX_RANK];
  const FzTensor *value; /* bound to this value (a constant) */
  bool valueBits16;      /* value is i16 holding this f16/bf16 input's bits */
  long valueOption;      /* the inputValues entry offering a value, or -1 */
  bool demanded;         /* its value is needed at import */
};

/* A symbol's size, and where it came from (for messages). */
typedef struct Symbol {
  const char *name;
  int64_t size;
  const char *from; /* "graph input 'x'" or "the option" */
} Symbol;

/*===--- Declared types ------------------------------------------------===*/

/* Fills in's element type, rank, declared shape and symbols from vi;
 * in->elt stays NULL after an error. */
static void read_declared(FzOnnxImporter *im, const Onnx__ValueInfoProto *vi,
                          FzOnnxInput *in) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    const char *kind = !tp ? "no type"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE
                           ? "a sequence"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE
                           ? "a map"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE
                           ? "an optional"
                           : "a non-tensor type";
    fzOnnxModelError(im, "graph input '%s': unsupported type (%s)", in->name,
                     kind);
    return;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  FzType *elt = fzOnnxElementTypeU8(im->ctx, tt->elem_type,
                                    &in->isUnsigned);
  if (!elt) {
    fzOnnxModelError(im, "graph input '%s': unsupported dtype %s", in->name,
                     fzOnnxDataTypeName(tt->elem_type));
    return;
  }
  if (!tt->shape) {
    fzOnnxModelError(im, "graph input '%s': unsupported unranked tensor (no "
                         "shape)", in->name);
    return;
  }
  size_t rank = tt->shape->n_dim;
  if (rank > FZ_GRAPH_MAX_RANK) {
    fzOnnxModelError(im, "graph input '%s': unsupported rank %zu", in->name,
                     rank);
    return;
  }
  for (size_t i = 0; i < rank; ++i) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    bool known = d->value_case ==
                 ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    in->shape[i] = known && d->dim_value >= 0 ? d->dim_value : FZ_DYNAMIC;
    in->symbols[i] =
        d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                d->dim_param && *d->dim_param
            ? d->dim_param
            : NULL;
    if (in->shape[i] > FZ_MAX_DIM) {
      fzOnnxModelError(im, "graph input '%s': dimension %zu (%lld) is "
                           "larger than 2^40", in->name, i,
                       (long long)in->shape[i]);
      return;
    }
  }
  in->rank = rank;
  in->elt = elt;
}

/* "1x3x224x224", "?x3" into buf. */
static const char *shape_text(char *buf, size_t cap, size_t rank,
                              const int64_t *shape) {
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < rank && n < cap; ++i) {
    if (shape[i] == FZ_DYNAMIC)
      n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? "x" : "");
    else
      n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "x" : "",
                            (long long)shape[i]);
  }
  if (rank == 0)
    snprintf(buf, cap, "a scalar");
  return buf;
}

/* Checks a shape the options give for `in` (`what`: "the shape given",
 * "the value given") against the declared one: the same rank, the
 * declared size at every static dim. Dims given as FZ_DYNAMIC stay
 * dynamic. */
static bool check_against_declared(FzOnnxImporter *im, const FzOnnxInput *in,
                                   size_t rank, const int64_t *shape,
                                   const char *what) {
  char a[160], b[160];
  if (rank != in->rank)
    return fzOnnxModelError(im, "graph input '%s' has rank %zu (%s), but %s "
                                "for it has rank %zu (%s)", in->name,
                            in->rank, shape_text(a, sizeof a, in->rank,
                                                 in->shape),
                            what, rank, shape_text(b, sizeof b, rank, shape));
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] != FZ_DYNAMIC && (shape[i] < 0 || shape[i] > FZ_MAX_DIM))
      return fzOnnxModelError(im, "graph input '%s': %s has dimension %zu "
                                  "out of range (%lld)", in->name, what, i,
                              (long long)shape[i]);
    if (in->shape[i] != FZ_DYNAMIC && shape[i] != FZ_DYNAMIC &&
        shape[i] != in->shape[i])
      return fzOnnxModelError(im, "graph input '%s' is declared %s, but %s "
                                  "for it is %s (dimension %zu differs; only "
                                  "symbolic dimensions can be given)",
                              in->name,
                              shape_text(a, sizeof a, in->rank, in->shape),
                              what, shape_text(b, sizeof b, rank, shape), i);
  }
  return true;
}

/*===--- Symbols -------------------------------------------------------===*/

static Symbol *find_symbol(FzPtrVec *syms, const char *name) {
  for (size_t i = 0; i < syms->len; ++i) {
    Symbol *s = syms->data[i];
    if (!strcmp(s->name, name))
      return s;
  }
  return NULL;
}

/* Binds symbol `name` to size; an error when it is bound to another. */
static bool bind_symbol(FzOnnxImporter *im, FzPtrVec *syms, const char *name,
                        int64_t size, const char *from) {
  if (size == FZ_DYNAMIC)
    return true;
  Symbol *s = find_symbol(syms, name);
  if (s) {
    if (s->size == size)
      return true;
    return fzOnnxModelError(im, "symbolic dimension '%s' is %lld for %s but "
                                "%lld for %s", name, (long long)s->size,
                            s->from, (long long)size, from);
  }
  s = fzOnnxAlloc(im, sizeof *s);
  if (!s)
    return false;
  s->name = name;
  s->size = size;
  s->from = from;
  return fzPtrVecPush(syms, s);
}

/* Binds the symbols of in's dims from a shape given for it. */
static bool bind_from_shape(FzOnnxImporter *im, FzPtrVec *syms,
                            const FzOnnxInput *in, const int64_t *shape) {
  char *from = fzOnnxAlloc(im, strlen(in->name) + 16);
  if (!from)
    return false;
  sprintf(from, "graph input '%s'", in->name);
  bool ok = true;
  for (size_t i = 0; i < in->rank; ++i)
    if (in->symbols[i])
      ok = bind_symbol(im, syms, in->symbols[i], shape[i], from) && ok;
  return ok;
}

/* Whether some graph input has a dim named `symbol`. */
static bool is_symbol(FzOnnxInput *const *inputs, size_t n,
                      const char *symbol) {
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; inputs[k]->elt && i < inputs[k]->rank; ++i)
      if (inputs[k]->symbols[i] && !strcmp(inputs[k]->symbols[i], symbol))
        return true;
  return false;
}

/*===--- Binding -------------------------------------------------------===*/

/* Whether option entry (name, index) designates `in`. */
static bool option_matches(const char *optName, size_t optIndex,
                           const FzOnnxInput *in) {
  return optName ? !strcmp(optName, in->name) : optIndex == in->pos;
}

static FzOnnxInput *find_input(FzOnnxInput *const *inputs, size_t n,
                               const char *name, size_t index) {
  for (size_t k = 0; k < n; ++k)
    if (option_matches(name, index, inputs[k]))
      return inputs[k];
  return NULL;
}

/* Reads the inputs' declared types and applies the options: shapes,
 * symbols, and values (bound when the entry has no ifNeeded, or when
 * bindNeeded[k] says the import needs entry k). Fills im->inputs. */
static bool apply_options(FzOnnxImporter *im, const bool *bindNeeded) {
  const FzOnnxImportOptions *opts = im->options;
  FzOnnxInput **inputs = (FzOnnxInput **)im->inputs.data;
  size_t n = im->inputs.len;
  FzPtrVec syms;
  fzPtrVecInit(&syms, im->ctx);
  bool ok = true;
  /* Shapes first: by input, else a symbol by name. */
  for (size_t k = 0; k < opts->numInputShapes; ++k) {
    const FzOnnxInputShape *o = &opts->inputShapes[k];
    FzOnnxInput *in = find_input(inputs, n, o->name, o->index);
    if (!in && o->name && o->rank == 1 && is_symbol(inputs, n, o->name)) {
      ok = bind_symbol(im, &syms, o->name, o->shape[0],
                       "the size given") && ok;
      continue;
    }
    if (!in) {
      ok = o->name ? fzOnnxModelError(im, "no graph input or symbolic "
                                          "dimension named '%s' (given a "
                                          "shape)", o->name)
                   : fzOnnxModelError(im, "no graph input #%zu (given a "
                                          "shape)", o->index);
      continue;
    }
    if (!in->elt)
      continue;
    if (o->rank > FZ_GRAPH_MAX_RANK || in->given ||
        !check_against_declared(im, in, o->rank, o->shape,
                                "the shape given")) {
      if (in->given)
        ok = fzOnnxModelError(im, "graph input '%s' is given two shapes",
                              in->name);
      else if (o->rank > FZ_GRAPH_MAX_RANK)
        ok = fzOnnxModelError(im, "graph input '%s': unsupported rank %zu",
                              in->name, o->rank);
      else
        ok = false;
      continue;
    }
    in->given = true;
    if (o->rank)
      memcpy(in->givenShape, o->shape, o->rank * sizeof *o->shape);
    ok = bind_from_shape(im, &syms, in, o->shape) && ok;
  }
  /* Values: bound, or (ifNeeded and not needed) shapes. */
  for (size_t k = 0; k < opts->numInputValues; ++k) {
    const FzOnnxInputValue *o = &opts->inputValues[k];
    FzOnnxInput *in = find_input(inputs, n, o->name, o->index);
    if (!in) {
      ok = o->name ? fzOnnxModelError(im, "no graph input named '%s' (given "
                                          "a value)", o->name)
                   : fzOnnxModelError(im, "no graph input #%zu (given a "
                                          "value)", o->index);
      continue;
    }
    if (!in->elt)
      continue;
    if (in->valueOption >= 0) {
      ok = fzOnnxModelError(im, "graph input '%s' is given two values",
                            in->name);
      continue;
    }
    in->valueOption = (long)k;
    /* UINT16 data for a FLOAT16/BFLOAT16 input: that type's bits. */
    bool bits16 = o->value && o->uint16Bits &&
                  o->value->dtype == fzIntegerTypeGet(im->ctx, 16) &&
                  (fzTypeGetKind(in->elt) == FZ_TYPE_BF16 ||
                   fzTypeGetKind(in->elt) == FZ_TYPE_F16);
    if (!o->value || (o->value->dtype != in->elt && !bits16)) {
      ok = fzOnnxModelError(im, "graph input '%s': the value given for it "
                                "has another element type", in->name);
      continue;
    }
    if (!check_against_declared(im, in, o->value->rank, o->value->shape,
                                "the value given")) {
      ok = false;
      continue;
    }
    if (in->given) {
      for (size_t i = 0; i < in->rank; ++i)
        if (in->givenShape[i] != FZ_DYNAMIC &&
            in->givenShape[i] != o->value->shape[i]) {
          ok = fzOnnxModelError(im, "graph input '%s': the value given for "
                                    "it has another shape than the shape "
                                    "given", in->name);
          break;
        }
    }
    ok = bind_from_shape(im, &syms, in, o->value->shape) && ok;
    if (!o->ifNeeded || (bindNeeded && bindNeeded[k])) {
      in->value = o->value;
      in->valueBits16 = bits16;
    }
    in->given = true;
    if (o->value->rank) /* a scalar's shape is NULL */
      memcpy(in->givenShape, o->value->shape,
             o->value->rank * sizeof *o->value->shape);
  }
  /* Every input's final shape: given, else declared with its symbols. */
  for (size_t k = 0; ok && k < n; ++k) {
    FzOnnxInput *in = inputs[k];
    if (!in->elt)
      continue;
    for (size_t i = 0; i < in->rank; ++i) {
      int64_t d = in->given ? in->givenShape[i] : FZ_DYNAMIC;
      if (d == FZ_DYNAMIC)
        d = in->shape[i];
      if (d == FZ_DYNAMIC && in->symbols[i]) {
        Symbol *s = find_symbol(&syms, in->symbols[i]);
        d = s ? s->size : FZ_DYNAMIC;
      }
      in->givenShape[i] = d;
    }
    in->given = true;
  }
  fzPtrVecFree(&syms);
  return ok;
}

bool fzOnnxBindInputs(FzOnnxImporter *im, const Onnx__GraphProto *g,
                      FzBlock *body, FzPtrVec *argTypes,
                      const bool *bindNeeded) {
  fzPtrVecInit(&im->inputs, im->ctx);
  fzPtrVecInit(&im->argInputs, im->ctx);
  for (size_t i = 0, pos = 0; i < g->n_input; ++i) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    const char *name = vi->name ? vi->name : "";
    FzIdent *id = fzIdentGet(im->ctx, fzStringRefFromCString(name));
    /* ONNX names each value once: a second input of the same name would
     * silently replace the first one's binding. */
    if (id && fzPtrMapContains(&im->inputNames, id)) {
      fzOnnxModelError(im, "graph input '%s' is listed twice", name);
      continue;
    }
    if (id && !fzPtrMapPut(&im->inputNames, id, (void *)vi))
      return false;
    if (!id || fzPtrMapContains(&im->initializers, id))
      continue;
    FzOnnxInput *in = fzOnnxAlloc(im, sizeof *in);
    if (!in)
      return false;
    memset(in, 0, sizeof *in);
    in->name = name;
    in->pos = pos++;
    in->valueOption = -1;
    read_declared(im, vi, in);
    if (!fzPtrVecPush(&im->inputs, in))
      return false;
  }
  if (!apply_options(im, bindNeeded)) {
    /* Each input still gets a value (poison), so that nothing reads an
     * undefined name as a missing one. */
    for (size_t k = 0; k < im->inputs.len; ++k)
      fzOnnxDefineValue(im, ((FzOnnxInput *)im->inputs.data[k])->name, NULL);
    return true;
  }
  for (size_t k = 0; k < im->inputs.len; ++k) {
    FzOnnxInput *in = im->inputs.data[k];
    FzLoc *nameLoc = fzNameLocGet(im->ctx, fzStringRefFromCString(in->name),
                                  im->fileLoc);
    FzType *t = in->elt ? fzTensorTypeGet(im->ctx, in->rank, in->givenShape,
                                          in->elt, im->errorLoc)
                        : NULL;
    if (t && in->value) {
      FzAttr *meta = fzStringAttrGet(im->ctx, FZ_STR("Input"));
      im->nodeLoc = fzFusedLocGet(im->ctx, 1, &nameLoc, meta);
      FzTensor view = *in->value; /* the same bytes, as the input's type */
      if (in->valueBits16)
        view.dtype = in->elt;
      FzValue *c = fzOnnxConstTensor(im, &view);
      if (in->isUnsigned)
        fzOnnxMarkUnsigned(im, c);
      fzOnnxDefineValue(im, in->name, c);
      continue;
    }
    FzValue *arg = t ? fzBlockAddArgument(body, t, nameLoc) : NULL;
    if (arg && in->isUnsigned)
      fzOnnxMarkUnsigned(im, arg);
    fzOnnxDefineValue(im, in->name, arg);
    if (!t)
      continue;
    if (!fzPtrVecPush(argTypes, t) || !fzPtrVecPush(&im->argInputs, in))
      return false;
  }
  return true;
}

/*===--- Demand --------------------------------------------------------===*/

/* Marks the inputs whose arguments v is computed from (a walk up the
 * operands, each op once). */
static void demand_walk(FzOnnxImporter *im, FzValue *v, FzPtrMap *seen) {
  FzPtrVec stack;
  fzPtrVecInit(&stack, im->ctx);
  if (!fzPtrVecPush(&stack, v))
    return;
  while (stack.len) {
    FzValue *x = stack.data[--stack.len];
    FzOp *def = fzValueGetDefiningOp(x);
    if (!def) {
      if (fzValueGetParentBlock(x) != im->body)
        continue;
      size_t arg = fzValueGetIndex(x);
      if (arg < im->argInputs.len)
        ((FzOnnxInput *)im->argInputs.data[arg])->demanded = true;
      continue;
    }
    if (fzPtrMapContains(seen, def))
      continue;
    if (!fzPtrMapPut(seen, def, def))
      break;
    for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
      if (!fzPtrVecPush(&stack, fzOpGetOperand(def, i)))
        break;
  }
  fzPtrVecFree(&stack);
}

void fzOnnxDemandInputs(FzOnnxImporter *im, FzValue *v) {
  if (!v)
    return;
  FzPtrMap seen;
  fzPtrMapInit(&seen, im->ctx);
  demand_walk(im, v, &seen);
  fzPtrMapFree(&seen);
}

bool fzOnnxInputsDemanded(FzOnnxImporter *im, bool *needed) {
  bool grew = false;
  for (size_t k = 0; k < im->inputs.len; ++k) {
    FzOnnxInput *in = im->inputs.data[k];
    if (!in->demanded || in->valueOption < 0 || in->value)
      continue;
    if (!needed[in->valueOption])
      grew = true;
    needed[in->valueOption] = true;
  }
  return grew;
}

bool fzOnnxInputIsBound(FzOnnxImporter *im, size_t option) {
  for (size_t k = 0; k < im->inputs.len; ++k) {
    FzOnnxInput *in = im->inputs.data[k];
    if (in->valueOption == (long)option)
      return in->value != NULL;
  }
  return false;
}

/*===--- Notes ---------------------------------------------------------===*/

void fzOnnxNoteSymbolicDims(FzOnnxImporter *im, FzDiagnostic *diag) {
  size_t shown = 0;
  for (size_t k = 0; k < im->argInputs.len && shown < 4; ++k) {
    FzOnnxInput *in = im->argInputs.data[k];
    char dims[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < in->rank && len < sizeof dims; ++i)
      if (in->givenShape[i] == FZ_DYNAMIC)
        len += (size_t)snprintf(dims + len, sizeof dims - len,
                                "%s%zu%s%s%s", len ? ", " : "", i,
                                in->symbols[i] ? " ('" : "",
                                in->symbols[i] ? in->symbols[i] : "",
                                in->symbols[i] ? "')" : "");
    if (!len)
      continue;
    shown++;
    fzDiagAttachNote(diag, im->errorLoc,
                     "graph input '%s' has dynamic dimension%s %s: give its "
                     "shape (--input-shape %s=DIMS, or fuse-run's inputs) "
                     "to make %s static",
                     in->name, strchr(dims, ',') ? "s" : "", dims, in->name,
                     strchr(dims, ',') ? "them" : "it");
  }
}
