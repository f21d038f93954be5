"""Edge cases derived from the model: for every operator the original runs, the corners the ONNX
specification gives it, and for its inputs, the relations between them.

`edge_cases(model, specs)` returns `Edge`s, each one trial's worth: the verifier draws a trial of
typical values (every dim 3, sequences of 3, loops of 3) and lets the edge change it. The table
`PROVIDERS` has one small function per operator family, read from the specification:

    SequenceAt / SequenceErase   position at -n and at n-1 (both ends of [-n, n-1])
    SequenceInsert               position at -n and at n (an insert at the length appends);
                                 with two positions or more, also all at their low end at
                                 once, and all at their high end
    Gather / GatherElements      every index at -d, every index at d-1
    Split / SplitToSequence      sizes with a zero-sized piece; one piece taking everything; a
                                 scalar chunk that does not divide the dim, one as large as it
    Slice                        starts and ends at the limits of their type (clamped), a start
                                 past the end (empty)
    Loop                         its condition input false while the trip count is positive;
                                 a trip count of -1 (a Loop runs no iteration then)
    If / Where                   the condition true everywhere, and false everywhere
    ConcatFromSequence           elements that differ along the axis it concatenates on
    ArgMax, TopK, Max, ReduceMax, comparisons, ...     ties: values from {0, 1}

and model-wide strategies over the inputs (`input_edges`):

    type limits      an integer input that is never a size, count, position, index or divisor
                     (see `seqlower.verification.flow`) gets the minimum and maximum of its type,
                     and for int64 values just beyond the int32 range
    equal inputs     two inputs of one type and rank get the same value (x == y)
    ragged elements  a sequence input whose element shape leaves a dim open (unknown, or a name
                     no other input declares) gets elements that differ there (zero-sized ones
                     included)
    one empty dim    with two named dims or more, each in turn is 0 while the others are 3

Edges are said once (`Edge.key`), sorted by priority, and at most `MAX_EDGES` run. An edge that
cannot apply to its trial (a position with an empty range) is left out; a trial on which both
models fail is skipped like any other.
"""

from __future__ import annotations

__all__ = ["MAX_EDGES", "PROVIDERS", "Edge", "TrialView", "edge_cases"]

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import onnx_ir as ir

from seqlower.verification.constraints import Constraint, IntRange, SplitSizes, TrialShapes
from seqlower.verification.flow import Flow
from seqlower.verification.signature import NUMBER_TYPES, InputSpec
from seqlower.verification.values import Feeds

MAX_EDGES = 12
"""Edge trials at most per verify call (the first by priority)."""


@dataclasses.dataclass
class TrialView:
    """What an edge may read of the trial it changes."""

    specs: Mapping[str, InputSpec]
    shapes: TrialShapes
    constraints: Mapping[str, Constraint]
    rng: np.random.Generator
    draw: Callable[[ir.DataType, tuple[int, ...]], np.ndarray]
    """Draws one tensor of typical values of a type and shape."""


Change = Callable[[Feeds, TrialView], bool]
"""Changes a trial's feeds in place; False when the edge cannot apply to this trial."""


@dataclasses.dataclass(frozen=True)
class Edge:
    """One edge case: `label` says it in a trial's description; `dims` are sizes of named dims
    the trial takes (others are 3); `priority`: lower runs first."""

    key: str
    label: str
    change: Change
    priority: int = 5
    dims: tuple[tuple[str, int], ...] = ()


Provider = Callable[[ir.Node, Flow], list[Edge]]


def edge_cases(model: ir.Model, specs: list[InputSpec], fixed: Mapping[str, int]) -> list[Edge]:
    """The edge cases of `model`, by priority, at most `MAX_EDGES` (`fixed`: dims that every
    trial fixes, which edges leave alone)."""
    flow = Flow(model, specs, fixed)
    found: dict[str, Edge] = {}
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        provider = PROVIDERS.get(node.op_type)
        if provider is None:
            continue
        for edge in provider(node, flow):
            found.setdefault(edge.key, edge)
    for edge in input_edges(flow):
        found.setdefault(edge.key, edge)
    for end in ("low", "high"):  # every position at the same end at once
        ends = [edge for key, edge in found.items() if key.startswith("end ") and key.endswith(end)]
        if len(ends) >= 2:
            label = f"every position at its {'low' if end == 'low' else 'high'} end"
            found[f"ends {end}"] = Edge(f"ends {end}", label, _all(ends), 2)
    ordered = sorted(found.values(), key=lambda edge: edge.priority)  # stable: model order
    return ordered[:MAX_EDGES]


