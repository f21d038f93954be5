"""Check a model as it was read from its file, before onnx_ir sees it.

onnx_ir re-serializes what it reads: a duplicated attribute collapses to one, a sparse
initializer disappears. So the model is checked as the protobuf that was parsed:

1. the ONNX checker (structure: attributes, names, opsets, node specs); with the model's path
   when there is one, so that external data is looked up in the model's folder. An output of
   the main graph declared with no shape, which the checker requires, is let through when the
   model passes without it: the lowering declares its rank or refuses it
   (`seqlower.output_ranks`);
2. ONNX type and shape inference in strict mode, with type checking (what `full_check` adds):
   a sequence given where an operator wants a tensor, branches of different types, a split
   whose sizes do not add up to a known dimension. Declared shapes of intermediate values
   and outputs are hints that exporters often get wrong (onnxruntime ignores them), so a
   disagreement with a declared shape is not held against the model;
3. what onnx_ir cannot represent (sparse tensors) is refused by name;
4. names and doc strings must be UTF-8 (`check_input_text`, on the IR once it is built);
5. a ConcatFromSequence whose elements' known sizes cannot be joined, a split by a negative
   constant size, an axis out of range (`static_errors`); a Loop whose condition has another
   rank than its body declares for it, which onnxruntime refuses to load (`loop_condition`);
6. model-local functions calling each other so often that inlining them (as inference does)
   would make far more nodes than the file holds is refused before inference
   (`inlined_size`; a `ModelInputError`: the model may be valid, seqlower does not read it).

A failure is an `InvalidModelError` whose one line says that the input model itself is
invalid and what the checker found.
"""

from __future__ import annotations

__all__ = [
    "FULL_CHECK_LIMIT_BYTES", "check_input_proto", "check_input_text", "errors_held",
    "forget_declared_shapes", "one_line",
]  # fmt: skip

import os
import re
from collections.abc import Iterable

import onnx
import onnx.shape_inference
import onnx_ir as ir
from google.protobuf.message import Message

from seqlower.errors import InvalidModelError, ModelInputError
from seqlower.inlined_size import too_many_inlined
from seqlower.keepdims_corner import may_be_corner, squeeze_keepdims_corners
from seqlower.loop_condition import loop_condition_problem
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.chunked_inference import SMALL_INITIALIZER_BYTES
from seqlower.passes.data_prop_bound import long_shape_read
from seqlower.proto_fields import set_field
from seqlower.static_errors import static_problem
from seqlower.strict_inference import inferred_in_runs, node_subgraphs, strict_inference

# strict inference needs a copy of the model (its weights left out, `_without_weights`):
# above this size of the copy only the checker runs
FULL_CHECK_LIMIT_BYTES = 512 * 1000 * 1000

# an exporter's declared shape that inference contradicts: tolerated, onnxruntime ignores it
_DECLARED_SHAPE = re.compile(r"Inferred shape and existing shape differ")
# an input whose type is unknown because inference failed before it: the first failure says why
_NULL = re.compile(r"(?:is|Current type is) null")
# external data stays in its file for the inference copy: what it cannot read is no error
_EXTERNAL = re.compile(r"external data", re.IGNORECASE)
# one error of strict inference: (op_type:Op, node name: name): [KindError] what is wrong
_LOCATED = re.compile(
    r"\(op_type:(\w+)(?:, node name: (.*?))?\): (?:\[(?:Shape|Type)InferenceError\] )?(.*)$"
)
# onnx's words for an input of a type the operator does not take, and ours
_WRONG_TYPE = re.compile(r"(\w+) typestr: \w+, has unsupported type: (\S+)")
_WRONG_TYPE_SAID = r"its input '\1' is a \2, a type this operator does not accept"


