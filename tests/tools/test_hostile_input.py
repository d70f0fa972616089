#!/usr/bin/env python3
"""Hostile and careless input to tilus-asm and vm-run (docs/vm-run.md, docs/assembly.md).

Each case runs the real binary and checks its exit status (0 ok, 1 bad input, 2 usage or
environment), a piece of its message, and what it did to the file system. None may abort
(exit 134), be killed, succeed silently or replace a file it should only write into.

Usage: test_hostile_input.py TILUS_ASM VM_RUN SOURCE_ROOT
"""
import os
import stat
import struct
import subprocess
import sys
import tempfile

ASM, VM_RUN, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
PROGRAMS = os.path.join(ROOT, "programs")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(tool, *args, timeout=120):
    p = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def expect(tool, args, code, message, what):
    rc, out, err = run(tool, *args)
    check(rc == code, f"{what}: exit {rc}, expected {code}\nstdout: {out[-2000:]}\nstderr: {err}")
    if message is not None:
        check(message in err, f"{what}: message lacks {message!r}\nstderr: {err}")
    return out, err


def asm(args, code, message, what):
    return expect(ASM, args, code, message, what)


def vm(args, code, message, what):
    return expect(VM_RUN, args, code, message, what)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def is_char_device(path):
    return stat.S_ISCHR(os.lstat(path).st_mode)


