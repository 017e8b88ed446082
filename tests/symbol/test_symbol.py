"""fastgrad.sym: building symbols, names, inference, JSON, get_symbol and the DOT writer."""

import json
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastgrad as mx  # noqa: E402
from fastgrad._core._array import REQUIRED  # noqa: E402
from fastgrad._ops._registry import REGISTRY  # noqa: E402

import test_ops  # noqa: E402
from _helpers import assert_close  # noqa: E402
from op_specs import SPECS  # noqa: E402


def f64(shape, seed=0, low=0.5, high=1.5):
    return onp.random.default_rng(seed).uniform(low, high, size=shape)


# ---------------------------------------------------------------- building and naming

def test_var_and_arithmetic_names():
    a, b = mx.sym.var("a"), mx.sym.Variable("b")
    c = 2 * a + b
    assert c.list_arguments() == ["a", "b"]
    assert c.list_inputs() == ["a", "b"]
    assert c.list_auxiliary_states() == []
    assert len(c.list_outputs()) == 1 and c.list_outputs()[0].endswith("_output")
    assert a.list_outputs() == ["a"]
    assert a.name == "a"


def test_named_op_output():
    x = mx.sym.var("x")
    assert mx.sym.exp(x, name="e").list_outputs() == ["e_output"]
    auto = mx.sym.exp(x)
    assert auto.name.startswith("exp") and auto.name[3:].isdigit()


def test_every_registry_op_is_a_symbol_op():
    for name in REGISTRY:
        assert callable(mx.sym.symbol_op(name)), name
        # sym.var is MXNet's variable constructor; sym.split also takes MXNet's num_outputs=;
        # sym.dot, sym.concat, sym.flatten and sym.pad are MXNet's operators
        # (tests/symbol/test_mxnet_symbol.py)
        if name not in ("var", "split", "dot", "concat", "flatten", "pad"):
            assert getattr(mx.sym, name) is mx.sym.symbol_op(name), name
    assert "softmax" in dir(mx.sym.npx) and callable(mx.sym.npx.softmax)
    # MXNet's layer operators are listed too (the stubs and tab completion read dir()), and
    # sym.image's functions only under sym.image
    assert {"FullyConnected", "Activation", "BatchNorm"} <= set(dir(mx.sym))
    assert "crop" in dir(mx.sym.image) and "to_tensor" not in dir(mx.sym)
    assert callable(mx.sym.np.sum)
    with pytest.raises(AttributeError):
        mx.sym.no_such_op_here


def _simple_ops():
    for name, prim in sorted(REGISTRY.items()):
        if prim.n_in not in (1, 2) or prim.n_out != 1:
            continue
        if any(d is REQUIRED for d in prim.param_defaults):
            continue
        yield name, prim


# Ops without a spec in op_specs.py (they are not differentiable) whose NumPy kernels take
# integers only; every other such op gets floats in [-2, 2).
INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm", "left_shift",
                "right_shift", "invert"}


def _head_gradient(name, out):
    """The output gradient to back-propagate: ones, except where the op defines no gradient
    for part of its output (complete_basis: the added columns are not unique, and a gradient
    on them is an error, checked in test_numpy_composites.py through svd)."""
    head = onp.ones(out.shape, dtype=out.dtype)
    if name == "complete_basis":
        head[..., 2:] = 0
    return mx.np.array(head)


def _symbol_case(name, prim):
    """Inputs and parameters for one simple op: its first spec case (the input domain the op
    tests use: square matrices for det, integer exponents for ldexp, ...), or plain values."""
    spec = SPECS.get(name)
    rng = onp.random.default_rng(0)
    if spec is None:
        if name in INTEGER_ONLY:
            return [rng.integers(1, 9, (3, 4)) for _ in range(prim.n_in)], {}
        return [rng.uniform(-2, 2, (3, 4)) for _ in range(prim.n_in)], {}
    case = spec.cases[0]
    return [onp.asarray(v) for v in test_ops._inputs(spec, case, rng)], dict(case.params)


