"""Build SplitToSequence -> SequenceMap -> ConcatFromSequence models around a body, lower them,
and check that the map was batched (no Loop, no sequence op) and computes the same."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from support import assert_outputs_equal, lower, op_counts, parse, run_ort

import seqlower
from seqlower.ops import SEQUENCE_OPS
from seqlower.rules import batching

RNG = np.random.default_rng(7)
LOOPS = {"Loop", "Scan", "If"}


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def mapped(
    body: str,
    x: str,
    ys: Sequence[str],
    *,
    extras: str = "",
    opset: int = 18,
    split: str = "SplitToSequence<axis=0, keepdims=0>(x)",
    concat: str = "ConcatFromSequence<axis=0, new_axis=1>",
) -> onnx.ModelProto:
    """x -> split -> SequenceMap(body, extras...) -> concat of each output -> ys. `extras` are
    extra graph inputs ("float[3] b, float[2] c"), passed to the map in order; `ys` are the
    graph outputs ("float[N,4] y0", ...), one per body output."""
    names = re.findall(r"(?:^|,)\s*\w+(?:\[[^\]]*\])?\s+(\w+)", extras)
    graph_inputs = ", ".join([x, *([extras] if extras else [])])
    maps = ", ".join(f"map_out{i}" for i in range(len(ys)))
    concats = "\n".join(f"{y.split()[-1]} = {concat}(map_out{i})" for i, y in enumerate(ys))
    return parse(
        f"""g ({graph_inputs}) => ({", ".join(ys)}) {{
            seq_in = {split}
            {maps} = SequenceMap<body = {body}>({", ".join(["seq_in", *names])})
            {concats}
        }}""",
        opset=opset,
    )


def assert_batched(
    model: onnx.ModelProto,
    feeds: Sequence[Mapping[str, Any]],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> onnx.ModelProto:
    """Lowering batches the map (no loop, no sequence op left, unless the model's interface
    is a sequence) and every feed gives the original's outputs under onnxruntime."""
    __tracebackhide__ = True
    lowered, report = lower(model)
    assert report.rules_fired.get("sequence-map-batch") == 1, report.to_json()
    counts = op_counts(lowered)
    assert not LOOPS & set(counts), counts
    interface = any(o.type.HasField("sequence_type") for o in model.graph.output)
    if not interface:
        assert not SEQUENCE_OPS & set(counts), counts
    for feed in feeds:
        expected = run_ort(model, feed)
        actual = run_ort(lowered, feed)
        assert_outputs_equal(expected, actual, rtol=rtol, atol=atol)
    return lowered


def refusal(model: onnx.ModelProto) -> str:
    """Why the batching rule alone leaves the SequenceMap."""
    _, report = seqlower.optimize(model, rules=batching.RULES)
    found = [op.reason for op in report.remaining if op.op_type == "SequenceMap"]
    assert found, report.to_json()
    return found[0]
