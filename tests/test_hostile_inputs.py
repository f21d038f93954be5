"""Tiny files that used to hang the optimizer or exhaust memory: each now gives a model or a
one-line refusal. Only outcomes are checked here (the refusal text, the exit code, the numbers
the lowered model computes); bench/scaling.py times them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import seqlower
from seqlower.analysis.split_plan import plan_split
from seqlower.analysis.static_values import StaticValues
from seqlower.budget import MAX_EXPANSION
from seqlower.errors import InvalidModelError, SeqlowerError
from seqlower.io import load_model
from seqlower.rewriter import MAX_HINT, NameAllocator
from seqlower.strict_inference import check_fully, inferred_in_runs
from tests.support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    run_ort,
    sequence_op_count,
)

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializer=list(initializers))
    # IR 10: onnxruntime 1.20, the oldest supported, reads no newer
    return helper.make_model(graph, opset_imports=OPSET, ir_version=10)


def _float(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def chunks_at_runtime_position(count: int) -> onnx.ModelProto:
    """SplitToSequence of x[count] into `count` chunks, one read at a run-time position."""
    return _model(
        [
            helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
            helper.make_node("SequenceAt", ["s", "i"], ["y"]),
        ],
        [_float("x", [count]), helper.make_tensor_value_info("i", TensorProto.INT64, [])],
        [_float("y", ["d"])],
    )


def identities_after_at(count: int) -> onnx.ModelProto:
    """A SequenceAt at a run-time position, then `count` Identity nodes in a chain."""
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
        helper.make_node("SequenceAt", ["s", "i"], ["t0"]),
    ]
    nodes += [helper.make_node("Identity", [f"t{k}"], [f"t{k + 1}"]) for k in range(count)]
    return _model(
        nodes,
        [_float("x", [4, 3]), helper.make_tensor_value_info("i", TensorProto.INT64, [])],
        [_float(f"t{count}", ["d"])],
    )


def inserts_in_a_row(count: int) -> onnx.ModelProto:
    """`count` SequenceInserts of x into an empty sequence, then their concatenation."""
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT)]
    nodes += [
        helper.make_node("SequenceInsert", [f"s{k}", "x"], [f"s{k + 1}"]) for k in range(count)
    ]
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0))
    return _model(nodes, [_float("x", [2])], [_float("y", ["d"])])


def every_position_read_and_rebuilt(count: int) -> onnx.ModelProto:
    """A list of 64 rows read at `count` constant positions (each of -32..31 in turn), the
    elements made into one list again by a SequenceConstruct of `count` inputs and stacked."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)]
    for k in range(count):
        position = helper.make_tensor(f"p{k}", TensorProto.INT64, [], [k % 64 - 32])
        nodes.append(helper.make_node("Constant", [], [f"p{k}"], value=position))
        nodes.append(helper.make_node("SequenceAt", ["s", f"p{k}"], [f"e{k}"]))
    nodes.append(helper.make_node("SequenceConstruct", [f"e{k}" for k in range(count)], ["all"]))
    nodes.append(helper.make_node("ConcatFromSequence", ["all"], ["y"], axis=0, new_axis=1))
    return _model(nodes, [_float("x", [64, 2])], [_float("y", ["n", 2])])


def _list_of_pairs(name: str) -> onnx.ValueInfoProto:
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    return helper.make_value_info(name, helper.make_sequence_type_proto(element))


def ifs_appending_in_a_row(count: int) -> onnx.ModelProto:
    """`count` Ifs in a row, each appending x (then) or x + x (else) to the list the one before
    gave, the list stacked at the end."""
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT)]
    for k in range(count):
        then = helper.make_graph(
            [helper.make_node("SequenceInsert", [f"s{k}", "x"], [f"t{k}"])],
            f"then{k}", [], [_list_of_pairs(f"t{k}")],
        )  # fmt: skip
        otherwise = helper.make_graph(
            [
                helper.make_node("Add", ["x", "x"], [f"xx{k}"]),
                helper.make_node("SequenceInsert", [f"s{k}", f"xx{k}"], [f"u{k}"]),
            ],
            f"else{k}", [], [_list_of_pairs(f"u{k}")],
        )  # fmt: skip
        nodes.append(
            helper.make_node("If", ["c"], [f"s{k + 1}"], then_branch=then, else_branch=otherwise)
        )
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0, new_axis=1))
    inputs = [_float("x", [2]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    return _model(nodes, inputs, [_float("y", ["n", 2])])


def map_of_a_long_body(count: int) -> onnx.ModelProto:
    """SequenceMap over the rows of x whose body is Relu(e) followed by `count` Adds of e."""
    body_nodes = [helper.make_node("Relu", ["e"], ["b0"])]
    body_nodes += [helper.make_node("Add", [f"b{k}", "e"], [f"b{k + 1}"]) for k in range(count)]
    body = helper.make_graph(body_nodes, "body", [_float("e", [3])], [_float(f"b{count}", [3])])
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
        helper.make_node("SequenceMap", ["s"], ["m"], body=body),
        helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=0, new_axis=1),
    ]
    return _model(nodes, [_float("x", ["n", 3])], [_float("y", ["n", 3])])