def check_input_proto(
    proto: onnx.ModelProto,
    where: str,
    path: str | os.PathLike | None = None,
    *,
    external: bool = True,
    split_keepdims: str = "onnxruntime",
) -> None:
    """Raise `InvalidModelError` when the model as read is invalid (see the module docstring).
    `path` is the file `proto` was read from, if any; `external=False` says that no tensor of
    the model keeps its data in a file (only such a tensor needs the file's folder);
    `split_keepdims` is how a scalar split of 1 with keepdims=0 is read (`Options`): read as
    onnxruntime reads it, inference sees the axis squeezed (`keepdims_corner`). First, each
    negative dim `proto` declares is made unknown in place (`_forget_negative_dims`), in the
    walk of its graphs that refuses sparse tensors."""
    _forget_negative_dims(_graphs_refusing_sparse(proto, where), proto)
    copy, weights = _weightless(proto)
    checked: onnx.ModelProto | str = proto if path is None else os.fspath(path)
    if (path is None or not external) and _checks_alike(proto, weights):
        checked = copy
    shapeless = _shapeless_outputs(proto.graph)
    checked_proto = checked if isinstance(checked, onnx.ModelProto) else proto
    try:
        onnx.checker.check_model(checked, full_check=False)
    except (onnx.checker.ValidationError, ValueError) as error:
        found: Exception | None = error
        if shapeless and "Field 'shape' of 'type' is required" in str(error):
            found = _error_but_shapeless_outputs(checked_proto, shapeless)
        if found is not None:
            raise InvalidModelError(
                f"{where}: the input model itself is invalid, the ONNX checker rejects it: "
                f"{one_line(found)}{_shapeless_said(proto.graph, str(found))}"
            ) from None
        _drop_outputs(copy.graph, shapeless)  # declared after lowering (`output_ranks`)
    if (too_many := too_many_inlined(proto)) is not None:  # before inference, which inlines
        raise ModelInputError(f"{where}: {too_many}")
    if (long_shape := long_shape_read(proto.graph)) is not None:  # before any inference
        raise ModelInputError(f"{where}: {long_shape}")
    if copy.ByteSize() > FULL_CHECK_LIMIT_BYTES:
        return
    corners = forget_declared_shapes(copy.graph)
    for function in copy.functions:
        corners = _forget_in_nodes(function.node) or corners
    if split_keepdims == "onnxruntime" and corners:
        squeeze_keepdims_corners(copy)
    try:
        values = strict_inference(copy)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        errors = errors_held(str(error))
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise InvalidModelError(
                f"{where}: the input model itself is invalid, ONNX type and shape inference "
                f"reject it: {one_line(errors[0])}{more}"
            ) from None
        values = _lenient_inference(copy)  # only tolerated errors: the shapes inference has
    except ValueError as error:  # what onnx raises for an undefined element type (dtype = 0)
        raise InvalidModelError(
            f"{where}: the input model itself is invalid, ONNX type and shape inference "
            f"reject it: {one_line(error)}"
        ) from None
    # the nodes, inputs and initializers of the model as read (the copy lacks the weights,
    # and inference types initializers only where they are inputs)
    if weights:
        values = {name: value for name, value in values.items() if name not in weights}
    problem = static_problem(proto.graph, values) or loop_condition_problem(proto.graph, values)
    if problem is not None:
        raise InvalidModelError(f"{where}: the input model itself is invalid: {problem}")


def _shapeless_outputs(graph: onnx.GraphProto) -> list[str]:
    """The main graph's tensor outputs declared with an element type but no shape (the
    checker requires a shape; PyTorch's TorchScript exporter writes none where it lost the
    rank)."""
    return [
        value.name
        for value in graph.output
        if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")
    ]


def _error_but_shapeless_outputs(proto: onnx.ModelProto, shapeless: list[str]) -> Exception | None:
    """What the checker finds in the model without its `shapeless` outputs, if anything. A
    model it then passes is lowered, and each such output declared with the rank seqlower
    proves (`seqlower.output_ranks`), or refused there."""
    pruned = onnx.ModelProto()
    pruned.CopyFrom(proto)
    _drop_outputs(pruned.graph, shapeless)
    try:
        onnx.checker.check_model(pruned, full_check=False)
    except (onnx.checker.ValidationError, ValueError) as error:
        return error
    return None


def _drop_outputs(graph: onnx.GraphProto, names: list[str]) -> None:
    kept = [value for value in graph.output if value.name not in names]
    del graph.output[:]
    graph.output.extend(kept)


def _shapeless_said(graph: onnx.GraphProto, error: str) -> str:
    """For the checker's "Field 'shape' of 'type' is required but missing": which of the
    model's inputs and outputs declare a tensor type without a shape, which the checker
    requires of them (onnxruntime does not; PyTorch's TorchScript exporter writes such an
    output where it lost the rank)."""
    if "Field 'shape' of 'type' is required" not in error:
        return ""
    named = [
        f"{kind} '{value.name}'"
        for kind, values in (("input", graph.input), ("output", graph.output))
        for value in values
        if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")
    ]
    if not named:
        return ""
    more = f" and {len(named) - 1} more" if len(named) > 1 else ""
    return (
        f" ({named[0]}{more} of the model declares an element type but no shape; declare its "
        "rank (a scalar's shape is empty) where the model is exported, or in the file with onnx)"
    )


