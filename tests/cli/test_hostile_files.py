"""Hostile files, run through the real command (`python -m seqlower` in a child process): nothing
is read from outside the model's folder, no file the input reads is overwritten, the model and
its weights are replaced as a pair, a planted symlink is replaced and never written through,
SIGTERM leaves no temporary file, names print escaped, and an invalid model is one `error:`
line with exit code 2 (never "a bug in seqlower")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import seqlower
from seqlower.errors import InvalidModelError

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"[core]\n\ttoken = hunter2hunter2hunter2\n"


# --- builders -------------------------------------------------------------------------------


def _model(nodes, inputs, outputs, functions=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions)
    )
    model.ir_version = 8
    return model


def _vi(name: str, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _external(name: str, location: str) -> TensorProto:
    """A float tensor whose bytes are to be read from `location`."""
    tensor = numpy_helper.from_array(np.zeros(len(SECRET) // 4, np.float32), name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


def _constant_model(location: str) -> onnx.ModelProto:
    """y = Constant(value = external tensor at `location`): folding writes its bytes out."""
    size = len(SECRET) // 4
    node = helper.make_node("Constant", [], ["y"], value=_external("c", location))
    return _model([node], [], [_vi("y", [size])])


def _constant_in_a_branch(location: str) -> onnx.ModelProto:
    size = len(SECRET) // 4
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["b"], value=_external("c", location))],
        "then",
        [],
        [_vi("b", [size])],
    )
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["e"], value_floats=[0.0] * size)],
        "else",
        [],
        [_vi("e", [size])],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other)
    return _model([node], [_vi("cond", [], TensorProto.BOOL)], [_vi("y", [size])])


def _constant_in_a_function(location: str) -> onnx.ModelProto:
    size = len(SECRET) // 4
    function = helper.make_function(
        "local",
        "Leak",
        [],
        ["out"],
        [helper.make_node("Constant", [], ["out"], value=_external("c", location))],
        [helper.make_opsetid("", 17)],
    )
    node = helper.make_node("Leak", [], ["y"], domain="local")
    model = _model([node], [], [_vi("y", [size])], functions=[function])
    model.opset_import.append(helper.make_opsetid("local", 1))
    return model


def _split_model(
    name: str = "split", rows: int = 4, sizes=(2, 2), concat_axis: int = 0, new_axis: int = 0
) -> onnx.ModelProto:
    """x[rows, 3] -> SplitToSequence(split = sizes) -> ConcatFromSequence(axis) -> y."""
    nodes = [
        helper.make_node(
            "Constant", [], ["s"], value=numpy_helper.from_array(np.array(sizes, np.int64))
        ),
        helper.make_node("SplitToSequence", ["x", "s"], ["seq"], axis=0, name=name),
        helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=concat_axis, new_axis=new_axis),
    ]
    output = [rows, 3] if (concat_axis, new_axis) == (0, 0) else [None] * (2 + new_axis)
    return _model(nodes, [_vi("x", [rows, 3])], [_vi("y", output)])


def _weights_model(value: float, elements: int = 4096) -> onnx.ModelProto:
    """y = x + w, w a [elements] float initializer filled with `value` (16 kB: external)."""
    weight = numpy_helper.from_array(np.full(elements, value, np.float32), "w")
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=1),
        helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
        helper.make_node("Add", ["c", "w"], ["y"]),
    ]
    model = _model(nodes, [_vi("x", [2, elements])], [_vi("y", [2, elements])])
    model.graph.initializer.append(weight)
    return model


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def _save_with_weights(model: onnx.ModelProto, path: Path, location: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path, save_as_external_data=True, location=location, size_threshold=0)
    return path


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "seqlower", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _one_error(result: subprocess.CompletedProcess[str], *phrases: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "bug in seqlower" not in line, line
    for phrase in phrases:
        assert phrase in line, line
    return line


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _weights_of(model_file: Path) -> np.ndarray:
    model = onnx.load(model_file)  # reads the external data the model names
    (weight,) = [t for t in model.graph.initializer if t.name == "w"]
    return numpy_helper.to_array(weight)


# --- 1. external data is read from the model's folder only ---------------------------------


LEAKS = {
    "Constant": _constant_model,
    "Constant in an If branch": _constant_in_a_branch,
    "Constant in a function": _constant_in_a_function,
}


@pytest.mark.parametrize("build", LEAKS.values(), ids=LEAKS.keys())
def test_a_relative_location_is_not_read_from_the_working_directory(tmp_path, build) -> None:
    work = tmp_path / "checkout"  # the folder the command runs in: holds the secret
    work.mkdir()
    (work / "secret.txt").write_bytes(SECRET)
    source = _save(build("secret.txt"), tmp_path / "downloads" / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    result = _run("optimize", str(source), str(out / "o.onnx"), cwd=work)
    _one_error(result, "secret.txt not found")
    assert str(source.parent / "secret.txt") in result.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "location", ["../secret.txt", "/ABS/secret.txt", "sub/../../secret.txt", "link.txt"]
)
def test_a_location_leading_out_of_the_folder_is_refused(tmp_path, location) -> None:
    (tmp_path / "secret.txt").write_bytes(SECRET)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    location = location.replace("/ABS", str(tmp_path))
    source = _save(_constant_in_a_branch(location), folder / "m.onnx")
    result = _run("optimize", str(source), str(tmp_path / "o.onnx"))
    _one_error(result, "points outside the model's folder; refused")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("order", [("c.bin", "../secret.txt"), ("../secret.txt", "c.bin")])
def test_a_location_given_twice_is_refused(tmp_path, order) -> None:
    """Readers differ on which of two locations counts: neither is read."""
    (tmp_path / "secret.txt").write_bytes(SECRET)
    model = _constant_model(order[0])
    entry = model.graph.node[0].attribute[0].t.external_data.add()
    entry.key, entry.value = "location", order[1]
    source = _save(model, tmp_path / "model" / "m.onnx")
    (source.parent / "c.bin").write_bytes(bytes(len(SECRET)))
    _one_error(_run("optimize", str(source), str(tmp_path / "o.onnx")), "names a key twice")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_inspect_and_verify_read_nothing_outside_either(tmp_path, command) -> None:
    (tmp_path / "secret.txt").write_bytes(SECRET)
    source = _save(_constant_in_a_function("../secret.txt"), tmp_path / "model" / "m.onnx")
    models = [str(source)] * (2 if command == "verify" else 1)
    _one_error(_run(command, *models), "points outside the model's folder; refused")


def test_external_data_inside_the_folder_is_read_from_there(tmp_path) -> None:
    """The same model with its data beside it (and none in the working directory) works and
    computes the constant from the model's own file."""
    source = _save(_constant_in_a_function("c.bin"), tmp_path / "model" / "m.onnx")
    values = np.arange(len(SECRET) // 4, dtype=np.float32)
    (source.parent / "c.bin").write_bytes(values.tobytes())
    result = _run("optimize", "-q", str(source), str(tmp_path / "o.onnx"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    import onnxruntime as ort

    session = ort.InferenceSession(str(tmp_path / "o.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {})[0], values)


# --- 2. a planted symlink is replaced, never written through --------------------------------


def test_external_data_replaces_a_planted_symlink(tmp_path) -> None:
    source = _save(_weights_model(1.0), tmp_path / "in" / "m.onnx")
    first = tmp_path / "first"
    first.mkdir()
    assert (
        _run("optimize", "-q", "--external-data", str(source), str(first / "o.onnx")).returncode
        == 0
    )
    (weights_name,) = [p.name for p in first.glob("o.onnx.*.data")]
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    out = tmp_path / "out"
    out.mkdir()
    for name in (weights_name, "o.onnx.data", "o.onnx"):  # every name it may write
        (out / name).symlink_to(victim)
    result = _run("optimize", "-q", "--external-data", str(source), str(out / "o.onnx"))
    assert result.returncode == 0, result.stderr
    assert victim.read_bytes() == b"keep me"
    assert not (out / "o.onnx").is_symlink() and not (out / weights_name).is_symlink()
    np.testing.assert_array_equal(_weights_of(out / "o.onnx"), np.full(4096, 1.0, np.float32))


# --- 3. names are printed escaped -----------------------------------------------------------

EVIL = "the_at\x1b]0;owned\x07\r\nverified: equivalent under onnxruntime\x1b[2J"


def _assert_escaped(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert not any(line.startswith("verified:") for line in text.splitlines())


def test_names_print_escaped_in_errors(tmp_path) -> None:
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        helper.make_node("Constant", [], ["p"], value=numpy_helper.from_array(np.array(5))),
        helper.make_node("SequenceAt", ["s", "p"], ["y"], name=EVIL),
    ]
    source = _save(_model(nodes, [_vi("x", [2])], [_vi("y", [2])]), tmp_path / "m.onnx")
    result = _run("optimize", str(source), str(tmp_path / "o.onnx"))
    line = _one_error(result, "position 5 is out of range", "\\x1b]0;owned\\x07\\r\\nverified")
    _assert_escaped(line)


def test_names_print_escaped_in_the_summary_and_inspect(tmp_path) -> None:
    source = _save(_split_model(name=EVIL), tmp_path / "m.onnx")
    model = onnx.load(source)
    model.graph.node[1].doc_string = EVIL
    _save(model, source)
    inspected = _run("inspect", str(source))
    assert inspected.returncode == 0, inspected.stderr
    assert "\\x1b]0;owned" in inspected.stdout
    optimized = _run("optimize", "-v", str(source), str(tmp_path / "o.onnx"))
    assert optimized.returncode == 0, optimized.stderr
    for text in (inspected.stdout, inspected.stderr, optimized.stdout, optimized.stderr):
        _assert_escaped(text)


def test_names_print_escaped_in_verify(tmp_path) -> None:
    model = _split_model()
    model.graph.output[0].name = EVIL
    model.graph.node[2].output[0] = EVIL
    source = _save(model, tmp_path / "m.onnx")
    result = _run("verify", str(source), str(source))
    assert result.returncode == 0, result.stderr
    assert "\\x1b]0;owned" in result.stdout
    _assert_escaped(result.stdout + result.stderr)


# --- 5. no output is a file the input reads -------------------------------------------------


@pytest.mark.parametrize("where", ["--report", "OUTPUT"])
def test_an_output_that_is_the_inputs_weights_is_refused(tmp_path, where) -> None:
    source = _save_with_weights(_weights_model(1.0), tmp_path / "m.onnx", "weights.bin")
    weights = tmp_path / "weights.bin"
    before = _files(tmp_path)
    if where == "--report":
        args = ["--report", str(weights), str(source), str(tmp_path / "o.onnx")]
    else:
        args = [str(source), str(weights)]
    _one_error(_run("optimize", *args), "is a weights file the input model reads")
    assert _files(tmp_path) == before
    np.testing.assert_array_equal(_weights_of(source), np.full(4096, 1.0, np.float32))


def test_a_hard_link_to_the_input_as_output_is_refused(tmp_path) -> None:
    source = _save(_split_model(), tmp_path / "m.onnx")
    os.link(source, tmp_path / "alias.onnx")
    before = _files(tmp_path)
    _one_error(_run("optimize", str(source), str(tmp_path / "alias.onnx")), "is the input file")
    assert _files(tmp_path) == before


# --- 6. the model and its weights are replaced as a pair ------------------------------------


def test_each_run_writes_a_consistent_pair_and_removes_the_old_weights(tmp_path) -> None:
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    for value in (1.0, 2.0, 1.0):
        source = _save(_weights_model(value), tmp_path / f"m{value}.onnx")
        result = _run("optimize", "-q", "--external-data", str(source), str(out))
        assert result.returncode == 0, result.stderr
        np.testing.assert_array_equal(_weights_of(out), np.full(4096, value, np.float32))
        assert len(list(out.parent.glob("o.onnx.*.data"))) == 1  # the old one is gone
    first = out.read_bytes()
    assert _run("optimize", "-q", "--external-data", str(source), str(out)).returncode == 0
    assert out.read_bytes() == first  # deterministic, weights name included


def test_a_failed_model_write_leaves_the_old_pair_intact(tmp_path, monkeypatch) -> None:
    from seqlower.io import load_model, save_model

    out = tmp_path / "o.onnx"
    save_model(load_model(_save(_weights_model(1.0), tmp_path / "a.onnx")), out, external_data=True)
    new = load_model(_save(_weights_model(2.0), tmp_path / "b.onnx"))
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst) == out:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        save_model(new, out, external_data=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(_weights_of(out), np.full(4096, 1.0, np.float32))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("o.onnx")) == [
        "o.onnx",
        *[p.name for p in tmp_path.glob("o.onnx.*.data")],
    ]
    assert not list(tmp_path.glob(".*tmp*"))


def test_concurrent_writers_leave_a_matching_pair(tmp_path) -> None:
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = []
    for value in (1.0, 2.0, 3.0):
        source = _save(_weights_model(value), tmp_path / f"m{value}.onnx")
        command = [sys.executable, "-m", "seqlower", "optimize", "-q", "--external-data"]
        writers.append(subprocess.Popen([*command, str(source), str(out)], env=env))
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    weights = _weights_of(out)
    assert weights[0] in (1.0, 2.0, 3.0)
    np.testing.assert_array_equal(weights, np.full(4096, weights[0], np.float32))


# --- 7. SIGTERM leaves no temporary file ----------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path) -> None:
    source = _save(_weights_model(1.0, elements=8_000_000), tmp_path / "m.onnx")  # 32 MB
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "seqlower", "optimize", "-q", "--dump-dir", str(out / "d")]
    child = subprocess.Popen(
        [*command, str(source), str(out / "o.onnx")], env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if any(".tmp" in p.name for p in out.rglob("*")):
            child.send_signal(signal.SIGTERM)
            break
        time.sleep(0.002)
    _, stderr = child.communicate(timeout=60)
    if child.returncode == 0:
        pytest.skip("the command finished before a temporary file was seen")
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip() == "error: terminated"
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
    assert not (out / "o.onnx").exists()


# --- 10 and invalid exports: the file as read is checked ------------------------------------


def test_a_duplicated_attribute_is_refused(tmp_path) -> None:
    model = _split_model()
    attribute = model.graph.node[1].attribute.add()
    attribute.CopyFrom(model.graph.node[1].attribute[0])
    source = _save(model, tmp_path / "m.onnx")
    result = _run("optimize", str(source), str(tmp_path / "o.onnx"))
    _one_error(result, "input model itself is invalid", "appeared multiple times")
    assert not (tmp_path / "o.onnx").exists()


def test_a_sparse_initializer_is_refused_by_name(tmp_path) -> None:
    model = _split_model()
    values = numpy_helper.from_array(np.ones(2, np.float32), "sp")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "sp_indices")
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [4]))
    source = _save(model, tmp_path / "m.onnx")
    _one_error(
        _run("optimize", str(source), str(tmp_path / "o.onnx")),
        "sparse initializer 'sp' is not supported",
    )


def _list_fed_to_split() -> onnx.ModelProto:
    """What PyTorch writes for `x.split(lengths.tolist())`: a sequence of sizes as the split."""
    at = [
        helper.make_node("Constant", [], [f"i{k}"], value=numpy_helper.from_array(np.array(k)))
        for k in range(2)
    ]
    nodes = [
        *at,
        helper.make_node("Gather", ["lengths", "i0"], ["l0"]),
        helper.make_node("Gather", ["lengths", "i1"], ["l1"]),
        helper.make_node("SequenceConstruct", ["l0", "l1"], ["sizes"]),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=0),
        helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0),
    ]
    inputs = [_vi("x", [5, 3]), _vi("lengths", [2], TensorProto.INT64)]
    return _model(nodes, inputs, [_vi("y", [None, 3])])


