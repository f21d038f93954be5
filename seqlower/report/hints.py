"""What to try for a kept node: the options that, followed, make its sequence's length or
positions static (`--dim`, `--flatten-sequence-io --seq-len`), derived from the cause; "" when no
option would help."""

from __future__ import annotations

__all__ = ["hint_for", "hint_for_value", "structural_inputs"]

from collections.abc import Iterable, Mapping

import onnx_ir as ir

from seqlower.analysis import Facts
from seqlower.ops import graph_nodes, is_sequence_op, is_sequence_value, node_subgraphs
from seqlower.passes.bind_dims import bindable_dims, dims_feeding


def hint_for(node: ir.Node, model: ir.Model, owners: Mapping[int, ir.Node] | None = None) -> str:
    """What to try for a kept node, from the cause: flatten the sequence-typed model inputs its
    sequences come from, bind the symbolic dims their lengths follow, flatten the sequence
    output it feeds; for a node in a body, what helps the node around it; "" when no option
    would help. `owners` maps a subgraph's id to the node holding it."""
    hint = _hint_from(structural_inputs(node), model)
    if hint:
        return hint
    outputs = [v for v in node.outputs if is_sequence_value(v)]
    fed = [v for v in outputs if v.is_graph_output() and v.graph is model.graph]
    if fed and all(Facts(model).length(v) is not None for v in fed):
        return "--flatten-sequence-io (it feeds a sequence-typed model output)"
    for output in outputs:  # a sequence built for a Loop or If that stays
        for consumer in output.consumers():
            if consumer.op_type in ("Loop", "If") and consumer.domain == "":
                hint = hint_for(consumer, model, owners)
                if hint:
                    return hint
    owner = (owners or {}).get(id(node.graph)) if node.graph is not None else None
    return hint_for(owner, model, owners) if owner is not None else ""


def hint_for_value(value: ir.Value, model: ir.Model) -> str:
    """What to try for a sequence value of unknown length ("" when nothing helps)."""
    return _hint_from([value], model)


_MAX_DEPTH = 16  # producers walked up from a kept node
# the inputs that decide a sequence's length: split sizes, trip counts, and insert positions
# unless every element has one static shape (the elements' data never keeps a sequence; a
# run-time read position does not either once the elements are known: SequenceAt becomes a
# Gather, SequenceErase and such an insert a Where)
_STRUCTURAL = {
    "SequenceInsert": (2,),
    "SplitToSequence": (1,),
    "Loop": (0,),
}


def structural_inputs(node: ir.Node) -> list[ir.Value]:
    """The sequences `node` reads, and the inputs that decide lengths and positions."""
    wanted = _STRUCTURAL.get(node.op_type, ()) if node.domain == "" else ()
    if node.op_type == "SequenceInsert" and _one_static_shape(node.inputs[:2]):
        wanted = ()
    values = [
        value
        for index, value in enumerate(node.inputs)
        if value is not None and (index in wanted or is_sequence_value(value))
    ]
    if node.op_type == "Loop" and node.domain == "":
        values += _captured_sequences(node)
    return values


def _hint_from(values: list[ir.Value], model: ir.Model) -> str:
    """Walk up from `values` through the producers of sequences and of the values that decide
    lengths and positions: the sequence-typed model inputs reached and the bindable dims the
    lengths follow. "" when a run-time value (a tensor input, an overridable initializer)
    decides too: no option would make it static."""
    inputs: list[str] = []
    dims: list[str] = []
    bindable: set[str] | None = None
    seen: set[ir.Value] = set()
    frontier = [(value, 0) for value in values]
    while frontier:
        value, depth = frontier.pop()
        if value in seen:
            continue
        if depth > _MAX_DEPTH:
            return ""
        seen.add(value)
        producer = value.producer()
        if producer is None:
            if value.graph is not model.graph:
                continue  # a body input: the Loop around it decides (its trip count is walked)
            if isinstance(value.type, ir.SequenceType) and value.is_graph_input():
                if value.shape is None:
                    return ""  # its elements declare no shape: --flatten-sequence-io refuses it
                inputs.append(value.name or "")
            elif value.is_graph_input():
                return ""  # a run-time tensor decides
            continue
        if producer.domain != "":
            return ""
        if producer.op_type == "Shape" and producer.inputs and producer.inputs[0] is not None:
            bindable = bindable if bindable is not None else bindable_dims(model)
            found = dims_feeding(producer.inputs[0], bindable, depth=0)
            if not found:
                return ""
            dims.extend(d for d in found if d not in dims)
            continue
        if producer.op_type == "SplitToSequence":
            bindable = bindable if bindable is not None else bindable_dims(model)
            found = _split_dims(producer, bindable)
            if found is None:  # the split dim is computed: from a sequence, or nothing helps
                data = producer.inputs[0].producer() if producer.inputs[0] is not None else None
                if data is None or not is_sequence_op(data):
                    return ""
                frontier.extend((v, depth + 1) for v in structural_inputs(data))
            else:
                dims.extend(d for d in found if d not in dims)
        if is_sequence_op(producer) or producer.op_type in ("Loop", "If", "Identity"):
            follow = structural_inputs(producer)
        elif is_sequence_value(value):
            return ""  # an operator no rule lowers (OptionalGetElement...) makes the sequence
        else:  # tensor arithmetic on the way to a length or a position
            follow = [v for v in producer.inputs if v is not None]
        frontier.extend((v, depth + 1) for v in follow)
    if inputs:
        lens = " ".join(f"--seq-len {name}=<n>" for name in sorted(inputs))
        return f"--flatten-sequence-io {lens} (the length comes from the sequence input)"
    if dims:
        binds = " ".join(f"--dim {d}=<size>" for d in dims)
        return f"{binds} (the length follows the symbolic dim {', '.join(dims)})"
    return ""


def _one_static_shape(values: Iterable[ir.Value | None]) -> bool:
    """True when the values (a sequence: its elements) all have one fully static shape."""
    shapes = [v.shape if v is not None else None for v in values]
    if any(shape is None or not all(isinstance(d, int) for d in shape) for shape in shapes):
        return False
    return len({tuple(shape) for shape in shapes}) == 1  # type: ignore[arg-type]


def _captured_sequences(node: ir.Node) -> list[ir.Value]:
    """The sequences that the subgraphs of `node` read from the graphs around it."""
    inner: set[ir.Graph] = set()
    found: list[ir.Value] = []
    pending = [subgraph for _, subgraph in node_subgraphs(node)]
    bodies = []
    while pending:
        graph = pending.pop()
        inner.add(graph)
        bodies.append(graph)
        for child in graph_nodes(graph):
            pending.extend(subgraph for _, subgraph in node_subgraphs(child))
    for graph in bodies:
        for child in graph_nodes(graph):
            for value in child.inputs:
                outer = value is not None and value.graph not in inner
                if outer and is_sequence_value(value) and value not in found:
                    found.append(value)
    return found


def _split_dims(node: ir.Node, bindable: set[str]) -> list[str] | None:
    """The bindable dims a SplitToSequence's element count depends on; None when the split
    dim is neither static nor a bindable dim of a model input."""
    data = node.inputs[0] if node.inputs else None
    if data is None or data.shape is None:
        return None
    axis = node.attributes.get_int("axis", 0)
    if not -len(data.shape) <= axis < len(data.shape):
        return None
    dim = data.shape[axis]
    if isinstance(dim, int):
        split = node.inputs[1] if len(node.inputs) > 1 else None
        return dims_feeding(split, bindable) if split is not None else []
    if isinstance(dim, ir.SymbolicDim) and dim.value in bindable:
        return [dim.value]
    return None
