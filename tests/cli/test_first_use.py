"""What a new user meets first: external data, the output files and the summary, help and
choices, warnings on stderr, a quick `--version`, the Python API refusing typos, and the bench
script without its extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from cli_models import EXAMPLE, ROOT, linear_model
from onnx import TensorProto, helper
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app


def _with_external_data(folder: Path, elements: int = 4096) -> Path:
    path = folder / "ext.onnx"
    onnx.save(
        linear_model(elements),
        path,
        save_as_external_data=True,
        location="ext.onnx.data",
        size_threshold=0,
    )
    return path


def _run(*args: str, env: dict[str, str] | None = None):
    return CliRunner(env=env).invoke(app, list(args))


@pytest.mark.parametrize("command", ["optimize", "inspect", "verify"])
def test_a_missing_external_data_file_is_named_before_any_work(tmp_path, command):
    source = _with_external_data(tmp_path)
    (tmp_path / "ext.onnx.data").unlink()
    args = {
        "optimize": [str(source), str(tmp_path / "out.onnx")],
        "inspect": [str(source)],
        "verify": [str(source), str(source)],
    }[command]
    result = _run(command, *args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and line.endswith(
        f"external data file {tmp_path / 'ext.onnx.data'} not found"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext.onnx"]


def test_a_truncated_external_data_file_is_refused(tmp_path):
    source = _with_external_data(tmp_path)
    data = tmp_path / "ext.onnx.data"
    data.write_bytes(data.read_bytes()[:100])
    result = _run("optimize", str(source), str(tmp_path / "out.onnx"))
    assert result.exit_code == 2
    assert "is too short" in result.stderr and not (tmp_path / "out.onnx").exists()


def test_small_weights_get_no_weights_file(tmp_path):
    source = tmp_path / "small.onnx"
    onnx.save(linear_model(16), source)  # 64 bytes of weights
    out = tmp_path / "out.onnx"
    result = _run("optimize", "--external-data", str(source), str(out))
    assert result.exit_code == 0, result.output
    assert not list(tmp_path.glob("out.onnx*.data"))
    assert result.stdout.splitlines()[-1].startswith(f"wrote {out} (")
    assert "and its weights" not in result.stdout


def test_small_external_weights_come_back_inline(tmp_path):
    """An input whose small weights were stored apart: no flag asked for a weights file, and
    none would hold anything."""
    source = _with_external_data(tmp_path, elements=16)
    out = tmp_path / "out.onnx"
    result = _run("optimize", str(source), str(out))
    assert result.exit_code == 0, result.output
    assert not list(tmp_path.glob("out.onnx*.data"))
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_the_summary_names_the_weights_file_it_wrote(tmp_path):
    source = _with_external_data(tmp_path)  # the input's weights are apart: so are the output's
    out = tmp_path / "out.onnx"
    result = _run("optimize", str(source), str(out))
    assert result.exit_code == 0, result.output
    last = result.stdout.splitlines()[-1]
    (weights,) = tmp_path.glob("out.onnx.*.data")
    assert f"and its weights {weights} (16.4 kB)" in last
    assert "nodes 1 -> 1" in last and last.endswith(" s)")


def test_the_summary_gives_sizes_node_counts_and_time(tmp_path):
    out = tmp_path / "out.onnx"
    result = _run("optimize", str(EXAMPLE), str(out))
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"wrote {out} (") and "; input 17.0 kB; nodes 6 -> 3 (" in last


def test_the_output_argument_is_called_output(tmp_path):
    result = _run("optimize", str(EXAMPLE))
    assert "missing argument 'OUTPUT'" in result.stderr
    assert "OUTPUT" in _run("optimize", "--help").stdout


def test_an_output_path_error_names_the_output_only(tmp_path):
    out = tmp_path / "nodir" / "sub" / "out.onnx"
    result = _run("optimize", str(EXAMPLE), str(out))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {out}: output folder {out.parent} does not exist"


@pytest.mark.parametrize("command", [[], ["optimize"], ["inspect"], ["verify"], ["rules"]])
def test_dash_h_is_help(command):
    result = _run(*command, "-h")
    assert result.exit_code == 0 and result.stdout.startswith("Usage: seqlower")


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("optimize", "{SOURCE} {OUTPUT}"),
        ("inspect", "{MODEL}"),
        ("verify", "{ORIGINAL} {CANDIDATE}"),
    ],
)
def test_arguments_are_named_alike(command, usage):
    first = _run(command, "--help").stdout.splitlines()[0]
    # typer before 0.20 prints the arguments without braces
    plain = usage.replace("{", "").replace("}", "")
    assert first.endswith((f"[OPTIONS] {usage}", f"[OPTIONS] {plain}"))


def test_choices_are_listed_in_the_help():
    text = " ".join(_run("optimize", "--help").stdout.split())
    assert "--target [generic|portable|onnxruntime|tensorrt|openvino|tract]" in text
    assert "--split-keepdims [onnxruntime|spec]" in text
    assert "<str>" not in text


def test_inspect_help_names_every_tier():
    text = " ".join(_run("inspect", "--help").stdout.split())
    for tier in ("direct", "batch", "unroll", "scan", "loop", "kept", "flattened"):
        assert f"{tier} (" in text, tier


def test_warnings_go_to_stderr(tmp_path):
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
g (float[3,2] x) => (float[3,1,2] y) {
    one = Constant <value = int64 {1}> ()
    s = SplitToSequence <axis = 0, keepdims = 0> (x, one)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (s)
}""")
    source = tmp_path / "unbind.onnx"
    onnx.save(model, source)
    # the specification's reading, asked for: onnxruntime and PyTorch squeeze the axis
    args = [str(source), str(tmp_path / "out.onnx"), "--split-keepdims", "spec"]
    result = _run("optimize", *args)
    assert result.exit_code == 0
    assert "warning:" not in result.stdout
    assert "warning: SplitToSequence" in result.stderr


