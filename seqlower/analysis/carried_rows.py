"""How many rows a tensor a Loop grows by one Concat per iteration holds, proved by induction.

A tensor a Loop carries and grows in every iteration by a Concat at the top of its body
(a list the tensor-list tier lowered, or a scripted `acc = torch.cat((acc, piece))`),

    Loop(M, c, .., acc0, body(i, .., acc): acc' = Concat(acc, piece, axis=a))

with the piece's size along `a` a static k and the initial value's a static r0, holds
r0 + k * i entries along `a` when iteration i starts (i from 0: by induction, r0 on entry,
and k more after each iteration, which runs the Concat whatever else it does). So inside
the body, and in the loops nested in it:

    rows(acc, a) >= i   when k >= 1               (`at_least_iterations`)
    rows(acc, a) == i   when r0 == 0 and k == 1   (`counts_iterations`)

A nested loop whose trip count is i then reads acc at its own iteration number j < i without
a check: `for j in range(i): if ...: children.append(states[j])`, where `states` gained one
row per outer iteration (a tree LSTM's children gathered from the states made so far).
"""

from __future__ import annotations

__all__ = ["at_least_iterations", "carried_rows", "counts_iterations"]

from collections.abc import Callable

import onnx_ir as ir

from seqlower.ops import peel_identity

Owner = Callable[[ir.Graph | None], ir.Node | None]


def carried_rows(value: ir.Value, axis: int, owner: Owner) -> tuple[int, int] | None:
    """(r0, k) when `value` is a body input of a Loop (found with `owner`, which gives the
    node holding a subgraph) that the body grows in every iteration by one Concat along
    `axis` (normalized) with a piece of static size k along it, from an initial value of
    static size r0 along it; else None."""
    graph = value.graph
    loop = owner(graph)
    if graph is None or loop is None or loop.op_type != "Loop" or loop.domain != "":
        return None
    if "body" not in loop.attributes or loop.attributes["body"].as_graph() is not graph:
        return None
    inputs = list(graph.inputs)
    if value not in inputs[2:]:
        return None
    slot = inputs.index(value) - 2
    if 2 + slot >= len(loop.inputs) or 1 + slot >= len(graph.outputs):
        return None
    initial = loop.inputs[2 + slot]
    concat = peel_identity(graph.outputs[1 + slot]).producer()
    if initial is None or concat is None or concat.graph is not graph:
        return None
    if concat.op_type != "Concat" or concat.domain != "" or len(concat.inputs) != 2:
        return None
    first, second = (None if v is None else peel_identity(v) for v in concat.inputs)
    if (first is value) == (second is value):
        return None
    piece = concat.inputs[1] if first is value else concat.inputs[0]
    rank = _rank(initial, value, concat.outputs[0])
    if piece is None or rank is None or not 0 <= axis < rank:
        return None
    concat_axis = concat.attributes.get_int("axis", 0)
    if not -rank <= concat_axis < rank or concat_axis % rank != axis:
        return None
    start, step = _static_dim(initial, axis, rank), _static_dim(piece, axis, rank)
    if start is None or step is None:
        return None
    return start, step


def at_least_iterations(trip: ir.Value | None, data: ir.Value, axis: int, owner: Owner) -> bool:
    """Whether dim `axis` of `data` is at least `trip` where `trip` is read: `trip` is the
    iteration number of the Loop body that carries `data` and grows it along `axis` by at
    least one entry per iteration (`carried_rows`)."""
    if trip is None or data.graph is None or trip is not _iteration_number(data.graph):
        return False
    rows = carried_rows(data, axis, owner)
    return rows is not None and rows[1] >= 1


def counts_iterations(trip: ir.Value | None, data: ir.Value, axis: int, owner: Owner) -> bool:
    """Whether dim `axis` of `data` equals `trip`: its Loop body's iteration number, `data`
    having started with no entry along `axis` and gained one per iteration."""
    if trip is None or data.graph is None or trip is not _iteration_number(data.graph):
        return False
    return carried_rows(data, axis, owner) == (0, 1)


def _iteration_number(graph: ir.Graph) -> ir.Value | None:
    return graph.inputs[0] if graph.inputs else None


def _rank(*values: ir.Value) -> int | None:
    for value in values:
        if value.shape is not None:
            return len(value.shape)
    return None


def _static_dim(value: ir.Value, axis: int, rank: int) -> int | None:
    if value.shape is None or len(value.shape) != rank:
        return None
    dim = value.shape[axis]
    return dim if isinstance(dim, int) and dim >= 0 else None
