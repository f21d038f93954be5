"""A user's own commands, run as they run them (a child process): the documented submodules are
there after `import seqlower`, usage lines name arguments plainly, and `inspect --help` speaks of
inspect."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_models import ROOT


def seqlower(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m seqlower ARGS` with this checkout's package, as a user runs the command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "seqlower", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize(
    "attribute",
    [
        "verification.verify",
        "verification.run_in_runtime",
        "testing.assert_equivalent",
        "io.save_model",
        "io.load_model",
        "passes.SequenceLoweringPass",
    ],
)
def test_documented_submodules_work_after_import_seqlower_alone(attribute: str) -> None:
    done = python(f"import seqlower; print(callable(seqlower.{attribute}))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_import_seqlower_alone_imports_no_submodule_it_does_not_need() -> None:
    done = python(
        "import sys, seqlower; print(sorted(m for m in sys.modules if m.startswith('seqlower.')))"
    )
    assert done.returncode == 0, done.stderr
    loaded = eval(done.stdout)
    for lazy in ("seqlower.verification", "seqlower.testing", "seqlower.io", "seqlower.passes"):
        assert lazy not in loaded


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    done = python("import seqlower; seqlower.verifcation")
    assert done.returncode == 1
    assert "has no attribute 'verifcation'" in done.stderr


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("optimize", "optimize [OPTIONS] SOURCE OUTPUT"),
        ("inspect", "inspect [OPTIONS] MODEL"),
        ("verify", "verify [OPTIONS] ORIGINAL CANDIDATE"),
    ],
)
def test_usage_lines_name_arguments_without_braces(command: str, usage: str) -> None:
    done = seqlower(command, "--help")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.endswith(usage), first
    assert "{" not in first


def test_inspect_help_is_its_own() -> None:
    done = seqlower("inspect", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for tier in ("direct", "batch", "unroll", "scan", "stacked", "ragged", "flat", "loop",
                 "kept", "flattened"):  # fmt: skip
        assert f"{tier} (" in text, tier
    assert "accepts only that size" not in text  # optimize's --dim: inspect writes no model
    assert "exit 1" not in text and "fail (exit 1)" not in text  # inspect never exits 1
    assert "operators only" in text  # --target: no runtime is loaded
    assert "0 inspected" in text and "2 bad input" in text
