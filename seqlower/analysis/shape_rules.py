"""Per-operator transfer functions of `LoopShapes` (seqlower.analysis.loop_shapes): how one
node maps the symbolic shapes, and the integer contents, of its inputs to those of its outputs.

    SHAPE_RULES[op](analysis, node)   -> one ShapeFact per output (None: not analysed)
    CONTENT_RULES[op](analysis, node) -> the content of output 0 as a tuple of Dims, or None

A ShapeFact is a tuple of Dims (a None dim may change between iterations), INVARIANT (the same in
every iteration, not known symbolically) or None (not even the rank is known).
"""

from __future__ import annotations

__all__ = [
    "BROADCAST_OPS",
    "CONTENT_RULES",
    "ELEMENT_SIZE",
    "INVARIANT",
    "ND_CONTENT_RULES",
    "REDUCE_OPS",
    "SAME_SHAPE_OPS",
    "SHAPE_RULES",
    "SIZED_BY_CONTENT",
    "Content",
    "ShapeFact",
    "fixed",
    "merge",
    "uniform_element_shape",
]

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from seqlower.analysis import symbolic as sym
from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.symbolic import Dim

if TYPE_CHECKING:
    from seqlower.analysis.loop_shapes import LoopShapes

INVARIANT = "invariant"
ELEMENT_SIZE = ("size", "element")  # the atoms of `LoopShapes.element_symbol` start so
ShapeFact = tuple | str | None
Content = tuple  # of Dims

