#!/usr/bin/env bash
# bench/gpu/profile_models.sh - where a whole model's time goes on the
# GPU: each kernel of the forward timed alone (fuse-run --profile), the
# slowest first with its plan, so that the next performance change aims
# at the kernels that cost the most. On the GPU machine:
#     bash bench/gpu/profile_models.sh [BUILD_DIR] [CONFIG...]
#     (default build-gpu-carry; configs NAME:DTYPE:BATCH, default
#      resnet18:f32:1 resnet50:f32:32 resnet50:f16:32 convnext_tiny:f16:32
#      vit_b_16:f16:32)
# Exports each with bench/models/models.py into $FZ_PROFILE_DIR (default
# /tmp/fz-profile; an export already there is reused) and runs
#     fuse-run MODEL --device cuda --input x.npy --profile 20
# printing its top $FZ_PROFILE_TOP (default 12) kernels. The sum of the
# kernels launched one by one is a little above the CUDA graph replay
# that bench/models times (no launch gaps there).
set -u
BUILD=${1:-build-gpu-carry}
shift $(( $# > 0 ? 1 : 0 ))
CONFIGS=${*:-resnet18:f32:1 resnet50:f32:32 resnet50:f16:32 convnext_tiny:f16:32 vit_b_16:f16:32}
DIR=${FZ_PROFILE_DIR:-/tmp/fz-profile}
TOP=${FZ_PROFILE_TOP:-12}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
mkdir -p "$DIR"
echo "machine: $(nvidia-smi -L 2>/dev/null | head -1)"
(cd "$(dirname "${BASH_SOURCE[0]}")/../models" && python3 - "$DIR" $CONFIGS <<'PY'
import os, sys
import numpy as np
import models
out = sys.argv[1]
for cfg in sys.argv[2:]:
    name, dt, batch = cfg.split(":")
    path = os.path.join(out, f"{name}-{dt}-b{batch}.onnx")
    if os.path.exists(path):
        continue
    m, x = models.build(name), models.make_input(name, int(batch))
    if dt == "f16":
        m, x = m.half(), x.half()
    models.export_onnx(m, x, path)
    np.save(os.path.join(out, f"{name}-{dt}-b{batch}-input.npy"), x.numpy())
PY
) || { echo "error: the export failed" >&2; exit 1; }
status=0
for cfg in $CONFIGS; do
  IFS=: read -r name dt batch <<<"$cfg"
  m=$DIR/$name-$dt-b$batch
  echo "== $name $dt batch $batch"
  if ! timeout 300 "$RUN" "$m.onnx" --device cuda --input "$m-input.npy" \
      --profile 20 --print-limit 0 >"$m.profile.txt" 2>&1; then
    echo "error: fuse-run failed:"; tail -5 "$m.profile.txt"; status=1; continue
  fi
  grep '^profile-cuda: @' "$m.profile.txt"
  grep '^profile-cuda: ' "$m.profile.txt" | grep -v '^profile-cuda: @' |
    head -n "$TOP" | cut -c1-220
done
exit $status
