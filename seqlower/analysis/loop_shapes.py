"""Which values of a Loop body have the same shape in every iteration.

A Loop scan output stacks one body value per iteration, so that value must have the same shape in
every iteration (onnxruntime fails otherwise). Declared and inferred shapes cannot show this: onnx
shape inference clears the shapes of loop-carried values, and it gives every element of a sequence
one symbolic shape even when the elements differ (the last, smaller chunk of an uneven split).

The analysis is an abstract interpretation of one iteration of the body over two domains:

- the **shape** of every value: a tuple of `Dim`s (`seqlower.analysis.symbolic`: ints and linear
  forms over symbols that are fixed for the whole run of the loop, such as the dims of values
  defined outside the body, or None for a dim that may change between iterations), or
  `INVARIANT` (the same in every iteration, not known symbolically), or None (not even the rank
  is known). A value keeps one shape when its shape is INVARIANT or a tuple without None
  (`is_invariant`; `reason` says why not);
- the **content** of small integer values (shapes, positions, Slice bounds): a tuple of Dims that
  may also use symbols that change between iterations: the iteration number `i`, bounded by
  `[0, M - 1]` when the trip count M is given, and positions read from `Range(0, C)`, bounded by
  `[0, C - 1]`. So `Slice(x, i, i + 1)` has size `(i + 1) - i = 1` on its axis when `0 <= i` and
  `i + 1 <= dim` are proved: the per-sample slices of `x.split(1)` keep one shape.

A dim that would mention a changing symbol is None. Loop-carried tensors start from the
symbolic shape of their initial value (unknown dims of it are symbols too); where the body does
not confirm the assumption (the carried output's shape is not the same tuple), the assumption is
widened by `merge` (the dims on which both agree stay, the others become None; a different rank
or an unknown output shape: None) and the body analysed again. Each step only adds Nones, so
this ends; at the end every assumed dim holds after each iteration when it held before: sound by
induction on the iterations. A carried value keeps one shape where its assumption is `fixed`
(`invariant_carried`).

A Loop inside the body is analysed in turn (`_nested_loop`), reading the shapes of the values
outside it from this analysis and under its hypotheses on lists: a tensor it carries keeps the
shape of its initial value where the inner body keeps it (a running total that starts from
`zeros_like(sample)`), which the outer body may then carry on.

The per-operator transfer functions live in `seqlower.analysis.shape_rules`.
"""

from __future__ import annotations

__all__ = [
    "INVARIANT",
    "LoopShapes",
    "ShapeFact",
    "analysed",
    "carried_output_shape",
    "uniform_element_shape",
]

import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence

import onnx_ir as ir

from seqlower.analysis import symbolic as sym
from seqlower.analysis.loop_memo import LoopMemo
from seqlower.analysis.shape_rules import (
    CONTENT_RULES,
    ELEMENT_SIZE,
    INVARIANT,
    ND_CONTENT_RULES,
    SHAPE_RULES,
    SIZED_BY_CONTENT,
    Content,
    ShapeFact,
    fixed,
    merge,
    uniform_element_shape,
)
from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.symbolic import Dim
from seqlower.ops import graphs_within, has_subgraph

_MAX_CONTENT = 16  # elements
_MAX_DEPTH = 64  # producers followed outside the body for one content
_MAX_NESTING = 2  # Loops inside the body analysed in turn (`_nested_loop`), the passes multiply
_ITER = ("iter",)
_RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
)


def _peel_value(value: ir.Value | None) -> ir.Value | None:
    """The value under any Identity and CastLike (exporters wrap counters in them)."""
    while value is not None:
        node = value.producer()
        if node is None or node.domain != "" or node.op_type not in ("Identity", "CastLike"):
            return value
        value = node.inputs[0]
    return value


def _peel(value: ir.Value | None) -> ir.Node | None:
    value = _peel_value(value)
    return value.producer() if value is not None else None


def carried_output_shape(
    loop: ir.Node,
    value: ir.Value,
    values: StaticValues,
    shape_of: Callable[[ir.Value], ShapeFact] | None = None,
    memo: LoopMemo | None = None,
) -> tuple | None:
    """The shape of a tensor `loop` carries out (`value`, one of its outputs), when its body
    keeps the shape of the initial value (the final `max_len` of `max_len = max(max_len, n)`),
    as `shape_of` (default: the declared dims, ints only) gives the initial value's. `memo`
    gives what an analysis of `loop` found while the model is unchanged (`LoopMemo`)."""
    index = value.index()
    body = loop.attributes["body"].as_graph()
    if index >= len(loop.inputs) - 2:
        return None  # a scan output
    init = loop.inputs[2 + index]
    if init is None or not isinstance(body.inputs[2 + index].type, ir.TensorType):
        return None
    invariant = memo.invariant_carried(loop, values) if memo is not None else None
    if invariant is None:
        invariant = tuple(LoopShapes(loop, values, memo=memo).invariant_carried())
    if body.inputs[2 + index] not in invariant:
        return None
    if shape_of is not None:
        shape = shape_of(init)
    elif init.shape is not None and all(isinstance(d, int) for d in init.shape):
        shape = tuple(int(d) for d in init.shape)  # type: ignore[arg-type]
    else:
        array = values.get(init)
        shape = tuple(array.shape) if array is not None else None
    return shape if isinstance(shape, tuple) and not any(d is None for d in shape) else None


