#!/usr/bin/env python3
"""JIT time and generated-code quality of every program under programs/.

For every kernel of every programs/**/*.tasm (sm_90a; without and with the launch-time
specialisation that aligned pointers and 16-divisible integers give, and for a program with
`specialize` statements that class with each combination of their values), this prints:
  - the JIT's phase times (thread CPU time, median of --runs compilations),
  - the loops of the PTX (a backward branch and the lines from its target label): the
    instruction count and the counts by opcode of each loop body,
  - `ptxas -arch=sm_90a -v` registers and spill bytes,
  - with --banks, the shared-memory wavefronts of the kernel's plain shared loads and stores
    against their count without bank conflicts, summed (TILUSVM_JIT_BANKS=1, docs/jit.md
    "Shared-memory bank conflicts"; one more compilation per kernel, outside the timed ones).
With --save FILE the result is written as JSON; with --compare FILE it is compared with a
saved result and every kernel whose registers, spills or loop instruction counts grew is
listed, and with --banks every kernel whose bank-conflict wavefronts grew (exit status 1 when
any did). --variants adds the library programs at the constants
their benchmarks use (every weight class of quant/a16wx.tasm at the largest decode shape and
its prefill kernel, decode_paged.tasm over the quantised caches and HD 64 and 256, prefill.tasm's
mma.sync design and HD 64); --ptx-dir DIR writes each kernel's PTX there (one file per row), so
that two builds of the JIT can be compared byte for byte with `diff -r`.

Usage: scripts/jit_quality.py [--build build] [--runs 5] [--save F] [--compare F] [--only SUBSTR]
                              [--variants] [--ptx-dir DIR] [--banks]
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
TIMING = re.compile(r"jit: (\S+) sm_\d+: setup ([\d.]+) ms, IR ([\d.]+) ms, optimisation "
                    r"([\d.]+) ms, PTX ([\d.]+) ms, total ([\d.]+) ms")
# A kernel's header: `def NAME<GRID>(PARAMS) OPTIONS:`. The grid expression may hold comparisons
# (`<`, `>`) and parentheses, the parameters neither: the parameter list is the last parenthesised
# group before the colon, and may span lines; the grid (and the options) must be on the `def` line,
# else kernels() stops with an error rather than leave the kernel out.
DEF = re.compile(r"^\s*def\s+(\w+)\s*(?:<.*>)?\s*\(([^()]*)\)[^()\n]*:[ \t]*(?:#.*)?$", re.M)
ANY_DEF = re.compile(r"^\s*def\s", re.M)
SPECIALIZE = re.compile(r"^\s*specialize\s+\w+\s*=", re.M)
BANKS = re.compile(r"jit: \S+ banks: #\d+ \w+: \d+ accesses of up to \d+ bytes per lane, (\d+) "
                   r"wavefronts \((\d+) without bank conflicts\)")


def kernels(path):
    """(name, specs) for each program of a file: the launch classes to compile besides the
    unspecialised kernel. The first makes pointers aligned and integers divisible; a program
    with `specialize` statements takes that class with each combination of their values (a
    launch always knows them: docs/isa.md, "Launch-time specialisation")."""
    out = []
    text = open(path).read()
    defs = list(DEF.finditer(text))
    headers = len(ANY_DEF.findall(text))
    if len(defs) != headers:
        raise RuntimeError(f"{path}: a `def` header that this script cannot read (found "
                           f"{len(defs)} of {headers})")
    for i, m in enumerate(defs):
        spec = ""
        for param in filter(None, (p.strip() for p in m.group(2).split(","))):
            ty = param.split()[0]
            spec += "a" if ty.endswith("*") else ("d" if re.match(r"[iu]\d+$", ty) else "-")
        body = text[m.end():defs[i + 1].start() if i + 1 < len(defs) else len(text)]
        count = len(SPECIALIZE.findall(body))
        if count == 0:
            out.append((m.group(1), [spec]))
        else:
            out.append((m.group(1), [spec + "/" + "".join("T" if bit & (1 << j) else "F"
                                                        for j in range(count))
                                     for bit in reversed(range(1 << count))]))
    return out


# (program under programs/, -D constants): the library programs at their benchmarks' constants
A16WX_SHAPE = ["N=57344", "K=8192", "G=128"]
VARIANTS = ([("quant/a16wx.tasm", [f"WT={wt}"] + A16WX_SHAPE)
             for wt in "u1 u2 u3 u4 i4 u5 i6 u8 f4e2m1 f6e3m2 f8e4m3".split()]
            + [("quant/a16wx.tasm", ["WT=u4", "PREFILL=1", "N=8192", "K=8192", "G=128"])]
            + [("attention/decode_paged.tasm", [f"KT={kt}"])
               for kt in "u4 i4 f4e2m1 i5 f6e3m2 i7 i8 f8e4m3 bf16".split()]
            + [("attention/decode_paged.tasm", ["KT=u4", f"HD={hd}"]) for hd in (64, 256)]
            + [("attention/prefill.tasm", ["HOPPER=0"]), ("attention/prefill.tasm", ["HD=64"])])


def command(tool, path, kernel, spec, defines=()):
    """tilus-asm emitting the PTX of `kernel` for sm_90a, with the defines and launch class."""
    cmd = [tool, path, "--emit", "ptx", "--sm", "90", "--kernel", kernel]
    for d in defines:
        cmd += ["-D", d]
    if spec:
        cmd += ["--spec", spec]
    return cmd


def emit(tool, path, kernel, spec, runs, defines=()):
    """PTX and the median phase times of `runs` compilations."""
    cmd = command(tool, path, kernel, spec, defines)
    times = []
    ptx = ""
    for _ in range(runs):
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, TILUSVM_JIT_TIMING="1"))
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr}")
        ptx = r.stdout
        m = TIMING.search(r.stderr)
        times.append([float(m.group(i)) for i in range(2, 7)])
    med = [statistics.median(t[i] for t in times) for i in range(5)]
    return ptx, dict(zip(["setup", "ir", "opt", "ptx", "total"], med))


def statements(line):
    """The instructions of one PTX line: none for labels, directives, comments and braces; each
    statement of an inline-asm block written on one line (`{ .reg .pred p; setp...; @p ld...; }`)."""
    if not line or line.endswith(":") or line.startswith(("//", ".", "}")):
        return []
    if not line.startswith("{"):
        return [line]
    if ";" not in line:  # an operand list of a statement that spans lines
        return []
    parts = [p.strip() for p in line.strip("{} ").split(";")]
    return [p for p in parts if p and not p.startswith(".")]


def loops(ptx):
    """Each backward branch's loop: instruction count and counts by opcode."""
    lines = [l.strip() for l in ptx.splitlines()]
    labels = {}
    for i, l in enumerate(lines):
        if re.match(r"^\$?[\w$]+:$", l):
            labels[l[:-1]] = i
    result = []
    for j, l in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+([\w$]+);", l)
        if not m or m.group(1) not in labels or labels[m.group(1)] > j:
            continue
        ops = collections.Counter()
        for line in lines[labels[m.group(1)]:j + 1]:
            for body in statements(line):
                body = re.sub(r"^@!?%?\w+\s+", "", body)
                op = body.split()[0].rstrip(";")
                ops[op] += 1
        result.append({"label": m.group(1), "instructions": sum(ops.values()),
                       "ops": dict(sorted(ops.items()))})
    return result