def a_long_elementwise_chain_stacked(count: int) -> onnx.ModelProto:
    """x through `count` Neg, the result the one element of a stacked list."""
    nodes = [helper.make_node("Neg", [f"t{k}"], [f"t{k + 1}"]) for k in range(count)]
    nodes += [
        helper.make_node("SequenceConstruct", [f"t{count}"], ["s"]),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1),
    ]
    return _model(nodes, [_float("t0", [2])], [_float("y", [1, 2])])


def ragged_list_read_at_a_runtime_position(count: int) -> onnx.ModelProto:
    """A SequenceConstruct of `count` inputs of distinct run-time lengths, one read at a
    run-time position."""
    nodes = [
        helper.make_node("SequenceConstruct", [f"x{k}" for k in range(count)], ["s"]),
        helper.make_node("SequenceAt", ["s", "p"], ["y"]),
    ]
    inputs = [_float(f"x{k}", [f"d{k}"]) for k in range(count)]
    inputs.append(helper.make_tensor_value_info("p", TensorProto.INT64, []))
    return _model(nodes, inputs, [_float("y", ["n"])])


def nested_loops_appending(depth: int) -> onnx.ModelProto:
    """`depth` Loops of two iterations each, nested, carrying one list; the innermost appends
    x, so the list ends with 2**depth rows."""

    def body(level: int) -> onnx.GraphProto:
        if level == depth:
            step = helper.make_node("SequenceInsert", [f"q{level}", "x"], [f"r{level}"])
        else:
            step = helper.make_node(
                "Loop", ["two", "", f"q{level}"], [f"r{level}"], body=body(level + 1)
            )
        flag = helper.make_tensor_value_info
        return helper.make_graph(
            [helper.make_node("Identity", [f"c{level}"], [f"d{level}"]), step],
            f"body{level}",
            [
                flag(f"i{level}", TensorProto.INT64, []),
                flag(f"c{level}", TensorProto.BOOL, []),
                _list_of_pairs(f"q{level}"),
            ],
            [flag(f"d{level}", TensorProto.BOOL, []), _list_of_pairs(f"r{level}")],
        )

    two = helper.make_tensor("two", TensorProto.INT64, [], [2])
    nodes = [
        helper.make_node("Constant", [], ["two"], value=two),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["two", "", "empty"], ["all"], body=body(1)),
        helper.make_node("ConcatFromSequence", ["all"], ["y"], axis=0, new_axis=1),
    ]
    return _model(nodes, [_float("x", [2])], [_float("y", ["n", 2])])


