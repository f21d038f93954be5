"""The README and docs/ stay true: the rule catalogue (docs/rules.md) is the rules' own
docstrings, the README's quick start names files that exist, its sample summary is what
`seqlower optimize` prints, its Python examples run (and the pass recipe gives a model
onnxruntime loads), it says how to install and under which license, and every link in the
README, CONTRIBUTING.md and docs/ leads to a file that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import update_docs  # noqa: E402

from seqlower.cli import app  # noqa: E402

README = (ROOT / "README.md").read_text(encoding="utf-8")
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")

# SplitToSequence -> SequenceMap(Cast -> MatMul) -> ConcatFromSequence: batched, it needs the
# runtime workaround to load in onnxruntime (issue 14)
CAST_MATMUL_MAP = """<ir_version: 10, opset_import: ["" : 18]>
g (float[4,2,3] x, double[3,5] w) => (double[2,4,5] y) {
    s = SplitToSequence <axis = 1, keepdims = 0> (x)
    m = SequenceMap <body = f (float[4,3] e) => (double[4,5] r) {
        c = Cast <to = 11> (e)
        r = MatMul (c, w)
    }> (s)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}"""


def _section(title: str, text: str = README) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_generated_docs_are_up_to_date() -> None:
    for path in (update_docs.RULES, update_docs.QUIRKS):
        text = path.read_text(encoding="utf-8")
        assert update_docs.regenerated(text) == text, "run: python tools/update_docs.py"
    assert "<!-- rules:begin -->" in update_docs.RULES.read_text(encoding="utf-8")
    assert "<!-- quirks:begin -->" in update_docs.QUIRKS.read_text(encoding="utf-8")


def test_quick_start_has_two_commands_and_the_example_exists() -> None:
    quick_start = _section("Quick start")
    commands = re.findall(r"^(python3 -m venv .+)$", quick_start, flags=re.M)
    assert len(commands) == 2
    assert "seqlower optimize examples/split_map_concat.onnx" in commands[0]
    assert "pytest" in commands[1]
    assert (ROOT / "examples" / "split_map_concat.onnx").is_file()


def test_quick_start_says_how_long_the_tests_take() -> None:
    before_tests = _section("Quick start").split("python -m pytest", 1)[0]
    said = re.search(r"The tests take about (\d+) minutes on a 2-core\s+machine", before_tests)
    assert said is not None, "say how long the test command takes, before it"
    # CI runs them twice within its 90 minutes: a suite that takes longer needs a look first
    assert int(said.group(1)) <= 20


def test_the_readme_is_a_short_guide() -> None:
    assert len(README.splitlines()) <= 300
    for title in ("Quick start", "From PyTorch", "Targets", "Command line", "Python"):
        assert _section(title).strip()
    for title in ("Verification", "Limits and troubleshooting"):
        assert "docs/" in _section(title) or "|" in _section(title)


def test_the_targets_table_has_a_row_per_target() -> None:
    from seqlower.options import TARGET_NAMES

    rows = re.findall(r"^\| `(\w+)`", _section("Targets"), flags=re.M)
    assert sorted(rows) == sorted(TARGET_NAMES)


def test_paths_the_readme_names_exist() -> None:
    for path in re.findall(r"`(tests/[\w/]+|examples/[\w./]+|docs/[\w.-]+)`", README):
        assert (ROOT / path).exists(), path


def test_the_pytorch_claims_hold_for_the_fixtures(tmp_path: Path) -> None:
    """The unbind loop becomes one Mul; attention_split_heads goes 41 -> 31 nodes with
    its 10 sequence operators gone, as docs/performance.md (where the README points for the
    numbers beside onnxslim) says (the onnxslim numbers were measured by hand: onnxslim is no
    dependency)."""
    import seqlower

    text = " ".join(_section("From PyTorch").split())
    fixtures = ROOT / "tests" / "fixtures" / "torch"
    model, report = seqlower.optimize(fixtures / "unbind_stack" / "model.onnx")
    assert report.total_after == 0 and [n.op_type for n in model.graph] == ["Constant", "Mul"]
    assert "makes it one Mul by a constant" in text
    _, report = seqlower.optimize(fixtures / "attention_split_heads" / "model.onnx")
    performance = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    beside = " ".join(performance.split("## Beside graph simplifiers", 1)[1].split())
    assert "docs/performance.md#beside-graph-simplifiers" in text
    claim = re.search(r"seqlower (\d+) -> (\d+) nodes with none left", beside)
    assert claim is not None
    assert (report.nodes_before, report.nodes_after) == (int(claim[1]), int(claim[2]))
    assert report.total_before == 10 and report.total_after == 0
    assert "all 10 sequence operators left" in beside


def test_the_sample_summary_is_what_optimize_prints(tmp_path: Path, monkeypatch) -> None:
    block = _section("Command line").split("$ seqlower optimize ", 1)[1].split("```", 1)[0]
    command, *sample = block.strip("\n").splitlines()
    source, target = command.split()
    (tmp_path / source).parent.mkdir(parents=True)
    (tmp_path / source).write_bytes((ROOT / source).read_bytes())
    monkeypatch.chdir(tmp_path)  # the paths as the README gives them
    result = CliRunner().invoke(app, ["optimize", source, target])
    assert result.exit_code == 0, result.output
    printed = result.stdout

    def without_time(text: str) -> str:
        return re.sub(r"\d+\.\d\d s\)", "T s)", text).strip("\n")

    assert without_time(printed) == without_time("\n".join(sample))


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _section("Python"), flags=re.S)


def test_the_python_examples_run_and_the_recipe_gives_a_model_that_loads(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(onnx.parser.parse_model(CAST_MATMUL_MAP), tmp_path / "in.onnx")
    blocks = _python_blocks()
    (recipe,) = [block for block in blocks if "PassManager" in block]
    exec(compile(blocks[0], "README-python", "exec"), {})  # optimize, save_model, onnx.save
    (in_ci,) = [block for block in blocks if "assert_equivalent" in block]
    namespace_ci: dict = {}
    exec(compile(in_ci, "README-testing", "exec"), namespace_ci)
    namespace_ci["test_lowered_model_is_equivalent"]()  # in.onnx against its lowered out.onnx
    onnx.checker.check_model(onnx.load(tmp_path / "out.onnx"), full_check=True)
    (tmp_path / "out.onnx").unlink()
    namespace: dict = {}
    exec(compile(recipe, "README-recipe", "exec"), namespace)
    assert isinstance(namespace["model"], ir.Model)
    lowered = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(lowered, full_check=True)
    assert "SequenceMap" not in {node.op_type for node in lowered.graph.node}
    load = (
        "import sys, onnxruntime as o; "
        "o.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
    )
    done = subprocess.run([sys.executable, "-c", load, "out.onnx"], check=False, cwd=tmp_path)
    assert done.returncode == 0, "the README's recipe gives a model onnxruntime cannot load"


def test_the_target_example_runs_and_judges_as_the_command_line(tmp_path: Path, monkeypatch):
    """The README's example of `target=` and `dims=` on a model with a symbolic dim N."""
    monkeypatch.chdir(tmp_path)
    fixture = ROOT / "tests" / "fixtures" / "torch" / "list_insert_pop" / "model.onnx"
    (tmp_path / "in.onnx").write_bytes(fixture.read_bytes())
    (block,) = [b for b in _python_blocks() if 'target="tensorrt"' in b]
    namespace: dict = {}
    exec(compile(block, "README-target", "exec"), namespace)
    report = namespace["report"]
    assert report.target == "tensorrt" and report.fits_target  # N bound: nothing left
    onnx.checker.check_model(onnx.load(tmp_path / "out.onnx"), full_check=True)


