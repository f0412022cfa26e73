#!/usr/bin/env bash
# Installs what fuse needs to build and test on Debian 12, idempotently:
# only the missing packages are installed, and nothing is printed when
# everything is already there. Uses sudo only when not root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  cmake make gcc pkg-config check python3 clang
  python3-numpy    # expected values of the interpreter tests (tests/lit/fuse-run)
  python3-dev      # the Python package's C extension (python/, docs/python.md)
  python3-torch    # PyTorch 1.13: fuse.torch's tests (tests/python/test_torch.py)
  llvm-19-dev      # LLVM C API (code generation, later issues)
  llvm-19-tools    # lit, FileCheck, not, count
  mlir-19-tools    # mlir-opt: cross-checks of the textual format
  protobuf-c-compiler libprotobuf-c-dev  # ONNX importer: protoc-c, libprotobuf-c
  libonnx-dev      # onnx.proto, which the importer is generated from
  libonnx-testdata # ONNX backend node tests (tests/conformance)
  valgrind         # memcheck over the lit suite in CI (scripts/valgrind.sh)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo -E)
else
  echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
  >/dev/null
