#!/usr/bin/env bash
# bench/gpu/split_k.sh - split-K of the tensor-core kernels (docs/codegen.md
# "Split-K") on the GPU machine: fuse with split-k auto against split-k off
# (FZ_GPU_SPLIT_K=off), next to torch (cuDNN / cuBLAS eager, and
# torch.compile) on the same shapes in the same run. Nothing is built here:
#     bash bench/gpu/split_k.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 50)
#     SPECS="..."      a subset of the workloads (below)
#     CHECK=0          skips the correctness runs
#     COLD=0           L2 warm (default: fuse-run --bench-cold, and torch
#                      timed after the same 256 MiB overwrite: the weights
#                      come from memory, as in a model's forward)
#     FORCE="32 64"    also fuse with FZ_GPU_SPLIT_K=N forced, per row
#                      (the cost rule's choice against others)
#     SPLITK_COMPILE=0 no torch.compile column (it compiles each shape)
# Workloads (NAME:conv:TYPE:N:C:H:OC:K:STRIDE:PAD, conv2d + bias + relu,
# square; NAME:mm:TYPE:M:K:N, x @ W): ResNet-18 at batch 1 in f32 (tf32
# kernels, cuDNN's default TF32 for torch): the 3x3 convs 512 -> 512 at
# 7x7 (GEMM 49x512x4608), 256 -> 512 stride 2 from 14x14 (49x512x2304),
# 256 -> 256 at 14x14 (196x256x2304), 128 -> 128 at 28x28 (784x128x1152),
# the 1x1 stride-2 downsample 256 -> 512 (49x512x256); matmuls
# 49x512x4608 and 196x256x2304 (f32), 64x4096x4096 (f32 and bf16), and
# 4096^3 (bf16, f32) as controls that split-k must leave alone (their plan
# must not say split-k, and auto must not be slower than off).
# Part 1, correctness (`fuse-run --device cuda --check-interp`, PASS/FAIL
# lines; not the 4096^3 controls, too slow for the host interpreter):
# every workload with split-k auto and with FZ_GPU_SPLIT_K=3, tf32's or
# bf16's tolerance; the plan must say split-k where auto splits it.
# Part 2, one table (split_k_peers.py): per row fuse auto and off (us,
# TFLOP/s, kernels, the plan's split-k S), torch eager and torch.compile
# (us), and the ratios off/auto and torch/auto (above 1: auto is faster).
# About 5 minutes on an H100 (40 compilations, torch.compile's).
# Exits 1 when a check failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build-gpu-carry}
REPS=${2:-50}
SPECS=${SPECS:-"c512_7:conv:f32:1:512:7:512:3:1:1 c256s2_14:conv:f32:1:256:14:512:3:2:1 c256_14:conv:f32:1:256:14:256:3:1:1 c128_28:conv:f32:1:128:28:128:3:1:1 ds256s2_14:conv:f32:1:256:14:512:1:2:0 mm49:mm:f32:49:4608:512 mm196:mm:f32:196:2304:256 mm64:mm:f32:64:4096:4096 mm64b:mm:bf16:64:4096:4096 big:mm:bf16:4096:4096:4096 bigf:mm:f32:4096:4096:4096"}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ "${RUN#/tmp/}" != "$RUN" ] && rm -f "$RUN"' EXIT
status=0
COLDFLAG=--bench-cold; [ "${COLD:-1}" = 0 ] && COLDFLAG=

# One function per workload: $TMP/NAME.fuse.
for spec in $SPECS; do
  IFS=: read -r name kind t a b c d e f g <<<"$spec"
  if [ "$kind" = conv ]; then
    n=$a C=$b H=$c OC=$d K=$e S=$f P=$g
    OH=$(( (H + 2 * P - K) / S + 1 ))
    x="${n}x${C}x${H}x${H}x$t" w="${OC}x${C}x${K}x${K}x$t" y="${n}x${OC}x${OH}x${OH}x$t"
    cat >"$TMP/$name.fuse" <<EOF
