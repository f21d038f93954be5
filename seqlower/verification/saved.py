"""Write the inputs of a failing trial so that it can be run again, attached to a bug report or
turned into a regression test.

    save_failing_trial(report, "failing")   # -> the files written

writes, for the first trial that showed a difference:

    failing/input_0.pb, input_1.pb, ...    each input as a named TensorProto (SequenceProto for
                                           a sequence), in the original's input order
    failing/output_0.pb, ...               what the original returned (the expected outputs)
    failing/inputs.npz                     the same inputs keyed by name (a sequence's elements
                                           as name/0, name/1, ...)

The folder is ONNX's test-data layout: `seqlower verify A B --inputs failing` (or
`--inputs failing/inputs.npz`) runs that trial again, and onnx's own test runners read it.
"""

from __future__ import annotations

__all__ = ["SAVED_FILE_NAMES", "Reproduction", "save_failing_trial"]

import dataclasses
import os
import re
from io import BytesIO
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from seqlower.errors import SeqlowerError
from seqlower.io import write_atomically
from seqlower.verification.signature import InputSpec
from seqlower.verification.values import Feeds, RuntimeValue

# the names `save_failing_trial` writes in its folder
SAVED_FILE_NAMES = re.compile(r"(?:input|output)_\d+\.pb|inputs\.npz")


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """A failing trial: its number, its inputs (in the original's input order), what the
    original returned (None when it returned nothing) and the original's input specs."""

    trial: int
    inputs: Feeds
    outputs: dict[str, RuntimeValue] | None
    specs: tuple[InputSpec, ...]


def save_failing_trial(reproduction: Reproduction, folder: str | os.PathLike[str]) -> list[Path]:
    """Write `reproduction` into `folder` (created if missing); the paths written. Raises
    `SeqlowerError` when the folder cannot be written."""
    target = Path(folder)
    try:
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for position, spec in enumerate(reproduction.specs):
            path = target / f"input_{position}.pb"
            value = reproduction.inputs[spec.name]
            _write(path, _proto(spec.name, value, spec).SerializeToString())
            written.append(path)
        for position, (name, value) in enumerate((reproduction.outputs or {}).items()):
            path = target / f"output_{position}.pb"
            _write(path, _proto(name, value, None).SerializeToString())
            written.append(path)
        arrays: dict[str, np.ndarray] = {}
        for spec in reproduction.specs:
            value = reproduction.inputs[spec.name]
            if isinstance(value, list):
                if not value:
                    arrays[spec.name] = _empty_sequence(spec)
                for index, element in enumerate(value):
                    arrays[f"{spec.name}/{index}"] = _plain(element)
            else:
                arrays[spec.name] = _plain(value)
        npz = target / "inputs.npz"
        buffer = BytesIO()
        np.savez(buffer, **arrays)
        _write(npz, buffer.getvalue())
        written.append(npz)
    except OSError as error:
        raise SeqlowerError(
            f"{target}: cannot write the failing trial's inputs ({error.strerror})"
        ) from None
    return written


def _proto(
    name: str, value: RuntimeValue, spec: InputSpec | None
) -> onnx.TensorProto | onnx.SequenceProto:
    if isinstance(value, list):
        dtype = None
        if not value and spec is not None:
            dtype = np.dtype(object) if spec.dtype.name == "STRING" else spec.dtype.numpy()
        return numpy_helper.from_list([np.asarray(v) for v in value], name=name, dtype=dtype)
    return numpy_helper.from_array(np.asarray(value), name=name)


def _plain(array: np.ndarray) -> np.ndarray:
    """Strings as numpy unicode (an .npz holds no Python objects)."""
    array = np.asarray(array)
    return array.astype(str) if array.dtype.kind == "O" else array


def _empty_sequence(spec: InputSpec) -> np.ndarray:
    """An empty sequence as one array with a first axis of 0 (static dims kept, others 0)."""
    dims = [dim if isinstance(dim, int) else 0 for dim in spec.shape or ()]
    dtype = str if spec.dtype.name == "STRING" else spec.dtype.numpy()
    return np.zeros((0, *dims), dtype=dtype)


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: a planted link is replaced, never written through."""
    write_atomically(path, lambda temp: temp.write_bytes(data))
