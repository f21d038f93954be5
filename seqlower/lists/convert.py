"""Turn every list that can be tensors into its tensor form (`seqlower.lists.forms`).

The walk visits the main graph and its subgraphs in node order. Each sequence operator on a
convertible list is emitted in its tensor form just before it; readers' results replace the old
results; a Loop that carries a list is rebuilt to carry the pair of tensors instead (its body
takes and returns both), and an If that returns a list returns the pair from both branches (the
branches may build lists of different lengths). The old nodes are left dead and removed at the
end. This is the last tier of the lowering: the pattern rules, which give cheaper forms, have
already run to a fixpoint.
"""

from __future__ import annotations

__all__ = ["ListsLowered", "lower_lists"]

import dataclasses
from collections.abc import Callable, Mapping

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.lists import flattened
from seqlower.lists.components import ListPlan, find_lists
from seqlower.lists.forms import ListForms
from seqlower.lists.signs import carried_counters
from seqlower.lists.tensors import INT64_MAX, Layout, TensorList
from seqlower.ops import graph_nodes, is_sequence_value, node_subgraphs, subgraphs
from seqlower.rewriter import Builder, Rewriter


@dataclasses.dataclass
class ListsLowered:
    """What `lower_lists` did: the nodes it replaced, and for each list that stays a sequence,
    its nodes with the reason."""

    # each replaced node, with the layout of the list it made or read (its tier in the report)
    converted: list[tuple[ir.Node, str]] = dataclasses.field(default_factory=list)
    # each node emitted, with the node whose conversion emitted it
    made: dict[ir.Node, ir.Node] = dataclasses.field(default_factory=dict)
    kept: dict[ir.Node, str] = dataclasses.field(default_factory=dict)


