"""Prepare a model for lowering: resolve ambiguous forms, then derive shapes by inference.

    SplitToSequence(x, 1, keepdims=0) -> SplitToSequence(x, keepdims=0)     (onnxruntime's reading)
    SplitToSequence(x, s, keepdims=0) -> SplitToSequence(x, s, keepdims=1)  (the spec's reading)

docs/design.md, "Where the specification and onnxruntime disagree", item 1: the spec ignores
keepdims when `split` is given, onnxruntime squeezes for a scalar split of 1 (and fails for a
larger one).

Declared shapes of intermediate values can lie in real exports (trap 10), so they are cleared and
shape inference recomputes them from the graph inputs and constants. Symbolic input dims named in
`Options.dims` are given their sizes first (`BindDimsPass`).
"""

from __future__ import annotations

__all__ = [
    "SHAPE_ARGUMENTS",
    "NormalizePass",
    "SplitReading",
    "infer_shapes",
    "resolve_split_keepdims",
]

import collections
import dataclasses
import logging
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.analysis.loop_memo import LoopMemo
from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs, subgraphs
from seqlower.options import Options
from seqlower.passes import chunked_inference, region_inference
from seqlower.passes.bind_dims import BindDimsPass
from seqlower.passes.broadcast_unsqueeze import drop_broadcast_unsqueezes
from seqlower.passes.carried_sequences import correct_loop_built_sequences
from seqlower.passes.carried_shapes import settle_carried_shapes
from seqlower.passes.census import OpCensus
from seqlower.passes.data_prop_bound import data_prop_is_bounded
from seqlower.passes.declared_ranks import declare_ranks
from seqlower.passes.identity_arithmetic import ARITHMETIC, remove_identity_arithmetic
from seqlower.passes.inference_copy import call_with_copy
from seqlower.passes.inferred_types import (
    TypeReader,
    graph_types,
    merge_graph,
    proto_subgraphs,
)
from seqlower.passes.negated_terms import fold_negated_terms
from seqlower.passes.noop_casts import remove_noop_casts
from seqlower.passes.shared_empty_lists import unshare_empty_lists

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SplitReading:
    """A SplitToSequence with a scalar split and keepdims=0, and how it was read: `squeezed`
    as onnxruntime and PyTorch read a split of 1 (else keepdims ignored, as the specification
    says); `counted_only` when only SequenceLength reads it (both readings give one count);
    `readers`, the nodes that read it then (those gone after lowering were rewritten)."""

    node: ir.Node
    chunk: int
    squeezed: bool
    counted_only: bool
    readers: tuple[ir.Node, ...] = ()

    def readers_rewritten(self) -> bool:
        """Whether a node that read the split has been rewritten (is no longer in a graph)."""
        return any(reader.graph is None for reader in self.readers)


def _counted_only(node: ir.Node) -> bool:
    output = node.outputs[0]
    readers = output.consumers()
    return (
        bool(readers)
        and not output.is_graph_output()
        and all(r.op_type == "SequenceLength" and r.domain == "" for r in readers)
    )


class NormalizePass(ir.passes.InPlacePass):
    """Resolve the scalar-split/keepdims ambiguity and recompute shapes by inference."""

    def __init__(self, options: Options | None = None) -> None:
        super().__init__()
        self.options = options or Options()
        self.warnings: list[str] = []
        # the scalar-split/keepdims=0 nodes resolved, for the report to warn about
        self.split_readings: list[SplitReading] = []
        self.bind_dims = BindDimsPass(self.options.dims)  # `.bound`: which inputs changed

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = self.bind_dims(model).modified | self._resolve_split_keepdims(model)
        infer_shapes(model)
        # before any estimate: the form as given and the lowered one are costed without them
        stamp = region_inference.current_stamp(model)
        census = OpCensus(model)  # each pass below looks for its own operators
        if (
            census.run({"Cast"}, remove_noop_casts, model)
            + census.run(ARITHMETIC, remove_identity_arithmetic, model)
            + census.run({"Add"}, fold_negated_terms, model)
            + census.run({"Unsqueeze"}, drop_broadcast_unsqueezes, model)
            + census.run({"SequenceEmpty"}, unshare_empty_lists, model)
        ):
            modified = True
            if stamp is not None:  # removing them changed no shape
                region_inference.write_stamp(model, stamp.carriers)
        return ir.passes.PassResult(model, modified)

    def _resolve_split_keepdims(self, model: ir.Model) -> bool:
        readings = resolve_split_keepdims(model, self.options.split_keepdims)
        self.split_readings.extend(readings)
        return bool(readings)


