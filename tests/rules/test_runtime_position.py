"""insert-at-runtime-position / erase-at-runtime-position (Where, Gather and If-chain forms):
emitted form, refusals, and equality with the original under onnxruntime for every position,
including the ones that must fail."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import parser

import seqlower
from seqlower import runtime_quirks
from seqlower.analysis import Facts
from seqlower.ops import SEQUENCE_OPS
from seqlower.options import Options
from seqlower.passes.normalize import NormalizePass
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import runtime_position
from seqlower.rules.runtime_position import WHERE_TYPES

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[2] b, float[2] c, float[2] t, int64 p, int32 q)
    => (float[4,2] y, float[2,2] z) {
  s = SequenceConstruct(a, b, c)
  inserted = SequenceInsert(s, t, p)
  erased = SequenceErase(inserted, q)
  y = ConcatFromSequence<axis=0, new_axis=1>(inserted)
  twice = SequenceErase(erased, q)
  z = ConcatFromSequence<axis=0, new_axis=1>(twice)
}"""


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return session.run(None, feeds)
    except Exception:  # the spec makes an out-of-range position a run-time error
        return None


@pytest.fixture(scope="module")
def models() -> tuple[onnx.ModelProto, onnx.ModelProto, seqlower.Report]:
    original = parser.parse_model(MODEL)
    proto, report = seqlower.optimize(original, target="portable")  # a ModelProto, as given
    onnx.checker.check_model(proto, full_check=True)
    return original, proto, report


def test_emits_where_selects_and_no_sequence_ops(models) -> None:
    _, lowered, report = models
    ops = [node.op_type for node in lowered.graph.node]
    assert not SEQUENCE_OPS & set(ops)
    assert "Where" in ops and "Gather" in ops
    assert report.rules_fired["insert-at-runtime-position"] == 1
    assert report.rules_fired["erase-at-runtime-position"] == 2


@pytest.mark.parametrize("p", range(-5, 6))
def test_same_results_and_same_failures_for_every_position(models, p: int) -> None:
    original, lowered, _ = models
    rng = np.random.default_rng(p + 10)
    feeds = {k: rng.standard_normal(2).astype(np.float32) for k in "abct"}
    for q in range(-5, 5):
        feeds.update(p=np.array(p, np.int64), q=np.array(q, np.int32))
        expected, actual = _run(original, feeds), _run(lowered, feeds)
        assert (expected is None) == (actual is None), (p, q)
        if expected is not None:
            for want, got in zip(expected, actual, strict=True):
                np.testing.assert_array_equal(got, want)


def test_refuses_an_erase_whose_result_is_empty() -> None:
    model = parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] a, int64 p) => (seq(float[2]) e) {
      s = SequenceConstruct(a)
      e = SequenceErase(s, p)
    }""")
    lowered, report = seqlower.optimize(model, target="portable")
    reasons = " ".join(
        r for op in report.remaining if op.op_type == "SequenceErase" for r in op.reasons
    )
    assert "nothing would check the position" in reasons
    proto = lowered  # a ModelProto, as given
    assert _run(proto, {"a": np.ones(2, np.float32), "p": np.array(3)}) is None
    assert _run(proto, {"a": np.ones(2, np.float32), "p": np.array(-1)}) == [[]]


@pytest.mark.parametrize("dtype", sorted(runtime_quirks.WHERE_PORTABLE_TYPES - {"string"}))
def test_lowers_element_types_every_supported_onnxruntime_has_where_for(dtype: str) -> None:
    model = parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({dtype}[2] a, {dtype}[2] b, int64 p) => ({dtype}[1,2] y) {{
      s = SequenceConstruct(a, b)
      e = SequenceErase(s, p)
      y = ConcatFromSequence<axis=0, new_axis=1>(e)
    }}""")
    lowered, report = seqlower.optimize(model, target="portable")
    assert report.rules_fired.get("erase-at-runtime-position") == 1
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    np_type = onnx.helper.tensor_dtype_to_np_dtype(getattr(onnx.TensorProto, dtype.upper()))
    a, b = np.array([1, 2]).astype(np_type), np.array([3, 4]).astype(np_type)
    for p in (-2, -1, 0, 1):
        feeds = {"a": a, "b": b, "p": np.array(p, np.int64)}
        (want,), (got,) = _run(model, feeds), _run(proto, feeds)
        np.testing.assert_array_equal(got, want)


# -- the Gather form: element types onnxruntime's Where does not take ------------------------

_TYPED = """<ir_version: 8, opset_import: ["" : 17]>
g ({t}[2] a, {t}[2] b, {t}[2] c, {t}[2] t, int64 p, int32 q) => ({t}[4,2] y, {t}[2,2] z) {{
  s = SequenceConstruct(a, b, c)
  inserted = SequenceInsert(s, t, p)
  erased = SequenceErase(inserted, q)
  y = ConcatFromSequence<axis=0, new_axis=1>(inserted)
  twice = SequenceErase(erased, q)
  z = ConcatFromSequence<axis=0, new_axis=1>(twice)
}}"""

