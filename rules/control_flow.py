"""If nodes with sequences: inline a branch, or return the elements as tensors.

    If(static c, then=f, else=g)            -> f() (c true) or g() (c false), inlined
    If(c, then: SequenceConstruct(a0..an), else: SequenceConstruct(b0..bn))
        -> SequenceConstruct(If(c, then: (a0..an), else: (b0..bn)))   (one tensor output each)

The second form needs both branches to yield the same static number of elements (each branch is
lowered first by the other rules, which turn its sequence into the canonical SequenceConstruct);
the SequenceConstruct left outside lets the consumers of the If keep lowering. Sequence outputs
whose lengths are not static, or differ between the branches, stay sequences.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.inline import inline_graph
from seqlower.ops import is_sequence_op, is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet

_BRANCHES = ("then_branch", "else_branch")


def _branch(node: ir.Node, key: str) -> ir.Graph:
    return node.attributes[key].as_graph()


def _involves_sequences(node: ir.Node) -> bool:
    if any(is_sequence_value(v) for v in node.outputs):
        return True
    for key in _BRANCHES:
        if key in node.attributes and any(
            is_sequence_op(n) for n in _branch(node, key).all_nodes()
        ):
            return True
    return False


# -- constant condition ------------------------------------------------------------------------


def _check_static_condition(node: ir.Node, ctx: Context) -> ir.Graph | Refusal:
    if not _involves_sequences(node):
        return Refusal("no sequence in the outputs or the branches")
    condition = ctx.facts.static(node.inputs[0])
    if condition is None or condition.size != 1:
        return Refusal("the condition is computed at run time")
    return _branch(node, "then_branch" if bool(condition.reshape(())) else "else_branch")


def _inline_branch(node: ir.Node, branch: ir.Graph, ctx: Context) -> None:
    """If(c static, then_branch=f, else_branch=g) -> f() when c is true, g() otherwise"""
    builder = ctx.rewriter.before(node)
    results = inline_graph(branch, [], builder, f"{builder.hint}_{branch.name or 'branch'}")
    for old, new in zip(node.outputs, results):
        ctx.rewriter.replace(old, new)


# -- sequence outputs of static length ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SplitOutputs:
    # per If output: the elements in each branch (then, else), or None to keep the output
    elements: tuple[tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]] | None, ...]


def _check_sequence_outputs(node: ir.Node, ctx: Context) -> SplitOutputs | Refusal:
    then_branch, else_branch = (_branch(node, key) for key in _BRANCHES)
    plan: list[tuple[tuple[ir.Value, ...], tuple[ir.Value, ...]] | None] = []
    reasons = []
    for index, output in enumerate(node.outputs):
        if not is_sequence_value(output):
            plan.append(None)
            continue
        sides = []
        for branch in (then_branch, else_branch):
            value = branch.outputs[index]
            elements = ctx.facts.elements(value)
            if elements is None:
                fact = ctx.facts.sequence(value)
                reason = getattr(fact, "reason", "its elements are not known")
                reasons.append(f"output '{output.name}' in {branch.name or 'a branch'}: {reason}")
                break
            sides.append(elements)
        if len(sides) != 2:
            plan.append(None)
            continue
        if len(sides[0]) != len(sides[1]):
            reasons.append(
                f"output '{output.name}': the branches yield {len(sides[0])} and {len(sides[1])} "
                "elements"
            )
            plan.append(None)
            continue
        plan.append((sides[0], sides[1]))
    if all(entry is None for entry in plan):
        return Refusal("; ".join(reasons) or "no sequence output")
    return SplitOutputs(tuple(plan))


def _sequence_outputs_to_tensors(node: ir.Node, plan: SplitOutputs, ctx: Context) -> None:
    """If(c, then: SequenceConstruct(a0..an), else: SequenceConstruct(b0..bn))
    -> SequenceConstruct(If(c, then: (a0..an), else: (b0..bn)))"""
    builder = ctx.rewriter.before(node)
    branches = [_branch(node, key) for key in _BRANCHES]
    for side, branch in enumerate(branches):
        inner = Builder(ctx.rewriter, branch, None, branch.name or "branch", builder.opset)
        outputs: list[ir.Value] = []
        for index, entry in enumerate(plan.elements):
            if entry is None:
                outputs.append(branch.outputs[index])
                continue
            for element in entry[side]:
                # a fresh value per output, produced in the branch itself
                copy = inner.op("Identity", [element], name="element")
                copy.type, copy.shape = element.type, element.shape
                outputs.append(copy)
        branch.outputs.clear()
        branch.outputs.extend(outputs)

    counts = [1 if entry is None else len(entry[0]) for entry in plan.elements]
    new_outputs: list[ir.Value] = []
    if sum(counts):
        new_outputs = builder.ops(
            "If",
            [node.inputs[0]],
            {"then_branch": branches[0], "else_branch": branches[1]},
            num_outputs=sum(counts),
            name="if",
        )
    # the branches move to the new If (when there is one); dead-code removal knows the new
    # holder and releases only what the old If alone held
    position = 0
    for old, entry, count in zip(node.outputs, plan.elements, counts):
        values = new_outputs[position : position + count]
        position += count
        if entry is None:
            values[0].type = old.type
            ctx.rewriter.replace(old, values[0])
            continue
        dtype = element_dtype(old)
        for value, then_element in zip(values, entry[0]):
            value.type = ir.TensorType(dtype or then_element.dtype)  # type: ignore[arg-type]
        ctx.replace_sequence(old, values, builder, dtype)


RULES = RuleSet(
    [
        Rule("if-static-condition", "If", _check_static_condition, _inline_branch),
        Rule("if-sequence-outputs", "If", _check_sequence_outputs, _sequence_outputs_to_tensors),
    ]
)
