"""The rank of every value, where ONNX shape inference gives none: through Loop, Scan and If
bodies, SequenceMap bodies, lists and the elements read back from them.

ONNX inference gives a Loop body's carried inputs no shape, so whatever a body computes from
them, or from an element it reads from a list the loop carries, has no rank:

    l = Loop(n, , SplitToSequence(x)) {             # x: float[1, C, H, W]
        e = SequenceAt(l_in, i)                     # ONNX: no shape
        y = Slice(Softmax(Conv(e, w)), ...)         # ONNX: no shape; here: rank 4
        l_out = SequenceInsert(SequenceErase(l_in, i), y, i) }

`Ranks` walks each graph in order with one fact per value: the rank of a tensor, the rank of
the elements of a sequence. A value whose shape inference gave a shape has that rank; any
other takes the rule of its operator (`seqlower.analysis.rank_rules`). The facts form a
lattice, NEVER (no value: an element of a list that is empty so far) < a rank < None
(unknown). A carried value of a Loop or Scan starts as its initial value; the body is walked
and each carried value joined with what the body returns, until nothing changes (by induction,
the rank holds in every iteration). An If output is the join of its branches', or the rank
its branch that runs gives where dims decide the condition (`seqlower.analysis.known_dims`).

Beside the ranks, the same walk keeps the length of each 1-D vector that neither its content
nor its declared dim gives (`seqlower.analysis.length_rules`): a shape built from `Shape` of a
value ranked here gives a Reshape, Expand or ConstantOfShape its rank.
"""

from __future__ import annotations

__all__ = ["MAX_RANK", "NEVER", "Ranks", "join"]

import onnx_ir as ir

from seqlower.analysis.known_dims import decided
from seqlower.analysis.length_rules import LENGTH_RULES
from seqlower.analysis.rank_rules import ALL_OUTPUTS, OUTPUT_RANKS, RANK_RULES, RankQuery
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, is_sequence_value, subgraphs

NEVER = -1  # no value under the current hypothesis (an element of an empty list)
# a rank proved larger is read as unknown: a Reshape to a shape vector declared 10**9 long would
# otherwise be given a shape of 10**9 unknown dims (`declare_ranks`), gigabytes from a tiny file
# (numpy's own limit on dims is 64)
MAX_RANK = 64
MAX_LENGTH = MAX_RANK  # a vector's length matters here as a rank (a shape, axes)

Fact = int | None


def join(a: Fact, b: Fact) -> Fact:
    """The rank of a value that is `a` on some paths and `b` on others."""
    if a == NEVER:
        return b
    if b == NEVER:
        return a
    return a if a == b else None


