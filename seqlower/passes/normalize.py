"""Prepare a model for lowering: resolve ambiguous forms, then derive shapes by inference.

    SplitToSequence(x, split=1 (scalar), keepdims=0) -> SplitToSequence(x, keepdims=0)  [onnxruntime reading]
    SplitToSequence(x, split=s (scalar), keepdims=0) -> SplitToSequence(x, s, keepdims=1) [spec reading]

Design.md trap 1: the spec ignores keepdims when `split` is given, onnxruntime squeezes for a
scalar split of 1 (and fails for a larger one). Each such node is named in a warning.

Declared shapes of intermediate values can lie in real exports (trap 10), so they are cleared and
shape inference recomputes them from the graph inputs and constants.
"""

from __future__ import annotations

__all__ = ["NormalizePass", "infer_shapes"]

import logging

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import _c_api_utils

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import iter_all_graphs
from seqlower.options import Options

logger = logging.getLogger(__name__)


class NormalizePass(ir.passes.InPlacePass):
    """Resolve the scalar-split/keepdims ambiguity and recompute shapes by inference."""

    def __init__(self, options: Options | None = None) -> None:
        super().__init__()
        self.options = options or Options()
        self.warnings: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = self._resolve_split_keepdims(model)
        infer_shapes(model)
        return ir.passes.PassResult(model, modified)

    def _resolve_split_keepdims(self, model: ir.Model) -> bool:
        values = StaticValues()
        modified = False
        for graph in iter_all_graphs(model):
            for node in graph:
                if node.op_type != "SplitToSequence" or node.domain != "":
                    continue
                split = node.inputs[1] if len(node.inputs) > 1 else None
                if split is None or node.attributes.get_int("keepdims", 1) != 0:
                    continue
                # The declared shape of the split may be missing before inference (a Constant
                # node's output in an export): the static content says whether it is a scalar.
                array = values.get(split)
                chunk = values.get_int(split)
                if array is None or array.ndim != 0 or chunk is None:
                    continue
                modified = True
                if chunk == 1 and self.options.split_keepdims == "onnxruntime":
                    node.resize_inputs(1)
                    self.warnings.append(
                        f"SplitToSequence '{node.name}': scalar split=1 with keepdims=0; the ONNX "
                        "spec ignores keepdims here but onnxruntime and PyTorch squeeze the axis: "
                        "lowered with the squeeze (use the spec reading to keep the axis)"
                    )
                else:
                    node.attributes["keepdims"] = ir.AttrInt64("keepdims", 1)
                    self.warnings.append(
                        f"SplitToSequence '{node.name}': scalar split={chunk} with keepdims=0; "
                        "lowered as the ONNX spec reads it (keepdims ignored); onnxruntime "
                        + ("squeezes here instead" if chunk == 1 else "fails on this node")
                    )
        return modified


def infer_shapes(model: ir.Model) -> None:
    """Clear the declared shapes of every value but the model inputs, then run ONNX shape
    inference (with data propagation) and take its shapes. Types are kept."""
    for graph in iter_all_graphs(model):
        for node in graph:
            for output in node.outputs:
                output.shape = None
            if node.op_type == "Loop" and node.domain == "" and "body" in node.attributes:
                _reset_loop_signature(node.attributes["body"].as_graph())
    def infer(proto: onnx.ModelProto) -> onnx.ModelProto:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)

    try:
        # call_onnx_api leaves large initializers out of the serialized copy (weights are not
        # needed for shapes) and restores them afterwards.
        inferred = _c_api_utils.call_onnx_api(infer, model)
    except Exception as error:  # inference is best effort: unknown shapes only mean less folding
        logger.warning(
            "shape inference failed: %s", str(error).splitlines()[0] if str(error) else error
        )
        return
    _merge_shapes(model, ir.serde.deserialize_model(inferred))


def _reset_loop_signature(body: ir.Graph) -> None:
    """Loop bodies in real exports declare carried shapes that lie; onnxruntime needs the
    iteration number and condition declared as scalars."""
    for index, value in enumerate(body.inputs):
        value.shape = ir.Shape([]) if index < 2 else None


def _merge_shapes(model: ir.Model, inferred: ir.Model) -> None:
    for graph, inferred_graph in zip(iter_all_graphs(model), iter_all_graphs(inferred)):
        known = {v.name: v for v in inferred_graph.inputs}
        for node in inferred_graph:
            known.update((v.name, v) for v in node.outputs)
        for value in list(graph.inputs) + [o for n in graph for o in n.outputs]:
            found = known.get(value.name)
            if found is None:
                continue
            if found.shape is not None and value.shape is None:
                value.shape = found.shape
            if value.type is None and found.type is not None:
                value.type = found.type