def test_integer_only_ops_are_exactly_those_refusing_floats():
    for name, prim in _simple_ops():
        if name in SPECS:
            continue
        floats = [mx.np.array([[0.5, 1.5]]) for _ in range(prim.n_in)]
        if name in INTEGER_ONLY:
            with pytest.raises(TypeError):
                prim(*floats)
        else:
            prim(*floats)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_generic_ops_match_imperative_values_and_gradients():
    """Every simple op of the table (one or two array inputs, one output, no required
    parameter), as a bound symbol, equals the imperative op exactly, values and gradients of
    every input that has a rule."""
    checked = []
    for name, prim in _simple_ops():
        xs, params = _symbol_case(name, prim)
        expected = prim(*[mx.np.array(x) for x in xs], **params)
        names = ["x%d" % i for i in range(prim.n_in)]
        with_grad = [n for n, x, d in zip(names, xs, prim.diff)
                     if prim.differentiable and d == 1 and x.dtype.kind == "f"]
        s = mx.sym.symbol_op(name)(*[mx.sym.var(n) for n in names], **params)
        ex = s.bind(mx.cpu(), {n: mx.np.array(x) for n, x in zip(names, xs)},
                    grad_req={n: "write" if n in with_grad else "null" for n in names})
        out = ex.forward(is_train=True)[0]
        assert out.dtype == expected.dtype, name
        assert onp.array_equal(out.asnumpy(), expected.asnumpy(), equal_nan=True), name
        if with_grad:
            vs = [mx.np.array(x) for x in xs]
            for n, v in zip(names, vs):
                if n in with_grad:
                    v.attach_grad()
            with mx.autograd.record():
                y = prim(*vs, **params)
            head = _head_gradient(name, y)
            y.backward(head)
            ex.backward([head])
            for n, v in zip(names, vs):
                if n in with_grad:
                    assert onp.array_equal(ex.grad_dict[n].asnumpy(), v.grad.asnumpy(),
                                           equal_nan=True), (name, n)
        checked.append(name)
    assert len(checked) >= 150 and {"matmul", "det", "cholesky", "solve", "ldexp"} <= set(checked)


def test_reflected_and_unary_operators():
    x = mx.sym.var("x")
    exprs = [1 - x, 2 / x, 2 ** x, -x, x ** 2, x / 4, x - 1, abs(x), x % 0.7]
    xv = f64((5,), seed=1)
    ex = mx.sym.Group(exprs).bind(mx.cpu(), {"x": mx.np.array(xv)})
    outs = [o.asnumpy() for o in ex.forward()]
    refs = [1 - xv, 2 / xv, 2 ** xv, -xv, xv ** 2, xv / 4, xv - 1, abs(xv), xv % 0.7]
    for o, r in zip(outs, refs):
        assert_close(o, r)


def test_group_getitem_and_internals():
    x = mx.sym.var("x")
    e = mx.sym.exp(x, name="e")
    s = mx.sym.sin(e, name="s")
    g = mx.sym.Group([e, s])
    assert g.list_outputs() == ["e_output", "s_output"]
    assert g[1].list_outputs() == ["s_output"]
    assert g["e_output"].list_outputs() == ["e_output"]
    internals = s.get_internals()
    assert internals.list_outputs() == ["x", "e_output", "s_output"]
    assert internals["e_output"].list_arguments() == ["x"]
    with pytest.raises(ValueError, match="no output named"):
        g["nope"]
    with pytest.raises(IndexError):
        g[5]


def test_multi_output_op_names_and_split():
    x = mx.sym.var("x", shape=(6, 2))
    parts = mx.sym.split(x, (2, 4), name="sp")
    assert parts.list_outputs() == ["sp_output0", "sp_output1", "sp_output2"]
    y = parts[0] + parts[2]
    with pytest.raises(ValueError, match="num_outputs"):
        mx.sym.split(mx.sym.var("z"), (1,))
    assert len(mx.sym.split(mx.sym.var("z"), (1,), num_outputs=2)) == 2
    xv = f64((6, 2))
    out = y.bind(mx.cpu(), {"x": mx.np.array(xv)}).forward()[0]
    assert_close(out, xv[:2] + xv[4:])


def test_symbol_methods_delegate_to_ops():
    x = mx.sym.var("x")
    y = x.exp().sum(axis=0)
    xv = f64((2, 3))
    out = y.bind(mx.cpu(), {"x": mx.np.array(xv)}).forward()[0]
    assert_close(out, onp.exp(xv).sum(axis=0))
    with pytest.raises(AttributeError):
        x.not_an_op


def test_wrong_calls_are_clear_errors():
    x = mx.sym.var("x")
    with pytest.raises(TypeError, match="unexpected keyword"):
        mx.sym.exp(x, bogus=1)
    with pytest.raises(TypeError, match="missing required"):
        mx.sym.reshape(x)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        mx.sym.add(x)
    with pytest.raises(TypeError, match="cannot be stored"):
        mx.sym.sum(x, axis=object())
    with pytest.raises(TypeError, match="bool.*not implemented for Symbol"):
        bool(x)


# ---------------------------------------------------------------- inference

def test_infer_shape_broadcast_matmul_reduce():
    a, b, w = mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("w")
    y = mx.sym.sum(mx.sym.matmul(a + b, w), axis=1, keepdims=True)
    args, outs, aux = y.infer_shape(a=(4, 3), b=(3,), w=(3, 5))
    assert args == [(4, 3), (3,), (3, 5)]
    assert outs == [(4, 1)]
    assert aux == []
    args, outs, _ = y.infer_shape((4, 3), (1, 3), (3, 7))
    assert outs == [(4, 1)]


