"""An original returned as given by `--target onnxruntime` gets the clean-ups its estimate
assumed inside loop bodies too: the shapes inferred on a copy are lent to its undeclared values
while they run (`seqlower.passes.lent_shapes`), then taken back."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, op_counts, parse

import seqlower
from seqlower.passes.broadcast_unsqueeze import drop_broadcast_unsqueezes
from seqlower.passes.lent_shapes import lent_shapes

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

# a Loop whose body broadcasts the carried row against X: the body declares no shapes, as an
# export's does; `axes` says which axis the Unsqueeze adds
_LOOP = """
agraph (float[2,3] X) => (float[3] out) {{
  trip = Constant <value = int64 {{3}}> ()
  cond = Constant <value = bool {{1}}> ()
  start = Constant <value = float[3] {{0.5, -1.0, 2.0}}> ()
  out = Loop (trip, cond, start) <body = step (int64 i, bool c, float[3] row)
                                          => (bool c_out, float[3] row_out) {{
    c_out = Identity (c)
    axes = Constant <value = int64[1] {{{axes}}}> ()
    scaled = Mul (row, row)
    u = Unsqueeze (scaled, axes)
    s = Add (u, X)
    half = Constant <value = float {{0.5}}> ()
    m = Mul (s, half)
    raxes = Constant <value = int64[1] {{0}}> ()
    row_out = ReduceSum <keepdims = 0> (m, raxes)
  }}>
}}"""


def _body_values(model: ir.Model) -> dict[str, ir.Value]:
    loop = next(node for node in model.graph if node.op_type == "Loop")
    return {v.name: v for node in loop.attributes["body"].as_graph() for v in node.outputs}


def test_shapes_are_lent_within_the_block_and_taken_back_after():
    model = ir.from_proto(parse(_LOOP.format(axes=0), opset=17))
    values = _body_values(model)
    assert values["u"].shape is None and values["s"].shape is None  # an export's body
    with lent_shapes(model) as lent:
        assert lent > 0
        assert list(values["u"].shape) == [1, 3] and list(values["s"].shape) == [2, 3]
    assert values["u"].shape is None and values["s"].shape is None


def test_a_body_unsqueeze_that_broadcasting_makes_goes_only_with_the_shapes_lent():
    original = parse(_LOOP.format(axes=0), opset=17)
    model = ir.from_proto(original)
    assert drop_broadcast_unsqueezes(model) == 0  # no shape in the body: nothing is proved
    with lent_shapes(model):
        assert drop_broadcast_unsqueezes(model) == 1
    cleaned = ir.to_proto(model)
    onnx.checker.check_model(cleaned, full_check=True)
    assert "Unsqueeze" not in op_counts(cleaned)
    feeds = {"X": np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)}
    assert_same_outputs(original, cleaned, feeds)
    # the body declares what it declared before: no shape of its own
    values = _body_values(model)
    assert [values[name].shape for name in ("scaled", "s", "m")] == [None, None, None]


def test_an_unsqueeze_broadcasting_does_not_make_stays_with_the_shapes_lent():
    model = ir.from_proto(parse(_LOOP.format(axes=1), opset=17))  # [3] -> [3, 1]: not leading
    with lent_shapes(model) as lent:
        assert lent > 0
        assert drop_broadcast_unsqueezes(model) == 0
    assert op_counts(ir.to_proto(model))["Unsqueeze"] == 1


def test_nothing_is_lent_when_the_copy_cannot_be_inferred(monkeypatch):
    model = ir.from_proto(parse(_LOOP.format(axes=0), opset=17))

    def rejects(copy: ir.Model) -> None:
        raise onnx.shape_inference.InferenceError("[ShapeInferenceError] rejected")

    monkeypatch.setattr("seqlower.passes.lent_shapes.infer_shapes", rejects)
    with lent_shapes(model) as lent:
        assert lent == 0
        assert drop_broadcast_unsqueezes(model) == 0


def _data_sets(case: pathlib.Path, model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    found = []
    for folder in sorted(case.glob("test_data_set_*")):
        feeds = {}
        for i, value in enumerate(model.graph.input):
            tensor = onnx.load_tensor(str(folder / f"input_{i}.pb"))
            feeds[value.name] = onnx.numpy_helper.to_array(tensor)
        found.append(feeds)
    return found


@pytest.mark.parametrize("case", ["torch_recent/encodec_residual_vq"])
def test_a_kept_original_loses_the_body_unsqueezes_its_estimate_assumed_gone(case):
    """The residual quantizer's loop adds `ReduceSum(...).unsqueeze(0).unsqueeze(0)` to a
    rank-3 distance: the estimate of the original (on the inferred model) counts no Unsqueeze
    there, and the original returned now has none either."""
    path = FIXTURES / case / "model.onnx"
    original = onnx.load(path)
    kept, report = seqlower.optimize(path, target="onnxruntime")
    kept = kept if isinstance(kept, onnx.ModelProto) else ir.to_proto(kept)
    assert report.stop_reason.startswith("kept the original")
    assert report.sequence_ops_after == report.sequence_ops_before  # every one kept
    assert op_counts(original)["Unsqueeze"] == 3  # two in the loop's branch, one outside
    assert op_counts(kept)["Unsqueeze"] == 1  # the chain of two goes
    assert op_counts(kept)["Cast"] == 0  # the loop's Cast of a bool to bool
    onnx.checker.check_model(kept, full_check=True)
    for feeds in _data_sets(path.parent, original):
        assert_same_outputs(original, kept, feeds)
