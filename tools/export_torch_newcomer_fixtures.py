#!/usr/bin/env python3
"""Export list code written the way a newcomer writes it, from list idioms of public model code
that no other exporter of tools/ used, to measure the tensor forms on programs nobody tuned them
for (tests/fixtures/torch_newcomer).

    /work/torchvenv/bin/python tools/export_torch_newcomer_fixtures.py      # all cases, or CASE...

It needs torch==2.13.0 (CPU); onnxruntime is not needed here (tests/test_torch_newcomer.py runs
the exports under onnxruntime and compares them with what PyTorch computed). Each module is a
short, plain program around one list idiom (editing a list in place, `while len(out) < n`, a
conditional append, a push/pop stack, zip, a list of pairs, an index list sorted by key, beam
bookkeeping, ragged padding, cumulative and sliding-window lists, a feature pyramid), with small
layers and random weights, scripted and exported by the TorchScript exporter (`dynamo=False`) at
opset 17. Written to `tests/fixtures/torch_newcomer/<case>/`: `model.onnx` and
`test_data_set_<k>/input_<i>.pb`, `output_<i>.pb`, one data set per input maker; the later data
sets are edge cases (one element, an empty list, a loop that runs once or not at all, a
negative position).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from scripted_fixtures import Case, Maker, main
from torch import Tensor, nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "tests" / "fixtures" / "torch_newcomer"


class BackwardRnnInsertFront(nn.Module):
    """A backward RNN pass that keeps its outputs in time order by `outputs.insert(0, h)` (as
    hand-written bidirectional RNNs in tutorials do), walking the steps from the last."""

    def __init__(self) -> None:
        super().__init__()
        self.wx = nn.Linear(4, 6)
        self.wh = nn.Linear(6, 6, bias=False)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        steps = x.unbind(0)
        outputs: list[Tensor] = []
        for i in range(len(steps) - 1, -1, -1):
            h = torch.tanh(self.wx(steps[i]) + self.wh(h))
            outputs.insert(0, h)
        return torch.stack(outputs)


class EditAssignDelete(nn.Module):
    """Editing a list of layer outputs by position: `xs[k] = 2 * xs[k]`, `del xs[j]`, `xs.pop()`
    and `xs.insert(1, ...)`, positions read from inputs (a negative `j` counts from the end; the
    exporter writes `xs[k] = ...` as an erase and an insert at `k`, wrong for `k = -1`, so the
    data sets keep `k` non-negative)."""

    def forward(self, x: Tensor, k: Tensor, j: Tensor) -> tuple[Tensor, Tensor]:
        xs = list(x.unbind(0))
        kk = int(k)
        xs[kk] = xs[kk] * 2.0
        del xs[int(j)]
        last = xs.pop()
        xs.insert(1, last + 1.0)
        return torch.stack(xs), last


class WhileLenPad(nn.Module):
    """Padding a token list to a fixed length with `while len(ids) < max_len: ids.append(pad)`
    (int64 ids, as hand-rolled collate functions do)."""

    def forward(self, tokens: Tensor, max_len: Tensor) -> Tensor:
        ids = list(tokens.unbind(0))
        pad = torch.zeros_like(tokens[0])
        n = int(max_len)
        while len(ids) < n:
            ids.append(pad)
        return torch.stack(ids)


class ThresholdKeep(nn.Module):
    """Keeping the rows whose score passes a threshold with an `if` around `append` inside the
    loop (post-processing written before boolean masks are known)."""

    def forward(self, boxes: Tensor, scores: Tensor) -> tuple[Tensor, Tensor]:
        kept: list[Tensor] = []
        kept_scores: list[Tensor] = []
        for i in range(boxes.size(0)):
            if bool(scores[i] > 0.0):
                kept.append(boxes[i] * 2.0)
                kept_scores.append(scores[i])
        if len(kept) == 0:
            return torch.zeros(0, 4), torch.zeros(0)
        return torch.stack(kept), torch.stack(kept_scores)


class BracketStack(nn.Module):
    """A running stack as parsers keep it: push the embedding of an opening token, pop and
    combine on a closing one (`stack.append`, `stack.pop()`), the depth sums collected."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(3, 5)

    def forward(self, tokens: Tensor) -> Tensor:
        stack: list[Tensor] = [torch.zeros(5)]
        out: list[Tensor] = []
        for i in range(tokens.size(0)):
            t = tokens[i]
            if bool(t == 1) and len(stack) > 1:
                top = stack.pop()
                stack[len(stack) - 1] = stack[-1] + torch.tanh(top)
            else:
                stack.append(self.emb(t))
            out.append(stack[-1])
        return torch.stack(out)