def test_infer_shape_unknown_and_partial_and_inconsistent():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    y = mx.sym.exp(a) + b
    assert y.infer_shape(a=(2, 3)) == (None, None, None)
    args, outs, _ = y.infer_shape_partial(a=(2, 3))
    assert args == [(2, 3), None] and outs == [None]
    with pytest.raises(ValueError, match="add"):
        y.infer_shape(a=(2, 3), b=(4,))
    with pytest.raises(ValueError, match="not an argument"):
        y.infer_shape(c=(1,))


def test_infer_shape_uses_declared_shapes_and_linalg_probe():
    x = mx.sym.var("x", shape=(2, 5))
    y = mx.sym.reshape(x, (5, 2)).T
    assert y.infer_shape() == ([(2, 5)], [(2, 5)], [])


def test_infer_type():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    y = a * b
    args, outs, _ = y.infer_type(a="float64", b="float32")
    assert args == [onp.float64, onp.float32] and outs == [onp.float64]
    args, outs, _ = (mx.sym.var("c", shape=(2,), dtype="float16") * 2.0).infer_type()
    assert outs == [onp.float16]


# ---------------------------------------------------------------- JSON

def _mlp_symbol():
    x = mx.sym.var("x", shape=(4, 3))
    w1, b1 = mx.sym.var("w1"), mx.sym.var("b1")
    h = mx.sym.tanh(mx.sym.matmul(x, w1) + b1, name="h")
    out = mx.sym.npx.log_softmax(h, axis=-1)
    picked = mx.sym.getitem(h, (slice(0, 2), Ellipsis))
    return mx.sym.Group([out, picked, mx.sym.astype(h, onp.float64), h * onp.arange(5.0)])


def test_json_round_trip_gives_an_equal_graph():
    s = _mlp_symbol()
    text = s.tojson()
    json.loads(text)
    t = mx.sym.load_json(text)
    assert t.tojson() == text
    assert t.list_arguments() == s.list_arguments()
    assert t.list_outputs() == s.list_outputs()
    assert mx.sym.fromjson(text).tojson() == text
    args = {"x": mx.np.array(f64((4, 3))), "w1": mx.np.array(f64((3, 5), 1)),
            "b1": mx.np.array(f64((5,), 2))}
    o1 = s.bind(mx.cpu(), args).forward()
    o2 = t.bind(mx.cpu(), args).forward()
    for u, v in zip(o1, o2):
        assert onp.array_equal(u.asnumpy(), v.asnumpy())


def test_save_and_load_file(tmp_path):
    s = _mlp_symbol()
    path = os.path.join(str(tmp_path), "net.json")
    s.save(path)
    assert mx.sym.load(path).tojson() == s.tojson()


def test_pickle_round_trip():
    import pickle
    s = _mlp_symbol()
    assert pickle.loads(pickle.dumps(s)).tojson() == s.tojson()


def _doc():
    return json.loads(mx.sym.exp(mx.sym.var("x"), name="e").tojson(layout="fastgrad"))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d["nodes"][1].update(op="os.system"), "unknown op"),
    (lambda d: d["nodes"][1].update(op="__import__"), "unknown op"),
    (lambda d: d["nodes"][1].update(inputs=[[1, 0]]), "earlier node"),
    (lambda d: d["nodes"][1].update(inputs=[[0, 3]]), "output 3"),
    (lambda d: d["nodes"][1].update(inputs=[]), "takes 1 inputs"),
    (lambda d: d["nodes"][1]["params"].update(axis=1), "unknown parameters"),
    (lambda d: d["nodes"][1].update(extra=1), "unknown keys"),
    (lambda d: d.update(heads=[[7, 0]]), "head 0"),
    (lambda d: d["nodes"].append({"op": "null", "name": "x", "inputs": []}), "duplicate"),
    (lambda d: d["nodes"][0]["attrs"].update(dtype="object"), "dtype"),
    (lambda d: d["nodes"][0]["attrs"].update(shape=[-1]), "shape"),
    (lambda d: d.update(nodes="x"), "nodes"),
])
def test_load_json_rejects_malformed_input(mutate, message):
    d = _doc()
    mutate(d)
    with pytest.raises(ValueError, match=message):
        mx.sym.load_json(json.dumps(d))


