"""A Loop that joins every element of a list, flattened, in order (`seqlower.lists.flattened`):
the list's elements flattened and joined, read from its tensors at once.

`torch.cat([f.reshape(-1) for f in feats])` after a loop that grows `feats` with elements of
changing shape (the `feedback_layers` export): what is emitted (no Loop left for the reading,
and the list's table of shapes dropped with it), what is refused and why, and the numbers under
onnxruntime for lists of no element, one, and elements of different shapes, in several dtypes
and every layout.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import (
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rules_without,
    run_ort,
    sequence_op_count,
)

from seqlower.analysis.static_values import StaticValues
from seqlower.lists import flattened
from seqlower.passes.normalize import infer_shapes
from seqlower.rule import RuleSet

# (ONNX type name, SequenceEmpty dtype code, numpy dtype)
DTYPES = {
    "float": (1, np.float32),
    "int64": (7, np.int64),
    "bool": (9, np.bool_),
    "float16": (10, np.float16),
}

# feats = [x]; for _ in range(m): feats.append(tile(feats[-1], (1, 2))): rank 2, the second dim
# doubling (the flat layout); then torch.cat([f.reshape(-1) for f in feats])
GROWN = """
agraph ({t}[N,3] x, int64 m) => ({t}[{y}] y) {{
    s0 = SequenceConstruct (x)
    t = Constant <value=bool {{1}}> ()
    s = Loop (m, t, s0) <body = grow (int64 i, bool c, seq({t}[?,?]) acc) => (bool c2,
                                                                            seq({t}[?,?]) out) {{
        minus = Constant <value=int64 {{-1}}> ()
        last = SequenceAt (acc, minus)
        reps = Constant <value=int64[2] {{1, 2}}> ()
        grown = Tile (last, reps)
        out = SequenceInsert (acc, grown)
        c2 = Identity (c)
    }}>
    e = SequenceEmpty <dtype={code}> ()
    n = SequenceLength (s)
    {trip}
    f = Loop ({trip_name}, t, e) <body = join (int64 j, bool cj, seq({t}) acc2) => (bool c3,
                                                                               seq({t}) out2) {{
        el = SequenceAt (s, j)
        flat = Constant <value=int64[1] {{-1}}> ()
        {flatten}
        out2 = SequenceInsert (acc2, r)
        c3 = Identity (cj)
    }}>
    y = ConcatFromSequence <axis={axis}> (f)
}}
"""


def grown(
    t: str = "float",
    flatten: str = "r = Reshape (el, flat)",
    axis: int = 0,
    y: str = "?",
    trip: str = "",
    trip_name: str = "n",
):
    code = DTYPES[t][0]
    return parse(
        GROWN.format(
            t=t, code=code, flatten=flatten, axis=axis, y=y, trip=trip, trip_name=trip_name
        )
    )


def _x(dtype, shape=(2, 3)) -> np.ndarray:
    values = np.arange(np.prod(shape)).reshape(shape) - 2
    return (values % 2 == 0) if dtype == np.bool_ else values.astype(dtype)


def _outer_loops_read_no_list(lowered) -> None:
    """What a lowering with the flattened concatenation leaves: one Loop (the one growing the
    list), carrying the data and the last element only; no element cut out of the data."""
    counts = op_counts(lowered)
    assert counts["Loop"] == 1, counts
    for op in ("Slice", "Gather", "CumSum", "ReduceProd", "Shape"):
        assert counts[op] == 0, (op, counts)
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    assert len(loop.output) == 2  # the data and the last element: the table of shapes dropped


@pytest.mark.parametrize("t", sorted(DTYPES))
def test_the_join_of_every_element_flattened_is_the_data(t):
    model = grown(t)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    _outer_loops_read_no_list(lowered)
    # the model output is the data the growing loop carries
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    assert lowered.graph.output[0].name in loop.output
    assert {node.tier for node in report.nodes if node.op_type == "SequenceAt"} >= {"flat"}
    dtype = DTYPES[t][1]
    for m in (0, 1, 3):  # one element; elements of different shapes
        outputs = assert_same_outputs(model, lowered, {"x": _x(dtype), "m": np.array(m)})
        assert outputs[0].shape == (6 * (2 ** (m + 1) - 1),)
    assert_same_outputs(model, lowered, {"x": _x(dtype, (0, 3)), "m": np.array(2)})  # 0 rows


def test_flatten_axis_0_joined_on_axis_1():
    """Flatten(axis=0) gives [1, size]: joined on axis 1, the data reshaped to [1, -1]."""
    model = grown(flatten="r = Flatten <axis=0> (el)", axis=1, y="1,?")
    lowered, _ = lower(model)
    _outer_loops_read_no_list(lowered)
    for m in (0, 2):
        outputs = assert_same_outputs(model, lowered, {"x": _x(np.float32), "m": np.array(m)})
        assert outputs[0].shape[0] == 1


def test_trip_count_through_identity_and_cast():
    trip = "n1 = Identity (n)\n    n2 = Cast <to=7> (n1)"
    model = grown(trip=trip, trip_name="n2")
    lowered, _ = lower(model)
    _outer_loops_read_no_list(lowered)
    assert_same_outputs(model, lowered, {"x": _x(np.float32), "m": np.array(2)})


def test_a_trip_count_that_is_not_the_length_reads_element_by_element():
    """A prefix of the list (n - 1 elements): the Loop stays, and computes what it did."""
    trip = "one = Constant <value=int64 {1}> ()\n    n2 = Sub (n, one)"
    model = grown(trip=trip, trip_name="n2")
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] == 2  # the join still reads element by element
    for m in (1, 3):
        assert_same_outputs(model, lowered, {"x": _x(np.float32), "m": np.array(m)})


# The reading written by hand as a tensor accumulator (what loop-append-to-concat makes of the
# list comprehension), from lists of every layout
HAND = """
agraph ({inputs}, int64 q, float[K] start) => (float[?] y, float total) {{
    {source}
    n = SequenceLength (s)
    t = Constant <value=bool {{1}}> ()
    zero = Constant <value=int64[1] {{0}}> ()
    e = ConstantOfShape <value=float[1] {{0}}> (zero)
    sum0 = Constant <value=float {{0}}> ()
    y, total = Loop (n, t, {init}, sum0) <body = join (int64 j, bool c, float[?] acc, float sum)
                                              => (bool c2, float[?] grown, float sum2) {{
        el = SequenceAt (s, j)
        flat = Constant <value=int64[1] {{-1}}> ()
        r = Reshape (el, flat)
        grown = Concat <axis=0> (acc, r)
        part = ReduceSum <keepdims=0> (r)
        sum2 = Add (sum, part)
        c2 = Identity (c)
    }}>
}}
"""

SOURCES = {
    # layout: (inputs, the list s, feeds but q)
    "stacked": (
        "float[N,3] x",
        "s1 = SplitToSequence <keepdims=0> (x)\n    s = SequenceErase (s1, q)",
        lambda rng: {"x": rng.standard_normal((4, 3)).astype(np.float32)},
    ),
    "ragged": (
        "float[N,3] x, int64[L] sizes",
        "s1 = SplitToSequence (x, sizes)\n    s = SequenceErase (s1, q)",
        lambda rng: {
            "x": rng.standard_normal((6, 3)).astype(np.float32),
            "sizes": np.array([1, 0, 3, 2]),
        },
    ),
    "unranked": (  # [w, 2w, 4w, ..] (m + 1 elements), w of a rank known at run time only
        "float[V] v, int64[R] shape, int64 m",
        "w = Reshape (v, shape)\n    s0 = SequenceConstruct (w)\n"
        "    yes = Constant <value=bool {1}> ()\n"
        "    s1 = Loop (m, yes, s0) <body = grow (int64 i, bool c, seq(float) acc) => (bool c2,\n"
        "                                                                  seq(float) out) {\n"
        "        minus = Constant <value=int64 {-1}> ()\n"
        "        last = SequenceAt (acc, minus)\n"
        "        twice = Add (last, last)\n"
        "        out = SequenceInsert (acc, twice)\n"
        "        c2 = Identity (c)\n"
        "    }>\n"
        "    s = SequenceErase (s1, q)",
        lambda rng: {
            "v": rng.standard_normal(12).astype(np.float32),
            "shape": np.array([3, 4]),
            "m": np.array(2),
        },
    ),
}


@pytest.mark.parametrize("layout", sorted(SOURCES))
@pytest.mark.parametrize("init", ["e", "start"])
def test_a_tensor_accumulator_of_the_elements_flattened(layout, init):
    """Every layout; the accumulator starting empty or from a tensor (the result then follows
    it); the Loop also sums the elements: it stays for that (or is batched), without the
    accumulator."""
    inputs, source, make = SOURCES[layout]
    model = parse(HAND.format(inputs=inputs, source=source, init=init))
    target = "generic" if layout == "unranked" else "portable"  # ranks known at run time only
    lowered, report = lower(model, target=target)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {layout}
    # the sum only, or not even that (loop-batch takes a Loop left with it): the accumulator
    # is read from the list
    loops = [n for n in lowered.graph.node if n.op_type == "Loop"]
    assert not any("y" in loop.output for loop in loops)
    for loop in loops:
        body = {n.op_type for n in loop.attribute[0].g.node}
        if "ReduceSum" in body:  # the join (the unranked list is grown by a Loop of its own)
            assert len(loop.output) == 1 and "Concat" not in body
    rng = np.random.default_rng(3)
    feeds = make(rng)
    for start in (np.zeros(0, np.float32), np.array([5.0, -1.0], np.float32)):
        for q in (0, -1, 1):
            assert_same_outputs(model, lowered, {**feeds, "q": np.array(q), "start": start})


def test_unit_rows_are_flattened_with_the_list_axis_first():
    """[1, 3] rows keep the list axis in the place of their dim of one (unit rows, u = 0 for
    rows appended, u = 1 for the rows transposed to [3, 1] columns): the data with that axis
    first, flattened. Lowered by the list tier alone (no pattern rule)."""
    for column, shape in (("", "1,3"), ("col = Transpose <perm=[1, 0]> (twice)", "3,1")):
        text = HAND.format(
            inputs="float[N,3] x, int64 m",
            source=f"""t0 = Constant <value=bool {{1}}> ()
    zero0 = Constant <value=int64[1] {{0}}> ()
    first = Gather (x, zero0)
    first_col = {"Transpose <perm=[1, 0]> (first)" if column else "Identity (first)"}
    s0 = SequenceConstruct (first_col)
    s = Loop (m, t0, s0) <body = build (int64 i, bool c, seq(float[{shape}]) acc)
                            => (bool c1, seq(float[{shape}]) grown) {{
        c1 = Identity (c)
        axes = Constant <value=int64[1] {{0}}> ()
        b = Unsqueeze (i, axes)
        piece = Gather (x, b)
        twice = Add (piece, piece)
        {column or "col = Identity (twice)"}
        grown = SequenceInsert (acc, col)
    }}>""",
            init="start",
        )
        model = parse(text)
        lowered, report = lower(model, rules=RuleSet([]))
        assert {node.tier for node in report.nodes} == {"stacked"}
        assert not any("y" in n.output for n in lowered.graph.node if n.op_type == "Loop")
        x = (np.arange(18) - 4).reshape(6, 3).astype(np.float32)
        start = np.array([7.0], np.float32)
        for m in (0, 1, 4):
            feeds = {"x": x, "m": np.array(m), "q": np.array(0), "start": start}
            assert_same_outputs(model, lowered, feeds)


def test_a_list_of_no_element():
    """The list empty (one row split, then erased): the Loop runs no iteration, and the result
    is the accumulator's start, as in the original."""
    inputs, source, _ = SOURCES["stacked"]
    model = parse(HAND.format(inputs=inputs, source=source, init="start"))
    lowered, _ = lower(model)
    x = np.ones((1, 3), np.float32)
    for start in (np.zeros(0, np.float32), np.array([2.0], np.float32)):
        outputs = assert_same_outputs(model, lowered, {"x": x, "q": np.array(0), "start": start})
        np.testing.assert_array_equal(outputs[0], start)


