"""A node computing what an earlier node of its graph computes is merged into it; constants count
as their content. Random draws, other domains and graph outputs stay."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.ops import is_tensor
from seqlower.passes import duplicate_nodes

# torch.stack((sx, sy, sx, sy), 1) as TorchScript writes it: each Unsqueeze with its own Constant
STACK = """
agraph (int64[N] sx, int64[N] sy) => (float[N,4] y) {
  a1 = Constant <value = int64[1] {1}> ()
  ux = Unsqueeze (sx, a1)
  a2 = Constant <value = int64[1] {1}> ()
  uy = Unsqueeze (sy, a2)
  a3 = Constant <value = int64[1] {1}> ()
  ux2 = Unsqueeze (sx, a3)
  a4 = Constant <value = int64[1] {1}> ()
  uy2 = Unsqueeze (sy, a4)
  s = Concat <axis = 1> (ux, uy, ux2, uy2)
  y = Cast <to = 1> (s)
}"""


def _cleaned(text: str, **options) -> ir.Model:
    model = ir.from_proto(parse(text, **options))
    seqlower.passes.infer_shapes(model)
    seqlower.passes.CleanupPass()(model)
    return model


@pytest.mark.parametrize("n", [0, 1, 5])
def test_unsqueezes_with_equal_constant_axes_are_merged(n):
    model = parse(STACK)
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Unsqueeze"] == 2
    assert op_counts(lowered)["Constant"] == 2  # each Unsqueeze that stays keeps its axes
    feeds = {"sx": np.arange(n, dtype=np.int64) - 2, "sy": np.arange(n, dtype=np.int64) * 3}
    assert_same_outputs(model, lowered, feeds)


def test_the_pass_counts_what_it_merged_and_readers_read_the_first():
    model = _cleaned(STACK)
    concat = next(node for node in model.graph if node.op_type == "Concat")
    first, second = concat.inputs[0], concat.inputs[1]
    assert [v.producer() for v in concat.inputs] == [first.producer(), second.producer()] * 2


def test_constants_of_different_content_or_type_are_not_merged():
    model = parse("""
agraph (float[2,3] x) => (float[2,1,3] a, float[2,3,1] b, float[2,3] c, float[2,3] d) {
  k1 = Constant <value = int64[1] {1}> ()
  k2 = Constant <value = int64[1] {2}> ()
  a = Unsqueeze (x, k1)
  b = Unsqueeze (x, k2)
  f1 = Constant <value = float {1}> ()
  f2 = Constant <value = float {-0.0}> ()
  f3 = Constant <value = float {0.0}> ()
  p = Add (x, f2)
  q = Add (x, f3)
  c = Mul (p, f1)
  d = Mul (q, f1)
}""")
    lowered, _ = lower(model, target="generic")
    # -0.0 and 0.0 are different bytes, so the Adds stay two (what they feed stays two)
    assert op_counts(lowered)["Unsqueeze"] == 2 and op_counts(lowered)["Mul"] == 2
    x = np.array([[1.0, -0.0, 2.0], [0.0, -3.0, 4.0]], np.float32)
    assert_same_outputs(model, lowered, {"x": x})


def test_attributes_tell_nodes_apart():
    model = parse("""
