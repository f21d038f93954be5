"""seqlower: lower ONNX sequence operators to plain tensor ONNX, and prove it equivalent.

import seqlower
model, report = seqlower.optimize("in.onnx")
"""

import sys

from seqlower._layout import bind_source_rules

bind_source_rules(sys.modules[__name__])

from seqlower.errors import InvalidModelError, ModelInputError, SeqlowerError
from seqlower.inspect import InspectReport, inspect_model
from seqlower.options import Options
from seqlower.pipeline import OptimizeResult, optimize
from seqlower.report import NodeOutcome, RemainingOp, Report
from seqlower.targets import TargetCheck, check_target
from seqlower.verification import VerifyReport, verify

__version__ = "0.1.0"

__all__ = [
    "InspectReport",
    "InvalidModelError",
    "ModelInputError",
    "NodeOutcome",
    "OptimizeResult",
    "Options",
    "RemainingOp",
    "Report",
    "SeqlowerError",
    "TargetCheck",
    "VerifyReport",
    "__version__",
    "check_target",
    "inspect_model",
    "optimize",
    "verify",
]
