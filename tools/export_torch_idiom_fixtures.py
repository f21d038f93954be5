#!/usr/bin/env python3
"""Export list idioms transcribed from popular model code (TorchScript) as test fixtures.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_idiom_fixtures.py      # all cases, or CASE...

Each module transcribes the list handling of a well-known forward (the source it follows is
named in its docstring; convolutions and layers are made small, weights random), scripted and
exported with the TorchScript exporter at opset 17, with the outputs PyTorch computes. Same
machinery and layout as `tools/export_torch_fixtures.py`, written to
`tests/fixtures/torch_idioms/<case>/`; tests/lists/test_torch_idioms.py lowers them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_idioms"


class SsdMultibox(nn.Module):
    """SSD's multibox head (ssd.pytorch, torchvision SSDHead): `for x, l, c in zip(sources,
    loc, conf): loc.append(l(x).permute(0, 2, 3, 1))`, then
    `torch.cat([o.view(o.size(0), -1) for o in loc], 1)`: a list comprehension over a list."""

    def __init__(self) -> None:
        super().__init__()
        self.loc = nn.ModuleList([nn.Conv2d(c, 8, 3, padding=1) for c in (4, 8)])
        self.conf = nn.ModuleList([nn.Conv2d(c, 6, 3, padding=1) for c in (4, 8)])

    def forward(self, s1: Tensor, s2: Tensor) -> tuple[Tensor, Tensor]:
        sources = [s1, s2]
        loc: list[Tensor] = []
        conf: list[Tensor] = []
        for i, (lc, cc) in enumerate(zip(self.loc, self.conf)):  # zip(sources, ...) in the
            x = sources[i]  # original: TorchScript cannot zip a list with a module list
            loc.append(lc(x).permute(0, 2, 3, 1).contiguous())
            conf.append(cc(x).permute(0, 2, 3, 1).contiguous())
        locs = torch.cat([o.view(o.size(0), -1) for o in loc], 1)
        confs = torch.cat([o.view(o.size(0), -1) for o in conf], 1)
        return locs.view(locs.size(0), -1, 4), confs.view(confs.size(0), -1, 3)


class PadBatch(nn.Module):
    """Padding a packed batch of variable-length sequences (what `pad_sequence` does, written
    as model code does it): split `x` by `lengths`, pad each to the longest, stack, and the
    mask of real positions."""

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        seqs: list[Tensor] = []
        start = 0
        for i in range(lengths.size(0)):
            n = int(lengths[i])
            seqs.append(x[start : start + n])
            start += n
        max_len = 0
        for s in seqs:
            max_len = max(max_len, s.size(0))
        padded: list[Tensor] = []
        masks: list[Tensor] = []
        for s in seqs:
            padded.append(F.pad(s, (0, 0, 0, max_len - s.size(0))))
            masks.append(torch.arange(max_len) < s.size(0))
        return torch.stack(padded), torch.stack(masks)


class GreedyDecode(nn.Module):
    """A greedy decoder loop (seq2seq tutorials, RNN-T and CTC decoders): `tokens = [bos]`;
    `for _ in range(max_len)`: embed `tokens[-1]`, one recurrent step, argmax, append, stop at
    the end token; `torch.cat(tokens)`."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 5)
        self.cell = nn.Linear(5, 5)
        self.out = nn.Linear(5, 7)

    def forward(self, h: Tensor, max_len: Tensor) -> Tensor:
        tokens = [torch.zeros(1, dtype=torch.long)]
        for _ in range(int(max_len)):
            emb = self.embed(tokens[-1])
            h = torch.tanh(self.cell(emb) + h)
            tok = self.out(h).argmax(-1)
            tokens.append(tok)
            if bool(tok[0] == 6):
                break
        return torch.cat(tokens)


class DetectionPostprocess(nn.Module):
    """Per-image detection post-processing (torchvision's `postprocess_detections`, YOLO's
    `non_max_suppression` loop, without the suppression): for each image, keep the boxes whose
    score passes a threshold, the best `k` of them by score, append; the kept boxes of every
    image joined and each image's count."""

    def forward(self, boxes: Tensor, scores: Tensor) -> tuple[Tensor, Tensor]:
        kept: list[Tensor] = []
        counts: list[Tensor] = []
        for b in range(boxes.size(0)):
            keep = scores[b] > 0.5
            image_boxes, image_scores = boxes[b][keep], scores[b][keep]
            k = min(3, image_scores.size(0))
            _, order = image_scores.topk(k)
            kept.append(image_boxes[order])
            counts.append(torch.tensor(k))
        return torch.cat(kept, 0), torch.stack(counts)


def _lengths(k: int, ts: list[Tensor]) -> list[Tensor]:
    lengths = [torch.tensor([3, 1, 4]), torch.tensor([2, 0, 5, 1])][k]
    total = int(lengths.sum())
    return [ts[0][:total].contiguous(), lengths]


class CtcGreedyCollapse(nn.Module):
    """CTC greedy decoding (torchaudio's tutorial decoder, wav2vec2 pipelines): the best class
    per frame, consecutive repeats and the blank dropped, `out.append(c)` only for a new
    non-blank class; the decoded labels joined."""

    def forward(self, emissions: Tensor) -> Tensor:
        best = emissions.argmax(-1)
        out = [torch.zeros(0, dtype=torch.long)]
        prev = torch.tensor(-1)
        for t in range(best.size(0)):
            c = best[t]
            if bool(c != prev) and bool(c != 0):
                out.append(c.unsqueeze(0))
            prev = c
        return torch.cat(out, 0)


class MaskedMeanPool(nn.Module):
    """Sentence embeddings by mean pooling over each sequence's real tokens (sentence-transformers
    style, written per item as model code often does): `for i in range(B):
    pooled.append(h[i, :lengths[i]].mean(0))`; `torch.stack(pooled)`."""

    def forward(self, h: Tensor, lengths: Tensor) -> Tensor:
        pooled: list[Tensor] = []
        for i in range(h.size(0)):
            n = int(lengths[i])
            pooled.append(h[i, :n].mean(0))
        return torch.stack(pooled)


def _pool_lengths(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0], [torch.tensor([3, 1, 5]), torch.tensor([2, 4])][k]]


def _scores(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0], torch.sigmoid(ts[1] * 2)]


def _max_len(k: int, ts: list[Tensor]) -> list[Tensor]:
    return [ts[0], torch.tensor(6 if k == 0 else 0)]


IMAGE = {0: "N", 2: "H", 3: "W"}
CASES = [
    Case("ssd_multibox", SsdMultibox, {"s1": (1, 4, 6, 6), "s2": (1, 8, 3, 3)},
         ["loc", "conf"], SsdMultibox.__doc__ or "",
         dynamic_axes={"s1": IMAGE, "s2": {0: "N", 2: "H2", 3: "W2"}},
         alt_inputs={"s1": (2, 4, 5, 4), "s2": (2, 8, 2, 2)}, lengths="static (2 levels)"),
    Case("detection_postprocess", DetectionPostprocess, {"boxes": (2, 6, 4), "scores": (2, 6)},
         ["kept", "counts"], DetectionPostprocess.__doc__ or "",
         dynamic_axes={"boxes": {0: "B", 1: "N"}, "scores": {0: "B", 1: "N"}},
         alt_inputs={"boxes": (3, 2, 4), "scores": (3, 2)}, prepare=_scores,
         lengths="dynamic (B), elements of data-dependent sizes"),
    Case("ctc_greedy_collapse", CtcGreedyCollapse, {"emissions": (9, 4)}, ["labels"],
         CtcGreedyCollapse.__doc__ or "", dynamic_axes={"emissions": {0: "T"}},
         alt_inputs={"emissions": (3, 4)}, lengths="dynamic (data-dependent appends)"),
    Case("masked_mean_pool", MaskedMeanPool, {"h": (3, 5, 4), "lengths": (3,)}, ["pooled"],
         MaskedMeanPool.__doc__ or "", dynamic_axes={"h": {0: "B", 1: "T"}, "lengths": {0: "B"}},
         alt_inputs={"h": (2, 4, 4), "lengths": (2,)}, prepare=_pool_lengths,
         lengths="dynamic (B), slices of run-time lengths"),
    Case("pad_batch", PadBatch, {"x": (8, 3), "lengths": (3,)}, ["padded", "mask"],
         PadBatch.__doc__ or "", dynamic_axes={"x": {0: "T"}, "lengths": {0: "B"}},
         alt_inputs={"x": (8, 3), "lengths": (4,)}, prepare=_lengths,
         lengths="dynamic (B), elements of run-time lengths"),
    Case("greedy_decode", GreedyDecode, {"h": (1, 5), "max_len": (1,)}, ["tokens"],
         GreedyDecode.__doc__ or "", prepare=_max_len,
         alt_inputs={"h": (1, 5), "max_len": (1,)}, lengths="dynamic (data-dependent while)"),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
