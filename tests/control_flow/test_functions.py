"""Model-local functions: the driver visits their bodies, but without shapes or sequence facts
there little can be lowered, so the functions that hold or pass sequences are inlined first."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import lower_and_compare, op_counts, parse, sequence_op_count

from seqlower.ops import iter_all_graphs
from seqlower.passes.inline_functions import InlineSequenceFunctionsPass

X = np.arange(12, dtype=np.float32).reshape(4, 3)

FUNCTIONS = """
<domain: "local", opset_import: ["" : 18]>
roundtrip (a) => (b) {
    s = SplitToSequence<axis = 0>(a)
    b = ConcatFromSequence<axis = 0>(s)
}
<domain: "local", opset_import: ["" : 18]>
rows (a) => (s) {
    s = SplitToSequence<axis = 0, keepdims = 0>(a)
}
<domain: "local", opset_import: ["" : 18]>
first (s) => (e) {
    zero = Constant<value = int64 {0}>()
    e = SequenceAt(s, zero)
}
<domain: "local", opset_import: ["" : 18, "local" : 1]>
twice (a) => (b) {
    b = local.roundtrip(a)
}
<domain: "local", opset_import: ["" : 18]>
plain (a) => (b) {
    b = Neg(a)
}
"""

MODEL = parse(
    """g (float[4,3] x) => (float[4,3] y, float[3] z, float[4,3] w, float[4,3] v) {
    y = local.roundtrip(x)
    s = local.rows(x)
    z = local.first(s)
    w = local.twice(x)
    v = local.plain(x)
}""",
    functions=FUNCTIONS,
    domains={"local": 1},
)


def test_functions_with_sequences_are_inlined_and_lowered():
    lowered, report, (y, z, w, v) = lower_and_compare(MODEL, {"x": X})
    for got, want in ((y, X), (z, X[0]), (w, X), (v, -X)):
        np.testing.assert_array_equal(got, want)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["inline-function"] == 4
    # a function without sequences keeps its calls
    assert op_counts(lowered)["local::plain"] == 1
    assert [f.name for f in lowered.functions] == ["plain"]


def test_the_pass_names_what_it_inlined():
    model = ir.from_proto(MODEL)
    inline = InlineSequenceFunctionsPass()
    assert inline(model).modified
    assert inline.inlined == ["local::first", "local::roundtrip", "local::rows", "local::twice"]
    calls = [n.op_type for g in iter_all_graphs(model) for n in g if n.domain == "local"]
    assert calls == ["plain"]


def test_a_function_inside_a_loop_body():
    model = parse(
        """g (float[4,3] x) => (float[4,3] y) {
        m = Constant<value = int64 {2}>()
        t = Constant<value = bool {1}>()
        y = Loop(m, t, x) <body = body (int64 i, bool cond, float[4,3] acc)
                                       => (bool c2, float[4,3] out) {
            c2 = Identity(cond)
            r = local.roundtrip(acc)
            out = Add(r, acc)
        }>
    }""",
        functions=FUNCTIONS,
        domains={"local": 1},
    )
    lowered, _, (y,) = lower_and_compare(model, {"x": X})
    np.testing.assert_array_equal(y, 4 * X)
    assert sequence_op_count(lowered) == 0 and not lowered.functions
