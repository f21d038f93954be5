#!/usr/bin/env python3
"""Export small real PyTorch models that use sequence ops, as test fixtures.

What it writes
--------------
For every case in ``CASES`` this script writes::

    tests/fixtures/torch/<case>/model.onnx
    tests/fixtures/torch/<case>/test_data_set_0/input_<i>.pb
    tests/fixtures/torch/<case>/test_data_set_0/output_<i>.pb
    tests/fixtures/torch/<case>/test_data_set_1/...      (dynamic cases only)

The layout is the one of the ONNX backend test data: each ``input_<i>.pb`` is
an ``onnx.TensorProto`` whose ``name`` is the graph input's name, each
``output_<i>.pb`` a ``TensorProto`` (or an ``onnx.SequenceProto`` for a
sequence-typed graph output) holding the value *computed by PyTorch itself*
on those inputs. ``test_data_set_1`` (only for cases whose lengths are
dynamic) uses other sizes for the dynamic axes, so a lowered model can be
checked on a length it was not exported with.

How the models are made
-----------------------
With the legacy TorchScript exporter, ``torch.onnx.export(..., dynamo=False)``,
opset 17, ``do_constant_folding=True`` (the default). Modules that use Python
lists, loops and ``len`` are passed through ``torch.jit.script`` first: the
exporter then writes the lists as real ONNX sequence values
(SplitToSequence, SequenceAt, SequenceInsert, SequenceConstruct,
SequenceLength, ConcatFromSequence, SequenceEmpty, SequenceErase) and the
loops as ``Loop`` nodes that carry sequences. A few cases are *traced*
instead (``script=False``); the tracer unrolls lists, so those exports contain
plain Split/Concat and serve as static baselines.

Each case records the histogram of sequence ops its export is expected to
contain (``seq_ops``, counted over the graph and all subgraphs); the script
prints the full op histogram and warns when the export differs.

Checks done after each export
-----------------------------
1. ``onnx.checker.check_model(model, full_check=True)``. A failure is
   reported and the fixture is kept (real exports are like that).
2. onnxruntime (CPU) runs the model on every saved input set and must match
   PyTorch's outputs (rtol 1e-4, atol 1e-5). A case onnxruntime cannot run
   is dropped and reported.

How to run
----------
It needs **torch==2.13.0** (CPU) in a separate virtualenv; torch is never a
dependency of seqlower or its CI. From the repository root::

    python3 -m venv /work/venv-torch
    . /work/venv-torch/bin/activate
    pip install torch==2.13.0 onnx onnxruntime numpy
    python tools/export_torch_fixtures.py            # all cases
    python tools/export_torch_fixtures.py unbind_stack_scripted   # some cases
    python tools/export_torch_fixtures.py --list     # names and descriptions

Options: ``--out DIR`` (default ``tests/fixtures/torch``), ``--table``
(print the Markdown table used in ``tests/fixtures/torch/README.md``).
The outputs are small and committed; rerun by hand only to change them.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from torch import Tensor

REQUIRED_TORCH = "2.13.0"
OPSET = 17
RTOL, ATOL = 1e-4, 1e-5
SEQ_OPS = {
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SequenceMap",
    "SplitToSequence",
    "ConcatFromSequence",
}
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "torch"


# ---------------------------------------------------------------------------
# Modules. Every forward is TorchScript-compatible (type annotations on lists).
# ---------------------------------------------------------------------------


class SplitSum(torch.nn.Module):
    """torch.split(x, 2, dim=1) iterated and summed into an accumulator."""

    def forward(self, x: Tensor) -> Tensor:
        parts = torch.split(x, 2, dim=1)
        acc = torch.zeros_like(parts[0])
        for p in parts:
            acc = acc + p
        return acc


class SplitCatReversed(torch.nn.Module):
    """torch.split(x, 2, dim=1) indexed, mapped and concatenated back."""

    def forward(self, x: Tensor) -> Tensor:
        parts = torch.split(x, 2, dim=1)
        return torch.cat([parts[1] * 10.0, parts[0], parts[2].relu()], dim=1)


class ChunkCat(torch.nn.Module):
    """x.chunk(3, dim=-1) kept as a list and indexed, then transformed and concatenated."""

    def forward(self, x: Tensor) -> Tensor:
        cs = x.chunk(3, dim=-1)
        return torch.cat([cs[2], torch.sigmoid(cs[0]), cs[1] * cs[1]], dim=-1)


class ChunkUnpack(torch.nn.Module):
    """a, b, c = x.chunk(3, dim=-1): TorchScript turns this into prim::ConstantChunk (Slices)."""

    def forward(self, x: Tensor) -> Tensor:
        a, b, c = x.chunk(3, dim=-1)
        return torch.cat([c, torch.sigmoid(a), b * b], dim=-1)


class UnbindIndexAxis1(torch.nn.Module):
    """x.unbind(1) indexed with xs[0] and xs[-1]."""

    def forward(self, x: Tensor) -> Tensor:
        xs = x.unbind(1)
        return xs[0] - xs[-1]


class UnbindStack(torch.nn.Module):
    """x.unbind(0) then torch.stack of a list comprehension."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([t * 2.0 for t in x.unbind(0)])


