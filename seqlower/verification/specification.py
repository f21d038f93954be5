"""Ask the specification when only the candidate failed: does the original fail there too?

onnxruntime runs some inputs the ONNX specification rejects. A SplitToSequence whose `split`
is an empty vector over a non-empty axis is one: the specification requires the sizes to add up
to the dim, onnxruntime returns chunks of one instead. A lowered model follows the specification
and fails on such an input, so "only the candidate failed" would blame the rewrite for what is
onnxruntime's departure.

`SpecificationJudge` settles it with `onnx.reference`, the specification's own implementation,
run on the original. It is trusted only once it agreed with onnxruntime on the original in a
trial both models ran (`witness`): an evaluator that cannot run the model at all (an operator it
lacks, a bug of its own) must not excuse a candidate. Then, when the candidate alone failed on
some inputs, `excuse(feeds)` runs the original under `onnx.reference` on them: its error, when
it fails too, is the excuse; None when it runs (the candidate's failure is a difference).

    judge = SpecificationJudge(lambda: ReferenceRunner(original_proto))
    judge.witness(feeds_of_an_ok_trial, onnxruntime_outputs_of_the_original)
    judge.excuse(feeds_where_only_the_candidate_failed)   # "need at least one array ..." or None

The evaluator is built on first use (importing `onnx.reference` is slow), and never when no
candidate fails alone.
"""

from __future__ import annotations

__all__ = ["SpecificationJudge"]

from collections.abc import Callable, Mapping

from seqlower.verification.compare import compare_values
from seqlower.verification.runner import ReferenceRunner
from seqlower.verification.values import Feeds, RuntimeValue


class SpecificationJudge:
    """Whether `onnx.reference` fails on the original where only the candidate failed."""

    def __init__(
        self,
        reference: Callable[[], ReferenceRunner],
        *,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> None:
        self._factory = reference
        self._runner: ReferenceRunner | None = None
        self._rtol, self._atol = rtol, atol
        self._witness: tuple[Feeds, Mapping[str, RuntimeValue]] | None = None
        self._trusted: bool | None = None  # decided once, on the witness

    def witness(self, feeds: Feeds, outputs: Mapping[str, RuntimeValue]) -> None:
        """Remember the first trial where onnxruntime ran the original and the candidate agreed
        with it: the evaluator is trusted when it computes the same there."""
        if self._witness is None:
            self._witness = (dict(feeds), dict(outputs))

    def excuse(self, feeds: Feeds) -> str | None:
        """`onnx.reference`'s error on the original for `feeds`, when it fails there too and
        is trusted; else None."""
        if not self._is_trusted():
            return None
        outcome = self._reference().run(feeds)
        return None if outcome.ok else (outcome.error or "it failed")

    def _reference(self) -> ReferenceRunner:
        if self._runner is None:
            self._runner = self._factory()
        return self._runner

    def _is_trusted(self) -> bool:
        if self._trusted is None:
            if self._witness is None:
                return False  # nothing to check it on yet: decide later
            feeds, expected = self._witness
            outcome = self._reference().run(feeds)
            self._trusted = outcome.outputs is not None and all(
                name in outcome.outputs
                and compare_values(
                    value, outcome.outputs[name], rtol=self._rtol, atol=self._atol
                ).ok
                for name, value in expected.items()
            )
        return self._trusted
