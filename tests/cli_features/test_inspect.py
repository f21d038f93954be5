"""`inspect_model`: the tier of every sequence value, why the kept ones stay, what to try."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import onnx_ir as ir
from support import parse

from cli_features.models import batchable_map, map_over_split, sequence_interface
from seqlower.cli.inspect_command import format_inspect
from seqlower.inspect import inspect_model

BIND_N = "--dim N=<size> (the length follows the symbolic dim N)"


def tiers(report) -> dict[str, str]:
    return {site.op_type: site.tier for site in report.sites if not site.created_by}


def test_a_static_length_is_unrolled():
    report = inspect_model(map_over_split("3"))
    assert tiers(report) == {
        "SplitToSequence": "direct",
        "SequenceMap": "unroll",
        "ConcatFromSequence": "direct",
    }
    (site,) = [s for s in report.sites if s.op_type == "SequenceMap"]
    assert site.rules == ("sequence-map-unroll",) and site.reason == "" and site.hint == ""
    assert site.node == "SequenceMap#0 (m)" and site.outputs == ("m",)


def test_a_dynamic_length_with_static_element_shapes_is_a_scan():
    assert tiers(inspect_model(map_over_split("N"), target="portable"))["SequenceMap"] == "scan"


def test_dynamic_element_shapes_take_the_tensor_form_of_lists():
    report = inspect_model(
        map_over_split("N", body_out="float[1,K]", else_width=8), target="portable"
    )
    assert tiers(report)["SequenceMap"] == "flat" and report.kept == []


def test_without_the_tensor_form_dynamic_element_shapes_need_a_loop_and_what_stays_says_why():
    report = inspect_model(
        map_over_split("N", body_out="float[1,K]", else_width=8),
        target="portable",
        tensor_lists=False,
    )
    assert tiers(report)["SequenceMap"] == "loop"
    kept = {site.op_type: site for site in report.kept}
    concat = kept["ConcatFromSequence"]
    assert "Loop" in concat.reason
    assert concat.hint == BIND_N
    created = [site for site in report.kept if site.created_by]
    assert {site.op_type for site in created} >= {"SequenceInsert"}
    assert all(site.created_by == "SequenceMap#0 (m)" for site in created)


def test_binding_the_dim_as_hinted_unrolls_it():
    report = inspect_model(map_over_split("N", body_out="float[1,K]", else_width=8), dims={"N": 2})
    assert tiers(report)["SequenceMap"] == "unroll" and report.kept == []
    assert report.lowering.interface_changes[0]["kind"] == "bind_dim"


def test_a_body_with_batching_rules_is_batched():
    report = inspect_model(batchable_map())
    assert tiers(report)["SequenceMap"] == "batch"


def test_the_interface_is_kept_with_hints_and_flattened_on_request():
    report = inspect_model(sequence_interface(), target="portable")
    interface = {site.op_type: site for site in report.sites[:2]}
    assert interface["input"].node == "s" and interface["input"].tier == "kept"
    assert interface["input"].hint.startswith("--flatten-sequence-io --seq-len s=<n>")
    assert interface["output"].hint.startswith("--flatten-sequence-io (gives 3 outputs")
    (at,) = [site for site in report.kept if site.op_type == "SequenceAt"]
    assert "'s' is a sequence-typed model input" in at.reason
    assert at.hint.startswith("--flatten-sequence-io --seq-len s=<n> (")

    flat = inspect_model(sequence_interface(), flatten_sequence_io=True, seq_lens={"s": 2})
    assert [(s.op_type, s.tier) for s in flat.sites[:2]] == [
        ("input", "flattened"),
        ("output", "flattened"),
    ]
    assert flat.kept == []


def test_an_output_of_unknown_length_says_which_dim_to_bind():
    model = parse("""
