"""A batched loop's body run only where the loop has an element (seqlower/passes/empty_rows.py):
`If(Cast(Size(x), BOOL)) {the batched body} else {its results at no row, as constants}`. What the
guard emits, what it leaves alone and why, and the outputs under onnxruntime (and OpenVINO where
installed) at no row, one and more, a trip count that is negative, and an empty list."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_outputs_equal,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    run_ort,
    run_reference,
)

import seqlower
from seqlower.passes import infer_shapes
from seqlower.passes.empty_rows import GUARD_LAUNCHES, MAX_SHARE, MIN_LAUNCHES, guard_empty_rows

TARGETS = ("portable", "onnxruntime")


def _steps(count: int, first: str = "h0", rank: int = 4) -> str:
    """`count` elementwise steps from `first` (h0) to h{count}, alternating Add and Mul with three
    constants c0, c1, c2 (c1 a scalar)."""
    del rank
    lines = [f"      h{k + 1} = {'Mul' if k % 2 else 'Add'} (h{k}, c{k % 3})" for k in range(count)]
    return "\n".join(lines).replace("(h0,", f"({first},")


CONSTANTS = """
      c0 = Constant <value = float[4] {1, 2, 3, 4}> ()
      c1 = Constant <value = float {0.5}> ()
      c2 = Constant <value = float[4] {-1, 0, 1, 2}> ()"""

# `[f(row) for row in x]` as a scan output over the rows of x, f 18 elementwise steps
ROWS = """
agraph (float[M, 4] x, float[1, 4] w) => (float[M, 4] y, float[M, 4] z) {{
  n = Shape <start = 0, end = 1> (x)
  m = Squeeze (n)
  t = Constant <value = bool {{1}}> ()
  y = Loop (m, t) <body = step (int64 i, bool c) => (bool c3, float[4] h{count}) {{
      c3 = Identity (c)
      h0 = Gather <axis = 0> (x, i){constants}
{steps}
  }}>
  z = Add (y, w)
}}"""

# the same over the elements of a list split from x: the list is empty where x has no row
LIST = """
agraph (float[M, 4] x) => (float[M, 4] y) {{
  xs = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceLength (xs)
  t = Constant <value = bool {{1}}> ()
  y = Loop (m, t) <body = step (int64 i, bool c) => (bool c3, float[4] h{count}) {{
      c3 = Identity (c)
      h0 = SequenceAt (xs, i){constants}
{steps}
  }}>
}}"""

# `for i in range(n): out.append(f(x[i]))` with n given: negative (no iteration), 0, within x,
# past x's rows (the loop fails there, and so must the lowered model)
COUNTED = """
agraph (float[M, 4] x, int64 n) => (float[K, 4] y) {{
  t = Constant <value = bool {{1}}> ()
  y = Loop (n, t) <body = step (int64 i, bool c) => (bool c3, float[4] h{count}) {{
      c3 = Identity (c)
      h0 = Gather <axis = 0> (x, i){constants}
{steps}
  }}>
}}"""


def _rows(m: int) -> np.ndarray:
    return (np.arange(m * 4, dtype=np.float32).reshape(m, 4) - 5.5) / 3


# other work of the model, on an input b: the guard is a fixed cost wherever there are rows,
# taken only where it is at most `MAX_SHARE` of the whole model's estimate
BULK = int(2 * GUARD_LAUNCHES / MAX_SHARE)
B = np.linspace(-1, 1, 8, dtype=np.float32)


def _with_bulk(model: onnx.ModelProto, nodes: int = BULK) -> onnx.ModelProto:
    """`model` with `nodes` more elementwise steps on an input b, returned as an output."""
    graph = model.graph
    graph.input.append(onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [8]))
    graph.initializer.append(onnx.numpy_helper.from_array(np.array(0.75, np.float32), "bk"))
    last = "b"
    for k in range(nodes):
        op = "Mul" if k % 2 else "Add"
        graph.node.append(onnx.helper.make_node(op, [last, "bk"], [f"bulk{k}"]))
        last = f"bulk{k}"
    graph.output.append(onnx.helper.make_tensor_value_info(last, onnx.TensorProto.FLOAT, [8]))
    return model


def _fed(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = {value.name for value in model.graph.input}
    return {**feeds, "b": B} if "b" in names else feeds


def _same(model: onnx.ModelProto, lowered: onnx.ModelProto, feeds: dict) -> list:
    return assert_same_outputs(model, lowered, _fed(model, feeds))


def _model(text: str, count: int = 18, bulk: bool = True) -> onnx.ModelProto:
    model = parse(text.format(count=count, constants=CONSTANTS, steps=_steps(count)))
    return _with_bulk(model) if bulk else model


def _guards(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "If" and n.name.endswith("_if_rows")]


@pytest.mark.parametrize("target", TARGETS)
def test_a_batched_body_runs_only_where_there_is_a_row(target):
    model = _model(ROWS)
    lowered, report = lower(model, target=target)
    assert report.rules_fired.get("guard-empty-rows") == 1
    (guard,) = _guards(lowered)
    assert [n.op_type for n in lowered.graph.node if n.output[0] == guard.input[0]] == ["Cast"]
    then = next(a.g for a in guard.attribute if a.name == "then_branch")
    other = next(a.g for a in guard.attribute if a.name == "else_branch")
    assert collections_of(then) == {"Add": 9, "Mul": 9}  # the batched body, all of it
    assert "Add" not in collections_of(other) and "Mul" not in collections_of(other)
    # z reads y beside w, a value of the model's input: it stays outside, after the If
    assert op_counts(lowered)["Add"] == 10 + BULK // 2
    w = np.array([[1, -2, 0.5, 3]], np.float32)
    for m in (0, 1, 3):
        outputs = _same(model, lowered, {"x": _rows(m), "w": w})
        assert outputs[0].shape == (m, 4) and outputs[1].shape == (m, 4)
        if m:  # onnx.reference stacks no scan output of a Loop of no iteration (it raises)
            assert_outputs_equal(
                run_reference(model, _fed(model, {"x": _rows(m), "w": w})), outputs
            )


def collections_of(graph: onnx.GraphProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


@pytest.mark.parametrize("target", TARGETS)
def test_a_body_over_an_empty_list_returns_its_constants(target):
    model = _model(LIST)
    lowered, report = lower(model, target=target)
    assert report.rules_fired.get("guard-empty-rows") == 1
    assert len(_guards(lowered)) == 1
    for m in (0, 1, 2, 5):
        y = _same(model, lowered, {"x": _rows(m)})[0]
        assert y.shape == (m, 4) and y.dtype == np.float32


@pytest.mark.parametrize("target", TARGETS)
def test_a_trip_count_that_is_negative_zero_or_past_the_rows(target):
    model = _model(COUNTED)
    lowered, _ = lower(model, target=target)
    for m in (0, 1, 3):
        for n in (-4, -1, 0, 1, m, m + 1):
            feeds = {"x": _rows(m), "n": np.array(n, np.int64)}
            if assert_same_or_both_fail(model, lowered, _fed(model, feeds)):
                assert run_ort(lowered, _fed(model, feeds))[0].shape == (max(min(n, m), 0), 4)


@pytest.mark.parametrize("target", TARGETS)
def test_a_second_lowering_guards_nothing_more(target):
    lowered, _ = lower(_model(ROWS), target=target)
    again, report = lower(lowered, target=target)
    assert "guard-empty-rows" not in report.rules_fired
    assert again.SerializeToString() == lowered.SerializeToString()
    assert len(_guards(again)) == 1


def test_a_body_too_small_for_the_guard_is_left_as_it_is():
    """Below `MIN_LAUNCHES` batched launches the guard would cost more than a third of what it
    may skip."""
    count = MIN_LAUNCHES - 1
    model = _model(ROWS, count=int(count))
    lowered, report = lower(model)
    assert not _guards(lowered) and "guard-empty-rows" not in report.rules_fired
    for m in (0, 2):
        _same(model, lowered, {"x": _rows(m), "w": np.ones((1, 4), np.float32)})


def test_a_model_whose_whole_estimate_is_small_is_not_guarded():
    """Where there are rows the guard is a fixed cost: not taken where it would be more than
    `MAX_SHARE` of the model's estimate on small inputs (this model is the batched body)."""
    model = _model(ROWS, bulk=False)
    lowered, report = lower(model)
    assert not _guards(lowered) and "guard-empty-rows" not in report.rules_fired
    for m in (0, 2):
        _same(model, lowered, {"x": _rows(m), "w": np.ones((1, 4), np.float32)})


