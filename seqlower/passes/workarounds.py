"""Rewrite patterns that crash a known runtime into equivalent ones that do not.

    Cast(Transpose(x, perm), to=T)  ->  Transpose(Cast(x, to=T), perm)
    Loop(M, c, Constant(<empty [0, 4]>), ..)  ->  Loop(M, c, ConstantOfShape([0, 4]), ..)
    Constant(<empty [0, 4]>) in a model with an If  ->  ConstantOfShape([0, 4])
    If(c) with c of shape [1, 1]  ->  If(Squeeze(c))
    body: g = f(..); If(..) { .. g .. }; return g  ->  body: ..; return Identity(g)

onnxruntime (1.20 to at least 1.32, x86_64, default optimization level; quirk
`transpose-cast-matmul-crash` in seqlower.runtime_quirks) dies with a segmentation
fault while creating a session for Transpose -> Cast -> MatMul: its MatMul-Transpose fusion swaps
the Cast and the Transpose with nodes that carry no operator schema, and the NCHWc layout
transformer then dereferences that missing schema (microsoft/onnxruntime#28392). Batching emits
exactly that chain when a body casts a stacked input before a MatMul. With the Cast first the
fusion has nothing to swap, and the result is the same: Cast works element by element.

OpenVINO (2026.4.1) cannot convert a Loop one of whose carried values starts as a constant of
size 0 ("Accessing out-of-range dimension"): a list that starts as `[torch.zeros(0)]`, a tensor
accumulator that starts empty. The same empty tensor made by ConstantOfShape converts.

OpenVINO (2026.4.1) cannot compile an If one of whose branches reads a constant of size 0, or
a value it folds into one (`if not boxes: return torch.zeros(0, 4)`; "CPU plug-in doesn't support
If operation with dynamic rank"): in a model with an If, every such constant is made by
ConstantOfShape, which converts (`--target onnxruntime` leaves them be).

OpenVINO (2026.4.1) refuses an If whose condition has a rank above 1 ("Rank of If condition
input must be equal to 0 or 1"; a TorchScript export compares tensors of shape [1, 1] so), which the
specification allows when it holds one element: a portable target gives it the condition
squeezed to a scalar (a Squeeze per branch taken, so `--target onnxruntime` leaves it out).

OpenVINO (2026.4.1), reading a model from a file, fails on an If of two or more outputs in a
Loop body whose branch reads a value the body also returns ("then_results.size() ==
else_results.size()"); the body returning a copy of that value converts. The copy costs a
kernel per iteration, so a speed-first target (`--target onnxruntime`) leaves it out.
"""

from __future__ import annotations

