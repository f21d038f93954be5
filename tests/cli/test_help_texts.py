"""Issue 14, item 7: help that reads well at 80 columns: nothing cut with an ellipsis, no
`<bool>` placeholders or `[default: no-...]` on flags, `--target` and `--split-keepdims` show
their choices (the targets come from `seqlower.targets.PROFILES`), `optimize --help` lists the
exit codes, and the examples keep their own lines."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from seqlower.cli import app
from seqlower.targets import PROFILES

COMMANDS = ["optimize", "inspect", "verify", "rules"]


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("args", [[], *([c] for c in COMMANDS)])
def test_help_fits_80_columns_without_cutting_or_placeholders(args: list[str]) -> None:
    text = _help(*args)
    assert "…" not in text
    assert not any(line.rstrip().endswith("...") for line in text.splitlines()[1:])
    assert "<bool>" not in text
    assert "[default: no-" not in text
    assert "╭" not in text  # plain layout, no panels
    assert max(len(line) for line in text.splitlines()) <= 80


def test_every_command_is_listed_with_a_whole_sentence() -> None:
    text = _help()
    for command in COMMANDS:
        (line,) = [line for line in text.splitlines() if line.strip().startswith(command + " ")]
        assert line.rstrip().endswith("."), line


def test_target_shows_the_profiles_as_choices() -> None:
    text = _help("optimize")
    # click renders choices as <a|b> or, in older releases, [a|b]
    choices = "|".join(PROFILES)
    assert f"--target <{choices}>" in text or f"--target [{choices}]" in text
    assert (
        "--split-keepdims <onnxruntime|spec>" in text
        or "--split-keepdims [onnxruntime|spec]" in text
    )


def test_flags_are_listed_once_without_negative_forms() -> None:
    text = _help("optimize")
    for flag in ("--strict", "--verify", "--in-place", "--external-data", "--flatten-sequence-io"):
        assert re.search(rf"^  {flag}\s", text, flags=re.M), flag
        assert f"--no-{flag[2:]}" not in text


def test_optimize_help_lists_the_exit_codes() -> None:
    text = _help("optimize")
    block = text.split("Exit codes:", 1)[1]
    for code in "0123":
        assert re.search(rf"^\s+{code}\s+\S", block, flags=re.M), code
    assert "bug" in block


@pytest.mark.parametrize("command", COMMANDS)
def test_examples_keep_one_command_per_line(command: str) -> None:
    lines = _help(command).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith(f"seqlower {command}")]
    assert starts, "no example"
    for i in starts:  # the next line is blank or another example: never a wrapped tail
        follow = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert follow == "" or follow.startswith("seqlower "), (lines[i], follow)


def test_an_unknown_target_is_a_usage_error_listing_the_choices(tmp_path) -> None:
    result = CliRunner().invoke(app, ["optimize", "--target", "tpu", "a.onnx", "b.onnx"])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: unknown target 'tpu': choose one of ")
    assert all(name in line for name in PROFILES)
    assert "Value error" not in line  # a validator's wording never leaks
