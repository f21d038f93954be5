"""Real TorchScript exports of list-building loops with run-time trip counts or conditions
(tests/fixtures/torch_loops, made by tools/export_torch_loop_fixtures.py): every one lowers,
passes the checker, and matches what PyTorch computed on each stored input set; those that
`seqlower` lowers fully end with no sequence operator."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from support import export_cases, lower, read_tensor, reasons, run_ort, sequence_op_counts

ROOT = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_loops"
CASES = export_cases(ROOT)

# appends whose shape really varies: every target lowers them to a Concat accumulator, which
# --target onnxruntime weighs against the sequence form (tests/test_never_slower.py)
KEEPS_SEQUENCE_OPS: dict[str, str] = {}
TARGETS = {"split_k": "tensorrt", "pyramid": "tensorrt"}


def test_the_fixtures_are_there():
    assert len(CASES) == 9


CASES_AND_TARGETS = [(case, "generic") for case in CASES] + sorted(TARGETS.items())


@pytest.mark.parametrize(("case", "target"), CASES_AND_TARGETS)
def test_a_real_export_lowers_and_matches_pytorch(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    assert sum(sequence_op_counts(model).values()) > 0
    lowered, report = lower(model, target=target)
    if case in KEEPS_SEQUENCE_OPS and target == "generic":
        # a whole-model decision is said once, in the stop reason
        assert KEEPS_SEQUENCE_OPS[case] in f"{reasons(report)} {report.stop_reason}"
    else:
        assert sequence_op_counts(lowered) == {}, reasons(report)
    for folder in sorted((ROOT / case).glob("test_data_set_*")):
        feeds = {
            value.name: read_tensor(folder / f"input_{i}.pb")
            for i, value in enumerate(model.graph.input)
        }
        for i, got in enumerate(run_ort(lowered, feeds)):
            want = read_tensor(folder / f"output_{i}.pb")
            assert got.shape == want.shape, f"{case} {folder.name} output {i}"
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_prepend_lowered_for_tract_runs_in_tract():
    """The stack of prepended rows is reversed by a Gather for tract (which slices no
    run-time dim with step -1), and tract computes what PyTorch did."""
    pytest.importorskip("tract", reason="pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = onnx.load(ROOT / "prepend" / "model.onnx")
    lowered, _ = lower(model, target="tract")
    assert sequence_op_counts(lowered) == {}
    assert "Slice" not in {n.op_type for n in lowered.graph.node if n.name.endswith("reversed")}
    for folder in sorted((ROOT / "prepend").glob("test_data_set_*")):
        feeds = {"x": read_tensor(folder / "input_0.pb")}
        (got,) = run_in_runtime("tract", lowered, feeds)
        np.testing.assert_allclose(got, read_tensor(folder / "output_0.pb"), rtol=1e-4, atol=1e-5)
