"""More tiny hostile files (the sequel to tests/test_hostile_inputs.py): shapes that made the
optimizer crash, recurse too deep or go quadratic. Only outcomes are checked here (the refusal
text, the exit code, the numbers the lowered model computes); bench/scaling.py times them at
the sizes that failed."""

from __future__ import annotations

import collections
import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from seqlower.analysis.static_lengths import StaticLengths
from seqlower.analysis.static_values import StaticValues
from seqlower.errors import InvalidModelError, ModelInputError
from seqlower.inlined_size import inlined_node_count
from seqlower.ops import graphs_within, iter_all_graphs
from seqlower.rewriter import Rewriter
from tests.support import assert_same_outputs, lower, run_ort, sequence_op_count

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializer=list(initializers))
    # IR 10: onnxruntime 1.20, the oldest supported, reads no newer
    return helper.make_model(graph, opset_imports=OPSET, ir_version=10)


def _float(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _int(name: str, shape=()) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.INT64, list(shape))


def _position(name: str, value: int) -> onnx.NodeProto:
    tensor = helper.make_tensor(f"{name}_value", TensorProto.INT64, [], [value])
    return helper.make_node("Constant", [], [name], value=tensor)


def inserts_at_the_front(count: int) -> onnx.ModelProto:
    """`count` SequenceInserts of x at position 0 of a list made empty, stacked."""
    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
        _position("p", 0),
    ]
    nodes += [
        helper.make_node("SequenceInsert", [f"s{k}", "x", "p"], [f"s{k + 1}"]) for k in range(count)
    ]
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0, new_axis=1))
    return _model(nodes, [_float("x", [2])], [_float("y", [count, 2])])


