"""Finding, opening and declaring libtilusvm's C API (vm/include/tilusvm.h) with ctypes.

Where the library is looked for, first match wins:

1. ``$TILUSVM_LIBRARY``: the path of the library file (nothing else is tried);
2. a ``libtilusvm.so*`` file in this package's directory;
3. the path ``meson install`` wrote into ``_install.py`` (the installed library);
4. ``libtilusvm.so.0`` through the dynamic loader's search path (``LD_LIBRARY_PATH``, ...).

Shared libraries that travel beside the library file (such as a copied ``libxxhash.so.0``)
are opened first when the library's own dependencies are missing from the loader's path.
"""
import ctypes
import glob
import os
import threading

from ._errors import ArgumentError, Error, LibraryNotFound, LoadError

TILUSVM_OK = 0
_STATUS_NAMES = [
    "TILUSVM_OK",
    "TILUSVM_ERROR_INVALID_ARGUMENT",
    "TILUSVM_ERROR_NOT_FOUND",
    "TILUSVM_ERROR_IO",
    "TILUSVM_ERROR_BYTECODE",
    "TILUSVM_ERROR_CHECK",
    "TILUSVM_ERROR_NO_DRIVER",
    "TILUSVM_ERROR_NO_DEVICE",
    "TILUSVM_ERROR_CUDA",
    "TILUSVM_ERROR_JIT",
    "TILUSVM_ERROR_RUNTIME",
    "TILUSVM_ERROR_UNSUPPORTED",
    "TILUSVM_ERROR_INTERNAL",
]
_LOAD_STATUSES = {"TILUSVM_ERROR_IO", "TILUSVM_ERROR_BYTECODE", "TILUSVM_ERROR_CHECK"}


class Arg(ctypes.Structure):
    """tilusvm_arg: one launch argument."""

    _fields_ = [("scalar_bits", ctypes.c_uint64), ("pointer", ctypes.c_void_p),
                ("byte_size", ctypes.c_uint64)]


class Define(ctypes.Structure):
    """tilusvm_define: one -D NAME=VALUE."""

    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t
_STR = ctypes.c_char_p
_INT = ctypes.c_int
# name: (argument types); every function returns an int status except where noted.
_PROTOTYPES = {
    "tilusvm_module_load": (_P, _SIZE, ctypes.POINTER(_P)),
    "tilusvm_module_load_file": (_STR, ctypes.POINTER(_P)),
    "tilusvm_module_destroy": (_P,),
    "tilusvm_module_program_count": (_P, ctypes.POINTER(_SIZE)),
    "tilusvm_module_program_name": (_P, _SIZE, ctypes.POINTER(_STR)),
    "tilusvm_program_param_count": (_P, _STR, ctypes.POINTER(_SIZE)),
    "tilusvm_program_param": (_P, _STR, _SIZE, ctypes.POINTER(_STR), ctypes.POINTER(_STR),
                              ctypes.POINTER(_INT)),
    "tilusvm_run_cpu": (_P, _STR, ctypes.POINTER(Arg), _SIZE, _INT),
    "tilusvm_runtime_create": (_INT, ctypes.POINTER(_P)),
    "tilusvm_runtime_destroy": (_P,),
    "tilusvm_runtime_device_name": (_P, ctypes.POINTER(_STR)),
    "tilusvm_runtime_compute_capability": (_P, ctypes.POINTER(_INT)),
    "tilusvm_prepare": (_P, _P, _STR),
    "tilusvm_launch": (_P, _P, _STR, ctypes.POINTER(Arg), _SIZE, _P),
}
# Entry points that an older library may lack: looked up when first used.
_OPTIONAL = {
    "tilusvm_module_assemble": (_STR, _SIZE, _STR, ctypes.POINTER(Define), _SIZE,
                                ctypes.POINTER(_P)),
    # kernel handles: launches with a caller's workspace
    "tilusvm_kernel_get": (_P, _P, _STR, ctypes.POINTER(_P)),
    "tilusvm_kernel_destroy": (_P,),
    "tilusvm_kernel_workspace_size": (_P, ctypes.POINTER(Arg), _SIZE,
                                      ctypes.POINTER(ctypes.c_uint64)),
    "tilusvm_kernel_launch": (_P, ctypes.POINTER(Arg), _SIZE, _P, _P, ctypes.c_uint64),
}

_lock = threading.Lock()
_lib = None
_path = None


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("TILUSVM_LIBRARY")
    if env:
        return [env], True
    found = sorted(glob.glob(os.path.join(_package_dir(), "libtilusvm.so*")), key=len)
    try:
        from . import _install  # written by meson install
        if getattr(_install, "LIBRARY", None):
            found.append(_install.LIBRARY)
    except ImportError:
        pass
    found.append("libtilusvm.so.0")
    return found, False


def _open(path):
    try:
        return ctypes.CDLL(path)
    except OSError as first:
        folder = os.path.dirname(path)
        if not folder or not os.path.isdir(folder):
            raise
        # Dependencies copied beside the library (not on the loader's path): open them
        # first, globally, so that the loader finds them by their sonames.
        opened = False
        for dep in sorted(glob.glob(os.path.join(folder, "lib*.so*"))):
            if os.path.basename(dep).startswith("libtilusvm"):
                continue
            try:
                ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
                opened = True
            except OSError:
                pass
        if not opened:
            raise first
        return ctypes.CDLL(path)


def _declare(lib, name, argtypes):
    fn = getattr(lib, name)
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


def library():
    """The opened library (opened and declared on first use)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        paths, explicit = _candidates()
        errors = []
        for path in paths:
            if not explicit and os.sep in path and not os.path.exists(path):
                errors.append(f"{path}: no such file")
                continue
            try:
                lib = _open(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            try:
                for name, argtypes in _PROTOTYPES.items():
                    _declare(lib, name, argtypes)
            except AttributeError as e:
                errors.append(f"{path}: not libtilusvm ({e})")
                continue
            for fn in ("tilusvm_last_error", "tilusvm_status_name", "tilusvm_version"):
                getattr(lib, fn).restype = ctypes.c_char_p
            lib.tilusvm_status_name.argtypes = [ctypes.c_int]
            lib.tilusvm_last_error.argtypes = []
            lib.tilusvm_version.argtypes = []
            _lib, _path = lib, path
            return _lib
        hint = ("set TILUSVM_LIBRARY to the library file, e.g. "
                "TILUSVM_LIBRARY=build/vm/libtilusvm.so in a build tree")
        raise LibraryNotFound("libtilusvm not found or not loadable (" + "; ".join(errors) +
                              "); " + hint)


def library_path():
    """The path libtilusvm was opened from (opening it if needed)."""
    library()
    return _path


def optional_function(name):
    """An entry point that older libraries lack, declared; None when the library has none."""
    lib = library()
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return None
    fn.argtypes = list(_OPTIONAL[name])
    fn.restype = ctypes.c_int
    return fn


def status_name(code):
    if 0 <= code < len(_STATUS_NAMES):
        return _STATUS_NAMES[code]
    return library().tilusvm_status_name(code).decode()


def last_error():
    return library().tilusvm_last_error().decode("utf-8", "replace")


def check(code, context=""):
    """Raise the package's exception for a failed status code (nothing when it is OK)."""
    if code == TILUSVM_OK:
        return
    name = status_name(code)
    message = last_error()
    if context:
        message = f"{context}: {message}" if message else context
    if name in _LOAD_STATUSES:
        raise LoadError(message, name)
    if name == "TILUSVM_ERROR_INVALID_ARGUMENT":
        raise ArgumentError(message, name)
    raise Error(f"{message} ({name})", name)
