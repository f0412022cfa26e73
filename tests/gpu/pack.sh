#!/usr/bin/env bash
# tests/gpu/pack.sh - builds the folder carried to the GPU machine (which
# has the CUDA driver but no LLVM, maybe no libprotobuf-c and no ONNX
# test data):
#     bash tests/gpu/pack.sh            -> build-gpu-carry/ (~27 MB)
# It configures build-gpu-static with -DFZ_LLVM_STATIC=ON (Release),
# builds fuse-run, run_conformance and test_cuda, strips them and
# compresses each with xz -9 into build-gpu-carry/bin/NAME.xz (two
# uncompressed static-LLVM binaries, ~50 MB each, would not fit the
# device runner's 64 MiB carry limit). The few shared libraries they
# need beyond glibc (libprotobuf-c, libzstd, ...) go to build-gpu-carry/lib,
# and the ONNX backend node tests (Debian's libonnx-testdata, 27 MB) to
# build-gpu-carry/data/onnx-node.tar.xz. tests/gpu/run.sh unpacks all of
# it under /tmp (with xz, or Python's lzma where xz is missing) and puts
# lib/ on LD_LIBRARY_PATH; the scripts that need only fuse-run
# (bench/gpu/*.sh, tests/gpu/mma_tiles.sh) do it through tests/gpu/find_run.sh.
# When the build has the Python package (python3-dev), it goes to
# build-gpu-carry/python and libfuse.so.0 (LLVM inside) to
# lib/libfuse.so.0.xz, for tests/gpu/python.sh.
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$SRC/build-gpu-static
C=$SRC/build-gpu-carry
DATA=${FZ_ONNX_NODE_DATA:-/usr/share/libonnx-testdata/data/node}
TOOLS="fuse-run run_conformance test_cuda"
cmake -S "$SRC" -B "$B" -G "Unix Makefiles" -DFZ_LLVM_STATIC=ON \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$B" -j2 $TOOLS >/dev/null
PY_PKG=
if make -C "$B" -j2 fz_python_module fz_python_files >/dev/null 2>&1 &&
   [ -f "$B/python/fuse/_fuse.abi3.so" ]; then
  PY_PKG=$B/python
fi
for t in $TOOLS; do
  if ldd "$B/bin/$t" | grep -q libLLVM; then
    echo "error: $t links libLLVM dynamically" >&2; exit 1
  fi
done
rm -rf "$C"; mkdir -p "$C/bin" "$C/lib" "$C/data"
# Every non-glibc library the binaries need (test_cuda also needs
# Check's libsubunit, absent on the GPU machine).
for lib in $( (for t in $TOOLS; do ldd "$B/bin/$t"; done
               [ -z "$PY_PKG" ] || ldd "$B/libfuse.so.0") |
             awk '/=> \// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libfuse.so*) ;;
    *) cp -L "$lib" "$C/lib/" ;;
  esac
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for t in $TOOLS; do
  strip -o "$tmp/$t" "$B/bin/$t"
  xz -9 -T2 -c "$tmp/$t" >"$C/bin/$t.xz"
done
if [ -n "$PY_PKG" ]; then
  mkdir -p "$C/python"
  cp -r "$PY_PKG"/fuse "$PY_PKG"/fuse-*.dist-info "$C/python/"
  strip -o "$tmp/libfuse.so.0" "$B/libfuse.so.0"
  xz -9 -T2 -c "$tmp/libfuse.so.0" >"$C/lib/libfuse.so.0.xz"
fi
if [ -d "$DATA" ]; then
  tar -C "$(dirname "$DATA")" -cf - "$(basename "$DATA")" |
    xz -9 -T2 >"$C/data/onnx-node.tar.xz"
else
  echo "warning: $DATA not found: the carry folder has no ONNX test data" >&2
fi
du -sh "$C"; ls -la "$C/bin" "$C/lib" "$C/data" ${PY_PKG:+"$C/python/fuse"}
