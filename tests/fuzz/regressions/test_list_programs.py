"""Bugs the list programs of the fuzzer found (seeds from 1,000,000 on, tests/fuzz/list_shapes.py),
each minimised to a small model. Same contract as test_regressions.py: lower, check (full_check),
run both under onnxruntime and compare, and check the property the seed broke. A bug not fixed
yet is marked xfail(strict=True), so the fix must remove the mark.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (
    blames_run_time_loops,
    check_properties,
    compare_outputs,
    lower_and_compare,
    parse,
    run_ort,
    sequence_op_total,
)

import seqlower
from seqlower.verification.runner import IsolatedRunner


def test_a_read_of_an_empty_list_in_a_loop_that_never_runs_is_not_an_error():
    """Fuzz seeds 1000307, 1000338, 1000640, 1000767 and ten more in 1000000..1002999: the list
    is always empty, but it is read only in a Loop body whose trip count (0 here) is known at
    run time: the model is valid and onnxruntime runs it."""
    model = parse("""g (int64 m) => (float y) {
        s = SequenceEmpty <dtype = 1> ()
        zero = Constant <value = float {0}> ()
        y = Loop (m, , zero) <body = b (int64 i, bool c, float acc) => (bool co, float out) {
            e = SequenceAt (s, i)
            t = ReduceSum <keepdims = 0> (e)
            out = Add (acc, t)
            co = Identity (c)
        }>
    }""")
    lower_and_compare(model, {"m": np.array(0)})


def test_a_list_filled_from_another_loop_built_list_is_lowered_in_one_pass():
    """Fuzz seeds 1000060, 1000116, 1000389, 1000595 and 30 more in 1000000..1002999: l2 takes
    elements of l1 (built from slices of changing length); the rank of l1's elements shows
    only once l1 is tensors, so the first lowering keeps l2 ("the rank of its elements is
    unknown") and the second lowers it (loop-unroll, length-static): not idempotent. The rules
    did not run again after the tensor form either (tract-loop-unroll fired on a second pass
    of seeds 1001869 and 1002099). Both now happen in one lowering."""
    model = parse("""g (int64 m) => (int64 y) {
        s0 = SequenceEmpty <dtype = 1> ()
        x = Constant <value = float[3] {1, 2, 3}> ()
        l1 = Loop (m, , s0) <body = b1 (int64 i, bool c, seq(float) acc)
                                    => (bool co, seq(float) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        zero = Constant <value = int64 {0}> ()
        s1 = SequenceEmpty <dtype = 1> ()
        l2 = Loop (zero, , s1) <body = b2 (int64 j, bool c2, seq(float) acc2)
                                       => (bool co2, seq(float) out2) {
            e = SequenceAt (l1, j)
            out2 = SequenceInsert (acc2, e)
            co2 = Identity (c2)
        }>
        y = SequenceLength (l2)
    }""")
    lowered = lower_and_compare(model, {"m": np.array(2)})
    assert check_properties(model, lowered, {"target": "portable"}) is None


def test_an_int8_list_built_in_a_loop_and_returned_runs():
    """Fuzz seeds 1000649, 1000866, 1002437, 1002512 (1000454 through a SequenceMap): the original
    runs (it has no SplitToSequence); the lowered model's SplitToSequence of int8 does not load
    in onnxruntime (nor would one of uint8, int16, uint16, uint32 or uint64)."""
    model = parse("""g (int8[2] x, int64 m) => (seq(int8) s) {
        s0 = SequenceEmpty <dtype = 3> ()
        s = Loop (m, , s0) <body = b (int64 i, bool c, seq(int8) acc) => (bool co, seq(int8) out) {
            n = Neg (x)
            out = SequenceInsert (acc, n)
            co = Identity (c)
        }>
    }""")
    lower_and_compare(model, {"x": np.array([1, -2], np.int8), "m": np.array(2)})


def test_a_loop_concatenating_growing_string_slices_lowers():
    """Fuzz seed 1000266: ConcatFromSequence on the last axis of
    string slices of growing width, appended in a Loop; `optimize` raised SerdeError (a
    ConstantOfShape whose value is a string tensor holding 0)."""
    model = parse("""g (string[2,3] x, int64 m) => (string[?,?] y) {
        s0 = SequenceEmpty <dtype = 8> ()
        s = Loop (m, , s0) <body = b (int64 i, bool c, seq(string) acc)
                                   => (bool co, seq(string) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop, one)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        y = ConcatFromSequence <axis = -1> (s)
    }""")
    x = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    lower_and_compare(model, {"x": x, "m": np.array(3)})


def test_elements_appended_in_a_loop_keep_their_own_shape():
    """Fuzz seed 1000136: l starts as [x] (x: [3, 2]) and gets x[:i+1] appended; onnx infers
    l as seq(float[3, 2]). l2 collects l[-1] ([2, 2]) twice; ConcatFromSequence(l2, axis=-1)
    became Reshape(Transpose(stack), [3, -1]), which onnxruntime refuses (8 values). The
    element shape of a loop-built list is now the join of what it holds (passes/
    carried_sequences.py)."""
    model = parse("""g (float[3,2] x, int64 m, int64 k) => (float[?,?] y) {
        s0 = SequenceConstruct (x)
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc)
                                   => (bool co, seq(float) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        e0 = SequenceEmpty <dtype = 1> ()
        l2 = Loop (k, , e0) <body = b2 (int64 j, bool c2, seq(float) acc2)
                                    => (bool co2, seq(float) out2) {
            last = Constant <value = int64 {-1}> ()
            at = SequenceAt (l, last)
            out2 = SequenceInsert (acc2, at)
            co2 = Identity (c2)
        }>
        y = ConcatFromSequence <axis = -1> (l2)
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    # in a child process: the wrong lowering this test pins aborted onnxruntime 1.20
    feeds = {"x": x, "m": np.array(2), "k": np.array(2)}
    expected = run_ort(model, feeds)
    lowered, _ = seqlower.optimize(ir.from_proto(model), target="portable")
    with IsolatedRunner("onnxruntime", ir.to_proto(lowered)) as runner:
        outcome = runner.run(feeds)
    assert outcome.ok, outcome.error
    problem = compare_outputs(expected, list(outcome.outputs.values()))  # type: ignore[union-attr]
    assert problem is None, problem


def test_a_branch_reading_a_loop_built_list_declares_no_wrong_shape():
    """Fuzz seed 1001339: l (a sequence output, so it stays) starts as [x] and gets x[:i+1]
    appended; onnx infers seq(float[3, 2]). The lowered If's branch output is declared
    float[3, 2], and onnxruntime refuses the [1, 2] that SequenceAt(l, 1) gives."""
    model = parse("""g (float[3,2] x, int64 m, bool k) => (float[?,?] y, seq(float[?,?]) l) {
        s0 = SequenceConstruct (x)
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc)
                                   => (bool co, seq(float) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        y = If (k) <
            then_branch = t () => (float[?,?] u) {
                one1 = Constant <value = int64 {1}> ()
                u = SequenceAt (l, one1)
            },
            else_branch = e () => (float[?,?] v) {
                zero = Constant <value = int64 {0}> ()
                v = SequenceAt (l, zero)
            }
        >
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    lower_and_compare(model, {"x": x, "m": np.array(2), "k": np.array(True)})


def test_elements_read_from_a_loop_built_list_are_not_stacked_by_an_inferred_shape():
    """Fuzz seed 1000147 (and 1000412, 1000735, 1001299, 1001397, 1002973, 1002984): l2
    collects l[j] for every j; onnx infers SequenceAt(l, j) as float[3, 2] (l starts as
    [x]), so l2 was given the stacked layout (its Concat of Unsqueeze(l[j]) failed on the
    [1, 2] element), later scan outputs (onnxruntime: "Inconsistent shape in loop output")."""
    model = parse("""g (float[3,2] x, int64 m) => (float[?,?] y) {
        s0 = SequenceConstruct (x)
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc)
                                   => (bool co, seq(float) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        n = SequenceLength (l)
        e0 = SequenceEmpty <dtype = 1> ()
        l2 = Loop (n, , e0) <body = b2 (int64 j, bool c2, seq(float) acc2)
                                    => (bool co2, seq(float) out2) {
            at = SequenceAt (l, j)
            out2 = SequenceInsert (acc2, at)
            co2 = Identity (c2)
        }>
        y = ConcatFromSequence <axis = 0> (l2)
    }""")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    lower_and_compare(model, {"x": x, "m": np.array(2)})


def test_no_reason_blames_a_run_time_trip_count():
    """Fuzz seeds 61, 102, 240, 288 (and list seeds) with the reasons property of
    tools/fuzz.py: a run-time trip count or condition stops no list from becoming tensors
    (the tensor form carries lists through such loops), so no printed reason may blame one."""
    model = parse("""g (float[2] a, int64 m) => (seq(float[?]) l) {
        s0 = SequenceEmpty <dtype = 1> ()
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc)
                                   => (bool co, seq(float) out) {
            k = SequenceLength (acc)
            kf = Cast <to = 1> (k)
            e = Add (a, kf)
            out = SequenceInsert (acc, e)
            co = Identity (c)
        }>
    }""")
    _, report = seqlower.optimize(ir.from_proto(model), target="portable")
    assert blames_run_time_loops(report, {"target": "portable"}) is None


def test_an_empty_element_read_from_a_loop_built_list_is_not_stacked():
    """Fuzz seed 1001116: l = [x, x[:0]] (a Loop appending Slice(x, 0, i)); l2 collects both;
    ConcatFromSequence(l2) is [5.0] in onnxruntime; with the stacked layout the lowered model
    gave two values, with scan outputs it failed at run time."""
    model = parse("""g (float[1] x, int64 m) => (float[?] y) {
        s0 = SequenceConstruct (x)
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc)
                                   => (bool co, seq(float) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            p = Slice (x, z, i1)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        two = Constant <value = int64 {2}> ()
        e0 = SequenceEmpty <dtype = 1> ()
        l2 = Loop (two, , e0) <body = b2 (int64 j, bool c2, seq(float) acc2)
                                     => (bool co2, seq(float) out2) {
            at = SequenceAt (l, j)
            out2 = SequenceInsert (acc2, at)
            co2 = Identity (c2)
        }>
        y = ConcatFromSequence <axis = 0> (l2)
    }""")
    lower_and_compare(model, {"x": np.array([5], np.float32), "m": np.array(1)})


def test_a_string_list_appended_in_a_loop_keeps_every_element():
    """Fuzz seeds 1000005, 1000013, 1000017, 1000023, 1000027, 1000034 (test_never_costs_more):
    a Loop appending a string tensor. `--target onnxruntime` first raised TypeError (the cost
    model sized strings by bit width; fixed); every target now gives ['a', 'b', '', ''] where
    onnxruntime runs the original as ['a', 'b', 'a', 'b']: a silent difference."""
    model = parse("""g (string[2] x, int64 m) => (string[?] y) {
        s0 = SequenceEmpty <dtype = 8> ()
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(string) acc)
                                   => (bool co, seq(string) out) {
            out = SequenceInsert (acc, x)
            co = Identity (c)
        }>
        y = ConcatFromSequence <axis = 0> (l)
    }""")
    feeds = {"x": np.array(["a", "b"], dtype=object), "m": np.array(2)}
    expected = run_ort(model, feeds)
    lowered, _ = seqlower.optimize(ir.from_proto(model), target="onnxruntime")
    problem = compare_outputs(expected, run_ort(ir.to_proto(lowered), feeds))
    assert problem is None, problem


def test_a_list_of_scalars_copied_in_a_loop_keeps_its_empty_shape_rows():
    """Fuzz seeds 1001004, 1002311: l gets x[i] (a scalar) inserted at position len(l); l2
    collects -l[j]; then an insert at 1 and a read. The Loop that builds l2's table of
    shapes became scan outputs whose rows ([1, 0]) were merged by a Reshape that read the 0 as
    "copy the input's dim" (it now has allowzero)."""
    model = parse("""g (int64[2] x, int64 m, int64 q) => (int64 y) {
        s0 = SequenceEmpty <dtype = 7> ()
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(int64) acc)
                                   => (bool co, seq(int64) out) {
            one = Constant <value = int64[1] {1}> ()
            i1 = Reshape (i, one)
            i2 = Add (i1, one)
            z = Constant <value = int64[1] {0}> ()
            p = Slice (x, i1, i2, z)
            none = Constant <value = int64[0] {}> ()
            e = Reshape (p, none)
            len = SequenceLength (acc)
            out = SequenceInsert (acc, e, len)
            co = Identity (c)
        }>
        n = SequenceLength (l)
        e0 = SequenceEmpty <dtype = 7> ()
        l2 = Loop (n, , e0) <body = b2 (int64 j, bool c2, seq(int64) acc2)
                                    => (bool co2, seq(int64) out2) {
            at = SequenceAt (l, j)
            ng = Neg (at)
            out2 = SequenceInsert (acc2, ng)
            co2 = Identity (c2)
        }>
        k = Constant <value = int64 {0}> ()
        one0 = Constant <value = int64 {1}> ()
        s3 = SequenceInsert (l2, k, one0)
        y = SequenceAt (s3, q)
    }""")
    lower_and_compare(model, {"x": np.array([3, 1]), "m": np.array(1), "q": np.array(-1)})


def test_a_string_list_copied_in_a_loop_is_lowered_in_one_pass():
    """Fuzz seeds 1001522, 1001991 (strings; 1000073, 1000426, 1000473, 1000595, 1001169,
    1001405 and 1002461 reach the same through loop-concat-to-scan): l2 collects l[r];
    once l is tensors, loop-append-to-scan turns l2 into scan outputs read back through
    SplitToSequence + SequenceAt, which at-of-split refuses for strings (no Gather of
    strings); lowering the output again fires tensor-list: not idempotent."""
    model = parse("""g (string[2,3] x, int64 m, int32 r) => (string[?,?] y) {
        s0 = SequenceEmpty <dtype = 8> ()
        l = Loop (m, , s0) <body = b (int64 i, bool c, seq(string) acc)
                                   => (bool co, seq(string) out) {
            one = Constant <value = int64[1] {1}> ()
            z = Constant <value = int64[1] {0}> ()
            i1 = Reshape (i, one)
            stop = Add (i1, one)
            p = Slice (x, z, stop)
            out = SequenceInsert (acc, p)
            co = Identity (c)
        }>
        n = SequenceLength (l)
        e0 = SequenceEmpty <dtype = 8> ()
        l2 = Loop (n, , e0) <body = b2 (int64 j, bool c2, seq(string) acc2)
                                    => (bool co2, seq(string) out2) {
            at = SequenceAt (l, r)
            out2 = SequenceInsert (acc2, at)
            co2 = Identity (c2)
        }>
        zero = Constant <value = int64 {0}> ()
        y = SequenceAt (l2, zero)
    }""")
    x = np.arange(6).reshape(2, 3).astype(str).astype(object)
    lowered = lower_and_compare(model, {"x": x, "m": np.array(1), "r": np.array(0, np.int32)})
    assert check_properties(model, lowered, {"target": "portable"}) is None


def test_an_empty_list_a_loop_of_no_iteration_passes_on_is_lowered_where_it_is_read():
    """Fuzz seed 1000956: a Loop of no iteration passes an empty list to a sequence-typed model
    output (kept), and another Loop reads that output. Unrolled, the Loop leaves the one empty
    list read by the output and by the reader, so the reader stayed a SequenceAt (the list is
    kept for the output); normalize gives each use of an empty list its own, but only before
    the rules ran. The tensor-list tier now does so too: the reader is lowered in one pass."""
    model = parse("""g (int32[4,3] x, int64 n) => (int64 m, seq(int32) kept) {
        none = Constant <value = int64 {0}> ()
        e = SequenceEmpty <dtype = 6> ()
        kept = Loop (none, , e) <body = b (int64 i, bool c, seq(int32) acc)
                                      => (bool co, seq(int32) out) {
            out = SequenceInsert (acc, x)
            co = Identity (c)
        }>
        e2 = SequenceEmpty <dtype = 6> ()
        t = Constant <value = bool {1}> ()
        read = Loop (n, t, e2) <body = b2 (int64 j, bool c2, seq(int32) acc2)
                                    => (bool co2, seq(int32) out2) {
            at = SequenceAt (kept, j)
            neg = Neg (at)
            out2 = SequenceInsert (acc2, neg)
            co2 = Identity (c2)
        }>
        m = SequenceLength (read)
    }""")
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    lowered, _ = seqlower.optimize(model)  # the default target: elements of run-time rank too
    assert sequence_op_total(lowered) == 1  # the empty list the output keeps
    assert check_properties(model, lowered) is None
    for n in (0, 1):  # reading the empty list fails in both where the loop runs
        feeds = {"x": x, "n": np.array(n)}
        try:
            expected = run_ort(model, feeds)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017
                run_ort(lowered, feeds)
            continue
        assert compare_outputs(expected, run_ort(lowered, feeds)) is None
