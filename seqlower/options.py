"""User-facing knobs of the lowering."""

from __future__ import annotations

__all__ = ["Options", "SplitKeepdimsReading"]

import dataclasses
from collections.abc import Mapping
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
    dims: sizes for symbolic dims of the model inputs (`{"N": 8}`); the lowered model then
        accepts only those sizes (recorded in `Report.interface_changes`).
    flatten_sequence_io: turn sequence-typed model outputs of static length into one tensor
        output per element (`y_0`, `y_1`...), and the sequence inputs named in `seq_lens` into
        one tensor input per element (design.md trap 9: only on request).
    seq_lens: the length of each sequence-typed model input to flatten (`{"s": 3}`); needs
        `flatten_sequence_io`.
    target: the runtime the lowered model is for ("generic", "onnxruntime", "tensorrt",
        "openvino", "tract"). Rewrites that trade speed for portability (a tensor accumulator
        instead of a sequence) apply only for a target that needs them.
    """

    split_keepdims: SplitKeepdimsReading = "onnxruntime"
    max_iterations: int = 50
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    flatten_sequence_io: bool = False
    seq_lens: Mapping[str, int] = dataclasses.field(default_factory=dict)
    target: str = "generic"
