"""Remove the values a Loop carries, and the outputs an If returns, that nothing needs:

    Loop(M, c, a, t, body: (i, c, a, t) -> (c', f(a), g(t, a)))     (the final t unread)
        -> Loop(M, c, a, body: (i, c, a) -> (c', f(a)))
    y, z = If(c, then: (.., ..), else: (.., ..))                     (z unread)
        -> y = If(c, then: (..), else: (..))

Lowering gives a list a pair of tensors; where the program reads only one of them after the
Loop that builds the list (the rows of a ragged list concatenated, never its row counts), the
other is still carried and grown in every iteration, with the Shape and Concat that grow it.
onnxruntime runs every carried value and every If output it is given. A carried value is
needed when the Loop's final value of it is read, or when anything needed in the body reads it
(the condition, another needed carried value, a scan output that is read); an If output when
it is read. One demand-driven walk from the main graph's outputs finds them all, Loops and Ifs
at any depth together (a carried value whose only reader is an If output that only feeds that
value again is not needed): each value is visited once. Scan outputs nobody reads go too. A
Loop or If none of whose outputs is needed is dead code, removed as such. Model-local
functions are left as they are.
"""

from __future__ import annotations

__all__ = ["remove_dead_carried"]

from collections.abc import Container

import onnx_ir as ir

from seqlower.ops import graph_nodes, graphs_within, iter_all_graphs, iter_all_nodes, subgraphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.uses import is_used


def remove_dead_carried(
    model: ir.Model,
    replaced: dict[ir.Node, ir.Node] | None = None,
    kept: Container[ir.Node] = (),
) -> int:
    """Remove every carried value, scan output and If output of `model` that no output of the
    model needs (see the module docstring); returns how many went. Each Loop or If that loses
    outputs is a new node: `replaced` gets each new node with the node it replaces. The nodes of
    `kept` (a region kept as given) keep their outputs."""
    if not _may_hold_loops(model):
        return 0  # nothing to take outputs from: no walk of the values (a 100k-node chain)
    if _every_output_read(model):
        return 0  # only an output read by nothing goes: no walk of the values (10,000 Ifs)
    needed = _Needed()
    needed.walk(model.graph.outputs)
    if all(len(found) == len(needed.holders[key].outputs) for key, found in needed.outputs.items()):
        return 0  # every output of every Loop and If reached is needed: no walk of the graphs
    removed = 0
    bodies: list[tuple[ir.Graph, list[int]]] = []  # each body with the carried inputs to drop
    # parents before children, users before producers: an output whose only reader was a
    # removed one is unread when its turn comes
    functions = {id(function.graph) for function in model.functions.values()}
    for graph in list(iter_all_graphs(model)):
        if id(graph) in functions:
            continue
        for node in reversed(list(graph_nodes(graph))):
            found = needed.outputs.get(id(node))
            dead = _unneeded(node, found) if found is not None and node not in kept else []
            if not dead:
                continue
            if node.op_type == "Loop":
                carried = len(node.inputs) - 2
                bodies.append((_body(node), [k for k in dead if k < carried]))
            new = _rebuild(node, dead)
            if replaced is not None:
                replaced[new] = replaced.pop(node, node)
            removed += len(dead)
    for body, dead in bodies:
        inputs = [body.inputs[2 + k] for k in dead]
        if any(value.uses() for value in inputs):  # read by what only the removed values needed
            for graph in graphs_within(body):
                remove_dead_upstream(reversed(list(graph_nodes(graph))))
        for k in sorted(dead, reverse=True):
            body.inputs.pop(2 + k)
    return removed


def _may_hold_loops(model: ir.Model) -> bool:
    """Whether a Loop or an If may be anywhere (only they are given needed outputs, and only
    their outputs are removed): the main graph's operators say it when they hold neither nor
    any body (model-local functions are not looked into); when they hold a body but no Loop
    or If, a walk of every graph's nodes, far cheaper than the walk of the values (the 5,000
    SequenceMap bodies of a 100k-node model hold neither)."""
    ops = {node.op_type for node in graph_nodes(model.graph)}
    if model.functions or not ops.isdisjoint(_LOOP_OR_IF):
        return True
    if ops.isdisjoint(_HOLDERS):
        return False
    return any(node.op_type in _LOOP_OR_IF for node in iter_all_nodes(model))


def _every_output_read(model: ir.Model) -> bool:
    """Whether every output of every Loop and If anywhere is read or is a graph output: then
    none is removed (`_unneeded` keeps those), needed or not, and the walk of the values can
    be spared. One walk of the nodes, which stops at the first output read by nothing."""
    for node in iter_all_nodes(model):
        if node.op_type in _LOOP_OR_IF:
            for value in node.outputs:
                if not is_used(value) and not value.is_graph_output():
                    return False
    return True


_HOLDERS = frozenset({"Scan", "SequenceMap"})  # the other holders of a body
_LOOP_OR_IF = frozenset({"Loop", "If"})


