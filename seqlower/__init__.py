"""seqlower: lower ONNX sequence operators to plain tensor ONNX, and prove it equivalent.

import seqlower
model, report = seqlower.optimize("in.onnx")
"""

from seqlower.errors import InvalidModelError, ModelInputError, SeqlowerError
from seqlower.options import Options
from seqlower.pipeline import OptimizeResult, optimize
from seqlower.report import RemainingOp, Report

__version__ = "0.1.0"

__all__ = [
    "InvalidModelError",
    "ModelInputError",
    "OptimizeResult",
    "Options",
    "RemainingOp",
    "Report",
    "SeqlowerError",
    "__version__",
    "optimize",
]
