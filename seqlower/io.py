"""Load and save models: the only place where protobuf meets the in-memory IR.

`load_model` accepts what users hold (a path, an `onnx.ModelProto`, an `onnx_ir.Model`) and turns
every reading problem into a one-line `ModelInputError`, including IR versions and default-domain
opsets newer than the installed onnx knows. A file is untrusted: before anything reads a tensor,
every external data location the model holds (initializers, attributes, subgraphs, functions) is
checked against the model's own folder, and the model as read is checked (`input_check`: an
invalid one is an `InvalidModelError`). `save_model` and `write_text` write atomically: a
temporary file beside the target, then a rename, so an interrupted run never leaves half a file
behind and a planted symlink is replaced, never written through; a model and its weights file
are replaced as a pair (`_save_pair`). The file gets the permissions a plain `open()` would give
it (the umask applies), and an overwritten file keeps its own. docs/security.md has the threat
model.
"""

from __future__ import annotations

__all__ = [
    "EXTERNAL_THRESHOLD_BYTES",
    "ModelSource",
    "has_external_data",
    "load_model",
    "files_read",
    "load_model_and_files",
    "model_to_bytes",
    "same_file",
    "save_model",
    "write_atomically",
    "write_proto",
    "write_text",
]

import contextlib
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import onnx
import onnx_ir as ir
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError, Message

from seqlower.errors import ModelInputError
from seqlower.input_check import check_input_proto, check_input_text
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.proto_fields import set_field

ModelSource = ir.Model | onnx.ModelProto | str | os.PathLike

EXTERNAL_THRESHOLD_BYTES = 1024  # tensors this large or larger go to the external data file


def load_model(source: ModelSource, *, split_keepdims: str = "onnxruntime") -> ir.Model:
    """Return `source` as an `onnx_ir.Model`. An `ir.Model` is returned as is (not copied); an
    `onnx.ModelProto` is left as it is, whatever is done to the model returned.
    `split_keepdims` is the reading of SplitToSequence's keepdims corner the input is checked
    with (`Options.split_keepdims`)."""
    if isinstance(source, ir.Model):
        return source
    if isinstance(source, onnx.ModelProto):  # read from a copy: onnx_ir shares the tensors,
        copy = onnx.ModelProto()  # and renaming a value renames its tensor in the proto
        copy.CopyFrom(source)
        return _deserialize(copy, "<ModelProto>", split_keepdims=split_keepdims)
    if isinstance(source, (str, os.PathLike)):
        return _load_path(Path(source), split_keepdims)
    raise ModelInputError(
        f"cannot read a model from a {type(source).__name__}: "
        "give a path, an onnx.ModelProto or an onnx_ir.Model"
    )


def load_model_and_files(
    source: str | os.PathLike, *, split_keepdims: str = "onnxruntime"
) -> tuple[ir.Model, list[Path]]:
    """`load_model` for a path, with every file the model reads: the model file itself and
    each external data file, resolved (outputs must never be one of them)."""
    path = Path(source)
    proto, files = _read_path(path)
    model = _deserialize(
        proto,
        str(path),
        base_dir=path.parent,
        path=path,
        files=files,
        split_keepdims=split_keepdims,
    )
    return model, files


def files_read(source: str | os.PathLike) -> list[Path]:
    """Every file the model at `source` reads, resolved: the model file and each external data
    file (its locations checked as `load_model` checks them). Raises `ModelInputError` when the
    file cannot be read as a model."""
    return _read_path(Path(source))[1]


def _load_path(path: Path, split_keepdims: str) -> ir.Model:
    return load_model_and_files(path, split_keepdims=split_keepdims)[0]


def _read_path(path: Path) -> tuple[onnx.ModelProto, list[Path]]:
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
    return proto, [path.resolve(), *_check_external_locations(proto, path.parent)]


