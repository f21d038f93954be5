#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other exporter of tools/ used,
a fourth set to measure the tensor forms on programs nobody here tuned them for
(tests/fixtures/torch_later).

    /work/torchvenv/bin/python tools/export_torch_later_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_later.py runs the
exports under onnxruntime and compares them with what PyTorch computed). Each module transcribes
the list handling of one public function, named in its docstring (repository, file, function),
with small layers and random weights, scripted and exported by the TorchScript exporter
(`dynamo=False`) at opset 17, as a user would. Written to `tests/fixtures/torch_later/<case>/`:
`model.onnx` and `test_data_set_<k>/input_<i>.pb`, `output_<i>.pb`, one data set per input
maker; the later data sets are edge cases (one element, an empty list, a loop that runs once or
not at all).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from scripted_fixtures import Case, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_later"


class HfBadWordsMask(nn.Module):
    """huggingface/transformers generation/logits_process.py `NoBadWordsLogitsProcessor`
    (v4.2x, `_calc_banned_bad_words_ids`, `_tokens_match`, `_set_scores_to_inf_for_banned_
    tokens`): per hypothesis, for every bad word sequence whose prefix (`banned_token_seq[:-1]`)
    ends the hypothesis (`prev_tokens[-len(tokens):] == tokens`, an empty prefix always
    matches, a prefix longer than the hypothesis never), its last token is banned
    (`banned_tokens_slice.append(...)`); `banned_mask_list.append([idx, token])` for the tokens
    within the vocabulary; none banned returns the scores as they are, else a mask of them is
    filled with -inf. The bad words arrive padded with their lengths. Changed to export: the
    list of lists of banned tokens is kept flat as one list of rows and one of tokens (the
    order `banned_mask_list` has), the sparse mask is an index assignment into a zero mask, and
    the two slices at run-time positions are `index_select` of an `arange`."""

    def forward(
        self, input_ids: Tensor, scores: Tensor, bad_words: Tensor, bad_lengths: Tensor
    ) -> Tensor:
        rows: list[Tensor] = []
        tokens: list[Tensor] = []
        t = input_ids.size(1)
        for idx in range(input_ids.size(0)):
            prev = input_ids[idx]
            for k in range(bad_words.size(0)):
                n = int(bad_lengths[k]) - 1
                if n == 0:
                    match = True
                elif n > t:
                    match = False
                else:
                    tail = prev.index_select(0, torch.arange(t - n, t))
                    head = bad_words[k].index_select(0, torch.arange(0, n))
                    match = bool((tail == head).all())
                if match:
                    token = bad_words[k, n]
                    if int(token) < scores.size(1):
                        rows.append(torch.tensor(idx))
                        tokens.append(token)
        if len(rows) == 0:
            return scores
        mask = torch.zeros_like(scores, dtype=torch.bool)
        mask[torch.stack(rows), torch.stack(tokens)] = True
        return scores.masked_fill(mask, float("-inf"))


class HfRepetitionPenalty(nn.Module):
    """huggingface/transformers (v2.x) modeling_utils.py `enforce_repetition_penalty_`: `for i
    in range(batch_size * num_beams): for previous_token in set(prev_output_tokens[i].tolist()):
    if lprobs[i, previous_token] < 0: lprobs[i, previous_token] *= repetition_penalty else:
    lprobs[i, previous_token] /= repetition_penalty`. TorchScript has no set: the distinct
    tokens are collected in order into a list of ints (`if tok not in seen: seen.append(tok)`),
    which is the same set; the scores are cloned first (the original edits its argument).
    Changed to export: the exporter cannot write `in` of a list of ints (it expects a
    `prim::ListConstruct`), so membership is a loop over the list setting a flag; and a list of
    ints appended in a loop exports as a sequence onnxruntime rejects (a `Shape` of a
    `seq(tensor(int64))`), so the tokens are kept as 0-d tensors."""

    def forward(self, lprobs: Tensor, prev_output_tokens: Tensor) -> Tensor:
        penalty = 1.3
        lprobs = lprobs.clone()
        for i in range(lprobs.size(0)):
            seen: list[Tensor] = []
            for j in range(prev_output_tokens.size(1)):
                tok = prev_output_tokens[i, j]
                found = False
                for s in seen:
                    if bool(s == tok):
                        found = True
                if not found:
                    seen.append(tok)
            for tok in seen:
                if bool(lprobs[i, tok] < 0):
                    lprobs[i, tok] = lprobs[i, tok] * penalty
                else:
                    lprobs[i, tok] = lprobs[i, tok] / penalty
        return lprobs


