#!/usr/bin/env python3
"""Writes docs/conformance.md from a run_conformance log.

    python3 tests/conformance/make_doc.py LOG [OUT]

LOG is the output of `run_conformance` (without --quiet), e.g.
BUILD/test-logs/conformance.log as tests/conformance/run.sh leaves it;
OUT defaults to docs/conformance.md beside this repository's tests.
"""
import collections
import os
import re
import sys


def main():
    log = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        root, "docs", "conformance.md")
    passed, specialized, failed, skipped = [], [], [], []
    summary = None
    for line in open(log, encoding="utf-8"):
        line = line.rstrip("\n")
        if re.fullmatch(r"\d+ passed, \d+ failed, \d+ skipped", line):
            summary = line
        elif line.startswith("PASS "):
            m = re.fullmatch(r"PASS (\S+)(?: \((.*)\))?", line)
            passed.append(m.group(1))
            if m.group(2):
                specialized.append((m.group(1), m.group(2)))
        elif line.startswith("FAIL "):
            name, _, why = line[5:].partition(": ")
            failed.append((name, why))
        elif line.startswith("SKIP "):
            name, _, why = line[5:].partition(": ")
            skipped.append((name, why))
    if summary is None:
        sys.exit("make_doc: no summary line in %s" % log)

    def reason_key(why):
        # "node 'y' (Resize): unsupported op type 'Resize'" -> the part
        # after the node, which is what tests share.
        why = re.sub(r"^node '[^']*' \([^)]*\): ", "", why)
        return re.sub(r"^graph input '[^']*': ", "graph input: ", why)

    by_reason = collections.OrderedDict()
    for name, why in sorted(skipped, key=lambda s: (reason_key(s[1]), s[0])):
        by_reason.setdefault(reason_key(why), []).append(name)
    reasons = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))

    w = []
    w.append("# ONNX backend node tests\n")
    w.append("fuse runs the ONNX backend *node* tests that Debian's "
             "`libonnx-testdata` (ONNX 1.12) installs under "
             "`/usr/share/libonnx-testdata/data/node`: each test's "
             "`model.onnx` is imported (`importers/onnx`), run on every "
             "`test_data_set_*` with the graph interpreter, and every "
             "output compared with ONNX's tolerances (rtol 1e-3, atol "
             "1e-7; dtypes and shapes exactly). A test whose model uses "
             "something the importer does not support is **skipped** with "
             "the reason, never counted as passed.\n")
    w.append("Run them with `scripts/test.sh` (part of the README's test "
             "command; a FAIL fails it), `make check-conformance` in a "
             "build folder, or directly:\n")
    w.append("```\nbuild/bin/run_conformance            # all tests\n"
             "build/bin/run_conformance --filter conv test_relu\n"
             "tests/conformance/run.sh build       # log + summary\n"
             "python3 tests/conformance/make_doc.py build/test-logs/"
             "conformance.log   # this page\n```\n")
    # The hand-written "## Devices" section (interp, cpu, cuda results and
    # how to run them) is kept from the page being replaced.
    try:
        with open(out, encoding="utf-8") as f:
            old = f.read()
        m = re.search(r"^## Devices\n.*?(?=^## )", old, re.S | re.M)
        if m:
            w.append(m.group(0).rstrip("\n") + "\n")
    except OSError:
        pass
    w.append("## Result\n")
    w.append("```\n%s\n```\n" % summary)
    w.append("%d tests in all: %d passed, %d failed, %d skipped.\n" % (
        len(passed) + len(failed) + len(skipped), len(passed), len(failed),
        len(skipped)))
    w.append("With the graph passes on (`--pipeline`), the counts are the "
             "same: `run_conformance --pipeline='builtin.module(canonicalize,"
             "recognize-composites)'` and `run_conformance "
             "--pipeline='builtin.module(graph-optimize)'` both gave 880 "
             "passed, 0 failed, 52 skipped (interpreter). There the "
             "softmax, log_softmax and layer_normalization `_expanded` tests "
             "run as the single composite op, with no reduction left "
             "(tests/lit/simplify/onnx-expanded.fuse checks that, and their "
             "38 + 28 results on the interpreter and on `--device cpu`).\n")
    if failed:
        w.append("## Failures\n")
        for name, why in failed:
            w.append("- `%s`: %s" % (name, why))
        w.append("")
    w.append("## Passed by specialization\n")
    w.append("ONNX lets shape-like operands (a reshape's shape, a "
             "reduction's axes, slice bounds, resize scales, ...) be graph "
             "inputs; fuse compiles static shapes, so the importer needs "
             "them at import time. When a model fails to import only "
             "because such an input is not constant, the runner imports it "
             "again with every input offered with its value and "
             "`FzOnnxInputValue.ifNeeded` (docs/onnx.md, Shapes): the "
             "importer binds as constants exactly the inputs a shape "
             "operand is computed from, which is what a static compiler "
             "does with compile-time operands (fuse-run does the same with "
             "its inputs). Ops whose operand changes no shape take it at run "
             "time instead (Trilu's k, CumSum's axis, an If whose branches "
             "have the same types), so nothing is bound for them. These %d "
             "tests passed that way (they are included in the passed "
             "count):\n" % len(specialized))
    for name, note in specialized:
        w.append("- `%s` (%s)" % (name, note.replace("specialized: ", "")))
    w.append("")
    w.append("## Skipped tests, by reason\n")
    w.append("| tests | reason |\n|---:|---|")
    for why, names in reasons:
        w.append("| %d | %s |" % (len(names), why.replace("|", "\\|")))
    w.append("")
    for why, names in reasons:
        w.append("### %s (%d)\n" % (why, len(names)))
        w.append(", ".join("`%s`" % n for n in names) + "\n")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(w))
    print("wrote %s (%s)" % (out, summary))


if __name__ == "__main__":
    main()
