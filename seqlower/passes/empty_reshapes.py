"""A Reshape of a tensor that holds nothing, to a shape the program proves, is a ConstantOfShape.

    e = Expand(z, Concat(n, [0, 6]))                 (e: float[?, 0, 6], no element)
    m = ReduceProd(Slice(Shape(e), [0], [2]))        (keepdims 1: one factor is 0, so [0])
    r = Reshape(e, Concat(m, [6]))             ->    r = ConstantOfShape([0, 6]) (value 0.0)

A list of `n` empty tensors (`[torch.zeros(0, 6)] * n`, YOLOv5's output per image before any
image is seen) is held as the rows of `e`, and merged into the list's data by a Reshape whose
target is computed at run time from e's own dims: five kernels that give an empty tensor of a
shape known before the model runs. Exact where proved: e's declared shape has a dim 0, so e
holds no element and the Reshape succeeds exactly when its target's product is 0; every entry
of the target is proved a number (`seqlower.analysis.vector_elements`: constants, e's declared
dims, their products), that product is 0, and no entry is -1 (inferred: nothing to infer from
no element) or below; a 0 that copies e's dim (allowzero 0) copies a dim declared as a number.
The result, an empty tensor of that shape and e's type, is what the Reshape gives; the
Reshape's target and e itself go where nothing else reads them. Made a ConstantOfShape, not an
empty Constant: a Loop that starts from an empty constant does not convert in OpenVINO
(`workarounds`), and onnxruntime folds a ConstantOfShape of a constant when it loads the model.

Only types ConstantOfShape takes at the model's opset; not a graph output (a body's output
stays computed). The cleanup runs this fold only where declared shapes are trusted.
"""

from __future__ import annotations

__all__ = ["fold_empty_reshapes"]

import math

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.vector_elements import vector_elements
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.passes.new_constants import int64_constant_before

# what ConstantOfShape's value may be, opset 9 to 19 (20 adds bfloat16 and the float8s)
_FILLABLE = frozenset(
    {
        ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT8,
        ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT8,
        ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64, ir.DataType.BOOL,
    }
)  # fmt: skip


def fold_empty_reshapes(model: ir.Model) -> int:
    """Make every Reshape of a tensor holding nothing to a proved shape a ConstantOfShape of
    that shape (module docstring); returns how many."""
    folded = 0
    values = StaticValues(model.opset_imports.get(""), lambda: folded)
    names: set[str | None] = set()  # every output name, gathered at the first fold
    upstream: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            shape = _empty_target(node, values)
            if shape is None:
                continue
            names = names or {v.name for g in iter_all_graphs(model) for n in g for v in n.outputs}
            dtype = node.inputs[0].dtype  # type: ignore[union-attr]
            upstream.extend(v.producer() for v in node.inputs if v is not None and v.producer())
            target = int64_constant_before(node, np.array(shape, dtype=np.int64), names, "_shape")
            node.replace_input_with(0, target)
            node.replace_input_with(1, None)
            node.resize_inputs(1)
            node.attributes.clear()
            node.op_type = "ConstantOfShape"
            fill = np.zeros(1, dtype=dtype.numpy())  # type: ignore[union-attr]
            node.attributes["value"] = ir.AttrTensor("value", ir.Tensor(fill))
            node.outputs[0].shape = ir.Shape(shape)
            folded += 1
    if upstream:
        remove_dead_upstream([n for n in upstream if n is not None])
    return folded


def _empty_target(node: ir.Node, values: StaticValues) -> list[int] | None:
    """The shape `node` gives, when it is a Reshape of a tensor declared to hold nothing to a
    target proved (module docstring); else None."""
    if node.op_type != "Reshape" or node.domain != "" or len(node.inputs) != 2:
        return None
    data, target = node.inputs
    if data is None or target is None or node.outputs[0].is_graph_output():
        return None
    if data.dtype not in _FILLABLE or data.shape is None:
        return None
    dims = list(data.shape)
    if not any(isinstance(d, int) and d == 0 for d in dims):
        return None  # not known to hold nothing
    elements = vector_elements(target, values)
    if elements is None:
        return None
    allowzero = node.attributes.get_int("allowzero", 0)
    shape: list[int] = []
    for i, element in enumerate(elements):
        if element is None or element < 0:
            return None  # unknown, or -1: nothing to infer from no element
        if element == 0 and not allowzero:
            copied = dims[i] if i < len(dims) else None
            if not isinstance(copied, int):
                return None
            element = copied
        shape.append(element)
    return shape if math.prod(shape) == 0 else None
