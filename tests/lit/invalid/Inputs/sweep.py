#!/usr/bin/env python3
"""Robustness sweeps of fuse-opt over many malformed inputs (used by the
lit tests invalid-truncated-sweep.fuse and invalid-fuzz.fuse).

  sweep.py truncate FUSE_OPT VALID_FILE
      runs fuse-opt on every prefix of VALID_FILE (one byte, two bytes,
      ...). VALID_FILE must end with the '}' closing its one top-level
      module, so every prefix that starts that module but stops short of
      its brace is incomplete and must be rejected (shorter prefixes, such
      as a few complete alias definitions, may be valid).
  sweep.py fuzz FUSE_OPT VALID_FILE SEED COUNT
      runs fuse-opt on COUNT inputs derived from VALID_FILE by random
      mutations (byte flips, deletions, insertions of punctuation, control
      bytes and invalid UTF-8, duplicated and swapped spans), plus random
      binary blobs. Such an input may happen to be valid.

Every run must end with status 0 or 1 (never a signal, a sanitizer report
or a hang); a run with status 1 must print at least one located error
(`FILE:LINE:COL: error: ...`) to stderr. On success prints one summary
line and exits 0; otherwise prints each problem (and keeps the input that
caused it next to a temporary folder named in the message) and exits 1.
"""

import os
import random
import re
import subprocess
import sys
import tempfile

LOCATED = re.compile(rb"^[^\n]*:\d+:\d+: error: ", re.M)
SANITIZER = re.compile(rb"Sanitizer|runtime error:")
TIMEOUT_S = 20


def run(fuse_opt, data, work, tag):
    """Runs fuse-opt on data; returns (problem or None, status)."""
    path = os.path.join(work, "input.fuse")
    with open(path, "wb") as f:
        f.write(data)
    try:
        p = subprocess.run([fuse_opt, "--allow-unregistered-dialect", path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "%s: timed out after %ds" % (tag, TIMEOUT_S), None
    err = p.stderr
    if p.returncode < 0:
        return "%s: killed by signal %d" % (tag, -p.returncode), None
    if SANITIZER.search(err):
        return "%s: sanitizer report:\n%s" % (tag, err[-2000:].decode(
            "utf-8", "replace")), None
    if p.returncode not in (0, 1):
        return "%s: exit status %d" % (tag, p.returncode), None
    if p.returncode == 1 and not LOCATED.search(err):
        return "%s: rejected without a located error:\n%s" % (
            tag, err[:500].decode("utf-8", "replace")), None
    return None, p.returncode


def keep(data, tag):
    fd, path = tempfile.mkstemp(prefix="fuse-sweep-", suffix=".fuse")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return "  input kept in %s (%s)" % (path, tag)


def truncate(fuse_opt, valid):
    data = open(valid, "rb").read()
    last = data.rindex(b"}")
    start = data.index(b"module")
    problems = []
    rejected = 0
    with tempfile.TemporaryDirectory() as work:
        problem, status = run(fuse_opt, data, work, "whole file")
        if problem or status != 0:
            print("the valid input is not accepted: %s" % problem)
            return 1
        for n in range(1, last + 1):
            prefix = data[:n]
            tag = "prefix of %d bytes" % n
            problem, status = run(fuse_opt, prefix, work, tag)
            if problem is None and status == 0 and n > start:
                problem = "%s: accepted, but the module is not closed" % tag
            if problem:
                problems.append(problem + "\n" + keep(prefix, tag))
            elif status == 1:
                rejected += 1
    for p in problems:
        print(p)
    if problems:
        return 1
    print("truncate: %d prefixes, %d rejected with a located error (every "
          "one inside the module), none crashed" % (last, rejected))
    return 0


PUNCT = [b"{", b"}", b"(", b")", b"[", b"]", b"<", b">", b"\"", b"%",
         b"^", b"#", b"!", b"@", b":", b",", b"=", b"->", b"loc(", b"0x",
         b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\n", b"\\",
         b"tensor<", b"dense<", b"99999999999999999999", b"-1", b"?x"]


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        if not data:
            data = bytearray(b"x")
        kind = rng.randrange(6)
        i = rng.randrange(len(data))
        if kind == 0:
            data[i] = rng.randrange(256)
        elif kind == 1:
            del data[i:i + rng.randrange(1, 20)]
        elif kind == 2:
            data[i:i] = rng.choice(PUNCT)
        elif kind == 3:
            j = rng.randrange(len(data))
            a, b = min(i, j), max(i, j)
            data[i:i] = data[a:b][:200]
        elif kind == 4:
            j = rng.randrange(len(data))
            a, b = min(i, j), max(i, j)
            data[a:b] = data[a:b][::-1]
        else:
            data[i:i] = bytes(rng.randrange(256) for _ in range(8))
    return bytes(data)


def fuzz(fuse_opt, valid, seed, count):
    data = open(valid, "rb").read()
    rng = random.Random(seed)
    problems = []
    rejected = accepted = 0
    with tempfile.TemporaryDirectory() as work:
        for k in range(count):
            if k % 10 == 9:
                blob = bytes(rng.randrange(256)
                             for _ in range(rng.randrange(1, 3000)))
                tag = "random blob #%d (seed %d)" % (k, seed)
            else:
                blob = mutate(rng, data)
                tag = "mutation #%d (seed %d)" % (k, seed)
            problem, status = run(fuse_opt, blob, work, tag)
            if problem:
                problems.append(problem + "\n" + keep(blob, tag))
            elif status == 1:
                rejected += 1
            else:
                accepted += 1
    for p in problems:
        print(p)
    if problems:
        return 1
    print("fuzz: %d inputs (%d rejected with a located error, %d valid), "
          "none crashed" % (count, rejected, accepted))
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "truncate":
        return truncate(argv[2], argv[3])
    if len(argv) == 6 and argv[1] == "fuzz":
        return fuzz(argv[2], argv[3], int(argv[4]), int(argv[5]))
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
