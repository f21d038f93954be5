"""A chain of operators that only add, drop or move axes of size one is one Squeeze and one
Unsqueeze at most, and nothing when it gives its source back; a Shape of such a chain reads the
source's dims.

    u = Unsqueeze(x, [1])            (x [K, T]; u [K, 1, T])
    t = Transpose(u, [0, 2, 1])      (t [K, T, 1])
    y = Squeeze(t, [2])              ->   y's readers read x

    r = Unsqueeze(s, [1])            (s [K])
    p = ReduceProd(r, axes=[1], keepdims=0)   ->   p's readers read s

    e = Expand(..)                   (e [K, 1, T])
    t = Transpose(e, [0, 2, 1])
    y = Squeeze(t, [2])              ->   y = Squeeze(e, [1])

    n = Shape(Unsqueeze(x, [1]), start=2, end=3)   ->   n = Shape(x, start=1, end=2)

The batched forms of per-element code make such chains: an element of rank one held as a row of
a mask `[K, 1, T]`, transposed to the layout a later step wants, squeezed back; a count reduced
over the axis an Unsqueeze just made. onnxruntime runs each as a kernel (it folds none of them).

The operators of a chain, each on its first output, with constant axes valid for its input's
known rank: Unsqueeze; Squeeze of dims known to be 1; a Transpose that keeps the order of the
axes not known to be 1; ReduceSum, ReduceProd, ReduceMax, ReduceMin and ReduceMean over explicit
axes whose dims are known to be 1 (each reduces one value: the value itself, a NaN included;
`keepdims=1` keeps the axes). None of them can fail where it is used, so dropping one drops no
failure; a Squeeze made anew drops only axes some step of the chain squeezed or reduced (known to
be 1) or moved (known to be 1). A chain whose result is its source is removed; one that adds and
drops axes is rebuilt as a Squeeze then an Unsqueeze only where that is fewer nodes and every
node of the chain before its end has no other reader (else the count of launches would not
fall). Each chain is walked once from its end (the map of each value is memoized). Before opset
13 Squeeze and Unsqueeze take their axes as attributes; a Shape is rewritten only from opset 15
(its `start` and `end`).
"""

from __future__ import annotations

