"""If nodes with sequences: inline a branch, or return the elements as tensors.

    If(static c, then=f, else=g)            -> f() (c true) or g() (c false), inlined
                                               (an If with sequences, or whose outputs'
                                               ranks depend on the branch; c static, or
                                               decided by a dim its producer fixes:
                                               `seqlower.analysis.known_dims`)
    If(c, then: SequenceConstruct(a0..an), else: SequenceConstruct(b0..bn))
        -> SequenceConstruct(If(c, then: (a0..an), else: (b0..bn)))   (one tensor output each)

    If(c, then: s1, else: s2) read by R1(s, ..)..Rk(s, ..) only  (SequenceAt, SequenceLength,
                                                                ConcatFromSequence)
        -> If(c, then: (R1(s1, ..)..Rk(s1, ..)), else: (R1(s2, ..)..Rk(s2, ..)))

The second form needs both branches to yield the same static number of elements (each branch is
lowered first by the other rules, which turn its sequence into the canonical SequenceConstruct);
the SequenceConstruct left outside lets the consumers of the If keep lowering. Where the lengths
differ between the branches, the third form sinks the readers into both branches, so that the If
returns their tensors and each branch lowers its own copy against its own known sequence. A
reader that would be an error in a branch (a position out of range there, reading an empty
sequence) is not sunk: that branch may never run. Sequences of unknown length stay.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.analysis.known_dims import decided
from seqlower.inline import inline_graph
from seqlower.ops import is_sequence_op, is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context, DeferredRefusal, Refusal, Rule, RuleSet

_BRANCHES = ("then_branch", "else_branch")


def _branch(node: ir.Node, key: str) -> ir.Graph:
    return node.attributes[key].as_graph()


def _involves_sequences(node: ir.Node) -> bool:
    """Sequences in the If's outputs or branches, or an output whose rank depends on the branch
    (TorchScript's `x.squeeze(d)` of a value whose shape it did not know is If(dim d == 1,
    Squeeze, Identity): folded, the rank is known, and so is the layout of a list it is put
    into, or of the scan output it becomes)."""
    if any(is_sequence_value(v) for v in node.outputs):
        return True
    if _rank_varies(node):
        return True
    for key in _BRANCHES:
        if key in node.attributes and any(
            is_sequence_op(n) for n in _branch(node, key).all_nodes()
        ):
            return True
    return False


def _rank_varies(node: ir.Node) -> bool:
    """An output the two branches give with different ranks (or one of unknown rank)."""
    if not all(key in node.attributes for key in _BRANCHES):
        return False
    then_branch, else_branch = (_branch(node, key) for key in _BRANCHES)
    for a, b in zip(then_branch.outputs, else_branch.outputs):
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return True
    return False


# -- constant condition ------------------------------------------------------------------------


def _check_static_condition(node: ir.Node, ctx: Context) -> ir.Graph | Refusal:
    if not _involves_sequences(node):
        return Refusal("no sequence in the outputs or the branches")
    condition = ctx.facts.static(node.inputs[0])
    if condition is not None and condition.size == 1:
        return _branch(node, "then_branch" if bool(condition.reshape(())) else "else_branch")
    # `Equal(Gather(Shape(x), k), 1)` where how x is made fixes its dim k (the squeeze of an
    # ArgMax with keepdims), whatever x's other dims
    runs = decided(node.inputs[0], _rank, ctx.facts.values)
    if runs is None:
        return Refusal("the condition is computed at run time")
    return _branch(node, "then_branch" if runs else "else_branch")


def _rank(value: ir.Value) -> int | None:
    return len(value.shape) if value.shape is not None else None


def _inline_branch(node: ir.Node, branch: ir.Graph, ctx: Context) -> None:
    """If(c static, then_branch=f, else_branch=g) -> f() when c is true, g() otherwise"""
    builder = ctx.rewriter.before(node)
    results = inline_graph(branch, [], builder, f"{builder.hint}_{branch.name or 'branch'}")
    for old, new in zip(node.outputs, results):
        ctx.rewriter.replace(old, new)


# -- sequence outputs of static length ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SplitOutputs:
    # per If output: the elements in each branch (then, else), or None to keep the output
    elements: tuple[tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]] | None, ...]


def _check_sequence_outputs(node: ir.Node, ctx: Context) -> SplitOutputs | Refusal:
    then_branch, else_branch = (_branch(node, key) for key in _BRANCHES)
    plan: list[tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]] | None] = []
    unknown: list[tuple[ir.Value, ir.Graph, ir.Value] | str] = []  # why, told when read
    for index, output in enumerate(node.outputs):
        if not is_sequence_value(output):
            plan.append(None)
            continue
        sides = []
        for branch in (then_branch, else_branch):
            value = branch.outputs[index]
            elements = ctx.facts.elements(value)
            if elements is None:
                unknown.append((output, branch, value))
                break
            sides.append(elements)
        if len(sides) != 2:
            plan.append(None)
            continue
        if len(sides[0]) != len(sides[1]):
            unknown.append(
                f"output '{output.name}': the branches yield {len(sides[0])} and {len(sides[1])} "
                "elements"
            )
            plan.append(None)
            continue
        plan.append((sides[0], sides[1]))
    if all(entry is None for entry in plan):
        return DeferredRefusal(lambda: _unknown_outputs(unknown, ctx) or "no sequence output")
    return SplitOutputs(tuple(plan))


def _unknown_outputs(unknown: list[tuple[ir.Value, ir.Graph, ir.Value] | str], ctx: Context) -> str:
    """Why the elements of each output are not known: the fact of the list where a branch
    returns it (a walk to the end of its chain), read only when the reason is."""
    reasons = []
    for entry in unknown:
        if isinstance(entry, str):
            reasons.append(entry)
            continue
        output, branch, value = entry
        reason = getattr(ctx.facts.sequence(value), "reason", "its elements are not known")
        reasons.append(f"output '{output.name}' in {branch.name or 'a branch'}: {reason}")
    return "; ".join(reasons)


def _sequence_outputs_to_tensors(node: ir.Node, plan: SplitOutputs, ctx: Context) -> None:
    """If(c, then: SequenceConstruct(a0..an), else: SequenceConstruct(b0..bn))
    -> SequenceConstruct(If(c, then: (a0..an), else: (b0..bn)))"""
    builder = ctx.rewriter.before(node)
    branches = [_branch(node, key) for key in _BRANCHES]
    for side, branch in enumerate(branches):
        inner = Builder(ctx.rewriter, branch, None, branch.name or "branch", builder.opset)
        outputs: list[ir.Value] = []
        for index, entry in enumerate(plan.elements):
            if entry is None:
                outputs.append(branch.outputs[index])
                continue
            for element in entry[side]:
                # a fresh value per output, produced in the branch itself
                copy = inner.op("Identity", [element], name="element")
                copy.type, copy.shape = element.type, element.shape
                outputs.append(copy)
        branch.outputs.clear()
        branch.outputs.extend(outputs)

    counts = [1 if entry is None else len(entry[0]) for entry in plan.elements]
    new_outputs: list[ir.Value] = []
    if sum(counts):
        new_outputs = builder.ops(
            "If",
            [node.inputs[0]],
            {"then_branch": branches[0], "else_branch": branches[1]},
            num_outputs=sum(counts),
            name="if",
        )
    # the branches move to the new If (when there is one); dead-code removal knows the new
    # holder and releases only what the old If alone held
    position = 0
    for old, entry, count in zip(node.outputs, plan.elements, counts):
        values = new_outputs[position : position + count]
        position += count
        if entry is None:
            values[0].type = old.type
            ctx.rewriter.replace(old, values[0])
            continue
        dtype = element_dtype(old)
        for value, then_element in zip(values, entry[0]):
            value.type = ir.TensorType(dtype or then_element.dtype)  # type: ignore[arg-type]
        ctx.replace_sequence(old, values, builder, dtype)


# -- readers sunk into the branches --------------------------------------------------------

_SINKABLE = ("SequenceAt", "SequenceLength", "ConcatFromSequence")


@dataclasses.dataclass(frozen=True)
class SinkPlan:
    # per If output index whose readers move into the branches: those readers, in use order
    readers: dict[int, tuple[ir.Node, ...]]
    # static reader inputs defined after the If: a copy of the constant goes into each branch
    constants: dict[ir.Value, np.ndarray]
    # outputs the If keeps returning next to the sunk reads (the list is read elsewhere too)
    keep: frozenset[int] = frozenset()


def _available_before(value: ir.Value | None, node: ir.Node, order: dict[ir.Node, int]) -> bool:
    """True when `value` can be read inside `node`'s branches: it is defined outside `node`'s
    graph, or by a node that comes before `node`."""
    producer = value.producer() if value is not None else None
    if producer is None or producer.graph is not node.graph:
        return True
    if not order:
        order.update((n, i) for i, n in enumerate(node.graph))  # type: ignore[union-attr]
    return order.get(producer, len(order)) < order[node]


def _possible_lengths(value: ir.Value, ctx: Context) -> set[int] | str:
    """Every length `value` may have: its static length, or the lengths of the values a nested
    If's branches yield (readers sunk into that If sink further); else why not known."""
    length = ctx.facts.length(value)
    if length is not None:
        return {length}
    producer = value.producer()
    if producer is not None and producer.op_type == "If" and producer.domain == "":
        index = value.index()
        lengths: set[int] = set()
        for key in _BRANCHES:
            inner = _possible_lengths(_branch(producer, key).outputs[index], ctx)
            if isinstance(inner, str):
                return inner
            lengths |= inner
        return lengths
    fact = ctx.facts.sequence(value)
    return getattr(fact, "reason", "its length is not known")


