# -*- Python -*-
# lit configuration of fuse's tool tests.
#
# Run from the repository root, after a build:
#   FZ_BUILD_DIR=build python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv tests/lit
# (FZ_BUILD_DIR defaults to <repo>/build; the check-lit target sets it.)
#
# The tools come from $FZ_BUILD_DIR/bin, FileCheck, not and count from
# Debian's llvm-19-tools, all found through PATH. The feature `mlir-opt`
# is available when Debian's mlir-19-tools is installed, so a test can say
# `REQUIRES: mlir-opt`.

import os

import lit.formats
import lit.util

config.name = "fuse"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".fuse", ".mlir"]

config.test_source_root = os.path.dirname(os.path.abspath(__file__))
repo_root = os.path.dirname(os.path.dirname(config.test_source_root))
build_dir = os.path.abspath(
    os.environ.get("FZ_BUILD_DIR", os.path.join(repo_root, "build")))
config.fz_build_dir = build_dir
config.fz_tools_dir = os.path.join(build_dir, "bin")
# Keep Output/ folders out of the source tree.
config.test_exec_root = os.path.join(build_dir, "tests", "lit")

# Inputs/ holds files that other tests read; *.py are generators.
config.excludes = ["Inputs", "Output", "lit.cfg.py", "lit.site.cfg.py"]

llvm_bin = "/usr/lib/llvm-19/bin"
if not os.path.isfile(os.path.join(config.fz_tools_dir, "fuse-opt")):
    lit_config.warning(
        "fuse-opt not found in %s: build first or set FZ_BUILD_DIR"
        % config.fz_tools_dir)
for tool in ("FileCheck", "not", "count"):
    if not os.path.isfile(os.path.join(llvm_bin, tool)):
        lit_config.fatal("%s not found in %s: install llvm-19-tools"
                         % (tool, llvm_bin))

config.environment["PATH"] = os.pathsep.join(
    [config.fz_tools_dir, llvm_bin, os.environ.get("PATH", "")])

# Sanitizer builds: pass their settings through to the tools.
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# A sanitizer report must be a crash (abort), never a plain exit status 1:
# otherwise `not fuse-opt` on a malformed input would count a memory error
# as the expected failure.
config.environment.setdefault(
    "UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1:abort_on_error=1")
config.environment.setdefault("ASAN_OPTIONS", "abort_on_error=1")

# The kernel cache (docs/codegen.md "Kernel cache"): never the user's.
# Tests that look at hits and misses give FZ_CACHE_DIR a folder of their
# own (%t).
config.environment["FZ_CACHE_DIR"] = os.path.join(
    build_dir, "tests", "lit-kernel-cache")
config.environment.pop("XDG_CACHE_HOME", None)

config.substitutions.append(("%fuse_src_root", repo_root))
config.substitutions.append(("%fuse_tools_dir", config.fz_tools_dir))

if os.path.isfile(os.path.join(llvm_bin, "mlir-opt")):
    config.available_features.add("mlir-opt")
if os.environ.get("FZ_SANITIZE", "") not in ("", "0", "OFF"):
    config.available_features.add("sanitize")

# The fake CUDA driver (tests/unit/fake_cuda.c, built next to the tools):
# `env FZ_CUDA_LIBRARY=%fake_cuda fuse-run ... --device cuda` runs the
# CUDA runtime's host side (module loading, shared-memory opt-in, CUDA
# graphs, the --bench flow) without a GPU; no kernel runs.
config.substitutions.append(
    ("%fake_cuda", os.path.join(build_dir, "lib", "libfz_fake_cuda.so")))

# PTX assembly check: where the CUDA toolkit's ptxas is installed (or
# $FZ_PTXAS names one), `%ptxas FILE.ptx` assembles FILE for sm_90 and
# fails the test on invalid PTX; elsewhere it only checks that the file
# exists. Every lit test that emits PTX writes it to a file and runs it.
ptxas = os.environ.get("FZ_PTXAS", "/usr/local/cuda/bin/ptxas")
if os.path.isfile(ptxas) and os.access(ptxas, os.X_OK):
    config.available_features.add("ptxas")
    # %ptxas_verbose (tests that say `REQUIRES: ptxas`): ptxas -v, whose
    # registers, spills and stack a test can check. Before %ptxas, which
    # is a prefix of it.
    config.substitutions.append(
        ("%ptxas_verbose", "%s -arch=sm_90 -v -o /dev/null" % ptxas))
    # %ptxas_sm80: the same for sm_80 (A100), before %ptxas too.
    config.substitutions.append(
        ("%ptxas_sm80", "%s -arch=sm_80 -o /dev/null" % ptxas))
    # %ptxas_sm90a: sm_90a (kernel.wgmma), before %ptxas too.
    config.substitutions.append(
        ("%ptxas_sm90a", "%s -arch=sm_90a -o /dev/null" % ptxas))
    config.substitutions.append(
        ("%ptxas", "%s -arch=sm_90 -o /dev/null" % ptxas))
else:
    lit_config.note("ptxas not found (%s): PTX is not assembled" % ptxas)
    config.substitutions.append(("%ptxas_sm80", "test -s"))
    config.substitutions.append(("%ptxas_sm90a", "test -s"))
    config.substitutions.append(("%ptxas", "test -s"))

# The CUDA toolkit's libdevice, which the GPU back end links for math
# (fz/gpu.h): tests of the PTX it gives say `REQUIRES: libdevice`.
cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if os.path.isfile(os.path.join(cuda_home, "nvvm", "libdevice",
                               "libdevice.10.bc")):
    config.available_features.add("libdevice")
