#!/usr/bin/env bash
# bench/gpu/ptx_compare.sh - GPU code of two builds compared without a GPU.
#
#     bash bench/gpu/ptx_compare.sh BASE_FUSE_TRANSLATE NEW_FUSE_TRANSLATE [OUTDIR]
#
# Compiles every bench/gpu/*.fuse workload and tests/gpu/cases/*.fuse
# file to PTX for sm_90 with both fuse-translate binaries (e.g. one built
# from main, one from a branch), then for each kernel compares:
#  - the memory and communication instructions that decide bandwidth:
#    ld.global.nc.v4, ld.global.v4, st.global.v4 (16-byte accesses),
#    ld.global.nc / st.global of any width (all accesses), shfl.sync,
#    bar.sync, bar.warp.sync;
#  - the launch: grid and block (the `// fuse: K: launch ...` header
#    line where the PTX has one, else derived from the `// fuse: K: PLAN`
#    line, as lowering/nvptx printed it before launch lines existed);
#  - ptxas -v -arch=sm_90: registers, spill stores and loads, stack frame
#    (local memory), static shared memory;
#  - occupancy: the warps an H100 SM (sm_90: 64K registers allocated per
#    warp in units of 256, 64 warps, 32 blocks, 228 KiB shared memory
#    with 1 KiB reserved per block) can hold of the kernel with its
#    launch's block size: what a register difference changes.
# Prints one line per kernel (base -> new where they differ) and a
# summary; the PTX and ptxas logs stay in OUTDIR (default a temporary
# folder). Exits 1 when a compilation fails, 0 otherwise (differences are
# for a person to judge). Needs ptxas ($FZ_PTXAS, else
# /usr/local/cuda/bin/ptxas) and python3.
set -u
BASE=${1:?usage: ptx_compare.sh BASE_FUSE_TRANSLATE NEW_FUSE_TRANSLATE [OUTDIR]}
NEW=${2:?usage: ptx_compare.sh BASE_FUSE_TRANSLATE NEW_FUSE_TRANSLATE [OUTDIR]}
OUT=${3:-$(mktemp -d /tmp/ptx_compare.XXXXXX)}
PTXAS=${FZ_PTXAS:-/usr/local/cuda/bin/ptxas}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$OUT/base" "$OUT/new"
status=0
for f in bench/gpu/*.fuse tests/gpu/cases/*.fuse; do
  n=$(basename "$(dirname "$f")")_$(basename "$f" .fuse)
  for side in base new; do
    bin=$BASE; [ $side = new ] && bin=$NEW
    if ! "$bin" "$f" --emit=ptx -o "$OUT/$side/$n.ptx" 2>"$OUT/$side/$n.err"; then
      echo "error: $side: $f does not compile (see $OUT/$side/$n.err)"; status=1; continue
    fi
    "$PTXAS" -arch=sm_90 -v -o /dev/null "$OUT/$side/$n.ptx" >"$OUT/$side/$n.ptxas" 2>&1 ||
      { echo "error: $side: ptxas rejects $n.ptx"; status=1; }
  done
done
python3 - "$OUT" <<'EOF'
import os, re, sys
out = sys.argv[1]
PATTERNS = [
    ("ld.nc.v4", r"\bld\.global\.nc\.v4\."),
    ("ld.v4", r"\bld\.global\.v4\."),
    ("st.v4", r"\bst\.global\.v4\."),
    ("ld.glob", r"\bld\.global\."),
    ("st.glob", r"\bst\.global\."),
    ("shfl", r"\bshfl\.sync\."),
    ("bar.sync", r"\bbar\.sync\b"),
    ("bar.warp", r"\bbar\.warp\.sync\b"),
]

def ceil_div(a, b):
    return (a + b - 1) // b

def kernels(ptx):
    """name -> (body text, maxntid)"""
    ks = {}
    for m in re.finditer(r"\.entry (\w+)\(", ptx):
        start = m.start()
        body_start = ptx.index("{", m.end())
        end = ptx.index("\n}", body_start)
        text = ptx[start:end]
        mx = re.search(r"\.maxntid (\d+), (\d+), (\d+)", text)
        ks[m.group(1)] = (text, tuple(int(x) for x in mx.groups()) if mx else None)
    return ks

def launches(ptx, ks):
    """name -> [(grid, block)] from the header comments"""
    res = {}
    for m in re.finditer(r"^// fuse: (\w+): launch grid \((\d+), (\d+), (\d+)\), block \((\d+), (\d+), (\d+)\)", ptx, re.M):
        g = tuple(int(x) for x in m.groups()[1:4]); b = tuple(int(x) for x in m.groups()[4:7])
        res.setdefault(m.group(1), []).append((g, b))
    if res:
        return res
    for m in re.finditer(r"^// fuse: (\w+): (.*)$", ptx, re.M):
        name, plan = m.group(1), m.group(2)
        mx = ks.get(name, (None, None))[1] or (256, 1, 1)
        e = re.match(r"elementwise: (\d+) iterations, (\d+) per thread", plan)
        r = re.match(r"rows: (\d+) rows, .*?; (\d+) threads per row, (\d+) rows per block of (\d+)", plan)
        c = re.match(r"columns: (\d+) columns, .*?; 32 columns per block, (\d+) threads per column", plan)
        if e:
            grid, block = ceil_div(int(e.group(1)) // int(e.group(2)), mx[0]), mx[0]
        elif r:
            grid, block = ceil_div(int(r.group(1)), int(r.group(3))), int(r.group(4))
        elif c:
            grid, block = ceil_div(int(c.group(1)), 32), 32 * int(c.group(2))
        else:
            continue
        grid = min(grid, 0x7fffffff)
        res.setdefault(name, []).append(((grid, 1, 1), (block, 1, 1)))
    return res

def ptxas_info(text):
    info = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            cur = m.group(1); info[cur] = {}
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            info[cur].update(stack=int(m.group(1)), spillst=int(m.group(2)), spillld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            info[cur]["regs"] = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            info[cur]["smem"] = int(sm.group(1)) if sm else 0
    return info

def occupancy(regs, threads, smem):
    """resident warps per sm_90 SM"""
    warps = ceil_div(threads, 32)
    per_warp = ceil_div(max(regs, 1) * 32, 256) * 256
    blocks = min(65536 // (per_warp * warps), 32, 64 // warps,
                 (228 * 1024) // (smem + 1024))
    return blocks * warps

def describe(side, name):
    ptx = open(os.path.join(out, side, name + ".ptx")).read()
    ks = kernels(ptx)
    ls = launches(ptx, ks)
    pi = ptxas_info(open(os.path.join(out, side, name + ".ptxas")).read())
    d = {}
    for k, (text, mx) in ks.items():
        m = {p: len(re.findall(rx, text)) for p, rx in PATTERNS}
        launch = ls.get(k, [])
        m["launch"] = " ".join("%dx%dx%d/%dx%dx%d" % (g + b) for g, b in launch) or "-"
        info = pi.get(k, {})
        m["regs"] = info.get("regs", -1)
        m["spill"] = info.get("spillst", 0) + info.get("spillld", 0)
        m["stack"] = info.get("stack", 0)
        m["smem"] = info.get("smem", 0)
        threads = launch[0][1][0] * launch[0][1][1] * launch[0][1][2] if launch else 0
        m["occ"] = occupancy(m["regs"], threads, m["smem"]) if threads and m["regs"] >= 0 else "-"
        d[k] = m
    return d

keys = [p for p, _ in PATTERNS] + ["launch", "regs", "occ", "spill", "stack", "smem"]
names = sorted(f[:-4] for f in os.listdir(os.path.join(out, "base")) if f.endswith(".ptx")
               and os.path.exists(os.path.join(out, "new", f)))
total = same = 0
diffs = {k: 0 for k in keys}
print("%-34s %-10s %s" % ("file", "kernel", "metrics (base -> new where they differ)"))
for n in names:
    b, w = describe("base", n), describe("new", n)
    for k in sorted(set(b) | set(w)):
        total += 1
        if k not in b or k not in w:
            print("%-34s %-10s only in %s" % (n, k, "new" if k in w else "base"))
            continue
        parts, differ = [], False
        for key in keys:
            if b[k][key] == w[k][key]:
                parts.append("%s=%s" % (key, b[k][key]))
            else:
                parts.append("%s=%s->%s" % (key, b[k][key], w[k][key]))
                differ = True
                diffs[key] += 1
        same += not differ
        print("%-34s %-10s %s%s" % (n, k, "" if differ else "same: ", " ".join(parts)))
print()
print("summary: %d kernels in %d files; %d identical in every metric; differences: %s"
      % (total, len(names), same, ", ".join("%s %d" % (k, v) for k, v in diffs.items() if v) or "none"))
EOF
echo "(PTX and ptxas logs in $OUT)"
exit $status
