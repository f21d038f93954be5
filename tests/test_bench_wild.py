"""`python -m bench.wild --set NAME` picks the fixture set it measures (torch_wild without it);
the case names after it are the cases measured, a set that is not there stops with its name."""

from __future__ import annotations

import pytest

from bench.wild import FIXTURES, ROOT, _split_set


def test_without_set_it_measures_torch_wild():
    assert _split_set([]) == (ROOT, [])
    assert ROOT == FIXTURES / "torch_wild"
    assert _split_set(["pyg_unbatch"]) == (ROOT, ["pyg_unbatch"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "torch_novel", "graph_unet"],
        ["graph_unet", "--set", "torch_novel"],
        ["--set=torch_novel", "graph_unet"],
    ],
)
def test_set_names_the_folder_and_leaves_the_cases(argv):
    root, cases = _split_set(argv)
    assert root == FIXTURES / "torch_novel"
    assert (root / "graph_unet" / "model.onnx").is_file()
    assert cases == ["graph_unet"]


def test_a_set_that_is_not_there_stops_with_its_name():
    with pytest.raises(SystemExit, match="no_such_set"):
        _split_set(["--set", "no_such_set"])
