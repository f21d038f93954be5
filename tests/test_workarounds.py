"""Runtime workarounds: Transpose -> Cast is emitted as Cast -> Transpose, because onnxruntime
segfaults creating a session for Transpose -> Cast -> MatMul (microsoft/onnxruntime#28392).
Loading happens in a child process, so that a crash fails the test instead of killing pytest.
Two for OpenVINO: a Loop starts from ConstantOfShape, not an empty constant, and a body returns
a copy of a value a nested branch reads."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
from support import (
    COUNTED_ADDS,
    ROWS_OF_A_RUN_TIME_COUNT,
    assert_outputs_equal,
    assert_same_outputs,
    lower,
    op_counts,
    openvino_forms,
    parse,
    run_reference,
)

from seqlower.passes.workarounds import RuntimeWorkaroundsPass

LOAD = (
    "import sys, onnxruntime as ort; "
    "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
)


def _loads_in_a_child_process(model: onnx.ModelProto, tmp_path) -> bool:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, check=False)
    return done.returncode == 0


def _apply(text: str) -> tuple[onnx.ModelProto, int]:
    model = ir.from_proto(parse(text))
    workaround = RuntimeWorkaroundsPass()
    workaround(model)
    return ir.to_proto(model), workaround.swapped


CHAIN = """g (float[2,3,4] x, double[4,3] w) => (double[3,2,3] y) {
    t = Transpose <perm = [1, 0, 2]> (x)
    c = Cast <to = 11> (t)
    y = MatMul (c, w)
}"""


def test_the_cast_moves_before_the_transpose():
    model, swapped = _apply(CHAIN)
    assert swapped == 1
    assert [node.op_type for node in model.graph.node] == ["Cast", "Transpose", "MatMul"]
    onnx.checker.check_model(model, full_check=True)
    # the original crashes onnxruntime: both run under the reference evaluator
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "w": np.ones((4, 3))}
    assert_outputs_equal(run_reference(parse(CHAIN), feeds), run_reference(model, feeds))


def test_a_graph_output_keeps_its_name_and_type():
    model, swapped = _apply("""g (float[2,3] x) => (double[3,2] y) {
        t = Transpose <perm = [1, 0]> (x)
        y = Cast <to = 11> (t)
    }""")
    assert swapped == 1
    assert [node.op_type for node in model.graph.node] == ["Cast", "Transpose"]
    assert model.graph.node[1].output[0] == "y"
    onnx.checker.check_model(model, full_check=True)


def test_a_cast_after_a_chain_of_transposes_moves_to_its_start():
    """Found by fuzzing (seed 10269): moving the Cast above one Transpose put it right after
    another, which a second lowering then moved (not idempotent)."""
    model, swapped = _apply("""g (float[2,3,4] x) => (double[2,3,4] y) {
        a = Transpose <perm = [1, 0, 2]> (x)
        b = Transpose <perm = [1, 0, 2]> (a)
        y = Cast <to = 11> (b)
    }""")
    assert swapped == 2
    assert [node.op_type for node in model.graph.node] == ["Cast", "Transpose", "Transpose"]
    _, swapped_again = _apply(onnx.printer.to_text(model.graph))
    assert swapped_again == 0


def test_casts_after_a_transpose_all_move_before_it():
    """Found by fuzzing (seed 1821): Transpose -> Cast -> Cast left Cast -> Transpose -> Cast."""
    model, swapped = _apply("""g (float[2,3,4] x) => (double[3,2,4] y) {
        a = Transpose <perm = [1, 0, 2]> (x)
        b = Cast <to = 6> (a)
        y = Cast <to = 11> (b)
    }""")
    assert swapped == 2
    assert [node.op_type for node in model.graph.node] == ["Cast", "Cast", "Transpose"]
    assert model.graph.node[2].output[0] == "y"


def test_a_transpose_read_elsewhere_too_is_left_alone():
    _, swapped = _apply("""g (float[2,3] x) => (double[3,2] y, float[3,2] t) {
        t = Transpose <perm = [1, 0]> (x)
        y = Cast <to = 11> (t)
    }""")
    assert swapped == 0
    _, swapped = _apply("""g (float[2,3] x) => (double[3,2] y, float[3,2] z) {
        t = Transpose <perm = [1, 0]> (x)
        y = Cast <to = 11> (t)
        z = Neg (t)
    }""")
    assert swapped == 0


def test_the_crashing_chain_no_longer_reaches_onnxruntime(tmp_path):
    model, _ = _apply(CHAIN)
    assert _loads_in_a_child_process(model, tmp_path)


def test_a_batched_cast_matmul_body_loads_and_computes_the_same(tmp_path):
    """Found by fuzzing (seed 15344): chunks along axis 1 are stacked with a Transpose, and the
    body casts before a MatMul."""
    model = parse(
        """g (float[2,8] x, double[4,3] w) => (double[2,4,3] y) {
            four = Constant <value = int64 {4}> ()
            s = SplitToSequence <axis = 1> (x, four)
            m = SequenceMap <body = b (float[2,4] e) => (double[2,3] o) {
                d = Cast <to = 11> (e)
                o = MatMul (d, w)
            }> (s)
            y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""
    )
    lowered, report = lower(model, load_ort=False)
    assert report.rules_fired == {"sequence-map-batch": 1}
    assert "Transpose" in op_counts(lowered)
    assert _loads_in_a_child_process(lowered, tmp_path)  # before running it in this process
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(2, 8), "w": np.ones((4, 3))}
    assert_same_outputs(model, lowered, feeds)


