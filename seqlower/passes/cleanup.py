"""Remove what lowering left unused: dead nodes (subgraphs included), values a Loop carries and
If outputs that nothing needs, static shape arithmetic
(folded into constants), Transposes of constant weights (folded into the weight), Casts to the
type their input has, arithmetic that changes nothing (x + 0, the sign correction of the floor
division of an index) or adds a negated term (a + i * -1, as a - i), Unsqueezes that
broadcasting makes anyway, Concats of one input, reads of what a
cut of the last rows left, Unsqueezes whose leading axis the operators before can make, a
vector's length read from its Shape (its Size), minimums
of a value and the largest int64 (the value), chains that only add, drop or move axes of one
(at most a Squeeze and an Unsqueeze), loop-invariant operators (moved out of Loop and
Scan bodies), operators read in one If branch only (moved into it), unused initializers and
functions, Reshapes to the shape their input has, nodes computing what an earlier node of their
graph computes; forget the dim names that shape inference made up. Nodes that stay are not touched
(their unused optional outputs and trailing empty inputs are theirs)."""

from __future__ import annotations

__all__ = ["CleanupPass", "forget_inferred_dim_names", "remove_unused_initializers"]

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedFunctionsPass

from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.broadcast_unsqueeze import drop_broadcast_unsqueezes
from seqlower.passes.census import OpCensus
from seqlower.passes.dead_carried import remove_dead_carried
from seqlower.passes.dead_code import remove_dead_nodes
from seqlower.passes.dim_reads import read_dims_alike
from seqlower.passes.double_negation import fold_double_negations
from seqlower.passes.duplicate_nodes import merge_duplicate_nodes
from seqlower.passes.elementwise_shapes import fold_elementwise_shapes
from seqlower.passes.empty_reshapes import fold_empty_reshapes
from seqlower.passes.expanded_shapes import fold_expanded_shapes
from seqlower.passes.floor_division import fold_floor_divisions
from seqlower.passes.fold_shapes import fold_static_shapes
from seqlower.passes.fold_transpose import fold_constant_transposes
from seqlower.passes.hoist_invariants import hoist_loop_invariants
from seqlower.passes.identity_arithmetic import ARITHMETIC, remove_identity_arithmetic
from seqlower.passes.index_vectors import fold_index_vectors
from seqlower.passes.integer_ceils import fold_integer_ceils
from seqlower.passes.negated_terms import fold_negated_terms
from seqlower.passes.noop_casts import remove_noop_casts
from seqlower.passes.normalize import infer_shapes
from seqlower.passes.range_of_range import fold_ranges_of_ranges
from seqlower.passes.region_inference import forget_stamp
from seqlower.passes.row_axes import fold_row_axes
from seqlower.passes.same_shape_reshapes import remove_same_shape_reshapes
from seqlower.passes.scattered_rows import fold_scattered_rows
from seqlower.passes.single_concat import flatten_nested_concats, remove_single_concats
from seqlower.passes.sink_into_branches import sink_into_branches
from seqlower.passes.stacked_reads import fold_stacked_reads
from seqlower.passes.trimmed_reads import fold_trimmed_reads
from seqlower.passes.trivial_min import fold_trivial_mins
from seqlower.passes.unit_axes import UNIT_AXIS_OPS, fold_unit_axes
from seqlower.passes.vector_lengths import fold_vector_lengths


def remove_unused_initializers(model: ir.Model) -> bool:
    """Drop main-graph initializers that nothing reads (one that is also a graph input or
    output is part of the interface and stays)."""
    graph = model.graph
    interface = {*graph.inputs, *graph.outputs}
    unused = [
        name
        for name, value in graph.initializers.items()
        if not value.uses() and value not in interface
    ]
    for name in unused:
        del graph.initializers[name]
    return bool(unused)