def _deserialize(
    proto: onnx.ModelProto,
    where: str,
    base_dir: Path | None = None,
    path: Path | None = None,
    files: list[Path] | None = None,
    split_keepdims: str = "onnxruntime",
) -> ir.Model:
    """`files`: what `_read_path` found the model reads (the model file first, then one per
    external data file), which says whether a tensor is external without another walk."""
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelInputError(f"{where}: not an ONNX model (no graph or no IR version)")
    _check_known_versions(proto, where)
    if base_dir is None:
        _refuse_external_without_folder(proto, where)
    # an external tensor needs the model's folder: the checker's, and onnx_ir's to read it
    if files is not None:  # every external tensor's file is in it (or reading it failed)
        external = base_dir is not None and len(files) > 1
    else:
        external = base_dir is not None and any(map(_is_external, _all_tensor_protos(proto)))
    # negative dims are made unknown first, in place (the check's walk of the graphs does it)
    check_input_proto(proto, where, path, external=external, split_keepdims=split_keepdims)
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as error:  # onnx_ir raises many kinds; all mean "malformed"
        text = " ".join(str(error).split())
        raise ModelInputError(
            f"{where}: malformed ONNX model ({text or type(error).__name__})"
        ) from None
    check_input_text(model, where)
    if external and base_dir is not None:
        _set_external_data_base_dir(model, base_dir, where)
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