def test_an_invalid_export_is_named_as_such(tmp_path) -> None:
    source = _save(_list_fed_to_split(), tmp_path / "m.onnx")
    expected = ("input model itself is invalid", "SplitToSequence", "'split' is a seq(")
    _one_error(_run("optimize", str(source), str(tmp_path / "o.onnx")), *expected)
    _one_error(_run("inspect", str(source)), *expected)
    with pytest.raises(InvalidModelError, match=r"input model itself is invalid"):
        seqlower.optimize(source)
    with pytest.raises(InvalidModelError, match=r"input model itself is invalid"):
        seqlower.optimize(_list_fed_to_split())


# --- 8 and 9: invalid models are one line, exit 2; a valid odd one is lowered right ---------


def _loop(body_inputs, body_outputs, body_nodes) -> onnx.ModelProto:
    body = helper.make_graph(body_nodes, "body", body_inputs, body_outputs)
    nodes = [
        helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "", "e"], ["out"], body=body, name="the_loop"),
        helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=0),
    ]
    inputs = [_vi("x", [2]), _vi("n", [], TensorProto.INT64)]
    return _model(nodes, inputs, [_vi("y", [None])])


def _seq(name: str, dtype=TensorProto.FLOAT):
    return helper.make_tensor_sequence_value_info(name, dtype, None)


