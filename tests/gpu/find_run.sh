# tests/gpu/find_run.sh - sourced by the GPU scripts (tests/gpu/mma_tiles.sh,
# bench/gpu/{run,conv,longrow,tf32,small_m,channel_ln}.sh): `fz_find_run
# DIR` sets RUN to
# DIR/bin/fuse-run, or, where tests/gpu/pack.sh left it compressed
# (DIR/bin/fuse-run.xz), to a temporary copy unpacked with xz (or
# Python's lzma where xz is missing) and removed when the script exits;
# DIR/lib goes first on LD_LIBRARY_PATH (the libraries pack.sh copies).
# Returns 1 with a message when DIR has neither.
fz_find_run() {
  local dir=$1
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  RUN=$dir/bin/fuse-run
  if [ ! -x "$RUN" ] && [ -f "$RUN.xz" ]; then
    RUN=$(mktemp)
    trap 'rm -f "$RUN"' EXIT
    if command -v xz >/dev/null; then xz -dc "$dir/bin/fuse-run.xz" >"$RUN"
    else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$dir/bin/fuse-run.xz" "$RUN"
    fi
    chmod +x "$RUN"
  fi
  [ -x "$RUN" ] && return 0
  echo "error: $RUN not found (bash tests/gpu/pack.sh makes it)" >&2
  return 1
}

# `fz_check_cuda LABEL FUSE-RUN-ARGS...`: runs $RUN ARGS --device cuda
# --check-interp --print-limit 0 (ARGS: the file, --entry, inputs,
# tolerances) and prints `PASS LABEL: <its check-interp lines>`, or `FAIL
# LABEL (exit N):` and its last lines; returns 1 on a failure (a non-zero
# exit, no check line, or a MISMATCH).
fz_check_cuda() {
  local label=$1 out rc res
  shift
  out=$(timeout 300 "$RUN" "$@" --device cuda --check-interp --print-limit 0 2>&1)
  rc=$?
  res=$(echo "$out" | grep "check-interp:" | tr '\n' ' ')
  if [ $rc -eq 0 ] && [ -n "$res" ] && ! echo "$out" | grep -q MISMATCH; then
    echo "PASS $label: $res"
    return 0
  fi
  echo "FAIL $label (exit $rc):"
  echo "$out" | tail -n 4
  return 1
}
