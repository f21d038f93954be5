"""Index vectors assembled by a chain of shape operators are built from their pieces directly.

    pads = [0, 0, 0, d]; pairs = Reshape(pads, [-1, 2]); Slice(pairs, -1::-1); Transpose;
    Reshape(., [-1]); Cast                          ->  Concat([0, 0], Unsqueeze(d), [0])

TorchScript writes `F.pad(x, (0, 0, 0, L - n))` with pads known at run time only as about
twelve small operators: torch's pads are padded with ConstantOfShape to twice the rank, cut into
pairs, the pairs reversed and transposed into ONNX's order. Every element of the result is a
constant or an element of a value computed elsewhere (`d`), so the same vector is one Concat of
constants and of those elements. In a loop body the chain runs once per iteration.

The analysis follows the elements of small int64 values (at most `MAX_ELEMENTS`) through
Identity, Cast, Reshape, Squeeze, Unsqueeze, Flatten, Concat, Slice, Transpose, Gather at
constant positions, ConstantOfShape, Shape (a dim inference gives as a number is a constant)
and Add, Sub and Mul where a constant operand changes nothing (`d - 0`). A value it cannot see
through stays a value: its elements are read from it. Where such a vector is read by any other
operator (a Pad, a Reshape's shape, a Slice's bounds) and building it from its pieces takes
fewer operator launches than the chain did (the chain's nodes that nothing else reads, not
counting Constants), the reader takes the built vector, and the chain goes.

A dim of a tensor is an element of a value computed before it where it comes from the target
of a Reshape with allowzero=1 (followed up through Transposes, a Slice of other axes, operators
of one input whose output has their input's shape, and a Conv's batch axis), the target's
element there being known never negative (a -1 would be a dim inferred):

    r = Reshape(x, Concat(n, k, [4], hw), allowzero=1)     (k = Shape(x)[1:2] / 4)
    s = Transpose(r, [1, 0, 2, 3, 4])
    Mul(Shape(s, 0, 1), Shape(s, 1, 2))                     ->  Mul(k, n)
    Reshape(s, Concat(Mul(..), Shape(s, 2)), allowzero=1)   ->  Reshape(s, Concat(Mul(..), [4], hw))

Batching a per-chunk operator over `torch.split(x, 4, 1)` makes exactly this: the chunks as rows
of `[C/4, N, 4, H, W]`, their two leading axes merged for the operator, and every dim read back
with a Shape of its own. A Shape's dims are read elsewhere all or none (while one of them is
the Shape's own, it runs, and is read whole); a Slice from 0 to the largest int64 by 1
(TorchScript's `t[:, :]`) keeps its axis. A constant beside elements of a Shape's output that
is the dim inference gives that Shape there is read from it too, so that a whole Shape is read
as it is: `Concat(n, [3], Shape(conv, 2))` with conv `[?, 3, H, W]` is `Concat(n, Shape(conv,
1))`. An Add, Sub or Mul whose result the analysis reads as computed there
(two dims multiplied) reads its inputs as what they are, so that each can be built from its
pieces. The target of a Reshape with allowzero=1 is rebuilt like any other vector: onnxruntime
(1.20 to 1.32) fuses the shape chain of a Reshape into it only when allowzero is 0.
"""

from __future__ import annotations

__all__ = ["MAX_ELEMENTS", "fold_index_vectors"]

import dataclasses
import math

import numpy as np
import onnx_ir as ir

from seqlower.analysis.loop_shapes import carried_output_shape
from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.rewriter import Builder, Rewriter

MAX_ELEMENTS = 16


@dataclasses.dataclass(frozen=True)
class Leaf:
    """Element `index` (flattened) of a value the analysis does not see through, whose
    shape is `shape` (static)."""

    value: ir.Value
    index: int
    shape: tuple[int, ...]


Element = int | Leaf

