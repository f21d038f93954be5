"""Which sequence values can become a pair of tensors, and with which element type and rank.

Sequence values that flow into one another (through Identity, SequenceInsert, SequenceErase, a
Loop's carried values and its body, an If's outputs and its branches) must change form together:
they are one *list*, a connected component. A list can become tensors when

- it is internal: none of its values is an input or output of the model (the interface);
- every node that produces or reads one of its values is a sequence operator, an Identity, a
  Loop carrying it or an If returning it (no Optional, no custom operator, no SequenceMap);
- its elements have one known element type, and one known rank (from the tensors put in, the
  tensors read out, or the declared sequence type); where the rank is known only at run time,
  or differs between the elements, the list is tensors in the `unranked` layout when the
  target takes it (`rank_refusal` None), and stays, with the target's reason, when it does not;
- the model's opset is 14 or newer (elements are rebuilt by Reshape with `allowzero`, so that
  an element with a zero-size dim keeps its shape).

`find_lists` returns every list of the main graph and its subgraphs, each with its plan or the
one reason it must stay.
"""

from __future__ import annotations

__all__ = ["MIN_OPSET", "ListPlan", "find_lists"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.loop_shapes import LoopShapes, ShapeFact
from seqlower.analysis.rank_rules import unknown_rank_cause as cause_of
from seqlower.analysis.static_values import StaticValues
from seqlower.lists.axis_first import moved_axis
from seqlower.lists.tensors import Layout
from seqlower.lists.unit_rows import unit_axis
from seqlower.ops import graph_nodes, is_sequence_value, subgraphs
from seqlower.runtime_quirks import SPLIT_TO_SEQUENCE_TYPES

MIN_OPSET = 14  # Reshape's allowzero

# the operators a list's values may flow through, or be read by, in the tensor form
_READERS = frozenset(
    {
        "ConcatFromSequence",
        "Identity",
        "If",
        "Loop",
        "SequenceAt",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
    }
)
_PRODUCERS = frozenset(
    {
        "Identity",
        "If",
        "Loop",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SplitToSequence",
    }
)


@dataclasses.dataclass
class ListPlan:
    """One list: its sequence values (in no particular order) and, when it can become tensors,
    its element type and rank; otherwise `reason` says why it stays."""

    values: list[ir.Value]
    dtype: ir.DataType | None = None
    rank: int | None = None
    reason: str | None = None
    layout: Layout | None = None
    interface: bool = False  # it is a model input or output (the report explains those)
    # the list stays because an operator on it stays, for that operator's own reasons
    follows_operator: bool = False

    @property
    def convertible(self) -> bool:
        return self.reason is None


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.values: dict[int, ir.Value] = {}

    def add(self, value: ir.Value) -> None:
        key = id(value)
        if key not in self.parent:
            self.parent[key] = key
            self.values[key] = value

    def find(self, key: int) -> int:
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: ir.Value, b: ir.Value | None) -> None:
        if b is None:
            return
        self.add(a)
        self.add(b)
        ra, rb = self.find(id(a)), self.find(id(b))
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def find_lists(model: ir.Model, opset: int, rank_refusal: str | None = None) -> list[ListPlan]:
    """Every list of the main graph and its subgraphs, in a deterministic order (the order in
    which their first value is met walking the graphs). `rank_refusal`: why the target takes
    no list whose elements' rank is known only at run time (`seqlower.runtime_ranks`); None
    where it takes them."""
    sets = _UnionFind()
    graphs: list[ir.Graph] = [model.graph]
    owners: dict[int, ir.Node] = {}  # id of a subgraph -> the node that holds it
    for graph in graphs:  # grows while iterating: nested bodies are walked too
        for value in graph.inputs:
            if is_sequence_value(value):
                sets.add(value)
        for node in graph_nodes(graph):
            for subgraph in subgraphs(node):
                owners[id(subgraph)] = node
                graphs.append(subgraph)
            _connect(node, sets)
        for value in graph.outputs:
            if is_sequence_value(value):
                sets.add(value)
    members: dict[int, list[ir.Value]] = {}
    for key in sets.parent:  # insertion order: deterministic
        members.setdefault(sets.find(key), []).append(sets.values[key])
    main = model.graph
    plans = []
    bodies = _BodyShapes(owners)
    for values in members.values():
        plan = ListPlan(values)
        plan.interface = any(
            v.graph is main and (v.is_graph_input() or v.is_graph_output()) for v in values
        )
        plan.reason = _blocker(values, main, opset)
        plan.follows_operator = plan.reason is not None and "has no tensor form" in plan.reason
        if plan.reason is None:
            _element_type(plan, bodies, rank_refusal)
        plans.append(plan)
    _stack_together(plans, bodies)
    _lockstep_together(plans, bodies)
    values = StaticValues(opset)
    depths: dict[int, int] = {id(main): 0}

    def depth(graph: ir.Graph | None) -> int:
        """How many Loop bodies `graph` is in (a walk up its owners, no recursion)."""
        chain: list[ir.Graph] = []
        while graph is not None and id(graph) not in depths and id(graph) in owners:
            chain.append(graph)
            graph = owners[id(graph)].graph
        known = depths.get(id(graph), 0) if graph is not None else 0
        for inner in reversed(chain):
            owner = owners[id(inner)]
            known += owner.op_type == "Loop" and owner.domain == ""
            depths[id(inner)] = known
        return known

    for plan in plans:
        if plan.reason is None:
            plan.reason = _output_blocker(plan, main)
        if plan.reason is None and plan.layout is not None:
            unit = unit_axis(plan.values, plan.layout, values, depth)
            if unit is not None:  # a dim of one every element has: the list axis takes it
                plan.layout = dataclasses.replace(plan.layout, unit=unit)
        if plan.reason is None and plan.layout is not None and plan.layout.kind == "flat":
            moved = moved_axis(plan.values, plan.layout, main)
            if isinstance(moved, int):  # joined on that axis only: stored with it first
                plan.layout = dataclasses.replace(plan.layout, moved=moved)
    return plans


