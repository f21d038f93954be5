"""Run a model on given inputs, under onnxruntime or `onnx.reference`, and never raise.

A runner is built once per model and run once per trial. Any failure (the session cannot be
created, the run raises) becomes a `RunOutcome` with the error's first line, so that a model that
onnxruntime cannot run is reported, not crashed on. onnxruntime runs on the CPU with one thread
and its own log output silenced; only the inputs a model declares are passed to it.
"""

from __future__ import annotations

__all__ = ["OrtRunner", "ReferenceRunner", "RunOutcome", "first_line"]

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort

from seqlower.verification.values import Feeds, RuntimeValue

_MAX_MESSAGE = 300


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """The outputs of one run, keyed by output name in declaration order, or the error."""

    outputs: dict[str, RuntimeValue] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error message (shortened), or the error's type name."""
    for line in str(error).splitlines():
        if line.strip():
            text = line.strip()
            return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
    return type(error).__name__


class OrtRunner:
    """One onnxruntime CPU session. `model` is a path or serialized model bytes."""

    def __init__(self, model: str | bytes) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        self._session: ort.InferenceSession | None = None
        self.load_error: str | None = None
        try:
            self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises many kinds; all mean "cannot run it"
            self.load_error = f"cannot load the model: {first_line(error)}"

    def run(self, feeds: Feeds) -> RunOutcome:
        """Run on `feeds` (inputs the model does not declare are left out)."""
        if self._session is None:
            return RunOutcome(error=self.load_error)
        declared = {arg.name for arg in self._session.get_inputs()}
        names = [arg.name for arg in self._session.get_outputs()]
        try:
            results = self._session.run(None, {k: v for k, v in feeds.items() if k in declared})
        except Exception as error:  # every failure of a run is a result to report
            return RunOutcome(error=first_line(error))
        return RunOutcome(outputs=_as_outputs(names, results))


class ReferenceRunner:
    """`onnx.reference.ReferenceEvaluator` on one model (a proto or a path), as a second
    opinion."""

    def __init__(self, model: onnx.ModelProto | str) -> None:
        from onnx.reference import ReferenceEvaluator  # slow to import; only for --reference

        self._evaluator: ReferenceEvaluator | None = None
        self.load_error: str | None = None
        try:
            self._evaluator = ReferenceEvaluator(model)
        except Exception as error:  # the evaluator rejects some valid models
            self.load_error = f"cannot load the model: {first_line(error)}"

    def run(self, feeds: Feeds) -> RunOutcome:
        """Run on `feeds` (inputs the model does not declare are left out)."""
        if self._evaluator is None:
            return RunOutcome(error=self.load_error)
        declared = set(self._evaluator.input_names)
        names = list(self._evaluator.output_names)
        try:
            results = self._evaluator.run(None, {k: v for k, v in feeds.items() if k in declared})
        except Exception as error:  # the evaluator has bugs of its own; report them
            return RunOutcome(error=first_line(error))
        if isinstance(results, dict):
            results = [results[name] for name in names]
        return RunOutcome(outputs=_as_outputs(names, results))


def _as_outputs(names: Sequence[str], results: Sequence[object]) -> dict[str, RuntimeValue]:
    outputs: dict[str, RuntimeValue] = {}
    for name, result in zip(names, results, strict=False):
        if isinstance(result, (list, tuple)):
            outputs[name] = [np.asarray(element) for element in result]
        else:
            outputs[name] = np.asarray(result)
    return outputs
