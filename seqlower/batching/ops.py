"""Batching rules, one entry per body operator: f(x) per element -> f'(X) once on the stack.

X is the batched input [N, *S] of element shape S (rank r); U an unbatched input.

    Relu(x) ... unary                   -> Relu(X)
    Add(x, U) ... broadcasting          -> Add(Unsqueeze(X, 1..k), U)  (X lifted to result rank)
    MatMul(x, W), W of rank <= 2        -> MatMul(X, W)
    MatMul(a, b) otherwise              -> Squeeze(MatMul(lift(A'), lift(B')))  (vectors: matrices)
    Gemm(a, B, C)                       -> Add(Mul(MatMul(A or A^T, B or B^T), alpha), beta*C)
    ReduceSum(x, axes=[a], keepdims)    -> ReduceSum(X, axes=[a % r + 1], keepdims)
    ReduceSum(x) (all axes)             -> ReduceSum(X, axes=[1..r])
    ArgMax(x, axis=a)                   -> ArgMax(X, axis=a % r + 1)
    Softmax(x, axis=a)                  -> Softmax(X, axis=a % r + 1)   (also LogSoftmax, Hardmax)
    Transpose(x, perm=p)                -> Transpose(X, perm=[0, p + 1])
    Reshape(x, t)                       -> Reshape(X, [N, *t resolved per element])
    Flatten(x, axis=a)                  -> Reshape(X, [N, prod(S[:a]), prod(S[a:])])
    Squeeze(x, axes) / Unsqueeze(x, axes) -> the same with axes + 1
    Concat(x, U, axis=a)                -> Concat(X, Expand(U, [N, ...]), axis=a % r + 1)
    Slice(x, starts, ends, axes, steps) -> Slice(X, starts, ends, axes % r + 1, steps)
    Slice(x, s, t, [a]), s or t per element -> X itself and a mask of [s, t) along a + 1 (ragged)
    Slice(x, s, s + w, [a]), x unbatched     -> Gather(x, s + Range(w)) and its mask (ragged, w
                                            positions, not d: `seqlower.batching.windows`)
    Slice(x, s, t, [a]), x unbatched, no w   -> also x's rows in the windows, flat, where the
                                            loop holds them so (`seqlower.batching.windows`)
    ReduceSum(ragged, axes with a)      -> ReduceSum(Where(mask, X, 0))  (Max/Min: lowest/highest,
                                            plus the sum of the NaNs within (0 or NaN);
                                            Mean: the masked sum over the count, at least 1;
                                            chunks read only by such reductions along the
                                            split axis: segment reductions,
                                            `seqlower.batching.segments`)
    Gather(x, I, axis=a)                -> Gather(X, I, axis=a % r + 1)
    Gather(U, i, axis=a)                -> Transpose(Gather(U, I, axis=a), [a, 0..])
    Gather(x, i, axis=0), both per element -> GatherND(X, Unsqueeze(I, -1), batch_dims=1)
    GatherElements / GatherND           -> with the unbatched side expanded; axis/batch_dims + 1
    Split(x, axis=a)                    -> Split(X, axis=a % r + 1)
    Cast, Where, Clip, Identity ...     -> the same op on X
    Shape(x, start, end)                -> Shape(X)[start + 1: end + 1]  (unbatched: elements
                                            share one shape) or a constant when S is static
    Size(x)                             -> ReduceProd(Shape(X)[1:])      (unbatched) or constant
    Conv(x, W, B), x = [1, C, H, W]     -> Unsqueeze(Conv(Squeeze(X, 1), W, B), 1)  (also pooling,
                                            normalization and other ops over a batch axis of 1)
    LayerNormalization(x, axis=a)       -> LayerNormalization(X, axis=a % r + 1)
    Expand(x, s) / Tile(x, s)           -> Expand(lift(X), [1, *s]) / Tile(X, [1, *s])
    TopK(x, k, axis=a) / CumSum(x, a)   -> axis % r + 1
    Einsum("ij,jk->ik", x, U)           -> Einsum("Zij,jk->Zik", X, U)

Extra inputs that decide a shape (Reshape's target, Slice bounds, Expand's shape...) must be
unbatched: all elements then keep one shape. The one exception is a ragged Slice (`h[i, :n_i]`),
held padded with a mask until a reduction over its sliced axis reads it. A rule refuses, with the
reason, whatever it cannot batch exactly.
"""

from __future__ import annotations

__all__ = ["OP_RULES", "RANDOM_OPS"]

import string

import numpy as np
import onnx_ir as ir

from seqlower.batching.core import Batched, Emitter, OpRule, OpView, normalize_axis
from seqlower.batching.means import ClampedMean
from seqlower.batching.segments import segment_reduce, segment_reducible
from seqlower.batching.windows import emit_window, flat_windows, read_in_place, window_width
from seqlower.rule import Refusal

RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"}
    | {"Bernoulli"}
)


def _unknown_rank(view: OpView) -> Refusal | None:
    for index, operand in enumerate(view.operands):
        if operand is not None and operand.rank is None:
            return Refusal(f"the rank of input {index} is unknown")
    return None


def _only_first_batched(view: OpView) -> Refusal | None:
    for index in range(1, len(view.operands)):
        if view.batched(index):
            return Refusal(f"input {index} differs per element")
    if not view.batched(0):
        return Refusal("only a secondary input differs per element")
    return None


def _first_batched_rank(view: OpView) -> int | Refusal:
    """The element rank of input 0 when it is the only input that differs per element."""
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    rank = view.rank(0)
    return Refusal("the element rank is unknown") if rank is None else rank


# -- same-shape ops: the op does not care about a leading axis --------------------------------


