#!/usr/bin/env python3
"""`tilus-asm --emit ptx` output is PTX that NVIDIA's assembler accepts: every program (`def`) of
every module of programs/*.tasm, for --arch sm_80 and --arch sm_90a, emitted one at a time
(--kernel) with -o and assembled by `ptxas -arch=ARCH`. Needs no GPU. Exits 77 (skipped, with
the reason) where ptxas is missing.

    test_emit_ptxas.py TILUS_ASM SOURCE_ROOT [PTXAS]
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    tool, root = sys.argv[1], sys.argv[2]
    ptxas = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else shutil.which("ptxas")
    if not ptxas or not os.access(ptxas, os.X_OK):
        print("skipped: ptxas not found (configure with -Dcudatoolkit=DIR or put ptxas on PATH)")
        return 77
    programs = sorted(glob.glob(os.path.join(root, "programs", "*.tasm")))
    if not programs:
        print(f"FAILED: no programs in {root}/programs")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for program in programs:
            module = os.path.splitext(os.path.basename(program))[0]
            with open(program) as f:
                kernels = re.findall(r"^def\s+(\w+)", f.read(), re.MULTILINE)
            if not kernels:
                print(f"FAILED: no `def` in {program}")
                failures += 1
            for kernel, arch in [(k, a) for k in kernels for a in ("sm_80", "sm_90a")]:
                name = f"{module}:{kernel}"
                ptx = os.path.join(tmp, f"{module}.{kernel}.{arch}.ptx")
                emit = subprocess.run([tool, program, "--emit", "ptx", "--arch", arch, "--kernel",
                                       kernel, "-o", ptx],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if emit.returncode != 0:
                    print(f"FAILED: tilus-asm --emit ptx --arch {arch} {name}:\n{emit.stdout}")
                    failures += 1
                    continue
                with open(ptx) as f:
                    text = f.read()
                if f".target {arch}" not in text:
                    print(f"FAILED: {name} --arch {arch}: no '.target {arch}' in the PTX")
                    failures += 1
                asm = subprocess.run([ptxas, f"-arch={arch}", ptx, "-o", os.devnull],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if asm.returncode != 0:
                    print(f"FAILED: ptxas -arch={arch} rejects the PTX of {name}:\n{asm.stdout}")
                    failures += 1
                else:
                    print(f"ok: {name} --arch {arch}: ptxas accepts it")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
