#!/usr/bin/env python3
"""Command-line tests of tilus-tune (docs/tilus-tune.md) that need no GPU: usage errors and their
exit status, --space errors at their columns, the order of the points, failure reporting of points
that do not assemble or check (with their diagnostics), --dry-run's table and JSON, --timeout, and
without a CUDA driver the plain refusal to time (exit 2).

Usage: test_tilus_tune.py TILUS_TUNE SOURCE_ROOT
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

TOOL, ROOT = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    p = subprocess.run([TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace")
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def expect(args, code, what):
    rc, out, err = run(*args)
    check(rc == code, f"{what}: exit {rc}, expected {code}\nstdout: {out}\nstderr: {err}")
    return out, err


def driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


# A kernel whose validity depends on its constants: the layout's thread count is LT while the
# block has WARPS * 32 threads (WARPS=2 fails the checker's layout-threads rule), and each thread
# holds BLOCK / LT elements (BLOCK=64 gives local(0), a layout-invalid error of the assembler).
PROGRAM = """const BLOCK = 256
const WARPS = 4
const LT = 128
def scale<cdiv(n, BLOCK)>(f32* x_ptr, i32 n) threads=WARPS * 32:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(LT).local(BLOCK / LT), offset=[bi * BLOCK:])
    StoreGlobal(x, gx, offset=[bi * BLOCK:])
"""

# One element type as a constant (a space may range over types).
TYPED_PROGRAM = """const WT = f32
def copy<cdiv(n, 256)>(WT* x_ptr, WT* y_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * 256:])
    StoreGlobal(x, gy, offset=[bi * 256:])
"""

# One Dot in the layouts of an mma.m16n8k16 atom: the JIT lowers it to one mma.sync, which stages
# nothing in shared memory.
MMA_PROGRAM = """def mm<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr) threads=32:
    ga = ViewGlobal(a_ptr, shape=[16, 16])
    gb = ViewGlobal(b_ptr, shape=[16, 8])
    gc = ViewGlobal(c_ptr, shape=[16, 8])
    a = LoadGlobal(ga, layout=column_local(2, 2).spatial(8, 4).local(1, 2))
    b = LoadGlobal(gb, layout=local(2, 1).column_spatial(4, 8).local(2, 1))
    c = AllocateRegister(f32, layout=local(2, 1).spatial(8, 4).local(1, 2), init=0.0)
    Dot(a, b, c, out=c)
    StoreGlobal(c, gc)
"""


def write_program(directory, name, text):
    """Writes a program's text to directory/name; returns the path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


