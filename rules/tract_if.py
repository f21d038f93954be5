"""The outputs of an If that are a constant (or a value from outside) in both branches leave the
If as a Where, for `--target tract` only: tract 0.23.9 may fold an If output whose branches are
different constants to the then-branch's constant, whatever the condition (the probe "If
(different constant per branch)"; seen too in a Scan body whose If computes a row besides).

    y, z = If(c, then: (a = Constant(1), f(..)), else: (b = Constant(2), g(..)))
        -> y = Where(c, 1, 2); z = If(c, then: f(..), else: g(..))
    (a bool y: Or(And(c, a), And(Not(c), b)), onnxruntime having no Where for bool)

`tract-if-to-where` turns a whole If with cheap branches into Wheres; this rule takes what is
left: an If whose other outputs need the If (a branch reading rows only when taken, say). A
TorchScript loop with a `break` exports exactly that: `If(c, then: (false, acc), else: (true,
acc + x[i]))`. Each output taken out has one dtype and one static shape in both branches.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.ops import graphs_within
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.runtime_position import WHERE_TYPES
from seqlower.rules.target_tract import _check_if_to_where, _only_for_tract, _same_shape

_BOOL = ir.DataType.BOOL


def _plain(value: ir.Value, branch: ir.Graph) -> ir.Value | ir.Tensor | None:
    """What a branch output is when it needs no node of the branch: a constant (its tensor) or
    a value from outside the branch; through Identity. Else None."""
    inside = {id(graph) for graph in graphs_within(branch)}
    while True:
        if value.graph is None or id(value.graph) not in inside:
            return value  # defined outside the branch
        node = value.producer()
        if node is None or node.domain != "" or node.graph is not branch:
            return None
        if node.op_type == "Identity" and node.inputs[0] is not None:
            value = node.inputs[0]
            continue
        if node.op_type == "Constant" and "value" in node.attributes:
            return node.attributes["value"].as_tensor()
        return None


def _check(node: ir.Node, ctx: Context) -> list[int] | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    if not isinstance(_check_if_to_where(node, ctx), Refusal):
        return Refusal("the whole If becomes Where (tract-if-to-where)")
    condition = node.inputs[0]
    if condition is None or condition.shape is None or any(d != 1 for d in condition.shape):
        return Refusal("the condition is not known to hold one element")
    branches = [node.attributes[key].as_graph() for key in ("then_branch", "else_branch")]
    taken = []
    for index, (a, b) in enumerate(zip(branches[0].outputs, branches[1].outputs)):
        first, second = _plain(a, branches[0]), _plain(b, branches[1])
        if first is None or second is None or a.dtype != b.dtype:
            continue
        if a.dtype != _BOOL and a.dtype not in WHERE_TYPES:
            continue
        if not _same_shape(a, b) or not isinstance(node.outputs[index].type, ir.TensorType):
            continue
        taken.append(index)
    if not taken:
        return Refusal("no output is a constant or an outer value in both branches")
    if len(taken) == len(node.outputs):
        return Refusal("every output is plain: tract-if-to-where's case")
    return taken


def _outer(builder, plain: ir.Value | ir.Tensor, like: ir.Value) -> ir.Value:  # type: ignore[no-untyped-def]
    if isinstance(plain, ir.Value):
        return plain
    value = builder.op("Constant", [], {"value": plain}, name="branch_value")
    value.type, value.shape = like.type, like.shape
    return value


def _constants_out(node: ir.Node, taken: list[int], ctx: Context) -> None:
    """y = If(c, then: a, else: b), a and b constants or outer values -> Where(c, a, b), the
    If left with its other outputs. --target tract only."""
    builder = ctx.rewriter.before(node)
    branches = [node.attributes[key].as_graph() for key in ("then_branch", "else_branch")]
    condition = node.inputs[0]
    assert condition is not None and condition.shape is not None
    if len(condition.shape) != 0:
        condition = builder.op("Reshape", [condition, builder.ints([], "scalar_shape")])
        condition.type, condition.shape = ir.TensorType(_BOOL), ir.Shape([])
    chosen = {}
    for index in taken:
        a, b = branches[0].outputs[index], branches[1].outputs[index]
        then_value = _outer(builder, _plain(a, branches[0]), a)  # type: ignore[arg-type]
        else_value = _outer(builder, _plain(b, branches[1]), b)  # type: ignore[arg-type]
        if a.dtype == _BOOL:
            kept = builder.op("And", [condition, then_value], name="then_value")
            other = builder.op("Not", [condition], name="else_taken")
            dropped = builder.op("And", [other, else_value], name="else_value")
            result = builder.op("Or", [kept, dropped], name="chosen")
        else:
            result = builder.op("Where", [condition, then_value, else_value], name="chosen")
        result.type, result.shape = node.outputs[index].type, a.shape
        chosen[index] = result
    rest = [i for i in range(len(node.outputs)) if i not in chosen]
    for branch in branches:
        kept_outputs = [branch.outputs[i] for i in rest]
        branch.outputs.clear()
        branch.outputs.extend(kept_outputs)
    attributes = {"then_branch": branches[0], "else_branch": branches[1]}
    outputs = builder.ops("If", [node.inputs[0]], attributes, num_outputs=len(rest), name="rest")
    # the branches move to the new If; dead-code removal knows the new holder and leaves it
    for index, new in zip(rest, outputs):
        old = node.outputs[index]
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)
    for index, result in chosen.items():
        ctx.rewriter.replace(node.outputs[index], result)


RULES = RuleSet([Rule("tract-if-constants-to-where", "If", _check, _constants_out)])
