"""The elements of a small int64 vector of shape arithmetic, each a number where the program
proves it and None where it does not.

    Shape(x)                  (x: float[?, 0, 6])  ->  [None, 0, 6]
    Slice(v, [0], [2])                             ->  the first two of v's: [None, 0]
    ReduceProd(v, keepdims=1)                      ->  [0] where one of v's is 0, [None] where
                                                       one is unknown and none is 0
    Concat(a, b), axis 0                           ->  a's, then b's
    a constant                                     ->  its entries

Anything else of a declared length k gives k unknowns; of no declared length, no answer. A
product with a factor 0 is 0 whatever the others are: `Reshape(e, [prod(e.shape[:2]), 6])` of a
tensor `e` with a dim 0 reshapes to `[0, 6]` whatever its first dim is.

Bounded on any file: a vector of more than `MAX_LENGTH` entries (no tensor shape ONNX runtimes
take is that long) gives no answer, whether declared, a constant or concatenated, and each
value is read once per depth in one query (Concats of Concats that share their parts).
"""

from __future__ import annotations

__all__ = ["vector_elements"]

import math

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues

Elements = list[int | None]

DEPTH = 8
MAX_LENGTH = 64
_INT64_LIMIT = 2**63


def vector_elements(
    value: ir.Value | None, values: StaticValues, depth: int = DEPTH
) -> Elements | None:
    """The entries of `value`, an int64 vector (module docstring), or None if its length is
    not known or above `MAX_LENGTH`."""
    return _Query(values).elements(value, depth)


class _Query:
    """One question's walk: what each (value, depth) gave, so a shared part is read once."""

    def __init__(self, values: StaticValues) -> None:
        self.values = values
        self._found: dict[tuple[int, int], Elements | None] = {}

    def elements(self, value: ir.Value | None, depth: int) -> Elements | None:
        if value is None or depth < 0:
            return None
        key = (id(value), depth)
        if key not in self._found:
            found = self._elements(value, depth)
            self._found[key] = None if found is None or len(found) > MAX_LENGTH else found
        found = self._found[key]
        return None if found is None else list(found)

    def _elements(self, value: ir.Value, depth: int) -> Elements | None:
        static = self.values.get(value)
        if static is not None:
            if static.ndim != 1 or static.dtype != np.int64 or static.size > MAX_LENGTH:
                return None
            return [int(e) for e in static]
        node = value.producer()
        found = None
        if node is not None and node.domain in ("", "ai.onnx") and len(node.outputs) == 1:
            found = self._of_node(node, depth)
        if found is not None:
            return found
        shape = value.shape
        if value.dtype != ir.DataType.INT64 or shape is None or shape.rank() != 1:
            return None
        length = shape[0]
        return [None] * length if isinstance(length, int) and length <= MAX_LENGTH else None

    def _of_node(self, node: ir.Node, depth: int) -> Elements | None:
        op = node.op_type
        if op == "Identity":
            return self.elements(node.inputs[0], depth - 1)
        if op == "Shape":
            return _shape(node)
        if op == "Concat":
            if node.attributes.get_int("axis", 0) not in (0, -1):
                return None
            found: Elements = []
            for part in node.inputs:
                elements = self.elements(part, depth - 1)
                if elements is None or len(found) + len(elements) > MAX_LENGTH:
                    return None
                found.extend(elements)
            return found
        if op == "Slice":
            return _slice(node, self, depth)
        if op == "ReduceProd":
            return _product(node, self, depth)
        return None


def _shape(node: ir.Node) -> Elements | None:
    """The dims of a Shape's input, each a number where declared so, start and end applied."""
    source = node.inputs[0] if node.inputs else None
    if source is None or source.shape is None or source.shape.rank() > MAX_LENGTH:
        return None
    dims: Elements = [d if isinstance(d, int) else None for d in source.shape]
    rank = len(dims)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    return dims[_clamp(start, rank) : _clamp(end, rank)]


def _clamp(position: int, length: int) -> int:
    """A start or end of a Shape or a Slice of step 1: from the end when negative, then within
    [0, length]."""
    if position < 0:
        position += length
    return min(max(position, 0), length)


def _slice(node: ir.Node, query: _Query, depth: int) -> Elements | None:
    """The elements a Slice of step 1 on axis 0 keeps, its bounds constants."""
    if len(node.inputs) < 3:
        return None  # opset 1 to 9 (bounds as attributes): not followed
    bounds = [query.values.get(v) if v is not None else None for v in node.inputs[1:]]
    starts, ends = bounds[0], bounds[1]
    if starts is None or ends is None or starts.size != 1 or ends.size != 1:
        return None
    if len(bounds) > 2 and node.inputs[3] is not None:
        axes = bounds[2]
        if axes is None or axes.size != 1 or int(axes.reshape(-1)[0]) not in (0, -1):
            return None
    if len(bounds) > 3 and node.inputs[4] is not None:
        steps = bounds[3]
        if steps is None or steps.size != 1 or int(steps.reshape(-1)[0]) != 1:
            return None
    elements = query.elements(node.inputs[0], depth - 1)
    if elements is None:
        return None
    length = len(elements)
    start = _clamp(int(starts.reshape(-1)[0]), length)
    end = _clamp(int(ends.reshape(-1)[0]), length)
    return elements[start:end]


def _product(node: ir.Node, query: _Query, depth: int) -> Elements | None:
    """A ReduceProd of a vector over its one axis, keepdims 1: [0] where a factor is 0."""
    if node.attributes.get_int("keepdims", 1) != 1:
        return None
    axes = node.attributes.get_ints("axes", None)
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        array = query.values.get(node.inputs[1])
        if array is None or array.size == 0:
            return None  # unknown axes, or none (which may mean "reduce nothing")
        axes = [int(a) for a in array.reshape(-1)]
    if axes is not None and list(axes) not in ([0], [-1]):
        return None
    elements = query.elements(node.inputs[0], depth - 1)
    if elements is None:
        return None
    if 0 in elements:
        return [0]
    if any(e is None for e in elements):
        return [None]
    product = math.prod(e for e in elements if e is not None)
    return [product] if -_INT64_LIMIT <= product < _INT64_LIMIT else [None]  # int64 wraps