def test_a_list_comprehension_of_no_element_gives_an_empty_tensor():
    """Written as a list, the join of no element is a ConcatFromSequence of an empty list,
    which fails; loop-append-to-concat makes it a tensor accumulator, which gives the empty
    tensor it starts from (as that rule documents), and so does the data of the empty list."""
    model = parse(
        """
agraph (float[N,3] x, int64 q) => (float[?] y) {
    s1 = SplitToSequence <keepdims=0> (x)
    s = SequenceErase (s1, q)
    e = SequenceEmpty <dtype=1> ()
    n = SequenceLength (s)
    t = Constant <value=bool {1}> ()
    f = Loop (n, t, e) <body = join (int64 j, bool c, seq(float) acc) => (bool c2,
                                                                          seq(float) out) {
        el = SequenceAt (s, j)
        flat = Constant <value=int64[1] {-1}> ()
        r = Reshape (el, flat)
        out = SequenceInsert (acc, r)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=0> (f)
}
"""
    )
    lowered, report = lower(model)
    assert "Loop" not in op_counts(lowered)
    assert report.rules_fired.get("loop-append-to-concat") == 1
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_same_outputs(model, lowered, {"x": x, "q": np.array(1)})
    one_row = {"x": x[:1], "q": np.array(0)}
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error
        run_ort(model, one_row)
    (y,) = run_ort(lowered, one_row)
    assert y.shape == (0,)


