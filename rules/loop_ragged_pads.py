"""A Loop that pads each element of a ragged list held as tensors (flat rows and a table of
sizes) to one length, as a scan output, is one padded Gather of the flat rows.

    Loop(M, true, body(i, c): scan output Pad(Slice(x, starts[i], ends[i]), pads(i), v))
        -> Gather(Concat(x, v as one row), Where(inside, lo[:, None] + src, rows(x)))
           ends = CumSum(sizes), starts = ends - sizes     (the list's tables, [n])
           b = the begin pad of axis 0 of every element, W = b + rows + the end pad (the
           padded length, the same for every element), both from their linear forms
           src = Range(0, W)[None, :] - b[:, None]          ([n, W]: the position read)
           inside = (src >= 0) And (src < held[:, None])   (the first test left out where b
                                                             is a constant <= 0)
           held = sizes, lo = starts (where the list tier made x and the sizes as one list;
           else each element's rows as its Slice clamps them to x's: Min(ends, rows(x)) -
           Min(starts, rows(x)), lo = Min(starts, rows(x)))
    with static pads on the other axes: one Pad of the result on those axes

That is what `torch.stack([F.pad(h, (0, L - h.size(0)), value=-1) for h in hyps])` leaves once
`hyps`, a list of hypotheses of different lengths, is tensors (`seqlower.lists`, the ragged
layout): per element a Slice of the rows, the pads computed from its length, and a Pad, each
iteration a handful of launches. The row appended to x holds the pad value, so every position
outside an element reads it, and the Gather cannot fail, not even on an x of no row.

The pads are proved to give every element one length: the walk over the body computes each
entry of the pads as a linear form (`seqlower.analysis.symbolic`) in the element's rows (read
from the table, or as Shape or Size of the element) and in values the same in every iteration;
the begin and end pads of axis 0 plus the rows must not depend on the rows (`(L - n) + n` is
`L`), and the pads of the other axes must be constants. A Pad with a negative pad crops, as the
Gather does (a position outside the element reads the pad value, one inside reads the element).
The begin pad and the length are then emitted before the loop from their forms: the rows as
the sizes table, the iteration number as Range(0, n), a value the same in every iteration as
itself (the body nodes that compute it copied out of the body). Where the list is empty the
result is [0, W] (onnxruntime's scan output of no iteration is [0, 0]: neither holds a value).
Where the original's Pad would give a negative length (a crop past the element), the original
fails and the padded Gather gives no column.

The trip count must be the length of the sizes table or a minimum over it (TorchScript's `zip`;
the table is cut to it), the sizes never negative, the condition always true, the Loop's
carried values passed on unchanged, every scan output such a Pad, mode constant, its pad value
the same in every iteration; the list's element type not string (onnxruntime's `string-gather`
quirk).

Refused: pads that read anything but the element's rows, the iteration number and values the
same in every iteration (`the pads read ...`), pads not proved to give one length, pads of
another axis computed at run time, a scan output that is not such a Pad, a value carried from one
iteration to the next, a model below opset 12 (the clamps are Max and Min of integers).
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Hashable

import numpy as np
import onnx_ir as ir

from seqlower.analysis import symbolic as sym
from seqlower.lists.signs import never_negative_across
from seqlower.ops import peel_identity
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body
from seqlower.rules.loop_ragged_rows import (
    count_bounded_by_table,
    made_outside,
    slice_sizes,
    table_read,
)
from seqlower.rules.stacks import dims as shape_dims

MIN_OPSET = 12  # Pad with its pads as an input (11), Max and Min of integers (12)
_ROWS: Hashable = ("padded-rows",)  # the element's rows, as its Slice gives them
_TABLE: Hashable = ("padded-table",)  # the element's size read from the table
_ITER: Hashable = ("padded-iter",)  # the iteration number
_SAME_CONTENT = frozenset({"Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})
_MAX_DEPTH = 64  # pads computed through more operators than this are not followed

Content = tuple[sym.Dim, ...]


@dataclasses.dataclass(frozen=True)
class PaddedScan:
    """One scan output: a Pad of the element read. `begin` is the begin pad of the rows and
    `width` the padded length (the same for every element), as linear forms; `others` the
    static pads of the other axes in Pad's layout of the batched rank (None when all are 0);
    `value` the pad value (None: 0)."""

    position: int  # among the Loop's outputs
    begin: sym.Dim
    width: sym.Dim
    others: tuple[int, ...] | None
    value: ir.Value | np.ndarray | None


@dataclasses.dataclass(frozen=True)
class RaggedPadPlan:
    data: ir.Value  # the flat rows x
    sizes: ir.Value  # the table: rows of each element
    ends: ir.Value | None  # CumSum(sizes) already computed, when the table is not cut
    cut: bool  # the trip count may be below the table's length
    exact: bool  # the list tier made x and the sizes as one list: Sum(sizes) == rows(x)
    kept: tuple[int, ...]  # carried values passed on unchanged
    scans: tuple[PaddedScan, ...]


class _Pads:
    """The linear form of each entry of the body's small integer values, from the element read
    (its rows), the table read, the iteration number and values the same in every iteration."""

    def __init__(self, body: ir.Graph, element: ir.Value, exact: bool, ctx: Context) -> None:
        self.body, self.element, self.ctx = body, element, ctx
        # a size read from the table is the element's rows where the table adds up to them
        self.table_symbol = _ROWS if exact else _TABLE
        self.index = body.inputs[0]
        self.contents: dict[ir.Value, Content] = {}
        self.varies: dict[ir.Value, bool] = {}
        self.sizes: list[ir.Value] = []  # the tables read

    def _varies(self, value: ir.Value, depth: int = 0) -> bool:
        """Whether `value` may differ between iterations (it reads the iteration number or a
        carried value, directly or not)."""
        if value in self.varies:
            return self.varies[value]
        node = value.producer()
        if value is self.index or (node is None and value.graph is self.body):
            found = True
        elif node is None or made_outside(value, self.body):
            found = False
        elif depth > _MAX_DEPTH or any(
            a.type == ir.AttributeType.GRAPH for a in node.attributes.values()
        ):
            found = True  # not followed (too deep, or a subgraph may read anything): assume so
        else:
            found = any(v is not None and self._varies(v, depth + 1) for v in node.inputs)
        self.varies[value] = found
        return found

    def content(self, value: ir.Value, depth: int = 0) -> Content | Refusal:
        if value in self.contents:
            return self.contents[value]
        if depth > _MAX_DEPTH:
            return Refusal("the pads are computed through too many operators")
        found = self._content(value, depth)
        if not isinstance(found, Refusal):
            self.contents[value] = found
        return found

    def _opaque(self, value: ir.Value) -> Content | Refusal:
        """Symbols for a value the same in every iteration (its entries, a scalar or a vector
        of known length), or its static entries."""
        static = self.ctx.facts.static(value)
        if static is not None and static.dtype.kind in "iu" and static.ndim <= 1:
            return tuple(int(v) for v in static.reshape(-1))
        if self._varies(value):
            producer = value.producer()
            op = producer.op_type if producer is not None else "a carried value"
            return Refusal(f"the pads read {op} '{value.name}', which differs per iteration")
        shape = value.shape
        if shape is None or len(shape) > 1 or (len(shape) == 1 and not isinstance(shape[0], int)):
            return Refusal(f"the pads read '{value.name}' of unknown length")
        count = 1 if len(shape) == 0 else int(shape[0])  # type: ignore[arg-type]
        return tuple(sym.symbol(("padded-same", value, k)) for k in range(count))

    def _content(self, value: ir.Value, depth: int) -> Content | Refusal:
        if value is self.index:
            return (sym.symbol(_ITER),)
        node = value.producer()
        if node is None or made_outside(value, self.body) or node.op_type == "Constant":
            return self._opaque(value)
        if node.domain not in ("", "ai.onnx"):
            return Refusal(f"the pads are computed by {node.op_type} of domain '{node.domain}'")
        table = table_read(value, self.index, self.ctx)
        if table is not None and made_outside(table, self.body):
            self.sizes.append(table)
            return (sym.symbol(self.table_symbol),)
        op = node.op_type
        if op in ("Shape", "Size") and peel_identity(node.inputs[0]) is self.element:  # type: ignore[arg-type]
            return self._element_shape(node)
        if not self._varies(value):  # the same in every iteration: followed where it can be
            return self._same(node, value, depth)
        inputs = self._inputs(node, depth)
        if isinstance(inputs, Refusal):
            return inputs
        found = self._op(node, value, inputs)
        if found is None:
            named = f" '{node.name}'" if node.name else ""
            return Refusal(f"the pads are computed by {op}{named}")
        return found

    def _same(self, node: ir.Node, value: ir.Value, depth: int) -> Content | Refusal:
        """A value the same in every iteration: its form through its operators, else symbols."""
        if node.op_type == "Shape" and node.inputs[0] is not None:
            dims = _dims(node.inputs[0], node)
            if dims is not None:
                return dims
        inputs = self._inputs(node, depth)
        found = None if isinstance(inputs, Refusal) else self._op(node, value, inputs)
        return self._opaque(value) if found is None else found

    def _inputs(self, node: ir.Node, depth: int) -> list[Content | None] | Refusal:
        found: list[Content | None] = []
        for v in node.inputs:
            if v is None:
                found.append(None)
                continue
            if peel_identity(v) is self.element:
                return Refusal(f"the pads read the element's values ({node.op_type})")
            content = self.content(v, depth + 1)
            if isinstance(content, Refusal):
                return content
            found.append(content)
        return found

    def _element_shape(self, node: ir.Node) -> Content | Refusal:
        """Shape or Size of the element: its rows, then the dims of x (a Slice of x's rows)."""
        data = self.element.producer().inputs[0]  # type: ignore[union-attr]
        dims = _dims(data, None) if data is not None else None
        if dims is None or len(dims) == 0:
            return Refusal("the rank of the element is unknown")
        rows_dims = (sym.symbol(_ROWS), *dims[1:])
        if node.op_type == "Size":
            total: sym.Dim | None = 1
            for d in rows_dims:
                total = sym.mul(total, d)
            return (total,)  # type: ignore[return-value]
        rank = len(rows_dims)
        start = _clamp(node.attributes.get_int("start", 0), rank)
        end = _clamp(node.attributes.get_int("end", rank), rank)
        return tuple(rows_dims[start:end])

    def _op(self, node: ir.Node, value: ir.Value, inputs: list[Content | None]) -> Content | None:
        """The content of `value` made by `node` from its inputs' contents; None where not
        followed."""
        op = node.op_type
        rank = len(value.shape) if value.shape is not None else None
        if rank is None or rank > 1:  # entries in order: scalars and vectors only
            return None
        if op in _SAME_CONTENT:
            return inputs[0]
        if op == "Cast":  # to int64 only: a narrower integer may wrap
            return inputs[0] if node.attributes.get_int("to", 0) == ir.DataType.INT64 else None
        if op == "Concat":
            if any(c is None for c in inputs):
                return None
            return tuple(d for c in inputs for d in c)  # type: ignore[union-attr]
        if op == "Gather":
            data, where = inputs[0], self.ctx.facts.static(node.inputs[1])
            if data is None or where is None or node.attributes.get_int("axis", 0) != 0:
                return None
            if node.inputs[0].shape is None or len(node.inputs[0].shape) != 1:  # type: ignore[union-attr]
                return None
            picked = []
            for k in where.reshape(-1):
                k = int(k) + len(data) if int(k) < 0 else int(k)
                if not 0 <= k < len(data):
                    return None
                picked.append(data[k])
            return tuple(picked)
        if op == "Slice":
            return self._slice(node, inputs[0])
        if op in ("Add", "Sub", "Mul"):
            a, b = inputs[0], inputs[1]
            if a is None or b is None:
                return None
            if len(a) != len(b) and 1 not in (len(a), len(b)):
                return None
            count = max(len(a), len(b))
            a = a * count if len(a) == 1 else a
            b = b * count if len(b) == 1 else b
            combine = {"Add": sym.add, "Sub": sym.sub, "Mul": sym.mul}[op]
            result = tuple(combine(x, y) for x, y in zip(a, b, strict=True))
            return None if any(d is None for d in result) else result  # type: ignore[return-value]
        if op == "Neg" and inputs[0] is not None:
            return tuple(sym.neg(d) for d in inputs[0])  # type: ignore[misc]
        return None

    def _slice(self, node: ir.Node, data: Content | None) -> Content | None:
        if data is None or node.inputs[0] is None or node.inputs[0].shape is None:
            return None
        if len(node.inputs[0].shape) != 1:
            return None
        bounds = [self.ctx.facts.static(v) if v is not None else None for v in node.inputs[1:]]
        if bounds[0] is None or bounds[1] is None:
            return None
        if (
            len(bounds) > 2
            and bounds[2] is not None
            and [int(a) for a in bounds[2]]
            not in (
                [0],
                [-1],
            )
        ):
            return None
        step = int(bounds[3].reshape(-1)[0]) if len(bounds) > 3 and bounds[3] is not None else 1
        start, stop = int(bounds[0].reshape(-1)[0]), int(bounds[1].reshape(-1)[0])
        if step == 0:
            return None
        return tuple(data[slice(*slice(start, stop, step).indices(len(data)))])


def _clamp(index: int, rank: int) -> int:
    index = index + rank if index < 0 else index
    return min(max(index, 0), rank)


def _dims(value: ir.Value, node: ir.Node | None) -> Content | None:
    """The dims of `value` (a Shape of it, with `node`'s start and end): ints where known,
    symbols of the value's dims otherwise (the same in every iteration where the caller
    knows `value` is)."""
    if value.shape is None:
        return None
    dims = tuple(
        d if isinstance(d, int) else sym.symbol(("padded-dim", value, k))
        for k, d in enumerate(value.shape)
    )
    if node is None:
        return dims
    rank = len(dims)
    start = _clamp(node.attributes.get_int("start", 0), rank)
    end = _clamp(node.attributes.get_int("end", rank), rank)
    return dims[start:end]


def _pad_value(
    pad: ir.Node, body: ir.Graph, ctx: Context
) -> ir.Value | np.ndarray | Refusal | None:
    value = pad.inputs[2] if len(pad.inputs) > 2 else None
    if value is None:
        return None
    if made_outside(value, body):
        return value
    static = ctx.facts.static(value)
    if static is None:
        return Refusal("the pad value is computed in the loop")
    return static


def _scan(
    body: ir.Graph, position: int, output: ir.Value, element: ir.Value, walk: _Pads, ctx: Context
) -> PaddedScan | Refusal:
    pad = peel_identity(output).producer()
    if pad is None or pad.op_type != "Pad" or pad.domain != "" or pad.graph is not body:
        return Refusal(f"scan output '{output.name}' is not a Pad")
    if pad.attributes.get_string("mode", "constant") != "constant":
        return Refusal("a Pad of another mode than constant")
    if pad.inputs[0] is None or peel_identity(pad.inputs[0]) is not element:
        return Refusal(f"scan output '{output.name}' pads another value than the element read")
    rank = len(element.shape) if element.shape is not None else None
    if rank is None or rank == 0:
        return Refusal("the rank of the element is unknown")
    axes = list(range(rank))
    if len(pad.inputs) > 3 and pad.inputs[3] is not None:
        static = ctx.facts.static(pad.inputs[3])
        if static is None:
            return Refusal("the padded axes are computed at run time")
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in static.reshape(-1)]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            return Refusal("padded axes out of range or repeated")
    if 0 not in axes:
        return Refusal("the Pad does not pad the rows")
    assert pad.inputs[1] is not None
    content = walk.content(pad.inputs[1])
    if isinstance(content, Refusal):
        return content
    count = len(axes)
    if len(content) != 2 * count:
        return Refusal(f"{len(content)} pads for {count} axes")
    at = axes.index(0)
    width = sym.add(sym.add(content[at], sym.symbol(_ROWS)), content[at + count])
    if width is not None and _mentions(width, {_TABLE}):
        return Refusal("the pads read the table of sizes, and x may hold fewer rows than it says")
    if width is None or _mentions(width, {_ROWS, _ITER}):
        return Refusal("the pads are not proved to give every element one length")
    others = [0] * (2 * (rank + 1))
    for k, axis in enumerate(axes):
        if axis == 0:
            continue
        begin, end = content[k], content[k + count]
        if not isinstance(begin, int) or not isinstance(end, int):
            return Refusal("the pads of another axis than the rows are computed at run time")
        others[1 + axis], others[rank + 2 + axis] = begin, end
    value = _pad_value(pad, body, ctx)
    if isinstance(value, Refusal):
        return value
    begin = content[at]
    return PaddedScan(position, begin, width, tuple(others) if any(others) else None, value)


