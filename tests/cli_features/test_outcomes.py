"""inspect and optimize agree by construction, on every model the project ships: the PyTorch
fixtures, the examples and ONNX's conformance cases with sequences. Every hint is followed and
must change what it is about; `--strict` and `--target tensorrt` agree on what remains."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import onnx
import pytest
from conformance.test_onnx_backend import CASES as CONFORMANCE
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app
from seqlower.errors import SeqlowerError
from seqlower.inspect import inspect_model
from seqlower.ops import SEQUENCE_OPS, is_sequence_value
from seqlower.passes.legality import count_sequence_ops

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    **{
        f"torch/{path.parent.name}": path
        for path in sorted((ROOT / "tests" / "fixtures" / "torch").glob("*/model.onnx"))
    },
    **{f"examples/{path.stem}": path for path in sorted((ROOT / "examples").glob("*.onnx"))},
}
MODELS = sorted([*FILES, *(f"conformance/{name}" for name in CONFORMANCE)])


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("conformance")
    paths = dict(FILES)
    for name, case in CONFORMANCE.items():
        paths[f"conformance/{name}"] = folder / f"{name}.onnx"
        onnx.save(case.model, paths[f"conformance/{name}"])
    return paths


def test_every_kind_of_model_is_covered():
    assert sum(name.startswith("torch/") for name in MODELS) == 22
    assert sum(name.startswith("examples/") for name in MODELS) >= 1
    assert sum(name.startswith("conformance/") for name in MODELS) == len(CONFORMANCE) >= 30


@pytest.mark.parametrize("name", MODELS)
def test_inspect_and_optimize_agree_node_by_node(name, saved):
    path = saved[name]
    inspected = inspect_model(path)
    lowered, report = seqlower.optimize(path)
    assert inspected.sites == report.nodes

    # the per-node outcomes account for what optimize reports as a whole
    kept_ops = [s for s in report.nodes if s.tier == "kept" and s.op_type in SEQUENCE_OPS]
    assert sorted(s.node for s in kept_ops) == sorted(op.node for op in report.remaining)
    assert collections.Counter(s.op_type for s in kept_ops) == report.sequence_ops_after
    assert report.sequence_ops_after == count_sequence_ops(lowered)
    fired = collections.Counter(rule for s in report.nodes for rule in s.rules)
    assert all(fired[rule] <= count for rule, count in report.rules_fired.items())
    assert set(fired) <= set(report.rules_fired)
    for site in report.nodes:
        assert (site.tier == "kept") == bool(site.reason), site
        if site.tier not in ("kept", "flattened") and site.op_type not in ("input", "output"):
            # a node removed without a rule of its own takes the tier of its readers: a list's
            # layout too, where the loop that absorbed it then carries tensors
            absorbed = ("direct", "batch", "unroll", "scan", "loop", "stacked", "ragged", "flat")
            assert site.rules or site.tier in absorbed
    labels = [(s.graph, s.node) for s in report.nodes if s.op_type not in ("input", "output")]
    assert len(labels) == len(set(labels)), "a label names one node"


@pytest.mark.parametrize(
    "name",
    [
        "examples/split_map_concat",
        "conformance/test_sequence_model1",
        "conformance/test_sequence_map_identity_2_sequences",
    ],
)
def test_the_commands_print_the_same_outcomes(name, saved, tmp_path):
    runner = CliRunner()
    inspected = runner.invoke(app, ["inspect", str(saved[name]), "--json"])
    assert inspected.exit_code == 0, inspected.output
    report = tmp_path / "report.json"
    args = ["optimize", str(saved[name]), str(tmp_path / "out.onnx"), "--report", str(report)]
    optimized = runner.invoke(app, [*args, "-q"])
    assert optimized.exit_code == 0, optimized.output
    nodes = json.loads(report.read_text())["nodes"]
    assert json.loads(inspected.stdout)["sites"] == nodes
    assert nodes, "every one of these models has sequence nodes"


def test_the_shipped_example_is_batched_whole():
    (path,) = [FILES["examples/split_map_concat"]]
    report = inspect_model(path)
    assert [(s.op_type, s.tier, s.rules) for s in report.sites] == [
        ("SplitToSequence", "batch", ()),
        ("SequenceMap", "batch", ("sequence-map-batch",)),
        ("ConcatFromSequence", "batch", ()),
    ]
    # the example maps over x.split(1): the batched body runs without the chunks' unit axis
    assert report.lowering.rules_fired == {"sequence-map-batch": 1, "unit-axis-round-trip": 1}


# -- hints are followed ------------------------------------------------------------------------


def _options_from(hint: str, model: onnx.ModelProto) -> dict[str, object]:
    """The options a hint names, with sizes filled in: 2 elements, or 6 for a dim (it divides
    the split sizes the fixtures use)."""
    flags = hint.split(" (", 1)[0]
    options: dict[str, object] = {}
    if "--dim" in flags:
        options["dims"] = {name: 6 for name in re.findall(r"--dim (\w+)=<size>", flags)}
    if "--flatten-sequence-io" in flags:
        options["flatten_sequence_io"] = True
        options["seq_lens"] = {n: 2 for n in re.findall(r"--seq-len ([^=\s]+)=<n>", flags)}
    return options


def _hinted(name: str, saved: dict[str, Path]) -> list[tuple[str, str, str]]:
    report = inspect_model(saved[name], target="portable")
    return [(s.node, s.op_type, s.hint) for s in report.kept if s.hint]


HINTED = [name for name in MODELS if not name.startswith("examples/")]


@pytest.mark.parametrize("name", HINTED)
def test_following_a_hint_lowers_what_it_is_about(name, saved):
    path = saved[name]
    model = onnx.load(path)
    for node, op_type, hint in _hinted(name, saved):
        options = _options_from(hint, model)
        assert options, f"{node}: the hint names no option: {hint}"
        try:
            after = inspect_model(path, target="portable", **options)
        except SeqlowerError as error:  # a size the model's data rejects is a test choice
            pytest.fail(f"{node}: following '{hint}' failed: {error}")
        still = [s for s in after.kept if s.node == node and s.op_type == op_type]
        assert not still, f"{node} ({op_type}) is still kept after '{hint}': {still[0].reason}"


def test_the_wrong_dim_hint_of_issue_14_is_gone(saved):
    report = inspect_model(saved["conformance/test_sequence_map_identity_2_sequences"])
    hints = {site.hint for site in report.kept}
    assert not any("--dim" in hint for hint in hints)
    assert any("--seq-len x0=<n> --seq-len x1=<n>" in hint for hint in hints)


# -- what counts as remaining -------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_strict_and_tensorrt_agree_on_what_remains(name, saved, tmp_path):
    path = saved[name]
    runner = CliRunner()
    out = str(tmp_path / "out.onnx")
    # both ask for portability; the speed-first default may keep an original (never slower)
    strict = runner.invoke(app, ["optimize", str(path), out, "--strict", "--target", "portable"])
    tensorrt = runner.invoke(app, ["optimize", str(path), out, "--target", "tensorrt", "-q"])
    sequence_errors = [
        line
        for line in tensorrt.stderr.splitlines()
        if "sequence" in line and "scan output" not in line and line.startswith("  - ")
    ]
    lowered, report = seqlower.optimize(path, target="portable")
    interface = [v for v in (*lowered.graph.inputs, *lowered.graph.outputs) if is_sequence_value(v)]
    remains = bool(report.remaining or interface)
    assert (strict.exit_code == 1) == remains, strict.stderr
    assert bool(sequence_errors) == remains, tensorrt.stderr
    assert len(report.kept_interface) == len(interface)


def test_a_run_time_read_position_still_gets_the_hint_that_works():
    from support import parse

    model = parse("""
