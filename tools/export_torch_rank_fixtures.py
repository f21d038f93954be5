#!/usr/bin/env python3
"""Export lists whose element ranks ONNX shape inference loses, as test fixtures (TorchScript).

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_rank_fixtures.py      # all cases, or CASE...

A Conv, Softmax, Slice or Transpose applied to an element read from a list inside a scripted
loop: the TorchScript exporter writes the element as a SequenceAt in a Loop body, and ONNX
shape inference gives what reads it no rank (the body's inputs carry none). Each case is
scripted and exported with the TorchScript exporter at opset 17, with the outputs PyTorch
computes. Same machinery and layout as `tools/export_torch_fixtures.py`, written to
`tests/fixtures/torch_ranks/<case>/`; tests/lists/test_torch_ranks.py lowers them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_ranks"


class ConvPerChunk(nn.Module):
    """A shared convolution over the channel groups of a feature map (grouped heads written as a
    loop): `for c in torch.split(x, 4, 1): outs.append(conv(c).softmax(1)[:, :, 1:]
    .transpose(2, 3))`; `torch.cat(outs, 1)`. The number of groups is known at run time."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for c in torch.split(x, 4, 1):
            y = self.conv(c).softmax(1)
            outs.append(y[:, :, 1:].transpose(2, 3))
        return torch.cat(outs, 1)


class IndexedLevels(nn.Module):
    """Levels of a pyramid read by index in a loop (`for i in range(len(feats)): y =
    conv(feats[i])`), each softmaxed, cropped and transposed, then stacked after a global
    pool: the list is read back (`feats[i]`), not iterated."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        feats = torch.split(x, 2, 1)
        pooled: list[Tensor] = []
        for i in range(len(feats)):
            y = self.conv(feats[i]).softmax(-1)
            y = y[:, :, 1:, :].transpose(1, 3)
            pooled.append(y.mean(dim=(2, 3)))
        return torch.stack(pooled, 0)


class ShrinkingAppends(nn.Module):
    """A tensor cut shorter in each iteration and appended (a pyramid of crops, beam pruning):
    `cur = cur[1:]; outs.append(cur.softmax(-1))`; `torch.cat(outs)`: the appended tensor
    changes shape between iterations."""

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        outs: list[Tensor] = []
        cur = x
        for _ in range(int(n)):
            cur = cur[1:]
            outs.append(cur.softmax(-1))
        return torch.cat(outs, 0)


class FeedbackLayers(nn.Module):
    """Each layer reads the last element of the list it appends to (DenseNet-style feature
    lists, a recurrent refinement): `feats = [x]`; `for _ in range(n): feats.append(
    layer_1(feats[-1]).softmax(1)[:, :, 1:].permute(0, 1, 3, 2))`; each flattened and joined. The
    element read back from the list being built has no rank after ONNX shape inference."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_1 = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        feats = [x]
        for _ in range(int(n)):
            y = self.layer_1(feats[-1]).softmax(1)
            feats.append(y[:, :, 1:].permute(0, 1, 3, 2))
        return torch.cat([f.reshape(-1) for f in feats], 0)


class RefineInPlace(nn.Module):
    """A list of maps refined in place, one entry per iteration (iterative refinement heads):
    `maps[i] = conv(maps[i]).softmax(1)[:, :, :, 1:]` for each index, then stacked by their
    means. The list is carried by the loop and its elements rewritten."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_1 = nn.Conv2d(2, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        maps = list(torch.split(x, 2, 1))
        for i in range(len(maps)):
            maps[i] = self.layer_1(maps[i]).softmax(1)[:, :, :, 1:]
        return torch.stack([m.mean() for m in maps])


class BranchPerLevel(nn.Module):
    """A branch per element of a list read in a loop (heads that treat small and large levels
    differently): `for i in range(len(feats)): y = feats[i]`; `if i % 2 == 0: y =
    layer_1(y).softmax(1)[:, :, 1:] else: y = y.permute(0, 1, 3, 2)`; the means appended,
    stacked. The If in the loop body returns a tensor made from the element read back."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_1 = nn.Conv2d(2, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        feats = list(torch.split(x, 2, 1))
        outs: list[Tensor] = []
        for i in range(len(feats)):
            y = feats[i]
            if i % 2 == 0:  # noqa: SIM108 (the statement as model code writes it)
                y = self.layer_1(y).softmax(1)[:, :, 1:]
            else:
                y = y.permute(0, 1, 3, 2)
            outs.append(y.mean(dim=(2, 3)))
        return torch.stack(outs, 0)


