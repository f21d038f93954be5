"""A decoder's per-layer caches: the forms seqlower emits against hand-written target forms.

    python -m bench.cache_forms

The export is `tests/fixtures/torch_fresh/hf_dynamic_cache` (transformers' `DynamicCache.update`
in a decoding loop: per step and layer i, `if len(cache) <= i: cache.append(k)` on the prompt's
step, else `cache[i] = cat([cache[i], k], -2)`; attention reads `cache[i]`). Two hand-written
forms, from the same weights, give what a lowering could reach (the default target now emits
the stacked map's form: docs/performance.md, "Decoder caches as a map over layers"):

- `map, ragged`: the loop over layers as a map: it reads the step's caches (ragged: rows of one
  tensor and their counts, the bounds made once per step, outside the layer loop) and appends
  each layer's new cache to fresh lists, instead of splicing element i into the carried list;
- `map, stacked`: the same map with each cache one `[layers, rows, dim]` tensor: a Gather at i,
  and the new caches stacked by the layer loop's scan outputs.

Both assume what the original's lists always satisfy and a lowering would have to prove: the
key and value caches have the same length (they are edited together), at most the number of
layers (so no cache past the last layer is kept as is), and, for the stacked form, every layer's
cache has the same number of rows (they grow in lockstep, one row per step). The outputs are
checked against the original on every saved input set before timing.
"""

from __future__ import annotations

__all__ = ["main"]

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h

import seqlower
from bench.timing import latency

CASE = Path(__file__).resolve().parent.parent / "tests/fixtures/torch_fresh/hf_dynamic_cache"
_F, _I, _B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
_RANKS = {"scalar": [], "1": ["a"], "2": ["a", "b"], "3": ["a", "b", "c"]}


def _const(name: str, value: object) -> onnx.NodeProto:
    tensor = onnx.numpy_helper.from_array(np.array(value), name)
    return h.make_node("Constant", [], [name], value=tensor)


def _info(name: str, dtype: int, rank: str) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, dtype, [f"{name}_{d}" for d in _RANKS[rank]])


def _attention() -> list[onnx.NodeProto]:
    """h + softmax(h k^T / 2) v, k and v this layer's caches (k_i, v_i)."""
    return [
        h.make_node("Transpose", ["k_i"], ["kT"], perm=[1, 0]),
        h.make_node("MatMul", ["hin", "kT"], ["s"]),
        _const("two", np.float32(2.0)),
        h.make_node("Div", ["s", "two"], ["sd"]),
        h.make_node("Softmax", ["sd"], ["p"], axis=-1),
        h.make_node("MatMul", ["p", "v_i"], ["att"]),
        h.make_node("Add", ["hin", "att"], ["hout"]),
        h.make_node("Identity", ["cond"], ["cout"]),
    ]