class Yolov8MakeAnchors(nn.Module):
    """ultralytics/ultralytics ultralytics/utils/tal.py `make_anchors(feats, strides,
    grid_cell_offset=0.5)`: `for i, stride in enumerate(strides): h, w = feats[i].shape[2:]`,
    `sy, sx = torch.meshgrid(sy, sx, indexing="ij")`, `anchor_points.append(torch.stack((sx,
    sy), -1).view(-1, 2))`, `stride_tensor.append(torch.full((h * w, 1), stride))`, both
    concatenated; with ultralytics/nn/modules/head.py `Detect._inference`: `x_cat =
    torch.cat([xi.view(shape[0], self.no, -1) for xi in x], 2)`, `box, cls = x_cat.split(...)`
    and `dist2bbox(box, anchors, xywh=True) * strides` (`reg_max=1`, so no DFL). The per-level
    maps come from a backbone loop that appends each stride's head output."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1),
             nn.Conv2d(4, 4, 3, stride=2, padding=1)]
        )  # fmt: skip
        self.heads = nn.ModuleList(nn.Conv2d(4, 6, 1) for _ in range(3))

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor]:
        feats: list[Tensor] = []
        x = image
        for stage, head in zip(self.stages, self.heads):
            x = torch.relu(stage(x))
            feats.append(head(x))
        strides = [2.0, 4.0, 8.0]
        anchor_points: list[Tensor] = []
        stride_tensor: list[Tensor] = []
        for i, stride in enumerate(strides):
            h, w = feats[i].shape[2], feats[i].shape[3]
            sx = torch.arange(w, dtype=torch.float) + 0.5
            sy = torch.arange(h, dtype=torch.float) + 0.5
            grid = torch.meshgrid([sy, sx], indexing="ij")
            anchor_points.append(torch.stack((grid[1], grid[0]), -1).view(-1, 2))
            stride_tensor.append(torch.full((h * w, 1), stride, dtype=torch.float))
        anchors = torch.cat(anchor_points).transpose(0, 1)
        strides_t = torch.cat(stride_tensor).transpose(0, 1)
        b = image.size(0)
        x_cat = torch.cat([xi.view(b, 6, -1) for xi in feats], 2)
        box, cls = x_cat.split([4, 2], 1)
        lt, rb = box.chunk(2, 1)
        x1y1 = anchors.unsqueeze(0) - lt
        x2y2 = anchors.unsqueeze(0) + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * strides_t
        return torch.cat((dbox, cls.sigmoid()), 1), strides_t


class MmdetMultiApplyMlvl(nn.Module):
    """open-mmlab/mmdetection mmdet/models/utils/misc.py `multi_apply` (`map_results =
    map(pfunc, *args); return tuple(map(list, zip(*map_results)))`) and `select_single_mlvl`
    (`[mlvl_tensors[i][batch_id].detach() for i in range(num_levels)]`), as
    mmdet/models/dense_heads/base_dense_head.py `predict_by_feat` uses them: the head's two
    lists of per-level maps, then per image its levels selected and `_predict_by_feat_single`:
    per level `bbox_pred.permute(1, 2, 0).reshape(-1, 4)`, `scores = cls_score.sigmoid()`,
    `filter_scores_and_topk` (`valid_mask = scores > score_thr`, `valid_idxs =
    torch.nonzero(valid_mask)`, `num_topk = min(topk, valid_idxs.size(0))`, sorted, `keep_idxs,
    labels = topk_idxs.unbind(dim=1)`), the levels' results appended and concatenated; each
    image's results joined with its index. `multi_apply` is written as the loop its `map` and
    `zip` make (TorchScript has neither over functions); the `.float()` of each level read from
    the lists gives the exporter the element type it loses when reading a list."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1)]
        )
        self.cls = nn.Conv2d(4, 2, 1)
        self.reg = nn.Conv2d(4, 4, 1)

    def forward(self, image: Tensor) -> Tensor:
        x = image
        feats: list[Tensor] = []
        for stage in self.stages:
            x = torch.relu(stage(x))
            feats.append(x)
        cls_scores: list[Tensor] = []
        bbox_preds: list[Tensor] = []
        for feat in feats:
            cls_scores.append(self.cls(feat))
            bbox_preds.append(self.reg(feat))
        num_levels = len(cls_scores)
        result_list: list[Tensor] = []
        for img_id in range(image.size(0)):
            cls_score_list = [cls_scores[i][img_id].detach() for i in range(num_levels)]
            bbox_pred_list = [bbox_preds[i][img_id].detach() for i in range(num_levels)]
            mlvl_bboxes: list[Tensor] = []
            mlvl_scores: list[Tensor] = []
            mlvl_labels: list[Tensor] = []
            for cls_score, bbox_pred in zip(cls_score_list, bbox_pred_list):
                bbox_pred = bbox_pred.float().permute(1, 2, 0).reshape(-1, 4)
                scores = cls_score.float().permute(1, 2, 0).reshape(-1, 2).sigmoid()
                valid_mask = scores > 0.5
                scores = scores[valid_mask]
                valid_idxs = torch.nonzero(valid_mask)
                num_topk = min(5, valid_idxs.size(0))
                scores, idxs = scores.sort(descending=True)
                scores = scores[:num_topk]
                topk_idxs = valid_idxs[idxs[:num_topk]]
                keep_idxs, labels = topk_idxs.unbind(dim=1)
                mlvl_bboxes.append(bbox_pred[keep_idxs])
                mlvl_scores.append(scores)
                mlvl_labels.append(labels)
            bboxes = torch.cat(mlvl_bboxes)
            result = torch.cat(
                (bboxes, torch.cat(mlvl_scores).unsqueeze(1),
                 torch.cat(mlvl_labels).unsqueeze(1).float(),
                 torch.full_like(bboxes[:, :1], img_id)), 1
            )  # fmt: skip
            result_list.append(result)
        return torch.cat(result_list, 0)


