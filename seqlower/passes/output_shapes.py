"""Declared dims of the main graph's outputs that ONNX inference does not prove are made anonymous.

    output y: float[2, 4]  (traced with 2 detections; inference proves [?, 4])
        -> output y: float[?, 4]

    output y: float[N, 2, 3]  (an export's guess at the rank; inference proves [?, 3])
        -> output y: float[?, 3]

An export declares the sizes it was traced with (PyTorch's TorchScript exporter writes a
detection count as a static dim), and onnxruntime warns on every run where they differ. The
lowered model's outputs get their shapes from inference; a model kept as given (it costs less
than its lowering) gets this instead: a static dim stays where inference gives the same size,
a named dim stays as declared, anything else is anonymous (all of them where inference gives
no shape). A declared rank that inference contradicts is a guess too (PyTorch's exporter reads
a scalar split of a list it cannot see as keeping the axis): the output takes the inferred
shape, anonymous where inference gives no size, since the checker rejects the two ranks side by
side. Nothing changes when inference raises.
"""

from __future__ import annotations

__all__ = ["relax_unproved_output_dims"]

import onnx
import onnx_ir as ir


def relax_unproved_output_dims(model: ir.Model) -> None:
    outputs = [value for value in model.graph.outputs if value.shape is not None]
    if not outputs:
        return
    proto = ir.to_proto(model)
    for info in proto.graph.output:
        if info.type.HasField("tensor_type"):
            info.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # an original inference cannot read keeps its declarations
        return
    proved = {}
    for info in inferred.graph.output:
        if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
            dims = info.type.tensor_type.shape.dim
            proved[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    for value in outputs:
        assert value.shape is not None
        found = proved.get(value.name or "")
        if found is not None and len(found) != len(value.shape):
            value.shape = ir.Shape(found)
            continue
        dims = [
            d if not isinstance(d, int) or (found is not None and found[k] == d) else None
            for k, d in enumerate(value.shape)
        ]
        if dims != list(value.shape):
            value.shape = ir.Shape(dims)
