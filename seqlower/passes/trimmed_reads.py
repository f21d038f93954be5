"""Reads and cuts of a tensor whose last rows were cut off, made on the tensor itself.

    s = Slice(d, [0], [-k])     (axis 0, step 1, k >= 1)
    e = Gather(s, -j)           ->   e = Gather(d, -j - k)      (j >= 1: counted from the end)
    t = Slice(s, [0], [-m])     ->   t = Slice(d, [0], [-k - m])

A stack popped twice (`right = stack.pop(); left = stack.pop()`) lowers to a read of the last
row and a cut of it, then the same on what is left: every read and cut waits for the one before,
and onnxruntime copies the rows kept at each cut. Counted from the end, the second read is row
`-j - k` of the first tensor and the two cuts are one. Both forms fail alike: `Gather(s, -j)`
fails exactly when `d` has fewer than `j + k` rows, as `Gather(d, -j - k)` does, and Slice
clamps its bounds either way (`max(max(n - k, 0) - m, 0) = max(n - k - m, 0)` rows). A cut is
merged only when the cut it reads has no other reader (else the count of launches stays).
"""

from __future__ import annotations

__all__ = ["fold_trimmed_reads"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.passes.new_constants import int64_constant_before
from seqlower.uses import use_count

_LIMIT = 1 << 40  # bounds beyond this are not trims of a list (and could overflow when added)


def fold_trimmed_reads(model: ir.Model) -> int:
    """Rewrite every read and cut of a trimmed tensor (module docstring); returns how many."""
    values = StaticValues(model.opset_imports.get(""))
    names: set[str | None] = set()  # every output name, gathered at the first fold
    folded = 0
    dropped: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.op_type != "Gather" or node.domain != "" or len(node.inputs) != 2:
                continue
            trim = _trim(node.inputs[0], values)
            index = values.get(node.inputs[1])
            if trim is None or index is None or node.attributes.get_int("axis", 0) != 0:
                continue
            if index.size == 0 or not np.all((index < 0) & (index > -_LIMIT)):
                continue
            data, k, inner = trim
            names = names or _output_names(model)
            old_index = node.inputs[1].producer() if node.inputs[1] is not None else None
            node.replace_input_with(0, data)
            node.replace_input_with(1, int64_constant_before(node, index - k, names, "_from_end"))
            dropped.extend([inner] if old_index is None else [inner, old_index])
            folded += 1
        for node in list(graph_nodes(graph)):
            if node.op_type != "Slice" or node.domain != "":
                continue
            outer = _trim(node.outputs[0], values)
            inner = _trim(node.inputs[0], values) if node.inputs else None
            if outer is None or inner is None or use_count(node.inputs[0]) != 1:
                continue
            data, k, inner_node = inner
            names = names or _output_names(model)
            old_ends = node.inputs[2].producer() if node.inputs[2] is not None else None
            node.replace_input_with(0, data)
            node.replace_input_with(
                2, int64_constant_before(node, np.array([-k - outer[1]]), names, "_from_end")
            )
            dropped.append(inner_node)
            dropped.extend([old_ends] if old_ends is not None else [])
            folded += 1
    if dropped:
        remove_dead_upstream(dropped)
    return folded


def _output_names(model: ir.Model) -> set[str | None]:
    return {v.name for g in iter_all_graphs(model) for n in g for v in n.outputs}


def _trim(value: ir.Value | None, values: StaticValues) -> tuple[ir.Value, int, ir.Node] | None:
    """(d, k, the Slice) when `value` is Slice(d, [0], [-k]) on axis 0 with step 1, k >= 1."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Slice" or node.domain != "" or len(node.inputs) < 3:
        return None
    data = node.inputs[0]
    if data is None or value is None:
        return None
    starts, ends = values.get_ints(node.inputs[1]), values.get_ints(node.inputs[2])
    axes = values.get_ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else [0]
    steps = values.get_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else [1]
    rank = len(data.shape) if data.shape is not None else None
    if starts != [0] or steps != [1] or ends is None or len(ends) != 1:
        return None
    if axes not in ([0],) and not (rank is not None and axes == [-rank]):
        return None
    if not -_LIMIT < ends[0] <= -1:
        return None
    return data, -ends[0], node
