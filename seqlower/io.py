"""Load and save models: the only place where protobuf meets the in-memory IR.

`load_model` accepts what users hold (a path, an `onnx.ModelProto`, an `onnx_ir.Model`) and turns
every reading problem into a one-line `ModelInputError`. `save_model` writes atomically: a temporary
file beside the target, then a rename, so an interrupted run never leaves half a model behind.
"""

from __future__ import annotations

__all__ = [
    "ModelSource",
    "has_external_data",
    "load_model",
    "model_to_bytes",
    "save_model",
]

import os
import tempfile
from pathlib import Path

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from seqlower.errors import ModelInputError
from seqlower.ops import iter_all_graphs

ModelSource = ir.Model | onnx.ModelProto | str | os.PathLike


def load_model(source: ModelSource) -> ir.Model:
    """Return `source` as an `onnx_ir.Model`. An `ir.Model` is returned as is (not copied)."""
    if isinstance(source, ir.Model):
        return source
    if isinstance(source, onnx.ModelProto):
        return _deserialize(source, "<ModelProto>")
    if isinstance(source, (str, os.PathLike)):
        return _load_path(Path(source))
    raise ModelInputError(
        f"cannot read a model from a {type(source).__name__}: "
        "give a path, an onnx.ModelProto or an onnx_ir.Model"
    )


def _load_path(path: Path) -> ir.Model:
    if not path.exists():
        raise ModelInputError(f"{path}: no such file")
    if path.is_dir():
        raise ModelInputError(f"{path}: is a directory, not a model file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ModelInputError(f"{path}: cannot be read ({error.strerror})") from None
    if not data:
        raise ModelInputError(f"{path}: empty file")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise ModelInputError(f"{path}: not an ONNX model (protobuf parse failed)") from None
    return _deserialize(proto, str(path), base_dir=path.parent)


def _deserialize(proto: onnx.ModelProto, where: str, base_dir: Path | None = None) -> ir.Model:
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelInputError(f"{where}: not an ONNX model (no graph or no IR version)")
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as error:  # onnx_ir raises many kinds; all mean "malformed"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
        raise ModelInputError(f"{where}: malformed ONNX model ({first_line})") from None
    if base_dir is not None:
        _set_external_data_base_dir(model, base_dir)
    return model


def _set_external_data_base_dir(model: ir.Model, base_dir: Path) -> None:
    """Point external tensors at the model's folder, refusing locations that lead out of it
    (`../`, absolute paths, symlinks), as onnx's path-traversal advisories recommend."""
    root = base_dir.resolve()
    for value in _all_initializers(model):
        tensor = value.const_value
        if not isinstance(tensor, ir.ExternalTensor):
            continue
        location = Path(tensor.location)
        resolved = (root / location).resolve()
        if location.is_absolute() or not resolved.is_relative_to(root):
            raise ModelInputError(
                f"{base_dir / location}: external data of '{value.name}' points outside the "
                "model's folder; refused"
            )
        tensor.base_dir = base_dir


def _all_initializers(model: ir.Model) -> list[ir.Value]:
    return [value for graph in iter_all_graphs(model) for value in graph.initializers.values()]


def has_external_data(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor) for v in _all_initializers(model))


def model_to_bytes(model: ir.Model) -> bytes:
    """Serialize deterministically: the same model always gives the same bytes."""
    return ir.to_proto(model).SerializeToString(deterministic=True)


def save_model(
    model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None
) -> None:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename).

    With `external_data` (a file name beside `path`), or when the model's weights already live
    in external files, the weights are written to that file, one tensor at a time, instead of
    into the model file (the default name is `<path name>.data`).
    """
    target = Path(path)
    if not target.parent.exists():
        raise ModelInputError(f"{target}: output folder {target.parent} does not exist")
    if external_data is None and has_external_data(model):
        external_data = f"{target.name}.data"
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if external_data is None:
            with os.fdopen(fd, "wb") as handle:
                handle.write(model_to_bytes(model))
        else:
            os.close(fd)
            ir.save(model, temp_name, external_data=external_data, size_threshold_bytes=1024)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