def _stack_together(plans: list[ListPlan], bodies: _BodyShapes) -> None:
    """Lists that pass elements to one another (`children.append(nodes[j])`, an element read
    from one list put into another) and show one static shape S among them all (a list built
    from `[zeros(1, 3)]`) are stacked together when induction proves it: assuming every element
    of every such list has its group's S, each tensor put in that shape inference leaves
    unknown has S by the loop analysis. All groups are assumed at once (a tree LSTM's hidden
    and cell lists feed each other's pushes); a group whose proof fails is dropped and the
    others proved again without it."""
    open_plans = [
        p
        for p in plans
        if p.reason is None and p.layout is not None and p.layout.kind in ("flat", "ragged")
    ]
    plan_of = {id(v): k for k, p in enumerate(open_plans) for v in p.values}
    parent = list(range(len(open_plans)))

    def find(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for k, plan in enumerate(open_plans):
        for value in plan.values:
            for use in value.uses():
                if use.node.op_type != "SequenceAt" or use.node.domain != "" or use.idx != 0:
                    continue
                for put in use.node.outputs[0].uses():
                    if put.node.op_type not in ("SequenceInsert", "SequenceConstruct"):
                        continue
                    if put.node.op_type == "SequenceInsert" and put.idx != 1:
                        continue
                    other = plan_of.get(id(put.node.outputs[0]))
                    if other is not None:
                        parent[max(find(k), find(other))] = min(find(k), find(other))
    groups: dict[int, list[ListPlan]] = {}
    for k, plan in enumerate(open_plans):
        groups.setdefault(find(k), []).append(plan)
    assumed: dict[int, tuple[tuple[int, ...], list[tuple[ir.Value, tuple[int, ...]]]]] = {}
    for root, members in groups.items():
        found = _group_shape(members, bodies)
        if found is not None:
            assumed[root] = found
    while assumed:
        elements = {
            v: shape for root, (shape, _) in assumed.items() for p in groups[root] for v in p.values
        }
        analyses: dict[int, LoopShapes] = {}
        failed = [
            root
            for root, (shape, unknown) in assumed.items()
            if any(bodies.assumed_shape(x, elements, analyses) != shape for x, _ in unknown)
        ]
        if not failed:
            break
        for root in failed:
            del assumed[root]
    for root, (shape, _) in assumed.items():
        for plan in groups[root]:
            assert plan.rank is not None and plan.dtype is not None
            plan.layout = Layout("stacked", plan.rank, plan.dtype, shape)


def _group_shape(
    members: list[ListPlan], bodies: _BodyShapes
) -> tuple[tuple[int, ...], list[tuple[ir.Value, tuple[int, ...]]]] | None:
    """The one static shape S the tensors put into a group of lists show, with the tensors
    whose shape is still to be proved; None when there is no one S, a list of the group is
    split from a tensor (its own layout rules hold), or the group's ranks or types differ."""
    if len({(p.rank, p.dtype) for p in members}) != 1:
        return None
    shown: set[tuple[Dim, ...]] = set()
    unknown: list[tuple[ir.Value, tuple[int, ...]]] = []
    pending: list[ir.Value] = []
    for plan in members:
        for value in plan.values:
            producer = value.producer()
            if producer is None or producer.domain != "":
                continue
            if producer.op_type == "SplitToSequence":
                return None
            if producer.op_type == "SequenceConstruct":
                put = [v for v in producer.inputs if v is not None]
            elif producer.op_type == "SequenceInsert" and producer.inputs[1] is not None:
                put = [producer.inputs[1]]
            else:
                continue
            for tensor in put:
                dims = _inserted_dims(tensor, bodies)
                if len(dims) != members[0].rank:
                    return None
                if _static(dims):
                    shown.add(dims)
                else:
                    pending.append(tensor)
    if len(shown) != 1:
        return None
    (shape,) = shown
    unknown = [(x, shape) for x in pending]  # type: ignore[misc]
    return shape, unknown  # type: ignore[return-value]


def _connect(node: ir.Node, sets: _UnionFind) -> None:
    """Join the sequence values `node` makes one list of."""
    for value in (*node.inputs, *node.outputs):
        if is_sequence_value(value):
            sets.add(value)  # type: ignore[arg-type]
    if node.domain != "":
        return
    op = node.op_type
    if op in ("Identity", "SequenceInsert", "SequenceErase") and is_sequence_value(node.outputs[0]):
        sets.union(node.outputs[0], node.inputs[0])
    elif op == "Loop":
        # a carried list whose output inference left untyped (a Loop it could not type) is
        # joined too, by its initial value: `_blocker` keeps it, the body with it
        body = node.attributes["body"].as_graph()
        for k, output in enumerate(node.outputs[: len(node.inputs) - 2]):
            if not (is_sequence_value(output) or is_sequence_value(node.inputs[2 + k])):
                continue
            sets.union(output, node.inputs[2 + k])
            sets.union(output, body.inputs[2 + k])
            sets.union(output, body.outputs[1 + k])
    elif op == "If":
        branches = subgraphs(node)
        for j, output in enumerate(node.outputs):
            if is_sequence_value(output):
                for branch in branches:
                    sets.union(output, branch.outputs[j])


def _blocker(values: list[ir.Value], main: ir.Graph, opset: int) -> str | None:
    """Why the list of `values` must stay a sequence, or None."""
    for value in values:
        if value.graph is main and value.is_graph_input():
            return f"'{value.name}' is a sequence-typed model input (the interface is kept)"
    for value in values:
        producer = value.producer()
        if producer is not None and producer.op_type == "Loop" and not is_sequence_value(value):
            return (
                f"{_describe(producer)} carries it, but its output '{value.name}' has no "
                "sequence type (ONNX inference could not type the Loop)"
            )
        if producer is not None and (producer.domain != "" or producer.op_type not in _PRODUCERS):
            return f"it is made by {_describe(producer)}, which has no tensor form"
        if producer is not None and producer.op_type == "SplitToSequence":
            unknown = _unknown_split_rank(producer)
            if unknown:
                return unknown
        for use in value.uses():
            reader = use.node
            if reader.domain != "" or reader.op_type not in _READERS:
                return f"it is read by {_describe(reader)}, which has no tensor form"
            if reader.op_type == "Loop" and use.idx < 2:
                return f"it is read by {_describe(reader)} as its trip count or condition"
    if opset < MIN_OPSET:
        return (
            f"the model's opset is {opset}; the tensor form of a list needs opset {MIN_OPSET} "
            "(Reshape with allowzero)"
        )
    return None


def _output_blocker(plan: ListPlan, main: ir.Graph) -> str | None:
    """Why a list that is a sequence-typed model output stays a sequence, or None. The output
    stays a sequence (the interface is kept); behind it, a stacked or ragged list that a Loop
    or If builds is tensors, and one SplitToSequence makes the output from them
    (`seqlower.lists.convert`): the loop then carries no sequence. A list made in the main
    graph alone stays as it is (its elements are the tensors already), and so does a list of
    elements onnxruntime runs no SplitToSequence for (int8, bool...)."""
    layout = plan.layout
    built_inside = any(value.graph is not main for value in plan.values)
    splittable = (
        layout is not None
        and layout.kind in ("stacked", "ragged")
        and layout.dtype.name.lower() in SPLIT_TO_SEQUENCE_TYPES  # what onnxruntime splits
    )
    if built_inside and splittable:
        return None
    for value in plan.values:
        if value.graph is main and value.is_graph_output():
            return f"it feeds the sequence-typed output '{value.name}' (the interface is kept)"
    return None


def _unknown_split_rank(node: ir.Node) -> str | None:
    """Why no tensor holds the chunks of a SplitToSequence for want of a rank, if so: a `split`
    of unknown rank (its tensor form differs for a scalar and a 1-D `split`), or an input of
    unknown rank cut along an axis other than 0 (which only the rank locates). An input of
    unknown rank cut along axis 0 makes a list whose elements' rank is known only at run time
    (`seqlower.lists.unranked`)."""
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if _rank(node.inputs[0]) is None:
        axis = node.attributes.get_int("axis", 0)
        if axis != 0:
            where = ", which counts from the end" if axis < 0 else ""
            return (
                "the rank of the input is unknown, so no tensor holds its elements (split "
                f"along axis {axis}{where}: only a split along axis 0 can do without the rank)"
            )
    if split is not None and _rank(split) is None:
        return "the rank of the 'split' input is unknown, so no tensor holds its elements"
    return None


def _describe(node: ir.Node) -> str:
    op = node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}"
    if node.name:
        return f"{op} '{node.name}'"
    return f"{op} (output '{node.outputs[0].name}')" if node.outputs else op


