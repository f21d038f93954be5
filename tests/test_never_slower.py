"""The cost model (seqlower.cost) and what the pipeline does with it: `--target onnxruntime`
asks for speed first and keeps what costs more lowered; every other target, the default
included, lowers everything it can."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_close_to_stored,
    assert_same_outputs,
    lower,
    run_ort,
    sequence_op_count,
    stored_data_sets,
)

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


def test_target_onnxruntime_lowers_where_a_dead_node_lent_the_region_its_launch():
    # ConvNeXt's selected stages returned as a list: each stage's map is reshaped to
    # Shape(map), a Shape onnxruntime merges with the first Shape of the same map, which only
    # feeds shape arithmetic whose result nothing reads (gone once lowered); the launch is the
    # region's in both forms, so the two estimates tie and the cleaner model is returned
    folder = FIXTURES.parent / "torch_recent" / "convnext_out_indices"
    model = onnx.load(folder / "model.onnx")
    lowered, report = lower(model, target="onnxruntime")
    default, _ = lower(model, target="generic")
    assert not report.stop_reason.startswith("kept")
    assert report.kept_for_speed == []
    assert lowered.SerializeToString() == default.SerializeToString()
    assert len(lowered.graph.node) < len(model.graph.node)
    assert sequence_op_count(lowered) == 1  # the returned list, the interface kept
    for name, feeds, expected in stored_data_sets(folder, model):
        assert_same_outputs(model, lowered, feeds)
        (got,) = run_ort(lowered, feeds)
        assert_close_to_stored(got, expected[0], name)
