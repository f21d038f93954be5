"""Hostile shapes of the eighth sweep: 1-D values declared or computed 10**9 long from a tiny
file. ONNX data propagation, the rank analysis and the index-vector fold each worked in
proportion to such a length (minutes and gigabytes, docs/scaling.md); each is now bounded. The
sizes here are the ones that took minutes before, so a regression shows as a hung test."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from seqlower.analysis.ranks import MAX_RANK, Ranks
from seqlower.analysis.static_values import StaticValues
from seqlower.errors import ModelInputError
from seqlower.passes.data_prop_bound import (
    MAX_PROPAGATED_LENGTH,
    _constant_is_big,
    _first_long_read,
    _propagating_reads,
    data_prop_is_bounded,
    long_shape_read,
)
from seqlower.passes.index_vectors import MAX_ELEMENTS, _Elements
from tests.support import assert_same_outputs, lower, sequence_op_count

OPSET = [helper.make_opsetid("", 17)]
LONG = 10**9


def _model(nodes, inputs, outputs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "long", inputs, outputs)
    return helper.make_model(graph, opset_imports=OPSET, ir_version=10)


def _int(name: str, shape=()) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.INT64, list(shape))


def _const(name: str, values) -> onnx.NodeProto:
    array = np.array(values, dtype=np.int64)
    tensor = helper.make_tensor(f"{name}_v", TensorProto.INT64, array.shape, array.flatten())
    return helper.make_node("Constant", [], [name], value=tensor)


def _split_read_at(vector: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("SplitToSequence", [vector], ["s"], keepdims=0),
        helper.make_node("SequenceAt", ["s", "p"], ["y"]),
    ]


def declared_long_cast(length: int) -> onnx.ModelProto:
    """An input declared int64[length], Cast, split into scalars, read at a run-time position."""
    nodes = [helper.make_node("Cast", ["r"], ["c"], to=TensorProto.INT64), *_split_read_at("c")]
    return _model(nodes, [_int("r", [length]), _int("p")], [_int("y")])


def range_read_at(length: int, cast: bool) -> onnx.ModelProto:
    """Range(0, length) of constants (Cast or not), split, read at a run-time position."""
    nodes = [_const("zero", 0), _const("one", 1), _const("limit", length)]
    nodes.append(helper.make_node("Range", ["zero", "limit", "one"], ["r"]))
    if cast:
        nodes.append(helper.make_node("Cast", ["r"], ["c"], to=TensorProto.INT64))
    nodes += _split_read_at("c" if cast else "r")
    return _model(nodes, [_int("p")], [_int("y")])


def sizes_of_constant_of_shape(length: int) -> onnx.ModelProto:
    """x split by `length` sizes of 1 (ConstantOfShape of a constant count), its length read."""
    fill = helper.make_tensor("fill", TensorProto.INT64, [1], [1])
    nodes = [
        _const("count", [length]),
        helper.make_node("ConstantOfShape", ["count"], ["sizes"], value=fill),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["s"]),
        helper.make_node("SequenceLength", ["s"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    return _model(nodes, [x], [_int("y")])


def reshape_to_a_long_shape(length: int) -> onnx.ModelProto:
    """x reshaped to a shape vector declared `length` long, split, its length read."""
    nodes = [
        helper.make_node("Cast", ["r"], ["c"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["x", "c"], ["z"]),
        helper.make_node("SplitToSequence", ["z"], ["s"], keepdims=0),
        helper.make_node("SequenceLength", ["s"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a"])
    return _model(nodes, [_int("r", [length]), x], [_int("y")])


@pytest.mark.parametrize(
    "model",
    [
        declared_long_cast(LONG),
        range_read_at(LONG, cast=False),  # the lowering's Gather, in region inference
        range_read_at(LONG, cast=True),  # Cast of the Range in the first inference
        sizes_of_constant_of_shape(LONG),  # inference, then the index-vector fold
    ],
    ids=["declared", "range", "range-cast", "constant-of-shape-sizes"],
)
def test_a_vector_declared_or_made_a_billion_long_is_lowered_without_reading_its_length(
    model,
) -> None:
    # not loaded in onnxruntime: it folds a Range of constants at session creation (8 GB)
    lowered, report = lower(model, load_ort=False)
    assert sequence_op_count(lowered) == 0
    assert not report.remaining


def test_data_propagation_is_turned_off_for_a_long_vector_read_by_a_propagating_op() -> None:
    assert not data_prop_is_bounded(declared_long_cast(LONG).graph)
    assert not data_prop_is_bounded(range_read_at(LONG, cast=True).graph)
    assert not data_prop_is_bounded(reshape_to_a_long_shape(LONG).graph)
    # the same, at the limit, or long but read by no propagating operator: propagation stays
    assert data_prop_is_bounded(declared_long_cast(MAX_PROPAGATED_LENGTH).graph)
    assert data_prop_is_bounded(range_read_at(MAX_PROPAGATED_LENGTH, cast=True).graph)
    assert data_prop_is_bounded(range_read_at(LONG, cast=False).graph)


def test_the_reads_are_listed_only_when_a_long_value_is_found() -> None:
    """A graph holding no long value is answered by one walk that lists no node's reads; one
    holding a long value (read or not) is walked again with its reads listed, and answered as
    before: the long value read by a propagating node is found, one read by none is not."""
    listed: list[str] = []

    def counted(node: onnx.NodeProto):
        listed.append(node.op_type)
        return _propagating_reads(node)

    short = declared_long_cast(MAX_PROPAGATED_LENGTH).graph
    assert _first_long_read(short, counted) is None
    assert listed == []
    found = _first_long_read(declared_long_cast(LONG).graph, counted)
    assert found is not None and found[0].op_type == "Cast" and found[1:] == ("r", LONG)
    assert listed == ["Cast", "SplitToSequence", "SequenceAt"]
    listed.clear()
    assert _first_long_read(range_read_at(LONG, cast=False).graph, counted) is None
    assert listed == ["Constant", "Constant", "Constant", "Range", "SplitToSequence", "SequenceAt"]


def test_a_long_vector_in_a_subgraph_is_found() -> None:
    """A Cast in an If branch of a value the main graph declares long."""
    branch = helper.make_graph(
        [helper.make_node("Cast", ["r"], ["c"], to=TensorProto.INT64)],
        "then",
        [],
        [_int("c", [LONG])],
    )
    nodes = [helper.make_node("If", ["b"], ["y"], then_branch=branch, else_branch=branch)]
    cond = helper.make_tensor_value_info("b", TensorProto.BOOL, [])
    model = _model(nodes, [_int("r", [LONG]), cond], [_int("y", [LONG])])
    assert not data_prop_is_bounded(model.graph)


def test_just_above_the_limit_the_lowered_model_computes_the_same() -> None:
    """Without data propagation the lowering is still right: Range(0, 70,000) (above the
    limit), Cast, split in chunks of 10,000, read at a run-time position
    (0, 3, -1, -7: seven chunks)."""
    length = MAX_PROPAGATED_LENGTH + 4464
    nodes = [_const("zero", 0), _const("one", 1), _const("limit", length), _const("chunk", 10_000)]
    nodes += [
        helper.make_node("Range", ["zero", "limit", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["c"], to=TensorProto.INT64),
        helper.make_node("SplitToSequence", ["c", "chunk"], ["s"]),
        helper.make_node("SequenceAt", ["s", "p"], ["y"]),
    ]
    model = _model(nodes, [_int("p")], [_int("y", ["k"])])
    assert not data_prop_is_bounded(model.graph)
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    for position in (0, 3, -1, -7):
        assert_same_outputs(model, lowered, {"p": np.array(position, dtype=np.int64)})


def _reshaped_rank(length: int) -> int | None:
    """The rank the analysis proves for x reshaped to an input declared int64[length]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a"])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    reshape = helper.make_node("Reshape", ["x", "r"], ["z"])
    model = ir.serde.deserialize_model(_model([reshape], [_int("r", [length]), x], [y]))
    return Ranks(model).rank(model.graph.outputs[0])