def test_install_and_license_are_stated() -> None:
    install = _section("Install")
    assert "pip install ." in install and "<" not in install  # no placeholder to fill in
    assert "Python >= 3.10" in install
    assert "Apache-2.0" in _section("License")
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
    assert "Apache License" in (ROOT / "LICENSE").read_text()


def test_no_reference_to_files_that_are_not_in_the_repository() -> None:
    paths = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "seqlower" / "options.py"]
    paths += sorted((ROOT / "docs").glob("*.md"))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert "shared/design.md" not in text.lower(), path  # the maintainers' notes, not shipped
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (path.parent / link).exists(), (path, link)


def test_the_bench_durations_agree_with_bench_readme() -> None:
    bench = (ROOT / "bench" / "README.md").read_text()
    for text in (PERFORMANCE, (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")):
        quick = re.search(r"--quick`? takes (under \d+ minutes?)", text)
        assert quick is not None and quick.group(1) in bench
        full = re.search(r"full run, (about \d+ minutes)", text)
        assert full is not None and full.group(1).replace("about ", "~") in bench


def test_the_performance_claims_match_the_table() -> None:
    table = PERFORMANCE.split("\n## ", 1)[0]  # the first table: SequenceMap latency
    speedups = [float(x) for x in re.findall(r"\| (\d+\.\d)x \|$", table, re.M)]
    assert speedups, "no original / ours column found"
    claim = re.search(r"(\d+)x to (\d+)x slower than seqlower's output", README)
    assert claim is not None
    low, high = int(claim.group(1)), int(claim.group(2))
    assert low <= min(speedups) < low + 1 and high - 1 < max(speedups) <= high + 1
    assert "O(N^2)" not in _section("Why")
