#!/usr/bin/env python3
"""Export loops that grow a tensor with `torch.cat` (no Python list) as test fixtures.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx onnxruntime
    /tmp/torchvenv/bin/python tools/export_torch_accumulator_fixtures.py   # all cases, or CASE...

Scripted loops that write `acc = torch.cat((acc, piece))` export as a Loop that carries `acc`
and concatenates in its body: no sequence operator at all. `paste_masks` and `keypoints` are
written after torchvision's `_onnx_paste_masks_in_image_loop` and
`_onnx_heatmaps_to_keypoints_loop` (torchvision/models/detection/roi_heads.py), the loops its
Mask R-CNN and Keypoint R-CNN exports contain; the others are the variants the
`loop-concat-to-scan` rule handles or refuses. Same machinery and layout as
`tools/export_torch_fixtures.py` (TorchScript exporter, opset 17, outputs computed by PyTorch,
checked against onnxruntime), written to `tests/fixtures/torch_accumulators/<case>/`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torch_fixtures import REPO_ROOT, Case, export_cases

OUT = REPO_ROOT / "tests" / "fixtures" / "torch_accumulators"


@torch.jit.script
def _paste_one(mask: Tensor, box: Tensor, im_h: Tensor, im_w: Tensor) -> Tensor:
    """One mask resized to its box and placed on an `im_h` x `im_w` canvas of zeros, padding
    with zeros and cropping with slices only (no in-place writes)."""
    one = torch.ones(1, dtype=torch.int64)
    zero = torch.zeros(1, dtype=torch.int64)
    w = torch.max(torch.cat((box[2] - box[0] + one, one)))
    h = torch.max(torch.cat((box[3] - box[1] + one, one)))
    resized = F.interpolate(
        mask.expand((1, 1, mask.size(0), mask.size(1))),
        size=(int(h), int(w)),
        mode="bilinear",
        align_corners=False,
    )[0][0]
    left = torch.max(torch.cat((box[0].unsqueeze(0), zero)))
    right = torch.min(torch.cat((box[2].unsqueeze(0) + one, im_w.unsqueeze(0))))
    top = torch.max(torch.cat((box[1].unsqueeze(0), zero)))
    bottom = torch.min(torch.cat((box[3].unsqueeze(0) + one, im_h.unsqueeze(0))))
    inside = resized[(top - box[1]) : (bottom - box[1]), (left - box[0]) : (right - box[0])]
    rows = torch.cat(
        (
            torch.zeros(top, inside.size(1)),
            inside.to(dtype=torch.float32),
            torch.zeros(im_h - bottom, inside.size(1)),
        ),
        0,
    )[0:im_h, :]
    return torch.cat(
        (torch.zeros(rows.size(0), left), rows, torch.zeros(rows.size(0), im_w - right)), 1
    )[:, :im_w]


@torch.jit.script
def _paste_loop(masks: Tensor, boxes: Tensor, im_h: Tensor, im_w: Tensor) -> Tensor:
    """`res = zeros(0, H, W)`; per detection `res = cat((res, paste(mask, box).unsqueeze(0)))`."""
    res = torch.zeros(0, int(im_h), int(im_w))
    for i in range(masks.size(0)):
        pasted = _paste_one(masks[i][0], boxes[i], im_h, im_w).unsqueeze(0)
        res = torch.cat((res, pasted))
    return res


class PasteMasks(torch.nn.Module):
    """Mask R-CNN's mask pasting on a 24x32 image, whose size is a constant of the model (as in
    torchvision's exports, where it is the input size): the loop starts from a constant of
    shape (0, 24, 32) and grows it by one pasted mask per detection."""

    def forward(self, masks: Tensor, boxes: Tensor) -> Tensor:
        height = torch.scalar_tensor(24, dtype=torch.int64)
        width = torch.scalar_tensor(32, dtype=torch.int64)
        return _paste_loop(masks, boxes, height, width)[:, None]


@torch.jit.script
def _decode_one(
    maps: Tensor, map_i: Tensor, width_ceil: Tensor, height_ceil: Tensor, width: Tensor,
    height: Tensor, offset_x: Tensor, offset_y: Tensor,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """One detection's heatmaps resized to its box (bicubic); the arg-max of each keypoint's
    map, as image coordinates, and its score."""
    count = torch.scalar_tensor(maps.size(1), dtype=torch.int64)
    roi_map = F.interpolate(
        map_i[:, None], size=(int(height_ceil), int(width_ceil)), mode="bicubic",
        align_corners=False,
    )[:, 0]  # fmt: skip
    w = torch.scalar_tensor(roi_map.size(2), dtype=torch.int64)
    pos = roi_map.reshape(count, -1).argmax(dim=1)
    x_int = pos % w
    y_int = (pos - x_int) // w
    half = torch.tensor(0.5, dtype=torch.float32)
    x = (half + x_int.to(dtype=torch.float32)) * (width / width_ceil).to(dtype=torch.float32)
    y = (half + y_int.to(dtype=torch.float32)) * (height / height_ceil).to(dtype=torch.float32)
    xs = x + offset_x.to(dtype=torch.float32)
    ys = y + offset_y.to(dtype=torch.float32)
    xy = torch.stack([xs, ys, torch.ones(ys.shape, dtype=torch.float32)], 0)
    step = count * count + count + 1
    picks = torch.arange(count).to(dtype=torch.int64) * step
    scores = roi_map.index_select(1, y_int).index_select(2, x_int).view(-1).index_select(0, picks)
    return xy, scores


class Keypoints(torch.nn.Module):
    """Keypoint R-CNN's heatmap decoding: two tensors grown per detection,
    `xy = cat((xy.to(float32), xy_i.unsqueeze(0).to(float32)), 0)` and the same for scores."""

    def forward(self, maps: Tensor, rois: Tensor) -> tuple[Tensor, Tensor]:
        widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
        heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
        widths_ceil, heights_ceil = widths.ceil(), heights.ceil()
        count = torch.scalar_tensor(4, dtype=torch.int64)  # the model's keypoint count
        xy = torch.zeros((0, 3, int(count)), dtype=torch.float32)
        scores = torch.zeros((0, int(count)), dtype=torch.float32)
        for i in range(int(rois.size(0))):
            xy_i, scores_i = _decode_one(
                maps, maps[i], widths_ceil[i], heights_ceil[i], widths[i], heights[i],
                rois[i, 0], rois[i, 1],
            )  # fmt: skip
            xy = torch.cat((xy.to(dtype=torch.float32), xy_i.unsqueeze(0).to(torch.float32)), 0)
            scores = torch.cat(
                (scores.to(dtype=torch.float32), scores_i.to(torch.float32).unsqueeze(0)), 0
            )
        return xy.permute(0, 2, 1), scores


class CatColumns(torch.nn.Module):
    """`acc = x[:, :1]`; `for i in range(n): acc = cat((acc, (x * i).sum(1, keepdim=True)), 1)`."""

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        acc = x[:, :1]
        for i in range(int(n)):
            acc = torch.cat((acc, (x * float(i)).sum(1, keepdim=True)), 1)
        return acc


class CatPairs(torch.nn.Module):
    """`acc = zeros(0, C)`; `for i in range(n): acc = cat((acc, x[:2] + i))`: two rows a step."""

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        acc = torch.zeros(0, x.size(1))
        for i in range(int(n)):
            acc = torch.cat((acc, x[:2] + float(i)))
        return acc


class Prepend(torch.nn.Module):
    """`acc = x[:1]`; `for t in x: acc = cat((t.unsqueeze(0) * 2, acc))`: newest first."""

    def forward(self, x: Tensor) -> Tensor:
        acc = x[:1]
        for i in range(x.size(0)):
            acc = torch.cat(((x[i] * 2.0).unsqueeze(0), acc))
        return acc


class CondGrow(torch.nn.Module):
    """`for t in x: if t.sum() > 0: acc = cat((acc, t.unsqueeze(0)))`: only some rows."""

    def forward(self, x: Tensor) -> Tensor:
        acc = torch.zeros(0, x.size(1))
        for i in range(x.size(0)):
            if bool(x[i].sum() > 0):
                acc = torch.cat((acc, x[i].unsqueeze(0)))
        return acc


class Growing(torch.nn.Module):
    """`for i in range(x.size(0)): acc = cat((acc, x[: i + 1]))`: pieces of growing size."""

    def forward(self, x: Tensor) -> Tensor:
        acc = x[:1]
        for i in range(x.size(0)):
            acc = torch.cat((acc, x[: i + 1] * 2.0))
        return acc


def _boxes(k: int, ts: list[Tensor]) -> list[Tensor]:
    """Masks (N, 1, 14, 14), integer boxes inside a 24x32 canvas (some crossing its edge)."""
    masks = ts[0]
    n = masks.size(0)
    gen = torch.Generator().manual_seed(10 + k)
    x0 = torch.randint(-4, 28, (n,), generator=gen)
    y0 = torch.randint(-4, 20, (n,), generator=gen)
    w = torch.randint(1, 12, (n,), generator=gen)
    h = torch.randint(1, 12, (n,), generator=gen)
    boxes = torch.stack([x0, y0, x0 + w, y0 + h], 1).to(torch.int64)
    return [masks, boxes]


def _rois(k: int, ts: list[Tensor]) -> list[Tensor]:
    """Heatmaps (N, K, 8, 8), boxes (x0, y0, x1, y1) of 2 to 12 pixels a side."""
    maps = ts[0]
    gen = torch.Generator().manual_seed(20 + k)
    n = maps.size(0)
    corner = torch.rand(n, 2, generator=gen) * 20
    size = 2 + torch.rand(n, 2, generator=gen) * 10
    return [maps, torch.cat((corner, corner + size), 1)]


def _count(value: int):  # type: ignore[no-untyped-def]
    """A `prepare` hook: the last input becomes the int64 scalar `value` (set 0), value + 2."""
    return lambda k, ts: [*ts[:-1], torch.tensor(value + 2 * k)]


ROWS = {0: "N"}
CASES = [
    Case("paste_masks", PasteMasks, {"masks": (3, 1, 14, 14), "boxes": (3, 4)}, ["masks_out"],
         PasteMasks.__doc__ or "",
         dynamic_axes={"masks": {0: "N"}, "boxes": {0: "N"}},
         alt_inputs={"masks": (1, 1, 14, 14), "boxes": (1, 4)},
         prepare=_boxes, lengths="dynamic (N detections)"),
    Case("keypoints", Keypoints, {"maps": (3, 4, 8, 8), "rois": (3, 4)}, ["xy", "scores"],
         Keypoints.__doc__ or "", dynamic_axes={"maps": {0: "N"}, "rois": {0: "N"}},
         alt_inputs={"maps": (2, 4, 8, 8), "rois": (2, 4)}, prepare=_rois,
         lengths="dynamic (N detections)"),
    Case("cat_columns", CatColumns, {"x": (3, 4), "n": (1,)}, ["y"], CatColumns.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 4), "n": (1,)}, prepare=_count(3),
         lengths="dynamic (n)"),
    Case("cat_pairs", CatPairs, {"x": (3, 4), "n": (1,)}, ["y"], CatPairs.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 4), "n": (1,)}, prepare=_count(2),
         lengths="dynamic (n)"),
    Case("prepend", Prepend, {"x": (4, 3)}, ["y"], Prepend.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (1, 3)}, lengths="dynamic (N)"),
    Case("cond_grow", CondGrow, {"x": (5, 3)}, ["y"], CondGrow.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 3)}, lengths="dynamic (data)"),
    Case("growing", Growing, {"x": (4, 3)}, ["y"], Growing.__doc__ or "",
         dynamic_axes={"x": ROWS}, alt_inputs={"x": (2, 3)}, lengths="dynamic (N), growing"),
]  # fmt: skip


def main(names: list[str]) -> int:
    return export_cases(CASES, OUT, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
