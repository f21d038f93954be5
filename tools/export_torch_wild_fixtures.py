#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other fixture set used, written
after the list forms were frozen, to measure what still keeps a list (or breaks equivalence).

    /work/torchvenv/bin/python tools/export_torch_wild_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_wild.py runs the
exports under onnxruntime and compares them with what PyTorch computed). Each module follows the
list handling of a public forward named in its docstring, with small layers and random weights,
scripted and exported by the TorchScript exporter (`dynamo=False`) at opset 17. Written to
`tests/fixtures/torch_wild/<case>/`: `model.onnx` and `test_data_set_<k>/input_<i>.pb`,
`output_<i>.pb` (the layout of tools/export_torch_fixtures.py), one data set per input maker; the
later data sets are edge cases (one element, a list left empty, a level with nothing kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from scripted_fixtures import Case, Maker, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_wild"


class AnchorGrid(nn.Module):
    """torchvision models/detection/anchor_utils.py `AnchorGenerator.grid_anchors(grid_sizes,
    strides)`: per level `shifts_x = torch.arange(0, grid_width) * stride_width`, a meshgrid,
    `anchors.append((shifts.view(-1, 1, 4) + base_anchors.view(1, -1, 4)).reshape(-1, 4))`;
    the levels' anchors concatenated (here the grid sizes and strides are tensors, one row a
    level, and the level's cell anchors are read by its index)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cell_anchors", torch.tensor([
            [[-8.0, -8.0, 8.0, 8.0], [-16.0, -8.0, 16.0, 8.0]],
            [[-16.0, -16.0, 16.0, 16.0], [-32.0, -16.0, 32.0, 16.0]],
            [[-32.0, -32.0, 32.0, 32.0], [-64.0, -32.0, 64.0, 32.0]],
        ]))  # fmt: skip

    def forward(self, grid_sizes: Tensor, strides: Tensor) -> Tensor:
        anchors: list[Tensor] = []
        for i in range(grid_sizes.size(0)):
            gh, gw = int(grid_sizes[i, 0]), int(grid_sizes[i, 1])
            shifts_x = torch.arange(0, gw) * strides[i, 1]
            shifts_y = torch.arange(0, gh) * strides[i, 0]
            sy, sx = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
            sx, sy = sx.reshape(-1), sy.reshape(-1)
            shifts = torch.stack((sx, sy, sx, sy), dim=1).float()
            base = self.cell_anchors[i]
            anchors.append((shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
        return torch.cat(anchors)


class RoiLevels(nn.Module):
    """torchvision ops/poolers.py `MultiScaleRoIAlign`: `_convert_to_roi_format` (the boxes of
    each image, a list, concatenated beside `torch.full_like(b[:, :1], i)`), `LevelMapper`
    (`floor(k0 + log2(sqrt(area) / s0))`, clamped), then per level `idx_in_level =
    torch.where(levels == level)[0]` and `result[idx_in_level] = pooled` (a box's centre read
    from its level's map instead of roi_align)."""

    def forward(self, boxes: Tensor, ptr: Tensor, f0: Tensor, f1: Tensor) -> Tensor:
        sizes: list[int] = (ptr[1:] - ptr[:-1]).tolist()  # boxes per image, from offsets
        per_image = boxes.split(sizes, 0)
        concat_boxes = torch.cat(per_image, 0)
        ids = torch.cat([torch.full_like(b[:, :1], i) for i, b in enumerate(per_image)], 0)
        rois = torch.cat([ids, concat_boxes], 1)
        area = (rois[:, 3] - rois[:, 1]) * (rois[:, 4] - rois[:, 2])
        levels = torch.floor(4.0 + torch.log2(torch.sqrt(area) / 8.0 + 1e-6))
        levels = torch.clamp(levels, min=4.0, max=5.0).long() - 4
        feats = [f0, f1]
        result = torch.zeros(rois.size(0), f0.size(1))
        for level in range(len(feats)):
            feat = feats[level]
            idx = torch.where(levels == level)[0]
            r = rois[idx]
            scale = feat.size(-1) / 32.0
            cx = ((r[:, 1] + r[:, 3]) * 0.5 * scale).long().clamp(0, feat.size(-1) - 1)
            cy = ((r[:, 2] + r[:, 4]) * 0.5 * scale).long().clamp(0, feat.size(-2) - 1)
            result[idx] = feat[r[:, 0].long(), :, cy, cx]
        return result


class ChildSumTreeLstm(nn.Module):
    """dasguptar/treelstm.pytorch `ChildSumTreeLSTM.node_forward`, run over the nodes in post
    order (TorchScript has no recursion): each node's children's states are gathered from the
    list of states made so far (`parent[j] == i`), summed (a row of zeros first, all a leaf
    has), gated; the states stacked."""

    def __init__(self) -> None:
        super().__init__()
        self.ioux = nn.Linear(4, 9)
        self.iouh = nn.Linear(3, 9)
        self.fx = nn.Linear(4, 3)
        self.fh = nn.Linear(3, 3)

    def forward(self, x: Tensor, parent: Tensor) -> Tensor:
        hs: list[Tensor] = []
        cs: list[Tensor] = []
        for i in range(x.size(0)):
            # a row of zeros first: a leaf's sum, and nothing added to an inner node's
            child_h: list[Tensor] = [torch.zeros(1, 3)]
            child_c: list[Tensor] = [torch.zeros(1, 3)]
            for j in range(i):
                if int(parent[j]) == i:
                    child_h.append(hs[j])
                    child_c.append(cs[j])
            xi = x[i : i + 1]
            hh = torch.cat(child_h, 0)
            cc = torch.cat(child_c, 0)
            h_sum = hh.sum(0, keepdim=True)
            iou = self.ioux(xi) + self.iouh(h_sum)
            i_g, o_g, u_g = torch.split(iou, 3, 1)
            f = torch.sigmoid(self.fh(hh) + self.fx(xi))
            c = torch.sigmoid(i_g) * torch.tanh(u_g) + (f * cc).sum(0, keepdim=True)
            hs.append(torch.sigmoid(o_g) * torch.tanh(c))
            cs.append(c)
        return torch.cat(hs, 0)


class BeamHyps(nn.Module):
    """A beam search's hypotheses as a list (pytorch-seq2seq's TopKDecoder, OpenNMT's Beam):
    each step the beams' scores plus the next token's log-probabilities, a flat `topk`, the
    beam each winner came from, `new_hyps.append(torch.cat([hyps[b], tok]))`; at the end the
    hypotheses `sorted` by score (argsort, read back in that order) and the best one's last
    token (`hyps[0][-1]`)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 5)
        self.out = nn.Linear(5, 7)

    def forward(self, start: Tensor, scores: Tensor) -> tuple[Tensor, Tensor]:
        k = start.size(0)
        hyps: list[Tensor] = []
        for b in range(k):
            hyps.append(start[b : b + 1])
        for _ in range(3):
            last = torch.stack([h[-1] for h in hyps])
            logp = torch.log_softmax(self.out(self.emb(last)), -1)
            cand = (scores.unsqueeze(1) + logp).reshape(-1)
            scores, idx = cand.topk(k)
            beam = torch.div(idx, 7, rounding_mode="floor")
            tok = idx % 7
            new_hyps: list[Tensor] = []
            for j in range(k):
                new_hyps.append(torch.cat([hyps[int(beam[j])], tok[j : j + 1]]))
            hyps = new_hyps
        order = scores.argsort(descending=True)
        ranked = [hyps[int(i)] for i in order]
        return torch.stack(ranked), ranked[0][-1]


class RnntGreedy(nn.Module):
    """NeMo's `GreedyRNNTInfer._greedy_decode` (and torchaudio's RNN-T greedy search): per
    encoder frame, up to `max_symbols` joint steps; the argmax token is appended to the
    hypothesis unless it is blank, which moves to the next frame; the prediction network's
    state advances only on a token."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 6)
        self.pred = nn.Linear(6, 6)
        self.joint = nn.Linear(6, 5)

    def forward(self, enc: Tensor) -> Tensor:
        g = torch.zeros(1, 6)
        hyp: list[Tensor] = [torch.zeros((), dtype=torch.long)]
        for t in range(enc.size(0)):
            symbols = 0
            not_blank = True
            while not_blank and symbols < 3:
                logits = self.joint(torch.tanh(enc[t : t + 1] + g))
                k = logits.argmax(-1)[0]
                if bool(k == 0):
                    not_blank = False
                else:
                    hyp.append(k)
                    g = torch.tanh(self.pred(self.embed(k).unsqueeze(0)) + g)
                    symbols += 1
        return torch.stack(hyp)


class PointnetMsg(nn.Module):
    """yanx27/Pointnet_Pointnet2_pytorch `PointNetSetAbstractionMsg.forward`: for each radius,
    `query_ball_point` (distances, `group_idx[sqrdists > radius ** 2] = N`, sorted, the first
    `nsample` kept, the empty slots filled with the first), grouped points through a shared
    MLP, max over the group; `new_points_list.append(...)`, `torch.cat(new_points_list, -1)`."""

    def __init__(self) -> None:
        super().__init__()
        self.radius_list = [0.4, 0.8]
        self.nsample_list = [2, 4]
        self.mlps = nn.ModuleList([nn.Linear(3, 5), nn.Linear(3, 4)])

    def forward(self, xyz: Tensor) -> Tensor:
        n = xyz.size(1)
        new_xyz = xyz[:, :3]
        new_points_list: list[Tensor] = []
        for i, mlp in enumerate(self.mlps):
            radius = self.radius_list[i]
            k = self.nsample_list[i]
            sqrdists = ((new_xyz.unsqueeze(2) - xyz.unsqueeze(1)) ** 2).sum(-1)
            group_idx = torch.arange(n).view(1, 1, n).repeat(xyz.size(0), 3, 1)
            group_idx = torch.where(sqrdists > radius**2, n, group_idx)
            group_idx = group_idx.sort(dim=-1)[0][:, :, :k]
            group_first = group_idx[:, :, 0:1].repeat(1, 1, k)
            mask = group_idx == n
            group_idx = torch.where(mask, group_first, group_idx)
            grouped = torch.stack([xyz[b][group_idx[b]] for b in range(xyz.size(0))])
            grouped = grouped - new_xyz.unsqueeze(2)
            new_points_list.append(torch.relu(mlp(grouped)).max(2)[0])
        return torch.cat(new_points_list, -1)


class PygUnbatch(nn.Module):
    """torch_geometric utils/unbatch.py `unbatch(src, batch)`: `sizes =
    degree(batch).tolist()`, `src.split(sizes)`; per graph the nodes centred on the graph's
    mean (GraphNorm-like) and a max readout; the nodes concatenated back, the readouts
    stacked."""

    def forward(self, x: Tensor, batch: Tensor) -> tuple[Tensor, Tensor]:
        num = int(batch.max()) + 1
        deg = (batch.unsqueeze(1) == torch.arange(num)).sum(0)
        sizes: list[int] = deg.tolist()
        graphs = x.split(sizes, 0)
        centred: list[Tensor] = []
        readout: list[Tensor] = []
        for g in graphs:
            centred.append(g - g.mean(0, keepdim=True))
            readout.append(g.max(0)[0])
        return torch.cat(centred, 0), torch.stack(readout)


class PackSequences(nn.Module):
    """`pack_padded_sequence` written with lists (torch/nn/utils/rnn.py's semantics, as older
    pure-Python packers did): for each time step the number of sequences still running
    (`batch_sizes.append(bs)`) and their rows (`data.append(x[t, :bs])`), stopping at the first
    step no sequence reaches; `torch.cat(data)`, `torch.stack(batch_sizes)`."""

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        data: list[Tensor] = []
        batch_sizes: list[Tensor] = []
        for t in range(x.size(0)):
            bs = (lengths > t).sum()
            if bool(bs == 0):
                break
            data.append(x[t, : int(bs)])
            batch_sizes.append(bs)
        return torch.cat(data, 0), torch.stack(batch_sizes)


class SwinWindows(nn.Module):
    """Swin Transformer's window attention written with lists (as in simple reimplementations
    of microsoft/Swin-Transformer `window_partition` / `window_reverse`): windows cut with
    nested loops and appended, self-attention inside each window, each row of windows
    concatenated along the width (`outs[r * nw + c]`), the rows along the height."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 12)

    def forward(self, x: Tensor) -> Tensor:
        ws = 2
        nh, nw = x.size(0) // ws, x.size(1) // ws
        windows: list[Tensor] = []
        for i in range(nh):
            for j in range(nw):
                windows.append(x[i * ws : (i + 1) * ws, j * ws : (j + 1) * ws].reshape(-1, 4))
        outs: list[Tensor] = []
        for w in windows:
            q, k, v = self.qkv(w).chunk(3, -1)
            attn = torch.softmax(q @ k.transpose(0, 1) * 0.5, -1)
            outs.append(attn @ v)
        rows: list[Tensor] = []
        for r in range(nh):
            rows.append(torch.cat([outs[r * nw + c].reshape(ws, ws, 4) for c in range(nw)], 1))
        return torch.cat(rows, 0)


class Res2NetSplit(nn.Module):
    """Res2Net (Res2Net/Res2Net-PretrainedModels res2net.py `Bottle2neck.forward`): `spx =
    torch.split(out, width, 1)`; `sp = spx[i]` then `sp = sp + spx[i]`, a 3x3 conv each, `out =
    torch.cat((out, sp), 1)`; the last split passed through, `torch.cat((out, spx[nums]), 1)`."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(2, 2, 3, padding=1) for _ in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        spx = torch.split(x, 2, 1)
        sp = spx[0]
        out = sp
        for i, conv in enumerate(self.convs):
            if i == 0:  # noqa: SIM108 - as Res2Net writes it
                sp = spx[i]
            else:
                sp = sp + spx[i]
            sp = torch.relu(conv(sp))
            if i == 0:  # noqa: SIM108
                out = sp
            else:
                out = torch.cat((out, sp), 1)
        return torch.cat((out, spx[-1]), 1)


class ScalarMix(nn.Module):
    """allenai/allennlp modules/scalar_mix.py `ScalarMix.forward`: `normed_weights =
    torch.split(softmax(scalar_parameters), 1)`, `pieces.append(weight * tensor)` over
    `zip(normed_weights, tensor_list)` (zip stops at the shorter list), `gamma * sum(pieces)`."""

    def __init__(self) -> None:
        super().__init__()
        self.scalar_parameters = nn.Parameter(torch.randn(4))
        self.gamma = nn.Parameter(torch.tensor(1.5))

    def forward(self, layers: Tensor) -> Tensor:
        tensors = list(layers.unbind(0))
        normed = torch.split(torch.softmax(self.scalar_parameters, 0), 1)
        pieces: list[Tensor] = []
        for weight, tensor in zip(normed, tensors):
            pieces.append(weight * tensor)
        total = pieces[0]
        for k in range(1, len(pieces)):
            total = total + pieces[k]
        return self.gamma * total


class RetinaLevels(nn.Module):
    """torchvision models/detection/retinanet.py `postprocess_detections`: the head outputs
    split per level (`split_with_sizes` by the anchors per level); per level `keep_idxs =
    scores > score_thresh`, `num_topk = min(topk_candidates, topk_idxs.size(0))`, `topk`,
    the boxes gathered; `image_boxes.append(...)`, `image_scores.append(...)`, concatenated."""

    def forward(self, logits: Tensor, boxes: Tensor, grid_sizes: Tensor) -> tuple[Tensor, Tensor]:
        sizes: list[int] = (grid_sizes[:, 0] * grid_sizes[:, 1]).tolist()  # one anchor a cell
        logits_per_level = logits.split(sizes)
        boxes_per_level = boxes.split(sizes)
        image_boxes: list[Tensor] = []
        image_scores: list[Tensor] = []
        for level in range(len(logits_per_level)):
            scores = torch.sigmoid(logits_per_level[level]).flatten()
            keep = scores > 0.5
            scores = scores[keep]
            topk_idxs = torch.where(keep)[0]
            num_topk = min(3, topk_idxs.size(0))
            scores, idxs = scores.topk(num_topk)
            anchor_idxs = torch.div(topk_idxs[idxs], 2, rounding_mode="floor")
            image_boxes.append(boxes_per_level[level][anchor_idxs])
            image_scores.append(scores)
        return torch.cat(image_boxes, 0), torch.cat(image_scores, 0)


class MoeDispatch(nn.Module):
    """Mixture-of-experts dispatch by sorting (fairseq's MoE layer, megablocks, Mixtral-style
    experts): tokens sorted by their top-1 expert, `x.split(counts.tolist())`, the i-th chunk
    through the i-th expert (`expert_outputs.append(expert(chunks[i]))`), concatenated and
    scattered back to the tokens' order, scaled by the router's probability."""

    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(4, 3)
        self.experts = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        probs = torch.softmax(self.router(x), -1)
        weight, expert = probs.max(-1)
        order = expert.argsort()
        counts = (expert.unsqueeze(1) == torch.arange(3)).sum(0)
        sizes: list[int] = counts.tolist()
        chunks = x[order].split(sizes, 0)
        outs: list[Tensor] = []
        for i, layer in enumerate(self.experts):
            outs.append(layer(chunks[i]))
        y = torch.zeros_like(x)
        y[order] = torch.cat(outs, 0)
        return y * weight.unsqueeze(-1)


class EditNegative(nn.Module):
    """List editing at positions counted from the end, as cache and hypothesis bookkeeping writes
    it (fairseq's `incremental_state` lists, HF's `past_key_values` tuples rebuilt): the last
    entry replaced, the one before it removed (`del xs[-2]`), a new entry put before the last
    (`xs.insert(-1, ...)`) and one taken out from the end (`xs.pop(-2)`). The replacement is
    written `xs[len(xs) - 1] = ...`: the exporter writes `xs[-1] = v` as an erase at -1 and an
    insert at -1, which puts v before the last entry (PyTorch puts it last)."""

    def forward(self, x: Tensor) -> Tensor:
        xs = list(x.unbind(0))
        xs[len(xs) - 1] = xs[-1] * 2.0
        del xs[-2]
        xs.insert(-1, x.sum(0))
        popped = xs.pop(-2)
        xs.append(popped - 1.0)
        return torch.stack(xs)


class DetectionsPerImage(nn.Module):
    """torchvision models/detection/roi_heads.py `postprocess_detections`: `pred_boxes_list =
    pred_boxes.split(boxes_per_image, 0)`, per image the boxes clipped to the image
    (`box_ops.clip_boxes_to_image`) and the small ones dropped (`remove_small_boxes`),
    `all_boxes.append(boxes)`; the list is what the model returns (one tensor per image)."""

    def forward(self, boxes: Tensor, ptr: Tensor, sizes: Tensor) -> list[Tensor]:
        per_image: list[int] = (ptr[1:] - ptr[:-1]).tolist()
        pred_boxes_list = boxes.split(per_image, 0)
        all_boxes: list[Tensor] = []
        for i, b in enumerate(pred_boxes_list):
            h, w = sizes[i, 0], sizes[i, 1]
            x = b[:, 0::2].clamp(min=0).minimum(w)
            y = b[:, 1::2].clamp(min=0).minimum(h)
            clipped = torch.stack((x[:, 0], y[:, 0], x[:, 1], y[:, 1]), 1)
            ws, hs = clipped[:, 2] - clipped[:, 0], clipped[:, 3] - clipped[:, 1]
            keep = torch.where((ws >= 1.0) & (hs >= 1.0))[0]
            all_boxes.append(clipped[keep])
        return all_boxes


class TokenLengths(nn.Module):
    """Greedy decoding with the lengths kept as a Python list of ints (fairseq's and OpenNMT's
    `finalized` bookkeeping, HF's `sequence_lengths`): per hypothesis the first step whose token
    is EOS, `lengths.append(int(...))`; `torch.tensor(lengths)` scores the hypotheses."""

    def forward(self, tokens: Tensor, scores: Tensor) -> Tensor:
        lengths: list[int] = []
        for k in range(tokens.size(0)):
            eos = torch.where(tokens[k] == 2)[0]
            lengths.append(int(eos[0]) + 1 if eos.numel() > 0 else tokens.size(1))
        return scores / torch.tensor(lengths, dtype=torch.float)


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _tree_parents(n: int) -> Tensor:
    """Parents of a post-ordered tree: a random later node for each node but the root."""
    parents = [-1] * n
    gen = torch.Generator().manual_seed(n)
    for j in range(n - 1):
        parents[j] = int(torch.randint(j + 1, n, (1,), generator=gen))
    return torch.tensor(parents)


def _packed(t: int, lengths: list[int], seed: int) -> list[Tensor]:
    return [_randn(t, len(lengths), 3, seed=seed), torch.tensor(lengths)]


def _boxes(counts: list[int], seed: int) -> list[Tensor]:
    n = sum(counts)
    xy = _randn(n, 2, seed=seed).abs() * 10
    wh = 2 + _randn(n, 2, seed=seed + 1).abs() * 12
    return [
        torch.cat([xy, xy + wh], 1),
        torch.tensor([0, *counts]).cumsum(0),
        _randn(len(counts), 3, 8, 8, seed=seed + 2),
        _randn(len(counts), 3, 4, 4, seed=seed + 3),
    ]


def _retina(sizes: list[int], seed: int) -> list[Tensor]:
    a = sum(sizes)
    logits = _randn(a, 2, seed=seed)
    if len(sizes) > 1:
        logits[sizes[0] :] = -5.0  # every level after the first keeps nothing
    return [logits, _randn(a, 4, seed=seed + 1), torch.tensor([[s, 1] for s in sizes])]


def _graphs(sizes: list[int], seed: int) -> list[Tensor]:
    batch = torch.cat([torch.full((s,), g, dtype=torch.long) for g, s in enumerate(sizes)])
    return [_randn(len(batch), 3, seed=seed), batch]


def _enc(t: int) -> Maker:
    return lambda: [_randn(t, 6, seed=t) * 2]


CASES = [
    Case("anchor_grid_levels", AnchorGrid, ["grid_sizes", "strides"], ["anchors"],
         [lambda: [torch.tensor([[4, 4], [2, 2], [1, 1]]),
                   torch.tensor([[8, 8], [16, 16], [32, 32]])],
          lambda: [torch.tensor([[3, 5], [2, 3]]), torch.tensor([[8, 4], [12, 8]])],
          lambda: [torch.tensor([[2, 1]]), torch.tensor([[-4, 4]])]],
         {"grid_sizes": {0: "L"}, "strides": {0: "L"}}),
    Case("roi_levels", RoiLevels, ["boxes", "ptr", "f0", "f1"], ["pooled"],
         [lambda: _boxes([3, 4], 1), lambda: _boxes([2, 0, 3], 2), lambda: _boxes([1], 3)],
         {"boxes": {0: "N"}, "ptr": {0: "I1"}, "f0": {0: "I"}, "f1": {0: "I"}}),
    Case("child_sum_tree_lstm", ChildSumTreeLstm, ["x", "parent"], ["h"],
         [lambda: [_randn(6, 4, seed=1), _tree_parents(6)],
          lambda: [_randn(4, 4, seed=2), _tree_parents(4)],
          lambda: [_randn(1, 4, seed=3), _tree_parents(1)]],
         {"x": {0: "N"}, "parent": {0: "N"}}),
    Case("beam_hyps_sorted", BeamHyps, ["start", "scores"], ["hyps", "best_last"],
         [lambda: [torch.tensor([1, 2, 3]), torch.tensor([0.0, -0.5, -1.0])],
          lambda: [torch.tensor([4, 1, 6, 2, 5]), _randn(5, seed=2)],
          lambda: [torch.tensor([3]), torch.tensor([0.0])]],
         {"start": {0: "K"}, "scores": {0: "K"}}),
    Case("rnnt_greedy", RnntGreedy, ["enc"], ["tokens"], [_enc(5), _enc(3), _enc(0)],
         {"enc": {0: "T"}}),
    Case("pointnet_msg_group", PointnetMsg, ["xyz"], ["feats"],
         [lambda: [_randn(1, 8, 3, seed=1) * 0.5], lambda: [_randn(2, 5, 3, seed=2) * 0.5],
          lambda: [_randn(1, 4, 3, seed=3) * 0.5]],
         {"xyz": {0: "B", 1: "N"}}),
    Case("pyg_unbatch", PygUnbatch, ["x", "batch"], ["centred", "readout"],
         [lambda: _graphs([3, 2, 4], 1), lambda: _graphs([5], 2), lambda: _graphs([1, 1, 2, 1], 3)],
         {"x": {0: "N"}, "batch": {0: "N"}}),
    Case("pack_sequences", PackSequences, ["x", "lengths"], ["data", "batch_sizes"],
         [lambda: _packed(5, [4, 2, 1], 1), lambda: _packed(4, [4, 4], 2),
          lambda: _packed(3, [1], 3)],
         {"x": {0: "T", 1: "B"}, "lengths": {0: "B"}}),
    Case("swin_window_lists", SwinWindows, ["x"], ["y"],
         [lambda: [_randn(4, 6, 4, seed=1)], lambda: [_randn(6, 2, 4, seed=2)],
          lambda: [_randn(2, 2, 4, seed=3)]],
         {"x": {0: "H", 1: "W"}}),
    Case("res2net_split", Res2NetSplit, ["x"], ["y"],
         [lambda: [_randn(1, 8, 5, 5, seed=1)], lambda: [_randn(2, 8, 3, 4, seed=2)]],
         {"x": {0: "B", 2: "H", 3: "W"}}),
    Case("scalar_mix_zip", ScalarMix, ["layers"], ["mixed"],
         [lambda: [_randn(3, 2, 5, seed=1)], lambda: [_randn(6, 1, 5, seed=2)],
          lambda: [_randn(1, 2, 5, seed=3)]],
         {"layers": {0: "L", 1: "T"}}),
    Case("retina_level_topk", RetinaLevels, ["logits", "boxes", "grid_sizes"],
         ["boxes_out", "scores_out"],
         [lambda: _retina([8, 4, 2], 1), lambda: _retina([6, 3], 2), lambda: _retina([3], 3)],
         {"logits": {0: "A"}, "boxes": {0: "A"}, "grid_sizes": {0: "L"}}),
    Case("edit_from_the_end", EditNegative, ["x"], ["y"],
         [lambda: [_randn(5, 3, seed=1)], lambda: [_randn(3, 3, seed=2)],
          lambda: [_randn(2, 3, seed=3)]],
         {"x": {0: "N"}}),
    Case("detections_per_image", DetectionsPerImage, ["boxes", "ptr", "sizes"], ["boxes_out"],
         [lambda: [*_boxes([3, 4], 1)[:2], torch.tensor([[16.0, 20.0], [12.0, 12.0]])],
          lambda: [*_boxes([2, 0, 3], 2)[:2],
                   torch.tensor([[8.0, 8.0], [9.0, 9.0], [30.0, 5.0]])],
          lambda: [*_boxes([1], 3)[:2], torch.tensor([[1.0, 1.0]])]],
         {"boxes": {0: "N"}, "ptr": {0: "I1"}, "sizes": {0: "I"}}),
    Case("token_lengths", TokenLengths, ["tokens", "scores"], ["normalized"],
         [lambda: [torch.tensor([[5, 2, 3, 2], [4, 4, 4, 4], [2, 1, 1, 1]]), _randn(3, seed=1)],
          lambda: [torch.tensor([[3, 3, 2]]), _randn(1, seed=2)],
          lambda: [torch.zeros(0, 4, dtype=torch.long), torch.zeros(0)]],
         {"tokens": {0: "K", 1: "T"}, "scores": {0: "K"}}),
    Case("moe_sorted_dispatch", MoeDispatch, ["x"], ["y"],
         [lambda: [_randn(9, 4, seed=1)], lambda: [_randn(4, 4, seed=2)],
          lambda: [_randn(1, 4, seed=3)]],
         {"x": {0: "T"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
