"""`--target openvino|tract` loads the lowered model in that runtime and runs it once before
saying it is fit: a model the runtime cannot load or run is refused (exit 1, nothing written
unless --force), naming the node the runtime names; without the runtime the check is said to be
static only. Each failure used here is probed first: the test skips once a release runs it."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import time

import numpy as np
import onnx
import pytest
from support import parse
from typer.testing import CliRunner

import seqlower
from seqlower import runtime_check
from seqlower.cli import app
from seqlower.runtime_check import RuntimeCheck, check_in_runtime
from seqlower.verification.runner import RunOutcome
from seqlower.verification.runtimes import RuntimeUnavailableError, run_in_runtime

ROOT = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_accumulators"
HAS = {name: importlib.util.find_spec(name) is not None for name in ("openvino", "tract")}

# tract cannot type an If whose branches give different shapes; seqlower's tract profile
# says so since it was probed, so this one hides the shapes from the profile: the branch
# outputs declare none, and the model is given without inference
IF_SHAPES = """g (float[4] x, bool c) => (float[?] y) {
    y = If(c) <then_branch = t () => (float[?] a) { a = Concat<axis = 0>(x, x) },
               else_branch = e () => (float[?] b) { b = Neg(x) }>
}"""
RUNS = """g (float[4] x) => (float[4] y) { y = Relu(x) }"""
BAD_INPUTS = """g (float[N] x) => (float[2,3] y) {
    s = Constant<value = int64[2] {2, 3}>()
    y = Reshape(x, s)
}"""


def _fails_in(runtime: str, model: onnx.ModelProto, feeds: dict) -> str | None:
    """The runtime's error on `model`, or None when it runs it."""
    if not HAS[runtime]:
        pytest.skip(f"{runtime} is not installed")
    try:
        run_in_runtime(runtime, model, feeds)
    except Exception as error:
        return str(error)
    return None


def test_targets_without_a_runtime_to_run_are_not_checked():
    for target in ("generic", "portable", "onnxruntime", "tensorrt"):
        assert check_in_runtime(parse(RUNS), target) is None


@pytest.mark.parametrize("target", ["openvino", "tract"])
def test_a_model_the_runtime_runs_is_confirmed(target):
    if not HAS[target]:
        pytest.skip(f"{target} is not installed")
    check = check_in_runtime(parse(RUNS), target)
    assert check is not None and check.ok and check.status == "confirmed"
    assert "loaded the lowered model and ran it once" in check.message


def test_a_model_tract_cannot_type_fails_naming_the_node():
    model = parse(IF_SHAPES)
    model.graph.node[0].name = "pick"
    if _fails_in("tract", model, {"x": np.ones(4, np.float32), "c": np.array(True)}) is None:
        pytest.skip("tract now types an If whose branches differ in shape")
    check = check_in_runtime(model, "tract")
    assert check is not None and not check.ok and check.status == "failed"
    assert check.node == "pick"
    assert check.message.startswith("tract fails at node 'pick': ")


def test_a_loop_openvino_cannot_convert_fails_naming_the_node():
    model = parse("""g (float[2,3] x, int64 m) => (float[?,3] y) {
        c = Constant<value = bool {1}>()
        e = Constant<value = float[0,3] {}>()
        y = Loop(m, c, e) <body = b (int64 i, bool ci, float[?,3] a) => (bool co, float[?,3] a2)
            { co = Identity(ci) a2 = Concat<axis = 0>(a, x) }>
    }""")
    model.graph.node[-1].name = "grow"
    feeds = {"x": np.ones((2, 3), np.float32), "m": np.array(2)}
    if _fails_in("openvino", model, feeds) is None:
        pytest.skip("OpenVINO now converts a Loop that carries a constant of size 0")
    check = check_in_runtime(model, "openvino")
    assert check is not None and check.status == "failed" and check.node == "grow"
    assert "Accessing out-of-range dimension" in check.message


def _runners(errors: dict[str, str | None]):  # type: ignore[no-untyped-def]
    """An IsolatedRunner stand-in: a run in `runtime` fails with `errors[runtime]` (None:
    it runs, giving no output)."""

    class Runner:
        def __init__(self, runtime: str, model: bytes, *, timeout: float) -> None:
            self.runtime = runtime

        def __enter__(self) -> Runner:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def run(self, feeds: dict) -> RunOutcome:
            error = errors[self.runtime]
            return RunOutcome(error=error) if error else RunOutcome(outputs={})

    return Runner


def test_inputs_onnxruntime_rejects_too_are_inconclusive(monkeypatch):
    if not HAS["openvino"]:
        pytest.skip("openvino is not installed")
    errors = {"openvino": "Reshape: bad size", "onnxruntime": "Reshape: bad size"}
    monkeypatch.setattr(runtime_check, "IsolatedRunner", _runners(errors))
    check = check_in_runtime(parse(BAD_INPUTS), "openvino", dims={"N": 5})
    assert check is not None and check.ok and check.status == "inconclusive"
    assert "the generated inputs fail in onnxruntime too (Reshape: bad size)" in check.message


def test_a_run_failure_onnxruntime_does_not_share_is_a_failure(monkeypatch):
    if not HAS["openvino"]:
        pytest.skip("openvino is not installed")
    errors = {"openvino": "Reshape: bad size", "onnxruntime": None}
    monkeypatch.setattr(runtime_check, "IsolatedRunner", _runners(errors))
    check = check_in_runtime(parse(BAD_INPUTS), "openvino", dims={"N": 6})
    assert check is not None and check.status == "failed"
    assert check.message == "OpenVINO fails: Reshape: bad size"


