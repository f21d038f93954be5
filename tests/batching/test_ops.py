"""Every batching rule, one small body each: the map is batched (no Loop, no sequence op) and
onnxruntime computes the same as on the original, for a dynamic N (1 and 5) and a static N."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support import lower_and_compare

from batching.helpers import assert_batched, floats, mapped, refusal
from seqlower import runtime_quirks


@dataclasses.dataclass(frozen=True)
class Case:
    body: str  # the body graph; its input is the element e
    element: str  # element shape, e.g. "4,3"
    out: str  # element shape of the output
    extras: tuple[tuple[str, np.ndarray], ...] = ()  # ("float[3] b", value)
    opset: int = 18


def _ints(*shape: int, high: int = 3) -> np.ndarray:
    return np.random.default_rng(1).integers(0, high, shape).astype(np.int64)


W35, B5 = floats(3, 5), floats(5)
CASES = {
    # -- unary and elementwise ------------------------------------------------------------
    "unary_chain": Case(
        """b (float[4,3] e) => (float[4,3] o) {
            lo = Constant<value = float {-0.5}>()
            hi = Constant<value = float {0.5}>()
            ng = Neg(e)
            ex = Exp(ng)
            c = Clip(ex, lo, hi)
            i = Cast<to = 7>(e)
            f = Cast<to = 1>(i)
            d = Sub(c, f)
            o = LeakyRelu<alpha = 0.2>(d)
        }""",
        "4,3",
        "4,3",
    ),
    "broadcast_lower_rank_extra": Case(
        "b (float[4,3] e, float[3] v) => (float[4,3] o) { o = Add(e, v) }",
        "4,3",
        "4,3",
        (("float[3] v", floats(3)),),
    ),
    "broadcast_higher_rank_extra_first": Case(
        "b (float[4,3] e, float[2,4,3] u) => (float[2,4,3] o) { o = Sub(u, e) }",
        "4,3",
        "2,4,3",
        (("float[2,4,3] u", floats(2, 4, 3)),),
    ),
    "broadcast_between_batched_ranks": Case(
        """b (float[4,3] e) => (float[1,4,3] o) {
            a = Constant<value = int64[1] {0}>()
            r = ReduceSum<keepdims = 0>(e, a)
            t = Unsqueeze(e, a)
            o = Mul(r, t)
        }""",
        "4,3",
        "1,4,3",
    ),
    "variadic_and_where": Case(
        """b (float[4,3] e, float[3] v) => (float[4,3] o) {
            z = Constant<value = float {0}>()
            s = Sum(e, v, e)
            g = Greater(e, z)
            mx = Max(e, z, v)
            o = Where(g, s, mx)
        }""",
        "4,3",
        "4,3",
        (("float[3] v", floats(3)),),
    ),
    # -- MatMul and Gemm ---------------------------------------------------------------------
    "matmul_matrix_by_weight": Case(
        "b (float[4,3] e, float[3,5] w) => (float[4,5] o) { o = MatMul(e, w) }",
        "4,3",
        "4,5",
        (("float[3,5] w", W35),),
    ),
    "matmul_vector_by_weight": Case(
        "b (float[3] e, float[3,5] w) => (float[5] o) { o = MatMul(e, w) }",
        "3",
        "5",
        (("float[3,5] w", W35),),
    ),
    "matmul_vector_by_batched_weights": Case(
        "b (float[3] e, float[2,3,5] w) => (float[2,5] o) { o = MatMul(e, w) }",
        "3",
        "2,5",
        (("float[2,3,5] w", floats(2, 3, 5)),),
    ),
    "matmul_matrix_by_batched_weights": Case(
        "b (float[4,3] e, float[2,3,5] w) => (float[2,4,5] o) { o = MatMul(e, w) }",
        "4,3",
        "2,4,5",
        (("float[2,3,5] w", floats(2, 3, 5)),),
    ),
    "matmul_unbatched_left": Case(
        "b (float[4,3] e, float[2,5,4] u) => (float[2,5,3] o) { o = MatMul(u, e) }",
        "4,3",
        "2,5,3",
        (("float[2,5,4] u", floats(2, 5, 4)),),
    ),
    "matmul_unbatched_left_vector": Case(
        "b (float[4,3] e, float[4] u) => (float[3] o) { o = MatMul(u, e) }",
        "4,3",
        "3",
        (("float[4] u", floats(4)),),
    ),
    "matmul_batched_right_vector": Case(
        "b (float[4] e, float[2,5,4] u) => (float[2,5] o) { o = MatMul(u, e) }",
        "4",
        "2,5",
        (("float[2,5,4] u", floats(2, 5, 4)),),
    ),
    "matmul_both_batched": Case(
        """b (float[4,3] e) => (float[4,4] o) {
            t = Transpose<perm = [1, 0]>(e)
            o = MatMul(e, t)
        }""",
        "4,3",
        "4,4",
    ),
    "matmul_both_batched_vectors": Case(
        """b (float[4,3] e) => (float o) {
            i = Constant<value = int64 {1}>()
            r = Gather(e, i)
            o = MatMul(r, r)
        }""",
        "4,3",
        "",
    ),
    # `x[b][idx[b]]`: each element's rows at its own indices (GatherND, batch_dims=1)
    "gather_own_rows": Case(
        """b (float[4,3] e) => (float[4,3] o) {
            i = ArgMax<axis = 1, keepdims = 0>(e)
            o = Gather(e, i)
        }""",
        "4,3",
        "4,3",
    ),
    "gather_own_rows_negative_int32": Case(  # indices of rank 2, counted from the end
        """b (float[4,3] e) => (float[2,2,3] o) {
            i = ArgMax<axis = 1, keepdims = 0>(e)
            four = Constant<value = int64 {4}>()
            n = Sub(i, four)
            c = Cast<to = 6>(n)
            two = Constant<value = int64[2] {2, 2}>()
            m = Reshape(c, two)
            o = Gather(e, m)
        }""",
        "4,3",
        "2,2,3",
    ),
    "gemm_trans_b_alpha_beta": Case(
        """b (float[4,3] e, float[5,3] w, float[5] c) => (float[4,5] o) {
            o = Gemm<transB = 1, alpha = 0.5, beta = 2.0>(e, w, c)
        }""",
        "4,3",
        "4,5",
        (("float[5,3] w", floats(5, 3)), ("float[5] c", B5)),
    ),
    "gemm_trans_a_batched_b": Case(
        """b (float[3,4] e, float[3,4] u) => (float[4,4] o) {
            o = Gemm<transA = 1>(u, e)
        }""",
        "3,4",
        "4,4",
        (("float[3,4] u", floats(3, 4)),),
    ),
    # -- reductions ---------------------------------------------------------------------------
    "reduce_negative_axes_input": Case(
        """b (float[4,3] e) => (float[4] o) {
            a = Constant<value = int64[1] {-1}>()
            o = ReduceSum<keepdims = 0>(e, a)
        }""",
        "4,3",
        "4",
    ),
    "reduce_all_keepdims": Case(
        "b (float[4,3] e) => (float[1,1] o) { o = ReduceMax(e) }", "4,3", "1,1"
    ),
    "reduce_all_no_keepdims_opset17": Case(
        "b (float[4,3] e) => (float o) { o = ReduceMean<keepdims = 0>(e) }", "4,3", "", opset=17
    ),
    "reduce_attr_axes_opset17": Case(
        "b (float[4,3] e) => (float[4,1] o) { o = ReduceL2<axes = [-1]>(e) }",
        "4,3",
        "4,1",
        opset=17,
    ),
    "reduce_sum_input_opset17": Case(
        """b (float[4,3] e) => (float[3] o) {
            a = Constant<value = int64[1] {-2}>()
            o = ReduceSum<keepdims = 0>(e, a)
        }""",
        "4,3",
        "3",
        opset=17,
    ),
    "reduce_noop_with_empty_axes": Case(
        "b (float[4,3] e) => (float[4,3] o) { o = ReduceLogSumExp<noop_with_empty_axes = 1>(e) }",
        "4,3",
        "4,3",
    ),
    "reduce_scalar_element": Case(
        "b (float e) => (float o) { o = ReduceSumSquare<keepdims = 0>(e) }", "", ""
    ),
    "argmax_negative_axis": Case(
        "b (float[4,3] e) => (int64[4] o) { o = ArgMax<axis = -1, keepdims = 0>(e) }",
        "4,3",
        "int64:4",
    ),
    # -- axes ---------------------------------------------------------------------------------
    "softmax_default_axis": Case(
        "b (float[4,3] e) => (float[4,3] o) { o = Softmax(e) }", "4,3", "4,3"
    ),
    "softmax_opset17": Case(
        "b (float[2,4,3] e) => (float[2,4,3] o) { o = Softmax(e) }", "2,4,3", "2,4,3", opset=17
    ),
    "logsoftmax_axis0": Case(
        "b (float[4,3] e) => (float[4,3] o) { o = LogSoftmax<axis = 0>(e) }", "4,3", "4,3"
    ),
    "transpose_default_perm": Case(
        "b (float[2,4,3] e) => (float[3,4,2] o) { o = Transpose(e) }", "2,4,3", "3,4,2"
    ),
    "transpose_perm": Case(
        "b (float[2,4,3] e) => (float[4,3,2] o) { o = Transpose<perm = [1, 2, 0]>(e) }",
        "2,4,3",
        "4,3,2",
    ),
    "reshape_zero_and_minus_one": Case(
        """b (float[2,4,3] e) => (float[2,12] o) {
            t = Constant<value = int64[2] {0, -1}>()
            o = Reshape(e, t)
        }""",
        "2,4,3",
        "2,12",
    ),
    "flatten_axes": Case(
        """b (float[2,4,3] e) => (float[1,24] o0, float[8,3] o1) {
            o0 = Flatten<axis = 0>(e)
            o1 = Flatten<axis = -1>(e)
        }""",
        "2,4,3",
        "1,24;8,3",
    ),
    "squeeze_unsqueeze_negative_axes": Case(
        """b (float[4,1,3] e) => (float[4,3,1] o) {
            a = Constant<value = int64[1] {-2}>()
            s = Squeeze(e, a)
            b = Constant<value = int64[1] {-1}>()
            o = Unsqueeze(s, b)
        }""",
        "4,1,3",
        "4,3,1",
        opset=17,
    ),
    "squeeze_without_axes": Case(
        "b (float[1,4,1,3] e) => (float[4,3] o) { o = Squeeze(e) }", "1,4,1,3", "4,3"
    ),
    "concat_with_unbatched": Case(
        "b (float[4,3] e, float[4,2] u) => (float[4,5] o) { o = Concat<axis = -1>(e, u) }",
        "4,3",
        "4,5",
        (("float[4,2] u", floats(4, 2)),),
    ),
    "slice_negative_axes_steps": Case(
        """b (float[4,6] e) => (float[2,2] o) {
            st = Constant<value = int64[2] {-1, 1}>()
            en = Constant<value = int64[2] {0, 5}>()
            ax = Constant<value = int64[2] {-1, 0}>()
            sp = Constant<value = int64[2] {-2, 2}>()
            o = Slice(e, st, en, ax, sp)
        }""",
        "4,6",
        "2,2",
    ),
    "slice_without_axes": Case(
        """b (float[4,6] e) => (float[2,6] o) {
            st = Constant<value = int64[1] {1}>()
            en = Constant<value = int64[1] {3}>()
            o = Slice(e, st, en)
        }""",
        "4,6",
        "2,6",
    ),
    "gather_negative_axis": Case(
        """b (float[4,6] e) => (float[4,2,2] o) {
            i = Constant<value = int64[2,2] {0, -1, 2, 2}>()
            o = Gather<axis = -1>(e, i)
        }""",
        "4,6",
        "4,2,2",
    ),
    "gather_elements_with_unbatched_indices": Case(
        """b (float[4,3] e) => (float[2,3] o) {
            i = Constant<value = int64[2,3] {0, 1, 2, 3, 0, 1}>()
            o = GatherElements<axis = 0>(e, i)
        }""",
        "4,3",
        "2,3",
    ),
    "split_in_body": Case(
        """b (float[4,6] e) => (float[4,3] o) {
            p, q = Split<axis = -1, num_outputs = 2>(e)
            o = Sub(p, q)
        }""",
        "4,6",
        "4,3",
    ),
    "expand_tile_pad": Case(
        """b (float[4,1] e) => (float[4,5] o0, float[8,3] o1, float[4,3] o2) {
            sh = Constant<value = int64[2] {4, 5}>()
            o0 = Expand(e, sh)
            rp = Constant<value = int64[2] {2, 3}>()
            o1 = Tile(e, rp)
            pd = Constant<value = int64[4] {0, 1, 0, 1}>()
            o2 = Pad(e, pd)
        }""",
        "4,1",
        "4,5;8,3;4,3",
    ),
    "topk_cumsum": Case(
        """b (float[4,6] e) => (float[4,2] v, float[4,6] c) {
            k = Constant<value = int64[1] {2}>()
            v, i = TopK<axis = -1>(e, k)
            a = Constant<value = int32 {-1}>()
            c = CumSum(e, a)
        }""",
        "4,6",
        "4,2;4,6",
    ),
    "layer_norm": Case(
        """b (float[4,6] e, float[6] g) => (float[4,6] o) {
            o = LayerNormalization<axis = -1>(e, g)
        }""",
        "4,6",
        "4,6",
        (("float[6] g", floats(6)),),
    ),
    "einsum": Case(
        """b (float[4,3] e, float[3,5] w) => (float[4,5] o) {
            o = Einsum<equation = "ij,jk">(e, w)
        }""",
        "4,3",
        "4,5",
        (("float[3,5] w", W35),),
    ),
    "shape_size_reshape_from_shape": Case(
        """b (float[4,3] e) => (float[12] o, int64 n, int64[1] d) {
            sh = Shape(e)
            d = Shape<start = -1>(e)
            n = Size(e)
            p = ReduceProd<keepdims = 0>(sh)
            z = Constant<value = int64[1] {0}>()
            t = Unsqueeze(p, z)
            flat = Reshape(e, t)
            nf = Cast<to = 1>(n)
            o = Mul(flat, nf)
        }""",
        "4,3",
        "12;int64:;int64:1",
    ),
    "conv_and_pool_over_unit_batch": Case(
        """b (float[1,2,5,5] e, float[3,2,3,3] w, float[3] c) => (float[1,3,1,1] o) {
            y = Conv<pads = [1, 1, 1, 1]>(e, w, c)
            p = MaxPool<kernel_shape = [2, 2]>(y)
            o = GlobalAveragePool(p)
        }""",
        "1,2,5,5",
        "1,3,1,1",
        (("float[3,2,3,3] w", floats(3, 2, 3, 3)), ("float[3] c", floats(3))),
    ),
    "conv_and_pool_over_element_batch": Case(
        """b (float[2,2,5,5] e, float[3,2,3,3] w, float[3] c) => (float[2,3,2,2] o) {
            y = Conv<pads = [1, 1, 1, 1]>(e, w, c)
            r = Relu(y)
            o = MaxPool<kernel_shape = [2, 2]>(r)
        }""",
        "2,2,5,5",
        "2,3,2,2",
        (("float[3,2,3,3] w", floats(3, 2, 3, 3)), ("float[3] c", floats(3))),
    ),
}


def _model_and_feeds(case: Case, n: str):
    element = [int(d) for d in case.element.split(",") if d]
    x_shape = ",".join([n, *case.element.split(",")]) if element else n
    ys = []
    for index, out in enumerate(case.out.split(";")):
        dtype, _, dims = out.rpartition(":")
        shape = ",".join([n, *dims.split(",")]) if dims else n
        ys.append(f"{dtype or 'float'}[{shape}] y{index}")
    extras = ", ".join(spec for spec, _ in case.extras)
    model = mapped(case.body, f"float[{x_shape}] x", ys, extras=extras, opset=case.opset)
    feeds = []
    for size in (1, 5) if n == "N" else (int(n),):
        feed = {"x": floats(size, *element)}
        feed.update({spec.split()[-1]: value for spec, value in case.extras})
        feeds.append(feed)
    return model, feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_length(name: str) -> None:
    if name == "reduce_noop_with_empty_axes" and runtime_quirks.holds("reduce-noop-empty-axes"):
        pytest.skip(
            f"onnxruntime {runtime_quirks.onnxruntime_version()} fails ReduceLogSumExp with "
            "noop_with_empty_axes=1 in the original (quirk reduce-noop-empty-axes)"
        )
    model, feeds = _model_and_feeds(CASES[name], "N")
    assert_batched(model, feeds)


@pytest.mark.parametrize(
    "name",
    [
        "unary_chain",
        "matmul_vector_by_weight",
        "reduce_scalar_element",
        "conv_and_pool_over_element_batch",
        "shape_size_reshape_from_shape",
        "squeeze_unsqueeze_negative_axes",
    ],
)
def test_static_length(name: str) -> None:
    model, feeds = _model_and_feeds(CASES[name], "5")
    assert_batched(model, feeds)


def test_an_element_batch_of_any_size_is_merged_with_the_stack_s():
    """Elements [B, C, H, W] with B unknown: [N, B, ...] is computed as [N * B, ...] and split
    back, exact for every B (0 included, where a Reshape to -1 could not say N * B)."""
    body = """b (float[B,2,H,W] e, float[3,2,3,3] w, float[3] s, float[3] t) => (float[B,3,H,W] o) {
        y = Conv<pads = [1, 1, 1, 1]>(e, w)
        o = InstanceNormalization(y, s, t)
    }"""
    extras = "float[3,2,3,3] w, float[3] s, float[3] t"
    model = mapped(body, "float[N,B,2,H,W] x", ["float[N,B,3,H,W] y0"], extras=extras)
    weights = {"w": floats(3, 2, 3, 3), "s": floats(3), "t": floats(3)}
    feeds = [
        {"x": floats(*shape), **weights}
        for shape in ((3, 2, 2, 4, 5), (1, 1, 2, 3, 3), (2, 0, 2, 4, 4), (4, 3, 2, 1, 6))
    ]
    lowered = assert_batched(model, feeds)
    assert [n.op_type for n in lowered.graph.node].count("Conv") == 1


@pytest.mark.parametrize("batch", [1, 2])
def test_pooling_indices_are_refused(batch: int):
    """MaxPool's indices count positions across the whole batch: merged with the stack's axis,
    they would count across every element's images, so the map is not batched (an indices
    output that is the body's own output was batched: wrong indices from the second element)."""
    body = f"""b (float[{batch},2,4,4] e) => (int64[{batch},2,2,2] o) {{
        p, o = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(e)
    }}"""
    model = mapped(body, f"float[N,{batch},2,4,4] x", [f"int64[N,{batch},2,2,2] y0"])
    assert "indices count positions across the batch" in refusal(model)
    lower_and_compare(model, {"x": floats(3, batch, 2, 4, 4)})
