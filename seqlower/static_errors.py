"""Run-time errors of the ONNX spec that a file shows before it runs: a ConcatFromSequence whose
elements cannot be joined, a SplitToSequence by sizes it cannot cut, an axis out of range.

Concatenation needs the elements equal in every dim but the axis (in every dim with
new_axis=1). ONNX inference does not check the elements of a sequence, onnx.reference raises,
and onnxruntime pads the result with zeros: the model has no defined result. When the sizes
are known in the main graph (which always runs), the model is refused in one line:

    SplitToSequence(x[6, 3], split=[0, 6], axis=0) -> ConcatFromSequence(axis=1)   (0 vs 6 rows)
    SplitToSequence(x[5, 3], split=2, axis=0) -> ConcatFromSequence(new_axis=1)   (2, 2, 1 rows)
    SequenceConstruct(a[2, 3], b[2, 4]) -> ConcatFromSequence(axis=0)              (3 vs 4)

A split by constant sizes must cut its dim into chunks of no negative size (ONNX inference
checks only that they add up to the dim), and the axis of either operator must be within the
rank (ONNX inference lets an axis of 2**40 through; onnxruntime refuses it when run):

    SplitToSequence(x[6, 2], split=[-1, 7])                                        (negative)
    SplitToSequence(x[6, 2], axis=2**40)                                           (rank 2)

The shapes are the ones ONNX inference derives from the inputs and constants (the caller drops
declared intermediate shapes first).
"""

from __future__ import annotations

__all__ = ["concat_mismatch", "split_or_axis_problem", "static_problem"]

from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

Shape = tuple[int | None, ...]


def static_problem(graph: onnx.GraphProto, values: Mapping[str, onnx.ValueInfoProto]) -> str | None:
    """`split_or_axis_problem`, else `concat_mismatch`, for a main `graph` that passed the ONNX
    checker (each name made once): `values` are the inferred types by name (as
    `strict_inference` returns them); the graph's nodes are walked once for both checks."""
    nodes, shapes = _Nodes(graph), _Shapes(values)
    return _split_or_axis(nodes, shapes) or _mismatch(nodes, shapes)


def concat_mismatch(graph: onnx.GraphProto, values: Iterable[onnx.ValueInfoProto]) -> str | None:
    """The first ConcatFromSequence of the main `graph` whose elements' sizes differ where
    they must agree, described in a sentence; None when there is none. `values` are the types
    inference gave the main graph's values."""
    return _mismatch(_Nodes(graph), _Shapes(_by_name(values)))


def _mismatch(nodes: _Nodes, shapes: _Shapes) -> str | None:
    if not nodes.concats:
        return None
    for node in nodes.concats:
        source = nodes.source(node.input[0]) if node.input else None
        elements = _element_shapes(source, shapes, nodes) if source is not None else None
        if not elements:
            continue
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        axis, new_axis = int(attributes.get("axis", 0)), int(attributes.get("new_axis", 0)) == 1
        problem = _differing_dim(elements, axis, new_axis)
        if problem is not None:
            name = f" '{node.name}'" if node.name else ""
            return (
                f"ConcatFromSequence{name} joins elements (from {source.op_type}) whose sizes "
                f"differ on {problem}, where a concatenation needs them equal: the ONNX spec "
                "makes this a run-time error"
            )
    return None


def split_or_axis_problem(
    graph: onnx.GraphProto, values: Iterable[onnx.ValueInfoProto]
) -> str | None:
    """The first SplitToSequence or ConcatFromSequence of the main `graph` that the spec makes
    fail whenever it runs (see the module docstring), described in a sentence; None when there
    is none. `values` are the types inference gave the main graph's values."""
    return _split_or_axis(_Nodes(graph), _Shapes(_by_name(values)))


def _split_or_axis(nodes: _Nodes, shapes: _Shapes) -> str | None:
    for node in nodes.splits_and_concats:
        problem = (
            _split_problem(node, shapes, nodes)
            if node.op_type == "SplitToSequence"
            else _concat_axis_problem(node, shapes)
        )
        if problem is not None:
            name = f" '{node.name}'" if node.name else ""
            return f"{node.op_type}{name} {problem}: the ONNX spec makes this a run-time error"
    return None


def _split_problem(node: onnx.NodeProto, shapes: _Shapes, constants: _Nodes) -> str | None:
    data = shapes.get(node.input[0]) if node.input else None
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    axis = int(attributes.get("axis", 0))
    if data is not None and not -len(data) <= axis < len(data):
        return f"splits on axis {axis}, out of range for an input of rank {len(data)}"
    sizes = constants.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
    if sizes is None or sizes.ndim != 1 or sizes.dtype.kind not in "iu":
        return None
    if any(int(size) < 0 for size in sizes):  # ONNX inference checks only their sum
        return f"splits by sizes {_listed(sizes)}, one of them negative"
    return None


def _listed(sizes: np.ndarray) -> str:
    shown = ", ".join(str(int(size)) for size in sizes[:8])
    return f"[{shown}{', ...' if len(sizes) > 8 else ''}]"


def _concat_axis_problem(node: onnx.NodeProto, shapes: _Shapes) -> str | None:
    element = shapes.element(node.input[0]) if node.input else None
    if element is None:
        return None
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    axis, new_axis = int(attributes.get("axis", 0)), int(attributes.get("new_axis", 0)) == 1
    rank = len(element) + new_axis
    if -rank <= axis < rank:
        return None
    return f"joins on axis {axis}, out of range for elements of rank {len(element)}" + (
        " and a new axis" if new_axis else ""
    )


def _shape(info: onnx.ValueInfoProto) -> Shape | None:
    if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
        return None
    return tuple(
        dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None
        for dim in info.type.tensor_type.shape.dim
    )


