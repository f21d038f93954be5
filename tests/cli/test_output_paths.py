"""Issue 14, items 9 and 11: every output path is checked before any work (nothing is printed
about the lowering, nothing is written, no temporary file name leaks), and `--dump-dir` creates
its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_models import EXAMPLE
from typer.testing import CliRunner

from seqlower.cli import app


def _run(*args: str):
    return CliRunner().invoke(app, ["optimize", *args])


def _assert_refused_before_work(result, phrase: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no summary: the lowering never ran
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and phrase in line, line
    assert ".tmp" not in line


def test_an_output_that_is_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "a_folder"
    folder.mkdir()
    result = _run(str(EXAMPLE), str(folder))
    _assert_refused_before_work(result, f"{folder}: is a directory")
    assert list(folder.iterdir()) == []


def test_a_report_in_a_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    report = tmp_path / "missing" / "r.json"
    result = _run("--report", str(report), str(EXAMPLE), str(target))
    _assert_refused_before_work(result, f"{report}: output folder {report.parent} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_a_report_that_is_a_directory(tmp_path: Path) -> None:
    result = _run("--report", str(tmp_path), str(EXAMPLE), str(tmp_path / "out.onnx"))
    _assert_refused_before_work(result, f"{tmp_path}: is a directory")
    assert list(tmp_path.iterdir()) == []


def test_a_report_that_would_overwrite_the_model(tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    result = _run("--report", str(target), str(EXAMPLE), str(target))
    _assert_refused_before_work(result, "--report must not be the input or output model")


def test_a_dump_dir_that_is_a_file(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.write_text("")
    result = _run("--dump-dir", str(dump), str(EXAMPLE), str(tmp_path / "out.onnx"))
    _assert_refused_before_work(result, "--dump-dir is a file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_output_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = _run(str(EXAMPLE), str(folder / "out.onnx"))
    finally:
        folder.chmod(0o755)
    _assert_refused_before_work(result, "permission denied")


def test_dump_dir_creates_its_folder(tmp_path: Path) -> None:
    dump = tmp_path / "dumps" / "run1"
    result = _run("-q", "--dump-dir", str(dump), str(EXAMPLE), str(tmp_path / "out.onnx"))
    assert result.exit_code == 0, result.output
    names = sorted(path.name for path in dump.iterdir())
    assert names[0].startswith("01-") and all(name.endswith(".onnx") for name in names)


def test_a_write_failure_after_lowering_does_not_name_the_temporary_file(
    tmp_path: Path, monkeypatch
) -> None:
    def refuse(source, target):
        raise PermissionError(13, "Permission denied", str(source))

    monkeypatch.setattr(os, "replace", refuse)
    target = tmp_path / "out.onnx"
    result = _run("-q", str(EXAMPLE), str(target))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line == f"error: {target}: cannot write (Permission denied)"
    assert list(tmp_path.iterdir()) == []


def test_a_dump_that_cannot_be_written_is_one_line_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    def refuse(source, target):
        raise OSError(28, "No space left on device", str(source))

    monkeypatch.setattr(os, "replace", refuse)
    dump = tmp_path / "dumps"
    result = _run("-q", "--dump-dir", str(dump), str(EXAMPLE), str(tmp_path / "out.onnx"))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.endswith("cannot write (No space left on device)") and ".tmp" not in line
    assert list(dump.iterdir()) == [] and not (tmp_path / "out.onnx").exists()
