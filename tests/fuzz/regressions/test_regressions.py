"""Bugs the differential fuzzer found (tools/fuzz.py), each minimized to a small model.

Every test lowers the model, runs the ONNX checker (full_check) on the result, runs both models
under onnxruntime on the same inputs and compares; some also check a property (idempotence, never
more sequence ops). A bug not fixed yet is marked xfail(strict=True), so the fix must remove it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (
    budget_of,
    compare_outputs,
    concatenates_a_misfit,
    edge_feeds_problem,
    empty_scan_outputs_explain,
    lower_and_compare,
    parse,
    rejected_by_the_specification,
    run_ort,
    sequence_op_total,
)

import seqlower
from seqlower import runtime_quirks
from seqlower.io import model_to_bytes
from seqlower.passes.legality import count_sequence_ops


def assert_idempotent(lowered: ir.Model) -> None:
    again, report = seqlower.optimize(lowered, target="portable")
    assert report.rules_fired == {}
    assert model_to_bytes(again) == model_to_bytes(lowered)


def test_output_replaced_by_a_model_input_stays_topologically_sorted():
    """An output (y) that also feeds a later node became Identity(x) appended at the end of the
    graph, after its consumer: the checker refused the result (fuzz seed 46)."""
    model = parse("""g (float[2] x) => (float[2] y, float[2] z) {
        zero = Constant <value = int64 {0}> ()
        s = SequenceConstruct (x, x)
        y = SequenceAt (s, zero)
        z = Neg (y)
    }""")
    lowered = lower_and_compare(model, {"x": np.array([1.0, -2.0], np.float32)})
    assert sequence_op_total(lowered) == 0


def test_int32_split_sizes_given_at_run_time():
    """SplitToSequence takes int32 split sizes, Split only int64: the lowered Split read the
    int32 model input as is (fuzz seeds 107, 216, 341)."""
    model = parse("""g (float[6] x, int32[3] sizes) => (float[?] y) {
        one = Constant <value = int64 {1}> ()
        s = SplitToSequence <axis = 0> (x, sizes)
        y = SequenceAt (s, one)
    }""")
    feeds = {"x": np.arange(6, dtype=np.float32), "sizes": np.array([1, 3, 2], np.int32)}
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0


def test_erase_at_a_run_time_position_from_bool_elements():
    """The run-time-position rule chose elements with Where, which onnxruntime does not
    implement for bool: the lowered model could not run (fuzz seeds 369, 742)."""
    model = parse("""g (bool[2] a, bool[2] b, int64 p) => (bool[?] y) {
        zero = Constant <value = int64 {0}> ()
        s = SequenceConstruct (a, b, a)
        t = SequenceErase (s, p)
        y = SequenceAt (t, zero)
    }""")
    feeds = {
        "a": np.array([True, False]),
        "b": np.array([False, False]),
        "p": np.array(0, np.int64),
    }
    lower_and_compare(model, feeds)


def test_dead_if_does_not_keep_what_its_branches_read():
    """onnx_ir's dead-code pass removed a dead If but its branch still counted as a user of
    the outer sequence, so the SequenceConstruct stayed, and a second lowering removed it: not
    idempotent (fuzz seed 482)."""
    model = parse("""g (float[2] x, bool c) => (float[2] y) {
        s = SequenceConstruct (x, x)
        unused = If (c) <
            then_branch = t () => (int64 n) { n = SequenceLength (s) },
            else_branch = e () => (int64 m) { m = Constant <value = int64 {0}> () }
        >
        y = Neg (x)
    }""")
    feeds = {"x": np.array([1.0, 2.0], np.float32), "c": np.array(True)}
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    assert_idempotent(lowered)


def test_dims_named_by_shape_inference_do_not_break_idempotence():
    """Shape inference names unknown dims unk__<n>, numbered after the names already in the
    model; the dead split used up a number in the first lowering only, so a second lowering
    renumbered the dims of the sequences that stay (opset 11: run-time sizes keep the split),
    changing the bytes (fuzz seed 86)."""
    model = parse(
        """g (float[4,3] x, int64 k, int32[2] sizes) => (float[4,?] y) {
        dead = SplitToSequence <axis = 1> (x, k)
        s = SplitToSequence <axis = 1> (x, sizes)
        r = SequenceErase (s)
        y = ConcatFromSequence <axis = 1> (r)
    }""",
        opset=11,
    )
    feeds = {
        "x": np.ones((4, 3), np.float32),
        "k": np.array(2, np.int64),
        "sizes": np.array([1, 2], np.int32),
    }
    assert_idempotent(lower_and_compare(model, feeds))


def test_loop_with_only_scan_outputs_keeps_its_condition_input():
    """onnx_ir's dead-code pass drops trailing empty inputs: Loop(M, "") with no carried value
    became Loop(M), which the checker refuses (found through the loop rules' scan loops)."""
    model = parse("""g (float[2] x, int64 m) => (float[?,2] y, int64 n) {
        s = SequenceConstruct (x, x)
        n = SequenceLength (s)
        y = Loop (m, "") <body = b (int64 i, bool c) => (bool c_out, float[2] scan) {
            c_out = Identity (c)
            scan = Neg (x)
        }>
    }""")
    feeds = {"x": np.array([1.0, 2.0], np.float32), "m": np.array(3, np.int64)}
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0


def test_chained_sequence_maps_over_chunks_of_different_shapes():
    # fuzz seeds 236, 2386, 2791, 3443: sequence-map-batch stacked elements whose shapes were
    # copied from an unrolled body; it now stacks only elements of one static shape
    model = parse("""g (float[3,2] x) => (float[?,?] y) {
        sizes = Constant <value = int64[2] {2, 1}> ()
        s = SplitToSequence <axis = 0> (x, sizes)
        m = SequenceMap (s) <body = b (float[?,?] e) => (float[?,?] o) { o = Neg (e) }>
        m2 = SequenceMap (m) <body = b2 (float[?,?] e2) => (float[?,?] o2) { o2 = Abs (e2) }>
        y = ConcatFromSequence <axis = 0> (m2)
    }""")
    lower_and_compare(model, {"x": np.arange(6, dtype=np.float32).reshape(3, 2)})


def test_sequence_map_over_an_unknown_length_stays_within_its_expansion():
    """No SequenceMap survives; over an unknown length the Loop needs the ops of ONNX's own
    expansion (2 -> 5 here; fuzz seeds 496, 502, 1317...), which is the budget."""
    model = parse("""g (seq(float[N]) s) => (float[?] y) {
        m = SequenceMap (s) <body = b (float[?] e) => (float[?] o) { o = Neg (e) }>
        y = ConcatFromSequence <axis = 0> (m)
    }""")
    feeds = {"s": [np.arange(3, dtype=np.float32), np.ones(2, np.float32)]}
    lowered = lower_and_compare(model, feeds)
    assert "SequenceMap" not in count_sequence_ops(lowered)
    assert sequence_op_total(lowered) <= budget_of(model)


def test_sequence_map_batched_over_zero_size_elements():
    # fuzz seed 4165: sequence-map-batch reshaped with a 0 in the target read as "copy the input
    # dim" (allowzero=0); its Reshapes now take fully resolved targets with allowzero=1
    model = parse("""g (float[N,2,0] x) => (float[?,?,?] y) {
        s = SplitToSequence <axis = 0, keepdims = 1> (x)
        m = SequenceMap (s) <body = b (float[?,?,?] e) => (float[?,?,?] o) { o = Neg (e) }>
        y = ConcatFromSequence <axis = 0> (m)
    }""")
    lower_and_compare(model, {"x": np.zeros((3, 2, 0), np.float32)})


def test_a_map_reading_one_sequence_twice_is_budgeted_for_both_inputs():
    """Fuzz seed 38576: the If output carried no declared type, so the budget counted one
    sequence input of the map, not two, and the Loop (one SequenceAt per input) went over it."""
    model = parse("""g (float[1] a, float[1] b, bool c, int32 p) => (float[?] y) {
        s = If (c) <
            then_branch = t () => (seq(float[1]) u) { u = SequenceConstruct (a) },
            else_branch = e () => (seq(float[1]) v) { v = SequenceConstruct (a, b) }
        >
        m = SequenceMap (s, s) <body = f (float[1] x, float[1] z) => (float[1] o) {
            o = Mul (x, z)
        }>
        y = SequenceAt (m, p)
    }""")
    ones = np.ones(1, np.float32)
    feeds = {"a": 2 * ones, "b": 3 * ones, "c": np.array(False), "p": np.array(1, np.int32)}
    lowered = lower_and_compare(model, feeds)
    assert "SequenceMap" not in count_sequence_ops(lowered)
    assert sequence_op_total(lowered) <= budget_of(model)


def test_a_loop_over_elements_known_only_by_count_is_not_unrolled():
    """Fuzz seed 44348: the carried sequence had a static length but an element inserted at a
    run-time position among elements of different shapes (so not placed by Where); unrolling
    copied its SequenceAt and SequenceInsert three times (8 -> 11)."""
    model = parse("""g (float[2] a, float[3] b, int64 p) => (float[?] y) {
        e = SequenceConstruct (a, b)
        s = SequenceInsert (e, a, p)
        three = Constant <value = int64 {3}> ()
        r = Loop (three, , s) <body = f (int64 i, bool c, seq(float[?]) acc)
                                     => (bool co, seq(float[?]) out) {
            x = SequenceAt (s, i)
            n = Neg (x)
            out = SequenceInsert (acc, n)
            co = Identity (c)
        }>
        y = ConcatFromSequence <axis = 0> (r)
    }""")
    feeds = {"a": np.ones(2, np.float32), "b": np.zeros(3, np.float32), "p": np.array(1)}
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) <= budget_of(model)
    # since the If-chain form of the insert (issue 16), the elements are known before the loop
    # is unrolled, so nothing is copied and nothing stays
    assert sequence_op_total(lowered) == 0


