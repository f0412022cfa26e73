#!/usr/bin/env bash
# tests/gpu/run.sh - end-to-end checks of the CUDA path on a GPU machine.
#
# Run from the repository root with a build folder made on the build
# machine (LLVM linked statically: -DFZ_LLVM_STATIC=ON), nothing is built
# here:
#     bash tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu-carry, made by tests/gpu/pack.sh)
# BUILD_DIR/bin holds the tools, either plain or compressed as NAME.xz
# (pack.sh); compressed ones and BUILD_DIR/data/onnx-node.tar.xz are
# unpacked under /tmp (xz, or Python's lzma where xz is missing).
# Three parts, all against the interpreter:
#  - the unit test test_cuda (on a GPU machine it loads a PTX module,
#    launches and copies): one check;
#  - each tests/gpu/cases/*.fuse with `fuse-run --device cuda
#    --random-inputs SEED --check-interp` (outputs compared with the
#    graph interpreter) for two seeds: one check each; the mm_* cases are
#    bf16/f16 matmuls, compiled to tensor-core kernels (lower-loop-to-
#    kernel's matmul mapping: cp.async, ldmatrix, mma.sync; more than
#    48 KiB of dynamic shared memory for the default tiles), the
#    mm_conv* cases bf16/f16 conv2d as implicit GEMMs on tensor cores;
#    the tf32_* cases f32 ones under the default precision (tf32 tensor
#    cores on sm_80 and newer), ieee_* f32 ones kept exact, mixed_* f32
#    models under the bf16/fp16 policies (docs/codegen.md "Precision");
#  - the ONNX backend node tests: `run_conformance --device cuda` (every
#    model compiled to PTX and run on the GPU, outputs compared with the
#    expected ones with ONNX's tolerances, docs/conformance.md); its log
#    goes to /tmp/fz_conformance_cuda.log, its FAIL lines and summary are
#    printed, and its passed and failed tests count in the totals.
# The last line is `N passed, N failed` (skipped conformance tests, which
# the importer does not support, are counted on the line before); exits 1
# when anything failed or the conformance runner did not finish.
# FZ_GPU_DEVICE=cpu runs the same checks on the CPU, FZ_GPU_DEVICE=sim
# through the GPU path on the kernel simulator (dry runs of this script on
# a machine without a GPU; sim: 909 passed, 0 failed: test_cuda, 45
# cases x 2 seeds, 818 conformance tests).
#
# Tolerances: rtol 1e-4, atol 1e-5 (reductions sum in a different order
# than the interpreter, and exp/tanh/erf are polynomial approximations);
# a case may widen them with a line `// tolerance: rtol X atol Y` (bf16
# outputs, where a different summation order can move one rounding step;
# tf32 and mixed precision, each within its stated tolerance).
# A line `// precision: P` runs the case with fuse-run --precision P
# (default: the default policy, tf32 for f32 matmuls and convolutions).
# A line `// layout: L` runs it with fuse-run --layout L (default: auto,
# the GPU's: NHWC where the convolutions hold most of the work), so that
# the NCHW mappings stay tested on the GPU too.
# The conformance runner keeps ONNX's exact-f32 semantics: its default is
# --precision=ieee (docs/conformance.md).
set -u
BUILD=${1:-build-gpu-carry}
DEVICE=${FZ_GPU_DEVICE:-cuda}  # cpu or sim: check this script without a GPU
pass=0 fail=0 failed=()
# Decompresses .xz file $1 to $2 (xz, else Python's lzma).
unxz_to() {
  if command -v xz >/dev/null; then xz -dc "$1" >"$2"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}
