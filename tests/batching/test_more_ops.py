"""Batching rules in their less common forms: per-element indices, both operands batched,
implicit Einsum outputs, allowzero, dynamic element shapes read through Shape."""

from __future__ import annotations

import numpy as np
import pytest
from support import parse

from batching.helpers import assert_batched, floats


def _model(body: str, inputs: str, outputs: str, maps: str) -> object:
    """A graph whose text is given in full around one SequenceMap."""
    return parse(f"g ({inputs}) => ({outputs}) {{ {maps.replace('BODY', body)} }}")


ONE_MAP = """
    seq_in = SplitToSequence<axis=0, keepdims=0>(x)
    map_out = SequenceMap<body = BODY>(seq_in{extras})
    y = ConcatFromSequence<axis=0, new_axis=1>(map_out)
"""


def _one(body: str, x: str, y: str, extras: str = "", names: str = "") -> object:
    graph_inputs = ", ".join(p for p in (x, extras) if p)
    return _model(body, graph_inputs, y, ONE_MAP.replace("{extras}", names))


CASES = {
    "gather_unbatched_data_batched_indices": (
        """b (int64[3] e, float[4,5] u) => (float[4,3] o) { o = Gather<axis = -1>(u, e) }""",
        "int64[N,3] x",
        "float[N,4,3] y",
        "float[4,5] u",
        ", u",
        lambda n: {
            "x": np.random.default_rng(0).integers(-5, 5, (n, 3)),
            "u": floats(4, 5),
        },
    ),
    "gather_nd_batch_dims": (
        """b (float[2,4,3] e) => (float[2,3] o) {
            i = Constant<value = int64[2,1] {1, 3}>()
            o = GatherND<batch_dims = 1>(e, i)
        }""",
        "float[N,2,4,3] x",
        "float[N,2,3] y",
        "",
        "",
        lambda n: {"x": floats(n, 2, 4, 3)},
    ),
    "einsum_implicit_ellipsis_two_batched": (
        """b (float[2,4,3] e) => (float[2,4,4] o) {
            t = Identity(e)
            o = Einsum<equation = "...ij,...kj">(e, t)
        }""",
        "float[N,2,4,3] x",
        "float[N,2,4,4] y",
        "",
        "",
        lambda n: {"x": floats(n, 2, 4, 3)},
    ),
    "prelu_and_where_on_batched_condition": (
        """b (float[4,3] e, float[3] s, float[4,3] u) => (float[4,3] o) {
            p = PRelu(e, s)
            z = Constant<value = float {0}>()
            c = Less(e, z)
            o = Where(c, u, p)
        }""",
        "float[N,4,3] x",
        "float[N,4,3] y",
        "float[3] s, float[4,3] u",
        ", s, u",
        lambda n: {"x": floats(n, 4, 3), "s": floats(3), "u": floats(4, 3)},
    ),
    "matmul_rank3_both_sides": (
        """b (float[2,4,3] e, float[5,2,3,6] w) => (float[5,2,4,6] o) { o = MatMul(e, w) }""",
        "float[N,2,4,3] x",
        "float[N,5,2,4,6] y",
        "float[5,2,3,6] w",
        ", w",
        lambda n: {"x": floats(n, 2, 4, 3), "w": floats(5, 2, 3, 6)},
    ),
    "gemm_with_batched_bias": (
        """b (float[4,3] e, float[3,4] w) => (float[4,4] o) {
            a = Constant<value = int64[1] {0}>()
            c = ReduceSum<keepdims = 0>(e, a)
            d = Concat<axis = 0>(c, c)
            st = Constant<value = int64[1] {0}>()
            en = Constant<value = int64[1] {4}>()
            f = Slice(d, st, en)
            o = Gemm<alpha = 2.0, beta = 0.5>(e, w, f)
        }""",
        "float[N,4,3] x",
        "float[N,4,4] y",
        "float[3,4] w",
        ", w",
        lambda n: {"x": floats(n, 4, 3), "w": floats(3, 4)},
    ),
    "reshape_allowzero_and_expand_shorter_shape": (
        """b (float[4,1] e) => (float[1,4,3] o) {
            t = Constant<value = int64[3] {1, 4, 1}>()
            r = Reshape<allowzero = 1>(e, t)
            s = Constant<value = int64[2] {1, 3}>()
            o = Expand(r, s)
        }""",
        "float[N,4,1] x",
        "float[N,1,4,3] y",
        "",
        "",
        lambda n: {"x": floats(n, 4, 1)},
    ),
    "concat_unbatched_first_split_sizes": (
        """b (float[4,3] e, float[4,2] u) => (float[4,1] o) {
            c = Concat<axis = 1>(u, e)
            sz = Constant<value = int64[2] {4, 1}>()
            p, q = Split<axis = -1>(c, sz)
            o = Identity(q)
        }""",
        "float[N,4,3] x",
        "float[N,4,1] y",
        "float[4,2] u",
        ", u",
        lambda n: {"x": floats(n, 4, 3), "u": floats(4, 2)},
    ),
    "shape_of_a_dynamic_element": (
        """b (float[K,3] e) => (float[K] o) {
            s = Shape<end = 1>(e)
            f = Cast<to = 1>(s)
            a = Constant<value = int64[1] {1}>()
            r = ReduceSum<keepdims = 0>(e, a)
            o = Mul(r, f)
        }""",
        "float[N,K,3] x",
        "float[N,K] y",
        "",
        "",
        lambda n: {"x": floats(n, 2 + n, 3)},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name: str) -> None:
    body, x, y, extras, names, feeds = CASES[name]
    model = _one(body, x, y, extras, names)
    assert_batched(model, [feeds(1), feeds(5)])
