#!/usr/bin/env bash
# The main job: compile a real model and run it on this machine's CPU.
#
# Builds fuse (Release, in build-demo/), then takes the PyTorch-exported
# ONNX model examples/models/mlp/model.onnx (Linear, GELU, Linear,
# residual add, LayerNorm; opset 13, so GELU and LayerNorm arrive as
# primitive ops: examples/models/export.py) and
#   1. imports it into the graph dialect (fuse-translate --import-onnx),
#   2. prints the fusion report and the fused graph (which ops became one
#      kernel),
#   3. shows the loop nests and a piece of the LLVM IR they become,
#   4. compiles it to native code for this CPU (LLVM 19, O3, host
#      features, ORC JIT) and runs it on a thread per core with the input
#      PyTorch saved, comparing with PyTorch's output and with fuse's
#      reference interpreter,
#   5. times it (--bench), compile time included,
#   6. does the same in three lines of Python (the fuse package,
#      docs/python.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

bash scripts/install-deps.sh

# Its own build folder: scripts/test.sh builds build/ with warnings as
# errors, which a demo has no reason to inherit.
build="$root/build-demo"
echo "==== building fuse (Release) in build-demo/"
cmake -S "$root" -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
  -DFZ_WERROR=OFF -DFZ_BUILD_TESTS=OFF >/dev/null
make -C "$build" -j"$(nproc 2>/dev/null || echo 2)" --no-print-directory \
  fuse-opt fuse-translate fuse-run fz_python_module fz_python_files >/dev/null
bin="$build/bin"
"$bin/fuse-opt" --version

model=examples/models/mlp/model.onnx
data=examples/models/mlp/test_data_set_0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Weights print as long hex strings: shorten them for reading.
elide() { sed -E 's/"0x([0-9A-F]{16})[0-9A-F]{48,}"/"0x\1..."/g'; }

echo
echo "==== 1. $model imported into the graph dialect"
echo "     (fuse-translate --import-onnx $model)"
"$bin/fuse-translate" --import-onnx "$model" -o "$tmp/mlp.fuse"
elide <"$tmp/mlp.fuse"

echo
echo "==== 2. fusion: the report, and the graph with its graph.fusion groups"
echo "     (fuse-opt: canonicalize, cse, recognize-composites, simplify-*, then"
echo "     fuse{target=cpu report=true}: what fuse-run does before compiling)"
"$bin/fuse-opt" "$tmp/mlp.fuse" --pass-pipeline='builtin.module(canonicalize,cse,recognize-composites,simplify-algebra,simplify-reshapes,canonicalize,func.func(fuse{target=cpu report=true}))' \
  -o "$tmp/fused.fuse" 2>&1
elide <"$tmp/fused.fuse"

echo
echo "==== 3. the loop nests (one per kernel) and the start of their LLVM IR"
echo "     (fuse-opt ... lower-graph-to-loop, plan-memory; fuse-translate --emit=llvm)"
"$bin/fuse-opt" "$tmp/fused.fuse" \
  --pass-pipeline='builtin.module(lower-graph-to-loop,func.func(plan-memory))' \
  -o "$tmp/loops.fuse"
elide <"$tmp/loops.fuse" | head -n 40
echo "    ... ($(wc -l <"$tmp/loops.fuse") lines)"
"$bin/fuse-translate" --emit=llvm "$tmp/loops.fuse" -o "$tmp/mlp.ll"
grep -m 4 -E '^define' "$tmp/mlp.ll"
echo "    ... ($(grep -c '<[0-9]* x float>' "$tmp/mlp.ll") lines with vector"\
     "instructions, $(grep -c 'call float @\(expf\|erff\|tanhf\|logf\)' "$tmp/mlp.ll")"\
     "calls of libm)"

echo
echo "==== 4. compiled for this CPU and run on PyTorch's saved input"
echo "     (fuse-run $model --device cpu --input $data/input_0.npy"
echo "      --compare $data --check-interp --rtol 1e-4 --atol 1e-5)"
"$bin/fuse-run" "$model" --device cpu --input "$data/input_0.npy" \
  --compare "$data" --check-interp --rtol 1e-4 --atol 1e-5
echo "(output_0 against PyTorch's output_0.npy; check-interp: against fuse's"
echo " reference interpreter)"

echo
echo "==== 5. timing (median of 200 runs; this model is tiny: see bench/cpu/"
echo "     and docs/benchmarks.md for memory-bound kernels of 2^24+ elements)"
"$bin/fuse-run" "$model" --device cpu --input "$data/input_0.npy" \
  --bench 200 --print-limit 0 | grep -E '^bench: (@|compile)'

echo
echo "==== 6. the same from Python (PYTHONPATH=build-demo/python; docs/python.md)"
demo_py='import numpy as np, fuse
m = fuse.compile("examples/models/mlp/model.onnx", device="cpu")
y = m(np.load("examples/models/mlp/test_data_set_0/input_0.npy"))'
echo "$demo_py" | sed 's/^/    /'
PYTHONPATH="$build/python" /usr/bin/python3 -c "$demo_py
want = np.load('examples/models/mlp/test_data_set_0/output_0.npy')
print('    ->', y.dtype, y.shape, 'max |y - PyTorch| = %.2g;' % abs(y - want).max(),
      m.fusion_report().splitlines()[2].strip())"