def _check(node: ir.Node, ctx: Context) -> RaggedPadPlan | Refusal:
    body = loop_body(node)
    if ctx.rewriter.opset(node.graph) < MIN_OPSET:
        return Refusal(f"below opset {MIN_OPSET} (Max and Min of integers)")
    refusal = counted_loop_refusal(node, ctx)
    if refusal is not None:
        return refusal
    if any(v is not None and isinstance(v.type, ir.SequenceType) for v in node.inputs):
        return Refusal("the loop carries a list (the list rules first)")
    carried = len(node.inputs) - 2
    kept = []
    for k in range(carried):
        if peel_identity(body.outputs[1 + k]) is not body.inputs[2 + k]:
            return Refusal(f"carried value '{body.inputs[2 + k].name}' changes in the loop")
        kept.append(k)
    outputs = body.outputs[1 + carried :]
    if not outputs:
        return Refusal("no scan output (nothing to pad)")
    element = _element(outputs[0], body, ctx)
    if isinstance(element, Refusal):
        return element
    read, sizes, ends = element
    data = read.producer().inputs[0]  # type: ignore[union-attr]
    assert data is not None
    exact = ctx.rewriter.holds_rows_of(sizes, data)
    walk = _Pads(body, read, exact, ctx)
    scans = []
    for position, output in enumerate(outputs):
        found = _scan(body, carried + position, output, read, walk, ctx)
        if isinstance(found, Refusal):
            return found
        scans.append(found)
    if any(table is not sizes for table in walk.sizes):
        return Refusal("the pads read another table of sizes")
    if data.dtype is None or data.dtype == ir.DataType.STRING:
        return Refusal("the rows are strings or of unknown type (no Gather of strings)")
    if data.shape is None or len(data.shape) != len(read.shape or ()):
        return Refusal("the rank of the list's rows is unknown")
    if sizes.dtype != ir.DataType.INT64:
        return Refusal("the sizes table is not int64")
    if not ctx.rewriter.is_row_table(sizes) and not never_negative_across(sizes, ctx.facts.values):
        return Refusal("the sizes table may hold a negative size")
    bound = count_bounded_by_table(node.inputs[0], sizes, ctx)  # type: ignore[arg-type]
    if bound is None:
        return Refusal("the trip count is not known to be at most the sizes table's length")
    return RaggedPadPlan(
        data, sizes, ends if bound[1] else None, not bound[1], exact, tuple(kept), tuple(scans)
    )


