"""Random inputs: reproducible, dims bound consistently, every dtype, valid positions and sizes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from seqlower.errors import ModelInputError
from seqlower.verification import SEQUENCE_LENGTHS, generate_inputs, verify

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _ir(text: str) -> ir.Model:
    return ir.serde.deserialize_model(onnx.parser.parse_model(HEADER + text))


def _proto(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model)
    return model


DIMS = _ir("""g (float[N, M] a, int32[N] b, float[?, 2] c, seq(float[M]) s, float u)
    => (float[N] z) { z = Identity(b) }""")


def test_generation_is_reproducible_per_seed_and_trial():
    first = generate_inputs(DIMS, seed=7, trial=1)
    again = generate_inputs(DIMS, seed=7, trial=1)
    other = generate_inputs(DIMS, seed=8, trial=1)
    assert np.array_equal(first["a"], again["a"])
    assert not np.array_equal(first["b"], other["b"])


def test_symbolic_dims_are_bound_consistently():
    for trial in range(3):
        feeds = generate_inputs(DIMS, trial=trial)
        n, m = feeds["a"].shape
        assert feeds["b"].shape == (n,)
        assert all(element.shape == (m,) for element in feeds["s"])
        assert feeds["c"].shape == (3, 2)  # unnamed: the small default
        assert feeds["u"].shape == ()
    feeds = generate_inputs(DIMS, dims={"N": 5, "M": 0})
    assert feeds["a"].shape == (5, 0)
    assert feeds["b"].shape == (5,)


def test_unknown_or_negative_dims_are_rejected():
    with pytest.raises(ModelInputError, match="dimension 'K' does not appear"):
        generate_inputs(DIMS, dims={"K": 2})
    with pytest.raises(ModelInputError, match="negative"):
        generate_inputs(DIMS, dims={"N": -1})


def test_sequence_lengths_cover_several_one_and_zero():
    lengths = [len(generate_inputs(DIMS, trial=trial)["s"]) for trial in range(3)]
    assert lengths == [3, 1, 0]


def test_values_are_signed():
    feeds = generate_inputs(
        _ir("g (int8[64] i, float16[64] f) => (int8[64] o) { o = Identity(i) }")
    )
    assert feeds["i"].min() < 0 < feeds["i"].max()
    assert feeds["f"].min() < 0 < feeds["f"].max()


POSITION = _ir("""g (seq(float[2]) s, int32 p) => (float[2] y) {
    q = Cast<to = 7>(p)
    y = SequenceAt(s, q)
}""")


def test_positions_stay_in_range_through_cast():
    for seed in range(20):
        for trial in range(16):
            feeds = generate_inputs(POSITION, seed=seed, trial=trial)
            n = len(feeds["s"])
            assert feeds["p"].dtype == np.int32 and feeds["p"].shape == ()
            assert (-n <= feeds["p"] <= n - 1) if n else feeds["p"] == 0


def test_position_in_a_constructed_sequence_uses_its_length():
    model = _ir("""g (float[2] a, float[2] b, int64 p) => (float[2] y) {
        s = SequenceConstruct(a, b)
        y = SequenceAt(s, p)
    }""")
    drawn = {int(generate_inputs(model, seed=seed)["p"]) for seed in range(40)}
    assert drawn == {-2, -1, 0, 1}


def test_erase_position_through_identity_and_insert():
    model = _ir("""g (seq(float[2]) s, float[2] x, int64 p) => (seq(float[2]) t) {
        q = Identity(p)
        u = SequenceInsert(s, x)
        t = SequenceErase(u, q)
    }""")
    for trial in range(16):
        feeds = generate_inputs(model, trial=trial, seed=trial)
        n = len(feeds["s"]) + 1
        assert -n <= feeds["p"] <= n - 1
    assert verify(model, model).equivalent


def test_split_sizes_sum_to_the_dimension():
    model = _ir("""g (float[N, 7] x, int64[K] sizes, int64 chunk) => (seq(float) a, seq(float) b) {
        a = SplitToSequence<axis = 1>(x, sizes)
        b = SplitToSequence<axis = -2>(x, chunk)
    }""")
    for seed in range(16):
        feeds = generate_inputs(model, seed=seed, trial=seed)
        # K = 0 (an empty sizes input) cannot sum to 7: both models reject that trial
        assert feeds["sizes"].sum() == 7 or feeds["sizes"].size == 0
        assert (feeds["sizes"] >= 0).all()
        assert 1 <= feeds["chunk"] <= max(feeds["x"].shape[0], 1)


def test_split_of_split_has_one_size_per_output():
    model = _ir("""g (float[6] x, int64[K] sizes) => (float[A] a, float[B] b, float[C] c) {
        a, b, c = Split(x, sizes)
    }""")
    sizes = generate_inputs(model)["sizes"]
    assert sizes.shape == (3,) and sizes.sum() == 6 and (sizes > 0).all()


def test_gather_indices_stay_in_range():
    model = _ir("g (float[N, 5] x, int64[4] i) => (float[N, 4] y) { y = Gather<axis = 1>(x, i) }")
    for seed in range(16):
        indices = generate_inputs(model, seed=seed, trial=seed)["i"]
        assert (indices >= -5).all() and (indices <= 4).all()


DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float",
    "double",
    "string",
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips(dtype):
    model = _proto(f"""g ({dtype}[N, 2] x, seq({dtype}[N]) s)
        => ({dtype}[N, 2] y, seq({dtype}[N]) t) {{
        y = Identity(x)
        t = Identity(s)
    }}""")
    report = verify(model, model)
    assert report.equivalent, report.failures()
    assert {trial.status for trial in report.trials} == {"ok"}
    generated = [trial for trial in report.trials if not trial.plan.startswith("edge case")]
    assert len(generated) == len(SEQUENCE_LENGTHS)
    expected = {"float": "float32", "double": "float64"}.get(dtype, dtype)
    assert report.trials[0].outputs[0].dtype == expected
    assert [trial.outputs[1].shape.split(" ")[0] for trial in generated] == [
        f"seq[{length}]" for length in SEQUENCE_LENGTHS
    ]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_is_generated_but_reported_when_onnxruntime_cannot_run_it(dtype):
    text = f"g ({dtype}[3] x) => ({dtype}[3] y) {{ y = Identity(x) }}"
    feeds = generate_inputs(_ir(text))
    assert feeds["x"].dtype == np.dtype(dtype) and np.iscomplexobj(feeds["x"])
    report = verify(_proto(text), _proto(text), trials=1)
    assert report.trials[0].status == "both failed"
    assert not report.equivalent
    assert "cannot load the model" in report.trials[0].original_error


def test_unsupported_input_types_are_a_one_line_error():
    with pytest.raises(ModelInputError, match="input 'x': cannot generate values of type BFLOAT16"):
        generate_inputs(_ir("g (bfloat16[2] x) => (bfloat16[2] y) { y = Identity(x) }"))
    with pytest.raises(ModelInputError, match="input 'o' has type"):
        generate_inputs(_ir("g (optional(float[2]) o) => (bool y) { y = OptionalHasElement(o) }"))