def _without_weights(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, set[str]]:
    """A copy of `proto` for inference, in which each large floating-point initializer of the
    main graph is a graph input of its type and dims instead: inference reads the content of
    integer tensors only (shape arguments, split sizes) and of small ones (a Resize's scales),
    and copying and serializing the weights was most of the check's time on large models.
    Also returns the names of those initializers."""
    copy, weights = _weightless(proto)
    return copy, set(weights)


def _weightless(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """`_without_weights`, with the bytes of raw data of each initializer left out."""
    copy = onnx.ModelProto()
    graph = proto.graph
    inputs = {value.name for value in graph.input}
    raw = [_raw_size(tensor) for tensor in graph.initializer]
    moved = [
        tensor.name not in inputs and _is_weight(tensor, size)
        for tensor, size in zip(graph.initializer, raw)
    ]
    if not any(moved):  # copied in one step (field by field takes longer on large graphs)
        copy.CopyFrom(proto)
        return copy, {}
    _copy_fields(proto, copy, skip="graph")
    target = copy.graph
    _copy_fields(graph, target, skip="initializer")
    weights: dict[str, int] = {}
    for tensor, weight, size in zip(graph.initializer, moved, raw):
        if not weight:
            target.initializer.append(tensor)
            continue
        target.input.append(
            onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
        )
        weights[tensor.name] = size
    return copy, weights


def _checks_alike(proto: onnx.ModelProto, weights: dict[str, int]) -> bool:
    """Whether the ONNX checker passes or fails the weight-less copy (`_without_weights`)
    exactly as it does the model, with the same first error, so that the weights need not be
    read again (the checker given a path reads and parses the whole file once more: a quarter
    of a second to a second for a 240 MB detector).

    The checker looks at the main graph's inputs, then its initializers in order (each name
    given and not given before; each tensor on its own; for IR version 3 and older, each also
    an input), then the nodes, every name defined so far counting the same whether an input or
    an initializer defined it. So the copy checks alike when the IR version is 4 or newer,
    every initializer name is given once, and every tensor left out provably passes the
    tensor check (`_passes_tensor_check`): what is checked before, between and after the
    weights is then the same, in the same order. Only an external tensor reads the file's
    folder; the caller says whether there is one."""
    if not weights or proto.ir_version < 4:
        return False
    graph = proto.graph
    names = [tensor.name for tensor in graph.initializer]
    if not all(names) or len(set(names)) != len(names):
        return False
    moved = (tensor for tensor in graph.initializer if tensor.name in weights)
    return all(_passes_tensor_check(tensor, weights[tensor.name]) for tensor in moved)


# the field the checker wants a tensor's values in, when not in raw_data, and the bytes of
# one element in raw_data, for each type `_is_weight` leaves out
_VALUE_FIELD = {
    onnx.TensorProto.FLOAT: ("float_data", 4),
    onnx.TensorProto.DOUBLE: ("double_data", 8),
    onnx.TensorProto.FLOAT16: ("int32_data", 2),
    onnx.TensorProto.BFLOAT16: ("int32_data", 2),
}
_DATA_FIELDS = (
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


def _passes_tensor_check(tensor: onnx.TensorProto, raw_size: int) -> bool:
    """True when the checker's test of one tensor (`check_tensor`) cannot fail on `tensor`, in
    any onnx release we support: a type it knows, stored in the file, positive dims of a
    product far from overflow, and exactly one field holding the values, the right one for the
    type, with exactly the data the dims declare (`raw_size` bytes of raw data). False means
    only "not proved"."""
    if tensor.data_type not in _VALUE_FIELD or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    elements = 1
    for dim in tensor.dims:
        if dim <= 0:
            return False
        elements *= dim
    if elements > 2**40:
        return False
    field, element_bytes = _VALUE_FIELD[tensor.data_type]
    filled = [name for name in _DATA_FIELDS if len(getattr(tensor, name))]
    if raw_size:
        return not filled and raw_size == elements * element_bytes
    return filled == [field] and len(getattr(tensor, field)) == elements


def _copy_fields(source: Message, target: Message, skip: str) -> None:
    """Copy every field of `source` that is set, but `skip`, into the empty `target`."""
    for field, value in source.ListFields():
        if field.name != skip:
            set_field(target, field, value)


_WEIGHT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
    }
)


