#!/usr/bin/env python3
"""Benchmarks programs/attention/ and programs/layers/ on the GPU against baselines measured in
the same run.

- prefill.tasm (batch 4, heads 32, kv_heads 8, HD 128, seq 4096, causal and full, f16; the
  default wgmma design and the mma.sync design, HOPPER=0) against PyTorch's
  scaled_dot_product_attention with the flash backend: TFLOP/s and the ratio.
- decode_paged.tasm (batch 16 and 64, context 4096 and 32768, HD 128, GQA 8, page 16, f16,
  f8e4m3 and u4 caches, a shuffled block table) against the device-to-device copy bandwidth:
  the KV bytes read per second as a fraction of a copy moving as many bytes (reads + writes).
- rmsnorm.tasm (with the residual add), swiglu_quant.tasm (f8e4m3 and i8) and rotary.tasm (neox
  and interleaved, in place on q and k) against the same copy bandwidth, for the bytes each
  reads plus writes.

    python3 scripts/bench_attention.py [--build DIR] [--only prefill,decode,layers]
                                       [--iters N] [--json FILE] [--dry-run]
                                       [--kv-types f16,f8e4m3,u4] [--decode-variants 'A=1;A=2,B=3']
                                       [--decode-programs attention/decode_paged.tasm,old.tasm]
                                       [--prefill-variants ';HOPPER=0']

"regs" is each kernel's registers per thread, with "+NB" when it spills N bytes of local memory
per thread (vm-run's report).

Needs PyTorch with CUDA (the GPU machine) and a build with tools/tilus-asm and tools/vm-run
(--build, default $BUILD_DIR or build). Times are medians of CUDA-event timed launches (vm-run
--bench for the programs, the same method here for PyTorch). --dry-run assembles every program
and prints the vm-run commands without a GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import (L2_BYTES, bits_of, copy_bench, cuda_device, print_columns, save_i32_npy,
                          torch_bench)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Runner:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.asm = os.path.join(args.build, "tools", "tilus-asm")
        self.run = os.path.join(args.build, "tools", "vm-run")
        # vm-run links libtilusvm.so.0, which a packed build (.carry) keeps in vm/
        lib = os.path.abspath(os.path.join(args.build, "vm"))
        old = os.environ.get("LD_LIBRARY_PATH", "")
        os.environ["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")

    def assemble(self, program, name, defines):
        tbc = os.path.join(self.work, name + ".tbc")
        # a program of programs/, or another file (a path as given)
        path = os.path.join(ROOT, "programs", program)
        cmd = [self.asm, path if os.path.isfile(path) else program, "-o", tbc]
        for k, v in defines.items():
            cmd += ["-D", f"{k}={v}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("tilus-asm: " + (r.stderr or r.stdout).strip()[-400:])
        return tbc

    def bench(self, tbc, kernel, argv):
        """The kernel's median time (ms), registers per thread and local memory bytes (vm-run's
        report), or None on a dry run."""
        cmd = [self.run, tbc, "--kernel", kernel, "--device", "cuda", "--bench", "--iters",
               str(self.args.iters), "--json"]
        for a in argv:
            cmd += ["--arg", a]
        if self.args.dry_run:
            print(" ".join(cmd))
            return None
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            rep = json.loads(p.stdout)
            return {"ms": rep["bench"]["median_ms"], "registers": rep.get("registers", 0),
                    "local_bytes": rep.get("local_bytes", 0)}
        except Exception:
            raise RuntimeError("vm-run: " + (p.stderr or p.stdout).strip()[-400:])


def prefill_rows(r, args):
    rows = []
    B, H, KVH, HD, S = 4, 32, 8, 128, args.seq
    # tuning variants as for decode; the default adds the mma.sync design (HOPPER=0)
    variants = args.prefill_variants.split(";")
    for causal in (1, 0):
        flops = 4.0 * B * H * S * S * HD * (0.5 if causal else 1.0)
        base_row = {}
        if not args.dry_run:
            import torch
            import torch.nn.functional as F
            q = torch.randn(B, S, H, HD, device="cuda", dtype=torch.float16).transpose(1, 2)
            k = torch.randn(B, S, KVH, HD, device="cuda", dtype=torch.float16).transpose(1, 2)
            v = torch.randn(B, S, KVH, HD, device="cuda", dtype=torch.float16).transpose(1, 2)
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                ctx = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            except ImportError:  # older PyTorch
                ctx = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                             enable_mem_efficient=False)
            try:
                with ctx():
                    F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal),
                                                   enable_gqa=True)
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal),
                                                            enable_gqa=True)
                name = "SDPA flash (GQA)"
            except (TypeError, RuntimeError):
                ke = k.repeat_interleave(H // KVH, dim=1)
                ve = v.repeat_interleave(H // KVH, dim=1)
                fn = lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=bool(causal))
                name = "SDPA flash (K/V expanded)"
            with ctx():
                base = torch_bench(fn, iters=args.iters)
            base_row = {"baseline": name, "base_ms": base,
                        "base_rate": flops / (base * 1e-3) / 1e12}
            del q, k, v
            torch.cuda.empty_cache()
        for variant in variants:
            tuning = dict(d.split("=", 1) for d in variant.split(",") if d)
            label = "".join(f" {k}={v}" for k, v in tuning.items())
            row = {"bench": "prefill", "case": f"B{B} H{H}/{KVH} HD{HD} S{S} " +
                   ("causal" if causal else "full") + f" f16{label}", **base_row}
            try:
                name = f"prefill_{causal}" + "".join(f"_{k}{v}" for k, v in tuning.items())
                tbc = r.assemble("attention/prefill.tasm", name,
                                 {"AT": "f16", "HD": HD, "CAUSAL": causal, **tuning})
                n = B * S * H * HD
                nk = B * S * KVH * HD
                res = r.bench(tbc, "attention", [
                    f"q_ptr=rand:f16[{n}]:1", f"k_ptr=rand:f16[{nk}]:2",
                    f"v_ptr=rand:f16[{nk}]:3", f"o_ptr=zeros:f16[{n}]", f"batch={B}",
                    f"seq_q={S}", f"seq_k={S}", f"heads={H}", f"kv_heads={KVH}",
                    f"scale={HD ** -0.5}"])
                if res is not None:
                    ms = res["ms"]
                    row.update({"ms": ms, "rate": flops / (ms * 1e-3) / 1e12,
                                "unit": "TFLOP/s", "registers": res["registers"],
                                "local_bytes": res["local_bytes"]})
                    if "base_ms" in row:
                        row["ratio"] = row["base_ms"] / ms
            except RuntimeError as e:
                row["error"] = str(e)
            rows.append(row)
    return rows


class CopyBaseline:
    def __init__(self, args):
        self.args = args
        self.cache = {}

    def ms(self, nbytes):
        """A device-to-device copy that reads nbytes / 2 and writes as many."""
        if self.args.dry_run:
            return None
        import torch
        half = (nbytes // 2 + 15) // 16 * 16
        if half not in self.cache:
            src = torch.empty(half, device="cuda", dtype=torch.uint8)
            dst = torch.empty_like(src)
            self.cache[half] = copy_bench(dst, src, iters=self.args.iters)
            del src, dst
            torch.cuda.empty_cache()
        return self.cache[half]


def bandwidth_row(row, res, nbytes, copy):
    """Fill a row of a bandwidth-bound program from its bench result `res`: nbytes moved (the
    copy baseline moves as many, reads plus writes)."""
    if res is None:
        return row
    ms = res["ms"]
    row.update({"ms": ms, "rate": nbytes / (ms * 1e-3) / 1e9, "unit": "GB/s",
                "l2": nbytes <= L2_BYTES, "registers": res["registers"],
                "local_bytes": res["local_bytes"]})
    base = copy.ms(nbytes)
    if base is not None:
        row.update({"baseline": "D2D copy", "base_ms": base,
                    "base_rate": nbytes / (base * 1e-3) / 1e9, "ratio": base / ms})
    return row


def decode_rows(r, args, copy):
    import random
    rows = []
    H, KVH, PAGE = 32, 8, 16
    HD = args.decode_hd
    rng = random.Random(0)
    # tuning variants: ";"-separated sets of ","-separated NAME=VALUE (empty: the defaults)
    variants = [v for v in args.decode_variants.split(";")] or [""]
    programs = args.decode_programs.split(",")
    for prog, kt, variant in [(p, kt, v) for p in programs for kt in args.kv_types.split(",")
                              for v in variants]:
        tuning = dict(d.split("=", 1) for d in variant.split(",") if d)
        label = "".join(f" {k}={v}" for k, v in tuning.items())
        if len(programs) > 1:  # rows of other versions of the program name their file
            label += " " + os.path.basename(prog)
        try:
            name = f"decode{programs.index(prog)}_{kt}" + "".join(f"_{k}{v}" for k, v in tuning.items())
            tbc = r.assemble(prog, name,
                             {"AT": "f16", "KT": kt, "HD": HD, "PAGE": PAGE, **tuning})
        except RuntimeError as e:
            rows.append({"bench": "decode", "case": f"KT={kt}{label}", "error": str(e)})
            continue
        for batch in (16, 64):
            for ctx in (4096, 32768):
                row = {"bench": "decode",
                       "case": f"B{batch} ctx{ctx} H{H}/{KVH} HD{HD} {kt}{label}"}
                max_pages = ctx // PAGE
                num_pages = batch * max_pages
                table = list(range(num_pages))  # a shuffled assignment of pages
                rng.shuffle(table)
                tpath = save_i32_npy(os.path.join(r.work, f"table_{batch}_{ctx}.npy"), table,
                                     (batch, max_pages))
                lpath = save_i32_npy(os.path.join(r.work, f"lens_{batch}_{ctx}.npy"),
                                     [ctx] * batch, (batch,))
                elems = num_pages * PAGE * KVH * HD
                kv_bytes = 2 * elems * bits_of(kt) // 8
                try:
                    res = r.bench(tbc, "decode", [
                        f"q_ptr=rand:f16[{batch * H * HD}]:1",
                        f"k_cache=zeros:{kt}[{elems}]", f"v_cache=zeros:{kt}[{elems}]",
                        f"block_table={tpath}", f"seq_lens={lpath}",
                        f"o_ptr=zeros:f16[{batch * H * HD}]", f"batch={batch}", f"heads={H}",
                        f"kv_heads={KVH}", f"num_pages={num_pages}", f"max_pages={max_pages}",
                        f"scale={HD ** -0.5}", "k_scale=1.0", "v_scale=1.0"])
                    row["kv_bytes"] = kv_bytes
                    bandwidth_row(row, res, kv_bytes, copy)
                except RuntimeError as e:
                    row["error"] = str(e)
                rows.append(row)
    return rows


def layer_rows(r, args, copy):
    rows = []
    m, n = args.tokens, 8192
    row = {"bench": "rmsnorm", "case": f"M{m} N{n} f16 +residual"}
    try:
        tbc = r.assemble("layers/rmsnorm.tasm", "rmsnorm", {"AT": "f16", "N": n})
        res = r.bench(tbc, "rmsnorm", [f"x_ptr=rand:f16[{m * n}]:1", f"r_ptr=rand:f16[{m * n}]:2",
                                      f"w_ptr=rand:f16[{n}]:3", f"y_ptr=zeros:f16[{m * n}]",
                                      f"m={m}", "eps=1e-6"])
        bandwidth_row(row, res, 4 * m * n * 2, copy)  # x, r read; r, y written
    except RuntimeError as e:
        row["error"] = str(e)
    rows.append(row)
    n = 14336
    for qt in ("f8e4m3", "i8"):
        row = {"bench": "swiglu_quant", "case": f"M{m} N{n} f16 -> {qt}"}
        try:
            tbc = r.assemble("layers/swiglu_quant.tasm", f"swiglu_{qt}",
                             {"AT": "f16", "QT": qt, "N": n})
            res = r.bench(tbc, "swiglu_quant", [f"x_ptr=rand:f16[{2 * m * n}]:1",
                                               f"q_ptr=zeros:{qt}[{m * n}]",
                                               f"s_ptr=zeros:f32[{m}]", f"m={m}"])
            bandwidth_row(row, res, 2 * m * n * 2 + m * n + 4 * m, copy)
        except RuntimeError as e:
            row["error"] = str(e)
        rows.append(row)
    # rotary embedding in place on q and k of every token (32 query and 8 kv heads of 128),
    # positions 0..tokens-1 (each row of the cos/sin table read once): q and k read and written,
    # the table's rows and the positions read
    heads, kv_heads, hd = 32, 8, 128
    pos = save_i32_npy(os.path.join(r.work, f"pos_{m}.npy"), list(range(m)), (m,))
    for style, sname in ((0, "neox"), (1, "interleaved")):
        row = {"bench": "rotary", "case": f"T{m} H{heads}/{kv_heads} HD{hd} f16 {sname}"}
        try:
            tbc = r.assemble("layers/rotary.tasm", f"rotary_{style}",
                             {"AT": "f16", "HD": hd, "STYLE": style})
            res = r.bench(tbc, "rope", [f"pos_ptr={pos}", f"q_ptr=rand:f16[{m * heads * hd}]:1",
                                        f"k_ptr=rand:f16[{m * kv_heads * hd}]:2",
                                        f"cs_ptr=rand:f32[{m * hd}]:3", f"tokens={m}",
                                        f"heads={heads}", f"kv_heads={kv_heads}", f"max_pos={m}"])
            bandwidth_row(row, res, 2 * m * (heads + kv_heads) * hd * 2 + m * hd * 4 + 4 * m,
                          copy)
        except RuntimeError as e:
            row["error"] = str(e)
        rows.append(row)
    return rows


def print_table(rows, device):
    print(f"device: {device}")
    hdr = ["bench", "case", "regs", "ms", "rate", "baseline (same run)", "base rate", "ratio"]
    table = [hdr]
    for r in rows:
        if "error" in r:
            table.append([r["bench"], r["case"], "", "failed: " +
                          r["error"].splitlines()[-1][:70], "", "", "", ""])
            continue
        unit = r.get("unit", "")
        # registers per thread, and the local memory of a kernel that spills
        regs = (str(r["registers"]) + (f"+{r['local_bytes']}B" if r["local_bytes"] else "")
                if "registers" in r else "-")
        table.append([r["bench"], r["case"], regs, f"{r['ms']:.4f}" if "ms" in r else "-",
                      f"{r['rate']:.1f} {unit}" if "rate" in r else "-",
                      r.get("baseline", "-"),
                      f"{r['base_rate']:.1f} {unit}" if "base_rate" in r else "-",
                      (f"{r['ratio'] * 100:.0f}%" + (" (L2)" if r.get("l2") else ""))
                      if "ratio" in r else "-"])
    print_columns(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--only", default="prefill,decode,layers")
    ap.add_argument("--kv-types", default="f16,f8e4m3,u4")
    ap.add_argument("--decode-variants", default="",
                    help="decode tuning variants, e.g. 'SPLITS=1;SPLITS=8;SPLITS=16,STAGES=6' "
                         "(';' between variants, ',' between -D NAME=VALUE; empty: defaults)")
    ap.add_argument("--prefill-variants", default=";HOPPER=0",
                    help="prefill tuning variants as for --decode-variants (default ';HOPPER=0': "
                         "the default wgmma design and the mma.sync design)")
    ap.add_argument("--decode-programs", default="attention/decode_paged.tasm",
                    help="decode programs to run, ','-separated: paths under programs/ or of "
                         "other files (e.g. an earlier version of decode_paged.tasm), each with "
                         "the decode contract (default attention/decode_paged.tasm)")
    ap.add_argument("--decode-hd", type=int, default=128,
                    help="head dimension of the decode rows (default 128)")
    ap.add_argument("--seq", type=int, default=4096, help="prefill sequence length")
    ap.add_argument("--tokens", type=int, default=4096, help="rows of the layer benchmarks")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    ap.add_argument("--dry-run", action="store_true",
                    help="assemble and print the vm-run commands; no GPU needed")
    args = ap.parse_args()

    only = set(args.only.split(","))
    unknown = only - {"prefill", "decode", "layers"}
    if unknown:
        ap.error("unknown --only entries: " + ",".join(sorted(unknown)))
    device = cuda_device("bench_attention", args.dry_run)
    if device is None:
        return 2
    work = tempfile.mkdtemp(prefix="bench_attention_")
    r = Runner(args, work)
    copy = CopyBaseline(args)
    rows = []
    if "prefill" in only:
        rows += prefill_rows(r, args)
    if "decode" in only:
        rows += decode_rows(r, args, copy)
    if "layers" in only:
        rows += layer_rows(r, args, copy)
    print_table(rows, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "rows": rows}, f, indent=1)
    return 0 if all("error" not in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