def _reader_refusal(reader: ir.Node, length: int, branch: str, ctx: Context) -> str | None:
    """Why `reader`, copied into a branch whose sequence has `length` elements, would be an
    error there (so it stays outside), or None."""
    if reader.op_type == "SequenceLength":
        return None
    if length == 0:
        return f"{reader.op_type} '{reader.name}' would read an empty sequence in {branch}"
    if reader.op_type == "SequenceAt":
        position = ctx.facts.static_int(reader.inputs[1] if len(reader.inputs) > 1 else None)
        if position is not None and not -length <= position < length:
            return f"position {position} of '{reader.name}' is out of range in {branch}"
    return None


def _possible_elements(value: ir.Value, ctx: Context) -> list[tuple[ir.Value, ...]] | None:
    """Every list of elements `value` may hold (through nested Ifs, as `_possible_lengths`), or
    None when one is not known yet."""
    elements = ctx.facts.elements(value)
    if elements is not None:
        return [elements]
    producer = value.producer()
    if producer is None or producer.op_type != "If" or producer.domain != "":
        return None
    index = value.index()
    found: list[tuple[ir.Value, ...]] = []
    for key in _BRANCHES:
        inner = _possible_elements(_branch(producer, key).outputs[index], ctx)
        if inner is None:
            return None
        found += inner
    return found


