"""Rewrite patterns that crash a known runtime into equivalent ones that do not.

    Cast(Transpose(x, perm), to=T)  ->  Transpose(Cast(x, to=T), perm)
    Loop(M, c, Constant(<empty [0, 4]>), ..)  ->  Loop(M, c, ConstantOfShape([0, 4]), ..)
    Constant(<empty [0, 4]>) in a model with an If  ->  ConstantOfShape([0, 4])
    If(c) with c of shape [1, 1]  ->  If(Squeeze(c))
    body: g = f(..); If(..) { .. g .. }; return g  ->  body: ..; return Identity(g)
    ys = Loop(M, c, v..)  ->  k, r = Loop(M, c, v.., 0) { .., k + 1 }; ys = Gather(r, Range(0, k))
    Loop(M, ..)  ->  Loop(Max(M, 0), ..)
    Range(s, l, d), d a constant > 0 (< 0)  ->  Range(s, Max(l, s), d)  (Min(l, s))
    ReduceProd(Slice(Shape(x), [0], [2]))  ->  Mul(Slice(Shape(x), [0], [1]), Slice(.., [1], [2]))
    Add(ConstantOfShape(s), f), f a scalar  ->  Expand(f, s)  (seqlower.passes.filled_arithmetic)
    Unique(x)  ->  If(Size(x) == 0) {Reshape(x, [-1]), ..} else {Unique(x)}  (.. empty_unique)
    ReduceMax(x)  ->  Where(r == lowest and no x == lowest, -inf, r)  (.. reduced_extrema)

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

OpenVINO (2026.4.1) gives a Loop that runs no iteration the scan outputs of the last inference
that ran one (the same compiled model given 5 rows, then 0, returns 5 rows again): a silent
wrong result wherever a list can be empty. A Loop that may run no iteration counts its
iterations in a carried value, and each scan output is read as its first count rows (a Gather
of `Range(0, count)`), which OpenVINO computes right (a count derived from the iteration number
is not enough: OpenVINO sees through it). The count costs an Add per iteration and the Gather a
copy (5% to 15% of the latency of small list models in onnxruntime), so only `--target
openvino` asks for it (`openvino_loops`); a Loop whose trip count is a positive constant and whose
condition starts true runs, and needs none.

OpenVINO (2026.4.1) runs a Loop whose trip count is negative without end (the specification,
onnx.reference and onnxruntime: no iteration; `for _ in range(n)` with n < 0 exported by
TorchScript). With `openvino_loops`, a trip count that may be negative is `Max(M, 0)`.

OpenVINO (2026.4.1) gives `Range(start, limit, delta)` |ceil((limit - start) / delta)| elements
where the specification gives max(ceil((limit - start) / delta), 0): Range(3, 2, 1) is [3], not
empty, and Range(5, 2, 1) is [5, 6, 7] (`torch.arange(s, s + n)` with n < 0; a segment of
negative length). With `openvino_loops`, a Range of constant step gives no element past its
start: `Range(s, Max(l, s), d)` for d > 0, `Range(s, Min(l, s), d)` for d < 0 (a Max per Range;
none where the limit is never negative and the start a constant <= 0, nor for a step known only
at run time).

OpenVINO (2026.4.1) mistakes `ReduceProd(Slice(Shape(x), [0], [2]))`, for x of a static 0 dim
beside a dynamic one ([B, 0, 6]), for the dynamic dim: a Reshape of x to that product
(allowzero=1) then fails ("the shape of input data (3.0.6) conflicts with the reshape pattern
(0.6)"), or, where the fault reaches no check, its readers compute with B rows where there are
none. The lists' stacked forms merge two dims so. With `openvino_loops`, a ReduceProd (all
axes, keepdims) of a 1-D int64 of 2 to 8 elements is the Mul of its elements, each a Slice (of
the Shape itself where the vector is a Slice of one) or a constant where inference gives the
dim, which OpenVINO computes right (shape arithmetic: a Slice and a Mul per element).

OpenVINO (2026.4.1) gives `ConstantOfShape(s) + f`, f a scalar, the shape (1, 1) where s is
(0, 1) (`t.new_full((n, 1), i)` for an image without boxes). With `openvino_loops`, such
arithmetic is the scalar's result expanded, `Expand(f, s)`, which OpenVINO computes right
(`seqlower.passes.filled_arithmetic`; an Expand per node, and the scalar's own Add where the
fill is not 0).

OpenVINO (2026.4.1) fails on a Unique of an empty input (`torch.unique` of no box's image
index). With `openvino_loops`, a Unique without axis runs in the else-branch of an If on its
input being empty (`seqlower.passes.empty_unique`).

OpenVINO (2026.4.1) gives a float32 ReduceMax of an empty axis or of -inf alone the lowest
finite float, not -inf (ReduceMin: the highest, not +inf): the maximum of an empty chunk of the
lists' masked form. With `openvino_loops`, such a reduction that may reduce nothing or reads a
Where with an infinite branch is corrected to the infinity where it gave the bound and no
element is the bound (`seqlower.passes.reduced_extrema`).
"""

