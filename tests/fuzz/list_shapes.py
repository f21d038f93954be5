"""Program shapes for the last tier of the lowering (`seqlower.lists`), from seed LIST_SEEDS on.

Seeds below LIST_SEEDS give the generator's programs unchanged; from LIST_SEEDS on, the
generator's steps also draw these shapes (and its opset is 14 or newer, what the tensor form of
a list needs). Each shape emits into a `_Generator` and tracks the concrete values, as the
generator's own steps do, so the program is valid for its feeds (every position in range):

- `loop_builds_a_list`: a Loop appends (no position), prepends (position 0 or -n), inserts at
  a run-time position (i // 2, -(i // 2), SequenceLength; int32 too), appends under an If on a
  run-time condition (the iteration's parity, a run-time limit, a fed bool per iteration), or
  inserts and erases in turn; the inserted tensor changes shape per iteration (Slice(x, 0, i+1)
  on any axis, zero-size in the first iteration sometimes), ranks 0 to 4.
- `loops_pass_a_list`: a list built in one Loop is read by position in a later Loop (at i,
  n-1-i, -1-i or a run-time index), whose trip count may be SequenceLength of that list; the
  later Loop appends to a list of its own, sums, or gives scan outputs (Shape of each element);
  or the list is the later Loop's carried value, read at i and appended to.
- `if_gives_lists`: the branches build lists of different lengths and element shapes
  (SequenceConstruct, SequenceEmpty, SplitToSequence, a Loop), read at run-time positions.
- `list_of_scalars`: rank-0 elements (SplitToSequence with keepdims=0, a Loop of Slice +
  Reshape, SequenceConstruct), edited at run-time positions and stacked (new_axis=1).
- `split_then_edit`: SplitToSequence over a dim of run-time size (no split with keepdims 0/1,
  or a scalar or 1-D split fed at run time), then inserts, erases and reads at run-time
  positions (negative too), then ConcatFromSequence on an axis other than 0 or with new_axis=1.

Element types include bool, int8, float16 and string where onnxruntime runs the original: no
SplitToSequence of int8, no arithmetic on bool or string.
"""

from __future__ import annotations

__all__ = ["LIST_OPSETS", "LIST_SEEDS", "list_program_actions"]

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper

if TYPE_CHECKING:
    from generator import Seq, Tensor, _Generator

LIST_SEEDS = 1_000_000  # seeds from here on draw the shapes below
LIST_OPSETS = (14, 15, 16, 17, 18, 19, 20, 21)

ELEMENT_TYPES = (
    (np.float32, 6),
    (np.int64, 2),
    (np.int32, 1),
    (np.float16, 1),
    (np.float64, 1),
    (np.bool_, 1),
    (np.int8, 1),
    (np.object_, 1),  # string
)
ARITHMETIC = frozenset(
    np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int32, np.int64)
)


def list_program_actions(gen: _Generator) -> list[tuple[Callable[[], bool], float]]:
    """The list shapes, as (action, weight) for the generator's `step`."""
    shapes = _ListShapes(gen)
    return [
        (shapes.loop_builds_a_list, 8),
        (shapes.loops_pass_a_list, 7),
        (shapes.if_gives_lists, 5),
        (shapes.list_of_scalars, 3),
        (shapes.split_then_edit, 7),
    ]


def _seq_info(name: str, dtype: np.dtype) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, _onnx(dtype), None)


def _tensor_info(name: str, dtype: np.dtype, dims: list[Any] | None = None):
    return helper.make_tensor_value_info(name, _onnx(dtype), dims)


def _onnx(dtype: Any) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _prefix(value: np.ndarray, axis: int, stop: int) -> np.ndarray:
    index = [slice(None)] * value.ndim
    index[axis] = slice(0, stop)
    return value[tuple(index)]


