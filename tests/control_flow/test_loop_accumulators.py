"""`loop-concat-to-scan`: a tensor a Loop grows by concatenation (no sequence operator at all)
becomes a scan output, concatenated once with its initial value after the loop.

Plain ONNX models here; the TorchScript exports (torchvision's mask pasting and keypoint
decoding, and variants) are in tests/fixtures/torch_accumulators."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower_and_compare,
    op_counts,
    parse,
    rules_without,
    run_ort,
)

import seqlower
from seqlower.options import Options
from seqlower.passes import NormalizePass
from seqlower.passes.lower import LowerSequencesPass

RULE = "loop-concat-to-scan"


# loop-batch takes most of these loops whole (their accumulators grow by one piece computed from
# the iteration number): what loop-concat-to-scan emits is seen without it; the batched forms
# are tested with loop-batch (tests/rules/test_loop_batching.py, tests/batching)
WITHOUT_BATCHING = rules_without("loop-batch")


def _fired(report) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The rules fired, but loop-batch, which batches a loop once it has scan outputs, and
    sink-into-branch, the cleanup that moves what one If branch alone reads into it."""
    cleanup = ("loop-batch", "sink-into-branch")
    return {name: n for name, n in report.rules_fired.items() if name not in cleanup}


def _lower_and_compare(model, feeds, **options):  # type: ignore[no-untyped-def]
    options.setdefault("rules", WITHOUT_BATCHING)
    return lower_and_compare(model, feeds, **options)


def _grow(
    update: str,
    start: str = "Identity(x0)",
    piece: str = "Mul(x, scale)",
    x_type: str = "float[N,3]",
    y_type: str = "float[?,?]",
    extra: str = "",
    condition: str = "c2 = Identity(c)",
    trip: str = "m",
    prelude: str = "",
) -> str:
    """A Loop over i < `trip` that grows `acc` (starting as `start`) by `update`, where
    `piece` is computed in the body from x and the float scale i + 1."""
    return f"""g ({x_type} x, float[?,3] x0, int64 m) => ({y_type} y, int64 n) {{
    t = Constant<value = bool {{1}}>()
    {prelude}
    start = {start}
    y, n = Loop({trip}, t, start, m) <body = body (int64 i, bool c, float[?,?] acc, int64 k)
                                    => (bool c2, float[?,?] grown, int64 k2) {{
        {condition}
        k2 = Identity(k)
        one = Constant<value = int64 {{1}}>()
        next = Add(i, one)
        scale = Cast<to = 1>(next)
        piece = {piece}
        {extra}
        {update}
    }}>
}}"""


def _rows(reduce: str) -> str:
    """The body computes row = Unsqueeze(reduce(piece, axis 0), 0)."""
    return (
        "axes = Constant<value = int64[1] {0}>()\n"
        f"r = {reduce}<keepdims = 0>(piece, axes)\n row = Unsqueeze(r, axes)"
    )


X = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
X0 = np.full((2, 3), 7, np.float32)


def _feeds(m: int, x: np.ndarray = X, x0: np.ndarray = X0) -> dict[str, np.ndarray]:
    return {"x": x, "x0": x0, "m": np.array(m, np.int64)}


def _loops(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "Loop"]


def _refusals(model: onnx.ModelProto, **options: object) -> list[str]:
    """The reasons the rule gives, on every node it looked at, at the fixpoint."""
    lowered = ir.from_proto(model)
    NormalizePass(Options(**options))(lowered)  # type: ignore[arg-type]
    lowering = LowerSequencesPass(WITHOUT_BATCHING, Options(**options))  # type: ignore[arg-type]
    lowering(lowered)
    return [r for rs in lowering.refusals.values() for r in rs if r.startswith(RULE)]


