"""A Unique whose input may be empty, run only where it is not.

    u, i, inv, c = Unique(x)  ->  u, i, inv, c = If(Size(x) == 0) {
                                      f = Reshape(x, [-1])
                                      return f, Cast(f, int64), ..  (those read)
                                  } else { return Unique(x) }

OpenVINO (2026.4.1, CPU plugin) fails at run time on a Unique of an input with no element ("[CPU]
ShapeOf node ... Cannot get dims for non static shape" where a node reads its output, "Convert
node" where an output is the model's); onnxruntime, onnx.reference and the specification give
four empty outputs. `torch.unique` of the image index of no box at all (mmdetection's
`roi2bbox` for a batch without boxes) comes to that. Only a Unique without `axis` (of the
flattened input, each output 1-D) is rewritten: its outputs for an empty input are the input
flattened, then three empty int64 vectors, which the then-branch makes from the input itself
(OpenVINO also fails on an If whose branch reads a constant of size 0); the If returns only
the outputs something reads. The If costs a Size and an Equal per Unique. A model reading two
or more of the int64 outputs gets a Cast for each, which a second lowering's cleanup merges
into one (so it is not lowered to the same bytes twice; one value returned twice by a branch
is a scalar in onnxruntime 1.32, so the Casts stay apart here).
"""

from __future__ import annotations

__all__ = ["guard_empty_unique"]

from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from seqlower.ops import constant_tensor, graph_nodes


def guard_empty_unique(graphs: Sequence[ir.Graph], unique: Callable[[str], str]) -> int:
    """Run each flattening Unique of `graphs` (every graph of a model) in the else-branch of an
    If on its input being empty, but for one that already runs so; returns how many.
    `unique(base)` gives a value name not yet taken."""
    found = [(graph, node) for graph in graphs for node in graph_nodes(graph) if _guardable(node)]
    found = [(graph, node) for graph, node in found if any(_read(v) for v in node.outputs)]
    if not found:
        return 0
    guarded = {
        id(branch.value)
        for graph in graphs
        for node in graph_nodes(graph)
        if (branch := _guarding_branch(node)) is not None
    }
    made = 0
    for graph, node in found:
        if id(graph) not in guarded:
            _guard(graph, node, unique)
            made += 1
    return made


def _guarding_branch(node: ir.Node) -> ir.Attr | None:
    """The else-branch of `node` where it is an If on `Size(x) == 0` whose else-branch is one
    Unique of x (what `_guard` makes), else None."""
    if node.op_type != "If" or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    branch = node.attributes.get("else_branch")
    equal = node.inputs[0].producer()
    if branch is None or equal is None or equal.op_type != "Equal" or len(equal.inputs) != 2:
        return None
    size = equal.inputs[0].producer() if equal.inputs[0] is not None else None
    if size is None or size.op_type != "Size" or _scalar(equal.inputs[1]) != 0:
        return None
    nodes = list(branch.value)
    if len(nodes) != 1 or nodes[0].op_type != "Unique" or nodes[0].inputs[0] is not size.inputs[0]:
        return None
    return branch


def _scalar(value: ir.Value | None) -> int | None:
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return int(tensor.numpy().reshape(()))


def _read(value: ir.Value) -> bool:
    return bool(value.uses()) or value.is_graph_output()


def _guardable(node: ir.Node) -> bool:
    if node.op_type != "Unique" or node.domain != "" or "axis" in node.attributes:
        return False
    if len(node.inputs) != 1 or node.inputs[0] is None or node.inputs[0].dtype is None:
        return False
    shape = node.inputs[0].shape
    return not (shape is not None and all(isinstance(d, int) and d > 0 for d in shape))


def _guard(graph: ir.Graph, node: ir.Node, unique: Callable[[str], str]) -> None:
    data = node.inputs[0]
    assert data is not None and data.dtype is not None
    base = node.outputs[0].name or "unique"

    def value(new: ir.Node, suffix: str, dtype: ir.DataType, dims: list) -> ir.Value:  # type: ignore[type-arg]
        new.outputs[0].name = new.name = unique(f"{base}_{suffix}")
        new.outputs[0].type = ir.TensorType(dtype)
        new.outputs[0].shape = ir.Shape(dims)
        return new.outputs[0]

    def constant(array: np.ndarray) -> ir.Node:
        return ir.node("Constant", [], {"value": ir.tensor(array)})

    size = ir.node("Size", [data])
    zero = constant(np.array(0, np.int64))
    value(size, "size", ir.DataType.INT64, [])
    value(zero, "zero", ir.DataType.INT64, [])
    empty = ir.node("Equal", [size.outputs[0], zero.outputs[0]])
    value(empty, "empty", ir.DataType.BOOL, [])

    flat_shape = constant(np.array([-1], np.int64))
    value(flat_shape, "flat_shape", ir.DataType.INT64, [1])
    flat = ir.node("Reshape", [data, flat_shape.outputs[0]])
    value(flat, "flat", data.dtype, [None])
    read = [k for k, old in enumerate(node.outputs) if _read(old)]
    then_nodes = [flat_shape, flat]
    then_outputs = [flat.outputs[0]] if 0 in read else []
    for k in read[1:] if read[0] == 0 else read:  # an empty int64 vector each (one value
        # returned twice would be (), not (0,), in onnxruntime 1.32)
        cast = ir.node("Cast", [flat.outputs[0]], {"to": ir.DataType.INT64})
        then_outputs.append(value(cast, f"none_{k}", ir.DataType.INT64, [None]))
        then_nodes.append(cast)
    then_branch = ir.Graph([], then_outputs, nodes=then_nodes, name=unique(f"{base}_when_empty"))

    kept = ir.Node(
        "", "Unique", [data], list(node.attributes.values()), num_outputs=len(node.outputs)
    )
    for k, (old, new) in enumerate(zip(node.outputs, kept.outputs, strict=True)):
        new.name = unique(f"{base}_found_{k}")
        new.type, new.shape = old.type, old.shape
    kept.name = unique(f"{base}_found")
    found = [kept.outputs[k] for k in read]  # the outputs nothing reads stay the Unique's
    else_branch = ir.Graph([], found, nodes=[kept], name=unique(f"{base}_found"))

    branch = ir.node(
        "If",
        [empty.outputs[0]],
        {"then_branch": then_branch, "else_branch": else_branch},
        num_outputs=len(read),
    )
    branch.name = unique(f"{base}_unless_empty")
    graph.insert_before(node, [size, zero, empty, branch])
    names = []
    for k, new in zip(read, branch.outputs, strict=True):
        old = node.outputs[k]
        new.type, new.shape = old.type, ir.Shape([None]) if old.shape is None else old.shape
        names.append(old.name)
        old.name = None
        old.replace_all_uses_with(new, replace_graph_outputs=True)
    graph.remove(node, safe=True)
    for new, name in zip(branch.outputs, names, strict=True):
        new.name = name
