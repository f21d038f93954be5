#!/usr/bin/env python3
"""Export list code transcribed from public model code that no other exporter of tools/ used,
written to measure the forms on exports nobody tuned them for (tests/fixtures/torch_fresh).

    /work/torchvenv/bin/python tools/export_torch_fresh_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_fresh.py runs the
exports under onnxruntime and compares them with what PyTorch computed). Each module follows the
list handling of a public function named in its docstring (repository, file and function), with
small layers and random weights, scripted and exported by the TorchScript exporter
(`dynamo=False`) at opset 17. Written to `tests/fixtures/torch_fresh/<case>/`: `model.onnx` and
`test_data_set_<k>/input_<i>.pb`, `output_<i>.pb` (the layout of
tools/export_torch_fixtures.py), one data set per input maker; the later data sets are edge
cases (one element, a list that stays empty, a loop that stops at once).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from scripted_fixtures import Case, Maker, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_fresh"


def _upsample(x: Tensor, h: int, w: int) -> Tensor:
    """`F.interpolate(x, size=prev_shape, mode="nearest")` for a level twice as large (row and
    column `i // 2` of `x` at `i`): TorchScript's exporter cannot write interpolate to a size
    known only inside a loop."""
    return x.index_select(2, torch.arange(h) // 2).index_select(3, torch.arange(w) // 2)


def _param(*shape: int, scale: float = 0.5) -> nn.Parameter:
    return nn.Parameter(torch.randn(*shape) * scale)


class Yolov5Detect(nn.Module):
    """ultralytics/yolov5 models/yolo.py `Detect.forward` (inference, with `_make_grid`): for
    each level `x[i] = self.m[i](x[i])`, viewed as `[bs, na, ny, nx, no]`, `xy, wh, conf =
    x[i].sigmoid().split((2, 2, self.nc + 1), 4)`, `xy = (xy * 2 + self.grid[i]) *
    self.stride[i]`, `wh = (wh * 2) ** 2 * self.anchor_grid[i]`, `z.append(torch.cat((xy, wh,
    conf), 4).view(bs, self.na * nx * ny, self.no))`; `return torch.cat(z, 1), x`."""

    def __init__(self) -> None:
        super().__init__()
        self.na, self.nc = 2, 2
        self.no = self.nc + 5
        self.m = nn.ModuleList(nn.Conv2d(4, self.na * self.no, 1) for _ in range(3))
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))
        self.register_buffer("anchors", torch.rand(3, 2, 2) * 3 + 0.5)

    def _make_grid(self, nx: int, ny: int, i: int) -> tuple[Tensor, Tensor]:
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(1, self.na, ny, nx, 2).float() - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2))
        return grid, anchor_grid.expand(1, self.na, ny, nx, 2)

    def forward(self, p3: Tensor, p4: Tensor, p5: Tensor) -> tuple[Tensor, Tensor]:
        x = [p3, p4, p5]
        z: list[Tensor] = []
        for i, conv in enumerate(self.m):
            x[i] = conv(x[i])
            bs, _, ny, nx = x[i].shape
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self._make_grid(nx, ny, i)
            xy, wh, conf = x[i].sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2.0 + grid) * self.stride[i]
            wh = (wh * 2.0) ** 2 * anchor_grid
            z.append(torch.cat((xy, wh, conf), 4).view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1), x[-1]


class DarknetRoutes(nn.Module):
    """eriklindernoren/PyTorch-YOLOv3 pytorchyolo/models.py `Darknet.forward`, run over a small
    config (the loop over `module_defs` written out as its layers run): every layer's output
    appended to `layer_outputs`; a `route` is `torch.cat([layer_outputs[int(layer_i)] for
    layer_i in module_def["layers"].split(",")], 1)`, a `shortcut` `layer_outputs[-1] +
    layer_outputs[layer_i]`; each `yolo` layer's output appended to `yolo_outputs`;
    `torch.cat(yolo_outputs, 1)`."""

    def __init__(self) -> None:
        super().__init__()
        self.c0 = nn.Conv2d(3, 4, 3, padding=1)
        self.c1 = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(4, 4, 1)
        self.c3 = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.head1 = nn.Conv2d(4, 6, 1)
        self.c4 = nn.Conv2d(4, 4, 1)
        self.head2 = nn.Conv2d(8, 6, 1)

    @staticmethod
    def yolo(x: Tensor, img_size: int) -> Tensor:
        bs, _, ny, nx = x.shape
        stride = img_size // ny
        x = x.view(bs, 1, 6, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
        xy = (x[..., 0:2].sigmoid() + grid) * stride
        wh = torch.exp(x[..., 2:4]) * 4.0
        return torch.cat((xy, wh, x[..., 4:].sigmoid()), -1).view(bs, -1, 6)

    def forward(self, x: Tensor) -> Tensor:
        img_size = x.size(2)
        layer_outputs: list[Tensor] = []
        yolo_outputs: list[Tensor] = []
        x = F.leaky_relu(self.c0(x), 0.1)  # 0 convolutional
        layer_outputs.append(x)
        x = F.leaky_relu(self.c1(x), 0.1)  # 1 convolutional, stride 2
        layer_outputs.append(x)
        x = F.leaky_relu(self.c2(x), 0.1)  # 2 convolutional
        layer_outputs.append(x)
        x = layer_outputs[-1] + layer_outputs[-2]  # 3 shortcut from=-2
        layer_outputs.append(x)
        x = F.leaky_relu(self.c3(x), 0.1)  # 4 convolutional, stride 2
        layer_outputs.append(x)
        x = self.head1(x)  # 5 convolutional (linear)
        layer_outputs.append(x)
        x = self.yolo(x, img_size)  # 6 yolo
        yolo_outputs.append(x)
        layer_outputs.append(x)
        x = torch.cat([layer_outputs[-3]], 1)  # 7 route layers=-3
        layer_outputs.append(x)
        x = F.leaky_relu(self.c4(x), 0.1)  # 8 convolutional
        layer_outputs.append(x)
        x = _upsample(x, 2 * x.size(2), 2 * x.size(3))  # 9 upsample (nearest, x2)
        layer_outputs.append(x)
        x = torch.cat([layer_outputs[-1], layer_outputs[3]], 1)  # 10 route layers=-1,3
        layer_outputs.append(x)
        x = self.head2(x)  # 11 convolutional (linear)
        layer_outputs.append(x)
        x = self.yolo(x, img_size)  # 12 yolo
        yolo_outputs.append(x)
        layer_outputs.append(x)
        return torch.cat(yolo_outputs, 1)


class DeformableDecoderRefine(nn.Module):
    """fundamentalvision/Deformable-DETR models/deformable_transformer.py
    `DeformableTransformerDecoder.forward` with iterative box refinement: per layer `tmp =
    self.bbox_embed[lid](output)`; `new_reference_points = tmp`, `new_reference_points[..., :2]
    = tmp[..., :2] + inverse_sigmoid(reference_points)`, `.sigmoid()`; `intermediate.append(
    output)`, `intermediate_reference_points.append(reference_points)`; both stacked (the
    deformable attention is a dot-product attention over `src` here)."""

    def __init__(self) -> None:
        super().__init__()
        self.wq = _param(3, 6, 6)
        self.wo = _param(3, 6, 6)
        self.box = _param(3, 6, 4)

    @staticmethod
    def inverse_sigmoid(x: Tensor, eps: float = 1e-5) -> Tensor:
        x = x.clamp(min=0, max=1)
        return torch.log(x.clamp(min=eps) / (1 - x).clamp(min=eps))

    def forward(self, tgt: Tensor, reference_points: Tensor, src: Tensor) -> tuple[Tensor, Tensor]:
        output = tgt
        intermediate: list[Tensor] = []
        intermediate_reference_points: list[Tensor] = []
        for lid in range(self.wq.size(0)):
            attn = torch.softmax((output @ self.wq[lid]) @ src.transpose(0, 1), -1)
            output = output + torch.relu(attn @ src @ self.wo[lid])
            tmp = output @ self.box[lid]
            new_reference_points = tmp.clone()
            new_reference_points[..., :2] = tmp[..., :2] + self.inverse_sigmoid(reference_points)
            reference_points = new_reference_points[..., :2].sigmoid()
            intermediate.append(output)
            intermediate_reference_points.append(reference_points)
        return torch.stack(intermediate), torch.stack(intermediate_reference_points)


class Mask2FormerLevels(nn.Module):
    """facebookresearch/Mask2Former mask2former/modeling/transformer_decoder/
    mask2former_transformer_decoder.py `MultiScaleMaskedTransformerDecoder.forward`: per
    feature level `src.append(self.input_proj[i](x[i]).flatten(2) + level_embed)`, `pos.append(
    ...)`; then per layer `level_index = i % self.num_feature_levels`, cross-attention to
    `src[level_index]` with `pos[level_index]`, `predictions_class.append(outputs_class)`,
    `predictions_mask.append(outputs_mask)`; the last of each and the stacked list returned."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(4, 6, 1)
        self.level_embed = _param(3, 6)
        self.wq = _param(5, 6, 6)
        self.cls = nn.Linear(6, 3)

    def forward(self, f0: Tensor, f1: Tensor, f2: Tensor, query: Tensor) -> tuple[Tensor, Tensor]:
        x = [f0, f1, f2]
        src: list[Tensor] = []
        pos: list[Tensor] = []
        for i in range(len(x)):
            s = self.proj(x[i]).flatten(2)[0].transpose(0, 1) + self.level_embed[i]
            n = s.size(0)
            pos.append(torch.arange(n).float().unsqueeze(1) / n)
            src.append(s)
        output = query
        mask_features = src[0].reshape(-1, 6)
        predictions_class: list[Tensor] = [self.cls(output)]
        predictions_mask: list[Tensor] = [output @ mask_features.transpose(0, 1)]
        for i in range(self.wq.size(0)):
            level_index = i % len(src)
            key = (src[level_index] + pos[level_index]).reshape(-1, 6)  # a rank for the exporter
            attn = torch.softmax(output @ self.wq[i] @ key.transpose(0, 1), -1)
            output = output + attn @ src[level_index]
            predictions_class.append(self.cls(output))
            predictions_mask.append(output @ mask_features.transpose(0, 1))
        return predictions_mask[-1], torch.stack(predictions_class)


