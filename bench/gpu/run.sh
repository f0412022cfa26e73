#!/usr/bin/env bash
# bench/gpu/run.sh - fuse's CUDA kernels against a device-to-device copy
# (the limit, measured by fuse-run in the same process for the same
# bytes), torch eager, torch.compile and JAX, in one run on the GPU
# machine.
# Nothing is built here:
#     bash bench/gpu/run.sh [BUILD_DIR] [REPS]     (default build-gpu-carry, 20)
# Workloads: bench/gpu/*.fuse (2^27 elements each, far above L2); the
# same computations in torch are in peers.py, in JAX in peers_jax.py
# (a separate process: JAX and torch each hold GPU memory). GB/s count
# ideal bytes (each input read once, each output written once). fuse times the
# function's kernels replayed as one CUDA graph (CUDA events, median).
# Prints one table: GB/s of each, fuse/copy and fuse/torch.compile.
set -u
BUILD=${1:-build-gpu-carry}
export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
REPS=${2:-20}
RUN=$BUILD/bin/fuse-run
if [ ! -x "$RUN" ] && [ -f "$RUN.xz" ]; then  # tests/gpu/pack.sh compresses it
  RUN=$(mktemp /tmp/fuse-run.XXXXXX)
  if command -v xz >/dev/null; then xz -dc "$BUILD/bin/fuse-run.xz" >"$RUN"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$BUILD/bin/fuse-run.xz" "$RUN"
  fi
  chmod +x "$RUN"
fi
[ -x "$RUN" ] || { echo "error: $RUN not found" >&2; exit 1; }
declare -A EAGER COMPILE JAX FZ CP KS
for f in bench/gpu/*.fuse; do
  n=$(basename "$f" .fuse)
  line=$(timeout 120 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --print-limit 0 2>&1 | grep "bench-cuda: @")
  [ -z "$line" ] && continue
  FZ[$n]=$(echo "$line" | sed -E 's/.* ([0-9.]+) GB\/s \(.*/\1/')
  CP[$n]=$(echo "$line" | sed -E 's/.*device copy ([0-9.]+) GB\/s.*/\1/')
  KS[$n]=$(echo "$line" | sed -E 's/.*@main: ([0-9]+) kernel.*/\1/')
done
if command -v python3 >/dev/null; then
  while read -r n e c; do EAGER[$n]=$e; COMPILE[$n]=$c; done < <(timeout 400 python3 bench/gpu/peers.py "$REPS" 2>/dev/null)
  while read -r n j; do JAX[$n]=$j; done < <(timeout 200 python3 bench/gpu/peers_jax.py "$REPS" 2>/dev/null)
fi
printf "%-22s %3s %9s %9s %9s %9s %9s %9s %9s\n" workload ker fuse copy eager compile jax fz/copy fz/comp
for f in bench/gpu/*.fuse; do
  n=$(basename "$f" .fuse)
  fz=${FZ[$n]:-}; cp=${CP[$n]:-}
  if [ -z "$fz" ]; then printf "%-22s failed\n" "$n"; continue; fi
  e=${EAGER[$n]:--}; c=${COMPILE[$n]:--}; j=${JAX[$n]:--}
  rc=$(awk -v a="$fz" -v b="$cp" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
  rt=$(awk -v a="$fz" -v b="$c" 'BEGIN{if (b+0>0) printf "%.3f", a/b; else printf "-"}')
  printf "%-22s %3s %9s %9s %9s %9s %9s %9s %9s\n" "$n" "${KS[$n]}" "$fz" "$cp" "$e" "$c" "$j" "$rc" "$rt"
done
echo "(GB/s; fuse and copy from fuse-run --bench $REPS, eager/compile from peers.py, jax from peers_jax.py; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
