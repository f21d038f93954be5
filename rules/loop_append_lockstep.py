"""The lockstep hypothesis for `loop-append-to-scan`: lists of an enclosing Loop that each hold
elements of one shape, proved by induction over that Loop.

    Loop_E(.., K0 = SequenceEmpty(), body_E(.., K):
        K2 = Loop_L(M, .., SequenceEmpty(), body_L(i, .., acc): x = f(SequenceAt(K, i), ..)
                                                               acc2 = SequenceInsert(acc, x)))

A decoder's step loop (E) carries its caches K; the layer loop (L), mapped, appends one element
per layer to a list that starts empty and becomes the next step's K. The element x, say
`cat(K[i], k)`, keeps one shape through L only if every element of K has one shape, which holds
by induction over E: K starts empty, and when every element of K has one shape, x has one
shape in every iteration of L, so every element of K2 has it. The hypothesis is proved for all
such lists of E at once (a greatest fixpoint: a list whose element is not proved to keep one
shape under it is dropped and the others proved again), and then `LoopShapes(uniform=...)`
under it shows the appends of L to be scan outputs.
"""

from __future__ import annotations

__all__ = ["lockstep_shapes"]

import onnx_ir as ir

from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.ops import is_sequence_value, peel_identity
from seqlower.rule import Context


def lockstep_shapes(node: ir.Node, ctx: Context) -> LoopShapes | None:
    """The loop analysis of the Loop `node` under the proved hypothesis that the lists of its
    enclosing Loop it builds (see the module docstring) each hold elements of one shape; None
    when there is no such list."""
    enclosing = _enclosing_loop(node, ctx)
    if enclosing is None:
        return None
    outer = enclosing.attributes["body"].as_graph()
    body = node.attributes["body"].as_graph()
    appended: dict[ir.Value, ir.Value] = {}  # a list of the enclosing loop -> the tensor put
    for j in range(len(enclosing.inputs) - 2):
        carried = outer.inputs[2 + j]
        if not is_sequence_value(carried) or not _empty(enclosing.inputs[2 + j]):
            continue
        update = peel_identity(outer.outputs[1 + j])
        if update.producer() is not node:
            continue
        tensor = _appended(node, body, update.index())  # type: ignore[arg-type]
        if tensor is not None:
            appended[carried] = tensor
    while appended:
        shapes = LoopShapes(
            node, ctx.facts.values, uniform=frozenset(appended), memo=ctx.facts.loops
        )
        failed = [k for k, tensor in appended.items() if not shapes.is_invariant(tensor)]
        if not failed:
            return shapes
        for key in failed:
            del appended[key]
    return None


def _appended(node: ir.Node, body: ir.Graph, k: int) -> ir.Value | None:
    """The tensor that slot `k` of the Loop `node` appends in each iteration to a list that
    starts empty, when it does nothing else to the list."""
    if k >= len(node.inputs) - 2 or not _empty(node.inputs[2 + k]):
        return None
    state, update = body.inputs[2 + k], body.outputs[1 + k]
    insert = update.producer()
    if (
        insert is None
        or insert.op_type != "SequenceInsert"
        or insert.domain != ""
        or insert.inputs[0] is not state
        or (len(insert.inputs) > 2 and insert.inputs[2] is not None)
        or len(state.uses()) != 1
    ):
        return None
    return insert.inputs[1]


def _enclosing_loop(node: ir.Node, ctx: Context) -> ir.Node | None:
    """The Loop whose body holds `node` (None in the main graph or another subgraph)."""
    owner = ctx.facts.list_lengths().owner(node.graph)
    if owner is None or owner.op_type != "Loop" or owner.domain != "":
        return None
    return owner


def _empty(value: ir.Value | None) -> bool:
    value = peel_identity(value) if value is not None else None
    producer = value.producer() if value is not None else None
    return producer is not None and producer.op_type == "SequenceEmpty" and producer.domain == ""
