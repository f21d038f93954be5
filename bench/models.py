"""The benchmark's models: per body, the original SequenceMap model, ONNX's own expansion of it,
a hand-written batched model (the floor), and large models for the optimizer's run time."""

from __future__ import annotations

__all__ = ["BODIES", "Body", "batched_model", "expanded_model", "large_model", "original_model"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper
from onnx.backend.test.case.node import function_testcase_helper

OPSET = 18
IR_VERSION = 10
_RNG = np.random.default_rng(0)


def _parse(text: str) -> onnx.ModelProto:
    header = f'<ir_version: {IR_VERSION}, opset_import: ["": {OPSET}]>\n'
    return onnx.parser.parse_model(header + text)


@dataclasses.dataclass(frozen=True)
class Body:
    """One SequenceMap body. `element` is the element shape; the model input is [N, *element]
    split on axis 0; `extras` are extra tensor inputs (name -> value) fed to every element."""

    name: str
    description: str
    element: tuple[int, ...]
    out: tuple[int, ...]
    out_type: str
    body: str  # the body graph, reading e (and the extras)
    batched: str  # the same computation on x [N, *element], giving y
    extras: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def feeds(self, n: int) -> dict[str, np.ndarray]:
        x = _RNG.standard_normal((n, *self.element)).astype(np.float32)
        return {"x": x, **self.extras}


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in shape)


def _extra_decls(body: Body) -> str:
    return "".join(f", float[{_dims(v.shape)}] {k}" for k, v in body.extras.items())


def original_model(body: Body, n: int) -> onnx.ModelProto:
    """SplitToSequence(x) -> SequenceMap(body, extras) -> ConcatFromSequence(new_axis=1)."""
    extras = "".join(f", {k}" for k in body.extras)
    return _parse(
        f"""g (float[{_dims((n, *body.element))}] x{_extra_decls(body)})
              => ({body.out_type}[{_dims((n, *body.out))}] y) {{
            seq_in = SplitToSequence<axis = 0, keepdims = 0>(x)
            seq_out = SequenceMap<body = {body.body}>(seq_in{extras})
            y = ConcatFromSequence<axis = 0, new_axis = 1>(seq_out)
        }}"""
    )


def batched_model(body: Body, n: int) -> onnx.ModelProto:
    """The hand-written batched computation: the floor any lowering can reach."""
    return _parse(
        f"""g (float[{_dims((n, *body.element))}] x{_extra_decls(body)})
              => ({body.out_type}[{_dims((n, *body.out))}] y) {{
            {body.batched}
        }}"""
    )


def expanded_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX's own expansion of SequenceMap (its context-dependent function body: a Loop over
    SequenceAt with a SequenceInsert accumulator), as onnx's backend tests build `*_expanded`."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "SequenceMap":
            nodes.append(node)
            continue
        input_types = [types[name] for name in node.input]
        expansions, _ = function_testcase_helper(node, input_types, "bench", model.opset_import)
        nodes.extend(expansions[0][0])
    graph = helper.make_graph(
        nodes, model.graph.name, model.graph.input, model.graph.output, model.graph.initializer
    )
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=IR_VERSION)


def _mlp() -> Body:
    return Body(
        "mlp",
        "MatMul+Add+Relu on 64 floats",
        (64,),
        (64,),
        "float",
        """b (float[64] e, float[64,64] w, float[64] c) => (float[64] o) {
            mm = MatMul(e, w)
            ad = Add(mm, c)
            o = Relu(ad)
        }""",
        "mm = MatMul(x, w)\n ad = Add(mm, c)\n y = Relu(ad)",
        {
            "w": (_RNG.standard_normal((64, 64)) / 8).astype(np.float32),
            "c": _RNG.standard_normal(64).astype(np.float32),
        },
    )


def _elementwise() -> Body:
    return Body(
        "elementwise",
        "Mul, Add, Tanh, Sigmoid, Mul, Sub on 64 floats",
        (64,),
        (64,),
        "float",
        """b (float[64] e, float[64] c) => (float[64] o) {
            sq = Mul(e, e)
            ad = Add(sq, c)
            th = Tanh(ad)
            sg = Sigmoid(e)
            pr = Mul(th, sg)
            o = Sub(pr, e)
        }""",
        """sq = Mul(x, x)
            ad = Add(sq, c)
            th = Tanh(ad)
            sg = Sigmoid(x)
            pr = Mul(th, sg)
            y = Sub(pr, x)""",
        {"c": _RNG.standard_normal(64).astype(np.float32)},
    )