def test_a_running_sum_over_a_list_a_loop_of_no_iteration_built():
    """Fuzz seed 1190: a list appended to in a Loop of a run-time trip count became the Loop's
    scan output, and a second Loop's running sum over it a ReduceSum over that stack. For no
    iteration onnxruntime gives the scan output the body output's dims, an unknown dim as 0
    ([0, 0, 0]), and the sum of no term, zeros of shape [0, 0], beside the [3, 4] accumulator
    failed to broadcast; the original gives its accumulator (and no partial sum: the prefix
    sums, Add(acc0, CumSum(stack)), failed the same way). The stack of no row is now reshaped
    to [0, *the accumulator's shape] first."""
    model = parse("""g (float[A,B] x, int64 n) => (float[3,4] y, float[?,3,4] partial) {
        t = Constant <value = bool {1}> ()
        empty = SequenceEmpty <dtype = 1> ()
        xs = Loop (n, t, empty) <body = f (int64 i, bool c, seq(float) acc)
                                      => (bool c2, seq(float) acc2) {
            c2 = Identity (c)
            k = Cast <to = 1> (i)
            e = Add (x, k)
            two = Constant <value = int64 {2}> ()
            zero = Constant <value = int64 {0}> ()
            r = Mod (i, two)
            even = Equal (r, zero)
            acc2 = If (even) <then_branch = kept () => (seq(float) a) {
                a = SequenceInsert (acc, e)
            }, else_branch = negated () => (seq(float) b) {
                ne = Neg (e)
                b = SequenceInsert (acc, ne)
            }>
        }>
        m = SequenceLength (xs)
        zeros = Constant <value = float[3,4] {0,0,0,0,0,0,0,0,0,0,0,0}> ()
        y, partial = Loop (m, t, zeros) <body = g (int64 j, bool d, float[3,4] s)
                                              => (bool d2, float[3,4] s2, float[3,4] p) {
            d2 = Identity (d)
            e = SequenceAt (xs, j)
            s2 = Add (s, e)
            p = Identity (s2)
        }>
    }""")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for n in (3, 0, -1):
        lowered = lower_and_compare(model, {"x": x, "n": np.array(n, np.int64)})
    _, report = seqlower.optimize(model, target="portable")
    assert report.rules_fired.get("loop-batch") == 1
    assert report.rules_fired.get("loop-append-to-scan") == 1
    assert sequence_op_total(lowered) == 0
    assert_idempotent(lowered)


