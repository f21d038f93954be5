"""Bind `seqlower.rules` to the repository's top-level `rules/` folder in a source checkout.

The rule families live in `rules/` at the top of the repository and ship inside the wheel as
`seqlower/rules/` (pyproject.toml maps the package there). A checkout's `seqlower/` has no `rules/`
inside, so when the package is imported straight from the source tree (an editable install, or the
repository root first on `sys.path`, shadowing an installed copy, as `python -m pytest` does) the
import system would not find `seqlower.rules`. `bind_source_rules` lets the import system find
that folder under the name `seqlower.rules` (when it is first imported): the same files a wheel
built from this checkout ships, loaded the way an import would. An installed copy has
`seqlower/rules/__init__.py` and is left alone.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["bind_source_rules"]


def bind_source_rules(package: ModuleType) -> None:
    """Let `<package>.rules` be imported from the checkout's `rules/` when the package has no
    `rules/` of its own."""
    name = f"{package.__name__}.rules"
    here = Path(package.__file__).parent
    checkout = here.parent
    rules_dir = checkout / "rules"
    if (
        name in sys.modules
        or (here / "rules" / "__init__.py").is_file()
        or not (rules_dir / "__init__.py").is_file()
        or not (checkout / "pyproject.toml").is_file()
        or any(isinstance(f, _RulesFinder) and f.name == name for f in sys.meta_path)
    ):
        return
    sys.meta_path.insert(0, _RulesFinder(name, rules_dir))


class _RulesFinder(importlib.abc.MetaPathFinder):
    """Finds `<package>.rules` in the checkout's `rules/` when it is first imported (not
    before: `seqlower --version` need not load the rules)."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(
            fullname, self.folder / "__init__.py", submodule_search_locations=[str(self.folder)]
        )