class _ListShapes:
    def __init__(self, gen: _Generator) -> None:
        self.gen = gen
        self.rng = gen.rng

    # -- pieces ----------------------------------------------------------------------------

    def element_type(self, *, splittable: bool = False, arithmetic: bool = False) -> np.dtype:
        types, weights = zip(*ELEMENT_TYPES)
        while True:
            dtype = np.dtype(self.rng.choices(types, weights)[0])
            if splittable and dtype == np.int8:  # onnxruntime: no SplitToSequence of int8
                continue
            if arithmetic and dtype not in ARITHMETIC:
                continue
            if dtype == np.object_:
                self.gen.feature("list-dtype-string")
            elif dtype in (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.float16)):
                self.gen.feature(f"list-dtype-{dtype.name}")
            return dtype

    def rank(self, lowest: int = 0) -> int:
        rank = self.rng.choice([r for r in (0, 1, 1, 2, 2, 3, 4) if r >= lowest])
        if rank == 0:
            self.gen.feature("list-scalars")
        elif rank >= 3:
            self.gen.feature(f"list-rank-{rank}")
        return rank

    def shape(self, rank: int, zero_size: bool = False) -> tuple[int, ...]:
        top = 4 if rank < 4 else 3
        dims = [self.rng.randint(1, top) for _ in range(rank)]
        if zero_size and rank > 1 and self.gen.chance(0.1):
            self.gen.feature("list-zero-size-elements")
            dims[self.rng.randrange(rank)] = 0
        return tuple(dims)

    def source(self, dtype: np.dtype, shape: tuple[int, ...]) -> Tensor:
        """A main-graph tensor of `dtype` and `shape` (a new input or constant when none fits)."""
        gen = self.gen
        same = [t for t in gen.tensors if t.dtype == dtype and t.shape == shape]
        if same and gen.chance(0.4):
            return self.rng.choice(same)
        with gen.in_main_graph():
            return gen.new_input_tensor(dtype, shape)

    def runtime_int(self, value: int, feature: str = "") -> str:
        """A main-graph scalar model input fed `value` (int64, sometimes int32)."""
        gen = self.gen
        dtype = np.int64
        if gen.chance(0.25):
            dtype = np.int32
            gen.feature("list-position-int32")
        if value < 0:
            gen.feature("list-negative-position")
        if feature:
            gen.feature(feature)
        with gen.in_main_graph():
            return gen.model_input(np.array(value, dtype=dtype), declared=[])

    def position(self, value: int) -> str:
        """A run-time position in the main graph (sometimes any of the generator's forms)."""
        if self.gen.chance(0.75):
            return self.runtime_int(value)
        if value < 0:
            self.gen.feature("list-negative-position")
        return self.gen.scalar_operand(value)

    def unary(self, name: str, value: np.ndarray) -> tuple[str, np.ndarray]:
        """Some elementwise op the element type allows (or none)."""
        gen = self.gen
        if not gen.chance(0.5):
            return name, value
        if value.dtype == np.bool_:
            return gen.node("Not", [name]), np.logical_not(value)
        if value.dtype == np.object_:
            return gen.node("Identity", [name]), value
        return gen.node("Neg", [name]), np.negative(value).astype(value.dtype)

    def int_const(self, value: int) -> str:
        return self.gen.constant(np.array(value, dtype=np.int64))

    def one_d(self, scalar: str) -> str:
        return self.gen.node("Reshape", [scalar, self.gen.constant(np.array([1], np.int64))])

    def body_piece(
        self, x: Tensor, axis: int, i_name: str, shift: int
    ) -> tuple[str, Callable[[int], np.ndarray]]:
        """In a body: an element that changes shape with the iteration i.
        Rank >= 1: Slice(x, 0, i + shift) on `axis`. Rank 0 (x 1-D): x[i mod d] as a scalar."""
        gen = self.gen
        if x.value.ndim == 1 and axis < 0:  # a scalar element from a 1-D x
            d = x.shape[0]
            start = gen.node("Mod", [i_name, self.int_const(d)])
            stop = gen.node("Add", [start, self.int_const(1)])
            piece = gen.node(
                "Slice", [x.name, self.one_d(start), self.one_d(stop), gen.constant(np.array([0]))]
            )
            scalar = gen.node("Reshape", [piece, gen.constant(np.zeros((0,), np.int64))])
            return scalar, lambda k: np.asarray(x.value[k % d], dtype=x.dtype)
        stop = gen.node("Add", [i_name, self.int_const(shift)])
        piece = gen.node(
            "Slice",
            [x.name, gen.constant(np.array([0])), self.one_d(stop), gen.constant(np.array([axis]))],
        )
        return piece, lambda k: _prefix(x.value, axis, k + shift)

    def body(
        self,
        nodes: list[onnx.NodeProto],
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
    ) -> onnx.GraphProto:
        return helper.make_graph(nodes, self.gen.fresh("body"), inputs, outputs)

    def trip(self, count: int) -> str:
        """A trip count: a model input (run time) or a constant."""
        gen = self.gen
        if gen.chance(0.6):
            gen.feature("list-trip-input")
            with gen.in_main_graph():
                return gen.model_input(np.array(count, dtype=np.int64), declared=[])
        return gen.constant(np.array(count, dtype=np.int64))

    # -- readers ---------------------------------------------------------------------------

    def read(self, seq: Seq, *, at_least: int = 1) -> None:
        """Readers of a list in the main graph: At at a run-time position, ConcatFromSequence,
        SequenceLength, an insert at a run-time position then a read; at least `at_least`."""
        gen = self.gen
        done = 0
        for _ in range(8):
            if done >= at_least and not gen.chance(0.5):
                return
            kind = self.rng.choice(["at", "at", "concat", "concat", "length", "insert"])
            n = len(seq.elements)
            if kind == "at" and n:
                at = self.rng.randint(-n, n - 1)
                name = gen.node("SequenceAt", [seq.name, self.position(at)])
                gen.add_tensor(name, seq.elements[at], sink=True)
                gen.read_from_lists.add(name)
            elif kind == "concat" and gen.concat_axes(seq.elements):
                self.concat(seq)
            elif kind == "length":
                name = gen.node("SequenceLength", [seq.name])
                gen.add_tensor(name, np.array(n, dtype=np.int64), sink=True)
            elif kind == "insert" and n:
                like = seq.elements[self.rng.randrange(n)]
                tensor = self.source(seq.dtype, like.shape)
                at = self.rng.randint(-n, n)
                name = gen.node("SequenceInsert", [seq.name, tensor.name, self.position(at)])
                elements = list(seq.elements)
                elements.insert(at + n if at < 0 else at, tensor.value)
                seq = gen.add_seq(name, elements, seq.dtype)
                continue
            else:
                continue
            done += 1

    def concat(self, seq: Seq) -> bool:
        """ConcatFromSequence, preferring an axis other than 0 or new_axis=1."""
        gen = self.gen
        options = gen.concat_axes(seq.elements)
        if not options:
            return False
        preferred = [o for o in options if o[1] or o[0] not in (0, -seq.elements[0].ndim)]
        axis, new_axis = self.rng.choice(preferred if preferred and gen.chance(0.8) else options)
        attrs: dict[str, Any] = {"axis": axis}
        if new_axis or gen.chance(0.3):
            attrs["new_axis"] = new_axis
        gen.feature("list-concat-new-axis" if new_axis else f"list-concat-axis{int(axis != 0)}")
        name = gen.node("ConcatFromSequence", [seq.name], **attrs)
        value = np.stack(seq.elements, axis) if new_axis else np.concatenate(seq.elements, axis)
        gen.add_tensor(name, value, sink=True)
        gen.read_from_lists.add(name)
        return True

    # -- shapes ----------------------------------------------------------------------------

    def loop_builds_a_list(
        self, *, read: bool = True, dtype: np.dtype | None = None, rank: int | None = None
    ) -> Seq:
        """Loop(M, c, start) whose body inserts an element of changing shape into the list it
        carries: append, prepend, run-time position, under an If, or insert and erase in turn."""
        gen = self.gen
        dtype = dtype or self.element_type()
        rank = self.rank() if rank is None else rank
        if rank == 0:  # x[i mod d] of a 1-D x
            x = self.source(dtype, self.shape(1))
            axis = -1
        else:
            x = self.source(dtype, self.shape(rank, zero_size=True))
            axis = self.rng.randrange(rank)
        shift = 0 if rank and gen.chance(0.2) else 1
        mode = self.rng.choice(["append", "prepend", "position", "conditional", "erase"])
        gen.feature(f"list-loop-{mode}")
        count = self.rng.randint(0, 4)
        starts_empty = not gen.chance(0.3)
        # a while loop on the list's length: `while len(acc) < bound`, with or without a trip
        # count (without one only where every iteration inserts)
        bound: int | None = None
        trip: str | None = None
        if gen.chance(0.25):
            gen.feature("list-loop-while-length")
            n0 = 0 if starts_empty else 1
            if mode in ("append", "prepend", "position") and gen.chance(0.5):
                bound = self.rng.randint(n0 + 1, n0 + 4)
                count = bound - n0
                trip = ""
            else:
                bound = self.rng.randint(0, n0 + count + 1)
        if trip is None:
            trip = self.trip(count)
        flags_value = np.array([gen.chance(0.5) for _ in range(max(count, 1))])
        condition = self.rng.choice(["parity", "limit", "flags"])
        limit = self.rng.randint(0, count + 1)
        outer: str | None = None
        if mode == "conditional" and condition == "limit":
            with gen.in_main_graph():
                outer = gen.model_input(np.array(limit, np.int64), declared=[])
        elif mode == "conditional" and condition == "flags":
            gen.feature("list-loop-fed-condition")
            with gen.in_main_graph():
                outer = gen.model_input(flags_value, declared=[gen.fresh("flags")])
        initial: list[np.ndarray] = []
        if not starts_empty:
            first = x if rank else self.source(dtype, ())
            start = gen.node("SequenceConstruct", [first.name])
            initial = [first.value]
        else:
            start = gen.node("SequenceEmpty", [], dtype=_onnx(dtype))
        i_info, cond_info, i_name, cond_name = gen.loop_header()
        acc = gen.fresh("acc")
        gen.node_stack.append([])
        piece, piece_of = self.body_piece(x, axis, i_name, shift)
        element, _ = self.unary(piece, x.value)
        negated = element != piece

        def value_of(k: int) -> np.ndarray:
            value = piece_of(k)
            if not negated:
                return value
            if value.dtype == np.bool_:
                return np.logical_not(value)
            if value.dtype == np.object_:
                return value
            return np.negative(value).astype(value.dtype)

        step: Callable[[int, list[np.ndarray]], None]
        if mode == "append":
            result = gen.node("SequenceInsert", [acc, element])

            def step(k: int, elements: list[np.ndarray]) -> None:
                elements.append(value_of(k))
        elif mode == "prepend":
            if gen.chance(0.5):
                front = gen.node("Neg", [gen.node("SequenceLength", [acc])])  # -n
            else:
                front = gen.constant(np.array(0, dtype=self.rng.choice([np.int64, np.int32])))
            result = gen.node("SequenceInsert", [acc, element, front])

            def step(k: int, elements: list[np.ndarray]) -> None:
                elements.insert(0, value_of(k))
        elif mode == "position":
            half = gen.node("Div", [i_name, self.int_const(2)])
            form = self.rng.choice(["half", "negative-half", "length"])
            if form == "half":
                at = half
            elif form == "negative-half":
                gen.feature("list-negative-position")
                at = gen.node("Neg", [half])
            else:
                at = gen.node("SequenceLength", [acc])
            if gen.chance(0.3):
                gen.feature("list-position-int32")
                at = gen.node("Cast", [at], to=TensorProto.INT32)
            result = gen.node("SequenceInsert", [acc, element, at])

            def step(k: int, elements: list[np.ndarray]) -> None:
                n = len(elements)
                p = {"half": k // 2, "negative-half": -(k // 2), "length": n}[form]
                p = p + n if p < 0 else p
                elements.insert(p, value_of(k))
        else:
            if mode == "erase" or condition == "parity":
                parity = gen.node("Mod", [i_name, self.int_const(2)])
                keep = gen.node("Equal", [parity, self.int_const(0)])
                kept = [k % 2 == 0 for k in range(count)]
            elif condition == "limit":
                keep = gen.node("Less", [i_name, outer])  # type: ignore[list-item]
                kept = [k < limit for k in range(count)]
            else:
                keep = gen.node("Gather", [outer, i_name])  # type: ignore[list-item]
                kept = [bool(flags_value[k]) for k in range(count)]
            at_front = gen.chance(0.3)

            def inserting():  # type: ignore[no-untyped-def]
                inputs = [acc, element] + ([gen.constant(np.array(0))] if at_front else [])
                name = gen.node("SequenceInsert", inputs)
                return [_seq_info(name, dtype)], None

            erase_at = self.rng.choice([None, 0, -1])

            def other():  # type: ignore[no-untyped-def]
                if mode == "erase":
                    at = [] if erase_at is None else [gen.constant(np.array(erase_at))]
                    inputs = [acc, *at]
                    name = gen.node("SequenceErase", inputs)
                else:
                    name = gen.node("Identity", [acc])
                return [_seq_info(name, dtype)], None

            then_graph, _ = gen.branch(inserting)
            else_graph, _ = gen.branch(other)
            result = gen.node("If", [keep], then_branch=then_graph, else_branch=else_graph)

            def step(k: int, elements: list[np.ndarray]) -> None:
                if kept[k]:
                    elements.insert(0 if at_front else len(elements), value_of(k))
                elif mode == "erase":
                    del elements[-1 if erase_at is None else erase_at]

        if bound is None:
            cond_out = gen.node("Identity", [cond_name])
        else:
            with gen.in_main_graph():
                limit_name = gen.model_input(np.array(bound, np.int64), declared=[])
            cond_out = gen.node("Less", [gen.node("SequenceLength", [result]), limit_name])
        elements = list(initial)
        for k in range(count):
            step(k, elements)
            if bound is not None and len(elements) >= bound:
                break
        body = self.body(
            gen.node_stack.pop(),
            [i_info, cond_info, _seq_info(acc, dtype)],
            [_tensor_info(cond_out, np.dtype(np.bool_), []), _seq_info(result, dtype)],
        )
        # without a trip count the condition input is needed (with neither, the loop is endless)
        first_cond = gen.loop_condition() if trip else gen.constant(np.array(True))
        final = gen.node("Loop", [trip, first_cond, start], body=body)
        seq = gen.add_seq(final, elements, dtype)
        if read:
            self.read(seq)
        return seq

    def loops_pass_a_list(self) -> bool:
        """A list built in one Loop, read by position in a later Loop."""
        gen = self.gen
        gen.feature("list-between-loops")
        rank = self.rank()
        source = self.loop_builds_a_list(read=gen.chance(0.3), rank=rank)
        n = len(source.elements)
        if gen.chance(0.25) and n:
            return self.carried_and_read(source)
        if gen.chance(0.5):
            gen.feature("list-trip-from-length")
            trip, count = gen.node("SequenceLength", [source.name]), n
        else:
            count = self.rng.randint(0, n)
            trip = self.trip(count)
        kind = self.rng.choice(["i", "backwards", "negative", "runtime"] if n else ["i"])
        index = self.rng.randint(-n, n - 1) if n else 0
        outer = self.runtime_int(index, "list-read-runtime-index") if kind == "runtime" else None
        consumer = self.rng.choice(["append", "sum", "scan"] if count else ["append", "sum"])
        positions = {
            "i": list(range(count)),
            "backwards": [n - 1 - k for k in range(count)],
            "negative": [-1 - k for k in range(count)],
            "runtime": [index] * count,
        }[kind]
        read = [source.elements[p] for p in positions]
        if consumer == "sum" and not all(e.size for e in read):
            consumer = "scan"  # onnxruntime: no ReduceSum over an empty tensor
        gen.feature(f"list-read-{kind}")
        gen.feature(f"list-later-loop-{consumer}")
        i_info, cond_info, i_name, cond_name = gen.loop_header()
        carried = gen.fresh("carried")
        dtype = source.dtype
        start, carried_info = "", None
        if consumer == "append":
            start = gen.node("SequenceEmpty", [], dtype=_onnx(dtype))
            carried_info = _seq_info(carried, dtype)
        elif consumer == "sum":
            start = gen.constant(np.array(0, np.float32))
            carried_info = _tensor_info(carried, np.dtype(np.float32), [])
        gen.node_stack.append([])
        if kind == "i":
            at = i_name
        elif kind == "backwards":
            gen.feature("list-read-backwards")
            last = gen.node("Sub", [gen.node("SequenceLength", [source.name]), self.int_const(1)])
            at = gen.node("Sub", [last, i_name])
        elif kind == "negative":
            at = gen.node("Sub", [self.int_const(-1), i_name])
        else:
            at = gen.node("Identity", [outer])
        element = gen.node("SequenceAt", [source.name, at])
        cond_out = gen.node("Identity", [cond_name])
        outputs = [_tensor_info(cond_out, np.dtype(np.bool_), [])]
        if consumer == "append":
            changed, _ = self.unary(element, np.zeros((), dtype))
            negate = changed != element
            out = gen.node("SequenceInsert", [carried, changed])
            outputs.append(_seq_info(out, dtype))
            values = [self.apply_unary(e, negate) for e in read]
        elif consumer == "sum":
            as_float = gen.node("Cast", [element], to=TensorProto.FLOAT)
            out = gen.node("Add", [carried, gen.node("ReduceSum", [as_float], keepdims=0)])
            outputs.append(_tensor_info(out, np.dtype(np.float32), []))
        else:
            out = gen.node("Shape", [element])
            outputs.append(_tensor_info(out, np.dtype(np.int64), None))
        body = self.body(
            gen.node_stack.pop(),
            [i_info, cond_info] + ([carried_info] if consumer != "scan" else []),
            outputs,
        )
        inputs = [trip, gen.loop_condition()] + ([start] if consumer != "scan" else [])
        result = gen.node("Loop", inputs, body=body)
        if consumer == "append":
            self.read(gen.add_seq(result, values, dtype))
        elif consumer == "sum":
            total = np.float32(0)
            for e in read:
                total = np.float32(total + np.float32(e.astype(np.float32).sum()))
            gen.add_tensor(result, np.array(total, np.float32), sink=True)
        else:
            stacked = np.array([e.shape for e in read], dtype=np.int64).reshape(count, rank)
            gen.add_tensor(result, stacked, sink=True)
        return True

    def apply_unary(self, value: np.ndarray, negate: bool) -> np.ndarray:
        if not negate:
            return value
        if value.dtype == np.bool_:
            return np.logical_not(value)
        if value.dtype == np.object_:
            return value
        return np.negative(value).astype(value.dtype)

    def carried_and_read(self, source: Seq) -> bool:
        """Loop(M, c, source) whose body appends a function of SequenceAt(acc, i): the carried
        list is read by position while it grows."""
        gen = self.gen
        gen.feature("list-carried-read")
        count = self.rng.randint(0, 4)
        trip = self.trip(count)
        i_info, cond_info, i_name, cond_name = gen.loop_header()
        acc = gen.fresh("acc")
        gen.node_stack.append([])
        element = gen.node("SequenceAt", [acc, i_name])
        changed, _ = self.unary(element, source.elements[0])
        negate = changed != element
        out = gen.node("SequenceInsert", [acc, changed])
        cond_out = gen.node("Identity", [cond_name])
        body = self.body(
            gen.node_stack.pop(),
            [i_info, cond_info, _seq_info(acc, source.dtype)],
            [_tensor_info(cond_out, np.dtype(np.bool_), []), _seq_info(out, source.dtype)],
        )
        result = gen.node("Loop", [trip, gen.loop_condition(), source.name], body=body)
        elements = list(source.elements)
        for k in range(count):
            elements.append(self.apply_unary(elements[k], negate))
        self.read(gen.add_seq(result, elements, source.dtype))
        return True

    def if_gives_lists(self) -> bool:
        """If(c) returning lists of different lengths and element shapes from its branches."""
        gen = self.gen
        gen.feature("list-if-different")
        dtype = self.element_type()
        rank = self.rank()
        cond, taken = gen.condition()
        kinds = ["construct", "construct", "empty", "loop"]
        if dtype != np.int8:
            kinds.append("split")
        chosen = [self.rng.choice(kinds), self.rng.choice(kinds)]

        def build(kind: str):  # type: ignore[no-untyped-def]
            def make() -> tuple[list[onnx.ValueInfoProto], list[np.ndarray]]:
                gen.feature(f"list-if-{kind}")
                if kind == "construct":
                    with gen.in_main_graph():
                        members = [
                            self.source(dtype, self.shape(rank))
                            for _ in range(self.rng.randint(1, 3))
                        ]
                    name = gen.node("SequenceConstruct", [t.name for t in members])
                    values = [t.value for t in members]
                elif kind == "empty":
                    name = gen.node("SequenceEmpty", [], dtype=_onnx(dtype))
                    values = []
                elif kind == "split":
                    keepdims = gen.chance(0.5) and rank > 0
                    shape = self.shape(rank if keepdims else rank + 1)
                    with gen.in_main_graph():
                        x = self.source(dtype, shape)
                    axis = self.rng.randrange(len(shape))
                    attrs = {"axis": axis, "keepdims": int(keepdims)}
                    name = gen.node("SplitToSequence", [x.name], **attrs)
                    parts = np.split(x.value, shape[axis], axis=axis)
                    values = parts if keepdims else [np.squeeze(p, axis) for p in parts]
                else:
                    name, values = self.loop_in_branch(dtype, rank)
                return [_seq_info(name, dtype)], values

            return make

        then_graph, then_values = gen.branch(build(chosen[0]))
        else_graph, else_values = gen.branch(build(chosen[1]))
        name = gen.node("If", [cond], then_branch=then_graph, else_branch=else_graph)
        self.read(gen.add_seq(name, then_values if taken else else_values, dtype))
        return True

    def loop_in_branch(self, dtype: np.dtype, rank: int) -> tuple[str, list[np.ndarray]]:
        """In a branch: a Loop of constant trip count appending Slice(x, 0, i + 1)."""
        gen = self.gen
        with gen.in_main_graph():
            x = self.source(dtype, self.shape(max(rank, 1)))
        count = self.rng.randint(0, 3)
        i_info, cond_info, i_name, cond_name = gen.loop_header()
        acc = gen.fresh("acc")
        gen.node_stack.append([])
        piece, piece_of = self.body_piece(x, 0 if rank else -1, i_name, 1)
        out = gen.node("SequenceInsert", [acc, piece])
        cond_out = gen.node("Identity", [cond_name])
        body = self.body(
            gen.node_stack.pop(),
            [i_info, cond_info, _seq_info(acc, dtype)],
            [_tensor_info(cond_out, np.dtype(np.bool_), []), _seq_info(out, dtype)],
        )
        start = gen.node("SequenceEmpty", [], dtype=_onnx(dtype))
        trip = gen.constant(np.array(count, np.int64))
        result = gen.node("Loop", [trip, "", start], body=body)
        return result, [piece_of(k) for k in range(count)]

    def list_of_scalars(self) -> bool:
        """A list of rank-0 elements, edited at run-time positions and stacked."""
        gen = self.gen
        gen.feature("list-scalars")
        kind = self.rng.choice(["split", "loop", "construct"])
        dtype = self.element_type(splittable=kind == "split")
        if kind == "split":
            x = self.source(dtype, (self.rng.randint(1, 5),))
            attrs: dict[str, Any] = {"keepdims": 0}
            if gen.chance(0.5):
                attrs["axis"] = self.rng.choice([0, -1])
            name = gen.node("SplitToSequence", [x.name], **attrs)
            seq = gen.add_seq(name, [np.asarray(v, dtype=dtype) for v in x.value], dtype)
        elif kind == "loop":
            seq = self.loop_builds_a_list(read=False, dtype=dtype, rank=0)
        else:
            members = [self.source(dtype, ()) for _ in range(self.rng.randint(1, 4))]
            name = gen.node("SequenceConstruct", [t.name for t in members])
            seq = gen.add_seq(name, [t.value for t in members], dtype)
        for _ in range(self.rng.randint(0, 2)):
            n = len(seq.elements)
            if gen.chance(0.6) or not n:
                tensor = self.source(dtype, ())
                at = self.rng.randint(-n, n)
                name = gen.node("SequenceInsert", [seq.name, tensor.name, self.position(at)])
                elements = list(seq.elements)
                elements.insert(at + n if at < 0 else at, tensor.value)
            else:
                at = self.rng.randint(-n, n - 1)
                name = gen.node("SequenceErase", [seq.name, self.position(at)])
                elements = list(seq.elements)
                del elements[at]
            seq = gen.add_seq(name, elements, dtype)
        if seq.elements and gen.chance(0.7):
            self.concat(seq)
        self.read(seq)
        return True

    def split_then_edit(self) -> bool:
        """SplitToSequence over a dim of run-time size, then edits at run-time positions, then
        ConcatFromSequence."""
        gen = self.gen
        dtype = self.element_type(splittable=True)
        rank = self.rank(lowest=1)
        shape = self.shape(rank, zero_size=True)
        axis = self.rng.choice([a for a in range(rank) if shape[a] > 0])
        dim = shape[axis]
        array = gen.random_array(dtype, shape)
        declared = gen.declared_dims(shape) or list(shape)
        declared[axis] = gen.fresh("dim")  # the split dim is known at run time only
        with gen.in_main_graph():
            x = gen.add_tensor(gen.model_input(array, declared=declared), array)
        declared_axis = axis - rank if gen.chance(0.3) else axis
        attrs: dict[str, Any] = {"axis": declared_axis}
        inputs = [x.name]
        kind = self.rng.choice(["none", "scalar", "list"])
        gen.feature(f"list-split-{kind}")
        if kind == "none":
            keepdims = self.rng.choice([0, 1])
            attrs["keepdims"] = keepdims
            gen.feature(f"list-split-none-keepdims{keepdims}")
            chunks = np.split(array, dim, axis=axis)
            if not keepdims:
                chunks = [np.squeeze(c, axis) for c in chunks]
        elif kind == "scalar":
            size = self.rng.randint(1, dim)
            if gen.chance(0.5):
                attrs["keepdims"] = 1
            inputs.append(self.runtime_int(size))
            chunks = np.split(array, list(range(size, dim, size)), axis=axis)
        else:
            count = self.rng.randint(1, 4)
            cuts = sorted(self.rng.randint(0, dim) for _ in range(count - 1))
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim])]
            if gen.chance(0.3):
                attrs["keepdims"] = 0  # ignored with a 1-D split
            sizes_dtype = np.int64 if gen.chance(0.8) else np.int32
            with gen.in_main_graph():
                inputs.append(
                    gen.model_input(np.array(sizes, sizes_dtype), declared=[gen.fresh("count")])
                )
            chunks = np.split(array, np.cumsum(sizes)[:-1].tolist(), axis=axis)
        name = gen.node("SplitToSequence", inputs, **attrs)
        seq = gen.add_seq(name, chunks, dtype)
        for _ in range(self.rng.randint(1, 3)):
            n = len(seq.elements)
            edit = self.rng.choice(["insert", "insert", "erase", "at"])
            if edit == "insert" or not n:
                like = seq.elements[self.rng.randrange(n)].shape if n else chunks[0].shape
                if gen.chance(0.3):
                    like = self.shape(len(like))
                tensor = self.source(dtype, like)
                at = self.rng.randint(-n, n)
                name = gen.node("SequenceInsert", [seq.name, tensor.name, self.position(at)])
                elements = list(seq.elements)
                elements.insert(at + n if at < 0 else at, tensor.value)
                seq = gen.add_seq(name, elements, dtype)
            elif edit == "erase":
                at = self.rng.randint(-n, n - 1)
                name = gen.node("SequenceErase", [seq.name, self.position(at)])
                elements = list(seq.elements)
                del elements[at]
                seq = gen.add_seq(name, elements, dtype)
            else:
                at = self.rng.randint(-n, n - 1)
                name = gen.node("SequenceAt", [seq.name, self.position(at)])
                gen.add_tensor(name, seq.elements[at], sink=True)
                gen.read_from_lists.add(name)
        if not self.concat(seq):
            self.read(seq)
        return True
