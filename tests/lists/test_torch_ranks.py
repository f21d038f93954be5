"""Lists whose element ranks ONNX shape inference loses, exported with PyTorch's TorchScript
exporter (tests/fixtures/torch_ranks, made by tools/export_torch_rank_fixtures.py): a Conv,
Softmax, Slice or permute of an element read from a list in a scripted loop. Each lowers to
no sequence operator and computes what PyTorch computed on every stored input set."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from support import (
    declared_shape_mismatches,
    export_cases,
    lower,
    reasons,
    rules_without,
    run_ort,
    sequence_op_counts,
    stored_data_sets,
)

ROOT = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_ranks"
CASES = export_cases(ROOT)


def test_the_fixtures_are_there():
    assert CASES == [
        "branch_per_level",
        "conv_per_chunk",
        "feedback_layers",
        "indexed_levels",
        "refine_in_place",
        "repeated_refinement",
        "shrinking_appends",
    ]


@pytest.mark.parametrize("case", CASES)
def test_a_list_of_lost_ranks_lowers_to_tensors_and_matches_pytorch(case):
    model = onnx.load(ROOT / case / "model.onnx")
    assert sum(sequence_op_counts(model).values()) > 0
    lowered, report = lower(model)
    assert sequence_op_counts(lowered) == {}, reasons(report)
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        got = run_ort(lowered, feeds)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.shape == w.shape, f"{case} {name} output {i}"
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{case} {name}")
        assert declared_shape_mismatches(lowered, feeds) == []


def test_the_element_read_back_in_the_loop_gets_its_rank():
    """`maps[i] = conv(maps[i]).softmax(1)[:, :, :, 1:]` in a loop over a list split at run
    time: the loop body's signature is not trusted (exports declare some that lie), and ONNX
    inference then gives the Conv's output no shape. It has its input's rank, 4, and so has the
    list's every element (by induction over the iterations): the lowered body declares it.
    (By default the loop is batched: the Conv needs chunks of 2 channels, so they are equal.
    The loop is kept here to see its body.)"""
    model = onnx.load(ROOT / "refine_in_place" / "model.onnx")
    lowered, report = lower(model, rules=rules_without("loop-batch"))
    assert sequence_op_counts(lowered) == {}, reasons(report)
    bodies = [n.attribute[0].g for n in lowered.graph.node if n.op_type == "Loop"]
    (body,) = [g for g in bodies if any(n.op_type == "Conv" for n in g.node)]
    (conv,) = [n for n in body.node if n.op_type == "Conv"]
    (info,) = [v for v in body.value_info if v.name == conv.output[0]]
    assert len(info.type.tensor_type.shape.dim) == 4


@pytest.mark.parametrize("case", CASES)
def test_a_list_of_lost_ranks_lowered_for_openvino_runs_there(case):
    """Lowered for OpenVINO, each computes in OpenVINO what PyTorch did."""
    pytest.importorskip("openvino", reason="pip install openvino")
    from seqlower.verification.runtimes import run_in_runtime

    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model, target="openvino")
    assert sequence_op_counts(lowered) == {}, reasons(report)
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        got = run_in_runtime("openvino", lowered, feeds)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.shape == w.shape, f"{case} {name} output {i}"
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{case} {name}")


@pytest.mark.parametrize("case", ["conv_per_chunk", "refine_in_place"])
def test_chunks_a_conv_needs_of_one_size_are_batched(case):
    """`torch.split(x, k, 1)` of a channel count not known: the chunks are all of k channels
    only if k divides it, but the Conv each iteration applies needs k input channels, so a run
    where it does not divide fails in the original too. The loop becomes one Conv over the
    chunks stacked into the batch axis, and PyTorch's results stand."""
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch"), reasons(report)
    ops = [node.op_type for node in lowered.graph.node]
    assert "Loop" not in ops and ops.count("Conv") == 1
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        for g, w in zip(run_ort(lowered, feeds), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{case} {name}")
