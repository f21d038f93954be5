"""Batching an If whose condition differs per element: each branch runs on its own rows.

    If(c, then: t = f(..), else: e = g(..))      (c per element, a scalar each)
        -> rows_t = Compress(Range(0, N), C), rows_e = Compress(Range(0, N), Not(C))
           T = f'(what f reads, Gathered at rows_t), E = g'(.. at rows_e)
           (the Emitter's positions, a batched loop's iteration numbers, at rows_t: rows_t)
           ScatterND(ScatterND(zeros [N, *S], rows_t, T), rows_e, E)
    a branch that reads nothing that differs per element: its one value, Expanded to its rows
    (the other branch then scatters into it)
    a ragged output (`if stop: no rows else: rows`) only one branch gives, whose elements hold
    every position along the axis: its mask is C (or Not(C)) Expanded along the axis, where
    scattering a mask of true into one of false gave the same
    a ragged output only one branch gives: its rows (at rows_t, in increasing order) and their
    mask are kept beside the stack, which a list joined from them then does without (the
    stack's other rows hold nothing)

Each element computes only the branch its condition picks, as the loop did: a branch that would
fail on the elements that do not take it (`eos[0]` under `if eos.numel() > 0`) does not run on
them. The two branches must give elements of one static shape and type (the rows are put back
in place by ScatterND); a branch may not give a ragged value.
"""

from __future__ import annotations

