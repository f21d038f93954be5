"""`seqlower inspect`: a table (plain text in a pipe), `--json`, exit 2 with one error line."""

from __future__ import annotations

import json

import onnx
import pytest
from typer.testing import CliRunner

from cli_features.models import map_over_split, sequence_interface
from seqlower.cli.app import app
from seqlower.cli.options import parse_sizes
from seqlower.errors import SeqlowerError


@pytest.fixture
def paths(tmp_path):
    result = {}
    for name, model in {"map": map_over_split("N"), "io": sequence_interface()}.items():
        result[name] = str(tmp_path / f"{name}.onnx")
        onnx.save(model, result[name])
    return result


def invoke(*args: str):
    return CliRunner().invoke(app, ["inspect", *args])


def test_prints_a_plain_table_when_not_on_a_terminal(paths):
    result = invoke(paths["map"], "--target", "portable")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{paths['map']}: 3 sequence sites")
    assert lines[1].split()[:4] == ["graph", "node", "op", "tier"]
    assert lines[3].split()[:5] == ["main", "SequenceMap#0", "(m)", "SequenceMap", "scan"]
    assert "\x1b[" not in result.stdout  # no colours in a pipe


def test_dim_changes_the_tier(paths):
    result = invoke(paths["map"], "--dim", "N=4")
    assert result.exit_code == 0, result.output
    assert "SequenceMap         unroll" in result.stdout
    assert "interface: dim N fixed to 4 (inputs x)" in result.stdout


def test_json(paths):
    result = invoke(paths["io"], "--json", "--target", "tensorrt")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "seqlower.inspect/2" and data["target"]["ok"] is False
    assert data["options"]["target"] == "tensorrt"


def test_flatten_options_reach_the_lowering(paths):
    result = invoke(paths["io"], "--json", "--flatten-sequence-io", "--seq-len", "s=2")
    assert result.exit_code == 0, result.output
    changes = json.loads(result.stdout)["lowering"]["interface_changes"]
    assert [c["kind"] for c in changes] == ["flatten_input", "flatten_output"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dim", "N"], "error: --dim expects NAME=SIZE with a size >= 0, got 'N'"),
        (["--dim", "Q=2"], "error: dim 'Q' is not a symbolic dimension of any model input"),
        (["--seq-len", "s=x"], "error: --seq-len expects NAME=SIZE"),
        (
            ["--target", "tpu"],
            "error: unknown target 'tpu': choose one of generic, portable, onnxruntime, tensorrt",
        ),
        (
            ["--split-keepdims", "numpy"],
            "error: unknown split_keepdims 'numpy': choose one of onnxruntime, spec",
        ),
    ],
)
def test_bad_options_exit_2_with_one_error_line(paths, args, message):
    result = invoke(paths["map"], *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(message)


def test_a_missing_model_exits_2(tmp_path):
    result = invoke(str(tmp_path / "missing.onnx"))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'missing.onnx'}: no such file"


def test_parse_sizes():
    assert parse_sizes(["N=8", " B = 2"], "--dim") == {"N": 8, "B": 2}
    assert parse_sizes(None, "--dim") == {}
    with pytest.raises(SeqlowerError, match="--seq-len expects NAME=SIZE"):
        parse_sizes(["=3"], "--seq-len")