def test_an_empty_element_stacked_beside_a_misfit_is_rejected_by_the_specification():
    """Fuzz seed 1308: erasing position -1 leaves [x[3:4]] (shape [1]), and stacking it with an
    empty [0] element is an error by the specification (every element of one shape); onnxruntime
    runs it without a check, into uninitialized memory, for the original and for the lowered
    Concat alike, so the values differed. The lowering keeps the specification's verdict, and
    the edge check no longer compares such values (quirk concat-empty-misfit)."""
    model = parse("""g (float[4] x, int64[3] sizes, int64 p) => (float[?,?] y) {
        s = SplitToSequence <axis = 0> (x, sizes)
        a = SequenceErase (s, p)
        zero = Constant <value = int64 {0}> ()
        b = SequenceErase (a, zero)
        e = Constant <value = float[0] {}> ()
        c = SequenceInsert (b, e)
        y = ConcatFromSequence <axis = 0, new_axis = 1> (c)
    }""")
    feeds = {
        "x": np.array([-0.5, 1.75, 0.75, 2.0], np.float32),
        "sizes": np.array([3, 1, 0]),
        "p": np.array(1),  # leaves [x[4:4], []]: a [2, 0] stack
    }
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    proto = ir.to_proto(lowered)
    edge = {**feeds, "p": np.array(-1)}
    from onnx.reference import ReferenceEvaluator

    for rejected in (model, proto):
        with pytest.raises(ValueError, match="dimensions except for the concatenation axis"):
            ReferenceEvaluator(rejected).run(None, edge)
    assert rejected_by_the_specification(model, proto, feeds, edge) == runtime_quirks.holds(
        "concat-empty-misfit"
    )
    assert not rejected_by_the_specification(model, proto, feeds, {**feeds, "p": np.array(0)})
    assert edge_feeds_problem(model, proto, feeds) is None


def test_a_map_body_declaring_the_size_of_one_run_reads_the_elements_it_is_given():
    """Fuzz seed 6712: a SequenceMap body declares its input float[2, 2, 3], the rows of the
    chunks of a Loop's scan output in the run the program was made from; with no iteration the
    chunks have 0 rows. onnxruntime does not check a body input's declared dims and runs the
    original; the lowered body stacked the element by a Reshape to the declared [2, 2, 2, 3] and
    failed. The declared dims are not trusted (the rank is kept): the stack reads the element's
    own."""
    model = parse("""g (float[N,4,3] x, int64 k) => (float[?,?,?,?] y) {
        s = SplitToSequence <axis = 1> (x, k)
        m = SequenceMap (s) <body = b (float[2,2,3] e) => (float[2,2,2,3] p) {
            pair = SequenceConstruct (e, e)
            p = ConcatFromSequence <axis = 0, new_axis = 1> (pair)
        }>
        zero = Constant <value = int64 {0}> ()
        y = SequenceAt (m, zero)
    }""")
    rng = np.random.default_rng(6712)
    for rows in (2, 0, 3):
        feeds = {"x": rng.standard_normal((rows, 4, 3)).astype(np.float32), "k": np.array(2)}
        lowered = lower_and_compare(model, feeds)
        assert sequence_op_total(lowered) == 0


UNBIND_THEN_CAT = {
    "main graph": """g (float[5,2,3] x, float[2,3] h) => (float[2,6] y) {
        one = Constant <value = int64 {1}> ()
        s = SplitToSequence <axis = 0, keepdims = 0> (x, one)
        zero = Constant <value = int64 {0}> ()
        t = SequenceAt (s, zero)
        y = Concat <axis = 1> (t, h)
    }""",
    "loop body, split by an outer constant": """g (float[5,2,3] x, float[2,3] h) => (float[2,3] y) {
        one = Constant <value = int64 {1}> ()
        n = Constant <value = int64 {2}> ()
        y = Loop (n, , h) <body = b (int64 i, bool c, float[2,3] acc) => (bool c2, float[2,3] out) {
            s = SplitToSequence <axis = 0, keepdims = 0> (x, one)
            t = SequenceAt (s, i)
            both = Concat <axis = 1> (t, acc)
            w = Constant <value = float[6,3] {1,0,0,0,1,0,0,0,1,1,0,0,0,1,0,0,0,1}> ()
            out = MatMul (both, w)
            c2 = Identity (c)
        }>
    }""",
}


@pytest.mark.parametrize("where", UNBIND_THEN_CAT)
def test_an_unbound_element_read_with_its_axis_squeezed_is_a_valid_input(where):
    """SplitToSequence(x, 1 scalar, keepdims=0) squeezes the axis in onnxruntime and PyTorch
    (`torch.unbind`), which is seqlower's default reading; the input check ran ONNX inference,
    which keeps the axis, and refused as invalid a model that concatenates the element with a
    tensor of its squeezed rank (fuzz seed 41098: a MatMul in a SequenceMap body). Read the
    specification's way (split_keepdims="spec") the model is still refused."""
    model = onnx.parser.parse_model(
        f'<ir_version: 8, opset_import: ["" : 18]>\n{UNBIND_THEN_CAT[where]}'
    )
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((5, 2, 3)).astype(np.float32),
        "h": rng.standard_normal((2, 3)).astype(np.float32),
    }
    lowered, _ = seqlower.optimize(model)
    onnx.checker.check_model(lowered, full_check=True)
    assert sequence_op_total(lowered) == 0
    problem = compare_outputs(run_ort(model, feeds), run_ort(lowered, feeds))
    assert problem is None, problem
    with pytest.raises(seqlower.InvalidModelError, match="Concat"):
        seqlower.optimize(model, split_keepdims="spec")


