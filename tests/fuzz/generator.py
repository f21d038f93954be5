"""A seeded generator of random, valid ONNX programs over the sequence operators.

    program = generate(seed)          # deterministic: the same seed gives the same bytes
    program.model                     # onnx.ModelProto (opset 11-21, IR version 8-10)
    program.feeds                     # {input name: numpy array, or list of arrays}
    program.expected                  # the outputs, computed by a numpy oracle alongside

Each program is a random chain over SequenceConstruct, SequenceEmpty, SequenceInsert (no
position, negative positions, position == n), SequenceErase (default, negative), SequenceAt
(negative too), SequenceLength, SplitToSequence (no split with keepdims 0/1, scalar split
including non-dividing ones, 1-D split including zero-size chunks, negative axes), and
ConcatFromSequence (axis / new_axis, negative axes); SequenceMap with small random bodies
(elementwise ops, MatMul with a constant weight, ReduceSum, Transpose, Cast, an extra tensor input,
an outer-scope value, a second zipped sequence, sequence ops and rarely a nested SequenceMap);
sequences built or read inside If (constant or run-time condition; a SequenceMap in a branch) and
Loop (the append pattern: a carried sequence that starts empty, or not, and gets one
SequenceInsert per iteration, with SequenceLength of the carried sequence or an If in the body;
reading an outer sequence with SequenceAt(seq, i); scan outputs); Loops whose list length is known
only at run time (a `while` on a run-time limit carrying h = h * 0.5 or h + 1, prepends, appends
under an If on a run-time condition: `op_loop_dynamic_append`); sequence-typed model inputs and
outputs.

The generator tracks the concrete value of every tensor and sequence while it builds (the feeds
are drawn first), so every program is valid for onnxruntime on its feeds: positions are in range,
concatenated elements fit, zipped sequences have the same length. The tracked values of the
outputs are the numpy oracle, used when onnxruntime cannot run the original (design.md trap 11:
a nested SequenceMap, float16 ops in a SequenceMap body); `Program.ort_may_reject` says why.

Dims of model inputs are declared static or symbolic at random, and positions, split sizes and
trip counts come as constants, initializers, model inputs (fed with valid values), initializers
that are also model inputs (overridable: fed with a value that differs from the initializer), or
arithmetic on SequenceLength. Dtypes are mostly float32, some float16/double/int32/int64/bool.
Floats are small multiples of 1/4, so sums and products are exact in every float type.

Seeds from LIST_SEEDS (1,000,000) on also draw the list programs of list_shapes.py (lists built
in loops from tensors of changing shapes, passed between loops, returned from If branches, split
at run time and edited at run-time positions; bool, int8, float16 and string elements), at opset
14 or newer; seeds below it give the same programs as before those shapes existed.

The ambiguous corner of design.md trap 1 (scalar split with keepdims=0) appears only with split=1,
read as onnxruntime reads it (the axis squeezed), which is seqlower's default reading.
"""

from __future__ import annotations

__all__ = ["Program", "generate"]

import contextlib
import dataclasses
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
from list_shapes import LIST_OPSETS, LIST_SEEDS, list_program_actions
from onnx import TensorProto, helper, numpy_helper

OPSETS = (11, 12, 13, 15, 16, 17, 18, 19, 20, 21)
MAP_MIN_OPSET = 17  # SequenceMap appears in opset 17

FLOAT_TYPES = (np.float32, np.float64, np.float16)
NUMERIC_TYPES = (*FLOAT_TYPES, np.int32, np.int64)
DTYPE_WEIGHTS = (
    (np.float32, 12),
    (np.int64, 2),
    (np.int32, 1),
    (np.float64, 1),
    (np.float16, 1),
    (np.bool_, 1),
)


@dataclasses.dataclass
class Program:
    """A generated model with its feeds and its expected outputs (the numpy oracle)."""

    seed: int
    model: onnx.ModelProto
    feeds: dict[str, Any]
    expected: list[Any]
    features: list[str]
    ort_may_reject: str | None = None
    # a SplitToSequence in the scalar-split/keepdims=0 corner (split = 1, static), read the
    # onnxruntime way; onnx shape inference reads it the spec's way, so the full check of the
    # original may fail on shapes downstream
    keepdims_corner: bool = False
    # keyword options for seqlower.optimize (e.g. a target that asks for portable rewrites)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Tensor:
    name: str
    value: np.ndarray
    static: bool = False  # a constant or a trusted initializer: its content is known

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


@dataclasses.dataclass
class Seq:
    name: str
    elements: list[np.ndarray]
    dtype: np.dtype


def generate(seed: int) -> Program:
    """The program of `seed` (deterministic)."""
    return _Generator(seed).build()


