"""Issue 14, item 3: `--flatten-sequence-io` on ONNX's conformance models whose sequence
elements have no declared shape gave an internal error ("Field 'shape' of 'type' is required but
missing"), reported as bad input. Now: a flattened output gets a rank where one is known (a Split
output has its input's rank), a sequence output whose elements have no rank stays a sequence
(with a warning), a sequence input whose elements have no rank is refused with one line (exit
2), and an internal error is exit 3 with a message that calls it a bug."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from cli_models import EXAMPLE
from typer.testing import CliRunner

from seqlower.cli import app
from seqlower.errors import InternalError

APP_MODULE = importlib.import_module("seqlower.cli.app")  # `seqlower.cli.app` is the Typer app

CASES = (
    "test_identity_sequence",
    "test_sequence_insert_at_back",
    "test_sequence_insert_at_front",
    "test_split_to_sequence_2",
)


@pytest.fixture(scope="module")
def conformance(tmp_path_factory) -> dict[str, tuple[Path, list, list]]:
    from onnx.backend.test.case.node import collect_testcases

    folder = tmp_path_factory.mktemp("conformance")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        testcases = {case.name: case for case in collect_testcases(None) if case.name in CASES}
    found = {}
    for name in CASES:
        case = testcases[name]
        path = folder / f"{name}.onnx"
        onnx.save(case.model, path)
        ((inputs, outputs),) = case.data_sets
        found[name] = (path, inputs, outputs)
    return found


def _optimize(*args: str):
    return CliRunner().invoke(app, ["optimize", *args])


@pytest.mark.parametrize("name", CASES)
def test_flatten_on_the_conformance_models_writes_a_valid_model(
    conformance, name: str, tmp_path: Path
) -> None:
    path, _, _ = conformance[name]
    target = tmp_path / "out.onnx"
    result = _optimize("--flatten-sequence-io", str(path), str(target))
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output
    onnx.checker.check_model(onnx.load(target), full_check=True)


def test_a_split_output_is_flattened_with_the_rank_of_its_input(conformance, tmp_path) -> None:
    path, inputs, outputs = conformance["test_split_to_sequence_2"]
    target = tmp_path / "out.onnx"
    result = _optimize("-q", "--flatten-sequence-io", str(path), str(target))
    assert result.exit_code == 0, result.output
    lowered = onnx.load(target)
    shapes = [
        [d.dim_value if d.HasField("dim_value") else None for d in out.type.tensor_type.shape.dim]
        for out in lowered.graph.output
    ]
    assert [out.name for out in lowered.graph.output] == ["seq_0", "seq_1"]
    # the rank always; the 6 where the installed onnx infers it for a Split with run-time sizes
    assert shapes in ([[None, 6], [None, 6]], [[None, None], [None, None]])
    session = ort.InferenceSession(target, providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip(["data", "split"], inputs, strict=True)))
    (expected,) = outputs  # the conformance case's sequence output
    assert len(got) == len(expected)
    for actual, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(actual, want)


def test_an_output_whose_elements_have_no_rank_stays_a_sequence(conformance, tmp_path) -> None:
    path, _, _ = conformance["test_identity_sequence"]
    result = _optimize("--flatten-sequence-io", str(path), str(tmp_path / "o.onnx"))
    assert result.exit_code == 0, result.output
    assert "sequence output 'y' kept" in result.output
    assert onnx.load(tmp_path / "o.onnx").graph.output[0].type.HasField("sequence_type")


@pytest.mark.parametrize(
    ("name", "seq_len"),
    [("test_identity_sequence", "x=2"), ("test_sequence_insert_at_front", "sequence=2")],
)
def test_an_input_whose_elements_have_no_rank_is_refused_in_one_line(
    conformance, name: str, seq_len: str, tmp_path: Path
) -> None:
    path, _, _ = conformance[name]
    target = tmp_path / "out.onnx"
    result = _optimize("--flatten-sequence-io", "--seq-len", seq_len, str(path), str(target))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: --seq-len {seq_len.split('=')[0]}: the elements")
    assert "not even a rank" in line
    assert not target.exists()


def _break(monkeypatch, error: Exception) -> None:
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(APP_MODULE, "lower_in_place", broken)


def test_an_output_the_checker_rejects_is_an_internal_error_exit_3(monkeypatch, tmp_path) -> None:
    _break(monkeypatch, InternalError("internal error: the lowered model fails the checker"))
    target = tmp_path / "out.onnx"
    result = _optimize("-q", str(EXAMPLE), str(target))
    assert result.exit_code == 3
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {EXAMPLE}: internal error: the lowered model fails")
    assert "bug in seqlower" in line and "report" in line
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_an_unexpected_exception_is_an_internal_error_exit_3(monkeypatch, tmp_path) -> None:
    _break(monkeypatch, KeyError("boom"))
    result = _optimize("-q", str(EXAMPLE), str(tmp_path / "out.onnx"))
    assert result.exit_code == 3
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: internal error (KeyError: 'boom')")
    assert "bug in seqlower" in line and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_checker_failure_itself_is_raised_as_an_internal_error(monkeypatch) -> None:
    def reject(model):
        raise onnx.checker.ValidationError("Field 'shape' of 'type' is required but missing.")

    monkeypatch.setattr(APP_MODULE, "check_fully", reject)
    with pytest.raises(InternalError, match="fails the ONNX checker"):
        APP_MODULE._check_output(ir.load(EXAMPLE))


def test_a_checker_failure_where_the_input_runs_stays_an_internal_error(monkeypatch, tmp_path):
    """onnxruntime runs the example on inputs of its declared shapes: the lowering's fault."""

    def reject(model):
        raise onnx.checker.ValidationError("Field 'shape' of 'type' is required but missing.")

    monkeypatch.setattr(APP_MODULE, "check_fully", reject)
    result = _optimize("-q", str(EXAMPLE), str(tmp_path / "out.onnx"))
    assert result.exit_code == 3
    (line,) = result.stderr.splitlines()
    assert "internal error: the lowered model fails the ONNX checker" in line
    assert list(tmp_path.iterdir()) == []


