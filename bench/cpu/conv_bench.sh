#!/usr/bin/env bash
# bench/cpu/conv_bench.sh - one convolution at a time (bench/cpu/conv_gen.py's
# ResNet shapes, constant weights, bias + relu), both tile-convolutions
# mappings side by side (FZ_CPU_CONV=rows|flat) and the default, with
# fuse-run --bench's GFLOP/s and its peak fma rate measured in the same
# run. GFLOP/s from the median wall time and from the process's CPU time
# per run (the steadier on a shared machine: time spent waiting for a
# core is not counted; with several threads the pool's brief spinning
# is).
#
#   bash bench/cpu/conv_bench.sh [BUILD_DIR] [THREADS] [RUNS] [NAME ...]
# MAPPINGS=default runs only the default (e.g. for a build that predates
# FZ_CPU_CONV).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}; threads=${2:-1}; runs=${3:-20}
shift $(( $# > 3 ? 3 : $# ))
run=$build/bin/fuse-run
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$here/conv_gen.py" "$dir" "$@" > "$dir/flops.txt" || exit 1
echo "# $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $threads thread(s), $runs runs"
printf "%-24s %-7s %10s %10s %9s %9s %9s %7s\n" conv mapping "median ms" "cpu ms" "GF/s" "GF/s cpu" "peak" "cpu/pk"
while read -r name flops; do
  for m in ${MAPPINGS:-default rows flat}; do
    out=$(env ${m/default/X}=1 FZ_CPU_CONV=$m "$run" "$dir/$name.fuse" --device cpu \
      --random-inputs 1 --bench "$runs" --threads "$threads" --print-limit 0 2>&1)
    med=$(sed -nE 's/.*median ([0-9.]+) ms.*/\1/p' <<<"$out" | head -1)
    cpu=$(sed -nE 's/bench: cpu time ([0-9.]+) ms.*/\1/p' <<<"$out")
    peak=$(sed -nE 's/.*peak fma rate ([0-9.]+) GFLOP.*/\1/p' <<<"$out")
    awk -v n="$name" -v m="$m" -v f="$flops" -v t="$med" -v c="$cpu" -v p="$peak" -v th="$threads" 'BEGIN {
      g = f / t / 1e6; gc = f / (c / th) / 1e6;
      if (p > 0) printf "%-24s %-7s %10.3f %10.3f %9.1f %9.1f %9.1f %7.2f\n", n, m, t, c, g, gc, p, gc / p;
      else printf "%-24s %-7s %10.3f %10.3f %9.1f %9.1f %9s %7s\n", n, m, t, c, g, gc, "-", "-" }'
  done
done < "$dir/flops.txt"
