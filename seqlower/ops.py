"""Names of the ONNX sequence operators and small questions about values and nodes."""

from __future__ import annotations

__all__ = [
    "SEQUENCE_OPS",
    "constant_tensor",
    "graph_nodes",
    "graphs_within",
    "graphs_within_node",
    "has_subgraph",
    "is_sequence_op",
    "is_sequence_value",
    "is_tensor",
    "iter_all_graphs",
    "iter_all_nodes",
    "node_subgraphs",
    "outer_reads",
    "peel_identity",
    "quoted_node",
    "same_dim",
    "subgraphs",
    "uses_through",
]

import collections
from collections.abc import Callable, Iterator

import onnx_ir as ir
import onnx_ir.serde

try:  # the node list under `ir.Graph` (private to onnx_ir: `graph_nodes` checks that it is one)
    from onnx_ir._linked_list import DoublyLinkedSet as _NodeList
except ImportError:  # pragma: no cover - another layout: graphs are walked as onnx_ir walks them
    _NodeList = None  # type: ignore[assignment, misc]

# onnx_ir's own tensor classes, each an `ir.TensorProtocol`. Testing a runtime-checkable
# protocol with `isinstance` lists the protocol's members and reads each of them on the object,
# some 45 microseconds a call on Python 3.11 (4 of the 20 seconds of 10,000 graph outputs).
_TENSOR_CLASSES = (
    ir.Tensor,
    ir.ExternalTensor,
    ir.StringTensor,
    ir.LazyTensor,
    ir.PackedTensor,
    onnx_ir.serde.TensorProtoTensor,
)
_NOT_TENSORS = (type(None), bool, int, float, str, bytes, list, tuple)
# the same, by exact class: onnx_ir's classes are made by typing's protocol metaclass, whose
# `isinstance` costs 1.5 to 2 microseconds a class even for a class that is not a protocol
# (every one of the classes above is tried in turn: 10 us for a None), a set lookup 0.05 us
_TENSOR_TYPES = frozenset(_TENSOR_CLASSES)
_NOT_TENSOR_TYPES = frozenset(_NOT_TENSORS)

SEQUENCE_OPS: frozenset[str] = frozenset(
    {
        "ConcatFromSequence",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SplitToSequence",
    }
)


def constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    """The content of a Constant node's output, or of an initializer that no caller can
    override (one that is not also a graph input), else None."""
    producer = value.producer()
    if producer is not None:
        if producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
            return None
        attr = producer.attributes.get("value")
        tensor = None if attr is None or attr.is_ref() else attr.value
    elif value.is_initializer() and not value.is_graph_input():
        tensor = value.const_value
    else:
        return None
    return tensor if is_tensor(tensor) else None


def is_tensor(obj: object) -> bool:
    """`isinstance(obj, ir.TensorProtocol)`, answered without the protocol's member walk for
    onnx_ir's own tensors and for plain Python values."""
    kind = type(obj)
    if kind in _TENSOR_TYPES:
        return True
    if kind in _NOT_TENSOR_TYPES:
        return False
    if isinstance(obj, _TENSOR_CLASSES):  # a subclass of one
        return True
    if isinstance(obj, _NOT_TENSORS):
        return False
    return isinstance(obj, ir.TensorProtocol)


def same_dim(a: object, b: object) -> bool:
    """Two dims known to be equal: the same number, or one named symbolic dim."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return (
        isinstance(a, ir.SymbolicDim)
        and isinstance(b, ir.SymbolicDim)
        and a.value is not None
        and a.value == b.value
    )


def is_sequence_op(node: ir.Node) -> bool:
    """True for a node of the default domain whose operator is a sequence operator."""
    return node.domain == "" and node.op_type in SEQUENCE_OPS


def is_sequence_value(value: ir.Value | None) -> bool:
    """True when the value's declared type is a sequence (of tensors)."""
    # issubclass, not isinstance: onnx_ir's types derive from a Protocol, whose isinstance
    # check runs in Python (a third of the whole-model walks' time); the answer is the same.
    # Most values are tensors or untyped: answered without the ABC's subclass check (asked
    # 1.4 million times on a 100k-node model)
    if value is None:
        return False
    kind = type(value.type)
    return kind is not ir.TensorType and kind is not _NONE and issubclass(kind, ir.SequenceType)


