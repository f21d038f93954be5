"""What the CLI shows and keeps while the pipeline runs: a progress line on a terminal, and the
model after each pass with `--dump-dir`."""

from __future__ import annotations

__all__ = ["PassObserver"]

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType

import onnx_ir as ir

from seqlower.errors import SeqlowerError
from seqlower.io import save_model


class PassObserver(AbstractContextManager["PassObserver"]):
    """Called after each pipeline pass; shows a rich status line only on a terminal. A dump
    that cannot be written is a `SeqlowerError` (one line, exit 2), not a crash."""

    def __init__(self, *, show_progress: bool, dump_dir: Path | None) -> None:
        self.dump_dir = dump_dir
        self.protect: list[Path] = []  # the files the input reads: a dump never replaces one
        self._count = 0
        self._status = None
        if show_progress and sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status("lowering: loading")

    def __enter__(self) -> PassObserver:
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._status is not None:
            self._status.stop()

    def stage(self, text: str) -> None:
        if self._status is not None:
            self._status.update(f"lowering: {text}")

    def __call__(self, name: str, model: ir.Model) -> None:
        self._count += 1
        self.stage(f"{name} done")
        if self.dump_dir is not None:
            path = self.dump_dir / f"{self._count:02d}-{name}.onnx"
            try:
                save_model(model, path, protect=self.protect)
            except OSError as error:  # strerror: the temporary file's name means nothing here
                raise SeqlowerError(f"{path}: cannot write ({error.strerror})") from None