def _remade(text: str) -> tuple[onnx.ModelProto, int]:
    model = ir.from_proto(parse(text))
    workaround = RuntimeWorkaroundsPass()
    workaround(model)
    again = RuntimeWorkaroundsPass()
    again(model)
    assert again.remade == 0 and again.swapped == 0  # a fixpoint at once
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return proto, workaround.remade


EMPTY_START = """g (float[N,2] x, int64 m) => (float[?,2] y) {
    e = Constant <value = float[0,2] {}> ()
    y = Loop (m, , e) <body = b (int64 i, bool c, float[?,2] acc) => (bool co, float[?,2] grown) {
        co = Identity (c)
        grown = Concat <axis = 0> (acc, x)
    }>
}"""


def test_a_loop_starting_from_an_empty_constant_starts_from_constant_of_shape():
    """OpenVINO 2026.4.1 cannot convert a Loop that carries a constant of size 0; the same
    empty tensor made by ConstantOfShape converts (tests/targets/test_runtimes.py)."""
    model, remade = _remade(EMPTY_START)
    assert remade == 1
    loop = next(node for node in model.graph.node if node.op_type == "Loop")
    made = next(node for node in model.graph.node if node.output[0] == loop.input[2])
    assert made.op_type == "ConstantOfShape"
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for m in (0, 2):
        assert_same_outputs(parse(EMPTY_START), model, {"x": x, "m": np.array(m)})


def test_a_string_or_non_empty_constant_start_is_left_alone():
    strings = (
        EMPTY_START.replace("float", "string")
        .replace("{}>", "{}>")
        .replace("grown = Concat <axis = 0> (acc, x)", "grown = Identity (acc)")
    )
    assert _remade(strings)[1] == 0  # ConstantOfShape makes no strings
    full = EMPTY_START.replace("float[0,2] {}", "float[1,2] {1, 2}")
    assert _remade(full)[1] == 0


RETURNED_AND_READ = """g (int64[?] x, int64 n) => (int64 last, int64[?] y, int64[?] z) {
    p0 = Constant <value = int64 {0}> ()
    d0 = Constant <value = int64[1] {5}> ()
    t0 = Constant <value = int64[1] {1}> ()
    last, y, z = Loop (n, , p0, d0, t0) <body = b (int64 i, bool c, int64 prev, int64[?] d,
            int64[?] t) => (bool co, int64 g, int64[?] d2, int64[?] t2) {
        g = Gather (x, i)
        nz = Greater (g, prev)
        d2, t2 = If (nz) <then_branch = a () => (int64[?] p, int64[?] q) {
                ax = Constant <value = int64[1] {0}> ()
                u = Unsqueeze (g, ax)
                fd = Shape <end = 1> (u)
                p = Concat <axis = 0> (d, u)
                q = Concat <axis = 0> (t, fd)
            }, else_branch = e () => (int64[?] r, int64[?] s) {
                r = Identity (d)
                s = Identity (t)
            }>
        co = Identity (c)
    }>
}"""


