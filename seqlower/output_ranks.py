"""Declare the rank of a model output the export gave no shape, where seqlower proves it.

    graph (...) => (float score)            # declared with no shape: the checker rejects it
    -> graph (...) => (float[] score)       # proved a scalar (or float[?, ?] for rank 2 ...)

The ONNX checker requires every main-graph input and output to declare a shape (onnxruntime
does not; PyTorch's TorchScript exporter writes an output without one where it lost its rank).
Such a model is lowered all the same (`seqlower.input_check` checks it without those outputs),
and each such output is given, on the lowered model, a shape of as many unknown dims as the
rank the analysis proves (`seqlower.analysis.ranks`: from the spec's rank rules, forward, never
guessed). An output whose rank no rule proves leaves the model refused, as the checker refuses
it, with the outputs named.
"""

from __future__ import annotations

__all__ = ["declare_output_ranks", "shapeless_outputs"]

import onnx_ir as ir

from seqlower.analysis.ranks import Ranks
from seqlower.errors import InvalidModelError


def shapeless_outputs(model: ir.Model) -> list[str]:
    """The names of the main graph's tensor outputs declared with no shape."""
    return [
        value.name or ""
        for value in model.graph.outputs
        if isinstance(value.type, ir.TensorType) and value.shape is None
    ]


def declare_output_ranks(model: ir.Model, names: list[str]) -> dict[str, int]:
    """Give each main-graph output of `names` (`shapeless_outputs` of the model as given) that
    still has no shape the shape of its proved rank, each dim unknown; returns the rank of each
    such output, by name (the lowering's shape inference may have declared it already). Raises
    `InvalidModelError` for an output whose rank is not proved (the model as the checker
    rejects it)."""
    if not names:
        return {}
    outputs = [value for value in model.graph.outputs if value.name in names]
    shapeless = [value for value in outputs if value.shape is None]
    ranks = Ranks(model) if shapeless else None
    unproved = [value.name or "" for value in shapeless if ranks and ranks.rank(value) is None]
    if unproved:
        named = ", ".join(f"'{name}'" for name in unproved)
        raise InvalidModelError(
            "the input model itself is invalid, the ONNX checker rejects it: Field 'shape' of "
            f"'type' is required but missing (output {named} of the model declares an element "
            "type but no shape, and seqlower cannot prove its rank; declare its rank (a "
            "scalar's shape is empty) where the model is exported, or in the file with onnx)"
        )
    declared = {}
    for value in outputs:
        if value.shape is None:
            rank = ranks.rank(value) if ranks else None
            assert rank is not None
            value.shape = ir.Shape([None] * rank)
        declared[value.name or ""] = len(value.shape)
    return declared
