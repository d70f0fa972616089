#!/usr/bin/env python3
"""Times every program of programs/ as written by hand against the same program with its
performance-only layouts stripped and inferred by tilus-asm (docs/layout-inference.md), and the
examples of programs/examples/ (written without layouts) against hand-annotated programs of the
same computation, on the GPU, in one run.

For each row: both versions are assembled (the stripped one with `tilus-asm --strip-layouts`),
run once on the same random inputs with the output saved (the two outputs must agree), then timed
with `vm-run --bench` (median of CUDA-event-timed launches). The table gives both medians, their
ratio (inferred / hand) and whether the inferred one is within 5 % (or, for the examples, at
least as fast within the run-to-run noise of 2 %).

    python3 scripts/bench_layouts.py [--build DIR] [--iters N] [--only NAME,...]
                                     [--candidates N] [--json FILE]

Needs a build with tools/tilus-asm and tools/vm-run (BUILD_DIR, default build; `.carry` from
`scripts/gpu_run.sh --pack` on the GPU machine) and numpy for the output comparison of rows whose
outputs differ bitwise (float accumulation order). With --candidates N the first N layout
candidates of each inferred program (tilus-asm --layout-candidates) are timed too and the best
is reported.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = lambda *parts: os.path.join(ROOT, "programs", *parts)  # noqa: E731

S = 4096  # matmul sizes


def mm_args():
    return ["a_ptr=rand:1", "b_ptr=rand:2", "c_ptr=zeros", f"m={S}", f"n={S}", f"k={S}"]


# name, hand program, program to infer (None: the hand program stripped), kernel, -D values,
# vm-run arguments, output buffer
CASES = [
    ("vector_add", P("vector_add.tasm"), None, "vector_add", [],
     ["x_ptr=rand:1", "y_ptr=rand:2", "z_ptr=zeros", f"n={1 << 24}"], "z_ptr"),
    ("softmax_rows", P("softmax_rows.tasm"), None, "softmax", [],
     ["x_ptr=rand:1", "y_ptr=zeros", f"m={1 << 16}"], "y_ptr"),
    ("matmul_f16_pipelined", P("matmul_f16_pipelined.tasm"), None, "matmul_f16", [],
     mm_args(), "c_ptr"),
    ("matmul_f16_large_tile", P("matmul_f16_large_tile.tasm"), None, "matmul_f16", [],
     mm_args(), "c_ptr"),
    ("gemm/mma_sync", P("gemm", "mma_sync.tasm"), None, "matmul", ["AT=f16", "CT=f16"],
     mm_args(), "c_ptr"),
    ("paper_matmul_f16_i6", P("paper_matmul_f16_i6.tasm"), None, "matmul",
     [f"M={S}", f"N={S}", f"K={S}"],
     ["a_ptr=rand:1", "transformed_b_ptr=rand:2", "c_ptr=zeros"], "c_ptr"),
    ("variants/matmul_bf16_u4_2warps", P("variants", "matmul_bf16_u4_2warps.tasm"), None,
     "matmul", [f"M={S}", f"N={S}", f"K={S}"], ["a_ptr=rand:1", "b_ptr=rand:2", "c_ptr=zeros"],
     "c_ptr"),
    ("variants/matmul_f16_i6_16x16", P("variants", "matmul_f16_i6_16x16.tasm"), None, "matmul",
     [f"M={S}", f"N={S}", f"K={S}"],
     ["a_ptr=rand:1", "transformed_b_ptr=rand:2", "c_ptr=zeros"], "c_ptr"),
    ("variants/matmul_f32_u2", P("variants", "matmul_f32_u2.tasm"), None, "matmul",
     ["M=2048", "N=2048", "K=2048"], ["a_ptr=rand:1", "b_ptr=rand:2", "c_ptr=zeros"], "c_ptr"),
    ("quant/a16wx (u4, m=16)", P("quant", "a16wx.tasm"), None, "matmul",
     ["AT=f16", "WT=u4", "N=8192", "K=8192", "G=128"],
     ["a_ptr=rand:1", "wq_ptr=rand:2", "s_ptr=rand:3", "z_ptr=zeros:f16[1]", "c_ptr=zeros", "m=16"],
     "c_ptr"),
    ("gemm/wgmma", P("gemm", "wgmma.tasm"), None, "matmul", ["AT=f16", "CT=f16"], mm_args(),
     "c_ptr"),
    ("layers/rmsnorm", P("layers", "rmsnorm.tasm"), None, "rmsnorm", ["AT=f16", "N=8192"],
     [f"x_ptr=rand:f16[{4096 * 8192}]:1", f"r_ptr=rand:f16[{4096 * 8192}]:2",
      "w_ptr=rand:f16[8192]:3", f"y_ptr=zeros:f16[{4096 * 8192}]", "m=4096", "eps=1e-5"],
     "y_ptr"),
    ("layers/swiglu_quant", P("layers", "swiglu_quant.tasm"), None, "swiglu_quant",
     ["AT=f16", "QT=f8e4m3", "N=14336"],
     [f"x_ptr=rand:f16[{4096 * 2 * 14336}]:1", f"q_ptr=zeros:f8e4m3[{4096 * 14336}]",
      "s_ptr=zeros:f32[4096]", "m=4096"], "q_ptr"),
    ("layers/rotary", P("layers", "rotary.tasm"), None, "rope", ["AT=f16", "HD=128"],
     ["pos_ptr=@{WORK}/positions.npy", f"q_ptr=rand:f16[{4096 * 32 * 128}]:1",
      f"k_ptr=rand:f16[{4096 * 8 * 128}]:2", f"cs_ptr=rand:f32[{4096 * 128}]:3", "tokens=4096",
      "heads=32", "kv_heads=8", "max_pos=4096"], "q_ptr"),
    ("attention/prefill", P("attention", "prefill.tasm"), None, "attention",
     ["AT=f16", "HD=128", "CAUSAL=1"],
     [f"q_ptr=rand:f16[{4096 * 32 * 128}]:1", f"k_ptr=rand:f16[{4096 * 8 * 128}]:2",
      f"v_ptr=rand:f16[{4096 * 8 * 128}]:3", f"o_ptr=zeros:f16[{4096 * 32 * 128}]", "batch=1",
      "seq_q=4096", "seq_k=4096", "heads=32", "kv_heads=8", "scale=0.08838834764831845"],
     "o_ptr"),
    ("attention/decode_paged", P("attention", "decode_paged.tasm"), None, "decode",
     ["AT=f16", "KT=f16", "HD=128", "PAGE=16"],
     [f"q_ptr=rand:f16[{16 * 32 * 128}]:1", f"k_cache=rand:f16[{4096 * 16 * 8 * 128}]:2",
      f"v_cache=rand:f16[{4096 * 16 * 8 * 128}]:3", "block_table=@{WORK}/block_table.npy",
      "seq_lens=@{WORK}/seq_lens.npy", f"o_ptr=zeros:f16[{16 * 32 * 128}]", "batch=16",
      "heads=32", "kv_heads=8", "num_pages=4096", "max_pages=256",
      "scale=0.08838834764831845", "k_scale=1.0", "v_scale=1.0"], "o_ptr"),
    # examples: the hand-annotated program of the same computation, then the example
    ("examples/gemv", P("examples", "gemv_annotated.tasm"), P("examples", "gemv.tasm"), "gemv",
     [], ["w_ptr=rand:1", "x_ptr=rand:2", "y_ptr=zeros", "n=16384", "k=8192"], "y_ptr"),
    ("examples/softmax", P("softmax_rows.tasm"), P("examples", "softmax.tasm"), "softmax", [],
     ["x_ptr=rand:1", "y_ptr=zeros", f"m={1 << 16}"], "y_ptr"),
    ("examples/quant_matmul", P("variants", "matmul_bf16_u4_2warps.tasm"),
     P("examples", "quant_matmul.tasm"), "matmul", [f"M={S}", f"N={S}", f"K={S}"],
     ["a_ptr=rand:1", "b_ptr=rand:2", "c_ptr=zeros"], "c_ptr"),
]


def write_inputs(work):
    """The integer tables the rows read as @{WORK}/NAME.npy: rotary positions (a permutation of
    0..4095), the decode rows' shuffled page table (16 sequences x 256 pages of 4096) and their
    lengths (4096 keys each)."""
    import random
    from bench_common import save_i32_npy
    rng = random.Random(7)
    positions = list(range(4096))
    rng.shuffle(positions)
    save_i32_npy(os.path.join(work, "positions.npy"), positions, [4096])
    pages = list(range(4096))
    rng.shuffle(pages)
    save_i32_npy(os.path.join(work, "block_table.npy"), pages, [16, 256])
    save_i32_npy(os.path.join(work, "seq_lens.npy"), [4096] * 16, [16])


def sh(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def assemble(asm, src, out, defines, extra=()):
    cmd = [asm, src, "-o", out, *extra]
    for d in defines:
        cmd += ["-D", d]
    r = sh(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"tilus-asm {os.path.basename(src)}: {r.stderr.strip()[-400:]}")
    return r


def bench(run, tbc, kernel, args, iters):
    cmd = [run, tbc, "--kernel", kernel, "--device", "cuda", "--bench", "--iters", str(iters),
           "--json"]
    for a in args:
        cmd += ["--arg", a]
    r = sh(cmd)
    try:
        return json.loads(r.stdout)["bench"]["median_ms"] * 1e3
    except Exception:
        raise RuntimeError(f"vm-run --bench: {(r.stderr or r.stdout).strip()[-400:]}")


def output(run, tbc, kernel, args, buf, path):
    cmd = [run, tbc, "--kernel", kernel, "--device", "cuda", "--save", f"{buf}={path}"]
    for a in args:
        cmd += ["--arg", a]
    r = sh(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"vm-run: {(r.stderr or r.stdout).strip()[-400:]}")
    with open(path, "rb") as f:
        return f.read()


def compare(a_path, b_path, a, b):
    if a == b:
        return "same"
    try:
        import numpy as np
        x, y = np.load(a_path), np.load(b_path)
        if x.dtype.kind != "f":
            return "DIFFERENT"
        x, y = x.astype(np.float64), y.astype(np.float64)
        err = float(np.max(np.abs(x - y) / (np.abs(y) + 1e-2)))
        return f"close ({err:.1e})" if err < 2e-2 else f"DIFFERENT ({err:.1e})"
    except ImportError:
        return "differs bitwise (no numpy)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--only", default="", help="comma-separated row names")
    ap.add_argument("--candidates", type=int, default=0)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    asm = os.path.join(args.build, "tools", "tilus-asm")
    run = os.path.join(args.build, "tools", "vm-run")
    work = tempfile.mkdtemp(prefix="bench_layouts_")
    only = set(filter(None, args.only.split(",")))
    rows = []
    write_inputs(work)
    for name, hand, inferred, kernel, defines, vargs, buf in CASES:
        if only and name not in only:
            continue
        vargs = [a.replace("{WORK}", work) for a in vargs]
        print(f"{name} ...", file=sys.stderr, flush=True)
        tag = name.replace("/", "_").replace(" ", "_").replace("(", "").replace(")", "")
        row = {"name": name, "example": inferred is not None}
        try:
            src = inferred
            if src is None:
                src = os.path.join(work, tag + ".stripped.tasm")
                cmd = [asm, "--strip-layouts", hand, "-o", src]
                for d in defines:
                    cmd += ["-D", d]
                r = sh(cmd)
                if r.returncode != 0:
                    raise RuntimeError(f"--strip-layouts: {r.stderr.strip()[-400:]}")
            hand_tbc = os.path.join(work, tag + ".hand.tbc")
            inf_tbc = os.path.join(work, tag + ".inferred.tbc")
            assemble(asm, hand, hand_tbc, defines)
            notes = assemble(asm, src, inf_tbc, defines).stderr.strip()
            row["notes"] = notes
            ha, ia = os.path.join(work, tag + ".hand.npy"), os.path.join(work, tag + ".inf.npy")
            row["outputs"] = compare(ha, ia, output(run, hand_tbc, kernel, vargs, buf, ha),
                                     output(run, inf_tbc, kernel, vargs, buf, ia))
            row["hand_us"] = bench(run, hand_tbc, kernel, vargs, args.iters)
            row["inferred_us"] = bench(run, inf_tbc, kernel, vargs, args.iters)
            if args.candidates > 0:
                base = os.path.join(work, tag)
                cmd = [asm, src, "--layout-candidates", str(args.candidates), "-o", base]
                for d in defines:
                    cmd += ["-D", d]
                r = sh(cmd)
                best = None
                for k, f in enumerate(r.stdout.split()):
                    t = os.path.join(work, f"{tag}.c{k}.tbc")
                    assemble(asm, f, t, [])
                    us = bench(run, t, kernel, vargs, args.iters)
                    if best is None or us < best[1]:
                        best = (k, us)
                if best:
                    row["best_candidate"], row["best_candidate_us"] = best
        except RuntimeError as e:
            row["error"] = str(e)
        rows.append(row)

    from bench_common import print_columns
    hdr = ["program", "hand us", "inferred us", "inferred/hand", "verdict", "outputs"]
    if args.candidates > 0:
        hdr += ["best candidate"]
    table = [hdr]
    ok = True
    for r in rows:
        if "error" in r:
            ok = False
            table.append([r["name"], "failed: " + r["error"].splitlines()[-1][:70], "", "", "", ""]
                         + ([""] if args.candidates > 0 else []))
            continue
        ratio = r["inferred_us"] / r["hand_us"]
        good = ratio <= 1.02 if r["example"] else ratio <= 1.05
        ok = ok and good and not r["outputs"].startswith("DIFFERENT")
        line = [r["name"], f"{r['hand_us']:.1f}", f"{r['inferred_us']:.1f}", f"{ratio:.3f}",
                ("ok" if good else "SLOWER") + (" (example)" if r["example"] else ""),
                r["outputs"]]
        if args.candidates > 0:
            line.append(f"cand{r['best_candidate']} {r['best_candidate_us']:.1f} us"
                        if "best_candidate" in r else "")
        table.append(line)
    print_columns(table)
    for r in rows:
        if r.get("notes"):
            print(f"notes for {r['name']}:\n{r['notes']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
