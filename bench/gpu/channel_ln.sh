#!/usr/bin/env bash
# bench/gpu/channel_ln.sh - ConvNeXt's LayerNorms over the channels of
# NCHW tensors (issue 20; docs/codegen.md "GPU mappings", columns) on the
# GPU machine, at ConvNeXt-T's shapes at batch 32 (32x96x56x56,
# 32x192x28x28, 32x384x14x14, 32x768x7x7), f16 and f32, two patterns:
#   nhwc  x NCHW -> permute(0,2,3,1) -> LayerNorm(C) -> NHWC result (a
#         CNBlock's norm, whose Linear reads channels last: the kernels
#         profile_models.sh showed as main_k40 / main_k88, "elementwise:
#         6272 / 1568 iterations", 163 / 325 us on an H200 in f16)
#   ln2d  permute, LayerNorm, permute back to NCHW (LayerNorm2d of the
#         stem and the downsampling layers: one kernel now, two before)
# against torch eager and torch.compile of the same torchvision code and
# a device copy of the same bytes. Nothing is built here:
#     bash bench/gpu/channel_ln.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 50)
#     SHAPES="32x768x7x7" TYPES=f16 PATTERNS=nhwc ...   a subset
#     CHECK=0 ...   skips the correctness runs
# BUILD_DIR is tests/gpu/pack.sh's folder (fuse-run, plain or xz). About
# 2 minutes on an H100/H200 (16 fuse compilations, 16 torch.compile's).
# Part 1, correctness: fuse-run --device cuda --check-interp at batch 2
# (PASS/FAIL lines). Part 2, one table (channel_ln_peers.py): per row the
# fuse time (fuse-run --bench REPS --bench-cold: L2 overwritten before each
# timed run), its GB/s (x read once, y written once) and fraction of the
# copy rate (a device-to-device copy of x's bytes, read + write, timed the
# same way in the same run), torch's and torch.compile's times and their
# ratios to fuse's (above 1: fuse is faster), the kernels fuse launched
# and the first one's plan. Exits 1 when a check or a run failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build-gpu-carry}
REPS=${2:-50}
SHAPES=${SHAPES:-"32x96x56x56 32x192x28x28 32x384x14x14 32x768x7x7"}
TYPES=${TYPES:-"f16 f32"}
PATTERNS=${PATTERNS:-"nhwc ln2d"}
. tests/gpu/find_run.sh
fz_find_run "$BUILD" || exit 1
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ "${RUN#/tmp/}" != "$RUN" ] && rm -f "$RUN"' EXIT
status=0

# gen PATTERN TYPE NxCxHxW FILE: the function @main of the pattern.
gen() {
  local p=$1 t=$2 s=$3 f=$4
  local n c h w
  IFS=x read -r n c h w <<<"$s"
  local nchw="${n}x${c}x${h}x${w}x$t" nhwc="${n}x${h}x${w}x${c}x$t" v="${c}x$t"
  local res=$nhwc
  [ "$p" = ln2d ] && res=$nchw
  {
    echo "func.func @main(%x: tensor<$nchw>, %g: tensor<$v>, %b: tensor<$v>) -> tensor<$res> {"
    echo "  %0 = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : tensor<$nchw> -> tensor<$nhwc>"
    echo "  %1 = graph.layer_norm %0, %g, %b {axis = 3 : i64, epsilon = 1.000000e-06 : f32} : tensor<$nhwc>, tensor<$v>, tensor<$v> -> tensor<$nhwc>"
    if [ "$p" = ln2d ]; then
      echo "  %2 = graph.transpose %1 {perm = array<i64: 0, 3, 1, 2>} : tensor<$nhwc> -> tensor<$nchw>"
      echo "  return %2 : tensor<$nchw>"
    else
      echo "  return %1 : tensor<$nhwc>"
    fi
    echo "}"
  } >"$f"
}

if [ "${CHECK:-1}" != 0 ]; then
  echo "== correctness: cuda against the graph interpreter (batch 2) =="
  for p in $PATTERNS; do
    for t in $TYPES; do
      for s in $SHAPES; do
        small=2x${s#*x}
        f=$TMP/check_${p}_${t}_$small.fuse
        gen "$p" "$t" "$small" "$f"
        case $t in f32) tol="--rtol 1e-4 --atol 1e-5" ;; *) tol="--rtol 1e-2 --atol 8e-3" ;; esac
        fz_check_cuda "$p $t $small" "$f" --random-inputs 3 $tol || status=1
      done
    done
  done
fi

RES=$TMP/fuse.txt
: >"$RES"
for p in $PATTERNS; do
  for t in $TYPES; do
    for s in $SHAPES; do
      f=$TMP/${p}_${t}_$s.fuse
      gen "$p" "$t" "$s" "$f"
      out=$(timeout 300 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --bench-cold --print-limit 0 2>&1)
      us=$(echo "$out" | sed -nE 's/^bench-cuda: @main: .* median ([0-9.]+) us.*/\1/p')
      kernels=$(echo "$out" | grep -c "^bench-cuda: kernel")
      plan=$(echo "$out" | sed -nE 's/^bench-cuda: kernel main_k0: [^:]*: (.*)$/\1/p' | head -1 | cut -d';' -f1-2)
      [ -z "$us" ] && { us=nan; status=1; echo "fuse-run failed ($p $t $s): $(echo "$out" | grep -m1 -i error)"; }
      echo "$p $t $s $us $kernels ${plan:-?}" >>"$RES"
    done
  done
done
# The kernels of each pattern at the largest channel count, for the record.
for p in $PATTERNS; do
  for f in "$TMP"/${p}_*_32x768x7x7.fuse; do
    [ -f "$f" ] && "$RUN" "$f" --device cuda --random-inputs 1 --bench 1 --print-limit 0 2>&1 |
      grep "^bench-cuda: kernel" | sed "s|^|$(basename "$f" .fuse): |" | cut -c1-400
  done
done
echo
timeout 900 python3 bench/gpu/channel_ln_peers.py "$RES" "$REPS" || status=1
exit $status