def test_a_body_reading_a_value_of_the_input_is_guarded_from_there():
    """The region holds what computes from one tensor and constants alone: its values at no row
    are then constants. A step that reads v (an input) stays outside; the steps after it
    compute from its result, which has the loop's rows: they are guarded by its Size."""
    text = ROWS.replace("h0 = Gather <axis = 0> (x, i)", "g = Gather <axis = 0> (x, i)")
    text = text.replace("float[1, 4] w)", "float[1, 4] w, float[4] v)")
    read_v = "{constants}\n      g1 = Add (g, c1)\n      h0 = Mul (g1, v)"
    model = _model(text.replace("{constants}", read_v))
    lowered, _ = lower(model)
    (guard,) = _guards(lowered)
    then = next(a.g for a in guard.attribute if a.name == "then_branch")
    assert all("v" not in node.input for node in then.node)
    assert collections_of(then) == {"Add": 9, "Mul": 9}
    w = np.array([[1, -2, 0.5, 3]], np.float32)
    v = np.array([2, 0.5, -1, 4], np.float32)
    for m in (0, 1, 3):
        _same(model, lowered, {"x": _rows(m), "w": w, "v": v})


# y read in the body of a second loop (a running product, left a Loop) of a count given: the
# If must come before that Loop, which reads y where it runs (and reads nothing else the If
# returns)
READ_IN_A_BODY = ROWS.replace(
    "  z = Add (y, w)",
    """  one = Constant <value = float[4] {{1, 1, 1, 1}}> ()
  p = Loop (k, t, one) <body = product (int64 j, bool d, float[4] q) => (bool d2, float[4] q2) {{
      d2 = Identity (d)
      yj = Gather <axis = 0> (y, j)
      q2 = Mul (q, yj)
  }}>
  z = Add (p, w)""",
).replace("float[1, 4] w)", "float[1, 4] w, int64 k)")


