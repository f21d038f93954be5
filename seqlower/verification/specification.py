"""Ask the specification where the candidate departs from onnxruntime's run of the original.

onnxruntime departs from the ONNX specification in places, and a lowered model follows the
specification (seqlower.runtime_quirks lists the departures). Two kinds show in a trial:

- onnxruntime runs an input the specification rejects. A SplitToSequence whose `split` is an
  empty vector over a non-empty axis is one: the specification requires the sizes to add up to
  the dim, onnxruntime returns chunks of one instead. The lowered model fails there, so "only
  the candidate failed" would blame the rewrite for onnxruntime's departure.
- onnxruntime computes another value than the specification. Its ReduceMax ignores a NaN that
  comes after a number; the specification's maximum is NaN there, and so is the lowered
  model's, so "values differ" would blame the rewrite.
- onnxruntime runs an input the specification rejects into memory it never wrote. Its Concat
  (and ConcatFromSequence) of an empty input whose other dims do not fit gives rows of
  uninitialized memory, in the original and in the lowered model alike, or the lowered model
  fails (a Loop's scan output, which checks its elements' shapes); the specification rejects
  the concatenation, so "values differ" or "only the candidate failed" would blame the
  rewrite.

`SpecificationJudge` settles all three, for the departures seqlower knows only: each is a probed
quirk of seqlower.runtime_quirks (`DEPARTURES`), considered where the installed onnxruntime
still shows it and the original holds its operator (a NaN in the inputs too, for the NaN one).
`onnx.reference`, the specification's own implementation, then runs the original. It is not
right everywhere either (its SequenceInsert at position n, the length, inserts at 0), which is
why it is asked only about those departures, and trusted only once it agreed with onnxruntime
on the original in a trial both models ran (`witness`): an evaluator that cannot run the model
at all must not excuse a candidate. A trial judged before any trial could vouch for it
(`undecided`) is judged again once all have run, so the order of the trials does not matter.

The evaluator reads one operator as onnxruntime (and seqlower, by default) does, not as the
specification does: a SplitToSequence by a scalar split of 1 with keepdims=0 squeezes the axis
(`scalar-split-keepdims`, PyTorch's `unbind`; `splits_as_onnxruntime`). Read as the
specification reads it, every element of such a list keeps the axis, the evaluator never agrees
with onnxruntime on the original, is never trusted, and excuses nothing in any model built on
`unbind`: a concatenation of an empty misfit there was blamed on the rewrite.

`excuse(feeds)` gives its error when it fails on the original too (None otherwise: the
candidate's failure is a difference), and `sides_with(feeds, outputs)` says whether it computes
the candidate's outputs from the original (within the same tolerances), and `rejects(feeds)`
gives its error when it rejects the original's concatenation of a misfit (None otherwise:
differing values are a difference).

    judge = SpecificationJudge(
        lambda: ReferenceRunner(original, splits_as_onnxruntime()), ops={"SplitToSequence"}
    )
    judge.witness(feeds_of_an_ok_trial, onnxruntime_outputs_of_the_original)
    judge.excuse(feeds_where_only_the_candidate_failed)   # "need at least one array ..." or None
    judge.sides_with(feeds_where_values_differ, candidate_outputs)   # True or False
    judge.rejects(feeds_where_values_differ)   # "... except for the concatenation axis ..." or None

The evaluator is built on first use (importing `onnx.reference` is slow), and never when no
candidate fails or differs where a departure may explain it.
"""

from __future__ import annotations

__all__ = ["DEPARTURES", "Departure", "SpecificationJudge", "splits_as_onnxruntime"]

import dataclasses
from collections.abc import Callable, Mapping, Set

from seqlower import runtime_quirks
from seqlower.verification.compare import compare_values
from seqlower.verification.runner import ReferenceRunner
from seqlower.verification.values import Feeds, RuntimeValue, has_nan


@dataclasses.dataclass(frozen=True)
class Departure:
    """A probed onnxruntime departure from the specification that a trial may show: the quirk,
    the operators that show it, and how (the candidate fails where onnxruntime runs the
    original, or the values differ on inputs that hold a NaN)."""

    quirk: str
    ops: frozenset[str]
    shows_as: frozenset[str]  # of "failure", "NaN values" and "misfit concatenated"


DEPARTURES = (
    Departure(
        "split-to-sequence-empty-split", frozenset({"SplitToSequence"}), frozenset({"failure"})
    ),
    Departure(
        "reduce-max-nan-order", frozenset({"ReduceMax", "ReduceMin"}), frozenset({"NaN values"})
    ),
    # a misfit concatenated in the lowered model too, or refused there (a Loop's scan output
    # checks that every iteration's element has the first one's shape)
    Departure(
        "concat-empty-misfit",
        frozenset({"Concat", "ConcatFromSequence"}),
        frozenset({"misfit concatenated", "failure"}),
    ),
)

