"""`seqlower.run_shapes`: the input model's values declared with the shapes they have when it
runs, then ONNX inference; the CLI cases are in tests/cli/test_flatten_and_internal_errors.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from support import parse

from seqlower.run_shapes import _type_of, invalid_as_run


def test_a_valid_model_has_no_problem_as_run():
    model = parse("""g (float[N, 3] x) => (float[?] y) {
        s = SplitToSequence<axis = 0>(x)
        y = ConcatFromSequence<axis = 1>(s)
    }""")
    assert invalid_as_run(ir.from_proto(model)) is None


def test_a_model_that_never_runs_says_nothing():
    """Every trial fails (a Gather at row 5 of 2 rows): no shapes observed, no verdict here
    (the CLI's other test, `fails_in_onnxruntime`, speaks for such a model)."""
    model = parse("""g (float[2, 3] x) => (float[3] y) {
        k = Constant<value = int64 {5}>()
        y = Gather(x, k)
    }""")
    assert invalid_as_run(ir.from_proto(model)) is None


def test_the_types_of_run_time_values():
    tensor = _type_of(np.zeros((2, 0), np.int32)).tensor_type
    assert tensor.elem_type == onnx.TensorProto.INT32
    assert [d.dim_value for d in tensor.shape.dim] == [2, 0]
    shared = _type_of([np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32)])
    dims = shared.sequence_type.elem_type.tensor_type.shape.dim
    assert [(d.HasField("dim_value"), d.dim_value) for d in dims] == [(False, 0), (True, 3)]
    assert _type_of([]) is None  # an empty list: no element type to declare
    assert _type_of([np.zeros(2, np.float32), np.zeros((2, 1), np.float32)]) is None
    assert _type_of([np.zeros(2, np.float32), np.zeros(2, np.int64)]) is None
