"""Speed first (`--target onnxruntime`): each region keeps the cheaper of its two forms.

Lowering runs once over the whole model. Each region (`seqlower.regions`) is then costed twice
with `seqlower.cost.node_costs`: as given, before lowering, and as lowered, counting every node
a rewrite made for the region of the node it came from. Each estimate is made twice: with
`DYNAMIC_COUNT` iterations for a loop of run-time count and with `SMALL_COUNT` (small inputs:
a loop over the images of a batch of two). A form is weighed by the product of its two
estimates (the geometric mean of its cost relative to another form's at each count, squared):
a region whose lowered form costs more so (in whole launches) is kept: the pipeline lowers a
fresh copy of the model again, with that region's nodes `frozen` (the driver refuses them,
giving `reason` as the only refusal), and keeps whichever of the two lowerings and the
original weighs least (`relative_cost`).

A lowered form that adds a fixed cost (a batched form's masks, a trip count computed before a
loop) to save work per iteration is thus lowered where what it saves at `DYNAMIC_COUNT`
iterations outweighs, in ratio, what it loses on small inputs, where the run-time count of a
loop over a batch's images is one or two: by one count alone, a region 15% cheaper lowered at
16 iterations and 25% dearer at 2 was lowered.

    plan = RegionPlan.of(model)                      # typed, before lowering
    ... lower ...
    costlier = plan.costlier(model, lower.origins)   # [RegionCost], empty if none
    frozen = plan.frozen(costlier, fresh, label)     # nodes of `fresh` (the same model again)
"""

from __future__ import annotations

__all__ = ["FROZEN_RULE", "RegionCost", "RegionPlan", "relative_cost"]

import dataclasses
import math
from collections.abc import Callable, Mapping

import onnx_ir as ir

from seqlower.cost import node_costs_both
from seqlower.ops import iter_all_nodes
from seqlower.regions import Region, find_regions, region_costs, region_totals
from seqlower.report import KEPT_FOR_SPEED, KeptRegion

FROZEN_RULE = KEPT_FOR_SPEED  # the name the refusals of a kept region carry


@dataclasses.dataclass(frozen=True)
class RegionCost:
    """A region whose lowered form costs more: its index and both estimates (whole launches),
    and the same on small inputs (`SMALL_COUNT` iterations for a loop of run-time count) when
    they were made."""

    index: int
    as_given: int
    lowered: int
    as_given_small: int | None = None
    lowered_small: int | None = None

    @property
    def lowered_costs_more(self) -> bool:
        """By the product of the two estimates when both were made, else by the one."""
        if self.as_given_small is None or self.lowered_small is None:
            return self.lowered > self.as_given
        return self.lowered * self.lowered_small > self.as_given * self.as_given_small


