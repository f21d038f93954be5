"""Sequence facts: what is known about each sequence value before running the model.

Every sequence value gets one fact:

- `KnownElements`: the elements are tensor values in the graph, in order. This is the canonical
  form the rules rewrite towards: a SequenceConstruct (or a SequenceEmpty) whose consumers can
  read the elements directly.
- `KnownLength`: the length is static but the elements are not yet values in the graph (a
  SplitToSequence not lowered yet, an insert at a position known only at run time...).
- `Unknown`: with the reason, which ends up in the report when an operator has to stay.

Facts flow through Identity, SequenceConstruct, SequenceEmpty, SplitToSequence, SequenceInsert,
SequenceErase and SequenceMap. Loop, If and graph inputs give Unknown (the control-flow rules turn
what they can into the forms above first).
"""

from __future__ import annotations

__all__ = ["Facts", "KnownElements", "KnownLength", "SequenceFact", "Unknown", "element_dtype"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.split_plan import SplitPlan, plan_split
from seqlower.analysis.static_values import StaticValues, static_shape
from seqlower.ops import quoted_node


@dataclasses.dataclass(frozen=True)
class KnownElements:
    elements: tuple[ir.Value, ...]

    @property
    def length(self) -> int:
        return len(self.elements)


@dataclasses.dataclass(frozen=True)
class KnownLength:
    length: int


@dataclasses.dataclass(frozen=True)
class Unknown:
    reason: str


SequenceFact = KnownElements | KnownLength | Unknown


def element_dtype(sequence: ir.Value) -> ir.DataType | None:
    """The element type declared for a sequence value, if any."""
    seq_type = sequence.type
    if isinstance(seq_type, ir.SequenceType) and isinstance(seq_type.elem_type, ir.TensorType):
        return seq_type.elem_type.dtype
    return None


class Facts:
    """The analysis object rules consult: static tensors, static shapes and sequence facts.
    `generation` (see `StaticValues`) lets provisional answers last until the model changes."""

    def __init__(self, model: ir.Model, generation: Callable[[], int] | None = None) -> None:
        self.values = StaticValues(model.opset_imports.get(""), generation)
        self._main_graph = model.graph

    # -- tensors -------------------------------------------------------------------------

    def static(self, value: ir.Value | None) -> np.ndarray | None:
        return self.values.get(value)

    def static_int(self, value: ir.Value | None) -> int | None:
        return self.values.get_int(value)

    def static_shape(self, value: ir.Value) -> list[int] | None:
        return static_shape(value)

    def split_plan(self, node: ir.Node) -> SplitPlan | str:
        return plan_split(node, self.values)

    # -- sequences -----------------------------------------------------------------------

    def sequence(self, value: ir.Value) -> SequenceFact:
        """The fact for a sequence value."""
        producer = value.producer()
        if producer is None:
            return Unknown(_describe_input(value, self._main_graph))
        op = producer.op_type if producer.domain == "" else f"{producer.domain}::{producer.op_type}"
        if op == "SequenceConstruct":
            return KnownElements(tuple(v for v in producer.inputs if v is not None))
        if op == "SequenceEmpty":
            return KnownElements(())
        if op == "Identity":
            return self.sequence(producer.inputs[0])  # type: ignore[arg-type]
        if op == "SplitToSequence":
            plan = self.split_plan(producer)
            if isinstance(plan, str):
                return Unknown(f"{quoted_node(producer)}: {plan}")
            return KnownLength(plan.count)
        if op in ("SequenceInsert", "SequenceErase"):
            return self._resized(producer, +1 if op == "SequenceInsert" else -1)
        if op == "SequenceMap":
            base = self.sequence(producer.inputs[0])  # type: ignore[arg-type]
            return base if isinstance(base, Unknown) else KnownLength(base.length)
        return Unknown(f"produced by {quoted_node(producer)}")

    def length(self, value: ir.Value) -> int | None:
        fact = self.sequence(value)
        return None if isinstance(fact, Unknown) else fact.length

    def elements(self, value: ir.Value) -> tuple[ir.Value, ...] | None:
        fact = self.sequence(value)
        return fact.elements if isinstance(fact, KnownElements) else None

    def _resized(self, node: ir.Node, delta: int) -> SequenceFact:
        base = self.sequence(node.inputs[0])  # type: ignore[arg-type]
        if isinstance(base, Unknown):
            return base
        return KnownLength(base.length + delta)


def _describe_input(value: ir.Value, main_graph: ir.Graph) -> str:
    if value.is_graph_input() and value.graph is main_graph:
        return f"'{value.name}' is a sequence-typed model input (its length is unknown)"
    if value.is_graph_input():
        return f"'{value.name}' is an input of a subgraph body (its length is unknown)"
    return f"'{value.name}' has no producer (its length is unknown)"
