/* fz/fz.h - the whole fuse embedding API in one include.
 *
 *   #include <fz/fz.h>
 *
 * pulls in every public header, in dependency order. Each header is also
 * usable on its own; this one exists so that an embedder need not know
 * which header declares what. docs/api.md states the contract these
 * headers make: compatibility promise, ownership rules, thread safety,
 * extension points.
 *
 *   fz/support.h   version, sized strings, FZ_MUST_CHECK, print callbacks
 *   fz/ir.h        context, types, attributes, locations, operations,
 *                  blocks, regions, builder, diagnostics, parse/print/verify
 *   fz/opdef.h     defining dialects and ops from C (traits, hooks),
 *                  custom assembly (FzAsmPrinter / FzAsmParser)
 *   fz/dialects.h  registering the built-in dialects
 *   fz/pass.h      patterns, rewriter, greedy driver, passes, pass
 *                  managers, textual pipelines, instrumentation
 *   fz/graph.h     the graph dialect, host tensors, .npy, the interpreter
 *   fz/fusion.h    the fuse pass, its targets and replaceable cost model
 *   fz/onnx.h      the ONNX importer
 *   fz/loop.h      the loop dialect, lower-graph-to-loop, plan-memory
 *   fz/kernel.h    the kernel dialect (GPU execution model), its simulator
 *   fz/lowering.h  LLVM IR / assembly / objects, native code (JIT)
 *   fz/runtime.h   running compiled code on the CPU: thread pool,
 *                  executables called on host tensors
 *
 * Nothing here declares a struct layout of an IR object or mentions an
 * LLVM or CUDA type; including it needs only a C11 compiler and the
 * include directory of the installed package.
 */
#ifndef FZ_FZ_H
#define FZ_FZ_H

#include "fz/support.h"
#include "fz/ir.h"
#include "fz/tensor.h"
#include "fz/opdef.h"
#include "fz/dialects.h"
#include "fz/pass.h"
#include "fz/graph.h"
#include "fz/fusion.h"
#include "fz/onnx.h"
#include "fz/loop.h"
#include "fz/kernel.h"
#include "fz/lowering.h"
#include "fz/layout.h"
#include "fz/precision.h"
#include "fz/runtime.h"

#endif /* FZ_FZ_H */
