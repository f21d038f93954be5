"""ListLengths: one length for lists a Loop edits together, element i put at i, and a bound.

What each fact proves is checked twice: on the structure (what it claims and what it refuses,
with the reason), and under onnxruntime, by running the model with every claim turned into a
run-time check in the Loop body (a Gather that reads out of range when the claim is false), on
zero steps, zero layers, empty prompts and the fixtures' saved inputs.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import ort_session, parse, stored_data_sets

from seqlower.analysis import Facts
from seqlower.analysis.list_lengths import ListLengths
from seqlower.passes.normalize import infer_shapes

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
CACHE = FIXTURES / "torch_fresh" / "hf_dynamic_cache"

_THEN = "ka = SequenceInsert(k, kx)\n                va = SequenceInsert(v, vx)"
_ELSE = """kold = SequenceAt(k, i)
                kcat = Concat<axis = 0>(kold, kx)
                kcut = SequenceErase(k, i)
                kb = SequenceInsert(kcut, kcat, i)
                vold = SequenceAt(v, i)
                vcat = Concat<axis = 0>(vold, vx)
                vcut = SequenceErase(v, i)
                vb = SequenceInsert(vcut, vcat, i)"""


def _cache(
    then: str = _THEN,
    other: str = _ELSE,
    fresh: str = "fresh = LessOrEqual(n, i)",
    values: str = "vs0 = SequenceEmpty<dtype = 1>()",
    layers: str = "layers = Constant<value = int64 {2}>()",
) -> onnx.ModelProto:
    """transformers' `DynamicCache.update` in a decoding loop: per step and layer i, `if
    len(keys) <= i: keys.append(kx); values.append(vx)` else `keys[i] = cat([keys[i], kx])`
    and the same for the values; attention reads `keys[i]` and `values[i]`."""
    return parse(f"""g (float[T,3] h0, int64 steps) => (float[T,3] h_out, int64 nk, int64 nv) {{
    t = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    axes = Constant<value = int64[1] {{0}}>()
    {layers}
    ks0 = SequenceEmpty<dtype = 1>()
    {values}
    h_out, ks, vs = Loop(steps, t, h0, ks0, vs0) <body = step (int64 s, bool c, float[T,3] h,
            seq(float[?,3]) K, seq(float[?,3]) V)
            => (bool c2, float[T,3] h2, seq(float[?,3]) K2, seq(float[?,3]) V2) {{
        h2, K2, V2 = Loop(layers, t, h, K, V) <body = layer (int64 i, bool d, float[T,3] x,
                seq(float[?,3]) k, seq(float[?,3]) v)
                => (bool d2, float[T,3] x2, seq(float[?,3]) k2, seq(float[?,3]) v2) {{
            n = SequenceLength(k)
            {fresh}
            kx = Identity(x)
            vx = Neg(x)
            k2, v2 = If(fresh) <then_branch = prompt () => (seq(float[?,3]) ka,
                                                            seq(float[?,3]) va) {{
                {then}
            }}, else_branch = later () => (seq(float[?,3]) kb, seq(float[?,3]) vb) {{
                {other}
            }}>
            kr = SequenceAt(k2, i)
            vr = SequenceAt(v2, i)
            km = ReduceMean<keepdims = 1>(kr, axes)
            vm = ReduceMean<keepdims = 1>(vr, axes)
            both = Add(km, vm)
            x2 = Add(x, both)
            d2 = Identity(d)
        }}>
        c2 = Identity(c)
    }}>
    nk = SequenceLength(ks)
    nv = SequenceLength(vs)
}}""")


def _loops(model: ir.Model) -> tuple[ir.Node, ir.Node]:
    """The step loop and the layer loop."""
    step = next(n for n in model.graph if n.op_type == "Loop")
    layer = next(n for n in step.attributes["body"].as_graph() if n.op_type == "Loop")
    return step, layer


def _lengths(proto: onnx.ModelProto) -> tuple[ir.Model, ListLengths]:
    model = ir.from_proto(proto)
    infer_shapes(model)
    return model, Facts(model).list_lengths()


def _body(loop: ir.Node) -> ir.Graph:
    return loop.attributes["body"].as_graph()


# -- what it proves ----------------------------------------------------------------------------


def test_the_caches_of_the_export_have_one_length_and_put_at_i():
    model, lengths = _lengths(onnx.load(CACHE / "model.onnx"))
    step, layer = _loops(model)
    keys, values, tokens = _body(step).inputs[3:6]
    assert lengths.groups(step) == ((1, 2), (3,))  # the caches, and the tokens apart
    assert lengths.groups(layer) == ((1, 2),)
    assert lengths.same_length(keys, values)
    assert not lengths.same_length(keys, tokens)
    assert lengths.same_length(step.outputs[1], step.outputs[2])
    assert lengths.sets_at_iteration(layer, 1) is None
    assert lengths.sets_at_iteration(layer, 2) is None
    # by induction over the steps: empty at first, max(L0, 2 layers) after each step
    assert lengths.at_most(keys, 2) and lengths.at_most(values, 2)
    assert lengths.at_most(step.outputs[1], 2)
    assert not lengths.at_most(keys, 1)
    assert not lengths.at_most(tokens, 1000)  # one more each step
    assert "appends where the length is not proved to be i" in str(
        lengths.sets_at_iteration(step, 3)
    )


def test_a_cache_written_in_text_gets_the_same_proofs():
    model, lengths = _lengths(_cache())
    step, layer = _loops(model)
    assert lengths.groups(step) == ((1, 2),)
    assert lengths.sets_at_iteration(layer, 1) is None
    assert lengths.sets_at_iteration(layer, 2) is None
    assert lengths.at_most(_body(step).inputs[3], 2)
    assert lengths.at_most(step.outputs[2], 2)
    # empty on the first step, one per layer after it
    assert lengths.possible_lengths(_body(step).inputs[3]) == {0, 2}
    assert lengths.possible_lengths(step.outputs[1]) == {0, 2}


def test_possible_lengths_of_lists_that_may_start_part_grown():
    model, lengths = _lengths(_cache(values="vs0 = SequenceConstruct(h0)"))
    step, _ = _loops(model)
    assert lengths.possible_lengths(_body(step).inputs[3]) == {0, 2}  # the keys
    assert lengths.possible_lengths(_body(step).inputs[4]) is None  # the values: not put at i
    model, lengths = _lengths(_cache(layers="layers = Identity(steps)"))
    step, _ = _loops(model)
    assert lengths.possible_lengths(_body(step).inputs[3]) is None  # no static layer count


@pytest.mark.parametrize(
    "fresh",
    [
        "fresh = GreaterOrEqual(i, n)",
        "big = Greater(n, i)\n            fresh = Not(big)",
        "same = Equal(i, n)\n            fresh = Cast<to = 9>(same)",
    ],
)
def test_the_condition_may_be_written_in_other_forms(fresh):
    model, lengths = _lengths(_cache(fresh=fresh))
    _, layer = _loops(model)
    assert lengths.sets_at_iteration(layer, 1) is None
    assert lengths.sets_at_iteration(layer, 2) is None


def test_a_condition_on_the_values_length_proves_the_keys_too():
    fresh = "nv = SequenceLength(v)\n            fresh = LessOrEqual(nv, i)"
    model, lengths = _lengths(_cache(fresh=fresh))
    _, layer = _loops(model)
    assert lengths.sets_at_iteration(layer, 1) is None
    assert lengths.sets_at_iteration(layer, 2) is None


# -- what it refuses, and why ------------------------------------------------------------------


def test_a_loop_that_appends_to_one_list_only():
    model, lengths = _lengths(
        _cache(then="ka = SequenceInsert(k, kx)\n                va = Identity(v)")
    )
    step, layer = _loops(model)
    keys, values = _body(step).inputs[3:5]
    assert not lengths.same_length(keys, values)
    assert lengths.groups(layer) == ((1,), (2,))
    assert lengths.sets_at_iteration(layer, 1) is None
    assert "is not an edit of the list" in str(lengths.sets_at_iteration(layer, 2))


def test_an_append_that_is_not_at_i():
    then = "ka = SequenceInsert(k, kx, zero)\n                va = SequenceInsert(v, vx, zero)"
    model, lengths = _lengths(_cache(then=then))
    _, layer = _loops(model)
    assert lengths.same_length(_body(layer).inputs[3], _body(layer).inputs[4])  # still one length
    assert "is not at the end or at i" in str(lengths.sets_at_iteration(layer, 1))


def test_an_append_where_the_length_may_be_past_i():
    fresh = "one = Constant<value = int64 {1}>()\n            j = Add(i, one)\n"
    fresh += "            fresh = LessOrEqual(n, j)"
    model, lengths = _lengths(_cache(fresh=fresh))
    _, layer = _loops(model)
    assert "is not proved to be i" in str(lengths.sets_at_iteration(layer, 1))
    assert "is not proved to be i" in str(lengths.sets_at_iteration(layer, 2))


def test_caches_that_start_with_different_lengths():
    model, lengths = _lengths(_cache(values="vs0 = SequenceConstruct(h0)"))
    step, layer = _loops(model)
    keys, values = _body(step).inputs[3:5]
    assert not lengths.same_length(keys, values)
    assert lengths.groups(step) == ((1,), (2,))
    assert lengths.sets_at_iteration(layer, 1) is None  # the guard reads the keys' length
    assert "not proved to be i" in str(lengths.sets_at_iteration(layer, 2))


def test_no_bound_without_a_static_trip_count():
    model, lengths = _lengths(_cache(layers="layers = Identity(steps)"))
    step, layer = _loops(model)
    assert lengths.sets_at_iteration(layer, 1) is None
    assert not lengths.at_most(_body(step).inputs[3], 1000)


# -- under onnxruntime -------------------------------------------------------------------------


def _claim(body: ir.Graph, holds: ir.Value, name: str) -> None:
    """Make the Loop body fail at run time where `holds` is false: its condition output ANDed
    with a Gather of [1] at Cast(Not(holds)) (index 1 is out of range)."""
    one = ir.node(
        "Constant", [], attributes={"value": ir.tensor(np.array([1], np.int64))}, name=f"{name}1"
    )
    negated = ir.node("Not", [holds], name=f"{name}not")
    index = ir.node("Cast", [negated.outputs[0]], attributes={"to": 7}, name=f"{name}index")
    read = ir.node("Gather", [one.outputs[0], index.outputs[0]], name=f"{name}read")
    ok = ir.node("Cast", [read.outputs[0]], attributes={"to": 9}, name=f"{name}ok")
    keep = ir.node("And", [body.outputs[0], ok.outputs[0]], name=f"{name}keep")
    nodes = [one, negated, index, read, ok, keep]
    for node in nodes:
        node.outputs[0].name = f"{node.name}_out"
        body.append(node)
    body.outputs[0] = keep.outputs[0]


def _length(body: ir.Graph, sequence: ir.Value, name: str) -> ir.Value:
    node = ir.node("SequenceLength", [sequence], name=name)
    node.outputs[0].name = f"{name}_out"
    body.append(node)
    return node.outputs[0]


def _one_of(body: ir.Graph, length: ir.Value, possible: list[int], name: str) -> ir.Value:
    """A bool: whether `length` is one of `possible` (Equal to each, then the largest)."""
    table = ir.node(
        "Constant", [], attributes={"value": ir.tensor(np.array(possible, np.int64))}, name=name
    )
    equal = ir.node("Equal", [table.outputs[0], length], name=f"{name}eq")
    wide = ir.node("Cast", [equal.outputs[0]], attributes={"to": 7}, name=f"{name}wide")
    top = ir.node("ReduceMax", [wide.outputs[0]], attributes={"keepdims": 0}, name=f"{name}top")
    found = ir.node("Cast", [top.outputs[0]], attributes={"to": 9}, name=f"{name}found")
    for node in (table, equal, wide, top, found):
        node.outputs[0].name = f"{node.name}_out"
        body.append(node)
    return found.outputs[0]


def _true(body: ir.Graph, name: str) -> ir.Value:
    node = ir.node("Constant", [], attributes={"value": ir.tensor(np.array(True))}, name=name)
    node.outputs[0].name = f"{name}_out"
    body.append(node)
    return node.outputs[0]


def _instrumented(proto: onnx.ModelProto, bounds: dict[str, int] | None = None) -> tuple:
    """`proto` with every claim ListLengths makes about its Loops (one length per group, the
    length max(L0, i) where a slot puts at i, `bounds` by body input name, the possible lengths
    of each carried list) checked at run time; and how many claims."""
    model, lengths = _lengths(proto)
    claims = 0
    loops = [n for n in model.graph.all_nodes() if n.op_type == "Loop"]
    for number, loop in enumerate(loops):
        body = _body(loop)
        tag = f"claim{number}_"
        checks = []
        for group in lengths.groups(loop):
            first = _length(body, body.inputs[2 + group[0]], f"{tag}g{group[0]}")
            for k in group[1:]:
                checks.append(("Equal", first, _length(body, body.inputs[2 + k], f"{tag}l{k}")))
        for k in range(len(loop.inputs) - 2):
            if lengths.sets_at_iteration(loop, k) is None:
                start = _length(body, loop.inputs[2 + k], f"{tag}start{k}")
                peak = ir.node("Max", [start, body.inputs[0]], name=f"{tag}max{k}")
                peak.outputs[0].name = f"{tag}max{k}_out"
                body.append(peak)
                checks.append(
                    ("Equal", _length(body, body.inputs[2 + k], f"{tag}n{k}"), peak.outputs[0])
                )
        for value in body.inputs[2:]:
            bound = (bounds or {}).get(value.name or "")
            if bound is not None and lengths.at_most(value, bound):
                limit = ir.node(
                    "Constant",
                    [],
                    attributes={"value": ir.tensor(np.array(bound, np.int64))},
                    name=f"{tag}bound_{value.name}",
                )
                limit.outputs[0].name = f"{limit.name}_out"
                body.append(limit)
                checks.append(
                    ("LessOrEqual", _length(body, value, f"{tag}b_{value.name}"), limit.outputs[0])
                )
        for value in body.inputs[2:]:
            possible = lengths.possible_lengths(value) if value.type is not None else None
            if possible is None or not isinstance(value.type, ir.SequenceType):
                continue
            checks.append(("In", _length(body, value, f"{tag}p_{value.name}"), sorted(possible)))
        for j, (op, a, b) in enumerate(checks):
            if op == "In":  # the length is one of the possible ones
                b = _one_of(body, a, b, f"{tag}in{j}")
                op = "Equal"
                a = _true(body, f"{tag}true{j}")
            holds = ir.node(op, [a, b], name=f"{tag}holds{j}")
            holds.outputs[0].name = f"{tag}holds{j}_out"
            body.append(holds)
            _claim(body, holds.outputs[0], f"{tag}c{j}")
            claims += 1
    return ir.to_proto(model), claims


def _feeds() -> list[dict[str, np.ndarray]]:
    """Prompts of 0, 1 and 2 rows, for 0, 1 and 3 steps."""
    rng = np.random.default_rng(0)
    return [
        {"h0": rng.standard_normal((rows, 3)).astype(np.float32), "steps": np.array(steps)}
        for rows in (0, 1, 2)
        for steps in (0, 1, 3)
    ]


@pytest.mark.parametrize(
    ("variant", "claims"),
    [
        ({}, 8),  # one length in each loop, two slots put at i, two bounds, two sets
        ({"fresh": "big = Greater(n, i)\n            fresh = Not(big)"}, 8),
        ({"layers": "layers = Identity(steps)"}, 4),  # no bound: the layer count varies
        ({"layers": "layers = Constant<value = int64 {0}>()"}, 8),  # no layer at all
    ],
)
def test_the_claims_hold_under_onnxruntime(variant, claims):
    original = _cache(**variant)
    checked, count = _instrumented(original, {"K": 2, "V": 2})
    assert count == claims
    onnx.checker.check_model(checked, full_check=True)
    plain, instrumented = ort_session(original), ort_session(checked)
    for feeds in _feeds():
        want = plain.run(None, feeds)
        got = instrumented.run(None, feeds)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def test_a_false_claim_fails_under_onnxruntime():
    """The check is live: claiming the caches one length when the values start with one
    element fails as soon as a step runs."""
    model = ir.from_proto(_cache(values="vs0 = SequenceConstruct(h0)"))
    step, _ = _loops(model)
    body = _body(step)
    same = ir.node(
        "Equal", [_length(body, body.inputs[3], "nk"), _length(body, body.inputs[4], "nv")]
    )
    same.outputs[0].name = "same_out"
    body.append(same)
    _claim(body, same.outputs[0], "false")
    session = ort_session(ir.to_proto(model))
    feeds = {"h0": np.ones((2, 3), np.float32), "steps": np.array(0)}
    session.run(None, feeds)  # no step: nothing checked
    with pytest.raises(Exception, match="falseread"):
        session.run(None, {**feeds, "steps": np.array(1)})


def _claimed() -> list[pathlib.Path]:
    """The fixtures of the exports nobody here tuned for whose Loops get a claim."""
    found = []
    for set_name in ("torch_fresh", "torch_newcomer", "torch_unseen", "torch_wild"):
        for path in sorted((FIXTURES / set_name).glob("*/model.onnx")):
            model, lengths = _lengths(onnx.load(path))
            loops = [n for n in model.graph.all_nodes() if n.op_type == "Loop"]
            if any(len(group) > 1 for loop in loops for group in lengths.groups(loop)):
                found.append(path.parent)
    return found


_CLAIMED = _claimed()


@pytest.mark.parametrize("case", _CLAIMED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_claims_hold_on_the_fixtures_saved_inputs(case):
    original = onnx.load(case / "model.onnx")
    bounds = {"22": 2, "23": 2} if case == CACHE else None  # the caches, by the export's names
    checked, count = _instrumented(original, bounds)
    assert count > 0
    plain, instrumented = ort_session(original), ort_session(checked)
    for _, feeds, _ in stored_data_sets(case, original):
        for a, b in zip(plain.run(None, feeds), instrumented.run(None, feeds)):
            # the extra nodes may change how onnxruntime fuses the float arithmetic
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
