"""Low-bit weights for ``programs/quant/a16wx.tasm`` (docs/quant.md) with NumPy: round-to-nearest
group-wise quantisation, ISA bit packing, and the dequantised reference. ``tilusvm.torch``
does the same with PyTorch operations on the weights' device.

Quantisation of ``W[K, N]`` (``K`` the input features) in groups of ``G`` rows of ``K``:

- signed integers ``iB``: symmetric, ``s = max|W| / (2^(B-1) - 1)``, ``q = clamp(round(W / s))``
  into ``[-2^(B-1), 2^(B-1) - 1]``, no zero point;
- unsigned integers ``uB``: asymmetric, ``s = (max W - min W) / (2^B - 1)``, integer zero point
  ``z = clamp(round(-min W / s), 0, 2^B - 1)``, ``q = clamp(round(W / s) + z, 0, 2^B - 1)``;
- floats of at most 8 bits: symmetric, ``s = max|W| / max finite``, ``q`` the nearest value of
  the type to ``W / s``.

Scales and zero points are stored in the activation type (f16) and ``q`` is computed with the
stored (rounded) scale, so the dequantised reference ``(q - z) * s`` is exactly what the
kernel multiplies by. A group whose weights are all zero gets the scale 1.
"""
import os

from . import _dtypes

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def programs_dir():
    """Where the library's programs are: ``$TILUSVM_PROGRAMS``, else the copy installed in this
    package (``programs/``), else the source tree's ``programs/`` beside ``python/``."""
    env = os.environ.get("TILUSVM_PROGRAMS")
    candidates = [env] if env else []
    candidates += [os.path.join(_PACKAGE, "programs"),
                   os.path.join(os.path.dirname(os.path.dirname(_PACKAGE)), "programs")]
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, "quant", "a16wx.tasm")):
            return folder
    raise FileNotFoundError("programs/quant/a16wx.tasm not found (looked in " +
                            ", ".join(candidates) + "); set TILUSVM_PROGRAMS to the programs "
                            "folder")


def a16wx_path():
    return os.path.join(programs_dir(), "quant", "a16wx.tasm")


def uses_zero_point(weight_type):
    """Unsigned integer weights have zero points; signed integers and floats do not."""
    return _dtypes.dtype(weight_type).kind == "uint"


def a16wx_defines(weight_type, n, k, group_size, activation="f16", zero_point=None):
    """The -D values of a16wx.tasm for W[K, N] of `weight_type` in groups of `group_size`."""
    t = _dtypes.dtype(weight_type)
    if zero_point is None:
        zero_point = uses_zero_point(t)
    check_shape(t, n, k, group_size)
    return {"AT": activation, "WT": t.name, "N": n, "K": k, "G": group_size,
            "ZERO": 1 if zero_point else 0}


def check_shape(t, n, k, group_size):
    """a16wx.tasm's preconditions with its default tuning (KS = 8, one warp; two atoms of 16
    rows per warp where N is a multiple of 32, one otherwise)."""
    if t.kind == "bool" or t.bits > 8:
        raise ValueError(f"weight type {t.name}: a16wx takes types of 1 to 8 bits")
    if k <= 0 or n <= 0 or group_size <= 0:
        raise ValueError(f"in_features ({k}), out_features ({n}) and group_size ({group_size}) "
                         f"must be positive")
    if k % 128 or group_size % 128 or k % group_size:
        raise ValueError(f"in_features ({k}) and group_size ({group_size}) must be multiples "
                         f"of 128, and in_features a multiple of group_size")
    if n % 16:
        raise ValueError(f"out_features ({n}) must be a multiple of 16")


def pack_bits(codes, weight_type):
    """Pack integer codes (any integer array; the low B bits of each are kept) of a B-bit type
    into uint8 storage, least significant bit first (ISA section 2)."""
    import numpy as np
    t = _dtypes.dtype(weight_type)
    b = t.storage_bits
    flat = np.ascontiguousarray(codes).reshape(-1).astype(np.int64) & ((1 << b) - 1)
    if b == 8:
        return flat.astype(np.uint8)
    bits = ((flat[:, None] >> np.arange(b)) & 1).astype(np.uint8).reshape(-1)
    return np.packbits(bits, bitorder="little")