def resolve_split_keepdims(model: ir.Model, reading: str) -> list[SplitReading]:
    """Rewrite every SplitToSequence with a constant scalar `split` and keepdims=0 into the form
    whose meaning the ONNX specification and onnxruntime agree on, as `reading` says
    ("onnxruntime" or "spec"):

        SplitToSequence(x, 1 scalar, keepdims=0)  ->  SplitToSequence(x, keepdims=0)   # squeeze
        SplitToSequence(x, k scalar, keepdims=0)  ->  SplitToSequence(x, k, keepdims=1)

    so that ONNX shape inference (which follows the specification) types what reads them as
    they run. Returns what was resolved, for the report to warn about."""
    values = StaticValues()
    readings: list[SplitReading] = []
    for graph in list(iter_all_graphs(model)):
        for node in graph_nodes(graph):
            if node.op_type != "SplitToSequence" or node.domain != "":
                continue
            split = node.inputs[1] if len(node.inputs) > 1 else None
            if split is None or node.attributes.get_int("keepdims", 1) != 0:
                continue
            # The declared shape of the split may be missing before inference (a Constant
            # node's output in an export): the static content says whether it is a scalar.
            array = values.get(split)
            chunk = values.get_int(split)
            if array is None or array.ndim != 0 or chunk is None:
                continue
            squeezed = chunk == 1 and reading == "onnxruntime"
            if squeezed:
                node.resize_inputs(1)  # no split, keepdims=0: every runtime squeezes
            else:
                node.attributes["keepdims"] = ir.AttrInt64("keepdims", 1)
            readers = tuple(dict.fromkeys(node.outputs[0].consumers()))
            readings.append(SplitReading(node, chunk, squeezed, _counted_only(node), readers))
    return readings


def infer_shapes(model: ir.Model) -> None:
    """Clear the declared shapes of every value but the model inputs, then run ONNX shape
    inference (with data propagation) and take its shapes. Types are kept.

    ONNX inference forgets the shapes of loop-carried tensors (they may change between
    iterations). Where `LoopShapes` proves that a carried tensor keeps the shape of its initial
    value, that shape is declared on the body input and inference runs again, so that it reaches
    the body's values and the Loop's outputs (a round per level of nested loops).

    When no such round can matter to what a lowering rewrites later (no Loop, no shape argument
    left that seqlower could fold, no cut that data propagation could not cross), a
    `region_inference.ShapeStamp` is written on the model: the lowering may then infer only
    the nodes it rewrote.

    The contents of shape arguments folded by an earlier inference of the model are given at
    once; one that no longer follows from the model's shapes (a rewrite lost the shapes it came
    from) is forgotten and the shapes inferred again, so that the shapes declared are those a
    lowering of the output would infer.

    Last, the ranks that inference could not give (in loop bodies, of elements read from lists)
    are declared (`declared_ranks`); the stamp then goes (inference alone would not give them)."""
    _infer_all_shapes(model)
    if declare_ranks(model):
        region_inference.forget_stamp(model)


def _infer_all_shapes(model: ir.Model) -> None:
    _infer_with_folded(model)
    # a content folded before a rewrite may be true and yet no longer follow from the model:
    # the shapes it came from were lost (a list's elements, now rows a Loop grows by Concat,
    # whose dims ONNX inference does not carry). A second lowering, which starts with nothing
    # folded, could not give the shapes it gave: it is forgotten, and the shapes inferred again
    while _drop_underivable_folded(model):
        _infer_with_folded(model)


