"""Boolean mask indexing, as TorchScript exports it, becomes one Compress.

    GatherND(x, Transpose(NonZero(m), perm=[1, 0]))      (`x[m]`, m a 1-D bool tensor)
        -> Compress(x, m, axis=0)
    Gather(x, p, axis=a)                                  (`x[:, torch.where(m)[0]]`)
        -> Compress(x, m, axis=a)
        p = Squeeze(Transpose(NonZero(m)), [1])  (`torch.where(m)[0]`, unbound, the one chunk)
          | Squeeze(NonZero(m), [0]) | Reshape(NonZero(m), [-1]) | Gather(NonZero(m), 0)

NonZero lists the true positions of m in increasing order, and GatherND reads those rows of x:
the rows Compress keeps, in the same order. Three launches become one; a detection head's
`boxes[scores > threshold]` runs so once per image. Where m is longer than x's first dim, a true
position past it is an error for GatherND, and Compress ignores it (onnxruntime 1.20 to 1.32,
probed): every input the original accepts gives the same rows. `torch.where(m)[0]` exports as
NonZero, Transpose and the one chunk of an unbind (a Split into one piece, then a Squeeze): the
Gather of those positions along any axis is the Compress along it (five launches, one). Not for
`--target tract`, which cannot type Compress (its rules turn Compress into exactly this Gather
of NonZero), nor for `--target tensorrt`.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet

_WITHOUT_COMPRESS = frozenset({"tract", "tensorrt"})


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = None if value is None else value.producer()
    return node if node is not None and node.op_type == op_type and node.domain == "" else None


def _check(node: ir.Node, ctx: Context) -> ir.Value | Refusal:
    if ctx.options.target in _WITHOUT_COMPRESS:
        return Refusal(f"--target {ctx.options.target} does not take Compress")
    if node.domain != "" or node.attributes.get_int("batch_dims", 0) != 0:
        return Refusal("GatherND with batch dims")
    transpose = _producer(node.inputs[1] if len(node.inputs) > 1 else None, "Transpose")
    nonzero = _producer(transpose.inputs[0], "NonZero") if transpose is not None else None
    if transpose is None or nonzero is None:
        return Refusal("the indices are not Transpose(NonZero(m))")
    perm = transpose.attributes.get_ints("perm")
    if perm is not None and list(perm) != [1, 0]:
        return Refusal("the positions are transposed otherwise")
    mask, data = nonzero.inputs[0], node.inputs[0]
    if mask is None or mask.dtype != ir.DataType.BOOL or mask.shape is None or len(mask.shape) != 1:
        return Refusal("the mask is not a 1-D bool tensor")
    if data is None or data.shape is None or len(data.shape) < 1:
        return Refusal("the rank of the indexed tensor is unknown")
    return mask


def _to_compress(node: ir.Node, mask: ir.Value, ctx: Context) -> None:
    """GatherND(x, Transpose(NonZero(m), perm=[1, 0])) -> Compress(x, m, axis=0)"""
    builder = ctx.rewriter.before(node)
    kept = builder.op("Compress", [node.inputs[0], mask], {"axis": 0}, name="kept")
    kept.type, kept.shape = node.outputs[0].type, node.outputs[0].shape
    ctx.rewriter.replace(node.outputs[0], kept)


def _check_gather(node: ir.Node, ctx: Context) -> ir.Value | Refusal:
    if ctx.options.target in _WITHOUT_COMPRESS:
        return Refusal(f"--target {ctx.options.target} does not take Compress")
    data = node.inputs[0]
    if data is None or data.shape is None or len(data.shape) < 1:
        return Refusal("the rank of the indexed tensor is unknown")
    if not -len(data.shape) <= node.attributes.get_int("axis", 0) < len(data.shape):
        return Refusal("the axis is out of range")
    mask = _true_positions(node.inputs[1] if len(node.inputs) > 1 else None, ctx)
    if mask is None:
        return Refusal("the indices are not the true positions of a 1-D mask")
    return mask


def _true_positions(value: ir.Value | None, ctx: Context) -> ir.Value | None:
    """The 1-D bool mask m when `value` is the 1-D tensor of its true positions, in order."""
    node = None if value is None else value.producer()
    if node is None or node.domain != "" or node.op_type not in ("Squeeze", "Reshape", "Gather"):
        return None
    source = node.inputs[0]
    nonzero = _producer(source, "NonZero")
    transpose = _producer(source, "Transpose") if nonzero is None else None
    if transpose is not None:
        perm = transpose.attributes.get_ints("perm")
        if perm is not None and list(perm) != [1, 0]:
            return None
        nonzero = _producer(transpose.inputs[0], "NonZero")
    if nonzero is None:
        return None
    mask = nonzero.inputs[0]
    if mask is None or mask.dtype != ir.DataType.BOOL or mask.shape is None or len(mask.shape) != 1:
        return None
    axis = 1 if transpose is not None else 0  # the axis of size 1 (the mask's one dim)
    if node.op_type == "Squeeze":
        axes = node.attributes.get_ints("axes")
        if axes is None:
            found = ctx.facts.static(node.inputs[1]) if len(node.inputs) > 1 else None
            axes = None if found is None else [int(a) for a in found.reshape(-1)]
        return mask if axes is not None and [a % 2 for a in axes] == [axis] else None
    if node.op_type == "Reshape":
        target = ctx.facts.static(node.inputs[1]) if len(node.inputs) > 1 else None
        return mask if target is not None and target.reshape(-1).tolist() == [-1] else None
    index = ctx.facts.static(node.inputs[1]) if len(node.inputs) > 1 else None
    gathered = node.attributes.get_int("axis", 0) % 2
    if index is None or index.ndim != 0 or int(index) not in (0, -1) or gathered != axis:
        return None
    return mask


def _gather_to_compress(node: ir.Node, mask: ir.Value, ctx: Context) -> None:
    """Gather(x, true positions of m, axis=a) -> Compress(x, m, axis=a)"""
    builder = ctx.rewriter.before(node)
    rank = len(node.inputs[0].shape)  # type: ignore[union-attr, arg-type]
    axis = node.attributes.get_int("axis", 0) % rank
    kept = builder.op("Compress", [node.inputs[0], mask], {"axis": axis}, name="kept")
    kept.type, kept.shape = node.outputs[0].type, node.outputs[0].shape
    ctx.rewriter.replace(node.outputs[0], kept)


RULES = RuleSet(
    [
        Rule("mask-index-to-compress", "GatherND", _check, _to_compress),
        Rule("mask-positions-to-compress", "Gather", _check_gather, _gather_to_compress),
    ]
)
