"""A difference found says what to try, and what it says works when followed: float rounding
(every difference far below its output's largest value, as when a runtime sums in another order)
names the `--atol` that accepts it; other differences name the sizes to give (`--dim`) or
`--inputs`; a runtime that is not installed names what pip can install."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

import seqlower.verification
from seqlower.cli import app
from seqlower.verification import runtimes

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "split_map_concat.onnx"
HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'

# (a + 64) - 64 against a: equal but for the rounding of the sum, which is up to half a unit in
# the last place of 64 + a, far more than a's own when |a| is small
ROUNDED = """g (float[N,64] a) => (float[N,64] y) {
    c = Constant <value = float {64}> ()
    s = Add (a, c)
    y = Sub (s, c)
}"""
EXACT = """g (float[N,64] a) => (float[N,64] y) {
    y = Identity (a)
}"""
# a candidate that zeroes its input when N < 4: it differs on sizes the model may never get
SMALL_ZEROED = """g (float[N] a) => (float[N] y) {
    shape = Shape (a)
    n = Squeeze (shape)
    four = Constant <value = int64 {4}> ()
    big = GreaterOrEqual (n, four)
    zero = Constant <value = float {0}> ()
    y = Where (big, a, zero)
}"""
SMALL = """g (float[N] a) => (float[N] y) {
    y = Identity (a)
}"""
INPUTS = "your own inputs with --inputs (an ONNX test-data folder or .npz)"


def _save(tmp_path: Path, name: str, text: str) -> Path:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _verify(*args: str | Path):
    return CliRunner().invoke(app, ["verify", *map(str, args)])


def test_float_rounding_names_the_atol_that_accepts_it(tmp_path):
    original, candidate = _save(tmp_path, "rounded", ROUNDED), _save(tmp_path, "exact", EXACT)
    result = _verify(original, candidate)
    assert result.exit_code == 1, result.output
    hint = result.stdout.splitlines()[-1]
    assert hint.startswith("  every difference is float rounding, at most ")
    said = re.search(r"--atol (\S+) accepts it$", hint)
    assert said is not None, hint
    followed = _verify(original, candidate, "--atol", said[1])
    assert followed.exit_code == 0, followed.output
    assert followed.stdout.splitlines()[-1].startswith("equivalent (")


def test_a_difference_beyond_rounding_names_the_sizes_to_give(tmp_path):
    original, candidate = _save(tmp_path, "small", SMALL), _save(tmp_path, "zeroed", SMALL_ZEROED)
    result = _verify(original, candidate)
    assert result.exit_code == 1, result.output
    hint = result.stdout.splitlines()[-1]
    assert hint == (
        "  if the trials that differ have sizes or values the model never gets, give the sizes "
        f"it gets with --dim N=SIZE, or {INPUTS}"
    )  # values 1 against 0 are no rounding
    followed = _verify(original, candidate, "--dim", "N=8")
    assert followed.exit_code == 0, followed.output
    still = _verify(original, candidate, "--dim", "N=2")  # a size given is not named again
    assert still.exit_code == 1
    assert still.stdout.splitlines()[-1].endswith(f"never gets, give {INPUTS}")


def test_equivalent_models_get_no_hint(tmp_path):
    path = _save(tmp_path, "exact", EXACT)
    report = seqlower.verification.verify(path, path)
    assert report.equivalent and report.difference_hint() is None


def test_optimize_verify_puts_the_hint_in_its_error_line(tmp_path, monkeypatch):
    """`optimize --verify` gives the hint of `verify`, and its `--atol` is taken there too (the
    lowering is swapped for a pair that differs by rounding)."""
    original, candidate = _save(tmp_path, "rounded", ROUNDED), _save(tmp_path, "exact", EXACT)
    real = seqlower.verification.verify

    def rounded_pair(source, lowered, **options):
        return real(original, candidate, **options)

    monkeypatch.setattr(seqlower.verification, "verify", rounded_pair)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", str(EXAMPLE), str(out), "--verify"])
    assert result.exit_code == 1, result.output
    error = result.stderr.splitlines()[-1]
    assert error.startswith("error: verification failed: the lowered model differs; nothing ")
    said = re.search(r"--atol (\S+) accepts it\)$", error)
    assert said is not None, error
    assert not out.exists()
    args = ["optimize", str(EXAMPLE), str(out), "--verify", "--atol", said[1]]
    followed = CliRunner().invoke(app, args)
    assert followed.exit_code == 0, followed.output
    assert out.is_file()


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_missing_runtime_names_what_pip_can_install(tmp_path, monkeypatch, runtime):
    """The extra's own requirement (pyproject.toml), not `seqlower[...]`, which no package
    index serves: seqlower is installed from a clone."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(rf'^{runtime} = \["([^"]+)"\]$', pyproject, flags=re.M)
    assert extra is not None
    monkeypatch.setattr(runtimes, "_installed", lambda module: module != runtime)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", str(EXAMPLE), str(out), "--target", runtime])
    assert result.exit_code == 0, result.output
    said = f"warning: {runtime} is not installed: pip install '{extra[1]}'; the check for "
    assert said in result.stderr
    verified = CliRunner().invoke(app, ["verify", str(EXAMPLE), str(out), "--runtime", runtime])
    assert verified.exit_code == 2
    assert verified.output == f"error: {runtime} is not installed: pip install '{extra[1]}'\n"


def test_the_readme_row_quotes_the_message_and_its_advice():
    """The troubleshooting row for a difference quotes the start of the error line the tests
    above read, and gives the two pieces of advice the hint prints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `verification failed")]
    assert row.startswith("| `verification failed: the lowered model differs` (exit 1) |")
    assert "`--atol`" in row and "`--dim` or `--inputs`" in row
    assert "seqlower[" not in readme  # no index serves seqlower: the runtimes' hint names theirs


# a model declaring an input of a billion elements: verify would allocate gigabytes per trial
BILLION = """g (float[1000000000] a) => (float[1000000000] y) {
    y = Identity (a)
}"""


def test_an_input_too_large_to_draw_is_refused_before_anything_is_allocated(tmp_path):
    path = _save(tmp_path, "billion", BILLION)
    result = _verify(path, path)
    assert result.exit_code == 2, result.output
    assert result.output == (
        "error: input 'a' of shape [1000000000] needs 1,000,000,000 elements in a test run, "
        "more than verify draws (67,108,864): verify with your own inputs (--inputs)\n"
    )
    out = tmp_path / "out.onnx"
    lowered = CliRunner().invoke(app, ["optimize", str(path), str(out), "--verify"])
    assert lowered.exit_code == 2, lowered.output
    assert lowered.stderr.startswith("error: --verify: input 'a' of shape [1000000000] needs ")
    assert not out.exists()


def test_the_oversized_input_hints_work_when_followed(tmp_path, monkeypatch):
    """With the limit lowered to 100 elements: sizes given with --dim name the dim to shrink,
    a declared size asks for inputs, and both work when followed."""
    monkeypatch.setattr(seqlower.verification.generate, "MAX_DRAWN_ELEMENTS", 100)
    small = _save(tmp_path, "small", SMALL)
    result = _verify(small, small, "--dim", "N=1000")
    assert result.exit_code == 2
    assert result.output.endswith(
        "give N a smaller size with --dim, or verify with your own inputs (--inputs)\n"
    )
    assert _verify(small, small, "--dim", "N=100").exit_code == 0
    fixed = _save(tmp_path, "fixed", SMALL.replace("float[N]", "float[1000]"))
    assert _verify(fixed, fixed).output.endswith("verify with your own inputs (--inputs)\n")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, a=np.ones(1000, np.float32))
    followed = _verify(fixed, fixed, "--inputs", inputs)
    assert followed.exit_code == 0, followed.output