class Ranks:
    """Ranks of every value of a model (of the elements, for a sequence value)."""

    def __init__(self, model: ir.Model, values: StaticValues | None = None) -> None:
        self._facts: dict[ir.Value, Fact] = {}
        self._lengths: dict[ir.Value, int | None] = {}  # of 1-D vectors, where found
        self._values = values if values is not None else StaticValues()
        self._walk(model.graph)
        for function in model.functions.values():
            self._walk(function.graph)

    def rank(self, value: ir.Value | None) -> int | None:
        """The rank of a tensor value, or of the elements of a sequence value; None when
        unknown (or when no value is ever made)."""
        fact = self._fact(value)
        return None if fact is None or fact == NEVER else fact

    # -- the walk ------------------------------------------------------------------------

    def _fact(self, value: ir.Value | None) -> Fact:
        if value is None:
            return None
        declared = _declared(value)
        if declared is not None:
            return declared
        return self._facts.get(value)

    def _set(self, value: ir.Value | None, fact: Fact) -> None:
        if value is not None:
            self._facts[value] = fact

    def length(self, value: ir.Value | None) -> int | None:
        """The length of a 1-D vector whose declared dim does not give it, where the walk
        found it; None otherwise."""
        return None if value is None else self._lengths.get(value)

    def _walk(self, graph: ir.Graph) -> None:
        for node in graph_nodes(graph):
            self._visit(node)

    def _visit(self, node: ir.Node) -> None:
        self._visit_ranks(node)
        if node.op_type in LENGTH_RULES and node.domain == "":
            shape = node.outputs[0].shape  # most are declared, and not vectors of unknown length
            if shape is None or (len(shape) == 1 and not isinstance(shape[0], int)):
                self._length(node)

    def _visit_ranks(self, node: ir.Node) -> None:
        inner = subgraphs(node)
        if not inner and all(_declared(v) is not None for v in node.outputs):
            return  # ONNX inference gave every output a shape
        if node.domain != "":
            for graph in inner:
                self._walk(graph)
            return
        op = node.op_type
        if op == "Loop" and inner:
            self._loop(node, inner[0])
        elif op == "Scan" and inner:
            self._scan(node, inner[0])
        elif op == "If" and len(inner) == 2:
            self._if(node, *inner)
        elif op == "SequenceMap" and inner:
            self._sequence_map(node, inner[0])
        elif inner:
            for graph in inner:
                self._walk(graph)
        else:
            fact = self._sequence_op(node)
            if fact is not False:
                self._set(node.outputs[0], fact)  # type: ignore[arg-type]
            else:
                self._tensor_op(node)

    def _sequence_op(self, node: ir.Node) -> Fact | bool:
        """The fact of output 0 of a sequence operator (or of an Identity of a sequence), or
        False for any other operator."""
        op, inputs = node.op_type, node.inputs
        first = inputs[0] if inputs else None
        if op == "SequenceEmpty":
            return NEVER
        if op == "SequenceLength":
            return 0  # a tensor, even of a list that holds nothing
        if op == "SequenceConstruct":
            fact: Fact = NEVER
            for value in inputs:
                fact = join(fact, self._fact(value))
            return fact
        if op == "SequenceInsert":
            return join(self._fact(first), self._fact(inputs[1] if len(inputs) > 1 else None))
        if op == "SequenceErase" or op == "SequenceAt":
            return self._fact(first)
        if (
            op == "Identity"
            and first is not None
            and (is_sequence_value(first) or is_sequence_value(node.outputs[0]))
        ):
            return self._fact(first)
        if op == "ConcatFromSequence":
            fact = self._fact(first)
            return fact if fact is None or fact == NEVER else fact + _new_axis(node)
        if op == "SplitToSequence":
            return self._split_to_sequence(node)
        return False

    def _split_to_sequence(self, node: ir.Node) -> Fact:
        rank = self._fact(node.inputs[0])
        if rank is None or rank == NEVER:
            return rank
        split = node.inputs[1] if len(node.inputs) > 1 else None
        keepdims = node.attributes.get_int("keepdims", 1)
        if split is None:
            return rank if keepdims else rank - 1
        split_rank = self._fact(split)
        if split_rank == 1 or keepdims:
            return rank  # keepdims is ignored when `split` is given (the spec)
        return None  # a scalar split with keepdims=0: runtimes differ (normalize resolves it)

    def _length(self, node: ir.Node) -> None:
        """The length of output 0 where it is a 1-D vector of no static declared dim."""
        output = node.outputs[0]
        if output.shape is not None:  # a vector of no static length (`_visit` asked)
            if is_sequence_value(output):
                return
        elif self._facts.get(output) != 1 or is_sequence_value(output):
            self._lengths.pop(output, None)  # a vector under an earlier hypothesis, maybe
            return
        found = LENGTH_RULES[node.op_type](self._query(node))
        self._lengths[output] = found if found is None or 0 <= found <= MAX_LENGTH else None

    def _query(self, node: ir.Node) -> RankQuery:
        ranks = tuple(self._fact(value) for value in node.inputs)
        lengths = tuple(self._lengths.get(v) if v is not None else None for v in node.inputs)
        return RankQuery(node, ranks, self._values, lengths, self._lengths.get, self.rank)

    def _tensor_op(self, node: ir.Node) -> None:
        query = self._query(node)
        rule = RANK_RULES.get(node.op_type)
        multiple = OUTPUT_RANKS.get(node.op_type)
        # a tensor never made makes none; a sequence's NEVER only says it holds no element
        tensors = [r for r, v in zip(query.ranks, node.inputs) if not is_sequence_value(v)]
        every = multiple is not None or node.op_type in ALL_OUTPUTS
        count = len(node.outputs) if every else 1  # the outputs a rule gives
        if NEVER in tensors:
            facts: tuple[Fact, ...] = (NEVER,) * count
        elif multiple is not None:
            facts = multiple(query)
        elif rule is None:
            facts = (None,)
        else:
            facts = (rule(query),) * count
        for output, fact in zip(node.outputs, facts):
            if fact is not None and fact != NEVER and not 0 <= fact <= MAX_RANK:
                fact = None  # below 0: the model is invalid here; above MAX_RANK: no shape
            self._set(output, fact)

    def _if(self, node: ir.Node, then: ir.Graph, other: ir.Graph) -> None:
        self._walk(then)
        self._walk(other)
        # a condition known from dims (TorchScript's `squeeze(-1)` of a dim of one): the
        # branch that runs alone gives the outputs their ranks
        runs = decided(node.inputs[0] if node.inputs else None, self.rank, self._values)
        for output, a, b in zip(node.outputs, then.outputs, other.outputs):
            if runs is None:
                self._set(output, join(self._fact(a), self._fact(b)))
                length = self._lengths.get(a)
                self._lengths[output] = length if length == self._lengths.get(b) else None
            else:
                self._set(output, self._fact(a if runs else b))
                self._lengths[output] = self._lengths.get(a if runs else b)

    def _loop(self, node: ir.Node, body: ir.Graph) -> None:
        carried = node.inputs[2:]
        self._set(body.inputs[0] if body.inputs else None, 0)
        self._set(body.inputs[1] if len(body.inputs) > 1 else None, 0)
        state = [self._fact(value) for value in carried]
        state = self._until_stable(body, body.inputs[2:], body.outputs[1:], state)
        for output, fact in zip(node.outputs, state):
            self._set(output, fact)
        scans = node.outputs[len(carried) :]
        for output, body_output in zip(scans, body.outputs[1 + len(carried) :]):
            self._set(output, _stacked(self._fact(body_output)))

    def _scan(self, node: ir.Node, body: ir.Graph) -> None:
        states = len(node.inputs) - node.attributes.get_int("num_scan_inputs", 0)
        for value, body_input in zip(node.inputs[states:], body.inputs[states:]):
            fact = self._fact(value)
            self._set(body_input, fact - 1 if fact is not None and fact > 0 else None)
        state = [self._fact(value) for value in node.inputs[:states]]
        state = self._until_stable(body, body.inputs[:states], body.outputs[:states], state)
        for output, fact in zip(node.outputs, state):
            self._set(output, fact)
        for output, body_output in zip(node.outputs[states:], body.outputs[states:]):
            self._set(output, _stacked(self._fact(body_output)))

    def _until_stable(
        self,
        body: ir.Graph,
        inputs: list[ir.Value] | tuple[ir.Value, ...],
        outputs: list[ir.Value] | tuple[ir.Value, ...],
        state: list[Fact],
    ) -> list[Fact]:
        """Walk `body` with `state` on its carried `inputs`, joining what its `outputs` give,
        until the state holds (each fact rises at most twice: NEVER, a rank, None)."""
        for _ in range(2 * len(state) + 1):
            for value, fact in zip(inputs, state):
                self._set(value, fact)
            self._walk(body)
            new = [join(fact, self._fact(out)) for fact, out in zip(state, outputs)]
            if new == state:
                return state
            state = new
        # not reached for a monotone walk; unknown is safe, with the body walked under it
        state = [None] * len(state)
        for value in inputs:
            self._set(value, None)
        self._walk(body)
        return state

    def _sequence_map(self, node: ir.Node, body: ir.Graph) -> None:
        for value, body_input in zip(node.inputs, body.inputs):
            self._set(body_input, self._fact(value))  # an element, or the tensor itself
        self._walk(body)
        for output, body_output in zip(node.outputs, body.outputs):
            self._set(output, self._fact(body_output))


def _declared(value: ir.Value) -> int | None:
    shape = value.shape
    return None if shape is None else len(shape)


def _new_axis(node: ir.Node) -> int:
    return 1 if node.attributes.get_int("new_axis", 0) else 0


def _stacked(fact: Fact) -> Fact:
    """The rank of a scan output made of values of rank `fact`."""
    return None if fact is None or fact == NEVER else fact + 1
