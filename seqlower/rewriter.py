"""The one object through which every rule mutates the model.

Rules never create or rewire nodes by hand: they ask a `Rewriter` to emit nodes before an anchor
node (`rewriter.before(node).op(...)`), and to replace a value everywhere it is used
(`rewriter.replace(old, new)`). The rewriter gives every new node and value a fresh name that is
unique in the whole model, emits the operator form the graph's opset allows (Split, Squeeze and
Unsqueeze change form at opsets 13 and 18), keeps graph outputs intact when their value is
replaced, and counts what each rule did.
"""

from __future__ import annotations

__all__ = ["MAX_HINT", "Builder", "NameAllocator", "Rewriter", "can_take_name"]

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from onnx_ir import _convenience

from seqlower.ops import (
    SEQUENCE_OPS,
    graph_nodes,
    graphs_within,
    is_sequence_value,
    iter_all_graphs,
    subgraphs,
)
from seqlower.uses import OutputPositions, remove_node, replace_all_uses

_DEFAULT_OPSET = 11
_SCRATCH = "scratch"  # the hint of a scratch builder, before the hints of what it builds


MAX_HINT = 128  # characters of a hint a fresh name is made from: its last ones are kept


class NameAllocator:
    """Fresh names, unique across the model (values and nodes share one namespace here).

    A name is made from a hint (the name of the node a rewrite replaces, say) of at most
    MAX_HINT characters: a copy of a body is named after the node it replaces and the names of
    the body's nodes, which carry the names of the copies before, so names of nested copies
    doubled with each level (20 nested SequenceMaps: names of megabytes, 673 MB of memory in
    the shape inferences that copied them). The last characters are kept (they name the node
    itself); a counter keeps the names unique."""

    def __init__(self, taken: Iterable[str]) -> None:
        self._taken = set(taken)
        self._counters: dict[str, int] = collections.defaultdict(int)

    @classmethod
    def for_model(cls, model: ir.Model) -> NameAllocator:
        taken: list[str] = []
        for graph in iter_all_graphs(model):
            taken.extend(v.name for v in graph.inputs if v.name)
            taken.extend(graph.initializers)
            for node in graph_nodes(graph):
                if node.name:
                    taken.append(node.name)
                taken.extend(v.name for v in node.outputs if v.name)
        return cls(taken)

    def fresh(self, hint: str) -> str:
        hint = hint[-MAX_HINT:] if len(hint) > MAX_HINT else hint or "v"
        if hint not in self._taken:
            self._taken.add(hint)
            return hint
        while True:
            self._counters[hint] += 1
            name = f"{hint}_{self._counters[hint]}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def claim(self, name: str) -> None:
        self._taken.add(name)


class _RecordingNames(NameAllocator):
    """A `NameAllocator` that notes each name it gives and the hint it was given for, in
    order (what a scratch builder named, so that another builder can name it alike)."""

    def __init__(self) -> None:
        super().__init__(())
        self.given: list[tuple[str, str]] = []

    def fresh(self, hint: str) -> str:
        name = super().fresh(hint)
        self.given.append((hint, name))
        return name


