#!/usr/bin/env python3
"""TILUSVM_JIT_TIMING (docs/jit.md, "JIT time"): with 1, one line per compilation with the thread
CPU time of each phase; with 2, also the IR that the program's instructions lowered to, by
opcode and the largest instructions, whose numbers add up to the total. TILUSVM_JIT_CODEGEN:
`default` is the JIT's own level, `none` changes the PTX, anything else is a usage error.
TILUSVM_JIT_HOLD=0: no held registers (docs/jit.md), and the compiler version of the kernel
cache's key (`tilusvm-cache --version`, beside tilus-asm) says so. TILUSVM_JIT_PAIRS=0: f32
into f16 slot by slot instead of two at a time (docs/jit.md, "Conversions"), likewise in the key.
TILUSVM_JIT_BANKS=1: a line per plain shared access with its bank conflicts, the PTX unchanged.

Usage: test_jit_timing.py TILUS_ASM"""
import os
import re
import subprocess
import sys
import tempfile

PROGRAM = """def copy<cdiv(n, 1024)>(f16* x_ptr, f16* y_ptr, i32 n) threads=32:
    bi = BlockIndices()
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(32).local(32), offset=[bi * 1024:])
    StoreGlobal(Add(x, x), ViewGlobal(y_ptr, shape=[n]), offset=[bi * 1024:])
"""
PHASES = re.compile(r"^jit: copy sm_90: setup [\d.]+ ms, IR [\d.]+ ms, optimisation [\d.]+ ms, "
                    r"PTX [\d.]+ ms, total [\d.]+ ms \(thread CPU time\)$")
# a loop that dequantises u4 pairs in place: its magic numbers are held in registers
HOLD_PROGRAM = """def dq<1>(u32* a_ptr, f16* h_ptr) threads=32:
    g = ViewGlobal(h_ptr, shape=[4, 32, 4, 2, 4])
    for i in range(4):
        w = LoadGlobal(ViewGlobal(a_ptr, shape=[4, 32, 4]), layout=spatial(32, 1).local(1, 4), offset=[i, 0:, 0:])
        a = View(w, dtype=u4, layout=spatial(32, 1, 1, 1).local(1, 4, 2, 4))
        p = ConvertLayout(a, layout=spatial(32, 1, 1, 1).local(1, 4, 1, 4).local(1, 1, 2, 1))
        StoreGlobal(Cast(p, f16), g, offset=[i, 0:, 0:, 0:, 0:])
"""
PAIRS_PROGRAM = """def narrow<1>(f32* x_ptr, f16* h_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[128]), layout=spatial(32).local(4))
    StoreGlobal(Cast(x, f16), ViewGlobal(h_ptr, shape=[128]))
"""
# a quarter-warp on rows r and r + 4 of 64 bytes (tests/jit/test_bank_report.cpp): 8 wavefronts
# for its 16-byte loads where 4 would do
BANKS_PROGRAM = """def banks<1>(u32* p) threads=32:
    s = AllocateShared(u32, shape=[2, 4, 16])
    StoreShared(AllocateRegister(u32, layout=spatial(1, 4, 1).spatial(2, 1, 1).spatial(1, 1, 4).local(1, 1, 4)), s)
    Synchronize()
    x = LoadShared(s, layout=spatial(1, 4, 1).spatial(2, 1, 1).spatial(1, 1, 4).local(1, 1, 4))
    StoreGlobal(x, ViewGlobal(p, shape=[2, 4, 16]))
"""
BANKS = re.compile(r"^jit: banks banks: #(\d+) (StoreShared|LoadShared): 1 accesses of up to 16 "
                   r"bytes per lane, 8 wavefronts \(4 without bank conflicts\): conflicts$")
IR = re.compile(r"^jit: copy IR before optimisation: (\d+) instructions; by opcode: (.*); "
                r"largest: (.*)$")