@dataclasses.dataclass(frozen=True)
class RegionPlan:
    """The regions of a typed model before lowering, with their costs as given."""

    walk: tuple[ir.Node, ...]  # every node in `iter_all_nodes` order: finds them in a copy
    # each node's (domain, op_type) when planned: lowering may turn a node into another in
    # place (a shape folded into a Constant), and the copy is compared with the plan's model
    kinds: tuple[tuple[str, str], ...]
    regions: tuple[Region, ...]
    as_given: tuple[float, ...]  # per region
    total: float  # the whole model
    # the same with `SMALL_COUNT` iterations for a loop of run-time count (the whole model's:
    # `whole` plans only, NaN otherwise)
    as_given_small: tuple[float, ...] = ()
    total_small: float = math.nan

    @classmethod
    def of(cls, model: ir.Model, whole: bool = True) -> RegionPlan:
        """The plan of `model`. `whole=False` (the default target, which lowers every region
        and only reports the costlier ones: `costlier`, `reported`) costs the regions only:
        no `total` (NaN), and no `walk` of the model to find its nodes in a copy (`frozen`)."""
        regions = find_regions(model)
        if not whole:
            owned = {node for region in regions for node in region.nodes}
            costs, small = node_costs_both(model, counted=owned.__contains__)
            as_given, as_given_small = _both_totals(model, regions, costs, small)
            return cls((), (), tuple(regions), tuple(as_given), math.nan, tuple(as_given_small))
        costs, small = node_costs_both(model)
        as_given, as_given_small = _both_totals(model, regions, costs, small)
        walk = tuple(iter_all_nodes(model))
        kinds = tuple((node.domain, node.op_type) for node in walk)
        return cls(
            walk,
            kinds,
            tuple(regions),
            tuple(as_given),
            sum(costs.values()),
            tuple(as_given_small),
            sum(small.values()),
        )

    def counted(self, origins: Mapping[ir.Node, ir.Node]) -> Callable[[ir.Node], bool]:
        """Whether a node of this plan's model after lowering counts for a region, for
        `node_costs(counted=...)`: the node it came from (`origins`), or itself, is one of a
        region's (asked of main-graph nodes only, which have no holder to count for)."""
        owned = {node for region in self.regions for node in region.nodes}
        return lambda node: origins.get(node, node) in owned

    def estimates(
        self, lowered: ir.Model, origins: Mapping[ir.Node, ir.Node], costs: Mapping[ir.Node, float]
    ) -> list[RegionCost]:
        """Every region's two estimates, in whole launches: as given, and in `lowered` (this
        plan's model after lowering, whose per-node `costs` are given)."""
        after = region_costs(lowered, list(self.regions), costs, origins)
        return [
            RegionCost(index, round(before), round(now))
            for index, (before, now) in enumerate(zip(self.as_given, after, strict=True))
        ]

    def costlier(
        self,
        lowered: ir.Model,
        origins: Mapping[ir.Node, ir.Node],
        costs: Mapping[ir.Node, float],
        small: Mapping[ir.Node, float] | None = None,
    ) -> list[RegionCost]:
        """The regions that cost more lowered than as given, in whole launches; with `small`
        (the per-node costs of `lowered` with `SMALL_COUNT` iterations, for a plan that has
        them), by the product of the two estimates (`RegionCost.lowered_costs_more`)."""
        if small is not None and self.as_given_small:
            now, now_small = _both_totals(lowered, list(self.regions), costs, small, origins)
            found = [
                RegionCost(index, round(before), round(after), round(before_small), round(later))
                for index, (before, after, before_small, later) in enumerate(
                    zip(self.as_given, now, self.as_given_small, now_small, strict=True)
                )
            ]
        else:
            found = self.estimates(lowered, origins, costs)
        return [cost for cost in found if cost.lowered_costs_more]

    def reported(
        self,
        kept: list[RegionCost],
        label: Callable[[ir.Node], str],
        graph_of: Mapping[ir.Node, str],
        walk: tuple[ir.Node, ...] | None = None,
    ) -> list[KeptRegion]:
        """The `kept` regions as the report names them, by their first sequence node (in
        `walk`, the same model prepared again, when given)."""
        position = {node: index for index, node in enumerate(self.walk)} if walk is not None else {}
        regions = []
        for cost in kept:
            region = self.regions[cost.index]
            anchor = region.sites[0] if walk is None else walk[position[region.sites[0]]]
            regions.append(
                KeptRegion(
                    graph_of.get(anchor, "main"),
                    label(anchor),
                    anchor.op_type,
                    len(region.sites),
                    cost.as_given,
                    cost.lowered,
                    cost.as_given_small,
                    cost.lowered_small,
                )
            )
        return regions

    def frozen(
        self,
        kept: list[RegionCost],
        fresh: ir.Model,
        label: Callable[[ir.Node], str],
        graph_of: Mapping[ir.Node, str],
    ) -> tuple[dict[ir.Node, str], list[KeptRegion]] | None:
        """The nodes of `fresh` (this plan's model loaded and prepared again) that belong to
        the `kept` regions, each with the reason it is kept, and the regions for the report
        (`graph_of` gives the graph path of a sequence node of `fresh`); None when `fresh` is
        not the same graph (then the caller keeps the whole original)."""
        walk = tuple(iter_all_nodes(fresh))
        same = len(walk) == len(self.kinds) and all(
            (node.domain, node.op_type) == kind for node, kind in zip(walk, self.kinds, strict=True)
        )
        if not same:
            return None
        position = {node: index for index, node in enumerate(self.walk)}
        frozen: dict[ir.Node, str] = {}
        for cost in kept:
            region = self.regions[cost.index]
            anchor = walk[position[region.sites[0]]]
            headline = (
                f"{FROZEN_RULE}: kept as given for speed: its region's tensor form costs more "
                "(--target onnxruntime)"
            )
            member = (
                f"{FROZEN_RULE}: kept as given for speed with the region of {anchor.op_type} "
                f"'{label(anchor)}'"
            )
            for node in sorted(region.nodes, key=position.__getitem__):
                mine = walk[position[node]]
                frozen[mine] = headline if mine is anchor else member
        return frozen, self.reported(kept, label, graph_of, walk)


def _both_totals(
    model: ir.Model,
    regions: list[Region],
    costs: Mapping[ir.Node, float],
    small: Mapping[ir.Node, float],
    origins: Mapping[ir.Node, ir.Node] | None = None,
) -> tuple[list[float], list[float]]:
    """Each region's cost at both counts (`region_costs`), in one walk; one sum when the two
    estimates are one (`node_costs_both` found no count to guess)."""
    if small is costs:
        (totals,) = region_totals(model, regions, [costs], origins)
        return totals, list(totals)
    totals, totals_small = region_totals(model, regions, [costs, small], origins)
    return totals, totals_small


def relative_cost(plan: RegionPlan, cost: float, cost_small: float) -> float:
    """A form estimated at `cost` launches (`cost_small` with `SMALL_COUNT` iterations)
    relative to the original (`plan`'s model as given): the geometric mean of the two ratios
    (the first alone for a plan without the estimate on small inputs)."""
    ratio = cost / plan.total if plan.total > 0 else 1.0
    if math.isnan(plan.total_small):
        return ratio
    small = cost_small / plan.total_small if plan.total_small > 0 else 1.0
    return math.sqrt(ratio * small)