from __future__ import annotations

__all__ = ["RuntimeWorkaroundsPass"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import constant_tensor, graph_nodes, iter_all_graphs
from seqlower.passes.empty_unique import guard_empty_unique
from seqlower.passes.filled_arithmetic import expand_filled_arithmetic
from seqlower.passes.reduced_extrema import correct_empty_extrema
from seqlower.uses import use_count


class RuntimeWorkaroundsPass(ir.passes.InPlacePass):
    """After the pass, `swapped` counts the Transpose -> Cast pairs put in the other order, to
    a fixpoint: Casts after a chain of Transposes end up before the whole chain; `remade`
    counts the empty constants a Loop starts from made by ConstantOfShape and the body outputs
    returned as copies."""

    def __init__(self, speed_first: bool = False, openvino_loops: bool = False) -> None:
        super().__init__()
        self.speed_first = speed_first  # leave out what costs time in onnxruntime
        # OpenVINO's faults whose fix costs elsewhere: scan outputs cut to a count, negative
        # trip counts clamped, Ranges kept from running backwards, products of dims as Muls,
        # arithmetic on a filled tensor and a scalar as the scalar's result expanded
        self.openvino_loops = openvino_loops
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
                    taken.update(
                        v.name for node in graph_nodes(graph) for v in node.outputs if v.name
                    )
            return taken

        graphs = list(iter_all_graphs(model))  # the rewrites below add no subgraph
        clamped: dict[ir.Value, ir.Value] = {}  # a trip count -> its Max(M, 0), made once
        never_negative: dict[ir.Value, bool] = {}  # what `_never_negative` answered
        opset = _default_opset(model)
        slicing = opset >= 10  # Slice takes its bounds as inputs
        values = StaticValues(opset)  # the static elements of a product of dims
        integer_max = opset >= 12  # Max and Min take integers
        if not self.speed_first and any(  # onnxruntime folds them: no cost, but no need
            node.op_type == "If" for graph in graphs for node in graph_nodes(graph)
        ):
            self.remade += _remake_every_empty_constant(model, graphs, names)
        for graph in graphs:
            for loop in [
                node for node in graph_nodes(graph) if node.op_type == "Loop" and node.domain == ""
            ]:
                self.remade += _remake_empty_constants(graph, loop, names)
            if graph is not model.graph and not self.speed_first:  # an Identity per iteration
                self.remade += _copy_outputs_read_deeper(graph, names)
            if not self.speed_first:  # a Squeeze per branch taken
                self.remade += _scalar_conditions(graph, names)
            if self.openvino_loops:  # an Add per iteration, a Gather per scan output
                for loop in [node for node in graph_nodes(graph) if _scans_may_be_stale(node)]:
                    _count_scan_rows(graph, loop, names)
                    self.remade += 1
            if self.openvino_loops:  # a Max per trip count
                for loop in [node for node in graph_nodes(graph) if node.op_type == "Loop"]:
                    self.remade += _clamp_trip_count(loop, names, clamped, never_negative)
            if self.openvino_loops:  # a Max or Min per Range
                for node in [node for node in graph_nodes(graph) if _is_range(node)]:
                    if integer_max or _is_float(node.outputs[0]):
                        self.remade += _clamp_range_limit(graph, node, names, never_negative)
            if self.openvino_loops:  # an Expand (and the scalar's arithmetic) per node
                self.remade += expand_filled_arithmetic(graph, lambda base: _unique(base, names()))
            if self.openvino_loops:  # a second reduction, an Equal and a Where per extremum
                self.remade += correct_empty_extrema(
                    graph, opset, lambda base: _unique(base, names())
                )
            if self.openvino_loops and slicing:  # a Slice and a Mul per element
                for node in [node for node in graph_nodes(graph) if _is_dims_product(node)]:
                    _product_as_muls(graph, node, names, values)
                    self.remade += 1
            queue = [node for node in graph_nodes(graph) if _is_cast_of_private_transpose(node)]
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
        if self.openvino_loops:  # a Size, an Equal and an If per Unique (new subgraphs: last)
            self.remade += guard_empty_unique(graphs, lambda base: _unique(base, names()))
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
        empties = [
            (node, node.outputs[0]) for node in graph_nodes(graph) if node.op_type == "Constant"
        ]
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
    for node in [node for node in graph_nodes(graph) if node.op_type == "If" and node.domain == ""]:
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


def _scans_may_be_stale(node: ir.Node) -> bool:
    """Whether `node` is a Loop with scan outputs that may run no iteration, whose scan outputs
    are not yet cut to a count of its iterations."""
    if node.op_type != "Loop" or node.domain != "" or "body" not in node.attributes:
        return False
    carried = len(node.inputs) - 2
    scans = node.outputs[carried:]
    if not scans or _runs(node):
        return False
    return not all(_sliced_to_count(node, value) for value in scans)


def _runs(loop: ir.Node) -> bool:
    """Whether `loop` runs at least one iteration: a trip count that is a positive constant and
    a condition that is absent or a true constant."""
    count = constant_tensor(loop.inputs[0]) if loop.inputs[0] is not None else None
    condition = loop.inputs[1] if len(loop.inputs) > 1 else None
    starts = condition is None or (
        (tensor := constant_tensor(condition)) is not None
        and tensor.size == 1
        and bool(tensor.numpy().reshape(()))
    )
    return count is not None and count.size == 1 and int(count.numpy().reshape(())) > 0 and starts


def _sliced_to_count(loop: ir.Node, scan: ir.Value) -> bool:
    """Whether the one reader of the scan output `scan` of `loop` gathers its first `k` rows
    (`Gather(scan, Range(0, k, 1))`), k a value `loop` carries from 0 adding 1 per iteration:
    what `_count_scan_rows` makes."""
    uses = list(scan.uses())
    if len(uses) != 1 or scan.is_graph_output() or uses[0].idx != 0:
        return False
    gather = uses[0].node
    if gather.op_type != "Gather" or gather.domain != "" or gather.attributes.get_int("axis", 0):
        return False
    rows = gather.inputs[1].producer() if gather.inputs[1] is not None else None
    if rows is None or rows.op_type != "Range" or any(v is None for v in rows.inputs):
        return False
    start, counted, delta = rows.inputs
    if not (_is_scalar(start, 0) and _is_scalar(delta, 1)):
        return False
    carried = len(loop.inputs) - 2
    if counted.producer() is not loop or counted.index() >= carried:  # type: ignore[union-attr,operator]
        return False
    index = counted.index()  # type: ignore[union-attr]
    body = loop.attributes["body"].as_graph()
    step = body.outputs[1 + index].producer()  # type: ignore[operator]
    return (
        _is_scalar(loop.inputs[2 + index], 0)  # type: ignore[operator]
        and step is not None
        and step.op_type == "Add"
        and step.inputs[0] is body.inputs[2 + index]  # type: ignore[operator]
        and _is_scalar(step.inputs[1], 1)
    )


def _is_scalar(value: ir.Value | None, number: int) -> bool:
    """Whether `value` is a constant holding `number` alone."""
    tensor = constant_tensor(value) if value is not None else None
    return tensor is not None and tensor.size == 1 and tensor.numpy().reshape(()).item() == number


def _count_scan_rows(graph: ir.Graph, loop: ir.Node, names: Callable[[], set[str]]) -> ir.Node:
    """Replace `loop` by one that also carries the count of its iterations (from 0, plus 1 per
    iteration), each scan output read as its first count rows (a Gather of `Range(0, count)`,
    whose shape ONNX infers, where a Slice to a run-time end loses every dim); returns the new
    Loop."""
    body = loop.attributes["body"].as_graph()
    carried = len(loop.inputs) - 2
    base = _unique(f"{loop.name or 'loop'}_iterations", names())

    def made(op: str, inputs: list[ir.Value | None], dims: list[int | None], **attrs) -> ir.Node:  # type: ignore[no-untyped-def]
        node = ir.node(op, inputs, attrs)
        node.outputs[0].name = node.name = _unique(f"{base}_{op.lower()}", names())
        node.outputs[0].type = ir.TensorType(ir.DataType.INT64)
        node.outputs[0].shape = ir.Shape(dims)
        return node

    def scalar(number: int) -> ir.Node:
        return made("Constant", [], [], value=ir.tensor(np.array(number, np.int64)))

    counted = ir.Value(name=_unique(f"{base}_so_far", names()))
    counted.type, counted.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    one = scalar(1)
    step = made("Add", [counted, one.outputs[0]], [])
    body.inputs.insert(2 + carried, counted)
    body.outputs.insert(1 + carried, step.outputs[0])
    body.extend([one, step])

    zero = scalar(0)
    new_loop = ir.node(
        "Loop",
        [*loop.inputs, zero.outputs[0]],
        {"body": body},
        num_outputs=len(loop.outputs) + 1,
        name=loop.name,
    )
    graph.insert_before(loop, [zero, new_loop])
    count = new_loop.outputs[carried]
    count.name = base
    count.type, count.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    start, delta = scalar(0), scalar(1)
    rows = made("Range", [start.outputs[0], count, delta.outputs[0]], [None])
    after: list[ir.Node] = [start, delta, rows]
    for index, old in enumerate(list(loop.outputs)):
        new = new_loop.outputs[index if index < carried else index + 1]
        new.type, new.shape = old.type, old.shape
        name, old.name = old.name, None
        if index < carried:
            old.replace_all_uses_with(new, replace_graph_outputs=True)
            new.name = name
            continue
        first = ir.node("Gather", [new, rows.outputs[0]], {"axis": 0})
        first.outputs[0].type, first.outputs[0].shape = old.type, old.shape
        old.replace_all_uses_with(first.outputs[0], replace_graph_outputs=True)
        new.name = _unique(f"{name or base}_rows", names())
        first.outputs[0].name = name
        first.name = _unique(f"{base}_gather", names())
        after.append(first)
    graph.insert_after(new_loop, after)
    graph.remove(loop, safe=True)
    return new_loop


# operators that pass on their first input's values (a dim read from a Shape stays one);
# arithmetic is left out: int64 sums and products of sizes may wrap to negative
_KEEP_SIGN = frozenset({"Gather", "Identity", "Reshape", "Squeeze", "Unsqueeze"})


def _never_negative(value: ir.Value | None, known: dict[ir.Value, bool], depth: int = 0) -> bool:
    """Whether `value` is surely never negative: a constant of no negative entry, a Shape or a
    Size, a Max with such a value, or what `_KEEP_SIGN` passes on of such a value. `known`
    keeps each answer (a value shared by many counts is asked once)."""
    if value is None or depth > 16:
        return False
    if value in known:
        return known[value]
    answer = False
    tensor = constant_tensor(value)
    node = value.producer()
    if tensor is not None:
        answer = bool((tensor.numpy() >= 0).all())
    elif node is None or node.domain != "":
        answer = False
    elif node.op_type in ("Shape", "Size"):
        answer = True
    elif node.op_type == "Max":
        answer = any(_never_negative(v, known, depth + 1) for v in node.inputs)
    elif node.op_type in _KEEP_SIGN:
        answer = _never_negative(node.inputs[0], known, depth + 1)
    elif node.op_type == "Loop":
        answer = _counts_up(node, value, known, depth)
    known[value] = answer
    return answer


def _counts_up(loop: ir.Node, value: ir.Value, known: dict[ir.Value, bool], depth: int) -> bool:
    """Whether `value`, a carried output of `loop`, starts never negative and grows by a
    constant never negative each iteration (`_count_scan_rows`'s count of the iterations)."""
    index = value.index()
    carried = len(loop.inputs) - 2
    if index is None or index >= carried or "body" not in loop.attributes:
        return False
    body = loop.attributes["body"].as_graph()
    if len(body.inputs) != 2 + carried or len(body.outputs) < 1 + carried:
        return False
    step = body.outputs[1 + index].producer()
    if step is None or step.op_type != "Add" or step.domain != "" or len(step.inputs) != 2:
        return False
    state = body.inputs[2 + index]
    if step.inputs[0] is state:
        grows_by = step.inputs[1]
    elif step.inputs[1] is state:
        grows_by = step.inputs[0]
    else:
        return False
    tensor = constant_tensor(grows_by) if grows_by is not None else None
    return (
        tensor is not None
        and bool((tensor.numpy() >= 0).all())
        and _never_negative(loop.inputs[2 + index], known, depth + 1)
    )


def _default_opset(model: ir.Model) -> int:
    """The model's opset of the default domain (0 when it imports none)."""
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))


