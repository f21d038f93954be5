"""Ranks that a shape built in a loop body gives (seqlower.analysis.length_rules): the length
of a 1-D vector made from `Shape` of a value ranked only by the analysis fixes the rank of a
Reshape, Expand, ConstantOfShape or Unsqueeze that reads it; and the positions NonZero gives
fix the rank of the GatherND that reads them (PyTorch's `x[mask]`).

Each rule is checked against ONNX's own inference of the same expression over a ranked input;
the shapes whose length only their content decides get no rank, and the reason; and a list
whose elements are ranked this way lowers to tensors for a target that needs every rank and
computes what the original did, at negative positions and when it is empty.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_or_both_fail, lower, parse, reasons, sequence_op_count
from test_ranks import _unranked

from seqlower.analysis.rank_rules import unknown_rank_cause
from seqlower.analysis.ranks import Ranks

_ONE = "one = Constant <value = int64[1] {1}> ()"
_MINUS = "minus = Constant <value = int64[1] {-1}> ()"
_ZERO = "zero = Constant <value = int64[1] {0}> ()"
_TWO = "two = Constant <value = int64[1] {2}> ()"

# an expression over e: float[a,b,c,d] (no static dim: nothing folds), its last line
# `f = ...`: ONNX infers f's rank
_EXPRESSIONS = {
    "reshape to a slice of the shape and -1": [
        "sh = Shape (e)", _ZERO, _TWO, "lead = Slice (sh, zero, two)", _MINUS,
        "t = Concat <axis = 0> (lead, minus)", "f = Reshape (e, t)",
    ],
    "reshape to a shape reversed (negative step)": [
        "sh = Shape (e)", _MINUS, "far = Constant <value = int64[1] {-100}> ()",
        _ZERO, "t = Slice (sh, minus, far, zero, minus)", "f = Reshape (e, t)",
    ],
    "reshape to Shape with start and end": [
        "sh = Shape <start = 1, end = -1> (e)", _MINUS, "t = Concat <axis = 0> (minus, sh)",
        "f = Reshape (e, t)",
    ],
    "reshape to unsqueezed scalars": [
        "sh = Shape (e)", "i0 = Constant <value = int64 {0}> ()", "d0 = Gather (sh, i0)",
        _ZERO, "u0 = Unsqueeze (d0, zero)", _MINUS, "t = Concat <axis = 0> (u0, minus)",
        "f = Reshape (e, t)",
    ],
    "reshape to gathered dims, cast": [
        "sh = Shape (e)", "picks = Constant <value = int64[3] {0, 1, 1}> ()",
        "g = Gather (sh, picks)", "c = Cast <to = 7> (g)", "f = Reshape (e, c)",
    ],
    "reshape to the shape times a scalar": [
        "sh = Shape (e)", "k = Constant <value = int64 {1}> ()", "m = Mul (sh, k)",
        "f = Reshape (e, m)",
    ],
    "expand to a longer shape": [
        "sh = Shape (e)", _ONE, "t = Concat <axis = 0> (one, sh)", "f = Expand (e, t)",
    ],
    "expand to ones as long as the shape (TorchScript's expand)": [
        "sh = Shape (e)", "n = Shape (sh)", "ones = ConstantOfShape <value = int64[1] {1}> (n)",
        "k = Constant <value = int64 {-1}> ()", "m = Mul (ones, k)", "same = Equal (sh, m)",
        "t = Where (same, ones, sh)", "f = Expand (e, t)",
    ],
    "constant of a cut shape": [
        "sh = Shape <start = -3> (e)", "f = ConstantOfShape (sh)",
    ],
}  # fmt: skip


# positions NonZero gives, read by GatherND: the last dim of the positions is the mask's rank
_MASKED = {
    "gather where it is positive (PyTorch's x[mask])": [
        "z = Constant <value = float {0}> ()", "mask = Greater (e, z)", "nz = NonZero (mask)",
        "at = Transpose (nz)", "f = GatherND (e, at)",
    ],
    "gather rows where a reduced mask holds": [
        "axes = Constant <value = int64[2] {2, 3}> ()",
        "total = ReduceSum <keepdims = 0> (e, axes)", "z = Constant <value = float {0}> ()",
        "mask = Greater (total, z)", "nz = NonZero (mask)", "at = Transpose <perm = [1, 0]> (nz)",
        "f = GatherND (e, at)",
    ],
}  # fmt: skip


def _expression_model(lines: list[str]) -> onnx.ModelProto:
    body = "\n  ".join(lines)
    model = parse(f"g (float[a,b,c,d] e) => (float f) {{\n  {body}\n}}")
    del model.graph.output[:]  # its rank is what is asked
    onnx.checker.check_model(model)  # in order, each name once
    return model


def _ranked_as_onnx_does(lines: list[str]) -> tuple[Ranks, dict[str, ir.Value], dict]:
    """The analysis of the expression with every value but the input left unshaped (what
    inference leaves in a body whose input only the analysis ranks), checked to give f the
    rank ONNX gives it when it sees them; and ONNX's types."""
    model = _expression_model(lines)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    types = {v.name: v.type for v in inferred.graph.value_info}
    want = types["f"].tensor_type
    assert want.HasField("shape"), "ONNX itself gives no rank"
    ir_model = ir.serde.deserialize_model(model)
    by_name = {o.name: o for node in ir_model.graph for o in node.outputs}
    assert all(v.shape is None for v in by_name.values())
    ranks = Ranks(ir_model)
    assert ranks.rank(by_name["f"]) == len(want.shape.dim)
    return ranks, by_name, types


