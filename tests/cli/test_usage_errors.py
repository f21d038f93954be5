"""Issue 14, items 8 and 11: usage errors are one `error:` line with a pointer to `--help`
(rich's boxed panels only on a terminal), and `-v` with `-q` is refused that way."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_models import EXAMPLE, ROOT
from typer.testing import CliRunner

from seqlower.cli import app

USAGE_ERRORS = {
    # click words it "no such option: --x" or "no such option '--x'" depending on its release
    "unknown option": (["optimize", "--frobnicate", "a", "b"], "--frobnicate"),
    "missing argument": (["optimize", "a.onnx"], "missing argument 'OUTPUT'"),
    "trials 0": (["verify", "--trials", "0", "a", "b"], "invalid value for '--trials'"),
    "bad choice": (
        ["optimize", "--split-keepdims", "numpy", "a", "b"],
        "unknown split_keepdims 'numpy': choose one of onnxruntime, spec",
    ),
    "unknown command": (["frobnicate"], "no such command 'frobnicate'"),
    "quiet and verbose": (["optimize", "-q", "-v", "a", "b"], "--quiet and --verbose cannot"),
    # verify's option, tried on optimize: the hint (--target openvino --verify) is followed in
    # tests/verify/test_verify_users.py::test_the_readme_example_verifies_under_openvino
    "runtime on optimize": (
        ["optimize", "--verify", "--runtime", "openvino", "a", "b"],
        "optimize has no --runtime: with --verify the lowered model runs in the --target's "
        "runtime (--target openvino or --target tract; onnxruntime otherwise)",
    ),
}


@pytest.mark.parametrize("name", sorted(USAGE_ERRORS))
def test_a_usage_error_is_one_line_with_a_help_pointer(name: str) -> None:
    args, phrase = USAGE_ERRORS[name]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and phrase in line, line
    command = "optimize" if args[0] in ("frobnicate",) else args[0]
    if args[0] != "frobnicate":
        assert line.endswith(f"; see 'seqlower {command} --help'"), line
    else:
        assert line.endswith("; see 'seqlower --help'"), line
    assert "╭" not in result.output and "Traceback" not in result.output


def test_quiet_and_verbose_together_write_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", "-q", "-v", str(EXAMPLE), str(target)])
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_a_real_process_piped_prints_one_line_too() -> None:
    """Through `python -m seqlower` with stderr a pipe (not a terminal): no panel."""
    done = subprocess.run(
        [sys.executable, "-m", "seqlower", "optimize", "--frobnicate", "a", "b"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert re.match(r"error: no such option:? '?--frobnicate", line), line
    assert "optimize --help'" in line


def test_a_closed_pipe_is_not_an_internal_error() -> None:
    """`seqlower rules --json | head -c 1`: the reader leaves early; exit quietly (no bug)."""
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = subprocess.run(
        [sys.executable, "-c", _MANY_LINES],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        check=False,
    )
    reader.stdin.close()
    reader.wait()
    assert "internal error" not in writer.stderr and "Traceback" not in writer.stderr
    assert writer.returncode in (0, 1)


# a command whose output outgrows any pipe buffer, written after the reader has gone
_MANY_LINES = """
import time
import typer
from seqlower.cli import app

@app.command("many-lines-for-a-test")
def many() -> None:
    time.sleep(0.5)
    for _ in range(200_000):
        typer.echo("x" * 80)

app(["many-lines-for-a-test"])
"""


def test_on_a_terminal_the_usage_error_keeps_richs_panel(monkeypatch) -> None:
    from seqlower.cli import command

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(SystemExit) as stopped:
        command._exit_usage_error(command.usage_error("No such option: --frobnicate"))
    assert stopped.value.code == 2
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())  # without the colours
    assert "╭" in shown and "--frobnicate" in shown