# no Where kernel in some supported onnxruntime release (seqlower.runtime_quirks, where-kernels)
_NO_WHERE = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
}


def _where_loads(dtype: ir.DataType) -> bool:
    model = parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (bool[2] c, {dtype.name.lower()}[2] a, {dtype.name.lower()}[2] b)
        => ({dtype.name.lower()}[2] y) {{ y = Where(c, a, b) }}""")
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


def test_where_types_are_the_ones_onnxruntime_runs() -> None:
    """Every type the Where form emits loads here (runtime_quirks probes the others)."""
    for dtype in WHERE_TYPES:
        assert _where_loads(dtype), dtype
    assert not {d.name.lower() for d in WHERE_TYPES} & set(_NO_WHERE)


@pytest.mark.parametrize("type_name", sorted(_NO_WHERE))
def test_types_without_where_are_gathered_for_every_position(type_name: str) -> None:
    original = parser.parse_model(_TYPED.format(t=type_name))
    lowered, report = seqlower.optimize(original, target="portable")
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    ops = [node.op_type for node in proto.graph.node]
    assert not SEQUENCE_OPS & set(ops)
    assert "If" not in ops
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True).graph.value_info
    types = {info.name: info.type.tensor_type.elem_type for info in inferred}
    where_types = {types[n.output[0]] for n in proto.graph.node if n.op_type == "Where"}
    assert where_types == {onnx.TensorProto.INT64}  # indices only, never the elements
    assert report.rules_fired["insert-at-runtime-position-gather"] == 1
    assert report.rules_fired["erase-at-runtime-position-gather"] == 2
    rng = np.random.default_rng(3)
    dtype = _NO_WHERE[type_name]
    for p in range(-5, 6):
        for q in range(-4, 4):
            feeds = {k: rng.integers(0, 2**15, 2).astype(dtype) for k in "abct"}
            feeds.update(p=np.array(p, np.int64), q=np.array(q, np.int32))
            expected, actual = _run(original, feeds), _run(proto, feeds)
            assert (expected is None) == (actual is None), (p, q)
            if expected is not None:
                for want, got in zip(expected, actual, strict=True):
                    np.testing.assert_array_equal(got, want)


def _checks(text: str, op_type: str) -> dict[str, object]:
    """What each rule of runtime_position answers for the one `op_type` node of `text`."""
    model = ir.from_proto(parser.parse_model(text))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    (node,) = [n for n in model.graph if n.op_type == op_type]
    return {rule.name: rule.check(node, ctx) for rule in runtime_position.RULES.for_op(op_type)}


def test_each_form_refuses_what_another_form_takes() -> None:
    answers = _checks(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (bool[2] a, bool[2] t, int64 p) => (seq(bool) y) {
          s = SequenceConstruct(a, a)
          y = SequenceInsert(s, t, p)
        }""",
        "SequenceInsert",
    )
    where = answers["insert-at-runtime-position"]
    assert where == Refusal("some supported onnxruntime releases have no Where for bool elements")
    assert not isinstance(answers["insert-at-runtime-position-gather"], Refusal)
    answers = _checks(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] a, float[3] b, int64 p) => (seq(float) y) {
          s = SequenceConstruct(a, b, a)
          y = SequenceErase(s, p)
        }""",
        "SequenceErase",
    )
    shapes = Refusal("the elements do not share one static shape, so they cannot be stacked")
    assert answers["erase-at-runtime-position"] == shapes
    assert answers["erase-at-runtime-position-gather"] == shapes
    assert not isinstance(answers["erase-at-runtime-position-if-chain"], Refusal)
    answers = _checks(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] a, float[2] t, int64 p) => (seq(float) y) {
          s = SequenceConstruct(a, a)
          y = SequenceInsert(s, t, p)
        }""",
        "SequenceInsert",
    )
    gather = Refusal("Where takes this element type (the Where form applies)")
    assert answers["insert-at-runtime-position-gather"] == gather


def test_every_form_refuses_a_sequence_of_unknown_elements() -> None:
    model = parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] t, int64 p, seq(float[2]) s) => (seq(float) y) {
      y = SequenceInsert(s, t, p)
    }""")
    _, report = seqlower.optimize(model, target="portable")
    (kept,) = [op for op in report.remaining if op.op_type == "SequenceInsert"]
    for rule in ("", "-gather", "-if-chain"):
        assert f"insert-at-runtime-position{rule}: 's' is a sequence-typed model input" in (
            "; ".join(kept.reasons)
        )


# -- the If-chain form: elements of different or unknown shapes ------------------------------

DIFFERENT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[3] b, float[1] c, float[4] t, int64 p, int64 q)
    => (float[?] y, float[?] z) {
  s = SequenceConstruct(a, b, c)
  inserted = SequenceInsert(s, t, p)
  y = ConcatFromSequence<axis=0>(inserted)
  erased = SequenceErase(inserted, q)
  z = ConcatFromSequence<axis=0>(erased)
}"""

