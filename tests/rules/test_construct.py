"""SequenceConstruct / SequenceEmpty / SequenceInsert / SequenceErase / Identity fold into known
elements (design.md trap 5); a stacked ConcatFromSequence shows the elements in order."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)

import seqlower

A, B, C, D = (np.full(2, k, dtype=np.float32) for k in (1, 2, 3, 4))
FEEDS = {"a": A, "b": B, "c": C, "d": D}


def stacked(body: str) -> str:
    """A model over a, b, c, d (float[2]) whose output is the stack of the sequence `s`."""
    return f"""g (float[2] a, float[2] b, float[2] c, float[2] d) => (float[N,2] y) {{
        {body}
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }}"""


def assert_lowers_to(body: str, expected: list[np.ndarray]) -> None:
    __tracebackhide__ = True
    model = parse(stacked(body))
    lowered, _, (y,) = lower_and_compare(model, FEEDS)
    np.testing.assert_array_equal(y, np.stack(expected))
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Concat"] == 1


def test_construct():
    assert_lowers_to("s = SequenceConstruct(a, b, c)", [A, B, C])


def test_insert_appends_without_position():
    assert_lowers_to(
        """e = SequenceEmpty<dtype = 1>()
        s1 = SequenceInsert(e, a)
        s = SequenceInsert(s1, b)""",
        [A, B],
    )


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (0, [D, A, B, C]),
        (1, [A, D, B, C]),
        (3, [A, B, C, D]),
        (-1, [A, B, D, C]),
        (-3, [D, A, B, C]),
    ],
)
def test_insert_at_a_constant_position(position, expected):
    assert_lowers_to(
        f"""c0 = SequenceConstruct(a, b, c)
        p = Constant<value = int64 {{{position}}}>()
        s = SequenceInsert(c0, d, p)""",
        expected,
    )


def test_insert_position_may_be_int32():
    assert_lowers_to(
        """c0 = SequenceConstruct(a, b)
        p = Constant<value = int32 {0}>()
        s = SequenceInsert(c0, c, p)""",
        [C, A, B],
    )


def test_erase_defaults_to_the_last_element():
    assert_lowers_to(
        """c0 = SequenceConstruct(a, b, c)
        s = SequenceErase(c0)""",
        [A, B],
    )


@pytest.mark.parametrize(("position", "expected"), [(0, [B, C]), (-1, [A, B]), (-3, [B, C])])
def test_erase_at_a_constant_position(position, expected):
    assert_lowers_to(
        f"""c0 = SequenceConstruct(a, b, c)
        p = Constant<value = int64 {{{position}}}>()
        s = SequenceErase(c0, p)""",
        expected,
    )


def test_identity_of_a_sequence():
    assert_lowers_to(
        """c0 = SequenceConstruct(a, b)
        s = Identity(c0)""",
        [A, B],
    )


def test_identity_of_a_sequence_output_becomes_the_construct():
    model = parse("""g (float[2] a, float[2] b) => (seq(float[2]) t) {
        s = SequenceConstruct(a, b)
        t = Identity(s)
    }""")
    lowered, report, _ = lower_and_compare(model, {"a": A, "b": B})
    assert report.rules_fired == {"identity-of-known": 1}
    assert op_counts(lowered) == {"SequenceConstruct": 1}


def test_identity_of_a_sequence_that_stays_is_kept_with_a_reason():
    """A copy of the construct would stay beside the original (both are outputs): one more
    sequence operator, so the Identity stays."""
    model = parse("""g (float[2] a, float[2] b) => (seq(float[2]) s, seq(float[2]) t) {
        s = SequenceConstruct(a, b)
        t = Identity(s)
    }""")
    lowered, report, _ = lower_and_compare(model, {"a": A, "b": B}, tensor_lists=False)
    assert report.rules_fired == {}
    assert op_counts(lowered) == {"SequenceConstruct": 1, "Identity": 1}
    assert "would add a sequence operator" in reasons(report)


def test_identity_in_a_branch_of_an_outer_sequence_adds_no_operator():
    """Fuzz seed 29728: the then-branch copied an outer sequence (also a model output) that
    the If cannot split (its branches differ in length); folding the Identity added a
    SequenceConstruct."""
    model = parse("""g (float[2] a, bool c) => (seq(float[2]) s, float[N,2] y) {
        s = SequenceConstruct(a)
        r = If(c) <
            then_branch = t () => (seq(float[2]) i) { i = Identity(s) },
            else_branch = e () => (seq(float[2]) z) { z = SequenceEmpty<dtype = 1>() }
        >
        y = ConcatFromSequence<axis = 0, new_axis = 1>(r)
    }""")
    lowered, _, _ = lower_and_compare(model, {"a": A, "c": np.array(True)})
    assert sequence_op_count(lowered) <= sequence_op_count(model)


def test_empty_then_insert_then_erase_chain():
    assert_lowers_to(
        """e = SequenceEmpty<dtype = 1>()
        s1 = SequenceInsert(e, a)
        s2 = SequenceInsert(s1, b)
        zero = Constant<value = int64 {0}>()
        s3 = SequenceErase(s2, zero)
        s = SequenceInsert(s3, c, zero)""",
        [C, B],
    )


def test_position_from_an_initializer_is_static():
    model = parse("""g (float[2] a, float[2] b) => (float[N,2] y) <int64 p = {0}> {
        c0 = SequenceConstruct(a, b)
        s = SequenceInsert(c0, b, p)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }""")
    lowered, _, (y,) = lower_and_compare(model, {"a": A, "b": B})
    np.testing.assert_array_equal(y, np.stack([B, A, B]))
    assert sequence_op_count(lowered) == 0


# -- refusals ----------------------------------------------------------------------------------


RUNTIME_INSERT = """g (float[2] a, float[2] b, float[2] c, int64 p) => (float[N,2] y) {
    s0 = SequenceConstruct(a, b)
    s = SequenceInsert(s0, c, p)
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""
RUNTIME_ERASE = """g (float[2] a, float[2] b, float[2] c, int64 p) => (float[N,2] y) {
    s0 = SequenceConstruct(a, b, c)
    s = SequenceErase(s0, p)
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""


@pytest.mark.parametrize(
    ("text", "p"),
    [(RUNTIME_INSERT, p) for p in (0, 1, 2, -1, -2)] + [(RUNTIME_ERASE, p) for p in (0, 2, -1, -3)],
)
def test_runtime_position_on_elements_of_one_shape(text, p):
    feeds = {"a": A, "b": B, "c": C, "p": np.array(p, dtype=np.int64)}
    lowered, _, _ = lower_and_compare(parse(text), feeds)
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("text", "p"),
    [(RUNTIME_INSERT, 3), (RUNTIME_INSERT, -3), (RUNTIME_ERASE, 3), (RUNTIME_ERASE, -4)],
)
def test_out_of_range_runtime_position_still_fails_at_run_time(text, p):
    model = parse(text)
    lowered, _ = lower(model)
    feeds = {"a": A, "b": B, "c": C, "p": np.array(p, dtype=np.int64)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)invalid|out of|bound|range"):
            run_ort(candidate, feeds)


def test_runtime_position_on_elements_of_different_shapes_is_an_if_chain():
    """insert-into-known refuses a run-time position; the If-chain form takes it."""
    model = parse("""g (float[2] a, float[3] b, int64 p) => (float[N] y) {
        c0 = SequenceConstruct(a, b)
        s = SequenceInsert(c0, a, p)
        y = ConcatFromSequence<axis = 0>(s)
    }""")
    b3 = np.arange(3, dtype=np.float32)
    for p in (0, 2, -1, -2):
        lowered, report, (y,) = lower_and_compare(model, {"a": A, "b": b3, "p": np.array(p)})
        parts = [A, b3]
        parts.insert(p + 2 if p < 0 else p, A)  # -1: before the last element
        np.testing.assert_array_equal(y, np.concatenate(parts))
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["insert-at-runtime-position-if-chain"] == 1


def test_an_overridable_initializer_position_is_not_static():
    """An initializer that is also a graph input can be fed by the caller (IR < 4 style)."""
    model = parse(
        """g (float[2] a, float[3] b, int64 p) => (float[N] y) <int64 p = {0}> {
            c0 = SequenceConstruct(a, b)
            s = SequenceErase(c0, p)
            y = ConcatFromSequence<axis = 0>(s)
        }""",
    )
    b3 = np.arange(3, dtype=np.float32)
    lowered, report, (y,) = lower_and_compare(model, {"a": A, "b": b3, "p": np.array(1)})
    np.testing.assert_array_equal(y, A)
    assert op_counts(lowered)["SequenceErase"] == 0
    assert report.rules_fired == {
        "erase-at-runtime-position-if-chain": 1,
        "concat-known": 1,
    }  # not erase-from-known: the position is not static


def test_insert_into_a_sequence_typed_model_input_is_kept_with_a_reason():
    model = parse("""g (seq(float[2]) s0, float[2] a) => (float[N,2] y) {
        s = SequenceInsert(s0, a)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }""")
    for length in (0, 1, 3):
        feeds = {"s0": [B] * length, "a": A}
        lowered, report, _ = lower_and_compare(model, feeds)
    assert op_counts(lowered)["SequenceInsert"] == 1
    assert "'s0' is a sequence-typed model input" in reasons(report, "SequenceInsert")


# -- errors in the model (trap 5) --------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "p = Constant<value = int64 {3}>()\n [bad] s = SequenceErase(c0, p)",
        "p = Constant<value = int64 {-4}>()\n [bad] s = SequenceErase(c0, p)",
        "p = Constant<value = int64 {4}>()\n [bad] s = SequenceInsert(c0, d, p)",
        "p = Constant<value = int64 {-4}>()\n [bad] s = SequenceInsert(c0, d, p)",
    ],
)
def test_out_of_range_constant_positions_are_errors_naming_the_node(body):
    model = parse(stacked("c0 = SequenceConstruct(a, b, c)\n" + body))
    with pytest.raises(seqlower.InvalidModelError, match=r"'bad'.*out of range"):
        lower(model)


def test_erasing_from_an_empty_sequence_is_an_error_naming_the_node():
    model = parse(stacked("e = SequenceEmpty<dtype = 1>()\n [bad] s = SequenceErase(e)"))
    with pytest.raises(seqlower.InvalidModelError, match=r"'bad'"):
        lower(model)