def _element_type(plan: ListPlan, bodies: _BodyShapes, rank_refusal: str | None) -> None:
    """Set the plan's element type and rank from what flows in and out, or its reason."""
    dtypes: set[ir.DataType] = set()
    ranks: dict[int, str] = {}  # rank -> a value that shows it
    declared_ranks: set[int] = set()
    unranked: list[tuple[ir.Value, str]] = []  # tensors put in whose rank is not known
    for value in plan.values:
        if isinstance(value.type, ir.SequenceType) and isinstance(
            value.type.elem_type, ir.TensorType
        ):
            dtypes.add(value.type.elem_type.dtype)
        elem_shape = _declared_element_shape(value)
        if elem_shape is not None:
            declared_ranks.add(len(elem_shape))
        producer = value.producer()
        if producer is not None and producer.domain == "":
            for rank, witness in _ranks_made(producer):
                ranks.setdefault(rank, witness)
            unranked += _unranked_put_in(producer)
        for use in value.uses():
            for rank, witness in _ranks_read(use.node, use.idx):
                ranks.setdefault(rank, witness)
    if len(dtypes) != 1:
        plan.reason = (
            "its element type is unknown" if not dtypes else "its elements have different types"
        )
        return
    plan.dtype = next(iter(dtypes))
    if len(ranks) > 1:
        shown = ", ".join(f"rank {r} ('{w}')" for r, w in sorted(ranks.items()))
        _unranked(plan, f"its elements have different ranks: {shown}", rank_refusal)
        return
    if ranks and unranked:
        # the rank of the others is no proof of its rank: a table of one width cannot hold it
        first, how = unranked[0]
        why = f"the rank of '{first.name}', {how} into it, is unknown ({cause_of(first)})"
        _unranked(plan, why, rank_refusal)
        return
    if ranks:
        plan.rank = next(iter(ranks))
    elif len(declared_ranks) == 1 and not any(how == "split" for _, how in unranked):
        plan.rank = next(iter(declared_ranks))
    else:
        why = "the rank of its elements is unknown (even after shape inference)"
        if unranked:  # where it gets lost
            first, how = unranked[0]
            why = f"the rank of '{first.name}', {how} into it, is unknown ({cause_of(first)})"
        _unranked(plan, why, rank_refusal)
        return
    plan.layout = _layout(plan.values, plan.rank, plan.dtype, bodies)


