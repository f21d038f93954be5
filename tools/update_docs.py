"""Regenerate the generated parts of the docs from the code: the rule catalogue in docs/rules.md
(from the rules' docstrings) and the table of onnxruntime quirks in docs/design.md (from
seqlower.runtime_quirks).

    python tools/update_docs.py          # rewrite those files in place
    python tools/update_docs.py --check  # exit 1 if either is out of date

tests/test_readme.py runs the check, so neither can drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's seqlower, not an installed one

from seqlower import runtime_quirks  # noqa: E402
from seqlower.cli.app import rule_catalogue  # noqa: E402

DOCS = ROOT / "docs"
RULES = DOCS / "rules.md"
QUIRKS = DOCS / "design.md"


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
    if begin not in text:
        return text
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def regenerated(text: str) -> str:
    """`text` with every generated block it holds (rules, quirks) made from the code."""
    text = _replace_between(text, "rules", rule_catalogue())
    return _replace_between(text, "quirks", quirk_table())


def main() -> int:
    stale = []
    for path in (RULES, QUIRKS):
        text = path.read_text(encoding="utf-8")
        fresh = regenerated(text)
        if fresh != text:
            stale.append(path)
            if "--check" not in sys.argv:
                path.write_text(fresh, encoding="utf-8")
    return 1 if stale and "--check" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