class MmdetRoi2Bbox(nn.Module):
    """open-mmlab/mmdetection mmdet/structures/bbox/transforms.py `bbox2roi(bbox_list)`: `for
    img_id, bboxes in enumerate(bbox_list): img_inds = bboxes.new_full((bboxes.size(0), 1),
    img_id); rois_list.append(torch.cat([img_inds, bboxes], dim=-1))`, `torch.cat(rois_list,
    0)`; a box head refines the rois; then `roi2bbox(rois)`: `img_ids =
    torch.unique(rois[:, 0].cpu(), sorted=True); for img_id in img_ids: inds = (rois[:, 0] ==
    img_id.item()); bbox_list.append(rois[inds, 1:])` (an image without boxes has no entry),
    each image's boxes reduced to their total area. The boxes arrive flat with per-image
    counts, cut into `bbox_list` by `index_select` of an `arange` (as in torch_novel)."""

    def __init__(self) -> None:
        super().__init__()
        self.refine = nn.Linear(4, 4)

    def forward(self, boxes: Tensor, counts: Tensor) -> Tensor:
        bbox_list: list[Tensor] = []
        start = 0
        for n in counts.unbind(0):
            bbox_list.append(boxes.index_select(0, torch.arange(start, start + int(n))))
            start += int(n)
        rois_list: list[Tensor] = []
        for img_id, bboxes in enumerate(bbox_list):
            img_inds = bboxes.new_full((bboxes.size(0), 1), img_id)
            rois_list.append(torch.cat([img_inds, bboxes], dim=-1))
        rois = torch.cat(rois_list, 0)
        rois = torch.cat([rois[:, :1], rois[:, 1:] + 0.1 * self.refine(rois[:, 1:])], 1)
        out_list: list[Tensor] = []
        img_ids = torch.unique(rois[:, 0], sorted=True)
        for img_id in img_ids:
            inds = rois[:, 0] == img_id.item()
            out_list.append(rois[inds, 1:])
        if len(out_list) == 0:
            return torch.zeros(0)
        return torch.stack([((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])).sum() for b in out_list])


class SegformerHead(nn.Module):
    """NVlabs/SegFormer mmseg/models/backbones/mix_transformer.py `MixVisionTransformer.
    forward_features` (per stage: `x, H, W = self.patch_embed(x)`, the blocks, `x =
    x.reshape(B, H, W, -1).permute(0, 3, 1, 2)`, `outs.append(x)`) and open-mmlab/
    mmsegmentation mmseg/models/decode_heads/segformer_head.py `SegformerHead.forward`: `for idx
    in range(len(inputs)): x = inputs[idx]; conv = self.convs[idx]; outs.append(resize(
    input=conv(x), size=inputs[0].shape[2:], mode='bilinear'))`, `self.fusion_conv(torch.cat(
    outs, dim=1))`. The patch embedding is a strided convolution and a block one linear layer
    (TorchScript indexes a ModuleList only by a literal, so the convs are walked by `enumerate`
    and `inputs[idx]` read by it; the `.float()` gives the exporter the element type it loses
    when reading a list)."""

    def __init__(self) -> None:
        super().__init__()
        self.embeds = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1),
             nn.Conv2d(4, 4, 3, stride=2, padding=1)]
        )  # fmt: skip
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.convs = nn.ModuleList(nn.Conv2d(4, 3, 1) for _ in range(3))
        self.fusion_conv = nn.Conv2d(9, 2, 1)

    def forward(self, image: Tensor) -> Tensor:
        b = image.size(0)
        x = image
        inputs: list[Tensor] = []
        for embed, block in zip(self.embeds, self.blocks):
            x = embed(x)
            h, w = x.shape[2], x.shape[3]
            x = x.flatten(2).transpose(1, 2)
            x = x + torch.relu(block(x))
            x = x.reshape(b, h, w, -1).permute(0, 3, 1, 2).contiguous()
            inputs.append(x)
        outs: list[Tensor] = []
        for idx, conv in enumerate(self.convs):
            x = inputs[idx].float()
            size = [inputs[0].shape[2], inputs[0].shape[3]]
            outs.append(F.interpolate(conv(x), size=size, mode="bilinear", align_corners=False))
        return self.fusion_conv(torch.cat(outs, dim=1))


