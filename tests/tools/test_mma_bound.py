#!/usr/bin/env python3
"""scripts/mma_bound.tasm (the decode loop's mmas alone, docs/quant.md) computes what it says on
the CPU interpreter: with BLOCKS blocks of STEPS steps, C^T has BLOCKS * 16 * AN rows of TM
values, every one of them STEPS * 16 * KS (ones times ones), for the 16-row and the 8-row shape.

    test_mma_bound.py TILUS_ASM VM_RUN SOURCE_ROOT
"""
import os
import struct
import sys
import tempfile

from report import report, run

# the quick start's reader of .npy files (scripts/quickstart_check.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from quickstart_check import read_npy  # noqa: E402


def main():
    asm, vm_run, root = sys.argv[1:4]
    program = os.path.join(root, "scripts", "mma_bound.tasm")
    failures = []
    with tempfile.TemporaryDirectory() as out:
        # (defines, rows * columns of C^T, the value of every element)
        cases = [
            ({"BLOCKS": "3", "STEPS": "2"}, 3 * 32 * 16, 2 * 16 * 8),
            ({"BLOCKS": "2", "STEPS": "5", "TM": "8"}, 2 * 32 * 8, 5 * 16 * 8),
            ({"BLOCKS": "2", "STEPS": "3", "AN": "1", "KS": "4"}, 2 * 16 * 16, 3 * 16 * 4),
        ]
        for defines, count, value in cases:
            name = " ".join(f"{k}={v}" for k, v in defines.items())
            tbc = os.path.join(out, "mb.tbc")
            npy = os.path.join(out, "c.npy")
            cmd = [asm, program, "-o", tbc]
            for k, v in defines.items():
                cmd += ["-D", f"{k}={v}"]
            rc, text = run(cmd)
            if rc != 0:
                failures.append(f"{name}: tilus-asm failed: {text.strip()}")
                continue
            rc, text = run([vm_run, tbc, "--device", "cpu", "--save", "c_ptr=" + npy])
            if rc != 0:
                failures.append(f"{name}: vm-run failed: {text.strip()}")
                continue
            descr, shape, data = read_npy(npy)
            if descr != "<f4":
                failures.append(f"{name}: dtype {descr}, expected <f4")
                continue
            values = list(struct.unpack(f"<{len(data) // 4}f", data))
            if len(values) != count:
                failures.append(f"{name}: {len(values)} elements, expected {count} ({shape})")
            wrong = [v for v in values if v != value]
            if wrong:
                failures.append(f"{name}: {len(wrong)} elements not {value}, e.g. {wrong[0]}")
            else:
                print(f"ok: {name}: {len(values)} elements, all {value}")
    return report(failures)


if __name__ == "__main__":
    sys.exit(main())