def _unranked(plan: ListPlan, why: str, rank_refusal: str | None) -> None:
    """A list whose elements have no one rank known before run time (`why`): the unranked
    layout, or, where the target refuses it, the reason it stays."""
    if rank_refusal is not None:
        plan.reason = f"{why}; {rank_refusal}"
        return
    assert plan.dtype is not None
    plan.layout = Layout("unranked", None, plan.dtype)


def _layout(values: list[ir.Value], rank: int, dtype: ir.DataType, bodies: _BodyShapes) -> Layout:
    """The cheapest layout the list's elements allow (`seqlower.lists.tensors`): stacked when
    every element put in provably has one shape, ragged when they differ in the first dim only,
    else flat. An empty list made by SequenceEmpty needs those dims static."""
    sources: list[tuple[Dim, ...]] = []  # the element dims each maker or insert shows
    put: list[ir.Value | None] = []  # the tensor each source shows, None for a split
    splits: list[bool] = []  # per SplitToSequence: whether its chunks differ in the first dim
    ragged_splits = True  # every SplitToSequence cuts axis 0 and keeps it (the ragged form)
    has_empty = False
    for value in values:
        producer = value.producer()
        if producer is None or producer.domain != "":
            continue
        op = producer.op_type
        if op == "SequenceEmpty":
            has_empty = True
        elif op == "SequenceConstruct":
            sources.extend(_dims(v) for v in producer.inputs)
            put.extend(producer.inputs)
        elif op == "SequenceInsert":
            sources.append(_inserted_dims(producer.inputs[1], bodies))
            put.append(producer.inputs[1])
        elif op == "SplitToSequence":
            dims, varies_first = _split_element_dims(producer)
            if dims is None:
                return Layout("flat", rank, dtype)
            sources.append(dims)
            put.append(None)
            splits.append(varies_first)
            ragged_splits = ragged_splits and (_cuts_axis_0(producer) or _unbinds(producer))
    if not sources or any(len(dims) != rank for dims in sources):
        return Layout("flat", rank, dtype)
    # one split alone: its chunks share their shape (or all but the first dim) by construction
    alone = len(sources) == 1 and len(splits) == 1
    same = alone or (None not in sources[0] and len(set(sources)) == 1)
    if same and not any(splits) and (not has_empty or _static(sources[0])):
        return Layout("stacked", rank, dtype, sources[0])
    shape = None if any(splits) else _assumed_shape(values, sources, put, bodies)
    if shape is not None:
        return Layout("stacked", rank, dtype, shape)
    if _in_lockstep(values, bodies):  # one shape at a time, which may change
        return Layout("stacked", rank, dtype, (None,) * rank)
    rests = {dims[1:] for dims in sources}
    same_rest = alone or (len(rests) == 1 and None not in sources[0][1:])
    if rank >= 1 and same_rest and ragged_splits and (not has_empty or _static(sources[0][1:])):
        return Layout("ragged", rank, dtype, sources[0][1:])
    return Layout("flat", rank, dtype)


def _assumed_shape(
    values: list[ir.Value],
    sources: list[tuple[Dim, ...]],
    put: list[ir.Value | None],
    bodies: _BodyShapes,
) -> tuple[int, ...] | None:
    """The one static shape S of every element, proved by induction where some tensors put in
    have dims shape inference leaves unknown: S is what every other source shows, and each of
    those tensors, computed in a Loop body, has shape S when every element read from the list
    has shape S (a stack that pops two vectors, composes them and pushes the result). None
    when no such S is proved."""
    known = {dims for dims in sources if _static(dims)}
    if len(known) != 1:
        return None
    (shape,) = known
    elements = dict.fromkeys(values, shape)
    analyses: dict[int, LoopShapes] = {}  # one analysis per Loop under the hypothesis
    for dims, tensor in zip(sources, put):
        if _static(dims):
            continue
        if tensor is None or bodies.assumed_shape(tensor, elements, analyses) != shape:
            return None
    return shape  # type: ignore[return-value]


def _in_lockstep(values: list[ir.Value], bodies: _BodyShapes) -> bool:
    """Whether every value of the list holds elements of one shape, which may change from one
    iteration to the next (beam hypotheses rebuilt each step, `hyps = [cat(hyps[p], t) for p,
    t in ...]`, all one token longer): one stacked tensor whose shape changes as a whole.

    Proved by induction over the loops: assuming every value of the list holds elements of one
    shape, each SequenceConstruct puts in tensors of one shape (the same tensor; equal dims
    that inference knows; or, in a Loop body, equal dims that the loop analysis derives with
    the reads of the list's values sharing per-iteration dims). Loop carries, If outputs,
    Identity and SequenceErase keep the property. Lists with other makers are not taken here
    (lists grown by inserts are `_lockstep_together`'s; split lists have their own rules)."""
    constructs = []
    for value in values:
        producer = value.producer()
        if producer is None:  # a Loop body's carried input: its initial value and update are
            continue  # values of the list too
        if producer.domain != "":
            return False
        if producer.op_type == "SequenceConstruct":
            constructs.append(producer)
        elif producer.op_type not in ("Identity", "If", "Loop", "SequenceErase"):
            return False
    if not constructs:
        return False
    return _constructs_alike(constructs, frozenset(values), bodies, {})


