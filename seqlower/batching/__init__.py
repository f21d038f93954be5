"""Batching of SequenceMap bodies, in the manner of `jax.vmap`: apply the body once to the stack
of its elements. `core` holds the vocabulary (operands, the op view, the emitter), `ops` one
batching rule per body operator, `body` the planning and emission of a whole body; the rewrite
rule itself is `seqlower.rules.batching`."""

from seqlower.batching.body import BodyPlan, emit_body, plan_body
from seqlower.batching.ops import OP_RULES

__all__ = ["OP_RULES", "BodyPlan", "emit_body", "plan_body"]
