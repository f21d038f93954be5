"""Fold static shape arithmetic into constants, once lowering is done.

    s = Shape(x)                  (x: float[B, S, 24])
    d = Gather(s, -1)       ->    d = Constant(24)
    h = Div(d, 3)           ->    h = Constant(8)

Exports compute sizes at run time from the shapes of values (`x.size(-1) // heads`), and lowering
adds positions and chunk bounds of its own; where the dims they read are static, each is a
chain of small operator launches that gives the same numbers on every run. A node becomes a
Constant (in place: its output keeps its name, readers and place) when it is an operator of
shape arithmetic (`SHAPE_ARITHMETIC`) and `StaticValues` proves its output static: computed
from constants, trusted initializers (never one that is also a graph input: a caller may
override it) and dims that inference gives as numbers. Only small results are folded: integer
or bool tensors of 1 to `MAX_ELEMENTS` elements (shapes, sizes, positions, counts) and scalars
of any numeric type (a position cast to float). What the folded nodes read and nothing else
does is removed.
"""

from __future__ import annotations

__all__ = ["MAX_ELEMENTS", "SHAPE_ARITHMETIC", "fold_static_shapes"]

import logging
import math

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream

logger = logging.getLogger(__name__)

MAX_ELEMENTS = 64

# the operators of shape arithmetic: what computes sizes, positions and counts from shapes
SHAPE_ARITHMETIC = frozenset(
    {
        "Abs", "Add", "And", "Cast", "Ceil", "Clip", "Concat", "ConstantOfShape", "CumSum",
        "Div", "Equal", "Expand", "Floor", "Gather", "Greater", "GreaterOrEqual", "Identity",
        "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Range",
        "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Shape", "Sign", "Size",
        "Slice", "Squeeze", "Sub", "Unsqueeze", "Where",
    }
)  # fmt: skip


def fold_static_shapes(model: ir.Model) -> int:
    """Make every node of the model whose one output is a small static value a Constant (see
    the module docstring); returns how many were folded."""
    folded = 0
    # provisional "not static" answers last until a fold gives a shape: a long chain after a
    # SequenceAt is walked once, not once per node
    values = StaticValues(model.opset_imports.get(""), lambda: folded)
    upstream: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            array = _foldable(node, values)
            if array is None:
                continue
            upstream.extend(v.producer() for v in node.inputs if v is not None and v.producer())
            _make_constant(node, array)
            folded += 1
    if upstream:
        remove_dead_upstream(upstream)
    return folded


def _foldable(node: ir.Node, values: StaticValues) -> np.ndarray | None:
    """The content `node` computes, when it is to become a Constant."""
    if node.domain != "" or node.op_type not in SHAPE_ARITHMETIC or len(node.outputs) != 1:
        return None
    output = node.outputs[0]
    if not isinstance(output.type, ir.TensorType) or output.is_graph_output():
        return None  # an output of a body or branch stays computed: OpenVINO misreads constant ones
    if _too_large(output):
        return None  # what the checks below refuse, known without computing it
    if any(_starts_a_state(use.node, use.idx) for use in output.uses()):
        return None  # OpenVINO holds a Loop's state that starts as a constant to its shape
    array = values.get(output)
    if array is None or not _small(array):
        return None
    declared = output.shape
    if declared is not None and (
        declared.rank() != array.ndim
        or any(isinstance(d, int) and d != n for d, n in zip(declared, array.shape))
    ):
        logger.debug("not folded: %s '%s' declares another shape", node.op_type, node.name)
        return None
    if output.dtype is not None and ir.DataType.from_numpy(array.dtype) != output.dtype:
        return None
    return array


def _too_large(output: ir.Value) -> bool:
    """Whether the output's declared type and static shape already say that no content of
    it is folded: a value of its shape and type is not `_small`, and one of another shape or
    type is refused by `_foldable` too. Most values of a model are activations (float[8, 64],
    say), answered so without walking up their producers."""
    shape, dtype = output.shape, output.dtype
    if shape is None or dtype is None or not all(isinstance(d, int) for d in shape):
        return False
    kind = _NUMPY_KINDS.get(dtype)
    if kind is None:
        return False
    size = math.prod(shape)  # type: ignore[arg-type]
    if kind in "iub":
        return not 0 < size <= MAX_ELEMENTS
    return kind in "fc" and size != 1


def _numpy_kinds() -> dict[ir.DataType, str]:
    """The numpy kind of each type's arrays ('f', 'i'...), for the types numpy has."""
    kinds = {}
    for dtype in ir.DataType:
        try:
            kinds[dtype] = np.dtype(dtype.numpy()).kind
        except (TypeError, ValueError):  # a type numpy lacks (UNDEFINED, say)
            continue
    return kinds


_NUMPY_KINDS = _numpy_kinds()


def _starts_a_state(node: ir.Node, index: int) -> bool:
    """Whether input `index` of `node` is the initial value of a Loop's or Scan's state."""
    if node.domain != "":
        return False
    if node.op_type == "Loop":
        return index >= 2
    if node.op_type == "Scan":
        return index < len(node.inputs) - node.attributes.get_int("num_scan_inputs", 0)
    return False


def _small(array: np.ndarray) -> bool:
    """Small enough to fold, and not empty: an empty constant that a Loop starts from is made a
    ConstantOfShape again for onnxruntime (`workarounds`)."""
    if array.dtype.kind in "iub":
        return 0 < array.size <= MAX_ELEMENTS
    return array.size == 1 and array.dtype.kind in "fc"


def _make_constant(node: ir.Node, array: np.ndarray) -> None:
    """Turn `node` into a Constant holding `array`; its output keeps its name and readers."""
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    node.resize_inputs(0)
    node.attributes.clear()
    node.op_type = "Constant"
    node.attributes["value"] = ir.AttrTensor("value", ir.Tensor(array))
    node.outputs[0].shape = ir.Shape(array.shape)