__all__ = ["UNIT_AXIS_OPS", "fold_unit_axes"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.passes.new_constants import fresh_name, int64_constant_before
from seqlower.uses import use_count

_REDUCTIONS = frozenset({"ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceMean"})
_UNIT_OPS = frozenset({"Unsqueeze", "Squeeze", "Transpose", *_REDUCTIONS})
# what the pass looks for (a Shape reads a chain only if the model holds a step)
UNIT_AXIS_OPS = _UNIT_OPS

# one entry per axis of a value: the axis of the chain's source it is, or None (an axis of one
# the chain added), and whether the axis is known to be 1
Axis = tuple[int | None, bool]


class _Chain:
    """The source a value is made from by unit-axis operators, its axes' map, and the nodes."""

    __slots__ = ("axes", "nodes", "source")

    def __init__(self, source: ir.Value, axes: list[Axis], nodes: list[ir.Node]) -> None:
        self.source = source
        self.axes = axes
        self.nodes = nodes


def fold_unit_axes(model: ir.Model) -> int:
    """Fold every chain of unit-axis operators and every Shape of one (module docstring);
    returns how many chains and Shapes were folded."""
    opset = model.opset_imports.get("", 1)
    values = StaticValues(opset)
    memo: dict[ir.Value, _Chain | None] = {}
    names: set[str | None] = set()
    folded = 0
    dropped: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.domain != "":
                continue
            if node.op_type == "Shape":
                before = _fold_shape(node, values, memo) if opset >= 15 else None
                if before is not None:
                    dropped.append(before)
                    folded += 1
                continue
            if node.op_type not in _UNIT_OPS or not _chain_end(node, values, graph):
                continue
            chain = _chain(node.outputs[0], values, memo)
            if chain is None:
                continue
            names = names or _output_names(model)
            if _rebuild(node, chain, opset, names):
                dropped.append(node)
                folded += 1
    if dropped:
        remove_dead_upstream(dropped)
    return folded


def _chain_end(node: ir.Node, values: StaticValues, graph: ir.Graph) -> bool:
    """Whether `node`'s output is read by something other than a unit-axis step of its graph."""
    output = node.outputs[0]
    if output.is_graph_output():
        return True
    return any(
        reader.graph is not graph or _step(reader, values) is None for reader, _ in output.uses()
    )


def _chain(value: ir.Value, values: StaticValues, memo: dict) -> _Chain | None:
    """The chain that makes `value`, or None when `value` is not made by a unit-axis step."""
    if value in memo:
        return memo[value]
    # walk up to the first value not made by a step (iteratively: chains may be long)
    made_by = value.producer()
    if made_by is None:
        return None
    pending: list[ir.Value] = []
    current: ir.Value | None = value
    while current is not None and current not in memo:
        node = current.producer()
        if node is None or node.graph is not made_by.graph:
            break
        if _step(node, values) is None:
            break
        pending.append(current)
        current = node.inputs[0]
    for made in reversed(pending):
        node = made.producer()
        assert node is not None
        source = node.inputs[0]
        assert source is not None
        before = memo.get(source)
        if before is None:
            if source.shape is None:
                memo[made] = None
                continue
            dims = list(source.shape)
            before = _Chain(source, [(i, d == 1) for i, d in enumerate(dims)], [])
        step = _step(node, values)
        assert step is not None
        dims = list(source.shape)  # type: ignore[arg-type]
        # an axis inference knows to be 1 here is 1 in the source too
        known = [(s, unit or dims[i] == 1) for i, (s, unit) in enumerate(before.axes)]
        axes = _apply(step, known)
        memo[made] = None if axes is None else _Chain(before.source, axes, [*before.nodes, node])
    return memo.get(value)


def _step(node: ir.Node, values: StaticValues) -> tuple[str, list[int]] | None:
    """("insert", axes), ("drop", axes), ("keep", []) or ("perm", perm) when `node` is a
    unit-axis operator on a value of known rank (module docstring), else None."""
    if node.domain != "" or node.op_type not in _UNIT_OPS or not node.inputs:
        return None
    data = node.inputs[0]
    if data is None or data.shape is None or len(node.outputs) != 1:
        return None
    dims = list(data.shape)
    rank = len(dims)
    op = node.op_type
    if op == "Transpose":
        perm = node.attributes.get_ints("perm", None)
        perm = list(range(rank))[::-1] if perm is None else list(perm)
        if sorted(perm) != list(range(rank)):
            return None
        moved = [a for a in perm if dims[a] != 1]
        return ("perm", perm) if moved == sorted(moved) else None
    axes = _axes(node, values)
    if not axes:
        return None
    if op == "Unsqueeze":
        out = rank + len(axes)
        if any(not -out <= a < out for a in axes):
            return None
        normalized = sorted(a % out for a in axes)
        return ("insert", normalized) if len(set(normalized)) == len(normalized) else None
    if any(not -rank <= a < rank for a in axes):
        return None
    normalized = sorted({a % rank for a in axes})
    if len(normalized) != len(axes) or any(dims[a] != 1 for a in normalized):
        return None
    if op in _REDUCTIONS and node.attributes.get_int("keepdims", 1):
        return ("keep", [])
    return ("drop", normalized)


def _axes(node: ir.Node, values: StaticValues) -> list[int] | None:
    """The constant axes `node` names (input or attribute), None if not constant or absent."""
    if len(node.inputs) > 1:
        return values.get_ints(node.inputs[1]) if node.inputs[1] is not None else None
    found = node.attributes.get_ints("axes", None)
    return None if found is None else list(found)


def _apply(step: tuple[str, list[int]], axes: list[Axis]) -> list[Axis] | None:
    kind, which = step
    if kind == "keep":
        return axes
    if kind == "drop":
        return [a for i, a in enumerate(axes) if i not in which]
    if kind == "perm":
        return [axes[p] for p in which]
    out: list[Axis] = []
    given = iter(axes)
    for i in range(len(axes) + len(which)):
        out.append((None, True) if i in which else next(given))
    return out


def _plan(chain: _Chain) -> tuple[list[int], list[int]] | None:
    """(axes of the source to squeeze, axes of the result to unsqueeze) making the chain's
    result from its source, or None."""
    rank = len(chain.source.shape)  # type: ignore[arg-type]
    for free_units in (False, True):
        kept = [
            (i, s)
            for i, (s, unit) in enumerate(chain.axes)
            if s is not None and not (free_units and unit)
        ]
        sources = [s for _, s in kept]
        if sources != sorted(set(sources)):
            continue
        squeezed = [a for a in range(rank) if a not in sources]
        inserted = [i for i in range(len(chain.axes)) if i not in {j for j, _ in kept}]
        return squeezed, inserted
    return None


def _rebuild(node: ir.Node, chain: _Chain, opset: int, names: set[str | None]) -> bool:
    """Replace `node`'s output by the chain's plan from its source, when that is fewer nodes."""
    plan = _plan(chain)
    output = node.outputs[0]
    if plan is None or output.is_graph_output():
        return False
    squeezed, inserted = plan
    cost = bool(squeezed) + bool(inserted)
    if cost == 0:
        output.replace_all_uses_with(chain.source)
        return True
    if cost >= len(chain.nodes):
        return False
    if any(
        use_count(n.outputs[0]) != 1 or n.outputs[0].is_graph_output() for n in chain.nodes[:-1]
    ):
        return False
    value = chain.source
    if squeezed:
        dims = [d for i, d in enumerate(value.shape) if i not in squeezed]  # type: ignore[union-attr]
        value = _insert(node, "Squeeze", value, squeezed, opset, names, ir.Shape(dims))
    if inserted:
        value = _insert(node, "Unsqueeze", value, inserted, opset, names, output.shape)
    output.replace_all_uses_with(value)
    return True


def _insert(
    node: ir.Node,
    op: str,
    source: ir.Value,
    axes: list[int],
    opset: int,
    names: set[str | None],
    shape: ir.Shape | None,
) -> ir.Value:
    """A new `op` (Squeeze or Unsqueeze) of `source` on `axes`, in front of `node`."""
    suffix = f"_unit_{op.lower()}"
    name = fresh_name(f"{node.outputs[0].name}{suffix}", names)
    if opset >= 13:
        made = ir.node(
            op,
            [source, int64_constant_before(node, np.array(axes), names, f"{suffix}_axes")],
            name=f"{node.name}{suffix}",
        )
    else:
        made = ir.node(op, [source], attributes={"axes": axes}, name=f"{node.name}{suffix}")
    made.outputs[0].name = name
    made.outputs[0].dtype = source.dtype
    made.outputs[0].shape = shape
    assert node.graph is not None
    node.graph.insert_before(node, made)
    return made.outputs[0]


def _fold_shape(node: ir.Node, values: StaticValues, memo: dict) -> ir.Node | None:
    """Make `Shape(y, start, end)` read the chain's source where the dims it reads are source
    dims in order; returns the node that made y (now read by one fewer)."""
    data = node.inputs[0] if node.inputs else None
    if data is None or data.shape is None:
        return None
    chain = _chain(data, values, memo)
    if chain is None:
        return None
    rank = len(chain.axes)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    if end <= start:
        return None
    sources = [chain.axes[i][0] for i in range(start, end)]
    first = sources[0]
    if first is None or sources != list(range(first, first + len(sources))):
        return None
    made = data.producer()
    node.replace_input_with(0, chain.source)
    node.attributes["start"] = ir.AttrInt64("start", first)
    node.attributes["end"] = ir.AttrInt64("end", first + len(sources))
    return made


def _output_names(model: ir.Model) -> set[str | None]:
    return {v.name for g in iter_all_graphs(model) for n in g for v in n.outputs}
