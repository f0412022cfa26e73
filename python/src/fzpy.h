/* python/src/fzpy.h - what the files of the _fuse extension module share.
 *
 * The extension is a front end like tools/: it links libfuse.so and uses
 * only the exported API of include/fz (the build's layer check holds it
 * to that). It is written against Python's stable ABI (Py_LIMITED_API
 * 3.11: one _fuse.abi3.so for every CPython from 3.11 on, Debian's 3.11
 * and the GPU machine's 3.12 alike), so it touches no object's layout
 * but its own and uses no numpy C API: arrays come in through the buffer
 * protocol or DLPack and go out as numpy arrays made by numpy.empty.
 *
 * Objects and lifetimes (docs/api.md, docs/python.md "Lifetimes"):
 *  - Context owns an FzContext, a lock, and the diagnostics caught by
 *    its handler (every diagnostic of the context goes to that handler:
 *    nothing is printed behind the user's back).
 *  - Module owns a detached builtin.module and keeps its Context alive.
 *  - Operation, Block, Region and Value point into a Module's IR and
 *    keep the Module alive; each remembers the module's generation when
 *    it was made, and a pass run bumps it, so that a handle to IR a pass
 *    may have erased raises instead of reading freed memory.
 *  - Type, Attribute and Location are uniqued and immortal in their
 *    context, and keep the Context alive.
 *  - PassManager and Executable (a compiled model) keep their Context
 *    alive; a DeviceArray (GPU memory) keeps its Executable alive.
 *
 * Threads. Every call into the library holds its context's lock
 * (fzpyEnter/fzpyLeave), and the long ones (import, compile, a pass
 * run, a model call, the interpreter) release the GIL while they run:
 * two Python threads may use one context, one at a time, and different
 * contexts in parallel. Diagnostics are copied into the context while
 * the lock is held (no Python object is touched without the GIL) and
 * turned into Python objects, user handlers and exceptions afterwards.
 */
#ifndef FZPY_H
#define FZPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <structmember.h>

#include <stdlib.h>

#include "fz/fz.h"
#include "fz/cuda_run.h"

/* Memory touched without the GIL (diagnostics caught by the handler,
 * text printed during a compile, aligned copies of arrays): the C
 * library's allocator, as PyMem_Raw* is not part of the stable ABI. */
#define FZPY_MALLOC(n) malloc(n)
#define FZPY_CALLOC(n, size) calloc((n), (size))
#define FZPY_REALLOC(p, n) realloc((p), (n))
#define FZPY_FREE(p) free(p)

/*===--- Diagnostics caught while the lock is held ---------------------===*/

typedef struct FzpyDiag {
  FzSeverity severity;
  FzLoc *loc;             /* immortal in the context */
  char *message;          /* FZPY_MALLOC */
  char *text;             /* rendered as the default printer does */
  size_t numNotes;
  struct FzpyDiag *notes; /* FZPY_MALLOC array */
} FzpyDiag;

typedef struct FzpyDiagList {
  FzpyDiag *items;
  size_t count, cap;
} FzpyDiagList;

void fzpyDiagListFree(FzpyDiagList *l);

/*===--- Context ------------------------------------------------------===*/

typedef struct ContextObject {
  PyObject_HEAD
  FzContext *ctx;
  PyThread_type_lock lock;
  /* The lock is reentrant on its thread: a finalizer that the garbage
   * collector runs while the lock is held (it may destroy a Module of
   * this context) enters again instead of waiting for itself. */
  volatile unsigned long owner;
  unsigned depth;
  FzDiagHandlerId handler;
  FzpyDiagList pending; /* filled by the handler, under the lock */
  /* Destructions that found the lock held by another thread (a
   * finalizer must not wait behind a long compile, nor deadlock against
   * a thread that waits for a lock it holds): run by that thread when it
   * leaves. Guarded by the GIL, which fzpyLeave always holds. */
  struct FzpyDeferred *deferred;
  size_t numDeferred, capDeferred;
  PyObject *handlers;   /* list of Python callables, newest last */
} ContextObject;

extern PyTypeObject *FzpyContextType;
extern PyTypeObject *FzpyModuleType;
extern PyTypeObject *FzpyOperationType;
extern PyTypeObject *FzpyBlockType;
extern PyTypeObject *FzpyRegionType;
extern PyTypeObject *FzpyValueType;
extern PyTypeObject *FzpyTypeType;
extern PyTypeObject *FzpyAttributeType;
extern PyTypeObject *FzpyLocationType;
extern PyTypeObject *FzpyDiagnosticType;
extern PyTypeObject *FzpyPassManagerType;
extern PyTypeObject *FzpyExecutableType;
extern PyTypeObject *FzpyDeviceArrayType;

/* fuse.Error and fuse.Warning (registered by fuse/__init__.py; until
 * then RuntimeError and RuntimeWarning). */
