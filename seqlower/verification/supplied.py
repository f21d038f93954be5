"""Inputs the user supplies instead of random ones: ONNX test-data folders and `.npz` files.

Accepted layouts, each giving one or more trials:

- a folder holding `input_0.pb`, `input_1.pb`, ... (ONNX's test-data layout): one trial. Each file
  is a TensorProto, or a SequenceProto for a sequence input. A file whose proto carries the name of
  an input feeds that input; an unnamed one feeds the input at its position (inputs with an
  initializer do not count).
- a folder holding `test_data_set_0/`, `test_data_set_1/`, ... of that layout: one trial each.
- an `.npz` file keyed by input name: one trial. A sequence input is either one array split along
  its first axis (`name`, which also allows an empty sequence) or its elements as `name/0`,
  `name/1`, ...

Every input without an initializer must get a value and every value must name an input, of the
declared element type, rank and static dimensions (symbolic ones may take any size); otherwise
`ModelInputError` says which input, and what it needs.
"""

from __future__ import annotations

__all__ = ["check_feeds", "load_supplied"]

import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from seqlower.errors import ModelInputError
from seqlower.verification.signature import InputSpec
from seqlower.verification.values import Feeds, RuntimeValue, describe_value

_INPUT_FILE = re.compile(r"input_(\d+)\.pb")
_DATA_SET = re.compile(r"test_data_set_(\d+)")


def load_supplied(source: str | os.PathLike[str], specs: list[InputSpec]) -> list[Feeds]:
    """The trials stored at `source` (a folder or an `.npz` file), checked against `specs`."""
    path = Path(source)
    if not path.exists():
        raise ModelInputError(f"{path}: no such file or folder")
    if path.is_dir():
        sets = _numbered(path, _DATA_SET, want_dirs=True)
        if sets:
            return [_load_folder(folder, specs) for folder in sets]
        return [_load_folder(path, specs)]
    return [_load_npz(path, specs)]


def check_feeds(feeds: Mapping[str, RuntimeValue], specs: list[InputSpec], where: str) -> Feeds:
    """`feeds` as a plain dict with strings as object arrays, after checking that it names every
    input in `specs` and nothing else."""
    known = {spec.name for spec in specs}
    for name in feeds:
        if name not in known:
            raise ModelInputError(f"{where}: '{name}' is not an input of the original model")
    result: Feeds = {}
    for spec in specs:
        if spec.name not in feeds:
            raise ModelInputError(f"{where}: no value for input '{spec.name}'")
        value = feeds[spec.name]
        if spec.is_sequence != isinstance(value, list):
            kind = "a sequence" if spec.is_sequence else "a tensor"
            raise ModelInputError(f"{where}: input '{spec.name}' needs {kind}")
        if isinstance(value, list):
            result[spec.name] = [_normalize(element) for element in value]
            for index, element in enumerate(result[spec.name]):
                _check_array(element, spec, f"{where}: element {index} of input '{spec.name}'")
        else:
            result[spec.name] = _normalize(value)
            _check_array(result[spec.name], spec, f"{where}: input '{spec.name}'")
    return result


def _check_array(array: np.ndarray, spec: InputSpec, what: str) -> None:
    """Raise when `array` has another element type, rank or static dimension than `spec`."""
    if spec.dtype == ir.DataType.STRING:
        dtype_ok = array.dtype.kind in "OU"
    else:
        dtype_ok = array.dtype == spec.dtype.numpy()
    shape_ok = spec.shape is None or (
        array.ndim == len(spec.shape)
        and all(not isinstance(d, int) or d == size for d, size in zip(spec.shape, array.shape))
    )
    if dtype_ok and shape_ok:
        return
    wanted = "string" if spec.dtype == ir.DataType.STRING else str(np.dtype(spec.dtype.numpy()))
    if spec.shape is not None:
        wanted += " [" + ", ".join("?" if d is None else str(d) for d in spec.shape) + "]"
    raise ModelInputError(f"{what} needs {wanted}, got {describe_value(array)}")


def _normalize(array: object) -> np.ndarray:
    result = np.asarray(array)
    return result.astype(object) if result.dtype.kind == "U" else result