def onnx_dtype(dtype: Any) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class _Generator:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.opset = self.rng.choice(OPSETS)
        # from LIST_SEEDS on, the shapes of list_shapes.py too (seeds below: programs unchanged)
        self.list_programs = seed >= LIST_SEEDS
        if self.list_programs:
            self.opset = self.rng.choice(LIST_OPSETS)
        self.counter = 0
        self.node_stack: list[list[onnx.NodeProto]] = [[]]
        self.inputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.feeds: dict[str, Any] = {}
        self.tensors: list[Tensor] = []
        self.seqs: list[Seq] = []
        self.sinks: list[Tensor | Seq] = []  # values worth making outputs
        self.features: list[str] = []
        self.ort_may_reject: str | None = None
        self.keepdims_corner = False
        self.options: dict[str, Any] = {}
        # tensors read from a list: onnx shape inference may give them the element shape of a
        # loop's initial list, so no split with static sizes is checked against them
        self.read_from_lists: set[str] = set()
        self.dtype_pool = [self._pick_dtype() for _ in range(2)]
        # onnx shape inference (the checker's) reads an overridable initializer as a constant, so
        # a program that has one declares no static shape that could depend on its value
        self.allow_overridable = self.chance(0.3)

    # -- small helpers --------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def feature(self, name: str) -> None:
        if name not in self.features:
            self.features.append(name)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def _pick_dtype(self) -> np.dtype:
        types, weights = zip(*DTYPE_WEIGHTS)
        return np.dtype(self.rng.choices(types, weights)[0])

    def node(self, op: str, inputs: list[str], outputs: int | list[str] = 1, **attrs: Any):
        names = (
            [self.fresh(op.lower()[:6] + "_") for _ in range(outputs)]
            if isinstance(outputs, int)
            else outputs
        )
        self.node_stack[-1].append(
            helper.make_node(op, inputs, names, name=self.fresh(f"n_{op}_"), **attrs)
        )
        return names[0] if len(names) == 1 else names

    def random_array(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        nrng = np.random.default_rng(self.rng.getrandbits(32))
        if dtype == np.bool_:
            return np.asarray(nrng.integers(0, 2, size=shape)).astype(np.bool_)
        if dtype == np.object_:  # strings
            words = nrng.integers(-5, 6, size=shape).astype(str).astype(object)
            return np.asarray(words, dtype=object).reshape(shape)
        if dtype.kind == "f":
            return np.asarray(nrng.integers(-8, 9, size=shape) / 4).astype(dtype)
        return np.asarray(nrng.integers(-5, 6, size=shape)).astype(dtype)

    def random_shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.rng.choice([1, 1, 2, 2, 2, 3]) if rank is None else rank
        return tuple(self.rng.randint(1, 4) for _ in range(rank))

    def declared_dims(self, shape: tuple[int, ...]) -> list[Any] | None:
        """Static, symbolic or unknown dims for a model input of `shape`."""
        style = self.rng.choices(["static", "mixed", "symbolic"], [5, 3, 2])[0]
        if style == "static":
            return list(shape)
        if style == "symbolic":
            self.feature("symbolic-dims")
            return [self.fresh("dim") for _ in shape]
        self.feature("symbolic-dims")
        return [
            d if self.chance(0.5) else (self.fresh("dim") if self.chance(0.7) else None)
            for d in shape
        ]

    def constant(self, array: np.ndarray, form: str | None = None) -> str:
        """A static tensor as a Constant node (any graph) or an initializer (main graph)."""
        array = np.asarray(array)
        in_subgraph = len(self.node_stack) > 1
        form = form or ("node" if in_subgraph or self.chance(0.6) else "init")
        if form == "init" and not in_subgraph:
            name = self.fresh("init")
            self.initializers.append(numpy_helper.from_array(array, name))
            return name
        return self.node("Constant", [], value=numpy_helper.from_array(array, self.fresh("c")))

    def model_input(self, array: np.ndarray, declared: list[Any] | None = None) -> str:
        name = self.fresh("in")
        dims = self.declared_dims(array.shape) if declared is None else declared
        self.inputs.append(helper.make_tensor_value_info(name, onnx_dtype(array.dtype), dims))
        self.feeds[name] = array
        return name

    def scalar_operand(
        self,
        value: int,
        *,
        allow_input: bool = True,
        overridable: bool = True,
        int64_only: bool = False,
        minimum: int = -9,
    ) -> str:
        """An integer scalar given in one of many forms (see the module docstring)."""
        dtype = np.int64 if int64_only or self.chance(0.8) else np.int32
        array = np.array(value, dtype=dtype)
        forms = ["node", "init"] + (["input", "input"] if allow_input else [])
        if allow_input and overridable and self.allow_overridable:
            forms.append("overridable")
        if len(self.node_stack) > 1:
            forms = ["node"]
        form = self.rng.choice(forms)
        if form == "input":
            self.feature("runtime-position")
            return self.model_input(array, declared=[])
        if form == "overridable":
            self.feature("overridable-initializer")
            name = self.fresh("ovr")
            other = max(minimum, value + self.rng.choice([-7, -1, 1, 3, 9]))
            other = np.array(other + (other == value), dtype=dtype)
            self.initializers.append(numpy_helper.from_array(other, name))
            self.inputs.append(helper.make_tensor_value_info(name, onnx_dtype(dtype), []))
            self.feeds[name] = array
            return name
        return self.constant(array, form)

    def position(self, seq: Seq, value: int) -> str:
        """A position operand equal to `value`, sometimes computed from SequenceLength."""
        n = len(seq.elements)
        if len(self.node_stack) == 1 and self.chance(0.2):
            self.feature("computed-position")
            length = self.node("SequenceLength", [seq.name])
            normalized = value + n if value < 0 else value
            result = self.node("Sub", [length, self.constant(np.array(n - normalized))])
            if self.chance(0.3):
                result = self.node("Cast", [result], to=TensorProto.INT32)
            return result
        return self.scalar_operand(value)

    # -- pools ---------------------------------------------------------------------------

    def add_tensor(
        self, name: str, value: np.ndarray, *, sink: bool = False, static: bool = False
    ) -> Tensor:
        tensor = Tensor(name, np.asarray(value), static)
        self.tensors.append(tensor)
        if sink:
            self.sinks.append(tensor)
        return tensor

    def typed_unlike(self, seq: Seq) -> set[int]:
        """The axes (negative) at which ONNX shape inference gives the elements of `seq` (a list
        of the main graph) a dim that some element does not have (all of them when it gives
        another rank): it reads a loop-built list's element shape from its initial value, so a
        map body must not rely on those dims (a MatMul's inner dim)."""
        graph = helper.make_graph(self.node_stack[0], "probe", self.inputs, [], self.initializers)
        probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False)
        except Exception:
            return set()
        found = [v for v in inferred.graph.value_info if v.name == seq.name]
        if not found or not found[0].type.sequence_type.elem_type.tensor_type.HasField("shape"):
            return set()
        dims = found[0].type.sequence_type.elem_type.tensor_type.shape.dim
        declared = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if any(len(declared) != e.ndim for e in seq.elements):
            return set(range(-max(max(e.ndim for e in seq.elements), len(declared)), 0))
        return {
            axis - len(declared)
            for axis, d in enumerate(declared)
            if d is not None and any(e.shape[axis] != d for e in seq.elements)
        }

    def add_seq(self, name: str, elements: list[np.ndarray], dtype: np.dtype) -> Seq:
        seq = Seq(name, [np.asarray(e) for e in elements], np.dtype(dtype))
        self.seqs.append(seq)
        return seq

    def pick(self, items: list[Any]) -> Any:
        """Prefer recent values, so that chains form."""
        if self.chance(0.5):
            return items[-1]
        return self.rng.choice(items)

    def new_input_tensor(self, dtype: np.dtype, shape: tuple[int, ...] | None = None) -> Tensor:
        if shape is None:
            like = [t.shape for t in self.tensors if t.value.ndim > 0]
            shape = self.rng.choice(like) if like and self.chance(0.5) else self.random_shape()
        array = self.random_array(dtype, shape)
        if self.chance(0.15):
            self.feature("constant-tensor")
            return self.add_tensor(self.constant(array), array, static=True)
        return self.add_tensor(self.model_input(array), array)

    def tensor_of(self, dtype: np.dtype, *, like: tuple[int, ...] | None = None) -> Tensor:
        """A tensor of `dtype` from the pool (preferring shape `like`) or a new input."""
        same = [t for t in self.tensors if t.dtype == dtype]
        shaped = [t for t in same if like is not None and t.shape == like]
        if shaped and self.chance(0.7):
            return self.rng.choice(shaped)
        if same and self.chance(0.6):
            return self.pick(same)
        return self.new_input_tensor(dtype, like)

    # -- the program ---------------------------------------------------------------------

    def build(self) -> Program:
        for _ in range(self.rng.randint(1, 3)):
            self.new_input_tensor(self.rng.choice(self.dtype_pool))
        if self.chance(0.08):
            self.sequence_input()
        steps = self.rng.randint(2, 9)
        for _ in range(steps):
            self.step()
        if not self.sinks:
            self.finish_with_sink()
        return self.assemble()

    def step(self) -> None:
        actions: list[tuple[Callable[[], bool], float]] = [
            (self.op_construct, 3),
            (self.op_empty_then_insert, 1),
            (self.op_insert, 3),
            (self.op_erase, 2),
            (self.op_at, 3),
            (self.op_length, 1),
            (self.op_split, 4),
            (self.op_concat, 3),
            (self.op_elementwise, 1),
            (self.op_if_consume, 1),
            (self.op_loop_read, 1),
        ]
        if self.opset >= 13:  # If and Loop carry sequences from opset 13
            actions += [(self.op_if_seq, 1), (self.op_loop_append, 1.5)]
            actions.append((self.op_loop_dynamic_append, 1))
        if self.opset >= MAP_MIN_OPSET:
            actions.append((self.op_map, 4))
        actions += dynamic_program_actions(self)
        if self.list_programs:
            actions += list_program_actions(self)
        for _ in range(10):
            action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
            if action():
                return

    def finish_with_sink(self) -> None:
        for action in (self.op_concat, self.op_at, self.op_length):
            if self.seqs and action():
                return
        self.op_split()
        if not (self.op_concat() or self.op_at() or self.op_length()):
            raise AssertionError("no sink could be made")  # op_split always gives a sequence

    def assemble(self) -> Program:
        outputs: list[Tensor | Seq] = []
        candidates = list(self.sinks)
        outputs.append(candidates[-1])
        for value in self.rng.sample(candidates, min(len(candidates), self.rng.randint(0, 2))):
            if value not in outputs:
                outputs.append(value)
        if self.seqs and self.chance(0.12) and self.opset >= 14:  # Identity of sequences: 14
            self.feature("sequence-output")
            seq = self.rng.choice(self.seqs)
            if seq not in outputs:
                outputs.append(seq)
        output_infos = []
        expected: list[Any] = []
        graph_outputs: list[str] = []
        for value in outputs:
            name = value.name
            if name in graph_outputs or name in self.feeds or self.is_initializer(name):
                name = self.node("Identity", [name])
            graph_outputs.append(name)
            if isinstance(value, Seq):
                output_infos.append(
                    helper.make_tensor_sequence_value_info(name, onnx_dtype(value.dtype), None)
                )
                expected.append(list(value.elements))
            else:
                dims: list[Any] | None = [None] * value.value.ndim
                # onnx shape inference may read a loop-built list's element shape from its
                # initial value, so list programs declare no static output shape
                if self.chance(0.3) and not self.allow_overridable and not self.list_programs:
                    dims = list(value.shape)

                output_infos.append(
                    helper.make_tensor_value_info(name, onnx_dtype(value.dtype), dims)
                )
                expected.append(value.value)
        graph = helper.make_graph(
            self.node_stack[0],
            f"fuzz_{self.seed}",
            self.inputs,
            output_infos,
            initializer=self.initializers,
        )
        ir_version = max(8, helper.find_min_ir_version_for([helper.make_opsetid("", self.opset)]))
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            ir_version=ir_version,
            producer_name="seqlower-fuzz",
        )
        return Program(
            self.seed,
            model,
            self.feeds,
            expected,
            self.features,
            self.ort_may_reject,
            self.keepdims_corner,
            self.options,
        )

    def is_initializer(self, name: str) -> bool:
        return any(init.name == name for init in self.initializers)

    # -- tensor-level filler ---------------------------------------------------------------

    def op_elementwise(self) -> bool:
        numeric = [t for t in self.tensors if t.dtype.type in NUMERIC_TYPES]
        if not numeric:
            return False
        a = self.pick(numeric)
        b = self.tensor_of(a.dtype, like=a.shape)
        if b.shape != a.shape:
            return False
        op = self.rng.choice(["Add", "Mul", "Sub"])
        value = {"Add": np.add, "Mul": np.multiply, "Sub": np.subtract}[op](a.value, b.value)
        self.add_tensor(self.node(op, [a.name, b.name]), value.astype(a.dtype))
        return True

    def sequence_input(self) -> None:
        self.feature("sequence-input")
        dtype = self.rng.choice(self.dtype_pool)
        shape = self.random_shape()
        elements = [self.random_array(dtype, shape) for _ in range(self.rng.randint(1, 4))]
        name = self.fresh("seq_in")
        self.inputs.append(helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None))
        self.feeds[name] = elements
        self.add_seq(name, elements, dtype)

    # -- sequence builders ---------------------------------------------------------------

    def op_construct(self) -> bool:
        first = self.pick(self.tensors) if self.tensors else self.new_input_tensor(np.float32)
        members = [first]
        for _ in range(self.rng.randint(0, 3)):
            members.append(self.tensor_of(first.dtype, like=first.shape))
        name = self.node("SequenceConstruct", [t.name for t in members])
        self.add_seq(name, [t.value for t in members], first.dtype)
        return True

    def op_empty_then_insert(self) -> bool:
        dtype = self.rng.choice(self.dtype_pool)
        attrs = {} if dtype == np.float32 and self.chance(0.5) else {"dtype": onnx_dtype(dtype)}
        self.feature("sequence-empty")
        name = self.node("SequenceEmpty", [], **attrs)
        seq = self.add_seq(name, [], dtype)
        if self.chance(0.85):
            self.insert_into(seq)
        return True

    def op_insert(self) -> bool:
        if not self.seqs:
            return False
        self.insert_into(self.pick(self.seqs))
        return True

    def insert_into(self, seq: Seq) -> None:
        like = seq.elements[0].shape if seq.elements else None
        tensor = self.tensor_of(seq.dtype, like=like)
        n = len(seq.elements)
        inputs = [seq.name, tensor.name]
        if self.chance(0.3):
            at = n
        else:
            at = self.rng.randint(-n, n)
            if at == n:
                self.feature("insert-at-end")
            if at < 0:
                self.feature("negative-position")
            inputs.append(self.position(seq, at))
        normalized = at + n if at < 0 else at
        elements = list(seq.elements)
        elements.insert(normalized, tensor.value)
        self.add_seq(self.node("SequenceInsert", inputs), elements, seq.dtype)

    def op_erase(self) -> bool:
        candidates = [s for s in self.seqs if s.elements]
        if not candidates:
            return False
        seq = self.pick(candidates)
        n = len(seq.elements)
        inputs = [seq.name]
        at = -1
        if self.chance(0.7):
            at = self.rng.randint(-n, n - 1)
            if at < 0:
                self.feature("negative-position")
            inputs.append(self.position(seq, at))
        elements = list(seq.elements)
        del elements[at]
        self.add_seq(self.node("SequenceErase", inputs), elements, seq.dtype)
        return True

    def op_split(self) -> bool:
        candidates = [t for t in self.tensors if t.value.ndim > 0 and max(t.shape) > 0]
        # onnxruntime has no SplitToSequence of int8 (only list programs make int8 tensors)
        candidates = [t for t in candidates if t.dtype != np.int8]
        if self.list_programs:  # (seeds below LIST_SEEDS keep their programs)
            candidates = [t for t in candidates if t.name not in self.read_from_lists]
        tensor = self.pick(candidates) if candidates else None
        if tensor is None or self.chance(0.15):
            tensor = self.new_input_tensor(self.rng.choice(self.dtype_pool), self.random_shape())
        rank = tensor.value.ndim
        axis = self.rng.choice([a for a in range(rank) if tensor.shape[a] > 0])
        dim = tensor.shape[axis]
        declared_axis = axis - rank if self.chance(0.3) else axis
        if declared_axis < 0:
            self.feature("negative-axis")
        attrs: dict[str, Any] = (
            {} if declared_axis == 0 and self.chance(0.4) else {"axis": declared_axis}
        )
        kind = self.rng.choices(["none", "scalar", "list"], [4, 3, 3])[0]
        inputs = [tensor.name]
        chunks: list[np.ndarray]
        if kind == "none":
            keepdims = self.rng.choice([0, 1, None])
            if keepdims is not None:
                attrs["keepdims"] = keepdims
            parts = np.split(tensor.value, dim, axis=axis)
            chunks = [np.squeeze(p, axis) for p in parts] if keepdims == 0 else parts
            self.feature(f"split-none-keepdims{keepdims}")
        elif kind == "scalar":
            size = self.rng.randint(1, dim + 1)
            if dim % size:
                self.feature("split-scalar-nondividing")
            keepdims = self.rng.choice([1, None, 0] if size == 1 else [1, None])
            if keepdims is not None:
                attrs["keepdims"] = keepdims
            if keepdims == 0:  # the ambiguous corner: only with a static split of 1
                inputs.append(self.constant(np.array(1, dtype=np.int64)))
            else:
                # not overridable: the checker's inference would read the initializer's value
                # as the chunk size and give a map body the wrong element shape (seed 31825)
                inputs.append(self.scalar_operand(size, minimum=1, overridable=False))
            bounds = list(range(size, dim, size))
            chunks = np.split(tensor.value, bounds, axis=axis)
            if keepdims == 0:  # the ambiguous corner, read as onnxruntime reads it
                self.keepdims_corner = True
                self.feature("split-scalar1-keepdims0")
                chunks = [np.squeeze(c, axis) for c in chunks]
        else:
            count = self.rng.randint(1, 4)
            cuts = sorted(self.rng.randint(0, dim) for _ in range(count - 1))
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim])]
            if 0 in sizes:
                self.feature("split-zero-size-chunk")
            if self.chance(0.5):
                attrs["keepdims"] = self.rng.choice([0, 1])  # ignored with a 1-D split
            dtype = np.int64 if self.chance(0.8) else np.int32
            array = np.array(sizes, dtype=dtype)
            if self.chance(0.25):
                self.feature("split-sizes-input")
                inputs.append(self.model_input(array, declared=[count]))
            else:
                inputs.append(self.constant(array))
            chunks = np.split(tensor.value, np.cumsum(sizes)[:-1].tolist(), axis=axis)
        self.feature(f"split-{kind}")
        name = self.node("SplitToSequence", inputs, **attrs)
        self.add_seq(name, chunks, tensor.dtype)
        return True

    # -- sequence readers ----------------------------------------------------------------

    def op_at(self) -> bool:
        candidates = [s for s in self.seqs if s.elements]
        if not candidates:
            return False
        seq = self.pick(candidates)
        n = len(seq.elements)
        at = self.rng.randint(-n, n - 1)
        if at < 0:
            self.feature("negative-position")
        name = self.node("SequenceAt", [seq.name, self.position(seq, at)])
        self.add_tensor(name, seq.elements[at], sink=True)
        self.read_from_lists.add(name)
        return True

    def op_length(self) -> bool:
        if not self.seqs:
            return False
        seq = self.pick(self.seqs)
        name = self.node("SequenceLength", [seq.name])
        self.add_tensor(name, np.array(len(seq.elements), dtype=np.int64), sink=True)
        return True

    def concat_axes(self, elements: list[np.ndarray]) -> list[tuple[int, int]]:
        """Every (axis, new_axis) that concatenates `elements` validly."""
        if not elements:
            return []
        options = []
        shapes = {e.shape for e in elements}
        rank = elements[0].ndim
        if len(shapes) == 1:
            options += [(a, 1) for a in range(-rank - 1, rank + 1)]
        if rank > 0 and all(e.ndim == rank for e in elements):
            for axis in range(rank):
                rest = {e.shape[:axis] + e.shape[axis + 1 :] for e in elements}
                if len(rest) == 1:
                    options += [(axis, 0), (axis - rank, 0)]
        return options

    def op_concat(self) -> bool:
        candidates = [s for s in self.seqs if self.concat_axes(s.elements)]
        if not candidates:
            return False
        seq = self.pick(candidates)
        axis, new_axis = self.rng.choice(self.concat_axes(seq.elements))
        attrs: dict[str, Any] = {"axis": axis}
        if new_axis or self.chance(0.3):
            attrs["new_axis"] = new_axis
        if new_axis:
            self.feature("concat-new-axis")
        if axis < 0:
            self.feature("negative-axis")
        value = _concat(seq.elements, axis, new_axis)
        self.add_tensor(self.node("ConcatFromSequence", [seq.name], **attrs), value, sink=True)
        return True

    # -- SequenceMap -----------------------------------------------------------------------

    def op_map(self) -> bool:
        candidates = [s for s in self.seqs if s.elements]
        if not candidates:
            return False
        seq = self.pick(candidates)
        self.feature("sequence-map")
        mapper = _MapBody(self, seq)
        return mapper.emit()

    # -- If --------------------------------------------------------------------------------

    def condition(self) -> tuple[str, bool]:
        value = self.chance(0.5)
        form = self.rng.choice(["const", "input", "computed"])
        if form == "const":
            self.feature("if-constant-condition")
            return self.constant(np.array(value)), value
        self.feature("if-runtime-condition")
        if form == "input":
            return self.model_input(np.array(value), declared=[]), value
        floats = [t for t in self.tensors if t.dtype == np.float32 and not t.static]
        if not floats:
            return self.model_input(np.array(value), declared=[]), value
        tensor = self.rng.choice(floats)
        total = self.node("ReduceSum", [tensor.name], keepdims=0)
        return self.node("Greater", [total, self.constant(np.array(0, np.float32))]), bool(
            tensor.value.sum() > 0
        )

    def branch(self, build: Callable[[], tuple[list[onnx.ValueInfoProto], Any]]):
        self.node_stack.append([])
        outputs, result = build()
        nodes = self.node_stack.pop()
        graph = helper.make_graph(nodes, self.fresh("branch"), [], outputs)
        return graph, result

    def op_if_seq(self) -> bool:
        dtype = self.rng.choice(self.dtype_pool + [s.dtype for s in self.seqs])
        cond, taken = self.condition()
        self.feature("if-sequence")

        def build() -> tuple[list[onnx.ValueInfoProto], list[np.ndarray]]:
            name, elements = self.branch_sequence(dtype)
            info = helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)
            return [info], elements

        then_graph, then_elements = self.branch(build)
        else_graph, else_elements = self.branch(build)
        name = self.node("If", [cond], then_branch=then_graph, else_branch=else_graph)
        self.add_seq(name, then_elements if taken else else_elements, dtype)
        return True

    def branch_sequence(self, dtype: np.dtype) -> tuple[str, list[np.ndarray]]:
        """A sequence of `dtype` built inside a branch from outer values."""
        seqs = [s for s in self.seqs if s.dtype == dtype]
        kinds = ["construct", "split", "empty"] + (["insert", "identity", "erase"] if seqs else [])
        weights = [3, 2, 0.5] + [2, 1 if self.opset >= 14 else 0, 1] * bool(seqs)  # Identity-14
        kind = self.rng.choices(kinds, weights)[0]
        if kind == "construct":
            # tensor_of may add model inputs or main-graph initializers: create them first
            members = [self.outer_tensor(dtype) for _ in range(self.rng.randint(1, 3))]
            name = self.node("SequenceConstruct", [t.name for t in members])
            return name, [t.value for t in members]
        if kind == "split":
            tensor = self.outer_tensor(dtype, rank_at_least=1)
            if tensor.shape[0] == 0:  # no split of an empty axis: a fresh tensor instead
                with self.in_main_graph():
                    tensor = self.new_input_tensor(dtype, self.random_shape())
            name = self.node("SplitToSequence", [tensor.name], axis=0)
            return name, np.split(tensor.value, tensor.shape[0], axis=0)
        if kind == "empty":
            return self.node("SequenceEmpty", [], dtype=onnx_dtype(dtype)), []
        if self.opset >= MAP_MIN_OPSET and dtype.type in NUMERIC_TYPES and self.chance(0.3):
            self.feature("if-branch-sequence-map")
            seq = self.rng.choice(seqs)
            x_in, x_out = self.fresh("bx"), self.fresh("by")
            body = helper.make_graph(
                [helper.make_node("Neg", [x_in], [x_out], name=self.fresh("n_Neg_"))],
                self.fresh("branch_map_body"),
                [helper.make_tensor_value_info(x_in, onnx_dtype(dtype), None)],
                [helper.make_tensor_value_info(x_out, onnx_dtype(dtype), None)],
            )
            if dtype == np.float16:
                self.ort_may_reject = self.ort_may_reject or "float16 ops in a SequenceMap body"
            name = self.node("SequenceMap", [seq.name], body=body)
            return name, [np.negative(e) for e in seq.elements]
        seq = self.rng.choice(seqs)
        if kind == "identity":
            return self.node("Identity", [seq.name]), list(seq.elements)
        if kind == "erase" and seq.elements:
            elements = list(seq.elements)
            del elements[-1]
            return self.node("SequenceErase", [seq.name]), elements
        tensor = self.outer_tensor(dtype)
        return self.node("SequenceInsert", [seq.name, tensor.name]), [*seq.elements, tensor.value]

    def outer_tensor(self, dtype: np.dtype, rank_at_least: int = 0) -> Tensor:
        """A main-graph tensor of `dtype` (made in the main graph when needed)."""
        same = [t for t in self.tensors if t.dtype == dtype and t.value.ndim >= rank_at_least]
        if same and self.chance(0.8):
            return self.rng.choice(same)
        shape = self.random_shape(self.rng.randint(max(1, rank_at_least), 2))
        with self.in_main_graph():
            return self.new_input_tensor(dtype, shape)

    def outer_tensor_shaped(self, dtype: np.dtype, shape: tuple[int, ...]) -> Tensor:
        """A main-graph tensor of exactly `dtype` and `shape` (a new one when none fits)."""
        same = [t for t in self.tensors if t.dtype == dtype and t.shape == shape]
        if same and self.chance(0.6):
            return self.rng.choice(same)
        with self.in_main_graph():
            return self.new_input_tensor(dtype, shape)

    @contextlib.contextmanager
    def in_main_graph(self) -> Iterator[None]:
        """Emit into the main graph while a subgraph is being built."""
        stack = self.node_stack
        self.node_stack = stack[:1]
        try:
            yield
        finally:
            self.node_stack = stack

    def op_if_consume(self) -> bool:
        candidates = [s for s in self.seqs if s.elements]
        if not candidates:
            return False
        seq = self.pick(candidates)
        cond, taken = self.condition()
        self.feature("if-reads-sequence")

        def build() -> tuple[list[onnx.ValueInfoProto], np.ndarray]:
            options = self.concat_axes(seq.elements)
            n = len(seq.elements)
            if options and self.chance(0.4):
                axis, new_axis = self.rng.choice(options)
                name = self.node("ConcatFromSequence", [seq.name], axis=axis, new_axis=new_axis)
                value = _concat(seq.elements, axis, new_axis)
            else:
                at = self.rng.randint(-n, n - 1)
                name = self.node("SequenceAt", [seq.name, self.constant(np.array(at))])
                value = seq.elements[at]
            info = helper.make_tensor_value_info(name, onnx_dtype(seq.dtype), None)
            return [info], value

        then_graph, then_value = self.branch(build)
        else_graph, else_value = self.branch(build)
        name = self.node("If", [cond], then_branch=then_graph, else_branch=else_graph)
        self.add_tensor(name, then_value if taken else else_value, sink=True)
        return True

    # -- Loop --------------------------------------------------------------------------------

    def trip_count(self, count: int, seq: Seq | None = None) -> str:
        if seq is not None and len(seq.elements) == count and self.chance(0.5):
            self.feature("loop-trip-sequence-length")
            return self.node("SequenceLength", [seq.name])
        self.feature("loop-trip-constant" if self.chance(0.5) else "loop-trip-input")
        return (
            self.scalar_operand(count, int64_only=True)
            if self.chance(0.5)
            else self.constant(np.array(count, dtype=np.int64))
        )

    def loop_header(self) -> tuple[onnx.ValueInfoProto, onnx.ValueInfoProto, str, str]:
        i_name, cond_name = self.fresh("i"), self.fresh("cond")
        return (
            helper.make_tensor_value_info(i_name, TensorProto.INT64, []),
            helper.make_tensor_value_info(cond_name, TensorProto.BOOL, []),
            i_name,
            cond_name,
        )

    def loop_condition(self) -> str:
        return "" if self.chance(0.5) else self.constant(np.array(True))

    def op_loop_append(self) -> bool:
        """Loop(M, cond, acc) with acc = SequenceInsert(acc, f(i)) in the body."""
        self.feature("loop-append")
        readable = [s for s in self.seqs if s.elements]
        read = self.chance(0.4) and bool(readable)
        if read:
            source = self.pick(readable)
            dtype = source.dtype
            count = self.rng.randint(1, len(source.elements))
            shapes = {e.shape for e in source.elements[:count]}
        else:
            dtype = self.rng.choice(self.dtype_pool)
            base = self.outer_tensor(dtype)
            count = self.rng.randint(0, 4)
            shapes = {base.shape}
        scan = len(shapes) == 1 and count > 0 and self.chance(0.3)
        # onnx shape inference merges the element shapes of the initial and carried sequences;
        # where they differ the checker may refuse the model
        start = [
            s for s in self.seqs if s.dtype == dtype and {e.shape for e in s.elements} == shapes
        ]
        initial: Seq | None = self.rng.choice(start) if start and self.chance(0.2) else None
        trip = self.trip_count(count, source if read else None)
        cond = self.loop_condition()
        if initial is None:
            initial_name = self.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
            initial_elements: list[np.ndarray] = []
        else:
            initial_name, initial_elements = initial.name, list(initial.elements)

        i_info, cond_info, i_name, cond_name = self.loop_header()
        acc_name = self.fresh("acc")
        acc_info = helper.make_tensor_sequence_value_info(acc_name, onnx_dtype(dtype), None)
        self.node_stack.append([])
        produced: list[np.ndarray] = []
        if read and self.chance(0.25):
            # an If in the body: element i, or element 0 from iteration `first` on
            self.feature("loop-body-if")
            first = self.rng.randint(0, count)
            early = self.node("Less", [i_name, self.constant(np.array(first, dtype=np.int64))])
            then_graph, _ = self.branch(lambda: self.branch_at(source, i_name))
            else_graph, _ = self.branch(lambda: self.branch_at(source, None))
            element = self.node("If", [early], then_branch=then_graph, else_branch=else_graph)
            produced = [source.elements[k if k < first else 0] for k in range(count)]
        elif read:
            self.feature("loop-sequence-at-i")
            element = self.node("SequenceAt", [source.name, i_name])
            produced = [source.elements[k] for k in range(count)]
            if dtype.type in NUMERIC_TYPES and self.chance(0.5):
                element = self.node("Neg", [element])
                produced = [np.negative(p) for p in produced]
        elif dtype.type in NUMERIC_TYPES and self.chance(0.3):
            # len(acc) inside the body: the carried sequence is read as well as appended to
            self.feature("loop-length-of-carried")
            length = self.node("SequenceLength", [acc_name])
            step = self.node("Cast", [length], to=onnx_dtype(dtype))
            element = self.node("Add", [base.name, step])
            produced = [
                (base.value + np.array(len(initial_elements) + k, dtype=dtype)).astype(dtype)
                for k in range(count)
            ]
        elif dtype.type in NUMERIC_TYPES:
            step = self.node("Cast", [i_name], to=onnx_dtype(dtype))
            element = self.node("Add", [base.name, step])
            produced = [(base.value + np.array(k, dtype=dtype)).astype(dtype) for k in range(count)]
        else:
            element = self.node("Identity", [base.name])
            produced = [base.value] * count
        appended = self.node("SequenceInsert", [acc_name, element])
        cond_out = self.node("Identity", [cond_name])
        outputs = [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(appended, onnx_dtype(dtype), None),
        ]
        if scan:
            self.feature("loop-scan-output")
            scan_out = self.node("Identity", [element])
            outputs.append(helper.make_tensor_value_info(scan_out, onnx_dtype(dtype), None))
        body_nodes = self.node_stack.pop()
        body = helper.make_graph(
            body_nodes, self.fresh("body"), [i_info, cond_info, acc_info], outputs
        )
        results = self.node("Loop", [trip, cond, initial_name], 1 + scan, body=body)
        if scan:
            final, stacked = results
            self.add_tensor(stacked, np.stack(produced), sink=True)
        else:
            final = results
        self.add_seq(final, initial_elements + produced, dtype)
        return True

    def branch_at(self, seq: Seq, position: str | None):
        """A branch giving SequenceAt(seq, position) (or element 0)."""
        at = self.node("SequenceAt", [seq.name, position or self.constant(np.array(0))])
        return [helper.make_tensor_value_info(at, onnx_dtype(seq.dtype), None)], None

    def op_loop_read(self) -> bool:
        """Loop(M, cond, acc0) with acc = acc + SequenceAt(outer_seq, i) in the body."""
        candidates = [
            s
            for s in self.seqs
            if s.elements
            and s.dtype.type in NUMERIC_TYPES
            and len({e.shape for e in s.elements}) == 1
        ]
        if not candidates:
            return False
        self.feature("loop-reads-sequence")
        seq = self.pick(candidates)
        count = len(seq.elements) if self.chance(0.6) else self.rng.randint(0, len(seq.elements))
        trip = self.trip_count(count, seq)
        cond = self.loop_condition()
        shape = seq.elements[0].shape
        zeros = np.zeros(shape, dtype=seq.dtype)
        acc0 = self.constant(zeros)
        i_info, cond_info, i_name, cond_name = self.loop_header()
        acc_name = self.fresh("acc")
        acc_info = helper.make_tensor_value_info(acc_name, onnx_dtype(seq.dtype), None)
        self.node_stack.append([])
        element = self.node("SequenceAt", [seq.name, i_name])
        total = self.node("Add", [acc_name, element])
        cond_out = self.node("Identity", [cond_name])
        body_nodes = self.node_stack.pop()
        body = helper.make_graph(
            body_nodes,
            self.fresh("body"),
            [i_info, cond_info, acc_info],
            [
                helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
                helper.make_tensor_value_info(total, onnx_dtype(seq.dtype), None),
            ],
        )
        result = self.node("Loop", [trip, cond, acc0], body=body)
        value = zeros
        for k in range(count):
            value = (value + seq.elements[k]).astype(seq.dtype)
        self.add_tensor(result, value, sink=True)
        return True

    # -- Loop patterns of issue 16: dynamic appends (while, prepend, conditional) ---------------

    def op_loop_dynamic_append(self) -> bool:
        """A Loop building a list with a run-time length: `while i < limit` carrying h = h * 0.5
        (or h + 1) and appending it; a prepend (SequenceInsert at 0); an append under an If on a
        run-time condition (one branch passes the list through, or both branches append)."""
        numeric = [d for d in self.dtype_pool if d.type in NUMERIC_TYPES]
        if not numeric:
            return False
        dtype = self.rng.choice(numeric)
        base = self.outer_tensor(dtype)
        if self.chance(0.2):
            return self.loop_growing_prefixes(base)
        variants = ["while", "prepend", "both-branches"]
        variants += ["conditional"] if self.opset >= 14 else []  # Identity of a sequence: 14
        variant = self.rng.choice(variants)
        self.feature(f"loop-dynamic-{variant}")
        count = self.rng.randint(0, 3)
        limit = self.model_input(np.array(count, dtype=np.int64), declared=[])
        empty = not (variant == "while" and self.chance(0.5))
        initial_elements = [] if empty else [base.value]
        start = (
            self.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
            if empty
            else self.node("SequenceConstruct", [base.name])
        )
        i_info, cond_info, i_name, cond_name = self.loop_header()
        acc_name, h_name = self.fresh("acc"), self.fresh("h")
        acc_info = helper.make_tensor_sequence_value_info(acc_name, onnx_dtype(dtype), None)
        h_info = helper.make_tensor_value_info(h_name, onnx_dtype(dtype), None)
        self.node_stack.append([])
        one = self.constant(np.array(1, dtype=np.int64))
        if variant == "while":  # the condition is computed from a run-time input
            cond_out = self.node("Less", [self.node("Add", [i_name, one]), limit])
            factor = np.array(0.5 if dtype.kind == "f" else 1, dtype=dtype)
            step = "Mul" if dtype.kind == "f" else "Add"
            element = self.node(step, [h_name, self.constant(factor)])
            values = [base.value]
            for _ in range(count):
                last = values[-1]
                values.append((last * factor if step == "Mul" else last + factor).astype(dtype))
            produced, h_final = values[1:], values[-1]
        else:
            cond_out = self.node("Identity", [cond_name])
            element = self.node(
                "Add", [base.name, self.node("Cast", [i_name], to=onnx_dtype(dtype))]
            )
            produced = [(base.value + np.array(k, dtype=dtype)).astype(dtype) for k in range(count)]
            h_final = base.value
        if variant == "prepend":
            front = self.constant(np.array(0, dtype=np.int64))
            appended = self.node("SequenceInsert", [acc_name, element, front])
            produced = produced[::-1]
        elif variant in ("conditional", "both-branches"):
            # keep the even iterations: a run-time condition on the iteration number
            two = self.constant(np.array(2, dtype=np.int64))
            keep = self.node("Equal", [self.node("Mod", [i_name, two]), self.constant(np.array(0))])
            negate = self.chance(0.5)

            def appending(value: str):  # type: ignore[no-untyped-def]
                def build():  # type: ignore[no-untyped-def]
                    name = self.node("SequenceInsert", [acc_name, value])
                    return [
                        helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)
                    ], None

                return build

            def passing():  # type: ignore[no-untyped-def]
                name = self.node("Identity", [acc_name])
                return [helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)], None

            def negated():  # type: ignore[no-untyped-def]
                return appending(self.node("Neg", [element]))()

            def scaled():  # type: ignore[no-untyped-def]
                two = self.constant(np.array(2, dtype=dtype))
                return appending(self.node("Mul", [element, two]))()

            if variant == "conditional":
                in_branch = self.chance(0.5)  # the appended tensor computed in the branch
                taken, other = (scaled if in_branch else appending(element)), passing
                kept = [
                    (p * np.array(2, dtype=dtype)).astype(dtype) if in_branch else p
                    for k, p in enumerate(produced)
                    if (k % 2 == 0) != negate
                ]
            else:
                taken, other = appending(element), negated
                kept = [
                    p if (k % 2 == 0) != negate else np.negative(p) for k, p in enumerate(produced)
                ]
                kept = [np.asarray(p).astype(dtype) for p in kept]
            then_graph, _ = self.branch(other if negate else taken)
            else_graph, _ = self.branch(taken if negate else other)
            appended = self.node("If", [keep], then_branch=then_graph, else_branch=else_graph)
            produced = kept
        else:
            appended = self.node("SequenceInsert", [acc_name, element])
        body_nodes = self.node_stack.pop()
        outputs = [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_value_info(
                element if variant == "while" else h_name, onnx_dtype(dtype), None
            ),
            helper.make_tensor_sequence_value_info(appended, onnx_dtype(dtype), None),
        ]
        body = helper.make_graph(
            body_nodes, self.fresh("body"), [i_info, cond_info, h_info, acc_info], outputs
        )
        if variant == "while":
            trip = "" if self.chance(0.5) else self.constant(np.array(100, dtype=np.int64))
            first = self.node("Less", [self.constant(np.array(0, dtype=np.int64)), limit])
        else:
            trip, first = limit, self.loop_condition()
        h_out, final = self.node("Loop", [trip, first, base.name, start], 2, body=body)
        self.add_tensor(h_out, h_final, sink=variant == "while")
        self.add_seq(final, initial_elements + produced, dtype)
        return True

    def loop_growing_prefixes(self, base: Tensor) -> bool:
        """Appends base[: i + 1] for i < limit (a run-time input), then ConcatFromSequence on
        axis 0: chunks of changing shapes, lowered to a Concat accumulator for target tract."""
        if base.value.ndim == 0:
            return False
        self.feature("loop-dynamic-growing")
        self.options["target"] = "tract"
        empty = self.chance(0.5)
        count = self.rng.randint(1 if empty else 0, 3)
        limit = self.model_input(np.array(count, dtype=np.int64), declared=[])
        dtype = base.dtype
        start = (
            self.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
            if empty
            else self.node("SequenceConstruct", [base.name])
        )
        i_info, cond_info, i_name, cond_name = self.loop_header()
        acc_name = self.fresh("acc")
        acc_info = helper.make_tensor_sequence_value_info(acc_name, onnx_dtype(dtype), None)
        self.node_stack.append([])
        axes = self.constant(np.array([0], dtype=np.int64))
        stop = self.node(
            "Unsqueeze" if self.opset >= 13 else "Identity",
            [
                self.node("Add", [i_name, self.constant(np.array(1, dtype=np.int64))]),
                *([axes] if self.opset >= 13 else []),
            ],
        )
        if self.opset < 13:
            stop = self.node("Reshape", [stop, self.constant(np.array([1], dtype=np.int64))])
        prefix = self.node(
            "Slice", [base.name, self.constant(np.array([0], dtype=np.int64)), stop, axes]
        )
        appended = self.node("SequenceInsert", [acc_name, prefix])
        cond_out = self.node("Identity", [cond_name])
        body_nodes = self.node_stack.pop()
        outputs = [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(appended, onnx_dtype(dtype), None),
        ]
        body = helper.make_graph(
            body_nodes, self.fresh("body"), [i_info, cond_info, acc_info], outputs
        )
        final = self.node("Loop", [limit, self.loop_condition(), start], body=body)
        pieces = ([] if empty else [base.value]) + [base.value[: k + 1] for k in range(count)]
        total = self.node("ConcatFromSequence", [final], axis=0)
        self.add_tensor(total, np.concatenate(pieces, axis=0), sink=True)
        return True


