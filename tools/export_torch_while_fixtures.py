#!/usr/bin/env python3
"""Export TorchScript `while` loops, and a `for` loop with a `break`, as test fixtures.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_while_fixtures.py      # all cases, or CASE...

Same machinery and layout as `tools/export_torch_fixtures.py` (scripted modules, opset 17,
outputs computed by PyTorch itself, checked against onnxruntime), written to
`tests/fixtures/torch_while/<case>/`. TorchScript exports both loops with the trip count
2**63 - 1 and a condition computed in the body: `count_while` tests its counter against a bound
(`while i < n`), `break_append` tests its counter and a flag that the `break` clears.
`python -m bench.portability` runs them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_while"


class CountWhile(torch.nn.Module):
    """`i = 0; while i < int(n): acc = acc * 0.5 + x[i % x.size(0)]; i += 1`."""

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        i = 0
        acc = torch.zeros_like(x[0])
        while i < int(n):
            acc = acc * 0.5 + x[i % x.size(0)]
            i += 1
        return acc


class BreakAppend(torch.nn.Module):
    """`for i in range(x.size(0)): acc = acc + x[i]; outs.append(acc); if acc.sum() > 3: break`;
    `stack(outs)`."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = []
        acc = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            acc = acc + x[i]
            outs.append(acc)
            if bool(acc.sum() > 3.0):
                break
        return torch.stack(outs)


def _count(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0], torch.tensor(5 if k == 0 else 0)]  # set 1: no iteration


def _steered(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0].abs() * (0.3 if k == 0 else 2.0)]  # set 0: runs to the end; set 1: breaks


CASES = [
    Case("count_while", CountWhile, {"x": (4, 3), "n": (1,)}, ["y"], CountWhile.__doc__ or "",
         dynamic_axes={"x": {0: "N"}}, alt_inputs={"x": (2, 3), "n": (1,)}, prepare=_count,
         lengths="static", seq_ops={}),
    Case("break_append", BreakAppend, {"x": (4, 3)}, ["y"], BreakAppend.__doc__ or "",
         dynamic_axes={"x": {0: "N"}}, alt_inputs={"x": (5, 3)}, prepare=_steered,
         lengths="dynamic (data-dependent break)",
         seq_ops={"ConcatFromSequence": 1, "SequenceEmpty": 1, "SequenceInsert": 1}),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
