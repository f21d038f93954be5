"""Models a new user meets first, as PyTorch's TorchScript exporter writes them (node names and
all), built with onnx.helper so that no torch is needed."""

from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper as h


def split_loop_sum(rows: str | int = "N") -> onnx.ModelProto:
    """`xs = x.split(3, 0)`; `for c in xs: res.append(c.sum(0, keepdim=True))`;
    `torch.cat(res, 0) + xs[-1].mean() * len(xs)`, x declared `[rows, 4]`.

    As the exporter writes it, the Loop body's ReduceSum reads its axes from a Constant of the
    main graph (an outer-scope value), which ONNX shape inference cannot read the content of.
    """
    body = h.make_graph(
        [
            h.make_node(
                "SequenceAt", ["/SplitToSequence_output_0", "i"], ["c"], name="/SequenceAt"
            ),
            h.make_node("ReduceSum", ["c", "axes"], ["s"], keepdims=1, name="/ReduceSum"),
            h.make_node("SequenceInsert", ["acc", "s"], ["acc_out"], name="/SequenceInsert"),
            h.make_node("Identity", ["true"], ["cond_out"], name="/Identity"),
        ],
        "sub_graph",
        [
            h.make_tensor_value_info("i", T.INT64, []),
            h.make_tensor_value_info("cond", T.BOOL, []),
            h.make_tensor_sequence_value_info("acc", T.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("cond_out", T.BOOL, []),
            h.make_tensor_sequence_value_info("acc_out", T.FLOAT, None),
        ],
    )

    def constant(name: str, dtype: int, dims: list[int], values: list) -> onnx.NodeProto:
        tensor = h.make_tensor(name, dtype, dims, values)
        return h.make_node("Constant", [], [name], value=tensor, name=f"/{name}")

    nodes = [
        constant("axes", T.INT64, [1], [0]),
        constant("three", T.INT64, [], [3]),
        constant("true", T.BOOL, [], [True]),
        constant("last", T.INT64, [], [-1]),
        h.make_node("SplitToSequence", ["x", "three"], ["/SplitToSequence_output_0"], axis=0,
                    name="/SplitToSequence"),
        h.make_node("SequenceEmpty", [], ["empty"], dtype=T.FLOAT, name="/SequenceEmpty"),
        h.make_node("SequenceLength", ["/SplitToSequence_output_0"], ["n"], name="/SequenceLength"),
        h.make_node("Loop", ["n", "true", "empty"], ["res"], body=body, name="/Loop"),
        h.make_node("ConcatFromSequence", ["res"], ["cat"], axis=0, name="/ConcatFromSequence"),
        h.make_node("SequenceAt", ["/SplitToSequence_output_0", "last"], ["tail"],
                    name="/SequenceAt_1"),
        h.make_node("ReduceMean", ["tail"], ["mean"], keepdims=0, name="/ReduceMean"),
        h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT, name="/Cast"),
        h.make_node("Mul", ["mean", "nf"], ["scaled"], name="/Mul"),
        h.make_node("Add", ["cat", "scaled"], ["y"], name="/Add"),
    ]  # fmt: skip
    graph = h.make_graph(
        nodes,
        "main_graph",
        [h.make_tensor_value_info("x", T.FLOAT, [rows, 4])],
        [h.make_tensor_value_info("y", T.FLOAT, [None, 4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model