class Rewriter:
    """Mutation, naming, opset-aware emission and bookkeeping for one lowering run."""

    def __init__(self, model: ir.Model, names: NameAllocator | None = None) -> None:
        self.model = model
        self.names = names if names is not None else NameAllocator.for_model(model)
        self.fired: collections.Counter[str] = collections.Counter()
        self.warnings: list[str] = []
        # since the last `take_touched`: nodes emitted or whose outputs were replaced (where
        # dead code may start), and the new holder of each subgraph attached to a new node
        self._touched: list[ir.Node] = []
        self._holders: dict[int, list[ir.Node]] = collections.defaultdict(list)
        # since the last `take_consumed`: nodes a rewrite folded in beyond its anchor, by rule
        self._consumed: list[tuple[ir.Node, str]] = []
        self._generation = 0
        self._list_generation = 0
        # the list tier's ragged lists: table -> the data of each list it is the table of,
        # Sum(table) == rows of data (`record_row_table`)
        self._row_tables: dict[ir.Value, list[ir.Value]] = {}
        self._outputs = OutputPositions()
        self._model_opset = model.opset_imports.get("", _DEFAULT_OPSET)
        self._function_opsets: dict[int, int] = {}
        for function in model.functions.values():
            opset = function.opset_imports.get("", self._model_opset)
            for graph in graphs_within(function.graph):
                self._function_opsets[id(graph)] = opset

    def record_row_table(self, data: ir.Value, table: ir.Value) -> None:
        """Record that `table` ([n] int64) holds the first dims of the elements of a list whose
        rows, laid end to end, are `data`: none negative, Sum(table) == data's rows (the list
        tier's ragged layout). Rewrites keep what each value means, so the fact holds while
        both values live; a value rebuilt anew is not recorded (the fact is then unknown).
        One table may be recorded with several data (lists whose elements have the same first
        dims)."""
        recorded = self._row_tables.setdefault(table, [])
        if not any(d is data for d in recorded):
            recorded.append(data)

    def is_row_table(self, table: ir.Value) -> bool:
        """Whether `table` was recorded as a list's first dims (none negative)."""
        return table in self._row_tables

    def holds_rows_of(self, table: ir.Value, data: ir.Value) -> bool:
        """Whether `table` was recorded with `data` (`record_row_table`): Sum(table) == rows."""
        return any(d is data for d in self._row_tables.get(table, ()))

    def generation(self) -> int:
        """A number that changes whenever the model may have changed through this rewriter: a
        node emitted, a value replaced, a rewrite done (`take_touched`, which the driver calls
        after each). Analyses that cache provisional answers (`StaticValues`) drop them when it
        changes."""
        return self._generation

    def list_generation(self) -> int:
        """A number that changes whenever a rewrite may have changed which node makes a list
        value or what list it reads: a value not known to be a tensor replaced, a rewrite
        that touched a node that reads or makes lists (`_may_touch_lists`). What is derived
        along the chains of a list (`Facts.sequence`) stays valid while it does not change,
        across the rewrites of the tensor operators between the reads and inserts of a list."""
        return self._list_generation

    def opset(self, graph: ir.Graph | None) -> int:
        """The default-domain opset in force in `graph` (a function may declare its own)."""
        return self._function_opsets.get(id(graph), self._model_opset)

    def before(self, anchor: ir.Node) -> Builder:
        """A builder that inserts new nodes just before `anchor`, in `anchor`'s graph."""
        graph = anchor.graph
        assert isinstance(graph, ir.Graph), "the anchor node must be in a graph"
        return Builder(self, graph, anchor, anchor.name or anchor.op_type, self.opset(graph))

    def new_graph(self, hint: str, opset: int) -> Builder:
        """A builder over a new, empty subgraph (a branch or a loop body) named after `hint`."""
        graph = ir.Graph([], [], nodes=[], name=self.names.fresh(hint))
        self._function_opsets[id(graph)] = opset
        return Builder(self, graph, None, hint, opset)

    @staticmethod
    def scratch(opset: int) -> Builder:
        """A builder over a graph of its own, in a model of its own: what a rule builds there
        to weigh it (counting its nodes, say) changes nothing of the model, and
        `Builder.adopt` moves it into the model later, named as if built there."""
        graph = ir.Graph([], [], nodes=[], name=_SCRATCH)
        # the graph is its model's own; its names are the recording allocator's (the empty
        # model is not walked for them): built per link of a chain, each object counts
        rewriter = Rewriter(ir.Model(graph, ir_version=10), _RecordingNames())
        return Builder(rewriter, graph, None, _SCRATCH, opset)

    def take_touched(self) -> tuple[list[ir.Node], dict[int, list[ir.Node]]]:
        """The nodes touched since the last call, and the holders of the subgraphs attached to
        new nodes (see `seqlower.passes.dead_code`); both are then forgotten."""
        touched, holders = self._touched, self._holders
        self._touched, self._holders = [], collections.defaultdict(list)
        self._generation += 1
        if any(_may_touch_lists(node) for node in touched):
            self._list_generation += 1
        return touched, holders

    def consumed(self, node: ir.Node, rule: str) -> None:
        """Note that the current rewrite also did to `node` what `rule` would have done to it (a
        chain of inserts folded at once): the driver counts and reports it as rewritten."""
        self._consumed.append((node, rule))

    def fired_more(self, rule: str, times: int) -> None:
        """Count `times` more firings of `rule` for the current rewrite, which did at once what
        `times + 1` rewrites would have done one by one (several lists a Loop carries, lowered
        in one rebuild of the Loop): the report counts what was lowered, not the rebuilds."""
        self.fired[rule] += times

    def take_consumed(self) -> list[tuple[ir.Node, str]]:
        """The nodes `consumed` noted since the last call, each with its rule; then forgotten."""
        consumed, self._consumed = self._consumed, []
        return consumed

    def record_emitted(self, node: ir.Node) -> None:
        """Note a node a Builder inserted (its subgraphs now have it as a holder)."""
        self._generation += 1
        self._touched.append(node)
        for subgraph in subgraphs(node):
            for graph in graphs_within(subgraph):
                self._holders[id(graph)].append(node)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def replace(self, old: ir.Value, new: ir.Value) -> None:
        """Make every user of `old` read `new` instead, graph outputs included.

        A graph output keeps its name (the interface of the model or body): `new` takes the
        name when it is a plain value of the same graph; otherwise an Identity carries it.
        """
        if old is new:
            return
        self._generation += 1
        if type(old.type) is not ir.TensorType:  # a list, or a value of unknown type
            self._list_generation += 1
        producer = old.producer()
        if producer is not None:
            self._touched.append(producer)
        if not old.is_graph_output():
            replace_all_uses(old, new)
            return
        graph = old.graph
        assert graph is not None
        name = old.name
        old.name = self.names.fresh(f"{name}_replaced")
        if can_take_name(new, graph):
            new.name = name
            if new.type is None:
                new.type = old.type
        else:
            carrier = ir.Node("", "Identity", [new], name=self.names.fresh(f"{name}_identity"))
            carrier.outputs[0].name = name
            carrier.outputs[0].type = old.type if new.type is None else new.type
            carrier.outputs[0].shape = new.shape
            # other users of `old` may follow: the carrier goes where `new` becomes available
            producer = new.producer()
            if producer is not None and producer.graph is graph:
                graph.insert_after(producer, carrier)
            elif len(graph) > 0:
                graph.insert_before(graph[0], carrier)
            else:
                graph.append(carrier)
            new = carrier.outputs[0]
        self._outputs.replace(graph, old, new)
        replace_all_uses(old, new, replace_graph_outputs=True)


