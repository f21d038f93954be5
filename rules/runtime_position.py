"""SequenceInsert and SequenceErase at a position known only at run time, on a sequence of
static length whose elements (and the inserted tensor) share one static shape.

    SequenceInsert(SequenceConstruct(e0..en-1), t, p)
        -> SequenceConstruct(r0..rn), rj = Where(j < q, e[j], Where(j == q, t, e[j-1]))
    SequenceErase(SequenceConstruct(e0..en-1), p)
        -> SequenceConstruct(r0..rn-2), rj = Where(j < q, e[j], e[j+1])

q is p normalized through a Gather over a constant table, so a position outside the accepted
range ([-n, n] for insert, [-n, n-1] for erase) still fails at run time, as in the original.
With elements of different shapes a Where would broadcast instead of choosing, so those stay.
"""

from __future__ import annotations

__all__ = ["RULES"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.errors import InvalidModelError
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet


def _static_shape(value: ir.Value) -> tuple[int, ...] | None:
    if value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(int(d) for d in value.shape)


# Element types onnxruntime's CPU Where implements (checked on 1.31: not bool, int16, uint16,
# uint64): the lowered model must stay runnable where the original runs.
_WHERE_TYPES = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.INT8,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT32,
        ir.DataType.STRING,
    }
)


def _check(node: ir.Node, ctx: Context, tensors: list[ir.Value]):  # type: ignore[no-untyped-def]
    elements = ctx.known_elements(node.inputs[0])
    if isinstance(elements, Refusal):
        return elements
    dtype = element_dtype(node.outputs[0])
    if dtype not in _WHERE_TYPES:
        name = dtype.name.lower() if dtype is not None else "unknown"
        return Refusal(f"onnxruntime has no Where for {name} elements")
    shapes = {_static_shape(v) for v in (*elements, *tensors)}
    if len(shapes) != 1 or None in shapes:
        return Refusal("the elements do not share one static shape, so Where cannot choose")
    return elements


def _check_insert(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    if len(node.inputs) < 3 or node.inputs[2] is None:
        return Refusal("no position: handled by insert-into-known")
    return _check(node, ctx, [node.inputs[1]])  # type: ignore[list-item]


def _check_erase(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return Refusal("no position: handled by erase-from-known")
    result = _check(node, ctx, [])
    if isinstance(result, tuple) and not result:
        raise InvalidModelError(
            f"SequenceErase '{node.name}': erases from a sequence that is always empty "
            "(a run-time error in the ONNX spec)"
        )
    if isinstance(result, tuple) and len(result) == 1:
        return Refusal("the result is empty, so nothing would check the position at run time")
    return result


def _normalized(builder: Builder, position: ir.Value, table_size: int, shift: bool) -> ir.Value:
    """Gather(range(table_size), p') with p' = p - 1 for negative p when `shift` (insert
    accepts [-n, n] over n + 1 slots); Gather rejects anything out of range."""
    position = builder.op("Cast", [position], {"to": int(ir.DataType.INT64)})
    if shift:
        zero = builder.constant(np.array(0, dtype=np.int64), "zero")
        one = builder.constant(np.array(1, dtype=np.int64), "one")
        negative = builder.op("Less", [position, zero])
        position = builder.op("Where", [negative, builder.op("Sub", [position, one]), position])
    table = builder.ints(list(range(table_size)), "positions")
    return builder.op("Gather", [table, position], {"axis": 0}, name="position")


def _choose(builder: Builder, op: str, q: ir.Value, j: int, a: ir.Value, b: ir.Value) -> ir.Value:
    """Where(op(j, q), a, b) with op in Less/Equal/Greater... read as `j <op> q`."""
    condition = builder.op(op, [builder.constant(np.array(j, dtype=np.int64), "j"), q])
    result = builder.op("Where", [condition, a, b])
    result.type, result.shape = a.type, a.shape
    return result


def _insert(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceInsert(SequenceConstruct(e0..en-1), t, p)
    -> SequenceConstruct(Where(j < q, e[j], Where(j == q, t, e[j-1])) for j in 0..n)"""
    builder = ctx.rewriter.before(node)
    tensor = node.inputs[1]
    assert tensor is not None
    n = len(elements)
    q = _normalized(builder, node.inputs[2], n + 1, shift=True)  # type: ignore[arg-type]
    result = []
    for j in range(n + 1):
        if j == n:  # the Where also makes q (and so the range check) part of the result
            chosen = _choose(builder, "Equal", q, j, tensor, elements[j - 1] if n else tensor)
        else:
            at_or_after = (
                tensor if j == 0 else _choose(builder, "Equal", q, j, tensor, elements[j - 1])
            )
            chosen = _choose(builder, "Less", q, j, elements[j], at_or_after)
        result.append(chosen)
    ctx.replace_sequence(node.outputs[0], result, builder)


def _erase(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceErase(SequenceConstruct(e0..en-1), p)
    -> SequenceConstruct(Where(j < q, e[j], e[j+1]) for j in 0..n-2)"""
    builder = ctx.rewriter.before(node)
    n = len(elements)
    q = _normalized(builder, node.inputs[1], n, shift=False)  # type: ignore[arg-type]
    result = [_choose(builder, "Less", q, j, elements[j], elements[j + 1]) for j in range(n - 1)]
    ctx.replace_sequence(node.outputs[0], result, builder)


RULES = RuleSet(
    [
        Rule("insert-at-runtime-position", "SequenceInsert", _check_insert, _insert),
        Rule("erase-at-runtime-position", "SequenceErase", _check_erase, _erase),
    ]
)
