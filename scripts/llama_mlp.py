#!/usr/bin/env python3
"""An engine-like end-to-end check of tilusvm.torch.QuantizedLinear: a Llama-shaped decoder MLP
(down(silu(gate(x)) * up(x)), hidden 8192, intermediate 28672, random weights) in PyTorch f16,
its three linears swapped for QuantizedLinear (u4 and i6, group size 128), one decode step at
batch 1 and 16, eager and as a CUDA graph, against the f16 original. Prints one table:

- error of the quantised MLP against the same MLP computed in f32 with the dequantised weights
  (what the kernels must compute: max |y - ref| / max |ref|), which must stay below 1e-2;
- error against the f16 original (the quantisation's own error, relative l2);
- the time of one decode step (CUDA events around 100 steps) and the speed-up over f16;
- every CUDA-graph replay equal to the eager result, up to the order in which split-K adds its
  f32 partial sums (max |replay - eager| / max |eager| below 2e-3; docs/quant.md).

Exits 1 if a check fails. Needs a CUDA GPU and PyTorch. From a build tree:

    python3 scripts/llama_mlp.py --build build        # libtilusvm from build/vm
    python3 scripts/llama_mlp.py --build .carry       # the GPU machine's pack (gpu_run.sh --pack)
"""
import argparse
import glob
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", help="build directory with vm/libtilusvm.so* (sets TILUSVM_LIBRARY)")
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--intermediate", type=int, default=28672)
    p.add_argument("--types", default="u4,i6", help="weight types, comma-separated")
    p.add_argument("--group-size", type=int, default=128)
    p.add_argument("--batches", default="1,16")
    p.add_argument("--iters", type=int, default=100, help="timed decode steps per measurement")
    return p.parse_args()


def setup_paths(args):
    if args.build and not os.environ.get("TILUSVM_LIBRARY"):
        found = sorted(glob.glob(os.path.join(args.build, "vm", "libtilusvm.so*")), key=len)
        if not found:
            sys.exit(f"llama_mlp: no libtilusvm.so* in {args.build}/vm")
        os.environ["TILUSVM_LIBRARY"] = found[0]
    sys.path.insert(0, os.path.join(ROOT, "python"))


class LlamaMLP:
    """Built lazily: torch is imported after the paths are set."""

    @staticmethod
    def make(hidden, intermediate, device, dtype):
        import torch
        from torch import nn

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate_proj = nn.Linear(hidden, intermediate, bias=False, device=device,
                                           dtype=dtype)
                self.up_proj = nn.Linear(hidden, intermediate, bias=False, device=device,
                                         dtype=dtype)
                self.down_proj = nn.Linear(intermediate, hidden, bias=False, device=device,
                                           dtype=dtype)

            def forward(self, x):
                return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) *
                                      self.up_proj(x))

        return MLP()


def quantized_copy(mlp, weight_type, group_size):
    """The MLP with each linear replaced by a QuantizedLinear of the same weights."""
    import copy
    from tilusvm.torch import QuantizedLinear
    q = copy.copy(mlp)  # shares nothing that is replaced below
    q._modules = dict(mlp._modules)
    for name in ("gate_proj", "up_proj", "down_proj"):
        q._modules[name] = QuantizedLinear.from_linear(mlp._modules[name], weight_type,
                                                       group_size)
    return q


def dequantised_reference(qmlp, x):
    """The quantised MLP's function in f32 with the dequantised weights, one linear at a time."""
    import torch

    def linear(layer, v):
        w = layer.dequantized_weight().float()
        out = v.float() @ w.t()
        del w
        return out

    g = linear(qmlp.gate_proj, x)
    u = linear(qmlp.up_proj, x)
    return linear(qmlp.down_proj, torch.nn.functional.silu(g) * u)


def time_eager(fn, x, iters):
    import torch
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def capture(fn, x):
    """(graph, static input, static output) of fn, warmed up on a side stream first."""
    import torch
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = fn(static_x)
    return graph, static_x, static_y


