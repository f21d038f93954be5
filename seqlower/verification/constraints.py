"""Keep value-dependent inputs valid and useful: positions, split sizes, gather indices, loops.

Random integers make most models fail when an input is a position or a size. This heuristic looks
at each integer graph input of the main graph and follows it forward through Identity and Cast to
its consumers. When it reaches

- the position of SequenceAt or SequenceErase, values are drawn in [-n, n-1] (in [-n, n] for
  SequenceInsert, which appends at n), where n is the sequence length if it can be read off
  the graph (a sequence graph input, a SequenceConstruct, SequenceEmpty, an untouched
  SplitToSequence, Insert/Erase of those), else 0;
- the `split` input of SplitToSequence or Split, a 1-D input gets sizes that sum to the split
  dimension (as many sizes as Split has outputs) and a scalar gets a chunk size in [1, dim];
- the indices of Gather, every index is drawn in [-d, d-1] for the gathered dimension d;
- the trip count of a Loop, it is the trial's iteration count (`TrialShapes.iterations`), and the
  condition of a Loop (a bool input) is true, so that the body runs that many times; it is false
  only in a trial of 0 iterations when the Loop's trip count is not a graph input.

A dimension is known when it belongs to a graph input (its generated size), is static, or is a
symbolic name bound for this trial. When anything is unknown, the value falls back to 0 (positions,
indices) or 1 (sizes). Inputs used only inside subgraphs are left alone.
"""

from __future__ import annotations

__all__ = ["Constraint", "Fixed", "IntRange", "SplitSizes", "TrialShapes", "find_constraints"]

import dataclasses
from collections.abc import Iterator, Mapping

import onnx_ir as ir

from seqlower.ops import uses_through
from seqlower.verification.explore import Profile


@dataclasses.dataclass(frozen=True)
class IntRange:
    """Every element drawn in [low, high] (inclusive)."""

    low: int
    high: int


@dataclasses.dataclass(frozen=True)
class SplitSizes:
    """Split sizes for a dimension of `total`: `count` sizes that sum to it (1-D input; None
    keeps the input's own length), or one chunk size in [1, total] (scalar input)."""

    total: int
    count: int | None = None


@dataclasses.dataclass(frozen=True)
class Fixed:
    """Every element is `value` (a Loop's condition)."""

    value: bool | int


Constraint = IntRange | SplitSizes | Fixed


@dataclasses.dataclass(frozen=True)
class TrialShapes:
    """What a trial has already chosen: input shapes (element shapes for sequences), sequence
    lengths, the size of every symbolic dimension, how often a Loop with a fed trip count or
    condition runs, the kind of values to draw and the constants the model compares with."""

    shapes: Mapping[str, tuple[int, ...]]
    lengths: Mapping[str, int]
    dims: Mapping[str, int]
    iterations: int = 1
    profile: Profile = "typical"
    numbers: tuple[float, ...] = ()
    fill: float | None = None


_POSITION_INPUTS = {"SequenceAt": 1, "SequenceInsert": 2, "SequenceErase": 1}
_PASS_THROUGH = {"Identity", "Cast"}
_MAX_DEPTH = 32


def find_constraints(graph: ir.Graph, trial: TrialShapes) -> dict[str, Constraint]:
    """The constraint of every integer input of `graph` that feeds a value-dependent operand."""
    context = _Context(graph, trial)
    constraints: dict[str, Constraint] = {}
    for value in graph.inputs:
        if value.name in graph.initializers or value.dtype is None:
            continue
        if isinstance(value.type, ir.SequenceType):
            continue
        if not value.dtype.is_integer() and value.dtype != ir.DataType.BOOL:
            continue
        constraint = context.constraint_for(value)
        if constraint is not None:
            constraints[value.name or ""] = constraint
    return constraints