def _unary(view: OpView) -> Batched | Refusal:
    """Elementwise ops, and ops whose extra inputs are attributes-like (Clip's bounds...)."""
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    return Batched(lambda em, inputs: em.copy(view.node, inputs))


def _trailing(minimum_rank: int) -> OpRule:
    """Ops that act on the last `minimum_rank` axes only (Trilu: the last two)."""

    def rule(view: OpView) -> Batched | Refusal:
        refusal = _only_first_batched(view)
        if refusal is not None:
            return refusal
        rank = view.rank(0)
        if rank is None or rank < minimum_rank:
            return Refusal(f"the element rank is unknown or below {minimum_rank}")
        return Batched(lambda em, inputs: em.copy(view.node, inputs))

    return rule


def _cast_like(view: OpView) -> Batched | Refusal:
    """CastLike reads only the type of its second input."""
    return Batched(lambda em, inputs: em.copy(view.node, inputs), (view.batched(0),))


# -- broadcasting ---------------------------------------------------------------------------


def _elementwise(view: OpView) -> Batched | Refusal:
    """Multidirectional broadcasting: lift each batched operand to the element rank of the
    result, so that unbatched operands line up with element axes, never with the batch axis."""
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    target = max(operand.rank for operand in view.operands if operand is not None)  # type: ignore[type-var]
    operands = view.operands

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        lifted = [
            em.lift(value, operand.rank, target)  # type: ignore[arg-type]
            if operand is not None and operand.batched and value is not None
            else value
            for value, operand in zip(inputs, operands)
        ]
        return em.copy(view.node, lifted)

    return Batched(emit)


def _prelu(view: OpView) -> Batched | Refusal:
    """PRelu broadcasts the slope to X (one direction only)."""
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    if not view.batched(0):
        return Refusal("the slope differs per element but X does not")
    return _elementwise(view)


# -- MatMul and Gemm ------------------------------------------------------------------------


def _matmul(view: OpView) -> Batched | Refusal:
    """numpy.matmul per element. A batched vector operand becomes a one-row (A) or one-column
    (B) matrix, squeezed again afterwards; batched operands are lifted so that their matrix
    batch axes line up with those of the other operand."""
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    a, b = view.operand(0), view.operand(1)
    rank_a, rank_b = a.rank, b.rank
    assert rank_a is not None and rank_b is not None
    if rank_a == 0 or rank_b == 0:
        return Refusal("MatMul of a scalar")
    if a.batched and not b.batched and rank_b <= 2:
        # [N, ..., k] @ [k, m] or @ [k]: the leading axes act as rows already.
        return Batched(lambda em, inputs: em.copy(view.node, inputs))
    a_vector = a.batched and rank_a == 1
    b_vector = b.batched and rank_b == 1
    # matrix ranks after turning batched vectors into matrices; unbatched vectors stay vectors
    matrix_a = 2 if a_vector else rank_a
    matrix_b = 2 if b_vector else rank_b
    batch_rank = max(matrix_a - 2 if matrix_a >= 2 else 0, matrix_b - 2 if matrix_b >= 2 else 0)
    squeeze_axes = []
    if a_vector:
        # the row axis of A is last but one, or last when B is an unbatched vector
        squeeze_axes.append(-2 if matrix_b >= 2 else -1)
    if b_vector:
        squeeze_axes = [-2, -1] if a_vector else [-1]

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        left, right = inputs[0], inputs[1]
        assert left is not None and right is not None
        if a.batched:
            if a_vector:
                left = em.unsqueeze(left, [1])
            left = em.lift(left, matrix_a, batch_rank + 2)
        if b.batched:
            if b_vector:
                right = em.unsqueeze(right, [2])
            right = em.lift(right, matrix_b, batch_rank + 2)
        product = em.op("MatMul", [left, right])
        return [em.squeeze(product, squeeze_axes)]

    return Batched(emit)


def _gemm(view: OpView) -> Batched | Refusal:
    """Gemm takes 2-D operands only: the batched form is a MatMul, scaled and shifted."""
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    if view.rank(0) != 2 or view.rank(1) != 2:
        return Refusal("Gemm operands are not 2-D")
    alpha = view.node.attributes.get_float("alpha", 1.0)
    beta = view.node.attributes.get_float("beta", 1.0)
    trans_a, trans_b = view.attr_int("transA", 0), view.attr_int("transB", 0)
    has_c = view.present(2)
    c_rank = view.rank(2) if has_c else None

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        left, right = inputs[0], inputs[1]
        assert left is not None and right is not None
        if trans_a:
            left = em.transpose(left, [0, 2, 1] if view.batched(0) else [1, 0])
        if trans_b:
            right = em.transpose(right, [0, 2, 1] if view.batched(1) else [1, 0])
        result = em.op("MatMul", [left, right])
        dtype = view.node.outputs[0].dtype or ir.DataType.FLOAT
        if alpha != 1.0:
            result = em.op("Mul", [result, em.scalar(np.array(alpha, dtype=dtype.numpy()))])
        if has_c and inputs[2] is not None:
            c = inputs[2]
            if view.batched(2):
                c = em.lift(c, c_rank, 2)  # type: ignore[arg-type]
            if beta != 1.0:
                c = em.op("Mul", [c, em.scalar(np.array(beta, dtype=dtype.numpy()))])
            result = em.op("Add", [result, c])
        return [result]

    return Batched(emit)


# -- axis-carrying ops ---------------------------------------------------------------------


