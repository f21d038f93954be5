"""A time limit for one run of the lowering (`Options.time_limit`, `--time-limit`).

The rewrite driver asks `expired()` before each rewrite, never during one: every rewrite is
complete when the run stops, so the model it returns is as valid as after any other rewrite
(cleanup and the checks still run on it). The report's stop reason then says that the time
limit stopped it, and what was lowered so far is kept.
"""

from __future__ import annotations

__all__ = ["Deadline"]

import time


class Deadline:
    """`seconds` from now (None: no limit). `reached` says whether `expired` ever said so."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds
        self.reached = False

    def expired(self) -> bool:
        if self._end is None:
            return False
        if not self.reached and time.monotonic() >= self._end:
            self.reached = True
        return self.reached

    @property
    def stop_reason(self) -> str:
        """The report's stop reason once the limit is reached."""
        return f"time limit ({self.seconds:g} s) reached: the rewrites done so far are kept"