_RESHAPES = frozenset({"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_ARITHMETIC = frozenset({"Add", "Sub", "Mul"})
# operators of one input (and constant attributes) whose output has their input's shape
_SAME_SHAPE = frozenset({
    "Identity", "Cast", "Softmax", "LogSoftmax", "Hardmax", "Relu", "Sigmoid", "Tanh", "Exp",
    "Log", "Neg", "Abs", "Sqrt", "Erf", "Not", "Sign", "Floor", "Ceil", "Round", "Reciprocal",
    "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
})  # fmt: skip
DIM_DEPTH = 16  # producers followed for one dim
_LARGEST = 2**63 - 1  # a Slice's end "to the last entry", as TorchScript writes `x[:, :]`
_SEEN_THROUGH = _RESHAPES | {
    "Concat", "Slice", "Transpose", "Gather", "ConstantOfShape", "Shape", "Add", "Sub", "Mul",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Vector:
    elements: tuple[Element, ...]  # in row-major order
    shape: tuple[int, ...]

    def array(self) -> np.ndarray:
        array = np.empty(len(self.elements), dtype=object)
        array[:] = list(self.elements)
        return array.reshape(self.shape)


def fold_index_vectors(model: ir.Model) -> int:
    """Build every index vector that a chain of shape operators assembles from its pieces,
    where that takes fewer launches (see the module docstring); returns how many."""
    values = StaticValues(model.opset_imports.get(""))
    analysis = _Elements(values)
    # the same without reading dims from Reshape targets: a Shape some of whose dims are read
    # elsewhere still runs for the others, and reading it whole may take fewer launches
    plain = _Elements(values, resolve_dims=False)
    rewriter: Rewriter | None = None
    folded = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.graph is None:
                continue
            read = [
                v
                for i, v in enumerate(node.inputs)
                if v is not None and not analysis.links(node, i)
            ]
            for value in dict.fromkeys(read):
                vector = _fewest(
                    _foldable(value, plain, values), _foldable(value, analysis, values)
                )
                if (
                    vector is not None
                    and _is_reshape_target(node, value)
                    and node.attributes.get_int("allowzero", 0) != 1
                ):
                    alone = all(use.node is node for use in value.uses())
                    vector = _copied_dims(node, vector) if alone else None
                if vector is None:
                    continue
                rewriter = rewriter or Rewriter(model)
                chain = value.producer()
                assert chain is not None  # `_foldable` checked
                # where the chain ends, not in a loop body that reads it: built once
                built = _build(rewriter.before(chain), vector)
                value.replace_all_uses_with(built)
                remove_dead_upstream([chain])
                folded += 1
    return folded


def _foldable(value: ir.Value, analysis: _Elements, values: StaticValues) -> Vector | None:
    """The elements of `value` when building it from them saves launches, else None."""
    producer = value.producer()
    if producer is None or producer.domain != "" or producer.op_type not in _SEEN_THROUGH:
        return None
    if value.dtype != ir.DataType.INT64:
        return None  # no vector (`_Elements.vector`), said before asking for its content
    if values.get(value) is not None or value.is_graph_output():
        return None  # static: fold_static_shapes makes it a constant
    if any(analysis.links(use.node, use.idx) for use in value.uses()):
        return None  # an inner link of a longer chain: its reader folds it
    vector = analysis.vector(value)
    if vector is None or len(vector.shape) > 1:
        return None
    launches = _launches(vector)
    if launches is None or launches >= _chain_launches(value, vector):
        return None
    return vector


def _fewest(first: Vector | None, second: Vector | None) -> Vector | None:
    """Of two readings of one vector, the one built with fewer launches (the first on a tie)."""
    if first is None or second is None:
        return first or second
    return second if _launches(second) < _launches(first) else first  # type: ignore[operator]


def _is_reshape_target(node: ir.Node, value: ir.Value) -> bool:
    return node.op_type == "Reshape" and node.domain == "" and node.inputs[1] is value


def _copied_dims(reshape: ir.Node, vector: Vector) -> Vector | None:
    """A Reshape's target whose dims are constants or dims of the Reshape's own input at the
    same place, those written 0 (copied): a constant. onnxruntime fuses the chains that build
    such a target itself (its ReshapeFusion: Shape, Gather, Unsqueeze, Concat), so any other
    target is left as it is: rebuilt, it would no longer be fused, and cost more."""
    if reshape.attributes.get_int("allowzero", 0) != 0:
        return None
    source = reshape.inputs[0]
    dims: list[int] = []
    for position, element in enumerate(vector.elements):
        if isinstance(element, int):
            dims.append(element)
            continue
        shape = element.value.producer()
        copied = (
            shape is not None
            and shape.op_type == "Shape"
            and shape.inputs[0] is source
            and shape.attributes.get_int("start", 0) == 0
            and element.index == position
        )
        if not copied:
            return None
        dims.append(0)
    return Vector(tuple(dims), vector.shape)


def _flows(node: ir.Node, index: int) -> bool:
    """Whether the elements of input `index` of `node` flow into its output (a link of a
    chain), rather than being read as what they are (a Reshape's target shape, a Gather's
    positions, the input of a Shape, any input of another operator)."""
    if node.domain != "" or node.op_type not in _SEEN_THROUGH:
        return False
    if node.op_type in ("Shape", "ConstantOfShape"):
        return False  # they read the shape, or the elements as a shape
    return node.op_type in ("Concat", "Add", "Sub", "Mul") or index == 0


def _pieces(vector: Vector) -> list[list[Element]]:
    """Runs of constants, and runs of consecutive elements of one leaf."""
    runs: list[list[Element]] = []
    for element in _read_known_dims(vector.elements):
        last = runs[-1][-1] if runs else None
        constants = isinstance(element, int) and isinstance(last, int)
        consecutive = (
            isinstance(element, Leaf)
            and isinstance(last, Leaf)
            and element.value is last.value
            and element.index == last.index + 1
        )
        if constants or consecutive:
            runs[-1].append(element)
        else:
            runs.append([element])
    return runs


def _read_known_dims(elements: tuple[Element, ...]) -> list[Element]:
    """A constant beside an element of a Shape's output, equal to the dim that Shape gives
    (statically) at the position next to that element, is read from the Shape too:
    `Concat(Shape(s, 0, 2), Shape(conv, 1))` with conv `[?, 3, H, W]` is `[a, b, 3, H, W]`,
    the last three one whole Shape (no launch) rather than a constant and a Slice. Reads no
    more pieces than before: a constant only joins the run of a neighbour."""
    found = list(elements)
    changed = True
    while changed:
        changed = False
        for i, element in enumerate(found):
            if not isinstance(element, int):
                continue
            for j, step in ((i + 1, -1), (i - 1, 1)):  # the neighbour, and where i sits in it
                neighbour = found[j] if 0 <= j < len(found) else None
                if not isinstance(neighbour, Leaf):
                    continue
                position = neighbour.index + step
                dims = _static_dims_of_shape(neighbour.value)
                if dims is not None and 0 <= position < len(dims) and dims[position] == element:
                    found[i] = Leaf(neighbour.value, position, neighbour.shape)
                    changed = True
                    break
    return found


def _static_dims_of_shape(value: ir.Value) -> list[int | None] | None:
    """The dims a Shape gives as `value`, each a number where inference gives it, else None;
    None where `value` is not a Shape's output."""
    node = value.producer()
    if node is None or node.op_type != "Shape" or node.domain != "" or not node.inputs:
        return None
    source = node.inputs[0]
    if source is None or source.shape is None:
        return None
    dims = [source.shape[axis] for axis in _kept_axes(node, len(source.shape))]
    return [d if isinstance(d, int) else None for d in dims]


def _kept_axes(shape_node: ir.Node, rank: int) -> range:
    """The axes of its input, of rank `rank`, that a Shape node gives (its start and end)."""
    start = shape_node.attributes.get_int("start", 0)
    return range(rank)[slice(start, shape_node.attributes.get_int("end", rank))]


def _whole(run: list[Element]) -> bool:
    """A run that is all of a 1-D leaf, in order."""
    first = run[0]
    assert isinstance(first, Leaf)
    return first.shape == (len(run),) and first.index == 0


def _launches(vector: Vector) -> int | None:
    """Operator launches that build the vector: one per piece of a leaf (none for a whole
    1-D leaf) and the Concat of several pieces (constants cost none); a scalar is a scalar
    leaf, or one Gather from a 1-D one. None for a constant scalar (StaticValues folds it)."""
    runs = _pieces(vector)
    if not vector.shape:
        element = vector.elements[0]
        return None if isinstance(element, int) else 0 if _scalar(element) else 1
    reads = sum(1 for run in runs if isinstance(run[0], Leaf) and not _whole(run))
    return reads + (1 if len(runs) > 1 else 0)


def _scalar(leaf: Leaf) -> bool:
    return leaf.shape == ()


def _chain_launches(value: ir.Value, vector: Vector) -> int:
    """The launches of the nodes that compute `value` and nothing else, up to the leaves the
    vector reads, which stay (Constants cost none)."""
    leaves = {id(e.value) for e in vector.elements if isinstance(e, Leaf)}
    dead: set[int] = set()
    count = 0
    pending = [value.producer()]
    while pending:
        node = pending.pop()
        if node is None or id(node) in dead or node.op_type not in _SEEN_THROUGH:
            continue
        if any(id(output) in leaves for output in node.outputs):
            continue
        readers = [use.node for output in node.outputs for use in output.uses()]
        outputs_read_elsewhere = any(
            id(reader) not in dead for reader in readers if node.outputs[0] is not value
        )
        if outputs_read_elsewhere or any(o.is_graph_output() for o in node.outputs):
            continue
        dead.add(id(node))
        count += node.op_type != "Constant"
        pending.extend(v.producer() for v in node.inputs if v is not None)
    return count


def _build(b: Builder, vector: Vector) -> ir.Value:
    if not vector.shape:  # one element (`_launches`)
        element = vector.elements[0]
        assert isinstance(element, Leaf)
        if _scalar(element):
            return element.value
        index = b.constant(np.array(element.index, np.int64), "index")
        picked = b.op("Gather", [element.value, index], name="element")
        picked.type = ir.TensorType(ir.DataType.INT64)
        picked.shape = ir.Shape([])
        return picked
    parts: list[ir.Value] = []
    for run in _pieces(vector):
        if isinstance(run[0], int):
            parts.append(b.ints([int(e) for e in run], "elements"))  # type: ignore[arg-type]
            continue
        first = run[0]
        assert isinstance(first, Leaf)
        if _whole(run):
            parts.append(first.value)
            continue
        if _scalar(first):
            part = b.unsqueeze(first.value, [0])
        else:
            bounds = b.ints([first.index], "start"), b.ints([first.index + len(run)], "end")
            part = b.op("Slice", [first.value, *bounds])
        part.type = ir.TensorType(ir.DataType.INT64)
        part.shape = ir.Shape([len(run)])
        parts.append(part)
    if not parts:  # no element: a Concat needs an input
        parts.append(b.ints([], "elements"))
    if len(parts) == 1:
        return parts[0]
    built = b.op("Concat", parts, {"axis": 0}, name="vector")
    built.type = ir.TensorType(ir.DataType.INT64)
    built.shape = ir.Shape(list(vector.shape))
    return built


class _Elements:
    """The elements of small int64 values, memoized."""

    def __init__(self, values: StaticValues, *, resolve_dims: bool = True) -> None:
        self.values = values
        self.resolve_dims = resolve_dims  # a Shape's dims read from Reshape targets (`dim`)
        # keyed by the value itself: an id could be reused by a value made after a fold
        self._found: dict[ir.Value, Vector | None] = {}
        self._dims: dict[tuple[ir.Value, int], Element | None] = {}

    def links(self, node: ir.Node, index: int) -> bool:
        """Whether input `index` of `node` is a link of a chain (`_flows`); an Add, Sub or
        Mul whose result the analysis reads as computed there (two dims multiplied) reads its
        inputs as what they are, so that each can be built from its pieces."""
        if not _flows(node, index):
            return False
        if node.op_type not in _ARITHMETIC or len(node.outputs) != 1:
            return True
        out = node.outputs[0]
        vector = self.vector(out)
        return vector is None or not all(
            isinstance(e, Leaf) and e.value is out for e in vector.elements
        )

    def dim(self, value: ir.Value, axis: int, depth: int = DIM_DEPTH) -> Element | None:
        """Dim `axis` of the float or int tensor `value` as an element of a value computed
        before it (see `_dim_through`), or None; memoized."""
        key = (value, axis)
        if key not in self._dims:
            self._dims[key] = None  # guards against cycles
            self._dims[key] = self._dim_through(value, axis, depth)
        return self._dims[key]

    def _dim_through(self, value: ir.Value, axis: int, depth: int) -> Element | None:
        """Follow dim `axis` of `value` up its producers: a Transpose moves it, a Slice that
        cuts other axes, an operator of one input whose output has its input's shape and a
        Conv's batch axis keep it, and a Reshape with allowzero=1 takes it from its target,
        whose element there must be known never negative (a -1 would be a dim inferred)."""
        node = value.producer()
        if depth <= 0 or node is None or node.domain != "" or node.outputs[0] is not value:
            return None
        source = node.inputs[0] if node.inputs else None
        rank = len(value.shape) if value.shape is not None else None
        if source is None or rank is None or not 0 <= axis < rank:
            return None
        op = node.op_type
        if op == "Reshape":
            target = self.vector(node.inputs[1]) if len(node.inputs) > 1 else None
            if node.attributes.get_int("allowzero", 0) != 1 or target is None:
                return None
            if len(target.shape) != 1 or len(target.elements) != rank:
                return None
            element = target.elements[axis]
            if isinstance(element, int):
                return element if element >= 0 else None
            return element if never_negative(element.value, self.values) else None
        if op == "Transpose":
            perm = node.attributes.get_ints("perm", list(range(rank))[::-1])
            return self.dim(source, perm[axis], depth - 1) if len(perm) == rank else None
        if op == "Slice":
            axes = self._sliced_axes(node, rank)
            return None if axes is None or axis in axes else self.dim(source, axis, depth - 1)
        if op in _SAME_SHAPE or (op == "Conv" and axis == 0):
            return self.dim(source, axis, depth - 1)
        return None

    def _sliced_axes(self, node: ir.Node, rank: int) -> set[int] | None:
        """The axes a Slice may cut (its constant axes but those it reads whole: from 0 to
        the largest int64, by 1), or None when its axes are not known."""
        params = [self.values.get_ints(v) if v is not None else None for v in node.inputs[1:5]] + [
            None
        ] * (5 - len(node.inputs))
        starts, ends, axes, steps = params
        given_axes = len(node.inputs) > 3 and node.inputs[3] is not None
        given_steps = len(node.inputs) > 4 and node.inputs[4] is not None
        if starts is None or (given_axes and axes is None):
            return None
        axes = axes if axes is not None else list(range(len(starts)))
        if not all(-rank <= a < rank for a in axes):
            return None
        whole = [
            ends is not None
            and (steps is not None or not given_steps)
            and start == 0
            and ends[k] == _LARGEST
            and (steps[k] if steps is not None else 1) == 1
            for k, start in enumerate(starts)
        ]
        return {a % rank for a, kept in zip(axes, whole, strict=False) if not kept}

    def vector(self, value: ir.Value | None) -> Vector | None:
        if value is None or value.dtype != ir.DataType.INT64:
            return None
        if value not in self._found:
            self._found[value] = None  # guards against cycles
            self._found[value] = self._compute(value)
        return self._found[value]

    def _compute(self, value: ir.Value) -> Vector | None:
        array = self.values.get(value)
        if array is not None:
            if array.size > MAX_ELEMENTS or array.dtype.kind not in "iu":
                return None
            return Vector(tuple(int(x) for x in array.reshape(-1)), tuple(array.shape))
        node = value.producer()
        seen = None
        if (
            node is not None
            and node.domain == ""
            and node.op_type in _SEEN_THROUGH
            and node.outputs[0] is value
        ):
            try:
                seen = self._through(node)
            except (ValueError, IndexError, TypeError):
                seen = None
        return seen if seen is not None else _leaf(value, self.values)

    def _through(self, node: ir.Node) -> Vector | None:
        op = node.op_type
        inputs = [self.vector(v) if v is not None else None for v in node.inputs]
        out = node.outputs[0]
        if op in _RESHAPES:
            source = inputs[0]
            if source is None or (op == "Cast" and node.attributes.get_int("to") != 7):
                return None
            shape = _static_shape(out)
            shape = shape if shape is not None else self._reshaped(node, source)
            if shape is None or math.prod(shape) != len(source.elements):
                return None
            return Vector(source.elements, shape)
        if op == "Concat":
            if any(v is None or len(v.shape) != 1 for v in inputs):
                return None
            elements = tuple(e for v in inputs for e in v.elements)  # type: ignore[union-attr]
            return _small(elements, (len(elements),))
        if op == "Slice":
            return self._slice(node, inputs[0])
        if op == "Transpose":
            if inputs[0] is None:
                return None
            moved = np.transpose(inputs[0].array(), node.attributes.get_ints("perm"))
            return Vector(tuple(moved.reshape(-1)), moved.shape)
        if op == "Gather":
            picks = self.values.get(node.inputs[1])
            data = inputs[0]
            if picks is None or data is None or len(data.shape) != 1:
                return None
            if node.attributes.get_int("axis", 0) != 0:
                return None
            n = len(data.elements)
            if not all(-n <= int(p) < n for p in picks.reshape(-1)):
                return None  # Gather fails there: the chain stays, and fails as it did
            chosen = tuple(data.elements[int(p)] for p in picks.reshape(-1))
            return _small(chosen, tuple(picks.shape))
        if op == "ConstantOfShape":
            return self._constant_of_shape(node, inputs[0])
        if op == "Shape":
            return self._shape(node)
        return self._arithmetic(node, inputs)

    def _reshaped(self, node: ir.Node, source: Vector) -> tuple[int, ...] | None:
        """The output shape of a node of `_RESHAPES` from its input's."""
        op = node.op_type
        if op in ("Identity", "Cast"):
            return source.shape
        if op == "Flatten":
            axis = node.attributes.get_int("axis", 1) % (len(source.shape) + 1)
            return (math.prod(source.shape[:axis]), math.prod(source.shape[axis:]))
        if op in ("Squeeze", "Unsqueeze"):
            given = len(node.inputs) > 1 and node.inputs[1] is not None
            axes = (
                self.values.get_ints(node.inputs[1]) if given else node.attributes.get_ints("axes")
            )
            if axes is None:
                return None
            if op == "Squeeze":
                dropped = {a % len(source.shape) for a in axes}
                return tuple(d for i, d in enumerate(source.shape) if i not in dropped)
            rank = len(source.shape) + len(axes)
            inserted = {a % rank for a in axes}
            rest = iter(source.shape)
            return tuple(1 if i in inserted else next(rest) for i in range(rank))
        target = self.values.get_ints(node.inputs[1])
        if target is None or (node.attributes.get_int("allowzero", 0) == 1 and 0 in target):
            return None
        dims = [source.shape[i] if d == 0 else d for i, d in enumerate(target)]
        if dims.count(-1) == 1:
            known = math.prod(d for d in dims if d != -1)
            if known == 0 or len(source.elements) % known:
                return None
            dims[dims.index(-1)] = len(source.elements) // known
        return tuple(dims) if -1 not in dims else None

    def _slice(self, node: ir.Node, data: Vector | None) -> Vector | None:
        params = [self.values.get_ints(v) for v in node.inputs[1:]]
        if data is None or not data.shape or len(params) < 2 or any(p is None for p in params):
            return None
        starts, ends = params[0], params[1]
        axes = params[2] if len(params) > 2 else list(range(len(starts)))  # type: ignore[arg-type]
        steps = params[3] if len(params) > 3 else [1] * len(starts)  # type: ignore[arg-type]
        if 0 in steps:  # type: ignore[operator]
            return None
        index = [slice(None)] * len(data.shape)
        for start, end, axis, step in zip(starts, ends, axes, steps):  # type: ignore[arg-type]
            index[axis % len(data.shape)] = slice(start, end, step)  # clamped as Slice does
        cut = data.array()[tuple(index)]
        return Vector(tuple(cut.reshape(-1)), cut.shape)

    def _shape(self, node: ir.Node) -> Vector | None:
        source = node.inputs[0]
        vector = self.vector(source)  # an index vector's shape is known here
        dims = vector.shape if vector is not None else source.shape if source else None
        if dims is None:
            return None
        kept = _kept_axes(node, len(dims))
        out = node.outputs[0]
        own = tuple(
            d if isinstance(d := dims[axis], int) else Leaf(out, k, (len(kept),))
            for k, axis in enumerate(kept)
        )
        if not self.resolve_dims or vector is not None or source is None:
            return _small(own, (len(own),))
        # every dim read elsewhere, or none: the Shape runs while one of its dims is read
        found = tuple(e if isinstance(e, int) else self.dim(source, kept[e.index]) for e in own)
        elements = own if any(e is None for e in found) else found
        return _small(elements, (len(elements),))

    def _constant_of_shape(self, node: ir.Node, count: Vector | None) -> Vector | None:
        attribute = node.attributes.get("value")
        fill = attribute.as_tensor().numpy() if attribute is not None else None
        if count is None or fill is None or fill.dtype != np.int64:
            return None
        if not all(isinstance(d, int) for d in count.elements):
            return None
        shape = tuple(int(d) for d in count.elements)  # type: ignore[arg-type]
        size = math.prod(shape)
        if any(d < 0 for d in shape) or size > MAX_ELEMENTS:
            return None  # counted before anything is built: a shape may ask for 10**12
        return _small((int(fill.reshape(-1)[0]),) * size, shape)

    def _arithmetic(self, node: ir.Node, inputs: list[Vector | None]) -> Vector | None:
        """Add, Sub, Mul of two vectors, element by element: constants combine; a constant
        that changes nothing (`d + 0`, `d - 0`, `d * 1`) keeps the other element."""
        if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
            return None
        left, right = inputs
        n = max(len(left.elements), len(right.elements))
        if len(left.shape) > 1 or len(right.shape) > 1:
            return None
        if {len(left.elements), len(right.elements)} - {1, n}:
            return None  # no broadcast of unequal lengths
        shape = (n,) if left.shape or right.shape else ()
        combined = []
        for a, b in zip(_spread(left, n), _spread(right, n)):
            element = _combine(node.op_type, a, b)
            if element is None:  # computed here: read from the result, of a known shape
                return _leaf_of_shape(node.outputs[0], shape)
            combined.append(element)
        return Vector(tuple(combined), shape)


def _spread(vector: Vector, n: int) -> tuple[Element, ...]:
    return vector.elements * n if len(vector.elements) == 1 else vector.elements


def _combine(op: str, a: Element, b: Element) -> Element | None:
    """`a op b`, where it is a constant or one of the two."""
    if isinstance(a, int) and isinstance(b, int):
        result = {"Add": a + b, "Sub": a - b, "Mul": a * b}[op]
        return result if -(2**63) <= result < 2**63 else None
    if op == "Add":
        return a if b == 0 else b if a == 0 else None
    if op == "Sub":
        return a if b == 0 else None
    return a if b == 1 else b if a == 1 else None


def _static_shape(value: ir.Value, values: StaticValues | None = None) -> tuple[int, ...] | None:
    """The declared shape of `value` when its dims are numbers; for a tensor a Loop carries
    out that has none yet (ONNX inference gives it none), the one the loop analysis proves its
    body keeps, when `values` is given."""
    shape = value.shape
    if shape is not None and all(isinstance(d, int) for d in shape):
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]
    loop = value.producer()
    if shape is None and values is not None and loop is not None and loop.op_type == "Loop":
        return carried_output_shape(loop, value, values)  # type: ignore[return-value]
    return None


def _small(elements: tuple[Element, ...], shape: tuple[int, ...]) -> Vector | None:
    return Vector(elements, shape) if len(elements) <= MAX_ELEMENTS else None


def _leaf(value: ir.Value, values: StaticValues) -> Vector | None:
    """A value the analysis does not see through: its elements are read from it."""
    shape = _static_shape(value, values)
    if shape is None:
        return None
    return _leaf_of_shape(value, shape)


def _leaf_of_shape(value: ir.Value, shape: tuple[int, ...]) -> Vector | None:
    if len(shape) > 1 or math.prod(shape) > MAX_ELEMENTS:
        return None
    return Vector(tuple(Leaf(value, k, shape) for k in range(math.prod(shape))), shape)