def _numbered(folder: Path, pattern: re.Pattern[str], *, want_dirs: bool) -> list[Path]:
    found = []
    for entry in folder.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_dir() == want_dirs:
            found.append((int(match.group(1)), entry))
    return [entry for _, entry in sorted(found)]


def _load_folder(folder: Path, specs: list[InputSpec]) -> Feeds:
    files = _numbered(folder, _INPUT_FILE, want_dirs=False)
    if not files and specs:
        raise ModelInputError(f"{folder}: no input_0.pb (nor test_data_set_0/) in this folder")
    by_name = {spec.name: spec for spec in specs}
    feeds: Feeds = {}
    for position, file in enumerate(files):
        default = specs[position] if position < len(specs) else None
        name, value = _read_pb(file, default, by_name)
        if name in feeds:
            raise ModelInputError(f"{file}: input '{name}' is given twice")
        feeds[name] = value
    return check_feeds(feeds, specs, str(folder))


def _read_pb(
    file: Path, default: InputSpec | None, by_name: Mapping[str, InputSpec]
) -> tuple[str, RuntimeValue]:
    try:
        data = file.read_bytes()
    except OSError as error:
        raise ModelInputError(f"{file}: cannot be read ({error.strerror})") from None
    # Protobuf parses almost any bytes as either message: trust a name only when it names an
    # input of the matching kind, else go by position.
    for is_sequence in (False, True):
        spec = by_name.get(_peek_name(data, is_sequence))
        if spec is not None and spec.is_sequence == is_sequence:
            return spec.name, _parse(file, data, is_sequence)
    if default is None:
        raise ModelInputError(f"{file}: the model has no input at this position")
    return default.name, _parse(file, data, default.is_sequence)


def _peek_name(data: bytes, is_sequence: bool) -> str:
    proto = onnx.SequenceProto() if is_sequence else onnx.TensorProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return ""
    return proto.name


def _parse(file: Path, data: bytes, is_sequence: bool) -> RuntimeValue:
    proto: onnx.TensorProto | onnx.SequenceProto
    proto = onnx.SequenceProto() if is_sequence else onnx.TensorProto()
    try:
        proto.ParseFromString(data)
        if isinstance(proto, onnx.SequenceProto):
            if proto.elem_type not in (0, onnx.SequenceProto.TENSOR):
                raise ValueError("only sequences of tensors are supported")
            return list(numpy_helper.to_list(proto))
        return numpy_helper.to_array(proto)
    except (DecodeError, RuntimeError, ValueError, TypeError) as error:
        kind = "SequenceProto" if is_sequence else "TensorProto"
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "parse failed"
        raise ModelInputError(f"{file}: not a {kind} ({reason})") from None


def _load_npz(path: Path, specs: list[InputSpec]) -> Feeds:
    if not zipfile.is_zipfile(path):
        try:
            with path.open("rb") as file:
                head = file.read(6)
        except OSError as error:
            raise ModelInputError(f"{path}: cannot be read ({error.strerror})") from None
        what = "a single .npy array" if head == b"\x93NUMPY" else "not a zip archive"
        raise ModelInputError(f"{path}: not an .npz file ({what}); save inputs with numpy.savez")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        with loaded as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "unreadable"
        raise ModelInputError(f"{path}: not an .npz file ({reason})") from None
    feeds: dict[str, RuntimeValue] = {}
    sequence_names = {spec.name for spec in specs if spec.is_sequence}
    elements: dict[str, dict[int, np.ndarray]] = {}
    for key, array in arrays.items():
        base, _, index = key.rpartition("/")
        if base in sequence_names and index.isdigit():
            elements.setdefault(base, {})[int(index)] = array
        elif key in sequence_names:
            if array.ndim == 0:
                raise ModelInputError(f"{path}: '{key}' must have a first axis to split")
            feeds[key] = list(array)
        else:
            feeds[key] = array
    for name, items in elements.items():
        if name in feeds:
            raise ModelInputError(f"{path}: input '{name}' is given twice")
        if sorted(items) != list(range(len(items))):
            raise ModelInputError(f"{path}: elements of '{name}' must be numbered 0, 1, 2, ...")
        feeds[name] = [items[index] for index in range(len(items))]
    return check_feeds(feeds, specs, str(path))
