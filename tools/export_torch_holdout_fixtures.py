#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other exporter of tools/ used,
a sixth set to measure the tensor forms on programs nobody here tuned them for
(tests/fixtures/torch_holdout).

    /work/torchvenv/bin/python tools/export_torch_holdout_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_holdout.py runs
the exports under onnxruntime and compares them with what PyTorch computed). Each module
transcribes the list handling of one public function, named in its docstring (repository, file,
function), with small layers and random weights, scripted and exported by the TorchScript
exporter (`dynamo=False`) at opset 17 or 18 (each case says which), as a user would. Written to
`tests/fixtures/torch_holdout/<case>/`: `model.onnx` and `test_data_set_<k>/input_<i>.pb`,
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
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_holdout"


class KmeansCentres(nn.Module):
    """subhadarship/kmeans_pytorch kmeans_pytorch/__init__.py `kmeans`: `while True: dis =
    pairwise_distance(X, initial_state); choice_cluster = torch.argmin(dis, dim=1);
    initial_state_pre = initial_state.clone(); for index in range(num_clusters): selected =
    torch.nonzero(choice_cluster == index).squeeze(); selected = torch.index_select(X, 0,
    selected); initial_state[index] = selected.mean(dim=0)`, `center_shift =
    torch.sum(torch.sqrt(torch.sum((initial_state - initial_state_pre) ** 2, dim=1)))`, `if
    center_shift ** 2 < tol: break`, `if iter_limit != 0 and iteration >= iter_limit: break`;
    the centres of every iteration collected in a list and stacked (as a progress trace would).
    Changed to export: the initial centres are an input (the original draws them at random), a
    cluster that selects no point keeps its centre (the original's mean is NaN there), and
    `nonzero(...).squeeze()` is `nonzero(...)[:, 0]` (squeezed, one point is a 0-d index)."""

    def forward(self, x: Tensor, initial_state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        tol = 1e-4
        iter_limit = 6
        state = initial_state.clone()
        history: list[Tensor] = []
        iteration = 0
        choice_cluster = torch.zeros(x.size(0), dtype=torch.long)
        while True:
            dis = ((x.unsqueeze(1) - state.unsqueeze(0)) ** 2).sum(-1)
            choice_cluster = torch.argmin(dis, dim=1)
            state_pre = state.clone()
            for index in range(state.size(0)):
                selected = torch.nonzero(choice_cluster == index)[:, 0]
                if selected.size(0) > 0:
                    state[index] = torch.index_select(x, 0, selected).mean(dim=0)
            history.append(state.clone())
            center_shift = torch.sum(torch.sqrt(torch.sum((state - state_pre) ** 2, dim=1)))
            iteration = iteration + 1
            if bool(center_shift**2 < tol):
                break
            if iteration >= iter_limit:
                break
        return choice_cluster, state, torch.stack(history)


class DiscriminatorP(nn.Module):
    """jik876/hifi-gan models.py `DiscriminatorP` (two convolutions, small), used by
    `HifiganPeriodFeatureLoss`."""

    def __init__(self, period: int) -> None:
        super().__init__()
        self.period = period
        self.convs = nn.ModuleList(
            [nn.Conv2d(1, 4, (5, 1), (3, 1), padding=(2, 0)),
             nn.Conv2d(4, 4, (5, 1), (3, 1), padding=(2, 0))]
        )  # fmt: skip
        self.conv_post = nn.Conv2d(4, 1, (3, 1), 1, padding=(1, 0))

    def forward(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        fmap: list[Tensor] = []
        b, c, t = x.shape
        if t % self.period != 0:
            n_pad = self.period - (t % self.period)
            x = F.pad(x, (0, n_pad), "reflect")
            t = t + n_pad
        x = x.view(b, c, t // self.period, self.period)
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return torch.flatten(x, 1, -1), fmap


class HifiganPeriodFeatureLoss(nn.Module):
    """jik876/hifi-gan models.py `DiscriminatorP.forward` (`fmap = []`; `if t % self.period != 0:
    n_pad = self.period - (t % self.period); x = F.pad(x, (0, n_pad), "reflect")`; `x = x.view(b, c,
    t // self.period, self.period)`; `for l in self.convs: x = l(x); x = F.leaky_relu(x,
    LRELU_SLOPE); fmap.append(x)`, the post conv appended too), `MultiPeriodDiscriminator.forward`
    (`for i, d in enumerate(self.discriminators): y_d_r, fmap_r = d(y); y_d_g, fmap_g = d(y_hat);
    y_d_rs.append(y_d_r); fmap_rs.append(fmap_r) ...`), `feature_loss` (`for dr, dg in zip(fmap_r,
    fmap_g): for rl, gl in zip(dr, dg): loss += torch.mean(torch.abs(rl - gl))`, times 2) and
    `generator_loss` (`for dg in disc_outputs: l = torch.mean((1 - dg) ** 2); gen_losses.append(l);
    loss += l`); periods 2 and 3, two convs each. Changed to export: the per-discriminator lists of
    feature maps are one flat list appended by every discriminator (a list of lists, which the
    earlier sets found exports as a type onnxruntime cannot load, was not tried), and `1 - dg` is
    `1.0 - dg` (the export typed the 1 as int64 for a list element, whose type it did not know: an
    invalid model)."""

    def __init__(self) -> None:
        super().__init__()
        self.discriminators = nn.ModuleList([DiscriminatorP(2), DiscriminatorP(3)])

    def forward(self, y: Tensor, y_hat: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y_d_gs: list[Tensor] = []
        fmap_rs: list[Tensor] = []
        fmap_gs: list[Tensor] = []
        for d in self.discriminators:
            _, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_gs.append(y_d_g)
            for f in fmap_r:
                fmap_rs.append(f)
            for f in fmap_g:
                fmap_gs.append(f)
        loss_fm = torch.zeros(())
        for rl, gl in zip(fmap_rs, fmap_gs):
            loss_fm = loss_fm + torch.mean(torch.abs(rl - gl))
        loss_gen = torch.zeros(())
        gen_losses: list[Tensor] = []
        for dg in y_d_gs:
            m = torch.mean((1.0 - dg) ** 2)
            gen_losses.append(m)
            loss_gen = loss_gen + m
        return loss_fm * 2, loss_gen, torch.stack(gen_losses)


class Fastspeech2LengthRegulator(nn.Module):
    """ming024/FastSpeech2 model/modules.py `LengthRegulator.LR` (`output = list(); mel_len =
    list(); for batch, expand_target in zip(x, duration): expanded = self.expand(batch,
    expand_target); output.append(expanded); mel_len.append(expanded.shape[0])`, `output =
    pad(output)`), `LengthRegulator.expand` (`out = list(); for i, vec in enumerate(batch):
    expand_size = predicted[i].item(); out.append(vec.expand(max(int(expand_size), 0), -1)); out =
    torch.cat(out, 0)`) and utils/tools.py `pad` (`max_len = max([input_ele[i].size(0) for i in
    range(len(input_ele))])`, each padded by `F.pad(batch, (0, 0, 0, max_len - batch.size(0)))` into
    `out_list`, `torch.stack(out_list)`), with the durations from `VarianceAdaptor` at inference
    (`torch.clamp(torch.round(torch.exp(log_duration_prediction) - 1) * d_control, min=0)`), the
    predictor one linear layer. Changed to export: `.item()` is `int(...)` of the 0-d tensor cast by
    `.long()` (without it the export keeps the float), `expand(n, -1)` is an `index_select` of an
    `arange(n)` times 0 (the same rows; for an element of a list the export of `expand` compared a
    float shape with an int64 one, an invalid model, and that of `repeat` or `zeros(n)` concatenated
    scalars), each expansion is reshaped to its shape (the export gave it the rank of a row, and
    padded it so), and the lengths are a list of 0-d tensors, stacked (a list of ints, which the
    earlier sets found exports badly, was not tried)."""

    def __init__(self) -> None:
        super().__init__()
        self.duration = nn.Linear(3, 1)
        nn.init.constant_(self.duration.bias, 1.0)  # durations of a few frames

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        log_duration = self.duration(x).squeeze(-1)
        duration = torch.clamp(torch.round(torch.exp(log_duration) - 1) * 1.0, min=0)
        output: list[Tensor] = []
        mel_len: list[Tensor] = []
        for batch, expand_target in zip(x.unbind(0), duration.unbind(0)):
            out: list[Tensor] = []
            for i, vec in enumerate(batch.unbind(0)):
                expand_size = int(expand_target[i].long())
                out.append(vec.unsqueeze(0).index_select(0, torch.arange(max(expand_size, 0)) * 0))
            expanded = torch.cat(out, 0).reshape(-1, x.size(2))
            output.append(expanded)
            mel_len.append(torch.tensor(expanded.size(0)))
        max_len = int(torch.stack(mel_len).max())
        out_list: list[Tensor] = []
        for batch in output:
            out_list.append(F.pad(batch, (0, 0, 0, max_len - batch.size(0)), "constant", 0.0))
        return torch.stack(out_list), torch.stack(mel_len)


class MusicgenDelayPattern(nn.Module):
    """facebookresearch/audiocraft audiocraft/modules/codebooks_patterns.py
    `DelayedPatternProvider.get_pattern` (`out: PatternLayout = [[]]; max_delay =
    max(self.delays); for t in range(self.flatten_first, timesteps + max_delay): v = []; for q,
    delay in enumerate(self.delays): t_for_q = t - delay; if t_for_q >= self.flatten_first:
    v.append(LayoutCoord(t_for_q, q)); out.append(v)`), `Pattern.build_pattern_sequence` (each
    step's codes read at its coordinates, `special_token` where a coordinate is missing or past
    the end) and `Pattern.revert_pattern_sequence` (the codes read back from the delayed
    steps), with `LMModel.forward`'s input `sum([self.emb[k](sequence[:, k]) for k in
    range(K)])`; delays 0 to 3, four codebooks. Changed to export: the layout is not built as a
    list of coordinates and then scattered; each step's column is built from the list of
    codebooks directly (the same values), and the embeddings are one table offset per codebook
    (a loop over a ModuleList is unrolled by TorchScript)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(4 * 9, 3)

    def forward(self, codes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        delays = [0, 1, 2, 3]
        special = 8
        max_delay = 3
        b = codes.size(0)
        timesteps = codes.size(2)
        steps: list[Tensor] = [torch.full([b, len(delays)], special, dtype=torch.long)]
        for t in range(timesteps + max_delay):
            v: list[Tensor] = []
            for q, delay in enumerate(delays):
                t_for_q = t - delay
                if t_for_q >= 0 and t_for_q < timesteps:
                    v.append(codes[:, q, t_for_q])
                else:
                    v.append(torch.full([b], special, dtype=torch.long))
            steps.append(torch.stack(v, 1))
        sequence = torch.stack(steps, 2)
        reverted: list[Tensor] = []
        for q, delay in enumerate(delays):
            row: list[Tensor] = []
            for t in range(timesteps):
                row.append(sequence[:, q, t + delay + 1])
            if len(row) == 0:
                reverted.append(torch.zeros(b, 0, dtype=torch.long))
            else:
                reverted.append(torch.stack(row, 1))
        embeds: list[Tensor] = [self.emb(sequence[:, k] + 9 * k) for k in range(len(delays))]
        total = torch.zeros(b, sequence.size(2), 3)
        for e in embeds:
            total = total + e
        return sequence, torch.stack(reverted, 1), total


class Sam2MemoryBank(nn.Module):
    """facebookresearch/sam2 sam2/modeling/sam2_base.py `SAM2Base._prepare_memory_conditioned_
    features` over a video (`track_step` per frame, its memory stored): `to_cat_memory,
    to_cat_memory_pos_embed = [], []`; the conditioning frame's memory at `t_pos` 0; `for t_pos
    in range(1, self.num_maskmem): t_rel = self.num_maskmem - t_pos; prev_frame_idx = frame_idx
    - t_rel; out = output_dict["non_cond_frame_outputs"].get(prev_frame_idx, None);
    t_pos_and_prevs.append((t_pos, out))`, `for t_pos, prev in t_pos_and_prevs: if prev is
    None: continue; to_cat_memory.append(feats.flatten(2).permute(2, 0, 1)); maskmem_enc =
    maskmem_enc + self.maskmem_tpos_enc[self.num_maskmem - t_pos - 1];
    to_cat_memory_pos_embed.append(maskmem_enc)`, `memory = torch.cat(to_cat_memory, dim=0)`,
    the first frame `pix_feat + self.no_mem_embed`; `num_maskmem` 3. The memory attention is one
    cross-attention, the mask decoder and memory encoder one linear layer each. Changed to
    export: the dict of frame outputs is a list indexed by frame (every frame stores one), a
    missing frame is a negative index, and the temporal encodings are one parameter read by
    row
    expanded to the memory's rows, and the concatenated memory and encodings are
    reshaped to its shape, and the attention scores are a broadcast product summed (the
    exporter knows no rank for them and fails on the transpose of `q @ k.t()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.no_mem_embed = nn.Parameter(torch.randn(1, 4) * 0.1)
        self.maskmem_tpos_enc = nn.Parameter(torch.randn(3, 1, 4) * 0.1)
        self.q = nn.Linear(4, 4)
        self.kv = nn.Linear(4, 8)
        self.mask_head = nn.Linear(4, 1)
        self.mem_enc = nn.Linear(4, 4)

    def forward(self, frames: Tensor) -> Tensor:  # frames: F, C, H, W
        num_maskmem = 3
        memories: list[Tensor] = []
        masks: list[Tensor] = []
        for frame_idx in range(frames.size(0)):
            pix = frames[frame_idx].flatten(1).t()
            if frame_idx == 0:
                pix = pix + self.no_mem_embed
            else:
                to_cat_memory: list[Tensor] = [memories[0]]
                to_cat_pos: list[Tensor] = [
                    self.maskmem_tpos_enc[num_maskmem - 1].expand(memories[0].size(0), 4)
                ]
                for t_pos in range(1, num_maskmem):
                    t_rel = num_maskmem - t_pos
                    prev_frame_idx = frame_idx - t_rel
                    if prev_frame_idx < 1:
                        continue
                    feats = memories[prev_frame_idx]
                    to_cat_memory.append(feats)
                    to_cat_pos.append(
                        self.maskmem_tpos_enc[num_maskmem - t_pos - 1].expand(feats.size(0), 4)
                    )
                memory = torch.cat(to_cat_memory, 0).reshape(-1, 4)
                memory_pos = torch.cat(to_cat_pos, 0).reshape(-1, 4)
                kv = self.kv(memory + memory_pos)
                k = kv[:, :4]
                v = kv[:, 4:]
                attn = torch.softmax((self.q(pix).unsqueeze(1) * k.unsqueeze(0)).sum(-1) / 2.0, -1)
                pix = pix + attn @ v
            mask = self.mask_head(pix)
            memories.append(self.mem_enc(pix * torch.sigmoid(mask)))
            masks.append(mask.t().reshape(frames.size(2), frames.size(3)))
        return torch.stack(masks)


class MambaSelectiveScanRef(nn.Module):
    """state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py `selective_scan_ref(u,
    delta, A, B, C, D, z, delta_bias, delta_softplus=True)` with variable B and C: `delta =
    F.softplus(delta + delta_bias[..., None])`, `x = A.new_zeros((batch, dim, dstate)); ys = []`,
    `deltaA = torch.exp(torch.einsum('bdl,dn->bdln', delta, A))`, `deltaB_u =
    torch.einsum('bdl,bnl,bdl->bdln', delta, B, u)`, `for i in range(u.shape[2]): x = deltaA[:,
    :, i] * x + deltaB_u[:, :, i]; y = torch.einsum('bdn,bn->bd', x, C[:, :, i]); if i ==
    u.shape[2] - 1: last_state = x; ys.append(y)`, `y = torch.stack(ys, dim=2)`, `out = y + u *
    rearrange(D, "d -> d 1")`, `out = out * F.silu(z)`, returned with the last state; the
    projections of `Mamba.forward` around it (`in_proj` to x and z, `x_proj` to dt, B and C,
    `dt_proj`, `A = -torch.exp(self.A_log)`) without the causal convolution. Changed to export:
    the last state is the state after the loop (`last_state` is None until the last step in the
    original; an Optional was not tried)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_proj = nn.Linear(3, 8)
        self.x_proj = nn.Linear(4, 1 + 2 * 2)
        self.dt_proj = nn.Linear(1, 4)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, 3).float().repeat(4, 1)))
        self.D = nn.Parameter(torch.ones(4))
        self.out_proj = nn.Linear(4, 3)

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:  # B, L, 3
        xz = self.in_proj(hidden_states).transpose(1, 2)
        u, z = xz.chunk(2, 1)  # B, D, L
        x_dbl = self.x_proj(u.transpose(1, 2))
        dt, b_mat, c_mat = x_dbl.split([1, 2, 2], -1)
        delta = (dt @ self.dt_proj.weight.t()).transpose(1, 2)
        delta = F.softplus(delta + self.dt_proj.bias.unsqueeze(-1))
        b_mat = b_mat.transpose(1, 2)
        c_mat = c_mat.transpose(1, 2)
        a = -torch.exp(self.A_log)
        x = a.new_zeros((u.size(0), a.size(0), a.size(1)))
        ys: list[Tensor] = []
        delta_a = torch.exp(torch.einsum("bdl,dn->bdln", delta, a))
        delta_b_u = torch.einsum("bdl,bnl,bdl->bdln", delta, b_mat, u)
        for i in range(u.size(2)):
            x = delta_a[:, :, i] * x + delta_b_u[:, :, i]
            y = torch.einsum("bdn,bn->bd", x, c_mat[:, :, i])
            ys.append(y)
        y = torch.stack(ys, dim=2)
        out = y + u * self.D.unsqueeze(-1)
        out = out * F.silu(z)
        return self.out_proj(out.transpose(1, 2)), x


class RtdetrEncoderDecoder(nn.Module):
    """lyuwenyu/RT-DETR rtdetr_pytorch/src/zoo/rtdetr/rtdetr_decoder.py
    `RTDETRTransformer._get_encoder_input` (`feat_flatten = []; spatial_shapes = [];
    level_start_index = [0, ]; for i, feat in enumerate(proj_feats): _, _, h, w = feat.shape;
    feat_flatten.append(feat.flatten(2).permute(0, 2, 1)); spatial_shapes.append([h, w]);
    level_start_index.append(h * w + level_start_index[-1])`, `level_start_index.pop()`),
    `_generate_anchors` (per level a meshgrid, `(grid_xy.unsqueeze(0) + 0.5) / valid_WH`, `wh =
    torch.ones_like(grid_xy) * grid_size * (2.0 ** lvl)`, `anchors.append(...)`, concatenated,
    `valid_mask`, the inverse sigmoid, `torch.where(valid_mask, anchors, torch.inf)`),
    `_get_decoder_input` (`enc_score_head`, `enc_bbox_head(...) + anchors`, `torch.topk(
    enc_outputs_class.max(-1).values, self.num_queries, dim=1)`, gathered) and
    `TransformerDecoder.forward` at inference (`dec_out_bboxes = []; dec_out_logits = []; for i,
    layer in enumerate(self.layers): ... inter_ref_bbox = F.sigmoid(bbox_head[i](output) +
    inverse_sigmoid(ref_points_detach)); if ... elif i == self.eval_idx:
    dec_out_logits.append(score_head[i](output)); dec_out_bboxes.append(inter_ref_bbox); break`,
    `torch.stack(dec_out_bboxes)`), eval_idx the last layer. The backbone's three levels are strided
    convolutions appended to a list; a decoder layer is one cross-attention. Changed to export: the
    spatial shapes are a list of 0-d tensors (a list of lists, which the earlier sets found
    onnxruntime cannot load, was not tried), the decoder layers' weights one parameter read by layer
    index (a loop over a ModuleList is unrolled by TorchScript), `torch.inf` is a large float,
    `meshgrid` two expanded `arange`s and `flatten(2)` a `reshape` (the exporter knows no rank for
    the list's elements and fails on `flatten`; the concatenated memory is reshaped to its shape,
    whose rank it does not know either)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.ModuleList(
            nn.Conv2d(3 if i == 0 else 4, 4, 3, stride=2, padding=1) for i in range(3)
        )
        self.enc_output = nn.Linear(4, 4)
        self.enc_score_head = nn.Linear(4, 2)
        self.enc_bbox_head = nn.Linear(4, 4)
        self.query_pos = nn.Linear(4, 4)
        self.layers = nn.Parameter(torch.randn(3, 4, 4) * 0.5)
        self.bbox_head = nn.Parameter(torch.randn(3, 4, 4) * 0.5)
        self.score_head = nn.Parameter(torch.randn(3, 4, 2) * 0.5)

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        proj_feats: list[Tensor] = []
        x = image
        for conv in self.backbone:
            x = F.relu(conv(x))
            proj_feats.append(x)
        feat_flatten: list[Tensor] = []
        spatial_shapes: list[Tensor] = []
        level_start_index: list[Tensor] = [torch.tensor(0)]
        for feat in proj_feats:
            h = feat.size(2)
            w = feat.size(3)
            feat_flatten.append(feat.reshape(feat.size(0), feat.size(1), h * w).permute(0, 2, 1))
            spatial_shapes.append(torch.tensor([h, w]))
            level_start_index.append(h * w + level_start_index[-1])
        memory = torch.cat(feat_flatten, 1).reshape(image.size(0), -1, 4)
        level_start_index.pop()
        anchors_list: list[Tensor] = []
        for lvl, shape in enumerate(spatial_shapes):
            h = int(shape[0])
            w = int(shape[1])
            grid_y = torch.arange(h).unsqueeze(1).expand(h, w)
            grid_x = torch.arange(w).unsqueeze(0).expand(h, w)
            grid_xy = torch.stack([grid_x, grid_y], -1).float()
            valid_wh = torch.tensor([w, h]).float()
            grid_xy = (grid_xy.unsqueeze(0) + 0.5) / valid_wh
            wh = torch.ones_like(grid_xy) * 0.05 * (2.0**lvl)
            anchors_list.append(torch.cat([grid_xy, wh], -1).reshape(-1, h * w, 4))
        anchors = torch.cat(anchors_list, 1)
        eps = 0.01
        valid_mask = ((anchors > eps) * (anchors < 1 - eps)).all(-1, keepdim=True)
        anchors = torch.log(anchors / (1 - anchors))
        anchors = torch.where(valid_mask, anchors, torch.full_like(anchors, 1e4))
        memory = valid_mask.float() * memory
        output_memory = self.enc_output(memory)
        enc_outputs_class = self.enc_score_head(output_memory)
        enc_outputs_coord_unact = self.enc_bbox_head(output_memory) + anchors
        topk_ind = torch.topk(enc_outputs_class.max(-1).values, 3, dim=1)[1]
        ref_points_unact = enc_outputs_coord_unact.gather(1, topk_ind.unsqueeze(-1).repeat(1, 1, 4))
        target = output_memory.gather(1, topk_ind.unsqueeze(-1).repeat(1, 1, 4))
        dec_out_bboxes: list[Tensor] = []
        dec_out_logits: list[Tensor] = []
        ref_points_detach = torch.sigmoid(ref_points_unact)
        output = target
        eval_idx = self.layers.size(0) - 1
        for i in range(self.layers.size(0)):
            q = output @ self.layers[i] + self.query_pos(ref_points_detach)
            attn = torch.softmax(q @ memory.transpose(1, 2) / 2.0, -1)
            output = output + attn @ memory
            ref_clamped = ref_points_detach.clamp(1e-5, 1 - 1e-5)
            inverse = torch.log(ref_clamped / (1 - ref_clamped))
            inter_ref_bbox = torch.sigmoid(output @ self.bbox_head[i] + inverse)
            if i == eval_idx:
                dec_out_logits.append(output @ self.score_head[i])
                dec_out_bboxes.append(inter_ref_bbox)
                break
            ref_points_detach = inter_ref_bbox
        return (
            torch.stack(dec_out_bboxes),
            torch.stack(dec_out_logits),
            torch.stack(level_start_index),
        )


class MtcnnPyramid(nn.Module):
    """timesler/facenet-pytorch models/utils/detect_face.py `detect_face`, the first stage: the
    scale pyramid (`m = 12.0 / minsize; minl = min(h, w); minl = minl * m; scale_i = m; scales = [];
    while minl >= 12: scales.append(scale_i); scale_i = scale_i * factor; minl = minl * factor`),
    `for scale in scales: im_data = imresample(imgs, (int(h * scale + 1), int(w * scale + 1)));
    im_data = (im_data - 127.5) * 0.0078125; reg, probs = pnet(im_data); boxes_scale,
    image_inds_scale = generateBoundingBox(reg, probs[:, 1], scale, threshold[0]);
    boxes.append(boxes_scale); image_inds.append(image_inds_scale)`, the lists concatenated, and
    `generateBoundingBox` (the mask of cells over the threshold, `nonzero`, `q1 = ((stride * bb + 1)
    / scale).floor()`, `q2 = ((stride * bb + cellsize - 1 + 1) / scale).floor()`, `torch.cat([q1,
    q2, score.unsqueeze(1), reg], dim=1)`); minsize 20, factor 0.709, threshold 0.6, a
    two-convolution P-Net. Changed to export: `imresample` (`interpolate(mode="area")`) is bilinear
    (area, an adaptive pooling to a run-time size, was not tried), and the per-scale `batched_nms`
    is left out (its own loop); the PReLU is written out with its weight viewed to the channels
    (exported for an input of unknown rank, its slope broadcast against the wrong axis); `reg[:,
    mask]` is indexed by the mask's `nonzero` rows (the exporter gave it an unknown rank and the
    `cat` failed), and the scales are float tensors reshaped to 0-d when read (as Python floats the
    export carried them as doubles into float arithmetic, an invalid model; read from the list with
    no known rank, the size's length was unknown and onnxruntime rejected the `Resize`)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.prelu = nn.PReLU(4)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.conv4_1 = nn.Conv2d(6, 2, 1)
        self.conv4_2 = nn.Conv2d(6, 4, 1)
        with torch.no_grad():  # confident random scores: some cells pass the threshold
            self.conv4_1.weight.mul_(20)

    def forward(self, imgs: Tensor) -> tuple[Tensor, Tensor]:
        minsize = 20
        factor = 0.709
        h = imgs.size(2)
        w = imgs.size(3)
        m = 12.0 / minsize
        minl = torch.tensor(float(min(h, w)) * m)
        scale_i = torch.tensor(m)
        scales: list[Tensor] = []
        while bool(minl >= 12):
            scales.append(scale_i)
            scale_i = scale_i * factor
            minl = minl * factor
        boxes: list[Tensor] = []
        image_inds: list[Tensor] = []
        for scale in scales:
            scale = scale.reshape(())
            size = [int(h * scale + 1), int(w * scale + 1)]
            im_data = F.interpolate(imgs, size=size, mode="bilinear", align_corners=False)
            im_data = (im_data - 127.5) * 0.0078125
            x = self.conv1(im_data).float()
            x = torch.where(x >= 0, x, x * self.prelu.weight.view(1, -1, 1, 1))
            x = F.max_pool2d(x, 2, 2, ceil_mode=True)
            x = F.relu(self.conv2(x))
            probs = torch.softmax(self.conv4_1(x), 1)[:, 1]
            reg = self.conv4_2(x).permute(1, 0, 2, 3)
            mask = probs >= 0.6
            mask_inds = mask.nonzero()
            score = probs[mask]
            reg_sel = reg.permute(1, 2, 3, 0)[mask_inds[:, 0], mask_inds[:, 1], mask_inds[:, 2]]
            bb = mask_inds[:, 1:].float().flip(1)
            q1 = ((2 * bb + 1) / scale).floor()
            q2 = ((2 * bb + 12 - 1 + 1) / scale).floor()
            boxes.append(torch.cat([q1, q2, score.unsqueeze(1), reg_sel], dim=1))
            image_inds.append(mask_inds[:, 0])
        return torch.cat(boxes, 0), torch.cat(image_inds, 0)


class SortUpdate(nn.Module):
    """abewley/sort sort.py `Sort.update(dets)`: `for t, trk in enumerate(trks): pos =
    self.trackers[t].predict()[0]; trk[:] = [pos[0], pos[1], pos[2], pos[3], 0]; if
    np.any(np.isnan(pos)): to_del.append(t)`, `for t in reversed(to_del):
    self.trackers.pop(t)`, `associate_detections_to_trackers` (IoU matrix, matched pairs over
    `iou_threshold` 0.3), `for m in matched: self.trackers[m[1]].update(dets[m[0], :])`, `for i
    in unmatched_dets: trk = KalmanBoxTracker(dets[i, :]); self.trackers.append(trk)`, `i =
    len(self.trackers); for trk in reversed(self.trackers): d = trk.get_state()[0]; if
    (trk.time_since_update < 1) and (trk.hit_streak >= self.min_hits or self.frame_count <=
    self.min_hits): ret.append(np.concatenate((d, [trk.id + 1])).reshape(1, -1)); i -= 1; if
    trk.time_since_update > self.max_age: self.trackers.pop(i)`, `np.concatenate(ret)` or
    `np.empty((0, 5))`; max_age 1, min_hits 3, frame count 5. Changed to export: a tracker is
    a row (box, velocity, time since update, hit streak, id) in a list, the Kalman filter a
    constant-velocity step, the Hungarian assignment (`linear_sum_assignment`) a greedy one by
    the highest IoU, new trackers' ids numbered from an input, the trackers left returned as
    rows; the input rows are read by index (iterated, the exporter gives the rows of the list a
    wrong rank and a `cat` of them fails), `reversed` and `in` are loops (the earlier sets found
    the exporter writes neither a list slice nor `in` of a list)."""

    def forward(self, trackers_in: Tensor, dets: Tensor, next_id: Tensor) -> tuple[Tensor, Tensor]:
        max_age = 1
        min_hits = 3
        frame_count = 5
        trackers: list[Tensor] = []
        for r in range(trackers_in.size(0)):
            trackers.append(trackers_in[r])
        to_del: list[int] = []
        preds: list[Tensor] = []
        for t in range(len(trackers)):
            trk = trackers[t]
            pos = trk[0:4] + torch.cat([trk[4:6], trk[4:6]])
            # predict(): time_since_update += 1; a lost streak resets the hits
            hit_streak = torch.where(trk[6] > 0, torch.zeros_like(trk[7]), trk[7])
            trackers[t] = torch.cat([pos, trk[4:6], (trk[6] + 1).reshape(1),
                                     hit_streak.reshape(1), trk[8:9]])  # fmt: skip
            preds.append(pos)
            if bool(torch.isnan(pos).any()):
                to_del.append(t)
        for j in range(len(to_del) - 1, -1, -1):
            trackers.pop(to_del[j])
            preds.pop(to_del[j])
        matched_det: list[int] = []
        matched_trk: list[int] = []
        if len(preds) > 0 and dets.size(0) > 0:
            trks = torch.stack(preds)
            lt = torch.maximum(dets[:, None, :2], trks[None, :, :2])
            rb = torch.minimum(dets[:, None, 2:4], trks[None, :, 2:4])
            inter = (rb - lt).clamp(min=0).prod(-1)
            area_d = (dets[:, 2:4] - dets[:, :2]).prod(-1)
            area_t = (trks[:, 2:4] - trks[:, :2]).prod(-1)
            iou = inter / (area_d[:, None] + area_t[None, :] - inter)
            for _ in range(min(dets.size(0), len(preds))):
                best = int(iou.argmax())
                d = best // iou.size(1)
                t = best % iou.size(1)
                if bool(iou[d, t] < 0.3):
                    break
                matched_det.append(d)
                matched_trk.append(t)
                iou[d] = -1.0
                iou[:, t] = -1.0
        for d, t in zip(matched_det, matched_trk):
            trk = trackers[t]
            velocity = (dets[d, 0:2] - trk[0:2]) * 0.5 + trk[4:6] * 0.5
            trackers[t] = torch.cat([dets[d, 0:4], velocity, torch.zeros(1),
                                     (trk[7] + 1).reshape(1), trk[8:9]])  # fmt: skip
        new_id = next_id.float()
        for i in range(dets.size(0)):
            matched = False
            for d in matched_det:
                if d == i:
                    matched = True
            if not matched:
                trackers.append(torch.cat([dets[i, 0:4], torch.zeros(4), new_id.reshape(1)]))
                new_id = new_id + 1
        ret: list[Tensor] = []
        i = len(trackers)
        for j in range(len(trackers) - 1, -1, -1):
            trk = trackers[j]
            if bool(trk[6] < 1) and (bool(trk[7] >= min_hits) or frame_count <= min_hits):
                ret.append(torch.cat([trk[0:4], trk[8:9] + 1]).reshape(1, -1))
            i -= 1
            if bool(trk[6] > max_age):
                trackers.pop(i)
        out = torch.zeros(0, 5) if len(ret) == 0 else torch.cat(ret)
        left = torch.zeros(0, 9) if len(trackers) == 0 else torch.stack(trackers)
        return out, left


class DeepsortMatchingCascade(nn.Module):
    """nwojke/deep_sort deep_sort/linear_assignment.py `matching_cascade`: `unmatched_detections
    = detection_indices; matches = []; for level in range(cascade_depth): if
    len(unmatched_detections) == 0: break; track_indices_l = [k for k in track_indices if
    tracks[k].time_since_update == 1 + level]; if len(track_indices_l) == 0: continue;
    matches_l, _, unmatched_detections = min_cost_matching(...); matches += matches_l`,
    `unmatched_tracks = list(set(track_indices) - set(k for k, _ in matches))`, and
    `min_cost_matching` (the cost matrix of the tracks and detections of the level, `cost_matrix[
    cost_matrix > max_distance] = max_distance + 1e-5`, an assignment, a pair over the maximum
    distance unmatched, `for col, detection_idx in enumerate(detection_indices): if col not in
    col_indices: unmatched_detections.append(detection_idx)`), the metric
    `nn_matching._nn_cosine_distance` (one stored feature a track); cascade depth 3, max
    distance 0.4. Changed to export: the indices are lists of 0-d tensors, the pairs two lists,
    `in` and `set` loops setting flags (the earlier sets found the exporter writes no
    `in` of a list; `set` was not tried), and the Hungarian
    assignment (`linear_sum_assignment`) a greedy one by the lowest cost, its taken rows and
    columns masked by `where` (written in place, `cost[r] = 1e9`, the export failed under
    onnxruntime: "Shape mismatch attempting to re-use buffer")."""

    def forward(
        self, track_features: Tensor, time_since_update: Tensor, det_features: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        cascade_depth = 3
        max_distance = 0.4
        tf = track_features / track_features.norm(2, 1, True)
        df = det_features / det_features.norm(2, 1, True)
        track_indices: list[Tensor] = list(torch.arange(tf.size(0)).unbind(0))
        unmatched_detections: list[Tensor] = list(torch.arange(df.size(0)).unbind(0))
        matches_t: list[Tensor] = []
        matches_d: list[Tensor] = []
        for level in range(cascade_depth):
            if len(unmatched_detections) == 0:
                break
            track_indices_l: list[Tensor] = []
            for k in track_indices:
                if int(time_since_update[k]) == 1 + level:
                    track_indices_l.append(k)
            if len(track_indices_l) == 0:
                continue
            rows = tf.index_select(0, torch.stack(track_indices_l))
            cols = df.index_select(0, torch.stack(unmatched_detections))
            cost = 1.0 - rows @ cols.t()
            cost = torch.where(
                cost > max_distance, torch.full_like(cost, max_distance + 1e-5), cost
            )
            assigned_col: list[Tensor] = []
            for _ in range(min(len(track_indices_l), len(unmatched_detections))):
                best = int(cost.argmin())
                r = best // cost.size(1)
                c = best % cost.size(1)
                if bool(cost[r, c] <= max_distance):
                    matches_t.append(track_indices_l[r])
                    matches_d.append(unmatched_detections[c])
                assigned_col.append(torch.tensor(c))
                rows_taken = torch.arange(cost.size(0)).unsqueeze(1) == r
                cols_taken = torch.arange(cost.size(1)).unsqueeze(0) == c
                cost = torch.where(rows_taken | cols_taken, torch.full_like(cost, 1e9), cost)
            next_unmatched: list[Tensor] = []
            for col, detection_idx in enumerate(unmatched_detections):
                matched = False
                for c in assigned_col:
                    if int(c) == col:
                        matched = bool(
                            (torch.stack(matches_d) == detection_idx).any()
                            if len(matches_d) > 0
                            else torch.tensor(False)
                        )
                if not matched:
                    next_unmatched.append(detection_idx)
            unmatched_detections = next_unmatched
        unmatched_tracks: list[Tensor] = []
        for k in track_indices:
            found = False
            for m in matches_t:
                if bool(m == k):
                    found = True
            if not found:
                unmatched_tracks.append(k)
        empty = torch.zeros(0, dtype=torch.long)
        matches = (
            torch.stack([torch.stack(matches_t), torch.stack(matches_d)], 1).long()
            if len(matches_t) > 0
            else torch.zeros(0, 2, dtype=torch.long)
        )
        return (
            matches,
            torch.stack(unmatched_tracks) if len(unmatched_tracks) > 0 else empty,
            torch.stack(unmatched_detections) if len(unmatched_detections) > 0 else empty,
        )


def _same(a: Tensor, b: Tensor, width: int) -> bool:
    """Whether prefixes `a` and `b` (symbol ids below `width` - 1) are equal: their codes as
    numbers in base `width` with digits id + 1 (exact while `width` ** length fits in int64)."""
    code_a = ((a + 1) * torch.pow(width, torch.arange(a.size(0)))).sum()
    code_b = ((b + 1) * torch.pow(width, torch.arange(b.size(0)))).sum()
    return bool(code_a == code_b)


class CtcPrefixBeamSearch(nn.Module):
    """corticph/prefix-beam-search prefix_beam_search.py `prefix_beam_search(ctc, lm=None,
    k=25, alpha=0.30, beta=5, prune=0.001)` without a language model: `ctc =
    np.vstack((np.zeros(F), ctc))`; `Pb[0][O] = 1; Pnb[0][O] = 0; A_prev = [O]`; `for t in
    range(1, T): pruned_alphabet = [alphabet[i] for i in np.where(ctc[t] > prune)[0]]; for l in
    A_prev: for c in pruned_alphabet: if c == '%': Pb[t][l] += ctc[t][-1] * (Pb[t - 1][l] +
    Pnb[t - 1][l]) else: l_plus = l + c; if len(l) > 0 and c == l[-1]: Pnb[t][l_plus] +=
    ctc[t][c_ix] * Pb[t - 1][l]; Pnb[t][l] += ctc[t][c_ix] * Pnb[t - 1][l] else: Pnb[t][l_plus]
    += ctc[t][c_ix] * (Pb[t - 1][l] + Pnb[t - 1][l]); if l_plus not in A_prev: Pb[t][l_plus] +=
    ctc[t][-1] * (Pb[t - 1][l_plus] + Pnb[t - 1][l_plus]); Pnb[t][l_plus] += ctc[t][c_ix] *
    Pnb[t - 1][l_plus]`; `A_next = Pb[t] + Pnb[t]; A_prev = sorted(A_next, key=sorter,
    reverse=True)[:k]`; the best prefix returned. Three symbols and the blank (last), beam 3,
    the probabilities a softmax of the input logits. Changed to export: a prefix is a 1-D
    tensor of symbol ids; the dicts (`defaultdict(Counter)`) are three lists per step (prefixes,
    blank and non-blank probabilities) searched by a loop comparing prefixes by their codes
    as numbers (compared after a length test in an `and`, the export failed under
    onnxruntime, "Shape mismatch attempting to re-use buffer"; padded to one length, the export
    padded a list element it knew no rank of wrongly); the sort is an `argsort` of the stacked sums;
    `not in A_prev` a loop setting a flag; the empty prefix is made of
    a run-time length of 0 (a literal empty tensor gave every prefix of the lists a declared
    length of 0, and onnxruntime failed)."""

    def forward(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        beam = 3
        prune = 0.001
        blank = logits.size(1) - 1
        ctc = torch.softmax(logits, -1)
        width = ctc.size(1) + 1
        empty = torch.zeros(ctc.size(0) * 0, dtype=torch.long)
        prev_keys: list[Tensor] = [empty]
        prev_b: list[Tensor] = [torch.ones(())]
        prev_nb: list[Tensor] = [torch.zeros(())]
        a_prev: list[Tensor] = [empty]
        for t in range(ctc.size(0)):
            keys: list[Tensor] = []
            pb: list[Tensor] = []
            pnb: list[Tensor] = []
            for prefix in a_prev:
                ip = -1
                for j, key in enumerate(prev_keys):
                    if _same(key, prefix, width):
                        ip = j
                b_l = prev_b[ip]
                nb_l = prev_nb[ip]
                for c in range(ctc.size(1)):
                    p = ctc[t, c]
                    if not bool(p > prune):
                        continue
                    # the entries added to: (prefix, blank part, non-blank part), in order
                    targets: list[Tensor] = []
                    add_b: list[Tensor] = []
                    add_nb: list[Tensor] = []
                    if c == blank:
                        targets.append(prefix)
                        add_b.append(p * (b_l + nb_l))
                        add_nb.append(torch.zeros(()))
                    else:
                        l_plus = torch.cat([prefix, torch.full([1], c, dtype=torch.long)])
                        repeat = False
                        if prefix.size(0) > 0:
                            repeat = int(prefix[-1]) == c
                        if repeat:
                            targets.append(l_plus)
                            add_b.append(torch.zeros(()))
                            add_nb.append(p * b_l)
                            targets.append(prefix)
                            add_b.append(torch.zeros(()))
                            add_nb.append(p * nb_l)
                        else:
                            targets.append(l_plus)
                            add_b.append(torch.zeros(()))
                            add_nb.append(p * (b_l + nb_l))
                        in_prev = False
                        for a in a_prev:
                            if _same(a, l_plus, width):
                                in_prev = True
                        if not in_prev:
                            b_plus = torch.zeros(())
                            nb_plus = torch.zeros(())
                            for j, key in enumerate(prev_keys):
                                if _same(key, l_plus, width):
                                    b_plus = prev_b[j]
                                    nb_plus = prev_nb[j]
                            targets.append(l_plus)
                            add_b.append(ctc[t, blank] * (b_plus + nb_plus))
                            add_nb.append(p * nb_plus)
                    for target, db, dnb in zip(targets, add_b, add_nb):
                        found = -1
                        for j, key in enumerate(keys):
                            if _same(key, target, width):
                                found = j
                        if found < 0:
                            keys.append(target)
                            pb.append(db)
                            pnb.append(dnb)
                        else:
                            pb[found] = pb[found] + db
                            pnb[found] = pnb[found] + dnb
            order = (torch.stack(pb) + torch.stack(pnb)).argsort(descending=True)
            a_prev = []
            for r in range(min(beam, len(keys))):
                a_prev.append(keys[int(order[r])])
            prev_keys = keys
            prev_b = pb
            prev_nb = pnb
        best = a_prev[0]
        score = torch.zeros(())
        for j, key in enumerate(prev_keys):
            if _same(key, best, width):
                score = prev_b[j] + prev_nb[j]
        return best, score


class LlavaImageSplice(nn.Module):
    """haotian-liu/LLaVA llava/model/llava_arch.py `prepare_inputs_labels_for_multimodal`:
    `input_ids = [cur_input_ids[cur_attention_mask] for cur_input_ids, cur_attention_mask in
    zip(input_ids, attention_mask)]`; per sample `num_images = (cur_input_ids ==
    IMAGE_TOKEN_INDEX).sum()`, `image_token_indices = [-1] + torch.where(cur_input_ids ==
    IMAGE_TOKEN_INDEX)[0].tolist() + [cur_input_ids.shape[0]]`, `for i in
    range(len(image_token_indices) - 1): cur_input_ids_noim.append(cur_input_ids[
    image_token_indices[i]+1:image_token_indices[i+1]])`, `split_sizes = [x.shape[0] for x in
    cur_labels_noim]`, `cur_input_embeds = embed_tokens(torch.cat(cur_input_ids_noim));
    cur_input_embeds_no_im = torch.split(cur_input_embeds, split_sizes, dim=0)`, `for i in
    range(num_images + 1): cur_new_input_embeds.append(cur_input_embeds_no_im[i]); if i <
    num_images: cur_image_features = image_features[cur_image_idx]; cur_image_idx += 1;
    cur_new_input_embeds.append(cur_image_features)`, `new_input_embeds.append(torch.cat(
    cur_new_input_embeds))`; then `max_len = max(x.shape[0] for x in new_input_embeds)`, each
    right-padded with zeros into `new_input_embeds_padded` and `attention_mask[i, :cur_len] =
    True`, `torch.stack(new_input_embeds_padded, dim=0)`. The vision tower and projector are one
    linear layer over two patches per image; IMAGE_TOKEN_INDEX -200. Changed to export: the
    image token positions are a list of 0-d tensors (`tolist`), the run-time slices
    `index_select` of an `arange`, the embeddings of the text pieces are looked up piece by
    piece (the `split` of their concatenation by a list of sizes exported the sizes as a
    sequence, an invalid model), `max` of the lengths a `max` of their stack, and the mask a
    comparison with an `arange` (a slice assignment at a run-time end)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(10, 3)
        self.mm_projector = nn.Linear(4, 3)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, images: Tensor
    ) -> tuple[Tensor, Tensor]:
        image_token_index = -200
        image_features = self.mm_projector(images)
        ids_list: list[Tensor] = []
        for cur_input_ids, cur_attention_mask in zip(input_ids.unbind(0), attention_mask.unbind(0)):
            ids_list.append(cur_input_ids[cur_attention_mask])
        new_input_embeds: list[Tensor] = []
        cur_image_idx = 0
        for cur_input_ids in ids_list:
            num_images = int((cur_input_ids == image_token_index).sum())
            image_token_indices: list[Tensor] = [torch.tensor(-1)]
            for p in torch.where(cur_input_ids == image_token_index)[0].unbind(0):
                image_token_indices.append(p)
            image_token_indices.append(torch.tensor(cur_input_ids.size(0)))
            cur_input_ids_noim: list[Tensor] = []
            for i in range(len(image_token_indices) - 1):
                start = int(image_token_indices[i]) + 1
                end = int(image_token_indices[i + 1])
                cur_input_ids_noim.append(cur_input_ids.index_select(0, torch.arange(start, end)))
            cur_input_embeds_no_im = [self.embed_tokens(x) for x in cur_input_ids_noim]
            cur_new_input_embeds: list[Tensor] = []
            for i in range(num_images + 1):
                cur_new_input_embeds.append(cur_input_embeds_no_im[i])
                if i < num_images:
                    cur_new_input_embeds.append(image_features[cur_image_idx])
                    cur_image_idx += 1
            new_input_embeds.append(torch.cat(cur_new_input_embeds))
        lengths = torch.stack([torch.tensor(x.size(0)) for x in new_input_embeds])
        max_len = int(lengths.max())
        padded: list[Tensor] = []
        for cur_new_embed in new_input_embeds:
            cur_len = cur_new_embed.size(0)
            padded.append(torch.cat((cur_new_embed, torch.zeros(max_len - cur_len, 3)), dim=0))
        new_attention_mask = torch.arange(max_len).unsqueeze(0) < lengths.unsqueeze(1)
        return torch.stack(padded, dim=0), new_attention_mask


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


def _rows(rows: list, width: int) -> Tensor:
    return torch.tensor(rows, dtype=torch.float).reshape(-1, width)


def _bools(values: list) -> Tensor:
    return torch.tensor(values, dtype=torch.bool)


def _points(seed: int) -> Tensor:
    centres = _float([[0, 0], [5, 5], [0, 6]])
    return (centres.repeat(4, 1) + _randn(12, 2, seed=seed)).contiguous()


CASES = [
    Case("kmeans_centres", KmeansCentres, ["x", "initial_state"],
         ["choice_cluster", "centres", "history"],
         [lambda: [_points(1), _float([[1, 1], [2, 2], [3, 3]])],
          lambda: [_float([[1.5, -2]]), _float([[0, 0]])],
          lambda: [_float([[0, 0], [0.1, 0], [5, 5]]), _float([[0, 0], [5, 5], [50, 50]])]],
         {"x": {0: "N"}, "initial_state": {0: "K"}}),
    Case("hifigan_period_feature_loss", HifiganPeriodFeatureLoss, ["y", "y_hat"],
         ["loss_fm", "loss_gen", "gen_losses"],
         [lambda: [_randn(2, 1, 40, seed=1), _randn(2, 1, 40, seed=2)],
          lambda: [_randn(1, 1, 7, seed=3), _randn(1, 1, 7, seed=4)],
          lambda: [_randn(1, 1, 6, seed=5), _randn(1, 1, 6, seed=6)]],
         {"y": {0: "B", 2: "T"}, "y_hat": {0: "B", 2: "T"}}, opset=18),
    Case("fastspeech2_length_regulator", Fastspeech2LengthRegulator, ["x"],
         ["output", "mel_len"],
         [lambda: [_randn(3, 5, 3, seed=1) + 1],
          lambda: [_randn(1, 1, 3, seed=2) + 1],
          lambda: [_randn(2, 3, 3, seed=3) * 0.1 + _float([0, 0, 4])]],
         {"x": {0: "B", 1: "T"}}),
    Case("musicgen_delay_pattern", MusicgenDelayPattern, ["codes"],
         ["sequence", "reverted", "input_embeds"],
         [lambda: [torch.randint(0, 8, (2, 4, 5), generator=torch.Generator().manual_seed(1))],
          lambda: [torch.randint(0, 8, (1, 4, 1), generator=torch.Generator().manual_seed(2))],
          lambda: [torch.zeros(1, 4, 0, dtype=torch.long)]],
         {"codes": {0: "B", 2: "T"}}),
    Case("sam2_memory_bank", Sam2MemoryBank, ["frames"], ["masks"],
         [lambda: [_randn(5, 4, 3, 3, seed=1)], lambda: [_randn(1, 4, 2, 3, seed=2)],
          lambda: [_randn(2, 4, 1, 1, seed=3)]],
         {"frames": {0: "F", 2: "H", 3: "W"}}, opset=18),
    Case("mamba_selective_scan_ref", MambaSelectiveScanRef, ["hidden_states"],
         ["out", "last_state"],
         [lambda: [_randn(2, 7, 3, seed=1)], lambda: [_randn(1, 1, 3, seed=2)],
          lambda: [_randn(3, 2, 3, seed=3)]],
         {"hidden_states": {0: "B", 1: "L"}}),
    Case("rtdetr_encoder_decoder", RtdetrEncoderDecoder, ["image"],
         ["dec_out_bboxes", "dec_out_logits", "level_start_index"],
         [lambda: [_randn(2, 3, 16, 16, seed=1)], lambda: [_randn(1, 3, 2, 2, seed=2)],
          lambda: [_randn(1, 3, 8, 12, seed=3)]],
         {"image": {0: "B", 2: "H", 3: "W"}}, opset=18),
    Case("mtcnn_pyramid", MtcnnPyramid, ["imgs"], ["boxes", "image_inds"],
         [lambda: [_rand(2, 3, 40, 48, seed=1) * 255], lambda: [_rand(1, 3, 20, 20, seed=2) * 255],
          lambda: [torch.full((1, 3, 24, 30), 127.5)]],
         {"imgs": {0: "B", 2: "H", 3: "W"}}),
    Case("sort_update", SortUpdate, ["trackers", "dets", "next_id"], ["ret", "trackers_left"],
         [lambda: [_rows([[0, 0, 4, 4, 1, 0, 0, 3, 1], [10, 10, 14, 14, 0, 0, 0, 5, 2],
                          [20, 0, 24, 5, 0, 0, 1, 0, 3], [30, 30, 31, float("nan"), 0, 0, 0, 1, 4],
                          [40, 40, 44, 44, 0, 0, 0, 1, 5]], 9),
                   _rows([[1.2, 0, 5, 4, 0.9], [10.5, 10, 14, 14.5, 0.8],
                          [50, 50, 55, 55, 0.7]], 5),
                   _scalar(6)],
          lambda: [_rows([], 9), _rows([[0, 0, 1, 1, 0.5]], 5), _scalar(1)],
          lambda: [_rows([[0, 0, 2, 2, 0, 0, 0, 4, 7]], 9), _rows([], 5), _scalar(8)],
          lambda: [_rows([], 9), _rows([], 5), _scalar(1)]],
         {"trackers": {0: "M"}, "dets": {0: "N"}}),
    Case("deepsort_matching_cascade", DeepsortMatchingCascade,
         ["track_features", "time_since_update", "det_features"],
         ["matches", "unmatched_tracks", "unmatched_detections"],
         [lambda: [_randn(5, 4, seed=1), _long([1, 2, 1, 3, 5]),
                   torch.cat([_randn(5, 4, seed=1)[[2, 0, 3]] + 0.1 * _randn(3, 4, seed=2),
                              _randn(2, 4, seed=3)])],
          lambda: [_randn(1, 4, seed=4), _long([1]), _randn(1, 4, seed=4) + 0.01],
          lambda: [_randn(2, 4, seed=5), _long([1, 2]), _randn(0, 4, seed=6)],
          lambda: [_randn(0, 4, seed=7), _long([]), _randn(2, 4, seed=8)]],
         {"track_features": {0: "M"}, "time_since_update": {0: "M"},
          "det_features": {0: "N"}}),
    Case("ctc_prefix_beam_search", CtcPrefixBeamSearch, ["logits"], ["best", "score"],
         [lambda: [_randn(6, 4, seed=1) * 2], lambda: [_randn(1, 4, seed=2)],
          lambda: [_randn(0, 4, seed=3)],
          lambda: [_float([[5, -9, -9, 0], [5, -9, -9, 0], [-9, -9, -9, 5], [5, -9, -9, 0]])]],
         {"logits": {0: "T"}}),
    Case("llava_image_splice", LlavaImageSplice, ["input_ids", "attention_mask", "images"],
         ["inputs_embeds", "attention_mask_out"],
         [lambda: [_long([[1, -200, 2, 3, 0], [4, 5, -200, 6, -200], [7, 8, 9, 1, 2]]),
                   _bools([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
                   _randn(3, 2, 4, seed=1)],
          lambda: [_long([[-200]]), _bools([[1]]), _randn(1, 2, 4, seed=2)],
          lambda: [_long([[3, 4], [5, 6]]), _bools([[1, 1], [1, 0]]), _randn(0, 2, 4, seed=3)]],
         {"input_ids": {0: "B", 1: "L"}, "attention_mask": {0: "B", 1: "L"},
          "images": {0: "N"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
