"""Rewrite patterns that crash a known runtime into equivalent ones that do not.

    Cast(Transpose(x, perm), to=T)  ->  Transpose(Cast(x, to=T), perm)
    Loop(M, c, Constant(<empty [0, 4]>), ..)  ->  Loop(M, c, ConstantOfShape([0, 4]), ..)
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

        for graph in iter_all_graphs(model):
            for loop in [node for node in graph if node.op_type == "Loop" and node.domain == ""]:
                self.remade += _remake_empty_constants(graph, loop, names)
            if graph is not model.graph and not self.speed_first:  # an Identity per iteration
                self.remade += _copy_outputs_read_deeper(graph, names)
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
        base = f"{value.name or 'empty'}_of_shape"  # type: ignore[union-attr]
        shape = ir.node(
            "Constant", [], {"value": ir.tensor(np.array(empty.shape.numpy(), np.int64))}
        )
        fill = ir.tensor(np.zeros(1, empty.dtype.numpy()))
        made = ir.node("ConstantOfShape", [shape.outputs[0]], {"value": fill})
        shape.outputs[0].name = _unique(f"{base}_shape", names())
        made.outputs[0].name = _unique(base, names())
        shape.name, made.name = shape.outputs[0].name, made.outputs[0].name
        shape.outputs[0].type = ir.TensorType(ir.DataType.INT64)
        shape.outputs[0].shape = ir.Shape([len(empty.shape)])
        made.outputs[0].type = ir.TensorType(empty.dtype)
        made.outputs[0].shape = ir.Shape(list(empty.shape.numpy()))
        graph.insert_before(loop, [shape, made])
        loop.replace_input_with(index, made.outputs[0])
        remade += 1
        producer = value.producer()  # type: ignore[union-attr]
        if value.uses() or value.is_graph_output():  # type: ignore[union-attr]
            continue
        if producer is not None:
            producer.graph.remove(producer, safe=True)  # type: ignore[union-attr]
        elif graph.initializers.get(value.name) is value:  # type: ignore[union-attr]
            del graph.initializers[value.name]  # type: ignore[union-attr, arg-type]
    return remade


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
