"""ONNX's own conformance cases that involve sequences, lowered and compared with ONNX's expected
outputs: every node test case whose model uses a sequence operator or a sequence type anywhere
(graph, subgraphs, functions; `*_expanded` variants included), plus the
`backend/test/data/simple/test_sequence_model*` models onnx ships.

Each case is optimized, checked (full_check), run under onnxruntime and compared with the
expected outputs. A case whose sequence lengths are all static must end with no sequence op;
the others are listed in KEEPS_SEQUENCE_OPS with the reason, and the report must give a reason
for every operator left.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import warnings
from typing import Any

import onnx
import pytest
from onnx import numpy_helper
from support import (
    MAX_ORT_IR_VERSION,
    SEQUENCE_OPS,
    assert_outputs_equal,
    lower,
    ort_session,
    proto_graphs,
    run_ort,
    run_reference,
    sequence_op_count,
)

# Cases that legitimately keep sequence operators after lowering, and why.
_SEQUENCE_INPUT = "a sequence-typed model input: its length is unknown before run time"
KEEPS_SEQUENCE_OPS = {
    # The If/Loop outputs are sequence-typed model outputs (kept: the interface), built by a
    # sequence op inside a branch or body.
    "test_if_seq": "each If branch returns a sequence to a sequence-typed model output",
    "test_if_opt": "a branch wraps a SequenceConstruct in an Optional model output",
    "test_loop13_seq": "a Loop-carried sequence grows by SequenceInsert: its length is the "
    "trip count, a model input",
    "test_loop16_seq_none": "a Loop-carried optional sequence grows by SequenceInsert",
    # Split sizes or counts known only at run time, or a sequence-typed model output.
    "test_split_to_sequence_1": "the scalar split is a model input: the count depends on data",
    "test_split_to_sequence_2": "the output is a sequence-typed model output (interface kept)",
    "test_split_to_sequence_nokeepdims": "the output is a sequence-typed model output",
    "test_sequence_insert_at_back": _SEQUENCE_INPUT,
    "test_sequence_insert_at_front": _SEQUENCE_INPUT,
    **{
        f"test_sequence_map_{name}{suffix}": _SEQUENCE_INPUT
        for name in (
            "identity_2_sequences",
            "identity_1_sequence_1_tensor",
            "add_2_sequences",
            "add_1_sequence_1_tensor",
            "extract_shapes",
        )
        for suffix in ("", "_expanded")
    },
}


@dataclasses.dataclass(frozen=True)
class Case:
    model: onnx.ModelProto
    inputs: dict[str, Any]
    outputs: list[Any]
    rtol: float = 1e-6
    atol: float = 1e-7


# -- selection ---------------------------------------------------------------------------------


def _has_sequence_type(type_proto: onnx.TypeProto) -> bool:
    if type_proto.HasField("sequence_type"):
        return True
    if type_proto.HasField("optional_type"):
        return _has_sequence_type(type_proto.optional_type.elem_type)
    return False


def uses_sequences(model: onnx.ModelProto) -> bool:
    graphs = list(proto_graphs(model.graph))
    for function in model.functions:
        graphs.append(onnx.helper.make_graph(list(function.node), function.name, [], []))
        graphs.extend(
            sub
            for node in function.node
            for attr in node.attribute
            if attr.type == onnx.AttributeProto.GRAPH
            for sub in proto_graphs(attr.g)
        )
    for graph in graphs:
        if any(
            node.op_type in SEQUENCE_OPS and node.domain in ("", "ai.onnx") for node in graph.node
        ):
            return True
        values = [*graph.input, *graph.output, *graph.value_info]
        if any(_has_sequence_type(value.type) for value in values):
            return True
    return False


# -- loading -----------------------------------------------------------------------------------


def _collect_node_cases() -> dict[str, Case]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy overflow warnings from unrelated cases
        testcases = collect_testcases(None)
    cases = {}
    for testcase in testcases:
        if not uses_sequences(testcase.model):
            continue
        ((inputs, outputs),) = testcase.data_sets
        names = [value.name for value in testcase.model.graph.input]
        cases[testcase.name] = Case(
            testcase.model,
            dict(zip(names, inputs)),
            list(outputs),
            rtol=testcase.rtol,
            atol=testcase.atol,
        )
    return cases


SIMPLE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "simple")


def _read_value(path: str, type_proto: onnx.TypeProto) -> Any:
    """A test data file: a TensorProto, or a SequenceProto for a sequence-typed value."""
    with open(path, "rb") as handle:
        data = handle.read()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return numpy_helper.to_list(sequence)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _load_simple_case(name: str) -> Case:
    folder = os.path.join(SIMPLE_DIR, name)
    model = onnx.load(os.path.join(folder, "model.onnx"))
    initializers = {init.name for init in model.graph.initializer}
    fed = [value for value in model.graph.input if value.name not in initializers]
    data = os.path.join(folder, "test_data_set_0")
    input_files = sorted(glob.glob(os.path.join(data, "input_*.pb")))
    output_files = sorted(glob.glob(os.path.join(data, "output_*.pb")))
    assert len(input_files) == len(fed) and len(output_files) == len(model.graph.output)
    inputs = {v.name: _read_value(f, v.type) for v, f in zip(fed, input_files)}
    outputs = [_read_value(f, v.type) for v, f in zip(model.graph.output, output_files)]
    return Case(model, inputs, outputs)


NODE_CASES = _collect_node_cases()
SIMPLE_CASES = {
    name: _load_simple_case(name)
    for name in sorted(os.listdir(SIMPLE_DIR))
    if name.startswith("test_sequence_model")
}
CASES = {**NODE_CASES, **SIMPLE_CASES}


def test_the_selection_holds_every_sequence_case():
    assert len(NODE_CASES) >= 24  # 25 with onnx 1.23: 24 sequence cases and test_identity_opt
    assert len(SIMPLE_CASES) == 8
    assert {"test_sequence_map_add_2_sequences_expanded", "test_loop16_seq_none"} <= set(CASES)
    assert set(KEEPS_SEQUENCE_OPS) <= set(CASES), "a listed case is no longer collected"


# -- the test ----------------------------------------------------------------------------------


def _onnxruntime_refusal(model: onnx.ModelProto) -> str | None:
    """Why the installed onnxruntime cannot create a session for `model`, or None. Probed, not
    assumed: releases differ (1.31 refuses IR 14; 1.32 loads it but has no OptionalGetElement
    kernel for opset 28)."""
    if model.ir_version > MAX_ORT_IR_VERSION:
        return f"IR version {model.ir_version} > {MAX_ORT_IR_VERSION}"
    try:
        ort_session(model)
    except Exception as error:
        return str(error).splitlines()[0]
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case(name):
    case = CASES[name]
    refusal = _onnxruntime_refusal(case.model)
    lowered, report = lower(case.model, load_ort=refusal is None)

    if refusal is None:
        actual = run_ort(lowered, case.inputs)
    else:
        # onnxruntime cannot run the original: onnx.reference is the oracle for the lowered model
        assert lowered.ir_version == case.model.ir_version
        actual = run_reference(lowered, case.inputs)
    assert_outputs_equal(case.outputs, actual, rtol=case.rtol, atol=case.atol)

    assert len(report.remaining) == sequence_op_count(lowered)
    for remaining in report.remaining:
        assert remaining.reason and remaining.reason != "no rule applies", remaining
    if name in KEEPS_SEQUENCE_OPS:
        assert sequence_op_count(lowered) > 0, "now fully lowered: drop it from KEEPS_SEQUENCE_OPS"
    else:
        assert sequence_op_count(lowered) == 0, report.remaining