def _mentions(dim: sym.Dim, atoms: set[Hashable]) -> bool:
    """Whether `dim` reads any of `atoms`, products and quotients included."""
    for atom in sym.atoms(dim):
        if atom in atoms:
            return True
        nested = isinstance(atom, tuple) and atom and atom[0] in ("mul", "div")
        if nested and any(not isinstance(d, int) and _mentions(d, atoms) for d in atom[1:]):
            return True
    return False


def _holds_graph(node: ir.Node) -> bool:
    return any(a.type == ir.AttributeType.GRAPH for a in node.attributes.values())


def _element(
    output: ir.Value, body: ir.Graph, ctx: Context
) -> tuple[ir.Value, ir.Value, ir.Value] | Refusal:
    """(the element read, the sizes table, CumSum(sizes)) for the value the first scan
    output pads: Slice(x, starts[i], ends[i]) of an x from outside the body."""
    pad = peel_identity(output).producer()
    if pad is None or pad.op_type != "Pad" or pad.graph is not body or not pad.inputs:
        return Refusal(f"scan output '{output.name}' is not a Pad")
    read = peel_identity(pad.inputs[0])  # type: ignore[arg-type]
    sliced = read.producer()
    if sliced is None or sliced.op_type != "Slice" or sliced.graph is not body:
        return Refusal("the Pad does not pad an element of a list held as rows and sizes")
    found = slice_sizes(sliced, body.inputs[0], ctx)
    data = sliced.inputs[0]
    if found is None or data is None or not made_outside(data, body):
        return Refusal("the Pad does not pad an element of a list held as rows and sizes")
    return read, found[0], found[1]


