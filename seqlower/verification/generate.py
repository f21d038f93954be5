"""Random inputs for a model, reproducible from a seed and a trial number.

Trial `t` of seed `s` always draws from `numpy.random.default_rng([s, t])`, so a trial does not
depend on how many trials run. Per trial:

- Symbolic dimensions are bound once for all inputs: the same name gets the same size. A size from
  `dims` wins; other names get 2, 3 or 4 (varying with the trial and the name, so that dynamic
  shapes are exercised); unnamed dimensions and inputs of unknown rank (taken as 1-D) get 3, the
  same for all, so that they broadcast together.
- A sequence input has 3, 1 and 0 elements in trials 0, 1, 2 (and so on, cyclically); every
  element has the same shape and is an array of the declared element type and rank (a 0-d array
  for a scalar element, never a numpy scalar, which onnxruntime refuses inside a sequence).
- A Loop whose trip count or condition is a graph input runs its body 3, 1, 0, 5, 2, 4 times in
  trials 0, 1, 2, ... (cyclically): the trip count gets that value and the condition is true
  (false in the 0 trial when the trip count is not an input).
- Values are signed where the type is: integers in [-10, 10] (unsigned in [0, 20]), floats from a
  normal distribution of scale 3, complex from two of those, strings of 0 to 5 characters.
- Integer inputs that are positions, split sizes or gather indices are kept valid (see
  `seqlower.verification.constraints`).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_DIM",
    "LOOP_ITERATIONS",
    "SEQUENCE_LENGTHS",
    "draw_tensor",
    "generate_inputs",
    "plan_trial",
]

from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from seqlower.errors import ModelInputError
from seqlower.verification.constraints import (
    Constraint,
    Fixed,
    IntRange,
    SplitSizes,
    TrialShapes,
    find_constraints,
)
from seqlower.verification.signature import InputSpec, feedable_inputs
from seqlower.verification.values import Feeds

DEFAULT_DIM = 3
"""Size of an unnamed dimension, and the length of an input of unknown rank."""

SEQUENCE_LENGTHS = (3, 1, 0)
"""Length of every sequence input in trials 0, 1, 2 (cyclically after that)."""

LOOP_ITERATIONS = (3, 1, 0, 5, 2, 4)
"""Iterations of a Loop whose trip count is an input, in trials 0, 1, 2, ... (cyclically)."""

_STRING_ALPHABET = "abcxyzABC019 _-"
_SUPPORTED = frozenset(
    {
        ir.DataType.BOOL,
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
        ir.DataType.COMPLEX64,
        ir.DataType.COMPLEX128,
        ir.DataType.STRING,
    }
)


def generate_inputs(
    model: ir.Model,
    *,
    trial: int = 0,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    lengths: Mapping[str, int] | None = None,
) -> Feeds:
    """Values for every input of `model` that has no initializer, for one trial. `lengths`
    fixes the length of some sequence inputs."""
    specs = feedable_inputs(model)
    plan = plan_trial(specs, trial=trial, dims=dims, lengths=lengths)
    constraints = find_constraints(model.graph, plan)
    rng = np.random.default_rng([seed, trial])
    feeds: Feeds = {}
    for spec in specs:
        shape = plan.shapes[spec.name]
        constraint = constraints.get(spec.name)
        if spec.is_sequence:
            count = plan.lengths[spec.name]
            feeds[spec.name] = [
                draw_tensor(rng, spec.dtype, shape, name=spec.name) for _ in range(count)
            ]
        else:
            feeds[spec.name] = draw_tensor(rng, spec.dtype, shape, constraint, name=spec.name)
    return feeds


def plan_trial(
    specs: list[InputSpec],
    *,
    trial: int = 0,
    dims: Mapping[str, int] | None = None,
    lengths: Mapping[str, int] | None = None,
) -> TrialShapes:
    """Choose the concrete shape of every input and the length of every sequence input
    (`lengths` fixes some, e.g. those a flattened candidate takes as one tensor per element)."""
    chosen = dict(dims or {})
    for name, size in chosen.items():
        if size < 0:
            raise ModelInputError(f"dimension '{name}' has a negative size {size}")
    named = [
        dim for spec in specs for dim in (spec.shape or ()) if isinstance(dim, str) and dim != ""
    ]
    unknown = sorted(set(chosen) - set(named))
    if unknown:
        raise ModelInputError(f"dimension '{unknown[0]}' does not appear in the model's inputs")
    for name in dict.fromkeys(named):
        if name not in chosen:
            chosen[name] = 2 + (len(chosen) + trial) % 3
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.shape is None:
            shapes[spec.name] = (DEFAULT_DIM,)
        else:
            shapes[spec.name] = tuple(_size(dim, chosen) for dim in spec.shape)
    fixed = dict(lengths or {})
    sequence_lengths = {
        spec.name: fixed.get(spec.name, SEQUENCE_LENGTHS[trial % len(SEQUENCE_LENGTHS)])
        for spec in specs
        if spec.is_sequence
    }
    return TrialShapes(
        shapes=shapes,
        lengths=sequence_lengths,
        dims=chosen,
        iterations=LOOP_ITERATIONS[trial % len(LOOP_ITERATIONS)],
    )


def draw_tensor(
    rng: np.random.Generator,
    dtype: ir.DataType,
    shape: tuple[int, ...],
    constraint: Constraint | None = None,
    *,
    name: str = "",
) -> np.ndarray:
    """One random tensor of `dtype` and `shape`, obeying `constraint` when given: always an
    array (0-d for a scalar), never a numpy scalar."""
    return np.asarray(_draw(rng, dtype, shape, constraint, name))


def _draw(
    rng: np.random.Generator,
    dtype: ir.DataType,
    shape: tuple[int, ...],
    constraint: Constraint | None,
    name: str,
) -> np.ndarray:
    if dtype not in _SUPPORTED:
        raise ModelInputError(
            f"input '{name}': cannot generate values of type {dtype.name}; supply them as inputs"
        )
    if isinstance(constraint, Fixed):
        return np.full(shape, constraint.value).astype(dtype.numpy())
    if isinstance(constraint, SplitSizes):
        return _split_sizes(rng, constraint, shape).astype(dtype.numpy())
    if isinstance(constraint, IntRange):
        values = rng.integers(constraint.low, constraint.high, size=shape, endpoint=True)
        return values.astype(dtype.numpy())
    if dtype == ir.DataType.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype == ir.DataType.STRING:
        return _strings(rng, shape)
    if dtype.is_integer():
        low = -10 if dtype.is_signed() else 0
        return rng.integers(low, low + 20, size=shape, endpoint=True).astype(dtype.numpy())
    if dtype in (ir.DataType.COMPLEX64, ir.DataType.COMPLEX128):
        parts = 3.0 * rng.standard_normal(size=(2, *shape))
        complex_values: np.ndarray = parts[0] + 1j * parts[1]
        return complex_values.astype(dtype.numpy())
    return (3.0 * rng.standard_normal(size=shape)).astype(dtype.numpy())


def _size(dim: int | str | None, chosen: Mapping[str, int]) -> int:
    if isinstance(dim, int):
        return dim
    if dim:
        return chosen[dim]
    return DEFAULT_DIM


def _split_sizes(
    rng: np.random.Generator, constraint: SplitSizes, shape: tuple[int, ...]
) -> np.ndarray:
    total = max(constraint.total, 0)
    if len(shape) == 0:
        return np.full((), rng.integers(1, max(total, 1), endpoint=True), dtype=np.int64)
    count = constraint.count if constraint.count is not None else shape[0]
    if count <= 0:
        return np.zeros((0,), dtype=np.int64)
    # Cut [0, total] at count-1 sorted points: non-negative sizes that sum to total. When there
    # is room, cuts are distinct so that every chunk is non-empty.
    if count - 1 <= total - 1:
        cuts = np.sort(rng.choice(np.arange(1, total), size=count - 1, replace=False))
    else:
        cuts = np.sort(rng.integers(0, total, size=count - 1, endpoint=True))
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


def _strings(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    lengths = rng.integers(0, 5, size=size, endpoint=True)
    letters = len(_STRING_ALPHABET)
    words = [
        "".join(_STRING_ALPHABET[i] for i in rng.integers(0, letters, size=int(n))) for n in lengths
    ]
    return np.array(words, dtype=object).reshape(shape)