def lengths_as_outputs(count: int) -> onnx.ModelProto:
    """The length of one split, `count` times over, each a graph output of its own."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)]
    nodes += [helper.make_node("SequenceLength", ["s"], [f"n{k}"]) for k in range(count)]
    return _model(nodes, [_float("x", ["m", 2])], [_int(f"n{k}") for k in range(count)])


def test_the_static_length_at_the_end_of_a_long_chain_of_edits() -> None:
    # the cost model's lengths recursed once per edit: RecursionError at 1,000 inserts
    model = ir.from_proto(inserts_at_the_front(5000))
    lengths = StaticLengths(StaticValues())
    concat = model.graph.node(-1)
    assert lengths.of(concat.inputs[0]) == 5000
    # and a chain of erases from a split of static length, erasing at the default position
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=0)]
    nodes += [helper.make_node("SequenceErase", [f"s{k}"], [f"s{k + 1}"]) for k in range(3000)]
    nodes.append(helper.make_node("SequenceLength", ["s3000"], ["n"]))
    erased = ir.from_proto(_model(nodes, [_float("x", [3001, 2])], [_int("n")]))
    assert StaticLengths(StaticValues()).of(erased.graph.node(-1).inputs[0]) == 1


def test_three_thousand_inserts_at_the_front_under_the_default_target() -> None:
    # the default target costs the model as given before lowering it (`node_costs`)
    model = inserts_at_the_front(3000)
    lowered, report = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["insert-into-known"] == 3000
    x = np.array([1.5, -2.0], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, np.tile(x, (3000, 1)))


def test_hundreds_of_graph_outputs_each_rewritten_keep_their_names_and_order() -> None:
    # each rewritten output was found by a walk of all the outputs (16 s at 10,000)
    model = lengths_as_outputs(300)
    # the same value twice among the outputs, and an output that is the split's input
    model.graph.output.append(_int("n7"))
    model.graph.output.append(_float("x", ["m", 2]))
    lowered, _ = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0
    assert [o.name for o in lowered.graph.output] == [o.name for o in model.graph.output]
    # the 300 lengths are one value (length-of-split): an Identity names each other output
    ops = collections.Counter(node.op_type for node in lowered.graph.node)
    assert ops == {"Shape": 1, "Constant": 1, "Gather": 1, "Identity": 299}
    x = np.zeros((5, 2), np.float32)
    outputs = assert_same_outputs(model, lowered, {"x": x})
    assert [int(n) for n in outputs[:-1]] == [5] * 301


def _split_then_concat(
    sizes=None, axis: int = 0, concat_axis: int = 0, rows=6, new_axis: int = 1
) -> onnx.ModelProto:
    inputs = ["x"] if sizes is None else ["x", "sizes"]
    initializers = (
        []
        if sizes is None
        else [helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes)]
    )
    nodes = [
        helper.make_node("SplitToSequence", inputs, ["s"], axis=axis),
        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=concat_axis, new_axis=new_axis),
    ]
    return _model(nodes, [_float("x", [rows, 2])], [_float("y", ["a", "b", "c"])], initializers)


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ([-1, 7], "splits by sizes [-1, 7], one of them negative"),
        ([2**62, 6 - 2**62], f"splits by sizes [{2**62}, {6 - 2**62}], one of them negative"),
    ],
)
def test_a_split_by_sizes_it_cannot_cut_is_refused(sizes, said) -> None:
    # the split and the concatenation folded into x: a model that always fails ran
    model = _split_then_concat(sizes)
    with pytest.raises(InvalidModelError, match=re.escape(said)) as caught:
        lower(model)
    assert str(caught.value).endswith(": the ONNX spec makes this a run-time error")
    x = np.zeros((6, 2), np.float32)
    with pytest.raises(Exception, match="split"):
        run_ort(model, {"x": x})


def test_a_split_with_empty_chunks_is_still_lowered() -> None:
    model = _split_then_concat([0, 0, 6], new_axis=0)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    assert_same_outputs(model, lowered, {"x": x})


@pytest.mark.parametrize(
    ("axis", "concat_axis", "said"),
    [
        (2**40, 0, f"SplitToSequence splits on axis {2**40}, out of range for an input of rank 2"),
        (-(2**40), 0, f"splits on axis {-(2**40)}, out of range for an input of rank 2"),
        (0, 2**40, f"joins on axis {2**40}, out of range for elements of rank 2 and a new axis"),
    ],
)
def test_an_axis_out_of_range_is_refused(axis, concat_axis, said) -> None:
    # ONNX inference lets an axis of 2**40 through; onnxruntime fails on it
    model = _split_then_concat(axis=axis, concat_axis=concat_axis)
    with pytest.raises(InvalidModelError, match=re.escape(said)):
        lower(model)


@pytest.mark.parametrize("dim", [-1, -5])
def test_a_negative_declared_dim_is_read_as_unknown(dim) -> None:
    # onnxruntime reads it so (some exporters write -1 for a dynamic dim); it was read as a
    # count of -5 chunks and the model refused as concatenating an always-empty list
    model = _split_then_concat(rows=dim)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_same_outputs(model, lowered, {"x": x})


def functions_calling_twice(depth: int) -> onnx.ModelProto:
    """f0 calls f1 twice, f1 calls f2 twice, ..., f{depth} splits and concatenates: 2**depth
    copies of the list once inlined."""
    opsets = [*OPSET, helper.make_opsetid("local", 1)]
    functions = [
        helper.make_function(
            "local",
            f"f{depth}",
            ["a"],
            ["b"],
            [
                helper.make_node("SplitToSequence", ["a"], ["s"], axis=0),
                helper.make_node("ConcatFromSequence", ["s"], ["b"], axis=0),
            ],
            opsets,
        )
    ]
    for k in range(depth - 1, -1, -1):
        calls = [
            helper.make_node(f"f{k + 1}", ["a"], ["t"], domain="local"),
            helper.make_node(f"f{k + 1}", ["t"], ["b"], domain="local"),
        ]
        functions.append(helper.make_function("local", f"f{k}", ["a"], ["b"], calls, opsets))
    graph = helper.make_graph(
        [helper.make_node("f0", ["x"], ["y"], domain="local")],
        "hostile",
        [_float("x", [6, 2])],
        [_float("y", [6, 2])],
    )
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, functions=functions)


def one_function_called(count: int) -> onnx.ModelProto:
    """A function that splits and concatenates, called `count` times in a chain."""
    opsets = [*OPSET, helper.make_opsetid("local", 1)]
    body = [
        helper.make_node("SplitToSequence", ["a"], ["s"], axis=0),
        helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
        helper.make_node("Neg", ["c"], ["b"]),
    ]
    function = helper.make_function("local", "f", ["a"], ["b"], body, opsets)
    nodes = [helper.make_node("f", [f"t{k}"], [f"t{k + 1}"], domain="local") for k in range(count)]
    graph = helper.make_graph(
        nodes, "hostile", [_float("t0", [6, 2])], [_float(f"t{count}", [6, 2])]
    )
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, functions=[function])


def test_the_nodes_functions_make_once_inlined_are_counted_from_the_file() -> None:
    # 2**(depth+1) - 1 calls and 2 nodes in each of the 2**depth innermost bodies
    total, in_file = inlined_node_count(functions_calling_twice(3))
    assert (total, in_file) == (2**4 - 1 + 2 * 2**3, 1 + 2 * 3 + 2)
    assert inlined_node_count(one_function_called(5)) == (5 * 4, 5 + 3)


def test_functions_calling_each_other_over_and_over_are_refused_before_inference() -> None:
    # ONNX inference infers a function's body at every call: 2**16 copies took 2 s, each
    # level doubling that; seqlower then inlined every copy
    with pytest.raises(ModelInputError) as caught:
        lower(functions_calling_twice(40))
    assert str(caught.value) == (
        "<ModelProto>: its model-local functions call each other over and over: inlining "
        f"every call would make {2**41 - 1 + 2 * 2**40} nodes from the 83 in the file, more "
        "than seqlower reads (at most 100000)"
    )


def test_functions_calling_each_other_a_few_times_are_inlined() -> None:
    model = functions_calling_twice(5)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0 and not lowered.functions
    assert report.rules_fired["inline-function"] == 6
    assert_same_outputs(model, lowered, {"x": np.arange(12, dtype=np.float32).reshape(6, 2)})


def test_a_function_called_two_thousand_times_is_inlined_with_distinct_names() -> None:
    # onnx_ir's inliner tried name_2, name_3, ... for every copy (quadratic: 8 s of 11 at
    # 4,096 copies); each copy now starts from names of its own
    model = one_function_called(2000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0 and not lowered.functions
    names = [o for n in lowered.graph.node for o in n.output]
    assert len(names) == len(set(names))
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    (y,) = assert_same_outputs(model, lowered, {"t0": x})
    np.testing.assert_array_equal(y, x)


def loops_nested(depth: int) -> onnx.ModelProto:
    """`depth` Loops of a run-time trip count nested in each other's bodies, each carrying one
    list; the innermost appends x."""

    def body(level: int) -> onnx.GraphProto:
        if level == depth:
            inner = helper.make_node("SequenceInsert", [f"q{level}", "x"], [f"qo{level}"])
        else:
            inner = helper.make_node(
                "Loop", ["n", "", f"q{level}"], [f"qo{level}"], body=body(level + 1)
            )
        carried = helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
        )
        return helper.make_graph(
            [helper.make_node("Identity", [f"c{level}"], [f"co{level}"]), inner],
            f"body{level}",
            [
                _int(f"i{level}"),
                helper.make_tensor_value_info(f"c{level}", TensorProto.BOOL, []),
                helper.make_value_info(f"q{level}", carried),
            ],
            [
                helper.make_tensor_value_info(f"co{level}", TensorProto.BOOL, []),
                helper.make_value_info(f"qo{level}", carried),
            ],
        )

    nodes = [
        helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "", "e"], ["l"], body=body(1)),
        helper.make_node("ConcatFromSequence", ["l"], ["y"], axis=0, new_axis=1),
    ]
    return _model(nodes, [_float("x", [3]), _int("n")], [_float("y", ["a", 3])])


def test_a_graph_two_nodes_hold_is_walked_once() -> None:
    # a rewrite building a new Loop around the old one's body holds it twice for a while: at
    # every level of nested Loops the walks below doubled (11 s at 20 levels, 2**18 walks)
    model = ir.from_proto(loops_nested(3))
    loop = model.graph.node(1)
    twin = ir.Node("", "Loop", [], attributes=[ir.AttrGraph("body", loop.attributes["body"].value)])
    model.graph.append(twin)
    graphs = list(iter_all_graphs(model))
    assert len(graphs) == 4 and len({id(graph) for graph in graphs}) == 4
    assert graphs_within(model.graph) == graphs


def test_thirty_loops_nested_each_carrying_a_list() -> None:
    # not loaded in onnxruntime at 30: 1.20 takes seconds to load Loops nested 18 deep, four
    # times more every two levels (1.32 does not); the numbers are checked at 10
    lowered, _ = lower(loops_nested(30), load_ort=False)
    assert sequence_op_count(lowered) == 0
    model = loops_nested(10)
    lowered, _ = lower(model)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for n in (1, 2):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})
        np.testing.assert_array_equal(y, np.tile(x, (n**10, 1)))


def one_value_listed(count: int) -> onnx.ModelProto:
    """A SequenceConstruct of x `count` times, read at a run-time position."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x"] * count, ["s"]),
        helper.make_node("SequenceAt", ["s", "p"], ["y"]),
    ]
    return _model(nodes, [_float("x", [2]), _int("p")], [_float("y", [2])])


