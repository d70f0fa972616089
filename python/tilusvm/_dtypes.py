"""Tilus VM data types (docs/types.md) as seen from Python: parsing their spellings, the
storage types of NumPy and PyTorch that hold them, scalar bit patterns, and the values of the
small float types."""
import math
import re
import struct

from ._errors import ArgumentError

_FLOAT_RE = re.compile(r"^f([1-8])e([1-9])m([1-9])$")
_INT_RE = re.compile(r"^([iu])([1-9][0-9]?)$")


class DType:
    """One Tilus VM data type: ``name`` (its canonical spelling), ``kind`` ("bool", "int",
    "uint" or "float"), ``bits``, and for floats ``exponent`` and ``mantissa`` bits."""

    __slots__ = ("name", "kind", "bits", "exponent", "mantissa")

    def __init__(self, name, kind, bits, exponent=0, mantissa=0):
        self.name, self.kind, self.bits = name, kind, bits
        self.exponent, self.mantissa = exponent, mantissa

    @property
    def sub_byte(self):
        """Packed, fewer than 8 bits per element (bool is a byte)."""
        return self.kind != "bool" and self.bits < 8

    @property
    def small_float(self):
        """A float of at most 8 bits (f8e4m3, f8e5m2 and the generic fNeEmM types)."""
        return self.kind == "float" and self.bits <= 8

    @property
    def storage_bits(self):
        return 8 if self.kind == "bool" else self.bits

    def storage_bytes(self, elements):
        """Bytes of `elements` packed elements (sub-byte types: rounded up to a byte)."""
        return (elements * self.storage_bits + 7) // 8

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"tilusvm.dtype({self.name!r})"

    def __str__(self):
        return self.name


_WIDE_FLOATS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def dtype(spelling):
    """The DType of a canonical spelling ("f16", "u4", "f6e3m2", ...) or of a NumPy or PyTorch
    dtype; raises ValueError for anything else."""
    if isinstance(spelling, DType):
        return spelling
    if not isinstance(spelling, str):
        name = storage_dtype_name(spelling)
        if name is None:
            raise ValueError(f"{spelling!r} is not a Tilus VM data type")
        spelling = name
    if spelling == "bool":
        return DType("bool", "bool", 1)
    if spelling in _WIDE_FLOATS:
        e, m = _WIDE_FLOATS[spelling]
        return DType(spelling, "float", 1 + e + m, e, m)
    match = _INT_RE.match(spelling)
    if match:
        bits = int(match.group(2))
        signed = match.group(1) == "i"
        if (1 <= bits <= 8 and not (signed and bits == 1)) or bits in (16, 32, 64):
            return DType(spelling, "int" if signed else "uint", bits)
    match = _FLOAT_RE.match(spelling)
    if match:
        n, e, m = (int(g) for g in match.groups())
        if n == 1 + e + m and 3 <= n <= 8:
            return DType(spelling, "float", n, e, m)
    raise ValueError(f"{spelling!r} is not a Tilus VM data type")


# NumPy type strings (byte order dropped) and PyTorch dtype names to Tilus VM types.
_NUMPY = {
    "f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "b1": "bool",
}
_TORCH = {
    "float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32",
    "float64": "f64", "double": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "bool", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}
# DLPack (type code, bits) to Tilus VM types.
_DLPACK = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16", (6, 8): "bool",
}


def numpy_typestr_name(typestr):
    """'<f2' -> 'f16'; None when Tilus VM has no such type."""
    if len(typestr) < 2:
        return None
    return _NUMPY.get(typestr[1:])


def dlpack_name(code, bits):
    return _DLPACK.get((code, bits))


def storage_dtype_name(obj):
    """The Tilus VM spelling of a NumPy dtype, a PyTorch dtype, or None."""
    module = type(obj).__module__
    if module.startswith("torch"):
        return _TORCH.get(str(obj).split(".")[-1])
    typestr = getattr(obj, "str", None)
    if isinstance(typestr, str):
        return numpy_typestr_name(typestr)
    try:  # numpy scalar types such as numpy.float16
        import numpy
        return numpy_typestr_name(numpy.dtype(obj).str)
    except (ImportError, TypeError):
        return None


def accepts_storage(param, storage):
    """Whether memory of element type `storage` (a spelling) may be passed for a pointer
    parameter of type `param` (a DType): the same type, or uint8 storage of packed sub-byte
    elements and of 8-bit floats."""
    if storage == param.name:
        return True
    return storage == "u8" and (param.sub_byte or param.small_float)


