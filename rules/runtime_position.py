"""SequenceInsert and SequenceErase at a position known only at run time, on a sequence of
static length.

    SequenceInsert(SequenceConstruct(e0..en-1), t, p)
        -> SequenceConstruct(r0..rn), rj = Where(j < q, e[j], Where(j == q, t, e[j-1]))
    SequenceErase(SequenceConstruct(e0..en-1), p)
        -> SequenceConstruct(r0..rn-2), rj = Where(j < q, e[j], e[j+1])
                                                   (one static shape, a type Where takes)
    SequenceInsert(SequenceConstruct(e0..en-1), t, p)
        -> SequenceConstruct(Split(Gather(Stack(e0..en-1, t), i))...),
           i = Where(J < q, J, Where(J == q, n, J - 1)), J = [0..n]
    SequenceErase(SequenceConstruct(e0..en-1), p)
        -> SequenceConstruct(Split(Gather(Stack(e0..en-1), i))...), i = Where(J < q, J, J + 1)
                                                   (one static shape, any other type)
    SequenceInsert(SequenceConstruct(e0..en-1), t, p)
        -> SequenceConstruct(r0..rn), rj = If(j < q, e[j], If(j == q, t, e[j-1]))
    SequenceErase(SequenceConstruct(e0..en-1), p)
        -> SequenceConstruct(r0..rn-2), rj = If(j < q, e[j], e[j+1])
                                                   (elements of different or unknown shapes)

q is p normalized through a Gather over a constant table, so a position outside the accepted
range ([-n, n] for insert, [-n, n-1] for erase) still fails at run time, as in the original.
With elements of different shapes a Where would broadcast instead of choosing: each element is
chosen by an If instead. The Gather form selects through int64 indices only, so it needs no
Where kernel for the element type (onnxruntime has none for bool, int16, uint16, uint64,
bfloat16: `WHERE_TYPES` below), and every runtime has Gather for every type.
"""

from __future__ import annotations

__all__ = ["RULES", "WHERE_TYPES"]

import numpy as np
import onnx_ir as ir

from seqlower import runtime_quirks
from seqlower.analysis.facts import element_dtype
from seqlower.errors import InvalidModelError
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet

# Each form writes one choice per element: a chain of k edits of a list of n elements is k * n
# nodes. Longer lists take the tensor form (seqlower.lists), whose edits are a few nodes each.
MAX_ELEMENTS = 16


def _static_shape(value: ir.Value) -> tuple[int, ...] | None:
    if value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(int(d) for d in value.shape)


# Where is emitted only for element types every supported onnxruntime release implements
# (seqlower.runtime_quirks probes them): the lowered model must stay runnable where the original
# runs. Other types take the Gather form.
WHERE_TYPES = frozenset(
    dtype for dtype in ir.DataType if dtype.name.lower() in runtime_quirks.WHERE_PORTABLE_TYPES
)


def _dtype(node: ir.Node, elements: tuple[ir.Value, ...]) -> ir.DataType | None:
    return element_dtype(node.outputs[0]) or next((e.dtype for e in elements if e.dtype), None)


def _check(node: ir.Node, ctx: Context, tensors: list[ir.Value], form: str):  # type: ignore[no-untyped-def]
    """The elements when `form` ("where", "gather" or "if") applies to `node`, else why not."""
    elements = ctx.known_elements(node.inputs[0])
    if isinstance(elements, Refusal):
        return elements
    if len(elements) > MAX_ELEMENTS:
        return Refusal(
            f"{len(elements)} elements: each form here writes a node per element for each edit "
            f"(at most {MAX_ELEMENTS}), where the tensor form of the list edits it in a few"
        )
    dtype = _dtype(node, elements)
    if dtype is None:
        return Refusal("the element type is unknown")
    shapes = {_static_shape(v) for v in (*elements, *tensors)}
    same_shape = len(shapes) == 1 and None not in shapes
    if form == "if":
        return elements
    if not same_shape:
        return Refusal("the elements do not share one static shape, so they cannot be stacked")
    if form == "where" and dtype not in WHERE_TYPES:
        return Refusal(
            f"some supported onnxruntime releases have no Where for {dtype.name.lower()} elements"
        )
    if form == "gather" and dtype in WHERE_TYPES:  # strings included: Gather mis-copies them
        return Refusal("Where takes this element type (the Where form applies)")
    return elements