def _reduce(view: OpView) -> Batched | Refusal:
    """Reduce* with axes as an attribute or (ReduceSum from opset 13, the others from 18) as
    an input. Reducing all axes becomes reducing all element axes; keepdims is unaffected."""
    rank = _first_batched_rank(view)
    if isinstance(rank, Refusal):
        return rank
    ragged_axis = view.operand(0).ragged_axis
    axes_as_input = view.present(1)
    axes = view.static_ints(1) if axes_as_input else view.attr_ints("axes")
    if axes_as_input and axes is None:
        return Refusal("the reduction axes are computed at run time")
    noop = view.attr_int("noop_with_empty_axes", 0) == 1
    if not axes and noop:
        return Batched(lambda em, inputs: em.copy(view.node, inputs))
    scalar_element = not axes and rank == 0
    if scalar_element:
        shifted = [1]
    elif not axes:
        shifted = list(range(1, rank + 1))
    else:
        normalized = [normalize_axis(axis, rank) for axis in axes]
        if None in normalized:
            return Refusal(f"axes {axes} are out of range for rank {rank}")
        shifted = [axis + 1 for axis in normalized]  # type: ignore[operator]
    uses_input = axes_as_input or (
        not view.node.attributes.get("axes")
        and view.opset >= (13 if view.op_type == "ReduceSum" else 18)
    )
    masked = None
    if ragged_axis is not None:
        masked = _ragged_reduction(view, ragged_axis, shifted)
        if isinstance(masked, Refusal):
            return masked

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        overrides: dict[str, object] = {}
        if masked is not None:
            segments = em.segments.get(masked.source)  # type: ignore[arg-type]
            if segments is not None and shifted == [masked.axis + 1]:
                keepdims = masked.keepdims == 1
                fill = masked.identity
                return [segment_reduce(em, segments, view.op_type, keepdims, fill)]
            if em.rows is not None and shifted == [masked.axis + 1]:
                source = masked.source
                assert source is not None
                shape = view.operand(0).shape
                if em.rows.holds(source) and segment_reducible(
                    view.op_type, source.dtype, shape, masked.axis, em.opset
                ):  # held as rows anyway: a segment reduction of the rows, no padding read
                    rows = em.rows.segments(em, source)
                    keepdims = masked.keepdims == 1
                    return [segment_reduce(em, rows, view.op_type, keepdims, masked.identity)]
            data = masked.fill(em, data)
            if masked.mean:  # the sum over each element's positions, divided by their count
                keepdims = {"keepdims": masked.keepdims}
                total = em.op("ReduceSum", [data, em.ints(shifted)], keepdims)
                return [masked.divide(em, total)]
        if scalar_element:
            data = em.unsqueeze(data, [1])
            overrides["keepdims"] = 0
        if uses_input:
            rest = [data, em.ints(shifted)]
        else:
            rest = [data]
            overrides["axes"] = shifted
        reduced = em.copy(view.node, rest, overrides)
        if masked is not None and masked.keeps_nan:
            return [masked.with_nan(em, data, reduced[0], shifted)]
        return reduced

    return Batched(emit)


class _MaskedReduction:
    """How a reduction over the ragged axis reads the padded value: the positions outside each
    element's bounds filled with the reduction's identity (0 for a sum, the lowest value for a
    max, the highest for a min); a mean is the masked sum over the count of positions, at least
    1 (onnxruntime 1.20 to 1.32 gives 0 for the mean of nothing; the specification leaves it
    undefined)."""

    def __init__(self, view: OpView, ragged_axis: int, op_type: str, dtype: np.dtype) -> None:
        self.source = view.node.inputs[0]
        self.axis = ragged_axis
        self.rank = view.rank(0) or 0  # of the element
        self.keepdims = view.attr_int("keepdims", 1)
        self.mean = op_type == "ReduceMean"
        if op_type in ("ReduceSum", "ReduceMean"):
            self.identity = np.zeros((), dtype)
        elif dtype.kind == "f":
            sign = -1 if op_type == "ReduceMax" else 1
            self.identity = np.array(sign * np.inf, dtype)
        else:
            limits = np.iinfo(dtype)
            self.identity = np.array(limits.min if op_type == "ReduceMax" else limits.max, dtype)

    @property
    def keeps_nan(self) -> bool:
        """A max or min of floats: a NaN within the bounds must come out, wherever it is
        (onnxruntime's ReduceMax keeps its first operand against a NaN, so a NaN after the
        fill at a start other than 0 would be lost and the fill come out)."""
        return not self.mean and self.identity.dtype.kind == "f" and bool(self.identity)

    def with_nan(
        self, em: Emitter, filled: ir.Value, reduced: ir.Value, axes: list[int]
    ) -> ir.Value:
        """`reduced` + the sum of the NaNs within the bounds (0 where there is none): NaN
        wherever an element holds one, as the specification's maximum (numpy's) gives."""
        nans = em.op(
            "Where",
            [em.op("IsNaN", [filled]), filled, em.scalar(np.zeros((), self.identity.dtype))],
        )
        keepdims = {"keepdims": self.keepdims}
        if em.opset >= 13:
            total = em.op("ReduceSum", [nans, em.ints(axes)], keepdims)
        else:
            total = em.op("ReduceSum", [nans], {**keepdims, "axes": axes})
        return em.op("Add", [reduced, total])

    def mask(self, em: Emitter) -> ir.Value:
        return em.masks[self.source]  # type: ignore[index]

    def fill(self, em: Emitter, data: ir.Value) -> ir.Value:
        return em.op("Where", [self.mask(em), data, em.scalar(self.identity)])

    def divide(self, em: Emitter, total: ir.Value) -> ir.Value:
        held = em.held.get(self.mask(em))
        clamped = None
        if held is not None:  # the counts are known ([N]): as [N, 1, ..] of the total's rank
            shape = [-1] + [1] * (self.rank - 1 + self.keepdims)
            clamped = em.op("Max", [held, em.scalar(np.array(1, np.int64))])
            count = em.op("Reshape", [clamped, em.ints(shape)])
        else:
            count = em.op(
                "ReduceSum",
                [
                    em.op("Cast", [self.mask(em)], {"to": int(ir.DataType.INT64)}),
                    em.ints([self.axis + 1]),
                ],
                {"keepdims": self.keepdims},
            )
            count = em.op("Max", [count, em.scalar(np.array(1, np.int64))])
        count = (
            em.op("CastLike", [count, total])
            if em.opset >= 15
            else em.op("Cast", [count], {"to": int(total.dtype or ir.DataType.FLOAT)})
        )
        mean = em.op("Div", [total, count])
        if clamped is not None and held is not None:  # unclamped where no empty chunk is read
            em.clamps.append(ClampedMean(mean, clamped, held, self.mask(em)))
        return mean