@pytest.mark.parametrize("target", TARGETS)
def test_the_guard_comes_before_a_loop_whose_body_reads_its_results(target):
    model = _model(READ_IN_A_BODY)
    lowered, _ = lower(model, target=target)  # the checker: in graph order
    (guard,) = _guards(lowered)
    kinds = [n.op_type for n in lowered.graph.node]
    place = [n.name for n in lowered.graph.node].index(guard.name)
    assert "Loop" in kinds or "Scan" in kinds
    assert all(kind not in ("Loop", "Scan") for kind in kinds[:place])
    w = np.array([[1, -2, 0.5, 3]], np.float32)
    for m in (0, 1, 3):
        for k in {0, m}:
            feeds = {"x": _rows(m), "w": w, "k": np.array(k, np.int64)}
            _same(model, lowered, feeds)


def test_the_tract_target_guards_nothing():
    """tract holds a model to its declared shapes; the branches would declare [0, 4] and [M, 4]."""
    lowered, report = seqlower.optimize(_model(ROWS), target="tract")
    assert not _guards(lowered if isinstance(lowered, onnx.ModelProto) else ir.to_proto(lowered))
    assert "guard-empty-rows" not in report.rules_fired


# the pass alone, on tensor models: every node counted as batched unless said
CHAIN = """
agraph (float[M, {width}] x) => ({out_type} y) {{
  c = Constant <value = float {{2}}> ()
  shape = Constant <value = int64[2] {{1, 4}}> ()
  axes = Constant <value = int64[1] {{0}}> ()
{steps}
  y = {last}
}}"""


