/* python/src/interp.c - fuse.interpret: a function of a Module on the
 * reference interpreter (fzInterpretFunction), the oracle that compiled
 * code is checked against.
 *
 * Inputs are copied into host tensors of the module's context (the
 * interpreter checks their element types and shapes against the
 * function's and reports a mismatch naming the argument); the outputs
 * come back as new numpy arrays. The lock is held and the GIL released
 * while the interpreter runs.
 */
#include <string.h>

#include "fzpy.h"

static void destroy_tensors(FzTensor **t, size_t n) {
  for (size_t i = 0; t && i < n; ++i)
    fzTensorDestroy(t[i]);
}

PyObject *fzpyInterpret(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"module", "inputs", "entry", NULL};
  PyObject *mod, *inputs;
  const char *entry = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O|z", kw, FzpyModuleType,
                                   &mod, &inputs, &entry))
    return NULL;
  ModuleObject *m = (ModuleObject *)mod;
  PyObject *seq = PySequence_Tuple(inputs);
  if (!seq)
    return NULL;
  size_t n = (size_t)PyTuple_Size(seq);
  FzpyArray *arrays = PyMem_Calloc(n + 1, sizeof *arrays);
  FzTensor **tensors = PyMem_Calloc(n + 1, sizeof *tensors);
  if (!arrays || !tensors) {
    Py_DECREF(seq);
    PyMem_Free(arrays);
    PyMem_Free(tensors);
    return PyErr_NoMemory();
  }
  int rc = 0;
  char what[64];
  for (size_t i = 0; rc == 0 && i < n; ++i) {
    snprintf(what, sizeof what, "input #%zu", i);
    rc = fzpyArrayGet(PyTuple_GetItem(seq, (Py_ssize_t)i), &arrays[i], 0,
                      false, false, what);
  }
  PyObject *result = NULL;
  if (rc == 0) {
    ContextObject *c = m->ctx;
    char why[512] = "";
    size_t nOut = 0;
    FzTensor **outs = NULL;
    bool ok = true;
    fzpyEnter(c);
    FzOp *func = fzpyFindEntry(m->op, entry, why, sizeof why);
    for (size_t i = 0; func && ok && i < n; ++i) {
      FzpyArray *a = &arrays[i];
      tensors[i] = fzTensorCreate(c->ctx, fzpyDTypeType(c->ctx, a->dtype),
                                  a->rank, a->shape);
      ok = tensors[i] != NULL;
      if (ok && a->bytes)
        memcpy(tensors[i]->data, a->data, a->bytes);
    }
    if (func && ok) {
      Py_BEGIN_ALLOW_THREADS
      ok = fzInterpretFunction(func, n, tensors, NULL, &nOut, &outs);
      Py_END_ALLOW_THREADS
    }
    if (fzpyFinish(c, ok, NULL) == 0) {
      if (!func) {
        fzpyRaise("fuse: %s", why);
      } else {
        result = PyTuple_New((Py_ssize_t)nOut);
        for (size_t i = 0; result && i < nOut; ++i) {
          PyObject *a = fzpyTensorToNumpy(outs[i]);
          if (!a)
            Py_CLEAR(result);
          else
            PyTuple_SetItem(result, (Py_ssize_t)i, a);
        }
      }
    }
    fzpyEnter(c);
    destroy_tensors(tensors, n);
    if (outs)
      fzTensorArrayDestroy(c->ctx, nOut, outs);
    FzpyDiagList l;
    fzpyLeave(c, &l);
    fzpyDiagListFree(&l);
  }
  for (size_t i = 0; i < n; ++i)
    fzpyArrayRelease(&arrays[i]);
  PyMem_Free(arrays);
  PyMem_Free(tensors);
  Py_DECREF(seq);
  return result;
}
