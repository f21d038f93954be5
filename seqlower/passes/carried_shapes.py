"""Shapes of loop-carried values, proved by induction over the iterations.

ONNX inference forgets the shape of a loop-carried value (it may change between iterations),
and real exports declare body signatures that lie, so `normalize.infer_shapes` clears them.
Where seqlower's own `LoopShapes` cannot prove a carried value keeps its shape (it does not
see through a list read in the body, say), the shape is assumed and checked:

    h = Loop(M, c, h0 [1, 5], tokens0 seq([1])) { h' = Tanh(Gather(W, tokens[-1]) + h);
                                                   tokens' = SequenceInsert(tokens, ArgMax(h')) }
    assume h: [1, 5], tokens: seq([1]); infer the body; h': [1, 5], tokens': seq([1]): kept

Each carried tensor (or sequence, for its elements) whose shape is unknown is declared on the
body input with its initial value's shape; after inference, a dim the body's output does not
give back becomes unknown, a rank it does not give back withdraws the declaration, and all are
checked again (one may hold only because of another). What is left is an inductive proof:
every iteration ends with the shapes it started with. (A widening, as in abstract
interpretation: a tensor that grows along its first axis keeps its other dims.) The rank
alone is what OpenVINO needs to type an ArgMax over axis -1 in a body; the full shape lets a
list built in the loop be one stacked tensor. If the checks do not settle, every declaration
is withdrawn.
"""

from __future__ import annotations

__all__ = ["settle_carried_shapes"]

from collections.abc import Callable

import onnx_ir as ir

_MAX_ROUNDS = 6


def settle_carried_shapes(loops: list[ir.Node], infer_again: Callable[[], bool | None]) -> None:
    """Declare, on the bodies of `loops`, the carried shapes every iteration keeps.
    `infer_again` runs ONNX inference on the whole model (None when it failed)."""
    assumed: dict[ir.Value, ir.Value] = {}  # body input -> the body output it must match
    for node in loops:
        body = node.attributes["body"].as_graph()
        carried = zip(body.inputs[2:], node.inputs[2:], body.outputs[1:])
        for body_input, init, body_output in carried:
            shape = _initial_shape(body_input, init)
            if shape is not None:
                body_input.shape = shape
                assumed[body_input] = body_output
    if not assumed:
        return
    for _ in range(_MAX_ROUNDS):
        if infer_again() is None:
            break
        refuted = [
            body_input
            for body_input, body_output in assumed.items()
            if not _gives_back(body_output.shape, body_input.shape)  # type: ignore[arg-type]
        ]
        if not refuted:
            return
        for body_input in refuted:
            widened = _widened(body_input.shape, assumed[body_input].shape)  # type: ignore[arg-type]
            if widened is None:
                body_input.shape = None
                del assumed[body_input]
            else:
                body_input.shape = widened
        if not assumed:
            break
    for body_input in assumed:
        body_input.shape = None
    infer_again()


def _initial_shape(body_input: ir.Value, init: ir.Value | None) -> ir.Shape | None:
    """What to assume for `body_input`: its initial value's shape (dims ONNX made up dropped),
    for a tensor or a sequence's elements; None when nothing is known or a shape is there."""
    if body_input.shape is not None or init is None or init.shape is None:
        return None
    if isinstance(init.type, ir.TensorType):
        return ir.Shape([d if _known(d) else None for d in init.shape])
    if isinstance(init.type, ir.SequenceType) and all(_known(d) for d in init.shape):
        return ir.Shape(list(init.shape))  # elements: all of the shape or nothing
    return None


def _known(dim: int | ir.SymbolicDim) -> bool:
    return isinstance(dim, int) or (dim.value is not None and not dim.value.startswith("unk__"))


def _widened(assumed: ir.Shape, found: ir.Shape | None) -> ir.Shape | None:
    """The assumption with the dims the body did not give back made unknown; None when the
    rank is not given back, or (for a sequence's elements) any dim."""
    if found is None or len(found) != len(assumed):
        return None
    dims = [mine if _gives_back(ir.Shape([theirs]), ir.Shape([mine])) else None
            for mine, theirs in zip(assumed, found)]  # fmt: skip
    return ir.Shape(dims)


def _gives_back(found: ir.Shape | None, assumed: ir.Shape) -> bool:
    """Whether the body's output has the assumed shape: the same rank, and each assumed dim
    the same int or the same named dim there."""
    if found is None or len(found) != len(assumed):
        return False
    for mine, theirs in zip(assumed, found):
        if not _known(mine):
            continue
        if isinstance(mine, int) or isinstance(theirs, int):
            if mine != theirs:
                return False
        elif mine.value != theirs.value:
            return False
    return True