def experiment(tool, cache_tool, d, variable, program, failures):
    """PTX of `program` and the kernel cache's compiler version with `variable` unset ("") and
    set to 0, by value; a failed run is added to failures and left out."""
    source = os.path.join(d, variable.lower() + ".tasm")
    with open(source, "w") as f:
        f.write(program)
    out = {}
    for value in ["", "0"]:
        env = dict(os.environ, **{variable: value})
        r = subprocess.run([tool, source, "--emit", "ptx"], capture_output=True, text=True,
                           env=env)
        v = subprocess.run([cache_tool, "--version"], capture_output=True, text=True, env=env)
        if r.returncode != 0 or v.returncode != 0:
            failures.append(f"{variable}={value}: {r.stderr} {v.stderr}")
            continue
        out[value] = (r.stdout, v.stdout)
    return out


def run(tool, source, level):
    env = dict(os.environ, TILUSVM_JIT_TIMING=level)
    r = subprocess.run([tool, source, "--emit", "ptx", "-o", os.devnull], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"tilus-asm failed with TILUSVM_JIT_TIMING={level}: {r.stderr}")
    return [line for line in r.stderr.splitlines() if line]


def main():
    tool = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        source = os.path.join(d, "copy.tasm")
        with open(source, "w") as f:
            f.write(PROGRAM)
        if run(tool, source, "0"):
            failures.append("TILUSVM_JIT_TIMING=0 printed something")
        one = run(tool, source, "1")
        if len(one) != 1 or not PHASES.match(one[0]):
            failures.append(f"TILUSVM_JIT_TIMING=1: {one}")
        two = run(tool, source, "2")
        if len(two) != 2 or not IR.match(two[0]) or not PHASES.match(two[1]):
            failures.append(f"TILUSVM_JIT_TIMING=2: {two}")
        else:
            total, by_opcode, largest = IR.match(two[0]).groups()
            opcodes = {}
            for item in by_opcode.split(", "):
                name, count = item.split(" ")
                opcodes[name] = int(count)
            # the program's instructions in order: BlockIndices, ViewGlobal, LoadGlobal, Add,
            # ViewGlobal, StoreGlobal (six, under the ten listed)
            if set(opcodes) != {"BlockIndices", "ViewGlobal", "LoadGlobal", "Add", "StoreGlobal"}:
                failures.append(f"opcodes {sorted(opcodes)}")
            if sum(opcodes.values()) != int(total):
                failures.append(f"by opcode {opcodes} does not add up to {total}")
            instructions = {}
            for item in largest.split(", "):
                index, name, count = item.split(" ")
                instructions[int(index.lstrip("#"))] = (name, int(count))
            want = {0: "BlockIndices", 1: "ViewGlobal", 2: "LoadGlobal", 3: "Add", 4: "ViewGlobal",
                    5: "StoreGlobal"}
            if {k: v[0] for k, v in instructions.items()} != want:
                failures.append(f"instructions {instructions}")
            if sum(v[1] for v in instructions.values()) != int(total):
                failures.append(f"by instruction {instructions} does not add up to {total}")
            counts = [v[1] for v in instructions.values()]
            listed = [int(item.split(" ")[2]) for item in largest.split(", ")]
            if listed != sorted(counts, reverse=True):
                failures.append(f"largest not in decreasing order: {largest}")
            # 32 f16 per thread: the loads and stores are the bulk, not the scalar set-up
            if not instructions[2][1] > instructions[0][1] or not instructions[5][1] > 50:
                failures.append(f"implausible counts {instructions}")
        # TILUSVM_JIT_CODEGEN: the backend's optimisation level for experiments
        ptx = {}
        for level in ["", "default", "none", "bogus"]:
            out = os.path.join(d, f"copy_{level or 'unset'}.ptx")
            env = dict(os.environ, TILUSVM_JIT_CODEGEN=level)
            r = subprocess.run([tool, source, "--emit", "ptx", "-o", out], capture_output=True,
                               text=True, env=env)
            if level == "bogus":
                if r.returncode == 0 or "TILUSVM_JIT_CODEGEN: `bogus` is not none" not in r.stderr:
                    failures.append(f"TILUSVM_JIT_CODEGEN=bogus: rc {r.returncode}, {r.stderr!r}")
                continue
            if r.returncode != 0:
                failures.append(f"TILUSVM_JIT_CODEGEN={level}: {r.stderr}")
                continue
            with open(out) as f:
                ptx[level] = f.read()
        if len(ptx) == 3:
            if ptx[""] != ptx["default"]:
                failures.append("TILUSVM_JIT_CODEGEN=default changed the PTX")
            if ptx["none"] == ptx["default"] or ".entry copy" not in ptx["none"]:
                failures.append("TILUSVM_JIT_CODEGEN=none gave the default PTX (or no kernel)")
        cache_tool = os.path.join(os.path.dirname(tool), "tilusvm-cache")
        # TILUSVM_JIT_HOLD=0: the kernel as optimised, under another compiler version
        held = experiment(tool, cache_tool, d, "TILUSVM_JIT_HOLD", HOLD_PROGRAM, failures)
        if len(held) == 2:
            if "shfl.sync.idx" not in held[""][0] or "shfl.sync.idx" in held["0"][0]:
                failures.append("TILUSVM_JIT_HOLD: the magic numbers were not held by default, "
                                "or held with 0")
            if "hold-0" in held[""][1] or "hold-0" not in held["0"][1]:
                failures.append(f"TILUSVM_JIT_HOLD: compiler versions {held[''][1]!r}, "
                                f"{held['0'][1]!r}")
        # TILUSVM_JIT_PAIRS=0: f32 into f16 slot by slot, under another compiler version
        paired = experiment(tool, cache_tool, d, "TILUSVM_JIT_PAIRS", PAIRS_PROGRAM, failures)
        if len(paired) == 2:
            if ("cvt.rn.f16x2.f32" not in paired[""][0] or
                    "cvt.rn.f16x2.f32" in paired["0"][0] or "cvt.rn.f16.f32" not in paired["0"][0]):
                failures.append("TILUSVM_JIT_PAIRS: pairs not converted together by default, or "
                                "converted together with 0")
            if "pairs-0" in paired[""][1] or "pairs-0" not in paired["0"][1]:
                failures.append(f"TILUSVM_JIT_PAIRS: compiler versions {paired[''][1]!r}, "
                                f"{paired['0'][1]!r}")
        # TILUSVM_JIT_BANKS=1: a line per plain shared access, the same PTX
        banks_source = os.path.join(d, "banks.tasm")
        with open(banks_source, "w") as f:
            f.write(BANKS_PROGRAM)
        outs = {}
        for value in ["", "1"]:
            env = dict(os.environ, TILUSVM_JIT_BANKS=value)
            r = subprocess.run([tool, banks_source, "--emit", "ptx"], capture_output=True,
                               text=True, env=env)
            if r.returncode != 0:
                failures.append(f"TILUSVM_JIT_BANKS={value}: {r.stderr}")
                continue
            outs[value] = r
        if len(outs) == 2:
            lines = [line for line in outs["1"].stderr.splitlines() if line]
            matched = [BANKS.match(line) for line in lines]
            if (len(lines) != 2 or not all(matched) or
                    [m.group(2) for m in matched] != ["StoreShared", "LoadShared"]):
                failures.append(f"TILUSVM_JIT_BANKS=1: {lines}")
            if outs[""].stderr.strip():
                failures.append(f"TILUSVM_JIT_BANKS unset printed {outs[''].stderr!r}")
            if outs[""].stdout != outs["1"].stdout:
                failures.append("TILUSVM_JIT_BANKS=1 changed the PTX")
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'passed'}: TILUSVM_JIT_TIMING output, TILUSVM_JIT_CODEGEN, "
          "TILUSVM_JIT_HOLD, TILUSVM_JIT_PAIRS, TILUSVM_JIT_BANKS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
