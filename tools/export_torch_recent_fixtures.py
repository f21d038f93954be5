#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other exporter of tools/ used,
a fifth set to measure the tensor forms on programs nobody here tuned them for
(tests/fixtures/torch_recent).

    /work/torchvenv/bin/python tools/export_torch_recent_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_recent.py runs the
exports under onnxruntime and compares them with what PyTorch computed). Each module transcribes
the list handling of one public function, named in its docstring (repository, file, function),
with small layers and random weights, scripted and exported by the TorchScript exporter
(`dynamo=False`) at opset 17 or 18 (each case says which), as a user would. Written to
`tests/fixtures/torch_recent/<case>/`: `model.onnx` and `test_data_set_<k>/input_<i>.pb`,
`output_<i>.pb`, one data set per input maker; the later data sets are edge cases (one element,
an empty list, a loop that runs once or not at all).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from scripted_fixtures import Case, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_recent"


class EncodecResidualVq(nn.Module):
    """facebookresearch/encodec encodec/quantization/core_vq.py `ResidualVectorQuantization.
    encode` (`residual = x; all_indices = []; for layer in self.layers[:n_q]: indices =
    layer.encode(residual); quantized = layer.decode(indices); residual = residual - quantized;
    all_indices.append(indices)`, `torch.stack(all_indices)`) and `decode` (`for i, indices in
    enumerate(q_indices): layer = self.layers[i]; quantized_out = quantized_out +
    layer.decode(indices)`), with `EuclideanCodebook.quantize` (the nearest code by `-(x^2 - 2 x
    e + e^2)`, `max(-1).indices`). `n_q` (from the bandwidth) is an input: the codebooks are one
    parameter walked by a loop that breaks at `n_q` (TorchScript indexes a ModuleList only by a
    literal)."""

    def __init__(self) -> None:
        super().__init__()
        self.codebooks = nn.Parameter(torch.randn(4, 6, 3))

    def forward(self, x: Tensor, n_q: Tensor) -> tuple[Tensor, Tensor]:
        residual = x
        all_indices: list[Tensor] = []
        for q in range(self.codebooks.size(0)):
            if q >= int(n_q):
                break
            embed = self.codebooks[q]
            dist = -(
                residual.pow(2).sum(-1, keepdim=True)
                - 2 * residual @ embed.t()
                + embed.pow(2).sum(-1).unsqueeze(0).unsqueeze(0)
            )
            indices = dist.max(-1).indices
            quantized = F.embedding(indices, embed)
            residual = residual - quantized
            all_indices.append(indices)
        codes = torch.stack(all_indices)
        quantized_out = torch.zeros_like(x)
        for i, indices in enumerate(codes):
            quantized_out = quantized_out + F.embedding(indices, self.codebooks[i])
        return codes, quantized_out


class WhisperTimestampRules(nn.Module):
    """openai/whisper whisper/decoding.py `ApplyTimestampRules.apply`: per hypothesis
    `sampled_tokens = tokens[k, self.sample_begin:]`, `seq = [t for t in
    sampled_tokens.tolist()]`, `last_was_timestamp = len(seq) >= 1 and seq[-1] >=
    timestamp_begin`, `penultimate_was_timestamp = len(seq) < 2 or seq[-2] >= timestamp_begin`;
    after a timestamp pair only text, after one timestamp no text (`logits[k, :eot] = -inf`);
    `timestamps = sampled_tokens[sampled_tokens.ge(timestamp_begin)]`, if any the timestamps
    before the last (`timestamps[-1]`, `+ 1` unless a pair just closed) are suppressed; then the
    timestamp rule by probability (`timestamp_logprob > max_text_token_logprob`: text
    suppressed). A toy vocabulary: text 0-4, eot 5, timestamps 6-11, `sample_begin` 1. Changed
    to export: `seq` is a list of 0-d tensors (`unbind`; a list of ints from `tolist` exports as
    a sequence onnxruntime rejects), the suppressions are masks built from `arange` (slice
    assignments at run-time positions), and `timestamps[-1]` is read through a list made of
    them."""

    def forward(self, tokens: Tensor, logits: Tensor) -> Tensor:
        eot = 5
        timestamp_begin = 6
        logits = logits.clone()
        vocab = torch.arange(logits.size(1))
        for k in range(tokens.size(0)):
            sampled = tokens[k].index_select(0, torch.arange(1, tokens.size(1)))
            seq = list(sampled.unbind(0))
            last_was_timestamp = len(seq) >= 1 and bool(seq[-1] >= timestamp_begin)
            penultimate_was_timestamp = len(seq) < 2 or bool(seq[-2] >= timestamp_begin)
            row = logits[k]
            if last_was_timestamp:
                if penultimate_was_timestamp:
                    row = row.masked_fill(vocab >= timestamp_begin, float("-inf"))
                else:
                    row = row.masked_fill(vocab < eot, float("-inf"))
            stamps = list(sampled[sampled.ge(timestamp_begin)].unbind(0))
            if len(stamps) > 0:
                if last_was_timestamp and not penultimate_was_timestamp:
                    timestamp_last = stamps[-1]
                else:
                    timestamp_last = stamps[-1] + 1
                row = row.masked_fill(
                    (vocab >= timestamp_begin) & (vocab < timestamp_last), float("-inf")
                )
            logprobs = torch.log_softmax(row, -1)
            timestamp_logprob = torch.logsumexp(logprobs[timestamp_begin:], -1)
            if bool(timestamp_logprob > logprobs[:timestamp_begin].max()):
                row = row.masked_fill(vocab < timestamp_begin, float("-inf"))
            logits[k] = row
        return logits


