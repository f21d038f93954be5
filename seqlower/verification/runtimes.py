"""Run an ONNX model in onnxruntime, OpenVINO or tract, through one small interface.

    outputs = run_in_runtime("openvino", "model.onnx", {"x": x})   # graph outputs, in order
    session = open_session("tract", model_bytes)                  # load once, run many times
    session.run({"x": x}); session.output_names

A model is a path, serialized bytes or an `onnx.ModelProto`; feeds map input names to numpy
arrays (inputs the model does not declare are ignored), or to lists of arrays for sequence inputs.
Outputs come back in the model's output order: a numpy array per tensor, a list of arrays per
sequence. Each runtime runs on the CPU, one thread where it lets us choose:

- onnxruntime: every ONNX type it supports, logging silenced.
- openvino (`pip install openvino`): compiled with INFERENCE_PRECISION_HINT f32, so
  that float results are not computed in reduced precision.
- tract (`pip install tract`): planned once from the model's declared input facts
  (symbolic dims stay symbolic); when tract cannot plan from those (an unnamed dim, say), the
  input facts are set from the feeds' shapes and dtypes and a plan is cached per set of shapes.

OpenVINO and tract have no string tensors and no sequence types: a model with either in its
interface raises `CannotRunError` ("cannot run in tract: input 's' is a sequence"). A runtime that
is not installed raises `RuntimeUnavailableError`, naming the package to install with the version
seqlower's extra of that name asks for (`pip install 'openvino>=2026.4'`: seqlower itself is
installed from a clone, where `pip install 'seqlower[openvino]'` finds nothing to install). Any
other failure (the runtime rejects the model, a run raises) is the runtime's own exception.

This module imports only the standard library and numpy at import time (the verifier's child
processes load it without the rest of seqlower); each runtime is imported when first used.
"""

from __future__ import annotations

__all__ = [
    "RUNTIMES",
    "CannotRunError",
    "ModelData",
    "RuntimeSession",
    "RuntimeUnavailableError",
    "check_available",
    "error_message",
    "first_line",
    "install_hint",
    "open_session",
    "run_in_runtime",
]

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

RUNTIMES = ("onnxruntime", "openvino", "tract")
"""The runtimes a model can be run in."""

ModelData = str | os.PathLike[str] | bytes | Any
"""A model: a path, serialized bytes, or an `onnx.ModelProto`."""

_EXTRAS = {"onnxruntime": None, "openvino": "openvino", "tract": "tract"}
_TRACT_TYPES = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
}


_MAX_MESSAGE = 300
_MAX_FULL_MESSAGE = 4000


def error_message(error: BaseException) -> str:
    """The whole error message on one line (its non-empty lines joined by spaces), so that the
    part a runtime puts on a later line stays: `... for the following indices index: 0 Got: 2
    Expected: 10 ...`. A stack backtrace (tract appends one) is left out, and only a message
    longer than a few thousand characters is shortened."""
    lines = []
    for line in str(error).splitlines():
        if line.strip().lower().startswith("stack backtrace"):
            break
        if line.strip():
            lines.append(line.strip())
    text = " ".join(lines)
    if not text:
        return type(error).__name__
    return text if len(text) <= _MAX_FULL_MESSAGE else text[: _MAX_FULL_MESSAGE - 3] + "..."


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error message (shortened), or the error's type name."""
    for line in str(error).splitlines():
        if line.strip():
            text = line.strip()
            return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
    return type(error).__name__


class RuntimeUnavailableError(ImportError):
    """The runtime's Python package is not installed."""


class CannotRunError(Exception):
    """The runtime cannot run this model at all (its interface uses a type it lacks)."""


class RuntimeSession(Protocol):
    """A model loaded in one runtime, ready to run many times."""

    input_names: list[str]
    output_names: list[str]

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        """The graph outputs on `feeds`, in order."""
        ...


def check_available(runtime: str) -> None:
    """Raise `ValueError` for an unknown runtime, `RuntimeUnavailableError` for one that is not
    installed (the message names the extra to install)."""
    if runtime not in _EXTRAS:
        raise ValueError(f"unknown runtime '{runtime}': choose one of {', '.join(RUNTIMES)}")
    if not _installed(runtime):
        raise RuntimeUnavailableError(f"{runtime} is not installed: {install_hint(runtime)}")


def install_hint(runtime: str) -> str:
    """`pip install 'openvino>=2026.4'`: the requirement seqlower's extra for `runtime` names
    (read from the installed package's metadata; the bare package name where it has none)."""
    extra = _EXTRAS.get(runtime) or runtime
    requirement = runtime
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        for line in importlib.metadata.requires("seqlower") or []:
            spec, _, marker = line.partition(";")
            if marker.replace(" ", "").replace("'", '"') == f'extra=="{extra}"':
                requirement = spec.strip()
                break
    return f"pip install '{requirement}'"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def open_session(runtime: str, model: ModelData) -> RuntimeSession:
    """Load `model` in `runtime` (see the module docstring for what may be raised)."""
    check_available(runtime)
    opener: Callable[[ModelData], RuntimeSession] = {
        "onnxruntime": _OnnxruntimeSession,
        "openvino": _OpenvinoSession,
        "tract": _TractSession,
    }[runtime]
    return opener(model)


def run_in_runtime(runtime: str, model: ModelData, feeds: Mapping[str, Any]) -> list[Any]:
    """Load `model` in `runtime` and run it once on `feeds`: the graph outputs, in order."""
    return open_session(runtime, model).run(feeds)