def test_a_rank_above_the_limit_is_unknown() -> None:
    assert _reshaped_rank(LONG) is None
    assert _reshaped_rank(MAX_RANK + 1) is None
    assert _reshaped_rank(MAX_RANK) == MAX_RANK


def test_a_constant_of_shape_is_counted_before_it_is_built() -> None:
    """The index-vector fold reads a ConstantOfShape of a constant count only when it is small."""
    for count, seen in ((LONG, False), (MAX_ELEMENTS, True), (MAX_ELEMENTS + 1, False)):
        model = ir.serde.deserialize_model(sizes_of_constant_of_shape(count))
        sizes = next(node for node in model.graph if node.op_type == "ConstantOfShape").outputs[0]
        sizes.dtype = ir.DataType.INT64  # as inference gives it
        vector = _Elements(StaticValues()).vector(sizes)
        assert (vector is not None) is seen
        if seen:
            assert vector.elements == (1,) * count


@pytest.mark.parametrize(
    ("model", "said"),
    [
        (reshape_to_a_long_shape(LONG), "Reshape '' reads its shape from 'c', 1000000000 long"),
        (sizes_of_constant_of_shape(LONG), None),  # ConstantOfShape's count is 1 long: read
    ],
)
def test_a_shape_read_from_a_long_vector_is_refused_before_inference(model, said) -> None:
    """onnx 1.18 infers a Reshape or ConstantOfShape reading a shape declared n long as a
    tensor of n dims, even without data propagation (minutes and gigabytes at 10**7, before
    anything of seqlower runs but the input check): the file is refused before inference."""
    problem = long_shape_read(model.graph)
    if said is None:
        assert problem is None
        return
    assert problem is not None and problem.startswith(said)
    with pytest.raises(ModelInputError, match="is not something seqlower reads"):
        lower(model, load_ort=False)