class _Needed:
    """The values some output of the model needs, with, per Loop and If reached, the indices
    of its outputs that are needed."""

    def __init__(self) -> None:
        self.values: set[int] = set()
        self.nodes: set[int] = set()
        self.outputs: dict[int, set[int]] = {}  # id of a Loop or If -> its needed outputs
        self.holders: dict[int, ir.Node] = {}  # id of a Loop or If reached -> the node
        self.carried: dict[int, tuple[ir.Node, int]] = {}  # id of a body input -> (loop, k)
        self._queue: list[ir.Value] = []

    def walk(self, roots: list[ir.Value]) -> None:
        for value in roots:
            self._need(value)
        while self._queue:
            value = self._queue.pop()
            if id(value) in self.carried:  # a body's carried input: the Loop carries it
                loop, index = self.carried[id(value)]
                self._output(loop, index)
            producer = value.producer()
            if producer is None:
                continue
            if _is_loop(producer) or _is_if(producer):
                self._output(producer, value.index())  # type: ignore[arg-type]
            elif id(producer) not in self.nodes:
                self.nodes.add(id(producer))
                for read in producer.inputs:
                    self._need(read)
                for subgraph in subgraphs(producer):
                    for result in subgraph.outputs:
                        self._need(result)

    def _need(self, value: ir.Value | None) -> None:
        if value is not None and id(value) not in self.values:
            self.values.add(id(value))
            self._queue.append(value)

    def _output(self, node: ir.Node, index: int) -> None:
        found = self.outputs.get(id(node))
        if found is None:
            found = self.outputs[id(node)] = set()
            self.holders[id(node)] = node
            if _is_loop(node):
                body = _body(node)
                self._need(node.inputs[0] if node.inputs else None)
                self._need(node.inputs[1] if len(node.inputs) > 1 else None)
                self._need(body.outputs[0])
                for k, value in enumerate(body.inputs[2:]):
                    self.carried[id(value)] = (node, k)
            else:
                self._need(node.inputs[0])
        if index in found:
            return
        found.add(index)
        if _is_loop(node):
            if index < len(node.inputs) - 2:  # a carried value: its initial value too
                self._need(node.inputs[2 + index])
            self._need(_body(node).outputs[1 + index])
        else:
            for branch in ("then_branch", "else_branch"):
                self._need(node.attributes[branch].as_graph().outputs[index])  # type: ignore[union-attr]


def _is_loop(node: ir.Node) -> bool:
    """A Loop whose body has the signature its inputs and outputs say (else: any node)."""
    if node.op_type != "Loop" or node.domain != "" or len(node.inputs) < 2:
        return False
    body = node.attributes.get("body")
    if body is None or body.type != ir.AttributeType.GRAPH:
        return False
    graph = body.as_graph()
    carried = len(node.inputs) - 2
    return len(graph.inputs) == 2 + carried and len(graph.outputs) == 1 + len(node.outputs)


def _is_if(node: ir.Node) -> bool:
    if node.op_type != "If" or node.domain != "" or len(node.inputs) != 1:
        return False
    branches = [node.attributes.get(name) for name in ("then_branch", "else_branch")]
    return all(
        b is not None
        and b.type == ir.AttributeType.GRAPH
        and len(b.as_graph().outputs) == len(node.outputs)
        for b in branches
    )


def _body(loop: ir.Node) -> ir.Graph:
    return loop.attributes["body"].as_graph()  # type: ignore[union-attr]


def _unneeded(node: ir.Node, needed: set[int]) -> list[int]:
    """The outputs of `node` to remove: not needed, read by nothing, no graph output."""
    return [
        index
        for index, value in enumerate(node.outputs)
        if index not in needed and not value.uses() and not value.is_graph_output()
    ]


def _rebuild(node: ir.Node, dead: list[int]) -> ir.Node:
    """Replace `node` by one without the outputs `dead` (and, for a Loop, the carried values
    they are: initial values and body outputs; the body inputs go once nothing reads them)."""
    gone = set(dead)
    inputs = list(node.inputs)
    dropped: list[ir.Value | None] = []  # what the node and its subgraphs no longer return
    if node.op_type == "Loop":
        body = _body(node)
        carried = len(node.inputs) - 2
        for index in sorted(gone, reverse=True):
            dropped.append(body.outputs.pop(1 + index))
            if index < carried:
                dropped.append(inputs.pop(2 + index))
    else:
        for branch in ("then_branch", "else_branch"):
            graph = node.attributes[branch].as_graph()  # type: ignore[union-attr]
            for index in sorted(gone, reverse=True):
                dropped.append(graph.outputs.pop(index))
    kept = [value for index, value in enumerate(node.outputs) if index not in gone]
    new = ir.Node(
        node.domain,
        node.op_type,
        inputs,
        attributes=list(node.attributes.values()),
        num_outputs=len(kept),
        name=node.name,
    )
    graph = node.graph
    assert graph is not None
    graph.insert_before(node, new)
    for old, value in zip(kept, new.outputs):
        value.type, value.shape = old.type, old.shape
        name = old.name
        old.replace_all_uses_with(value, replace_graph_outputs=True)
        old.name = None
        value.name = name
    graph.remove(node, safe=True)
    remove_dead_upstream(
        producer for value in dropped if value is not None and (producer := value.producer())
    )
    return new
