"""The cost model (seqlower.cost) and what the pipeline does with it: `--target onnxruntime`
asks for speed first and keeps what costs more lowered; every other target, the default
included, lowers everything it can."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, parse, sequence_op_count

import seqlower
from seqlower.cost import COPY_ELEMENTS, DYNAMIC_COUNT, launches

FIXTURES = Path(__file__).parent / "fixtures" / "torch"


def cost(text: str) -> float:
    return launches(ir.from_proto(parse(text)))


def test_constants_are_free_and_other_nodes_count_one():
    assert (
        cost("g (float[2] x) => (float[2] y) { c = Constant<value = float {1}>() y = Add(x, c) }")
        == 1
    )


LOOP = """g (float[2] x, int64 n) => (float[2] y) {
    t = Constant<value = bool {1}>()
    count = COUNT
    y = Loop(count, t, x) <body = body (int64 i, bool c, float[2] v) => (bool c2, float[2] w) {
        c2 = Identity(c)
        w = Neg(v)
    }>
}"""


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        ("Constant<value = int64 {5}>()", 1 + 5 * 2),
        ("Identity(n)", 1 + 1 + DYNAMIC_COUNT * 2),  # the Identity, the Loop, its body
        ("Constant<value = int64 {9223372036854775807}>()", 1 + DYNAMIC_COUNT * 2),  # a while
    ],
    ids=["static", "run-time", "while"],
)
def test_a_loop_body_counts_once_per_iteration(count: str, expected: float):
    assert cost(LOOP.replace("COUNT", count)) == expected


def test_an_if_counts_its_costlier_branch():
    text = """g (bool c, float[2] x) => (float[2] y) {
        y = If(c) <then_branch = a () => (float[2] r) { r = Neg(x) },
                   else_branch = b () => (float[2] s) { u = Abs(x) s = Neg(u) }>
    }"""
    assert cost(text) == 1 + 2


def _case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model = onnx.load(FIXTURES / name / "model.onnx")
    feeds = {}
    for path in sorted((FIXTURES / name / "test_data_set_0").glob("input_*.pb")):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
    return model, feeds


def test_target_onnxruntime_keeps_an_original_whose_lowering_costs_more():
    # xs = x.split(2, 0); xs[-1] * len(xs), xs[0] + xs[-2]: three reads of a ragged split cost
    # more as tensor arithmetic than as SplitToSequence and SequenceAt
    model, feeds = _case("len_neg_index")
    kept, report = lower(model, target="onnxruntime")
    assert onnx.printer.to_text(kept.graph) == onnx.printer.to_text(model.graph)  # as given
    assert sequence_op_count(kept) == sequence_op_count(model) > 0
    assert report.rules_fired == {}
    assert report.stop_reason.startswith("kept the original: the lowered model costs")
    assert all("speed-first" in " ".join(op.reasons) for op in report.remaining)
    assert_same_outputs(model, kept, feeds)


@pytest.mark.parametrize("target", ["generic", "portable", "tensorrt", "openvino", "tract"])
def test_every_other_target_lowers_even_where_it_costs_more(target):
    model, feeds = _case("len_neg_index")
    lowered, report = lower(model, target=target)
    assert sequence_op_count(lowered) == 0
    assert not report.stop_reason.startswith("kept")
    assert_same_outputs(model, lowered, feeds)


def test_the_original_is_read_again_from_its_file_only_when_kept(tmp_path):
    model, feeds = _case("len_neg_index")
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    kept, report = seqlower.optimize(path, target="onnxruntime")
    assert report.stop_reason.startswith("kept the original")
    assert sequence_op_count(ir.to_proto(kept)) == sequence_op_count(model)
    assert_same_outputs(model, ir.to_proto(kept), feeds)


def test_a_sequence_map_costs_its_function_expansion():
    text = """g (float[N,2] x) => (float[M,2] y) {
        s = SplitToSequence<axis = 0>(x)
        m = SequenceMap<body = b (float[1,2] e) => (float[1,2] r) { r = Neg(e) }>(s)
        y = ConcatFromSequence<axis = 0>(m)
    }"""
    model = ir.from_proto(onnx.shape_inference.infer_shapes(parse(text)))
    # SplitToSequence, ConcatFromSequence; SequenceLength, SequenceEmpty, the Loop; per element
    # a SequenceAt, the Neg and a SequenceInsert that copies DYNAMIC_COUNT / 2 elements on average
    per_element = 1 + 1 + 1 + (DYNAMIC_COUNT / 2) / COPY_ELEMENTS
    assert launches(model) == 2 + 3 + DYNAMIC_COUNT * per_element


def test_target_onnxruntime_lowers_what_gets_cheaper():
    model, feeds = _case("unbind_stack")
    lowered, report = lower(model, target="onnxruntime")
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("loop-batch") == 1
    assert not any("operator launches" in w for w in report.warnings)
    assert_same_outputs(model, lowered, feeds)


def test_strict_on_a_kept_original_says_which_target_lowers_it(tmp_path):
    from typer.testing import CliRunner

    from seqlower.cli.app import app

    path = tmp_path / "model.onnx"
    onnx.save(_case("len_of_split")[0], path)
    out = tmp_path / "out.onnx"
    args = ["optimize", str(path), str(out), "--strict", "-q"]
    refused = CliRunner().invoke(app, [*args, "--target", "onnxruntime"])
    assert refused.exit_code == 1 and not out.exists()
    assert "the original costs less); the default target (no --target) lowers it" in refused.stderr
    lowered = CliRunner().invoke(app, args)
    assert lowered.exit_code == 0 and out.exists()