class MmdetFpn(nn.Module):
    """open-mmlab/mmdetection mmdet/models/necks/fpn.py `FPN.forward`: `laterals =
    [lateral_conv(inputs[i]) ...]`; `for i in range(used_backbone_levels - 1, 0, -1):
    laterals[i - 1] = laterals[i - 1] + F.interpolate(laterals[i], size=prev_shape)` (nearest
    upsampling written as repeats, `_upsample`); `outs =
    [self.fpn_convs[i](laterals[i]) ...]`; extra levels `outs.append(F.max_pool2d(outs[-1], 1,
    stride=2))`; the outputs flattened and concatenated here."""

    def __init__(self) -> None:
        super().__init__()
        self.lateral_convs = nn.ModuleList(nn.Conv2d(c, 4, 1) for c in (3, 5, 6))
        self.fpn_convs = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=1) for _ in range(3))

    def forward(self, c3: Tensor, c4: Tensor, c5: Tensor) -> Tensor:
        inputs = [c3, c4, c5]
        laterals: list[Tensor] = []
        for i, lateral_conv in enumerate(self.lateral_convs):
            laterals.append(lateral_conv(inputs[i]))
        used_backbone_levels = len(laterals)
        for i in range(used_backbone_levels - 1, 0, -1):
            prev_h, prev_w = laterals[i - 1].size(2), laterals[i - 1].size(3)
            laterals[i - 1] = laterals[i - 1] + _upsample(laterals[i], prev_h, prev_w)
        outs: list[Tensor] = []
        for i, fpn_conv in enumerate(self.fpn_convs):
            outs.append(fpn_conv(laterals[i]))
        for _ in range(5 - used_backbone_levels):
            outs.append(F.max_pool2d(outs[-1], 1, stride=2))
        return torch.cat([o.reshape(o.size(0), o.size(1), -1) for o in outs], 2)