def _if(then_nodes, then_outputs, else_nodes, else_outputs) -> onnx.ModelProto:
    then = helper.make_graph(then_nodes, "then", [], then_outputs)
    other = helper.make_graph(else_nodes, "else", [], else_outputs)
    nodes = [
        helper.make_node("If", ["c"], ["s"], then_branch=then, else_branch=other, name="the_if"),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
    ]
    return _model(nodes, [_vi("x", [2]), _vi("c", [], TensorProto.BOOL)], [_vi("y", [None])])


def _invalid_utf8_name() -> bytes:
    data = _split_model(name="n").SerializeToString()
    assert data.count(b"\x1a\x01n") == 1  # NodeProto.name (field 3) = "n"
    return data.replace(b"\x1a\x01n", b"\x1a\x01\xff")


def _float_axis() -> onnx.ModelProto:
    model = _split_model()
    (axis,) = model.graph.node[1].attribute
    axis.CopyFrom(helper.make_attribute("axis", 0.0))
    return model


LOOP_INPUTS = [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _seq("s")]
INSERT = helper.make_node("SequenceInsert", ["s", "x"], ["so"])
INVALID = {
    "invalid UTF-8 in a name": (_invalid_utf8_name, "is not valid UTF-8 ('\\xff')"),
    "Loop body with an extra input": (
        lambda: _loop(
            [*LOOP_INPUTS, _vi("extra", [2])],
            [_vi("co", [], TensorProto.BOOL), _seq("so")],
            [helper.make_node("Identity", ["c"], ["co"]), INSERT],
        ),
        "Loop 'the_loop': Graph has 4 inputs but 3 were provided",
    ),
    "Loop body without a condition output": (
        lambda: _loop(LOOP_INPUTS, [_seq("so")], [INSERT]),
        "Loop 'the_loop': Graph attribute inferencing returned type information for 1 outputs",
    ),
    "If branches with different output counts": (
        lambda: _if(
            [
                helper.make_node("SequenceConstruct", ["x", "x"], ["a"]),
                helper.make_node("Identity", ["x"], ["a2"]),
            ],
            [_seq("a"), _vi("a2", [2])],
            [helper.make_node("SequenceConstruct", ["x"], ["b"])],
            [_seq("b")],
        ),
        "If 'the_if': then_branch and else_branch produce different number of outputs",
    ),
    "If branches with different types": (
        lambda: _if(
            [helper.make_node("SequenceConstruct", ["x", "x"], ["a"])],
            [_seq("a")],
            [
                helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64),
                helper.make_node("SequenceConstruct", ["xi"], ["b"]),
            ],
            [_seq("b", TensorProto.INT64)],
        ),
        "If 'the_if': Mismatched tensor element type",
    ),
    "a float axis": (_float_axis, "Mismatched attribute type in 'split : axis'"),
    "chunks of different sizes joined on another axis": (
        lambda: _split_model(rows=6, sizes=(0, 6), concat_axis=1),
        "ConcatFromSequence joins elements (from SplitToSequence) whose sizes differ on "
        "dimension 0 (0, 6)",
    ),
    "chunks of different sizes stacked": (
        lambda: _split_model(rows=5, sizes=2, new_axis=1),
        "whose sizes differ on dimension 0 (1, 2)",
    ),
    "split sizes that do not add up": (
        lambda: _split_model(rows=5, sizes=(2, 2)),
        "Sum of split values not equal to 'input' dim size on 'axis'",
    ),
}