@pytest.mark.parametrize("m", [0, 1, 3])
def test_rows_appended_along_axis_0_become_a_scan_output(m):
    model = parse(
        _grow("grown = Concat<axis = 0>(acc, row)", extra=_rows("ReduceSum"))
    )  # fmt: skip
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m), target="generic")
    sums = [(X * (i + 1)).sum(0) for i in range(m)]
    np.testing.assert_array_equal(y, np.concatenate([X0, *[s[None] for s in sums]]))
    assert _fired(report) == {RULE: 1}
    (loop,) = _loops(lowered)
    body = loop.attribute[0].g
    assert len(loop.input) == 3  # m, cond, k: the accumulator is no longer carried
    assert "Concat" not in {n.op_type for n in body.node}
    assert len(body.output) == 3  # cond, k, and the scan output of the row


@pytest.mark.parametrize("m", [0, 2])
@pytest.mark.parametrize("axis", [1, -1])
@pytest.mark.parametrize(
    "column",
    [
        "col = ReduceSum<keepdims = 1>(piece, axes)",  # a piece of size 1 along the axis
        "csum = ReduceSum<keepdims = 0>(piece, axes)\n col = Unsqueeze(csum, axes)",
    ],
)
def test_columns_appended_along_axis_1_are_transposed_after_the_loop(m, axis, column):
    update = f"grown = Concat<axis = {axis}>(acc, col)"
    extra = f"axes = Constant<value = int64[1] {{1}}>()\n {column}"
    model = parse(_grow(update, start="Transpose(x0)", extra=extra, x_type="float[3,4]"))
    x = X.reshape(3, 4)
    feeds = {"x": x, "x0": np.ones((4, 3), np.float32), "m": np.array(m)}
    lowered, report, (y, _) = _lower_and_compare(model, feeds, target="generic")
    cols = [(x * (i + 1)).sum(1, keepdims=True) for i in range(m)]
    np.testing.assert_array_equal(y, np.concatenate([np.ones((3, 4), np.float32), *cols], 1))
    assert _fired(report) == {RULE: 1}
    assert op_counts(lowered)["Transpose"] == 2  # the initial value's, and the stacked columns'


@pytest.mark.parametrize("m", [0, 1, 3])
def test_pieces_of_two_rows_are_merged_into_the_axis(m):
    update = "grown = Concat<axis = 0>(acc, two)"
    extra = (
        "s0 = Constant<value = int64[1] {0}>()\n s2 = Constant<value = int64[1] {2}>()\n"
        "two = Slice(piece, s0, s2, s0)"
    )
    model = parse(_grow(update, extra=extra, x_type="float[4,3]"))
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m), target="generic")
    np.testing.assert_array_equal(y, np.concatenate([X0, *[X[:2] * (i + 1) for i in range(m)]]))
    assert _fired(report) == {RULE: 1}
    assert op_counts(lowered)["Reshape"] == 1


@pytest.mark.parametrize("m", [0, 1, 3])
def test_pieces_of_a_run_time_size_that_never_changes_are_merged_too(m):
    update = "grown = Concat<axis = 0>(acc, piece)"  # N rows each time, N known at run time
    model = parse(_grow(update))
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m), target="generic")
    np.testing.assert_array_equal(y, np.concatenate([X0, *[X * (i + 1) for i in range(m)]]))
    assert _fired(report) == {RULE: 1}
    x = X[:1]  # another N
    assert_same_outputs(model, lowered, _feeds(m, x=x))


@pytest.mark.parametrize("m", [0, 1, 3])
@pytest.mark.parametrize("pieces", ["piece", "two"])
def test_an_accumulator_that_starts_empty_is_the_stacked_pieces_alone(m, pieces):
    """Nothing to join the pieces to: no Concat after the loop; the pieces' static dims but the
    axis make the merging Reshape's target a constant (-1 at the axis), no Shape read."""
    extra = (
        "s0 = Constant<value = int64[1] {0}>()\n s2 = Constant<value = int64[1] {2}>()\n"
        "two = Slice(piece, s0, s2, s0)"
    )
    empty = "Constant<value = float[0,3] {}>()"
    model = parse(_grow(f"grown = Concat<axis = 0>(acc, {pieces})", start=empty, extra=extra))
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m), target="generic")
    rows = X if pieces == "piece" else X[:2]
    np.testing.assert_array_equal(
        y.reshape(-1, 3),
        np.concatenate([rows * (i + 1) for i in range(m)] or [np.zeros((0, 3), np.float32)]),
    )
    assert y.shape == (rows.shape[0] * m, 3)
    assert _fired(report) == {RULE: 1}
    counts = op_counts(lowered)
    assert "Concat" not in counts and "Shape" not in counts and counts["Reshape"] == 1


