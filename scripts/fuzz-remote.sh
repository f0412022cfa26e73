#!/usr/bin/env bash
# scripts/fuzz-remote.sh - the fuzz targets on another (bigger) x86-64
# Linux machine that has neither clang nor LLVM (docs/robustness.md,
# section 3):
#   bash scripts/fuzz-remote.sh pack   # here: build static targets, write .fuzzcarry/
#   T=490 bash scripts/fuzz-remote.sh run   # there, in a copy of the repo with .fuzzcarry/
# `pack` configures build-fuzz-static/ (clang, FZ_FUZZ=ON, FZ_LLVM_STATIC=ON),
# strips debug info, compresses each target with xz, and adds
# libprotobuf-c, the dictionaries (gen_fuzz_dict) and the seeds plus the
# long-run corpora of build-fuzz/long/corpus. `run` unpacks them under
# /tmp/fz, runs every packed target for T seconds in libFuzzer's fork
# mode (16 workers when all are packed; FZ_REMOTE_TARGETS="parser onnx"
# packs only those), leaves logs and artifacts under $OUT (default
# /tmp/fz/out) and prints, per target, the workers' user and system CPU
# seconds, wall seconds, executions and artifacts (crash-, leak-,
# timeout-, oom-). A crash's stack is unsymbolized there
# (ASAN_OPTIONS=symbolize=0 gives module offsets): symbolize it here with
# llvm-symbolizer-19 --obj=build-fuzz-static/bin/fuzz_X OFFSET.
set -u
cd "$(dirname "$0")/.."
R=$PWD C=$PWD/.fuzzcarry
TARGETS=${FZ_REMOTE_TARGETS:-parser onnx kernel pipeline diff npy run}
case ${1:-} in
pack)
  set -e
  B=$R/build-fuzz-static
  cmake -S "$R" -B "$B" -G "Unix Makefiles" -DCMAKE_C_COMPILER=clang \
    -DFZ_FUZZ=ON -DFZ_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFZ_LLVM_STATIC=ON >/dev/null
  make -C "$B" -j2 $(for t in $TARGETS; do echo fuzz_$t; done) gen_fuzz_dict >/dev/null
  rm -rf "$C"; mkdir -p "$C/bin" "$C/lib" "$C/dict"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  for t in $TARGETS; do
    strip --strip-debug -o "$tmp/fuzz_$t" "$B/bin/fuzz_$t"
    xz -6 -T2 -c "$tmp/fuzz_$t" >"$C/bin/fuzz_$t.xz"
  done
  cp -L "$(ldd "$B/bin/fuzz_parser" | awk '/protobuf-c/ {print $3}')" "$C/lib/"
  for d in parser kernel pipeline run; do "$B/bin/gen_fuzz_dict" $d >"$C/dict/$d.dict"; done
  long=()
  [ -d build-fuzz/long/corpus ] && long=(-C build-fuzz/long corpus)
  tar -cf - fuzz/corpus "${long[@]}" | xz -6 -T2 >"$C/corpus.tar.xz"
  echo "$R" >"$C/srcdir" # FZ_SOURCE_DIR compiled into fuzz_run
  du -sh "$C"
  ;;
run)
  T=${T:-490} W=/tmp/fz OUT=${OUT:-/tmp/fz/out}
  rm -rf $W/bin $W/art $W/work; mkdir -p $W/bin $W/art "$OUT"
  # fuzz_run copies the example model from its source tree (FZ_SOURCE_DIR).
  src=$(cat "$C/srcdir")
  [ -e "$src" ] || { mkdir -p "$(dirname "$src")"; ln -sfn "$R" "$src"; }
  for f in "$C"/bin/*.xz; do
    b=$(basename "$f" .xz)
    python3 -c "import lzma,sys;open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" $W/bin/$b
    chmod +x $W/bin/$b
  done
  python3 -c "import tarfile;tarfile.open('$C/corpus.tar.xz').extractall('$W')"
  export LD_LIBRARY_PATH=$C/lib LSAN_OPTIONS=suppressions=$R/fuzz/lsan.supp
  go() { # name target workers env...
    local name=$1 t=$2 k=$3; shift 3
    [ -x $W/bin/fuzz_$t ] || return 0 # not packed
    names="$names $name"
    mkdir -p $W/work/$name $W/art/$name
    local dict=() extra=() ml=4096 corp=$W/corpus/$t
    [ -f "$C/dict/$t.dict" ] && dict=(-dict="$C/dict/$t.dict")
    [ $t = kernel ] && ml=8192
    [ $t = run ] && extra=(-close_fd_mask=3)
    # The CPU backend JIT-compiles every input: its corpus would take the
    # whole run to load, so it starts from the seeds.
    [ $name = diffcpu ] && corp=$W/fuzz/corpus/$t
    [ -d "$corp" ] || corp=
    ( cd $W/art/$name && env "$@" python3 - $W/bin/fuzz_$t -fork=$k \
        -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time=$T -timeout=30 -rss_limit_mb=2048 -max_len=$ml \
        "${dict[@]}" "${extra[@]}" -artifact_prefix=$W/art/$name/ \
        $W/work/$name $corp $W/fuzz/corpus/$t >$W/$name.log 2>&1 <<'PY'
import resource, subprocess, sys, time
t0 = time.time(); rc = subprocess.call(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("FZCPU %.1f %.1f %.1f rc=%d" % (r.ru_utime, r.ru_stime, time.time() - t0, rc))
PY
    ) &
  }
  names=
  go parser parser 3 FZ_=1
  go onnx onnx 2 FZ_=1
  go kernel kernel 3 FZ_=1
  go pipeline pipeline 2 FZ_=1
  go diff diff 2 FZ_FUZZ_DIFF_CPU=0
  go diffcpu diff 2 FZ_FUZZ_DIFF_CPU=1
  go npy npy 1 FZ_=1
  go run run 1 FZ_=1
  wait
  for n in $names; do
    tail -c 20000 $W/$n.log >"$OUT/$n.log"
    mkdir -p "$OUT/art/$n"; ls $W/art/$n | head -8 | while read -r a; do cp "$W/art/$n/$a" "$OUT/art/$n/"; done
  done
  printf "%-9s %9s %9s %8s %10s %9s\n" target user_s sys_s wall_s execs artifacts
  for n in $names; do
    set -- $(grep FZCPU $W/$n.log | tail -1) - - - -
    ex=$(grep -o '^#[0-9]*' $W/$n.log | tail -1 | tr -d '#')
    printf "%-9s %9s %9s %8s %10s %9s\n" $n $2 $3 $4 "${ex:--}" "$(ls $W/art/$n | wc -l)"
  done
  ;;
*) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac
