"""The operator census (`seqlower.passes.census`): a pass that looks for operators the model
does not hold is not run; one that changed the model has the census taken again."""

from __future__ import annotations

import onnx_ir as ir
from support import parse

from seqlower.passes.census import OpCensus
from seqlower.passes.noop_casts import remove_noop_casts

MODEL = """g (float[2,3] x) => (float[2,3] y) {
    r = Relu(x)
    c = Cast<to = 1>(x)
    y = Identity(c)
}"""


def test_a_pass_for_operators_the_model_lacks_is_not_run():
    model = ir.from_proto(parse(MODEL))
    census = OpCensus(model)
    ran = []
    assert census.run({"ReduceMin"}, lambda m: ran.append(m) or 1, model) == 0
    assert not ran


def test_a_pass_that_changed_the_model_has_the_census_taken_again():
    model = ir.from_proto(parse(MODEL))
    census = OpCensus(model)
    assert census.holds_any({"Cast"})
    assert census.run({"Cast"}, remove_noop_casts, model) == 1  # a Cast to float of a float
    assert not census.holds_any({"Cast"})  # counted again: the Cast is gone
    assert census.run({"Cast"}, remove_noop_casts, model) == 0


def test_subgraphs_are_counted():
    model = ir.from_proto(
        parse("""g (bool b, float[2] x) => (float[2] y) {
            y = If(b) <then_branch = t () => (float[2] o) { o = Neg(x) },
                       else_branch = e () => (float[2] o) { o = Abs(x) }>
        }""")
    )
    census = OpCensus(model)
    assert census.holds_any({"Neg"}) and census.holds_any({"Abs"})
    assert not census.holds_any({"Cast", "Loop"})
