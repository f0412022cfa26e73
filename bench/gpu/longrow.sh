#!/usr/bin/env bash
# bench/gpu/longrow.sh - long rows on chip (docs/codegen.md "Long rows on
# chip") on the GPU machine: correctness against the graph interpreter and
# bandwidth, with the row kept on chip (the default) and re-read in each
# phase (FZ_GPU_ROW_STAGE=0). Nothing is built here:
#     bash bench/gpu/longrow.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 20)
#     REGS="0 16 32" ...   also FZ_GPU_ROW_REGISTERS=N for each N (default: 32 only)
#     FULL_CHECK=0 ...     skips the full-size --check-interp runs (15-45 s each)
#     CHECK=0 ... / BENCH=0 ...   skips part 1 / part 2
# (all of it: about 6-8 minutes on an H100 machine, most of it the graph
# interpreter's full-size references.)
# BUILD_DIR is tests/gpu/pack.sh's folder (fuse-run, plain or xz).
# Part 1, correctness (`fuse-run --device cuda --check-interp`, PASS/FAIL
# lines): every function of tests/lit/gpu/long-rows.fuse (2 or 3 rows of
# 40000..131072 elements: softmax f32/bf16, ragged and odd widths,
# log_softmax, layer_norm of x + r, rms_norm, a row too long to keep, a
# row sum) for two seeds, and bench/gpu/08, 14 and 15 at full size (2048
# rows of 65536), each with staging on and off.
# Part 2, bandwidth (`fuse-run --bench REPS`): for 07 (16384 columns:
# unrolled, not staged: the control), 08, 14 and 15, one line each of
# GB/s (ideal bytes: inputs once, outputs once), the device copy measured
# in the same process, fuse/copy, for stage on (per REGS) and off, and the
# kernel's plan (it says "row on chip: ..." when staged).
# Ends with `N passed, N failed` (correctness); exits 1 when any failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
REGS=${REGS:-32}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

pass=0 fail=0
# check LABEL STAGE(1|0) ARGS...: one fuse-run --check-interp run.
check() {
  local label=$1 stage=$2; shift 2
  local out
  out=$(FZ_GPU_ROW_STAGE=$stage timeout 300 "$RUN" "$@" --device cuda --check-interp --print-limit 0 2>&1)
  local rc=$?
  local res; res=$(echo "$out" | grep "check-interp:" | tr '\n' ' ')
  if [ $rc -eq 0 ] && [ -n "$res" ] && ! echo "$out" | grep -q MISMATCH; then
    pass=$((pass+1)); echo "PASS $label (stage=$stage): $res"
  else
    fail=$((fail+1)); echo "FAIL $label (stage=$stage, exit $rc):"; echo "$out" | tail -n 5
  fi
}

LR=tests/lit/gpu/long-rows.fuse
[ "${CHECK:-1}" != 0 ] && echo "== correctness: cuda against the graph interpreter =="
[ "${CHECK:-1}" != 0 ] && for e in softmax_f32 softmax_40000 softmax_65537 log_softmax layer_norm_res rms_norm too_long row_sum softmax_bf16; do
  # softmax outputs are ~1.5e-5 (1 / 65536): an atol of 1e-5 would accept
  # anything, so softmax is checked relatively.
  case $e in
    softmax_bf16) tol="--rtol 2e-2 --atol 1e-9" ;;
    softmax_*|too_long) tol="--rtol 1e-4 --atol 1e-9" ;;
    *) tol="--rtol 1e-4 --atol 1e-5" ;;
  esac
  for seed in 1 2; do
    for stage in 1 0; do
      check "$e seed $seed" $stage $LR --entry $e --random-inputs $seed $tol
    done
  done
done
if [ "${CHECK:-1}" != 0 ] && [ "${FULL_CHECK:-1}" != 0 ]; then
  for n in 08_softmax_65536 14_softmax_65536_bf16 15_layer_norm_res_65536; do
    case $n in
      14_*) tol="--rtol 2e-2 --atol 1e-9" ;;
      08_*) tol="--rtol 1e-4 --atol 1e-9" ;;
      *) tol="--rtol 1e-4 --atol 1e-5" ;;
    esac
    for stage in 1 0; do
      check "$n (2048 rows)" $stage bench/gpu/$n.fuse --random-inputs 1 $tol
    done
  done
fi

[ "${BENCH:-1}" != 0 ] && echo && echo "== bandwidth: fuse-run --bench $REPS (GB/s of ideal bytes; copy: device-to-device copy, same process) =="
[ "${BENCH:-1}" != 0 ] && printf "%-24s %-12s %9s %9s %8s  %s\n" workload config fuse copy fz/copy plan
bench() {
  local n=$1 cfg=$2; shift 2
  local out line kl gbs cp ratio plan
  out=$(env "$@" timeout 300 "$RUN" bench/gpu/$n.fuse --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
  line=$(echo "$out" | grep "bench-cuda: @")
  kl=$(echo "$out" | grep "bench-cuda: kernel" | head -1)
  if [ -z "$line" ]; then
    printf "%-24s %-12s failed: %s\n" "$n" "$cfg" "$(echo "$out" | grep -m1 -i error || echo "$out" | tail -n 1)"
    return
  fi
  gbs=$(echo "$line" | sed -nE 's/.* ([0-9.]+) GB\/s \(.*/\1/p')
  cp=$(echo "$line" | sed -nE 's/.*device copy ([0-9.]+) GB\/s.*/\1/p')
  ratio=$(awk -v a="$gbs" -v b="$cp" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
  plan="$(echo "$kl" | grep -oE 'shared [0-9]+' | head -1); $(echo "$kl" | grep -oE 'row on chip: .*|[0-9]+ per thread \((loop|unrolled)\)' | head -1)"
  printf "%-24s %-12s %9s %9s %8s  %s\n" "$n" "$cfg" "$gbs" "$cp" "$ratio" "$plan"
}
[ "${BENCH:-1}" != 0 ] && for n in 07_softmax_16384 08_softmax_65536 14_softmax_65536_bf16 15_layer_norm_res_65536; do
  for r in $REGS; do
    bench $n "on regs=$r" FZ_GPU_ROW_STAGE=1 FZ_GPU_ROW_REGISTERS=$r
  done
  bench $n "off" FZ_GPU_ROW_STAGE=0
done
echo
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
