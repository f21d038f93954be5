"""Length relations between lists, proved by induction over the Loops that carry them.

`Facts` gives a list a Loop carries an unknown length. A decoder's caches need more: that the key
and value caches have one length, that the layer loop puts element i at position i in iteration
i, and that no cache grows past the number of layers. Three facts, each a proof for all inputs:

- `same_length(a, b)`: two lists have one length. A length is a term `base + offset`: an insert
  adds one, an erase takes one, Identity and SequenceMap keep it, an If gives its branches' term
  when they agree, SequenceEmpty, SequenceConstruct and a static split give a constant. The lists
  a Loop carries are grouped by a greatest fixpoint: assume the carried lists whose initial
  values have one length keep one length, give each group's body inputs one base, compute the
  terms of the body's outputs under that assumption, split every group whose outputs differ,
  and repeat until no group splits. What is left is an induction (equal on entry, and equal
  after an iteration when equal before it), so each group's Loop outputs share one base too.
- `sets_at_iteration(loop, k)`: on every path through the body, the list carried in slot k
  leaves with element i put at position i (i the iteration number) and nothing else changed:
  an append, or an insert at i, where the path proves len == i, or an erase at i then an insert
  at i where it proves i < len. Induction: the length on entering iteration i is max(L0, i) (L0
  the initial length), since putting at i keeps max(L0, i) when i < L0 and makes it i + 1 when
  len == i; so `len <= i` on a path proves len == i there, and `len > i` proves i < len. A path
  is told by the conditions of the Ifs around it: `SequenceLength(t) <= i` and its mirror
  forms, with t any list of the body proved to have the length of the carried one.
- `at_most(s, bound)`: the length of `s` never exceeds the static `bound`. A Loop output in a
  slot that `sets_at_iteration` has length max(L0, iterations run), so at most the bound when
  L0 and the trip count are; a list a Loop carries, by induction over that Loop (at most the
  bound on entry, and after an iteration when at most the bound before it).

Answers are kept while the lists do not change (`Facts.list_lengths` makes a new one when a
rewrite may have changed a list); the proofs that read conditions are kept one generation.
"""

from __future__ import annotations

__all__ = ["ListLengths", "Term"]

from collections.abc import Callable

import onnx_ir as ir

from seqlower.ops import graphs_within, is_sequence_value, peel_identity, quoted_node, subgraphs

# A length: (base, offset). base None is the constant offset; otherwise a value (a list whose
# length is opaque, or the representative of a group of lists with one length) plus offset.
Term = tuple[ir.Value | None, int]

_KEEPS_LENGTH = ("Identity", "SequenceMap")
_MAX_LENGTHS = 8  # `possible_lengths` gives up beyond
# a comparison of a length (l) with the iteration number (i): what holds where it is true, and
# where it is false, given l >= i ("eq": l == i, "gt": l > i)
_COMPARISONS = {
    ("LessOrEqual", "l", "i"): ("eq", "gt"),
    ("GreaterOrEqual", "i", "l"): ("eq", "gt"),
    ("Greater", "l", "i"): ("gt", "eq"),
    ("Less", "i", "l"): ("gt", "eq"),
    ("Equal", "l", "i"): ("eq", "gt"),
    ("Equal", "i", "l"): ("eq", "gt"),
}


