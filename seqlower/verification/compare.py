"""Compare two runtime values: exact for integers, bools and strings; tolerant for floats.

The kind (tensor or sequence), the sequence length, the dtype and the shape must match exactly.
Float values `e` (expected, from the original model) and `a` (actual, from the candidate) match
when `|a - e| <= atol + rtol * |e|` (numpy's `isclose`, relative to the original), with NaN equal
to NaN at the same position and infinities equal only to themselves. Complex numbers compare their
real and imaginary parts as floats.

Default tolerances, per float type (`DEFAULT_TOLERANCES`):

- float16: rtol 1e-3, atol 1e-3. The spacing of float16 numbers is 2**-10 (about 9.8e-4) relative,
  so this allows one rounding step, and absolute noise of that size near zero.
- float32: rtol 1e-5, atol 1e-6. About 80 units in the last place (eps 1.2e-7): enough for a
  rewrite that changes summation order (batching a body into one MatMul), far below a real bug.
- float64: rtol 1e-9, atol 1e-12. The same reasoning with eps 2.2e-16, keeping room to spare.

Overrides (`rtol`, `atol`) apply to every float type; the one not given keeps its default.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TOLERANCES",
    "Comparison",
    "Tolerance",
    "ValueVerdict",
    "compare_values",
    "tolerance_for",
]

import dataclasses
import types
from collections.abc import Iterable, Mapping
from typing import Literal

import numpy as np

from seqlower.verification.values import RuntimeValue, describe_dtype, describe_shape

ValueVerdict = Literal[
    "ok",
    "values differ",
    "shape differs",
    "dtype differs",
    "length differs",
    "kind differs",
]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance for one float type."""

    rtol: float
    atol: float


DEFAULT_TOLERANCES: Mapping[np.dtype, Tolerance] = types.MappingProxyType(
    {
        np.dtype(np.float16): Tolerance(rtol=1e-3, atol=1e-3),
        np.dtype(np.float32): Tolerance(rtol=1e-5, atol=1e-6),
        np.dtype(np.float64): Tolerance(rtol=1e-9, atol=1e-12),
    }
)