@pytest.mark.parametrize("m", [0, 2])
def test_pieces_of_zero_rows_at_run_time_are_merged_as_zero_rows(m):
    """The Reshape after the loop gets a 0 (m pieces of 0 rows): allowzero makes it a size,
    not "copy the input's dim"."""
    model = parse(_grow("grown = Concat<axis = 0>(acc, piece)"))
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m, x=X[:0]), target="generic")
    np.testing.assert_array_equal(y, X0)
    assert _fired(report) == {RULE: 1}
    (reshape,) = [n for n in lowered.graph.node if n.op_type == "Reshape"]
    assert onnx.helper.get_attribute_value(reshape.attribute[0]) == 1  # allowzero


def test_before_opset_14_a_dim_that_may_be_0_keeps_the_accumulator_and_says_why():
    old = parse(_grow("grown = Concat<axis = 0>(acc, piece)"), 13)
    (reason,) = _refusals(old)
    assert "before opset 14 a Reshape reads 0" in reason
    _, report, _ = _lower_and_compare(old, _feeds(2, x=X[:0]), target="generic")
    assert RULE not in report.rules_fired
    # pieces of one static row need no Reshape: opset 13 is enough
    rows = parse(_grow("grown = Concat<axis = 0>(acc, row)", extra=_rows("ReduceSum")), 13)
    assert _fired(_lower_and_compare(rows, _feeds(2), target="generic")[1]) == {RULE: 1}


@pytest.mark.parametrize("target", ["generic", "tract"])
@pytest.mark.parametrize("m", [0, 1, 3])
def test_a_prepend_is_reversed_once_after_the_loop(m, target):
    model = parse(
        _grow("grown = Concat<axis = 0>(row, acc)", extra=_rows("ReduceMax"))
    )  # fmt: skip
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m), target=target)
    rows = [(X * (i + 1)).max(0)[None] for i in reversed(range(m))]
    np.testing.assert_array_equal(y, np.concatenate([*rows, X0]))
    assert report.rules_fired[RULE] == 1
    # tract cannot Slice a run-time dim with step -1: there the stack is reversed by a Gather
    (reverse,) = [n.op_type for n in lowered.graph.node if n.name.endswith("/reversed")]
    assert reverse == ("Gather" if target == "tract" else "Slice")


def test_identity_and_casts_to_its_own_type_on_the_way_in_are_passed():
    update = (
        "same = Cast<to = 1>(acc)\n via = Identity(same)\n"
        "row32 = Cast<to = 1>(row)\n grown = Concat<axis = 0>(via, row32)"
    )
    model = parse(_grow(update, extra=_rows("ReduceMin")))
    lowered, report, _ = _lower_and_compare(model, _feeds(3), target="generic")
    assert _fired(report) == {RULE: 1}
    body = _loops(lowered)[0].attribute[0].g
    ops = [n.op_type for n in body.node]
    assert "Concat" not in ops and "Unsqueeze" not in ops
    assert ops.count("Cast") == 1  # the scale's


_IF_GROWS = """cond = Greater(total, zero)
        grown = If(cond) <then_branch = then_graph () => (float[?,?] g1) {{
            {piece}
            g1 = Concat<axis = 0>(acc, row)
        }}, else_branch = else_graph () => (float[?,?] g2) {{
            g2 = Identity(acc)
        }}>"""