__all__ = ["NEVER_FAIL", "never_fails", "plan_if"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.core import Batched, Emitter, Operand
from seqlower.ops import graphs_within_node, outer_reads, same_dim
from seqlower.rule import Refusal

# operators that give a value for any input of the shapes they are given (no index, no
# integer division, no shape read from data)
NEVER_FAIL = frozenset(
    """Abs Add And ArgMax ArgMin Cast Ceil Constant Equal Exp Floor Greater GreaterOrEqual
    Identity IsInf IsNaN Less LessOrEqual Max Min Mul Neg Not Or ReduceMax ReduceMin ReduceProd
    ReduceSum Relu Round Shape Sigmoid Sign Size Sub Tanh Where Xor""".split()  # noqa: SIM905
)


def never_fails(node: ir.Node, values: StaticValues) -> bool:
    """Whether `node` gives a value for any input of the shapes it is given: an op of
    `NEVER_FAIL`, or a Gather of a Shape at a constant position within its rank."""
    if node.domain != "":
        return False
    if node.op_type in NEVER_FAIL:
        return True
    if node.op_type in ("Unsqueeze", "Squeeze"):
        return _valid_axes(node, values)
    if node.op_type != "Gather" or len(node.inputs) != 2:
        return False
    shape, index = node.inputs
    made = shape.producer() if shape is not None else None
    if made is None or made.op_type != "Shape" or made.inputs[0] is None:
        return False
    data = made.inputs[0]
    position = values.get_int(index)
    if data.shape is None or position is None or node.attributes.get_int("axis", 0) != 0:
        return False
    rank = len(data.shape)
    start = made.attributes.get_int("start", 0)
    end = made.attributes.get_int("end", rank)
    start, end = (start + rank if start < 0 else start), (end + rank if end < 0 else end)
    length = max(0, min(end, rank) - max(start, 0))
    return -length <= position < length


def _valid_axes(node: ir.Node, values: StaticValues) -> bool:
    """An Unsqueeze or a Squeeze with constant axes, valid for its input's known rank (a
    Squeeze only of static dims of 1)."""
    data = node.inputs[0] if node.inputs else None
    if data is None or data.shape is None:
        return False
    axes = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 else None
    if axes is None:
        axes = node.attributes.get_ints("axes")
    if not axes:
        return False
    rank = len(data.shape)
    if node.op_type == "Unsqueeze":
        out = rank + len(axes)
        normalized = {a % out for a in axes if -out <= a < out}
        return len(normalized) == len(axes)
    return all(-rank <= a < rank and data.shape[a] == 1 for a in axes)


# plan_region's signature, passed in by it (body.py imports this module)
Planner = Callable[..., object]


def plan_if(
    node: ir.Node,
    operand: Callable[[ir.Value], Operand],
    values: StaticValues,
    opset: int,
    plan_region: Planner,
) -> Batched | Refusal:
    """The batched form of If `node`, given the operands of the values it reads, or why not."""
    cond = node.inputs[0] if node.inputs else None
    if cond is None:
        return Refusal("an If without a condition")
    found = operand(cond)
    if not found.batched:
        return Refusal("an If whose condition is the same for every element (it stays an If)")
    if found.shape is None or any(d != 1 for d in found.shape):
        return Refusal("an If whose condition may hold more than one value")
    if len(graphs_within_node(node)) != 2:
        return Refusal("an If whose branches hold subgraphs of their own")
    captured = outer_reads(node)
    seeds = {value: operand(value) for value in captured}
    branches: list[tuple[object, bool]] = []
    for name in ("then_branch", "else_branch"):
        attr = node.attributes.get(name)
        if attr is None or attr.type != ir.AttributeType.GRAPH:
            return Refusal("an If without both branches")
        branch = attr.as_graph()
        if len(branch.outputs) != len(node.outputs):
            return Refusal("an If whose branch gives another number of outputs")
        plan = plan_region(
            branch, seeds, list(branch), list(branch.outputs), values, opset, ragged_results=True
        )
        if isinstance(plan, Refusal):
            return Refusal(f"in the {name.replace('_', ' ')} of an If, {plan.reason}")
        for step, how in plan.steps:  # type: ignore[attr-defined]
            if how is None and not never_fails(step, values):
                # run once for all elements, also when none takes the branch
                return Refusal(
                    f"the {name.replace('_', ' ')} of an If computes {step.op_type}, which could "
                    "fail in iterations where the branch does not run"
                )
        batched = any(seeds[v].batched for v in captured if _reads(branch, v))
        branches.append((plan, batched))
    shapes: list[list[int] | None] = []
    ragged: list[tuple[int, int, ir.Shape]] = []  # (output, axis, padded element shape)
    for index, output in enumerate(node.outputs):
        if output.dtype is None or not isinstance(output.type, ir.TensorType):
            return Refusal("an If whose outputs are not tensors of a known type")
        pair = [plan.outputs[index] for plan, _ in branches]  # type: ignore[attr-defined]
        static = [o.static_shape for o in pair]
        plain = all(o.ragged_axis is None for o in pair)
        if plain and static[0] is not None and static[0] == static[1]:
            shapes.append(static[0])
            continue
        held = _ragged_output(pair)
        if held is None:
            return Refusal(
                "an If whose branches give elements of different or unknown shapes (the rows "
                "of each are put back in place)"
            )
        shapes.append(None)
        ragged.append((index, *held))
    order = list(seeds)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        from seqlower.batching.body import emit_body

        condition = inputs[0]
        assert condition is not None
        outer = dict(zip(order, inputs[1:]))
        picks = em.op("Reshape", [condition, em.count()])
        if picks.dtype != ir.DataType.BOOL:
            picks = em.op("Cast", [picks], {"to": int(ir.DataType.BOOL)})
        zero, one = em.scalar(np.array(0, np.int64)), em.scalar(np.array(1, np.int64))
        everyone = em.op("Range", [zero, em.squeeze(em.count(), [0]), one])
        results: list[list[tuple[ir.Value, ir.Value | None]]] = [[] for _ in node.outputs]
        subs: list[tuple[Emitter, ir.Value]] = []
        for (plan, batched), taken in zip(branches, (picks, em.op("Not", [picks]))):
            # a branch that reads nothing per element runs once, its value given to every row
            rows = em.op("Compress", [everyone, taken], {"axis": 0}) if batched else None
            sub = Emitter(em.builder, everyone if rows is None else rows, None)
            fed = []
            for value in plan.inputs:  # type: ignore[attr-defined]
                given = outer[value]
                if seeds[value].batched and rows is not None:  # (else: the branch reads none)
                    if value in em.masks:
                        sub.masks[value] = em.op("Gather", [em.masks[value], rows], {"axis": 0})
                    given = em.at_rows(given, rows)
                fed.append(given)
            made = emit_body(plan, fed, sub, None)  # type: ignore[arg-type]
            subs.append((sub, taken))
            for index, value in enumerate(made):
                results[index].append((value, rows))
        outputs = []
        for index, output in enumerate(node.outputs):
            (then_value, then_rows), (else_value, else_rows) = results[index]
            if shapes[index] is None:  # ragged: the rows of each branch and their masks
                kind = output.dtype.numpy()  # type: ignore[union-attr]
                value, held = _ragged_emit(em, index, kind, branches, results, everyone, subs)
                em.masks[output] = held
                outputs.append(value)
                continue
            if then_rows is None and else_rows is None:  # both the same for every row
                then_rows = em.op("Compress", [everyone, picks], {"axis": 0})
                then_value = em.at_rows(then_value, then_rows)
            if else_rows is None:  # the else branch's value everywhere, the then rows put in
                whole, pending = else_value, [(then_value, then_rows)]
            elif then_rows is None:
                whole, pending = then_value, [(else_value, else_rows)]
            else:
                kind = output.dtype.numpy()  # type: ignore[union-attr]
                dims = em.op("Concat", [em.count(), em.ints(shapes[index])], {"axis": 0})  # type: ignore[arg-type]
                whole = em.op("Expand", [em.scalar(np.zeros((), kind)), dims])
                pending = [(then_value, then_rows), (else_value, else_rows)]
            for value, rows in pending:
                assert rows is not None
                whole = em.op("ScatterND", [whole, em.unsqueeze(rows, [1]), value])
            outputs.append(whole)
        return outputs

    return Batched(emit, captured=tuple(order), ragged_outputs=tuple(ragged))


def _reads(branch: ir.Graph, value: ir.Value) -> bool:
    return any(value in node.inputs for node in branch) or value in branch.outputs


def _ragged_output(pair: list[Operand]) -> tuple[int, ir.Shape] | None:
    """(axis, padded shape) when the two branches' elements differ along one axis only: each a
    ragged value along it, or a plain one (all its positions held), or one with no position
    along it (a static 0: `if stop: nothing else: rows`); None otherwise."""
    axes = {o.ragged_axis for o in pair if o.ragged_axis is not None}
    shapes = [o.shape for o in pair]
    if len(axes) > 1 or any(shape is None for shape in shapes):
        return None
    rank = len(shapes[0])  # type: ignore[arg-type]
    if len(shapes[1]) != rank or rank == 0:  # type: ignore[arg-type]
        return None
    if axes:
        axis = axes.pop()
    else:  # plain elements: the axis where one of them has no position
        zeros = [i for i in range(rank) for shape in shapes if shape[i] == 0]  # type: ignore[index]
        if len(set(zeros)) != 1:
            return None
        axis = zeros[0]
    full = [o for o in pair if not _empty(o, axis)]
    if not full:
        return None
    padded = full[0].shape
    assert padded is not None
    for o in pair:
        for i, (dim, want) in enumerate(zip(o.shape, padded)):  # type: ignore[arg-type]
            if i != axis and not same_dim(dim, want):
                return None
    if len(full) == 2 and not same_dim(full[1].shape[axis], padded[axis]):  # type: ignore[index]
        return None
    return axis, padded


def _empty(operand: Operand, axis: int) -> bool:
    """An element with no position along `axis` (a static 0 there)."""
    return operand.ragged_axis is None and operand.shape is not None and operand.shape[axis] == 0


def _ragged_emit(
    em: Emitter,
    index: int,
    kind: np.dtype,
    branches: list[tuple[object, bool]],
    results: list[list[tuple[ir.Value, ir.Value | None]]],
    everyone: ir.Value,
    subs: list[tuple[Emitter, ir.Value]],
) -> tuple[ir.Value, ir.Value]:
    """A ragged output: each branch's rows (padded) and masks scattered into a padded stack whose
    rows hold nothing at first; a branch with no position along the axis scatters nothing. When
    only one branch gives positions and its elements hold all of them, the mask is the rows
    that take it, broadcast along the axis (nothing scattered). Where one branch gives
    positions, its rows and their mask are kept beside the stack (`Emitter.scattered`)."""
    axis = _axis_of(branches, index)
    given = [
        (plan, found, sub)
        for (plan, _), found, sub in zip(branches, results[index], subs)
        if not _empty(plan.outputs[index], axis)  # type: ignore[attr-defined]
    ]
    # one branch gives positions, all of them: its mask is the rows that take it
    whole_rows = len(given) == 1 and given[0][0].outputs[index].ragged_axis is None  # type: ignore[attr-defined]
    parts = []
    for plan, (value, rows), (sub, taken) in given:
        operand = plan.outputs[index]  # type: ignore[attr-defined]
        if rows is None:  # the same for every row: its value at the rows that take it
            rows = em.op("Compress", [everyone, taken], {"axis": 0})
            value = em.at_rows(value, rows)
        result = plan.results[index]  # type: ignore[attr-defined]
        if operand.ragged_axis is not None:
            mask = sub.masks[result]
        else:  # every position held: a mask of true (or, alone, of the rows that take it)
            rank = len(operand.shape)
            size = em.dims(value, axis + 1, axis + 2)
            ones = [em.ints([1] * axis)] if axis else []
            after = [em.ints([1] * (rank - axis - 1))] if rank - axis - 1 else []
            if whole_rows:
                dims = em.op("Concat", [em.count(), *ones, size, *after], {"axis": 0})
                picked = em.unsqueeze(taken, list(range(1, rank + 1)))
                mask = em.op("Expand", [picked, dims])
            else:
                dims = em.op("Concat", [em.dims(rows, 0, 1), *ones, size, *after], {"axis": 0})
                mask = em.op("Expand", [em.scalar(np.ones([1] * (rank + 1), bool)), dims])
        parts.append((value, rows, mask))
    first_value, _, first_mask = parts[0]
    count = em.count()
    value_dims = em.op("Concat", [count, em.dims(first_value, 1)], {"axis": 0})
    whole = em.op("Expand", [em.scalar(np.zeros((), kind)), value_dims])
    if whole_rows:
        value, rows, held = parts[0]
        whole = em.op("ScatterND", [whole, em.unsqueeze(rows, [1]), value])
        em.scattered[whole] = (held, value, None)
        return whole, held
    mask_dims = em.op("Concat", [count, em.dims(first_mask, 1)], {"axis": 0})
    held = em.op("Expand", [em.scalar(np.zeros((), bool)), mask_dims])
    for value, rows, mask in parts:
        places = em.unsqueeze(rows, [1])
        whole = em.op("ScatterND", [whole, places, value])
        held = em.op("ScatterND", [held, places, mask])
    if len(given) == 1:  # the rows of one branch, in increasing order: joined by their mask
        plan, _, _ = given[0]
        value, _, mask = parts[0]
        every = plan.outputs[index].ragged_axis is None  # type: ignore[attr-defined]
        em.scattered[whole] = (held, value, None if every else mask)
    return whole, held


def _axis_of(branches: list[tuple[object, bool]], index: int) -> int:
    pair = [plan.outputs[index] for plan, _ in branches]  # type: ignore[attr-defined]
    held = _ragged_output(pair)
    assert held is not None
    return held[0]
