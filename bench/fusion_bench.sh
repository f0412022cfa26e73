#!/bin/sh
# bench/fusion_bench.sh [BUILD_DIR] [fusion_bench options...]
# Builds bench/fusion_bench.c against BUILD_DIR's libfuse.a (default
# ./build; it must have been built) and runs it: the fusion pass timed on
# random DAGs of 10^4, 10^5 and 10^6 ops (see the .c file for options).
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
out=$build/bin/fusion_bench
mkdir -p "$build/bin"
${CC:-cc} -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I"$root/include" \
  -I"$root" "$root/bench/fusion_bench.c" "$build/libfuse.a" -lm -o "$out"
exec "$out" "$@"
