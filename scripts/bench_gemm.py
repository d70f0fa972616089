#!/usr/bin/env python3
"""Benchmarks the dense GEMMs of programs/gemm on the GPU against PyTorch in the same run.

For every square shape N^3 (4096 and 8192 by default; --sizes) and every shape M x N x K of
--shapes (e.g. the skinny shapes where split-K matters, 128x8192x8192):
programs/gemm/wgmma_fp8.tasm with f8e4m3
A and B and an f16 C against torch._scaled_mm (e4m3 A row-major, B column-major as _scaled_mm
requires, scales 1.0, out_dtype f16), programs/layers/linear_fp8.tasm (y = x w^T: the weight in
that column-major layout) against the same, and programs/gemm/wgmma_tma.tasm, programs/gemm/wgmma_ws.tasm, programs/gemm/wgmma_cluster.tasm, programs/gemm/wgmma.tasm
and programs/gemm/mma_sync.tasm with f16 and bf16 (C of the same type) against torch.matmul (cuBLAS). The kernels are timed by
`vm-run --bench --json` (median of CUDA-event-timed launches after a warm-up), the baselines by the
same method in this process. Prints shape, program, AT, ms, TFLOP/s, baseline ms and the
baseline's time over the program's (>= 1: the program is at least as fast).

With --rounds R every case is timed R times, each time the program then its baseline, the
rounds one after another over all cases (so a clock that drifts during the run, as the GPU warms,
reaches both sides alike); the row shows the medians of the R times and the median of the R
ratios, with their range.

    python3 scripts/bench_gemm.py [--build DIR] [--sizes 4096,8192] [--shapes MxNxK,...]
                                  [--iters N] [--json FILE]
                                  [--only wgmma_fp8,layers/linear_fp8,wgmma_tma,wgmma_ws,wgmma_cluster,wgmma,mma_sync] [-D NAME=VALUE]... [--rounds R] [--dry-run]

Needs PyTorch with CUDA (the GPU machine) and a build with tools/tilus-asm and tools/vm-run
(BUILD_DIR, default build). --dry-run assembles every program and prints the vm-run commands
without a GPU or PyTorch.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

from bench_common import cuda_device, print_columns, torch_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (program, AT, CT, baseline): programs/gemm/PROGRAM.tasm's matmul, or for "layers/linear_fp8"
# programs/layers/linear_fp8.tasm's linear (y = x w^T, w [n, k]: the layout _scaled_mm takes)
CASES = [
    ("wgmma_fp8", "f8e4m3", "f16", "torch._scaled_mm"),
    ("layers/linear_fp8", "f8e4m3", "f16", "torch._scaled_mm"),
    ("wgmma_tma", "f16", "f16", "torch.matmul"),
    ("wgmma_tma", "bf16", "bf16", "torch.matmul"),
    ("wgmma_ws", "f16", "f16", "torch.matmul"),
    ("wgmma_ws", "bf16", "bf16", "torch.matmul"),
    ("wgmma_cluster", "f16", "f16", "torch.matmul"),
    ("wgmma_cluster", "bf16", "bf16", "torch.matmul"),
    ("wgmma", "f16", "f16", "torch.matmul"),
    ("wgmma", "bf16", "bf16", "torch.matmul"),
    ("mma_sync", "f16", "f16", "torch.matmul"),
    ("mma_sync", "bf16", "bf16", "torch.matmul"),
]


def baseline_ms(torch, name, at, m, n, k, iters):
    """Median milliseconds of PyTorch's GEMM of the case at M x N x K."""
    if name == "torch._scaled_mm":
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
        one = torch.tensor(1.0, device="cuda")
        return torch_bench(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                    out_dtype=torch.float16), iters=iters)
    dt = torch.float16 if at == "f16" else torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    c = torch.empty(m, n, device="cuda", dtype=dt)
    return torch_bench(lambda: torch.matmul(a, b, out=c), iters=iters)