class HfBeamHypothesesAdd(nn.Module):
    """huggingface/transformers generation/beam_search.py `BeamHypotheses.add(hyp,
    sum_logprobs)`: `score = sum_logprobs / (hyp.shape[-1] ** self.length_penalty)`, `if len(self)
    < self.num_beams or score > self.worst_score: self.beams.append((score, hyp)); if len(self) >
    self.num_beams: sorted_next_scores = sorted([(s, idx) for idx, (s, _) in
    enumerate(self.beams)]); del self.beams[sorted_next_scores[0][1]]; self.worst_score =
    sorted_next_scores[1][0]`, `else: self.worst_score = min(score, self.worst_score)`; called
    for each finished candidate in turn (`num_beams` 3, length penalty 1.0), the kept beams
    returned as their scores and their hypotheses padded with -1. Changed to export: the beams
    are two lists (scores as 0-d tensors, hypotheses cut to their lengths by `index_select` of an
    `arange`), the sorted pairs are an `argsort` of the stacked scores."""

    def forward(self, hyps: Tensor, lengths: Tensor, sum_logprobs: Tensor) -> tuple[Tensor, Tensor]:
        num_beams = 3
        scores: list[Tensor] = []
        beams: list[Tensor] = []
        worst_score = torch.tensor(1e9)
        for c in range(hyps.size(0)):
            n = int(lengths[c])
            hyp = hyps[c].index_select(0, torch.arange(0, n))
            score = sum_logprobs[c] / float(n)
            if len(scores) < num_beams or bool(score > worst_score):
                scores.append(score)
                beams.append(hyp)
                if len(scores) > num_beams:
                    order = torch.stack(scores).argsort()
                    del scores[int(order[0])]
                    del beams[int(order[0])]
                    worst_score = torch.stack(scores).min()
                else:
                    worst_score = torch.minimum(score, worst_score)
        if len(scores) == 0:
            return torch.zeros(0), torch.zeros(0, hyps.size(1), dtype=torch.long)
        padded = [F.pad(b, (0, hyps.size(1) - b.size(0)), value=-1.0) for b in beams]
        return torch.stack(scores), torch.stack(padded)


class DiffusersPndmPlms(nn.Module):
    """huggingface/diffusers schedulers/scheduling_pndm.py `PNDMScheduler.step_plms` (with
    `skip_prk_steps`): `if self.counter != 1: self.ets = self.ets[-3:]; self.ets.append(
    model_output)`; `if len(self.ets) == 1 and self.counter == 0: self.cur_sample = sample`,
    `elif len(self.ets) == 1 and self.counter == 1: model_output = (model_output + self.ets[-1])
    / 2; sample = self.cur_sample`, `elif len(self.ets) == 2: (3 * ets[-1] - ets[-2]) / 2`,
    `elif len(self.ets) == 3: (23 * ets[-1] - 16 * ets[-2] + 5 * ets[-3]) / 12`, else the
    fourth-order combination of `ets[-1]` to `ets[-4]`; `_get_prev_sample` (the DDIM-like
    update from `alphas_cumprod`); the sampling loop (`for t in scheduler.timesteps: noise_pred =
    unet(latents, t); latents = scheduler.step(noise_pred, t, latents)`) with a one-convolution
    "unet" and an input number of steps. Changed to export: `self.ets[-3:]` is `del ets[0]`
    when it is longer than three (one is appended a step; list slicing does not export), and
    the `skip_prk_steps` warm-up (`counter == 1`: the first timestep repeated, the two outputs
    averaged, the saved `cur_sample` restored) is left out: exported, the saved sample came out
    of an `If` as a sequence and onnxruntime failed ("Trying to get a TensorSeq"), an exporter
    fault, not a list one; so the first step is the first-order one."""

    def __init__(self) -> None:
        super().__init__()
        self.unet = nn.Conv2d(2, 2, 3, padding=1)
        self.time = nn.Linear(1, 2)
        self.register_buffer("alphas_cumprod", torch.linspace(0.99, 0.2, 12))

    def forward(self, latents: Tensor, num_steps: Tensor) -> Tensor:
        ets: list[Tensor] = []
        sample = latents
        for k in range(int(num_steps)):
            t = 10 - k
            prev_t = t - 1
            temb = self.time(torch.full((1, 1), float(t) / 11.0)).view(1, 2, 1, 1)
            model_output = self.unet(sample) + temb
            if len(ets) > 3:
                del ets[0]
            ets.append(model_output)
            if len(ets) == 1:
                model_output = ets[-1]
            elif len(ets) == 2:
                model_output = (3 * ets[-1] - ets[-2]) / 2
            elif len(ets) == 3:
                model_output = (23 * ets[-1] - 16 * ets[-2] + 5 * ets[-3]) / 12
            else:
                model_output = (55 * ets[-1] - 59 * ets[-2] + 37 * ets[-3] - 9 * ets[-4]) / 24
            alpha = self.alphas_cumprod[t]
            alpha_prev = self.alphas_cumprod[max(prev_t, 0)]
            sample_coeff = (alpha_prev / alpha).sqrt()
            denom = alpha * (1 - alpha_prev).sqrt() + (alpha * (1 - alpha) * alpha_prev).sqrt()
            sample = sample_coeff * sample - (alpha_prev - alpha) * model_output / denom
        return sample


