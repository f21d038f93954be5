"""Batching an If whose condition differs per element: each branch runs on its own rows.

    If(c, then: t = f(..), else: e = g(..))      (c per element, a scalar each)
        -> rows_t = Compress(Range(0, N), C), rows_e = Compress(Range(0, N), Not(C))
           T = f'(what f reads, Gathered at rows_t), E = g'(.. at rows_e)
           ScatterND(ScatterND(zeros [N, *S], rows_t, T), rows_e, E)
    a branch that reads nothing that differs per element: its one value, Expanded to its rows
    (the other branch then scatters into it)

Each element computes only the branch its condition picks, as the loop did: a branch that would
fail on the elements that do not take it (`eos[0]` under `if eos.numel() > 0`) does not run on
them. The two branches must give elements of one static shape and type (the rows are put back
in place by ScatterND); a branch may not give a ragged value.
"""

from __future__ import annotations

__all__ = ["plan_if"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.batching.core import Batched, Emitter, Operand
from seqlower.ops import graphs_within_node, outer_reads
from seqlower.rule import Refusal

# plan_region's signature, passed in by it (body.py imports this module)
Planner = Callable[..., object]


def plan_if(
    node: ir.Node,
    operand: Callable[[ir.Value], Operand],
    values: object,
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
        plan = plan_region(branch, seeds, list(branch), list(branch.outputs), values, opset)
        if isinstance(plan, Refusal):
            return Refusal(f"in the {name.replace('_', ' ')} of an If, {plan.reason}")
        batched = any(seeds[v].batched for v in captured if _reads(branch, v))
        branches.append((plan, batched))
    shapes: list[list[int]] = []
    for index, output in enumerate(node.outputs):
        pair = [plan.outputs[index] for plan, _ in branches]  # type: ignore[attr-defined]
        static = [o.static_shape for o in pair]
        if any(o.ragged_axis is not None for o in pair):
            return Refusal("an If whose branch gives a value whose size differs per element")
        if static[0] is None or static[0] != static[1]:
            return Refusal(
                "an If whose branches give elements of different or unknown shapes (the rows "
                "of each are put back in place)"
            )
        if output.dtype is None or not isinstance(output.type, ir.TensorType):
            return Refusal("an If whose outputs are not tensors of a known type")
        shapes.append(static[0])
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
                    given = em.op("Gather", [given, rows], {"axis": 0})
                fed.append(given)
            made = emit_body(plan, fed, sub, None)  # type: ignore[arg-type]
            for index, value in enumerate(made):
                results[index].append((value, rows))
        outputs = []
        for index, output in enumerate(node.outputs):
            (then_value, then_rows), (else_value, else_rows) = results[index]
            if then_rows is None and else_rows is None:  # both the same for every row
                then_rows = em.op("Compress", [everyone, picks], {"axis": 0})
                then_value = em.op("Gather", [then_value, then_rows], {"axis": 0})
            if else_rows is None:  # the else branch's value everywhere, the then rows put in
                whole, pending = else_value, [(then_value, then_rows)]
            elif then_rows is None:
                whole, pending = then_value, [(else_value, else_rows)]
            else:
                kind = output.dtype.numpy()  # type: ignore[union-attr]
                dims = em.op("Concat", [em.count(), em.ints(shapes[index])], {"axis": 0})
                whole = em.op("Expand", [em.scalar(np.zeros((), kind)), dims])
                pending = [(then_value, then_rows), (else_value, else_rows)]
            for value, rows in pending:
                assert rows is not None
                whole = em.op("ScatterND", [whole, em.unsqueeze(rows, [1]), value])
            outputs.append(whole)
        return outputs

    return Batched(emit, captured=tuple(order))


def _reads(branch: ir.Graph, value: ir.Value) -> bool:
    return any(value in node.inputs for node in branch) or value in branch.outputs
