"""Warnings about what a lowering read one way where the ONNX specification and onnxruntime
read a model differently, said only where the two readings give different results for this
model that the user may not expect, and never claiming a lowering that did not happen.

    SplitToSequence(x, split=k>1 scalar, keepdims=0)
        the specification ignores keepdims; onnxruntime fails: warned (the lowered model runs)
    SplitToSequence(x, split=1 scalar, keepdims=0), split_keepdims="spec"
        the specification keeps the axis, as asked; onnxruntime and PyTorch squeeze it: warned
    SplitToSequence(x, split=1 scalar, keepdims=0)   # PyTorch's unbind, the default reading
        squeezed, as onnxruntime and PyTorch do: the result is what the exporter meant and
        what onnxruntime computed on the original, so nothing to warn about
"""

from __future__ import annotations

__all__ = ["split_reading_warnings"]

from collections.abc import Iterable

from seqlower.passes.normalize import SplitReading
from seqlower.report.labels import NodeLabels


def split_reading_warnings(readings: Iterable[SplitReading], labels: NodeLabels) -> list[str]:
    """One warning per resolved scalar-split/keepdims=0 node whose two readings differ here
    (not one only counted by SequenceLength) and that was not read as onnxruntime and PyTorch
    read it, saying what was done to it: lowered (the node is gone), or kept with the other
    reading. A split of 1 squeezed (the default, PyTorch's unbind) computes what onnxruntime
    computed on the original and what PyTorch meant: nothing to warn about."""
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
            continue  # PyTorch's unbind, read as onnxruntime and PyTorch read it
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
