#!/usr/bin/env bash
# bench/gpu/attention.sh - the flash-attention kernel (docs/codegen.md
# "Flash attention": one graph.attention = one kernel of lower-loop-to-
# kernel's attention mapping) against torch's scaled_dot_product_attention
# with its flash backend, on the GPU machine. Nothing is built here:
#     bash bench/gpu/attention.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 50)
#     SEQS="128 512" DIMS=64 TYPES=bf16 CAUSAL=1 ...   a subset
#     CHECK=0 ...   skips part 1
#     BMS="128" ... the query tiles timed (default "64 128": both, each
#                   row of the table shows both, FZ_GPU_ATTN_BM)
# BUILD_DIR is tests/gpu/pack.sh's folder (fuse-run, plain or xz).
# Workloads: q, k, v [B, H, S, D] with B x S = 16384 tokens and H x D =
# 2048 (B x H fills the GPU at every S: 2048 heads of 128 tokens down to
# 64 of 4096), S 128, 512, 2048, 4096, D 64 and 128, bf16 and f16, causal
# and not, scale 1/sqrt(D).
# Part 1, correctness against the graph interpreter (`fuse-run --device
# cuda --check-interp`, PASS/FAIL lines): small batches at S 128 and 200
# (a ragged last tile), every D, type, causal flag and query tile, and an
# additive mask.
# Part 2, every benchmark run's output checked first, then timed
# (attention_peers.py): per workload and query tile of BMS
# (FZ_GPU_ATTN_BM=64 and 128) `fuse-run --device cuda --random-inputs 1
# --save-inputs --output-dir DIR --bench REPS` (CUDA events, median; its
# inputs and output as .npy, removed after the check); it compares fuse's output with torch's
# attention in f32 on the same inputs (f16: rtol 5e-3 atol 4e-3, bf16:
# rtol 2e-2 atol 2e-2; a FAIL marks the row) and times
# F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION) the
# same way (median of REPS after warm-up). The table: per workload
# fuse's microseconds per query tile, the best one's TFLOP/s (4 B H S^2
# D, half for causal), torch's microseconds and TFLOP/s, and torch /
# fuse's best (above 1: fuse is faster). Exits 1 when a check failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build-gpu-carry}
REPS=${2:-50}
SEQS=${SEQS:-"128 512 2048 4096"}
DIMS=${DIMS:-"64 128"}
TYPES=${TYPES:-"bf16 f16"}
CAUSAL=${CAUSAL:-"0 1"}
BMS=${BMS:-"64 128"}
. tests/gpu/find_run.sh
fz_find_run "$BUILD" || exit 1
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ "${RUN#/tmp/}" != "$RUN" ] && rm -f "$RUN"' EXIT
status=0

# attention B H S D TYPE CAUSAL [MASK]: a function computing one.
attention() {
  local b=$1 h=$2 s=$3 d=$4 t=$5 c=$6 m=${7:-0} ty sc attrs margs="" mtype="" params
  ty="tensor<${b}x${h}x${s}x${d}x$t>"
  sc=$(python3 -c "print(repr(1.0 / $d ** 0.5))")
  attrs="scale = $sc : f64"
  [ "$c" = 1 ] && attrs="$attrs, causal = true"
  params="%q: $ty, %k: $ty, %v: $ty"
  if [ "$m" = 1 ]; then
    margs=", %m" mtype=", tensor<${b}x1x${s}x${s}x$t>"
    params="$params, %m: tensor<${b}x1x${s}x${s}x$t>"
  fi
  cat <<EOT
func.func @main($params) -> $ty {
  %0 = graph.attention %q, %k, %v$margs {$attrs} : $ty, $ty, $ty$mtype -> $ty
  return %0 : $ty
}
EOT
}

if [ "${CHECK:-1}" != 0 ]; then
  echo "== correctness: cuda against the graph interpreter =="
  for t in $TYPES; do
    case $t in bf16) tol="--rtol 2e-2 --atol 2e-2" ;; *) tol="--rtol 5e-3 --atol 4e-3" ;; esac
    for d in $DIMS; do
      for bm in $BMS; do
        for s in 128 200; do
          for c in $CAUSAL; do
            f=$TMP/check_${t}_${d}_${s}_$c.fuse
            attention 2 3 "$s" "$d" "$t" "$c" >"$f"
            FZ_GPU_ATTN_BM=$bm fz_check_cuda "$t d=$d s=$s causal=$c BM=$bm" "$f" --random-inputs 3 $tol || status=1
          done
        done
        f=$TMP/check_${t}_${d}_mask.fuse
        attention 2 2 200 "$d" "$t" 0 1 >"$f"
        FZ_GPU_ATTN_BM=$bm fz_check_cuda "$t d=$d s=200 mask BM=$bm" "$f" --random-inputs 3 $tol || status=1
      done
    done
  done
fi

# One function per workload; attention_peers.py runs fuse-run on each
# (once per query tile), checks and times it, and times torch.
PLAN=$TMP/plan.txt
: >"$PLAN"
for t in $TYPES; do
  for d in $DIMS; do
    for s in $SEQS; do
      for c in $CAUSAL; do
        b=$((16384 / s)) h=$((2048 / d))
        f=$TMP/${t}_d${d}_s${s}_c$c.fuse
        attention "$b" "$h" "$s" "$d" "$t" "$c" >"$f"
        for bm in $BMS; do
          echo "$t $d $s $c $b $h $bm $f" >>"$PLAN"
        done
      done
    done
  done
done
echo
RUN=$RUN TMPDIR=$TMP timeout 3600 python3 bench/gpu/attention_peers.py "$PLAN" "$REPS" || status=1
exit $status
