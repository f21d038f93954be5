"""Static tensor values: constants, trusted initializers and folded shape arithmetic.

A value is static when its content is fixed for every run of the model: the output of a Constant
node, an initializer that is not also a graph input (an initializer that is a graph input can be
overridden by the caller), or the result of any deterministic operator on static values and
static dims. Common shape arithmetic folds with numpy here (Shape, Size, Gather, Slice, Concat,
Squeeze, Unsqueeze, Cast, Reshape, Add, Sub, Mul, Div, Where, Equal...); any other
default-domain operator whose inputs are all static (Min, Max, Floor, ReduceMin, Range, Mod...)
is evaluated by `onnx.reference`, one node at a time. Gather and Slice of a Shape fold when the
dims they pick are static, even if others are not. Only small tensors are folded (inputs and
results of at most `MAX_FOLD_ELEMENTS` elements); this is for positions, split sizes, trip
counts and lengths, not for weights.

Answers are cached (see `StaticValues` for which "not static" ones, and for how long), an
operator is answered "not static" as soon as one operand it needs is, and the walk up the
producers is iterative, so deep chains cannot overflow the stack.
"""

from __future__ import annotations

__all__ = ["MAX_FOLD_ELEMENTS", "StaticValues", "not_one_element", "static_shape"]

import logging
import warnings
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

logger = logging.getLogger(__name__)

MAX_FOLD_ELEMENTS = 4096
_MAX_FOLD_ELEMENTS = MAX_FOLD_ELEMENTS

_Folder = Callable[["StaticValues", ir.Node], "np.ndarray | None"]


