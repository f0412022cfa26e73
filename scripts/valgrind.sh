#!/usr/bin/env bash
# Runs lit tests with the tools under valgrind memcheck
# (docs/robustness.md). The tools come from a non-sanitized build
# (FZ_VALGRIND_BUILD_DIR, default build/, as scripts/test.sh makes it);
# a wrapper directory puts wrappers first in lit's PATH, and each
# invocation under valgrind logs to its own file. Under valgrind: every
# fuse-opt; fuse-translate unless it generates code (--emit: LLVM's own
# code is not ours to check, and is slow under memcheck); fuse-run when it
# runs an interpreter (--device interp, loop-interp or sim; sim only for
# the files FZ_VALGRIND_SIM selects). Any memcheck error (invalid
# read/write, use of uninitialized memory, a definite or indirect leak)
# fails the script, also when the test expected the tool
# to fail (`not fuse-opt ...` would otherwise hide valgrind's exit status).
# scripts/test.sh runs it with CI=true.
#
#   FZ_VALGRIND_TESTS       lit paths (default: tests/lit)
#   FZ_VALGRIND_FILTER_OUT  lit --filter-out regex (default: the two
#                           malformed-input sweeps of tests/lit/invalid,
#                           1,300 runs of fuse-opt on tiny inputs, which
#                           the fuzzers cover under ASan, and
#                           format/roundtrip-all.fuse, ~600 runs on the
#                           other lit files; kernel/attention-flash.fuse,
#                           ~100 simulator runs of the tensor-core
#                           flash-attention kernel (native here like the
#                           matmul ones below); cpu/conv-flat.fuse, ~60
#                           native compiles of large register-tiled convs
#                           (minutes each under memcheck). The last two run
#                           under ASan+UBSan in the sanitizer stage; ""
#                           runs them all)
#   FZ_VALGRIND_SIM         which `--device sim` runs go under memcheck:
#                           a bash regex on the arguments (default: files
#                           under tests/lit/kernel, fuse-run, loop,
#                           regressions and simplify -- the simulator's
#                           own tests; the tensor-core kernels of
#                           tests/lit/matmul and gpu, 256 sim runs, run
#                           natively here and under ASan+UBSan in the
#                           sanitizer stage), `all` for every one
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${FZ_VALGRIND_BUILD_DIR:-$root/build}
lit_py=/usr/lib/llvm-19/build/utils/lit/lit.py
jobs=${FZ_VALGRIND_JOBS:-$(nproc 2>/dev/null || echo 2)}
tests=${FZ_VALGRIND_TESTS:-tests/lit}
[[ "$tests" == all ]] && tests=tests/lit
filterOut=${FZ_VALGRIND_FILTER_OUT-invalid-fuzz|invalid-truncated-sweep|roundtrip-all|attention-flash|conv-flat}
simFiles=${FZ_VALGRIND_SIM:-/tests/lit/(kernel|fuse-run|loop|regressions|simplify)/}
[[ "$simFiles" == all ]] && simFiles=.

command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed" >&2; exit 1; }
[[ -x "$build/bin/fuse-opt" ]] || { echo "valgrind.sh: no $build/bin/fuse-opt (build first)" >&2; exit 1; }

# A fake build directory: bin/ holds the wrapper and links to the rest.
vg=$(mktemp -d "${TMPDIR:-/tmp}/fuse-valgrind.XXXXXX")
mkdir -p "$vg/bin" "$vg/logs"
for tool in "$build"/bin/*; do ln -s "$tool" "$vg/bin/$(basename "$tool")"; done
# lit takes %fake_cuda (the stand-in CUDA driver) from FZ_BUILD_DIR/lib.
[[ -d "$build/lib" ]] && ln -s "$build/lib" "$vg/lib"
# wrap TOOL CONDITION: bin/TOOL runs valgrind when the bash CONDITION on
# the arguments ("$*") holds, the real tool otherwise.
wrap() {
  local tool=$1 cond=$2
  rm -f "$vg/bin/$tool"
  cat >"$vg/bin/$tool" <<WRAP
#!/usr/bin/env bash
simre='$simFiles'
if $cond; then
  exec valgrind --tool=memcheck --quiet --error-exitcode=99 \\
    --leak-check=full --errors-for-leak-kinds=definite,indirect \\
    --log-file="$vg/logs/$tool.%p.log" "$build/bin/$tool" "\$@"
fi
exec "$build/bin/$tool" "\$@"
WRAP
  chmod +x "$vg/bin/$tool"
}
wrap fuse-opt 'true'
wrap fuse-translate '[[ " $* " != *" --emit"* ]]'
wrap fuse-run '[[ " $* " =~ \ --device[\ =](interp|loop-interp)\  ]] || { [[ " $* " =~ \ --device[\ =]sim\  ]] && [[ " $* " =~ $simre ]]; }'

lit_paths=()
for t in $tests; do lit_paths+=("$root/$t"); done
start=$(date +%s)
filter=()
[[ -n "$filterOut" ]] && filter=(--filter-out "$filterOut")
FZ_BUILD_DIR="$vg" python3 "$lit_py" -s -j"$jobs" "${filter[@]}" "${lit_paths[@]}"
lit_rc=$?
end=$(date +%s)

# Non-empty logs hold memcheck's reports.
bad=0 runs=0
declare -A per=()
for log in "$vg"/logs/*.log; do
  [[ -e "$log" ]] || continue
  runs=$((runs + 1))
  t=$(basename "$log")
  t=${t%%.*}
  per[$t]=$((${per[$t]:-0} + 1))
  if [[ -s "$log" ]]; then
    bad=$((bad + 1))
    echo "---- $log"; head -40 "$log"
  fi
done
counts=""
for t in fuse-opt fuse-translate fuse-run; do counts+="${counts:+, }$t ${per[$t]:-0}"; done
echo "valgrind: $runs tool runs ($counts), $bad with memcheck errors, lit exit $lit_rc, $((end - start))s"
if [[ $bad -eq 0 ]]; then rm -rf "$vg"; else echo "valgrind: logs kept in $vg/logs"; fi
[[ $bad -eq 0 && $lit_rc -eq 0 ]]
