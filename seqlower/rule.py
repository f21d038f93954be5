"""The rule contract: `check` (pure, may refuse with a reason) then `rewrite` (mutates via the
Rewriter). A rule's `rewrite` docstring shows its `before -> after`; the README's rule catalogue
is generated from it.
"""

from __future__ import annotations

__all__ = ["Context", "DeferredRefusal", "Refusal", "Rule", "RuleSet", "never_empty"]

import dataclasses
import inspect
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import onnx_ir as ir

from seqlower.analysis import Facts, KnownElements, Unknown
from seqlower.analysis.facts import element_dtype
from seqlower.errors import InvalidModelError
from seqlower.ops import quoted_node
from seqlower.options import Options
from seqlower.rewriter import Builder, Rewriter


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a rule does not apply to a node. Kept for the report when the node stays."""

    reason: str


class DeferredRefusal(Refusal):
    """A `Refusal` whose reason is made when first read (then kept): the driver reads the
    reasons of a node only when no rule rewrites it, so a node that a later rule rewrites
    never pays for the reason of an earlier one (a walk to the end of a chain of lists: the
    first rule tried on each of 2,000 Ifs in a row, each appending to the list the one before
    made, walked back every insert before it)."""

    def __init__(self, make: Callable[[], str]) -> None:  # the field is the property below
        object.__setattr__(self, "_make", make)
        object.__setattr__(self, "_made", None)

    @property  # type: ignore[override]
    def reason(self) -> str:  # type: ignore[override]
        made = self._made  # type: ignore[attr-defined]
        if made is None:
            made = self._make()  # type: ignore[attr-defined]
            object.__setattr__(self, "_made", made)
        return made


@dataclasses.dataclass
class Context:
    """What a rule may consult (facts, options) and mutate through (rewriter)."""

    facts: Facts
    rewriter: Rewriter
    options: Options
    # values rewrites built during the driver's current walk of one graph, by what they compute
    # (`built_earlier`): the walk visits the graph's nodes in order, so each was built before
    # the node now rewritten; the driver empties it whenever it starts walking a graph
    built: dict[Hashable, ir.Value] = dataclasses.field(default_factory=dict)

    def built_earlier(self, key: Hashable, graph: ir.Graph) -> ir.Value | None:
        """The value `remember`ed for `key` in `graph` during this walk, while the node that
        makes it is still there (not removed as dead since); else None."""
        value = self.built.get((key, graph))
        producer = value.producer() if value is not None else None
        return value if producer is not None and producer.graph is graph else None

    def remember(self, key: Hashable, graph: ir.Graph, value: ir.Value) -> None:
        """Note that `value`, made in `graph` before the node now rewritten, computes `key`, so
        that a rewrite of a later node of `graph` reads it instead of computing it again
        (`built_earlier`)."""
        self.built[(key, graph)] = value

    def known_elements(self, sequence: ir.Value | None) -> tuple[ir.Value, ...] | Refusal:
        """The elements of `sequence` when they are values in the graph, else why not."""
        if sequence is None:
            return Refusal("the sequence input is missing")
        fact = self.facts.sequence(sequence)
        if isinstance(fact, KnownElements):
            return fact.elements
        if isinstance(fact, Unknown):
            return Refusal(fact.reason)
        return Refusal(f"only the length ({fact.length}) is known, not the elements")

    def replace_sequence(
        self,
        old: ir.Value,
        elements: Sequence[ir.Value],
        builder: Builder,
        dtype: ir.DataType | None = None,
    ) -> ir.Value:
        """Replace the sequence `old` by the canonical SequenceConstruct of `elements` (a
        SequenceEmpty when there are none), so that consumers can read the elements."""
        if elements:
            new = builder.op("SequenceConstruct", list(elements), name="sequence")
        else:
            dtype = element_dtype(old) or dtype or ir.DataType.FLOAT
            new = builder.op("SequenceEmpty", [], {"dtype": int(dtype)}, name="empty_sequence")
        new.type = old.type or ir.SequenceType(ir.TensorType(dtype or elements[0].dtype))
        self.rewriter.replace(old, new)
        return new


def never_empty(
    node: ir.Node, elements: tuple[ir.Value, ...], doing: str, ctx: Context
) -> Refusal | None:
    """When `node` `doing` (e.g. "reads from") an always-empty sequence: in the main graph, raise
    InvalidModelError (the model always fails); in a subgraph, which may never run, refuse."""
    if elements:
        return None
    if node.graph is ctx.rewriter.model.graph:
        raise InvalidModelError(
            f"{quoted_node(node)}: {doing} a sequence that is always empty "
            "(a run-time error in the ONNX spec)"
        )
    return Refusal(f"it {doing} a sequence that is always empty (an error if its body runs)")


Check = Callable[[ir.Node, Context], Any]
Rewrite = Callable[[ir.Node, Any, Context], None]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rewrite of one operator type. `check` returns match data or a `Refusal`.

    `before_producers` marks a rule that consumes a whole pattern, producers included (a
    SequenceMap batched straight from the SplitToSequence that feeds it): the driver tries such
    rules on every node before the others, so that the producers are not lowered piece by piece
    first, only for that work to die when the pattern is rewritten.

    `last_resort` marks a rule that commits to a run-time form (a Loop for a SequenceMap, a
    selection by a run-time position): the driver tries it only once no other rule applies
    anywhere, so that a length or a position another rewrite makes static reaches the rules
    that give the static form first (a map in a loop body unrolls with its loop)."""

    name: str
    op_type: str
    check: Check
    rewrite: Rewrite
    before_producers: bool = False
    last_resort: bool = False

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.rewrite) or ""


class RuleSet:
    """An ordered collection of rules, looked up by operator type. Order is priority."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._by_op: dict[str, list[Rule]] = {}
        self._before_producers_by_op: dict[str, list[Rule]] = {}
        self._not_last_resort_by_op: dict[str, list[Rule]] = {}
        for rule in self.rules:
            self._by_op.setdefault(rule.op_type, []).append(rule)
            if rule.before_producers:
                self._before_producers_by_op.setdefault(rule.op_type, []).append(rule)
            if not rule.last_resort:
                self._not_last_resort_by_op.setdefault(rule.op_type, []).append(rule)
        self.last_resort_ops = frozenset(r.op_type for r in self.rules if r.last_resort)

    def for_op(
        self, op_type: str, *, before_producers_only: bool = False, last_resort: bool = True
    ) -> list[Rule]:
        """The rules for `op_type` in priority order: only the `before_producers` ones, or
        all but the `last_resort` ones, when asked."""
        if before_producers_only:
            return self._before_producers_by_op.get(op_type, [])
        by_op = self._by_op if last_resort else self._not_last_resort_by_op
        return by_op.get(op_type, [])

    def __add__(self, other: RuleSet) -> RuleSet:
        return RuleSet(self.rules + other.rules)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.rules)