@pytest.mark.parametrize(
    "piece",
    [
        "row = Relu(r)",  # cannot fail: computed in every iteration, the If goes
        "idx = Constant<value = int64[1] {0}>()\n row = Gather(rows, idx)",  # stays in the If
    ],
)
@pytest.mark.parametrize("m", [0, 1, 4])
def test_a_conditional_growth_becomes_a_scan_output_and_a_mask(piece, m):
    extra = (
        "axes = Constant<value = int64[1] {0}>()\n r0 = ReduceSum<keepdims = 0>(piece, axes)\n"
        "r = Unsqueeze(r0, axes)\n rows = Identity(r)\n total = ReduceSum<keepdims = 0>(r0)\n"
        "ten = Constant<value = float {10}>()\n zero = Sub(total, ten)\n"
        "zero2 = Constant<value = float {0}>()"
    )
    x = np.array([[1, -2, 3], [2, 0, -4], [1, 1, 1], [0, 0, 1]], np.float32)
    update = _IF_GROWS.format(piece=piece).replace("Greater(total, zero)", "Greater(zero, zero2)")
    model = parse(_grow(update, extra=extra, x_type="float[4,3]"))
    lowered, report, (y, _) = _lower_and_compare(model, _feeds(m, x=x), target="portable")
    rows = [(x * (i + 1)).sum(0)[None] for i in range(m)]
    kept = [np.maximum(r, 0) if "Relu" in piece else r for r in rows if r.sum() > 10]
    np.testing.assert_array_equal(y, np.concatenate([X0, *kept]))
    assert _fired(report) == {RULE: 1}
    assert op_counts(lowered)["Compress"] == 1


def test_a_piece_whose_size_changes_keeps_the_accumulator_and_says_why():
    extra = (
        "s0 = Constant<value = int64[1] {0}>()\n ax = Constant<value = int64[1] {0}>()\n"
        "stop = Unsqueeze(next, ax)\n prefix = Slice(piece, s0, stop, s0)"
    )
    model = parse(_grow("grown = Concat<axis = 0>(acc, prefix)", extra=extra))
    lowered, report, _ = _lower_and_compare(model, _feeds(3), target="portable")
    assert RULE not in report.rules_fired
    assert op_counts(lowered)["Concat"] == 1
    assert any("may change between iterations" in r for r in _refusals(model, target="portable"))


@pytest.mark.parametrize(
    "whole",
    [
        # x[:, 0:] of a prefix, as TorchScript writes it: axis 0 is copied whole by bounds
        # 0..INT64_MAX that say nothing of its size
        "big = Constant<value = int64[1] {9223372036854775807}>()\n"
        " one1 = Constant<value = int64[1] {1}>()\n"
        " whole = Slice(prefix, s0, big, ax)\n cut = Slice(whole, s0, big, one1)",
        # which axes a Slice cuts is not known (they are computed)
        "big = Constant<value = int64[1] {9223372036854775807}>()\n"
        " one1 = Constant<value = int64[1] {1}>()\n shp = Shape(one1)\n"
        " axes = Sub(shp, one1)\n cut = Slice(prefix, s0, big, axes)",
    ],
)
def test_a_static_slice_of_a_piece_whose_size_changes_still_changes(whole):
    # the per-image boxes of torchvision's MultiScaleRoIAlign (`torch.full_like(b[:, :1], i)`
    # over boxes split per image): a slice with fixed bounds of a dim that changes between
    # iterations was taken for a dim fixed for the loop, and the scan output failed at run time
    extra = (
        "s0 = Constant<value = int64[1] {0}>()\n ax = Constant<value = int64[1] {0}>()\n"
        f"stop = Unsqueeze(next, ax)\n prefix = Slice(piece, s0, stop, s0)\n {whole}"
    )
    start, prelude = "Slice(x0, s, s, s)", "s = Constant<value = int64[1] {0}>()"  # no rows
    model = parse(_grow("grown = Concat<axis = 0>(acc, cut)", start, extra=extra, prelude=prelude))
    for m in (0, 1, 3):
        _, report, (y, _) = _lower_and_compare(model, _feeds(m), target="portable")
        want = [(X * (i + 1))[: i + 1] for i in range(m)]
        np.testing.assert_array_equal(y, np.concatenate([X0[:0], *want]))
    assert RULE not in report.rules_fired
    assert any("may change between iterations" in r for r in _refusals(model, target="portable"))


