"""Edge cases derived from the model's own operators and inputs catch candidates that differ only
there (equal inputs, integer type limits, both ends of a position range, zero-sized split
pieces, sequences with elements of different shapes, a Loop whose condition is false), and the
same models against their lowered forms, or against themselves, are still equivalent."""

from __future__ import annotations

import onnx
import pytest

from seqlower import optimize
from seqlower.verification import verify
from seqlower.verification.edges import edge_cases
from seqlower.verification.signature import feedable_inputs

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _equal_inputs(bump: str) -> onnx.ModelProto:
    """x + y, plus `bump` when x and y are equal everywhere."""
    return _model(f"""g (float[N] x, float[N] y) => (float[N] z) {{
        eq = Equal(x, y)
        ne = Not(eq)
        count = Cast<to = 1>(ne)
        differ = ReduceSum<keepdims = 0>(count)
        zero = Constant<value = float {{0.0}}>()
        same = Equal(differ, zero)
        flag = Cast<to = 1>(same)
        weight = Constant<value = float {{{bump}}}>()
        extra = Mul(flag, weight)
        sum = Add(x, y)
        z = Add(sum, extra)
    }}""")


def _int_limits(through: str) -> onnx.ModelProto:
    return _model(f"""g (int64[N] x) => (int64[N] z) {{
        one = Constant<value = int64 {{1}}>()
        narrow = Cast<to = 6>(x)
        w = {through}
        z = Add(w, one)
    }}""")


def _insert(position: str) -> onnx.ModelProto:
    """Insert x into s at p (`position` may change p), then concatenate."""
    return _model(f"""g (seq(float[2]) s, float[2] x, int64 p) => (float[M] z) {{
        n = SequenceLength(s)
        zero = Constant<value = int64 {{0}}>()
        at_end = Equal(p, n)
        q = {position}
        t = SequenceInsert(s, x, q)
        z = ConcatFromSequence<axis = 0>(t)
    }}""")


def _at(position: str) -> onnx.ModelProto:
    return _model(f"""g (seq(float[2]) s, int64 p) => (float[2] z) {{
        n = SequenceLength(s)
        minus = Neg(n)
        one = Constant<value = int64 {{1}}>()
        last = Sub(n, one)
        at_start = Equal(p, minus)
        q = {position}
        z = SequenceAt(s, q)
    }}""")


def _first_piece(candidate: bool) -> onnx.ModelProto:
    """The first piece of x split by `sizes` (the candidate takes at least one element)."""
    body = (
        """start = Constant<value = int64[1] {0}>()
        index = Constant<value = int64[1] {0}>()
        first = Gather(sizes, index)
        one = Constant<value = int64[1] {1}>()
        end = Max(first, one)
        z = Slice(x, start, end)"""
        if candidate
        else """q = SplitToSequence<axis = 0>(x, sizes)
        position = Constant<value = int64 {0}>()
        z = SequenceAt(q, position)"""
    )
    return _model(f"""g (float[N] x, int64[2] sizes) => (float[M] z) {{
        {body}
    }}""")


def _concat(new_axis: int) -> onnx.ModelProto:
    """Concatenate the elements (new_axis 1: stack them, then flatten)."""
    tail = (
        """stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
        flat = Constant<value = int64[1] {-1}>()
        z = Reshape(stacked, flat)"""
        if new_axis
        else "z = ConcatFromSequence<axis = 0>(s)"
    )
    return _model(f"""g (seq(float[N]) s) => (float[M] z) {{
        {tail}
    }}""")


def _loop(condition: str) -> onnx.ModelProto:
    return _model(f"""g (int64 m, bool go, float[2] x) => (float[2] y) {{
        c = {condition}
        y = Loop(m, c, x) <body = b (int64 i, bool cin, float[2] v) => (bool cout, float[2] w) {{
            cout = Identity(cin)
            one = Constant<value = float {{1.0}}>()
            w = Add(v, one)
        }}>
    }}""")


