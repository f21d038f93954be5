"""Move the operators of a Loop or Scan body that compute the same value on every iteration
out of the body, in front of the Loop or Scan.

    Loop(n, c, h) {                           wx = Gemm(x, W, b)
      wx = Gemm(x, W, b)           ->         Loop(n, c, h) {
      y = Add(wx, Gemm(h', U, d))               y = Add(wx, Gemm(h', U, d))   (reads the outer wx)
    }                                         }

Exports leave them in bodies (a `Linear` of an input inside a `while` loop, a Slice of a constant
range of an input, the areas of all boxes in a suppression loop), and lowering's own index
arithmetic may leave some; onnxruntime runs each
once per iteration (about 0.2 microseconds a launch). A node moves when it is an operator of
`HOISTABLE` in the standard domain (deterministic, no subgraph) and everything it reads is
defined outside the body: an outer value, or a Constant of the body, which moves with it
(the body's other readers then read it from the outer scope). What a moved node computes is
read by the body from the outer scope. Bodies are handled innermost first, so that a value
invariant in two nested loops leaves both.

A moved node also runs when the loop runs zero times, so it must not fail where the body would
not have run: only operators that cannot fail on well-typed inputs whose shapes fit move, and
only when the shapes they read are known and fit (equal dims, or dims of 1 that broadcast),
never an integer division, nor a Cast from strings; reductions only where an empty input has
a value (sums, products, means, norms) over axes within the known rank; Range only with a
constant step that is not 0; ConstantOfShape only of a Shape (one of constant dims is a
constant, left where it is, as a Constant is).
A Loop that surely runs its first iteration (a constant trip count of at least 1 or none,
a constant true condition or none: a TorchScript `while` loop entered unconditionally, an
RNN-T decoder's steps for one frame) runs every node at the top of its body at least once:
there any deterministic operator moves, whatever it may fail on, since the body would fail on
the same inputs in its first iteration (the Slice of the frame the inner loop reads, at a
run-time position).
`SINKABLE` adds, for `sink_into_branches` only, Unsqueeze by constant axes within the rank and
CumSum along a constant axis within the rank, of a type onnxruntime takes.
Nothing that is a body's output moves.
"""

from __future__ import annotations

