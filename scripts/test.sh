#!/usr/bin/env bash
# Builds fuse and runs every test: the Check unit tests (through ctest),
# the lit suite (tests/lit) and the Python package's tests
# (tests/python), first in a Release build (build/), then,
# when FZ_TEST_SANITIZE=1 or CI=true (and FZ_TEST_SANITIZE is not 0), in
# an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/).
# With CI=true also: the lit suite under valgrind memcheck
# (FZ_TEST_VALGRIND=1 outside CI, 0 to skip) and the fuzz targets for a
# fixed number of inputs (scripts/fuzz.sh). Each stage's time is printed
# in the summary.
#
# Ends with one line `fuse tests: N passed, N failed` (summed over the
# builds) and exits non-zero when anything failed, a build included.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

bash scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

# The kernel cache (docs/codegen.md "Kernel cache"): the tests never use
# the user's.
export FZ_CACHE_DIR="$root/build/tests/kernel-cache"
unset XDG_CACHE_HOME

test_start=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 2)
lit_py=/usr/lib/llvm-19/build/utils/lit/lit.py
total_passed=0
total_failed=0
summaries=()

# Counts from verbose ctest output (ctest -V): every Check executable
# prints "NN%: Checks: C, Failures: F, Errors: E", so the unit tests are
# counted one Check test case at a time. A ctest test without such a line
# (another kind of test) counts as one; so does a failed ctest test that
# reported no failed case (it crashed, timed out or did not build).
ctest_counts() {
  awk '
    /Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/ {
      num = $1; sub(/:$/, "", num)
      match($0, /Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/)
      split(substr($0, RSTART, RLENGTH), f, /[^0-9]+/)
      passed += f[2] - f[3] - f[4]; failed += f[3] + f[4]
      checks[num] = 1
      if (f[3] + f[4] > 0) reported[num] = 1
    }
    /Test +#[0-9]+: / && (/ Passed / || /\*\*\*/) {
      match($0, /Test +#[0-9]+:/)
      n = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", n)
      result[n] = ($0 ~ / Passed /) ? "pass" : "fail"
    }
    END {
      for (n in result) {
        if (result[n] == "pass" && !(n in checks)) passed += 1
        if (result[n] == "fail" && !(n in reported)) failed += 1
      }
      printf "%d %d\n", passed, failed
    }
  ' "$1"
}

# Counts from lit's summary ("  Passed: N (..%)", "  Failed: N", ...).
lit_counts() {
  local p=0 f=0 line in_summary=0
  local re='^ *(Passed|Failed|Unresolved|Timed Out|Expectedly Failed|Unexpectedly Passed) *: *([0-9]+)'
  while IFS= read -r line; do
    if [[ "$line" == "Total Discovered Tests:"* ]]; then in_summary=1; fi
    [[ $in_summary -eq 1 && "$line" =~ $re ]] || continue
    case "${BASH_REMATCH[1]}" in
      Passed|"Expectedly Failed") p=$((p + BASH_REMATCH[2])) ;;
      *) f=$((f + BASH_REMATCH[2])) ;;
    esac
  done <"$1"
  echo "$p $f"
}