class _Context:
    def __init__(self, graph: ir.Graph, trial: TrialShapes) -> None:
        self._inputs = {id(value): value.name or "" for value in graph.inputs}
        self._trial = trial

    def constraint_for(self, value: ir.Value) -> Constraint | None:
        ranges: list[IntRange] = []
        for node, index in _uses_through_casts(value):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Loop" and index == 0:
                return IntRange(self._trial.iterations, self._trial.iterations)
            if node.op_type == "Loop" and index == 1:
                trip = node.inputs[0] if node.inputs else None
                return Fixed(self._trial.iterations > 0 or self.is_fed(trip))
            if _POSITION_INPUTS.get(node.op_type) == index:
                length = self.sequence_length(node.inputs[0], _MAX_DEPTH)
                top = length if node.op_type == "SequenceInsert" else (length or 0) - 1
                ranges.append(IntRange(-length, top) if length else IntRange(0, 0))
            elif node.op_type in ("Split", "SplitToSequence") and index == 1:
                total = self.dim(node.inputs[0], _int_attr(node, "axis", 0))
                count = len(node.outputs) if node.op_type == "Split" else None
                return SplitSizes(total=total if total is not None else 1, count=count)
            elif node.op_type == "Gather" and index == 1:
                size = self.dim(node.inputs[0], _int_attr(node, "axis", 0))
                ranges.append(IntRange(-size, size - 1) if size else IntRange(0, 0))
        if not ranges:
            return None
        low = max(item.low for item in ranges)
        high = min(item.high for item in ranges)
        return IntRange(low, high) if low <= high else IntRange(0, 0)

    def is_fed(self, value: ir.Value | None) -> bool:
        """True when `value` is a graph input without initializer, seen through Identity and
        Cast."""
        for _ in range(_MAX_DEPTH):
            if value is None:
                return False
            if id(value) in self._inputs:
                return value.const_value is None
            node = value.producer()
            if node is None or node.op_type not in _PASS_THROUGH or not node.inputs:
                return False
            value = node.inputs[0]
        return False

    def dim(self, value: ir.Value | None, axis: int) -> int | None:
        """The size of `value` along `axis`, when the trial or the graph fixes it."""
        if value is None:
            return None
        shape: tuple[int | ir.SymbolicDim, ...] | None = None
        name = self._inputs.get(id(value))
        if name is not None and name in self._trial.shapes:
            shape = self._trial.shapes[name]
        elif value.shape is not None:
            shape = tuple(value.shape.dims)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        size = shape[axis]
        if isinstance(size, int):
            return size
        return self._trial.dims.get(size.value) if size.value is not None else None

    def sequence_length(self, value: ir.Value | None, depth: int) -> int | None:
        """The length of a sequence value, when the graph or the trial fixes it."""
        if value is None or depth <= 0:
            return None
        name = self._inputs.get(id(value))
        if name is not None:
            return self._trial.lengths.get(name)
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "SequenceConstruct":
            return len(node.inputs)
        if node.op_type == "SequenceEmpty":
            return 0
        if node.op_type == "Identity":
            return self.sequence_length(node.inputs[0], depth - 1)
        if node.op_type in ("SequenceInsert", "SequenceErase"):
            inner = self.sequence_length(node.inputs[0], depth - 1)
            if inner is None:
                return None
            return inner + 1 if node.op_type == "SequenceInsert" else max(inner - 1, 0)
        if node.op_type == "SplitToSequence" and len(node.inputs) < 2:
            return self.dim(node.inputs[0], _int_attr(node, "axis", 0))
        return None


def _uses_through_casts(value: ir.Value) -> Iterator[tuple[ir.Node, int]]:
    """The (node, input index) uses of `value`, looking through Identity and Cast."""
    return uses_through(
        value, lambda node, _: node.op_type in _PASS_THROUGH and node.domain in ("", "ai.onnx")
    )


def _int_attr(node: ir.Node, name: str, default: int) -> int:
    attr = node.attributes.get(name)
    if attr is None or attr.is_ref():
        return default
    return attr.as_int()
