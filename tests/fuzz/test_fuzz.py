"""Differential fuzzing in CI: a bounded number of generated programs, each lowered and compared
with its original under onnxruntime (see harness.py). Run it longer with
`python tools/fuzz.py --count 5000 --seed 0`.

A seed that fails here replays with `python tools/fuzz.py --seed N --count 1 --show`. A seed that
hits a known, not yet fixed bug is listed in KNOWN with the regression test that pins the bug.
"""

from __future__ import annotations

import collections

import pytest
from generator import generate
from harness import check_program
from list_shapes import LIST_SEEDS

# seed 4165 hit a bug, fixed since (regressions/test_sequence_map_batched_over_zero_size_elements),
# and 1190 (regressions/test_a_running_sum_over_a_list_a_loop_of_no_iteration_built); 1308 met
# onnxruntime's unchecked Concat of an empty element (regressions/test_an_empty_element_stacked_
# beside_a_misfit_is_rejected_by_the_specification); 6712 (regressions/test_a_map_body_declaring_
# the_size_of_one_run_reads_the_elements_it_is_given); 41098 (an element of a scalar split of 1
# with keepdims=0 used with the axis squeezed was refused as invalid by the input check:
# regressions/test_an_unbound_element_read_with_its_axis_squeezed_is_a_valid_input); 41887 (a
# single Concat removed after the broadcast Unsqueezes were dropped: lowering twice changed the
# bytes; regressions/test_a_stacked_list_of_one_added_with_broadcasting_is_lowered_once_for_all)
# and 41758 (as 1041724 below)
# from LIST_SEEDS on: the list programs of the last tier (list_shapes.py); 1003655 (a split of
# an element read from a list, both in their tensor form: the read lost its shape) and 1004087
# (the empty constant a Loop started from was left behind: lowering twice changed the bytes)
# and 1004112 (a SequenceMap over a loop-built list: its body typed by the wrong element shape),
# 1004335 (shapes folded after lowering let inference prove a carried shape on a second
# lowering only), 1006557 (an empty initializer a Loop started from, made a ConstantOfShape
# for OpenVINO, was left behind unused: lowering twice changed the bytes), 1000425 (a piece
# of an index vector built without a declared type: the same) and 1000389 (an element of
# unknown rank, read from a list whose data a Loop carried out, put into a list of rank 3) and
# 1000649 (a bool list of unknown rank scanned: its SplitToSequence stayed), and 1000032,
# 1000168 and 1000700 (index vectors built only in cleanup made a Loop batchable on a second
# lowering only) and 1000413 (a window appended under a condition became a scan output on the
# strength of the stack after the loop, which proves nothing of the windows not appended) hit
# bugs fixed since; 1001504 stacks the empty scan output of a Loop of no iteration, whose dims
# after the 0 onnxruntime gives as 0 and the lowering knows (harness.edge_feeds_problem);
# 1020533 (an index vector of no element built as a Concat of no input: test_index_vectors);
# 1041724 (a row read from a vector of one element, `Gather(x, [0])`, made after the index
# vectors, was seen to be x only by a second lowering: regressions/test_a_row_read_from_a_
# vector_of_one_element_is_the_vector_once_for_all); 1042065 (an initializer that was a list's
# tensor form lost its first dim, so a second lowering folded its Shape: regressions/test_a_
# list_whose_data_is_a_tensor_of_the_model_leaves_its_declared_shape_alone); 1100593 (four
# copies of a Loop's scan output stacked on axis 1 by a Reshape to [0, 4, -1], which cannot
# tell -1 where the Loop runs no iteration: tests/rules/test_concat.py); 1050531, 1060188,
# 1060399 and 1160241 (--target tract: a Loop reading a list at i as a Scan that ran the body
# once for an empty list; tests/targets/test_target_tract.py, the If on the trip count) and
# 1170600 (the same with a scan output read: the If in the Scan's body)
LIST_CI_SEEDS = [
    *range(LIST_SEEDS, LIST_SEEDS + 150),
    *(1003655, 1004087, 1004112, 1004335, 1006557),
    *(1000425, 1000389, 1000649, 1000032, 1000168, 1000700, 1000413, 1001504, 1020533, 1041724),
    *(1042065, 1051496, 1061591, 1061969, 1100593, 1140587),
    *(1050531, 1060188, 1060399, 1160241, 1170600),
]
CI_SEEDS = [*range(1000), 1190, 1308, 4165, 6712, 41098, 41758, 41887, 51466, 61907, *LIST_CI_SEEDS]

