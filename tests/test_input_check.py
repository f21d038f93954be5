"""The input check on models with many subgraphs: strict inference runs in pieces there (ONNX's
own is quadratic in the number of subgraphs), and still finds what the whole-model check finds;
and on models with weights, which inference's copy leaves out (their dims stay)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import seqlower
from seqlower.errors import InvalidModelError
from seqlower.input_check import _without_weights, check_input_proto
from seqlower.passes.chunked_inference import CHUNK_NODES, SUBGRAPH_LIMIT


def _many_branches(last_op: str, last_inputs: list[str]) -> onnx.ModelProto:
    """x -> (an If on c per block, enough of them to be cut into runs) -> a last node that reads
    x, from the first run, after the cut."""
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    blocks = max(SUBGRAPH_LIMIT + 1, CHUNK_NODES + 10)
    nodes = [
        helper.make_node("If", ["c"], [f"y{k}"], then_branch=then_branch, else_branch=else_branch)
        for k in range(blocks)
    ]
    nodes.append(helper.make_node(last_op, last_inputs, ["out"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("k", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_valid_model_with_many_subgraphs_passes():
    check_input_proto(_many_branches("Add", ["x", "y0"]), "m.onnx")


@pytest.mark.parametrize("inputs", [["x", "k"], [f"y{CHUNK_NODES + 5}", "k"]])
def test_a_type_error_after_a_cut_is_found(inputs):
    # float + int64, in the last run: one operand comes from the graph inputs or a later run
    with pytest.raises(InvalidModelError, match="the input model itself is invalid, ONNX type"):
        check_input_proto(_many_branches("Add", inputs), "m.onnx")


def test_an_operand_made_before_the_cut_keeps_its_type():
    # y0 is made in the first run, read in the last: its float type crosses the cut
    with pytest.raises(InvalidModelError, match="ONNX type and shape inference reject it"):
        check_input_proto(_many_branches("Add", ["y0", "k"]), "m.onnx")


def _weighted(weight_dims: list[int], split: list[int]) -> onnx.ModelProto:
    """x [2, 300] @ W (a weight of 300 x 4 floats, more than inference's copy keeps) -> y,
    split by an int64 initializer: the weight's dims and the split's content both matter."""
    weight = onnx.numpy_helper.from_array(np.ones(weight_dims, np.float32), "W")
    sizes = onnx.numpy_helper.from_array(np.array(split, np.int64), "sizes")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["y"]),
            helper.make_node("Split", ["y", "sizes"], ["a", "b"], axis=1),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 300])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, None]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, None]),
        ],
        initializer=[weight, sizes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_weights_are_left_out_of_the_inference_copy_only():
    model = _weighted([300, 4], [1, 3])
    check_input_proto(model, "m.onnx")
    copy, weights = _without_weights(model)
    assert weights == {"W"}
    assert [t.name for t in copy.graph.initializer] == ["sizes"]
    assert [v.name for v in copy.graph.input] == ["x", "W"]
    assert [t.name for t in model.graph.initializer] == ["W", "sizes"]  # the model is untouched


@pytest.mark.parametrize(
    ("weight_dims", "split"), [([200, 4], [1, 3]), ([300, 4], [1, 4])], ids=["weight", "split"]
)
def test_an_error_in_a_weight_or_a_shape_argument_is_still_found(weight_dims, split):
    # the weight's dims reach inference as its input's type; the split's sizes as content
    with pytest.raises(InvalidModelError, match="ONNX type and shape inference reject it"):
        check_input_proto(_weighted(weight_dims, split), "m.onnx")


# -- the ONNX checker runs on the weight-less copy only where it judges it as it judges the file


def _with_weight(
    weight: onnx.TensorProto | None = None, *, extra: list[onnx.TensorProto] = (), ir_version=8
) -> onnx.ModelProto:
    """x [2, 300] @ W [300, 4] -> y, with `extra` initializers after W."""
    weight = weight or onnx.numpy_helper.from_array(np.ones([300, 4], np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[weight, *extra],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def _weight(**fields) -> onnx.TensorProto:
    """W [300, 4] as a float tensor with `fields` set as given (raw_data by default)."""
    tensor = onnx.numpy_helper.from_array(np.ones([300, 4], np.float32), "W")
    for name, value in fields.items():
        if isinstance(value, list):
            del getattr(tensor, name)[:]
            getattr(tensor, name).extend(value)
        else:
            setattr(tensor, name, value)
    return tensor


def _unknown_op(model: onnx.ModelProto) -> onnx.ModelProto:
    model.graph.node.append(helper.make_node("NoSuchOp", ["y"], ["z"]))
    return model


def _output_twice(model: onnx.ModelProto) -> onnx.ModelProto:
    model.graph.node.append(helper.make_node("Relu", ["x"], ["W"]))  # W is an initializer
    return model


def _missing_output(model: onnx.ModelProto) -> onnx.ModelProto:
    model.graph.output.append(helper.make_tensor_value_info("nowhere", TensorProto.FLOAT, [1]))
    return model


_SMALL = onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "W")
_OTHER = onnx.numpy_helper.from_array(np.ones([300], np.float32), "")

INVALID_MODELS = {
    # a weight the checker may reject itself: checked as the file is
    "raw data too short": _with_weight(_weight(raw_data=b"\0" * 12)),
    "raw data four bytes short": _with_weight(_weight(raw_data=b"\0" * (300 * 4 * 4 - 4))),
    "raw data four bytes long": _with_weight(_weight(raw_data=b"\0" * (300 * 4 * 4 + 4))),
    "raw data and float data": _with_weight(_weight(float_data=[1.0])),
    "a zero dim with data": _with_weight(_weight(dims=[300, 0])),
    "a negative dim": _with_weight(_weight(dims=[-300, -4])),
    "float data as int32": _with_weight(_weight(raw_data=b"", int32_data=[1] * 1200)),
    "undefined type": _with_weight(_weight(data_type=TensorProto.UNDEFINED)),
    # names and versions that change what the checker looks for
    "two weights of one name": _with_weight(extra=[_weight()]),
    "a weight and a small initializer of one name": _with_weight(extra=[_SMALL]),
    "an initializer without a name": _with_weight(extra=[_OTHER]),
    "IR version 3, a weight that is not an input": _with_weight(ir_version=3),
    # errors elsewhere, around weights that pass
    "an unknown operator": _unknown_op(_with_weight()),
    "a weight's name made again by a node": _output_twice(_with_weight()),
    "an output no node makes": _missing_output(_with_weight()),
}


@pytest.mark.parametrize("name", list(INVALID_MODELS))
def test_the_checker_says_what_it_says_of_the_file(name, tmp_path):
    from seqlower.io import load_model

    path = tmp_path / "m.onnx"
    onnx.save(INVALID_MODELS[name], path)
    try:
        onnx.checker.check_model(str(path), full_check=False)
    except (onnx.checker.ValidationError, ValueError) as error:
        said = " ".join(str(error).replace("==> Context:", "; in").split())[:200]
        with pytest.raises(InvalidModelError, match="the ONNX checker rejects it") as raised:
            load_model(path)
        assert said in str(raised.value)
    else:  # this onnx release lets it through (older ones do not check raw data's size)
        try:
            load_model(path)
        except InvalidModelError as error:
            assert "the ONNX checker rejects it" not in str(error)


def _checked_models(monkeypatch) -> list[object]:
    """What `onnx.checker.check_model` is given from now on."""
    given: list[object] = []
    check = onnx.checker.check_model

    def recording(model, *args, **kwargs):
        given.append(model)
        return check(model, *args, **kwargs)

    monkeypatch.setattr(onnx.checker, "check_model", recording)
    return given


def test_a_file_with_weights_is_not_read_again_by_the_checker(tmp_path, monkeypatch):
    from seqlower.io import load_model

    path = tmp_path / "m.onnx"
    onnx.save(_with_weight(), path)
    given = _checked_models(monkeypatch)
    load_model(path)
    (checked,) = given
    assert isinstance(checked, onnx.ModelProto)
    assert [t.name for t in checked.graph.initializer] == []  # W is an input of its dims
    assert [v.name for v in checked.graph.input] == ["x", "W"]


def test_a_file_with_external_data_is_checked_in_its_folder(tmp_path, monkeypatch):
    from seqlower.io import load_model

    path = tmp_path / "m.onnx"
    onnx.save(_with_weight(), path, save_as_external_data=True, location="m.data")
    given = _checked_models(monkeypatch)
    load_model(path)
    assert given == [str(path)]


@pytest.mark.parametrize("holders", [SUBGRAPH_LIMIT, SUBGRAPH_LIMIT + 1])
def test_the_main_graph_is_inferred_in_runs_beyond_the_limit_of_holders(holders):
    """Counted until the answer is known; nodes with attributes but no subgraph do not count."""
    from seqlower.strict_inference import inferred_in_runs

    model = _many_branches("Add", ["x", "y0"])
    graph = model.graph
    ifs = [node for node in graph.node if node.op_type == "If"]
    del graph.node[:]
    reshaped = helper.make_node("Flatten", ["x"], ["f"], axis=0)  # an attribute, no subgraph
    graph.node.extend([reshaped] * (SUBGRAPH_LIMIT + 5) + ifs[:holders])
    assert inferred_in_runs(graph) is (holders > SUBGRAPH_LIMIT)


def test_the_split_and_concat_checks_walk_the_nodes_once_and_take_the_values_by_name():
    """`static_problem` answers as `split_or_axis_problem`, then `concat_mismatch`, each given
    every value; it takes the values by name as `strict_inference` returns them (100k of them
    on a large model: never read again into a map of its own) and reads the graph's nodes
    once for both checks (the earlier code read them four times)."""
    from collections.abc import Mapping

    from seqlower.static_errors import concat_mismatch, split_or_axis_problem, static_problem
    from seqlower.strict_inference import strict_inference

    def model(sizes: list[int], tail: str) -> onnx.ModelProto:
        split = onnx.numpy_helper.from_array(np.array(sizes, np.int64), "sizes")
        graph = helper.make_graph(
            [
                helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=0),
                helper.make_node("SequenceConstruct", ["x", tail], ["q"]),
                helper.make_node("ConcatFromSequence", ["q"], ["y"], axis=0),
                helper.make_node("ConcatFromSequence", ["s"], ["w"], axis=0),
            ],
            "g",
            [
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
                helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 2]),
            ],
            [
                helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("w", TensorProto.FLOAT, None),
            ],
            initializer=[split],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    class Looked(Mapping):
        """The values by name, counting how often they are gone through."""

        def __init__(self, values):
            self.values_, self.walks = values, 0

        def __getitem__(self, name):
            return self.values_[name]

        def __iter__(self):
            self.walks += 1
            return iter(self.values_)

        def __len__(self):
            return len(self.values_)

    class Counted:
        """A graph whose nodes are counted each time they are asked for."""

        def __init__(self, graph):
            self.graph, self.reads = graph, 0
            self.input, self.initializer = graph.input, graph.initializer

        @property
        def node(self):
            self.reads += 1
            return self.graph.node

    cases = (
        ([1, 3], "z", "differ on dimension 1"),
        ([-1, 5], "z", "one of them negative"),
        ([1, 3], "x", None),
    )
    for sizes, tail, said in cases:
        proto = model(sizes, tail)
        values = strict_inference(proto)
        assert isinstance(values, dict)
        assert values["y"].name == "y"
        listed = list(values.values())
        want = split_or_axis_problem(proto.graph, listed) or concat_mismatch(proto.graph, listed)
        looked, graph = Looked(values), Counted(proto.graph)
        found = static_problem(graph, looked)
        assert found == want
        assert (said is None and found is None) or said in found
        assert looked.walks == 0
        assert graph.reads == 1


def _corner_model(where: str) -> onnx.ModelProto:
    """x[3, 2] split by a scalar 1 with keepdims=0 (the keepdims corner: read as onnxruntime
    reads it, each element is [2]) and one element added to y[2], `where` the split is: the
    main graph, an If branch (nested in another If), or a model-local function; the other
    places hold plain nodes."""
    one = onnx.numpy_helper.from_array(np.array(1, np.int64), "one")
    zero = onnx.numpy_helper.from_array(np.array(0, np.int64), "zero")

    def corner(prefix: str) -> list[onnx.NodeProto]:
        return [
            helper.make_node("Constant", [], [f"{prefix}one"], value=one),
            helper.make_node("Constant", [], [f"{prefix}zero"], value=zero),
            helper.make_node(
                "SplitToSequence", ["x", f"{prefix}one"], [f"{prefix}s"], axis=0, keepdims=0
            ),
            helper.make_node("SequenceAt", [f"{prefix}s", f"{prefix}zero"], [f"{prefix}a"]),
            helper.make_node("Add", [f"{prefix}a", "y"], [f"{prefix}out"]),
        ]

    def branch(name: str, nodes: list[onnx.NodeProto], out: str) -> onnx.GraphProto:
        typed = helper.make_tensor_value_info(out, TensorProto.FLOAT, [2])
        return helper.make_graph(nodes, name, [], [typed])

    plain = [helper.make_node("Add", ["y", "y"], ["plain"])]
    functions = []
    if where == "main":
        nodes = corner("m_")
        nodes.append(helper.make_node("Identity", ["m_out"], ["out"]))
    elif where == "branch":
        inner = helper.make_node(
            "If",
            ["c"],
            ["i_out"],
            then_branch=branch("inner_then", corner("b_"), "b_out"),
            else_branch=branch("inner_else", [helper.make_node("Neg", ["y"], ["n"])], "n"),
        )
        outer = helper.make_node(
            "If",
            ["c"],
            ["out"],
            then_branch=branch("outer_then", [inner], "i_out"),
            else_branch=branch("outer_else", plain, "plain"),
        )
        nodes = [outer]
    else:
        function = helper.make_function(
            "local", "Corner", ["x", "y"], ["f_out"], corner("f_"), [helper.make_opsetid("", 17)]
        )
        functions.append(function)
        nodes = [helper.make_node("Corner", ["x", "y"], ["out"], domain="local")]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=functions)


@pytest.mark.parametrize("where", ["main", "branch", "function"])
def test_the_keepdims_corners_are_looked_for_only_where_the_walk_found_one(monkeypatch, where):
    """The walk that forgets declared shapes also tells whether a SplitToSequence may be a
    keepdims corner (keepdims=0 and a split given), in the main graph, a nested subgraph or a
    function; the corners' own walk runs only then. Read the spec's way the corner keeps the
    axis ([1, 2] + [2] is a [1, 2]: the declared [2] is tolerated, so the check passes either
    way); read as onnxruntime reads it the corner is squeezed, as the corners' walk does."""
    import seqlower.input_check as input_check
    from seqlower.keepdims_corner import squeeze_keepdims_corners

    calls = []

    def counted(proto):
        calls.append(proto)
        return squeeze_keepdims_corners(proto)

    monkeypatch.setattr(input_check, "squeeze_keepdims_corners", counted)
    model = _corner_model(where)
    check_input_proto(model, "m.onnx")
    assert len(calls) == 1
    assert counted(onnx.ModelProto.FromString(model.SerializeToString())) == 1  # one corner
    check_input_proto(model, "m.onnx", split_keepdims="spec")
    assert len(calls) == 2  # not called under the spec's reading


def test_a_model_without_a_keepdims_corner_is_not_walked_for_one(monkeypatch):
    """keepdims=1, or keepdims=0 without a split: no corner can be; and the dense SequenceMap
    form of the benchmark (SplitToSequence without a split) is one of these."""
    import seqlower.input_check as input_check

    calls = []
    monkeypatch.setattr(input_check, "squeeze_keepdims_corners", calls.append)
    for keepdims, inputs in ((1, ["x", "m_one"]), (0, ["x"])):
        model = _corner_model("main")
        split = next(node for node in model.graph.node if node.op_type == "SplitToSequence")
        del split.input[:]
        split.input.extend(inputs)
        next(a for a in split.attribute if a.name == "keepdims").i = keepdims
        check_input_proto(model, "m.onnx")
    assert calls == []


def test_negative_dims_are_forgotten_and_sparse_tensors_refused_in_one_walk():
    """The check makes each negative declared dim unknown in place, in every graph and
    function, in the walk of the graphs that refuses sparse tensors (the only listing of the
    graphs); the first sparse tensor found is still the one said: the graphs' in their order,
    then the functions' nodes."""
    model = _corner_model("branch")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1

    def then_branch(node: onnx.NodeProto) -> onnx.GraphProto:
        return next(a.g for a in node.attribute if a.name == "then_branch")

    inner_then = then_branch(then_branch(model.graph.node[0]).node[0])
    inner_then.output[0].type.tensor_type.shape.dim[0].dim_value = -5
    check_input_proto(model, "m.onnx")
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    assert not inner_then.output[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_value == 2

    values = onnx.numpy_helper.from_array(np.array([1.0], np.float32), "v")
    indices = onnx.numpy_helper.from_array(np.array([0], np.int64), "i")
    sparse = helper.make_sparse_tensor(values, indices, [2])
    inner_then.sparse_initializer.append(sparse)
    function = helper.make_function(
        "local", "F", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])], []
    )
    function.node.append(helper.make_node("Constant", [], ["k"], sparse_value=sparse))
    model.functions.append(function)
    with pytest.raises(InvalidModelError, match="sparse initializer 'v' is not supported"):
        check_input_proto(model, "m.onnx")
    del inner_then.sparse_initializer[:]
    with pytest.raises(InvalidModelError, match="node '' \\(Constant\\) has a sparse tensor"):
        check_input_proto(model, "m.onnx")


