"""Flatten sequence-typed model inputs and outputs into one tensor per element, on request.

    input  s: seq(float[1,4]) with seq_lens={"s": 3}
        -> inputs s_0, s_1, s_2: float[1,4];  s = SequenceConstruct(s_0, s_1, s_2)
    output y: seq(float[1,4]) = SequenceConstruct(a, b)
        -> outputs y_0 = a, y_1 = b
    output y: seq(...) of static length n whose elements are not values yet
        -> outputs y_k = SequenceAt(y, k) for k < n     (the next lowering removes them)

Sequence values in a model's interface are kept unless the user asks (README, "How it works"):
this pass runs only with `Options.flatten_sequence_io`. The pipeline flattens inputs before
normalizing (so the lowering sees the SequenceConstruct and removes it) and outputs after lowering
(when the lengths are best known), then lowers once more. A sequence output of unknown length,
or whose elements have no known rank (a tensor model output needs one), stays, with the reason
in `warnings`; a sequence input whose elements have no declared rank cannot be flattened (an
error). Each change is recorded in `changes` for the report, and in the model's metadata under
`FLATTENED_IO_KEY` (JSON `{"inputs": {"s": ["s_0", ...]}, "outputs": {...}}`) so that
`seqlower verify` can compare the flattened model with its original.
"""

from __future__ import annotations

__all__ = ["FLATTENED_IO_KEY", "FlattenSequenceIOPass"]

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.analysis import Facts
from seqlower.analysis.facts import KnownElements, KnownLength
from seqlower.errors import SeqlowerError
from seqlower.rewriter import NameAllocator

logger = logging.getLogger(__name__)

FLATTENED_IO_KEY = "seqlower.flattened_io"
"""Metadata key: which tensors replace each flattened sequence input and output."""


