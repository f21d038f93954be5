"""`optimize` and the command line leave Python's garbage collector as they found it: its
thresholds, whether it is enabled, and what the caller froze; the objects made inside join the
oldest generation without a collection over them (see `pipeline.collector_relaxed`)."""

from __future__ import annotations

import gc

import onnx_ir as ir
from support import parse

import seqlower
from seqlower.pipeline import collector_relaxed

MODEL = parse("""g (float[2,6] x, int64 p) => (float y) {
    s = SplitToSequence<axis = 1, keepdims = 0>(x)
    y = SequenceAt(s, p)
}""")


def test_optimize_leaves_the_thresholds_and_the_switch_as_found():
    before = gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()
    gc.set_threshold(500, 7, 3)
    try:
        seqlower.optimize(MODEL)
        assert gc.get_threshold() == (500, 7, 3)
        assert gc.isenabled() == before[1]
        assert gc.get_freeze_count() == before[2]
    finally:
        gc.set_threshold(*before[0])


def test_objects_made_inside_join_the_oldest_generation():
    with collector_relaxed():
        made = [ir.Value(name="made inside")]
    assert any(obj is made for obj in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0


def test_what_the_caller_froze_stays_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with collector_relaxed():
            made = [ir.Value(name="made inside")]
        assert gc.get_freeze_count() == frozen  # nothing of the caller's was let go
        assert made
    finally:
        gc.unfreeze()


def test_settled_objects_are_out_of_sight_until_the_block_ends():
    with collector_relaxed() as collector:
        made = [ir.Value(name="made inside")]
        collector.settle()
        assert gc.get_freeze_count() > 0  # no collection inside scans them again
        assert not any(obj is made for obj in gc.get_objects(generation=0))
    assert gc.get_freeze_count() == 0
    assert any(obj is made for obj in gc.get_objects(generation=2))


def test_settling_leaves_what_the_caller_froze_alone():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_relaxed() as collector:
            made = [ir.Value(name="made inside")]
            collector.settle()
            assert gc.get_freeze_count() == frozen  # the caller's count is not changed
        assert gc.get_freeze_count() == frozen
        assert made
    finally:
        gc.unfreeze()


def test_optimize_settles_as_it_goes_and_lets_go_at_the_end():
    counts = []
    seqlower.optimize(MODEL, after_pass=lambda name, model: counts.append(gc.get_freeze_count()))
    assert counts and all(count > 0 for count in counts)
    assert gc.get_freeze_count() == 0
