"""seqlower: lower ONNX sequence operators to plain tensor ONNX, and prove it equivalent.

import seqlower
model, report = seqlower.optimize("in.onnx")

The names below, and the documented submodules (`seqlower.io`, `seqlower.passes`,
`seqlower.testing`, `seqlower.verification`...), are imported when first used, so that
`seqlower --version` and `import seqlower` alone stay quick, and `seqlower.verification.verify`
works after `import seqlower` alone.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from seqlower._layout import bind_source_rules

bind_source_rules(sys.modules[__name__])

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "InspectReport": "seqlower.inspect",
    "InvalidModelError": "seqlower.errors",
    "ModelInputError": "seqlower.errors",
    "NodeOutcome": "seqlower.report",
    "OptimizeResult": "seqlower.pipeline",
    "Options": "seqlower.options",
    "RemainingOp": "seqlower.report",
    "Report": "seqlower.report",
    "SeqlowerError": "seqlower.errors",
    "TargetCheck": "seqlower.targets",
    "VerifyReport": "seqlower.verification",
    "check_target": "seqlower.targets",
    "inspect_model": "seqlower.inspect",
    "optimize": "seqlower.pipeline",
    "verify": "seqlower.verification",
}

# submodules a user may reach as attributes of `seqlower` without importing them first
_SUBMODULES = frozenset(
    {
        "errors",
        "inspect",
        "io",
        "options",
        "passes",
        "pipeline",
        "report",
        "rules",
        "targets",
        "testing",
        "verification",
    }
)

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

if TYPE_CHECKING:
    from seqlower.errors import InvalidModelError, ModelInputError, SeqlowerError
    from seqlower.inspect import InspectReport, inspect_model
    from seqlower.options import Options
    from seqlower.pipeline import OptimizeResult, optimize
    from seqlower.report import NodeOutcome, RemainingOp, Report
    from seqlower.targets import TargetCheck, check_target
    from seqlower.verification import VerifyReport, verify


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds the attribute
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'seqlower' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})
