"""The lowering pipeline's passes. Each is an `onnx_ir` pass usable in a user's PassManager;
`SequenceLoweringPass` (or the list `default_passes()`) is the whole lowering, ready to use."""

from seqlower.passes.bind_dims import BindDimsPass
from seqlower.passes.cleanup import CleanupPass
from seqlower.passes.flatten_io import FlattenSequenceIOPass
from seqlower.passes.inline_functions import InlineSequenceFunctionsPass
from seqlower.passes.lower import LowerSequencesPass
from seqlower.passes.normalize import NormalizePass, infer_shapes
from seqlower.passes.onnxruntime_loops import LoopConditionPass, LoopsToScansPass
from seqlower.passes.sequence_lowering import SequenceLoweringPass, default_passes
from seqlower.passes.shape_hints import RelaxShapeHintsPass
from seqlower.passes.workarounds import RuntimeWorkaroundsPass

__all__ = [
    "BindDimsPass",
    "CleanupPass",
    "RelaxShapeHintsPass",
    "FlattenSequenceIOPass",
    "InlineSequenceFunctionsPass",
    "LowerSequencesPass",
    "LoopConditionPass",
    "LoopsToScansPass",
    "NormalizePass",
    "RuntimeWorkaroundsPass",
    "SequenceLoweringPass",
    "default_passes",
    "infer_shapes",
]
