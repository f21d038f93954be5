"""The errors seqlower raises on purpose.

`SeqlowerError` and its subclasses carry a one-line message that names the file or node and the
problem with what the user gave; the CLI prints that line and exits with code 2.
`InternalError` means seqlower itself went wrong (for example, it produced a model the ONNX
checker rejects); the CLI prints it as a bug to report and exits with code 3, as it does for any
other exception that escapes the library.
"""

from __future__ import annotations

__all__ = ["BUG_REPORT", "InternalError", "InvalidModelError", "ModelInputError", "SeqlowerError"]

BUG_REPORT = (
    "this is a bug in seqlower, not in your model: please report it on seqlower's issue tracker "
    "with the command line and, if you can share it, the model"
)


class SeqlowerError(Exception):
    """Base class: a problem with what the user gave us, described in one line."""


class ModelInputError(SeqlowerError):
    """The input could not be read as an ONNX model (missing, unreadable, not a model...)."""


class InvalidModelError(SeqlowerError):
    """The model was read but is wrong: the spec makes it an error (an out-of-range constant
    position, a SequenceMap body of the wrong arity, the concatenation of an empty sequence)."""


class InternalError(Exception):
    """seqlower broke one of its own promises (its output fails the ONNX checker, say): a bug,
    not a problem with the input. Not a `SeqlowerError`, so that no caller mistakes it for one."""
