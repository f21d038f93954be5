"""The table of a list (its length, the starts and ends of its elements) is built in the branch
of an If that holds every reader of the list, not before the If: a loop that edits a list only
where a condition holds (`if not x.shape[0]: continue` then `output[xi] = x`, yolov5's
`non_max_suppression`) builds it in no iteration that continues."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

# output = z.split(sizes); for i in range(B): kept = x[i][x[i] > 0];
# if kept.numel() == 0: {then} else: output[i] = kept (erased at p = i + shift, of either
# sign, put back at i); cat(output + [tail])
TEXT = """g (float[B,N] x, float[T] z, int64[B] sizes, int64 shift) => (float[?] y) {{
    yes = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    dims = Shape(x)
    count = Gather(dims, zero)
    start = SplitToSequence<axis = 0>(z, sizes)
    done = Loop(count, yes, start) <body = body (int64 i, bool c, seq(float) s)
                                              => (bool c1, seq(float) s1) {{
        c1 = Identity(c)
        row = Gather<axis = 0>(x, i)
        nothing = Constant<value = float {{0}}>()
        above = Greater(row, nothing)
        kept = Compress<axis = 0>(row, above)
        size = Size(kept)
        none = Constant<value = int64 {{0}}>()
        empty = Equal(size, none)
        p = Add(i, shift)
        s1 = If(empty) <then_branch = skip () => (seq(float) r1) {{
            {then}
        }}, else_branch = put () => (seq(float) r2) {{
            gone = SequenceErase(s, p)
            r2 = SequenceInsert(gone, kept, i)
        }}>
    }}>
    tail = Constant<value = float[1] {{-7}}>()
    ended = SequenceInsert(done, tail)
    y = ConcatFromSequence<axis = 0>(ended)
}}"""
SKIP = "r1 = Identity(s)"  # continue
# the skipped element marked instead: a reader of the list in both branches
MARK = """mark = Constant<value = float[1] {-1}>()
            cleared = SequenceErase(s, p)
            r1 = SequenceInsert(cleared, mark, i)"""
RNG = np.random.default_rng(7)


def _model(then: str = SKIP):
    return parse(TEXT.format(then=then), opset=18)


def _feeds(rows: int, shift: int = 0, width: int = 4) -> dict[str, np.ndarray]:
    x = RNG.standard_normal((rows, width)).astype(np.float32)
    if rows:
        x[0] = -1.0  # an image with no candidate: continue
    sizes = np.arange(rows, dtype=np.int64) % 3
    z = np.arange(int(sizes.sum()), dtype=np.float32) + 100
    return {"x": x, "z": z, "sizes": sizes, "shift": np.array(shift, np.int64)}


def _want(feeds: dict[str, np.ndarray], mark: bool) -> np.ndarray:
    x, z, sizes = feeds["x"], feeds["z"], feeds["sizes"]
    pieces = np.split(z, np.cumsum(sizes)[:-1]) if len(sizes) else []
    for i, row in enumerate(x):
        kept = row[row > 0]
        if kept.size:
            pieces[i] = kept
        elif mark:
            pieces[i] = np.array([-1], np.float32)
    return np.concatenate([*pieces, np.array([-7], np.float32)])


def _graphs_with(model, op_type: str) -> list[str]:
    """The names of the graphs (the main graph "main", a branch by its name) holding op_type."""
    found = []

    def walk(graph, name):
        for node in graph.node:
            if node.op_type == op_type:
                found.append(name)
            for attr in node.attribute:
                if attr.g.node:
                    walk(attr.g, attr.g.name or attr.name)

    walk(model.graph, "main")
    return found


def test_the_table_is_built_in_the_branch_that_edits():
    lowered, _ = lower(_model(), target="generic")
    assert op_counts(lowered)["SequenceErase"] == 0
    # the starts and ends of the list and of the list erased from: in the else branch only,
    # none in the body before the If
    assert _graphs_with(lowered, "CumSum") == ["put", "put"]


def test_a_list_read_in_both_branches_has_its_table_before_the_if():
    lowered, _ = lower(_model(MARK), target="generic")
    # the list's table before the If, shared by both; in each branch the erased list's
    assert sorted(_graphs_with(lowered, "CumSum")) == ["body", "put", "skip"]


@pytest.mark.parametrize("then", [SKIP, MARK], ids=["continue", "mark"])
@pytest.mark.parametrize(("rows", "shift"), [(5, 0), (5, -5), (1, 0), (1, -1), (0, 0)], ids=str)
def test_same_outputs_at_either_sign_and_with_no_element(then, rows, shift):
    model = _model(then)
    lowered, _ = lower(model, target="generic")
    feeds = _feeds(rows, shift)
    (y,) = assert_same_outputs(model, lowered, feeds)
    np.testing.assert_array_equal(y, _want(feeds, then == MARK))


@pytest.mark.parametrize("then", [SKIP, MARK], ids=["continue", "mark"])
def test_a_position_out_of_range_fails_in_both(then):
    model = _model(then)
    lowered, _ = lower(model, target="generic")
    assert_both_fail(model, lowered, _feeds(3, shift=3))
