"""`python -m bench.wild --set NAME` picks the fixture set it measures (torch_wild without it);
the case names after it are the cases measured; a set or a case that is not there stops with
its name, and `--help` prints the usage instead of being read as a case."""

from __future__ import annotations

import pytest

from bench.wild import FIXTURES, ROOT, _parse


def test_without_set_it_measures_torch_wild():
    assert _parse([]) == (ROOT, [])
    assert ROOT == FIXTURES / "torch_wild"
    assert _parse(["pyg_unbatch"]) == (ROOT, ["pyg_unbatch"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "torch_novel", "graph_unet"],
        ["graph_unet", "--set", "torch_novel"],
        ["--set=torch_novel", "graph_unet"],
    ],
)
def test_set_names_the_folder_and_leaves_the_cases(argv):
    root, cases = _parse(argv)
    assert root == FIXTURES / "torch_novel"
    assert (root / "graph_unet" / "model.onnx").is_file()
    assert cases == ["graph_unet"]


@pytest.mark.parametrize(
    ("argv", "name"),
    [(["--set", "no_such_set"], "no_such_set"), (["--set", "torch_novel", "no_case"], "no_case")],
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