class StaticValues:
    """Answers "is this value's content known before running the model?", with a cache.

    The cache is only valid while rewrites preserve meaning (which every seqlower rule does): a
    value's producer never changes, and a replaced input always computes the same content.
    Static contents are cached, and so are the "not static" answers that no rewrite can change
    (the value reads a model input, an overridable initializer, a random operator...). A value
    that is not static only because it reads something a rule may still replace by a constant
    (a SequenceLength, an If, a shape not inferred yet) gets a provisional answer. Without
    `generation`, provisional answers last one question: what a rewrite makes static is seen at
    once. With it (a callable whose result changes whenever the model may have changed, such as
    `Rewriter.generation`), they last until it changes: a chain of 10,000 Identity nodes after
    a SequenceAt is then walked once, not once per node (quadratic: minutes).
    `opset` is the default-domain opset that `onnx.reference` evaluates other operators in.
    """

    def __init__(
        self, opset: int | None = None, generation: Callable[[], int] | None = None
    ) -> None:
        self._cache: dict[ir.Value, np.ndarray | None] = {}
        self._opset = opset
        self._generation = generation
        self._seen = generation() if generation is not None else 0
        self._soft: set[ir.Value] | None = None  # not static, for now (provisional answers)

    def get(self, value: ir.Value | None) -> np.ndarray | None:
        """The content of `value` if it is static, else None."""
        if value is None:
            return None
        if value in self._cache:
            return self._cache[value]
        if self._soft is not None and self._generation is not None:
            seen = self._generation()
            if seen != self._seen:  # the model changed: provisional answers may have too
                self._seen, self._soft = seen, None
        if self._soft is not None:  # asked by a folder while answering another question,
            if value not in self._soft:  # or provisional answers kept since the last change
                self._resolve(value, self._soft)
            return self._cache.get(value)
        self._soft = set()
        try:
            self._resolve(value, self._soft)
        finally:
            if self._generation is None:
                self._soft = None
        return self._cache.get(value)

    def is_settled(self, value: ir.Value) -> bool:
        """Whether the answer for `value` is final: its content, or a "not static" that no
        rewrite can change (not a provisional answer, and not asked yet)."""
        return value in self._cache

    def get_int(self, value: ir.Value | None) -> int | None:
        """The content of a static integer scalar (or one-element tensor), else None."""
        array = self.get(value)
        if array is None or array.size != 1 or array.dtype.kind not in "iu":
            return None
        return int(array.reshape(()))

    def get_ints(self, value: ir.Value | None) -> list[int] | None:
        """The content of a static integer 1-D tensor, else None."""
        array = self.get(value)
        if array is None or array.ndim != 1 or array.dtype.kind not in "iu":
            return None
        return [int(x) for x in array]

    def _resolve(self, root: ir.Value, soft: set[ir.Value]) -> None:
        """Answer for `root`, operands first (an explicit stack, not recursion). An operator
        that needs all its operands static is answered as soon as one is not."""
        stack = [root]
        # a value is looked at again after each of its operands: what it reads is found once
        plans: dict[ir.Value, tuple[list[ir.Value], bool]] = {}
        while stack:
            value = stack[-1]
            if value in self._cache or value in soft:
                stack.pop()
                continue
            plan = plans.get(value)
            if plan is None:
                plan = plans[value] = (_operands(value), not _reads_shapes(value))
            operands, needs_all = plan
            pending = None
            for operand in operands:
                if operand in self._cache:
                    if self._cache[operand] is None and needs_all:
                        self._cache[value] = None  # as final as the operand's answer
                        break
                elif operand in soft:
                    if needs_all:
                        soft.add(value)
                        break
                else:
                    pending = operand
                    break
            else:
                stack.pop()
                result, final = self._compute(value)
                if result is not None or final:
                    self._cache[value] = result
                else:
                    soft.add(value)
                continue
            if pending is not None:
                stack.append(pending)
            else:
                stack.pop()

    def _compute(self, value: ir.Value) -> tuple[np.ndarray | None, bool]:
        """The content of `value` (its operands answered), and whether a "not static" answer
        is final."""
        if value.is_initializer():
            if value.is_graph_input() or value.const_value is None:
                return None, True
            return _small_array(value.const_value), True
        producer = value.producer()
        if producer is None:
            return None, True  # a model input, or an input of a subgraph
        if producer.domain != "":
            return None, False  # a function call may still be inlined
        if producer.op_type == "If":
            return self._taken_branch(producer, value), False
        folder = _FOLDERS.get(producer.op_type)
        try:
            if folder is not None:
                result = folder(self, producer)
            elif _evaluable(producer):
                result = self._evaluate(producer, value)
            else:
                return None, producer.op_type in _NOT_DETERMINISTIC
        except (ValueError, IndexError, TypeError, OverflowError, ZeroDivisionError):
            return None, True
        if result is not None and result.size > _MAX_FOLD_ELEMENTS:
            return None, True
        return result, not _reads_shapes(value)

    def _taken_branch(self, node: ir.Node, value: ir.Value) -> np.ndarray | None:
        """If(c static) -> the output of the branch `c` takes, when that is static (it may read
        outer values: min(h, w) written as If(h < w, h, w))."""
        condition = self.get(node.inputs[0]) if node.inputs else None
        if condition is None or condition.size != 1:
            return None
        key = "then_branch" if bool(condition.reshape(())) else "else_branch"
        attribute = node.attributes.get(key)
        if attribute is None or attribute.type != ir.AttributeType.GRAPH:
            return None
        branch = attribute.as_graph()
        index = value.index()
        return self.get(branch.outputs[index]) if index < len(branch.outputs) else None

    def _evaluate(self, node: ir.Node, value: ir.Value) -> np.ndarray | None:
        """`value` (an output of `node`) computed by onnx.reference from static inputs."""
        arrays = self.inputs(node)
        if arrays is None:
            return None
        extremum = _EXTREMA.get(node.op_type)
        if extremum is not None and len(node.outputs) == 1 and None not in node.inputs:
            return _extremum(extremum, arrays)
        from onnx.reference import ReferenceEvaluator  # loaded only when something folds

        proto = ir.serde.serialize_node(node)
        names = [v.name for v in node.inputs if v is not None]
        feeds = dict(zip(names, arrays))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy overflow warnings in integer ops
                opsets = {"": self._opset} if self._opset is not None else None
                results = ReferenceEvaluator(proto, opsets=opsets).run(None, feeds)
        except Exception as error:  # an operator onnx.reference lacks or rejects: not static
            logger.debug("no static value for %s '%s': %s", node.op_type, node.name, error)
            return None
        for output, result in zip(node.outputs, results):
            if output is not value and output not in self._cache:
                array = np.asarray(result) if isinstance(result, np.ndarray) else None
                small = array is not None and array.size <= _MAX_FOLD_ELEMENTS
                self._cache[output] = array if small else None
        index = value.index()
        result = results[index] if index < len(results) else None
        return np.asarray(result) if isinstance(result, (np.ndarray, np.generic)) else None

    def inputs(self, node: ir.Node) -> list[np.ndarray] | None:
        """The contents of all of `node`'s present inputs, or None if one is not static."""
        arrays = []
        for value in node.inputs:
            if value is None:
                continue
            array = self.get(value)
            if array is None:
                return None
            arrays.append(array)
        return arrays