def _drop_underivable_folded(model: ir.Model) -> bool:
    """Forget each remembered content (`FOLDED_KEY`) of a value still read as a shape argument
    that `StaticValues` cannot compute from the model's current shapes; True when one went."""
    folded: dict[str, np.ndarray] = model.meta.get(FOLDED_KEY, {})
    if not folded:
        return False
    values = StaticValues()
    underivable: set[str] = set()
    for graph in iter_all_graphs(model):
        for node in graph_nodes(graph):
            if node.domain != "" or node.op_type not in SHAPE_ARGUMENTS:
                continue
            for i in SHAPE_ARGUMENTS[node.op_type]:
                value = node.inputs[i] if i < len(node.inputs) else None
                if value is not None and value.name in folded and values.get(value) is None:
                    underivable.add(value.name)
    if not underivable:
        return False
    model.meta[FOLDED_KEY] = {k: v for k, v in folded.items() if k not in underivable}
    return True


def _infer_with_folded(model: ir.Model) -> None:
    region_inference.forget_stamp(model)
    loops, shape_readers, carriers = _clear_shapes(model)
    for loop in loops:
        _reset_loop_signature(loop.attributes["body"].as_graph())
    # the shape arguments an earlier inference of this model folded: a value's content does
    # not change under a rewrite, so they are given at once, not found again round by round
    folded: dict[str, np.ndarray] = dict(model.meta.get(FOLDED_KEY, {}))
    exact = _infer_and_merge(model, folded, carriers)
    if exact is None:
        return
    builds_lists = any(isinstance(out.type, ir.SequenceType) for n in loops for out in n.outputs)

    def infer_again(folded: dict[str, np.ndarray]) -> bool | None:
        _clear_shapes(model)
        exact = _infer_and_merge(model, folded, carriers)
        if exact is not None and builds_lists:
            correct_loop_built_sequences(model)
        return exact

    if builds_lists:
        correct_loop_built_sequences(model)
    for _ in range(_MAX_ROUNDS):
        declared = _declare_invariant_carried_shapes(loops)
        found, pending = _static_arguments(shape_readers)
        if not declared and found.keys() <= folded.keys():
            if exact and not loops and not pending:
                region_inference.write_stamp(model, carriers)
            break
        folded.update(found)
        model.meta[FOLDED_KEY] = dict(folded)
        exact = infer_again(folded)
        if exact is None:
            return
    nested = any(loop.graph is not model.graph for loop in loops)

    def infer_settling() -> bool | None:
        """`infer_again`, then, where a Loop is nested in another's body, its carried
        outputs declared and inferred once more: ONNX gives them no shape, so an outer body
        reading them (a list built by an inner loop, as tensors) never gives back its
        carried shapes."""
        exact = infer_again(folded)
        if exact is not None and nested and _declare_carried_outputs(loops):
            exact = _infer_and_merge(model, folded, carriers)
            if exact is not None and builds_lists:
                correct_loop_built_sequences(model)
        return exact

    if loops:
        settle_carried_shapes(loops, infer_settling)
        # not cleared first: what reads a Loop's result takes its rank now
        declared = _declare_carried_outputs(loops)
        if declared and _infer_and_merge(model, folded, carriers) is not None and builds_lists:
            correct_loop_built_sequences(model)


def _declare_carried_outputs(loops: list[ir.Node]) -> bool:
    """ONNX inference gives the tensors a Loop carries out no shape at all. Each is its
    initial value (no iteration) or the body's last output, so it has the dims both declare
    alike (the body's output is inferred from its input, whose shape is proved by induction or
    unknown). True when a shape was declared on a value that something reads (only then is
    inferring again worth it)."""
    declared = False
    for node in loops:
        body = node.attributes["body"].as_graph()
        carried = zip(node.outputs, node.inputs[2:], body.outputs[1:])
        for output, init, body_output in carried:
            if output.shape is not None or not isinstance(output.type, ir.TensorType):
                continue
            if init is None or init.shape is None or body_output.shape is None:
                continue
            if len(init.shape) != len(body_output.shape):
                continue
            output.shape = ir.Shape(
                [a if _same_dim(a, b) else None for a, b in zip(init.shape, body_output.shape)]
            )
            declared = declared or bool(output.uses())
    return declared


def _same_dim(a: int | ir.SymbolicDim, b: int | ir.SymbolicDim) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value and not a.value.startswith("unk__")


