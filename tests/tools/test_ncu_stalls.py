#!/usr/bin/env python3
"""scripts/ncu_stalls.py on a hand-written export of Nsight Compute's source page: the totals,
the stall reasons' shares, the groups by executions and the top instructions are the values
computed by hand below (also with a byte-order mark and CRLF line ends); --kernel picks a kernel; a file that is not such an export, a missing
file and a kernel that is not there are errors (exit 1) that say what is wrong; a bad option
is a usage error (exit 2).

    test_ncu_stalls.py SOURCE_ROOT
"""
import os
import subprocess
import sys
import tempfile

from report import report

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)",'
          '"Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed",'
          '"stall_long_sb","stall_wait","stall_barrier","stall_long_sb (Not Issued)"')
# kernel k: 100 samples; long_sb 6 + 40 = 46, barrier 30, wait 4 + 20 = 24; executions 64
# (three instructions, 40 samples) and 4096 (one, 60 samples)
K = ['"Kernel Name","k",', HEADER,
     '"0x7f0000001000","LDG.E R2, [R4.64]","10","8","10","64","6","4","0","5"',
     '"0x7f0000001010","BAR.SYNC 0x0","30","30","30","64","0","0","30","0"',
     '"0x7f0000001020","FFMA R1, R2, R3, R1","60","50","60","4096","40","20","0","35"',
     '"0x7f0000001030","EXIT","0","0","0","64","0","0","0","0"']
# kernel other: 8 samples, all wait, on one instruction run 2 times
OTHER = ['"Kernel Name","other",', HEADER,
         '"0x10","IADD3 R1, R1, 0x1, RZ","8","8","8","2","0","8","0","0"']


def run(root, text, *args, bom=False):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.csv")
        if text is not None:
            with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
                f.write("\r\n".join(text) + "\r\n" if bom else "\n".join(text) + "\n")
        return subprocess.run([sys.executable, f"{root}/scripts/ncu_stalls.py", path, *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def main():
    root = sys.argv[1]
    failures = []

    def expect(name, r, code, lines=(), err=""):
        if r.returncode != code:
            failures.append(f"{name}: exit {r.returncode}, expected {code}: {r.stderr.strip()}")
            return
        out = [" ".join(l.split()) for l in r.stdout.splitlines()]
        for want in lines:
            if " ".join(want.split()) not in out:
                failures.append(f"{name}: no line {want!r} in:\n" + r.stdout)
        if err and err not in r.stderr:
            failures.append(f"{name}: stderr {r.stderr.strip()!r} lacks {err!r}")

    expect("one kernel", run(root, K), 0, [
        "kernel k: 100 samples over 4 instructions",
        "stall reasons: long_sb 46.0 %, barrier 30.0 %, wait 24.0 %",
        "4,096 1 60 60.0%",
        "64 3 40 40.0%",
        "0x00020 4,096 60 60.0% long_sb:40 wait:20 FFMA R1, R2, R3, R1",
        "0x00010 64 30 30.0% barrier:30 BAR.SYNC 0x0",
        "0x00000 64 10 10.0% long_sb:6 wait:4 LDG.E R2, [R4.64]"])
    expect("byte-order mark, CRLF", run(root, K, bom=True), 0,
           ["kernel k: 100 samples over 4 instructions"])
    r = run(root, K, "--top", "1")
    if "BAR.SYNC" in r.stdout or "FFMA" not in r.stdout:
        failures.append("--top 1: expected only the FFMA line:\n" + r.stdout)
    if "EXIT" in run(root, K).stdout:
        failures.append("an instruction without samples is listed")
    both = K + [""] + OTHER
    expect("two kernels", run(root, both), 0, [
        "kernel k: 100 samples over 4 instructions",
        "kernel other: 8 samples over 1 instructions", "stall reasons: wait 100.0 %"])
    r = run(root, both, "--kernel", "oth")
    expect("--kernel", r, 0, ["kernel other: 8 samples over 1 instructions"])
    if "kernel k:" in r.stdout:
        failures.append("--kernel oth also printed kernel k")
    expect("no such kernel", run(root, both, "--kernel", "zz"), 1,
           err="no kernel matches 'zz' (the file has 'k', 'other')")
    expect("missing column", run(root, [K[0], K[1].replace('"Instructions Executed",', '')]
                                 + K[2:]), 1,
           err="the header has no column 'Instructions Executed'")
    expect("not a number", run(root, K[:3] + [K[3].replace('"30","30","30"', '"x","30","30"')]),
           1, err=":4: 'x' is not a number")
    expect("not an export", run(root, ["hello,world"]), 1, err="expected the header row")
    expect("empty", run(root, []), 1, err="no kernel")
    expect("missing file", run(root, None), 1, err="No such file or directory")
    expect("bad option", run(root, K, "--top", "-1"), 2, err="must not be negative")
    return report(failures)


if __name__ == "__main__":
    sys.exit(main())