# -- what is refused, and why --------------------------------------------------------------

REFUSED = {
    # what the join body does instead: (the lines replaced, by what), the reason
    "more than a flatten": (
        ("r = Reshape (el, flat)", "r0 = Reshape (el, flat)\n        r = Neg (r0)"),
        "not a Reshape or Flatten",
    ),
    "another position": (
        (
            "el = SequenceAt (s, j)",
            "one = Constant <value=int64 {1}> ()\n"
            "        j1 = Add (j, one)\n        el = SequenceAt (s, j1)",
        ),
        "not read at the iteration number",
    ),
    "not a flatten": (
        ("flat = Constant <value=int64[1] {-1}>", "flat = Constant <value=int64[2] {2, -1}>"),
        "does not flatten",
    ),
    "a run-time shape": (
        (
            "r = Reshape (el, flat)",
            "axes = Constant <value=int64[1] {0}> ()\n"
            "        shp = Unsqueeze (q, axes)\n        r = Reshape (el, shp)",
        ),
        "computed at run time",
    ),
    "another axis": (
        ("r = Reshape (el, flat)", "r = Flatten <axis=0> (el)"),
        "not the one they are flattened on",
    ),
    "not an element": (
        ("el = SequenceAt (s, j)", "el = Identity (x)"),
        "not an element of a list",
    ),
    "the trip count": (
        ("y, total = Loop (n,", "y, total = Loop (q,"),
        "not the length of the list read",
    ),
    "an early end": (
        (
            "c2 = Identity (c)",
            "three = Constant <value=int64 {3}> ()\n        c2 = Less (j, three)",
        ),
        "may end early",
    ),
    "a run-time condition": (
        ("t = Constant <value=bool {1}> ()", "t = Cast <to=9> (q)"),
        "not a constant true",
    ),
    "the grown value read": (
        (
            "sum2 = Add (sum, part)",
            "size = ReduceSum <keepdims=0> (grown)\n        sum2 = Add (size, part)",
        ),
        "also read in the body",
    ),
    "read after the concatenation": (
        ("grown = Concat <axis=0> (acc, r)", "grown = Concat <axis=0> (r, acc)"),
        "does not only concatenate a tensor after the carried value",
    ),
    "a start of another shape": (
        ("zero = Constant <value=int64[1] {0}>", "zero = Constant <value=int64[2] {1, 0}>"),
        "starts empty with shape [1, 0], not [0]",
    ),
}


