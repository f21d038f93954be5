"""Command-line options shared by `optimize` and `inspect`, and their translation to `Options`."""

from __future__ import annotations

__all__ = [
    "DEFAULT_TARGET",
    "TARGETS",
    "DimOption",
    "FlattenOption",
    "SeqLenOption",
    "SplitKeepdims",
    "SplitKeepdimsChoice",
    "SplitKeepdimsOption",
    "TargetName",
    "TargetOption",
    "check_target_name",
    "lowering_options",
    "parse_sizes",
]

import enum
from typing import Annotated

import typer

from seqlower.errors import SeqlowerError
from seqlower.options import Options
from seqlower.targets import PROFILES

TARGETS = tuple(PROFILES)

# The choices of --target are the profiles seqlower.targets defines, so a new profile shows up
# in the help and the parser by itself.
TargetName = enum.Enum("TargetName", {name: name for name in TARGETS}, type=str)  # type: ignore[misc]
DEFAULT_TARGET = TargetName("generic")


class SplitKeepdims(str, enum.Enum):
    """The readings of SplitToSequence(scalar split, keepdims=0)."""

    onnxruntime = "onnxruntime"
    spec = "spec"


TargetOption = Annotated[
    TargetName,
    typer.Option(
        "--target",
        help="Runtime profile: every target lowers all it can; generic accepts any leftover; "
        "onnxruntime asks for speed first (keeps a region of sequence ops as given where that "
        "is estimated faster) and warns about other leftovers; the others fail (exit 1) on what "
        "that runtime cannot run, such as sequence ops and dynamic scan lengths for tensorrt.",
    ),
]

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
        "--flatten-sequence-io",
        help="Turn static-length sequence outputs, and the sequence inputs given a --seq-len, "
        "into one tensor per element (name_0, name_1, ...).",
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
_SPLIT_KEEPDIMS_HELP = (
    "Reading of SplitToSequence(scalar split, keepdims=0): onnxruntime squeezes the axis (as "
    "onnxruntime and PyTorch do), spec keeps it (the ONNX specification)."
)
SplitKeepdimsChoice = Annotated[SplitKeepdims, typer.Option(help=_SPLIT_KEEPDIMS_HELP)]
# the same option as a plain string, checked by `lowering_options` (`inspect` uses it)
SplitKeepdimsOption = Annotated[str, typer.Option(help=_SPLIT_KEEPDIMS_HELP)]


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


def check_target_name(target: str | enum.Enum) -> str:
    """The target name, or `SeqlowerError` listing the valid ones."""
    if isinstance(target, enum.Enum):
        target = str(target.value)
    if target not in PROFILES:
        raise SeqlowerError(f"--target must be one of {', '.join(TARGETS)}, not '{target}'")
    return target


def lowering_options(
    split_keepdims: str | SplitKeepdims,
    dim: list[str] | None,
    flatten: bool,
    seq_len: list[str] | None,
) -> Options:
    """The `Options` the shared command-line options ask for; `SeqlowerError` when malformed."""
    if isinstance(split_keepdims, SplitKeepdims):
        split_keepdims = split_keepdims.value
    if split_keepdims not in ("onnxruntime", "spec"):
        raise SeqlowerError(f"--split-keepdims must be onnxruntime or spec, not '{split_keepdims}'")
    return Options(
        split_keepdims=split_keepdims,  # type: ignore[arg-type]
        dims=parse_sizes(dim, "--dim"),
        flatten_sequence_io=flatten,
        seq_lens=parse_sizes(seq_len, "--seq-len"),
    )