def lower_lists(
    model: ir.Model,
    rewriter: Rewriter,
    frozen: Mapping[ir.Node, str] | None = None,
    rank_refusal: str | None = None,
) -> ListsLowered:
    """Lower every convertible list of `model` (main graph and subgraphs) to tensors, but for
    the lists a node of `frozen` makes or reads (those keep the reason `frozen` gives).
    `rank_refusal`: why the target takes no list whose elements' rank is known only at run
    time (`seqlower.runtime_ranks`); None where it takes them."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    plans = find_lists(model, opset, rank_refusal)
    for plan in plans:
        held = [node for node in _nodes_of(plan) if frozen and node in frozen]
        if plan.convertible and held:
            plan.reason, plan.follows_operator = frozen[held[0]], True  # type: ignore[index]
    outcome = ListsLowered()
    for plan in plans:
        if not (plan.convertible or plan.follows_operator):
            for node in _nodes_of(plan):
                outcome.kept.setdefault(node, plan.reason or "")
    if any(plan.convertible for plan in plans):
        _Converter(model, rewriter, plans, outcome).run()
    return outcome


_BRANCHES = ("then_branch", "else_branch")
_SAME = frozenset({"Identity", "Cast"})  # what a length keeps its value through


def _both(a: dict[ir.Value, int], b: dict[ir.Value, int]) -> dict[ir.Value, int]:
    """What two conditions that both hold prove: the larger length of each list."""
    found = dict(a)
    for value, least in b.items():
        found[value] = max(found.get(value, 0), least)
    return found


def _nodes_of(plan: ListPlan) -> list[ir.Node]:
    nodes: dict[int, ir.Node] = {}
    for value in plan.values:
        producer = value.producer()
        if producer is not None:
            nodes.setdefault(id(producer), producer)
        for use in value.uses():
            nodes.setdefault(id(use.node), use.node)
    return list(nodes.values())


class _Converter:
    def __init__(
        self, model: ir.Model, rewriter: Rewriter, plans: list[ListPlan], outcome: ListsLowered
    ) -> None:
        self.model = model
        self.rewriter = rewriter
        self.outcome = outcome
        self.plan_of: dict[int, ListPlan] = {
            id(value): plan for plan in plans if plan.convertible for value in plan.values
        }
        self.flat: dict[int, TensorList] = {}
        # id of a converted SequenceLength's result -> the list it measures (`_guards`)
        self.lengths: dict[int, ir.Value] = {}
        self.by_data: dict[int, list[ir.Value]] = {}  # id of a list's data -> its values
        self.owners: dict[int, ir.Node] = {}
        self.current: ir.Node | None = None
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
        self.forms = ListForms(
            rewriter, self._table_builder, StaticValues(opset), self._table_place
        )

    def run(self) -> None:
        graphs = [self.model.graph]
        for graph in graphs:
            for node in graph_nodes(graph):
                for subgraph in subgraphs(node):
                    self.owners[id(subgraph)] = node
                    graphs.append(subgraph)
                    if node.op_type == "Loop" and node.domain == "" and subgraph.inputs:
                        self.forms.counters.add(id(subgraph.inputs[0]))
                        values = self.forms.values
                        self.forms.counters.update(map(id, carried_counters(node, values)))
        self._graph(self.model.graph)
        self._outputs()
        # imported here: seqlower.passes imports this package (the driver runs the tier)
        from seqlower.passes.dead_code import remove_dead_nodes

        remove_dead_nodes(self.model)

    def _outputs(self) -> None:
        """A list that is a sequence-typed model output: the output is made from its tensors,
        at the end of the main graph (the interface is kept):

            stacked [n, *dims]             -> SplitToSequence(data, axis=0, keepdims=0)
            stacked, unit rows along u     -> SplitToSequence(data, axis=u)  (chunks of one)
            ragged (rows, first dims [n])  -> SplitToSequence(rows, firsts, axis=0)
        """
        graph = self.model.graph
        opset = self.model.opset_imports.get("", self.model.opset_imports.get("ai.onnx", 1))
        for value in list(graph.outputs):
            if not self._converting(value) or id(value) not in self.flat:
                continue
            flat = self._flat(value)
            b = Builder(self.rewriter, graph, None, value.name or "output", opset)
            if flat.layout.kind == "stacked" and flat.layout.unit is not None:
                made = b.op("SplitToSequence", [flat.data], {"axis": flat.layout.unit})
            elif flat.layout.kind == "stacked":
                made = b.op("SplitToSequence", [flat.data], {"axis": 0, "keepdims": 0})
            else:
                made = b.op("SplitToSequence", [flat.data, flat.table], {"axis": 0})
            made.type = value.type
            self.rewriter.replace(value, made)

    # -- the walk ------------------------------------------------------------------------

    def _converting(self, value: ir.Value | None) -> bool:
        return value is not None and id(value) in self.plan_of and is_sequence_value(value)

    def _graph(self, graph: ir.Graph) -> None:
        for node in list(graph_nodes(graph)):
            self._node(node)

    def _node(self, node: ir.Node) -> None:
        self.current = node
        op = node.op_type if node.domain == "" else ""
        if op == "Loop":
            self._flattened_concats(node)
        if op == "Loop" and any(self._converting(v) for v in node.inputs[2:]):
            self._loop(node)
            return
        if op == "If" and any(self._converting(v) for v in node.outputs):
            self._if(node)
            return
        for name, subgraph in node_subgraphs(node):
            self._branch(node, name, subgraph)
        if not any(self._converting(v) for v in (*node.inputs, *node.outputs)):
            return
        b = self.rewriter.before(node)
        inputs = node.inputs
        result: ir.Value | None = None
        if op == "SequenceEmpty":
            self._define(node.outputs[0], self.forms.empty(b, self._layout(node.outputs[0])))
        elif op == "SequenceConstruct":
            elements = [v for v in inputs if v is not None]
            layout = self._layout(node.outputs[0])
            self._define(node.outputs[0], self.forms.construct(b, elements, layout))
        elif op == "SequenceInsert":
            position = inputs[2] if len(inputs) > 2 else None
            flat = self.forms.insert(b, self._flat(inputs[0]), inputs[1], position)  # type: ignore[arg-type]
            self._define(node.outputs[0], flat)
        elif op == "SequenceErase":
            position = inputs[1] if len(inputs) > 1 else None
            self._define(node.outputs[0], self.forms.erase(b, self._flat(inputs[0]), position))
        elif op == "SplitToSequence":
            layout = self._layout(node.outputs[0])
            self._define(node.outputs[0], self.forms.split(b, node, layout))
        elif op == "Identity":
            self._define(node.outputs[0], self._flat(inputs[0]))
        elif op == "SequenceAt":
            self._shapes_read(b, node)
            if node.outputs[0].uses() or node.outputs[0].is_graph_output():
                # a read in the main graph whose element reaches a model output stays in
                # the model (a body's or a branch's output may be dropped with its carry)
                live = node.graph is self.model.graph and _reaches_output(node.outputs[0])
                result = self.forms.at(b, self._flat(inputs[0]), inputs[1], live)  # type: ignore[arg-type]
        elif op == "SequenceLength":
            measured = self._flat(inputs[0])
            result = self.forms.length(b, measured)
            self.lengths[id(result)] = inputs[0]  # type: ignore[assignment]
            self.forms.measured[id(result)] = measured.key
        elif op == "ConcatFromSequence":
            axis = node.attributes.get_int("axis", 0)
            new_axis = bool(node.attributes.get_int("new_axis", 0))
            result = self.forms.concat(b, self._flat(inputs[0]), axis, new_axis)
        else:  # find_lists admits no other operator
            raise AssertionError(f"no tensor form for {node.op_type}")
        if result is not None:
            old = node.outputs[0]
            # the tensor computed is the one read: a later reader in this walk (a split of it)
            # relies on its shape as the analysis saw it
            if result.type is None:
                result.type = old.type
            if result.shape is None and old.shape is not None:
                result.shape = ir.Shape(list(old.shape))
            self.rewriter.replace(old, result)
        lists = [v for v in (*node.inputs, *node.outputs) if self._converting(v)]
        self._converted(node, self._layout(lists[0]).kind)

    def _shapes_read(self, b: Builder, node: ir.Node) -> None:
        """A Shape of the element read takes it from the list's sizes (the element itself may
        then not be read at all: `max(len(s) for s in seqs)`)."""
        readers = [
            use.node
            for use in node.outputs[0].uses()
            if use.node.op_type == "Shape" and use.node.domain == "" and use.idx == 0
        ]
        shape = None
        for reader in dict.fromkeys(readers):
            shape = shape or self.forms.shape_at(b, self._flat(node.inputs[0]), node.inputs[1])  # type: ignore[arg-type]
            if shape is None:
                return  # a stacked list: its element is one Gather
            start = reader.attributes.get_int("start", 0)
            end = reader.attributes.get_int("end")
            read = shape
            if start != 0 or end is not None:  # Slice clamps and counts from the end as Shape
                bounds = [
                    b.ints([start], "start"),
                    b.ints([INT64_MAX if end is None else end], "end"),
                ]
                read = b.op("Slice", [shape, *bounds], name="shape_part")
                read.type = ir.TensorType(ir.DataType.INT64)
            self.rewriter.replace(reader.outputs[0], read)

    def _converted(self, node: ir.Node, layout: str) -> None:
        """Note that `node` was replaced, in `layout`, by the nodes emitted since the last call."""
        self.outcome.converted.append((node, layout))
        self._made_for(node)

    def _made_for(self, node: ir.Node) -> None:
        """Note that the nodes emitted since the last call come from `node`."""
        touched, _ = self.rewriter.take_touched()
        for made in touched:
            if made is not node:
                self.outcome.made.setdefault(made, node)

    def _flattened_concats(self, node: ir.Node) -> None:
        """Each value the Loop `node` carries that joins every element of a converted list,
        flattened, in order (`seqlower.lists.flattened`): read from the list's tensors at once,
        before the Loop; the Loop's output is then read by no one (the cleanup drops the
        carried value, and the Loop when it carried nothing else)."""
        b: Builder | None = None
        for index in range(len(node.inputs) - 2):
            listed = is_sequence_value(node.inputs[2 + index])
            check = flattened.check_list if listed else flattened.check
            found = check(node, index, self.forms.values, self._measures)
            if isinstance(found, str):
                continue
            b = b or self.rewriter.before(node)
            old = node.outputs[found.index]
            result = self.forms.flattened(b, self._flat(found.source))
            if len(found.target) > 1:
                target = b.ints(list(found.target), "target")
                result = b.op("Reshape", [result, target], name="flattened")
            if found.initial is not None:
                parts = [found.initial, result]
                result = b.op("Concat", parts, {"axis": found.axis}, name="flattened")
            # the list's readers (ConcatFromSequence) read the join, or the accumulator's do
            for read in [use.node.outputs[0] for use in old.uses()] if listed else [old]:
                if result.type is None:
                    result.type = read.type
                if result.shape is None and read.shape is not None:
                    result.shape = ir.Shape(list(read.shape))
                self.rewriter.replace(read, result)
        if b is not None:
            self._made_for(node)

    def _measures(self, trip: ir.Value, s: ir.Value) -> bool:
        """Whether the trip count `trip` is the length of the converted list `s`: a converted
        SequenceLength of a list of the same tensors (through Identity and Cast), or, stacked,
        the data's dim 0 as a pattern rule reads it."""
        read = self.flat.get(id(s))
        if read is None:
            return False
        length: ir.Value | None = trip
        producer = trip.producer()
        while producer is not None and producer.domain == "" and producer.op_type in _SAME:
            length = producer.inputs[0]
            producer = length.producer() if length is not None else None
        measured = self.lengths.get(id(length))
        if measured is not None:
            other = self.flat.get(id(measured))
            return (
                other is not None
                and other.layout == read.layout
                and len(other.parts) == len(read.parts)
                and all(a is b for a, b in zip(other.parts, read.parts))
            )
        stacked = read.layout.kind == "stacked" and read.layout.list_axis == 0
        return stacked and self._first_dim_of(trip) is read.data

    def _layout(self, value: ir.Value) -> Layout:
        layout = self.plan_of[id(value)].layout
        assert layout is not None
        return layout

    def _flat(self, value: ir.Value | None) -> TensorList:
        assert value is not None
        return self.flat[id(value)]

    def _define(self, value: ir.Value, flat: TensorList) -> None:
        self.flat[id(value)] = flat
        if flat.layout.kind == "ragged" and flat.table is not None:
            # the layout's invariant, which ConcatFromSequence -> data relies on too: the
            # first dims add up to the rows (loop-ragged-rows then needs no clamp)
            self.rewriter.record_row_table(flat.data, flat.table)
        self.by_data.setdefault(id(flat.data), []).append(value)

    def _table_builder(self, flat: TensorList) -> Builder:
        """A builder in the graph that defines `flat`, before the node of that graph that is
        (or holds) the node being converted."""
        producer = flat.data.producer()
        graph = producer.graph if producer is not None else flat.data.graph
        anchor = self.current
        assert anchor is not None
        while anchor.graph is not graph:
            anchor = self.owners[id(anchor.graph)]
        return self.rewriter.before(anchor)

    def _table_place(self, flat: TensorList) -> tuple[tuple[int, ...], Callable[[], Builder]]:
        """Where the table of `flat` may be for the node being converted, and where to build
        it. The ids of the graphs from the deepest one around that node reached from the list's
        graph through If branches only (never into a Loop body, where it would run every
        iteration) up to the list's graph: a table made earlier in any of them serves. The
        builder (made only when none does, so the readers are walked once per table, not per
        read): in the deepest of those branches that holds every reader of the list still to
        convert (an Identity passes it on and needs none), so that a path that reads nothing of
        the list (`continue`) builds no table; else as `_table_builder`."""
        producer = flat.data.producer()
        graph = producer.graph if producer is not None else flat.data.graph
        assert self.current is not None
        path = [self.current]  # the node, then the nodes that hold it, up to the list's graph
        while path[-1].graph is not graph:
            path.append(self.owners[id(path[-1].graph)])
        deepest = len(path) - 1
        while deepest > 0 and path[deepest].op_type == "If" and path[deepest].domain == "":
            deepest -= 1
        graphs = tuple(id(path[k].graph) for k in range(deepest, len(path)))

        def builder() -> Builder:
            readers = [
                use.node
                for value in self.by_data.get(id(flat.data), [])
                for use in value.uses()
                if use.node.op_type != "Identity"
            ]
            chosen = len(path) - 1
            while chosen > deepest:
                branch = path[chosen - 1].graph
                if branch is None or not all(self._inside(r, branch) for r in readers):
                    break
                chosen -= 1
            return self.rewriter.before(path[chosen])

        return graphs, builder

    def _inside(self, node: ir.Node, graph: ir.Graph) -> bool:
        """Whether `node` is in `graph` or in a graph nested in it."""
        inner = node.graph
        while inner is not None and inner is not graph:
            owner = self.owners.get(id(inner))
            inner = None if owner is None else owner.graph
        return inner is graph

    # -- control flow --------------------------------------------------------------------

    def _loop(self, node: ir.Node) -> None:
        """Loop(M, c, s0 (a list), v0, body(i, c, s, v) -> (c', s', v', scans))
        -> Loop(M, c, data0, shapes0, v0, body(i, c, data, shapes, v) -> (c', data', shapes',
        v', scans)) (as many tensors per list as its layout has parts)"""
        body = node.attributes["body"].as_graph()
        carried = len(node.inputs) - 2
        lists = [k for k in range(carried) if self._converting(node.inputs[2 + k])]
        params: list[ir.Value] = list(body.inputs[:2])
        for k in range(carried):
            param = body.inputs[2 + k]
            if k in lists:
                outer = self._flat(node.inputs[2 + k])
                inner = self._params(param, outer)
                self._define(param, inner)
                params.extend(inner.parts)
            else:
                params.append(param)
        body.inputs.clear()
        body.inputs.extend(params)
        self._graph(body)
        self.current = node
        results: list[ir.Value] = [body.outputs[0]]
        for k in range(len(body.outputs) - 1):
            value = body.outputs[1 + k]
            if k in lists:
                inner = self._flat(value)
                results.extend(self._graph_outputs(body, list(inner.parts), results))
            else:
                results.append(value)
        body.outputs.clear()
        body.outputs.extend(results)

        inputs: list[ir.Value | None] = list(node.inputs[:2])
        for k in range(carried):
            if k in lists:
                inputs.extend(self._flat(node.inputs[2 + k]).parts)
            else:
                inputs.append(node.inputs[2 + k])
        b = self.rewriter.before(node)
        extra = sum(self._parts_of(node.outputs[k]) - 1 for k in lists)
        new = b.ops(
            "Loop", inputs, {"body": body}, num_outputs=len(node.outputs) + extra, name="loop"
        )
        self._map_outputs(node, new, set(lists))
        self._converted(node, self._layout(node.inputs[2 + lists[0]]).kind)

    def _if(self, node: ir.Node) -> None:
        """If(c, then: .. -> s (a list), else: .. -> s) -> If(c, then: .. -> (data, shapes),
        else: .. -> (data, shapes))"""
        lists = {j for j, v in enumerate(node.outputs) if self._converting(v)}
        attributes = {}
        for name in _BRANCHES:
            branch = node.attributes[name].as_graph()
            self._branch(node, name, branch)
            results: list[ir.Value] = []
            for j, value in enumerate(branch.outputs):
                if j in lists:
                    inner = self._flat(value)
                    results.extend(self._graph_outputs(branch, list(inner.parts), results))
                else:
                    results.append(value)
            branch.outputs.clear()
            branch.outputs.extend(results)
            attributes[name] = branch
        b = self.rewriter.before(node)
        extra = sum(self._parts_of(node.outputs[j]) - 1 for j in lists)
        new = b.ops("If", list(node.inputs), attributes, num_outputs=len(node.outputs) + extra)
        self._map_outputs(node, new, lists)
        self._converted(node, self._layout(node.outputs[min(lists)]).kind)

    def _branch(self, node: ir.Node, name: str, graph: ir.Graph) -> None:
        """Convert a subgraph of `node`. In the then branch of an If whose condition says
        `len(s) >= k` (also `>`, under And, Cast, Identity), the list s holds at least k
        elements there: an erase or read at a constant position within them needs no run-time
        check (a stack popped under `if len(stack) >= 2:`)."""
        saved: dict[int, TensorList] = {}
        rows = dict(self.forms.min_rows)
        if node.op_type == "If" and node.domain == "" and name == "then_branch":
            for value, least in self._guards(node.inputs[0]).items():
                if not is_sequence_value(value):  # a tensor with so many rows at least
                    self._more_rows(value, least)
                    continue
                flat = self.flat.get(id(value))
                if flat is not None and least > flat.min_length:
                    saved[id(value)] = flat
                    self.flat[id(value)] = dataclasses.replace(flat, min_length=least)
                # (unit rows along another axis than 0: the data's dim 0 is not the length)
                stacked = flat is not None and flat.layout.kind == "stacked"
                if stacked and flat.layout.list_axis == 0:  # type: ignore[union-attr]
                    self._more_rows(flat.data, least)  # type: ignore[union-attr]
        self._graph(graph)
        self.flat.update(saved)
        self.forms.min_rows = rows
        self.current = node

    def _more_rows(self, data: ir.Value, least: int) -> None:
        rows = self.forms.min_rows
        rows[id(data)] = max(rows.get(id(data), 0), least)

    def _guards(self, cond: ir.Value | None, depth: int = 0) -> dict[ir.Value, int]:
        """The lists `cond` being true proves to hold at least so many elements."""
        producer = cond.producer() if cond is not None else None
        if producer is None or producer.domain != "" or depth > 8:
            return {}
        op, inputs = producer.op_type, producer.inputs
        if op in ("Identity", "Cast"):
            return self._guards(inputs[0], depth + 1)
        if op == "And":
            return _both(self._guards(inputs[0], depth + 1), self._guards(inputs[1], depth + 1))
        if op == "If" and len(producer.outputs) == 1:  # `a and b` as TorchScript writes it
            then, other = (producer.attributes[n].as_graph() for n in _BRANCHES)
            false = self.forms.values.get(other.outputs[0])
            if false is None or false.size != 1 or bool(false.reshape(-1)[0]):
                return {}
            first = self._guards(inputs[0], depth + 1)
            return _both(first, self._guards(then.outputs[0], depth + 1))
        # len(s) >= k, len(s) > k, k <= len(s), k < len(s)
        flipped = {"LessOrEqual": "GreaterOrEqual", "Less": "Greater"}
        if op in flipped:
            op, inputs = flipped[op], list(reversed(inputs))
        if op not in ("GreaterOrEqual", "Greater") or len(inputs) != 2:
            return {}
        bound = self.forms.values.get_int(inputs[1])
        if bound is None:
            return {}
        measured = self.lengths.get(id(inputs[0]))
        lists = [measured] if measured is not None else self._stacked_measured(inputs[0])
        return {value: bound + (op == "Greater") for value in lists}

    def _stacked_measured(self, length: ir.Value | None) -> list[ir.Value]:
        """The tensor whose dim 0 `length` is as a pattern rule reads a list's length
        (`Gather(Shape(data), 0)`, or `Shape(data, end=1)` made a scalar), and the stacked
        lists whose data it is."""
        data = self._first_dim_of(length)
        if data is None:
            return []
        lists = [
            value
            for value in self.by_data.get(id(data), [])
            if self._layout(value).kind == "stacked" and self._layout(value).list_axis == 0
        ]
        return [data, *lists]

    def _first_dim_of(self, length: ir.Value | None) -> ir.Value | None:
        """The tensor whose dim 0 `length` is, when made so, else None."""
        producer = length.producer() if length is not None else None
        while producer is not None and producer.domain == "" and producer.op_type in _SAME:
            producer = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        if producer is None or producer.domain != "" or not producer.inputs:
            return None
        shape = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        if shape is None or shape.op_type != "Shape" or shape.domain != "":
            return None
        if shape.attributes.get_int("start", 0) != 0:
            return None
        if producer.op_type == "Gather":
            index = producer.inputs[1] if len(producer.inputs) > 1 else None
            if index is None or index.shape is None or len(index.shape) != 0:
                return None
            if self.forms.values.get_int(index) != 0:
                return None
        elif producer.op_type in ("Reshape", "Squeeze"):
            if shape.attributes.get_int("end") != 1:
                return None
        else:
            return None
        return shape.inputs[0]

    def _parts_of(self, value: ir.Value) -> int:
        """How many tensors stand for the list `value` (its layout's parts)."""
        return len(self._layout(value).part_names)

    def _map_outputs(self, old: ir.Node, new: list[ir.Value], lists: set[int]) -> None:
        position = 0
        for index, output in enumerate(old.outputs):
            if index in lists:
                count = self._parts_of(output)
                parts = tuple(new[position : position + count])
                self._define(output, self.forms.typed(TensorList(parts, self._layout(output))))
                position += count
            else:
                new[position].type = output.type
                new[position].shape = output.shape
                self.rewriter.replace(output, new[position])
                position += 1

    def _params(self, param: ir.Value, outer: TensorList) -> TensorList:
        names = self.rewriter.names
        base = param.name or "list"
        suffixes = outer.layout.part_names
        parts = tuple(ir.Value(name=names.fresh(f"{base}_{suffix}")) for suffix in suffixes)
        return self.forms.typed(TensorList(parts, outer.layout))

    def _graph_outputs(
        self, graph: ir.Graph, values: list[ir.Value], taken: list[ir.Value]
    ) -> list[ir.Value]:
        """`values` as outputs of `graph`: an Identity in the graph carries a value made
        elsewhere (an outer value, a graph input) or already an output."""
        outputs = []
        for value in values:
            producer = value.producer()
            if (
                producer is None
                or producer.graph is not graph
                or value in taken
                or value in outputs
            ):
                builder = Builder(
                    self.rewriter, graph, None, graph.name or "body", self._opset(graph)
                )
                carried = builder.op("Identity", [value], name="list_out")
                carried.type, carried.shape = value.type, value.shape
                value = carried
            outputs.append(value)
        return outputs

    def _opset(self, graph: ir.Graph) -> int:
        return self.rewriter.opset(graph)


# how many nodes `_reaches_output` looks at before it answers no
_LIVE_STEPS = 64


def _reaches_output(value: ir.Value) -> bool:
    """Whether `value` reaches an output of its graph through tensors only: through nodes of
    the standard domain without subgraphs, none of whose outputs is a list (a list's length
    or a Loop's carry may be all a later reader keeps of it). What reaches a model output
    stays in the model whatever later passes remove; a bounded walk, no answer means no."""
    seen: set[int] = set()
    pending = [value]
    while pending:
        current = pending.pop()
        if current.is_graph_output():
            return True
        for use in current.uses():
            node = use.node
            if id(node) in seen or node.graph is not value.graph:
                continue
            seen.add(id(node))
            if len(seen) > _LIVE_STEPS:
                return False
            if node.domain != "" or node_subgraphs(node):
                continue
            if any(is_sequence_value(out) for out in node.outputs):
                continue
            pending.extend(node.outputs)
    return False