func.func @main(%x: tensor<$x>, %w: tensor<$w>, %b: tensor<${OC}x$t>) -> tensor<$y> {
  %0 = graph.conv2d %x, %w, %b {pads = array<i64: $P, $P, $P, $P>, strides = array<i64: $S, $S>} : tensor<$x>, tensor<$w>, tensor<${OC}x$t> -> tensor<$y>
  %1 = graph.relu %0 : tensor<$y>
  return %1 : tensor<$y>
}
EOF
  else
    M=$a K=$b N=$c
    cat >"$TMP/$name.fuse" <<EOF
func.func @main(%x: tensor<${M}x${K}x$t>, %w: tensor<${K}x${N}x$t>) -> tensor<${M}x${N}x$t> {
  %0 = graph.matmul %x, %w : tensor<${M}x${K}x$t>, tensor<${K}x${N}x$t> -> tensor<${M}x${N}x$t>
  return %0 : tensor<${M}x${N}x$t>
}
EOF
  fi
done

if [ "${CHECK:-1}" != 0 ]; then
  echo "== correctness: cuda against the graph interpreter =="
  for spec in $SPECS; do
    IFS=: read -r name kind t _ <<<"$spec"
    case $name in big*) continue ;; esac
    case $t in f32) tol="--rtol 1e-2 --atol 0.3" ;; *) tol="--rtol 2e-2 --atol 1" ;; esac
    for mode in auto 3; do
      out=$(FZ_GPU_SPLIT_K=$mode timeout 600 "$RUN" "$TMP/$name.fuse" --device cuda --random-inputs 5 --check-interp $tol --print-limit 0 --bench 1 2>&1)
      res=$(echo "$out" | grep "check-interp:" | tr '\n' ' ')
      plan=$(echo "$out" | grep -m1 "^bench-cuda: kernel" | grep -o "split-k [0-9]*")
      if echo "$out" | grep -q "check-interp: output_0: .*: ok" && ! echo "$out" | grep -q MISMATCH; then
        echo "PASS $name split-k=$mode (${plan:-not split}): $res"
      else
        status=1; echo "FAIL $name split-k=$mode:"; echo "$out" | tail -n 4
      fi
    done
  done
fi

# The timings: "name kind type dims... mode us kernels S" per run.
RES=$TMP/fuse.txt
: >"$RES"
for spec in $SPECS; do
  IFS=: read -r name kind t dims <<<"$spec"
  for mode in auto off ${FORCE:-}; do
    out=$(FZ_GPU_SPLIT_K=$mode timeout 600 "$RUN" "$TMP/$name.fuse" --device cuda --random-inputs 1 --bench "$REPS" $COLDFLAG --print-limit 0 2>&1)
    us=$(echo "$out" | sed -nE 's/^bench-cuda: @main: .* median ([0-9.]+) us.*/\1/p')
    kernels=$(echo "$out" | grep -c "^bench-cuda: kernel")
    S=$(echo "$out" | grep -m1 "^bench-cuda: kernel" | sed -nE 's/.*split-k ([0-9]+).*/\1/p')
    [ -z "$us" ] && { us=nan; status=1; echo "fuse-run failed ($name $mode): $(echo "$out" | grep -m1 -i error)"; }
    case $name in big*) [ -n "$S" ] && [ "$mode" = auto ] && { status=1; echo "FAIL $name: the control was split (split-k $S)"; } ;; esac
    echo "$name $kind $t ${dims//:/ } $mode $us $kernels ${S:-1}" >>"$RES"
  done
  # The plans of auto, for the record.
  FZ_GPU_SPLIT_K=auto "$RUN" "$TMP/$name.fuse" --device cuda --random-inputs 1 --bench 1 --print-limit 0 2>&1 | grep "^bench-cuda: kernel" | sed "s|^|$name: |" | cut -c1-240
done
echo
timeout 1200 python3 bench/gpu/split_k_peers.py "$RES" "$REPS" || status=1
exit $status
