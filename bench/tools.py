"""One tool run on one model file, timed in this (fresh) process; prints one JSON line.

python -m bench.tools {io,seqlower,onnxscript} MODEL OUT
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _io(model_path: str, out_path: str) -> dict[str, float]:
    import onnx_ir as ir

    start = time.perf_counter()
    model = ir.load(model_path)
    loaded = time.perf_counter()
    ir.save(model, out_path)
    return {"seconds": time.perf_counter() - start, "load": loaded - start}


def _seqlower(model_path: str, out_path: str) -> dict[str, object]:
    import onnx_ir as ir

    import seqlower

    start = time.perf_counter()
    model, report = seqlower.optimize(model_path)
    optimized = time.perf_counter()
    ir.save(model, out_path)
    return {
        "seconds": time.perf_counter() - start,
        "optimize": optimized - start,
        "sequence_ops_after": report.total_after,
        "rules_fired": report.rules_fired,
    }


def _onnxscript(model_path: str, out_path: str) -> dict[str, float]:
    import onnx_ir as ir
    from onnxscript import optimizer

    start = time.perf_counter()
    model = ir.load(model_path)
    optimizer.optimize(model)
    ir.save(model, out_path)
    return {"seconds": time.perf_counter() - start}


TOOLS = {"io": _io, "seqlower": _seqlower, "onnxscript": _onnxscript}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tools", description=__doc__)
    parser.add_argument("tool", choices=sorted(TOOLS))
    parser.add_argument("model")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    print(json.dumps(TOOLS[args.tool](args.model, args.out)))


if __name__ == "__main__":
    main(sys.argv[1:])
