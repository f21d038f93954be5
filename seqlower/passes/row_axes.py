"""A leading axis of one made by the operators that compute a value, not by an Unsqueeze after.

    v = Gather(data, i)                          v = Gather(data, [i])          (i a constant)
    c = Concat(v, w, axis=-1)                    c = Concat(v, w', axis=-1)
    m = MatMul(c, W)                       ->    m = MatMul(c, W)               (W of rank <= 2)
    a = Add(b, m)                                a = Add(b, m)                  (b of lower rank)
    t = Tanh(a)                                  t = Tanh(a)
    row = Unsqueeze(t, [0])                      (row's readers read t)

A list kept as one stacked tensor takes a pushed element as a row: the lowered push is
`Concat(data, Unsqueeze(x, [0]))`, one launch per push on top of what computes x. Where every
operator between the Unsqueeze and the places x's data comes from keeps its meaning with a
leading axis of one on its input (element-wise operators, broadcasting ones whose other inputs
have a lower rank, a MatMul by a matrix, a Concat), and every such place can give that axis for
nothing (a Gather at a constant index reads `[i]` instead, a Reshape or Unsqueeze to constant
dims makes one dim more), the axis is made there and the Unsqueeze goes. onnxruntime then also
runs a MatMul of a `[1, k]` row and an Add as one Gemm, where for a 1-D vector it puts a Reshape
before and after it. Each value on the way must be read by the next operator alone (it changes
shape) and not be an output of its graph; otherwise nothing changes. A producer may sit in a
graph that holds the Unsqueeze's (a value made before an If and pushed in one branch).
"""

from __future__ import annotations

__all__ = ["fold_row_axes"]

from collections.abc import Generator, Sequence

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.passes.new_constants import int64_constant_before
from seqlower.uses import use_count

