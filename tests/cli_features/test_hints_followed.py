"""Every hint the command line prints makes progress when followed.

For a set of models (the first ones a new user meets: PyTorch exports, the example, small
models with sequence inputs and outputs), `seqlower optimize` runs with each target that reports
leftovers; every `try ...` it prints (summary, `--target` errors, `--strict`) and every hint
`seqlower inspect` prints is then followed, with concrete values for its placeholders, and the
result must be better: fewer sequence ops or sequence inputs/outputs left, or a refusal that
became a success. No reason may name a node the user's model does not have.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from cli_features.models import map_over_split, sequence_interface
from cli_features.newcomer_models import split_loop_sum
from seqlower.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
_TRY = re.compile(r"try ((?:--[a-z-]+(?: (?!--)[^\s(),;]+)?\s?)+)")
_QUOTED = re.compile(r"\b([A-Z][A-Za-z]+) '([^']+)'")


def _models() -> dict[str, onnx.ModelProto | Path]:
    models: dict[str, onnx.ModelProto | Path] = {
        "split_loop_sum": split_loop_sum(),
        "map_over_split": map_over_split("N", body_out="float[1,K]", else_width=8),
        "sequence_interface": sequence_interface(),
    }
    for folder in ("torch", "torch_loops"):
        for case in sorted((FIXTURES / folder).glob("*/model.onnx")):
            models[f"{folder}/{case.parent.name}"] = case
    return models


MODELS = _models()


def _path(name: str, tmp_path: Path) -> Path:
    model = MODELS[name]
    if isinstance(model, Path):
        return model
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def _run(args: list[str], tmp_path: Path) -> tuple[int, str, dict | None]:
    """Exit code, what was printed, and the report (None when none was written)."""
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    result = CliRunner().invoke(app, [*args, "--report", str(report)])
    text = result.stdout + result.stderr
    assert "Traceback" not in text
    return result.exit_code, text, json.loads(report.read_text()) if report.exists() else None


def _left(report: dict | None) -> int:
    """Sequence ops plus sequence inputs/outputs left (the refused runs write a report too)."""
    if report is None:
        return 1 << 30
    kept_io = [
        n for n in report["nodes"] if n["op_type"] in ("input", "output") and n["tier"] == "kept"
    ]
    return report["total_after"] + len(kept_io)


def _concrete(flags: str) -> list[str]:
    """A hint's options with its placeholders filled: sizes 6, sequence lengths 2."""
    words = flags.replace("<size>", "6").replace("<n>", "2").split()
    return words


def _hints(text: str) -> list[list[str]]:
    found = []
    for match in _TRY.finditer(text):
        flags = _concrete(match.group(1))
        if flags not in found:
            found.append(flags)
    if "--target portable lowers it even so" in text:
        found.append(["--target", "portable"])
    return found


def _merged(args: list[str], flags: list[str]) -> list[str]:
    """`args` with `flags` added; a `--target` in the hint replaces the one given."""
    if "--target" in flags and "--target" in args:
        at = args.index("--target")
        args = args[:at] + args[at + 2 :]
    return [*args, *flags]


def _input_names(path: Path) -> set[str]:
    model = onnx.load(path, load_external_data=False)
    names = {n.name for g in _graphs(model.graph) for n in g.node}
    return names


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from _graphs(sub)


@pytest.mark.parametrize("target", ["generic", "portable", "tensorrt"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_printed_hint_makes_progress(name, target, tmp_path):
    source = _path(name, tmp_path)
    args = ["optimize", str(source), str(tmp_path / "out.onnx"), "--target", target]
    code, text, report = _run(args, tmp_path)
    assert code in (0, 1), text
    inspected = CliRunner().invoke(app, ["inspect", str(source), "--target", target])
    assert inspected.exit_code in (0, 1), inspected.stdout + inspected.stderr
    hints = _hints(text) + [h for h in _hints(inspected.stdout) if h not in _hints(text)]
    for flags in hints:
        assert _progresses(args, flags, code, _left(report), tmp_path), (
            f"{' '.join(flags)} made no progress:\n{text}"
        )


def _progresses(args, flags, code, left, tmp_path, depth=0) -> bool:
    """Following `flags` gives fewer sequence ops or inputs/outputs left than `left`, or
    success where `code` was a refusal; or, where it leads to a new hint (a speed-first target
    that keeps the original because the lowering asked for costs more says so), following
    that one does."""
    followed = _merged(args, flags)
    again, text, report = _run(followed, tmp_path)
    assert again in (0, 1), text
    if (code != 0 and again == 0) or _left(report) < left:
        return True
    return depth < 1 and any(
        _progresses(followed, more, code, left, tmp_path, depth + 1)
        for more in _hints(text)
        if more != flags
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_reason_names_a_node_the_model_does_not_have(name, tmp_path):
    source = _path(name, tmp_path)
    names = _input_names(source)
    for target in ("portable", "onnxruntime"):
        args = ["optimize", str(source), str(tmp_path / "out.onnx"), "--target", target]
        _, text, report = _run(args, tmp_path)
        texts = [text]
        if report is not None:
            texts += [op["reason"] for op in report["remaining"]]
            texts += [r for op in report["remaining"] for r in op["reasons"]]
        for line in texts:
            for op_type, node in _QUOTED.findall(line):
                if op_type in ("SequenceAt", "SequenceInsert", "SplitToSequence", "Loop", "If"):
                    label = node.split("#")[0]
                    assert label in names or node.endswith(")") or label == op_type, (
                        f"{op_type} '{node}' is not a node of {name}:\n{line}"
                    )


def test_the_split_loop_model_lowers_fully_for_a_portable_target(tmp_path):
    """The model of a loop over `x.split(3, 0)` summing each chunk: the body's ReduceSum reads
    its axes from the main graph, which once lost the rank of everything after it."""
    source = _path("split_loop_sum", tmp_path)
    out = tmp_path / "out.onnx"
    code, text, report = _run(
        ["optimize", str(source), str(out), "--target", "portable", "--verify"], tmp_path
    )
    assert code == 0, text
    assert report["total_after"] == 0 and "verified: equivalent" in text
