"""PyTorch integration: ``QuantizedLinear``, a linear layer with low-bit weights that runs
``programs/quant/a16wx.tasm`` (docs/quant.md), as the custom operator
``torch.ops.tilusvm.a16wx_matmul`` with a fake (meta) implementation, so that
``torch.compile`` and CUDA graphs can trace it.

    from tilusvm.torch import QuantizedLinear
    q = QuantizedLinear.from_linear(linear, "u4", group_size=128)   # or QuantizedLinear(K, N, "i6", 128)
    y = q(x)                                                       # x: [..., K] f16 on the GPU

The quantisation is the one of ``tilusvm.quant`` (round to nearest into the weight type,
group-wise scales, zero points for unsigned types), computed with PyTorch on the weight's
device in float64, so it gives the same codes as the NumPy version.
"""
import functools
import threading

import torch
from torch import nn

from . import _dtypes, quant
from ._module import load

_TORCH_AT = {torch.float16: "f16", torch.bfloat16: "bf16"}
_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _program(activation, weight_type, n, k, group_size, zero_point, bm, prefill):
    """The a16wx module for one shape (assembled once per process): the decode kernel with
    `bm` rows per block, or the prefill kernel (docs/quant.md)."""
    defines = quant.a16wx_defines(weight_type, n, k, group_size, activation, zero_point)
    if prefill:
        defines["PREFILL"] = 1
    else:
        defines["BM"] = bm
    return load(quant.a16wx_path(), defines=defines)


def _module_for(activation, weight_type, n, k, group_size, zero_point, bm=16, prefill=False):
    with _lock:  # the prefill kernel has no BM: one module whatever bm says
        return _program(activation, weight_type, n, k, group_size, bool(zero_point),
                        0 if prefill else bm, bool(prefill))


# ---- the custom operator --------------------------------------------------------------------

def _matmul(x, wq, scales, zeros, weight_type, group_size, n, prefill):
    """C[..., N] = x[..., K] @ ((W - Z) * S) by a16wx's matmul (the decode or the prefill
    kernel, whose packed layout `wq` must be), on x's device."""
    k = x.shape[-1]
    activation = _TORCH_AT.get(x.dtype)
    if activation is None:
        raise TypeError(f"QuantizedLinear: activations must be float16 or bfloat16, got "
                        f"{x.dtype}")
    a = x.reshape(-1, k)
    if not a.is_contiguous():
        a = a.contiguous()
    m = a.shape[0]
    out = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)  # C[m, N] in memory
    if m > 0:
        module = _module_for(activation, weight_type, n, k, group_size, zeros.numel() > 0,
                             8 if m <= 8 else 16, prefill)
        kernel = module["matmul"]
        if out.is_cuda and torch.cuda.is_current_stream_capturing():
            # Split-K shapes need a workspace (docs/quant.md). A captured launch cannot grow the
            # runtime's workspace of the capturing stream, which an eager warm-up on another
            # stream does not prepare: take it from PyTorch's allocator instead (the graph's
            # memory pool), its zeroed regions cleared by memset nodes of the graph.
            size = kernel.workspace_size(a, wq, scales, zeros, out, m)
            workspace = torch.empty(size, dtype=torch.uint8, device=out.device) if size else None
            kernel(a, wq, scales, zeros, out, m, workspace=workspace)
        else:
            kernel(a, wq, scales, zeros, out, m)
    return out


def _matmul_impl(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                 weight_type: str, group_size: int, n: int) -> torch.Tensor:
    """C[..., N] = x[..., K] @ ((W - Z) * S) by a16wx's decode kernel, on x's device."""
    return _matmul(x, wq, scales, zeros, weight_type, group_size, n, False)


def _prefill_impl(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                  weight_type: str, group_size: int, n: int) -> torch.Tensor:
    """The same with a16wx's prefill kernel (-D PREFILL=1) and its packed layout of W."""
    return _matmul(x, wq, scales, zeros, weight_type, group_size, n, True)


def _matmul_fake(x, wq, scales, zeros, weight_type, group_size, n):
    return x.new_empty((*x.shape[:-1], n))


_SCHEMA = ("(Tensor x, Tensor wq, Tensor scales, Tensor zeros, str weight_type, int group_size, "
           "int n) -> Tensor")

