"""Static lengths of sequence values as given, including lists a Loop carries unchanged in
length: what the cost model reads where a trip count or a list length is a SequenceLength.

    s = SequenceConstruct(a, b, c)                     length 3
    SequenceInsert(s, x) / SequenceErase(s)            length 4 / 2
    SplitToSequence(x[6, 4], split=2)                  length 3 (a static count of chunks)
    Loop(..., s) body: s' = SequenceConstruct(p, q, r) the body's input and the Loop's output:
                                                       length 3 (3 in, 3 out of every iteration)
    Loop(..., s) body: s' = SequenceInsert(s, x)       unknown (it grows every iteration)

A carried list has the length of its initial value when the body gives back a list of that same
length, found by assuming it for the body's input; any other case (a graph input, an If, a
SequenceMap's output, a split by run-time sizes) is unknown. Facts (`seqlower.analysis.facts`)
give no length to a Loop's carried list: the rules must not rely on one; the cost model only
estimates with it.
"""

from __future__ import annotations

__all__ = ["StaticLengths"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues

_SAME_LENGTH = frozenset({"Identity", "Optional", "OptionalGetElement"})
_EDITS = frozenset({"SequenceInsert", "SequenceErase"})


class StaticLengths:
    """The static length of each sequence value asked about (None when unknown), memoized. A
    Loop body's inputs are known only once the Loop is `register`ed (a walk of the graph meets
    the Loop before its body)."""

    def __init__(self, values: StaticValues) -> None:
        self.values = values
        self._known: dict[ir.Value, int | None] = {}
        self._assumed: dict[ir.Value, int] = {}
        self._loops: dict[ir.Graph, ir.Node] = {}

    def register(self, loop: ir.Node) -> None:
        """Make the carried inputs of `loop`'s body known as the body of `loop`."""
        body = loop.attributes.get("body")
        if loop.op_type == "Loop" and body is not None and body.type == ir.AttributeType.GRAPH:
            self._loops[body.as_graph()] = loop

    def of(self, value: ir.Value | None) -> int | None:
        if value is None:
            return None
        if value in self._assumed:
            return self._assumed[value]
        if value not in self._known:
            for link in reversed(self._chain(value)):  # the earliest first: no deep recursion
                self._known[link] = None  # a cycle through this value gives no length
                self._known[link] = self._compute(link)
        return self._known[value]

    def _chain(self, value: ir.Value) -> list[ir.Value]:
        """`value` and the lists before it along a chain of edits (SequenceInsert, Erase,
        Identity), up to one already known or assumed: a chain of 10,000 edits is walked in a
        loop, not by 10,000 nested calls."""
        chain = [value]
        seen = {value}
        while True:
            node = chain[-1].producer()
            if node is None or node.domain not in ("", "ai.onnx") or not node.inputs:
                return chain
            if node.op_type not in _SAME_LENGTH and node.op_type not in _EDITS:
                return chain
            before = node.inputs[0]
            if before is None or before in self._known or before in self._assumed or before in seen:
                return chain
            chain.append(before)
            seen.add(before)

    def _compute(self, value: ir.Value) -> int | None:
        node = value.producer()
        if node is None:
            return self._carried_input(value)
        if node.domain not in ("", "ai.onnx"):
            return None
        op = node.op_type
        if op == "SequenceConstruct":
            return len(node.inputs)
        if op == "SequenceEmpty":
            return 0
        if op in _SAME_LENGTH and node.inputs:
            return self.of(node.inputs[0])
        if op in ("SequenceInsert", "SequenceErase") and node.inputs:
            length = self.of(node.inputs[0])
            if length is None:
                return None
            return length + 1 if op == "SequenceInsert" else length - 1
        if op == "SplitToSequence":
            return self._chunks(node)
        if op == "Loop":
            return self._loop_output(node, value)
        return None

    def _chunks(self, node: ir.Node) -> int | None:
        """How many chunks a SplitToSequence makes, when static."""
        data = node.inputs[0] if node.inputs else None
        if data is None or data.shape is None:
            return None
        rank = len(data.shape)
        axis = node.attributes.get_int("axis", 0)
        if not -rank <= axis < rank:
            return None
        dim = data.shape[axis]
        split = node.inputs[1] if len(node.inputs) > 1 else None
        if split is None:
            return dim if isinstance(dim, int) else None
        if split.shape is not None and len(split.shape) == 1:
            count = split.shape[0]
            return count if isinstance(count, int) else None
        size = self.values.get_int(split)
        if isinstance(dim, int) and size is not None and size > 0:
            return -(-dim // size)
        return None

    def _loop_output(self, loop: ir.Node, value: ir.Value) -> int | None:
        index = value.index()
        carried = len(loop.inputs) - 2
        if index is None or index >= carried:
            return None  # a scan output is no sequence
        return self._invariant(loop, index)

    def _carried_input(self, value: ir.Value) -> int | None:
        """A Loop body's input for a carried list: the length it keeps, if it keeps one."""
        graph = value.graph
        loop = self._loops.get(graph) if graph is not None else None
        if loop is None or graph is None or not value.is_graph_input():
            return None
        index = list(graph.inputs).index(value)
        return self._invariant(loop, index - 2) if index >= 2 else None

    def _invariant(self, loop: ir.Node, k: int) -> int | None:
        """The length of the Loop's k-th carried list, when every iteration keeps it."""
        body_attr = loop.attributes.get("body")
        if body_attr is None or body_attr.type != ir.AttributeType.GRAPH:
            return None
        body = body_attr.as_graph()
        if len(body.inputs) != len(loop.inputs) or len(body.outputs) < k + 2:
            return None
        start = self.of(loop.inputs[k + 2])
        if start is None:
            return None
        inside, out = body.inputs[k + 2], body.outputs[k + 1]
        if inside in self._assumed:
            return self._assumed[inside]
        self._assumed[inside] = start
        try:
            after = self._fresh_length(out)
        finally:
            del self._assumed[inside]
        return start if after == start else None

    def _fresh_length(self, value: ir.Value) -> int | None:
        """The length of `value` under the current assumptions, none of it remembered (an
        assumption may not hold)."""
        saved = self._known
        self._known = {}
        try:
            return self.of(value)
        finally:
            self._known = saved
