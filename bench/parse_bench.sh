#!/bin/sh
# bench/parse_bench.sh - parse+verify+print speed of fuse-opt against
# mlir-opt 19 on one large generic-form file (see bench/README.md).
#
#   bench/parse_bench.sh [FUSE_OPT [MLIR_OPT]]
#
# FUSE_OPT defaults to build/bin/fuse-opt, MLIR_OPT to
# /usr/lib/llvm-19/bin/mlir-opt. Builds nothing. Environment: N (ops,
# default 200000), SEED (default 1), RUNS (default 5), KEEP=1 keeps the
# work folder. Steps:
#   1. bench/gen_generic.py N SEED > input.mlir
#   2. agreement: fuse-opt --print-op-generic and mlir-opt
#      --mlir-print-op-generic must print the same text (first
#      differences are shown otherwise);
#   3. RUNS timed runs of each tool, interleaved (fuse-opt, mlir-opt,
#      fuse-opt, ...), both with --allow-unregistered-dialect, output to
#      /dev/null, measured with /usr/bin/time -f '%e %M %U %S'
#      (wall seconds, peak RSS in KiB, user and system CPU seconds): once
#      with both printing the generic form, once with both printing the
#      custom form;
#   4. a table of medians and the ratios mlir-opt / fuse-opt (wall time is
#      the headline; CPU time is shown too, since it is steadier than wall
#      time on a loaded machine).
# Exit status: 0 when the outputs agree and every run succeeded, 1
# otherwise (the speed target is reported, not enforced).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fuse=${1:-$root/build/bin/fuse-opt}
mlir=${2:-/usr/lib/llvm-19/bin/mlir-opt}
n=${N:-200000}
seed=${SEED:-1}
runs=${RUNS:-5}
target=3

for tool in "$fuse" "$mlir" /usr/bin/time; do
  if [ ! -x "$tool" ]; then
    echo "parse_bench: $tool not found or not executable" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fuse-bench.XXXXXX") || exit 1
if [ "${KEEP:-0}" = 1 ]; then
  echo "work folder: $work"
else
  trap 'rm -rf "$work"' EXIT
fi
input=$work/input.mlir
python3 "$here/gen_generic.py" "$n" "$seed" > "$input" || exit 1
bytes=$(wc -c < "$input")
echo "input: $n ops (seed $seed), $bytes bytes"

status=0

# 2. Agreement of the generic printouts.
"$fuse" --allow-unregistered-dialect --print-op-generic "$input" \
  > "$work/fuse.mlir" 2> "$work/fuse.err" ||
  { echo "fuse-opt failed:"; head -5 "$work/fuse.err"; status=1; }
"$mlir" --allow-unregistered-dialect --mlir-print-op-generic "$input" \
  > "$work/mlir.mlir" 2> "$work/mlir.err" ||
  { echo "mlir-opt failed:"; head -5 "$work/mlir.err"; status=1; }
# mlir-opt ends its output with an empty line, fuse-opt does not: compare
# the printed IR without trailing empty lines.
for f in fuse mlir; do
  awk '{ line[NR] = $0 } END { n = NR; while (n > 0 && line[n] == "") n--;
         for (i = 1; i <= n; i++) print line[i] }' "$work/$f.mlir" \
    > "$work/$f.cmp"
done
if cmp -s "$work/fuse.cmp" "$work/mlir.cmp"; then
  echo "agreement: fuse-opt --print-op-generic == mlir-opt --mlir-print-op-generic ($(wc -l < "$work/mlir.cmp") lines)"
else
  ndiff=$(diff "$work/fuse.cmp" "$work/mlir.cmp" | grep -c '^[<>]')
  echo "agreement: OUTPUTS DIFFER ($ndiff differing lines; < fuse-opt, > mlir-opt); first differences:"
  diff "$work/fuse.cmp" "$work/mlir.cmp" | head -20 | cut -c1-300
  status=1
fi

# 3. Timing. The two tools run interleaved (fuse-opt, mlir-opt, fuse-opt,
# ...) so that a change in the machine's load hits both alike.
# run_once NAME CMD...: one timed run, "wall kib user sys" appended to
# $work/NAME.times.
run_once() {
  name=$1
  shift
  if ! /usr/bin/time -o "$work/one" -f '%e %M %U %S' "$@" "$input" \
      > /dev/null 2> "$work/run.err"; then
    echo "failed: $*" >&2
    head -3 "$work/run.err" >&2
    return 1
  fi
  cat "$work/one" >> "$work/$name.times"
}

# medians NAME: "median_wall median_peak_kib median_cpu" of NAME's runs.
medians() {
  t=$work/$1.times
  secs=$(cut -d' ' -f1 "$t" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  kib=$(cut -d' ' -f2 "$t" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  cpu=$(awk '{print $3 + $4}' "$t" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$secs $kib $cpu"
}

report() { # form fuse_result mlir_result
  set -- "$1" $2 $3
  awk -v form="$1" -v fs="$2" -v fk="$3" -v fc="$4" -v ms="$5" -v mk="$6" \
      -v mc="$7" -v target="$target" 'BEGIN {
    printf "%-8s %-9s %10.3f %10.3f %10.1f\n", form, "fuse-opt", fs, fc, fk / 1024
    printf "%-8s %-9s %10.3f %10.3f %10.1f\n", form, "mlir-opt", ms, mc, mk / 1024
    if (fs > 0 && fc > 0) {
      r = ms / fs
      printf "%-8s ratio mlir-opt/fuse-opt: %.2fx wall time, %.2fx CPU time, %.2fx peak memory (target >= %dx wall: %s)\n",
        form, r, mc / fc, mk / fk, target, (r >= target ? "met" : "NOT met")
    }
  }'
}

echo
echo "median of $runs runs, parse + verify + print to /dev/null:"
printf "%-8s %-9s %10s %10s %10s\n" form tool "wall s" "CPU s" "peak MB"
for form in generic custom; do
  : > "$work/fuse.times"
  : > "$work/mlir.times"
  if [ "$form" = generic ]; then
    fflag=--print-op-generic
    mflag=--mlir-print-op-generic
  else
    fflag=
    mflag=
  fi
  i=0
  failed=0
  while [ "$i" -lt "$runs" ]; do
    # shellcheck disable=SC2086 # an empty flag must vanish
    run_once fuse "$fuse" --allow-unregistered-dialect $fflag || failed=1
    # shellcheck disable=SC2086
    run_once mlir "$mlir" --allow-unregistered-dialect $mflag || failed=1
    i=$((i + 1))
  done
  if [ "$failed" = 1 ]; then
    status=1
    continue
  fi
  report "$form" "$(medians fuse)" "$(medians mlir)"
done
exit $status
