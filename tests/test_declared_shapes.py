"""Lowered models declare no wrong shape: every value of the main graph has the rank and the
static dims onnxruntime computes (`support.declared_shape_mismatches`), and strict ONNX shape
inference finds no conflict in any graph. A wrong declared shape is a bug even where nothing
fails: onnxruntime enforces some (a Scan's state, a value whose input becomes a constant), other
runtimes trust them, and seqlower itself folds Shape and Size of values whose dims it reads.

Checked on the committed fixtures (their stored inputs), the examples, generated programs
(tests/fuzz/generator.py) and, one per cause found, the smallest model that showed it.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from support import (
    declared_shape_mismatches,
    lower,
    parse,
    read_tensor,
    run_ort,
)

import seqlower
from seqlower.passes.chunked_inference import hide_overridable_initializers

ROOT = pathlib.Path(__file__).parent.parent
FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*/*/model.onnx"))
LOOSE_MODELS = sorted((ROOT / "tests" / "fixtures").glob("*/*.onnx")) + sorted(
    (ROOT / "examples").glob("*.onnx")
)
# Found by tests/fixtures/torch_later (tests/test_torch_later.py says more), not fixed:
# onnxruntime 1.20 aborts the process loading the lowering of mmdet_multi_apply_mlvl (an
# extended graph optimization; 1.32 runs it).
_OLD_ORT = tuple(int(v) for v in ort.__version__.split(".")[:2]) < (1, 21)
_KNOWN = {
    "torch_later/mmdet_multi_apply_mlvl": pytest.mark.skipif(
        _OLD_ORT, reason="onnxruntime 1.20 aborts loading the lowering"
    ),
}


def _fixture_param(path: pathlib.Path) -> object:
    name = f"{path.parent.parent.name}/{path.parent.name}"
    marks = [_KNOWN[name]] if name in _KNOWN else []
    return pytest.param(path, marks=marks, id=name)


# the tract target is left out: its Scans carry lists that grow, whose state onnxruntime
# cannot run (it holds a Scan's state to the shape of its initial value)
TARGETS = ("portable", "onnxruntime", "openvino")
SEEDS = [*range(40), *range(1_000_000, 1_000_040)]


def _stored_inputs(folder: pathlib.Path, model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """The inputs of each stored data set of a fixture whose inputs are all tensors."""
    if any(not value.type.HasField("tensor_type") for value in model.graph.input):
        return []
    return [
        {
            value.name: read_tensor(data / f"input_{i}.pb")
            for i, value in enumerate(model.graph.input)
        }
        for data in sorted(folder.glob("test_data_set_*"))
    ]


def _made_up_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Small inputs of the declared types: 3 for every symbolic dim, values in [0, 4)."""
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.graph.input:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 3 for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        feeds[value.name] = (rng.random(dims) * 4).astype(dtype)
    return feeds


