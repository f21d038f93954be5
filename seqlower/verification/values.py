"""Runtime values as onnxruntime takes and returns them, and their one-line descriptions.

A tensor is a numpy array (strings as an object array); a sequence is a Python list of arrays.
"""

from __future__ import annotations

__all__ = [
    "Feeds",
    "RuntimeValue",
    "describe_dtype",
    "describe_shape",
    "describe_value",
    "has_nan",
]

import numpy as np

RuntimeValue = np.ndarray | list[np.ndarray]
"""A tensor (numpy array) or a sequence of tensors (list of numpy arrays)."""

Feeds = dict[str, RuntimeValue]
"""The values of a model's inputs, keyed by input name."""


def describe_dtype(value: RuntimeValue) -> str:
    """`float32`, `string`, `seq(int64)`; `seq(?)` for an empty sequence."""
    if isinstance(value, list):
        return f"seq({_dtype_name(value[0])})" if value else "seq(?)"
    return _dtype_name(value)


def describe_shape(value: RuntimeValue) -> str:
    """`[2, 3]` for a tensor; `seq[3] of [2, 3]` (or `of mixed`) for a sequence; `seq[0]`."""
    if isinstance(value, list):
        if not value:
            return "seq[0]"
        shapes = {np.shape(element) for element in value}
        inner = _shape_text(np.shape(value[0])) if len(shapes) == 1 else "mixed"
        return f"seq[{len(value)}] of {inner}"
    return _shape_text(np.shape(value))


def describe_value(value: RuntimeValue) -> str:
    """Dtype and shape together, e.g. `float32 [2, 3]` or `seq[3] of int64 [4]`."""
    if isinstance(value, list):
        if not value:
            return "seq[0]"
        return f"{describe_shape(value).replace(' of ', f' of {_dtype_name(value[0])} ', 1)}"
    return f"{_dtype_name(value)} {_shape_text(np.shape(value))}"


def _dtype_name(array: np.ndarray) -> str:
    dtype = np.asarray(array).dtype
    if dtype.kind in "UO":
        return "string"
    return str(dtype)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(size) for size in shape) + "]"


def has_nan(feeds: Feeds) -> bool:
    """True when some float input holds a NaN."""
    for value in feeds.values():
        for array in value if isinstance(value, list) else [value]:
            array = np.asarray(array)
            if array.dtype.kind in "fc" and bool(np.isnan(array).any()):
                return True
    return False
