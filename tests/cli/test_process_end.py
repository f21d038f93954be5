"""The console script freezes what is left when its command ends (`seqlower._entry`): the
interpreter's last collection would otherwise walk and free the models the command loaded and
lowered, a second of CPU time on large ones, for memory the process gives back anyway. The
command's output and exit status are what they were."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_models import EXAMPLE, ROOT

import seqlower
from seqlower.io import model_to_bytes

# runs the console script's `main` as `seqlower ARGS` does, then reports how it ended: the exit
# status and how many objects were frozen before and after (0 before: `optimize` itself freezes
# only inside its block, and lets go on leaving it)
_CHILD = """
import gc, json, sys
sys.argv = ["seqlower", *sys.argv[1:]]
from seqlower._entry import main
before = gc.get_freeze_count()
try:
    main()
    status = 0
except SystemExit as end:
    status = end.code
print(json.dumps({"status": status, "before": before, "after": gc.get_freeze_count()}))
"""


def _end(*args: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_what_is_left_is_frozen_when_the_command_ends_and_the_output_is_the_same(tmp_path):
    output = tmp_path / "lowered.onnx"
    end = _end("optimize", str(EXAMPLE), str(output), "-q")
    assert end["status"] == 0
    assert end["before"] == 0 and end["after"] > 0
    lowered, _ = seqlower.optimize(str(EXAMPLE))
    assert output.read_bytes() == model_to_bytes(lowered)


def test_a_failing_command_keeps_its_exit_status(tmp_path):
    end = _end("optimize", str(tmp_path / "missing.onnx"), str(tmp_path / "out.onnx"))
    assert end["status"] == 2
    assert end["after"] > 0
    assert not (tmp_path / "out.onnx").exists()
