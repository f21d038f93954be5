"""The tensor form of every sequence operator, in each layout (`seqlower.lists.tensors`).

`ListForms` is the one entry point: it dispatches each operator to the emitter of the list's
layout (`stacked`, `ragged`, `flat`, `unranked`), and keeps what every reader of one list needs
(its length, the start and end of each element) in a table built once, where the list is
defined. The `before -> after` of each layout is in its module's docstring.

Positions are read with Gather, which accepts exactly `[-n, n-1]` and fails outside it, as
SequenceAt and SequenceErase do; an insert position is checked against `[-n, n]` the same way.
Where the original fails at run time, the tensor form fails too (a read from an empty list, an
out-of-range position), with the exceptions the README lists: a ConcatFromSequence of an empty
stacked or ragged list gives an empty tensor, and one of elements whose shapes do not fit
together may give a result.
"""

from __future__ import annotations

__all__ = ["ListForms", "Placement"]

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.lists import flat, paired, ragged, stacked, unranked
from seqlower.lists.signs import never_negative
from seqlower.lists.tensors import (
    INT64_MAX,
    Layout,
    Table,
    TensorList,
    body_inputs,
    body_outputs,
    int64,
    scalar_int,
)
from seqlower.ops import graphs_within
from seqlower.rewriter import Builder, Rewriter

# Where to emit the table of a list: a builder in the graph that defines it, placed before the
# node (of that graph) that holds the current reader.
Placement = Callable[[TensorList], Builder]
# Where a table may go instead, in a branch below that graph that holds the current reader: the
# ids of the graphs whose tables serve the reader (up to the list's), and a builder where one
# is to be built (made only when none of them has one)
TablePlacement = Callable[[TensorList], tuple[tuple[int, ...], Callable[[], Builder]]]

_EMITTERS = {"flat": flat, "ragged": ragged, "stacked": stacked, "unranked": unranked}