def test_load_json_rejects_bad_values_and_text():
    with pytest.raises(ValueError, match="not valid JSON"):
        mx.sym.load_json("{nope")
    with pytest.raises(ValueError):
        mx.sym.load_json("[]")
    x = mx.sym.var("x")
    d = json.loads(mx.sym.reshape(x, (2, 3)).tojson(layout="fastgrad"))
    d["nodes"][1]["params"]["shape"] = {"__pickle__": "gASV"}
    with pytest.raises(ValueError, match="unknown tag"):
        mx.sym.load_json(json.dumps(d))
    d = json.loads((x * onp.arange(3.0)).tojson())
    const = next(n for n in d["nodes"] if n["op"] == "_const")
    const["value"]["__array__"]["data"] = "AAAA"
    with pytest.raises(ValueError, match="bytes"):
        mx.sym.load_json(json.dumps(d))
    const["value"]["__array__"]["dtype"] = "|O"
    with pytest.raises(ValueError, match="dtype"):
        mx.sym.load_json(json.dumps(d))
    d = json.loads(mx.sym.reshape(x, (2, 3)).tojson(layout="fastgrad"))
    del d["nodes"][1]["params"]["shape"]
    with pytest.raises(ValueError, match="missing required parameter"):
        mx.sym.load_json(json.dumps(d))


# ---------------------------------------------------------------- get_symbol

def test_get_symbol_reproduces_the_recorded_value():
    xv, wv = f64((4, 3)), f64((3, 2), 1)
    x, w = mx.np.array(xv), mx.np.array(wv)
    x.attach_grad()
    w.attach_grad()
    with mx.autograd.record():
        y = mx.np.tanh(mx.np.matmul(x, w) * 2.0 + 1) - mx.np.sum(x, axis=1, keepdims=True)
        s = mx.autograd.get_symbol(y)
    assert s.list_arguments() == ["var0", "var1"]
    assert s.infer_shape() == ([(4, 3), (3, 2)], [(4, 2)], [])
    ex = s.bind(mx.cpu(), {"var0": x, "var1": w})
    out = ex.forward()[0]
    assert onp.array_equal(out.asnumpy(), y.asnumpy())
    # the constants (2.0, 1) live in the symbol; gradients equal the tape's exactly
    y.backward()
    ex.backward()
    assert onp.array_equal(ex.grad_dict["var0"].asnumpy(), x.grad.asnumpy())
    assert onp.array_equal(ex.grad_dict["var1"].asnumpy(), w.grad.asnumpy())
    # and it survives a JSON round trip
    t = mx.sym.load_json(s.tojson())
    assert onp.array_equal(t.bind(mx.cpu(), [x, w]).forward()[0].asnumpy(), y.asnumpy())


def test_get_symbol_constant_array_and_multi_output():
    c = onp.arange(6.0).reshape(2, 3)
    x = mx.np.array(f64((2, 3)))
    x.attach_grad()
    with mx.autograd.record():
        a, b = mx.np.split(x * c, 2, axis=0)
        y = a * b
    s = mx.autograd.get_symbol(y)
    out = s.bind(mx.cpu(), {"var0": x}).forward()[0]
    assert onp.array_equal(out.asnumpy(), y.asnumpy())


def test_get_symbol_errors():
    x = mx.np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="no recorded history"):
        mx.autograd.get_symbol(x)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.np.exp(x) * 3
    y.backward()
    with pytest.raises(RuntimeError, match="get_symbol before backward"):
        mx.autograd.get_symbol(y)

    class Twice(mx.autograd.Function):
        def forward(self, v):
            return v * 2

        def backward(self, g):
            return g * 2

    with mx.autograd.record():
        z = Twice()(x)
    with pytest.raises(NotImplementedError, match="Twice"):
        mx.autograd.get_symbol(z)


# ---------------------------------------------------------------- compositions

def test_composite_ops_run_on_bound_values():
    x = mx.sym.var("x")
    y = mx.sym.npx.softmax(x, axis=-1)
    s = mx.sym.np.sum(y * 2, axis=0)
    for seed in range(2):
        xv = f64((3, 4), seed)
        out = s.bind(mx.cpu(), {"x": mx.np.array(xv)}).forward()[0]
        e = onp.exp(xv - xv.max(-1, keepdims=True))
        assert_close(out, (2 * e / e.sum(-1, keepdims=True)).sum(0))


# ---------------------------------------------------------------- visualization

def test_plot_network_dot_text():
    x = mx.sym.var("data")
    w = mx.sym.var("fc_weight")
    y = mx.sym.relu(mx.sym.matmul(x, w, name="fc"), name="act")
    dot = mx.viz.plot_network(y, title="net", shape={"data": (2, 3), "fc_weight": (3, 4)})
    src = dot.source
    assert src.startswith('digraph "net" {') and src.rstrip().endswith("}")
    assert 'label="act\\nrelu"' in src and 'label="fc\\nmatmul"' in src
    assert "fc_weight" not in src            # weights hidden by default
    assert 'label="2x4"' in src               # edges labelled with inferred shapes
    src2 = mx.viz.plot_network(y, hide_weights=False).source
    assert "fc_weight" in src2
    assert src2.count("->") == 4
