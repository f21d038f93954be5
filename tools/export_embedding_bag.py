"""Export nn.EmbeddingBag (sum, mean, max) with torch's default exporter (dynamo, optimize=True)
to tests/fixtures/torch_dynamo/embedding_bag_{mode}.onnx.

torch 2.13 writes each as a Loop over the bags that appends each bag's reduced row to a
sequence, then ConcatFromSequence (the model of recommendation-system exports). Needs torch
(`pip install torch==2.13.0`), which the project itself never imports:

    python tools/export_embedding_bag.py
"""

from __future__ import annotations

import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "torch_dynamo"


class Bag(torch.nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(10, 4, mode=mode)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 4])
    dims = ({0: torch.export.Dim("L")}, {0: torch.export.Dim("B")})
    for mode in ("sum", "mean", "max"):
        torch.manual_seed(0)
        model = Bag(mode).eval()
        path = OUT / f"embedding_bag_{mode}.onnx"
        torch.onnx.export(
            model,
            (indices, offsets),
            str(path),
            dynamo=True,
            dynamic_shapes=dims,
            external_data=False,
        )
        print(path)


if __name__ == "__main__":
    main()