def _layer_body(stacked: bool) -> onnx.GraphProto:
    """One layer: the new k and v rows, this layer's caches (the rows alone on the prompt's
    step, else the step's cache at i with the rows after it), attention over them."""
    if stacked:
        reads = [
            h.make_node("Gather", ["K", "i"], ["k0"], axis=0),
            h.make_node("Gather", ["V", "i"], ["v0"], axis=0),
        ]
    else:
        reads = [
            h.make_node("Gather", ["k_starts", "i"], ["ks"]),
            h.make_node("Gather", ["k_ends", "i"], ["ke"]),
            h.make_node("Slice", ["K", "ks", "ke"], ["k0"]),
            h.make_node("Gather", ["v_starts", "i"], ["vs"]),
            h.make_node("Gather", ["v_ends", "i"], ["ve"]),
            h.make_node("Slice", ["V", "vs", "ve"], ["v0"]),
        ]
    grown = [
        h.make_node("Concat", ["k0", "kx"], ["k_grown"], axis=0),
        h.make_node("Concat", ["v0", "vx"], ["v_grown"], axis=0),
    ]
    then = h.make_graph(
        [h.make_node("Identity", ["kx"], ["k_new"]), h.make_node("Identity", ["vx"], ["v_new"])],
        "prompt_step",
        [],
        [_info("k_new", _F, "2"), _info("v_new", _F, "2")],
    )
    other = h.make_graph(
        reads + grown, "later_step", [], [_info("k_grown", _F, "2"), _info("v_grown", _F, "2")]
    )
    nodes = [
        h.make_node("Gather", ["wk", "i"], ["wki"], axis=0),
        h.make_node("MatMul", ["hin", "wki"], ["kx"]),
        h.make_node("Gather", ["wv", "i"], ["wvi"], axis=0),
        h.make_node("MatMul", ["hin", "wvi"], ["vx"]),
        h.make_node("LessOrEqual", ["n_layers", "i"], ["fresh"]),
        h.make_node("If", ["fresh"], ["k_i", "v_i"], then_branch=then, else_branch=other),
        *_attention(),
    ]
    inputs = [_info("i", _I, "scalar"), _info("cond", _B, "scalar"), _info("hin", _F, "2")]
    outputs = [_info("cout", _B, "scalar"), _info("hout", _F, "2")]
    if stacked:  # the caches as scan outputs
        nodes += [h.make_node("Identity", ["k_i"], ["k_out"])]
        nodes += [h.make_node("Identity", ["v_i"], ["v_out"])]
        outputs += [_info("k_out", _F, "2"), _info("v_out", _F, "2")]
    else:  # appended to fresh ragged lists: rows, and the row count of each
        for x in ("k", "v"):
            nodes += [
                h.make_node("Concat", [f"{x}_rows", f"{x}_i"], [f"{x}_rows2"], axis=0),
                h.make_node("Shape", [f"{x}_i"], [f"{x}_count"], end=1),
                h.make_node("Concat", [f"{x}_counts", f"{x}_count"], [f"{x}_counts2"], axis=0),
            ]
            inputs += [_info(f"{x}_rows", _F, "2"), _info(f"{x}_counts", _I, "1")]
            outputs += [_info(f"{x}_rows2", _F, "2"), _info(f"{x}_counts2", _I, "1")]
    return h.make_graph(nodes, "layer", inputs, outputs)


def _step_body(stacked: bool) -> onnx.GraphProto:
    """One decoding step: the layer loop, then the next token (argmax of the last row)."""
    layers = ["layers", "true", "h_o"]
    if stacked:
        length = [h.make_node("Shape", ["K"], ["n_layers1"], end=1)]
        carried = [("K", _F, "3"), ("V", _F, "3")]
    else:
        length = [h.make_node("Size", ["K_counts"], ["n_layers"])]
        for x, name in (("k", "K"), ("v", "V")):  # bounds once per step, as [n, 1] columns
            length += [
                h.make_node("CumSum", [f"{name}_counts", "zero"], [f"{x}_e"]),
                h.make_node("Sub", [f"{x}_e", f"{name}_counts"], [f"{x}_s"]),
                h.make_node("Unsqueeze", [f"{x}_s", "axis1"], [f"{x}_starts"]),
                h.make_node("Unsqueeze", [f"{x}_e", "axis1"], [f"{x}_ends"]),
            ]
        layers += ["no_rows", "no_counts", "no_rows", "no_counts"]
        carried = [("K", _F, "2"), ("K_counts", _I, "1"), ("V", _F, "2"), ("V_counts", _I, "1")]
    out_caches = [f"{name}2" for name, _, _ in carried]
    nodes = [
        _const("zero", np.int64(0)),
        _const("axis1", np.array([1], np.int64)),
        _const("no_rows", np.zeros((0, 6), np.float32)),
        _const("no_counts", np.zeros((0,), np.int64)),
        *length,
        *([h.make_node("Squeeze", ["n_layers1"], ["n_layers"])] if stacked else []),
        _const("layers", np.int64(2)),
        _const("true", np.bool_(True)),
        h.make_node("Loop", layers, ["h2", *out_caches], body=_layer_body(stacked)),
        _const("last", np.array([-1], np.int64)),
        _const("end", np.array([2**62], np.int64)),
        h.make_node("Slice", ["h2", "last", "end"], ["h_last"]),
        h.make_node("Gemm", ["h_last", "out.weight", "out.bias"], ["logits"], transB=1),
        h.make_node("ArgMax", ["logits"], ["token"], axis=-1, keepdims=0),
        h.make_node("Concat", ["tokens", "token"], ["tokens2"], axis=0),
        h.make_node("Gather", ["emb.weight", "token"], ["h_next"]),
        h.make_node("Identity", ["cond_o"], ["cond2"]),
    ]
    inputs = [_info("step", _I, "scalar"), _info("cond_o", _B, "scalar"), _info("h_o", _F, "2")]
    inputs += [_info(name, dtype, rank) for name, dtype, rank in carried]
    inputs += [_info("tokens", _I, "1")]
    outputs = [_info("cond2", _B, "scalar"), _info("h_next", _F, "2")]
    outputs += [_info(f"{name}2", dtype, rank) for name, dtype, rank in carried]
    outputs += [_info("tokens2", _I, "1")]
    return h.make_graph(nodes, "step", inputs, outputs)


