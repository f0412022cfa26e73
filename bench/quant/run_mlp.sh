#!/usr/bin/env bash
# bench/quant/run_mlp.sh - the QDQ feed-forward block of qdq_mlp.py
# (x[M, D] -> D x H -> relu -> H x D, int8 weights, uint8 activations)
# against its f32 twin, in fuse and in ONNX Runtime's CPU provider, in one
# run, each peer timed side by side ROUNDS times (medians and minima);
# then whether fuse's int8 result equals the interpreter's and ORT's.
#
#   bash bench/quant/run_mlp.sh [BUILD_DIR] [THREADS] [ROUNDS] [qdq_mlp.py options]
#
# ORT: onnxruntime-node in bench/models/.ort (npm install --prefix
# bench/models/.ort onnxruntime-node --ignore-scripts), through
# bench/models/ort_node.js. Models and inputs go to a temporary folder.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}; threads=${2:-2}; rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
run=$build/bin/fuse-run
ortdir=$root/bench/models/.ort/node_modules
[ -d "$ortdir/onnxruntime-node" ] || {
  echo "run_mlp.sh: npm install --prefix bench/models/.ort onnxruntime-node --ignore-scripts first" >&2; exit 1; }
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
python3 "$here/qdq_mlp.py" "$t" "$@"
proto=${FZ_ONNX_PROTO:-/usr/include/onnx/onnx.proto}
for m in qdq f32; do
  protoc-c --encode=onnx.ModelProto -I"$(dirname "$proto")" "$proto" \
    < "$t/$m.textproto" > "$t/$m.onnx"
done
fuse_ms() { # MODEL [fuse-run options]: "median min" in ms
  "$run" "$@" --device cpu --input "$t/input.npy" --bench 20 --threads "$threads" \
    --print-limit 0 2>&1 | sed -n 's/^bench: @main.*median \([0-9.]*\) ms, min \([0-9.]*\) ms.*/\1 \2/p'
}
ort_ms() { # MODEL: "median min" in ms
  NODE_PATH=$ortdir node "$root/bench/models/ort_node.js" "$1" "$t/input.npy" \
    "$t/ort-out.npy" "$threads" 20 | sed -n 's/.*"ms":\([0-9.]*\),"min_ms":\([0-9.]*\).*/\1 \2/p'
}
echo "threads $threads, $rounds rounds, 20 runs each (ms: median min)"
for r in $(seq "$rounds"); do
  echo "round $r: fuse f32 $(fuse_ms "$t/f32.onnx") | fuse int8 $(fuse_ms "$t/qdq.onnx")" \
       "| ORT f32 $(ort_ms "$t/f32.onnx") | ORT int8 $(ort_ms "$t/qdq.onnx")"
done
mkdir -p "$t/ort"
NODE_PATH=$ortdir node "$root/bench/models/ort_node.js" "$t/qdq.onnx" "$t/input.npy" \
  "$t/ort/output_0.npy" 1 1 >/dev/null
echo "fuse int8 vs the interpreter:"
"$run" "$t/qdq.onnx" --device cpu --input "$t/input.npy" --check-interp --rtol 0 --atol 0 --print-limit 0 | grep check-interp
echo "fuse int8 vs ORT int8 (graph optimizations on):"
"$run" "$t/qdq.onnx" --device cpu --input "$t/input.npy" --compare "$t/ort" --rtol 0 --atol 0 --print-limit 0 | grep output_0 || true