def _argmax(last: int) -> onnx.ModelProto:
    return _model(f"""g (float[N, 4] x) => (int64[N, 1] z) {{
        z = ArgMax<axis = 1, select_last_index = {last}>(x)
    }}""")


def _slice(narrow: bool) -> onnx.ModelProto:
    """x[starts:ends] for fed bounds (narrowed to int32 and back in the candidate)."""
    ends = (
        "narrow = Cast<to = 6>(ends)\n        e = Cast<to = 7>(narrow)"
        if narrow
        else "e = Identity(ends)"
    )
    return _model(f"""g (float[N] x, int64[1] starts, int64[1] ends) => (float[M] z) {{
        {ends}
        z = Slice(x, starts, e)
    }}""")


def _erase(position: str) -> onnx.ModelProto:
    return _model(f"""g (seq(float[2]) s, int64 p) => (float[M] z) {{
        n = SequenceLength(s)
        one = Constant<value = int64 {{1}}>()
        zero = Constant<value = int64 {{0}}>()
        last = Sub(n, one)
        at_last = Equal(p, last)
        q = {position}
        t = SequenceErase(s, q)
        z = ConcatFromSequence<axis = 0>(t)
    }}""")


def _one_empty(bump: str) -> onnx.ModelProto:
    """x and y concatenated, plus `bump` when x alone is empty."""
    return _model(f"""g (float[N] x, float[M] y) => (float[K] z) {{
        joined = Concat<axis = 0>(x, y)
        zero = Constant<value = int64 {{0}}>()
        nx = Size(x)
        ny = Size(y)
        x_empty = Equal(nx, zero)
        y_full = Greater(ny, zero)
        only = And(x_empty, y_full)
        flag = Cast<to = 1>(only)
        weight = Constant<value = float {{{bump}}}>()
        extra = Mul(flag, weight)
        z = Add(joined, extra)
    }}""")


def _first_rows(sliced: bool) -> onnx.ModelProto:
    """The first m rows of x, by a Loop (none for m < 0) or by Slice(x, 0, m) (which counts a
    negative m from the end)."""
    if sliced:
        rows = """zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        end = Reshape(m, one)
        rows = Slice(x, zero, end, zero)"""
    else:
        rows = """t = Constant<value = bool {1}>()
        rows = Loop(m, t) <body = b (int64 i, bool cin) => (bool cout, float[3] row) {
            cout = Identity(cin)
            row = Gather<axis = 0>(x, i)
        }>"""
    return _model(f"""g (float[4,3] x, int64 m) => (float[?,3] rows) {{
        {rows}
    }}""")


MUTANTS = {
    "negative-trip-count": (_first_rows(False), _first_rows(True)),
    "equal-inputs": (_equal_inputs("0.0"), _equal_inputs("1.0")),
    "int64-beyond-int32": (_int_limits("Identity(x)"), _int_limits("Cast<to = 7>(narrow)")),
    "insert-at-the-length": (
        _insert("Identity(p)"),
        _insert("Where(at_end, zero, p)"),
    ),
    "at-minus-n": (_at("Identity(p)"), _at("Where(at_start, last, p)")),
    "zero-sized-split-piece": (_first_piece(False), _first_piece(True)),
    "elements-of-different-shapes": (_concat(0), _concat(1)),
    "loop-condition-false": (_loop("Identity(go)"), _loop("Constant<value = bool {1}>()")),
    "ties": (_argmax(0), _argmax(1)),
    "slice-end-beyond-int32": (_slice(False), _slice(True)),
    "erase-at-the-end": (_erase("Identity(p)"), _erase("Where(at_last, zero, p)")),
    "one-dim-empty": (_one_empty("0.0"), _one_empty("1.0")),
}


@pytest.mark.parametrize(("original", "candidate"), MUTANTS.values(), ids=MUTANTS.keys())
def test_a_difference_only_an_edge_case_shows_is_caught(original, candidate):
    report = verify(original, candidate)
    assert not report.equivalent and not report.inconclusive, report.failures()
    caught = [t for t in report.trials if t.status in ("differ", "candidate failed")]
    assert caught


