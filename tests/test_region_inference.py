"""Region inference (`seqlower.passes.region_inference`): after a sweep, the lowering infers only
what it rewrote when that provably gives the shapes whole-model inference would. The output must
be the same bytes either way (idempotence depends on it), and the shortcut must be taken on the
models it is for (chains of SequenceMap blocks, as in the bench).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conformance.test_onnx_backend import CASES
from support import assert_same_outputs, op_counts, parse

import seqlower
from seqlower.io import model_to_bytes
from seqlower.passes import lower as lower_module
from seqlower.passes import normalize, region_inference
from seqlower.passes.chunked_inference import DATA_PROPAGATING_OPS
from seqlower.rule import RuleSet
from seqlower.rules import default_rules

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from generator import generate

BLOCK = """s{k} = SplitToSequence<axis = 0, keepdims = 0>({h})
    m{k} = SequenceMap<body = b (float[4] e, float[4,4] w) => (float[4] o) {{
        mm = MatMul(e, w)
        o = Relu(mm)
    }}>(s{k}, w)
    c{k} = ConcatFromSequence<axis = 0, new_axis = 1>(m{k})
    r{k} = Add(c{k}, {h})"""


def _chain(blocks: int) -> onnx.ModelProto:
    lines, h = [], "x"
    for k in range(blocks):
        lines.append(BLOCK.format(k=k, h=h))
        h = f"r{k}"
    body = "\n    ".join([*lines, f"y = Identity({h})"])
    return parse(f"g (float[3,4] x, float[4,4] w) => (float[3,4] y) {{\n    {body}\n}}")


LINK = """s{k} = SplitToSequence<axis = 0>({h})
    a{k}0 = SequenceAt(s{k}, p0)
    a{k}1 = SequenceAt(s{k}, p1)
    r{k}0 = Relu(a{k}0)
    r{k}1 = Relu(a{k}1)
    q{k} = SequenceConstruct(r{k}0, r{k}1)
    c{k} = ConcatFromSequence<axis = 0>(q{k})"""


def _list_chain(links: int) -> onnx.ModelProto:
    """Links of SplitToSequence -> SequenceAt -> Relu -> SequenceConstruct -> Concat, each
    reading the one before (the bench's sequence chain): after each sweep a rewritten link is
    read by a SplitToSequence (a list) or by an Unsqueeze of the next one (no content)."""
    lines, h = ["p0 = Constant<value_int = 0>()", "p1 = Constant<value_int = 1>()"], "x"
    for k in range(links):
        lines.append(LINK.format(k=k, h=h))
        h = f"c{k}"
    body = "\n    ".join(lines)
    return parse(f"g (float[2,3] x) => (float[2,3] {h}) {{\n    {body}\n}}")


def _whole_model_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(region_inference, "infer_region", lambda *args, **kwargs: False)


def _corpus() -> dict[str, onnx.ModelProto]:
    models = {name: case.model for name, case in sorted(CASES.items())}
    models.update({f"fuzz_{seed}": generate(seed).model for seed in range(0, 300, 7)})
    models["chain_3"] = _chain(3)
    models["chain_80"] = _chain(80)  # beyond chunked_inference.SUBGRAPH_LIMIT: inferred in runs
    models["list_chain_5"] = _list_chain(5)
    return models


CORPUS = _corpus()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_same_bytes_as_whole_model_inference(name, monkeypatch):
    model = CORPUS[name]
    with_regions, _ = seqlower.optimize(model)
    _whole_model_only(monkeypatch)
    whole, _ = seqlower.optimize(model)
    assert model_to_bytes(with_regions) == model_to_bytes(whole)


@pytest.fixture
def whole_model_inferences(monkeypatch) -> list:
    """The models given to whole-model shape inference while the test runs, in order."""
    calls = []
    infer = normalize.infer_shapes

    def counted(model):
        calls.append(model)
        infer(model)

    monkeypatch.setattr(normalize, "infer_shapes", counted)
    monkeypatch.setattr(lower_module, "infer_shapes", counted)
    return calls


@pytest.mark.parametrize("blocks", [3, 80])
def test_a_chain_of_maps_is_inferred_as_a_whole_once(blocks, whole_model_inferences):
    calls = whole_model_inferences
    lowered, report = seqlower.optimize(_chain(blocks))
    assert report.rules_fired == {"sequence-map-batch": blocks}
    assert len(calls) == 1  # normalize's; the lowering inferred the rewritten regions only
    onnx.checker.check_model(lowered, full_check=True)
    again, _ = seqlower.optimize(lowered)
    assert model_to_bytes(again) == model_to_bytes(lowered)


def test_a_chain_of_lists_is_inferred_as_a_whole_once(whole_model_inferences):
    calls = whole_model_inferences
    # step by step: more than one sweep rewrites, each followed by an inference
    lowered, report = seqlower.optimize(_list_chain(6), rules=_without_the_list_rule())
    assert report.total_after == 0 and report.iterations > 2
    assert len(calls) == 1  # normalize's; each sweep's rewrites were inferred as a region
    onnx.checker.check_model(lowered, full_check=True)


def test_content_is_followed_back_through_the_operators_that_pass_it_on():
    model = seqlower.io.load_model(
        parse(
            """g (float[2,3] x, int64[2] n) => (float[4,3] y, int64[4] m, float[2,3] z) {
                r = Relu(x)
                y = Concat<axis = 0>(r, r)
                m = Concat<axis = 0>(n, n)
                s = Shape(x)
                u = Unsqueeze(r, s)
                z = Identity(x)
            }"""
        )
    )
    normalize.infer_shapes(model)
    values = {value.name: value for node in model.graph for value in node.outputs}
    assert not region_inference.may_carry_content(values["y"])  # a Concat of Relus: none
    assert region_inference.may_carry_content(values["m"])  # vectors: known element-wise
    assert region_inference.may_carry_content(values["s"])  # a Shape: always
    assert region_inference.may_carry_content(values["u"])  # reads a Shape
    assert not region_inference.may_carry_content(values["z"])  # Identity propagates nothing


def test_a_stamp_is_dropped_when_the_graph_changes():
    model = seqlower.io.load_model(_chain(2))
    normalize.infer_shapes(model)
    assert region_inference.current_stamp(model) is not None
    model.graph.remove(model.graph[len(model.graph) - 1], safe=False)
    assert region_inference.current_stamp(model) is None


def test_data_propagating_ops_are_those_of_the_installed_onnx():
    found = {
        schema.name
        for schema in onnx.defs.get_all_schemas_with_history()
        if schema.domain == "" and schema.has_data_propagation_function
    }
    assert found == DATA_PROPAGATING_OPS


def _without_the_list_rule() -> RuleSet:
    """The default rules but the one that batches a whole link at once: the link is then
    lowered step by step (a Split and its reads, a Concat, the Concat's copies batched)."""
    return RuleSet(r for r in default_rules() if r.name != "unrolled-list-map-batch")


@pytest.mark.parametrize("links", [2, 7])
def test_a_chain_of_lists_is_lowered_in_two_sweeps(links):
    """A rewritten link's value has its static shape at once (the Concat of its rows; the
    batched rows take the shape of the Concat they replace): the next link's SplitToSequence
    is lowered in the same sweep, every link's rows are batched in the next, whatever the
    chain's length (it took a sweep for every other link). Step by step, as a link that the
    list rule does not take is lowered."""
    model = _list_chain(links)
    lowered, report = seqlower.optimize(model, rules=_without_the_list_rule())
    assert report.total_after == 0
    assert report.iterations == 3  # two that rewrote, one that found nothing left
    assert report.rules_fired["unrolled-map-batch"] == links
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    assert_same_outputs(model, lowered, {"x": x})
    again, _ = seqlower.optimize(lowered)
    assert model_to_bytes(again) == model_to_bytes(lowered)


@pytest.mark.parametrize("links", [2, 7])
def test_a_chain_of_lists_is_batched_link_by_link_in_one_sweep(links):
    """Each link is batched at once (`unrolled-list-map-batch`), and its result has the static
    shape the next link's list needs: one sweep rewrites every link, a second finds nothing."""
    model = _list_chain(links)
    lowered, report = seqlower.optimize(model)
    assert report.total_after == 0
    assert report.iterations == 2
    assert report.rules_fired == {"unrolled-list-map-batch": links}
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    assert_same_outputs(model, lowered, {"x": x})
    stepwise, _ = seqlower.optimize(model, rules=_without_the_list_rule())
    assert op_counts(lowered) == op_counts(stepwise)  # the same batched form, other names
    again, _ = seqlower.optimize(lowered)
    assert model_to_bytes(again) == model_to_bytes(lowered)


def _rewriter_over(text: str) -> tuple[ir.Model, lower_module._TrackingRewriter]:
    model = seqlower.io.load_model(parse(text))
    normalize.infer_shapes(model)
    return model, lower_module._TrackingRewriter(model)


def test_a_replacement_made_since_the_last_inference_takes_a_static_shape():
    model, rewriter = _rewriter_over(
        """g (float[2,3] x, float[N,3] z) => (float[2,3] y, float[N,3] w) {
            a = Relu(x)
            y = Identity(a)
            b = Relu(z)
            w = Identity(b)
        }"""
    )
    values = {value.name: value for node in model.graph for value in node.outputs}
    anchor = values["y"].producer()
    made = rewriter.before(anchor).op("Neg", [model.graph.inputs[0]])
    made.type = values["a"].type
    rewriter.replace(values["a"], made)
    assert made.shape == values["a"].shape == ir.Shape([2, 3])
    # a symbolic dim is not carried: inference may know more of the new value
    other = rewriter.before(values["w"].producer()).op("Neg", [model.graph.inputs[1]])
    other.type = values["b"].type
    rewriter.replace(values["b"], other)
    assert other.shape is None


def test_a_value_that_inference_gave_no_shape_is_not_given_one():
    """An input, or a value made before the last inference, keeps what inference gave it: a
    region's inference reads it as given."""
    model, rewriter = _rewriter_over(
        """g (float[2,3] x, float[M] u) => (float[2,3] y) {
            a = Relu(x)
            y = Identity(a)
        }"""
    )
    u = model.graph.inputs[1]
    u.shape = None  # as if declared without one
    a = model.graph.node(0).outputs[0]
    rewriter.replace(a, u)
    assert u.shape is None