def _clear_shapes(model: ir.Model) -> tuple[list[ir.Node], list[ir.Node], list[ir.Node]]:
    """Forget the shape of every node output, in one walk that also finds the Loops (with a
    body), the nodes with an input in `SHAPE_ARGUMENTS`, for the rounds after inference, and
    the main-graph nodes that hold subgraphs."""
    loops: list[ir.Node] = []
    shape_readers: list[ir.Node] = []
    carriers: list[ir.Node] = []
    graphs = [model.graph, *(function.graph for function in model.functions.values())]
    for graph in graphs:  # grows while iterating: every subgraph, parents first
        for node in graph_nodes(graph):
            for output in node.outputs:
                output.shape = None
            if node.attributes.data:
                inner = subgraphs(node)
                if inner:
                    graphs.extend(inner)
                    if graph is model.graph:
                        carriers.append(node)
            if node.domain != "":
                continue
            if node.op_type in SHAPE_ARGUMENTS:
                shape_readers.append(node)
            elif node.op_type == "Loop" and "body" in node.attributes:
                loops.append(node)
                _note_one_element_condition(node.attributes["body"].as_graph())
            elif node.op_type == "SequenceMap" and "body" in node.attributes:
                _forget_element_dims(node.attributes["body"].as_graph())
    return loops, shape_readers, carriers


def _forget_element_dims(body: ir.Graph) -> None:
    """Keep only the rank a SequenceMap body declares for each input: its dims are a claim about
    every element of every list mapped, which an export may get wrong (a dim that is a trip
    count, declared as the size one run had) and onnxruntime does not check. Inference gives
    the dims it can prove from the lists themselves."""
    for value in body.inputs:
        if value.shape is not None:
            value.shape = ir.Shape([None] * len(value.shape))


_ONE_ELEMENT = "seqlower.one_element_condition"


def _note_one_element_condition(body: ir.Graph) -> None:
    """Note, before the body's shapes are cleared, a condition the export declares with one
    dim both in and out of the body (`len(out) < n` with `n` of shape [1]): it stays so
    declared (`_reset_loop_signature`), as the Loop's condition input and the body's output
    are."""
    if len(body.inputs) < 2 or not body.outputs:
        return
    declared = (body.inputs[1].shape, body.outputs[0].shape)
    if all(shape is not None and len(shape) == 1 for shape in declared):
        body.inputs[1].meta[_ONE_ELEMENT] = True


_MAX_ROUNDS = 3
FOLDED_KEY = "seqlower.folded_shape_arguments"  # in `ir.Model.meta`: name -> content


# Inputs whose content (not only shape) decides the output shape, by operator.
SHAPE_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "Slice": (1, 2, 3, 4),
    "Reshape": (1,),
    "Expand": (1,),
    "ConstantOfShape": (0,),
    "Tile": (1,),
    "Range": (0, 1, 2),
    "Split": (1,),
    "SplitToSequence": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Pad": (1, 2, 3),
    "Resize": (1, 2, 3),
    "TopK": (1,),
    "OneHot": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceProd": (1,),
}


def _static_arguments(shape_readers: list[ir.Node]) -> tuple[dict[str, np.ndarray], bool]:
    """Small static integer tensors that seqlower folds but ONNX inference does not (it reads
    only constants for a Slice's bounds, an Expand's shape...), computed by non-Constant nodes,
    and read as a shape argument by one of `shape_readers` whose output shape is not fully
    known: inference gets them as constants. Also says whether such an argument was found
    that is not static (a rewrite might make it static later)."""
    values = StaticValues()
    found: dict[str, np.ndarray] = {}
    pending = False
    for node in shape_readers:
        positions = SHAPE_ARGUMENTS[node.op_type]
        if all(_fully_known(output) for output in node.outputs):
            continue
        for value in (node.inputs[i] for i in positions if i < len(node.inputs)):
            producer = value.producer() if value is not None else None
            # inference reads a Constant of the reader's own graph, not one of an outer scope
            if (
                producer is None
                or (producer.op_type == "Constant" and producer.graph is node.graph)
                or len(producer.outputs) != 1
                or value.dtype not in (ir.DataType.INT64, ir.DataType.INT32)  # type: ignore[union-attr]
                or not value.name  # type: ignore[union-attr]
            ):
                continue
            array = values.get(value)
            if array is not None:
                found[value.name] = array  # type: ignore[union-attr, index]
            else:
                pending = True
    return found, pending


