"""Confirm a lowered model in its target's runtime: load it and run it once.

    check = check_in_runtime(model, "openvino")     # None for targets with no runtime to run
    check.status    # "confirmed", "failed", "unavailable" or "inconclusive"
    check.message   # one line for users; check.node: the node the runtime names, if any

The target profiles (`seqlower.targets`) judge a model from its operators alone: fast, but a
runtime can still reject a model they accept (OpenVINO 2026.4.1 cannot convert a Loop that
carries a constant of size 0; tract cannot type some If nodes). So for the targets whose
runtime is pip-installable (OpenVINO, tract), the model is loaded in that runtime and run once
on generated inputs (`seqlower.verification.generate_inputs`), in a child process
(`IsolatedRunner`), so that a runtime that crashes gives an answer instead of ending seqlower.

- confirmed: the runtime loaded the model and ran it;
- failed: it could not load or run it; the message says what it said, naming the node;
- unavailable: the runtime is not installed, so the check was static only;
- inconclusive: onnxruntime fails on the same generated inputs too (the inputs, not the target,
  are the problem), so nothing is said either way.
"""

from __future__ import annotations

__all__ = ["RUNTIME_TARGETS", "RuntimeCheck", "check_in_runtime", "fails_in_onnxruntime"]

import dataclasses
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import onnx
import onnx_ir as ir

from seqlower.io import write_proto
from seqlower.verification.generate import generate_inputs
from seqlower.verification.runner import DEFAULT_TIMEOUT, IsolatedRunner, RunOutcome
from seqlower.verification.runtimes import RuntimeUnavailableError, check_available
from seqlower.verification.values import Feeds

RUNTIME_TARGETS = ("openvino", "tract")
"""The targets whose runtime seqlower can load a model in."""
_NAMES = {"openvino": "OpenVINO", "tract": "tract"}

Status = Literal["confirmed", "failed", "unavailable", "inconclusive"]

# how each runtime names a node in its messages
_TRACT_NODE = re.compile(r'node #\d+ "([^"]+)"')
_OPENVINO_NODE = re.compile(r"<Node\((\w+)\): ([^>]*)>")


@dataclasses.dataclass(frozen=True)
class RuntimeCheck:
    """What the target's runtime said of a model (see the module docstring)."""

    target: str
    status: Status
    message: str
    node: str | None = None

    @property
    def ok(self) -> bool:
        """False only when the runtime could not load or run the model."""
        return self.status != "failed"

    def to_dict(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


def check_in_runtime(
    model: ir.Model | onnx.ModelProto,
    target: str,
    *,
    dims: Mapping[str, int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> RuntimeCheck | None:
    """Load `model` in the runtime of `target` and run it once on generated inputs (`dims`
    sizes symbolic dims, as for `verify`; the names the model no longer declares, because the
    lowering fixed them, are left out). None when `target` has no runtime to run."""
    if target not in RUNTIME_TARGETS:
        return None
    try:
        check_available(target)
    except RuntimeUnavailableError as error:
        return RuntimeCheck(
            target, "unavailable", f"{error}; the check for --target {target} was static only"
        )
    proto = model if isinstance(model, onnx.ModelProto) else ir.to_proto(model)
    graph = ir.from_proto(proto) if isinstance(model, onnx.ModelProto) else model
    # the runtimes read the model from a file (the child wrote bytes sent to it to one): the
    # model is written there once, its weights serialized one at a time, instead of being
    # serialized whole, pickled, sent through a pipe and written out again by the child
    with tempfile.TemporaryDirectory(prefix="seqlower-check-") as folder:
        path = Path(folder) / "model.onnx"
        try:
            write_proto(proto, path)
        except ValueError as error:  # over protobuf's 2 GB
            return RuntimeCheck(target, "inconclusive", f"not run in {_NAMES[target]}: {error}")
        feeds = generate_inputs(graph, dims=_still_named(graph, dims or {}))
        return _run_once(target, path, proto, feeds, timeout)


def _run_once(
    target: str, path: Path, proto: onnx.ModelProto, feeds: Feeds, timeout: float
) -> RuntimeCheck:
    """`check_in_runtime` for the model written at `path` (`proto`)."""
    with IsolatedRunner(target, path, timeout=timeout) as runner:
        outcome = runner.run(feeds)
    if outcome.ok:
        return RuntimeCheck(
            target,
            "confirmed",
            f"{_NAMES[target]} loaded the lowered model and ran it once on generated inputs",
        )
    if not outcome.cannot_run and not _loading_failed(outcome):
        with IsolatedRunner("onnxruntime", path, timeout=timeout) as runner:
            reference = runner.run(feeds)
        if not reference.ok:
            return RuntimeCheck(
                target,
                "inconclusive",
                f"not confirmed in {_NAMES[target]}: the generated inputs fail in onnxruntime too "
                f"({reference.error})",
            )
    node = _named_node(outcome.error or "", target, proto)
    where = f" at node '{node}'" if node else ""
    return RuntimeCheck(target, "failed", f"{_NAMES[target]} fails{where}: {outcome.error}", node)


def fails_in_onnxruntime(
    model: ir.Model, *, dims: Mapping[str, int] | None = None, trials: int = 3
) -> str | None:
    """onnxruntime's error on `model` when it cannot load it, or fails to run it on each of
    the first `trials` generated inputs (the inputs' declared shapes, typical values); None
    when one run succeeds. Where a lowered model fails the ONNX checker, this tells an input
    whose declared shapes its own computation contradicts from a fault of the lowering."""
    try:
        data = ir.to_proto(model).SerializeToString()
    except ValueError:  # over protobuf's 2 GB: not run
        return None
    error = None
    with IsolatedRunner("onnxruntime", data) as runner:
        for trial in range(trials):
            outcome = runner.run(generate_inputs(model, trial=trial, dims=dims))
            if outcome.ok:
                return None
            error = outcome.error or "it failed"
            if outcome.cannot_run or _loading_failed(outcome):
                break
    return error


def _still_named(model: ir.Model, dims: Mapping[str, int]) -> dict[str, int]:
    """The sizes of `dims` whose names the model's inputs still declare: a lowered model made
    with `--dim N=4` declares 4 where the original declared N, and needs no size for N."""
    named = {
        dim.value
        for value in model.graph.inputs
        if value.shape is not None
        for dim in value.shape.dims
        if isinstance(dim, ir.SymbolicDim) and dim.value
    }
    return {name: size for name, size in dims.items() if name in named}


def _loading_failed(outcome: RunOutcome) -> bool:
    return (outcome.error or "").startswith("cannot load the model")


def _named_node(message: str, target: str, model: onnx.ModelProto) -> str | None:
    """The node the runtime's message names: tract names nodes, OpenVINO names a node by its
    first output (mapped back to the node's name here)."""
    if target == "tract":
        found = _TRACT_NODE.search(message)
        return found.group(1) if found else None
    found = _OPENVINO_NODE.search(message)
    if found is None:
        return None
    output = found.group(2)
    for node in _all_nodes(model.graph):
        if output in node.output:
            return node.name or output
    return output


def _all_nodes(graph: onnx.GraphProto):  # type: ignore[no-untyped-def]
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            for subgraph in attr.graphs:
                yield from _all_nodes(subgraph)
