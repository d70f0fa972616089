#!/usr/bin/env python3
"""Runs every test registered with meson in a build directory and prints one summary line.

Each test executable is a doctest runner; its "[doctest] test cases:" line gives the counts (the
Python tests' runner, tests/python/run.py, prints the same line as "[python] test cases:"), and
its "skipped: <case>: <reason>" lines (tests/skip_listener.h) are repeated under its line here.
Other tests count as one case each, passed or failed by exit status (77, meson's skip status,
counts as skipped). The last line printed is "N passed, N failed, N skipped" over all test
cases.
"""
import json
import os
import re
import subprocess
import sys
import time

DOCTEST = re.compile(
    r"\[(?:doctest|python)\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped")


def main() -> int:
    build_dir = sys.argv[1] if len(sys.argv) > 1 else "build"
    only = set(sys.argv[2:])
    tests = json.loads(subprocess.check_output(["meson", "introspect", "--tests", build_dir]))
    passed = failed = skipped = 0
    broken = []
    for t in tests:
        if only and t["name"] not in only:
            continue
        start = time.monotonic()
        env = dict(os.environ, **(t.get("env") or {}))
        proc = subprocess.run(t["cmd"], cwd=t.get("workdir") or build_dir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=max(900, 10 * (t.get("timeout") or 0)))
        elapsed = time.monotonic() - start
        out = proc.stdout
        m = None
        for m in DOCTEST.finditer(out):
            pass
        if m:
            p, f, s = int(m.group(2)), int(m.group(3)), int(m.group(4))
        elif proc.returncode == 77:
            p, f, s = 0, 0, 1
        else:
            p, f, s = (1, 0, 0) if proc.returncode == 0 else (0, 1, 0)
        ok = proc.returncode == 0 or (proc.returncode == 77 and not m)
        if not ok and f == 0:
            f = 1  # crashed or failed outside a test case
        passed, failed, skipped = passed + p, failed + f, skipped + s
        status = "ok" if ok else "FAIL"
        print(f"{t['name']:<12} {status:<4} {p} passed, {f} failed, {s} skipped  ({elapsed:.1f}s)",
              flush=True)
        if not ok:
            broken.append(t["name"])
            print(out[-20000:], flush=True)
        elif s:
            reasons = [line for line in out.splitlines() if line.startswith("skipped: ")]
            if proc.returncode == 77 and not m:
                reasons = reasons or ["skipped: " + (out.strip().splitlines() or ["(no reason given)"])[-1]]
            for line in reasons:
                print("  " + line)
            if len(reasons) < s:
                print(f"  ({s - len(reasons)} skipped without a reason printed)")
    if broken:
        print("failing: " + ", ".join(broken))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
