"""The PyTorch patterns that become test fixtures: one module per pattern, then one table.

Each row of `CASES` is one fixture of tests/fixtures/torch: the module, how it is exported
(scripted, or traced as a static baseline), the inputs of its data sets, and the sequence ops its
export is expected to hold. `BROKEN` lists the modules the exporter cannot export, with why.
tools/export_torch_fixtures.py is the driver that exports them; it needs torch==2.13.0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["BROKEN", "CASES", "Case"]

DYN0 = {0: "N"}  # the first axis is dynamic, named N


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


CASES: list[Case] = [
    Case(
        name="split_sum_traced",
        make=SplitSum,
        script=False,
        inputs={"x": (2, 6)},
        outputs=["y"],
        summary=("`torch.split(x, 2, dim=1)` iterated and summed; traced, so the list is unrolled"),
        lengths="static",
        seq_ops={},
    ),
    Case(
        name="split_sum_scripted",
        make=SplitSum,
        inputs={"x": (2, 6)},
        outputs=["y"],
        dynamic_axes={"x": {1: "W"}},
        alt_inputs={"x": (2, 10)},
        summary=(
            "`torch.split(x, 2, dim=1)`, `zeros_like(parts[0])`, `for p in parts: acc = acc + p`"
        ),
        lengths="dynamic (W/2 pieces)",
        seq_ops={"SequenceAt": 2, "SequenceLength": 1, "SplitToSequence": 1},
    ),
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
    ),
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
    ),
    Case(
        name="chunk_unpack_static",
        make=ChunkUnpack,
        inputs={"x": (2, 3, 9)},
        outputs=["y"],
        summary=("`a, b, c = x.chunk(3, dim=-1)` unpacked; `torch.cat([c, sigmoid(a), b*b], -1)`"),
        lengths="static",
        seq_ops={},
    ),
    Case(
        name="unbind_stack",
        make=UnbindStack,
        inputs={"x": (3, 4)},
        outputs=["y"],
        dynamic_axes={"x": DYN0},
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
    ),
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
    ),
    Case(
        name="unbind_stack_traced",
        make=UnbindStack,
        script=False,
        inputs={"x": (3, 4)},
        outputs=["y"],
        summary="same as `unbind_stack`, traced",
        lengths="static",
        seq_ops={},
    ),
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
    ),
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
    ),
    Case(
        name="loop_append_dynamic",
        make=LoopAppendDynamic,
        inputs={"x": (4, 3)},
        outputs=["stacked", "cat"],
        dynamic_axes={"x": DYN0},
        alt_inputs={"x": (7, 3)},
        summary=(
            "`for i in range(x.size(0))`: running sum, `outs.append(running)`; stack and "
            "cat of outs"
        ),
        lengths="dynamic trip count (N)",
        seq_ops={"ConcatFromSequence": 2, "SequenceEmpty": 1, "SequenceInsert": 1},
    ),
    Case(
        name="len_neg_index",
        make=LenNegIndex,
        inputs={"x": (5, 3)},
        outputs=["last_scaled", "first_plus_second_last"],
        dynamic_axes={"x": DYN0},
        alt_inputs={"x": (8, 3)},
        summary=(
            "`xs = x.split(2, 0)`; `xs[-1] * len(xs)`, `xs[0] + xs[-2]` (last chunk "
            "smaller when N is odd)"
        ),
        lengths="dynamic (ceil(N/2))",
        seq_ops={"SequenceAt": 3, "SequenceLength": 1, "SplitToSequence": 1},
    ),
    Case(
        name="len_of_split",
        make=LenOfSplit,
        inputs={"x": (7, 2)},
        outputs=["n", "last_sum"],
        dynamic_axes={"x": DYN0},
        alt_inputs={"x": (9, 2)},
        summary="`torch.tensor(len(x.split(3, 0)))` and `xs[-1].sum(0)`",
        lengths="dynamic (ceil(N/3))",
        seq_ops={"SequenceAt": 1, "SequenceLength": 1, "SplitToSequence": 1},
    ),
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
    ),
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
    ),
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
    ),
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
    ),
    Case(
        name="rnn_unbind_loop",
        make=RnnUnbindLoop,
        inputs={"x": (5, 2, 4)},
        outputs=["outputs", "h_last"],
        dynamic_axes={"x": {0: "T", 1: "B"}},
        alt_inputs={"x": (3, 1, 4)},
        summary=(
            "`for x_t in x.unbind(0): h = tanh(ih(x_t) + hh(h))`; `outs.append(h)`; `stack(outs)`"
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
    ),
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
    ),
    Case(
        name="return_list",
        make=ReturnList,
        inputs={"x": (5, 3)},
        outputs=["ys"],
        dynamic_axes={"x": DYN0},
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
    ),
    Case(
        name="list_insert_pop",
        make=ListInsertPop,
        inputs={"x": (3, 4)},
        outputs=["stacked", "popped"],
        dynamic_axes={"x": DYN0},
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
    ),
    Case(
        name="list_in_if",
        make=ListInIf,
        inputs={"x": (4, 3)},
        outputs=["y"],
        dynamic_axes={"x": DYN0},
        alt_inputs={"x": (6, 3)},
        summary=(
            "`xs = list(x.chunk(2, 0))`; `if x.sum() > 0: xs.append(x*2) else: "
            "xs.append(-x)`; `cat(xs)`"
        ),
        lengths="3 elements (chunk sizes dynamic); If with a sequence output",
        # data set 0 takes the then-branch (sum > 0), data set 1 the else-branch.
        prepare=lambda k, ts: [t.abs() if k == 0 else -t.abs() for t in ts],
        seq_ops={"ConcatFromSequence": 1, "SequenceInsert": 2, "SplitToSequence": 1},
    ),
]

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
