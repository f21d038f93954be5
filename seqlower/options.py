"""User-facing knobs of the lowering."""

from __future__ import annotations

__all__ = [
    "DEFAULT_UNROLL_BUDGET",
    "SPEED_FIRST_TARGETS",
    "SPLIT_KEEPDIMS_READINGS",
    "TARGET_NAMES",
    "Options",
    "SplitKeepdimsReading",
    "options_with",
    "unknown_choice",
]

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

from seqlower.errors import SeqlowerError

SplitKeepdimsReading = Literal["onnxruntime", "spec"]
SPLIT_KEEPDIMS_READINGS = ("onnxruntime", "spec")
# the target profiles (seqlower.targets.PROFILES has one per name, in this order)
TARGET_NAMES = ("generic", "portable", "onnxruntime", "tensorrt", "openvino", "tract")

DEFAULT_UNROLL_BUDGET = 4096  # nodes an unrolled loop may add: body nodes times iterations

# Targets that ask for speed first: each region of sequence operators whose tensor form costs
# more than the original (`seqlower.cost`) is kept as given (README, "Never slower"). Every other
# target lowers everything it can.
SPEED_FIRST_TARGETS = frozenset({"onnxruntime"})

# Targets whose Loops are written around OpenVINO's Loop faults (`seqlower.passes.workarounds`):
# a Loop that may run no iteration counts its iterations, each scan output cut to the count
# (OpenVINO otherwise gives such a Loop the rows of the run before), and a trip count that may be
# negative is clamped at 0 (OpenVINO otherwise runs without end). They cost an Add per iteration,
# a copy per scan output and a Max per Loop, so the default target, measured in onnxruntime,
# leaves them out.
OPENVINO_LOOP_TARGETS = frozenset({"openvino"})


@dataclasses.dataclass(frozen=True)
class Options:
    """How to lower.

    split_keepdims: how to read SplitToSequence with a scalar `split` and keepdims=0
        (docs/design.md, "Where the specification and onnxruntime disagree"). "onnxruntime"
        (default) squeezes when the split is 1, as onnxruntime and PyTorch do and as PyTorch's
        exporter relies on for `unbind`; "spec" ignores keepdims, as the ONNX specification and
        onnx.reference do. A node read as the specification reads it is named in a warning
        where the two readings give different results (the default reading of a split of 1,
        PyTorch's unbind, is what the exporter meant, and gives none).
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
        Loops unrolled, Loops over a tensor axis to Scan), `seqlower.rules.tract_while`
        (bounded while loops to a masked Scan) and `seqlower.rules.tract_gather`.
    unroll_budget: how many nodes a target-only unrolling may add to the model (body nodes
        times iterations); a Loop over the budget is kept, and the refusal says so.
    tensor_lists: after the pattern rules, turn every list they left into tensors where its
        elements have a known rank (`seqlower.lists`: a flat buffer and a table of shapes).
        False keeps those lists as sequences, with the rules' reasons (what the pattern rules
        alone achieve).
    time_limit: seconds the lowering may take (None: no limit). Once they have passed, no
        further rewrite starts: the model is cleaned up and returned as lowered so far (a valid
        model), and the report's stop reason says the time limit was reached.
    partial: for the default target, lower a model that can only be partly lowered even when
        the lowering grows it. By default such a model is judged as a whole: when sequence
        operators stay and the lowered model has more nodes than the original (the lowering
        only added conversions at the boundary of what stays), the original is returned as
        given and the report's stop reason says so (a model with a sequence-typed input or
        output is exempt: its interface stays a sequence either way). Other targets lower what
        they can, as ever.
    runtime_check: for target "openvino" or "tract", when that runtime is installed and the
        profile accepts the result, also load the lowered model in the runtime and run it once
        on generated inputs, in a child process (`seqlower.runtime_check`; about a second), as
        `seqlower optimize --target` always does: a failure is a target error, so
        `Report.fits_target` gives the command line's verdict. By default the target is judged
        from the operators alone; `Report.target_check` says which check was made.
    """

    split_keepdims: SplitKeepdimsReading = "onnxruntime"
    max_iterations: int = 50
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    flatten_sequence_io: bool = False
    seq_lens: Mapping[str, int] = dataclasses.field(default_factory=dict)
    target: str = "generic"
    unroll_budget: int = DEFAULT_UNROLL_BUDGET
    tensor_lists: bool = True
    time_limit: float | None = None
    partial: bool = False
    runtime_check: bool = False

    def __post_init__(self) -> None:
        """Refuse values no option takes, with the message the command line gives."""
        if self.target not in TARGET_NAMES:
            raise SeqlowerError(unknown_choice("target", self.target, TARGET_NAMES))
        if self.split_keepdims not in SPLIT_KEEPDIMS_READINGS:
            raise SeqlowerError(
                unknown_choice("split_keepdims", self.split_keepdims, SPLIT_KEEPDIMS_READINGS)
            )
        for name in ("max_iterations", "unroll_budget"):
            value = getattr(self, name)
            if not _is_count(value):
                raise SeqlowerError(f"{name} must be an integer >= 0, not {value!r}")
        limit = self.time_limit
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0
        ):
            raise SeqlowerError(f"time_limit must be a number of seconds > 0, not {limit!r}")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def unknown_choice(option: str, value: object, choices: Sequence[str]) -> str:
    """The one message for a value outside its choices, in Python and on the command line."""
    return f"unknown {option} {value!r}: choose one of {', '.join(choices)}"


def options_with(options: Options | None, overrides: Mapping[str, object]) -> Options:
    """`options` (default `Options()`) with the keyword `overrides` given to `optimize`; an
    unknown keyword or value is a `SeqlowerError` naming it."""
    fields = [field.name for field in dataclasses.fields(Options)]
    for name in overrides:
        if name not in fields:
            raise SeqlowerError(unknown_choice("option", name, fields))
    return dataclasses.replace(options or Options(), **overrides)  # type: ignore[arg-type]
