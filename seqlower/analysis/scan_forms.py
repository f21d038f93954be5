"""When a Loop can be a Scan: the checks the Scan forms share (`--target tract` rules, and the
loops `--target onnxruntime` makes cheaper after lowering).

A Scan has no condition and no iteration number: the loop must run its trip count through
(`condition_chain`), read its iteration number only where a Scan gives it (`walked_tensor`:
as the rows of one outer tensor, or as the elements of Range(0, M)), and declare the rank of
every body output (`unknown_output_rank`), because onnxruntime runs a Scan only with them.
"""

from __future__ import annotations

__all__ = [
    "WalkedTensor",
    "always_continues",
    "condition_chain",
    "give_ranks",
    "static_bool",
    "unknown_output_rank",
    "walked_tensor",
    "walks_axis",
]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues, static_shape
from seqlower.ops import graphs_within


@dataclasses.dataclass(frozen=True)
class WalkedTensor:
    """The outer tensor a Loop body reads row by row: `Gather(data, i, axis)` in `gathers`."""

    data: ir.Value
    axis: int  # non-negative
    gathers: tuple[ir.Node, ...]


def static_bool(value: ir.Value | None, values: StaticValues) -> bool | None:
    """The value of a static boolean of one element, else None."""
    array = values.get(value)
    if array is None or array.size != 1:
        return None
    return bool(array.reshape(()))


def always_continues(body: ir.Graph, values: StaticValues) -> bool:
    """True when a Loop body's condition output is always true, given a true condition input:
    its condition input, or a static true, through Identity nodes."""
    cond_out = body.outputs[0]
    while cond_out is not body.inputs[1]:
        producer = cond_out.producer()
        if producer is None or producer.op_type != "Identity" or producer.domain != "":
            return static_bool(cond_out, values) is True
        cond_out = producer.inputs[0]  # type: ignore[assignment]
    return True


def condition_chain(body: ir.Graph) -> ir.Node | str | None:
    """The Identity in `body` that makes its (always true) condition output from its condition
    input, removed with the output; None when there is none; a reason when the body reads its
    condition input otherwise."""
    cond_in, cond_out = body.inputs[1], body.outputs[0]
    producer = cond_out.producer()
    chain = None
    if producer is not None and producer.op_type == "Identity" and producer.graph is body:
        chain = producer if not cond_out.uses() and body.outputs.count(cond_out) == 1 else None
    if cond_out is cond_in or any(use.node is not chain for use in cond_in.uses()):
        return "the body reads its condition input"
    return chain


def walked_tensor(loop: ir.Node, body: ir.Graph, values: StaticValues) -> WalkedTensor | str:
    """The one outer tensor whose rows the body reads with its iteration number, and nothing
    else reads that number, when the trip count is the size of that axis; else why not."""
    inside = {id(g) for g in graphs_within(body)}
    gathers, walked = [], set()
    for use in body.inputs[0].uses():
        gather = use.node
        data = gather.inputs[0]
        if gather.op_type != "Gather" or use.idx != 1 or gather.graph is not body or data is None:
            return f"the iteration number is read by {gather.op_type}, not only Gather"
        if id(data.graph) in inside or data.shape is None:
            return f"'{data.name}' is not an outer tensor of known rank"
        walked.add((data, gather.attributes.get_int("axis", 0) % len(data.shape)))
        gathers.append(gather)
    if body.inputs[0].is_graph_output():
        return "the iteration number is a body output"
    if len(walked) != 1:
        return (
            "the body indexes no tensor with the iteration number"
            if not walked
            else "the body indexes more than one tensor (or axis) with the iteration number"
        )
    ((data, axis),) = walked
    trip = loop.inputs[0]
    if trip is None or not walks_axis(trip, data, axis, values):
        return f"the trip count is not the size of dim {axis} of '{data.name}'"
    return WalkedTensor(data, axis, tuple(gathers))


def walks_axis(trip: ir.Value, data: ir.Value, axis: int, values: StaticValues) -> bool:
    """True when `trip` is the size of `data`'s dim `axis`."""
    static, shape = values.get_int(trip), static_shape(data)
    if static is not None and shape is not None:
        return shape[axis] == static
    gather = trip.producer()
    if gather is None or gather.op_type != "Gather" or gather.domain != "":
        return False
    source = gather.inputs[0].producer() if gather.inputs[0] is not None else None
    if source is None or source.op_type != "Shape" or source.inputs[0] is not data:
        return False
    if source.attributes.get_int("start", 0) != 0 or "end" in source.attributes:
        return False
    index = values.get(gather.inputs[1])
    return index is not None and index.shape == () and int(index) % len(data.shape) == axis  # type: ignore[arg-type]


def _branch_rank(value: ir.Value) -> int | None:
    """The rank of a value of unknown shape that is an If's output (through Identity), when the
    branches that know it agree: a Loop body output keeps one rank (onnxruntime fails
    otherwise), so the branch whose shape inference knew it tells."""
    producer = value.producer()
    while producer is not None and producer.op_type == "Identity" and producer.domain == "":
        value = producer.inputs[0]  # type: ignore[assignment]
        if value.shape is not None:
            return len(value.shape)
        producer = value.producer()
    if producer is None or producer.op_type != "If" or producer.domain != "":
        return None
    index = value.index()
    ranks = {
        len(out.shape)
        for key in ("then_branch", "else_branch")
        if (out := producer.attributes[key].as_graph().outputs[index]).shape is not None
    }
    return ranks.pop() if len(ranks) == 1 else None


def unknown_output_rank(body: ir.Graph) -> str | None:
    """Why a Loop body cannot be a Scan body for onnxruntime: an output of unknown rank (its
    Scan needs the shape of every body output)."""
    unknown = [v.name for v in body.outputs[1:] if v.shape is None and _branch_rank(v) is None]
    if not unknown:
        return None
    return (
        f"the rank of the body output '{unknown[0]}' is unknown; onnxruntime runs a Scan only "
        "with the shape of every body output"
    )


def give_ranks(body: ir.Graph) -> None:
    """Each body output of unknown shape takes the rank its If's branches give it (checked by
    `unknown_output_rank`), unknown dims."""
    for value in body.outputs:
        if value.shape is None:
            rank = _branch_rank(value)
            if rank is not None:
                value.shape = ir.Shape([None] * rank)