def _reduction() -> Body:
    return Body(
        "reduction",
        "row L2 norms of an [8, 64] element (Mul, ReduceSum, Sqrt)",
        (8, 64),
        (8,),
        "float",
        """b (float[8,64] e) => (float[8] o) {
            sq = Mul(e, e)
            ax = Constant<value = int64[1] {-1}>()
            rs = ReduceSum<keepdims = 0>(sq, ax)
            o = Sqrt(rs)
        }""",
        """sq = Mul(x, x)
            ax = Constant<value = int64[1] {-1}>()
            rs = ReduceSum<keepdims = 0>(sq, ax)
            y = Sqrt(rs)""",
    )


def _attention() -> Body:
    return Body(
        "attention",
        "per-head self-attention on [16, 16]: MatMul, Softmax, MatMul",
        (16, 16),
        (16, 16),
        "float",
        """b (float[16,16] e) => (float[16,16] o) {
            kt = Transpose<perm = [1, 0]>(e)
            sc = MatMul(e, kt)
            sf = Constant<value = float {0.25}>()
            ss = Mul(sc, sf)
            pr = Softmax<axis = -1>(ss)
            o = MatMul(pr, e)
        }""",
        """kt = Transpose<perm = [0, 2, 1]>(x)
            sc = MatMul(x, kt)
            sf = Constant<value = float {0.25}>()
            ss = Mul(sc, sf)
            pr = Softmax<axis = -1>(ss)
            y = MatMul(pr, x)""",
    )


def _shape() -> Body:
    return Body(
        "shape",
        "Shape/Size of an [8, 8] element drive a Reshape to [64], divided by the size",
        (8, 8),
        (64,),
        "float",
        """b (float[8,8] e) => (float[64] o) {
            n = Size(e)
            z = Constant<value = int64[1] {0}>()
            t = Unsqueeze(n, z)
            fl = Reshape(e, t)
            sh = Shape(e)
            rows = Gather<axis = 0>(sh, z)
            nf = Cast<to = 1>(n)
            rf = Cast<to = 1>(rows)
            sc = Div(rf, nf)
            o = Mul(fl, sc)
        }""",
        """t = Constant<value = int64[2] {-1, 64}>()
            fl = Reshape(x, t)
            sc = Constant<value = float[1] {0.125}>()
            y = Mul(fl, sc)""",
    )


BODIES: dict[str, Callable[[], Body]] = {
    "mlp": _mlp,
    "elementwise": _elementwise,
    "reduction": _reduction,
    "attention": _attention,
    "shape": _shape,
}


def large_model(blocks: int, layers: int = 1) -> onnx.ModelProto:
    """A chain of `blocks` blocks: a SplitToSequence -> SequenceMap(MatMul+Add+Relu) ->
    ConcatFromSequence over 8 rows of 64 (6 nodes, body included), then `layers` times 14 plain
    ops (a residual add, a hand-made normalization, a Tanh...). layers=1 gives 20 nodes per block
    (dense: a SequenceMap every 20 nodes); layers=14 gives 202 (sparse: one per ~200 nodes, like
    one per layer of a transformer)."""
    lines = []
    h = "x"
    body = """b (float[64] e, float[64,64] w, float[64] c) => (float[64] o) {
        mm = MatMul(e, w)
        ad = Add(mm, c)
        o = Relu(ad)
    }"""
    for k in range(blocks):
        lines.append(
            f"""s{k} = SplitToSequence<axis = 0, keepdims = 0>({h})
            m{k} = SequenceMap<body = {body}>(s{k}, w, c)
            c{k} = ConcatFromSequence<axis = 0, new_axis = 1>(m{k})"""
        )
        h, previous = f"c{k}", h
        for j in range(layers):
            p = f"{k}_{j}"
            lines.append(
                f"""r{p} = Add({h}, {previous})
                mu{p} = ReduceMean<keepdims = 1>(r{p}, axes)
                d{p} = Sub(r{p}, mu{p})
                q{p} = Mul(d{p}, d{p})
                v{p} = ReduceMean<keepdims = 1>(q{p}, axes)
                ve{p} = Add(v{p}, eps)
                sd{p} = Sqrt(ve{p})
                n{p} = Div(d{p}, sd{p})
                g{p} = Mul(n{p}, gamma)
                b{p} = Add(g{p}, beta)
                t{p} = Tanh(b{p})
                u{p} = Mul(t{p}, half)
                h{p} = Add(u{p}, b{p})
                i{p} = Identity(h{p})"""
            )
            h, previous = f"i{p}", h
    text = f"""g (float[8,64] x, float[64,64] w, float[64] c, float[64] gamma, float[64] beta)
              => (float[8,64] y) {{
        axes = Constant<value = int64[1] {{-1}}>()
        eps = Constant<value = float {{1e-5}}>()
        half = Constant<value = float {{0.5}}>()
        {chr(10).join(lines)}
        y = Identity({h})
    }}"""
    return _parse(text)