def test_a_stack_of_one_value_many_times_unsqueezes_it_once() -> None:
    # 100,000 Unsqueezes of one value, then a rule asking each how often it is read by a
    # walk of its uses (quadratic): 200,000 took 10 s and 1.1 GB
    model = ir.from_proto(one_value_listed(3))
    read = model.graph.node(1)
    x = model.graph.inputs[0]
    Rewriter(model).before(read).stack([x, x, model.graph.inputs[1], x])
    kinds = [node.op_type for node in model.graph]
    assert kinds.count("Unsqueeze") == 2 and kinds.count("Concat") == 1
    concat = next(node for node in model.graph if node.op_type == "Concat")
    first = concat.inputs[0]
    assert [v is first for v in concat.inputs] == [True, True, False, True]


def test_a_value_listed_three_thousand_times_read_at_a_runtime_position() -> None:
    model = one_value_listed(3000)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    x = np.array([1.5, -2.0], np.float32)
    for p in (0, 2999, -3000):
        (y,) = assert_same_outputs(model, lowered, {"x": x, "p": np.array(p, np.int64)})
        np.testing.assert_array_equal(y, x)


def _list_of(shape) -> onnx.TypeProto:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, shape))


def loop_carrying_lists(count: int, kind: str = "append") -> onnx.ModelProto:
    """A Loop of a run-time trip count n carrying h (h' = h * x) and `count` lists (or tensors),
    each read after the Loop; the results summed. `kind` says what the body does with list k:
    "append" appends h + i; "last" starts from [x] and appends its last element + h; "ragged"
    appends h tiled i + 1 times (a shape that changes: concatenated after the Loop); "grown" is
    a tensor, not a list, growing by Concat(acc, Unsqueeze(h + i)) from an empty [0, 2]."""
    nodes = [
        helper.make_node("Identity", ["c"], ["co"]),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["h", "x"], ["ho"]),
        _position("minus_one", -1),
        _position("zero", 0),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", 7, [1], [1])),
        helper.make_node("Add", ["i", "one"], ["i1"]),
        helper.make_node("Tile", ["h", "i1"], ["tiled"]),
    ]
    outer, after = [], []
    carried = _list_of([2])
    for k in range(count):
        if kind == "append":
            nodes.append(helper.make_node("Add", ["h", "f"], [f"t{k}"]))
        elif kind == "last":
            nodes.append(helper.make_node("SequenceAt", [f"q{k}", "minus_one"], [f"a{k}"]))
            nodes.append(helper.make_node("Add", [f"a{k}", "h"], [f"t{k}"]))
        if kind == "grown":
            nodes.append(helper.make_node("Add", ["h", "f"], [f"t{k}"]))
            nodes.append(helper.make_node("Unsqueeze", [f"t{k}", "zero"], [f"u{k}"]))
            nodes.append(helper.make_node("Concat", [f"q{k}", f"u{k}"], [f"qo{k}"], axis=0))
        else:
            appended = "tiled" if kind == "ragged" else f"t{k}"
            nodes.append(helper.make_node("SequenceInsert", [f"q{k}", appended], [f"qo{k}"]))
        if kind == "last":
            outer.append(helper.make_node("SequenceConstruct", ["x"], [f"e{k}"]))
        elif kind != "grown":
            outer.append(helper.make_node("SequenceEmpty", [], [f"e{k}"], dtype=TensorProto.FLOAT))
        if kind == "ragged":
            after.append(helper.make_node("ConcatFromSequence", [f"l{k}"], [f"y{k}"], axis=0))
        elif kind == "grown":
            after.append(helper.make_node("Identity", [f"l{k}"], [f"y{k}"]))
        else:
            after.append(
                helper.make_node("ConcatFromSequence", [f"l{k}"], [f"y{k}"], axis=0, new_axis=1)
            )
    if kind == "grown":
        carried = helper.make_tensor_type_proto(TensorProto.FLOAT, ["a", 2])
        empty = helper.make_tensor("empty", TensorProto.FLOAT, [0, 2], [])
        outer.append(helper.make_node("Constant", [], ["e"], value=empty))
    elif kind == "ragged":
        carried = _list_of(None)
    starts = ["e" if kind == "grown" else f"e{k}" for k in range(count)]
    body = helper.make_graph(
        nodes,
        "body",
        [_int("i"), helper.make_tensor_value_info("c", TensorProto.BOOL, []), _float("h", [2])]
        + [helper.make_value_info(f"q{k}", carried) for k in range(count)],
        [helper.make_tensor_value_info("co", TensorProto.BOOL, []), _float("ho", [2])]
        + [helper.make_value_info(f"qo{k}", carried) for k in range(count)],
    )
    loop_outputs = ["h_last", *(f"l{k}" for k in range(count))]
    outer.append(helper.make_node("Loop", ["n", "", "x", *starts], loop_outputs, body=body))
    after.append(helper.make_node("Sum", [f"y{k}" for k in range(count)], ["y"]))
    return _model(outer + after, [_float("x", [2]), _int("n")], [_float("y", ["a", "b"])])