def test_an_accumulator_read_in_the_body_stays():
    extra = (
        "axes = Constant<value = int64[1] {0}>()\n r = ReduceSum<keepdims = 1>(acc, axes)\n"
        "row = Add(r, scale)"
    )
    model = parse(_grow("grown = Concat<axis = 0>(acc, row)", extra=extra))
    _, report, _ = _lower_and_compare(model, _feeds(3), target="portable")
    assert RULE not in report.rules_fired
    assert any("not only concatenates" in r for r in _refusals(model, target="portable"))


def test_a_while_loop_that_stops_early_stacks_only_the_iterations_run():
    condition = "limit = Constant<value = int64 {2}>()\n c2 = Less(i, limit)"
    model = parse(
        _grow("grown = Concat<axis = 0>(acc, row)", extra=_rows("ReduceSum"),
              condition=condition)
    )  # fmt: skip
    for m in (0, 1, 5):
        _, report, (y, _) = _lower_and_compare(model, _feeds(m), target="generic")
        assert y.shape == (2 + min(m, 3), 3)
        assert _fired(report) == {RULE: 1}


def test_int64_accumulators_and_a_model_output_are_kept_exact():
    text = """g (int64[3] x, int64 m) => (int64[?,3] y) {
        t = Constant<value = bool {1}>()
        start = Constant<value = int64[1,3] {1, 2, 3}>()
        y = Loop(m, t, start) <body = body (int64 i, bool c, int64[?,3] acc)
                                          => (bool c2, int64[?,3] grown) {
            c2 = Identity(c)
            p = Mul(x, i)
            axes = Constant<value = int64[1] {0}>()
            row = Unsqueeze(p, axes)
            grown = Concat<axis = 0>(acc, row)
        }>
    }"""
    model = parse(text)
    x = np.array([4, -5, 6], np.int64)
    for m in (0, 3):
        _, report, (y,) = _lower_and_compare(model, {"x": x, "m": np.array(m)})
        expected = np.concatenate([[[1, 2, 3]], *[(x * i)[None] for i in range(m)]])
        np.testing.assert_array_equal(y, expected)
        assert y.dtype == np.int64
        assert _fired(report) == {RULE: 1}


def test_a_single_static_iteration_keeps_the_accumulator_for_speed_first_targets():
    """One iteration saves one Concat; reshaping N rows after the loop costs more."""
    model = parse(
        _grow("grown = Concat<axis = 0>(acc, piece)", trip="once",
              prelude="once = Constant<value = int64 {1}>()")
    )  # fmt: skip
    _, report, _ = _lower_and_compare(model, _feeds(1), target="onnxruntime")
    assert RULE not in report.rules_fired
    reason = "over 1 iterations the accumulator costs fewer operator launches"
    assert any(reason in r for r in _refusals(model, target="onnxruntime"))
    for target in ("generic", "openvino"):  # every other target lowers all it can
        _, report, _ = _lower_and_compare(model, _feeds(1), target=target)
        assert _fired(report) == {RULE: 1}


def test_lowering_twice_changes_nothing_more():
    model = parse(
        _grow("grown = Concat<axis = 0>(acc, row)", extra=_rows("ReduceSum"))
    )  # fmt: skip
    for target in ("generic", "openvino", "tract"):
        once, _ = seqlower.optimize(model, target=target)
        twice, report = seqlower.optimize(once, target=target)
        assert report.rules_fired == {}
        assert twice.SerializeToString() == once.SerializeToString()


