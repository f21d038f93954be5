"""Shape inference of what a lowering sweep rewrote, instead of the whole model.

After a sweep that rewrote something, `LowerSequencesPass` needs the shapes of the new values.
ONNX inference of the whole model (`normalize.infer_shapes`, a protobuf round trip) takes a
second and more at 100k nodes, although a sweep changes a small part. `infer_region` infers a
small model made of the nodes the sweep emitted or rewired (the region) and of the nodes that
read their outputs (the boundary), and keeps the result only when it is provably what inference
of the whole model gives, so that the output stays the same bytes whichever way its shapes were
found (a second lowering, which infers the whole model, must give the same bytes: idempotence).
Otherwise it answers False and the caller infers the whole model. Why the answers agree:

- the small model's inputs carry the shapes the last whole-model inference gave (a `ShapeStamp`
  on the model says they are current), and it holds copies of the Constant nodes and small
  initializers it reads: it knows no more than the whole model does, so a shape it infers in
  full (every dim a number, or a name that an input carries) is the one the whole model gives;
- every boundary node must get back exactly the shapes it had, and pass no new content onward
  (ONNX data propagation, `DATA_PROPAGATING_OPS`; a Shape or Size of a new value is refused):
  nothing downstream of the boundary can change;
- the extra rounds of `infer_shapes` (shape arguments folded by seqlower, loop-carried shapes)
  play no part: a stamp is only written when the whole-model inference left no shape argument
  to fold, saw no Loop, and was not cut into runs that data propagation does not cross; a shape
  reader in the region or on the boundary must come out with static dims.
"""

from __future__ import annotations

__all__ = [
    "STAMP_KEY",
    "ShapeStamp",
    "current_stamp",
    "forget_stamp",
    "infer_region",
    "may_carry_content",
    "write_stamp",
]

import dataclasses
import logging
from collections.abc import Collection, Iterable

import onnx
import onnx_ir as ir

from seqlower.ops import graph_nodes, has_subgraph
from seqlower.passes.chunked_inference import (
    DATA_PROPAGATING_OPS,
    SMALL_INITIALIZER_BYTES,
    SUBGRAPH_LIMIT,
)
from seqlower.passes.data_prop_bound import data_prop_is_bounded
from seqlower.passes.inferred_types import TypeReader, dim_names

logger = logging.getLogger(__name__)

STAMP_KEY = "seqlower.shape_stamp"
"""Key of the `ShapeStamp` in `ir.Model.meta` (in memory only; never serialized)."""

# outputs whose content inference may know: data propagation, and constants
_CONTENT_OPS = DATA_PROPAGATING_OPS | {"Constant"}
# readers of a value's shape as content: their output changes when the shape does
_SHAPE_AS_CONTENT = frozenset({"Shape", "Size"})
# operators whose output content inference may know whatever they read
_CONTENT_SOURCES = _SHAPE_AS_CONTENT | {"Constant"}
_CONTENT_DEPTH = 8  # producers followed back before `may_carry_content` answers yes


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeStamp:
    """Written after a whole-model inference whose shapes a region inference may extend.

    The shapes are current while the main graph holds the same `nodes`, `inputs` and `outputs`
    (a pass that edits nodes in place must `forget_stamp`); `carriers` are the main-graph nodes
    that held subgraphs then.
    """

    nodes: tuple[ir.Node, ...]
    inputs: tuple[ir.Value, ...]
    outputs: tuple[ir.Value, ...]
    carriers: tuple[ir.Node, ...]


def write_stamp(model: ir.Model, carriers: Iterable[ir.Node]) -> None:
    """Record that the model's shapes are what whole-model inference gives now."""
    graph = model.graph
    model.meta[STAMP_KEY] = ShapeStamp(
        nodes=tuple(graph),
        inputs=tuple(graph.inputs),
        outputs=tuple(graph.outputs),
        carriers=tuple(node for node in carriers if node.graph is graph),
    )