class DiffusersLmsDerivatives(nn.Module):
    """huggingface/diffusers schedulers/scheduling_lms_discrete.py `LMSDiscreteScheduler.step`:
    `derivative = (sample - pred_original_sample) / sigma`, `self.derivatives.append(
    derivative)`, `if len(self.derivatives) > order: self.derivatives.pop(0)`, `order =
    min(self.step_index + 1, order)`, `lms_coeffs = [self.get_lms_coefficient(order,
    self.step_index, curr_order) for curr_order in range(order)]`, `prev_sample = sample +
    sum(coeff * derivative for coeff, derivative in zip(lms_coeffs, reversed(
    self.derivatives)))`, over a sampling loop of an input number of steps (order 4). The
    coefficients (`scipy.integrate.quad` of the Lagrange basis over the sigmas) are a fixed table
    here, a buffer read by step and order; `sum` of the generator is a running sum and
    `reversed` a loop from the end."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Linear(3, 3)
        self.register_buffer("sigmas", torch.linspace(3.0, 0.1, 9))
        self.register_buffer("coeffs", torch.rand(9, 4) - 0.5)

    def forward(self, sample: Tensor, num_steps: Tensor) -> Tensor:
        order = 4
        derivatives: list[Tensor] = []
        for step_index in range(int(num_steps)):
            sigma = self.sigmas[step_index]
            pred_original_sample = sample - sigma * self.model(sample / (sigma * sigma + 1).sqrt())
            derivatives.append((sample - pred_original_sample) / sigma)
            if len(derivatives) > order:
                derivatives.pop(0)
            cur_order = min(step_index + 1, order)
            lms_coeffs = [self.coeffs[step_index, o] for o in range(cur_order)]
            total = torch.zeros_like(sample)
            k = len(derivatives) - 1
            for coeff in lms_coeffs:
                total = total + coeff * derivatives[k]
                k -= 1
            sample = sample + total
        return sample


class ByteTrackStracks(nn.Module):
    """ifzhang/ByteTrack yolox/tracker/byte_tracker.py, the list helpers `BYTETracker.update`
    ends with: `self.lost_stracks = sub_stracks(self.lost_stracks, self.tracked_stracks)` (`stracks
    = {t.track_id: t for t in tlista}`, `for t in tlistb: if stracks.get(tid, 0): del
    stracks[tid]`), `remove_duplicate_stracks(self.tracked_stracks, self.lost_stracks)` (`pdist =
    iou_distance(stracksa, stracksb)`, `for p, q in zip(*np.where(pdist < 0.15)): timep =
    stracksa[p].frame_id - stracksa[p].start_frame; ... if timep > timeq: dupb.append(q) else:
    dupa.append(p)`, `resa = [t for i, t in enumerate(stracksa) if not i in dupa]`) and
    `joint_stracks(tlista, tlistb)` (`exists = {}`, the first list, then those of the second
    whose id is new), the output tracks as rows (id, age, box). Changed to export: a track is a
    row tensor in a list; the dicts and `in` are loops over lists of 0-d ids setting flags (the
    exporter writes neither a dict of tensors nor `in` of a list)."""

    def forward(self, tracked: Tensor, lost: Tensor) -> Tensor:  # rows: id, age, x1, y1, x2, y2
        tlist = list(tracked.unbind(0))
        llist: list[Tensor] = []
        for t in lost.unbind(0):
            found = False
            for u in tlist:
                if bool(u[0] == t[0]):
                    found = True
            if not found:
                llist.append(t)
        dupa: list[Tensor] = []
        dupb: list[Tensor] = []
        for p, a in enumerate(tlist):
            for q, b in enumerate(llist):
                lt = torch.maximum(a[2:4], b[2:4])
                rb = torch.minimum(a[4:6], b[4:6])
                inter = (rb - lt).clamp(min=0).prod()
                area_a = (a[4:6] - a[2:4]).prod()
                area_b = (b[4:6] - b[2:4]).prod()
                iou = inter / (area_a + area_b - inter)
                if bool(1 - iou < 0.15):
                    if bool(a[1] > b[1]):
                        dupb.append(torch.tensor(q))
                    else:
                        dupa.append(torch.tensor(p))
        res: list[Tensor] = []
        for i, t in enumerate(tlist):
            dup = False
            for d in dupa:
                if int(d) == i:
                    dup = True
            if not dup:
                res.append(t)
        for i, t in enumerate(llist):
            dup = False
            for d in dupb:
                if int(d) == i:
                    dup = True
            exists = False
            for r in res:
                if bool(r[0] == t[0]):
                    exists = True
            if not dup and not exists:
                res.append(t)
        if len(res) == 0:
            return torch.zeros(0, 6)
        return torch.stack(res)


class SpeculativeGreedyAccept(nn.Module):
    """feifeibear/LLMSpeculativeSampling sampling/speculative_sampling.py
    `speculative_sampling` (Leviathan et al.), greedy: the target model scores the prefix and
    the draft in one pass; `for i in range(gamma): j = x[:, prefix_len + i]`, accepted while the
    target's choice at that position is the draft token, else the target's token is taken
    (`t = ...; is_all_accept = False; break`); if all were accepted the target's next token is
    appended (`t = sample(target_model_cache._prob_history[:, -1, :])`), `prefix =
    torch.cat((prefix, t), dim=1)`. The models are an embedding and a causal running mean with a
    linear head; the accepted tokens are a list of 0-d tensors (appended, then stacked onto the
    prefix)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.head = nn.Linear(4, 7)

    def forward(self, prefix: Tensor, draft: Tensor) -> Tensor:
        x = torch.cat([prefix, draft])
        h = self.embed(x).cumsum(0) / torch.arange(1, x.size(0) + 1).unsqueeze(1).float()
        choice = self.head(h).argmax(-1)
        prefix_len = prefix.size(0)
        accepted: list[Tensor] = []
        all_accepted = True
        for i in range(draft.size(0)):
            target_tok = choice[prefix_len + i - 1]
            if bool(draft[i] == target_tok):
                accepted.append(draft[i])
            else:
                accepted.append(target_tok)
                all_accepted = False
                break
        if all_accepted:
            accepted.append(choice[-1])
        return torch.cat([prefix, torch.stack(accepted)])


