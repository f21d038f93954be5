"""`--target onnxruntime` decides per region (seqlower.regions, seqlower.speed_first): a region
whose lowered form costs more is kept as given, the others are lowered; every other target lowers
everything. Fixtures: tests/fixtures/speed (tools/export_speed_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse, run_ort, sequence_op_counts

from seqlower import regions as regions_module
from seqlower.cost import node_costs, node_costs_both
from seqlower.ops import iter_all_graphs
from seqlower.options import Options
from seqlower.passes import LowerSequencesPass, NormalizePass
from seqlower.regions import find_regions, region_costs, region_costs_each
from seqlower.speed_first import RegionCost, RegionPlan

FIXTURES = Path(__file__).parent / "fixtures" / "speed"


def _data_sets(case: str) -> list[tuple[dict[str, np.ndarray], list[np.ndarray]]]:
    sets = []
    for folder in sorted((FIXTURES / case).glob("test_data_set_*")):
        feeds, outputs = {}, []
        for path in sorted(folder.glob("input_*.pb")):
            tensor = onnx.load_tensor(str(path))
            feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
        for path in sorted(folder.glob("output_*.pb")):
            outputs.append(onnx.numpy_helper.to_array(onnx.load_tensor(str(path))))
        sets.append((feeds, outputs))
    return sets


def _matches_pytorch(case: str, model: onnx.ModelProto) -> None:
    for feeds, want in _data_sets(case):
        for got, expected in zip(run_ort(model, feeds), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


TWO_CHAINS = """g (float[N,3] x, float[4,3] y) => (float[M,3] a, float[4,3] b) {
    two = Constant<value = int64 {2}>()
    s = SplitToSequence<axis = 0>(x, two)
    n = SequenceLength(s)
    last = Constant<value = int64 {-1}>()
    e = SequenceAt(s, last)
    fn = Cast<to = 1>(n)
    a = Mul(e, fn)
    t = SplitToSequence<axis = 0>(y)
    b = ConcatFromSequence<axis = 0>(t)
}"""

LOOP_LIST = """g (float[3] x, int64 m) => (float[?,3] y) {
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        row = Neg(x)
        grown = SequenceInsert(acc, row)
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""


def _typed(text: str) -> ir.Model:
    model = ir.from_proto(parse(text))
    NormalizePass(Options())(model)
    return model


def test_independent_chains_are_two_regions_with_their_private_inputs():
    model = _typed(TWO_CHAINS)
    first, second = find_regions(model)
    assert [n.op_type for n in first.sites] == ["SplitToSequence", "SequenceLength", "SequenceAt"]
    assert [n.op_type for n in second.sites] == ["SplitToSequence", "ConcatFromSequence"]
    # the split size and the position are its private inputs; what reads its tensors is not
    owned = [n.op_type for n in first.nodes]
    assert sorted(owned) == sorted([*(n.op_type for n in first.sites), "Constant", "Constant"])


def test_a_loop_and_the_list_it_builds_are_one_region_with_its_body():
    model = _typed(LOOP_LIST)
    (region,) = find_regions(model)
    assert [n.op_type for n in region.sites] == [
        "SequenceEmpty",
        "Loop",
        "ConcatFromSequence",
        "SequenceInsert",
    ]
    assert {"Neg", "Identity"} <= {n.op_type for n in region.nodes}  # the body's work


def test_region_costs_add_up_to_the_regions_share_of_the_model():
    model = _typed(LOOP_LIST)
    costs = node_costs(model)
    (cost,) = region_costs(model, find_regions(model), costs)
    assert cost == pytest.approx(sum(costs.values()))  # every node belongs to the region


def test_the_estimates_at_both_counts_are_added_up_in_one_walk(monkeypatch):
    walked = []
    original = regions_module.graph_nodes

    def counted(graph):  # type: ignore[no-untyped-def]
        walked.append(graph)
        return original(graph)

    monkeypatch.setattr(regions_module, "graph_nodes", counted)
    for text in (TWO_CHAINS, LOOP_LIST):
        model = _typed(text)
        regions = find_regions(model)
        costs, small = node_costs_both(model)
        graphs = len(list(iter_all_graphs(model)))
        walked.clear()
        totals, totals_small = region_costs_each(model, regions, [costs, small])
        assert len(walked) == graphs  # each graph once, for both estimates
        if text is TWO_CHAINS:  # no bodies: a region's nodes are its own
            for shares, found in ((costs, totals), (small, totals_small)):
                expected = [sum(shares.get(n, 0.0) for n in region.nodes) for region in regions]
                assert found == pytest.approx(expected) and len(found) == 2
        else:  # the Loop's body counts for its region: every node is the region's
            assert costs is not small  # a trip count known at run time only: two estimates
            assert totals == [pytest.approx(sum(costs.values()))]
            assert totals_small == [pytest.approx(sum(small.values()))]
            assert totals_small[0] < totals[0]
        assert region_costs(model, regions, small) == totals_small
        # the plan's comparison of the lowered model with the model as given: one walk too
        plan = RegionPlan.of(model)
        walked.clear()
        found = plan.costlier(model, {}, costs, small)
        assert len(walked) == graphs and found == []  # the same model costs the same
        walked.clear()
        estimates = plan.estimates(model, {}, costs)
        assert len(walked) == graphs
        assert [(c.as_given, c.lowered) for c in estimates] == [
            (round(t), round(t)) for t in totals
        ]


def test_the_node_count_is_every_graphs_length():
    from seqlower.ops import iter_all_nodes
    from seqlower.pipeline import _node_count

    model = _typed(LOOP_LIST)
    assert _node_count(model) == sum(1 for _ in iter_all_nodes(model)) == 7  # 3 in the body
    body = next(n for n in model.graph if n.op_type == "Loop").attributes["body"].as_graph()
    body.append(ir.Node("", "Identity", [body.inputs[0]]))
    assert _node_count(model) == sum(1 for _ in iter_all_nodes(model)) == 8


def test_the_driver_leaves_frozen_nodes_alone_and_gives_the_reason():
    model = _typed(TWO_CHAINS)
    first, _ = find_regions(model)
    frozen = dict.fromkeys(first.nodes, "speed-first: kept")
    lower = LowerSequencesPass(frozen=frozen)
    lower(model)
    left = [n for n in model.graph if n.op_type.startswith(("Sequence", "SplitTo"))]
    assert set(left) == set(first.sites)  # the second chain is lowered, the first untouched
    assert all(lower.refusals[n] == ["speed-first: kept"] for n in first.sites)


def test_the_cheaper_region_is_lowered_and_the_costlier_kept():
    model = onnx.load(FIXTURES / "two_regions" / "model.onnx")
    lowered, report = lower(model, target="onnxruntime")
    # xs = x.split(2, 0); xs[-1] * len(xs): uneven chunks read at run-time positions, kept
    assert sequence_op_counts(lowered) == {
        "SequenceAt": 1,
        "SequenceLength": 1,
        "SplitToSequence": 1,
    }
    # torch.stack([relu(t @ w) for t in y.unbind(0)]): batched, no Loop left
    assert report.rules_fired.get("loop-batch") == 1
    assert op_counts(lowered)["Loop"] == 0
    (region,) = report.kept_for_speed
    assert (region.op_type, region.sequence_nodes) == ("SplitToSequence", 3)
    assert isinstance(region.as_given, int) and isinstance(region.lowered, int)
    assert region.as_given < region.lowered
    kept = [op for op in report.remaining if "kept as given for speed" in op.reason]
    assert len(kept) == 3
    assert all(op.hint.startswith("the default target") for op in kept)
    _matches_pytorch("two_regions", lowered)


def test_the_default_target_lowers_both_regions():
    model = onnx.load(FIXTURES / "two_regions" / "model.onnx")
    lowered, report = lower(model, target="generic")
    assert sequence_op_counts(lowered) == {}
    assert report.kept_for_speed == []
    _matches_pytorch("two_regions", lowered)


def test_a_kept_region_is_reported_once_with_whole_numbers(tmp_path):
    from typer.testing import CliRunner

    from seqlower.cli.app import app

    out, report_path = tmp_path / "out.onnx", tmp_path / "r.json"
    source = str(FIXTURES / "two_regions" / "model.onnx")
    args = ["optimize", source, str(out), "--target", "onnxruntime", "--report", str(report_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = result.output.replace("\n    ", " ")  # lines wrapped at 100 columns, joined
    lines = [line for line in text.splitlines() if "estimated" in line]
    assert len(lines) == 1
    assert lines[0].startswith("kept as given for speed: the region of SplitToSequence")
    assert "." not in lines[0].split("estimated", 1)[1]  # whole numbers
    # onnxruntime runs what it keeps for speed faster: no leftover warning for it
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert not [line for line in warnings if "'/SplitToSequence' is kept" in line]
    (entry,) = json.loads(report_path.read_text())["kept_for_speed"]
    assert entry["sequence_nodes"] == 3 and entry["as_given"] < entry["lowered"]


def test_strict_on_a_kept_region_says_what_lowers_it_and_following_it_works(tmp_path):
    from typer.testing import CliRunner

    from seqlower.cli.app import app

    out = tmp_path / "out.onnx"
    args = ["optimize", str(FIXTURES / "two_regions" / "model.onnx"), str(out), "--strict", "-q"]
    refused = CliRunner().invoke(app, [*args, "--target", "onnxruntime"])
    assert refused.exit_code == 1 and not out.exists()
    assert "the original costs less); the default target (no --target) lowers it" in refused.stderr
    followed = CliRunner().invoke(app, args)
    assert followed.exit_code == 0 and out.exists()


def test_a_plan_finds_its_regions_again_after_lowering_turned_a_node_into_another():
    model = _typed(TWO_CHAINS)
    plan = RegionPlan.of(model)
    cast = next(node for node in model.graph if node.op_type == "Cast")
    cast.op_type = "Constant"  # as folding a shape into a Constant does, in place
    fresh = _typed(TWO_CHAINS)
    found = plan.frozen([RegionCost(0, 1, 2)], fresh, lambda node: node.name or "", {})
    assert found is not None  # the copy is the model planned, whatever became of the nodes
    frozen, kept = found
    assert sorted(
        node.op_type
        for node in frozen
        if node.op_type in ("SequenceAt", "SequenceLength", "SplitToSequence")
    ) == [
        "SequenceAt",
        "SequenceLength",
        "SplitToSequence",
    ]
    assert [region.op_type for region in kept] == ["SplitToSequence"]


# onnx 1.18's shape inference leaves the decoder step's width unknown inside the lowering: the
# caches stay in the general form there, which costs more, and are kept (docs/performance.md)
_STACKS_THE_CACHES = tuple(int(part) for part in onnx.__version__.split(".")[:2]) >= (1, 19)


@pytest.mark.skipif(not _STACKS_THE_CACHES, reason="onnx < 1.19 leaves the caches general")
def test_a_decoder_cache_loop_is_lowered_where_its_scan_over_layers_is_costed_per_layer():
    # transformers' DynamicCache.update in a decoding loop: the loop over 2 layers becomes a Scan
    # over Range(0, 2); costed as 2 iterations, its lowered form is the cheaper
    case = "../torch_fresh/hf_dynamic_cache"
    model = onnx.load(FIXTURES / case / "model.onnx")
    lowered, report = lower(model, target="onnxruntime")
    assert report.kept_for_speed == []
    assert sequence_op_counts(lowered) == {}
    assert report.rules_fired.get("loop-to-scan", 0) >= 1
    _matches_pytorch(case, lowered)


MERGED_ACROSS = """g (float[4,3] x) => (float[4,3] a, float[4,3] b, float[4,3] c) {
    a = Neg(x)
    n = Neg(x)
    s = SplitToSequence<axis = 0>(n)
    b = ConcatFromSequence<axis = 0>(s)
    c = Relu(a)
}"""


def test_the_regions_costs_alone_are_the_whole_estimates_shares():
    """The default target costs the regions only (`RegionPlan.of(whole=False)`): the nodes of
    the main graph outside every region are not costed, yet still keyed, so that a region's
    node merged into one of them (onnxruntime's common subexpressions) still counts 0."""
    model = _typed(MERGED_ACROSS)
    whole, regions_only = RegionPlan.of(model), RegionPlan.of(model, whole=False)
    assert regions_only.as_given == whole.as_given
    (region,) = whole.regions
    owned = set(region.nodes)
    merged = next(node for node in owned if node.op_type == "Neg")  # `n`, the region's input
    costs = node_costs(model, counted=owned.__contains__)
    everything = node_costs(model)
    assert costs[merged] == everything[merged] == 0.0  # merged into `a`, outside the region
    assert {node.op_type for node in everything.keys() - costs.keys()} == {"Neg", "Relu"}
    assert all(costs[node] == everything[node] for node in owned)
    assert regions_only.walk == () and whole.walk  # nothing to find in a copy by default


CHUNKS_READ_IN_A_LOOP = """g (float[B,T,8] x, int64 chunk) => (float[?,B,8] y)
    <float[8,8] w = {WEIGHTS}> {
    t = Constant<value = bool {1}>()
    first = Constant<value = float[1,8] {0, 0, 0, 0, 0, 0, 0, 0}>()
    s = SplitToSequence<axis = 1>(x, chunk)
    n = SequenceLength(s)
    state, y = Loop(n, t, first) <body = b (int64 i, bool c, float[?,8] h)
                                         => (bool c2, float[?,8] h2, float[?,8] out) {
        c2 = Identity(c)
        e = SequenceAt(s, i)
        m = MatMul(e, w)
        axes = Constant<value = int64[1] {1}>()
        hu = Unsqueeze(h, axes)
        a = Add(m, hu)
        z = Tanh(a)
        last = Constant<value = int64 {-1}>()
        h2 = Gather<axis = 1>(z, last)
        out = Identity(h2)
    }>
}"""


def test_chunks_of_a_split_read_in_a_loop_body_keep_the_split():
    """`for c in x.split(chunk, 1): h = tanh(c @ w + h)` (the newcomer set's chunk encoder):
    onnxruntime's SequenceAt of the split is cheaper than the lowered read of a chunk at the
    iteration number (Gather of its start, Add, Slice): lowered, this model ran 0.83x and 0.78x
    as fast at 3 and 16 chunks (docs/performance.md, "The cost model calibrated on every set").
    The estimate keeps the split: the body's nodes beside the outer list cost 0.2 launch more
    each, less than the two launches the lowered read adds."""
    weights = ", ".join(str(round(v, 2)) for v in np.linspace(-1, 1, 64))
    model = parse(CHUNKS_READ_IN_A_LOOP.replace("WEIGHTS", weights))
    lowered, report = lower(model, target="onnxruntime")
    (region,) = report.kept_for_speed
    assert (region.op_type, region.sequence_nodes) == ("SplitToSequence", 3)
    assert (region.as_given, region.lowered) == (43, 56)
    assert sequence_op_counts(lowered) == {
        "SequenceAt": 1,
        "SequenceLength": 1,
        "SplitToSequence": 1,
    }
    rng = np.random.default_rng(0)
    for length, chunk in [(10, 4), (3, 4), (8, 1), (0, 2)]:  # uneven, one chunk, empty
        x = rng.standard_normal((2, length, 8)).astype(np.float32)
        assert_same_outputs(model, lowered, {"x": x, "chunk": np.array(chunk)})
    # the default target lowers it, and says it costs more so
    generic, report = lower(model, target="generic")
    assert sequence_op_counts(generic) == {}
    (costlier,) = report.costlier_lowered
    assert costlier.op_type == "SplitToSequence" and costlier.lowered > costlier.as_given
    for length, chunk in [(10, 4), (0, 2)]:
        x = rng.standard_normal((2, length, 8)).astype(np.float32)
        assert_same_outputs(model, generic, {"x": x, "chunk": np.array(chunk)})


REFINED_CHUNKS = """g (float[N,CHANNELS,H,W] x, int64[1] n) => (float[?,?,?,?] y)
    <float[2,2,3,3] k = {WEIGHTS}, float[2] bias = {0.1, -0.2}> {
    t = Constant<value = bool {1}>()
    two = Constant<value = int64 {2}>()
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = SplitToSequence<axis = 1>(x, two)
    m = SequenceLength(s)
    out = Loop(m, t, empty) <body = b (int64 i, bool c, seq(float) acc)
                                     => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        e = SequenceAt(s, i)
        r = Loop(n, t, e) <body = inner (int64[1] j, bool d, float[?,?,?,?] v)
                                        => (bool d2, float[?,?,?,?] w) {
            d2 = Identity(d)
            conv = Conv<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(v, k, bias)
            w = Softmax<axis = 1>(conv)
        }>
        a0 = Constant<value = int64[1] {0}>()
        start = Unsqueeze(zero, a0)
        stop = Unsqueeze(one, a0)
        big = Constant<value = int64[1] {9223372036854775807}>()
        first = Slice(r, start, big, start, stop)
        grown = SequenceInsert(acc, first)
    }>
    y = ConcatFromSequence<axis = 1>(out)
}"""


@pytest.mark.parametrize(
    ("channels", "kept"),
    [("4", []), ("C", [("SequenceEmpty", 4, 348, 384), ("SplitToSequence", 3, 34, 55)])],
    ids=["static-split", "run-time-split"],
)
def test_refinement_loops_in_a_loop_over_chunks(channels, kept):
    """`[refine(c) for c in x.split(2, 1)]`, `refine` a loop of n steps (the ranks set's
    `repeated_refinement`), with TorchScript's slice bounds `Unsqueeze(Constant, Constant)`.
    Channels known (4): the loop over chunks is unrolled, its two inner loops run in the main
    graph, each costed as a loop of run-time count, in both forms; lowering is cheaper (measured
    28.2 against 34.6 us as given). Channels known at run time: the inner loop is nested in a
    loop of run-time count in both forms, and the folded Unsqueezes cost nothing; both regions
    are kept (33.7 us as given, 43.9 lowered)."""
    weights = ", ".join(str(round(v, 2)) for v in np.linspace(-1, 1, 36))
    text = REFINED_CHUNKS.replace("WEIGHTS", weights).replace("CHANNELS", channels)
    model = parse(text)
    lowered, report = lower(model, target="onnxruntime")
    found = [(r.op_type, r.sequence_nodes, r.as_given, r.lowered) for r in report.kept_for_speed]
    assert found == kept
    assert bool(sequence_op_counts(lowered)) == bool(kept)
    rng = np.random.default_rng(0)
    for batch, side, steps in [(1, 5, 2), (2, 3, 0)]:  # no refinement step
        x = rng.standard_normal((batch, 4, side, side)).astype(np.float32)
        assert_same_outputs(model, lowered, {"x": x, "n": np.array([steps])})


PER_IMAGE_PIECES = """g (int64[M] src, int64[B] counts) => (int64[?] ids, int64[?] picked) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    empty = SequenceEmpty<dtype = 7>()
    shape = Shape(counts)
    b = Gather<axis = 0>(shape, zero)
    end, pieces = Loop(b, t, zero, empty) <body = cut (int64 i, bool c, int64 start, seq(int64) acc)
                                                     => (bool c2, int64 stop, seq(int64) grown) {
        c2 = Identity(c)
        n = Gather<axis = 0>(counts, i)
        stop = Add(start, n)
        rows = Range(start, stop, one)
        piece = Gather<axis = 0>(src, rows)
        grown = SequenceInsert(acc, piece)
    }>
    k = SequenceLength(pieces)
    empty2 = SequenceEmpty<dtype = 7>()
    owners = Loop(k, t, empty2) <body = own (int64 j, bool d, seq(int64) acc2)
                                           => (bool d2, seq(int64) grown2) {
        d2 = Identity(d)
        p = SequenceAt(pieces, j)
        ps = Shape(p)
        z = ConstantOfShape<value = int64[1] {0}>(ps)
        owner = Add(z, j)
        grown2 = SequenceInsert(acc2, owner)
    }>
    ids = ConcatFromSequence<axis = 0>(owners)
    k3 = SequenceLength(pieces)
    empty3 = SequenceEmpty<dtype = 7>()
    copies = Loop(k3, t, empty3) <body = copy (int64 q, bool e, seq(int64) acc3)
                                            => (bool e2, seq(int64) grown3) {
        e2 = Identity(e)
        r = SequenceAt(pieces, q)
        grown3 = SequenceInsert(acc3, r)
    }>
    picked = ConcatFromSequence<axis = 0>(copies)
}"""


def test_per_image_loops_are_weighed_on_small_inputs_too():
    """DETR's `_get_src_permutation_idx` in small: the matched rows of each image cut in a
    loop over the batch, then the image index of each row and the rows joined, each by a loop
    over the list. With 16 iterations assumed for a loop of run-time count alone, lowering the
    cutting loop looked cheaper and was chosen, and lost on batches of one to four images
    (docs/performance.md, "A loop's trip count: the estimate on small inputs too"). Since the
    loop that joins the rows is recognised as the list itself (`loop-list-copy`), the lowered
    form is cheaper by both estimates and everything is lowered; the product rule's own cases
    are `test_a_region_costs_more_lowered_by_the_product_of_its_two_estimates`."""
    model = parse(PER_IMAGE_PIECES)
    lowered, report = lower(model, target="onnxruntime")
    assert report.kept_for_speed == []
    assert sequence_op_counts(lowered) == {}
    # (no empty batch: the original fails there, ConcatFromSequence of an empty list)
    for counts in ([2], [1, 3], [2, 0, 1, 3], [0], [1] * 16):
        feeds = {
            "src": np.arange(sum(counts), dtype=np.int64) * 3,
            "counts": np.array(counts, dtype=np.int64),
        }
        assert_same_outputs(model, lowered, feeds)


def test_a_region_kept_for_speed_reports_both_estimates():
    """The same program with join loops whose conditions are known at run time only (so one is
    no copy of the list and the other is not batched by its segment ids): its lowered form
    costs more by both estimates, the region is kept for onnxruntime, and the report gives the
    estimate on small inputs beside the other one. The default target lowers everything,
    whatever the estimates."""
    model = parse(
        PER_IMAGE_PIECES.replace(
            "copies = Loop(k3, t, empty3)",
            "go = GreaterOrEqual(k3, zero)\n    copies = Loop(k3, go, empty3)",
        ).replace(  # and a join of the owners that loop-ragged-rows cannot batch either
            "owners = Loop(k, t, empty2)",
            "go2 = GreaterOrEqual(k, zero)\n    owners = Loop(k, go2, empty2)",
        )
    )
    lowered, report = lower(model, target="onnxruntime")
    (cut,) = report.kept_for_speed
    assert cut.node == "SequenceEmpty#0 (empty)"
    assert cut.lowered_small is not None and cut.as_given_small is not None
    assert cut.lowered_small > cut.as_given_small
    assert cut.lowered * cut.lowered_small > cut.as_given * cut.as_given_small
    assert sequence_op_counts(lowered)["SequenceEmpty"] == 1
    for counts in ([2], [1, 3], [2, 0, 1, 3]):
        feeds = {
            "src": np.arange(sum(counts), dtype=np.int64) * 3,
            "counts": np.array(counts, dtype=np.int64),
        }
        assert_same_outputs(model, lowered, feeds)
    generic, _ = lower(model, target="generic")
    assert sequence_op_counts(generic) == {}
    assert_same_outputs(model, generic, {"src": np.arange(4), "counts": np.array([1, 3])})


def test_a_region_costs_more_lowered_by_the_product_of_its_two_estimates():
    # by the one estimate when the other was not made
    assert RegionCost(0, 10, 11).lowered_costs_more
    assert not RegionCost(0, 10, 10).lowered_costs_more
    # 12% cheaper at 16 iterations, 25% dearer on small inputs: dearer
    assert RegionCost(0, 100, 88, 20, 25).lowered_costs_more
    # 30% cheaper at 16 iterations, 25% dearer on small inputs: cheaper
    assert not RegionCost(0, 100, 70, 20, 25).lowered_costs_more
    # dearer at 16 iterations and much cheaper on small inputs: cheaper
    assert not RegionCost(0, 100, 110, 20, 10).lowered_costs_more
