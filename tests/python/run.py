#!/usr/bin/env python3
"""Runs the tilusvm Python package's tests (tests/python/test_*.py, unittest) and prints, last,
"[python] test cases: N | P passed | F failed | S skipped" (the line tests/run_tests.py
counts), each skipped case before it as "skipped: <case>: <reason>".

    PYTHONPATH=python TILUSVM_LIBRARY=build/vm/libtilusvm.so python3 tests/python/run.py [MODULE...]

Environment: TILUSVM_LIBRARY (the library under test), TILUS_ASM (tilus-asm, for the .tbc
cases; skipped without it).
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def main():
    sys.path.insert(0, HERE)
    names = sys.argv[1:] or sorted(f[:-3] for f in os.listdir(HERE)
                                   if f.startswith("test_") and f.endswith(".py"))
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result)
    result = runner.run(suite)
    for test, reason in result.skipped:
        print(f"skipped: {test.id()}: {reason}")
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    total = result.passed + failed + len(result.skipped) + len(result.expectedFailures)
    print(f"[python] test cases: {total} | {result.passed + len(result.expectedFailures)} passed"
          f" | {failed} failed | {len(result.skipped)} skipped", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
