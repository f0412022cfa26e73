#!/usr/bin/env bash
# The main job, for now: build fuse (Release, in build-demo/), run fuse-opt
# on the example model examples/mlp.fuse, showing its generic and custom
# forms, a round trip, mlir-opt reading our generic output, and
# --verify-diagnostics checking the expected errors of
# examples/diagnostics.fuse. Later issues turn this into compiling and
# running a real model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

bash scripts/install-deps.sh

# Its own build folder: scripts/test.sh builds build/ with warnings as
# errors, which a demo has no reason to inherit.
build="$root/build-demo"
echo "==== building fuse (Release) in build-demo/"
cmake -S "$root" -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
  -DFZ_WERROR=OFF >/dev/null
make -C "$build" -j"$(nproc 2>/dev/null || echo 2)" --no-print-directory \
  fuse-opt >/dev/null
fuse_opt="$build/bin/fuse-opt"
"$fuse_opt" --version

example=examples/mlp.fuse
echo
echo "==== $example, custom form (fuse-opt $example)"
"$fuse_opt" "$example"

echo
echo "==== $example, generic form (--print-op-generic)"
"$fuse_opt" --print-op-generic "$example"

echo
echo "==== round trip: print, parse the output again, print: identical?"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fuse_opt" "$example" -o "$tmp/once.fuse"
"$fuse_opt" "$tmp/once.fuse" -o "$tmp/twice.fuse"
if cmp -s "$tmp/once.fuse" "$tmp/twice.fuse"; then
  echo "yes"
else
  diff -u "$tmp/once.fuse" "$tmp/twice.fuse" || true
  echo "round trip differs" >&2
  exit 1
fi

mlir_opt=/usr/lib/llvm-19/bin/mlir-opt
if [[ -x "$mlir_opt" ]]; then
  echo
  echo "==== mlir-opt 19 reads fuse-opt's generic output"
  "$fuse_opt" --print-op-generic "$example" -o "$tmp/generic.fuse"
  "$mlir_opt" --allow-unregistered-dialect --mlir-print-op-generic \
    "$tmp/generic.fuse" -o "$tmp/mlir.fuse"
  "$fuse_opt" --print-op-generic "$example" \
    >"$tmp/fuse.fuse"
  echo >>"$tmp/fuse.fuse" # mlir-opt ends its output with an empty line
  if cmp -s "$tmp/mlir.fuse" "$tmp/fuse.fuse"; then
    echo "mlir-opt parsed it and printed the same generic text"
  else
    echo "mlir-opt parsed it; its generic printing differs from ours:"
    diff -u "$tmp/fuse.fuse" "$tmp/mlir.fuse" || true
  fi
fi

echo
echo "==== --verify-diagnostics on examples/diagnostics.fuse"
echo "(each chunk holds a mistake and the expected-error comment for it)"
"$fuse_opt" --split-input-file --verify-diagnostics \
  examples/diagnostics.fuse >/dev/null
echo "every expected diagnostic was produced, and no other"
echo
echo "without --verify-diagnostics, the same file reports:"
"$fuse_opt" --split-input-file \
  examples/diagnostics.fuse >/dev/null 2>"$tmp/err" || true
cat "$tmp/err"