class DinoEncoderProposals(nn.Module):
    """IDEA-Research/DINO models/dino/utils.py `gen_encoder_output_proposals(memory,
    memory_padding_mask, spatial_shapes)` (as in Deformable DETR's two-stage): `proposals = [];
    _cur = 0; for lvl, (H_, W_) in enumerate(spatial_shapes): mask_flatten_ =
    memory_padding_mask[:, _cur:(_cur + H_ * W_)].view(N_, H_, W_, 1)`, the valid height and
    width, a meshgrid scaled by them, `wh = torch.ones_like(grid) * 0.05 * (2.0 ** lvl)`,
    `proposals.append(torch.cat((grid, wh), -1).view(N_, -1, 4))`, `_cur += (H_ * W_)`; the
    proposals concatenated, their validity, the inverse sigmoid, the masked fills, and the
    two-stage top-k (`topk_proposals = torch.topk(enc_outputs_class.max(-1)[0], topk, dim=1)[1]`,
    gathered). Changed to export: the run-time slice of the mask is `index_select` of an
    `arange`, `linspace(0, H_ - 1, H_)` is `arange`, and the levels' shapes are read by index
    (`spatial_shapes[lvl, 0]`): iterated, the rows are a list whose elements the exporter gives
    the wrong rank (a `view` to them failed under onnxruntime, "Ranks of input data are
    different")."""

    def __init__(self) -> None:
        super().__init__()
        self.enc_output = nn.Linear(4, 4)
        self.class_embed = nn.Linear(4, 3)

    def forward(
        self, memory: Tensor, memory_padding_mask: Tensor, spatial_shapes: Tensor
    ) -> tuple[Tensor, Tensor]:
        n = memory.size(0)
        proposals: list[Tensor] = []
        cur = 0
        for lvl in range(spatial_shapes.size(0)):
            h, w = int(spatial_shapes[lvl, 0]), int(spatial_shapes[lvl, 1])
            mask_flatten = memory_padding_mask.index_select(1, torch.arange(cur, cur + h * w))
            mask_flatten = mask_flatten.view(n, h, w, 1)
            valid_h = torch.sum(~mask_flatten[:, :, 0, 0], 1)
            valid_w = torch.sum(~mask_flatten[:, 0, :, 0], 1)
            grid = torch.meshgrid(
                [torch.arange(h, dtype=torch.float), torch.arange(w, dtype=torch.float)],
                indexing="ij",
            )
            grid_xy = torch.cat([grid[1].unsqueeze(-1), grid[0].unsqueeze(-1)], -1)
            scale = torch.cat([valid_w.unsqueeze(-1), valid_h.unsqueeze(-1)], 1).view(n, 1, 1, 2)
            grid_xy = (grid_xy.unsqueeze(0).expand(n, -1, -1, -1) + 0.5) / scale
            wh = torch.ones_like(grid_xy) * 0.05 * (2.0**lvl)
            proposals.append(torch.cat((grid_xy, wh), -1).view(n, -1, 4))
            cur += h * w
        output_proposals = torch.cat(proposals, 1)
        valid = ((output_proposals > 0.01) & (output_proposals < 0.99)).all(-1, keepdim=True)
        output_proposals = torch.log(output_proposals / (1 - output_proposals))
        output_proposals = output_proposals.masked_fill(memory_padding_mask.unsqueeze(-1), 1e4)
        output_proposals = output_proposals.masked_fill(~valid, 1e4)
        output_memory = memory.masked_fill(memory_padding_mask.unsqueeze(-1), 0.0)
        output_memory = output_memory.masked_fill(~valid, 0.0)
        output_memory = self.enc_output(output_memory)
        logits = self.class_embed(output_memory).max(-1)[0]
        topk = min(4, logits.size(1))
        topk_idx = torch.topk(logits, topk, dim=1)[1]
        boxes = torch.gather(output_proposals, 1, topk_idx.unsqueeze(-1).expand(-1, -1, 4))
        return boxes, output_proposals