def current_stamp(model: ir.Model) -> ShapeStamp | None:
    """The model's stamp if its main graph has not changed since it was written."""
    stamp = model.meta.get(STAMP_KEY)
    if not isinstance(stamp, ShapeStamp):
        return None
    graph = model.graph
    if (
        stamp.inputs != tuple(graph.inputs)
        or stamp.outputs != tuple(graph.outputs)
        or stamp.nodes != tuple(graph)
    ):
        return None
    return stamp


def forget_stamp(model: ir.Model) -> None:
    model.meta.pop(STAMP_KEY, None)


def may_carry_content(value: ir.Value) -> bool:
    """Whether ONNX inference may know the content of `value` (data propagation, constants).

    A Constant, Shape or Size gives content. The other data-propagating operators (Concat,
    Unsqueeze, Add...) pass on only what they read, so their output has none when none of
    their inputs can have any: ONNX's data propagation knows the content of an initializer or
    constant, of what propagation gave, and of a 1-D tensor of static length (as unknown
    elements), nothing else (`DataPropagationContextImpl::getInputData`). A tensor of rank 2
    or more made by any other operator (a Relu, a MatMul) has none; a Concat of such tensors
    has none either. Beyond `_CONTENT_DEPTH` producers the answer is yes."""
    return _may_carry_content(value, _CONTENT_DEPTH)


def _may_carry_content(value: ir.Value, depth: int) -> bool:
    producer = value.producer()
    if producer is None or producer.op_type not in _CONTENT_OPS:
        return False
    if producer.op_type in _CONTENT_SOURCES or depth == 0:
        return True
    return any(_has_data(v, depth - 1) for v in producer.inputs if v is not None)


def _has_data(value: ir.Value, depth: int) -> bool:
    """Whether ONNX's data propagation may know something of `value`'s content."""
    shape = value.shape
    if shape is None or len(shape) <= 1:  # a vector (or a scalar) may be known element-wise
        return True
    producer = value.producer()
    if producer is None:  # an initializer's content is known only up to rank 1
        return False
    return _may_carry_content(value, depth)


def infer_region(
    model: ir.Model,
    touched: Iterable[ir.Node],
    rewired: Iterable[ir.Node],
    stamp: ShapeStamp,
    shape_readers: Collection[str],
    *,
    content_moved: bool,
) -> bool:
    """Infer the output shapes of the `touched` nodes (emitted or rewritten since `stamp`'s
    inference; removed ones included) that are still in the main graph; the `rewired` nodes
    (whose inputs a rewrite replaced) and the readers of the touched nodes' outputs must keep
    their shapes. True when done; False when the whole model must be inferred instead (nothing
    was changed then). `shape_readers`: operators whose output shape depends on the content of
    an input, for which `normalize.infer_shapes` may fold that input: their outputs must come
    out static. `content_moved`: a replaced value, or one that replaced it, may carry content
    (`may_carry_content`)."""
    graph = model.graph
    if sum(1 for node in stamp.carriers if node.graph is graph) > SUBGRAPH_LIMIT:
        return False  # the whole model would be inferred in runs (chunked_inference)
    region: dict[ir.Node, None] = {}
    for node in touched:
        if node.graph is None:
            continue  # removed
        if node.graph is not graph or node.domain != "" or has_subgraph(node):
            return False
        region[node] = None
    readers = [(node, False) for node in rewired if node.graph is not None]
    for node in region:
        for value in node.outputs:
            content = may_carry_content(value)
            readers += [(use.node, content) for use in value.uses()]
    boundary: dict[ir.Node, None] = {}
    for reader, content in readers:
        if reader in region or reader in boundary:
            continue
        if not _keeps_shapes(reader, graph, content or content_moved):
            return False
        boundary[reader] = None
    if not region and not boundary:
        return True
    ordered = [node for node in graph_nodes(graph) if node in region or node in boundary]
    inferred = _infer(model, ordered)
    if inferred is None:
        return False
    types, inherited = inferred
    return _take(ordered, region, types, inherited, shape_readers)


def _keeps_shapes(reader: ir.Node, graph: ir.Graph, content: bool) -> bool:
    """Whether a boundary node whose output shapes stay the same changes nothing downstream:
    it is in the main graph, holds no subgraph and passes on no content that may have changed
    (`content`: what it reads may carry content); a Shape or Size passes on a shape."""
    return (
        reader.graph is graph
        and reader.domain == ""
        and not has_subgraph(reader)
        and reader.op_type not in _SHAPE_AS_CONTENT
        and not (content and reader.op_type in DATA_PROPAGATING_OPS)
    )


