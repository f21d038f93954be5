"""An If in a Loop body that only picks one of two small tensors is a Where: both are computed.

    If(c, then: t = f(..), else: e = g(..))  -> Where(c, f(..), g(..))     (in a Loop body)

PyTorch's `if t.sum() > 0: outs.append(t) else: outs.append(-t)` in a loop leaves such an If once
the append leaves its branches (`if-append-both-branches`); as a Where the loop body has no
subgraph left, and `loop-batch` can apply it to all the elements at once. An If costs a subgraph
call per iteration, more than a small elementwise operator.

Both branches then run every time, so each must be unable to fail or to differ in shape: at most
`MAX_BRANCH_NODES` nodes of elementwise operators that fail on no value (`UNARY`, `BINARY`;
Div on floats only), each reading values of fully static shapes that broadcast together; the two
results have one static shape and one element type that onnxruntime's Where takes (`SELECTABLE`),
and the condition is a scalar. An If elsewhere is left alone (outside a loop it runs once, and
skipping a branch may save more than the call costs).

A scalar flag chosen by an If is logic on the condition (`if-to-logic`): onnxruntime has no
Where for bools, but it needs none.

    If(c, then: false, else: true)           -> Not(c)          (anywhere: no branch to run)
    If(c, then: true,  else: false)          -> c
    If(c, then: t = f(..), else: false)      -> And(c, f(..))   (in a Loop body, as above)
    If(c, then: true,  else: e = g(..))      -> Or(c, g(..))
    If(c, then: t, else: e)                  -> Or(And(c, t), And(Not(c), e))

TorchScript writes `if tok == end: break` as such an If (`cond = If(tok == end, false, true)`),
and `if a and b` as an If whose else branch is false.
"""

from __future__ import annotations

__all__ = ["RULES"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.scan_forms import static_bool
from seqlower.inline import inline_graph
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet

MAX_BRANCH_NODES = 4
UNARY = frozenset(
    {
        "Abs", "Ceil", "Cos", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "Identity", "IsInf",
        "IsNaN", "LeakyRelu", "Neg", "Not", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin",
        "Softplus", "Softsign", "Tanh",
    }
)  # fmt: skip
BINARY = frozenset(
    {
        "Add", "And", "Div", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max",
        "Min", "Mul", "Or", "Sub", "Xor",
    }
)  # fmt: skip
_FLOATS = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
# Where's element types in every supported onnxruntime release (1.32 has no bool Where: probed)
SELECTABLE = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT8}
)


def _static_dims(value: ir.Value) -> tuple[int, ...] | None:
    shape = value.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(shape)  # type: ignore[arg-type]


def _branch_refusal(branch: ir.Graph) -> str | None:
    """Why computing `branch` every time could fail or cost much, or None."""
    if len(branch.inputs) != 0 or len(branch.outputs) != 1:
        return "a branch has inputs or more than one output"
    if len(branch) > MAX_BRANCH_NODES:
        return f"a branch has more than {MAX_BRANCH_NODES} nodes"
    for node in branch:
        if node.op_type == "Constant" and node.domain == "":
            continue
        if node.domain != "" or node.op_type not in UNARY | BINARY:
            return f"branch op {node.op_type} may fail or is not elementwise"
        shapes = [_static_dims(v) if v is not None else None for v in node.inputs]
        if any(shape is None for shape in shapes):
            return f"branch op {node.op_type} reads a value of a shape not fully static"
        try:
            np.broadcast_shapes(*shapes)  # type: ignore[arg-type]
        except ValueError:
            return f"branch op {node.op_type} reads shapes that do not broadcast"
        if node.op_type == "Div" and node.inputs[0].dtype not in _FLOATS:  # type: ignore[union-attr]
            return "an integer Div may divide by zero"
    return None


def _in_loop_body(node: ir.Node, ctx: Context) -> bool:
    return node.graph is not None and ctx.facts.is_loop_body(node.graph)


def _branches_of_scalar_choice(node: ir.Node) -> tuple[ir.Graph, ir.Graph] | Refusal:
    """The then and else branches of an If whose condition is a scalar, else why not."""
    cond = node.inputs[0]
    if cond is None or cond.shape is None or len(cond.shape) != 0:
        return Refusal("the condition is not known to be a scalar")
    return (
        node.attributes["then_branch"].as_graph(),
        node.attributes["else_branch"].as_graph(),
    )


