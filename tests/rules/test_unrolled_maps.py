"""unrolled-map-batch: a stack of copies of one computation, each reading its chunk of a Split,
is that computation applied once to the whole tensor (a traced `stack([f(t) for t in
x.unbind(a)])`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import unrolled_maps

RNG = np.random.default_rng(11)


def _unrolled(
    copies: list[str],
    *,
    axis: int = 0,
    stack_axis: int = 0,
    shape: str = "3,4",
    out: str = "float[3,4] y",
    squeeze: bool = True,
    sizes: str = "1, 1, 1",
    extra_inputs: str = "",
) -> str:
    """A traced unbind: Split of x into chunks along `axis`, each squeezed (or not), `copies[i]`
    computing r{i} from e{i}, then Unsqueeze + Concat along `stack_axis`."""
    count = len(copies)
    lines = [
        f"sizes = Constant <value = int64[{count}] {{{sizes}}}> ()",
        f"{', '.join(f's{i}' for i in range(count))} = Split <axis = {axis}> (x, sizes)",
    ]
    for i, body in enumerate(copies):
        if squeeze:
            lines.append(f"a{i} = Constant <value = int64[1] {{{axis}}}> ()")
            lines.append(f"e{i} = Squeeze (s{i}, a{i})")
        else:
            lines.append(f"e{i} = Identity (s{i})")
        lines.append(body.format(i=i))
        lines.append(f"b{i} = Constant <value = int64[1] {{{stack_axis}}}> ()")
        lines.append(f"u{i} = Unsqueeze (r{i}, b{i})")
    inputs = ", ".join(f"u{i}" for i in range(count))
    lines.append(f"y = Concat <axis = {stack_axis}> ({inputs})")
    body = "\n  ".join(lines)
    extra = f", {extra_inputs}" if extra_inputs else ""
    return f"agraph (float[{shape}] x{extra}) => ({out}) {{\n  {body}\n}}"


def _x(shape=(3, 4)) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


TIMES_TWO = "t{i} = Constant <value = float {{2}}> ()\nr{i} = Mul (e{i}, t{i})"


def test_a_stack_of_scaled_rows_is_one_multiplication():
    model = parse(_unrolled([TIMES_TWO] * 3))
    lowered, report, _ = lower_and_compare(model, {"x": _x()})
    assert report.rules_fired == {"unrolled-map-batch": 1}
    assert op_counts(lowered) == {"Constant": 1, "Mul": 1}


def test_rows_stacked_on_another_axis_are_transposed_once():
    body = "r{i} = Relu (e{i})"
    model = parse(_unrolled([body] * 3, stack_axis=1, out="float[4,3] y"))
    lowered, _, _ = lower_and_compare(model, {"x": _x()})
    assert op_counts(lowered) == {"Relu": 1, "Transpose": 1}


def test_columns_of_a_matrix_through_a_matmul():
    body = "r{i} = MatMul (e{i}, w)"
    model = parse(
        _unrolled(
            [body] * 4,
            axis=1,
            shape="2,4",
            sizes="1, 1, 1, 1",
            out="float[4,5] y",
            extra_inputs="float[2,5] w",
        )
    )
    feeds = {"x": _x((2, 4)), "w": _x((2, 5))}
    lowered, _, _ = lower_and_compare(model, feeds)
    assert op_counts(lowered)["MatMul"] == 1 and op_counts(lowered)["Split"] == 0


def test_zip_of_two_splits():
    text = _unrolled(["r{i} = Add (e{i}, f{i})"] * 3, extra_inputs="float[3,4] z")
    text = text.replace(
        "y = Concat",
        "y = Concat",
    ).replace(
        "sizes = Constant <value = int64[3] {1, 1, 1}> ()",
        "sizes = Constant <value = int64[3] {1, 1, 1}> ()\n"
        "  g0, g1, g2 = Split <axis = 0> (z, sizes)\n"
        + "\n".join(
            f"  c{i} = Constant <value = int64[1] {{0}}> ()\n  f{i} = Squeeze (g{i}, c{i})"
            for i in range(3)
        ),
    )
    model = parse(text)
    lowered, _, _ = lower_and_compare(model, {"x": _x(), "z": _x()})
    assert op_counts(lowered) == {"Add": 1}


def test_chunks_of_two_are_reshaped_not_squeezed():
    body = "r{i} = ReduceSum <keepdims = 0> (e{i})"
    model = parse(_unrolled([body] * 2, squeeze=False, shape="4,3", sizes="2, 2", out="float[2] y"))
    lowered, report, _ = lower_and_compare(model, {"x": _x((4, 3))})
    assert report.rules_fired.get("unrolled-map-batch") == 1
    assert op_counts(lowered)["Split"] == 0 and op_counts(lowered)["ReduceSum"] == 1


@pytest.mark.parametrize("dtype", ["int64", "double"])
def test_edge_dtypes(dtype):
    body = "r{i} = Neg (e{i})"
    text = _unrolled([body] * 3, out=f"{dtype}[3,4] y").replace("float[3,4] x", f"{dtype}[3,4] x")
    feeds = {
        "x": (RNG.standard_normal((3, 4)) * 10).astype(np.dtype(dtype.replace("double", "float64")))
    }
    lowered, _, _ = lower_and_compare(parse(text), feeds)
    assert op_counts(lowered) == {"Neg": 1}


def test_a_stack_of_the_rows_as_they_are_is_the_tensor():
    model = parse(_unrolled(["r{i} = Identity (e{i})"] * 3))
    lowered, _, _ = lower_and_compare(model, {"x": _x()})
    assert "Split" not in op_counts(lowered) and "Concat" not in op_counts(lowered)


# -- refusals ----------------------------------------------------------------------------------


def _refused(text: str, why: str) -> None:
    """The rule refuses the Concat of `text`, saying `why`; the lowered model keeps it."""
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    concat = next(node for node in model.graph if node.op_type == "Concat")
    ctx = Context(Facts(model), Rewriter(model), Options())
    values = [*model.graph.inputs, *(v for node in model.graph for v in node.outputs)]
    uses = [len(value.uses()) for value in values]
    refusal = unrolled_maps.RULES.rules[0].check(concat, ctx)
    assert isinstance(refusal, Refusal) and why in refusal.reason, refusal
    # the check leaves the model as it was (no use left behind by a trial of the batched form)
    assert [len(value.uses()) for value in values] == uses
    lowered, report = lower(parse(text), target="generic")
    assert "unrolled-map-batch" not in report.rules_fired
    assert op_counts(lowered)["Concat"] == 1


def test_copies_that_differ_are_kept():
    copies = [TIMES_TWO, TIMES_TWO, "r{i} = Relu (e{i})"]
    _refused(_unrolled(copies), "Mul and Relu differ")


def test_copies_scaled_by_different_constants_are_kept():
    copies = [
        TIMES_TWO,
        TIMES_TWO,
        "t{i} = Constant <value = float {{3}}> ()\nr{i} = Mul (e{i}, t{i})",
    ]
    _refused(_unrolled(copies), "the attributes of Constant and Constant differ")


def test_chunks_out_of_order_are_kept():
    text = _unrolled(["r{i} = Relu (e{i})"] * 3).replace("u0, u1, u2", "u1, u0, u2")
    _refused(text, "does not read chunk 1")


def test_a_copy_that_reads_the_first_chunk_too_is_kept():
    """r_i = e_i + e_0: the first copy's own chunk is read by every copy, which is not a map."""
    copies = ["r{i} = Add (e{i}, e0)"] * 3
    model = parse(_unrolled(copies))
    _refused(_unrolled(copies), "reads what the first copy computes")
    # and the model still computes what it did
    lower_and_compare(model, {"x": _x()}, target="generic")


