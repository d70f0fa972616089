#!/usr/bin/env python3
"""Benchmarks programs/attention/prefill.tasm on the GPU against PyTorch's flash attention.

For each configuration (causal and full by default): the kernel's median time (vm-run --bench,
CUDA events), its TFLOP/s (4 * batch * heads * seq_q * seq_k * HD, halved when causal), the same
for torch.nn.functional.scaled_dot_product_attention with the flash backend in the same process
(kv heads expanded by enable_gqa, or repeat_interleave outside the timing on older PyTorch), the
ratio, and the maximum absolute error of the kernel's output against SDPA's on the same inputs.

    python3 scripts/bench_prefill.py [--build DIR] [--batch 4] [--heads 32] [--kv-heads 8]
                                     [--hd 128] [--seq 4096] [--causal 1,0] [--at f16]
                                     [--iters 20] [--json FILE] [-D NAME=VALUE]...
    python3 scripts/bench_prefill.py --dry-run    # print the commands; needs no GPU

Needs PyTorch with CUDA and numpy (the GPU machine) and a build with tools/tilus-asm and
tools/vm-run (BUILD_DIR, default build; `--build .carry` after scripts/gpu_run.sh --pack).
Exit status 1 when a run fails or the error exceeds --max-err.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import print_columns, save_report, torch_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flops(batch, heads, seq_q, seq_k, hd, causal):
    f = 4 * batch * heads * seq_q * seq_k * hd
    return f // 2 if causal else f


def kernel_commands(args, work, causal):
    """The tilus-asm and vm-run command lines of one configuration."""
    asm = os.path.join(args.build, "tools", "tilus-asm")
    run = os.path.join(args.build, "tools", "vm-run")
    tbc = os.path.join(work, f"prefill_c{causal}.tbc")
    assemble = [asm, args.program, "-o", tbc, "-D", f"AT={args.at}", "-D", f"HD={args.hd}",
                "-D", f"CAUSAL={causal}"]
    for d in args.D:
        assemble += ["-D", d]
    out = os.path.join(work, f"o_c{causal}.npy")
    launch = [run, tbc, "--kernel", "attention", "--device", "cuda",
              "--arg", "q_ptr=@" + os.path.join(work, "q.npy"),
              "--arg", "k_ptr=@" + os.path.join(work, "k.npy"),
              "--arg", "v_ptr=@" + os.path.join(work, "v.npy"),
              "--arg", f"o_ptr=zeros:{args.at}[{args.batch * args.seq * args.heads * args.hd}]",
              "--arg", f"batch={args.batch}", "--arg", f"seq_q={args.seq}",
              "--arg", f"seq_k={args.seq}", "--arg", f"heads={args.heads}",
              "--arg", f"kv_heads={args.kv_heads}", "--arg", f"scale={args.hd ** -0.5!r}",
              "--save", f"o_ptr={out}", "--bench", "--warmup", "3", "--iters", str(args.iters),
              "--json"]
    return assemble, launch, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--program",
                    default=os.path.join(ROOT, "programs", "attention", "prefill.tasm"))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hd", type=int, default=128)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--causal", default="1,0")
    ap.add_argument("--at", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-err", type=float, default=2e-2,
                    help="largest max abs error against SDPA that passes")
    ap.add_argument("--json", default="")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the commands of every configuration and exit (no GPU needed)")
    ap.add_argument("-D", action="append", default=[], help="tuning constant NAME=VALUE")
    args = ap.parse_args()
    if args.heads % args.kv_heads:
        ap.error("--kv-heads must divide --heads")
    causals = [int(c) for c in args.causal.split(",")]
    work = tempfile.mkdtemp(prefix="bench_prefill_")

    if args.dry_run:
        for causal in causals:
            assemble, launch, _ = kernel_commands(args, work, causal)
            print(" ".join(assemble))
            print(" ".join(launch))
            print(f"# {flops(args.batch, args.heads, args.seq, args.seq, args.hd, causal)} "
                  f"flop")
        return 0

    import numpy as np
    import torch
    import torch.nn.functional as F
    dtype = torch.float16 if args.at == "f16" else torch.bfloat16
    dev = torch.cuda.get_device_name()
    torch.manual_seed(0)
    b, h, kvh, s, hd = args.batch, args.heads, args.kv_heads, args.seq, args.hd
    # the contract's layout: q, o [b, s, h, hd], k, v [b, s, kvh, hd]
    q = torch.randn(b, s, h, hd, device="cuda", dtype=dtype)
    k = torch.randn(b, s, kvh, hd, device="cuda", dtype=dtype)
    v = torch.randn(b, s, kvh, hd, device="cuda", dtype=dtype)
    for name, t in (("q", q), ("k", k), ("v", v)):
        arr = t.cpu().contiguous()
        # bf16 travels as raw bits (<u2), as vm-run reads it
        arr = arr.view(torch.int16).numpy().view(np.uint16) if args.at == "bf16" else arr.numpy()
        np.save(os.path.join(work, f"{name}.npy"), arr.reshape(-1))
    # SDPA takes [b, h, s, hd]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    try:
        F.scaled_dot_product_attention(qt[:, :, :1], kt[:, :, :1], vt[:, :, :1], enable_gqa=True)
        gqa = {"enable_gqa": True}
    except TypeError:  # PyTorch before 2.5
        kt = kt.repeat_interleave(h // kvh, dim=1)
        vt = vt.repeat_interleave(h // kvh, dim=1)
        gqa = {}
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    for causal in causals:
        row = {"causal": causal, "batch": b, "heads": h, "kv_heads": kvh, "seq": s, "hd": hd,
               "at": args.at, "flop": flops(b, h, s, s, hd, causal)}
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            def sdpa():
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal), **gqa)
            ref = sdpa().transpose(1, 2).float()
            row["sdpa_ms"] = torch_bench(sdpa, warmup=5, iters=args.iters)
        assemble, launch, out = kernel_commands(args, work, causal)
        print(f"causal={causal}: " + " ".join(launch), file=sys.stderr, flush=True)
        r = subprocess.run(assemble, capture_output=True, text=True)
        if r.returncode != 0:
            row["error"] = r.stderr.strip()[-500:]
            rows.append(row)
            continue
        p = subprocess.run(launch, capture_output=True, text=True)
        try:
            rep = json.loads(p.stdout)
            row["ms"] = rep["bench"]["median_ms"]
        except Exception:
            row["error"] = (p.stderr or p.stdout).strip()[-500:]
            rows.append(row)
            continue
        o = np.load(out)
        o = (torch.from_numpy(o.view(np.int16)).view(torch.bfloat16) if args.at == "bf16"
             else torch.from_numpy(o))
        o = o.reshape(b, s, h, hd).cuda().float()
        row["max_abs_err"] = (o - ref).abs().max().item()
        row["tflops"] = row["flop"] / (row["ms"] * 1e-3) / 1e12
        row["sdpa_tflops"] = row["flop"] / (row["sdpa_ms"] * 1e-3) / 1e12
        row["of_sdpa"] = row["sdpa_ms"] / row["ms"]
        rows.append(row)

    print(f"device: {dev}; AT={args.at}; torch {torch.__version__}; "
          f"tuning: {' '.join(args.D) or 'defaults'}")
    hdr = ["causal", "b", "h", "kvh", "seq", "hd", "ms", "TFLOP/s", "SDPA ms", "SDPA TFLOP/s",
           "of SDPA", "max abs err"]
    table = [hdr]
    for r in rows:
        head = [str(r["causal"]), str(b), str(h), str(kvh), str(s), str(hd)]
        if "error" in r:
            table.append(head + ["failed: " + r["error"].splitlines()[-1][:60], "", "", "", "",
                                 ""])
            continue
        table.append(head + [f"{r['ms']:.3f}", f"{r['tflops']:.1f}", f"{r['sdpa_ms']:.3f}",
                             f"{r['sdpa_tflops']:.1f}", f"{r['of_sdpa'] * 100:.0f}%",
                             f"{r['max_abs_err']:.2e}"])
    print_columns(table)
    if args.json:
        save_report(args.json, dev, args, rows)
    ok = all("error" not in r and r["max_abs_err"] <= args.max_err for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