# how onnx.reference (numpy) rejects a concatenation whose inputs' other dims differ
_MISFIT_ERROR = "except for the concatenation axis"


def splits_as_onnxruntime() -> tuple[type, ...]:
    """An `onnx.reference` SplitToSequence that squeezes the axis for a scalar split of 1 with
    keepdims=0, as onnxruntime does (where the installed onnxruntime still does: the quirk
    `scalar-split-keepdims`); else nothing to replace."""
    if not runtime_quirks.holds("scalar-split-keepdims"):
        return ()
    import numpy as np
    from onnx.reference.ops.op_split_to_sequence import SplitToSequence as Specification

    class SplitToSequence(Specification):  # the name the evaluator looks the operator up by
        op_domain = ""

        def _run(self, mat, split=None, axis=0, keepdims=1):  # type: ignore[no-untyped-def]
            (parts,) = super()._run(mat, split, axis=axis, keepdims=keepdims)
            if split is None or np.ndim(split) != 0 or int(split) != 1 or keepdims:
                return (parts,)
            return ([np.squeeze(part, axis=axis) for part in parts],)

    return (SplitToSequence,)


class SpecificationJudge:
    """Whether `onnx.reference` sides with the candidate where onnxruntime's known departures
    from the specification may explain a failure or a difference (`ops`: the operator types of
    the original, in every graph)."""

    def __init__(
        self,
        reference: Callable[[], ReferenceRunner],
        *,
        ops: Set[str],
        rtol: float | None = None,
        atol: float | None = None,
    ) -> None:
        self._shows = {
            shown
            for departure in DEPARTURES
            if departure.ops & ops and runtime_quirks.holds(departure.quirk)
            for shown in departure.shows_as
        }
        self._factory = reference
        self._runner: ReferenceRunner | None = None
        self._rtol, self._atol = rtol, atol
        self._witness: tuple[Feeds, Mapping[str, RuntimeValue]] | None = None
        self._trusted: bool | None = None  # decided once, on the witness

    @property
    def undecided(self) -> bool:
        """True while a departure may explain a trial but no trial has shown yet whether the
        evaluator is trusted (no witness): a failure or difference judged now may be settled
        once one has (`seqlower.verification.session` judges it again at the end)."""
        return bool(self._shows) and self._trusted is None and self._witness is None

    def witness(self, feeds: Feeds, outputs: Mapping[str, RuntimeValue]) -> None:
        """Remember the first trial where onnxruntime ran the original and the candidate agreed
        with it: the evaluator is trusted when it computes the same there."""
        if self._witness is None:
            self._witness = (dict(feeds), dict(outputs))

    def excuse(self, feeds: Feeds) -> str | None:
        """`onnx.reference`'s error on the original for `feeds`, when it fails there too and
        is trusted; else None."""
        if "failure" not in self._shows or not self._is_trusted():
            return None
        outcome = self._reference().run(feeds)
        return None if outcome.ok else (outcome.error or "it failed")

    def sides_with(self, feeds: Feeds, outputs: Mapping[str, RuntimeValue]) -> bool:
        """True when `onnx.reference`, trusted, computes `outputs` (the candidate's, every
        one of the original's outputs) from the original on `feeds`."""
        if "NaN values" not in self._shows or not has_nan(feeds) or not self._is_trusted():
            return False
        found = self._reference().run(feeds).outputs
        return found is not None and self._same(found, outputs)

    def rejects(self, feeds: Feeds) -> str | None:
        """`onnx.reference`'s error on the original for `feeds`, when it is trusted and rejects a
        concatenation of inputs whose other dims differ there (onnxruntime concatenates an empty
        one without a check); else None."""
        if "misfit concatenated" not in self._shows or not self._is_trusted():
            return None
        outcome = self._reference().run(feeds)
        error = outcome.error or ""
        return error if not outcome.ok and _MISFIT_ERROR in error else None

    def _same(
        self, expected: Mapping[str, RuntimeValue], actual: Mapping[str, RuntimeValue]
    ) -> bool:
        return all(
            name in actual
            and compare_values(value, actual[name], rtol=self._rtol, atol=self._atol).ok
            for name, value in expected.items()
        )

    def _reference(self) -> ReferenceRunner:
        if self._runner is None:
            self._runner = self._factory()
        return self._runner

    def _is_trusted(self) -> bool:
        if self._trusted is None:
            if self._witness is None:
                return False  # nothing to check it on yet: decide later
            feeds, expected = self._witness
            found = self._reference().run(feeds).outputs
            self._trusted = found is not None and self._same(expected, found)
        return self._trusted
