"""User-facing knobs of the lowering."""

from __future__ import annotations

__all__ = ["DEFAULT_UNROLL_BUDGET", "SPEED_FIRST_TARGETS", "Options", "SplitKeepdimsReading"]

import dataclasses
from collections.abc import Mapping
from typing import Literal

SplitKeepdimsReading = Literal["onnxruntime", "spec"]

DEFAULT_UNROLL_BUDGET = 4096  # nodes an unrolled loop may add: body nodes times iterations

# Targets that ask for speed first: each region of sequence operators whose tensor form costs
# more than the original (`seqlower.cost`) is kept as given (README, "Never slower"). Every other
# target lowers everything it can.
SPEED_FIRST_TARGETS = frozenset({"onnxruntime"})


@dataclasses.dataclass(frozen=True)
class Options:
    """How to lower.

    split_keepdims: how to read SplitToSequence with a scalar `split` and keepdims=0 (README,
        "Where the specification and onnxruntime disagree", item 1). "onnxruntime" (default)
        squeezes when the split is 1, as onnxruntime and PyTorch do and as PyTorch's exporter
        relies on for `unbind`; "spec" ignores keepdims, as the ONNX specification and
        onnx.reference do. Either way the node is named in a warning.
    max_iterations: bound on the rewrite sweeps; reaching it is reported as the stop reason.
    dims: sizes for symbolic dims of the model inputs (`{"N": 8}`); the lowered model then
        accepts only those sizes (recorded in `Report.interface_changes`).
    flatten_sequence_io: turn sequence-typed model outputs of static length into one tensor
        output per element (`y_0`, `y_1`...), and the sequence inputs named in `seq_lens` into
        one tensor input per element (the interface is kept unless asked: README, "How it
        works").
    seq_lens: the length of each sequence-typed model input to flatten (`{"s": 3}`); needs
        `flatten_sequence_io`.
    target: the runtime the model is lowered for (`seqlower.targets.PROFILES`). Every target
        lowers every sequence operator it can, except "onnxruntime", which asks for speed
        first: a region of sequence operators whose tensor form costs more than the original
        (`seqlower.cost`) is kept as given, the others are lowered. "tract" also asks for the
        target-only rewrites of `seqlower.rules.target_tract` (run-time If to Where, static
        Loops unrolled, Loops over a tensor axis to Scan).
    unroll_budget: how many nodes a target-only unrolling may add to the model (body nodes
        times iterations); a Loop over the budget is kept, and the refusal says so.
    """

    split_keepdims: SplitKeepdimsReading = "onnxruntime"
    max_iterations: int = 50
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    flatten_sequence_io: bool = False
    seq_lens: Mapping[str, int] = dataclasses.field(default_factory=dict)
    target: str = "generic"
    unroll_budget: int = DEFAULT_UNROLL_BUDGET