def test_a_body_output_a_branch_reads_is_returned_as_a_copy():
    """OpenVINO 2026.4.1, reading from a file, fails on an If of two outputs whose branch reads
    a value the Loop body also returns (tests/targets/test_runtimes.py)."""
    model, remade = _remade(RETURNED_AND_READ)
    assert remade == 1
    body = next(node for node in model.graph.node if node.op_type == "Loop").attribute[0].g
    returned = next(node for node in body.node if node.output[0] == body.output[1].name)
    assert returned.op_type == "Identity" and returned.input[0] == "g"
    for n in (0, 3, 5):
        assert_same_outputs(parse(RETURNED_AND_READ), model,
                            {"x": np.array([1, 0, 2, 0, 3]), "n": np.array(n)})  # fmt: skip


# the same If in a loop that carries sums, not growing tensors: lowering leaves it as it is (the
# growing tensors above become scan outputs, and their If no longer reads g)
RETURNED_AND_READ_SUMS = """g (int64[?] x, int64 n) => (int64 last, int64 y, int64 z) {
    p0 = Constant <value = int64 {0}> ()
    last, y, z = Loop (n, , p0, p0, p0) <body = b (int64 i, bool c, int64 prev, int64 a,
            int64 t) => (bool co, int64 g, int64 a2, int64 t2) {
        g = Gather (x, i)
        nz = Greater (g, prev)
        a2, t2 = If (nz) <then_branch = p () => (int64 s, int64 q) {
                s = Add (a, g)
                q = Mul (t, g)
            }, else_branch = e () => (int64 r, int64 u) {
                r = Identity (a)
                u = Identity (t)
            }>
        co = Identity (c)
    }>
}"""


def test_a_speed_first_target_leaves_the_copy_out():
    """The copy costs a kernel per iteration in onnxruntime: `--target onnxruntime` (which asks
    for speed first) does without it; the empty-constant start is still remade."""
    model = ir.from_proto(parse(RETURNED_AND_READ))
    workaround = RuntimeWorkaroundsPass(speed_first=True)
    workaround(model)
    assert workaround.remade == 0
    lowered, _ = lower(parse(RETURNED_AND_READ_SUMS), target="onnxruntime")
    body = next(node for node in lowered.graph.node if node.op_type == "Loop").attribute[0].g
    assert not any(node.output[0].endswith("_returned") for node in body.node)
    lowered, _ = lower(parse(RETURNED_AND_READ_SUMS), target="openvino")
    body = next(node for node in lowered.graph.node if node.op_type == "Loop").attribute[0].g
    assert any(node.output[0].endswith("_returned") for node in body.node)


EMPTY_IN_A_BRANCH = """g (float[N,4] boxes, int64 n) => (float[?,4] kept, float[0,4] none) {
    none = Constant <value = float[0,4] {}> ()
    z = Constant <value = int64 {0}> ()
    e = Equal (n, z)
    kept = If (e) <then_branch = t () => (float[0,4] a) {
            a = Constant <value = float[0,4] {}> ()
        }, else_branch = f () => (float[?,4] b) {
            b = Concat <axis = 0> (none, boxes)
        }>
}"""


def test_an_empty_constant_in_a_model_with_an_if_is_made_by_constant_of_shape():
    """OpenVINO 2026.4.1 cannot compile an If whose branch reads a constant of size 0
    (tests/targets/test_runtimes.py); the same tensor made by ConstantOfShape compiles."""
    model, remade = _remade(EMPTY_IN_A_BRANCH)
    assert remade == 2  # the branch's own constant and the outer one its sibling reads
    onnx.checker.check_model(model, full_check=True)
    then, other = (attribute.g for attribute in model.graph.node[-1].attribute)
    assert [node.op_type for node in then.node] == ["Constant", "ConstantOfShape"]
    assert then.output[0].name == then.node[-1].output[0]
    made = {node.output[0]: node.op_type for node in model.graph.node}
    concat = next(node for node in other.node if node.op_type == "Concat")
    assert made[concat.input[0]] == "ConstantOfShape"
    # a graph output of the model keeps its constant (and its name)
    (kept,) = [node for node in model.graph.node if node.output[0] == "none"]
    assert kept.op_type == "Constant"
    boxes = np.arange(8, dtype=np.float32).reshape(2, 4)
    for n in (0, 3):
        assert_same_outputs(parse(EMPTY_IN_A_BRANCH), model, {"boxes": boxes, "n": np.array(n)})