class CleanupPass(ir.passes.InPlacePass):
    """Dead nodes, then the values Loops carry and If outputs that nothing needs
    (`dead_carried`; `carried_removed`, and `replaced` maps each rebuilt Loop or If to the node
    it replaces), nodes computing what an earlier node of their graph computes merged into it
    (`duplicate_nodes`; `duplicates_merged`, after the folds and before hoisting, then row axes
    and index vectors again) and
    Reshapes to their input's shape removed (`same_shape_reshapes`; `reshapes_removed`, before
    and after the folds), static shape
    arithmetic folded (`fold_shapes`; `shapes_folded` counts the nodes),
    the minimum of a value and the largest int64 replaced by the value (`trivial_min`;
    `mins_folded`), a Reshape of a tensor that holds nothing to a proved shape made a
    ConstantOfShape and the Shape of an Expand that only broadcasts read from its target
    (`empty_reshapes`, `expanded_shapes`; `empties_folded`; the static shapes folded again
    after them), a Shape of an elementwise
    operator with an operand of unit dims read from its other operand and a dim gathered from
    a whole Shape read as the graph's Shapes of one entry read it, so that the merge joins
    them (`elementwise_shapes`, `dim_reads`; `dims_alike`), index vectors built from their
    pieces (`index_vectors`; `vectors_built`),
    Transposes of constant weights folded (`fold_transpose`; `folded` counts them), Casts to the
    type they have removed (`noop_casts`; `casts_removed`), arithmetic that changes nothing removed
    (`identity_arithmetic`) with the sign correction of a floor division whose dividend is never
    negative (`floor_division`; both counted in `identities_removed`), `a + i * -1` made `a - i`
    and Unsqueezes that broadcasting makes anyway removed (`negated_terms`,
    `broadcast_unsqueeze`; `negations_folded`),
    Concats of one input removed and Concats read only by a Concat on the same axis joined into it
    (`single_concat`; `concats_removed`), reads and cuts of a tensor whose last rows were cut made
    on the tensor itself (`trimmed_reads`; `trims_folded`), reads at a constant index of a stack
    made the stacked value (`stacked_reads`; `stacked_reads`), chains of Unsqueezes, Squeezes,
    Transposes and reductions that only add, drop or move axes of one made at most a Squeeze and
    an Unsqueeze, Shapes of them read their source, and Not(Not(x)) read as x (`unit_axes`,
    `double_negation`; both counted in `unit_axes`), a Range from 0 by 1 over the length of such
    a Range made that Range and a read of it at entries compressed from it made those entries
    (`range_of_range`; `ranges_folded`), Unsqueezes
    on axis 0 whose axis the producers can make folded into them (`row_axes`; `rows_folded`),
    the length of a vector read from its Shape made its Size (`vector_lengths`;
    `lengths_folded`),
    loop-invariant operators moved out of Loop and Scan bodies (`hoist_invariants`; `hoisted`),
    operators read in one If branch only moved into it (`sink_into_branches`; `sunk`), then
    unused initializers and functions.
    `dead_nodes=False` skips the walk for dead nodes when the caller knows there are none (after
    a lowering fixpoint). `fold_shapes=False` folds no shape (for a model whose declared
    intermediate shapes are not all trusted)."""

    def __init__(self, *, dead_nodes: bool = True, fold_shapes: bool = True) -> None:
        super().__init__()
        self.dead_nodes = dead_nodes
        self.fold_shapes = fold_shapes
        self.folded = 0
        self.shapes_folded = 0
        self.casts_removed = 0
        self.vectors_built = 0
        self.hoisted = 0
        self.mins_folded = 0
        self.empties_folded = 0
        self.dims_alike = 0
        self.concats_removed = 0
        self.identities_removed = 0
        self.rows_folded = 0
        self.trims_folded = 0
        self.stacked_reads = 0
        self.unit_axes = 0
        self.ranges_folded = 0
        self.scatters_folded = 0
        self.negations_folded = 0
        self.sunk = 0
        self.carried_removed = 0
        self.reshapes_removed = 0
        self.duplicates_merged = 0
        self.lengths_folded = 0
        # True when no node changed after the merge: merging again would find nothing (the
        # nodes are merged in graph order, each into the first equal one, so one merge leaves
        # no two nodes of the same key that it could merge)
        self.merged_last = False
        # each Loop or If rebuilt without the outputs nothing needs -> the node it replaces
        self.replaced: dict[ir.Node, ir.Node] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        forget_stamp(model)  # dim names are forgotten below: shapes are no longer inference's
        modified = remove_dead_nodes(model) if self.dead_nodes else False
        # each small pass below looks for its own operators: skipped when there are none
        census = OpCensus(model)
        self.replaced = {}
        self.carried_removed = census.run(
            {"Loop", "If"}, lambda m: remove_dead_carried(m, self.replaced), model
        )
        modified |= bool(self.carried_removed)
        if self.fold_shapes:
            self.reshapes_removed = remove_same_shape_reshapes(model)
        if self.reshapes_removed:  # what read one reads its input: inference may say more
            census.changed()
            modified = True
            infer_shapes(model)
            forget_stamp(model)
        self.shapes_folded = _fold_shape_rounds(model, census) if self.fold_shapes else 0
        modified |= bool(self.shapes_folded)
        # before the index vectors: they would rebuild the Concat the minimum reads
        self.mins_folded = census.run({"ReduceMin"}, fold_trivial_mins, model)
        modified |= bool(self.mins_folded)
        if self.fold_shapes:
            # a merge into a tensor that holds nothing: a ConstantOfShape; then the Shape of
            # what it merged, an Expand that only broadcasts, read from the Expand's target
            self.empties_folded = census.run({"Reshape"}, fold_empty_reshapes, model)
            self.empties_folded += census.run({"Shape"}, fold_expanded_shapes, model)
            if self.empties_folded:
                census.changed()
                modified = True
                # the ConstantOfShape is declared its shape: the Shape of it, and what reads
                # that, are now static (a second lowering would fold them)
                self.shapes_folded += _fold_shape_rounds(model, census)
        if self.fold_shapes:
            self.vectors_built = fold_index_vectors(model)
            if self.vectors_built:  # the shapes a second lowering infers for what was built
                census.changed()
                infer_shapes(model)
                forget_stamp(model)
            modified |= bool(self.vectors_built)
        self.folded = census.run({"Transpose"}, fold_constant_transposes, model)
        modified |= bool(self.folded)
        self.casts_removed = census.run({"Cast"}, remove_noop_casts, model)
        modified |= bool(self.casts_removed)
        # lowering's own forms may add 0 (a length counted from an initial 0)
        self.identities_removed = census.run(ARITHMETIC, remove_identity_arithmetic, model)
        # TorchScript's floor division of an index: a Div where the dividend is never negative
        self.identities_removed += census.run({"Where"}, fold_floor_divisions, model)
        # TorchScript's trip count of a range: the ceiling of a float made from an integer
        self.identities_removed += census.run({"Ceil"}, fold_integer_ceils, model)
        modified |= bool(self.identities_removed)
        self.negations_folded = census.run({"Add"}, fold_negated_terms, model)
        self.concats_removed = census.run({"Concat"}, remove_single_concats, model) + census.run(
            {"Concat"}, flatten_nested_concats, model
        )
        modified |= bool(self.concats_removed)
        # after the concats: a Concat of one Unsqueeze removed lets a broadcast read its source
        self.negations_folded += census.run({"Unsqueeze"}, drop_broadcast_unsqueezes, model)
        modified |= bool(self.negations_folded)
        # a read at a constant index of a stack is the value stacked there
        self.stacked_reads = census.run({"Gather"}, fold_stacked_reads, model)
        modified |= bool(self.stacked_reads)
        self.trims_folded = census.run({"Gather", "Slice"}, fold_trimmed_reads, model)
        modified |= bool(self.trims_folded)
        # chains that only add, drop or move axes of one: at most a Squeeze and an Unsqueeze
        self.unit_axes = census.run(UNIT_AXIS_OPS, fold_unit_axes, model)
        self.unit_axes += census.run({"Not"}, fold_double_negations, model)
        modified |= bool(self.unit_axes)
        # a Range from 0 by 1 over the length of such a Range, or read at its own entries
        self.ranges_folded = census.run({"Range"}, fold_ranges_of_ranges, model)
        modified |= bool(self.ranges_folded)
        # rows scattered to a mask's places and compressed back by it: the rows
        self.scatters_folded = census.run({"Reshape", "Compress"}, fold_scattered_rows, model)
        modified |= bool(self.scatters_folded)
        self.rows_folded = census.run({"Unsqueeze"}, fold_row_axes, model)
        modified |= bool(self.rows_folded)
        if self.rows_folded and self.fold_shapes:
            # a read at a constant index made a read of one row (`Gather(v, [0])`): of a vector
            # of one element, that is the vector itself, which a second lowering would see
            self.vectors_built += fold_index_vectors(model)
            # the fold declared a leading 1 on what it changed; inference may not prove it (a
            # row read from a Loop's result, which ONNX gives no shape): the shapes a second
            # lowering infers
            infer_shapes(model)
            forget_stamp(model)
        if self.fold_shapes:
            # one dim read one way, for the merge of duplicates below to join (after the
            # folds above: the Shapes of Unsqueezes read their sources, an elementwise one)
            self.dims_alike = census.run({"Shape"}, fold_elementwise_shapes, model)
            self.dims_alike += census.run({"Gather"}, read_dims_alike, model)
            modified |= bool(self.dims_alike)
        # after the folds above, so that they see each reader's own copy (a row axis is made
        # by the producer of one reader only), and before hoisting, so that copies in a loop
        # body are merged there (hoisted, they are read from around the body and stay apart);
        # what merging leaves of row axes and index vectors is made again
        self.duplicates_merged = merge_duplicate_nodes(model)
        modified |= bool(self.duplicates_merged)
        # the nodes changed after the merge (`merged_last`)
        changed_after_merge = 0
        if self.duplicates_merged:
            census.changed()
            rows_after = census.run({"Unsqueeze"}, fold_row_axes, model)
            self.rows_folded += rows_after
            vectors_after = fold_index_vectors(model) if self.fold_shapes else 0
            self.vectors_built += vectors_after
            if rows_after and self.fold_shapes:  # as above: what a second lowering infers
                infer_shapes(model)
                forget_stamp(model)
            changed_after_merge += rows_after + vectors_after
        # a vector's length read from its Shape: its Size (after the index vectors and the
        # merge, which read such Shapes; before hoisting and sinking, which move the Size)
        self.lengths_folded = (
            census.run({"Shape"}, fold_vector_lengths, model) if self.fold_shapes else 0
        )
        modified |= bool(self.lengths_folded)
        self.hoisted = census.run({"Loop", "Scan"}, hoist_loop_invariants, model)
        modified |= bool(self.hoisted)
        self.sunk = census.run({"If"}, sink_into_branches, model)
        modified |= bool(self.sunk)
        late = census.run({"Reshape"}, remove_same_shape_reshapes, model) if self.fold_shapes else 0
        if late:
            self.reshapes_removed += late
            modified = True
            infer_shapes(model)
            forget_stamp(model)
        # again: a Loop carry or If output read only by what the folds made a constant
        late_carried = census.run(
            {"Loop", "If"}, lambda m: remove_dead_carried(m, self.replaced), model
        )
        if late_carried:
            self.carried_removed += late_carried
            modified = True
            for made, node in list(self.replaced.items()):  # rebuilt twice: the first's origin
                while node in self.replaced:
                    node = self.replaced[node]
                self.replaced[made] = node
        # the Shape of an Expand that only broadcasts, again: the merge may have made such a
        # pair, and the late inference given the Expand's input the shape the fold needs (a
        # second lowering would fold it)
        late_shapes = census.run({"Shape"}, fold_expanded_shapes, model) if self.fold_shapes else 0
        self.empties_folded += late_shapes
        modified |= bool(late_shapes)
        changed_after_merge += self.lengths_folded + self.hoisted + self.sunk + late + late_carried
        changed_after_merge += late_shapes
        # what follows changes no node: initializers nothing reads, functions nothing calls,
        # the names of dims
        self.merged_last = not changed_after_merge
        modified |= remove_unused_initializers(model)
        if model.functions:
            modified |= RemoveUnusedFunctionsPass()(model).modified
        modified |= forget_inferred_dim_names(model)
        return ir.passes.PassResult(model, modified)


