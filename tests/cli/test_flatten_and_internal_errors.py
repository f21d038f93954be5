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
