"""The dims a Loop or Scan body declares for its scan outputs are given back after lowering.

    original body output r: float[3]      (Reshape(x, shape): inference proves float[?])
    after inference:        float[?]      -> declared again: float[3]

A loop that runs no iteration gives each scan output an empty tensor whose other dims
onnxruntime takes from the body output's declared shape: `[0, 3]` as declared, `[0, 0]` once
inference has replaced the declaration with what it proves. Lowering clears and re-infers every
shape (a declared shape may be one the export was traced with), so the lowered model gave
`[0, 0]` where the original gave `[0, 3]`. The declarations are read once, before anything
changes, per body graph and output name (rewrites move a body to the Loop they build and keep
the names of its outputs); at the end, a body output still a scan output takes the declared
static dim wherever its own dim is not a number. Nothing else reads those shapes after this.
"""

from __future__ import annotations

__all__ = ["DeclaredScanShapes"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs

_LOOPS = {"Loop": "body", "Scan": "body"}


class DeclaredScanShapes:
    """The declared shapes of every scan output of every Loop and Scan body of a model."""

    def __init__(self, model: ir.Model) -> None:
        self._bodies: dict[int, tuple[ir.Graph, dict[str, ir.Shape]]] = {}
        for body, outputs in _scan_outputs(model):
            declared = {
                value.name: value.shape
                for value in outputs
                if value.name and value.shape is not None and _has_static_dim(value.shape)
            }
            if declared:
                self._bodies[id(body)] = (body, declared)  # held: no id is reused

    def restore(self, model: ir.Model) -> int:
        """Give the declared static dims back where a scan output's dim is not a number (same
        rank only). Returns how many outputs changed."""
        if not self._bodies:
            return 0
        changed = 0
        for body, outputs in _scan_outputs(model):
            held, declared = self._bodies.get(id(body), (None, {}))
            if held is not body:
                continue
            for value in outputs:
                want = declared.get(value.name or "")
                if want is None:
                    continue
                shape = _with_declared_dims(value.shape, want)
                if shape is not None:
                    value.shape = shape
                    changed += 1
        return changed


def _scan_outputs(model: ir.Model) -> list[tuple[ir.Graph, list[ir.Value]]]:
    """(body, its scan outputs) for every Loop and Scan of the model."""
    found = []
    for graph in iter_all_graphs(model):
        for node in graph_nodes(graph):
            key = _LOOPS.get(node.op_type)
            if node.domain != "" or key is None or key not in node.attributes:
                continue
            body = node.attributes[key].as_graph()
            if node.op_type == "Loop":
                carried = len(node.inputs) - 2
                outputs = list(body.outputs[1 + carried :])
            else:
                states = len(node.inputs) - node.attributes.get_int("num_scan_inputs", 0)
                outputs = list(body.outputs[states:])
            found.append((body, outputs))
    return found


def _has_static_dim(shape: ir.Shape) -> bool:
    return any(isinstance(dim, int) for dim in shape)


def _with_declared_dims(shape: ir.Shape | None, declared: ir.Shape) -> ir.Shape | None:
    """`shape` with each dim that is not a number taken from `declared` where that is one;
    None when nothing would change or the ranks differ."""
    if shape is None:
        return ir.Shape(list(declared))
    if len(shape) != len(declared):
        return None
    dims = [
        want if not isinstance(have, int) and isinstance(want, int) else have
        for have, want in zip(shape, declared)
    ]
    if all(a is b or a == b for a, b in zip(dims, shape)):
        return None
    return ir.Shape(dims)