_MASKED_REDUCTIONS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})


def _ragged_reduction(
    view: OpView, ragged_axis: int, shifted: list[int]
) -> _MaskedReduction | Refusal:
    """The masked form of a reduction of a ragged value, or why there is none."""
    if view.op_type not in _MASKED_REDUCTIONS:
        return Refusal(f"{view.op_type} of a slice whose bounds differ per element")
    if ragged_axis + 1 not in shifted:
        return Refusal("a reduction of a ragged slice that keeps its ragged axis")
    dtype = view.node.inputs[0].dtype  # type: ignore[union-attr]
    numpy_type = None if dtype is None else dtype.numpy()
    if numpy_type is None or numpy_type.kind not in "fiu":
        return Refusal("a reduction of a ragged slice of a type other than numbers")
    if view.op_type == "ReduceMean" and (numpy_type.kind != "f" or shifted != [ragged_axis + 1]):
        return Refusal("a mean of a ragged slice over more axes, or of integers")
    return _MaskedReduction(view, ragged_axis, view.op_type, numpy_type)


def _axis_attr(default: int | None) -> OpRule:
    """Ops with one `axis` attribute over the element axes (ArgMax, Softmax, Split...).

    `default` None means the default depends on the opset (Softmax: 1 before 13, else -1).
    """

    def rule(view: OpView) -> Batched | Refusal:
        rank = _first_batched_rank(view)
        if isinstance(rank, Refusal):
            return rank
        fallback = default if default is not None else (-1 if view.opset >= 13 else 1)
        axis = view.attr_int("axis", fallback)
        # Softmax before opset 13 flattens to [prod(S[:a]), prod(S[a:])]: rows of one
        # element stay rows of that element when the batch axis is prepended, so a + 1 holds
        normalized = normalize_axis(axis, rank)
        if normalized is None:
            return Refusal(f"axis {axis} is out of range for rank {rank}")
        return Batched(lambda em, inputs: em.copy(view.node, inputs, {"axis": normalized + 1}))

    return rule


def _axis_input(view: OpView) -> Batched | Refusal:
    """CumSum: the axis is a scalar input."""
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    rank, axis = view.rank(0), view.static(1)
    if rank is None or axis is None or axis.size != 1:
        return Refusal("the axis is computed at run time or the rank is unknown")
    normalized = normalize_axis(int(axis.reshape(())), rank)
    if normalized is None:
        return Refusal(f"axis {int(axis.reshape(()))} is out of range for rank {rank}")
    shifted = np.array(normalized + 1, dtype=axis.dtype).reshape(axis.shape)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        return em.copy(view.node, [inputs[0], em.scalar(shifted), *inputs[2:]])

    return Batched(emit)


def _topk(view: OpView) -> Batched | Refusal:
    if view.batched(1):
        return Refusal("k differs per element")
    return _axis_attr(-1)(view)


def _layer_norm(view: OpView) -> Batched | Refusal:
    return _axis_attr(-1)(view)


def _transpose(view: OpView) -> Batched | Refusal:
    rank = view.rank(0)
    if rank is None:
        return Refusal("the element rank is unknown")
    perm = view.attr_ints("perm")
    perm = list(reversed(range(rank))) if perm is None else perm
    if sorted(perm) != list(range(rank)):
        return Refusal(f"perm {perm} is not a permutation of the element axes")
    shifted = [0] + [p + 1 for p in perm]
    return Batched(lambda em, inputs: em.copy(view.node, inputs, {"perm": shifted}))


# -- shape-changing ops --------------------------------------------------------------------


def _resolve_target(element: list[int], target: list[int], allow_zero: bool) -> list[int] | None:
    """The per-element Reshape target with 0 and -1 resolved, as ONNX reads them."""
    resolved = [
        element[i] if t == 0 and not allow_zero and i < len(element) else t
        for i, t in enumerate(target)
    ]
    if resolved.count(-1) > 1:
        return None
    if -1 in resolved:
        known = int(np.prod([d for d in resolved if d != -1]))
        total = int(np.prod(element))
        if known == 0 or total % known:
            return None
        resolved[resolved.index(-1)] = total // known
    if int(np.prod(resolved)) != int(np.prod(element)):
        return None
    return resolved


def _batched_shape(em: Emitter, element_shape: ir.Value | list[int]) -> ir.Value:
    """[N, *element_shape] as a 1-D int64 tensor (a constant when it can be)."""
    if isinstance(element_shape, list):
        if em.static_count is not None:
            return em.ints([em.static_count, *element_shape])
        if all(d > 0 for d in element_shape):  # -1 stands for N, even when N = 0
            return em.ints([-1, *element_shape])
        element_shape = em.ints(element_shape)
    return em.op("Concat", [em.count(), element_shape], {"axis": 0})