def ptxas(ptx):
    if not os.path.exists(PTXAS):
        return {}
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        open(src, "w").write(ptx)
        r = subprocess.run([PTXAS, "-arch=sm_90a", "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    return {"registers": int(regs.group(1)) if regs else -1,
            "spill_stores": int(spill.group(1)) if spill else -1,
            "spill_loads": int(spill.group(2)) if spill else -1}


def banks(tool, path, kernel, spec, defines=()):
    """[wavefronts, without conflicts] summed over the kernel's plain shared accesses."""
    cmd = command(tool, path, kernel, spec, defines) + ["-o", os.devnull]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, TILUSVM_JIT_BANKS="1"))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr}")
    total = [0, 0]
    for m in BANKS.finditer(r.stderr):
        total[0] += int(m.group(1))
        total[1] += int(m.group(2))
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--save")
    ap.add_argument("--compare")
    ap.add_argument("--only", default="")
    ap.add_argument("--ops", action="store_true", help="print the opcode counts of each loop")
    ap.add_argument("--variants", action="store_true",
                    help="also the library programs at their benchmarks' constants")
    ap.add_argument("--ptx-dir", default="", help="write each kernel's PTX into this folder")
    ap.add_argument("--banks", action="store_true",
                    help="also the wavefronts of the plain shared accesses (TILUSVM_JIT_BANKS)")
    args = ap.parse_args()
    tool = os.path.join(args.build, "tools", "tilus-asm")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(ROOT, "programs"))
                   for f in fs if f.endswith(".tasm"))
    jobs = [(path, []) for path in files]
    if args.variants:
        jobs += [(os.path.join(ROOT, "programs", prog), defines) for prog, defines in VARIANTS]
    if args.ptx_dir:
        os.makedirs(args.ptx_dir, exist_ok=True)
    results = {}
    for path, defines in jobs:
        rel = os.path.relpath(path, ROOT) + (f"[{','.join(defines)}]" if defines else "")
        if args.only not in rel:
            continue
        for name, specs in kernels(path):
            for s in [""] + specs:
                key = f"{rel}:{name}" + (f" spec={s}" if s else "")
                ptx, times = emit(tool, path, name, s, args.runs if not s else 1, defines)
                results[key] = {"times": times, "loops": loops(ptx), "ptxas": ptxas(ptx),
                                "ptx_lines": ptx.count("\n")}
                if args.banks:
                    results[key]["banks"] = banks(tool, path, name, s, defines)
                if args.ptx_dir:
                    fname = re.sub(r"[^\w.=,-]+", "_", key) + ".ptx"
                    with open(os.path.join(args.ptx_dir, fname), "w") as f:
                        f.write(ptx)
    print(f"{'kernel':<62} {'IR':>5} {'opt':>5} {'PTX':>5} {'total':>6}  regs spill  "
          + ("   banks  " if args.banks else "") + "loop sizes")
    for key, r in results.items():
        t = r["times"]
        sizes = ",".join(str(l["instructions"]) for l in r["loops"])
        p = r["ptxas"]
        bank = f"{r['banks'][0]:>4d}/{r['banks'][1]:<4d} " if args.banks else ""
        print(f"{key:<62} {t['ir']:5.1f} {t['opt']:5.1f} {t['ptx']:5.1f} {t['total']:6.1f}  "
              f"{p.get('registers', -1):4d} {p.get('spill_stores', -1):5d}  {bank}[{sizes}]")
        if args.ops:
            for l in r["loops"]:
                print("      ", l["label"], l["instructions"], l["ops"])
    if args.save:
        json.dump(results, open(args.save, "w"), indent=1)
    if args.compare:
        base = json.load(open(args.compare))
        worse = 0
        print("\ncompared with", args.compare)
        for key, r in results.items():
            if key not in base:
                continue
            b = r_b = base[key]
            notes = []
            for f in ["registers", "spill_stores", "spill_loads"]:
                if r["ptxas"].get(f, 0) != b["ptxas"].get(f, 0):
                    notes.append(f"{f} {b['ptxas'].get(f)} -> {r['ptxas'].get(f)}")
            bl = [l["instructions"] for l in r_b["loops"]]
            nl = [l["instructions"] for l in r["loops"]]
            if bl != nl:
                notes.append(f"loops {bl} -> {nl}")
                if args.ops and len(bl) == len(nl):
                    for lb, ln in zip(r_b["loops"], r["loops"]):
                        ops = set(lb["ops"]) | set(ln["ops"])
                        diff = {o: (lb["ops"].get(o, 0), ln["ops"].get(o, 0)) for o in sorted(ops)
                                if lb["ops"].get(o, 0) != ln["ops"].get(o, 0)}
                        if diff:
                            notes.append(f"  {lb['label']}: {diff}")
            conflicts = [x["banks"][0] - x["banks"][1] if "banks" in x else None for x in (b, r)]
            if None not in conflicts and conflicts[0] != conflicts[1]:
                notes.append(f"bank-conflict wavefronts {conflicts[0]} -> {conflicts[1]}")
            grew = (r["ptxas"].get("registers", 0) > b["ptxas"].get("registers", 0)
                    or r["ptxas"].get("spill_stores", 0) > b["ptxas"].get("spill_stores", 0)
                    or sum(nl) > sum(bl) or len(nl) != len(bl)
                    or (None not in conflicts and conflicts[1] > conflicts[0]))
            worse += grew
            t0, t1 = b["times"]["total"], r["times"]["total"]
            print(f"{'WORSE ' if grew else ''}{key}: total {t0:.1f} -> {t1:.1f} ms"
                  + ("; " + "; ".join(notes) if notes else "; same registers, spills, loops"))
        return 1 if worse else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
