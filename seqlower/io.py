"""Load and save models: the only place where protobuf meets the in-memory IR.

`load_model` accepts what users hold (a path, an `onnx.ModelProto`, an `onnx_ir.Model`) and turns
every reading problem into a one-line `ModelInputError`, including IR versions and default-domain
opsets newer than the installed onnx knows. `save_model` and `write_text` write atomically: a
temporary file beside the target, then a rename, so an interrupted run never leaves half a file
behind. The file gets the permissions a plain `open()` would give it (the umask applies), and an
overwritten file keeps its own.
"""

from __future__ import annotations

__all__ = [
    "EXTERNAL_THRESHOLD_BYTES",
    "ModelSource",
    "has_external_data",
    "load_model",
    "model_to_bytes",
    "save_model",
    "write_atomically",
    "write_text",
]

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from seqlower.errors import ModelInputError
from seqlower.ops import iter_all_graphs

ModelSource = ir.Model | onnx.ModelProto | str | os.PathLike

EXTERNAL_THRESHOLD_BYTES = 1024  # tensors this large or larger go to the external data file


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
    # external tensors name their file under the key "location": without those bytes there is
    # none, and the walk over every graph for them (0.1 s at 100k nodes) is skipped
    base_dir = path.parent if b"location" in data else None
    return _deserialize(proto, str(path), base_dir=base_dir)


def _deserialize(proto: onnx.ModelProto, where: str, base_dir: Path | None = None) -> ir.Model:
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelInputError(f"{where}: not an ONNX model (no graph or no IR version)")
    _check_known_versions(proto, where)
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as error:  # onnx_ir raises many kinds; all mean "malformed"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
        raise ModelInputError(f"{where}: malformed ONNX model ({first_line})") from None
    if base_dir is not None:
        _set_external_data_base_dir(model, base_dir)
    return model


def _check_known_versions(proto: onnx.ModelProto, where: str) -> None:
    """Refuse what the installed onnx cannot check: an IR version or a default-domain opset
    newer than it knows (its checker and shape inference would read such a model wrongly)."""
    if proto.ir_version > onnx.IR_VERSION:
        raise ModelInputError(
            f"{where}: ir_version {proto.ir_version} is newer than onnx {onnx.__version__} "
            f"knows (up to {onnx.IR_VERSION})"
        )
    newest = onnx.defs.onnx_opset_version()
    for opset in proto.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version > newest:
            raise ModelInputError(
                f"{where}: default-domain opset {opset.version} is newer than onnx "
                f"{onnx.__version__} knows (up to {newest})"
            )


def _set_external_data_base_dir(model: ir.Model, base_dir: Path) -> None:
    """Point external tensors at the model's folder, refusing locations that lead out of it
    (`../`, absolute paths, symlinks), as onnx's path-traversal advisories recommend, and
    files that are missing or too short. Tensors under `EXTERNAL_THRESHOLD_BYTES` are read
    at once: they are saved inline, as they would have been written."""
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
        _check_external_file(resolved, tensor, base_dir / location)
        tensor.base_dir = base_dir
        if tensor.nbytes < EXTERNAL_THRESHOLD_BYTES:  # small: held like any other weight
            value.const_value = ir.Tensor(tensor.numpy(), name=tensor.name)


def _check_external_file(resolved: Path, tensor: ir.ExternalTensor, shown: Path) -> None:
    """Refuse, before any work, a model whose external data file is missing or too short."""
    if not resolved.is_file():
        raise ModelInputError(f"external data file {shown} not found")
    end = (tensor.offset or 0) + (tensor.length or 0)
    if end and resolved.stat().st_size < end:
        raise ModelInputError(
            f"external data file {shown} is too short ({resolved.stat().st_size} bytes; "
            f"'{tensor.name}' needs bytes up to {end})"
        )


def _all_initializers(model: ir.Model) -> list[ir.Value]:
    return [value for graph in iter_all_graphs(model) for value in graph.initializers.values()]


def has_external_data(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor) for v in _all_initializers(model))


def model_to_bytes(model: ir.Model | onnx.ModelProto) -> bytes:
    """Serialize deterministically: the same model always gives the same bytes."""
    proto = model if isinstance(model, onnx.ModelProto) else ir.to_proto(model)
    return proto.SerializeToString(deterministic=True)


def save_model(
    model: ir.Model | onnx.ModelProto,
    path: str | os.PathLike,
    *,
    external_data: str | None = None,
) -> Path | None:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename).

    With `external_data` (a file name beside `path`), or when the model's weights already live
    in external files, the weights of 1 kB or more are written to that file, one tensor at a
    time, instead of into the model file (the default name is `<path name>.data`); when there
    is no such weight, no weights file is written. Returns the weights file written, if any.
    Raises `ModelInputError` when the folder does not exist, `OSError` when the file cannot be
    written.
    """
    target = Path(path)
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    if external_data is None and has_external_data(model):
        external_data = f"{target.name}.data"
    if external_data is not None and not _has_large_weights(model):
        external_data = None  # an empty weights file would only confuse
    if external_data is None:
        data = model_to_bytes(model)
        write_atomically(target, lambda temp: temp.write_bytes(data))
        return None
    weights = external_data
    write_atomically(
        target,
        lambda temp: ir.save(
            model, temp, external_data=weights, size_threshold_bytes=EXTERNAL_THRESHOLD_BYTES
        ),
    )
    return target.parent / weights


def _has_large_weights(model: ir.Model) -> bool:
    for value in _all_initializers(model):
        tensor = value.const_value
        if tensor is not None and tensor.nbytes >= EXTERNAL_THRESHOLD_BYTES:
            return True
    return False


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically; see `write_atomically`."""
    data = text.encode("utf-8")
    write_atomically(Path(path), lambda temp: temp.write_bytes(data))


def write_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """Call `write(temp)` on a fresh temporary file beside `target`, then rename it to `target`.

    The temporary file is created as a plain `open()` would create `target` (mode 0o666 less
    the umask); when `target` already exists its permission bits are kept. On any failure the
    temporary file is removed and `target` is left as it was.
    """
    if not target.parent.is_dir():
        raise ModelInputError(f"{target}: output folder {target.parent} does not exist")
    temp = _create_temporary(target)
    try:
        _keep_mode(target, temp)
        write(temp)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _create_temporary(target: Path) -> Path:
    """An empty new file beside `target`, created with O_EXCL and mode 0o666 (the umask
    applies, as it does to `open()`); `tempfile.mkstemp` would make it 0o600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            os.close(os.open(temp, flags, 0o666))
        except FileExistsError:
            continue
        return temp


def _keep_mode(target: Path, temp: Path) -> None:
    """Give `temp` the permission bits of an existing regular `target`."""
    try:
        info = os.stat(target)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        os.chmod(temp, stat.S_IMODE(info.st_mode))