def _concat_refusal(reader: ir.Node, value: ir.Value, branch: str, ctx: Context) -> str | None:
    """Why the elements of `value` cannot be concatenated as `reader` asks (not known yet, or
    dims that differ where they must match), or None: a Concat of them in a branch that never
    runs would still fail shape inference."""
    if reader.op_type != "ConcatFromSequence":
        return None
    options = _possible_elements(value, ctx)
    if options is None:
        return f"the elements '{reader.name}' would concatenate in {branch} are not known yet"
    for elements in options:
        problem = _concat_problem(reader, elements)
        if problem:
            return f"'{reader.name}' cannot concatenate the elements of {branch} ({problem})"
    return None


def _concat_problem(reader: ir.Node, elements: tuple[ir.Value, ...]) -> str | None:
    shapes = [e.shape for e in elements]
    if not elements or any(shape is None for shape in shapes):
        return None
    ranks = {len(shape) for shape in shapes}  # type: ignore[arg-type]
    new_axis = reader.attributes.get_int("new_axis", 0) == 1
    (rank,) = ranks if len(ranks) == 1 else (-1,)
    axis = reader.attributes.get_int("axis", 0)
    if rank < 0 or not -(rank + new_axis) <= axis < rank + new_axis:
        return "ranks or axis"
    skip = None if new_axis else axis % rank
    for index in range(rank):
        dims = {shape[index] for shape in shapes if isinstance(shape[index], int)}  # type: ignore[index]
        if index != skip and len(dims) > 1:
            return f"dim {index}"
    return None


