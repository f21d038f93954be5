"""Regenerate the generated parts of README.md from the code: the rule catalogue (from the rules'
docstrings) and the table of onnxruntime quirks (from seqlower.runtime_quirks).

    python tools/update_readme.py          # rewrite README.md in place
    python tools/update_readme.py --check  # exit 1 if README.md is out of date

tests/test_readme.py runs the check, so neither can drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqlower import runtime_quirks
from seqlower.cli.app import rule_catalogue

README = Path(__file__).resolve().parent.parent / "README.md"


def quirk_table() -> str:
    rows = [
        "| quirk | onnxruntime | seen on | seqlower |",
        "|---|---|---|---|",
        *(
            f"| `{q.key}` | {q.behaviour} | {q.seen_on} | {q.response} |"
            for q in runtime_quirks.QUIRKS
        ),
    ]
    return "\n".join(rows)


def _replace_between(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def regenerated(text: str) -> str:
    text = _replace_between(text, "rules", rule_catalogue())
    return _replace_between(text, "quirks", quirk_table())


def main() -> int:
    text = README.read_text(encoding="utf-8")
    fresh = regenerated(text)
    if "--check" in sys.argv:
        return 0 if fresh == text else 1
    README.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