def parse_shapes(sizes, shapes):
    """The (m, n, k) of every size N (N^3) and of every MxNxK of `shapes`; ValueError with the
    offending entry otherwise."""
    out = []
    for x in filter(None, sizes.split(",")):
        if not x.strip().isdigit() or int(x) < 1:
            raise ValueError(f"--sizes: '{x}' is not a positive integer")
        out.append((int(x), int(x), int(x)))
    for x in filter(None, shapes.split(",")):
        parts = x.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) >= 1 for p in parts):
            raise ValueError(f"--shapes: '{x}' is not MxNxK with positive integers")
        out.append(tuple(int(p) for p in parts))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--sizes", default="4096,8192",
                    help="square shapes N^3, comma-separated ('' for none)")
    ap.add_argument("--shapes", default="",
                    help="shapes MxNxK, comma-separated (e.g. 128x8192x8192,1024x1024x16384)")
    ap.add_argument("--only", default="", help="comma-separated program names (default: all)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every case this many times, program and baseline alternating")
    ap.add_argument("--json", default="", help="write the rows to this file")
    ap.add_argument("-D", action="append", default=[], help="tuning constant NAME=VALUE")
    ap.add_argument("--dry-run", action="store_true",
                    help="assemble every program and print the commands; needs no GPU")
    args = ap.parse_args()

    asm = os.path.join(args.build, "tools", "tilus-asm")
    run = os.path.join(args.build, "tools", "vm-run")
    try:
        shapes = parse_shapes(args.sizes, args.shapes)
    except ValueError as e:
        ap.error(str(e))
    if not shapes:
        ap.error("no shapes: give --sizes or --shapes")
    only = set(args.only.split(",")) if args.only else None
    cases = [c for c in CASES if only is None or c[0] in only]
    work = tempfile.mkdtemp(prefix="bench_gemm_")

    device = cuda_device("bench_gemm", args.dry_run)
    if device is None:
        return 1
    torch = None
    if not args.dry_run:
        import torch

    if args.rounds < 1:
        print("bench_gemm: --rounds must be at least 1", file=sys.stderr)
        return 2
    failed = False
    # the cases that assembled, each with its vm-run command per size
    runs = []
    for prog, at, ct, base in cases:
        linear = prog == "layers/linear_fp8"
        src = os.path.join(ROOT, "programs", prog + ".tasm" if linear else os.path.join("gemm", prog + ".tasm"))
        tbc = os.path.join(work, f"{os.path.basename(prog)}_{at}_{ct}.tbc")
        cmd = [asm, src, "-o", tbc, "-D", f"AT={at}", "-D", f"CT={ct}"]
        for d in args.D:
            cmd += ["-D", d]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if args.dry_run:
            print(shlex.join(cmd) + ("" if r.returncode == 0 else "   # FAILED"))
        if r.returncode != 0:
            print(r.stderr.strip(), file=sys.stderr)
            failed = True
            continue
        for m, n, k in shapes:
            operands = (["--kernel", "linear", "--arg", "x_ptr=rand:1", "--arg", "w_ptr=rand:2",
                         "--arg", "scale=1.0"] if linear else
                        ["--kernel", "matmul", "--arg", "a_ptr=rand:1", "--arg", "b_ptr=rand:2"])
            cmd = [run, tbc, "--device", "cuda"] + operands + [
                   "--arg", f"m={m}", "--arg", f"n={n}", "--arg", f"k={k}",
                   "--bench", "--iters", str(args.iters), "--json"]
            if args.dry_run:
                print("  " + shlex.join(cmd))
                continue
            runs.append(({"program": prog, "at": at, "ct": ct, "m": m, "n": n, "k": k,
                          "baseline": base}, cmd))

    times = [[] for _ in runs]  # per case: (program ms, baseline ms) of each round
    errors = {}
    for rnd in range(args.rounds):
        for i, (row, cmd) in enumerate(runs):
            if i in errors:
                continue
            print(f"{row['program']} AT={row['at']} CT={row['ct']} "
                  f"{row['m']}x{row['n']}x{row['k']}"
                  + (f" (round {rnd + 1} of {args.rounds})" if args.rounds > 1 else ""),
                  file=sys.stderr, flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True)
            try:
                ms = json.loads(p.stdout)["bench"]["median_ms"]
            except (ValueError, KeyError, TypeError):
                errors[i] = (p.stderr or p.stdout).strip()[-500:]
                failed = True
                continue
            times[i].append((ms, baseline_ms(torch, row["baseline"], row["at"], row["m"],
                                             row["n"], row["k"], args.iters)))
    rows = []
    for i, (row, _) in enumerate(runs):
        row = dict(row)
        if i in errors:
            row["error"] = errors[i]
            rows.append(row)
            continue
        ms = statistics.median(t[0] for t in times[i])
        bms = statistics.median(t[1] for t in times[i])
        ratios = [t[1] / t[0] for t in times[i]]
        flops = 2.0 * row["m"] * row["n"] * row["k"]
        row.update({"ms": ms, "tflops": flops / (ms * 1e-3) / 1e12, "baseline_ms": bms,
                    "baseline_tflops": flops / (bms * 1e-3) / 1e12,
                    "ratio": statistics.median(ratios)})
        if args.rounds > 1:
            row.update({"rounds": [{"ms": t[0], "baseline_ms": t[1]} for t in times[i]],
                        "ratio_min": min(ratios), "ratio_max": max(ratios)})
        rows.append(row)

    if args.dry_run:
        print(f"dry run: {len(cases)} programs assembled" + (" (some FAILED)" if failed else ""))
        return 1 if failed else 0

    print(f"device: {device}; tuning: {' '.join(args.D) or 'defaults'}"
          + (f"; medians of {args.rounds} rounds" if args.rounds > 1 else ""))
    table = [["shape", "program", "AT", "ms", "TFLOP/s", "baseline", "baseline ms", "ratio"]
             + (["ratio range"] if args.rounds > 1 else [])]
    for r in rows:
        shape = (f"{r['n']}^3" if r["m"] == r["n"] == r["k"]
                 else f"{r['m']}x{r['n']}x{r['k']}")
        if "error" in r:
            table.append([shape, r["program"], r["at"], "failed: " + r["error"].splitlines()[-1][:60],
                          "", r["baseline"], "", ""] + ([""] if args.rounds > 1 else []))
            continue
        table.append([shape, r["program"], r["at"], f"{r['ms']:.4f}", f"{r['tflops']:.0f}",
                      r["baseline"], f"{r['baseline_ms']:.4f}", f"{r['ratio']:.2f}"]
                     + ([f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}"] if args.rounds > 1 else []))
    print_columns(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "tuning": args.D, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
