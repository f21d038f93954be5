"""`optimize` imports what lowering needs only: the verification package (brought in by the
runtime check, which runs only when asked for) is left for `verify` and the command line."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "torch_accumulators" / "cat_columns" / "model.onnx"

_CODE = """
import json, sys
import seqlower
for target in ("generic", "openvino", "onnxruntime"):
    seqlower.optimize(sys.argv[1], target=target)
loaded = sorted(m for m in sys.modules if m.startswith("seqlower.verification"))
print(json.dumps([loaded, "seqlower.runtime_check" in sys.modules]))
"""


def test_optimize_leaves_the_verification_package_unimported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CODE, str(MODEL)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    loaded, runtime_check = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [] and runtime_check is False
