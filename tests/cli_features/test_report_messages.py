"""What the report says about kept operators: the user's node names only, one cause per line,
the whole-model decision said once, and warnings about the scalar-split reading only where the
two readings differ and the node was lowered."""

from __future__ import annotations

import onnx_ir as ir
from support import parse
from typer.testing import CliRunner

import seqlower
from cli_features.newcomer_models import split_loop_sum
from seqlower.cli.app import app
from seqlower.targets import check_target


def test_a_loop_body_reading_an_outer_constant_keeps_its_ranks():
    """The body's ReduceSum reads its axes from the main graph; shape inference got the rank
    of its result only once that constant was given to the body too."""
    _, report = seqlower.optimize(ir.from_proto(split_loop_sum()), target="portable")
    assert report.total_after == 0 and report.remaining == []


def test_the_whole_model_decision_is_said_once(tmp_path):
    source = tmp_path / "m.onnx"
    ir.save(ir.from_proto(split_loop_sum()), source)
    result = CliRunner().invoke(app, ["optimize", str(source), str(tmp_path / "o.onnx")])
    assert result.exit_code == 0
    text = result.stdout
    if "kept the original" not in text:  # a default that lowers everything says nothing here
        return
    assert text.count("costs an estimated") == 1
    assert "kept as given, the original costing less: SplitToSequence '/SplitToSequence'" in text
    assert "try --target portable" in text


def test_onnxruntime_does_not_blame_operators_it_keeps_because_they_are_cheaper():
    model, report = seqlower.optimize(ir.from_proto(split_loop_sum()), target="onnxruntime")
    check = check_target(model, report, "onnxruntime")
    kept_for_speed = [op for op in report.remaining if op.kept_for_speed]
    for op in kept_for_speed:
        assert not any(op.described in warning for warning in check.warnings)
    assert all("slower" not in warning for warning in check.warnings)


def test_a_node_the_lowering_made_is_named_by_the_node_it_came_from():
    """A SequenceMap over a split of a tensor whose rank is known at run time only, with a body
    that is not batchable, becomes a Loop carrying a sequence: the kept SequenceInsert and
    SequenceEmpty are seqlower's own."""
    model = parse("""
agraph (float[N,4] v, int64[R] shape, bool c) => (float[M,K] y) {
  x = Reshape (v, shape)
  s = SplitToSequence <axis=0> (x)
  [themap] m = SequenceMap <body = g (float[1,4] e) => (float[1,K] r) {
      r = If (c) <then_branch = t () => (float[1,4] a) { a = Relu(e) },
                  else_branch = f () => (float[1,8] b) { b = Concat <axis=1> (e, e) }>
  }> (s)
  y = ConcatFromSequence <axis=0> (m)
}""")
    lowered, report = seqlower.optimize(ir.from_proto(model), target="portable", tensor_lists=False)
    made = [op for op in report.remaining if op.created_by]
    assert made and all(op.created_by == "themap" for op in made)
    names = {node.name for node in ir.from_proto(model).graph}
    for op in report.remaining:
        text = " ".join([op.reason, *op.reasons, op.graph])
        for node in ir.traversal.RecursiveGraphIterator(lowered.graph):
            if node.name and node.name not in names and node.name != "themap":
                assert f"'{node.name}'" not in text, text
    check = check_target(lowered, report, "portable")
    assert any("SequenceInsert made from 'themap'" in error for error in check.errors)


UNBIND = """
agraph (float[{rows},2] x) => ({out}) {{
  one = Constant <value = int64 {{1}}> ()
  [unbind] s = SplitToSequence <axis=0, keepdims=0> (x, one)
  {body}
}}"""


def _warnings(rows, out, body, **options):
    model = parse(UNBIND.format(rows=rows, out=out, body=body))
    _, report = seqlower.optimize(ir.from_proto(model), target="portable", **options)
    return [w for w in report.warnings if "SplitToSequence" in w]


def test_no_warning_for_unbind_read_as_pytorch_and_onnxruntime_read_it():
    """The squeeze is what PyTorch meant and what onnxruntime computed on the original."""
    assert _warnings(3, "float[3,2] y", "y = ConcatFromSequence <axis=0, new_axis=1> (s)") == []


def test_the_spec_reading_of_unbind_names_a_lowering_that_happened():
    stack = "y = ConcatFromSequence <axis=0, new_axis=1> (s)"
    (warning,) = _warnings(3, "float[3,1,2] y", stack, split_keepdims="spec")
    assert "'unbind'" in warning and "lowered as the specification reads it" in warning


def test_no_unbind_warning_for_a_split_that_is_only_counted():
    assert _warnings(3, "int64 n", "n = SequenceLength (s)") == []


def test_no_unbind_warning_for_a_kept_split():
    """A split of a tensor whose rank is known at run time only stays; it still computes what
    onnxruntime computed on the original."""
    body = """y = ConcatFromSequence <axis=0, new_axis=1> (s)"""
    model = parse(
        UNBIND.format(rows="N", out="float[M,2] y", body=body)
        .replace("(float[N,2] x)", "(float[N,2] v, int64[R] shape)")
        .replace("[unbind] s =", "x = Reshape (v, shape)\n  [unbind] s =")
    )
    _, report = seqlower.optimize(ir.from_proto(model), target="portable", tensor_lists=False)
    assert "SplitToSequence" in [op.op_type for op in report.remaining]
    assert not any("SplitToSequence" in w for w in report.warnings), report.warnings


def test_no_unbind_warning_for_a_kept_split_whose_reader_was_lowered_with_the_squeeze():
    """Fuzz seed 1276: the split stays (the model returns a list built from it), and the
    ConcatFromSequence reading it is lowered with the squeeze, as onnxruntime reads it."""
    assert (
        _warnings(
            "N",
            "float[N,2] y, seq(float) kept",
            "y = ConcatFromSequence <axis=0, new_axis=1> (s)\n  kept = Identity (s)",
            tensor_lists=False,  # the rules alone keep the split for the list returned
        )
        == []
    )
