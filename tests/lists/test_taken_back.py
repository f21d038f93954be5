"""An element put into a list and taken out again at the same position: the list before.

    xs.insert(-1, v)          SequenceInsert(s, v, -1)      (v becomes element -2)
    w = xs.pop(-2)      ->    SequenceAt(t, -2) is v,  SequenceErase(t, -2) is s

Where the insert's position is one the list surely has (a construct's length, or an edit or a
read before it proved it), the insert needs no check of its own, so nothing is lost when
nothing reads it any more. Where it may be out of range, the insert stays and fails as the
original does. Checked for inserts at positions of either sign and appends taken back by
`pop()`, what they emit and the numbers against the original under onnxruntime on lists of
0 to 5 elements (both fail where the original fails).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower_tensor_form,
    parse,
    sequence_op_count,
)

# xs = list(x.unbind(0)); the last element doubled (which proves n >= 1); v put at `put_at`,
# read back at `read_at` and erased there; then the list stacked with the value read appended
TAKEN_BACK = """
agraph (float[N,3] x, float[3] v) => (float[?,3] y) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    last = Constant <value = int64 {{-1}}> ()
    {prove}
    {put}
    r = SequenceAt (t, {read_at})
    e = SequenceErase (t{erase_at})
    two = Constant <value = float {{2}}> ()
    w = Mul (r, two)
    f = SequenceInsert (e, w)
    y = ConcatFromSequence <axis=0, new_axis=1> (f)
}}"""
PROVED = """a = SequenceAt (s, last)
    kept = SequenceErase (s, last)
    s1 = SequenceInsert (kept, a)"""
NOT_PROVED = "s1 = Identity (s)"


def readers_of(name: str, model_proto) -> list[str]:
    return [node.op_type for node in model_proto.graph.node if name in node.input]


def model(put: str, read_at: str, erase_at: str, prove: str = PROVED):
    return parse(
        TAKEN_BACK.format(
            prove=prove,
            put=put,
            read_at=read_at,
            erase_at="" if erase_at is None else f", {erase_at}",
        )
    )


def feeds(rows: int) -> dict:
    rng = np.random.default_rng(rows + 3)
    return {
        "x": rng.standard_normal((rows, 3)).astype(np.float32),
        "v": np.arange(3, dtype=np.float32) + 7,
    }


CASES = {
    # insert(-1, v): v is element -2 afterwards
    "before the last": ("p = Constant <value = int64 {-1}> ()\n    t = SequenceInsert (s1, v, p)",
                        "q", "q", "q = Constant <value = int64 {-2}> ()"),
    # insert(0, v): v is element 0
    "at the front": ("p = Constant <value = int64 {0}> ()\n    t = SequenceInsert (s1, v, p)",
                     "p", "p", ""),
    # append(v) then pop(): v is element -1, and the erase without a position takes it
    "appended": ("t = SequenceInsert (s1, v)", "last", None, ""),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_element_put_and_taken_back_leaves_the_list_before(case):
    put, read_at, erase_at, position = CASES[case]
    original = model(f"{position}\n    {put}", read_at, erase_at)
    lowered, _ = lower_tensor_form(original)
    assert sequence_op_count(lowered) == 0
    # the list after the take-back is the list before the put: nothing splices v in, the
    # value read back is v itself
    assert readers_of("v", lowered) == ["Mul"]
    for rows in range(6):
        assert_same_or_both_fail(original, lowered, feeds(rows))


def test_an_insert_at_a_position_not_proved_keeps_its_check():
    """Without the read of the last element, nothing proves the list has one: the insert at
    -1 stays and fails on an empty list, as the original does."""
    put, read_at, erase_at, position = CASES["before the last"]
    original = model(f"{position}\n    {put}", read_at, erase_at, prove=NOT_PROVED)
    lowered, _ = lower_tensor_form(original)
    assert sorted(readers_of("v", lowered)) != ["Mul"]  # the insert is there
    for rows in range(6):
        assert_same_or_both_fail(original, lowered, feeds(rows))


def test_an_erase_elsewhere_is_an_erase():
    """A read and an erase at -1 after insert(-1, v) take the old last element, not v."""
    put, _, _, position = CASES["before the last"]
    original = model(f"{position}\n    {put}", "last", "last")
    lowered, _ = lower_tensor_form(original)
    for rows in range(6):
        assert_same_or_both_fail(original, lowered, feeds(rows))
