"""Tilus VM from Python, over libtilusvm's C API (ctypes; no compiled extension).

    import numpy as np, tilusvm
    m = tilusvm.load("programs/vector_add.tasm", defines={"BLOCK": 256})
    x, y = np.ones(1000, np.float32), np.arange(1000, dtype=np.float32)
    z = np.empty_like(x)
    m["vector_add"](x, y, z, 1000)      # NumPy: the CPU reference interpreter, z written in place
    m["vector_add"](xt, yt, zt, 1000)   # CUDA tensors: a launch on the current PyTorch stream

``tilusvm.torch`` has ``QuantizedLinear``, a low-bit linear layer over programs/quant/a16wx.tasm.
See docs/python.md.
"""
from ._buffers import Typed, typed
from ._dtypes import DType, dtype
from ._errors import ArgumentError, Error, LibraryNotFound, LoadError
from ._library import library_path
from ._module import Kernel, Module, Param, assemble, device_name, load, load_bytes
from .quant import pack_bits, programs_dir, unpack_bits

__all__ = [
    "ArgumentError", "DType", "Error", "Kernel", "LibraryNotFound", "LoadError", "Module",
    "Param", "Typed", "assemble", "device_name", "dtype", "library_path", "load", "load_bytes",
    "pack_bits", "programs_dir", "typed", "unpack_bits", "version",
]


def version():
    """The library's version string, e.g. "0.1.0"."""
    from ._library import library
    return library().tilusvm_version().decode()
