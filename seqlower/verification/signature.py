"""The interface of a model as the verifier sees it: the inputs to feed and the outputs to compare.

An input that has an initializer keeps its default value and is not fed. Tensor inputs and sequences
of tensors are supported; anything else (optional, map, sequence of sequences) raises a one-line
`ModelInputError`, because the verifier could not build a value for it.
"""

from __future__ import annotations

__all__ = ["NUMBER_TYPES", "Dim", "InputSpec", "feedable_inputs", "input_spec", "output_names"]

import dataclasses

import onnx_ir as ir

from seqlower.errors import ModelInputError

NUMBER_TYPES = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
        ir.DataType.FLOAT16,
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
    }
)
"""The integer and real floating-point element types the verifier generates values for."""

Dim = int | str | None
"""One declared dimension: a size, a symbolic name, or None when unknown."""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One graph input that must be fed: its element type, declared shape and kind.

    For a sequence input, `dtype` and `shape` describe every element of the sequence.
    `shape` is None when the rank is unknown.
    """

    name: str
    dtype: ir.DataType
    shape: tuple[Dim, ...] | None
    is_sequence: bool


def feedable_inputs(model: ir.Model) -> list[InputSpec]:
    """The graph inputs of `model` without an initializer, in declaration order."""
    specs = []
    for value in model.graph.inputs:
        if value.name in model.graph.initializers:
            continue
        specs.append(input_spec(value))
    return specs


def output_names(model: ir.Model) -> list[str]:
    """The names of the graph outputs of `model`, in declaration order."""
    return [value.name or "" for value in model.graph.outputs]


def input_spec(value: ir.Value) -> InputSpec:
    """The `InputSpec` of graph input `value`; `ModelInputError` when it is neither a tensor nor
    a sequence of tensors."""
    name = value.name or ""
    value_type = value.type
    if isinstance(value_type, ir.SequenceType) and isinstance(value_type.elem_type, ir.TensorType):
        is_sequence = True
    elif isinstance(value_type, ir.TensorType):
        is_sequence = False
    else:
        described = "no declared type" if value_type is None else f"type {value_type}"
        raise ModelInputError(
            f"input '{name}' has {described}: only tensors and sequences of tensors can be fed"
        )
    shape: tuple[Dim, ...] | None = None
    if value.shape is not None:
        shape = tuple(_dim(dim) for dim in value.shape.dims)
    return InputSpec(name=name, dtype=value_type.dtype, shape=shape, is_sequence=is_sequence)


def _dim(dim: int | ir.SymbolicDim) -> Dim:
    if isinstance(dim, int):
        return dim
    return dim.value
