"""Build the example models shipped in this folder (run from the repository root).

    python examples/make_examples.py

split_map_concat.onnx: the pattern PyTorch-style exports produce for "apply a layer to every
row": SplitToSequence(x) -> SequenceMap(MatMul + Add + Relu) -> ConcatFromSequence.
The weights come from a fixed seed, so the file is the same on every run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent


def split_map_concat(rows: int = 8, width: int = 64) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "b")
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["row", "W"], ["mm"]),
            helper.make_node("Add", ["mm", "b"], ["biased"]),
            helper.make_node("Relu", ["biased"], ["out"]),
        ],
        "layer",
        [helper.make_tensor_value_info("row", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, width])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=1),
            helper.make_node("SequenceMap", ["rows"], ["mapped"], body=body),
            helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=0),
        ],
        "split_map_concat",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, width])],
        initializer=[weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    onnx.save(split_map_concat(), HERE / "split_map_concat.onnx")


if __name__ == "__main__":
    main()
