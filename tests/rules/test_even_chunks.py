"""erase-even-chunks, insert-even-chunks: a run-time position into the even chunks of one tensor
is index arithmetic and one Slice each side, not a comparison per element."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, reasons, run_ort

RNG = np.random.default_rng(7)


def _model(op: str, dtype: str = "float", width: int = 8, inserted: str = "2") -> str:
    return f"""g ({dtype}[N,{width}] x, {dtype}[N,{inserted}] t, int64 p) => ({dtype}[N,?] y) {{
        two = Constant<value = int64 {{2}}>()
        s = SplitToSequence<axis = 1>(x, two)
        e = {op}
        y = ConcatFromSequence<axis = 1>(e)
    }}"""


ERASE, INSERT = "SequenceErase(s, p)", "SequenceInsert(s, t, p)"


def _chunks(x: np.ndarray) -> list[np.ndarray]:
    return [x[:, i : i + 2] for i in range(0, x.shape[1], 2)]


@pytest.mark.parametrize("rows", [0, 1, 3])
@pytest.mark.parametrize("p", [-4, -1, 0, 2, 3])
def test_erase_at_a_runtime_position_is_two_slices_and_a_concat(rows, p):
    x = RNG.standard_normal((rows, 8)).astype(np.float32)
    t = np.zeros((rows, 2), np.float32)
    feeds = {"x": x, "t": t, "p": np.array(p)}
    lowered, report, (y,) = lower_and_compare(parse(_model(ERASE)), feeds)
    chunks = _chunks(x)
    del chunks[p]
    np.testing.assert_array_equal(y, np.concatenate(chunks, axis=1))
    assert report.rules_fired["erase-even-chunks"] == 1
    counts = op_counts(lowered)
    assert counts["Slice"] == 2 and counts["Where"] == counts["Less"] == counts["If"] == 0


@pytest.mark.parametrize("p", [-4, -1, 0, 2, 4])
@pytest.mark.parametrize("dtype", ["float", "int64", "bool"])
def test_insert_at_a_runtime_position_is_two_slices_around_the_tensor(p, dtype):
    numpy_type = {"float": np.float32, "int64": np.int64, "bool": np.bool_}[dtype]
    x = (RNG.standard_normal((3, 8)) > 0).astype(numpy_type)
    t = np.ones((3, 2), numpy_type)
    feeds = {"x": x, "t": t, "p": np.array(p)}
    lowered, report, (y,) = lower_and_compare(parse(_model(INSERT, dtype)), feeds)
    chunks = _chunks(x)
    chunks.insert(p if p >= 0 else p + len(chunks), t)
    np.testing.assert_array_equal(y, np.concatenate(chunks, axis=1))
    assert report.rules_fired["insert-even-chunks"] == 1
    counts = op_counts(lowered)
    assert counts["Slice"] == 2 and counts["Where"] == 1  # one Where: the position, not data


@pytest.mark.parametrize(("op", "p"), [(ERASE, 4), (ERASE, -5), (INSERT, 5), (INSERT, -5)])
def test_an_out_of_range_position_still_fails_at_run_time(op, p):
    model = parse(_model(op))
    lowered, _ = lower(model)
    feeds = {"x": np.zeros((2, 8), np.float32), "t": np.zeros((2, 2), np.float32)}
    feeds["p"] = np.array(p)
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)


def test_uneven_chunks_are_left_to_the_per_element_forms():
    x = RNG.standard_normal((2, 7)).astype(np.float32)
    feeds = {"x": x, "t": np.zeros((2, 2), np.float32), "p": np.array(1)}
    _, report, (y,) = lower_and_compare(parse(_model(ERASE, width=7)), feeds)
    assert "erase-even-chunks" not in report.rules_fired
    np.testing.assert_array_equal(y, np.concatenate([x[:, :2], x[:, 4:]], axis=1))


def test_an_inserted_tensor_of_another_shape_is_refused_with_the_reason():
    from seqlower.rules import even_chunks, split

    model = parse(_model(INSERT, inserted="3"))
    _, report = lower(model, rules=split.RULES + even_chunks.RULES, tensor_lists=False)
    assert "the inserted tensor's shape is not provably a chunk's" in reasons(
        report, "SequenceInsert"
    )
    # the default rules lower it another way
    feeds = {"x": np.zeros((2, 8), np.float32), "t": np.ones((2, 3), np.float32)}
    feeds["p"] = np.array(1)
    _, report, (y,) = lower_and_compare(model, feeds)
    assert "insert-even-chunks" not in report.rules_fired and y.shape == (2, 11)
