"""The rank of an operator's outputs from the ranks of its inputs, its attributes and its
constant inputs: one rule per standard operator, where ONNX shape inference gives no shape.

    RANK_RULES[op](query) -> the rank of the outputs (or of output 0; `ALL_OUTPUTS`), or None

A few lines of the table, each `inputs -> output`:

    Softmax, Slice, Cast, Conv, Pad, Resize ... (r)          -> r
    Add, Mul, Where ... (r1, r2, ...)                         -> max(r1, r2, ...)
    Transpose(r, perm)                                        -> len(perm), else r
    Reshape(r, shape)                                         -> the length of `shape`
    Unsqueeze(r, axes) / Squeeze(r, axes)                     -> r + len(axes) / r - len(axes)
    Gather(r, q)                                              -> r + q - 1
    GatherND(r, Transpose(NonZero(m)), batch_dims=b)          -> r + 2 - rank(m) - 1 - b
    MatMul(1, 1) / MatMul(1, b) / MatMul(a, 1) / MatMul(a, b) -> 0 / b - 1 / a - 1 / max(a, b)
    ReduceSum(r, axes, keepdims=0)                            -> r - len(axes)
    Shape(r) / Size(r) / NonZero(r) / Flatten(r)              -> 1 / 0 / 2 / 2
    LSTM, GRU, RNN / Unique(r) / DynamicQuantizeLinear(r)     -> (4, 3, 3) / (1, 1, 1, 1) /
                                                                 (r, 0, 0)  (`OUTPUT_RANKS`)

A length is the static content's, else the declared dim's, else the length the analysis found
(`seqlower.analysis.length_rules`): `Reshape(e, Concat(Slice(Shape(e), 0, 2), [-1]))` of `e`
of rank 4 has rank 3, and `Unsqueeze(e, axes)` with axes computed at run time has rank 4 +
their length (axes hold no duplicates, the spec).

Only what an operator's definition fixes is here: Squeeze without axes (which drops the dims
that are 1) has no rule. The op families shared with the symbolic shapes of loop bodies come
from `seqlower.analysis.shape_rules`.
"""

from __future__ import annotations

__all__ = [
    "ALL_OUTPUTS",
    "OUTPUT_RANKS",
    "RANK_RULES",
    "RankQuery",
    "RankRule",
    "unknown_rank_cause",
]

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from seqlower.analysis.shape_rules import BROADCAST_OPS, REDUCE_OPS, SAME_SHAPE_OPS
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import subgraphs


@dataclasses.dataclass(frozen=True)
class RankQuery:
    """What a rule may read: the node, the ranks of its inputs (None: absent or unknown), the
    static contents of its inputs and the lengths the analysis found for its 1-D inputs
    (`seqlower.analysis.length_rules`; None: unknown)."""

    node: ir.Node
    ranks: tuple[int | None, ...]
    values: StaticValues
    lengths: tuple[int | None, ...] = ()
    length_of: Callable[[ir.Value], int | None] | None = None  # of any 1-D value
    rank_of: Callable[[ir.Value], int | None] | None = None  # of any value

    def rank(self, index: int) -> int | None:
        return self.ranks[index] if index < len(self.ranks) else None

    def given(self, index: int) -> bool:
        return index < len(self.node.inputs) and self.node.inputs[index] is not None

    def length(self, index: int, content: bool = True) -> int | None:
        """The number of elements of the 1-D input `index`: its static dim, else the length
        the analysis found, else (unless not `content`) its static content's, the costliest
        to ask."""
        if not self.given(index):
            return None
        value = self.node.inputs[index]
        shape = value.shape  # type: ignore[union-attr]
        if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
            return shape[0]
        found = self.lengths[index] if index < len(self.lengths) else None
        if found is not None or not content:
            return found
        static = self.values.get(value)
        return int(static.size) if static is not None and static.ndim <= 1 else None

    def ints(self, index: int) -> list[int] | None:
        """The static content of input `index`, as ints."""
        return self.values.get_ints(self.node.inputs[index]) if self.given(index) else None

    def axes(self, index: int = 1) -> list[int] | None:
        """The `axes` attribute, else the static content of input `index`."""
        found = self.node.attributes.get_ints("axes")
        if found is not None:
            return list(found)
        if not self.given(index):
            return None
        return self.values.get_ints(self.node.inputs[index])

    def int_attr(self, name: str, default: int) -> int:
        return self.node.attributes.get_int(name, default)


RankRule = Callable[[RankQuery], "int | None"]


def _input(index: int) -> RankRule:
    return lambda q: q.rank(index)


def _fixed(rank: int) -> RankRule:
    return lambda q: rank


def _broadcast(q: RankQuery) -> int | None:
    ranks = [r for i, r in enumerate(q.ranks) if q.given(i)]
    return None if not ranks or None in ranks else max(ranks)  # type: ignore[type-var]