def _check(node: ir.Node, ctx: Context) -> tuple[ir.Graph, ir.Graph] | Refusal:
    if not _in_loop_body(node, ctx):
        return Refusal("the If is not in a Loop body: it runs once where it is")
    if len(node.outputs) != 1 or not isinstance(node.outputs[0].type, ir.TensorType):
        return Refusal("the If gives more than one value, or not a tensor")
    branches = _branches_of_scalar_choice(node)
    if isinstance(branches, Refusal):
        return branches
    for branch in branches:
        why = _branch_refusal(branch)
        if why is not None:
            return Refusal(why)
    results = [branch.outputs[0] for branch in branches]
    shapes = {_static_dims(v) for v in results}
    dtypes = {v.dtype for v in results}
    if len(shapes) != 1 or None in shapes or len(dtypes) != 1 or None in dtypes:
        return Refusal("the branches' results do not share one static shape and element type")
    if not dtypes <= SELECTABLE:
        return Refusal(f"onnxruntime has no Where for {results[0].dtype.name} tensors")  # type: ignore[union-attr]
    return branches


def _select(node: ir.Node, branches: tuple[ir.Graph, ir.Graph], ctx: Context) -> None:
    """If(c, then: f(..), else: g(..)) -> Where(c, f(..), g(..))"""
    builder = ctx.rewriter.before(node)
    picked = [inline_graph(branch, [], builder, f"{builder.hint}_{key}")[0] for branch, key in
              zip(branches, ("then", "else"))]  # fmt: skip
    result = builder.op("Where", [node.inputs[0], *picked], name="selected")
    result.type, result.shape = picked[0].type, picked[0].shape
    ctx.rewriter.replace(node.outputs[0], result)


def _check_flag(node: ir.Node, ctx: Context) -> tuple[ir.Graph, ir.Graph] | Refusal:
    if len(node.outputs) != 1 or node.outputs[0].dtype != ir.DataType.BOOL:
        return Refusal("the If does not give one bool")
    branches = _branches_of_scalar_choice(node)
    if isinstance(branches, Refusal):
        return branches
    computed = False
    for branch in branches:
        if len(branch.inputs) != 0 or len(branch.outputs) != 1:
            return Refusal("a branch has inputs or more than one output")
        if _static_dims(branch.outputs[0]) != ():
            return Refusal("a branch's result is not known to be a scalar")
        if _constant_flag(branch, ctx) is None:
            why = _branch_refusal(branch)
            if why is not None:
                return Refusal(why)
            computed = True
    if computed and not _in_loop_body(node, ctx):
        return Refusal("a branch computes its flag and the If is not in a Loop body")
    return branches


def _constant_flag(branch: ir.Graph, ctx: Context) -> bool | None:
    """The value of a branch that returns a constant scalar bool, else None."""
    return static_bool(branch.outputs[0], ctx.facts.values)


def _flag(node: ir.Node, branches: tuple[ir.Graph, ir.Graph], ctx: Context) -> None:
    """If(c, then: false, else: true) -> Not(c); If(c, then: t, else: false) -> And(c, t);
    If(c, then: true, else: e) -> Or(c, e) (scalar bools)"""
    builder = ctx.rewriter.before(node)
    cond = node.inputs[0]
    assert cond is not None
    then_flag, else_flag = (_constant_flag(branch, ctx) for branch in branches)

    def computed(index: int) -> ir.Value:
        key = ("then", "else")[index]
        return inline_graph(branches[index], [], builder, f"{builder.hint}_{key}")[0]

    def negated() -> ir.Value:
        return builder.op("Not", [cond], name="negated")

    if then_flag is not None and else_flag is not None:
        result = _both_constant(builder, cond, then_flag, else_flag)
    elif then_flag is not None:  # c ? const : e
        e = computed(1)
        result = builder.op("Or", [cond, e]) if then_flag else builder.op("And", [negated(), e])
    elif else_flag is not None:  # c ? t : const
        t = computed(0)
        result = builder.op("Or", [negated(), t]) if else_flag else builder.op("And", [cond, t])
    else:
        t, e = computed(0), computed(1)
        picked = builder.op("And", [cond, t]), builder.op("And", [negated(), e])
        result = builder.op("Or", list(picked))
    result.type, result.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    ctx.rewriter.replace(node.outputs[0], result)


def _both_constant(builder: Builder, cond: ir.Value, then_flag: bool, else_flag: bool) -> ir.Value:
    if then_flag == else_flag:
        return builder.constant(np.array(then_flag), "flag")
    if then_flag:
        return builder.op("Identity", [cond], name="flag")
    return builder.op("Not", [cond], name="flag")


RULES = RuleSet(
    [Rule("if-to-where", "If", _check, _select), Rule("if-to-logic", "If", _check_flag, _flag)]
)
