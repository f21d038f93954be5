"""Fold sequence builders into the canonical SequenceConstruct of known elements.

    SequenceInsert(SequenceConstruct(e0..en), t)     -> SequenceConstruct(e0..en, t)
    SequenceInsert(SequenceConstruct(e0..en), t, p)  -> SequenceConstruct(e[:p], t, e[p:])
    SequenceInsert(SequenceEmpty(), t)               -> SequenceConstruct(t)
    SequenceErase(SequenceConstruct(e0..en))         -> SequenceConstruct(e0..en-1)
    SequenceErase(SequenceConstruct(e0..en), p)      -> SequenceConstruct(e without e[p])
    Identity(SequenceConstruct(e0..en))              -> SequenceConstruct(e0..en)

Positions must be static; negative positions count from the end; insert accepts p == n. An
out-of-range static position is an error in the model and is reported, not lowered. A chain of
inserts and erases, each the only reader of the one before, folds in one rewrite into one
SequenceConstruct (each counted as folded): one SequenceConstruct per link would make a chain of
n inserts cost n^2 (3,000 inserts: 4.5 million inputs built and dropped again).
"""

from __future__ import annotations

__all__ = ["RULES", "static_position"]

import onnx_ir as ir

from seqlower.errors import InvalidModelError
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.uses import use_count


def static_position(
    node: ir.Node,
    ctx: Context,
    length: int,
    *,
    position_input: int,
    default: int,
    inclusive_end: bool = False,
) -> int | Refusal:
    """The normalized static position (input `position_input` of `node`), or why it is not
    static.

    Raises InvalidModelError for a static position that the spec makes a run-time error.
    """
    position_value = node.inputs[position_input] if len(node.inputs) > position_input else None
    if position_value is None:
        position = default if default >= 0 else length + default
        if not 0 <= position <= length - (0 if inclusive_end else 1):
            raise InvalidModelError(
                f"{node.op_type} '{node.name}': the sequence is empty, so the default position "
                "is out of range (a run-time error in the ONNX spec)"
            )
        return position
    position = ctx.facts.static_int(position_value)
    if position is None:
        return Refusal(f"position '{position_value.name}' is computed at run time")
    upper = length if inclusive_end else length - 1
    if not -length <= position <= upper:
        raise InvalidModelError(
            f"{node.op_type} '{node.name}': position {position} is out of range for a sequence "
            f"of length {length} (accepted: [{-length}, {upper}]; a run-time error in the spec)"
        )
    return position + length if position < 0 else position


def _known(node: ir.Node, ctx: Context) -> tuple[ir.Value, ...] | Refusal:
    return ctx.known_elements(node.inputs[0])


def _insert_position(node: ir.Node, ctx: Context, length: int) -> int | Refusal:
    """Where SequenceInsert `node` puts its tensor in a list of `length` elements, from 0 to
    `length` (none given: the end)."""
    return static_position(node, ctx, length, position_input=2, default=length, inclusive_end=True)


def _erase_position(node: ir.Node, ctx: Context, length: int) -> int | Refusal:
    """Which element of a list of `length` SequenceErase `node` removes (none given: the
    last)."""
    return static_position(node, ctx, length, position_input=1, default=-1)


def _check_insert(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _known(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    length = len(elements)
    position = _insert_position(node, ctx, length)
    if isinstance(position, Refusal):
        return position
    return elements, position


def _fold_insert(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceInsert(SequenceConstruct(e...), t, p) -> SequenceConstruct(e[:p], t, e[p:])"""
    elements, position = match
    _fold_chain(node, _inserted(node, list(elements), position), ctx)


def _inserted(node: ir.Node, elements: list[ir.Value], position: int) -> list[ir.Value]:
    tensor = node.inputs[1]
    assert tensor is not None
    elements.insert(position, tensor)
    return elements


def _fold_chain(node: ir.Node, elements: list[ir.Value], ctx: Context) -> None:
    """Replace the result of `node` (`elements` once it is folded) by a SequenceConstruct, after
    folding in the inserts and erases that follow it, each the only reader of the one before
    (static positions only; each folded one is reported as rewritten by its own rule)."""
    last = node
    while (reader := _only_builder_reader(last)) is not None:
        if reader.op_type == "SequenceInsert":
            length = len(elements)
            position = _insert_position(reader, ctx, length)
            if isinstance(position, Refusal):
                break
            elements = _inserted(reader, elements, position)
            ctx.rewriter.consumed(reader, "insert-into-known")
        else:
            if not elements:
                break  # erase-from-known reports it
            position = _erase_position(reader, ctx, len(elements))
            if isinstance(position, Refusal):
                break
            del elements[position]
            ctx.rewriter.consumed(reader, "erase-from-known")
        last = reader
    ctx.replace_sequence(last.outputs[0], elements, ctx.rewriter.before(last))


def _only_builder_reader(node: ir.Node) -> ir.Node | None:
    """The SequenceInsert or SequenceErase that alone reads the result of `node`, as its
    sequence, in the same graph; else None."""
    output = node.outputs[0]
    if output.is_graph_output():
        return None
    uses = output.uses()
    if len(uses) != 1:
        return None
    reader, index = uses[0].node, uses[0].idx
    if index != 0 or reader.domain != "" or reader.graph is not node.graph:
        return None
    return reader if reader.op_type in ("SequenceInsert", "SequenceErase") else None


def _check_erase(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _known(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    position = _erase_position(node, ctx, len(elements))
    if isinstance(position, Refusal):
        return position
    return elements, position


def _fold_erase(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceErase(SequenceConstruct(e...), p) -> SequenceConstruct(e[:p], e[p+1:])"""
    elements, position = match
    _fold_chain(node, [*elements[:position], *elements[position + 1 :]], ctx)


def _check_identity(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    if not isinstance(node.outputs[0].type, ir.SequenceType):
        return Refusal("not a sequence")
    source = node.inputs[0]
    if source is not None and (source.is_graph_output() or use_count(source) > 1):
        # readers see through the Identity anyway (facts flow through it); once they are
        # lowered, the Identity is the last reader and folds without adding anything
        return Refusal(
            "the sequence it copies stays (another reader or a graph output): a copy of its "
            "SequenceConstruct would add a sequence operator"
        )
    return _known(node, ctx)


def _fold_identity(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """Identity(SequenceConstruct(e...)) -> SequenceConstruct(e...)"""
    ctx.replace_sequence(node.outputs[0], elements, ctx.rewriter.before(node))


RULES = RuleSet(
    [
        Rule("insert-into-known", "SequenceInsert", _check_insert, _fold_insert),
        Rule("erase-from-known", "SequenceErase", _check_erase, _fold_erase),
        Rule("identity-of-known", "Identity", _check_identity, _fold_identity),
    ]
)