@pytest.mark.parametrize("case", ["pyramid", "split_k", "range_n", "prepend"])
@pytest.mark.parametrize("target", ["generic", "tensorrt", "openvino"])
def test_the_list_accumulator_and_this_rule_never_undo_each_other(case, target):
    """`loop-append-to-concat` makes tensor accumulators of lists whose pieces change shape;
    this rule refuses exactly those: a second run finds nothing to do."""
    path = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_loops" / case / "model.onnx"
    once, _ = seqlower.optimize(onnx.load(path), target=target)
    twice, report = seqlower.optimize(once, target=target)
    assert report.rules_fired == {}
    assert twice.SerializeToString() == once.SerializeToString()


# rows of a run-time width kept by a condition: the Reshape after the loop needs the count
KEPT_ROWS = """g (float[N,C] x, float[K,C] x0, int64 m) => (float[?,C] y) {
    t = Constant<value = bool {1}>()
    y = Loop(m, t, x0) <body = body (int64 i, bool c, float[?,C] acc)
                                 => (bool c2, float[?,C] grown) {
        c2 = Identity(c)
        one = Constant<value = int64 {1}>()
        next = Add(i, one)
        scale = Cast<to = 1>(next)
        piece = Mul(x, scale)
        axes = Constant<value = int64[1] {0}>()
        row = ReduceSum<keepdims = 1>(piece, axes)
        total = ReduceSum<keepdims = 0>(row)
        ten = Constant<value = float {10}>()
        cond = Greater(total, ten)
        grown = If(cond) <then_branch = then_graph () => (float[?,C] g1) {
            g1 = Concat<axis = 0>(acc, row)
        }, else_branch = else_graph () => (float[?,C] g2) {
            g2 = Identity(acc)
        }>
    }>
}"""


@pytest.mark.parametrize("target", ["portable", "openvino", "onnxruntime", "tract"])
@pytest.mark.parametrize("m", [0, 1, 4])
def test_the_rows_a_mask_keeps_are_counted_from_the_mask_for_portable_targets(target, m):
    """The Reshape after the loop gives the kept rows their count: read from the mask
    (ReduceSum of it) for a portable target, which OpenVINO keeps when the loop runs zero times
    (tests/targets/test_runtimes.py), from the stacked rows' own dim for --target onnxruntime
    and for tract (whose shape analysis cannot read a count from values)."""
    x = np.array([[1, -2, 3, 4], [2, 0, -4, 1], [1, 1, 1, 1]], np.float32)
    x0 = np.full((2, 4), 7, np.float32)
    feeds = {"x": x, "x0": x0, "m": np.array(m, np.int64)}
    lowered, report, (y,) = _lower_and_compare(parse(KEPT_ROWS), feeds, target=target)
    rows = [(x * (i + 1)).sum(0)[None] for i in range(m)]
    np.testing.assert_array_equal(y, np.concatenate([x0, *[r for r in rows if r.sum() > 10]]))
    assert report.rules_fired[RULE] == 1
    counts = op_counts(lowered)
    assert counts.get("Compress", 0) + counts.get("NonZero", 0) == 1  # tract's Compress: NonZero
    counted = target not in ("onnxruntime", "tract")
    assert counts.get("ReduceSum", 0) == 2 + counted  # the body's two, and the count's
    if counted:  # Reshape(rows, Concat(ReduceSum(Cast(mask)), ..))
        made = {out: n for n in lowered.graph.node for out in n.output}
        concat = made[next(n for n in lowered.graph.node if n.op_type == "Reshape").input[1]]
        assert made[concat.input[0]].op_type == "ReduceSum"