class PopArgmax(nn.Module):
    """Greedy selection by popping the best candidate from a list at a run-time position
    (`best = cands.pop(i)`) until none is left or `k` are taken."""

    def forward(self, cands: Tensor, k: Tensor) -> Tensor:
        pool = list(cands.unbind(0))
        taken: list[Tensor] = []
        while len(pool) > 0 and len(taken) < int(k):
            norms = torch.stack([(p * p).sum() for p in pool])
            i = int(norms.argmax())
            taken.append(pool.pop(i))
        if len(taken) == 0:
            return torch.zeros(0, cands.size(1))
        return torch.stack(taken)


class ZipTwoSources(nn.Module):
    """`for a, b in zip(chunks, rows)` over a `split` of one input and an `unbind` of another
    (different lengths: zip stops at the shorter)."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        chunks = x.split(2, 0)
        rows = y.unbind(0)
        out: list[Tensor] = []
        for a, b in zip(chunks, rows):
            out.append(a.sum(0) * b)
        return torch.stack(out)


class NestedFlatten(nn.Module):
    """A list of lists (the groups of each level) flattened by two loops into one list."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        groups: list[list[Tensor]] = [list(x.unbind(0)), list(y.unbind(0))]
        flat: list[Tensor] = []
        for g in groups:
            for t in g:
                flat.append(t + 1.0)
        return torch.cat(flat, 0)