def _rewrite(node: ir.Node, plan: RaggedPadPlan, ctx: Context) -> None:
    """Loop(M, true, body(i, c): scan output Pad(Slice(x, starts[i], ends[i]), pads(i), v))
    -> Gather(Concat(x, v as one row), Where(inside, lo[:, None] + src, rows(x)))"""
    b = ctx.rewriter.before(node)
    int64 = ir.TensorType(ir.DataType.INT64)
    zero = b.constant(np.array(0, np.int64), "zero")
    sizes = plan.sizes
    if plan.cut:
        count = b.op("Max", [b.op("Cast", [node.inputs[0]], {"to": 7}), zero])
        count = b.op("Reshape", [count, b.ints([1])])
        sizes = b.op("Slice", [sizes, b.ints([0]), count, b.ints([0])], name="sizes")
    ends = plan.ends or b.op("CumSum", [sizes, zero], name="ends")
    low = b.op("Sub", [ends, sizes], name="starts")
    rows = shape_dims(b, plan.data, 0, 1)
    held = sizes
    if not plan.exact:  # each element's rows as its Slice clamps them to x's
        low = b.op("Min", [low, rows], name="low")
        held = b.op("Sub", [b.op("Min", [ends, rows]), low], name="held")
    for value in (sizes, ends, low, rows, held):
        value.type = int64
    forms = _Forms(b, loop_body(node), held)
    held_column = b.unsqueeze(held, [1])
    low_column = b.unsqueeze(low, [1])
    for scan in plan.scans:
        width = forms.emit(scan.width)
        positions = b.op("Range", [zero, width, b.constant(np.array(1, np.int64), "one")])
        positions = b.unsqueeze(positions, [0])  # [1, W]
        source, inside = positions, b.op("Less", [positions, held_column])
        if scan.begin != 0:
            begin = b.unsqueeze(forms.emit(scan.begin), [-1])  # [n, 1] or [1]
            source = b.op("Sub", [positions, begin], name="source")
            inside = b.op("Less", [source, held_column])
            if not isinstance(scan.begin, int) or scan.begin > 0:  # a crop reads from >= 0
                inside = b.op("And", [b.op("GreaterOrEqual", [source, zero]), inside])
        at = b.op("Where", [inside, b.op("Add", [source, low_column]), rows], name="at")
        filled = b.op("Concat", [plan.data, _fill_row(b, plan.data, scan.value)], {"axis": 0})
        result = b.op("Gather", [filled, at], {"axis": 0}, name="padded")
        if scan.others is not None:
            value = _value_input(b, plan.data, scan.value)
            result = b.op("Pad", [result, b.ints(list(scan.others)), value], name="padded")
        result.type = node.outputs[scan.position].type
        ctx.rewriter.replace(node.outputs[scan.position], result)
    for k in plan.kept:
        ctx.rewriter.replace(node.outputs[k], node.inputs[2 + k])  # type: ignore[arg-type]