def _by_name(values: Iterable[onnx.ValueInfoProto]) -> dict[str, onnx.ValueInfoProto]:
    """The values by name, the last one of a name counting."""
    return {info.name: info for info in values}


class _Shapes:
    """The inferred shape of each value by name, read when asked for (a model has many values
    and few concatenations)."""

    def __init__(self, values: Mapping[str, onnx.ValueInfoProto]) -> None:
        self._infos = values
        self._shapes: dict[str, Shape | None] = {}

    def element(self, name: str) -> Shape | None:
        """The shape the elements of the sequence `name` share, when inference gave one."""
        info = self._infos.get(name)
        if info is None or not info.type.HasField("sequence_type"):
            return None
        element = info.type.sequence_type.elem_type
        if not element.HasField("tensor_type") or not element.tensor_type.HasField("shape"):
            return None
        return tuple(
            dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None
            for dim in element.tensor_type.shape.dim
        )

    def get(self, name: str) -> Shape | None:
        if name not in self._shapes:
            info = self._infos.get(name)
            self._shapes[name] = _shape(info) if info is not None else None
        return self._shapes[name]


# the nodes whose outputs a ConcatFromSequence's elements are read from (`_element_shapes`)
_SOURCES = ("SequenceConstruct", "SplitToSequence")


class _Nodes:
    """What the checks read of the main graph's nodes, found in one walk of them: the
    SplitToSequence and ConcatFromSequence nodes in order, the ConcatFromSequence ones, the
    values fixed in the file (Constant outputs, and initializers that are not graph inputs,
    read when asked for) and the SequenceConstruct and SplitToSequence nodes by output.

    Only those two kinds are kept as producers: an element's shapes are read from no other
    (`_element_shapes`), and in a graph the checker passed each name is made by one node, so
    the producer of a name is the same as among all nodes; a ConcatFromSequence reading the
    empty name (only a node of an unchecked domain can) asks every node, the last one that
    leaves an output unnamed counting, as a lookup among all nodes would."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._graph = graph
        self.splits_and_concats: list[onnx.NodeProto] = []
        self.concats: list[onnx.NodeProto] = []
        self._constant_nodes: list[onnx.NodeProto] = []
        self._sources: dict[str, onnx.NodeProto] = {}
        for node in graph.node:
            op_type = node.op_type
            if op_type == "ConcatFromSequence":
                self.splits_and_concats.append(node)
                self.concats.append(node)
            elif op_type == "SplitToSequence":
                self.splits_and_concats.append(node)
            elif op_type == "Constant":
                self._constant_nodes.append(node)
            if op_type in _SOURCES:
                self._sources.update((output, node) for output in node.output)
        self._tensors: dict[str, onnx.TensorProto] | None = None  # found at the first question

    def source(self, name: str) -> onnx.NodeProto | None:
        """The node that makes `name` when it is a SequenceConstruct or a SplitToSequence."""
        if name == "":
            found = {output: node for node in self._graph.node for output in node.output}
            source = found.get(name)
            return source if source is not None and source.op_type in _SOURCES else None
        return self._sources.get(name)

    def _found(self) -> dict[str, onnx.TensorProto]:
        graph = self._graph
        inputs = {info.name for info in graph.input}
        tensors = {t.name: t for t in graph.initializer if t.name not in inputs}
        for node in self._constant_nodes:
            attributes = list(node.attribute)
            if [a.name for a in attributes] == ["value"]:
                tensors[node.output[0]] = attributes[0].t
        return tensors

    def get(self, name: str) -> np.ndarray | None:
        """The value fixed in the file under `name`, when it may be a split's sizes."""
        if self._tensors is None:
            self._tensors = self._found()
        tensor = self._tensors.get(name)
        if tensor is None or tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        if len(tensor.dims) > 1 or (tensor.dims and tensor.dims[0] > 4096):
            return None  # not a split's sizes
        return numpy_helper.to_array(tensor)


def _element_shapes(
    source: onnx.NodeProto, shapes: _Shapes, constants: _Nodes
) -> list[Shape] | None:
    if source.op_type == "SequenceConstruct":
        found = [shapes.get(name) for name in source.input]
        return None if any(shape is None for shape in found) else found  # type: ignore[return-value]
    if source.op_type != "SplitToSequence" or len(source.input) < 2 or not source.input[1]:
        return None
    data, sizes = shapes.get(source.input[0]), constants.get(source.input[1])
    if data is None or sizes is None or sizes.ndim > 1:
        return None
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in source.attribute}
    rank = len(data)
    axis = int(attributes.get("axis", 0))
    if not -rank <= axis < rank:
        return None
    axis %= rank
    length = data[axis]
    if sizes.ndim == 0:  # chunks of this size, the last one smaller
        size = int(sizes)
        if length is None or size <= 0:
            return None
        chunks = [size] * (length // size) + ([length % size] if length % size else [])
    else:
        chunks = [int(size) for size in sizes]
    return [(*data[:axis], chunk, *data[axis + 1 :]) for chunk in chunks]


def _differing_dim(elements: list[Shape], axis: int, new_axis: bool) -> str | None:
    if len({len(shape) for shape in elements}) != 1:
        return None  # ranks differ: inference or the runtime says so
    rank = len(elements[0])
    if not new_axis and not -rank <= axis < rank:
        return None
    joined = None if new_axis else axis % rank
    for dim in range(rank):
        sizes = sorted({shape[dim] for shape in elements if shape[dim] is not None})
        if dim != joined and len(sizes) > 1:
            return f"dimension {dim} ({', '.join(str(size) for size in sizes)})"
    return None
