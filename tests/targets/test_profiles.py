"""The openvino and tract profiles: what each judges per node (`judge_nodes`, which inspect
shows), what `check_target` makes an error, and what the CLI does with `--target`."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import parse, rules_without, run_ort
from typer.testing import CliRunner

import seqlower
from seqlower.cli.app import app
from seqlower.options import Options
from seqlower.passes.lower import LowerSequencesPass
from seqlower.targets import PROFILES, check_target, judge_nodes

WHILE = """g (float[T,4] x) => (float[4] h) {
    go = Constant<value = bool {1}>()
    h0 = Constant<value = float[4] {0, 0, 0, 0}>()
    h = Loop(, go, h0) <body = body (int64 i, bool cond, float[4] state)
                                => (bool more, float[4] next) {
        row = Gather(x, i)
        next = Add(row, state)
        total = ReduceSum<keepdims = 0>(next)
        limit = Constant<value = float {3}>()
        more = Less(total, limit)
    }>
}"""

ERASE = """g (float[3,4] x) => (float[4] y) {
    s = SplitToSequence<keepdims = 0>(x)
    p = Constant<value = int64 {0}>()
    t = SequenceErase(s, p)
    y = SequenceAt(t, p)
}"""


def test_every_profile_names_its_source_and_what_it_changes():
    for name in ("tensorrt", "openvino", "tract"):
        assert PROFILES[name].source and PROFILES[name].changes
    assert "tract 0.23.9" in PROFILES["tract"].source
    assert "OpenVINO 2026.4.1" in PROFILES["openvino"].source
    # every target lowers alike, but onnxruntime (speed first) and tract (its own rewrites)
    assert (
        PROFILES["generic"].changes
        == PROFILES["portable"].changes
        == PROFILES["openvino"].changes
        == PROFILES["tensorrt"].changes
    )
    assert PROFILES["onnxruntime"].changes.startswith("speed first")
    assert PROFILES["tract"].changes.startswith(PROFILES["portable"].changes)


def test_tract_judges_a_while_loop_an_error_and_names_it():
    model = ir.from_proto(parse(WHILE))
    (judgement,) = judge_nodes(model, "tract")
    assert (judgement.graph, judgement.op_type, judgement.severity) == ("main", "Loop", "error")
    assert judgement.reason.endswith(
        ": a data-dependent while loop, which tract cannot run, nor a masked Scan over its "
        "bound: a while loop with no trip count: there is no bound to scan over; write a loop of "
        "a fixed count that runs every step (no `break` or `while` on a tensor's value; mask the "
        "steps after the end instead)"
    )
    assert judge_nodes(model, "openvino") == [] and judge_nodes(model, "generic") == []
    check = check_target(*seqlower.optimize(parse(WHILE), target="tract"), "tract")
    assert not check.ok and check.errors[0].startswith("main: Loop '")


@pytest.mark.parametrize(
    ("dims", "split", "error"),
    [("3,4", "", False), ("N,4", "", True), ("N,4", ", k", True), ("N,4", ", sizes", False)],
)
def test_openvino_errs_on_a_split_over_a_run_time_size_and_warns_on_the_rest(dims, split, error):
    model = ir.from_proto(
        parse(f"""g (float[{dims}] x) => (float[4] y) {{
            k = Constant<value = int64 {{1}}>()
            sizes = Constant<value = int64[2] {{1, 2}}>()
            s = SplitToSequence<keepdims = 1>(x{split})
            p = Constant<value = int64 {{0}}>()
            t = SequenceErase(s, p)
            y = SequenceAt(t, p)
        }}""")
    )
    judged = {j.op_type: j.severity for j in judge_nodes(model, "openvino")}
    assert judged == {
        "SplitToSequence": "error" if error else "warning",
        "SequenceErase": "warning",
        "SequenceAt": "warning",
    }
    assert check_target(model, None, "openvino").ok is not error
    assert {j.severity for j in judge_nodes(model, "tract")} == {"error"}


def test_openvino_errs_on_sequence_map():
    model = ir.from_proto(
        parse("""g (float[3,4] x) => (float[3,4] y) {
            s = SplitToSequence<keepdims = 0>(x)
            m = SequenceMap<body = b (float[4] e) => (float[4] f) { f = Relu(e) }>(s)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
        }""")
    )
    errors = [j for j in judge_nodes(model, "openvino") if j.severity == "error"]
    assert [j.op_type for j in errors] == ["SequenceMap"]


def test_string_tensors_are_errors_for_openvino_tract_and_tensorrt():
    model = ir.from_proto(
        parse("""g (string[3] x) => (string[1] y) {
            i = Constant<value = int64[1] {0}>()
            y = Gather(x, i)
        }""")
    )
    for target in ("openvino", "tract", "tensorrt"):
        (judgement,) = judge_nodes(model, target)
        assert judgement.severity == "error" and "no string tensors" in judgement.reason
        assert not check_target(model, None, target).ok
    assert judge_nodes(model, "onnxruntime") == []


def test_a_run_time_if_left_for_tract_is_a_warning():
    model = parse("""g (float[2,4] x, bool c) => (float[4] y) {
        y = If(c) <then_branch = t () => (float[4] a) {
                       i = Constant<value = int64 {0}>()
                       a = Gather(x, i) },
                   else_branch = e () => (float[4] b) {
                       j = Constant<value = int64 {1}>()
                       b = Gather(x, j) }>
    }""")
    lowered, report = seqlower.optimize(model, target="tract")
    check = check_target(lowered, report, "tract")
    assert check.ok
    (warning,) = check.warnings
    assert warning.startswith("main: If '") and "then-branch's value" in warning


def test_an_if_whose_branches_differ_in_shape_is_an_error_for_tract():
    """tract 0.23.9 fails to load it ('Failed analyse for node ... If'): the probe
    'If (branches of different shapes)' in `python -m bench.portability --probe`."""
    model = parse("""g (float[4] x, bool c) => (float[?] y) {
        y = If(c) <then_branch = t () => (float[8] a) { a = Concat<axis = 0>(x, x) },
                   else_branch = e () => (float[4] b) { b = Neg(x) }>
    }""")
    lowered, report = seqlower.optimize(model, target="tract")
    check = check_target(lowered, report, "tract")
    (error,) = check.errors
    assert "tract types an If only when both branches agree" in error
    assert "shapes [8] and [4]" in error


def test_dims_of_branches_that_differ_in_rank_read_as_names_or_question_marks():
    model = parse("""g (float[N,3] x, float[4] v, bool c) => (float[?] y) {
        y = If(c) <then_branch = t () => (float[N,?] a) { a = Identity(x) },
                   else_branch = e () => (float[4] b) { b = Abs(v) }>
    }""")
    lowered, report = seqlower.optimize(model, target="tract")
    (error,) = check_target(lowered, report, "tract").errors
    assert re.search(r"shapes \[(N|\?), (3|\?)\] and \[4\]", error), error
    assert "None" not in error and "unk__" not in error


def test_a_loop_carrying_a_constant_of_size_0_starts_from_constant_of_shape_for_openvino():
    """OpenVINO 2026.4.1 cannot convert it (the probe 'Loop carrying a constant of size 0');
    every lowering makes the empty start with ConstantOfShape (seqlower/passes/workarounds.py),
    so the profile has nothing to say, unless that step is left out."""
    model = parse("""g (float[2,3] x, int64 m) => (float[?,3] y) {
        c = Constant<value = bool {1}>()
        e = Constant<value = float[0,3] {}>()
        y = Loop(m, c, e) <body = b (int64 i, bool ci, float[?,3] a) => (bool co, float[?,3] a2)
        {
            co = Identity(ci)
            one = Constant<value = int64[1] {1}>()
            zero = Constant<value = int64[1] {0}>()
            n = Unsqueeze(i, zero)
            stop = Add(n, one)
            p = Slice(x, zero, stop, zero)
            a2 = Concat<axis = 0>(a, p)
        }>
    }""")
    unbatched = rules_without("loop-batch")  # which takes this loop whole (a ragged prefix)
    lowered, report = seqlower.optimize(model, target="openvino", rules=unbatched)
    assert not check_target(lowered, report, "openvino").errors
    loop = next(node for node in lowered.graph.node if node.op_type == "Loop")
    start = next(node for node in lowered.graph.node if loop.input[2] in node.output)
    assert start.op_type == "ConstantOfShape"
    kept = ir.from_proto(model)
    LowerSequencesPass(unbatched, Options(target="openvino"), runtime_workarounds=False)(kept)
    (error,) = check_target(kept, report, "openvino").errors
    assert "cannot convert a Loop that carries a constant of size 0" in error


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, text in {"while": WHILE, "erase": ERASE}.items():
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(parse(text), paths[name])
    return paths


def test_cli_target_tract_refuses_a_while_loop_and_writes_nothing(files, tmp_path):
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(
        app, ["optimize", str(files["while"]), str(out), "--target", "tract"]
    )
    assert result.exit_code == 1 and not out.exists()
    assert "Loop" in result.output and "data-dependent while loop" in result.output
    assert "1 problem for --target tract; nothing written" in result.output


def test_cli_target_tract_lowers_and_writes_what_tract_can_run(files, tmp_path):
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(
        app, ["optimize", str(files["erase"]), str(out), "--target", "tract"]
    )
    assert result.exit_code == 0, result.output
    lowered = onnx.load(out)
    assert not judge_nodes(ir.from_proto(lowered), "tract")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], x[1])


def test_cli_inspect_shows_the_target_judgement_per_node(files):
    result = CliRunner().invoke(app, ["inspect", str(files["while"]), "--target", "tract"])
    assert result.exit_code == 0, result.output
    assert "target tract: 1 error (operators only;" in result.output
    assert "error: main: Loop '" in result.output


def test_a_loop_left_for_tract_is_an_error_but_not_a_while_loop():
    """A carried value that grows cannot be a Scan's state: the Loop stays."""
    model = parse("""g (float[4] x, int64 m) => (float[?] y) {
        go = Constant<value = bool {1}>()
        y = Loop(m, go, x) <body = body (int64 i, bool cond, float[?] v)
                                     => (bool cond_out, float[?] w) {
            cond_out = Identity(cond)
            w = Concat<axis = 0>(v, v)
        }>
    }""")
    lowered, report = seqlower.optimize(model, target="tract")
    (judgement,) = judge_nodes(lowered, "tract")
    assert judgement.severity == "error" and judgement.reason.endswith("but not this one")
    assert not check_target(lowered, report, "tract").ok


def test_tensorrt_refuses_an_if_whose_branches_differ_in_rank():
    model = ir.from_proto(
        parse("""g (float[4] x, bool c) => (float[?] y) {
            y = If(c) <then_branch = t () => (float[4] a) { a = Relu(x) },
                       else_branch = e () => (float[1,4] b) {
                           zero = Constant<value = int64[1] {0}>()
                           b = Unsqueeze(x, zero)
                       }>
        }""")
    )
    (judgement,) = judge_nodes(model, "tensorrt")
    assert judgement.severity == "error"
    assert (
        judgement.reason
        == "TensorRT needs both branches' outputs of one rank (here 1 and 2 for output 'a')"
    )
    assert not check_target(model, None, "tensorrt").ok
    assert judge_nodes(model, "openvino") == []
