"""Issue 14, item 10: `seqlower.optimize` returns the kind of model it was given (an
`onnx.ModelProto` for a ModelProto, ready for `onnx.save`; an `onnx_ir.Model` for a path or an
`onnx_ir.Model`), says so in its docstring, and every public function is typed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest
from cli_models import EXAMPLE

import seqlower
import seqlower.io


def test_a_model_proto_gives_a_model_proto_that_onnx_saves(tmp_path: Path) -> None:
    proto = onnx.load(EXAMPLE)
    lowered, report = seqlower.optimize(proto)
    assert isinstance(lowered, onnx.ModelProto)
    assert report.total_after == 0
    onnx.save(lowered, tmp_path / "out.onnx")
    onnx.checker.check_model(onnx.load(tmp_path / "out.onnx"), full_check=True)
    assert proto == onnx.load(EXAMPLE)  # the given proto is not changed


@pytest.mark.parametrize("kind", ["path", "str", "ir"])
def test_a_path_or_an_ir_model_gives_an_ir_model(kind: str) -> None:
    source = {"path": EXAMPLE, "str": str(EXAMPLE), "ir": ir.load(EXAMPLE)}[kind]
    result = seqlower.optimize(source)
    assert isinstance(result.model, ir.Model) and result.model is not source
    model, report = result
    assert model is result.model and report is result.report


def test_every_kind_lowers_to_the_same_bytes() -> None:
    results = [
        seqlower.optimize(EXAMPLE).model,
        seqlower.optimize(onnx.load(EXAMPLE)).model,
        seqlower.optimize(ir.load(EXAMPLE)).model,
    ]
    assert len({seqlower.io.model_to_bytes(model) for model in results}) == 1


def test_save_model_takes_either_kind(tmp_path: Path) -> None:
    for model in (seqlower.optimize(EXAMPLE).model, seqlower.optimize(onnx.load(EXAMPLE)).model):
        seqlower.io.save_model(model, tmp_path / "out.onnx")
        onnx.checker.check_model(onnx.load(tmp_path / "out.onnx"), full_check=True)


def test_the_signature_and_docstring_say_which_kind_comes_back() -> None:
    overloads = typing.get_overloads(seqlower.optimize) if hasattr(typing, "get_overloads") else []
    if overloads:  # Python 3.11+
        returns = {str(inspect.signature(f).return_annotation) for f in overloads}
        assert returns == {"OptimizeResult[onnx.ModelProto]", "OptimizeResult[ir.Model]"}
    doc = seqlower.optimize.__doc__ or ""
    assert "onnx.ModelProto" in doc and "onnx_ir.Model" in doc


def _public_modules() -> list:
    names = [info.name for info in pkgutil.walk_packages(seqlower.__path__, "seqlower.")]
    return [importlib.import_module(name) for name in names if not name.endswith("__main__")]


def _public_functions(module) -> list:
    found = []
    for name in getattr(module, "__all__", []):
        item = getattr(module, name)
        if inspect.isfunction(item):
            found.append((name, item))
        elif (
            inspect.isclass(item)
            and item.__module__ == module.__name__
            and not getattr(item, "_is_protocol", False)  # typing makes a Protocol's __init__
        ):
            found.extend(
                (f"{name}.{key}", value)
                for key, value in vars(item).items()
                if inspect.isfunction(value) and (not key.startswith("_") or key == "__init__")
            )
    return found


@pytest.mark.parametrize("module", _public_modules(), ids=lambda m: m.__name__)
def test_every_public_function_is_typed(module) -> None:
    for name, function in _public_functions(module):
        signature = inspect.signature(function)
        assert signature.return_annotation is not inspect.Signature.empty, name
        for parameter in signature.parameters.values():
            if parameter.name in ("self", "cls"):
                continue
            assert parameter.annotation is not inspect.Parameter.empty, (name, parameter.name)
