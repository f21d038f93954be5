"""Whether ONNX data propagation stays bounded on a model given to inference.

ONNX data propagation (`infer_shapes(..., data_prop=True)`) carries the content of small
integer vectors (shape arithmetic) as a `TensorShapeProto`, one dim per element. A 1-D value of
unknown content read by a data-propagating operator (`DATA_PROPAGATING_OPS`: Cast, Add, Gather,
Concat, ...) becomes a vector of n unknown dims, so inference takes time and memory in
proportion to the value's *declared length*, not to the file: a Cast of an input declared
int64[10**9] runs for minutes and gigabytes from a 200-byte file (onnx 1.18 to 1.23: about
0.12 s per 10**6 elements at each such operator), and a Reshape to it is inferred with a rank
of 10**9. The lengths come from declared types, constants (Range(0, 10**9)) and the shapes
inference wrote into the IR before.

`data_prop_is_bounded(graph)` says whether no data-propagating node of `graph` (its subgraphs
included) reads a value whose type, as the graph declares it (inputs, value_info, outputs,
initializers), is 1-D and longer than `MAX_PROPAGATED_LENGTH`; when it says no, the caller
infers without data propagation (less folding of shapes, never a wrong one: what propagation
would have carried is a vector far longer than any shape). Names are read model-wide (one name
in two scopes counts if either is long): a false alarm only turns propagation off.

    Cast(x: int64[10**9]) -> infer_shapes(data_prop=True)  :  minutes, gigabytes
    data_prop_is_bounded(graph) == False -> infer_shapes(data_prop=False)  :  milliseconds

`long_shape_read(graph)` is the input check's refusal, before any inference, of a Reshape or
ConstantOfShape reading its shape from such a vector (onnx 1.18 infers it with one dim per
element even without propagation):

    Reshape(x, Cast(r: int64[10**9]))  ->  exit 2: "Reshape '' reads its shape from 'c',
    1000000000 long: a tensor of more than 65536 dims is not something seqlower reads"
"""

from __future__ import annotations

__all__ = [
    "DATA_PROPAGATING_OPS",
    "MAX_PROPAGATED_LENGTH",
    "data_prop_is_bounded",
    "long_shape_read",
]

import struct
from collections.abc import Callable, Iterable, Sequence

import onnx

# a vector longer than this is no shape (ranks stay in the tens) and carries nothing folds read
# (static values are read up to 4,096 elements); at this length each propagating operator costs
# onnx some 8 ms
MAX_PROPAGATED_LENGTH = 1 << 16

# Default-domain operators with an ONNX data propagation function (onnx 1.23; a test checks the
# list against the installed onnx): their outputs may carry content that inference reads later.
DATA_PROPAGATING_OPS = frozenset(
    {"Add", "Cast", "Concat", "Gather", "Mul", "Shape", "Size", "Slice", "Squeeze", "Sub"}
    | {"Unsqueeze"}
)


# operators whose output length is their input's content: given a constant above
# MAX_PROPAGATED_LENGTH, inference makes a long vector within the same call
_LENGTH_FROM_CONTENT = frozenset({"ConstantOfShape", "Expand", "Range", "Tile"})
# element-wise operators: a long input makes a long output
_SAME_LENGTH = frozenset(
    {"Abs", "Add", "Cast", "CastLike", "Ceil", "Clip", "Div", "Floor", "Identity", "Max"}
    | {"Min", "Mod", "Mul", "Neg", "Relu", "Round", "Sign", "Sub"}
)
_SMALL_CONSTANT = 16  # constants of more elements are no lengths: not read


# where a shape is read: ONNX infers an output of one dim per element there (onnx 1.18 does so
# even without data propagation, from the length its type declares: 5.5 s per 10**6 dims)
_SHAPE_INPUTS = {"Reshape": 1, "ConstantOfShape": 0}


def data_prop_is_bounded(graph: onnx.GraphProto) -> bool:
    """False when a data-propagating node of `graph` or its subgraphs reads a value declared
    1-D and longer than MAX_PROPAGATED_LENGTH, or a ConstantOfShape, Expand, Range or Tile that
    reads a constant above it (see the module docstring). One walk."""
    return _first_long_read(graph, _propagating_reads) is None


def long_shape_read(graph: onnx.GraphProto) -> str | None:
    """Why `graph` is refused before any inference, or None: a Reshape or ConstantOfShape (in
    any subgraph) reads its shape from a vector longer than MAX_PROPAGATED_LENGTH (declared so,
    or made from a constant above it): the output's rank would be that length, and ONNX
    inference spends time and memory on each of its dims (onnx 1.18: minutes and gigabytes at
    10**7 from a 200-byte file)."""
    found = _first_long_read(graph, _shape_reads)
    if found is None:
        return None
    node, name, length = found
    what = f"{length} long" if length else "made from a constant above the limit"
    return (
        f"{node.op_type} {node.name!r} reads its shape from '{name}', {what}: a tensor of more "
        f"than {MAX_PROPAGATED_LENGTH} dims is not something seqlower reads"
    )