def _is_weight(tensor: onnx.TensorProto, raw_size: int) -> bool:
    """A floating-point tensor stored in the file whose content inference never reads: of
    more than SMALL_INITIALIZER_BYTES serialized (measuring that serializes the tensor; a
    tensor whose raw data, `raw_size` bytes, is larger already is)."""
    return (
        tensor.data_type in _WEIGHT_TYPES
        and tensor.data_location != onnx.TensorProto.EXTERNAL
        and (raw_size > SMALL_INITIALIZER_BYTES or tensor.ByteSize() > SMALL_INITIALIZER_BYTES)
    )


def _raw_size(tensor: onnx.TensorProto) -> int:
    """The bytes of raw data of a tensor `_is_weight` may leave out, else 0 (reading them
    copies them: the others are not read)."""
    if tensor.data_type not in _WEIGHT_TYPES or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return 0
    return len(tensor.raw_data)


def _lenient_inference(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """The types inference gives the main graph's values by name (the last of a name counts),
    errors ignored; nothing for a graph with so many subgraphs that it would be inferred in
    runs (see `seqlower.strict_inference`)."""
    if inferred_in_runs(model.graph):
        return {}
    inferred = onnx.shape_inference.infer_shapes(model)
    return {value.name: value for value in [*inferred.graph.input, *inferred.graph.value_info]}


def check_input_text(model: ir.Model, where: str) -> None:
    """Every name and doc string must be UTF-8: for one that is not, the protobuf reader hands
    back bytes (the checker lets it through), and onnx_ir keeps them. Checked on the IR, where
    reading a name costs a fraction of what it costs on the protobuf."""
    texts: list[tuple[str, object]] = [("model", model.doc_string), ("model", model.producer_name)]
    graphs = list(iter_all_graphs(model))
    for function in model.functions.values():
        texts.extend([("function", function.name), ("function", function.domain)])
    for graph in graphs:
        texts.extend([("graph", graph.name), ("graph", graph.doc_string)])
        texts.extend(("value", value.name) for value in graph.inputs)
        texts.extend(("initializer", name) for name in graph.initializers)
        for node in graph_nodes(graph):
            if type(node.name) is bytes or type(node.doc_string) is bytes:
                texts.append(("node", node.name if type(node.name) is bytes else node.doc_string))
            if type(node.op_type) is bytes or type(node.domain) is bytes:
                texts.append(("node", node.op_type if type(node.op_type) is bytes else node.domain))
            texts.extend(
                ("value", value.name) for value in node.outputs if type(value.name) is bytes
            )
    for owner, text in texts:
        if isinstance(text, bytes):
            shown = text.decode("utf-8", errors="backslashreplace")
            raise InvalidModelError(
                f"{where}: the input model itself is invalid: a name or doc string of a "
                f"{owner} is not valid UTF-8 ('{shown}')"
            )


def _graphs_refusing_sparse(proto: onnx.ModelProto, where: str) -> list[onnx.GraphProto]:
    """`_graphs`, refusing what onnx_ir cannot hold in the same walk: it drops sparse
    initializers and cannot hold sparse attributes, so say so. Each graph is looked at when
    the walk reaches it (its sparse initializers, then its nodes' attributes), in the order
    `_graphs` lists them, then the functions' nodes: the first one found is the one said."""
    found = []
    stack = [proto.graph]
    for function in proto.functions:
        stack.extend(node_subgraphs(function.node))
    while stack:
        graph = stack.pop()
        found.append(graph)
        for sparse in graph.sparse_initializer:
            name = sparse.values.name
            raise InvalidModelError(
                f"{where}: sparse initializer '{name}' is not supported; store it as a dense "
                "initializer"
            )
        for node in graph.node:
            attributes = node.attribute
            if not attributes:  # most nodes: nothing to look into
                continue
            for attribute in attributes:  # each read once: refused, or its subgraphs found
                _refuse_sparse_attribute(node, attribute, where)
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)
    for function in proto.functions:
        for node in function.node:
            _refuse_sparse_attributes(node, where)
    return found


def _refuse_sparse_attributes(node: onnx.NodeProto, where: str) -> None:
    for attribute in node.attribute:
        _refuse_sparse_attribute(node, attribute, where)