with tempfile.TemporaryDirectory() as tmp:
    prog = write_program(tmp, "scale.tasm", PROGRAM)
    report = os.path.join(tmp, "report.json")

    # Usage.
    out, _ = expect(["--help"], 0, "--help")
    check("--space" in out and "--dry-run" in out and "--timeout" in out, "--help lists the options")
    expect([], 2, "no program")
    expect([prog, "--bogus"], 2, "unknown option")
    _, err = expect([prog, "--device", "cpu", "--dry-run"], 2, "--device cpu")
    check("CUDA device only" in err, f"--device cpu says why:\n{err}")
    _, err = expect([prog, "-D", "BLOCK", "--dry-run"], 2, "-D without =")
    _, err = expect([prog, "-D", "BLOCK=128", "--space", "BLOCK=64", "--dry-run"], 2,
                    "-D and --space of one name")
    check("-D BLOCK is also a --space dimension" in err, f"-D/--space conflict message:\n{err}")
    _, err = expect([os.path.join(tmp, "missing.tasm"), "--dry-run"], 1, "unreadable program")
    check("error[io]: cannot read the input file" in err, f"unreadable program message:\n{err}")

    # --space errors, each at its column of the --space text (1-based).
    space_errors = [
        ("BN=64,,128", "--space:1:7: error[usage]: empty value for BN"),
        ("BN=64;;X=1", "--space:1:7: error[usage]: empty dimension (write NAME=V1,V2,... between "
                       "';')"),
        ("BN=64;", "--space:1:7: error[usage]: empty dimension (write NAME=V1,V2,... between "
                   "';')"),
        ("BN=1; STAGES", "--space:1:7: error[usage]: expected NAME=V1,V2,..., got 'STAGES'"),
        ("BN=1;1X=2", "--space:1:6: error[usage]: '1X' is not a constant name"),
        (" =2", "--space:1:2: error[usage]: '' is not a constant name"),
        ("BN=1; BN=2", "--space:1:7: error[usage]: BN is already a dimension (at column 1)"),
        ("BN=1, 2 ,1", "--space:1:10: error[usage]: BN=1 is already listed (at column 4)"),
        ("A=" + ",".join(map(str, range(1000))) + ";B=" + ",".join(map(str, range(101))),
         "--space:1:3893: error[usage]: the space has more than 100000 points"),
    ]
    for text, message in space_errors:
        _, err = expect([prog, "--dry-run", "--space", text], 2, f"--space '{text[:20]}'")
        check(err == message + "\n", f"--space '{text[:20]}': got\n{err}expected\n{message}")

    # The points: the cartesian product, first dimension slowest; failures keep their stage and
    # diagnostics; successful points have the grid cdiv(1000, BLOCK) and 128 threads.
    out, err = expect([prog, "--dry-run", "--space", "WARPS=4,2; BLOCK=256,64,128",
                       "--arg", "n=1000", "--json", report], 0, "dry run with failing points")
    with open(report) as f:
        rep = json.load(f)
    points = rep["points"]
    want = [("4", "256", None), ("4", "64", "assemble"), ("4", "128", None),
            ("2", "256", "check"), ("2", "64", "assemble"), ("2", "128", "check")]
    check(len(points) == 6, f"6 points, got {len(points)}")
    for k, (warps, block, stage) in enumerate(want):
        p = points[k]
        label = f"WARPS={warps} BLOCK={block}"
        check(p["index"] == k and p["point"] == label and
              p["values"] == {"WARPS": warps, "BLOCK": block},
              f"point {k} is {label}: {p}")
        check(p["ok"] == (stage is None), f"{label}: ok is {stage is None}")
        if stage is None:
            grid = (1000 + int(block) - 1) // int(block)
            check(p["grid"] == [grid, 1, 1] and p["threads"] == 128 and p["shared_bytes"] == 0,
                  f"{label}: grid [{grid}, 1, 1], 128 threads, no shared memory: {p}")
            check(p["ptx_bytes"] > 0 and "median_ms" not in p, f"{label}: PTX, no timing: {p}")
        else:
            check(p.get("stage") == stage, f"{label}: fails at {stage}: {p}")
    check(points[1]["error"].startswith(prog + ":7:43: error[layout-invalid]: local size 0 in dimension 0 is not positive"),
          f"BLOCK=64: local(0) is layout-invalid at the primitive: {points[1]['error']}")
    check(points[3]["error"].startswith(prog + ":7:9: error[layout-threads]: "),
          f"WARPS=2: 128 layout threads in a 64-thread block: {points[3]['error']}")
    check(points[0]["rank"] == 1 and points[2]["rank"] == 2, "dry-run ranks in enumeration order")
    check(rep["dry_run"] is True and rep["best"] is None and rep["kernel"] == "scale",
          f"report header: {rep}")
    check(rep["space"] == [{"name": "WARPS", "values": ["4", "2"]},
                           {"name": "BLOCK", "values": ["256", "64", "128"]}],
          f"report space: {rep['space']}")
    lines = out.splitlines()
    check(lines[0].startswith("tilus-tune: dry run of scale in " + prog +
                              ": 2 of 6 points assemble, check and compile"),
          f"table title: {lines[0]}")
    check(lines[2].split()[:2] == ["1", "WARPS=4"] and "BLOCK=256" in lines[2] and
          lines[3].split()[:2] == ["3", "WARPS=4"] and "BLOCK=128" in lines[3],
          f"successful points first, in enumeration order:\n{out}")
    failed_rows = [l for l in lines if "failed at" in l]
    check([r.split("failed at ")[1].split(":")[0] for r in failed_rows] ==
          ["assemble", "check", "assemble", "check"] and
          "WARPS=4 BLOCK=64" in failed_rows[0] and "WARPS=2 BLOCK=128" in failed_rows[3],
          f"failed points after, in enumeration order, with their stage:\n{out}")
    check("error[layout-threads]" in out and "error[layout-invalid]" in out,
          f"the table shows the diagnostics:\n{out}")
    # Not a terminal: one progress line per point on stderr.
    progress = [l for l in err.splitlines() if l.startswith("tilus-tune: [")]
    check(len(progress) == 6 and progress[0].startswith("tilus-tune: [1/6] WARPS=4 BLOCK=256: ok (")
          and progress[1] == "tilus-tune: [2/6] WARPS=4 BLOCK=64: failed at assemble",
          f"progress lines:\n{err}")

    # shared B is what the launch asks for: a Dot that becomes one mma.sync stages nothing, so
    # none of the scratch area that the checker plans for it (16 x 16 + 16 x 8 f16 slots: 768
    # bytes) is asked for.
    mma = write_program(tmp, "mma.tasm", MMA_PROGRAM)
    expect([mma, "--dry-run", "--json", report], 0, "an mma.sync kernel")
    with open(report) as f:
        point = json.load(f)["points"][0]
    check(point["ok"] and point["shared_bytes"] == 0,
          f"an mma.sync Dot asks for no shared memory: {point}")

    # A type constant as a dimension: every point is the program for that type; a value that is
    # not a type fails its point at assemble with the -D diagnostic.
    typed = write_program(tmp, "typed.tasm", TYPED_PROGRAM)
    expect([typed, "--dry-run", "--space", "WT=u4,f6e3m2,notatype", "--arg", "n=1000",
            "--json", report], 0, "a space over a type constant")
    with open(report) as f:
        points = json.load(f)["points"]
    check([p["ok"] for p in points] == [True, True, False] and
          points[2]["error"] == "-D WT:1:1: error[syntax]: 'notatype' is not a data type ('WT' is "
                                "declared as a data type at line 1)",
          f"type dimension: {points}")

    # Every point failing is exit 1; argument and kernel errors are failures of the points.
    out, _ = expect([prog, "--dry-run", "--space", "WARPS=2", "--arg", "n=1000"], 1,
                    "every point fails")
    check("0 of 1 points" in out, f"0 of 1 points:\n{out}")
    out, _ = expect([prog, "--dry-run", "--arg", "n=1000", "--arg", "q=1", "--json", report], 1,
                    "unknown --arg")
    with open(report) as f:
        p = json.load(f)["points"][0]
    check(p["point"] == "(defaults)" and p["stage"] == "arguments" and
          "scale has no parameter named q" in p["error"], f"unknown --arg: {p}")
    expect([prog, "--dry-run", "--arg", "n=1000", "--kernel", "nope", "--json", report], 1,
           "unknown kernel")
    with open(report) as f:
        p = json.load(f)["points"][0]
    check(p["stage"] == "kernel" and "no program named nope" in p["error"], f"--kernel nope: {p}")

    # --timeout: the point running past it fails as "timeout", later points are not run, the
    # report is still written, exit 1.
    matmul = os.path.join(ROOT, "programs", "matmul_f16_pipelined.tasm")
    out, err = expect([matmul, "--dry-run", "--timeout", "0.001", "--space", "STAGES=2,3,4",
                       "--arg", "m=64", "--arg", "n=64", "--arg", "k=64", "--json", report], 1,
                      "--timeout")
    with open(report) as f:
        points = json.load(f)["points"]
    check(points[0]["stage"] == "timeout" and "--timeout 0.001 s" in points[0]["error"] and
          [p["stage"] for p in points[1:]] == ["not-run", "not-run"], f"--timeout report: {points}")
    check("not run" in out, f"--timeout table lists points not run:\n{out}")

    # Without a GPU: timing is refused plainly, exit 2, before anything is assembled.
    if driver_present():
        print("note: a CUDA driver is present; the no-GPU refusal is not exercised here")
    else:
        out, err = expect([prog, "--space", "BLOCK=128,256", "--arg", "n=1000"], 2, "no GPU")
        check(err == "tilus-tune: no GPU to time on: no CUDA driver (libcuda.so.1 not found) "
                     "(--dry-run assembles, checks and compiles every point without one)\n" and
              out == "", f"no-GPU message:\n{err}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("tilus-tune: all checks passed")