def _propagating_reads(node: onnx.NodeProto) -> Sequence[str]:
    return node.input if node.op_type in DATA_PROPAGATING_OPS else ()


def _shape_reads(node: onnx.NodeProto) -> Sequence[str]:
    position = _SHAPE_INPUTS.get(node.op_type)
    if position is None or len(node.input) <= position:
        return ()
    return (node.input[position],)


def _first_long_read(
    graph: onnx.GraphProto, reads: Callable[[onnx.NodeProto], Sequence[str]]
) -> tuple[onnx.NodeProto, str, int] | None:
    """The first default-domain node of `graph` or its subgraphs that reads, at the inputs
    `reads` names, a value declared 1-D and longer than MAX_PROPAGATED_LENGTH, made by a
    ConstantOfShape, Expand, Range or Tile from a constant above it, or computed element-wise
    from such a value: (node, value, its length or 0 where not known). Declarations of every
    graph count for every graph (a false alarm only makes the caller careful).

    Almost every graph holds no long value at all: a first walk finds the long values alone
    (what nodes read is not listed), and only when it finds one does a second walk list the
    reads, which gives the same long values (the same walk, in the same order)."""
    if not _long_values(graph, None):
        return None
    pending: list[tuple[onnx.NodeProto, str]] = []  # reads of names not yet known long
    long = _long_values(graph, lambda node: pending.extend((node, n) for n in reads(node) if n))
    for node, name in pending:  # after the walk: a value_info may come after its reader
        if name in long:
            return node, name, long[name]
    return None


def _long_values(
    graph: onnx.GraphProto, read: Callable[[onnx.NodeProto], object] | None
) -> dict[str, int]:
    """The names of `graph` and its subgraphs declared 1-D and long (their length), or made
    long (0); `read(node)` is called on each default-domain node, in walk order, when given."""
    long: dict[str, int] = {}
    big: set[str] = set()  # integer constants holding a value above MAX_PROPAGATED_LENGTH
    graphs = [graph]
    while graphs:  # a graph is walked before the subgraphs it holds (outer constants first)
        current = graphs.pop()
        for infos in (current.input, current.value_info, current.output):
            for info in infos:
                dims = info.type.tensor_type.shape.dim
                if len(dims) == 1 and dims[0].dim_value > MAX_PROPAGATED_LENGTH:
                    long[info.name] = dims[0].dim_value
        for tensor in current.initializer:
            if len(tensor.dims) == 1 and tensor.dims[0] > MAX_PROPAGATED_LENGTH:
                long[tensor.name] = tensor.dims[0]
            elif _holds_big_integer(tensor):
                big.add(tensor.name)
        for node in current.node:
            if node.attribute:  # most nodes hold no subgraph: looked at quickly
                for attr in node.attribute:
                    if attr.HasField("g"):
                        graphs.append(attr.g)
                    elif attr.graphs:
                        graphs.extend(attr.graphs)
            if node.domain not in ("", "ai.onnx"):
                continue
            if read is not None:
                read(node)
            op = node.op_type
            if op == "Constant":
                if node.output and _constant_is_big(node):
                    big.add(node.output[0])
            elif op in _LENGTH_FROM_CONTENT:
                if big and not big.isdisjoint(node.input):
                    long.update((name, 0) for name in node.output)
            elif long and op in _SAME_LENGTH and node.output:
                length = next((long[name] for name in node.input if name in long), None)
                if length is not None:
                    long[node.output[0]] = length
    return long


def _constant_is_big(node: onnx.NodeProto) -> bool:
    for attr in node.attribute:
        if attr.name == "value":
            return _holds_big_integer(attr.t)
        if attr.name == "value_int":
            return abs(attr.i) > MAX_PROPAGATED_LENGTH
        if attr.name == "value_ints":
            ints = attr.ints
            return len(ints) <= _SMALL_CONSTANT and any(
                abs(i) > MAX_PROPAGATED_LENGTH for i in ints
            )
    return False


def _holds_big_integer(tensor: onnx.TensorProto) -> bool:
    """Whether a small integer tensor holds a value above MAX_PROPAGATED_LENGTH (read from its
    fields directly: numpy_helper.to_array costs ten times more, on every Constant)."""
    form = _INTEGER_TYPES.get(tensor.data_type)
    if form is None or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    count = 1
    for dim in tensor.dims:
        count *= dim
    if not 0 < count <= _SMALL_CONSTANT:
        return False
    raw = tensor.raw_data
    if raw:
        if len(raw) != count * struct.calcsize(form):
            return False  # malformed: the checker's to report
        values: Iterable[int] = struct.unpack(f"<{count}{form}", raw)
    elif form in "qQ":
        values = tensor.int64_data if form == "q" else tensor.uint64_data
    else:
        values = tensor.int32_data if form == "i" else tensor.uint64_data
    return any(abs(v) > MAX_PROPAGATED_LENGTH for v in values)


_INTEGER_TYPES = {  # struct formats of the integer types a length may have
    onnx.TensorProto.INT64: "q",
    onnx.TensorProto.INT32: "i",
    onnx.TensorProto.UINT64: "Q",
    onnx.TensorProto.UINT32: "I",
}
