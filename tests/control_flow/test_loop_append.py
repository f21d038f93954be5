"""A Loop whose carried sequence only grows by one SequenceInsert at the end of each iteration
(PyTorch's `list.append` in a scripted loop, tf2onnx's TensorArray) gets a scan output instead,
and the consumers of the sequence read the stacked tensor."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    rules_without,
    run_ort,
    sequence_op_count,
    sequence_op_counts,
)

X = np.array([1.0, -2.0, 3.5], dtype=np.float32)
# the loops here use the iteration number as a number, and loop-batch would batch them: what
# loop-append-to-scan emits is seen without it (its batched form is tested with loop-batch)
WITHOUT_BATCHING = rules_without("loop-batch")

# Appends x * i for i in range(m); m is a model input (a dynamic trip count).
APPEND_BODY = """<body = body (int64 i, bool c, seq(float[3]) acc)
                         => (bool c2, seq(float[3]) grown) {
        c2 = Identity(c)
        fi = Cast<to = 1>(i)
        row = Mul(x, fi)
        grown = SequenceInsert(acc, row)
    }>"""

CONSUMERS = parse(
    f"""g (int64 m, float[3] x)
        => (float[?,3] stacked, int64 n, float[3] first, float[3] last, float[?] cat,
            float[3,?] across) {{
    t = Constant<value = bool {{1}}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, empty) {APPEND_BODY}
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = SequenceLength(s)
    zero = Constant<value = int64 {{0}}>()
    first = SequenceAt(s, zero)
    minus_one = Constant<value = int64 {{-1}}>()
    last = SequenceAt(s, minus_one)
    cat = ConcatFromSequence<axis = 0>(s)
    across = ConcatFromSequence<axis = 1, new_axis = 1>(s)
}}"""
)


@pytest.mark.parametrize("trips", [1, 4])
def test_every_consumer_reads_the_scan_output(trips):
    lowered, report, outputs = lower_and_compare(
        CONSUMERS, {"m": np.array(trips), "x": X}, rules=WITHOUT_BATCHING
    )
    stacked, n, first, last, cat, across = outputs
    expected = np.stack([X * i for i in range(trips)])
    np.testing.assert_array_equal(stacked, expected)
    np.testing.assert_array_equal(across, expected.T)
    np.testing.assert_array_equal(cat, expected.reshape(-1))
    np.testing.assert_array_equal(last, X * (trips - 1))
    assert n == trips and (first == 0).all()
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] == 1
    assert report.rules_fired["loop-append-to-scan"] == 1


def test_the_emitted_loop_has_a_scan_output_and_no_carried_sequence():
    lowered, _ = lower(CONSUMERS, rules=WITHOUT_BATCHING)
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert len(loop.input) == 2 and len(loop.output) == 1  # (m, cond) -> (scan output)
    assert [i.type.WhichOneof("value") for i in body.input] == ["tensor_type"] * 2
    assert [o.type.WhichOneof("value") for o in body.output] == ["tensor_type"] * 2


START_WITH_TWO = parse(
    f"""g (int64 m, float[3] x) => (float[?,3] stacked, int64 n) {{
    t = Constant<value = bool {{1}}>()
    minus_x = Neg(x)
    start = SequenceConstruct(minus_x, x)
    s = Loop(m, t, start) {APPEND_BODY}
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = SequenceLength(s)
}}"""
)


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_a_static_initial_sequence_is_prepended(trips):
    lowered, _, (stacked, n) = lower_and_compare(START_WITH_TWO, {"m": np.array(trips), "x": X})
    assert n == 2 + trips and stacked.shape == (2 + trips, 3)
    assert sequence_op_count(lowered) == 0


EARLY_EXIT = parse(
    """g (int64 limit, float[2] x) => (float[2] total, float[?,2] doubled, float[?,2] stacked) {
    m = Constant<value = int64 {10}>()
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    total, s, doubled = Loop(m, t, x, empty) <body = body (int64 i, bool c, float[2] acc,
            seq(float[2]) items) => (bool c2, float[2] acc2, seq(float[2]) items2, float[2] twice) {
        c2 = Less(i, limit)
        acc2 = Add(acc, x)
        items2 = SequenceInsert(items, acc2)
        twice = Add(acc2, acc2)
    }>
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""
)


