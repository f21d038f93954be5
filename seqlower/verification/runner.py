"""Run a model on given inputs, in a child process (any runtime) or under `onnx.reference`, and
never raise.

`IsolatedRunner` keeps one child process (`worker.py`) per model and runtime for a whole verify
call: the model is loaded once, then run once per trial. A runtime that kills its process (a
segmentation fault while creating a session, say) cannot take the verifier with it: the outcome
says "crashed onnxruntime: signal 11 (SIGSEGV) while loading the model", and a later trial starts
a fresh child (unless loading was what crashed). A run that takes longer than `timeout` seconds
is killed and reported the same way. Requests are sent before replies are awaited, so that the
original and the candidate run side by side.

Any other failure (the runtime rejects the model, a run raises) becomes a `RunOutcome` with the
whole error message, on one line.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIMEOUT",
    "IsolatedRunner",
    "ReferenceRunner",
    "RunOutcome",
    "first_line",
    "memory_limit_bytes",
]

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes import ModelData, error_message, first_line
from seqlower.verification.values import Feeds, RuntimeValue

DEFAULT_TIMEOUT = 120.0
"""Seconds one run (or loading a model) may take before its child process is killed."""

DEFAULT_MEMORY_LIMIT = 4096
"""Megabytes of address space a child process may take (`RLIMIT_AS`), plus three times the size
of the model it runs; None or 0: no limit."""

_WORKER = Path(__file__).with_name("worker.py")


def memory_limit_bytes(megabytes: int | None, model: ModelData) -> int:
    """The address-space limit of a child that runs `model` (0: none): `megabytes`, plus three
    times the model's size (its weights are read, copied and laid out by the runtime; weights in
    external files are not counted: raise the limit for those)."""
    if not megabytes:
        return 0
    size = 0
    if isinstance(model, bytes):
        size = len(model)
    elif isinstance(model, (str, os.PathLike)):
        with contextlib.suppress(OSError):
            size = Path(model).stat().st_size
    elif hasattr(model, "ByteSize"):
        size = int(model.ByteSize())
    return (int(megabytes) << 20) + 3 * size


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """The outputs of one run, keyed by output name in declaration order, or the error.
    `crashed`: the runtime's process died or was killed (the error says how); `timed_out`: it
    was killed because the run (or loading) took longer than its time limit. `cannot_run`: the
    runtime cannot run this model at all (a type it lacks)."""

    outputs: dict[str, RuntimeValue] | None = None
    error: str | None = None
    crashed: bool = False
    cannot_run: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class IsolatedRunner:
    """One model in one runtime, run in a child process. `submit` sends a run, `result` waits
    for its outcome; `run` does both. Close it (or use it as a context manager) to end the
    child."""

    def __init__(
        self,
        runtime: str,
        model: ModelData,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    ) -> None:
        self.runtime = runtime
        self._model = model
        self._timeout = timeout
        self._memory = memory_limit_bytes(memory_limit, model)
        self._process: subprocess.Popen[bytes] | None = None
        self._inbox: Connection | None = None
        self._outbox: Connection | None = None
        self._pending: list[str] = []  # "open" / "run", in the order replies will come
        # when each request still unanswered was sent, and the seconds it may take
        self._sent_at: list[tuple[float, float]] = []
        self._answered_at = 0.0  # when the child last replied: it works on one at a time
        self._names: list[str] | None = None
        self._load_failure: RunOutcome | None = None

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, feeds: Feeds, *, timeout: float | None = None) -> None:
        """Start running on `feeds` (inputs the model does not declare are left out); `timeout`
        replaces the runner's for this run."""
        if self._load_failure is not None:
            self._pending.append("known")
            return
        if self._process is None:
            try:
                self._start()
            except OSError as error:  # no child process can be started at all
                self._load_failure = RunOutcome(
                    error=f"cannot start a process for {self.runtime}: {first_line(error)}"
                )
                self._pending.append("known")
                return
        self._send(("run", feeds), timeout)
        self._pending.append("run")

    def result(self) -> RunOutcome:
        """The outcome of the oldest submitted run."""
        while self._pending:
            kind = self._pending.pop(0)
            if kind == "known":
                assert self._load_failure is not None
                return self._load_failure
            if kind == "lost":
                return RunOutcome(error=f"not run: {self.runtime} crashed before", crashed=True)
            reply = self._receive(kind)
            if kind == "open":
                if isinstance(reply, RunOutcome):  # every later run would fail the same way
                    self._load_failure = reply
                    self._pending = ["known" for _ in self._pending]
                    self._forget_process()
                else:
                    self._names = reply[1]
                continue
            if isinstance(reply, RunOutcome):
                return reply
            return RunOutcome(outputs=_as_outputs(self._names or [], reply[1]))
        raise RuntimeError("result() called with no run submitted")

    def run(self, feeds: Feeds) -> RunOutcome:
        self.submit(feeds)
        return self.result()

    def close(self) -> None:
        """End the child process (it also ends by itself when this process goes away)."""
        self._forget_process()
        self._pending = []

    def _start(self) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, str(_WORKER), str(to_child), str(from_child), str(self._memory)],
                pass_fds=(to_child, from_child),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            os.close(from_parent)
            os.close(to_parent)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)
        self._outbox = Connection(from_parent, readable=False)
        self._inbox = Connection(to_parent, writable=False)
        self._send(("open", self.runtime, self._model))
        self._pending.append("open")

    def _send(self, message: tuple[Any, ...], timeout: float | None = None) -> None:
        assert self._outbox is not None
        self._sent_at.append((time.monotonic(), self._timeout if timeout is None else timeout))
        with contextlib.suppress(OSError):  # the child is gone; its reply will say how
            self._outbox.send(message)

    def _receive(self, kind: str) -> tuple[str, Any] | RunOutcome:
        """The child's reply, or the outcome when it failed, died or took too long."""
        assert self._inbox is not None
        when = "while loading the model" if kind == "open" else "while running"
        # the timeout runs from when the child could start on this request, not from now
        sent, limit = self._sent_at.pop(0)
        started = max(sent, self._answered_at)
        remaining = max(started + limit - time.monotonic(), 0.0)
        try:
            if not self._inbox.poll(remaining):
                assert self._process is not None
                self._process.kill()
                self._forget_process()
                return RunOutcome(
                    error=f"did not finish in {limit:g} s in {self.runtime} {when} (killed)",
                    crashed=True,
                    timed_out=True,
                )
            reply = self._inbox.recv()
            self._answered_at = reply[-1]  # when the child sent it: it started on the next
        except (EOFError, OSError):
            code = self._forget_process()
            hint = ""
            if self._memory and code == -signal.SIGABRT:  # a failed allocation aborts some
                hint = f" (perhaps at the memory limit of {self._memory >> 20} MB: --memory-limit)"
            error = f"crashed {self.runtime}: {_exit_text(code)}{hint} {when}"
            return RunOutcome(error=error, crashed=True)
        if reply[0] == "ok":
            return reply  # type: ignore[no-any-return]
        return RunOutcome(
            error=reply[1] if reply[0] == "cannot run" else _loading(kind, reply[1]),
            cannot_run=reply[0] == "cannot run",
        )

    def _forget_process(self) -> int | None:
        """End the child (dead, killed, or of no more use) and reap it; the next submit starts
        a fresh one. Returns its exit code."""
        process = self._process
        for connection in (self._outbox, self._inbox):
            if connection is not None:
                connection.close()  # a live child reads the end of its input and exits
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        self._inbox = self._outbox = self._process = None
        self._pending = [kind if kind == "known" else "lost" for kind in self._pending]
        self._sent_at = []
        return code