class FpnCombine(nn.Module):
    """effdet `FpnCombine` with `weight_method='fastattn'`: the inputs read from the growing
    list at its offsets, resampled to the node's level, weighted and summed."""

    def __init__(self, offsets: list[int], scales: list[int]) -> None:
        super().__init__()
        self.offsets = offsets
        self.scales = scales  # 1: upsample by two, -1: max-pool by two, 0: as is
        self.edge_weights = nn.Parameter(torch.rand(len(offsets)) + 0.5)

    def forward(self, x: list[Tensor]) -> Tensor:
        nodes: list[Tensor] = []
        for offset, scale in zip(self.offsets, self.scales):
            input_node = x[offset].float()
            if scale > 0:
                size = [input_node.shape[2] * 2, input_node.shape[3] * 2]
                input_node = F.interpolate(input_node, size=size, mode="nearest")
            elif scale < 0:
                input_node = F.max_pool2d(input_node, 2)
            nodes.append(input_node)
        edge_weights = torch.relu(self.edge_weights)
        weights_sum = torch.sum(edge_weights)
        out = torch.stack(
            [(nodes[i] * edge_weights[i]) / (weights_sum + 0.0001) for i in range(len(nodes))],
            dim=-1,
        )
        return torch.sum(out, dim=-1)


class Fnode(nn.Module):
    """effdet `Fnode`: `self.after_combine(self.combine(x))`."""

    def __init__(self, offsets: list[int], scales: list[int]) -> None:
        super().__init__()
        self.combine = FpnCombine(offsets, scales)
        self.conv = nn.Conv2d(4, 4, 3, padding=1, groups=4)

    def forward(self, x: list[Tensor]) -> Tensor:
        return self.conv(F.silu(self.combine(x)))


class EffdetBifpn(nn.Module):
    """rwightman/efficientdet-pytorch effdet/efficientdet.py `BiFpnLayer.forward`: `for fn in
    self.fnode: x.append(fn(x))`, `return x[-self.num_levels::]`, with `FpnCombine.forward`
    (`for offset, resample in zip(self.inputs_offsets, self.resample.values()): input_node =
    x[offset]; nodes.append(resample(input_node))`, `fastattn`: `torch.stack([(nodes[i] *
    edge_weights[i]) / (weights_sum + 0.0001) for i in range(len(nodes))], dim=-1).sum(-1)`);
    three levels, the BiFPN node offsets of effdet's `bifpn_config` (top-down [1, 2], [0, 3],
    bottom-up [1, 3, 4], [2, 5]), two layers in a row, the backbone's levels appended to a
    list. Changed to export: an upsampling by a scale factor of a map read from a list does not
    export ("missing input shape"), so its size is given (twice the map's, the same result), and
    the `.float()` of a map read from the list gives the exporter its element type; the list
    slice `x[-num_levels:]` (a Slice of a sequence) is a loop appending `x[k]` for the last
    three positions; the resampling is an up or down by two (effdet's for these levels), given
    per input as 1, -1 or 0 (a pooling size read from a list attribute did not export)."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1),
             nn.Conv2d(4, 4, 3, stride=2, padding=1)]
        )  # fmt: skip
        config = [([1, 2], [0, 1]), ([0, 3], [0, 1]), ([1, 3, 4], [0, 0, -1]), ([2, 5], [0, -1])]
        self.layers = nn.ModuleList(nn.ModuleList(Fnode(o, s) for o, s in config) for _ in range(2))

    def forward(self, image: Tensor) -> Tensor:
        feats: list[Tensor] = []
        x = image
        for stage in self.stages:
            x = torch.relu(stage(x))
            feats.append(x)
        num_levels = 3
        for fnodes in self.layers:
            for fn in fnodes:
                feats.append(fn(feats))
            last: list[Tensor] = []
            for k in range(len(feats) - num_levels, len(feats)):
                last.append(feats[k])
            feats = last
        return torch.cat([f.flatten(1) for f in feats], 1)


class UpsampleBy(nn.Module):
    """`nn.Upsample(scale_factor=k, mode="nearest")` written with the size (`k` times the
    input's): a scale factor of a map read from a list does not export ("missing input
    shape")."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, size=[x.shape[2] * self.k, x.shape[3] * self.k], mode="nearest")