def _constructs_alike(
    constructs: list[ir.Node],
    uniform: frozenset[ir.Value],
    bodies: _BodyShapes,
    analyses: dict[int, LoopShapes],
) -> bool:
    """Whether each SequenceConstruct puts in tensors of one shape, the lists of `uniform`
    assumed to hold elements of one shape each (`_in_lockstep`)."""
    for node in constructs:
        inputs = list(node.inputs)
        if any(x is None for x in inputs):
            return False
        if all(x is inputs[0] for x in inputs):
            continue
        dims = [_dims(x) for x in inputs]
        if None not in dims[0] and all(d == dims[0] for d in dims):
            continue
        shapes = [bodies.exact_shape(x, uniform, analyses) for x in inputs]  # type: ignore[arg-type]
        first = shapes[0]
        if not isinstance(first, tuple) or None in first or any(s != first for s in shapes):
            return False
    return True


def _lockstep_together(plans: list[ListPlan], bodies: _BodyShapes) -> None:
    """Lists built by SequenceInsert (from SequenceEmpty or a SequenceConstruct) whose values
    each hold elements of one shape, known only at run time and possibly changing from one
    iteration to the next: stacked, `shaped_by_first` where a value may be an empty list
    (`best = []; for j ...: best.append(cat(hyps[j], t))`, each one token longer this step).

    Proved by induction for all such lists at once, assuming each of them holds elements of
    one shape (a list's elements are often read from another one: `hyps = [best[k] for k in
    order]`); a list whose proof fails is dropped and the others proved again without it (a
    greatest fixpoint). Besides the SequenceConstructs `_in_lockstep` checks, each
    SequenceInsert(s, x) must put x into an empty list (s made by SequenceEmpty), or into a
    list a Loop carries (`_grown_alike`): one that enters the Loop empty, is only inserted
    into, erased from, passed on or returned by the Ifs of the body, and takes tensors of one
    shape, the same in every iteration. A list that keeps what an earlier loop put in, grown
    by tensors of another shape (hypotheses ended at different steps), stays ragged."""
    candidates = [
        p
        for p in plans
        if p.reason is None
        and p.layout is not None
        and p.layout.kind in ("flat", "ragged")
        and p.rank is not None
        and p.dtype is not None
        and p.dtype != ir.DataType.STRING
        and _lockstep_makers(p.values)
    ]
    grown = _GrownLists([], frozenset(), bodies)
    while candidates:
        uniform = frozenset(v for p in candidates for v in p.values)
        analyses: dict[int, LoopShapes] = {}
        grown = _GrownLists(candidates, uniform, bodies)
        failed = [
            p for p in candidates if not _grows_in_lockstep(p, uniform, bodies, analyses, grown)
        ]
        if not failed:
            break
        candidates = [p for p in candidates if p not in failed]
    for plan in candidates:
        assert plan.rank is not None and plan.dtype is not None
        empty = any(_made_by(v, "SequenceEmpty") for v in plan.values)
        dims = grown.fixed.get(id(plan), (None,) * plan.rank)
        checked = id(plan) in grown.checked
        plan.layout = Layout(
            "stacked", plan.rank, plan.dtype, dims, shaped_by_first=empty, nonempty_join=checked
        )


def _made_by(value: ir.Value, op: str) -> bool:
    producer = value.producer()
    return producer is not None and producer.domain == "" and producer.op_type == op


def _lockstep_makers(values: list[ir.Value]) -> bool:
    """Whether every value is made by an operator the lockstep proof knows, one of them an
    insert or an unbind (the lists of constructs alone are `_in_lockstep`'s). An unbind's
    elements are slices of one tensor: one shape, nothing to prove (a list a Loop builds as a
    scan output, carried by an outer Loop from an empty list)."""
    known = ("Identity", "If", "Loop", "SequenceConstruct", "SequenceEmpty", "SequenceErase")
    grown = False
    for value in values:
        producer = value.producer()
        if producer is None:
            continue
        if producer.domain != "":
            return False
        if producer.op_type == "SequenceInsert" or (
            producer.op_type == "SplitToSequence" and _unbinds(producer)
        ):
            grown = True
        elif producer.op_type not in known:
            return False
    return grown


def _grows_in_lockstep(
    plan: ListPlan,
    uniform: frozenset[ir.Value],
    bodies: _BodyShapes,
    analyses: dict[int, LoopShapes],
    grown: _GrownLists,
) -> bool:
    """The induction step of `_lockstep_together` for one list. `grown.fixed` gets, by the
    plan's id, the static dims every element of it has: each maker of its elements (an
    insert, a SequenceConstruct, an unbind; a model input, of unknown elements) records the
    dims it proves (`_GrownLists.fix`), and a dim stays where all agree."""
    for value in plan.values:
        producer = value.producer()
        if producer is None:  # a model input's elements are not known; a body's come in
            if bodies.owners_map.get(id(value.graph)) is None:
                grown.fix(plan, None)
            continue
        if producer.op_type == "SequenceConstruct":
            for x in producer.inputs:
                grown.fix(plan, _inserted_dims(x, bodies))
            continue
        if producer.op_type == "SplitToSequence":  # an unbind (`_lockstep_makers`)
            grown.fix(plan, _unbound_dims(producer, uniform, bodies, analyses))
            continue
        if producer.op_type != "SequenceInsert":
            continue
        if _empty_list(producer.inputs[0]):
            grown.fix(plan, _inserted_dims(producer.inputs[1], bodies))
            continue
        loop = bodies.loop_around(producer.graph)
        if loop is None or not _grown_alike(loop, plan, uniform, bodies, analyses, grown):
            return False
    constructs = [v for v in plan.values if _made_by(v, "SequenceConstruct")]
    return _constructs_alike([v.producer() for v in constructs], uniform, bodies, analyses)  # type: ignore[misc]


