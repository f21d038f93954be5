"""Tell an input model whose own node is invalid from a lowering that broke a node, when the
lowered model fails the ONNX checker but the input model runs.

ONNX inference checks a node only as far as it knows the shapes of its inputs. Where the input
model leaves a rank or a dim unknown (an element read from a list built in a Loop, a value of an
If), the lowered model often knows it, and the checker then finds what the input model always
had wrong, in a branch the input's runs do not take or at a node onnxruntime is lenient with:

    e = SequenceAt(list built in a Loop, 1)          # [4, 3] when run; unknown to inference
    If(c, then: Identity(e), else: Concat(e, e, axis=3))    # axis 3 is out of range for rank 2

    p3[0, 4, H, W], p4[1, 4, H, W] -> ... -> Concat(axis=1)      # dim 0: 0 vs 1 (onnxruntime
                                                                 # joins the empty misfit)

Which is it? The input model is run once in onnxruntime on generated inputs of its declared
shapes (the first of a few trials that runs), every value of its main graph made an output;
the shapes they have are declared on a copy of the input model (what it declared about its
intermediate values dropped first, as the input check does), and ONNX type and shape inference
runs on that copy. An error there is the input's: the node is invalid for the values the input
model itself gives it, whatever the lowering did (exit 2, naming the node). No error: the
lowering broke the node (an internal error stays one).

The values of a Loop body are not outputs of a run, so a body node that is invalid wherever it
runs escapes that check when a trial runs no iteration:

    Loop(steps, .., body: Add(Unsqueeze(s, -2) [1, 3], LogSoftmax(..) [3, 7]))   # steps = 0 runs

`failing_node` tells that case: the node the checker names in the lowered model (the innermost
`(op_type:Add, node name: /Add_1)` of its message) is one onnxruntime fails at when it runs the
input model itself on one of the same generated inputs. The input then fails wherever that node
runs, whatever the lowering did.
"""

from __future__ import annotations

__all__ = ["failing_node", "invalid_as_run"]

import re
from collections.abc import Mapping

import numpy as np
import onnx
import onnx.shape_inference
import onnx_ir as ir

from seqlower.input_check import errors_held, forget_declared_shapes, one_line
from seqlower.verification.generate import generate_inputs
from seqlower.verification.runner import IsolatedRunner
from seqlower.verification.values import RuntimeValue


def invalid_as_run(
    model: ir.Model, *, dims: Mapping[str, int] | None = None, trials: int = 3
) -> str | None:
    """What ONNX inference finds wrong with `model` once its main graph's values are declared
    with the shapes they have when onnxruntime runs it (see the module docstring), as one line
    naming the node; None when it finds nothing, or when no trial runs."""
    proto = ir.to_proto(model)
    graph = proto.graph
    outputs = {value.name for value in graph.output}
    made = [name for node in graph.node for name in node.output if name and name not in outputs]
    probed = onnx.ModelProto()
    probed.CopyFrom(proto)
    probed.graph.output.extend(onnx.ValueInfoProto(name=name) for name in made)
    try:
        data = probed.SerializeToString()
    except ValueError:  # over protobuf's 2 GB: not run
        return None
    del probed
    with IsolatedRunner("onnxruntime", data) as runner:
        for trial in range(trials):
            outcome = runner.run(generate_inputs(model, trial=trial, dims=dims))
            if outcome.ok and outcome.outputs is not None:
                return _inference_problem(proto, outcome.outputs)
            if outcome.cannot_run or (outcome.error or "").startswith("cannot load"):
                return None
    return None


_CHECKED_NODE = re.compile(r"\(op_type:([A-Za-z0-9_]+), node name: ([^)]*)\)")


def failing_node(
    model: ir.Model, checker_error: str, *, dims: Mapping[str, int] | None = None, trials: int = 3
) -> tuple[str, str] | None:
    """The node that `checker_error` (the ONNX checker's message on the lowered model) names
    last, as `Add '/Add_1'`, and onnxruntime's error where it fails at that node running `model`
    (the input) on one of the first `trials` generated inputs; None when no run fails there
    (see the module docstring)."""
    named = _CHECKED_NODE.findall(checker_error)
    if not named or not named[-1][1]:
        return None
    op_type, name = named[-1]
    at = f"running {op_type} node. Name:'{name}'"
    try:
        data = ir.to_proto(model).SerializeToString()
    except ValueError:  # over protobuf's 2 GB: not run
        return None
    with IsolatedRunner("onnxruntime", data) as runner:
        for trial in range(trials):
            outcome = runner.run(generate_inputs(model, trial=trial, dims=dims))
            if outcome.cannot_run or (outcome.error or "").startswith("cannot load"):
                return None
            if not outcome.ok and at in (outcome.error or ""):
                return f"{op_type} '{name}'", outcome.error or ""
    return None


def _inference_problem(proto: onnx.ModelProto, values: Mapping[str, RuntimeValue]) -> str | None:
    """ONNX inference's first error on `proto` with `values`' shapes declared."""
    forget_declared_shapes(proto.graph)
    outputs = {value.name: value for value in proto.graph.output}
    for name, value in values.items():
        observed = _type_of(value)
        if observed is None:
            continue
        if name in outputs:
            outputs[name].type.CopyFrom(observed)
        else:
            proto.graph.value_info.append(onnx.ValueInfoProto(name=name, type=observed))
    try:
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        errors = errors_held(str(error))
        return one_line(errors[0]) if errors else None
    except ValueError:
        return None
    return None


def _type_of(value: RuntimeValue) -> onnx.TypeProto | None:
    """The type of a value onnxruntime returned: a tensor's element type and dims, a list's
    element type and the dims its elements share (None where they differ in rank or type)."""
    if isinstance(value, list):
        types = [_type_of(element) for element in value]
        if not types or any(t is None for t in types):
            return None
        tensors = [t.tensor_type for t in types if t is not None]
        if (
            len({t.elem_type for t in tensors}) != 1
            or len({len(t.shape.dim) for t in tensors}) != 1
        ):
            return None
        dims = [
            d[0] if len(set(d)) == 1 else None
            for d in zip(*([dim.dim_value for dim in t.shape.dim] for t in tensors), strict=True)
        ]
        return onnx.helper.make_sequence_type_proto(
            onnx.helper.make_tensor_type_proto(tensors[0].elem_type, dims)
        )
    try:
        element = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype)
    except (KeyError, ValueError, TypeError):
        return None
    return onnx.helper.make_tensor_type_proto(element, list(np.shape(value)))