@pytest.mark.parametrize(
    ("kind", "rules"),
    [
        ("append", {"loop-append-to-scan"}),
        ("last", {"loop-last-element", "loop-append-to-scan"}),
        ("ragged", {"loop-append-to-concat"}),
        ("grown", {"loop-concat-to-scan"}),
    ],
)
def test_a_loop_carrying_many_lists_lowers_them_all_at_once(kind, rules) -> None:
    # one rebuild of the Loop per carried list was quadratic (1,000 lists: 21 s, 846 MB)
    model = loop_carrying_lists(40, kind)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    for rule in rules:
        assert report.rules_fired[rule] == 40
    loops = [node for node in lowered.graph.node if node.op_type == "Loop"]
    assert len(loops) == 1
    x = np.array([1.5, -2.0], np.float32)
    for n in (1, 3):
        assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})


def test_lists_of_one_loop_that_read_each_other_wait_for_the_rebuilt_loop() -> None:
    # list 1 appends list 0's length: lowering list 0 makes that length the iteration count,
    # so list 1 is lowered on the rebuilt Loop, not with list 0 (h, carried, h' = h * 2,
    # keeps the body from being batched)
    ints = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, []))
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["co"]),
            helper.make_node("Add", ["h", "h"], ["ho"]),
            helper.make_node("SequenceInsert", ["q0", "h"], ["qo0"]),
            helper.make_node("SequenceLength", ["q0"], ["m"]),
            helper.make_node("SequenceInsert", ["q1", "m"], ["qo1"]),
        ],
        "body",
        [
            _int("i"),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            _float("h", [1]),
            helper.make_value_info("q0", _list_of([1])),
            helper.make_value_info("q1", ints),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            _float("ho", [1]),
            helper.make_value_info("qo0", _list_of([1])),
            helper.make_value_info("qo1", ints),
        ],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["e0"], dtype=TensorProto.FLOAT),
        helper.make_node("SequenceEmpty", [], ["e1"], dtype=TensorProto.INT64),
        helper.make_node("Loop", ["n", "", "x", "e0", "e1"], ["hn", "l0", "l1"], body=body),
        helper.make_node("ConcatFromSequence", ["l0"], ["y0"], axis=0, new_axis=1),
        helper.make_node("ConcatFromSequence", ["l1"], ["y1"], axis=0, new_axis=1),
    ]
    outputs = [_float("y0", ["a", 1]), _int("y1", ["a"])]
    model = _model(nodes, [_float("x", [1]), _int("n")], outputs)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["loop-append-to-scan"] == 2
    x = np.array([1.5], np.float32)
    for n in (1, 4):
        (y0, y1) = assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})
        np.testing.assert_array_equal(y1, np.arange(n))
        np.testing.assert_array_equal(y0[:, 0], 1.5 * 2.0 ** np.arange(n))