def _is_float(value: ir.Value) -> bool:
    return value.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16)


def _is_range(node: ir.Node) -> bool:
    return node.op_type == "Range" and node.domain == "" and len(node.inputs) == 3


def _scalar_number(value: ir.Value | None) -> float | None:
    """The number a constant of one element holds, or None."""
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return float(tensor.numpy().reshape(()))


def _clamp_range_limit(
    graph: ir.Graph, node: ir.Node, names: Callable[[], set[str]], known: dict[ir.Value, bool]
) -> int:
    """Give the Range `node` of a constant step the limit `Max(limit, start)` (a positive step)
    or `Min(limit, start)` (a negative one), so that it never runs backwards; returns 1 if it
    made one. None where the limit already is so, or is never negative and the start a
    constant <= 0 (a positive step); none for a step known only at run time."""
    start, limit, delta = node.inputs
    step = _scalar_number(delta)
    if start is None or limit is None or step is None or step == 0:
        return 0
    op = "Max" if step > 0 else "Min"
    made = limit.producer()
    if (  # already clamped (a second pass)
        made is not None
        and made.op_type == op
        and made.domain == ""
        and len(made.inputs) == 2
        and start in made.inputs
    ):
        return 0
    if step > 0:
        first = _scalar_number(start)
        if first is not None and first <= 0 and _never_negative(limit, known):
            return 0
    clamp = ir.node(op, [limit, start])
    base = f"{limit.name or 'limit'}_from_{start.name or 'start'}"
    clamp.outputs[0].name = clamp.name = _unique(base, names())
    clamp.outputs[0].type, clamp.outputs[0].shape = limit.type, limit.shape
    graph.insert_before(node, [clamp])
    node.replace_input_with(1, clamp.outputs[0])
    return 1