def _measures(trip: ir.Value, s: ir.Value) -> bool:
    """The trip count is SequenceLength(s), as written (before any lowering)."""
    producer = trip.producer()
    return producer is not None and producer.op_type == "SequenceLength" and producer.inputs[0] is s


def _check(text: str) -> flattened.FlattenedConcat | str:
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    return flattened.check(loop, 0, StaticValues(18), _measures)


def _hand(init: str = "e") -> str:
    inputs, source, _ = SOURCES["stacked"]
    return HAND.format(inputs=inputs, source=source, init=init)


def test_the_pattern_as_written_matches():
    found = _check(_hand())
    assert isinstance(found, flattened.FlattenedConcat), found
    assert (found.index, found.target, found.axis, found.initial) == (0, (-1,), 0, None)
    assert found.source.name == "s"
    started = _check(_hand("start"))
    assert isinstance(started, flattened.FlattenedConcat) and started.initial is not None
    assert started.initial.name == "start"
    # the sum the Loop also carries is no accumulator of the list
    model = ir.from_proto(parse(_hand()))
    infer_shapes(model)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    assert "not only concatenate" in flattened.check(loop, 1, StaticValues(18), _measures)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_with_the_reason(case):
    (old, new), reason = REFUSED[case]
    text = _hand()
    assert old in text, old
    found = _check(text.replace(old, new))
    assert isinstance(found, str), found
    assert reason in found


