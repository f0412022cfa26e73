#!/usr/bin/env bash
# bench/gpu/small_m.sh - small-M contractions (docs/codegen.md "Small-M
# contractions on the GPU") on the GPU machine: y = x @ W with x of M rows
# (M = 1, 4, 8, 16), W of K x N = 4096 x 4096, 4096 x 11008 and
# 11008 x 4096, bf16 and f32, in both layouts: `kn` (W[K, N], x @ W) and
# `nk` (W[N, K] used transposed: nn.Linear's layout, transpose_b), against
# torch (F.linear / matmul: cuBLAS) and torch.compile on the same shapes.
# Nothing is built here:
#     bash bench/gpu/small_m.sh [BUILD_DIR] [REPS]   (default build-gpu-carry, 20)
#     MS="1 16" TYPES=bf16 LAYOUTS=nk SHAPES="4096x4096" ...   a subset
#     BASELINE=1 ...   also fuse with the small-M mapping off (FZ_GPU_SMALL_M=0:
#                      the tensor-core tiles, tf32 for f32) per row (+1-2 min)
#     FZ_GPU_SMALL_M_SHAPE=... the kernels' shape forced (docs/passes.md),
#                      e.g. mma=0: 16-bit weights on CUDA cores at every M
#     CHECK=0 ...      skips the correctness runs
#     VARIANTS=0 ...   skips part 3 (below); VARIANT_ROWS="..." replaces its rows
# BUILD_DIR is tests/gpu/pack.sh's folder (fuse-run, plain or xz). About
# 2-3 minutes on an H100 (48 compilations by fuse-run, torch.compile's).
# Part 1, correctness (`fuse-run --device cuda --check-interp`, PASS/FAIL
# lines): M = 3 and 16 against ragged and full-size weights, both layouts,
# bf16 and f32, bias + relu / residual epilogues (small_m_check.fuse).
# Part 2, one table (small_m_peers.py): per row the fuse time (fuse-run
# --bench REPS --bench-cold: L2 overwritten before each timed run, as a
# model's weights are read once per call), its GB/s (ideal bytes: W, x
# and y once) and fraction of the device copy rate (a device-to-device
# copy of W's bytes, read + write, measured L2-cold in the same run),
# torch's and torch.compile's times timed the same way, and the ratios
# (peer time / fuse time: above 1, fuse is faster). Part 3, variants: a
# few rows again with a shape forced (FZ_GPU_SMALL_M_SHAPE: the previous
# defaults, W's loads kept in L1 with stream=0, the register cap off with
# cap=0, other splits and widths), one line each after the table's rows,
# so that one visit says which change did what (docs/benchmarks.md, "GPU:
# small-M contractions"). Exits 1 when a check failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build-gpu-carry}
REPS=${2:-20}
MS=${MS:-"1 4 8 16"}
SHAPES=${SHAPES:-"4096x4096 4096x11008 11008x4096"}
TYPES=${TYPES:-"bf16 f32"}
LAYOUTS=${LAYOUTS:-"kn nk"}
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/find_run.sh"
fz_find_run "$BUILD" || exit 1
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ "${RUN#/tmp/}" != "$RUN" ] && rm -f "$RUN"' EXIT
status=0

if [ "${CHECK:-1}" != 0 ]; then
  echo "== correctness: cuda against the graph interpreter =="
  C=bench/gpu/small_m_check.fuse
  for e in $(sed -n 's/^func.func @\([a-z0-9_]*\).*/\1/p' "$C"); do
    case $e in *f32*) tol="--rtol 1e-4 --atol 1e-3" ;; *) tol="--rtol 2e-2 --atol 0.25" ;; esac
    fz_check_cuda "$e" "$C" --entry "$e" --random-inputs 5 $tol || status=1
  done
fi