def _any_input(q: RankQuery) -> int | None:
    """Concat: every input has the output's rank."""
    return next((r for r in q.ranks if r is not None), None)


def _constant(q: RankQuery) -> int | None:
    content = q.values.get(q.node.outputs[0])
    return None if content is None else content.ndim


def _transpose(q: RankQuery) -> int | None:
    perm = q.node.attributes.get_ints("perm")
    return len(perm) if perm is not None else q.rank(0)


def _reshape(q: RankQuery) -> int | None:
    return q.length(1)


def _constant_of_shape(q: RankQuery) -> int | None:
    return q.length(0)


def _expand(q: RankQuery) -> int | None:
    data, length = q.rank(0), q.length(1)
    return None if data is None or length is None else max(data, length)


def _unsqueeze(q: RankQuery) -> int | None:
    data, axes = q.rank(0), q.axes()
    if data is None:
        return None
    if axes is None:  # computed at run time: the rank grows by their count (no duplicates)
        count = None if "axes" in q.node.attributes else q.length(1)
        return None if count is None else data + count
    return data + len(set(axes))


def _squeeze(q: RankQuery) -> int | None:
    data, axes = q.rank(0), q.axes()
    if data is None or axes is None:
        return None  # without axes, the dims of size 1 go: the rank depends on the dims
    return data - len({a % data for a in axes}) if data else None


def _gather(q: RankQuery) -> int | None:
    data, indices = q.rank(0), q.rank(1)
    return None if data is None or indices is None else data + indices - 1


def _gather_nd(q: RankQuery) -> int | None:
    data, indices = q.rank(0), q.rank(1)
    indices_value = q.node.inputs[1] if q.given(1) else None
    if data is None or indices is None or indices_value is None:
        return None
    last = _last_dim(indices_value, q.rank_of)
    if last is None:
        return None
    batch = q.int_attr("batch_dims", 0)
    return indices + data - last - 1 - batch


def _last_dim(indices: ir.Value, rank_of: Callable[[ir.Value], int | None] | None) -> int | None:
    """The static last dim of `indices`; of `Transpose(NonZero(x))` (PyTorch's `x[mask]`),
    the rank of x: NonZero gives `[rank(x), count]`."""
    shape = indices.shape
    if shape is not None and len(shape) and isinstance(shape[-1], int):
        return shape[-1]
    node = indices.producer()
    if node is None or node.op_type != "Transpose" or node.domain != "" or rank_of is None:
        return None
    perm = node.attributes.get_ints("perm")
    source = node.inputs[0]
    made_by = source.producer() if source is not None else None
    if made_by is None or made_by.op_type != "NonZero" or made_by.domain != "":
        return None
    if perm is not None and list(perm) != [1, 0]:
        return None
    return rank_of(made_by.inputs[0]) if made_by.inputs[0] is not None else None


def _matmul(q: RankQuery) -> int | None:
    a, b = q.rank(0), q.rank(1)
    if a is None or b is None:
        return None
    if a == 1 and b == 1:
        return 0
    if a == 1:
        return b - 1
    if b == 1:
        return a - 1
    return max(a, b)


def _reduce(q: RankQuery) -> int | None:
    data = q.rank(0)
    if data is None:
        return None
    if q.int_attr("keepdims", 1):
        return data
    axes = q.axes()
    if axes is None:
        if q.given(1):
            return None  # axes computed at run time
        return data if q.int_attr("noop_with_empty_axes", 0) else 0
    if not axes and q.int_attr("noop_with_empty_axes", 0):
        return data
    return data - len({a % data for a in axes}) if axes and data else 0


def _arg_reduce(q: RankQuery) -> int | None:
    data = q.rank(0)
    if data is None:
        return None
    return data if q.int_attr("keepdims", 1) else data - 1


def _compress(q: RankQuery) -> int | None:
    return q.rank(0) if "axis" in q.node.attributes else 1


def _one_hot(q: RankQuery) -> int | None:
    indices = q.rank(0)
    return None if indices is None else indices + 1


def _einsum(q: RankQuery) -> int | None:
    equation = q.node.attributes.get_string("equation")
    if equation is None or "..." in equation:
        return None
    if "->" in equation:
        return sum(c.isalpha() for c in equation.split("->", 1)[1])
    labels = [c for c in equation if c.isalpha()]  # implicit: the labels that occur once
    return sum(labels.count(c) == 1 for c in set(labels))


def _det(q: RankQuery) -> int | None:
    data = q.rank(0)
    return None if data is None or data < 2 else data - 2


def _qlinear_matmul(q: RankQuery) -> int | None:
    """QLinearMatMul(a, a_scale, a_zero, b, ...): MatMul's rule on a and b."""
    return _matmul(RankQuery(q.node, (q.rank(0), q.rank(3)), q.values))


