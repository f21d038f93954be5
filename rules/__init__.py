"""The rewrite rules, one family per module, combined explicitly in priority order.

Each rule's `rewrite` docstring shows its `before -> after`; `seqlower rules` and the README's
catalogue are generated from them.
"""

from seqlower.rule import RuleSet
from seqlower.rules import (
    access,
    batching,
    concat,
    construct,
    control_flow,
    even_chunks,
    if_select,
    loop_accumulators,
    loop_appends,
    loop_batching,
    loop_break,
    loop_chunks,
    loop_concat,
    loop_copy,
    loop_counters,
    loop_fusion,
    loop_induction,
    loop_last_element,
    loop_list_elements,
    loop_map_assign,
    loop_ragged_pads,
    loop_ragged_rows,
    loop_reverse_erase,
    loop_row_chunks,
    loops,
    mask_indexing,
    runtime_position,
    sequence_map,
    split,
    target_tract,
    tract_gather,
    tract_if,
    tract_while,
    unit_axes,
    unrolled_maps,
    unsqueezed_stacks,
    while_length,
    whole_split,
)

__all__ = ["default_rules"]


def default_rules() -> RuleSet:
    """All rules, in the order they are tried on a node."""
    return (
        split.RULES
        + construct.RULES
        + even_chunks.RULES  # before the per-element runtime-position forms
        + runtime_position.RULES
        + access.RULES
        + concat.RULES
        + control_flow.RULES
        + if_select.RULES  # an If in a body picking one of two small tensors
        + while_length.RULES  # `while len(out) < n: out.append(x)`: a counted loop
        + loop_break.RULES  # a loop that may stop early: its count first
        + loop_reverse_erase.RULES  # `del xs[k]` from the end where a condition holds: a filter
        + loop_copy.RULES  # `[s for s in xs]`: the list xs itself
        + loop_counters.RULES  # a counter beside the iteration number: that number, scaled
        + loop_batching.RULES
        + loop_chunks.RULES  # chunks of any sizes, mapped elementwise
        + loop_ragged_rows.RULES  # the same on a list held as rows and sizes
        + loop_ragged_pads.RULES  # its elements padded to one length: one Gather
        + loops.RULES
        + loop_list_elements.RULES  # a list of static length edited in place: its elements
        + loop_fusion.RULES  # a list built by one Loop and read in order by the next
        + loop_last_element.RULES  # a list read at its end: its last element carried
        + loop_map_assign.RULES  # xs[i] = f(xs[i]) for every i: appends to a new list
        + loop_appends.RULES
        + loop_concat.RULES
        + loop_row_chunks.RULES  # row chunks mapped row-wise and joined: the map of the rows
        + loop_accumulators.RULES  # the other way: a tensor accumulator to a scan output
        + loop_induction.RULES  # a Loop left with counters only
        + batching.RULES
        + unrolled_maps.RULES  # a map written out per element: applied once to the stack
        + mask_indexing.RULES  # x[m] as TorchScript writes it: one Compress
        + whole_split.RULES  # every chunk of a Split joined again: the tensor itself
        + sequence_map.RULES
        + unit_axes.RULES  # after batching: the unit axes of split(1) chunks
        + unsqueezed_stacks.RULES  # last: the stacks the other rules leave, one Reshape each
        + target_tract.RULES  # only with Options.target == "tract"
        + tract_if.RULES  # only with Options.target == "tract"
        + tract_while.RULES  # only with Options.target == "tract"
        + tract_gather.RULES  # only with Options.target == "tract"
    )
