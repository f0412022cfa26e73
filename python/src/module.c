/* python/src/module.c - the _fuse extension module: its functions and
 * the registration of every type (the files of python/src, fzpy.h).
 * fuse/__init__.py is the public face; it imports _fuse and hands it
 * the Python-level pieces (fuse.Error, fuse.Warning, fuse._as_array)
 * through _register.
 */
#include "fzpy.h"

extern PyObject *fzpyAsArray;

static PyObject *fzpy_register(PyObject *self, PyObject *args) {
  PyObject *error, *warning, *asArray;
  if (!PyArg_ParseTuple(args, "OOO", &error, &warning, &asArray))
    return NULL;
  PyObject *old[3] = {FzpyError, FzpyWarning, fzpyAsArray};
  FzpyError = Py_NewRef(error);
  FzpyWarning = Py_NewRef(warning);
  fzpyAsArray = Py_NewRef(asArray);
  for (int i = 0; i < 3; ++i)
    Py_XDECREF(old[i]);
  Py_RETURN_NONE;
}

static PyObject *fzpy_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(fzGetVersionString());
}

/* (status, why): "ready", "no-device" or "no-driver", and the reason. */
static PyObject *fzpy_cuda_status(PyObject *self, PyObject *unused) {
  char why[512] = "";
  FzCudaProbeResult r;
  Py_BEGIN_ALLOW_THREADS
  r = fzCudaProbeDevice(why, sizeof why);
  Py_END_ALLOW_THREADS
  const char *s = r == FZ_CUDA_PROBE_READY       ? "ready"
                  : r == FZ_CUDA_PROBE_NO_DEVICE ? "no-device"
                                                 : "no-driver";
  return Py_BuildValue("(ss)", s, why);
}

static PyMethodDef fzpy_functions[] = {
    {"_register", fzpy_register, METH_VARARGS, NULL},
    {"version", fzpy_version, METH_NOARGS,
     "version() -> the library's version string"},
    {"cuda_status", fzpy_cuda_status, METH_NOARGS,
     "cuda_status() -> (status, why): 'ready', 'no-device' or 'no-driver'"},
    {"compile", (PyCFunction)(void (*)(void))fzpyCompile,
     METH_VARARGS | METH_KEYWORDS, "see fuse.compile"},
    {"interpret", (PyCFunction)(void (*)(void))fzpyInterpret,
     METH_VARARGS | METH_KEYWORDS, "see fuse.interpret"},
    {"passes", fzpyListPasses, METH_VARARGS, "see fuse.passes"},
    {"pipelines", fzpyListPipelines, METH_VARARGS, "see fuse.pipelines"},
    {NULL},
};

static struct PyModuleDef fzpy_module = {
    PyModuleDef_HEAD_INIT, "_fuse",
    "The C half of the fuse package (python/src); use `import fuse`.", -1,
    fzpy_functions, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fuse(void) {
  PyObject *m = PyModule_Create(&fzpy_module);
  if (!m)
    return NULL;
  if (fzpyInitContext(m) < 0 || fzpyInitAttrs(m) < 0 || fzpyInitIR(m) < 0 ||
      fzpyInitPasses(m) < 0 || fzpyInitCompile(m) < 0 || fzpyInitCall(m) < 0) {
    Py_DECREF((PyObject *)m);
    return NULL;
  }
  return m;
}
