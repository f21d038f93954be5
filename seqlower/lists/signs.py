"""Integers proved never negative from how they are made, so that a list position read from
them needs no count-from-the-end (`Where(p < 0, p + n, p)`: three operators per edit).

    a constant >= 0, Shape, Size, SequenceLength, a Loop's iteration number -> never negative
    NonZero, ArgMax, ArgMin, TopK's indices, Abs                             -> never negative
    Cast, Reshape, Squeeze, Unsqueeze, Identity, Transpose, Flatten         -> as their input
    Gather, GatherElements, GatherND, Slice, Compress, Expand, Tile of data -> as the data
    Concat                                                                   -> as all its inputs
    Add, Mul, Div, Max, Min of values never negative                        -> never negative
    Where(c, a, b), a and b never negative (whatever c)                     -> never negative
    Mod(a, b), fmod=0, b never negative (the result takes the divisor's sign) -> never negative
    ReduceSum(Cast(bool, to=int64)), a count of true entries (no int64 overflow) -> never negative
    a Loop-carried counter: starts at a constant >= 0, the body returns Add(v, c), c a
    constant >= 0 (`enumerate`'s index as TorchScript carries it)      -> never negative
                                                                          (`carried_counters`)

`never_negative_across` also sees through what a list's table of sizes passes on its way
through control flow (a wider proof, used where a table is read, not where a position is):

    Identity, Reshape, Squeeze, Unsqueeze, Flatten                           -> as their input
    ScatterElements, reduction none, add or max                -> as its data and its updates
    an output of an If                                          -> as that output of both branches
    a scan output of a Loop                 -> as the body's value (iteration number >= 0 there)
    a value a Loop carries         -> never negative when it starts so and the body keeps it so
                                      given the value carried in (induction on the iterations)

A bounded walk up the producers (`DEPTH` steps): no answer means "may be negative".
"""

from __future__ import annotations

__all__ = ["carried_counters", "never_negative", "never_negative_across"]

from collections.abc import Collection

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import peel_identity

DEPTH = 8
_SOURCES = {"Shape", "Size", "SequenceLength", "NonZero", "ArgMax", "ArgMin"}
_PASSING = {"Cast", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Flatten"}
# ops whose output holds entries of their first input only (copied, never computed)
_COPYING = {"Gather", "GatherElements", "GatherND", "Slice", "Compress", "Expand", "Tile"}
_CLOSED = {"Add", "Mul", "Div", "Max", "Min", "Concat"}
# the ops `never_negative_across` passes that `never_negative` does not (Flatten too, as both)
_RESHAPING = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
# ScatterElements reductions whose result is never negative when data and updates are not
_KEEPING_SIGN = frozenset({"none", "add", "max"})


def never_negative(
    value: ir.Value | None,
    values: StaticValues,
    counters: Collection[int] = (),
    depth: int = DEPTH,
) -> bool:
    """Whether `value`, an integer tensor, holds no negative entry whatever the inputs.
    `counters`: the ids of the Loop bodies' iteration numbers (a graph does not say whose body
    it is; the caller knows)."""
    if value is None or depth < 0:
        return False
    static = values.get(value)
    if static is not None:
        return static.dtype.kind in "iu" and bool((static >= 0).all())
    node = value.producer()
    if node is None:  # a graph input
        return id(value) in counters
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return False
    if op in _SOURCES or op == "Abs" or (op == "TopK" and value is node.outputs[1]):
        return True
    if op in _COPYING or op in _PASSING:
        return never_negative(node.inputs[0], values, counters, depth - 1)
    if op in _CLOSED:
        return all(never_negative(x, values, counters, depth - 1) for x in node.inputs)
    if op == "ReduceSum" and _counts_flags(node.inputs[0]):
        return True
    if op == "Where":  # each entry is one of a or b
        return len(node.inputs) == 3 and all(
            never_negative(x, values, counters, depth - 1) for x in node.inputs[1:]
        )
    if op == "Mod":  # with fmod=1 the result takes the dividend's sign instead
        fmod = node.attributes.get_int("fmod", 0)
        divisor = node.inputs[1] if len(node.inputs) == 2 else None
        return fmod == 0 and never_negative(divisor, values, counters, depth - 1)
    return False


def never_negative_across(
    value: ir.Value | None,
    values: StaticValues,
    counters: frozenset[int] = frozenset(),
    depth: int = DEPTH,
) -> bool:
    """`never_negative`, seeing also through reshapes, ScatterElements (its data and updates),
    the outputs of an If (both branches), the scan output of a Loop whose body gives a value
    never negative, and a value a Loop carries that starts never negative and that the body
    keeps so given the value it carries in (the table of sizes of a list a loop builds)."""
    if value is None or depth < 0:
        return False
    if never_negative(value, values, counters):
        return True
    node = value.producer()
    if node is None or node.domain != "":
        return False
    deeper = depth - 1
    if node.op_type in _RESHAPING:
        return never_negative_across(node.inputs[0], values, counters, deeper)
    if node.op_type == "ScatterElements":
        if node.attributes.get_string("reduction", "none") not in _KEEPING_SIGN:
            return False
        return all(never_negative_across(node.inputs[k], values, counters, deeper) for k in (0, 2))
    position = node.outputs.index(value)
    if node.op_type == "If":
        return all(
            never_negative_across(
                node.attributes[branch].as_graph().outputs[position], values, counters, deeper
            )
            for branch in ("then_branch", "else_branch")
        )
    if node.op_type != "Loop":
        return False
    body = node.attributes["body"].as_graph()
    carried = len(node.inputs) - 2
    inner = {*counters, id(body.inputs[0])}
    if position < carried:  # by induction: it starts never negative and stays so
        if not never_negative_across(node.inputs[2 + position], values, counters, deeper):
            return False
        inner.add(id(body.inputs[2 + position]))
    return never_negative_across(body.outputs[1 + position], values, frozenset(inner), deeper)


def _counts_flags(value: ir.Value | None) -> bool:
    """Whether `value` is Cast(b, to=int64) of a bool `b`: entries 0 or 1, whose sums count
    fewer entries than any tensor holds, so they stay below 2**63."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return False
    source = node.inputs[0]
    return (
        node.attributes.get_int("to", 0) == int(ir.DataType.INT64)
        and source is not None
        and source.dtype == ir.DataType.BOOL
    )


def carried_counters(loop: ir.Node, values: StaticValues) -> list[ir.Value]:
    """The body inputs of `loop` that are counters never negative: the initial value a scalar
    constant >= 0, the body's next value `Add(v, c)` (under Identities), c a scalar constant
    >= 0 (scalars, as the iteration number is: `ListForms.bounds` gathers at them).
    Each holds start + i * c in iteration i (an int64 cannot reach 2**63 by steps of a loop)."""
    body = loop.attributes["body"].as_graph()
    counters = []
    for param, init, update in zip(body.inputs[2:], loop.inputs[2:], body.outputs[1:]):
        start = values.get(init) if init is not None else None
        if start is None or start.dtype.kind not in "iu" or start.ndim != 0 or start < 0:
            continue
        node = peel_identity(update).producer() if update is not None else None
        if node is None or node.op_type != "Add" or node.domain not in ("", "ai.onnx"):
            continue
        if len(node.inputs) != 2 or param not in node.inputs:
            continue
        other = node.inputs[1] if node.inputs[0] is param else node.inputs[0]
        step = values.get(other) if other is not None else None
        if step is not None and step.dtype.kind in "iu" and step.ndim == 0 and step >= 0:
            counters.append(param)
    return counters
