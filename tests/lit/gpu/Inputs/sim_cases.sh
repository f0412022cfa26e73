#!/usr/bin/env bash
# Runs every tests/gpu/cases file (the end-to-end checks that
# tests/gpu/run.sh runs on a GPU) on the kernel simulator instead:
# graph-to-kernel, then fuse-run --device sim --check-interp, two seeds,
# with the case's `// tolerance:`, `// precision:` and `// layout:` lines
# where it has them (as run.sh does). Prints one line per run and `N passed, N
# failed`; exits 1 when anything failed.
# Usage: sim_cases.sh CASES_DIR
set -u
pass=0 fail=0
for f in "$1"/*.fuse; do
  rtol=1e-4 atol=1e-5
  tol=$(sed -n 's|^// tolerance: rtol \([^ ]*\) atol \([^ ]*\).*|\1 \2|p' "$f" | head -1)
  [ -n "$tol" ] && read -r rtol atol <<<"$tol"
  prec=$(sed -n 's|^// precision: \([a-z0-9]*\).*|\1|p' "$f" | head -1)
  precision=(); [ -n "$prec" ] && precision=(--precision "$prec")
  lay=$(sed -n 's|^// layout: \([a-z]*\).*|\1|p' "$f" | head -1)
  [ -n "$lay" ] && precision+=(--layout "$lay")
  for seed in 1 2; do
    if out=$(fuse-run "$f" --device sim --random-inputs "$seed" \
               "${precision[@]}" --check-interp --rtol "$rtol" --atol "$atol" \
               --print-limit 0 2>&1) &&
       ! grep -q MISMATCH <<<"$out"; then
      pass=$((pass + 1)); echo "PASS $(basename "$f") (seed $seed)"
    else
      fail=$((fail + 1)); echo "FAIL $(basename "$f") (seed $seed)"; echo "$out"
    fi
  done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
