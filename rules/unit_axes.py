"""A unit axis inserted and removed again around ops that do not look at it is never inserted.

    Squeeze(f(Unsqueeze(x, a)), a) -> f(x)
        f: a chain of ops, each value read once, where each op is
           - elementwise with one input (Relu, Neg, Cast...),
           - elementwise with two inputs, the other of rank < rank - a (it never reaches axis a)
          or itself Unsqueeze(y, a), read once (`zip` of two split lists),
           - MatMul(chain, w) with w of rank 2 and a not the contracted (last) axis.

Batching the elements of `x.split(1, 0)` (`loop-batch`, `sequence-map-batch`) stacks `[1, d]`
chunks as `[N, 1, d]`: an Unsqueeze before the body and a Squeeze after it. Without them the body
runs on `[N, d]`: two launches fewer, and one `[N, d] x [d, e]` MatMul instead of N `[1, d]` ones.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.uses import use_count

_UNARY = frozenset(
    {
        *("Abs", "Cast", "Ceil", "Cos", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "Identity"),
        *("LeakyRelu", "Log", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid"),
        *("Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Tanh"),
    }
)
_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"})


@dataclasses.dataclass(frozen=True)
class RoundTrip:
    unsqueeze: ir.Node
    chain: tuple[ir.Node, ...]  # from the Unsqueeze's reader to the Squeeze's input producer
    axis: int
    side_unsqueezes: tuple[ir.Node, ...]  # Unsqueeze(y, a) read by a binary op of the chain


def _single_axis(node: ir.Node, ctx: Context) -> int | None:
    """The one axis of a Squeeze or Unsqueeze, when static (attribute or constant input)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = ctx.facts.values.get_ints(node.inputs[1])
    else:
        axes = node.attributes.get_ints("axes")
    return None if axes is None or len(axes) != 1 else int(axes[0])


def _rank(value: ir.Value | None) -> int | None:
    return None if value is None or value.shape is None else len(value.shape)


def _keeps_axis(
    node: ir.Node, chained: ir.Value, rank: int, axis: int, ctx: Context
) -> ir.Node | bool:
    """Whether `node`, reading `chained` (of `rank`, with a unit dim at `axis`), never looks at
    that axis, so that it computes the same on the value without it; for a binary op whose other
    input is Unsqueeze(y, axis) read once, that Unsqueeze (dropped with the round trip)."""
    if node.domain != "":
        return False
    if node.op_type in _UNARY:
        return len(node.inputs) == 1
    others = [value for value in node.inputs if value is not chained]
    if node.op_type in _BINARY and len(node.inputs) == 2 and len(others) == 1:
        other = others[0]
        other_rank = _rank(other)
        if other_rank is not None and other_rank < rank - axis:
            return True
        side = other.producer() if other is not None else None
        if (
            side is not None
            and side.op_type == "Unsqueeze"
            and side.domain == ""
            and other_rank == rank
            and use_count(other) == 1  # type: ignore[arg-type]
            and not other.is_graph_output()  # type: ignore[union-attr]
            and _single_axis(side, ctx) in (axis, axis - rank)
        ):
            return side
        return False
    if node.op_type == "MatMul":
        return node.inputs[0] is chained and _rank(node.inputs[1]) == 2 and axis != rank - 1
    return False


def _check(node: ir.Node, ctx: Context) -> RoundTrip | Refusal:
    rank = _rank(node.inputs[0])
    axis = _single_axis(node, ctx)
    if rank is None or axis is None:
        return Refusal("the rank of the squeezed value or the squeezed axis is not static")
    axis %= rank
    chain: list[ir.Node] = []
    sides: list[ir.Node] = []
    value = node.inputs[0]
    while True:
        producer = value.producer() if value is not None else None
        if producer is None or value is None:
            return Refusal("the squeezed value does not come from an Unsqueeze")
        if use_count(value) != 1 or value.is_graph_output():
            return Refusal(f"'{value.name}' has other readers")
        if producer.op_type == "Unsqueeze" and producer.domain == "":
            if _single_axis(producer, ctx) not in (axis, axis - rank):
                return Refusal("the Unsqueeze inserts another axis")
            return RoundTrip(producer, tuple(reversed(chain)), axis, tuple(sides))
        chained = next((v for v in producer.inputs if _rank(v) == rank), None)
        keeps = False if chained is None else _keeps_axis(producer, chained, rank, axis, ctx)
        if chained is None or keeps is False:
            label = producer.name or producer.outputs[0].name
            return Refusal(f"{producer.op_type} '{label}' may look at the unit axis")
        if isinstance(keeps, ir.Node):
            sides.append(keeps)
        chain.append(producer)
        value = chained


def _drop_unit_axis(node: ir.Node, match: RoundTrip, ctx: Context) -> None:
    """Squeeze(f(Unsqueeze(x, a)), a) -> f(x)"""
    source = match.unsqueeze.inputs[0]
    assert source is not None
    for link in match.chain:  # each now reads the value without the unit axis
        for output in link.outputs:
            if output.shape is not None:
                output.shape = ir.Shape([d for i, d in enumerate(output.shape) if i != match.axis])
    for unsqueeze in (match.unsqueeze, *match.side_unsqueezes):
        ctx.rewriter.replace(unsqueeze.outputs[0], unsqueeze.inputs[0])  # type: ignore[arg-type]
    result = match.chain[-1].outputs[0] if match.chain else source
    ctx.rewriter.replace(node.outputs[0], result)


RULES = RuleSet([Rule("unit-axis-round-trip", "Squeeze", _check, _drop_unit_axis)])