class _Forms:
    """Emits a linear form of `_Pads` as an int64 value before the Loop: the element's rows as
    `held` ([n]), the iteration number as Range(0, n), a value the same in every iteration as
    itself (the body nodes it is computed from copied out of the body, once)."""

    def __init__(self, b: Builder, body: ir.Graph, held: ir.Value) -> None:
        self.b, self.body, self.held = b, body, held
        self.copies: dict[ir.Value, ir.Value] = {}
        self.atoms: dict[Hashable, ir.Value] = {}

    def emit(self, dim: sym.Dim) -> ir.Value:
        b = self.b
        if isinstance(dim, int):
            return b.constant(np.array(dim, np.int64), "pad")
        total: ir.Value | None = None
        for atom, k in dim.terms:
            term = self._atom(atom)
            if k != 1:
                term = b.op("Mul", [term, b.constant(np.array(k, np.int64), "coefficient")])
            total = term if total is None else b.op("Add", [total, term])
        assert total is not None
        if dim.const:
            total = b.op("Add", [total, b.constant(np.array(dim.const, np.int64), "pad")])
        return total

    def _atom(self, atom: Hashable) -> ir.Value:
        if atom not in self.atoms:
            self.atoms[atom] = self._make(atom)
        return self.atoms[atom]

    def _make(self, atom: Hashable) -> ir.Value:
        b = self.b
        if atom == _ROWS:
            return self.held
        if atom == _ITER:
            count = b.op("Size", [self.held])
            one = b.constant(np.array(1, np.int64), "one")
            return b.op("Range", [b.constant(np.array(0, np.int64), "zero"), count, one])
        assert isinstance(atom, tuple)
        kind = atom[0]
        if kind in ("mul", "div"):
            left, right = self.emit(atom[1]), self.emit(atom[2])
            return b.op("Mul" if kind == "mul" else "Div", [left, right])
        value, k = self._copied(atom[1]), atom[2]
        if kind == "padded-dim":
            return b.squeeze(shape_dims(b, value, k, k + 1), [0])
        if value.dtype != ir.DataType.INT64:
            value = b.op("Cast", [value], {"to": int(ir.DataType.INT64)})
        if value.shape is not None and len(value.shape) == 0:
            return value
        return b.op("Gather", [value, b.constant(np.array(k, np.int64), "entry")], {"axis": 0})

    def _copied(self, value: ir.Value) -> ir.Value:
        """`value` before the Loop: itself when made outside the body, else a copy of the body
        nodes that compute it (they read only values the same in every iteration)."""
        if made_outside(value, self.body) or value in self.copies:
            return self.copies.get(value, value)
        stack = [value]
        while stack:
            current = stack[-1]
            node = current.producer()
            assert node is not None
            pending = [
                v for v in node.inputs
                if v is not None and not made_outside(v, self.body) and v not in self.copies
            ]  # fmt: skip
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if current not in self.copies:
                self.b.copy(node, self.copies)
        return self.copies[value]


def _value_input(b: Builder, data: ir.Value, value: ir.Value | np.ndarray | None) -> ir.Value:
    if isinstance(value, ir.Value):
        return value
    dtype = data.dtype.numpy()  # type: ignore[union-attr]
    array = np.zeros((), dtype) if value is None else np.asarray(value, dtype).reshape(())
    return b.constant(array, "pad_value")


def _fill_row(b: Builder, data: ir.Value, value: ir.Value | np.ndarray | None) -> ir.Value:
    """One row of x's other dims, every entry the pad value."""
    rank = len(data.shape)  # type: ignore[arg-type]
    shape = b.ints([1])
    if rank > 1:
        shape = b.op("Concat", [shape, shape_dims(b, data, 1, rank)], {"axis": 0})
    return b.op("Expand", [_value_input(b, data, value), shape], name="pad_row")


RULES = RuleSet([Rule("loop-ragged-pad", "Loop", _check, _rewrite)])