# the default-domain operators that read a list and make a tensor: no list is made by them,
# and no walk along a chain of lists passes them
_LIST_READERS = frozenset({"SequenceAt", "SequenceLength", "ConcatFromSequence"})


def _may_touch_lists(node: ir.Node) -> bool:
    """Whether a rewrite that touched `node` may have changed how a list is made: a sequence
    operator or an Identity, a node of another domain or holding subgraphs (lists may live
    there), or one that reads or makes a value typed as a list. Not a reader of lists whose
    outputs are all typed as tensors (a SequenceLength lowered, a SequenceAt emitted): which
    node makes each list, and what each reads, is as before (a list value replaced counts
    in `Rewriter.replace`, whatever its producer)."""
    if (
        node.op_type in _LIST_READERS
        and node.domain == ""
        and all(type(value.type) is ir.TensorType for value in node.outputs)
    ):
        return False
    return (
        node.op_type in SEQUENCE_OPS
        or node.op_type == "Identity"
        or node.domain != ""
        or bool(node.attributes.data and subgraphs(node))
        or any(is_sequence_value(value) for value in (*node.inputs, *node.outputs))
    )


def _attribute(name: str, value: Any) -> ir.Attr:
    """An attribute from a Python value. The kinds rules emit take a direct path: onnx_ir's
    generic conversion tests runtime-checkable protocols, some 50 microseconds per attribute,
    which dominated the rewrite time of large models."""
    if isinstance(value, int):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    if isinstance(value, str):
        return ir.AttrString(name, value)
    if isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
        return ir.AttrInt64s(name, list(value))
    if isinstance(value, ir.Attr):  # after the plain values: onnx_ir's classes are protocols
        return value
    if isinstance(value, ir.Tensor):
        return ir.AttrTensor(name, value)
    if isinstance(value, ir.Graph):
        return ir.AttrGraph(name, value)
    return _convenience.convert_attribute(name, value)


def _dim(value: ir.Value, axis: int) -> int | None:
    """Dim `axis` of `value` when it is a number."""
    shape = value.shape
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def can_take_name(value: ir.Value, graph: ir.Graph) -> bool:
    """Whether `value` may be renamed to an output name of `graph`: a value a node of that graph
    computes, not already one of its inputs or outputs."""
    producer = value.producer()
    return (
        producer is not None
        and producer.graph is graph
        and not value.is_graph_output()
        and not value.is_graph_input()
    )


