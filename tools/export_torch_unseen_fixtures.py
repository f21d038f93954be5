#!/usr/bin/env python3
"""Export list code transcribed from public model code, not used by the other fixture sets, to
measure the tensor forms on programs they were not tuned for.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_unseen_fixtures.py      # all cases, or CASE...

Each module follows the list handling of a public forward (named in its docstring), with small
layers and random weights, scripted and exported by the TorchScript exporter at opset 17 with
the outputs PyTorch computes. Same machinery and layout as `tools/export_torch_fixtures.py`,
written to `tests/fixtures/torch_unseen/<case>/`. `python -m bench.run` times them as a set of
their own, and tests/test_torch_unseen.py checks the lowered models against PyTorch's outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_unseen"


class FpnTopDown(nn.Module):
    """torchvision's FeaturePyramidNetwork: from the coarsest level down, `last_inner =
    inner_lateral + top_down`; `results.insert(0, layer(last_inner))`."""

    def __init__(self) -> None:
        super().__init__()
        self.lateral = nn.Linear(8, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, feats: Tensor) -> Tensor:
        levels = list(feats.unbind(0))
        last = self.lateral(levels[-1])
        results = [self.out(last)]
        for idx in range(len(levels) - 2, -1, -1):
            last = self.lateral(levels[idx]) + 0.5 * last
            results.insert(0, self.out(last))
        return torch.stack(results)


class HrnetBranches(nn.Module):
    """HRNet's HighResolutionModule: `for i in range(self.num_branches): x[i] =
    self.branches[i](x[i])` (one shared branch here: the list is assigned in place)."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        xs = list(x.unbind(0))
        for i in range(len(xs)):
            xs[i] = torch.relu(self.branch(xs[i])) + xs[i]
        return torch.stack(xs)


class SpinnShiftReduce(nn.Module):
    """SPINN (pytorch/examples snli): a buffer popped by SHIFT onto a stack; REDUCE pops two,
    composes them and pushes the result."""

    def __init__(self) -> None:
        super().__init__()
        self.compose = nn.Linear(16, 8)

    def forward(self, tokens: Tensor, transitions: Tensor) -> Tensor:
        buffer = list(tokens.unbind(0))
        stack: list[Tensor] = []
        for t in range(transitions.size(0)):
            if bool(transitions[t] > 0) and len(stack) >= 2:
                right = stack.pop()
                left = stack.pop()
                stack.append(torch.tanh(self.compose(torch.cat([left, right], -1))))
            elif len(buffer) > 0:
                stack.append(buffer.pop(0))
        return torch.stack(stack)


class WhileLenSample(nn.Module):
    """char-rnn style sampling (karpathy/char-rnn, min-char-rnn): `while len(out) < n:` one
    recurrent step, append."""

    def __init__(self) -> None:
        super().__init__()
        self.wx = nn.Linear(8, 8)
        self.wh = nn.Linear(8, 8)

    def forward(self, x: Tensor, h: Tensor, n: Tensor) -> Tensor:
        out: list[Tensor] = []
        count = int(n)
        while len(out) < count:
            h = torch.tanh(self.wx(x) + self.wh(h))
            out.append(h)
        return torch.cat(out)


class KvCacheSteps(nn.Module):
    """GPT-2's past_key_values (HF transformers): per layer `key = torch.cat((past_key,
    key), dim=-2)`, the caches kept in a list indexed by layer, for a few decoding steps."""

    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)

    def forward(self, past: Tensor, x: Tensor) -> Tensor:
        steps = 3
        keys = list(past.unbind(0))
        h = x
        for _ in range(steps):
            for layer in range(len(keys)):
                keys[layer] = torch.cat([keys[layer].reshape(-1, 8), self.k(h)], 0)
                scores = torch.softmax((keys[layer] * h).sum(-1), 0)
                h = h + (scores.unsqueeze(-1) * keys[layer]).sum(0, keepdim=True)
        return torch.stack(keys)


class BeamReorder(nn.Module):
    """HF `_reorder_cache` and fairseq's `reorder_incremental_state`: every layer's cache
    re-indexed by the beams kept, `tuple(past.index_select(0, beam_idx) for past in cache)`."""

    def forward(self, cache: Tensor, scores: Tensor) -> Tensor:
        layers = list(cache.unbind(0))
        beam_idx = scores.topk(scores.size(0)).indices
        reordered: list[Tensor] = []
        for past in layers:
            reordered.append(past.index_select(0, beam_idx))
        return torch.stack(reordered)


class DenseBlock(nn.Module):
    """torchvision's DenseNet `_DenseBlock`: `features = [init]`; each layer reads
    `torch.cat(features, 1)` and appends its output."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4 + 4 * i, 4) for i in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.layers:
            features.append(torch.relu(layer(torch.cat(features, 1))))
        return torch.cat(features, 1)


class UnetSkips(nn.Module):
    """U-Net decoders (milesial/Pytorch-UNet, diffusers' UNet2DModel): skips appended on the
    way down, `skip = skips.pop()` on the way up."""

    def forward(self, x: Tensor) -> Tensor:
        skips: list[Tensor] = []
        h = x
        for _ in range(3):
            skips.append(h)
            h = torch.relu(h[:, ::2] - 0.1)
        while len(skips) > 0:
            skip = skips.pop()
            h = skip + h.repeat_interleave(2, 1)[:, : skip.size(1)]
        return h


class TransfoXlMems(nn.Module):
    """Transformer-XL `_update_mems`: per layer `cat = torch.cat([mems[i], hids[i]], dim=0)`,
    `new_mems.append(cat[beg_idx:end_idx])`."""

    def forward(self, mems: Tensor, hids: Tensor) -> Tensor:
        mem_len = 4
        old = list(mems.unbind(0))
        new = list(hids.unbind(0))
        new_mems: list[Tensor] = []
        for i in range(len(new)):
            cat = torch.cat([old[i], new[i]], 0)
            end = cat.size(0)
            new_mems.append(cat[max(0, end - mem_len) : end])
        return torch.stack(new_mems)


class StackedGru(nn.Module):
    """OpenNMT's StackedGRU: `h_1 = []`; per layer `h_1_i = layer(input, hidden[i])` (a
    tanh cell here), `h_1 += [h_1_i]`; `torch.stack(h_1)`."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(12, 6) for _ in range(3)])

    def forward(self, x: Tensor, hidden: Tensor) -> Tensor:
        h_1: list[Tensor] = []
        inp = x
        for i, layer in enumerate(self.layers):
            h = torch.tanh(layer(torch.cat([inp, hidden[i]], 1)))
            inp = h
            h_1 += [h]
        return torch.stack(h_1)


class NmsKeep(nn.Module):
    """py-faster-rcnn's `nms` (and Detectron's): `while order.numel() > 0: keep.append(i)`,
    drop the boxes that overlap box i."""

    def forward(self, boxes: Tensor, scores: Tensor) -> Tensor:
        order = scores.argsort(descending=True)
        keep: list[Tensor] = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i)
            rest = order[1:]
            lo = torch.maximum(boxes[i, :2], boxes[rest, :2])
            hi = torch.minimum(boxes[i, 2:], boxes[rest, 2:])
            inter = (hi - lo).clamp(min=0).prod(1)
            area = (boxes[:, 2:] - boxes[:, :2]).prod(1)
            iou = inter / (area[i] + area[rest] - inter)
            order = rest[iou <= 0.3]
        return torch.stack(keep)


class ViterbiBacktrace(nn.Module):
    """PyTorch's BiLSTM-CRF tutorial `_viterbi_decode`: backpointers appended per step, then
    `for bptrs_t in reversed(backpointers): best = bptrs_t[best]; best_path.append(best)`,
    `best_path.reverse()`."""

    def forward(self, feats: Tensor, transitions: Tensor) -> Tensor:
        backpointers: list[Tensor] = []
        forward_var = feats[0]
        for t in range(1, feats.size(0)):
            scores = forward_var.unsqueeze(0) + transitions
            best = scores.argmax(1)
            backpointers.append(best)
            forward_var = scores.max(1).values + feats[t]
        best_id = forward_var.argmax()
        best_path = [best_id]
        for k in range(len(backpointers) - 1, -1, -1):
            best_id = backpointers[k][best_id]
            best_path.insert(0, best_id)  # the tutorial appends, then reverses the list
        return torch.stack(best_path)


class MsDeformLevels(nn.Module):
    """Deformable DETR's `ms_deform_attn_core_pytorch`: `value_list = value.split([H_ * W_
    for H_, W_ in value_spatial_shapes], dim=1)`, one sampled value per level, stacked."""

    def forward(self, value: Tensor, shapes: Tensor) -> Tensor:
        sizes: list[int] = (shapes[:, 0] * shapes[:, 1]).tolist()
        value_list = value.split(sizes, dim=1)
        sampled: list[Tensor] = []
        for level, v in enumerate(value_list):
            sampled.append(v.mean(1) * float(level + 1))
        return torch.stack(sampled, -2)


class DropFinished(nn.Module):
    """Beam search bookkeeping (ESPnet's `end_detect`, fairseq's finalize): walk the
    hypotheses from the end and `del hyps[k]` where the score fell below a threshold."""

    def forward(self, hyps: Tensor, scores: Tensor) -> Tensor:
        kept = list(hyps.unbind(0))
        for k in range(len(kept) - 1, -1, -1):
            if bool(scores[k] < 0.0):
                del kept[k]
        kept.append(hyps.sum(0))
        return torch.stack(kept)


class DetrIntermediate(nn.Module):
    """DETR's TransformerDecoder with `return_intermediate`: each layer's normalized output
    appended to `intermediate`; `torch.stack(intermediate)`; the last entry replaced by the
    final norm (`intermediate.pop(); intermediate.append(output)`)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.norm = nn.LayerNorm(8)

    def forward(self, tgt: Tensor) -> Tensor:
        output = tgt
        intermediate: list[Tensor] = []
        for layer in self.layers:
            output = torch.relu(layer(output)) + output
            intermediate.append(self.norm(output))
        output = self.norm(output) * 2.0
        intermediate.pop()
        intermediate.append(output)
        return torch.stack(intermediate)


class SlidingChunks(nn.Module):
    """Longformer-style chunking: `chunks = [x[i:i + w] for i in range(0, T - w + 1, step)]`,
    a score per chunk, stacked."""

    def forward(self, x: Tensor) -> Tensor:
        w = 4
        chunks: list[Tensor] = []
        for i in range(0, x.size(0) - w + 1, 2):
            chunks.append(x[i : i + w])
        return torch.stack([c.softmax(0).sum(1) for c in chunks])


def _transitions(k: int, ts: list[Tensor]) -> list[Tensor]:
    pattern = [0, 0, 1, 0, 1, 0, 0, 1, 1] if k == 0 else [0, 0, 1, 0, 0, 1]
    return [ts[0], torch.tensor(pattern)]


def _count(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0], ts[1], torch.tensor(5 if k == 0 else 2)]


def _shapes(k: int, ts: list[Tensor]) -> list[Tensor]:
    levels = [[2, 3], [1, 2], [1, 1]] if k == 0 else [[2, 2], [1, 3]]
    shapes = torch.tensor(levels)
    total = int((shapes[:, 0] * shapes[:, 1]).sum())
    return [ts[0][:, :total], shapes]


def _boxes(k: int, ts: list[Tensor]) -> list[Tensor]:
    xy = ts[0][:, :2].abs() * 4
    return [torch.cat([xy, xy + 1 + ts[0][:, 2:].abs() * 3], 1), ts[1]]


SEQ = {0: "T"}
CASES = [
    Case("fpn_topdown_insert", FpnTopDown, {"feats": (4, 2, 8)}, ["y"], FpnTopDown.__doc__ or "",
         dynamic_axes={"feats": {0: "L"}}, alt_inputs={"feats": (2, 2, 8)}),
    Case("hrnet_branch_assign", HrnetBranches, {"x": (3, 2, 6)}, ["y"],
         HrnetBranches.__doc__ or "", dynamic_axes={"x": {0: "B"}}, alt_inputs={"x": (5, 2, 6)}),
    Case("spinn_shift_reduce", SpinnShiftReduce, {"tokens": (5, 8), "transitions": (9,)}, ["y"],
         SpinnShiftReduce.__doc__ or "", dynamic_axes={"tokens": SEQ, "transitions": SEQ},
         alt_inputs={"tokens": (4, 8), "transitions": (6,)}, prepare=_transitions),
    Case("while_len_sample", WhileLenSample, {"x": (1, 8), "h": (1, 8), "n": (1,)}, ["y"],
         WhileLenSample.__doc__ or "", alt_inputs={"x": (1, 8), "h": (1, 8), "n": (1,)},
         prepare=_count),
    Case("kv_cache_steps", KvCacheSteps, {"past": (3, 2, 8), "x": (1, 8)}, ["keys"],
         KvCacheSteps.__doc__ or "", dynamic_axes={"past": {0: "L", 1: "P"}},
         alt_inputs={"past": (2, 1, 8), "x": (1, 8)}),
    Case("beam_reorder_cache", BeamReorder, {"cache": (3, 4, 6), "scores": (4,)}, ["y"],
         BeamReorder.__doc__ or "", dynamic_axes={"cache": {0: "L", 1: "K"}, "scores": {0: "K"}},
         alt_inputs={"cache": (2, 3, 6), "scores": (3,)}),
    Case("densenet_block", DenseBlock, {"x": (2, 4)}, ["y"], DenseBlock.__doc__ or "",
         dynamic_axes={"x": {0: "B"}}, alt_inputs={"x": (3, 4)}),
    Case("unet_skips", UnetSkips, {"x": (2, 16)}, ["y"], UnetSkips.__doc__ or "",
         dynamic_axes={"x": {0: "B", 1: "W"}}, alt_inputs={"x": (1, 12)}),
    Case("transfo_xl_mems", TransfoXlMems, {"mems": (3, 2, 5), "hids": (3, 3, 5)}, ["y"],
         TransfoXlMems.__doc__ or "", dynamic_axes={"mems": {0: "L", 1: "M"}, "hids": {0: "L"}},
         alt_inputs={"mems": (2, 5, 5), "hids": (2, 3, 5)}),
    Case("stacked_gru", StackedGru, {"x": (2, 6), "hidden": (3, 2, 6)}, ["y"],
         StackedGru.__doc__ or "", dynamic_axes={"x": {0: "B"}, "hidden": {1: "B"}},
         alt_inputs={"x": (4, 6), "hidden": (3, 4, 6)}),
    Case("nms_keep", NmsKeep, {"boxes": (7, 4), "scores": (7,)}, ["keep"], NmsKeep.__doc__ or "",
         dynamic_axes={"boxes": {0: "N"}, "scores": {0: "N"}},
         alt_inputs={"boxes": (4, 4), "scores": (4,)}, prepare=_boxes),
    Case("viterbi_backtrace", ViterbiBacktrace, {"feats": (6, 4), "transitions": (4, 4)},
         ["path"], ViterbiBacktrace.__doc__ or "", dynamic_axes={"feats": SEQ},
         alt_inputs={"feats": (3, 4), "transitions": (4, 4)}),
    Case("msdeform_levels", MsDeformLevels, {"value": (2, 12, 4), "shapes": (3, 2)}, ["y"],
         MsDeformLevels.__doc__ or "", dynamic_axes={"value": {1: "S"}, "shapes": {0: "L"}},
         alt_inputs={"value": (2, 12, 4), "shapes": (2, 2)}, prepare=_shapes),
    Case("drop_finished", DropFinished, {"hyps": (5, 3), "scores": (5,)}, ["y"],
         DropFinished.__doc__ or "", dynamic_axes={"hyps": {0: "K"}, "scores": {0: "K"}},
         alt_inputs={"hyps": (3, 3), "scores": (3,)}),
    Case("detr_intermediate", DetrIntermediate, {"tgt": (5, 8)}, ["y"],
         DetrIntermediate.__doc__ or "", dynamic_axes={"tgt": {0: "Q"}},
         alt_inputs={"tgt": (2, 8)}),
    Case("sliding_chunks", SlidingChunks, {"x": (10, 3)}, ["y"], SlidingChunks.__doc__ or "",
         dynamic_axes={"x": SEQ}, alt_inputs={"x": (7, 3)}),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
