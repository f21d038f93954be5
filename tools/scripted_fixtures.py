"""Export one fixture set of scripted PyTorch modules: each case's module scripted and exported
with the TorchScript exporter, its data sets written beside it as ONNX test data.

    python tools/export_torch_wild_fixtures.py [NAME ...]    (one table of cases per set)
        -> tests/fixtures/<set>/<name>/model.onnx, test_data_set_<k>/{input,output}_<i>.pb

The first data set is the one the module is exported with; the expected outputs are the
module's own. Needs torch==2.13.0 (never a dependency of seqlower or its tests).
"""

from __future__ import annotations

__all__ = ["SEQ_OPS", "Case", "Maker", "export_case", "main"]

import io
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import Tensor, nn

OPSET = 17
SEQ_OPS = {
    "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
    "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence",
}  # fmt: skip

Maker = Callable[[], list[Tensor]]


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    inputs: list[str]
    outputs: list[str]
    data: list[Maker]  # one maker per data set; the first is the one exported with
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)
    opset: int = OPSET  # the opset the case is exported at


def seq_ops(graph: onnx.GraphProto) -> int:
    count = 0
    for node in graph.node:
        count += node.op_type in SEQ_OPS
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                count += seq_ops(attr.g)
    return count


def _flat(result: object) -> list:
    if isinstance(result, Tensor):
        return [result.detach().numpy()]
    if isinstance(result, list):  # a sequence-typed output
        return [[t.detach().numpy() for t in result]]
    assert isinstance(result, tuple), type(result)
    return [r for x in result for r in _flat(x)]


def export_case(case: Case, out: Path) -> str:
    """Export `case` into `out / case.name` (replaced); a line saying what was written."""
    torch.manual_seed(0)
    module = case.make().eval()
    data = [make() for make in case.data]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            torch.jit.script(module), tuple(data[0]), buf, dynamo=False, opset_version=case.opset,
            input_names=case.inputs, output_names=case.outputs,
            dynamic_axes=case.dynamic_axes or None,
        )  # fmt: skip
    model = onnx.load_from_string(buf.getvalue())
    folder = out / case.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    onnx.save(model, folder / "model.onnx")
    for k, inputs in enumerate(data):
        with torch.no_grad():
            expected = _flat(module(*inputs))
        ds = folder / f"test_data_set_{k}"
        ds.mkdir()
        for i, (name, t) in enumerate(zip(case.inputs, inputs, strict=True)):
            (ds / f"input_{i}.pb").write_bytes(
                numpy_helper.from_array(t.numpy(), name).SerializeToString()
            )
        for i, (name, e) in enumerate(zip(case.outputs, expected, strict=True)):
            proto = (
                numpy_helper.from_list(e, name)
                if isinstance(e, list)
                else numpy_helper.from_array(np.asarray(e), name)
            )
            (ds / f"output_{i}.pb").write_bytes(proto.SerializeToString())
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return f"{case.name} seq_ops={seq_ops(model.graph)} bytes={size}"


def main(cases: list[Case], out: Path, names: list[str]) -> int:
    """Export the cases named (all when none is), reporting every failure; 1 if any failed."""
    failed = 0
    for case in cases:
        if not names or case.name in names:
            try:
                print(export_case(case, out), flush=True)
            except Exception as exc:  # report every case, then fail
                failed += 1
                print(f"{case.name} FAILED: {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
    return 1 if failed else 0
