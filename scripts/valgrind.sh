#!/usr/bin/env bash
# Runs lit tests with every fuse-opt invocation under valgrind memcheck
# (docs/robustness.md). The tools come from a non-sanitized build
# (FZ_VALGRIND_BUILD_DIR, default build/, as scripts/test.sh makes it);
# a wrapper directory puts `valgrind fuse-opt` first in lit's PATH, and
# each invocation logs to its own file. Any memcheck error (invalid
# read/write, use of uninitialized memory, a definite or indirect leak)
# fails the script, also when the test expected fuse-opt to fail
# (`not fuse-opt ...` would otherwise hide valgrind's exit status).
#
#   FZ_VALGRIND_TESTS  lit paths (default: the parser, printer, verifier,
#                      graph dialect, passes and malformed-input suites;
#                      "all" runs tests/lit entirely)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${FZ_VALGRIND_BUILD_DIR:-$root/build}
lit_py=/usr/lib/llvm-19/build/utils/lit/lit.py
jobs=${FZ_VALGRIND_JOBS:-$(nproc 2>/dev/null || echo 2)}
tests=${FZ_VALGRIND_TESTS:-tests/lit/format tests/lit/ir tests/lit/graph tests/lit/invalid tests/lit/passes tests/lit/regressions}
[[ "$tests" == all ]] && tests=tests/lit

command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed" >&2; exit 1; }
[[ -x "$build/bin/fuse-opt" ]] || { echo "valgrind.sh: no $build/bin/fuse-opt (build first)" >&2; exit 1; }

# A fake build directory: bin/ holds the wrapper and links to the rest.
vg=$(mktemp -d "${TMPDIR:-/tmp}/fuse-valgrind.XXXXXX")
mkdir -p "$vg/bin" "$vg/logs"
for tool in "$build"/bin/*; do ln -s "$tool" "$vg/bin/$(basename "$tool")"; done
rm -f "$vg/bin/fuse-opt"
cat >"$vg/bin/fuse-opt" <<WRAP
#!/usr/bin/env bash
exec valgrind --tool=memcheck --quiet --error-exitcode=99 \\
  --leak-check=full --errors-for-leak-kinds=definite,indirect \\
  --log-file="$vg/logs/vg.%p.log" "$build/bin/fuse-opt" "\$@"
WRAP
chmod +x "$vg/bin/fuse-opt"

lit_paths=()
for t in $tests; do lit_paths+=("$root/$t"); done
start=$(date +%s)
FZ_BUILD_DIR="$vg" python3 "$lit_py" -q -j"$jobs" "${lit_paths[@]}"
lit_rc=$?
end=$(date +%s)

# Non-empty logs hold memcheck's reports.
bad=0 runs=0
for log in "$vg"/logs/vg.*.log; do
  [[ -e "$log" ]] || continue
  runs=$((runs + 1))
  if [[ -s "$log" ]]; then
    bad=$((bad + 1))
    echo "---- $log"; head -40 "$log"
  fi
done
echo "valgrind: $runs fuse-opt runs, $bad with memcheck errors, lit exit $lit_rc, $((end - start))s"
if [[ $bad -eq 0 ]]; then rm -rf "$vg"; else echo "valgrind: logs kept in $vg/logs"; fi
[[ $bad -eq 0 && $lit_rc -eq 0 ]]
