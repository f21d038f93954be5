"""`bench.calibrate` scores the choice `--target onnxruntime` makes: a region's estimates at 16
iterations and on small inputs weighed together (`RegionCost.lowered_costs_more`), as the
target weighs them, not the estimate at 16 iterations alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from support import (
    assert_outputs_equal,
    assert_same_outputs,
    lower,
    parse,
    run_ort,
    sequence_op_counts,
)
from test_speed_first import CHUNKS_READ_IN_A_LOOP

from bench.calibrate import _picks_lowered, agreement, line
from seqlower.options import Options
from seqlower.pipeline import region_forms

FIXTURES = Path(__file__).parent / "fixtures" / "torch"


def _row(as_given, lowered, as_given_small, lowered_small, seconds_as_given, seconds_lowered):
    return {
        "case": "case",
        "region": 0,
        "sites": ["Loop 'loop'"],
        "estimate_as_given": as_given,
        "estimate_lowered": lowered,
        "estimate_as_given_small": as_given_small,
        "estimate_lowered_small": lowered_small,
        "seconds_as_given": seconds_as_given,
        "seconds_lowered": seconds_lowered,
    }


def test_a_form_cheaper_at_16_iterations_and_dearer_on_small_inputs_is_kept_as_the_target_does():
    # 15% cheaper lowered at 16 iterations, 25% dearer at 2: the product (0.85 x 1.25) is dearer
    row = _row(100, 85, 20, 25, seconds_as_given=10e-6, seconds_lowered=12e-6)
    assert not _picks_lowered(row)
    assert _picks_lowered(row, one_count=True)  # what the tool scored before
    assert agreement([row]) == (1, 1)
    assert agreement([row], one_count=True) == (0, 1)
    assert "-> as given" in line(row) and "(20 / 25 on small inputs)" in line(row)
    assert line(row).endswith(" ok")


def test_a_form_cheaper_at_both_counts_is_lowered_by_either_rule():
    row = _row(100, 85, 20, 18, seconds_as_given=12e-6, seconds_lowered=10e-6)
    assert _picks_lowered(row) and _picks_lowered(row, one_count=True)
    assert agreement([row]) == agreement([row], one_count=True) == (1, 1)


def test_a_row_without_the_small_estimates_is_scored_by_the_one_count_and_ties_are_not_scored():
    row = _row(100, 101, None, None, seconds_as_given=10e-6, seconds_lowered=9e-6)
    assert not _picks_lowered(row)
    assert agreement([row]) == (0, 1)
    assert "on small inputs" not in line(row) and line(row).endswith(" WRONG")
    tie = _row(100, 101, 20, 19, seconds_as_given=10e-6, seconds_lowered=9.5e-6)  # within 10%
    assert agreement([tie]) == (0, 0)


def test_region_forms_carry_the_estimates_the_target_weighs(tmp_path):
    weights = ", ".join(str(round(v, 2)) for v in np.linspace(-1, 1, 64))
    model = parse(CHUNKS_READ_IN_A_LOOP.replace("WEIGHTS", weights))
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    _, report = lower(model, target="onnxruntime")
    (kept,) = report.kept_for_speed
    _, (form,) = region_forms(path, Options(target="onnxruntime"))
    cost = form.cost
    assert (cost.as_given, cost.lowered, cost.as_given_small, cost.lowered_small) == (
        kept.as_given,
        kept.lowered,
        kept.as_given_small,
        kept.lowered_small,
    )
    assert cost.lowered_costs_more  # the target keeps it: so does the tool's choice
    # the form with the region kept computes what the model does, on an empty split too
    kept_form = ir.to_proto(form.kept)
    assert sequence_op_counts(kept_form) == {
        "SequenceAt": 1,
        "SequenceLength": 1,
        "SplitToSequence": 1,
    }
    rng = np.random.default_rng(5)
    for length, chunk in [(10, 4), (3, 4), (0, 2)]:
        x = rng.standard_normal((2, length, 8)).astype(np.float32)
        assert_same_outputs(model, kept_form, {"x": x, "chunk": np.array(chunk)})


def test_a_region_the_target_lowers_is_picked_lowered():
    path = FIXTURES / "unbind_stack" / "model.onnx"
    lowered, forms = region_forms(path, Options(target="onnxruntime"))
    assert forms and all(not form.cost.lowered_costs_more for form in forms)
    assert all(form.as_given_small is not None for form in forms)
    assert sequence_op_counts(ir.to_proto(lowered)) == {}


def _first_data_set(case: Path) -> dict[str, np.ndarray]:
    feeds = {}
    for path in sorted((case / "test_data_set_0").glob("input_*.pb")):
        tensor = onnx.load_tensor(str(path))
        feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
    return feeds


def test_every_mixed_form_of_the_levels_export_runs_as_the_original_does():
    """`torch_recent/mmdet_levels_to_images` with its levels' SequenceConstruct (region 0) or
    the loop flattening each level (region 1) kept as given and the rest lowered: the loop
    appending each flattened level (8x8, 4x4, 2x2 maps: a middle dim that differs per level)
    must not become a scan output, which onnxruntime requires of one shape per iteration
    (`Inconsistent shape in loop output`)."""
    case = FIXTURES.parent / "torch_recent" / "mmdet_levels_to_images"
    original = onnx.load(case / "model.onnx")
    _, forms = region_forms(case / "model.onnx", Options(target="onnxruntime"))
    feeds = _first_data_set(case)
    expected = run_ort(original, feeds)
    for form in forms:
        assert_outputs_equal(expected, _run_without_conv_fusion(ir.to_proto(form.kept), feeds))


def _run_without_conv_fusion(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    """`run_ort`, but onnxruntime 1.20 loads `model` without its ConvActivationFusion: loading
    the form with region 1 kept, that fusion aborts the process (a failed assertion in
    onnxruntime 1.20.0, with or without the scan-output fix; 1.32.0 loads it). Versions between
    were not tried."""
    if tuple(int(part) for part in ort.__version__.split(".")[:2]) > (1, 20):
        return run_ort(model, feeds)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["ConvActivationFusion"],
    )
    return session.run(None, feeds)