def _fully_known(value: ir.Value) -> bool:
    return (
        isinstance(value.type, ir.TensorType)
        and value.shape is not None
        and all(isinstance(d, int) for d in value.shape)
    )


def _infer_and_merge(
    model: ir.Model, folded: dict[str, np.ndarray], carriers: list[ir.Node]
) -> bool | None:
    """Infer and take the shapes; None when inference failed, else whether it was exact (see
    `chunked_inference.infer_in_runs`: with many subgraphs the main graph is cut in runs)."""
    try:
        if len(carriers) > chunked_inference.SUBGRAPH_LIMIT:
            return chunked_inference.infer_in_runs(model, folded)  # linear with many subgraphs

        def infer(proto: onnx.ModelProto) -> onnx.ModelProto:
            if folded:
                chunked_inference.as_constants(proto.graph, folded)
            chunked_inference.hide_overridable_initializers(proto.graph)
            bounded = data_prop_is_bounded(proto.graph)  # see passes/data_prop_bound.py
            return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=bounded)

        # the copy leaves large initializers out (weights are not needed for shapes), as
        # onnx_ir's call_onnx_api does, and reuses the nodes of the last copy
        inferred = call_with_copy(infer, model)
    except Exception as error:  # inference is best effort: unknown shapes only mean less folding
        logger.warning(
            "shape inference failed: %s", str(error).splitlines()[0] if str(error) else error
        )
        return None
    _merge_shapes(model, inferred)
    return True


def _declare_invariant_carried_shapes(loops: list[ir.Node]) -> bool:
    """Declare on each Loop body input the shape of its initial value where the body provably
    keeps it. True when a declaration was added."""
    declared = 0
    # provisional answers last until a declaration changes a shape (each Loop would otherwise
    # walk the same outer values again for each question)
    values = StaticValues(generation=lambda: declared)
    # and what each Loop's analysis found, which the next reads where it derives a shape
    # that Loop carries out (a chain of Loops: each analysed once, not once per Loop after it)
    memo = LoopMemo(values, generation=lambda: declared)
    for node in loops:
        body = node.attributes["body"].as_graph()
        carried = zip(body.inputs[2:], node.inputs[2:])
        undeclared = [(v, init) for v, init in carried if v.shape is None and init is not None]
        if not any(init.shape is not None for _, init in undeclared):
            continue
        invariant = LoopShapes(node, values, memo=memo).invariant_carried()
        for body_input, init in undeclared:
            if body_input in invariant and init.shape is not None:
                body_input.shape = ir.Shape(list(init.shape))
                declared += 1
    return declared > 0


def _reset_loop_signature(body: ir.Graph) -> None:
    """Loop bodies in real exports declare carried shapes that lie; onnxruntime needs the
    iteration number and condition declared as scalars, except a condition of one element
    in and out of the body (`_note_one_element_condition`), declared [1]."""
    for index, value in enumerate(body.inputs):
        value.shape = ir.Shape([]) if index < 2 else None
        if index == 1 and value.meta.get(_ONE_ELEMENT):
            value.shape = ir.Shape([1])


def _merge_shapes(model: ir.Model, inferred: onnx.ModelProto) -> None:
    """Take the inferred types and shapes of values that have none. The proto is read directly
    (deserializing the whole inferred model took half the time of inference on large models)."""
    reader = TypeReader()
    for graph, types in zip(list(iter_all_graphs(model)), _inferred_types(inferred)):
        merge_graph(reader, graph, types)


def _inferred_types(model: onnx.ModelProto) -> Iterator[dict[str, onnx.TypeProto]]:
    """Name -> inferred type for each graph, in the order of `iter_all_graphs`: the main graph,
    the functions, then the subgraphs breadth first."""
    queue: collections.deque[onnx.GraphProto | onnx.FunctionProto] = collections.deque(
        [model.graph, *model.functions]
    )
    while queue:
        graph = queue.popleft()
        yield graph_types(graph)
        for node in graph.node:
            queue.extend(proto_subgraphs(node))
