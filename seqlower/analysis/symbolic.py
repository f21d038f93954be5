"""Integer expressions over symbols: sizes and small integer values known only at run time.

A `Dim` is an int or an `Expr`, a linear form `c + k1*a1 + k2*a2 + ...` over hashable atoms
(`("param", "N")` for a named input dim, `("iter",)` for a Loop's iteration number...). Equal
forms denote equal values, so `(n + 1) - n` is the int 1. A product or quotient that is not
linear becomes a new atom standing for itself: `("mul", a, b)`, `("div", a, b)`.

    n = symbol(("param", "N"))
    sub(add(n, 1), n) == 1
    floordiv(add(n, 0), 1) == n

None stands for an unknown size (a dim that may change between iterations): every operation on
it gives None, and nothing is proved about it.

`Bounds` maps some atoms to an inclusive range `(low, high)` of Dims (the iteration number lies
in `[0, M - 1]`); `at_least(d, k, bounds)` proves `d >= k` by interval arithmetic. Atoms of the
kinds in `SIZE_KINDS` are tensor sizes, so they are known to be >= 0.
"""

from __future__ import annotations

__all__ = [
    "SIZE_KINDS",
    "Bounds",
    "Dim",
    "Expr",
    "add",
    "at_least",
    "atoms",
    "floordiv",
    "truncdiv",
    "mul",
    "neg",
    "sub",
    "symbol",
]

import dataclasses
from collections.abc import Hashable, Iterator, Mapping


@dataclasses.dataclass(frozen=True, repr=False)
class Expr:
    """`const + sum(coefficient * atom)`, with at least one term (else it is an int)."""

    terms: tuple[tuple[Hashable, int], ...]  # sorted by repr of the atom, no zero coefficient
    const: int = 0

    def __repr__(self) -> str:
        """The dataclass's repr, made once: terms are sorted by the repr of their atoms, which
        may hold other Exprs (a product, a quotient), so an uncached repr is rebuilt through
        every level at every sort (it showed in profiles of deep loop analyses)."""
        cached = self.__dict__.get("_repr")
        if cached is None:
            cached = f"{type(self).__qualname__}(terms={self.terms!r}, const={self.const!r})"
            object.__setattr__(self, "_repr", cached)
        return cached


Dim = int | Expr
Bounds = Mapping[Hashable, tuple[Dim, Dim]]
SIZE_KINDS = frozenset({"param", "dim", "carried", "size"})


def _make(terms: Mapping[Hashable, int], const: int) -> Dim:
    kept = tuple(sorted(((a, k) for a, k in terms.items() if k), key=lambda t: repr(t[0])))
    return Expr(kept, const) if kept else const


def _parts(d: Dim) -> tuple[dict[Hashable, int], int]:
    if isinstance(d, int):
        return {}, d
    return dict(d.terms), d.const


def symbol(atom: Hashable) -> Expr:
    return Expr(((atom, 1),))


def add(a: Dim | None, b: Dim | None) -> Dim | None:
    if a is None or b is None:
        return None
    terms, const = _parts(a)
    for atom, k in _parts(b)[0].items():
        terms[atom] = terms.get(atom, 0) + k
    return _make(terms, const + _parts(b)[1])


def neg(a: Dim | None) -> Dim | None:
    return None if a is None else _scale(a, -1)


def sub(a: Dim | None, b: Dim | None) -> Dim | None:
    return add(a, neg(b))


def _scale(a: Dim, k: int) -> Dim:
    terms, const = _parts(a)
    return _make({atom: c * k for atom, c in terms.items()}, const * k)


def mul(a: Dim | None, b: Dim | None) -> Dim | None:
    if a is None or b is None:
        return None
    if isinstance(b, int):
        return _scale(a, b)
    if isinstance(a, int):
        return _scale(b, a)
    return symbol(("mul", *sorted((a, b), key=repr)))


def floordiv(a: Dim | None, b: Dim | None) -> Dim | None:
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError
        return a // b
    if isinstance(b, int) and b > 0:
        terms, const = _parts(a)
        if const % b == 0 and all(k % b == 0 for k in terms.values()):
            return _make({atom: k // b for atom, k in terms.items()}, const // b)
    return symbol(("div", a, b))


def truncdiv(a: Dim | None, b: Dim | None) -> Dim | None:
    """Integer division rounding toward zero (ONNX Div on integers); exact forms as floordiv."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError
        quotient = abs(a) // abs(b)
        return quotient if (a < 0) == (b < 0) else -quotient
    return floordiv(a, b)


def atoms(d: Dim | None) -> Iterator[Hashable]:
    """The atoms `d` is written with (not those inside a product or quotient atom)."""
    if isinstance(d, Expr):
        for atom, _ in d.terms:
            yield atom


def _bound(d: Dim, bounds: Bounds, low: bool) -> Dim:
    """A lower (`low`) or upper bound of `d`: each bounded atom replaced by its range's end."""
    result: Dim = _parts(d)[1]
    for atom, k in _parts(d)[0].items():
        if atom in bounds:
            lo, hi = bounds[atom]
            end = lo if (k > 0) == low else hi
            result = add(result, _scale(end, k))
        else:
            result = add(result, _scale(symbol(atom), k))
    return result


def _quotients_bounded(d: Dim, bounds: Bounds) -> Dim:
    """A lower bound of `d` with each quotient `-m*b * (a // b)` (b > 0, a >= 0) replaced by
    `-m*a`: a quotient of a >= 0 by b > 0, floored or truncated (they agree there), is at most
    a / b. So `n - 2 * (n // 2)` is at least 0: the end of the last of `n // 2` slices of two
    lies within n (Swin's windows, `x[2*i : 2*i + 2]` for i in range(n // 2))."""
    if isinstance(d, int):
        return d
    result: Dim = d.const
    for atom, k in d.terms:
        quotient = isinstance(atom, tuple) and len(atom) == 3 and atom[0] == "div"
        divisor = atom[2] if quotient else None
        if (
            isinstance(divisor, int)
            and divisor > 0
            and k < 0
            and k % divisor == 0
            and at_least(atom[1], 0, bounds)
        ):
            result = add(result, _scale(atom[1], k // divisor))
            continue
        result = add(result, _scale(symbol(atom), k))
    return result


def at_least(d: Dim | None, k: int, bounds: Bounds) -> bool:
    """True when `d >= k` is proved: a lower bound of `d` is an int >= k, or a sum of sizes
    (atoms of `SIZE_KINDS`, positive coefficients) plus a constant >= k."""
    if d is None:
        return False
    lower = _quotients_bounded(_bound(d, bounds, low=True), bounds)
    if isinstance(lower, int):
        return lower >= k
    sizes = all(
        coef > 0 and isinstance(atom, tuple) and atom[:1] and atom[0] in SIZE_KINDS
        for atom, coef in lower.terms
    )
    return sizes and lower.const >= k