class HrnetFuse(nn.Module):
    """HRNet/HRNet-Image-Classification lib/models/cls_hrnet.py: the stage's input list
    (`for i in range(num_branches): if self.transition1[i] is not None:
    x_list.append(self.transition1[i](x)) else: x_list.append(x)`), then
    `HighResolutionModule.forward`: `for i in range(self.num_branches): x[i] =
    self.branches[i](x[i])`, `for i in range(len(self.fuse_layers)): y = x[0] if i == 0 else
    self.fuse_layers[i][0](x[0]); for j in range(1, self.num_branches): if i == j: y = y + x[j]
    else: y = y + self.fuse_layers[i][j](x[j])`, `x_fuse.append(self.relu(y))` (a branch of
    lower resolution upsampled by a 1x1 conv and nearest interpolation, of higher one
    downsampled by stride-2 convs), and the classification head's `y =
    self.incre_modules[0](y_list[0]); for i in range(len(self.downsamp_modules)): y =
    self.incre_modules[i + 1](y_list[i + 1]) + self.downsamp_modules[i](y)`. TorchScript
    indexes a ModuleList only by a literal, so the loops run over the modules by `enumerate`;
    `y` starts as zeros and every term is added to it (the same values; `fuse_layers[i][i]` is
    an `Identity` where HRNet keeps `None`; the `.float()` of a map read from a list gives the
    exporter the element type it loses)."""

    def __init__(self) -> None:
        super().__init__()
        c = 4
        self.transition = nn.ModuleList(
            [nn.Identity(), nn.Conv2d(c, c, 3, stride=2, padding=1),
             nn.Sequential(nn.Conv2d(c, c, 3, stride=2, padding=1),
                           nn.Conv2d(c, c, 3, stride=2, padding=1))]
        )  # fmt: skip
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.branches = nn.ModuleList(nn.Conv2d(c, c, 3, padding=1) for _ in range(3))
        rows = []
        for i in range(3):
            row = []
            for j in range(3):
                if j > i:
                    row.append(nn.Sequential(nn.Conv2d(c, c, 1), UpsampleBy(2 ** (j - i))))
                elif j == i:
                    row.append(nn.Identity())
                else:
                    row.append(
                        nn.Sequential(
                            *[nn.Conv2d(c, c, 3, stride=2, padding=1) for _ in range(i - j)]
                        )
                    )
            rows.append(nn.ModuleList(row))
        self.fuse_layers = nn.ModuleList(rows)
        self.incre = nn.ModuleList(nn.Conv2d(c, c, 1) for _ in range(3))
        self.downsamp = nn.ModuleList(nn.Conv2d(c, c, 3, stride=2, padding=1) for _ in range(2))

    def forward(self, image: Tensor) -> Tensor:
        x0 = torch.relu(self.stem(image))
        x: list[Tensor] = []
        for transition in self.transition:
            x.append(transition(x0))
        for i, branch in enumerate(self.branches):
            x[i] = torch.relu(branch(x[i].float()))
        x_fuse: list[Tensor] = []
        for i, fuse_row in enumerate(self.fuse_layers):
            y = torch.zeros_like(x[i].float())
            for j, layer in enumerate(fuse_row):
                if i == j:  # noqa: SIM108 (HRNet's if/else)
                    y = y + x[j].float()
                else:
                    y = y + layer(x[j].float())
            x_fuse.append(torch.relu(y))
        y = x0
        for i, incre in enumerate(self.incre):
            if i == 0:
                y = incre(x_fuse[0].float())
        for i, down in enumerate(self.downsamp):
            for k, incre in enumerate(self.incre):
                if k == i + 1:
                    y = incre(x_fuse[i + 1].float()) + down(y)
        return y.mean((2, 3))


class TorchaudioBacktrack(nn.Module):
    """pytorch/audio examples/tutorials/forced_alignment_tutorial.py `get_trellis` and
    `backtrack`: the trellis filled frame by frame (`trellis[t + 1, 1:] =
    torch.maximum(trellis[t, 1:] + emission[t, blank_id], trellis[t, :-1] + emission[t,
    tokens[1:]])`, column 0 the cumulated blanks, `inf` on its last `num_tokens - 1` rows, `-inf`
    on row 0 but its first), then `path = [Point(j, t, emission[t, blank_id].exp().item())]`,
    `while j > 0:` stay or change (`if changed > stayed: j -= 1`) `path.append(Point(j, t,
    prob))`, `while t > 0:` the rest on blank, `return path[::-1]`. Changed to export: the
    trellis rows are a list (`rows.append(...)` from `rows[t]`, stacked; the in-place row
    assignment is the same values), the points are three lists (token index, frame, 0-d score;
    `.item()` kept as a tensor; the ints as 0-d tensors, as a list of ints appended in a loop
    exports as a sequence onnxruntime rejects), and `path[::-1]` is a loop reading positions
    from the end (the `.float()` of an element read from a list gives the exporter its element
    type)."""

    def forward(self, emission: Tensor, tokens: Tensor) -> Tensor:
        num_frame = emission.size(0)
        num_tokens = tokens.size(0)
        col0 = torch.cat([torch.zeros(1), torch.cumsum(emission[1:, 0], 0)])
        inf_rows = torch.arange(num_frame) >= num_frame - num_tokens + 1
        col0 = torch.where(inf_rows & (torch.arange(num_frame) > 0), float("inf"), col0)
        rows: list[Tensor] = [torch.cat([col0[:1], torch.full([num_tokens - 1], float("-inf"))])]
        for t in range(num_frame - 1):
            prev = rows[t].float()
            rest = torch.maximum(prev[1:] + emission[t, 0], prev[:-1] + emission[t, tokens[1:]])
            rows.append(torch.cat([col0[t + 1 : t + 2], rest]))
        trellis = torch.stack(rows)
        t, j = num_frame - 1, num_tokens - 1
        path_j: list[Tensor] = [torch.tensor(j)]
        path_t: list[Tensor] = [torch.tensor(t)]
        path_p: list[Tensor] = [emission[t, 0].exp()]
        while j > 0:
            p_stay = emission[t - 1, 0]
            p_change = emission[t - 1, tokens[j]]
            stayed = trellis[t - 1, j] + p_stay
            changed = trellis[t - 1, j - 1] + p_change
            t -= 1
            if bool(changed > stayed):
                j -= 1
            prob = (p_change if bool(changed > stayed) else p_stay).exp()
            path_j.append(torch.tensor(j))
            path_t.append(torch.tensor(t))
            path_p.append(prob)
        while t > 0:
            prob = emission[t - 1, 0].exp()
            path_j.append(torch.tensor(j))
            path_t.append(torch.tensor(t - 1))
            path_p.append(prob)
            t -= 1
        out: list[Tensor] = []
        for k in range(len(path_j) - 1, -1, -1):
            out.append(torch.stack([path_j[k].float(), path_t[k].float(), path_p[k].float()]))
        return torch.stack(out)