class ListLengths:
    """Length facts for the lists of one model (see the module docstring). `static_int` folds
    a tensor to a Python int when it is static; `static_length` gives the static length of a
    list when `Facts` knows it; `generation` changes whenever the model may have changed."""

    def __init__(
        self,
        main_graph: ir.Graph,
        static_int: Callable[[ir.Value | None], int | None],
        static_length: Callable[[ir.Value], int | None],
        generation: Callable[[], int] | None = None,
        runs_all: Callable[[ir.Node], bool] | None = None,
    ) -> None:
        self._main_graph = main_graph
        self._runs_all = runs_all or (lambda _: False)
        self._static_int = static_int
        self._static_length = static_length
        self._generation = generation
        self._owners: dict[int, ir.Node] | None = None  # id of a subgraph -> its node
        self._terms: dict[ir.Value, Term] = {}
        self._groups: dict[ir.Node, tuple[tuple[int, ...], ...]] = {}  # proved
        self._assumed: dict[ir.Node, tuple[tuple[int, ...], ...]] = {}  # being proved
        self._seen = generation() if generation is not None else 0
        self._proofs: dict[tuple[ir.Node, int], str | None] = {}
        self._bounds: dict[tuple[ir.Value, int], bool] = {}

    # -- one length ----------------------------------------------------------------------

    def same_length(self, a: ir.Value, b: ir.Value) -> bool:
        """Whether the lists `a` and `b` have one length whenever both are computed."""
        return a is b or self.term(a) == self.term(b)

    def term(self, value: ir.Value) -> Term:
        """The length of the list `value` as `base + offset`."""
        known = self._terms.get(value)
        if known is not None:
            return known
        offset, start = 0, value
        while (producer := start.producer()) is not None and producer.domain == "":
            if producer.op_type in _KEEPS_LENGTH and producer.inputs and producer.inputs[0]:
                start = producer.inputs[0]
            elif producer.op_type in ("SequenceInsert", "SequenceErase") and producer.inputs[0]:
                offset += 1 if producer.op_type == "SequenceInsert" else -1
                start = producer.inputs[0]
            else:
                break
        base, base_offset = self._made(start)
        result = (base, base_offset + offset)
        self._terms[value] = result
        return result

    def groups(self, loop: ir.Node) -> tuple[tuple[int, ...], ...]:
        """The carried slots (0 = the first carried value) of `loop` grouped by the greatest
        fixpoint: the lists in one group have one length in every iteration and after it."""
        proved = self._groups.get(loop)
        if proved is not None:
            return proved
        assumed = self._assumed.get(loop)
        if assumed is not None:  # asked again inside its own body: the current assumption
            return assumed
        body = _body(loop)
        slots = [k for k in range(len(loop.inputs) - 2) if _carries_list(loop, body, k)]
        by_start: dict[Term, list[int]] = {}
        for k in slots:
            start = loop.inputs[2 + k]
            assert start is not None
            by_start.setdefault(self.term(start), []).append(k)
        groups = tuple(tuple(group) for group in by_start.values())
        inside = {id(graph) for graph in graphs_within(body)}
        while True:
            self._assumed[loop] = groups
            self._forget(inside)
            split: list[tuple[int, ...]] = []
            for group in groups:
                by_end: dict[Term, list[int]] = {}
                for k in group:
                    by_end.setdefault(self.term(body.outputs[1 + k]), []).append(k)
                split.extend(tuple(part) for part in by_end.values())
            if len(split) == len(groups):
                break
            groups = tuple(split)
        del self._assumed[loop]
        self._groups[loop] = groups
        return groups

    def _forget(self, graphs: set[int]) -> None:
        """Drop what was derived inside `graphs` under an assumption that changed."""
        for value in [v for v in self._terms if v.graph is not None and id(v.graph) in graphs]:
            del self._terms[value]
        for loop in [n for n in self._groups if n.graph is not None and id(n.graph) in graphs]:
            del self._groups[loop]

    def _made(self, value: ir.Value) -> Term:
        """The term of a list made by something other than an insert, erase or Identity."""
        producer = value.producer()
        if producer is None:
            return self._carried_input(value)
        if producer.domain != "":
            return (value, 0)
        static = self._static_length(value)
        if producer.op_type in ("SequenceEmpty", "SequenceConstruct", "SplitToSequence"):
            return (None, static) if static is not None else (value, 0)
        if producer.op_type == "If":
            return self._if_output(producer, value)
        if producer.op_type == "Loop":
            return self._loop_output(producer, value)
        return (value, 0)

    def _carried_input(self, value: ir.Value) -> Term:
        """A body input of a Loop: its group's base (the body input of the group's first slot)."""
        carried = self._carried_slot(value)
        if carried is None:
            return (value, 0)
        loop, slot = carried
        for group in self.groups(loop):
            if slot in group:
                return (_body(loop).inputs[2 + group[0]], 0)
        return (value, 0)

    def _carried_slot(self, value: ir.Value) -> tuple[ir.Node, int] | None:
        """The Loop whose body input `value` is a carried value, and its slot; else None."""
        graph = value.graph
        loop = self._owner(graph)
        if graph is None or loop is None or loop.op_type != "Loop" or loop.domain != "":
            return None
        index = next((j for j, v in enumerate(graph.inputs) if v is value), None)
        return None if index is None or index < 2 else (loop, index - 2)

    def _if_output(self, node: ir.Node, value: ir.Value) -> Term:
        """The branches' term when they agree; else one base for the outputs of `node` whose
        branches give the same pair of terms (each branch keeps their lengths equal)."""
        pairs = [self._branch_terms(node, index) for index in range(len(node.outputs))]
        index = list(node.outputs).index(value)
        pair = pairs[index]
        if pair is None:
            return (value, 0)
        if pair[0] == pair[1] and (pair[0][0] is None or _visible_outside(pair[0][0], node)):
            return pair[0]
        return (node.outputs[pairs.index(pair)], 0)

    def _branch_terms(self, node: ir.Node, index: int) -> tuple[Term, Term] | None:
        """The terms of output `index` of the If `node` in its then and else branches."""
        found = []
        for name in ("then_branch", "else_branch"):
            attr = node.attributes.get(name)
            if attr is None or attr.type != ir.AttributeType.GRAPH:
                return None
            output = attr.as_graph().outputs[index]
            if not is_sequence_value(output):
                return None
            found.append(self.term(output))
        return (found[0], found[1])

    def _loop_output(self, loop: ir.Node, value: ir.Value) -> Term:
        """A carried output of a Loop: its start's term when the body keeps the length, else
        one base for its group."""
        index = list(loop.outputs).index(value)
        body = _body(loop)
        for group in self.groups(loop):
            if index not in group:
                continue
            representative = body.inputs[2 + group[0]]
            if self.term(body.outputs[1 + index]) == (representative, 0):
                start = loop.inputs[2 + index]
                assert start is not None
                return self.term(start)
            return (loop.outputs[group[0]], 0)
        return (value, 0)

    def owner(self, graph: ir.Graph | None) -> ir.Node | None:
        """The node that holds the subgraph `graph` (None for the main graph, or a graph
        made after this analysis), found by one walk of the model, kept with the analysis."""
        return self._owner(graph)

    def _owner(self, graph: ir.Graph | None) -> ir.Node | None:
        if self._owners is None:
            self._owners = {}
            for node in self._main_graph.all_nodes():
                if node.attributes.data:
                    for subgraph in subgraphs(node):
                        self._owners[id(subgraph)] = node
        return None if graph is None else self._owners.get(id(graph))

    # -- element i put at i ------------------------------------------------------------------

    def sets_at_iteration(self, loop: ir.Node, slot: int) -> str | None:
        """None when, on every path through the body of `loop`, carried slot `slot` (0 = the
        first carried value) leaves with element i put at position i and nothing else changed
        (see the module docstring); else why not."""
        self._check_generation()
        key = (loop, slot)
        if key not in self._proofs:
            self._proofs[key] = self._prove_sets(loop, slot)
        return self._proofs[key]

    def _prove_sets(self, loop: ir.Node, slot: int) -> str | None:
        body = _body(loop)
        if not 0 <= slot < len(loop.inputs) - 2 or not _carries_list(loop, body, slot):
            return "it is not a list the loop carries"
        state = body.inputs[2 + slot]
        counter = body.inputs[0]
        # each pending output, with what the Ifs around it prove: None, "eq" or "gt"
        pending: list[tuple[ir.Value, str | None]] = [(body.outputs[1 + slot], None)]
        while pending:
            value, known = pending.pop()
            producer = value.producer()
            if producer is None or producer.domain != "":
                return f"'{value.name}' is not an edit of the list in the body"
            if producer.op_type == "Identity" and producer.inputs[0] is not None:
                pending.append((producer.inputs[0], known))
            elif producer.op_type == "If":
                paths = self._branches(producer, value, state, counter, known)
                if isinstance(paths, str):
                    return paths
                pending.extend(reversed(paths))  # the then branch first
            elif producer.op_type == "SequenceInsert":
                why = self._puts_at(producer, state, counter, known)
                if why is not None:
                    return why
            else:
                return f"the list leaves the body through {producer.op_type}, not an edit at i"
        return None

    def _branches(
        self,
        node: ir.Node,
        value: ir.Value,
        state: ir.Value,
        counter: ir.Value,
        known: str | None,
    ) -> list[tuple[ir.Value, str | None]] | str:
        """The outputs of both branches of the If `node` for its output `value`, each with what
        the condition proves about the list's length there."""
        index = list(node.outputs).index(value)
        then_known, else_known = known, known
        cond = node.inputs[0]
        compared = self.compares_length(cond, state, counter) if cond is not None else None
        if compared is not None:
            then_known, else_known = known or compared[0], known or compared[1]
        found = []
        for name, holds in (("then_branch", then_known), ("else_branch", else_known)):
            attr = node.attributes.get(name)
            if attr is None or attr.type != ir.AttributeType.GRAPH:
                return f"{quoted_node(node)} has no {name}"
            found.append((attr.as_graph().outputs[index], holds))
        return found

    def compares_length(
        self, cond: ir.Value, state: ir.Value, counter: ir.Value
    ) -> tuple[str, str] | None:
        """What `cond` proves where true and where false ("eq": the length is i, "gt": it is
        more), when it compares the length of a list of the state's length with the iteration
        number `counter` (through Casts to bool and Not), the state's length at least i."""
        negated = False
        while (producer := cond.producer()) is not None and producer.domain == "":
            to_bool = producer.attributes.get_int("to") == int(ir.DataType.BOOL)
            if producer.op_type == "Identity" or (producer.op_type == "Cast" and to_bool):
                cond = producer.inputs[0]  # type: ignore[assignment]
            elif producer.op_type == "Not":
                cond, negated = producer.inputs[0], not negated  # type: ignore[assignment]
            else:
                break
            if cond is None:
                return None
        if producer is None or producer.domain != "" or len(producer.inputs) != 2:
            return None
        roles = []
        for operand in producer.inputs:
            if operand is counter:
                roles.append("i")
            elif operand is not None and self._is_state_length(operand, state):
                roles.append("l")
            else:
                return None
        found = _COMPARISONS.get((producer.op_type, *roles))
        if found is None:
            return None
        return (found[1], found[0]) if negated else found

    def _is_state_length(self, value: ir.Value, state: ir.Value) -> bool:
        """Whether `value` is SequenceLength of a list with the length of `state`."""
        producer = value.producer()
        return (
            producer is not None
            and producer.op_type == "SequenceLength"
            and producer.domain == ""
            and producer.inputs[0] is not None
            and self.same_length(producer.inputs[0], state)
        )

    def _puts_at(
        self, insert: ir.Node, state: ir.Value, counter: ir.Value, known: str | None
    ) -> str | None:
        """None when the SequenceInsert `insert` puts one element at i into the state: an
        append (or an insert at i) where len == i is proved, an erase at i then an insert at i
        where i < len is."""
        target = insert.inputs[0]
        position = insert.inputs[2] if len(insert.inputs) > 2 else None
        if target is None or insert.inputs[1] is None:
            return "an insert has no list or no tensor"
        target = peel_identity(target)
        if target is state:
            if position is not None and position is not counter:
                return f"{quoted_node(insert)} is not at the end or at i"
            if known != "eq":
                return f"{quoted_node(insert)} appends where the length is not proved to be i"
            return None
        erase = target.producer()
        if (
            erase is None
            or erase.op_type != "SequenceErase"
            or erase.domain != ""
            or erase.inputs[0] is None
            or peel_identity(erase.inputs[0]) is not state
            or len(erase.inputs) < 2
            or erase.inputs[1] is not counter
        ):
            return f"{quoted_node(insert)} is not into the list, or after an erase at i"
        if position is not counter:
            return f"{quoted_node(insert)} after the erase at i is not at i"
        if known != "gt":
            return f"the erase at i before {quoted_node(insert)} is where i < length is not proved"
        return None

    # -- a bound -------------------------------------------------------------------------

    def at_most(self, value: ir.Value, bound: int) -> bool:
        """Whether the length of the list `value` is never more than `bound`."""
        self._check_generation()
        return self._at_most(value, bound, {})

    def _at_most(self, value: ir.Value, bound: int, assumed: dict[ir.Value, int]) -> bool:
        """`assumed`: the lists a Loop carries that are assumed at most a bound on entering an
        iteration (the induction's hypothesis), each with its bound."""
        key = (value, bound)
        if key in self._bounds:
            return self._bounds[key]
        base, offset = self.term(value)
        if base is None:
            return offset <= bound
        if offset > 0:  # grown from a base: ask for the base to be at most bound - offset
            return self._at_most(base, bound - offset, assumed)
        if base in assumed:  # the hypothesis, when it is at least as strong as the question
            return assumed[base] <= bound
        found = self._base_at_most(base, bound, assumed)
        if not assumed:  # proved without an open assumption: keep it
            self._bounds[key] = found
        return found

    def _base_at_most(self, base: ir.Value, bound: int, assumed: dict[ir.Value, int]) -> bool:
        producer = base.producer()
        if producer is not None and producer.op_type == "Loop" and producer.domain == "":
            slot = list(producer.outputs).index(base)
            trips = self._static_int(producer.inputs[0])
            start = producer.inputs[2 + slot]
            if start is None or not self._at_most(start, bound, assumed):
                return False
            if (
                trips is not None
                and trips <= bound
                and self.sets_at_iteration(producer, slot) is None
            ):
                return True  # max(L0, iterations run): at most max(L0, trips)
            return self._carried_at_most(producer, slot, bound, assumed)
        carried = None if producer is not None else self._carried_slot(base)
        if carried is None:
            return False
        loop, slot = carried
        start = loop.inputs[2 + slot]
        if start is None or not self._at_most(start, bound, assumed):
            return False
        return self._carried_at_most(loop, slot, bound, assumed)

    def _carried_at_most(
        self, loop: ir.Node, slot: int, bound: int, assumed: dict[ir.Value, int]
    ) -> bool:
        """The induction's step for carried slot `slot` (its start already at most `bound`):
        at most `bound` after an iteration when at most `bound` entering it."""
        body = _body(loop)
        if not _carries_list(loop, body, slot):
            return False
        inner = {**assumed, body.inputs[2 + slot]: bound}
        return self._at_most(body.outputs[1 + slot], bound, inner)

    # -- the lengths it may have ---------------------------------------------------------

    def possible_lengths(self, value: ir.Value) -> frozenset[int] | None:
        """Every length the list `value` may have, when they are few and static (at most
        `_MAX_LENGTHS`); else None. A Loop output in a slot that `sets_at_iteration`, of a Loop
        that runs all its M iterations, has length max(L0, M) for each possible L0; a list a
        Loop carries, the least fixpoint from its initial lengths (the decoder's caches: 0 on
        the first step, the number of layers after it)."""
        self._check_generation()
        return self._possible(value, {})

    def _possible(
        self, value: ir.Value, known: dict[ir.Value, frozenset[int]]
    ) -> frozenset[int] | None:
        base, offset = self.term(value)
        if base is None:
            return frozenset({offset})
        found = known[base] if base in known else self._possible_base(base, known)
        return None if found is None else frozenset(n + offset for n in found)

    def _possible_base(
        self, base: ir.Value, known: dict[ir.Value, frozenset[int]]
    ) -> frozenset[int] | None:
        producer = base.producer()
        if producer is not None and producer.op_type == "Loop" and producer.domain == "":
            slot = list(producer.outputs).index(base)
            trips = self._static_int(producer.inputs[0])
            start = producer.inputs[2 + slot]
            if start is None:
                return None
            if (
                trips is not None
                and self._runs_all(producer)
                and self.sets_at_iteration(producer, slot) is None
            ):
                starts = self._possible(start, known)
                return None if starts is None else frozenset(max(n, trips) for n in starts)
            return self._carried_possible(producer, slot, known)  # after any iteration
        carried = None if producer is not None else self._carried_slot(base)
        return None if carried is None else self._carried_possible(*carried, known)

    def _carried_possible(
        self, loop: ir.Node, slot: int, known: dict[ir.Value, frozenset[int]]
    ) -> frozenset[int] | None:
        """The lengths list `slot` of `loop` may have entering any iteration or after the
        last: the least fixpoint from its initial lengths."""
        body = _body(loop)
        start = loop.inputs[2 + slot]
        if start is None or not _carries_list(loop, body, slot):
            return None
        carried = self.term(body.inputs[2 + slot])[0]  # the group's representative
        assert carried is not None
        found = self._possible(start, known)
        for _ in range(_MAX_LENGTHS + 1):  # each round adds a length, or ends
            if found is None or len(found) > _MAX_LENGTHS:
                return None
            after = self._possible(body.outputs[1 + slot], {**known, carried: found})
            if after is None:
                return None
            if after <= found:
                return found
            found = found | after
        return None

    def _check_generation(self) -> None:
        if self._generation is None:
            self._proofs.clear()
            self._bounds.clear()
            return
        seen = self._generation()
        if seen != self._seen:
            self._seen = seen
            self._proofs.clear()
            self._bounds.clear()


def _body(loop: ir.Node) -> ir.Graph:
    return loop.attributes["body"].as_graph()


def _carries_list(loop: ir.Node, body: ir.Graph, slot: int) -> bool:
    """Whether carried slot `slot` of `loop` is a list (as the Loop or its body declares)."""
    if 2 + slot >= len(body.inputs) or 1 + slot >= len(body.outputs):
        return False
    return is_sequence_value(loop.inputs[2 + slot]) or is_sequence_value(body.inputs[2 + slot])


def _visible_outside(value: ir.Value, node: ir.Node) -> bool:
    """Whether `value` (a base found inside a branch of `node`) is defined outside `node`."""
    graph = value.graph
    if graph is None:
        return False
    return all(graph is not inner for inner in _branch_graphs(node))


def _branch_graphs(node: ir.Node) -> list[ir.Graph]:
    return [g for sub in subgraphs(node) for g in graphs_within(sub)]
