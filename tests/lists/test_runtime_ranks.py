"""Lists whose elements' rank is known only at run time (`seqlower.lists.unranked`).

An element made by a Reshape to a shape of run-time length, or a model input declared with no
shape, has no rank before the model runs: ONNX shape inference gives none and no rank rule can.
For the targets that take such tensors (generic, onnxruntime) the list becomes three tensors
(data, shapes one after the other, a table of sizes and ranks); for the others it stays, and the
reason says why (`seqlower.runtime_ranks`). Checked: what is emitted (no sequence operator, the
checker's full check, the same bytes twice), what each target refuses and why, and the numbers
against the original under onnxruntime (positions from the end, empty lists, elements of
different ranks, int64, bool and float16 elements).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import (
    assert_both_fail,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app
from seqlower.rule import RuleSet
from seqlower.runtime_ranks import (
    OPENVINO_PROBE,
    REFUSALS,
    RESHAPE_REFUSALS,
    TRACT_PROBE,
    refusal,
)
from seqlower.targets import PROFILES, check_target, judge_nodes

NO_RULES = RuleSet([])  # every sequence operator left to the tensor form of lists

# w has the rank of `shape`'s length, known only at run time; x has rank 2: one list holds both
EDITS = """
g (float[12] v, int64[R] shape, float[2,3] x, int64 p, int64 q, int64 r)
    => (float[?] flat, int64[?] dims, int64 n) {
    w = Reshape (v, shape)
    s = SequenceConstruct (x, w)
    t = SequenceInsert (s, w, p)
    ten = Constant <value = float {10}> ()
    w2 = Mul (w, ten)
    u = SequenceInsert (t, w2)
    e = SequenceErase (u, q)
    at = SequenceAt (e, r)
    minus = Constant <value = int64[1] {-1}> ()
    flat = Reshape (at, minus)
    dims = Shape (at)
    n = SequenceLength (e)
}"""


def _feeds(shape, **positions):
    feeds = {
        "v": np.arange(12, dtype=np.float32) - 3,
        "shape": np.array(shape, np.int64),
        "x": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    }
    feeds.update({k: np.array(v, np.int64) for k, v in positions.items()})
    return feeds


def tiers(report) -> set[str]:
    return {node.tier for node in report.nodes}


def test_edits_at_every_position_compute_what_the_original_does():
    model = parse(EDITS)
    lowered, report = lower(model, target="generic", rules=NO_RULES)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    assert "Loop" not in op_counts(lowered)
    # the list has 4 elements before the erase: p in [-2, 2], q and r in range
    for shape in ([12], [3, 4], [2, 3, 2], [1, 2, 1, 6], [12, 1, 1, 1, 1]):
        for p, q, r in [(0, 0, 0), (2, -1, -1), (-2, 1, 2), (1, -4, -3), (-1, 3, 1), (2, 0, -1)]:
            assert_same_outputs(model, lowered, _feeds(shape, p=p, q=q, r=r))
    # out of range: both fail
    for p, q, r in [(3, 0, 0), (-3, 0, 0), (0, 4, 0), (0, -5, 0), (0, 0, 3), (0, 0, -4)]:
        assert_both_fail(model, lowered, _feeds([3, 4], p=p, q=q, r=r))


# ConcatFromSequence of elements whose rank is known only at run time, along every kind of axis
CONCAT = """
g (float[V] v, int64[R] shape) => (float[?] flat, int64[?] dims) {{
    w = Reshape <allowzero = 1> (v, shape)
    two = Constant <value = float {{2}}> ()
    w2 = Mul (w, two)
    s = SequenceConstruct (w, w2)
    t = SequenceInsert (s, w)
    y = ConcatFromSequence <axis = {axis}, new_axis = {new_axis}> (t)
    minus = Constant <value = int64[1] {{-1}}> ()
    flat = Reshape (y, minus)
    dims = Shape (y)
}}"""


@pytest.mark.parametrize(
    ("axis", "new_axis", "loop"),
    [(0, 0, False), (0, 1, False), (1, 0, True), (-1, 0, True), (-1, 1, True), (2, 1, True)],
)
def test_concatenation_along_any_axis(axis, new_axis, loop):
    """Axis 0 is one Reshape of the data; any other axis (a negative one counts from an end
    known only at run time) is a Loop over the elements."""
    model = parse(CONCAT.format(axis=axis, new_axis=new_axis))
    lowered, report = lower(model, target="generic", rules=NO_RULES)  # the rules take it else
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    assert ("Loop" in op_counts(lowered)) == loop
    for shape in ([24], [4, 6], [2, 3, 4], [2, 2, 3, 2], [0, 5], [3, 0], [2, 0, 3]):
        v = np.arange(np.prod(shape), dtype=np.float32) - 5
        # a rank below the axis fails in both (ConcatFromSequence, Concat: "axis not in range")
        assert_same_or_both_fail(model, lowered, {"v": v, "shape": np.array(shape)})


# a loop appends (or prepends) an element of run-time rank m times; the list starts empty
LOOP = """
g (float[V] v, int64[R] shape, int64 m) => (int64 n, float[?] flat, int64[?] dims, float[?] last) {{
    w = Reshape <allowzero = 1> (v, shape)
    e = SequenceEmpty <dtype = 1> ()
    s = Loop (m, , e) <body = body (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) out) {{
        fi = Cast <to = 1> (i)
        wi = Add (w, fi)
        {insert}
        c2 = Identity (c)
    }}>
    n = SequenceLength (s)
    y = ConcatFromSequence <axis = 0> (s)
    minus = Constant <value = int64[1] {{-1}}> ()
    flat = Reshape (y, minus)
    dims = Shape (y)
    last1 = Constant <value = int64 {{-1}}> ()
    l = SequenceAt (s, last1)
    last = Reshape (l, minus)
}}"""


@pytest.mark.parametrize(
    "insert",
    [
        "out = SequenceInsert (acc, wi)",
        "zero = Constant <value = int64 {0}> ()\n        out = SequenceInsert (acc, wi, zero)",
    ],
    ids=["append", "prepend"],
)
@pytest.mark.parametrize("rules", [None, NO_RULES], ids=["rules", "carried"])
def test_a_loop_builds_a_list_of_elements_of_run_time_rank(insert, rules):
    """With every rule (as by default) the appends become a scan output, split into the list;
    with none the Loop carries the list's three tensors."""
    model = parse(LOOP.format(insert=insert))
    lowered, report = lower(model, target="generic", rules=rules)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert "unranked" in tiers(report)
    if rules is NO_RULES:  # the Loop carries data, dims and table
        (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
        assert len(loop.input) == 2 + 3
    for shape in ([6], [2, 3], [3, 1, 2], [0, 2]):
        v = np.arange(np.prod(shape), dtype=np.float32)
        for m in (0, 1, 3):  # none: the concatenation of an empty list fails in both
            feeds = {"v": v, "shape": np.array(shape), "m": np.array(m)}
            if m:
                assert_same_outputs(model, lowered, feeds)
            else:
                assert_both_fail(model, lowered, feeds)


# two elements of ranks known only at run time, of any element type
TYPED = """
g ({t}[A] va, int64[R] ra, {t}[B] vb, int64[S] rb, int64 p, int64 q)
    => ({t}[?] flat, int64[?] dims, int64 n) {{
    a = Reshape <allowzero = 1> (va, ra)
    b = Reshape <allowzero = 1> (vb, rb)
    s = SequenceConstruct (a, b)
    t = SequenceInsert (s, a, p)
    u = SequenceErase (t, q)
    at = SequenceAt (u, q)
    minus = Constant <value = int64[1] {{-1}}> ()
    flat = Reshape (at, minus)
    dims = Shape (at)
    n = SequenceLength (u)
}}"""


@pytest.mark.parametrize(
    ("dtype", "numpy_type"),
    [("float", np.float32), ("int64", np.int64), ("bool", np.bool_), ("float16", np.float16)],
)
def test_element_types(dtype, numpy_type):
    model = parse(TYPED.format(t=dtype))
    lowered, report = lower(model, target="generic", rules=NO_RULES)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    rng = np.random.default_rng(7)
    ran = 0
    for shape_a, shape_b in [((2, 3), (1, 3)), ((4,), (0,)), ((), ()), ((1, 2, 2), (3, 2, 2))]:
        va = (rng.standard_normal(int(np.prod(shape_a))) * 5).astype(numpy_type)
        vb = (rng.standard_normal(int(np.prod(shape_b))) * 5).astype(numpy_type)
        for p, q in [(0, 0), (2, -1), (-1, 1), (-2, -3), (1, 2), (3, 0), (0, 3)]:
            ranks = {"ra": np.array(shape_a, np.int64), "rb": np.array(shape_b, np.int64)}
            feeds = {"va": va, "vb": vb, "p": np.array(p), "q": np.array(q), **ranks}
            try:
                run_ort(model, feeds)
            except Exception:  # p or q out of range
                assert_both_fail(model, lowered, feeds)
                continue
            assert_same_outputs(model, lowered, feeds)
            ran += 1
    assert ran == 12  # 3 valid (p, q) of 7, for each pair of shapes


@pytest.mark.parametrize("rules", [None, NO_RULES], ids=["rules", "carried"])
def test_the_lowering_is_deterministic(rules):
    text = LOOP.format(insert="out = SequenceInsert (acc, wi)")
    first, _ = lower(parse(text), target="generic", rules=rules)
    second, _ = lower(parse(text), target="generic", rules=rules)
    assert sequence_op_count(first) == 0
    assert first.SerializeToString() == second.SerializeToString()


# SplitToSequence of a tensor whose rank is known only at run time
SPLIT = """
g (float[V] v, int64[R] shape, int64[K] sizes, int64 p)
    => (float[?] flat, int64[?] dims, int64 n) {{
    w = Reshape <allowzero = 1> (v, shape)
    s = SplitToSequence <axis = {axis}{keepdims}> (w{split})
    at = SequenceAt (s, p)
    minus = Constant <value = int64[1] {{-1}}> ()
    flat = Reshape (at, minus)
    dims = Shape (at)
    n = SequenceLength (s)
}}"""


@pytest.mark.parametrize(
    ("keepdims", "split"),
    [("", ""), (", keepdims = 0", ""), ("", ", sizes"), ("", ", two")],
    ids=["ones", "unbind", "sizes", "scalar"],
)
def test_a_split_along_axis_0_needs_no_rank(keepdims, split):
    text = SPLIT.format(axis=0, keepdims=keepdims, split=split)
    if split == ", two":
        text = text.replace("    s = ", "    two = Constant <value = int64 {2}> ()\n    s = ")
    model = parse(text)
    lowered, report = lower(model, target="generic", rules=NO_RULES)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    ran = 0
    for shape in ([5], [5, 2], [3, 2, 2], [4, 0, 3], [5, 1, 1, 2]):
        for p in (0, 2, -1, -2, 7):
            feeds = {
                "v": np.arange(np.prod(shape), dtype=np.float32),
                "shape": np.array(shape),
                "sizes": np.array({5: [1, 3, 1], 3: [2, 0, 1], 4: [2, 0, 1, 1]}[shape[0]]),
                "p": np.array(p),
            }
            try:
                run_ort(model, feeds)
            except Exception:  # p out of range
                assert_both_fail(model, lowered, feeds)
                continue
            assert_same_outputs(model, lowered, feeds)
            ran += 1
    assert ran >= 12


@pytest.mark.parametrize("axis", [1, -1])
def test_a_split_along_another_axis_is_refused_with_why(axis):
    model = parse(SPLIT.format(axis=axis, keepdims="", split=""))
    lowered, report = lower(model, target="generic", load_ort=False)
    assert sequence_op_count(lowered) == 3
    counted = ", which counts from the end" if axis < 0 else ""
    assert (
        "the rank of the input is unknown, so no tensor holds its elements (split along axis "
        f"{axis}{counted}: only a split along axis 0 can do without the rank)"
    ) in reasons(report)


# a split of a tensor of known rank, into which an element of run-time rank is put
SPLIT_KNOWN = """
g (float[N,4] x, float[V] v, int64[R] shape, int64[K] sizes, int64 p)
    => (float[?] flat, int64[?] dims, int64 n) {{
    s = SplitToSequence <axis = {axis}{keepdims}> (x{split})
    w = Reshape <allowzero = 1> (v, shape)
    t = SequenceInsert (s, w, p)
    at = SequenceAt (t, p)
    minus = Constant <value = int64[1] {{-1}}> ()
    flat = Reshape (at, minus)
    dims = Shape (at)
    n = SequenceLength (t)
}}"""


@pytest.mark.parametrize(
    ("axis", "keepdims", "split"),
    [(0, ", keepdims = 0", ""), (1, "", ""), (1, "", ", sizes"), (-1, ", keepdims = 0", "")],
    ids=["unbind", "columns", "column-sizes", "unbind-last"],
)
def test_a_split_of_known_rank_shares_a_list_with_an_element_of_run_time_rank(
    axis, keepdims, split
):
    model = parse(SPLIT_KNOWN.format(axis=axis, keepdims=keepdims, split=split))
    lowered, report = lower(model, target="generic", rules=NO_RULES)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 4
    for shape in ([6], [2, 3], [1, 2, 3, 1]):
        for p in (0, 1, -1, -2):
            feeds = {"x": x, "v": np.arange(6, dtype=np.float32), "shape": np.array(shape),
                     "sizes": np.array([1, 0, 3]), "p": np.array(p)}  # fmt: skip
            assert_same_outputs(model, lowered, feeds)


# an If returns a list of elements of run-time rank from both branches, of different lengths
BRANCHES = """
g (float[V] v, int64[R] shape, float[2,2] x, bool c, int64 p) => (float[?] flat, int64 n) {
    w = Reshape <allowzero = 1> (v, shape)
    s = If (c) <then_branch = t () => (seq(float) a) {
        a = SequenceConstruct (w, x, w)
    }, else_branch = e () => (seq(float) b) {
        b = SequenceConstruct (x)
    }>
    at = SequenceAt (s, p)
    minus = Constant <value = int64[1] {-1}> ()
    flat = Reshape (at, minus)
    n = SequenceLength (s)
}"""


def test_an_if_returns_the_three_tensors_from_both_branches():
    model = parse(BRANCHES)
    lowered, report = lower(model, target="generic", rules=NO_RULES)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert tiers(report) == {"unranked"}
    for shape in ([6], [2, 3], [1, 2, 3]):
        for c, p in [(True, 0), (True, -2), (True, 2), (False, 0), (False, -1)]:
            feeds = {
                "v": np.arange(6, dtype=np.float32),
                "shape": np.array(shape),
                "x": np.eye(2, dtype=np.float32),
                "c": np.array(c),
                "p": np.array(p),
            }
            assert_same_outputs(model, lowered, feeds)


# -- the targets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", sorted(REFUSALS))
def test_the_targets_that_need_ranks_refuse_and_say_why(target):
    model = parse(EDITS)
    lowered, report = seqlower.optimize(model, target=target, rules=NO_RULES)
    assert sequence_op_count(lowered) == sequence_op_count(model)
    why = (
        "the rank of 'w', put into it, is unknown (made by Reshape to a shape of run-time "
        f"length: a rank known only at run time); {REFUSALS[target]}"
    )
    assert all(op.reason == why for op in report.remaining), reasons(report)
    check = check_target(lowered, report, target)
    assert any(why in message for message in [*check.errors, *check.warnings])


def test_the_refusals_name_the_runtime_and_what_it_said():
    assert "shape input is variable" in REFUSALS["tract"]
    assert "tract 0.23.9" in REFUSALS["tract"]
    assert "doesn't support Reshape operation with dynamic rank" in REFUSALS["openvino"]
    assert "OpenVINO 2026.4.1" in REFUSALS["openvino"]
    for text in REFUSALS.values():  # words for users: no internal names
        assert "unranked" not in text and "layout" not in text


def test_generic_lowers_and_onnxruntime_weighs_the_cost():
    """generic lowers every such list; onnxruntime, speed first, weighs the two forms (here
    about equal, 112 launches each by the estimate: measured, the original runs 1.6x faster at 4
    iterations, 1.1x at 16) and keeps a region only for speed, never for want of a rank."""
    model = parse(LOOP.format(insert="out = SequenceInsert (acc, wi)"))
    lowered, report = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0, reasons(report)
    _, report = lower(model, target="onnxruntime")
    assert all(op.kept_for_speed for op in report.remaining)
    _, report = lower(model, target="onnxruntime", rules=NO_RULES)
    assert "known only at run time" not in reasons(report)


def test_each_target_profile_says_what_the_lowering_does():
    for name, profile in PROFILES.items():
        assert profile.runtime_ranks == (refusal(name) or ""), name
    assert not PROFILES["generic"].runtime_ranks and not PROFILES["onnxruntime"].runtime_ranks
    assert TRACT_PROBE in PROFILES["tract"].runtime_ranks
    assert OPENVINO_PROBE in PROFILES["openvino"].runtime_ranks


def test_the_command_line_lowers_it_and_says_why_tract_cannot(tmp_path):
    source, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    model = parse(LOOP.format(insert="out = SequenceInsert (acc, wi)"))
    onnx.save(model, source)
    done = CliRunner().invoke(app, ["optimize", str(source), str(out)])
    assert done.exit_code == 0, done.output
    assert "sequence ops 5 -> 0" in done.stdout
    lowered = onnx.load(out)
    feeds = {"v": np.arange(6, dtype=np.float32), "shape": np.array([3, 2]), "m": np.array(2)}
    assert_same_outputs(model, lowered, feeds)

    tract = CliRunner().invoke(app, ["optimize", str(source), str(out), "--target", "tract"])
    assert tract.exit_code == 1
    printed = " ".join(tract.output.split())  # as wrapped to fit the terminal
    assert "tract cannot load a tensor whose rank is known only at run time" in printed
    assert '"shape input is variable"' in printed


@pytest.mark.parametrize("target", ["tensorrt", "openvino", "tract"])
def test_the_runtimes_that_need_ranks_judge_each_reshape_to_a_run_time_rank(target):
    """`inspect --target` and the target check name each Reshape whose output's rank is known
    only at run time (the original's own, and those of a list lowered for generic); a Reshape
    to a constant shape is fine."""
    lowered, _ = lower(
        parse(LOOP.format(insert="out = SequenceInsert (acc, wi)")), target="generic"
    )
    judged = [j for j in judge_nodes(lowered, target) if j.op_type == "Reshape"]
    assert len(judged) == 3  # w; the element read; the concatenation
    assert all(RESHAPE_REFUSALS[target] in j.reason for j in judged)
    assert all(j.severity == "error" for j in judged)
    assert "Reshape" in op_counts(lowered) and op_counts(lowered)["Reshape"] > 3
    for other in ("generic", "onnxruntime", "portable"):
        assert not [j for j in judge_nodes(lowered, other) if j.op_type == "Reshape"]