__all__ = ["HOISTABLE", "SINKABLE", "hoist_loop_invariants", "is_constant_fill"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, is_sequence_op, same_dim, subgraphs

# element-wise operators of one input: they cannot fail on a value of their type
_UNARY = frozenset(
    {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos", "Cosh",
        "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN",
        "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu",
        "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
        "ThresholdedRelu",
    }
)  # fmt: skip
# element-wise operators with broadcasting: they fail only when the shapes do not broadcast
_BROADCAST = frozenset(
    {
        "Add", "And", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max",
        "Mean", "Min", "Mul", "Or", "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip
# the same, for floating-point inputs only (an integer division by zero fails)
_FLOAT_BROADCAST = frozenset({"Div", "Pow"})
_FLOATS = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
_SHAPE_READERS = frozenset({"Shape", "Size"})
# reductions that give a value for an empty set too (0, 1, NaN), over axes within the rank
_REDUCTIONS = frozenset(
    {"ReduceL1", "ReduceL2", "ReduceMean", "ReduceProd", "ReduceSum", "ReduceSumSquare"}
)

HOISTABLE = (
    _UNARY | _BROADCAST | _FLOAT_BROADCAST | _SHAPE_READERS | _REDUCTIONS
    | {"Cast", "ConstantOfShape", "Gemm", "MatMul", "Range", "Slice", "Transpose"}
)  # fmt: skip
# operators whose result is not a function of their inputs: they never move
_RANDOM = frozenset(
    {
        "Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike",
        "RandomUniform", "RandomUniformLike",
    }
)  # fmt: skip
# what may also enter the one If branch that reads it (`sink_into_branches`): a ragged list's
# bounds (a CumSum of its row counts, unsqueezed) read only where an element is assigned
SINKABLE = HOISTABLE | {"CumSum", "Unsqueeze"}
# the types onnxruntime's CumSum kernel takes
_CUMSUM_TYPES = frozenset(
    {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.FLOAT, ir.DataType.DOUBLE}
)


def hoist_loop_invariants(model: ir.Model) -> int:
    """Move every loop-invariant node that may move (see the module docstring) out of its
    Loop or Scan body, innermost bodies first; returns how many nodes moved (the Constants that
    moved with them not counted)."""
    moved = _hoist_in(model.graph)
    for function in model.functions.values():
        moved += _hoist_in(function.graph)
    return moved


def _hoist_in(graph: ir.Graph) -> int:
    moved = 0
    for node in list(graph_nodes(graph)):
        for inner in subgraphs(node):
            moved += _hoist_in(inner)
        if node.domain == "" and node.op_type in ("Loop", "Scan"):
            body = node.attributes.get("body")
            if body is not None and body.type == ir.AttributeType.GRAPH and not body.is_ref():
                moved += _hoist_body(graph, node, body.as_graph())
    return moved


def _hoist_body(graph: ir.Graph, loop: ir.Node, body: ir.Graph) -> int:
    """Move the invariant nodes of `body` (in order) in front of `loop` in `graph`."""
    inside = {*body.inputs, *body.initializers.values()}
    outputs = set(body.outputs)
    runs = loop.op_type == "Loop" and _runs_first_iteration(loop)
    moved = 0
    for node in list(body):
        if not _may_move(node, inside, outputs, runs):
            inside.update(node.outputs)
            continue
        for value in node.inputs:  # the body's Constants it reads move first
            producer = value.producer() if value is not None else None
            if producer is not None and producer.graph is body and producer.op_type == "Constant":
                if any(out in outputs for out in producer.outputs):
                    continue  # not reached: _may_move refused it
                body.remove(producer)
                graph.insert_before(loop, producer)
                inside.difference_update(producer.outputs)
        body.remove(node)
        graph.insert_before(loop, node)
        moved += 1
    return moved


def is_constant_fill(node: ir.Node) -> bool:
    """A ConstantOfShape of a constant shape: a constant as a Constant is (runtimes fold it),
    left where it is as a Constant is (the OpenVINO workarounds make empty constants so)."""
    if node.op_type != "ConstantOfShape" or node.domain != "" or not node.inputs:
        return False
    shape = node.inputs[0]
    producer = shape.producer() if shape is not None else None
    if producer is None:
        return shape is not None and shape.const_value is not None and not shape.is_graph_input()
    return producer.op_type == "Constant" and producer.domain == ""


def _runs_first_iteration(loop: ir.Node) -> bool:
    """Whether Loop `loop` surely runs its first iteration: its trip count is absent or a
    constant of at least 1, its condition absent or a constant true."""
    count = loop.inputs[0] if loop.inputs else None
    cond = loop.inputs[1] if len(loop.inputs) > 1 else None
    if count is not None:
        array = _constant(count)
        if array is None or array.size != 1 or int(array.reshape(-1)[0]) < 1:
            return False
    if cond is not None:
        array = _constant(cond)
        if array is None or array.size != 1 or not bool(array.reshape(-1)[0]):
            return False
    return True


def _may_move(
    node: ir.Node, inside: set[ir.Value], outputs: set[ir.Value], runs: bool = False
) -> bool:
    """Whether `node` is invariant in its body and may run outside it (module docstring).
    `runs`: the loop surely runs its first iteration, so any deterministic tensor operator
    may move."""
    if node.domain != "" or subgraphs(node):
        return False
    if node.op_type not in HOISTABLE and not (runs and _deterministic(node)):
        return False
    if is_constant_fill(node):
        return False
    if not node.inputs or any(out in outputs for out in node.outputs):
        return False
    for value in node.inputs:
        if value is None:
            continue
        if value in inside:
            producer = value.producer()
            if producer is None or producer.op_type != "Constant" or producer.domain != "":
                return False
            if any(out in outputs for out in producer.outputs):
                return False
    return (runs and _deterministic(node)) or _cannot_fail(node)


def _deterministic(node: ir.Node) -> bool:
    """A tensor operator whose result is a function of its inputs (no random operator, no
    sequence or optional operator: those are the lowering's to rewrite)."""
    if node.op_type in _RANDOM or node.op_type == "Constant" or is_sequence_op(node):
        return False
    return not node.op_type.startswith("Optional")


def _cannot_fail(node: ir.Node) -> bool:
    op, inputs = node.op_type, node.inputs
    if op in _UNARY or op in _SHAPE_READERS:
        return True
    if op == "Cast":
        source = inputs[0]
        return source is not None and source.dtype not in (None, ir.DataType.STRING)
    if op in _FLOAT_BROADCAST:
        if any(v is None or v.dtype not in _FLOATS for v in inputs):
            return False
        return _broadcasts([v.shape for v in inputs])  # type: ignore[union-attr]
    if op in _BROADCAST:
        return all(v is not None for v in inputs) and _broadcasts([v.shape for v in inputs])  # type: ignore[union-attr]
    if op == "Transpose":
        return _transposes(node)
    if op == "MatMul":
        return _multiplies(inputs[0], inputs[1], False, False, None)
    if op == "Gemm":
        trans_a = node.attributes.get_int("transA", 0) == 1
        trans_b = node.attributes.get_int("transB", 0) == 1
        bias = inputs[2] if len(inputs) > 2 else None
        return _multiplies(inputs[0], inputs[1], trans_a, trans_b, bias)
    if op == "Slice":
        return _slices(node)
    if op in _REDUCTIONS:
        return _reduces(node)
    if op == "Unsqueeze":
        return _unsqueezes(node)
    if op == "CumSum":
        return _cumsums(node)
    if op == "Range":  # a constant step that is not 0, scalar bounds
        step = _constant(inputs[2]) if len(inputs) > 2 else None
        bounds = inputs[:2]
        if step is None or step.size != 1 or step.reshape(-1)[0] == 0:
            return False
        return all(v is not None and v.shape is not None and len(v.shape) == 0 for v in bounds)
    if op == "ConstantOfShape":  # a shape read from a value, or constant dims that are >= 0
        dims = inputs[0] if inputs else None
        if dims is None:
            return False
        producer = dims.producer()
        if producer is not None and producer.op_type == "Shape" and producer.domain == "":
            return True
        array = _constant(dims)
        return array is not None and array.ndim == 1 and bool((array >= 0).all())
    return False


def _unsqueezes(node: ir.Node) -> bool:
    """An Unsqueeze of a value of known rank by constant axes (an input, or the attribute of
    opsets before 13) within the result's rank, none repeated."""
    data = node.inputs[0]
    if data is None or data.shape is None:
        return False
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        array = _constant(node.inputs[1])
        if array is None:
            return False
        axes = [int(a) for a in array.reshape(-1)]
    else:
        axes = list(node.attributes.get_ints("axes", []))
    rank = len(data.shape) + len(axes)
    if not axes or any(not -rank <= a < rank for a in axes):
        return False
    return len({a % rank for a in axes}) == len(axes)


def _cumsums(node: ir.Node) -> bool:
    """A CumSum along a constant axis within the known rank (at least 1), of a type
    onnxruntime's kernel takes."""
    data = node.inputs[0]
    axis = _constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if data is None or data.shape is None or data.dtype not in _CUMSUM_TYPES or axis is None:
        return False
    rank = len(data.shape)
    return rank >= 1 and axis.size == 1 and -rank <= int(axis.reshape(-1)[0]) < rank


def _reduces(node: ir.Node) -> bool:
    """A reduction over constant axes (an attribute, or a constant input) within the known
    rank, none repeated, or over all axes."""
    data = node.inputs[0]
    if data is None or data.shape is None:
        return False
    axes: list[int] | None = None
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        array = _constant(node.inputs[1])
        if array is None:
            return False
        axes = [int(a) for a in array.reshape(-1)]
    elif "axes" in node.attributes:
        axes = list(node.attributes.get_ints("axes", []))
    rank = len(data.shape)
    if not axes:
        return True
    if any(not -rank <= a < rank for a in axes):
        return False
    return len({a % rank for a in axes}) == len(axes)


def _broadcasts(shapes: list[ir.Shape | None]) -> bool:
    """Whether shapes known in full surely broadcast together (numpy's rules)."""
    if any(shape is None for shape in shapes):
        return False
    rank = max(len(shape) for shape in shapes)  # type: ignore[arg-type]
    for axis in range(1, rank + 1):
        dims = [shape[-axis] for shape in shapes if len(shape) >= axis]  # type: ignore[arg-type]
        wide = [d for d in dims if d != 1]
        if any(not same_dim(wide[0], d) for d in wide[1:]):
            return False
        if wide and not isinstance(wide[0], (int, ir.SymbolicDim)):
            return False
        if wide and isinstance(wide[0], ir.SymbolicDim) and wide[0].value is None:
            return False
    return True


def _multiplies(
    a: ir.Value | None, b: ir.Value | None, trans_a: bool, trans_b: bool, bias: ir.Value | None
) -> bool:
    """Whether a matrix product of `a` and `b` (MatMul's, or Gemm's with its transposes and
    bias) surely fits the shapes."""
    if a is None or b is None or a.shape is None or b.shape is None:
        return False
    sa, sb = list(a.shape), list(b.shape)
    gemm = trans_a or trans_b or bias is not None
    if gemm and (len(sa) != 2 or len(sb) != 2):
        return False
    if len(sa) < 2 or len(sb) < 2:
        return False  # MatMul's 1-D promotions: not worth the cases
    if trans_a:
        sa = [sa[1], sa[0]]
    if trans_b:
        sb = [sb[1], sb[0]]
    if not same_dim(sa[-1], sb[-2]):
        return False
    if not _broadcasts([ir.Shape(sa[:-2]), ir.Shape(sb[:-2])]):
        return False
    if bias is None:
        return True
    if bias.shape is None or len(bias.shape) > 2:
        return False
    result = [sa[-2], sb[-1]]
    bias_dims = list(bias.shape)
    return all(d == 1 or same_dim(d, r) for d, r in zip(reversed(bias_dims), reversed(result)))


def _transposes(node: ir.Node) -> bool:
    data = node.inputs[0]
    if data is None or data.shape is None:
        return False
    perm = node.attributes.get_ints("perm", None)
    return perm is None or sorted(perm) == list(range(len(data.shape)))


def _slices(node: ir.Node) -> bool:
    """A Slice with constant bounds, axes within the known rank, and no zero step: it clamps
    its bounds and cannot fail."""
    data = node.inputs[0]
    if data is None or data.shape is None or len(node.inputs) < 3:
        return False
    arrays = [_constant(v) for v in node.inputs[1:]]
    if any(array is None for array in arrays[:2]) or any(
        v is not None and array is None for v, array in zip(node.inputs[1:], arrays)
    ):
        return False
    starts, ends = arrays[0], arrays[1]
    if starts.ndim != 1 or ends.shape != starts.shape:  # type: ignore[union-attr]
        return False
    count, rank = starts.shape[0], len(data.shape)  # type: ignore[union-attr]
    axes = arrays[2] if len(arrays) > 2 and arrays[2] is not None else list(range(count))
    steps = arrays[3] if len(arrays) > 3 and arrays[3] is not None else [1] * count
    if len(axes) != count or len(steps) != count or any(int(s) == 0 for s in steps):
        return False
    if any(not -rank <= int(a) < rank for a in axes):
        return False
    return len({int(a) % rank for a in axes}) == count


def _constant(value: ir.Value | None):  # type: ignore[no-untyped-def]
    """The numpy content of a constant input (a Constant node's, or an initializer's that no
    caller can override), else None."""
    if value is None:
        return None
    producer = value.producer()
    if producer is not None:
        if producer.op_type != "Constant" or producer.domain != "":
            return None
        attribute = producer.attributes.get("value")
        tensor = attribute.as_tensor() if attribute is not None else None
        return tensor.numpy() if tensor is not None else None
    if value.is_initializer() and not value.is_graph_input() and value.const_value is not None:
        return value.const_value.numpy()
    return None