def _col2im(q: RankQuery) -> int | None:
    """[N, C * prod(block), L] -> [N, C, *image_shape]."""
    length = q.length(1)
    return None if length is None else 2 + length


def _affine_grid(q: RankQuery) -> int | None:
    """size [N, C, H, W] -> grid [N, H, W, 2]; size [N, C, D, H, W] -> [N, D, H, W, 3]."""
    return q.length(1)


def _loss(q: RankQuery) -> int | None:
    """NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: [N, C, d1...] -> [N, d1...]
    unreduced, else a scalar."""
    if q.node.attributes.get_string("reduction", "mean") != "none":
        return 0
    data = q.rank(0)
    return None if data is None or data < 2 else data - 1


def _random(q: RankQuery) -> int | None:
    shape = q.node.attributes.get_ints("shape")
    return None if shape is None else len(shape)


# the output keeps the rank of input 0
_KEEPS_RANK = frozenset(
    {
        *SAME_SHAPE_OPS, "AveragePool", "Bernoulli", "Conv", "ConvInteger",
        "ConvTranspose", "DepthToSpace", "DequantizeLinear", "GlobalAveragePool",
        "GlobalLpPool", "GlobalMaxPool", "GridSample", "GroupNormalization", "LRN", "LpPool",
        "MaxPool", "MaxUnpool", "MeanVarianceNormalization", "Pad", "QLinearConv",
        "QuantizeLinear", "RandomNormalLike", "RandomUniformLike", "Resize", "ReverseSequence",
        "Scatter", "ScatterElements", "ScatterND", "Slice", "SpaceToDepth", "Tile", "TopK",
        "Trilu", "Upsample", "Split", "Swish", "CenterCropPad", "DeformConv",
        "DFT", "RMSNormalization", "RotaryEmbedding",
    }
)  # fmt: skip

# ops whose every output has the rank the rule gives (else only output 0 does)
ALL_OUTPUTS = frozenset(
    {"Split", "TopK", "Dropout", "LayerNormalization", "MaxPool"}
)  # fmt: skip

RANK_RULES: dict[str, RankRule] = {
    **dict.fromkeys(_KEEPS_RANK, _input(0)),
    **dict.fromkeys(BROADCAST_OPS, _broadcast),
    **dict.fromkeys(REDUCE_OPS, _reduce),
    "AffineGrid": _affine_grid,
    "ArgMax": _arg_reduce,
    "BlackmanWindow": _fixed(1),
    "Col2Im": _col2im,
    "ArgMin": _arg_reduce,
    "Compress": _compress,
    "Concat": _any_input,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Det": _det,
    "Einsum": _einsum,
    "Expand": _expand,
    "EyeLike": _fixed(2),
    "Flatten": _fixed(2),
    "Gather": _gather,
    "GatherElements": _input(1),
    "GatherND": _gather_nd,
    "Gemm": _fixed(2),
    "HammingWindow": _fixed(1),
    "HannWindow": _fixed(1),
    "MatMul": _matmul,
    "MatMulInteger": _matmul,
    "MaxRoiPool": _fixed(4),
    "MelWeightMatrix": _fixed(2),
    "Multinomial": _fixed(2),
    "NegativeLogLikelihoodLoss": _loss,
    "NonMaxSuppression": _fixed(2),
    "NonZero": _fixed(2),
    "OneHot": _one_hot,
    "RandomNormal": _random,
    "RandomUniform": _random,
    "QLinearMatMul": _qlinear_matmul,
    "Range": _fixed(1),
    "Reshape": _reshape,
    "RoiAlign": _fixed(4),
    "Shape": _fixed(1),
    "Size": _fixed(0),
    "SequenceLength": _fixed(0),
    "STFT": _fixed(4),
    "Squeeze": _squeeze,
    "Transpose": _transpose,
    "Unsqueeze": _unsqueeze,
}


def _recurrent(q: RankQuery) -> tuple[int | None, ...]:
    """LSTM, GRU, RNN: Y [seq, dirs, batch, hidden] (or batch first), Y_h and Y_c 3-D."""
    return (4, 3, 3)


def _dynamic_quantize(q: RankQuery) -> tuple[int | None, ...]:
    """y has x's rank; its scale and zero point are scalars."""
    return (q.rank(0), 0, 0)


def _unique(q: RankQuery) -> tuple[int | None, ...]:
    """Y: the unique values (1-D), or subtensors along `axis` (x's rank); indices,
    inverse_indices and counts 1-D."""
    return (q.rank(0) if "axis" in q.node.attributes else 1, 1, 1, 1)


def _softmax_cross_entropy(q: RankQuery) -> tuple[int | None, ...]:
    """the loss as NegativeLogLikelihoodLoss's; log_prob has the scores' rank."""
    return (_loss(q), q.rank(0))