JOIN_REFUSED = {
    "more than a flatten": [
        ("r = Reshape (el, flat)", "r0 = Reshape (el, flat)\n        r = Neg (r0)")
    ],
    "the joined list read elsewhere": [
        ("=> (float[?] y)", "=> (float[?] y, int64 k)"),
        (
            "y = ConcatFromSequence <axis=0> (f)",
            "y = ConcatFromSequence <axis=0> (f)\n    k = SequenceLength (f)",
        ),
    ],
}


@pytest.mark.parametrize("case", sorted(JOIN_REFUSED))
def test_refused_forms_lower_element_by_element(case):
    """Where the join is not the flattened list (each element negated; the list joined also
    measured, so that loop-append-to-concat leaves it a list), the list tier reads the
    elements one by one, as before."""
    text = GROWN.format(
        t="float", code=1, flatten="r = Reshape (el, flat)", axis=0, y="?", trip="", trip_name="n"
    )
    for old, new in JOIN_REFUSED[case]:
        assert old in text, old
        text = text.replace(old, new)
    model = parse(text)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] == 2  # the join still reads element by element
    for m in (0, 2):
        assert_same_outputs(model, lowered, {"x": _x(np.float32), "m": np.array(m)})


# -- the join left a list: loop-append-to-concat does not know the appended tensor's rank -------

# w of a rank known at run time only; feats = [w, 2w, 4w, ..]; torch.cat([f.reshape(-1) ..])
UNRANKED = """
agraph (float[V] v, int64[R] shape, int64 m) => (float[?] y) {
    w = Reshape (v, shape)
    s0 = SequenceConstruct (w)
    yes = Constant <value=bool {1}> ()
    s = Loop (m, yes, s0) <body = grow (int64 i, bool c, seq(float) acc) => (bool c2,
                                                                          seq(float) out) {
        minus = Constant <value=int64 {-1}> ()
        last = SequenceAt (acc, minus)
        twice = Add (last, last)
        out = SequenceInsert (acc, twice)
        c2 = Identity (c)
    }>
    e = SequenceEmpty <dtype=1> ()
    n = SequenceLength (s)
    f = Loop (n, yes, e) <body = join (int64 j, bool cj, seq(float) acc2) => (bool c3,
                                                                           seq(float) out2) {
        el = SequenceAt (s, j)
        flat = Constant <value=int64[1] {-1}> ()
        r = Reshape (el, flat)
        out2 = SequenceInsert (acc2, r)
        c3 = Identity (cj)
    }>
    y = ConcatFromSequence <axis=0> (f)
}
"""


