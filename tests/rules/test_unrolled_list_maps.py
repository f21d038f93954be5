"""unrolled-list-map-batch: ConcatFromSequence(SequenceConstruct(f(SequenceAt(SplitToSequence(x),
i)) for every i)), what TorchScript writes for `torch.stack([f(t) for t in x.unbind(0)])` kept
as lists, is f applied once to the stack, in one rewrite (as unrolled-map-batch does once the
list has become a Split, its reads and a Concat)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from support import lower, lower_and_compare, op_counts, parse

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal, RuleSet
from seqlower.rules import default_rules, unrolled_maps

RNG = np.random.default_rng(7)
RULE = next(rule for rule in unrolled_maps.RULES if rule.name == "unrolled-list-map-batch")
RELU = "r{i} = Relu (e{i})"


def _listed(
    copies: list[str],
    *,
    positions: list[int] | None = None,
    split: str = "",
    split_attributes: str = "axis = 0",
    concat: str = "axis = 0",
    shape: str = "3,4",
    out: str = "float[3,4] y",
    dtype: str = "float",
    extra_outputs: str = "",
) -> str:
    """SplitToSequence of x, SequenceAt at `positions` (0, 1, .. by default), `copies[i]`
    computing r{i} from e{i}, then SequenceConstruct and ConcatFromSequence."""
    positions = list(range(len(copies))) if positions is None else positions
    lines = [f"s = SplitToSequence <{split_attributes}> (x{split})"]
    for i, (body, position) in enumerate(zip(copies, positions)):
        lines.append(f"p{i} = Constant <value = int64 {{{position}}}> ()")
        lines.append(f"e{i} = SequenceAt (s, p{i})")
        lines.append(body.format(i=i))
    lines.append(f"q = SequenceConstruct ({', '.join(f'r{i}' for i in range(len(copies)))})")
    lines.append(f"y = ConcatFromSequence <{concat}> (q)")
    body = "\n  ".join(lines)
    return f"agraph ({dtype}[{shape}] x) => ({out}{extra_outputs}) {{\n  {body}\n}}"


def _x(shape=(3, 4), dtype=np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * 10).astype(dtype)


def test_rows_mapped_and_concatenated_are_one_map():
    lowered, report, _ = lower_and_compare(parse(_listed([RELU] * 3)), {"x": _x()})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert report.total_after == 0 and report.iterations == 2  # one that rewrote
    assert op_counts(lowered)["Relu"] == 1 and "Split" not in op_counts(lowered)


def test_squeezed_rows_stacked_on_another_axis():
    """unbind (keepdims=0) and stack on axis 1: a Transpose of the mapped tensor."""
    text = _listed(
        ["t{i} = Constant <value = float {{2}}> ()\nr{i} = Mul (e{i}, t{i})"] * 3,
        split_attributes="axis = 0, keepdims = 0",
        concat="axis = 1, new_axis = 1",
        out="float[4,3] y",
    )
    lowered, report, _ = lower_and_compare(parse(text), {"x": _x()})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert op_counts(lowered) == {"Constant": 1, "Mul": 1, "Transpose": 1}


def test_negative_positions_count_from_the_end():
    text = _listed([RELU] * 3, positions=[-3, 1, -1])
    _, report, _ = lower_and_compare(parse(text), {"x": _x()})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}


def test_chunks_of_two_by_a_scalar_split():
    text = _listed(
        ["r{i} = Neg (e{i})"] * 2,
        split=", two",
        shape="4,3",
        out="float[4,3] y",
    ).replace("s = Split", "two = Constant <value = int64 {2}> ()\n  s = Split")
    _, report, _ = lower_and_compare(parse(text), {"x": _x((4, 3))})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}


@pytest.mark.parametrize("dtype", ["int64", "double", "float16"])
def test_edge_dtypes(dtype):
    text = _listed(["r{i} = Neg (e{i})"] * 3, dtype=dtype, out=f"{dtype}[3,4] y")
    numpy_type = {"int64": np.int64, "double": np.float64, "float16": np.float16}[dtype]
    lowered, report, _ = lower_and_compare(parse(text), {"x": _x(dtype=numpy_type)})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert op_counts(lowered)["Neg"] == 1


def test_empty_elements():
    """Rows of no column: every element is empty, and so is the result."""
    text = _listed([RELU] * 3, shape="3,0", out="float[3,0] y")
    _, report, outputs = lower_and_compare(parse(text), {"x": _x((3, 0))})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert outputs[0].shape == (3, 0)


# -- refusals ----------------------------------------------------------------------------------


def _refused(text: str, why: str) -> None:
    """The rule refuses the ConcatFromSequence of `text`, saying `why`, and leaves the model
    as it was; the model is still lowered (step by step) to the same results."""
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    concat = next(node for node in model.graph if node.op_type == "ConcatFromSequence")
    ctx = Context(Facts(model), Rewriter(model), Options())
    values = [*model.graph.inputs, *(v for node in model.graph for v in node.outputs)]
    uses = [len(value.uses()) for value in values]
    refusal = RULE.check(concat, ctx)
    assert isinstance(refusal, Refusal) and why in refusal.reason, refusal
    assert [len(value.uses()) for value in values] == uses
    shape = tuple(int(d) for d in model.graph.inputs[0].shape or ())  # type: ignore[arg-type]
    _, report, _ = lower_and_compare(parse(text), {"x": _x(shape)})
    assert "unrolled-list-map-batch" not in report.rules_fired


def test_elements_out_of_order_are_refused():
    _refused(_listed([RELU] * 3, positions=[1, 0, 2]), "does not read element 1")


def test_some_of_the_elements_are_refused():
    _refused(_listed([RELU] * 3, shape="4,4", out="float[3,4] y"), "3 elements of a list of 4")


def test_copies_that_differ_are_refused():
    copies = [RELU, "r{i} = Neg (e{i})", RELU]
    _refused(_listed(copies), "not copies of one computation")


def test_a_list_read_elsewhere_too_is_refused():
    text = _listed([RELU] * 3, extra_outputs=", seq(float[1,4]) q")
    _refused(text, "the list is read elsewhere too")


def test_uneven_elements_are_refused():
    text = _listed([RELU] * 3, split=", sizes", shape="4,4", out="float[4,4] y")
    text = text.replace(
        "s = Split", "sizes = Constant <value = int64[3] {1, 2, 1}> ()\n  s = Split"
    )
    _refused(text, "the split sizes are not known to be equal")


def test_copies_reading_no_list_are_left_to_the_concat_rules():
    """Chunks of a Split, not elements of a list: the Concat the list becomes is batched
    (unrolled-map-batch), as before this rule."""
    lines = [
        "sizes = Constant <value = int64[3] {1, 1, 1}> ()",
        "c0, c1, c2 = Split <axis = 0> (x, sizes)",
        *(f"r{i} = Relu (c{i})" for i in range(3)),
        "q = SequenceConstruct (r0, r1, r2)",
        "y = ConcatFromSequence <axis = 0> (q)",
    ]
    text = "agraph (float[3,4] x) => (float[3,4] y) {\n  " + "\n  ".join(lines) + "\n}"
    _refused(text, "the copies read no element of a split list")
    _, report = lower(parse(text))
    assert report.rules_fired["unrolled-map-batch"] == 1


def test_before_opset_14_the_list_is_refused():
    model = ir.from_proto(parse(_listed([RELU] * 3), opset=13))
    infer_shapes(model)
    concat = next(node for node in model.graph if node.op_type == "ConcatFromSequence")
    refusal = RULE.check(concat, Context(Facts(model), Rewriter(model), Options()))
    assert isinstance(refusal, Refusal) and "opset 14" in refusal.reason


@pytest.mark.parametrize("reading", ["onnxruntime", "spec"])
def test_a_scalar_split_of_one_without_keepdims_is_read_as_asked(reading):
    """SplitToSequence(x, 1 (scalar), keepdims=0): onnxruntime squeezes the axis, the spec
    keeps it (`split_keepdims`). The list is batched under either reading, to what lowering
    the list step by step (as a Split, its reads and a Concat) gives; the default reading is
    onnxruntime's own."""
    text = _listed(
        [RELU] * 3,
        split=", one",
        split_attributes="axis = 0, keepdims = 0",
        concat="axis = 0, new_axis = 1",
    ).replace("s = Split", "one = Constant <value = int64 {1}> ()\n  s = Split")
    x = _x()
    if reading == "onnxruntime":
        lower_and_compare(parse(text), {"x": x})
    results = []
    for rules in (None, RuleSet(r for r in default_rules() if r is not RULE)):
        lowered, report = lower(parse(text), split_keepdims=reading, rules=rules)
        session = ort.InferenceSession(
            lowered.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        results.append((session.run(None, {"x": x})[0], report))
    (batched, report), (stepwise, _) = results
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert batched.shape == ((3, 4) if reading == "onnxruntime" else (3, 1, 4))
    np.testing.assert_array_equal(batched, stepwise)


def test_two_lists_zipped():
    """Each copy adds element i of one list to element i of another: both are stacked."""
    reads = "".join(
        f"a{i} = SequenceAt (s, p{i})\n  b{i} = SequenceAt (t, p{i})\n  r{i} = Add (a{i}, b{i})\n  "
        for i in range(3)
    )
    positions = "".join(f"p{i} = Constant <value = int64 {{{i}}}> ()\n  " for i in range(3))
    text = f"""agraph (float[3,4] x, float[3,4] z) => (float[3,4] y) {{
  s = SplitToSequence <axis = 0> (x)
  t = SplitToSequence <axis = 0> (z)
  {positions}{reads}q = SequenceConstruct (r0, r1, r2)
  y = ConcatFromSequence <axis = 0> (q)
}}"""
    lowered, report, _ = lower_and_compare(parse(text), {"x": _x(), "z": _x()})
    assert report.rules_fired == {"unrolled-list-map-batch": 1}
    assert op_counts(lowered)["Add"] == 1


def test_an_element_read_elsewhere_too_stays_for_that_reader():
    """The stack is batched; the element another node reads is still read from the list
    (lowered by the other rules), and both results are right."""
    lines = [
        "s = SplitToSequence <axis = 0> (x)",
        *(f"p{i} = Constant <value = int64 {{{i}}}> ()" for i in range(2)),
        *(f"a{i} = SequenceAt (s, p{i})\n  r{i} = Relu (a{i})" for i in range(2)),
        "w = Neg (a1)",
        "q = SequenceConstruct (r0, r1)",
        "y = ConcatFromSequence <axis = 0, new_axis = 1> (q)",
    ]
    text = (
        "agraph (float[2,4] x) => (float[2,1,4] y, float[1,4] w) {\n  " + "\n  ".join(lines) + "\n}"
    )
    _, report, _ = lower_and_compare(parse(text), {"x": _x((2, 4))})
    assert report.rules_fired["unrolled-list-map-batch"] == 1
    assert report.total_after == 0
