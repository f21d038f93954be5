"""The lowering pipeline's passes. Each is an `onnx_ir` pass usable in a user's PassManager."""

from seqlower.passes.bind_dims import BindDimsPass
from seqlower.passes.cleanup import CleanupPass
from seqlower.passes.flatten_io import FlattenSequenceIOPass
from seqlower.passes.lower import LowerSequencesPass
from seqlower.passes.normalize import NormalizePass, infer_shapes

__all__ = [
    "BindDimsPass",
    "CleanupPass",
    "FlattenSequenceIOPass",
    "LowerSequencesPass",
    "NormalizePass",
    "infer_shapes",
]
