"""The cost model (seqlower.cost) and what the pipeline does with it: `--target onnxruntime`
asks for speed first and keeps what costs more lowered; every other target, the default
included, lowers everything it can."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, sequence_op_count

import seqlower

FIXTURES = Path(__file__).parent / "fixtures" / "torch"


def _case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model = onnx.load(FIXTURES / name / "model.onnx")
    feeds = {}
    for path in sorted((FIXTURES / name / "test_data_set_0").glob("input_*.pb")):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
    return model, feeds


def test_target_onnxruntime_keeps_an_original_whose_lowering_costs_more():
    # xs = x.split(2, 0); xs[-1] * len(xs), xs[0] + xs[-2]: three reads of a ragged split cost
    # more as tensor arithmetic than as SplitToSequence and SequenceAt
    model, feeds = _case("len_neg_index")
    kept, report = lower(model, target="onnxruntime")
    assert onnx.printer.to_text(kept.graph) == onnx.printer.to_text(model.graph)  # as given
    assert sequence_op_count(kept) == sequence_op_count(model) > 0
    assert report.rules_fired == {}
    assert report.stop_reason.startswith("kept the original: the lowered model costs")
    assert all(op.kept_for_speed for op in report.remaining)
    (region,) = report.kept_for_speed  # said once, with both estimates
    assert (region.op_type, region.sequence_nodes) == ("SplitToSequence", 5)
    assert region.as_given < region.lowered
    assert_same_outputs(model, kept, feeds)


@pytest.mark.parametrize("target", ["generic", "portable", "tensorrt", "openvino", "tract"])
def test_every_other_target_lowers_even_where_it_costs_more(target):
    model, feeds = _case("len_neg_index")
    lowered, report = lower(model, target=target)
    assert sequence_op_count(lowered) == 0
    assert not report.stop_reason.startswith("kept")
    assert_same_outputs(model, lowered, feeds)


def test_the_original_is_read_again_from_its_file_only_when_kept(tmp_path):
    model, feeds = _case("len_neg_index")
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    kept, report = seqlower.optimize(path, target="onnxruntime")
    assert report.stop_reason.startswith("kept the original")
    assert sequence_op_count(ir.to_proto(kept)) == sequence_op_count(model)
    assert_same_outputs(model, ir.to_proto(kept), feeds)


def test_target_onnxruntime_lowers_what_gets_cheaper():
    model, feeds = _case("unbind_stack")
    lowered, report = lower(model, target="onnxruntime")
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("loop-batch") == 1
    assert not any("operator launches" in w for w in report.warnings)
    assert_same_outputs(model, lowered, feeds)


def test_strict_on_a_kept_original_says_which_target_lowers_it(tmp_path):
    from typer.testing import CliRunner

    from seqlower.cli.app import app

    path = tmp_path / "model.onnx"
    onnx.save(_case("len_of_split")[0], path)
    out = tmp_path / "out.onnx"
    args = ["optimize", str(path), str(out), "--strict", "-q"]
    refused = CliRunner().invoke(app, [*args, "--target", "onnxruntime"])
    assert refused.exit_code == 1 and not out.exists()
    assert "the original costs less); the default target (no --target) lowers it" in refused.stderr
    lowered = CliRunner().invoke(app, args)
    assert lowered.exit_code == 0 and out.exists()