# run_build NAME DIR CMAKE_ARGS...: configure, build, run both suites.
run_build() {
  local name=$1 dir=$2
  shift 2
  local log="$dir/test-logs" t0
  t0=$(date +%s)
  echo "==== [$name] configure and build in $dir"
  mkdir -p "$log"
  if ! cmake -S "$root" -B "$dir" -G "Unix Makefiles" -DFZ_WERROR=ON "$@" >"$log/cmake.log" 2>&1; then
    cat "$log/cmake.log"
    echo "==== [$name] configure FAILED"
    total_failed=$((total_failed + 1))
    summaries+=("$name: configure failed")
    return
  fi
  # -k: build all that can be built, so the tests still say what works.
  local build_note=""
  if ! make -C "$dir" -j"$jobs" -k --no-print-directory; then
    echo "==== [$name] build FAILED (running the tests that built anyway)"
    total_failed=$((total_failed + 1))
    build_note=" (build FAILED: counted as 1 failure)"
  fi

  echo "==== [$name] unit tests (ctest)"
  # The full output goes to the log; the console gets the per-suite lines
  # and, for a failure, everything its test printed.
  ctest --test-dir "$dir/tests" -V --output-on-failure -j"$jobs" >"$log/ctest.log" 2>&1
  local ctest_rc=$?
  grep -E '(Test +#[0-9]+:|Checks: [0-9]+|tests passed|FAILED|\*\*\*|:[0-9]+:[EF]:|^[[:space:]]+[0-9]+ - )' \
    "$log/ctest.log" || true
  read -r cp cf < <(ctest_counts "$log/ctest.log")
  if [[ $ctest_rc -ne 0 && $cf -eq 0 ]]; then cf=1; fi

  echo "==== [$name] lit tests"
  FZ_BUILD_DIR="$dir" python3 "$lit_py" -sv "$root/tests/lit" 2>&1 | tee "$log/lit.log"
  local lit_rc=${PIPESTATUS[0]}
  read -r lp lf < <(lit_counts "$log/lit.log")
  # lit failing without reporting a failed test (a config error) counts.
  if [[ $lit_rc -ne 0 && $lf -eq 0 ]]; then lf=1; fi

  total_passed=$((total_passed + cp + lp))
  total_failed=$((total_failed + cf + lf))
  summaries+=("$name: unit $cp passed, $cf failed; lit $lp passed, $lf failed$build_note")

  # The Python package (tests/python, docs/python.md): unittest under
  # Debian's python3 (its python3-numpy and python3-torch), each test
  # counted. In the sanitizer build the extension and libfuse.so are
  # instrumented but python3 is not, so ASan's runtime is preloaded (it
  # must come first), with libstdc++ (ASan intercepts C++ throws, which
  # PyTorch's libraries make, only when libstdc++ is there at start-up);
  # leak detection is off there, as the interpreter keeps what it
  # allocated until exit (the suite checks that memory stays flat over a
  # call loop instead). detect_leaks=0 comes last: ASan takes the last
  # of repeated options, and CI's ASAN_OPTIONS sets detect_leaks=1 (the
  # other order failed CI on the leak report at the interpreter's exit,
  # every test having passed).
  echo "==== [$name] python tests (tests/python/run.py)"
  local py=/usr/bin/python3 pyenv=()
  [[ -x $py ]] || py=python3
  if [[ "$name" == asan ]]; then
    pyenv=("LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
           "ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0")
  fi
  env "${pyenv[@]}" FZ_BUILD_DIR="$dir" "$py" "$root/tests/python/run.py" 2>&1 |
    tee "$log/python.log"
  local py_rc=${PIPESTATUS[0]} pp pf ps
  read -r pp pf ps < <(sed -n 's/^python tests: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\1 \2 \3/p' "$log/python.log")
  pp=${pp:-0} pf=${pf:-0} ps=${ps:-0}
  if [[ $py_rc -ne 0 && $pf -eq 0 ]]; then
    echo "==== [$name] python tests exited $py_rc with no failed test reported: counted as 1 failure"
    pf=1
  fi
  total_passed=$((total_passed + pp))
  total_failed=$((total_failed + pf))
  summaries+=("$name: python $pp passed, $pf failed, $ps skipped")

  # ONNX backend node tests: any FAIL fails the run (skips are fine).
  echo "==== [$name] ONNX conformance (tests/conformance/run.sh)"
  bash "$root/tests/conformance/run.sh" "$dir" | tee "$log/conformance-summary.log"
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then total_failed=$((total_failed + 1)); fi
  summaries+=("$name: ONNX conformance: $(tail -n 1 "$log/conformance-summary.log")")

  # The same suite compiled for the CPU (LLVM JIT) must give the same
  # counts as the interpreter (issue 8). Once, in the release build: the
  # sanitizer build already runs the CPU lit tests.
  if [[ "$name" == release ]]; then
    echo "==== [$name] ONNX conformance on --device cpu"
    FZ_CONFORMANCE_LOG=conformance-cpu.log \
      bash "$root/tests/conformance/run.sh" "$dir" --device cpu |
      tee "$log/conformance-cpu-summary.log"
    local st=${PIPESTATUS[0]}
    local interp cpu
    interp=$(tail -n 1 "$log/conformance-summary.log")
    cpu=$(tail -n 1 "$log/conformance-cpu-summary.log")
    if [[ $st -ne 0 || "$cpu" != "$interp" ]]; then
      echo "conformance on cpu ($cpu) differs from the interpreter ($interp)"
      total_failed=$((total_failed + 1))
    fi
    summaries+=("$name: ONNX conformance on cpu: $cpu")
    # And through the GPU path on the kernel simulator (lower-loop-to-
    # kernel, PTX compiled, kernels simulated): the same counts too.
    echo "==== [$name] ONNX conformance on --device sim"
    FZ_CONFORMANCE_LOG=conformance-sim.log \
      bash "$root/tests/conformance/run.sh" "$dir" --device sim |
      tee "$log/conformance-sim-summary.log"
    st=${PIPESTATUS[0]}
    local sim
    sim=$(tail -n 1 "$log/conformance-sim-summary.log")
    if [[ $st -ne 0 || "$sim" != "$interp" ]]; then
      echo "conformance on sim ($sim) differs from the interpreter ($interp)"
      total_failed=$((total_failed + 1))
    fi
    summaries+=("$name: ONNX conformance on sim: $sim")
  fi
  summaries+=("$name: build and tests took $(($(date +%s) - t0))s")
}