def test_a_constant_above_the_limit_makes_a_long_shape() -> None:
    """A Range of a constant limit above the limit, read as a shape by Reshape."""
    nodes = [_const("zero", 0), _const("one", 1), _const("limit", LONG)]
    nodes += [
        helper.make_node("Range", ["zero", "limit", "one"], ["r"]),
        helper.make_node("Reshape", ["x", "r"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    problem = long_shape_read(_model(nodes, [x], [y]).graph)
    assert problem is not None and "made from a constant above the limit" in problem
    nodes[2] = _const("limit", 3)
    assert long_shape_read(_model(nodes, [x], [y]).graph) is None


@pytest.mark.parametrize(
    ("array", "big"),
    [
        (np.array([MAX_PROPAGATED_LENGTH + 1]), True),
        (np.array([-MAX_PROPAGATED_LENGTH - 1], dtype=np.int32), True),
        (np.array([MAX_PROPAGATED_LENGTH + 1], dtype=np.uint64), True),
        (np.array([2**63 - 1]), True),
        (np.array([MAX_PROPAGATED_LENGTH, 7]), False),
        (np.array(3), False),
        (np.full([17], MAX_PROPAGATED_LENGTH + 1), False),  # more elements than a length has
        (np.array([1e9], dtype=np.float32), False),  # not an integer
    ],
)
def test_a_constant_is_read_in_both_of_its_forms(array, big) -> None:
    """Raw bytes (numpy_helper) and typed fields (helper.make_tensor) read alike."""
    raw = onnx.numpy_helper.from_array(array, "c")
    fields = helper.make_tensor("c", raw.data_type, array.shape, array.flatten().tolist())
    for tensor in (raw, fields):
        node = helper.make_node("Constant", [], ["c"], value=tensor)
        assert _constant_is_big(node) is big


def _ifs_with_a_nested_cast(count: int, special: int, length: int) -> onnx.ModelProto:
    """`count` Ifs choosing x or its Identity; If number `special` instead returns, in both
    branches, an inner If whose branches Cast `r`, declared int64[length] (two levels down)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = []
    for k in range(count):
        if k == special:
            branches = {}
            for side in ("then", "else"):
                inner = {
                    f"{inner_side}_branch": helper.make_graph(
                        [helper.make_node("Cast", ["r"], [f"c_{side}_{inner_side}"], to=7)],
                        f"cast_{side}_{inner_side}", [], [_int(f"c_{side}_{inner_side}")],
                    )
                    for inner_side in ("then", "else")
                }  # fmt: skip
                branches[f"{side}_branch"] = helper.make_graph(
                    [helper.make_node("If", ["c"], [f"inner_{side}"], **inner)],
                    f"{side}_outer", [], [_int(f"inner_{side}")],
                )  # fmt: skip
            nodes.append(helper.make_node("If", ["c"], ["special"], **branches))
            continue
        branches = {
            f"{side}_branch": helper.make_graph(
                [helper.make_node("Identity", ["x"], [f"{side}{k}"])],
                f"{side}{k}", [], [helper.make_tensor_value_info(f"{side}{k}", 1, [2])],
            )
            for side in ("then", "else")
        }  # fmt: skip
        nodes.append(helper.make_node("If", ["c"], [f"o{k}"], **branches))
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    inputs = [x, cond, _int("r", [length])]
    return _model(nodes, inputs, [helper.make_tensor_value_info("o0", 1, [2]), _int("special")])


def test_runs_without_a_propagating_node_skip_the_walk_and_others_do_not(monkeypatch) -> None:
    """Inference in runs walks a run's proto for long reads only when the run holds a
    data-propagating node, its subgraphs (nested ones too) included: the run holding a Cast two
    subgraphs down of a long input is walked and inferred without data propagation; the runs of
    Identities are not walked, and inferred with it, as the walk would have answered."""
    from seqlower.passes import chunked_inference

    count, special = 3 * chunked_inference.RUN_SUBGRAPHS - 10, chunked_inference.RUN_SUBGRAPHS + 5
    model = ir.from_proto(_ifs_with_a_nested_cast(count, special, MAX_PROPAGATED_LENGTH + 1))
    walked: list[bool] = []
    data_props: list[bool] = []
    infer = onnx.shape_inference.infer_shapes

    def walk(graph: onnx.GraphProto) -> bool:
        answer = data_prop_is_bounded(graph)
        walked.append(answer)
        return answer

    def spy(proto, *args, data_prop=False, **kwargs):
        data_props.append(data_prop)
        return infer(proto, *args, data_prop=data_prop, **kwargs)

    monkeypatch.setattr(chunked_inference, "data_prop_is_bounded", walk)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", spy)
    assert chunked_inference.infer_in_runs(model, {})
    assert data_props == [True, False, True]  # the second run holds the Cast
    assert walked == [False]  # only that run walked, and found long
    outputs = {value.name: value for value in model.graph.outputs}
    assert outputs["special"].dtype == ir.DataType.INT64
    values = {o.name: o for node in model.graph for o in node.outputs}
    assert values[f"o{count - 1}"].shape == ir.Shape([2])
