"""What seqlower knows about onnxruntime is probed, not assumed (seqlower.runtime_quirks).

Tripwires: each quirk the installed onnxruntime still shows is asserted with a concrete model;
once a release fixes one, its test skips and names the version, so docs/design.md (generated from
the same records) and the quirk can be updated, and no user's install fails because of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from support import ort_session, parse, run_ort

from seqlower import runtime_quirks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

VERSION = runtime_quirks.onnxruntime_version()


def _skip_unless_it_holds(key: str) -> None:
    if not runtime_quirks.holds(key):
        pytest.skip(f"onnxruntime {VERSION} no longer shows quirk {key}")


def test_every_quirk_has_a_record_the_readme_can_show():
    keys = [quirk.key for quirk in runtime_quirks.QUIRKS]
    assert len(keys) == len(set(keys))
    for quirk in runtime_quirks.QUIRKS:
        assert quirk.behaviour and quirk.seen_on and quirk.response, quirk.key


def test_a_scalar_split_of_1_with_keepdims_0_is_squeezed():
    _skip_unless_it_holds("scalar-split-keepdims")
    model = parse("""g (float[2,3] x) => (float[3] y) {
        one = Constant<value = int64 {1}>()
        s = SplitToSequence<axis = 0, keepdims = 0>(x, one)
        y = SequenceAt(s, one)
    }""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = run_ort(model, {"x": x})
    assert y.shape == (3,)  # the specification's element is x[1:2], shape [1, 3]


def test_a_string_gather_miscopies():
    _skip_unless_it_holds("string-gather")
    model = parse("g (string[3,2] x, int64 i) => (string[2] y) { y = Gather<axis = 0>(x, i) }")
    x = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)
    (y,) = run_ort(model, {"x": x, "i": np.array(1)})
    assert y.tolist() != ["c", "d"]


def _where(name: str) -> onnx.ModelProto:
    return parse(f"g (bool c, {name}[2] a, {name}[2] b) => ({name}[2] y) {{ y = Where(c, a, b) }}")


def test_where_is_emitted_only_for_types_with_a_kernel_here():
    """Can fail: a release that drops a Where kernel the rules rely on."""
    assert not runtime_quirks.missing_where_kernels() & runtime_quirks.WHERE_PORTABLE_TYPES
    for name in sorted(runtime_quirks.WHERE_PORTABLE_TYPES):
        ort_session(_where(name))


def test_the_missing_where_kernels_are_refused_at_load():
    _skip_unless_it_holds("where-kernels")
    for name in sorted(runtime_quirks.missing_where_kernels()):
        with pytest.raises(Exception, match=r"(?i)implementation|kernel"):
            ort_session(_where(name))


def test_a_crop_and_a_pad_on_one_axis_lose_the_pad_value_or_fail():
    _skip_unless_it_holds("pad-crop-and-pad")
    model = parse(runtime_quirks.CROP_AND_PAD)
    feeds = {"x": np.array([5.0], np.float32), "pads": np.array([-1, 2], np.int64)}
    try:
        (cropped,) = run_ort(model, feeds)
    except Exception:  # onnxruntime raises its own error types
        cropped = None
    feeds = {"x": np.array([1.0, 2.0], np.float32), "pads": np.array([1, -3], np.int64)}
    try:
        (past,) = run_ort(model, feeds)
    except Exception:  # onnxruntime raises its own error types
        past = None
    assert cropped is None or not np.array_equal(cropped, [-9.0, -9.0]) or past is None or past.size


def test_the_limits_are_within_what_onnx_knows():
    limits = runtime_quirks.limits()
    assert 7 <= limits.max_ir_version <= onnx.IR_VERSION
    assert 13 <= limits.newest_opset <= onnx.defs.onnx_opset_version()


def test_a_probe_that_can_crash_runs_in_a_child_process():
    (quirk,) = [q for q in runtime_quirks.QUIRKS if q.key == "transpose-cast-matmul-crash"]
    assert quirk.crashes
    # this process survives the probe whatever it finds (a crash kills only the child)
    assert runtime_quirks.holds(quirk.key) in (True, False)


def test_a_nested_sequence_map_is_refused_at_load():
    _skip_unless_it_holds("nested-sequence-map")
    model = parse(runtime_quirks.NESTED_SEQUENCE_MAP)
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(Exception, match="topologically sorted"):
        ort_session(model)


