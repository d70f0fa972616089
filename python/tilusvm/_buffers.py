"""What a pointer argument is: its address, size, device, element type and layout, read from a
PyTorch tensor, a NumPy array, an object with ``__cuda_array_interface__``, ``__dlpack__`` or
``__array_interface__``, or a :class:`Typed` wrapper that declares the element type of raw
storage."""
import ctypes

from . import _dtypes
from ._errors import ArgumentError

CPU = ("cpu", -1)


class Buffer:
    """A resolved pointer argument. ``device`` is ("cpu", -1) or ("cuda", ordinal);
    ``dtype`` the element type's Tilus VM spelling (None: no such type); ``keep`` holds what
    must stay alive until the call returns; ``kind`` describes it in messages."""

    __slots__ = ("address", "nbytes", "device", "dtype", "contiguous", "writeable", "describe",
                 "stream", "keep", "declared")

    def __init__(self, address, nbytes, device, dtype, contiguous, writeable, describe,
                 stream=None, keep=None):
        self.address, self.nbytes, self.device, self.dtype = address, nbytes, device, dtype
        self.contiguous, self.writeable, self.describe = contiguous, writeable, describe
        self.stream, self.keep, self.declared = stream, keep, None

    @property
    def kind(self):
        text = self.describe(self.keep) if callable(self.describe) else self.describe
        return text if self.declared is None else f"{text} declared as {self.declared}"


class Typed:
    """Raw storage (any array or tensor, usually uint8) holding elements of a declared Tilus VM
    type, e.g. ``Typed(packed_bytes, "u4")`` or ``Typed(bits_u16, "bf16")``. The declared type
    must be the parameter's; the size is the storage's."""

    __slots__ = ("storage", "dtype")

    def __init__(self, storage, dtype):
        self.storage = storage
        self.dtype = _dtypes.dtype(dtype)

    def __repr__(self):
        return f"tilusvm.Typed({type(self.storage).__name__}, {self.dtype.name!r})"


def typed(storage, dtype):
    """Declare that `storage` holds elements of Tilus VM type `dtype` (see :class:`Typed`)."""
    return Typed(storage, dtype)


def _c_contiguous(shape, strides, itemsize):
    """Whether (shape, strides in bytes) is the C-contiguous layout; None strides mean it is."""
    if strides is None:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _product(shape):
    n = 1
    for d in shape:
        n *= d
    return n


_torch_names = {}  # torch.dtype -> Tilus VM spelling or None
_numpy_names = {}  # numpy.dtype -> Tilus VM spelling or None


def _describe_torch(t):
    return f"{t.device.type} tensor of {str(t.dtype).replace('torch.', '')}"


def _torch_buffer(t):
    if t.is_cuda:
        device = ("cuda", t.get_device())
    else:
        dev = t.device
        if dev.type != "cpu":
            raise ArgumentError(f"a tensor on device '{dev}': Tilus VM runs tensors on the CPU "
                                f"(interpreter) or on CUDA devices")
        device = CPU
    dt = t.dtype
    try:
        name = _torch_names[dt]
    except KeyError:
        name = _torch_names[dt] = _dtypes.storage_dtype_name(dt)
    return Buffer(t.data_ptr(), t.numel() * t.element_size(), device, name, t.is_contiguous(),
                  True, _describe_torch, keep=t)


def _describe_numpy(a):
    return f"NumPy array of {a.dtype}"


def _numpy_buffer(a):
    dt = a.dtype
    try:
        name = _numpy_names[dt]
    except KeyError:
        name = _numpy_names[dt] = _dtypes.numpy_typestr_name(dt.str)
    flags = a.flags
    return Buffer(a.__array_interface__["data"][0], a.nbytes, CPU, name, flags.c_contiguous,
                  flags.writeable, _describe_numpy, keep=a)


def _interface_buffer(obj, interface, device, what):
    typestr = interface["typestr"]
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    shape = tuple(interface["shape"])
    address, readonly = interface["data"] if interface.get("data") else (0, False)
    nbytes = _product(shape) * itemsize
    contiguous = _c_contiguous(shape, interface.get("strides"), itemsize)
    buffer = Buffer(address or 0, nbytes, device, _dtypes.numpy_typestr_name(typestr),
                    contiguous, not readonly, f"{what} of {typestr}", keep=obj)
    buffer.stream = interface.get("stream")
    return buffer


def _cuda_device_of(obj, address):
    """The ordinal of the CUDA device that holds `address` (an object with
    __cuda_array_interface__ does not say): its `.device` when it has one, else the driver."""
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):
        value = getattr(dev, attr, None)
        if isinstance(value, int):
            return value
    if address == 0:
        return 0
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        ordinal = ctypes.c_int(-1)
        # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
        if cuda.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ctypes.c_uint64(address)) == 0:
            return ordinal.value
    except OSError:
        pass
    raise ArgumentError(f"cannot tell which CUDA device holds the {type(obj).__name__} at "
                        f"{address:#x}")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_kDLCPU, _kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 1, 2, 3, 13


def _dlpack_buffer(obj):
    device_type, device_id = obj.__dlpack_device__()
    if device_type in (_kDLCPU, _kDLCUDAHost):
        device = CPU
    elif device_type in (_kDLCUDA, _kDLCUDAManaged):
        device = ("cuda", int(device_id))
    else:
        raise ArgumentError(f"a {type(obj).__name__} on DLPack device type {device_type}: "
                            f"Tilus VM runs on the CPU or on CUDA devices")
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    # DLManagedTensor starts with its DLTensor (the unversioned capsule, "dltensor").
    tensor = _DLTensor.from_address(get(capsule, b"dltensor"))
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    bits = tensor.dtype.bits * tensor.dtype.lanes
    itemsize = (bits + 7) // 8
    strides = (None if not tensor.strides else
               tuple(tensor.strides[i] * itemsize for i in range(tensor.ndim)))
    address = (tensor.data or 0) + tensor.byte_offset
    name = _dtypes.dlpack_name(tensor.dtype.code, tensor.dtype.bits) \
        if tensor.dtype.lanes == 1 else None
    # The capsule (and so the producer's export) lives as long as the buffer.
    return Buffer(address, _product(shape) * itemsize, device, name,
                  _c_contiguous(shape, strides, itemsize), True,
                  f"{type(obj).__name__} (DLPack type code {tensor.dtype.code}, "
                  f"{tensor.dtype.bits} bits)", keep=(obj, capsule))


# Classes whose instances always take the same reader (NumPy arrays, PyTorch tensors).
_readers = {}


def resolve(obj):
    """The Buffer of a pointer argument, or None when `obj` is not array-like."""
    reader = _readers.get(type(obj))
    if reader is not None:
        return reader(obj)
    if isinstance(obj, Typed):
        inner = resolve(obj.storage)
        if inner is None:
            raise ArgumentError(f"Typed storage must be an array or a tensor, got "
                                f"{type(obj.storage).__name__}")
        inner.declared = obj.dtype.name
        return inner
    cls = type(obj)
    module = cls.__module__
    if module.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "device"):
        _readers[cls] = _torch_buffer
        return _torch_buffer(obj)
    if module == "numpy" and hasattr(obj, "__array_interface__") and hasattr(obj, "flags"):
        _readers[cls] = _numpy_buffer
        return _numpy_buffer(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        address = cai["data"][0] if cai.get("data") else 0
        return _interface_buffer(obj, cai, ("cuda", _cuda_device_of(obj, address)),
                                 type(obj).__name__)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_buffer(obj)
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return _interface_buffer(obj, ai, CPU, type(obj).__name__)
    return None