_PRODUCT_LENGTHS = range(2, 9)  # the static lengths of a 1-D ReduceProd made a chain of Muls


def _is_dims_product(node: ir.Node) -> bool:
    """A ReduceProd over every element (no axes, keepdims) of a 1-D int64 of a static length in
    `_PRODUCT_LENGTHS`: a product of dims."""
    if node.op_type != "ReduceProd" or node.domain != "" or not node.inputs:
        return False
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return False  # axes given
    attributes = node.attributes
    if "axes" in attributes or attributes.get_int("keepdims", 1) != 1:
        return False
    if attributes.get_int("noop_with_empty_axes", 0) != 0:
        return False
    data = node.inputs[0]
    if data is None or data.dtype != ir.DataType.INT64 or data.shape is None:
        return False
    dims = list(data.shape)
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] in _PRODUCT_LENGTHS


@dataclasses.dataclass
class _Elements:
    """Where the elements of a 1-D int64 come from: `source[offset + k]` is element k, and
    `known[k]` its number where static (else None)."""

    source: ir.Value
    offset: int
    known: list[int | None]


def _elements(data: ir.Value, length: int, values: StaticValues) -> _Elements:
    """The elements of the 1-D int64 `data` of `length` elements: read from the Shape they
    were sliced from where `data` is `Slice(Shape(x), [a], [b])` (as a second lowering's
    cleanup would compose two Slices), static where inference gives the dim as a number."""
    static = values.get(data)
    if static is not None:
        return _Elements(data, 0, [int(v) for v in np.asarray(static).reshape(-1)])
    found = _Elements(data, 0, [None] * length)
    producer = data.producer()
    if producer is None or producer.domain != "" or not producer.inputs:
        return found
    if producer.op_type == "Shape":  # the dims of x from start to end
        found.known = _dims(producer, 0, length)
        return found
    if len(producer.inputs) < 3:
        return found
    if producer.op_type != "Slice" or producer.inputs[0] is None:
        return found
    shape_vector = producer.inputs[0]
    shape_of = shape_vector.producer()
    bounds = values.get_ints(producer.inputs[1])
    plain = len(producer.inputs) == 3 or (
        values.get_ints(producer.inputs[3]) in ([0], [-1])
        and (len(producer.inputs) < 5 or values.get_ints(producer.inputs[4]) == [1])
    )
    count = shape_vector.shape[0] if shape_vector.shape is not None else None
    if (
        not plain
        or bounds is None
        or len(bounds) != 1
        or not isinstance(count, int)
        or shape_of is None
        or shape_of.op_type != "Shape"
        or shape_of.domain != ""
        or shape_of.inputs[0] is None
    ):
        return found
    start = min(max(bounds[0] + count if bounds[0] < 0 else bounds[0], 0), count)
    if start + length > count:
        return found
    return _Elements(shape_vector, start, _dims(shape_of, start, length))


