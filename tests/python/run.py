"""Run stager's Python tests (tests/python/test_*.py) with Debian's python3
and print TAP for tests/run.sh: "ok N name", "not ok N name" with the
failure as comments.  Arguments, if any, are the test modules to run.

    PYTHONPATH=build/python STAGER=build/stager /usr/bin/python3 tests/python/run.py
"""
import os
import sys
import time
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)


class Tap(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0
        self.t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def _line(self, test, ok, detail=None, skip=None):
        self.n += 1
        ms = int((time.monotonic() - self.t0) * 1000)
        name = "%s: %s" % (test.__class__.__module__, test.shortDescription() or test._testMethodName)
        if skip is not None:
            print("ok %d %s # skip %s" % (self.n, name, skip), flush=True)
            return
        print("%s %d %s in %dms" % ("ok" if ok else "not ok", self.n, name, ms), flush=True)
        if detail:
            for line in detail.rstrip().splitlines():
                print("# " + line, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(test, True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(test, False, self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._line(test, False, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(test, True, skip=reason)


def main():
    loader = unittest.TestLoader()
    names = sys.argv[1:] or sorted(f[:-3] for f in os.listdir(here)
                                   if f.startswith("test_") and f.endswith(".py"))
    suite = unittest.TestSuite(loader.loadTestsFromName(n) for n in names)
    print("1..%d" % suite.countTestCases(), flush=True)
    result = Tap()
    suite.run(result)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