@pytest.mark.parametrize("build", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_model_is_one_line_exit_2(tmp_path, build) -> None:
    make, phrase = build
    made = make()
    source = tmp_path / "m.onnx"
    source.write_bytes(made if isinstance(made, bytes) else made.SerializeToString())
    _one_error(
        _run("optimize", str(source), str(tmp_path / "o.onnx")),
        "the input model itself is invalid",
        phrase,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_inspect_of_an_invalid_model_is_one_line_exit_2(tmp_path) -> None:
    source = _save(_float_axis(), tmp_path / "m.onnx")
    _one_error(_run("inspect", str(source)), "the input model itself is invalid", "axis")


def test_a_zero_size_chunk_before_a_concat_is_lowered_right(tmp_path) -> None:
    """split [0, 6] then ConcatFromSequence: valid, onnxruntime runs it; so does the result."""
    import onnxruntime as ort

    source = _save(_split_model(rows=6, sizes=(0, 6)), tmp_path / "m.onnx")
    result = _run("optimize", "-q", str(source), str(tmp_path / "o.onnx"))
    assert result.returncode == 0, result.stderr
    x = {"x": np.arange(18, dtype=np.float32).reshape(6, 3)}
    runs = [
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
        for path in (source, tmp_path / "o.onnx")
    ]
    np.testing.assert_array_equal(runs[0], runs[1])


def test_split_sizes_known_only_when_run_are_a_documented_deviation(tmp_path) -> None:
    """[2, 2] on N rows: the original fails in onnxruntime for N = 5 (onnx.reference drops the
    fifth row), the lowered Concat(Split(x)) returns x. Inputs the original accepts (N = 4)
    give equal results: the deviation the README lists (a run-time error becoming a result)."""
    import onnxruntime as ort

    model = _split_model(rows=4, sizes=(2, 2))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    source = _save(model, tmp_path / "m.onnx")
    assert _run("optimize", "-q", str(source), str(tmp_path / "o.onnx")).returncode == 0
    original, lowered = (
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        for path in (source, tmp_path / "o.onnx")
    )
    four = {"x": np.arange(12, dtype=np.float32).reshape(4, 3)}
    np.testing.assert_array_equal(original.run(None, four)[0], lowered.run(None, four)[0])
    five = {"x": np.arange(15, dtype=np.float32).reshape(5, 3)}
    with pytest.raises(Exception, match="split_size_sum"):
        original.run(None, five)
    np.testing.assert_array_equal(lowered.run(None, five)[0], five["x"])


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_a_sigterm_right_after_the_temporary_file_is_made_still_removes_it(tmp_path, monkeypatch):
    """The race the test above can hit: SIGTERM (raised as an exception, as the command line
    does) arriving the instant after the temporary file exists: its name was kept before it
    was made, so the cleanup removes the file."""
    from seqlower import io

    class Terminated(Exception):
        pass

    def terminated(signum, frame):
        raise Terminated

    made = io._create_temporary

    def made_then_signalled(target, names):
        temp = made(target, names)
        os.kill(os.getpid(), signal.SIGTERM)  # raised here, before the caller holds the name
        return temp

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        monkeypatch.setattr(io, "_create_temporary", made_then_signalled)
        with pytest.raises(Terminated):
            io.write_text(tmp_path / "out.txt", "text")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert list(tmp_path.iterdir()) == []