def _dims(shape_of: ir.Node, start: int, length: int) -> list[int | None]:
    """Elements `start` to `start + length` of the output of the Shape node `shape_of`: each
    dim inference gives as a number, else None."""
    data = shape_of.inputs[0]
    shape = data.shape if data is not None else None
    if shape is None:
        return [None] * length
    rank = len(shape)
    first = shape_of.attributes.get_int("start", 0)
    last = shape_of.attributes.get_int("end", rank)
    first, last = (min(max(b + rank if b < 0 else b, 0), rank) for b in (first, last))
    dims = list(shape)[first:last][start : start + length]
    if len(dims) != length:
        return [None] * length
    return [int(d) if isinstance(d, int) else None for d in dims]


def _product_as_muls(
    graph: ir.Graph, node: ir.Node, names: Callable[[], set[str]], values: StaticValues
) -> None:
    """Replace the ReduceProd `node` (`_is_dims_product`) by the Mul of its input's elements,
    each a Slice of one element, or a Constant where that element is static:
    `ReduceProd(v)` -> `Mul(Mul(v[0:1], v[1:2]), v[2:3])`. A `v` that is `Slice(Shape(x), [a],
    [b])` is read no more: its elements are sliced from `Shape(x)` at a + k. That is what the
    cleanup's folding and its merging of Slices make of the Slices, so that a second lowering
    gives the same model."""
    data = node.inputs[0]
    assert data is not None and data.shape is not None
    length = data.shape[0]
    assert isinstance(length, int)
    product = node.outputs[0]
    base = product.name or "product"
    made: list[ir.Node] = []

    def named(new: ir.Node, suffix: str, dims: list[int]) -> ir.Value:
        new.outputs[0].name = new.name = _unique(f"{base}_{suffix}", names())
        new.outputs[0].type = ir.TensorType(ir.DataType.INT64)
        new.outputs[0].shape = ir.Shape(dims)
        made.append(new)
        return new.outputs[0]

    def constant(number: int, suffix: str) -> ir.Value:
        tensor = ir.tensor(np.array([number], np.int64))
        return named(ir.node("Constant", [], {"value": tensor}), suffix, [1])

    elements = _elements(data, length, values)
    at = {k: constant(k, f"at_{k}") for k in range(elements.offset, elements.offset + length + 1)}
    result: ir.Value | None = None
    for k, number in enumerate(elements.known):
        if number is not None:
            element = constant(number, f"dim_{k}")
        else:
            first = elements.offset + k
            piece = ir.node("Slice", [elements.source, at[first], at[first + 1]])
            element = named(piece, f"dim_{k}", [1])
        result = element if result is None else named(ir.node("Mul", [result, element]), "mul", [1])
    assert result is not None
    read = {value for new in made for value in new.inputs}
    made = [new for new in made if new.op_type != "Constant" or new.outputs[0] in read]
    graph.insert_before(node, made)
    name = product.name
    product.name = None
    product.replace_all_uses_with(result, replace_graph_outputs=True)
    graph.remove(node, safe=True)
    result.name = name
    if elements.source is not data and not data.uses() and not data.is_graph_output():
        sliced = data.producer()
        assert sliced is not None
        arguments = list(sliced.inputs[1:])  # the removal detaches them
        graph.remove(sliced, safe=True)
        for value in arguments:
            if value is not None:
                _drop_if_unread(graph, value)


