#!/usr/bin/env bash
# Runs the ONNX backend node tests against a build:
#   tests/conformance/run.sh [BUILD_DIR] [run_conformance args...]
# The per-test log goes to BUILD_DIR/test-logs/conformance.log (or the
# name in FZ_CONFORMANCE_LOG); the
# failures, the skip reasons grouped by count, and the summary line
# `N passed, N failed, N skipped` are printed. Exits non-zero when a test
# fails (skips are fine) or when the runner could not run.
set -uo pipefail
build=${1:-build}
shift || true
runner="$build/bin/run_conformance"
if [[ ! -x "$runner" ]]; then
  echo "conformance: $runner not found: build first" >&2
  exit 2
fi
mkdir -p "$build/test-logs"
log="$build/test-logs/${FZ_CONFORMANCE_LOG:-conformance.log}"
"$runner" "$@" >"$log" 2>&1
rc=$?
grep '^FAIL ' "$log"
echo "conformance: skip reasons (count, reason):"
grep '^SKIP ' "$log" | sed -E "s/^SKIP [^:]+: (node '[^']*' \([^)]*\): )?//" |
  sort | uniq -c | sort -rn | head -n 25
summary=$(tail -n 1 "$log")
echo "conformance: log in $log"
echo "$summary"
if [[ ! "$summary" =~ ^[0-9]+\ passed,\ [0-9]+\ failed,\ [0-9]+\ skipped$ ]]; then
  echo "conformance: the runner did not finish (exit $rc)" >&2
  exit 1
fi
exit $rc
