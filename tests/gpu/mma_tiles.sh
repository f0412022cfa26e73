#!/usr/bin/env bash
# tests/gpu/mma_tiles.sh - every tensor-core tile configuration that
# bench/gpu/run.sh sweeps, checked for correctness on the GPU before it
# is timed: each tests/gpu/cases/mm_*.fuse (batched, transposed, ragged,
# f16, the benchmark's workload at 512x512x256; the mm_conv* cases are
# conv2d implicit GEMMs) with each tile forced
# through FZ_GPU_MMA_TILE (as the benchmark forces it) and once with the
# tile chosen by size, `fuse-run --device cuda --check-interp` against the
# graph interpreter with the case's `// tolerance:` line, seed 1.
#     bash tests/gpu/mma_tiles.sh [BUILD_DIR]      (default build-gpu-carry)
#     MMA_TILES="..." sets the tiles (default: bench/gpu/run.sh's list)
# A check passes when the comparison says ok and the function's kernel
# is a tensor-core one (`--bench 2` prints its plan: "matmul ..." or
# "conv2d implicit GEMM ...").
# FZ_GPU_DEVICE=sim runs the same on the kernel simulator (a dry run
# without a GPU: the plan is then not printed and not checked).
# The last line is `N passed, N failed`; exits 1 when anything failed.
set -u
BUILD=${1:-build-gpu-carry}
DEVICE=${FZ_GPU_DEVICE:-cuda}
. "$(dirname "${BASH_SOURCE[0]}")/find_run.sh"
fz_find_run "$BUILD" || exit 1
MMA_TILES=${MMA_TILES:-"128x256x32:8w:4s 128x256x32:8w:3s 128x256x64:8w:3s 256x128x32:8w:4s 128x128x32:4w:4s 128x128x64:4w:3s 128x128x32:8w:4s"}
bench=()
[ "$DEVICE" = cuda ] && bench=(--bench 2)
pass=0 fail=0
for f in tests/gpu/cases/mm_*.fuse; do
  rtol=1e-4 atol=1e-5
  tol=$(sed -n 's|^// tolerance: rtol \([^ ]*\) atol \([^ ]*\).*|\1 \2|p' "$f" | head -1)
  [ -n "$tol" ] && read -r rtol atol <<<"$tol"
  for t in by-size $MMA_TILES; do
    tile=$t; [ "$t" = by-size ] && tile=
    name="$(basename "$f" .fuse) tile $t"
    out=$(FZ_GPU_MMA_TILE=$tile timeout 300 "$RUN" "$f" --device "$DEVICE" \
          --random-inputs 1 --check-interp --rtol "$rtol" --atol "$atol" \
          --print-limit 0 "${bench[@]}" 2>&1)
    rc=$?
    ok=1
    [ $rc -eq 0 ] && echo "$out" | grep -q "check-interp:.*ok" &&
      ! echo "$out" | grep -q MISMATCH || ok=0
    if [ "$DEVICE" = cuda ] && ! echo "$out" | grep -qE "bench-cuda: kernel .*: (matmul |conv2d implicit GEMM )"; then
      ok=0
    fi
    if [ $ok -eq 1 ]; then
      pass=$((pass+1))
      echo "PASS $name: $(echo "$out" | grep check-interp | head -1)$(echo "$out" | sed -nE 's/.*median ([0-9.]+ us).*/, \1/p')"
    else
      fail=$((fail+1))
      echo "FAIL $name (rc $rc)"; echo "$out" | grep -v '^\[' | head -12
    fi
  done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
