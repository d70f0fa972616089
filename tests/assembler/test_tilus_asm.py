#!/usr/bin/env python3
"""Command-line tests of tilus-asm (ISA section 8): exit codes, files written, the CLI round trip
(.tasm -> .tbc -> .tasm -> .tbc gives identical bytes), diagnostics, and `layout` output checked
against the reference functions of ISA section 3.1 computed here.

Usage: test_tilus_asm.py TILUS_ASM SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

TOOL, ROOT = sys.argv[1], sys.argv[2]
failures = []


def run(*args, cwd=None):
    p = subprocess.run([TOOL, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def expect(args, code, what, cwd=None):
    rc, out, err = run(*args, cwd=cwd)
    check(rc == code, f"{what}: exit {rc}, expected {code}\nstdout: {out}\nstderr: {err}")
    return out, err


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


with tempfile.TemporaryDirectory() as tmp:
    programs = ["vector_add", "softmax_rows", "paper_matmul_f16_i6", "matmul_f16_pipelined"]

    # Usage.
    out, _ = expect(["--help"], 0, "--help")
    check("layout" in out and "-D" in out, "--help lists the options")
    out, _ = expect(["--version"], 0, "--version")
    check(out.startswith("tilus-asm "), "--version prints the name and version")
    expect([], 2, "no input")
    expect(["--bogus"], 2, "unknown option")
    src = os.path.join(ROOT, "programs", "vector_add.tasm")
    expect([src, "-D", "BLOCK"], 2, "-D without =")
    expect(["-d", src, "--check"], 2, "-d with --check")
    expect(["--check", src, "-o", os.path.join(tmp, "x.tbc")], 2, "--check with -o")
    expect(["layout"], 2, "layout without an expression")
    expect(["layout", "local(2)", src], 2, "layout with an input file")

    # Assemble every example; default output name; CLI round trip to identical bytes.
    for name in programs:
        tasm = os.path.join(tmp, name + ".tasm")
        write(tasm, open(os.path.join(ROOT, "programs", name + ".tasm")).read())
        expect([tasm], 0, f"assemble {name}")
        tbc = os.path.join(tmp, name + ".tbc")
        check(os.path.exists(tbc), f"{name}: default output {name}.tbc written")
        expect(["--check", tasm], 0, f"--check {name}")
        dis = os.path.join(tmp, name + ".dis.tasm")
        expect(["-d", tbc, "-o", dis], 0, f"disassemble {name}")
        out, _ = expect(["-d", tbc], 0, f"disassemble {name} to stdout")
        check(out == open(dis).read(), f"{name}: -o and stdout disassembly agree")
        again = os.path.join(tmp, name + ".again.tbc")
        expect([dis, "-o", again], 0, f"re-assemble {name}")
        check(read(tbc) == read(again), f"{name}: .tasm -> .tbc -> .tasm -> .tbc is byte-identical")
        check(not [f for f in os.listdir(tmp) if ".tmp." in f], "no temporary files left behind")

    # -D and -g.
    paper = os.path.join(tmp, "paper_matmul_f16_i6.tasm")
    small = os.path.join(tmp, "small.tbc")
    expect([paper, "-o", small, "-D", "M=64", "-D", "N=64", "-DK=64"], 0, "-D overrides")
    out, _ = expect(["-d", small], 0, "disassemble -D build")
    check("def transform_b<4, 8>(" in out, "-D K=64, N=64 give the grid <64 / 16, 64 / 8>")
    expect([paper, "-D", "Q=1"], 1, "-D of an undeclared name")
    # Type constants on the command line (docs/assembly.md "Constants").
    typed = os.path.join(tmp, "typed.tasm")
    write(typed, "const WT = u4\n"
                 "def k<bits(WT)>(WT* w) threads=32:\n"
                 "    g = ViewGlobal(w, shape=[64])\n"
                 "    r = LoadGlobal(g, layout=spatial(32).local(2))\n")
    typed_tbc = os.path.join(tmp, "typed.tbc")
    expect([typed, "-o", typed_tbc, "-D", "WT=f6e3m2"], 0, "-D WT=f6e3m2")
    out, _ = expect(["-d", typed_tbc], 0, "disassemble the -D WT build")
    check("def k<6>(f6e3m2* w)" in out, f"-D WT=f6e3m2 gives the f6e3m2 program:\n{out}")
    _, err = expect([typed, "--check", "-D", "WT=notatype"], 1, "-D WT=notatype")
    check(err == "-D WT:1:1: error[syntax]: 'notatype' is not a data type ('WT' is declared as a "
                 "data type at line 1)\n", f"-D WT=notatype message:\n{err}")
    debug = os.path.join(tmp, "debug.tbc")
    expect([paper, "-g", "-o", debug], 0, "-g")
    check(b"Rearrange i6[K, N] weights" in read(debug), "-g keeps the source text (comments too)")
    check(b"Rearrange i6[K, N] weights" not in read(os.path.join(tmp, "paper_matmul_f16_i6.tbc")),
          "without -g no source text")

    # Program errors: every diagnostic on stderr, exit 1, nothing written.
    bad = os.path.join(tmp, "bad.tasm")
    write(bad, "def k<1>():\n    x = q\n    y = Frob(1)\n")
    _, err = expect([bad], 1, "assembler errors")
    check(err == f"{bad}:2:9: error[undefined-name]: undefined name 'q'\n"
                 f"{bad}:3:9: error[unknown-instruction]: no instruction or builtin function "
                 f"named 'Frob'\n", f"assembler diagnostics, one per line:\n{err}")
    check(not os.path.exists(os.path.join(tmp, "bad.tbc")), "no output after an error")
    unchecked = os.path.join(tmp, "threads.tasm")
    write(unchecked, "def k<1>(f32* x) threads=32:\n    g = ViewGlobal(x, shape=[32])\n"
                     "    r = LoadGlobal(g, layout=spatial(64))\n")
    _, err = expect([unchecked], 1, "checker errors")
    check(err.startswith(f"{unchecked}:3:9: error[layout-threads]: "), f"checker diagnostic:\n{err}")
    expect([os.path.join(tmp, "missing.tasm")], 1, "unreadable input")
    corrupt = os.path.join(tmp, "corrupt.tbc")
    with open(corrupt, "wb") as f:
        f.write(read(os.path.join(tmp, "vector_add.tbc"))[:40])
    _, err = expect(["-d", corrupt], 1, "corrupt bytecode")
    check("error[bytecode]" in err, f"corrupt bytecode is a bytecode error:\n{err}")
    good = read(os.path.join(tmp, "vector_add.tbc"))
    damaged = {
        "bit-flipped": good[:60] + bytes([good[60] ^ 0x10]) + good[61:],
        "overwritten": good[:50] + b"\xff" * 8 + good[58:],
        "extended": good + b"\x00\x01\x02",
        "empty": b"",
    }
    for name, data in damaged.items():
        with open(corrupt, "wb") as f:
            f.write(data)
        _, err = expect(["-d", corrupt], 1, f"{name} bytecode")
        check("error[bytecode]" in err, f"{name} bytecode is a bytecode error:\n{err}")

    # layout --json: replicated and plain layouts against hand-written owners.
    out, _ = expect(["layout", "spatial(2).local(2)", "--json"], 0, "layout --json")
    check(out.count("\n") == 1 and out.endswith("\n"), f"json on one line: {out}")
    fields = json.loads(out, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
    check(fields == ["shape", "threads", "locals", "canonical", "owners"],
          f"json field order: {out}")
    j = json.loads(out)
    check(j["owners"] == [[[0, 0]], [[0, 1]], [[1, 0]], [[1, 1]]], f"owners of spatial(2).local(2)")
    j = json.loads(run("layout", "replicate(2).local(2)", "--json")[1])
    check(j["shape"] == [2] and j["threads"] == 2 and j["locals"] == 2,
          "replicate(2).local(2) shape and counts")
    check(j["owners"] == [[[0, 0], [1, 0]], [[0, 1], [1, 1]]], "replicated owners listed in order")

    # The mma C fragment: (t, i) -> (t/4 + 8*(i/2), 2*(t%4) + i%2) (ISA section 3.1).
    expr = "local(2, 1).spatial(8, 4).local(1, 2)"
    j = json.loads(run("layout", expr, "--json")[1])
    want = [[None] * 8 for _ in range(16)]
    for t in range(32):
        for i in range(4):
            want[t // 4 + 8 * (i // 2)][2 * (t % 4) + i % 2] = [t, i]
    check(j["shape"] == [16, 8] and j["threads"] == 32 and j["locals"] == 4, "C fragment counts")
    check(j["owners"] == [[want[r][c]] for r in range(16) for c in range(8)],
          "C fragment owners match the reference function")
    out, _ = expect(["layout", expr], 0, "layout grid")
    lines = out.splitlines()
    check(lines[0] == expr, "grid output starts with the layout")
    grid = [l.split() for l in lines if l.strip() and l.split()[0].isdigit() and ":" in l]
    check(len(grid) == 16, f"16 grid rows:\n{out}")
    for r, row in enumerate(grid):
        check(row[0] == str(r) and row[1:] == [f"{t}:{i}" for t, i in want[r]],
              f"grid row {r}: {row}")
    _, err = expect(["layout", "local(0)"], 1, "invalid layout")
    check("error[layout-invalid]" in err, f"invalid layout diagnostic:\n{err}")

    # --emit: the JIT's output, unspecialised and specialised.
    src = os.path.join(ROOT, "programs", "vector_add.tasm")
    out, _ = expect([src, "--emit", "ptx"], 0, "--emit ptx")
    check(out.startswith("// program vector_add") and ".entry vector_add" in out,
          "--emit ptx names the program and holds its entry")
    check(".target sm_90a" in out, "--emit ptx targets sm_90a by default")
    # the launch's block and dynamic shared memory beside the code (vector_add: 128 threads, no
    # shared memory)
    check(out.splitlines()[1] == "// 128 threads, 0 bytes of dynamic shared memory",
          f"--emit ptx gives the block's threads and shared memory: {out.splitlines()[1]}")
    # unspecialised: a run-time alignment test (address & 7) guards each 8-byte vector access
    check(sum("and.b64" in l and l.rstrip().endswith("7;") for l in out.splitlines()) > 0,
          "unspecialised PTX tests the alignment at run time")
    spec, _ = expect([src, "--emit", "ptx", "--spec", "aaa-"], 0, "--emit ptx --spec")
    check(not any("and.b64" in l and l.rstrip().endswith("7;") for l in spec.splitlines()),
          "with aligned pointers the alignment tests are gone")
    out, _ = expect([src, "--emit", "ptx", "--sm", "80"], 0, "--emit ptx --sm 80")
    check(".target sm_80" in out, "--sm 80 targets sm_80")
    out, _ = expect([src, "--emit", "ptx", "--arch", "sm_80"], 0, "--emit ptx --arch sm_80")
    check(".target sm_80" in out, "--arch sm_80 targets sm_80")
    out, _ = expect([src, "--emit", "ptx", "--arch", "sm_90a", "--sm", "90"], 0,
                    "--arch sm_90a with the agreeing --sm 90")
    check(".target sm_90a" in out, "--arch sm_90a targets sm_90a")
    _, err = expect([src, "--emit", "ptx", "--arch", "sm_80", "--sm", "90"], 2,
                    "--arch and --sm that disagree")
    check("--arch sm_80 and --sm 90 disagree" in err, f"--arch/--sm message:\n{err}")
    expect([src, "--emit", "ptx", "--arch", "sm_75"], 2, "--arch of an unsupported target")
    expect([src, "--arch", "sm_80"], 2, "--arch without --emit")
    out, _ = expect([src, "--emit", "llvm"], 0, "--emit llvm")
    check("define ptx_kernel void @vector_add" in out, "--emit llvm prints the kernel function")
    _, err = expect([src, "--emit", "ptx", "--spec", "aa"], 2, "--spec of the wrong length")
    check("has 2 letters" in err and "4 parameters" in err, f"--spec length message:\n{err}")
    _, err = expect([src, "--emit", "ptx", "--spec", "aaxa"], 2, "--spec with an unknown letter")
    check("none of - a d 1 n" in err, f"--spec letter message:\n{err}")
    # n: an integer other than 1 (vector_add's n)
    expect([src, "--emit", "ptx", "--spec", "aaan"], 0, "--emit ptx --spec with n")
    _, err = expect([src, "--emit", "ptx", "--spec", "naaa"], 1, "--spec n on a pointer")
    check("does not fit its kind" in err, f"--spec n on a pointer message:\n{err}")
    expect([src, "--emit", "ptx", "--kernel", "nosuch"], 2, "--kernel naming no program")
    expect([src, "--emit", "wasm"], 2, "--emit of an unknown form")
    expect([src, "--spec", "aaa-"], 2, "--spec without --emit")
    expect([src, "--check", "--emit", "ptx"], 2, "--check with --emit")
    # A JIT error located by a source line names the source file (jit/code_size.h: a kernel
    # above the code-size limit, set low here).
    big = os.path.join(tmp, "big.tasm")
    write(big, "def m<1>(f32* x_ptr) threads=32:\n"
               "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[128]), layout=spatial(32).local(4))\n"
               "    StoreGlobal(Exp(x), ViewGlobal(x_ptr, shape=[128]))\n")
    os.environ["TILUSVM_JIT_MAX_IR"] = "4"
    _, err = expect([big, "--emit", "ptx"], 1, "--emit ptx of a kernel above the limit")
    del os.environ["TILUSVM_JIT_MAX_IR"]
    check(err.startswith(big + ":3:") and "error[unsupported]" in err and
          "too large to compile" in err, f"the JIT's error names the file and line:\n{err}")
    expect([big, "--emit", "ptx", "-o", os.path.join(tmp, "big.ptx")], 0,
           "--emit ptx of the same kernel under the default limit")

    # Layout inference (docs/layout-inference.md).
    gemv = os.path.join(ROOT, "programs", "examples", "gemv.tasm")
    out, err = expect([gemv, "--check", "--explain-layouts"], 0, "--explain-layouts")
    lines = out.splitlines()
    check(len(lines) == 3 and all(gemv in l for l in lines), f"one line per inferred layout:\n{out}")
    check("x = LoadGlobal: replicate(4).spatial(1, 32).local(1, 8)  [broadcast rule" in out,
          f"the broadcast rule decides x:\n{out}")
    check(err == "", f"no notes for gemv:\n{err}")
    out, _ = expect([os.path.join(ROOT, "programs", "vector_add.tasm"), "--check",
                     "--explain-layouts"], 0, "--explain-layouts of a program without holes")
    check("nothing inferred" in out, f"nothing inferred:\n{out}")
    out, _ = expect(["-d", gemv], 0, "-d of a .tasm source")
    check("w = LoadGlobal(gw, layout=local(2, 1).spatial(4, 32).local(1, 8), offset=[bi * 8:, "
          "kb * 256:])" in out, f"-d writes every layout out:\n{out}")
    check("threads=128" in out, "-d shows the threads")
    # -d of the source disassembles like -d of its bytecode
    tbc = os.path.join(tmp, "gemv.tbc")
    expect([gemv, "-o", tbc], 0, "assemble gemv")
    out2, _ = expect(["-d", tbc], 0, "-d of gemv's bytecode")
    check(out == out2, "-d of the source and of the bytecode agree")
    expect(["-d", tbc, "-D", "KB=128"], 2, "-d of bytecode with -D")
    out, _ = expect(["-d", gemv, "-D", "KB=128"], 0, "-d of a source with -D")
    check("local(1, 8), offset=[bi * 8:, kb * 128:]" in out, f"-D applies to -d of a source:\n{out}")
    # --strip-layouts
    stripped = os.path.join(tmp, "softmax_stripped.tasm")
    expect([os.path.join(ROOT, "programs", "softmax_rows.tasm"), "--strip-layouts", "-o",
            stripped], 0, "--strip-layouts")
    text = open(stripped).read()
    check("LoadGlobal(gx, shape=[4, 128], offset=[bi * ROWS:, 0:])" in text and "layout=" not in text,
          f"the stripped softmax:\n{text}")
    expect([stripped, "--check"], 0, "the stripped softmax assembles and checks")
    expect([stripped, "--strip-layouts", "--check"], 2, "--strip-layouts with --check")
    # --layout-candidates
    mm = os.path.join(tmp, "mm.tasm")
    expect([os.path.join(ROOT, "programs", "matmul_f16_pipelined.tasm"), "--strip-layouts", "-o",
            mm], 0, "strip the pipelined matmul")
    out, _ = expect([mm, "--layout-candidates", "3", "-o", os.path.join(tmp, "mmv")], 0,
                    "--layout-candidates 3")
    files = out.split()
    check(files == [os.path.join(tmp, f"mmv.cand{k}.tasm") for k in range(3)],
          f"three candidate files:\n{out}")
    texts = [open(f).read() for f in files if os.path.exists(f)]
    check(len(set(texts)) == 3, "the candidates differ")
    check(len(texts) > 1 and "spatial(2, 2).local(2, 4)" in texts[0], "candidate 0 is the default")
    for f in files:
        expect([f, "--check"], 0, f"candidate {f} assembles and checks")
    expect([mm, "--layout-candidates", "0"], 2, "--layout-candidates 0")
    # an unsolvable program: a located layout-infer error
    bad = os.path.join(tmp, "view.tasm")
    write(bad, "def k<1>(u8* p) threads=32:\n    g = ViewGlobal(p, shape=[96])\n"
               "    b = LoadGlobal(g, shape=[96])\n"
               "    w = View(b, dtype=i6, layout=local(2, 1).column_spatial(4, 8).local(2, 1))\n"
               "    StoreGlobal(View(w, dtype=u8, layout=local(3).spatial(32)), g)\n")
    _, err = expect([bad, "--check"], 1, "a View of an inferred layout")
    check(err.startswith(f"{bad}:4:9: error[layout-infer]: the View reinterprets the bits of 'b'") and
          "LoadGlobal at 3:9" in err, f"layout-infer names both constraints:\n{err}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all tilus-asm checks passed")