def test_the_docs_list_every_quirk_with_its_versions():
    import update_docs

    text = update_docs.QUIRKS.read_text(encoding="utf-8")
    assert update_docs.regenerated(text) == text, "run: python tools/update_docs.py"
    for quirk in runtime_quirks.QUIRKS:
        assert f"`{quirk.key}`" in text and quirk.seen_on in text, quirk.key


def test_a_transposed_double_matmul_is_refused_at_load():
    _skip_unless_it_holds("fused-matmul-double")
    model = parse(runtime_quirks.TRANSPOSED_DOUBLE_MATMUL)
    with pytest.raises(Exception, match="FusedMatMul"):
        ort_session(model)


def test_a_gather_of_a_negative_range_reads_rows():
    """Range(0, -1) is empty, and onnxruntime's unoptimized run says so; its optimizer turns
    the pair into Slice(x, 0, -1), the rows but the last."""
    _skip_unless_it_holds("gather-negative-range")
    model = parse(runtime_quirks.GATHER_NEGATIVE_RANGE)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "m": np.array(-1)}
    (rows,) = run_ort(model, feeds)
    assert rows.shape == (3, 3)


def test_a_gather_of_a_range_past_the_end_reads_the_rows_there_are():
    """The specification's Gather fails at position 4 of 4 rows, and onnxruntime's unoptimized
    run does; its optimizer's Slice(x, 0, 6) stops at the end (why loop-batch checks a count
    with a Gather of its own: tests/rules/test_loop_batching_lengths.py)."""
    _skip_unless_it_holds("gather-range-past-end")
    model = parse(runtime_quirks.GATHER_NEGATIVE_RANGE)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "m": np.array(6)}
    (rows,) = run_ort(model, feeds)
    assert rows.shape == (4, 3)


def test_a_topk_over_no_row_gives_no_row():
    """Where the release does not crash on it (a child process asks), TopK of [0, 4] is [0, 2]."""
    (quirk,) = [q for q in runtime_quirks.QUIRKS if q.key == "topk-empty-rows-crash"]
    assert quirk.crashes
    if runtime_quirks.holds(quirk.key):
        pytest.skip(f"onnxruntime {VERSION} crashes here")
    values, positions = run_ort(
        parse(runtime_quirks.TOPK_OF_NO_ROW), {"x": np.zeros((0, 4), np.float32)}
    )
    assert values.shape == positions.shape == (0, 2)


def test_an_empty_split_vector_gives_chunks_of_one():
    _skip_unless_it_holds("split-to-sequence-empty-split")
    model = parse("""g (float[3,2] x, int64[K] sizes) => (int64 n) {
        s = SplitToSequence<axis = 0>(x, sizes)
        n = SequenceLength(s)
    }""")
    feeds = {"x": np.zeros((3, 2), np.float32), "sizes": np.zeros(0, np.int64)}
    (n,) = run_ort(model, feeds)
    assert n == 3  # the specification requires the sizes to add up to 3


def test_a_split_of_a_piece_by_a_negative_size_fails():
    """Sizes [1, -1] add up to the piece's 0 rows, but the specification requires sizes >= 0:
    later releases fail with an error; onnxruntime 1.20 dies of a signal (probed in a child)."""
    (quirk,) = [q for q in runtime_quirks.QUIRKS if q.key == "split-negative-size-crash"]
    assert quirk.crashes
    model = parse(runtime_quirks.SPLIT_OF_A_PIECE)
    onnx.checker.check_model(model, full_check=True)
    if runtime_quirks.holds(quirk.key):
        pytest.skip(f"onnxruntime {runtime_quirks.onnxruntime_version()} crashes here")
    feeds = {
        "x": np.zeros((2, 3), np.float32),
        "cut": np.array([0, 2]),
        "sizes": np.array([1, -1]),
    }
    with pytest.raises(Exception, match="Split"):
        run_ort(model, feeds)
    run_ort(model, {**feeds, "sizes": np.array([0, 0])})  # sizes >= 0 that add up: runs


def test_a_concat_of_an_empty_misfit_is_not_checked():
    _skip_unless_it_holds("concat-empty-misfit")
    model = parse(runtime_quirks.CONCAT_OF_AN_EMPTY_MISFIT)
    feeds = {"a": np.full((1, 1), 2.0, np.float32), "b": np.zeros((1, 0), np.float32)}
    (y,) = run_ort(model, feeds)
    assert y.shape == (2, 1)  # the specification: an error (dim 1 is 1 in a, 0 in b)
    from onnx.reference import ReferenceEvaluator

    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, feeds)