def test_uneven_chunks_are_kept():
    body = "r{i} = ReduceSum <keepdims = 0> (e{i})"
    text = _unrolled([body] * 2, squeeze=False, shape="5,3", sizes="2, 3", out="float[2] y")
    _refused(text, "do not share a shape")


def _per_head(count: int, indices: list[int], dim: int = 3) -> str:
    """Traced `stack([relu(x[:, h]) @ w for h in range(H)], 0)`: each copy reads a column by
    Gather at a constant."""
    reads = [
        [f"i{h} = Constant <value = int64 {{{index}}}> ()", f"g{h} = Gather <axis = 1> (x, i{h})"]
        for h, index in enumerate(indices)
    ]
    return _stacked_heads([], reads, dim, count, "2,5")


def _stacked_heads(
    prelude: list[str], reads: list[list[str]], dim: int, count: int, out: str
) -> str:
    """The graph that stacks `relu(g_h) @ w` for each head h, where `reads[h]` makes `g{h}`
    from x (after the `prelude` lines)."""
    lines = list(prelude)
    for h, read in enumerate(reads):
        lines.extend(read)
        lines.append(f"t{h} = Relu (g{h})")
        lines.append(f"r{h} = MatMul (t{h}, w)")
        lines.append(f"b{h} = Constant <value = int64[1] {{0}}> ()")
        lines.append(f"u{h} = Unsqueeze (r{h}, b{h})")
    inputs = ", ".join(f"u{h}" for h in range(count))
    lines.append(f"y = Concat <axis = 0> ({inputs})")
    body = "\n  ".join(lines)
    return f"agraph (float[2,{dim},4] x, float[4,5] w) => (float[{count},{out}] y) {{\n  {body}\n}}"