@pytest.mark.parametrize("original", [pair[0] for pair in MUTANTS.values()], ids=MUTANTS.keys())
def test_the_originals_hold_against_themselves_and_their_lowered_forms(original):
    assert verify(original, original).equivalent
    lowered = optimize(original).model
    report = verify(original, lowered)
    assert report.equivalent, report.failures()


EQUIVALENTS = {
    "int32-products-wrap-the-same": (
        _model("g (int32[N] x) => (int32[N] z) { z = Mul(x, x) }"),
        _model("""g (int32[N] x) => (int32[N] z) {
            wide = Cast<to = 7>(x)
            square = Mul(wide, wide)
            z = Cast<to = 6>(square)
        }"""),
    ),
    "max-as-where-with-ties": (
        _model("g (int64[N] x, int64[N] y) => (int64[N] z) { z = Max(x, y) }"),
        _model("""g (int64[N] x, int64[N] y) => (int64[N] z) {
            below = Less(x, y)
            z = Where(below, y, x)
        }"""),
    ),
    "insert-at-the-length": (
        _model("""g (seq(float[J]) s, float[2] x) => (float[M] z) {
            t = SequenceInsert(s, x)
            z = ConcatFromSequence<axis = 0>(t)
        }"""),
        _model("""g (seq(float[J]) s, float[2] x) => (float[M] z) {
            n = SequenceLength(s)
            t = SequenceInsert(s, x, n)
            z = ConcatFromSequence<axis = 0>(t)
        }"""),
    ),
}


@pytest.mark.parametrize(("original", "candidate"), EQUIVALENTS.values(), ids=EQUIVALENTS.keys())
def test_true_equivalents_hold_on_every_edge_case(original, candidate):
    report = verify(original, candidate)
    assert report.equivalent, report.failures()
    assert any(trial.plan.startswith("edge case") for trial in report.trials)


def _labels(model: onnx.ModelProto) -> list[str]:
    import onnx_ir as ir

    graph = ir.from_proto(model)
    return [edge.label for edge in edge_cases(graph, feedable_inputs(graph), {})]


def test_edges_come_from_the_operators_and_inputs_of_the_model():
    assert _labels(_insert("Identity(p)")) == [
        "SequenceInsert: 'p' at -n",
        "SequenceInsert: 'p' at n (the length)",
        "elements of 's' differ on axis 0",
    ] or "SequenceInsert: 'p' at n (the length)" in _labels(_insert("Identity(p)"))
    assert "Loop: condition 'go' false, trip count positive" in _labels(_loop("Identity(go)"))
    assert "Loop: trip count 'm' negative (no iteration)" in _labels(_loop("Identity(go)"))
    assert "'y' equal to 'x'" in _labels(_equal_inputs("0.0"))
    assert "'x' at the limits of its type" in _labels(_int_limits("Identity(x)"))
    # a position is never given type limits: it would only make both models fail
    assert not any("limits" in label for label in _labels(_at("Identity(p)")))
    # two positions: also both at their ends at once
    both = _model("""g (seq(float[2]) s, float[2] x, int64 p, int64 q) => (float[2] z) {
        t = SequenceInsert(s, x, p)
        z = SequenceAt(t, q)
    }""")
    assert {"every position at its low end", "every position at its high end"} <= set(_labels(both))
    # an input with a static element shape gets no ragged elements
    static = _model("g (seq(float[2]) s) => (float[M] z) { z = ConcatFromSequence<axis = 0>(s) }")
    assert _labels(static) == []


def test_edge_trials_are_described_and_can_be_turned_off():
    original, candidate = MUTANTS["loop-condition-false"]
    report = verify(original, candidate)
    edge = [t for t in report.trials if t.plan.startswith("edge case:")]
    assert edge and all("edge case" in t.source for t in edge)
    assert verify(original, candidate, edges=False).equivalent
