#!/usr/bin/env bash
# bench/gpu/conv.sh - conv2d on tensor cores (lower-loop-to-kernel's
# implicit GEMM, docs/codegen.md "Tensor-core conv2d") on the GPU machine,
# next to PyTorch (cuDNN, bf16, NCHW; eager and torch.compile:
# conv_peers.py). Nothing of fuse is built here.
#     bash bench/gpu/conv.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 20)
#     CONV_TILES="..."  tiles (FZ_GPU_MMA_TILE) tried besides the one
#                       chosen by size; the table shows the best
#     CONV_SPECS="..."  a subset of the workloads (SPECS below)
#     CONV_COMPILE=0    no torch.compile column (it compiles each shape:
#                       most of the script's time)
# Workloads (bench/gpu/conv/*.fuse, ResNet-like, batch 32, bf16, bias
# and relu fused): 64->64 3x3 pad 1 on 56x56; 64->256 1x1 on 56x56;
# 128->128 3x3 stride 2 pad 1 from 56x56; 256->256 3x3 pad 1 on 14x14;
# the 3->64 7x7 stride-2 pad-3 stem on 224x224 (K = 147: no 16-byte
# copies of the weights).
# First each workload's correctness on the GPU: the same conv with batch
# 2 (NAME_check.fuse) against the graph interpreter (--check-interp, bf16
# tolerance), with the tile by size and each CONV_TILES tile, and its
# kernel must be an implicit GEMM (the plan that --bench prints). Then the timings: fuse-run --device cuda --bench REPS
# (TFLOP/s = 2 N OH OW OC C KH KW / median time), by-size tile and each
# CONV_TILES tile, and torch. Exits 1 when a check failed.
set -u
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
status=0
D=bench/gpu/conv
# NAME:N:C:H:OC:K:STRIDE:PAD (square inputs and kernels), as conv_peers.py takes them.
SPECS=${CONV_SPECS:-"r1_3x3_64_56:32:64:56:64:3:1:1 r2_1x1_64_256_56:32:64:56:256:1:1:0 r3_3x3s2_128_56:32:128:56:128:3:2:1 r4_3x3_256_14:32:256:14:256:3:1:1 stem_7x7s2_3_224:32:3:224:64:7:2:3"}
CONV_TILES=${CONV_TILES:-"128x64x32:4w:4s 128x128x32:4w:3s 64x128x32:4w:3s 128x64x64:4w:3s 256x64x32:8w:3s"}

tflops() {  # the TFLOP/s of a fuse-run --bench output, else "failed"
  local tf
  tf=$(echo "$1" | grep "bench-cuda: @" | sed -nE 's/.* ([0-9.]+) TFLOP\/s.*/\1/p')
  if [ -n "$tf" ]; then echo "$tf"; else echo failed; fi
}

for spec in $SPECS; do
  name=${spec%%:*}
  for t in by-size $CONV_TILES; do
    tile=$t; [ "$t" = by-size ] && tile=
    out=$(FZ_GPU_MMA_TILE=$tile timeout 300 "$RUN" "$D/${name}_check.fuse" --device cuda --random-inputs 3 --check-interp --rtol 2e-2 --atol 1 --print-limit 0 2>&1)
    ok=$(echo "$out" | grep -m1 "check-interp")
    echo "check $name (batch 2) tile $t: ${ok:-$(echo "$out" | grep -m1 -i error)}"
    echo "$out" | grep -q "check-interp: output_0: .*: ok" || status=1
  done
  plan=$(timeout 120 "$RUN" "$D/${name}_check.fuse" --device cuda --random-inputs 3 --bench 1 --print-limit 0 2>&1 | grep "bench-cuda: kernel")
  echo "$plan" | grep -q "conv2d implicit GEMM" || { echo "check $name: not an implicit-GEMM kernel: $plan"; status=1; }
done

declare -A FUSE BEST BESTT PLAN
for spec in $SPECS; do
  name=${spec%%:*}
  out=$(timeout 300 "$RUN" "$D/$name.fuse" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  FUSE[$name]=$(tflops "$out")
  PLAN[$name]=$(echo "$out" | grep -m1 "bench-cuda: kernel" | sed -nE 's/.*tile ([^,]*),.*/\1/p')
  BEST[$name]=${FUSE[$name]}; BESTT[$name]=${PLAN[$name]}
  for t in $CONV_TILES; do
    out=$(FZ_GPU_MMA_TILE=$t timeout 300 "$RUN" "$D/$name.fuse" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
    r=$(tflops "$out")
    echo "tile $name $t: $r"
    if [ "$r" != failed ] && awk -v a="$r" -v b="${BEST[$name]}" 'BEGIN{exit !(b == "failed" || a > b)}'; then
      BEST[$name]=$r; BESTT[$name]=$t
    fi
  done
done

declare -A EAGER COMP
if command -v python3 >/dev/null; then
  while read -r n e c; do EAGER[$n]=$e; COMP[$n]=$c; done < <(timeout 900 python3 bench/gpu/conv_peers.py "$REPS" $SPECS 2>/dev/null)
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
echo
printf "%-18s %8s %-22s %8s %-22s %8s %8s %8s %8s\n" workload fuse "(tile by size)" best "(tile)" eager compile best/eag best/comp
for spec in $SPECS; do
  name=${spec%%:*}
  e=${EAGER[$name]:--} c=${COMP[$name]:--}
  printf "%-18s %8s %-22s %8s %-22s %8s %8s %8s %8s\n" "$name" "${FUSE[$name]}" "(${PLAN[$name]})" "${BEST[$name]}" "(${BESTT[$name]})" "$e" "$c" "$(ratio "${BEST[$name]}" "$e")" "$(ratio "${BEST[$name]}" "$c")"
done
echo "(TFLOP/s; fuse from fuse-run --bench $REPS, torch (cuDNN, cudnn.benchmark, bf16 NCHW) from conv_peers.py; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
exit $status