class CatStackAppend(torch.nn.Module):
    """A list built with append (and one built by comprehension), then cat and stack."""

    def forward(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        items: list[Tensor] = []
        items.append(x)
        items.append(y * 2.0)
        items.append(x - y)
        cat = torch.cat(items, dim=0)
        squares = [t * t for t in items]
        stacked = torch.stack(squares, dim=1)
        return cat, stacked


class LoopAppendStatic(torch.nn.Module):
    """for i in range(x.size(1)) with list.append; x has a static shape."""

    def forward(self, x: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for i in range(x.size(1)):
            outs.append(x[:, i] * float(i + 1))
        return torch.stack(outs, dim=1)


class LoopAppendDynamic(torch.nn.Module):
    """for i in range(x.size(0)) with list.append and a carried tensor; size(0) is dynamic."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        outs: list[Tensor] = []
        running = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            running = running + x[i]
            outs.append(running)
        return torch.stack(outs, dim=0), torch.cat(outs, dim=0)


class LenNegIndex(torch.nn.Module):
    """len() of a split list and indexing with xs[0], xs[-1], xs[-2]."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        xs = x.split(2, dim=0)
        n = len(xs)
        last = xs[-1]
        return last * float(n), xs[0] + xs[-2]


class LenOfSplit(torch.nn.Module):
    """len(x.split(3)) returned as a tensor (ceil(N / 3)), plus the last chunk's sum."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        xs = x.split(3, dim=0)
        n = torch.tensor(len(xs))
        return n, xs[-1].sum(dim=0)


class SplitSizesList(torch.nn.Module):
    """torch.split with a constant list of sizes, the result indexed as a list."""

    def forward(self, x: Tensor) -> Tensor:
        parts = torch.split(x, [1, 2, 3], dim=1)
        return torch.cat([parts[2].sum(dim=1, keepdim=True), parts[1] * parts[0], parts[0]], dim=1)


class SplitSizesUnpack(torch.nn.Module):
    """torch.split with a list of sizes unpacked into names: exported as a plain Split."""

    def forward(self, x: Tensor) -> Tensor:
        a, b, c = torch.split(x, [1, 2, 3], dim=1)
        return torch.cat([c.sum(dim=1, keepdim=True), b * a, a], dim=1)


class SplitSizesFromShape(torch.nn.Module):
    """torch.split with sizes computed from the input's shape: [1, W - 1]."""

    def forward(self, x: Tensor) -> Tensor:
        parts = torch.split(x, [1, x.size(1) - 1], dim=1)
        return parts[1] * parts[0]


class SplitHeadsAttention(torch.nn.Module):
    """Per-head attention: q, k, v = proj(x).chunk(3); heads by torch.split; per-head softmax."""

    def __init__(self, d_model: int = 8, n_heads: int = 2) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out = torch.nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:  # x: [B, S, D]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        qs = torch.split(q, self.head_dim, dim=-1)
        ks = torch.split(k, self.head_dim, dim=-1)
        vs = torch.split(v, self.head_dim, dim=-1)
        scale = 1.0 / float(self.head_dim) ** 0.5
        heads: list[Tensor] = []
        for h in range(len(qs)):
            scores = torch.matmul(qs[h], ks[h].transpose(-2, -1)) * scale
            heads.append(torch.matmul(torch.softmax(scores, dim=-1), vs[h]))
        return self.out(torch.cat(heads, dim=-1))


class RnnUnbindLoop(torch.nn.Module):
    """An RNN written by hand: loop over x.unbind(0) of [T, B, I], Linear cells, torch.stack.

    The cell is ``tanh(ih(x_t) + hh(h))``. The form ``Linear(cat([x_t, h]))`` (see
    ``RnnUnbindCatCell``) does not export: the exporter believes the unbind elements
    keep the split axis and fails with "All tensors must have the same rank".
    """

    def __init__(self, in_dim: int = 4, hidden: int = 6) -> None:
        super().__init__()
        self.hidden = hidden
        self.ih = torch.nn.Linear(in_dim, hidden)
        self.hh = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:  # x: [T, B, in_dim]
        h = torch.zeros(x.size(1), self.hidden, dtype=x.dtype)
        outs: list[Tensor] = []
        for x_t in x.unbind(0):
            h = torch.tanh(self.ih(x_t) + self.hh(h))
            outs.append(h)
        return torch.stack(outs, dim=0), h


class RnnUnbindCatCell(torch.nn.Module):
    """RnnUnbindLoop with one Linear over cat([x_t, h]). Does NOT export (kept to show why)."""

    def __init__(self, in_dim: int = 4, hidden: int = 6) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell = torch.nn.Linear(in_dim + hidden, hidden)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = torch.zeros(x.size(1), self.hidden, dtype=x.dtype)
        outs: list[Tensor] = []
        for x_t in x.unbind(0):
            h = torch.tanh(self.cell(torch.cat([x_t, h], dim=-1)))
            outs.append(h)
        return torch.stack(outs, dim=0), h


class RnnIndexLoop(torch.nn.Module):
    """The same RNN with for t in range(x.size(0)) and x[t], a single Linear over cat([x[t], h])."""

    def __init__(self, in_dim: int = 4, hidden: int = 6) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell = torch.nn.Linear(in_dim + hidden, hidden)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = torch.zeros(x.size(1), self.hidden, dtype=x.dtype)
        outs: list[Tensor] = []
        for t in range(x.size(0)):
            h = torch.tanh(self.cell(torch.cat([x[t], h], dim=-1)))
            outs.append(h)
        return torch.stack(outs, dim=0), h


class ReturnList(torch.nn.Module):
    """Returns a List[Tensor]: the graph output is sequence-typed."""

    def forward(self, x: Tensor) -> list[Tensor]:
        return [t + 1.0 for t in x.split(2, dim=0)]


class ListInsertPop(torch.nn.Module):
    """list.insert at the front, list.pop of the last element, then stack."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        xs = list(x.unbind(0))
        xs.insert(0, x[0] * 0.0)
        last = xs.pop()
        return torch.stack(xs, dim=0), last


class ListInIf(torch.nn.Module):
    """A list appended to inside an `if` on a runtime value (If with sequence outputs)."""

    def forward(self, x: Tensor) -> Tensor:
        xs = list(x.chunk(2, dim=0))
        if bool(x.sum() > 0):
            xs.append(x * 2.0)
        else:
            xs.append(-x)
        return torch.cat(xs, dim=0)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    make: Callable[[], torch.nn.Module]
    inputs: dict[str, tuple[int, ...]]  # input name -> shape of test_data_set_0
    outputs: list[str]
    summary: str
    script: bool = True
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)
    # Other sizes of the dynamic axes, for test_data_set_1 (dynamic cases only).
    alt_inputs: dict[str, tuple[int, ...]] | None = None
    # Expected sequence-op histogram (graph + subgraphs) of the export.
    seq_ops: dict[str, int] = field(default_factory=dict)
    lengths: str = "static"
    # Optional hook (data set index, inputs) -> inputs, e.g. to steer an `if` down each branch.
    prepare: Callable[[int, list[Tensor]], list[Tensor]] | None = None


CASES: list[Case] = []


def _register(case: Case) -> None:
    CASES.append(case)


def _build_cases() -> None:
    dyn0 = {0: "N"}
    _register(
        Case(
            name="split_sum_traced",
            make=SplitSum,
            script=False,
            inputs={"x": (2, 6)},
            outputs=["y"],
            summary=(
                "`torch.split(x, 2, dim=1)` iterated and summed; traced, so the list is unrolled"
            ),
            lengths="static",
            seq_ops={},
        )
    )
    _register(
        Case(
            name="split_sum_scripted",
            make=SplitSum,
            inputs={"x": (2, 6)},
            outputs=["y"],
            dynamic_axes={"x": {1: "W"}},
            alt_inputs={"x": (2, 10)},
            summary=(
                "`torch.split(x, 2, dim=1)`, `zeros_like(parts[0])`, `for p in parts: acc = "
                "acc + p`"
            ),
            lengths="dynamic (W/2 pieces)",
            seq_ops={"SequenceAt": 2, "SequenceLength": 1, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="split_cat_indexed",
            make=SplitCatReversed,
            inputs={"x": (3, 6)},
            outputs=["y"],
            summary=(
                "`parts = torch.split(x, 2, dim=1)`; `torch.cat([parts[1]*10, parts[0], "
                "parts[2].relu()], 1)`"
            ),
            lengths="static",
            seq_ops={"SequenceAt": 3, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="chunk_cat",
            make=ChunkCat,
            inputs={"x": (2, 3, 9)},
            outputs=["y"],
            dynamic_axes={"x": {2: "W"}},
            alt_inputs={"x": (2, 3, 12)},
            summary=(
                "`cs = x.chunk(3, dim=-1)`; `torch.cat([cs[2], sigmoid(cs[0]), cs[1]*cs[1]], -1)`"
            ),
            lengths="3 pieces always (split tensor of length 3); sizes computed at runtime from W",
            seq_ops={"SequenceAt": 3, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="chunk_unpack_static",
            make=ChunkUnpack,
            inputs={"x": (2, 3, 9)},
            outputs=["y"],
            summary=(
                "`a, b, c = x.chunk(3, dim=-1)` unpacked; `torch.cat([c, sigmoid(a), b*b], -1)`"
            ),
            lengths="static",
            seq_ops={},
        )
    )
    _register(
        Case(
            name="unbind_stack",
            make=UnbindStack,
            inputs={"x": (3, 4)},
            outputs=["y"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (5, 4)},
            summary="`torch.stack([t * 2 for t in x.unbind(0)])`",
            lengths="dynamic (N)",
            seq_ops={
                "ConcatFromSequence": 1,
                "SequenceAt": 1,
                "SequenceEmpty": 1,
                "SequenceInsert": 1,
                "SequenceLength": 1,
                "SplitToSequence": 1,
            },
        )
    )
    _register(
        Case(
            name="unbind_index_axis1",
            make=UnbindIndexAxis1,
            inputs={"x": (2, 3, 4)},
            outputs=["y"],
            dynamic_axes={"x": {1: "T"}},
            alt_inputs={"x": (2, 5, 4)},
            summary="`xs = x.unbind(1)`; `xs[0] - xs[-1]`",
            lengths="dynamic (T)",
            seq_ops={"SequenceAt": 2, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="unbind_stack_traced",
            make=UnbindStack,
            script=False,
            inputs={"x": (3, 4)},
            outputs=["y"],
            summary="same as `unbind_stack`, traced",
            lengths="static",
            seq_ops={},
        )
    )
    _register(
        Case(
            name="cat_stack_append",
            make=CatStackAppend,
            inputs={"x": (2, 3), "y": (2, 3)},
            outputs=["cat", "stacked"],
            summary=(
                "list built with 3 `append`s, `torch.cat(items, 0)`; `torch.stack([t*t for t "
                "in items], 1)`"
            ),
            lengths="static (3 elements)",
            seq_ops={
                "ConcatFromSequence": 1,
                "SequenceAt": 1,
                "SequenceConstruct": 1,
                "SequenceEmpty": 1,
                "SequenceInsert": 1,
                "SequenceLength": 1,
            },
        )
    )
    _register(
        Case(
            name="loop_append_static",
            make=LoopAppendStatic,
            inputs={"x": (2, 4)},
            outputs=["y"],
            summary=(
                "`for i in range(x.size(1)): outs.append(x[:, i] * (i+1))`; "
                "`torch.stack(outs, 1)`; x fully static"
            ),
            lengths="static trip count (4, from the shape)",
            seq_ops={"ConcatFromSequence": 1, "SequenceEmpty": 1, "SequenceInsert": 1},
        )
    )
    _register(
        Case(
            name="loop_append_dynamic",
            make=LoopAppendDynamic,
            inputs={"x": (4, 3)},
            outputs=["stacked", "cat"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (7, 3)},
            summary=(
                "`for i in range(x.size(0))`: running sum, `outs.append(running)`; stack and "
                "cat of outs"
            ),
            lengths="dynamic trip count (N)",
            seq_ops={"ConcatFromSequence": 2, "SequenceEmpty": 1, "SequenceInsert": 1},
        )
    )
    _register(
        Case(
            name="len_neg_index",
            make=LenNegIndex,
            inputs={"x": (5, 3)},
            outputs=["last_scaled", "first_plus_second_last"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (8, 3)},
            summary=(
                "`xs = x.split(2, 0)`; `xs[-1] * len(xs)`, `xs[0] + xs[-2]` (last chunk "
                "smaller when N is odd)"
            ),
            lengths="dynamic (ceil(N/2))",
            seq_ops={"SequenceAt": 3, "SequenceLength": 1, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="len_of_split",
            make=LenOfSplit,
            inputs={"x": (7, 2)},
            outputs=["n", "last_sum"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (9, 2)},
            summary="`torch.tensor(len(x.split(3, 0)))` and `xs[-1].sum(0)`",
            lengths="dynamic (ceil(N/3))",
            seq_ops={"SequenceAt": 1, "SequenceLength": 1, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="split_sizes_list",
            make=SplitSizesList,
            inputs={"x": (2, 6)},
            outputs=["y"],
            summary=(
                "`parts = torch.split(x, [1, 2, 3], dim=1)`; `cat([parts[2].sum(1, keepdim), "
                "parts[1]*parts[0], parts[0]], 1)`"
            ),
            lengths="static (3 pieces of sizes 1, 2, 3)",
            seq_ops={"SequenceAt": 3, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="split_sizes_unpack_static",
            make=SplitSizesUnpack,
            inputs={"x": (2, 6)},
            outputs=["y"],
            summary=(
                "`a, b, c = torch.split(x, [1, 2, 3], dim=1)` unpacked; `cat([c.sum(1, "
                "keepdim), b*a, a], 1)`"
            ),
            lengths="static",
            seq_ops={},
        )
    )
    _register(
        Case(
            name="split_sizes_from_shape",
            make=SplitSizesFromShape,
            inputs={"x": (2, 6)},
            outputs=["y"],
            dynamic_axes={"x": {1: "W"}},
            alt_inputs={"x": (2, 3)},
            summary="`parts = torch.split(x, [1, x.size(1) - 1], dim=1)`; `parts[1] * parts[0]`",
            lengths="2 pieces; the sizes tensor is computed from the shape (dynamic W)",
            seq_ops={"SequenceAt": 2, "SplitToSequence": 1},
        )
    )
    _register(
        Case(
            name="attention_split_heads",
            make=SplitHeadsAttention,
            inputs={"x": (2, 5, 8)},
            outputs=["y"],
            dynamic_axes={"x": {0: "B", 1: "S"}},
            alt_inputs={"x": (1, 3, 8)},
            summary=(
                "`q,k,v = Linear(x).chunk(3, -1)`; heads by `torch.split(q, 4, -1)`; loop over "
                "heads: `softmax(q@k^T*s)@v` appended; `cat(heads, -1)`; Linear"
            ),
            lengths="static head count (2); batch and sequence dims dynamic",
            seq_ops={
                "ConcatFromSequence": 1,
                "SequenceAt": 3,
                "SequenceEmpty": 1,
                "SequenceInsert": 1,
                "SequenceLength": 1,
                "SplitToSequence": 3,
            },
        )
    )
    _register(
        Case(
            name="rnn_unbind_loop",
            make=RnnUnbindLoop,
            inputs={"x": (5, 2, 4)},
            outputs=["outputs", "h_last"],
            dynamic_axes={"x": {0: "T", 1: "B"}},
            alt_inputs={"x": (3, 1, 4)},
            summary=(
                "`for x_t in x.unbind(0): h = tanh(ih(x_t) + hh(h))`; `outs.append(h)`; "
                "`stack(outs)`"
            ),
            lengths="dynamic (T)",
            seq_ops={
                "ConcatFromSequence": 1,
                "SequenceAt": 1,
                "SequenceEmpty": 1,
                "SequenceInsert": 1,
                "SequenceLength": 1,
                "SplitToSequence": 1,
            },
        )
    )
    _register(
        Case(
            name="rnn_index_loop",
            make=RnnIndexLoop,
            inputs={"x": (5, 2, 4)},
            outputs=["outputs", "h_last"],
            dynamic_axes={"x": {0: "T", 1: "B"}},
            alt_inputs={"x": (3, 1, 4)},
            summary=(
                "`for t in range(x.size(0)): h = tanh(Linear(cat([x[t], h])))`; "
                "`outs.append(h)`; `stack(outs)`"
            ),
            lengths="dynamic (T)",
            seq_ops={"ConcatFromSequence": 1, "SequenceEmpty": 1, "SequenceInsert": 1},
        )
    )
    _register(
        Case(
            name="return_list",
            make=ReturnList,
            inputs={"x": (5, 3)},
            outputs=["ys"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (4, 3)},
            summary="returns `[t + 1 for t in x.split(2, 0)]`: a sequence-typed graph output",
            lengths="dynamic (ceil(N/2))",
            seq_ops={
                "SequenceAt": 1,
                "SequenceEmpty": 1,
                "SequenceInsert": 1,
                "SequenceLength": 1,
                "SplitToSequence": 1,
            },
        )
    )
    _register(
        Case(
            name="list_insert_pop",
            make=ListInsertPop,
            inputs={"x": (3, 4)},
            outputs=["stacked", "popped"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (5, 4)},
            summary=(
                "`xs = list(x.unbind(0))`; `xs.insert(0, x[0]*0)`; `last = xs.pop()`; `stack(xs)`"
            ),
            lengths="dynamic (N)",
            seq_ops={
                "ConcatFromSequence": 1,
                "SequenceAt": 1,
                "SequenceErase": 1,
                "SequenceInsert": 1,
                "SplitToSequence": 1,
            },
        )
    )
    _register(
        Case(
            name="list_in_if",
            make=ListInIf,
            inputs={"x": (4, 3)},
            outputs=["y"],
            dynamic_axes={"x": dyn0},
            alt_inputs={"x": (6, 3)},
            summary=(
                "`xs = list(x.chunk(2, 0))`; `if x.sum() > 0: xs.append(x*2) else: "
                "xs.append(-x)`; `cat(xs)`"
            ),
            lengths="3 elements (chunk sizes dynamic); If with a sequence output",
            # data set 0 takes the then-branch (sum > 0), data set 1 the else-branch.
            prepare=lambda k, ts: [t.abs() if k == 0 else -t.abs() for t in ts],
            seq_ops={"ConcatFromSequence": 1, "SequenceInsert": 2, "SplitToSequence": 1},
        )
    )


_build_cases()

# Modules the exporter cannot export, kept to document why (try them with --broken).
BROKEN: list[Case] = [
    Case(
        name="rnn_unbind_cat_cell",
        make=RnnUnbindCatCell,
        inputs={"x": (5, 2, 4)},
        outputs=["outputs", "h_last"],
        dynamic_axes={"x": {0: "T", 1: "B"}},
        summary=(
            "`for x_t in x.unbind(0): h = tanh(Linear(cat([x_t, h])))`: the exporter fails with "
            "'All tensors must have the same rank' (it thinks x_t kept the unbound axis)"
        ),
        lengths="dynamic (T)",
    ),
]


# ---------------------------------------------------------------------------
# Export machinery
# ---------------------------------------------------------------------------


def op_histogram(graph: onnx.GraphProto, hist: Counter | None = None) -> Counter:
    """Count op types in a graph and, recursively, in all its subgraphs."""
    hist = Counter() if hist is None else hist
    for node in graph.node:
        hist[node.op_type] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                op_histogram(attr.g, hist)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    op_histogram(g, hist)
    return hist


def seq_histogram(hist: Counter) -> dict[str, int]:
    return {k: v for k, v in sorted(hist.items()) if k in SEQ_OPS}


def make_inputs(case: Case, shapes: dict[str, tuple[int, ...]], index: int) -> list[Tensor]:
    gen = torch.Generator().manual_seed(1 + index)
    tensors = [torch.randn(*shape, generator=gen) for shape in shapes.values()]
    return case.prepare(index, tensors) if case.prepare else tensors


def _dims(t: onnx.TypeProto) -> list[Any] | None:
    """Declared dims of a tensor type (int, str symbol or None), None when the rank is unknown."""
    if not t.tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
        for d in t.tensor_type.shape.dim
    ]


def declared_shape_lies(model: onnx.ModelProto, outputs: list[Any]) -> list[str]:
    """Where the declared graph-output shapes disagree with what PyTorch/onnxruntime compute."""
    lies: list[str] = []
    symbols: dict[str, tuple[str, int]] = {}

    def check(name: str, t: onnx.TypeProto, value: Any) -> None:
        if t.HasField("sequence_type"):
            for k, v in enumerate(value):
                check(f"{name}[{k}]", t.sequence_type.elem_type, v)
            return
        dims = _dims(t)
        shape = list(np.asarray(value).shape)
        if dims is None:
            return
        if len(dims) != len(shape):
            lies.append(
                f"output {name}: declared rank {len(dims)} {dims}, actual rank {len(shape)} {shape}"
            )
            return
        for axis, (d, n) in enumerate(zip(dims, shape, strict=True)):
            if isinstance(d, int) and d != n:
                lies.append(f"output {name}: declared dim {axis} = {d}, actual {n}")
            elif isinstance(d, str):
                if d in symbols and symbols[d][1] != n:
                    lies.append(
                        f"output {name}: dim {axis} is symbol {d!r} = {n}, but {symbols[d][0]}"
                        f" gives {d!r} = {symbols[d][1]}"
                    )
                symbols.setdefault(d, (f"{name} dim {axis}", n))

    for out, value in zip(model.graph.output, outputs, strict=True):
        check(out.name, out.type, value)
    return lies


def loop_signature_mismatches(graph: onnx.GraphProto) -> list[str]:
    """Loop bodies whose declared carried input and output types disagree in rank."""
    found: list[str] = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.type != onnx.AttributeProto.GRAPH:
                continue
            body = attr.g
            if node.op_type == "Loop":
                n_carried = len(node.input) - 2
                for k in range(n_carried):
                    t_in, t_out = body.input[2 + k].type, body.output[1 + k].type
                    if t_in.HasField("sequence_type") and t_out.HasField("sequence_type"):
                        t_in, t_out = t_in.sequence_type.elem_type, t_out.sequence_type.elem_type
                        what = "sequence element"
                    else:
                        what = "tensor"
                    d_in, d_out = _dims(t_in), _dims(t_out)
                    if d_in is not None and d_out is not None and len(d_in) != len(d_out):
                        found.append(
                            f"Loop {node.name!r} carried {k} ({what}): body input"
                            f" {body.input[2 + k].name!r} rank {len(d_in)}, body output"
                            f" {body.output[1 + k].name!r} rank {len(d_out)}"
                        )
            found.extend(loop_signature_mismatches(body))
    return found


def to_numpy_outputs(result: Any) -> list[Any]:
    """Flatten PyTorch results into numpy arrays (lists stay lists: sequence outputs)."""
    if isinstance(result, Tensor):
        return [result.detach().numpy()]
    if isinstance(result, tuple):
        out: list[Any] = []
        for r in result:
            out.extend(to_numpy_outputs(r))
        return out
    if isinstance(result, list):
        return [[t.detach().numpy() for t in result]]
    raise TypeError(f"unsupported output type {type(result)!r}")


def save_value(value: Any, name: str, path: Path) -> None:
    if isinstance(value, list):
        proto = numpy_helper.from_list(value, name=name)
    else:
        proto = numpy_helper.from_array(np.asarray(value), name=name)
    path.write_bytes(proto.SerializeToString())


def compare(expected: Any, got: Any, what: str) -> None:
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            raise AssertionError(
                f"{what}: expected a sequence of {len(expected)}, got {type(got)}"
                f" of {len(got) if isinstance(got, list) else '?'}"
            )
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            compare(e, g, f"{what}[{i}]")
        return
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape} != PyTorch's {expected.shape}")
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def export_case(case: Case, out_root: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    module = case.make().eval()
    model_for_export = torch.jit.script(module) if case.script else module
    inputs0 = make_inputs(case, case.inputs, 0)

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model_for_export,
            tuple(inputs0),
            buf,
            dynamo=False,
            opset_version=OPSET,
            input_names=list(case.inputs),
            output_names=case.outputs,
            dynamic_axes=case.dynamic_axes or None,
        )
    model = onnx.load_from_string(buf.getvalue())
    report: dict[str, Any] = {"name": case.name}

    hist = op_histogram(model.graph)
    report["ops"] = dict(sorted(hist.items()))
    report["seq_ops"] = seq_histogram(hist)
    if report["seq_ops"] != case.seq_ops:
        report["seq_ops_mismatch"] = f"recorded {case.seq_ops}, export has {report['seq_ops']}"

    try:
        onnx.checker.check_model(model, full_check=True)
        report["full_check"] = "ok"
    except Exception as exc:  # keep the fixture: real exports are like that
        report["full_check"] = f"FAILED: {str(exc).splitlines()[0][:300]}"

    data_sets = [inputs0]
    if case.alt_inputs:
        data_sets.append(make_inputs(case, case.alt_inputs, 1))

    # PyTorch reference (run the eager module: that is "what PyTorch computes").
    so = ort.SessionOptions()
    so.log_severity_level = (
        3  # the "Expected shape from model ..." warnings are reported below instead
    )
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    graph_inputs = [i.name for i in model.graph.input]
    graph_outputs = [o.name for o in model.graph.output]
    results = []
    for k, ins in enumerate(data_sets):
        with torch.no_grad():
            expected = to_numpy_outputs(module(*ins))
        if len(expected) != len(graph_outputs):
            raise AssertionError(
                f"{len(expected)} PyTorch outputs vs {len(graph_outputs)} graph outputs"
            )
        feed = {n: t.numpy() for n, t in zip(graph_inputs, ins, strict=True)}
        got = sess.run(None, feed)
        for name, e, g in zip(graph_outputs, expected, got, strict=True):
            compare(e, g, f"{case.name} set {k} output {name}")
        results.append((ins, expected))
    report["shape_lies"] = declared_shape_lies(model, results[0][1])
    report["loop_signatures"] = loop_signature_mismatches(model.graph)

    case_dir = out_root / case.name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    onnx.save(model, case_dir / "model.onnx")
    for k, (ins, expected) in enumerate(results):
        ds = case_dir / f"test_data_set_{k}"
        ds.mkdir()
        for i, (name, t) in enumerate(zip(graph_inputs, ins, strict=True)):
            save_value(t.numpy(), name, ds / f"input_{i}.pb")
        for i, (name, e) in enumerate(zip(graph_outputs, expected, strict=True)):
            save_value(e, name, ds / f"output_{i}.pb")
    report["io"] = describe_io(model, results[0])
    report["bytes"] = sum(p.stat().st_size for p in case_dir.rglob("*") if p.is_file())
    return report


def _type_str(t: onnx.TypeProto) -> str:
    if t.HasField("tensor_type"):
        tt = t.tensor_type
        dims = []
        for d in tt.shape.dim:
            dims.append(
                d.dim_param
                if d.HasField("dim_param")
                else str(d.dim_value)
                if d.HasField("dim_value")
                else "?"
            )
        shape = "[" + ", ".join(dims) + "]" if tt.HasField("shape") else "(no shape)"
        return f"{onnx.TensorProto.DataType.Name(tt.elem_type).lower()}{shape}"
    if t.HasField("sequence_type"):
        return f"seq({_type_str(t.sequence_type.elem_type)})"
    return "?"


def describe_io(model: onnx.ModelProto, result: tuple[list[Tensor], list[Any]]) -> dict[str, Any]:
    ins, outs = result

    def actual(v: Any) -> str:
        if isinstance(v, list):
            return "seq(" + ", ".join(str(list(a.shape)) for a in v) + ")"
        return str(list(np.asarray(v).shape))

    return {
        "inputs": [
            (i.name, _type_str(i.type), str(list(t.shape)))
            for i, t in zip(model.graph.input, ins, strict=True)
        ],
        "outputs": [
            (o.name, _type_str(o.type), actual(v))
            for o, v in zip(model.graph.output, outs, strict=True)
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--table", action="store_true", help="print the README's Markdown table")
    parser.add_argument(
        "--broken",
        action="store_true",
        help="try the known-broken modules (into a temporary folder) and report",
    )
    args = parser.parse_args(argv)

    if args.list:
        for c in CASES:
            print(f"{c.name:28s} {c.summary}")
        return 0
    if torch.__version__.split("+")[0] != REQUIRED_TORCH:
        print(f"error: needs torch=={REQUIRED_TORCH}, found {torch.__version__}", file=sys.stderr)
        return 2
    if args.broken:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for case in BROKEN:
                try:
                    export_case(case, Path(tmp))
                    print(f"{case.name}: exports now (was: {case.summary})")
                except Exception as exc:
                    why = str(exc).splitlines()[0][:300]
                    print(f"{case.name}: still fails: {type(exc).__name__}: {why}")
        return 0
    known = {c.name: c for c in CASES}
    unknown = [n for n in args.cases if n not in known]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    selected = [known[n] for n in args.cases] if args.cases else CASES

    args.out.mkdir(parents=True, exist_ok=True)
    reports, dropped = [], []
    for case in selected:
        try:
            rep = export_case(case, args.out)
        except Exception as exc:
            dropped.append(
                (
                    case.name,
                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:400] if str(exc) else ''}",
                )
            )
            case_dir = args.out / case.name
            if case_dir.exists():
                shutil.rmtree(case_dir)
            print(f"DROPPED {case.name}: {dropped[-1][1]}")
            continue
        reports.append(rep)
        print(
            f"== {case.name} ({'scripted' if case.script else 'traced'}, lengths {case.lengths}),"
            f" {rep['bytes']} bytes"
        )
        print(f"   ops: {rep['ops']}")
        print(f"   sequence ops: {rep['seq_ops'] or 'none'}")
        if "seq_ops_mismatch" in rep:
            print(
                f"   WARNING sequence ops differ from the recorded ones: {rep['seq_ops_mismatch']}"
            )
        print(f"   full_check: {rep['full_check']}")
        for lie in rep["shape_lies"]:
            print(f"   declared shape lies: {lie}")
        for msg in rep["loop_signatures"]:
            print(f"   Loop body signature: {msg}")
        for name, declared, actual in rep["io"]["inputs"]:
            print(f"   in  {name}: declared {declared}, saved {actual}")
        for name, declared, actual in rep["io"]["outputs"]:
            print(f"   out {name}: declared {declared}, PyTorch {actual}")
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(
        f"\n{len(reports)} fixtures written to {args.out}, {total} bytes in the folder;"
        f" {len(dropped)} dropped"
    )
    for name, why in dropped:
        print(f"   dropped {name}: {why}")
    if args.table:
        print()
        print("| case | what the PyTorch code does | sequence ops in the ONNX | lengths |")
        print("|---|---|---|---|")
        by_name = {c.name: c for c in CASES}
        for rep in reports:
            c = by_name[rep["name"]]
            ops = ", ".join(f"{k} x{v}" for k, v in rep["seq_ops"].items()) or "none"
            how = "scripted" if c.script else "traced"
            print(f"| `{c.name}` | {c.summary} ({how}) | {ops} | {c.lengths} |")
    mismatched = [r["name"] for r in reports if "seq_ops_mismatch" in r]
    return 1 if (dropped or mismatched) else 0


if __name__ == "__main__":
    sys.exit(main())
