"""Constants the cleanup rewrites put in front of a node: int64, named so that no value of the
model has the same name."""

from __future__ import annotations

__all__ = ["fresh_name", "int64_constant_before"]

import numpy as np
import onnx_ir as ir


def int64_constant_before(
    node: ir.Node, array: np.ndarray, names: set[str], suffix: str
) -> ir.Value:
    """A new int64 Constant holding `array`, in front of `node`, named after `node`'s first
    output and `suffix`; `names` holds every value name taken so far and gets the new one."""
    name = fresh_name(f"{node.outputs[0].name}{suffix}", names)
    array = np.asarray(array, dtype=np.int64)
    const = ir.node(
        "Constant",
        [],
        attributes={"value": ir.tensor(array, name=name)},
        name=f"{node.name}{suffix}",
        num_outputs=1,
    )
    const.outputs[0].name = name
    const.outputs[0].dtype = ir.DataType.INT64
    const.outputs[0].shape = ir.Shape(list(array.shape))
    assert node.graph is not None
    node.graph.insert_before(node, const)
    return const.outputs[0]


def fresh_name(base: str, names: set[str | None]) -> str:
    """`base`, or `base` followed by the first number that makes it a name not in `names`;
    `names` gets it."""
    name, k = base, 0
    while name in names:
        k += 1
        name = f"{base}{k}"
    names.add(name)
    return name