def test_empty_constants_stay_in_a_model_without_an_if():
    no_if = """g (float[N,4] boxes) => (float[?,4] y) {
        none = Constant <value = float[0,4] {}> ()
        y = Concat <axis = 0> (none, boxes)
    }"""
    assert _remade(no_if)[1] == 0
    strings = EMPTY_IN_A_BRANCH.replace("float[0,4] {}", "string[0,4] {}")
    strings = strings.replace("float[0,4] a", "string[0,4] a").replace(
        "float[0,4] none", "string[0,4] none"
    )
    strings = strings.replace("b = Concat <axis = 0> (none, boxes)", "b = Identity (none)")
    strings = strings.replace("float[?,4] b", "string[?,4] b").replace(
        "float[?,4] kept", "string[?,4] kept"
    )
    assert _remade(strings)[1] == 0  # ConstantOfShape makes no strings


CONDITION_OF_RANK_2 = """g (float[1,1] x, float[3] y) => (float[3] z) <bool[1,1] c> {
    t = Constant <value = float {0}> ()
    c = Greater (x, t)
    z = If (c) <then_branch = a () => (float[3] p) { p = Relu (y) },
               else_branch = b () => (float[3] q) { q = Neg (y) }>
}"""


def test_an_if_condition_of_rank_2_becomes_a_scalar():
    """OpenVINO 2026.4.1 refuses an If whose condition has a rank above 1
    (tests/targets/test_runtimes.py); one element of any rank is a valid condition."""
    model, remade = _remade(CONDITION_OF_RANK_2)
    assert remade == 1
    branch = next(node for node in model.graph.node if node.op_type == "If")
    squeeze = next(node for node in model.graph.node if node.output[0] == branch.input[0])
    assert squeeze.op_type == "Squeeze" and list(squeeze.input) == ["c"]
    y = np.array([1, -2, 3], np.float32)
    for x in (-1.0, 2.0):
        feeds = {"x": np.full((1, 1), x, np.float32), "y": y}
        assert_same_outputs(parse(CONDITION_OF_RANK_2), model, feeds)


def test_a_scalar_or_1d_condition_or_a_speed_first_target_keeps_the_condition():
    for shape in ("", "[1]"):
        text = CONDITION_OF_RANK_2.replace("float[1,1] x", f"float{shape} x")
        assert _remade(text.replace("bool[1,1] c", f"bool{shape} c"))[1] == 0
    model = ir.from_proto(parse(CONDITION_OF_RANK_2))
    speed_first = RuntimeWorkaroundsPass(speed_first=True)
    speed_first(model)
    assert speed_first.remade == 0


def test_a_speed_first_target_keeps_empty_constants_but_a_loops_start():
    model = ir.from_proto(parse(EMPTY_IN_A_BRANCH))
    speed_first = RuntimeWorkaroundsPass(speed_first=True)
    speed_first(model)
    assert speed_first.remade == 0


# A Loop of run-time trip count whose scan output is a graph output, and a while loop that
# stops early with a carried value and a scan output read by a Relu.
COUNTED_ROWS = ROWS_OF_A_RUN_TIME_COUNT
WHILE_ROWS = """g (float[N, 3] x, int64 m, bool go) => (float[3] total, float[M, 3] y) {
    z = Constant<value = float[3] {0, 0, 0}>()
    total, rows = Loop(m, go, z) <body = b (int64 i, bool ci, float[3] a)
                                        => (bool co, float[3] a2, float[3] row) {
        row = Gather<axis = 0>(x, i)
        a2 = Add(a, row)
        s = ReduceSum<keepdims = 0>(a2)
        lim = Constant<value = float {20}>()
        co = Less(s, lim)
    }>
    y = Relu(rows)
}"""


