"""A Loop whose condition has another rank than its body declares for it: bad input.

ONNX type inference gives a Loop body's condition input the type of the Loop's own condition,
and merges it with what the body declares. Where the two ranks differ, strict inference fails
with a message seqlower otherwise tolerates (an exporter's declared shape that inference
contradicts: onnxruntime ignores those), but onnxruntime refuses to load this one ("Mismatch
between number of inferred and declared dimensions" at the body's condition input):

    c = ReduceMin(x, keepdims=1)             # shape [1]
    Loop(M, Greater(c, 0), ..., body(i, cond: bool scalar, ...))     -> refused: rank 1 vs 0

A condition of shape [1] is fine where the body declares no shape for it (onnxruntime runs
it), and so is a trip count of shape [1] (the body never sees it), so only the condition and
only a declared shape are compared. The Loops of the main graph are checked, with the types
inference gave the main graph's values, but for a condition the model itself declares with the
body's rank: onnxruntime reads that declaration, and runs the Loop.

    c = If(..)  declared bool[d] (branches declared bool[d]; inference, reading the elements
                of a list, proves a scalar)
    Loop(M, c, .., body(i, cond: bool[d], ..))                  -> not refused

(PyTorch's TorchScript exporter writes `while j < n and bool(a == b)` so; the lowered model's
body declares no shape for its condition, `seqlower.passes.condition_declarations`.)
"""

from __future__ import annotations

__all__ = ["loop_condition_problem"]

from collections.abc import Mapping

import onnx


def loop_condition_problem(
    graph: onnx.GraphProto, values: Mapping[str, onnx.ValueInfoProto]
) -> str | None:
    """The first Loop of the main `graph` whose condition input's inferred rank differs from
    the rank its body declares for its condition input, in a sentence naming the node; None
    when there is none. `values` are the inferred types of the main graph's values by name."""
    declared_here = {info.name: info for info in graph.value_info}
    for node in graph.node:
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        cond = node.input[1]
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if not cond or body is None or len(body.input) < 2:
            continue
        inferred = _rank(values.get(cond))
        declared = _rank(body.input[1])
        if inferred is None or declared is None or inferred == declared:
            continue
        if _rank(declared_here.get(cond)) == declared:  # what onnxruntime reads: they agree
            continue
        name = f" '{node.name}'" if node.name else ""
        return (
            f"Loop{name}: its condition '{cond}' has rank {inferred}, but its body declares "
            f"its condition input '{body.input[1].name}' of rank {declared} (onnxruntime "
            "refuses to load such a Loop)"
        )
    return None


def _rank(info: onnx.ValueInfoProto | None) -> int | None:
    if info is None or not info.type.HasField("tensor_type"):
        return None
    tensor = info.type.tensor_type
    return len(tensor.shape.dim) if tensor.HasField("shape") else None
