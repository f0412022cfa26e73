#!/usr/bin/env bash
# bench/cpu/run.sh [BIN_DIR]: the CPU benchmark of issue 8.
#
# For each workload of workloads.py (relu(x*s+b), gelu(x+b), softmax rows,
# layer_norm(x+r)) and each size in SIZES (elements of x, rows of COLS):
#   - fuse, fused:    fuse-run --device cpu --bench RUNS (one loop nest)
#   - fuse, unfused:  the same with --no-fuse (every op its own loop nest,
#                     intermediates in memory)
#   - numpy and PyTorch CPU (peers.py, /usr/bin/python3 by default)
#   - memcpy of the same number of bytes, measured inside the fuse-run of
#     the fused kernel (one thread, and THREADS threads)
# Every timed run rotates through enough copies of its data (1 GiB in all,
# at most 8) that nothing is still in the caches from the previous use:
# servers have L3 caches of hundreds of MB.
# Prints one table: median milliseconds, effective GB/s of the fused
# kernel (inputs read once + outputs written once), its share of the
# multi-threaded memcpy bandwidth, and how many times faster it is than
# each peer. Before timing, each workload is checked against the
# reference interpreter at a small size (f32: rtol 1e-5; atol 1e-5 for
# layer_norm, whose outputs are O(1) and whose f32 mean loses ~1e-6).
#
# Then matmul + bias + gelu, gelu(x @ w + b) with x, w [S, S] for each S
# in MM_SIZES and each dtype in MM_DTYPES: fuse (tile-contractions),
# numpy (its BLAS for x @ w, then + b and gelu op by op; f32 only) and
# PyTorch (F.gelu(torch.addmm(b, x, w))), MM_RUNS timed runs each, as
# GFLOP/s (2 S^3 flops over the median wall time) and CPU ms per call
# (the process's CPU time over the timed runs: on a machine shared with
# other work, compare those). Checked first against the interpreter on
# ragged shapes (f32 rtol 1e-5 atol 1e-5; bf16 rtol 2e-2 atol 2e-2).
#
# Then conv2d + bias + relu, relu(conv2d(x, w, b)) in NCHW, for the
# ResNet-50 shapes of CONV_SHAPES (workloads.py: 3x3 64 -> 64 at 56x56,
# 1x1 64 -> 256 at 56x56, 3x3 stride 2 128 -> 128 from 56x56, the 7x7
# stride-2 stem; batch 1) and each dtype in CONV_DTYPES: fuse
# (tile-convolutions), fuse --no-tile (the nest as lowered, a reduction
# per output element) and PyTorch (F.relu(F.conv2d(...)); numpy has no
# convolution), CONV_RUNS timed runs each, as GFLOP/s (2 N M OH OW C K K
# flops over the median wall time), CPU ms per call and the ratios
# PyTorch time / fuse time, wall and CPU (> 1: fuse is faster). Checked first against the
# interpreter, tiled and --no-tile, on small ragged shapes (f32 rtol
# 1e-5 atol 1e-5; bf16 rtol 2e-2 atol 5e-2).
#
# BIN_DIR holds fuse-run (default: build/bin). Environment:
#   SIZES="16777216 33554432 67108864"  COLS=4096  RUNS=20
#   MM_SIZES="1024 2048"  MM_DTYPES="f32 bf16"  MM_RUNS=10
#   CONV_SHAPES="3x3_64_56 1x1_64to256_56 3x3s2_128_56 7x7s2_stem"
#   CONV_DTYPES="f32 bf16"  CONV_RUNS=20
#   WORKLOADS="relu gelu softmax layernorm mmgelu conv"
#   THREADS=$(nproc)  PY=/usr/bin/python3  OUT=bench/cpu/last_output.txt
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/bin}
fuse_run=$bin/fuse-run
SIZES=${SIZES:-"16777216 33554432 67108864"}
COLS=${COLS:-4096}
RUNS=${RUNS:-20}
MM_SIZES=${MM_SIZES:-"1024 2048"}
MM_DTYPES=${MM_DTYPES:-"f32 bf16"}
MM_RUNS=${MM_RUNS:-10}
CONV_SHAPES=${CONV_SHAPES:-"3x3_64_56 1x1_64to256_56 3x3s2_128_56 7x7s2_stem"}
CONV_DTYPES=${CONV_DTYPES:-"f32 bf16"}
CONV_RUNS=${CONV_RUNS:-20}
WORKLOADS=${WORKLOADS:-"relu gelu softmax layernorm mmgelu conv"}
EW=$(tr ' ' '\n' <<<"$WORKLOADS" | grep -v '^mmgelu$' | grep -v '^conv$' | tr '\n' ' ' || true)
THREADS=${THREADS:-$(nproc)}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-$here/last_output.txt}
[[ -x $fuse_run ]] || { echo "run.sh: no fuse-run in $bin" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

{
echo "fuse CPU benchmark: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); threads: $THREADS; runs: $RUNS (median)"
echo "fuse-run: $fuse_run"
echo

echo "correctness (--check-interp; the elementwise workloads at 65536 elements):"
for w in $EW; do
  "$PY" "$here/workloads.py" $w 65536 1024 >"$tmp/check_$w.fuse"
  atol=1e-8
  [[ $w == layernorm ]] && atol=1e-5
  for mode in "" "--no-fuse"; do
    res=$("$fuse_run" "$tmp/check_$w.fuse" --device cpu --random-inputs 7 \
      --check-interp --rtol 1e-5 --atol $atol --print-limit 0 $mode |
      grep '^check-interp')
    echo "  $w ${mode:-(fused)}: ${res#check-interp: }"
  done
done
if [[ " $WORKLOADS " == *" mmgelu "* ]]; then
  for dt in $MM_DTYPES; do
    tol="--rtol 1e-5 --atol 1e-5"
    [[ $dt == bf16 ]] && tol="--rtol 2e-2 --atol 2e-2"
    "$PY" "$here/workloads.py" mmgelu 77 45 203 $dt >"$tmp/check_mm.fuse"
    res=$("$fuse_run" "$tmp/check_mm.fuse" --device cpu --random-inputs 7 \
      --check-interp $tol --print-limit 0 | grep '^check-interp')
    echo "  mmgelu 77x45 @ 45x203 $dt (tiled): ${res#check-interp: }"
  done
fi
if [[ " $WORKLOADS " == *" conv "* ]]; then
  for dt in $CONV_DTYPES; do
    tol="--rtol 1e-5 --atol 1e-5"
    [[ $dt == bf16 ]] && tol="--rtol 2e-2 --atol 5e-2"
    for shape in 2,5,11,13,7,3,1,1 1,6,13,17,9,3,2,1 1,12,9,20,10,1,1,0; do
      "$PY" "$here/workloads.py" conv $shape $dt >"$tmp/check_conv.fuse"
      for mode in "" "--no-tile"; do
        res=$("$fuse_run" "$tmp/check_conv.fuse" --device cpu --random-inputs 7 \
          --check-interp $tol --print-limit 0 $mode | grep '^check-interp')
        echo "  conv $shape $dt ${mode:-(tiled)}: ${res#check-interp: }"
      done
    done
  done
fi
echo

[[ -n ${EW// /} ]] && printf '%-10s %10s | %9s %7s %6s | %9s %5s | %9s %5s | %9s %5s | %8s %8s\n' \
  workload elements "fused ms" "GB/s" "%cpy" "unfus ms" "x" "numpy ms" "x" \
  "torch ms" "x" "cpy1 GB/s" "cpyN GB/s"
for w in $EW; do
  for n in $SIZES; do
    "$PY" "$here/workloads.py" $w "$n" "$COLS" >"$tmp/$w.fuse"
    f=$("$fuse_run" "$tmp/$w.fuse" --device cpu --random-inputs 1 \
      --bench "$RUNS" --threads "$THREADS" --print-limit 0)
    u=$("$fuse_run" "$tmp/$w.fuse" --device cpu --random-inputs 1 \
      --bench "$RUNS" --threads "$THREADS" --print-limit 0 --no-fuse)
    p=$("$PY" "$here/peers.py" $w "$n" "$COLS" "$RUNS" "$THREADS")
    fms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$f" | head -1)
    fgb=$(sed -n 's/.*: \([0-9.]*\) GB\/s effective.*/\1/p' <<<"$f" | head -1)
    c1=$(sed -n 's/.*: \([0-9.]*\) GB\/s on 1 thread.*/\1/p' <<<"$f")
    cn=$(sed -n 's/.*, \([0-9.]*\) GB\/s on [0-9]* threads.*/\1/p' <<<"$f")
    ums=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$u" | head -1)
    nms=$(awk '$2 == "numpy" && $3 != "n/a" {print $3}' <<<"$p")
    tms=$(awk '$2 == "torch" && $3 != "n/a" {print $3}' <<<"$p")
    ratio() { [[ -n ${1:-} && -n ${2:-} ]] && awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}' || echo "-"; }
    pct=$(awk -v a="$fgb" -v b="${cn:-0}" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * a / b; else print "-"}')
    printf '%-10s %10s | %9s %7s %6s | %9s %5s | %9s %5s | %9s %5s | %8s %8s\n' \
      $w "$n" "$fms" "$fgb" "$pct" "$ums" "$(ratio "$ums" "$fms")" \
      "${nms:--}" "$(ratio "$nms" "$fms")" "${tms:--}" "$(ratio "$tms" "$fms")" \
      "$c1" "$cn"
  done
done
if [[ -n ${EW// /} ]]; then
echo
echo "x: how many times longer the peer takes than fuse's fused kernel."
echo "%cpy: fused GB/s / memcpy GB/s on $THREADS threads (same run)."
grep -h '^peer .* n/a' <<<"${p:-}" || true
fi

if [[ " $WORKLOADS " == *" mmgelu "* ]]; then
  echo
  echo "matmul + bias + gelu, gelu(x @ w + b), x and w [S, S]; $THREADS threads, median of $MM_RUNS; cpu: process CPU ms per call"
  printf '%-6s %5s | %9s %8s %9s | %9s %8s %9s %5s | %9s %8s %9s %5s\n' \
    S dtype "fuse ms" GFLOP/s "cpu ms" "numpy ms" GFLOP/s "cpu ms" "x" \
    "torch ms" GFLOP/s "cpu ms" "x"
  for dt in $MM_DTYPES; do
    for n in $MM_SIZES; do
      "$PY" "$here/workloads.py" mmgelu "$n" $dt >"$tmp/mm.fuse"
      fl=$("$PY" "$here/workloads.py" --flops mmgelu "$n")
      f=$("$fuse_run" "$tmp/mm.fuse" --device cpu --random-inputs 1 \
        --bench "$MM_RUNS" --threads "$THREADS" --print-limit 0)
      p=$("$PY" "$here/peers.py" mmgelu "$n" "$MM_RUNS" "$THREADS" $dt)
      fms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$f" | head -1)
      fcpu=$(sed -n 's/.*cpu time \([0-9.]*\) ms.*/\1/p' <<<"$f")
      nms=$(awk '$2 == "numpy" && $3 != "n/a" {print $3}' <<<"$p")
      ncpu=$(awk '$2 == "numpy" && $3 != "n/a" {print $4}' <<<"$p")
      tms=$(awk '$2 == "torch" && $3 != "n/a" {print $3}' <<<"$p")
      tcpu=$(awk '$2 == "torch" && $3 != "n/a" {print $4}' <<<"$p")
      gf() { [[ -n ${1:-} ]] && awk -v f="$fl" -v t="$1" 'BEGIN {printf "%.1f", f / t / 1e6}' || echo "-"; }
      rt() { [[ -n ${1:-} && -n ${2:-} ]] && awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}' || echo "-"; }
      printf '%-6s %5s | %9s %8s %9s | %9s %8s %9s %5s | %9s %8s %9s %5s\n' \
        "$n" $dt "$fms" "$(gf "$fms")" "$fcpu" "${nms:--}" "$(gf "$nms")" \
        "${ncpu:--}" "$(rt "$nms" "$fms")" "${tms:--}" "$(gf "$tms")" \
        "${tcpu:--}" "$(rt "$tms" "$fms")"
      grep -h '^peer .* n/a' <<<"$p" || true
    done
  done
  echo "x: peer wall time / fuse wall time."
fi

if [[ " $WORKLOADS " == *" conv "* ]]; then
  echo
  echo "conv2d + bias + relu, relu(conv2d(x, w, b)), NCHW, batch 1; $THREADS threads, median of $CONV_RUNS; cpu: process CPU ms per call"
  printf '%-15s %5s | %9s %8s %9s | %9s %8s | %9s %8s %9s | %6s %6s\n' \
    conv dtype "fuse ms" GFLOP/s "cpu ms" "notile ms" GFLOP/s \
    "torch ms" GFLOP/s "cpu ms" "x" "x cpu"
  for dt in $CONV_DTYPES; do
    for name in $CONV_SHAPES; do
      shape=$("$PY" -c "import sys; sys.path.insert(0, '$here'); import workloads; print(dict(workloads.CONV_SHAPES)['$name'])")
      "$PY" "$here/workloads.py" conv "$shape" $dt >"$tmp/conv.fuse"
      fl=$("$PY" "$here/workloads.py" --flops conv "$shape")
      f=$("$fuse_run" "$tmp/conv.fuse" --device cpu --random-inputs 1 \
        --bench "$CONV_RUNS" --threads "$THREADS" --print-limit 0)
      u=$("$fuse_run" "$tmp/conv.fuse" --device cpu --random-inputs 1 \
        --bench "$CONV_RUNS" --threads "$THREADS" --print-limit 0 --no-tile)
      p=$("$PY" "$here/peers.py" conv "$shape" "$CONV_RUNS" "$THREADS" $dt)
      fms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$f" | head -1)
      fcpu=$(sed -n 's/.*cpu time \([0-9.]*\) ms.*/\1/p' <<<"$f")
      ums=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$u" | head -1)
      tms=$(awk '$2 == "torch" && $3 != "n/a" {print $3}' <<<"$p")
      tcpu=$(awk '$2 == "torch" && $3 != "n/a" {print $4}' <<<"$p")
      gf() { [[ -n ${1:-} ]] && awk -v f="$fl" -v t="$1" 'BEGIN {printf "%.1f", f / t / 1e6}' || echo "-"; }
      rt() { [[ -n ${1:-} && -n ${2:-} ]] && awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}' || echo "-"; }
      printf '%-15s %5s | %9s %8s %9s | %9s %8s | %9s %8s %9s | %6s %6s\n' \
        "$name" $dt "$fms" "$(gf "$fms")" "$fcpu" "$ums" "$(gf "$ums")" \
        "${tms:--}" "$(gf "$tms")" "${tcpu:--}" "$(rt "$tms" "$fms")" \
        "$(rt "$tcpu" "$fcpu")"
      grep -h '^peer torch n/a' <<<"$p" || true
    done
  done
  echo "x: PyTorch wall time / fuse wall time (= fuse GFLOP/s / PyTorch GFLOP/s; > 1: fuse is faster)."
  echo "x cpu: the same in process CPU time per call (steadier on a shared machine)."
fi
} | tee "$OUT"