def alignment(param):
    """Address alignment, in bytes, that pointers of element type `param` need."""
    return max(1, param.storage_bits // 8)


# ---- floats of at most 8 bits ----------------------------------------------------------------

_FLOAT_TABLES = {}


def float_value(t, code):
    """The value of `code` in the small float type `t` (docs/types.md): f8e5m2 is IEEE-style
    (inf and NaN), f8e4m3 has NaN at S.1111.111 and no inf, the other fNeEmM are all finite."""
    e_bits, m_bits = t.exponent, t.mantissa
    sign = -1.0 if (code >> (t.bits - 1)) & 1 else 1.0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    e_max = (1 << e_bits) - 1
    if t.name == "f8e5m2" and e == e_max:
        return sign * math.inf if m == 0 else math.nan
    if t.name == "f8e4m3" and e == e_max and m == (1 << m_bits) - 1:
        return math.nan
    bias = (1 << (e_bits - 1)) - 1
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


def float_table(t):
    """[(value, code)] of every finite non-negative value of the small float type `t`, ascending
    (+0 only once)."""
    table = _FLOAT_TABLES.get(t.name)
    if table is None:
        rows = []
        for code in range(1 << (t.bits - 1)):  # the sign bit clear
            v = float_value(t, code)
            if math.isfinite(v):
                rows.append((v, code))
        table = sorted(rows)
        _FLOAT_TABLES[t.name] = table
    return table


def float_max(t):
    return float_table(t)[-1][0]


def encode_small_float(t, value):
    """Round `value` to nearest (ties to the even code) into the small float `t`, saturating to
    max finite (docs/types.md); NaN becomes the type's NaN, or +0 where it has none."""
    if math.isnan(value):
        return {"f8e5m2": 0x7E, "f8e4m3": 0x7F}.get(t.name, 0)
    sign = (1 << (t.bits - 1)) if math.copysign(1.0, value) < 0 else 0
    a = abs(value)
    table = float_table(t)
    if a >= table[-1][0]:
        return sign | table[-1][1]
    lo, hi = 0, len(table) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if table[mid][0] <= a:
            lo = mid
        else:
            hi = mid
    (vl, cl), (vh, ch) = table[lo], table[hi]
    if a - vl < vh - a:
        code = cl
    elif a - vl > vh - a:
        code = ch
    else:
        code = cl if cl % 2 == 0 else ch
    return sign | code


# ---- scalar arguments -----------------------------------------------------------------------

def _float_bits(value, fmt, bits, inf_bits):
    try:
        return int.from_bytes(struct.pack("<" + fmt, value), "little")
    except OverflowError:  # beyond max finite: rounds to infinity (docs/types.md)
        sign = 1 << (bits - 1) if value < 0 else 0
        return sign | inf_bits


def _bf16_bits(value):
    if math.isnan(value):
        return 0x7FC0
    b = _float_bits(value, "f", 32, 0x7F800000)
    if (b & 0x7F800000) == 0x7F800000:  # inf
        return b >> 16
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def article(name):
    """'an i32', 'an f16', 'a u4', 'a bool' (as the spellings are read aloud)."""
    return ("an " if name[0] in "fi" else "a ") + name


def scalar_bits(t, value, what):
    """The bit pattern of a scalar argument `value` for a parameter of type `t` (a DType);
    ArgumentError when the value does not fit. `what` names the parameter in messages."""
    try:
        import numpy
        if isinstance(value, numpy.generic):
            value = value.item()
    except ImportError:
        pass
    if not isinstance(value, (bool, int, float)):
        raise ArgumentError(f"{what} is {article(t.name)} scalar: expected a number, got "
                            f"{type(value).__name__}")
    if t.kind == "bool":
        if isinstance(value, float) or value not in (0, 1):
            raise ArgumentError(f"{what} is a bool scalar: expected True, False, 0 or 1, got "
                                f"{value!r}")
        return int(value)
    if t.kind in ("int", "uint"):
        if isinstance(value, float):
            raise ArgumentError(f"{what} is {article(t.name)} scalar: expected an integer, got "
                                f"{value!r}")
        value = int(value)
        lo, hi = ((-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.kind == "int"
                  else (0, (1 << t.bits) - 1))
        if not lo <= value <= hi:
            raise ArgumentError(f"{what} is {article(t.name)} scalar: {value} is out of its range "
                                f"[{lo}, {hi}]")
        return value & ((1 << t.bits) - 1)
    value = float(value)
    if t.name == "f64":
        return _float_bits(value, "d", 64, 0x7FF0000000000000)
    if t.name == "f32":
        return 0x7FC00000 if math.isnan(value) else _float_bits(value, "f", 32, 0x7F800000)
    if t.name == "f16":
        return 0x7E00 if math.isnan(value) else _float_bits(value, "e", 16, 0x7C00)
    if t.name == "bf16":
        return _bf16_bits(value)
    return encode_small_float(t, value)