__all__ = ["RuntimeWorkaroundsPass"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.ops import iter_all_graphs
from seqlower.uses import use_count


class RuntimeWorkaroundsPass(ir.passes.InPlacePass):
    """After the pass, `swapped` counts the Transpose -> Cast pairs put in the other order, to
    a fixpoint: Casts after a chain of Transposes end up before the whole chain; `remade`
    counts the empty constants a Loop starts from made by ConstantOfShape and the body outputs
    returned as copies."""

    def __init__(self, speed_first: bool = False) -> None:
        super().__init__()
        self.speed_first = speed_first  # leave out what costs time in onnxruntime
        self.swapped = 0
        self.remade = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.swapped = self.remade = 0
        taken: set[str] = set()

        def names() -> set[str]:  # every value name of the model, read once when needed
            if not taken:
                taken.update(model.graph.initializers)
                for graph in iter_all_graphs(model):
                    taken.update(v.name for v in graph.inputs if v.name)
                    taken.update(v.name for node in graph for v in node.outputs if v.name)
            return taken

        graphs = list(iter_all_graphs(model))  # the rewrites below add no subgraph
        if not self.speed_first and any(  # onnxruntime folds them: no cost, but no need
            node.op_type == "If" for graph in graphs for node in graph
        ):
            self.remade += _remake_every_empty_constant(model, graphs, names)
        for graph in graphs:
            for loop in [node for node in graph if node.op_type == "Loop" and node.domain == ""]:
                self.remade += _remake_empty_constants(graph, loop, names)
            if graph is not model.graph and not self.speed_first:  # an Identity per iteration
                self.remade += _copy_outputs_read_deeper(graph, names)
            if not self.speed_first:  # a Squeeze per branch taken
                self.remade += _scalar_conditions(graph, names)
            queue = [node for node in graph if _is_cast_of_private_transpose(node)]
            while queue:
                cast = queue.pop()
                if cast.graph is not graph or not _is_cast_of_private_transpose(cast):
                    continue
                new_cast, new_transpose = _cast_first(graph, cast)
                self.swapped += 1
                # the new Cast may follow another Transpose, and a Cast that read the old one
                # now follows the moved Transpose
                queue.append(new_cast)
                queue.extend(new_transpose.outputs[0].consumers())
        return ir.passes.PassResult(model, self.swapped > 0 or self.remade > 0)


def _is_cast_of_private_transpose(node: ir.Node) -> bool:
    """A Cast whose input is a Transpose output read by that Cast alone."""
    if node.op_type != "Cast" or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return False
    transposed = node.inputs[0]
    transpose = transposed.producer()
    return (
        transpose is not None
        and transpose.op_type == "Transpose"
        and transpose.domain == ""
        and transpose.graph is node.graph
        and use_count(transposed) == 1
        and not transposed.is_graph_output()
    )


def _cast_first(graph: ir.Graph, cast: ir.Node) -> tuple[ir.Node, ir.Node]:
    """Put `cast` before the Transpose it reads; returns the new Cast and Transpose."""
    transposed = cast.inputs[0]
    assert transposed is not None
    transpose = transposed.producer()
    assert transpose is not None
    data = transpose.inputs[0]
    result = cast.outputs[0]
    new_cast = ir.Node("", "Cast", [data], list(cast.attributes.values()), name=cast.name)
    new_transpose = ir.Node(
        "",
        "Transpose",
        [new_cast.outputs[0]],
        list(transpose.attributes.values()),
        name=transpose.name,
    )
    graph.insert_before(transpose, [new_cast, new_transpose])
    casted = new_cast.outputs[0]
    casted.type = result.type
    casted.shape = None if data is None or data.shape is None else ir.Shape(list(data.shape))
    new_transpose.outputs[0].type = result.type
    new_transpose.outputs[0].shape = result.shape
    names = (transposed.name, result.name)
    result.replace_all_uses_with(new_transpose.outputs[0], replace_graph_outputs=True)
    graph.remove([cast, transpose], safe=True)
    casted.name, new_transpose.outputs[0].name = names
    return new_cast, new_transpose


# the element types ConstantOfShape makes (opset 9 on)
_FILLABLE = frozenset(
    ir.DataType[name]
    for name in (
        "FLOAT16", "FLOAT", "DOUBLE", "INT8", "INT16", "INT32", "INT64",
        "UINT8", "UINT16", "UINT32", "UINT64", "BOOL",
    )
)  # fmt: skip


def _unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _remake_empty_constants(graph: ir.Graph, loop: ir.Node, names: Callable[[], set[str]]) -> int:
    """Give `loop` each carried initial value that is a constant of size 0 as a ConstantOfShape
    of the same shape and type; returns how many."""
    remade = 0
    for index in range(2, len(loop.inputs)):
        value = loop.inputs[index]
        empty = _empty_constant(value)
        if empty is None or empty.dtype not in _FILLABLE:
            continue
        made = _constant_of_shape(graph, loop, value, empty, names)  # type: ignore[arg-type]
        loop.replace_input_with(index, made)
        remade += 1
        _drop_if_unread(graph, value)  # type: ignore[arg-type]
    return remade


def _remake_every_empty_constant(
    model: ir.Model, graphs: list[ir.Graph], names: Callable[[], set[str]]
) -> int:
    """Make every constant of size 0 that a node or a subgraph's output reads a ConstantOfShape
    of the same shape and type, where the constant was (an initializer's at the start of the
    main graph; a graph output of the model keeps its constant); returns how many constants
    were remade. onnxruntime folds such a ConstantOfShape, and the cleanup's hoisting and
    sinking leave it where it is, as they leave a Constant."""
    made: dict[ir.Value, ir.Value] = {}
    for graph in graphs:
        empties = [(node, node.outputs[0]) for node in graph if node.op_type == "Constant"]
        if graph is model.graph:
            start = next(iter(graph), None)  # the initializers' go before it, in their order
            empties += [(start, value) for value in graph.initializers.values()]
        for before, value in empties:
            empty = _empty_constant(value)
            read = any(_reads_data(use.node, use.idx) for use in value.uses()) or (
                graph is not model.graph and value.is_graph_output()
            )
            if empty is None or empty.dtype not in _FILLABLE or not read:
                continue
            made[value] = _constant_of_shape(graph, before, value, empty, names)
            for user, index in list(value.uses()):
                user.replace_input_with(index, made[value])
    for graph in graphs[1:]:  # a branch may return a constant of its own
        for index, value in enumerate(graph.outputs):
            if value in made:
                graph.outputs[index] = made[value]
    for value in made:
        _drop_if_unread(value.graph or model.graph, value)
    return len(made)


# the inputs that are shapes, axes, sizes or pads, not data: an empty one of these is a
# constant argument OpenVINO takes (a Reshape to a scalar), so it stays a Constant
_ARGUMENTS = {
    "ConstantOfShape": 0, "Expand": 1, "Pad": 1, "Reshape": 1, "Resize": 1, "Slice": 1,
    "Split": 1, "Squeeze": 1, "Tile": 1, "TopK": 1, "Unsqueeze": 1,
}  # fmt: skip


def _reads_data(node: ir.Node, index: int) -> bool:
    """Whether input `index` of `node` is data, not an argument (an index of `_ARGUMENTS`'s or
    after it, a reduction's axes)."""
    first_argument = 1 if node.op_type.startswith("Reduce") else _ARGUMENTS.get(node.op_type)
    return node.domain != "" or first_argument is None or index < first_argument


def _constant_of_shape(
    graph: ir.Graph,
    before: ir.Node | None,
    value: ir.Value,
    empty: ir.TensorProtocol,
    names: Callable[[], set[str]],
) -> ir.Value:
    """A ConstantOfShape of `empty`'s shape and type, inserted in `graph` before `before` (at
    the end when None), named after `value`."""
    base = f"{value.name or 'empty'}_of_shape"
    shape = ir.node("Constant", [], {"value": ir.tensor(np.array(empty.shape.numpy(), np.int64))})
    fill = ir.tensor(np.zeros(1, empty.dtype.numpy()))
    made = ir.node("ConstantOfShape", [shape.outputs[0]], {"value": fill})
    shape.outputs[0].name = _unique(f"{base}_shape", names())
    made.outputs[0].name = _unique(base, names())
    shape.name, made.name = shape.outputs[0].name, made.outputs[0].name
    shape.outputs[0].type = ir.TensorType(ir.DataType.INT64)
    shape.outputs[0].shape = ir.Shape([len(empty.shape)])
    made.outputs[0].type = ir.TensorType(empty.dtype)
    made.outputs[0].shape = ir.Shape(list(empty.shape.numpy()))
    if before is None:
        graph.extend([shape, made])
    else:
        graph.insert_before(before, [shape, made])
    return made.outputs[0]


def _drop_if_unread(graph: ir.Graph, value: ir.Value) -> None:
    """Remove the Constant or initializer of `value` once nothing reads it."""
    if value.uses() or value.is_graph_output():
        return
    producer = value.producer()
    if producer is not None:
        producer.graph.remove(producer, safe=True)  # type: ignore[union-attr]
    elif graph.initializers.get(value.name) is value:  # type: ignore[arg-type]
        del graph.initializers[value.name]  # type: ignore[arg-type]


def _empty_constant(value: ir.Value | None) -> ir.TensorProtocol | None:
    """The tensor of `value` when it is a Constant's or a fixed initializer's, of size 0."""
    if value is None or value.is_graph_input():
        return None
    producer = value.producer()
    if producer is not None:
        attribute = producer.attributes.get("value")
        if producer.op_type != "Constant" or producer.domain != "" or attribute is None:
            return None
        tensor = attribute.as_tensor()
    else:
        tensor = value.const_value  # type: ignore[assignment]
    if tensor is None or 0 not in tuple(tensor.shape.numpy()):
        return None
    return tensor


def _scalar_conditions(graph: ir.Graph, names: Callable[[], set[str]]) -> int:
    """Give each If of `graph` whose condition has a known rank of 2 or more (one element, as
    the specification requires) that condition squeezed to a scalar; returns how many."""
    squeezed = 0
    for node in [node for node in graph if node.op_type == "If" and node.domain == ""]:
        condition = node.inputs[0]
        if condition is None or condition.shape is None or len(condition.shape) < 2:
            continue
        squeeze = ir.node("Squeeze", [condition])  # every dim is 1: no axes squeezes them all
        squeeze.outputs[0].name = _unique(f"{condition.name or 'condition'}_scalar", names())
        squeeze.name = squeeze.outputs[0].name
        squeeze.outputs[0].type = condition.type
        squeeze.outputs[0].shape = ir.Shape([])
        graph.insert_before(node, [squeeze])
        node.replace_input_with(0, squeeze.outputs[0])
        squeezed += 1
    return squeezed


def _copy_outputs_read_deeper(graph: ir.Graph, names: Callable[[], set[str]]) -> int:
    """Return a copy (Identity) of each output of the subgraph `graph` that a graph nested in
    it reads; returns how many. `names` gives the value names taken (read when needed)."""
    copied = 0
    for index, value in enumerate(list(graph.outputs)):
        if value.producer() is None or value.producer().graph is not graph:  # type: ignore[union-attr]
            continue  # an input passed through, or an outer value
        if all(use.node.graph is graph for use in value.uses()):
            continue
        copy = ir.node("Identity", [value])
        copy.outputs[0].name = _unique(f"{value.name}_returned", names())
        copy.name = copy.outputs[0].name
        copy.outputs[0].type, copy.outputs[0].shape = value.type, value.shape
        graph.append(copy)
        graph.outputs[index] = copy.outputs[0]
        copied += 1
    return copied
