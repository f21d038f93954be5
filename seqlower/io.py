"""Load and save models: the only place where protobuf meets the in-memory IR.

`load_model` accepts what users hold (a path, an `onnx.ModelProto`, an `onnx_ir.Model`) and turns
every reading problem into a one-line `ModelInputError`. `save_model` writes atomically: a temporary
file beside the target, then a rename, so an interrupted run never leaves half a model behind.
"""

from __future__ import annotations

__all__ = ["ModelSource", "load_model", "model_to_bytes", "save_model"]

import os
import tempfile
from pathlib import Path
from typing import Union

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from seqlower.errors import ModelInputError

ModelSource = Union[ir.Model, onnx.ModelProto, str, os.PathLike]


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
    for graph in (model.graph, *(f.graph for f in model.functions.values())):
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                tensor.base_dir = base_dir


def model_to_bytes(model: ir.Model) -> bytes:
    """Serialize deterministically: the same model always gives the same bytes."""
    return ir.to_proto(model).SerializeToString(deterministic=True)


def save_model(model: ir.Model, path: str | os.PathLike) -> None:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename)."""
    target = Path(path)
    if not target.parent.exists():
        raise ModelInputError(f"{target}: output folder {target.parent} does not exist")
    data = model_to_bytes(model)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
