"""A Loop that concatenates every element of a list, flattened, in order: the list's elements
flattened and joined, read from its tensors at once (`ListForms.flattened`).

`torch.cat([f.reshape(-1) for f in feats])` exports as a Loop over `len(feats)` that appends
`Reshape(SequenceAt(feats, i), [-1])` to an empty list read only by ConcatFromSequence(axis=0);
`loop-append-to-concat` makes that list a tensor accumulator. Lowered element by element, each
iteration cuts element i out of the list's tensors, reshapes it back, flattens it and copies
the accumulator (quadratic). But the result is every element flattened, in order, whatever the
elements' shapes: the flat layout's data itself, the stacked layout's data reshaped to [-1]:

    Loop(M = SequenceLength(s), cond (absent or true), acc0 (empty, [0]),
         body(i, c, acc): acc' = Concat(acc, Reshape(SequenceAt(s, i), [-1]), axis=0);
         the condition out c or true)
        -> ListForms.flattened(s)                 (flat, unranked: the data; stacked, ragged:
                                                   Reshape(data, [-1]))
    acc0 any 1-D tensor  -> Concat(acc0, flattened(s))
    Reshape(.., T), T [1, .., -1, .., 1] concatenated on the axis of the -1, or Flatten(..,
    axis=0) (T = [1, -1]) on axis 1  -> Reshape(flattened(s), T), after acc0 as above

The Loop runs exactly len(s) iterations (its trip count is the length of s, read by
SequenceLength from the same list, and nothing ends it early), and reads element i in
iteration i: every element once, in order, as the result does. The accumulator the Loop
carried is then read by no one; the cleanup drops it, and the Loop with it when it carried
nothing else (and then the table of shapes a flat list keeps for its readers, when the Loop
was its only reader). The result is exact, a list of no element included (the empty start
tensor; the ConcatFromSequence of an empty list the accumulator stood for fails, as
`loop-append-to-concat` documents).

`check` says, for one carried value of a Loop, whether it is such an accumulator (a
`FlattenedConcat`), else why not; `check_list` the same for the join left a list (a
SequenceEmpty appended to, read only by ConcatFromSequence: where `loop-append-to-concat` does
not know the flattened element's rank); the converter (`seqlower.lists.convert`) asks them for
every value a Loop carries.
"""

from __future__ import annotations

__all__ = ["FlattenedConcat", "Measures", "check", "check_list"]

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from seqlower.analysis.scan_forms import always_continues, static_bool
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import is_sequence_value

# measures(trip, s): whether the Loop's trip count `trip` is the length of the list `s`
Measures = Callable[[ir.Value, ir.Value], bool]


@dataclasses.dataclass(frozen=True)
class FlattenedConcat:
    """The carried value `index` (among the Loop's carried values) is every element of
    `source`, flattened to `target` and concatenated on `axis`, after `initial` (None: the
    accumulator starts empty and adds nothing)."""

    index: int
    source: ir.Value  # the list read (SequenceAt's input)
    target: tuple[int, ...]  # the shape each element is reshaped to: ones and one -1
    axis: int  # where the -1 is
    initial: ir.Value | None


def check(
    loop: ir.Node, index: int, values: StaticValues, measures: Measures
) -> FlattenedConcat | str:
    """Whether the carried value `index` of `loop` is the flattened concatenation of a list's
    elements (see the module), else why not."""
    body = loop.attributes["body"].as_graph()
    init, param = loop.inputs[2 + index], body.inputs[2 + index]
    out = body.outputs[1 + index]
    if init is None or is_sequence_value(init):
        return "the carried value is not a tensor"
    cat = _step(param, out, "Concat")
    if cat is None or len(cat.inputs) != 2:
        return "the body does not only concatenate a tensor after the carried value"
    if _read_in_body(out, body):
        return "the grown value is also read in the body"
    found = _joined(
        loop, body, cat.inputs[1], {cat.attributes.get_int("axis", 0)}, values, measures
    )
    if isinstance(found, str):
        return found
    source, target, axis = found
    start = _start(init, target, axis, values)
    if isinstance(start, str):
        return start
    return FlattenedConcat(index, source, target, axis, start)


def check_list(
    loop: ir.Node, index: int, values: StaticValues, measures: Measures
) -> FlattenedConcat | str:
    """Whether the carried value `index` of `loop` is the same join written on a list that
    `loop-append-to-concat` left a list (it refuses an appended tensor whose rank its shape
    analysis does not know: `Reshape(SequenceAt(s, i), [-1])` of elements of a rank known at
    run time only): a SequenceEmpty the body appends `Reshape(SequenceAt(s, i), T)` to, the
    Loop's list read only by ConcatFromSequence(new_axis=0) on the axis of the -1. Its readers
    then read the join from s at once (a list of no element: the empty tensor, where the
    original's ConcatFromSequence fails, as the list tier's ragged join of it does)."""
    body = loop.attributes["body"].as_graph()
    init, param = loop.inputs[2 + index], body.inputs[2 + index]
    out, result = body.outputs[1 + index], loop.outputs[index]
    if init is None or not is_sequence_value(init):
        return "the carried value is not a list"
    made = init.producer()
    if made is None or made.op_type != "SequenceEmpty" or made.domain != "":
        return "the list does not start empty (SequenceEmpty)"
    insert = _step(param, out, "SequenceInsert")
    if insert is None or (len(insert.inputs) > 2 and insert.inputs[2] is not None):
        return "the body does not only append a tensor to the list"
    if _read_in_body(out, body):
        return "the grown list is also read in the body"
    readers = [use.node for use in result.uses()]
    if result.is_graph_output() or not readers:
        return "the Loop's list is a graph output or not read"
    for reader in readers:
        joined = reader.op_type == "ConcatFromSequence" and reader.domain == ""
        if not joined or reader.attributes.get_int("new_axis", 0):
            return "the Loop's list is read by more than ConcatFromSequence(new_axis=0)"
    axes = {reader.attributes.get_int("axis", 0) for reader in readers}
    found = _joined(loop, body, insert.inputs[1], axes, values, measures)
    if isinstance(found, str):
        return found
    source, target, axis = found
    return FlattenedConcat(index, source, target, axis, None)


