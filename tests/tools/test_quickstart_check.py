#!/usr/bin/env python3
"""The quick start's verdict is a real check: the paper's matmul at M = N = K = 32 run on the CPU
interpreter exactly as scripts/quickstart.sh runs it, then scripts/quickstart_check.py must say
"C is right"; with one element of C changed, or A and C from different seeds, it must say
"C is WRONG" and exit 1.

    test_quickstart_check.py TILUS_ASM VM_RUN SOURCE_ROOT
"""
import os
import sys
import tempfile

from report import report, run


def main():
    asm, vm_run, root = sys.argv[1:4]
    check = os.path.join(root, "scripts", "quickstart_check.py")
    failures = []
    with tempfile.TemporaryDirectory() as out:
        p = lambda name: os.path.join(out, name)  # noqa: E731
        steps = [
            [asm, os.path.join(root, "programs", "paper_matmul_f16_i6.tasm"), "-D", "M=32", "-D",
             "N=32", "-D", "K=32", "-o", p("paper.tbc")],
            [vm_run, p("paper.tbc"), "--kernel", "transform_b", "--device", "cpu", "--arg",
             "b_ptr=rand:1", "--arg", "transformed_b_ptr=zeros", "--save", "b_ptr=" + p("b.npy"),
             "--save", "transformed_b_ptr=" + p("tb.npy")],
            [vm_run, p("paper.tbc"), "--kernel", "matmul", "--device", "cpu", "--arg",
             "a_ptr=rand:2", "--arg", "transformed_b_ptr=@" + p("tb.npy"), "--arg",
             "c_ptr=zeros", "--save", "a_ptr=" + p("a.npy"), "--save", "c_ptr=" + p("c.npy")],
            [vm_run, p("paper.tbc"), "--kernel", "matmul", "--device", "cpu", "--arg",
             "a_ptr=rand:3", "--arg", "transformed_b_ptr=@" + p("tb.npy"), "--arg",
             "c_ptr=zeros", "--save", "c_ptr=" + p("c_other_seed.npy")],
        ]
        for step in steps:
            rc, text = run(step)
            if rc != 0:
                print(f"FAILED: {' '.join(step)}\n{text}")
                return 1
        args = ["32", "32", "32"]
        rc, text = run([sys.executable, check, p("a.npy"), p("b.npy"), p("c.npy")] + args)
        print(text.strip())
        if rc != 0 or "C is right: all 1024 elements" not in text:
            failures.append("the correct C was not called right")
        with open(p("c.npy"), "rb") as f:
            data = bytearray(f.read())
        data[-2 * 8 + 1] ^= 0x40  # an exponent bit of element 1016 (f16, little-endian)
        with open(p("c_bad.npy"), "wb") as f:
            f.write(data)
        for bad, what in (("c_bad.npy", "one element changed"),
                          ("c_other_seed.npy", "C of another A")):
            rc, text = run([sys.executable, check, p("a.npy"), p("b.npy"), p(bad)] + args)
            print(text.strip())
            if rc != 1 or "C is WRONG" not in text:
                failures.append(f"{what}: not called wrong (exit {rc})")
        rc, text = run([sys.executable, check, p("a.npy"), p("b.npy"), p("missing.npy")] + args)
        if rc != 2:
            failures.append(f"a missing file: exit {rc}, expected 2")
    return report(failures)


if __name__ == "__main__":
    sys.exit(main())