@pytest.mark.parametrize("accumulated", [True, False], ids=["accumulator", "list"])
def test_the_join_left_a_list_is_read_from_the_list_too(accumulated):
    """Elements of a rank known at run time only (the unranked layout, target generic): with
    every rule, `loop-append-to-concat` makes the join a tensor accumulator (the flattened
    element is 1-D, its target's length says so) and `check` reads it from the list; without
    it the join is left a list and `check_list` does. Both give the same model."""
    model = parse(UNRANKED)
    rules = None if accumulated else rules_without("loop-append-to-concat")
    lowered, report = lower(model, target="generic", rules=rules)
    assert ("loop-append-to-concat" in report.rules_fired) == accumulated
    assert sequence_op_count(lowered) == 0
    assert "unranked" in {node.tier for node in report.nodes}
    loops = [n for n in lowered.graph.node if n.op_type == "Loop"]
    assert len(loops) == 1 and "y" in loops[0].output  # the join is the data the Loop grows
    assert len(loops[0].output) == 2  # the data and the last element: no dims, no table
    v = np.arange(12, dtype=np.float32) - 4
    for shape, m in (([12], 0), ([3, 4], 2), ([2, 3, 2], 3)):
        feeds = {"v": v, "shape": np.array(shape), "m": np.array(m)}
        (y,) = assert_same_outputs(model, lowered, feeds)
        assert y.shape == (12 * (m + 1),)


def test_the_join_is_the_same_model_either_way():
    """Made a tensor accumulator first (`loop-append-to-concat`) or left a list, the join is
    read from the list the same way: byte-identical output."""
    model = parse(UNRANKED)
    accumulated, _ = lower(model, target="generic")
    listed, _ = lower(model, target="generic", rules=rules_without("loop-append-to-concat"))
    assert accumulated.SerializeToString() == listed.SerializeToString()


LIST_REFUSED = {
    "a start of one element": (
        ("e = SequenceEmpty <dtype=1> ()", "e = SequenceConstruct (v)"),
        "does not start empty",
    ),
    "measured too": (
        (
            "y = ConcatFromSequence <axis=0> (f)",
            "y = ConcatFromSequence <axis=0> (f)\n    k = SequenceLength (f)",
        ),
        "read by more than ConcatFromSequence",
    ),
    "more than a flatten": (
        (
            "out2 = SequenceInsert (acc2, r)",
            "r2 = Neg (r)\n        out2 = SequenceInsert (acc2, r2)",
        ),
        "not a Reshape or Flatten",
    ),
    "another axis": (
        ("y = ConcatFromSequence <axis=0> (f)", "y = ConcatFromSequence <axis=1> (f)"),
        "not the one they are flattened on",
    ),
    "at a position": (
        (
            "out2 = SequenceInsert (acc2, r)",
            "zero = Constant <value=int64 {0}> ()\n        out2 = SequenceInsert (acc2, r, zero)",
        ),
        "does not only append a tensor",
    ),
}


def _check_join(text: str) -> flattened.FlattenedConcat | str:
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    loop = [node for node in model.graph if node.op_type == "Loop"][1]  # the join
    return flattened.check_list(loop, 0, StaticValues(18), _measures)


def test_the_join_left_a_list_matches():
    found = _check_join(UNRANKED)
    assert isinstance(found, flattened.FlattenedConcat), found
    assert (found.target, found.axis, found.initial, found.source.name) == ((-1,), 0, None, "s")


@pytest.mark.parametrize("case", sorted(LIST_REFUSED))
def test_the_join_left_a_list_refused_with_the_reason(case):
    (old, new), reason = LIST_REFUSED[case]
    assert old in UNRANKED, old
    found = _check_join(UNRANKED.replace(old, new))
    assert isinstance(found, str) and reason in found, found