extern PyObject *FzpyError;
extern PyObject *FzpyWarning;

/* A new context with every dialect and pass registered, or NULL with an
 * exception set. */
ContextObject *fzpyContextNew(void);
/* ctx when it is a Context, a new one when it is None/NULL; a new
 * reference, or NULL with TypeError. */
ContextObject *fzpyContextOrNew(PyObject *ctx);

/* Takes the context's lock (waiting without the GIL when another thread
 * holds it). */
void fzpyEnter(ContextObject *c);
/* Releases it, moving the caught diagnostics into *out. */
void fzpyLeave(ContextObject *c, FzpyDiagList *out);
/* Hands caught diagnostics to the user handlers (newest first; a true
 * result claims one), then: when `failed`, raises fuse.Error with the
 * unclaimed errors and returns -1; otherwise warns (fuse.Warning) with
 * unclaimed errors and warnings and returns 0. Unclaimed remarks are
 * appended to `remarks` when it is a list, else dropped. Frees the
 * list. */
int fzpyDispatch(ContextObject *c, FzpyDiagList *list, bool failed,
                 PyObject *remarks);
/* Runs fn(arg) (destroying something of the context: a module, a pass
 * manager, a compiled model's native parts) with the lock held, now
 * when it is free or this thread's, else when its holder leaves. Its
 * diagnostics are dropped. For finalizers (GIL held). */
typedef void (*FzpyDestroyFn)(void *arg);
void fzpyDestroy(ContextObject *c, FzpyDestroyFn fn, void *arg);
/* fzpyLeave + fzpyDispatch: 0, or -1 with an exception set. */
int fzpyFinish(ContextObject *c, bool ok, PyObject *remarks);

/* Raises fuse.Error with a message of its own (no diagnostic). */
PyObject *fzpyRaise(const char *fmt, ...);

/*===--- IR handles ---------------------------------------------------===*/

typedef struct ModuleObject {
  PyObject_HEAD
  ContextObject *ctx;
  FzOp *op;            /* the builtin.module; owned */
  uint64_t generation; /* bumped by every pass run on it */
} ModuleObject;

/* Operation, Block, Region and Value. */
typedef struct IRObject {
  PyObject_HEAD
  ModuleObject *module;
  uint64_t generation;
  void *ptr;
} IRObject;

/* Type, Attribute, Location. */
typedef struct HandleObject {
  PyObject_HEAD
  ContextObject *ctx;
  void *ptr;
} HandleObject;

/* A Module owning `op` (stolen) in ctx; NULL with an exception (op is
 * then destroyed, under the lock the caller holds or not: the caller
 * says). */
ModuleObject *fzpyModuleNew(ContextObject *ctx, FzOp *op);
PyObject *fzpyIRNew(PyTypeObject *type, ModuleObject *m, void *ptr);
PyObject *fzpyHandleNew(PyTypeObject *type, ContextObject *ctx, void *ptr);
/* Each returns Py_None (new reference) for NULL. */
PyObject *fzpyTypeNew(ContextObject *ctx, FzType *t);
PyObject *fzpyAttrNew(ContextObject *ctx, FzAttr *a);
PyObject *fzpyLocNew(ContextObject *ctx, FzLoc *l);
/* A hash of a handle's pointer (== compares pointers). */
Py_hash_t fzpyHashPointer(const void *p);
/* A numpy array holding a copy of t's elements; NULL with an exception. */
PyObject *fzpyTensorToNumpy(const FzTensor *t);

/* The entry function of module: `entry` (a name, may be NULL), else
 * @main, else the only function with a body. NULL with the reason in
 * why (whySize bytes). Under the lock. */
FzOp *fzpyFindEntry(FzOp *module, const char *entry, char *why,
                    size_t whySize);

/* Text through a print callback, into a growing FZPY_MALLOC buffer. */
typedef struct FzpyText {
  char *data;
  size_t len, cap;
  bool failed;
} FzpyText;
void fzpyTextAppend(FzStringRef chunk, void *userData);
/* The text as a str (consumes and frees the buffer). */
PyObject *fzpyTextTake(FzpyText *t);

/*===--- Arrays in and out (call.c) -----------------------------------===*/

/* The element types fuse's tensors support. */
typedef enum FzpyDType {
  FZPY_F16, FZPY_BF16, FZPY_F32, FZPY_F64, FZPY_BOOL,
  FZPY_I8, FZPY_I16, FZPY_I32, FZPY_I64, FZPY_NUM_DTYPES,
  FZPY_NO_DTYPE = -1
} FzpyDType;

FzpyDType fzpyDTypeOf(const FzType *t);
const char *fzpyDTypeName(FzpyDType d);
size_t fzpyDTypeSize(FzpyDType d);
FzType *fzpyDTypeType(FzContext *ctx, FzpyDType d);
/* A numpy dtype object for d (bf16: ml_dtypes.bfloat16 when it is
 * installed, else uint16 holding the bits); borrowed; NULL with an
 * exception. */