NMS_KEEP = Path(__file__).resolve().parents[1] / "fixtures" / "torch_unseen" / "nms_keep"


def test_a_checker_failure_where_the_input_cannot_run_is_bad_input_exit_2(tmp_path):
    """boxes declared [N, 2] where the model reads columns 2 and 3 (inside a Loop, where ONNX
    inference does not see it; onnxruntime refuses to load it): the lowered model's checker
    sees it statically. The input's fault, said as such, not a bug in seqlower."""
    model = onnx.load(NMS_KEEP / "model.onnx")
    boxes = model.graph.input[0]
    assert boxes.name == "boxes" and boxes.type.tensor_type.shape.dim[1].dim_value == 4
    boxes.type.tensor_type.shape.dim[1].dim_value = 2
    source = tmp_path / "two_columns.onnx"
    onnx.save(model, source)
    target = tmp_path / "out.onnx"
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: the input model cannot run on inputs of its declared")
    assert "onnxruntime fails (" in line  # to load it, or to run it
    assert "the lowered model fails the ONNX checker" in line and "bug" not in line
    assert not target.exists()


def _concat_in_an_untaken_branch(axis: int) -> onnx.ModelProto:
    """e = the element 1 of a list built in a Loop (x[4, 3] appended three times; its rank is
    unknown to ONNX inference), then If(c, then: Identity(e), else: Concat(e, e, axis))."""
    from onnx import TensorProto as T
    from onnx import helper as h

    dims = ["a", "b"]
    then = h.make_graph(
        [h.make_node("Identity", ["e"], ["t"])], "then", [],
        [h.make_tensor_value_info("t", T.FLOAT, dims)],
    )  # fmt: skip
    otherwise = h.make_graph(
        [h.make_node("Concat", ["e", "e"], ["u"], axis=axis, name="join_rows")], "else", [],
        [h.make_tensor_value_info("u", T.FLOAT, dims)],
    )  # fmt: skip
    body = h.make_graph(
        [
            h.make_node("Identity", ["cin"], ["cout"]),
            h.make_node("SequenceInsert", ["sin", "x"], ["sout"]),
        ],
        "body",
        [
            h.make_tensor_value_info("it", T.INT64, []),
            h.make_tensor_value_info("cin", T.BOOL, []),
            h.make_tensor_sequence_value_info("sin", T.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("cout", T.BOOL, []),
            h.make_tensor_sequence_value_info("sout", T.FLOAT, None),
        ],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
        h.make_node("Constant", [], ["n"], value=h.make_tensor("nv", T.INT64, [], [3])),
        h.make_node("Constant", [], ["go"], value=h.make_tensor("gv", T.BOOL, [], [1])),
        h.make_node("Loop", ["n", "go", "s0"], ["s"], body=body),
        h.make_node("Constant", [], ["i"], value=h.make_tensor("iv", T.INT64, [], [1])),
        h.make_node("SequenceAt", ["s", "i"], ["e"]),
        h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=otherwise),
    ]
    inputs = [
        h.make_tensor_value_info("x", T.FLOAT, [4, 3]),
        h.make_tensor_value_info("c", T.BOOL, []),
    ]
    graph = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, dims)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)  # the input check cannot see it
    return model