# lengths 0 and 1: a is of unknown length, so even the insert into the empty sequence is chosen
# by an If; then b (another shape) goes into the one-element sequence, and one is erased again
SHORT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N] a, float[3] b, int64 p, int64 q, int64 r) => (float[?] y, float[?] z) {
  empty = SequenceEmpty<dtype = 1>()
  one = SequenceInsert(empty, a, p)
  two = SequenceInsert(one, b, q)
  y = ConcatFromSequence<axis=0>(two)
  back = SequenceErase(two, r)
  z = ConcatFromSequence<axis=0>(back)
}"""


def _lowered(text: str) -> tuple[onnx.ModelProto, onnx.ModelProto, seqlower.Report]:
    original = parser.parse_model(text)
    lowered, report = seqlower.optimize(original, target="portable")
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    return original, proto, report


def _same(original, lowered, feeds) -> None:  # type: ignore[no-untyped-def]
    expected, actual = _run(original, feeds), _run(lowered, feeds)
    assert (expected is None) == (actual is None), {k: v for k, v in feeds.items() if v.ndim == 0}
    if expected is not None:
        for want, got in zip(expected, actual, strict=True):
            np.testing.assert_array_equal(got, want)


def test_different_shapes_become_if_chains_for_every_position() -> None:
    original, lowered, report = _lowered(DIFFERENT)
    ops = [node.op_type for node in lowered.graph.node]
    assert not SEQUENCE_OPS & set(ops) and "If" in ops
    assert report.rules_fired["insert-at-runtime-position-if-chain"] == 1
    assert report.rules_fired["erase-at-runtime-position-if-chain"] == 1
    rng = np.random.default_rng(4)
    sizes = {"a": 2, "b": 3, "c": 1, "t": 4}
    for p in range(-5, 5):
        for q in range(-5, 5):
            feeds = {k: rng.standard_normal(n).astype(np.float32) for k, n in sizes.items()}
            feeds.update(p=np.array(p, np.int64), q=np.array(q, np.int64))
            _same(original, lowered, feeds)


def test_lengths_zero_and_one_by_if_chains() -> None:
    original, lowered, report = _lowered(SHORT)
    assert not SEQUENCE_OPS & {node.op_type for node in lowered.graph.node}
    assert report.rules_fired["insert-at-runtime-position-if-chain"] == 2
    rng = np.random.default_rng(5)
    for p, q, r in itertools.product(range(-2, 2), range(-3, 3), range(-3, 3)):
        feeds = {
            "a": rng.standard_normal(rng.integers(0, 4)).astype(np.float32),
            "b": rng.standard_normal(3).astype(np.float32),
            "p": np.array(p, np.int64),
            "q": np.array(q, np.int64),
            "r": np.array(r, np.int64),
        }
        _same(original, lowered, feeds)


def test_onnx_sequence_model1_reads_an_insert_at_an_overridable_position() -> None:
    """ONNX's own simple model: Z inserted at a position callers may override, then read at
    another overridable position; the elements differ in their first dim."""
    original = parser.parse_model("""<ir_version: 7, opset_import: ["" : 12]>
    g (float[2,3,4] X, float[1,3,4] Y, float[3,3,4] Z, int64 pos, int64 pos_at)
        => (float[?,3,4] out) <int64 pos = {1}, int64 pos_at = {2}> {
      e = SequenceEmpty()
      s1 = SequenceInsert(e, X)
      s2 = SequenceInsert(s1, Y)
      s3 = SequenceInsert(s2, Z, pos)
      out = SequenceAt(s3, pos_at)
    }""")
    lowered, report = seqlower.optimize(original, target="portable")
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    assert not SEQUENCE_OPS & {node.op_type for node in proto.graph.node}
    assert report.rules_fired["insert-at-runtime-position-if-chain"] == 1
    rng = np.random.default_rng(6)
    for pos, pos_at in itertools.product(range(-3, 4), range(-4, 4)):
        feeds = {
            "X": rng.standard_normal((2, 3, 4)).astype(np.float32),
            "Y": rng.standard_normal((1, 3, 4)).astype(np.float32),
            "Z": rng.standard_normal((3, 3, 4)).astype(np.float32),
            "pos": np.array(pos, np.int64),
            "pos_at": np.array(pos_at, np.int64),
        }
        _same(original, proto, feeds)