@pytest.mark.parametrize("name", _EXPRESSIONS)
def test_a_shape_of_known_length_gives_the_rank_onnx_gives(name):
    """The rank of f, and the length of each vector ONNX knows, as ONNX's."""
    ranks, by_name, types = _ranked_as_onnx_does(_EXPRESSIONS[name])
    checked = 0
    for value_name, value in by_name.items():
        dims = types[value_name].tensor_type.shape.dim if value_name in types else []
        computed = value.producer().op_type != "Constant"
        if computed and len(dims) == 1 and dims[0].HasField("dim_value"):
            assert ranks.length(value) == dims[0].dim_value, value_name
            checked += 1
    assert checked


@pytest.mark.parametrize("name", _MASKED)
def test_positions_of_a_mask_give_gather_nd_the_rank_onnx_gives(name):
    _ranked_as_onnx_does(_MASKED[name])


# shapes whose length depends on their content, or ranks the operator does not fix
_NO_RANK = {
    "reshape to NonZero's positions": (
        ["sh = Shape (e)", "nz = NonZero (sh)", "t = Reshape (nz, minus)", "f = Reshape (e, t)"],
        "made by Reshape to a shape of run-time length",
    ),
    "reshape to a Range": (
        ["sh = Shape (e)", "i0 = Constant <value = int64 {0}> ()", "d = Gather (sh, i0)",
         "s = Constant <value = int64 {0}> ()", "k = Constant <value = int64 {1}> ()",
         "t = Range (s, d, k)", "f = Reshape (e, t)"],
        "made by Reshape to a shape of run-time length",
    ),
    "squeeze by axes computed at run time": (
        ["u = Unsqueeze (e, zero)", "sh = Shape (u)", _ONE, _TWO, "lead = Slice (sh, one, two)",
         "axes = Sub (lead, lead)", "f = Squeeze (u, axes)"],
        "made by Squeeze, whose inputs' ranks do not fix its own",
    ),
    "gather by NonZero's positions not transposed (their count is the last dim)": (
        ["z = Constant <value = float {0}> ()", "mask = Greater (e, z)", "nz = NonZero (mask)",
         "at = Transpose <perm = [0, 1]> (nz)", "f = GatherND (e, at)"],
        "made by GatherND, whose inputs' ranks do not fix its own",
    ),
    "expand by a shape of run-time length": (
        ["sh = Shape (e)", "nz = NonZero (sh)", "t = Reshape (nz, minus)", "f = Expand (e, t)"],
        "made by Expand to a shape of run-time length",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", _NO_RANK)
def test_a_shape_whose_length_its_content_decides_gives_no_rank(name):
    lines, cause = _NO_RANK[name]
    model = _expression_model([_MINUS, _ZERO, *lines])
    ir_model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(model))
    f = next(o for node in ir_model.graph for o in node.outputs if o.name == "f")
    assert Ranks(ir_model).rank(f) is None
    assert cause in unknown_rank_cause(f)


# a list changed in a loop that may stop early (no map, no scan): its elements are what the
# body makes of the element it reads, ranked only by the analysis (ONNX: no shape)
_EDITED_LIST = """
g (float[1,C,3,4] x, float[2,2,1,1] w, int64 k, int64 p) => (float[?] y, int64 count) {{
    two = Constant <value = int64 {{2}}> ()
    maps = SplitToSequence <axis = 1> (x, two)
    n = SequenceLength (maps)
    cond = Constant <value = bool {{1}}> ()
    built0 = SequenceEmpty <dtype = 1> ()
    done, built = Loop (n, cond, maps, built0) <body = body (int64 i, bool c, seq(float) acc,
                                                        seq(float) out)
                                          => (bool c_out, seq(float) acc_out, seq(float) out2) {{
        e = SequenceAt (acc, i)
        conv = Conv (e, w)
        cut = Softmax <axis = 1> (conv)
        {make}
        erased = SequenceErase (acc, i)
        acc_out = SequenceInsert (erased, made, i)
        front = Constant <value = int64 {{0}}> ()
        out2 = SequenceInsert (out, made, front)
        next = Add (i, two)
        c_out = Less (next, k)
    }}>
    picked = SequenceAt (built, p)
    minus = Constant <value = int64[1] {{-1}}> ()
    y = Reshape (picked, minus)
    count = SequenceLength (built)
}}
"""

_MAKES = {
    "reshape to a slice of its shape": """zs = Constant <value = int64[1] {0}> ()
        ts = Constant <value = int64[1] {3}> ()
        sh = Shape (cut)
        lead = Slice (sh, zs, ts)
        mo = Constant <value = int64[1] {-1}> ()
        shp = Concat <axis = 0> (lead, mo)
        made = Reshape (cut, shp)""",
    "expand to its shape": """sh = Shape (cut)
        made = Expand (cut, sh)""",
    "unsqueeze by axes computed at run time": """sh = Shape (cut)
        rk = Shape (sh)
        un = Unsqueeze (cut, rk)
        ax = Constant <value = int64[1] {4}> ()
        made = Squeeze (un, ax)""",
    "dynamic quantization": """q, qs, qz = DynamicQuantizeLinear (cut)
        made = DequantizeLinear (q, qs, qz)""",
}


@pytest.mark.parametrize("name", _MAKES)
def test_a_list_of_elements_ranked_by_their_shapes_lowers_for_every_target(name):
    """Before, the rank of `made` was unknown: the portable target kept both lists and the
    default lowered them to the layout of run-time ranks."""
    model = _unranked(parse(_EDITED_LIST.format(make=_MAKES[name])))
    portable, report = lower(model, load_ort=False, target="portable")
    assert sequence_op_count(portable) == 0, reasons(report)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0, reasons(report)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
    compared = 0
    for channels, k, p in ((6, 9, 0), (6, 9, -1), (6, 9, -3), (6, 3, -1), (4, 0, 0), (2, 9, 1)):
        feeds = {
            "x": rng.standard_normal((1, channels, 3, 4)).astype(np.float32),
            "w": w,
            "k": np.array(k, np.int64),
            "p": np.array(p, np.int64),
        }
        compared += assert_same_or_both_fail(model, lowered, feeds)
    assert compared >= 4  # the others read past the end, or an empty list: both fail


def test_a_squeeze_by_axes_computed_at_run_time_keeps_its_list_with_the_reason():
    """Squeeze's axes may repeat (the spec does not forbid it, unlike Unsqueeze's): their
    count is no proof of the rank, and the portable target keeps the list, saying why. (The
    cause named is the list read back, whose rank the Squeeze put into it makes unknown.)"""
    make = """sh = Shape (cut)
        rk = Shape (sh)
        un = Unsqueeze (cut, rk)
        made = Squeeze (un, rk)"""
    model = _unranked(parse(_EDITED_LIST.format(make=make)))
    portable, report = lower(model, load_ort=False, target="portable")
    assert sequence_op_count(portable) > 0
    assert (
        "the rank of 'made', put into it, is unknown (made from 'acc', an input of unknown rank)"
    ) in reasons(report)
    assert "runtimes that need every tensor's rank" in reasons(report)