def _check_sink_readers(node: ir.Node, ctx: Context) -> SinkPlan | Refusal:
    branches = [(_branch(node, key), key.split("_")[0]) for key in _BRANCHES]
    readers: dict[int, tuple[ir.Node, ...]] = {}
    constants: dict[ir.Value, np.ndarray] = {}
    reasons = []
    order: dict[ir.Node, int] = {}
    for index, output in enumerate(node.outputs):
        if not is_sequence_value(output) or not output.uses():
            continue
        name = f"output '{output.name}'"
        if output.is_graph_output():
            reasons.append(f"{name} is a graph output")
            continue
        users = list(dict.fromkeys(use.node for use in output.uses()))
        if any(
            user.op_type not in _SINKABLE
            or user.domain != ""
            or user.graph is not node.graph
            or any(value is output for value in user.inputs[1:])
            for user in users
        ):
            ops = sorted({user.op_type for user in users} - set(_SINKABLE))
            reasons.append(f"{name} is read by {', '.join(ops) or 'a nested graph'}")
            continue
        later = [v for u in users for v in u.inputs[1:] if not _available_before(v, node, order)]
        static = {v: ctx.facts.static(v) for v in later}
        if any(array is None for array in static.values()):
            reasons.append(f"{name}: a reader's position is computed after the If")
            continue
        constants.update(static)  # type: ignore[arg-type]
        refusal = None
        for branch, label in branches:
            lengths = _possible_lengths(branch.outputs[index], ctx)
            if isinstance(lengths, str):
                refusal = f"{name} in the {label} branch: {lengths}"
                break
            where = f"the {label} branch"
            refusal = next(
                (r for u in users for n in lengths if (r := _reader_refusal(u, n, where, ctx))),
                None,
            ) or next(
                (r for u in users if (r := _concat_refusal(u, branch.outputs[index], where, ctx))),
                None,
            )
            if refusal:
                break
        if refusal:
            reasons.append(refusal)
            continue
        readers[index] = tuple(users)
    if not readers:
        return Refusal("; ".join(reasons) or "no sequence output is read")
    return SinkPlan(readers, constants)


