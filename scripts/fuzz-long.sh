#!/usr/bin/env bash
# Long fuzzing runs (docs/robustness.md, "Long runs"): works through a
# queue of runs with at most FZ_FUZZ_SLOTS fuzzer processes at a time,
# each at nice 19 so that builds on the same machine go first, and keeps
# a ledger of the CPU time each run used.
#
#   bash scripts/fuzz-long.sh init            build the targets, write the
#                                             dictionaries, create the queue
#                                             (scripts/fuzz-long.sh's default
#                                             schedule) unless one exists
#   bash scripts/fuzz-long.sh add T SECONDS [VAR=VALUE...]
#                                             append a run of fuzz_T
#   bash scripts/fuzz-long.sh run             start the slots (foreground;
#                                             use nohup ... & for a long run)
#   bash scripts/fuzz-long.sh record LOG      append a finished run's line to
#                                             the ledger (run-one does)
#   bash scripts/fuzz-long.sh report          CPU time, executions, corpus
#                                             per target from the ledger
#   bash scripts/fuzz-long.sh merge [T...]    add the long-run inputs that
#                                             add coverage to fuzz/corpus/T
#                                             (-merge=1; the seeds stay)
#
# Everything lives under FZ_FUZZ_LONG_DIR (default build-fuzz/long, not
# tracked): corpus/<target>/ (persistent, grows across runs; the seeds of
# fuzz/corpus/<target>/ are read too), artifacts/<target>/ (crashes,
# timeouts, leaks), logs/, queue (one run a line: target seconds env...),
# ledger.tsv (one line a finished run). Each run is libFuzzer's fork mode
# with one worker (-fork=1 -ignore_crashes=1 -ignore_timeouts=1
# -ignore_ooms=1), so a crash is saved and the run goes on. The CPU time
# is /usr/bin/time's user and system time of the run, its workers
# included (they are waited-for children).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${FZ_FUZZ_BUILD_DIR:-$root/build-fuzz}
dir=${FZ_FUZZ_LONG_DIR:-$build/long}
slots=${FZ_FUZZ_SLOTS:-2}
queue=$dir/queue
ledger=$dir/ledger.tsv

# The dictionary of a target (empty: none).
dict_of() {
  case "$1" in
  parser) echo "$dir/parser.dict" ;;
  kernel) echo "$dir/kernel.dict" ;;
  pipeline) echo "$dir/pipeline.dict" ;;
  run) echo "$dir/run.dict" ;;
  onnx) echo "$dir/onnx.dict" ;;
  *) echo "" ;;
  esac
}

cmd_init() {
  mkdir -p "$dir"/{corpus,artifacts,logs}
  cmake -S "$root" -B "$build" -G "Unix Makefiles" -DCMAKE_C_COMPILER=clang \
    -DFZ_FUZZ=ON -DFZ_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$dir/logs/cmake.log" 2>&1 || { cat "$dir/logs/cmake.log"; exit 1; }
  nice -n 19 make -C "$build" -j2 --no-print-directory >"$dir/logs/make.log" 2>&1 ||
    { tail -30 "$dir/logs/make.log"; exit 1; }
  for d in parser kernel pipeline run onnx; do
    "$build/bin/gen_fuzz_dict" "$d" >"$dir/$d.dict" || exit 1
  done
  if [[ ! -s "$queue" ]]; then
    cat >"$queue" <<'EOF'
parser 2700
diff 2700 FZ_FUZZ_DIFF_CPU=1
parser 2700
diff 2700 FZ_FUZZ_DIFF_CPU=0
onnx 1800
pipeline 1200
npy 900
parser 2700
diff 2700 FZ_FUZZ_DIFF_CPU=1
EOF
  fi
  [[ -f "$ledger" ]] ||
    printf 'start\ttarget\tenv\tseconds\tuser_s\tsys_s\twall_s\texecs\tcorpus\tartifacts\texit\n' >"$ledger"
  echo "fuzz-long: ready in $dir ($(wc -l <"$queue") runs queued)"
}

# Pops the first line of the queue (under a lock); empty when none.
pop() {
  (
    flock 9
    line=$(head -n 1 "$queue" 2>/dev/null)
    [[ -n "$line" ]] && sed -i 1d "$queue"
    echo "$line"
  ) 9>"$dir/queue.lock"
}

run_one() {
  local target=$1 seconds=$2
  shift 2
  [[ -x "$build/bin/fuzz_$target" ]] || { echo "fuzz-long: no fuzz_$target" >&2; return; }
  # A private copy: fork mode starts its workers from the binary's path,
  # which a rebuild during the run would swap for an incompatible one.
  mkdir -p "$dir/bin"
  local bin=$dir/bin/fuzz_$target.$$
  cp "$build/bin/fuzz_$target" "$bin" || return
  local corpus=$dir/corpus/$target art=$dir/artifacts/$target
  mkdir -p "$corpus" "$art"
  local stamp log dict
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  log=$dir/logs/$target-$stamp-$$.log
  dict=$(dict_of "$target")
  local dictArg=()
  [[ -n "$dict" && -s "$dict" ]] && dictArg=(-dict="$dict")
  local maxLen=4096 extra=()
  [[ $target == kernel ]] && maxLen=8192 # whole kernel test files
  [[ $target == run ]] && extra=(-close_fd_mask=3) # the tool's output
  local seeds=()
  [[ -d "$root/fuzz/corpus/$target" ]] && seeds=("$root/fuzz/corpus/$target")
  # What `record` needs besides the log: target, env, seconds, and the
  # artifact count before the run.
  printf '%s\t%s\t%s\t%s\t%s\n' "$stamp" "$target" "${*:--}" "$seconds" \
    "$(ls "$art" | wc -l)" >"$log.meta"
  env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    LSAN_OPTIONS=suppressions=$root/fuzz/lsan.supp \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$@" \
    nice -n 19 /usr/bin/time -f '%U %S %e' -o "$log.time" \
    "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -max_len="$maxLen" \
    -print_final_stats=1 -artifact_prefix="$art/" "${dictArg[@]}" "${extra[@]}" \
    "$corpus" "${seeds[@]}" >"$log" 2>&1
  echo $? >"$log.rc"
  rm -f "$bin"
  cmd_record "$log"
}

