"""Which If branches the original took and how many times its Loops ran, over all trials.

`instrument` returns a copy of the original whose extra outputs expose, per run, every If
condition and every Loop's iteration count, in the main graph and inside If branches and Loop
bodies at any depth:

    y = If(c, then, else)        ->  also output  Reshape(Cast<to=int64>(c), [])        (0 or 1)
    y = Loop(M, c, body)         ->  the body also yields its iteration number as a scan
                                     output k; the count is Size(k)
    a probe p inside a Loop body ->  p becomes a scan output of the Loop; outside it is read as
                                     ReduceMin(Concat([2**40], p)) and ReduceMax(Concat([-1], p))
    a probe p inside a branch    ->  both branches yield it (the other branch a neutral constant:
                                     2**40 for a minimum, -1 for a maximum)
    s = SplitToSequence(x, split) ->  also output  Cast<to=int64>(And(Size(split) == 0,
                                     Shape(x)[axis] > 0))   (1: an empty list of sizes over a
                                     non-empty axis, which the specification rejects and
                                     onnxruntime splits into chunks of one)

So every probe ends as one int64 scalar that is the minimum or the maximum of what happened
inside: an If took its then branch when the maximum of its condition is 1, its else branch when
the minimum is 0; a Loop's counts lie between the two. Scan bodies and SequenceMap bodies are not
instrumented. The copy computes the same outputs as the original (the probes only read values).
It is made on the protobuf, the exact model the runtime loads, rather than in onnx_ir: it only
appends outputs to existing If and Loop nodes, which onnx_ir's nodes (outputs fixed when built)
would have to be rebuilt and re-linked for.

`Coverage` gathers the probes of every trial and answers what was not yet covered, which the
verifier uses to steer its later trials, and prints the summary
`If: 3/4 branches, Loop trip counts 0..8`.
"""

from __future__ import annotations

__all__ = ["LONG", "RARE", "Coverage", "Probe", "instrument"]

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import numpy as np
import onnx
from onnx import helper

_NEUTRAL = {"min": 1 << 40, "max": -1}

RARE = 2
"""A branch taken by fewer trials than this is one the verifier steers towards."""

LONG = 5
"""A Loop that never ran this many times is one the verifier steers towards longer runs."""

_PREFIX = "seqlower_probe_"

ProbeKind = Literal["if", "loop", "split"]


@dataclasses.dataclass(frozen=True)
class Probe:
    """One extra output of the instrumented copy: the minimum or maximum (`aggregate`) of an If
    condition (`kind` "if"), a Loop's iteration count ("loop") or the flag of a split by an
    empty list of sizes ("split", maximum only) of the node `label`."""

    output: str
    label: str
    kind: ProbeKind
    aggregate: Literal["min", "max"]


@dataclasses.dataclass
class _Inner:
    """A probe inside a graph: its value's name in that graph."""

    value: str
    label: str
    kind: ProbeKind
    aggregate: Literal["min", "max"]


class _Names:
    def __init__(self, model: onnx.ModelProto) -> None:
        self._taken = set(_all_names(model.graph))
        self._count = 0

    def fresh(self) -> str:
        while True:
            name = f"{_PREFIX}{self._count}"
            self._count += 1
            if name not in self._taken:
                self._taken.add(name)
                return name