class TorchaudioMergeRepeats(nn.Module):
    """pytorch/audio examples/tutorials/forced_alignment_tutorial.py `merge_repeats(path)`:
    `i1, i2 = 0, 0; while i1 < len(path): while i2 < len(path) and path[i1].token_index ==
    path[i2].token_index: i2 += 1`, `score = sum(path[k].score for k in range(i1, i2)) / (i2 -
    i1)`, `segments.append(Segment(transcript[path[i1].token_index], path[i1].time_index,
    path[i2 - 1].time_index + 1, score))`, `i1 = i2`. The path arrives as three tensors made
    into lists (`unbind`); the segments are stacked as rows (label, start, end, score); an
    empty path gives no row. Python's `sum` of the generator is written as the running sum it
    is (a `torch.stack` of a comprehension over `range(i1, i2)` failed to export: "Invalid
    tensor data type 0")."""

    def forward(self, token_index: Tensor, time_index: Tensor, score: Tensor) -> Tensor:
        tok = list(token_index.unbind(0))
        tim = list(time_index.unbind(0))
        sco = list(score.unbind(0))
        segments: list[Tensor] = []
        i1, i2 = 0, 0
        while i1 < len(tok):
            while i2 < len(tok) and bool(tok[i1] == tok[i2]):
                i2 += 1
            total = torch.zeros(())
            for k in range(i1, i2):
                total = total + sco[k]
            total = total / float(i2 - i1)
            segments.append(torch.stack([tok[i1].float(), tim[i1].float(),
                                         tim[i2 - 1].float() + 1, total]))  # fmt: skip
            i1 = i2
        if len(segments) == 0:
            return torch.zeros(0, 4)
        return torch.stack(segments)