def loop_appending_a_long_sum(count: int) -> onnx.ModelProto:
    """A Loop appending, in each iteration, Relu(x) + x + Relu(x) + x ... (`count` Adds, Relu(x)
    read by every other one) to a list, stacked after the loop."""
    flag = helper.make_tensor_value_info
    body = [
        helper.make_node("Identity", ["c"], ["d"]),
        helper.make_node("Relu", ["x"], ["b0"]),
    ]
    body += [
        helper.make_node("Add", [f"b{k}", "x" if k % 2 else "b0"], [f"b{k + 1}"])
        for k in range(count)
    ]
    body.append(helper.make_node("SequenceInsert", ["q", f"b{count}"], ["r"]))
    graph = helper.make_graph(
        body,
        "body",
        [flag("i", TensorProto.INT64, []), flag("c", TensorProto.BOOL, []), _list_of_pairs("q")],
        [flag("d", TensorProto.BOOL, []), _list_of_pairs("r")],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "", "empty"], ["all"], body=graph),
        helper.make_node("ConcatFromSequence", ["all"], ["y"], axis=0, new_axis=1),
    ]
    inputs = [_float("x", [2]), helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    return _model(nodes, inputs, [_float("y", ["m", 2])])


def edits_at_a_runtime_position(count: int, op: str) -> onnx.ModelProto:
    """A list of the `count` + 1 rows of x, then `count` SequenceErases at the run-time position
    p (op "erase"), or `count` SequenceInserts of r at p (op "insert"), stacked at the end."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=0)]
    for k in range(count):
        if op == "erase":
            nodes.append(helper.make_node("SequenceErase", [f"s{k}", "p"], [f"s{k + 1}"]))
        else:
            nodes.append(helper.make_node("SequenceInsert", [f"s{k}", "r", "p"], [f"s{k + 1}"]))
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0, new_axis=1))
    inputs = [_float("x", [count + 1, 2]), _float("r", [2])]
    inputs.append(helper.make_tensor_value_info("p", TensorProto.INT64, []))
    return _model(nodes, inputs, [_float("y", ["n", 2])])


def one_condition_read_by_many_ifs(count: int) -> onnx.ModelProto:
    """`count` Ifs on one condition, each choosing the first (then) or last (else) row of one
    list by a SequenceAt at a constant position in its branch; the choices summed."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)]
    for k in range(count):
        branches = {}
        for branch, position in (("then", 0), ("else", -1)):
            value = helper.make_tensor(f"{branch}_p{k}", TensorProto.INT64, [], [position])
            branches[f"{branch}_branch"] = helper.make_graph(
                [
                    helper.make_node("Constant", [], [f"{branch}_p{k}"], value=value),
                    helper.make_node("SequenceAt", ["s", f"{branch}_p{k}"], [f"{branch}{k}"]),
                ],
                f"{branch}{k}", [], [_float(f"{branch}{k}", [2])],
            )  # fmt: skip
        nodes.append(helper.make_node("If", ["c"], [f"o{k}"], **branches))
    nodes.append(helper.make_node("Sum", [f"o{k}" for k in range(count)], ["y"]))
    inputs = [_float("x", [4, 2]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    return _model(nodes, inputs, [_float("y", [2])])


def split_by_a_long_vector(count: int, reader: str, runtime_sizes: bool = False) -> onnx.ModelProto:
    """SplitToSequence of x[count, 2] by a split vector of `count` ones (an initializer, or
    with `runtime_sizes` a model input), then `reader`: "at" (a SequenceAt at a run-time
    position), "concat" (a ConcatFromSequence on the other axis: one row of 2 * count)."""
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=0)]
    inputs = [_float("x", [count, 2])]
    initializers = []
    if runtime_sizes:
        inputs.append(helper.make_tensor_value_info("split", TensorProto.INT64, [count]))
    else:
        initializers.append(helper.make_tensor("split", TensorProto.INT64, [count], [1] * count))
    if reader == "at":
        nodes.append(helper.make_node("SequenceAt", ["s", "p"], ["y"]))
        inputs.append(helper.make_tensor_value_info("p", TensorProto.INT64, []))
        output = _float("y", ["a", 2])
    else:
        nodes.append(helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1))
        output = _float("y", [1, "a"])
    return _model(nodes, inputs, [output], initializers)