def _infer(
    model: ir.Model, ordered: list[ir.Node]
) -> tuple[dict[str, onnx.TypeProto], set[str]] | None:
    """ONNX inference of `ordered` alone: the inferred type of each output by name, and the dim
    names its inputs carry. None when inference fails."""
    proto = onnx.ModelProto(ir_version=model.ir_version)
    for domain, version in model.opset_imports.items():
        proto.opset_import.add(domain=domain, version=version)
    region_graph = proto.graph
    region_graph.name = "region"
    produced = {output for node in ordered for output in node.outputs}
    free: dict[ir.Value, None] = {}
    for node in ordered:
        free.update((value, None) for value in node.inputs if value is not None)
    inherited: set[str] = set()
    constants: list[ir.Node] = []
    for value in free:
        if value in produced:
            continue
        if not value.name:
            return None
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.domain == "":
            constants.append(producer)
            continue
        if value.type is None:
            continue  # unknown to whole-model inference too
        ir.serde.serialize_value_into(region_graph.input.add(), value)
        inherited.update(dim_names(value.shape))
        # an overridable initializer (also a model input) is not a constant to inference
        overridable = value.is_graph_input()
        tensor = value.const_value if value.is_initializer() and not overridable else None
        if tensor is not None and tensor.nbytes <= SMALL_INITIALIZER_BYTES:
            ir.serde.serialize_tensor_into(region_graph.initializer.add(), tensor)
    for node in [*constants, *ordered]:
        ir.serde.serialize_node_into(region_graph.node.add(), node)
    # inference reads the bytes (it serializes a ModelProto itself): the message goes first,
    # one copy of the region fewer while inference holds its own
    bounded = data_prop_is_bounded(region_graph)  # see passes/data_prop_bound.py
    data = proto.SerializeToString()
    del proto, region_graph
    try:
        inferred = onnx.shape_inference.infer_shapes(data, strict_mode=False, data_prop=bounded)
    except Exception as error:  # the whole model's inference is the judge
        logger.debug("region inference failed: %s", error)
        return None
    types = {info.name: info.type for info in inferred.graph.value_info}
    return types, inherited


def _take(
    ordered: list[ir.Node],
    region: dict[ir.Node, None],
    types: dict[str, onnx.TypeProto],
    inherited: set[str],
    shape_readers: Collection[str],
) -> bool:
    """Check the inferred shapes (complete, and unchanged on the boundary); if they pass, give
    them to the region's outputs, as `normalize._merge_shapes` would."""
    reader = TypeReader()
    updates: list[tuple[ir.Value, ir.Shape, ir.TypeProtocol]] = []
    for node in ordered:
        static_only = node.op_type in shape_readers
        for value in node.outputs:
            if not value.name:
                continue
            found = types.get(value.name)
            if found is None:
                return False
            shape, type_ = reader.read(found)
            if shape is None:
                return False
            if not isinstance(type_, ir.TensorType) and (
                node in region or not _same_sequence_type(value, type_)
            ):
                return False  # a boundary node may give a list, of the element type it had
            for dim in shape:
                if not isinstance(dim, int) and (static_only or dim.value not in inherited):
                    return False
            if node in region:
                if value.shape is not None and len(value.shape) != len(shape):
                    return False  # `may_carry_content` judged it by the rank declared
                updates.append((value, shape, type_))
            elif value.type is None or value.shape != shape:
                return False
    for value, shape, type_ in updates:
        value.shape = shape
        if value.type is None:
            value.type = type_
    return True


def _same_sequence_type(value: ir.Value, type_: ir.TypeProtocol) -> bool:
    """Whether `type_` is a list of tensors, and `value`'s type (the element shape, compared by
    the caller, is `value.shape`)."""
    return (
        isinstance(type_, ir.SequenceType)
        and isinstance(type_.elem_type, ir.TensorType)
        and value.type == type_
    )
