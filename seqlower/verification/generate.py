"""Inputs for a model, reproducible from a seed and a trial number, that explore its corners.

Trial `t` of seed `s` always draws from `numpy.random.default_rng([s, t])` and follows the plan of
`seqlower.verification.explore` for trial `t`, so a trial does not depend on how many trials run.
Per trial:

- Symbolic dimensions are bound once for all inputs: the same name gets the same size. A size from
  `dims` wins (and a size `pinned` because the candidate fixes it). In trials 0-2 the other names
  get 2, 3 or 4 (varying with the trial and the name) and unnamed dims 3; later trials give every
  dim the plan's size (0, 1, 2, 3, 4, 5 or 8), or in a mixed plan a different size per name. A
  size is lowered when an input would exceed `MAX_ELEMENTS` elements.
- A sequence input has the plan's length (3, 1, 0 in trials 0-2); every element has the same
  shape and is an array of the declared element type and rank (a 0-d array for a scalar element,
  never a numpy scalar, which onnxruntime refuses inside a sequence).
- A Loop whose trip count or condition is a graph input runs its body the plan's number of times
  (3, 1, 0 in trials 0-2, then 0 to 8): the trip count gets that value and the condition is true
  (false in a 0 trial when the trip count is not an input).
- Values follow the plan's profile. "typical": integers in [-10, 10] (unsigned in [0, 20]),
  floats from a normal distribution of scale 3, complex from two of those, strings of 0 to 5
  characters. "zeros": half the elements exactly 0 (or -0.0), the rest small integers, and now
  and then a whole tensor of zeros. "large": magnitudes from 20 to 1000 of either sign.
  "special": a third of the float elements NaN, +Inf, -Inf, a denormal, 0 or -0.0 (and at
  least one NaN and, given two elements, one infinity per tensor). "edge":
  0, +-1, +-2, the trial's sizes and the constants the model compares with and their neighbours.
  "constant": each tensor filled with one of those values.
- Integer inputs that are positions, split sizes or gather indices are kept valid (see
  `seqlower.verification.constraints`); outside the typical profile a position takes the ends
  of its range (-n, -1, 0, n-1) and their neighbours.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_DIM",
    "LOOP_ITERATIONS",
    "MAX_ELEMENTS",
    "SEQUENCE_LENGTHS",
    "EDGE_PLAN",
    "draw_tensor",
    "generate_edge",
    "generate_inputs",
    "plan_trial",
]

import dataclasses
import math
from collections.abc import Mapping, Sequence

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
from seqlower.verification.edges import Edge, TrialView
from seqlower.verification.explore import (
    MIXED_SIZES,
    SCHEDULE,
    Profile,
    TrialPlan,
    compared_numbers,
    scheduled_plan,
)
from seqlower.verification.signature import NUMBER_TYPES, InputSpec, feedable_inputs
from seqlower.verification.values import Feeds

DEFAULT_DIM = 3
"""Size of an unnamed dimension, and the length of an input of unknown rank, in trials 0-2."""

MAX_ELEMENTS = 1 << 20
"""A trial's sizes are lowered (never below 3) until no input has more elements than this."""

MAX_DRAWN_ELEMENTS = 1 << 26
"""No input is drawn with more elements than this (256 MB of float32): a shape the model
declares, or sizes given, beyond it are refused before anything is allocated."""

SEQUENCE_LENGTHS = tuple(plan.length for plan in SCHEDULE)
"""Length of every sequence input in the scheduled trials 0, 1, 2, ..."""

LOOP_ITERATIONS = tuple(plan.iterations for plan in SCHEDULE)
"""Iterations of a Loop whose trip count is an input, in the scheduled trials 0, 1, 2, ..."""

EDGE_PLAN = TrialPlan(3, 3, 3)
"""The plan an edge trial starts from: every free dim 3, sequences of 3, loops of 3, typical
values."""

Pinned = Mapping[tuple[str, int], int]
"""Sizes fixed per (input name, axis): an unnamed dim of the original the candidate fixes."""

_STRING_ALPHABET = "abcxyzABC019 _-"
_SUPPORTED = NUMBER_TYPES | {
    ir.DataType.BOOL,
    ir.DataType.COMPLEX64,
    ir.DataType.COMPLEX128,
    ir.DataType.STRING,
}


