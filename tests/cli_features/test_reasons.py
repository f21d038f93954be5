"""What a kept operator is called and why it stays, as the user sees it (issue 14, items 4 and 6):
one label for an unnamed node in every output, the one reason that matters with a hint, every
refusal under `-v` and in the JSON, and a count line that explains a SequenceMap's expansion."""

from __future__ import annotations

import json

import onnx
import pytest
from conformance.test_onnx_backend import CASES as CONFORMANCE
from typer.testing import CliRunner

from seqlower.cli import app

LABEL = "SequenceInsert#2 (Seq_3)"  # the third unnamed SequenceInsert, writing 'Seq_3'
WHY = (
    "SplitToSequence 'SplitToSequence#0 (Seq_0)' stays: the rank of the input is unknown, so no "
    "tensor holds its elements"
)


@pytest.fixture
def model1(tmp_path):
    """ONNX's test_sequence_model1 (unnamed nodes), but over a split along axis 1 of a tensor
    whose rank is known only at run time, so that its sequence ops stay (the original now
    lowers fully; a split along axis 0 of such a tensor would too)."""
    path = tmp_path / "model1.onnx"
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    Sequence (float[4,3,4] V, int64[R] shape, int64 k, float[2,3,4] X, float[1,3,4] Y,
              float[3,3,4] Z, int64 pos, int64 pos_at) => (float[?,3,4] out) {
        W = Reshape (V, shape)
        Seq_0 = SplitToSequence <axis = 1> (W, k)
        Seq_1 = SequenceInsert (Seq_0, X)
        Seq_2 = SequenceInsert (Seq_1, Y)
        Seq_3 = SequenceInsert (Seq_2, Z, pos)
        out = SequenceAt (Seq_3, pos_at)
    }""")
    onnx.save(model, path)
    assert not any(node.name for node in onnx.load(path).graph.node)
    return path


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_an_unnamed_node_has_one_label_everywhere(model1, tmp_path):
    out, report = str(tmp_path / "out.onnx"), tmp_path / "report.json"
    summary = run("optimize", str(model1), out, "--report", str(report))
    assert summary.exit_code == 0, summary.output
    assert f"  SequenceInsert '{LABEL}' in main" in summary.stdout.splitlines()
    assert f"kept 4 sequence ops: {WHY}" in summary.stdout.replace("\n    ", " ")

    data = json.loads(report.read_text())
    (insert,) = [op for op in data["remaining"] if op["node"] == LABEL]
    assert insert["node"] == LABEL and insert["outputs"] == ["Seq_3"]
    assert [n["node"] for n in data["nodes"] if n["op_type"] == "SequenceInsert"][-1] == LABEL

    tensorrt = run("optimize", str(model1), out, "--target", "tensorrt", "-q")
    assert tensorrt.exit_code == 1
    assert f"SequenceInsert '{LABEL}'" in tensorrt.stderr

    inspected = run("inspect", str(model1))
    assert any(line.split()[1:4] == [*LABEL.split(), "SequenceInsert"] for line in (
        inspected.stdout.splitlines()
    ))  # fmt: skip

    verbose = run("optimize", str(model1), out, "-v")
    assert f"  SequenceInsert '{LABEL}' in main" in verbose.stdout.splitlines()


def test_the_headline_is_one_reason_and_verbose_lists_every_refusal(model1, tmp_path):
    out = str(tmp_path / "out.onnx")
    plain = run("optimize", str(model1), out).stdout.splitlines()
    verbose = run("optimize", str(model1), out, "-v").stdout.splitlines()
    kept = [line for line in plain if line.startswith("  SequenceAt '")]
    assert kept == ["  SequenceAt 'SequenceAt#0 (out)' in main"]  # under the one reason
    assert f"kept 4 sequence ops: {WHY}" in "\n".join(plain).replace("\n    ", " ")
    assert not any(line.startswith("    at-") for line in plain)
    start = verbose.index(kept[0])
    refusals = verbose[start + 1 : start + 9]  # the first wraps to two lines
    assert " ".join(line.strip() for line in refusals[:2]) == (
        "tensor-list: the rank of the input is unknown, so no tensor holds its elements (split "
        "along axis 1: only a split along axis 0 can do without the rank)"
    )
    assert all(line.startswith("    at-") for line in refusals[2:])
    assert plain[-2].startswith("  (-v lists every rule's refusal")
    assert plain[-1].startswith("wrote ")
    assert all(len(line) <= 100 for line in plain[1:-1])  # paths aside, every line is short


def test_the_json_keeps_every_refusal(model1, tmp_path):
    report = tmp_path / "report.json"
    run("optimize", str(model1), str(tmp_path / "out.onnx"), "--report", str(report), "-q")
    (at,) = [
        op for op in json.loads(report.read_text())["remaining"] if op["op_type"] == "SequenceAt"
    ]
    assert len(at["reasons"]) == 8 and at["reasons"][0].startswith("tensor-list: ")
    assert any(reason.startswith("at-of-split: ") for reason in at["reasons"])
    assert at["hint"] == ""  # a rank known at run time only: no option helps


def test_a_map_over_a_sequence_input_explains_its_count(tmp_path):
    path = tmp_path / "map.onnx"
    onnx.save(CONFORMANCE["test_sequence_map_identity_2_sequences"].model, path)
    result = run("optimize", str(path), str(tmp_path / "out.onnx"), "--target", "portable")
    first = result.stdout.split("\n  op ", 1)[0].replace("\n    ", " ")  # the count, unwrapped
    assert (
        "sequence ops 1 -> 3 (7 -> 3 counting each SequenceMap as the sequence ops of its " in first
    )
    assert "  try --flatten-sequence-io --seq-len x0=<n> --seq-len x1=<n>" in result.stdout
    followed = run(
        "optimize", str(path), str(tmp_path / "out.onnx"), "--flatten-sequence-io",
        "--seq-len", "x0=2", "--seq-len", "x1=2", "--strict",
    )  # fmt: skip
    assert followed.exit_code == 0, followed.output
    assert "sequence ops 1 -> 0 (" in followed.stdout


def test_a_count_that_drops_has_no_note(tmp_path):
    path = tmp_path / "map.onnx"
    onnx.save(CONFORMANCE["test_sequence_map_identity_2_sequences"].model, path)
    result = run("optimize", str(path), str(tmp_path / "out.onnx"), "--flatten-sequence-io",
                 "--seq-len", "x0=2", "--seq-len", "x1=2")  # fmt: skip
    assert "counting each SequenceMap" not in result.stdout


def test_strict_names_the_kept_interface(tmp_path):
    path = tmp_path / "identity.onnx"
    onnx.save(CONFORMANCE["test_identity_sequence"].model, path)
    result = run("optimize", str(path), str(tmp_path / "out.onnx"), "--strict", "-q")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(
        "0 sequence ops and 2 sequence inputs/outputs remain (--strict); nothing written"
    )
    assert not (tmp_path / "out.onnx").exists()
