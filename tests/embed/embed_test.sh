#!/bin/sh
# tests/embed/embed_test.sh - install fuse into a temporary prefix, build
# examples/embed against the installed package four ways, run each build
# and check what it prints.
#
#   sh embed_test.sh BUILD_DIR EXAMPLE_DIR WORK_DIR VERSION CC [SANFLAGS]
#
# The four builds: find_package + fuse::fuse (libfuse.a), find_package +
# fuse::fuse_shared (libfuse.so), pkg-config (libfuse.so) and
# pkg-config --static (libfuse.a). Their outputs must be identical.
# WORK_DIR is deleted and recreated. Exit status 0 when all is well.
set -u
build=$1 example=$2 work=$3 version=$4 cc=$5 san=${6:-}

fail() { echo "embed_test: FAIL: $*" >&2; exit 1; }
step() { echo "embed_test: $*"; }

rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"
prefix=$work/prefix

# 1. Install into the temporary prefix.
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
for f in include/fz/fz.h lib/cmake/fuse/fuseConfig.cmake \
         lib/cmake/fuse/fuseConfigVersion.cmake \
         lib/cmake/fuse/fuseTargets.cmake lib/pkgconfig/fuse.pc \
         lib/libfuse.a lib/libfuse.so bin/fuse-opt; do
  [ -e "$prefix/$f" ] || fail "the install lacks $f"
done

# 2. Every installed header compiles on its own as strict C11, and none
#    exposes an LLVM or CUDA type or header.
for h in "$prefix"/include/fz/*.h; do
  name=fz/$(basename "$h")
  printf '#include <%s>\n' "$name" >"$work/hdr.c"
  $cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
      -I"$prefix/include" "$work/hdr.c" >"$work/hdr.log" 2>&1 ||
    { cat "$work/hdr.log"; fail "$name does not compile on its own"; }
done
if grep -nE '#[[:space:]]*include[[:space:]]*[<"](llvm|llvm-c|cuda|nvrtc)|LLVM[A-Za-z]*Ref\b|\bCU(context|module|function|deviceptr|stream|result)\b|\bcuda[A-Z][A-Za-z]*_t\b' \
     "$prefix"/include/fz/*.h; then
  fail "a public header exposes LLVM or CUDA (lines above)"
fi

# 3. Build the example four ways against the install (never this tree).
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cmake_build() { # NAME [cmake args...]
  name=$1; shift
  step "find_package build: $name"
  cmake -S "$example" -B "$work/$name" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" "$@" \
        >"$work/$name.log" 2>&1 &&
  cmake --build "$work/$name" >>"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "the $name build failed"; }
}
make_build() { # NAME [make args...]
  name=$1; shift
  step "pkg-config build: $name"
  mkdir -p "$work/$name"
  make -s -C "$example" O="$work/$name" CC="$cc" CFLAGS="-O1 -g $san" \
       LDFLAGS="$san" "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "the $name build failed"; }
}
cmake_build cmake-static
cmake_build cmake-shared -DFUSE_EMBED_SHARED=ON
make_build pkgconfig-shared
make_build pkgconfig-static STATIC=1
pkg-config --modversion fuse | grep -qx "$version" ||
  fail "pkg-config reports version $(pkg-config --modversion fuse)"

# 4. Run each build; check the output of the first, then that the others
#    print exactly the same.
for name in cmake-static cmake-shared pkgconfig-shared pkgconfig-static; do
  step "run $name"
  "$work/$name/embed" >"$work/$name.out" 2>"$work/$name.err" ||
    { cat "$work/$name.out" "$work/$name.err"; fail "$name/embed failed"; }
done
out=$work/cmake-static.out
expect() { # PATTERN (grep -E) that must occur in $out
  grep -qE -- "$1" "$out" || { cat "$out"; fail "missing in output: $1"; }
}
expect "^fuse $version \\(headers $version\\)\$"
expect '^    %1 = emb\.scale %0 by 2\.000000e\+00 : tensor<2x4xf32>$'
expect '^print -> parse -> print: same text$'
expect 'num-expanded'
expect '^cost model consulted: yes$'
expect '^max \|interpreter - C\| = 0$'
expect '^--- @main compiled for the CPU \(2 inputs, 1 output, 2 threads\) ---$'
expect '^max \|cpu - C\| = 0$'
expect "^caught: malformed\\.fuse:2:24: error: expected a float scale factor after 'by'\$"
expect "^caught: invalid\\.fuse:2:8: error: 'emb\\.scale' op operand must be a tensor of floats\$"
expect '^embed: OK$'
after=$(sed -n '/^--- after the pipeline ---$/,/^--- pass statistics ---$/p' "$out")
echo "$after" | grep -q 'graph\.fusion' || { cat "$out"; fail "no graph.fusion after the pipeline"; }
echo "$after" | grep -q 'graph\.mul' || { cat "$out"; fail "emb.scale was not expanded"; }
if echo "$after" | grep -q 'emb\.scale'; then
  cat "$out"; fail "emb.scale survived the pipeline"
fi
for name in cmake-shared pkgconfig-shared pkgconfig-static; do
  cmp -s "$out" "$work/$name.out" ||
    { diff "$out" "$work/$name.out"; fail "$name prints something else"; }
done
# 5. The Python package, when the build has it (python3-dev): importable
#    from the prefix alone (it finds lib/libfuse.so.0 through its RPATH),
#    it compiles and runs a model. Not in the sanitizer build, whose
#    extension needs ASan preloaded (scripts/test.sh runs the Python
#    suite there).
pkg=$prefix/lib/python3/dist-packages
if [ -e "$pkg/fuse/_fuse.abi3.so" ] && [ -z "$san" ] && [ -x /usr/bin/python3 ]; then
  step "python: import fuse from $pkg"
  PYTHONPATH=$pkg /usr/bin/python3 - "$prefix" >"$work/python.out" 2>&1 <<'PY' ||
import sys
import numpy as np
import fuse
assert fuse.__file__.startswith(sys.argv[1]), fuse.__file__
m = fuse.compile(fuse.Module.parse(
    "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.relu %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"),
    device="cpu")
y = m(np.array([1, -2, 3, -4], np.float32))
assert y.tolist() == [1, 0, 3, 0], y
print("python: OK", fuse.__version__)
PY
    { cat "$work/python.out"; fail "the installed Python package does not work"; }
  grep -qx "python: OK $version" "$work/python.out" ||
    { cat "$work/python.out"; fail "the installed Python package printed something else"; }
fi
step "OK: 4 builds against $prefix print the same, checked output"
exit 0