def generate_inputs(
    model: ir.Model,
    *,
    trial: int = 0,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    lengths: Mapping[str, int] | None = None,
    plan: TrialPlan | None = None,
    pinned: Pinned | None = None,
    numbers: Sequence[float] | None = None,
    attempt: int = 0,
) -> Feeds:
    """Values for every input of `model` that has no initializer, for one trial. `lengths`
    fixes the length of some sequence inputs; `plan` replaces the trial's scheduled plan;
    `pinned` fixes the size of some unnamed dims; `numbers` are the constants the model
    compares with (found in the model when None); `attempt` > 0 draws other values for the
    same trial (when searching for inputs that cover more)."""
    feeds, _ = _generate(model, trial, seed, dims, lengths, plan, pinned, numbers, attempt)
    return feeds


def generate_edge(
    model: ir.Model,
    edge: Edge,
    *,
    trial: int,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    lengths: Mapping[str, int] | None = None,
    pinned: Pinned | None = None,
    numbers: Sequence[float] | None = None,
) -> Feeds | None:
    """The inputs of one edge trial: typical values (every free dim `EDGE_PLAN.size`, sequences
    and loops of 3, and the edge's own dims) changed by `edge`; None when the edge cannot apply
    to them (see `seqlower.verification.edges`)."""
    given = {**dict(edge.dims), **dict(dims or {})}
    feeds, view = _generate(model, trial, seed, given, lengths, EDGE_PLAN, pinned, numbers, 0)
    return feeds if edge.change(feeds, view) else None


def _generate(
    model: ir.Model,
    trial: int,
    seed: int,
    dims: Mapping[str, int] | None,
    lengths: Mapping[str, int] | None,
    plan: TrialPlan | None,
    pinned: Pinned | None,
    numbers: Sequence[float] | None,
    attempt: int,
) -> tuple[Feeds, TrialView]:
    specs = feedable_inputs(model)
    if numbers is None:
        numbers = compared_numbers(model)
    shapes = plan_trial(
        specs, trial=trial, dims=dims, lengths=lengths, plan=plan, pinned=pinned, seed=seed
    )
    shapes = dataclasses.replace(shapes, numbers=tuple(numbers), fill=(plan.fill if plan else None))
    constraints = find_constraints(model.graph, shapes)
    rng = np.random.default_rng([seed, trial] if attempt == 0 else [seed, trial, attempt])
    feeds: Feeds = {}
    for spec in specs:
        shape = shapes.shapes[spec.name]
        constraint = constraints.get(spec.name)
        if spec.is_sequence:
            count = shapes.lengths[spec.name]
            feeds[spec.name] = [
                draw_tensor(rng, spec.dtype, shape, name=spec.name, trial=shapes)
                for _ in range(count)
            ]
        else:
            feeds[spec.name] = draw_tensor(
                rng, spec.dtype, shape, constraint, name=spec.name, trial=shapes
            )
    view = TrialView(
        specs={spec.name: spec for spec in specs},
        shapes=shapes,
        constraints=constraints,
        rng=rng,
        draw=lambda dtype, shape: draw_tensor(rng, dtype, shape),
    )
    return feeds, view


def plan_trial(
    specs: list[InputSpec],
    *,
    trial: int = 0,
    dims: Mapping[str, int] | None = None,
    lengths: Mapping[str, int] | None = None,
    plan: TrialPlan | None = None,
    pinned: Pinned | None = None,
    seed: int = 0,
) -> TrialShapes:
    """Choose the concrete shape of every input and the length of every sequence input
    (`lengths` fixes some, e.g. those a flattened candidate takes as one tensor per element)."""
    plan = plan or scheduled_plan(trial, seed)
    given = dict(dims or {})
    for name, size in given.items():
        if size < 0:
            raise ModelInputError(f"dimension '{name}' has a negative size {size}")
    named = [
        dim for spec in specs for dim in (spec.shape or ()) if isinstance(dim, str) and dim != ""
    ]
    unknown = sorted(set(given) - set(named))
    if unknown:
        raise ModelInputError(f"dimension '{unknown[0]}' does not appear in the model's inputs")
    size = plan.size
    while True:
        chosen, shapes = _shapes(specs, trial, plan, size, given, pinned or {})
        largest = max((int(np.prod(shape, dtype=np.int64)) for shape in shapes.values()), default=0)
        if size is None or size <= DEFAULT_DIM or largest <= MAX_ELEMENTS:
            break
        size -= 1
    _refuse_oversized(specs, shapes, given)
    fixed = dict(lengths or {})
    sequence_lengths = {
        spec.name: fixed.get(spec.name, plan.length) for spec in specs if spec.is_sequence
    }
    return TrialShapes(
        shapes=shapes,
        lengths=sequence_lengths,
        dims=chosen,
        iterations=plan.iterations,
        profile=plan.profile,
    )


