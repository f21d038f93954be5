"""Two of `--target openvino`'s forms for tensors of no element (seqlower/passes/
filled_arithmetic.py, seqlower/passes/empty_unique.py): arithmetic on a filled tensor and a
scalar becomes the scalar's result expanded, and a Unique runs only where its input has an
element. What each emits, what it leaves alone, and that the outputs are the same under
onnxruntime and onnx.reference (the OpenVINO faults themselves: tests/targets/test_runtimes.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_outputs_equal,
    assert_same_outputs,
    op_counts,
    openvino_forms,
    parse,
    run_reference,
)

from seqlower import runtime_quirks
from seqlower.passes.workarounds import RuntimeWorkaroundsPass

# onnxruntime 1.20 fails on a ReduceMax of an axis of size 0: those cases are left out there
EMPTY_AXES_RUN = not runtime_quirks.holds("empty-reductions")


# `bboxes.new_full((bboxes.size(0), 1), img_id)` as TorchScript exports it
IMAGE_INDEX = """g (float[N,4] boxes, int64 i) => (float[?,5] rois) {
    rows = Shape<end = 1>(boxes)
    one = Constant<value = int64[1] {1}>()
    shape = Concat<axis = 0>(rows, one)
    zeros = ConstantOfShape<value = float[1] {0}>(shape)
    index = Cast<to = 1>(i)
    column = Add(zeros, index)
    rois = Concat<axis = 1>(column, boxes)
}"""


def _feeds(rows: int, index: int) -> dict[str, np.ndarray]:
    boxes = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) - 3.5
    return {"boxes": boxes, "i": np.array(index, np.int64)}


def test_a_filled_tensor_plus_a_scalar_is_the_scalar_expanded():
    model, remade = openvino_forms(IMAGE_INDEX)
    assert remade == 1
    counts = op_counts(model)
    assert counts["Expand"] == 1 and "ConstantOfShape" not in counts and "Add" not in counts
    (expand,) = [node for node in model.graph.node if node.op_type == "Expand"]
    assert expand.output == ["column"]  # the result keeps its name
    for rows, index in ((0, 2), (1, 0), (3, -1), (5, 7)):
        feeds = _feeds(rows, index)
        outputs = assert_same_outputs(parse(IMAGE_INDEX), model, feeds)
        assert outputs[0].shape == (rows, 5)
        assert_outputs_equal(run_reference(parse(IMAGE_INDEX), feeds), outputs)


@pytest.mark.parametrize(
    ("op", "fill", "filled_first"),
    [("Sub", 2.5, True), ("Sub", 2.5, False), ("Div", 3.0, False), ("Mul", -1.5, True),
     ("Mul", 1.0, False), ("Add", -4.0, False)],
)  # fmt: skip
def test_each_operator_and_fill_keeps_its_order(op, fill, filled_first):
    operands = "zeros, index" if filled_first else "index, zeros"
    text = (
        IMAGE_INDEX.replace("{0}>(shape)", f"{{{fill}}}>(shape)")
        .replace("Add(zeros, index)", f"{op}({operands})")
        .replace("Cast<to = 1>(i)", "Cast<to = 1>(i)\n    index2 = Identity(index)")
    )
    model, remade = openvino_forms(text)
    assert remade == 1 and "ConstantOfShape" not in op_counts(model)
    neutral = fill == 1.0 and op == "Mul"  # the scalar itself expanded, no arithmetic
    assert op_counts(model)[op] == (0 if neutral else 1)
    for rows, index in ((0, 2), (2, 0), (3, -3), (4, 5)):
        feeds = _feeds(rows, index)
        outputs = assert_same_outputs(parse(text), model, feeds)
        assert_outputs_equal(run_reference(parse(text), feeds), outputs)


def test_other_shapes_readers_and_targets_keep_the_filled_tensor():
    # f of a shape that widens the result: left as it is
    wide = IMAGE_INDEX.replace("int64 i) => (float[?,5] rois)", "float[3] f) => (float[?,3] y)")
    wide = wide.replace(
        "index = Cast<to = 1>(i)\n    column = Add(zeros, index)", "y = Add(zeros, f)"
    )
    wide = wide.replace("\n    rois = Concat<axis = 1>(column, boxes)", "")
    model, remade = openvino_forms(wide)
    assert remade == 0 and op_counts(model)["ConstantOfShape"] == 1
    # the shape vector of unknown length: left as it is
    unknown = """g (int64[?] s, float f) => (float[?] y) {
        z = ConstantOfShape<value = float[1] {0}>(s)
        y = Add(z, f)
    }"""
    assert openvino_forms(unknown)[1] == 0
    # a filled tensor read elsewhere too stays for that reader
    shared = IMAGE_INDEX.replace("=> (float[?,5] rois)", "=> (float[?,5] rois, float[?,1] zeros)")
    model, remade = openvino_forms(shared)
    assert remade == 1 and op_counts(model)["ConstantOfShape"] == 1
    feeds = _feeds(2, 3)
    assert_same_outputs(parse(shared), model, feeds)
    # other targets
    for options in ({"openvino_loops": False}, {"openvino_loops": False, "speed_first": True}):
        model, _ = openvino_forms(IMAGE_INDEX, **options)
        assert op_counts(model)["ConstantOfShape"] == 1 and "Expand" not in op_counts(model)
    once = ir.from_proto(openvino_forms(IMAGE_INDEX)[0])
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0  # idempotent


# `torch.unique(rois[:, 0], sorted=True)` with all four outputs
IMAGE_IDS = """g (float[N] ids) => (float[?] u, int64[?] i, int64[?] back, int64[?] c, int64 n) {
    u, i, back, c = Unique<sorted = 1>(ids)
    n = Size(u)
}"""


def test_a_unique_runs_in_the_else_branch_of_an_if_on_its_input_being_empty():
    model, remade = openvino_forms(IMAGE_IDS)
    assert remade == 1
    counts = op_counts(model)
    assert counts["If"] == 1 and counts["Unique"] == 1 and counts["Size"] == 2
    assert [node.op_type for node in model.graph.node if node.op_type == "Unique"] == []
    assert [output.name for output in model.graph.output] == ["u", "i", "back", "c", "n"]
    for ids in ([], [2.0, 1.0, 2.0], [5.0], [0.0, -1.0, 3.0, -1.0, 0.0]):
        feeds = {"ids": np.array(ids, np.float32)}
        outputs = assert_same_outputs(parse(IMAGE_IDS), model, feeds)
        assert outputs[4] == len(set(ids))
        assert_outputs_equal(run_reference(parse(IMAGE_IDS), feeds), outputs)


def test_the_if_returns_only_the_outputs_read():
    text = IMAGE_IDS.replace(", int64[?] i, int64[?] back, int64[?] c, int64 n)", ")")
    text = text.replace("\n    n = Size(u)", "")
    model, remade = openvino_forms(text)
    assert remade == 1
    (branch,) = [node for node in model.graph.node if node.op_type == "If"]
    assert list(branch.output) == ["u"]
    for ids in ([], [3.0, 3.0, 1.0]):
        feeds = {"ids": np.array(ids, np.float32)}
        outputs = assert_same_outputs(parse(text), model, feeds)
        assert_outputs_equal(run_reference(parse(text), feeds), outputs)
    once = ir.from_proto(model)
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0


def test_a_unique_with_an_axis_a_nonempty_input_or_another_target_stays():
    axis = IMAGE_IDS.replace("float[N] ids", "float[N,2] ids").replace("<sorted = 1>", "<axis = 0>")
    axis = axis.replace("float[?] u", "float[?,2] u")
    assert openvino_forms(axis)[1] == 0
    assert openvino_forms(IMAGE_IDS.replace("float[N] ids", "float[3] ids"))[1] == 0
    model, remade = openvino_forms(IMAGE_IDS, openvino_loops=False)
    assert remade == 0 and "If" not in op_counts(model)
    once = ir.from_proto(openvino_forms(IMAGE_IDS)[0])
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0  # the Unique in the branch has a name the If already guards


# the lists' masked form: chunks padded with -inf, reduced along the padding
PADDED_MAX = """g (float[N,M] x, bool[N,M] kept) => (float[N] y) {
    pad = Constant<value = float {-inf}>()
    padded = Where(kept, x, pad)
    y = ReduceMax<keepdims = 0, axes = [1]>(padded)
}"""
LOWEST = float(np.finfo(np.float32).min)


def _padded(rows: list[list[float]]) -> dict[str, np.ndarray]:
    width = max((len(row) for row in rows), default=0)
    x = np.full((len(rows), width), 7.0, np.float32)
    kept = np.zeros((len(rows), width), bool)
    for k, row in enumerate(rows):
        x[k, : len(row)] = row
        kept[k, : len(row)] = True
    return {"x": x, "kept": kept}


@pytest.mark.parametrize("opset", [17, 18])
def test_a_padded_maximum_of_no_element_is_corrected_to_minus_infinity(opset):
    text = PADDED_MAX
    if opset == 18:  # the axes as an input
        text = text.replace("<keepdims = 0, axes = [1]>(padded)", "<keepdims = 0>(padded, one)")
        text = text.replace(
            "padded = Where", "one = Constant<value = int64[1] {1}>()\n    padded = Where"
        )
    model = ir.from_proto(onnx.shape_inference.infer_shapes(parse(text, opset=opset)))
    workaround = RuntimeWorkaroundsPass(openvino_loops=True)
    workaround(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert workaround.remade == 1
    counts = op_counts(proto)
    assert counts["ReduceMax"] == 1 and counts["ReduceSum"] == 1 and counts["Where"] == 2
    assert [node.op_type for node in proto.graph.node][-1] == "Where"
    assert proto.graph.node[-1].output == ["y"]
    cases = [[[1.0, 2.0], [], [3.0]], [[], []], [[LOWEST], [], [LOWEST, -np.inf]],
             [[-np.inf], [5.0, -np.inf]], [[np.nan, 1.0], [2.0]]]  # fmt: skip
    for rows in cases:
        feeds = _padded(rows)
        if not EMPTY_AXES_RUN and feeds["x"].shape[1] == 0:
            continue
        outputs = assert_same_outputs(parse(text, opset=opset), proto, feeds)
        assert_outputs_equal(run_reference(parse(text, opset=opset), feeds), outputs)
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(model)
    assert second.remade == 0  # the reductions it made are not corrected again


def test_a_minimum_that_may_reduce_nothing_is_corrected_to_plus_infinity():
    text = """g (float[N,M] x) => (float[N,1] y) { y = ReduceMin<axes = [1]>(x) }"""
    model, remade = openvino_forms(text, opset=17)
    assert remade == 1 and op_counts(model)["ReduceMin"] == 1 and op_counts(model)["ReduceSum"] == 1
    highest = float(np.finfo(np.float32).max)
    for x in (
        np.zeros((3, 0), np.float32),
        np.array([[np.inf, highest], [np.inf, np.inf]], np.float32),
    ):
        outputs = assert_same_outputs(parse(text, opset=17), model, {"x": x})
        assert_outputs_equal(run_reference(parse(text, opset=17), {"x": x}), outputs)


def test_a_maximum_over_known_axes_of_another_input_or_type_or_target_stays():
    static = """g (float[N,4] x) => (float[N] y) { y = ReduceMax<keepdims = 0, axes = [1]>(x) }"""
    assert openvino_forms(static, opset=17)[1] == 0  # the axis reduced holds 4 elements
    doubles = static.replace("float[N,4]", "double[N,M]").replace("(float[N] y)", "(double[N] y)")
    assert openvino_forms(doubles, opset=17)[1] == 0
    integers = static.replace("float[N,4]", "int64[N,M]").replace("(float[N] y)", "(int64[N] y)")
    assert openvino_forms(integers, opset=17)[1] == 0  # the lowest integer is the spec's
    assert openvino_forms(PADDED_MAX, opset=17, openvino_loops=False)[1] == 0
    assert openvino_forms(static.replace("float[N,4]", "float[N,M]"), opset=17)[1] == 1