def _all_tensor_protos(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a model holds: initializers, sparse initializers, tensors in attributes of
    any node (Constant values and others), in every graph, subgraph and model-local function,
    and in the training information."""
    graphs = [proto.graph]
    for info in proto.training_info:
        graphs.extend([info.initialization, info.algorithm])
    nodes: list[onnx.NodeProto] = [node for function in proto.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            yield from graph.initializer
            for sparse in graph.sparse_initializer:
                yield from (sparse.values, sparse.indices)
            nodes.extend(graph.node)
            continue
        for attribute in nodes.pop().attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            sparse_tensors = list(attribute.sparse_tensors)
            if attribute.HasField("sparse_tensor"):
                sparse_tensors.append(attribute.sparse_tensor)
            for sparse in sparse_tensors:
                yield from (sparse.values, sparse.indices)
            if attribute.HasField("g"):
                graphs.append(attribute.g)
            graphs.extend(attribute.graphs)


def _is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data) > 0


def _check_external_locations(proto: onnx.ModelProto, base_dir: Path) -> list[Path]:
    """Check every external tensor of the model against its folder, before anything reads
    one: a location must be a relative path that stays in the folder once resolved (no `..`,
    no absolute path, no symlink leading out, as onnx's path-traversal advisories recommend),
    naming a regular file long enough for the tensor. Returns the files, resolved."""
    root = base_dir.resolve()
    files: list[Path] = []
    for tensor in _all_tensor_protos(proto):
        if not _is_external(tensor):
            continue
        keys = [entry.key for entry in tensor.external_data]
        if len(set(keys)) != len(keys):  # readers differ on which one counts: refuse both
            raise ModelInputError(
                f"{base_dir}: external data of '{tensor.name}' names a key twice; refused"
            )
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        shown = base_dir / location.replace("\0", "\\0")
        absolute = re.match(r"^([A-Za-z]:|[\\/])", location) is not None
        if (
            not location
            or "\0" in location
            or absolute
            or Path(location).is_absolute()
            or not (root / location).resolve().is_relative_to(root)
        ):
            raise ModelInputError(
                f"{shown}: external data of '{tensor.name}' points outside the model's "
                "folder; refused"
            )
        resolved = (root / location).resolve()
        end = _int(entries.get("offset")) + _int(entries.get("length"))
        _check_external_file(resolved, tensor.name, end, shown)
        if resolved not in files:
            files.append(resolved)
    return files


def _int(text: str | None) -> int:
    try:
        return max(int(text or 0), 0)
    except ValueError:
        return 0


def _refuse_external_without_folder(proto: onnx.ModelProto, where: str) -> None:
    """A ModelProto has no folder: its external data would be looked up wherever the process
    runs. Refuse it; a path gives the folder."""
    for tensor in _all_tensor_protos(proto):
        if _is_external(tensor):
            raise ModelInputError(
                f"{where}: tensor '{tensor.name}' keeps its data in an external file, which "
                "cannot be found from a ModelProto; give the model's path instead"
            )


def _set_external_data_base_dir(model: ir.Model, base_dir: Path, where: str) -> None:
    """Point every external tensor at the model's folder (its locations were checked on the
    protobuf by `_check_external_locations`; checked again here as onnx_ir read them, before
    any is read). Initializers under `EXTERNAL_THRESHOLD_BYTES`, and every tensor held by an
    attribute, are then read at once: they are held in memory, as they would have been
    written, and a rule that folds them reads nothing later."""
    root = base_dir.resolve()
    for tensor in _external_tensors(model):
        location = Path(tensor.location)
        if location.is_absolute() or not (root / location).resolve().is_relative_to(root):
            raise ModelInputError(
                f"{where}: external data of '{tensor.name}' points outside the model's "
                "folder; refused"
            )
        tensor.base_dir = base_dir
    for graph in iter_all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor) and tensor.nbytes < EXTERNAL_THRESHOLD_BYTES:
                value.const_value = ir.Tensor(tensor.numpy(), name=tensor.name)
        for node in graph_nodes(graph):
            for name, attribute in list(node.attributes.items()):
                if attribute.type == ir.AttributeType.TENSOR and isinstance(
                    attribute.value, ir.ExternalTensor
                ):
                    tensor = _in_memory(attribute.value)
                    node.attributes[name] = ir.AttrTensor(name, tensor)
                elif attribute.type == ir.AttributeType.TENSORS and any(
                    isinstance(t, ir.ExternalTensor) for t in attribute.value
                ):
                    tensors = [_in_memory(t) for t in attribute.value]
                    node.attributes[name] = ir.AttrTensors(name, tensors)


def _in_memory(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
    if not isinstance(tensor, ir.ExternalTensor):
        return tensor
    return ir.Tensor(tensor.numpy(), name=tensor.name)


def _external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    for graph in iter_all_graphs(model):
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                yield value.const_value
        for node in graph_nodes(graph):
            for attribute in node.attributes.values():
                if attribute.type == ir.AttributeType.TENSOR:
                    values = [attribute.value]
                elif attribute.type == ir.AttributeType.TENSORS:
                    values = list(attribute.value)
                else:
                    continue
                yield from (v for v in values if isinstance(v, ir.ExternalTensor))


def _check_external_file(resolved: Path, name: str, end: int, shown: Path) -> None:
    """Refuse, before any work, a model whose external data file is missing or too short."""
    if not resolved.is_file():
        raise ModelInputError(f"external data file {shown} not found")
    size = resolved.stat().st_size
    if end and size < end:
        raise ModelInputError(
            f"external data file {shown} is too short ({size} bytes; '{name}' needs bytes "
            f"up to {end})"
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
    external_data: bool | str | None = None,
    protect: Collection[Path] = (),
    serialized: onnx.ModelProto | None = None,
) -> Path | None:
    """Write `model` to `path` atomically (temporary file in the same folder, then rename).

    With `external_data` true, or when the model's weights already live in external files,
    the weights of 1 kB or more go to a file beside `path` named after its content,
    `<path name>.<16 hex digits>.data` (see `_save_pair`: a reader of `path` never sees the
    new model with old weights or the reverse); when there is no such weight, no weights file
    is written. (A string for `external_data`, as earlier versions took, means true.) Returns
    the weights file written, if any. `protect` lists files that must not be replaced (the
    files the input reads). Raises `ModelInputError` when the folder does not exist or a
    protected file would be replaced, `OSError` when the file cannot be written.
    `serialized` is `model` as `ir.to_proto` gives it, when the caller has it already (the
    command line's output check): written as it is when the weights stay in the file.
    """
    target = Path(path)
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    _refuse_protected(target, protect)
    external = bool(external_data) or has_external_data(model)
    if not external or not _has_large_weights(model):  # an empty weights file would confuse
        proto = ir.to_proto(model) if serialized is None else serialized
        write_atomically(target, lambda temp: write_proto(proto, temp))
        return None
    return _save_pair(model, target, protect)


def write_proto(proto: onnx.ModelProto, path: Path) -> None:
    """Write `proto.SerializeToString(deterministic=True)` to `path`, byte for byte, without
    making that string: each initializer of the main graph is serialized on its own, and the
    rest of the graph and of the model around them. A whole-model string of a 240 MB detector
    is its weights copied twice more (protobuf's encoder grows its buffer, then the string is
    copied out of it) in one piece: a third of the save's CPU time, and as much memory again.

    Protobuf writes a message's fields in the order of their numbers, each a tag, a length and
    the field's own serialization: `ModelProto` holds the graph (7) after its fields numbered
    below 7, `GraphProto` its initializers (5) after the nodes (1) and the name (2)."""
    graph = proto.graph
    if not len(graph.initializer) or _unknown_fields(proto) or _unknown_fields(graph):
        path.write_bytes(proto.SerializeToString(deterministic=True))  # nothing to split out,
        return  # or fields of a newer onnx, which protobuf writes last and we cannot list
    model_head, model_tail = _split_fields(proto, _GRAPH_FIELD)
    graph_head, graph_tail = _split_fields(graph, _INITIALIZER_FIELD)
    tensors = [tensor.SerializeToString(deterministic=True) for tensor in graph.initializer]
    entries = [_length_prefixed(_INITIALIZER_TAG, tensor) for tensor in tensors]
    length = len(graph_head) + sum(len(e) + len(t) for e, t in zip(entries, tensors))
    length += len(graph_tail)
    prefix = model_head + _length_prefixed(_GRAPH_TAG, length)
    if len(prefix) + length + len(model_tail) > _PROTOBUF_LIMIT:
        path.write_bytes(proto.SerializeToString(deterministic=True))  # protobuf's own error
        return
    with open(path, "wb") as file:
        file.write(prefix + graph_head)
        for entry, tensor in zip(entries, tensors):
            file.write(entry)
            file.write(tensor)
        file.write(graph_tail + model_tail)


_GRAPH_FIELD, _INITIALIZER_FIELD = 7, 5  # ModelProto.graph, GraphProto.initializer
_GRAPH_TAG = bytes([_GRAPH_FIELD << 3 | 2])  # field number and wire type 2 (length-delimited)
_INITIALIZER_TAG = bytes([_INITIALIZER_FIELD << 3 | 2])
_PROTOBUF_LIMIT = 2**31 - 1  # the largest message protobuf writes or reads


def _unknown_fields(message: Message) -> bool:
    return len(unknown_fields.UnknownFieldSet(message)) > 0


def _split_fields(message: Message, number: int) -> tuple[bytes, bytes]:
    """The deterministic serializations of `message`'s fields numbered below `number` and of
    those above it (field `number` itself left out), as two messages of its type."""
    head, tail = type(message)(), type(message)()
    for field, value in message.ListFields():
        if field.number == number:
            continue
        set_field(head if field.number < number else tail, field, value)
    return head.SerializeToString(deterministic=True), tail.SerializeToString(deterministic=True)


def _length_prefixed(tag: bytes, content: bytes | int) -> bytes:
    """`tag`, then the length of `content` (or `content` itself, a length) as a varint."""
    length = content if isinstance(content, int) else len(content)
    varint = bytearray()
    while length > 0x7F:
        varint.append(length & 0x7F | 0x80)
        length >>= 7
    varint.append(length)
    return tag + bytes(varint)


def _save_pair(model: ir.Model, target: Path, protect: Collection[Path]) -> Path:
    """Write the model and its weights so that `target` always names a consistent pair.

    The weights are written under a temporary name, then renamed to a name made of their
    SHA-256 digest, which the new model references; the model is renamed into place last.
    At every instant `target` is either the old model (its old weights file untouched) or
    the new one (its weights already complete under their own name): never a mix, whatever
    fails or runs at the same time. Renames replace a planted symlink instead of writing
    through it. Then the old model's weights file is removed when seqlower named it
    (`<path name>.<digest>.data`), is not the new one and is not protected. The renames and
    the removal hold a lock on the folder, so that concurrent runs never remove the weights
    of the model another one just put in place. The same model always gives the same two
    files (the digest is of the bytes)."""
    folder = target.parent
    if not folder.is_dir():
        raise ModelInputError(f"{target}: output folder {folder} does not exist")
    made: list[Path] = []  # named before it exists: a SIGTERM right after still finds it
    weights: Path | None = None
    created = False
    try:
        model_temp = _create_temporary(target, made)
        data_temp = folder / f"{model_temp.name}.data"
        _keep_mode(target, model_temp)
        ir.save(
            model,
            model_temp,
            external_data=data_temp.name,
            size_threshold_bytes=EXTERNAL_THRESHOLD_BYTES,
        )
        os.chmod(data_temp, stat.S_IMODE(os.stat(model_temp).st_mode))
        digest = _digest(data_temp)
        weights = folder / f"{target.name}.{digest[:16]}.data"
        _relocate(model_temp, data_temp.name, weights.name)
        with _folder_lock(folder):  # another run writing here waits: its cleanup is ours
            old_weights = _weights_named_for(target)
            if _holds(weights, digest):  # the same weights again: the file stays as it is
                data_temp.unlink()
            else:
                _refuse_protected(weights, protect)
                created = not os.path.lexists(weights)
                os.replace(data_temp, weights)
            os.replace(model_temp, target)
            created = False  # referenced now
            protected = {path.resolve() for path in protect}
            for old in old_weights:
                if old != weights and old.resolve() not in protected:
                    old.unlink(missing_ok=True)
    except BaseException:
        for temp in made:
            temp.unlink(missing_ok=True)
            (folder / f"{temp.name}.data").unlink(missing_ok=True)
        if created and weights is not None:
            weights.unlink(missing_ok=True)  # nothing references it
        raise
    return weights


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `folder` (POSIX `flock` on the folder itself, so no
    lock file is left behind); where there is none, no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _holds(path: Path, digest: str) -> bool:
    """`path` is a regular file (not a symlink) whose bytes have this SHA-256 digest."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode) and _digest(path) == digest
    except OSError:
        return False


def _relocate(model_file: Path, old: str, new: str) -> None:
    """Rewrite the model at `model_file` (weights apart, so small) so that its tensors stored
    in `old` read from `new`."""
    proto = onnx.load(os.fspath(model_file), load_external_data=False)
    for tensor in _all_tensor_protos(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
    model_file.write_bytes(proto.SerializeToString(deterministic=True))


_OLD_MODEL_READ_LIMIT = 64 * 1000 * 1000  # a model whose weights are apart is smaller


def _weights_named_for(target: Path) -> list[Path]:
    """The weights files the model now at `target` reads that seqlower named for it."""
    try:
        info = os.lstat(target)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _OLD_MODEL_READ_LIMIT:
            return []
        proto = onnx.load(os.fspath(target), load_external_data=False)
    except Exception:  # no old model, or one we cannot read: nothing to clean up
        return []
    pattern = re.compile(re.escape(target.name) + r"\.[0-9a-f]{16}\.data")
    found = []
    for tensor in _all_tensor_protos(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and pattern.fullmatch(entry.value):
                path = target.parent / entry.value
                if path not in found:
                    found.append(path)
    return found


def _refuse_protected(path: Path, protect: Collection[Path]) -> None:
    if any(same_file(path, other) for other in protect):
        raise ModelInputError(f"{path}: is a file the input model reads; refused")


def same_file(a: Path, b: Path) -> bool:
    """`a` and `b` are the same file: the same inode when both exist (a hard link, a
    symlink), else the same resolved path."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


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
    made: list[Path] = []  # named before it exists: a SIGTERM right after still finds it
    try:
        temp = _create_temporary(target, made)
        _keep_mode(target, temp)
        write(temp)
        os.replace(temp, target)
    except BaseException:
        for temp in made:
            temp.unlink(missing_ok=True)
        raise


def _create_temporary(target: Path, made: list[Path]) -> Path:
    """An empty new file beside `target`, created with O_EXCL and mode 0o666 (the umask
    applies, as it does to `open()`); `tempfile.mkstemp` would make it 0o600. Its name is in
    `made` before the file exists (taken out again where the name was another's), so that a
    SIGTERM raised as an exception the instant after it is made (`seqlower.cli.command`) still
    leaves the caller a name to remove."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
        made.append(temp)
        try:
            os.close(os.open(temp, flags, 0o666))
        except FileExistsError:
            made.pop()  # another writer's file
            continue
        return temp


def _keep_mode(target: Path, temp: Path) -> None:
    """Give `temp` the permission bits of an existing regular `target` (not of a file a
    symlink at `target` points to: the rename replaces the link, never its target)."""
    try:
        info = os.lstat(target)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        os.chmod(temp, stat.S_IMODE(info.st_mode))