def _counted(text: str, **options) -> onnx.ModelProto:
    model = ir.from_proto(parse(text))
    RuntimeWorkaroundsPass(**{"openvino_loops": True, **options})(model)
    return ir.to_proto(model)


def test_a_loop_that_may_run_no_iteration_cuts_its_scan_outputs_to_a_carried_count():
    model = _counted(COUNTED_ROWS)
    onnx.checker.check_model(model, full_check=True)
    assert op_counts(model) == {
        "Loop": 1,
        "Constant": 6,
        "Max": 1,  # the trip count, clamped at 0
        "Range": 1,
        "Add": 1,
        "Identity": 1,
        "Gather": 2,
    }
    (loop,) = [node for node in model.graph.node if node.op_type == "Loop"]
    assert len(loop.input) == 3 and len(loop.output) == 2  # the count is carried from 0
    assert [output.name for output in model.graph.output] == ["rows"]  # the name stays
    (first_rows,) = [node for node in model.graph.node if node.op_type == "Gather"]
    assert first_rows.output == ["rows"] and first_rows.input[0] == loop.output[1]
    (count,) = [node for node in model.graph.node if node.op_type == "Range"]
    assert count.input[1] == loop.output[0] and first_rows.input[1] == count.output[0]
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for m in (0, 1, 3, 5):
        assert_same_outputs(parse(COUNTED_ROWS), model, {"x": x, "m": np.array(m)})


def test_a_while_loop_that_stops_early_counts_the_iterations_it_ran():
    model = _counted(WHILE_ROWS)
    onnx.checker.check_model(model, full_check=True)
    assert op_counts(model)["Range"] == 1
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    for m, go in ((0, True), (8, False), (8, True), (2, True), (-1, True)):
        feeds = {"x": x, "m": np.array(m), "go": np.array(go)}
        outputs = assert_same_outputs(parse(WHILE_ROWS), model, feeds)
        if m <= 0 or not go:  # no iteration ran: no rows
            assert outputs[1].shape == (0, 3)


def test_a_loop_sure_to_run_the_default_target_and_a_second_pass_add_no_count():
    sure = COUNTED_ROWS.replace(
        "rows = Loop(m, c)", "k = Constant<value = int64 {4}>()\n    rows = Loop(k, c)"
    )
    assert "Range" not in op_counts(_counted(sure))  # a positive constant count, starts true
    # the default target and --target onnxruntime leave it out: it costs time in onnxruntime
    assert "Range" not in op_counts(_counted(COUNTED_ROWS, openvino_loops=False))
    assert "Range" in op_counts(_counted(COUNTED_ROWS.replace("(m, c)", "(m, )")))  # no condition
    once = ir.from_proto(_counted(COUNTED_ROWS))
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0  # already counted: the pass is idempotent
    assert op_counts(ir.to_proto(once))["Range"] == 1


NEGATIVE_COUNT = COUNTED_ADDS


def test_a_trip_count_that_may_be_negative_is_clamped_at_zero_for_openvino():
    model = _counted(NEGATIVE_COUNT)
    onnx.checker.check_model(model, full_check=True)
    (clamp,) = [node for node in model.graph.node if node.op_type == "Max"]
    (loop,) = [node for node in model.graph.node if node.op_type == "Loop"]
    assert loop.input[0] == clamp.output[0] and clamp.input[0] == "m"
    for m in (-5, -1, 0, 2):  # no iteration for a negative count, as before
        assert_same_outputs(
            parse(NEGATIVE_COUNT), model, {"x": np.zeros(3, np.float32), "m": np.array(m)}
        )
    again = ir.from_proto(model)
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(again)
    assert second.remade == 0  # Max(m, 0) is never negative: idempotent


