"""A Loop that appends element i of a list in its iteration i, for every i, builds a copy of that
list: the copy is the list itself.

    ys = Loop(SequenceLength(xs), true, .., SequenceEmpty(),
              body(i, c, .., s): s' = SequenceInsert(s, SequenceAt(xs, i)))
        -> ys = xs                          (the Loop keeps its other values, if any is read)

TorchScript writes a list comprehension over a list this way: `torch.cat([s for s in srcs])`
(DETR's `_get_src_permutation_idx`), `list(xs)`. Lowered as a loop, the copy of a list of
elements that differ in shape reads each element as a slice of the list's rows at bounds from its
table and joins the slices again (one mask over every row for every element once batched, or a
Concat per iteration); the list itself is those rows already.

The trip count is the length of xs (or TorchScript's count of `enumerate(xs)`,
ReduceMin(Concat(INT64_MAX, Unsqueeze(n))), which is n as a length is never negative), the
condition is true and the body never stops early, so iteration i runs for every i in [0, n):
the reads are all in range (none fails in the original, none is left to fail), positions are
never negative, and an empty xs runs no iteration and gives the empty list it is. The list
starts empty, of the element type of xs (SequenceInsert accepts no other), and gets exactly
that one append, at the end, in every iteration. What else the body does is left as it was:
the Loop still computes its other values (a Loop none of whose values is read any more goes as
dead code, and a list it carries that nothing reads with it).

Refused: a trip count that is not xs's length (`zip` of lists of unknown lengths: a prefix), a
condition that may be false or stop the loop, a list that starts with elements, an append at a
position, an element read at another position or of another list.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.ops import peel_identity
from seqlower.passes.trivial_min import trivial_min_operand
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import appending_insert, body_always_continues, known_bool, loop_body


@dataclasses.dataclass(frozen=True)
class ListCopy:
    output: ir.Value  # the Loop's final value of the copy
    source: ir.Value  # the list copied


def _single(node: ir.Node | None, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and node.domain == ""


def _length_of(trip: ir.Value | None, ctx: Context) -> ir.Value | None:
    """The list whose length `trip` is: SequenceLength(xs), or TorchScript's count of
    `enumerate(xs)`, ReduceMin(Concat(INT64_MAX, Unsqueeze(SequenceLength(xs), [0])))."""
    if trip is None:
        return None
    trip = peel_identity(trip)
    node = trip.producer()
    if _single(node, "ReduceMin"):
        assert node is not None
        operand = trivial_min_operand(node, ctx.facts.values)
        node = None if operand is None else operand.producer()
    if not _single(node, "SequenceLength"):
        return None
    assert node is not None
    return node.inputs[0]


def _copied(node: ir.Node, k: int, source: ir.Value, counter: ir.Value) -> bool:
    """Whether carried value k of Loop `node` starts empty, of source's element type, and gets
    SequenceAt(source, i) appended at the end in every iteration (i the iteration number)."""
    body = loop_body(node)
    initial = node.inputs[k + 2]
    empty = None if initial is None else initial.producer()
    if not _single(empty, "SequenceEmpty"):
        return False
    assert empty is not None
    dtype = element_dtype(source)
    declared = empty.attributes.get_int("dtype", int(ir.DataType.FLOAT))
    if dtype is None or declared != int(dtype):
        return False
    update = body.outputs[k + 1]
    insert = appending_insert(update, body.inputs[k + 2], body)
    if insert is None:
        return False
    read = peel_identity(insert.inputs[1]).producer()  # type: ignore[arg-type]
    if not _single(read, "SequenceAt") or read.inputs[0] is not source:  # type: ignore[union-attr]
        return False
    position = read.inputs[1]  # type: ignore[union-attr]
    return position is not None and peel_identity(position) is counter


def _check(node: ir.Node, ctx: Context) -> ListCopy | Refusal:
    if "body" not in node.attributes:
        return Refusal("the Loop has no body")
    source = _length_of(node.inputs[0] if node.inputs else None, ctx)
    if source is None:
        return Refusal("the trip count is not the length of a list")
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    if condition is not None and known_bool(condition, ctx) is not True:
        return Refusal("the initial condition may be false")
    body = loop_body(node)
    if not body_always_continues(body, ctx):
        return Refusal("the body may stop the loop early")
    counter = body.inputs[0]
    for k in range(len(node.inputs) - 2):
        output = node.outputs[k]
        if not output.uses() and not output.is_graph_output():
            continue  # already replaced, or never read
        if _copied(node, k, source, counter):
            return ListCopy(output, source)
    return Refusal("no carried list is a copy of the list whose length is the trip count")


def _to_source(node: ir.Node, copy: ListCopy, ctx: Context) -> None:
    """ys = Loop(SequenceLength(xs), true, SequenceEmpty(), body: s' = SequenceInsert(s,
    SequenceAt(xs, i))) -> ys = xs"""
    ctx.rewriter.replace(copy.output, copy.source)


# before the producers: the copy goes before a rule batches or converts its Loop and list
RULES = RuleSet([Rule("loop-list-copy", "Loop", _check, _to_source, before_producers=True)])