# -- helpers ----------------------------------------------------------------------------------


def _label(node: ir.Node) -> str:
    return f"{node.op_type} '{node.name}'" if node.name else node.op_type


def _operand(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if len(node.inputs) > index else None


def _set(feeds: Feeds, view: TrialView, name: str, values: list[float] | np.ndarray) -> bool:
    """Fill input `name` with `values` (one element each, cycling); False when it is absent."""
    current = feeds.get(name)
    spec = view.specs.get(name)
    if current is None or isinstance(current, list) or spec is None:
        return False
    shape = np.shape(current)
    pool = np.asarray(values)
    size = int(np.prod(shape, dtype=np.int64))
    picks = pool[np.arange(size) % len(pool)] if len(pool) else pool
    if size > len(pool) > 1:
        picks = view.rng.permutation(picks)
    with np.errstate(over="ignore", invalid="ignore"):
        feeds[name] = np.asarray(picks.reshape(shape)).astype(np.asarray(current).dtype)
    return True


def _fill(name: str, value: float) -> Change:
    return lambda feeds, view: _set(feeds, view, name, [value])


def _all(edges: list[Edge]) -> Change:
    """Every change of `edges`, in order; applies when one of them does."""

    def change(feeds: Feeds, view: TrialView) -> bool:
        return any([edge.change(feeds, view) for edge in edges])

    return change


# -- per-operator providers -------------------------------------------------------------------


def _positions(index: int, *, insert: bool) -> Provider:
    """Both ends of a position's range: [-n, n-1], or [-n, n] for an insert."""

    def provide(node: ir.Node, flow: Flow) -> list[Edge]:
        name = flow.source(_operand(node, index))
        if name is None:
            return []

        def end(top: bool) -> Change:
            def change(feeds: Feeds, view: TrialView) -> bool:
                found = view.constraints.get(name)
                if not isinstance(found, IntRange) or found.low == found.high:
                    return False
                return _set(feeds, view, name, [found.high if top else found.low])

            return change

        top = "n (the length)" if insert else "n-1"
        return [
            Edge(f"end {name} low", f"{_label(node)}: '{name}' at -n", end(False), 1),
            Edge(f"end {name} high", f"{_label(node)}: '{name}' at {top}", end(True), 1),
        ]

    return provide


def _indices(node: ir.Node, flow: Flow) -> list[Edge]:
    """Every index at the low end (-d), every index at the high end (d-1)."""
    return _positions(1, insert=False)(node, flow)


def _split_sizes(node: ir.Node, flow: Flow) -> list[Edge]:
    name = flow.source(_operand(node, 1))
    if name is None:
        return []

    def sizes(kind: str) -> Change:
        def change(feeds: Feeds, view: TrialView) -> bool:
            found = view.constraints.get(name)
            current = feeds.get(name)
            if not isinstance(found, SplitSizes) or current is None or isinstance(current, list):
                return False
            total = max(found.total, 0)
            if np.ndim(current) == 0:  # a chunk size: all in one, or one that does not divide
                chunks = [c for c in range(2, total) if total % c] if kind == "zero" else [total]
                return bool(chunks) and total > 0 and _set(feeds, view, name, [chunks[0]])
            count = int(np.size(current))
            if count < 2:
                return False
            pieces = np.zeros(count, dtype=np.int64)
            if kind == "zero":  # a zero-sized piece first, the rest spread
                rest = count - 1
                pieces[1:] = total // rest
                pieces[1 : 1 + total % rest] += 1
            else:  # one piece takes everything, the others are empty
                pieces[count // 2] = total
            feeds[name] = pieces.reshape(np.shape(current)).astype(np.asarray(current).dtype)
            return True

        return change

    where = f"{_label(node)}: '{name}'"
    return [
        Edge(f"split {name} zero", f"{where} with a zero-sized piece", sizes("zero"), 1),
        Edge(f"split {name} whole", f"{where} with one piece for all", sizes("whole"), 3),
    ]


def _slice_bounds(node: ir.Node, flow: Flow) -> list[Edge]:
    starts, ends = flow.source(_operand(node, 1)), flow.source(_operand(node, 2))
    edges = []
    if starts is not None and ends is not None and not flow.sized(starts):

        def whole(feeds: Feeds, view: TrialView) -> bool:
            low, high = _limits(feeds.get(starts)), _limits(feeds.get(ends))
            return (
                low is not None
                and high is not None
                and (_set(feeds, view, starts, [low[0]]) and _set(feeds, view, ends, [high[1]]))
            )

        def past(feeds: Feeds, view: TrialView) -> bool:
            high = _limits(feeds.get(starts))
            return high is not None and _set(feeds, view, starts, [high[1]])

        where = f"{_label(node)}: '{starts}', '{ends}'"
        edges.append(Edge(f"slice {starts} whole", f"{where} at type limits", whole, 2))
        edges.append(Edge(f"slice {starts} past", f"{where}, start past the end", past, 4))
    return edges


def _limits(value: object) -> tuple[int, int] | None:
    if value is None or isinstance(value, list) or np.asarray(value).dtype.kind not in "iu":
        return None
    info = np.iinfo(np.asarray(value).dtype)
    return int(info.min), int(info.max)


def _loop_condition(node: ir.Node, flow: Flow) -> list[Edge]:
    edges = []
    name = flow.source(_operand(node, 1))
    if name is not None:
        label = f"{_label(node)}: condition '{name}' false, trip count positive"
        edges.append(Edge(f"condition {name} false", label, _fill(name, 0), 1))
    trips = flow.source(_operand(node, 0))
    if trips is not None and flow.specs[trips].dtype == ir.DataType.INT64:
        label = f"{_label(node)}: trip count '{trips}' negative (no iteration)"
        edges.append(Edge(f"trip count {trips} negative", label, _fill(trips, -1), 1))
    return edges


def _condition(index: int) -> Provider:
    def provide(node: ir.Node, flow: Flow) -> list[Edge]:
        name = flow.source(_operand(node, index))
        if name is None or flow.specs[name].dtype != ir.DataType.BOOL:
            return []
        where = f"{_label(node)}: condition '{name}'"
        return [
            Edge(f"condition {name} false", f"{where} false", _fill(name, 0), 2),
            Edge(f"condition {name} true", f"{where} true", _fill(name, 1), 2),
        ]

    return provide


def _ragged_on_axis(node: ir.Node, flow: Flow) -> list[Edge]:
    """ConcatFromSequence joins elements that may differ along its axis (not with new_axis)."""
    name = flow.source(_operand(node, 0))
    new_axis = node.attributes.get("new_axis")
    if name is None or (new_axis is not None and new_axis.as_int()):
        return []
    axis = node.attributes.get("axis")
    spec = flow.specs[name]
    if not spec.is_sequence or spec.shape is None or axis is None:
        return []
    position = axis.as_int() % max(len(spec.shape), 1)
    if not flow.open_dim(spec.shape[position]):
        return []
    return [_ragged(name, position, f"{_label(node)}: elements of '{name}' differ on its axis")]


def _ties(node: ir.Node, flow: Flow) -> list[Edge]:
    """Values from {0, 1} in every input that reaches an operator that breaks ties."""
    del node

    def change(feeds: Feeds, view: TrialView) -> bool:
        changed = False
        for name, spec in view.specs.items():
            if spec.dtype not in NUMBER_TYPES or name in view.constraints:
                continue
            current = feeds.get(name)
            if isinstance(current, list):  # ties across the elements too
                feeds[name] = [
                    _tied(view.rng, element, index) for index, element in enumerate(current)
                ]
                changed = changed or bool(current)
            else:
                changed = _set(feeds, view, name, [0, 1, 1, 0]) or changed
        return changed

    return [Edge("ties", "ties: values from {0, 1}", change, 3)]


def _tied(rng: np.random.Generator, element: np.ndarray, index: int) -> np.ndarray:
    """An element of values from {0, 1}; every other element equal to the first."""
    array = np.asarray(element)
    seeded = np.random.default_rng([index % 2, array.size])
    values = (
        seeded.integers(0, 2, size=array.shape)
        if index % 2 == 0
        else rng.integers(0, 2, size=array.shape)
    )
    return values.astype(array.dtype)


_TIE_BREAKERS = (
    "ArgMax",
    "ArgMin",
    "TopK",
    "Max",
    "Min",
    "ReduceMax",
    "ReduceMin",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Unique",
    "MaxPool",
    "Clip",
)

PROVIDERS: dict[str, Provider] = {
    "SequenceAt": _positions(1, insert=False),
    "SequenceErase": _positions(1, insert=False),
    "SequenceInsert": _positions(2, insert=True),
    "Gather": _indices,
    "GatherElements": _indices,
    "Split": _split_sizes,
    "SplitToSequence": _split_sizes,
    "Slice": _slice_bounds,
    "Loop": _loop_condition,
    "If": _condition(0),
    "Where": _condition(0),
    "ConcatFromSequence": _ragged_on_axis,
    **dict.fromkeys(_TIE_BREAKERS, _ties),
}
"""One edge-case provider per operator (see the module docstring)."""


# -- strategies over the inputs ---------------------------------------------------------------


def input_edges(flow: Flow) -> list[Edge]:
    """Type limits, equal inputs, ragged sequence elements and one empty dim at a time."""
    edges: list[Edge] = []
    for name, spec in flow.specs.items():
        if spec.is_sequence or not spec.dtype.is_integer() or flow.sized(name):
            continue
        edges.append(
            Edge(f"limits {name}", f"'{name}' at the limits of its type", _extremes(name), 2)
        )
    edges.extend(_equal_pairs(flow))
    for name, spec in flow.specs.items():
        if not spec.is_sequence or not spec.shape:
            continue
        for axis, dim in enumerate(spec.shape):
            if flow.open_dim(dim):
                edges.append(_ragged(name, axis, f"elements of '{name}' differ on axis {axis}"))
                break
    named = list(
        dict.fromkeys(
            dim
            for spec in flow.specs.values()
            for dim in spec.shape or ()
            if isinstance(dim, str) and dim and dim not in flow.fixed
        )
    )
    if len(named) >= 2:
        for dim in named[:2]:
            edges.append(Edge(f"empty {dim}", f"{dim}=0, other dims 3", _nothing, 4, ((dim, 0),)))
    return edges


def _nothing(feeds: Feeds, view: TrialView) -> bool:
    del feeds, view
    return True


def _extremes(name: str) -> Change:
    def change(feeds: Feeds, view: TrialView) -> bool:
        current = feeds.get(name)
        if current is None or isinstance(current, list):
            return False
        dtype = np.asarray(current).dtype
        info = np.iinfo(dtype)
        values = [int(info.min), int(info.max), int(info.min) + 1, int(info.max) - 1, 0, -1]
        if dtype == np.int64:
            values += [2**31, -(2**31) - 1, 2**31 - 1, -(2**31), 2**32]
        values = [value for value in values if info.min <= value <= info.max]
        return _set(feeds, view, name, np.array(values, dtype=dtype))

    return change


def _equal_pairs(flow: Flow) -> list[Edge]:
    """Inputs of one type, kind and rank, those that meet at a node first (at most 3)."""
    names = list(flow.specs)
    reached: dict[str, set[int]] = {}  # the nodes each input reaches, once per input

    def reach(name: str) -> set[int]:
        if name not in reached:
            reached[name] = {id(node) for node in flow.reaches(name)}
        return reached[name]

    pairs = []
    for first_index, first in enumerate(names):
        for second in names[first_index + 1 :]:
            a, b = flow.specs[first], flow.specs[second]
            if (a.dtype, a.is_sequence) != (b.dtype, b.is_sequence) or a.shape is None:
                continue
            if b.shape is None or len(a.shape) != len(b.shape):
                continue
            if any(
                isinstance(x, int) and isinstance(y, int) and x != y
                for x, y in zip(a.shape, b.shape, strict=True)
            ):
                continue
            meet = not reach(first).isdisjoint(reach(second))
            pairs.append((0 if meet else 1, first, second))
    pairs.sort(key=lambda item: item[0])
    return [
        Edge(f"equal {first} {second}", f"'{second}' equal to '{first}'", _copy(first, second), 2)
        for _, first, second in pairs[:3]
    ]


def _copy(first: str, second: str) -> Change:
    def change(feeds: Feeds, view: TrialView) -> bool:
        del view
        source, target = feeds.get(first), feeds.get(second)
        if source is None or target is None:
            return False
        if isinstance(source, list) != isinstance(target, list):
            return False
        if isinstance(source, list):
            if len(source) != len(target):
                return False
            feeds[second] = [np.array(element, copy=True) for element in source]
        else:
            if np.shape(source) != np.shape(target):
                return False
            feeds[second] = np.array(source, copy=True)
        return True

    return change


def _ragged(name: str, axis: int, label: str) -> Edge:
    def change(feeds: Feeds, view: TrialView) -> bool:
        current = feeds.get(name)
        spec = view.specs.get(name)
        if not isinstance(current, list) or len(current) < 2 or spec is None:
            return False
        base = list(np.shape(current[0]))
        if axis >= len(base):
            return False
        sizes = [1, 3, 0, 2, 4]
        elements = []
        for position in range(len(current)):
            shape = list(base)
            shape[axis] = sizes[position % len(sizes)]
            elements.append(view.draw(spec.dtype, tuple(shape)))
        feeds[name] = elements
        return True

    return Edge(f"ragged {name}", label, change, 1)