def rounds_of_read_reshape_insert(count: int) -> onnx.ModelProto:
    """`count` rounds on one list of run-time length (the rows of x): read the element at
    run-time position p, Unsqueeze and Squeeze it, append it; the list stacked at the end."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=0),
        helper.make_node("Constant", [], ["axes"], value=axes),
    ]
    for k in range(count):
        nodes += [
            helper.make_node("SequenceAt", [f"s{k}", "p"], [f"a{k}"]),
            helper.make_node("Unsqueeze", [f"a{k}", "axes"], [f"u{k}"]),
            helper.make_node("Squeeze", [f"u{k}", "axes"], [f"v{k}"]),
            helper.make_node("SequenceInsert", [f"s{k}", f"v{k}"], [f"s{k + 1}"]),
        ]
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0, new_axis=1))
    inputs = [_float("x", ["m", 3]), helper.make_tensor_value_info("p", TensorProto.INT64, [])]
    return _model(nodes, inputs, [_float("y", ["n", 3])])


def nested_maps(depth: int) -> onnx.ModelProto:
    """`depth` SequenceMaps, each body mapping over the one-element list of its element
    (Unsqueeze, SplitToSequence, SequenceMap, SequenceAt 0), the innermost a Relu, over the
    rows of x: y = Relu(x)."""

    def body(level: int) -> onnx.GraphProto:
        element, result = _float(f"e{level}", [3]), _float(f"o{level}", [3])
        if level == depth:
            nodes = [helper.make_node("Relu", [f"e{level}"], [f"o{level}"])]
            return helper.make_graph(nodes, f"body{level}", [element], [result])
        nodes = [
            helper.make_node("Unsqueeze", [f"e{level}", "axes"], [f"u{level}"]),
            helper.make_node("SplitToSequence", [f"u{level}"], [f"s{level}"], keepdims=0),
            helper.make_node("SequenceMap", [f"s{level}"], [f"m{level}"], body=body(level + 1)),
            helper.make_node("SequenceAt", [f"m{level}", "zero"], [f"o{level}"]),
        ]
        return helper.make_graph(nodes, f"body{level}", [element], [result])

    constants = [
        helper.make_node(
            "Constant", [], ["axes"], value=helper.make_tensor("a", TensorProto.INT64, [1], [0])
        ),
        helper.make_node(
            "Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])
        ),
    ]
    nodes = [
        *constants,
        helper.make_node("SplitToSequence", ["x"], ["s"], keepdims=0),
        helper.make_node("SequenceMap", ["s"], ["m"], body=body(1)),
        helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=0, new_axis=1),
    ]
    return _model(nodes, [_float("x", ["n", 3])], [_float("y", ["n", 3])])


def split_declaring_more_than_it_holds() -> onnx.ModelProto:
    """A `split` initializer that declares 10^12 int64 elements and holds one (8 bytes)."""
    split = helper.make_tensor("split", TensorProto.INT64, [1], [1])
    split.dims[0] = 10**12
    return _model(
        [
            helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=0),
            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
        ],
        [_float("x", [4])],
        [_float("y", ["d"])],
        [split],
    )


def test_a_million_chunks_read_at_a_runtime_position_become_one_gather() -> None:
    model = chunks_at_runtime_position(10**6)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired == {"at-of-split": 1}
    x = np.arange(10**6, dtype=np.float32)
    for position in (0, 123_456, -1):
        assert_same_outputs(model, lowered, {"x": x, "i": np.array(position, np.int64)})


def test_a_split_over_the_budget_is_refused_with_the_reason() -> None:
    model = load_model(chunks_at_runtime_position(MAX_EXPANSION + 1))
    split = next(node for node in model.graph if node.op_type == "SplitToSequence")
    reason = plan_split(split, StaticValues())
    assert reason == (
        f"{MAX_EXPANSION + 1} chunks are more than one rewrite writes out (at most {MAX_EXPANSION})"
    )
    fitting = load_model(chunks_at_runtime_position(MAX_EXPANSION))
    split = next(node for node in fitting.graph if node.op_type == "SplitToSequence")
    assert plan_split(split, StaticValues()).count == MAX_EXPANSION  # type: ignore[union-attr]


def test_a_chain_of_ten_thousand_identities_after_a_sequence_at() -> None:
    model = identities_after_at(10_000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_same_outputs(model, lowered, {"x": x, "i": np.array(-2, np.int64)})


def test_three_thousand_inserts_in_a_row_fold_into_one_list() -> None:
    model = inserts_in_a_row(3000)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    # each insert is counted, and reported as folded, as if folded one at a time
    assert report.rules_fired["insert-into-known"] == 3000
    outcomes = [n for n in report.nodes if n.op_type == "SequenceInsert"]
    assert len(outcomes) == 3000
    assert {n.rules for n in outcomes} == {("insert-into-known",)}
    x = np.array([1.5, -2.0], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, np.tile(x, 3000))


def test_a_chain_of_inserts_and_erases_at_static_positions_folds_in_order() -> None:
    """insert a, insert b at 0, insert c at -1 (before b's neighbour), erase 0: [c, a]"""
    position = [helper.make_tensor(f"p{v}", TensorProto.INT64, [], [v]) for v in (0, -1)]
    model = _model(
        [
            helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
            helper.make_node("SequenceInsert", ["s0", "a"], ["s1"]),
            helper.make_node("SequenceInsert", ["s1", "b", "p0"], ["s2"]),
            helper.make_node("SequenceInsert", ["s2", "c", "p-1"], ["s3"]),
            helper.make_node("SequenceErase", ["s3", "p0"], ["s4"]),
            helper.make_node("ConcatFromSequence", ["s4"], ["y"], axis=0),
        ],
        [_float(name, [1]) for name in "abc"],
        [_float("y", [2])],
        position,
    )
    lowered, report = lower(model)
    assert report.rules_fired == {
        "insert-into-known": 3,
        "erase-from-known": 1,
        "concat-known": 1,
    }
    feeds = {name: np.array([value], np.float32) for name, value in zip("abc", (1, 2, 3))}
    (y,) = assert_same_outputs(model, lowered, feeds)
    np.testing.assert_array_equal(y, [3, 1])


def test_a_list_read_at_thousands_of_positions_and_rebuilt() -> None:
    # a SequenceConstruct of 5,000 inputs rewired one rewrite at a time: quadratic in onnx_ir's
    # public ways (seqlower/uses.py); bench/scaling.py times 20,000
    model = every_position_read_and_rebuilt(5000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(128, dtype=np.float32).reshape(64, 2)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, x[np.arange(5000) % 64 - 32])


def test_a_thousand_ifs_appending_in_a_row() -> None:
    # the length of the list each If reads was found by recursion (too deep from about 500),
    # and whether each If is in a Loop body by a walk of the whole model
    model = ifs_appending_in_a_row(1000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.array([1.5, -2.0], np.float32)
    for choice in (True, False):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "c": np.array(choice)})
        np.testing.assert_array_equal(y, np.tile(x if choice else x + x, (1000, 1)))