def test_rows_read_by_gather_at_constants_are_one_stack():
    model = parse(_per_head(3, [0, 1, 2]))
    feeds = {"x": _x((2, 3, 4)), "w": _x((4, 5))}
    lowered, report, _ = lower_and_compare(model, feeds)
    assert report.rules_fired == {"unrolled-map-batch": 1}
    assert op_counts(lowered)["Gather"] == 0 and op_counts(lowered)["MatMul"] == 1


def test_rows_read_out_of_order_are_kept():
    _refused(_per_head(3, [0, 2, 1]), "does not read row 1")


def test_some_of_the_rows_are_kept():
    """Stacking rows 0 and 1 of three is not the whole tensor."""
    _refused(_per_head(2, [0, 1]), "not all")


def _per_head_sliced(
    bounds: list[tuple[int, int]], dim: int = 3, target: str = "2, 4", out: str = "2,5"
) -> str:
    """`_per_head` with each column read as a Slice of one column along axis 1 (start, end)
    reshaped to `target`, what an unrolled loop makes of `x[:, h:h + 1]` reshaped."""
    prelude = [
        "axis = Constant <value = int64[1] {1}> ()",
        f"shape = Constant <value = int64[{target.count(',') + 1}] {{{target}}}> ()",
    ]
    reads = [
        [
            f"s{h} = Constant <value = int64[1] {{{start}}}> ()",
            f"e{h} = Constant <value = int64[1] {{{end}}}> ()",
            f"p{h} = Slice (x, s{h}, e{h}, axis)",
            f"g{h} = Reshape (p{h}, shape)",
        ]
        for h, (start, end) in enumerate(bounds)
    ]
    return _stacked_heads(prelude, reads, dim, len(bounds), out)


@pytest.mark.parametrize(
    "bounds", [[(0, 1), (1, 2), (2, 3)], [(-3, -2), (-2, -1), (2, 3)], [(0, 1), (-2, 2), (-1, 3)]]
)
def test_rows_read_as_slices_of_one_row_reshaped_are_one_stack(bounds):
    """Negative starts and ends count from the end (`x[:, -3:-2]`)."""
    model = parse(_per_head_sliced(bounds))
    feeds = {"x": _x((2, 3, 4)), "w": _x((4, 5))}
    lowered, report, _ = lower_and_compare(model, feeds)
    assert report.rules_fired == {"unrolled-map-batch": 1}
    counts = op_counts(lowered)
    assert counts.get("Slice", 0) == 0 and counts.get("Reshape", 0) == 0
    assert counts["MatMul"] == 1


def test_rows_read_as_slices_out_of_order_are_kept():
    _refused(_per_head_sliced([(0, 1), (2, 3), (1, 2)]), "does not read row 1")


def test_some_of_the_rows_read_as_slices_are_kept():
    _refused(_per_head_sliced([(0, 1), (1, 2)]), "not all")


def test_slices_of_more_than_one_row_or_reshaped_otherwise_are_not_rows():
    """A slice of two rows, or one reshaped to another shape than the row's, is no row: the
    copies then differ in what they read."""
    two_rows = [(0, 2), (1, 3), (2, 4)]
    _refused(_per_head_sliced(two_rows, dim=4, target="4, 4", out="4,5"), "not copies of one")
    rows = [(0, 1), (1, 2), (2, 3)]
    _refused(_per_head_sliced(rows, target="2, 1, 4", out="2,1,5"), "not copies of one")