@pytest.mark.parametrize("limit", [0, 3, 20])
def test_early_exit_stacks_only_the_iterations_run(limit):
    """Carried tensor, carried sequence and an existing scan output: the new scan output comes
    after the old one, and the condition may end the loop before its trip count."""
    x = np.array([1.0, 2.0], dtype=np.float32)
    lowered, report, (total, doubled, stacked) = lower_and_compare(
        EARLY_EXIT, {"limit": np.array(limit), "x": x}
    )
    runs = min(limit + 1, 10)
    assert stacked.shape == (runs, 2) and doubled.shape == (runs, 2)
    np.testing.assert_array_equal(total, x * (runs + 1))
    assert sequence_op_count(lowered) == 0
    assert "loop-unroll" not in report.rules_fired  # the condition may end it early


def test_a_while_loop_without_trip_count():
    model = parse(
        """g (int64 m, float[3] x) => (float[?,3] stacked) {
        t = Constant<value = bool {1}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop("", t, empty) <body = body (int64 i, bool c, seq(float[3]) acc)
                                            => (bool c2, seq(float[3]) grown) {
            c2 = Less(i, m)
            fi = Cast<to = 1>(i)
            row = Mul(x, fi)
            grown = SequenceInsert(acc, row)
        }>
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    for trips in (0, 2):
        lowered, _, (stacked,) = lower_and_compare(model, {"m": np.array(trips), "x": X})
        assert stacked.shape == (trips + 1, 3)
    assert sequence_op_count(lowered) == 0


# `while len(out) < m: out.append(x * len(out))`: the lengths read in the body are counts
WHILE_LEN = """g (int64 m, float[3] x) => (float[?,3] stacked, int64 n) {{
    t = Constant<value = bool {{1}}>()
    start = {start}
    k0 = SequenceLength(start)
    c0 = Less(k0, m)
    s = Loop("", c0, start) <body = body (int64 i, bool c, seq(float[3]) acc)
                                          => (bool c2, seq(float[3]) grown) {{
        k = SequenceLength(acc)
        fk = Cast<to = 1>(k)
        row = Mul(x, fk)
        grown = SequenceInsert(acc, row{position})
        k2 = SequenceLength(grown)
        c2 = Less(k2, m)
    }}>
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = SequenceLength(s)
}}"""


@pytest.mark.parametrize(
    ("start", "position", "first"),
    [
        ("SequenceEmpty<dtype = 1>()", "", 0),
        ("SequenceConstruct(x, x)", "", 2),
        ("SequenceEmpty<dtype = 1>()", ", zero", 0),
    ],
    ids=["from-empty", "from-two", "prepending"],
)
def test_lengths_read_in_the_body_are_iteration_counts(start, position, first):
    """Every iteration appends one element, so the length before the append is the iteration
    number plus the initial length: the list is only written in the body, and scanned."""
    body = WHILE_LEN.replace("{position}", position)
    if position:
        body = body.replace(
            "    k = SequenceLength(acc)",
            "    zero = Constant<value = int64 {{0}}>()\n        k = SequenceLength(acc)",
        )
    model = parse(body.format(start=start))
    for limit in (1, 3, 6) if first == 0 else (0, 1, 3, 6):  # (an empty list: no stack)
        lowered, report, (stacked, n) = lower_and_compare(
            model, {"m": np.array(limit), "x": X}, rules=WITHOUT_BATCHING
        )
        assert n == max(limit, first)
        assert stacked.shape == (max(limit, first), 3)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["loop-append-to-scan"] == 1
    body_graph = next(n for n in lowered.graph.node if n.op_type == "Loop").attribute[0].g
    assert "Shape" not in {node.op_type for node in body_graph.node}  # no length of a buffer


def test_a_sequence_typed_model_output_keeps_its_interface():
    model = parse(
        f"""g (int64 m, float[3] x) => (seq(float[3]) s) {{
        t = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(m, t, empty) {APPEND_BODY}
    }}"""
    )
    for trips in (0, 1, 3):
        feeds = {"m": np.array(trips), "x": X}
        lowered, _, (items,) = lower_and_compare(model, feeds, rules=WITHOUT_BATCHING)
        assert len(items) == trips
    assert sequence_op_counts(lowered) == {"SplitToSequence": 1}
    assert op_counts(lowered)["Loop"] == 1


def test_the_appended_tensor_keeps_a_symbolic_shape():
    """The appended row has shape [B, 4] with B unknown: the same every iteration (the body
    reads rows of a model input at the iteration number)."""
    model = parse(
        """g (float[T,B,4] x) => (float[?,?,4] stacked) {
        zero = Constant<value = int64 {0}>()
        shape_x = Shape(x)
        trips = Gather(shape_x, zero)
        t = Constant<value = bool {1}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(trips, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                               => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            row = Gather<axis = 0>(x, i)
            r = Relu(row)
            grown = SequenceInsert(acc, r)
        }>
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(np.float32)
    lowered, _, (stacked,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(stacked, np.maximum(x, 0))
    assert sequence_op_count(lowered) == 0


# -- refusals ----------------------------------------------------------------------------------


def _refusing(body: str, outputs: str = "float[?,3] stacked") -> str:
    return f"""g (int64 m, float[3] x) => ({outputs}) {{
        t = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                           => (bool c2, seq(float) grown) {{
            c2 = Identity(c)
            {body}
        }}>
        stacked = ConcatFromSequence<axis = 0{", new_axis = 1" if "?,3" in outputs else ""}>(s)
    }}"""


@pytest.mark.parametrize(
    ("body", "outputs", "reason"),
    [
        (
            """copy = SequenceInsert(acc, x)
            k = SequenceLength(copy)
            fk = Cast<to = 1>(k)
            row = Mul(x, fk)
            grown = SequenceInsert(acc, row)""",
            "float[?,3] stacked",
            "the body reads it (SequenceInsert), not only appends",
        ),
        (
            """row = Mul(x, x)
            grown = SequenceInsert(acc, row, i)""",
            "float[?,3] stacked",
            "the body inserts at a position other than the end or the front",
        ),
    ],
    ids=["read-in-body", "insert-at-iteration"],
)
def test_refusals_say_why_and_the_model_still_runs(body, outputs, reason):
    model = parse(_refusing(body, outputs))
    lowered, report = lower(model, target="generic", tensor_lists=False)
    assert reason in reasons(report, "SequenceEmpty")
    assert op_counts(lowered)["SequenceInsert"] == body.count("SequenceInsert")
    feeds = {"m": np.array(3), "x": X}
    for want, got in zip(run_ort(model, feeds), run_ort(lowered, feeds)):
        np.testing.assert_array_equal(got, want)


def test_appends_that_change_shape_become_a_tensor_accumulator_instead():
    """Not a scan output (one shape per iteration is needed), but `loop-append-to-concat`."""
    body = """start = Constant<value = int64[1] {0}>()
            one = Constant<value = int64 {1}>()
            end = Add(i, one)
            axes = Constant<value = int64[1] {0}>()
            stop = Unsqueeze(end, axes)
            row = Slice(x, start, stop)
            grown = SequenceInsert(acc, row)"""
    model = parse(_refusing(body, "float[?] stacked"))
    lowered, report = lower(model, target="generic", rules=WITHOUT_BATCHING)
    assert report.rules_fired.get("loop-append-to-scan") is None
    assert report.rules_fired["loop-append-to-concat"] == 1
    assert sequence_op_count(lowered) == 0
    feeds = {"m": np.array(3), "x": X}
    for want, got in zip(run_ort(model, feeds), run_ort(lowered, feeds)):
        np.testing.assert_array_equal(got, want)


def test_a_carried_tensor_whose_shape_changes_is_not_stacked():
    """h starts [1, 3] and becomes [2, 3] by broadcasting after one iteration: appending the
    carried h itself gives elements of two shapes, so no scan output stacks them; the loop
    analysis keeps h's rank and its 3 columns ([?, 3]), so the concatenation of the rows is
    one tensor the loop grows (`loop-append-to-concat`)."""
    model = parse(
        """g (int64 m, float[2,3] y) => (float[?,3] cat) {
        t = Constant<value = bool {1}>()
        h0 = Constant<value = float[1,3] {0, 0, 0}>()
        empty = SequenceEmpty<dtype = 1>()
        h, s = Loop(m, t, h0, empty) <body = body (int64 i, bool c, float[1,3] h_in,
                seq(float) acc) => (bool c2, float[?,3] h_out, seq(float) grown) {
            c2 = Identity(c)
            h_out = Add(h_in, y)
            grown = SequenceInsert(acc, h_in)
        }>
        cat = ConcatFromSequence<axis = 0>(s)
    }"""
    )
    lowered, report = lower(model, tensor_lists=False)
    assert report.rules_fired.get("loop-append-to-scan") is None
    assert report.rules_fired["loop-append-to-concat"] == 1
    assert sequence_op_count(lowered) == 0
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    (want,), (got,) = (
        run_ort(model, {"m": np.array(3), "y": y}),
        run_ort(lowered, {"m": np.array(3), "y": y}),
    )
    assert want.shape == (1 + 2 + 2, 3)
    np.testing.assert_array_equal(got, want)
    for m in (1, 2, 4):  # (m = 0: the documented empty concatenation, docs/design.md)
        assert_same_outputs(model, lowered, {"m": np.array(m), "y": y})


@pytest.mark.parametrize("shape", ["float[4,2,3] x", "float[N,2,3] x"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize(("axis", "new_axis"), [(1, 0), (-1, 0), (2, 1), (-1, 1), (0, 0)])
def test_concatenations_of_unbound_rows(shape, opset, axis, new_axis):
    """What the stacked scan output's consumers become: a concatenation (new_axis=0) or a
    stack (new_axis=1) of the rows of a tensor, on any axis, is a Transpose and a Reshape."""
    model = parse(
        f"""g ({shape}) => (float y) {{
        rows = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = ConcatFromSequence<axis = {axis}, new_axis = {new_axis}>(rows)
    }}""",
        opset=opset,
    )
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    rows = list(x)
    expected = np.stack(rows, axis) if new_axis else np.concatenate(rows, axis)
    lowered, report, (y,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(y, expected)
    if opset < 14 and new_axis == 0 and "N" in shape:
        # Reshape reads a 0 as "copy" before opset 14: a run-time shape could hold a 0
        assert "Reshape before opset 14 reads a 0" in reasons(report, "ConcatFromSequence")
    else:
        assert sequence_op_count(lowered) == 0


BOOL_MASKS = """g (int64 m, float[4] x) => ({outputs}) {{
    t = Constant<value = bool {{1}}>()
    empty = SequenceEmpty<dtype = 9>()
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(bool) acc)
                                => (bool c2, seq(bool) grown) {{
        c2 = Identity(c)
        fi = Cast<to = 1>(i)
        above = Greater(x, fi)
        grown = SequenceInsert(acc, above)
    }}>
    {readers}
}}"""


@pytest.mark.parametrize("trips", [1, 3])
def test_a_list_of_masks_read_only_as_a_stack_becomes_a_scan_output(trips):
    """onnxruntime runs no SplitToSequence of bool; none is left when every reader folds."""
    model = parse(
        BOOL_MASKS.format(
            outputs="bool[?,4] masks, int64 n",
            readers="""masks = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = SequenceLength(s)""",
        )
    )
    x = np.array([0.5, 2.5, -1.0, 1.5], np.float32)
    feeds = {"m": np.array(trips), "x": x}
    lowered, report, (masks, n) = lower_and_compare(model, feeds, rules=WITHOUT_BATCHING)
    np.testing.assert_array_equal(masks, np.stack([x > i for i in range(trips)]))
    assert n == trips
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0


def test_a_returned_list_of_masks_is_not_scanned():
    model = parse(BOOL_MASKS.format(outputs="seq(bool[4]) s", readers=""))
    lowered, report = lower(model, target="generic", tensor_lists=False)
    assert "onnxruntime 1.20 to 1.32 cannot run for bool elements" in reasons(report)
    assert op_counts(lowered)["SequenceInsert"] == 1


def test_masks_of_unknown_rank_are_not_scanned():
    """Reading back the stack of bool tensors of unknown rank takes a SplitToSequence that
    stays (its folds need the rank), and onnxruntime cannot run it for bool."""
    model = parse(
        BOOL_MASKS.format(
            outputs="int64 n",
            readers="n = SequenceLength(s)",
        )
        .replace(
            "above = Greater(x, fi)",
            "shaped = Reshape(x, target)\n        above = Greater(shaped, fi)",
        )
        .replace("(int64 m, float[4] x)", "(int64 m, float[4] x, int64[?] target)")
    )
    lowered, report = lower(model, target="generic", tensor_lists=False)
    assert "cannot run for bool elements" in reasons(report)
    feeds = {"m": np.array(3), "x": np.ones(4, np.float32), "target": np.array([2, 2])}
    assert run_ort(lowered, feeds)[0] == 3


# -- initial elements of another shape, read only by concatenations -----------------------------

APART = """g (int64 m, float[2,3] x) => (float[2,?] cat) {{
    t = Constant<value = bool {{1}}>()
    {start}
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                   => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        fi = Cast<to = 1>(i)
        {append}
    }}>
    cat = ConcatFromSequence<axis = {axis}>(s)
}}"""
X2 = np.arange(6, dtype=np.float32).reshape(2, 3)
HEAD = "head = Constant<value = float[2,1] {7, 8}>()\n    start = SequenceConstruct(head)"
EMPTY_HEAD = "head = Constant<value = float[2,0] {}>()\n    start = SequenceConstruct(head)"


@pytest.mark.parametrize("trips", [0, 1, 3])
@pytest.mark.parametrize(
    ("start", "append", "order"),
    [
        (HEAD, "row = Mul(x, fi)\n        grown = SequenceInsert(acc, row)", "append"),
        (EMPTY_HEAD, "row = Mul(x, fi)\n        grown = SequenceInsert(acc, row)", "append"),
        (
            HEAD,
            "row = Mul(x, fi)\n        zero = Constant<value = int64 {0}>()\n"
            "        grown = SequenceInsert(acc, row, zero)",
            "prepend",
        ),
    ],
    ids=["head", "empty-head", "prepend"],
)
def test_initial_elements_of_another_shape_are_concatenated_apart(trips, start, append, order):
    """`out = [head]` (a [2, 1] or an empty [2, 0] tensor), then [2, 3] tensors appended and
    `torch.cat(out, 1)`: the appends are scanned, the head concatenated on its own."""
    model = parse(APART.format(start=start, append=append, axis=-1))
    feeds = {"m": np.array(trips), "x": X2}
    lowered, report, (cat,) = lower_and_compare(model, feeds, rules=WITHOUT_BATCHING)
    head = np.array([[7], [8]], np.float32) if "{7, 8}" in start else np.zeros((2, 0), np.float32)
    rows = [X2 * i for i in range(trips)]
    parts = [head, *rows] if order == "append" else [*reversed(rows), head]
    np.testing.assert_array_equal(cat, np.concatenate(parts, 1))
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0


def test_a_conditional_append_of_an_unsqueezed_label_after_an_empty_head():
    """CTC greedy decoding: `out = [torch.zeros(0)]`; `if c != 0: out.append(c.unsqueeze(0))`;
    `torch.cat(out)`. The Unsqueeze of the appending branch runs in every iteration."""
    model = parse(
        """g (int64[T] labels) => (int64[?] cat) {
        t = Constant<value = bool {1}>()
        zero = Constant<value = int64 {0}>()
        n = Size(labels)
        head = Constant<value = int64[0] {}>()
        start = SequenceConstruct(head)
        s = Loop(n, t, start) <body = body (int64 i, bool c, seq(int64) acc)
                                       => (bool c2, seq(int64) grown) {
            c2 = Identity(c)
            label = Gather<axis = 0>(labels, i)
            keep = Greater(label, zero)
            grown = If(keep) <then_branch = g1 () => (seq(int64) a) {
                axes = Constant<value = int64[1] {0}>()
                one = Unsqueeze(label, axes)
                a = SequenceInsert(acc, one)
            }, else_branch = g2 () => (seq(int64) b) {
                b = Identity(acc)
            }>
        }>
        cat = ConcatFromSequence<axis = 0>(s)
    }"""
    )
    for labels in ([0, 3, 0, 5, 5], [0, 0], []):
        feeds = {"labels": np.array(labels, np.int64)}
        lowered, report, (cat,) = lower_and_compare(model, feeds)
        np.testing.assert_array_equal(cat, [v for v in labels if v > 0])
        assert report.rules_fired["loop-append-to-scan"] == 1
        assert "Loop" not in op_counts(lowered)  # and loop-batch takes the scanned loop


def test_initial_elements_of_another_shape_read_otherwise_are_refused():
    text = (
        APART.format(
            start=HEAD, append="row = Mul(x, fi)\n        grown = SequenceInsert(acc, row)", axis=1
        )
        .replace("(float[2,?] cat)", "(float[2,?] cat, int64 n)")
        .replace("cat = ConcatFromSequence", "n = SequenceLength(s)\n    cat = ConcatFromSequence")
    )
    model = parse(text)
    lowered, report = lower(model, target="generic", tensor_lists=False)
    assert "the list is not only concatenated" in reasons(report)
    feeds = {"m": np.array(2), "x": X2}
    for want, got in zip(run_ort(model, feeds), run_ort(lowered, feeds)):
        np.testing.assert_array_equal(got, want)


def test_a_condition_of_one_element_keeps_its_declaration():
    """`while len(out) < int(n)` with `n` of shape [1], as TorchScript exports it: the loop's
    condition has one element in and out of the body, declared [1]; declaring it a scalar in
    the body made a model onnxruntime refuses to load."""
    model = parse(
        """g (int64[1] n, float[3] x) => (float[?,3] stacked) {
        empty = SequenceEmpty<dtype = 1>()
        k0 = SequenceLength(empty)
        c0 = Less(k0, n)
        big = Constant<value = int64 {9223372036854775807}>()
        s = Loop(big, c0, empty) <body = body (int64 i, bool[1] c, seq(float[3]) acc)
                                               => (bool[1] c2, seq(float[3]) grown) {
            fi = Cast<to = 1>(i)
            row = Mul(x, fi)
            grown = SequenceInsert(acc, row)
            k = SequenceLength(grown)
            c2 = Less(k, n)
        }>
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    for limit in (1, 4):
        for target in ("portable", "onnxruntime"):
            lowered, _, (stacked,) = lower_and_compare(
                model, {"n": np.array([limit]), "x": X}, target=target
            )
            assert stacked.shape == (limit, 3)
    assert sequence_op_count(lowered) == 0


# `outs = [x]; while cond: x = x * 0.5; outs.append(x)` with x of a run-time shape
HALVING = """g (float[A,B] x, float limit) => (float[?,A,B] y) {{
    t = Constant<value = bool {{1}}>()
    {start}
    total = ReduceSum<keepdims = 0>(x)
    c0 = Greater(total, limit)
    last, s = Loop("", c0, x, start) <body = body (int64 i, bool c, float[A,B] v, seq(float) acc)
                                                => (bool c2, float[A,B] w, seq(float) grown) {{
        half = Constant<value = float {{0.5}}>()
        w = Mul(v, half)
        {append}
        sum = ReduceSum<keepdims = 0>(w)
        c2 = Greater(sum, limit)
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""
FROM_X = "start = SequenceConstruct(x)"
APPEND = "grown = SequenceInsert(acc, w)"


def _halvings(x: np.ndarray, limit: float) -> np.ndarray:
    rows = [x]
    while x.sum() > limit:
        x = x * np.float32(0.5)
        rows.append(x)
    return np.stack(rows)


def _counted(lowered) -> bool:  # type: ignore[no-untyped-def]
    """Whether the stacked rows are reshaped to Concat(ReduceSum(..), Shape(..)) after the loop."""
    made = {out: n for n in lowered.graph.node for out in n.output}
    for node in lowered.graph.node:
        if node.op_type == "Reshape" and made.get(node.input[1]) is not None:
            concat = made[node.input[1]]
            if concat.op_type == "Concat" and made[concat.input[0]].op_type == "ReduceSum":
                return True
    return False


@pytest.mark.parametrize("limit", [100.0, 10.0, -1.0])  # zero, a few, then many halvings
@pytest.mark.parametrize("target", ["portable", "openvino", "onnxruntime", "tract"])
def test_rows_shaped_like_the_initial_element_are_counted_for_portable_targets(limit, target):
    """The initial element has the appended rows' symbolic shape (proved): a portable target
    reshapes the stacked rows to [count, *Shape(x)], the count the sum of one true scanned per
    iteration, which OpenVINO keeps for a loop that runs zero times; --target onnxruntime
    (speed first) and tract (whose shape analysis cannot read a count from values) do not."""
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    model = parse(HALVING.format(start=FROM_X, append=APPEND))
    limit_value = np.array(limit if limit >= 0 else 1e-3, np.float32)
    lowered, report, (y,) = lower_and_compare(model, {"x": x, "limit": limit_value}, target=target)
    np.testing.assert_array_equal(y, _halvings(x, float(limit_value)))
    assert report.rules_fired["loop-append-to-scan"] == 1 and sequence_op_count(lowered) == 0
    assert _counted(lowered) == (target not in ("onnxruntime", "tract"))


@pytest.mark.parametrize(
    "start, why",
    [
        ("start = SequenceEmpty<dtype = 1>()", "no initial element"),
        ("one = Constant<value = float[1,3] {0, 0, 0}>()\n start = SequenceConstruct(one)",
         "an initial element of another (static) shape"),
    ],
)  # fmt: skip
def test_rows_not_proved_like_an_initial_element_are_left_alone(start, why):
    x = np.array([[1, 2, 3]], np.float32)
    model = parse(HALVING.format(start=start, append=APPEND))
    lowered, _, (y,) = lower_and_compare(model, {"x": x, "limit": np.array(1.0, np.float32)})
    assert not _counted(lowered), why
    assert y.shape[1:] == (1, 3)
