"""The lowering pipeline's passes. Each is an `onnx_ir` pass usable in a user's PassManager."""

from seqlower.passes.cleanup import CleanupPass
from seqlower.passes.lower import LowerSequencesPass
from seqlower.passes.normalize import NormalizePass, infer_shapes

__all__ = ["CleanupPass", "LowerSequencesPass", "NormalizePass", "infer_shapes"]
