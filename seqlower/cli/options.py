"""Command-line options shared by `optimize` and `inspect`, and their translation to `Options`."""

from __future__ import annotations

__all__ = [
    "DEFAULT_TARGET",
    "TARGETS",
    "DimOption",
    "FlattenOption",
    "InspectDimOption",
    "InspectTargetOption",
    "SeqLenOption",
    "SplitKeepdimsOption",
    "TargetOption",
    "lowering_options",
    "parse_sizes",
]

from typing import Annotated, Any

import typer

from seqlower.errors import SeqlowerError
from seqlower.options import SPLIT_KEEPDIMS_READINGS, TARGET_NAMES, Options, unknown_choice

try:  # typer 0.20+ carries its own copy of click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer depends on click itself
    import click  # type: ignore[no-redef]

TARGETS = TARGET_NAMES
DEFAULT_TARGET = "generic"


def _choice(option: str, name: str, choices: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """A callback that refuses a value outside `choices` with the message Python gives."""

    def check(ctx: click.Context, value: str) -> str:
        if value not in choices:
            raise click.exceptions.UsageError(unknown_choice(name, value, choices), ctx)
        return value

    return check


def _target_option(text: str) -> Any:
    """The `--target` option: one of TARGETS, refused otherwise with the message Python gives."""
    return typer.Option(
        "--target",
        metavar="[" + "|".join(TARGETS) + "]",
        callback=_choice("--target", "target", TARGETS),
        help=text,
    )


TargetOption = Annotated[
    str,
    _target_option(
        "The runtime the model is for: every target lowers all it can; generic accepts "
        "any leftover; onnxruntime asks for speed first (keeps a region of sequence ops as "
        "given where that is estimated faster) and warns about other leftovers; the others "
        "fail (exit 1) on what that runtime cannot run, such as sequence ops and dynamic scan "
        "lengths for tensorrt.",
    ),
]

InspectTargetOption = Annotated[
    str,
    _target_option(
        "Lower the copy as `optimize --target` would, and list what that runtime's profile "
        "refuses. The check reads the operators only: it does not load the model in OpenVINO or "
        "tract, which `optimize --target` does when they are installed. The exit code stays 0.",
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
InspectDimOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=SIZE",
        help="Give a symbolic input dimension a size (repeatable), as `optimize --dim` would: "
        "lengths and positions that follow it become static, and inspect shows how that "
        "changes the lowering.",
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
SplitKeepdimsOption = Annotated[
    str,
    typer.Option(
        metavar="[" + "|".join(SPLIT_KEEPDIMS_READINGS) + "]",
        callback=_choice("--split-keepdims", "split_keepdims", SPLIT_KEEPDIMS_READINGS),
        help=_SPLIT_KEEPDIMS_HELP,
    ),
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


def lowering_options(
    split_keepdims: str,
    dim: list[str] | None,
    flatten: bool,
    seq_len: list[str] | None,
    target: str = DEFAULT_TARGET,
    runtime_check: bool = False,
) -> Options:
    """The `Options` the shared command-line options ask for; `SeqlowerError` when malformed."""
    return Options(
        split_keepdims=split_keepdims,  # type: ignore[arg-type]
        dims=parse_sizes(dim, "--dim"),
        flatten_sequence_io=flatten,
        seq_lens=parse_sizes(seq_len, "--seq-len"),
        target=target,
        runtime_check=runtime_check,
    )
