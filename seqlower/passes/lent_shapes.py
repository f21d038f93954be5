"""Shapes and types inferred on a copy of a model, lent to the model's undeclared values while
passes that read them run, then taken back: the model keeps its own declarations.

    with lent_shapes(model):              # an exported model: no shape inside a Loop body
        drop_broadcast_unsqueezes(model)  # reads the shapes of the body's values
    # the values that remain declare what they declared before

`--target onnxruntime` returns an original as given when its lowering costs more, with the
clean-ups its estimate assumed (a Cast to its input's type, an Unsqueeze that broadcasting
makes anyway: `NormalizePass` makes them on the inferred model the estimate reads). On the
original as exported, whose loop bodies and branches declare no shapes, those passes found
nothing there; lent the shapes the estimate read, they find what it assumed gone.
"""

from __future__ import annotations

__all__ = ["lent_shapes"]

import contextlib
from collections.abc import Iterator

import onnx_ir as ir

from seqlower.ops import iter_all_nodes, subgraphs
from seqlower.passes.normalize import infer_shapes


@contextlib.contextmanager
def lent_shapes(model: ir.Model) -> Iterator[int]:
    """Within the block, each value of `model` that declares no shape (or no type) has the one
    ONNX inference gives it on a copy (`normalize.infer_shapes`); yields how many were lent.
    After the block, every value lent one declares none again (its type stays where it
    has a shape then: a pass gave it one). Nothing is lent when the copy
    cannot be inferred or its nodes are not the model's (the walk compares each operator)."""
    # (value, the shape lent or None, the type lent or None)
    lent: list[tuple[ir.Value, ir.Shape | None, ir.TypeProtocol | None]] = []
    try:
        for mine, inferred in _paired_values(model):
            shape = inferred.shape if mine.shape is None else None
            typed = inferred.type if mine.type is None else None
            if shape is not None:
                mine.shape = shape
            if typed is not None:
                mine.type = typed
            if shape is not None or typed is not None:
                lent.append((mine, shape, typed))
        yield len(lent)
    finally:
        for value, shape, typed in lent:
            if shape is not None and value.shape is shape:  # not one a pass gave it since
                value.shape = None
            # a value a pass gave a shape keeps its type: a shape needs one
            if typed is not None and value.type is typed and value.shape is None:
                value.type = None


def _paired_values(model: ir.Model) -> list[tuple[ir.Value, ir.Value]]:
    """Each node output and subgraph input of `model` with the same value of an inferred copy;
    none when the copy cannot be inferred or its walk differs."""
    copy = ir.from_proto(ir.to_proto(model))
    try:
        infer_shapes(copy)
    except Exception:  # an original inference rejects: nothing lent, the passes find less
        return []
    mine, theirs = list(iter_all_nodes(model)), list(iter_all_nodes(copy))
    if len(mine) != len(theirs):
        return []
    pairs: list[tuple[ir.Value, ir.Value]] = []
    for node, other in zip(mine, theirs, strict=True):
        if (node.domain, node.op_type, len(node.outputs)) != (
            other.domain,
            other.op_type,
            len(other.outputs),
        ):
            return []
        pairs.extend(zip(node.outputs, other.outputs, strict=True))
        graphs, others = list(subgraphs(node)), list(subgraphs(other))
        if len(graphs) != len(others):
            return []
        for graph, copied in zip(graphs, others, strict=True):
            if len(graph.inputs) != len(copied.inputs):
                return []
            pairs.extend(zip(graph.inputs, copied.inputs, strict=True))
    return pairs