def _unbound_dims(
    node: ir.Node,
    uniform: frozenset[ir.Value],
    bodies: _BodyShapes,
    analyses: dict[int, LoopShapes],
) -> tuple[Dim, ...] | None:
    """The dims of the elements of an unbind `x.unbind(a)`: x's other dims; where x is a
    scan output of a Loop unbound along its scan axis, the dims the loop analysis proves for
    the value each iteration stacks fill those shape inference leaves unknown (the per-layer
    keys of a cache, `h @ wk[layer]` of a carried h whose rows change: (?, 6))."""
    dims, _ = _split_element_dims(node)
    data = node.inputs[0]
    loop = data.producer() if data is not None else None
    if dims is None or loop is None or loop.op_type != "Loop" or loop.domain != "":
        return dims
    index = data.index()  # type: ignore[union-attr]
    if index is None or index < len(loop.inputs) - 2:
        return dims  # a carried output
    if node.attributes.get_int("axis", 0) % (len(dims) + 1) != 0:
        return dims
    if id(loop) not in analyses:
        analyses[id(loop)] = LoopShapes(
            loop, StaticValues(), uniform=uniform, owners=bodies.owners_map
        )
    body = loop.attributes["body"].as_graph()
    each = analyses[id(loop)].shape(body.outputs[1 + index])
    if not isinstance(each, tuple) or len(each) != len(dims):
        return dims
    return tuple(p if d is None and type(p) is int else d for d, p in zip(dims, each))


def _empty_list(value: ir.Value | None) -> bool:
    """Whether `value` is surely an empty list: SequenceEmpty, through Identity."""
    while value is not None:
        producer = value.producer()
        if producer is None or producer.domain != "":
            return False
        if producer.op_type == "SequenceEmpty":
            return True
        if producer.op_type != "Identity":
            return False
        value = producer.inputs[0]
    return False


def _grown_alike(
    loop: ir.Node,
    plan: ListPlan,
    uniform: frozenset[ir.Value],
    bodies: _BodyShapes,
    analyses: dict[int, LoopShapes],
    grown: _GrownLists,
) -> bool:
    """Whether, in every iteration of `loop`, every value of the list in its body (and the
    branches of the body's Ifs) holds elements of one shape X, the same in every iteration:
    each value there comes from the carried list, an empty list, or another value there by an
    insert, an erase, an Identity or an If; each carried list enters the Loop empty; and every
    tensor inserted there has shape X, fixed for the whole Loop (the loop analysis, assuming
    the lists of `uniform` each hold elements of one shape; else assuming this list holds
    elements of the shape the body puts in, `_GrownLists`)."""
    found = _grown_from_empty(loop, plan, bodies)
    if found is None:
        return False
    inside, put = found
    if not put:
        return True
    if id(loop) not in analyses:
        analyses[id(loop)] = LoopShapes(
            loop, StaticValues(), uniform=uniform, owners=bodies.owners_map
        )
    analysis = analyses[id(loop)]
    shapes = [analysis.input_shape(x) for x in put]
    first = shapes[0]
    if isinstance(first, tuple) and not any(d is None or analysis.varies(d) for d in first):
        if any(shape != first for shape in shapes):
            return False
        grown.fix(plan, first, analysis.nonempty_joins)
        return True
    # what is put in may depend on what the list holds (a cache the loop's state reads):
    # assume the list holds what the body puts in, in every iteration, and confirm it
    shape = grown.shape(loop, inside)
    if shape is None:
        return False
    grown.fix(plan, shape, grown.nonempty_joins(loop))
    return True


def _grown_from_empty(
    loop: ir.Node, plan: ListPlan, bodies: _BodyShapes
) -> tuple[list[ir.Value], list[ir.Value]] | None:
    """The values of the list in `loop`'s body (and its Ifs' branches) and the tensors put into
    them, where each comes from the carried list (entering the Loop empty), an empty list, or
    another such value by an insert, an erase, an Identity or an If; else None."""
    body = loop.attributes["body"].as_graph()
    region = bodies.branches_of(body)
    inside = [v for v in plan.values if id(v.graph) in region]
    put: list[ir.Value] = []
    for value in inside:
        producer = value.producer()
        if producer is None:  # a carried list: it must enter empty
            if value.graph is not body or not value.is_graph_input():
                return None
            index = body.inputs.index(value)
            init = loop.inputs[index] if index < len(loop.inputs) else None
            if index < 2 or not _empty_list(init):
                return None
            continue
        op = producer.op_type
        if op == "SequenceEmpty":
            continue
        if op in ("SequenceInsert", "SequenceErase", "Identity"):
            source = producer.inputs[0]
            if source is None or id(source.graph) not in region:
                return None
            if op == "SequenceInsert":  # into an empty list too: the result may flow on
                if producer.inputs[1] is None:
                    return None
                put.append(producer.inputs[1])
            continue
        if op != "If":
            return None
        branch_outputs = [
            g.outputs[value.index()]  # type: ignore[index]
            for g in subgraphs(producer)
        ]
        if any(id(out.graph) not in region for out in branch_outputs):
            return None
    return inside, put


