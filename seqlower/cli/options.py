"""Command-line options shared by `optimize` and `inspect`, and their translation to `Options`."""

from __future__ import annotations

__all__ = [
    "TARGETS",
    "DimOption",
    "FlattenOption",
    "SeqLenOption",
    "SplitKeepdimsOption",
    "check_target_name",
    "lowering_options",
    "parse_sizes",
]

from typing import Annotated

import typer

from seqlower.errors import SeqlowerError
from seqlower.options import Options
from seqlower.targets import PROFILES

TARGETS = tuple(PROFILES)

DimOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=SIZE",
        help="Give a symbolic input dimension a size (repeatable); the lowered model then "
        "accepts only that size.",
    ),
]
FlattenOption = Annotated[
    bool,
    typer.Option(
        help="Turn static-length sequence outputs, and the sequence inputs given a --seq-len, "
        "into one tensor per element (name_0, name_1, ...)."
    ),
]
SeqLenOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=N",
        help="Length of a sequence-typed input to flatten (repeatable; with "
        "--flatten-sequence-io).",
    ),
]
SplitKeepdimsOption = Annotated[
    str,
    typer.Option(help="Reading of SplitToSequence(scalar split, keepdims=0): onnxruntime or spec."),
]


def parse_sizes(items: list[str] | None, option: str) -> dict[str, int]:
    """`["N=8", "B=2"]` -> `{"N": 8, "B": 2}`; raises `SeqlowerError` naming `option` on a
    malformed item (no '=', empty name, a size that is not an integer >= 0)."""
    sizes: dict[str, int] = {}
    for item in items or []:
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit():
            raise SeqlowerError(f"{option} expects NAME=SIZE with a size >= 0, got '{item}'")
        sizes[name.strip()] = int(size)
    return sizes


def check_target_name(target: str) -> str:
    """The target name, or `SeqlowerError` listing the valid ones."""
    if target not in PROFILES:
        raise SeqlowerError(f"--target must be one of {', '.join(TARGETS)}, not '{target}'")
    return target


def lowering_options(
    split_keepdims: str, dim: list[str] | None, flatten: bool, seq_len: list[str] | None
) -> Options:
    """The `Options` the shared command-line options ask for; `SeqlowerError` when malformed."""
    if split_keepdims not in ("onnxruntime", "spec"):
        raise SeqlowerError(f"--split-keepdims must be onnxruntime or spec, not '{split_keepdims}'")
    return Options(
        split_keepdims=split_keepdims,  # type: ignore[arg-type]
        dims=parse_sizes(dim, "--dim"),
        flatten_sequence_io=flatten,
        seq_lens=parse_sizes(seq_len, "--seq-len"),
    )