class _OnnxruntimeSession:
    def __init__(self, model: ModelData) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        source = _path_or_bytes(model)
        self._session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self.input_names = [arg.name for arg in self._session.get_inputs()]
        self.output_names = [arg.name for arg in self._session.get_outputs()]

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        declared = set(self.input_names)
        results = self._session.run(None, {k: v for k, v in feeds.items() if k in declared})
        return [_as_value(result) for result in results]


class _OpenvinoSession:
    def __init__(self, model: ModelData) -> None:
        import openvino as ov

        with _model_file(model) as path:
            self.input_names, self.output_names = _tensor_interface(path, "openvino")
            core = ov.Core()
            try:
                # its default threads: compiled for one thread, OpenVINO 2026.4.1 returns the
                # outputs of the run before where an inference fails, instead of raising
                self._compiled = core.compile_model(
                    core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
                )
            except Exception as error:
                raise RuntimeError(_openvino_message(error)) from None
        self._request = self._compiled.create_infer_request()
        # OpenVINO drops inputs the graph does not use: feed only the ports it kept
        self._ports = {name for port in self._compiled.inputs for name in port.get_names()}

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        try:
            results = self._request.infer({k: v for k, v in feeds.items() if k in self._ports})
        except Exception as error:
            raise RuntimeError(_openvino_message(error)) from None
        by_name = {
            name: np.array(results[port], copy=True)
            for port in self._compiled.outputs
            for name in port.get_names()
        }
        return [by_name[name] for name in self.output_names]


_OPENVINO_NOISE = (
    "Exception from ",
    "Check '",
    "While validating",
    "Summary:",
    "Model wasn't fully converted",
)


_OPENVINO_NODE = re.compile(r"While validating ONNX node '(<Node\(\w+\): [^>]*>)'")


def _openvino_message(error: BaseException) -> str:
    """OpenVINO's message without its source locations and check expressions, on one line:
    `Port for tensor name Y was not found.`, `FrontEnd API failed with OpConversionFailure: ...
    SplitToSequence: scalar 'split' input requires static dimension on the split axis ...`."""
    lines = [line.strip().lstrip("- ").strip() for line in str(error).splitlines()]
    kept = []
    for line in lines:
        node = _OPENVINO_NODE.match(line)  # the node it names, e.g. <Node(Loop): y>
        if node is not None:
            kept.append(f"at {node.group(1)}:")
        elif line and not line.startswith(_OPENVINO_NOISE):
            kept.append(line)
    return " ".join(kept) or first_line(error)


class _TractSession:
    def __init__(self, model: ModelData) -> None:
        import tract

        self._tract = tract
        self._directory = tempfile.TemporaryDirectory(prefix="seqlower-tract-")
        source = model
        if not isinstance(model, (str, os.PathLike)):
            source = Path(self._directory.name) / "model.onnx"
            source.write_bytes(_serialized(model))
        self._path = str(source)
        self.input_names, self.output_names = _tensor_interface(Path(self._path), "tract")
        self._plans: dict[tuple[Any, ...], Any] = {}
        # the model's own input facts (symbolic dims stay symbolic): one plan for every shape
        inference = self._tract.onnx().load(self._path)
        try:
            self._general: Any = inference.into_model().into_runnable()
        except Exception:  # e.g. an unnamed dim: plan per set of input shapes instead
            self._general = None

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        arrays = [np.asarray(feeds[name]) for name in self.input_names]
        key = tuple((array.shape, array.dtype.str) for array in arrays)
        plan = self._general or self._plans.get(key)
        if plan is None:
            inference = self._tract.onnx().load(self._path)
            for index, array in enumerate(arrays):
                inference.set_input_fact(index, _tract_fact(array))
            plan = self._plans[key] = inference.into_model().into_runnable()
        return [np.array(result.to_numpy(), copy=True) for result in plan.run(arrays)]


def _tract_fact(array: np.ndarray) -> str:
    kind = _TRACT_TYPES.get(array.dtype.name)
    if kind is None:
        raise CannotRunError(f"cannot run in tract: it has no {array.dtype.name} tensors")
    return ",".join([*(str(size) for size in array.shape), kind])


def _tensor_interface(path: Path, runtime: str) -> tuple[list[str], list[str]]:
    """Input and output names; `CannotRunError` for a string or non-tensor one."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initialized = {tensor.name for tensor in graph.initializer}
    inputs = [value for value in graph.input if value.name not in initialized]
    for role, values in (("input", inputs), ("output", graph.output)):
        for value in values:
            kind = value.type.WhichOneof("value")
            if kind == "sequence_type":
                problem = "is a sequence"
            elif kind != "tensor_type":
                problem = f"has type {kind or 'unknown'}"
            elif value.type.tensor_type.elem_type == onnx.TensorProto.STRING:
                problem = "is a string tensor"
            else:
                continue
            raise CannotRunError(
                f"cannot run in {runtime}: {role} '{value.name}' {problem}; "
                f"{runtime} takes and gives numeric tensors only"
            )
    return [value.name for value in inputs], [value.name for value in graph.output]


@contextlib.contextmanager
def _model_file(model: ModelData) -> Iterator[Path]:
    """A path to `model` on disk: the path itself, or a temporary file for bytes or a proto."""
    if isinstance(model, (str, os.PathLike)):
        yield Path(model)
        return
    with tempfile.TemporaryDirectory(prefix="seqlower-model-") as directory:
        path = Path(directory) / "model.onnx"
        path.write_bytes(_serialized(model))
        yield path


def _serialized(model: ModelData) -> bytes:
    if isinstance(model, bytes):
        return model
    return bytes(model.SerializeToString())


def _path_or_bytes(model: ModelData) -> str | bytes:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    return _serialized(model)


def _as_value(result: object) -> Any:
    if isinstance(result, (list, tuple)):
        return [np.asarray(element) for element in result]
    return np.asarray(result)
