# tests/gpu/find_run.sh - sourced by the GPU scripts (tests/gpu/mma_tiles.sh,
# bench/gpu/{run,conv,longrow,tf32}.sh): `fz_find_run DIR` sets RUN to
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