def test_a_map_whose_body_adds_the_element_a_thousand_times() -> None:
    # each Add of the body was read as a sum of copies again from scratch, every shorter
    # reading checked term by term (cubic in the body)
    model = map_of_a_long_body(1000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_allclose(y, np.maximum(x, 0) + 1000 * x, rtol=1e-6)
    assert_same_outputs(model, lowered, {"x": x[:1]})


def test_an_element_computed_by_three_thousand_elementwise_operators() -> None:
    # the cleanup that makes a stacked row's leading axis in its producers walked back through
    # them by recursion (too deep from about 1,000)
    model = a_long_elementwise_chain_stacked(3000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.array([1.5, -2.0], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"t0": x})
    np.testing.assert_array_equal(y, [x])


def test_a_run_time_read_of_forty_ragged_elements() -> None:
    # the read became a chain of 39 nested Ifs, more than protobuf parses: the saved model
    # could not be read back (an internal error)
    model = ragged_list_read_at_a_runtime_position(40)
    lowered, report = lower(model)
    assert "at-dynamic-if-chain" not in report.rules_fired
    assert sequence_op_count(lowered) == 0
    feeds = {f"x{k}": np.arange(k % 5, dtype=np.float32) + k for k in range(40)}
    for position in (0, 17, 39, -1, -40):
        (y,) = assert_same_outputs(model, lowered, {**feeds, "p": np.array(position, np.int64)})
        np.testing.assert_array_equal(y, feeds[f"x{position % 40}"])
    # a short list still takes the If chain
    model = ragged_list_read_at_a_runtime_position(16)
    lowered, report = lower(model)
    assert report.rules_fired["at-dynamic-if-chain"] == 1
    feeds = {f"x{k}": np.arange(k % 5, dtype=np.float32) + k for k in range(16)}
    (y,) = assert_same_outputs(model, lowered, {**feeds, "p": np.array(-3, np.int64)})
    np.testing.assert_array_equal(y, feeds["x13"])


def test_fourteen_nested_loops_are_not_unrolled_into_each_other() -> None:
    # each Loop of two iterations was unrolled within the budget, its body's nodes counted
    # without the Loops nested in them: the copies of copies made 2**depth bodies (depth 18:
    # 26 s and 3 GB); the budget now counts a nested Loop's body as often as it would run
    model = nested_loops_appending(14)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    assert sum(op_counts(lowered).values()) < 200
    x = np.array([1.5, -2.0], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, np.tile(x, (2**14, 1)))
    # a few levels still unroll into plain tensor operators
    model = nested_loops_appending(3)
    lowered, report = lower(model)
    assert report.rules_fired["loop-unroll"] == 7
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, np.tile(x, (8, 1)))


