#!/usr/bin/env python3
"""Runs the Python test suite of the fuse package (tests/python/test_*.py,
unittest) against a build:

    FZ_BUILD_DIR=build /usr/bin/python3 tests/python/run.py [-v] [PATTERN]

and ends with one line that scripts/test.sh counts:

    python tests: N passed, N failed, N skipped

(a test that errors counts as failed). Exits 1 when any failed. Use
Debian's python3 (python3-numpy, and python3-torch for test_torch.py's
tests, which are skipped without it).
"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class TimedResult(unittest.TextTestResult):
    """Records each test's time, for --slowest."""

    def startTest(self, test):
        self._t0 = time.perf_counter()
        super().startTest(test)

    def stopTest(self, test):
        self.times.append((time.perf_counter() - self._t0, test.id()))
        super().stopTest(test)


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if not a.startswith("-")]
    pattern = args[0] if args else "test_*.py"
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern)
    TimedResult.times = []
    runner = unittest.TextTestRunner(verbosity=2 if verbose else 1,
                                     resultclass=TimedResult, stream=sys.stdout)
    t0 = time.perf_counter()
    result = runner.run(suite)
    took = time.perf_counter() - t0
    failed = len(result.failures) + len(result.errors) + len(
        result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    slow = sorted(TimedResult.times, reverse=True)[:5]
    print("slowest: " + ", ".join("%s %.1fs" % (name.split(".", 1)[1], t)
                                  for t, name in slow))
    print("python tests: %d passed, %d failed, %d skipped (%.1fs)"
          % (passed, failed, skipped, took))
    return 1 if failed or result.testsRun == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
