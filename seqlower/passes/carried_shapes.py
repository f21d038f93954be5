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
    previous: dict[ir.Value, ir.Shape | None] = {}  # what a seeded list's elements had before
    seeded = False
    for _ in range(_MAX_ROUNDS):
        if infer_again() is None:
            break
        if not seeded:
            seeded = True
            if _seed_lists(loops, assumed, previous):
                continue  # inferred again with the lists' elements before any check
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
                body_input.shape = previous.pop(body_input, None)
                del assumed[body_input]
            else:
                body_input.shape = widened
        if not assumed:
            break
    for body_input in assumed:
        body_input.shape = previous.get(body_input)
    infer_again()


def _seed_lists(
    loops: list[ir.Node],
    assumed: dict[ir.Value, ir.Value],
    previous: dict[ir.Value, ir.Shape | None],
) -> bool:
    """Assume, for each carried list whose elements have dims not known, the dims every tensor
    its body puts into it shows (inferred with the carried tensors assumed): a decoder's cache
    that starts empty holds `h @ W` of an `h` of shape [T, 6], [?, 6], and reads of it keep the
    6 columns of `h` only when its elements are known to have them. Checked by induction with
    the rest; `previous` keeps what each had, to give back where refuted."""
    seeded = False
    for node in loops:
        body = node.attributes["body"].as_graph()
        for body_input, body_output in zip(body.inputs[2:], body.outputs[1:]):
            if body_input in assumed or not isinstance(body_input.type, ir.SequenceType):
                continue
            current = body_input.shape
            if current is not None and all(_known(d) for d in current):
                continue
            found = _put_shape(body_output, body_input)
            if found is None or not any(_known(d) for d in found):
                continue
            if current is not None and len(current) != len(found):
                continue
            previous[body_input] = current
            body_input.shape = found
            assumed[body_input] = body_output
            seeded = True
    return seeded


_MAX_PUTS = 64


def _put_shape(output: ir.Value, start: ir.Value) -> ir.Shape | None:
    """The shape every tensor put into the list `output` since `start` shows (dims that differ
    unknown; a tensor of no shape yet shows nothing), walking back through Identity,
    SequenceInsert, SequenceErase and the branches of If; None when the list comes from anything
    else or the tensors differ in rank."""
    dims: list[int | ir.SymbolicDim | None] | None = None
    stack, seen = [output], set()
    while stack:
        value = stack.pop()
        if value is start or id(value) in seen:
            continue
        seen.add(id(value))
        if len(seen) > _MAX_PUTS:
            return None
        node = value.producer()
        if node is None or node.domain != "":
            return None
        op = node.op_type
        if op in ("Identity", "SequenceErase") and node.inputs and node.inputs[0] is not None:
            stack.append(node.inputs[0])
        elif op == "SequenceInsert" and len(node.inputs) > 1 and node.inputs[1] is not None:
            shape = node.inputs[1].shape  # none yet: it may follow from the others (checked)
            if shape is not None:
                if dims is not None and len(dims) != len(shape):
                    return None
                put = [d if _known(d) else None for d in shape]
                dims = (
                    put if dims is None else [a if _same(a, b) else None for a, b in zip(dims, put)]
                )
            stack.append(node.inputs[0])  # type: ignore[arg-type]
        elif op == "If":
            index = list(node.outputs).index(value)
            for key in ("then_branch", "else_branch"):
                if key not in node.attributes:
                    return None
                stack.append(node.attributes[key].as_graph().outputs[index])
        else:
            return None
    return None if dims is None else ir.Shape(dims)


def _same(a: int | ir.SymbolicDim | None, b: int | ir.SymbolicDim | None) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value == b.value


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