def _assert_declares_no_wrong_shape(model: onnx.ModelProto, feeds_list, target: str) -> None:
    lowered, _ = lower(model, target=target)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True, data_prop=True)
    for feeds in feeds_list:
        assert declared_shape_mismatches(lowered, feeds) == []


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", [_fixture_param(p) for p in FIXTURES])
def test_a_lowered_fixture_declares_no_wrong_shape(path, target):
    model = onnx.load(path)
    feeds = _stored_inputs(path.parent, model)
    if not feeds:
        pytest.skip("a sequence-typed input: onnxruntime is fed lists elsewhere")
    _assert_declares_no_wrong_shape(model, feeds, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", LOOSE_MODELS, ids=lambda p: p.stem)
def test_a_lowered_example_declares_no_wrong_shape(path, target):
    model = onnx.load(path)
    _assert_declares_no_wrong_shape(model, [_made_up_inputs(model)], target)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_lowered_program_declares_no_wrong_shape(seed):
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    from generator import generate

    program = generate(seed)
    if any(isinstance(value, list) for value in program.feeds.values()):
        pytest.skip("a sequence-typed input")
    lowered, _ = seqlower.optimize(program.model, target="portable")
    # ONNX data propagation reads the default of an overridable initializer as a constant, and
    # then fails on a valid model (Add(x[3], Unsqueeze(Range(0, n = 5), 1)): "Invalid rank for
    # Add broadcasting: (3) vs (5)"): such defaults are hidden from it, as seqlower hides them
    copy = onnx.ModelProto()
    copy.CopyFrom(lowered)
    hide_overridable_initializers(copy.graph)
    onnx.shape_inference.infer_shapes(copy, check_type=True, strict_mode=True, data_prop=True)
    assert declared_shape_mismatches(lowered, program.feeds) == []


# -- the causes found, each with the smallest model that showed it -------------------------------

# A Loop's carried output that is a model output, declared with another rank than it has (the
# TorchScript exporter declares what it traced: `h_last` of tests/fixtures/torch/rnn_unbind_loop).
# ONNX inference forgets the shape of carried outputs and kept the declaration, of rank 3.
CARRIED_OUTPUT = """
agraph (float[B,6] h0, int64 n) => (float[A,B,C] h) {
    c = Constant <value = bool {1}> ()
    h = Loop (n, c, h0) <body = body (int64 i, bool cond, float[B,6] h_in)
                                     => (bool cond_out, float[B,6] h_out) {
        cond_out = Identity (cond)
        h_out = Tanh (h_in)
    }>
}
"""

# A carried output that grows (torch.cat in a loop), declared with the sizes of the traced run
# (`kept` of tests/fixtures/torch_idioms/detection_postprocess declared [6, 4], computed [2, 4]).
GROWING_OUTPUT = """
agraph (float[N,4] x, int64 n) => (float[6,4] y) {
    c = Constant <value = bool {1}> ()
    empty = Constant <value = float[0,4] {}> ()
    y = Loop (n, c, empty) <body = body (int64 i, bool cond, float[?,4] acc)
                                        => (bool cond_out, float[?,4] grown) {
        cond_out = Identity (cond)
        grown = Concat <axis = 0> (acc, x)
    }>
}
"""


def _output_dims(model: onnx.ModelProto) -> list[int | str | None]:
    dims = model.graph.output[0].type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims]


def test_a_carried_model_output_takes_the_shape_the_loop_proves():
    model = parse(CARRIED_OUTPUT)
    lowered, _ = lower(model)
    assert _output_dims(lowered) == ["B", 6]
    feeds = {"h0": np.ones((2, 6), np.float32), "n": np.array(3, np.int64)}
    assert declared_shape_mismatches(lowered, feeds) == []
    assert run_ort(lowered, feeds)[0].shape == (2, 6)


def test_a_growing_model_output_keeps_only_the_dims_the_loop_proves():
    model = parse(GROWING_OUTPUT)
    lowered, _ = lower(model)
    assert _output_dims(lowered) == [None, 4]
    feeds = {"x": np.ones((1, 4), np.float32), "n": np.array(2, np.int64)}
    assert declared_shape_mismatches(lowered, feeds) == []
    assert run_ort(lowered, feeds)[0].shape == (2, 4)


def test_an_unproven_model_output_keeps_the_declared_rank_only():
    """No proof (the carried shapes differ in rank): the declared rank stays, the dims go."""
    model = parse(
        GROWING_OUTPUT.replace("float[?,4] grown", "float[?] grown").replace(
            "grown = Concat <axis = 0> (acc, x)",
            "flat = Constant <value = int64[1] {-1}> ()\n        grown = Reshape (acc, flat)",
        )
    )
    lowered, _ = lower(model)
    assert _output_dims(lowered) == [None, None]


def test_the_check_finds_a_wrong_declared_shape():
    """`declared_shape_mismatches` itself: a value declared with another rank, and one with a
    static dim of another size, are both named."""
    proto = parse(CARRIED_OUTPUT.replace("float[A,B,C] h)", "float[2,7] h)"))
    proto.graph.value_info.append(
        onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [1])
    )
    feeds = {"h0": np.ones((2, 6), np.float32), "n": np.array(1, np.int64)}
    assert sorted(declared_shape_mismatches(proto, feeds)) == [
        "'c': declared [1], computed []",
        "'h': declared [2,7], computed [2, 6]",
    ]