def _sum_of_a_list(score_shape: list[int] | None) -> onnx.ModelProto:
    """The sum of a list of two rows, returned with an output whose tensor type declares no
    shape when `score_shape` is None (a rank PyTorch's TorchScript exporter lost)."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
        helper.make_node("ReduceSum", ["c"], ["score"], keepdims=0),
    ]
    score = helper.make_tensor_value_info("score", TensorProto.FLOAT, score_shape)
    if score_shape is None:
        score.type.tensor_type.ClearField("shape")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [score]
    )
    # IR 8: onnxruntime 1.20 reads up to 10
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_output_without_a_shape_is_let_through_and_declared_with_its_proved_rank():
    # the checker requires a shape of the model's inputs and outputs (onnxruntime does not)
    model = _sum_of_a_list(None)
    with pytest.raises(onnx.checker.ValidationError, match="Field 'shape' of 'type'"):
        onnx.checker.check_model(model)
    check_input_proto(model, "m.onnx")  # the only complaint: the lowering declares the rank
    x = np.array([1.5, -4.0], np.float32)
    for declared in (False, True):  # as exported, and with the rank declared (a scalar)
        if declared:
            model.graph.output[0].type.tensor_type.shape.SetInParent()
        lowered, report = seqlower.optimize(model)
        onnx.checker.check_model(lowered, full_check=True)
        assert lowered.graph.output[0].type.tensor_type.HasField("shape")
        assert len(lowered.graph.output[0].type.tensor_type.shape.dim) == 0
        said = [w for w in report.warnings if "'score'" in w]
        if declared:
            assert not said, said
        else:  # the report says what the lowering declared
            assert len(said) == 1 and "rank 0" in said[0], said
        assert not [n for n in lowered.graph.node if "Sequence" in n.op_type]
        providers = ["CPUExecutionProvider"]
        session = ort.InferenceSession(lowered.SerializeToString(), providers=providers)
        assert session.run(None, {"x": x})[0] == np.float32(-5.0)


def test_an_input_without_a_shape_is_named_with_the_hint():
    model = _sum_of_a_list([])
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(InvalidModelError) as refused:
        check_input_proto(model, "m.onnx")
    said = str(refused.value)
    assert "Field 'shape' of 'type' is required but missing" in said
    assert "input 'x' of the model declares an element type but no shape" in said
    assert "\n" not in said