def test_a_trip_count_never_negative_is_left_alone():
    constant = NEGATIVE_COUNT.replace(
        "acc = Loop(m, t, x)", "k = Constant<value = int64 {3}>()\n    acc = Loop(k, t, x)"
    )
    shaped = NEGATIVE_COUNT.replace(
        "acc = Loop(m, t, x)",
        "s = Shape(x)\n    z = Constant<value = int64 {0}>()\n"
        "    k = Gather(s, z)\n    acc = Loop(k, t, x)",
    )
    for text in (constant, shaped):
        assert "Max" not in op_counts(_counted(text))
    assert "Max" not in op_counts(_counted(NEGATIVE_COUNT, openvino_loops=False))  # the default


# The product of the first two dims of x, then x reshaped to it (the lists' stacked forms merge
# two dims so): OpenVINO 2026.4.1 mistakes the product for B when x has a static 0 dim.
DIMS_PRODUCT = """g (float[B,0,6] x) => (float[?,6] y, int64[1] merged) {
    pair = Shape<end = 2>(x)
    merged = ReduceProd<keepdims = 1>(pair)
    six = Constant<value = int64[1] {6}>()
    target = Concat<axis = 0>(merged, six)
    y = Reshape<allowzero = 1>(x, target)
}"""


def test_a_product_of_dims_becomes_a_mul_of_slices_for_openvino():
    model, remade = openvino_forms(DIMS_PRODUCT)
    assert remade == 1
    counts = op_counts(model)
    # B sliced out of the Shape, the static 0 a constant (as the cleanup would fold it)
    assert "ReduceProd" not in counts and counts["Slice"] == 1 and counts["Mul"] == 1
    assert [output.name for output in model.graph.output] == ["y", "merged"]
    (mul,) = [node for node in model.graph.node if node.op_type == "Mul"]
    assert mul.output == ["merged"]  # the product keeps its name
    (zero,) = [node for node in model.graph.node if node.output[0] == mul.input[1]]
    assert zero.op_type == "Constant" and onnx.numpy_helper.to_array(zero.attribute[0].t) == [0]
    original = parse(DIMS_PRODUCT.replace("float[B,0,6] x", "float[B,N,6] x"))
    rewritten = ir.from_proto(onnx.shape_inference.infer_shapes(original))
    RuntimeWorkaroundsPass(openvino_loops=True)(rewritten)
    assert "ReduceProd" not in op_counts(rewritten) and op_counts(rewritten)["Slice"] == 2
    for shape in ((3, 0, 6), (0, 4, 6), (2, 5, 6), (1, 1, 6)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        outputs = assert_same_outputs(original, ir.to_proto(rewritten), {"x": x})
        assert outputs[1].tolist() == [shape[0] * shape[1]]
        assert_outputs_equal(run_reference(original, {"x": x}), outputs)
    zero = np.zeros((3, 0, 6), np.float32)
    assert_same_outputs(parse(DIMS_PRODUCT), model, {"x": zero})


def test_a_product_of_three_or_more_elements_multiplies_them_all():
    text = """g (int64[4] v) => (int64[1] p) { p = ReduceProd(v) }"""
    model, _ = openvino_forms(text)
    assert op_counts(model) == {"Constant": 5, "Slice": 4, "Mul": 3}
    for v in ([2, 3, 4, 5], [7, 0, -1, 3], [-2, -3, 1, 1], [2**20, 2**20, 4, 1]):
        feeds = {"v": np.array(v, np.int64)}
        outputs = assert_same_outputs(parse(text), model, feeds)
        assert outputs[0].tolist() == [int(np.prod(v))]
        assert_outputs_equal(run_reference(parse(text), feeds), outputs)


def test_other_products_and_other_targets_keep_their_reduce_prod():
    kept = {
        "axes given": "axes = Constant<value = int64[1] {0}>()\n p = ReduceProd(v, axes)",
        "keepdims=0": "p = ReduceProd<keepdims = 0>(v)",
        "noop_with_empty_axes": "p = ReduceProd<noop_with_empty_axes = 1>(v)",
    }
    for why, body in kept.items():
        shape = "int64" if why == "keepdims=0" else "int64[?]"
        text = f"g (int64[2] v) => ({shape} p) {{ {body} }}"
        model, remade = openvino_forms(text)
        assert remade == 0 and op_counts(model)["ReduceProd"] == 1, why
    for source, result in (
        ("float[2] v", "float[1] p"),
        ("int64[N] v", "int64[1] p"),
        ("int64[1] v", "int64[1] p"),
        ("int64[9] v", "int64[1] p"),
        ("int64[2,2] v", "int64[1,1] p"),
    ):
        model, remade = openvino_forms(f"g ({source}) => ({result}) {{ p = ReduceProd(v) }}")
        assert remade == 0 and op_counts(model)["ReduceProd"] == 1, source
    model, remade = openvino_forms(DIMS_PRODUCT, openvino_loops=False)  # other targets
    assert remade == 0 and op_counts(model)["ReduceProd"] == 1
    model, remade = openvino_forms(DIMS_PRODUCT.replace("Shape<end = 2>(x)", "Shape(x)"))
    assert remade == 1 and op_counts(model)["Mul"] == 2  # 3 dims: a product of 3
    once = ir.from_proto(openvino_forms(DIMS_PRODUCT)[0])
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0  # no ReduceProd left: idempotent


# the stacked forms' merge of two dims: a Slice of a Shape, then their product
SLICED_PRODUCT = """g (float[B,0,6] x) => (float[?,6] y) {
    shape = Shape(x)
    zero1 = Constant<value = int64[1] {0}>()
    two = Constant<value = int64[1] {2}>()
    pair = Slice(shape, zero1, two)
    merged = ReduceProd<keepdims = 1>(pair)
    six = Constant<value = int64[1] {6}>()
    target = Concat<axis = 0>(merged, six)
    y = Reshape<allowzero = 1>(x, target)
}"""


def test_a_product_of_sliced_dims_reads_them_from_the_shape():
    """`ReduceProd(Slice(Shape(x), [0], [2]))`: each dim is sliced from the Shape itself (the
    Slice of two goes, with its bounds), a static one is a constant: what a second lowering's
    cleanup makes of it, so lowering again changes nothing."""
    model, remade = openvino_forms(SLICED_PRODUCT)
    assert remade == 1
    assert op_counts(model) == {
        "Shape": 1, "Constant": 4, "Slice": 1, "Mul": 1, "Concat": 1, "Reshape": 1,
    }  # fmt: skip
    (piece,) = [node for node in model.graph.node if node.op_type == "Slice"]
    assert piece.input[0] == "shape"
    assert not {"zero1", "two", "pair"} & {o for node in model.graph.node for o in node.output}
    for text in (SLICED_PRODUCT, SLICED_PRODUCT.replace("float[B,0,6] x", "float[B,N,6] x")):
        rewritten = openvino_forms(text)[0]
        for shape in ((3, 0, 6), (0, 2, 6), (2, 3, 6)):
            if "B,0,6" in text and shape[1] != 0:
                continue
            x = np.ones(shape, np.float32)
            assert_same_outputs(parse(text), rewritten, {"x": x})


# A segment of n elements from s: n < 0 gives none (torch.arange(s, s + n))
SEGMENT = """g (int64[M] x, int64 s, int64 n) => (int64[?] y) {
    end = Add(s, n)
    one = Constant<value = int64 {1}>()
    positions = Range(s, end, one)
    y = Gather(x, positions)
}"""


def test_a_range_of_constant_step_is_kept_from_running_backwards_for_openvino():
    model, remade = openvino_forms(SEGMENT)
    assert remade == 1
    (clamp,) = [node for node in model.graph.node if node.op_type == "Max"]
    (numbers,) = [node for node in model.graph.node if node.op_type == "Range"]
    assert list(clamp.input) == ["end", "s"] and numbers.input[1] == clamp.output[0]
    x = np.arange(10, 18, dtype=np.int64)
    for s, n in ((3, -1), (5, -3), (3, 0), (2, 4), (0, 8), (7, -7)):
        feeds = {"x": x, "s": np.array(s), "n": np.array(n)}
        outputs = assert_same_outputs(parse(SEGMENT), model, feeds)
        assert outputs[0].tolist() == x[s : s + max(n, 0)].tolist()
        assert_outputs_equal(run_reference(parse(SEGMENT), feeds), outputs)
    once = ir.from_proto(model)
    second = RuntimeWorkaroundsPass(openvino_loops=True)
    second(once)
    assert second.remade == 0  # already clamped: idempotent


def test_a_range_of_negative_step_is_clamped_with_min():
    text = """g (float s, float limit) => (float[?] y) {
        step = Constant<value = float {-0.5}>()
        y = Range(s, limit, step)
    }"""
    model, remade = openvino_forms(text)
    assert remade == 1 and op_counts(model)["Min"] == 1 and "Max" not in op_counts(model)
    for s, limit in ((2.0, 5.0), (2.0, 2.0), (5.0, 2.0), (-1.0, -3.25)):
        feeds = {"s": np.array(s, np.float32), "limit": np.array(limit, np.float32)}
        outputs = assert_same_outputs(parse(text), model, feeds)
        assert outputs[0].tolist() == np.arange(s, limit, -0.5, dtype=np.float32).tolist()
    opset_11 = openvino_forms(text, opset=11)[0]  # Min takes floats in opset 11
    assert op_counts(opset_11)["Min"] == 1


def test_a_range_that_cannot_run_backwards_or_whose_step_is_not_constant_is_left_alone():
    kept = {
        "a run-time step": SEGMENT.replace("Range(s, end, one)", "Range(s, end, n)"),
        "from 0 to a size": SEGMENT.replace("end = Add(s, n)", "end = Size(x)").replace(
            "Range(s, end, one)", "Range(zero, end, one)\n    zero = Constant<value = int64 {0}>()"
        ),
        "a step of 0": SEGMENT.replace("int64 {1}", "int64 {0}"),
    }
    for why, text in kept.items():
        text = _topological(text)
        model, remade = openvino_forms(text)
        assert remade == 0 and not {"Max", "Min"} & set(op_counts(model)), why
    model, remade = openvino_forms(SEGMENT, openvino_loops=False)  # other targets
    assert remade == 0 and "Max" not in op_counts(model)
    model, remade = openvino_forms(SEGMENT, opset=11)  # no integer Max before opset 12
    assert remade == 0 and "Max" not in op_counts(model)


def _topological(text: str) -> str:
    """`text` with a line defining `zero` moved to the top of the body, where it is read."""
    lines = text.split("\n")
    moved = [line for line in lines if line.strip().startswith("zero =")]
    rest = [line for line in lines if line not in moved]
    return "\n".join([rest[0], *moved, *rest[1:]])


def test_a_counted_loops_range_needs_no_clamp():
    """The Range that cuts a Loop's scan outputs to its count of iterations runs from 0 to a
    count that starts at 0 and grows by 1: never backwards, so it reads the count as it is."""
    model = _counted(COUNTED_ROWS)
    assert op_counts(model)["Max"] == 1  # the trip count's clamp only
    (loop,) = [node for node in model.graph.node if node.op_type == "Loop"]
    (numbers,) = [node for node in model.graph.node if node.op_type == "Range"]
    assert numbers.input[1] == loop.output[0]


# a Range from 0 to a value a Loop carries from 0, adding `step` each iteration (no Gather of
# it: onnxruntime's Gather of Range(0, m) slices, runtime_quirks 'gather-of-negative-range')
CARRIED_LIMIT = """g (int64 m) => (int64[?] positions) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    k = Loop(m, t, zero) <body = b (int64 i, bool c, int64 a) => (bool c_out, int64 a2) {
        c_out = Identity(c)
        step = Constant<value = int64 {%d}>()
        a2 = Add(a, step)
    }>
    one = Constant<value = int64 {1}>()
    positions = Range(zero, k, one)
}"""


def test_a_range_to_a_count_that_may_fall_below_zero_is_clamped():
    for step, clamped in ((1, 0), (2, 0), (-1, 1)):
        model, remade = openvino_forms(CARRIED_LIMIT % step)
        max_count = 1 + clamped  # the trip count's clamp, and the Range's when it may run back
        assert remade == max_count and op_counts(model)["Max"] == max_count, step
        for m in (0, 2, 3):
            outputs = assert_same_outputs(parse(CARRIED_LIMIT % step), model, {"m": np.array(m)})
            assert outputs[0].tolist() == list(range(max(m * step, 0)))