def _cat(copies: list[str], sizes: str, shape: str, out: str, axis: int = 1) -> str:
    """Traced `cat([f(c) for c in x.split(k, axis)], axis)`: no Unsqueeze."""
    count = len(copies)
    lines = [
        f"sizes = Constant <value = int64[{count}] {{{sizes}}}> ()",
        f"{', '.join(f'e{i}' for i in range(count))} = Split <axis = {axis}> (x, sizes)",
    ]
    lines += [body.format(i=i) for i, body in enumerate(copies)]
    inputs = ", ".join(f"r{i}" for i in range(count))
    lines.append(f"y = Concat <axis = {axis}> ({inputs})")
    body = "\n  ".join(lines)
    return f"agraph (float[{shape}] x) => ({out}) {{\n  {body}\n}}"


def test_a_cat_of_mapped_chunks_is_one_map():
    body = "t{i} = Constant <value = float {{3}}> ()\nr{i} = Sub (e{i}, t{i})"
    model = parse(_cat([body] * 3, "2, 2, 2", "6,4", "float[6,4] y", axis=0))
    lowered, report, _ = lower_and_compare(model, {"x": _x((6, 4))})
    assert report.rules_fired == {"unrolled-map-batch": 1}
    assert op_counts(lowered)["Split"] == 0 and op_counts(lowered)["Sub"] == 1


def test_a_cat_of_chunk_sums_on_the_first_axis():
    """Each chunk of 2 rows summed to 1 row: the cat has one row per chunk."""
    body = (
        "k{i} = Constant <value = int64[1] {{0}}> ()\nr{i} = ReduceSum <keepdims = 1> (e{i}, k{i})"
    )
    model = parse(_cat([body] * 3, "2, 2, 2", "6,4", "float[3,4] y", axis=0))
    lowered, report, _ = lower_and_compare(model, {"x": _x((6, 4))})
    assert report.rules_fired == {"unrolled-map-batch": 1}
    assert op_counts(lowered)["ReduceSum"] == 1


def test_copies_cheaper_than_their_batched_form_are_kept():
    """Chunks of a middle axis, mapped by one cheap op: stacking them (a Reshape and a
    Transpose), and putting them back, takes as many nodes as the copies."""
    body = "t{i} = Constant <value = float {{3}}> ()\nr{i} = Sub (e{i}, t{i})"
    _refused(_cat([body] * 3, "2, 2, 2", "4,6", "float[4,6] y"), "not fewer than the 5")


def test_a_cat_of_uneven_chunks_is_kept():
    body = "r{i} = Relu (e{i})"
    _refused(_cat([body] * 2, "2, 4", "4,6", "float[4,6] y"), "do not share a shape")


def test_before_opset_14_the_copies_are_kept():
    text = _unrolled([TIMES_TWO] * 3)
    model = parse(text, opset=13)
    lowered, report = lower(model, target="generic")
    assert "unrolled-map-batch" not in report.rules_fired
    assert op_counts(lowered)["Concat"] == 1


# -- a running sum of the copies ---------------------------------------------------------------


def _sum(term: str, count: int = 3, start: str = "zeros", order: str = "acc_first") -> str:
    """Traced `acc = zeros; for p in x.split(2, 1): acc = acc + f(p)`."""
    sizes = ", ".join(["2"] * count)
    lines = [
        f"sizes = Constant <value = int64[{count}] {{{sizes}}}> ()",
        f"{', '.join(f'e{i}' for i in range(count))} = Split <axis = 1> (x, sizes)",
        "zeros = Constant <value = float[2,2] {0, 0, 0, 0}> ()",
        f"acc0 = Identity ({start})",
    ]
    for i in range(count):
        if term:
            lines.append(term.format(i=i))
        read = f"r{i}" if term else f"e{i}"
        pair = f"acc{i}, {read}" if order == "acc_first" else f"{read}, acc{i}"
        lines.append(f"acc{i + 1} = Add ({pair})")
    lines.append(f"y = Identity (acc{count})")
    body = "\n  ".join(lines)
    return f"agraph (float[2,{2 * count}] x, float[2,2] z) => (float[2,2] y) {{\n  {body}\n}}"


