"""`--flatten-sequence-io` / `--seq-len name=n`: sequence inputs and outputs become tensors."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_outputs_equal, lower, parse, run_ort, sequence_op_count

import seqlower
from cli_features.models import floats, sequence_interface


def names(values) -> list[str]:
    return [value.name for value in values]


def test_outputs_and_inputs_become_one_tensor_per_element():
    model = sequence_interface()
    lowered, report = lower(model, flatten_sequence_io=True, seq_lens={"s": 3})

    assert names(lowered.graph.input) == ["s_0", "s_1", "s_2", "x"]
    assert names(lowered.graph.output) == ["t", "y_0", "y_1", "y_2"]
    assert all(o.type.HasField("tensor_type") for o in lowered.graph.output)
    assert [d.dim_value for d in lowered.graph.input[0].type.tensor_type.shape.dim] == [2]
    assert sequence_op_count(lowered) == 0
    assert report.interface_changes == [
        {"kind": "flatten_input", "name": "s", "new_names": ["s_0", "s_1", "s_2"],
         "elem_type": "FLOAT", "elem_shape": [2]},
        {"kind": "flatten_output", "name": "y", "new_names": ["y_0", "y_1", "y_2"],
         "elem_type": "FLOAT"},
    ]  # fmt: skip
    assert report.to_dict()["interface_changes"] == report.interface_changes

    elements, x = [floats(2) for _ in range(3)], floats(3, 4)
    t, y = run_ort(model, {"s": elements, "x": x})
    flat = run_ort(lowered, {"s_0": elements[0], "s_1": elements[1], "s_2": elements[2], "x": x})
    assert_outputs_equal([t, *y], flat)


def test_without_the_flag_the_interface_is_kept():
    lowered, report = lower(sequence_interface())
    assert names(lowered.graph.input) == ["s", "x"]
    assert names(lowered.graph.output) == ["t", "y"]
    assert report.interface_changes == []


def test_a_taken_name_gets_a_fresh_one():
    model = parse("""
agraph (float[2,3] x) => (seq(float[1,3]) y, float[2,3] y_0) {
  y = SplitToSequence <axis=0> (x)
  y_0 = Neg(x)
}""")
    lowered, _ = lower(model, flatten_sequence_io=True)
    assert names(lowered.graph.output) == ["y_0_1", "y_1", "y_0"]
    x = floats(2, 3)
    (y, negated), flat = run_ort(model, {"x": x}), run_ort(lowered, {"x": x})
    assert_outputs_equal([*y, negated], flat)


def test_an_element_that_is_a_model_input_is_carried_by_an_identity():
    model = parse("""
agraph (float[3] a, float[3] b) => (seq(float[3]) y) {
  y = SequenceConstruct(a, b, a)
}""")
    lowered, _ = lower(model, flatten_sequence_io=True)
    assert names(lowered.graph.output) == ["y_0", "y_1", "y_2"]
    a, b = floats(3), floats(3)
    assert_outputs_equal(run_ort(model, [a, b])[0], run_ort(lowered, [a, b]))


def test_an_output_of_unknown_length_is_kept_and_listed():
    model = parse("""
agraph (float[N,3] x) => (seq(float[1,3]) y) {
  y = SplitToSequence <axis=0> (x)
}""")
    lowered, report = lower(model, flatten_sequence_io=True)
    assert names(lowered.graph.output) == ["y"]
    assert report.interface_changes == []
    assert any(w.startswith("sequence output 'y' kept: ") for w in report.warnings)


def test_an_output_of_static_length_whose_elements_are_not_values_yet_is_read_by_position():
    # an insert at a position known only at run time: the length (3) is static, the
    # elements are not values in the graph; the outputs read them back with SequenceAt
    model = parse("""
agraph (float[2,3] x, float[1,3] z, int64 p) => (seq(float[1,3]) y) {
  s = SplitToSequence <axis=0> (x)
  y = SequenceInsert(s, z, p)
}""")
    lowered, report = lower(model, flatten_sequence_io=True)
    assert names(lowered.graph.output) == ["y_0", "y_1", "y_2"]
    assert report.interface_changes[0]["new_names"] == ["y_0", "y_1", "y_2"]
    x, z = floats(2, 3), floats(1, 3)
    for position in (0, 1, 2, -1):
        feeds = {"x": x, "z": z, "p": np.array(position, dtype=np.int64)}
        assert_outputs_equal(run_ort(model, feeds)[0], run_ort(lowered, feeds))


def test_a_sequence_input_without_a_length_stays_with_a_warning():
    lowered, report = lower(sequence_interface(), flatten_sequence_io=True)
    assert names(lowered.graph.input) == ["s", "x"]
    assert any("--seq-len s=<n>" in w for w in report.warnings)


def test_an_empty_input_sequence_is_flattened_to_no_input():
    model = parse("""
agraph (seq(float[2]) s) => (int64 n) {
  n = SequenceLength(s)
}""")
    lowered, report = lower(model, flatten_sequence_io=True, seq_lens={"s": 0})
    assert names(lowered.graph.input) == []
    assert report.interface_changes[0]["new_names"] == []
    assert run_ort(lowered, {})[0] == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"seq_lens": {"s": 2}}, "needs flatten_sequence_io"),
        ({"flatten_sequence_io": True, "seq_lens": {"nope": 2}}, "no input named 'nope'"),
        ({"flatten_sequence_io": True, "seq_lens": {"x": 2}}, "input 'x' is not sequence-typed"),
        ({"flatten_sequence_io": True, "seq_lens": {"s": -2}}, "length must be an integer >= 0"),
    ],
)
def test_bad_lengths_are_one_line_errors(options, message):
    with pytest.raises(seqlower.SeqlowerError, match=message):
        seqlower.optimize(sequence_interface(), **options)