class Builder:
    """Emits nodes into one graph: before an anchor node, or at the end when there is none.
    Every method returns the new value(s)."""

    def __init__(
        self, rewriter: Rewriter, graph: ir.Graph, anchor: ir.Node | None, hint: str, opset: int
    ) -> None:
        self.rewriter = rewriter
        self.graph = graph
        self.anchor = anchor
        self.hint = hint
        self.opset = opset
        self._ints: dict[tuple[tuple[int, ...], str], ir.Value] = {}

    def _insert(self, node: ir.Node) -> None:
        if self.anchor is None:
            self.graph.append(node)
        else:
            self.graph.insert_before(self.anchor, node)
        self.rewriter.record_emitted(node)

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        num_outputs: int = 1,
        name: str | None = None,
    ) -> ir.Value:
        """Emit one node with one output; return the output."""
        return self.ops(op_type, inputs, attributes, num_outputs=num_outputs, name=name)[0]

    def ops(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        num_outputs: int = 1,
        name: str | None = None,
    ) -> list[ir.Value]:
        """Emit one node; return all its outputs."""
        names = self.rewriter.names
        attrs = [_attribute(k, v) for k, v in (attributes or {}).items() if v is not None]
        node = ir.Node(
            "",
            op_type,
            inputs,
            attrs,
            num_outputs=num_outputs,
            name=names.fresh(f"{self.hint}/{name or op_type}"),
        )
        for index, output in enumerate(node.outputs):
            suffix = name or op_type.lower()
            output.name = names.fresh(f"{self.hint}_{suffix}" + (f"_{index}" if index else ""))
        self._insert(node)
        return list(node.outputs)

    def add_node(self, node: ir.Node) -> None:
        """Insert an already built node (e.g. nodes cloned from a body)."""
        self._insert(node)

    def copy(
        self,
        node: ir.Node,
        mapping: dict[ir.Value, ir.Value],
        inputs: Sequence[ir.Value | None] | None = None,
    ) -> ir.Node:
        """Emit a copy of `node` (a node of a loop body, say) reading `inputs`, by default its
        own read through `mapping` (a value not in it is read as it is); each output is mapped
        to its copy's, which keeps its type. Named as `ops` names: `{hint}/{op_type}`,
        `{hint}_{old name}`."""
        names = self.rewriter.names
        if inputs is None:
            inputs = [None if v is None else mapping.get(v, v) for v in node.inputs]
        copy = ir.Node(
            node.domain,
            node.op_type,
            inputs,
            list(node.attributes.values()),
            num_outputs=len(node.outputs),
            name=names.fresh(f"{self.hint}/{node.op_type}"),
        )
        for old, new in zip(node.outputs, copy.outputs, strict=True):
            new.name = names.fresh(f"{self.hint}_{old.name}")
            new.type = old.type
            mapping[old] = new
        self._insert(copy)
        return copy

    def adopt(self, scratch: Builder) -> bool:
        """Move every node a `Rewriter.scratch` builder built into this builder's place, in
        order, named as this builder would have named them had it built them: the same hints,
        after this builder's own, asked of the model's allocator in the same order. The
        result is the model that building here again gives, without building twice. False
        (and nothing changed) when that cannot be done: another opset, a subgraph (its names
        and opsets are not followed), a name not given by the scratch builder's allocator."""
        names = scratch.rewriter.names
        graph = scratch.graph
        if not isinstance(names, _RecordingNames) or scratch.opset != self.opset:
            return False
        given = {name for _, name in names.given}
        for node in graph_nodes(graph):
            if node.attributes.data and subgraphs(node):
                return False
            if node.name not in given or any(v.name not in given for v in node.outputs):
                return False
        prefix = scratch.hint
        if not all(hint.startswith((f"{prefix}/", f"{prefix}_")) for hint, _ in names.given):
            return False
        renamed = {
            name: self.rewriter.names.fresh(self.hint + hint[len(prefix) :])
            for hint, name in names.given
        }
        for node in list(graph_nodes(graph)):
            remove_node(graph, node)
            node.name = renamed[node.name]  # type: ignore[index]
            for output in node.outputs:
                output.name = renamed[output.name]  # type: ignore[index]
            self._insert(node)
        names.given.clear()
        return True

    # -- constants -----------------------------------------------------------------------

    def constant(self, array: np.ndarray | int | list[int], name: str = "const") -> ir.Value:
        if not isinstance(array, np.ndarray):
            array = np.array(array, dtype=np.int64)
        value = self.op("Constant", [], {"value": ir.Tensor(array)}, name=name)
        value.type = ir.TensorType(ir.DataType.from_numpy(array.dtype))
        value.shape = ir.Shape(array.shape)
        return value

    def ints(self, values: Sequence[int], name: str = "ints") -> ir.Value:
        """A 1-D int64 constant; one node per distinct content and name within one builder
        (a rewrite that squeezes 512 chunks on one axis emits one `axes` constant)."""
        key = (tuple(int(v) for v in values), name)
        cached = self._ints.get(key)
        if cached is None or cached.producer() is None or cached.producer().graph is not self.graph:
            cached = self._ints[key] = self.constant(np.array(key[0], dtype=np.int64), name)
        return cached

    # -- opset-dependent forms -----------------------------------------------------------

    def split(
        self,
        data: ir.Value,
        axis: int,
        sizes: Sequence[int] | None,
        count: int,
        runtime_sizes: ir.Value | None = None,
    ) -> list[ir.Value]:
        """Split `data` along `axis` into `count` chunks of the given sizes. One chunk of the
        whole axis (a static dim) is `data` itself: Split would only copy it."""
        if count == 0:
            return []
        if count == 1 and sizes is not None and _dim(data, axis) == sizes[0]:
            return [data]
        attrs: dict[str, Any] = {"axis": axis}
        if self.opset < 13:
            if sizes is None:
                raise ValueError("Split before opset 13 needs static sizes")
            attrs["split"] = list(sizes)
            return self.ops("Split", [data], attrs, num_outputs=count)
        split_input = runtime_sizes if sizes is None else self.ints(sizes, "split_sizes")
        if split_input is not None and split_input.dtype != ir.DataType.INT64:
            # SplitToSequence takes int32 sizes too; Split takes int64 only
            split_input = self.op("Cast", [split_input], {"to": int(ir.DataType.INT64)})
        return self.ops("Split", [data, split_input], attrs, num_outputs=count)

    def squeeze(self, data: ir.Value, axes: Sequence[int]) -> ir.Value:
        if self.opset < 13:
            return self.op("Squeeze", [data], {"axes": list(axes)})
        return self.op("Squeeze", [data, self.ints(axes, "axes")])

    def unsqueeze(self, data: ir.Value, axes: Sequence[int]) -> ir.Value:
        if self.opset < 13:
            return self.op("Unsqueeze", [data], {"axes": list(axes)})
        return self.op("Unsqueeze", [data, self.ints(axes, "axes")])

    def reverse(self, data: ir.Value, *, by_gather: bool = False) -> ir.Value:
        """`data` with the order of its rows (axis 0) reversed: a Slice with step -1, or, when
        `by_gather` (tract 0.23.9 slices no run-time dim with step -1), a Gather of
        (n - 1) - Range(0, n): onnxruntime 1.32's optimizer empties a Gather of the plain
        descending Range(n - 1, -1, -1), reading its limit -1 as "the end" (both probed)."""
        if not by_gather:
            bounds = [self.ints([-1]), self.ints([-(2**63)]), self.ints([0]), self.ints([-1])]
            return self.op("Slice", [data, *bounds], name="reversed")
        if self.opset >= 15:
            first = self.op("Shape", [data], {"start": 0, "end": 1})
        else:
            first = self.op("Slice", [self.op("Shape", [data]), self.ints([0]), self.ints([1])])
        count = self.squeeze(first, [0])
        zero = self.constant(np.array(0, np.int64), "zero")
        one = self.constant(np.array(1, np.int64), "one")
        last = self.op("Sub", [count, one])
        upward = self.op("Range", [zero, count, one], name="order")
        order = self.op("Sub", [last, upward], name="reversed_order")
        return self.op("Gather", [data, order], {"axis": 0}, name="reversed")

    def stack(self, elements: Sequence[ir.Value], axis: int = 0) -> ir.Value:
        """Concat of the elements, each unsqueezed at `axis` (numpy.stack); an element given
        many times is unsqueezed once (a list of one value 100,000 times made 100,000 nodes)."""
        once: dict[ir.Value, ir.Value] = {}
        unsqueezed = [
            once[e] if e in once else once.setdefault(e, self.unsqueeze(e, [axis]))
            for e in elements
        ]
        if len(unsqueezed) == 1:
            return unsqueezed[0]
        return self.op("Concat", unsqueezed, {"axis": axis})