@pytest.mark.parametrize("order", ["acc_first", "term_first"])
def test_a_running_sum_over_the_chunks_is_one_reduce_sum(order):
    model = parse(_sum("", order=order))  # the chunks themselves
    feeds = {"x": _x((2, 6)), "z": _x((2, 2))}
    lowered, report, _ = lower_and_compare(model, feeds)
    assert report.rules_fired == {"unrolled-sum-batch": 1}
    ops = op_counts(lowered)
    assert ops["ReduceSum"] == 1 and ops["Split"] == 0 and ops["Add"] == 1
    assert "Transpose" not in ops  # the chunks are summed where they lie


def test_a_running_sum_of_mapped_chunks_from_a_start_value():
    model = parse(_sum("r{i} = Tanh (e{i})", start="z"))
    feeds = {"x": _x((2, 6)), "z": _x((2, 2))}
    lowered, _, _ = lower_and_compare(model, feeds)
    assert op_counts(lowered)["Tanh"] == 1


def test_a_sum_whose_terms_differ_is_kept():
    text = _sum("r{i} = Relu (e{i})").replace("r2 = Relu (e2)", "r2 = Neg (e2)")
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    root = [node for node in model.graph if node.op_type == "Add"][-1]
    ctx = Context(Facts(model), Rewriter(model), Options())
    refusal = unrolled_maps.RULES.rules[1].check(root, ctx)
    assert isinstance(refusal, Refusal) and "not copies of one computation" in refusal.reason
    _, report = lower(parse(text), target="generic")
    assert "unrolled-sum-batch" not in report.rules_fired


# -- the check's build is adopted, not built again ------------------------------------------------


def _rewritten(text: str, adopt: bool) -> bytes:
    """The model after the rule rewrites its Concat once, adopting the form its check built,
    or (`adopt=False`) building it again in place."""
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    concat = next(node for node in model.graph if node.op_type == "Concat")
    ctx = Context(Facts(model), Rewriter(model), Options())
    rule = unrolled_maps.RULES.rules[0]
    found = rule.check(concat, ctx)
    assert not isinstance(found, Refusal) and found.built is not None
    if not adopt:
        unrolled_maps._discard(found.built.builder.graph)
        found = dataclasses.replace(found, built=None)
    rule.rewrite(concat, found, ctx)
    return ir.to_proto(model).SerializeToString()


@pytest.mark.parametrize("squeeze", [True, False])
def test_the_form_the_check_built_is_the_one_built_in_place(squeeze):
    text = _unrolled(["r{i} = Relu (e{i})"] * 3, squeeze=squeeze, stack_axis=1, out="float[4,3] y")
    assert _rewritten(text, adopt=True) == _rewritten(text, adopt=False)


def test_a_scratch_build_is_adopted_with_the_names_of_a_build_in_place():
    def build(builder):
        one = builder.constant(np.array([1], np.int64), "one")
        builder.op("Add", [one, builder.ints([1], "one")])

    def names(model):
        return [(n.name, [v.name for v in n.outputs]) for n in model.graph]

    text = _unrolled(["r{i} = Relu (e{i})"] * 3)
    adopting, in_place = ir.from_proto(parse(text)), ir.from_proto(parse(text))
    scratch = Rewriter.scratch(18)
    build(scratch)
    assert Rewriter(adopting).before(adopting.graph[len(adopting.graph) - 1]).adopt(scratch)
    build(Rewriter(in_place).before(in_place.graph[len(in_place.graph) - 1]))
    assert names(adopting) == names(in_place)
    assert len(scratch.graph) == 0


def test_a_scratch_build_holding_a_subgraph_is_not_adopted():
    model = ir.from_proto(parse(_unrolled(["r{i} = Relu (e{i})"] * 3)))
    anchor = model.graph[len(model.graph) - 1]
    scratch = Rewriter.scratch(18)
    body = ir.Graph([], [], nodes=[], name="body")
    scratch.op("Loop", [None, None], {"body": body})
    nodes = len(model.graph)
    assert not Rewriter(model).before(anchor).adopt(scratch)
    assert len(model.graph) == nodes and len(scratch.graph) == 1
