"""Conditions of If nodes compared on a one-element vector, without making it a scalar first:
run after lowering, with `--target onnxruntime` only.

    n = Reshape(Shape(data, end=1), [])           ge = GreaterOrEqual(Shape(data, end=1), 2)
    ge = GreaterOrEqual(n, 2)               ->    c = And(p, ge)                  ([1] each)
    c = And(p, ge)                                If(c) ..
    If(c) ..

A list's length is a scalar (`SequenceLength`), which the tensor form makes from the `[1]` that
`Shape` gives with a Reshape: one launch on every pass (about 0.3 microseconds, once per
iteration of a Loop around it) when the length only decides a branch (`if len(stack) >= 2:`).
An If takes any single-element boolean tensor as its condition, so the comparisons and the
logic between them may run on the `[1]` itself.

A Reshape moves out when its input has the static shape `[1]`, its target is the empty shape,
and every reader of its result, followed through element-wise comparisons and logic whose other
inputs have static shapes of one element at most, ends as the condition of an If (nothing else
reads any of those values, none is a graph output). The values on the way get the shape `[1]`.
TensorRT wants a 0-D condition, so only `--target onnxruntime` runs this pass.
"""

from __future__ import annotations

__all__ = ["SingleElementConditionsPass"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs

_ELEMENTWISE = frozenset(
    {"And", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Not", "Or", "Xor"}
)


class SingleElementConditionsPass(ir.passes.InPlacePass):
    """Each Reshape of a `[1]` to a scalar that only decides If conditions is dropped (see
    the module docstring); `count` says how many."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.count = 0
        for graph in list(iter_all_graphs(model)):
            for node in list(graph_nodes(graph)):
                path = _conditions_only(node)
                if path is None:
                    continue
                vector = node.inputs[0]
                assert vector is not None
                for value in path:
                    value.shape = ir.Shape([1])
                node.outputs[0].replace_all_uses_with(vector)
                graph.remove(node, safe=True)
                self.count += 1
        return ir.passes.PassResult(model, bool(self.count))


def _conditions_only(node: ir.Node) -> list[ir.Value] | None:
    """The values between a Reshape([1] -> []) and the If conditions it alone decides, or None
    when `node` is not such a Reshape or something else reads them."""
    if node.domain != "" or node.op_type != "Reshape" or len(node.inputs) < 2:
        return None
    data, target = node.inputs[0], node.inputs[1]
    if data is None or data.shape is None or list(data.shape) != [1]:
        return None
    array = target.const_value.numpy() if target is not None and target.const_value else None
    if array is None:
        producer = target.producer() if target is not None else None
        if producer is None or producer.op_type != "Constant" or producer.domain != "":
            return None
        attribute = producer.attributes.get("value")
        tensor = attribute.as_tensor() if attribute is not None else None
        array = tensor.numpy() if tensor is not None else None
    if array is None or array.shape != (0,):
        return None
    path: list[ir.Value] = []
    pending = [node.outputs[0]]
    while pending:
        value = pending.pop()
        if value.is_graph_output():
            return None
        for use in value.uses():
            reader = use.node
            if reader.domain != "":
                return None
            if reader.op_type == "If" and use.idx == 0:
                continue
            if reader.op_type not in _ELEMENTWISE or len(reader.outputs) != 1:
                return None
            others = [v for i, v in enumerate(reader.inputs) if i != use.idx]
            if not all(_one_element(v) for v in others):
                return None
            if reader.outputs[0] not in path:
                path.append(reader.outputs[0])
                pending.append(reader.outputs[0])
    return path


def _one_element(value: ir.Value | None) -> bool:
    """A value whose static shape holds one element: a scalar or `[1]` (broadcast with `[1]`
    gives `[1]`)."""
    return (
        value is not None
        and value.shape is not None
        and all(isinstance(d, int) and d == 1 for d in value.shape)
        and len(value.shape) <= 1
    )
