"""User-facing knobs of the lowering."""

from __future__ import annotations

__all__ = ["Options", "SplitKeepdimsReading"]

import dataclasses
from typing import Literal

SplitKeepdimsReading = Literal["onnxruntime", "spec"]


@dataclasses.dataclass(frozen=True)
class Options:
    """How to lower.

    split_keepdims: how to read SplitToSequence with a scalar `split` and keepdims=0 (design.md
        trap 1). "onnxruntime" (default) squeezes when the split is 1, as onnxruntime and PyTorch
        do and as PyTorch's exporter relies on for `unbind`; "spec" ignores keepdims, as the
        ONNX specification and onnx.reference do. Either way the node is named in a warning.
    max_iterations: bound on the rewrite sweeps; reaching it is reported as the stop reason.
    """

    split_keepdims: SplitKeepdimsReading = "onnxruntime"
    max_iterations: int = 50
