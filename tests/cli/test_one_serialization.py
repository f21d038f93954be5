"""The command line's output check and its save share one serialization of the lowered model
when the check's copy is the whole model (no initializer in the main graph: none is made an
input or left out for the checker), and the file written is the same bytes either way."""

from __future__ import annotations

import importlib

import onnx
import onnx_ir as ir
import pytest
from cli_models import EXAMPLE
from onnx import TensorProto, helper
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app
from seqlower.errors import InternalError
from seqlower.io import model_to_bytes, save_model

APP_MODULE = importlib.import_module("seqlower.cli.app")  # `seqlower.cli.app` is the Typer app


def _lengths(initializer: bool) -> onnx.ModelProto:
    """Three lengths of one split, as graph outputs; with `initializer`, x is scaled by one."""
    nodes = [helper.make_node("SplitToSequence", ["y"], ["s"], axis=0, keepdims=0)]
    nodes += [helper.make_node("SequenceLength", ["s"], [f"n{k}"]) for k in range(3)]
    initializers = []
    if initializer:
        nodes.insert(0, helper.make_node("Mul", ["x", "w"], ["y"]))
        initializers.append(helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0]))
    else:
        nodes.insert(0, helper.make_node("Identity", ["x"], ["y"]))
    outputs = [helper.make_tensor_value_info(f"n{k}", TensorProto.INT64, []) for k in range(3)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", 2])],
        outputs,
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.fixture
def to_proto_calls(monkeypatch) -> list[object]:
    calls: list[object] = []
    original = ir.to_proto

    def counting(model):
        calls.append(model)
        return original(model)

    monkeypatch.setattr(ir, "to_proto", counting)
    return calls


def test_the_checked_copy_is_saved_without_serializing_again(tmp_path, to_proto_calls) -> None:
    lowered, _ = seqlower.optimize(ir.from_proto(_lengths(initializer=False)))
    want = model_to_bytes(lowered)
    to_proto_calls.clear()
    checked = APP_MODULE._check_output(lowered)
    assert checked is not None
    assert checked.SerializeToString(deterministic=True) == want
    save_model(lowered, tmp_path / "out.onnx", serialized=checked)
    assert (tmp_path / "out.onnx").read_bytes() == want
    assert len(to_proto_calls) == 1  # the check's; the save wrote those bytes


def test_a_model_with_initializers_is_checked_without_them_and_serialized_again(
    tmp_path, to_proto_calls
) -> None:
    lowered, _ = seqlower.optimize(ir.from_proto(_lengths(initializer=True)))
    assert lowered.graph.initializers
    assert APP_MODULE._check_output(lowered) is None
    assert list(lowered.graph.initializers) == ["w"]  # the check's copy moved it back
    assert [value.name for value in lowered.graph.inputs] == ["x"]


@pytest.mark.parametrize("initializer", [False, True])
def test_the_command_line_writes_what_the_library_saves(tmp_path, initializer) -> None:
    source = tmp_path / "in.onnx"
    onnx.save(_lengths(initializer), source)
    for options in ([], ["--verify"]):
        out = tmp_path / f"out{len(options)}.onnx"
        result = CliRunner().invoke(app, ["optimize", str(source), str(out), "-q", *options])
        assert result.exit_code == 0, result.output
        lowered, _ = seqlower.optimize(str(source))
        assert out.read_bytes() == model_to_bytes(lowered)


def test_the_example_written_by_the_command_line_is_the_library_s(tmp_path) -> None:
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", str(EXAMPLE), str(out), "-q"])
    assert result.exit_code == 0, result.output
    lowered, _ = seqlower.optimize(str(EXAMPLE))
    assert out.read_bytes() == model_to_bytes(lowered)


def test_a_checker_failure_of_the_shared_copy_is_an_internal_error(monkeypatch) -> None:
    def reject(model):
        raise onnx.checker.ValidationError("Field 'shape' of 'type' is required but missing.")

    monkeypatch.setattr(APP_MODULE, "check_fully", reject)
    lowered, _ = seqlower.optimize(ir.from_proto(_lengths(initializer=False)))
    with pytest.raises(InternalError, match="fails the ONNX checker"):
        APP_MODULE._check_output(lowered)
