"""A stack written as one Unsqueeze per tensor and a Concat (`torch.stack`, as TorchScript and
other exporters write it) is one Concat and one Reshape.

    Concat(Unsqueeze(x1, [a]), .., Unsqueeze(xn, [a]), axis=a)     (x1..xn of one shape S)
        -> Reshape(Concat(x1, .., xn, axis=a), S[:a] + [n] + S[a:])

Concatenating the tensors along their axis `a` puts the rows of each one after the other; cut
in two, that axis is the n tensors side by side, which is what the stack is. The target is a
constant, so the shape S must be known: every dim a number, or one dim (at most) a dim of the
model's inputs by name, the same in every tensor (written -1; no other dim is 0, so -1 is
exact, also for an empty tensor). Tensors whose shapes differ or may differ (a dim ONNX
inference leaves unknown) stay as they are: the stack fails on them, and the Concat would not
fail where only axis `a` differs. A stack on a new last axis (a = rank of x) needs a Transpose
besides, and stays. n Unsqueeze launches become one Reshape (which onnxruntime runs without a
copy): a detection head's `torch.stack((x1, y1, x2, y2), dim=1)` per image.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet

MIN_STACKED = 2  # one Unsqueeze and a Concat of it is left to the other rewrites


def _unsqueezed(value: ir.Value | None, ctx: Context) -> tuple[ir.Value, int] | None:
    """(x, a) when `value` is Unsqueeze(x, [a]) on one axis."""
    node = None if value is None else value.producer()
    if node is None or node.op_type != "Unsqueeze" or node.domain != "":
        return None
    axes = node.attributes.get_ints("axes")
    if axes is None and len(node.inputs) > 1:
        found = ctx.facts.static(node.inputs[1])
        axes = None if found is None else [int(a) for a in found.reshape(-1)]
    data = node.inputs[0]
    if axes is None or len(axes) != 1 or data is None:
        return None
    return data, axes[0]


def _check(node: ir.Node, ctx: Context) -> tuple[list[ir.Value], int, list[int]] | Refusal:
    if node.domain != "" or len(node.inputs) < MIN_STACKED:
        return Refusal("not a Concat of two or more tensors")
    found = [_unsqueezed(value, ctx) for value in node.inputs]
    if any(f is None for f in found):
        return Refusal("not every input is an Unsqueeze on one axis")
    tensors = [f[0] for f in found]  # type: ignore[index]
    shape = tensors[0].shape
    if shape is None or any(t.shape is None or list(t.shape) != list(shape) for t in tensors):
        return Refusal("the tensors stacked are not known to have one shape")
    rank = len(shape)
    out_rank = rank + 1
    axis = node.attributes.get_int("axis", 0)
    if not -out_rank <= axis < out_rank:
        return Refusal("the axis is out of range")
    axis %= out_rank
    if any(f[1] % out_rank != axis for f in found):  # type: ignore[index]
        return Refusal("the Unsqueezes add another axis than the Concat joins")
    if axis == rank:
        return Refusal("a stack on a new last axis needs a Transpose besides")
    target: list[int] = []
    for dim in shape:
        if isinstance(dim, int):
            if dim == 0:
                return Refusal("a dim is 0 (a target with -1 would be ambiguous)")
            target.append(dim)
        elif getattr(dim, "value", None) and not str(dim.value).startswith("unk__"):
            target.append(-1)
        else:
            return Refusal("a dim is unknown: the tensors may differ in it")
    if target.count(-1) > 1:
        return Refusal("more than one dim is not a number")
    return tensors, axis, [*target[:axis], len(tensors), *target[axis:]]


def _stack(node: ir.Node, match: tuple[list[ir.Value], int, list[int]], ctx: Context) -> None:
    """Concat(Unsqueeze(x1, [a]), .., Unsqueeze(xn, [a]), axis=a)
    -> Reshape(Concat(x1, .., xn, axis=a), S[:a] + [n] + S[a:])"""
    tensors, axis, target = match
    builder = ctx.rewriter.before(node)
    joined = builder.op("Concat", tensors, {"axis": axis}, name="joined")
    joined.type = tensors[0].type
    stacked = builder.op("Reshape", [joined, builder.ints(target, "stacked_shape")], name="stack")
    stacked.type, stacked.shape = node.outputs[0].type, node.outputs[0].shape
    ctx.rewriter.replace(node.outputs[0], stacked)


RULES = RuleSet([Rule("unsqueezed-stack", "Concat", _check, _stack)])