class LevelPairs(nn.Module):
    """Per-level boxes and scores kept in two lists and walked as (boxes, scores) pairs with
    `zip`, each pair joined into detections and the levels concatenated (detection heads
    collect their levels so; the exporter cannot write a list of tuples itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.box = nn.Linear(3, 4)
        self.cls = nn.Linear(3, 1)

    def forward(self, f0: Tensor, f1: Tensor, f2: Tensor) -> tuple[Tensor, Tensor]:
        boxes: list[Tensor] = []
        scores: list[Tensor] = []
        for f in [f0, f1, f2]:
            boxes.append(self.box(f))
            scores.append(self.cls(f).squeeze(-1).sigmoid())
        dets: list[Tensor] = []
        for b, s in zip(boxes, scores):
            dets.append(torch.cat([b, s.unsqueeze(-1)], -1))
        return torch.cat(dets, 0), torch.cat(scores, 0)


class SortedByKey(nn.Module):
    """An index list sorted by a key (`order = keys.argsort()`), the elements read from a list
    in that order with `xs[int(order[i])]`."""

    def forward(self, x: Tensor, keys: Tensor) -> Tensor:
        xs = x.unbind(0)
        order = keys.argsort(descending=True)
        out: list[Tensor] = []
        for i in range(order.size(0)):
            out.append(xs[int(order[i])])
        return torch.stack(out)


class BeamBookkeeping(nn.Module):
    """Top-k beam bookkeeping: each step the scores of every (beam, token) pair, `topk` over
    them, and the hypotheses rebuilt from their parents' lists (`[torch.cat([hyps[b],
    tok])...]`)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 5)
        self.out = nn.Linear(5, 7)

    def forward(self, start: Tensor, steps: Tensor) -> tuple[Tensor, Tensor]:
        beam = 3
        hyps: list[Tensor] = [start.clone() for _ in range(beam)]
        scores = torch.zeros(beam)
        for _ in range(int(steps)):
            last = torch.cat([h.narrow(0, h.size(0) - 1, 1) for h in hyps])
            logp = torch.log_softmax(self.out(self.emb(last)), -1)
            total = (scores.unsqueeze(1) + logp).reshape(-1)
            scores, idx = total.topk(beam)
            parents = idx // 7
            tokens = idx % 7
            new_hyps: list[Tensor] = []
            for b in range(beam):
                new_hyps.append(torch.cat([hyps[int(parents[b])], tokens[b].view(1)]))
            hyps = new_hyps
        return torch.stack(hyps), scores


class RaggedPad(nn.Module):
    """pad_sequence by hand: a flat batch cut into pieces by `lengths` (`narrow` at a running
    offset), each piece padded with `F.pad` to the longest and stacked."""

    def forward(self, flat: Tensor, lengths: Tensor) -> Tensor:
        pieces: list[Tensor] = []
        offset = 0
        for i in range(lengths.size(0)):
            n = int(lengths[i])
            pieces.append(flat.narrow(0, offset, n))
            offset += n
        longest = int(lengths.max())
        padded: list[Tensor] = []
        for p in pieces:
            padded.append(F.pad(p, [0, 0, 0, longest - p.size(0)]))
        return torch.stack(padded)


class CumulativeList(nn.Module):
    """A cumulative list: `acc.append(acc[-1] + x[i])` from the first row on."""

    def forward(self, x: Tensor) -> Tensor:
        acc: list[Tensor] = [x[0]]
        for i in range(1, x.size(0)):
            acc.append(acc[-1] * 0.5 + x[i])
        return torch.stack(acc)


class TokenWindow(nn.Module):
    """A token buffer of the last `w` embeddings: `buf.append(e)`, `buf.pop(0)` once it is too
    long, the buffer's mean collected per step (streaming models keep context so)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(9, 4)

    def forward(self, tokens: Tensor) -> Tensor:
        buf: list[Tensor] = []
        out: list[Tensor] = []
        for i in range(tokens.size(0)):
            buf.append(self.emb(tokens[i]))
            if len(buf) > 3:
                buf.pop(0)
            out.append(torch.stack(buf).mean(0))
        return torch.stack(out)


class SlidingWindows(nn.Module):
    """Overlapping windows collected by slicing in a loop with a stride (`x[i : i + w]`), each
    pooled, stacked."""

    def forward(self, x: Tensor) -> Tensor:
        w, stride = 4, 2
        windows: list[Tensor] = []
        for i in range(0, x.size(0) - w + 1, stride):
            windows.append(x[i : i + w].max(0)[0])
        return torch.stack(windows)


class PyramidConvs(nn.Module):
    """A multiscale pyramid built by pooling the last level (`feats.append(pool(feats[-1]))`),
    one conv per level (`for i, conv in enumerate(self.convs)` reading `feats[i]`), each level
    flattened and concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(3, 4, 3, padding=1) for _ in range(3))

    def forward(self, x: Tensor) -> Tensor:
        feats: list[Tensor] = [x]
        for _ in range(2):
            feats.append(F.max_pool2d(feats[-1], 2, ceil_mode=True))
        outs: list[Tensor] = []
        for i, conv in enumerate(self.convs):
            y = conv(feats[i])
            outs.append(y.reshape(y.size(0), y.size(1), -1))
        return torch.cat(outs, 2)


class BoolMaskSteps(nn.Module):
    """A list of boolean masks, one per step (`finished.append(tok == eos)`), or-ed together and
    counted at the end."""

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        masks: list[Tensor] = []
        for i in range(tokens.size(0)):
            masks.append(tokens[i] == 0)
        done = torch.stack(masks)
        return done.any(0), done.sum(0)


class HalfCache(nn.Module):
    """A float16 cache: each step's state cast to half and appended (`cache.append(h.half())`),
    the cache concatenated and read back as float."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        cache: list[Tensor] = []
        h = torch.zeros(1, 4)
        for i in range(x.size(0)):
            h = torch.tanh(self.lin(x[i : i + 1]) + h)
            cache.append(h.half())
        return torch.cat(cache, 0).float()


class ReverseByLoop(nn.Module):
    """A list reversed by a loop from the end (`for i in range(len(xs) - 1, -1, -1):
    out.append(xs[i])`), then combined with the original element by element."""

    def forward(self, x: Tensor) -> Tensor:
        xs = x.unbind(0)
        rev: list[Tensor] = []
        for i in range(len(xs) - 1, -1, -1):
            rev.append(xs[i])
        out: list[Tensor] = []
        for a, b in zip(xs, rev):
            out.append(a - b)
        return torch.stack(out)


class CtcGreedyBatch(nn.Module):
    """Greedy CTC decoding per utterance of a batch (the torchaudio tutorial's
    GreedyCTCDecoder: collapse repeats, drop blanks), the token lists padded into one tensor
    with a loop over the decoded lists."""

    def forward(self, logits: Tensor) -> Tensor:
        best = logits.argmax(-1)
        outs: list[Tensor] = []
        for b in range(best.size(0)):
            seq = best[b]
            keep = torch.ones_like(seq, dtype=torch.bool)
            keep[1:] = seq[1:] != seq[:-1]
            keep = keep & (seq != 0)
            outs.append(seq[keep])
        m = 0
        for o in outs:
            m = max(m, o.size(0))
        padded = [F.pad(o, (0, m - o.size(0))) for o in outs]
        return torch.stack(padded) if len(padded) > 0 else best[:, :0]


class FpnLateralConcat(nn.Module):
    """torchvision's FeaturePyramidNetwork (lateral convs, a top-down pass that inserts each
    level at the front) whose outputs a detection head flattens and concatenates."""

    def __init__(self) -> None:
        super().__init__()
        self.lat = nn.ModuleList([nn.Conv2d(c, 8, 1) for c in (4, 8, 16)])
        self.out = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in range(3)])

    def forward(self, x0: Tensor, x1: Tensor, x2: Tensor) -> Tensor:
        feats = [x0, x1, x2]
        lats: list[Tensor] = []
        for i, conv in enumerate(self.lat):
            lats.append(conv(feats[i]))
        results: list[Tensor] = [lats[-1]]
        last = lats[-1]
        for i in range(len(lats) - 2, -1, -1):
            last = lats[i] + F.avg_pool2d(last, 1)
            results.insert(0, last)
        outs: list[Tensor] = []
        for i, conv in enumerate(self.out):
            outs.append(conv(results[i]))
        return torch.cat([o.reshape(o.size(0), o.size(1), -1) for o in outs], 2)


class KeyCacheAttention(nn.Module):
    """A decoder step loop with a key cache kept as a list, as minimal GPT-style decoders
    write it: `keys.append(k[:, None])`, then `torch.cat(keys, 1)` attended to every step."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: Tensor, steps: int) -> Tensor:
        keys: list[Tensor] = []
        h = x
        outs: list[Tensor] = []
        for _ in range(steps):
            keys.append(self.proj(h).unsqueeze(1))
            cache = torch.cat(keys, 1)
            att = torch.softmax((cache * h.unsqueeze(1)).sum(-1), -1)
            h = torch.tanh((att.unsqueeze(-1) * cache).sum(1))
            outs.append(h)
        return torch.stack(outs, 1)


class TopkPerClass(nn.Module):
    """Detection postprocessing by class (torchvision RetinaNet's `postprocess_detections`):
    per class, keep the scores over a threshold, then the top k of them and their boxes."""

    def forward(self, scores: Tensor, boxes: Tensor) -> tuple[Tensor, Tensor]:
        all_boxes: list[Tensor] = []
        all_scores: list[Tensor] = []
        for c in range(scores.size(1)):
            s = scores[:, c]
            keep = s > 0.3
            s = s[keep]
            b = boxes[keep]
            top, idx = s.topk(min(5, s.size(0)))
            all_scores.append(top)
            all_boxes.append(b[idx])
        return torch.cat(all_boxes, 0), torch.cat(all_scores, 0)


class ChunkedAttention(nn.Module):
    """Attention computed head group by head group (`zip(q.chunk(4, 1), k.chunk(4, 1), ...)`),
    as head-by-head implementations write it."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        outs: list[Tensor] = []
        for qc, kc, vc in zip(q.chunk(4, 1), k.chunk(4, 1), v.chunk(4, 1)):
            a = torch.softmax(qc @ kc.transpose(-1, -2) / 4.0, -1)
            outs.append(a @ vc)
        return torch.cat(outs, 1)


class TopPSample(nn.Module):
    """Top-p (nucleus) sampling made greedy, as sampling loops in text generation write it:
    sort the probabilities, drop those past p, take the token `si.gather(-1,
    p.argmax(-1, keepdim=True))`, feed it back one-hot; the tokens appended to a list."""

    def forward(self, logits: Tensor, n: int) -> Tensor:
        toks: list[Tensor] = []
        h = logits
        for _ in range(n):
            probs = torch.softmax(h, -1)
            sp, si = probs.sort(-1, descending=True)
            cut = (sp.cumsum(-1) - sp) > 0.9
            sp = sp.masked_fill(cut, 0.0)
            tok = si.gather(-1, sp.argmax(-1, keepdim=True))
            toks.append(tok)
            h = h + 0.1 * F.one_hot(tok.squeeze(-1), h.size(-1)).float()
        return torch.cat(toks, -1)


class SegmentMean(nn.Module):
    """Mean pooling per segment of a packed batch (`for l in lengths: outs.append(x[start:start
    + l].mean(0))`), as sentence-embedding pooling over packed tokens writes it."""

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        outs: list[Tensor] = []
        start = 0
        for i in range(lengths.size(0)):
            length = int(lengths[i])
            outs.append(x[start : start + length].mean(0))
            start += length
        return torch.stack(outs) if len(outs) > 0 else x[:0]


class ChunkEncoder(nn.Module):
    """A streaming encoder over chunks of the time axis (`for c in x.split(chunk, 1)`), each
    chunk's output appended and the state carried to the next chunk: the last chunk may be
    shorter."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: Tensor, chunk: int) -> Tensor:
        outs: list[Tensor] = []
        state = torch.zeros(x.size(0), 8)
        for c in x.split(chunk, 1):
            h = torch.tanh(self.lin(c) + state.unsqueeze(1))
            state = h[:, -1]
            outs.append(h)
        return torch.cat(outs, 1)


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _long(values: list[int]) -> Tensor:
    return torch.tensor(values, dtype=torch.long)


def _scalar(value: int) -> Tensor:
    return torch.tensor(value, dtype=torch.long)


def _ragged(lengths: list[int], seed: int) -> Maker:
    return lambda: [_randn(sum(lengths), 3, seed=seed), _long(lengths)]


CASES = [
    Case("backward_rnn_insert_front", BackwardRnnInsertFront, ["x", "h"], ["y"],
         [lambda: [_randn(6, 2, 4, seed=1), _randn(2, 6, seed=2)],
          lambda: [_randn(1, 1, 4, seed=3), _randn(1, 6, seed=4)]],
         {"x": {0: "T", 1: "B"}, "h": {0: "B"}}),
    Case("edit_assign_delete", EditAssignDelete, ["x", "k", "j"], ["y", "last"],
         [lambda: [_randn(6, 3, seed=1), _scalar(2), _scalar(4)],
          lambda: [_randn(5, 3, seed=2), _scalar(4), _scalar(-5)],
          lambda: [_randn(3, 3, seed=3), _scalar(0), _scalar(-1)]],
         {"x": {0: "N"}}),
    Case("while_len_pad", WhileLenPad, ["tokens", "max_len"], ["ids"],
         [lambda: [_long([[4, 1], [7, 2], [3, 3]]), _scalar(8)],
          lambda: [_long([[5, 5]]), _scalar(1)],
          lambda: [_long([[1, 2], [3, 4]]), _scalar(0)]],
         {"tokens": {0: "T"}}),
    Case("threshold_keep", ThresholdKeep, ["boxes", "scores"], ["kept", "kept_scores"],
         [lambda: [_randn(9, 4, seed=1), _randn(9, seed=2)],
          lambda: [_randn(3, 4, seed=3), -_randn(3, seed=4).abs()],
          lambda: [_randn(1, 4, seed=5), _randn(1, seed=6).abs()]],
         {"boxes": {0: "N"}, "scores": {0: "N"}}),
    Case("bracket_stack", BracketStack, ["tokens"], ["y"],
         [lambda: [_long([0, 2, 1, 0, 0, 1, 1, 1, 2, 1])],
          lambda: [_long([1])], lambda: [_long([2, 2, 2])]],
         {"tokens": {0: "T"}}),
    Case("pop_argmax", PopArgmax, ["cands", "k"], ["taken"],
         [lambda: [_randn(7, 3, seed=1), _scalar(4)],
          lambda: [_randn(2, 3, seed=2), _scalar(5)],
          lambda: [_randn(3, 3, seed=3), _scalar(0)]],
         {"cands": {0: "N"}}),
    Case("zip_two_sources", ZipTwoSources, ["x", "y"], ["z"],
         [lambda: [_randn(7, 3, seed=1), _randn(3, 3, seed=2)],
          lambda: [_randn(4, 3, seed=3), _randn(5, 3, seed=4)],
          lambda: [_randn(1, 3, seed=5), _randn(1, 3, seed=6)]],
         {"x": {0: "N"}, "y": {0: "M"}}),
    Case("nested_flatten", NestedFlatten, ["x", "y"], ["flat"],
         [lambda: [_randn(3, 2, 4, seed=1), _randn(2, 1, 4, seed=2)],
          lambda: [_randn(1, 3, 4, seed=3), _randn(4, 3, 4, seed=4)]],
         {"x": {0: "N", 1: "A"}, "y": {0: "M", 1: "B"}}),
    Case("level_pairs", LevelPairs, ["f0", "f1", "f2"], ["boxes", "scores"],
         [lambda: [_randn(8, 3, seed=1), _randn(4, 3, seed=2), _randn(2, 3, seed=3)],
          lambda: [_randn(1, 3, seed=4), _randn(3, 3, seed=5), _randn(5, 3, seed=6)]],
         {f"f{k}": {0: f"N{k}"} for k in range(3)}),
    Case("sorted_by_key", SortedByKey, ["x", "keys"], ["y"],
         [lambda: [_randn(6, 2, seed=1), _randn(6, seed=2)],
          lambda: [_randn(1, 2, seed=3), _randn(1, seed=4)]],
         {"x": {0: "N"}, "keys": {0: "N"}}),
    Case("beam_bookkeeping", BeamBookkeeping, ["start", "steps"], ["hyps", "scores"],
         [lambda: [_long([2]), _scalar(5)], lambda: [_long([3, 1]), _scalar(1)],
          lambda: [_long([4]), _scalar(0)]],
         {"start": {0: "S"}}),
    Case("ragged_pad", RaggedPad, ["flat", "lengths"], ["padded"],
         [_ragged([3, 1, 4, 2], 1), _ragged([2], 2), _ragged([0, 3], 3)],
         {"flat": {0: "T"}, "lengths": {0: "B"}}),
    Case("cumulative_list", CumulativeList, ["x"], ["y"],
         [lambda: [_randn(8, 3, seed=1)], lambda: [_randn(1, 3, seed=2)]],
         {"x": {0: "N"}}),
    Case("token_window", TokenWindow, ["tokens"], ["y"],
         [lambda: [_long([1, 4, 2, 8, 5, 7, 0])], lambda: [_long([3])],
          lambda: [_long([6, 6, 6])]],
         {"tokens": {0: "T"}}),
    Case("sliding_windows", SlidingWindows, ["x"], ["y"],
         [lambda: [_randn(11, 3, seed=1)], lambda: [_randn(4, 3, seed=2)],
          lambda: [_randn(5, 3, seed=3)]],
         {"x": {0: "N"}}),
    Case("pyramid_convs", PyramidConvs, ["x"], ["y"],
         [lambda: [_randn(1, 3, 8, 8, seed=1)], lambda: [_randn(2, 3, 5, 3, seed=2)]],
         {"x": {0: "B", 2: "H", 3: "W"}}),
    Case("bool_mask_steps", BoolMaskSteps, ["tokens"], ["any_done", "count"],
         [lambda: [_long([[1, 0, 3], [0, 2, 3], [4, 4, 0], [1, 0, 0]])],
          lambda: [_long([[2, 0, 1]])]],
         {"tokens": {0: "T", 1: "B"}}),
    Case("half_cache", HalfCache, ["x"], ["y"],
         [lambda: [_randn(6, 4, seed=1)], lambda: [_randn(1, 4, seed=2)]],
         {"x": {0: "T"}}),
    Case("reverse_by_loop", ReverseByLoop, ["x"], ["y"],
         [lambda: [_randn(7, 2, seed=1)], lambda: [_randn(1, 2, seed=2)]],
         {"x": {0: "N"}}),
    Case("ctc_greedy_batch", CtcGreedyBatch, ["logits"], ["tokens"],
         [lambda: [_randn(3, 12, 5, seed=1)], lambda: [_randn(1, 7, 5, seed=2)],
          lambda: [_randn(2, 1, 5, seed=3)]],
         {"logits": {0: "B", 1: "T"}}),
    Case("fpn_lateral_concat", FpnLateralConcat, ["x0", "x1", "x2"], ["y"],
         [lambda: [_randn(2, 4, 8, 8, seed=1), _randn(2, 8, 8, 8, seed=2),
                   _randn(2, 16, 8, 8, seed=3)],
          lambda: [_randn(8, 4, 8, 8, seed=4), _randn(8, 8, 8, 8, seed=5),
                   _randn(8, 16, 8, 8, seed=6)]],
         {"x0": {0: "B"}, "x1": {0: "B"}, "x2": {0: "B"}}),
    Case("key_cache_attention", KeyCacheAttention, ["x", "steps"], ["y"],
         [lambda: [_randn(2, 16, seed=1), _scalar(6)], lambda: [_randn(3, 16, seed=2), _scalar(1)]],
         {"x": {0: "B"}}),
    Case("topk_per_class", TopkPerClass, ["scores", "boxes"], ["boxes_kept", "scores_kept"],
         [lambda: [torch.rand(20, 3, generator=torch.Generator().manual_seed(1)),
                   _randn(20, 4, seed=2)],
          lambda: [torch.rand(3, 3, generator=torch.Generator().manual_seed(3)),
                   _randn(3, 4, seed=4)]],
         {"scores": {0: "N"}, "boxes": {0: "N"}}),
    Case("chunked_attention", ChunkedAttention, ["q", "k", "v"], ["y"],
         [lambda: [_randn(2, 8, 6, 4, seed=1), _randn(2, 8, 6, 4, seed=2),
                   _randn(2, 8, 6, 4, seed=3)],
          lambda: [_randn(1, 8, 1, 4, seed=4), _randn(1, 8, 1, 4, seed=5),
                   _randn(1, 8, 1, 4, seed=6)]],
         {"q": {0: "B", 2: "T"}, "k": {0: "B", 2: "T"}, "v": {0: "B", 2: "T"}}),
    Case("top_p_sample", TopPSample, ["logits", "n"], ["tokens"],
         [lambda: [_randn(3, 10, seed=1), _scalar(6)], lambda: [_randn(1, 10, seed=2), _scalar(1)]],
         {"logits": {0: "B"}}),
    Case("segment_mean", SegmentMean, ["x", "lengths"], ["y"],
         [lambda: [_randn(10, 4, seed=1), _long([3, 5, 2])],
          lambda: [_randn(2, 4, seed=2), _long([2])]],
         {"x": {0: "N"}, "lengths": {0: "S"}}),
    Case("chunk_encoder", ChunkEncoder, ["x", "chunk"], ["y"],
         [lambda: [_randn(2, 10, 8, seed=1), _scalar(4)],
          lambda: [_randn(1, 3, 8, seed=2), _scalar(4)]],
         {"x": {0: "B", 1: "T"}}),
]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(CASES, OUT, sys.argv[1:]))