_COMPLEX_PARTS = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of comparing two values. Errors are None where they do not apply (strings,
    mismatched shapes); `detail` says where and how the values differ (empty when they match).
    `scale` is the largest finite magnitude of the expected value, for float values (None for
    others): a difference far below it is the size float rounding makes."""

    verdict: ValueVerdict
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    detail: str = ""
    scale: float | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def tolerance_for(
    dtype: np.dtype, rtol: float | None = None, atol: float | None = None
) -> Tolerance | None:
    """The tolerance for values of `dtype`, or None when they must be equal exactly."""
    dtype = np.dtype(_COMPLEX_PARTS.get(np.dtype(dtype), dtype))
    default = DEFAULT_TOLERANCES.get(dtype)
    if default is None:
        return None
    return Tolerance(
        rtol=default.rtol if rtol is None else rtol, atol=default.atol if atol is None else atol
    )


def compare_values(
    expected: RuntimeValue,
    actual: RuntimeValue,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """Compare `actual` (candidate) with `expected` (original)."""
    if isinstance(expected, list) != isinstance(actual, list):
        return Comparison(
            "kind differs",
            detail=f"expected {describe_shape(expected)}, got {describe_shape(actual)}",
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return _compare_sequences(expected, actual, rtol, atol)
    return _compare_tensors(np.asarray(expected), np.asarray(actual), rtol, atol)


def _compare_sequences(
    expected: list[np.ndarray], actual: list[np.ndarray], rtol: float | None, atol: float | None
) -> Comparison:
    if len(expected) != len(actual):
        return Comparison(
            "length differs", detail=f"expected {len(expected)} elements, got {len(actual)}"
        )
    results = [
        _compare_tensors(np.asarray(e), np.asarray(a), rtol, atol)
        for e, a in zip(expected, actual, strict=True)
    ]
    max_abs = _max_or_none(result.max_abs_err for result in results)
    max_rel = _max_or_none(result.max_rel_err for result in results)
    scale = _max_or_none(result.scale for result in results)
    for index, result in enumerate(results):
        if not result.ok:
            detail = f"element {index}: {result.detail}"
            return Comparison(result.verdict, max_abs, max_rel, detail, scale)
    return Comparison("ok", max_abs, max_rel, scale=scale)


def _compare_tensors(
    expected: np.ndarray, actual: np.ndarray, rtol: float | None, atol: float | None
) -> Comparison:
    if describe_dtype(expected) != describe_dtype(actual):
        return Comparison(
            "dtype differs",
            detail=f"expected {describe_dtype(expected)}, got {describe_dtype(actual)}",
        )
    if expected.shape != actual.shape:
        return Comparison(
            "shape differs",
            detail=f"expected {describe_shape(expected)}, got {describe_shape(actual)}",
        )
    if expected.dtype.kind in "UO":
        return _compare_exact(expected.astype(str), actual.astype(str), errors=False)
    tolerance = tolerance_for(expected.dtype, rtol, atol)
    if tolerance is None:
        return _compare_exact(expected, actual, errors=True)
    if expected.dtype.kind == "c":
        expected = np.stack([expected.real, expected.imag], axis=-1)
        actual = np.stack([actual.real, actual.imag], axis=-1)
    return _compare_floats(expected, actual, tolerance)


def _compare_exact(expected: np.ndarray, actual: np.ndarray, *, errors: bool) -> Comparison:
    differ = expected != actual
    max_abs = max_rel = None
    if errors:
        if expected.dtype == np.bool_:
            expected, actual = expected.astype(np.int8), actual.astype(np.int8)
        diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
        max_abs = float(diff.max(initial=0.0))
        max_rel = _max_rel(diff, np.abs(expected.astype(np.float64)))
    if not differ.any():
        return Comparison("ok", max_abs, max_rel)
    return Comparison("values differ", max_abs, max_rel, _where(differ, expected, actual))


def _compare_floats(expected: np.ndarray, actual: np.ndarray, tolerance: Tolerance) -> Comparison:
    e = expected.astype(np.float64)
    a = actual.astype(np.float64)
    e_nan, a_nan = np.isnan(e), np.isnan(a)
    finite = np.isfinite(e) & np.isfinite(a)
    special_bad = (e_nan != a_nan) | (~finite & ~e_nan & ~a_nan & (e != a))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(e - a), 0.0)
    close = diff <= tolerance.atol + tolerance.rtol * np.abs(np.where(finite, e, 0.0))
    bad = special_bad | ~close
    max_abs = float(diff.max(initial=0.0))
    magnitude = np.abs(np.where(finite, e, 0.0))
    max_rel = _max_rel(diff, magnitude)
    scale = float(magnitude.max(initial=0.0))
    if special_bad.any():
        max_abs = max_rel = float("inf")
    if not bad.any():
        return Comparison("ok", max_abs, max_rel, scale=scale)
    detail = _where(bad, expected, actual)
    detail += f" (rtol={tolerance.rtol:g}, atol={tolerance.atol:g})"
    return Comparison("values differ", max_abs, max_rel, detail, scale)


def _max_rel(diff: np.ndarray, magnitude: np.ndarray) -> float:
    """Largest |a - e| / |e| over the positions where e is not zero."""
    nonzero = magnitude > 0
    if not nonzero.any():
        return 0.0
    return float((diff[nonzero] / magnitude[nonzero]).max())


def _where(bad: np.ndarray, expected: np.ndarray, actual: np.ndarray) -> str:
    count = int(bad.sum())
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    at = list(first) if first else "[]"
    return (
        f"{count} of {bad.size} elements differ, first at {at}: "
        f"expected {_scalar(expected[first])}, got {_scalar(actual[first])}"
    )


def _scalar(value: object) -> str:
    """numpy's shortest form for numbers (`0.37719065` for a float32), quotes for strings."""
    return repr(str(value)) if isinstance(value, str) else str(value)


def _max_or_none(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None