def test_an_invalid_node_in_an_untaken_branch_is_bad_input_exit_2(tmp_path):
    """Concat axis 3 of rank-2 values, in the branch the trials do not take: once lowered, the
    element's rank is known and the checker fails; the input model, its values declared with
    the shapes they have when onnxruntime runs it, fails ONNX inference at that node, so the
    fault is the input's (it was an internal error, exit 3)."""
    source = tmp_path / "concat_axis.onnx"
    onnx.save(_concat_in_an_untaken_branch(3), source)
    target = tmp_path / "out.onnx"
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: the input model itself is invalid: with the shapes")
    assert "(op_type:Concat, node name: join_rows)" in line and "axis must be in" in line
    assert "bug" not in line and not target.exists()


@pytest.mark.parametrize("axis", [1, -2])
def test_the_same_node_with_an_axis_in_range_is_lowered(tmp_path, axis):
    """The negative case: axis 1 (or -2) of rank 2 is valid; the model lowers and runs."""
    model = _concat_in_an_untaken_branch(axis)
    source, target = tmp_path / "concat_axis.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 0, result.output
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
        got = ort.InferenceSession(str(target)).run(None, feeds)
        np.testing.assert_array_equal(got[0], want[0])


YOLOV5 = Path(__file__).resolve().parents[1] / "fixtures" / "torch_fresh" / "yolov5_detect"


@pytest.mark.parametrize("level", [0, 1])
def test_a_declared_batch_of_0_beside_batches_of_1_is_bad_input_exit_2(tmp_path, level):
    """yolov5's detection head with one level's batch declared 0 (the others 1): onnxruntime
    concatenates the empty misfit, ONNX forbids it, and the lowered model, which knows the
    dims, fails the checker at that Concat. The input's fault (it was an internal error)."""
    model = onnx.load(YOLOV5 / "model.onnx")
    batch = model.graph.input[level].type.tensor_type.shape.dim[0]
    assert batch.dim_value == 1
    batch.dim_value = 0
    source, target = tmp_path / "batch0.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert "the input model itself is invalid: with the shapes its values have" in line
    assert "Concat '/Concat_27': Can't merge shape info" in line and "bug" not in line
    assert not target.exists()


