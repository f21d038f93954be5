"""Which values of a Loop body have the same shape in every iteration.

A Loop scan output stacks one body value per iteration, so that value must have the same shape in
every iteration (onnxruntime fails otherwise). Declared and inferred shapes cannot show this: onnx
shape inference clears the shapes of loop-carried values, and it gives every element of a sequence
one symbolic shape even when the elements differ (the last, smaller chunk of an uneven split).

This analysis computes a symbolic shape for every value of one Loop body: a tuple of dims, each an
int or a hashable expression standing for a size that is fixed for the whole run of the loop (a
dim of a value defined outside the body, or a function of such dims and of loop-invariant values).
Equal expressions denote equal sizes. A shape may also be `INVARIANT` (the same in every
iteration, but not known symbolically) or `None` (it may change between iterations; `reason`
says why).

Loop-carried tensors are assumed to keep the shape of their initial value. An assumption that the
body does not confirm (the carried output's shape is not the same expression) is dropped and the
analysis repeats: a greatest fixpoint, sound by induction on the iterations.
"""

from __future__ import annotations

__all__ = ["INVARIANT", "LoopShapes", "ShapeFact", "uniform_element_shape"]

import math
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import has_subgraph

Dim = int | tuple
INVARIANT = "invariant"
# a tuple of dims, INVARIANT, or None (may change between iterations)
ShapeFact = tuple | str | None

_RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
)
_SAME_SHAPE_OPS = frozenset(
    {
        "Identity", "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot",
        "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", "Dropout", "Elu",
        "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "IsInf", "IsNaN",
        "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax",
        "LpNormalization",
        "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign",
        "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
        "BatchNormalization",
    }
)  # fmt: skip
_BROADCAST_OPS = frozenset(
    {
        "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal",
        "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul",
        "Or", "Pow", "PRelu", "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip
_REDUCE_OPS = frozenset(
    {
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    }
)  # fmt: skip


def _peel_identity(value: ir.Value) -> ir.Node | None:
    node = value.producer()
    while node is not None and node.domain == "" and node.op_type == "Identity":
        source = node.inputs[0]
        node = source.producer() if source is not None else None
    return node


def uniform_element_shape(
    sequence: ir.Value, shape_of: Callable[[ir.Value], ShapeFact], values: StaticValues
) -> ShapeFact:
    """The one shape shared by every element of `sequence`, when its producer shows it, else
    None. `shape_of` gives the symbolic shape of a tensor value."""
    producer = _peel_identity(sequence)
    if producer is None or producer.domain != "":
        return None
    if producer.op_type == "SequenceConstruct":
        shapes = {shape_of(e) for e in producer.inputs if e is not None}
        if len(shapes) != 1:
            return None
        (shape,) = shapes
        return shape if isinstance(shape, tuple) else None
    if producer.op_type != "SplitToSequence" or producer.inputs[0] is None:
        return None
    data = shape_of(producer.inputs[0])
    if not isinstance(data, tuple) or not data:
        return None
    axis = producer.attributes.get_int("axis", 0)
    if not -len(data) <= axis < len(data):
        return None
    axis %= len(data)
    split = producer.inputs[1] if len(producer.inputs) > 1 else None
    if split is None:
        if producer.attributes.get_int("keepdims", 1) == 0:
            return data[:axis] + data[axis + 1 :]
        return (*data[:axis], 1, *data[axis + 1 :])
    sizes = values.get(split)
    if sizes is None or sizes.dtype.kind not in "iu":
        return None
    if sizes.ndim == 0:
        chunk, dim = int(sizes), data[axis]
        if not isinstance(dim, int) or chunk <= 0 or dim % chunk != 0:
            return None  # the last chunk is smaller, or the count depends on data
        size = chunk
    else:
        distinct = {int(s) for s in sizes.reshape(-1)}
        if len(distinct) != 1:
            return None
        (size,) = distinct
    return (*data[:axis], size, *data[axis + 1 :])


def _trusted_name(name: str | None) -> bool:
    return bool(name) and not name.startswith("unk__")  # type: ignore[union-attr]


class LoopShapes:
    """Symbolic shapes of the values of one Loop body (see the module docstring)."""

    def __init__(self, loop: ir.Node, values: StaticValues) -> None:
        self.body = loop.attributes["body"].as_graph()
        self.values = values
        self._shapes: dict[ir.Value, ShapeFact] = {}
        self._invariant: dict[ir.Value, bool] = {}
        self._reasons: dict[ir.Value, str] = {}
        carried_inputs = list(self.body.inputs[2:])
        initial = list(loop.inputs[2:])
        self.assumed: dict[ir.Value, ShapeFact] = {}
        for body_input, init in zip(carried_inputs, initial):
            shape = self.outer_shape(init) if init is not None else None
            is_tensor = isinstance(body_input.type, ir.TensorType)
            self.assumed[body_input] = shape if is_tensor and isinstance(shape, tuple) else None
        while True:
            self._run()
            dropped = False
            for index, body_input in enumerate(carried_inputs):
                out_index = 1 + index
                if self.assumed[body_input] is None or out_index >= len(self.body.outputs):
                    continue
                if self.shape(self.body.outputs[out_index]) != self.assumed[body_input]:
                    self.assumed[body_input] = None
                    dropped = True
            if not dropped:
                break

    # -- queries ----------------------------------------------------------------------------

    def shape(self, value: ir.Value) -> ShapeFact:
        """The symbolic shape of `value` (a body value or an outer one)."""
        if value in self._shapes:
            return self._shapes[value]
        if self._is_outer(value):
            return self.outer_shape(value)
        return None

    def is_invariant(self, value: ir.Value) -> bool:
        """True when `value` has the same shape in every iteration."""
        return self.shape(value) is not None

    def reason(self, value: ir.Value) -> str:
        """Why the shape of `value` may change between iterations."""
        return self._reasons.get(value, f"the shape of '{value.name}' is not known")

    def invariant_carried(self) -> list[ir.Value]:
        """The loop-carried body inputs that keep the shape of their initial value."""
        return [value for value, shape in self.assumed.items() if shape is not None]

    def outer_shape(self, value: ir.Value) -> ShapeFact:
        """The symbolic shape of a value defined outside the body (fixed for the whole loop)."""
        array = self.values.get(value)
        if array is not None:
            return tuple(int(d) for d in array.shape)
        if value.shape is None:
            return INVARIANT
        dims: list[Dim] = []
        for axis, dim in enumerate(value.shape):
            if isinstance(dim, int):
                dims.append(dim)
            elif isinstance(dim, ir.SymbolicDim) and _trusted_name(dim.value):
                # A named dim from the model inputs: equal names are equal sizes. Names that
                # shape inference makes up ("unk__") may be shared by unequal sequence elements.
                dims.append(("param", dim.value))
            else:
                dims.append(("dim", id(value), axis))
        return tuple(dims)

    # -- the analysis -----------------------------------------------------------------------

    def _is_outer(self, value: ir.Value) -> bool:
        return value.graph is not self.body

    def _run(self) -> None:
        self._shapes = {}
        self._invariant = {}
        self._reasons = {}
        body = self.body
        for index, value in enumerate(body.inputs):
            self._invariant[value] = False
            if index < 2:
                self._shapes[value] = ()
                continue
            self._shapes[value] = self.assumed.get(value)
            if self._shapes[value] is None:
                self._reasons[value] = (
                    f"the loop-carried value '{value.name}' may change shape between iterations"
                )
        for value in body.initializers.values():
            self._invariant[value] = True
            self._shapes[value] = self.outer_shape(value)
        for node in body:
            self._visit(node)

    def _input_shape(self, value: ir.Value | None) -> ShapeFact:
        if value is None:
            return ()
        return self.shape(value)

    def _value_invariant(self, value: ir.Value | None) -> bool:
        if value is None:
            return True
        if value in self._invariant:
            return self._invariant[value]
        return self._is_outer(value)

    def _visit(self, node: ir.Node) -> None:
        invariant = (
            node.domain == ""
            and node.op_type not in _RANDOM_OPS
            and not has_subgraph(node)
            and all(self._value_invariant(v) for v in node.inputs)
        )
        shapes: Sequence[ShapeFact] | None = None
        if node.domain == "" and not has_subgraph(node):
            try:
                shapes = _SHAPE_RULES.get(node.op_type, _unknown)(self, node)
            except (ValueError, IndexError, TypeError, ZeroDivisionError):
                shapes = None
        for index, output in enumerate(node.outputs):
            shape = shapes[index] if shapes is not None and index < len(shapes) else None
            if shape is None and invariant:
                shape = INVARIANT
            self._shapes[output] = shape
            self._invariant[output] = invariant
            if shape is None:
                self._reasons[output] = self._why(node, output)

    def _why(self, node: ir.Node, output: ir.Value) -> str:
        for value in node.inputs:
            if value is not None and value in self._reasons:
                return self._reasons[value]
        if node.op_type == "SequenceAt":
            return f"'{output.name}' is an element of a sequence whose elements may differ in shape"
        for value in node.inputs:
            if value is not None and not self._value_invariant(value):
                return (
                    f"the shape of '{output.name}' ({node.op_type}) depends on '{value.name}', "
                    "whose value changes between iterations"
                )
        return f"the shape of '{output.name}' ({node.op_type}) is not analysed"

    # -- helpers for the shape rules --------------------------------------------------------

    def static_ints(self, value: ir.Value | None) -> list[int] | None:
        array = self.values.get(value)
        if array is None or array.dtype.kind not in "iu":
            return None
        return [int(x) for x in array.reshape(-1)]

    def value_dims(self, value: ir.Value) -> tuple | None:
        """The content of a loop-invariant 1-D int tensor as dims (a shape argument)."""
        ints = self.static_ints(value)
        if ints is not None:
            return tuple(ints)
        shape = self.shape(value)
        if not self._value_invariant(value) or not isinstance(shape, tuple) or len(shape) != 1:
            return None
        if not isinstance(shape[0], int):
            return None
        return tuple(("value", id(value), i) for i in range(shape[0]))


# -- shape rules: (analysis, node) -> one ShapeFact per output, or None ---------------------

_Rule = Callable[[LoopShapes, ir.Node], "Sequence[ShapeFact] | None"]


def _unknown(_: LoopShapes, __: ir.Node) -> None:
    return None


def _inputs(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    return [analysis._input_shape(v) for v in node.inputs]


def _combine(shapes: Sequence[ShapeFact], compute: Callable[..., Any]) -> ShapeFact:
    """None if a shape may vary, INVARIANT if one is not symbolic, else compute(*shapes)."""
    if any(s is None for s in shapes):
        return None
    if any(s == INVARIANT for s in shapes):
        return INVARIANT
    return compute(*shapes)


def _broadcast_dims(a: Dim, b: Dim) -> Dim:
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    if isinstance(a, int) and isinstance(b, int):
        raise ValueError("incompatible broadcast")
    return ("broadcast", *sorted((a, b), key=repr))


def _broadcast(*shapes: tuple) -> tuple:
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    result = []
    for dims in zip(*padded):
        dim = dims[0]
        for other in dims[1:]:
            dim = _broadcast_dims(dim, other)
        result.append(dim)
    return tuple(result)


def _same(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    shape = analysis._input_shape(node.inputs[0])
    # extra outputs (a mask, a saved mean) have shapes that are functions of the input's shape
    extra = None if shape is None else INVARIANT
    return [shape] + [extra] * (len(node.outputs) - 1)


def _elementwise(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    present = [analysis._input_shape(v) for v in node.inputs if v is not None]
    return [_combine(present, _broadcast)]


def _matmul_shape(a: tuple, b: tuple) -> tuple:
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    batch = _broadcast(a2[:-2], b2[:-2]) if len(a2) > 2 or len(b2) > 2 else ()
    result = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        result = result[:-2] + result[-1:]
    if len(b) == 1:
        result = result[:-1]
    return result


def _matmul(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    return [_combine(_inputs(analysis, node)[:2], _matmul_shape)]


def _gemm(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    trans_a = node.attributes.get_int("transA", 0)
    trans_b = node.attributes.get_int("transB", 0)

    def compute(a: tuple, b: tuple) -> tuple:
        return (a[1] if trans_a else a[0], b[0] if trans_b else b[1])

    return [_combine(_inputs(analysis, node)[:2], compute)]


def _transpose(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    perm = node.attributes.get_ints("perm")

    def compute(a: tuple) -> tuple:
        order = list(perm) if perm is not None else list(reversed(range(len(a))))
        return tuple(a[p] for p in order)

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _concat(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 0)

    def compute(*shapes: tuple) -> tuple:
        a = axis % len(shapes[0])
        dims = [s[a] for s in shapes]
        total = sum(dims) if all(isinstance(d, int) for d in dims) else ("sum", *dims)
        return (*shapes[0][:a], total, *shapes[0][a + 1 :])

    return [_combine([analysis._input_shape(v) for v in node.inputs if v is not None], compute)]


def _gather(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 0)

    def compute(data: tuple, indices: tuple) -> tuple:
        a = axis % len(data)
        return (*data[:a], *indices, *data[a + 1 :])

    return [_combine(_inputs(analysis, node)[:2], compute)]


def _axes(analysis: LoopShapes, node: ir.Node) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return analysis.static_ints(node.inputs[1])
    found = node.attributes.get_ints("axes")
    return None if found is None else list(found)


def _squeeze(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axes = _axes(analysis, node)

    def compute(data: tuple) -> tuple | None:
        if axes is None:
            if not all(isinstance(d, int) for d in data):
                return None
            return tuple(d for d in data if d != 1)
        dropped = {a % len(data) for a in axes}
        return tuple(d for i, d in enumerate(data) if i not in dropped)

    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        return [None]
    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _unsqueeze(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axes = _axes(analysis, node)
    if axes is None:
        return [None]

    def compute(data: tuple) -> tuple:
        rank = len(data) + len(axes)
        inserted = {a % rank for a in axes}
        rest = iter(data)
        return tuple(1 if i in inserted else next(rest) for i in range(rank))

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _shape(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    def compute(data: tuple) -> tuple:
        rank = len(data)
        start = node.attributes.get_int("start", 0)
        end = node.attributes.get_int("end", rank)
        return (len(range(rank)[slice(start, end)]),)

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _size(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    return [_combine([analysis._input_shape(node.inputs[0])], lambda _: ())]


def _reshape(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    target = analysis.value_dims(node.inputs[1]) if node.inputs[1] is not None else None
    if target is None:
        return [None]
    allow_zero = node.attributes.get_int("allowzero", 0) == 1

    def compute(data: tuple) -> tuple:
        dims: list[Dim] = []
        for i, d in enumerate(target):
            if d == 0 and not allow_zero:
                dims.append(data[i])
            else:
                dims.append(d)
        if -1 in dims:
            known = [d for d in dims if d != -1]
            if all(isinstance(d, int) for d in (*data, *known)):
                dims[dims.index(-1)] = math.prod(data) // max(math.prod(known), 1)
            else:
                dims[dims.index(-1)] = ("reshape", tuple(data), tuple(known))
        return tuple(dims)

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _expand(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    target = analysis.value_dims(node.inputs[1]) if node.inputs[1] is not None else None
    if target is None:
        return [None]
    return [_combine([analysis._input_shape(node.inputs[0])], lambda d: _broadcast(d, target))]


def _constant_of_shape(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    target = analysis.value_dims(node.inputs[0]) if node.inputs[0] is not None else None
    return [target]


def _flatten(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 1)

    def product(dims: tuple) -> Dim:
        if all(isinstance(d, int) for d in dims):
            return math.prod(dims)
        return ("product", *dims)

    def compute(data: tuple) -> tuple:
        a = axis % (len(data) + 1) if axis < 0 else axis
        return (product(data[:a]), product(data[a:]))

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _reduce(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    keepdims = node.attributes.get_int("keepdims", 1) == 1
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = analysis.static_ints(node.inputs[1])
        if axes is None:
            return [None]
    else:
        found = node.attributes.get_ints("axes")
        axes = None if found is None else list(found)
    noop = node.attributes.get_int("noop_with_empty_axes", 0) == 1

    def compute(data: tuple) -> tuple:
        if not axes:
            if noop:
                return data
            reduced = set(range(len(data)))
        else:
            reduced = {a % len(data) for a in axes}
        if keepdims:
            return tuple(1 if i in reduced else d for i, d in enumerate(data))
        return tuple(d for i, d in enumerate(data) if i not in reduced)

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _arg_reduce(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 0)
    keepdims = node.attributes.get_int("keepdims", 1) == 1

    def compute(data: tuple) -> tuple:
        a = axis % len(data)
        if keepdims:
            return (*data[:a], 1, *data[a + 1 :])
        return data[:a] + data[a + 1 :]

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _slice(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    params = [node.inputs[i] if len(node.inputs) > i else None for i in range(1, 5)]
    if not all(analysis._value_invariant(v) for v in params):
        return [None]
    starts, ends, axes, steps = (analysis.static_ints(v) if v is not None else None for v in params)
    has_axes, has_steps = params[2] is not None, params[3] is not None
    # what the sliced sizes depend on: the parameters' contents, or their (invariant) values
    key = tuple(
        None if v is None else ("static", tuple(c)) if c is not None else ("value", id(v))
        for v, c in zip(params, (starts, ends, axes, steps))
    )

    def compute(data: tuple) -> tuple:
        rank = len(data)
        if axes is not None:
            sliced = [a % rank for a in axes]
        elif not has_axes and starts is not None:
            sliced = list(range(len(starts)))
        else:  # which axes are sliced is not known
            return tuple(("slice", d, key, i) for i, d in enumerate(data))
        dims = list(data)
        for j, a in enumerate(sliced):
            step = (steps[j] if steps is not None else None) if has_steps else 1
            start = starts[j] if starts is not None else None
            end = ends[j] if ends is not None else None
            if isinstance(dims[a], int) and None not in (start, end, step):
                dims[a] = len(range(dims[a])[slice(start, end, step)])
            else:
                dims[a] = ("slice", dims[a], key, a)
        return tuple(dims)

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _tile(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    repeats = analysis.value_dims(node.inputs[1]) if node.inputs[1] is not None else None
    if repeats is None:
        return [None]

    def compute(data: tuple) -> tuple:
        return tuple(
            d * r if isinstance(d, int) and isinstance(r, int) else ("tile", d, r)
            for d, r in zip(data, repeats)
        )

    return [_combine([analysis._input_shape(node.inputs[0])], compute)]


def _sequence_at(analysis: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    sequence = node.inputs[0]
    if sequence is None:
        return [None]
    return [uniform_element_shape(sequence, analysis.shape, analysis.values)]


_SHAPE_RULES: dict[str, _Rule] = {
    **dict.fromkeys(_SAME_SHAPE_OPS, _same),
    **dict.fromkeys(_BROADCAST_OPS, _elementwise),
    **dict.fromkeys(_REDUCE_OPS, _reduce),
    "ArgMax": _arg_reduce,
    "ArgMin": _arg_reduce,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Transpose": _transpose,
    "Concat": _concat,
    "Gather": _gather,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Shape": _shape,
    "Size": _size,
    "Reshape": _reshape,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Tile": _tile,
    "SequenceAt": _sequence_at,
}
