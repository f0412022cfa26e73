#!/usr/bin/env bash
# bench/models/run.sh - whole models: fuse against PyTorch, torch.compile
# and ONNX Runtime, every model checked before it is timed (bench.py
# says how). The yardstick every performance change is judged by; the
# figures go to docs/benchmarks.md, "Whole models".
#
#   bash bench/models/run.sh [BUILD_DIR] [bench.py options]
#       GPU machine: BUILD_DIR is the folder tests/gpu/pack.sh made and the
#       device runner carried (default build-gpu-carry); fuse-run --device
#       cuda against torch eager, torch.compile and torch.compile with
#       CUDA graphs (mode="reduce-overhead"), f32 and fp16, batch 1 and the
#       throughput batch (32 for vision, 8 for text); models exported
#       there by its PyTorch, so no weights travel. One visit: --budget
#       (default 540 s) bounds it, and what was not reached is reported
#       as not run.
#   bash bench/models/run.sh --cpu [BUILD_DIR] [bench.py options]
#       Any machine: fuse-run --device cpu against ONNX Runtime's CPU
#       provider and PyTorch eager with the same thread count (default:
#       every core), f32 at batch 1 (BUILD_DIR default build). Where
#       python3 has no torch (a fresh Debian 12), Debian's python3-torch
#       and python3-torchvision are installed and /usr/bin/python3 runs
#       it, with libopenblas0-pthread (Debian's torch calls the system
#       libblas.so.3, which is otherwise the reference BLAS: 2.5x slower
#       on the BERT layer); where it has no onnxruntime, `npm install onnxruntime-node
#       --ignore-scripts` into bench/models/.ort (ONNX Runtime's CPU
#       library for Node.js) serves instead. Not part of the test command.
# Options after BUILD_DIR go to bench.py: --models resnet18,bert_layer
# --dtypes f32 --batches 1,tp --reps 50 --threads N --jobs N --budget S
# --json FILE --no-ieee --alt 'FUSE-RUN ARGS' (python3 bench/models/bench.py --help).
# Exits 1 when a model failed its check or was not run.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cpu=0
if [ "${1:-}" = --cpu ]; then cpu=1; shift; fi
build=
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then build=$1; shift; fi

py=python3
if ! $py -c 'import torch' 2>/dev/null; then
  py=/usr/bin/python3
  if [ $cpu = 0 ] && ! $py -c 'import torch' 2>/dev/null; then
    echo "run.sh: no PyTorch here: the GPU half runs on the GPU machine" >&2
    exit 1
  fi
  want=()
  [ $cpu = 1 ] && for p in python3-torch python3-torchvision libopenblas0-pthread; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || want+=("$p")
  done
  if [ ${#want[@]} -gt 0 ]; then
    echo "run.sh: installing Debian's ${want[*]}" >&2
    sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends "${want[@]}" >/dev/null ||
      { echo "run.sh: installing PyTorch failed" >&2; exit 1; }
  fi
fi

if [ $cpu = 1 ]; then
  RUN=${build:-$root/build}/bin/fuse-run
  if [ ! -x "$RUN" ]; then
    echo "run.sh: $RUN not found: build fuse first (README, 'Building by hand')" >&2
    exit 1
  fi
  extra=()
  if ! $py -c 'import onnxruntime' 2>/dev/null; then
    ort=$here/.ort
    if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
      command -v npm >/dev/null || { echo "run.sh: neither the onnxruntime Python package nor npm" >&2; exit 1; }
      echo "run.sh: npm install onnxruntime-node --ignore-scripts (into $ort)" >&2
      npm install --silent --prefix "$ort" onnxruntime-node --ignore-scripts >/dev/null ||
        { echo "run.sh: installing onnxruntime-node failed" >&2; exit 1; }
    fi
    extra=(--ort-node-path "$ort/node_modules")
  fi
  exec $py "$here/bench.py" --fuse-run "$RUN" --device cpu "${extra[@]}" "$@"
fi

. "$root/tests/gpu/find_run.sh"
fz_find_run "${build:-build-gpu-carry}" || exit 1
$py "$here/bench.py" --fuse-run "$RUN" --device cuda "$@"