def time_graph(graph, iters):
    import torch
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def main():
    args = parse_args()
    setup_paths(args)
    import torch
    import tilusvm
    if not torch.cuda.is_available():
        sys.exit("llama_mlp: needs a CUDA device")
    torch.manual_seed(0)
    device, dtype = "cuda", torch.float16
    types = [t for t in args.types.split(",") if t]
    batches = [int(b) for b in args.batches.split(",") if b]
    print(f"libtilusvm {tilusvm.version()} from {tilusvm.library_path()}; PyTorch "
          f"{torch.__version__}; {torch.cuda.get_device_name()}")
    print(f"Llama MLP: hidden {args.hidden}, intermediate {args.intermediate}, f16 activations, "
          f"group size {args.group_size}")
    with torch.no_grad():
        mlp = LlamaMLP.make(args.hidden, args.intermediate, device, dtype)
        f16_bytes = sum(p.numel() * p.element_size() for p in mlp.parameters())
        inputs = {b: torch.randn(b, args.hidden, device=device, dtype=dtype) for b in batches}
        f16_out = {b: mlp(x) for b, x in inputs.items()}
        f16_time = {}
        for b, x in inputs.items():
            graph, gx, gy = capture(mlp, x)
            f16_time[(b, "eager")] = time_eager(mlp, x, args.iters)
            f16_time[(b, "graph")] = time_graph(graph, args.iters)
            del graph, gx, gy
        rows, failures = [], []
        for wt in types:
            t0 = time.monotonic()
            q = quantized_copy(mlp, wt, args.group_size)
            torch.cuda.synchronize()
            quantise_s = time.monotonic() - t0
            q_bytes = sum(b.numel() * b.element_size() for b in q.buffers())
            print(f"{wt}: quantised in {quantise_s:.1f} s, weights {q_bytes / 2**20:.0f} MiB "
                  f"(f16: {f16_bytes / 2**20:.0f} MiB)")
            for b, x in inputs.items():
                t0 = time.monotonic()
                y = q(x)  # the first call at this batch compiles (or loads) the kernels
                torch.cuda.synchronize()
                first_s = time.monotonic() - t0
                ref = dequantised_reference(q, x)
                err_deq = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                err_f16 = (torch.linalg.norm(y.float() - f16_out[b].float()) /
                           torch.linalg.norm(f16_out[b].float())).item()
                del ref
                if not err_deq < 1e-2:
                    failures.append(f"{wt} batch {b}: error {err_deq:.2e} against the "
                                    f"dequantised reference")
                graph, gx, gy = capture(q, x)
                replays_equal = True
                for _ in range(3):  # replays with new inputs, checked against eager calls
                    fresh = torch.randn_like(x)
                    gx.copy_(fresh)
                    graph.replay()
                    eager = q(fresh).float()
                    # split-K adds f32 partial sums in no fixed order (docs/quant.md)
                    replays_equal &= ((gy.float() - eager).abs().max() /
                                      eager.abs().max()).item() < 2e-3
                if not replays_equal:
                    failures.append(f"{wt} batch {b}: a CUDA-graph replay differs from eager")
                for mode in ("eager", "graph"):
                    us = (time_eager(q, x, args.iters) if mode == "eager"
                          else time_graph(graph, args.iters))
                    rows.append((wt, b, mode, f16_time[(b, mode)], us, err_deq, err_f16,
                                 replays_equal if mode == "graph" else None, first_s))
                del graph, gx, gy
            del q
            torch.cuda.empty_cache()
    print()
    print("| weights | batch | mode | f16 µs | tilusvm µs | speed-up | err vs dequantised "
          "(max rel) | err vs f16 (rel l2) | graph = eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for wt, b, mode, f16_us, us, err_deq, err_f16, equal, _ in rows:
        equal_text = "" if equal is None else ("yes" if equal else "NO")
        print(f"| {wt} | {b} | {mode} | {f16_us:.1f} | {us:.1f} | {f16_us / us:.2f}x | "
              f"{err_deq:.1e} | {err_f16:.1e} | {equal_text} |")
    print()
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("llama_mlp: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