agraph (seq(float[2,3]) s, int64 pos) => (float[2,3] y) {
  y = SequenceAt (s, pos)
}""")
    (at,) = [site for site in inspect_model(model).kept if site.op_type == "SequenceAt"]
    assert at.hint.startswith("--flatten-sequence-io --seq-len s=<n> (")
    followed = inspect_model(model, **_options_from(at.hint, model))
    assert followed.kept == [] and followed.lowering.total_after == 0


def test_a_run_time_insert_position_blocks_the_hint_unless_the_elements_share_a_shape():
    from support import parse

    text = """
agraph (seq(float{elements}) s, float[2,3] x, int64 pos) => (float[6,3] y) {{
  t = SequenceInsert (s, x, pos)
  y = ConcatFromSequence <axis=0> (t)
}}"""
    for elements, helps in (("[2,3]", True), ("[M,3]", False)):
        model = parse(text.format(elements=elements))
        (insert,) = [s for s in inspect_model(model).kept if s.op_type == "SequenceInsert"]
        if not helps:  # a Where cannot pick among elements of different shapes
            assert insert.hint == ""
            continue
        assert insert.hint.startswith("--flatten-sequence-io --seq-len s=<n> (")
        followed = inspect_model(model, **_options_from(insert.hint, model))
        assert followed.lowering.total_after == 0
