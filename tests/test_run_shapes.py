"""`seqlower.run_shapes`: the input model's values declared with the shapes they have when it
runs, then ONNX inference; the CLI cases are in tests/cli/test_flatten_and_internal_errors.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from support import parse

from seqlower.run_shapes import _type_of, failing_node, invalid_as_run


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


BODY_ADD = """g (float[4,3] x, int64 n) => (float[3] y) {
    go = Constant<value = bool {1}>()
    z = Constant<value = float[3] {0, 0, 0}>()
    s = SequenceConstruct(x)
    y, t = Loop(n, go, z, s) <body = body (int64 i, bool c, float[3] acc, seq(float) hyps)
                              => (bool c2, float[3] acc2, seq(float) hyps2) {
        c2 = Identity(c)
        axes = Constant<value = int64[1] {AXIS}>()
        u = Unsqueeze(acc, axes)
        first = Constant<value = int64 {0}>()
        e = SequenceAt(hyps, first)
        [body_add] w = Add(u, e)
        hyps2 = Identity(hyps)
        total = ReduceSum<keepdims = 0>(w)
        acc2 = Add(acc, total)
    }>
}"""  # hyps[0] is [4, 3] when run, unknown to inference: [3, 1] + [4, 3] fails at run time
CHECKER = (
    "[ShapeInferenceError] Inference error(s): (op_type:Loop, node name: loop): "
    "[ShapeInferenceError] Inference error(s): (op_type:Add, node name: body_add): "
    "[ShapeInferenceError] Incompatible dimensions"
)


def test_the_node_the_checker_names_is_one_onnxruntime_fails_at():
    """[3, 1] + [4, 3] in a Loop body: the generated inputs that run the body fail at the Add
    the checker names (the innermost node of its message)."""
    model = ir.from_proto(parse(BODY_ADD.replace("AXIS", "-1")))
    node, error = failing_node(model, CHECKER)
    assert node == "Add 'body_add'" and "running Add node. Name:'body_add'" in error


def test_a_node_onnxruntime_does_not_fail_at_is_not_blamed_on_the_input():
    """The same Loop with shapes that fit ([1, 3] + [4, 3]) runs: nothing fails at the named
    node; nor is a message that names no node, or a node the runs never fail at, blamed."""
    fits = ir.from_proto(parse(BODY_ADD.replace("AXIS", "-2")))
    assert failing_node(fits, CHECKER) is None
    fails = ir.from_proto(parse(BODY_ADD.replace("AXIS", "-1")))
    assert failing_node(fails, "[ShapeInferenceError] Incompatible dimensions") is None
    assert failing_node(fails, CHECKER.replace("body_add", "other")) is None
