#!/usr/bin/env bash
# tests/gpu/python.sh - the fuse Python package on a GPU machine (PyTorch
# 2 with CUDA; nothing is built there). Run from the repository root with
# the folder tests/gpu/pack.sh makes on the build machine:
#     bash tests/gpu/python.sh [CARRY_DIR]       (default: build-gpu-carry)
# CARRY_DIR/python holds the package (fuse/*.py, _fuse.abi3.so: Python's
# stable ABI, so Debian's 3.11 build loads in the GPU machine's 3.12)
# and its metadata (the torch.compile entry point); CARRY_DIR/lib holds
# libfuse.so.0 (LLVM linked in: compressed as libfuse.so.0.xz) and the
# libraries it needs, unpacked under /tmp (xz, or Python's lzma).
# Two parts, with python3 (PYTHON=... for another):
#  - tests/gpu/python_gpu.py: the CUDA path against the interpreter, the
#    models' saved PyTorch outputs and PyTorch itself (numpy and CUDA
#    tensors in, numpy, DeviceArrays and CUDA tensors out, fuse.torch,
#    torch.compile(backend="fuse") imported and through the entry point,
#    the fallback), then the timings of a call;
#  - tests/python/run.py, the package's own suite (CPU; PyTorch 2's
#    torch.compile backend test runs here), each test counted.
# The last line is `N passed, N failed`; exits 1 when anything failed.
set -u
CARRY=${1:-build-gpu-carry}
PY=${PYTHON:-python3}
if [ ! -d "$CARRY/python/fuse" ]; then
  echo "error: $CARRY/python/fuse not found (bash tests/gpu/pack.sh makes it)" >&2
  exit 1
fi
LIB=$(mktemp -d /tmp/fuse-py.XXXXXX)
trap 'rm -rf "$LIB"' EXIT
for f in "$CARRY"/lib/*; do
  case $f in
    *.xz)
      if command -v xz >/dev/null; then xz -dc "$f" >"$LIB/$(basename "$f" .xz)"
      else "$PY" -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$LIB/$(basename "$f" .xz)"
      fi || exit 1 ;;
    *) cp "$f" "$LIB/" ;;
  esac
done
export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$CARRY/python${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import sys, fuse; print("fuse", fuse.__version__, "from", fuse.__file__, "on Python", sys.version.split()[0])' || exit 1
pass=0 fail=0
out=$(mktemp)
"$PY" tests/gpu/python_gpu.py 2>&1 | tee "$out"
if [[ $(tail -n 1 "$out") =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
  pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
else
  fail=$((fail + 1)); echo "FAIL tests/gpu/python_gpu.py did not finish"
fi
# The suite expects FZ_BUILD_DIR/python: the carried package.
FZ_BUILD_DIR=$CARRY "$PY" tests/python/run.py 2>&1 | tee "$out"
if [[ $(tail -n 1 "$out") =~ ^python\ tests:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
  pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
else
  fail=$((fail + 1)); echo "FAIL tests/python/run.py did not finish"
fi
rm -f "$out"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
