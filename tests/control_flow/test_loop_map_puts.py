"""loop-map-assign, the plan for appends or assignments at i by branch: transformers'
`DynamicCache.update` in a loop over layers (`if len(keys) <= i: keys.append(k)` else `keys[i]
= cat([keys[i], k])`, the values alike) reads the step's caches and appends what it puts."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    ort_session,
    sequence_op_count,
    stored_data_sets,
)

from control_flow.test_list_lengths import CACHE, _cache
from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes.dead_code import remove_dead_nodes
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loop_map_assign
from seqlower.rules.loop_append_lockstep import lockstep_shapes
from seqlower.rules.loop_map_puts import PutsPlan

# onnx 1.18's shape inference gives the step loop's hidden state no width inside the lowering,
# so the loop analysis cannot prove each layer's cache one shape: the caches stay in the general
# form there (equally right, slower)
_ONNX_RELEASE = tuple(int(part) for part in onnx.__version__.split(".")[:2])
_ONE_LIST = "ka = SequenceInsert(k, kx)\n                va = Identity(v)"


def _feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [
        {"h0": rng.standard_normal((rows, 3)).astype(np.float32), "steps": np.array(steps)}
        for rows in (1, 2)
        for steps in (0, 1, 3)
    ]


def _layer_loop(model: ir.Model) -> ir.Node:
    step = next(n for n in model.graph if n.op_type == "Loop")
    return next(n for n in step.attributes["body"].as_graph() if n.op_type == "Loop")


def _mapped(proto: onnx.ModelProto) -> tuple[ir.Model, object]:
    """The plan for the layer loop, and the model with it applied (when it is a plan)."""
    model = ir.from_proto(proto)
    infer_shapes(model)
    rewriter = Rewriter(model)
    ctx = Context(Facts(model), rewriter, Options())
    loop = _layer_loop(model)
    plan = loop_map_assign._check(loop, ctx)
    if isinstance(plan, PutsPlan):
        loop_map_assign._to_appends(loop, plan, ctx)
        remove_dead_nodes(model)
    return model, plan


def _ops(graph: ir.Graph) -> list[str]:
    return [node.op_type for node in graph.all_nodes()]


def test_the_layer_loop_reads_the_step_caches_and_appends():
    model, plan = _mapped(_cache())
    assert isinstance(plan, PutsPlan)
    assert [slot.index for slot in plan.slots] == [1, 2]
    assert len(plan.fixed_conditions) == 1  # the caches' length is 0 or 2: one branch per step
    loop = _layer_loop(model)
    for start in loop.inputs[3:5]:
        assert start.producer().op_type == "SequenceEmpty"
    body = loop.attributes["body"].as_graph()
    assert "SequenceErase" not in _ops(body)  # the assignment at i is an append now
    (branch,) = [n for n in body if n.op_type == "If"]
    assert branch.inputs[0].producer().op_type == "LessOrEqual"  # L0 <= 0, before the loop
    assert branch.inputs[0].graph is not body
    assert all(isinstance(o.type, ir.TensorType) for o in branch.outputs)  # the element put
    reads = [n for n in body.all_nodes() if n.op_type == "SequenceAt"]
    assert {n.inputs[0].graph is not body for n in reads} == {True}  # the step's caches
    rewritten = ir.to_proto(model)
    onnx.checker.check_model(rewritten, full_check=True)
    for feeds in _feeds():
        assert_same_outputs(_cache(), rewritten, feeds)


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"fresh": "big = Greater(n, i)\n            fresh = Not(big)"},
        {"layers": "layers = Constant<value = int64 {0}>()"},
        {"values": "vs0 = SequenceConstruct(h0)"},  # the values start longer: the keys alone
    ],
)
def test_lowered_as_the_original_runs(variant):
    model = _cache(**variant)
    for feeds in _feeds():
        lowered, report, _ = lower_and_compare(model, feeds)
        assert report.rules_fired["loop-map-assign"] == 1
        assert sequence_op_count(lowered) == 0
    if "values" not in variant:  # one cache each
        # the caches proved in lockstep over the steps: what each layer puts is a scan output,
        # and each cache one stacked tensor (no row counts, no table of shapes)
        assert report.rules_fired["loop-append-to-scan"] == 2
        counts = op_counts(lowered)
        assert counts["CumSum"] == counts["ReduceProd"] == 0


def test_the_cache_fixture_is_mapped_and_stacked():
    """The export's lowering: the layer loop mapped, every cache one stacked tensor (no
    CumSum of row counts left), and the same tokens on its saved inputs."""
    original = onnx.load(CACHE / "model.onnx")
    lowered, report = lower(original, target="generic")
    assert report.rules_fired["loop-map-assign"] == 1
    assert sequence_op_count(lowered) == 0
    if _ONNX_RELEASE >= (1, 23):  # measured: 1.23 stacks the caches, 1.18 does not
        assert report.rules_fired["loop-append-to-scan"] == 2
        assert op_counts(lowered)["CumSum"] == 0
    plain, mapped = ort_session(original), ort_session(lowered)
    for _, feeds, _ in stored_data_sets(CACHE, original):
        for a, b in zip(plain.run(None, feeds), mapped.run(None, feeds)):
            np.testing.assert_array_equal(a, b)


def test_a_single_list_is_mapped_without_the_other():
    _, plan = _mapped(_cache(then=_ONE_LIST))
    assert isinstance(plan, PutsPlan)
    assert [slot.index for slot in plan.slots] == [1]


def test_caches_of_different_lengths_map_the_list_the_condition_reads():
    _, plan = _mapped(_cache(values="vs0 = SequenceConstruct(h0)"))
    assert isinstance(plan, PutsPlan)
    assert [slot.index for slot in plan.slots] == [1]


# -- refusals ----------------------------------------------------------------------------------


def test_refused_where_the_append_is_not_at_i():
    then = "ka = SequenceInsert(k, kx, zero)\n                va = SequenceInsert(v, vx, zero)"
    _, plan = _mapped(_cache(then=then))
    assert isinstance(plan, Refusal)
    assert "is not at the end or at i" in plan.reason


def test_refused_where_the_length_may_be_past_i():
    fresh = "one = Constant<value = int64 {1}>()\n            j = Add(i, one)\n"
    fresh += "            fresh = LessOrEqual(n, j)"
    _, plan = _mapped(_cache(fresh=fresh))
    assert isinstance(plan, Refusal)
    assert "not proved to be i" in plan.reason


def test_refused_where_the_layer_count_is_not_static():
    _, plan = _mapped(_cache(layers="layers = Identity(steps)"))
    assert isinstance(plan, Refusal)
    assert "the trip count is not static" in plan.reason


def test_refused_where_the_caches_may_be_longer_than_the_layers():
    values = "vs0 = SequenceEmpty<dtype = 1>()"
    model = _cache(values=values, layers="layers = Constant<value = int64 {2}>()")
    text = onnx.printer.to_text(model).replace(
        "ks0 = SequenceEmpty <dtype: int = 1> ()", "ks0 = SequenceConstruct (h0, h0, h0)"
    )
    assert "SequenceConstruct (h0, h0, h0)" in text
    _, plan = _mapped(onnx.parser.parse_model(text))
    assert isinstance(plan, Refusal)
    assert "not proved at most the trip count (2)" in plan.reason


def test_no_fixed_condition_where_a_cache_may_be_part_grown():
    """Caches that start with one element and two layers: L0 may be 1, where the first layer
    assigns and the second appends; the condition stays in the loop (and the result is right)."""
    model = _cache(values="vs0 = SequenceConstruct(h0)")
    text = onnx.printer.to_text(model).replace(
        "ks0 = SequenceEmpty <dtype: int = 1> ()", "ks0 = SequenceConstruct (h0)"
    )
    proto = onnx.parser.parse_model(text)
    _, plan = _mapped(proto)
    assert isinstance(plan, PutsPlan)
    assert [slot.index for slot in plan.slots] == [1, 2]
    assert plan.fixed_conditions == {}
    for feeds in _feeds():
        lower_and_compare(proto, feeds)


# -- the lockstep hypothesis of loop-append-to-scan ------------------------------------------


def test_the_caches_of_the_steps_are_proved_in_lockstep():
    """Under the hypothesis that the step's caches each hold elements of one shape (proved:
    they start empty and become what the layer loop appends), what each layer puts keeps one
    shape through the layer loop."""
    model, _ = _mapped(_cache())
    ctx = Context(Facts(model), Rewriter(model), Options())
    loop = _layer_loop(model)
    shapes = lockstep_shapes(loop, ctx)
    assert shapes is not None
    body = loop.attributes["body"].as_graph()
    (branch,) = [n for n in body if n.op_type == "If"]
    assert all(shapes.is_invariant(o) for o in branch.outputs)


def test_no_lockstep_hypothesis_where_the_caches_do_not_start_empty():
    """Caches that start with one element each: what an earlier program put there need not
    have the shape of what the layers put, so no hypothesis is made (the map stays right, its
    condition in the loop)."""
    text = onnx.printer.to_text(_cache(values="vs0 = SequenceConstruct(h0)"))
    text = text.replace("ks0 = SequenceEmpty <dtype: int = 1> ()", "ks0 = SequenceConstruct (h0)")
    model, plan = _mapped(onnx.parser.parse_model(text))
    assert isinstance(plan, PutsPlan)
    ctx = Context(Facts(model), Rewriter(model), Options())
    assert lockstep_shapes(_layer_loop(model), ctx) is None
