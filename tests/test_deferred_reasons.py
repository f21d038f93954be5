"""Work the lowering no longer does per rewrite, and that it still does when it must: a rule's
reason for refusing is made only when the report reads it (`DeferredRefusal`), the elements of
a list an insert makes are answered without the walk to the end of its chain
(`Facts.elements`), and a rewrite of a reader of lists keeps the remembered walks along the
chains of lists (`Rewriter.list_generation`)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper
from support import lower, lower_and_compare, parse, reasons

from seqlower.analysis import facts as facts_module
from seqlower.analysis.facts import Facts, KnownElements
from seqlower.rewriter import Rewriter
from seqlower.rule import DeferredRefusal, Refusal
from seqlower.rules import control_flow
from tests.test_facts_chains import _STEPS, _chain
from tests.test_hostile_inputs import ifs_appending_in_a_row


def test_a_deferred_reason_is_made_once_when_read() -> None:
    made: list[int] = []

    def make() -> str:
        made.append(1)
        return "because"

    refusal = DeferredRefusal(make)
    assert isinstance(refusal, Refusal) and not made
    assert refusal.reason == "because" and refusal.reason == "because"
    assert made == [1]


def _counted_reasons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per reason if-sequence-outputs made (`_unknown_outputs` called)."""
    made: list[int] = []
    original = control_flow._unknown_outputs

    def counted(unknown, ctx):  # type: ignore[no-untyped-def]
        made.append(len(unknown))
        return original(unknown, ctx)

    monkeypatch.setattr(control_flow, "_unknown_outputs", counted)
    return made


def _steps_walked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of the nodes the walks along chains of lists passed or stopped at."""
    count = [0]

    class Counted(dict):
        def get(self, *args):  # type: ignore[no-untyped-def]
            count[0] += 1
            return super().get(*args)

    monkeypatch.setattr(facts_module, "_STEPS", Counted(facts_module._STEPS))
    return count


def test_ifs_in_a_row_do_not_walk_the_chain_for_a_reason_no_one_reads(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # if-sequence-outputs refuses each If but the first (its branches insert into a list of
    # unknown elements: the length only is known) and if-append-both-branches rewrites it: the
    # refusal's reason, a walk back along the inserts before, is not read. The walks are
    # linear in the Ifs (they were quadratic: 502 nodes passed at 30 Ifs, 7,387 at 120)
    walked = _steps_walked(monkeypatch)
    x = np.array([1.5, -2.0], np.float32)
    steps = {}
    for count in (30, 120):
        model = ifs_appending_in_a_row(count)
        walked[0] = 0
        _, report, (y,) = lower_and_compare(model, {"x": x, "c": np.array(False)})
        steps[count] = walked[0]
        np.testing.assert_array_equal(y, np.tile(x + x, (count, 1)))
        assert report.rules_fired["if-append-both-branches"] == count - 1
        assert report.rules_fired["if-sequence-outputs"] == 1
        assert not report.remaining
    assert steps[120] <= 5 * steps[30], steps


def test_the_reason_is_still_given_for_an_if_that_stays(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    made = _counted_reasons(monkeypatch)
    model = parse(
        """g (bool c, seq(float[2]) t, float[2] x) => (float[n,2] y) {
        s = If(c) <
            then_branch = then_g () => (seq(float[2]) r1) {
                r1 = Identity(t)
            },
            else_branch = else_g () => (seq(float[2]) r2) {
                r2 = SequenceInsert(t, x)
            }
        >
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    _, report = lower(model, target="generic")
    why = reasons(report, "SequenceInsert")
    assert (
        "If 'If#0 (s)' stays: if-sequence-outputs: output 's' in then_g: 't' is a "
        "sequence-typed model input (its length is unknown)" in why
    ), why
    assert made and all(count == 1 for count in made)


def test_elements_of_an_insert_are_answered_without_a_walk(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    steps = [_STEPS[k * 7 % 5] for k in range(40)]
    for start in ("construct", "split", "input"):
        model = _chain(steps, start)
        rewriter = Rewriter(model)
        facts = Facts(model, rewriter.generation, rewriter.list_generation)
        fresh = Facts(model)
        for value in model.graph.outputs:
            fact = fresh.sequence(value)
            expected = fact.elements if isinstance(fact, KnownElements) else None
            assert facts.elements(value) == expected, (start, value.name)
    # an insert's list: no walk at all
    model = _chain(["SequenceInsert", *steps], "construct")
    facts = Facts(model)

    def no_walk(self, value):  # type: ignore[no-untyped-def]
        raise AssertionError("walked")

    monkeypatch.setattr(Facts, "_chain_end", no_walk)
    assert facts.elements(model.graph.outputs[1]) is None


def _split_and_length() -> ir.Model:
    """A split of x[4, 3], its length n (a graph output) and an insert into the split's list."""
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    listed = helper.make_sequence_type_proto(element)
    graph = helper.make_graph(
        [
            helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
            helper.make_node("SequenceLength", ["s"], ["n"]),
            helper.make_node("SequenceInsert", ["s", "a"], ["t"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_value_info("t", listed),
        ],
    )
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_rewrite_of_a_list_reader_keeps_the_walks_and_one_of_a_list_does_not(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    model = _split_and_length()
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    walked: list[ir.Value] = []
    original = facts_module.Facts._chain_end

    def counted(self, value):  # type: ignore[no-untyped-def]
        walked.append(value)
        return original(self, value)

    monkeypatch.setattr(facts_module.Facts, "_chain_end", counted)
    nodes = list(model.graph)
    split, length, insert = nodes
    t = insert.outputs[0]
    assert facts.length(t) == 5
    seen = rewriter.list_generation()
    # the length lowered (a Shape and Gather emitted, the SequenceLength's tensor replaced)
    builder = rewriter.before(length)
    gathered = builder.op(
        "Gather", [builder.op("Shape", [split.inputs[0]]), builder.constant(np.array(0))]
    )
    gathered.type = ir.TensorType(ir.DataType.INT64)
    rewriter.replace(length.outputs[0], gathered)
    rewriter.take_touched()
    assert rewriter.list_generation() == seen
    # an emitted SequenceAt with a tensor output changes no list either
    at = rewriter.before(insert).op("SequenceAt", [split.outputs[0], gathered])
    at.type = ir.TensorType(ir.DataType.FLOAT)
    rewriter.take_touched()
    assert rewriter.list_generation() == seen
    assert facts._current_chains() and facts.length(t) == 5  # remembered: no new walk
    walks = len(walked)
    assert facts.length(t) == 5 and len(walked) == walks + 1
    assert facts._chains.get(t) is not None
    # a SequenceAt whose output is not typed as a tensor may make a list: forgotten
    untyped = rewriter.before(insert).op("SequenceAt", [split.outputs[0], gathered])
    untyped.type = None
    rewriter.take_touched()
    assert rewriter.list_generation() == seen + 1
    assert not facts._current_chains()
    # and a rewrite that emits a list maker
    seen = rewriter.list_generation()
    rewriter.before(insert).op("SequenceInsert", [split.outputs[0], insert.inputs[1]])
    rewriter.take_touched()
    assert rewriter.list_generation() == seen + 1
