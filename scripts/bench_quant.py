#!/usr/bin/env python3
"""Benchmarks programs/quant/a16wx.tasm on the GPU against baselines measured in the same run.

For every weight type WT, group size G, row count M and weight shape (K, N): the kernel's median
time (vm-run --bench, CUDA events), the weight bytes it streams per second, the fraction of the
device-to-device copy bandwidth it reaches (a copy that moves as many bytes, reads plus writes,
as the kernel reads: weights, scales, zero points, activations; timed with PyTorch here), and
its speed-up over cuBLAS f16 (torch.matmul of A[M, K] by an f16 W[K, N]) at the same M. The
"split" column is the number of split-K blocks per tile of C that the launch used (the grid's
third dimension: the default SPLIT1 for M = 1, SPLITK for 1 < M <= 8 and SPLITW for 8 < M <=
SPLITM, docs/quant.md); -D SPLITK=1 -D SPLITW=1 -D SPLIT1=1 turns it off. "regs" is the kernel's
registers per thread, with "+NB" when it spills N bytes of local memory per thread (vm-run's
report).

    python3 scripts/bench_quant.py [--build DIR] [--wt u4,i4] [--m 1,16] [--shapes 8192x57344]
                                   [--prefill u4:4096:8192x8192] [--json FILE] [-D NAME=VALUE]...

Rows with M >= --prefill-from (default 128) use the prefill kernel (-D PREFILL=1). The prefill
rows of --prefill (WT:M:KxN, comma-separated; default u4 at M = 4096, K = N = 8192; "" for
none) follow the decode rows, with the same G.

Needs PyTorch with CUDA (the GPU machine) and a build with tools/tilus-asm and tools/vm-run
(BUILD_DIR, default build). Shapes whose bytes fit in the 50 MB L2 cache are marked "(L2)": both
the kernel and the copy then run from L2 on repeated launches.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import L2_BYTES, bits_of, copy_bench, print_columns, save_report, torch_bench
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA70B = [(8192, 57344), (8192, 10240), (28672, 8192), (8192, 8192)]
DEFAULT_WT = "u1,u2,u3,u4,i4,u5,i6,u8,f4e2m1,f6e3m2,f8e4m3"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--wt", default=DEFAULT_WT)
    ap.add_argument("--m", default="1,16")
    ap.add_argument("--g", default="128")
    ap.add_argument("--shapes", default=",".join(f"{k}x{n}" for k, n in LLAMA70B))
    ap.add_argument("--at", default="f16")
    ap.add_argument("--program", default=os.path.join(ROOT, "programs", "quant", "a16wx.tasm"))
    ap.add_argument("--prefill", default="u4:4096:8192x8192")
    ap.add_argument("--prefill-from", type=int, default=128)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", default="")
    ap.add_argument("-D", action="append", default=[], help="tuning constant NAME=VALUE")
    args = ap.parse_args()

    import torch
    asm = os.path.join(args.build, "tools", "tilus-asm")
    run = os.path.join(args.build, "tools", "vm-run")
    program = args.program
    work = tempfile.mkdtemp(prefix="bench_quant_")
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    ms_list = [int(x) for x in args.m.split(",")]
    wts = args.wt.split(",")
    gs = [int(x) for x in args.g.split(",")]
    dev = torch.cuda.get_device_name()

    # baselines: cuBLAS f16 per (M, K, N); copy bandwidth per byte count
    # (wt, g, k, n, m) rows: every decode combination, then the prefill rows
    jobs = [(wt, g, k, n, m) for wt in wts for g in gs for (k, n) in shapes for m in ms_list]
    for item in filter(None, args.prefill.split(",")):
        wt, m, kn = item.split(":")
        k, n = (int(x) for x in kn.split("x"))
        jobs += [(wt, g, k, n, int(m)) for g in gs]
    cublas = {}
    for (k, n) in sorted({(j[2], j[3]) for j in jobs}):
        w = torch.randn(k, n, device="cuda", dtype=torch.float16)
        for m in sorted({j[4] for j in jobs if (j[2], j[3]) == (k, n)}):
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            cublas[(m, k, n)] = torch_bench(lambda: torch.matmul(a, w, out=c), iters=args.iters)
        del w
    copy_cache = {}

    def copy_ms(nbytes):
        half = (nbytes // 2 + 15) // 16 * 16
        if half not in copy_cache:
            src = torch.empty(half, device="cuda", dtype=torch.uint8)
            dst = torch.empty_like(src)
            copy_cache[half] = copy_bench(dst, src, iters=args.iters)
            del src, dst
        return copy_cache[half]

    rows = []
    total = len(jobs)
    assembled = {}
    for done, (wt, g, k, n, m) in enumerate(jobs, 1):
        prefill = m >= args.prefill_from
        key = (wt, g, k, n, prefill)
        if key not in assembled:
            tbc = os.path.join(work, f"{wt}_{g}_{k}_{n}_{int(prefill)}.tbc")
            cmd = [asm, program, "-o", tbc, "-D", f"AT={args.at}", "-D", f"WT={wt}",
                   "-D", f"N={n}", "-D", f"K={k}", "-D", f"G={g}"]
            if prefill:
                cmd += ["-D", "PREFILL=1"]
            for d in args.D:
                cmd += ["-D", d]
            assembled[key] = (tbc, subprocess.run(cmd, capture_output=True, text=True))
        tbc, r = assembled[key]
        print(f"[{done}/{total}] WT={wt} G={g} M={m} K={k} N={n}" + (" (prefill)" if prefill else ""),
              file=sys.stderr, flush=True)
        wbytes = k * n * bits_of(wt) // 8
        read = wbytes + (k // g) * n * 2 + m * k * 2
        row = {"wt": wt, "g": g, "m": m, "k": k, "n": n, "weight_bytes": wbytes,
               "read_bytes": read, "prefill": prefill}
        if r.returncode != 0:
            row["error"] = r.stderr.strip()
            rows.append(row)
            continue
        at = args.at
        cmd = [run, tbc, "--kernel", "matmul", "--device", "cuda",
               "--arg", f"a_ptr=rand:{at}[{m * k}]:1",
               "--arg", f"wq_ptr=zeros:u8[{wbytes}]",
               "--arg", f"s_ptr=zeros:{at}[{(k // g) * n}]",
               "--arg", f"z_ptr=zeros:{at}[1]",
               "--arg", f"c_ptr=zeros:{at}[{m * n}]", "--arg", f"m={m}",
               "--bench", "--iters", str(args.iters), "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            rep = json.loads(p.stdout)
            t = rep["bench"]["median_ms"]
        except Exception:
            row["error"] = (p.stderr or p.stdout).strip()[-500:]
            rows.append(row)
            continue
        cp = copy_ms(read)
        cb = cublas[(m, k, n)]
        grid = rep.get("grid") or [1, 1, 1]
        row.update({"us": t * 1e3, "weight_tbps": wbytes / (t * 1e-3) / 1e12,
                    "splitk": grid[2] if len(grid) > 2 else 1,
                    "registers": rep.get("registers", 0), "local_bytes": rep.get("local_bytes", 0),
                    "copy_us": cp * 1e3, "copy_fraction": cp / t,
                    "cublas_us": cb * 1e3, "speedup_vs_cublas": cb / t,
                    "tflops": 2.0 * m * k * n / (t * 1e-3) / 1e12,
                    "l2": 2 * read <= L2_BYTES})
        rows.append(row)

    print(f"device: {dev}; AT={args.at}; tuning: {' '.join(args.D) or 'defaults'}")
    hdr = ["WT", "G", "M", "K", "N", "split", "regs", "us", "TB/s (W)", "copy us", "of copy",
           "cuBLAS us", "vs cuBLAS", "TFLOP/s"]
    table = [hdr]
    for r in rows:
        if "error" in r:
            table.append([r["wt"], str(r["g"]), str(r["m"]), str(r["k"]), str(r["n"]), "", "",
                          "failed: " + r["error"].splitlines()[-1][:60], "", "", "", "", "", ""])
            continue
        table.append([r["wt"], str(r["g"]), str(r["m"]), str(r["k"]), str(r["n"]),
                      str(r["splitk"]),
                      # registers per thread, and the local memory of a kernel that spills
                      str(r["registers"]) + (f"+{r['local_bytes']}B" if r["local_bytes"] else ""),
                      f"{r['us']:.1f}", f"{r['weight_tbps']:.2f}", f"{r['copy_us']:.1f}",
                      f"{r['copy_fraction'] * 100:.0f}%" + (" (L2)" if r["l2"] else ""),
                      f"{r['cublas_us']:.1f}", f"{r['speedup_vs_cublas']:.2f}x",
                      f"{r['tflops']:.1f}"])
    print_columns(table)
    if args.json:
        save_report(args.json, dev, args, rows)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