def analysed(loop: ir.Node, values: StaticValues, memo: LoopMemo | None) -> LoopShapes:
    """`LoopShapes(loop, values, memo=memo)`, or the same analysis made last while the model
    did not change since (`LoopMemo.analysis`): the rules tried on one Loop in turn share it."""
    if memo is not None:
        kept = memo.analysis(loop, values)
        if kept is not None:
            return kept
    shapes = LoopShapes(loop, values, memo=memo)
    if memo is not None:
        memo.keep_analysis(loop, values, shapes)
    return shapes


_SHARED_ATOMS = frozenset({"dim", "param", "value"})


def _shared_dim(dim: Dim | None) -> bool:
    """Whether `dim` means the same in every analysis: written with the sizes and contents of
    outer values only (no iteration number, no position with bounds of its own)."""
    if isinstance(dim, int):
        return True
    if not isinstance(dim, sym.Expr):
        return False
    for atom in sym.atoms(dim):
        if not isinstance(atom, tuple) or not atom:
            return False
        if atom[0] in ("mul", "div"):
            if not all(_shared_dim(part) for part in atom[1:]):
                return False
        elif atom[0] not in _SHARED_ATOMS:
            return False
    return True


def _trusted_name(name: str | None) -> bool:
    return bool(name) and not name.startswith("unk__")  # type: ignore[union-attr]


