"""The shapes the Loop shape analysis derived for values outside a body (or found it could not
derive), remembered across analyses while what they are computed from stays as it was.

The analysis of a Loop (`LoopShapes`) derives the shape of a value outside the body, where
inference left dims without a name, from its producer's shape rule, and that rule reads the
shapes and contents of the producer's inputs, derived the same way, up to a depth. Each analysis
did so afresh: in a chain of K Loops in one body, each lowered in turn to Concats and Reshapes
before the next is analysed, every analysis walked back through the same values the one before
had walked (64 levels deep, some 300 steps each), and between two analyses a rewrite happens,
so nothing keyed to the model's generation lasts.

A `DerivedShapes` keeps, per value, what the derivation from its producer gave: a shape of
dims over the sizes of outer values (`("dim", ...)`, `("param", ...)`, `("value", ...)`
atoms, which mean the same in every analysis), or None (the analysis then takes the declared
shape, as it does whenever a derivation fails), with the dim sources it noted. Only what an
analysis without hypotheses found without stopping at its depth limit or at a Loop is kept, so
that the answer does not depend on where in a derivation the value was met. A derivation that
meets a value remembered here stops there: a chain of Loops lowered one after another is
derived one link per analysis (what the links before gave is then not cut by the depth limit:
the answer is the one a derivation without a limit gives).

What each derivation read is noted (the shapes and contents of other outer values, the lists
whose elements it asked about), and `forget_downstream` forgets every answer computed from the
outputs of the nodes a rewrite emitted, rewired or rebuilt, transitively. An answer whose
producer, producer's inputs or declared shapes changed without that is not used either
(`known` checks them).
"""

from __future__ import annotations

__all__ = ["DerivedShapes"]

from collections.abc import Hashable, Iterable

import onnx_ir as ir

Sources = tuple[tuple[Hashable, tuple[ir.Value, int]], ...]


class _Entry:
    """A derived shape (None: none), what it was computed from, and the dim sources noted."""

    __slots__ = ("derived", "input_shapes", "inputs", "producer", "shape", "sources")

    def __init__(
        self, value: ir.Value, producer: ir.Node, derived: tuple | None, sources: Sources
    ) -> None:
        self.derived = derived
        self.producer = producer
        self.inputs = tuple(producer.inputs)
        self.shape = _dims(value)
        self.input_shapes = tuple(_dims(v) for v in self.inputs)
        self.sources = sources

    def holds(self, value: ir.Value) -> bool:
        producer = self.producer
        return (
            value.producer() is producer
            and producer.graph is not None
            and _same(producer.inputs, self.inputs)
            and _dims(value) == self.shape
            and all(_dims(v) == dims for v, dims in zip(self.inputs, self.input_shapes))
        )


def _dims(value: ir.Value | None) -> tuple | None:
    shape = value.shape if value is not None else None
    return tuple(shape) if shape is not None else None


def _same(values: Iterable[ir.Value | None], recorded: tuple[ir.Value | None, ...]) -> bool:
    values = tuple(values)
    return len(values) == len(recorded) and all(a is b for a, b in zip(values, recorded))


class DerivedShapes:
    """The shapes derived for outer values, or that none is, for one `StaticValues` (see the
    module docstring). The caller that rewrites the model calls `forget_downstream` after each
    rewrite; a model changed without it must not be asked again with this memo."""

    def __init__(self) -> None:
        self._known: dict[ir.Value, _Entry] = {}
        # value -> the derived values whose producer reads it (the edges of the walk back)
        self._readers: dict[ir.Value, set[ir.Value]] = {}

    def __len__(self) -> int:
        return len(self._known)

    def known(self, value: ir.Value) -> tuple[tuple | None, Sources] | None:
        """What the derivation of `value` from its producer gave (a shape, or None for none)
        and the dim sources (atom, (value, axis)) it noted, in order; None when not known."""
        entry = self._known.get(value)
        if entry is None:
            return None
        if not entry.holds(value):
            del self._known[value]
            return None
        return entry.derived, entry.sources

    def remember(self, value: ir.Value, derived: tuple | None, sources: Sources) -> None:
        """Note what the derivation of `value` from its producer gave (found without reaching a
        depth limit, by an analysis without hypotheses), and the dim sources it noted."""
        producer = value.producer()
        if producer is not None:
            self._known[value] = _Entry(value, producer, derived, sources)

    def note_read(self, read: ir.Value, reader: ir.Value) -> None:
        """Note that the derivation of `reader` (its shape or content) read what is known of
        `read`: a change that reaches `read` reaches it (`forget_downstream`)."""
        self._readers.setdefault(read, set()).add(reader)

    def forget_downstream(self, nodes: Iterable[ir.Node]) -> None:
        """Forget every answer derived, directly or through other derived values, from an
        output of `nodes` (the nodes a rewrite emitted, rewired or rebuilt)."""
        if not self._readers and not self._known:
            return
        stack = [output for node in nodes for output in node.outputs]
        while stack:
            value = stack.pop()
            self._known.pop(value, None)
            readers = self._readers.pop(value, None)
            if readers:
                stack.extend(readers)
