"""Values of a subgraph that take the name of a value of an enclosing graph are renamed.

    main: x = Relu(inp);  Loop(.., body (i, c, x) => ..)   (the body's input shadows x)
        -> body (i, c, x_inner) => ..

ONNX requires every name to be unique across a graph and the graphs nested in it; the checker
does not enforce it for a subgraph's inputs, and onnxruntime then binds a name inside the body
to the body's own value. seqlower keeps values as objects, but writes names: once a rewrite
moves a reader of the outer `x` into the body (a list read in a loop becomes a Gather of the
tensor it was split from), the written model would read the body's `x` instead. Renaming what
shadows keeps the meaning; a model without shadowing is left exactly as it is. Names that
sibling graphs share (both branches of an If) shadow nothing and are kept.

One walk, each value visited once: the names in scope are counted as graphs are entered and
left, never copied per graph.
"""

from __future__ import annotations

__all__ = ["rename_shadowing_values"]

from collections import Counter

import onnx_ir as ir

from seqlower.ops import graph_nodes, subgraphs


def rename_shadowing_values(model: ir.Model) -> int:
    """Rename every value of a subgraph whose name a value of an enclosing graph has, and every
    second value of one name in a graph (two loop bodies fused into one, say). Returns how many
    were renamed."""
    # one walk of each graph's nodes: its values and the subgraphs its nodes hold, in order (a
    # graph that two nodes hold is in scope under each); the graphs found breadth first,
    # parents before children, each once (`graphs_within`)
    defined: dict[int, list[ir.Value]] = {}
    held: dict[int, list[ir.Graph]] = {}
    names: list[str] = []
    graphs = [model.graph]
    seen = {id(model.graph)}
    for graph in graphs:  # grows while iterating
        outputs: list[ir.Value] = []
        inner_graphs = held[id(graph)] = []
        for node in graph_nodes(graph):
            outputs.extend(node.outputs)
            if node.attributes.data:
                for inner in subgraphs(node):
                    inner_graphs.append(inner)
                    if id(inner) not in seen:
                        seen.add(id(inner))
                        graphs.append(inner)
        values = defined[id(graph)] = _values(graph, outputs)
        names += [value.name for value in values if value.name]
    taken = set(names)
    if len(taken) == len(names):
        return 0  # no name is written twice: nothing can shadow
    fresh = _FreshNames(taken)
    in_scope: Counter[str] = Counter()
    renamed = 0
    stack: list[ir.Graph | set[str]] = [model.graph]
    while stack:
        item = stack.pop()
        if isinstance(item, set):  # leaving a graph: its names go out of scope
            in_scope.subtract(item)
            continue
        local: set[str] = set()
        for value in defined[id(item)]:
            if not value.name:
                continue
            if in_scope[value.name] > 0 or value.name in local:
                value.name = fresh(f"{value.name}_inner")
                renamed += 1
            local.add(value.name)  # type: ignore[arg-type]
        in_scope.update(local)
        stack.append(local)
        stack.extend(reversed(held[id(item)]))  # popped in graph order
    return renamed


def _values(graph: ir.Graph, outputs: list[ir.Value]) -> list[ir.Value]:
    """Each value a graph defines, once: an initializer may be an input too (its default);
    `outputs` are its nodes' outputs, in order."""
    values = dict.fromkeys([*graph.inputs, *graph.initializers.values()])
    values.update(dict.fromkeys(outputs))
    return list(values)


class _FreshNames:
    """`base`, else `base2`, `base3`...: the first name not taken, taken from then on. Where
    each base's search stopped is remembered (names are only ever taken, so every name before
    it still is): 5,000 map bodies whose input shadows the same outer name take linear time,
    not quadratic (2.7 s at 85k nodes)."""

    def __init__(self, taken: set[str]) -> None:
        self._taken = taken
        self._next: dict[str, int] = {}

    def __call__(self, base: str) -> str:
        k = self._next.get(base, 1)
        name = base if k == 1 else f"{base}{k}"
        while name in self._taken:
            k += 1
            name = f"{base}{k}"
        self._taken.add(name)
        self._next[base] = k
        return name