_UNARY = frozenset(
    {
        "Abs", "Acos", "Asin", "Atan", "Ceil", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor",
        "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Neg",
        "Not", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh",
        "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Gelu", "Mish", "Celu",
    }
)  # fmt: skip
_BROADCASTING = frozenset(
    {
        "Add", "And", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
        "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Min", "Mul", "Or", "Pow", "PRelu",
        "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip


def fold_row_axes(model: ir.Model) -> int:
    """Remove every Unsqueeze on axis 0 whose axis the producers can make (module docstring);
    returns how many."""
    values = StaticValues(model.opset_imports.get(""))
    names: set[str | None] = set()  # every output name, gathered at the first fold
    folded = 0
    replaced: list[ir.Node] = []  # the producers of constants read no more, maybe
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            source = _leading_unsqueeze(node, values)
            if source is None:
                continue
            plan: list[ir.Node] = []
            if not _plan(source, node, values, plan):
                continue
            names = names or {v.name for g in iter_all_graphs(model) for n in g for v in n.outputs}
            for producer in plan:
                replaced.extend(_producers(producer.inputs[1:]))
                _rewrite(producer, values, names)
            replaced.extend(_producers(node.inputs[1:]))
            for value in _changed_values(plan):
                shape = value.shape
                if shape is not None:
                    value.shape = ir.Shape([1, *shape])
            node.outputs[0].replace_all_uses_with(source)
            graph.remove(node, safe=True)
            folded += 1
    if replaced:
        remove_dead_upstream(replaced)
    return folded


def _producers(inputs: Sequence[ir.Value | None]) -> list[ir.Node]:
    return [
        producer
        for value in inputs
        if value is not None and (producer := value.producer()) is not None
    ]


def _leading_unsqueeze(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """x, when `node` is Unsqueeze(x, [0]) (or the axis counted from the end) of a known rank."""
    if node.op_type != "Unsqueeze" or node.domain != "" or not node.inputs:
        return None
    source = node.inputs[0]
    if source is None or source.shape is None or node.outputs[0].is_graph_output():
        return None
    axes = _axes(node, values)
    return source if axes in ([0], [-len(source.shape) - 1]) else None


def _axes(node: ir.Node, values: StaticValues) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return values.get_ints(node.inputs[1])
    axes = node.attributes.get_ints("axes", None)
    return None if axes is None else list(axes)


# A plan walks back through the operators that compute the unsqueezed value, one frame per
# operator: chains of thousands of them are legal, so the walk keeps its own stack (`_run`)
# instead of Python's. Each step is a generator that yields (value, reader) for every walk it
# needs and is sent that walk's answer, in the order a recursive walk would take.
_Step = Generator[tuple[ir.Value, ir.Node], bool, bool]


def _plan(value: ir.Value, reader: ir.Node, values: StaticValues, plan: list[ir.Node]) -> bool:
    """Whether `value` can be given a leading axis of one for nothing; the producers to change
    are appended to `plan`."""
    stack = [_plan_step(value, reader, values, plan)]
    answer: bool | None = None
    while stack:
        try:
            request = stack[-1].send(answer)  # type: ignore[arg-type]
        except StopIteration as done:
            stack.pop()
            answer = done.value
            continue
        stack.append(_plan_step(*request, values, plan))
        answer = None
    return bool(answer)


def _plan_step(
    value: ir.Value, reader: ir.Node, values: StaticValues, plan: list[ir.Node]
) -> _Step:
    """One frame of `_plan`: yields each input's walk, returns whether `value` can take the axis."""
    producer = value.producer()
    if (
        producer is None
        or producer.domain != ""
        or value.shape is None
        or value.is_graph_output()
        or len(producer.outputs) != 1
        or any(use.node is not reader for use in value.uses())
        or use_count(value) != 1
    ):
        return False
    rank = len(value.shape)
    op = producer.op_type
    start = len(plan)
    if op in ("Gather", "Reshape", "Unsqueeze"):
        ok = _absorbs(producer, values)
    elif op in _UNARY or op == "Cast":
        ok = producer.inputs[0] is not None and (yield producer.inputs[0], producer)
    elif op in _BROADCASTING:
        ok = yield from _plan_broadcasting(producer, rank)
    elif op == "MatMul":
        ok = yield from _plan_matmul(producer)
    elif op == "Concat":
        ok = True
        for part in producer.inputs:
            if part is None or not (yield part, producer):
                ok = False
                break
    else:
        ok = False
    if ok:
        plan.append(producer)
    else:
        del plan[start:]  # what an input planned before another failed
    return ok


def _plan_broadcasting(node: ir.Node, rank: int) -> _Step:
    """One input of the output's rank that gets the axis is enough: the others broadcast as
    they did (numpy's broadcasting aligns dims from the end)."""
    parts = [part for part in node.inputs]
    if any(part is None or part.shape is None for part in parts):
        return False
    for part in parts:
        assert part is not None and part.shape is not None
        if len(part.shape) == rank and (yield part, node):
            return True
    return False


def _plan_matmul(node: ir.Node) -> _Step:
    """MatMul(x, W) with W of rank 1 or 2: a leading axis of x is a leading axis of the result."""
    if len(node.inputs) != 2:
        return False
    left, right = node.inputs
    if left is None or right is None or left.shape is None or right.shape is None:
        return False
    if len(left.shape) < 1 or len(right.shape) not in (1, 2) or left is right:
        return False
    return (yield left, node)


def _absorbs(node: ir.Node, values: StaticValues) -> bool:
    """Whether `node` can make a leading axis of one by changing constants only."""
    if node.op_type == "Gather":
        if node.attributes.get_int("axis", 0) != 0 or len(node.inputs) != 2:
            return False
        index = values.get(node.inputs[1])
        return index is not None and index.ndim == 0
    if node.op_type == "Reshape":
        if node.attributes.get_int("allowzero", 0) != 0 or len(node.inputs) != 2:
            return False
        target = values.get(node.inputs[1])
        return target is not None and target.ndim == 1 and not np.any(target == 0)
    out = node.outputs[0]
    axes = _axes(node, values)
    return axes is not None and out.shape is not None and bool(node.inputs)


def _rewrite(node: ir.Node, values: StaticValues, names: set[str]) -> None:
    """Change one planned producer so that its output has the leading axis."""
    op = node.op_type
    if op == "Concat":
        axis = node.attributes.get_int("axis", 0)
        if axis >= 0:
            node.attributes["axis"] = ir.AttrInt64("axis", axis + 1)
    elif op == "Gather":
        index = values.get(node.inputs[1])
        assert index is not None  # checked by _absorbs
        node.replace_input_with(1, int64_constant_before(node, index.reshape(1), names, "_row"))
    elif op == "Reshape":
        target = values.get(node.inputs[1])
        assert target is not None
        node.replace_input_with(
            1, int64_constant_before(node, np.concatenate([[1], target]), names, "_row")
        )
    elif op == "Unsqueeze":
        rank = len(node.outputs[0].shape or ())
        axes = _axes(node, values) or []
        moved = [1 + (a if a >= 0 else a + rank) for a in axes]
        array = np.array([0, *moved], dtype=np.int64)
        if len(node.inputs) > 1 and node.inputs[1] is not None:
            node.replace_input_with(1, int64_constant_before(node, array, names, "_row"))
        else:
            node.attributes["axes"] = ir.AttrInt64s("axes", [int(a) for a in array])


def _changed_values(plan: list[ir.Node]) -> list[ir.Value]:
    return [node.outputs[0] for node in plan]
