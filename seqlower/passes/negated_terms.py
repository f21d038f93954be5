"""Adding a term multiplied by -1 is a subtraction.

    n = Mul(i, -1)                   (or Mul(-1, i))
    y = Add(a, n)    (or Add(n, a))  ->   y = Sub(a, i)

TorchScript writes the index of `range(start, stop, -1)` (a loop that walks a list backwards:
a feature pyramid's top-down pass, a Viterbi backtrace) as `start + i * -1`: two kernels per
iteration where one does. Exact for integers (two's complement wraps alike) and for floating
point (multiplying by -1 only flips the sign, and `a + -i` is `a - i` in IEEE arithmetic). Only
where the -1 is one element that cannot make the product larger than i (a scalar, or of a rank
no larger than i's known rank), the product is read by the Add alone and is not an output of its
graph (the Add becomes the Sub in place: its output keeps its name).
"""

from __future__ import annotations

__all__ = ["fold_negated_terms"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues, not_one_element
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.uses import use_count


def fold_negated_terms(model: ir.Model) -> int:
    """Rewrite every `a + i * -1` as `a - i` (module docstring); returns how many."""
    folded = 0
    # provisional "not static" answers last until a fold (which keeps every value's content)
    values = StaticValues(model.opset_imports.get(""), lambda: folded)
    dropped: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            found = _negated_term(node, values)
            if found is None:
                continue
            kept, negated, mul = found
            node.op_type = "Sub"  # in place: the output keeps its name, shape and readers
            node.replace_input_with(0, kept)
            node.replace_input_with(1, negated)
            dropped.append(mul)
            folded += 1
    if dropped:
        remove_dead_upstream(dropped)
    return folded


def _negated_term(node: ir.Node, values: StaticValues) -> tuple[ir.Value, ir.Value, ir.Node] | None:
    """(a, i, the Mul) when `node` is Add(a, Mul(i, -1)) in either order of either."""
    if node.op_type != "Add" or node.domain != "" or len(node.inputs) != 2:
        return None
    if any(v is None for v in node.inputs):
        return None
    for position in (1, 0):
        product, kept = node.inputs[position], node.inputs[1 - position]
        assert product is not None and kept is not None
        mul = product.producer()
        if (
            mul is None
            or mul.op_type != "Mul"
            or mul.domain != ""
            or mul.graph is not node.graph
            or len(mul.inputs) != 2
            or product.is_graph_output()
            or use_count(product) != 1
        ):
            continue
        for side in (1, 0):
            constant, term = mul.inputs[side], mul.inputs[1 - side]
            if constant is None or not_one_element(constant):
                continue
            array = values.get(constant)
            if array is None or term is None or array.size != 1 or array.reshape(-1)[0] != -1:
                continue
            if array.ndim > 0 and (term.shape is None or array.ndim > len(term.shape)):
                continue
            return kept, term, mul
    return None