def _clamp_trip_count(
    loop: ir.Node,
    names: Callable[[], set[str]],
    clamped: dict[ir.Value, ir.Value],
    known: dict[ir.Value, bool],
) -> int:
    """Give `loop` the trip count `Max(M, 0)` where M may be negative; returns 1 if it made
    one. The Max goes where M is made (right after its producer, or first in the graph whose
    input M is), once per M: a loop-invariant copy in a body would be hoisted, and two copies
    merged, by a second lowering."""
    count = loop.inputs[0] if loop.inputs else None
    if count is None or count.name == "" or _never_negative(count, known):
        return 0
    if count in clamped:
        loop.replace_input_with(0, clamped[count])
        return 0
    base = f"{count.name or 'trip_count'}_at_least_0"
    zero = ir.node("Constant", [], {"value": ir.tensor(np.array(0, np.int64))})
    clamp = ir.node("Max", [count, zero.outputs[0]])
    zero.outputs[0].name = zero.name = _unique(f"{base}_zero", names())
    clamp.outputs[0].name = clamp.name = _unique(base, names())
    zero.outputs[0].type = clamp.outputs[0].type = ir.TensorType(ir.DataType.INT64)
    zero.outputs[0].shape = ir.Shape([])
    clamp.outputs[0].shape = count.shape
    producer = count.producer()
    if producer is not None and producer.graph is not None:
        producer.graph.insert_after(producer, [zero, clamp])
    else:  # an input or an initializer of the graph that holds it
        holder = count.graph or loop.graph
        assert holder is not None
        first = next(iter(holder), None)
        if first is None:
            holder.extend([zero, clamp])
        else:
            holder.insert_before(first, [zero, clamp])
    clamped[count] = clamp.outputs[0]
    loop.replace_input_with(0, clamp.outputs[0])
    return 1