def test_a_stacked_list_of_one_added_with_broadcasting_is_lowered_once_for_all():
    """A list of one element stacked (new_axis=1) is the Concat of one Unsqueeze; cleanup
    removed the single Concat after it had dropped the Unsqueezes that broadcasting makes
    anyway, so the Unsqueeze read by an Add went only on a second lowering: not idempotent
    (fuzz seed 41887)."""
    model = parse(
        """g (float[1,3] x, float[1,3] m) => (float[1,3] y) {
        s = SplitToSequence <axis = 0, keepdims = 0> (x)
        c = ConcatFromSequence <axis = -2, new_axis = 1> (s)
        y = Add (m, c)
    }""",
        opset=11,
    )
    feeds = {
        "x": np.array([[1.0, -2.0, 0.5]], np.float32),
        "m": np.array([[0.25, 1.0, -1.0]], np.float32),
    }
    lowered = lower_and_compare(model, feeds)
    assert [node.op_type for node in lowered.graph] == ["Squeeze", "Add"]
    assert_idempotent(lowered)


def test_a_row_read_from_a_vector_of_one_element_is_the_vector_once_for_all():
    """The index vectors made `Reshape(Slice(x, [0], [1]), [])` a scalar read `Gather(x, 0)`;
    a leading axis was then made there for the stacking Unsqueeze (`Gather(x, [0])`), which of
    an `x` of one element is `x` itself: seen only by a second lowering, which changed the
    bytes (fuzz seeds 1041724 and 41758)."""
    model = parse("""g (int64[1] x) => (int64[2] y) {
        start = Constant <value = int64[1] {0}> ()
        end = Constant <value = int64[1] {1}> ()
        scalar = Constant <value = int64[0] {}> ()
        first = Slice (x, start, end, start)
        r = Reshape (first, scalar)
        n = Neg (r)
        second = Slice (x, start, end, start)
        r2 = Reshape (second, scalar)
        a = Abs (r2)
        s = SequenceConstruct (n, a)
        y = ConcatFromSequence <axis = -1, new_axis = 1> (s)
    }""")
    lowered = lower_and_compare(model, {"x": np.array([-3], np.int64)})
    assert [node.op_type for node in lowered.graph] == ["Neg", "Abs", "Concat"]
    assert_idempotent(lowered)


def test_a_list_whose_data_is_a_tensor_of_the_model_leaves_its_declared_shape_alone():
    """A list whose tensor form is a tensor of the model itself (the rows of a model input
    split one by one, the one element of a SequenceConstruct) was typed as a list of an
    unknown number of rows: the model input's dim `N` became `?` in the lowered model (its
    interface), and an initializer's known dims were lost, so that a second lowering folded
    the shapes the first could not (not idempotent: fuzz seed 1042065)."""
    model = parse("""g (float[N,4] x) => (float[?,4] y, float[4] last) {
        zero = Constant <value = int64 {0}> ()
        minus = Constant <value = int64 {-1}> ()
        nought = Constant <value = float {0}> ()
        s = SplitToSequence <axis = 0, keepdims = 0> (x)
        first = Gather (x, zero)
        m = Mul (first, nought)
        t = SequenceInsert (s, m, zero)
        last = SequenceAt (t, minus)
        r = SequenceErase (t, minus)
        y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
    }""")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    lowered = lower_and_compare(model, {"x": x})
    assert sequence_op_total(lowered) == 0
    assert [str(d) for d in lowered.graph.inputs[0].shape] == ["N", "4"]
    assert_idempotent(lowered)


