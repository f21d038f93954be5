"""What each trial explores: sizes, loop counts, sequence lengths and the kind of values.

A trial follows a `TrialPlan`. The schedule is fixed for the first `len(SCHEDULE)` trials, so that
a short run already covers the corners; later trials draw a plan at random from the same spreads
(reproducible from the seed and the trial number):

    trial  sizes        loops  lengths  values
    0-2    2-4 per dim  3 1 0  3 1 0    typical (normal, scale 3)
    3      5            5      5        typical
    4      0 (empty)    0      0        typical
    5      1            1      1        edge values
    6      8            8      8        typical
    7      3            2      2        exact zeros
    8      4            4      4        large magnitudes (20 to 1000)
    9      2            3      3        NaN, +-Inf, denormals, -0.0
    10     5, mixed     6      5        edge values
    11     3, mixed     8      2        large magnitudes
    12     8            5      8        NaN, +-Inf, denormals, -0.0
    13     2, mixed     1      3        exact zeros
    14     0            2      1        edge values
    15     4            7      4        one constant per tensor

"sizes" is the size of every symbolic dimension (and of every unnamed one); "mixed" gives each
named dimension a different size from the spread, so that a rewrite that confuses two dims shows.
Edge values are 0, +-1, +-2, the trial's sizes and, for integers, every constant the model
compares a value with, and its neighbours (`compared_numbers`).
"""

from __future__ import annotations

__all__ = [
    "MIXED_SIZES",
    "PROFILE_WORDS",
    "SCHEDULE",
    "SIZES",
    "Profile",
    "TrialPlan",
    "compared_numbers",
    "neighbours",
    "random_plan",
    "scheduled_plan",
]

import dataclasses
from typing import Literal

import numpy as np
import onnx_ir as ir

Profile = Literal["typical", "zeros", "large", "special", "edge", "constant"]
"""The kind of values a trial draws (see `seqlower.verification.generate`)."""

SIZES = (0, 1, 2, 3, 4, 5, 8)
"""The sizes of dimensions, loop trip counts and sequence lengths that trials explore."""

MIXED_SIZES = (2, 3, 5, 1, 4, 8)
"""In a mixed trial, the k-th named dimension takes `MIXED_SIZES[(trial + k) % 6]`."""

PROFILE_WORDS = {
    "typical": "typical values",
    "zeros": "exact zeros",
    "large": "large magnitudes",
    "special": "NaN/Inf/denormals",
    "edge": "edge values",
    "constant": "constant tensors",
}


@dataclasses.dataclass(frozen=True)
class TrialPlan:
    """What one trial explores. `size` None: the typical sizes (2, 3 or 4, varying per name and
    trial; 3 for an unnamed dim). `iterations`: the trip count of a Loop whose trip count or
    condition is a graph input. `length`: the length of every sequence input. `fill`: with the
    "constant" profile, the value of every element (else one drawn per tensor). `sizes`: in a
    mixed plan, the sizes of the named dims in order (else `MIXED_SIZES` rotated by the trial;
    the last size repeats when there are more names)."""

    size: int | None
    iterations: int
    length: int
    profile: Profile = "typical"
    mixed: bool = False
    fill: float | None = None
    sizes: tuple[int, ...] = ()


SCHEDULE: tuple[TrialPlan, ...] = (
    TrialPlan(None, 3, 3),
    TrialPlan(None, 1, 1),
    TrialPlan(None, 0, 0),
    TrialPlan(5, 5, 5),
    TrialPlan(0, 0, 0),
    TrialPlan(1, 1, 1, "edge"),
    TrialPlan(8, 8, 8),
    TrialPlan(3, 2, 2, "zeros"),
    TrialPlan(4, 4, 4, "large"),
    TrialPlan(2, 3, 3, "special"),
    TrialPlan(5, 6, 5, "edge", mixed=True),
    TrialPlan(3, 8, 2, "large", mixed=True),
    TrialPlan(8, 5, 8, "special"),
    TrialPlan(2, 1, 3, "zeros", mixed=True),
    TrialPlan(0, 2, 1, "edge"),
    TrialPlan(4, 7, 4, "constant"),
)
"""The plans of the first trials; later trials draw theirs with `random_plan`."""

_PROFILES: tuple[Profile, ...] = ("typical", "zeros", "large", "special", "edge", "constant")
_COMPARISONS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
_MAX_NUMBERS = 24


def scheduled_plan(trial: int, seed: int = 0) -> TrialPlan:
    """The plan of trial `trial`: from `SCHEDULE`, then random (from `seed` and `trial`)."""
    if trial < len(SCHEDULE):
        return SCHEDULE[trial]
    return random_plan(np.random.default_rng([seed, trial, 1]))


def random_plan(rng: np.random.Generator) -> TrialPlan:
    """A plan drawn from the spreads: any size, trip count and length of `SIZES`, any profile."""
    mixed = bool(rng.integers(2))
    return TrialPlan(
        size=int(rng.choice(SIZES)),
        iterations=int(rng.choice(SIZES)),
        length=int(rng.choice(SIZES)),
        profile=_PROFILES[int(rng.integers(len(_PROFILES)))],
        mixed=mixed,
        sizes=tuple(int(size) for size in rng.choice(SIZES[1:], size=8)) if mixed else (),
    )


def neighbours(numbers: tuple[float, ...]) -> tuple[float, ...]:
    """Each compared constant, one below it and one above it (for integers, and for floats
    whose comparison `x > c` flips between c and c + 1)."""
    result: dict[float, None] = {}
    for number in numbers:
        for value in (number, number - 1.0, number + 1.0):
            result[value] = None
    return tuple(result)


def compared_numbers(model: ir.Model) -> tuple[float, ...]:
    """The constants (up to 8 elements each) that a comparison anywhere in the model compares a
    value with, in the order met, without repeats: `Less(k, 5)` gives 5."""
    numbers: dict[float, None] = {}
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type not in _COMPARISONS or node.domain not in ("", "ai.onnx"):
            continue
        for value in node.inputs:
            array = _constant(value)
            if array is None or array.size > 8 or array.dtype.kind not in "iuf":
                continue
            for number in array.reshape(-1).tolist():
                if np.isfinite(number):
                    numbers[float(number)] = None
    return tuple(numbers)[:_MAX_NUMBERS]


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if value.const_value is not None and not value.is_graph_input():
        return np.asarray(value.const_value.numpy())
    node = value.producer()
    if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        for name in ("value", "value_int", "value_float", "value_ints", "value_floats"):
            attr = node.attributes.get(name)
            if attr is None or attr.is_ref():
                continue
            if name == "value":
                return np.asarray(attr.as_tensor().numpy())
            return np.asarray(attr.value)
    return None
