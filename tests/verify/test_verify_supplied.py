"""Supplied inputs: .npz files, ONNX test-data folders, Python mappings, and their errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from seqlower.errors import ModelInputError
from seqlower.verification import verify

AT = onnx.parser.parse_model("""<ir_version: 9, opset_import: ["": 18]>
g (seq(float[2]) s, int64 p) => (float[2] y) { y = SequenceAt(s, p) }""")
FIRST = onnx.parser.parse_model("""<ir_version: 9, opset_import: ["": 18]>
g (seq(float[2]) s, int64 p) => (float[2] y) {
    zero = Constant<value = int64 {0}>()
    y = SequenceAt(s, zero)
}""")
ELEMENTS = [np.float32([1, 2]), np.float32([3, 4]), np.float32([5, 6])]


def _write_pb(path, proto):
    path.write_bytes(proto.SerializeToString())


def _data_set(folder, position: int, named: bool = True):
    folder.mkdir()
    sequence = numpy_helper.from_list(ELEMENTS, name="s" if named else "")
    position_tensor = numpy_helper.from_array(np.array(position), name="p" if named else "")
    _write_pb(folder / "input_0.pb", sequence)
    _write_pb(folder / "input_1.pb", position_tensor)


def test_npz_with_a_sequence_split_along_its_first_axis(tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, s=np.stack(ELEMENTS), p=np.array(-1))
    report = verify(AT, AT, inputs=path)
    assert report.equivalent
    assert len(report.trials) == 1
    assert report.trials[0].inputs == {"s": "seq[3] of float32 [2]", "p": "int64 []"}


def test_npz_with_numbered_elements_finds_a_difference(tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, **{"s/0": ELEMENTS[0], "s/1": ELEMENTS[1], "p": np.array(1)})
    report = verify(AT, FIRST, inputs=str(path))
    assert not report.equivalent
    assert report.trials[0].inputs["s"] == "seq[2] of float32 [2]"


def test_test_data_folder_by_name_and_by_position(tmp_path):
    _data_set(tmp_path / "named", 2)
    _data_set(tmp_path / "unnamed", 2, named=False)
    for folder in ("named", "unnamed"):
        report = verify(AT, FIRST, inputs=tmp_path / folder)
        assert report.trials[0].outputs[0].verdict == "values differ"
    # a name wins over the position
    folder = tmp_path / "swapped"
    folder.mkdir()
    _write_pb(folder / "input_0.pb", numpy_helper.from_array(np.array(0), name="p"))
    _write_pb(folder / "input_1.pb", numpy_helper.from_list(ELEMENTS, name="s"))
    assert verify(AT, FIRST, inputs=folder).equivalent


def test_test_data_sets_are_trials(tmp_path):
    _data_set(tmp_path / "test_data_set_0", 0)
    _data_set(tmp_path / "test_data_set_1", 1)
    report = verify(AT, FIRST, inputs=tmp_path)
    assert [trial.status for trial in report.trials] == ["ok", "differ"]


def test_python_mappings_are_trials():
    report = verify(AT, FIRST, inputs=[{"s": ELEMENTS, "p": np.array(0)}, {"s": [], "p": 0}])
    assert [trial.status for trial in report.trials] == ["ok", "both failed"]


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (None, "no such file or folder"),
        (lambda path: np.savez(path, s=np.stack(ELEMENTS)), "no value for input 'p'"),
        (lambda path: np.savez(path, s=np.stack(ELEMENTS), p=0, q=1), "'q' is not an input"),
        (lambda path: path.write_bytes(b"not a zip"), "not an .npz file"),
    ],
    ids=["missing", "missing-name", "unknown-name", "garbage"],
)
def test_bad_npz_inputs_raise(tmp_path, write, message):
    path = tmp_path / "inputs.npz"
    if write:
        write(path)
    with pytest.raises(ModelInputError, match=message):
        verify(AT, AT, inputs=path)


def test_bad_test_data_folders_raise(tmp_path):
    with pytest.raises(ModelInputError, match=r"no input_0\.pb"):
        verify(AT, AT, inputs=tmp_path)
    (tmp_path / "input_0.pb").write_bytes(b"\xff\xff\xff")
    with pytest.raises(ModelInputError, match=r"input_0\.pb: not a SequenceProto"):
        verify(AT, AT, inputs=tmp_path)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.array(1, dtype=np.int32), r"input 'p' needs int64 \[\], got int32 \[\]"),
        (np.array([1]), r"input 'p' needs int64 \[\], got int64 \[1\]"),
    ],
    ids=["dtype", "rank"],
)
def test_a_tensor_of_the_wrong_dtype_or_shape_is_bad_input(tmp_path, value, message):
    path = tmp_path / "inputs.npz"
    np.savez(path, s=np.stack(ELEMENTS), p=value)
    with pytest.raises(ModelInputError, match=message):
        verify(AT, AT, inputs=path)


def test_a_sequence_element_of_the_wrong_dtype_or_size_is_bad_input(tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, s=np.zeros((2, 3), np.float32), p=np.array(0))
    with pytest.raises(ModelInputError, match=r"element 0 of input 's' needs float32 \[2\], got"):
        verify(AT, AT, inputs=path)
    with pytest.raises(ModelInputError, match=r"element 1 of input 's' needs float32 \[2\]"):
        verify(AT, AT, inputs={"s": [ELEMENTS[0], ELEMENTS[1].astype(np.float64)], "p": 0})
    folder = tmp_path / "data"
    folder.mkdir()
    _write_pb(folder / "input_0.pb", numpy_helper.from_list([np.ones(2, np.int64)], name="s"))
    _write_pb(folder / "input_1.pb", numpy_helper.from_array(np.array(0), name="p"))
    with pytest.raises(ModelInputError, match=r"element 0 of input 's' needs float32 \[2\]"):
        verify(AT, AT, inputs=folder)


def test_symbolic_dims_take_any_size():
    model = onnx.parser.parse_model("""<ir_version: 9, opset_import: ["": 18]>
    g (float[N, 2] x) => (float[N, 2] y) { y = Neg(x) }""")
    assert verify(model, model, inputs={"x": np.zeros((5, 2), np.float32)}).equivalent
    with pytest.raises(ModelInputError, match=r"input 'x' needs float32 \[N, 2\], got float32"):
        verify(model, model, inputs={"x": np.zeros((5, 3), np.float32)})


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x80\x04\x95 pickled", "not a zip archive"),
        (b"\x93NUMPY\x01\x00 an .npy header", "a single .npy array"),
    ],
    ids=["pickle", "npy"],
)
def test_a_file_that_is_not_npz_is_one_line_without_numpys_pickle_message(
    tmp_path, content, reason
):
    path = tmp_path / "inputs.npz"
    path.write_bytes(content)
    with pytest.raises(ModelInputError) as raised:
        verify(AT, AT, inputs=path)
    message = str(raised.value)
    assert message == f"{path}: not an .npz file ({reason}); save inputs with numpy.savez"
    assert "pickle" not in message and "\n" not in message
