"""Which targets take a list whose elements' rank is known only at run time, and why the others
do not.

Such a list becomes tensors only in the `unranked` layout (`seqlower.lists.unranked`), whose
elements are read back by a Reshape to a shape of run-time length: a tensor whose rank the
runtime learns only when it runs. ONNX allows that, and onnxruntime runs it (probed with
onnxruntime 1.20.0 and 1.32.0). The targets below refuse the layout, each for the reason given,
in user words; the list then stays a sequence and the reason joins its cause in the report.
`seqlower.targets` quotes these in its profiles; the lowering reads them from here (the
profiles sit above the passes).

Probed with `python -m bench.portability --probe` (the models "Reshape to a shape of run-time
length" and "a list of elements of run-time rank, as tensors").
"""

from __future__ import annotations

__all__ = ["OPENVINO_PROBE", "REFUSALS", "RESHAPE_REFUSALS", "TRACT_PROBE", "refusal"]

from collections.abc import Mapping

OPENVINO_PROBE = (
    "OpenVINO 2026.4.1 (CPU) fails to compile a Reshape to a shape of run-time length: "
    '"CPU plug-in doesn\'t support Reshape operation with dynamic rank"'
)
TRACT_PROBE = (
    'tract 0.23.9 fails to load a Reshape to a shape of run-time length: "shape input is variable"'
)

REFUSALS: Mapping[str, str] = {
    "portable": (
        "the portable target is for runtimes that need every tensor's rank when they load a "
        "model (as TensorRT, OpenVINO and tract do), and a list of such elements as tensors "
        "has ranks known only at run time"
    ),
    "tensorrt": (
        "TensorRT builds engines whose tensors have a fixed rank, and a list of such elements "
        "as tensors has ranks known only at run time"
    ),
    "openvino": (
        "OpenVINO cannot load a tensor whose rank is known only at run time, which a list of "
        f"such elements as tensors needs ({OPENVINO_PROBE})"
    ),
    "tract": (
        "tract cannot load a tensor whose rank is known only at run time, which a list of "
        f"such elements as tensors needs ({TRACT_PROBE})"
    ),
}


# what the targets whose runtime needs ranks say of a Reshape to a shape of run-time length
# itself (the source of such a rank, in the original model or in what lowering left):
# `seqlower.targets.judge_nodes` reports it as an error
RESHAPE_REFUSALS: Mapping[str, str] = {
    "tensorrt": "TensorRT builds engines whose tensors have a fixed rank (not probed: no GPU)",
    "openvino": f"OpenVINO cannot load it ({OPENVINO_PROBE})",
    "tract": f"tract cannot load it ({TRACT_PROBE})",
}


def refusal(target: str) -> str | None:
    """Why `target` takes no list whose elements' rank is known only at run time; None where it
    takes them (generic, onnxruntime)."""
    return REFUSALS.get(target)