class LoopShapes:
    """Symbolic shapes of the values of one Loop body (see the module docstring)."""

    def __init__(
        self,
        loop: ir.Node,
        values: StaticValues,
        elements: Mapping[ir.Value, tuple[int, ...]] | None = None,
        uniform: Collection[ir.Value] = (),
        owners: Mapping[int, ir.Node] | None = None,
        grown: Sequence[Collection[ir.Value]] = (),
        memo: LoopMemo | None = None,
        outer: Callable[[ir.Value], ShapeFact] | None = None,
        nesting: int = 0,
    ) -> None:
        """`elements`: sequence values whose elements are assumed to have the given static
        shape; `uniform`: sequence values whose elements are assumed to share one shape, which
        may change between iterations (a list rebuilt each step from its grown elements):
        every read of one such value has the same per-iteration dims. Both are hypotheses the
        caller confirms (`seqlower.lists.components`). `owners`: the node that holds each
        subgraph (by id), where the caller knows them: the iteration numbers of the Loops
        around this one are then bounded too (`_bound_enclosing`). `grown`: lists (each the
        values of one list in this body) assumed to hold elements of one shape X for the
        whole loop, X what the body inserts into them in a first pass (where the carried
        tensors keep the shapes they start with): a key-value cache `keys.append(k(h));
        torch.cat(keys, 1)` whose state h is computed from the cache. The caller confirms the
        list enters empty; `grown_shapes` gives each X this analysis confirmed (every tensor
        inserted has shape X, under that hypothesis and the carried ones). `memo`: what the
        analyses of other Loops found (`LoopMemo`), read where this one derives a shape one
        of them carries out, and given what this one finds when it has no hypotheses.
        `outer`: the shapes of the values outside the body as the analysis of a Loop around
        this one derives them (`_nested_loop`), tried before the declared shapes; `nesting`:
        how many such analyses are around this one (at most `_MAX_NESTING`, each redone in
        every pass of its own)."""
        self.body = loop.attributes["body"].as_graph()
        self.elements: dict[ir.Value, tuple] = dict(elements or {})
        self.grown_shapes: dict[ir.Value, tuple] = {}
        self.uniform: frozenset[ir.Value] = frozenset(uniform)
        self._inside = {id(g) for g in graphs_within(self.body)}
        self.values = values
        self.memo = memo
        self.bounds: dict[Hashable, tuple[Dim, Dim]] = {}
        self.varying: set[Hashable] = {_ITER}
        self._outer_contents: dict[ir.Value, Content | None] = {}
        # outer values are fixed for the whole loop: each shape is derived once (a derivation
        # that reaches a value again by another path reads it here; Mask R-CNN's outer graph
        # re-derived the same shapes along every path for minutes)
        self._outer_shapes: dict[ir.Value, ShapeFact] = {}
        # a symbol of an outer dim -> the outer value and axis it was first read from
        self._dim_sources: dict[Hashable, tuple[ir.Value, int]] = {}
        self._depth = 0  # of the producers followed outside the body
        self._outer = outer
        self._nesting = nesting
        # the shapes derived for outer values, across analyses (`DerivedShapes`): read and added
        # to by an analysis without hypotheses only (the answers must not depend on them)
        hypotheses = elements or uniform or grown or owners or outer is not None or nesting
        derived = memo.derived if memo is not None and memo.values is values else None
        self._derived = None if hypotheses else derived
        # how often a walk outside the body stopped at the depth limit or at a Loop: an answer
        # found without any such stop is the same wherever the walk starts (`_derive`)
        self._cuts = 0
        self._cut_values: set[ir.Value] = set()  # outer shapes and contents found after a stop
        self._recorders: list[list[tuple[Hashable, tuple[ir.Value, int]]]] = []
        self._deriving: list[ir.Value] = []  # the outer values whose shape or content is sought
        # whether a shape was proved through a Loop inside the body (`_nested_loop`) or a Conv
        # (`shape_rules._conv`): a list proved of one shape that way was flat before those
        # rules, its empty join failing as the original's does, and its join keeps that failure
        # (`Layout.nonempty_join`, `loop-append-to-scan`)
        self.nonempty_joins = False
        self._shapes: dict[ir.Value, ShapeFact] = {}
        # shapes whose dims mention symbols that change between iterations (the dims of an
        # element read from a list of unequal elements): consistent within one iteration, so
        # `n + (m - n)` is `m`; `_shapes` holds them with those dims None
        self._exact: dict[ir.Value, tuple] = {}
        self._producers: dict[int, LoopShapes] = {}  # the Loops that build the lists read
        self._contents: dict[ir.Value, Content | None] = {}
        self._invariant: dict[ir.Value, bool] = {}
        self._reasons: dict[ir.Value, str] = {}
        # set before any derivation: deriving the trip count can analyse a Loop that built a
        # list read on the way (a count computed from an element of that list)
        self.owners: Mapping[int, ir.Node] = owners or {}
        trip = self.content(loop.inputs[0]) if loop.inputs and loop.inputs[0] else None
        if trip is not None and len(trip) == 1:
            self.bounds[_ITER] = (0, sym.sub(trip[0], 1))
        self.counters = self._counters(loop)
        self._bound_enclosing(loop)
        self.assumed: dict[ir.Value, ShapeFact] = {}
        carried = list(zip(self.body.inputs[2:], loop.inputs[2:]))
        for body_input, init in carried:
            shape = self.outer_shape(init) if init is not None else None
            is_tensor = isinstance(body_input.type, ir.TensorType)
            self.assumed[body_input] = shape if is_tensor and isinstance(shape, tuple) else None
        seeded = False
        changed = True
        while changed:
            self._run()
            changed = False
            if not seeded and grown:  # the hypotheses on the lists, before any is checked
                seeded = True
                if self._seed_grown(grown):
                    changed = True
                    continue
            for values in grown:  # a hypothesis the body does not confirm is dropped
                shape = self.grown_shapes.get(next(iter(values), None))  # type: ignore[arg-type]
                if shape is not None and not self._confirms(values, shape):
                    for value in values:
                        self.grown_shapes.pop(value, None)
                        self.elements.pop(value, None)
                    changed = True
            for index, (body_input, _) in enumerate(carried):
                assumed = self.assumed[body_input]
                if assumed is None or 1 + index >= len(self.body.outputs):
                    continue
                # widened, not dropped: the dims the body keeps stay (h: (T, 6), then (1, 6)
                # in every later iteration, is (None, 6)); a change of rank drops it all
                widened = merge(assumed, self.shape(self.body.outputs[1 + index]))
                if widened != assumed:
                    self.assumed[body_input] = widened
                    changed = True
        if memo is not None and outer is None and not (elements or uniform or owners or grown):
            memo.remember(loop, values, self.invariant_carried())

    def _seed_grown(self, grown: Sequence[Collection[ir.Value]]) -> bool:
        """Assume each list of `grown` holds elements of the one fixed shape every tensor
        inserted into it has in this pass; whether any list got a hypothesis."""
        seeded = False
        for values in grown:
            shapes = {self.input_shape(x) for x in _inserted(values)}
            if len(shapes) != 1:
                continue
            (shape,) = shapes
            if not isinstance(shape, tuple) or any(d is None or self.varies(d) for d in shape):
                continue
            for value in values:
                self.elements[value] = shape
                self.grown_shapes[value] = shape
            seeded = True
        return seeded

    def _confirms(self, values: Collection[ir.Value], shape: tuple) -> bool:
        """Whether every tensor inserted into the list `values` has `shape` in this pass."""
        return all(self.input_shape(x) == shape for x in _inserted(values))

    # -- queries ----------------------------------------------------------------------------

    def shape(self, value: ir.Value) -> ShapeFact:
        """The symbolic shape of `value` (a body value or an outer one)."""
        if value in self._shapes:
            return self._shapes[value]
        if self._is_outer(value):
            return self.outer_shape(value)
        if value.const_value is not None:  # an initializer of a branch in the body
            return tuple(int(d) for d in value.const_value.shape)
        return None

    def is_invariant(self, value: ir.Value) -> bool:
        """True when `value` has the same shape in every iteration."""
        return fixed(self.shape(value))

    def reason(self, value: ir.Value) -> str:
        """Why the shape of `value` may change between iterations."""
        return self._reasons.get(value, f"the shape of '{value.name}' is not known")

    def invariant_carried(self) -> list[ir.Value]:
        """The loop-carried body inputs that keep the shape of their initial value."""
        return [value for value, shape in self.assumed.items() if fixed(shape)]

    def outer_shape(self, value: ir.Value) -> ShapeFact:
        """The symbolic shape of a value defined outside the body (fixed for the whole loop)."""
        self._note_read(value)
        if value in self._outer_shapes:
            if value in self._cut_values:
                self._cuts += 1
            return self._outer_shapes[value]
        cuts = self._cuts
        self._deriving.append(value)
        try:
            shape = self._outer_shapes[value] = self._find_outer_shape(value)
        finally:
            self._deriving.pop()
        if self._cuts != cuts:
            self._cut_values.add(value)
        return shape

    def _note_read(self, value: ir.Value) -> None:
        """Note, for `DerivedShapes`, that the outer value being derived reads `value`."""
        if self._derived is not None and self._deriving:
            self._derived.note_read(value, self._deriving[-1])

    def _find_outer_shape(self, value: ir.Value) -> ShapeFact:
        array = self.values.get(value)
        if array is not None:
            return tuple(int(d) for d in array.shape)
        if self._outer is not None:  # fixed while this loop runs, as the loop around knows it
            shape = self._outer(value)
            if isinstance(shape, tuple) and not any(d is None for d in shape):
                return shape
        # a nested analysis takes what the loop around it knows and derives nothing anew: a
        # derivation analyses the Loop that made the value, whose input another Loop made, so a
        # chain of Loops in one body would nest one analysis per Loop, each redone in every pass
        derive = self._outer is None
        if derive and (
            value.shape is None
            or not all(
                isinstance(d, int) or _trusted_name(getattr(d, "value", None)) for d in value.shape
            )
        ):
            derived = self._derive(value)
            if derived is not None:
                return derived
        if value.shape is None:
            return INVARIANT
        dims: list[Dim] = []
        # a list's shape is its elements': a Shape cannot read it, so it is no dim's source
        readable = isinstance(value.type, ir.TensorType)
        for axis, dim in enumerate(value.shape):
            if isinstance(dim, int):
                dims.append(dim)
                continue
            if isinstance(dim, ir.SymbolicDim) and _trusted_name(dim.value):
                # A named dim from the model inputs: equal names are equal sizes. Names that
                # shape inference makes up ("unk__") may be shared by unequal sequence elements.
                atom: Hashable = ("param", dim.value)
            else:
                atom = ("dim", id(value), axis)
            dims.append(sym.symbol(atom))
            if readable:
                self._dim_sources.setdefault(atom, (value, axis))
                if self._recorders:  # each derivation's own, handed on when it ends
                    self._recorders[-1].append((atom, (value, axis)))
        return tuple(dims)

    def _derive(self, value: ir.Value) -> tuple | None:
        """`_derived_outer_shape`, or what it gave before (`DerivedShapes`: the dim sources
        that derivation noted are noted again). What a derivation gives without stopping at
        the depth limit or at a Loop, in dims that mean the same in every analysis, is
        remembered."""
        memo = self._derived
        if memo is None:
            return self._derived_outer_shape(value)
        known = memo.known(value)
        if known is not None:
            derived, sources = known
            for atom, source in sources:
                self._dim_sources.setdefault(atom, source)
            if self._recorders:
                self._recorders[-1].extend(sources)
            return derived
        cuts = self._cuts
        noted: list[tuple[Hashable, tuple[ir.Value, int]]] = []
        self._recorders.append(noted)
        try:
            derived = self._derived_outer_shape(value)
        finally:
            self._recorders.pop()
        if self._recorders:
            self._recorders[-1].extend(noted)
        if self._cuts == cuts and (derived is None or all(map(_shared_dim, derived))):
            memo.remember(value, derived, tuple(noted))
        return derived

    def outer_dim_source(self, dim: Dim | None) -> int | tuple[ir.Value, int] | None:
        """Where a dim fixed for the whole loop can be read before the loop: the number
        itself, or (a value outside the body, an axis) whose size it is; None for any other
        dim (a sum or a product of sizes, one that changes between iterations)."""
        if isinstance(dim, int):
            return dim
        if isinstance(dim, sym.Expr) and dim.const == 0 and len(dim.terms) == 1:
            atom, factor = dim.terms[0]
            return self._dim_sources.get(atom) if factor == 1 else None
        return None

    def _derived_outer_shape(self, value: ir.Value) -> tuple | None:
        """The shape of an outer value whose inferred shape has dims without a name (a Concat
        of two inputs: `unk__0`), from its producer's shape rule, when that relates it to the
        model's named dims (`N + 1`)."""
        producer = value.producer()
        if producer is not None and producer.op_type == "Loop" and producer.domain == "":
            self._cuts += 1  # what a body gives is not remembered (`DerivedShapes`)
            return self._carried_outer_shape(producer, value)
        rule = SHAPE_RULES.get(producer.op_type) if producer is not None else None
        if rule is None or producer.domain != "":  # type: ignore[union-attr]
            return None
        if self._depth >= _MAX_DEPTH:
            self._cuts += 1
            return None
        self._depth += 1
        try:
            shapes = rule(self, producer)  # type: ignore[arg-type]
        except (ValueError, IndexError, TypeError, ZeroDivisionError):
            return None
        finally:
            self._depth -= 1
        index = value.index()
        shape = shapes[index] if shapes is not None and index < len(shapes) else None
        if isinstance(shape, tuple) and not any(d is None for d in shape):
            return shape
        return None

    def _carried_outer_shape(self, loop: ir.Node, value: ir.Value) -> tuple | None:
        if self._depth >= _MAX_DEPTH:
            return None
        self._depth += 1
        try:
            return carried_output_shape(loop, value, self.values, self.outer_shape, self.memo)
        finally:
            self._depth -= 1

    def content(self, value: ir.Value | None) -> Content | None:
        """The elements of a small integer value (scalar or 1-D) as Dims, when known."""
        if value is None:
            return None
        if not self._is_outer(value):
            return self._contents.get(value)
        self._note_read(value)
        if value not in self._outer_contents:
            if self._depth >= _MAX_DEPTH:
                self._cuts += 1
                return None  # a long chain of arithmetic outside the loop: not followed
            self._outer_contents[value] = None  # guards against cycles
            cuts = self._cuts
            self._depth += 1
            self._deriving.append(value)
            try:
                self._outer_contents[value] = self._compute_content(value, outer=True)
            finally:
                self._depth -= 1
                self._deriving.pop()
            if self._cuts != cuts:
                self._cut_values.add(value)
        elif value in self._cut_values:
            self._cuts += 1
        return self._outer_contents[value]

    def varies(self, dim: Dim) -> bool:
        """True when `dim` mentions a symbol that changes between iterations."""
        for atom in sym.atoms(dim):
            if atom in self.varying:
                return True
            # a product, a quotient or a broadcast of other dims varies with them
            parts = atom[1:] if isinstance(atom, tuple) else ()
            if any(isinstance(part, sym.Expr) and self.varies(part) for part in parts):
                return True
        return False

    # -- the analysis -----------------------------------------------------------------------

    def _counters(self, loop: ir.Node) -> dict[ir.Value, int]:
        """Loop-carried scalars that count the iterations: start at a constant c, and the body
        returns `Add(v, 1)`; each holds `i + c` in iteration i. When the loop runs while such
        a counter is below a value fixed for the loop (`cond = Less(v + 1, X)`, initial
        `Less(c, X)`: a `while k < n` loop) and has no trip count, i is bounded by X - c - 1."""
        counters: dict[ir.Value, int] = {}
        step_of: dict[ir.Value, ir.Value] = {}  # the counter's next value -> the counter
        for k, (param, init) in enumerate(zip(self.body.inputs[2:], loop.inputs[2:])):
            start = self.values.get_int(init) if init is not None else None
            if start is None or 1 + k >= len(self.body.outputs):
                continue
            update = _peel(self.body.outputs[1 + k])
            if update is None or update.op_type != "Add" or param not in update.inputs:
                continue
            other = update.inputs[1] if update.inputs[0] is param else update.inputs[0]
            if self.values.get_int(_peel_value(other)) == 1:
                counters[param] = start
                step_of[update.outputs[0]] = param
        if _ITER in self.bounds or not loop.inputs or loop.inputs[0] is not None:
            return counters
        condition = _peel(self.body.outputs[0])
        if condition is None or condition.op_type != "Less" or condition.inputs[0] is None:
            return counters
        counter = step_of.get(condition.inputs[0])
        first = _peel(loop.inputs[1]) if len(loop.inputs) > 1 and loop.inputs[1] else None
        limit = condition.inputs[1]
        if counter is None or first is None or first.op_type != "Less" or limit is None:
            return counters
        if not self._is_outer(limit) or first.inputs[1] is not limit:
            return counters
        index = self.body.inputs.index(counter)
        if _peel_value(first.inputs[0]) is not _peel_value(loop.inputs[index]):
            return counters
        bound = self.content(limit)
        if bound is not None and len(bound) == 1:
            self.bounds[_ITER] = (0, sym.sub(bound[0], counters[counter] + 1))
        return counters

    def _bound_enclosing(self, loop: ir.Node) -> None:
        """The iteration number of each Loop around this one (through the Ifs between them),
        a value fixed while this loop runs, lies in `[0, M - 1]` for M that Loop's trip count:
        `for i in range(h // 2): for j in range(w // 2): x[2*i : 2*i + 2, 2*j : 2*j + 2]`
        (Swin's windows) cuts two rows, as `2*i + 2 <= 2 * (h // 2) <= h`."""
        graph = loop.graph
        while graph is not None:
            owner = self.owners.get(id(graph))
            if owner is None or owner.domain != "" or owner.op_type not in ("If", "Loop"):
                return
            trip = owner.inputs[0] if owner.op_type == "Loop" and owner.inputs else None
            if trip is not None and graph.inputs:
                count = self.content(trip)
                if count is not None and len(count) == 1:
                    atom = ("value", id(graph.inputs[0]), 0)  # its content here (`content`)
                    self.bounds[atom] = (0, sym.sub(count[0], 1))
            graph = owner.graph

    def _is_outer(self, value: ir.Value) -> bool:
        return id(value.graph) not in self._inside

    def _run(self) -> None:
        self._shapes, self._contents, self._invariant, self._reasons = {}, {}, {}, {}
        self._exact = {}
        for index, value in enumerate(self.body.inputs):
            self._invariant[value] = False
            if index < 2:
                self._shapes[value] = ()
                self._contents[value] = (sym.symbol(_ITER),) if index == 0 else None
                continue
            if value in self.counters:
                self._contents[value] = (sym.add(sym.symbol(_ITER), self.counters[value]),)
            self._shapes[value] = self.assumed.get(value)
            if not fixed(self._shapes[value]):
                self._reasons[value] = (
                    f"the loop-carried value '{value.name}' may change shape between iterations"
                )
        for value in self.body.initializers.values():
            self._invariant[value] = True
            self._shapes[value] = self.outer_shape(value)
            self._contents[value] = self._compute_content(value, outer=False)
        for node in self.body:
            self._visit(node)

    def input_shape(self, value: ir.Value | None) -> ShapeFact:
        """The shape of `value` as the shape rules read it: its dims may mention symbols that
        change between iterations (see `_exact`)."""
        if value is None:
            return ()
        exact = self._exact.get(value)
        return exact if exact is not None else self.shape(value)

    def element_dims(self, sequence: ir.Value) -> tuple | None:
        """The dims that every element of `sequence` shares, None where elements may differ;
        None when not even their rank is known."""
        if self._derived is not None and self._deriving:
            peeled: ir.Value | None = sequence
            while peeled is not None:  # the lists and the Identities read on the way
                self._note_read(peeled)
                producer = peeled.producer()
                if producer is None or producer.op_type not in ("Identity", "CastLike"):
                    break
                peeled = producer.inputs[0]
        node = _peel(sequence)
        if node is not None and node.domain == "" and self._depth >= _MAX_DEPTH:
            self._cuts += 1
        elif node is not None and node.domain == "":
            self._depth += 1
            try:
                found = self._produced_element_dims(node, _peel_value(sequence))
            finally:
                self._depth -= 1
            if found is not None:
                return found
        return None

    def _produced_element_dims(self, node: ir.Node, sequence: ir.Value | None) -> tuple | None:
        if node.op_type == "SplitToSequence" and len(node.inputs) > 1 and node.inputs[1]:
            data = self.outer_shape(node.inputs[0]) if node.inputs[0] is not None else None
            if not isinstance(data, tuple) or not data:
                return None
            axis = node.attributes.get_int("axis", 0) % len(data)
            return (*data[:axis], None, *data[axis + 1 :])
        if node.op_type != "Loop" or sequence is None or not self._is_outer(sequence):
            return None
        self._cuts += 1  # what a body gives is not remembered (`DerivedShapes`)
        # a list a Loop builds: its initial elements and what the body appends
        index = sequence.index()
        body = node.attributes["body"].as_graph()
        if index + 1 >= len(body.outputs) or index + 2 >= len(node.inputs):
            return None
        insert = _peel(body.outputs[1 + index])
        if (
            insert is None
            or insert.op_type != "SequenceInsert"
            or insert.inputs[0] is not body.inputs[2 + index]
            or insert.inputs[1] is None
        ):
            return None
        if id(node) not in self._producers:
            self._producers[id(node)] = LoopShapes(
                node, self.values, owners=self.owners, memo=self.memo
            )
        appended = self._producers[id(node)].shape(insert.inputs[1])
        if not isinstance(appended, tuple):
            return None
        initial = _peel(node.inputs[2 + index])
        if initial is not None and initial.op_type == "SequenceEmpty":
            return appended
        before = self.element_dims(node.inputs[2 + index])  # type: ignore[arg-type]
        return merge(before, appended)  # type: ignore[return-value]

    def element_symbol(self, value: ir.Value, axis: int) -> Dim:
        """A size that holds in this iteration only: dim `axis` of `value`; in every
        iteration where `value` is a list computed outside the body and assumed to hold
        elements of one shape (it is one list for the whole loop, so is its elements' shape)."""
        atom = (*ELEMENT_SIZE, id(value), axis)
        if not (value in self.uniform and self._is_outer(value)):
            self.varying.add(atom)
        return sym.symbol(atom)

    def invariant_value(self, value: ir.Value | None) -> bool:
        """True when `value` (not only its shape) is the same in every iteration."""
        if value is None:
            return True
        return self._invariant.get(value, self._is_outer(value))

    def _visit(self, node: ir.Node) -> None:
        plain = node.domain == "" and not has_subgraph(node)
        invariant = (
            plain
            and node.op_type not in _RANDOM_OPS
            and all(self.invariant_value(v) for v in node.inputs)
        )
        shapes: Sequence[ShapeFact] | None = None
        if node.op_type == "If" and node.domain == "":
            shapes = self._if_shapes(node)
        elif node.op_type == "Loop" and node.domain == "":
            shapes = self._nested_loop(node)
        elif plain:
            rule = SHAPE_RULES.get(node.op_type)
            try:
                shapes = rule(self, node) if rule is not None else None
            except (ValueError, IndexError, TypeError, ZeroDivisionError):
                shapes = None
        for index, output in enumerate(node.outputs):
            self._invariant[output] = invariant
            static = self.values.get(output)
            if static is not None:
                shape: ShapeFact = tuple(int(d) for d in static.shape)
            else:
                shape = shapes[index] if shapes is not None and index < len(shapes) else None
                if isinstance(shape, tuple):
                    if any(d is not None and self.varies(d) for d in shape):
                        self._exact[output] = shape
                    shape = tuple(None if d is None or self.varies(d) else d for d in shape)
                if invariant and not fixed(shape):
                    # computed from values fixed for the whole loop: so is its shape
                    shape = INVARIANT
                elif shape == INVARIANT and not self._sized_by_fixed_values(node):
                    shape = None
            self._shapes[output] = shape
            self._contents[output] = (
                self._compute_content(output, outer=False) if index == 0 else None
            )
            if not fixed(shape):
                self._reasons[output] = self._why(node, output)

    def _nested_loop(self, node: ir.Node) -> list[ShapeFact]:
        """The shapes of a Loop's outputs in this body: a carried tensor keeps the shape of its
        initial value here where the inner body keeps it (a running total that starts from
        `zeros_like(sample)`), proved by an analysis of the inner Loop that reads the shapes
        of the values outside it from this one, under the same hypotheses on the lists; its
        scan outputs are not analysed (None). The shape given is the initial value's as this
        analysis knows it, never the inner analysis's: where this one knows a dim in one
        iteration only (a slice `x[:, :i + 1]`), the inner one names it afresh, fixed while the
        inner Loop runs but not from one iteration of this one to the next."""
        shapes: list[ShapeFact] = [None] * len(node.outputs)
        if self._depth >= _MAX_DEPTH or self._nesting >= _MAX_NESTING:
            self._cuts += 1
            return shapes
        self._depth += 1
        try:
            inner = LoopShapes(
                node,
                self.values,
                elements=self.elements,
                uniform=self.uniform,
                owners=self.owners,
                outer=self.shape,
                nesting=self._nesting + 1,
            )
        finally:
            self._depth -= 1
        kept = inner.invariant_carried()
        body_inputs = inner.body.inputs[2:]
        for k in range(min(len(node.inputs) - 2, len(body_inputs), len(node.outputs))):
            initial = node.inputs[2 + k]
            if body_inputs[k] in kept and initial is not None:
                shapes[k] = self.input_shape(initial)
                self.nonempty_joins = True
        return shapes

    def _sized_by_fixed_values(self, node: ir.Node) -> bool:
        """False when the output shape of `node` depends on the content of a value that changes
        between iterations (Slice bounds, a Reshape target...)."""
        if node.op_type not in SIZED_BY_CONTENT:
            return True
        read = node.inputs if node.op_type in ("ConstantOfShape", "Range") else node.inputs[1:]
        return all(self.invariant_value(v) for v in read)

    def _if_shapes(self, node: ir.Node) -> list[ShapeFact]:
        """An If output keeps one shape when both branches give it the same symbolic shape, or
        when its condition is the same in every iteration and each branch gives it one shape
        (then the same branch runs in every iteration)."""
        outputs = []
        for attr in ("then_branch", "else_branch"):
            branch = node.attributes[attr].as_graph()
            for inner in branch:
                self._visit(inner)
            outputs.append([self.shape(v) for v in branch.outputs])
        merged = [merge(a, b) for a, b in zip(*outputs)]
        if not self.invariant_value(node.inputs[0]):
            return merged
        return [
            _chosen(node, index, m, a, b)
            for index, (m, a, b) in enumerate(zip(merged, *outputs, strict=True))
        ]

    def _compute_content(self, value: ir.Value, outer: bool) -> Content | None:
        array = self.values.get(value)
        if array is not None:
            if array.dtype.kind not in "iu" or array.ndim > 1 or array.size > _MAX_CONTENT:
                return None
            return tuple(int(x) for x in array.reshape(-1))
        shape = self.outer_shape(value) if outer else self._shapes.get(value)
        if not isinstance(shape, tuple):
            return None
        if len(shape) > 1 and not (
            all(isinstance(d, int) for d in shape) and math.prod(shape) <= _MAX_CONTENT
        ):
            return None  # contents are those of scalars, 1-D and small static tensors
        producer = value.producer()
        if producer is not None and producer.domain == "" and producer.outputs[0] is value:
            rule = CONTENT_RULES.get(producer.op_type)
            if producer.op_type not in ND_CONTENT_RULES and any(
                self._rank(v) != 0 and self._rank(v) != 1 for v in producer.inputs
            ):
                rule = None  # the rule reads its inputs' contents as vectors
            try:
                found = rule(self, producer) if rule is not None else None
            except (ValueError, IndexError, TypeError, ZeroDivisionError):
                found = None
            if found is not None:
                return found
        if (outer or self.invariant_value(value)) and all(isinstance(d, int) for d in shape):
            # a value fixed for the whole loop, its content unknown: one symbol per element
            return tuple(sym.symbol(("value", id(value), k)) for k in range(math.prod(shape)))
        return None

    def _rank(self, value: ir.Value | None) -> int | None:
        shape = self.input_shape(value) if value is not None else ()
        return len(shape) if isinstance(shape, tuple) else None

    def _why(self, node: ir.Node, output: ir.Value) -> str:
        for value in node.inputs:
            if value is not None and value in self._reasons:
                return self._reasons[value]
        if node.op_type == "SequenceAt":
            return f"'{output.name}' is an element of a sequence whose elements may differ in shape"
        for value in node.inputs:
            if value is not None and not self.invariant_value(value):
                return (
                    f"the shape of '{output.name}' ({node.op_type}) depends on '{value.name}', "
                    "whose value changes between iterations"
                )
        return f"the shape of '{output.name}' ({node.op_type}) is not analysed"

    def static_ints(self, value: ir.Value | None) -> list[int] | None:
        found = self.content(value)
        if found is None or not all(isinstance(d, int) for d in found):
            return None
        return list(found)


def _inserted(values: Collection[ir.Value]) -> list[ir.Value]:
    """The tensors SequenceInsert puts into the list `values` (its values made by inserts)."""
    found = []
    for value in values:
        producer = value.producer()
        if (
            producer is not None
            and producer.op_type == "SequenceInsert"
            and producer.domain == ""
            and len(producer.inputs) > 1
            and producer.inputs[1] is not None
        ):
            found.append(producer.inputs[1])
    return found


def _chosen(node: ir.Node, index: int, merged: ShapeFact, a: ShapeFact, b: ShapeFact) -> ShapeFact:
    """The shape of output `index` of the If `node` whose condition is the same in every
    iteration, given its branches' shapes `a` and `b` and their merge: where both are fixed, a
    dim on which they differ is a symbol of its own, fixed for the loop (the same branch runs
    in every iteration); where their ranks differ, one shape not known symbolically."""
    if fixed(merged) or not (fixed(a) and fixed(b)):
        return merged
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(
            x if x == y else sym.symbol(("if", id(node), index, k))
            for k, (x, y) in enumerate(zip(a, b, strict=True))
        )
    return INVARIANT