def _refuse_oversized(
    specs: list[InputSpec], shapes: Mapping[str, tuple[int, ...]], given: Mapping[str, int]
) -> None:
    for spec in specs:
        shape = shapes[spec.name]
        count = math.prod(shape)
        if count <= MAX_DRAWN_ELEMENTS:
            continue
        sized = sorted({dim for dim in (spec.shape or ()) if isinstance(dim, str) and dim in given})
        hint = "verify with your own inputs (--inputs)"
        if sized:
            hint = f"give {', '.join(sized)} a smaller size with --dim, or {hint}"
        raise ModelInputError(
            f"input '{spec.name}' of shape {list(shape)} needs {count:,} elements in a test run, "
            f"more than verify draws ({MAX_DRAWN_ELEMENTS:,}): {hint}"
        )


def _shapes(
    specs: list[InputSpec],
    trial: int,
    plan: TrialPlan,
    size: int | None,
    given: Mapping[str, int],
    pinned: Pinned,
) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    chosen = dict(given)
    names = [
        dim for spec in specs for dim in (spec.shape or ()) if isinstance(dim, str) and dim != ""
    ]
    for name in dict.fromkeys(names):
        if name in chosen:
            continue
        if size is None:
            chosen[name] = 2 + (len(chosen) + trial) % 3
        elif plan.mixed and plan.sizes:
            chosen[name] = plan.sizes[min(len(chosen), len(plan.sizes) - 1)]
        elif plan.mixed:
            chosen[name] = MIXED_SIZES[(trial + len(chosen)) % len(MIXED_SIZES)]
        else:
            chosen[name] = size
    unnamed = DEFAULT_DIM if size is None else size
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.shape is None:
            shapes[spec.name] = (unnamed,)
            continue
        shapes[spec.name] = tuple(
            pinned.get((spec.name, axis), _size(dim, chosen, unnamed))
            for axis, dim in enumerate(spec.shape)
        )
    return chosen, shapes


def draw_tensor(
    rng: np.random.Generator,
    dtype: ir.DataType,
    shape: tuple[int, ...],
    constraint: Constraint | None = None,
    *,
    name: str = "",
    trial: TrialShapes | None = None,
) -> np.ndarray:
    """One random tensor of `dtype` and `shape`, obeying `constraint` when given, with the
    values of `trial`'s profile (typical without one): always an array (0-d for a scalar),
    never a numpy scalar."""
    return np.asarray(_draw(rng, dtype, shape, constraint, name, trial))


def _draw(
    rng: np.random.Generator,
    dtype: ir.DataType,
    shape: tuple[int, ...],
    constraint: Constraint | None,
    name: str,
    trial: TrialShapes | None,
) -> np.ndarray:
    if dtype not in _SUPPORTED:
        raise ModelInputError(
            f"input '{name}': cannot generate values of type {dtype.name}; supply them as inputs"
        )
    profile: Profile = trial.profile if trial is not None else "typical"
    if isinstance(constraint, Fixed):
        return np.full(shape, constraint.value).astype(dtype.numpy())
    if isinstance(constraint, SplitSizes):
        return _split_sizes(rng, constraint, shape).astype(dtype.numpy())
    if isinstance(constraint, IntRange):
        if profile == "typical" or constraint.low == constraint.high:
            values = rng.integers(constraint.low, constraint.high, size=shape, endpoint=True)
        else:
            values = rng.choice(_range_ends(constraint), size=shape)
        return values.astype(dtype.numpy())
    if dtype == ir.DataType.BOOL:
        return _bools(rng, shape, profile)
    if dtype == ir.DataType.STRING:
        return _strings(rng, shape)
    if dtype.is_integer():
        return _integers(rng, dtype, shape, profile, trial)
    if dtype in (ir.DataType.COMPLEX64, ir.DataType.COMPLEX128):
        if profile == "typical":
            parts = 3.0 * rng.standard_normal(size=(2, *shape))
        else:
            parts = _floats(rng, np.dtype(np.float64), (2, *shape), profile, trial)
        complex_values: np.ndarray = parts[0] + 1j * parts[1]
        return complex_values.astype(dtype.numpy())
    if profile == "typical":
        return (3.0 * rng.standard_normal(size=shape)).astype(dtype.numpy())
    return _floats(rng, np.dtype(dtype.numpy()), shape, profile, trial)


def _range_ends(constraint: IntRange) -> np.ndarray:
    """The ends of a valid range and their neighbours, and -1, 0, 1 when inside it."""
    low, high = constraint.low, constraint.high
    picks = {low, low + 1, high - 1, high, -1, 0, 1}
    return np.array(sorted(value for value in picks if low <= value <= high), dtype=np.int64)