PyObject *fzpyNumpyDType(FzpyDType d);
/* numpy.empty(shape, dtype of d): a new reference, or NULL. */
PyObject *fzpyNumpyEmpty(FzpyDType d, size_t rank, const int64_t *shape);
/* The same with a writable view of its memory in *view (the caller
 * releases it). */
PyObject *fzpyNumpyEmptyView(FzpyDType d, size_t rank, const int64_t *shape,
                             Py_buffer *view);

/* One array argument, borrowed for the length of a call. */
typedef struct FzpyArray {
  FzpyDType dtype;
  size_t rank;
  int64_t shape[FZ_TENSOR_MAX_RANK];
  void *data;     /* host or device address of the first element */
  bool device;    /* on the CUDA device (DLPack kDLCUDA) */
  bool writable;
  size_t bytes;
  /* What to release. */
  Py_buffer view;
  bool haveView;
  void *dlpack;   /* DLManagedTensor *, its deleter called at release */
  PyObject *keep; /* an object made for the call (a converted array) */
  void *copy;     /* a contiguous, aligned copy (FZPY_MALLOC), when made */
  void *strided;  /* the original data when `copy` replaced it */
  int64_t strides[FZ_TENSOR_MAX_RANK]; /* in bytes, for `strided` */
} FzpyArray;

/* Fills *a from obj (numpy array, buffer, __dlpack__ object, or
 * anything numpy.asarray takes); `what` names it in errors. Returns 0,
 * or -1 with an exception (a.release still safe). `align` is the
 * alignment the data must have (a copy is made when it has not; 0: any);
 * `writable` asks for writable memory (outputs). */
int fzpyArrayGet(PyObject *obj, FzpyArray *a, size_t align, bool writable,
                 bool allowDevice, const char *what);
/* Copies a made copy back to the strided original (outputs). */
void fzpyArrayWriteBack(FzpyArray *a);
void fzpyArrayRelease(FzpyArray *a);

/* "float32[2, 4]" into buf. */
void fzpyFormatSpec(char *buf, size_t size, FzpyDType d, size_t rank,
                    const int64_t *shape);

/*===--- Compiled models (compile.c, call.c) ---------------------------===*/

typedef enum FzpyDevice { FZPY_DEVICE_CPU, FZPY_DEVICE_CUDA } FzpyDevice;

/* One argument of a compiled function (inputs, then outputs). */
typedef struct FzpyArgSpec {
  FzpyDType dtype;
  size_t rank;
  int64_t shape[FZ_TENSOR_MAX_RANK];
  size_t bytes;
  PyObject *shape_tuple; /* the shape as a tuple of ints */
} FzpyArgSpec;

typedef struct ExecutableObject {
  PyObject_HEAD
  ContextObject *ctx;
  PyObject *module;  /* the fuse.Module that was compiled (graph level) */
  FzpyDevice device;
  char entry[256];
  size_t numIn, numOut;
  FzpyArgSpec *args; /* numIn + numOut, PyMem */
  FzCpuRuntime *rt;  /* cpu */
  FzCpuExecutable *exe;
  FzCpuFunction *fn;
  FzCuda *cu;        /* cuda */
  FzGpuProgram *prog;
  FzCudaCall *call;  /* one call, reused: its buffers and CUDA graph */
  PyObject *report;  /* the fusion report (str) */
  PyObject *remarks; /* list of Diagnostic */
  double seconds;    /* compile time */
  char deviceName[128];
} ExecutableObject;

/*===--- Entry points of the files -------------------------------------===*/

int fzpyInitContext(PyObject *m);
int fzpyInitIR(PyObject *m);
int fzpyInitAttrs(PyObject *m);
int fzpyInitPasses(PyObject *m);
int fzpyInitCompile(PyObject *m);
int fzpyInitCall(PyObject *m);

PyObject *fzpyCompile(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *fzpyInterpret(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *fzpyListPasses(PyObject *self, PyObject *args);
PyObject *fzpyListPipelines(PyObject *self, PyObject *args);

/* Executable's call (tp_call) and its DeviceArray results (call.c). */
PyObject *fzpyExecutableCall(PyObject *self, PyObject *args,
                             PyObject *kwargs);
PyObject *fzpyExecutableBench(PyObject *self, PyObject *args,
                              PyObject *kwargs);

/* A helper type's slots: dealloc of an object whose only reference is
 * `first` (Context-owning handles). */
#define FZPY_TYPE_FREE(self)                                              \
  do {                                                                     \
    PyTypeObject *tp_ = Py_TYPE(self);                                     \
    freefunc free_ = (freefunc)PyType_GetSlot(tp_, Py_tp_free);            \
    free_(self);                                                           \
    Py_DECREF(tp_);                                                        \
  } while (0)

#endif /* FZPY_H */
