#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan, in
# build-fuzz/ unless FZ_FUZZ_BUILD_DIR says otherwise) and runs each for
# a bounded time on its corpus. docs/robustness.md describes the targets.
#
#   FZ_FUZZ_SECONDS   seconds per target (default 60)
#   FZ_FUZZ_RUNS      instead: this many inputs per target from seed 1,
#                     after its corpus (deterministic; CI uses 20000)
#   FZ_FUZZ_TARGETS   which targets (default: parser onnx npy pipeline
#                     diff kernel run)
#   FZ_FUZZ_DIFF_CPU_RUNS  after fuzz_diff's run (graph-optimize against
#                     the interpreter), this many more inputs from seed 2
#                     with the CPU backend compared too (FZ_FUZZ_DIFF_CPU=1;
#                     under 10 inputs a second, as each is JIT-compiled);
#                     default 300 with FZ_FUZZ_RUNS, else none (0)
#
# Long runs (hours, at nice 19, with a CPU-time ledger): scripts/fuzz-long.sh.
# Each target reads its seeds from fuzz/corpus/<target> (read-only) and
# grows a working corpus in <build>/fuzz-work/<target>. A crash, leak,
# sanitizer report, timeout or broken invariant leaves its input in
# <build>/fuzz-artifacts/ and makes the script exit non-zero; turn it
# into a regression test in tests/lit/regressions/ (docs/robustness.md).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${FZ_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FZ_FUZZ_SECONDS:-60}
targets=${FZ_FUZZ_TARGETS:-parser onnx npy pipeline diff kernel run}
jobs=$(nproc 2>/dev/null || echo 2)
if [[ -n "${FZ_FUZZ_RUNS:-}" ]]; then
  diffCpuRuns=${FZ_FUZZ_DIFF_CPU_RUNS:-300}
else
  diffCpuRuns=${FZ_FUZZ_DIFF_CPU_RUNS:-0}
fi

echo "==== [fuzz] configure and build in $build"
mkdir -p "$build"
if ! cmake -S "$root" -B "$build" -G "Unix Makefiles" -DCMAKE_C_COMPILER=clang \
     -DFZ_FUZZ=ON -DFZ_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     >"$build/fuzz-cmake.log" 2>&1; then
  cat "$build/fuzz-cmake.log"
  echo "fuzz: configure FAILED"
  exit 1
fi
bins=()
for t in $targets; do bins+=("fuzz_$t"); done
if ! make -C "$build" -j"$jobs" --no-print-directory "${bins[@]}"; then
  echo "fuzz: build FAILED"
  exit 1
fi

# The sanitizers' reports end the run (libFuzzer then saves the input).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Leaks inside the CUDA driver are not ours (fuzz/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan.supp}
failed=()
# fuzz_one NAME TARGET BUDGET-ARGS... [-- VAR=VALUE...]: one run of
# fuzz_TARGET, logged to fuzz-NAME.log; a failure adds NAME to failed.
fuzz_one() {
  local name=$1 t=$2
  shift 2
  local budget=() envs=()
  while [[ $# -gt 0 && "$1" != -- ]]; do budget+=("$1"); shift; done
  [[ $# -gt 0 ]] && { shift; envs=("$@"); }
  local work="$build/fuzz-work/$t" art="$build/fuzz-artifacts/$t"
  mkdir -p "$work" "$art"
  local extra=(-max_len=4096)
  [[ $t == kernel ]] && extra=(-max_len=8192)       # whole kernel test files
  [[ $t == run ]] && extra+=(-close_fd_mask=3)      # fuse-run's own output
  local start end rc
  start=$(date +%s)
  env "${envs[@]}" "$build/bin/fuzz_$t" "${budget[@]}" -timeout=30 \
    -rss_limit_mb=2048 "${extra[@]}" -print_final_stats=1 \
    -artifact_prefix="$art/" "$work" "$root/fuzz/corpus/$t" \
    >"$build/fuzz-$name.log" 2>&1
  rc=$?
  end=$(date +%s)
  grep -E '^(stat::number_of_executed_units|#[0-9]+[[:space:]]+DONE)' "$build/fuzz-$name.log" | tail -2
  echo "fuzz_$t ($name): exit $rc after $((end - start))s"
  if [[ $rc -ne 0 ]]; then
    # The report: the sanitizer's or the harness's message, the input.
    grep -E 'ERROR|runtime error|invariant broken|SUMMARY|Test unit written|Base64' \
      "$build/fuzz-$name.log" | head -20
    failed+=("$name")
  fi
}

for t in $targets; do
  # FZ_FUZZ_RUNS=N: a fixed number of inputs from a fixed seed, so the
  # outcome is the same on every run of the same code (what CI uses: a
  # red CI must mean a regression, not a lucky draw). Otherwise: a time
  # budget and a random seed (exploration).
  if [[ -n "${FZ_FUZZ_RUNS:-}" ]]; then
    echo "==== [fuzz] $t for $FZ_FUZZ_RUNS inputs (seed 1)"
    fuzz_one "$t" "$t" -runs="$FZ_FUZZ_RUNS" -seed=1 -- FZ_FUZZ_DIFF_CPU=0
  else
    echo "==== [fuzz] $t for ${seconds}s"
    fuzz_one "$t" "$t" -max_total_time="$seconds" -- FZ_FUZZ_DIFF_CPU=0
  fi
  if [[ $t == diff && $diffCpuRuns -gt 0 ]]; then
    echo "==== [fuzz] diff with the CPU backend for $diffCpuRuns inputs (seed 2)"
    fuzz_one diff-cpu diff -runs="$diffCpuRuns" -seed=2 -- FZ_FUZZ_DIFF_CPU=1
  fi
done

if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/fuzz-artifacts/; logs $build/fuzz-<target>.log)"
  exit 1
fi
if [[ -n "${FZ_FUZZ_RUNS:-}" ]]; then
  echo "fuzz: all targets ran their inputs (seed 1) without a crash: $targets"
else
  echo "fuzz: all targets ran ${seconds}s without a crash: $targets"
fi