def test_a_loop_body_of_five_thousand_adds_on_shared_values() -> None:
    # every Add of the chain was read as a sum back to its first term, though a term read
    # elsewhere too ends every reading (quadratic: 10.5 s CPU at 5,000)
    model = loop_appending_a_long_sum(5000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.array([1.5, -2.0], np.float32)
    for n in (1, 3):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})
        np.testing.assert_allclose(y, np.tile(2501 * np.maximum(x, 0) + 2500 * x, (n, 1)))


def test_one_condition_read_by_many_ifs() -> None:
    # ONNX's full check, which the command line runs on what it writes, copied the main
    # graph's types into every branch: 10,000 Ifs took 7 s there; the lowered model is now
    # checked in runs of nodes, as the input is (bench/scaling.py times 10,000)
    model = one_condition_read_by_many_ifs(600)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    check_fully(lowered)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    for choice in (True, False):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "c": np.array(choice)})
        np.testing.assert_array_equal(y, 600 * x[0 if choice else -1])


def test_the_full_check_in_runs_finds_what_the_checker_finds() -> None:
    # a declared type that inference contradicts, far from the first run. In one piece ONNX
    # names the Sum that reads the value; the runs (at most 64 Ifs each) name the If that
    # makes it, in a run before the Sum's: the same contradiction, float (1) against int64 (7)
    model = one_condition_read_by_many_ifs(1500)
    assert inferred_in_runs(model.graph)
    model.graph.value_info.append(helper.make_tensor_value_info("o1200", TensorProto.INT64, [2]))
    with pytest.raises(onnx.shape_inference.InferenceError, match=r"type: tensor\(int64\)"):
        onnx.checker.check_model(model, full_check=True)
    with pytest.raises(onnx.shape_inference.InferenceError, match=r"op_type:If.*\(1\) vs \(7\)"):
        check_fully(model)
    # where the run holds the reader too, the same error as in one piece
    model = one_condition_read_by_many_ifs(1500)
    model.graph.value_info.append(helper.make_tensor_value_info("o1499", TensorProto.INT64, [2]))
    with pytest.raises(onnx.shape_inference.InferenceError) as in_one_piece:
        onnx.checker.check_model(model, full_check=True)
    with pytest.raises(onnx.shape_inference.InferenceError) as in_runs:
        check_fully(model)
    assert str(in_runs.value) == str(in_one_piece.value)
    # and an operator the checker refuses, in any run
    model = one_condition_read_by_many_ifs(1500)
    model.graph.node[1200].op_type = "NoSuchOp"
    with pytest.raises(onnx.checker.ValidationError, match="NoSuchOp"):
        check_fully(model)


def test_a_split_by_fifty_thousand_static_sizes_read_at_a_runtime_position() -> None:
    # a split vector longer than static values are read (4,096) gave a Split of 50,000
    # outputs of unknown sizes, then three nodes a chunk (over a minute, over 1 GB); the
    # split now stays whole and the read is one Slice between two Gathered bounds
    model = split_by_a_long_vector(50_000, "at")
    lowered, report = lower(model)
    assert report.rules_fired == {"at-of-chunks": 1}
    assert len(lowered.graph.node) < 20
    x = np.arange(100_000, dtype=np.float32).reshape(50_000, 2)
    for position in (0, 12_345, 49_999, -1, -50_000):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "p": np.array(position, np.int64)})
        np.testing.assert_array_equal(y, x[[position]])
    for position in (50_000, -50_001):
        assert_both_fail(model, lowered, {"x": x, "p": np.array(position, np.int64)})


def test_a_split_by_fifty_thousand_static_sizes_concatenated_on_another_axis() -> None:
    # a Split of 50,000 outputs into a Concat of 50,000 inputs (5 MB written; each output
    # looked up by a walk of the outputs: quadratic), now the tensor form of the list
    model = split_by_a_long_vector(50_000, "concat")
    lowered, report = lower(model)
    assert "split-to-sequence" not in report.rules_fired
    assert len(lowered.graph.node) < 50
    x = np.arange(100_000, dtype=np.float32).reshape(50_000, 2)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(1, -1))