def _step(param: ir.Value, out: ir.Value, op_type: str) -> ir.Node | None:
    """The node of `op_type` that makes the body output `out` from the carried input `param`,
    when it is `param`'s one reader (as its first input); else None."""
    uses = list(param.uses())
    node = out.producer()
    if len(uses) != 1 or node is None or uses[0].node is not node or uses[0].idx != 0:
        return None
    return node if node.op_type == op_type and node.domain == "" else None


def _read_in_body(out: ir.Value, body: ir.Graph) -> bool:
    """Whether the body output `out` is also read in the body, or given out twice."""
    return bool(out.uses()) or [o for o in body.outputs if o is out] != [out]


def _joined(
    loop: ir.Node,
    body: ir.Graph,
    piece: ir.Value | None,
    axes: set[int],
    values: StaticValues,
    measures: Measures,
) -> tuple[ir.Value, tuple[int, ...], int] | str:
    """(s, T, axis) when `piece`, joined on `axes` (one axis), is element i of the list s at
    iteration i, reshaped to T and joined on the axis of T's -1, in a Loop that runs len(s)
    iterations; else why not."""
    flattened = _flattened(piece, values)
    if isinstance(flattened, str):
        return flattened
    element, target = flattened
    if len(axes) != 1:
        return "the elements are concatenated on different axes"
    (axis,) = axes
    if not -len(target) <= axis < len(target) or target[axis % len(target)] != -1:
        return f"the elements are concatenated on axis {axis}, not the one they are flattened on"
    axis %= len(target)
    read = element.producer()
    if read is None or read.op_type != "SequenceAt" or read.domain != "":
        return "the tensor flattened is not an element of a list (SequenceAt)"
    source, position = read.inputs[0], read.inputs[1]
    if position is not body.inputs[0]:
        return "the element is not read at the iteration number"
    if source is None or source.graph is body:
        return "the list read is made in the body"
    trip = loop.inputs[0] if loop.inputs else None
    if trip is None or not measures(trip, source):
        return "the trip count is not the length of the list read"
    cond = loop.inputs[1] if len(loop.inputs) > 1 else None
    if cond is not None and static_bool(cond, values) is not True:
        return "the loop's condition is not a constant true"
    if not always_continues(body, values):
        return "the body computes its condition, so the loop may end early"
    return source, target, axis


def _flattened(piece: ir.Value | None, values: StaticValues) -> tuple[ir.Value, tuple] | str:
    """(x, T) when `piece` is x reshaped to T (ones and one -1: x flattened, with axes of
    one around it): Reshape(x, T), or Flatten(x, axis=0) (T = [1, -1])."""
    node = piece.producer() if piece is not None else None
    if node is None or node.domain != "" or node.op_type not in ("Reshape", "Flatten"):
        return "the tensor concatenated is not a Reshape or Flatten"
    x = node.inputs[0]
    if x is None:
        return "the tensor flattened is missing"
    if node.op_type == "Flatten":
        if node.attributes.get_int("axis", 1) != 0:
            return "the Flatten keeps axes before its own (axis != 0)"
        return x, (1, -1)
    target = values.get_ints(node.inputs[1] if len(node.inputs) > 1 else None)
    if target is None:
        return "the Reshape's shape is computed at run time"
    if target.count(-1) != 1 or any(d not in (1, -1) for d in target):
        return f"the Reshape to {target} does not flatten (ones and one -1)"
    return x, tuple(target)


def _start(
    init: ir.Value, target: tuple[int, ...], axis: int, values: StaticValues
) -> ir.Value | str | None:
    """None when the accumulator starts empty in the shape of the elements flattened; the start
    itself when the result is Concat(start, the flattened elements) in every case, a Loop of
    no iteration included (1-D, or its other dims one); else why not."""
    static = values.get(init)
    empty = tuple(0 if d == -1 else 1 for d in target)
    if static is not None and static.size == 0:
        if static.shape != empty:
            return (
                f"the accumulator starts empty with shape {list(static.shape)}, not {list(empty)}"
            )
        return None
    shape = init.shape
    if shape is None or len(shape) != len(target):
        return "the accumulator's start is not known to have the rank of the flattened elements"
    if any(k != axis and shape[k] != 1 for k in range(len(target))):
        return "the accumulator's start has dims other than one beside the concatenation axis"
    return init
