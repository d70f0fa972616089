"""The exceptions of the tilusvm package."""


class Error(Exception):
    """A failure reported by libtilusvm or found by this package.

    ``status`` is the C API's status name (``"TILUSVM_ERROR_CHECK"``, ...) when the library
    reported it, else ``None``.
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class LoadError(Error):
    """A program that cannot be read, assembled or checked; the message has the located
    diagnostics (``FILE:LINE:COL: error[CODE]: message``)."""


class ArgumentError(Error, ValueError):
    """A kernel called with arguments that do not fit its parameters: their number, a dtype, a
    device, a size, the alignment, the layout in memory, or a scalar out of range."""


class LibraryNotFound(Error, OSError):
    """libtilusvm could not be found or opened."""
