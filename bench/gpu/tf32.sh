#!/usr/bin/env bash
# bench/gpu/tf32.sh - f32 matmuls on tf32 tensor cores (--precision=tf32,
# the default on sm_80 and newer; lower-loop-to-kernel{precision=tf32}) on
# the GPU machine: first the correctness check against the graph
# interpreter, then matmul + bias + gelu f32 4096^3 with tf32 (a sweep of
# tiles) and with --precision=ieee (the generic CUDA-core mappings), next
# to torch with allow_tf32 True and False
# (tf32_peers.py). Nothing of fuse is built here.
#     bash bench/gpu/tf32.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 20)
#     TF32_TILES="..."  the tiles (FZ_GPU_MMA_TILE) of the tf32 rows
set -u
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
status=0

# Correctness on the GPU: ragged 1000^3 + bias + gelu and a transposed-B
# 512x768x1024, tf32's tolerance (bench/gpu/tf32/check_f32_1000.fuse).
CHECK=bench/gpu/tf32/check_f32_1000.fuse
for e in main tb; do
  out=$(timeout 300 "$RUN" "$CHECK" --entry "$e" --device cuda --precision=tf32 --random-inputs 3 --check-interp --rtol 1e-2 --atol 0.12 --print-limit 0 2>&1)
  echo "$out" | grep -E "check-interp|error|plan|matmul" | sed "s|^|check @$e: |"
  echo "$out" | grep -q "check-interp: output_0: .*: ok" || status=1
  # The plan is printed by --bench only (a check run prints none).
  plan=$(timeout 120 "$RUN" "$CHECK" --entry "$e" --device cuda --precision=tf32 --random-inputs 3 --bench 1 --print-limit 0 2>&1 | grep "bench-cuda: kernel")
  echo "$plan" | sed "s|^|check @$e: |"
  echo "$plan" | grep -q "f32 (tf32)" || { echo "check @$e: not a tf32 kernel"; status=1; }
done

F=bench/gpu/tf32/mm_bias_gelu_f32_4096.fuse
flops=$(sed -n 's|^// flops: \([0-9]*\).*|\1|p' "$F" | head -1)
TF32_TILES=${TF32_TILES:-"128x128x32:4w:4s 128x128x32:4w:3s 128x128x16:4w:4s 128x128x32:8w:3s 128x256x32:8w:3s 64x128x32:4w:4s"}
tflops() {  # the TFLOP/s of a fuse-run --bench output (or its error)
  local line tf us
  line=$(echo "$1" | grep "bench-cuda: @")
  tf=$(echo "$line" | sed -nE 's/.* ([0-9.]+) TFLOP\/s.*/\1/p')
  us=$(echo "$line" | sed -nE 's/.* median ([0-9.]+) us.*/\1/p')
  [ -z "$tf" ] && [ -n "$us" ] && tf=$(awk -v f="$flops" -v u="$us" 'BEGIN{printf "%.1f", f / (u * 1e-6) / 1e12}')
  if [ -n "$tf" ]; then echo "$tf"; else echo "failed: $(echo "$1" | grep -m1 -i error)"; fi
}
echo
printf "%-26s %-24s %10s\n" workload fuse TFLOP/s
for t in $TF32_TILES; do
  out=$(FZ_GPU_MMA_TILE=$t timeout 300 "$RUN" "$F" --device cuda --precision=tf32 --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  r=$(tflops "$out")
  echo "$out" | grep -q "bench-cuda: kernel .*: matmul .*(tf32)" || r="$r(no-tf32)"
  printf "%-26s %-24s %10s\n" mm_bias_gelu_f32_4096 "tf32 $t" "$r"
done
out=$(timeout 600 "$RUN" "$F" --device cuda --precision=ieee --random-inputs 1 --bench 3 --print-limit 0 2>&1)
printf "%-26s %-24s %10s\n" mm_bias_gelu_f32_4096 "f32 (--precision=ieee)" "$(tflops "$out")"
if command -v python3 >/dev/null; then
  echo
  printf "%-26s %-6s %8s %8s %8s\n" workload torch eager compile mm
  timeout 600 python3 bench/gpu/tf32_peers.py "$REPS" 2>/dev/null | while read -r n m e c l; do
    if [ "$n" = torch ]; then echo "$n $m $e $c $l"; continue; fi
    printf "%-26s %-6s %8s %8s %8s\n" "$n" "$m" "$e" "$c" "$l"
  done
fi
echo "(TFLOP/s = 2 M N K / median time; fuse from fuse-run --bench $REPS, torch from tf32_peers.py; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
exit $status