_FOLD_ROUNDS = 3


def _fold_shape_rounds(model: ir.Model, census: OpCensus) -> int:
    """Fold static shape arithmetic (`fold_shapes`) until nothing is left or `_FOLD_ROUNDS`
    rounds, inferring the shapes again after each round that folded; returns how many nodes."""
    total = 0
    for _ in range(_FOLD_ROUNDS):
        folded = fold_static_shapes(model)
        if not folded:
            break
        census.changed()
        total += folded
        # constants where shape arithmetic was: inference can now say more (a carried
        # value's shape, say); infer again so that lowering the result changes nothing
        infer_shapes(model)
        forget_stamp(model)
    return total


def forget_inferred_dim_names(model: ir.Model) -> bool:
    """ONNX shape inference names unknown dims `unk__<n>`, numbered after the names already in
    the model; kept, they would make a second lowering number them differently (not
    idempotent). They become anonymous dims; the model inputs keep theirs.

    The same walk reads each value's `meta` and `metadata_props`: onnx_ir creates them (empty)
    the first time they are read, and its serializer reads them. Made here, inside the
    pipeline's relaxed garbage collector (`pipeline.collector_relaxed`), rather than during the
    caller's save, where 255k new objects at 100k nodes set off hundreds of collections, full
    ones included (a second and more)."""
    modified = False
    main_inputs = set(model.graph.inputs)
    # values share shape objects (see normalize._merge_shapes): each is looked at once; the
    # entry keeps the shape alive so that its id is not reused
    anonymous: dict[int, tuple[ir.Shape, ir.Shape | None]] = {}
    for graph in list(iter_all_graphs(model)):
        values = [
            *graph.inputs,
            *graph.outputs,
            *(o for node in graph_nodes(graph) for o in node.outputs),
        ]
        for value in values:
            value.meta, value.metadata_props  # noqa: B018 (created now; see the docstring)
            shape = value.shape
            if shape is None or value in main_inputs:
                continue
            if id(shape) not in anonymous:
                dims = list(shape)
                new = None
                if any(_inferred_name(d) for d in dims):
                    new = ir.Shape([None if _inferred_name(d) else d for d in dims], frozen=True)
                anonymous[id(shape)] = (shape, new)
            new = anonymous[id(shape)][1]
            if new is not None:
                value.shape = new
                modified = True
    return modified


def _inferred_name(dim: object) -> bool:
    return isinstance(dim, ir.SymbolicDim) and (dim.value or "").startswith("unk__")