# Registered directly with torch.library.Library (as inference engines do) rather than through
# torch.library.custom_op, whose Python dispatch costs more per call in eager mode. The real
# implementation serves CPU and CUDA tensors; the fake one gives torch.compile and meta
# tensors the output's shape and dtype.
_lib = torch.library.Library("tilusvm", "DEF")
for _name, _impl in (("a16wx_matmul", _matmul_impl), ("a16wx_prefill_matmul", _prefill_impl)):
    _lib.define(_name + _SCHEMA)
    for _key in ("CPU", "CUDA"):
        _lib.impl(_name, _impl, _key)
    if hasattr(torch.library, "register_fake"):  # PyTorch 2.4 and later
        torch.library.register_fake("tilusvm::" + _name, _matmul_fake, lib=_lib)
    elif hasattr(torch.library, "impl_abstract"):  # PyTorch 2.2 and 2.3
        torch.library.impl_abstract("tilusvm::" + _name, _matmul_fake, lib=_lib)
    else:  # older PyTorch: a meta kernel (and its autograd key, which 1.x does not fall through)
        _lib.impl(_name, _matmul_fake, "Meta")
        try:
            _lib.impl(_name, _matmul_fake, "AutogradMeta")
        except RuntimeError:
            pass
a16wx_matmul = torch.ops.tilusvm.a16wx_matmul
a16wx_prefill_matmul = torch.ops.tilusvm.a16wx_prefill_matmul


# ---- quantisation in PyTorch (tilusvm.quant's formulas) ----------------------------------

def _code_values(t, device):
    return torch.tensor(quant.code_value_list(t.name), dtype=torch.float64, device=device)


def _round_from_float64(x, dtype):
    """float64 ``x`` rounded once to ``dtype`` (to nearest, ties to even), as NumPy's and the
    ISA's conversions round. PyTorch converts float64 to float16 and bfloat16 through float32,
    rounding twice (1 + 2^-11 + 2^-40 becomes the tie 1 + 2^-11 in float32, then 1.0 instead of
    1 + 2^-10). Rounding to float32 *to odd* first (truncate, and set the last bit where
    anything was cut off) keeps the second rounding exact: float32 has more than two bits
    beyond the 11 of float16 and the 8 of bfloat16."""
    if dtype not in (torch.float16, torch.bfloat16):
        return x.to(dtype)
    y = x.to(torch.float32)
    back = y.to(torch.float64)
    inexact = back != x
    # rounded away from zero: one step back toward zero gives the truncation
    trunc = torch.where(back.abs() > x.abs(), torch.nextafter(y, torch.zeros_like(y)), y)
    odd = (trunc.view(torch.int32) | inexact.to(torch.int32)).view(torch.float32)
    return odd.to(dtype)


