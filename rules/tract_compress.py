"""Compress becomes a Gather at the positions NonZero finds, for `--target tract` only: tract
0.23.9 cannot type Compress ("Compress can not be typed"), and runs NonZero and Gather (probed).

    Compress(x, c, axis=a)   -> Gather(x, Reshape(NonZero(c), [-1]), axis=a)
    Compress(x, c)  (no axis) -> Gather(Reshape(x, [-1]), Reshape(NonZero(c), [-1]), axis=0)

The same rows come out, in the same order: NonZero lists the true positions of the 1-D
condition in increasing order, and a condition shorter than the axis keeps none past its end,
as Compress does. Loops with a conditional append (a scan output plus a mask) end in such a
Compress.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.target_tract import _only_for_tract


def _check_compress(node: ir.Node, ctx: Context) -> bool | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    if len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
        return Refusal("Compress without its condition")
    return True


def _compress_to_gather(node: ir.Node, _: bool, ctx: Context) -> None:
    """Compress(x, c, axis=a) -> Gather(x, Reshape(NonZero(c), [-1]), axis=a); without an
    axis, x is flattened first. --target tract only."""
    builder = ctx.rewriter.before(node)
    data, condition = node.inputs[0], node.inputs[1]
    assert data is not None and condition is not None
    flat = builder.ints([-1], "flat")
    found = builder.op("NonZero", [condition], name="kept")
    positions = builder.op("Reshape", [found, flat], name="positions")
    positions.type, positions.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([None])
    axis = node.attributes.get_int("axis", None)
    if axis is None:
        data = builder.op("Reshape", [data, flat], name="flattened")
        axis = 0
    result = builder.op("Gather", [data, positions], {"axis": axis}, name="compressed")
    old = node.outputs[0]
    result.type, result.shape = old.type, old.shape
    ctx.rewriter.replace(old, result)


RULES = RuleSet(
    [Rule("tract-compress-to-gather", "Compress", _check_compress, _compress_to_gather)]
)
