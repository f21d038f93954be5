"""The rewrites a report counts that are passes, not rules: every name the summary's "rules
fired" line can print is either a rule (`seqlower.rules.default_rules`) or one of these, and
`seqlower rules` lists both.

    PassRewrite(name, op_type, doc)   # doc: before -> after, as a rule's docstring
"""

from __future__ import annotations

__all__ = ["PASS_REWRITES", "PassRewrite"]

import dataclasses

from seqlower.report.data import LIST_TIER


@dataclasses.dataclass(frozen=True)
class PassRewrite:
    """One rewrite a pass makes, named in the report's rule counts as a rule would be."""

    name: str
    op_type: str
    doc: str


PASS_REWRITES = (
    PassRewrite(
        "inline-function",
        "(function call)",
        "f(x..) -> the body of f, with x.. for its inputs (a call of a model-local function "
        "that holds or passes sequences, before lowering)",
    ),
    PassRewrite(
        LIST_TIER,
        "(any sequence operator)",
        "a list no rule lowered -> tensors: stacked (data [n, *S]), ragged (data "
        "concatenated on axis 0 and the first dims [n]) or flat (data flattened and a table "
        "of shapes [n, rank]) when its elements have a known rank, else, for the targets that "
        "take ranks known only at run time, unranked (data flattened, the shapes concatenated "
        "and a table [n, 2] of sizes and ranks); every sequence operator on it -> a "
        'few tensor operators on them (docs/design.md, "Every list becomes tensors")',
    ),
    PassRewrite(
        "fold-constant-transpose",
        "Transpose",
        "Transpose(w) with w a constant weight read only there -> w transposed once, stored "
        "(after lowering)",
    ),
    PassRewrite(
        "hoist-loop-invariant",
        "Loop",
        "Loop(.., body: y = f(outer values)) -> y = f(outer values); Loop(.., body reads y) "
        "(f an operator that cannot fail on the known shapes it reads; after lowering)",
    ),
    PassRewrite(
        "sink-into-branch",
        "If",
        "y = f(..); If(c, then: .., else: g(y)) -> If(c, then: .., else: y = f(..); g(y)) (f an "
        "operator that cannot fail, read by one branch alone; after lowering)",
    ),
    PassRewrite(
        "guard-empty-rows",
        "If",
        "ys = f(x, constants) -> ys = If(Cast(Size(x), BOOL), then: f(x, constants), else: "
        "f's results where x has no row, as constants) (f the nodes a batched loop made, at "
        "least 15 launches, x of static dims but the first, the guard at most 2% of the "
        "model's estimate on small inputs; after lowering, not for tract)",
    ),
    PassRewrite(
        "single-element-condition",
        "If",
        "n = Reshape(v, []); If(n >= k ..) -> If(v >= k ..) (v of shape [1], read through "
        "comparisons and logic by If conditions alone; --target onnxruntime only)",
    ),
    PassRewrite(
        "loop-condition-passthrough",
        "Loop",
        "Loop(.., body: cond_out = Identity(true)) -> Loop(.., body: cond_out = cond_in) "
        "(--target onnxruntime only: about 0.25 us less per iteration)",
    ),
    PassRewrite(
        "loop-to-scan",
        "Loop",
        "Loop(M static > 0, true, v.., body: f(v.., Gather(x, i, axis=a))) -> Scan(v.., x, "
        "scan_input_axes=[a], body: f(v.., x_i)); Loop(M static > 0, true, v.., body: f(i, "
        "v..)) -> Scan(v.., Range(0, M, 1), body: f(v.., i)) (--target onnxruntime only)",
    ),
)
