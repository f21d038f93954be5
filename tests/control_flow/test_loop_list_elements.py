"""loop-list-elements: a list of static length a Loop carries and edits at static positions
(a decoder's per-layer cache, `caches[i] = torch.cat([caches[i], k], 1)`) carries its elements,
one tensor each, and the edits fold away."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower_and_compare, op_counts, parse, rule_check, sequence_op_count

from seqlower.rule import Refusal
from seqlower.rules import loop_list_elements

_TYPES = {
    "float": (np.float32, 1),
    "float16": (np.float16, 10),
    "int64": (np.int64, 7),
    "bool": (np.bool_, 9),
}


def _cache(
    dtype: str = "float",
    first: int = 0,
    second: int = 1,
    read: str = "old1 = SequenceAt(s0, p1)",
    start: str = "start = SequenceConstruct(a, b)",
    extra: str = "",
) -> str:
    """`caches = [a, b]; for i in range(m): for each layer j: caches[p_j] =
    cat([caches[p_j], row_j], 1)`, as TorchScript exports it (SequenceErase and SequenceInsert
    at the same position), then both elements and the length."""
    to = _TYPES[dtype][1]
    return f"""g (int64 m, {dtype}[2,3] a, {dtype}[2,1] b) => ({dtype}[2,?] x0, {dtype}[2,?] x1,
                                                      int64 n) {{
    t = Constant<value = bool {{1}}>()
    {start}
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq({dtype}[2,?]) caches)
                                   => (bool c2, seq({dtype}[2,?]) updated) {{
        p0 = Constant<value = int64 {{{first}}}>()
        p1 = Constant<value = int64 {{{second}}}>()
        shape = Constant<value = int64[2] {{2, 1}}>()
        step = Cast<to = {to}>(i)
        row = Expand(step, shape)
        old0 = SequenceAt(caches, p0)
        new0 = Concat<axis = 1>(old0, row)
        e0 = SequenceErase(caches, p0)
        s0 = SequenceInsert(e0, new0, p0)
        {read}
        new1 = Concat<axis = 1>(old1, row, row)
        e1 = SequenceErase(s0, p1)
        updated = SequenceInsert(e1, new1, p1)
        {extra}
        c2 = Identity(c)
    }}>
    zero = Constant<value = int64 {{0}}>()
    one = Constant<value = int64 {{1}}>()
    x0 = SequenceAt(s, zero)
    x1 = SequenceAt(s, one)
    n = SequenceLength(s)
}}"""


def _feeds(dtype: str, trips: int) -> dict[str, np.ndarray]:
    numpy_type = _TYPES[dtype][0]
    a = np.arange(6).reshape(2, 3).astype(numpy_type)
    b = (np.arange(2).reshape(2, 1) + 5).astype(numpy_type)
    return {"m": np.array(trips, np.int64), "a": a, "b": b}


def _body(model) -> list:
    (loop,) = [node for node in model.graph.node if node.op_type == "Loop"]
    return next(a.g for a in loop.attribute if a.name == "body")


@pytest.mark.parametrize("trips", [0, 1, 4])
@pytest.mark.parametrize("dtype", sorted(_TYPES))
def test_each_element_is_carried_and_the_edits_fold_away(dtype, trips):
    model = parse(_cache(dtype))
    lowered, report, (x0, x1, n) = lower_and_compare(model, _feeds(dtype, trips))
    assert report.rules_fired["loop-list-elements"] == 1
    assert x0.shape == (2, 3 + trips) and x1.shape == (2, 1 + 2 * trips) and n == 2
    assert sequence_op_count(lowered) == 0
    body = _body(lowered)
    # no table, no splice: each assignment is at most the Concat the model computes (the
    # first, of one row per iteration, then becomes a scan output: `loop-concat-to-scan`)
    assert op_counts(lowered)["Loop"] == 1
    kinds = {node.op_type for node in body.node}
    assert not {"Slice", "ScatterND", "ScatterElements", "CumSum", "Gather", "Split"} & kinds
    assert 1 <= sum(node.op_type == "Concat" for node in body.node) <= 2


@pytest.mark.parametrize(
    ("first", "second"),
    [(-1, -1), (-1, 0), (1, -1), (0, 0)],
)
def test_negative_and_repeated_positions(first, second):
    """`xs[-1] = x` as exported (SequenceErase(s, -1), then SequenceInsert(.., x, -1)) puts x
    before the last element: the elements move, as onnxruntime computes them."""
    text = _cache(first=first, second=second)
    lowered, report, _ = lower_and_compare(parse(text), _feeds("float", 3))
    assert report.rules_fired["loop-list-elements"] == 1
    assert sequence_op_count(lowered) == 0


def test_a_list_emptied_and_refilled_within_the_body():
    """One element erased (the list empty in between) and a new one appended: length 1 again."""
    start = "start = SequenceConstruct(b)"
    read = "old1 = Identity(new0)"
    text = _cache("int64", start=start, read=read, second=0).replace(
        "x1 = SequenceAt(s, one)", "x1 = SequenceAt(s, zero)"
    )
    text = text.replace("s0 = SequenceInsert(e0, new0, p0)", "s0 = SequenceInsert(e0, new0)")
    lowered, report, (x0, _, n) = lower_and_compare(parse(text), _feeds("int64", 3))
    assert report.rules_fired["loop-list-elements"] == 1
    assert n == 1 and x0.shape == (2, 1 + 3 * 3)
    assert sequence_op_count(lowered) == 0


def test_a_rotated_list_keeps_its_length():
    """The first element erased and a new one appended, every iteration: a queue of two."""
    text = _cache().replace(
        "updated = SequenceInsert(e1, new1, p1)",
        "e2 = SequenceErase(s0, p0)\n        updated = SequenceInsert(e2, new1)",
    )
    lowered, report, (_, _, n) = lower_and_compare(parse(text), _feeds("float", 3))
    assert report.rules_fired["loop-list-elements"] == 1
    assert n == 2
    assert sequence_op_count(lowered) == 0


# -- refusals ----------------------------------------------------------------------------------


def _refusal(text: str) -> str:
    found = rule_check(parse(text), loop_list_elements._check, "Loop")
    assert isinstance(found, Refusal), "loop-list-elements accepts the Loop"
    return found.reason


_IF_READ = """old1 = SequenceAt(s0, p1)
        yes = Constant<value = bool {1}>()
        branch = If(yes) <then_branch = th () => (float[2,?] r) { r = SequenceAt(caches, p0) },
                          else_branch = el () => (float[2,?] r) { r = SequenceAt(caches, p1) }>"""


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"read": "old1 = SequenceAt(s0, i)"}, "run-time or out-of-range position"),
        (
            {"read": "three = Constant<value = int64 {2}>()\n        old1 = SequenceAt(s0, three)"},
            "run-time or out-of-range position",
        ),
        ({"second": 2}, "out-of-range position"),
        ({"first": -3}, "out-of-range position"),
        ({"read": _IF_READ}, "nested graph"),
        ({"first": -2}, "inserts at a run-time or out-of-range position"),
        ({"extra": "wrapped = Optional(s0)"}, "reads it with Optional"),
        ({"start": "start = SequenceEmpty<dtype = 1>()"}, "starts empty"),
        ({"start": "start = SplitToSequence<axis = 1>(a, m)"}, "initial length is not static"),
    ],
)
def test_refuses(kwargs, why):
    assert why in _refusal(_cache(**kwargs))


def test_refuses_a_list_that_grows():
    text = _cache().replace(
        "updated = SequenceInsert(e1, new1, p1)", "updated = SequenceInsert(s0, new1)"
    )
    assert "does not give back" in _refusal(text)


def test_refuses_more_elements_than_the_limit():
    count = loop_list_elements.MAX_ELEMENTS + 1
    start = f"start = SequenceConstruct({', '.join(['a'] * (count - 1) + ['b'])})"
    assert f"{count} elements" in _refusal(_cache(start=start))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"read": "old1 = SequenceAt(s0, i)"},
        {"start": "start = SequenceEmpty<dtype = 1>()"},
    ],
)
def test_refused_loops_still_lower_and_compute_the_same_or_fail_alike(kwargs):
    """A run-time read keeps the list a tensor form in the loop (it fails where i > 1, as the
    original does); an empty start fails at the first read, in both."""
    from support import assert_same_or_both_fail, lower

    model = parse(_cache(**kwargs))
    lowered, report = lower(model)
    assert "loop-list-elements" not in report.rules_fired
    for trips in (0, 1, 2, 3):
        assert_same_or_both_fail(model, lowered, _feeds("float", trips))
