"""Census of lists whose element rank the export lost: strip shape information from committed
exports (and generated programs) the way real exporters lose it, lower each with the default
target, and count the models that keep sequence operators (or a list in the `unranked` layout)
that the unstripped model did not, by the report's reason.

    PYTHONPATH=. python tools/rank_census.py [--fuzz 200] [--json OUT.json]

The variants of each model:

- `value_info`: every graph's (and subgraph's) value_info dropped;
- `seq_elems`: the shape of every sequence-typed value's elements dropped (element type kept),
  in inputs, outputs and value_info of every graph;
- `outputs`: the shape of every main-graph output dropped (type kept: a tensor output then
  declares no shape, a sequence output no element shape);
- `bodies`: the shapes of every subgraph's inputs and outputs dropped (Loop, Scan and If
  bodies, types kept);
- `all`: the four at once.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402

import seqlower  # noqa: E402
from seqlower.errors import SeqlowerError  # noqa: E402

FOLDERS = ("tests/fixtures",)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attribute.g)
            for inner in attribute.graphs:
                yield from _graphs(inner)


def _all_graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    yield from _graphs(model.graph)
    for function in model.functions:
        for node in function.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    yield from _graphs(attribute.g)


def _drop_element_shape(type_proto: onnx.TypeProto) -> None:
    """The shape of the tensors inside a sequence (or optional) type, dropped."""
    if type_proto.HasField("sequence_type"):
        elem = type_proto.sequence_type.elem_type
        if elem.HasField("tensor_type"):
            elem.tensor_type.ClearField("shape")
        else:
            _drop_element_shape(elem)
    elif type_proto.HasField("optional_type"):
        _drop_element_shape(type_proto.optional_type.elem_type)


def strip_value_info(model: onnx.ModelProto) -> None:
    for graph in _all_graphs(model):
        del graph.value_info[:]


def strip_sequence_elements(model: onnx.ModelProto) -> None:
    for graph in _all_graphs(model):
        for value in [*graph.input, *graph.output, *graph.value_info]:
            _drop_element_shape(value.type)


def strip_outputs(model: onnx.ModelProto) -> None:
    for value in model.graph.output:
        _drop_shape(value.type)


def _drop_shape(type_proto: onnx.TypeProto) -> None:
    if type_proto.HasField("tensor_type"):
        type_proto.tensor_type.ClearField("shape")
    else:
        _drop_element_shape(type_proto)


def strip_bodies(model: onnx.ModelProto) -> None:
    for graph in _all_graphs(model):
        if graph is model.graph:
            continue
        for value in [*graph.input, *graph.output]:
            _drop_shape(value.type)


VARIANTS: dict[str, tuple[Callable[[onnx.ModelProto], None], ...]] = {
    "value_info": (strip_value_info,),
    "seq_elems": (strip_sequence_elements,),
    "outputs": (strip_outputs,),
    "bodies": (strip_bodies,),
    "all": (strip_value_info, strip_sequence_elements, strip_outputs, strip_bodies),
}


def _outcome(model: onnx.ModelProto) -> dict[str, object]:
    """What the default lowering leaves: sequence ops kept (with their reasons), lists in the
    unranked layout, or the error that refused the model."""
    try:
        _, report = seqlower.optimize(model)
    except SeqlowerError as error:
        return {"error": str(error).split(":", 1)[-1].strip()[:300]}
    kept = sum(report.sequence_ops_after.values())
    reasons = sorted({op.reason for op in report.remaining if not op.kept_for_speed})
    unranked = sum(1 for node in report.nodes if node.tier == "unranked")
    return {"kept": kept, "reasons": reasons, "unranked": unranked}


def _worse(base: dict[str, object], stripped: dict[str, object]) -> bool:
    if "error" in stripped:
        return "error" not in base
    if "error" in base:
        return False
    return stripped["kept"] > base["kept"] or stripped["unranked"] > base["unranked"]  # type: ignore[operator]


def _models(fuzz: int) -> Iterator[tuple[str, onnx.ModelProto]]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.onnx")):
            yield str(path.relative_to(ROOT)), onnx.load(str(path))
    if fuzz:
        sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
        from generator import generate

        for seed in [*range(fuzz // 2), *range(1_000_000, 1_000_000 + fuzz - fuzz // 2)]:
            try:
                program = generate(seed)
            except Exception:  # a generator failure is the fuzz tool's business
                continue
            if program.options:
                continue  # a target other than the default
            yield f"fuzz/seed_{seed}", program.model


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python tools/rank_census.py", description=__doc__)
    parser.add_argument("--fuzz", type=int, default=0, help="generated programs to add")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument("--only", help="a substring of the model paths to keep")
    args = parser.parse_args(argv)
    rows = []
    worse_by_reason: collections.Counter[str] = collections.Counter()
    worse_by_variant: collections.Counter[str] = collections.Counter()
    for name, model in _models(args.fuzz):
        if args.only and args.only not in name:
            continue
        base = _outcome(model)
        for variant, strips in VARIANTS.items():
            stripped = onnx.ModelProto()
            stripped.CopyFrom(model)
            for strip in strips:
                strip(stripped)
            if stripped.SerializeToString() == model.SerializeToString():
                continue  # nothing to strip
            outcome = _outcome(stripped)
            worse = _worse(base, outcome)
            rows.append({"model": name, "variant": variant, "base": base, **outcome})
            if not worse:
                continue
            worse_by_variant[variant] += 1
            if "error" in outcome:
                why = ["refused: " + str(outcome["error"])[:160]]
            else:
                why = list(outcome["reasons"]) or ["(kept nothing new: unranked layout)"]  # type: ignore[call-overload]
            for reason in dict.fromkeys(why):
                worse_by_reason[reason] += 1
            print(f"{name} [{variant}]: {why[0][:200]}", flush=True)
    print(f"\n{len(rows)} stripped models; worse than unstripped, by variant:")
    for variant, count in sorted(worse_by_variant.items()):
        print(f"  {variant}: {count}")
    print("by reason:")
    for reason, count in worse_by_reason.most_common():
        print(f"  {count:4d}  {reason[:220]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
