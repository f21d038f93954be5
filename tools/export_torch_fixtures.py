#!/usr/bin/env python3
"""Export small real PyTorch models that use sequence ops, as test fixtures.

What it writes
--------------
The driver for the table of patterns in ``tools/torch_patterns.py``: for every
case in its ``CASES`` this script writes::

    tests/fixtures/torch/<case>/model.onnx
    tests/fixtures/torch/<case>/test_data_set_0/input_<i>.pb
    tests/fixtures/torch/<case>/test_data_set_0/output_<i>.pb
    tests/fixtures/torch/<case>/test_data_set_1/...      (dynamic cases only)

The layout is the one of the ONNX backend test data: each ``input_<i>.pb`` is
an ``onnx.TensorProto`` whose ``name`` is the graph input's name, each
``output_<i>.pb`` a ``TensorProto`` (or an ``onnx.SequenceProto`` for a
sequence-typed graph output) holding the value *computed by PyTorch itself*
on those inputs. ``test_data_set_1`` (only for cases whose lengths are
dynamic) uses other sizes for the dynamic axes, so a lowered model can be
checked on a length it was not exported with.

How the models are made
-----------------------
With the legacy TorchScript exporter, ``torch.onnx.export(..., dynamo=False)``,
opset 17, ``do_constant_folding=True`` (the default). Modules that use Python
lists, loops and ``len`` are passed through ``torch.jit.script`` first: the
exporter then writes the lists as real ONNX sequence values
(SplitToSequence, SequenceAt, SequenceInsert, SequenceConstruct,
SequenceLength, ConcatFromSequence, SequenceEmpty, SequenceErase) and the
loops as ``Loop`` nodes that carry sequences. A few cases are *traced*
instead (``script=False``); the tracer unrolls lists, so those exports contain
plain Split/Concat and serve as static baselines.

Each case records the histogram of sequence ops its export is expected to
contain (``seq_ops``, counted over the graph and all subgraphs); the script
prints the full op histogram and warns when the export differs.

Checks done after each export
-----------------------------
1. ``onnx.checker.check_model(model, full_check=True)``. A failure is
   reported and the fixture is kept (real exports are like that).
2. onnxruntime (CPU) runs the model on every saved input set and must match
   PyTorch's outputs (rtol 1e-4, atol 1e-5). A case onnxruntime cannot run
   is dropped and reported.

How to run
----------
It needs **torch==2.13.0** (CPU) in a separate virtualenv; torch is never a
dependency of seqlower or its CI. From the repository root::

    python3 -m venv /work/venv-torch
    . /work/venv-torch/bin/activate
    pip install torch==2.13.0 onnx onnxruntime numpy
    python tools/export_torch_fixtures.py            # all cases
    python tools/export_torch_fixtures.py unbind_stack_scripted   # some cases
    python tools/export_torch_fixtures.py --list     # names and descriptions

Options: ``--out DIR`` (default ``tests/fixtures/torch``), ``--table``
(print the Markdown table used in ``tests/fixtures/torch/README.md``).
The outputs are small and committed; rerun by hand only to change them.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from torch import Tensor
from torch_patterns import BROKEN, CASES, Case  # the table of patterns, beside this file

REQUIRED_TORCH = "2.13.0"
OPSET = 17
RTOL, ATOL = 1e-4, 1e-5
SEQ_OPS = {
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SequenceMap",
    "SplitToSequence",
    "ConcatFromSequence",
}
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "torch"

# ---------------------------------------------------------------------------
# Export machinery
# ---------------------------------------------------------------------------


def op_histogram(graph: onnx.GraphProto, hist: Counter | None = None) -> Counter:
    """Count op types in a graph and, recursively, in all its subgraphs."""
    hist = Counter() if hist is None else hist
    for node in graph.node:
        hist[node.op_type] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                op_histogram(attr.g, hist)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    op_histogram(g, hist)
    return hist


def seq_histogram(hist: Counter) -> dict[str, int]:
    return {k: v for k, v in sorted(hist.items()) if k in SEQ_OPS}


def make_inputs(case: Case, shapes: dict[str, tuple[int, ...]], index: int) -> list[Tensor]:
    gen = torch.Generator().manual_seed(1 + index)
    tensors = [torch.randn(*shape, generator=gen) for shape in shapes.values()]
    return case.prepare(index, tensors) if case.prepare else tensors


def _dims(t: onnx.TypeProto) -> list[Any] | None:
    """Declared dims of a tensor type (int, str symbol or None), None when the rank is unknown."""
    if not t.tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
        for d in t.tensor_type.shape.dim
    ]


def declared_shape_lies(model: onnx.ModelProto, outputs: list[Any]) -> list[str]:
    """Where the declared graph-output shapes disagree with what PyTorch/onnxruntime compute."""
    lies: list[str] = []
    symbols: dict[str, tuple[str, int]] = {}

    def check(name: str, t: onnx.TypeProto, value: Any) -> None:
        if t.HasField("sequence_type"):
            for k, v in enumerate(value):
                check(f"{name}[{k}]", t.sequence_type.elem_type, v)
            return
        dims = _dims(t)
        shape = list(np.asarray(value).shape)
        if dims is None:
            return
        if len(dims) != len(shape):
            lies.append(
                f"output {name}: declared rank {len(dims)} {dims}, actual rank {len(shape)} {shape}"
            )
            return
        for axis, (d, n) in enumerate(zip(dims, shape, strict=True)):
            if isinstance(d, int) and d != n:
                lies.append(f"output {name}: declared dim {axis} = {d}, actual {n}")
            elif isinstance(d, str):
                if d in symbols and symbols[d][1] != n:
                    lies.append(
                        f"output {name}: dim {axis} is symbol {d!r} = {n}, but {symbols[d][0]}"
                        f" gives {d!r} = {symbols[d][1]}"
                    )
                symbols.setdefault(d, (f"{name} dim {axis}", n))

    for out, value in zip(model.graph.output, outputs, strict=True):
        check(out.name, out.type, value)
    return lies


def loop_signature_mismatches(graph: onnx.GraphProto) -> list[str]:
    """Loop bodies whose declared carried input and output types disagree in rank."""
    found: list[str] = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.type != onnx.AttributeProto.GRAPH:
                continue
            body = attr.g
            if node.op_type == "Loop":
                n_carried = len(node.input) - 2
                for k in range(n_carried):
                    t_in, t_out = body.input[2 + k].type, body.output[1 + k].type
                    if t_in.HasField("sequence_type") and t_out.HasField("sequence_type"):
                        t_in, t_out = t_in.sequence_type.elem_type, t_out.sequence_type.elem_type
                        what = "sequence element"
                    else:
                        what = "tensor"
                    d_in, d_out = _dims(t_in), _dims(t_out)
                    if d_in is not None and d_out is not None and len(d_in) != len(d_out):
                        found.append(
                            f"Loop {node.name!r} carried {k} ({what}): body input"
                            f" {body.input[2 + k].name!r} rank {len(d_in)}, body output"
                            f" {body.output[1 + k].name!r} rank {len(d_out)}"
                        )
            found.extend(loop_signature_mismatches(body))
    return found


def to_numpy_outputs(result: Any) -> list[Any]:
    """Flatten PyTorch results into numpy arrays (lists stay lists: sequence outputs)."""
    if isinstance(result, Tensor):
        return [result.detach().numpy()]
    if isinstance(result, tuple):
        out: list[Any] = []
        for r in result:
            out.extend(to_numpy_outputs(r))
        return out
    if isinstance(result, list):
        return [[t.detach().numpy() for t in result]]
    raise TypeError(f"unsupported output type {type(result)!r}")


def save_value(value: Any, name: str, path: Path) -> None:
    if isinstance(value, list):
        proto = numpy_helper.from_list(value, name=name)
    else:
        proto = numpy_helper.from_array(np.asarray(value), name=name)
    path.write_bytes(proto.SerializeToString())


def compare(expected: Any, got: Any, what: str) -> None:
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            raise AssertionError(
                f"{what}: expected a sequence of {len(expected)}, got {type(got)}"
                f" of {len(got) if isinstance(got, list) else '?'}"
            )
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            compare(e, g, f"{what}[{i}]")
        return
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape} != PyTorch's {expected.shape}")
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def export_case(case: Case, out_root: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    module = case.make().eval()
    model_for_export = torch.jit.script(module) if case.script else module
    inputs0 = make_inputs(case, case.inputs, 0)

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model_for_export,
            tuple(inputs0),
            buf,
            dynamo=False,
            opset_version=OPSET,
            input_names=list(case.inputs),
            output_names=case.outputs,
            dynamic_axes=case.dynamic_axes or None,
        )
    model = onnx.load_from_string(buf.getvalue())
    report: dict[str, Any] = {"name": case.name}

    hist = op_histogram(model.graph)
    report["ops"] = dict(sorted(hist.items()))
    report["seq_ops"] = seq_histogram(hist)
    if report["seq_ops"] != case.seq_ops:
        report["seq_ops_mismatch"] = f"recorded {case.seq_ops}, export has {report['seq_ops']}"

    try:
        onnx.checker.check_model(model, full_check=True)
        report["full_check"] = "ok"
    except Exception as exc:  # keep the fixture: real exports are like that
        report["full_check"] = f"FAILED: {str(exc).splitlines()[0][:300]}"

    data_sets = [inputs0]
    if case.alt_inputs:
        data_sets.append(make_inputs(case, case.alt_inputs, 1))

    # PyTorch reference (run the eager module: that is "what PyTorch computes").
    so = ort.SessionOptions()
    so.log_severity_level = (
        3  # the "Expected shape from model ..." warnings are reported below instead
    )
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    graph_inputs = [i.name for i in model.graph.input]
    graph_outputs = [o.name for o in model.graph.output]
    results = []
    for k, ins in enumerate(data_sets):
        with torch.no_grad():
            expected = to_numpy_outputs(module(*ins))
        if len(expected) != len(graph_outputs):
            raise AssertionError(
                f"{len(expected)} PyTorch outputs vs {len(graph_outputs)} graph outputs"
            )
        feed = {n: t.numpy() for n, t in zip(graph_inputs, ins, strict=True)}
        got = sess.run(None, feed)
        for name, e, g in zip(graph_outputs, expected, got, strict=True):
            compare(e, g, f"{case.name} set {k} output {name}")
        results.append((ins, expected))
    report["shape_lies"] = declared_shape_lies(model, results[0][1])
    report["loop_signatures"] = loop_signature_mismatches(model.graph)

    case_dir = out_root / case.name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    onnx.save(model, case_dir / "model.onnx")
    for k, (ins, expected) in enumerate(results):
        ds = case_dir / f"test_data_set_{k}"
        ds.mkdir()
        for i, (name, t) in enumerate(zip(graph_inputs, ins, strict=True)):
            save_value(t.numpy(), name, ds / f"input_{i}.pb")
        for i, (name, e) in enumerate(zip(graph_outputs, expected, strict=True)):
            save_value(e, name, ds / f"output_{i}.pb")
    report["io"] = describe_io(model, results[0])
    report["bytes"] = sum(p.stat().st_size for p in case_dir.rglob("*") if p.is_file())
    return report


def export_cases(cases: list[Case], out_root: Path, names: list[str]) -> int:
    """Export `cases` (those named, or all) under `out_root`, a line per case; the `main` of the
    other export scripts."""
    for case in cases:
        if names and case.name not in names:
            continue
        report = export_case(case, out_root)
        mismatch = report.get("seq_ops_mismatch", "")
        print(case.name, report["seq_ops"], mismatch, report["full_check"], report["bytes"])
    return 0


def _type_str(t: onnx.TypeProto) -> str:
    if t.HasField("tensor_type"):
        tt = t.tensor_type
        dims = []
        for d in tt.shape.dim:
            dims.append(
                d.dim_param
                if d.HasField("dim_param")
                else str(d.dim_value)
                if d.HasField("dim_value")
                else "?"
            )
        shape = "[" + ", ".join(dims) + "]" if tt.HasField("shape") else "(no shape)"
        return f"{onnx.TensorProto.DataType.Name(tt.elem_type).lower()}{shape}"
    if t.HasField("sequence_type"):
        return f"seq({_type_str(t.sequence_type.elem_type)})"
    return "?"


def describe_io(model: onnx.ModelProto, result: tuple[list[Tensor], list[Any]]) -> dict[str, Any]:
    ins, outs = result

    def actual(v: Any) -> str:
        if isinstance(v, list):
            return "seq(" + ", ".join(str(list(a.shape)) for a in v) + ")"
        return str(list(np.asarray(v).shape))

    return {
        "inputs": [
            (i.name, _type_str(i.type), str(list(t.shape)))
            for i, t in zip(model.graph.input, ins, strict=True)
        ],
        "outputs": [
            (o.name, _type_str(o.type), actual(v))
            for o, v in zip(model.graph.output, outs, strict=True)
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--table", action="store_true", help="print the README's Markdown table")
    parser.add_argument(
        "--broken",
        action="store_true",
        help="try the known-broken modules (into a temporary folder) and report",
    )
    args = parser.parse_args(argv)

    if args.list:
        for c in CASES:
            print(f"{c.name:28s} {c.summary}")
        return 0
    if torch.__version__.split("+")[0] != REQUIRED_TORCH:
        print(f"error: needs torch=={REQUIRED_TORCH}, found {torch.__version__}", file=sys.stderr)
        return 2
    if args.broken:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for case in BROKEN:
                try:
                    export_case(case, Path(tmp))
                    print(f"{case.name}: exports now (was: {case.summary})")
                except Exception as exc:
                    why = str(exc).splitlines()[0][:300]
                    print(f"{case.name}: still fails: {type(exc).__name__}: {why}")
        return 0
    known = {c.name: c for c in CASES}
    unknown = [n for n in args.cases if n not in known]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    selected = [known[n] for n in args.cases] if args.cases else CASES

    args.out.mkdir(parents=True, exist_ok=True)
    reports, dropped = [], []
    for case in selected:
        try:
            rep = export_case(case, args.out)
        except Exception as exc:
            dropped.append(
                (
                    case.name,
                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:400] if str(exc) else ''}",
                )
            )
            case_dir = args.out / case.name
            if case_dir.exists():
                shutil.rmtree(case_dir)
            print(f"DROPPED {case.name}: {dropped[-1][1]}")
            continue
        reports.append(rep)
        print(
            f"== {case.name} ({'scripted' if case.script else 'traced'}, lengths {case.lengths}),"
            f" {rep['bytes']} bytes"
        )
        print(f"   ops: {rep['ops']}")
        print(f"   sequence ops: {rep['seq_ops'] or 'none'}")
        if "seq_ops_mismatch" in rep:
            print(
                f"   WARNING sequence ops differ from the recorded ones: {rep['seq_ops_mismatch']}"
            )
        print(f"   full_check: {rep['full_check']}")
        for lie in rep["shape_lies"]:
            print(f"   declared shape lies: {lie}")
        for msg in rep["loop_signatures"]:
            print(f"   Loop body signature: {msg}")
        for name, declared, actual in rep["io"]["inputs"]:
            print(f"   in  {name}: declared {declared}, saved {actual}")
        for name, declared, actual in rep["io"]["outputs"]:
            print(f"   out {name}: declared {declared}, PyTorch {actual}")
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(
        f"\n{len(reports)} fixtures written to {args.out}, {total} bytes in the folder;"
        f" {len(dropped)} dropped"
    )
    for name, why in dropped:
        print(f"   dropped {name}: {why}")
    if args.table:
        print()
        print("| case | what the PyTorch code does | sequence ops in the ONNX | lengths |")
        print("|---|---|---|---|")
        by_name = {c.name: c for c in CASES}
        for rep in reports:
            c = by_name[rep["name"]]
            ops = ", ".join(f"{k} x{v}" for k, v in rep["seq_ops"].items()) or "none"
            how = "scripted" if c.script else "traced"
            print(f"| `{c.name}` | {c.summary} ({how}) | {ops} | {c.lengths} |")
    mismatched = [r["name"] for r in reports if "seq_ops_mismatch" in r]
    return 1 if (dropped or mismatched) else 0


if __name__ == "__main__":
    sys.exit(main())
