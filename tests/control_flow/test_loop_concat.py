"""`loop-append-to-concat`: a list of tensors of changing shapes, built in a Loop only to be
concatenated, becomes a Concat accumulator carried by the Loop, for every target (TensorRT,
OpenVINO and tract have no sequence operators; `--target onnxruntime` chooses by cost, tested in
tests/test_never_slower.py)."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    rules_without,
    sequence_op_count,
)

# loop-batch takes these loops whole (a ragged slice per iteration, concatenated: one Compress,
# tests/batching/test_ragged_slices.py); the accumulator is what the other targets get without it
WITHOUT_BATCHING = rules_without("loop-batch")


def _prefixes(initial: str, x_type: str = "float[N,3]", reader: str = "") -> str:
    """Appends x[: i + 1] for i < m, then concatenates the list on axis 0."""
    return f"""g ({x_type} x, int64 m) => (float[?,3] y{", int64 n" if reader else ""}) {{
    t = Constant<value = bool {{1}}>()
    start = {initial}
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        zero = Constant<value = int64[1] {{0}}>()
        one = Constant<value = int64 {{1}}>()
        next = Add(i, one)
        axes = Constant<value = int64[1] {{0}}>()
        stop = Unsqueeze(next, axes)
        prefix = Slice(x, zero, stop, axes)
        grown = SequenceInsert(acc, prefix)
    }}>
    y = ConcatFromSequence<axis = 0>(s)
    {reader}
}}"""


X = np.arange(12, dtype=np.float32).reshape(4, 3)


@pytest.mark.parametrize("target", ["generic", "tensorrt", "openvino", "tract"])
@pytest.mark.parametrize("m", [1, 2, 4])
def test_growing_prefixes_are_concatenated_as_the_loop_goes(target, m):
    model = parse(_prefixes("SequenceEmpty<dtype = 1>()", "float[4,3]"))
    feeds = {"x": X, "m": np.array(m)}
    lowered, report, (y,) = lower_and_compare(model, feeds, target=target, rules=WITHOUT_BATCHING)
    np.testing.assert_array_equal(y, np.concatenate([X[: k + 1] for k in range(m)]))
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["loop-append-to-concat"] == 1
    assert op_counts(lowered)["Concat"] == 1  # the accumulator, in the body
    # it starts from ConstantOfShape: OpenVINO 2026.4.1 cannot convert a Loop carrying a
    # Constant with no element
    assert op_counts(lowered)["ConstantOfShape"] == 1


@pytest.mark.parametrize("m", [0, 1, 3])
def test_initial_elements_start_the_accumulator(m):
    model = parse(_prefixes("SequenceConstruct(x, x)"))
    lowered, _, (y,) = lower_and_compare(model, {"x": X, "m": np.array(m)}, target="tensorrt")
    np.testing.assert_array_equal(y, np.concatenate([X, X, *[X[: k + 1] for k in range(m)]]))
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("initial", "x_type", "reader", "reason"),
    [
        (
            "SequenceEmpty<dtype = 1>()",
            "float[4,3]",
            "n = SequenceLength(s)",
            "the loop's sequence is read by more than ConcatFromSequence(new_axis=0)",
        ),
    ],
    ids=["length-also-read"],
)
def test_refusals_say_why(initial, x_type, reader, reason):
    model = parse(_prefixes(initial, x_type, reader))
    lowered, report = lower(model, target="tensorrt", tensor_lists=False, rules=WITHOUT_BATCHING)
    assert reason in reasons(report)
    assert op_counts(lowered)["SequenceInsert"] == 1
    lower_and_compare(model, {"x": X, "m": np.array(3)}, target="tensorrt")


def test_an_empty_start_reads_the_dims_fixed_for_the_loop_from_outside_it():
    """x: [N, K] with K known at run time only: the prefixes' other dim is K in every
    iteration, so the accumulator starts as ConstantOfShape([0, Shape(x)[1]]), made before the
    Loop (a streaming encoder's chunk outputs, [B, t, H], start so)."""
    model = parse(_prefixes("SequenceEmpty<dtype = 1>()", "float[N,K]"))
    lowered, report = lower(model, target="tensorrt", rules=WITHOUT_BATCHING)
    assert report.rules_fired["loop-append-to-concat"] == 1
    assert sequence_op_count(lowered) == 0
    main = [node.op_type for node in lowered.graph.node]  # the start, before the Loop
    assert main.count("ConstantOfShape") == 1 and main.count("Shape") == 1
    rng = np.random.default_rng(5)
    for n, k, m in ((4, 3, 3), (2, 5, 1), (3, 0, 2), (5, 1, 5)):
        x = rng.standard_normal((n, k)).astype(np.float32)
        lower_and_compare(model, {"x": x, "m": np.array(m)}, target="tensorrt")


# the appended tensor's other dim grows with the iteration: [K, i + 1], concatenated on axis 0
GROWING_COLUMNS = """g (float[N,K] x, int64 m) => (float[?,?] y) {
    t = Constant<value = bool {1}>()
    start = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64 {1}>()
        next = Add(i, one)
        axes = Constant<value = int64[1] {0}>()
        stop = Unsqueeze(next, axes)
        prefix = Slice(x, zero, stop, axes)
        columns = Transpose<perm = [1, 0]>(prefix)
        grown = SequenceInsert(acc, columns)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""


def test_an_empty_start_whose_other_dim_changes_is_refused():
    model = parse(GROWING_COLUMNS)
    lowered, report = lower(model, target="tensorrt", tensor_lists=False, rules=WITHOUT_BATCHING)
    why = "it starts empty and the appended tensor's other dims are not fixed for the loop"
    assert why in reasons(report)
    assert op_counts(lowered)["SequenceInsert"] == 1


# for c in x.split(k, 1): out.append(relu(c)), with the split kept a list (as --target
# onnxruntime keeps a region): the appended tensor's dim N is the list element's, and a list
# has no Shape to read it from
CHUNKS_OF_A_KEPT_LIST = """g (float[N,T] x, int64 k) => (float[N,?] y) {
    t = Constant<value = bool {1}>()
    chunks = SplitToSequence<axis = 1>(x, k)
    m = SequenceLength(chunks)
    start = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        chunk = SequenceAt(chunks, i)
        h = Relu(chunk)
        grown = SequenceInsert(acc, h)
    }>
    y = ConcatFromSequence<axis = 1>(s)
}"""


def test_an_empty_start_never_reads_a_dim_from_a_list():
    model = parse(CHUNKS_OF_A_KEPT_LIST)
    kept = rules_without(
        "loop-batch", "loop-batch-chunks", "at-of-chunks", "at-of-split", "length-of-split"
    )
    lowered, _ = lower(model, tensor_lists=False, rules=kept)
    # a Shape of the list would not be a model (onnx.checker and onnxruntime reject it); the
    # chunks, relu'd and concatenated on their axis, are relu(x) once no Concat runs first
    assert all(node.input[0] != "chunks" for node in lowered.graph.node if node.op_type == "Shape")
    x = np.arange(10, dtype=np.float32).reshape(2, 5) - 4
    for k in (1, 2, 5):
        feeds = {"x": x, "k": np.array(k)}
        lower_and_compare(model, feeds, tensor_lists=False, rules=kept)


# -- an appended tensor of a rank known from a static target only ------------------------------

# ws = [w * i for i in range(m)] with w of a rank known at run time only (a Reshape to a shape
# input); torch.cat([w.reshape(-1)] + [f.reshape(-1) for f in ws]): the appended Reshape(f, [-1])
# is 1-D whatever f's rank (the loop shape analysis reads the target's length)
UNRANKED_JOIN = """agraph ({t}[V] v, int64[R] shape, int64 m{extra}) => ({t}[?] y) {{
    w = Reshape (v, shape)
    e = SequenceEmpty <dtype = {code}> ()
    yes = Constant <value = bool {{1}}> ()
    s = Loop (m, yes, e) <body = grow (int64 i, bool c, seq({t}) acc) => (bool c2,
                                                                       seq({t}) out) {{
        fi = Cast <to = {code}> (i)
        scaled = Mul (w, fi)
        out = SequenceInsert (acc, scaled)
        c2 = Identity (c)
    }}>
    flat = Constant <value = int64[1] {{-1}}> ()
    head = Reshape (w, flat)
    f0 = SequenceConstruct (head)
    n = SequenceLength (s)
    f = Loop (n, yes, f0) <body = join (int64 j, bool cj, seq({t}) acc2) => (bool c3,
                                                                          seq({t}) out2) {{
        el = SequenceAt (s, j)
        {target}
        r = Reshape (el, flat2)
        out2 = SequenceInsert (acc2, r)
        c3 = Identity (cj)
    }}>
    y = ConcatFromSequence <axis = 0> (f)
}}"""
_STATIC_TARGET = "flat2 = Constant <value = int64[1] {-1}> ()"
_UNRANKED_TYPES = {"float": (1, np.float32), "int64": (7, np.int64)}


def _unranked_join(t: str = "float", target: str = _STATIC_TARGET, extra: str = ""):
    return parse(UNRANKED_JOIN.format(t=t, code=_UNRANKED_TYPES[t][0], target=target, extra=extra))


@pytest.mark.parametrize("t", sorted(_UNRANKED_TYPES))
def test_an_element_of_unknown_rank_flattened_is_concatenated_as_the_loop_goes(t):
    model = _unranked_join(t)
    lowered, report = lower(model, target="generic")
    assert report.rules_fired.get("loop-append-to-concat") == 1
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    # one Loop left (the join grows as the elements are made); no element read back by Slice
    assert counts["Loop"] == 1 and counts["Slice"] == 0 and counts["Gather"] == 0
    dtype = _UNRANKED_TYPES[t][1]
    v = np.arange(12).astype(dtype) - 4
    # m = 0: the list of scaled copies is empty, the join is w flattened alone
    for shape, m, values in (
        ([12], 0, v),
        ([3, 4], 2, v),
        ([2, 3, 2], 3, v),
        ([0, 5], 2, v[:0]),
    ):
        feeds = {"v": values, "shape": np.array(shape), "m": np.array(m)}
        (y,) = assert_same_outputs(model, lowered, feeds)
        assert y.shape == (values.size * (m + 1),)


def test_a_flattening_target_of_run_time_length_is_refused():
    """Reshape(el, T) with T a run-time shape of unknown length: the rank is not known."""
    model = _unranked_join(target="flat2 = Identity (tshape)", extra=", int64[K] tshape")
    lowered, report = lower(model, target="generic", tensor_lists=False)
    assert "the rank of the appended tensor is not known" in reasons(report)
    assert "loop-append-to-concat" not in report.rules_fired
    feeds = {
        "v": np.arange(6, dtype=np.float32),
        "shape": np.array([2, 3]),
        "m": np.array(2),
        "tshape": np.array([-1]),
    }
    assert_same_outputs(model, lowered, feeds)


# -- elements reshaped to a target of unknown entries --------------------------------------------

# out = [x.reshape(T) if i < 1 else z.reshape(T) for i in range(m)]; torch.cat(out): an entry of
# T may be -1 or 0, so x[6] and z[12] give elements of different shapes (T = [-1, 3]: (2, 3) and
# (4, 3)); they must not be stacked as if they had one
RESHAPED_BY_AN_INPUT = """agraph (float[6] x, float[12] z, int64[2] T, int64 m) => (float[?,?] y) {
    e = SequenceEmpty <dtype = 1> ()
    yes = Constant <value = bool {1}> ()
    s = Loop (m, yes, e) <body = grow (int64 i, bool c, seq(float) acc) => (bool c2,
                                                                      seq(float) out) {
        one = Constant <value = int64 {1}> ()
        first = Less (i, one)
        el = If (first) <then_branch = a () => (float[?,?] ra) {
            ra = Reshape (x, T)
        }, else_branch = b () => (float[?,?] rb) {
            rb = Reshape (z, T)
        }>
        out = SequenceInsert (acc, el)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis = 0> (s)
}"""


@pytest.mark.parametrize("target", [(-1, 3), (0, -1), (-1, 1)])
def test_elements_reshaped_to_unknown_entries_are_not_taken_to_share_a_shape(target):
    model = parse(RESHAPED_BY_AN_INPUT)
    lowered, _ = lower(model)
    x, z = np.arange(6, dtype=np.float32), -np.arange(12, dtype=np.float32)
    feeds = {"x": x, "z": z, "T": np.array(target, dtype=np.int64)}
    assert_same_or_both_fail(model, lowered, {**feeds, "m": np.array(0)})  # an empty join
    for m in (1, 2, 3):  # the original runs: x's rows, then z's
        assert_same_outputs(model, lowered, {**feeds, "m": np.array(m)})