_NONE = type(None)


def graph_nodes(graph: ir.Graph) -> Iterator[ir.Node]:
    """The nodes of `graph`, in order: what `iter(graph)` gives, mutation during the walk
    included (a node removed is passed over, one inserted after the current one is reached:
    the same links are followed), about four times faster. onnx_ir's own walk checks, per
    node, that the link still belongs to its list (a check that fails only on a corrupt list)
    and reads a property; whole-model walks run dozens of times per run (a million nodes
    walked for a chain of 30,000). Anything but an `ir.Graph` over onnx_ir's node list
    is walked as it walks itself."""
    nodes = getattr(graph, "_nodes", None)
    if _NodeList is None or type(nodes) is not _NodeList:
        yield from graph
        return
    root = nodes._root
    box = root.next
    while box is not root:
        node = box.value
        if node is not None:  # None: a node removed during the walk
            yield node
        box = box.next


_GRAPH, _GRAPHS = ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS


def node_subgraphs(node: ir.Node) -> list[tuple[str, ir.Graph]]:
    """The subgraphs a node holds (If branches, Loop/Scan/SequenceMap bodies), each with the name
    of its attribute (`name[i]` for a list of graphs), in attribute order."""
    attributes = node.attributes.data
    if not attributes:  # most nodes: the fast answer of a whole-model walk
        return []
    found: list[tuple[str, ir.Graph]] = []
    # `.data` is the plain dict under onnx_ir's Attributes (a UserDict): iterating it directly
    # makes the whole-model walks, done several times per sweep, about 3x faster
    for name, attr in attributes.items():
        kind = attr.type  # read first: most attributes are not graphs
        if kind == _GRAPH:
            if attr.ref_attr_name is None:
                found.append((name, _graph(attr)))
        elif kind == _GRAPHS and attr.ref_attr_name is None:
            found.extend((f"{name}[{i}]", graph) for i, graph in enumerate(attr.as_graphs()))
    return found


def subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The subgraphs a node holds, without their attribute names."""
    attributes = node.attributes.data
    if not attributes:  # most nodes
        return []
    # the same walk as `node_subgraphs` without the names: asked for every node with
    # attributes by every whole-model walk (twenty-odd per run), so no pairs built and dropped
    found: list[ir.Graph] = []
    for attr in attributes.values():
        kind = attr.type
        if kind == _GRAPH:
            if attr.ref_attr_name is None:
                found.append(_graph(attr))
        elif kind == _GRAPHS and attr.ref_attr_name is None:
            found.extend(attr.as_graphs())
    return found


def _graph(attr: ir.Attr) -> ir.Graph:
    """The graph of a GRAPH attribute: its value when that is a Graph (always, for a model
    read from a file), else what `as_graph` says (it raises on anything else)."""
    value = attr.value
    return value if type(value) is ir.Graph else attr.as_graph()


def has_subgraph(node: ir.Node) -> bool:
    return bool(node_subgraphs(node))


def graphs_within(graph: ir.Graph) -> list[ir.Graph]:
    """`graph` and every graph nested in it, parents before children, each once (see
    `iter_all_graphs`)."""
    found = [graph]
    seen = {id(graph)}
    for inner in found:  # grows while iterating: a breadth-first walk
        for node in graph_nodes(inner):
            if node.attributes.data:
                for subgraph in subgraphs(node):
                    if id(subgraph) not in seen:
                        seen.add(id(subgraph))
                        found.append(subgraph)
    return found


def iter_all_graphs(model: ir.Model) -> Iterator[ir.Graph]:
    """The main graph, every subgraph (If/Loop/Scan/SequenceMap bodies, nested) and the graph of
    every model-local function, parents before children.

    Each graph is yielded once, though two nodes hold it: a rewrite that builds a new Loop
    around the body of the old one holds it twice until the old one goes, and at every level
    of Loops nested so, the graphs below were walked twice (2**18 walks of one body at a depth
    of 18)."""
    queue = collections.deque([model.graph])
    queue.extend(function.graph for function in model.functions.values())
    seen = {id(graph) for graph in queue}
    while queue:
        graph = queue.popleft()
        yield graph
        # `subgraphs(node)` written out: every whole-model pass walks all graphs through here
        # (twenty-odd walks a run), and on a model of 10,000 Ifs the call and the list it built
        # for each If were a third of a walk's time; the same graphs in the same order
        for node in graph_nodes(graph):
            data = node.attributes.data
            if not data:  # most nodes have no attribute
                continue
            for attr in data.values():
                kind = attr.type
                if kind == _GRAPH:
                    if attr.ref_attr_name is not None:
                        continue
                    subgraph = attr.value
                    if type(subgraph) is not ir.Graph:
                        subgraph = attr.as_graph()  # raises on anything but a graph
                    if id(subgraph) not in seen:
                        seen.add(id(subgraph))
                        queue.append(subgraph)
                elif kind == _GRAPHS and attr.ref_attr_name is None:
                    for subgraph in attr.as_graphs():
                        if id(subgraph) not in seen:
                            seen.add(id(subgraph))
                            queue.append(subgraph)


def iter_all_nodes(model: ir.Model) -> Iterator[ir.Node]:
    """Every node of the model, subgraphs and functions included."""
    for graph in iter_all_graphs(model):
        yield from graph_nodes(graph)


def quoted_node(node: ir.Node) -> str:
    """`Op 'name'` for messages; an unnamed node is named by its first output, as in the
    report's labels (`SequenceInsert#2 (Seq_3)`): `Op (output 'Seq_3')`."""
    if node.name:
        return f"{node.op_type} '{node.name}'"
    first = node.outputs[0].name if node.outputs else None
    return f"{node.op_type} (output '{first}')" if first else f"{node.op_type} (unnamed)"


def outer_reads(node: ir.Node) -> list[ir.Value]:
    """The values of enclosing graphs that `node`'s subgraphs read (nested ones included), and
    those a subgraph gives back as an output, each once, in the order first read."""
    inner = graphs_within_node(node)
    found: dict[ir.Value, None] = {}
    for graph in inner:
        for each in graph_nodes(graph):
            for value in each.inputs:
                if value is not None and not _made_in(value, inner):
                    found[value] = None
        for value in graph.outputs:
            if not _made_in(value, inner):
                found[value] = None
    return list(found)


def graphs_within_node(node: ir.Node) -> list[ir.Graph]:
    """Every graph nested in `node`, outer ones first."""
    found: list[ir.Graph] = []
    for graph in subgraphs(node):
        found.extend(graphs_within(graph))
    return found


def _made_in(value: ir.Value, graphs: list[ir.Graph]) -> bool:
    producer = value.producer()
    owner = value.graph if producer is None else producer.graph
    return any(owner is graph for graph in graphs)


def peel_identity(value: ir.Value) -> ir.Value:
    """`value` with the Identity nodes that pass it on looked through."""
    while (producer := value.producer()) is not None and producer.op_type == "Identity":
        if producer.domain != "" or producer.inputs[0] is None:
            break
        value = producer.inputs[0]
    return value


def uses_through(
    value: ir.Value, passes_on: Callable[[ir.Node, int], bool]
) -> Iterator[tuple[ir.Node, int]]:
    """The (node, input index) uses of `value`, looking through every use for which
    `passes_on(node, index)` holds (its outputs are followed instead). Each value is visited
    once."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for node, index in current.uses():
            if passes_on(node, index):
                stack.extend(node.outputs)
            else:
                yield node, index