def _refuse_sparse_attribute(
    node: onnx.NodeProto, attribute: onnx.AttributeProto, where: str
) -> None:
    if attribute.HasField("sparse_tensor") or len(attribute.sparse_tensors):
        raise InvalidModelError(
            f"{where}: node '{node.name}' ({node.op_type}) has a sparse tensor in attribute "
            f"'{attribute.name}', which is not supported; store it as a dense tensor"
        )


def _forget_negative_dims(graphs: list[onnx.GraphProto], proto: onnx.ModelProto) -> int:
    """Make each negative dim a declared type holds (inputs, outputs, value_info, in each of
    `graphs`, every graph of `proto`, and in its functions) an unknown one, as onnxruntime
    reads it: some exporters write -1 for a dim known only when the model runs, and a dim of
    -5 is no size either. Returns how many."""
    infos: list[onnx.ValueInfoProto] = []
    for graph in graphs:
        infos.extend([*graph.input, *graph.output, *graph.value_info])
    for function in proto.functions:
        infos.extend(getattr(function, "value_info", ()))
    changed = 0
    for info in infos:
        for shape in _shapes_in(info.type):
            for dim in shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.ClearField("dim_value")
                    changed += 1
    return changed


def _shapes_in(type_proto: onnx.TypeProto) -> list[onnx.TensorShapeProto]:
    """The shapes a type holds: its own, or those of the tensors a sequence, an optional or a
    map holds."""
    found = []
    stack = [type_proto]
    while stack:
        current = stack.pop()
        kind = current.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            holder = getattr(current, kind)
            if holder.HasField("shape"):
                found.append(holder.shape)
        elif kind in ("sequence_type", "optional_type"):
            stack.append(getattr(current, kind).elem_type)
        elif kind == "map_type":
            stack.append(current.map_type.value_type)
    return found


def forget_declared_shapes(graph: onnx.GraphProto) -> bool:
    """Drop what an exporter declared about intermediate values (value_info) and the dims of
    subgraph outputs; the main graph's inputs and outputs keep theirs (the checker needs
    them; a contradicted output shape is tolerated by message). Returns whether a node of the
    graph or of its subgraphs may be a keepdims corner (`may_be_corner`): the same walk tells,
    so that the corners' own walk runs only where one may be."""
    del graph.value_info[:]
    return _forget_in_nodes(graph.node)


def _forget_in_nodes(nodes: Iterable[onnx.NodeProto]) -> bool:
    """`forget_declared_shapes` in the subgraphs `nodes` hold; whether one of `nodes` or of
    the nodes of their subgraphs may be a keepdims corner."""
    corners = False
    for node in nodes:
        attributes = node.attribute
        if not attributes:  # most nodes: no subgraph, and no keepdims=0
            continue
        if node.op_type == "SplitToSequence" and may_be_corner(node):
            corners = True
        for attribute in attributes:
            subgraphs = [attribute.g] if attribute.HasField("g") else []
            for subgraph in [*subgraphs, *attribute.graphs]:
                corners = forget_declared_shapes(subgraph) or corners
                for output in subgraph.output:
                    _forget_shape(output.type)
    return corners


def _forget_shape(type_proto: onnx.TypeProto) -> None:
    """Drop the dims of a tensor type, or of the tensors a sequence or optional holds."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        type_proto.tensor_type.ClearField("shape")
    elif kind == "sequence_type":
        _forget_shape(type_proto.sequence_type.elem_type)
    elif kind == "optional_type":
        _forget_shape(type_proto.optional_type.elem_type)


def errors_held(message: str) -> list[str]:
    """The errors in an inference message that are held against the model, each as
    `Op 'node': what is wrong` (see the module docstring for what is tolerated)."""
    found = []
    for line in message.splitlines():
        match = _LOCATED.search(line)
        if match is None:
            continue
        op, node, text = match.groups()
        text = _WRONG_TYPE.sub(_WRONG_TYPE_SAID, text)
        if not (_DECLARED_SHAPE.search(text) or _EXTERNAL.search(text) or _NULL.search(text)):
            found.append(f"{op} '{node}': {text}" if node else f"{op}: {text}")
    if not found and not _LOCATED.search(message):  # a message of another form: as it is
        return [] if _DECLARED_SHAPE.search(message) else [one_line(message)]
    return found


def one_line(error: BaseException | str, limit: int = 300) -> str:
    text = " ".join(str(error).replace("==> Context:", "; in").split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
