"""Helpers shared by the benchmark scripts (bench_quant, bench_attention, bench_prefill,
bench_layouts, gpu_run.sh's baselines): timing PyTorch baselines with CUDA events, element
widths of ISA type names, int32 .npy files written without NumPy, the printed table and the
--json report."""
import json
import statistics
import struct
import sys

L2_BYTES = 50 * 2**20  # the H100's L2: data this small is served from L2 on repeated launches


def cuda_device(tool, dry_run):
    """The CUDA device's name ("dry run" with --dry-run), or None after saying on stderr that
    there is none (PyTorch is imported only when a device is wanted)."""
    if dry_run:
        return "dry run"
    import torch
    if not torch.cuda.is_available():
        print(f"{tool}: no CUDA device (use --dry-run here)", file=sys.stderr)
        return None
    return torch.cuda.get_device_name()


def bits_of(t):
    """Bits of one element of an ISA type name: f16, bf16, uN, iN, fNeEmM."""
    if t in ("f16", "bf16"):
        return 16
    if t[0] in "ui":
        return int(t[1:])
    return int(t[1:t.index("e")])


def torch_bench(fn, warmup=10, iters=50):
    """Median milliseconds of `fn` over `iters` CUDA-event-timed calls after `warmup` calls."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for s, e in events:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def copy_bench(dst, src, iters=50, tries=3):
    """Milliseconds of dst.copy_(src): the best of `tries` medians (a single median of fresh
    buffers was seen 30 % slow next to the same byte count moments later)."""
    return min(torch_bench(lambda: dst.copy_(src), iters=iters) for _ in range(tries))


def save_i32_npy(path, values, shape):
    """Write int32 values (C order) as a version 1.0 .npy file; returns vm-run's '@path'."""
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join(f"{d}, " for d in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}i", *values))
    return "@" + path


def print_columns(table):
    """Print rows of strings (the first one the header) in left-aligned columns."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def save_report(path, device, args, rows):
    """Write --json's report: the device, AT, the -D tuning and the rows."""
    with open(path, "w") as f:
        json.dump({"device": device, "at": args.at, "tuning": args.D, "rows": rows}, f, indent=1)
