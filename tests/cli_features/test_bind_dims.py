"""`--dim N=8` (Options.dims): symbolic input dims get sizes, so dynamic lengths become static."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_outputs_equal, lower, op_counts, run_ort, sequence_op_count

import seqlower
from cli_features.models import floats, map_over_split
from seqlower.passes.bind_dims import BindDimsPass


def test_binding_the_split_dim_unrolls_a_dynamic_sequence_map():
    model = map_over_split("N")
    dynamic, _ = lower(model)
    assert op_counts(dynamic)["Loop"] == 1  # the length is not known: a Loop

    lowered, report = lower(model, dims={"N": 3})
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["If"] == 3  # one body per row
    assert report.rules_fired.get("sequence-map-unroll") == 1
    dims = lowered.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [3, 4]
    assert report.interface_changes == [
        {"kind": "bind_dim", "dim": "N", "size": 3, "inputs": ["x"]}
    ]
    for flag in (True, False):
        feeds = {"x": floats(3, 4), "c": np.array(flag)}
        assert_outputs_equal(run_ort(model, feeds), run_ort(lowered, feeds))


def test_the_bound_model_accepts_only_the_given_size():
    lowered, _ = lower(map_over_split("N"), dims={"N": 3})
    with pytest.raises(Exception, match=r"(?i)dimension|shape"):
        run_ort(lowered, {"x": floats(5, 4), "c": np.array(True)})


def test_a_name_that_is_no_input_dim_is_an_error_naming_the_known_ones():
    with pytest.raises(seqlower.SeqlowerError, match=r"dim 'Q' is not .*symbolic input dims: N"):
        seqlower.optimize(map_over_split("N"), dims={"Q": 3})


def test_a_negative_size_is_an_error():
    with pytest.raises(seqlower.SeqlowerError, match="dim 'N': size must be an integer >= 0"):
        seqlower.optimize(map_over_split("N"), dims={"N": -1})


def test_the_pass_alone_binds_main_graph_inputs_and_says_which():
    model = ir.serde.deserialize_model(map_over_split("N"))
    bind = BindDimsPass({"N": 2})
    assert bind(model).modified
    assert bind.bound == {"N": ["x"]}
    assert list(model.graph.inputs[0].shape) == [2, 4]
    assert not BindDimsPass({})(model).modified


def test_the_callers_model_keeps_its_symbolic_dims():
    model = ir.serde.deserialize_model(map_over_split("N"))
    seqlower.optimize(model, dims={"N": 3})
    assert isinstance(model.graph.inputs[0].shape[0], ir.SymbolicDim)
