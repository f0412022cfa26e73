#!/usr/bin/env bash
# bench/gpu/compile_cache.sh - start to first result of whole models on
# the GPU with a cold and a warm kernel cache (issue 22; docs/codegen.md
# "Kernel cache", docs/benchmarks.md "Compile time"), on the GPU machine:
#     bash bench/gpu/compile_cache.sh [BUILD_DIR] [MODELS...]
#     (default build-gpu-carry, from tests/gpu/pack.sh; models
#     resnet50-f32, also resnet50-f16 vit_b_16-f32 vit_b_16-f16)
# Exports the models at batch 1 with bench/models/models.py into
# $FZ_COMPILE_DIR (default /tmp/fz-compile; an export already there is
# reused), then runs, for each model,
#     fuse-run MODEL --device cuda --input x.npy --timing
# five times:
#   cold         an empty FZ_CACHE_DIR and an empty driver JIT cache
#                (CUDA_CACHE_PATH): LLVM for every kernel, the driver's
#                link of the PTX
#   warm         the same FZ_CACHE_DIR, an empty driver cache again: the
#                kernels' PTX and the module's cubin from fuse's cache
#                (the driver's own cache plays no part)
#   warm again   the same, once more
#   no-cache     --no-cache, an empty driver cache: as before the kernel
#                cache, on a fresh machine
#   no-cache+drv --no-cache with the driver's cache warm (filled by the
#                no-cache run): as before, on a machine that ran the
#                model already
# and prints one row each: the wall time (import, compile, the driver's
# load, one run), LLVM's and the driver's shares from --timing, and the
# cache lines. The outputs of all five must be the same bit for bit;
# exits 1 when they are not or a run fails.
set -u
BUILD=${1:-build-gpu-carry}
shift $(( $# > 0 ? 1 : 0 ))
MODELS=${*:-resnet50-f32}
DIR=${FZ_COMPILE_DIR:-/tmp/fz-compile}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
mkdir -p "$DIR"
echo "machine: $(nproc) cores; $(nvidia-smi -L 2>/dev/null | head -1)"
missing=
for m in $MODELS; do [ -f "$DIR/$m.onnx" ] || missing=1; done
[ -z "$missing" ] || (cd "$here/../models" && python3 - "$DIR" $MODELS <<'PY'
import os, sys
import numpy as np
import models
out = sys.argv[1]
for spec in sys.argv[2:]:
    name, dt = spec.rsplit("-", 1)
    path = os.path.join(out, f"{name}-{dt}.onnx")
    if os.path.exists(path):
        continue
    m, x = models.build(name), models.make_input(name, 1)
    if dt == "f16":
        m, x = m.half(), x.half()
    models.export_onnx(m, x, path)
    np.save(os.path.join(out, f"{name}-{dt}-input.npy"), x.numpy())
PY
) 2>/dev/null || { echo "error: the export failed" >&2; exit 1; }
now() { date +%s.%N; }
# The seconds of a --timing row ("  1.2345 ( 12.3%)  NAME...").
phase() { awk -v n="$2" 'index($0, n) { print $1; exit }' "$1"; }
status=0
for m in $MODELS; do
  cache=$(mktemp -d) nv=$(mktemp -d)
  first=
  printf '\n== %s\n%-12s %8s %8s %8s  %s\n' "$m" run "wall s" "LLVM s" \
    "driver s" "caches"
  for run in cold warm "warm again" no-cache no-cache+drv; do
    out=$DIR/cache-$m-${run// /-}
    rm -rf "$out"; mkdir -p "$out"
    case $run in
      cold) drv=$nv/a extra=() ;;
      warm) drv=$nv/b extra=() ;;
      "warm again") drv=$nv/b extra=() ;;
      no-cache) drv=$nv/c extra=(--no-cache) ;;
      no-cache+drv) drv=$nv/c extra=(--no-cache) ;;
    esac
    s=$(now)
    env FZ_CACHE_DIR="$cache" CUDA_CACHE_PATH="$drv" timeout 300 "$RUN" \
      "$DIR/$m.onnx" --device cuda --input "$DIR/$m-input.npy" --timing \
      "${extra[@]}" --output-dir "$out" >/dev/null 2>"$out/stderr.txt"
    rc=$? e=$(now)
    caches=$(grep -h 'Kernel cache:\|Cubin cache:' "$out/stderr.txt" |
             sed 's/ (\/.*)$//; s/^ *//' | paste -sd ';' - | sed 's/;/; /g')
    printf '%-12s %8s %8s %8s  %s\n' "$run" \
      "$(awk "BEGIN{printf \"%.2f\", $e - $s}")" \
      "$(phase "$out/stderr.txt" 'LLVM optimize+codegen')" \
      "$(phase "$out/stderr.txt" 'driver load')" "${caches:--}"
    if [ $rc -ne 0 ]; then
      echo "FAIL: exit $rc"; tail -n 5 "$out/stderr.txt"; status=1; continue
    fi
    if [ -z "$first" ]; then
      first=$out
    elif ! cmp -s "$first/output_0.npy" "$out/output_0.npy"; then
      echo "MISMATCH: the output of $run differs from the cold run's"
      status=1
    fi
  done
  echo "-- the cold run's --timing:"
  grep -v '^===\|\.\.\. Compile time report\|^$' "$DIR/cache-$m-cold/stderr.txt"
  echo "-- the warm run's --timing:"
  grep -v '^===\|\.\.\. Compile time report\|^$' "$DIR/cache-$m-warm/stderr.txt"
  rm -rf "$cache" "$nv"
done
exit $status
