"""What seqlower knows statically about a graph: constant tensors and sequence facts."""

from seqlower.analysis.facts import Facts, KnownElements, KnownLength, SequenceFact, Unknown

__all__ = ["Facts", "KnownElements", "KnownLength", "SequenceFact", "Unknown"]
