"""Issue 14, item 1: files seqlower writes get the mode a plain `open()` would give them (the
umask applies), and an overwritten file keeps its own mode: `optimize`, `--in-place`,
`--external-data` (both files), `--dump-dir`, `--report`, and `seqlower.io.save_model`."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from cli_models import EXAMPLE
from typer.testing import CliRunner

from seqlower.cli import app
from seqlower.io import load_model, save_model

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _plain_open_mode(folder: Path) -> int:
    """What `open(path, "w")` gives a new file under the current umask."""
    probe = folder / "probe"
    probe.write_bytes(b"")
    mode = _mode(probe)
    probe.unlink()
    return mode


def _optimize(*args: str) -> None:
    result = CliRunner().invoke(app, ["optimize", "-q", *args])
    assert result.exit_code == 0, result.output


def test_a_new_model_file_gets_the_plain_open_mode(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "out.onnx"
    _optimize(str(EXAMPLE), str(target))
    assert _mode(target) == 0o666 & ~umask == _plain_open_mode(tmp_path)


def test_external_data_model_and_weights_get_the_same_mode(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "out.onnx"
    _optimize("--external-data", str(EXAMPLE), str(target))
    (weights,) = tmp_path.glob("out.onnx.*.data")
    assert weights.stat().st_size > 0
    assert _mode(target) == _mode(weights) == 0o666 & ~umask


def test_dump_dir_and_report_files_get_the_plain_open_mode(tmp_path: Path, umask: int) -> None:
    dumps, report = tmp_path / "dumps", tmp_path / "report.json"
    _optimize("--dump-dir", str(dumps), "--report", str(report), str(EXAMPLE), str(tmp_path / "o"))
    written = sorted(dumps.iterdir())
    assert written, "no model dumped"
    assert {_mode(path) for path in [*written, report]} == {0o666 & ~umask}


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_in_place_keeps_the_input_file_mode(tmp_path: Path, mode: int) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(EXAMPLE.read_bytes())
    model.chmod(mode)
    _optimize("--in-place", str(model), str(model))
    assert _mode(model) == mode
    assert "SequenceMap" not in {node.op_type for node in onnx.load(model).graph.node}


def test_an_overwritten_output_keeps_its_mode(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")
    target.chmod(0o604)
    _optimize(str(EXAMPLE), str(target))
    assert _mode(target) == 0o604
    onnx.checker.check_model(onnx.load(target))


def test_save_model_respects_the_umask_and_leaves_no_temporary_file(
    tmp_path: Path, umask: int
) -> None:
    target = tmp_path / "saved.onnx"
    save_model(load_model(EXAMPLE), target)
    assert _mode(target) == 0o666 & ~umask
    assert [path.name for path in tmp_path.iterdir()] == ["saved.onnx"]


def test_save_model_removes_its_temporary_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "saved.onnx"
    target.mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        save_model(load_model(EXAMPLE), target)
    assert [path.name for path in tmp_path.iterdir()] == ["saved.onnx"]
    assert list(target.iterdir()) == []