# -- issue 16, patterns 5-9: dynamic programs ------------------------------------------------------


def dynamic_program_actions(gen: _Generator) -> list[tuple[Callable[[], bool], float]]:
    """The program shapes of issue 16's patterns 5 to 9, as (action, weight) for `step`."""
    shapes = _DynamicShapes(gen)
    actions: list[tuple[Callable[[], bool], float]] = [
        (shapes.split_by_runtime_sizes_length, 0.5),  # pattern 6
        (shapes.runtime_position_mixed, 1),  # pattern 7
    ]
    if gen.opset >= 13:  # sequences through If and Loop
        actions += [
            (shapes.if_branches_of_different_lengths, 1),  # pattern 5
            (shapes.loop_trip_from_shape_arithmetic, 0.7),  # pattern 8
        ]
    if gen.opset >= MAP_MIN_OPSET:
        actions.append((shapes.map_in_a_loop_body, 0.4))  # pattern 9
    return actions


class _DynamicShapes:
    """Builders of issue 16's dynamic program shapes (each returns True when it emitted)."""

    def __init__(self, gen: _Generator) -> None:
        self.gen = gen
        self.rng = gen.rng

    def if_branches_of_different_lengths(self) -> bool:
        """An If whose branches build lists of different lengths (0 included), read only by
        SequenceLength, ConcatFromSequence and SequenceAt at a position valid in both."""
        gen = self.gen
        dtype = gen.rng.choice(gen.dtype_pool)
        shape = gen.random_shape()
        counts = gen.rng.sample([0, 1, 2, 3], 2)
        members = [[gen.outer_tensor_shaped(dtype, shape) for _ in range(n)] for n in counts]
        cond, taken = gen.condition()
        gen.feature("if-different-lengths")

        def build(tensors: list[Tensor]):  # type: ignore[no-untyped-def]
            def make() -> tuple[list[onnx.ValueInfoProto], list[np.ndarray]]:
                if tensors:
                    name = gen.node("SequenceConstruct", [t.name for t in tensors])
                else:
                    name = gen.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
                info = helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)
                return [info], [t.value for t in tensors]

            return make

        then_graph, then_values = gen.branch(build(members[0]))
        else_graph, else_values = gen.branch(build(members[1]))
        name = gen.node("If", [cond], then_branch=then_graph, else_branch=else_graph)
        values = then_values if taken else else_values
        length = gen.node("SequenceLength", [name])
        gen.add_tensor(length, np.array(len(values), dtype=np.int64), sink=True)
        if min(counts) > 0:
            axis, new_axis = gen.rng.choice(gen.concat_axes(values))
            concat = gen.node("ConcatFromSequence", [name], axis=axis, new_axis=new_axis)
            gen.add_tensor(concat, _concat(values, axis, new_axis), sink=True)
            at = gen.rng.choice([0, -1])
            element = gen.node("SequenceAt", [name, gen.constant(np.array(at))])
            gen.add_tensor(element, values[at], sink=True)
        return True

    def split_by_runtime_sizes_length(self) -> bool:
        """len(x.split(sizes)) with `sizes` a model input of symbolic length."""
        gen = self.gen
        tensor = gen.new_input_tensor(gen.rng.choice(gen.dtype_pool), gen.random_shape())
        axis = gen.rng.randrange(tensor.value.ndim)
        dim = tensor.shape[axis]
        count = gen.rng.randint(1, 4)
        cuts = sorted(gen.rng.randint(0, dim) for _ in range(count - 1))
        sizes = np.array([b - a for a, b in zip([0, *cuts], [*cuts, dim])], dtype=np.int64)
        gen.feature("split-runtime-sizes-length")
        sizes_name = gen.model_input(sizes, declared=[gen.fresh("count")])
        split = gen.node("SplitToSequence", [tensor.name, sizes_name], axis=axis)
        length = gen.node("SequenceLength", [split])
        gen.add_tensor(length, np.array(count, dtype=np.int64), sink=True)
        return True

    def runtime_position_mixed(self) -> bool:
        """Insert and erase at positions that are model inputs, over elements of different
        shapes, or of a type with no Where kernel in onnxruntime (bool)."""
        gen = self.gen
        dtype = gen.rng.choice([*gen.dtype_pool, np.dtype(np.bool_)])
        same = dtype == np.bool_ and gen.chance(0.5)
        n = gen.rng.randint(0, 3)
        length = gen.rng.randint(1, 3)
        shapes = [(length,) if same else (gen.rng.randint(1, 4),) for _ in range(n + 1)]
        tensors = [gen.outer_tensor_shaped(dtype, shape) for shape in shapes]
        gen.feature("runtime-position-mixed-shapes" if not same else "runtime-position-bool")
        if n:
            seq = gen.node("SequenceConstruct", [t.name for t in tensors[:n]])
        else:
            seq = gen.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
        elements = [t.value for t in tensors[:n]]
        at = gen.rng.randint(-n, n)
        inserted = gen.node("SequenceInsert", [seq, tensors[n].name, gen.scalar_operand(at)])
        elements.insert(at + n if at < 0 else at, tensors[n].value)
        result = gen.add_seq(inserted, elements, dtype)
        if len(elements) > 1 and gen.chance(0.6):
            at = gen.rng.randint(-len(elements), len(elements) - 1)
            erased = gen.node("SequenceErase", [inserted, gen.scalar_operand(at)])
            elements = list(elements)
            del elements[at]
            result = gen.add_seq(erased, elements, dtype)
        if gen.chance(0.5):
            at = gen.rng.randint(-len(result.elements), len(result.elements) - 1)
            element = gen.node("SequenceAt", [result.name, gen.scalar_operand(at)])
            gen.add_tensor(element, result.elements[at], sink=True)
        return True

    def shape_arithmetic_trip(self, shape: tuple[int, ...], name: str) -> tuple[str, int]:
        """min(H, W) // 4 + 1 from the static shape of `name`, as an exporter writes it."""
        gen = self.gen
        dims = []
        for axis in (0, 1):
            dim = gen.node("Gather", [gen.node("Shape", [name]), gen.constant(np.array(axis))])
            if gen.opset >= 13:
                dims.append(gen.node("Unsqueeze", [dim, gen.constant(np.array([0]))]))
            else:
                dims.append(gen.node("Unsqueeze", [dim], axes=[0]))
        smallest = gen.node("ReduceMin", [gen.node("Concat", dims, axis=0)], keepdims=0)
        quarter = gen.node("Div", [smallest, gen.constant(np.array(4))])
        if gen.chance(0.5):  # through float, as torch's floor division of a float
            as_float = gen.node("Cast", [quarter], to=TensorProto.FLOAT)
            quarter = gen.node("Cast", [gen.node("Floor", [as_float])], to=TensorProto.INT64)
        trip = gen.node("Add", [quarter, gen.constant(np.array(1))])
        return trip, min(shape[0], shape[1]) // 4 + 1

    def loop_trip_from_shape_arithmetic(self) -> bool:
        """for i in range(min(H, W) // 4 + 1): xs.insert(0, v * i) (a prepend) or at i."""
        gen = self.gen
        dtype = gen.rng.choice([d for d in gen.dtype_pool if d.type in NUMERIC_TYPES] or [None])
        if dtype is None:
            return False
        shape = (gen.rng.randint(1, 9), gen.rng.randint(1, 9))
        source = gen.random_array(np.dtype(np.float32), shape)
        source_name = gen.model_input(source, declared=list(shape))
        trip, count = self.shape_arithmetic_trip(shape, source_name)
        base = gen.outer_tensor(dtype)
        gen.feature("loop-trip-shape-arithmetic")
        initial = gen.node("SequenceEmpty", [], dtype=onnx_dtype(dtype))
        i_info, cond_info, i_name, cond_name = gen.loop_header()
        acc_name = gen.fresh("acc")
        acc_info = helper.make_tensor_sequence_value_info(acc_name, onnx_dtype(dtype), None)
        gen.node_stack.append([])
        step = gen.node("Cast", [i_name], to=onnx_dtype(dtype))
        element = gen.node("Add", [base.name, step])
        front = gen.chance(0.5)
        position = gen.constant(np.array(0)) if front else i_name
        appended = gen.node("SequenceInsert", [acc_name, element, position])
        cond_out = gen.node("Identity", [cond_name])
        body = helper.make_graph(
            gen.node_stack.pop(),
            gen.fresh("body"),
            [i_info, cond_info, acc_info],
            [
                helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
                helper.make_tensor_sequence_value_info(appended, onnx_dtype(dtype), None),
            ],
        )
        final = gen.node("Loop", [trip, gen.loop_condition(), initial], body=body)
        produced = [(base.value + np.array(k, dtype=dtype)).astype(dtype) for k in range(count)]
        gen.add_seq(final, produced[::-1] if front else produced, dtype)
        return True

    def map_in_a_loop_body(self) -> bool:
        """A loop of static trip count over a list known only once an If with a constant
        condition is inlined, whose body maps over the carried list and reads its last
        mapped element (a SequenceMap that must not become a Loop first)."""
        gen = self.gen
        dtype = gen.rng.choice([d for d in gen.dtype_pool if d.type in FLOAT_TYPES] or [None])
        if dtype is None or dtype == np.float16:  # float16 ops in a map body: trap 11
            return False
        shape = gen.random_shape(1)
        tensors = [gen.outer_tensor_shaped(dtype, shape) for _ in range(gen.rng.randint(1, 3))]
        gen.feature("map-in-loop-body")
        flag = gen.constant(np.array(True), "node")

        def start() -> tuple[list[onnx.ValueInfoProto], None]:
            name = gen.node("SequenceConstruct", [t.name for t in tensors])
            return [helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)], None

        def other() -> tuple[list[onnx.ValueInfoProto], None]:
            name = gen.node("SequenceConstruct", [tensors[0].name])
            return [helper.make_tensor_sequence_value_info(name, onnx_dtype(dtype), None)], None

        then_graph, _ = gen.branch(start)
        else_graph, _ = gen.branch(other)
        initial = gen.node("If", [flag], then_branch=then_graph, else_branch=else_graph)
        count = gen.rng.randint(1, 3)
        i_info, cond_info, _, cond_name = gen.loop_header()
        acc_name = gen.fresh("acc")
        acc_info = helper.make_tensor_sequence_value_info(acc_name, onnx_dtype(dtype), list(shape))
        gen.node_stack.append([])
        x_in, x_out = gen.fresh("mx"), gen.fresh("my")
        map_body = helper.make_graph(
            [helper.make_node("Neg", [x_in], [x_out], name=gen.fresh("n_Neg_"))],
            gen.fresh("map_body"),
            [helper.make_tensor_value_info(x_in, onnx_dtype(dtype), list(shape))],
            [helper.make_tensor_value_info(x_out, onnx_dtype(dtype), list(shape))],
        )
        mapped = gen.node("SequenceMap", [acc_name], body=map_body)
        last = gen.node("SequenceAt", [mapped, gen.constant(np.array(-1))])
        appended = gen.node("SequenceInsert", [acc_name, last])
        cond_out = gen.node("Identity", [cond_name])
        body = helper.make_graph(
            gen.node_stack.pop(),
            gen.fresh("body"),
            [i_info, cond_info, acc_info],
            [
                helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
                helper.make_tensor_sequence_value_info(appended, onnx_dtype(dtype), list(shape)),
            ],
        )
        trip = gen.constant(np.array(count, dtype=np.int64), "node")
        final = gen.node("Loop", [trip, gen.constant(np.array(True), "node"), initial], body=body)
        values = [t.value for t in tensors]
        for _ in range(count):
            values.append(np.negative(values[-1]))
        gen.add_seq(final, values, dtype)
        return True