class ListForms:
    """Emits the tensor form of each sequence operator. `placement(s)` gives a builder in the
    graph where `s` is defined, before the current reader (or the node holding it)."""

    def __init__(
        self,
        rewriter: Rewriter,
        placement: Placement,
        values: StaticValues,
        table_placement: TablePlacement | None = None,
    ) -> None:
        self.rewriter = rewriter
        self.values = values  # static positions and chunk sizes
        # the iteration numbers of Loop bodies (ids): positions made from them are never
        # negative (the converter, which knows whose body each graph is, fills it)
        self.counters: set[int] = set()
        # values made once per graph and reused by later readers of the same list there:
        # (what, ids of what it is made from) -> the value (`bounds`)
        self._made: dict[tuple, tuple[ir.Value, ...]] = {}
        # a table's starts and ends as [n, 1] columns (by the id of its starts), for reads at
        # a loop's iteration number
        self._columns: dict[int, tuple[ir.Value, ...]] = {}
        # the ids of the graphs within a Loop body (by the body's id), for `bounds`
        self._within: dict[int, set[int]] = {}
        self._placement = placement
        self._table_placement = table_placement
        # by `TensorList.key` and the id of the graph each is built in
        self._tables: dict[tuple, dict[int, Table]] = {}
        self._table_builders: dict[int, Builder] = {}  # by the id of the table: where it is
        # elements read from a stacked list at a position known to be in range (ids): the
        # list's data and the position
        self._rows: dict[int, tuple[ir.Value, int]] = {}
        # tensors (ids) known to have at least so many rows where the converter is now (the
        # length guards of the branches around it)
        self.min_rows: dict[int, int] = {}
        # lengths read from lists (ids): the converted SequenceLength -> the id of the list's data
        self.measured: dict[int, tuple] = {}
        # stacked lists (ids of their data) read at a static position by a Gather that stays in
        # the model: (the data, the graph of the Gather, the length the read proves) (`checked`)
        self._read_lengths: dict[tuple, tuple[ir.Value, ir.Graph, int]] = {}

    # -- makers --------------------------------------------------------------------------

    def empty(self, b: Builder, layout: Layout) -> TensorList:
        return self.typed(_EMITTERS[layout.kind].empty(b, layout))

    def construct(self, b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
        made = _EMITTERS[layout.kind].construct(b, elements, layout)
        return self.typed(dataclasses.replace(made, min_length=len(elements)))

    def insert(self, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None) -> TensorList:
        static = None if p is None else self.values.get_int(p)
        # a position the list surely has: the insert needs no check of its own
        length = max(s.min_length, self.checked(s, b.graph))
        surely = p is None or (static is not None and abs(static) <= length)
        made = _EMITTERS[s.layout.kind].insert(self, b, s, x, p)
        where = -1 if p is None else self.position_key(p)  # an append puts x at -1
        if where is None and static is not None and static < 0:
            where = static - 1  # x goes before element p, and is element p - 1 after
        put = None if where is None else (where, x)
        inserted = (s, where) if surely and where is not None else None
        before = s.min_length
        if static is not None and s.layout.kind == "stacked":
            # the stacked form fails outside [-n, n] and its result is made from that check:
            # where the result exists, the list had at least |p| elements
            before = max(before, abs(static))
        made = dataclasses.replace(made, min_length=before + 1, put=put, inserted=inserted)
        return self.typed(made)

    def erase(self, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
        if s.inserted is not None and (
            self.same_position(s.inserted[1], p) if p is not None else s.inserted[1] == -1
        ):
            return s.inserted[0]  # the element just put there taken out again: the list before
        made = _EMITTERS[s.layout.kind].erase(self, b, s, p)
        static = -1 if p is None else self.values.get_int(p)
        before = max(s.min_length, self.checked(s, b.graph))
        if static is not None and s.layout.kind == "stacked":
            # the stacked form fails outside [-n, n-1] and its result is made from that check
            before = max(before, -static if static < 0 else static + 1)
        where = None if p is None else self.position_key(p)
        if where is None and p is not None and self.is_last(s, p):
            where = p  # `len(xs) - 1`: >= 0 wherever the erase succeeds
        erased = None if where is None else (s, where)
        signed = None
        if erased is None and p is not None and s.layout.kind == "stacked":
            signed = (s, p if static is None else static)  # `xs[k] = x`, k of either sign
        made = dataclasses.replace(made, erased=erased, erased_signed=signed)
        return self.typed(dataclasses.replace(made, min_length=max(before - 1, 0)))

    def position_key(self, p: ir.Value) -> int | ir.Value | None:
        """A position >= 0 as something two edits can be compared by: its value when static,
        else the run-time value itself when proved never negative; None otherwise (a negative
        position names different elements before and after an edit)."""
        static = self.values.get_int(p)
        if static is not None:
            return static if static >= 0 else None
        return p if self.never_negative(p) else None

    def is_last(self, s: TensorList, p: ir.Value | None) -> bool:
        """Whether `p` is `len(s) - 1` computed from s itself: a converted SequenceLength of s,
        its table's length, or `Gather(Shape(data), 0)`, minus the constant 1. Where an erase
        or read at p succeeds, p is n - 1 >= 0: the last element (an empty list fails)."""
        node = None if p is None else p.producer()
        if node is None or node.op_type != "Sub" or node.domain != "" or len(node.inputs) != 2:
            return False
        length, one = node.inputs
        if length is None or one is None or self.values.get_int(one) != 1:
            return False
        if self.measured.get(id(length)) == s.key:
            return True
        if any(length is table.n for table in self._tables.get(s.key, {}).values()):
            return True
        return s.layout.list_axis == 0 and _dim0_of(length, s.data, self.values)

    def same_position(self, key: int | ir.Value, p: ir.Value | None) -> bool:
        """Whether `p` is the position `key` (from `position_key`, or -1 for an append)."""
        if p is None:
            return False
        if isinstance(key, int):
            return self.values.get_int(p) == key
        return p is key

    def bounds(
        self, b: Builder, s: TensorList, p: ir.Value, buffer: int = 0
    ) -> tuple[ir.Value, ir.Value]:
        """Where element p of a ragged, flat or unranked list starts and ends in its data
        (`buffer` 0) or, unranked, in its shapes (1) ([1] each; the Gather fails outside
        [-n, n-1]), made once per graph for one list and position: `xs[i] = f(xs[i])` reads and
        splices at the same bounds."""
        starts, ends, _ = self.table(s).spans(buffer)
        key = ("bounds", id(starts), id(p), id(b.graph))
        if id(p) in self.counters and not self._inside(starts.graph, p.graph):
            # read at the iteration number of a loop the list is defined outside of: the
            # table's columns ([n, 1], made once before the loop) give [1] bounds by one
            # Gather each at the scalar, no Reshape of it in every iteration (a list the
            # body or a branch in it defines, one it carries, has its table made in every
            # iteration: there the columns would be two Unsqueezes per iteration, not one
            # Reshape of p shared by the lists read at p)
            columns = self._columns.get(id(starts))
            if columns is None:
                at = self._builder_of(s)
                columns = tuple(at.unsqueeze(v, [1]) for v in (starts, ends))
                self._columns[id(starts)] = columns
            starts, ends = columns

            def make() -> tuple[ir.Value, ...]:
                start = b.op("Gather", [starts, p], name="start")  # fails outside [-n, n-1]
                return start, b.op("Gather", [ends, p], name="end")

            start, end = self._once(b, key, make)
            return start, end

        def make() -> tuple[ir.Value, ...]:
            p1 = self.index1(b, p)  # shared by the lists read or edited at p here
            start = b.op("Gather", [starts, p1], name="start")  # fails outside [-n, n-1]
            return start, b.op("Gather", [ends, p1], name="end")

        start, end = self._once(b, key, make)
        return start, end

    def _inside(self, graph: ir.Graph | None, body: ir.Graph | None) -> bool:
        """Whether `graph` is `body` or a graph nested in it (its Ifs' branches...). The
        graphs of a body are listed once; a graph added to it later counts as outside, which
        only costs the Unsqueezes `bounds` would then make (both forms read the same bounds)."""
        if graph is None or body is None:
            return False
        within = self._within.get(id(body))
        if within is None:
            within = self._within[id(body)] = {id(g) for g in graphs_within(body)}
        return id(graph) in within

    def last_start(self, b: Builder, s: TensorList) -> tuple[tuple[ir.Value, ...], ir.Value]:
        """`paired.last_start`, made once per graph for one list."""

        def make() -> tuple[ir.Value, ...]:
            starts, entry = paired.last_start(b, s)
            return (*starts, entry)

        *starts, entry = self._once(b, ("last", s.key, id(b.graph)), make)
        return tuple(starts), entry

    def _once(
        self, b: Builder, key: tuple, make: Callable[[], tuple[ir.Value, ...]]
    ) -> tuple[ir.Value, ...]:
        """`make()`, or what it made before for `key` in the graph `b` builds in (the walk
        goes forward, so what was made there earlier comes before the current node)."""
        made = self._made.get(key)
        if made is None or made[0].graph is not b.graph:
            self._made[key] = made = make()
        return made

    def index1(self, b: Builder, p: ir.Value) -> ir.Value:
        """The position p as a 1-D index `[p]`: a constant when p is static, else one Reshape
        made once per graph and position (two lists read at the same `j` share it)."""
        static = self.values.get_int(p)
        if static is not None:
            return b.ints([static], "position")

        def make() -> tuple[ir.Value, ...]:
            return (b.op("Reshape", [int64(b, p), b.ints([1], "one_d")], name="position"),)

        (index,) = self._once(b, ("index1", id(p), id(b.graph)), make)
        return index

    def row(self, b: Builder, x: ir.Value) -> ir.Value:
        """x as a row `[1, *S]`: the Slice of the stacked list it was read from, when it was
        read at a position known to be in range (no Gather then, nor an Unsqueeze); else
        Unsqueeze(x, 0)."""
        read = self._rows.get(id(x)) or self._guarded_row(x)
        if read is None:
            return b.unsqueeze(x, [0])
        data, p = read
        end = INT64_MAX if p == -1 else p + 1
        return b.op("Slice", [data, b.ints([p], "row_start"), b.ints([end], "row_end")], name="row")

    def _guarded_row(self, x: ir.Value) -> tuple[ir.Value, int] | None:
        """(data, p) when x is Gather(data, p) on axis 0 at a constant p that `min_rows` (a
        length guard around the current branch) proves in range."""
        node = x.producer()
        if node is None or node.op_type != "Gather" or node.domain != "":
            return None
        data, index = node.inputs[0], node.inputs[1]
        if data is None or index is None or node.attributes.get_int("axis", 0) != 0:
            return None
        p = self.values.get_int(index)
        rows = self.min_rows.get(id(data), 0)
        if p is None or index.shape is None or len(index.shape) != 0 or not -rows <= p < rows:
            return None
        return data, p

    def never_negative(self, p: ir.Value | None) -> bool:
        """Whether the position `p` is proved >= 0 (`seqlower.lists.signs`)."""
        return never_negative(p, self.values, self.counters)

    def within(
        self, s: TensorList, p: ir.Value | None, graph: ir.Graph | None = None
    ) -> int | None:
        """The static position `p` (SequenceErase's default: -1), when it is known to be in
        range, inside `[-m, m - 1]` for m the list's `min_length` or, in `graph`, the length
        a checked read there proves (`checked`); else None (a run-time check is due)."""
        static = -1 if p is None else self.values.get_int(p)
        length = max(s.min_length, self.checked(s, graph))
        if static is None or not -length <= static < length:
            return None
        return static

    def checked(self, s: TensorList, graph: ir.Graph | None) -> int:
        """The length that a read of stacked list `s` at a static position proves in `graph`
        (0 if none): `xs.pop()` exports as SequenceAt(xs, -1) then SequenceErase(xs, -1), and
        the read's Gather, which stays in the model (its result is used), already fails on
        an empty list as the erase does, so the erase needs no check of its own. The read
        must be in the same graph: it runs whenever the erase runs."""
        read = self._read_lengths.get(s.key)
        if read is None or graph is None or read[0] is not s.data or read[1] is not graph:
            return 0
        return read[2]

    def split(self, b: Builder, node: ir.Node, layout: Layout) -> TensorList:
        """A SplitToSequence whose chunk count is known at run time only."""
        return self.typed(_EMITTERS[layout.kind].split(self, b, node, layout))

    # -- readers -------------------------------------------------------------------------

    def length(self, b: Builder, s: TensorList) -> ir.Value:
        return self.table(s).n

    def at(self, b: Builder, s: TensorList, p: ir.Value, live: bool = False) -> ir.Value:
        """Element p of s. `live`: the element read reaches an output of its graph, so the
        Gather made here stays in the model, and its check of p holds for later edits of s in
        the same graph (`checked`)."""
        if s.put is not None and self.same_position(s.put[0], p):
            return s.put[1]  # the element just put at p (`xs[i] = f(xs[i]); g(xs[i])`)
        known = self.within(s, p, b.graph) if s.layout.kind == "stacked" else None
        element = _EMITTERS[s.layout.kind].at(self, b, s, p)
        static = self.values.get_int(p)
        if live and known is None and static is not None and s.layout.kind == "stacked":
            length = -static if static < 0 else static + 1  # the Gather fails unless n >= this
            if length > self.checked(s, b.graph):
                self._read_lengths[s.key] = (s.data, b.graph, length)
        # `row` cuts it out as a row: `stack.append(buffer.pop(0))` (a unit row is one)
        if known is not None and s.layout.unit is None:
            self._rows[id(element)] = (s.data, known)
        element.type = ir.TensorType(s.layout.dtype)
        if element.shape is None and s.layout.rank is not None:  # for the lists it goes into
            element.shape = ir.Shape([None] * s.layout.rank)
        return element

    def shape_at(self, b: Builder, s: TensorList, p: ir.Value) -> ir.Value | None:
        """Shape(SequenceAt(s, p)) read from the list's table of sizes, without the element;
        None for a stacked list (the element is one Gather)."""
        shape = _EMITTERS[s.layout.kind].shape_at(self, b, s, p)
        if shape is None:
            return None
        shape.type = ir.TensorType(ir.DataType.INT64)
        shape.shape = ir.Shape([s.layout.rank])
        return shape

    def concat(self, b: Builder, s: TensorList, axis: int, new_axis: bool) -> ir.Value:
        rank = s.layout.rank
        if rank is not None:  # else a negative axis counts from the end at run time
            axis = axis + rank + int(new_axis) if axis < 0 else axis
        result = _EMITTERS[s.layout.kind].concat(self, b, s, axis, new_axis)
        if result is None:
            result = self.concat_loop(b, s, axis, new_axis and rank is None)
        result.type = ir.TensorType(s.layout.dtype)
        return result

    def flattened(self, b: Builder, s: TensorList) -> ir.Value:
        """Every element of s flattened and concatenated, in order (1-D): what a Loop over the
        list that joins its elements flattened computes (`seqlower.lists.flattened`)."""
        result = _EMITTERS[s.layout.kind].flattened(b, s)
        if result is not s.data:  # the data keeps its own type and shape
            result.type = ir.TensorType(s.layout.dtype)
            result.shape = ir.Shape([None])
        return result

    # -- shared --------------------------------------------------------------------------

    def table(self, s: TensorList) -> Table:
        """The table of s for the current reader: one built before in its graph or a graph
        around it, up to the list's; else built where `table_placement` says (in the list's
        graph, or, for the starts and ends of elements that differ in size, in the If branch
        below it that holds every reader: a path of the program that reads nothing of the
        list, a `continue`, then builds nothing)."""
        tables = self._tables.setdefault(s.key, {})
        if self._table_placement is None or s.layout.kind == "stacked":
            # a stacked list's table is its length alone, one Shape: where it is read in a
            # branch, the passes after the tier move it there, or fold a branch that only
            # compares it into an And of both sides (which one in the branch would keep an If)
            b = self._placement(s)
            graphs, make = (id(b.graph),), lambda: b
        else:
            graphs, make = self._table_placement(s)
        for graph in graphs:
            if graph in tables:
                return tables[graph]
        b = make()
        table = tables[id(b.graph)] = _EMITTERS[s.layout.kind].table(b, s)
        self._table_builders[id(table)] = b
        return table

    def _builder_of(self, s: TensorList) -> Builder:
        """A builder in the graph of the table of s (for the current reader): what is made
        once with the table goes beside it; before the current reader's node where that is in
        the list's graph (`placement`), else where the table was made (a branch)."""
        made = self._table_builders[id(self.table(s))]
        here = self._placement(s)
        return here if here.graph is made.graph else made

    def positions(self, s: TensorList) -> ir.Value:
        """Range(0, n), built once with the table: Gather(positions, p) is p made >= 0, and
        fails outside [-n, n-1] as SequenceAt does."""
        table = self.table(s)
        if table.positions is None:
            b = self._builder_of(s)
            zero, one = scalar_int(b, 0, "zero"), scalar_int(b, 1, "one")
            table.positions = b.op("Range", [zero, table.n, one], name="positions")
        return table.positions

    def typed(self, s: TensorList) -> TensorList:
        layout = s.layout
        s.data.type = ir.TensorType(layout.dtype)
        if layout.kind == "unranked":
            s.data.shape = ir.Shape([None])
            for part in s.parts[1:]:
                part.type = ir.TensorType(ir.DataType.INT64)
            s.parts[1].shape = ir.Shape([None])
            s.parts[2].shape = ir.Shape([None, 2])
        elif layout.kind == "flat":
            s.data.shape = ir.Shape([None])
            s.parts[1].type = ir.TensorType(ir.DataType.INT64)
            s.parts[1].shape = ir.Shape([None, layout.rank])
        elif layout.kind == "ragged":
            if s.data.shape is None:  # else a tensor of the model: the one element constructed
                s.data.shape = ir.Shape([None, *layout.dims])
            s.parts[1].type = ir.TensorType(ir.DataType.INT64)
            s.parts[1].shape = ir.Shape([None])
        elif layout.unit is None:
            if s.data.shape is None:  # likewise
                s.data.shape = ir.Shape([None, *layout.dims])
        elif s.data.shape is None:  # else a tensor of the model: a split's input, an element
            dims = list(layout.dims)
            dims[layout.unit] = None
            s.data.shape = ir.Shape(dims)
        return s

    def concat_loop(
        self, b: Builder, s: TensorList, axis: int, unsqueeze: bool = False
    ) -> ir.Value:
        """ConcatFromSequence where no reshape of the data gives it: element 0, then a Loop
        over 1..n-1 that concatenates element i to what it carries (each element unsqueezed
        at `axis` first when `unsqueeze`: new_axis=1 where the rank is known at run time
        only, Unsqueeze and Concat counting a negative axis from the end)."""
        table = self.table(s)
        first = self.at(b, s, scalar_int(b, 0, "zero"))
        if unsqueeze:
            first = b.unsqueeze(first, [axis])
        trips = b.op("Sub", [table.n, scalar_int(b, 1, "one")])
        body = self.rewriter.new_graph(f"{b.hint}_concat_body", b.opset)
        i, cond, acc = body_inputs(body, s.layout.dtype, "acc")
        index = body.op("Add", [i, body.constant(np.array(1, np.int64), "one")])
        element = self.at(body, s, index)
        if unsqueeze:
            element = body.unsqueeze(element, [axis])
        grown = body.op("Concat", [acc, element], {"axis": axis}, name="grown")
        body_outputs(body, cond, grown, s.layout.dtype)
        return b.op("Loop", [trips, None, first], {"body": body.graph}, name="concat_loop")


def _dim0_of(length: ir.Value, data: ir.Value, values: StaticValues) -> bool:
    """Whether `length` is `Gather(Shape(data), 0)` (a scalar: dim 0 of data)."""
    node = length.producer()
    if node is None or node.op_type != "Gather" or node.domain != "":
        return False
    shape, index = node.inputs[0], node.inputs[1]
    if shape is None or index is None or node.attributes.get_int("axis", 0) != 0:
        return False
    if index.shape is None or len(index.shape) != 0 or values.get_int(index) != 0:
        return False
    made = shape.producer()
    return (
        made is not None
        and made.op_type == "Shape"
        and made.domain == ""
        and made.inputs[0] is data
        and made.attributes.get_int("start", 0) == 0
    )
