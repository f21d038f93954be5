"""Where the graph inputs go: the input an operand copies, and what an input reaches.

The edge-case providers (`seqlower.verification.edges`) ask two questions of a model:

    flow.source(node.inputs[1])   -> "pos"   # the graph input this operand copies (Identity,
                                              # Cast, Squeeze, Unsqueeze, Reshape, Flatten)
    flow.reaches("x")             -> the nodes any value computed from input x flows into
    flow.sized("x")               -> True when x (or a value computed from it) is a size,
                                     a count, a position or an index somewhere

A `sized` input is one whose extreme values would make a model allocate or loop for ever (a
Range limit, a Loop trip count, a Reshape shape) or fail at once (an index), so type limits
are never fed to it. An input that reaches a Loop, Scan or SequenceMap (any operand), or is read
inside any subgraph, counts as sized too: a body may use it as a bound (`while i < x`).
"""

from __future__ import annotations

__all__ = ["SIZE_OPERANDS", "Flow"]

from collections.abc import Iterable

import onnx_ir as ir

from seqlower.verification.signature import InputSpec

SIZE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Loop": (0,),
    "Range": (0, 1, 2),
    "ConstantOfShape": (0,),
    "Expand": (1,),
    "Tile": (1,),
    "Reshape": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "Pad": (1, 3),
    "TopK": (1,),
    "OneHot": (1,),
    "Split": (1,),
    "SplitToSequence": (1,),
    "SequenceAt": (1,),
    "SequenceInsert": (2,),
    "SequenceErase": (1,),
    "Gather": (1,),
    "GatherElements": (1,),
    "GatherND": (1,),
    "ScatterElements": (1,),
    "ScatterND": (1,),
    "Trilu": (1,),
    "Compress": (1,),
    "NonMaxSuppression": (2,),
    "CenterCropPad": (1,),
    "Col2Im": (1, 2),
    "RandomNormalLike": (0,),
    "Div": (0, 1),  # an integer Div or Mod by 0, or of the minimum by -1, kills the process
    "Mod": (0, 1),
    "Pow": (0, 1),
    "BitShift": (1,),
}
"""Per operator, the inputs that are sizes, counts, positions or indices (or divisors)."""

_REPEATS = frozenset({"Loop", "Scan", "SequenceMap"})
"""Operators whose bodies may use any input as a bound (`while i < x`): treated as sizes."""

_COPIES = frozenset({"Identity", "Cast", "CastLike", "Squeeze", "Unsqueeze", "Reshape", "Flatten"})
_MAX_DEPTH = 32
_MAX_VISITS = 20000


class Flow:
    """The flow of the fed inputs of one model (see the module docstring)."""

    def __init__(self, model: ir.Model, specs: list[InputSpec], fixed: Iterable[str] = ()) -> None:
        self.graph = model.graph
        self.fixed = frozenset(fixed)  # dim names every trial fixes
        fed = {spec.name for spec in specs}
        self.inputs = {
            id(value): value.name or "" for value in model.graph.inputs if value.name in fed
        }
        self._values = {value.name: value for value in model.graph.inputs if value.name in fed}
        self.specs = {spec.name: spec for spec in specs}
        counts: dict[str, int] = {}
        for spec in specs:
            for dim in spec.shape or ():
                if isinstance(dim, str) and dim:
                    counts[dim] = counts.get(dim, 0) + 1
        self.shared = frozenset(name for name, count in counts.items() if count > 1)
        self._reach: dict[str, tuple[tuple[ir.Node, ...], bool]] = {}

    def open_dim(self, dim: int | str | None) -> bool:
        """True when a declared dim may take any size in one element of a sequence: unknown,
        or a name that no other input declares and no trial fixes."""
        if isinstance(dim, int):
            return False
        return not dim or (dim not in self.shared and dim not in self.fixed)

    def source(self, value: ir.Value | None) -> str | None:
        """The fed input that `value` copies (through Identity, Cast, Squeeze, ...), or None."""
        for _ in range(_MAX_DEPTH):
            if value is None:
                return None
            name = self.inputs.get(id(value))
            if name is not None:
                return name
            node = value.producer()
            if node is None or node.op_type not in _COPIES or node.domain not in ("", "ai.onnx"):
                return None
            value = node.inputs[0] if node.inputs else None
        return None

    def reaches(self, name: str) -> tuple[ir.Node, ...]:
        """Every node a value computed from input `name` flows into, in the order met."""
        return self._walk(name)[0]

    def sized(self, name: str) -> bool:
        """True when input `name`, or a value computed from it, is a size, count, position,
        index or divisor somewhere (`SIZE_OPERANDS`)."""
        return self._walk(name)[1]

    def _walk(self, name: str) -> tuple[tuple[ir.Node, ...], bool]:
        if name in self._reach:
            return self._reach[name]
        start = self._values.get(name)
        nodes: dict[int, ir.Node] = {}
        sized = False
        stack = [start] if start is not None else []
        seen: set[int] = set()
        while stack and len(seen) < _MAX_VISITS:
            value = stack.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            for node, index in value.uses():
                if index in SIZE_OPERANDS.get(node.op_type, ()) or node.op_type in _REPEATS:
                    sized = True
                if node.graph is not self.graph:
                    sized = True  # read inside a subgraph: a while loop's bound, perhaps
                if id(node) not in nodes:
                    nodes[id(node)] = node
                    stack.extend(node.outputs)
        self._reach[name] = (tuple(nodes.values()), sized)
        return self._reach[name]
