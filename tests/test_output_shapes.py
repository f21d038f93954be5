"""A model kept as given (its lowering costs more) declares no output dim that inference does
not prove: the sizes an export was traced with become anonymous, proved and named dims stay."""

from __future__ import annotations

import pathlib

import onnx
import onnx_ir as ir
from support import declared_shape_mismatches, lower, stored_data_sets

from seqlower.passes.output_shapes import relax_unproved_output_dims

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_wild" / "retina_level_topk"
KEPT = pathlib.Path(__file__).parent / "fixtures" / "torch_newcomer" / "edit_assign_delete"
HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'


def _dims(model: ir.Model) -> list[list]:
    return [[d if isinstance(d, int) else d.value for d in v.shape] for v in model.graph.outputs]


def test_a_traced_size_becomes_anonymous_and_proved_dims_stay():
    model = ir.from_proto(onnx.parser.parse_model(HEADER + """
        g (float[N, 4] x) => (float[2, 4] y, float[N, 4] z, float[3] w) {
            y = Relu(x)
            z = Neg(x)
            w = Constant<value = float[3] {1, 2, 3}>()
        }"""))  # fmt: skip
    relax_unproved_output_dims(model)
    assert _dims(model) == [[None, 4], ["N", 4], [3]]


def test_dims_inference_gives_no_size_for_are_anonymous():
    model = ir.from_proto(onnx.parser.parse_model(HEADER + """
        g (float[N, 4] x) => (float[2, 4] y) {
            y = Reshape(x, x)
        }"""))  # fmt: skip
    relax_unproved_output_dims(model)
    assert _dims(model) == [[None, None]]  # a shape read at run time: no dim is proved


def test_kept_for_speed_a_lying_export_declares_what_it_computes():
    # list edits at run-time positions (`xs[k] = ..; del xs[j]; xs.pop(); xs.insert(1, ..)`),
    # kept as given by --target onnxruntime (its tensor form costs more launches), declared as
    # if traced with 2 elements left (5, 4 and 2 on the data sets)
    model = onnx.load(KEPT / "model.onnx")
    dim = model.graph.output[0].type.tensor_type.shape.dim[0]
    dim.ClearField("dim_param")
    dim.dim_value = 2
    sets = list(stored_data_sets(KEPT, model))
    assert any(declared_shape_mismatches(model, feeds) for _, feeds, _ in sets)
    lowered, report = lower(model, target="onnxruntime")
    assert report.stop_reason.startswith("kept the original")
    dims = lowered.graph.output[0].type.tensor_type.shape.dim
    # inference gives a ConcatFromSequence no size along the stack: that dim is anonymous
    assert [d.dim_value if d.HasField("dim_value") else None for d in dims] == [None, 3]
    for _, feeds, _ in sets:
        assert declared_shape_mismatches(lowered, feeds) == []


def test_a_lowered_export_declares_what_it_computes():
    # torchvision's RetinaNet post-processing, whose export declares the 2 detections it was
    # traced with; --target onnxruntime lowers it (its tensor form costs less)
    model = onnx.load(ROOT / "model.onnx")
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [2, 4]
    lowered, report = lower(model, target="onnxruntime")
    assert not report.stop_reason.startswith("kept the original")
    for _, feeds, _ in stored_data_sets(ROOT, model):
        assert declared_shape_mismatches(lowered, feeds) == []


def test_a_rank_inference_contradicts_becomes_the_inferred_shape():
    model = ir.from_proto(onnx.parser.parse_model(HEADER + """
        g (float[N, 3] x) => (float[N, 2, 3] y, float[M] z) {
            y = Relu(x)
            z = Neg(x)
        }"""))  # fmt: skip
    relax_unproved_output_dims(model)
    assert _dims(model) == [[None, 3], [None, 3]]


def test_a_rank_inference_cannot_give_stays_declared():
    model = ir.from_proto(onnx.parser.parse_model(HEADER + """
        g (float[N, 3] x, int64[K] s) => (float[A, B, C] y) {
            y = Reshape(x, s)
        }"""))  # fmt: skip
    relax_unproved_output_dims(model)
    assert _dims(model) == [["A", "B", "C"]]


def test_kept_for_speed_an_export_declaring_the_wrong_rank_passes_the_checker():
    # list editing by position, kept as given by --target onnxruntime: the exporter declares
    # both outputs one rank too many (it reads `unbind` as keeping the axis)
    case = pathlib.Path(__file__).parent / "fixtures" / "torch_newcomer" / "edit_assign_delete"
    model = onnx.load(case / "model.onnx")
    assert [len(o.type.tensor_type.shape.dim) for o in model.graph.output] == [3, 2]
    lowered, _ = lower(model, target="onnxruntime")  # checked with full_check
    assert [len(o.type.tensor_type.shape.dim) for o in lowered.graph.output] == [2, 1]
    for _, feeds, _ in stored_data_sets(case, model):
        assert declared_shape_mismatches(lowered, feeds) == []
