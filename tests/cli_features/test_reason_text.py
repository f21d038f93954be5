"""Every reason, hint and warning the lowering gives reads as a sentence: where a message names
a value the lowering made, it names the node of the input it came from ("a value made from
'/SequenceAt_1'"), never a name glued where a noun should be ("the shape of made from ...").

All the models under tests/fixtures are lowered for three targets and every text of their
reports is checked by `garbled`."""

from __future__ import annotations

import pathlib
import re

import onnx
import pytest

import seqlower
from seqlower.report.labels import renamed_in

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
FOLDERS = sorted(p.name for p in FIXTURES.iterdir() if any(p.rglob("*.onnx")))
TARGETS = ("portable", "onnxruntime", "tract")

# "made from '<origin>'" must follow an operator ("Loop made from") or "a value"
_MADE_FROM = re.compile(r"made from '")
_GARBLES = {
    "an empty quote": re.compile(r"''"),
    "a doubled 'made from'": re.compile(r"made from (\S+ )?made from"),
    "a made-up dim name": re.compile(r"unk__\d"),
    "a None": re.compile(r"\bNone\b"),
    "a doubled word": re.compile(r"\b(the|a|of|is|to) \1\b"),
    "a doubled space": re.compile(r"\S  +\S"),
    "an empty parenthesis": re.compile(r"\(\s*\)"),
    "a dangling separator": re.compile(r"(: *$|, *$|: :|; *;|\s[,;:])"),
    "a trailing space": re.compile(r"\s$"),
}


def garbled(text: str) -> str | None:
    """What makes `text` unreadable, or None."""
    for what, pattern in _GARBLES.items():
        if pattern.search(text):
            return what
    for match in _MADE_FROM.finditer(text):
        before = text[: match.start()].split()[-2:]
        if not ((before and before[-1][:1].isupper()) or before == ["a", "value"]):
            return f"'made from' after {' '.join(before)!r}"
    return None


def _texts(report: seqlower.Report) -> list[str]:
    texts = [*report.warnings, *report.target_errors, *report.target_warnings]
    for op in report.remaining:
        texts += [op.reason, *op.reasons, op.hint]
    for node in report.nodes:
        texts += [node.reason, *node.reasons, node.hint]
    return [text for text in texts if text]


@pytest.mark.parametrize(
    "text",
    [
        "the shape of made from '/SequenceAt_1' (Slice) depends on made from '/SequenceAt_1'",
        "the rank of '', put into it, is unknown",
        "Loop made from made from '/Loop' stays",
        "the rank of 'unk__3' is unknown",
        "the split count depends on  the size",
        "kept because ",
    ],
)
def test_the_checker_sees_a_garbled_text(text):
    assert garbled(text) is not None


def test_a_value_the_lowering_made_is_named_by_its_origin_in_a_sentence():
    """A refusal about values the lowering made names them by the node of the input they came
    from, as a noun phrase, with the operator when the refusal names one."""
    renamed = {"/SequenceAt_1_slice": "/SequenceAt_1", "/SequenceAt_1_element": "/SequenceAt_1"}
    text = renamed_in(
        "the shape of '/SequenceAt_1_slice' (Slice) depends on '/SequenceAt_1_element', "
        "whose value changes between iterations",
        renamed,
    )
    assert text == (
        "the shape of a value made from '/SequenceAt_1' (Slice) depends on a value made from "
        "'/SequenceAt_1', whose value changes between iterations"
    )
    assert garbled(text) is None
    node = renamed_in("Slice '/SequenceAt_1_slice' stays", renamed)
    assert node == "Slice made from '/SequenceAt_1' stays"


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_reason_the_fixtures_produce_reads_as_garbled(folder):
    found: dict[str, str] = {}
    for path in sorted((FIXTURES / folder).rglob("*.onnx")):
        model = onnx.load(path)
        for target in TARGETS:
            _, report = seqlower.optimize(model, target=target)
            for text in _texts(report):
                what = garbled(text)
                if what is not None:
                    found.setdefault(text, f"{path.parent.name} ({target}): {what}")
    assert found == {}
