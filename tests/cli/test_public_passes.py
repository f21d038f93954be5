"""Issue 14, item 2: `seqlower.passes` exports one ready pipeline (`SequenceLoweringPass`,
`default_passes()`) that includes the runtime workarounds, and whatever a user composes from the
public passes gives a model that passes the checker and loads in onnxruntime (the README's old
recipe, Normalize -> Lower -> Cleanup, crashed onnxruntime on a batched Cast -> MatMul body)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from cli_models import cast_matmul_map, loads_in_a_child_process

import seqlower
import seqlower.passes
from seqlower.errors import InvalidModelError
from seqlower.passes import (
    CleanupPass,
    InlineSequenceFunctionsPass,
    LowerSequencesPass,
    NormalizePass,
    RuntimeWorkaroundsPass,
    SequenceLoweringPass,
    default_passes,
)

COMPOSITIONS = {
    "SequenceLoweringPass": lambda: [SequenceLoweringPass()],
    "default_passes": default_passes,
    "normalize, lower, cleanup": lambda: [NormalizePass(), LowerSequencesPass(), CleanupPass()],
    "lower alone": lambda: [LowerSequencesPass()],
    "normalize, lower": lambda: [NormalizePass(), LowerSequencesPass()],
}


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((4, 2, 3)).astype(np.float32),
        "w": rng.standard_normal((3, 5)),
    }


def _expected(feeds: dict[str, np.ndarray]) -> np.ndarray:
    """y[i] = double(x[:, i, :]) @ w, stacked on axis 0."""
    x, w = feeds["x"].astype(np.float64), feeds["w"]
    return np.stack([x[:, i, :] @ w for i in range(x.shape[1])])


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_every_composition_gives_a_model_that_loads_and_computes_the_same(
    name: str, tmp_path: Path
) -> None:
    model = ir.from_proto(cast_matmul_map())
    result = ir.passes.PassManager(COMPOSITIONS[name]())(model)
    assert result.modified
    proto = ir.to_proto(result.model)
    onnx.checker.check_model(proto, full_check=True)
    ops = [node.op_type for node in proto.graph.node]
    assert "SequenceMap" not in ops and "SplitToSequence" not in ops
    if "Transpose" in ops:  # batched (unrolled without shapes): the workaround's order
        assert ops.index("Cast") < ops.index("Transpose"), ops
    path = tmp_path / "lowered.onnx"
    onnx.save(proto, path)
    assert loads_in_a_child_process(path)
    feeds = _feeds()
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, feeds)[0], _expected(feeds), rtol=1e-12)


def test_the_workaround_is_what_makes_it_load(tmp_path: Path) -> None:
    """The probe behind the test above: without the workaround's order, onnxruntime crashes on
    this model (skipped where a newer onnxruntime no longer does)."""
    model = ir.from_proto(cast_matmul_map())
    for step in default_passes():
        if not isinstance(step, RuntimeWorkaroundsPass):
            step(model)
    proto = ir.to_proto(model)
    ops = [node.op_type for node in proto.graph.node]
    assert ops.index("Cast") < ops.index("Transpose")  # LowerSequencesPass applied it already
    swapped = onnx.helper.make_model(
        onnx.helper.make_graph(
            [
                onnx.helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                onnx.helper.make_node("Cast", ["t"], ["c"], to=onnx.TensorProto.DOUBLE),
                onnx.helper.make_node("MatMul", ["c", "w"], ["y"]),
            ],
            "g",
            list(proto.graph.input),
            list(proto.graph.output),
        ),
        opset_imports=list(proto.opset_import),
        ir_version=proto.ir_version,
    )
    path = tmp_path / "transpose_cast.onnx"
    onnx.save(swapped, path)
    if loads_in_a_child_process(path):
        pytest.skip(f"onnxruntime {ort.__version__} loads Transpose -> Cast -> MatMul")


def test_default_passes_are_fresh_instances_in_the_pipeline_order() -> None:
    first, second = default_passes(), default_passes()
    assert [type(p) for p in first] == [
        InlineSequenceFunctionsPass,
        NormalizePass,
        LowerSequencesPass,
        CleanupPass,
        RuntimeWorkaroundsPass,
    ]
    assert all(a is not b for a, b in zip(first, second, strict=True))


def test_the_composed_pass_reports_what_its_lowering_did_and_keeps_seqlower_errors() -> None:
    step = SequenceLoweringPass()
    step(ir.from_proto(cast_matmul_map()))
    lower = next(p for p in step.passes if isinstance(p, LowerSequencesPass))
    assert lower.fired == {"sequence-map-batch": 1}
    bad = onnx.parser.parse_model("""<ir_version: 10, opset_import: ["" : 18]>
    g (float[2] x) => (float[2] y) {
        s = SequenceConstruct (x, x)
        p = Constant <value = int64 {5}> ()
        y = SequenceAt (s, p)
    }""")
    with pytest.raises(InvalidModelError, match="out of range"):
        SequenceLoweringPass()(ir.from_proto(bad))


def test_the_public_names_are_exported() -> None:
    for name in ("SequenceLoweringPass", "default_passes", "RuntimeWorkaroundsPass"):
        assert name in seqlower.passes.__all__


def test_only_a_pipeline_that_runs_the_workarounds_itself_turns_them_off(tmp_path: Path) -> None:
    model = ir.from_proto(cast_matmul_map())
    NormalizePass()(model)
    LowerSequencesPass(runtime_workarounds=False)(model)
    ops = [node.op_type for node in model.graph]
    assert ops.index("Transpose") < ops.index("Cast")  # what batching emits
    lowered, _ = seqlower.optimize(cast_matmul_map())  # the pipeline runs them once, last
    ops = [node.op_type for node in lowered.graph.node]
    assert ops.index("Cast") < ops.index("Transpose")
    path = tmp_path / "lowered.onnx"
    onnx.save(lowered, path)
    assert loads_in_a_child_process(path)