class Pafpn(nn.Module):
    """open-mmlab/mmdetection mmdet/models/necks/pafpn.py `PAFPN.forward`: the top-down path
    of FPN, then `inter_outs = [self.fpn_convs[i](laterals[i]) ...]`; `for i in range(0,
    used_backbone_levels - 1): inter_outs[i + 1] = inter_outs[i + 1] +
    self.downsample_convs[i](inter_outs[i])` (one downsampling convolution shared by the levels
    here, so that the loop stays a loop); `outs = [inter_outs[0]]`, `outs.extend([
    self.pafpn_convs[i - 1](inter_outs[i]) for i in range(1, used_backbone_levels)])`."""

    def __init__(self) -> None:
        super().__init__()
        self.lateral_convs = nn.ModuleList(nn.Conv2d(4, 4, 1) for _ in range(3))
        self.fpn_convs = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=1) for _ in range(3))
        self.downsample_conv = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.pafpn_convs = nn.ModuleList(nn.Conv2d(4, 4, 1) for _ in range(2))

    def forward(self, c3: Tensor, c4: Tensor, c5: Tensor) -> Tensor:
        inputs = [c3, c4, c5]
        laterals: list[Tensor] = []
        for i, lateral_conv in enumerate(self.lateral_convs):
            laterals.append(lateral_conv(inputs[i]))
        used_backbone_levels = len(laterals)
        for i in range(used_backbone_levels - 1, 0, -1):
            prev_h, prev_w = laterals[i - 1].size(2), laterals[i - 1].size(3)
            laterals[i - 1] = laterals[i - 1] + _upsample(laterals[i], prev_h, prev_w)
        inter_outs: list[Tensor] = []
        for i, fpn_conv in enumerate(self.fpn_convs):
            inter_outs.append(fpn_conv(laterals[i]))
        for i in range(0, used_backbone_levels - 1):
            inter_outs[i + 1] = inter_outs[i + 1] + self.downsample_conv(inter_outs[i])
        outs = [inter_outs[0]]
        # `outs.extend(...)` as appends: the exporter drops an extend of a list
        for i, pafpn_conv in enumerate(self.pafpn_convs):
            outs.append(pafpn_conv(inter_outs[i + 1]))
        return torch.cat([o.reshape(o.size(0), o.size(1), -1) for o in outs], 2)


class HfDynamicCache(nn.Module):
    """huggingface/transformers src/transformers/cache_utils.py `DynamicCache.update` (and
    `get_seq_length`), as a decoding loop calls it per layer and step: `if len(self.key_cache)
    <= layer_idx: self.key_cache.append(key_states)` (the prompt's step), else
    `self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)`;
    attention reads the returned cache; the next token is the argmax, embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(9, 6)
        self.wk = _param(2, 6, 6)
        self.wv = _param(2, 6, 6)
        self.out = nn.Linear(6, 9)

    def forward(self, prompt: Tensor, steps: Tensor) -> tuple[Tensor, Tensor]:
        key_cache: list[Tensor] = []
        value_cache: list[Tensor] = []
        h = self.emb(prompt)
        tokens: list[Tensor] = []
        for _ in range(int(steps)):
            for layer_idx in range(self.wk.size(0)):
                key_states = h @ self.wk[layer_idx]
                value_states = h @ self.wv[layer_idx]
                if len(key_cache) <= layer_idx:
                    key_cache.append(key_states)
                    value_cache.append(value_states)
                else:
                    key_cache[layer_idx] = torch.cat([key_cache[layer_idx], key_states], dim=-2)
                    value_cache[layer_idx] = torch.cat(
                        [value_cache[layer_idx], value_states], dim=-2
                    )
                k, v = key_cache[layer_idx], value_cache[layer_idx]
                h = h + torch.softmax(h @ k.transpose(0, 1) / 2.0, -1) @ v
            tok = self.out(h[-1:]).argmax(-1)
            tokens.append(tok)
            h = self.emb(tok)
        seq_length = key_cache[0].shape[-2] if len(key_cache) > 0 else 0
        return torch.cat(tokens), torch.tensor(seq_length)


class C2f(nn.Module):
    """ultralytics/ultralytics ultralytics/nn/modules/block.py `C2f.forward`: `y =
    list(self.cv1(x).chunk(2, 1))`; `y.extend(m(y[-1]) for m in self.m)` (written as a loop:
    TorchScript has no generators); `self.cv2(torch.cat(y, 1))`; each `m` a `Bottleneck`
    (`x + self.cv2(self.cv1(x))`, one convolution here)."""

    def __init__(self) -> None:
        super().__init__()
        self.cv1 = nn.Conv2d(4, 4, 1)
        self.m = nn.ModuleList(nn.Conv2d(2, 2, 3, padding=1) for _ in range(2))
        self.cv2 = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = list(F.silu(self.cv1(x)).chunk(2, 1))
        for m in self.m:
            y.append(y[-1] + F.silu(m(y[-1])))
        return F.silu(self.cv2(torch.cat(y, 1)))


class Yolov8C2f(nn.Module):
    """Two of ultralytics' `C2f` blocks in a row (as a YOLOv8 backbone stage stacks them)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = C2f()
        self.b = C2f()

    def forward(self, x: Tensor) -> Tensor:
        return self.b(self.a(x))


