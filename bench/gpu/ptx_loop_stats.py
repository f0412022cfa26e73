#!/usr/bin/env python3
"""bench/gpu/ptx_loop_stats.py - what the k loop of a tensor-core kernel
executes per iteration, read from its PTX (no GPU needed).

    python3 bench/gpu/ptx_loop_stats.py FILE.ptx [ENTRY]

For each .entry (or ENTRY only), finds the innermost loop that holds
mma.sync (the instructions from the target label of a backward branch to
that branch, the refill block of a cp.async pipeline included) and
prints, per iteration: mma, ldmatrix, cp.async, barriers and the other
instructions, split into 64-bit integer ones (.s64/.u64/.b64: two SASS
instructions each for add/shift/logic on the GPU), 32-bit ones and the
rest, with the count of non-mma instructions per mma. Used to check that
the hot loop has no avoidable 64-bit address arithmetic
(docs/codegen.md "Tensor-core matmul").
"""
import re
import sys


def entries(text):
    """(name, body lines) of every .entry."""
    out = []
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", text):
        start = text.index("{", text.index(")", m.end()))
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out.append((m.group(1), text[start + 1:i]))
    return out


def instructions(body):
    """[(label or None, instruction text)] in order; multi-line
    instructions joined, comments and declarations dropped."""
    items, cur = [], ""
    for raw in body.splitlines():
        line = raw.split("//")[0].strip()
        if not line or line.startswith(".reg") or line.startswith(".local") \
                or line.startswith(".shared") or line in ("{", "}"):
            continue
        if re.match(r"^\$?\w+:$", line):
            items.append((line[:-1], None))
            continue
        cur = (cur + " " + line).strip()
        if cur.endswith(";"):
            items.append((None, cur))
            cur = ""
    return items


def opcode(ins):
    ins = re.sub(r"^@!?%\w+\s+", "", ins)
    return ins.split()[0].rstrip(";")


def loop_of(items):
    """Index range [lo, hi] of the innermost backward-branch loop holding
    an mma.sync, or None."""
    labels = {lab: i for i, (lab, ins) in enumerate(items) if lab}
    # Per loop header (the target of backward branches): up to its last
    # backward branch, so that blocks laid out after the header's first
    # back edge (a conditional refill) count too.
    loops = {}
    for i, (lab, ins) in enumerate(items):
        if not ins or not opcode(ins).startswith("bra"):
            continue
        target = ins.split()[-1].rstrip(";")
        lo = labels.get(target)
        if lo is not None and lo <= i:
            loops[lo] = max(loops.get(lo, i), i)
    # Ranges that cross (a loop whose blocks LLVM laid out on both sides
    # of its header: back edges to two labels) are one loop; nested ones
    # stay apart.
    ranges = sorted(loops.items())
    merged = True
    while merged:
        merged = False
        for i in range(len(ranges)):
            for j in range(i + 1, len(ranges)):
                (a, b), (c, d) = ranges[i], ranges[j]
                if a < c <= b < d:
                    ranges[i] = (a, d)
                    del ranges[j]
                    merged = True
                    break
            if merged:
                break
    best = None
    for lo, hi in ranges:
        if any(x and opcode(x).startswith("mma.sync")
               for _, x in items[lo:hi + 1]):
            if best is None or hi - lo < best[1] - best[0]:
                best = (lo, hi)
    return best


def stats(items, lo, hi):
    c = {"mma": 0, "ldmatrix": 0, "cp.async": 0, "bar/wait/commit": 0,
         "int64": 0, "int32": 0, "other": 0}
    ops = {}
    for _, ins in items[lo:hi + 1]:
        if not ins:
            continue
        op = opcode(ins)
        ops[op] = ops.get(op, 0) + 1
        if op.startswith("mma.sync"):
            c["mma"] += 1
        elif op.startswith("ldmatrix"):
            c["ldmatrix"] += 1
        elif op.startswith("cp.async.cg") or op.startswith("cp.async.ca"):
            c["cp.async"] += 1
        elif op.startswith("bar") or op.startswith("cp.async"):
            c["bar/wait/commit"] += 1
        elif re.search(r"\.(s64|u64|b64)$", op) and not op.startswith("mov"):
            c["int64"] += 1
        elif re.search(r"\.(s32|u32|b32)$", op) and not op.startswith("mov"):
            c["int32"] += 1
        else:
            c["other"] += 1
    return c, ops


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    want = sys.argv[2] if len(sys.argv) > 2 else None
    for name, body in entries(text):
        if want and name != want:
            continue
        items = instructions(body)
        rng = loop_of(items)
        if not rng:
            print(f"{name}: no loop with mma.sync")
            continue
        c, ops = stats(items, *rng)
        rest = sum(v for k, v in c.items() if k != "mma")
        overhead = c["int64"] + c["int32"] + c["other"]
        print(f"{name}: k loop: {c['mma']} mma, {c['ldmatrix']} ldmatrix, "
              f"{c['cp.async']} cp.async, {c['bar/wait/commit']} "
              f"bar/wait/commit, {c['int64']} 64-bit int, {c['int32']} "
              f"32-bit int, {c['other']} other; "
              f"{rest / max(c['mma'], 1):.2f} non-mma instructions per mma "
              f"({overhead / max(c['mma'], 1):.2f} address/control)")
        print("  " + ", ".join(f"{k} {v}" for k, v in
                               sorted(ops.items(), key=lambda kv: -kv[1])
                               if not k.startswith("mma")))


if __name__ == "__main__":
    main()
