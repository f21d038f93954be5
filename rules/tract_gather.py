"""Operators that pick rows at positions known only at run time become Gathers, for `--target
tract` only: tract 0.23.9 cannot type Compress ("Compress can not be typed") nor a Split whose
sizes are not constant ("Need splits to be a constant"), and fails on a Slice with run-time
bounds ("points to an invalid (dead ?) SymbolScope"), but runs NonZero, Range and Gather
(probed).

    Compress(x, c, axis=a)    -> Gather(x, Reshape(NonZero(c), [-1]), axis=a)
    Compress(x, c)  (no axis) -> Gather(Reshape(x, [-1]), Reshape(NonZero(c), [-1]), axis=0)
    y_0, .., y_k-1 = Split(x, s, axis=a)  (s known at run time only)
        -> e_-1 = 0, e_j = e_j-1 + s[j]; y_j = Gather(x, Range(e_j-1, e_j, 1), axis=a)

The same rows come out, in the same order: NonZero lists the true positions of the 1-D
condition in increasing order, and a condition shorter than the axis keeps none past its end,
as Compress does (loops with a conditional append, a scan output plus a mask, end in such a
Compress); the Gathers of a Split take consecutive runs of rows of the sizes given. Sizes that
do not add up to the dim are an error for Split; the Gathers then take the rows they name.
String tensors are left as they are: onnxruntime's Gather copies only the first string of each
row of more than one element (`seqlower.runtime_quirks`, "string-gather"), so the lowered
model would compute something else where it is verified.
"""

from __future__ import annotations

__all__ = ["RULES"]

import numpy as np
import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.access import _STRING_GATHER
from seqlower.rules.target_tract import _only_for_tract


def _check_compress(node: ir.Node, ctx: Context) -> bool | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    if len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
        return Refusal("Compress without its condition")
    if node.inputs[0].dtype == ir.DataType.STRING:
        return Refusal(_STRING_GATHER)
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


# -- Split with run-time sizes ---------------------------------------------------------------


def _check_split(node: ir.Node, ctx: Context) -> int | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    sizes = node.inputs[1] if len(node.inputs) > 1 else None
    if sizes is None:
        return Refusal("the Split has no sizes input (equal parts, which tract takes)")
    if ctx.facts.static(sizes) is not None:
        return Refusal("the sizes are static, which tract takes")
    data = node.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    if data.dtype == ir.DataType.STRING:
        return Refusal(_STRING_GATHER)
    return node.attributes.get_int("axis", 0) % max(len(data.shape), 1)


def _split_to_gathers(node: ir.Node, axis: int, ctx: Context) -> None:
    """y_0, .., y_k-1 = Split(x, s, axis=a) (sizes known at run time only)
    -> e_-1 = 0, e_j = e_j-1 + s[j]; y_j = Gather(x, Range(e_j-1, e_j, 1), axis=a). --target
    tract only."""
    builder = ctx.rewriter.before(node)
    data, sizes = node.inputs[0], node.inputs[1]
    assert data is not None and sizes is not None
    one = builder.constant(np.array(1, np.int64), "one")
    # a chain of Adds, not CumSum: tract has no CumSum of sizes it computes from shapes (TDim)
    start = builder.constant(np.array(0, np.int64), "zero")
    for index, old in enumerate(node.outputs):
        at = builder.constant(np.array(index, np.int64), "part")
        size = builder.op("Gather", [sizes, at], {"axis": 0}, name="size")
        end = builder.op("Add", [start, size], name="end")
        rows = builder.op("Range", [start, end, one], name="rows")
        rows.type, rows.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([None])
        part = builder.op("Gather", [data, rows], {"axis": axis}, name="part")
        part.type, part.shape = old.type, old.shape
        ctx.rewriter.replace(old, part)
        start = end


RULES = RuleSet(
    [
        Rule("tract-compress-to-gather", "Compress", _check_compress, _compress_to_gather),
        Rule("tract-split-to-gathers", "Split", _check_split, _split_to_gathers),
    ]
)
