"""`seqlower.analysis.lower_bounds`: the least value an integer is proved to take, from how it
is made (constants, a Loop's iteration number, dims, arithmetic that cannot wrap around)."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from support import parse

from seqlower.analysis.lower_bounds import lower_bound
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import subgraphs

# the value `v` of a Loop body, i its iteration number, x of a run-time length
BODY = """g (float[N] x, int64 n, int64 q) => (int64[?] vs) {{
    t = Constant<value = bool {{1}}>()
    vs = Loop(n, t) <body = body (int64 i, bool c) => (bool c2, int64 v) {{
        c2 = Identity(c)
        one = Constant<value = int64 {{1}}>()
        four = Constant<value = int64 {{4}}>()
        big = Constant<value = int64 {{9223372036854775807}}>()
        zero = Constant<value = int64 {{0}}>()
        e = Constant<value = int64[0] {{}}>()
        {lines}
    }}>
}}"""


def bound_of(lines: str) -> int | None:
    inferred = onnx.shape_inference.infer_shapes(parse(BODY.format(lines=lines)), strict_mode=True)
    model = ir.serde.deserialize_model(inferred)
    owners = {id(g): node for node in model.graph.all_nodes() for g in subgraphs(node)}
    (loop,) = [node for node in model.graph if node.op_type == "Loop"]
    body = loop.attributes["body"].as_graph()
    value = next(v for v in body.outputs if v.name == "v")
    return lower_bound(value, StaticValues(), lambda g: owners.get(id(g)))


@pytest.mark.parametrize(
    ("lines", "bound"),
    [
        ("v = Identity(i)", 0),  # an iteration number counts from 0
        ("v = Add(i, one)", 1),
        ("m = Add(i, one)\n v = Min(m, four)", 1),  # LMS: min(step + 1, order) coefficients
        ("v = Max(i, four)", 4),
        ("v = Max(q, one)", 1),  # at least the bound known, whatever q is
        ("m = Sub(i, one)\n v = Max(m, zero)", 0),
        ("r = Range(zero, four, one)\n v = Size(r)", 4),
        # the length of Range(0, min(i + 1, 4)): a Gather at those positions has as many rows
        (
            "m = Add(i, one)\n l = Min(m, four)\n r = Range(zero, l, one)\n"
            " g = Gather(x, r)\n s = Shape(g)\n v = Gather(s, zero)",
            1,
        ),
        ("m = Add(i, one)\n r = Range(zero, m, one)\n s = Shape(r)\n v = Reshape(s, e)", 1),
        ("m = Add(i, one)\n w = Cast<to = 6>(m)\n v = Cast<to = 7>(w)", None),  # int32 may wrap
        ("m = Add(i, one)\n w = Cast<to = 6>(one)\n u = Cast<to = 7>(w)\n v = Add(m, u)", 2),
        ("m = Add(i, one)\n u = Unsqueeze(m, zero)\n v = Reshape(u, e)", 1),
    ],
)
def test_proved_bounds(lines, bound):
    assert bound_of(lines) == bound


@pytest.mark.parametrize(
    ("lines", "bound"),
    [
        ("v = Identity(q)", None),  # an input: anything
        ("v = Sub(i, one)", -1),  # -1 in the first iteration: no more than that
        ("m = Max(i, big)\n v = Add(m, one)", None),  # may wrap around past the largest int64
        ("v = Add(i, q)", None),  # q unbounded
        ("m = Min(i, q)\n v = Add(m, one)", None),  # q may be negative
        ("r = Range(one, q, one)\n v = Size(r)", 0),  # not a Range from 0 by 1: a size, >= 0
        ("v = Mul(i, four)", None),  # not an operator walked
    ],
)
def test_no_bound_beyond_what_is_proved(lines, bound):
    assert bound_of(lines) == bound


def test_the_iteration_number_of_a_loop_only():
    """The first input of an If's branch or of the main graph is no iteration number."""
    text = """g (int64 n) => (int64 v) {
        v = Identity(n)
    }"""
    model = ir.serde.deserialize_model(parse(text))
    (value,) = model.graph.outputs
    assert lower_bound(value, StaticValues(), lambda g: None) is None


def test_an_operand_shared_by_every_operator_is_walked_once_per_depth(monkeypatch):
    # v = Max(a20, a20) with a_k+1 = Max(a_k, a_k): 2^20 paths to the iteration number, each
    # walked once per depth at most
    from seqlower.analysis import lower_bounds

    calls = []
    walk = lower_bounds._Bounds._interval

    def counted(self, value, depth):  # type: ignore[no-untyped-def]
        calls.append(value)
        return walk(self, value, depth)

    monkeypatch.setattr(lower_bounds._Bounds, "_interval", counted)
    lines = ["a0 = Add(i, one)"]
    lines += [f"a{k + 1} = Max(a{k}, a{k})" for k in range(20)]
    lines.append("v = Max(a20, a20)")
    assert bound_of("\n ".join(lines)) == 1
    assert len(calls) <= 23 * 2  # each value at one depth here: 22 values, the constant one