def _check_insert(form: str):  # type: ignore[no-untyped-def]
    def check(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
        if len(node.inputs) < 3 or node.inputs[2] is None:
            return Refusal("no position: handled by insert-into-known")
        return _check(node, ctx, [node.inputs[1]], form)  # type: ignore[list-item]

    return check


def _check_erase(form: str):  # type: ignore[no-untyped-def]
    def check(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
        if len(node.inputs) < 2 or node.inputs[1] is None:
            return Refusal("no position: handled by erase-from-known")
        result = _check(node, ctx, [], form)
        if isinstance(result, tuple) and not result:
            raise InvalidModelError(
                f"SequenceErase '{node.name}': erases from a sequence that is always empty "
                "(a run-time error in the ONNX spec)"
            )
        if isinstance(result, tuple) and len(result) == 1:
            return Refusal("the result is empty, so nothing would check the position at run time")
        return result

    return check


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


# -- Gather over the stacked elements: any element type ----------------------------------------


def _chosen(builder: Builder, stacked: ir.Value, indices: ir.Value, like: ir.Value, count: int):
    """The `count` elements Gather(stacked, indices, axis=0) picks, as separate tensors."""
    picked = builder.op("Gather", [stacked, indices], {"axis": 0}, name="chosen")
    chunks = builder.split(picked, 0, [1] * count, count)
    chosen = []
    for chunk in chunks:
        element = builder.squeeze(chunk, [0])
        element.type, element.shape = like.type, like.shape
        chosen.append(element)
    return chosen


def _insert_gather(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceInsert(SequenceConstruct(e0..en-1), t, p)
    -> SequenceConstruct(Split(Gather(Stack(e0..en-1, t), i)) squeezed),
       i = Where(J < q, J, Where(J == q, n, J - 1)), J = [0..n]"""
    builder = ctx.rewriter.before(node)
    tensor = node.inputs[1]
    assert tensor is not None
    n = len(elements)
    q = _normalized(builder, node.inputs[2], n + 1, shift=True)  # type: ignore[arg-type]
    stacked = builder.stack([*elements, tensor])
    slots = builder.ints(list(range(n + 1)), "slots")
    before = builder.ints(list(range(-1, n)), "slots_before")
    new = builder.constant(np.array(n, dtype=np.int64), "inserted")
    at_or_after = builder.op("Where", [builder.op("Equal", [slots, q]), new, before])
    indices = builder.op("Where", [builder.op("Less", [slots, q]), slots, at_or_after])
    ctx.replace_sequence(
        node.outputs[0], _chosen(builder, stacked, indices, tensor, n + 1), builder
    )


def _erase_gather(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceErase(SequenceConstruct(e0..en-1), p)
    -> SequenceConstruct(Split(Gather(Stack(e0..en-1), i)) squeezed),
       i = Where(J < q, J, J + 1), J = [0..n-2]"""
    builder = ctx.rewriter.before(node)
    n = len(elements)
    q = _normalized(builder, node.inputs[1], n, shift=False)  # type: ignore[arg-type]
    stacked = builder.stack(list(elements))
    slots = builder.ints(list(range(n - 1)), "slots")
    after = builder.ints(list(range(1, n)), "slots_after")
    indices = builder.op("Where", [builder.op("Less", [slots, q]), slots, after])
    chosen = _chosen(builder, stacked, indices, elements[0], n - 1)
    ctx.replace_sequence(node.outputs[0], chosen, builder)


# -- If per element: elements of different shapes ---------------------------------------------


def _branch_value(builder: Builder, key: str, make) -> ir.Graph:  # type: ignore[no-untyped-def]
    """A new branch graph whose one output is `make(branch_builder)`."""
    branch = builder.rewriter.new_graph(f"{builder.hint}_{key}", builder.opset)
    branch.graph.outputs.append(make(branch))
    return branch.graph


def _copy(value: ir.Value):  # type: ignore[no-untyped-def]
    def make(branch: Builder) -> ir.Value:
        result = branch.op("Identity", [value], name="element")
        result.type, result.shape = value.type, value.shape
        return result

    return make


def _if(builder: Builder, op: str, q: ir.Value, j: int, then_make, else_make) -> ir.Value:  # type: ignore[no-untyped-def]
    """If(j <op> q, then_make(), else_make()), each made inside its own branch."""
    condition = builder.op(op, [builder.constant(np.array(j, dtype=np.int64), "j"), q])
    branches = {
        "then_branch": _branch_value(builder, f"then_{j}", then_make),
        "else_branch": _branch_value(builder, f"else_{j}", else_make),
    }
    result = builder.op("If", [condition], branches, name="choose")
    then_out, else_out = (branches[k].outputs[0] for k in ("then_branch", "else_branch"))
    result.type = then_out.type
    same = then_out.shape is not None and then_out.shape == else_out.shape
    result.shape = then_out.shape if same and _static_shape(then_out) else None
    return result


def _insert_if(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceInsert(SequenceConstruct(e0..en-1), t, p)
    -> SequenceConstruct(If(j < q, e[j], If(j == q, t, e[j-1])) for j in 0..n)"""
    builder = ctx.rewriter.before(node)
    tensor = node.inputs[1]
    assert tensor is not None
    n = len(elements)
    q = _normalized(builder, node.inputs[2], n + 1, shift=True)  # type: ignore[arg-type]
    result = []
    for j in range(n + 1):
        if j == n:  # the If also makes q (and so the range check) part of the result
            last = elements[j - 1] if n else tensor
            result.append(_if(builder, "Equal", q, j, _copy(tensor), _copy(last)))
            continue

        def at_or_after(branch: Builder, j: int = j) -> ir.Value:
            if j == 0:
                return _copy(tensor)(branch)
            return _if(branch, "Equal", q, j, _copy(tensor), _copy(elements[j - 1]))

        result.append(_if(builder, "Less", q, j, _copy(elements[j]), at_or_after))
    ctx.replace_sequence(node.outputs[0], result, builder)


def _erase_if(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceErase(SequenceConstruct(e0..en-1), p)
    -> SequenceConstruct(If(j < q, e[j], e[j+1]) for j in 0..n-2)"""
    builder = ctx.rewriter.before(node)
    n = len(elements)
    q = _normalized(builder, node.inputs[1], n, shift=False)  # type: ignore[arg-type]
    result = [
        _if(builder, "Less", q, j, _copy(elements[j]), _copy(elements[j + 1])) for j in range(n - 1)
    ]
    ctx.replace_sequence(node.outputs[0], result, builder)


RULES = RuleSet(
    [
        Rule(name, op, check, rewrite, last_resort=True)
        for name, op, check, rewrite in (
            ("insert-at-runtime-position", "SequenceInsert", _check_insert("where"), _insert),
            ("erase-at-runtime-position", "SequenceErase", _check_erase("where"), _erase),
            (
                "insert-at-runtime-position-gather",
                "SequenceInsert",
                _check_insert("gather"),
                _insert_gather,
            ),
            (
                "erase-at-runtime-position-gather",
                "SequenceErase",
                _check_erase("gather"),
                _erase_gather,
            ),
            (
                "insert-at-runtime-position-if-chain",
                "SequenceInsert",
                _check_insert("if"),
                _insert_if,
            ),
            ("erase-at-runtime-position-if-chain", "SequenceErase", _check_erase("if"), _erase_if),
        )
    ]
)