class SamCropBoxes(nn.Module):
    """facebookresearch/segment-anything segment_anything/utils/amg.py `generate_crop_boxes`:
    `crop_boxes.append([0, 0, im_w, im_h]); layer_idxs.append(0)`, `for i_layer in
    range(n_layers): n_crops_per_side = int(2 ** (i_layer + 1))`, the overlap and `crop_len`
    (`int(math.ceil((overlap * (n_crops - 1) + orig_len) / n_crops))`), `crop_box_x0 =
    [int((crop_w - overlap) * i) for i in range(n_crops_per_side)]` (and y0), `for x0, y0 in
    product(crop_box_x0, crop_box_y0): crop_boxes.append([x0, y0, min(x0 + crop_w, im_w), min(y0
    + crop_h, im_h)]); layer_idxs.append(i_layer + 1)`; then, as
    automatic_mask_generator.py `_generate_masks` does `for crop_box, layer_idx in
    zip(crop_boxes, layer_idxs)`, each crop of the image (`image[..., y0:y1, x0:x1]`) reduced to
    its mean colour. The image size and the layer count are the inputs' (`n_layers` a 0-d
    tensor). Changed to export: `product` of the two comprehensions is two nested loops
    computing `x0` and `y0` (its order and values; lists of ints built in a loop export as
    sequences onnxruntime rejects, a `Shape` of a `seq(tensor(int64))`), so `layer_idxs` holds
    0-d tensors, a box is a tensor of its four ints, and the crop is `index_select` of two
    `arange`s. The overlap (`int(overlap_ratio * short_side * (2 / n_crops_per_side))`, ratio
    0.34 here) and `crop_len`'s `ceil` are written in integer arithmetic (`(34 * short_side * 2)
    // (100 * n)`, `(a + n - 1) // n`, the same values for these sizes): written with floats,
    `int` and `math.ceil`, the export computed other boxes than PyTorch under onnxruntime (11
    for 10 in data set 0), an exporter fault, not a list one."""

    def forward(self, image: Tensor, n_layers: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        im_h, im_w = image.shape[1], image.shape[2]
        short_side = min(im_h, im_w)
        crop_boxes: list[Tensor] = [torch.tensor([0, 0, im_w, im_h], dtype=torch.long)]
        layer_idxs: list[Tensor] = [torch.tensor(0, dtype=torch.long)]
        for i_layer in range(int(n_layers)):
            n_crops_per_side = int(2 ** (i_layer + 1))
            n = n_crops_per_side
            overlap = (34 * short_side * 2) // (100 * n)
            crop_w = (overlap * (n - 1) + im_w + n - 1) // n
            crop_h = (overlap * (n - 1) + im_h + n - 1) // n
            for ix in range(n_crops_per_side):
                x0 = int((crop_w - overlap) * ix)
                for iy in range(n_crops_per_side):
                    y0 = int((crop_h - overlap) * iy)
                    box = [x0, y0, min(x0 + crop_w, im_w), min(y0 + crop_h, im_h)]
                    crop_boxes.append(torch.tensor(box, dtype=torch.long))
                    layer_idxs.append(torch.tensor(i_layer + 1, dtype=torch.long))
        means: list[Tensor] = []
        for crop_box, _layer_idx in zip(crop_boxes, layer_idxs):
            x0, y0, x1, y1 = int(crop_box[0]), int(crop_box[1]), int(crop_box[2]), int(crop_box[3])
            crop = image.index_select(1, torch.arange(y0, y1)).index_select(2, torch.arange(x0, x1))
            means.append(crop.mean((1, 2)))
        return torch.stack(crop_boxes), torch.stack(layer_idxs), torch.stack(means)


class DiffusersUnetResSamples(nn.Module):
    """huggingface/diffusers src/diffusers/models/unets/unet_2d.py `UNet2DModel.forward`:
    `down_block_res_samples = (sample,)`, `for downsample_block in self.down_blocks: sample,
    res_samples = downsample_block(...); down_block_res_samples += res_samples`, and per up
    block `res_samples = down_block_res_samples[-len(upsample_block.resnets):]`,
    `down_block_res_samples = down_block_res_samples[:-len(upsample_block.resnets)]`, with
    unet_2d_blocks.py `DownBlock2D` (`output_states = output_states + (hidden_states,)` after
    each resnet and the downsampler) and `UpBlock2D` (`res_hidden_states =
    res_hidden_states_tuple[-1]; res_hidden_states_tuple = res_hidden_states_tuple[:-1];
    hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)`). Two down blocks of
    one resnet (the first with a downsampler), two up blocks of two resnets (the first with an
    upsampler); a resnet is one convolution with the time embedding added. Changed to export:
    the tuples are one list, appended to, and taken from its end one at a time (`skips[-1]`
    then `del skips[-1]`), which is what the up blocks do with the slices."""

    def __init__(self) -> None:
        super().__init__()
        c = 4
        self.conv_in = nn.Conv2d(3, c, 3, padding=1)
        self.time = nn.Linear(1, c)
        self.down_resnets = nn.ModuleList(nn.Conv2d(c, c, 3, padding=1) for _ in range(2))
        self.downsampler = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(c, c, 3, padding=1)
        self.up_resnets = nn.ModuleList(
            nn.ModuleList(nn.Conv2d(2 * c, c, 3, padding=1) for _ in range(2)) for _ in range(2)
        )
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, sample: Tensor, timestep: Tensor) -> Tensor:
        emb = self.time(timestep.view(-1, 1).float()).unsqueeze(-1).unsqueeze(-1)
        sample = self.conv_in(sample)
        skips: list[Tensor] = [sample]
        for k, resnet in enumerate(self.down_resnets):
            sample = F.silu(resnet(sample) + emb)
            skips.append(sample)
            if k == 0:
                sample = self.downsampler(sample)
                skips.append(sample)
        sample = F.silu(self.mid(sample) + emb)
        for k, block in enumerate(self.up_resnets):
            for resnet in block:
                res_hidden = skips[-1]
                del skips[-1]
                sample = F.silu(resnet(torch.cat([sample, res_hidden], dim=1)) + emb)
            if k == 0:
                sample = F.interpolate(sample, scale_factor=2.0, mode="nearest")
        return self.conv_out(sample)


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _rand(*shape: int, seed: int) -> Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def _long(values: list) -> Tensor:
    return torch.tensor(values, dtype=torch.long)


def _scalar(value: int) -> Tensor:
    return torch.tensor(value, dtype=torch.long)


def _log_softmax(*shape: int, seed: int) -> Tensor:
    return torch.log_softmax(_randn(*shape, seed=seed), -1)