def npy_f32(values, big_endian=False):
    """A version 1.0 .npy file of a 1-D f32 array, written here from the format's definition."""
    descr = ">f4" if big_endian else "<f4"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(values))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    data = struct.pack((">" if big_endian else "<") + "%df" % len(values), *values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def read_npy_f32(path):
    raw = open(path, "rb").read()
    hlen = struct.unpack("<H", raw[8:10])[0]
    data = raw[10 + hlen:]
    return list(struct.unpack("<%df" % (len(data) // 4), data))


with tempfile.TemporaryDirectory() as tmp:
    vadd_src = os.path.join(PROGRAMS, "vector_add.tasm")
    vadd = os.path.join(tmp, "vector_add.tbc")
    asm([vadd_src, "-o", vadd], 0, None, "assemble vector_add")
    with open(vadd, "rb") as f:
        vadd_bytes = f.read()

    # ---- output files: devices written in place, links followed, directories refused ----
    for args, what in (([vadd_src, "-o", "/dev/null"], "-o /dev/null"),
                       (["-d", vadd, "-o", "/dev/null"], "-d -o /dev/null")):
        asm(args, 0, None, what)
        check(is_char_device("/dev/null"), f"{what}: /dev/null is still a character device")
    target = os.path.join(tmp, "target.tbc")
    link = os.path.join(tmp, "link.tbc")
    os.symlink("target.tbc", link)  # relative, dangling until written
    asm([vadd_src, "-o", link], 0, None, "-o a symbolic link")
    check(os.path.islink(link), "-o link: the link is still a link")
    check(os.path.isfile(target) and open(target, "rb").read() == vadd_bytes,
          "-o link: the link's target holds the bytecode")
    dis_link = os.path.join(tmp, "dis_link.tasm")
    os.symlink(os.path.join(tmp, "dis_target.tasm"), dis_link)
    asm(["-d", vadd, "-o", dis_link], 0, None, "-d -o a symbolic link")
    check(os.path.islink(dis_link) and os.path.isfile(os.path.join(tmp, "dis_target.tasm")),
          "-d -o link: link kept, target written")
    outdir = os.path.join(tmp, "outdir")
    os.mkdir(outdir)
    asm([vadd_src, "-o", outdir], 1, "is a directory", "-o a directory")
    check(os.path.isdir(outdir) and not os.listdir(outdir), "-o dir: the directory is untouched")
    fifo = os.path.join(tmp, "out.fifo")
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    asm([vadd_src, "-o", fifo], 0, None, "-o a FIFO")
    got = reader.communicate(timeout=60)[0]
    check(got == vadd_bytes, "-o FIFO: the reader gets the bytecode")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "-o FIFO: still a FIFO")
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "no temporary files left behind")

    # ---- inputs: only regular files, bounded ----
    asm([tmp], 1, "is a directory", "tilus-asm DIR")
    check(not os.path.exists(tmp + ".tbc"), "tilus-asm DIR writes no DIR.tbc")
    asm(["--check", "/dev/zero"], 1, "is a character device", "tilus-asm --check /dev/zero")
    asm(["--check", fifo], 1, "is a FIFO", "tilus-asm --check FIFO")
    huge = os.path.join(tmp, "huge.tasm")
    with open(huge, "wb") as f:  # sparse: 64 MiB + 1 bytes, no disk used
        f.truncate((64 << 20) + 1)
    asm(["--check", huge], 1, "file of 67108865 bytes exceeds the limit of 67108864 bytes",
        "tilus-asm of a source over 64 MiB")
    empty = os.path.join(tmp, "empty.tasm")
    write(empty, "# nothing here\n")
    asm([empty], 1, "no program is defined", "an empty .tasm")
    check(not os.path.exists(os.path.join(tmp, "empty.tbc")), "an empty .tasm writes nothing")
    asm(["-d", tmp], 1, "is a directory", "tilus-asm -d DIR")

    # ---- layouts: element counts capped, as the decoder caps them ----
    asm(["layout", "spatial(1024).local(1048576)"], 1,
        "exceed the limit of 2097152 cells of a register layout", "layout of 2^30 cells")
    out, _ = asm(["layout", "spatial(32).local(65536)"], 0, None, "layout of 2^21 cells")
    check("grid of 2097152 cells not shown" in out, f"a large layout is summarised:\n{out[:500]}")
    big_reg = os.path.join(tmp, "big_reg.tasm")
    write(big_reg, "def k<1>() threads=32:\n"
                   "    a = AllocateRegister(f32, layout=spatial(32).local(1073741824))\n")
    asm([big_reg], 1, "error[layout-invalid]", "AllocateRegister beyond the decoder's limit")
    long_name = os.path.join(tmp, "long_name.tasm")
    write(long_name, "def k%s<1>(f32* x) threads=32:\n    g = ViewGlobal(x, shape=[32])\n"
          % ("x" * 1100))
    asm([long_name], 1, "exceeds a bytecode limit", "a program name beyond the decoder's limit")
    check(not os.path.exists(os.path.join(tmp, "long_name.tbc")), "nothing written for it")

    # ---- vm-run: inputs ----
    vm([tmp], 1, "is a directory", "vm-run DIR")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--arg", "x_ptr=@" + tmp], 2,
       "x_ptr: " + tmp + ": is a directory", "--arg x_ptr=@DIR")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--arg", "x_ptr=@/dev/zero"], 2,
       "is a character device", "--arg x_ptr=@/dev/zero")

    # ---- vm-run: sizes ----
    # (the default --max-memory is the host's available memory, so the sizes that must be
    # refused either exceed every host or come with an explicit limit)
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--arg", "x_ptr=rand:f32[1000000000000]"],
       2, "x_ptr: a buffer of 4000000000000 bytes does not fit in --max-memory",
       "rand:f32[1e12] under the default limit")
    vm([vadd, "--device", "cpu", "--arg", "n=2147483647", "--max-memory", "16G"], 2,
       "does not fit in --max-memory", "--arg n=2147483647 (3 buffers of 8 GiB)")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--arg", "x_ptr=rand:f32[3000000000]",
        "--max-memory", "8G"], 2,
       "x_ptr: a buffer of 12000000000 bytes does not fit in --max-memory", "rand:f32[3e9]")
    vm([vadd, "--device", "cpu", "--arg", "n=1000000", "--max-memory", "1M"], 2,
       "a buffer of 4000000 bytes does not fit in --max-memory 1048576 bytes",
       "--max-memory 1M with 4 MB buffers")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--max-memory", "lots"], 2,
       "'lots' is not a byte count", "--max-memory lots")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--arg",
        "x_ptr=zeros:f32[4294967296,4294967296,4294967296]"], 2,
       "the shape has more than 2^40 elements", "a shape whose element count wraps")
    paper = os.path.join(tmp, "paper_huge.tbc")
    # 2^63 - 1 is not a multiple of the tile: the program's precondition refuses it.
    asm([os.path.join(PROGRAMS, "paper_matmul_f16_i6.tasm"), "-D", "M=9223372036854775807",
         "-o", paper], 1, "error[assert]: assertion failed: M, N, K are multiples of the 16x8x16",
        "assemble the paper program with M = 2^63 - 1")
    asm([os.path.join(PROGRAMS, "paper_matmul_f16_i6.tasm"), "-D", "M=9223372036854775792",
         "-o", paper], 0, None, "assemble the paper program with M = 2^63 - 16")
    vm([paper, "--kernel", "matmul", "--device", "cpu"], 2,
       "a_ptr: the program can touch 2^63 or more elements", "vm-run with M = 2^63 - 16")
    alloc = os.path.join(tmp, "alloc.tasm")
    write(alloc, "def k<1>() threads=32:\n    g = AllocateGlobal(f32, shape=[4000000000])\n")
    asm([alloc, "-o", alloc + ".tbc"], 0, None, "assemble AllocateGlobal of 4e9")
    vm([alloc + ".tbc", "--device", "cpu", "--max-memory", "1G"], 1,
       "AllocateGlobal (instruction 0) of 4000000000 f32 elements needs 16000000000 bytes; "
       "the workspace limit is 1073741824 bytes", "AllocateGlobal of 4e9 under --max-memory 1G")
    write(alloc, "def k<1>() threads=32:\n"
                 "    g = AllocateGlobal(f32, shape=[4611686018427387904])\n")
    asm([alloc, "-o", alloc + ".tbc"], 0, None, "assemble AllocateGlobal of 2^62")
    _, err = vm([alloc + ".tbc", "--device", "cpu"], 1, "needs 2^64 or more bytes",
                "AllocateGlobal of 2^62 f32")
    check("<bytecode>:k:0 (AllocateGlobal)" in err,
          f"an error without -g names the instruction's opcode:\n{err}")

    # ---- vm-run: options ----
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--bench", "--iters", "0"], 2,
       "--iters: Value 0 not in range 1 to 1000000000", "--iters 0")
    rc, out, err = run(VM_RUN, vadd, "--device", "cpu", "--arg", "n=100", "--save",
                       "z_ptr=/nonexistent/z.npy")
    check(rc == 2 and "directory /nonexistent does not exist" in err and "ran on" not in out,
          f"--save to a missing directory fails before the run: {rc}\n{out}\n{err}")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--save", "z_ptr=" + outdir], 2,
       "is a directory", "--save to a directory")
    vm([vadd, "--device", "cpu", "--arg", "n=100", "--save", "z_ptr=/dev/null"], 0, None,
       "--save to /dev/null")
    check(is_char_device("/dev/null"), "--save /dev/null: still a character device")

    # ---- big-endian .npy: byte-swapped, as docs/vm-run.md says ----
    xs = [float(i) * 0.5 - 3 for i in range(300)]
    ys = [float(300 - i) for i in range(300)]
    xf, yf, zf = (os.path.join(tmp, n) for n in ("x_be.npy", "y_le.npy", "z.npy"))
    open(xf, "wb").write(npy_f32(xs, big_endian=True))
    open(yf, "wb").write(npy_f32(ys))
    vm([vadd, "--device", "cpu", "--arg", "n=300", "--arg", "x_ptr=@" + xf, "--arg",
        "y_ptr=@" + yf, "--save", "z_ptr=" + zf], 0, None, "vector_add with a big-endian x")
    if os.path.exists(zf):
        z = read_npy_f32(zf)
        check(z[:300] == [a + b for a, b in zip(xs, ys)], "big-endian x read by value")

    # ---- grids: zero, negative, division by zero are errors, not empty runs ----
    # programs/vector_add.tasm states n > 0 as a precondition, checked before the grid.
    for n in ("0", "-5"):
        vm([vadd, "--device", "cpu", "--arg", "n=" + n], 1,
           "error[assert]: program `vector_add`: precondition failed: at least one element: "
           "`n > 0` with n = " + n, f"n = {n}")
    cdiv = os.path.join(tmp, "cdiv.tasm")
    write(cdiv, "def k<cdiv(n, d)>(f32* x, i32 n, i32 d) threads=32:\n"
                "    g = ViewGlobal(x, shape=[n])\n")
    asm([cdiv, "-o", cdiv + ".tbc"], 0, None, "assemble cdiv(n, d)")
    vm([cdiv + ".tbc", "--device", "cpu", "--arg", "n=64", "--arg", "d=0"], 1,
       "grid dimension 0 divides by zero", "cdiv(n, d) with d = 0")
    vm([cdiv + ".tbc", "--device", "cpu", "--arg", "n=64", "--arg", "d=32"], 0, None,
       "cdiv(n, d) with d = 32")
    big_grid = os.path.join(tmp, "big_grid.tasm")
    write(big_grid, "def k<1, n>(i32 n) threads=32:\n    a, b = BlockIndices()\n")
    asm([big_grid, "-o", big_grid + ".tbc"], 0, None, "assemble a grid <1, n>")
    vm([big_grid + ".tbc", "--device", "cpu", "--arg", "n=65536"], 1,
       "grid dimension 1 is 65536, outside [1, 65535]", "grid y beyond CUDA's limit")
    zero = os.path.join(tmp, "zero.tasm")
    write(zero, "def k<1 / 0>(f32* x) threads=32:\n    g = ViewGlobal(x, shape=[32])\n")
    asm([zero, "-o", zero + ".tbc"], 1,
        "zero.tasm:1:9: error[division-by-zero]: constant expression divides by zero",
        "assemble <1 / 0>")
    if os.path.exists(zero + ".tbc"):
        failures.append("assemble <1 / 0>: wrote an output file")
    bm0 = os.path.join(tmp, "bm0.tbc")
    asm([os.path.join(PROGRAMS, "paper_matmul_f16_i6.tasm"), "-D", "BM=0", "-D", "M=64",
         "-D", "N=64", "-D", "K=64", "-o", bm0], 1, "error[division-by-zero]",
        "assemble the paper program, BM = 0")
    # Preconditions: over constants at assembly time, over parameters at launch.
    asm([os.path.join(PROGRAMS, "softmax_rows.tasm"), "-D", "N=100", "-o",
         os.path.join(tmp, "softmax100.tbc")], 1,
        "softmax_rows.tasm:7:1: error[assert]: assertion failed: softmax_rows supports rows of "
        "exactly N = 128 columns", "softmax_rows with N = 100")
    asm([os.path.join(PROGRAMS, "paper_matmul_f16_i6.tasm"), "-D", "M=40", "--check"], 1,
        "error[assert]: assertion failed: M, N, K are multiples of the 16x8x16 tile",
        "the paper program with M = 40")
    pre = os.path.join(tmp, "pre.tasm")
    write(pre, "def k<cdiv(n, 32)>(f32* x, i32 n, i32 g) threads=32:\n"
               "    assert n > 0 and n % g == 0, \"n is a multiple of the group size g\"\n"
               "    bi = BlockIndices()\n"
               "    gx = ViewGlobal(x, shape=[n])\n"
               "    StoreGlobal(AllocateRegister(f32, layout=spatial(32), init=1.0), gx, "
               "offset=[bi * 32:])\n")
    for flags in ([], ["-g"]):
        asm([pre, "-o", pre + ".tbc"] + flags, 0, None, "assemble a precondition " + str(flags))
        line = " (assert at line 2)" if flags else ""
        vm([pre + ".tbc", "--device", "cpu", "--arg", "n=100", "--arg", "g=16",
            "--arg", "x=zeros:f32[100]"], 1,
           "error[assert]: program `k`: precondition failed: n is a multiple of the group size g: "
           "`(n > 0) and ((n % g) == 0)` with n = 100, g = 16" + line,
           "a violated precondition " + str(flags))
        vm([pre + ".tbc", "--device", "cpu", "--arg", "n=100", "--arg", "g=0",
            "--arg", "x=zeros:f32[100]"], 1, "with n = 100, g = 0 (a division by zero)",
           "a precondition that divides by zero " + str(flags))
        vm([pre + ".tbc", "--device", "cpu", "--arg", "n=96", "--arg", "g=16",
            "--arg", "x=zeros:f32[96]"], 0, None, "a precondition that holds " + str(flags))

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