class RepeatedRefinement(nn.Module):
    """Each element of a list refined by a convolution a run-time number of times (iterative
    refinement, a recurrent cell unrolled by a loop): `for f in feats: y = f`; `for _ in
    range(n): y = layer_1(y).softmax(1)`; `outs.append(y[:, :, 1:])`; `torch.cat(outs, 1)`. The
    carried `y` of the inner loop has a rank ONNX does not know (it starts as an element read
    from a list in the outer loop's body)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_1 = nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for f in torch.split(x, 2, 1):
            y = f
            for _ in range(int(n)):
                y = self.layer_1(y).softmax(1)
            outs.append(y[:, :, 1:])
        return torch.cat(outs, 1)


def _steps(index: int, tensors: list[Tensor]) -> list[Tensor]:
    x, _ = tensors
    return [x, torch.tensor([3 if index == 0 else 2])]


_SPLIT_LOOP = {"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceEmpty": 1, "SequenceInsert": 1,
               "SequenceLength": 1, "SplitToSequence": 1}  # fmt: skip
IMAGE = {0: "N", 1: "C", 2: "H", 3: "W"}

CASES = [
    Case("conv_per_chunk", ConvPerChunk, {"x": (1, 8, 5, 4)}, ["y"],
         ConvPerChunk.__doc__ or "", dynamic_axes={"x": IMAGE},
         alt_inputs={"x": (2, 12, 4, 6)}, lengths="dynamic (C/4 chunks)", seq_ops=_SPLIT_LOOP),
    Case("indexed_levels", IndexedLevels, {"x": (1, 6, 4, 3)}, ["y"],
         IndexedLevels.__doc__ or "", dynamic_axes={"x": IMAGE},
         alt_inputs={"x": (2, 4, 3, 5)}, lengths="dynamic (C/2 chunks)", seq_ops=_SPLIT_LOOP),
    Case("shrinking_appends", ShrinkingAppends, {"x": (5, 3), "n": (1,)}, ["y"],
         ShrinkingAppends.__doc__ or "", dynamic_axes={"x": {0: "T"}},
         alt_inputs={"x": (4, 3), "n": (1,)}, prepare=_steps,
         lengths="dynamic (n appends of shrinking rows)",
         seq_ops={"ConcatFromSequence": 1, "SequenceEmpty": 1, "SequenceInsert": 1}),
    Case("feedback_layers", FeedbackLayers, {"x": (1, 3, 5, 5), "n": (1,)}, ["y"],
         FeedbackLayers.__doc__ or "", dynamic_axes={"x": IMAGE}, prepare=_steps,
         alt_inputs={"x": (2, 3, 4, 6), "n": (1,)}, lengths="dynamic (n layers)"),
    Case("refine_in_place", RefineInPlace, {"x": (1, 6, 3, 4)}, ["y"],
         RefineInPlace.__doc__ or "", dynamic_axes={"x": IMAGE},
         alt_inputs={"x": (2, 4, 2, 5)}, lengths="dynamic (C/2 maps)"),
    Case("branch_per_level", BranchPerLevel, {"x": (1, 6, 4, 3)}, ["y"],
         BranchPerLevel.__doc__ or "", dynamic_axes={"x": IMAGE},
         alt_inputs={"x": (2, 8, 3, 5)}, lengths="dynamic (C/2 levels)", seq_ops=_SPLIT_LOOP),
    Case("repeated_refinement", RepeatedRefinement, {"x": (1, 4, 4, 3), "n": (1,)}, ["y"],
         RepeatedRefinement.__doc__ or "", dynamic_axes={"x": IMAGE}, prepare=_steps,
         alt_inputs={"x": (2, 6, 3, 5), "n": (1,)}, lengths="dynamic (C/2 levels, n steps)",
         seq_ops=_SPLIT_LOOP),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