def target_form(original: onnx.ModelProto, stacked: bool) -> onnx.ModelProto:
    """The hand-written form (`stacked` or ragged) with the weights of `original`."""
    if stacked:
        empty = [_const("no_caches", np.zeros((0, 0, 6), np.float32))]
        caches = ["no_caches", "no_caches"]
        outs = ["K_end", "V_end"]
        length = [
            h.make_node("Shape", ["K_end"], ["k_shape"]),
            _const("one1", np.array([1], np.int64)),
            _const("two1", np.array([2], np.int64)),
            h.make_node("Slice", ["k_shape", "one1", "two1"], ["rows1"]),
        ]
    else:
        empty = [
            _const("no_rows0", np.zeros((0, 6), np.float32)),
            _const("no_counts0", np.zeros((0,), np.int64)),
        ]
        caches = ["no_rows0", "no_counts0", "no_rows0", "no_counts0"]
        outs = ["K_end", "K_counts_end", "V_end", "V_counts_end"]
        length = [h.make_node("Gather", ["K_counts_end", "zero1"], ["rows1"])]
    nodes = [
        h.make_node("Gather", ["emb.weight", "prompt"], ["h0"]),
        *empty,
        _const("no_tokens", np.zeros((0,), np.int64)),
        _const("true0", np.bool_(True)),
        _const("zero1", np.array([0], np.int64)),
        h.make_node(
            "Loop",
            ["steps", "true0", "h0", *caches, "no_tokens"],
            ["h_end", *outs, "tokens"],
            body=_step_body(stacked),
        ),
        *length,
        h.make_node("Squeeze", ["rows1", "zero1"], ["seq_length"]),
    ]
    graph = h.make_graph(
        nodes,
        "cache_map",
        list(original.graph.input),
        [_info("tokens", _I, "1"), _info("seq_length", _I, "scalar")],
        initializer=list(original.graph.initializer),
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _input_sets(case: Path) -> list[dict[str, np.ndarray]]:
    sets = []
    for folder in sorted(case.glob("test_data_set_*")):
        feeds = {}
        for path in sorted(folder.glob("input_*.pb")):
            tensor = onnx.TensorProto()
            tensor.ParseFromString(path.read_bytes())
            feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
        sets.append(feeds)
    return sets


def main() -> int:
    original = onnx.load(CASE / "model.onnx")
    models = {
        "original": original,
        "default": seqlower.optimize(original).model,
        "--target onnxruntime": seqlower.optimize(original, target="onnxruntime").model,
        "map, ragged": target_form(original, stacked=False),
        "map, stacked": target_form(original, stacked=True),
    }
    sets = _input_sets(CASE)
    for index, feeds in enumerate(sets[1:], 1):  # the first set is checked by the timing
        _check(latency(models, feeds, runs=1, min_seconds=0.0), index)
    measured = latency(models, sets[0], runs=30, min_seconds=0.3)
    _check(measured, 0)
    base = measured["original"][0]
    print(f"{'form':<24}{'us':>10}{'vs original':>14}")
    for name, (seconds, _) in measured.items():
        print(f"{name:<24}{seconds * 1e6:>10.1f}{base / seconds:>13.2f}x")
    return 0


def _check(results: dict, index: int) -> None:
    expected = results["original"][1]
    for name, (_, outputs) in results.items():
        for want, got in zip(expected, outputs):
            if not np.array_equal(want, got):
                raise SystemExit(
                    f"error: the form '{name}' differs from the original on test_data_set_{index}"
                )


if __name__ == "__main__":
    raise SystemExit(main())