agraph (float[2,3] x) => (float[2,3] y) {
  a = Softmax <axis = 0> (x)
  b = Softmax <axis = 1> (x)
  c = Softmax <axis = 1> (x)
  s = Add (a, b)
  y = Add (s, c)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Softmax"] == 2
    assert_same_outputs(model, lowered, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_random_draws_other_domains_and_graph_outputs_stay():
    text = """
agraph (float[2] x) => (float[2] y, float[2] z, float[2] r) {
  u1 = RandomUniformLike (x)
  u2 = RandomUniformLike (x)
  c1 = custom.Thing (x)
  c2 = custom.Thing (x)
  s = Add (u1, u2)
  t = Add (c1, c2)
  y = Relu (x)
  z = Relu (x)
  r = Add (s, t)
}"""
    model = _cleaned(text, domains={"custom": 1})
    ops = ("RandomUniformLike", "Thing", "Relu")
    counts = {op: sum(n.op_type == op for n in model.graph) for op in ops}
    assert counts == {"RandomUniformLike": 2, "Thing": 2, "Relu": 2}


def test_duplicates_in_a_loop_body_are_merged_and_outer_values_count_once():
    model = parse("""
agraph (float[3] x, int64 n) => (float[3] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (n, t, x) <body = body (int64 i, bool c, float[3] v) => (bool c_out, float[3] w) {
    two = Constant <value = float {2}> ()
    a = Mul (v, two)
    two_again = Constant <value = float {2}> ()
    b = Mul (v, two_again)
    e1 = Exp (x)
    e2 = Exp (x)
    s = Add (a, b)
    w1 = Add (s, e1)
    w = Sub (w1, e2)
    c_out = Identity (c)
  }>
}""")
    lowered, _ = lower(model, target="generic")
    counts = op_counts(lowered)
    assert counts["Mul"] == 1 and counts["Exp"] == 1
    for trips in (0, 1, 3):
        feeds = {"x": np.array([1.0, -2.0, 0.5], np.float32), "n": np.array(trips, np.int64)}
        assert_same_outputs(model, lowered, feeds)


def test_lowering_twice_changes_nothing():
    once, _ = lower(parse(STACK), target="generic")
    twice, _ = lower(once, target="generic")
    assert once.SerializeToString() == twice.SerializeToString()


def test_a_duplicate_a_loop_body_reads_from_around_it_stays():
    """ONNX inference with data propagation mis-ranked a Reshape after a Loop once a value the
    body read was shared with the Slices computing the Reshape's target: values a subgraph reads
    from around it are not merged."""
    model = parse("""
agraph (float[3] x, int64 n) => (float[3] y, float[3] z) {
  t = Constant <value = bool {1}> ()
  a = Neg (x)
  b = Neg (x)
  y = Loop (n, t, x) <body = body (int64 i, bool c, float[3] v) => (bool c_out, float[3] w) {
    w = Add (v, a)
    c_out = Identity (c)
  }>
  z = Mul (b, x)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Neg"] == 2
    for trips in (0, 2):
        feeds = {"x": np.array([1.0, -2.0, 0.5], np.float32), "n": np.array(trips, np.int64)}
        assert_same_outputs(model, lowered, feeds)


def test_each_node_is_asked_once_whether_a_subgraph_reads_it(monkeypatch):
    """n copies of one Relu, each read by a Neg: every copy merges into the first, whose
    readers grow by one per merge. Asking the first again for every copy whether a subgraph
    reads it walked those readers each time (quadratic: 100,000 such copies took minutes)."""
    from seqlower.passes import duplicate_nodes

    n = 300
    body = "\n".join(f"r{k} = Relu (x)\n y{k} = Neg (r{k})" for k in range(n))
    outputs = ", ".join(f"float[2] y{k}" for k in range(n))
    model = ir.from_proto(parse(f"g (float[2] x) => ({outputs}) {{ {body} }}"))
    asked: list[ir.Node] = []
    original = duplicate_nodes._read_elsewhere

    def counted(node: ir.Node, graph: ir.Graph) -> bool:
        asked.append(node)
        return original(node, graph)

    monkeypatch.setattr(duplicate_nodes, "_read_elsewhere", counted)
    assert duplicate_nodes.merge_duplicate_nodes(model) == n - 1
    assert len(asked) == len(set(asked)) == n


def test_constants_are_read_without_the_runtime_protocol_check(monkeypatch):
    """Each Constant's tensor is recognized without `isinstance(x, ir.TensorProtocol)`, which
    walks the protocol's members on every call (some 45 us: seconds at 100,000 constants); the
    answers are those of the protocol check."""
    from seqlower.passes import duplicate_nodes

    n = 50
    body = "\n".join(
        f"c{k} = Constant <value = int64[1] {{{k % 5}}}> ()\n a{k} = Add (x, c{k})"
        for k in range(n)
    )
    total = ", ".join(f"a{k}" for k in range(n))
    model = ir.from_proto(parse(f"g (int64[1] x) => (int64[1] y) {{ {body}\n y = Sum ({total}) }}"))
    meta = type(ir.TensorProtocol)
    original = meta.__instancecheck__
    checked: list[object] = []

    def counted(cls: type, instance: object) -> bool:
        if cls is ir.TensorProtocol:
            checked.append(instance)
        return original(cls, instance)

    monkeypatch.setattr(meta, "__instancecheck__", counted)
    assert duplicate_nodes.merge_duplicate_nodes(model) == n - 5
    assert checked == []
    monkeypatch.undo()
    tensors = [
        ir.tensor([1, 2]),
        model.graph.node(0).attributes["value"].value,
        ir.StringTensor([b"a"], shape=ir.Shape([1])),
    ]
    others = [None, 3, 2.5, "x", b"y", [1], (1,), ir.AttrInt64("a", 1), np.zeros(2)]
    for obj in tensors + others:
        assert is_tensor(obj) == isinstance(obj, ir.TensorProtocol), obj


def test_tensors_and_plain_values_are_told_apart_without_a_metaclass_check(monkeypatch):
    """onnx_ir's classes are all made by typing's protocol metaclass, whose `isinstance` costs
    1.5 to 2 us a class even for a plain class: `is_tensor(None)` tried six of them (10 us).
    An object of one of onnx_ir's tensor classes or of a plain Python type is answered by its
    exact class, with no metaclass check at all; a subclass of either is answered as before."""
    meta = type(ir.Tensor)
    original = meta.__instancecheck__
    checked: list[object] = []

    def counted(cls: type, instance: object) -> bool:
        checked.append(instance)
        return original(cls, instance)

    tensors = [ir.tensor([1, 2]), ir.StringTensor([b"a"], shape=ir.Shape([1]))]
    tensors.append(ir.serde.deserialize_tensor(ir.serde.serialize_tensor(tensors[0])))
    plain = [None, True, 3, 2.5, "x", b"y", [1], (1,)]
    monkeypatch.setattr(meta, "__instancecheck__", counted)
    answers = [is_tensor(obj) for obj in tensors + plain]
    assert checked == []
    assert answers == [True] * len(tensors) + [False] * len(plain)

    class OwnTensor(ir.Tensor):
        pass

    others = [OwnTensor(np.zeros(2)), ir.DataType.FLOAT, ir.AttrInt64("a", 1), np.zeros(2)]
    monkeypatch.undo()
    for obj in others:
        assert is_tensor(obj) == isinstance(obj, ir.TensorProtocol), obj


def test_a_constant_read_by_many_nodes_is_read_into_numpy_once(monkeypatch):
    """One small initializer read by n Adds (an epsilon, say): its content is computed once per
    merge, not once per reader, and the readers are merged by it as before."""
    from seqlower.passes import duplicate_nodes

    n = 40
    body = "\n".join(f"a{k} = Add (x{k % 4}, eps)" for k in range(n))
    inputs = ", ".join(f"float[2] x{k}" for k in range(4))
    total = ", ".join(f"a{k}" for k in range(n))
    model = ir.from_proto(
        parse(
            f"g ({inputs}) => (float[2] y) <float[1] eps = {{0.5}}> "
            f"{{ {body}\n y = Sum ({total}) }}"
        )
    )
    read: list[object] = []
    original = duplicate_nodes._content

    def counted(tensor: object) -> object:
        read.append(tensor)
        return original(tensor)

    monkeypatch.setattr(duplicate_nodes, "_content", counted)
    assert duplicate_nodes.merge_duplicate_nodes(model) == n - 4
    assert len(read) == 1
    assert op_counts(ir.to_proto(model))["Add"] == 4


# two empty constants in a model with an If: the runtime workarounds remake each as a
# ConstantOfShape of [0, 2] after the cleanup has merged duplicates, two equal nodes
TWO_EMPTY_CONSTANTS = """g (float[N,2] x, bool c) => (float[?,2] y, float[?,2] z, float[N,2] w) {
    e1 = Constant <value = float[0,2] {}> ()
    y = Concat <axis = 0> (e1, x)
    e2 = Constant <value = float[0,2] {}> ()
    z = Concat <axis = 0> (x, e2)
    w = If (c) <then_branch = t () => (float[N,2] a) { a = Identity (x) },
                else_branch = f () => (float[N,2] b) { b = Neg (x) }>
}"""


def _merges_after_cleanup(monkeypatch, text: str) -> tuple[onnx.ModelProto, list[int]]:
    """The model lowered (generic), and what each merge after the cleanup's own merged."""
    from seqlower import pipeline

    merged: list[int] = []

    def counted(model: ir.Model) -> int:
        merged.append(duplicate_nodes.merge_duplicate_nodes(model))
        return merged[-1]

    monkeypatch.setattr(pipeline, "merge_duplicate_nodes", counted)
    lowered, _ = lower(parse(text), target="generic")
    monkeypatch.undo()
    return lowered, merged


def test_the_merge_after_the_workarounds_runs_only_when_a_node_changed(monkeypatch):
    """The cleanup merges duplicates in graph order, each node into the first equal one: merged
    again right after, nothing more merges. The pipeline merges again after the runtime
    workarounds only when a node changed since (`CleanupPass.merged_last`, the passes'
    `modified`), and the result is the same either way."""
    lowered, merged = _merges_after_cleanup(monkeypatch, STACK)
    assert merged == []  # nothing changed after the cleanup's merge
    again = ir.from_proto(lowered)
    assert duplicate_nodes.merge_duplicate_nodes(again) == 0
    # the workarounds remake both empty constants: the merge after them runs, and merges them
    lowered, merged = _merges_after_cleanup(monkeypatch, TWO_EMPTY_CONSTANTS)
    assert merged == [1]
    assert op_counts(lowered)["ConstantOfShape"] == 1
    relowered, _ = lower(lowered, target="generic")
    assert relowered.SerializeToString() == lowered.SerializeToString()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for c in (True, False):
        assert_same_outputs(parse(TWO_EMPTY_CONSTANTS), lowered, {"x": x, "c": np.array(c)})


def test_the_cleanup_says_whether_a_node_changed_after_its_merge():
    """`merged_last`: True when the folds after the merge changed nothing (merging again then
    finds nothing), False when one did (here a Loop-invariant Mul hoisted out of its body)."""
    model = _cleaned(STACK)
    cleanup = seqlower.passes.CleanupPass()
    cleanup(model)
    assert cleanup.merged_last
    assert duplicate_nodes.merge_duplicate_nodes(model) == 0
    hoisted = ir.from_proto(
        parse("""g (float[2] x, float[2] w, int64 m) => (float[2] y) {
        y = Loop (m, , x) <body = b (int64 i, bool c, float[2] a) => (bool co, float[2] s) {
            co = Identity (c)
            k = Mul (w, w)
            s = Add (a, k)
        }>
    }""")
    )
    seqlower.passes.infer_shapes(hoisted)
    cleanup = seqlower.passes.CleanupPass()
    cleanup(hoisted)
    assert cleanup.hoisted == 1
    assert not cleanup.merged_last
