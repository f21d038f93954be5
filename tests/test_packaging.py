"""The rule families live in the top-level `rules/` folder and ship in the wheel as
`seqlower.rules`.

Built for real: one wheel from this checkout (pip, a few seconds), then imported from a clean
folder, and from a checkout that shadows it the way `python -m pytest` at the repository root does
after a regular `pip install .`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import seqlower
import seqlower.rules

ROOT = Path(__file__).resolve().parent.parent
PROBE = (
    "import json, seqlower, seqlower.rules\n"
    "from seqlower.rules import split\n"
    "print(json.dumps([seqlower.__file__, seqlower.rules.__file__, split.__file__,\n"
    "                  len(seqlower.rules.default_rules().rules)]))\n"
)


def _wheel_names(root: Path) -> set[str]:
    """The files a wheel built from `root` must hold, by their names inside the wheel."""
    names = {p.relative_to(root).as_posix() for p in (root / "seqlower").rglob("*.py")}
    names |= {"seqlower/" + p.relative_to(root).as_posix() for p in (root / "rules").rglob("*.py")}
    return names


def _setuptools_builds_wheels() -> bool:
    """True when this interpreter's setuptools builds wheels by itself (70.1+), so pip can skip
    the isolated build environment; older ones need the `wheel` package."""
    try:
        major, minor = (int(x) for x in importlib.metadata.version("setuptools").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds
    source = tmp_path_factory.mktemp("source")
    for part in ("seqlower", "rules"):
        shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)]
    if _setuptools_builds_wheels():
        command.insert(5, "--no-build-isolation")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("seqlower-*.whl")
    return built


def _probe(pythonpath: list[Path], cwd: Path) -> list:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_package_list_covers_every_package_in_the_tree() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = set(tool["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "seqlower").rglob("__init__.py")
    }
    found |= {
        "seqlower." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "rules").rglob("__init__.py")
    }
    assert listed == found
    assert tool["setuptools"]["package-dir"] == {"seqlower.rules": "rules"}
    assert not (ROOT / "seqlower" / "rules" / "__init__.py").exists()


def test_the_checkout_binds_its_own_rules_folder() -> None:
    assert Path(seqlower.rules.__file__) == ROOT / "rules" / "__init__.py"
    assert seqlower.rules.__name__ == "seqlower.rules"
    assert seqlower.rules.default_rules().rules


def test_the_wheel_ships_the_rules_as_seqlower_rules(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        top_level = archive.read("seqlower-0.1.0.dist-info/top_level.txt").decode().split()
        archive.extractall(tmp_path / "site")
    python_files = {n for n in names if n.endswith(".py")}
    assert python_files == _wheel_names(ROOT)
    assert "seqlower/py.typed" in names
    assert top_level == ["seqlower"]
    assert not any(n.startswith("rules/") for n in names)

    # installed copy, imported from a folder with nothing else in it
    site = tmp_path / "site"
    empty = tmp_path / "empty"
    empty.mkdir()
    package, rules, split, count = _probe([site], cwd=empty)
    assert Path(package) == site / "seqlower" / "__init__.py"
    assert Path(rules) == site / "seqlower" / "rules" / "__init__.py"
    assert Path(split) == site / "seqlower" / "rules" / "split.py"
    assert count == len(seqlower.rules.default_rules().rules)

    # a checkout first on sys.path shadows the installed copy: its own rules/ folder is bound,
    # even with a stale seqlower/rules/__pycache__ left by the layout before rules/ moved out
    checkout = tmp_path / "checkout"
    for part in ("seqlower", "rules"):
        (checkout / part).mkdir(parents=True)
        for source in (ROOT / part).rglob("*.py"):
            target = checkout / part / source.relative_to(ROOT / part)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    (checkout / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    (checkout / "seqlower" / "rules" / "__pycache__").mkdir(parents=True)
    package, rules, split, _ = _probe([checkout, site], cwd=checkout)
    assert Path(package) == checkout / "seqlower" / "__init__.py"
    assert Path(rules) == checkout / "rules" / "__init__.py"
    assert Path(split) == checkout / "rules" / "split.py"


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    modules = {
        re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0].replace("-", "_")
        for requirement in project["dependencies"]
    }
    sources = [*(ROOT / "seqlower").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    imported = set(re.findall(r"^\s*(?:import|from) (\w+)", text, flags=re.M))
    assert modules == {"onnx", "onnx_ir", "numpy", "onnxruntime", "typer"}
    assert modules <= imported