def _check_sink_reads(node: ir.Node, ctx: Context) -> SinkPlan | Refusal:
    """The reads at positions known before the If (or constants) of a list the If returns and
    that is also used otherwise (a Loop carries it on), where the list's length is known only
    at run time: a read in the branch that runs fails where the read after the If fails."""
    readers: dict[int, tuple[ir.Node, ...]] = {}
    constants: dict[ir.Value, np.ndarray] = {}
    order: dict[ir.Node, int] = {}
    reasons = []

    def position_known(value: ir.Value | None) -> bool:
        if _available_before(value, node, order):
            return True
        array = ctx.facts.static(value)  # a constant made after the If: copied in
        if array is not None:
            constants[value] = array  # type: ignore[index]
        return array is not None

    for index, output in enumerate(node.outputs):
        if not is_sequence_value(output):
            continue
        name = f"output '{output.name}'"
        users = list(dict.fromkeys(use.node for use in output.uses()))
        reads = [
            user
            for user in users
            if user.op_type == "SequenceAt"
            and user.domain == ""
            and user.graph is node.graph
            and len(user.inputs) > 1
            and user.inputs[0] is output
            and user.inputs[1] is not output
            and position_known(user.inputs[1])
        ]
        if not reads:
            continue
        if not output.is_graph_output() and all(
            user.op_type in _SINKABLE and user.domain == "" and user.graph is node.graph
            for user in users
        ):
            continue  # read only so: if-sink-readers
        branches = [(_branch(node, key), key.split("_")[0]) for key in _BRANCHES]
        known = [_possible_lengths(branch.outputs[index], ctx) for branch, _ in branches]
        if not all(isinstance(lengths, str) for lengths in known):
            reasons.append(f"{name}: a length is known in a branch (if-sink-readers' case)")
            continue
        readers[index] = tuple(reads)
    if not readers:
        return Refusal("; ".join(reasons) or "no read of a list the If returns and keeps")
    used = {v for reads in readers.values() for r in reads for v in r.inputs[1:]}
    return SinkPlan(readers, {v: a for v, a in constants.items() if v in used}, frozenset(readers))


def _sink_readers(node: ir.Node, plan: SinkPlan, ctx: Context) -> None:
    """If(c, then: s1, else: s2) read by R(s, ..) only
    -> If(c, then: R(s1, ..), else: R(s2, ..))   (R in SequenceAt, SequenceLength,
                                                  ConcatFromSequence; each reader sunk)
    If(c, then: s1, else: s2) -> s, read by SequenceAt(s, p) and used otherwise
    -> If(c, then: (s1, SequenceAt(s1, p)), else: (s2, SequenceAt(s2, p)))   (p known before)"""
    builder = ctx.rewriter.before(node)
    branches = [_branch(node, key) for key in _BRANCHES]
    kept = [i for i in range(len(node.outputs)) if i not in plan.readers or i in plan.keep]
    sunk = [reader for index in sorted(plan.readers) for reader in plan.readers[index]]
    for branch in branches:
        inner = Builder(ctx.rewriter, branch, None, branch.name or "branch", builder.opset)
        outputs = [branch.outputs[i] for i in kept]
        copies = {
            value: inner.constant(array, "position") for value, array in plan.constants.items()
        }
        for index in sorted(plan.readers):
            sequence = branch.outputs[index]
            for reader in plan.readers[index]:
                attributes = {name: attr.value for name, attr in reader.attributes.items()}
                inputs = [sequence, *(copies.get(v, v) for v in reader.inputs[1:])]  # type: ignore[arg-type]
                copy = inner.op(reader.op_type, inputs, attributes, name="sunk")
                copy.type = reader.outputs[0].type
                outputs.append(copy)
        branch.outputs.clear()
        branch.outputs.extend(outputs)
    new_outputs = builder.ops(
        "If",
        [node.inputs[0]],
        {"then_branch": branches[0], "else_branch": branches[1]},
        num_outputs=len(kept) + len(sunk),
        name="if",
    )
    for old, new in zip([node.outputs[i] for i in kept], new_outputs):
        new.type = old.type
        ctx.rewriter.replace(old, new)
    for reader, new in zip(sunk, new_outputs[len(kept) :]):
        new.type = reader.outputs[0].type
        ctx.rewriter.replace(reader.outputs[0], new)


RULES = RuleSet(
    [
        Rule("if-static-condition", "If", _check_static_condition, _inline_branch),
        Rule("if-sequence-outputs", "If", _check_sequence_outputs, _sequence_outputs_to_tensors),
        Rule("if-sink-readers", "If", _check_sink_readers, _sink_readers),
        Rule("if-sink-reads", "If", _check_sink_reads, _sink_readers),
    ]
)
