#!/usr/bin/env bash
# bench/gpu/run.sh - fuse's CUDA kernels against a device-to-device copy
# (the limit) and, when python3 can import torch, torch eager and
# torch.compile, in one run on the GPU machine. Nothing is built here:
#     bash bench/gpu/run.sh [BUILD_DIR] [REPS]     (default build-gpu-carry, 20)
# Workloads (f32 unless said, 8192x4096 = 2^25 elements, far above L2):
# relu(x*s+b), gelu(x+b) bf16, softmax rows of 4096, layer_norm(x+r).
# GB/s count ideal bytes (each input read once, each output written once).
# Budget: well under 5 minutes (random inputs are made on the host).
set -u
BUILD=${1:-build-gpu-carry}
export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
REPS=${2:-20}
RUN=$BUILD/bin/fuse-run
[ -x "$RUN" ] || { echo "error: $RUN not found" >&2; exit 1; }
declare -A EAGER COMPILE
if command -v python3 >/dev/null; then
  while read -r n e c; do EAGER[$n]=$e; COMPILE[$n]=$c; done < <(timeout 180 python3 bench/gpu/peers.py "$REPS" 2>/dev/null)
fi
printf "%-16s %10s %10s %10s %10s %8s %10s\n" workload fuse_GB/s copy_GB/s eager compile fuse/copy fuse/comp
for f in bench/gpu/*.fuse; do
  n=$(basename "$f" .fuse)
  line=$(timeout 120 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1 | grep bench-cuda)
  if [ -z "$line" ]; then printf "%-16s failed\n" "$n"; continue; fi
  fz=$(echo "$line" | sed -E 's/.* ([0-9.]+) GB\/s \(.*/\1/')
  cp=$(echo "$line" | sed -E 's/.*device copy ([0-9.]+) GB\/s.*/\1/')
  e=${EAGER[$n]:--}; c=${COMPILE[$n]:--}
  rc=$(awk -v a="$fz" -v b="$cp" 'BEGIN{printf (b>0)?"%.3f":"-", a/b}')
  rt=$(awk -v a="$fz" -v b="$c" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
  printf "%-16s %10s %10s %10s %10s %8s %10s\n" "$n" "$fz" "$cp" "$e" "$c" "$rc" "$rt"
done