# seed -> the bug it hits, named by its strict xfail in regressions/test_regressions.py or
# regressions/test_list_programs.py
KNOWN: dict[int, str] = {}
# seeds of a known bug whose lowered model onnxruntime 1.20 aborts on (the process, not the run):
# not run here; the regression test runs it in a child process
CRASHES: dict[int, str] = {}


def _params() -> list:
    params = []
    for seed in CI_SEEDS:
        if seed in CRASHES:
            params.append(pytest.param(seed, marks=pytest.mark.skip(reason=CRASHES[seed])))
        elif seed in KNOWN:
            mark = pytest.mark.xfail(strict=False, reason=KNOWN[seed])
            params.append(pytest.param(seed, marks=mark))
        else:
            params.append(seed)
    return params


@pytest.mark.parametrize("seed", _params())
def test_lowered_program_computes_the_same(seed: int) -> None:
    program = generate(seed)
    outcome = check_program(program)
    if outcome.status == "skip":
        pytest.skip(f"seed {seed}: {outcome.reason}: {outcome.detail}")
    assert outcome.status == "pass", (
        f"seed {seed}: {outcome.reason}: {outcome.detail}\n"
        f"replay: python tools/fuzz.py --seed {seed} --count 1 --show"
    )


def test_generator_is_deterministic() -> None:
    for seed in (0, 7, 123, 4242, LIST_SEEDS + 7):
        first, second = generate(seed), generate(seed)
        assert first.model.SerializeToString(deterministic=True) == (
            second.model.SerializeToString(deterministic=True)
        )
        assert first.feeds.keys() == second.feeds.keys()


def test_ci_seeds_cover_the_generator_features() -> None:
    """The CI seeds exercise every kind of construct the generator knows (keeps the bounded run
    meaningful when the generator changes)."""
    seen: collections.Counter[str] = collections.Counter()
    for seed in CI_SEEDS:
        seen.update(generate(seed).features)
    expected = {
        "negative-position",
        "insert-at-end",
        "computed-position",
        "runtime-position",
        "overridable-initializer",
        "symbolic-dims",
        "sequence-empty",
        "sequence-input",
        "sequence-output",
        "split-none-keepdims0",
        "split-none-keepdims1",
        "split-scalar",
        "split-scalar-nondividing",
        "split-scalar1-keepdims0",
        "split-list",
        "split-zero-size-chunk",
        "split-sizes-input",
        "negative-axis",
        "concat-new-axis",
        "sequence-map",
        "map-extra-tensor",
        "map-outer-scope",
        "map-zipped-sequence",
        "map-two-outputs",
        "map-body-matmul",
        "map-body-reduce",
        "map-body-transpose",
        "map-body-cast",
        "map-body-sequence-ops",
        "map-nested",
        "if-sequence",
        "if-reads-sequence",
        "if-constant-condition",
        "if-runtime-condition",
        "if-branch-sequence-map",
        "loop-append",
        "loop-scan-output",
        "loop-sequence-at-i",
        "loop-body-if",
        "loop-length-of-carried",
        "loop-reads-sequence",
        "loop-trip-sequence-length",
        "loop-dynamic-while",
        "loop-dynamic-prepend",
        "loop-dynamic-conditional",
        "loop-dynamic-both-branches",
        "loop-dynamic-growing",
        # list programs
        "list-loop-append",
        "list-loop-prepend",
        "list-loop-position",
        "list-loop-conditional",
        "list-loop-erase",
        "list-loop-fed-condition",
        "list-loop-while-length",
        "list-between-loops",
        "list-trip-from-length",
        "list-read-i",
        "list-read-backwards",
        "list-read-negative",
        "list-read-runtime-index",
        "list-later-loop-append",
        "list-later-loop-sum",
        "list-later-loop-scan",
        "list-carried-read",
        "list-if-different",
        "list-if-construct",
        "list-if-empty",
        "list-if-split",
        "list-if-loop",
        "list-scalars",
        "list-rank-3",
        "list-rank-4",
        "list-dtype-bool",
        "list-dtype-int8",
        "list-dtype-float16",
        "list-dtype-string",
        "list-position-int32",
        "list-negative-position",
        "list-zero-size-elements",
        "list-split-none-keepdims0",
        "list-split-none-keepdims1",
        "list-split-scalar",
        "list-split-list",
        "list-concat-axis1",
        "list-concat-new-axis",
    }
    missing = expected - set(seen)
    assert not missing, f"never generated in CI_SEEDS: {sorted(missing)}"
