#!/usr/bin/env python3
"""Export the TorchScript models that test `--target onnxruntime`'s per-region choice.

Writes, for each case below, `tests/fixtures/speed/<case>/model.onnx` and
`test_data_set_<k>/input_<i>.pb` / `output_<i>.pb` (PyTorch's own outputs), in the layout of
`tools/export_torch_fixtures.py` (TorchScript exporter, opset 17, `torch.jit.script` first).

- `chunk_runtime_index`: `cs = torch.chunk(x, 4, 1); return cs[int(k)] + cs[0]` with `k` a
  run-time input: one region whose tensor form (a selection by run-time position) costs more.
- `two_regions`: `xs = x.split(2, 0); xs[-1] * len(xs)` (uneven chunks read at run-time
  positions: costlier lowered) next to `torch.stack([relu(t @ w) for t in y.unbind(0)])`
  (a loop that batches: cheaper lowered).

Needs torch==2.13.0 (CPU) in a separate environment; torch is never a dependency of seqlower.
Run from the repository root: `python tools/export_speed_fixtures.py`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

OUT = Path("tests/fixtures/speed")


class ChunkRuntimeIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        cs = torch.chunk(x, 4, 1)
        return cs[int(k)] + cs[0]


class TwoRegions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(8, 8, generator=generator))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xs = x.split(2, 0)
        ragged = xs[-1] * float(len(xs))
        stacked = torch.stack([torch.relu(t @ self.w) for t in y.unbind(0)])
        return ragged, stacked


def _export(name: str, module: torch.nn.Module, feeds: list[dict[str, np.ndarray]]) -> None:
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    names = list(feeds[0])
    args = tuple(torch.from_numpy(value) for value in feeds[0].values())
    dynamic = {n: {0: "N"} for n in names if feeds[0][n].ndim > 0 and n != "k"}
    torch.onnx.export(
        torch.jit.script(module),
        args,
        folder / "model.onnx",
        input_names=names,
        dynamic_axes=dynamic,
        opset_version=17,
        dynamo=False,
    )
    model = onnx.load(folder / "model.onnx")
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    for index, feed in enumerate(feeds):
        data = folder / f"test_data_set_{index}"
        data.mkdir()
        with torch.no_grad():
            want = module(*(torch.from_numpy(value) for value in feed.values()))
        want = [want] if isinstance(want, torch.Tensor) else list(want)
        got = session.run(None, feed)
        for i, (value, name) in enumerate(zip(feed.values(), names, strict=True)):
            tensor = numpy_helper.from_array(value, name=name)
            (data / f"input_{i}.pb").write_bytes(tensor.SerializeToString())
        for i, (expected, output) in enumerate(zip(want, model.graph.output, strict=True)):
            expected = expected.numpy()
            np.testing.assert_allclose(got[i], expected, rtol=1e-4, atol=1e-5)
            tensor = numpy_helper.from_array(expected, name=output.name)
            (data / f"output_{i}.pb").write_bytes(tensor.SerializeToString())
    print(f"{folder}: {len(model.graph.node)} nodes, {len(feeds)} data sets")


def main() -> None:
    rng = np.random.default_rng(0)

    def floats(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    _export(
        "chunk_runtime_index",
        ChunkRuntimeIndex(),
        [
            {"x": floats(3, 8), "k": np.array(2, dtype=np.int64)},
            {"x": floats(5, 8), "k": np.array(-1, dtype=np.int64)},
        ],
    )
    _export(
        "two_regions",
        TwoRegions(),
        [{"x": floats(5, 3), "y": floats(6, 8)}, {"x": floats(8, 3), "y": floats(3, 8)}],
    )


if __name__ == "__main__":
    main()
