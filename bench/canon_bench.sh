#!/bin/sh
# bench/canon_bench.sh - canonicalize+cse speed of fuse-opt against
# mlir-opt 19 on the same random DAG of elementwise ops.
#
#   bench/canon_bench.sh [FUSE_OPT [MLIR_OPT]]
#
# FUSE_OPT defaults to build/bin/fuse-opt, MLIR_OPT to
# /usr/lib/llvm-19/bin/mlir-opt. Builds nothing. Environment: N (ops,
# default 200000), SEED (default 1), RUNS (default 5), KEEP=1 keeps the
# work folder. Steps:
#   1. bench/gen_canon_dag.py writes the DAG twice: graph ops for fuse
#      (add mul sub max relu constant), arith/math ops for mlir-opt (addf
#      mulf subf maximumf absf constant), same structure;
#   2. RUNS timed runs of `fuse-opt --canonicalize --cse` and of
#      `mlir-opt --cse --canonicalize`, interleaved (each verifies after
#      every pass, as by default), output to a file, measured with
#      /usr/bin/time (wall seconds, peak RSS, user + system CPU);
#   3. the ops left in each output (fuse: graph.*, mlir: arith.*/math.*);
#   4. a table of medians, the ratios mlir-opt / fuse-opt (wall time is
#      the headline; CPU time is steadier on a loaded machine), and the
#      pass-only times from --pass-timing / --mlir-timing.
# Exit status: 0 when every run succeeded, 1 otherwise (the targets -
# 3x faster, no more surviving ops - are reported, not enforced).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fuse=${1:-$root/build/bin/fuse-opt}
mlir=${2:-/usr/lib/llvm-19/bin/mlir-opt}
n=${N:-200000}
seed=${SEED:-1}
runs=${RUNS:-5}

for tool in "$fuse" "$mlir" /usr/bin/time; do
  if [ ! -x "$tool" ]; then
    echo "canon_bench: $tool not found or not executable" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fuse-canon.XXXXXX") || exit 1
if [ "${KEEP:-0}" != 1 ]; then
  trap 'rm -rf "$work"' EXIT
fi

python3 "$here/gen_canon_dag.py" --ops "$n" --seed "$seed" --dialect fuse \
  > "$work/dag.fuse" || exit 1
python3 "$here/gen_canon_dag.py" --ops "$n" --seed "$seed" --dialect mlir \
  > "$work/dag.mlir" || exit 1

status=0
# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# run_once NAME CMD... : one timed run, "wall rss user sys" appended to
# $work/NAME.times
run_once() {
  name=$1
  shift
  if ! /usr/bin/time -f '%e %M %U %S' -o "$work/$name.t" "$@" \
       > /dev/null 2> "$work/$name.err"; then
    echo "canon_bench: $name failed:" >&2
    cat "$work/$name.err" >&2
    status=1
  fi
  cat "$work/$name.t" >> "$work/$name.times"
}

# The two tools run interleaved so that a change in the machine's load
# hits both alike.
: > "$work/fuse.times"
: > "$work/mlir.times"
i=0
while [ "$i" -lt "$runs" ]; do
  run_once fuse "$fuse" "$work/dag.fuse" --canonicalize --cse -o "$work/out.fuse"
  run_once mlir "$mlir" "$work/dag.mlir" --cse --canonicalize -o "$work/out.mlir"
  i=$((i + 1))
done

fuse_t=$(cut -d' ' -f1 "$work/fuse.times" | median)
mlir_t=$(cut -d' ' -f1 "$work/mlir.times" | median)
fuse_m=$(cut -d' ' -f2 "$work/fuse.times" | median)
mlir_m=$(cut -d' ' -f2 "$work/mlir.times" | median)
fuse_c=$(awk '{print $3 + $4}' "$work/fuse.times" | median)
mlir_c=$(awk '{print $3 + $4}' "$work/mlir.times" | median)
fuse_ops=$(grep -c 'graph\.' "$work/out.fuse")
mlir_ops=$(grep -cE 'arith\.|math\.' "$work/out.mlir")

# Pass-only times (one run each).
"$fuse" "$work/dag.fuse" --canonicalize --cse --pass-timing -o /dev/null \
  2> "$work/fuse.timing" > /dev/null
"$mlir" "$work/dag.mlir" --cse --canonicalize --mlir-timing -o /dev/null \
  2> "$work/mlir.timing" > /dev/null
pass_time() { # FILE NAME...: sum of the wall times of the rows named
  f=$1
  shift
  for name in "$@"; do
    grep -E "[0-9] \( *[0-9.]+%\) +$name\$" "$f" | head -1 | awk '{print $1}'
  done | awk '{s+=$1} END {printf "%.4f", s}'
}
fuse_p=$(pass_time "$work/fuse.timing" Canonicalizer CSE)
mlir_p=$(pass_time "$work/mlir.timing" Canonicalizer CSE)

echo "canonicalize+cse on a random DAG of $n elementwise ops (seed $seed, median of $runs runs)"
printf '%-10s %10s %10s %10s %14s %12s\n' tool "wall (s)" "CPU (s)" "RSS (MiB)" "passes (s)" "ops left"
printf '%-10s %10s %10s %10.1f %14s %12s\n' fuse-opt "$fuse_t" "$fuse_c" \
  "$(echo "$fuse_m" | awk '{print $1/1024}')" "$fuse_p" "$fuse_ops"
printf '%-10s %10s %10s %10.1f %14s %12s\n' mlir-opt "$mlir_t" "$mlir_c" \
  "$(echo "$mlir_m" | awk '{print $1/1024}')" "$mlir_p" "$mlir_ops"
awk -v f="$fuse_t" -v m="$mlir_t" -v fc="$fuse_c" -v mc="$mlir_c" \
    -v fk="$fuse_m" -v mk="$mlir_m" -v fp="$fuse_p" -v mp="$mlir_p" 'BEGIN {
  printf "speedup (mlir-opt / fuse-opt): whole run %.2fx wall (target 3x), %.2fx CPU; passes only %.2fx; peak memory %.2fx\n",
         (f > 0 ? m / f : 0), (fc > 0 ? mc / fc : 0), (fp > 0 ? mp / fp : 0),
         (fk > 0 ? mk / fk : 0) }'
if [ "$fuse_ops" -le "$mlir_ops" ]; then
  echo "surviving ops: fuse-opt $fuse_ops <= mlir-opt $mlir_ops (target met)"
else
  echo "surviving ops: fuse-opt $fuse_ops > mlir-opt $mlir_ops (target missed)"
fi
exit $status