def _loading(kind: str, message: str) -> str:
    return f"cannot load the model: {message}" if kind == "open" else message


def _exit_text(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class ReferenceRunner:
    """`onnx.reference.ReferenceEvaluator` on one model (a proto or a path), in this process,
    as a second opinion."""

    def __init__(self, model: onnx.ModelProto | str, new_ops: Sequence[type] = ()) -> None:
        """`new_ops`: implementations that replace the evaluator's (classes of
        `onnx.reference.op_run.OpRun` named as the operator)."""
        from onnx.reference import ReferenceEvaluator  # slow to import; only for --reference

        self._evaluator: ReferenceEvaluator | None = None
        self.load_error: str | None = None
        try:
            self._evaluator = ReferenceEvaluator(model, new_ops=list(new_ops) or None)
        except Exception as error:  # the evaluator rejects some valid models
            self.load_error = f"cannot load the model: {error_message(error)}"

    def run(self, feeds: Feeds) -> RunOutcome:
        """Run on `feeds` (inputs the model does not declare are left out)."""
        if self._evaluator is None:
            return RunOutcome(error=self.load_error)
        declared = set(self._evaluator.input_names)
        names = list(self._evaluator.output_names)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy's, on the empty or NaN values of a trial
                results = self._evaluator.run(
                    None, {k: v for k, v in feeds.items() if k in declared}
                )
        except Exception as error:  # the evaluator has bugs of its own; report them
            return RunOutcome(error=error_message(error))
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
