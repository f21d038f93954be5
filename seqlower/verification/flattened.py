"""Compare a model with its flattened form: sequence inputs and outputs as one tensor per element.

`seqlower optimize --flatten-sequence-io` records in the model's metadata which tensors replace
each sequence (`seqlower.passes.flatten_io.FLATTENED_IO_KEY`):

    original:  s: seq(float[4]) -> y: seq(float[4])
    flattened: s_0, s_1, s_2: float[4] -> y_0, y_1: float[4]
    metadata:  {"inputs": {"s": ["s_0", "s_1", "s_2"]}, "outputs": {"y": ["y_0", "y_1"]}}

`Flattening.of(original, candidate)` reads that mapping, keeping only the entries that name a
sequence of the original's interface that the candidate no longer has. The verifier then gives a
mapped sequence input exactly n elements in every trial, feeds element k to the k-th tensor, and
gathers the candidate's n output tensors back into a sequence before comparing.
"""

from __future__ import annotations

__all__ = ["Flattening"]

import dataclasses
import json
from collections.abc import Mapping

import onnx_ir as ir

from seqlower.errors import ModelInputError
from seqlower.passes.flatten_io import FLATTENED_IO_KEY
from seqlower.verification.values import Feeds, RuntimeValue


@dataclasses.dataclass(frozen=True)
class Flattening:
    """Which candidate tensors stand for each sequence input and output of the original."""

    inputs: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    outputs: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, original: ir.Model, candidate: ir.Model) -> Flattening:
        """The mapping recorded in `candidate`'s metadata (empty when there is none)."""
        text = candidate.metadata_props.get(FLATTENED_IO_KEY)
        if text is None:
            return cls()
        try:
            recorded = json.loads(text)
            sides = {side: dict(recorded.get(side, {})) for side in ("inputs", "outputs")}
            for names in (*sides["inputs"].values(), *sides["outputs"].values()):
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise ValueError
        except (ValueError, TypeError, AttributeError):
            raise ModelInputError(
                f"the candidate's metadata '{FLATTENED_IO_KEY}' is not a valid mapping"
            ) from None
        before = {
            "inputs": _sequence_names(original.graph.inputs),
            "outputs": _sequence_names(original.graph.outputs),
        }
        after = {
            "inputs": {value.name for value in candidate.graph.inputs},
            "outputs": {value.name for value in candidate.graph.outputs},
        }
        kept = {
            side: {
                name: tuple(names)
                for name, names in sides[side].items()
                if name in before[side] and name not in after[side]
            }
            for side in ("inputs", "outputs")
        }
        return cls(inputs=kept["inputs"], outputs=kept["outputs"])

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs)

    @property
    def lengths(self) -> dict[str, int]:
        """The length every flattened sequence input must have."""
        return {name: len(names) for name, names in self.inputs.items()}

    def input_names(self, names: list[str]) -> list[str]:
        """The candidate's names for the original's inputs `names`, in order."""
        return [item for name in names for item in self.inputs.get(name, (name,))]

    def output_names(self, names: list[str]) -> list[str]:
        """The candidate's names for the original's outputs `names`, in order."""
        return [item for name in names for item in self.outputs.get(name, (name,))]

    def feeds(self, feeds: Feeds) -> Feeds:
        """The candidate's feeds: element k of a flattened sequence input feeds its k-th
        tensor."""
        result: Feeds = {}
        for name, value in feeds.items():
            names = self.inputs.get(name)
            if names is None:
                result[name] = value
                continue
            if not isinstance(value, list) or len(value) != len(names):
                count = len(value) if isinstance(value, list) else "a tensor, not a sequence"
                raise ModelInputError(
                    f"input '{name}' has {count} elements, but the flattened candidate takes it "
                    f"as {len(names)} tensors"
                )
            result.update(zip(names, value, strict=True))
        return result

    def outputs_of(self, outputs: Mapping[str, RuntimeValue]) -> dict[str, RuntimeValue]:
        """The candidate's outputs under the original's names: the tensors of a flattened
        sequence output gathered into a list (left out when one of them is missing)."""
        result: dict[str, RuntimeValue] = {}
        for name, value in outputs.items():
            if not any(name in names for names in self.outputs.values()):
                result[name] = value
        for name, names in self.outputs.items():
            if all(item in outputs for item in names):
                result[name] = [outputs[item] for item in names]  # type: ignore[misc]
        return result


def _sequence_names(values: list[ir.Value] | tuple[ir.Value, ...]) -> set[str]:
    return {value.name or "" for value in values if isinstance(value.type, ir.SequenceType)}
