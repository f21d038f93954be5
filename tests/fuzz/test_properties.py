"""Properties of `seqlower.optimize` on generated programs (issue 6):

- never more sequence ops: the output holds at most as many sequence operators as the input;
- never slower: with `--target onnxruntime` the output's estimated cost (`seqlower.cost`) is
  at most the input's;
- idempotence: lowering the output again fires no rule and gives byte-identical bytes;
- determinism: two lowerings give byte-identical bytes, in one process and across processes
  with different PYTHONHASHSEED values (set and dict iteration order must not leak into names or
  node order).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest
from generator import generate
from harness import budget_of, sequence_op_total
from list_shapes import LIST_SEEDS

import seqlower
from seqlower.cost import SMALL_COUNT, launches
from seqlower.io import model_to_bytes
from seqlower.passes.declared_ranks import declare_ranks

# seeds 496 and 502 once added sequence ops (a SequenceMap over a sequence of unknown length)
# and list programs (list_shapes.py), whose lowering needs the tensor form of lists
PROPERTY_SEEDS = [*range(300), 496, 502, *range(LIST_SEEDS, LIST_SEEDS + 40)]
HASH_SEEDS = (0, 123)
SUBPROCESS_SEEDS = (1, 2, 16, 46, 86, 482, 889, 1194)

# seed -> the bug it hits, named by its strict xfail in regressions/test_regressions.py or
# regressions/test_list_programs.py
KNOWN: dict[int, str] = {}


def _params(known: dict[int, str]) -> list:
    return [
        pytest.param(seed, marks=pytest.mark.xfail(strict=False, reason=known[seed]))
        if seed in known
        else seed
        for seed in PROPERTY_SEEDS
    ]


def _lower(seed: int) -> tuple[object, ir.Model]:
    program = generate(seed)
    lowered, _ = seqlower.optimize(program.model)
    return program.model, lowered


@pytest.mark.parametrize("seed", _params(KNOWN))
def test_never_more_sequence_ops(seed: int) -> None:
    """Measured with `sequence_op_budget`: a SequenceMap counts as its ONNX expansion."""
    original, lowered = _lower(seed)
    before = budget_of(original)
    after = sequence_op_total(lowered)
    assert after <= before, f"seed {seed}: {before} sequence ops before, {after} after"


@pytest.mark.parametrize("seed", _params(KNOWN))
def test_never_costs_more(seed: int) -> None:
    program = generate(seed)
    lowered, _ = seqlower.optimize(program.model, target="onnxruntime")
    # in whole launches, as the pipeline compares (and prints) them, both typed alike: the
    # lowered model declares the ranks ONNX inference cannot give, so the original gets them too
    typed, after = (_typed(model) for model in (program.model, lowered))
    # weighed as the pipeline weighs forms: the product of the estimates with DYNAMIC_COUNT
    # and SMALL_COUNT iterations for a loop of run-time count (`speed_first.relative_cost`)
    weight = round(launches(after)) * round(launches(after, SMALL_COUNT))
    assert weight <= round(launches(typed)) * round(launches(typed, SMALL_COUNT)), f"seed {seed}"


def _typed(model: onnx.ModelProto) -> ir.Model:
    """`model` with the shapes ONNX inference gives and the ranks it cannot."""
    typed = ir.from_proto(onnx.shape_inference.infer_shapes(model))
    declare_ranks(typed)
    return typed


@pytest.mark.parametrize("seed", _params(KNOWN))
def test_idempotent(seed: int) -> None:
    _, lowered = _lower(seed)
    again, report = seqlower.optimize(lowered)
    assert report.rules_fired == {}, f"seed {seed}: lowering again fires {report.rules_fired}"
    assert model_to_bytes(again) == model_to_bytes(lowered), f"seed {seed}: bytes changed"


@pytest.mark.parametrize("seed", _params(KNOWN))
def test_deterministic_in_one_process(seed: int) -> None:
    _, first = _lower(seed)
    _, second = _lower(seed)
    assert model_to_bytes(first) == model_to_bytes(second), f"seed {seed}"


_DIGESTS = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from generator import generate
import seqlower
from seqlower.cost import launches
from seqlower.io import model_to_bytes
from seqlower.passes.declared_ranks import declare_ranks
for seed in map(int, sys.argv[2:]):
    lowered, _ = seqlower.optimize(generate(seed).model)
    print(seed, hashlib.sha256(model_to_bytes(lowered)).hexdigest())
"""


def test_deterministic_across_hash_seeds() -> None:
    here = str(Path(__file__).resolve().parent)
    outputs = []
    for hash_seed in HASH_SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
        result = subprocess.run(
            [sys.executable, "-c", _DIGESTS, here, *map(str, SUBPROCESS_SEEDS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(result.stdout)
    assert len(outputs[0].splitlines()) == len(SUBPROCESS_SEEDS)
    assert outputs[0] == outputs[1], "the lowered bytes depend on PYTHONHASHSEED"
