"""Runtime workarounds: Transpose -> Cast is emitted as Cast -> Transpose, because onnxruntime
segfaults creating a session for Transpose -> Cast -> MatMul (microsoft/onnxruntime#28392).
Loading happens in a child process, so that a crash fails the test instead of killing pytest."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
from support import (
    assert_outputs_equal,
    assert_same_outputs,
    lower,
    op_counts,
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
            s = SplitToSequence <axis = 1> (x, four)
            four = Constant <value = int64 {4}> ()
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