BIN=$BUILD/bin
if ls "$BUILD"/bin/*.xz >/dev/null 2>&1 || [ -f "$BUILD/data/onnx-node.tar.xz" ]; then
  UNPACK=$(mktemp -d /tmp/fuse-gpu.XXXXXX)
  trap 'rm -rf "$UNPACK"' EXIT
  mkdir -p "$UNPACK/bin"
  for f in "$BUILD"/bin/*; do
    case $f in
      *.xz) unxz_to "$f" "$UNPACK/bin/$(basename "$f" .xz)" || exit 1 ;;
      *) cp "$f" "$UNPACK/bin/" ;;
    esac
  done
  chmod +x "$UNPACK"/bin/*
  BIN=$UNPACK/bin
  if [ -f "$BUILD/data/onnx-node.tar.xz" ]; then
    unxz_to "$BUILD/data/onnx-node.tar.xz" "$UNPACK/node.tar" &&
      tar -C "$UNPACK" -xf "$UNPACK/node.tar" && rm -f "$UNPACK/node.tar" || exit 1
  fi
fi
export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUN=$BIN/fuse-run
if [ ! -x "$RUN" ]; then
  echo "error: $RUN not found (build with -DFZ_LLVM_STATIC=ON and carry the build folder)" >&2
  exit 1
fi
if [ -x "$BIN/test_cuda" ]; then
  if "$BIN/test_cuda" >/tmp/fz_test_cuda.log 2>&1; then
    pass=$((pass+1)); echo "PASS unit test_cuda"
  else
    fail=$((fail+1)); failed+=(test_cuda); echo "FAIL unit test_cuda"; cat /tmp/fz_test_cuda.log
  fi
fi
for f in tests/gpu/cases/*.fuse; do
  rtol=1e-4 atol=1e-5
  tol=$(sed -n 's|^// tolerance: rtol \([^ ]*\) atol \([^ ]*\).*|\1 \2|p' "$f" | head -1)
  [ -n "$tol" ] && read -r rtol atol <<<"$tol"
  prec=$(sed -n 's|^// precision: \([a-z0-9]*\).*|\1|p' "$f" | head -1)
  precision=(); [ -n "$prec" ] && precision=(--precision "$prec")
  lay=$(sed -n 's|^// layout: \([a-z]*\).*|\1|p' "$f" | head -1)
  [ -n "$lay" ] && precision+=(--layout "$lay")
  for seed in 1 2; do
    name="$(basename "$f" .fuse) (seed $seed)"
    out2=$(timeout 120 "$RUN" "$f" --device "$DEVICE" --random-inputs "$seed" \
           "${precision[@]}" --check-interp --rtol "$rtol" --atol "$atol" \
           --print-limit 0 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out2" | grep -q "check-interp:.*ok" && \
       ! echo "$out2" | grep -q MISMATCH; then
      pass=$((pass+1))
      echo "PASS $name: $(echo "$out2" | grep check-interp | head -1)"
    else
      fail=$((fail+1)); failed+=("$name")
      echo "FAIL $name (rc $rc)"; echo "$out2" | grep -v '^\[' | head -20
    fi
  done
done
# The ONNX backend node tests on the device.
DATA=/usr/share/libonnx-testdata/data/node
[ -n "${UNPACK:-}" ] && [ -d "$UNPACK/node" ] && DATA=$UNPACK/node
if [ ! -x "$BIN/run_conformance" ]; then
  fail=$((fail+1)); failed+=(conformance)
  echo "FAIL conformance: $BIN/run_conformance not found"
elif [ ! -d "$DATA" ]; then
  fail=$((fail+1)); failed+=(conformance)
  echo "FAIL conformance: no ONNX node test data ($DATA)"
else
  log=/tmp/fz_conformance_$DEVICE.log
  timeout "${FZ_CONFORMANCE_TIMEOUT:-420}" \
    "$BIN/run_conformance" --device "$DEVICE" --data "$DATA" >"$log" 2>&1
  rc=$?
  grep '^FAIL ' "$log"
  summary=$(tail -n 1 "$log")
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    pass=$((pass+BASH_REMATCH[1])); fail=$((fail+BASH_REMATCH[2]))
    [ "${BASH_REMATCH[2]}" -gt 0 ] && failed+=(conformance)
    echo "conformance on $DEVICE: $summary (log: $log)"
  else
    fail=$((fail+1)); failed+=(conformance)
    echo "FAIL conformance: the runner did not finish (exit $rc):"; tail -n 5 "$log"
  fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