def _add_in_a_loop_body(axis: int) -> onnx.ModelProto:
    """y = Loop(n, zeros[3], hyps = [x, x, x]): acc + sum(Unsqueeze(acc, axis) + hyps[0]),
    hyps carried, so ONNX inference on the input knows no shape of hyps[0] ([4, 3] when run),
    nor does a run show it (a Loop body's values are no outputs). axis -1: [3, 1] + [4, 3]
    fails wherever the body runs; the input runs where n = 0."""
    from onnx import TensorProto as T
    from onnx import helper as h

    build = h.make_graph(
        [
            h.make_node("Identity", ["cin"], ["cout"]),
            h.make_node("SequenceInsert", ["sin", "x"], ["sout"]),
        ],
        "build",
        [
            h.make_tensor_value_info("it", T.INT64, []),
            h.make_tensor_value_info("cin", T.BOOL, []),
            h.make_tensor_sequence_value_info("sin", T.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("cout", T.BOOL, []),
            h.make_tensor_sequence_value_info("sout", T.FLOAT, None),
        ],
    )
    body = h.make_graph(
        [
            h.make_node("Identity", ["c2in"], ["c2out"]),
            h.make_node("Constant", [], ["axes"], value=h.make_tensor("av", T.INT64, [1], [axis])),
            h.make_node("Unsqueeze", ["acc", "axes"], ["u"]),
            h.make_node("Constant", [], ["first"], value=h.make_tensor("fv", T.INT64, [], [0])),
            h.make_node("SequenceAt", ["hyps", "first"], ["e"]),
            h.make_node("Add", ["u", "e"], ["w"], name="bad_add"),
            h.make_node("Identity", ["hyps"], ["hyps2"]),
            h.make_node("ReduceSum", ["w"], ["total"], keepdims=0),
            h.make_node("Add", ["acc", "total"], ["acc2"]),
        ],
        "body",
        [
            h.make_tensor_value_info("i", T.INT64, []),
            h.make_tensor_value_info("c2in", T.BOOL, []),
            h.make_tensor_value_info("acc", T.FLOAT, [3]),
            h.make_tensor_sequence_value_info("hyps", T.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("c2out", T.BOOL, []),
            h.make_tensor_value_info("acc2", T.FLOAT, [3]),
            h.make_tensor_sequence_value_info("hyps2", T.FLOAT, None),
        ],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
        h.make_node("Constant", [], ["three"], value=h.make_tensor("tv", T.INT64, [], [3])),
        h.make_node("Constant", [], ["go"], value=h.make_tensor("gv", T.BOOL, [], [1])),
        h.make_node("Loop", ["three", "go", "s0"], ["s"], body=build),
        h.make_node("Constant", [], ["zeros"], value=h.make_tensor("zv", T.FLOAT, [3], [0] * 3)),
        h.make_node("Loop", ["n", "go", "zeros", "s"], ["y", "s_out"], body=body),
    ]
    inputs = [
        h.make_tensor_value_info("x", T.FLOAT, [4, 3]),
        h.make_tensor_value_info("n", T.INT64, []),
    ]
    graph = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)  # the input check cannot see it
    return model


def test_a_loop_body_node_invalid_wherever_it_runs_is_bad_input_exit_2(tmp_path):
    """The mutation fuzzer's leftover (beam_bookkeeping, an Unsqueeze axis 1 made -2): once
    lowered, the body's shapes are known and the checker rejects the Add; the input runs where
    the Loop runs no iteration, and its main graph's values say nothing of the body's, so this
    was an internal error (exit 3). onnxruntime fails at that very Add running the input: the
    input's fault, exit 2, naming the node."""
    source = tmp_path / "add_in_body.onnx"
    onnx.save(_add_in_a_loop_body(-1), source)
    target = tmp_path / "out.onnx"
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: the input model itself is invalid at Add 'bad_add'")
    assert "(op_type:Add, node name: bad_add)" in line and "Incompatible dimensions" in line
    assert "bug" not in line and not target.exists()


def test_the_same_body_with_shapes_that_fit_is_lowered(tmp_path):
    """The negative case: axis -2 gives [1, 3] + [4, 3], valid; the model lowers and runs."""
    model = _add_in_a_loop_body(-2)
    source, target = tmp_path / "add_in_body.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = _optimize("-q", str(source), str(target))
    assert result.exit_code == 0, result.output
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for n in (0, 1, 3):
        feeds = {"x": x, "n": np.array(n)}
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
        got = ort.InferenceSession(str(target)).run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
