#!/usr/bin/env python3
"""Export the TorchScript loop forms of issue 12 for `bench/loop_forms.py`.

    pip install torch==2.13.0            # not a dependency of seqlower: only these files are
    python tools/export_loop_forms.py    # committed, under bench/fixtures/loop_forms/

Each form is a PyTorch loop over the elements of a tensor, scripted (`torch.jit.script`) and
exported with the legacy TorchScript exporter (opset 17), as users' models come: at N in
{8, 64, 512} baked into the input shape (`<form>_<N>.onnx`) and with N a dynamic axis
(`<form>_dyn.onnx`). Next to each, `<form>_<N>_batched.onnx` / `<form>_dyn_batched.onnx` is the
same computation written batched by hand (the floor), exported from the same weights. The
script checks every file with the ONNX checker and against PyTorch in onnxruntime. Reruns give
byte-identical files.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import Tensor

OUT = Path(__file__).resolve().parent.parent / "bench" / "fixtures" / "loop_forms"
SIZES = (8, 64, 512)
D = 64  # features per element
HEAD_T, HEAD_D = 16, 16  # tokens and width of one attention head


class Mlp(torch.nn.Module):
    """relu(t @ w + b). Written with matmul, not torch.nn.Linear: the TorchScript exporter turns
    Linear on a 1-D element (unbind) into Gemm, which onnxruntime reads as [1, D]."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(D, D) / 8)
        self.b = torch.nn.Parameter(torch.randn(D) / 8)

    def mlp(self, t: Tensor) -> Tensor:
        return torch.relu(t @ self.w + self.b)


class SplitLoop(Mlp):
    """`for s in x.split(1, 0): out.append(mlp(s))`; `cat(out, 0)`."""

    def forward(self, x: Tensor) -> Tensor:
        out: list[Tensor] = []
        for s in x.split(1, 0):
            out.append(self.mlp(s))
        return torch.cat(out, 0)


class UnbindLoop(Mlp):
    """`for t in x.unbind(0): out.append(mlp(t))`; `stack(out, 0)`."""

    def forward(self, x: Tensor) -> Tensor:
        out: list[Tensor] = []
        for t in x.unbind(0):
            out.append(self.mlp(t))
        return torch.stack(out, 0)


class ZipSplit(Mlp):
    """`for a, b in zip(x.split(1, 0), y.split(1, 0)): out.append(mlp(a) + b)`; `cat(out, 0)`."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        out: list[Tensor] = []
        for a, b in zip(x.split(1, 0), y.split(1, 0)):
            out.append(self.mlp(a) + b)
        return torch.cat(out, 0)


class EnumerateComp(Mlp):
    """`stack([mlp(t) * 0.5 for i, t in enumerate(x.unbind(0))])` (TorchScript cannot use `i`
    as a float in a comprehension, so it only enumerates)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([self.mlp(t) * 0.5 for i, t in enumerate(x.unbind(0))])


class PerHead(torch.nn.Module):
    """`for h in range(q.size(0)): out.append(softmax(q[h] @ k[h].T) @ v[h])`; `stack(out)`."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        out: list[Tensor] = []
        for h in range(q.size(0)):
            out.append(torch.softmax(q[h] @ k[h].transpose(0, 1), -1) @ v[h])
        return torch.stack(out, 0)


class MlpBatched(Mlp):
    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x)


class ZipBatched(Mlp):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        n = min(x.size(0), y.size(0))
        return self.mlp(x[:n]) + y[:n]


class EnumerateBatched(Mlp):
    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x) * 0.5


class PerHeadBatched(torch.nn.Module):
    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return torch.softmax(q @ k.transpose(1, 2), -1) @ v


FORMS: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], torch.nn.Module], str]] = {
    # name: (loop module, batched module, inputs: "x" [N, D], "xy" two [N, D], "qkv" three heads)
    "split_loop": (SplitLoop, MlpBatched, "x"),
    "unbind_loop": (UnbindLoop, MlpBatched, "x"),
    "per_head": (PerHead, PerHeadBatched, "qkv"),
    "zip_split": (ZipSplit, ZipBatched, "xy"),
    "enumerate_comp": (EnumerateComp, EnumerateBatched, "x"),
}


def inputs_for(kind: str, n: int, generator: torch.Generator) -> dict[str, Tensor]:
    if kind == "qkv":
        return {name: torch.randn(n, HEAD_T, HEAD_D, generator=generator) for name in "qkv"}
    names = ["x", "y"] if kind == "xy" else ["x"]
    return {name: torch.randn(n, D, generator=generator) for name in names}


def export(module: torch.nn.Module, feeds: dict[str, Tensor], dynamic: bool, script: bool) -> bytes:
    module.eval()
    target = torch.jit.script(module) if script else module
    names = list(feeds)
    buffer = io.BytesIO()
    torch.onnx.export(
        target,
        tuple(feeds.values()),
        buffer,
        input_names=names,
        output_names=["out"],
        dynamic_axes={name: {0: "N"} for name in [*names, "out"]} if dynamic else None,
        opset_version=17,
        dynamo=False,
    )
    return buffer.getvalue()


def check(data: bytes, feeds: dict[str, Tensor], expected: Tensor) -> None:
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {name: t.numpy() for name, t in feeds.items()})
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)


def main(names: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or list(FORMS):
        make_loop, make_batched, kind = FORMS[name]
        torch.manual_seed(0)
        loop = make_loop()
        batched = make_batched()
        batched.load_state_dict(loop.state_dict())
        for size in (*SIZES, None):
            generator = torch.Generator().manual_seed(1)
            feeds = inputs_for(kind, size or 5, generator)
            with torch.no_grad():
                expected = loop(*feeds.values())
                np.testing.assert_allclose(
                    batched(*feeds.values()).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6
                )
            stem = f"{name}_{size}" if size else f"{name}_dyn"
            for suffix, module, script in (("", loop, True), ("_batched", batched, False)):
                data = export(module, feeds, size is None, script)
                check(data, feeds, expected)
                (OUT / f"{stem}{suffix}.onnx").write_bytes(data)
            print(f"{stem}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