agraph (float[N,3] x) => (seq(float[1,3]) y) {
  y = SplitToSequence <axis=0> (x)
}""")
    (output,) = [
        site for site in inspect_model(model, target="portable").sites if site.op_type == "output"
    ]
    assert output.tier == "kept" and "length is unknown" in output.reason
    assert output.hint == BIND_N.replace(" (", " --flatten-sequence-io (")  # static, then flat


def test_sites_in_subgraphs_carry_their_graph_path():
    model = parse("""
agraph (float[3,4] x, bool c) => (float[3,4] y) {
  y = If (c) <then_branch = t () => (float[3,4] a) {
        s = SplitToSequence <axis=0> (x)
        a = ConcatFromSequence <axis=0> (s)
      }, else_branch = f () => (float[3,4] b) { b = Neg(x) }>
}""")
    graphs = {site.graph for site in inspect_model(model).sites}
    assert graphs == {"main/If#0 (y):then_branch"}


def test_inspect_does_not_touch_its_input():
    proto = map_over_split("N")
    before = proto.SerializeToString(deterministic=True)
    inspect_model(proto, dims={"N": 3})
    assert proto.SerializeToString(deterministic=True) == before

    model = ir.serde.deserialize_model(proto)
    before = ir.to_proto(model).SerializeToString(deterministic=True)
    inspect_model(model, dims={"N": 3}, flatten_sequence_io=True)
    assert ir.to_proto(model).SerializeToString(deterministic=True) == before
    assert [node.name for node in model.graph] == ["", "", ""]


def test_inspect_reads_a_path(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(map_over_split("N"), path)
    report = inspect_model(path)
    assert report.model == str(path)


def test_the_json_form_has_the_documented_keys():
    report = inspect_model(sequence_interface(), target="tensorrt")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["schema"] == "seqlower.inspect/2"
    assert set(data) == {"schema", "model", "options", "tiers", "sites", "lowering", "target"}
    assert set(data["sites"][0]) == {
        "graph", "node", "op_type", "tier", "outputs", "rules", "reason", "hint", "reasons",
        "created_by",
    }  # fmt: skip
    assert data["sites"] == data["lowering"]["nodes"]  # one source: the lowering's report
    assert data["target"]["target"] == "tensorrt" and data["target"]["ok"] is False
    assert data["tiers"]["kept"] == len(report.kept)
    assert "interface_changes" in data["lowering"]


def test_the_text_table_lists_every_site_with_its_hints():
    text = format_inspect(inspect_model(sequence_interface(), target="tensorrt"))
    lines = text.splitlines()
    assert lines[1].split() == ["graph", "node", "op", "tier", "rules", "/", "why", "kept"]
    assert any(line.startswith("    try --flatten-sequence-io --seq-len s=<n> (") for line in lines)
    assert any(line.startswith("target tensorrt: ") for line in lines)


def test_a_torch_list_returned_from_a_loop(fixtures=Path(__file__).parents[1] / "fixtures"):
    # PyTorch's list.append in a scripted loop over x.split(2), returned as a list
    path = fixtures / "torch" / "return_list" / "model.onnx"
    report = inspect_model(path, target="portable")
    kept = {site.op_type: site for site in report.kept}
    # the Loop maps each chunk elementwise: it becomes the split of x + 1, which stays (made
    # from the Loop) because it feeds the sequence output; no Split takes its place either
    assert set(kept) == {"output", "SplitToSequence"}
    assert kept.pop("output").hint == BIND_N.replace(" (", " --flatten-sequence-io (")
    split = kept["SplitToSequence"]
    assert split.reason == "it feeds the sequence-typed output 'ys' (the interface is kept)"
    assert any("depends on the size of dim 0" in why for why in split.reasons), split
    assert {site.op_type: site.tier for site in report.sites}["Loop"] == "batch"

    bound = inspect_model(path, dims={"N": 6}, flatten_sequence_io=True)
    assert bound.kept == [] and bound.sites[0].tier == "flattened"
    changes = bound.lowering.interface_changes
    assert changes[-1] == {
        "kind": "flatten_output", "name": "ys", "new_names": ["ys_0", "ys_1", "ys_2"],
        "elem_type": "FLOAT",
    }  # fmt: skip