class _GrownLists:
    """The hypothesis that each list a Loop grows from empty holds what its body puts in
    (`LoopShapes`' `grown`), made once per Loop for every candidate list grown there (one
    analysis per Loop, not per list: linear in the lists), and the static dims of each plan's
    elements where it is confirmed (`fixed`, by the plan's id)."""

    def __init__(
        self, candidates: list[ListPlan], uniform: frozenset[ir.Value], bodies: _BodyShapes
    ) -> None:
        self._candidates = candidates
        self._uniform = uniform
        self._bodies = bodies
        self._analyses: dict[int, LoopShapes] = {}
        self.fixed: dict[int, tuple[Dim, ...]] = {}
        # the plans (ids) some of whose elements' shape an analysis proved through a Loop in
        # the body or a Conv (`LoopShapes.nonempty_joins`): their joins keep the failure of an
        # empty list
        self.checked: set[int] = set()

    def shape(self, loop: ir.Node, inside: list[ir.Value]) -> tuple | None:
        """The one shape the list of values `inside` holds in `loop`, confirmed; else None."""
        if id(loop) not in self._analyses:
            groups = []
            for plan in self._candidates:  # only lists grown from empty: sound hypotheses
                found = _grown_from_empty(loop, plan, self._bodies)
                if found is not None and found[1]:
                    groups.append(found[0])
            self._analyses[id(loop)] = LoopShapes(
                loop,
                StaticValues(),
                uniform=self._uniform,
                owners=self._bodies.owners_map,
                grown=groups,
            )
        return self._analyses[id(loop)].grown_shapes.get(inside[0])

    def nonempty_joins(self, loop: ir.Node) -> bool:
        """`LoopShapes.nonempty_joins` of the analysis of `loop` under the hypothesis."""
        analysis = self._analyses.get(id(loop))
        return analysis is not None and analysis.nonempty_joins

    def fix(
        self, plan: ListPlan, shape: ShapeFact | tuple[Dim, ...], checked: bool = False
    ) -> None:
        """Record that some elements of `plan` have `shape` (None: not even its rank is
        known): its static dims stay where every shape recorded has the same (a dim of one
        lets the list axis take its place). `checked`: that shape was proved through a Loop in
        a body or a Conv (the plan goes into `self.checked`)."""
        assert plan.rank is not None
        if checked:
            self.checked.add(id(plan))
        if isinstance(shape, tuple) and len(shape) == plan.rank:
            static = tuple(d if type(d) is int else None for d in shape)
        else:
            static = (None,) * plan.rank
        if id(plan) in self.fixed:  # other elements: the dims both have
            static = tuple(a if a == b else None for a, b in zip(self.fixed[id(plan)], static))
        self.fixed[id(plan)] = static


def _cuts_axis_0(node: ir.Node) -> bool:
    """A SplitToSequence along axis 0 that keeps the axis (the chunks are rows of its input)."""
    rank = len(node.inputs[0].shape)  # type: ignore[union-attr, arg-type]
    axis = node.attributes.get_int("axis", 0)
    squeeze = len(node.inputs) < 2 or node.inputs[1] is None
    squeeze = squeeze and node.attributes.get_int("keepdims", 1) == 0
    return axis % rank == 0 and not squeeze


def _unbinds(node: ir.Node) -> bool:
    """A SplitToSequence into chunks of one along an axis it drops (`x.unbind(a)`): each
    element keeps the input's other dims, the ragged form merges the axis with the next one."""
    squeeze = len(node.inputs) < 2 or node.inputs[1] is None
    return squeeze and node.attributes.get_int("keepdims", 1) == 0


def _static(dims: tuple[Dim, ...]) -> bool:
    return all(isinstance(d, int) for d in dims)


Dim = int | str | None  # a static size, a model dim's name, or unknown


def _dims(value: ir.Value | None) -> tuple[Dim, ...]:
    """The dims of a tensor as facts: ints, the names of model dims, None where unknown (and
    for the names shape inference makes up, which may stand for different sizes). The shapes
    of elements read from a list a Loop builds are the join of what it holds
    (passes/carried_sequences.py), not onnx's shape of its initial element."""
    if value is None or value.shape is None:
        return (None,)
    dims: list[Dim] = []
    for dim in value.shape:
        if isinstance(dim, int):
            dims.append(dim)
        else:
            name = getattr(dim, "value", None)
            dims.append(name if name and not name.startswith("unk__") else None)
    return tuple(dims)


class _BodyShapes:
    """The loop analysis of each Loop body a list is put into from, made once per Loop."""

    def __init__(self, owners: dict[int, ir.Node]) -> None:
        self._owners = owners  # id of a subgraph -> the node that holds it
        self._analyses: dict[int, LoopShapes] = {}

    @property
    def owners_map(self) -> dict[int, ir.Node]:
        """The node that holds each subgraph (by id), for the loop analyses."""
        return self._owners

    def assumed_shape(
        self,
        value: ir.Value,
        elements: dict[ir.Value, tuple[int, ...]],
        analyses: dict[int, LoopShapes],
    ) -> ShapeFact:
        """The shape the analysis of the innermost Loop around `value` (through the Ifs in
        its body) proves for it, when the sequences of `elements` hold elements of the
        given shapes; None outside any Loop. `analyses` keeps the analysis of each Loop
        under that hypothesis."""
        owner = self._innermost_loop(value.graph)
        if owner is None:
            return None
        if id(owner) not in analyses:
            analyses[id(owner)] = LoopShapes(owner, StaticValues(), elements, owners=self._owners)
        return analyses[id(owner)].shape(value)

    def exact_shape(
        self, value: ir.Value, uniform: frozenset[ir.Value], analyses: dict[int, LoopShapes]
    ) -> ShapeFact:
        """The shape the analysis of the innermost Loop around `value` derives for it in one
        iteration (dims that change between iterations included), when every sequence of
        `uniform` holds elements of one shape; None outside any Loop. `analyses` keeps the
        analysis of each Loop under that hypothesis."""
        owner = self._innermost_loop(value.graph)
        if owner is None:
            return None
        if id(owner) not in analyses:
            analyses[id(owner)] = LoopShapes(
                owner, StaticValues(), uniform=uniform, owners=self._owners
            )
        return analyses[id(owner)].input_shape(value)

    def _innermost_loop(self, graph: ir.Graph | None) -> ir.Node | None:
        """The innermost Loop whose body holds `graph`, through any node's subgraphs; None
        outside every Loop."""
        while graph is not None:
            owner = self._owners.get(id(graph))
            if owner is None:
                return None
            if owner.op_type == "Loop" and owner.domain == "":
                return owner
            graph = owner.graph
        return None

    def loop_around(self, graph: ir.Graph | None) -> ir.Node | None:
        """The Loop whose body is `graph` or holds it through Ifs only; None elsewhere."""
        while graph is not None:
            owner = self._owners.get(id(graph))
            if owner is None or owner.domain != "" or owner.op_type not in ("If", "Loop"):
                return None
            if owner.op_type == "Loop":
                return owner
            graph = owner.graph
        return None

    def branches_of(self, body: ir.Graph) -> set[int]:
        """The ids of `body` and of the branches of its Ifs, theirs too (not nested Loops)."""
        found = {id(body)}
        stack = [body]
        while stack:
            for node in stack.pop():
                if node.op_type == "If" and node.domain == "":
                    for branch in subgraphs(node):
                        found.add(id(branch))
                        stack.append(branch)
        return found

    def shape(self, value: ir.Value) -> ShapeFact:
        """The shape the loop analysis proves for `value`, when a Loop body computes it."""
        graph = value.graph
        owner = None
        while graph is not None:  # through the Ifs of the body: their branches run in it
            owner = self._owners.get(id(graph))
            if owner is None or owner.domain != "" or owner.op_type not in ("If", "Loop"):
                return None
            if owner.op_type == "Loop":
                break
            graph = owner.graph
        if owner is None or graph is None:
            return None
        if id(owner) not in self._analyses:
            self._analyses[id(owner)] = LoopShapes(owner, StaticValues(), owners=self._owners)
        return self._analyses[id(owner)].shape(value)


