"""`python -m bench.wild --set NAME` picks the fixture set it measures (torch_wild without it);
the case names after it are the cases measured; a set or a case that is not there stops with
its name, and `--help` prints the usage instead of being read as a case. `--runs`,
`--min-seconds` and `--rounds` say how long each data set is timed; the original and both
targets' lowerings are timed together, in one interleaved run per round."""

from __future__ import annotations

import pytest

import bench.wild
from bench.wild import FIXTURES, ROOT, TARGETS, Timing, _parse, measure_case
from seqlower.errors import SeqlowerError


def test_without_set_it_measures_torch_wild():
    assert _parse([]) == (ROOT, [], Timing())
    assert ROOT == FIXTURES / "torch_wild"
    assert _parse(["pyg_unbatch"]) == (ROOT, ["pyg_unbatch"], Timing())


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "torch_novel", "graph_unet"],
        ["graph_unet", "--set", "torch_novel"],
        ["--set=torch_novel", "graph_unet"],
    ],
)
def test_set_names_the_folder_and_leaves_the_cases(argv):
    root, cases, _ = _parse(argv)
    assert root == FIXTURES / "torch_novel"
    assert (root / "graph_unet" / "model.onnx").is_file()
    assert cases == ["graph_unet"]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["--set", "no_such_set"], "no_such_set"),
        (["--set", "torch_novel", "no_case"], "no_case"),
        (["--rounds", "0"], "--rounds"),
        (["--runs", "0"], "--runs"),
    ],
)
def test_what_is_not_there_stops_with_its_name(argv, name, capsys):
    with pytest.raises(SystemExit) as stopped:
        _parse(argv)
    assert stopped.value.code == 2
    assert name in capsys.readouterr().err


def test_help_prints_the_usage(capsys):
    with pytest.raises(SystemExit) as stopped:
        _parse(["--help"])
    assert stopped.value.code == 0
    assert "--set" in capsys.readouterr().out


def test_timing_options():
    _, cases, timing = _parse(["--runs", "1000", "--min-seconds", "2", "--rounds", "3"])
    assert cases == []
    assert timing == Timing(runs=1000, min_seconds=2.0, rounds=3)


def test_original_and_both_targets_are_timed_in_one_run(monkeypatch):
    """Every call of `latency` times the original with every lowering that computes what it
    does on that data set, once per round; the onnxruntime row says its speed against the
    default target's from those same calls."""
    calls = []
    real = bench.wild.latency

    def recorded(models, feeds, *, runs, min_seconds):
        calls.append((sorted(models), runs, min_seconds))
        return real(models, feeds, runs=1, min_seconds=0.0)

    monkeypatch.setattr(bench.wild, "latency", recorded)
    root = FIXTURES / "torch_wild"
    rows = measure_case("token_lengths", root, Timing(runs=7, min_seconds=0.01, rounds=2))
    assert [row["target"] for row in rows] == list(TARGETS)
    timed = [i for i, ok in enumerate(rows[0]["vs_orig"]) if ok == "ok"]
    assert timed == [0, 1]  # data set 2 (an empty batch) fails in the original
    assert calls == [(sorted(["original", *TARGETS]), 7, 0.01)] * 2 * len(timed)
    for row in rows:
        assert row["speed"] > 0
        assert row["worst_set"].endswith(")")
    assert "vs_default" not in rows[0]
    assert sorted(rows[1]["vs_default"]) == timed


def test_a_target_that_refuses_is_a_row_and_the_other_is_timed(monkeypatch):
    """A lowering that fails is its row's error; the original and the other target are still
    timed together, and no ratio against the default target is made without both."""
    real = bench.wild.seqlower.optimize

    def refusing(model, *, target):
        if target == TARGETS[0]:
            raise SeqlowerError("refused here")
        return real(model, target=target)

    monkeypatch.setattr(bench.wild.seqlower, "optimize", refusing)
    rows = measure_case("token_lengths", FIXTURES / "torch_wild", Timing(1, 0.0, 1))
    assert rows[0]["error"] == "refused here"
    assert rows[1]["speed"] > 0
    assert "vs_default" not in rows[1]