run_build release "$root/build" -DCMAKE_BUILD_TYPE=Release

sanitize=${FZ_TEST_SANITIZE:-}
if [[ -z "$sanitize" && "${CI:-}" == "true" ]]; then sanitize=1; fi
if [[ "$sanitize" == "1" ]]; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  FZ_SANITIZE=1 run_build asan "$root/build-asan" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFZ_SANITIZE=ON
fi

# valgrind memcheck (scripts/valgrind.sh, docs/robustness.md): in CI, or
# with FZ_TEST_VALGRIND=1, the lit suite (less the two malformed-input
# sweeps, which the fuzzers cover) with the release build's tools under
# memcheck. Each lit test counts (a test that fails under valgrind
# fails), and so does each tool run with a memcheck report (a leak, an
# invalid access, a use of uninitialized memory), even where the test
# expected the tool to fail.
valgrind=${FZ_TEST_VALGRIND:-}
if [[ -z "$valgrind" && "${CI:-}" == "true" ]]; then valgrind=1; fi
if [[ "$valgrind" == "1" ]]; then
  echo "==== [valgrind] scripts/valgrind.sh (release build)"
  vlog="$root/build/test-logs/valgrind.log"
  vstart=$(date +%s)
  FZ_VALGRIND_BUILD_DIR="$root/build" bash "$root/scripts/valgrind.sh" 2>&1 | tee "$vlog"
  vrc=${PIPESTATUS[0]}
  read -r vp vf < <(lit_counts "$vlog")
  vbad=$(sed -n 's/^valgrind: .* \([0-9]*\) with memcheck errors.*/\1/p' "$vlog" | tail -n 1)
  vbad=${vbad:-0}
  if [[ $vrc -ne 0 && $vf -eq 0 && $vbad -eq 0 ]]; then vf=1; fi
  total_passed=$((total_passed + vp))
  total_failed=$((total_failed + vf + vbad))
  summaries+=("valgrind: lit $vp passed, $vf failed; $(grep -o '[0-9]* tool runs ([^)]*)' "$vlog" | tail -n 1), $vbad with memcheck errors; $(($(date +%s) - vstart))s")
fi

# Fuzzing (scripts/fuzz.sh, docs/robustness.md; owned by the robustness
# work): in CI only, each libFuzzer target on its corpus plus a fixed
# number of generated inputs from a fixed seed (FZ_FUZZ_CI_RUNS, default
# 20000), so the result is reproducible. A crash fails the run.
if [[ "${CI:-}" == "true" ]]; then
  echo "==== [fuzz] scripts/fuzz.sh"
  fstart=$(date +%s)
  if FZ_FUZZ_RUNS=${FZ_FUZZ_CI_RUNS:-20000} bash "$root/scripts/fuzz.sh"; then
    summaries+=("fuzz: every target ran without a crash; $(($(date +%s) - fstart))s")
  else
    total_failed=$((total_failed + 1))
    summaries+=("fuzz: FAILED (see build-fuzz/fuzz-*.log); $(($(date +%s) - fstart))s")
  fi
fi

echo "==== summary ($(($(date +%s) - test_start))s in all)"
for s in "${summaries[@]}"; do echo "  $s"; done
echo "fuse tests: $total_passed passed, $total_failed failed"
[[ $total_failed -eq 0 ]]
