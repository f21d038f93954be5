"""Issue 14, item 11: a model that declares a default-domain opset or an IR version newer than
the installed onnx knows is refused with one line (exit 2), before anything is written; the
newest known ones are accepted."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app
from seqlower.errors import ModelInputError

NEWEST_OPSET = onnx.defs.onnx_opset_version()


def _relu(opset: int, ir_version: int, domain: str = "") -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid(domain, opset)], ir_version=ir_version
    )


@pytest.mark.parametrize(
    ("opset", "ir_version", "domain", "phrase"),
    [
        (99, 8, "", "default-domain opset 99 is newer than onnx"),
        (NEWEST_OPSET + 1, 8, "ai.onnx", f"opset {NEWEST_OPSET + 1} is newer than onnx"),
        (17, onnx.IR_VERSION + 1, "", f"ir_version {onnx.IR_VERSION + 1} is newer than onnx"),
    ],
)
def test_unknown_versions_are_one_line_exit_2(
    tmp_path: Path, opset: int, ir_version: int, domain: str, phrase: str
) -> None:
    source = tmp_path / "in.onnx"
    source.write_bytes(_relu(opset, ir_version, domain).SerializeToString())
    target = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", str(source), str(target)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: ") and phrase in line, line
    assert f"onnx {onnx.__version__}" in line
    assert not target.exists()
    with pytest.raises(ModelInputError, match="is newer than onnx"):
        seqlower.optimize(_relu(opset, ir_version, domain))


def test_the_newest_known_versions_are_accepted(tmp_path: Path) -> None:
    model = _relu(NEWEST_OPSET, onnx.IR_VERSION)
    lowered, report = seqlower.optimize(model)
    assert report.total_before == 0 and lowered.opset_import[0].version == NEWEST_OPSET
