"""Declared tensor sizes checked against the bytes that back them, before anything allocates.

A weight's `dims` are a promise that its data keeps: the ONNX checker tests it for the tensors it
sees, but seqlower checks models with their large weights left out (they are read, not changed),
and a tiny file can declare a trillion elements backed by eight bytes. Reading such a tensor
allocates until memory runs out; a folder or a verifier would be the first to try. So every
initializer's element count is compared with the data it holds (its raw bytes, its typed
values, or the length its external data declares) when the model is loaded, and a model whose
weights hold less than they declare is refused in one line.
"""

from __future__ import annotations

__all__ = ["check_declared_sizes"]

import math

import onnx
import onnx_ir as ir

from seqlower.errors import InvalidModelError
from seqlower.ops import iter_all_graphs

_COMPLEX = frozenset({ir.DataType.COMPLEX64, ir.DataType.COMPLEX128})


def check_declared_sizes(model: ir.Model) -> None:
    """Raise InvalidModelError naming the first initializer whose data is shorter than its
    declared shape needs."""
    for graph in iter_all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is None:
                continue
            problem = _shortfall(tensor)
            if problem is not None:
                raise InvalidModelError(
                    f"initializer '{value.name}' declares shape {list(tensor.shape)} "
                    f"({tensor.size} elements) but {problem}: the model is corrupt"
                )


def _shortfall(tensor: ir.TensorProtocol) -> str | None:
    """How the data of `tensor` falls short of its declared size, or None when it does not."""
    size = math.prod(int(d) for d in tensor.shape)
    if size == 0:
        return None
    if isinstance(tensor, ir.ExternalTensor):
        needed = _bytes_needed(tensor.dtype, size)
        if tensor.length is not None and needed is not None and tensor.length < needed:
            return f"its external data is {tensor.length} bytes long, not {needed}"
        return None
    if not isinstance(tensor, ir.serde.TensorProtoTensor):
        return None  # built in memory: its array is its shape
    proto: onnx.TensorProto = tensor.raw
    if proto.HasField("raw_data"):
        needed = _bytes_needed(tensor.dtype, size)
        if needed is not None and len(proto.raw_data) < needed:
            return f"holds {len(proto.raw_data)} bytes of data, not {needed}"
        return None
    held = max(
        len(proto.float_data),
        len(proto.int32_data),
        len(proto.string_data),
        len(proto.int64_data),
        len(proto.double_data),
        len(proto.uint64_data),
    )
    needed = _values_needed(tensor.dtype, size)
    if held < needed:
        return f"holds {held} value{'' if held == 1 else 's'}, not {needed}"
    return None


def _bytes_needed(dtype: ir.DataType, size: int) -> int | None:
    try:
        bits = dtype.bitwidth
    except TypeError:  # strings have no fixed width
        return None
    return (size * bits + 7) // 8


def _values_needed(dtype: ir.DataType, size: int) -> int:
    """Typed values a TensorProto needs for `size` elements: two per complex number, one per
    pair of 4-bit elements (packed in int32_data), one per element otherwise."""
    if dtype in _COMPLEX:
        return 2 * size
    try:
        bits = dtype.bitwidth
    except TypeError:
        return size
    return (size + 1) // 2 if bits == 4 else size