def instrument(model: onnx.ModelProto) -> tuple[onnx.ModelProto, tuple[Probe, ...]]:
    """A copy of `model` with the probes as extra outputs, and the probes (none when the model
    has no If, Loop or SplitToSequence by a list of sizes: the copy is then the model itself)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    names = _Names(copy)
    inner = _instrument_graph(copy.graph, "", names, _opset(copy))
    if not inner:
        return model, ()
    probes = []
    for probe in inner:
        copy.graph.output.append(
            helper.make_tensor_value_info(probe.value, onnx.TensorProto.INT64, [])
        )
        probes.append(Probe(probe.value, probe.label, probe.kind, probe.aggregate))
    return copy, tuple(probes)


def _opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 11


def _instrument_graph(
    graph: onnx.GraphProto, where: str, names: _Names, opset: int
) -> list[_Inner]:
    probes: list[_Inner] = []
    added: list[onnx.NodeProto] = []
    counts = {"If": 0, "Loop": 0, "SplitToSequence": 0}
    for node in list(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in counts:
            continue
        number = counts[node.op_type]
        counts[node.op_type] += 1
        label = f"{node.op_type} '{node.name}'" if node.name else f"{node.op_type} #{number}"
        if where:
            label = f"{where} > {label}"
        if node.op_type == "If":
            probes.extend(_instrument_if(node, label, names, opset, added))
        elif node.op_type == "Loop":
            probes.extend(_instrument_loop(node, label, names, opset, added))
        else:
            probes.extend(_instrument_split(node, label, names, added))
    graph.node.extend(added)
    return probes


def _instrument_if(
    node: onnx.NodeProto, label: str, names: _Names, opset: int, added: list[onnx.NodeProto]
) -> list[_Inner]:
    branches = {attr.name: attr.g for attr in node.attribute if attr.name.endswith("_branch")}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    probes: list[_Inner] = []
    matching = (
        then is not None
        and other is not None
        and len(then.output) == len(other.output) == len(node.output)
    )
    if matching and then is not None and other is not None:
        then_probes = _instrument_graph(then, label + " then", names, opset)
        else_probes = _instrument_graph(other, label + " else", names, opset)
        for own, neutral_in, inners in (
            (then, other, then_probes),
            (other, then, else_probes),
        ):
            for inner in inners:
                own.output.append(_scalar_info(inner.value))
                constant = names.fresh()
                neutral_in.node.append(_constant(constant, _NEUTRAL[inner.aggregate]))
                neutral_in.output.append(_scalar_info(constant))
        # both branches now yield then's probes, then else's
        for inner in [*then_probes, *else_probes]:
            outer = names.fresh()
            node.output.append(outer)
            probes.append(_Inner(outer, inner.label, inner.kind, inner.aggregate))
    condition = names.fresh()
    as_int = names.fresh()
    shape = names.fresh()
    added.append(helper.make_node("Cast", [node.input[0]], [as_int], to=onnx.TensorProto.INT64))
    added.append(_constant(shape, None))
    added.append(helper.make_node("Reshape", [as_int, shape], [condition]))
    probes.extend(_min_and_max(condition, label, "if", names, added))
    return probes


def _instrument_loop(
    node: onnx.NodeProto, label: str, names: _Names, opset: int, added: list[onnx.NodeProto]
) -> list[_Inner]:
    body = next((attr.g for attr in node.attribute if attr.name == "body"), None)
    if body is None or len(body.input) < 2 or len(body.output) != len(node.output) + 1:
        return []  # a Loop that leaves out trailing outputs cannot take more
    inners = _instrument_graph(body, label, names, opset)
    counter = names.fresh()
    body.node.append(helper.make_node("Identity", [body.input[0].name], [counter]))
    body.output.append(_scalar_info(counter))
    outer_counter = names.fresh()
    node.output.append(outer_counter)
    count = names.fresh()
    added.append(helper.make_node("Size", [outer_counter], [count]))
    probes = _min_and_max(count, label, "loop", names, added)
    for inner in inners:
        scanned = names.fresh()
        body.node.append(helper.make_node("Identity", [inner.value], [scanned]))
        body.output.append(_scalar_info(scanned))
        outer = names.fresh()
        node.output.append(outer)
        neutral = names.fresh()
        joined = names.fresh()
        reduced = names.fresh()
        added.append(_constant(neutral, _NEUTRAL[inner.aggregate], vector=True))
        added.append(helper.make_node("Concat", [neutral, outer], [joined], axis=0))
        op = "ReduceMin" if inner.aggregate == "min" else "ReduceMax"
        added.append(helper.make_node(op, [joined], [reduced], keepdims=0))
        probes.append(_Inner(reduced, inner.label, inner.kind, inner.aggregate))
    return probes


def _instrument_split(
    node: onnx.NodeProto, label: str, names: _Names, added: list[onnx.NodeProto]
) -> list[_Inner]:
    """The flag of a split of a non-empty axis by an empty list of sizes (none without sizes)."""
    if len(node.input) < 2 or not node.input[1]:
        return []
    axis = next((attr.i for attr in node.attribute if attr.name == "axis"), 0)
    zero, size, empty, shape, at, dim, filled, both, flag = (names.fresh() for _ in range(9))
    added.append(_constant(zero, 0))
    added.append(helper.make_node("Size", [node.input[1]], [size]))
    added.append(helper.make_node("Equal", [size, zero], [empty]))
    added.append(helper.make_node("Shape", [node.input[0]], [shape]))
    added.append(_constant(at, axis))
    added.append(helper.make_node("Gather", [shape, at], [dim]))
    added.append(helper.make_node("Greater", [dim, zero], [filled]))
    added.append(helper.make_node("And", [empty, filled], [both]))
    added.append(helper.make_node("Cast", [both], [flag], to=onnx.TensorProto.INT64))
    return [_Inner(flag, label, "split", "max")]


def _min_and_max(
    value: str,
    label: str,
    kind: Literal["if", "loop"],
    names: _Names,
    added: list[onnx.NodeProto],
) -> list[_Inner]:
    """Two probes of one value (each its own name: a graph yields a value once)."""
    copy = names.fresh()
    added.append(helper.make_node("Identity", [value], [copy]))
    return [_Inner(value, label, kind, "min"), _Inner(copy, label, kind, "max")]


def _constant(name: str, value: int | None, *, vector: bool = False) -> onnx.NodeProto:
    """An int64 constant: a scalar `value`, a 1-element vector, or the empty shape [] (None)."""
    if value is None:
        tensor = helper.make_tensor(name + "_value", onnx.TensorProto.INT64, [0], [])
    else:
        tensor = helper.make_tensor(
            name + "_value", onnx.TensorProto.INT64, [1] if vector else [], [value]
        )
    return helper.make_node("Constant", [], [name], value=tensor)


def _scalar_info(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx.TensorProto.INT64, [])


def _all_names(graph: onnx.GraphProto) -> Iterator[str]:
    for value in [*graph.input, *graph.output, *graph.value_info]:
        yield value.name
    for tensor in graph.initializer:
        yield tensor.name
    for node in graph.node:
        yield node.name
        yield from node.input
        yield from node.output
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_names(attr.g)
            for sub in attr.graphs:
                yield from _all_names(sub)


@dataclasses.dataclass
class Coverage:
    """What the original did over the trials so far: per If, the branches it took (True for
    then, False for else); per Loop, the iteration counts seen (a range inside another Loop);
    per symbolic dim and sequence input, the sizes fed."""

    probes: tuple[Probe, ...] = ()
    branches: dict[str, set[bool]] = dataclasses.field(default_factory=dict)
    loops: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    dims: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    lengths: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    note: str = ""
    times: dict[tuple[str, bool], int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for probe in self.probes:
            if probe.kind == "if":
                self.branches.setdefault(probe.label, set())
            elif probe.kind == "loop":
                self.loops.setdefault(probe.label, set())

    def taken(
        self, values: Mapping[str, np.ndarray]
    ) -> tuple[set[tuple[str, bool]], set[tuple[str, int]]]:
        """The branches and loop counts that one run's probe values show."""
        branches: set[tuple[str, bool]] = set()
        counts: set[tuple[str, int]] = set()
        for probe in self.probes:
            value = values.get(probe.output)
            if value is None or np.size(value) != 1:
                continue
            number = int(np.asarray(value).reshape(-1)[0])
            if number in _NEUTRAL.values():
                continue  # the node did not run
            if probe.kind == "if":
                if probe.aggregate == "max" and number == 1:
                    branches.add((probe.label, True))
                if probe.aggregate == "min" and number == 0:
                    branches.add((probe.label, False))
            elif probe.kind == "loop":
                counts.add((probe.label, number))
        return branches, counts

    def empty_split(self, values: Mapping[str, np.ndarray]) -> str | None:
        """The label of a SplitToSequence that one run's probe values show splitting a
        non-empty axis by an empty list of sizes, if any."""
        for probe in self.probes:
            value = values.get(probe.output) if probe.kind == "split" else None
            if value is not None and np.size(value) == 1 and int(np.ravel(value)[0]) == 1:
                return probe.label
        return None

    def record(self, values: Mapping[str, np.ndarray]) -> None:
        """Add one run of the instrumented original."""
        branches, counts = self.taken(values)
        for label, branch in branches:
            self.branches.setdefault(label, set()).add(branch)
            self.times[(label, branch)] = self.times.get((label, branch), 0) + 1
        for label, count in counts:
            self.loops.setdefault(label, set()).add(count)

    def record_sizes(self, dims: Mapping[str, int], lengths: Mapping[str, int]) -> None:
        for name, size in dims.items():
            self.dims.setdefault(name, set()).add(int(size))
        for name, length in lengths.items():
            self.lengths.setdefault(name, set()).add(int(length))

    def untaken(self) -> list[tuple[str, bool]]:
        """Every (If, branch) no trial took, in the model's order."""
        return [
            (label, branch)
            for label, seen in self.branches.items()
            for branch in (True, False)
            if branch not in seen
        ]

    def rare(self) -> list[tuple[str, bool]]:
        """Every (If, branch) fewer than `RARE` trials took: a branch taken once may have been
        taken on inputs that hide a difference (all zeros), so steering wants it again."""
        return [
            (label, branch)
            for label in self.branches
            for branch in (True, False)
            if self.times.get((label, branch), 0) < RARE
        ]

    def short_loops(self) -> dict[str, int]:
        """Per Loop that never ran `LONG` times or more, the most it ran (-1: never)."""
        return {
            label: max(seen, default=-1)
            for label, seen in self.loops.items()
            if max(seen, default=-1) < LONG
        }

    def longer_loops(self, values: Mapping[str, np.ndarray]) -> set[str]:
        """The short Loops that one run would run more often than any trial did."""
        short = self.short_loops()
        _, counts = self.taken(values)
        return {label for label, count in counts if label in short and count > short[label]}

    def new_branches(self, values: Mapping[str, np.ndarray]) -> set[tuple[str, bool]]:
        """The rarely taken branches one run would take."""
        branches, _ = self.taken(values)
        return branches & set(self.rare())

    def summary(self) -> str:
        """`If: 3/4 branches, Loop trip counts 0..8, dims 0..8, sequence lengths 0..5`."""
        parts = []
        if self.branches:
            taken = sum(len(seen) for seen in self.branches.values())
            parts.append(f"If: {taken}/{2 * len(self.branches)} branches")
        if self.loops:
            parts.append(
                f"Loop trip counts {_span(c for seen in self.loops.values() for c in seen)}"
            )
        if self.dims:
            parts.append(f"dims {_span(s for seen in self.dims.values() for s in seen)}")
        if self.lengths:
            parts.append(
                f"sequence lengths {_span(s for seen in self.lengths.values() for s in seen)}"
            )
        return ", ".join(parts)

    def warnings(self) -> list[str]:
        """One line per If branch no trial took."""
        return [
            f"{label}: no trial took its {'then' if branch else 'else'} branch"
            for label, branch in self.untaken()
        ]

    def to_dict(self) -> dict[str, object]:
        return {
            "branches": {
                label: sorted("then" if branch else "else" for branch in seen)
                for label, seen in self.branches.items()
            },
            "loops": {label: sorted(seen) for label, seen in self.loops.items()},
            "dims": {name: sorted(seen) for name, seen in self.dims.items()},
            "lengths": {name: sorted(seen) for name, seen in self.lengths.items()},
            "summary": self.summary(),
            "note": self.note,
        }


def _span(numbers: Iterable[int]) -> str:
    values = sorted(set(numbers))
    if not values:
        return "none"
    if len(values) == 1:
        return str(values[0])
    return f"{values[0]}..{values[-1]}"
