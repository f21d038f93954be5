"""Bind `seqlower.rules` to the repository's top-level `rules/` folder in a source checkout.

The rule families live in `rules/` at the top of the repository and ship inside the wheel as
`seqlower/rules/` (pyproject.toml maps the package there). A checkout's `seqlower/` has no `rules/`
inside, so when the package is imported straight from the source tree (an editable install, or the
repository root first on `sys.path`, shadowing an installed copy, as `python -m pytest` does) the
import system would not find `seqlower.rules`. `bind_source_rules` imports that folder under the
name `seqlower.rules`: the same files a wheel built from this checkout ships, loaded the way an
import would. An installed copy has `seqlower/rules/__init__.py` and is left alone.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["bind_source_rules"]


def bind_source_rules(package: ModuleType) -> None:
    """Import the checkout's `rules/` as `<package>.rules` when the package has no `rules/`."""
    name = f"{package.__name__}.rules"
    here = Path(package.__file__).parent
    checkout = here.parent
    rules_dir = checkout / "rules"
    if (
        name in sys.modules
        or (here / "rules" / "__init__.py").is_file()
        or not (rules_dir / "__init__.py").is_file()
        or not (checkout / "pyproject.toml").is_file()
    ):
        return
    spec = importlib.util.spec_from_file_location(
        name, rules_dir / "__init__.py", submodule_search_locations=[str(rules_dir)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    package.rules = module
