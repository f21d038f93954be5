"""Regenerate the generated parts of README.md (the rule catalogue) from the code.

    python tools/update_readme.py          # rewrite README.md in place
    python tools/update_readme.py --check  # exit 1 if README.md is out of date

tests/test_readme.py runs the check, so the catalogue cannot drift from the rules' docstrings.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqlower.cli.app import rule_catalogue

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- rules:begin -->", "<!-- rules:end -->"


def regenerated(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{rule_catalogue()}\n{END}{tail}"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    fresh = regenerated(text)
    if "--check" in sys.argv:
        return 0 if fresh == text else 1
    README.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
