"""The README stays true: its rule catalogue is the rules' own docstrings, and its quick start
names files that exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import update_readme  # noqa: E402


def test_rule_catalogue_is_generated_from_the_rules() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert update_readme.regenerated(text) == text, "run: python tools/update_readme.py"


def test_quick_start_has_two_commands_and_the_example_exists() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(python3 -m venv .+)$", quick_start, flags=re.M)
    assert len(commands) == 2
    assert "seqlower optimize examples/split_map_concat.onnx" in commands[0]
    assert "pytest" in commands[1]
    assert (ROOT / "examples" / "split_map_concat.onnx").is_file()
