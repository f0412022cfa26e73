#!/usr/bin/env bash
# bench/gpu/run.sh - fuse's CUDA kernels against a device-to-device copy
# (the limit, measured by fuse-run in the same process for the same
# bytes), torch eager, torch.compile and JAX, in one run on the GPU
# machine.
# Nothing of fuse is built here (only bench/gpu/mma_ref.cu, with the
# machine's nvcc, for the matmul part at the end):
#     bash bench/gpu/run.sh [BUILD_DIR] [REPS]     (default build-gpu-carry, 20)
#     MMA=0 ...        skips the matmul part; MMA_TILES="..." sets its tiles
#     MMA_ONLY=1 ...   runs only the matmul part
#     ONLY="08_softmax_65536 14_softmax_65536_bf16" ...  only those
#                      memory-bound workloads (and their peers)
#     ROW_STAGE_AB=1 ...  adds a column: fuse with FZ_GPU_ROW_STAGE=0 (long
#                      rows re-read per loop instead of kept on chip)
# Workloads: bench/gpu/*.fuse (2^27 elements each, far above L2); the
# same computations in torch are in peers.py, in JAX in peers_jax.py
# (a separate process: JAX and torch each hold GPU memory). GB/s count
# ideal bytes (each input read once, each output written once). fuse times the
# function's kernels replayed as one CUDA graph (CUDA events, median).
# Prints one table: GB/s of each, fuse/copy and fuse/torch.compile.
set -u
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
if [ "${MMA_ONLY:-0}" != 1 ]; then
  declare -A EAGER COMPILE JAX FZ CP KS AB
  WORK=()
  for f in bench/gpu/*.fuse; do
    n=$(basename "$f" .fuse)
    if [ -n "${ONLY:-}" ] && ! [[ " $ONLY " == *" $n "* ]]; then continue; fi
    WORK+=("$f")
    line=$(timeout 120 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1 | grep "bench-cuda: @")
    [ -z "$line" ] && continue
    FZ[$n]=$(echo "$line" | sed -E 's/.* ([0-9.]+) GB\/s \(.*/\1/')
    CP[$n]=$(echo "$line" | sed -E 's/.*device copy ([0-9.]+) GB\/s.*/\1/')
    KS[$n]=$(echo "$line" | sed -E 's/.*@main: ([0-9]+) kernel.*/\1/')
    if [ "${ROW_STAGE_AB:-0}" = 1 ]; then
      line=$(FZ_GPU_ROW_STAGE=0 timeout 120 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1 | grep "bench-cuda: @")
      AB[$n]=$(echo "$line" | sed -nE 's/.* ([0-9.]+) GB\/s \(.*/\1/p')
    fi
  done
  if command -v python3 >/dev/null; then
    names=(); for f in "${WORK[@]}"; do [ -n "${ONLY:-}" ] && names+=("$(basename "$f" .fuse)"); done
    while read -r n e c; do EAGER[$n]=$e; COMPILE[$n]=$c; done < <(timeout 400 python3 bench/gpu/peers.py "$REPS" "${names[@]}" 2>/dev/null)
    while read -r n j; do JAX[$n]=$j; done < <(timeout 200 python3 bench/gpu/peers_jax.py "$REPS" "${names[@]}" 2>/dev/null)
  fi
  abh=; [ "${ROW_STAGE_AB:-0}" = 1 ] && abh=$(printf " %9s" no-stage)
  printf "%-24s %3s %9s %9s %9s %9s %9s %9s %9s%s\n" workload ker fuse copy eager compile jax fz/copy fz/comp "$abh"
  for f in "${WORK[@]}"; do
    n=$(basename "$f" .fuse)
    fz=${FZ[$n]:-}; cp=${CP[$n]:-}
    if [ -z "$fz" ]; then printf "%-24s failed\n" "$n"; continue; fi
    e=${EAGER[$n]:--}; c=${COMPILE[$n]:--}; j=${JAX[$n]:--}
    rc=$(awk -v a="$fz" -v b="$cp" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
    rt=$(awk -v a="$fz" -v b="$c" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
    ab=; [ "${ROW_STAGE_AB:-0}" = 1 ] && ab=$(printf " %9s" "${AB[$n]:--}")
    printf "%-24s %3s %9s %9s %9s %9s %9s %9s %9s%s\n" "$n" "${KS[$n]}" "$fz" "$cp" "$e" "$c" "$j" "$rc" "$rt" "$ab"
  done
  echo "(GB/s; fuse and copy from fuse-run --bench $REPS, eager/compile from peers.py, jax from peers_jax.py; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
fi

# ---- Matmul with a fused epilogue (issue 9): TFLOP/s (2 M N K / time) ----
# bench/gpu/matmul/*.fuse, once per tile configuration of MMA_TILES
# (FZ_GPU_MMA_TILE: the tile of lower-loop-to-kernel's tensor-core
# mapping, lowering/loop_to_kernel/matmul.h); fuse-run --bench prints the
# TFLOP/s itself (the kernel's 2 M N K over the median time; the
# `// flops:` line of each file is the fallback), and the kernel's plan,
# which must say "matmul" (else the row says "no-mma"). Against
# peers.py --matmul: torch eager (cuBLAS mm, then bias and gelu), torch.compile
# and cuBLAS's mm alone (the limit; issue 9's target is fuse >= 0.55 of it),
# and bench/gpu/mma_ref.cu: a hand-written CUDA kernel of the generated
# kernel's design, built here with nvcc (its own table lines, with each
# configuration's error against a naive reference). MMA=0 skips this part.
# A failing configuration prints fuse-run's first error line under the
# table (e.g. a tile whose shared memory the device does not allow).
if [ "${MMA:-1}" != 0 ]; then
  MMA_TILES=${MMA_TILES:-"128x256x32:8w:4s 128x256x32:8w:3s 128x256x64:8w:3s 256x128x32:8w:4s 128x128x32:4w:4s 128x128x64:4w:3s 128x128x32:8w:4s"}
  declare -A MM_FZ MM_E MM_C MM_L MM_ERR
  for f in bench/gpu/matmul/*.fuse; do
    n=$(basename "$f" .fuse)
    flops=$(sed -n 's|^// flops: \([0-9]*\).*|\1|p' "$f" | head -1)
    for t in $MMA_TILES; do
      out=$(FZ_GPU_MMA_TILE=$t timeout 300 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1)
      line=$(echo "$out" | grep "bench-cuda: @")
      tf=$(echo "$line" | sed -nE 's/.* ([0-9.]+) TFLOP\/s.*/\1/p')
      us=$(echo "$line" | sed -nE 's/.* median ([0-9.]+) us.*/\1/p')
      [ -z "$tf" ] && [ -n "$us" ] && tf=$(awk -v f="$flops" -v u="$us" 'BEGIN{printf "%.1f", f / (u * 1e-6) / 1e12}')
      if [ -n "$tf" ]; then
        echo "$out" | grep -q "bench-cuda: kernel .*: matmul " || tf="$tf(no-mma)"
        MM_FZ[$n,$t]=$tf
      else
        MM_ERR[$n,$t]=$(echo "$out" | grep -m1 -i "error" || echo "$out" | tail -n 1)
      fi
    done
  done
  if command -v python3 >/dev/null; then
    while read -r n e c l; do MM_E[$n]=$e; MM_C[$n]=$c; MM_L[$n]=$l; done < <(timeout 600 python3 bench/gpu/peers.py "$REPS" --matmul 2>/dev/null)
  fi
  echo
  printf "%-24s %-22s %8s %8s %8s %8s %8s %8s\n" workload tile fuse eager compile cublas fz/cubl fz/comp
  for f in bench/gpu/matmul/*.fuse; do
    n=$(basename "$f" .fuse)
    for t in $MMA_TILES; do
      fz=${MM_FZ[$n,$t]:-failed}; e=${MM_E[$n]:--}; c=${MM_C[$n]:--}; l=${MM_L[$n]:--}
      rl=$(awk -v a="$fz" -v b="$l" 'BEGIN{if (a+0>0 && b+0>0) printf "%.3f", a/b; else printf "-"}')
      rc=$(awk -v a="$fz" -v b="$c" 'BEGIN{if (a+0>0 && b+0>0) printf "%.3f", a/b; else printf "-"}')
      printf "%-24s %-22s %8s %8s %8s %8s %8s %8s\n" "$n" "$t" "$fz" "$e" "$c" "$l" "$rl" "$rc"
    done
  done
  echo "(TFLOP/s; fuse from fuse-run --bench $REPS with FZ_GPU_MMA_TILE=tile, eager/compile/cublas (mm alone) from peers.py --matmul)"
  for k in "${!MM_ERR[@]}"; do echo "failed $k: ${MM_ERR[$k]}"; done
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    REF=$(mktemp /tmp/mma_ref.XXXXXX)
    if "$NVCC" -O3 -arch=sm_90 -std=c++17 bench/gpu/mma_ref.cu -o "$REF" -DWITH_CUBLAS -lcublas 2>/dev/null ||
       "$NVCC" -O3 -arch=sm_90 -std=c++17 bench/gpu/mma_ref.cu -o "$REF"; then
      for s in 4096 8192; do timeout 300 "$REF" $s $s $s "$REPS"; done
    else
      echo "mma_ref: nvcc failed"
    fi
    rm -f "$REF"
  fi
fi
