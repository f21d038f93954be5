"""Properties of `seqlower.optimize` as a whole: deterministic, idempotent, never adds sequence
ops, accepts what users hold without mutating it, and its passes fit a user's PassManager.

The corpus is ONNX's conformance cases with sequences (tests/conformance) plus a few models
that exercise every rule family.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conformance.test_onnx_backend import CASES
from support import assert_outputs_equal, lower, parse, run_ort, sequence_op_count

import seqlower
from seqlower.io import model_to_bytes
from seqlower.passes import CleanupPass, LowerSequencesPass, NormalizePass
from seqlower.rule import Refusal, Rule, RuleSet

LOCAL_MODELS = {
    "split_at_concat": parse("""g (float[2,6] x, int64 p) => (float y, float z, int64 n) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
        y = SequenceAt(s, p)
        t = SequenceErase(s)
        n = SequenceLength(t)
        z = ConcatFromSequence<axis = -1, new_axis = 1>(t)
    }"""),
    "if_chain_and_dead_sequences": parse("""g (float[2] a, float[3] b, int64 p) => (float y) {
        s = SequenceConstruct(a, b)
        unused = SequenceInsert(s, a, p)
        y = SequenceAt(s, p)
    }"""),
    "sequence_map_static": parse(
        """g (float[3,4] x) => (float y) {
            s = SplitToSequence<axis = 0, keepdims = 0>(x)
            m = SequenceMap<body = b (float[4] r) => (float[4] z) { z = Neg(r) }>(s)
            y = ConcatFromSequence<axis = 0>(m)
        }""",
        opset=17,
    ),
}
CORPUS = {**{name: case.model for name, case in CASES.items()}, **LOCAL_MODELS}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_deterministic(name):
    first, _ = seqlower.optimize(CORPUS[name])
    second, _ = seqlower.optimize(CORPUS[name])
    assert model_to_bytes(first) == model_to_bytes(second)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_idempotent(name):
    once, _ = seqlower.optimize(CORPUS[name])
    twice, report = seqlower.optimize(once)
    assert report.rules_fired == {}
    assert model_to_bytes(twice) == model_to_bytes(once)


def _budget(name: str, model: onnx.ModelProto) -> int:
    """The number of sequence ops the output may have: the input's, except that a SequenceMap
    over sequences of unknown length must become a Loop that still reads and builds sequences;
    there the budget is ONNX's own expansion of the same model (the `_expanded` case)."""
    expanded = CASES.get(f"{name}_expanded")
    return sequence_op_count(expanded.model if expanded else model)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_never_more_sequence_ops_than_the_input(name):
    model = CORPUS[name]
    lowered, report = seqlower.optimize(model)
    assert report.total_before == sequence_op_count(model)
    assert report.total_after == sequence_op_count(lowered)  # a ModelProto, as given
    assert report.total_after <= _budget(name, model)


# -- what optimize accepts ---------------------------------------------------------------------

MODEL = LOCAL_MODELS["split_at_concat"]
FEEDS = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "p": np.array(-1, dtype=np.int64)}