def test_a_tiny_file_splitting_by_a_hundred_thousand_runtime_sizes() -> None:
    # 163 bytes declaring a split vector of 100,000 run-time sizes: 1.9 GB and over a minute
    # writing the chunks out; the refusal says why they are not
    model = split_by_a_long_vector(100_000, "at", runtime_sizes=True)
    lowered, report = lower(model)
    assert report.rules_fired == {"at-of-chunks": 1}
    sizes = np.full(100_000, 1, np.int64)
    x = np.arange(200_000, dtype=np.float32).reshape(100_000, 2)
    for position in (7, -1):
        feeds = {"x": x, "split": sizes, "p": np.array(position, np.int64)}
        assert_same_outputs(model, lowered, feeds)
    # kept as a sequence output, the split shows the reason it was not written out
    model.graph.output.append(
        helper.make_value_info(
            "s",
            helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
        )
    )
    _, report = lower(model, target="generic")
    (split,) = [op for op in report.remaining if op.op_type == "SplitToSequence"]
    assert (
        "split-to-sequence: 100000 chunks of sizes not read before run time are more than are "
        "written out one by one (at most 4096): the split stays one tensor"
    ) in split.reasons


def test_a_split_by_a_few_thousand_static_sizes_is_still_written_out() -> None:
    # up to 4,096 sizes are read, and equal ones are even chunks: a Reshape and a Gather
    model = split_by_a_long_vector(4096, "at")
    lowered, report = lower(model)
    assert report.rules_fired == {"split-to-sequence": 1, "at-even-chunks": 1}
    x = np.arange(8192, dtype=np.float32).reshape(4096, 2)
    assert_same_outputs(model, lowered, {"x": x, "p": np.array(-7, np.int64)})