# ops whose outputs differ in rank: the rank of each output, in order
OUTPUT_RANKS: dict[str, Callable[[RankQuery], tuple[int | None, ...]]] = {
    "DynamicQuantizeLinear": _dynamic_quantize,
    "GRU": _recurrent,
    "LSTM": _recurrent,
    "RNN": _recurrent,
    "SoftmaxCrossEntropyLoss": _softmax_cross_entropy,
    "Unique": _unique,
}


# the input that gives these operators' output rank by its length
_SHAPED_BY = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0}


def unknown_rank_cause(value: ir.Value) -> str:
    """Why no rule gives the rank of `value`, in a few words (for a refusal): the cause where
    it arises, following the inputs of unknown rank back (`Relu(Reshape(v, s))`: "made from
    'r', made by Reshape to a shape of run-time length ..."), into the branches of an If and
    the body of a Loop."""
    source = value
    cause = _local_cause(source)
    carried: dict[ir.Value, int | None] = {}  # a Loop body's carried input -> its initial rank
    for _ in range(_MAX_STEPS_BACK):
        if cause is not None:
            break
        node = source.producer()
        assert node is not None  # else an input: a cause
        sources = _made_from(node, source, carried)
        unranked = [v for v in sources if v is not None and v.shape is None]
        if not unranked:
            cause = _ranked_sources_cause(node, sources)
            break
        source = unranked[0]
        cause = _local_cause(source)
        if source in carried:
            initial = carried[source]
            cause = (
                f"carried by a Loop from rank {initial}, which its body does not give back"
                if initial is not None
                else cause
            )
    if cause is None:
        cause = "made from values of unknown rank"
    return cause if source is value else f"made from '{source.name}', {cause}"


_MAX_STEPS_BACK = 16

# operators the rank analysis follows into their subgraphs or lists, not by a rule
_FOLLOWED = frozenset(
    {"If", "Loop", "Scan", "SequenceMap", "ConcatFromSequence", "SplitToSequence"}
)


def _made_from(
    node: ir.Node, value: ir.Value, carried: dict[ir.Value, int | None]
) -> list[ir.Value | None]:
    """What `value`, an output of `node`, is made from: the branches' outputs for an If, the
    initial value and what the body gives back for a Loop's carried value (its body input
    noted in `carried` with the initial rank), the body's output for its scan output; else
    the node's inputs."""
    index = value.index()
    inner = subgraphs(node) if node.domain == "" else []
    if node.op_type == "If" and len(inner) == 2 and index is not None:
        return [g.outputs[index] for g in inner if index < len(g.outputs)]
    if node.op_type == "Loop" and inner and index is not None:
        body, count = inner[0], len(node.inputs) - 2
        given = body.outputs[1 + index] if 1 + index < len(body.outputs) else None
        if index >= count or 2 + index >= len(body.inputs):
            return [given]
        initial = node.inputs[2 + index]
        shape = initial.shape if initial is not None else None
        carried[body.inputs[2 + index]] = None if shape is None else len(shape)
        return [initial, given]
    return list(node.inputs)


def _ranked_sources_cause(node: ir.Node, sources: list[ir.Value | None]) -> str:
    """The cause where every value `node`'s output is made from has a rank."""
    ranks = [len(v.shape) for v in sources if v is not None and v.shape is not None]
    if node.op_type == "If" and len(set(ranks)) > 1:
        return f"made by If, whose branches give ranks {ranks[0]} and {ranks[1]}"
    if node.op_type == "Loop" and len(set(ranks)) > 1:
        return f"made by Loop, which carries it from rank {ranks[0]} to {ranks[1]}"
    put = [len(v.shape) for v in sources[:2] if v is not None and v.shape is not None]
    if node.op_type == "SequenceInsert" and len(put) == 2 and put[0] != put[1]:
        return f"a tensor of rank {put[1]} put into a list of elements of rank {put[0]}"
    if node.op_type == "SequenceConstruct" and len(set(ranks)) > 1:
        return "made by SequenceConstruct of tensors of ranks " + ", ".join(map(str, ranks))
    return f"made by {node.op_type}, whose inputs' ranks do not fix its own"


def _local_cause(value: ir.Value) -> str | None:
    """Why `value`'s own operator gives no rank, or None when it is its inputs' fault."""
    node = value.producer()
    if node is None:
        return "an input of unknown rank"
    op = node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}"
    known = op in RANK_RULES or op in OUTPUT_RANKS or op in _FOLLOWED or op.startswith("Sequence")
    if node.domain != "" or not known:
        return f"made by {op}, which has no rank rule"
    if op in _SHAPED_BY:
        return f"made by {op} to a shape of run-time length: a rank known only at run time"
    if op == "Squeeze" and "axes" not in node.attributes and len(node.inputs) < 2:
        return "made by Squeeze without axes, which drops the dims of size 1"
    return None
