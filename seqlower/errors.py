"""The errors seqlower raises on purpose.

Every error carries a one-line message that names the file or node and the problem; the CLI prints
that line and exits with code 2. Anything else escaping the library is a bug in seqlower.
"""

from __future__ import annotations

__all__ = ["InvalidModelError", "ModelInputError", "SeqlowerError"]


class SeqlowerError(Exception):
    """Base class: a problem with what the user gave us, described in one line."""


class ModelInputError(SeqlowerError):
    """The input could not be read as an ONNX model (missing, unreadable, not a model...)."""


class InvalidModelError(SeqlowerError):
    """The model was read but is wrong: the spec makes it an error (an out-of-range constant
    position, a SequenceMap body of the wrong arity, the concatenation of an empty sequence)."""