# One function per configuration, its fuse-run --bench line kept.
RES=$TMP/fuse.txt
: >"$RES"
for t in $TYPES; do
  for s in $SHAPES; do
    K=${s%x*} N=${s#*x}
    for l in $LAYOUTS; do
      for m in $MS; do
        f=$TMP/${l}_${t}_${m}_${K}x${N}.fuse
        if [ "$l" = kn ]; then
          w="${K}x${N}x$t" attr=""
        else
          w="${N}x${K}x$t" attr=" {transpose_b = true}"
        fi
        cat >"$f" <<EOF
func.func @main(%x: tensor<${m}x${K}x$t>, %w: tensor<$w>) -> tensor<${m}x${N}x$t> {
  %0 = graph.matmul %x, %w$attr : tensor<${m}x${K}x$t>, tensor<$w> -> tensor<${m}x${N}x$t>
  return %0 : tensor<${m}x${N}x$t>
}
EOF
        for mode in small-m ${BASELINE:+tiles}; do
          off=""; [ "$mode" = tiles ] && off=0
          out=$(FZ_GPU_SMALL_M=${off:-1} timeout 300 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --bench-cold --print-limit 0 2>&1)
          us=$(echo "$out" | sed -nE 's/^bench-cuda: @main: .* median ([0-9.]+) us.*/\1/p')
          kernels=$(echo "$out" | grep -c "^bench-cuda: kernel")
          line=$(echo "$out" | grep -m1 "^bench-cuda: kernel main_k0:")
          case "$line" in
            *"tensor cores"*) plan=small-m/mma ;; *small-m*) plan=small-m/fma ;;
            *matmul*) plan=matmul ;; *) plan=$(echo "$line" | sed -nE 's/^[^:]*: [^:]*: [^:]*: ([a-z-]+).*/\1/p') ;;
          esac
          case "$line" in *"k split"*) plan="$plan+split" ;; esac
          [ -z "$us" ] && { us=nan; echo "fuse-run failed ($l $t M=$m ${K}x$N $mode): $(echo "$out" | grep -m1 -i error)"; }
          echo "$l $t $m $K $N $mode $us $kernels ${plan:-?}" >>"$RES"
        done
      done
    done
  done
done
# Part 3: rows with a shape forced ("layout type M KxN shape"; the
# defaults' rows are in the table above).
VARIANT_ROWS=${VARIANT_ROWS:-"
nk bf16 1 4096x4096 stream=0
nk bf16 1 4096x11008 stream=0
kn bf16 1 4096x11008 blocks=1
kn bf16 1 4096x11008 blocks=8
kn bf16 1 4096x4096 stream=0
nk bf16 16 4096x4096 unroll=2,warps=8
nk bf16 16 4096x4096 warps=8
nk bf16 16 4096x4096 stream=0
nk bf16 8 4096x11008 unroll=2
kn bf16 16 4096x4096 warps=8
kn bf16 16 4096x11008 cols=32
nk f32 16 4096x11008 stream=0
nk f32 16 4096x11008 cap=0
nk f32 16 4096x11008 stream=0,cap=0
nk f32 16 4096x11008 cols=2,unroll=4
nk f32 8 4096x11008 stream=0
nk f32 4 4096x11008 stream=0
kn f32 16 4096x4096 cap=0
kn f32 1 4096x11008 blocks=1
kn f32 8 4096x11008 blocks=1
"}
if [ "${VARIANTS:-1}" != 0 ]; then
  while read -r l t m s shape; do
    [ -z "$l" ] && continue
    K=${s%x*} N=${s#*x}
    f=$TMP/v_${l}_${t}_${m}_${K}x${N}.fuse
    if [ "$l" = kn ]; then w="${K}x${N}x$t" attr=""; else w="${N}x${K}x$t" attr=" {transpose_b = true}"; fi
    cat >"$f" <<EOF
func.func @main(%x: tensor<${m}x${K}x$t>, %w: tensor<$w>) -> tensor<${m}x${N}x$t> {
  %0 = graph.matmul %x, %w$attr : tensor<${m}x${K}x$t>, tensor<$w> -> tensor<${m}x${N}x$t>
  return %0 : tensor<${m}x${N}x$t>
}
EOF
    out=$(FZ_GPU_SMALL_M_SHAPE=$shape timeout 300 "$RUN" "$f" --device cuda --random-inputs 1 --bench "$REPS" --bench-cold --print-limit 0 2>&1)
    us=$(echo "$out" | sed -nE 's/^bench-cuda: @main: .* median ([0-9.]+) us.*/\1/p')
    kernels=$(echo "$out" | grep -c "^bench-cuda: kernel")
    [ -z "$us" ] && { us=nan; echo "fuse-run failed ($l $t M=$m ${K}x$N $shape): $(echo "$out" | grep -m1 -i error)"; }
    plan=$(echo "$out" | grep -m1 "^bench-cuda: kernel main_k0:" | sed 's/.*shared [0-9]*: //' | tr ' ' '_')
    echo "$l $t $m $K $N v:$shape $us $kernels ${plan:-?}" >>"$RES"
  done <<<"$VARIANT_ROWS"
fi

# The kernels of one row of each kind, for the record.
for l in $LAYOUTS; do
  f=$TMP/${l}_$(echo $TYPES | cut -d' ' -f1)_1_4096x4096.fuse
  [ -f "$f" ] && "$RUN" "$f" --device cuda --random-inputs 1 --bench 1 --print-limit 0 2>&1 | grep "^bench-cuda: kernel" | sed "s|^|$l M=1: |"
done
echo
timeout 900 python3 bench/gpu/small_m_peers.py "$RES" "$REPS" || status=1
exit $status
