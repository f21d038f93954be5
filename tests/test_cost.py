"""The cost model (seqlower.cost): launches, bytes moved, and what onnxruntime merges."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from support import parse

from seqlower.cost import (
    BYTES_PER_LAUNCH,
    COPY_ELEMENTS,
    DYNAMIC_COUNT,
    DYNAMIC_DIM,
    IF_LAUNCHES,
    ITERATION_LAUNCHES,
    LOOP_ITERATION_LAUNCHES,
    NESTED_DYNAMIC_COUNT,
    OUTER_LIST_LAUNCHES,
    SMALL_COUNT,
    STRING_BYTES,
    launches,
    node_costs,
    node_costs_both,
)


def _typed(text: str) -> ir.Model:
    return ir.from_proto(onnx.shape_inference.infer_shapes(parse(text)))


def cost(text: str) -> float:
    return launches(_typed(text))


def test_constants_are_free_and_other_nodes_count_one_plus_their_bytes():
    text = "g (float[2] x) => (float[2] y) { c = Constant<value = float {1}>() y = Add(x, c) }"
    # Add reads x (8 bytes) and c (4) and writes y (8)
    assert cost(text) == 1 + 20 / BYTES_PER_LAUNCH


def test_shape_only_operators_move_no_bytes():
    text = """g (float[64,64] x) => (float[4096] y) {
        s = Constant<value = int64[1] {4096}>()
        y = Reshape(x, s)
    }"""
    assert cost(text) == 1


def test_bytes_count_a_run_time_dim_as_dynamic_dim():
    text = "g (float[N,4] x) => (float[N,4] y) { y = Neg(x) }"
    assert cost(text) == 1 + 2 * DYNAMIC_DIM * 4 * 4 / BYTES_PER_LAUNCH


def test_large_tensors_cost_more_than_a_launch():
    text = "g (float[256,1024] x) => (float[256,1024] y) { y = Neg(x) }"
    assert cost(text) == 1 + 2 * 256 * 1024 * 4 / BYTES_PER_LAUNCH > 100


LOOP = """g (float[2] x, int64 n) => (float[2] y) {
    t = Constant<value = bool {1}>()
    count = COUNT
    y = Loop(count, t, x) <body = body (int64 i, bool c, float[2] v) => (bool c2, float[2] w) {
        c2 = Identity(c)
        w = Neg(v)
    }>
}"""
NEG = 1 + 16 / BYTES_PER_LAUNCH  # Neg of float[2]: reads 8 bytes, writes 8


@pytest.mark.parametrize(
    ("count", "iterations", "extra"),
    [
        ("Constant<value = int64 {5}>()", 5, 0),
        ("Identity(n)", DYNAMIC_COUNT, 1),  # and the Identity
        ("Constant<value = int64 {9223372036854775807}>()", DYNAMIC_COUNT, 0),  # a while
    ],
    ids=["static", "run-time", "while"],
)
def test_a_loop_body_counts_once_per_iteration(count, iterations, extra):
    step = ITERATION_LAUNCHES + LOOP_ITERATION_LAUNCHES
    expected = extra + 1 + iterations * (step + 1 + NEG)
    assert cost(LOOP.replace("COUNT", count)) == pytest.approx(expected)


@pytest.mark.parametrize("trip_count", [SMALL_COUNT, 3, DYNAMIC_COUNT])
@pytest.mark.parametrize(
    ("count", "iterations", "extra"),
    [
        ("Constant<value = int64 {5}>()", 5, 0),  # static: whatever trip_count says
        ("Identity(n)", None, 1),
        ("Constant<value = int64 {9223372036854775807}>()", None, 0),
    ],
    ids=["static", "run-time", "while"],
)
def test_a_loop_of_run_time_count_runs_trip_count_times(trip_count, count, iterations, extra):
    """The estimate on small inputs (`SMALL_COUNT`) and at `DYNAMIC_COUNT`: only the loops
    whose count is known at run time only change."""
    step = ITERATION_LAUNCHES + LOOP_ITERATION_LAUNCHES
    runs = trip_count if iterations is None else iterations
    expected = extra + 1 + runs * (step + 1 + NEG)
    model = _typed(LOOP.replace("COUNT", count))
    assert launches(model, trip_count) == pytest.approx(expected)
    assert sum(node_costs(model, trip_count=trip_count).values()) == pytest.approx(expected)


NESTED_RUN_TIME = """g (float[2] x, int64 n, int64 m) => (float[2] y) {
    t = Constant<value = bool {1}>()
    y = Loop(n, t, x) <body = outer (int64 i, bool c, float[2] v) => (bool c2, float[2] w) {
        c2 = Identity(c)
        w = Loop(m, t, v) <body = inner (int64 j, bool d, float[2] u) => (bool d2, float[2] z) {
            d2 = Identity(d)
            z = Neg(u)
        }>
    }>
}"""


@pytest.mark.parametrize(
    ("trip_count", "inner"),
    [(DYNAMIC_COUNT, NESTED_DYNAMIC_COUNT), (SMALL_COUNT, SMALL_COUNT), (2, 2), (64, 4)],
)
def test_a_nested_loop_of_run_time_count_runs_no_more_than_the_outer_guess(trip_count, inner):
    costs = node_costs(_typed(NESTED_RUN_TIME), trip_count=trip_count)
    (neg,) = [node for node in costs if node.op_type == "Neg"]
    assert costs[neg] == pytest.approx(trip_count * inner * NEG)


def test_a_list_of_run_time_length_holds_trip_count_elements():
    text = """g (float[N] x) => (float[N] y) {
        s = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    model = _typed(text)
    big, small = (node_costs(model, trip_count=k) for k in (DYNAMIC_COUNT, SMALL_COUNT))
    for node in big:  # one launch more per COPY_ELEMENTS elements, the bytes alike
        more = (DYNAMIC_COUNT - SMALL_COUNT) / COPY_ELEMENTS
        assert big[node] - small[node] == pytest.approx(more)


def test_both_estimates_walk_once_when_no_count_is_a_guess():
    static = _typed(LOOP.replace("COUNT", "Constant<value = int64 {5}>()"))
    costs, small = node_costs_both(static)
    assert small is costs and costs == node_costs(static, trip_count=SMALL_COUNT)
    run_time = _typed(LOOP.replace("COUNT", "Identity(n)"))
    costs, small = node_costs_both(run_time)
    assert costs == node_costs(run_time) and small == node_costs(run_time, trip_count=SMALL_COUNT)
    assert sum(small.values()) < sum(costs.values())
    # a list of run-time length read as a guess too
    split = _typed("""g (float[N] x) => (float[N] y) {
        s = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }""")
    costs, small = node_costs_both(split)
    assert small is not costs and sum(small.values()) < sum(costs.values())


def _walks(monkeypatch) -> list[float]:
    """The trip counts of the walks `node_costs_both` makes from here on."""
    import seqlower.cost as cost_module

    made: list[float] = []
    walk = cost_module._walk

    def counting(model, counted, trip_count):
        made.append(trip_count)
        return walk(model, counted, trip_count)

    monkeypatch.setattr(cost_module, "_walk", counting)
    return made


# lists of run-time length in the main graph: `s` split twice (the first split read by nothing,
# so its launch goes to the second, `_Graph.run`), `x` split and joined once more
MAIN_GRAPH_GUESSES = """g (float[N,3] x, float[M] z) => (float[N,3] y, float[M] w) {
    dead = SplitToSequence<axis = 0, keepdims = 0>(z)
    s = SplitToSequence<axis = 0, keepdims = 0>(z)
    w = ConcatFromSequence<axis = 0, new_axis = 0>(s)
    r = SplitToSequence<axis = 0>(x)
    a = Relu(x)
    y = ConcatFromSequence<axis = 0>(r)
}"""


def test_guesses_of_main_graph_lists_are_costed_again_alone(monkeypatch):
    model = _typed(MAIN_GRAPH_GUESSES)
    want = node_costs(model), node_costs(model, trip_count=SMALL_COUNT)
    walks = _walks(monkeypatch)
    costs, small = node_costs_both(model)
    assert walks == [DYNAMIC_COUNT]  # one walk: the four guesses costed again alone
    # the same shares, in the same order, as two whole walks give
    assert list(costs.items()) == list(want[0].items())
    assert list(small.items()) == list(want[1].items())
    by_op = {}
    for node, share in small.items():
        by_op.setdefault(node.op_type, []).append(share)
    assert by_op["SplitToSequence"][0] == 0.0 < by_op["SplitToSequence"][1]  # the dead one
    assert sum(small.values()) < sum(costs.values())
    (relu,) = [node for node in costs if node.op_type == "Relu"]
    assert small[relu] == costs[relu]  # read no guess
    # with `counted` too (the default target's regions)
    walks.clear()
    lists = {n for n in model.graph if n.op_type != "Relu"}
    costs, small = node_costs_both(model, counted=lists.__contains__)
    assert walks == [DYNAMIC_COUNT] and all(n.op_type != "Relu" for n in small)
    assert small == node_costs(model, lists.__contains__, trip_count=SMALL_COUNT)


@pytest.mark.parametrize(
    "guess",
    [
        LOOP.replace("COUNT", "Identity(n)"),  # a loop's count
        """g (float[2] x, float[N] z) => (float[2] y) {
            t = Constant<value = bool {1}>()
            count = Constant<value = int64 {3}>()
            y = Loop(count, t, x) <body = body (int64 i, bool c, float[2] v)
                                          => (bool c2, float[2] u) {
                c2 = Identity(c)
                s = SplitToSequence<axis = 0, keepdims = 0>(z)
                q = ConcatFromSequence<axis = 0, new_axis = 0>(s)
                u = Neg(v)
            }>
        }""",  # a list in a body
    ],
    ids=["loop-count", "list-in-body"],
)
def test_other_guesses_take_a_whole_second_walk(monkeypatch, guess):
    model = _typed(guess)
    walks = _walks(monkeypatch)
    costs, small = node_costs_both(model)
    assert walks == [DYNAMIC_COUNT, SMALL_COUNT]
    assert list(small.items()) == list(node_costs(model, trip_count=SMALL_COUNT).items())
    assert sum(small.values()) < sum(costs.values())


def test_a_node_in_a_loop_body_carries_its_iterations():
    model = _typed(LOOP.replace("COUNT", "Constant<value = int64 {5}>()"))
    costs = node_costs(model)
    (neg,) = [n for n in costs if n.op_type == "Neg"]
    assert costs[neg] == pytest.approx(5 * NEG)
    assert sum(costs.values()) == pytest.approx(launches(model))


def test_an_if_counts_its_call_and_its_costlier_branch():
    text = """g (bool c, float[2] x) => (float[2] y) {
        y = If(c) <then_branch = a () => (float[2] r) { r = Neg(x) },
                   else_branch = b () => (float[2] s) { u = Abs(x) s = Neg(u) }>
    }"""
    model = _typed(text)
    assert launches(model) == pytest.approx(IF_LAUNCHES + 2 * NEG)
    costs = node_costs(model)
    assert [costs[n] for n in costs if n.op_type == "Neg"].count(0.0) == 1  # the cheaper branch


def test_identical_nodes_count_once():
    text = """g (float[2] x) => (float[2] y) {
        one = Constant<value = float {1}>()
        also_one = Constant<value = float {1}>()
        a = Add(x, one)
        b = Add(x, also_one)
        y = Mul(a, b)
    }"""
    model = _typed(text)
    costs = node_costs(model)
    adds = [costs[n] for n in model.graph if n.op_type == "Add"]
    assert adds[0] > 0 and adds[1] == 0  # same inputs (equal small constants), merged


def test_different_attributes_are_not_merged():
    text = """g (float[2,3] x) => (float[2,1] y, float[1,3] z) {
        a0 = Constant<value = int64[1] {1}>()
        a1 = Constant<value = int64[1] {0}>()
        y = ReduceSum(x, a0)
        z = ReduceSum(x, a1)
    }"""
    model = _typed(text)
    costs = node_costs(model)
    assert all(costs[n] > 0 for n in model.graph if n.op_type == "ReduceSum")


def test_a_sequence_copy_costs_its_elements_bytes():
    def inserts(shape: str) -> float:
        text = f"""g ({shape} x, int64 n) => (float[?] y) {{
            t = Constant<value = bool {{1}}>()
            e = SequenceEmpty<dtype = 1>()
            s = Loop(n, t, e) <body = b (int64 i, bool c, seq(float) acc)
                                         => (bool c2, seq(float) grown) {{
                c2 = Identity(c)
                grown = SequenceInsert(acc, x)
            }}>
            y = ConcatFromSequence<axis = 0>(s)
        }}"""
        model = _typed(text)
        costs = node_costs(model)
        (insert,) = [n for n in costs if n.op_type == "SequenceInsert"]
        return costs[insert]

    small, large = inserts("float[2]"), inserts("float[4096]")
    # per iteration one launch, the elements held (half the trip count) copied
    per_launch = 1 + (DYNAMIC_COUNT / 2) / COPY_ELEMENTS
    assert small == pytest.approx(DYNAMIC_COUNT * (per_launch + 2 * 8 * 9 / BYTES_PER_LAUNCH))
    assert large == pytest.approx(
        DYNAMIC_COUNT * (per_launch + 2 * 4096 * 4 * 9 / BYTES_PER_LAUNCH)
    )


def test_a_sequence_map_costs_its_function_expansion():
    text = """g (float[N,2] x) => (float[M,2] y) {
        s = SplitToSequence<axis = 0>(x)
        m = SequenceMap<body = b (float[1,2] e) => (float[1,2] r) { r = Neg(e) }>(s)
        y = ConcatFromSequence<axis = 0>(m)
    }"""
    model = _typed(text)
    costs = node_costs(model)
    (seq_map,) = [n for n in costs if n.op_type == "SequenceMap"]
    # SequenceLength, SequenceEmpty, the Loop; per element a SequenceAt, a SequenceInsert that
    # copies DYNAMIC_COUNT / 2 elements on average, and an iteration
    per_element = 1 + 1 + (DYNAMIC_COUNT / 2) / COPY_ELEMENTS + ITERATION_LAUNCHES
    per_element += LOOP_ITERATION_LAUNCHES  # onnxruntime runs it as a Loop
    # whose body reads the list from outside it: the SequenceAt, Neg and SequenceInsert slowed
    per_element += 3 * OUTER_LIST_LAUNCHES
    launches_only = 3 + DYNAMIC_COUNT * per_element
    assert launches_only < costs[seq_map] < launches_only + 1  # and the few bytes it copies


@pytest.mark.parametrize(
    ("split", "chunks", "split_bytes"),
    [("", 6, 0), (", two", 3, 8), (", sizes", 2, 16)],
    ids=["unbind", "scalar", "sizes"],
)
def test_a_split_to_sequence_costs_a_share_per_tensor_it_makes(split, chunks, split_bytes):
    text = f"""g (float[6,4] x) => (float[?,4] y) {{
        two = Constant<value = int64 {{2}}>()
        sizes = Constant<value = int64[2] {{2, 4}}>()
        s = SplitToSequence<axis = 0>(x{split})
        y = ConcatFromSequence<axis = 0>(s)
    }}"""
    model = _typed(text)
    costs = node_costs(model)
    (node,) = [n for n in costs if n.op_type == "SplitToSequence"]
    moved = 2 * (6 * 4 * 4 + split_bytes) / BYTES_PER_LAUNCH  # reads x and the split, copies
    assert costs[node] == pytest.approx(1 + chunks / COPY_ELEMENTS + moved)


def test_strings_count_a_nominal_size_per_element():
    text = """g (string[3] x) => (string[6] y) { y = Concat<axis = 0>(x, x) }"""
    assert cost(text) == 1 + (3 + 3 + 6) * STRING_BYTES / BYTES_PER_LAUNCH


def test_equal_string_constants_are_merged_too():
    text = """g (string[2] x) => (string[4] y, string[4] z) {
        a = Constant<value = string[2] {"p", "q"}>()
        b = Constant<value = string[2] {"p", "q"}>()
        y = Concat<axis = 0>(x, a)
        z = Concat<axis = 0>(x, b)
    }"""
    model = _typed(text)
    costs = node_costs(model)
    concats = [costs[n] for n in model.graph if n.op_type == "Concat"]
    assert concats[0] > 0 and concats[1] == 0


@pytest.mark.parametrize(
    ("bounds", "iterations"),
    [("0, 3, 1", 3), ("1, 8, 2", 4), ("5, 2, 1", 0), ("0, n, 1", DYNAMIC_COUNT)],
    ids=["zero-to-three", "step-two", "empty", "run-time"],
)
def test_a_scan_over_a_range_of_static_bounds_runs_its_length(bounds, iterations):
    start, limit, delta = bounds.split(", ")

    def scalar(name: str, value: str) -> str:
        if value == "n":
            return f"{name} = Identity(n)"
        return f"{name} = Constant<value = int64 {{{value}}}>()"

    text = f"""g (float[2] x, int64 n) => (float[2] y) {{
        {scalar("start", start)}
        {scalar("limit", limit)}
        {scalar("delta", delta)}
        r = Range(start, limit, delta)
        y = Scan<num_scan_inputs = 1, body = b (float[2] v, int64 i) => (float[2] w) {{
            w = Neg(v)
        }}>(x, r)
    }}"""
    model = _typed(text)
    costs = node_costs(model)
    (neg,) = [node for node in costs if node.op_type == "Neg"]
    assert costs[neg] == pytest.approx(iterations * NEG)


@pytest.mark.parametrize(
    ("op", "reads"),
    [
        ("Gather<axis = 0>(x, i)", 8),
        ("Slice(x, start, stop)", 2 * 8),
    ],
    ids=["gather", "slice"],
)
def test_a_gather_or_slice_reads_only_the_part_it_copies(op, reads):
    text = f"""g (float[1000,64] x) => (float[1,64] y) {{
        i = Constant<value = int64 {{3}}>()
        start = Constant<value = int64[1] {{3}}>()
        stop = Constant<value = int64[1] {{4}}>()
        z = {op}
        y = Flatten<axis = 0>(z)
    }}"""
    model = _typed(text)
    (node,) = [n for n in model.graph if n.op_type in ("Gather", "Slice")]
    # its 64 floats written and read: not the 256 kB of x
    assert node_costs(model)[node] == pytest.approx(1 + (2 * 64 * 4 + reads) / BYTES_PER_LAUNCH)


LIST_IN_LOOP = """g (float[4,2] x, int64 n) => (float[2] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = float[2] {0, 0}>()
    s = SplitToSequence<axis = 0, keepdims = 0>(x)
    y = Loop(n, t, zero) <body = b (int64 i, bool c, float[2] acc) => (bool c2, float[2] out) {
        c2 = Identity(c)
        e = READ
        u = Neg(e)
        out = Add(acc, u)
    }>
}"""


def test_a_loop_body_that_reads_an_outer_list_runs_every_node_slower():
    def body_costs(read: str) -> dict[str, float]:
        model = _typed(LIST_IN_LOOP.replace("READ", read))
        costs = node_costs(model)
        return {n.op_type: costs[n] for n in costs if n.graph is not model.graph}

    outer_list = body_costs("SequenceAt(s, i)")
    outer_tensor = body_costs("Gather<axis = 0>(x, i)")
    # four nodes run per iteration, each the slower: counted once, on the reader
    slowed = 4 * OUTER_LIST_LAUNCHES * DYNAMIC_COUNT
    assert outer_list["SequenceAt"] == pytest.approx(outer_tensor["Gather"] + slowed, rel=0.01)
    assert outer_list["Neg"] == outer_tensor["Neg"]


def test_a_loop_that_carries_a_list_runs_its_nodes_as_fast():
    text = """g (float[2] x, int64 n) => (float[?,2] y) {
        t = Constant<value = bool {1}>()
        e = SequenceEmpty<dtype = 1>()
        s = Loop(n, t, e) <body = b (int64 i, bool c, seq(float) acc)
                                     => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            u = Neg(x)
            grown = SequenceInsert(acc, u)
        }>
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    model = _typed(text)
    costs = node_costs(model)
    (neg,) = [n for n in costs if n.op_type == "Neg"]
    assert costs[neg] == pytest.approx(DYNAMIC_COUNT * NEG)
    (insert,) = [n for n in costs if n.op_type == "SequenceInsert"]
    per_launch = 1 + (DYNAMIC_COUNT / 2) / COPY_ELEMENTS
    assert costs[insert] == pytest.approx(
        DYNAMIC_COUNT * (per_launch + 2 * 8 * 9 / BYTES_PER_LAUNCH)
    )


FOLDED_IN_BODY = """g (float[2] x, int64 n) => (float[2] y) {
    t = Constant<value = bool {1}>()
    y = Loop(n, t, x) <body = b (int64 i, bool c, float[2] v) => (bool c2, float[2] w) {
        c2 = Identity(c)
        zero = Constant<value = int64 {0}>()
        axes = Constant<value = int64[1] {0}>()
        start = Unsqueeze(zero, axes)
        BODY
    }>
}"""


def _body_costs(body: str) -> dict[str, float]:
    model = _typed(FOLDED_IN_BODY.replace("BODY", body))
    costs = node_costs(model)
    return {n.outputs[0].name: costs[n] for n in costs if n.graph is not model.graph}


def test_a_node_of_constants_only_is_folded_by_onnxruntime_and_free():
    # onnxruntime folds a node whose inputs are all constants when the session is made (in a
    # loop body too, reading the body's Constants and the main graph's initializers)
    costs = _body_costs("""
        end = Add(start, start)
        w = Slice(v, start, end)
    """)
    assert costs["start"] == 0 and costs["end"] == 0  # a chain of folded nodes
    assert costs["w"] >= DYNAMIC_COUNT  # reads v: runs every iteration


def test_a_node_reading_a_run_time_value_is_not_folded():
    costs = _body_costs("""
        j = Unsqueeze(i, axes)
        end = Add(start, j)
        w = Slice(v, start, end)
    """)
    assert costs["start"] == 0  # of constants only
    assert costs["j"] >= DYNAMIC_COUNT and costs["end"] >= DYNAMIC_COUNT  # the iteration number


@pytest.mark.parametrize(
    ("graph", "folded"),
    [
        ("g (float[2] x) => (int64[1] y) { y = Shape(x) }", True),  # a static shape
        ("g (float[N] x) => (int64[1] y) { y = Shape(x) }", False),  # known at run time
        ("g (float[2] x) => (float[2] y) <float[2] w = {1, 2}> { y = Neg(w) }", True),
        # an initializer that is also an input: the caller may give another value
        ("g (float[2] x, float[2] w) => (float[2] y) <float[2] w = {1, 2}> { y = Neg(w) }", False),
        # a random operator gives another value each run
        ("g (float[2] x) => (float[2] y) { y = RandomNormal<shape = [2]>() }", False),
        # a sequence is not a constant onnxruntime folds
        (
            """g (float[2] x) => (float[2] y) {
                c = Constant<value = float[2] {1, 2}>()
                s = SequenceConstruct(c)
                y = ConcatFromSequence<axis = 0>(s)
            }""",
            False,
        ),
    ],
    ids=["static-shape", "run-time-shape", "initializer", "overridable", "random", "sequence"],
)
def test_what_onnxruntime_folds(graph, folded):
    model = _typed(graph)
    costs = node_costs(model)
    (last,) = [n for n in model.graph if n.outputs[0].is_graph_output()]
    assert (costs[last] == 0) is folded


NESTED = """g (float[2] x, int64 n) => (float[2] y) {
    t = Constant<value = bool {1}>()
    k = OUTER
    l = INNER
    y = Loop(k, t, x) <body = outer (int64 i, bool c, float[2] v) => (bool c2, float[2] w) {
        c2 = Identity(c)
        w = Loop(l, t, v) <body = inner (int64 j, bool d, float[2] u) => (bool d2, float[2] r) {
            d2 = Identity(d)
            r = Neg(u)
        }>
    }>
}"""
RUN_TIME = "Identity(n)"
STATIC = "Constant<value = int64 {COUNT}>()"


@pytest.mark.parametrize(
    ("outer", "inner", "runs"),
    [
        (RUN_TIME, RUN_TIME, DYNAMIC_COUNT * NESTED_DYNAMIC_COUNT),
        # a loop of static count may be unrolled: its body's loops are then in the main graph
        (STATIC.replace("COUNT", "3"), RUN_TIME, 3 * DYNAMIC_COUNT),
        (RUN_TIME, STATIC.replace("COUNT", "5"), DYNAMIC_COUNT * 5),
    ],
    ids=["run-time-in-run-time", "run-time-in-static", "static-in-run-time"],
)
def test_a_loop_of_run_time_count_in_a_loop_of_run_time_count_runs_fewer_times(outer, inner, runs):
    # two nested loops of run-time count are not assumed to run 16 x 16 times
    model = _typed(NESTED.replace("OUTER", outer).replace("INNER", inner))
    costs = node_costs(model)
    (neg,) = [n for n in costs if n.op_type == "Neg"]
    assert costs[neg] == pytest.approx(runs * NEG)


def test_the_nesting_counts_through_a_branch():
    text = NESTED.replace("OUTER", RUN_TIME).replace("INNER", RUN_TIME)
    text = text.replace(
        "w = Loop(l, t, v) <body = inner (int64 j, bool d, float[2] u) => (bool d2, float[2] r) {",
        """w = If(c) <then_branch = th () => (float[2] z) { z = Identity(v) },
                   else_branch = el () => (float[2] z2) {
            z2 = Loop(l, t, v) <body = inner (int64 j, bool d, float[2] u)
                                          => (bool d2, float[2] r) {""",
    ).replace("r = Neg(u)\n        }>", "r = Neg(u)\n        }>\n        }>")
    model = _typed(text)
    costs = node_costs(model)
    (neg,) = [n for n in costs if n.op_type == "Neg"]
    assert costs[neg] == pytest.approx(DYNAMIC_COUNT * NESTED_DYNAMIC_COUNT * NEG)


def test_only_nodes_whose_operator_recurs_in_their_graph_are_keyed(monkeypatch):
    """Merging looks for an identical node in the same graph, so a node whose operator no other
    node of its graph has is not keyed: here the two Adds of the main graph and the two Negs of
    one branch, not the Constant, Mul and If of the main graph nor the lone nodes of the
    branches (a branch of an If holding a Constant and a SequenceAt was keyed twice per If).
    The keyed ones merge as before."""
    import seqlower.cost as cost_module

    text = """g (bool c, float[2] x) => (float[2] y) {
        one = Constant<value = float {1}>()
        a = Add(x, one)
        b = Add(x, one)
        m = Mul(a, b)
        y = If(c) <
            then_branch = t () => (float[2] r) { k = Constant<value = float {2}>() r = Mul(m, k) },
            else_branch = e () => (float[2] s) { u = Neg(m) v = Neg(m) w = Abs(u) s = Add(v, w) }
        >
    }"""
    model = _typed(text)
    keyed = []
    original = cost_module._Graph._key

    def counted(self, node):
        keyed.append(node.op_type)
        return original(self, node)

    monkeypatch.setattr(cost_module._Graph, "_key", counted)
    costs = node_costs(model)
    assert sorted(keyed) == ["Add", "Add", "Neg", "Neg"]
    adds = [costs[n] for n in model.graph if n.op_type == "Add"]
    assert adds[0] > 0 and adds[1] == 0  # merged
    negs = sorted(costs[n] for n in costs if n.op_type == "Neg")
    assert negs[0] == 0 and negs[1] > 0  # merged, in the costlier branch
    assert costs[next(n for n in costs if n.op_type == "Abs")] > 0


# `x` reshaped to its own shape twice over, and a Shape of `x` read only by shape arithmetic
# whose result nothing reads (an export's leftover): onnxruntime merges the two Shapes and
# runs one of them
DEAD_FIRST = """g (float[N,M] x) => (float[N,M] y) {
    s0 = Shape(x)
    i = Constant<value = int64 {0}>()
    d = Gather(s0, i)
    s1 = Shape(x)
    f = Flatten(x)
    y = Reshape(f, s1)
}"""


def _shapes(model: ir.Model, costs: dict[ir.Node, float]) -> list[float]:
    return [costs[n] for n in model.graph if n.op_type == "Shape"]


def test_a_merged_launch_is_charged_to_the_node_whose_result_is_used():
    model = _typed(DEAD_FIRST)
    costs = node_costs(model)
    assert _shapes(model, costs) == [0.0, 1.0]  # s1, read by the output, runs the launch
    unmerged = _typed(DEAD_FIRST.replace("s0 = Shape(x)", "s0 = Shape(f)"))
    assert _shapes(unmerged, node_costs(unmerged)) == [1.0, 1.0]
    # the whole model costs what it did: one Shape launch either way
    assert launches(model) == pytest.approx(launches(unmerged) - 1)


def test_a_merged_launch_stays_with_the_first_node_when_that_is_used_or_both_are_dead():
    used = _typed(
        DEAD_FIRST.replace("d = Gather(s0, i)", "d = Gather(s0, i)").replace(
            "(float[N,M] y)", "(float[N,M] y, int64 d)"
        )
    )
    assert _shapes(used, node_costs(used)) == [1.0, 0.0]
    both_dead = _typed(DEAD_FIRST.replace("y = Reshape(f, s1)", "e = Reshape(f, s1) y = Neg(x)"))
    assert _shapes(both_dead, node_costs(both_dead)) == [1.0, 0.0]


def test_a_result_read_in_the_body_of_a_used_loop_is_used():
    text = """g (float[N,M] x, int64 n) => (float[N,M] y, int64 z) {
        s0 = Shape(x)
        i = Constant<value = int64 {0}>()
        t = Constant<value = bool {1}>()
        zero = Constant<value = int64 {0}>()
        z = Loop(n, t, zero) <body = b (int64 k, bool c, int64 acc) => (bool co, int64 out) {
            co = Identity(c)
            out = Gather(s0, i)
        }>
        s1 = Shape(x)
        f = Flatten(x)
        y = Reshape(f, s1)
    }"""
    model = _typed(text)
    assert _shapes(model, node_costs(model)) == [1.0, 0.0]
    dead_loop = _typed(text.replace(", int64 z)", ")").replace("z = Loop", "w = Loop"))
    assert _shapes(dead_loop, node_costs(dead_loop)) == [0.0, 1.0]
