"""`seqlower.analysis.symbolic`: linear forms over symbols, and what can be proved about them."""

from __future__ import annotations

import pytest

from seqlower.analysis.symbolic import (
    Expr,
    add,
    at_least,
    floordiv,
    mul,
    sub,
    symbol,
    truncdiv,
)

N = symbol(("param", "N"))
ITER = symbol(("iter",))


def test_equal_terms_cancel_to_an_int():
    assert sub(add(ITER, 1), ITER) == 1
    assert sub(add(N, N), mul(N, 2)) == 0
    assert isinstance(add(N, 1), Expr)


def test_division_is_exact_only_when_every_coefficient_divides():
    assert floordiv(add(mul(N, 2), 2), 2) == add(N, 1)
    assert floordiv(add(N, 0), 1) == N
    odd = floordiv(add(N, 1), 2)
    assert isinstance(odd, Expr) and odd.terms[0][0][0] == "div"  # a new symbol


@pytest.mark.parametrize(("a", "b", "want"), [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3)])
def test_integer_division_rounds_toward_zero_as_onnx_div(a, b, want):
    assert truncdiv(a, b) == want


def test_none_is_an_unknown_size_that_absorbs_everything():
    assert add(None, 1) is None and mul(N, None) is None and floordiv(None, 2) is None
    assert not at_least(None, 0, {})


def test_bounds_prove_a_slice_stays_inside_its_dim():
    bounds = {("iter",): (0, sub(N, 1))}  # 0 <= i <= N - 1
    assert at_least(ITER, 0, bounds)
    assert at_least(sub(N, add(ITER, 1)), 0, bounds)  # i + 1 <= N
    assert not at_least(sub(N, add(ITER, 2)), 0, bounds)  # i + 2 <= N is not proved
    assert not at_least(ITER, 0, {})  # an unbounded symbol may be negative
    assert at_least(add(N, 3), 3, {})  # a size is >= 0


def test_a_quotient_of_a_size_is_at_most_the_size_over_the_divisor():
    """`n - 2 * (n // 2) >= 0`: the last of `n // 2` slices of two ends within n."""
    half = floordiv(N, 2)
    bounds = {("iter",): (0, sub(half, 1))}  # i in range(n // 2)
    assert at_least(sub(N, mul(half, 2)), 0, {})
    assert at_least(sub(N, add(mul(ITER, 2), 2)), 0, bounds)  # 2*i + 2 <= n
    assert not at_least(sub(N, add(mul(ITER, 2), 3)), 0, bounds)  # 2*i + 3 may pass n
    # a coefficient the divisor does not divide, or a dividend that may be negative: no proof
    assert not at_least(sub(N, mul(half, 3)), 0, {})
    signed = symbol(("value", 1, 0))
    assert not at_least(sub(signed, mul(floordiv(signed, 2), 2)), 0, {})
