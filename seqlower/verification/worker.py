"""The child process that runs one model for the verifier, so that a runtime crash is a verdict.

Started by `seqlower.verification.runner.IsolatedRunner` as
`python worker.py READ_FD WRITE_FD [MEMORY_LIMIT_BYTES]` (the limit caps the process's address
space, `RLIMIT_AS`, before the runtime is imported; an allocation beyond it fails, and the error
says it was the limit):
by path, not with `-m`, so that it imports numpy, the runtime and `runtimes.py` but not the rest
of seqlower, and starts in a fraction of a second. Messages are pickled (multiprocessing's
connection framing), answered in order, one reply per request:

    ("open", runtime, model) -> ("ok", output_names) | ("cannot run", message) | ("error", message)
    ("run", feeds)           -> ("ok", outputs)      | ("error", message)

Each reply ends with the `time.monotonic()` at which it was sent (the clock is shared by the
processes of one machine), from which the parent times the next request. A "run" after a failed
"open" is answered with that failure again. Requests are read on their own thread as they
arrive: the parent may send several before it reads a reply, and a request and a reply each
larger than a pipe's buffer would otherwise wait on each other for ever (the parent blocked
writing a request while this process is blocked writing the reply before it). The end of the
input ends the process at once (no interpreter teardown, which would cost the verifier a tenth
of a second per model). Anything a runtime prints to stdout is sent to stderr, never into the
replies.
"""

from __future__ import annotations

__all__ = ["main"]

import importlib.util
import os
import queue
import resource
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any


def main(argv: list[str]) -> int:
    read_fd, write_fd = int(argv[1]), int(argv[2])
    limit = int(argv[3]) if len(argv) > 3 else 0
    if limit > 0:  # before the runtime is imported: a model cannot take the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.dup2(2, 1)
    runtimes = _runtimes_module()
    requests = _read_as_they_come(Connection(read_fd, writable=False))
    outbox = Connection(write_fd, readable=False)
    session: Any = None
    failure: tuple[str, str] = ("error", "no model was opened")
    while True:
        message = requests.get()
        if message is None:  # the parent closed its end
            session = None  # removes a session's temporary files
            os._exit(0)  # skip the interpreter's slow teardown: nothing is left to flush
        reply: tuple[str, Any]
        if message[0] == "open":
            try:
                session = runtimes.open_session(message[1], message[2])
                reply = ("ok", list(session.output_names))
            except runtimes.CannotRunError as error:
                session, failure = None, ("cannot run", str(error))
                reply = failure
            except Exception as error:  # the runtime rejects the model: report its words
                session, failure = None, ("error", _message(runtimes, error, limit))
                reply = failure
        elif session is None:
            reply = failure
        else:
            try:
                reply = ("ok", session.run(message[1]))
            except Exception as error:  # every failure of a run is a result to report
                reply = ("error", _message(runtimes, error, limit))
        outbox.send((*reply, time.monotonic()))


def _read_as_they_come(inbox: Connection) -> queue.SimpleQueue[Any]:
    """Every request `inbox` receives, queued in order by a thread that reads as they arrive;
    None once the input ends."""
    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                requests.put(inbox.recv())
            except (EOFError, OSError):
                requests.put(None)
                return

    threading.Thread(target=read, daemon=True).start()
    return requests


_OUT_OF_MEMORY = ("bad_alloc", "Failed to allocate", "out of memory", "Cannot allocate memory")


def _message(runtimes: ModuleType, error: BaseException, limit: int) -> str:
    """The error on one line; when it is a failed allocation under the memory limit, said so."""
    text = runtimes.error_message(error)
    if limit > 0 and (isinstance(error, MemoryError) or any(s in text for s in _OUT_OF_MEMORY)):
        return (
            f"out of memory: the model needs more than the memory limit of {limit >> 20} MB "
            f"(--memory-limit raises it) ({text})"
        )
    return text


def _runtimes_module() -> ModuleType:
    """`runtimes.py` beside this file, loaded without importing the seqlower package."""
    if __package__:
        from seqlower.verification import runtimes

        return runtimes
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.util.spec_from_file_location("_seqlower_runtimes", Path(here) / "runtimes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main(sys.argv))
