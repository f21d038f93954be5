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

from seqlower.analysis.derived_shapes import DerivedShapes
from seqlower.analysis.list_lengths import ListLengths
from seqlower.analysis.loop_memo import LoopMemo
from seqlower.analysis.scan_forms import always_continues, static_bool
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
    `generation` (see `StaticValues`) lets provisional answers last until the model changes;
    `list_generation` (`Rewriter.list_generation`) lets the walks along chains of lists last
    until a rewrite may have changed one. `derived` (`DerivedShapes`, with `generation`) keeps
    the shapes the Loop shape analyses derived for outer values (or that none could be) across
    rewrites: the caller then calls `forget_rewritten` after each rewrite."""

    def __init__(
        self,
        model: ir.Model,
        generation: Callable[[], int] | None = None,
        list_generation: Callable[[], int] | None = None,
        derived: DerivedShapes | None = None,
    ) -> None:
        self.values = StaticValues(model.opset_imports.get(""), generation)
        # what each Loop's shape analysis found, until the model changes (`LoopMemo`), and the
        # shapes derived for outer values, until a rewrite reaches them (`DerivedShapes`)
        self.loops = LoopMemo(self.values, generation, derived) if generation is not None else None
        self._main_graph = model.graph
        self._loop_bodies: dict[int, ir.Graph] | None = None
        self._list_generation = list_generation
        self._chains_seen = list_generation() if list_generation is not None else 0
        self._chains: dict[ir.Value, tuple[_ChainEnd, bool, int]] = {}
        self._generation = generation
        self._lengths: ListLengths | None = None
        self._lengths_seen = self._chains_seen
        self._plans: dict[ir.Node, _KeptPlan] = {}

    def forget_rewritten(self, nodes: list[ir.Node]) -> None:
        """Forget what was derived from the outputs of `nodes`, the nodes a rewrite emitted,
        rewired or rebuilt (`DerivedShapes.forget_downstream`)."""
        if self.loops is not None and self.loops.derived is not None:
            self.loops.derived.forget_downstream(nodes)

    def is_loop_body(self, graph: ir.Graph) -> bool:
        """Whether `graph` is the body of a Loop. The bodies are found once, in one walk of the
        model, on the first question: a body a rewrite makes afresh afterwards is not one
        until the next Facts (the next sweep) finds it."""
        if graph is self._main_graph:
            return False
        if self._loop_bodies is None:
            bodies = (
                node.attributes["body"].as_graph()
                for node in self._main_graph.all_nodes()
                if node.op_type == "Loop" and node.domain == "" and "body" in node.attributes
            )
            self._loop_bodies = {id(body): body for body in bodies}  # held: no id is reused
        return self._loop_bodies.get(id(graph)) is graph

    # -- tensors -------------------------------------------------------------------------

    def static(self, value: ir.Value | None) -> np.ndarray | None:
        return self.values.get(value)

    def static_int(self, value: ir.Value | None) -> int | None:
        return self.values.get_int(value)

    def static_shape(self, value: ir.Value) -> list[int] | None:
        return static_shape(value)

    def split_plan(self, node: ir.Node) -> SplitPlan | str:
        """`plan_split(node)`, kept across rewrites while what it read is unchanged: the
        node's inputs (the same tuple: onnx_ir makes a new one whenever an input is replaced),
        the shape of its data (the same object), and the content of its sizes when that was
        only a provisional answer (`StaticValues.is_settled`), until the model changes. A
        plan is asked once per reader of the list: 100,000 lengths of one split asked it
        100,000 times, each after a rewrite that changed a list reader."""
        kept = self._plans.get(node)
        data = node.inputs[0] if node.inputs else None
        shape = data.shape if data is not None else None
        if (
            kept is not None
            and kept.inputs is node.inputs
            and kept.shape is shape
            and (kept.generation is None or kept.generation == self._current_generation())
        ):
            return kept.plan
        plan = plan_split(node, self.values)
        sizes = node.inputs[1] if len(node.inputs) > 1 else None
        if sizes is None or self.values.is_settled(sizes):
            self._plans[node] = _KeptPlan(plan, node.inputs, shape, None)
        elif self._generation is not None:  # without it, a provisional answer lasts one question
            self._plans[node] = _KeptPlan(plan, node.inputs, shape, self._generation())
        return plan

    def _current_generation(self) -> int | None:
        return self._generation() if self._generation is not None else None

    # -- sequences -----------------------------------------------------------------------

    def sequence(self, value: ir.Value) -> SequenceFact:
        """The fact for a sequence value. Walks back through the Identities, inserts, erases
        and maps that change only its length (without recursion: a chain of thousands of
        inserts is a chain of thousands of values) to the node that makes the list."""
        end, resized, delta = self._chain_end(value)
        base = self._made_by(end.value, end.producer, end.op)
        if isinstance(base, Unknown) or not resized:
            return base
        return KnownLength(base.length + delta)

    def _chain_end(self, value: ir.Value) -> tuple[_ChainEnd, bool, int]:
        """Where the walk back from `value` ends, and what it passed on its way there (an
        insert, erase or map: resized; and the inserts less the erases). Every value passed is
        remembered with its own answer until a rewrite may change a list (`list_generation`):
        a chain of k inserts, each of which a rule asks about, is walked once, not k times
        (quadratic: 2,000 rounds of read, reshape and insert on one list took 7 s). The
        answers are plain tuples: a walk made again after each rewrite of a long chain (2,000
        Ifs in a row, each appending to the list the one before gave) passes thousands of
        values each time, and copying a dataclass per value passed was most of its cost."""
        chains = self._current_chains()
        passed: list[ir.Value] = []
        steps: list[int] = []  # per value passed, its producer's `_STEPS`
        while True:
            known = chains.get(value)
            if known is not None:
                answer = known
                break
            producer = value.producer()
            if producer is None or producer.domain != "":
                answer = chains[value] = (
                    _ChainEnd(value, producer, _op_name(producer) if producer else None),
                    False,
                    0,
                )
                break
            step = _STEPS.get(producer.op_type)
            if step is None:
                answer = chains[value] = (_ChainEnd(value, producer, producer.op_type), False, 0)
                break
            passed.append(value)
            steps.append(step)
            value = producer.inputs[0]  # type: ignore[assignment]
        end, resized, delta = answer
        for passed_value, step in zip(reversed(passed), reversed(steps)):
            if step:
                resized = True
                delta += step - 2
            answer = chains[passed_value] = (end, resized, delta)
        return answer

    def _current_chains(self) -> dict[ir.Value, tuple[_ChainEnd, bool, int]]:
        """The remembered walks, forgotten when a list may have changed (none are kept
        without `list_generation`)."""
        if self._list_generation is None:
            return {}
        seen = self._list_generation()
        if seen != self._chains_seen:
            self._chains_seen, self._chains = seen, {}
        return self._chains

    def _made_by(self, value: ir.Value, producer: ir.Node | None, op: str | None) -> SequenceFact:
        """The fact for a list as the node that makes it gives it."""
        if producer is None:
            return Unknown(_describe_input(value, self._main_graph))
        if op == "SequenceConstruct":
            return KnownElements(tuple(v for v in producer.inputs if v is not None))
        if op == "SequenceEmpty":
            return KnownElements(())
        if op == "SplitToSequence":
            plan = self.split_plan(producer)
            if isinstance(plan, str):
                return Unknown(f"{quoted_node(producer)}: {plan}")
            return KnownLength(plan.count)
        return Unknown(f"produced by {quoted_node(producer)}")

    def list_lengths(self) -> ListLengths:
        """Length relations between lists (`seqlower.analysis.list_lengths`), kept until a
        rewrite may have changed a list."""
        seen = self._list_generation() if self._list_generation is not None else 0
        if self._lengths is None or seen != self._lengths_seen or self._list_generation is None:
            self._lengths_seen = seen
            self._lengths = ListLengths(
                self._main_graph, self.static_int, self.length, self._generation, self._runs_all
            )
        return self._lengths

    def _runs_all(self, loop: ir.Node) -> bool:
        """Whether the Loop `loop` runs all its iterations (its condition always true)."""
        cond = loop.inputs[1] if len(loop.inputs) > 1 else None
        if cond is not None and static_bool(cond, self.values) is not True:
            return False
        return always_continues(loop.attributes["body"].as_graph(), self.values)

    def length(self, value: ir.Value) -> int | None:
        fact = self.sequence(value)
        return None if isinstance(fact, Unknown) else fact.length

    def elements(self, value: ir.Value) -> tuple[ir.Value, ...] | None:
        """The elements of the list `value` when they are values of the graph, else None. A
        list an insert, erase or map makes has its length known at most: answered without the
        walk to the end of its chain (the check of each of 2,000 Ifs in a row, each appending
        to the list the one before made, walked back the chain of the inserts before it)."""
        producer = value.producer()
        if producer is not None and producer.domain == "" and _STEPS.get(producer.op_type):
            return None
        fact = self.sequence(value)
        return fact.elements if isinstance(fact, KnownElements) else None


@dataclasses.dataclass(frozen=True)
class _KeptPlan:
    """A split's plan and what it was made from (`Facts.split_plan`): the node's input tuple,
    its data's shape object, and the generation it lasts for when its sizes were provisional
    (None: until the inputs or the shape change)."""

    plan: SplitPlan | str
    inputs: object
    shape: ir.Shape | None
    generation: int | None


@dataclasses.dataclass(frozen=True)
class _ChainEnd:
    """Where `Facts.sequence` stops walking back: the list `value`, made by `producer` (`op`)."""

    value: ir.Value
    producer: ir.Node | None
    op: str | None


# what a default-domain node passed on the walk back does to the list: 0 nothing (an Identity),
# 2 the same length, new elements (a map), 3 one element more (an insert), 1 one fewer (an
# erase); any but 0 leaves only the length known, and `step - 2` is its change
_STEPS = {"Identity": 0, "SequenceMap": 2, "SequenceInsert": 3, "SequenceErase": 1}


def _op_name(node: ir.Node) -> str:
    return node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}"


def _describe_input(value: ir.Value, main_graph: ir.Graph) -> str:
    if value.is_graph_input() and value.graph is main_graph:
        return f"'{value.name}' is a sequence-typed model input (its length is unknown)"
    if value.is_graph_input():
        return f"'{value.name}' is an input of a subgraph body (its length is unknown)"
    return f"'{value.name}' has no producer (its length is unknown)"
