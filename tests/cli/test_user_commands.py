"""A user's own commands, run as they run them (a child process): the documented submodules are
there after `import seqlower`, usage lines name arguments plainly, and `inspect --help` speaks of
inspect."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from cli_models import ROOT, linear_model


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
    for tier in ("direct", "batch", "unroll", "scan", "stacked", "ragged", "flat", "unranked",
                 "loop", "kept", "flattened"):  # fmt: skip
        assert f"{tier} (" in text, tier
    assert "accepts only that size" not in text  # optimize's --dim: inspect writes no model
    assert "exit 1" not in text and "fail (exit 1)" not in text  # inspect never exits 1
    assert "operators only" in text  # --target: no runtime is loaded
    assert "0 inspected" in text and "2 bad input" in text


# -- the target's verdict: the same from Python as from the command line -------------------------

LEN_OF_SPLIT = ROOT / "tests" / "fixtures" / "torch" / "len_of_split" / "model.onnx"
PAD_BATCH = ROOT / "tests" / "fixtures" / "torch_idioms" / "pad_batch" / "model.onnx"


def test_python_gives_the_command_lines_verdict_for_tract_when_asked(tmp_path) -> None:
    """The operators of the lowered len_of_split suit tract's profile, but tract cannot run
    it: the command line refuses it, and Python says its own check read the operators only,
    or, with runtime_check=True, refuses it in the command line's words."""
    pytest.importorskip("tract")
    done = seqlower("optimize", str(LEN_OF_SPLIT), str(tmp_path / "o.onnx"), "--target", "tract")
    assert done.returncode == 1, done.stderr
    refusal = [line[4:] for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert refusal and refusal[-1].startswith("tract fails")
    code = (
        "import seqlower, sys\n"
        f"_, static = seqlower.optimize({str(LEN_OF_SPLIT)!r}, target='tract')\n"
        "print(static.fits_target, static.target_check)\n"
        f"_, full = seqlower.optimize({str(LEN_OF_SPLIT)!r}, target='tract', runtime_check=True)\n"
        "print(full.fits_target, full.target_check)\n"
        "print(full.target_errors[-1])\n"
    )
    ran = python(code)
    assert ran.returncode == 0, ran.stderr
    static, full, error = ran.stdout.splitlines()
    assert static == "True operators"  # said plainly: the operators only
    assert full == "False operators and runtime"
    assert error == refusal[-1]


def test_inspect_says_its_target_check_read_the_operators_only() -> None:
    done = seqlower("inspect", str(LEN_OF_SPLIT), "--target", "tract")
    assert done.returncode == 0, done.stderr
    (verdict,) = [line for line in done.stdout.splitlines() if line.startswith("target tract:")]
    assert verdict.startswith("target tract: ok (operators only;")
    assert "seqlower optimize --target tract" in verdict


def test_target_errors_name_what_the_users_model_has(tmp_path) -> None:
    """pad_batch's Loops carry lists that became tensors the lowering named; the refusal names
    the node of the user's model each came from."""
    import onnx_ir as ir

    from seqlower.ops import iter_all_nodes

    names = {node.name for node in iter_all_nodes(ir.load(PAD_BATCH))}
    done = seqlower("optimize", str(PAD_BATCH), str(tmp_path / "o.onnx"), "--target", "tensorrt")
    assert done.returncode == 1, done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert any("carries a value made from '/SequenceInsert'" in p for p in problems), problems
    for problem in problems:
        for quoted in re.findall(r"made from '([^']+)'", problem):
            assert quoted in names, (quoted, problem)
        assert "_data'" not in problem


def test_warnings_name_loops_the_lowering_made_by_the_users_node() -> None:
    """tract's lowering makes a scan Loop of rnn_index_loop's Loop, then a Scan of that: the
    warning about the Scan names the Loop of the user's model, not the one made and replaced."""
    import onnx_ir as ir

    import seqlower as seqlower_api
    from seqlower.ops import iter_all_nodes

    fixture = ROOT / "tests" / "fixtures" / "torch" / "rnn_index_loop" / "model.onnx"
    names = {node.name for node in iter_all_nodes(ir.load(fixture))}
    _, report = seqlower_api.optimize(fixture, target="tract")
    scans = [w for w in report.warnings if "became a Scan" in w]
    assert scans, report.warnings
    for warning in scans:
        assert warning.startswith("Loop made from '/Loop' became a Scan"), warning
        for quoted in re.findall(r"Loop '([^']+)'", warning):
            assert quoted in names, (quoted, warning)


# -- every name the summary counts is one `seqlower rules` lists ---------------------------------

# every PyTorch export, the ones seqlower was not tuned on included
FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*/*/model.onnx"))


def test_every_rule_the_summary_names_is_listed_by_seqlower_rules(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    import seqlower as seqlower_api
    from seqlower.cli import app
    from seqlower.cli.summary import format_summary

    listed = seqlower("rules", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {entry["name"] for entry in json.loads(listed.stdout)}
    seen = set()
    for fixture in [*FIXTURES, ROOT / "examples" / "split_map_concat.onnx"]:
        for target in ("generic", "onnxruntime", "tract"):
            if target == "tract":  # the same summary, without loading each model in tract
                _, report = seqlower_api.optimize(fixture, target=target)
                printed = format_summary(report, str(fixture), "o.onnx", 0.0)
            else:
                args = ["optimize", str(fixture), str(tmp_path / "o.onnx"), "--target", target]
                result = CliRunner().invoke(app, args)
                assert result.exit_code == 0, (fixture, target, result.output)
                printed = result.stdout
            for line in printed.replace("\n    ", " ").splitlines():  # wrapped lines joined
                if line.startswith("rules fired: "):
                    fired = {item.rsplit(" x", 1)[0] for item in line[13:].split(", ")}
                    assert fired <= names, (fixture, target, fired - names)
                    seen |= fired
    # the passes' own rewrites, which no rule makes, are among them
    assert {"tensor-list", "loop-condition-passthrough"} <= seen


# -- PyTorch's unbind: lowered as PyTorch meant it, without a warning -----------------------------


@pytest.mark.parametrize("fixture", ["unbind_stack", "rnn_unbind_loop", "list_insert_pop"])
def test_an_unbind_export_lowers_without_a_warning(tmp_path, fixture: str) -> None:
    source = ROOT / "tests" / "fixtures" / "torch" / fixture / "model.onnx"
    done = seqlower("optimize", str(source), str(tmp_path / "o.onnx"))
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    assert "--split-keepdims" not in done.stdout + done.stderr


def test_the_spec_reading_of_unbind_is_said_with_the_node(tmp_path) -> None:
    source = ROOT / "tests" / "fixtures" / "torch" / "unbind_stack" / "model.onnx"
    out = tmp_path / "o.onnx"
    done = seqlower("optimize", str(source), str(out), "--split-keepdims", "spec")
    assert done.returncode == 0, done.stderr
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert "SplitToSequence '/SplitToSequence'" in warning
    assert "onnxruntime and PyTorch squeeze it" in warning


# -- the summary: costs said, sizes true, lines short -------------------------------------------

LEN_NEG_INDEX = ROOT / "tests" / "fixtures" / "torch" / "len_neg_index" / "model.onnx"


def test_the_default_says_when_lowering_costs_more_and_the_option_it_names_keeps_it(tmp_path):
    """`xs = x.split(2, 0); xs[-1] * len(xs)`: its tensor form takes more operator launches in
    onnxruntime; optimize and inspect say so, and the option named keeps the region."""
    out = tmp_path / "o.onnx"
    done = seqlower("optimize", str(LEN_NEG_INDEX), str(out))
    assert done.returncode == 0, done.stderr
    note = done.stdout.replace("\n    ", " ")
    assert (
        "note: the region of SplitToSequence '/SplitToSequence' costs more as tensors (9 vs 7 "
        "operator launches per run; 9 vs 5 on small inputs, estimated); --target onnxruntime "
        "keeps it as given"
    ) in note
    inspected = seqlower("inspect", str(LEN_NEG_INDEX))
    assert inspected.returncode == 0, inspected.stderr
    assert "--target onnxruntime keeps it as given" in inspected.stdout.replace("\n    ", " ")
    followed = seqlower("optimize", str(LEN_NEG_INDEX), str(out), "--target", "onnxruntime")
    assert followed.returncode == 0, followed.stderr
    assert "kept as given for speed: the region of SplitToSequence" in followed.stdout
    assert "note:" not in followed.stdout
    cheaper = seqlower("optimize", str(ROOT / "examples" / "split_map_concat.onnx"), str(out))
    assert "note:" not in cheaper.stdout  # lowered and cheaper: nothing to say


def _linear_with_weights(folder, elements: int, external: bool):
    import onnx

    model = linear_model(elements)
    path = folder / "in.onnx"
    if external:
        onnx.save(model, path, save_as_external_data=True, location="in.onnx.data")
    else:
        onnx.save(model, path)
    return path


def test_the_input_size_counts_its_external_weights(tmp_path) -> None:
    source = _linear_with_weights(tmp_path, 4096, external=True)  # 16 kB of weights apart
    done = seqlower("optimize", str(source), str(tmp_path / "o.onnx"))
    assert done.returncode == 0, done.stderr
    (written,) = [line for line in done.stdout.splitlines() if line.startswith("wrote ")]
    total = source.stat().st_size + (tmp_path / "in.onnx.data").stat().st_size
    assert f"; input {total / 1000:.1f} kB;" in written
    assert "and its weights" in written


def test_external_data_with_small_weights_writes_no_weights_file_and_says_so(tmp_path) -> None:
    source = _linear_with_weights(tmp_path, 16, external=False)  # 64 bytes of weights
    out = tmp_path / "o.onnx"
    done = seqlower("optimize", str(source), str(out), "--external-data")
    assert done.returncode == 0, done.stderr
    assert out.is_file() and not list(tmp_path.glob("o.onnx*.data"))
    (written,) = [line for line in done.stdout.splitlines() if line.startswith("wrote ")]
    assert "no weights file (no weight of 1 kB or more)" in written


def test_summary_lines_stay_short_with_long_labels(tmp_path) -> None:
    """Four kept operators with long names in a nested graph, kept for one reason: the reason
    is said once, each operator under it, long labels cut in the middle."""
    import onnx

    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[4,3,4] V, int64[R] shape, int64 k, float[2,3,4] X, float[1,3,4] Y, int64 p)
        => (float[?,3,4] out) {
        W = Reshape (V, shape)
        s0 = SplitToSequence <axis = 1> (W, k)
        s1 = SequenceInsert (s0, X)
        s2 = SequenceInsert (s1, Y)
        out = SequenceAt (s2, p)
    }""")
    long = "/model/encoder/layers.11/self_attention/rotary_embedding/" + "x" * 60
    for node, name in zip(model.graph.node[1:], ["split", "insert_a", "insert_b", "at"]):
        node.name = f"{long}/{name}"
    source = tmp_path / "long.onnx"
    onnx.save(model, source)
    done = seqlower("optimize", str(source), str(tmp_path / "o.onnx"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines[1:-1]), [x for x in lines if len(x) > 100]
    text = done.stdout.replace("\n    ", " ")
    assert "kept 3 sequence ops: SplitToSequence '/model/encoder" in text
    assert text.count("stays: the rank of the input is unknown") == 1
    kept = [line for line in lines if line.startswith("  Sequence") and "'" in line]
    assert len(kept) == 3 and all("..." in line and line.endswith(" in main") for line in kept)


# -- print(report) reads like the command line's summary -----------------------------------------


def test_print_report_reads_like_the_summary(tmp_path) -> None:
    done = seqlower("optimize", str(LEN_NEG_INDEX), str(tmp_path / "o.onnx"))
    assert done.returncode == 0, done.stderr
    ran = python(f"import seqlower; print(seqlower.optimize({str(LEN_NEG_INDEX)!r}).report)")
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout.splitlines()
    summary = done.stdout.splitlines()
    assert printed[0].startswith("sequence ops 5 -> 0 (fixpoint: no rule applies; ")
    assert printed[0].endswith(" sweeps)")  # no paths and no time: nothing was written
    assert printed[1:] == summary[2:-1]  # the rest as the command line prints it
    assert "Report(" not in ran.stdout and len(ran.stdout) < 2000


def test_print_report_gives_the_target_verdict_and_how_it_was_reached() -> None:
    code = f"import seqlower; print(seqlower.optimize({str(LEN_OF_SPLIT)!r}, target='tensorrt')[1])"
    ran = python(code)
    assert ran.returncode == 0, ran.stderr
    assert "target tensorrt: ok" in ran.stdout.splitlines()
    code = f"import seqlower; print(seqlower.optimize({str(LEN_OF_SPLIT)!r}, target='tract')[1])"
    ran = python(code)
    assert "target tract: ok (operators only; runtime_check=True also loads it" in ran.stdout