def test_rules_fit_the_terminal_and_markdown_is_asked_for():
    plain = _run("rules", env={"COLUMNS": "80"}).stdout.splitlines()
    assert plain and all(len(line) <= 80 for line in plain)
    assert plain[0] == "split-to-sequence (SplitToSequence)"
    assert _run("rules", "--markdown").stdout.startswith("| rule | operator | before -> after |")


def test_version_answers_without_importing_onnx():
    code = (
        "import sys; sys.argv = ['seqlower', '--version']; "
        "from seqlower._entry import main; main(); print('onnx' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.split("\n")[:2] == [f"seqlower {seqlower.__version__}", "False"]


def test_no_library_log_line_before_an_error(tmp_path):
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["x", "missing"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    source = tmp_path / "broken.onnx"
    onnx.save(model, source)
    for command in (["inspect", str(source)], ["verify", str(source), str(source)]):
        done = subprocess.run(
            [sys.executable, "-m", "seqlower", *command],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        assert "cannot be found in any scope" not in done.stderr, done.stderr


# -- the Python API ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"target": "tensorrtt"}, "unknown target 'tensorrtt': choose one of generic, portable"),
        ({"split_keepdims": "nope"}, "unknown split_keepdims 'nope': choose one of onnxruntime"),
        ({"targte": "tensorrt"}, "unknown option 'targte': choose one of split_keepdims"),
    ],
)
def test_python_refuses_what_the_command_line_refuses(options, message):
    with pytest.raises(seqlower.SeqlowerError) as raised:
        seqlower.optimize(str(EXAMPLE), **options)
    assert str(raised.value).startswith(message)
    option, value = next(iter(options.items()))
    if option != "targte":
        flag = f"--{option.replace('_', '-')}"
        cli = _run("optimize", flag, value, str(EXAMPLE), "out.onnx")
        assert cli.stderr.startswith(f"error: {raised.value}")


def test_python_judges_the_target_as_the_command_line_does(tmp_path):
    source = tmp_path / "in.onnx"  # a split of a tensor whose rank is known at run time only
    onnx.save(
        onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
g (float[4,3] v, int64[R] shape, int64 i) => (float[?,3] y) {
    x = Reshape (v, shape)
    s = SplitToSequence <axis = 0> (x)
    y = SequenceAt (s, i)
}"""),
        source,
    )
    _, report = seqlower.optimize(str(source), target="tensorrt")
    assert not report.fits_target and report.target_errors
    cli = _run("optimize", "--target", "tensorrt", str(source), str(tmp_path / "o.onnx"))
    assert cli.exit_code == 1
    printed = [line[4:] for line in cli.stderr.splitlines() if line.startswith("  - ")]
    assert printed == report.target_errors
    assert report.to_dict()["target"]["ok"] is False


# -- the bench script without the [bench] extra ----------------------------------------------


def test_the_bench_table_keeps_its_columns_when_onnxscript_is_missing():
    sys.path.insert(0, str(ROOT))
    try:
        from bench.run import _optimizer_header, _optimizer_line
    finally:
        sys.path.remove(str(ROOT))
    row = {
        "family": "dense",
        "nodes": 1000,
        "subgraphs": 10,
        "io": {"seconds": 0.05},
        "seqlower": {"seconds": 0.06},
        "onnxscript": {"skipped": "failed: ModuleNotFoundError: No module named 'onnxscript'"},
        "seqlower_vs_io": 1.2,
        "onnxscript_vs_seqlower": None,
    }
    line = _optimizer_line(row)
    assert "0.06  " in line and "0.06failed" not in line
    assert len(line) == len(_optimizer_header())