def _chain(width: object = 4, last: str = "Identity (h18)", out: str = "float[M, 4]") -> ir.Model:
    steps = "\n".join(
        f"  h{k + 1} = {'Mul' if k % 2 else 'Add'} ({'x' if k == 0 else f'h{k}'}, c)"
        for k in range(18)
    )
    text = CHAIN.format(width=width, steps=steps, last=last, out_type=out)
    model = ir.from_proto(_with_bulk(parse(text)))
    infer_shapes(model)
    return model


def _all(model: ir.Model) -> set[ir.Node]:
    return set(model.graph)


def test_the_pass_guards_a_chain_and_keeps_its_output_name():
    model = _chain()
    original = ir.to_proto(model)
    assert guard_empty_rows(model, _all(model)) == 1
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.graph.output[0].name == "y"
    assert [n.op_type for n in proto.graph.node][-3:] == ["Size", "Cast", "If"]
    for m in (0, 1, 4):
        assert_same_outputs(original, proto, _fed(original, {"x": _rows(m)}))


def test_the_pass_leaves_a_chain_no_batching_rule_made():
    """Tensor code of the model as given (a network over a batch) ran as many kernels for no
    row as given: not guarded."""
    model = _chain()
    assert guard_empty_rows(model, set()) == 0


def test_the_pass_leaves_a_tensor_whose_other_dims_are_not_static():
    """With x's other dims unknown its Size is 0 where they are 0 too: no one empty x."""
    model = _chain(width="K", out="float[M, K]")
    assert guard_empty_rows(model, _all(model)) == 0


def test_the_pass_leaves_a_region_that_fails_on_no_row():
    """A Reshape of x to [1, 4] fails where x has no row, as it does unguarded."""
    model = _chain(last="Reshape (h18, shape)", out="float[1, 4]")
    assert guard_empty_rows(model, _all(model)) == 0


def test_the_pass_leaves_a_region_whose_results_at_no_row_are_large():
    """A sum over the rows of [M, 80] is 80 zeros at no row: more than the constants allowed;
    of [M, 4], 4 zeros, returned as a constant."""
    model = _chain(width=80, last="ReduceSum <keepdims = 0> (h18, axes)", out="float[80]")
    assert guard_empty_rows(model, _all(model)) == 0
    small = _chain(width=4, last="ReduceSum <keepdims = 0> (h18, axes)", out="float[4]")
    original = ir.to_proto(small)
    assert guard_empty_rows(small, _all(small)) == 1
    proto = ir.to_proto(small)
    for m in (0, 2):
        y = assert_same_outputs(original, proto, _fed(original, {"x": _rows(m)}))[0]
        assert y.shape == (4,)


def test_the_guarded_lowering_runs_in_openvino():
    pytest.importorskip("openvino", reason="the OpenVINO oracle: pip install openvino")
    from seqlower.verification.runtimes import run_in_runtime

    model = _model(LIST)
    lowered, _ = lower(model)
    assert _guards(lowered)
    for m in (0, 1, 3, 0):  # 0 again: after a run with rows
        feeds = _fed(model, {"x": _rows(m)})
        assert_outputs_equal(run_ort(model, feeds), run_in_runtime("openvino", lowered, feeds))


def test_each_node_is_looked_at_in_one_region_at_most(monkeypatch):
    """A region refused (here: it fails on no row) is not grown again from each of its values:
    the pass stays linear in the graph (a chain of 18 steps seeds 19 values)."""
    from seqlower.passes import empty_rows

    looked: list[int] = []
    grow = empty_rows._region

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        region = grow(*args, **kwargs)
        looked.append(len(region))
        return region

    monkeypatch.setattr(empty_rows, "_region", counted)
    model = _chain(last="Reshape (h18, shape)", out="float[1, 4]")
    assert guard_empty_rows(model, _all(model)) == 0
    assert looked == [19]  # the 18 steps and the Reshape, once