# Appends the ledger line of a finished run from LOG, LOG.meta, LOG.time
# and LOG.rc.
cmd_record() {
  local log=$1 stamp target envs seconds before user sys wall execs
  IFS=$'\t' read -r stamp target envs seconds before <"$log.meta"
  read -r user sys wall < <(tail -n 1 "$log.time")
  # Fork mode's progress lines start with "#<executions>:".
  execs=$(grep -oE '^#[0-9]+:' "$log" | tail -n 1 | tr -d '#:')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$stamp" "$target" \
    "$envs" "$seconds" "$user" "$sys" "$wall" "${execs:-0}" \
    "$(ls "$dir/corpus/$target" | wc -l)" \
    "$(($(ls "$dir/artifacts/$target" | wc -l) - before))" \
    "$(cat "$log.rc" 2>/dev/null || echo '?')" >>"$ledger"
}

# Each run is a new process of this script, so that edits to it (and
# rebuilt targets) apply from the next run on.
slot() {
  local line
  while line=$(pop) && [[ -n "$line" ]]; do
    # shellcheck disable=SC2086
    bash "$root/scripts/fuzz-long.sh" run-one $line
  done
}

cmd_run() {
  [[ -f "$queue" ]] || { echo "fuzz-long: run init first" >&2; exit 1; }
  local pids=()
  for ((i = 0; i < slots; ++i)); do
    slot &
    pids+=($!)
    sleep 1
  done
  wait "${pids[@]}"
  echo "fuzz-long: queue empty"
}

# Adds to fuzz/corpus/<target>/ the inputs of the long-run corpus that
# add coverage (libFuzzer's -merge=1; the seeds there stay), for the
# targets given (default: every one with a long-run corpus).
cmd_merge() {
  local targets=("$@") t
  [[ ${#targets[@]} -eq 0 ]] && targets=($(ls "$dir/corpus"))
  for t in "${targets[@]}"; do
    [[ -d "$dir/corpus/$t" && -x "$build/bin/fuzz_$t" ]] || continue
    mkdir -p "$root/fuzz/corpus/$t"
    local before
    before=$(ls "$root/fuzz/corpus/$t" | wc -l)
    local maxLen=4096
    [[ $t == kernel ]] && maxLen=8192
    FZ_FUZZ_DIFF_CPU=0 nice -n 19 "$build/bin/fuzz_$t" -merge=1 \
      -max_len="$maxLen" -timeout=30 -rss_limit_mb=2048 -close_fd_mask=3 \
      "$root/fuzz/corpus/$t" "$dir/corpus/$t" >"$dir/logs/merge-$t.log" 2>&1 ||
      { echo "fuzz-long: merge of $t failed (see $dir/logs/merge-$t.log)"; continue; }
    echo "fuzz-long: $t: $before -> $(ls "$root/fuzz/corpus/$t" | wc -l) inputs," \
      "$(du -sk --apparent-size "$root/fuzz/corpus/$t" | cut -f1) KiB"
  done
}

cmd_report() {
  awk -F'\t' 'NR > 1 {
      u[$2] += $5 + $6; w[$2] += $7; e[$2] += $8; c[$2] = $9; a[$2] += $10; n[$2]++
      tu += $5 + $6; te += $8
    }
    END {
      printf "%-10s %5s %10s %10s %12s %8s %9s\n", "target", "runs", "cpu_h", "wall_h", "execs", "corpus", "artifacts"
      for (t in u)
        printf "%-10s %5d %10.2f %10.2f %12d %8d %9d\n", t, n[t], u[t] / 3600, w[t] / 3600, e[t], c[t], a[t]
      printf "%-10s %5s %10.2f %10s %12d\n", "total", "", tu / 3600, "", te
    }' "$ledger"
}

case "${1:-}" in
init) cmd_init ;;
add)
  shift
  [[ $# -ge 2 ]] || { echo "usage: fuzz-long.sh add TARGET SECONDS [VAR=VALUE...]" >&2; exit 2; }
  echo "$*" >>"$queue"
  ;;
run) cmd_run ;;
run-one)
  shift
  run_one "$@"
  ;;
record) cmd_record "$2" ;;
report) cmd_report ;;
merge)
  shift
  cmd_merge "$@"
  ;;
*)
  echo "usage: fuzz-long.sh init|add|run|run-one|record|report|merge" >&2
  exit 2
  ;;
esac
