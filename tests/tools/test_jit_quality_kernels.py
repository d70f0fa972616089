#!/usr/bin/env python3
"""scripts/jit_quality.py reads every kernel header: for each program of programs/ the kernels it
finds are those of the assembler's disassembly of that program (`tilus-asm -d`), and hand-written
headers whose grid expressions hold comparisons, parentheses and a comment, and parameters over
two lines, give the kernels and launch classes worked out by hand; a header it cannot read (a
grid over two lines) is an error, not a kernel left out.

    test_jit_quality_kernels.py TILUS_ASM SOURCE_ROOT
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

from report import report


def load_script(root):
    spec = importlib.util.spec_from_file_location(
        "jit_quality", os.path.join(root, "scripts", "jit_quality.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def disassembled_kernels(tool, path, scratch):
    """The program names in the assembler's own disassembly of the file."""
    tbc = os.path.join(scratch, "p.tbc")
    subprocess.run([tool, path, "-o", tbc], check=True, capture_output=True)
    text = subprocess.run([tool, "-d", tbc], check=True, capture_output=True, text=True).stdout
    return re.findall(r"^\s*def\s+(\w+)", text, re.M)


def main():
    tool, root = sys.argv[1], sys.argv[2]
    jq = load_script(root)
    failures = []

    with tempfile.TemporaryDirectory() as scratch:
        files = sorted(os.path.join(dp, f)
                       for dp, _, fs in os.walk(os.path.join(root, "programs"))
                       for f in fs if f.endswith(".tasm"))
        if not files:
            failures.append("no programs found under programs/")
        for path in files:
            rel = os.path.relpath(path, root)
            try:
                found = [name for name, _ in jq.kernels(path)]
            except RuntimeError as e:
                failures.append(f"{rel}: {e}")
                continue
            want = disassembled_kernels(tool, path, scratch)
            if found != want:
                failures.append(f"{rel}: the script finds {found}, the disassembly has {want}")

        # Hand-written headers: the grid holds `<`, `>`, parentheses and a conditional; a
        # comment follows the colon; the second file's second program has two specialize
        # statements; the third file's parameters span two lines.
        cases = [
            ("def k<(cdiv(n, 4) if n > 8 and (m < 3) else 1)>(f16* x, i32 n, f32 s, u8* q) "
             "threads=128:  # a comment\n    pass\n",
             [("k", ["ad-a"])]),
            ("def a<(1)>(i64 m) threads=32:\n    pass\n"
             "def b<max(1, n / 2) if n >= 2 else 1>(f32* y, i32 n) threads=64:\n"
             "    specialize w = n > 4\n    specialize v = n < 100\n    pass\n",
             [("a", ["d"]), ("b", ["ad/TT", "ad/FT", "ad/TF", "ad/FF"])]),
            # parameters over two lines (the assembler accepts them)
            ("def k<(1)>(f16* x,\n      i32 n) threads=32:\n    pass\n", [("k", ["ad"])]),
        ]
        for i, (text, want) in enumerate(cases):
            path = os.path.join(scratch, f"case{i}.tasm")
            with open(path, "w") as f:
                f.write(text)
            got = jq.kernels(path)
            if got != want:
                failures.append(f"hand-written case {i}: {got}, expected {want}")

        # A grid over two lines (the assembler accepts it too) is not read: an error that names
        # the file, never a kernel left out without a word.
        path = os.path.join(scratch, "grid.tasm")
        with open(path, "w") as f:
            f.write("def k<(1 +\n  1)>(f16* x, i32 n) threads=32:\n    pass\n")
        try:
            got = jq.kernels(path)
            failures.append(f"a grid over two lines: {got}, expected an error")
        except RuntimeError as e:
            if "grid.tasm" not in str(e) or "cannot read" not in str(e):
                failures.append(f"a grid over two lines: the error does not say where: {e}")

    return report(failures)


if __name__ == "__main__":
    sys.exit(main())