SAME_SHAPE_OPS = frozenset(
    {
        "Identity", "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot",
        "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", "Dropout", "Elu",
        "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "IsInf", "IsNaN",
        "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax",
        "LpNormalization", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink",
        "Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
        "ThresholdedRelu", "BatchNormalization",
    }
)  # fmt: skip
BROADCAST_OPS = frozenset(
    {
        "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal",
        "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul",
        "Or", "Pow", "PRelu", "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip
REDUCE_OPS = frozenset(
    {
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    }
)  # fmt: skip


# ops whose output shape depends on the content of an input (all but the data input 0)
SIZED_BY_CONTENT = frozenset(
    {"Slice", "Reshape", "Expand", "Tile", "ConstantOfShape", "Range", "Squeeze", "Unsqueeze",
     "Pad", "Resize", "Upsample", "OneHot", "TopK", "Compress", "NonZero", "Split", *REDUCE_OPS}
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
        return shape if isinstance(shape, tuple) and fixed(shape) else None
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
        if chunk != 1 and (not isinstance(dim, int) or chunk <= 0 or dim % chunk != 0):
            return None  # the last chunk is smaller, or the count depends on data
        size = chunk
    else:
        distinct = {int(s) for s in sizes.reshape(-1)}
        if len(distinct) != 1:
            return None
        (size,) = distinct
    return (*data[:axis], size, *data[axis + 1 :])


def fixed(shape: ShapeFact) -> bool:
    return shape == INVARIANT or (isinstance(shape, tuple) and not any(d is None for d in shape))


def _fixed_for_loop(a: LoopShapes, shape: ShapeFact) -> bool:
    """`fixed`, and no dim a size that changes between iterations (the dims the shape rules
    read through `LoopShapes.input_shape` may be sizes of this iteration's element of a list)."""
    return fixed(shape) and not (
        isinstance(shape, tuple) and any(d is not None and a.varies(d) for d in shape)
    )


def merge(a: ShapeFact, b: ShapeFact) -> ShapeFact:
    """The shape of a value that is `a` in some iterations and `b` in others."""
    if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


# -- content rules: (analysis, node) -> the content of output 0, or None ---------------------

_ContentRule = Callable[["LoopShapes", ir.Node], "Content | None"]


def _elementwise_content(fn: Callable[[Dim, Dim], Dim]) -> _ContentRule:
    def rule(a: LoopShapes, node: ir.Node) -> Content | None:
        left, right = (a.content(v) for v in node.inputs[:2])
        if left is None or right is None:
            return None
        n = max(len(left), len(right))
        if {len(left), len(right)} - {1, n}:
            return None  # no broadcast of unequal lengths
        left, right = (c * n if len(c) == 1 else c for c in (left, right))
        return tuple(fn(x, y) for x, y in zip(left, right))

    return rule


def _same_content(a: LoopShapes, node: ir.Node) -> Content | None:
    if node.op_type == "Cast" and node.attributes.get_int("to", 0) not in (6, 7):
        return None  # only int32 / int64 keep an integer content
    return a.content(node.inputs[0])


def _cast_like_content(a: LoopShapes, node: ir.Node) -> Content | None:
    target = node.inputs[1]
    if target is None or target.dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        return None
    return a.content(node.inputs[0])


def _size_content(a: LoopShapes, node: ir.Node) -> Content | None:
    shape = a.input_shape(node.inputs[0])  # type: ignore[arg-type]
    if not isinstance(shape, tuple) or any(d is None for d in shape):
        return None
    return (_product(shape),)


def _shape_content(a: LoopShapes, node: ir.Node) -> Content | None:
    shape = a.input_shape(node.inputs[0])  # type: ignore[arg-type]
    if not isinstance(shape, tuple):
        return None
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", len(shape))
    return shape[slice(start, end)]


def _gather_content(a: LoopShapes, node: ir.Node) -> Content | None:
    data, indices = node.inputs[0], node.inputs[1]
    index = a.content(indices)
    if node.attributes.get_int("axis", 0) != 0 or index is None or len(index) != 1:
        return None
    scalar = indices.shape is not None and len(indices.shape) == 0  # type: ignore[union-attr]
    table = a.content(data) if data is not None else None
    if table is not None and isinstance(index[0], int):
        picked = table[index[0]]
        return (picked,)
    source = data.producer() if data is not None else None
    if scalar and source is not None and source.op_type == "Range" and source.domain == "":
        # Range(0, C, 1)[p] lies in [0, C - 1] (an index out of range fails at run time)
        start, limit, delta = (a.content(v) for v in source.inputs)
        if start == (0,) and delta == (1,) and limit is not None and len(limit) == 1:
            atom = ("gather", id(node))
            a.bounds[atom] = (0, sym.sub(limit[0], 1))
            if not a.invariant_value(indices):
                a.varying.add(atom)
            return (sym.symbol(atom),)
    return None


def _concat_content(a: LoopShapes, node: ir.Node) -> Content | None:
    parts = [a.content(v) for v in node.inputs]
    if any(p is None for p in parts):
        return None
    return tuple(d for p in parts for d in p)  # type: ignore[union-attr]


def _array(a: LoopShapes, value: ir.Value | None) -> np.ndarray | None:
    """The content of `value` as an array of Dims in its shape (a static one past 1-D)."""
    content = a.content(value)
    shape = a.input_shape(value)
    if content is None or not isinstance(shape, tuple):
        return None
    array = np.empty(len(content), dtype=object)
    array[:] = content
    if len(shape) <= 1:
        return array.reshape(()) if not shape and len(content) == 1 else array
    if not all(isinstance(d, int) for d in shape) or math.prod(shape) != len(content):
        return None
    return array.reshape(shape)


def _slice_content(a: LoopShapes, node: ir.Node) -> Content | None:
    data = _array(a, node.inputs[0])
    params = [a.static_ints(v) for v in node.inputs[1:]]
    if data is None or data.ndim == 0 or len(params) < 2 or any(p is None for p in params):
        return None
    starts, ends = params[0], params[1]
    axes = params[2] if len(params) > 2 else list(range(len(starts)))  # type: ignore[arg-type]
    steps = params[3] if len(params) > 3 else [1] * len(starts)  # type: ignore[arg-type]
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:  # type: ignore[arg-type]
        return None
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):  # type: ignore[arg-type]
        index[axis % data.ndim] = slice(start, end, step)  # numpy clamps as Slice does
    return tuple(data[tuple(index)].reshape(-1))


def _transpose_content(a: LoopShapes, node: ir.Node) -> Content | None:
    data = _array(a, node.inputs[0])
    if data is None:
        return None
    perm = node.attributes.get_ints("perm")
    return tuple(np.transpose(data, perm).reshape(-1))


def _constant_of_shape_content(a: LoopShapes, node: ir.Node) -> Content | None:
    count = a.static_ints(node.inputs[0])
    attribute = node.attributes.get("value")
    fill = attribute.as_tensor().numpy() if attribute is not None else np.zeros(1, np.float32)
    if count is None or fill.dtype not in (np.int32, np.int64):
        return None
    total = math.prod(count)
    return (int(fill.reshape(-1)[0]),) * total if total <= 16 else None


def _minmax_content(a: LoopShapes, node: ir.Node) -> Content | None:
    parts = [a.static_ints(v) for v in node.inputs]
    if any(p is None for p in parts) or len({len(p) for p in parts}) != 1:  # type: ignore[arg-type]
        return None
    pick = max if node.op_type == "Max" else min
    return tuple(pick(column) for column in zip(*parts))  # type: ignore[arg-type]


CONTENT_RULES: dict[str, _ContentRule] = {
    "Add": _elementwise_content(sym.add),
    "Sub": _elementwise_content(sym.sub),
    "Mul": _elementwise_content(sym.mul),
    "Div": _elementwise_content(sym.truncdiv),
    **dict.fromkeys(["Identity", "Cast", "Squeeze", "Unsqueeze", "Reshape"], _same_content),
    "Shape": _shape_content,
    "Size": _size_content,
    "CastLike": _cast_like_content,
    "Gather": _gather_content,
    "Concat": _concat_content,
    "Slice": _slice_content,
    "Transpose": _transpose_content,
    "ConstantOfShape": _constant_of_shape_content,
    "Max": _minmax_content,
    "Min": _minmax_content,
}
# the content rules that read contents in their shapes (a Reshape keeps the order of the
# elements; Shape and Size read no content), so they accept inputs past 1-D
ND_CONTENT_RULES = frozenset(
    {"Identity", "Cast", "Squeeze", "Unsqueeze", "Reshape", "Shape", "Size", "Slice",
     "Transpose", "ConstantOfShape"}
)  # fmt: skip


# -- shape rules: (analysis, node) -> one ShapeFact per output, or None ---------------------


def _combine(shapes: Sequence[ShapeFact], compute: Callable[..., ShapeFact]) -> ShapeFact:
    """None if a shape may vary, INVARIANT if one is not symbolic, else compute(*shapes)."""
    if any(s is None for s in shapes):
        return None
    if any(s == INVARIANT for s in shapes):
        return INVARIANT
    return compute(*shapes)


def _on_input(fn: Callable[[LoopShapes, ir.Node, tuple], ShapeFact]):  # type: ignore[no-untyped-def]
    """A rule computing the shape of output 0 from the shape of input 0."""

    def rule(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
        return [_combine([a.input_shape(node.inputs[0])], lambda data: fn(a, node, data))]

    return rule


def _broadcast_dims(x: Dim | None, y: Dim | None) -> Dim | None:
    if x is None or y is None:
        other = y if x is None else x
        return other if isinstance(other, int) and other != 1 else None
    if x == y or y == 1:
        return x
    if x == 1:
        return y
    if isinstance(x, int) and isinstance(y, int):
        raise ValueError("incompatible broadcast")
    return sym.symbol(("broadcast", *sorted((x, y), key=repr)))


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


def _product(dims: Sequence[Dim]) -> Dim:
    result: Dim = 1
    for d in dims:
        result = sym.mul(result, d)
    return result


def _same(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    shape = a.input_shape(node.inputs[0])
    # extra outputs (a mask, a saved mean) have shapes that are functions of the input's shape
    return [shape] + [None if shape is None else INVARIANT] * (len(node.outputs) - 1)


def _elementwise(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    return [_combine([a.input_shape(v) for v in node.inputs if v is not None], _broadcast)]


def _matmul_shape(x: tuple, y: tuple) -> tuple:
    x2 = (1, *x) if len(x) == 1 else x
    y2 = (*y, 1) if len(y) == 1 else y
    batch = _broadcast(x2[:-2], y2[:-2]) if len(x2) > 2 or len(y2) > 2 else ()
    result = (*batch, x2[-2], y2[-1])
    if len(x) == 1:
        result = result[:-2] + result[-1:]
    return result[:-1] if len(y) == 1 else result


def _matmul(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    return [_combine([a.input_shape(v) for v in node.inputs[:2]], _matmul_shape)]


def _gemm(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    ta, tb = node.attributes.get_int("transA", 0), node.attributes.get_int("transB", 0)
    inputs = [a.input_shape(v) for v in node.inputs[:2]]
    return [_combine(inputs, lambda x, y: (x[1] if ta else x[0], y[0] if tb else y[1]))]


def _conv(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Conv: (N, C, *spatial), weight (M, C / group, *kernel) -> (N, M, *out), each out dim
    `(in + pad_begin + pad_end - dilation * (kernel - 1) - 1) // stride + 1` (explicit pads,
    NOTSET; VALID: no pads), `ceil(in / stride)` (SAME_UPPER, SAME_LOWER)."""
    auto_pad = node.attributes.get_string("auto_pad", "NOTSET")

    def compute(data: tuple, weight: tuple) -> ShapeFact:
        spatial = len(data) - 2
        if spatial < 1 or len(weight) != len(data):
            return None
        kernel = node.attributes.get_ints("kernel_shape") or weight[2:]
        strides = node.attributes.get_ints("strides") or [1] * spatial
        dilations = node.attributes.get_ints("dilations") or [1] * spatial
        pads = node.attributes.get_ints("pads") or [0] * (2 * spatial)
        if auto_pad == "VALID":
            pads = [0] * (2 * spatial)
        if len(kernel) != spatial or len(strides) != spatial or len(pads) != 2 * spatial:
            return None
        out: list[Dim] = [data[0], weight[0]]
        for k in range(spatial):
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out.append(sym.floordiv(sym.add(data[2 + k], strides[k] - 1), strides[k]))
                continue
            if not isinstance(kernel[k], int):
                return None
            reach = dilations[k] * (kernel[k] - 1) + 1
            padded = sym.add(data[2 + k], pads[k] + pads[k + spatial] - reach)
            out.append(sym.add(sym.floordiv(padded, strides[k]), 1))
        return tuple(out)

    if node.inputs and not a.invariant_value(node.inputs[0]):
        # of a value that changes between iterations (a carried sample): a shape no earlier
        # rule gave (one of values fixed for the loop was known fixed without it); see
        # `LoopShapes.nonempty_joins`
        a.nonempty_joins = True
    return [_combine([a.input_shape(v) for v in node.inputs[:2]], compute)]


@_on_input
def _transpose(_: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    perm = node.attributes.get_ints("perm")
    return tuple(data[p] for p in (perm if perm is not None else reversed(range(len(data)))))


def _concat(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 0)

    def compute(*shapes: tuple) -> tuple:
        k = axis % len(shapes[0])
        total: Dim = 0
        for s in shapes:
            total = sym.add(total, s[k])
        # the other dims are equal in every input (else Concat fails): a static one where any
        # input shows it, else one that is not the size of a list's element (a symbol of its
        # own, which says less: `cat([cache[i], rows])` has the rows' width)
        others = [
            next(
                (s[j] for s in shapes if isinstance(s[j], int)),
                next((s[j] for s in shapes if not _element_size(s[j])), shapes[0][j]),
            )
            for j in range(len(shapes[0]))
        ]
        return (*others[:k], total, *others[k + 1 :])

    return [_combine([a.input_shape(v) for v in node.inputs if v is not None], compute)]


def _element_size(d: Dim | None) -> bool:
    """Whether `d` mentions the size of a list's element (`LoopShapes.element_symbol`)."""
    return any(isinstance(atom, tuple) and atom[:2] == ELEMENT_SIZE for atom in sym.atoms(d))


def _gather(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    axis = node.attributes.get_int("axis", 0)

    def compute(data: tuple, indices: tuple) -> tuple:
        k = axis % len(data)
        return (*data[:k], *indices, *data[k + 1 :])

    data, indices = (a.input_shape(v) for v in node.inputs[:2])
    index_shape = node.inputs[1].shape if node.inputs[1] is not None else None
    if indices is None and isinstance(data, tuple) and index_shape is not None:
        # indices that change between iterations, of a known rank: the dims they give change
        # too, the data's other dims stay what they are (rows picked from a fixed tensor)
        indices = (None,) * len(index_shape)
    return [_combine([data, indices], compute)]


def _compress(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Compress(x, m, axis=k) keeps the dims of x but k, which may change between iterations
    with m (as the rows a Gather picks by indices of changing size); without an axis, a 1-D
    tensor of unknown size."""
    data = a.input_shape(node.inputs[0])
    if "axis" not in node.attributes:
        return [(None,)]
    if not isinstance(data, tuple) or not data:
        return [None]
    axis = node.attributes.get_int("axis", 0)
    if not -len(data) <= axis < len(data):
        return [None]
    k = axis % len(data)
    return [(*data[:k], None, *data[k + 1 :])]


def _axes(a: LoopShapes, node: ir.Node) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return a.static_ints(node.inputs[1])
    found = node.attributes.get_ints("axes")
    return None if found is None else list(found)


@_on_input
def _squeeze(a: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    axes = _axes(a, node)
    if axes is None:
        given = len(node.inputs) > 1 and node.inputs[1] is not None
        if given or not all(isinstance(d, int) for d in data):
            return None
        return tuple(d for d in data if d != 1)
    dropped = {k % len(data) for k in axes}
    return tuple(d for i, d in enumerate(data) if i not in dropped)


@_on_input
def _unsqueeze(a: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    axes = _axes(a, node)
    if axes is None:
        return None
    rank = len(data) + len(axes)
    inserted = {k % rank for k in axes}
    rest = iter(data)
    return tuple(1 if i in inserted else next(rest) for i in range(rank))


@_on_input
def _shape(_: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    rank = len(data)
    start, end = node.attributes.get_int("start", 0), node.attributes.get_int("end", rank)
    return (len(range(rank)[slice(start, end)]),)


@_on_input
def _size(_: LoopShapes, __: ir.Node, data: tuple) -> ShapeFact:
    return ()


def _reshape(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Reshape(x, T): T's entries, 0 copying x's dim (allowzero=0) and -1 the rest of x's
    size. Where x's shape is not known symbolically, a target T the analysis knows still
    gives the rank and the entries it proves positive (`Reshape(e, [-1])` of an element of a
    rank known at run time only is 1-D); `_reshape_unknown` says what the other dims are."""
    data = a.input_shape(node.inputs[0])
    target = a.content(node.inputs[1])
    allow_zero = node.attributes.get_int("allowzero", 0) == 1
    if target is None:
        if data == INVARIANT and a.invariant_value(node.inputs[1]):
            return [INVARIANT]  # a fixed shape reshaped to a fixed (long) target
        # the target's entries unknown (it changes between iterations): its length, where
        # static, is still the rank
        length = _static_length(a, node.inputs[1])
        return [(None,) * length if length is not None else None]
    if isinstance(data, tuple):
        # x's dims fixed for the loop: not sizes of an element read from a list of unequal
        # elements (`_exact`), whose unknown entries would change between iterations too
        same = _fixed_for_loop(a, data) and a.invariant_value(node.inputs[1])
        return [_reshape_known(a, node, data, target, allow_zero, same)]
    # x's shape fixed for the loop (INVARIANT) and T the same in every iteration: so is each
    # dim, a symbol of its own where T does not give it
    same = data == INVARIANT and a.invariant_value(node.inputs[1])
    return [_reshape_unknown(a, node, target, allow_zero, same)]


def _reshape_known(
    a: LoopShapes, node: ir.Node, data: tuple, target: Content, allow_zero: bool, same: bool
) -> ShapeFact:
    """The shape of Reshape(x, T) where x's shape is known symbolically. An int entry of T is
    the dim (0 copying x's dim, -1 the rest of x's size); a symbolic entry is the dim only
    where it cannot be a 0 or a -1 that means something else: proved >= 1, or a size (>= 0)
    with allowzero=1 or equal to x's dim at its position (a 0 there copies that same dim).
    Any other symbolic entry, and then the -1, is not known: a symbol of its own where x's
    shape and T are fixed for the loop (`same`), else None.

        Reshape(x: (N, 6), [N, -1])  -> (N, 6)
        Reshape(x: (6,), T), T unknown -> (t0, t1): T = [-1, 3] gives (2, 3), [0, 6] fails
    """
    dims: list[Dim | None] = []
    unknown = set()
    for k, d in enumerate(target):
        if d == 0 and not allow_zero:
            d = data[k]
        elif not isinstance(d, int) and not _given(
            a, d, data[k] if k < len(data) else None, allow_zero
        ):
            unknown.add(k)
        dims.append(d)
    if -1 in dims:
        k = dims.index(-1)
        if unknown:
            unknown.add(k)
        else:
            known = [d for d in dims if d != -1]
            dims[k] = sym.floordiv(_product(data), _product(known))
    for k in unknown:
        dims[k] = sym.symbol(("reshape", id(node), k)) if same else None
    return tuple(dims)


def _given(a: LoopShapes, entry: Dim, dim: Dim | None, allow_zero: bool) -> bool:
    """True when a symbolic entry of a Reshape target is the output dim at its position."""
    if sym.at_least(entry, 1, a.bounds):
        return True
    return sym.at_least(entry, 0, a.bounds) and (allow_zero or entry == dim)


def _reshape_unknown(
    a: LoopShapes, node: ir.Node, target: Content, allow_zero: bool, same: bool
) -> ShapeFact:
    """The shape of Reshape(x, T) where x's shape is not known symbolically: an entry of T
    proved >= 1 is its dim, a 0 with allowzero=1 is 0; a 0 (x's dim at that position) or a
    -1 (x's size over the other dims) with x's dims unknown, or an entry that may be either,
    is None (may change between iterations), or, where `same`, a symbol fixed for the loop.

        Reshape(x: ?, [-1])        -> (None,)
        Reshape(x: ?, [2, 0, -1])  -> (2, None, None)
        Reshape(x: ?, [0, 3]), allowzero=1 -> (0, 3)
    """
    if sum(d == -1 for d in target) > 1 or any(isinstance(d, int) and d < -1 for d in target):
        return None  # not a valid target
    if allow_zero and 0 in target and -1 in target:
        return None  # not a valid Reshape (allowzero=1 with both 0 and -1)
    dims: list[Dim | None] = []
    for k, d in enumerate(target):
        if isinstance(d, int):
            given = d > 0 or (d == 0 and allow_zero)
        else:  # a symbolic entry is the dim where it is proved positive (not a 0 or a -1)
            given = sym.at_least(d, 1, a.bounds)
        dims.append(d if given else sym.symbol(("reshape", id(node), k)) if same else None)
    return tuple(dims)


def _expand(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Expand(x, T): x broadcast with T; where T's entries are not known, its static length
    still gives the rank, max(rank(x), len(T)), with dims that may change."""
    target = a.content(node.inputs[1])
    if target is None:
        length = _static_length(a, node.inputs[1])
        if length is None:
            return [None]
        return [_combine([a.input_shape(node.inputs[0])], lambda d: (None,) * max(len(d), length))]
    return [_combine([a.input_shape(node.inputs[0])], lambda d: _broadcast(d, target))]


def _resize(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Resize to `sizes` (`F.interpolate(x, size=(h, w))`); scales give sizes that are not
    linear in the input's dims, so they are not analysed."""
    sizes = a.content(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    policy = node.attributes.get_string("keep_aspect_ratio_policy", "stretch")
    if sizes is None or policy != "stretch":
        return [None]
    axes = node.attributes.get_ints("axes")

    def compute(data: tuple) -> ShapeFact:
        picked = list(axes) if axes is not None else list(range(len(data)))
        if len(picked) != len(sizes):
            return None
        dims = list(data)
        for axis, size in zip(picked, sizes):
            dims[axis % len(data)] = size
        return tuple(dims)

    return [_combine([a.input_shape(node.inputs[0])], compute)]


def _top_k(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    k = a.content(node.inputs[1]) if len(node.inputs) > 1 else None
    axis = node.attributes.get_int("axis", -1)

    def compute(data: tuple) -> ShapeFact:
        if k is None or len(k) != 1:
            return None
        j = axis % len(data)
        return (*data[:j], k[0], *data[j + 1 :])

    shape = _combine([a.input_shape(node.inputs[0])], compute)
    return [shape, shape]


def _split(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """Split at sizes known to the analysis, or into equal parts of a static dim."""
    axis = node.attributes.get_int("axis", 0)
    given = len(node.inputs) > 1 and node.inputs[1] is not None
    sizes = a.content(node.inputs[1]) if given else node.attributes.get_ints("split")
    count = len(node.outputs)

    def compute(data: tuple) -> list[ShapeFact]:
        j = axis % len(data)
        parts = list(sizes) if sizes is not None else None
        if parts is None and not given and isinstance(data[j], int) and data[j] % count == 0:
            parts = [data[j] // count] * count
        if parts is None or len(parts) != count:
            return [None] * count
        return [(*data[:j], size, *data[j + 1 :]) for size in parts]

    data = a.input_shape(node.inputs[0])
    if data is None or data == INVARIANT:
        return [data] * count
    return compute(data)  # type: ignore[arg-type]


def _constant_of_shape(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """ConstantOfShape(T): T's entries; where they are not known, T's static length is the
    rank, with dims that may change."""
    shape = a.content(node.inputs[0])
    if shape is None:
        length = _static_length(a, node.inputs[0])
        return [(None,) * length if length is not None else None]
    return [shape]


@_on_input
def _flatten(_: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    axis = node.attributes.get_int("axis", 1)
    k = axis % (len(data) + 1) if axis < 0 else axis
    return (_product(data[:k]), _product(data[k:]))


def _reduce(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    given = len(node.inputs) > 1 and node.inputs[1] is not None
    to_scalar = (
        not given
        and not node.attributes.get_ints("axes")
        and node.attributes.get_int("keepdims", 1) == 0
        and node.attributes.get_int("noop_with_empty_axes", 0) == 0
    )
    if to_scalar:  # a reduction of every axis to a scalar: whatever the input's shape
        return [()]
    return _reduce_axes(a, node)


@_on_input
def _reduce_axes(a: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = a.static_ints(node.inputs[1])
        if axes is None:
            return None
    else:
        axes = node.attributes.get_ints("axes")
    if not axes:
        if node.attributes.get_int("noop_with_empty_axes", 0) == 1:
            return data
        reduced = set(range(len(data)))
    else:
        reduced = {k % len(data) for k in axes}
    if node.attributes.get_int("keepdims", 1) == 1:
        return tuple(1 if i in reduced else d for i, d in enumerate(data))
    return tuple(d for i, d in enumerate(data) if i not in reduced)


@_on_input
def _arg_reduce(_: LoopShapes, node: ir.Node, data: tuple) -> ShapeFact:
    k = node.attributes.get_int("axis", 0) % len(data)
    kept = (1,) if node.attributes.get_int("keepdims", 1) == 1 else ()
    return (*data[:k], *kept, *data[k + 1 :])


_INT64_MAX = 2**63 - 1


def _slice_size(a: LoopShapes, dim: Dim | None, start: Dim, end: Dim, step: int) -> Dim | None:
    """The size of `dim[start:end:step]`, or None when it cannot be written as a Dim."""
    if dim is None:
        return None
    if all(isinstance(x, int) for x in (dim, start, end)):
        return len(range(dim)[slice(start, end, step)])  # type: ignore[arg-type]
    if step != 1:
        return None
    if start == 0 and isinstance(end, int) and end >= _INT64_MAX // 2:
        return dim
    size = sym.sub(end, start)
    # clamping changes nothing when 0 <= start and start + size <= dim
    fits = sym.at_least(start, 0, a.bounds) and sym.at_least(sym.sub(dim, end), 0, a.bounds)
    if isinstance(size, int) and size >= 0 and fits:
        return size
    return None


def _static_length(a: LoopShapes, value: ir.Value | None) -> int | None:
    """The static length of a 1-D value (the number of Slice starts), if known."""
    shape = a.shape(value) if value is not None else None
    if isinstance(shape, tuple) and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def _slice(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    params = [node.inputs[i] if len(node.inputs) > i else None for i in range(1, 5)]
    fixed = all(a.invariant_value(v) for v in params)

    def compute(data: tuple) -> ShapeFact:
        starts, ends = a.content(params[0]), a.content(params[1])
        axes = a.static_ints(params[2]) if params[2] is not None else None
        steps = a.static_ints(params[3]) if params[3] is not None else None
        if params[2] is None:  # as many leading axes as there are starts
            count = len(starts) if starts is not None else _static_length(a, params[0])
            axes = list(range(count)) if count is not None else None
        if axes is None or (params[3] is not None and steps is None):
            # which axes are sliced (or how) is not known: one symbol per dim, fixed for the
            # loop only where the input's dim is (a slice of a dim that changes may change)
            return (
                tuple(
                    None if d is None or a.varies(d) else sym.symbol(("slice", id(node), i))
                    for i, d in enumerate(data)
                )
                if fixed
                else None
            )
        dims = list(data)
        for j, axis in enumerate(axes):
            k = axis % len(data)
            size = None
            if starts is not None and ends is not None:
                size = _slice_size(a, data[k], starts[j], ends[j], steps[j] if steps else 1)
            if size is None and fixed and data[k] is not None and not a.varies(data[k]):
                # fixed bounds on a dim fixed for the loop; not on a dim that changes
                size = sym.symbol(("slice", id(node), k))
            dims[k] = size
        return tuple(dims)

    return [_combine([a.input_shape(node.inputs[0])], compute)]


def _tile(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    repeats = a.content(node.inputs[1])
    if repeats is None:
        return [None]
    compute = lambda data: tuple(sym.mul(d, r) for d, r in zip(data, repeats))  # noqa: E731
    return [_combine([a.input_shape(node.inputs[0])], compute)]


def _range(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    start, limit, delta = (a.content(v) for v in node.inputs)
    if start == (0,) and delta == (1,) and limit and sym.at_least(limit[0], 0, a.bounds):
        return [(limit[0],)]
    fixed = all(a.invariant_value(v) for v in node.inputs)
    # 1-D whatever its bounds: a size of its own where they are fixed, else one that changes
    return [(sym.symbol(("range", id(node))) if fixed else None,)]


def _pad(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    pads = a.content(node.inputs[1]) if len(node.inputs) > 1 else None
    axes_given = len(node.inputs) > 3 and node.inputs[3] is not None
    axes = a.static_ints(node.inputs[3]) if axes_given else None

    def compute(data: tuple) -> ShapeFact:
        picked = list(range(len(data))) if not axes_given else axes
        if pads is None or picked is None or len(pads) != 2 * len(picked):
            return None
        dims = list(data)
        for j, axis in enumerate(picked):
            k = axis % len(data)
            dims[k] = sym.add(sym.add(dims[k], pads[j]), pads[j + len(picked)])
        return tuple(dims)

    return [_combine([a.input_shape(node.inputs[0])], compute)]


def _sequence_at(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    sequence = node.inputs[0]
    if sequence is None:
        return [None]
    if sequence in a.elements:  # assumed by the caller, who confirms it
        return [a.elements[sequence]]
    shape = uniform_element_shape(sequence, a.shape, a.values)
    if shape is not None:
        return [shape]
    # elements that may differ: a dim they share stays, the others are sizes of this element,
    # which hold for one iteration only (a per-element `n` cancels in `n + (m - n)`); where the
    # caller assumes the list's elements share one shape, they are sizes of the list's elements
    # (every read of it has them: `[cat(hyps[p], t) for p, t in ...]` are one shape)
    output = node.outputs[0]
    shared = a.element_dims(sequence)
    if shared is None and output.shape is not None:
        shared = (None,) * len(output.shape)  # the rank shape inference gives
    if shared is None:
        return [None]
    owner = sequence if sequence in a.uniform else output
    return [tuple(a.element_symbol(owner, k) if d is None else d for k, d in enumerate(shared))]


def _concat_from_sequence(a: LoopShapes, node: ir.Node) -> list[ShapeFact]:
    """ConcatFromSequence of a list whose elements all have shape S (assumed by the caller, or
    proved): S with the concatenation axis of unknown size (the list's length is not known
    here), or with a new axis of unknown size."""
    sequence = node.inputs[0]
    if sequence is None:
        return [None]
    shape = a.elements.get(sequence)
    if shape is None:
        shape = uniform_element_shape(sequence, a.shape, a.values)
    if not isinstance(shape, tuple) or not shape:
        return [None]
    rank, axis = len(shape), node.attributes.get_int("axis", 0)
    if node.attributes.get_int("new_axis", 0) == 1:
        if not -rank - 1 <= axis <= rank:
            return [None]
        k = axis + rank + 1 if axis < 0 else axis
        return [(*shape[:k], None, *shape[k:])]
    if not -rank <= axis < rank:
        return [None]
    k = axis % rank
    return [(*shape[:k], None, *shape[k + 1 :])]


SHAPE_RULES: dict[str, Callable[[LoopShapes, ir.Node], Sequence[ShapeFact] | None]] = {
    **dict.fromkeys(SAME_SHAPE_OPS, _same),
    **dict.fromkeys(BROADCAST_OPS, _elementwise),
    **dict.fromkeys(REDUCE_OPS, _reduce),
    "ArgMax": _arg_reduce,
    "ArgMin": _arg_reduce,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "Transpose": _transpose,
    "Concat": _concat,
    "Gather": _gather,
    "Compress": _compress,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Shape": _shape,
    "Size": _size,
    "Reshape": _reshape,
    "Expand": _expand,
    "Resize": _resize,
    "TopK": _top_k,
    "Split": _split,
    "ConstantOfShape": _constant_of_shape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Tile": _tile,
    "Range": _range,
    "Pad": _pad,
    "SequenceAt": _sequence_at,
    "ConcatFromSequence": _concat_from_sequence,
    "SequenceLength": lambda _, __: [()],  # a scalar, whatever the list holds
}