def _proxy_shape(em: Emitter, data: ir.Value, op_type: str, extra: dict, more=()) -> ir.Value:  # type: ignore[type-arg,no-untyped-def]
    """The output shape of `op_type` applied to one element, computed on a proxy of one
    element's shape (a broadcast boolean, one element's worth of bytes): exact for every N,
    N = 0 included, where a Reshape of the whole stack with -1 would fail."""
    proxy = em.op("Expand", [em.scalar(np.array(False)), em.element_shape(data)])
    return em.op("Shape", [em.op(op_type, [proxy, *more], extra)])


def _reshape(view: OpView) -> Batched | Refusal:
    if view.batched(1):
        return Refusal("the target shape differs per element")
    if not view.batched(0):
        return Refusal("only a secondary input differs per element")
    allow_zero = view.attr_int("allowzero", 0) == 1
    element = view.operand(0).static_shape
    target = view.static_ints(1)
    if element is not None and target is not None:
        resolved = _resolve_target(element, target, allow_zero)
        if resolved is None:
            return Refusal(f"cannot reshape elements of shape {element} to {target}")

        def emit_static(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
            return [em.reshape(inputs[0], _batched_shape(em, resolved))]  # type: ignore[arg-type]

        return Batched(emit_static)
    attributes = {"allowzero": 1} if allow_zero else {}

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data, shape = inputs[0], inputs[1]
        assert data is not None and shape is not None
        per_element = _proxy_shape(em, data, "Reshape", attributes, [shape])
        return [em.reshape(data, _batched_shape(em, per_element))]

    return Batched(emit)


def _flatten(view: OpView) -> Batched | Refusal:
    rank = _first_batched_rank(view)
    if isinstance(rank, Refusal):
        return rank
    axis = view.attr_int("axis", 1)
    if not -rank <= axis <= rank:
        return Refusal(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    element = view.operand(0).static_shape

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        if element is not None:
            shape = [int(np.prod(element[:axis])), int(np.prod(element[axis:]))]
            target = _batched_shape(em, shape)
        else:
            target = _batched_shape(em, _proxy_shape(em, data, "Flatten", {"axis": axis}))
        return [em.reshape(data, target)]

    return Batched(emit)


def _axes_of(view: OpView) -> list[int] | Refusal | None:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13."""
    if view.present(1):
        axes = view.static_ints(1)
        return Refusal("the axes are computed at run time") if axes is None else axes
    return view.attr_ints("axes")


def _squeeze(view: OpView) -> Batched | Refusal:
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    operand = view.operand(0)
    axes = _axes_of(view)
    if isinstance(axes, Refusal):
        return axes
    if operand.rank is None:
        return Refusal("the element rank is unknown")
    if not axes:
        if operand.shape is None or not all(isinstance(d, int) for d in operand.shape):
            return Refusal("Squeeze without axes of an element whose dims are not all static")
        axes = [i for i, d in enumerate(operand.shape) if d == 1]
    normalized = [normalize_axis(a, operand.rank) for a in axes]
    if None in normalized:
        return Refusal(f"axes {axes} are out of range for rank {operand.rank}")
    shifted = [a + 1 for a in normalized]  # type: ignore[operator]
    return Batched(lambda em, inputs: [em.squeeze(inputs[0], shifted)])  # type: ignore[arg-type]


def _unsqueeze(view: OpView) -> Batched | Refusal:
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    axes = _axes_of(view)
    if isinstance(axes, Refusal):
        return axes
    rank = view.rank(0)
    if rank is None or not axes:
        return Refusal("the element rank or the axes are unknown")
    out_rank = rank + len(axes)
    normalized = [normalize_axis(a, out_rank) for a in axes]
    if None in normalized or len(set(normalized)) != len(axes):
        return Refusal(f"axes {axes} are invalid for rank {rank}")
    shifted = [a + 1 for a in normalized]  # type: ignore[operator]
    return Batched(lambda em, inputs: [em.unsqueeze(inputs[0], shifted)])  # type: ignore[arg-type]


def _concat(view: OpView) -> Batched | Refusal:
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    rank = view.rank(0)
    assert rank is not None
    axis = normalize_axis(view.attr_int("axis", 0), rank)
    if axis is None:
        return Refusal(f"axis {view.attr_int('axis', 0)} is out of range for rank {rank}")
    operands = view.operands

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        parts = [
            value if operand.batched else em.broadcast(value, rank)  # type: ignore[union-attr,arg-type]
            for value, operand in zip(inputs, operands)
        ]
        return em.copy(view.node, parts, {"axis": axis + 1})

    return Batched(emit)


def _slice(view: OpView) -> Batched | Refusal:
    if view.batched(1) or view.batched(2):
        return _ragged_slice(view)
    rank = _first_batched_rank(view)
    if isinstance(rank, Refusal):
        return rank
    if view.present(3):
        axes = view.static_ints(3)
        if axes is None:
            return Refusal("the sliced axes are computed at run time")
    else:
        starts = view.operand(1).shape
        if starts is None or len(starts) != 1 or not isinstance(starts[0], int):
            return Refusal("the number of sliced axes is unknown")
        axes = list(range(starts[0]))
    normalized = [normalize_axis(a, rank) for a in axes]
    if None in normalized:
        return Refusal(f"axes {axes} are out of range for rank {rank}")
    shifted = [a + 1 for a in normalized]  # type: ignore[operator]

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        steps = inputs[4:5]
        return em.copy(view.node, [inputs[0], inputs[1], inputs[2], em.ints(shifted), *steps])

    return Batched(emit)


def _ragged_slice(view: OpView) -> Batched | Refusal:
    """Slice(x, s, t, [a]) with bounds that differ per element: a ragged value, held as X
    itself with the mask of each element's positions [start, end) along a (a negative bound
    counts from the end; no clamping is needed, as positions run over [0, d) only); only its
    readers that accept a ragged value (reductions over a) read it."""
    rank = view.rank(0)
    if rank is None or rank == 0:
        return Refusal("the element rank is unknown or 0")
    if view.batched(3) or (view.present(4) and view.batched(4)):
        return Refusal("the sliced axes or steps differ per element")
    for index in (1, 2):
        shape = view.operand(index).shape
        if shape is None or list(shape) != [1]:
            return Refusal("bounds that differ per element slice more than one axis")
    axes = view.static_ints(3) if view.present(3) else [0]
    if axes is None or len(axes) != 1 or normalize_axis(axes[0], rank) is None:
        return Refusal("the sliced axis is computed at run time or out of range")
    if view.present(4) and view.static_ints(4) != [1]:
        return Refusal("bounds that differ per element with a step other than 1")
    axis = normalize_axis(axes[0], rank)
    assert axis is not None
    static_bounds = (view.static_ints(1), view.static_ints(2))
    data_batched = view.batched(0)
    ragged_value = view.node.outputs[0]
    windowed = _windowed(view, axis)
    if windowed is not None:
        width, may_be_empty, padded = windowed

        def emit_windows(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
            data, starts, ends = inputs[0], inputs[1], inputs[2]
            assert data is not None and starts is not None and ends is not None
            found = emit_window(em, data, starts, ends, axis, rank, width, may_be_empty)
            em.masks[ragged_value] = found[1]
            return [found[0]]

        return Batched(emit_windows, ragged_axis=axis, ragged_shape=padded)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data, starts, ends = inputs[0], inputs[1], inputs[2]
        assert data is not None and starts is not None and ends is not None
        if em.rows is not None and em.rows.awaits(ragged_value):  # also held flat, as x's rows
            em.rows.bind(ragged_value, flat_windows(em, data, starts, ends, axis))
        if not data_batched:  # x[:n_i] of one x: every element slices the same tensor
            data = em.broadcast(data, rank)
        dim = em.dims(data, axis + 1, axis + 2)  # [d]
        zero, one = em.scalar(np.array(0, np.int64)), em.scalar(np.array(1, np.int64))
        positions = em.op("Range", [zero, em.squeeze(dim, [0]), one])  # [d]
        mask = None
        if static_bounds[0] != [0]:  # every position is at or after 0
            lower = _resolved_bound(em, starts, static_bounds[0], dim)
            mask = em.op("GreaterOrEqual", [positions, lower])
        upper = _resolved_bound(em, ends, static_bounds[1], dim)
        below = em.op("Less", [positions, upper])
        mask = below if mask is None else em.op("And", [mask, below])  # [N, d]
        # [N, 1.., d, 1..]: d at the element axis, after the batch axis
        mask = em.unsqueeze(mask, [*range(1, axis + 1), *range(axis + 2, rank + 1)])
        em.masks[ragged_value] = mask
        return [data]

    # windows of one x, both bounds per element, may be held flat (`seqlower.batching.windows`)
    windows = not data_batched and view.batched(1) and view.batched(2)
    return Batched(emit, ragged_axis=axis, windows=windows)


def _windowed(view: OpView, axis: int) -> tuple[int, bool, ir.Shape] | None:
    """(w, whether x's axis may be empty, the padded element shape) when the ragged Slice reads
    windows of one unbatched x whose length a constant w bounds (`seqlower.batching.windows`);
    None where x differs per element, its type has no zero filler, no bound is proved, or an
    If's branch returns the slice (the whole-axis form then holds N x d values)."""
    if view.batched(0) or not view.batched(1):
        return None
    data = view.node.inputs[0]
    shape = view.operand(0).shape
    if data is None or shape is None or data.dtype not in _FILLED:
        return None
    width = window_width(view.node.inputs[1], view.node.inputs[2], view.values)  # type: ignore[arg-type]
    if width is None or not read_in_place(view.node.outputs[0]):
        return None
    dim = shape[axis]
    padded = ir.Shape([width if i == axis else d for i, d in enumerate(shape)])
    return width, not (isinstance(dim, int) and dim > 0), padded


# the types ConstantOfShape fills (the row of zeros a window past an empty axis reads)
_FILLED = frozenset(
    getattr(ir.DataType, name)
    for name in """FLOAT DOUBLE FLOAT16 INT8 INT16 INT32 INT64 UINT8 UINT16 UINT32 UINT64
    BOOL""".split()  # noqa: SIM905
)


def _resolved_bound(
    em: Emitter, bound: ir.Value, static: list[int] | None, dim: ir.Value
) -> ir.Value:
    """A Slice bound ([N, 1] when it differs per element, [1] otherwise) as a position: a
    negative bound counts from the end of the axis (of size d)."""
    if bound.dtype is not None and bound.dtype != ir.DataType.INT64:
        bound = em.op("Cast", [bound], {"to": int(ir.DataType.INT64)})
    if static is not None and all(b >= 0 for b in static):
        return bound
    negative = em.op("Less", [bound, em.scalar(np.array(0, np.int64))])
    return em.op("Where", [negative, em.op("Add", [bound, dim]), bound])


def _split(view: OpView) -> Batched | Refusal:
    return _axis_attr(0)(view)


def _gather(view: OpView) -> Batched | Refusal:
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    rank = view.rank(0)
    assert rank is not None
    axis = normalize_axis(view.attr_int("axis", 0), rank)
    if axis is None:
        return Refusal(f"axis {view.attr_int('axis', 0)} is out of range for rank {rank}")
    if view.batched(0) and view.batched(1):
        return _gather_per_element(view, axis)
    if view.batched(0):
        return Batched(lambda em, inputs: em.copy(view.node, inputs, {"axis": axis + 1}))
    # unbatched data, batched indices: the batch axis lands at `axis`; move it to the front
    out_rank = rank - 1 + view.rank(1) + 1  # type: ignore[operator]
    perm = [axis, *[i for i in range(out_rank) if i != axis]]
    return Batched(
        lambda em, inputs: [em.transpose(em.copy(view.node, inputs, {"axis": axis})[0], perm)]
    )


def _gather_per_element(view: OpView, axis: int) -> Batched | Refusal:
    """Gather(x, i, axis=0) where both differ per element (`x[b][idx[b]]`): each element's rows
    of its own data, GatherND(X, Unsqueeze(I, -1), batch_dims=1), which reads negative indices
    from the end and fails outside [-d, d - 1] as Gather does."""
    if axis != 0:
        return Refusal("both the data and the indices differ per element, gathered off axis 0")
    if view.opset < 13:
        return Refusal(
            "both the data and the indices differ per element (GatherND's batch_dims "
            "reads negative indices from opset 13)"
        )
    index_rank = view.rank(1)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data, indices = inputs[0], inputs[1]
        assert data is not None and indices is not None
        if indices.dtype != ir.DataType.INT64:
            indices = em.op("Cast", [indices], {"to": int(ir.DataType.INT64)})
        last = em.unsqueeze(indices, [index_rank + 1])  # type: ignore[operator]
        return [em.op("GatherND", [data, last], {"batch_dims": 1})]

    return Batched(emit)


def _expand_unbatched(view: OpView) -> OpRule:
    """GatherElements and GatherND: bring the unbatched operand to [N, ...] first."""

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        parts = [
            value if view.batched(i) else em.broadcast(value, view.rank(i))  # type: ignore[arg-type]
            for i, value in enumerate(inputs)
        ]
        if view.op_type == "GatherND":
            overrides = {"batch_dims": view.attr_int("batch_dims", 0) + 1}
        else:
            overrides = {"axis": normalize_axis(view.attr_int("axis", 0), view.rank(0)) + 1}  # type: ignore[arg-type,operator]
        return em.copy(view.node, parts, overrides)

    return lambda _: Batched(emit)


def _gather_elements(view: OpView) -> Batched | Refusal:
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    if normalize_axis(view.attr_int("axis", 0), view.rank(0)) is None:  # type: ignore[arg-type]
        return Refusal("the axis is out of range")
    return _expand_unbatched(view)(view)


def _gather_nd(view: OpView) -> Batched | Refusal:
    refusal = _unknown_rank(view)
    if refusal is not None:
        return refusal
    return _expand_unbatched(view)(view)


def _expand(view: OpView) -> Batched | Refusal:
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    rank = view.rank(0)
    shape = view.operand(1).shape
    if rank is None or shape is None or len(shape) != 1 or not isinstance(shape[0], int):
        return Refusal("the element rank or the length of the target shape is unknown")
    target = max(rank, shape[0])

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data, dims = inputs[0], inputs[1]
        assert data is not None and dims is not None
        dims = em.op("Concat", [em.ints([1]), dims], {"axis": 0})
        return em.copy(view.node, [em.lift(data, rank, target), dims])

    return Batched(emit)


def _tile(view: OpView) -> Batched | Refusal:
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        repeats = em.op("Concat", [em.ints([1]), inputs[1]], {"axis": 0})
        return em.copy(view.node, [inputs[0], repeats])

    return Batched(emit)


def _pad(view: OpView) -> Batched | Refusal:
    rank = _first_batched_rank(view)
    if isinstance(rank, Refusal):
        return rank
    if view.opset < 11:
        return Refusal("Pad before opset 11")
    if view.present(3):
        axes = view.static_ints(3)
        if axes is None:
            return Refusal("the padded axes are computed at run time")
        normalized = [normalize_axis(a, rank) for a in axes]
        if None in normalized:
            return Refusal(f"axes {axes} are out of range for rank {rank}")
        shifted = [a + 1 for a in normalized]  # type: ignore[operator]
        return Batched(lambda em, inputs: em.copy(view.node, [*inputs[:3], em.ints(shifted)]))
    pads = view.static_ints(1)
    if pads is None or len(pads) != 2 * rank:
        return Refusal("the pads are computed at run time")
    shifted_pads = [0, *pads[:rank], 0, *pads[rank:]]
    return Batched(
        lambda em, inputs: em.copy(view.node, [inputs[0], em.ints(shifted_pads), *inputs[2:]])
    )


# -- Shape and Size: unbatched results -------------------------------------------------------


def _clamp(index: int, rank: int) -> int:
    index = index + rank if index < 0 else index
    return min(max(index, 0), rank)


def _shape(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    if operand.shape is None:
        return Refusal("the element rank is unknown")
    rank = len(operand.shape)
    start = _clamp(view.attr_int("start", 0), rank)
    end = _clamp(view.attr_int("end", rank), rank)
    dims = list(operand.shape)[start:end]
    if all(isinstance(d, int) for d in dims):
        static = np.array(dims, dtype=np.int64)
        return Batched(lambda em, inputs: [em.scalar(static)], (False,))

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        assert inputs[0] is not None
        if end <= start:
            return [em.scalar(np.zeros((0,), dtype=np.int64))]
        return [em.dims(inputs[0], start + 1, end + 1)]

    return Batched(emit, (False,))


def _size(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    element = operand.static_shape
    if element is not None:
        static = np.array(int(np.prod(element)), dtype=np.int64)
        return Batched(lambda em, inputs: [em.scalar(static)], (False,))

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        assert inputs[0] is not None
        return [em.op("ReduceProd", [em.element_shape(inputs[0])], {"keepdims": 0})]

    return Batched(emit, (False,))


# -- ops over a batch axis of their own -----------------------------------------------------


def _over_batch(view: OpView) -> Batched | Refusal:
    """Conv, pooling and normalization treat axis 0 as a batch: an element [1, C, ...] joins
    the stack's batch axis, [N, 1, C, ...] -> [N, C, ...] -> op -> [N, 1, C', ...]; an element
    [B, C, ...] of another batch size merges the two, [N, B, C, ...] -> [N * B, C, ...] -> op
    -> [N * B, C', ...] -> [N, B, C', ...] (each image of the batch computed alone)."""
    refusal = _only_first_batched(view)
    if refusal is not None:
        return refusal
    shape = view.operand(0).shape
    if shape is None or len(shape) < 2:
        return Refusal("the element has no batch axis")
    indices = view.node.outputs[1] if len(view.node.outputs) > 1 else None
    if (
        view.op_type == "MaxPool"
        and indices is not None
        and (indices.uses() or indices.is_graph_output())
    ):
        return Refusal("MaxPool indices count positions across the batch")
    if view.op_type == "BatchNormalization" and (
        view.attr_int("training_mode", 0) or len(view.node.outputs) > 1
    ):
        return Refusal("BatchNormalization in training mode computes statistics over the batch")

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        assert inputs[0] is not None
        merged = em.squeeze(inputs[0], [1])
        outputs = em.copy(view.node, [merged, *inputs[1:]])
        return [em.unsqueeze(output, [1]) for output in outputs]

    if shape[0] == 1:
        return Batched(emit)
    element = view.operand(0).static_shape

    def emit_merged(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        if element is not None and all(d > 0 for d in element):
            # -1 is N * B, N = 0 included: the other dims multiply to more than 0
            target = em.ints([-1, *element[1:]])
        else:
            together = em.op("Mul", [em.dims(data, 0, 1), em.dims(data, 1, 2)])
            target = em.op("Concat", [together, em.dims(data, 2)], {"axis": 0})
        outputs = em.copy(view.node, [em.reshape(data, target), *inputs[1:]])
        front = em.dims(data, 0, 2)
        return [
            em.reshape(output, em.op("Concat", [front, em.dims(output, 1)], {"axis": 0}))
            for output in outputs
        ]

    return Batched(emit_merged)


# -- Einsum ---------------------------------------------------------------------------------


def _einsum(view: OpView) -> Batched | Refusal:
    equation = view.node.attributes.get_string("equation", "").replace(" ", "")
    inputs_part, arrow, output = equation.partition("->")
    terms = inputs_part.split(",")
    if len(terms) != len(view.operands):
        return Refusal("the equation does not match the inputs")
    used = set(equation)
    free = [c for c in string.ascii_letters if c not in used]
    if not free:
        return Refusal("no free subscript letter for the batch axis")
    letter = free[0]
    if not arrow:
        counts: dict[str, int] = {}
        for c in inputs_part:
            if c.isalpha():
                counts[c] = counts.get(c, 0) + 1
        output = ("..." if "..." in inputs_part else "") + "".join(
            sorted(c for c, n in counts.items() if n == 1)
        )
    new_terms = [letter + t if view.batched(i) else t for i, t in enumerate(terms)]
    new_equation = ",".join(new_terms) + "->" + letter + output
    return Batched(lambda em, inputs: em.copy(view.node, inputs, {"equation": new_equation}))


# -- the table -------------------------------------------------------------------------------

_UNARY = """Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Cast Ceil Celu Clip
Cos Cosh Elu Erf Exp Floor Gelu HardSigmoid HardSwish Identity IsInf
IsNaN LeakyRelu Log Mish Neg Not Reciprocal Relu Round Selu Shrink
Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Tan Tanh ThresholdedRelu
Dropout""".split()  # noqa: SIM905

_ELEMENTWISE = """Add Sub Mul Div Pow Mod And Or Xor Equal Greater GreaterOrEqual Less
LessOrEqual BitShift BitwiseAnd BitwiseOr BitwiseXor Max Min Sum Mean
Where""".split()  # noqa: SIM905

_REDUCE = """ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceSumSquare""".split()  # noqa: SIM905

_OVER_BATCH = """Conv ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool
GlobalMaxPool GlobalLpPool InstanceNormalization LRN
BatchNormalization DepthToSpace SpaceToDepth""".split()  # noqa: SIM905

OP_RULES: dict[str, OpRule] = {
    **dict.fromkeys(_UNARY, _unary),
    **dict.fromkeys(_ELEMENTWISE, _elementwise),
    **dict.fromkeys(_REDUCE, _reduce),
    **dict.fromkeys(_OVER_BATCH, _over_batch),
    "CastLike": _cast_like,
    "PRelu": _prelu,
    "Trilu": _trailing(2),
    "MatMul": _matmul,
    "Gemm": _gemm,
    "ArgMax": _axis_attr(0),
    "ArgMin": _axis_attr(0),
    "Softmax": _axis_attr(None),
    "LogSoftmax": _axis_attr(None),
    "Hardmax": _axis_attr(None),
    "CumSum": _axis_input,
    "TopK": _topk,
    "LayerNormalization": _layer_norm,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Slice": _slice,
    "Split": _split,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "Expand": _expand,
    "Tile": _tile,
    "Pad": _pad,
    "Shape": _shape,
    "Size": _size,
    "Einsum": _einsum,
}
