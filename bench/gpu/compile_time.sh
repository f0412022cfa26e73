#!/usr/bin/env bash
# bench/gpu/compile_time.sh - compile time of whole models on the GPU
# path, with one and with several code generation threads (issue 22;
# docs/benchmarks.md "Compile time"), on the GPU machine:
#     bash bench/gpu/compile_time.sh [BUILD_DIR] [THREADS...]
#     (default build-gpu-carry, from tests/gpu/pack.sh; threads 1 and 16)
# Exports ResNet-50 and ViT-B/16 at batch 1, f32 and f16, with
# bench/models/models.py (PyTorch, on the CPU) into $FZ_COMPILE_DIR
# (default /tmp/fz-compile; an export already there is reused), then for
# each model and thread count runs
#     fuse-run MODEL --device cuda --input x.npy --codegen-threads N --timing
# and prints its wall time (start to first result: import, compile, the
# driver's load, one run) and its --timing report. The outputs of every
# thread count must be the same bit for bit, as the PTX is; the script
# exits 1 when they are not or a run fails.
set -u
BUILD=${1:-build-gpu-carry}
shift $(( $# > 0 ? 1 : 0 ))
THREADS=${*:-1 16}
DIR=${FZ_COMPILE_DIR:-/tmp/fz-compile}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
mkdir -p "$DIR"
echo "machine: $(nproc) cores; $(nvidia-smi -L 2>/dev/null | head -1)"
(cd "$(dirname "${BASH_SOURCE[0]}")/../models" && python3 - "$DIR" <<'PY'
import os, sys
import numpy as np
import models
out = sys.argv[1]
for name in ["resnet50", "vit_b_16"]:
    for dt in ["f32", "f16"]:
        path = os.path.join(out, f"{name}-{dt}.onnx")
        if os.path.exists(path):
            continue
        m, x = models.build(name), models.make_input(name, 1)
        if dt == "f16":
            m, x = m.half(), x.half()
        models.export_onnx(m, x, path)
        np.save(os.path.join(out, f"{name}-{dt}-input.npy"), x.numpy())
PY
) || { echo "error: the export failed" >&2; exit 1; }
now() { date +%s.%N; }
status=0
for m in resnet50-f32 resnet50-f16 vit_b_16-f32 vit_b_16-f16; do
  first=
  for t in $THREADS; do
    out=$DIR/out-$m-$t
    rm -rf "$out"; mkdir -p "$out"
    s=$(now)
    timeout 300 "$RUN" "$DIR/$m.onnx" --device cuda \
      --input "$DIR/$m-input.npy" --codegen-threads "$t" --timing \
      --output-dir "$out" >/dev/null 2>"$out/stderr.txt"
    rc=$? e=$(now)
    echo "== $m, --codegen-threads $t: exit $rc, $(awk "BEGIN{printf \"%.2f\", $e - $s}") s"
    grep -v '^===\|\.\.\. Compile time report\|^$' "$out/stderr.txt"
    [ $rc -eq 0 ] || { status=1; continue; }
    if [ -z "$first" ]; then
      first=$out
    elif ! cmp -s "$first/output_0.npy" "$out/output_0.npy"; then
      echo "MISMATCH: the outputs of $m differ between thread counts"
      status=1
    fi
  done
done
exit $status