def chained_loops_in_a_loop(count: int, step: str = "append") -> onnx.ModelProto:
    """A Loop whose body runs `count` Loops one after another, each growing the tensor the one
    before made (Concat of a row, twice), and appends the result to a list it carries. With
    `step` "double" each Loop concatenates the tensor to itself instead (no rule rewrites
    such a Loop), with "keep" it adds the row (the tensor keeps its shape)."""
    one = helper.make_node(
        "Constant",
        [],
        ["one"],
        value=helper.make_tensor("one", TensorProto.FLOAT, [1, 3], [1, 2, 3]),
    )
    two = helper.make_node(
        "Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2])
    )
    nodes = [helper.make_node("Identity", ["c"], ["c_out"])]
    previous = "h_in"
    for k in range(count):
        inner = helper.make_graph(
            [
                helper.make_node("Identity", [f"c_{k}"], [f"c_out_{k}"]),
                _chain_step(step, f"t_{k}", f"t_out_{k}"),
            ],
            f"inner_{k}",
            [
                _int(f"i_{k}"),
                helper.make_tensor_value_info(f"c_{k}", TensorProto.BOOL, []),
                _float(f"t_{k}", None),
            ],
            [
                helper.make_tensor_value_info(f"c_out_{k}", TensorProto.BOOL, []),
                _float(f"t_out_{k}", None),
            ],
        )
        nodes.append(helper.make_node("Loop", ["two", "", previous], [f"h_{k}"], body=inner))
        previous = f"h_{k}"
    nodes += [
        helper.make_node("Concat", [previous, "h_in"], ["h_out"], axis=0),
        helper.make_node("SequenceInsert", ["acc", "h_out"], ["acc_out"]),
    ]
    listed = helper.make_tensor_sequence_value_info
    body = helper.make_graph(
        nodes,
        "outer",
        [
            _int("i"),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            _float("h_in", None),
            listed("acc", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            _float("h_out", None),
            listed("acc_out", TensorProto.FLOAT, None),
        ],
    )
    return _model(
        [
            one,
            two,
            helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
            helper.make_node("Loop", ["n", "", "x", "empty"], ["h", "rows"], body=body),
            helper.make_node("ConcatFromSequence", ["rows"], ["y"], axis=0),
        ],
        [_float("x", ["N", 3]), _int("n")],
        [_float("y", ["M", 3])],
    )


def _chain_step(step: str, t: str, out: str) -> onnx.NodeProto:
    if step == "double":
        return helper.make_node("Concat", [t, t], [out], axis=0)
    if step == "keep":
        return helper.make_node("Add", [t, "one"], [out])
    return helper.make_node("Concat", [t, "one"], [out], axis=0)


_CHAIN_INPUTS = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array(2, np.int64)}


