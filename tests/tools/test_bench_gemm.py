#!/usr/bin/env python3
"""scripts/bench_gemm.py's shapes without a GPU (--dry-run): every square size of --sizes and every
MxNxK of --shapes becomes one vm-run command per case with those m, n and k, and a malformed or
missing shape is a usage error (exit status 2) that names it.

    test_bench_gemm.py BUILD_ROOT SOURCE_ROOT
"""
import re
import subprocess
import sys

from report import report


def run(build, root, *extra):
    return subprocess.run([sys.executable, f"{root}/scripts/bench_gemm.py", "--build", build,
                           "--only", "wgmma_ws", "--dry-run", *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def main():
    build, root = sys.argv[1], sys.argv[2]
    failures = []
    r = run(build, root, "--sizes", "64", "--shapes", "128x256x512,7X16x33")
    if r.returncode != 0:
        failures.append(f"dry run: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    triples = {}
    for line in r.stdout.splitlines():
        if "vm-run" not in line:
            continue
        at = re.search(r"wgmma_ws_(\w+?)_", line).group(1)
        m = re.search(r"--arg m=(\d+) --arg n=(\d+) --arg k=(\d+)", line)
        triples.setdefault(at, []).append(tuple(int(x) for x in m.groups()) if m else None)
    want = [(64, 64, 64), (128, 256, 512), (7, 16, 33)]
    for at in ("f16", "bf16"):
        if triples.get(at) != want:
            failures.append(f"{at}: vm-run shapes {triples.get(at)}, expected {want}")
    for extra, message in ((["--shapes", "128x8"], "--shapes: '128x8' is not MxNxK"),
                           (["--shapes", "0x8x8"], "--shapes: '0x8x8' is not MxNxK"),
                           (["--sizes", "40a"], "--sizes: '40a' is not a positive integer"),
                           (["--sizes", ""], "no shapes: give --sizes or --shapes")):
        r = run(build, root, *extra)
        if r.returncode != 2 or message not in r.stderr:
            failures.append(f"{extra}: exit {r.returncode}, stderr {r.stderr.strip()[-200:]!r}; "
                            f"expected exit 2 and {message!r}")
    return report(failures)


if __name__ == "__main__":
    sys.exit(main())
