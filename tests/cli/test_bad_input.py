"""Bad input never gives a traceback or a half-written file: one `error:` line naming the file
and the problem, exit code 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from seqlower.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "split_map_concat.onnx"


def _model(nodes, inputs, outputs, opset: int = 17, ir_version: int = 8) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version
    )


def _x(shape=(2,)):
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))


def _y(shape=(2,)):
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))


def _write(path: Path, content: bytes | onnx.ModelProto) -> Path:
    data = content if isinstance(content, bytes) else content.SerializeToString()
    path.write_bytes(data)
    return path


def _relu_model(**kwargs) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_x()], [_y()], **kwargs)


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, a phrase the error line must contain)"""
    example = EXAMPLE.read_bytes()
    seq_at = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        helper.make_node("Constant", [], ["p"], value=numpy_helper.from_array(np.array(5))),
        helper.make_node("SequenceAt", ["s", "p"], ["y"], name="the_at"),
    ]
    body = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["o"])],
        "body",
        [_x(), helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])],
    )
    arity = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        helper.make_node("SequenceMap", ["s"], ["m"], body=body, name="the_map"),
        helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=0),
    ]
    no_type = [
        helper.make_node("SequenceEmpty", [], ["e"], dtype=0),
        helper.make_node("SequenceInsert", ["e", "x"], ["s"]),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
    ]
    stacked_by_2 = [
        helper.make_node("SequenceEmpty", [], ["e"]),
        helper.make_node("SequenceInsert", ["e", "x"], ["s"]),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=2, name="the_join"),
    ]
    split_keepdims_2 = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=2, name="the_split"),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
    ]
    (tmp / "a_folder").mkdir()
    cases = {
        "missing path": (tmp / "missing.onnx", "no such file"),
        "directory": (tmp / "a_folder", "is a directory"),
        "empty file": (_write(tmp / "empty.onnx", b""), "empty file"),
        "random bytes": (
            _write(tmp / "random.onnx", np.random.default_rng(0).bytes(600)),
            "not an ONNX model",
        ),
        "truncated model": (
            _write(tmp / "truncated.onnx", example[: len(example) // 2]),
            "not an ONNX model",
        ),
        "protobuf that is not a model": (
            _write(tmp / "tensor.onnx", numpy_helper.from_array(np.ones(3, np.float32))),
            "not an ONNX model",
        ),
        "undefined value": (
            _write(
                tmp / "undefined.onnx",
                _model([helper.make_node("Relu", ["nope"], ["y"])], [_x()], [_y()]),
            ),
            "'nope'",
        ),
        "cycle": (
            _write(
                tmp / "cycle.onnx",
                _model(
                    [
                        helper.make_node("Relu", ["b"], ["y"]),
                        helper.make_node("Relu", ["y"], ["b"]),
                    ],
                    [_x()],
                    [_y()],
                ),
            ),
            "topologically sorted",
        ),
        "unsupported opset": (
            _write(tmp / "opset9.onnx", _relu_model(opset=9, ir_version=4)),
            "opset 9 is not supported",
        ),
        "unsupported IR version": (
            _write(tmp / "ir99.onnx", _relu_model(ir_version=99)),
            "ir_version 99",
        ),
        "SequenceMap body arity": (
            _write(tmp / "arity.onnx", _model(arity, [_x()], [_y((4,))])),
            "SequenceMap 'the_map'",
        ),
        "constant position out of range": (
            _write(tmp / "position.onnx", _model(seq_at, [_x()], [_y()])),
            "SequenceAt 'the_at': position 5 is out of range",
        ),
        "new_axis neither 0 nor 1": (  # inference misses it where the elements' type is unknown
            _write(tmp / "new_axis.onnx", _model(stacked_by_2, [_x()], [_y()])),
            "ConcatFromSequence 'the_join': new_axis is 2; the ONNX spec allows 0 or 1",
        ),
        "keepdims neither 0 nor 1": (
            _write(tmp / "keepdims.onnx", _model(split_keepdims_2, [_x()], [_y()])),
            "SplitToSequence 'the_split': keepdims is 2; the ONNX spec allows 0 or 1",
        ),
        "undefined element type": (  # the checker lets dtype 0 through; inference raises
            _write(tmp / "dtype0.onnx", _model(no_type, [_x()], [_y()])),
            "Invalid tensor data type 0",
        ),
    }
    return cases


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    return _bad_inputs(tmp_path_factory.mktemp("bad"))


CASE_NAMES = [
    "missing path",
    "directory",
    "empty file",
    "random bytes",
    "truncated model",
    "protobuf that is not a model",
    "undefined value",
    "cycle",
    "unsupported opset",
    "unsupported IR version",
    "SequenceMap body arity",
    "constant position out of range",
    "new_axis neither 0 nor 1",
    "keepdims neither 0 nor 1",
    "undefined element type",
]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_gives_one_line_and_exit_2(cases, name: str, tmp_path: Path) -> None:
    path, phrase = cases[name]
    target = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", "-q", str(path), str(target)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), lines
    assert phrase in lines[0]
    assert "Traceback" not in result.output
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_output_equal_to_input_is_refused_unless_in_place(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(EXAMPLE.read_bytes())
    before = model.read_bytes()
    refused = CliRunner().invoke(app, ["optimize", "-q", str(model), str(model)])
    assert refused.exit_code == 2 and "--in-place" in refused.stderr
    assert model.read_bytes() == before
    accepted = CliRunner().invoke(app, ["optimize", "-q", "--in-place", str(model), str(model)])
    assert accepted.exit_code == 0, accepted.output
    assert "SequenceMap" not in {n.op_type for n in onnx.load(model).graph.node}


def test_missing_output_folder(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", "-q", str(EXAMPLE), str(target)])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr
    assert not target.parent.exists()


def test_strict_refuses_to_write_when_sequence_ops_remain(tmp_path: Path) -> None:
    seq_input = onnx.helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])
    model = _model([helper.make_node("SequenceAt", ["s", "i"], ["y"])], [seq_input], [_y()])
    model.graph.input.append(helper.make_tensor_value_info("i", TensorProto.INT64, []))
    source = _write(tmp_path / "in.onnx", model)
    target = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", "--strict", str(source), str(target)])
    assert result.exit_code == 1
    assert "remain" in result.stderr
    assert "kept SequenceAt" in result.stdout
    assert not target.exists()


def test_external_data_outside_the_model_folder_is_refused(tmp_path: Path) -> None:
    model = _relu_model()
    weight = numpy_helper.from_array(np.ones(4, np.float32), "w")
    weight.data_location = TensorProto.EXTERNAL
    weight.ClearField("raw_data")
    entry = weight.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    model.graph.initializer.append(weight)
    inside = tmp_path / "inside"
    inside.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    source = _write(inside / "model.onnx", model)
    result = CliRunner().invoke(app, ["optimize", "-q", str(source), str(tmp_path / "o.onnx")])
    assert result.exit_code == 2
    assert "points outside the model's folder" in result.stderr


def test_external_data_is_written_beside_the_output(tmp_path: Path) -> None:
    source = tmp_path / "in.onnx"
    source.write_bytes(EXAMPLE.read_bytes())
    target = tmp_path / "out" / "lowered.onnx"
    target.parent.mkdir()
    args = ["optimize", "-q", "--external-data", str(source), str(target)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (data_file,) = target.parent.glob("lowered.onnx.*.data")  # named after its content
    assert data_file.stat().st_size >= 64 * 64 * 4
    assert target.stat().st_size < data_file.stat().st_size
    loaded = onnx.load(target)
    weights = {
        t.name: numpy_helper.to_array(t, base_dir=str(target.parent))
        for t in loaded.graph.initializer
    }
    original = {t.name: numpy_helper.to_array(t) for t in onnx.load(source).graph.initializer}
    for name, array in original.items():
        np.testing.assert_array_equal(weights[name], array)
