"""Modules, kernels and calls: the Python face of the C API's modules, the CPU interpreter and
the CUDA runtime."""
import ctypes
import os
import threading

from . import _buffers, _dtypes
from ._errors import ArgumentError, Error, LoadError
from ._library import Arg, Define, check, library, optional_function


class Param:
    """One parameter of a kernel: ``name``, ``dtype`` (a :class:`DType`; ``dtype.name`` is its
    spelling) and ``is_pointer``."""

    __slots__ = ("name", "dtype", "is_pointer", "index", "accepts", "align", "int_range")

    def __init__(self, index, name, dtype, is_pointer):
        self.index, self.name, self.dtype, self.is_pointer = index, name, dtype, is_pointer
        # Precomputed for the calls' fast path (the full checks and messages are elsewhere).
        self.accepts = frozenset(n for n in (dtype.name, "u8")
                                 if _dtypes.accepts_storage(dtype, n))
        self.align = _dtypes.alignment(dtype)
        self.int_range = None
        if dtype.kind == "int":
            self.int_range = (-(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1,
                              (1 << dtype.bits) - 1)
        elif dtype.kind == "uint":
            self.int_range = (0, (1 << dtype.bits) - 1, (1 << dtype.bits) - 1)

    def __repr__(self):
        return f"{self.dtype.name}{'*' if self.is_pointer else ''} {self.name}"

    def __eq__(self, other):
        return (isinstance(other, Param) and
                (self.index, self.name, self.dtype, self.is_pointer) ==
                (other.index, other.name, other.dtype, other.is_pointer))


# ---- CUDA runtimes: one per device ordinal, for the life of the process ----------------------
# Never destroyed: CUDA graphs that PyTorch keeps until its own teardown (torch.compile's
# CUDA-graph trees) may hold launches of their kernels; the process's exit frees everything.

_runtimes = {}
_runtimes_lock = threading.Lock()


def runtime(ordinal):
    """The C runtime handle of CUDA device `ordinal`, created on first use."""
    handle = _runtimes.get(ordinal)
    if handle is not None:
        return handle
    with _runtimes_lock:
        handle = _runtimes.get(ordinal)
        if handle is None:
            out = ctypes.c_void_p()
            check(library().tilusvm_runtime_create(ordinal, ctypes.byref(out)),
                  f"opening CUDA device {ordinal}")
            handle = out.value
            _runtimes[ordinal] = handle
    return handle


def device_name(ordinal=0):
    """The name of CUDA device `ordinal` as the runtime sees it."""
    out = ctypes.c_char_p()
    check(library().tilusvm_runtime_device_name(runtime(ordinal), ctypes.byref(out)))
    return out.value.decode()


def _stream_of(device, stream, buffers):
    """The CUstream (an int, 0 = the legacy default stream) of a launch on `device`: the
    caller's `stream` (an int or anything with ``cuda_stream``, such as torch.cuda.Stream),
    else PyTorch's current stream on the device when a tensor argument is PyTorch's, else the
    stream of a ``__cuda_array_interface__`` argument, else 0."""
    if stream is not None:
        value = getattr(stream, "cuda_stream", stream)
        if not isinstance(value, int):
            raise ArgumentError(f"stream must be an int (a CUstream) or have .cuda_stream, got "
                                f"{type(stream).__name__}")
        return value
    for b in buffers:
        if type(b.keep).__module__.startswith("torch"):
            import torch
            return torch.cuda.current_stream(device[1]).cuda_stream
    for b in buffers:
        if isinstance(b.stream, int) and b.stream > 2:  # 1 and 2: the legacy/per-thread tokens
            return b.stream
    return 0


def _device_text(device):
    return "the CPU" if device[0] == "cpu" else f"cuda:{device[1]}"


def _parse_device(device):
    if device is None:
        return None
    text = str(device)
    if text == "cpu":
        return _buffers.CPU
    if text == "cuda":
        return ("cuda", 0)
    if text.startswith("cuda:") and text[5:].isdigit():
        return ("cuda", int(text[5:]))
    raise ArgumentError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


class Kernel:
    """One program of a module: ``kernel(*args)`` runs it. Pointer parameters take arrays or
    tensors, scalar parameters numbers. NumPy arrays (and CPU tensors) run on the CPU
    interpreter and are written in place; CUDA tensors launch on their GPU on the current
    PyTorch stream (asynchronously, like any CUDA kernel)."""

    def __init__(self, module, name, params):
        self.module = module
        self.name = name
        self._cname = name.encode()
        self.params = tuple(params)
        self._arg_array = Arg * len(self.params)
        self._handles = {}  # device ordinal -> tilusvm_kernel (launches with a workspace)

    def __repr__(self):
        return f"{self.name}({', '.join(repr(p) for p in self.params)})"

    def signature(self):
        return repr(self)

    def _what(self, param):
        return f"{self.name}: argument {param.index + 1} ({param.name})"

    def _convert(self, args, device):
        """(C argument array, device, buffers) for `args`, or ArgumentError."""
        params = self.params
        if len(args) != len(params):
            raise ArgumentError(f"{self.name} takes {len(params)} arguments "
                                f"({', '.join(p.name for p in params)}), got {len(args)}")
        c_args = self._arg_array()
        buffers = []
        device_source = None
        resolve = _buffers.resolve
        for param, value, slot in zip(params, args, c_args):
            if not param.is_pointer:
                r = param.int_range
                if r is not None and type(value) is int and r[0] <= value <= r[1]:
                    slot.scalar_bits = value & r[2]
                else:
                    slot.scalar_bits = _dtypes.scalar_bits(param.dtype, value, self._what(param))
                continue
            buffer = resolve(value)
            if buffer is None:
                raise ArgumentError(f"{self._what(param)} is {param.dtype.name}*: expected an "
                                    f"array or a tensor, got {type(value).__name__}")
            if (buffer.declared is not None or buffer.dtype not in param.accepts or
                    not buffer.contiguous or not buffer.writeable or buffer.address % param.align):
                self._check_buffer(self._what(param), param, buffer)  # raises with the reason
            if device is None:
                device, device_source = buffer.device, param.name
            elif buffer.device != device:
                source = (f"the device of {device_source}" if device_source
                          else "the device asked for")
                raise ArgumentError(
                    f"{self._what(param)} is in "
                    f"{'host memory' if buffer.device[0] == 'cpu' else 'GPU memory'}"
                    f" ({_device_text(buffer.device)}) but the kernel runs on "
                    f"{_device_text(device)} ({source}): every array of one call must be on "
                    f"one device (move it with .to(...) / .cuda() / .cpu())")
            slot.pointer = buffer.address or None
            slot.byte_size = buffer.nbytes
            buffers.append(buffer)
        return c_args, device or _buffers.CPU, buffers

    @staticmethod
    def _check_buffer(what, param, buffer):
        t = param.dtype
        if buffer.declared is not None:
            if buffer.declared != t.name:
                raise ArgumentError(f"{what} is {t.name}*: the storage is declared as "
                                    f"{buffer.declared}")
        elif buffer.dtype is None or not _dtypes.accepts_storage(t, buffer.dtype):
            hint = ""
            if t.sub_byte or t.small_float:
                hint = (f"; {t.name} elements take uint8 storage, packed least significant "
                        f"bit first (tilusvm.pack_bits)")
            elif t.name == "bf16":
                hint = "; bf16 takes bfloat16 tensors or tilusvm.typed(uint16 storage, 'bf16')"
            raise ArgumentError(f"{what} is {t.name}*: got a {buffer.kind}{hint}")
        if not buffer.contiguous:
            raise ArgumentError(f"{what}: the {buffer.kind} is not contiguous (row-major); pass "
                                f"a contiguous copy (np.ascontiguousarray / .contiguous())")
        if not buffer.writeable:
            raise ArgumentError(f"{what}: the {buffer.kind} is read-only and the kernel may "
                                f"write through any pointer; pass a writeable array")
        align = _dtypes.alignment(t)
        if buffer.address % align:
            raise ArgumentError(f"{what}: the address {buffer.address:#x} is not aligned to "
                                f"{align} bytes ({t.name} elements)")

    def __call__(self, *args, device=None, stream=None, checked=False, workspace=None):
        """Run the kernel. `device` ('cpu', 'cuda', 'cuda:N') is where it must run (by default:
        where its arrays are); `stream` overrides the CUDA stream; `checked` turns on the CPU
        interpreter's race, bounds and workspace checks. `workspace` (CUDA launches only): a
        contiguous device array or tensor of at least :meth:`workspace_size` bytes, 256-byte
        aligned, used instead of the runtime's workspace for the stream (for example during
        CUDA graph capture, where the runtime's cannot grow); the regions the program needs
        zeroed are zeroed on the stream before the kernel."""
        c_args, where, buffers = self._convert(args, _parse_device(device))
        lib = library()
        if where[0] == "cpu":
            if workspace is not None:
                raise ArgumentError(f"{self.name}: workspace= is for CUDA launches; the CPU "
                                    f"interpreter plans its own workspace")
            check(lib.tilusvm_run_cpu(self.module._handle, self._cname, c_args, len(c_args),
                                      1 if checked else 0), self.name)
        elif workspace is not None:
            ws = self._workspace_buffer(workspace, where)
            cu_stream = _stream_of(where, stream, buffers)
            check(self._launch_fn()(self._handle(where[1]), c_args, len(c_args),
                                    cu_stream or None, ws.address or None, ws.nbytes),
                  self.name)
            del ws
        else:
            handle = runtime(where[1])
            cu_stream = _stream_of(where, stream, buffers)
            check(lib.tilusvm_launch(handle, self.module._handle, self._cname, c_args,
                                     len(c_args), cu_stream or None), self.name)
        del buffers  # the arrays (and DLPack exports) were kept alive until here

    def workspace_size(self, *args, device=None):
        """Bytes of workspace a CUDA launch with these arguments needs (0 when the program
        allocates none; only the scalar arguments matter)."""
        c_args, where, buffers = self._convert(args, _parse_device(device))
        if where[0] == "cpu":
            raise ArgumentError(f"{self.name}: workspace_size is for CUDA launches; the CPU "
                                f"interpreter plans its own workspace (pass device='cuda' "
                                f"or CUDA arrays)")
        fn = optional_function("tilusvm_kernel_workspace_size")
        if fn is None:
            raise Error("this libtilusvm has no tilusvm_kernel_workspace_size")
        out = ctypes.c_uint64()
        check(fn(self._handle(where[1]), c_args, len(c_args), ctypes.byref(out)), self.name)
        del buffers
        return out.value

    def _launch_fn(self):
        fn = optional_function("tilusvm_kernel_launch")
        if fn is None:
            raise Error("this libtilusvm cannot launch with a caller's workspace (no "
                        "tilusvm_kernel_launch)")
        return fn

    def _handle(self, ordinal):
        """The C kernel handle of this program on CUDA device `ordinal` (made once)."""
        handle = self._handles.get(ordinal)
        if handle is None:
            get = optional_function("tilusvm_kernel_get")
            if get is None:
                raise Error("this libtilusvm has no kernel handles (no tilusvm_kernel_get)")
            out = ctypes.c_void_p()
            check(get(runtime(ordinal), self.module._handle, self._cname, ctypes.byref(out)),
                  self.name)
            handle = self._handles.setdefault(ordinal, out.value)
            if handle != out.value:  # another thread made one first
                optional_function("tilusvm_kernel_destroy")(out.value)
        return handle

    def _workspace_buffer(self, workspace, where):
        buffer = _buffers.resolve(workspace)
        if buffer is None:
            raise ArgumentError(f"{self.name}: workspace must be an array or a tensor, got "
                                f"{type(workspace).__name__}")
        if buffer.device != where:
            raise ArgumentError(f"{self.name}: the workspace is on "
                                f"{_device_text(buffer.device)} but the kernel runs on "
                                f"{_device_text(where)}")
        if not buffer.contiguous or not buffer.writeable:
            raise ArgumentError(f"{self.name}: the workspace must be contiguous and writeable")
        return buffer

    def _release(self):
        """Destroy the kernel handles (before the module)."""
        handles, self._handles = self._handles, {}
        if handles:
            destroy = optional_function("tilusvm_kernel_destroy")
            for handle in handles.values():
                destroy(handle)

    def prepare(self, device="cuda"):
        """Compile the kernel for a CUDA device now (or take it from the caches), so that the
        first launch is quick and can be captured in a CUDA graph."""
        where = _parse_device(device)
        if where[0] != "cuda":
            raise ArgumentError("prepare() compiles for a CUDA device; the CPU needs nothing")
        check(library().tilusvm_prepare(runtime(where[1]), self.module._handle, self._cname),
              self.name)


class Module:
    """A loaded, checked module: ``module[NAME]`` is a :class:`Kernel`; ``module.kernels``
    maps every program's name to its kernel."""

    def __init__(self, handle, source):
        self._handle = handle
        self.source = source
        lib = library()
        count = ctypes.c_size_t()
        check(lib.tilusvm_module_program_count(handle, ctypes.byref(count)))
        self.kernels = {}
        for i in range(count.value):
            name = ctypes.c_char_p()
            check(lib.tilusvm_module_program_name(handle, i, ctypes.byref(name)))
            self.kernels[name.value.decode()] = self._kernel(name.value)

    def _kernel(self, cname):
        lib = library()
        n = ctypes.c_size_t()
        check(lib.tilusvm_program_param_count(self._handle, cname, ctypes.byref(n)))
        params = []
        for i in range(n.value):
            pname, pdtype, is_pointer = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_int()
            check(lib.tilusvm_program_param(self._handle, cname, i, ctypes.byref(pname),
                                            ctypes.byref(pdtype), ctypes.byref(is_pointer)))
            params.append(Param(i, pname.value.decode(), _dtypes.dtype(pdtype.value.decode()),
                                bool(is_pointer.value)))
        return Kernel(self, cname.decode(), params)

    @property
    def programs(self):
        """The names of the module's programs, in order."""
        return list(self.kernels)

    def __getitem__(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r} in {self.source} (it has: "
                           f"{', '.join(self.kernels)})") from None

    def __contains__(self, name):
        return name in self.kernels

    def __iter__(self):
        return iter(self.kernels)

    def __len__(self):
        return len(self.kernels)

    def __repr__(self):
        return f"<tilusvm.Module {self.source}: {', '.join(self.kernels)}>"

    def close(self):
        """Free the module now (kernels compiled from it stay in the runtime's caches)."""
        handle, self._handle = self._handle, None
        if handle:
            for kernel in getattr(self, "kernels", {}).values():  # handles before the module
                kernel._release()
            library().tilusvm_module_destroy(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


def _define_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        return str(value)
    name = _dtypes.storage_dtype_name(value)
    if name is None and isinstance(value, _dtypes.DType):
        name = value.name
    if name is None:
        raise ArgumentError(f"a define's value must be an int, a float, a str or a dtype, got "
                            f"{type(value).__name__}")
    return name


def assemble(source, defines=None, file_name="<input>"):
    """Assemble and check .tasm text (str or bytes) with ``-D`` overrides ``defines``
    ({NAME: value}; values are ints, floats, strings or dtypes). LoadError with the located
    diagnostics when it does not assemble or check."""
    fn = optional_function("tilusvm_module_assemble")
    if fn is None:
        raise Error("this libtilusvm cannot assemble .tasm source (no tilusvm_module_assemble); "
                    "assemble with tilus-asm and load the .tbc")
    text = source.encode() if isinstance(source, str) else bytes(source)
    items = list((defines or {}).items())
    c_defines = (Define * max(1, len(items)))()
    for slot, (name, value) in zip(c_defines, items):
        slot.name = str(name).encode()
        slot.value = _define_value(value).encode()
    out = ctypes.c_void_p()
    check(fn(text, len(text), str(file_name).encode(), c_defines, len(items), ctypes.byref(out)))
    return Module(out.value, file_name)


def load_bytes(data, name="<bytes>"):
    """Load .tbc bytecode from memory."""
    data = bytes(data)
    buffer = ctypes.create_string_buffer(data, len(data))
    out = ctypes.c_void_p()
    check(library().tilusvm_module_load(buffer, len(data), ctypes.byref(out)), name)
    return Module(out.value, name)


def load(path, defines=None):
    """Load a program file: ``.tasm`` source is assembled with ``defines`` (-D overrides),
    anything else is read as ``.tbc`` bytecode. ``load(path)[KERNEL](*args)`` runs a kernel."""
    path = os.fspath(path)
    if path.endswith(".tasm"):
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as e:
            raise LoadError(f"{path}: {e.strerror or e}", "TILUSVM_ERROR_IO") from None
        return assemble(text, defines, path)
    if defines:
        raise ArgumentError(f"{path}: defines apply to .tasm source; bytecode has its "
                            f"constants already")
    out = ctypes.c_void_p()
    check(library().tilusvm_module_load_file(path.encode(), ctypes.byref(out)))
    return Module(out.value, path)
