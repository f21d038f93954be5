"""Issue 14, item 13: counts read as English (`1 sweep`, `2 sweeps`, `1 trial`, `1 problem`),
never `1 sweeps` or `problem(s)`."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from cli_models import EXAMPLE
from typer.testing import CliRunner

from seqlower.cli import app
from seqlower.cli.summary import format_summary, plural
from seqlower.report import Report


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 sweeps"), (1, "1 sweep"), (2, "2 sweeps"), (11, "11 sweeps")]
)
def test_plural(count: int, expected: str) -> None:
    assert plural(count, "sweep") == expected


@pytest.mark.parametrize(("iterations", "phrase"), [(1, "; 1 sweep,"), (3, "; 3 sweeps,")])
def test_the_summary_counts_sweeps_in_english(iterations: int, phrase: str) -> None:
    report = Report(iterations=iterations, stop_reason="fixpoint: no rule applies")
    assert phrase in format_summary(report, "in.onnx", "out.onnx", 0.0)


def test_one_target_problem_is_one_problem(tmp_path: Path) -> None:
    seq_input = onnx.helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "g",
        [seq_input],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    graph.output[0].type.tensor_type.shape.dim.add()
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(
        app, ["optimize", "-q", "--target", "tensorrt", str(source), str(tmp_path / "o.onnx")]
    )
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]
    problems = sum(line.startswith("  - ") for line in result.stderr.splitlines())
    expected = "1 problem " if problems == 1 else f"{problems} problems "
    assert last.startswith(f"error: {expected}for --target tensorrt"), last
    assert "(s)" not in result.stderr


def test_verify_says_one_trial_in_the_singular(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["verify", "--trials", "1", str(EXAMPLE), str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "(1 trial compared)" in result.stdout
    target = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", "--verify", str(EXAMPLE), str(target)])
    assert result.exit_code == 0, result.output
    assert "1 trials" not in result.stdout and "sweeps" in result.stdout
