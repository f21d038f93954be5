"""Warnings about what a lowering read one way where the ONNX specification and onnxruntime
read a model differently, said only where the two readings give different results for this
model, and never claiming a lowering that did not happen.

    SplitToSequence(x, split=1 scalar, keepdims=0)   # PyTorch's unbind
        the specification keeps the axis; onnxruntime and PyTorch squeeze it
    SplitToSequence(x, split=k>1 scalar, keepdims=0)
        the specification ignores keepdims; onnxruntime fails
"""

from __future__ import annotations

__all__ = ["split_reading_warnings"]

from collections.abc import Iterable

from seqlower.passes.normalize import SplitReading
from seqlower.report.labels import NodeLabels

_SPEC_OPTION = "--split-keepdims spec, or split_keepdims='spec' in Python"


def split_reading_warnings(readings: Iterable[SplitReading], labels: NodeLabels) -> list[str]:
    """One warning per resolved scalar-split/keepdims=0 node whose two readings differ here
    (not one only counted by SequenceLength), saying what was done to it: lowered (the node is
    gone), or kept with the other reading. A split of 1 kept with the squeeze, and read only by
    what was kept, computes in onnxruntime what the original did (written without its split
    input, every runtime reads it so): nothing to warn about."""
    warnings = []
    for reading in readings:
        if reading.counted_only:
            continue
        node = f"SplitToSequence '{labels(reading.node)}'"
        lowered = reading.node.graph is None
        if reading.chunk != 1:
            done = (
                "lowered as the ONNX specification reads it (keepdims ignored)"
                if lowered
                else "kept, with keepdims=1 (the specification's reading)"
            )
            warnings.append(
                f"{node}: scalar split={reading.chunk} with keepdims=0, on which onnxruntime "
                f"fails; {done}"
            )
        elif reading.squeezed:
            if not lowered and not reading.readers_rewritten():
                continue  # kept as it was read, computing what onnxruntime computed
            done = "lowered" if lowered else "kept, and what reads it lowered,"
            warnings.append(
                f"{node}: scalar split=1 with keepdims=0 (as PyTorch exports unbind); the ONNX "
                f"specification keeps the axis here, onnxruntime and PyTorch squeeze it: {done} "
                f"with the squeeze ({_SPEC_OPTION}, keeps the axis)"
            )
        else:
            done = (
                "lowered as the specification reads it"
                if lowered
                else "kept, with keepdims=1 (the specification's reading)"
            )
            warnings.append(
                f"{node}: scalar split=1 with keepdims=0; the ONNX specification keeps the axis "
                f"(as asked), onnxruntime and PyTorch squeeze it: {done}"
            )
    return warnings
