#!/usr/bin/env bash
# tests/gpu/pack.sh - builds the folder carried to the GPU machine (which
# has the CUDA driver but no LLVM and maybe no libprotobuf-c):
#     bash tests/gpu/pack.sh            -> build-gpu-carry/ (~50 MB)
# It configures build-gpu-static with -DFZ_LLVM_STATIC=ON (Release),
# builds fuse-run and test_cuda, and copies them stripped into
# build-gpu-carry/bin with the few shared libraries they need beyond
# glibc (libprotobuf-c, libzstd) in build-gpu-carry/lib. tests/gpu/run.sh
# and bench/gpu/run.sh put BUILD/lib on LD_LIBRARY_PATH. The carry limit
# of the device runner is 64 MiB in total, hence one tool and stripping.
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$SRC/build-gpu-static
C=$SRC/build-gpu-carry
cmake -S "$SRC" -B "$B" -G "Unix Makefiles" -DFZ_LLVM_STATIC=ON \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$B" -j2 fuse-run test_cuda >/dev/null
rm -rf "$C"; mkdir -p "$C/bin" "$C/lib"
cp "$B/bin/fuse-run" "$B/bin/test_cuda" "$C/bin/"
strip "$C/bin/fuse-run" "$C/bin/test_cuda"
# Every non-glibc library either binary needs (test_cuda also needs
# Check's libsubunit, absent on the GPU machine).
for lib in $(ldd "$C/bin/fuse-run" "$C/bin/test_cuda" |
             awk '/=> \// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
    *) cp -L "$lib" "$C/lib/" ;;
  esac
done
if ldd "$C/bin/fuse-run" | grep -q libLLVM; then
  echo "error: fuse-run links libLLVM dynamically" >&2; exit 1
fi
du -sh "$C"; ls -la "$C/bin" "$C/lib"