def test_the_runtimes_read_one_file_written_once(monkeypatch):
    """Both runs read the model from one file holding its serialization, written before the
    first (not bytes sent to the child, which wrote them to a file of its own); the file goes
    when the check ends."""
    if not HAS["openvino"]:
        pytest.skip("openvino is not installed")
    model = parse(BAD_INPUTS)
    given: list[tuple[str, object, bytes]] = []

    class Runner:
        def __init__(self, runtime: str, source: object, *, timeout: float) -> None:
            self.runtime = runtime
            given.append((runtime, source, pathlib.Path(source).read_bytes()))  # type: ignore[arg-type]

        def __enter__(self) -> Runner:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def run(self, feeds: dict) -> RunOutcome:
            return RunOutcome(error="Reshape: bad size")

    monkeypatch.setattr(runtime_check, "IsolatedRunner", Runner)
    check = check_in_runtime(model, "openvino", dims={"N": 5})
    assert check is not None and check.status == "inconclusive"
    assert [runtime for runtime, _, _ in given] == ["openvino", "onnxruntime"]
    assert given[0][1] == given[1][1] and not pathlib.Path(given[0][1]).exists()  # type: ignore[arg-type]
    assert given[0][2] == model.SerializeToString(deterministic=True)


def test_without_the_runtime_the_check_is_static_only(monkeypatch):
    def unavailable(runtime: str) -> None:
        raise RuntimeUnavailableError(f"{runtime} is not installed: pip install 'seqlower[tract]'")

    monkeypatch.setattr(runtime_check, "check_available", unavailable)
    check = check_in_runtime(parse(RUNS), "tract")
    assert check is not None and check.ok and check.status == "unavailable"
    assert check.message.endswith("the check for --target tract was static only")


# -- the command line ----------------------------------------------------------------------------


def _optimize(tmp_path, text: str, *options: str):
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(parse(text), source)
    result = CliRunner().invoke(app, ["optimize", str(source), str(out), *options])
    return result, out


def _failed(monkeypatch) -> None:
    failed = RuntimeCheck("tract", "failed", "tract fails at node 'pick': cannot type it", "pick")
    monkeypatch.setattr(runtime_check, "check_in_runtime", lambda *args, **kwargs: failed)


def test_cli_refuses_what_the_runtime_cannot_load_and_writes_nothing(tmp_path, monkeypatch):
    _failed(monkeypatch)
    result, out = _optimize(tmp_path, RUNS, "--target", "tract")
    assert result.exit_code == 1, result.output
    assert not out.exists()
    assert "  - tract fails at node 'pick': cannot type it" in result.output
    assert "1 problem for --target tract; nothing written" in result.output


def test_cli_force_writes_it_anyway(tmp_path, monkeypatch):
    _failed(monkeypatch)
    result, out = _optimize(tmp_path, RUNS, "--target", "tract", "--force")
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert "1 problem for --target tract; written anyway (--force)" in result.output


def test_cli_refuses_a_lowered_model_tract_cannot_type(tmp_path):
    """End to end, with tract itself: the `cond_grow` fixture lowers to a Scan and a Compress
    (the profile has nothing against either), but tract 0.23.9 cannot type the Compress."""
    fixture = ROOT / "cond_grow" / "model.onnx"
    lowered, _ = seqlower.optimize(onnx.load(fixture), target="tract")
    if _fails_in("tract", lowered, {"x": np.ones((4, 3), np.float32)}) is None:
        pytest.skip("tract now runs the lowered cond_grow fixture")
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["optimize", str(fixture), str(out), "--target", "tract"])
    assert result.exit_code == 1, result.output
    assert not out.exists()
    assert "  - tract fails at node '/Loop/Compress'" in result.output


def test_cli_says_when_the_runtime_confirmed_it(tmp_path):
    if not HAS["openvino"]:
        pytest.skip("openvino is not installed")
    result, out = _optimize(tmp_path, RUNS, "--target", "openvino")
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert "--target openvino: OpenVINO loaded the lowered model and ran it once" in result.output
    quiet, _ = _optimize(tmp_path, RUNS, "--target", "openvino", "--quiet")
    assert quiet.output == ""


def test_cli_times_the_runtime_check_apart_from_the_lowering(tmp_path, monkeypatch):
    """The runtime check (OpenVINO compiling a large model takes most of a run) is timed on its
    own line; the summary's time is the lowering's alone, the final line's the whole run."""
    real, waited = time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real() + waited[0])

    def slow_check(*args, **kwargs):
        waited[0] += 1000.0  # a check that takes 1,000 s on the clock the CLI reads
        return RuntimeCheck("openvino", "confirmed", "OpenVINO loaded the lowered model")

    monkeypatch.setattr(runtime_check, "check_in_runtime", slow_check)
    result, _ = _optimize(tmp_path, RUNS, "--target", "openvino")
    assert result.exit_code == 0, result.output
    check_line = next(line for line in result.output.splitlines() if "loaded the" in line)
    assert re.fullmatch(
        r"--target openvino: OpenVINO loaded the lowered model \(100\d\.\d s\)", check_line
    )
    lowering = re.search(r"sequence ops 0 -> 0 \(.*; \d+ sweeps?, ([\d.]+) s\)", result.output)
    assert lowering is not None, result.output
    assert float(lowering.group(1)) < 1000.0
    written = re.search(r"wrote .*\(([\d.]+) s\)", result.output)
    assert written is not None, result.output
    assert float(written.group(1)) >= 1000.0


def test_cli_says_when_the_check_was_static_only(tmp_path, monkeypatch):
    def unavailable(runtime: str) -> None:
        raise RuntimeUnavailableError(f"{runtime} is not installed: pip install 'seqlower[tract]'")

    monkeypatch.setattr(runtime_check, "check_available", unavailable)
    result, out = _optimize(tmp_path, RUNS, "--target", "tract")
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert "warning: tract is not installed" in result.output
    assert "static only" in result.output
