"""Mutation fuzzing of seqlower: committed fixtures, damaged at random, through the command line.

    python tools/mutation_fuzz.py --seed 3 --count 600 --out mutation-findings

Where tools/fuzz.py builds valid programs from scratch, this takes the models users exported
(every fixture under 200 kB) and changes one or two things at random, as a damaged file or a
hand edit would: an integer attribute or an int64 constant set to a small value, an input rewired
to a value defined earlier in its graph, an attribute added, a declared input dim changed, a
Cast's target type changed. Each mutant goes through `seqlower optimize --verify` (the default
target or `--target onnxruntime`), in process. A finding is an exit 3 (an internal error: a bug,
or an input error said as one) or a verification that found a difference (a wrong lowering, or a
false alarm of the verifier); bad input refused in one line (exit 2) is what most mutants get.
Each finding's model stays in OUT (m<seed>_<k>.onnx) and is printed as a JSON line; the others
are deleted. Exit code 1 when there was a finding.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from seqlower.cli.app import app  # noqa: E402

_SMALL = (-3, -2, -1, 0, 1, 2, 3)
_CAST_TYPES = (1, 6, 7, 9, 10, 11)  # float, int32, int64, bool, float16, double


def fixtures() -> list[Path]:
    return sorted(
        p for p in (ROOT / "tests" / "fixtures").rglob("*.onnx") if p.stat().st_size < 200_000
    )


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from graphs(attr.g)


def mutate(model: onnx.ModelProto, rng: random.Random) -> str | None:
    """Change `model` in place one way; what was changed, or None when nothing was."""
    graph = rng.choice(list(graphs(model.graph)))
    if not graph.node:
        return None
    node = rng.choice(graph.node)
    kind = rng.choice(["attribute", "rewire", "add attribute", "input dim", "cast"])
    if kind == "attribute" and node.attribute:
        return _mutate_attribute(node, rng.choice(node.attribute), rng)
    if kind == "rewire" and node.input:
        position = list(graph.node).index(node)
        earlier = [name for n in graph.node[:position] for name in n.output]
        earlier += [value.name for value in graph.input]
        if earlier:
            k = rng.randrange(len(node.input))
            node.input[k] = rng.choice(earlier)
            return f"{node.op_type} input {k} rewired"
    if kind == "add attribute":
        name = rng.choice(["axis", "keepdims", "new_axis"])
        if any(attr.name == name for attr in node.attribute):
            return None
        node.attribute.append(helper.make_attribute(name, rng.choice([-1, 0, 1])))
        return f"{node.op_type} given {name}"
    if kind == "input dim":
        dims = [
            d
            for v in model.graph.input
            for d in v.type.tensor_type.shape.dim
            if d.HasField("dim_value")
        ]
        if dims:
            rng.choice(dims).dim_value = rng.choice([0, 1, 2, 7])
            return "a declared input dim changed"
    if kind == "cast" and node.op_type == "Cast":
        for attr in node.attribute:
            if attr.name == "to":
                attr.i = rng.choice(_CAST_TYPES)
                return f"Cast to {attr.i}"
    return None


def _mutate_attribute(
    node: onnx.NodeProto, attr: onnx.AttributeProto, rng: random.Random
) -> str | None:
    if attr.type == onnx.AttributeProto.INT:
        attr.i = rng.choice([*_SMALL, attr.i + 1, attr.i - 1])
        return f"{node.op_type}.{attr.name} = {attr.i}"
    if attr.type == onnx.AttributeProto.INTS and attr.ints:
        attr.ints[rng.randrange(len(attr.ints))] = rng.choice(_SMALL)
        return f"{node.op_type}.{attr.name} entry changed"
    if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == onnx.TensorProto.INT64:
        array = numpy_helper.to_array(attr.t).copy()
        if array.size:
            array.reshape(-1)[rng.randrange(array.size)] = rng.choice([*_SMALL, 5])
            attr.t.CopyFrom(numpy_helper.from_array(np.asarray(array), attr.t.name))
            return f"{node.op_type} constant changed"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("mutation-findings"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    sources = fixtures()
    runner = CliRunner()
    found = 0
    for k in range(args.count):
        source = rng.choice(sources)
        model = onnx.load(source)
        changes = [mutate(model, rng) for _ in range(rng.randrange(1, 3))]
        if not any(changes):
            continue
        mutant, lowered = args.out / f"m{args.seed}_{k}.onnx", args.out / "lowered.onnx"
        onnx.save(model, mutant)
        target = rng.choice(["portable", "portable", "onnxruntime"])
        command = ["optimize", str(mutant), str(lowered), "--target", target, "--verify", "-q"]
        result = runner.invoke(app, command)
        lines = result.output.strip().splitlines()
        differs = result.exit_code == 1 and "differs" in result.output
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if result.exit_code == 3 or differs or crashed:
            found += 1
            said = lines[-1] if lines else repr(result.exception)
            print(
                json.dumps(
                    {
                        "model": str(mutant),
                        "from": str(source.relative_to(ROOT)),
                        "changes": [c for c in changes if c],
                        "target": target,
                        "exit": result.exit_code,
                        "said": said[:300],
                    }
                ),
                flush=True,
            )
        else:
            mutant.unlink()
        lowered.unlink(missing_ok=True)
    print(f"{args.count} mutants of seed {args.seed}: {found} findings", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
