#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other exporter of tools/ used,
to measure the tensor forms on programs nobody here tuned them for (tests/fixtures/torch_novel).

    /work/torchvenv/bin/python tools/export_torch_novel_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_novel.py runs the
exports under onnxruntime and compares them with what PyTorch computed). Each module transcribes
the list handling of one public function, named in its docstring (repository, file, function),
with small layers and random weights, scripted and exported by the TorchScript exporter
(`dynamo=False`) at opset 17, as a user would. Written to `tests/fixtures/torch_novel/<case>/`:
`model.onnx` and `test_data_set_<k>/input_<i>.pb`, `output_<i>.pb`, one data set per input
maker; the later data sets are edge cases (one element, an empty list or piece, a loop that
runs once or not at all).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from scripted_fixtures import Case, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_novel"


class WhisperKvCache(nn.Module):
    """openai/whisper whisper/model.py `install_kv_cache_hooks`: each key/value projection's
    output is appended to its own cache (`cache[module] = torch.cat([cache[module], output],
    dim=1)`) on every decoding step; here the caches are a list indexed by layer
    (`caches[i] = torch.cat([caches[i], k], 1)`), updated in a greedy decoding loop."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.keys = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
        self.out = nn.Linear(8, 11)

    def forward(self, audio: Tensor, token: Tensor, steps: Tensor) -> tuple[Tensor, Tensor]:
        caches: list[Tensor] = [audio, audio]
        tokens: list[Tensor] = []
        tok = token
        for _ in range(int(steps)):
            x = self.emb(tok)
            for i, proj in enumerate(self.keys):
                k = proj(x).unsqueeze(1)
                caches[i] = torch.cat([caches[i], k], 1)
                att = torch.softmax((caches[i] * x.unsqueeze(1)).sum(-1), -1)
                x = x + (att.unsqueeze(-1) * caches[i]).sum(1)
            tok = self.out(x).argmax(-1)
            tokens.append(tok)
        if len(tokens) == 0:
            return torch.zeros(token.size(0), 0, dtype=torch.long), caches[-1]
        return torch.stack(tokens, 1), caches[-1]


class Yolov5NmsPerImage(nn.Module):
    """ultralytics/yolov5 utils/general.py `non_max_suppression`: `output =
    [torch.zeros((0, 6))] * bs`, `for xi, x in enumerate(prediction)`: `x = x[xc[xi]]` (the
    candidates above the confidence threshold), `if not x.shape[0]: continue`, the best class
    and its score, the top `max_det` by score, `output[xi] = x[i]` (here the per-image results
    are concatenated with their image index; the IoU suppression itself is left out). The
    exporter cannot write a list multiplied by an int (`aten::mul` of a list), so the list is
    built by a comprehension over `range(bs)`."""

    def forward(self, prediction: Tensor) -> Tensor:
        bs = prediction.size(0)
        xc = prediction[..., 4] > 0.25
        output: list[Tensor] = [torch.zeros((0, 6)) for _ in range(bs)]
        for xi, x in enumerate(prediction):
            x = x[xc[xi]]
            if x.shape[0] == 0:
                continue
            conf, j = (x[:, 5:] * x[:, 4:5]).max(1, keepdim=True)
            x = torch.cat((x[:, :4], conf, j.float()), 1)
            i = conf.squeeze(1).topk(min(3, x.shape[0]))[1]
            output[xi] = x.index_select(0, i)
        return torch.cat([torch.cat([o, torch.full_like(o[:, :1], k)], 1)
                          for k, o in enumerate(output)], 0)  # fmt: skip


class FairseqFinalized(nn.Module):
    """facebookresearch/fairseq fairseq/sequence_generator.py `finalize_hypos`: `finalized:
    List[List[Dict]] = [[] for i in range(bsz)]`; each step the hypotheses that ended are added
    to their sentence's list while it holds fewer than `beam_size` (`if
    len(finalized[sent]) < beam_size: finalized[sent].append(...)`); each sentence's best
    returned. Changed to export: a list of lists does not load in onnxruntime as exported
    ("Unsupported type proto value case:0"), so the lists of all sentences are kept as one list
    of scores and one of their sentences, with a list of counts for `len(finalized[sent])`
    (0-d tensors: the exporter cannot add to an int read from a list of ints)."""

    def forward(self, eos_scores: Tensor, sents: Tensor) -> Tensor:
        bsz = 3
        beam_size = 2
        scores: list[Tensor] = []
        owners: list[int] = []
        counts: list[Tensor] = []
        for _ in range(bsz):
            counts.append(torch.tensor(0))
        for step in range(eos_scores.size(0)):
            for k in range(sents.size(1)):
                sent = int(sents[step, k])
                if sent >= 0 and bool(counts[sent] < beam_size):
                    scores.append(eos_scores[step, k] / float(step + 1))
                    owners.append(sent)
                    counts[sent] = counts[sent] + 1
        best: list[Tensor] = []
        for b in range(bsz):
            hyps: list[Tensor] = []
            for score, owner in zip(scores, owners):
                if owner == b:
                    hyps.append(score)
            if len(hyps) == 0:
                best.append(torch.tensor(-1e9))
            else:
                best.append(torch.stack(hyps).max())
        return torch.stack(best)


class MinbpeMerge(nn.Module):
    """karpathy/minbpe minbpe/base.py `merge(ids, pair, idx)`: `newids = []; i = 0; while i <
    len(ids): if ids[i] == pair[0] and i < len(ids) - 1 and ids[i+1] == pair[1]:
    newids.append(idx); i += 2 else: newids.append(ids[i]); i += 1`, applied once per merge
    rule in order (minbpe's `encode` loop, with the rules given)."""

    def forward(self, ids: Tensor, merges: Tensor) -> Tensor:
        toks: list[Tensor] = list(ids.unbind(0))
        for r in range(merges.size(0)):
            newids: list[Tensor] = []
            i = 0
            while i < len(toks):
                if (i < len(toks) - 1 and bool(toks[i] == merges[r, 0])
                        and bool(toks[i + 1] == merges[r, 1])):  # fmt: skip
                    newids.append(merges[r, 2])
                    i += 2
                else:
                    newids.append(toks[i])
                    i += 1
            toks = newids
        if len(toks) == 0:
            return torch.zeros(0, dtype=torch.long)
        return torch.stack(toks)


class GraphUnet(nn.Module):
    """pyg-team/pytorch_geometric torch_geometric/nn/models/graph_unet.py `GraphUNet.forward`:
    `xs = [x]; perms = []`, per depth a top-k pooling (`xs += [x]; perms += [perm]`), then
    back up with `j = self.depth - 1 - i; res = xs[j]; perm = perms[j]; up =
    torch.zeros_like(res); up[perm] = x; x = res + up` (dense adjacency here; TorchScript
    indexes a ModuleList only by a literal, so the layers are walked with `enumerate`)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.down = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
        self.score = nn.Parameter(torch.randn(4))

    def forward(self, x: Tensor, adj: Tensor) -> Tensor:
        depth = 2
        x = torch.relu(self.first(adj @ x))
        xs: list[Tensor] = [x]
        adjs: list[Tensor] = [adj]
        perms: list[Tensor] = []
        for d, down in enumerate(self.down):
            i = d + 1
            k = (x.size(0) + 1) // 2
            perm = (x @ self.score).topk(k)[1]
            x = x[perm] * torch.tanh(x[perm] @ self.score).unsqueeze(-1)
            adj = adj[perm][:, perm]
            x = torch.relu(down(adj @ x))
            if i < depth:
                xs += [x]
                adjs += [adj]
            perms += [perm]
        for i, up_conv in enumerate(self.up):
            j = depth - 1 - i
            res = xs[j]
            perm = perms[j]
            up = torch.zeros_like(res)
            up[perm] = x
            x = torch.relu(up_conv(adjs[j] @ (res + up)))
        return x


class SmpUnetDecoder(nn.Module):
    """qubvel/segmentation_models.pytorch segmentation_models_pytorch/decoders/unet/decoder.py
    `UnetDecoder.forward(*features)`: `features = features[1:]`, `features = features[::-1]`,
    `head = features[0]; skips = features[1:]`, and `for i, decoder_block in
    enumerate(self.blocks): skip = skips[i] if i < len(skips) else None`; the features come
    from an encoder that appends each stage's output (`features.append(x)`), as smp's encoders
    return them (a list of inputs is unrolled by the exporter and keeps no sequence; the
    `.float()` gives the exporter the element type it loses when reading the list). Changed to
    export: the exporter writes list slicing as a Slice of a sequence (invalid ONNX), so the
    two slices and the reversal are loops: `insert(0, ...)` of every feature but the first,
    then the skips appended from position 1."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 8, 3, padding=1),
             nn.Conv2d(8, 16, 3, padding=1)]
        )  # fmt: skip
        self.ups = nn.ModuleList(nn.ConvTranspose2d(c, c, 2, stride=2) for c in [16, 8, 4])
        self.blocks = nn.ModuleList(
            [nn.Conv2d(16 + 8, 8, 1), nn.Conv2d(8 + 4, 4, 1), nn.Conv2d(4, 4, 1)]
        )

    def forward(self, image: Tensor) -> Tensor:
        features: list[Tensor] = [image]
        x = image
        for stage in self.stages:
            x = F.max_pool2d(torch.relu(stage(x)), 2)
            features.append(x)
        reversed_features: list[Tensor] = []
        for k in range(1, len(features)):
            reversed_features.insert(0, features[k])
        head = reversed_features[0]
        skips: list[Tensor] = []
        for k in range(1, len(reversed_features)):
            skips.append(reversed_features[k])
        x = head
        for i, (up, block) in enumerate(zip(self.ups, self.blocks)):
            x = up(x)
            if i < len(skips):
                x = torch.cat([x, skips[i]], 1)
            x = torch.relu(block(x.float()))
        return x


class Detectron2ImageList(nn.Module):
    """facebookresearch/detectron2 detectron2/structures/image_list.py `ImageList.from_tensors`:
    `image_sizes = [(im.shape[-2], im.shape[-1]) for im in tensors]`, the largest size rounded
    up to the size divisibility, `batched_imgs = tensors[0].new_full(batch_shape, pad_value)`,
    `for i, img in enumerate(tensors): batched_imgs[i, ..., : img.shape[-2], : img.shape[-1]]
    .copy_(img)` (here each image padded with `F.pad` and stacked). The images arrive as a list
    cut from a loader's batch by their sizes (a list of three inputs is unrolled by the exporter
    and keeps no sequence)."""

    def forward(self, images: Tensor, sizes: Tensor) -> tuple[Tensor, Tensor]:
        tensors: list[Tensor] = []
        for k in range(sizes.size(0)):
            tensors.append(images[k, :, : int(sizes[k, 0]), : int(sizes[k, 1])])
        image_sizes = [torch.tensor([im.shape[-2], im.shape[-1]]) for im in tensors]
        max_size = torch.stack(image_sizes).max(0)[0]
        stride = 4
        max_size = (max_size + (stride - 1)) // stride * stride
        h, w = int(max_size[0]), int(max_size[1])
        batched: list[Tensor] = []
        for _i, img in enumerate(tensors):
            batched.append(F.pad(img, [0, w - img.shape[-1], 0, h - img.shape[-2]]))
        return torch.stack(batched), torch.stack(image_sizes)


class FastRcnnInference(nn.Module):
    """facebookresearch/detectron2 detectron2/modeling/roi_heads/fast_rcnn.py
    `fast_rcnn_inference`: `result_per_image = [fast_rcnn_inference_single_image(...) for
    scores_per_image, boxes_per_image, image_shape in zip(scores, boxes, image_shapes)]`,
    `return [x[0] for x in result_per_image], [x[1] for x in result_per_image]`; per image the
    boxes clipped, `filter_mask = scores > score_thresh`, the top by score kept. Changed to
    export: the exporter cannot write a list of tuples ("Couldn't lower all tuples"), so the
    per-image results are kept in two lists, as the two comprehensions that unzip them do; the
    per-image scores and boxes are cut in a loop by `index_select` of an `arange(start, end)`
    (`scores.split(counts.tolist())` is exported as a SplitToSequence whose sizes are a
    sequence, invalid ONNX)."""

    def forward(
        self, scores: Tensor, boxes: Tensor, counts: Tensor, shapes: Tensor
    ) -> tuple[Tensor, Tensor]:
        score_list: list[Tensor] = []
        box_list: list[Tensor] = []
        start = 0
        for n in counts.unbind(0):
            rows = torch.arange(start, start + int(n))
            score_list.append(scores.index_select(0, rows))
            box_list.append(boxes.index_select(0, rows))
            start += int(n)
        shape_list = shapes.unbind(0)
        result_boxes: list[Tensor] = []
        result_scores: list[Tensor] = []
        for s, b, shape in zip(score_list, box_list, shape_list):
            b = torch.min(b.clamp(min=0.0), torch.cat([shape.flip(0), shape.flip(0)]))
            keep = s > 0.5
            s = s[keep]
            b = b[keep]
            order = s.argsort(descending=True)[:4]
            result_boxes.append(b[order])
            result_scores.append(s[order])
        return torch.cat([r for r in result_boxes], 0), torch.cat([r for r in result_scores], 0)


class ImagesToLevels(nn.Module):
    """open-mmlab/mmdetection mmdet/core/anchor/utils.py `images_to_levels(target,
    num_levels)`: `target = torch.stack(target, 0)`, `start = 0; for n in num_levels: end =
    start + n; level_targets.append(target[:, start:end]); start = end` (the per-image
    targets regrouped per level), each level then reduced as a head's loss does. Changed to
    export: `target[:, start:end]` is written as `index_select` of `arange(start, end)` (the
    exporter writes the slice's run-time end as a scalar, which onnxruntime's Slice refuses:
    "Ends must be a 1-D array")."""

    def forward(self, t0: Tensor, t1: Tensor, num_levels: Tensor) -> Tensor:
        target = torch.stack([t0, t1], 0)
        level_targets: list[Tensor] = []
        start = 0
        for n in num_levels.unbind(0):
            end = start + int(n)
            level_targets.append(target.index_select(1, torch.arange(start, end)))
            start = end
        return torch.stack([lt.sum(1) for lt in level_targets], 1)


class YoloxDecode(nn.Module):
    """Megvii-BaseDetection/YOLOX yolox/models/yolo_head.py `YOLOXHead.decode_outputs`: `for
    (hsize, wsize), stride in zip(self.hw, self.strides)`: a meshgrid, `grids.append(grid)`,
    `strides.append(torch.full((*shape, 1), stride))`; then `grids = torch.cat(grids, dim=1)`
    and the boxes decoded as `(outputs[..., :2] + grids) * strides`. Changed to export: the
    exporter cannot write `self.hw`, a list of tuples ("Couldn't lower all tuples"), so the
    heights and widths are two lists of ints walked with `zip`."""

    def forward(self, p3: Tensor, p4: Tensor) -> Tensor:
        feats: list[Tensor] = [p3, p4]
        hs = [f.shape[-2] for f in feats]
        ws = [f.shape[-1] for f in feats]
        outputs = torch.cat([f.flatten(start_dim=2) for f in feats], dim=2).permute(0, 2, 1)
        grids: list[Tensor] = []
        strides: list[Tensor] = []
        for hsize, wsize, stride in zip(hs, ws, [8, 16]):
            yv, xv = torch.meshgrid([torch.arange(hsize), torch.arange(wsize)], indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, -1, 2)
            grids.append(grid)
            strides.append(torch.full((1, grid.shape[1], 1), stride))
        g = torch.cat(grids, dim=1).to(outputs.dtype)
        st = torch.cat(strides, dim=1).to(outputs.dtype)
        xy = (outputs[..., :2] + g) * st
        wh = torch.exp(outputs[..., 2:4]) * st
        return torch.cat([xy, wh, outputs[..., 4:]], -1)


class DetrPermutationIdx(nn.Module):
    """facebookresearch/detr models/detr.py `SetCriterion._get_src_permutation_idx(indices)`:
    `batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])`,
    `src_idx = torch.cat([src for (src, _) in indices])`, then `outputs[batch_idx, src_idx]`
    (the matched (src, tgt) pairs per image, here cut from flat inputs by `counts`). Changed to
    export: the exporter cannot write a list of tuples, so the pairs are kept as two lists
    walked with `zip`; the pieces are cut in a loop by `index_select` of an `arange(start,
    end)` (`src.split(counts.tolist())` is exported as a SplitToSequence whose sizes are a
    sequence, invalid ONNX)."""

    def forward(self, logits: Tensor, src: Tensor, tgt: Tensor, counts: Tensor) -> Tensor:
        srcs: list[Tensor] = []
        tgts: list[Tensor] = []
        start = 0
        for n in counts.unbind(0):
            rows = torch.arange(start, start + int(n))
            srcs.append(src.index_select(0, rows))
            tgts.append(tgt.index_select(0, rows))
            start += int(n)
        batch_idx = torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(zip(srcs, tgts))])
        src_idx = torch.cat([s for s in srcs])
        tgt_cls = torch.cat([t for t in tgts])
        picked = logits[batch_idx, src_idx]
        return -torch.log_softmax(picked, -1).gather(1, tgt_cls.unsqueeze(1)).squeeze(1)


class DeformableReferencePoints(nn.Module):
    """fundamentalvision/Deformable-DETR models/deformable_transformer.py
    `DeformableTransformerEncoder.get_reference_points(spatial_shapes, valid_ratios)`: `for
    lvl, (H_, W_) in enumerate(spatial_shapes)`: `torch.meshgrid(torch.linspace(0.5, H_ - 0.5,
    H_), ...)`, scaled by `valid_ratios[:, None, lvl]`, `reference_points_list.append(ref)`,
    `torch.cat(reference_points_list, 1)`. Changed to export: `torch.linspace(0.5, H_ - 0.5, H_)`
    is written as `torch.arange(H_) + 0.5`, the same values (the exporter's linspace divides by
    `steps - 1` and gives NaN for a level one cell high or wide, where PyTorch gives 0.5)."""

    def forward(self, spatial_shapes: Tensor, valid_ratios: Tensor) -> Tensor:
        reference_points_list: list[Tensor] = []
        for lvl, hw in enumerate(spatial_shapes.unbind(0)):
            h_ = int(hw[0])
            w_ = int(hw[1])
            ref_y, ref_x = torch.meshgrid(
                torch.arange(h_).float() + 0.5, torch.arange(w_).float() + 0.5, indexing="ij"
            )
            ref_y = ref_y.reshape(-1)[None] / (valid_ratios[:, None, lvl, 1] * h_)
            ref_x = ref_x.reshape(-1)[None] / (valid_ratios[:, None, lvl, 0] * w_)
            ref = torch.stack((ref_x, ref_y), -1)
            reference_points_list.append(ref)
        return torch.cat(reference_points_list, 1)


class UnpadSequence(nn.Module):
    """pytorch/pytorch torch/nn/utils/rnn.py `unpad_sequence(padded_sequences, lengths)`:
    `for seq, length in zip(padded_sequences, lengths): mask = idx < length; unpacked_seq =
    seq[mask]; unpadded_sequences.append(unpacked_seq)` (batch first), the pieces then joined
    into one packed batch as collators feed them on."""

    def forward(self, padded: Tensor, lengths: Tensor) -> Tensor:
        max_length = padded.shape[1]
        idx = torch.arange(max_length)
        unpadded: list[Tensor] = []
        for seq, length in zip(padded.unbind(0), lengths.unbind(0)):
            mask = idx < length
            unpadded.append(seq[mask])
        return torch.cat(unpadded, 0)


class NoRepeatNgram(nn.Module):
    """huggingface/transformers src/transformers/generation/logits_process.py
    `NoRepeatNGramLogitsProcessor` (`_get_ngrams`, `_calc_banned_ngram_tokens`) for bigrams:
    per hypothesis the tokens that followed its last token before (`[ngram[-1] for ngram in
    ... if ngram[:-1] == prev]`), their scores set to -inf. TorchScript refuses a comprehension
    with a condition ("Comprehension ifs are not supported yet"), so it is the loop with an `if`
    around `append` that it stands for."""

    def forward(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        rows: list[Tensor] = []
        for b in range(input_ids.size(0)):
            t = input_ids[b]
            last = t[-1]
            banned: list[Tensor] = []
            for i in range(t.size(0) - 1):
                if bool(t[i] == last):
                    banned.append(t[i + 1])
            row = scores[b]
            if len(banned) > 0:
                hit = (torch.arange(row.size(0)).unsqueeze(1) == torch.stack(banned)).any(1)
                row = row.masked_fill(hit, float("-inf"))
            rows.append(row)
        return torch.stack(rows)


class TimmForwardIntermediates(nn.Module):
    """huggingface/pytorch-image-models timm/models/resnet.py `ResNet.forward_intermediates`:
    `intermediates = []`, `for feat_idx, stage in enumerate(stages): x = stage(x); if feat_idx
    in take_indices: intermediates.append(x)`, `return x, intermediates` (a list of feature
    maps of different sizes, returned as a list). The indices to take are an input here (timm
    computes them from `indices` by `feature_take_indices`); `feat_idx in take_indices` is
    written as `bool((take_indices == feat_idx).any())`, the same test on a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.stages = nn.ModuleList(
            [nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 6, 3, stride=2, padding=1),
             nn.Conv2d(6, 8, 3, stride=2, padding=1)]
        )  # fmt: skip

    def forward(self, x: Tensor, take_indices: Tensor) -> tuple[Tensor, list[Tensor]]:
        intermediates: list[Tensor] = []
        x = torch.relu(self.stem(x))
        for feat_idx, stage in enumerate(self.stages):
            x = torch.relu(stage(x))
            if bool((take_indices == feat_idx).any()):
                intermediates.append(x)
        return x, intermediates


class NerfBatchifyRays(nn.Module):
    """yenchen-lin/nerf-pytorch run_nerf.py `batchify_rays(rays_flat, chunk)`: `for i in
    range(0, rays_flat.shape[0], chunk): ret = render_rays(rays_flat[i:i+chunk]); for k in
    ret: all_ret[k].append(ret[k])`, then `{k: torch.cat(all_ret[k], 0) for k in all_ret}`;
    `render_rays` is a small MLP at a few samples along each ray, composited by its weights
    (the dict of lists is two lists here, one per key: `rgb_map` and `depth_map`). Changed to
    export: `raw2outputs`' `torch.cumprod` (which the exporter cannot write at opset 17) is
    `exp(cumsum(log(...)))`."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, rays_flat: Tensor) -> tuple[Tensor, Tensor]:
        chunk = 4
        rgb: list[Tensor] = []
        depth: list[Tensor] = []
        t_vals = torch.linspace(0.0, 1.0, 5)
        for i in range(0, rays_flat.shape[0], chunk):
            rays = rays_flat[i : i + chunk]
            pts = rays[:, None, :3] + rays[:, None, 3:] * t_vals[None, :, None]
            raw = self.mlp(pts)
            alpha = 1.0 - torch.exp(-torch.relu(raw[..., 3]))
            trans = torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1)
            keep = torch.exp(torch.cumsum(torch.log(trans), -1))
            weights = alpha * keep[:, :-1]
            rgb.append((weights[..., None] * torch.sigmoid(raw[..., :3])).sum(-2))
            depth.append((weights * t_vals).sum(-1))
        return torch.cat(rgb, 0), torch.cat(depth, 0)


class SamPostprocessMasks(nn.Module):
    """facebookresearch/segment-anything segment_anything/modeling/sam.py `Sam.forward`: `outputs
    = []`, `for image_record, curr_embedding in zip(batched_input, image_embeddings)`: the
    decoder's low-resolution masks through `postprocess_masks` (`F.interpolate` to `img_size`,
    `masks[..., : input_size[0], : input_size[1]]`, `F.interpolate` to `original_size`), `masks
    = masks > self.mask_threshold`, `outputs.append({"masks": masks, ...})`, `return outputs`
    (a list of boolean masks, one per image at its own size; the list of dicts is the list of
    the masks here, and the mask decoder a 1x1 convolution of the embeddings). Changed to
    export: the sizes are read by image index (`input_sizes[k, 0]`), not from the lists
    `unbind` gives: read from a list element, the exporter writes the crop's run-time ends as
    a scalar, which onnxruntime's Slice refuses ("Ends must be a 1-D array")."""

    def __init__(self) -> None:
        super().__init__()
        self.decoder = nn.Conv2d(4, 2, 1)

    def forward(
        self, embeddings: Tensor, input_sizes: Tensor, original_sizes: Tensor
    ) -> list[Tensor]:
        img_size = 16
        outputs: list[Tensor] = []
        for k, curr_embedding in enumerate(embeddings.unbind(0)):
            low_res_masks = self.decoder(curr_embedding.unsqueeze(0))
            masks = F.interpolate(
                low_res_masks, [img_size, img_size], mode="bilinear", align_corners=False
            )
            masks = masks[:, :, : int(input_sizes[k, 0]), : int(input_sizes[k, 1])]
            masks = F.interpolate(
                masks, [int(original_sizes[k, 0]), int(original_sizes[k, 1])], mode="bilinear",
                align_corners=False,
            )  # fmt: skip
            outputs.append(masks[0] > 0.0)
        return outputs


class StanzaCloseConstituent(nn.Module):
    """stanfordnlp/stanza stanza/models/constituency/lstm_model.py (the transitions Shift,
    OpenConstituent, CloseConstituent): shift pushes a word, open pushes a marker, close pops
    the children until the marker (`while not is_open(stack[-1]): children.append(
    stack.pop())`), pops the marker and pushes the composed constituent; two stacks kept in
    step (the node vectors and an is-open flag, a float: the exporter cannot write `not` of a
    boolean read from a list). Changed to export: `stack.pop()` is written as `stack[-1]` then
    `del stack[-1]` (the exporter writes `pop` as a SequenceAt and drops the removal, so the
    while loop never ends). Still not exported: with `del`, the export drops the appends of
    the composed node that follow (a close gives a shorter stack than PyTorch's)."""

    def __init__(self) -> None:
        super().__init__()
        self.compose = nn.Linear(4, 4)
        self.marker = nn.Parameter(torch.randn(4))

    def forward(self, words: Tensor, transitions: Tensor) -> Tensor:
        stack: list[Tensor] = [torch.zeros(4)]
        is_open: list[Tensor] = [torch.tensor(0.0)]
        w = 0
        for i in range(transitions.size(0)):
            t = int(transitions[i])
            if t == 0:
                stack.append(words[w])
                is_open.append(torch.tensor(0.0))
                w += 1
            elif t == 1:
                stack.append(self.marker)
                is_open.append(torch.tensor(1.0))
            else:
                children: list[Tensor] = []
                while len(stack) > 1 and bool(is_open[-1] < 0.5):
                    children.append(stack[-1])
                    del stack[-1]
                    del is_open[-1]
                if len(stack) > 1:
                    del stack[-1]
                    del is_open[-1]
                if len(children) == 0:
                    node = torch.zeros(4)
                else:
                    node = torch.tanh(self.compose(torch.stack(children).sum(0)))
                stack.append(node)
                is_open.append(torch.tensor(0.0))
        return torch.stack(stack)


class CollateLeftPad(nn.Module):
    """facebookresearch/fairseq fairseq/data/data_utils.py `collate_tokens(values, pad_idx,
    left_pad=True)`: `size = max(v.size(0) for v in values)`, `res = values[0].new(len(values),
    size).fill_(pad_idx)`, `for i, v in enumerate(values): copy_tensor(v, res[i][size -
    len(v):] if left_pad else res[i][: len(v)])` (the pieces cut from a flat batch by
    `lengths`). Changed to export: the pieces are cut in a loop by `index_select` of an
    `arange(start, end)` (the exporter writes `flat.split(lengths.tolist())` as a
    SplitToSequence whose sizes are a sequence, invalid ONNX, and a slice at a run-time end as a
    Slice onnxruntime refuses in a Loop), and each padded row is built by `cat` and stacked
    (the same values as filling `res[i][size - len(v):]`)."""

    def forward(self, flat: Tensor, lengths: Tensor) -> Tensor:
        values: list[Tensor] = []
        start = 0
        for n in lengths.unbind(0):
            end = start + int(n)
            values.append(flat.index_select(0, torch.arange(start, end)))
            start = end
        size = 0
        for v in values:
            size = max(size, v.size(0))
        res: list[Tensor] = []
        for _i, v in enumerate(values):
            res.append(torch.cat([torch.full((size - v.size(0),), 1, dtype=v.dtype), v]))
        return torch.stack(res)


class DgcnnEdgeConvs(nn.Module):
    """WangYueFt/dgcnn pytorch/model.py `DGCNN.forward`: four EdgeConvs, each on the k-nearest
    neighbours of the previous output (`get_graph_feature(x, k)`, `x1 = x.max(dim=-1)[0]`),
    `x = torch.cat((x1, x2, x3, x4), dim=1)`; here the outputs kept in a list by a loop over
    the convolutions and concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Linear(6, 3), nn.Linear(6, 3), nn.Linear(6, 3)])

    def forward(self, x: Tensor) -> Tensor:
        xs: list[Tensor] = []
        k = 3
        for conv in self.convs:
            d = torch.cdist(x, x)
            idx = d.topk(k, dim=-1, largest=False)[1]
            nb = torch.stack([x[b][idx[b]] for b in range(x.size(0))])
            center = x.unsqueeze(2).expand(-1, -1, k, -1)
            feat = torch.cat([nb - center, center], -1)
            x = torch.relu(conv(feat)).max(2)[0]
            xs.append(x)
        return torch.cat(xs, -1)


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _rand(*shape: int, seed: int) -> Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def _long(values: list) -> Tensor:
    return torch.tensor(values, dtype=torch.long)


def _scalar(value: int) -> Tensor:
    return torch.tensor(value, dtype=torch.long)


def _adj(n: int, seed: int) -> Tensor:
    a = (_rand(n, n, seed=seed) > 0.5).float()
    return ((a + a.t() + torch.eye(n)) > 0).float()


CASES = [
    Case("whisper_kv_cache", WhisperKvCache, ["audio", "token", "steps"], ["tokens", "cache"],
         [lambda: [_randn(2, 5, 8, seed=1), _long([3, 4]), _scalar(4)],
          lambda: [_randn(1, 1, 8, seed=2), _long([0]), _scalar(1)],
          lambda: [_randn(3, 2, 8, seed=3), _long([1, 2, 3]), _scalar(0)]],
         {"audio": {0: "B", 1: "T"}, "token": {0: "B"}}),
    Case("yolov5_nms_per_image", Yolov5NmsPerImage, ["prediction"], ["dets"],
         [lambda: [_rand(3, 10, 8, seed=1)],
          lambda: [torch.cat([_rand(2, 6, 4, seed=2), _rand(2, 6, 1, seed=3) * 0.2,
                              _rand(2, 6, 3, seed=4)], -1)],
          lambda: [_rand(1, 2, 8, seed=5)]],
         {"prediction": {0: "B", 1: "N"}}),
    Case("minbpe_merge", MinbpeMerge, ["ids", "merges"], ["merged"],
         [lambda: [_long([1, 2, 1, 2, 3, 1, 2, 2, 3]), _long([[1, 2, 7], [7, 3, 8], [2, 3, 9]])],
          lambda: [_long([4]), _long([[4, 4, 5]])],
          lambda: [_long([1, 1, 1, 1, 1]), _long([[1, 1, 6], [6, 6, 2]])],
          lambda: [_long([3, 2]), _long([[1, 2, 7]])[:0]]],
         {"ids": {0: "T"}, "merges": {0: "R"}}),
    Case("graph_unet", GraphUnet, ["x", "adj"], ["y"],
         [lambda: [_randn(7, 4, seed=1), _adj(7, 2)], lambda: [_randn(2, 4, seed=3), _adj(2, 4)],
          lambda: [_randn(4, 4, seed=5), _adj(4, 6)]],
         {"x": {0: "N"}, "adj": {0: "N", 1: "N"}}),
    Case("detectron2_image_list", Detectron2ImageList, ["images", "sizes"],
         ["batched", "image_sizes"],
         [lambda: [_randn(3, 2, 9, 9, seed=1), _long([[5, 7], [8, 4], [6, 6]])],
          lambda: [_randn(2, 2, 4, 4, seed=4), _long([[4, 4], [1, 2]])],
          lambda: [_randn(1, 2, 3, 5, seed=5), _long([[3, 5]])]],
         {"images": {0: "N", 2: "H", 3: "W"}, "sizes": {0: "N"}}),
    Case("unpad_sequence", UnpadSequence, ["padded", "lengths"], ["packed"],
         [lambda: [_randn(3, 5, 2, seed=1), _long([5, 2, 3])],
          lambda: [_randn(1, 4, 2, seed=2), _long([1])],
          lambda: [_randn(2, 3, 2, seed=3), _long([0, 0])]],
         {"padded": {0: "B", 1: "T"}, "lengths": {0: "B"}}),
    Case("no_repeat_ngram", NoRepeatNgram, ["input_ids", "scores"], ["scores_out"],
         [lambda: [_long([[1, 2, 3, 1, 4, 1], [5, 5, 5, 5, 2, 0]]), _randn(2, 7, seed=1)],
          lambda: [_long([[3]]), _randn(1, 7, seed=2)],
          lambda: [_long([[1, 2], [2, 2]]), _randn(2, 7, seed=3)]],
         {"input_ids": {0: "B", 1: "T"}, "scores": {0: "B"}}),
    Case("dgcnn_edge_convs", DgcnnEdgeConvs, ["points"], ["features"],
         [lambda: [_randn(2, 8, 3, seed=1)], lambda: [_randn(1, 3, 3, seed=2)]],
         {"points": {0: "B", 1: "N"}}),
    Case("fairseq_finalized", FairseqFinalized, ["eos_scores", "sents"], ["best"],
         [lambda: [_randn(4, 3, seed=1), _long([[0, -1, 2], [0, 0, 0], [2, 2, -1], [1, 0, 2]])],
          lambda: [_randn(1, 2, seed=2), _long([[-1, -1]])],
          lambda: [_randn(0, 2, seed=3), _long([[0, 0]])[:0]]],
         {"eos_scores": {0: "S", 1: "K"}, "sents": {0: "S", 1: "K"}}),
    Case("smp_unet_decoder", SmpUnetDecoder, ["image"], ["y"],
         [lambda: [_randn(1, 3, 16, 16, seed=1)], lambda: [_randn(2, 3, 8, 24, seed=2)]],
         {"image": {0: "B", 2: "H", 3: "W"}}),
    Case("fast_rcnn_inference", FastRcnnInference, ["scores", "boxes", "counts", "shapes"],
         ["boxes_kept", "scores_kept"],
         [lambda: [_rand(9, seed=1), _randn(9, 4, seed=2) * 20 + 10, _long([4, 0, 5]),
                   torch.tensor([[16.0, 20.0], [8.0, 8.0], [30.0, 10.0]])],
          lambda: [_rand(2, seed=3) * 0.4, _randn(2, 4, seed=4) * 5, _long([2]),
                   torch.tensor([[4.0, 4.0]])]],
         {"scores": {0: "N"}, "boxes": {0: "N"}, "counts": {0: "I"}, "shapes": {0: "I"}}),
    Case("images_to_levels", ImagesToLevels, ["t0", "t1", "num_levels"], ["per_level"],
         [lambda: [_randn(10, 3, seed=1), _randn(10, 3, seed=2), _long([6, 3, 1])],
          lambda: [_randn(4, 3, seed=3), _randn(4, 3, seed=4), _long([4])],
          lambda: [_randn(5, 3, seed=5), _randn(5, 3, seed=6), _long([2, 0, 3])]],
         {"t0": {0: "A"}, "t1": {0: "A"}, "num_levels": {0: "L"}}),
    Case("yolox_decode", YoloxDecode, ["p3", "p4"], ["boxes"],
         [lambda: [_randn(2, 6, 4, 4, seed=1), _randn(2, 6, 2, 2, seed=2)],
          lambda: [_randn(1, 6, 3, 5, seed=3), _randn(1, 6, 1, 1, seed=4)]],
         {"p3": {0: "B", 2: "H3", 3: "W3"}, "p4": {0: "B", 2: "H4", 3: "W4"}}),
    Case("detr_permutation_idx", DetrPermutationIdx, ["logits", "src", "tgt", "counts"],
         ["loss"],
         [lambda: [_randn(3, 6, 5, seed=1), _long([0, 4, 5, 1, 2, 3]),
                   _long([1, 0, 4, 2, 2, 3]), _long([3, 0, 3])],
          lambda: [_randn(1, 6, 5, seed=2), _long([2]), _long([4]), _long([1])]],
         {"logits": {0: "B"}, "src": {0: "M"}, "tgt": {0: "M"}, "counts": {0: "B"}}),
    Case("deformable_reference_points", DeformableReferencePoints,
         ["spatial_shapes", "valid_ratios"], ["reference_points"],
         [lambda: [_long([[4, 6], [2, 3], [1, 2]]), 0.5 + 0.5 * _rand(2, 3, 2, seed=1)],
          lambda: [_long([[3, 3]]), 0.5 + 0.5 * _rand(1, 1, 2, seed=2)]],
         {"spatial_shapes": {0: "L"}, "valid_ratios": {0: "B", 1: "L"}}),
    Case("collate_left_pad", CollateLeftPad, ["flat", "lengths"], ["batch"],
         [lambda: [_long([4, 5, 6, 7, 8, 9]), _long([3, 1, 2])],
          lambda: [_long([2]), _long([1])],
          lambda: [_long([3, 3]), _long([0, 2, 0])]],
         {"flat": {0: "T"}, "lengths": {0: "B"}}),
    Case("timm_forward_intermediates", TimmForwardIntermediates, ["x", "take_indices"],
         ["final", "intermediates"],
         [lambda: [_randn(2, 3, 8, 8, seed=1), _long([0, 2])],
          lambda: [_randn(1, 3, 5, 7, seed=2), _long([1])],
          lambda: [_randn(1, 3, 4, 4, seed=3), _long([5])],
          lambda: [_randn(2, 3, 6, 6, seed=4), _long([0, 1, 2])]],
         {"x": {0: "B", 2: "H", 3: "W"}, "take_indices": {0: "K"}}),
    Case("nerf_batchify_rays", NerfBatchifyRays, ["rays_flat"], ["rgb_map", "depth_map"],
         [lambda: [_randn(10, 6, seed=1)], lambda: [_randn(4, 6, seed=2)],
          lambda: [_randn(1, 6, seed=3)]],
         {"rays_flat": {0: "N"}}),
    Case("sam_postprocess_masks", SamPostprocessMasks,
         ["embeddings", "input_sizes", "original_sizes"], ["masks"],
         [lambda: [_randn(3, 4, 4, 4, seed=1), _long([[16, 12], [10, 16], [16, 16]]),
                   _long([[32, 24], [5, 8], [16, 16]])],
          lambda: [_randn(1, 4, 4, 4, seed=2), _long([[8, 16]]), _long([[3, 6]])],
          lambda: [_randn(2, 4, 4, 4, seed=3), _long([[1, 1], [16, 4]]), _long([[1, 1], [20, 5]])]],
         {"embeddings": {0: "B"}, "input_sizes": {0: "B"}, "original_sizes": {0: "B"}}),
]  # fmt: skip

# Written, not exported: its export does not compute what PyTorch does under onnxruntime, so it
# measures nothing:
# - stanza_close_constituent: `stack.pop()` is exported without the removal (the while loop
#   never ends); written as `stack[-1]` and `del stack[-1]`, the appends after the close are
#   dropped from the export (data set 0 gives one row where PyTorch gives three).
NOT_EXPORTED = [
    Case("stanza_close_constituent", StanzaCloseConstituent, ["words", "transitions"], ["stack"],
         [lambda: [_randn(5, 4, seed=1), _long([1, 0, 1, 0, 0, 2, 0, 2, 1, 0, 2])],
          lambda: [_randn(1, 4, seed=2), _long([0])],
          lambda: [_randn(2, 4, seed=3), _long([2, 1, 2, 0, 0])]],
         {"words": {0: "W"}, "transitions": {0: "T"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