def test_a_list_a_loop_carries_for_no_one_does_not_keep_it_from_being_batched():
    """A Loop that stacks `x + i` also grew a list given as a model input that nothing read
    after it: the list kept `loop-batch` from batching the Loop, and only the cleanup dropped
    it, so a second lowering batched what the first left (not idempotent: fuzz seed 42523)."""
    model = parse("""g (float[3,2] x, seq(float) xs) => (float[?,3,2] ys) {
        three = Constant <value = int64 {3}> ()
        _, ys = Loop (three, "", xs) <body = body (int64 i, bool c, seq(float) acc) =>
                (bool c_out, seq(float) acc_out, float[3,2] y) {
            f = Cast <to = 1> (i)
            y = Add (x, f)
            acc_out = SequenceInsert (acc, y)
            c_out = Identity (c)
        }>
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    xs = [np.ones((2,), np.float32)]
    lowered = lower_and_compare(model, {"x": x, "xs": xs})
    assert "Loop" not in [node.op_type for node in lowered.graph]
    assert_idempotent(lowered)


def test_a_map_output_no_one_reads_does_not_keep_the_map_a_loop():
    """A SequenceMap with two outputs, one read and one not, became a Loop with two scan
    outputs; the unread one, dropped only by the cleanup, kept the Loop from being batched
    until a second lowering (not idempotent: fuzz seed 21001)."""
    model = parse("""g (float[3,N] x) => (float[3,1] z) {
        one = Constant <value = int32 {1}> ()
        c = Constant <value = float[3,1] {-0.75, 0, -1.5}> ()
        minus_two = Constant <value = int64 {-2}> ()
        s = SplitToSequence <axis = 1> (x, one)
        cs = SequenceConstruct (c, c)
        a, b = SequenceMap (s, cs) <body = body (float[3,1] e, float[3,1] y) =>
                (float[3,1] u, float[3,1] v) {
            u = Sub (e, y)
            v = Identity (y)
        }>
        z = SequenceAt (b, minus_two)
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    lowered = lower_and_compare(model, {"x": x})
    assert "Loop" not in [node.op_type for node in lowered.graph]
    assert_idempotent(lowered)


def test_a_loop_reading_a_list_at_a_trip_count_of_the_model_is_checked_not_crashed():
    """A Loop run a trip count given as a model input reads element i of a list. Checking
    whether the reads of the body hold one row per iteration asked the list read (a SequenceAt)
    for the shape of a tensor and crashed the lowering (fuzz seeds 50052, 50554 and eleven
    more in 50000..51499, as 52054 and 1050238: the rows proof now asks Gathers only)."""
    model = parse("""g (float[3,2] x, int64 n) => (float[?,2] ys) {
        s = SplitToSequence <axis = 0, keepdims = 0> (x)
        ys = Loop (n, "") <body = body (int64 i, bool c) => (bool c_out, float[2] y) {
            e = SequenceAt (s, i)
            y = Neg (e)
            c_out = Identity (c)
        }>
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for n in (0, 2, 3):
        lowered = lower_and_compare(model, {"x": x, "n": np.array(n, np.int64)})
        assert sequence_op_total(lowered) == 0


def test_a_loop_of_no_iteration_stacked_in_a_list_output_may_know_its_other_dims():
    """Fuzz seed 51466: a Loop of no iteration gives an empty scan output whose other dims
    onnxruntime takes from the body output's type ([0, 0, 0]); the lowered model knows them
    ([0, 3, 2]). That difference is allowed for a tensor output; it was reported as a
    miscompile when the scan output reached the output as an element of a list."""
    model = parse("""g (double[N,M] x, int64 n) => (double[?,?,?] ys, seq(double[?,?,?]) out) {
        _, ys = Loop (n, "", x) <body = body (int64 i, bool c, double[N,M] a) =>
                (bool c_out, double[N,M] a_out, double[?,?] y) {
            f = Cast <to = 11> (i)
            y = Add (x, f)
            a_out = Identity (a)
            c_out = Identity (c)
        }>
        out = SequenceConstruct (ys, ys)
    }""")
    feeds = {"x": np.ones((3, 2)), "n": np.array(2, np.int64)}
    lowered = lower_and_compare(model, feeds)
    proto = ir.to_proto(lowered)
    empty = {**feeds, "n": np.array(0, np.int64)}
    assert [e.shape for e in run_ort(proto, empty)[1]] == [(0, 3, 2), (0, 3, 2)]
    assert edge_feeds_problem(model, proto, feeds) is None
    # the allowance covers only empty stacks that agree up to their first 0: a list element
    # of other values is still a difference
    wrong = parse("""g (double[N,M] x, int64 n) => (double[?,?,?] ys, seq(double[?,?,?]) out) {
        _, ys = Loop (n, "", x) <body = body (int64 i, bool c, double[N,M] a) =>
                (bool c_out, double[N,M] a_out, double[?,?] y) {
            f = Cast <to = 11> (i)
            y = Add (x, f)
            a_out = Identity (a)
            c_out = Identity (c)
        }>
        zero = Constant <value = int64[1] {0}> ()
        u = Unsqueeze (x, zero)
        out = SequenceConstruct (u, ys)
    }""")
    other, _ = seqlower.optimize(ir.from_proto(wrong), target="portable")
    assert edge_feeds_problem(model, ir.to_proto(other), feeds) is not None


def test_a_misfit_concatenation_onnxruntime_runs_is_seen_where_the_reference_cannot_run():
    """Fuzz seeds 1051496 and 1061591: at an edge input a list of a [3, 0] and a [3, 1] element
    is stacked; the specification refuses, onnxruntime runs it (quirk concat-empty-misfit) and
    the lowered model fails. The harness asked `onnx.reference` to confirm the refusal, but the
    reference could not run the program at all (here: a Loop with no condition input, which it
    runs zero times), so the failure counted as a miscompile. The pieces onnxruntime itself
    concatenates now show the misfit."""
    model = parse("""g (float[3,1] x, int64[2] sizes, int64 p, float[3,0] e, int64 n, float[2] v)
            => (float[?,?,?] y, float[?,2] z) {
        s = SplitToSequence <axis = 1> (x, sizes)
        a = SequenceErase (s, p)
        minus = Constant <value = int64 {-1}> ()
        b = SequenceInsert (a, e, minus)
        y = ConcatFromSequence <axis = 1, new_axis = 1> (b)
        z = Loop (n, "") <body = body (int64 i, bool c) => (bool c_out, float[2] w) {
            w = Identity (v)
            c_out = Identity (c)
        }>
    }""")
    feeds = {
        "x": np.array([[0.5], [-1.0], [2.0]], np.float32),
        "sizes": np.array([1, 0]),
        "p": np.array(-2),  # leaves [e, x[:, 1:1]]: two [3, 0] elements
        "e": np.zeros((3, 0), np.float32),
        "n": np.array(2),
        "v": np.array([1.0, 2.0], np.float32),
    }
    lowered = lower_and_compare(model, feeds)
    proto = ir.to_proto(lowered)
    edge = {**feeds, "p": np.array(-1)}  # leaves [e, x[:, 0:1]]: [3, 0] and [3, 1]
    holds = runtime_quirks.holds("concat-empty-misfit")
    assert concatenates_a_misfit(model, edge) == holds
    assert not concatenates_a_misfit(model, feeds)
    assert rejected_by_the_specification(model, proto, feeds, edge) == holds
    assert not rejected_by_the_specification(model, proto, feeds, {**feeds, "p": np.array(0)})


def test_empty_constants_remade_for_other_runtimes_are_merged_in_the_first_lowering():
    """In a model with an If, every empty constant read as data is remade as a ConstantOfShape
    after the cleanup (OpenVINO cannot compile an If beside an empty constant). Two equal empty
    constants became two equal ConstantOfShape nodes, which the cleanup of a second lowering
    merged: not idempotent (fuzz seed 1061969, where one was the table of an empty list)."""
    model = parse("""g (int64[2] v, int64[3] w, bool b) => (int64[?] y, int64[?] z, float[2] t) {
        e1 = Constant <value = int64[0] {}> ()
        e2 = Constant <value = int64[0] {}> ()
        y = Concat <axis = 0> (e1, v)
        z = Concat <axis = 0> (w, e2)
        t = If (b) <then_branch = then () => (float[2] p) {
            p = Constant <value = float[2] {1, 2}> ()
        }, else_branch = other () => (float[2] q) {
            q = Constant <value = float[2] {3, 4}> ()
        }>
    }""")
    feeds = {"v": np.array([1, 2]), "w": np.array([3, 4, 5]), "b": np.array(True)}
    lowered = lower_and_compare(model, feeds)
    assert [node.op_type for node in lowered.graph].count("ConstantOfShape") == 1
    assert_idempotent(lowered)


def test_an_if_output_read_only_by_what_the_cleanup_folds_is_dropped_in_the_first_lowering():
    """An If returning a list of one or three elements of shape [1, 1, 4]: lowering made it
    return the last element too, read only by the count of chunks of a split along axis 1. The
    cleanup folded that count to a constant after its sweep of unread If outputs had run, so the
    output stayed, unread, until a second lowering dropped it: not idempotent (fuzz seed
    61907)."""
    model = parse("""g (float[1,1,4] x, float[1,1,4] z, int64 k) => (int64 n, int64 m) {
        zero = Constant <value = float {0}> ()
        total = ReduceSum <keepdims = 0> (x)
        c = Greater (total, zero)
        s = If (c) <then_branch = then () => (seq(float[1,1,4]) a) {
            a = SequenceConstruct (x, x, x)
        }, else_branch = other () => (seq(float[1,1,4]) b) {
            b = SequenceConstruct (z)
        }>
        n = SequenceLength (s)
        minus = Constant <value = int64 {-1}> ()
        last = SequenceAt (s, minus)
        parts = SplitToSequence <axis = 1> (last, k)
        m = SequenceLength (parts)
    }""")
    x = np.ones((1, 1, 4), np.float32)
    for sign in (1.0, -1.0):
        feeds = {"x": sign * x, "z": -x, "k": np.array(1)}
        lowered = lower_and_compare(model, feeds)
        assert_idempotent(lowered)


def test_a_stack_of_one_element_read_by_a_stack_is_stacked_in_the_first_lowering():
    """A list of one element stacked (new_axis=1) is the Concat of one Unsqueeze; three copies
    of it joined are a Concat of three such Concats. The cleanup removed the single Concats
    after the rules had run, and only a second lowering found the stack of Unsqueezes they left
    (unsqueezed-stack): not idempotent (fuzz seed 9200091). The lowering removes single Concats
    before it calls its sweeps a fixpoint."""
    model = parse(
        """g (float[2,3] x) => (float[3,3] y) {
        s = SplitToSequence <axis = 0, keepdims = 0> (x)
        zero = Constant <value = int64 {0}> ()
        e = SequenceAt (s, zero)
        one = SequenceConstruct (e)
        c = ConcatFromSequence <axis = -2, new_axis = 1> (one)
        three = SequenceConstruct (c, c, c)
        y = ConcatFromSequence <axis = 0, new_axis = 0> (three)
    }"""
    )
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    assert "Unsqueeze" not in [node.op_type for node in lowered.graph]  # stacked by a Reshape
    assert_idempotent(lowered)


def test_a_dim_read_alike_declares_its_axes():
    """A dim read as Gather(Shape(x), k) becomes Squeeze(Shape(x, k, k + 1), [0]); the axes'
    Constant was left undeclared, and a second lowering declared it (inference): the same
    nodes, other bytes (fuzz seed 9200772)."""
    model = parse(
        """g (float[N,3] x) => (float[N,3] y, int64 k) {
        s = Shape (x)
        zero = Constant <value = int64 {0}> ()
        n = Gather <axis = 0> (s, zero)
        k = Mul (n, n)
        m = Shape <start = 0, end = 1> (x)
        f = ConstantOfShape <value = float[1] {1}> (m)
        one = Constant <value = int64[1] {1}> ()
        g = Unsqueeze (f, one)
        y = Mul (x, g)
    }"""
    )
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    lowered = lower_and_compare(model, feeds)
    assert_idempotent(lowered)


_FOLDED_FROM_LOST_DIMS = """g (float[2,?,3,2] x, int64[n] sizes, float[2,0,3,2] e, int64 p,
        int64 trips) => (float[?,?,?,?] y) {
    s = SplitToSequence <axis = 1> (x, sizes)
    s1 = SequenceInsert (s, e, p)
    c = ConcatFromSequence <axis = -3> (s1)
    l = SequenceConstruct (c)
    t = Constant <value = bool {1}> ()
    out = Loop (trips, t, l) <body = body (int64 i, bool cond, seq(float) acc)
            => (bool cond_out, seq(float) acc_out) {
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64 {1}> ()
        k = Add (i, one)
        end = Unsqueeze (k, zero)
        start = Constant <value = int64[1] {0}> ()
        piece = Slice (c, start, end, zero)
        acc_out = SequenceInsert (acc, piece)
        cond_out = Identity (cond)
    }>
    y = ConcatFromSequence <axis = 0> (out)
}"""


@pytest.mark.parametrize(
    ("sizes", "position", "trips"),
    [([2, 3], 1, 2), ([2, 3], -1, 3), ([0, 5], -2, 1), ([5, 0], 0, 0)],
)
def test_a_dim_folded_before_its_shape_was_lost(sizes, position, trips):
    """The content of a dim (2) read from a joined list was folded while the list's elements
    declared it; the join then became a Loop growing a tensor by Concat, whose dims ONNX
    inference does not give: the lowering still declared the Range over that dim as [2], a
    second lowering (nothing folded) as [?]. The same nodes, other bytes (fuzz seed 9201373)."""
    model = parse(_FOLDED_FROM_LOST_DIMS, opset=16)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((2, 5, 3, 2)).astype(np.float32),
        "sizes": np.array(sizes, np.int64),
        "e": np.zeros((2, 0, 3, 2), np.float32),
        "p": np.array(position, np.int64),
        "trips": np.array(trips, np.int64),
    }
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    assert_idempotent(lowered)


_LIST_OF_SCALARS_READ_AT_ZERO = """g (float[4] x, int64 n, int64 k) => (float y) {
    empty = SequenceEmpty <dtype = 1> ()
    zero = Constant <value = int64 {0}> ()
    l = Loop (n, , empty) <body = b (int64 i, bool c, seq(float) acc)
            => (bool c_out, seq(float) acc_out) {
        four = Constant <value = int64 {4}> ()
        j = Mod (i, four)
        e = Gather (x, j)
        ne = Neg (e)
        length = SequenceLength (acc)
        front = Neg (length)
        acc_out = SequenceInsert (acc, ne, front)
        c_out = Identity (c)
    }>
    first = SequenceAt (l, zero)
    other = SequenceAt (l, k)
    pair = SequenceConstruct (first, other)
    y = SequenceAt (pair, k)
}"""


@pytest.mark.parametrize(("trips", "position"), [(3, 1), (3, -1), (1, 0), (1, -1), (2, -2)])
def test_a_row_read_at_a_constant_index_of_a_loop_result_is_declared_by_a_second_lowering(
    trips, position
):
    """A list of scalars a Loop carries as one tensor (`float[?]`, its rank proved: ONNX
    inference gives a Loop's carried outputs no shape) was read at 0 as `Gather(d, 0)`, then
    made a read of one row `Gather(d, [0])` and declared `[1]` by the row-axis fold; a second
    lowering inferred no shape for the Gather (its data had none when inferred) and declared
    only its rank, `[?]`: the same nodes, other bytes (fuzz seed 9600003). The cleanup now
    infers the shapes again after that fold: it declares what a second lowering proves."""
    model = parse(_LIST_OF_SCALARS_READ_AT_ZERO)
    feeds = {
        "x": np.array([1.5, -2.0, 0.0, 7.25], np.float32),
        "n": np.array(trips, np.int64),
        "k": np.array(position, np.int64),
    }
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    loop = next(node for node in lowered.graph if node.op_type == "Loop")
    reads = [node for node in loop.outputs[0].consumers() if node.op_type == "Gather"]
    at_zero = [node for node in reads if node.inputs[1] not in lowered.graph.inputs]
    assert [list(node.inputs[1].shape) for node in at_zero] == [[1]]  # a read of one row
    assert_idempotent(lowered)


_SPLIT_OF_A_LOOP_OF_NO_ITERATION = """g (int32[3,4] x, int64 n)
        => (int64[?,?] y, seq(int64[?]) parts, int64 m) {
    empty = SequenceEmpty <dtype = 6> ()
    two = Constant <value = int64 {2}> ()
    rows = Loop (two, "", empty) <body = b (int64 i, bool c, seq(int32) acc)
            => (bool c_out, seq(int32) acc_out) {
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64 {1}> ()
        k = Add (i, one)
        shape1 = Constant <value = int64[1] {1}> ()
        end = Reshape (k, shape1)
        piece = Slice (x, zero, end, zero)
        acc_out = SequenceInsert (acc, piece)
        c_out = Identity (c)
    }>
    y = Loop (n, "") <body = b2 (int64 j, bool c2) => (bool c2_out, int64[DIMS] dims) {
        last = Constant <value = int64 {-1}> ()
        e = SequenceAt (rows, last)
        dims = Shape (e)
        c2_out = Identity (c2)
    }>
    parts = SplitToSequence <axis = 1, keepdims = 0> (y)
    one_more = Constant <value = int64 {1}> ()
    m = OP (n, one_more)
}"""


def test_a_list_split_from_an_empty_scan_output_may_have_the_length_its_other_dims_give():
    """Fuzz seed 9500437: a Loop of no iteration gives an empty scan output whose other dims
    onnxruntime takes from the body output's type (`[0, 0]`: the Shape of an element read from
    a list, undeclared), the lowered model knows them (`[0, 2]`); a split along axis 1 then
    gives a list of no element in the original and of two empty ones in the lowered model. The
    harness gives the original's stack the dims it has where the loop runs and compares again;
    a lowering that computes anything else at that edge is still reported."""
    model = parse(_SPLIT_OF_A_LOOP_OF_NO_ITERATION.replace("DIMS", "?").replace("OP", "Add"))
    feeds = {"x": np.arange(12, dtype=np.int32).reshape(3, 4), "n": np.array(3, np.int64)}
    lowered = ir.to_proto(lower_and_compare(model, feeds))
    for trips in (0, -1):
        edge = {**feeds, "n": np.array(trips, np.int64)}
        original, candidate = run_ort(model, edge), run_ort(lowered, edge)
        assert (original[0].shape, len(original[1])) == ((0, 0), 0)
        assert (candidate[0].shape, len(candidate[1])) == ((0, 2), 2)
    assert edge_feeds_problem(model, lowered, feeds) is None
    # a stack given other dims than the ones it has where the loop runs: three parts, not two
    three = parse(_SPLIT_OF_A_LOOP_OF_NO_ITERATION.replace("DIMS", "3").replace("OP", "Add"))
    problem = edge_feeds_problem(model, three, feeds)
    assert problem is not None and "sequence length 3, expected 0" in problem
    # the stack explained, another output still differs at the edge (-1, not 1)
    other = parse(_SPLIT_OF_A_LOOP_OF_NO_ITERATION.replace("DIMS", "2").replace("OP", "Sub"))
    assert edge_feeds_problem(model, other, feeds) == "n=0: output 1: sequence length 2, expected 0"
    edge = {**feeds, "n": np.array(0, np.int64)}
    assert empty_scan_outputs_explain(model, run_ort(lowered, edge), feeds, edge)
    assert not empty_scan_outputs_explain(model, run_ort(other, edge), feeds, edge)


_INSERTS_INTO_A_SPLIT_OF_NOTHING = """g (float[0,N] x, float[M] v, int32 p, int64 q)
        => (float[?] y) {
    parts = SplitToSequence <axis = 1, keepdims = 0> (x)
    first = SequenceInsert (parts, v, p)
    empty = Constant <value = float[0] {}> ()
    second = SequenceInsert (first, empty, q)
    y = ConcatFromSequence <axis = -1> (second)
}"""


_ROWS_SLICED_IN_A_LOOP = """g (TYPE[3] x) => (TYPE[3] y, int64[3,0] dims) {
    empty = SequenceEmpty <dtype = CODE> ()
    three = Constant <value = int64 {3}> ()
    l = Loop (three, , empty) <body = b (int64 i, bool c, seq(TYPE) acc)
            => (bool c_out, seq(TYPE) acc_out) {
        j = Mod (i, three)
        shift = Constant <value = int64 {SHIFT}> ()
        s = Sub (j, shift)
        one = Constant <value = int64 {1}> ()
        e = Add (j, one)
        unit = Constant <value = int64[1] {1}> ()
        start = Reshape (s, unit)
        end = Reshape (e, unit)
        axis = Constant <value = int64[1] {0}> ()
        piece = Slice (x, start, end, axis)
        scalar = Constant <value = int64[0] {}> ()
        row = Reshape (piece, scalar)
        ne = Neg (row)
        length = SequenceLength (acc)
        front = Neg (length)
        acc_out = SequenceInsert (acc, ne, front)
        c_out = Identity (c)
    }>
    y, dims = Loop (three, "") <body = b2 (int64 k, bool c2) => (bool c2_out, TYPE v, int64[0] d) {
        n = SequenceLength (l)
        last = Constant <value = int64 {1}> ()
        top = Sub (n, last)
        at = Sub (top, k)
        v = SequenceAt (l, at)
        d = Shape (v)
        c2_out = Identity (c2)
    }>
}"""


@pytest.mark.parametrize(
    ("columns", "length", "p", "q"),
    [(3, 2, 1, -1), (3, 0, -3, 0), (1, 4, 0, 2), (0, 3, 0, -1), (2, 1, -1, -3)],
)
def test_the_shape_of_a_list_of_empty_elements_is_folded_by_the_first_lowering(
    columns, length, p, q
):
    """A split of a tensor that holds nothing (`float[0, N]` along axis 1) is a list of N empty
    elements, whose data the cleanup made a ConstantOfShape of `[0]` after it had folded the
    static shapes; the Shape of that data, read by the insert's bounds, stayed computed, and a
    second lowering folded it: one node changed (fuzz seed 9800138). The cleanup now folds the
    static shapes again after making such a ConstantOfShape."""
    model = parse(_INSERTS_INTO_A_SPLIT_OF_NOTHING)
    feeds = {
        "x": np.zeros((0, columns), np.float32),
        "v": np.arange(length, dtype=np.float32) - 1.5,
        "p": np.array(p, np.int32),
        "q": np.array(q, np.int64),
    }
    lowered = lower_and_compare(model, feeds)
    assert sequence_op_total(lowered) == 0
    filled = [node for node in lowered.graph if node.op_type == "ConstantOfShape"]
    assert filled  # the list's data: a tensor of no element, made a ConstantOfShape
    read = [c for node in filled for c in node.outputs[0].consumers() if c.op_type == "Shape"]
    assert read == []  # its Shape folded into a constant
    assert_idempotent(lowered)


@pytest.mark.parametrize(
    ("dtype", "code", "shift"),
    [("int64", 7, 0), ("int64", 7, 3), ("int32", 6, 0), ("float", 1, 3)],
)
def test_rows_a_loop_slices_one_by_one_are_batched_in_the_first_lowering(dtype, code, shift):
    """A Loop unrolled reads row i of a small vector as `Reshape(Slice(x, [i - shift], [i +
    1]), [])` (negative starts with shift 3), maps each row and a second Loop stacks the
    results (and their Shapes) in order. The unrolled copies differ in their computed bounds
    while lowering, so unrolled-map-batch did not batch them; the cleanup then folded each read
    of an int64 vector into `Gather(x, i)`, which a second lowering batched (fuzz seed 9800165).
    The rule now reads such a slice of one row as the row itself: the first lowering batches."""
    model = parse(
        _ROWS_SLICED_IN_A_LOOP.replace("TYPE", dtype)
        .replace("CODE", str(code))
        .replace("SHIFT", str(shift))
    )
    numpy_type = {"int64": np.int64, "int32": np.int32, "float": np.float32}[dtype]
    lowered = lower_and_compare(model, {"x": np.array([5, -2, 9]).astype(numpy_type)})
    assert sequence_op_total(lowered) == 0
    _, report = seqlower.optimize(ir.from_proto(model), target="portable")
    assert report.rules_fired.get("unrolled-map-batch") == 2
    assert not {"Slice", "Gather", "Loop"} & {node.op_type for node in lowered.graph}
    assert_idempotent(lowered)