def _inserted_dims(value: ir.Value | None, bodies: _BodyShapes) -> tuple[Dim, ...]:
    """The dims of a tensor put into a list; in a Loop body, a dim shape inference leaves
    unknown is the one the loop analysis proves the same in every iteration (`x[s:e]` of an
    `x` of shape [T, 3] keeps its 3 columns)."""
    dims = _dims(value)
    if value is None or None not in dims:
        return dims
    proved = bodies.shape(value)
    if not isinstance(proved, tuple) or len(proved) != len(dims):
        return dims
    return tuple(p if d is None and isinstance(p, int) else d for d, p in zip(dims, proved))


def _split_element_dims(node: ir.Node) -> tuple[tuple[Dim, ...] | None, bool]:
    """The dims of the elements of a SplitToSequence (the first one None when it differs), and
    whether it differs: chunks of sizes along axis 0. None when chunks along another axis may
    differ (only the flat layout holds them)."""
    data = node.inputs[0]
    if data is None or data.shape is None:
        return None, False
    dims = _dims(data)
    rank = len(dims)
    axis = node.attributes.get_int("axis", 0)
    axis = axis + rank if axis < 0 else axis
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is None:
        if node.attributes.get_int("keepdims", 1) == 0:
            return dims[:axis] + dims[axis + 1 :], False
        return (*dims[:axis], 1, *dims[axis + 1 :]), False
    if axis != 0:
        return None, False
    return (None, *dims[1:]), True


def _declared_element_shape(value: ir.Value) -> ir.Shape | None:
    seq_type = value.type
    if not isinstance(seq_type, ir.SequenceType):
        return None
    elem = seq_type.elem_type
    shape = getattr(elem, "shape", None)
    return shape if isinstance(shape, ir.Shape) else None


def _rank(value: ir.Value | None) -> int | None:
    if value is None or value.shape is None:
        return None
    return len(value.shape)


def _ranks_made(node: ir.Node) -> list[tuple[int, str]]:
    """Element ranks shown by the node that makes a list value."""
    op = node.op_type
    found: list[tuple[int, str]] = []
    if op == "SequenceConstruct":
        found = [(r, v.name or "") for v in node.inputs if (r := _rank(v)) is not None]
    elif op == "SplitToSequence":
        rank = _rank(node.inputs[0])
        if rank is not None:
            squeezed = len(node.inputs) < 2 or node.inputs[1] is None
            squeezed = squeezed and node.attributes.get_int("keepdims", 1) == 0
            found = [(rank - 1 if squeezed else rank, node.inputs[0].name or "")]  # type: ignore[union-attr]
    return found


def _unranked_put_in(node: ir.Node) -> list[tuple[ir.Value, str]]:
    """The tensors `node` puts (or splits) into a list whose rank is unknown, each with how."""
    if node.op_type == "SequenceConstruct":
        put = [(v, "put") for v in node.inputs]
    elif node.op_type == "SequenceInsert":
        put = [(node.inputs[1], "put")]
    elif node.op_type == "SplitToSequence":
        put = [(node.inputs[0], "split")]
    else:
        return []
    return [(v, how) for v, how in put if v is not None and _rank(v) is None]


def _ranks_read(node: ir.Node, index: int) -> list[tuple[int, str]]:
    """Element ranks shown by a node that reads a list value at input `index`."""
    op = node.op_type
    if op == "SequenceInsert" and index == 0 and (rank := _rank(node.inputs[1])) is not None:
        return [(rank, node.inputs[1].name or "")]  # type: ignore[union-attr]
    if op == "SequenceAt" and (rank := _rank(node.outputs[0])) is not None:
        return [(rank, node.outputs[0].name or "")]
    if op == "ConcatFromSequence" and (rank := _rank(node.outputs[0])) is not None:
        new_axis = node.attributes.get_int("new_axis", 0)
        return [(rank - new_axis, node.outputs[0].name or "")]
    return []