# Max and Min as onnx.reference computes them, without building an evaluator for each node
# (its construction took 70 us a node: 20,000 of them in the analyses of one lowered chain)
_EXTREMA: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Max": np.maximum,
    "Min": np.minimum,
}


def _extremum(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray], arrays: list[np.ndarray]
) -> np.ndarray | None:
    """`fn` over `arrays` as onnx.reference's Max and Min run: two operands of one dtype (else
    no answer), one copied, more reduced in turn (numpy's promotion); None where it fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if len(arrays) == 2:
                if arrays[0].dtype != arrays[1].dtype:
                    return None
                result = fn(arrays[0], arrays[1])
                if np.asarray(result).dtype != arrays[0].dtype:
                    return None
            elif len(arrays) == 1:
                result = arrays[0].copy()
            else:
                result = arrays[0]
                for array in arrays[1:]:
                    result = fn(result, array)
    except Exception:  # as onnx.reference's failures: not static
        return None
    return np.asarray(result) if isinstance(result, (np.ndarray, np.generic)) else None


# Operators whose folding needs no operand content (they read shapes); operators whose folding
# reads shapes (which inference may still refine); operators never evaluated: non-deterministic
# ones, and those with subgraphs or non-tensor values.
_SHAPE_ONLY = frozenset({"Constant", "Shape", "Size"})
_SHAPE_READERS = frozenset({"Shape", "Size", "Gather", "Slice", "If"})
_NOT_DETERMINISTIC = frozenset(
    {
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
    }
)
_NOT_EVALUATED = _NOT_DETERMINISTIC | frozenset(
    {
        "If",
        "Loop",
        "Scan",
        "ConcatFromSequence",
        "SplitToSequence",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
    }
)


def _operands(value: ir.Value) -> list[ir.Value]:
    """The values whose content folding `value` may read (resolved before it)."""
    producer = value.producer()
    if producer is None or producer.domain != "" or producer.op_type in _SHAPE_ONLY:
        return []
    if producer.op_type == "If":
        return producer.inputs[:1]  # type: ignore[return-value]
    if producer.op_type not in _FOLDERS and not _evaluable(producer):
        return []
    return [v for v in producer.inputs if v is not None]


def _reads_shapes(value: ir.Value) -> bool:
    """True when folding `value` may read declared shapes rather than contents only (or, for an
    If, a branch output answered on its own): its "not static" answer is provisional."""
    producer = value.producer()
    return producer is not None and producer.op_type in _SHAPE_READERS


def _evaluable(node: ir.Node) -> bool:
    """True for a default-domain operator onnx.reference may evaluate on static tensors."""
    if node.op_type in _NOT_EVALUATED or not node.inputs or node.op_type.startswith("Sequence"):
        return False
    if any(a.is_ref() or a.type in _GRAPH_ATTRIBUTES for a in node.attributes.values()):
        return False
    return all(
        isinstance(v.type, ir.TensorType) or v.type is None
        for v in (*node.inputs, *node.outputs)
        if v is not None
    )


_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _small_array(tensor: ir.TensorProtocol) -> np.ndarray | None:
    if tensor.size > _MAX_FOLD_ELEMENTS:
        return None
    try:
        return tensor.numpy()
    except Exception:  # an unreadable external tensor is simply not static
        return None


def static_shape(value: ir.Value) -> list[int] | None:
    """The shape of `value` when every dim is a known integer, else None."""
    shape = value.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return [int(d) for d in shape]


def not_one_element(value: ir.Value) -> bool:
    """Whether `value`'s shape is static and of other than one element: its content, static
    or not, is then no one-element constant (what the cleanup's `x + 0` and `i * -1` look
    for), said without walking up its producers as `StaticValues.get` does."""
    shape = value.shape
    if shape is None:
        return False
    size = 1
    for dim in shape:
        if not isinstance(dim, int):
            return False
        size *= dim
    return size != 1


def _fold_constant(_: StaticValues, node: ir.Node) -> np.ndarray | None:
    for name, attr in node.attributes.items():
        if attr.is_ref():
            return None
        if name == "value":
            # attr.value, not attr.as_tensor(): its runtime protocol check costs ~50 us
            return _small_array(attr.value) if attr.type == ir.AttributeType.TENSOR else None
        if name == "value_int":
            return np.array(attr.as_int(), dtype=np.int64)
        if name == "value_ints":
            return np.array(list(attr.as_ints()), dtype=np.int64)
        if name == "value_float":
            return np.array(attr.as_float(), dtype=np.float32)
        if name == "value_floats":
            return np.array(list(attr.as_floats()), dtype=np.float32)
    return None


def _fold_shape(_: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = node.inputs[0]
    if data is None or data.shape is None:
        return None
    rank = len(data.shape)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    dims = list(data.shape)[slice(start, end)]
    if not all(isinstance(d, int) for d in dims):
        return None
    return np.array(dims, dtype=np.int64)


def _fold_size(_: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = node.inputs[0]
    shape = static_shape(data) if data is not None else None
    return None if shape is None else np.array(int(np.prod(shape)), dtype=np.int64)


def _fold_unary(fn: Callable[[np.ndarray], np.ndarray]) -> _Folder:
    def fold(values: StaticValues, node: ir.Node) -> np.ndarray | None:
        arrays = values.inputs(node)
        return None if arrays is None else fn(arrays[0])

    return fold


def _fold_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> _Folder:
    def fold(values: StaticValues, node: ir.Node) -> np.ndarray | None:
        arrays = values.inputs(node)
        if arrays is None or len(arrays) != 2:
            return None
        result = np.asarray(fn(arrays[0], arrays[1]))
        return result.astype(np.result_type(arrays[0], arrays[1]), copy=False)

    return fold


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        # ONNX integer Div truncates toward zero (like C), numpy floors.
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


def _partial_shape(value: ir.Value | None) -> np.ndarray | None:
    """The output of Shape(x) as an object array of dims (int, or None where symbolic)."""
    producer = value.producer() if value is not None else None
    if producer is None or producer.op_type != "Shape" or producer.domain != "":
        return None
    data = producer.inputs[0]
    if data is None or data.shape is None:
        return None
    rank = len(data.shape)
    start = producer.attributes.get_int("start", 0)
    end = producer.attributes.get_int("end", rank)
    dims = [d if isinstance(d, int) else None for d in list(data.shape)[slice(start, end)]]
    return np.array(dims, dtype=object)


def _static_dims(dims: object) -> np.ndarray | None:
    dims = np.asarray(dims, dtype=object)  # np.take of one index gives the element itself
    if any(d is None for d in dims.reshape(-1)):
        return None
    return dims.astype(np.int64)


def _fold_gather(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    arrays = values.inputs(node)
    if arrays is None:
        # Gather(Shape(x), i): the picked dims may be static while others are symbolic
        dims = _partial_shape(node.inputs[0])
        indices = values.get(node.inputs[1]) if len(node.inputs) > 1 else None
        if dims is None or indices is None or node.attributes.get_int("axis", 0) != 0:
            return None
        return _static_dims(np.take(dims, indices, axis=0))
    data, indices = arrays
    return np.take(data, indices, axis=node.attributes.get_int("axis", 0))


def _fold_concat(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    arrays = values.inputs(node)
    if not arrays:
        return None
    return np.concatenate(arrays, axis=node.attributes.get_int("axis", 0))


def _axes(values: StaticValues, node: ir.Node) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return values.get_ints(node.inputs[1])
    axes = node.attributes.get_ints("axes")
    return None if axes is None else list(axes)


def _fold_squeeze(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    if data is None:
        return None
    axes = _axes(values, node)
    return np.squeeze(data, axis=None if axes is None else tuple(axes))


def _fold_unsqueeze(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    axes = _axes(values, node)
    if data is None or axes is None:
        return None
    rank = data.ndim + len(axes)
    return np.expand_dims(data, tuple(sorted(a % rank for a in axes)))


def _fold_reshape(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    shape = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 else None
    if data is None or shape is None:
        return None
    target = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return data.reshape(target)


def _fold_slice(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    partial = data is None
    if partial:  # Slice(Shape(x), ...): the sliced dims may be static while others are not
        data = _partial_shape(node.inputs[0])
    if data is None or len(node.inputs) < 3:
        return None
    starts = values.get_ints(node.inputs[1])
    ends = values.get_ints(node.inputs[2])
    if starts is None or ends is None:
        return None
    axes = values.get_ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    steps = values.get_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)
    result = data[tuple(index)]
    return _static_dims(result) if partial else result


def _fold_cast(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    to = node.attributes.get_int("to")
    if data is None or to is None:
        return None
    return data.astype(ir.DataType(to).numpy())


def _fold_constant_of_shape(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    shape = values.get_ints(node.inputs[0])
    if shape is None or any(d < 0 for d in shape) or np.prod(shape) > _MAX_FOLD_ELEMENTS:
        return None
    fill = node.attributes.get("value")
    if fill is None:
        return np.zeros(shape, dtype=np.float32)
    if fill.is_ref():
        return None
    return np.full(shape, fill.as_tensor().numpy().reshape(-1)[0])


def _fold_expand(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    data = values.get(node.inputs[0])
    shape = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 else None
    if data is None or shape is None:
        return None
    target = np.broadcast_shapes(data.shape, tuple(shape))
    if np.prod(target) > _MAX_FOLD_ELEMENTS:
        return None
    return np.broadcast_to(data, target).copy()


def _fold_where(values: StaticValues, node: ir.Node) -> np.ndarray | None:
    arrays = values.inputs(node)
    if arrays is None or len(arrays) != 3:
        return None
    condition, x, y = arrays
    return np.where(condition, x, y).astype(np.result_type(x, y), copy=False)


def _fold_compare(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> _Folder:
    def fold(values: StaticValues, node: ir.Node) -> np.ndarray | None:
        arrays = values.inputs(node)
        if arrays is None or len(arrays) != 2:
            return None
        return np.asarray(fn(arrays[0], arrays[1]), dtype=np.bool_)

    return fold


_FOLDERS: dict[str, _Folder] = {
    "Constant": _fold_constant,
    "Shape": _fold_shape,
    "Size": _fold_size,
    "Identity": _fold_unary(lambda x: x),
    "Neg": _fold_unary(np.negative),
    "Add": _fold_binary(np.add),
    "Sub": _fold_binary(np.subtract),
    "Mul": _fold_binary(np.multiply),
    "Div": _fold_binary(_int_div),
    "Gather": _fold_gather,
    "Concat": _fold_concat,
    "Squeeze": _fold_squeeze,
    "Unsqueeze": _fold_unsqueeze,
    "Reshape": _fold_reshape,
    "Slice": _fold_slice,
    "Cast": _fold_cast,
    "ConstantOfShape": _fold_constant_of_shape,
    "Expand": _fold_expand,
    "Where": _fold_where,
    "Equal": _fold_compare(np.equal),
    "Less": _fold_compare(np.less),
    "Greater": _fold_compare(np.greater),
    "Not": _fold_unary(np.logical_not),
}