def _edge_numbers(trial: TrialShapes | None, *, integers: bool) -> list[float]:
    """0, +-1, +-2, the trial's sizes (and their negatives) and the compared constants, with
    their neighbours for integers."""
    pool = [0.0, 1.0, -1.0, 2.0, -2.0]
    if trial is not None:
        sizes = {int(size) for size in trial.dims.values()} | {trial.iterations}
        pool.extend(float(size) for size in sorted(sizes))
        pool.extend(-float(size) for size in sorted(sizes) if size)
        for number in trial.numbers:
            if integers:
                base = float(np.floor(number))
                pool.extend((base - 1.0, base, base + 1.0))
            else:
                pool.extend((number, number - 0.5, number + 0.5))
    return list(dict.fromkeys(pool))


def _bools(rng: np.random.Generator, shape: tuple[int, ...], profile: Profile) -> np.ndarray:
    if profile == "zeros":
        return np.zeros(shape, dtype=np.bool_)
    if profile == "large":
        return np.ones(shape, dtype=np.bool_)
    if profile == "constant":
        return np.full(shape, bool(rng.integers(2)), dtype=np.bool_)
    return rng.integers(0, 2, size=shape).astype(np.bool_)


def _integers(
    rng: np.random.Generator,
    dtype: ir.DataType,
    shape: tuple[int, ...],
    profile: Profile,
    trial: TrialShapes | None,
) -> np.ndarray:
    info = np.iinfo(dtype.numpy())
    signed = dtype.is_signed()
    if profile == "typical":
        low = -10 if signed else 0
        values = rng.integers(low, low + 20, size=shape, endpoint=True)
    elif profile == "zeros":
        values = np.where(
            rng.random(shape) < 0.5, 0, rng.integers(-3, 3, size=shape, endpoint=True)
        )
        if rng.random() < 0.3:
            values = np.zeros(shape, dtype=np.int64)
    elif profile == "large":
        top = int(min(1000, info.max))
        values = rng.integers(min(20, top), top, size=shape, endpoint=True)
        values = np.where(rng.random(shape) < 0.5, -values, values)
    else:
        pool = np.array(_edge_numbers(trial, integers=True), dtype=np.float64)
        if profile == "constant":
            fill = trial.fill if trial is not None else None
            values = np.full(shape, rng.choice(pool) if fill is None else np.floor(fill))
        else:
            values = rng.choice(pool, size=shape)
    values = np.asarray(values, dtype=np.float64)
    if not signed:
        values = np.abs(values)
    return np.clip(values, float(info.min), float(info.max)).astype(dtype.numpy())


def _floats(
    rng: np.random.Generator,
    dtype: np.dtype,
    shape: tuple[int, ...],
    profile: Profile,
    trial: TrialShapes | None,
) -> np.ndarray:
    typical = 3.0 * rng.standard_normal(size=shape)
    if profile == "zeros":
        small = rng.integers(-3, 3, size=shape, endpoint=True).astype(np.float64)
        values = np.where(rng.random(shape) < 0.5, 0.0, small)
        values = np.where((values == 0) & (rng.random(shape) < 0.3), -0.0, values)
        if rng.random() < 0.3:
            values = np.zeros(shape)
    elif profile == "large":
        magnitudes = 10.0 ** rng.uniform(np.log10(20.0), 3.0, size=shape)
        signed = np.where(rng.random(shape) < 0.5, -magnitudes, magnitudes)
        values = np.where(rng.random(shape) < 0.8, signed, typical)
    elif profile == "special":
        tiny = float(np.finfo(dtype).smallest_subnormal)
        specials = np.array([np.nan, np.inf, -np.inf, tiny, -tiny, 0.0, -0.0])
        picked = specials[rng.integers(len(specials), size=shape)]
        values = np.where(rng.random(shape) < 0.35, picked, typical)
        flat = values.reshape(-1)  # at least one NaN and, given room, one infinity
        if flat.size and not np.isnan(flat).any():
            flat[rng.integers(flat.size)] = np.nan
        if flat.size > 1 and not np.isinf(flat).any():
            free = np.flatnonzero(~np.isnan(flat))
            if free.size:
                flat[free[rng.integers(free.size)]] = specials[1 + rng.integers(2)]
    else:
        pool = np.array(_edge_numbers(trial, integers=False), dtype=np.float64)
        if profile == "constant":
            fill = trial.fill if trial is not None else None
            values = np.full(shape, rng.choice(pool) if fill is None else fill)
        else:
            values = np.where(rng.random(shape) < 0.7, rng.choice(pool, size=shape), typical)
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(dtype)


def _size(dim: int | str | None, chosen: Mapping[str, int], unnamed: int) -> int:
    if isinstance(dim, int):
        return dim
    if dim:
        return chosen[dim]
    return unnamed


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
