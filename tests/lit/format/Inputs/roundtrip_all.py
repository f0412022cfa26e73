#!/usr/bin/env python3
"""Round-trips every lit input: for each .fuse/.mlir file under the lit
tree (split at `// -----` like fuse-opt --split-input-file), every chunk
that parses and verifies with --allow-unregistered-dialect is printed,
re-parsed and printed again, in the custom and in the generic form; the
two prints must be identical. Chunks that do not parse (the malformed
inputs of tests/lit/invalid, expected-error cases) are skipped and
counted. Prints one line per mismatch and a summary; exits 1 on any
mismatch or when fewer than --min chunks round-tripped.

usage: roundtrip_all.py FUSE_OPT LIT_ROOT [--min N]
"""
import os
import subprocess
import sys


def run(tool, args, text):
    p = subprocess.run([tool, "--allow-unregistered-dialect", "-"] + args,
                       input=text.encode("utf-8", "surrogateescape"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    return p.returncode, p.stdout


def main():
    tool, root = sys.argv[1], sys.argv[2]
    minimum = int(sys.argv[sys.argv.index("--min") + 1]) \
        if "--min" in sys.argv else 1
    checked = skipped = 0
    bad = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "Output")
        for name in sorted(files):
            if not name.endswith((".fuse", ".mlir")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
            for i, chunk in enumerate(text.split("// -----")):
                rc, first = run(tool, [], chunk)
                if rc != 0 or not first.strip():
                    skipped += 1
                    continue
                for form in ([], ["--print-op-generic"]):
                    rc1, once = run(tool, form, first.decode())
                    rc2, twice = run(tool, form, once.decode())
                    if rc1 or rc2 or once != twice:
                        bad.append("%s (chunk %d%s)" % (
                            os.path.relpath(path, root), i,
                            ", generic" if form else ""))
                checked += 1
    for b in bad:
        print("MISMATCH", b)
    print("round trip: %d chunks checked, %d mismatches, %d skipped "
          "(do not parse alone)" % (checked, len(bad), skipped))
    return 1 if bad or checked < minimum else 0


if __name__ == "__main__":
    sys.exit(main())
