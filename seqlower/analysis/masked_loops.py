"""Can a `while` loop run as a masked Scan over its bound? (`--target tract`: tract has no Loop.)

A masked Scan runs every iteration up to the loop's trip count M and keeps only what the
iterations before the loop would have stopped give: the iterations after it still compute the
body, on the values the loop stopped with, and their results are dropped. That is right only
when such an iteration cannot fail or blow up. Judged conservatively, from the operators alone:

- M must be a bound: given (a `while` loop with no trip count has none) and, when static, at
  most `MAX_MASKED_ITERATIONS` (PyTorch writes an unbounded `while` as M = 2**63 - 1);
- every carried value keeps its shape (`LoopShapes`; a Scan's state keeps one shape), so every
  body value has the shape it has in an iteration the loop runs, as long as no shape is computed
  from the values the loop changes;
- every body operator is one that cannot fail on such values (`VALUE_SAFE_OPS`: elementwise and
  broadcasting arithmetic, comparisons, reductions over static axes, MatMul...; floating-point
  NaN or infinity is dropped with the iteration), or a positional operator (`POSITION_INPUTS`:
  Gather, Slice, Reshape, Expand, Range...) whose positions, sizes or shapes do not depend on
  the iteration number or the carried values, or an integer Div, Mod or Pow whose divisor
  (exponent) does not.
  A Gather of an outer tensor at the iteration number itself, along an axis whose size is the
  trip count, is safe too: the masked Scan reads the same rows. An If is safe when both of its
  branches are; any other operator with a subgraph (a nested Loop or Scan) is refused.

`masked_scan_problem` returns why a loop fails one of these, or None.
"""

from __future__ import annotations

__all__ = [
    "MAX_MASKED_ITERATIONS",
    "POSITION_INPUTS",
    "VALUE_SAFE_OPS",
    "gathers_at_iteration",
    "masked_scan_problem",
    "zero_trip_problem",
]

import onnx_ir as ir

from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.scan_forms import walks_axis
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, has_subgraph

MAX_MASKED_ITERATIONS = 1 << 16

# operators that cannot fail on the values they see, once their input shapes are those of an
# iteration that runs (floating-point NaN or infinity is not a failure: the iteration is dropped)
VALUE_SAFE_OPS = frozenset(
    {
        *("Identity", "Constant", "Shape", "Size", "Cast", "CastLike", "Transpose", "Flatten"),
        *("Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Sign", "Floor", "Ceil"),
        *("Round", "Not", "Softmax", "LogSoftmax", "Hardmax", "Sqrt", "Log", "Reciprocal"),
        *("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Softplus", "Softsign"),
        *("LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Gelu", "Mish"),
        *("IsNaN", "IsInf", "Clip", "Add", "Sub", "Mul", "Max", "Min", "Sum", "Mean", "Where"),
        *("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"),
        *("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Concat", "MatMul", "Gemm"),
        *("LayerNormalization", "ArgMax", "ArgMin", "PRelu"),
    }
)
# operators whose listed inputs are positions, sizes, shapes or axes: safe when those do not
# change between iterations (None: every input)
POSITION_INPUTS: dict[str, tuple[int, ...] | None] = {
    **dict.fromkeys(("Gather", "GatherElements", "GatherND", "Slice", "Reshape"), (1, 2, 3, 4)),
    **dict.fromkeys(("Expand", "Tile", "Pad", "Split", "TopK", "OneHot", "Resize"), (1, 2, 3)),
    **dict.fromkeys(("Squeeze", "Unsqueeze", "CumSum", "Trilu"), (1,)),
    **dict.fromkeys(("ScatterElements", "ScatterND"), (1,)),
    **dict.fromkeys(
        (
            *("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1"),
            *("ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"),
        ),
        (1,),
    ),
    "Range": None,
    "ConstantOfShape": None,
}
# fail on a zero divisor (or a negative integer exponent), when integer
_INTEGER_DIVISION = frozenset({"Div", "Mod", "Pow"})
_AFTER = "after the loop would have stopped"
_ZERO_TRIP = "where the loop would run zero times"