class _MapBody:
    """A random SequenceMap over `seq`: the body, its declared types and the mapped values."""

    def __init__(self, gen: _Generator, seq: Seq) -> None:
        self.gen = gen
        self.rng = gen.rng
        self.seq = seq
        self.n = len(seq.elements)
        # the axes of the body's current value where ONNX inference's dims contradict the
        # values: no MatMul over such an inner dim
        self.unlike = gen.typed_unlike(seq) if len(gen.node_stack) == 1 else set()

    def emit(self) -> bool:
        gen, seq = self.gen, self.seq
        node_inputs = [seq.name]
        body_inputs = []
        x_name = gen.fresh("x")
        body_inputs.append(self.input_info(x_name, seq.dtype, seq.elements))
        # per body value: (name, one array per iteration)
        current = (x_name, list(seq.elements))
        extra: tuple[str, list[np.ndarray]] | None = None
        extra_kind = self.rng.choices(["none", "tensor", "zip", "outer"], [3, 2, 2, 1])[0]
        numeric = seq.dtype.type in NUMERIC_TYPES
        if extra_kind == "tensor" and numeric:
            gen.feature("map-extra-tensor")
            tensor = self.broadcastable(seq.dtype)
            node_inputs.append(tensor.name)
            name = gen.fresh("t")
            body_inputs.append(self.input_info(name, seq.dtype, [tensor.value]))
            extra = (name, [tensor.value] * self.n)
        elif extra_kind == "outer" and numeric:
            gen.feature("map-outer-scope")
            tensor = self.broadcastable(seq.dtype)
            extra = (tensor.name, [tensor.value] * self.n)
        elif extra_kind == "zip":
            gen.feature("map-zipped-sequence")
            twin = self.twin()
            node_inputs.append(twin.name)
            name = gen.fresh("y")
            body_inputs.append(self.input_info(name, twin.dtype, twin.elements))
            extra = (name, list(twin.elements))

        gen.node_stack.append([])
        for _ in range(self.rng.randint(1, 3)):
            current = self.body_op(current, extra)
        results = [current]
        if self.rng.random() < 0.3:
            gen.feature("map-two-outputs")
            second = extra or (x_name, list(seq.elements))
            results.append((gen.node("Identity", [second[0]]), second[1]))
        body_nodes = gen.node_stack.pop()
        body_outputs = [self.output_info(name, values) for name, values in results]
        body = helper.make_graph(body_nodes, gen.fresh("map_body"), body_inputs, body_outputs)
        outputs = gen.node("SequenceMap", node_inputs, len(results), body=body)
        for name, (_, values) in zip([outputs] if len(results) == 1 else outputs, results):
            gen.add_seq(name, values, values[0].dtype)
        return True

    def input_info(self, name: str, dtype: np.dtype, values: list[np.ndarray]):
        shapes = {v.shape for v in values}
        ranks = {v.ndim for v in values}
        dims: list[Any] | None = None
        if len(shapes) == 1 and self.rng.random() < 0.4 and not self.gen.allow_overridable:
            dims = list(next(iter(shapes)))
        elif len(ranks) == 1 and self.rng.random() < 0.5:
            dims = [None] * next(iter(ranks))
        return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)

    def output_info(self, name: str, values: list[np.ndarray]):
        shapes = {v.shape for v in values}
        dims: list[Any] | None = None
        if len(shapes) == 1 and self.rng.random() < 0.5 and not self.gen.allow_overridable:
            self.gen.feature("map-static-output-shape")
            dims = list(next(iter(shapes)))
        return helper.make_tensor_value_info(name, onnx_dtype(values[0].dtype), dims)

    def broadcastable(self, dtype: np.dtype) -> Tensor:
        """A tensor that broadcasts against every element: a scalar, [1], or the common shape."""
        gen = self.gen
        shapes = {e.shape for e in self.seq.elements}
        options: list[tuple[int, ...]] = [(), (1,)]
        if len(shapes) == 1:
            options.append(next(iter(shapes)))
        return gen.outer_tensor_shaped(dtype, self.rng.choice(options))

    def twin(self) -> Seq:
        """A sequence of the same length whose elements have the same shapes as `seq`'s."""
        gen, seq = self.gen, self.seq
        if self.rng.random() < 0.3:
            return seq
        members = [gen.outer_tensor_shaped(seq.dtype, e.shape) for e in seq.elements]
        name = gen.node("SequenceConstruct", [t.name for t in members])
        return gen.add_seq(name, [t.value for t in members], seq.dtype)

    def body_op(self, current, extra):
        gen, rng = self.gen, self.rng
        name, values = current
        dtype = values[0].dtype
        numeric = dtype.type in NUMERIC_TYPES
        ranks = {v.ndim for v in values}
        last_dims = {v.shape[-1] if v.ndim else None for v in values}
        choices = ["unary"]
        if numeric:
            choices += ["cast", "sequence-ops"]
            if (
                extra is not None
                and all(_broadcasts(v.shape, e.shape) for v, e in zip(values, extra[1]))
                and extra[1][0].dtype == dtype
            ):
                choices += ["binary", "binary"]
            if min(ranks) >= 1 and len(last_dims) == 1 and -1 not in self.unlike:
                choices += ["matmul", "matmul"]
            if min(ranks) >= 1:
                choices.append("transpose")
            if min(ranks) >= 1 and all(v.size for v in values):  # onnxruntime: no empty ReduceSum
                choices.append("reduce")
            if min(ranks) >= 1 and all(v.shape[0] > 0 for v in values) and rng.random() < 0.15:
                choices.append("nested")
        kind = rng.choice(choices)
        gen.feature(f"map-body-{kind}")
        if self.unlike and kind == "transpose" and len(ranks) == 1:
            (rank,) = ranks
            self.unlike = {-1 - rank - axis for axis in self.unlike}
        elif self.unlike and kind in ("transpose", "reduce"):  # axes may move: all of them
            self.unlike = set(range(-max(ranks), 0))
        if dtype == np.float16:
            gen.ort_may_reject = gen.ort_may_reject or "float16 ops in a SequenceMap body"
        if kind == "unary":
            ops = ["Identity"] + (["Neg", "Abs"] if numeric else ["Not"] * (dtype == np.bool_))
            if dtype.kind == "f":
                ops.append("Relu")
            op = rng.choice(ops)
            fn = {
                "Identity": lambda v: v,
                "Neg": np.negative,
                "Abs": np.abs,
                "Not": np.logical_not,
                "Relu": lambda v: np.maximum(v, 0).astype(v.dtype),
            }[op]
            return gen.node(op, [name]), [fn(v) for v in values]
        if kind == "binary":
            op = rng.choice(["Add", "Mul", "Sub"])
            fn = {"Add": np.add, "Mul": np.multiply, "Sub": np.subtract}[op]
            first, second = (name, extra[0]) if rng.random() < 0.7 else (extra[0], name)
            pairs = zip(values, extra[1]) if first == name else zip(extra[1], values)
            return gen.node(op, [first, second]), [fn(a, b).astype(dtype) for a, b in pairs]
        if kind == "cast":
            target = np.dtype(rng.choice([t for t in NUMERIC_TYPES if np.dtype(t) != dtype]))
            return gen.node("Cast", [name], to=onnx_dtype(target)), [
                v.astype(target) for v in values
            ]
        if kind == "matmul":
            (k,) = last_dims
            weight = gen.random_array(dtype, (k, rng.randint(1, 3)))
            if rng.random() < 0.5:
                weight_name = gen.constant(weight, "node")
            else:
                gen.feature("map-outer-scope")
                weight_name = gen.fresh("w")
                gen.initializers.append(numpy_helper.from_array(weight, weight_name))
            return gen.node("MatMul", [name, weight_name]), [
                np.matmul(v, weight).astype(dtype) for v in values
            ]
        if kind == "reduce":
            axis = rng.randint(-min(ranks), min(ranks) - 1)
            keepdims = 1 if rng.random() < 0.8 else 0
            axes = gen.constant(np.array([axis], dtype=np.int64), "node")
            result = gen.node("ReduceSum", [name, axes], keepdims=keepdims)
            return result, [
                np.sum(v, axis=axis, keepdims=bool(keepdims)).astype(dtype) for v in values
            ]
        if kind == "transpose":
            return gen.node("Transpose", [name]), [np.transpose(v) for v in values]
        if kind == "sequence-ops":
            pair = gen.node("SequenceConstruct", [name, name])
            stacked = gen.node("ConcatFromSequence", [pair], axis=0, new_axis=1)
            return stacked, [np.stack([v, v]) for v in values]
        # nested SequenceMap: split on axis 0, negate each slice, concatenate back
        gen.feature("map-nested")
        gen.ort_may_reject = "a SequenceMap nested in a SequenceMap body"
        parts = gen.node("SplitToSequence", [name], axis=0, keepdims=1)
        inner_in, inner_out = gen.fresh("ix"), gen.fresh("iy")
        inner = helper.make_graph(
            [helper.make_node("Neg", [inner_in], [inner_out], name=gen.fresh("n_Neg_"))],
            gen.fresh("inner_body"),
            [helper.make_tensor_value_info(inner_in, onnx_dtype(dtype), None)],
            [helper.make_tensor_value_info(inner_out, onnx_dtype(dtype), None)],
        )
        mapped = gen.node("SequenceMap", [parts], body=inner)
        joined = gen.node("ConcatFromSequence", [mapped], axis=0)
        return joined, [np.negative(v) for v in values]


def _broadcasts(shape: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """`other` broadcasts to `shape` and the result has `shape`."""
    if len(other) > len(shape):
        return False
    return all(o in (1, s) for s, o in zip(shape[::-1], other[::-1]))


def _concat(elements: list[np.ndarray], axis: int, new_axis: int) -> np.ndarray:
    if new_axis:
        return np.stack(elements, axis=axis)
    return np.concatenate(elements, axis=axis)
