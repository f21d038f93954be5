"""erase-even-chunks, insert-even-chunks: a run-time position into the even chunks of one tensor
is index arithmetic and one Slice each side, not a comparison per element."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse, reasons, run_ort

import seqlower
from seqlower.errors import InvalidModelError

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
    model = parse(_model(INSERT, dtype))
    if dtype == "bool":  # numpy is the oracle: onnxruntime 1.20 has no bool SplitToSequence
        lowered, report = lower(model)
        (y,) = run_ort(lowered, feeds)
    else:
        lowered, report, (y,) = lower_and_compare(model, feeds)
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


def _stack(x_type: str, axis: int, stack_axis: int) -> str:
    return f"""g ({x_type} x) => (float y) {{
        two = Constant<value = int64 {{2}}>()
        s = SplitToSequence<axis = {axis}>(x, two)
        y = ConcatFromSequence<axis = {stack_axis}, new_axis = 1>(s)
    }}"""


@pytest.mark.parametrize(
    ("x_type", "axis", "stack_axis", "shape"),
    [
        ("float[N,3]", 0, 0, (6, 3)),
        ("float[N,3]", 0, 1, (6, 3)),
        ("float[N,3]", 0, -1, (6, 3)),
        ("float[N,3]", 0, 2, (4, 3)),
        ("float[3,N]", 1, 0, (3, 8)),
        ("float[3,N]", 1, -3, (3, 8)),
        ("float[6,3]", 0, 1, (6, 3)),  # a static count: still one Reshape
    ],
)
def test_a_stack_of_even_chunks_is_a_reshape(x_type, axis, stack_axis, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    lowered, report, (y,) = lower_and_compare(parse(_stack(x_type, axis, stack_axis)), {"x": x})
    chunks = np.split(x, shape[axis] // 2, axis=axis)
    np.testing.assert_array_equal(y, np.stack(chunks, axis=stack_axis))
    assert report.rules_fired == {"stack-of-even-split": 1}
    assert op_counts(lowered)["Reshape"] == 1 and op_counts(lowered)["Unsqueeze"] == 0


def test_a_stack_of_uneven_chunks_still_fails_at_run_time():
    """Chunks of 2, 2, 1 cannot be stacked."""
    model = parse(_stack("float[N,3]", 0, 0))
    lowered, _ = lower(model)
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)mismatch|reshape"):
            run_ort(candidate, {"x": np.zeros((5, 3), np.float32)})


def test_a_stack_over_an_empty_dim_is_empty_where_onnxruntime_raises():
    """The documented deviation (docs/design.md, "Deliberate deviations")."""
    model = parse(_stack("float[N,3]", 0, 0))
    lowered, _ = lower(model)
    with pytest.raises(Exception, match=r"(?i)1 or more inputs"):
        run_ort(model, {"x": np.zeros((0, 3), np.float32)})
    try:
        (y,) = run_ort(lowered, {"x": np.zeros((0, 3), np.float32)})
    except Exception as error:  # onnxruntime 1.20 refuses Reshape's -1 over zero elements
        assert "reshape" in str(error).lower()
    else:
        assert y.size == 0


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("rows", [1, 2, 4])
def test_one_short_chunk_stacks_too(rows, opset):
    """split(2) of one row is one chunk of one row: a stack of shape [1, 1, 3]."""
    model = parse(_stack("float[N,3]", 0, 1), opset=opset)
    x = RNG.standard_normal((rows, 3)).astype(np.float32)
    _, report, (y,) = lower_and_compare(model, {"x": x})
    chunks = [x[i : i + 2] for i in range(0, rows, 2)]
    np.testing.assert_array_equal(y, np.stack(chunks, axis=1))
    assert report.rules_fired == {"stack-of-even-split": 1}


@pytest.mark.parametrize(
    ("x_type", "opset", "reason"),
    [
        ("float[5,3]", 18, "the original always fails here"),
        ("float[N,3]", 11, "needs Min over int64 (opset 12)"),
    ],
)
def test_a_stack_left_as_it_is_says_why(x_type, opset, reason):
    from seqlower.rules import even_chunks

    model = parse(_stack(x_type, 0, 0), opset=opset)
    if x_type == "float[5,3]":  # chunks of 2, 2 and 1 rows: the file itself is refused first
        with pytest.raises(InvalidModelError, match=r"differ on dimension 0 \(1, 2\)"):
            seqlower.optimize(model)
        model = ir.serde.deserialize_model(model)  # the rule's own reason, past that check
    _, report = lower(model, rules=even_chunks.RULES, tensor_lists=False)
    assert reason in reasons(report)


def test_a_stack_over_other_dims_known_at_run_time_only_is_refused_with_the_reason():
    from seqlower.rules import even_chunks

    _, report = lower(
        parse(_stack("float[N,M]", 0, 0)), rules=even_chunks.RULES, tensor_lists=False
    )
    assert "a dim other than the split axis is not static" in reasons(report)