def unpack_bits(storage, weight_type, count):
    """The first `count` B-bit codes of packed uint8 storage, as unsigned integers (int64)."""
    import numpy as np
    t = _dtypes.dtype(weight_type)
    b = t.storage_bits
    raw = np.ascontiguousarray(storage).view(np.uint8).reshape(-1)
    if b == 8:
        return raw[:count].astype(np.int64)
    bits = np.unpackbits(raw, bitorder="little")[:count * b].reshape(count, b).astype(np.int64)
    return (bits << np.arange(b)).sum(axis=1)


def code_value_list(weight_type):
    """The value of every code of a 1 to 8-bit type, indexed by the code (a list of floats)."""
    t = _dtypes.dtype(weight_type)
    codes = range(1 << t.bits)
    if t.kind == "uint":
        return [float(c) for c in codes]
    if t.kind == "int":
        return [float(c - (1 << t.bits) if c >= (1 << (t.bits - 1)) else c) for c in codes]
    return [_dtypes.float_value(t, c) for c in codes]


def code_range(t):
    """``(qmin, qmax)``: the smallest and largest value of the codes of an integer weight type
    `t` (a dtype): the signed range for ``iB``, the unsigned one for ``uB``."""
    if t.kind == "int":
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def code_values(weight_type):
    """code_value_list as a NumPy float64 array."""
    import numpy as np
    return np.array(code_value_list(weight_type), dtype=np.float64)


def quantize(weight, weight_type, group_size, zero_point=None, scale_dtype="f16"):
    """Quantise ``weight[K, N]`` (NumPy, any float type). Returns ``(codes, scales, zeros)``:
    codes ``[K, N]`` int64 (the B-bit patterns), scales and zeros ``[K / G, N]`` as
    `scale_dtype` (zeros is None without zero points)."""
    import numpy as np
    t = _dtypes.dtype(weight_type)
    if zero_point is None:
        zero_point = uses_zero_point(t)
    w = np.asarray(weight, dtype=np.float64)
    k, n = w.shape
    if k % group_size:
        raise ValueError(f"K = {k} is not a multiple of the group size {group_size}")
    store = np.float16 if scale_dtype == "f16" else np.float32
    g = w.reshape(k // group_size, group_size, n)
    zeros = None
    if t.kind == "uint" and zero_point:
        qmax = (1 << t.bits) - 1
        lo, hi = g.min(axis=1), g.max(axis=1)
        s = (hi - lo) / qmax
        s = np.where(s > 0, s, 1.0).astype(store).astype(np.float64)
        z = np.clip(np.round(-lo / s), 0, qmax).astype(store).astype(np.float64)
        q = np.clip(np.round(g / s[:, None, :]) + z[:, None, :], 0, qmax)
        codes = q.astype(np.int64)
        zeros = z.astype(store)
    elif t.kind in ("int", "uint"):
        qmin, qmax = code_range(t)
        s = np.abs(g).max(axis=1) / max(qmax, 1)
        s = np.where(s > 0, s, 1.0).astype(store).astype(np.float64)
        q = np.clip(np.round(g / s[:, None, :]), qmin, qmax).astype(np.int64)
        codes = q & ((1 << t.bits) - 1)
    else:
        values = code_values(t)
        finite = np.isfinite(values)
        order = np.argsort(np.where(finite, values, np.inf), kind="stable")
        order = order[finite[order]]
        sorted_values = values[order]
        s = np.abs(g).max(axis=1) / _dtypes.float_max(t)
        s = np.where(s > 0, s, 1.0).astype(store).astype(np.float64)
        x = g / s[:, None, :]
        hi = np.clip(np.searchsorted(sorted_values, x), 1, len(sorted_values) - 1)
        pick_lo = (x - sorted_values[hi - 1]) <= (sorted_values[hi] - x)
        codes = order[np.where(pick_lo, hi - 1, hi)].astype(np.int64)
    return codes.reshape(k, n), s.astype(store), zeros


def dequantize(codes, scales, zeros, weight_type, group_size):
    """``(value(q) - z) * s`` in float64, ``[K, N]``: what the kernel multiplies by."""
    import numpy as np
    values = code_values(weight_type)[np.asarray(codes)]
    s = np.repeat(np.asarray(scales, dtype=np.float64), group_size, axis=0)
    if zeros is not None:
        values = values - np.repeat(np.asarray(zeros, dtype=np.float64), group_size, axis=0)
    return values * s