def masked_scan_problem(node: ir.Node, values: StaticValues) -> str | None:
    """Why Loop `node` cannot run as a masked Scan over its trip count, or None."""
    body = node.attributes["body"].as_graph()
    trip = node.inputs[0] if node.inputs else None
    if trip is None:
        return "a while loop with no trip count: there is no bound to scan over"
    count = values.get_int(trip)
    if count is not None and count > MAX_MASKED_ITERATIONS:
        return (
            f"a while loop whose only bound is its trip count {count}: too many iterations to "
            f"run each one masked (at most {MAX_MASKED_ITERATIONS})"
        )
    kept = set(LoopShapes(node, values).invariant_carried())
    for value in body.inputs[2:]:
        if value not in kept:
            return (
                f"the carried value '{value.name}' may change shape between iterations: a "
                "Scan's state keeps one shape"
            )
    walked = _walked(node, values)
    changing = {id(value) for value in body.inputs}
    return _graph_problem(body, changing, walked, _AFTER)


def zero_trip_problem(node: ir.Node) -> str | None:
    """Why the body of Loop `node` may fail when it runs once, at iteration number 0 on the
    initial carried values, where the Loop would run zero times; None when it cannot (the
    same operator rules as `masked_scan_problem`, with no Gather at the iteration number
    exempt: along a dim that is the trip count 0, row 0 does not exist).

        Loop(M, true, s, body: (i, c, s) -> (c, s + x[i]))  with M = 0: x has no row 0
    """
    body = node.attributes["body"].as_graph()
    return _graph_problem(body, {id(value) for value in body.inputs}, set(), _ZERO_TRIP)


def gathers_at_iteration(node: ir.Node, values: StaticValues) -> list[ir.Node]:
    """The Gathers of Loop `node`'s body that read an outer tensor at the iteration number
    along an axis whose size is the trip count."""
    body = node.attributes["body"].as_graph()
    walked = _walked(node, values)
    return [use.node for use in body.inputs[0].uses() if id(use.node) in walked]


def _walked(node: ir.Node, values: StaticValues) -> set[int]:
    body = node.attributes["body"].as_graph()
    trip = node.inputs[0]
    found = set()
    for use in body.inputs[0].uses():
        gather = use.node
        data = gather.inputs[0]
        if gather.op_type != "Gather" or gather.domain != "" or use.idx != 1:
            continue
        if data is None or data.graph is body or data.shape is None or not len(data.shape):
            continue
        axis = gather.attributes.get_int("axis", 0) % len(data.shape)
        if _is_dim(trip, data, axis, values):
            found.add(id(gather))
    return found


def _is_dim(trip: ir.Value | None, data: ir.Value, axis: int, values: StaticValues) -> bool:
    """True when `trip` is the size of `data`'s dim `axis`."""
    return trip is not None and walks_axis(trip, data, axis, values)


def _graph_problem(graph: ir.Graph, changing: set[int], walked: set[int], when: str) -> str | None:
    """The first node of `graph` that may fail `when` (after the loop would have stopped, or
    where it would run zero times). `changing` holds the ids of the values that change between
    iterations; it grows with `graph`'s."""
    for node in graph_nodes(graph):
        problem = _node_problem(node, changing, walked, when)
        if problem:
            return f"the body computes {problem}"
        reads = [v for v in node.inputs if v is not None and id(v) in changing]
        if reads or has_subgraph(node):
            changing.update(id(v) for v in node.outputs)
    return None


def _node_problem(node: ir.Node, changing: set[int], walked: set[int], when: str) -> str | None:
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return f"{node.domain}::{op}, which may fail {when}"
    if op == "If":
        for key in ("then_branch", "else_branch"):
            problem = _graph_problem(node.attributes[key].as_graph(), changing, walked, when)
            if problem:
                return problem.removeprefix("the body computes ")
        return None
    if has_subgraph(node):
        return f"a {op} with a subgraph, which may fail {when}"
    if op in VALUE_SAFE_OPS:
        return None
    if op in _INTEGER_DIVISION:
        divisor = node.inputs[1] if len(node.inputs) > 1 else None
        if not _all_float(node) and divisor is not None and id(divisor) in changing:
            return (
                f"{op} '{node.name}' of integers by a value that changes between iterations, "
                f"which may fail {when}"
            )
        return None
    if op in POSITION_INPUTS:
        if id(node) in walked:
            return None
        indices = POSITION_INPUTS[op]
        positions = range(len(node.inputs)) if indices is None else indices
        for index in positions:
            value = node.inputs[index] if index < len(node.inputs) else None
            if value is not None and id(value) in changing:
                return (
                    f"{op} '{node.name}' at positions or sizes that change between iterations "
                    f"(input '{value.name}'), which may fail {when}"
                )
        return None
    return f"{op} '{node.name}', which may fail {when}"


def _all_float(node: ir.Node) -> bool:
    return all(
        v is not None and v.dtype is not None and v.dtype.is_floating_point() for v in node.inputs
    )
