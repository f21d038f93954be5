"""`seqlower verify`: table on stdout, JSON report, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import typer
from typer.testing import CliRunner

from seqlower.cli.verify_command import verify_command

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'
SEQ = (
    HEADER
    + """g (float[N, 3] x, float[N, 3] y) => (float[N, 6] z) {
    s = SequenceConstruct(x, y)
    z = ConcatFromSequence<axis = 1>(s)
}"""
)
CONCAT = (
    HEADER + "g (float[N, 3] x, float[N, 3] y) => (float[N, 6] z) { z = Concat<axis = 1>(x, y) }"
)
SWAPPED = (
    HEADER + "g (float[N, 3] x, float[N, 3] y) => (float[N, 6] z) { z = Concat<axis = 1>(y, x) }"
)


@pytest.fixture
def paths(tmp_path):
    result = {}
    for name, text in {"seq": SEQ, "concat": CONCAT, "swapped": SWAPPED}.items():
        result[name] = str(tmp_path / f"{name}.onnx")
        onnx.save(onnx.parser.parse_model(text), result[name])
    return result


def _invoke(*args: str):
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("other")(lambda: None)  # two commands: "verify" stays a subcommand
    return CliRunner().invoke(app, ["verify", *args])


def test_equivalent_exits_0_with_a_table_and_a_report(paths, tmp_path):
    report = tmp_path / "report.json"
    result = _invoke(paths["seq"], paths["concat"], "--dim", "N=5", "--report", str(report))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = "trial output shape dtype max abs err max rel err verdict"
    assert lines[0].split() == header.split()
    assert lines[1].split() == ["0", "z", "[5,", "6]", "float32", "0", "0", "ok"]
    assert lines[-2:] == [
        "coverage (seed 0): dims 5",
        "equivalent (17 trials compared); NaN counts as equal to NaN",  # 16 and one edge (x == y)
    ]
    data = json.loads(report.read_text())
    assert data["equivalent"] is True and data["settings"]["dims"] == {"N": 5}
    assert data["coverage"]["dims"] == {"N": [5]}


def test_not_equivalent_exits_1(paths, tmp_path):
    report = tmp_path / "report.json"
    result = _invoke(paths["seq"], paths["swapped"], "--trials", "1", "--report", str(report))
    assert result.exit_code == 1
    assert "values differ" in result.stdout
    assert "NOT equivalent:" in result.stdout
    assert json.loads(report.read_text())["equivalent"] is False


def test_reference_column(paths):
    result = _invoke(paths["seq"], paths["concat"], "--trials", "1", "--reference")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].split()[-1] == "reference"
    assert result.stdout.splitlines()[1].split()[-1] == "agrees"


def test_supplied_inputs(paths, tmp_path):
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.ones((2, 3), np.float32), y=np.zeros((2, 3), np.float32))
    assert _invoke(paths["seq"], paths["swapped"], "--inputs", str(inputs)).exit_code == 1
    assert _invoke(paths["seq"], paths["concat"], "--inputs", str(inputs)).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.onnx"], "missing.onnx: no such file"),
        (["--dim", "N"], "--dim expects name=size"),
        (["--dim", "Q=2"], "dimension 'Q' does not appear"),
        (["--inputs", "nowhere.npz"], "nowhere.npz: no such file or folder"),
        (["--report", "no/such/dir/r.json"], "cannot write the report"),
    ],
)
def test_bad_input_exits_2_with_one_line(paths, args, message):
    if args == ["missing.onnx"]:
        result = _invoke(paths["seq"], "missing.onnx")
    else:
        result = _invoke(paths["seq"], paths["concat"], *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.ones((2, 3), np.float64), "y": np.ones((2, 3), np.float32)}, "input 'x' needs"),
        ({"x": np.ones((2, 3), np.float32), "y": np.ones((2, 4), np.float32)}, "input 'y' needs"),
        ({"x": np.ones(3, np.float32), "y": np.ones((2, 3), np.float32)}, "input 'x' needs"),
        (None, "not an .npz file (not a zip archive)"),
    ],
    ids=["dtype", "static-dim", "rank", "not-npz"],
)
def test_wrong_supplied_inputs_exit_2_with_one_line_naming_the_input(
    paths, tmp_path, arrays, message
):
    inputs = tmp_path / "inputs.npz"
    if arrays is None:
        inputs.write_bytes(b"\x80\x04K\x01.")  # a pickle
    else:
        np.savez(inputs, **arrays)
    result = _invoke(paths["seq"], paths["concat"], "--inputs", str(inputs))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {inputs}: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "pickle" not in result.stderr


LOOP = (
    HEADER
    + """g (int64 n, float[2] x) => (float[2] y) {
    y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = Add(v, v)
    }>
}"""
)


def test_the_iterations_of_each_loop_are_summed_up_and_in_the_report(tmp_path):
    path = str(tmp_path / "loop.onnx")
    onnx.save(onnx.parser.parse_model(LOOP), path)
    report = tmp_path / "report.json"
    result = _invoke(path, path, "--report", str(report))
    assert result.exit_code == 0, result.output
    assert "coverage (seed 0): Loop trip counts 0..8" in result.stdout.splitlines()
    data = json.loads(report.read_text())
    assert data["coverage"]["loops"] == {"Loop #0": [0, 1, 2, 3, 4, 5, 6, 7, 8]}
    assert [trial["loops"] for trial in data["trials"][:3]] == [
        {"Loop #0": "3 iterations"},
        {"Loop #0": "1 iteration"},
        {"Loop #0": "0 iterations"},
    ]


def _optimize(*args: str):
    from seqlower.cli.app import app

    return CliRunner().invoke(app, ["optimize", *args])


def test_a_dim_the_candidate_fixes_is_bound_and_a_wrong_one_is_explained(paths, tmp_path):
    fixed = str(tmp_path / "fixed.onnx")
    assert _optimize(paths["seq"], fixed, "--dim", "N=10").exit_code == 0
    result = _invoke(paths["seq"], fixed)
    assert result.exit_code == 0, result.output
    assert "N is 10 in every trial: the candidate's input 'x' fixes it" in result.stdout
    assert "coverage (seed 0): dims 10" in result.stdout
    # another size: the whole runtime message, and the --dim that matches the candidate
    wrong = _invoke(paths["seq"], fixed, "--dim", "N=3")
    assert wrong.exit_code == 1
    assert "index: 0 Got: 3 Expected: 10" in wrong.stdout
    hint = "(--dim N=10 matches it)"
    assert hint in wrong.stdout
    followed = _invoke(paths["seq"], fixed, "--dim", "N=10")
    assert followed.exit_code == 0, followed.output


ONLY_SIX = (
    HEADER
    + """g (float[N] x) => (float[2, 3] y) {
    shape = Constant<value = int64[2] {2, 3}>()
    y = Reshape(x, shape)
}"""
)


def test_too_few_compared_trials_exit_2_with_a_hint_that_works(tmp_path):
    path = str(tmp_path / "six.onnx")
    onnx.save(onnx.parser.parse_model(ONLY_SIX), path)
    result = _invoke(path, path)
    assert result.exit_code == 2, result.output
    lines = result.stdout.splitlines()
    assert "inconclusive:" in lines
    assert "  - no trial ran both models to completion: nothing was compared" in lines
    assert any(
        line.startswith("  - trials 0, 9: both failed: [ONNXRuntimeError]") for line in lines
    )
    hint = "  give --dim N=SIZE with a size both models accept, or --inputs with inputs they "
    assert lines[-1].startswith(hint)
    followed = _invoke(path, path, "--dim", "N=6")
    assert followed.exit_code == 0, followed.output
    assert followed.stdout.splitlines()[-1].startswith("equivalent (16 trials compared")


NEVER = (
    HEADER
    + """g (float[N, 3] x) => (float[N, 3] y) {
    total = ReduceSum<keepdims = 0>(x)
    magic = Constant<value = float {12345.5}>()
    hit = Equal(total, magic)
    y = If(hit) <then_branch = t () => (float[N, 3] a) { a = Neg(x) },
                 else_branch = e () => (float[N, 3] b) { b = Identity(x) }>
}"""
)


def test_an_untaken_branch_warns_and_fails_with_strict_coverage(tmp_path):
    path = str(tmp_path / "never.onnx")
    onnx.save(onnx.parser.parse_model(NEVER), path)
    result = _invoke(path, path, "--seed", "7")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-3:] == [
        "coverage (seed 7): If: 1/2 branches, dims 0..8",
        "warning: If #0: no trial took its then branch",
        "equivalent (17 trials compared); NaN counts as equal to NaN",  # 16 and one edge (ties)
    ]
    strict = _invoke(path, path, "--strict-coverage")
    assert strict.exit_code == 1
    assert strict.stdout.splitlines()[-2:] == [
        "NOT equivalent:",
        "  - If #0: no trial took its then branch (--strict-coverage)",
    ]


def test_the_time_budget_stops_starting_trials(paths):
    result = _invoke(paths["seq"], paths["concat"], "--time-budget", "0")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        "stopped after 1 of 16 trials: the time budget ran out (--time-budget gives more)" in lines
    )
    assert lines[-1] == "equivalent (1 trial compared); NaN counts as equal to NaN"
    assert _invoke(paths["seq"], paths["concat"], "--time-budget", "-1").exit_code == 2


def test_optimize_verify_is_inconclusive_with_a_hint_that_works(tmp_path):
    source, target = tmp_path / "six.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(ONLY_SIX), source)
    result = _optimize(str(source), str(target), "--verify")
    assert result.exit_code == 2
    assert "verification inconclusive: both models failed on too many generated inputs" in (
        result.stderr
    )
    assert not target.exists()
    followed = _optimize(str(source), str(target), "--verify", "--dim", "N=6")
    assert followed.exit_code == 0, followed.output
    assert "verified: equivalent under onnxruntime (16 trials compared; dims 6)" in followed.stdout
    written = tmp_path / "written.onnx"
    assert _optimize(str(source), str(written)).exit_code == 0
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.arange(6, dtype=np.float32))
    assert _invoke(str(source), str(written), "--inputs", str(inputs)).exit_code == 0


# onnxruntime refuses to load this at session creation (an integer division by a constant 0),
# though the ONNX checker passes it: nothing can be compared with it
UNLOADABLE = (
    HEADER
    + """g (int64[N, 3] x, int64[N, 3] y) => (int64[N, 6] z) {
    zero = Constant<value = int64 {0}>()
    q = Div(x, zero)
    s = SequenceConstruct(q, y)
    z = ConcatFromSequence<axis = 1>(s)
}"""
)


def test_an_original_onnxruntime_cannot_load_is_inconclusive_not_a_difference(tmp_path):
    import onnxruntime

    from seqlower.cli.app import app

    source, lowered = tmp_path / "unloadable.onnx", tmp_path / "lowered.onnx"
    onnx.save(onnx.parser.parse_model(UNLOADABLE), source)
    try:  # onnxruntime 1.20 loads it (and crashes running it): only a refusal to load is tested
        onnxruntime.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    except Exception:  # any refusal to load
        pass
    else:
        pytest.skip(f"onnxruntime {onnxruntime.__version__} loads a division by a constant 0")
    written = CliRunner().invoke(app, ["optimize", "-q", str(source), str(lowered)])
    assert written.exit_code == 0, written.output  # the hint below: without --verify it is written
    verified = CliRunner().invoke(
        app, ["optimize", "-q", "--verify", str(source), str(tmp_path / "v.onnx")]
    )
    assert verified.exit_code == 2, verified.output
    last = verified.stderr.strip().splitlines()[-1]
    assert last.startswith("error: verification inconclusive: onnxruntime cannot load the input")
    assert "without --verify the lowered model is written unverified" in last
    assert not (tmp_path / "v.onnx").exists()
    result = _invoke(str(source), str(lowered))
    assert result.exit_code == 2, result.output
    assert "onnxruntime cannot load the original model: nothing can be compared" in result.output
    assert "NOT equivalent" not in result.output