def test_a_thousand_rounds_of_read_reshape_insert_on_one_list() -> None:
    # every rule asking about a list walked back through all the inserts before it, and the
    # walks were forgotten at each rewrite of an Unsqueeze and Squeeze between them
    # (quadratic: 6.9 s of CPU at 2,000); now they are forgotten only when a rewrite may
    # change a list (bench/scaling.py times 4,000)
    model = rounds_of_read_reshape_insert(1000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (y,) = assert_same_outputs(model, lowered, {"x": x, "p": np.array(-2, np.int64)})
    rows = list(x)
    for _ in range(1000):
        rows.append(rows[-2])
    np.testing.assert_array_equal(y, rows)
    assert_both_fail(model, lowered, {"x": x, "p": np.array(4, np.int64)})


def test_twenty_nested_sequence_maps() -> None:
    # each level's copy of a body was named after the node it replaced and the names of the
    # body's nodes, both carrying the names of the copies before: names doubled with each
    # level (673 MB of memory at 20, in the shape inferences copying them); the hints of
    # fresh names are now cut to their last MAX_HINT characters.
    # onnxruntime cannot run a SequenceMap nested in a SequenceMap: numpy is the oracle
    model = nested_maps(20)
    lowered, _ = lower(model)
    assert op_counts(lowered) == {"Relu": 1}
    x = np.array([[1.5, -2.0, 0.5], [-1.0, 3.0, 0.0]], np.float32)
    (y,) = run_ort(lowered, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_fresh_names_are_made_from_the_last_characters_of_a_long_hint() -> None:
    names = NameAllocator(["taken"])
    hint = "outer/" * 100 + "Relu"
    first, second = names.fresh(hint), names.fresh(hint)
    assert first == hint[-MAX_HINT:]
    assert second == f"{hint[-MAX_HINT:]}_1"
    assert names.fresh("taken") == "taken_1"  # short hints as before


@pytest.mark.parametrize("op", ["erase", "insert"])
def test_a_chain_of_edits_at_a_runtime_position_of_a_long_list(op: str) -> None:
    # one choice per element and edit was k * n nodes (250 erases: 11 s, 0.75 GB); a list of
    # more than 16 elements takes the tensor form, a few nodes an edit
    model = edits_at_a_runtime_position(300, op)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert len(lowered.graph.node) < 20 * 300
    assert not any(rule.startswith(f"{op}-at-runtime-position") for rule in report.rules_fired)
    x = np.arange(602, dtype=np.float32).reshape(301, 2)
    r = np.array([-1.0, -2.0], np.float32)
    for position in (0, 1, -1):
        feeds = {"x": x, "r": r, "p": np.array(position, np.int64)}
        assert_same_outputs(model, lowered, feeds)
    assert_both_fail(model, lowered, {"x": x, "r": r, "p": np.array(400, np.int64)})


def test_a_short_list_edited_at_a_runtime_position_still_chooses_each_element() -> None:
    model = edits_at_a_runtime_position(3, "erase")
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("erase-at-runtime-position") == 3


def test_an_initializer_declaring_more_than_it_holds_is_refused() -> None:
    # an onnx_ir.Model: a file or ModelProto meets the ONNX checker first (the next test)
    model = ir.serde.deserialize_model(split_declaring_more_than_it_holds())
    with pytest.raises(InvalidModelError) as error:
        seqlower.optimize(model)
    assert str(error.value) == (
        "initializer 'split' declares shape [1000000000000] (1000000000000 elements) but holds "
        "1 value, not 1000000000000: the model is corrupt"
    )


def test_raw_bytes_shorter_than_the_declared_shape_are_refused() -> None:
    model = split_declaring_more_than_it_holds()
    split = model.graph.initializer[0]
    del split.int64_data[:]
    split.raw_data = np.array([1], np.int64).tobytes()
    with pytest.raises(InvalidModelError, match="holds 8 bytes of data, not 8000000000000"):
        seqlower.optimize(ir.serde.deserialize_model(model))
    # the ONNX checker, or on older onnx releases its strict inference, on the model as given
    with pytest.raises(
        InvalidModelError, match=r"^<ModelProto>: the input model itself is invalid"
    ):
        seqlower.optimize(model)


def test_the_command_line_refuses_the_declared_size_in_one_line(tmp_path) -> None:
    source = tmp_path / "split.onnx"
    onnx.save(split_declaring_more_than_it_holds(), source)
    done = subprocess.run(
        [sys.executable, "-m", "seqlower", "optimize", str(source), str(tmp_path / "out.onnx")],
        capture_output=True,
        text=True,
        timeout=120,  # against a hang only
        check=False,
    )
    assert done.returncode == 2
    # the ONNX checker on the file as read (its strict inference on older onnx releases, whose
    # checker lets the size through): one line, naming the tensor
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {source}: the input model itself is invalid, "), line
    assert "split" in line
    assert not (tmp_path / "out.onnx").exists()


def test_a_time_limit_returns_a_valid_model_and_says_it_stopped() -> None:
    model = inserts_in_a_row(3)
    lowered, report = lower(model, target="generic", time_limit=1e-9)
    assert report.stop_reason == ("time limit (1e-09 s) reached: the rewrites done so far are kept")
    assert sequence_op_count(lowered) == 5  # nothing was rewritten in time
    assert (
        "the time limit of 1e-09 s was reached: the model is lowered only as far as the "
        "rewrites done by then (a larger --time-limit, or time_limit= in Python, lowers more)"
    ) in report.warnings
    x = np.array([1.0, 2.0], np.float32)
    assert_same_outputs(model, lowered, {"x": x})
    # the hint works: with a larger limit, everything is lowered
    lowered, report = lower(model, target="generic", time_limit=600)
    assert report.stop_reason == "fixpoint: no rule applies"
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize("limit", [0, -1.0, float("nan"), "5", True])
def test_a_time_limit_must_be_a_positive_number(limit) -> None:
    with pytest.raises(SeqlowerError, match="time_limit must be a number of seconds > 0"):
        seqlower.optimize(inserts_in_a_row(1), time_limit=limit)


def test_the_command_line_time_limit(tmp_path) -> None:
    source, out = tmp_path / "inserts.onnx", tmp_path / "out.onnx"
    onnx.save(inserts_in_a_row(3), source)
    command = [sys.executable, "-m", "seqlower", "optimize", str(source), str(out)]
    done = subprocess.run(
        [*command, "--time-limit", "0.000000001"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "time limit (1e-09 s) reached: the rewrites done so far are kept" in done.stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
    done = subprocess.run(
        [*command, "--time-limit", "0"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --time-limit must be a number of seconds > 0, not 0"
    ]
