#!/usr/bin/env python3
"""Export the list-building loops of issue 16 from real PyTorch (TorchScript) as test fixtures.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_loop_fixtures.py      # all cases, or CASE...

Same machinery and layout as `tools/export_torch_fixtures.py` (scripted modules, opset 17,
outputs computed by PyTorch itself, checked against onnxruntime), written to
`tests/fixtures/torch_loops/<case>/`. Every case builds a list in a loop whose trip count or
condition is known only at run time; tests/control_flow/test_torch_loops.py lowers them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_loops"


class WhileHalve(torch.nn.Module):
    """`while x.abs().sum() > 1: x = x * 0.5; outs.append(x)`; `stack(outs)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = [x]
        while bool(x.abs().sum() > 1.0):
            x = x * 0.5
            outs.append(x)
        return torch.stack(outs)


class RangeN(torch.nn.Module):
    """`for i in range(int(n)): x = x + 1; outs.append(x)`; `cat(outs)` (n a tensor input)."""

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        outs: list[Tensor] = [x]
        for _ in range(int(n)):
            x = x + 1.0
            outs.append(x)
        return torch.cat(outs, 0)


class SplitOne(torch.nn.Module):
    """`for t in x.split(1, 0): outs.append(t * 2 + t.sum())`; `cat(outs)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for t in x.split(1, 0):
            outs.append(t * 2.0 + t.sum())
        return torch.cat(outs, 0)


class SplitK(torch.nn.Module):
    """`for t in x.split(int(k), 0): outs.append(t - t.mean(0))`; `cat(outs)`: uneven chunks."""

    def forward(self, x: Tensor, k: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for t in x.split(int(k), 0):
            outs.append(t - t.mean(0, keepdim=True))
        return torch.cat(outs, 0)


class Pyramid(torch.nn.Module):
    """`for i in range(x.size(0)): outs.append(x[: i + 1] * 2)`; `cat(outs)`: growing chunks."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = [x[:1]]
        for i in range(x.size(0)):
            outs.append(x[: i + 1] * 2.0)
        return torch.cat(outs, 0)


class Prepend(torch.nn.Module):
    """`for t in x.unbind(0): outs.insert(0, t * 2)`; `stack(outs)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = [x[0]]
        for t in x.unbind(0):
            outs.insert(0, t * 2.0)
        return torch.stack(outs)


class CondAppend(torch.nn.Module):
    """`for t in x.unbind(0): if t.sum() > 0: outs.append(t)`; `stack(outs)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = [x[0]]
        for t in x.unbind(0):
            if bool(t.sum() > 0):
                outs.append(t)
        return torch.stack(outs)


class CondAppendScaled(torch.nn.Module):
    """`for t in x.unbind(0): if t.sum() > 0: outs.append(t.relu() * 2)`: computed in the branch."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = [x[0]]
        for t in x.unbind(0):
            if bool(t.sum() > 0):
                outs.append(torch.relu(t) * 2.0)
        return torch.stack(outs)


class BothAppend(torch.nn.Module):
    """`for t in x.unbind(0): if t.sum() > 0: outs.append(t) else: outs.append(-t)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for t in x.unbind(0):
            if bool(t.sum() > 0):
                outs.append(t)
            else:
                outs.append(-t)
        return torch.stack(outs)


def _count(value: int):  # type: ignore[no-untyped-def]
    """A `prepare` hook: the last input becomes the int64 scalar `value` (set 0), value + 2."""
    return lambda k, ts: [*ts[:-1], torch.tensor(value + 2 * k)]


def _scaled(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [t * (0.1 if k == 0 else 4.0) for t in ts]  # set 0: no halving; set 1: several


ROWS = {0: "N"}
CASES = [
    Case("while_halve", WhileHalve, {"x": (2, 3)}, ["y"], WhileHalve.__doc__ or "",
         dynamic_axes={"x": {0: "A"}}, alt_inputs={"x": (3, 3)}, prepare=_scaled,
         lengths="dynamic (data-dependent while)",
         seq_ops={"ConcatFromSequence": 1, "SequenceConstruct": 1, "SequenceInsert": 1}),
    Case("range_n", RangeN, {"x": (2, 3), "n": (1,)}, ["y"], RangeN.__doc__ or "",
         dynamic_axes={"x": {0: "A"}}, alt_inputs={"x": (1, 3), "n": (1,)}, prepare=_count(0),
         lengths="dynamic (n)",
         seq_ops={"ConcatFromSequence": 1, "SequenceConstruct": 1, "SequenceInsert": 1}),
    Case("split_one", SplitOne, {"x": (4, 3)}, ["y"], SplitOne.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (1, 3)}, lengths="dynamic (N)",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceEmpty": 1,
                  "SequenceInsert": 1, "SequenceLength": 1, "SplitToSequence": 1}),
    Case("split_k", SplitK, {"x": (5, 3), "k": (1,)}, ["y"], SplitK.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (7, 3), "k": (1,)}, prepare=_count(2),
         lengths="dynamic (ceil(N/k)), last chunk smaller",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceEmpty": 1,
                  "SequenceInsert": 1, "SequenceLength": 1, "SplitToSequence": 1}),
    Case("pyramid", Pyramid, {"x": (4, 3)}, ["y"], Pyramid.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 3)}, lengths="dynamic (N), growing",
         seq_ops={"ConcatFromSequence": 1, "SequenceConstruct": 1, "SequenceInsert": 1}),
    Case("prepend", Prepend, {"x": (4, 3)}, ["y"], Prepend.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (1, 3)}, lengths="dynamic (N)",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceConstruct": 1,
                  "SequenceInsert": 1, "SequenceLength": 1, "SplitToSequence": 1}),
    Case("cond_append", CondAppend, {"x": (5, 3)}, ["y"], CondAppend.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 3)}, lengths="dynamic (data)",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceConstruct": 1,
                  "SequenceInsert": 1, "SequenceLength": 1, "SplitToSequence": 1}),
    Case("cond_append_scaled", CondAppendScaled, {"x": (5, 3)}, ["y"],
         CondAppendScaled.__doc__ or "", dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 3)},
         lengths="dynamic (data)",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceConstruct": 1,
                  "SequenceInsert": 1, "SequenceLength": 1, "SplitToSequence": 1}),
    Case("both_append", BothAppend, {"x": (5, 3)}, ["y"], BothAppend.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (1, 3)}, lengths="dynamic (N)",
         seq_ops={"ConcatFromSequence": 1, "SequenceAt": 1, "SequenceEmpty": 1,
                  "SequenceInsert": 2, "SequenceLength": 1, "SplitToSequence": 1}),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