class FlattenSequenceIOPass(ir.passes.InPlacePass):
    """Replace sequence-typed main-graph inputs (those named in `seq_lens`) and outputs (those
    of static length) by one tensor per element, named `<name>_<k>` (made fresh if taken).

    After the pass: `changes` lists the interface changes (dicts, docs/report-schema.md),
    `warnings` the sequence inputs and outputs left as they were, and why.
    """

    def __init__(
        self,
        seq_lens: Mapping[str, int] | None = None,
        *,
        inputs: bool = True,
        outputs: bool = True,
    ) -> None:
        super().__init__()
        self.seq_lens = dict(seq_lens or {})
        self.inputs = inputs
        self.outputs = outputs
        self.changes: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.changes, self.warnings = [], []
        sequence_outputs = any(isinstance(v.type, ir.SequenceType) for v in model.graph.outputs)
        if not (self.inputs and self.seq_lens) and not (self.outputs and sequence_outputs):
            # nothing to rename, so no walk of the model for its names
            names = NameAllocator(())
        else:
            names = NameAllocator.for_model(model)
        modified = False
        if self.inputs:
            modified |= self._flatten_inputs(model, names)
        if self.outputs:
            modified |= self._flatten_outputs(model, names)
        if self.changes:
            _record_mapping(model, self.changes)
        return ir.passes.PassResult(model, modified)

    # -- inputs --------------------------------------------------------------------------

    def _flatten_inputs(self, model: ir.Model, names: NameAllocator) -> bool:
        graph = model.graph
        by_name = {value.name: value for value in graph.inputs}
        for name, length in self.seq_lens.items():
            value = by_name.get(name)
            if value is None:
                raise SeqlowerError(f"--seq-len {name}: the model has no input named '{name}'")
            if not isinstance(value.type, ir.SequenceType):
                raise SeqlowerError(f"--seq-len {name}: input '{name}' is not sequence-typed")
            if not isinstance(value.type.elem_type, ir.TensorType):
                raise SeqlowerError(
                    f"--seq-len {name}: input '{name}' is a sequence of {value.type.elem_type}, "
                    "not of tensors; it cannot be flattened"
                )
            if not isinstance(length, int) or isinstance(length, bool) or length < 0:
                raise SeqlowerError(f"--seq-len {name}: length must be an integer >= 0")
            if value.shape is None and length > 0:
                raise SeqlowerError(
                    f"--seq-len {name}: the elements of input '{name}' have no declared shape, "
                    "not even a rank, and a tensor input needs one; declare the element shape "
                    "in the model to flatten it"
                )
        for value in list(graph.inputs):
            if value.name in self.seq_lens:
                self._flatten_input(graph, value, self.seq_lens[value.name], names)
            elif isinstance(value.type, ir.SequenceType):
                self.warnings.append(
                    f"sequence input '{value.name}' kept: give its length with "
                    f"--seq-len {value.name}=<n> to flatten it"
                )
        return bool(self.seq_lens)

    def _flatten_input(
        self, graph: ir.Graph, value: ir.Value, length: int, names: NameAllocator
    ) -> None:
        seq_type = value.type
        assert isinstance(seq_type, ir.SequenceType)
        elem_type = seq_type.elem_type
        assert isinstance(elem_type, ir.TensorType)
        name = value.name or "input"
        elements = [
            ir.Value(
                name=names.fresh(f"{name}_{k}"),
                type=ir.TensorType(elem_type.dtype),
                # a sequence value's `shape` is the shape of its elements; trusted on inputs
                shape=ir.Shape(value.shape) if value.shape is not None else None,
            )
            for k in range(length)
        ]
        position = list(graph.inputs).index(value)
        graph.inputs.pop(position)
        for offset, element in enumerate(elements):
            graph.inputs.insert(position + offset, element)
        if elements:
            node = ir.Node("", "SequenceConstruct", elements, name=names.fresh(f"{name}_construct"))
        else:
            node = ir.Node(
                "",
                "SequenceEmpty",
                [],
                [ir.AttrInt64("dtype", int(elem_type.dtype))],
                name=names.fresh(f"{name}_empty"),
            )
        sequence = node.outputs[0]
        sequence.type, sequence.shape = seq_type, value.shape
        value.name = names.fresh(f"{name}_flattened")
        sequence.name = name
        first = next(iter(graph), None)
        if first is None:
            graph.append(node)
        else:
            graph.insert_before(first, node)
        value.replace_all_uses_with(sequence, replace_graph_outputs=True)
        self.changes.append(
            {
                "kind": "flatten_input",
                "name": name,
                "new_names": [element.name for element in elements],
                "elem_type": elem_type.dtype.name,
                "elem_shape": _shape_text(value.shape),
            }
        )
        logger.debug("flattened input %s into %d tensors", name, length)

    # -- outputs -------------------------------------------------------------------------

    def _flatten_outputs(self, model: ir.Model, names: NameAllocator) -> bool:
        graph = model.graph
        facts = Facts(model)
        modified = False
        claimed: set[ir.Value] = set()
        for value in list(graph.outputs):
            if not isinstance(value.type, ir.SequenceType):
                continue
            fact = facts.sequence(value)
            if isinstance(fact, KnownElements):
                shapes = [_element_shape(element, value) for element in fact.elements]
            elif isinstance(fact, KnownLength):
                shapes = [value.shape] * fact.length
            else:
                self.warnings.append(f"sequence output '{value.name}' kept: {fact.reason}")
                continue
            if not shapes:
                self.warnings.append(
                    f"sequence output '{value.name}' kept: it is always empty, so flattening "
                    "would remove it from the interface"
                )
                continue
            if any(shape is None for shape in shapes):
                self.warnings.append(
                    f"sequence output '{value.name}' kept: the rank of its elements is unknown, "
                    "and a tensor model output needs one"
                )
                continue
            if isinstance(fact, KnownElements):
                elements = list(fact.elements)
            else:
                elements = self._read_elements(graph, value, len(shapes), names)
            name = value.name or "output"
            outputs = [
                _output_value(
                    graph, value, element, names.fresh(f"{name}_{k}"), shape, names, claimed
                )
                for k, (element, shape) in enumerate(zip(elements, shapes))
            ]
            position = list(graph.outputs).index(value)
            graph.outputs.pop(position)
            for offset, output in enumerate(outputs):
                graph.outputs.insert(position + offset, output)
            self.changes.append(
                {
                    "kind": "flatten_output",
                    "name": name,
                    "new_names": [output.name for output in outputs],
                    "elem_type": _dtype_name(value),
                }
            )
            modified = True
            logger.debug("flattened output %s into %d tensors", name, len(outputs))
        return modified

    def _read_elements(
        self, graph: ir.Graph, value: ir.Value, length: int, names: NameAllocator
    ) -> list[ir.Value]:
        """y_k = SequenceAt(y, k): the length is static but the elements are not values yet."""
        elements = []
        for k in range(length):
            position = ir.Node(
                "",
                "Constant",
                [],
                [ir.AttrTensor("value", ir.tensor(np.array(k, dtype=np.int64)))],
                name=names.fresh(f"{value.name}_position_{k}"),
            )
            position.outputs[0].name = names.fresh(f"{value.name}_position_{k}")
            at = ir.Node(
                "", "SequenceAt", [value, position.outputs[0]], name=names.fresh(f"{value.name}_at")
            )
            at.outputs[0].name = names.fresh(f"{value.name}_at_{k}")
            at.outputs[0].type = _elem_type(value)
            at.outputs[0].shape = value.shape
            graph.extend([position, at])
            elements.append(at.outputs[0])
        return elements