# pieces that cannot be joined to the initial value: the Concat in the body fails whenever it
# runs, so the model runs only where it never does (no iteration, a condition never true); the
# rows' width 4 is a value (a Range to x's declared width), which ONNX inference does not see
CLASHING_ROWS = """g (float[N,4] x, int64 m) => (float[?,?] y) {
    t = Constant<value = bool {1}>()
    start = Constant<value = START>()
    y = Loop(m, t, start) <body = body (int64 i, bool c, float[?,?] acc)
                                    => (bool c2, float[?,?] grown) {
        c2 = Identity(c)
        k = Shape<start = 1, end = 2>(x)
        width = Squeeze(k)
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        positions = Range(zero, width, one)
        scaled = Mul(positions, i)
        row = Cast<to = 1>(scaled)
        axes = Constant<value = int64[1] {0}>()
        piece = Unsqueeze(row, axes)
        grown = Concat<axis = 0>(acc, piece)
    }>
}"""


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
@pytest.mark.parametrize("start", ["float[0,3] {}", "float[1,3] {1, 2, 3}"])
def test_pieces_of_another_size_than_the_initial_value_keep_the_accumulator_and_say_why(
    target, start
):
    """A start of width 3 grown by rows of 4: stacked and joined once after the loop, the
    Concat was ill-typed (the lowered model failed the checker) even for a loop of no
    iteration, where the input model runs. (onnxruntime joins an empty start to rows of
    any width, the specification does not: kept as it is, the model does what it did.)"""
    model = parse(CLASHING_ROWS.replace("START", start))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    lowered, report, (y,) = _lower_and_compare(model, {"x": x, "m": np.array(0)}, target=target)
    assert y.shape == ((0, 3) if "[0,3]" in start else (1, 3))
    assert RULE not in report.rules_fired
    assert op_counts(lowered)["Concat"] == 1  # the accumulator stays
    (reason,) = _refusals(model, target=target)
    assert "initial value has size 3 along axis 1 and the pieces joined to it size 4" in reason
    if "[0,3]" in start:
        assert_same_outputs(model, lowered, {"x": x, "m": np.array(2)})
    else:
        assert_both_fail(model, lowered, {"x": x, "m": np.array(2)})


# a start of rank 3 grown, when a row sums to more than 0, by rows of rank 2
CLASHING_RANKS = """g (float[N,3] x) => (float[?,?,?] y) {
    t = Constant<value = bool {1}>()
    n = Shape<start = 0, end = 1>(x)
    three = Constant<value = int64[2] {3, 3}>()
    dims = Concat<axis = 0>(n, three)
    start = ConstantOfShape(dims)
    m = Squeeze(n)
    y = Loop(m, t, start) <body = body (int64 i, bool c, float[?,?] acc)
                                  => (bool c2, float[?,?] grown) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        total = ReduceSum<keepdims = 0>(row)
        zero = Constant<value = float {0}>()
        cond = Greater(total, zero)
        grown = If(cond) <then_branch = then_graph () => (float[?,?] g1) {
            axes = Constant<value = int64[1] {0}>()
            piece = Unsqueeze(row, axes)
            [grow] g1 = Concat<axis = 0>(acc, piece)
        }, else_branch = else_graph () => (float[?,?] g2) {
            g2 = Identity(acc)
        }>
    }>
}"""


def test_pieces_of_another_rank_than_the_initial_value_keep_the_accumulator_and_say_why(tmp_path):
    """A start of rank 3 grown, when a row sums to more than 0, by rows of rank 2: the input
    model runs where no row does; the Concat joined after the loop was ill-typed. Kept, the
    body's Concat is seen by the checker once the start's rank reaches the body (onnxruntime
    then refuses to load the model too): the command line says the input is invalid there
    (exit 2), never an internal error (exit 3)."""
    model = parse(CLASHING_RANKS)
    (reason,) = _refusals(model, target="portable")
    assert "initial value has rank 3 and the pieces joined to it rank 2" in reason
    _, report = seqlower.optimize(model, target="portable")
    assert RULE not in report.rules_fired
    negative = {"x": -np.ones((2, 3), np.float32)}  # no row grows it: the input model runs
    assert run_ort(model, negative)[0].shape == (2, 3, 3)
    with pytest.raises(Exception, match="Ranks of input data are different"):
        run_ort(model, {"x": np.ones((2, 3), np.float32)})
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    command = [sys.executable, "-m", "seqlower", "optimize", str(path), str(tmp_path / "out.onnx")]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "the input model itself is invalid at Concat 'grow'" in done.stderr