def test_accepts_a_path_a_model_proto_and_an_ir_model(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(MODEL, path)
    results = [
        seqlower.optimize(path, target="portable").model,
        seqlower.optimize(str(path), target="portable").model,
        seqlower.optimize(MODEL, target="portable").model,
        seqlower.optimize(ir.from_proto(MODEL), target="portable").model,
    ]
    assert len({model_to_bytes(model) for model in results}) == 1
    assert sequence_op_count(ir.to_proto(results[0])) == 0


def test_does_not_mutate_the_given_models():
    ir_model = ir.from_proto(MODEL)
    ir_before = model_to_bytes(ir_model)
    proto_before = MODEL.SerializeToString(deterministic=True)
    seqlower.optimize(ir_model)
    seqlower.optimize(MODEL)
    assert model_to_bytes(ir_model) == ir_before
    assert MODEL.SerializeToString(deterministic=True) == proto_before


SHADOWED_INITIALIZER = onnx.parser.parse_model(
    """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x, bool b) => (float[2] y) <float[2] w = {1.0, 2.0}> {
        y = If(b) <then_branch = t () => (float[2] o) <float[2] w = {5.0, 6.0}> { o = Add(x, w) },
                   else_branch = e () => (float[2] o2) { o2 = Sub(x, w) }>
    }"""
)


def test_a_renamed_initializer_leaves_the_given_proto_as_it_was():
    """The then-branch's `w` shadows the graph's and is renamed in the lowered model; an
    onnx_ir model read from a proto shares its tensors, whose names it writes through."""
    before = SHADOWED_INITIALIZER.SerializeToString(deterministic=True)
    lowered, _ = seqlower.optimize(SHADOWED_INITIALIZER)
    assert SHADOWED_INITIALIZER.SerializeToString(deterministic=True) == before
    branch = lowered.graph.node[0].attribute[0].g
    assert [t.name for t in branch.initializer] == ["w_inner"]


def test_options_as_keywords():
    text = """g (float[3,2] x) => (float y) {
        one = Constant<value = int64 {1}>()
        s = SplitToSequence<axis = 0, keepdims = 0>(x, one)
        y = ConcatFromSequence<axis = 0>(s)
    }"""
    x = np.zeros((3, 2), dtype=np.float32)
    squeezed, _ = lower(parse(text))
    kept, _ = lower(parse(text), split_keepdims="spec")
    assert run_ort(squeezed, [x])[0].shape == (6,)
    assert run_ort(kept, [x])[0].shape == (3, 2)


# -- the passes in a user's PassManager ----------------------------------------------------------


def test_the_passes_run_in_a_user_pass_manager():
    model = ir.from_proto(MODEL)
    manager = ir.passes.PassManager([NormalizePass(), LowerSequencesPass(), CleanupPass()])
    result = manager(model)
    assert result.modified
    proto = ir.to_proto(result.model)
    onnx.checker.check_model(proto, full_check=True)
    assert sequence_op_count(proto) == 0
    assert_outputs_equal(run_ort(MODEL, FEEDS), run_ort(proto, FEEDS))


@pytest.mark.parametrize("pass_type", [NormalizePass, LowerSequencesPass, CleanupPass])
def test_each_pass_alone_is_an_onnx_ir_pass(pass_type):
    model = ir.from_proto(MODEL)
    step = pass_type()
    assert isinstance(step, ir.passes.PassBase)
    result = ir.passes.PassManager([step])(model)
    assert isinstance(result, ir.passes.PassResult)
    assert_outputs_equal(run_ort(MODEL, FEEDS), run_ort(ir.to_proto(result.model), FEEDS))


# -- the driver ----------------------------------------------------------------------------------


def test_rules_marked_before_producers_see_the_pattern_whole():
    """The driver tries `before_producers` rules on every node before the others: the toy rule on
    the consumer (later in the graph) fires first, and its rewrite leaves the producer dead (it
    is removed at once, so the producer rule never runs)."""
    model = parse("""g (float[2] x) => (float[2] y) {
        a = Neg (x)
        y = Abs (a)
    }""")
    order: list[str] = []

    def record(name):
        def rewrite(node, match, ctx):
            order.append(name)
            if name == "consumer":  # Abs(Neg(x)) -> Abs(x)
                replacement = ctx.rewriter.before(node).op(
                    "Abs", [node.inputs[0].producer().inputs[0]]
                )
                ctx.rewriter.replace(node.outputs[0], replacement)

        return rewrite

    def once(node, ctx):
        return Refusal("fired already") if order else None

    rules = RuleSet(
        [
            Rule("producer", "Neg", once, record("producer")),
            Rule("consumer", "Abs", once, record("consumer"), before_producers=True),
        ]
    )
    lowered, report = seqlower.optimize(model, rules=rules)
    assert order == ["consumer"]
    assert report.rules_fired == {"consumer": 1}
    assert [node.op_type for node in lowered.graph.node] == ["Abs"]  # a ModelProto, as given