def test_hundreds_of_loops_in_a_row_in_a_loop_body_are_lowered() -> None:
    """400 Loops in a row in one body, each growing what the one before made: every list
    lowered, the same numbers. (The time of 2,000 is bench/scaling.py's: a chain of Concats
    the lowering leaves was joined in time cubic in its length, minutes;
    tests/test_single_concat.py joins a chain of 2,000.)"""
    count = 400
    model = chained_loops_in_a_loop(count)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    (y,) = assert_same_outputs(model, lowered, _CHAIN_INPUTS)
    np.testing.assert_array_equal(y, _chain_reference("append", count, 2))


@pytest.mark.parametrize("step", ["double", "keep"])
def test_loops_in_a_row_that_stay_loops_are_each_analysed_a_bounded_number_of_times(
    step, monkeypatch
) -> None:
    """Loops no rule rewrites (each doubles its tensor) or that keep their tensor's shape: the
    shape analysis of each derived its input's shape by analysing the Loop before it, and that
    one the Loop before it (300 of them: a RecursionError; 100: 15,165 analyses). Each Loop's
    analysis is now remembered while the model is unchanged; an inner Loop is also analysed
    inside each pass of the outer Loop's analysis (nested, at most two deep), a number of
    times that does not grow with the chain: 100 Loops or 300, each is analysed as often."""
    import seqlower.analysis.loop_shapes as loop_shapes

    analysed = collections.Counter()
    original = loop_shapes.LoopShapes.__init__

    def counting(self, loop, *args, **kwargs) -> None:
        analysed[loop] += 1
        original(self, loop, *args, **kwargs)

    monkeypatch.setattr(loop_shapes.LoopShapes, "__init__", counting)
    most = {}
    for count in (100, 300):
        analysed.clear()
        lowered, _ = lower(chained_loops_in_a_loop(count, step))
        assert sequence_op_count(lowered) == 0
        assert len(analysed) > count  # every Loop, the outer one too
        most[count] = max(analysed.values())
    assert most[300] == most[100] <= 64  # a few per pass and round, not one per later Loop
    # the numbers on a short chain (300 doublings would not fit in memory)
    short = chained_loops_in_a_loop(2, step)
    (y,) = assert_same_outputs(short, lower(short)[0], _CHAIN_INPUTS)
    np.testing.assert_array_equal(y, _chain_reference(step, 2, 2))


def _chain_reference(step: str, count: int, trips: int) -> np.ndarray:
    """What `chained_loops_in_a_loop(count, step)` computes on `_CHAIN_INPUTS["x"]`."""
    one = np.float32([[1, 2, 3]])
    grow = {
        "append": lambda t: np.concatenate([t, one]),
        "double": lambda t: np.concatenate([t, t]),
        "keep": lambda t: t + one,
    }[step]
    h, rows = _CHAIN_INPUTS["x"], []
    for _ in range(trips):
        t = h
        for _ in range(2 * count):
            t = grow(t)
        h = np.concatenate([t, h])
        rows.append(h)
    return np.concatenate(rows)
