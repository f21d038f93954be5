"""Small models shared by the CLI tests (ONNX text syntax), and a child-process loader for
models that may crash onnxruntime."""

from __future__ import annotations

__all__ = [
    "CAST_MATMUL_MAP",
    "EXAMPLE",
    "ROOT",
    "cast_matmul_map",
    "linear_model",
    "loads_in_a_child_process",
]

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "split_map_concat.onnx"

# SplitToSequence -> SequenceMap(Cast -> MatMul) -> ConcatFromSequence: batching it emits
# Transpose -> Cast -> MatMul, which crashes onnxruntime (1.24 to at least 1.32) while it loads
# the model, unless the runtime workaround puts the Cast first.
CAST_MATMUL_MAP = """<ir_version: 10, opset_import: ["" : 18]>
g (float[4,2,3] x, double[3,5] w) => (double[2,4,5] y) {
    s = SplitToSequence <axis = 1, keepdims = 0> (x)
    m = SequenceMap <body = f (float[4,3] e) => (double[4,5] r) {
        c = Cast <to = 11> (e)
        r = MatMul (c, w)
    }> (s)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}"""

_LOAD = (
    "import sys, onnxruntime as ort; "
    "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
)


def cast_matmul_map() -> onnx.ModelProto:
    return onnx.parser.parse_model(CAST_MATMUL_MAP)


def linear_model(elements: int) -> onnx.ModelProto:
    """y = x @ w with a weight of `elements` floats (an initializer, to test how weights are
    stored and counted)."""
    weight = onnx.numpy_helper.from_array(np.ones((4, elements // 4), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, elements // 4])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def loads_in_a_child_process(path: Path) -> bool:
    """onnxruntime creates a session for the model at `path` without crashing (a segfault
    kills the child, not pytest)."""
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(path)], capture_output=True, check=False
    )
    return done.returncode == 0