def _element_shape(element: ir.Value, sequence: ir.Value) -> ir.Shape | None:
    """The shape to declare for `element` as a model output: its own, completed for a Split
    output (whose sizes may be known only at run time) by the input's shape with the split dim
    unknown (onnx releases differ in what they infer there), or the element shape declared on
    `sequence`; None when not even the rank is known."""
    derived = _split_output_shape(element)
    own = element.shape
    if own is None:
        return derived if derived is not None else sequence.shape
    if derived is None or len(derived) != len(own):
        return own
    return ir.Shape(
        [mine if isinstance(mine, int) else theirs for mine, theirs in zip(own, derived)]
    )


def _split_output_shape(element: ir.Value) -> ir.Shape | None:
    producer = element.producer()
    if producer is None or producer.op_type != "Split" or producer.domain != "":
        return None
    data = producer.inputs[0] if producer.inputs else None
    if data is None or data.shape is None or len(data.shape) == 0:
        return None
    dims: list[int | ir.SymbolicDim | None] = list(data.shape)
    axis_attr = producer.attributes.get("axis")
    axis = axis_attr.as_int() if axis_attr is not None else 0
    dims[axis % len(dims)] = None
    return ir.Shape(dims)


def _record_mapping(model: ir.Model, changes: list[dict[str, Any]]) -> None:
    """Add this run's flattened names to the mapping in the model's metadata."""
    try:
        mapping = json.loads(model.metadata_props.get(FLATTENED_IO_KEY, "{}"))
    except json.JSONDecodeError:
        mapping = {}
    if not isinstance(mapping, dict):
        mapping = {}
    for change in changes:
        side = "inputs" if change["kind"] == "flatten_input" else "outputs"
        mapping.setdefault(side, {})[change["name"]] = list(change["new_names"])
    model.metadata_props[FLATTENED_IO_KEY] = json.dumps(mapping, sort_keys=True)


def _output_value(
    graph: ir.Graph,
    sequence: ir.Value,
    element: ir.Value,
    name: str,
    shape: ir.Shape | None,
    names: NameAllocator,
    claimed: set[ir.Value],
) -> ir.Value:
    """`element` renamed to `name` when that is safe, else an Identity carrying it; its shape
    is `shape` unless it has one already."""
    producer = element.producer()
    if (
        producer is not None
        and producer.graph is graph
        and element not in claimed
        and not element.is_graph_output()
        and not element.is_graph_input()
        and not element.is_initializer()
    ):
        output = element
    else:
        carrier = ir.Node("", "Identity", [element], name=names.fresh(f"{name}_identity"))
        graph.append(carrier)
        output = carrier.outputs[0]
    claimed.add(element)
    output.name = name
    output.type = output.type or element.type or _elem_type(sequence)
    if output.shape is None:
        output.shape = shape
    return output


def _elem_type(sequence: ir.Value) -> ir.TypeProtocol | None:
    seq_type = sequence.type
    return seq_type.elem_type if isinstance(seq_type, ir.SequenceType) else None


def _dtype_name(sequence: ir.Value) -> str | None:
    elem = _elem_type(sequence)
    return elem.dtype.name if isinstance(elem, ir.TensorType) else None


def _shape_text(shape: ir.Shape | None) -> list[int | str | None] | None:
    if shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in shape]