class DeepspeechOffsets(nn.Module):
    """SeanNaren/deepspeech.pytorch deepspeech_pytorch/decoder.py `GreedyDecoder.decode` and
    `process_string`: `_, max_probs = torch.max(probs, 2)`; per utterance, for `i in
    range(size)`, a label that is not blank and (with `remove_repetitions`) not the one at `i -
    1` is appended, and `offsets.append(i)`; `torch.tensor(offsets, dtype=torch.int)` (the
    labels kept as ints instead of characters, the size clamped to the frames there are)."""

    def forward(self, probs: Tensor, sizes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        _, max_probs = torch.max(probs, 2)
        strings: list[Tensor] = []
        offsets: list[Tensor] = []
        counts: list[int] = []
        for b in range(max_probs.size(0)):
            sequence = max_probs[b]
            chars: list[int] = []
            offs: list[int] = []
            for i in range(min(int(sizes[b]), sequence.size(0))):
                char = int(sequence[i])
                if char != 0:
                    if i != 0 and char == int(sequence[i - 1]):
                        pass
                    else:
                        chars.append(char)
                        offs.append(i)
            strings.append(torch.tensor(chars, dtype=torch.long))
            offsets.append(torch.tensor(offs, dtype=torch.int))
            counts.append(len(chars))
        return torch.cat(strings), torch.cat(offsets), torch.tensor(counts)


class LstmCell(nn.Module):
    """pytorch/pytorch benchmarks/fastrnns/custom_lstms.py `LSTMCell.forward` (its `torch.mm`
    written as `@`: the exporter declares an element of `unbind` with the rank onnxruntime's
    inference rejects for Gemm)."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.weight_ih = _param(4 * hidden_size, input_size)
        self.weight_hh = _param(4 * hidden_size, hidden_size)
        self.bias_ih = _param(4 * hidden_size)
        self.bias_hh = _param(4 * hidden_size)

    def forward(self, input: Tensor, hx: Tensor, cx: Tensor) -> tuple[Tensor, Tensor]:
        gates = input @ self.weight_ih.t() + self.bias_ih + hx @ self.weight_hh.t() + self.bias_hh
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)
        cy = (forgetgate * cx) + (ingate * cellgate)
        hy = outgate * torch.tanh(cy)
        return hy, cy


class LstmLayer(nn.Module):
    """pytorch/pytorch benchmarks/fastrnns/custom_lstms.py `LSTMLayer.forward`: `inputs =
    input.unbind(0)`; `for i in range(len(inputs)): out, state = self.cell(inputs[i], state);
    outputs += [out]`; `torch.stack(outputs), state`."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.cell = LstmCell(input_size, hidden_size)

    def forward(self, input: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        inputs = input.unbind(0)
        outputs: list[Tensor] = []
        for i in range(len(inputs)):
            h, c = self.cell(inputs[i], h, c)
            outputs += [h]
        return torch.stack(outputs), h, c


class CustomLstmStacked(nn.Module):
    """pytorch/pytorch benchmarks/fastrnns/custom_lstms.py `StackedLSTM.forward`: `for
    rnn_layer in self.layers: state = states[i]; output, out_state = rnn_layer(output, state);
    output_states += [out_state]; i += 1` (the states a list of per-layer h and c here, read
    from `h0.unbind(0)`, and the final states stacked)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([LstmLayer(3, 4), LstmLayer(4, 4)])

    def forward(self, x: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        hs = h0.unbind(0)
        cs = c0.unbind(0)
        out_h: list[Tensor] = []
        out_c: list[Tensor] = []
        output = x
        i = 0
        for rnn_layer in self.layers:
            output, h, c = rnn_layer(output, hs[i], cs[i])
            out_h += [h]
            out_c += [c]
            i += 1  # noqa: SIM113 (as custom_lstms.py counts)
        return output, torch.stack(out_h), torch.stack(out_c)


def reverse(lst: list[Tensor]) -> list[Tensor]:
    """custom_lstms.py's `reverse` (`lst[::-1]`), as a loop: the exporter writes a slice of a
    list as a tensor Slice, which onnxruntime refuses."""
    out: list[Tensor] = []
    for i in range(len(lst)):
        out.append(lst[len(lst) - 1 - i])
    return out


class ReverseLstmLayer(nn.Module):
    """pytorch/pytorch benchmarks/fastrnns/custom_lstms.py `ReverseLSTMLayer.forward`: `inputs
    = reverse(input.unbind(0))` (`reverse(lst)` is `lst[::-1]`), the cell over them, `outputs
    += [out]`, `torch.stack(reverse(outputs))`."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.cell = LstmCell(input_size, hidden_size)

    def forward(self, input: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        inputs = reverse(input.unbind(0))
        outputs: list[Tensor] = []
        for i in range(len(inputs)):
            h, c = self.cell(inputs[i], h, c)
            outputs += [h]
        return torch.stack(reverse(outputs)), h, c


class CustomLstmBidir(nn.Module):
    """pytorch/pytorch benchmarks/fastrnns/custom_lstms.py `BidirLSTMLayer.forward`: `for
    direction in self.directions: state = states[i]; out, out_state = direction(input, state);
    outputs += [out]; output_states += [out_state]`; `torch.cat(outputs, -1)`, with
    `ReverseLSTMLayer` for the backward direction."""

    def __init__(self) -> None:
        super().__init__()
        self.forward_layer = LstmLayer(3, 4)
        self.reverse_layer = ReverseLstmLayer(3, 4)

    def forward(self, x: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
        hs = h0.unbind(0)
        cs = c0.unbind(0)
        outputs: list[Tensor] = []
        output_states: list[Tensor] = []
        out, h, c = self.forward_layer(x, hs[0], cs[0])
        outputs += [out]
        output_states += [h]
        out, h, c = self.reverse_layer(x, hs[1], cs[1])  # noqa: RUF059
        outputs += [out]
        output_states += [h]
        return torch.cat(outputs, -1), torch.stack(output_states)


class EspnetBeamSearch(nn.Module):
    """espnet/espnet espnet/nets/beam_search.py `BeamSearch.forward`, `search` and
    `post_process`, with the hypotheses as parallel lists (`yseq`, `score`): each step every
    running hypothesis is extended by its `beam` best tokens (`best.append(...)`), the best
    `beam` of all kept; at the last step `<eos>` is appended; then `for hyp in running_hyps: if
    hyp.yseq[-1] == self.eos: ended_hyps.append(hyp) else: remained_hyps.append(hyp)`; the loop
    stops when no hypothesis remains; the best ended hypothesis's score and length returned."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 6)
        self.out = nn.Linear(6, 5)

    def forward(self, x: Tensor, yseq0: Tensor, maxlen: Tensor) -> tuple[Tensor, Tensor]:
        beam = 2
        eos = 4
        # `init_hyp`'s `yseq` ([sos]), an input here: a constant would let the exporter declare
        # the length of every later yseq as 2, which onnxruntime trusts and fails on
        yseqs: list[Tensor] = [yseq0]
        scores: list[Tensor] = [torch.zeros(())]
        ended_yseqs: list[Tensor] = []
        ended_scores: list[Tensor] = []
        n = int(maxlen)
        for i in range(n):
            best_yseqs: list[Tensor] = []
            best_scores: list[Tensor] = []
            for j in range(len(yseqs)):
                h = torch.tanh(self.emb(yseqs[j][-1]) + x)
                logp = torch.log_softmax(self.out(h), -1)
                top = logp.topk(beam)
                for b in range(beam):
                    best_yseqs.append(torch.cat([yseqs[j], top.indices[b : b + 1]]))
                    best_scores.append(scores[j] + top.values[b])
            order = torch.stack(best_scores).argsort(descending=True)[:beam]
            yseqs = [best_yseqs[int(k)] for k in order]
            scores = [best_scores[int(k)] for k in order]
            if i == n - 1:
                yseqs = [torch.cat([y, torch.full((1,), eos, dtype=torch.long)]) for y in yseqs]
            remained_yseqs: list[Tensor] = []
            remained_scores: list[Tensor] = []
            for j in range(len(yseqs)):
                if int(yseqs[j][-1]) == eos:
                    ended_yseqs.append(yseqs[j])
                    ended_scores.append(scores[j])
                else:
                    remained_yseqs.append(yseqs[j])
                    remained_scores.append(scores[j])
            yseqs, scores = remained_yseqs, remained_scores
            if len(yseqs) == 0:
                break
        if len(ended_scores) == 0:
            return torch.zeros(()), torch.zeros((), dtype=torch.long)
        best = int(torch.stack(ended_scores).argmax())
        return ended_scores[best], torch.tensor(ended_yseqs[best].size(0))


class RpnTopProposals(nn.Module):
    """facebookresearch/detectron2 detectron2/modeling/proposal_generator/proposal_utils.py
    `find_top_rpn_proposals`: per level `topk_scores_i, topk_idx = logits_i.topk(
    num_proposals_i, dim=1)`, `topk_proposals.append(proposals_i[batch_idx[:, None],
    topk_idx])`, `level_ids.append(torch.full((num_proposals_i,), level_id))`, each list
    concatenated; per image the boxes clipped to its size, those below `min_box_size` dropped
    (`boxes.nonempty`), the first `post_nms_topk` kept, `results.append(...)` (the NMS left
    out); the results concatenated with their counts."""

    def forward(
        self, p0: Tensor, p1: Tensor, l0: Tensor, l1: Tensor, image_sizes: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        proposals = [p0, p1]
        pred_objectness_logits = [l0, l1]
        num_images = image_sizes.size(0)
        batch_idx = torch.arange(num_images)
        topk_scores: list[Tensor] = []
        topk_proposals: list[Tensor] = []
        level_ids: list[Tensor] = []
        for level_id, (proposals_i, logits_i) in enumerate(zip(proposals, pred_objectness_logits)):
            hi_wi_a = logits_i.shape[1]
            num_proposals_i = min(4, hi_wi_a)
            topk_scores_i, topk_idx = logits_i.topk(num_proposals_i, dim=1)
            topk_proposals.append(proposals_i[batch_idx[:, None], topk_idx])
            topk_scores.append(topk_scores_i)
            level_ids.append(torch.full((num_proposals_i,), level_id, dtype=torch.int64))
        scores_all = torch.cat(topk_scores, dim=1)
        proposals_all = torch.cat(topk_proposals, dim=1)
        levels_all = torch.cat(level_ids, dim=0)
        results: list[Tensor] = []
        counts: list[Tensor] = []
        for n in range(num_images):
            boxes = proposals_all[n]
            h, w = image_sizes[n, 0], image_sizes[n, 1]
            x = boxes[:, 0::2].clamp(min=0).minimum(w)
            y = boxes[:, 1::2].clamp(min=0).minimum(h)
            boxes = torch.stack((x[:, 0], y[:, 0], x[:, 1], y[:, 1]), 1)
            keep = ((boxes[:, 2] - boxes[:, 0]) > 1.0) & ((boxes[:, 3] - boxes[:, 1]) > 1.0)
            boxes, scores_per_img, lvl = boxes[keep], scores_all[n][keep], levels_all[keep]
            order = scores_per_img.argsort(descending=True)[:5]
            results.append(torch.cat([boxes[order], lvl[order].unsqueeze(1).float()], 1))
            counts.append(torch.tensor(order.size(0)))
        return torch.cat(results), torch.stack(counts), scores_all


class Tacotron2Inference(nn.Module):
    """NVIDIA/tacotron2 model.py `Decoder.inference` and `parse_decoder_outputs`: `while
    True:` prenet, one decoding step, `mel_outputs += [mel_output.squeeze(1)]`, `gate_outputs +=
    [gate_output]`, `alignments += [alignment]`; `if torch.sigmoid(gate_output.data) >
    self.gate_threshold: break elif len(mel_outputs) == self.max_decoder_steps: break`;
    `decoder_input = mel_output`; then `torch.stack(...)` of each list, transposed."""

    def __init__(self) -> None:
        super().__init__()
        self.prenet = nn.Linear(3, 6)
        self.rnn = nn.Linear(12, 6)
        self.mel = nn.Linear(12, 3)
        self.gate = nn.Linear(12, 1)

    def forward(self, memory: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        decoder_input = torch.zeros(1, 3)
        hidden = torch.zeros(1, 6)
        mel_outputs: list[Tensor] = []
        gate_outputs: list[Tensor] = []
        alignments: list[Tensor] = []
        while True:
            p = torch.relu(self.prenet(decoder_input))
            hidden = torch.tanh(self.rnn(torch.cat([p, hidden], 1)))
            alignment = torch.softmax(hidden @ memory.transpose(0, 1), -1)
            context = alignment @ memory
            mel_output = self.mel(torch.cat([hidden, context], 1))
            gate_output = self.gate(torch.cat([hidden, context], 1))
            mel_outputs += [mel_output.squeeze(0)]
            gate_outputs += [gate_output.squeeze(0)]
            alignments += [alignment]
            if bool(torch.sigmoid(gate_output) > 0.7):  # noqa: SIM114 (Tacotron 2's two breaks)
                break
            elif len(mel_outputs) == 6:
                break
            decoder_input = mel_output
        # `torch.stack(xs).transpose(0, 1)` is `torch.stack(xs, 1)`: the exporter cannot
        # transpose what a list stacks (its rank is unknown to it)
        alignments_t = torch.stack(alignments, 1)
        gates_t = torch.stack(gate_outputs, 1)
        mels_t = torch.stack(mel_outputs, 1)
        return mels_t, gates_t, alignments_t


class FcosHead(nn.Module):
    """tianzhi0549/FCOS fcos_core/modeling/rpn/fcos/fcos.py `FCOSHead.forward` and
    `FCOSModule.compute_locations`: `for l, feature in enumerate(x):` shared towers,
    `logits.append(self.cls_logits(cls_tower))`, `centerness.append(...)`, `bbox_pred =
    self.scales[l](self.bbox_pred(box_tower))`, `bbox_reg.append(F.relu(bbox_pred) *
    self.fpn_strides[l])`; per level `locations.append(compute_locations_per_level(h, w,
    self.fpn_strides[level]))`; the boxes decoded from locations and concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.tower = nn.Conv2d(4, 4, 3, padding=1)
        self.cls_logits = nn.Conv2d(4, 2, 1)
        self.centerness = nn.Conv2d(4, 1, 1)
        self.bbox_pred = nn.Conv2d(4, 4, 1)
        self.scales = nn.Parameter(torch.tensor([1.0, 0.8, 1.2]))

    def forward(self, p3: Tensor, p4: Tensor, p5: Tensor) -> tuple[Tensor, Tensor]:
        x = [p3, p4, p5]
        fpn_strides = [8, 16, 32]
        logits: list[Tensor] = []
        bbox_reg: list[Tensor] = []
        centerness: list[Tensor] = []
        locations: list[Tensor] = []
        for l, feature in enumerate(x):  # noqa: E741 (FCOS's name)
            tower = torch.relu(self.tower(feature))
            logits.append(self.cls_logits(tower))
            centerness.append(self.centerness(tower))
            bbox_pred = self.scales[l] * self.bbox_pred(tower)
            bbox_reg.append(F.relu(bbox_pred) * fpn_strides[l])
        for level, feature in enumerate(x):
            h, w = feature.size(2), feature.size(3)
            stride = fpn_strides[level]
            shifts_x = torch.arange(0, w * stride, step=stride, dtype=torch.float32)
            shifts_y = torch.arange(0, h * stride, step=stride, dtype=torch.float32)
            # `torch.meshgrid(shifts_y, shifts_x)` as the two expands it is
            shift_x = shifts_x.unsqueeze(0).expand(h, w).reshape(-1)
            shift_y = shifts_y.unsqueeze(1).expand(h, w).reshape(-1)
            locations.append(torch.stack((shift_x, shift_y), dim=1) + stride // 2)
        boxes: list[Tensor] = []
        scores: list[Tensor] = []
        for i in range(len(locations)):
            reg = bbox_reg[i][0].reshape(4, -1).transpose(0, 1)
            loc = locations[i]
            boxes.append(torch.cat([loc - reg[:, :2], loc + reg[:, 2:]], 1))
            cls = logits[i][0].reshape(2, -1).transpose(0, 1).sigmoid()
            s = cls * centerness[i][0].reshape(1, -1).transpose(0, 1).sigmoid()
            scores.append(s)
        return torch.cat(boxes), torch.cat(scores)


class PygJumpingKnowledge(nn.Module):
    """pyg-team/pytorch_geometric torch_geometric/nn/models/basic_gnn.py `BasicGNN.forward`
    (`xs: List[Tensor] = []`; per layer `x = self.convs[i](x, edge_index)`, the activation,
    `xs.append(x)`; `x = self.jk(xs)`) with torch_geometric/nn/models/jumping_knowledge.py
    `JumpingKnowledge.forward` in its 'max' mode (`torch.stack(xs, dim=-1).max(dim=-1)[0]`)
    and 'cat' mode (`torch.cat(xs, dim=-1)`); a dense normalized adjacency for the GCN."""

    def __init__(self) -> None:
        super().__init__()
        self.w = _param(3, 4, 4)
        self.lin = nn.Linear(16, 2)

    def forward(self, x: Tensor, adj: Tensor) -> Tensor:
        deg = adj.sum(1).clamp(min=1.0)
        norm = adj / deg.unsqueeze(1)
        xs: list[Tensor] = []
        for i in range(self.w.size(0)):
            x = torch.relu(norm @ x @ self.w[i])
            xs.append(x)
        jk_max = torch.stack(xs, dim=-1).max(dim=-1)[0]
        jk_cat = torch.cat(xs, dim=-1)
        return self.lin(torch.cat([jk_max, jk_cat], -1))


class Dinov2Intermediate(nn.Module):
    """facebookresearch/dinov2 dinov2/models/vision_transformer.py
    `DinoVisionTransformer._get_intermediate_layers_not_chunked` (`for i, blk in
    enumerate(self.blocks): x = blk(x); if i in blocks_to_take: output.append(x)`) and
    `get_intermediate_layers`: `outputs = [self.norm(out) for out in outputs]`, `class_tokens =
    [out[:, 0] for out in outputs]`, `outputs = [out[:, 1 + self.num_register_tokens :] ...]`,
    `out.reshape(B, w // self.patch_size, h // self.patch_size, -1).permute(0, 3, 1, 2)`."""

    def __init__(self) -> None:
        super().__init__()
        self.w = _param(4, 6, 6)
        self.patch = nn.Conv2d(3, 6, 2, stride=2)
        self.cls_token = _param(1, 1, 6)

    def forward(self, img: Tensor) -> tuple[Tensor, Tensor]:
        b, _, h, w = img.shape
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], 1)
        n = 2  # `blocks_to_take = range(total_block_len - n, total_block_len)`
        output: list[Tensor] = []
        total_block_len = self.w.size(0)
        for i in range(total_block_len):
            x = x + torch.tanh(x @ self.w[i])
            if total_block_len - n <= i < total_block_len:
                output.append(x)
        outputs = [F.layer_norm(out, (6,)) for out in output]
        class_tokens = [out[:, 0] for out in outputs]
        outputs = [out[:, 1:] for out in outputs]
        outputs = [
            out.reshape(b, h // 2, w // 2, -1).permute(0, 3, 1, 2).contiguous() for out in outputs
        ]
        return torch.stack(outputs), torch.stack(class_tokens)


class EspnetInterCtc(nn.Module):
    """espnet/espnet espnet2/asr/encoder/conformer_encoder.py `ConformerEncoder.forward` with
    intermediate CTC: `for layer_idx, encoder_layer in enumerate(self.encoders): xs_pad, masks
    = encoder_layer(xs_pad, masks); if layer_idx + 1 in self.interctc_layer_idx: encoder_out =
    self.after_norm(xs_pad); intermediate_outs.append((layer_idx + 1, encoder_out)); if
    self.interctc_use_conditioning: xs_pad = xs_pad + self.conditioning_layer(ctc.softmax(
    encoder_out))` (the pairs kept as two lists)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = _param(5, 6, 6)
        self.ctc = nn.Linear(6, 4)
        self.conditioning_layer = nn.Linear(4, 6)
        self.register_buffer("interctc_layer_idx", torch.tensor([2, 4]))

    def forward(self, xs_pad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        interctc_layer_idx = self.interctc_layer_idx
        intermediate_idx: list[int] = []
        intermediate_outs: list[Tensor] = []
        for layer_idx in range(self.w.size(0)):
            xs_pad = xs_pad + torch.relu(xs_pad @ self.w[layer_idx])
            if bool((interctc_layer_idx == layer_idx + 1).any()):
                encoder_out = F.layer_norm(xs_pad, (6,))
                intermediate_idx.append(layer_idx + 1)
                intermediate_outs.append(encoder_out)
                ctc_out = torch.softmax(self.ctc(encoder_out), -1)
                xs_pad = xs_pad + self.conditioning_layer(ctc_out)
        return xs_pad, torch.stack(intermediate_outs), torch.tensor(intermediate_idx)


class DdimIntermediates(nn.Module):
    """CompVis/stable-diffusion ldm/models/diffusion/ddim.py `DDIMSampler.ddim_sampling` and
    `p_sample_ddim` (eta 0): `intermediates = {'x_inter': [img], 'pred_x0': [img]}`; per step
    `index = total_steps - i - 1`, `img, pred_x0 = self.p_sample_ddim(img, ..., index=index)`;
    `if index % log_every_t == 0 or index == total_steps - 1:` both lists appended (the dict's
    two lists kept apart)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(5, 4)

    def forward(self, img: Tensor, alphas: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        log_every_t = 2
        x_inter: list[Tensor] = [img]
        pred_x0s: list[Tensor] = [img]
        total_steps = alphas.size(0)
        for i in range(total_steps):
            index = total_steps - i - 1
            t = torch.full((img.size(0), 1), float(index) / 10.0)
            e_t = self.net(torch.cat([img, t], 1))
            a_t = alphas[index]
            a_prev = alphas[index - 1] if index > 0 else torch.ones(())
            pred_x0 = (img - (1.0 - a_t).sqrt() * e_t) / a_t.sqrt()
            dir_xt = (1.0 - a_prev).sqrt() * e_t
            img = a_prev.sqrt() * pred_x0 + dir_xt
            if index % log_every_t == 0 or index == total_steps - 1:
                x_inter.append(img)
                pred_x0s.append(pred_x0)
        return img, torch.stack(x_inter), torch.stack(pred_x0s)


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _levels(sizes: list[tuple[int, int]], channels: list[int], seed: int) -> Maker:
    return lambda: [
        _randn(1, c, h, w, seed=seed + k) for k, ((h, w), c) in enumerate(zip(sizes, channels))
    ]


def _probs(t: int, sizes: list[int], seed: int) -> Maker:
    def make() -> list[Tensor]:
        probs = _randn(len(sizes), t, 4, seed=seed)
        # runs of repeats and blanks, as CTC output has them
        probs[:, 1::3] = probs[:, 0::3][:, : probs[:, 1::3].size(1)]
        return [probs, torch.tensor(sizes)]

    return make


def _rpn(a0: int, a1: int, n: int, seed: int) -> Maker:
    def make() -> list[Tensor]:
        def boxes(a: int, s: int) -> Tensor:
            xy = _randn(n, a, 2, seed=s).abs() * 8
            return torch.cat([xy, xy + 0.5 + _randn(n, a, 2, seed=s + 1).abs() * 6], 2)

        sizes = torch.tensor([[16.0, 12.0], [9.0, 20.0], [6.0, 6.0]])[:n]
        return [boxes(a0, seed), boxes(a1, seed + 2), _randn(n, a0, seed=seed + 4),
                _randn(n, a1, seed=seed + 5), sizes]  # fmt: skip

    return make


def _graph(n: int, seed: int) -> Maker:
    def make() -> list[Tensor]:
        adj = (torch.rand(n, n, generator=torch.Generator().manual_seed(seed)) > 0.5).float()
        return [_randn(n, 4, seed=seed), adj]

    return make


def _alphas(n: int) -> Tensor:
    return torch.linspace(0.95, 0.3, n) if n else torch.zeros(0)


_SOS = torch.zeros(1, dtype=torch.long)


_HW3 = {f"p{k}": {2: f"H{k}", 3: f"W{k}"} for k in (3, 4, 5)}
_CHW3 = {f"c{k}": {2: f"H{k}", 3: f"W{k}"} for k in (3, 4, 5)}

CASES = [
    Case("yolov5_detect", Yolov5Detect, ["p3", "p4", "p5"], ["z", "x_last"],
         [_levels([(4, 4), (2, 2), (1, 1)], [4, 4, 4], 1),
          _levels([(3, 5), (2, 3), (1, 2)], [4, 4, 4], 2)], _HW3),
    Case("darknet_routes", DarknetRoutes, ["img"], ["detections"],
         [lambda: [_randn(1, 3, 8, 8, seed=1)], lambda: [_randn(2, 3, 12, 8, seed=2)]],
         {"img": {0: "B", 2: "H", 3: "W"}}),
    Case("deformable_decoder_refine", DeformableDecoderRefine,
         ["tgt", "reference_points", "src"], ["hs", "references"],
         [lambda: [_randn(4, 6, seed=1), torch.rand(4, 2), _randn(7, 6, seed=2)],
          lambda: [_randn(1, 6, seed=3), torch.rand(1, 2), _randn(3, 6, seed=4)]],
         {"tgt": {0: "Q"}, "reference_points": {0: "Q"}, "src": {0: "S"}}),
    Case("mask2former_levels", Mask2FormerLevels, ["f0", "f1", "f2", "query"],
         ["pred_masks", "pred_logits"],
         [lambda: [_randn(1, 4, 4, 4, seed=1), _randn(1, 4, 2, 2, seed=2),
                   _randn(1, 4, 1, 1, seed=3), _randn(3, 6, seed=4)],
          lambda: [_randn(1, 4, 3, 5, seed=5), _randn(1, 4, 2, 3, seed=6),
                   _randn(1, 4, 1, 2, seed=7), _randn(1, 6, seed=8)]],
         {**{f"f{k}": {2: f"H{k}", 3: f"W{k}"} for k in range(3)}, "query": {0: "Q"}}),
    Case("mmdet_fpn", MmdetFpn, ["c3", "c4", "c5"], ["outs"],
         [_levels([(8, 8), (4, 4), (2, 2)], [3, 5, 6], 1),
          _levels([(6, 4), (3, 2), (2, 1)], [3, 5, 6], 2)], _CHW3),
    Case("pafpn_bottom_up", Pafpn, ["c3", "c4", "c5"], ["outs"],
         [_levels([(8, 8), (4, 4), (2, 2)], [4, 4, 4], 1),
          _levels([(4, 6), (2, 3), (1, 2)], [4, 4, 4], 2)], _CHW3),
    Case("hf_dynamic_cache", HfDynamicCache, ["prompt", "steps"], ["tokens", "seq_length"],
         [lambda: [torch.tensor([1, 5, 2]), torch.tensor(4)],
          lambda: [torch.tensor([7]), torch.tensor(1)],
          lambda: [torch.tensor([3, 3]), torch.tensor(2)]],
         {"prompt": {0: "T"}}),
    Case("yolov8_c2f", Yolov8C2f, ["x"], ["y"],
         [lambda: [_randn(1, 4, 6, 6, seed=1)], lambda: [_randn(2, 4, 3, 5, seed=2)]],
         {"x": {0: "B", 2: "H", 3: "W"}}),
    Case("deepspeech_offsets", DeepspeechOffsets, ["probs", "sizes"],
         ["labels", "offsets", "counts"],
         [_probs(9, [9, 6], 1), _probs(5, [5], 2), _probs(4, [2, 4, 1], 3)],
         {"probs": {0: "B", 1: "T"}, "sizes": {0: "B"}}),
    Case("custom_lstm_stacked", CustomLstmStacked, ["x", "h0", "c0"], ["y", "h", "c"],
         [lambda: [_randn(5, 2, 3, seed=1), _randn(2, 2, 4, seed=2), _randn(2, 2, 4, seed=3)],
          lambda: [_randn(1, 1, 3, seed=4), _randn(2, 1, 4, seed=5), _randn(2, 1, 4, seed=6)]],
         {"x": {0: "T", 1: "B"}, "h0": {1: "B"}, "c0": {1: "B"}}),
    Case("custom_lstm_bidir_reverse", CustomLstmBidir, ["x", "h0", "c0"], ["y", "h"],
         [lambda: [_randn(5, 2, 3, seed=1), _randn(2, 2, 4, seed=2), _randn(2, 2, 4, seed=3)],
          lambda: [_randn(1, 1, 3, seed=4), _randn(2, 1, 4, seed=5), _randn(2, 1, 4, seed=6)]],
         {"x": {0: "T", 1: "B"}, "h0": {1: "B"}, "c0": {1: "B"}}),
    Case("espnet_beam_search", EspnetBeamSearch, ["x", "yseq0", "maxlen"], ["score", "length"],
         [lambda: [_randn(6, seed=1), _SOS, torch.tensor(4)],
          lambda: [_randn(6, seed=2), _SOS, torch.tensor(1)],
          lambda: [_randn(6, seed=3) * 3, _SOS, torch.tensor(6)]], {"yseq0": {0: "S"}}),
    Case("rpn_top_proposals", RpnTopProposals, ["p0", "p1", "l0", "l1", "image_sizes"],
         ["proposals", "counts", "scores"],
         [_rpn(6, 3, 2, 1), _rpn(5, 2, 1, 10), _rpn(4, 1, 3, 20)],
         {"p0": {0: "N", 1: "A0"}, "p1": {0: "N", 1: "A1"}, "l0": {0: "N", 1: "A0"},
          "l1": {0: "N", 1: "A1"}, "image_sizes": {0: "N"}}),
    Case("tacotron2_inference", Tacotron2Inference, ["memory"],
         ["mels", "gates", "alignments"],
         [lambda: [_randn(5, 6, seed=1)], lambda: [_randn(3, 6, seed=2) * 4],
          lambda: [_randn(1, 6, seed=7)]],
         {"memory": {0: "T"}}),
    Case("fcos_head_locations", FcosHead, ["p3", "p4", "p5"], ["boxes", "scores"],
         [_levels([(4, 4), (2, 2), (1, 1)], [4, 4, 4], 1),
          _levels([(3, 5), (2, 3), (1, 2)], [4, 4, 4], 2)], _HW3),
    Case("pyg_jumping_knowledge", PygJumpingKnowledge, ["x", "adj"], ["y"],
         [_graph(6, 1), _graph(3, 2), _graph(1, 3)],
         {"x": {0: "N"}, "adj": {0: "N", 1: "N"}}),
    Case("dinov2_intermediate", Dinov2Intermediate, ["img"], ["maps", "class_tokens"],
         [lambda: [_randn(1, 3, 4, 6, seed=1)], lambda: [_randn(2, 3, 2, 2, seed=2)]],
         {"img": {0: "B", 2: "H", 3: "W"}}),
    Case("espnet_interctc", EspnetInterCtc, ["xs_pad"], ["xs", "inter", "inter_idx"],
         [lambda: [_randn(5, 6, seed=1)], lambda: [_randn(1, 6, seed=2)]],
         {"xs_pad": {0: "T"}}),
    Case("ddim_intermediates", DdimIntermediates, ["img", "alphas"],
         ["img_out", "x_inter", "pred_x0"],
         [lambda: [_randn(2, 4, seed=1), _alphas(5)], lambda: [_randn(1, 4, seed=2), _alphas(1)],
          lambda: [_randn(3, 4, seed=3), _alphas(0)]],
         {"img": {0: "B"}, "alphas": {0: "S"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