def quantize(weight, weight_type, group_size, zero_point=None, scale_dtype=torch.float16):
    """Quantise ``weight[K, N]`` (any float tensor) on its device. Returns ``(codes, scales,
    zeros)``: codes ``[K, N]`` int64 B-bit patterns, scales and zeros ``[K / G, N]`` of
    `scale_dtype` (zeros empty without zero points)."""
    t = _dtypes.dtype(weight_type)
    if zero_point is None:
        zero_point = quant.uses_zero_point(t)
    k, n = weight.shape
    if k % group_size:
        raise ValueError(f"K = {k} is not a multiple of the group size {group_size}")
    g = weight.detach().to(torch.float64).reshape(k // group_size, group_size, n)
    zeros = torch.empty(0, dtype=scale_dtype, device=weight.device)

    def stored(s):  # the scale as stored, back in float64; an all-zero group gets 1
        s = torch.where(s > 0, s, torch.ones_like(s))
        return _round_from_float64(s, scale_dtype).to(torch.float64)

    if t.kind == "uint" and zero_point:
        qmax = (1 << t.bits) - 1
        lo, hi = g.amin(dim=1), g.amax(dim=1)
        s = stored((hi - lo) / qmax)
        z = torch.clamp(torch.round(-lo / s), 0, qmax).to(scale_dtype).to(torch.float64)
        codes = torch.clamp(torch.round(g / s[:, None, :]) + z[:, None, :], 0, qmax).to(
            torch.int64)
        zeros = z.to(scale_dtype)
    elif t.kind in ("int", "uint"):
        qmin, qmax = quant.code_range(t)
        s = stored(g.abs().amax(dim=1) / max(qmax, 1))
        codes = torch.clamp(torch.round(g / s[:, None, :]), qmin, qmax).to(torch.int64)
        codes = codes & ((1 << t.bits) - 1)
    else:
        values = _code_values(t, weight.device)
        finite = torch.isfinite(values)
        order = torch.argsort(torch.where(finite, values, torch.full_like(values, float("inf"))),
                              stable=True)
        order = order[finite[order]]
        sorted_values = values[order].contiguous()
        s = stored(g.abs().amax(dim=1) / _dtypes.float_max(t))
        x = (g / s[:, None, :]).contiguous()
        hi = torch.clamp(torch.searchsorted(sorted_values, x), 1, len(sorted_values) - 1)
        pick_lo = (x - sorted_values[hi - 1]) <= (sorted_values[hi] - x)
        codes = order[torch.where(pick_lo, hi - 1, hi)].to(torch.int64)
    return codes.reshape(k, n), s.to(scale_dtype), zeros


def dequantize(codes, scales, zeros, weight_type, group_size):
    """``(value(q) - z) * s`` in float64, ``[K, N]``: what the kernel multiplies by."""
    t = _dtypes.dtype(weight_type)
    values = _code_values(t, codes.device)[codes]
    s = scales.to(torch.float64).repeat_interleave(group_size, dim=0)
    if zeros.numel():
        values = values - zeros.to(torch.float64).repeat_interleave(group_size, dim=0)
    return values * s


def pack_bits(codes, weight_type):
    """Pack B-bit codes (an integer tensor; a multiple of 8 of them) into uint8 storage, least
    significant bit first (ISA section 2), on the codes' device."""
    t = _dtypes.dtype(weight_type)
    b = t.storage_bits
    flat = codes.reshape(-1).to(torch.int64) & ((1 << b) - 1)
    if b == 8:
        return flat.to(torch.uint8)
    if flat.numel() % 8:
        raise ValueError("pack_bits packs a multiple of 8 codes")
    groups = flat.reshape(-1, 8)  # 8 codes of b bits fill b bytes exactly
    word = torch.zeros(groups.shape[0], dtype=torch.int64, device=codes.device)
    for j in range(8):
        word |= groups[:, j] << (j * b)
    out = torch.stack([(word >> (8 * i)) & 0xFF for i in range(b)], dim=1)
    return out.to(torch.uint8).reshape(-1)


# ---- the module -----------------------------------------------------------------------------

class QuantizedLinear(nn.Module):
    """``y = x @ W^T (+ bias)`` with ``W[out_features, in_features]`` stored in `weight_type`
    (``u1``-``u8``, ``i2``-``i8``, ``f8e4m3``, ``f8e5m2``, any ``fNeEmM``) with one scale (and
    for unsigned types one zero point) per `group_size` inputs and output. Activations are
    float16 or bfloat16 (`dtype`); the weights are quantised by :meth:`quantize_` or
    :meth:`from_linear`. in_features and group_size must be multiples of 128 (in_features of
    group_size), out_features of 16.

    With ``prefill=True`` the layer also keeps the weights in the prefill kernel's layout
    (``wq_prefill``: as many bytes again) and runs inputs of at least `prefill_from` rows
    through it (wgmma: Hopper GPUs and the CPU interpreter; out_features a multiple of 128)."""

    def __init__(self, in_features, out_features, weight_type="u4", group_size=128, bias=False,
                 dtype=torch.float16, device=None, zero_point=None, prefill=False,
                 prefill_from=128):
        super().__init__()
        t = _dtypes.dtype(weight_type)
        quant.check_shape(t, out_features, in_features, group_size)
        if dtype not in _TORCH_AT:
            raise TypeError(f"dtype must be torch.float16 or torch.bfloat16, got {dtype}")
        if prefill:
            if out_features % 128 != 0:
                raise ValueError(f"prefill=True needs out_features a multiple of 128, got "
                                 f"{out_features}")
            dev = torch.device(device) if device is not None else torch.device("cpu")
            if dev.type == "cuda" and torch.cuda.get_device_capability(dev) != (9, 0):
                raise ValueError("prefill=True needs a Hopper GPU (sm_90a: wgmma); this one is "
                                 f"sm_{''.join(map(str, torch.cuda.get_device_capability(dev)))}")
        self.prefill_from = int(prefill_from)
        self.in_features, self.out_features = in_features, out_features
        self.weight_type, self.group_size = t.name, group_size
        self.zero_point = quant.uses_zero_point(t) if zero_point is None else bool(zero_point)
        groups = in_features // group_size
        self.register_buffer("wq", torch.zeros(t.storage_bytes(in_features * out_features),
                                               dtype=torch.uint8, device=device))
        self.register_buffer("wq_prefill", torch.zeros_like(self.wq) if prefill else None)
        self.register_buffer("scales", torch.ones(groups, out_features, dtype=dtype,
                                                  device=device))
        self.register_buffer("zeros", torch.zeros(groups if self.zero_point else 0,
                                                  out_features, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device),
                                 requires_grad=False) if bias else None

    @classmethod
    def from_linear(cls, linear, weight_type="u4", group_size=128, zero_point=None,
                    prefill=False, prefill_from=128):
        """A QuantizedLinear holding `linear`'s weights (and bias) quantised, on its device."""
        w = linear.weight
        dtype = w.dtype if w.dtype in _TORCH_AT else torch.float16
        q = cls(linear.in_features, linear.out_features, weight_type, group_size,
                bias=linear.bias is not None, dtype=dtype, device=w.device,
                zero_point=zero_point, prefill=prefill, prefill_from=prefill_from)
        q.quantize_(w)
        if linear.bias is not None:
            q.bias.data.copy_(linear.bias.detach().to(dtype))
        return q

    @torch.no_grad()
    def quantize_(self, weight):
        """Quantise ``weight[out_features, in_features]`` (nn.Linear's layout) into this
        module's buffers; the packing into the kernel's layout runs as a16wx's ``pack`` kernel
        (on the GPU for CUDA buffers, on the CPU interpreter otherwise)."""
        if tuple(weight.shape) != (self.out_features, self.in_features):
            raise ValueError(f"weight of shape {tuple(weight.shape)}; expected "
                             f"({self.out_features}, {self.in_features})")
        w = weight.to(self.wq.device).t()  # W[K, N]
        codes, scales, zeros = quantize(w, self.weight_type, self.group_size, self.zero_point,
                                        self.scales.dtype)
        packed = pack_bits(codes, self.weight_type)
        del codes
        module = _module_for(_TORCH_AT[self.scales.dtype], self.weight_type, self.out_features,
                             self.in_features, self.group_size, self.zero_point)
        module["pack"](packed, self.wq)
        if self.wq_prefill is not None:
            prefill = _module_for(_TORCH_AT[self.scales.dtype], self.weight_type,
                                  self.out_features, self.in_features, self.group_size,
                                  self.zero_point, prefill=True)
            prefill["pack"](packed, self.wq_prefill)
        self.scales.copy_(scales)
        if self.zero_point:
            self.zeros.copy_(zeros)
        if self.wq.is_cuda:
            torch.cuda.current_stream(self.wq.device).synchronize()
        return self

    @torch.no_grad()
    def codes(self):
        """The weight codes ``[in_features, out_features]`` (int64), unpacked from the
        kernel's layout by a16wx's ``unpack`` kernel."""
        t = _dtypes.dtype(self.weight_type)
        module = _module_for(_TORCH_AT[self.scales.dtype], self.weight_type, self.out_features,
                             self.in_features, self.group_size, self.zero_point)
        packed = torch.empty_like(self.wq)
        module["unpack"](self.wq, packed)
        b = t.storage_bits
        if b == 8:
            return packed.to(torch.int64).reshape(self.in_features, self.out_features)
        words = torch.zeros(packed.numel() // b, dtype=torch.int64, device=packed.device)
        for i in range(b):
            words |= packed.reshape(-1, b)[:, i].to(torch.int64) << (8 * i)
        codes = torch.stack([(words >> (j * b)) & ((1 << b) - 1) for j in range(8)], dim=1)
        return codes.reshape(self.in_features, self.out_features)

    @torch.no_grad()
    def dequantized_weight(self):
        """``W[out_features, in_features]`` as the kernel sees it, float64: the reference."""
        return dequantize(self.codes(), self.scales, self.zeros, self.weight_type,
                          self.group_size).t()

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input of {x.shape[-1]} features; expected {self.in_features}")
        if x.dtype != self.scales.dtype:
            raise TypeError(f"input of dtype {x.dtype}; this layer takes {self.scales.dtype}")
        rows = x.numel() // self.in_features
        if self.wq_prefill is not None and rows >= self.prefill_from:
            y = a16wx_prefill_matmul(x, self.wq_prefill, self.scales, self.zeros,
                                     self.weight_type, self.group_size, self.out_features)
        else:
            y = a16wx_matmul(x, self.wq, self.scales, self.zeros, self.weight_type,
                             self.group_size, self.out_features)
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"weight_type={self.weight_type}, group_size={self.group_size}, "
                f"zero_point={self.zero_point}, bias={self.bias is not None}, "
                f"prefill={self.wq_prefill is not None}")
