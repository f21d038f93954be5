"""How many times a `while` loop runs, when its condition is known in every iteration.

    s = SequenceConstruct(a, b, c)
    Loop(INT64_MAX, len(s) > 0, s, body: e = SequenceAt(s, -1); s2 = SequenceErase(s, -1)
                                          cond = len(s2) > 0)
    -> runs 3 times

`while len(skips) > 0: skip = skips.pop()` (a U-Net's decoder) runs as many times as the list
it starts from is long. The body's condition output is evaluated iteration by iteration over
small static facts: the iteration number, the condition input (true while the loop runs),
carried integers and booleans of a static initial value (a counter `t = t + 1` tested against
a bound, as TorchScript writes `for t in range(a, b)` with a `continue`), the lengths of the
carried lists (their initial lengths, then what the body's SequenceInsert,
SequenceErase, SequenceConstruct and SequenceEmpty make of them), constants and static outer
values, through integer and boolean arithmetic. When every iteration's condition is known, the
loop runs until the first false one (or the trip count): an unrolling with that count computes
what the loop does. Anything else the condition reads (a tensor computed in the body, a
subgraph), a position that may be out of range, or more iterations than the caller allows:
unknown (None).
"""

from __future__ import annotations

__all__ = ["static_while_count"]

import dataclasses
import operator
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import Facts
from seqlower.ops import is_sequence_value, subgraphs


@dataclasses.dataclass(frozen=True)
class _Length:
    """A list of this many elements (what the condition may read of it)."""

    n: int


_Fact = int | bool | _Length | None

_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "Equal": operator.eq,
    "Greater": operator.gt,
    "GreaterOrEqual": operator.ge,
    "Less": operator.lt,
    "LessOrEqual": operator.le,
}
_ARITHMETIC: dict[str, Callable[[int, int], int]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
}
_LOGIC: dict[str, Callable[[bool, bool], bool]] = {
    "And": operator.and_,
    "Or": operator.or_,
    "Xor": operator.xor,
}


def static_while_count(loop: ir.Node, facts: Facts, limit: int) -> int | None:
    """How many iterations `loop` runs, when its body's condition is known in each (see the
    module docstring) and they are at most `limit`; else None."""
    body = loop.attributes["body"].as_graph()
    trip = facts.static_int(loop.inputs[0]) if loop.inputs and loop.inputs[0] else None
    cond = loop.inputs[1] if len(loop.inputs) > 1 else None
    start = True if cond is None else _as_bool(facts.values.get(cond))
    if trip is None or start is None or len(body.inputs) < 2:
        return None
    if not start or trip <= 0:
        return 0
    carried: list[_Fact] = []
    for init in loop.inputs[2:]:
        if init is not None and not is_sequence_value(init):
            carried.append(_scalar(facts.values.get(init)))  # a counter of static start
            continue
        length = facts.length(init) if init is not None else None  # type: ignore[arg-type]
        carried.append(_Length(length) if length is not None else None)
    for k in range(min(trip, limit + 1)):
        known: dict[ir.Value, _Fact] = {body.inputs[0]: k, body.inputs[1]: True}
        known.update(zip(body.inputs[2:], carried))
        for node in body:
            if not subgraphs(node) and node.domain == "":
                for output, fact in zip(node.outputs, _evaluate(node, known, facts)):
                    known[output] = fact
        going = known.get(body.outputs[0])
        if not isinstance(going, bool):
            return None
        if not going:
            return k + 1
        carried = [known.get(output) for output in body.outputs[1 : 1 + len(carried)]]
    return trip if trip <= limit else None


def _evaluate(node: ir.Node, known: dict[ir.Value, _Fact], facts: Facts) -> list[_Fact]:
    """The facts of `node`'s outputs from the facts of its inputs ([] when none is known)."""
    op = node.op_type

    def fact(index: int) -> _Fact:
        if index >= len(node.inputs) or node.inputs[index] is None:
            return None
        value = node.inputs[index]
        if value in known:
            return known[value]
        return _scalar(facts.values.get(value))

    if op == "SequenceEmpty":
        return [_Length(0)]
    if op == "SequenceConstruct":
        return [_Length(len(node.inputs))]
    if op in ("Identity", "Cast") and isinstance(fact(0), (bool, int, _Length)):
        value = fact(0)
        if op == "Cast" and not isinstance(value, _Length):
            to = node.attributes.get_int("to", 0)
            if to == int(ir.DataType.BOOL):
                return [bool(value)]
            if to == int(ir.DataType.INT64) or to == int(ir.DataType.INT32):
                return [int(value)]  # type: ignore[arg-type]
            return []
        return [value]
    if op == "SequenceLength" and isinstance(fact(0), _Length):
        return [fact(0).n]  # type: ignore[union-attr]
    if op in ("SequenceInsert", "SequenceErase") and isinstance(fact(0), _Length):
        n = fact(0).n  # type: ignore[union-attr]
        position_input = 2 if op == "SequenceInsert" else 1
        has_position = len(node.inputs) > position_input and node.inputs[position_input]
        position = fact(position_input) if has_position else None
        if op == "SequenceInsert":
            fits = not has_position or (isinstance(position, int) and -n <= position <= n)
            return [_Length(n + 1)] if fits else []
        fits = (not has_position and n > 0) or (isinstance(position, int) and -n <= position < n)
        return [_Length(n - 1)] if fits else []
    if op in _COMPARE:
        a, b = fact(0), fact(1)
        if _is_int(a) and _is_int(b):
            return [_COMPARE[op](a, b)]  # type: ignore[arg-type]
    elif op in _ARITHMETIC:
        a, b = fact(0), fact(1)
        if _is_int(a) and _is_int(b):
            result = _ARITHMETIC[op](a, b)  # type: ignore[arg-type]
            bits = 32 if node.outputs[0].dtype == ir.DataType.INT32 else 64
            fits = -(2 ** (bits - 1)) <= result < 2 ** (bits - 1)
            return [result] if fits else []  # a wrapped result is not Python's
    elif op in _LOGIC:
        a, b = fact(0), fact(1)
        if isinstance(a, bool) and isinstance(b, bool):
            return [_LOGIC[op](a, b)]
    elif op == "Not" and isinstance(fact(0), bool):
        return [not fact(0)]
    return []


def _is_int(value: _Fact) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar(array: np.ndarray | None) -> _Fact:
    """A static one-element integer or boolean tensor as a Python value."""
    if array is None or array.size != 1:
        return None
    item = array.reshape(-1)[0]
    if array.dtype == np.bool_:
        return bool(item)
    if array.dtype.kind in "iu":
        return int(item)
    return None


def _as_bool(array: np.ndarray | None) -> bool | None:
    value = _scalar(array)
    return value if isinstance(value, bool) else None