class MmdetLevelsToImages(nn.Module):
    """open-mmlab/mmdetection mmdet/models/utils/misc.py `levels_to_images(mlvl_tensor)`:
    `batch_size = mlvl_tensor[0].size(0); batch_list = [[] for _ in range(batch_size)];
    channels = mlvl_tensor[0].size(1); for t in mlvl_tensor: t = t.permute(0, 2, 3, 1); t =
    t.view(batch_size, -1, channels).contiguous(); for img in range(batch_size):
    batch_list[img].append(t[img])`, `return [torch.cat(item, 0) for item in batch_list]` (a
    list of lists), as mmdet/models/dense_heads/paa_head.py `PAAHead.loss_by_feat` calls it on
    a head's per-level maps; each image's scores then reduced to its top-k mean. The levels come
    from a small backbone appending each stage's head output. Changed to export: the list of
    lists (`List[List[Tensor]]` exports as a type onnxruntime cannot load, "Unsupported type
    proto value case:0") is built image by image, each image's list filled from the levels and
    concatenated (the same lists, in the same order)."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1),
             nn.Conv2d(4, 4, 3, stride=2, padding=1)]
        )  # fmt: skip
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, image: Tensor) -> Tensor:
        mlvl_tensor: list[Tensor] = []
        x = image
        for stage in self.stages:
            x = torch.relu(stage(x))
            mlvl_tensor.append(self.head(x))
        batch_size = mlvl_tensor[0].size(0)
        channels = mlvl_tensor[0].size(1)
        flat: list[Tensor] = []
        for t in mlvl_tensor:
            t = t.permute(0, 2, 3, 1)
            flat.append(t.reshape(batch_size, -1, channels).contiguous())
        images: list[Tensor] = []
        for img in range(batch_size):
            item: list[Tensor] = []
            for t in flat:
                item.append(t[img])
            images.append(torch.cat(item, 0))
        out: list[Tensor] = []
        for scores in images:
            best = scores.sigmoid().max(-1)[0]
            out.append(best.topk(min(3, best.size(0)))[0].mean())
        return torch.stack(out)


class OpenposePeaks(nn.Module):
    """Hzzone/pytorch-openpose src/body.py `Body.__call__`: `all_peaks = []; peak_counter = 0;
    for part in range(18):` the map compared with its four shifted copies and a threshold
    (`peaks_binary = np.logical_and.reduce((one_heatmap >= map_left, ...))`), `peaks =
    list(zip(np.nonzero(peaks_binary)[1], np.nonzero(peaks_binary)[0]))`, `peaks_with_score =
    [x + (map_ori[x[1], x[0]],) for x in peaks]`, the ids `range(peak_counter, peak_counter +
    len(peaks))`, `all_peaks.append(peaks_with_score_and_id)`, `peak_counter += len(peaks)`;
    then per limb `candA = all_peaks[limbSeq[k][0] - 1]; candB = all_peaks[limbSeq[k][1] - 1]`,
    `if nA != 0 and nB != 0:` the pairs' scores, the best pair kept (`connection_all.append(
    connection)`), else `special_k.append(k); connection_all.append([])`. Five parts and three
    limbs here; the Gaussian smoothing left out; a limb's score is the heatmap midpoint score of
    its closest pair. Changed to export: the per-part peaks are tensors of rows (x, y, score, id)
    of different lengths in a list, an empty limb a row of -1; the limb's row is a `cat` of its
    values reshaped to one element (a `stack` of them exported a `Concat` of mixed ranks, which
    onnxruntime rejected)."""

    def forward(self, heatmaps: Tensor) -> tuple[Tensor, Tensor]:
        thre1 = 0.1
        all_peaks: list[Tensor] = []
        peak_counter = 0
        h, w = heatmaps.size(1), heatmaps.size(2)
        for part in range(heatmaps.size(0)):
            m = heatmaps[part]
            padded = F.pad(m.unsqueeze(0), (1, 1, 1, 1)).squeeze(0)
            left = padded[1 : h + 1, 0:w]
            right = padded[1 : h + 1, 2 : w + 2]
            up = padded[0:h, 1 : w + 1]
            down = padded[2 : h + 2, 1 : w + 1]
            binary = (m >= left) & (m >= right) & (m >= up) & (m >= down) & (m > thre1)
            nz = torch.nonzero(binary)
            scores = m[nz[:, 0], nz[:, 1]]
            ids = torch.arange(peak_counter, peak_counter + nz.size(0)).float()
            all_peaks.append(torch.stack([nz[:, 1].float(), nz[:, 0].float(), scores, ids], 1))
            peak_counter += nz.size(0)
        limb_seq = [(0, 1), (1, 2), (3, 4)]
        connection_all: list[Tensor] = []
        for a, b in limb_seq:
            cand_a = all_peaks[a].float()
            cand_b = all_peaks[b].float()
            if cand_a.size(0) != 0 and cand_b.size(0) != 0:
                d = (cand_a[:, :2].unsqueeze(1) - cand_b[:, :2].unsqueeze(0)).pow(2).sum(-1)
                best = d.flatten().argmin()
                i = best // cand_b.size(0)
                j = best % cand_b.size(0)
                mid = (cand_a[i, :2] + cand_b[j, :2]) / 2
                mx, my = mid[0].long(), mid[1].long()
                score = heatmaps[a, my, mx] + heatmaps[b, my, mx]
                connection_all.append(
                    torch.cat([cand_a[i, 3].reshape(1), cand_b[j, 3].reshape(1), score.reshape(1)])
                )
            else:
                connection_all.append(torch.full([3], -1.0))
        return torch.cat(all_peaks, 0), torch.stack(connection_all)


class T5RelativeBiasLayers(nn.Module):
    """huggingface/transformers models/t5/modeling_t5.py `T5Stack.forward`: `for i,
    layer_module in enumerate(self.block): if output_hidden_states: all_hidden_states =
    all_hidden_states + (hidden_states,)`, the layer (`has_relative_attention_bias=bool(i ==
    0)`: `position_bias` computed by the first layer's `compute_bias` from
    `_relative_position_bucket` and passed to the others), `if output_attentions:
    all_attentions = all_attentions + (layer_outputs[3],)`, the final hidden state added last;
    one head, bidirectional buckets (32 buckets, max distance 128). The tuples are lists.
    Changed to export: a layer is one projection to query, key and value, the three layers'
    weights one parameter walked by a loop over its first axis (a loop over a ModuleList is
    unrolled by TorchScript, and the lists vanish from the export with it)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Parameter(torch.randn(3, 4, 12) * 0.5)
        self.bias = nn.Embedding(32, 1)

    def _bucket(self, relative_position: Tensor) -> Tensor:
        num_buckets = 16
        ret = (relative_position > 0).long() * num_buckets
        n = relative_position.abs()
        max_exact = num_buckets // 2
        is_small = n < max_exact
        large = (
            max_exact
            + (
                torch.log(n.float() / max_exact)
                / torch.log(torch.tensor(128.0 / max_exact))
                * (num_buckets - max_exact)
            ).long()
        )
        large = torch.minimum(large, torch.full_like(large, num_buckets - 1))
        return ret + torch.where(is_small, n, large)

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        all_hidden_states: list[Tensor] = []
        all_attentions: list[Tensor] = []
        t = hidden_states.size(1)
        position_bias = torch.zeros(1, t, t)
        for i in range(self.qkv.size(0)):
            all_hidden_states.append(hidden_states)
            if i == 0:
                pos = torch.arange(t)
                buckets = self._bucket(pos.unsqueeze(0) - pos.unsqueeze(1))
                position_bias = self.bias(buckets).permute(2, 0, 1)
            q, k, v = (hidden_states @ self.qkv[i]).chunk(3, -1)
            attn = torch.softmax(q @ k.transpose(1, 2) + position_bias, -1)
            hidden_states = hidden_states + attn @ v
            all_attentions.append(attn)
        all_hidden_states.append(hidden_states)
        return torch.stack(all_hidden_states), torch.stack(all_attentions)


class ConvnextOutIndices(nn.Module):
    """facebookresearch/ConvNeXt object_detection/mmdet/models/backbones/convnext.py
    `ConvNeXt.forward_features`: `outs = []; for i in range(4): x =
    self.downsample_layers[i](x); x = self.stages[i](x); if i in self.out_indices: norm_layer =
    getattr(self, f'norm{i}'); x_out = norm_layer(x); outs.append(x_out)`, `return
    tuple(outs)`: the list of maps of different channels and sizes is the output (a sequence),
    `out_indices` (0, 2, 3). A stage is a depthwise convolution and a pointwise MLP with a
    residual; the norms are channel-first LayerNorms. The ModuleLists are walked by `zip`
    (TorchScript indexes them only by literals)."""

    def __init__(self) -> None:
        super().__init__()
        dims = [3, 4, 6, 8, 8]
        self.downsample_layers = nn.ModuleList(
            nn.Conv2d(dims[i], dims[i + 1], 2, stride=2) for i in range(4)
        )
        self.stages = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(dims[i + 1], dims[i + 1], 3, padding=1, groups=dims[i + 1]),
                nn.Conv2d(dims[i + 1], dims[i + 1], 1), nn.GELU(),
            )
            for i in range(4)
        )  # fmt: skip
        self.norms = nn.ModuleList(nn.GroupNorm(1, dims[i + 1]) for i in range(4))

    def forward(self, x: Tensor) -> list[Tensor]:
        out_indices = [0, 2, 3]
        outs: list[Tensor] = []
        for i, (down, stage, norm) in enumerate(
            zip(self.downsample_layers, self.stages, self.norms)
        ):
            x = down(x)
            x = x + stage(x)
            if i in out_indices:
                outs.append(norm(x))
        return outs


class SpeechbrainUndoPadding(nn.Module):
    """speechbrain/speechbrain speechbrain/utils/data_utils.py `undo_padding(batch, lengths)`:
    `batch_max_len = batch.shape[1]; as_list = []; for seq, seq_length in zip(batch, lengths):
    actual_size = int(torch.round(seq_length * batch_max_len)); seq_true = seq.narrow(0, 0,
    actual_size); as_list.append(seq_true.tolist())` (relative lengths), as a greedy decoder's
    output is un-padded (`S2SGreedySearcher` results, `hyps = undo_padding(predictions,
    lens)`); each sequence is the argmax of a linear layer over its frames. The list is the
    output (a sequence of tensors of different lengths); `.tolist()` is left out (the elements
    stay tensors), the rounded size is cast by `.long()` before `int` (without it the export
    gives the slice a float end, an invalid model), and `narrow` is `index_select` of an
    `arange` (exported, `narrow` at a run-time size failed under onnxruntime: "Ends must be a 1-D
    array")."""

    def __init__(self) -> None:
        super().__init__()
        self.out = nn.Linear(3, 5)

    def forward(self, batch: Tensor, lengths: Tensor) -> list[Tensor]:
        predictions = self.out(batch).argmax(-1)
        batch_max_len = predictions.size(1)
        as_list: list[Tensor] = []
        for seq, seq_length in zip(predictions.unbind(0), lengths.unbind(0)):
            actual_size = int(torch.round(seq_length * batch_max_len).long())
            seq_true = seq.index_select(0, torch.arange(0, actual_size))
            as_list.append(seq_true)
        return as_list


class TorchvisionBatchedNmsVanilla(nn.Module):
    """pytorch/vision torchvision/ops/boxes.py `_batched_nms_vanilla(boxes, scores, idxs,
    iou_threshold)`: `keep_mask = torch.zeros_like(scores, dtype=torch.bool); for class_id in
    torch.unique(idxs): curr_indices = torch.where(idxs == class_id)[0]; curr_keep_indices =
    nms(boxes[curr_indices], scores[curr_indices], iou_threshold); keep_mask[curr_indices[
    curr_keep_indices]] = True`, `keep_indices = torch.where(keep_mask)[0]; return
    keep_indices[scores[keep_indices].sort(descending=True)[1]]`; `nms` is the greedy loop of
    torchvision's CPU kernel written in Python (`keep.append(i)` for the best box left, the
    boxes that overlap it by more than the threshold dropped). No box: no class, an empty
    result."""

    def forward(self, boxes: Tensor, scores: Tensor, idxs: Tensor) -> Tensor:
        keep_mask = torch.zeros_like(scores, dtype=torch.bool)
        for class_id in torch.unique(idxs):
            curr_indices = torch.where(idxs == class_id)[0]
            b = boxes[curr_indices]
            order = scores[curr_indices].argsort(descending=True)
            keep: list[Tensor] = []
            while order.numel() > 0:
                i = order[0]
                keep.append(i)
                rest = order[1:]
                lt = torch.maximum(b[i, :2], b[rest, :2])
                rb = torch.minimum(b[i, 2:], b[rest, 2:])
                inter = (rb - lt).clamp(min=0).prod(-1)
                area_i = (b[i, 2:] - b[i, :2]).prod()
                area_r = (b[rest, 2:] - b[rest, :2]).prod(-1)
                iou = inter / (area_i + area_r - inter)
                order = rest[iou <= 0.5]
            keep_mask[curr_indices[torch.stack(keep)]] = True
        keep_indices = torch.where(keep_mask)[0]
        return keep_indices[scores[keep_indices].sort(descending=True)[1]]


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _rand(*shape: int, seed: int) -> Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def _long(values: list) -> Tensor:
    return torch.tensor(values, dtype=torch.long)


def _scalar(value: int) -> Tensor:
    return torch.tensor(value, dtype=torch.long)


def _float(values: list) -> Tensor:
    return torch.tensor(values, dtype=torch.float)


def _tracks(rows: list) -> Tensor:
    return torch.tensor(rows, dtype=torch.float).reshape(-1, 6)


def _boxes(n: int, seed: int) -> Tensor:
    xy = _rand(n, 2, seed=seed) * 10
    return torch.cat([xy, xy + 1 + _rand(n, 2, seed=seed + 50) * 5], 1)


def _padding_mask(n: int, shapes: list, valid: list) -> Tensor:
    levels = []
    for h, w in shapes:
        m = torch.zeros(n, h, w, dtype=torch.bool)
        for b, (vh, vw) in enumerate(valid):
            m[b, (h * vh + 9) // 10 :, :] = True
            m[b, :, (w * vw + 9) // 10 :] = True
        levels.append(m.view(n, -1))
    return torch.cat(levels, 1)


def _peaks(seed: int, parts: int, h: int, w: int, scale: float) -> Tensor:
    return _rand(parts, h, w, seed=seed) * scale


CASES = [
    Case("encodec_residual_vq", EncodecResidualVq, ["x", "n_q"], ["codes", "quantized"],
         [lambda: [_randn(2, 5, 3, seed=1), _scalar(3)],
          lambda: [_randn(1, 1, 3, seed=2), _scalar(1)],
          lambda: [_randn(2, 3, 3, seed=3), _scalar(6)]],
         {"x": {0: "B", 1: "T"}}, opset=18),
    Case("whisper_timestamp_rules", WhisperTimestampRules, ["tokens", "logits"], ["logits_out"],
         [lambda: [_long([[9, 1, 7, 8], [9, 2, 3, 7], [9, 6, 2, 4]]), _randn(3, 12, seed=1)],
          lambda: [_long([[9]]), _randn(1, 12, seed=2)],
          lambda: [_long([[9, 7]]), _randn(1, 12, seed=3)],
          lambda: [_long([[9, 6, 6], [9, 1, 2]]), _randn(2, 12, seed=4) - 3]],
         {"tokens": {0: "B", 1: "T"}, "logits": {0: "B"}}),
    Case("hf_beam_hypotheses_add", HfBeamHypothesesAdd, ["hyps", "lengths", "sum_logprobs"],
         ["beam_scores", "beam_hyps"],
         [lambda: [_long([[1, 2, 3, 4, 5], [2, 3, 4, 0, 0], [5, 5, 0, 0, 0], [1, 1, 1, 1, 0],
                          [3, 0, 0, 0, 0], [4, 4, 4, 4, 4]]),
                   _long([5, 3, 2, 4, 1, 5]), -_rand(6, seed=1) * 6],
          lambda: [_long([[7, 8]]), _long([2]), _float([-1.5])],
          lambda: [_long([[1, 2]])[:0], _long([])[:0], _float([])]],
         {"hyps": {0: "N", 1: "L"}, "lengths": {0: "N"}, "sum_logprobs": {0: "N"}}),
    Case("diffusers_pndm_plms", DiffusersPndmPlms, ["latents", "num_steps"], ["sample"],
         [lambda: [_randn(1, 2, 6, 6, seed=1), _scalar(7)],
          lambda: [_randn(1, 2, 4, 5, seed=2), _scalar(0)],
          lambda: [_randn(2, 2, 3, 3, seed=3), _scalar(2)]],
         {"latents": {0: "B", 2: "H", 3: "W"}}, opset=18),
    Case("diffusers_lms_derivatives", DiffusersLmsDerivatives, ["sample", "num_steps"],
         ["sample_out"],
         [lambda: [_randn(2, 4, 3, seed=1), _scalar(7)],
          lambda: [_randn(1, 1, 3, seed=2), _scalar(1)],
          lambda: [_randn(1, 2, 3, seed=3), _scalar(0)]],
         {"sample": {0: "B", 1: "T"}}),
    Case("bytetrack_stracks", ByteTrackStracks, ["tracked", "lost"], ["tracks"],
         [lambda: [_tracks([[1, 5, 0, 0, 4, 4], [2, 2, 10, 10, 14, 14], [3, 7, 20, 0, 24, 5]]),
                   _tracks([[4, 9, 0.1, 0, 4, 4], [2, 1, 10, 10, 14, 14], [5, 1, 10, 10.2, 14, 14],
                            [6, 3, 30, 30, 31, 31]])],
          lambda: [_tracks([[1, 1, 0, 0, 2, 2]]), _tracks([])],
          lambda: [_tracks([]), _tracks([[3, 2, 0, 0, 1, 1]])],
          lambda: [_tracks([]), _tracks([])]],
         {"tracked": {0: "N"}, "lost": {0: "M"}}),
    Case("speculative_greedy_accept", SpeculativeGreedyAccept, ["prefix", "draft"], ["tokens"],
         [lambda: [_long([1, 3, 2]), _long([2, 3, 4, 6])],
          lambda: [_long([5]), _long([])],
          lambda: [_long([2, 2]), _long([3, 3])],
          lambda: [_long([2, 2]), _long([6])]],
         {"prefix": {0: "P"}, "draft": {0: "G"}}),
    Case("dino_encoder_proposals", DinoEncoderProposals,
         ["memory", "memory_padding_mask", "spatial_shapes"], ["topk_boxes", "proposals"],
         [lambda: [_randn(2, 4 * 4 + 2 * 2 + 1, 4, seed=1),
                   _padding_mask(2, [(4, 4), (2, 2), (1, 1)], [(10, 10), (6, 8)]),
                   _long([[4, 4], [2, 2], [1, 1]])],
          lambda: [_randn(1, 6, 4, seed=2), _padding_mask(1, [(2, 3)], [(10, 10)]),
                   _long([[2, 3]])],
          lambda: [_randn(1, 12 + 3, 4, seed=3),
                   _padding_mask(1, [(3, 4), (1, 3)], [(7, 9)]), _long([[3, 4], [1, 3]])]],
         {"memory": {0: "N", 1: "S"}, "memory_padding_mask": {0: "N", 1: "S"},
          "spatial_shapes": {0: "L"}}),
    Case("mmdet_levels_to_images", MmdetLevelsToImages, ["image"], ["scores"],
         [lambda: [_randn(2, 3, 16, 16, seed=1)], lambda: [_randn(1, 3, 4, 4, seed=2)],
          lambda: [_randn(3, 3, 8, 12, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}, opset=18),
    Case("openpose_peaks", OpenposePeaks, ["heatmaps"], ["peaks", "connections"],
         [lambda: [_peaks(1, 5, 6, 7, 1.0)], lambda: [_peaks(2, 5, 1, 1, 0.05)],
          lambda: [torch.cat([_peaks(3, 2, 4, 4, 1.0), _peaks(4, 3, 4, 4, 0.05)])]],
         {"heatmaps": {1: "H", 2: "W"}}),
    Case("t5_relative_bias_layers", T5RelativeBiasLayers, ["hidden_states"],
         ["all_hidden_states", "all_attentions"],
         [lambda: [_randn(2, 20, 4, seed=1)], lambda: [_randn(1, 1, 4, seed=2)],
          lambda: [_randn(1, 3, 4, seed=3)]],
         {"hidden_states": {0: "B", 1: "T"}}),
    Case("convnext_out_indices", ConvnextOutIndices, ["image"], ["features"],
         [lambda: [_randn(2, 3, 32, 32, seed=1)], lambda: [_randn(1, 3, 16, 16, seed=2)],
          lambda: [_randn(1, 3, 32, 48, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}, opset=18),
    Case("speechbrain_undo_padding", SpeechbrainUndoPadding, ["batch", "lengths"], ["hyps"],
         [lambda: [_randn(3, 5, 3, seed=1), _float([1.0, 0.6, 0.2])],
          lambda: [_randn(1, 1, 3, seed=2), _float([1.0])],
          lambda: [_randn(2, 4, 3, seed=3), _float([0.0, 0.5])]],
         {"batch": {0: "B", 1: "T"}, "lengths": {0: "B"}}),
    Case("torchvision_batched_nms_vanilla", TorchvisionBatchedNmsVanilla,
         ["boxes", "scores", "idxs"], ["keep"],
         [lambda: [torch.cat([_boxes(6, 1), _boxes(4, 1)[:, :] + 0.3]), _rand(10, seed=2),
                   _long([0, 1, 0, 2, 1, 0, 0, 1, 0, 2])],
          lambda: [_boxes(1, 3), _rand(1, seed=4), _long([3])],
          lambda: [_boxes(0, 5), _rand(0, seed=6), _long([])]],
         {"boxes": {0: "N"}, "scores": {0: "N"}, "idxs": {0: "N"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
