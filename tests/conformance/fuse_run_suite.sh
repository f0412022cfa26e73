#!/usr/bin/env bash
# The ONNX backend node tests through the fuse-run command line, as a
# user runs a model:
#   tests/conformance/fuse_run_suite.sh [BUILD_DIR] [--device DEV] [--filter RE]
# Each test's model.onnx runs with `fuse-run --input input_*.pb --compare
# test_data_set_N` on every data set (fuse-run reads ONNX TensorProto
# files, binds the inputs a shape operand needs as constants and takes
# the symbolic dims from the inputs' shapes), with the conformance
# runner's tolerances (rtol 1e-3, atol 1e-7). A test whose fuse-run error
# says "unsupported" is skipped, as run_conformance skips it; the tests
# run_conformance lists as reference data defects are skipped too.
# A test that passes only because fuse-run bound an input as a constant
# (its note "is needed at compile time") is logged `PASS name (bound:
# input #i ...)` and counted on its own line: ONNX's own semantics
# would run it with every input at run time.
# Prints `FAIL name: reason` lines and `N passed, N failed, N skipped`;
# the per-test log goes to BUILD_DIR/test-logs/fuse-run-suite.log. Exits
# 1 when a test fails. Not part of scripts/test.sh (run_conformance runs
# the same tests in one process); this checks the tools' path.
set -uo pipefail
build=build
device=interp
filter=.
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
run="$build/bin/fuse-run"
data=${FZ_ONNX_NODE_DATA:-/usr/share/libonnx-testdata/data/node}
[[ -x $run ]] || { echo "fuse_run_suite: $run not found: build first" >&2; exit 2; }
[[ -d $data ]] || { echo "fuse_run_suite: no ONNX test data in $data" >&2; exit 2; }
# The data defects run_conformance skips (kKnownBadData).
known_bad='^test_(cast_FLOAT_to_BFLOAT16|castlike_FLOAT_to_BFLOAT16|castlike_FLOAT_to_BFLOAT16_expanded|castlike_BFLOAT16_to_FLOAT|castlike_BFLOAT16_to_FLOAT_expanded|adam_multiple)$'
mkdir -p "$build/test-logs"
log="$build/test-logs/fuse-run-suite.log"
: >"$log"
pass=0 fail=0 skip=0 bound=0
for dir in "$data"/test_*; do
  name=${dir##*/}
  [[ $name =~ $filter ]] || continue
  if [[ $name =~ $known_bad ]]; then
    echo "SKIP $name: reference data defect" >>"$log"; skip=$((skip + 1)); continue
  fi
  status=PASS why= binds=
  for set in "$dir"/test_data_set_*; do
    mapfile -t ins < <(ls "$set"/input_*.pb 2>/dev/null | sort -V)
    out=$("$run" "$dir/model.onnx" --device "$device" --input "${ins[@]}" \
          --compare "$set" --rtol 1e-3 --atol 1e-7 2>&1)
    if [[ $? -ne 0 ]]; then
      # Unsupported anywhere (a model error after an input file's) skips.
      why=$(grep -m1 'error: .*unsupported' <<<"$out")
      status=SKIP
      if [[ -z $why ]] || grep -q MISMATCH <<<"$out"; then
        status=FAIL
        why=$(grep -m1 -E 'error|MISMATCH' <<<"$out")
        [[ -z $why ]] && why=$(tail -n 1 <<<"$out")
      fi
      break
    fi
    b=$(grep -o 'input #[0-9]*' <<<"$(grep 'is needed at compile time' <<<"$out")" | tr '\n' ' ')
    [[ -n $b ]] && binds=$b
  done
  case $status in
    PASS) pass=$((pass + 1))
          if [[ -n $binds ]]; then
            bound=$((bound + 1)); echo "PASS $name (bound: ${binds% })" >>"$log"
          else
            echo "PASS $name" >>"$log"
          fi ;;
    SKIP) skip=$((skip + 1)); echo "SKIP $name: $why" >>"$log" ;;
    FAIL) fail=$((fail + 1)); echo "FAIL $name: $why" | tee -a "$log" ;;
  esac
done
echo "fuse_run_suite: log in $log"
echo "fuse_run_suite: $bound of the passed tests bound inputs as constants"
echo "$pass passed, $fail failed, $skip skipped"
[[ $fail -eq 0 ]]