CASES = [
    Case("hf_bad_words_mask", HfBadWordsMask, ["input_ids", "scores", "bad_words", "bad_lengths"],
         ["scores_out"],
         [lambda: [_long([[1, 2, 3, 4], [4, 2, 3, 1], [0, 0, 5, 2]]), _randn(3, 8, seed=1),
                   _long([[2, 3, 6], [5, 0, 0], [1, 2, 9], [4, 1, 7]]), _long([3, 1, 3, 3])],
          lambda: [_long([[3]]), _randn(1, 8, seed=2), _long([[7, 0]]), _long([1])],
          lambda: [_long([[1, 2], [2, 2]]), _randn(2, 8, seed=3),
                   _long([[9, 9, 9, 1], [1, 2, 3, 4]]), _long([4, 3])],
          lambda: [_long([[1, 2, 3]]), _randn(1, 8, seed=4), _long([[1, 2, 3]])[:0],
                   _long([1])[:0]]],
         {"input_ids": {0: "B", 1: "T"}, "scores": {0: "B"}, "bad_words": {0: "K", 1: "L"},
          "bad_lengths": {0: "K"}}),
    Case("hf_repetition_penalty", HfRepetitionPenalty, ["lprobs", "prev_output_tokens"],
         ["lprobs_out"],
         [lambda: [_randn(3, 9, seed=1), _long([[1, 4, 1, 8], [2, 2, 2, 2], [0, 3, 5, 3]])],
          lambda: [_randn(1, 9, seed=2), _long([[6]])],
          lambda: [_randn(2, 9, seed=3), _long([[1], [2]])[:, :0]]],
         {"lprobs": {0: "B"}, "prev_output_tokens": {0: "B", 1: "T"}}),
    Case("yolov8_make_anchors", Yolov8MakeAnchors, ["image"], ["y", "strides"],
         [lambda: [_randn(2, 3, 16, 24, seed=1)], lambda: [_randn(1, 3, 8, 8, seed=2)],
          lambda: [_randn(1, 3, 5, 3, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("mmdet_multi_apply_mlvl", MmdetMultiApplyMlvl, ["image"], ["dets"],
         [lambda: [_randn(3, 3, 8, 8, seed=1)], lambda: [_randn(1, 3, 4, 6, seed=2)],
          lambda: [_randn(2, 3, 2, 2, seed=3) - 5]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("mmdet_roi2bbox", MmdetRoi2Bbox, ["boxes", "counts"], ["areas"],
         [lambda: [_rand(7, 4, seed=1) * 10, _long([3, 0, 4])],
          lambda: [_rand(1, 4, seed=2) * 10, _long([1])],
          lambda: [_rand(5, 4, seed=3) * 10, _long([0, 5])]],
         {"boxes": {0: "N"}, "counts": {0: "I"}}),
    Case("segformer_head", SegformerHead, ["image"], ["logits"],
         [lambda: [_randn(2, 3, 16, 16, seed=1)], lambda: [_randn(1, 3, 8, 12, seed=2)],
          lambda: [_randn(1, 3, 3, 3, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("effdet_bifpn", EffdetBifpn, ["image"], ["features"],
         [lambda: [_randn(2, 3, 16, 16, seed=1)], lambda: [_randn(1, 3, 8, 8, seed=2)],
          lambda: [_randn(1, 3, 16, 32, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("hrnet_fuse", HrnetFuse, ["image"], ["features"],
         [lambda: [_randn(2, 3, 8, 8, seed=1)], lambda: [_randn(1, 3, 4, 4, seed=2)],
          lambda: [_randn(1, 3, 16, 8, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("torchaudio_backtrack", TorchaudioBacktrack, ["emission", "tokens"], ["path"],
         [lambda: [_log_softmax(9, 5, seed=1), _long([0, 2, 3, 2])],
          lambda: [_log_softmax(3, 5, seed=2), _long([0])],
          lambda: [_log_softmax(4, 5, seed=3), _long([0, 1, 4, 1])],
          lambda: [_log_softmax(1, 5, seed=4), _long([0])]],
         {"emission": {0: "T"}, "tokens": {0: "N"}}),
    Case("torchaudio_merge_repeats", TorchaudioMergeRepeats,
         ["token_index", "time_index", "score"], ["segments"],
         [lambda: [_long([0, 1, 1, 2, 2, 2, 3]), _long([0, 1, 2, 3, 4, 5, 6]),
                   _rand(7, seed=1)],
          lambda: [_long([4]), _long([2]), _rand(1, seed=2)],
          lambda: [_long([1, 1, 1]), _long([0, 1, 2]), _rand(3, seed=3)],
          lambda: [_long([]), _long([]), _rand(0, seed=4)]],
         {"token_index": {0: "N"}, "time_index": {0: "N"}, "score": {0: "N"}}),
    Case("sam_crop_boxes", SamCropBoxes, ["image", "n_layers"],
         ["crop_boxes", "layer_idxs", "means"],
         [lambda: [_randn(3, 12, 16, seed=1), _scalar(2)],
          lambda: [_randn(3, 5, 7, seed=2), _scalar(1)],
          lambda: [_randn(3, 6, 6, seed=3), _scalar(0)]],
         {"image": {1: "H", 2: "W"}}),
    Case("diffusers_unet_res_samples", DiffusersUnetResSamples, ["sample", "timestep"],
         ["noise_pred"],
         [lambda: [_randn(2, 3, 8, 8, seed=1), _long([3, 7])],
          lambda: [_randn(1, 3, 4, 6, seed=2), _long([0])]],
         {"sample": {0: "B", 2: "H", 3: "W"}, "timestep": {0: "B"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
