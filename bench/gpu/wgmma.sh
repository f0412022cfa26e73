#!/usr/bin/env bash
# bench/gpu/wgmma.sh - the sm_90a matmul kernels (kernel.wgmma, fuse-run
# --gpu-arch sm_90a; docs/codegen.md "Warp-group matmul (sm_90a)") on an
# H100/H200, in one run beside the sm_90 mma.sync kernels and torch
# (eager, torch.compile, cuBLAS's mm alone): first the correctness check
# against the graph interpreter (ragged, transposed B and A), then bf16
# matmul + bias (+ gelu) at 4096^3, 8192^3 and two transformer FFN shapes
# at 8192 tokens. One table in TFLOP/s (2 M N K / median time) with the
# ratios to cuBLAS's mm and to torch.compile. Nothing of fuse is built
# here; about 3 minutes.
#     bash bench/gpu/wgmma.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 20)
#     WGMMA_TILES="128x256x64:8w:4s ..."  also time these wgmma tiles
#                                         (FZ_GPU_WGMMA_TILE) at 4096^3
set -u
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
status=0

# Correctness on the GPU, bf16's tolerance (the interpreter rounds the
# matmul to bf16 before the epilogue).
CHECK=bench/gpu/wgmma/check_bf16.fuse
for e in main tb ta; do
  out=$(timeout 300 "$RUN" "$CHECK" --entry "$e" --device cuda --gpu-arch sm_90a --random-inputs 3 --check-interp --rtol 2e-2 --atol 0.25 --print-limit 0 2>&1)
  echo "$out" | grep -E "check-interp|error" | sed "s|^|check @$e: |"
  echo "$out" | grep -q "check-interp: output_0: .*: ok" || status=1
done

tflops() {  # the TFLOP/s of a fuse-run --bench output (or its error)
  local line tf
  line=$(echo "$1" | grep "bench-cuda: @")
  tf=$(echo "$line" | sed -nE 's/.* ([0-9.]+) TFLOP\/s.*/\1/p')
  if [ -n "$tf" ]; then echo "$tf"; else echo "failed"; fi
}
plan() {  # the first kernel's plan of a --bench output
  echo "$1" | grep -m1 "bench-cuda: kernel" | sed 's/^bench-cuda: kernel //'
}

SHAPES="mm_bias_gelu_bf16_4096:4096:4096:4096:gelu:bench/gpu/matmul/mm_bias_gelu_bf16_4096.fuse
mm_bias_gelu_bf16_8192:8192:8192:8192:gelu:bench/gpu/matmul/mm_bias_gelu_bf16_8192.fuse
ffn1_8192x3072x768:8192:3072:768:gelu:bench/gpu/wgmma/mm_bias_gelu_bf16_8192x3072x768.fuse
ffn2_8192x768x3072:8192:768:3072:bias:bench/gpu/wgmma/mm_bias_bf16_8192x768x3072.fuse"
declare -A WG MS PL
peerArgs=""
for s in $SHAPES; do
  IFS=: read -r name m n k epi file <<<"$s"
  out=$(timeout 300 "$RUN" "$file" --device cuda --gpu-arch sm_90a --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  WG[$name]=$(tflops "$out")
  PL[$name]=$(plan "$out")
  echo "$out" | grep -q "wgmma (sm_90a)" || { WG[$name]="${WG[$name]}(not wgmma)"; status=1; }
  out=$(timeout 300 "$RUN" "$file" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  MS[$name]=$(tflops "$out")
  peerArgs="$peerArgs $name:$m:$n:$k:$epi"
done
for t in ${WGMMA_TILES:-}; do
  out=$(FZ_GPU_WGMMA_TILE=$t timeout 300 "$RUN" bench/gpu/matmul/mm_bias_gelu_bf16_4096.fuse --device cuda --gpu-arch sm_90a --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  echo "tile $t at 4096^3: $(tflops "$out") TFLOP/s"
done
declare -A EA CO MM
if command -v python3 >/dev/null; then
  while read -r n e c l; do
    EA[$n]=$e; CO[$n]=$c; MM[$n]=$l
  done < <(timeout 400 python3 bench/gpu/wgmma_peers.py "$REPS" $peerArgs 2>/dev/null)
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else printf "-" }'; }
echo
printf "%-24s %9s %9s %9s %9s %9s %8s %8s %8s\n" workload wgmma mma.sync eager compile cublas_mm wg/mm wg/comp wg/sync
for s in $SHAPES; do
  IFS=: read -r name m n k epi file <<<"$s"
  printf "%-24s %9s %9s %9s %9s %9s %8s %8s %8s\n" "$name" "${WG[$name]}" "${MS[$name]}" \
    "${EA[$name]:--}" "${CO[$name]:--}" "${MM[$name]:--}" \
    "$(ratio "${WG[$name]}" "${MM[$name]:-0}")" "$(ratio "${WG[$name]}" "${CO[$name]:-0}")" \
    "$(ratio "${WG[$name]}" "${MS[$name]}")"
done
echo
for s in $SHAPES; do
  IFS=: read -r name _ <<<"$s"
  echo "plan $name: ${PL[$name]}"
done
echo "(TFLOP/s = 2 M N K / median of $REPS; wgmma: fuse-run --gpu-arch sm_90a, mma.sync: fuse-run (sm_90), torch from wgmma_peers.py: eager mm+bias(+gelu), torch.compile of it, cublas_mm: torch.mm alone; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
exit $status
