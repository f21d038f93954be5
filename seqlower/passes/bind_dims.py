"""Give symbolic dimensions of the model inputs a fixed size, as the user asked (`--dim N=8`).

    x: float[N, 4]  with dims={"N": 8}  ->  x: float[8, 4]

Static sizes let the analysis count elements (a SplitToSequence over dim N becomes a Split into 8
chunks, a SequenceMap over it is unrolled). The lowered model then accepts only those sizes: that is
the contract the user chose, and the report records it as an interface change.
"""

from __future__ import annotations

__all__ = ["BindDimsPass", "bindable_dims", "dims_feeding"]

import logging
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir

from seqlower.errors import SeqlowerError
from seqlower.ops import constant_tensor

logger = logging.getLogger(__name__)


class BindDimsPass(ir.passes.InPlacePass):
    """Replace the symbolic dims named in `dims` by their sizes in the main graph's inputs.

    After the pass, `bound` maps each dim name to the inputs that carried it. A name that matches
    no symbolic dim of any main-graph input, or a negative size, raises `SeqlowerError`.
    """

    def __init__(self, dims: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.dims = dict(dims or {})
        self.bound: dict[str, list[str]] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.bound = {}
        if not self.dims:
            return ir.passes.PassResult(model, False)
        for name, size in self.dims.items():
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise SeqlowerError(f"dim '{name}': size must be an integer >= 0, not {size!r}")
        available = bindable_dims(model)
        unknown = [name for name in self.dims if name not in available]
        if unknown:
            known = ", ".join(sorted(available)) or "none"
            raise SeqlowerError(
                f"dim '{unknown[0]}' is not a symbolic dimension of any model input "
                f"(symbolic input dims: {known})"
            )
        for value in model.graph.inputs:
            if value.shape is None:
                continue
            dims = [self._bind(dim, value) for dim in value.shape]
            if dims != list(value.shape):
                value.shape = ir.Shape(dims)
        logger.debug("bound dims %s", self.bound)
        return ir.passes.PassResult(model, bool(self.bound))

    @property
    def changes(self) -> list[dict[str, Any]]:
        """The interface changes of the last run, for `Report.interface_changes`."""
        return [
            {"kind": "bind_dim", "dim": name, "size": self.dims[name], "inputs": list(inputs)}
            for name, inputs in self.bound.items()
        ]

    def _bind(self, dim: int | ir.SymbolicDim, value: ir.Value) -> int | ir.SymbolicDim:
        if isinstance(dim, ir.SymbolicDim) and dim.value in self.dims:
            inputs = self.bound.setdefault(dim.value, [])
            if value.name not in inputs:
                inputs.append(value.name or "")
            return self.dims[dim.value]
        return dim


def bindable_dims(model: ir.Model) -> set[str]:
    """Names of the symbolic dims of the main graph's inputs (the ones `--dim` can set).

    A sequence-typed input counts too: its `shape` is the shape of its elements.
    """
    names = set()
    for value in model.graph.inputs:
        for dim in value.shape or ():
            if isinstance(dim, ir.SymbolicDim) and dim.value:
                names.add(dim.value)
    return names


def dims_feeding(value: ir.Value | None, bindable: set[str], depth: int = 6) -> list[str]:
    """Bindable symbolic dims that `value`'s content may depend on, in order of discovery.

    Looks at the value's own shape, then up through its producers (`depth` levels): a trip count
    computed as Shape(x) depends on the dims of x, one computed as Gather(Shape(x), 0) on dim 0 of
    x only. Used for "try --dim N=<size>" hints.
    """
    found: list[str] = []
    seen: set[ir.Value] = set()
    frontier = [value] if value is not None else []

    def add(dims: Any) -> None:
        for dim in dims:
            name = dim.value if isinstance(dim, ir.SymbolicDim) else None
            if name is not None and name in bindable and name not in found:
                found.append(name)

    for _ in range(depth + 1):
        following: list[ir.Value] = []
        for current in frontier:
            if current in seen:
                continue
            seen.add(current)
            read = _shape_entries(current)
            if read is not None:  # Gather(Shape(x), k): dim k of x, and nothing above it
                add(read)
                continue
            add(current.shape or ())
            producer = current.producer()
            if producer is not None:
                following.extend(v for v in producer.inputs if v is not None)
        frontier = following
    return found


def _shape_entries(value: ir.Value) -> list[int | ir.SymbolicDim] | None:
    """The dims of x that `value` = Gather(Shape(x), k) (k constant) reads, or None for any other
    value, or where x's rank or the positions are unknown."""
    gather = value.producer()
    if (
        gather is None
        or gather.op_type != "Gather"
        or gather.domain != ""
        or len(gather.inputs) < 2
    ):
        return None
    data, indices = gather.inputs[0], gather.inputs[1]
    shape_node = data.producer() if data is not None else None
    if shape_node is None or shape_node.op_type != "Shape" or shape_node.domain != "":
        return None
    source = shape_node.inputs[0] if shape_node.inputs else None
    positions = _constant_ints(indices)
    if source is None or source.shape is None or positions is None:
        return None
    dims = list(source.shape)
    start = shape_node.attributes.get_int("start", 0)
    end = shape_node.attributes.get_int("end", len(dims))
    read = dims[slice(start, end)]
    if any(not -len(read) <= k < len(read) for k in positions):
        return None
    return [read[k] for k in positions]


def _constant_ints(value: ir.Value | None) -> list[int] | None:
    """The integers of a constant `value` (a Constant's, or an initializer no caller can
    override: `seqlower.ops.constant_tensor`), else None."""
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None:
        return None
    try:
        return [int(v) for v in tensor.numpy().reshape(-1)]
    except (TypeError, ValueError):
        return None
