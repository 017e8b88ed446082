"""HybridBlock.hybridize on the Executor, export, SymbolBlock (Note [Hybridize on the executor]
in fastgrad/gluon/_hybrid.py).

The blocks here are written in this file with ``F.FullyConnected``/``F.Convolution``/
``F.BatchNorm``/``F.Dropout`` so that the tests depend only on the Block machinery; the
hybridized path is compared with the imperative one bit for bit (same ops, same order).
"""

import os
import warnings

import numpy as np
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad._core._array import history
from fastgrad.gluon import HybridBlock, SymbolBlock
from fastgrad.gluon._hybrid import TraceError, CachedGraph

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")


class Dense(HybridBlock):
    def __init__(self, units, in_units, act=None, **kwargs):
        super().__init__(**kwargs)
        self.units, self.act = units, act
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, in_units))
            self.bias = self.params.get("bias", shape=(units,))

    def hybrid_forward(self, F, x, weight, bias):
        y = F.FullyConnected(x, weight, bias, num_hidden=self.units)
        return F.relu(y) if self.act == "relu" else y


class Conv(HybridBlock):
    def __init__(self, channels, in_channels, **kwargs):
        super().__init__(**kwargs)
        self.channels = channels
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(channels, in_channels, 3, 3))
            self.bias = self.params.get("bias", shape=(channels,))

    def hybrid_forward(self, F, x, weight, bias):
        return F.Convolution(x, weight, bias, kernel=(3, 3), pad=(1, 1),
                             num_filter=self.channels)


class BN(HybridBlock):
    def __init__(self, channels, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gamma = self.params.get("gamma", shape=(channels,), init="ones")
            self.beta = self.params.get("beta", shape=(channels,), init="zeros")
            self.running_mean = self.params.get("running_mean", shape=(channels,),
                                                init="zeros", grad_req="null")
            self.running_var = self.params.get("running_var", shape=(channels,),
                                               init="ones", grad_req="null")

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, fix_gamma=False,
                           momentum=0.8)


class Net(HybridBlock):
    """Conv -> BatchNorm -> relu -> Dropout(0) -> Dense(relu) -> Dense."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv = Conv(2, 1)
            self.bn = BN(2)
            self.d0 = Dense(6, 2 * 4 * 4, act="relu")
            self.d1 = Dense(3, 6)

    def hybrid_forward(self, F, x):
        h = F.Dropout(F.relu(self.bn(self.conv(x))), p=0.0)
        return self.d1(self.d0(h))


def _twins(cls=Net, dtype="float32", seed=0):
    """Two blocks with equal parameters; the second is hybridized."""
    rng = np.random.RandomState(seed)
    a, b = cls(), cls()
    for net in (a, b):
        net.initialize()
        if dtype != "float32":
            net.cast(dtype)
    for p, q in zip(a.collect_params().values(), b.collect_params().values()):
        if p.name.endswith("running_var"):
            value = rng.rand(*p.shape) + 0.5
        else:
            value = rng.randn(*p.shape) * 0.5
        p.set_data(mx.nd.array(value, dtype=dtype))
        q.set_data(mx.nd.array(value, dtype=dtype))
    b.hybridize()
    return a, b


def _step(net, x):
    with autograd.record():
        y = net(x)
        loss = (y * y).sum()
    loss.backward()
    params = net.collect_params().values()
    return (y.asnumpy(),
            [p.grad().asnumpy().copy() for p in params if p.grad_req != "null"],
            [p.data().asnumpy().copy() for p in params])


def _same(u, v):
    return len(u) == len(v) and all(np.array_equal(a, b) for a, b in zip(u, v))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hybridized_equals_imperative_bit_for_bit(dtype):
    a, b = _twins(dtype=dtype)
    x = mx.nd.array(np.random.RandomState(1).randn(3, 1, 4, 4), dtype=dtype)
    for _ in range(3):          # parameters and moving statistics change between steps
        ya, ga, pa = _step(a, x)
        yb, gb, pb = _step(b, x)
        assert np.array_equal(ya, yb)
        assert _same(ga, gb)        # every parameter gradient
        assert _same(pa, pb)        # BatchNorm's moving statistics included
        assert yb.dtype == np.dtype(dtype)
        for net in (a, b):
            for p in net.collect_params().values():
                if p.grad_req != "null":
                    p.set_data(p.data() - 0.1 * p.grad())
    # predict mode: the moving statistics are used and left alone
    before = [p.data().asnumpy().copy() for p in b.collect_params().values()]
    assert np.array_equal(a(x).asnumpy(), b(x).asnumpy())
    assert _same(before, [p.data().asnumpy() for p in b.collect_params().values()])


def test_input_gradient_and_head_gradient():
    a, b = _twins()
    xa = mx.nd.array(np.random.RandomState(2).randn(2, 1, 4, 4))
    xb = xa.copy()
    head = mx.nd.array(np.random.RandomState(3).randn(2, 3))
    for net, x in ((a, xa), (b, xb)):
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward(head)
    assert np.array_equal(xa.grad.asnumpy(), xb.grad.asnumpy())
    assert np.abs(xb.grad.asnumpy()).sum() > 0


def test_one_node_recorded():
    _, b = _twins()
    x = mx.nd.ones((2, 1, 4, 4))
    with autograd.record():
        y = b(x)
    node, _ = history(y)
    assert node.op.name.startswith("HybridBlock " + b.name)
    parents = [p for p in node.parents_list() if p is not None]
    # the parameters with a gradient, each a variable (leaf) of the tape; x has no history
    n_grad = sum(p.grad_req != "null" for p in b.collect_params().values())
    assert len(parents) == n_grad
    assert all(p.op is None for p in parents)


def test_retrace_on_shape_dtype_and_mode():
    _, b = _twins()
    b(mx.nd.ones((2, 1, 4, 4)))
    graph = b._cached_op
    assert isinstance(graph, CachedGraph) and len(graph.graphs) == 1
    b(mx.nd.ones((2, 1, 4, 4)))
    assert len(graph.graphs) == 1                   # same signature: no new trace
    b(mx.nd.ones((5, 1, 4, 4)))
    assert len(graph.graphs) == 2                   # new batch size
    with autograd.record():
        b(mx.nd.ones((5, 1, 4, 4)))
    assert len(graph.graphs) == 3                   # training mode
    with autograd.record(train_mode=False):
        b(mx.nd.ones((5, 1, 4, 4)))
    assert len(graph.graphs) == 3                   # predict mode, recorded: as before
    # a new dtype: the float32 parameters are cast, the graph is traced again
    b.cast("float64")
    y = b(mx.nd.ones((5, 1, 4, 4), dtype="float64"))
    assert y.dtype == np.float64
    b.hybridize(False)
    assert b(mx.nd.ones((5, 1, 4, 4), dtype="float64")).dtype == np.float64


def test_none_inputs_and_several_outputs():
    class Two(HybridBlock):
        def hybrid_forward(self, F, x, y=None):
            s = x * 2 if y is None else x + y
            return s, F.relu(s)

    net = Two()
    net.hybridize()
    x = mx.nd.array([[-1.0, 2.0]])
    s, r = net(x)
    assert np.array_equal(s.asnumpy(), [[-2.0, 4.0]]) and np.array_equal(r.asnumpy(),
                                                                         [[0.0, 4.0]])
    s, _ = net(x, None)                            # a trailing None: the default
    assert np.array_equal(s.asnumpy(), [[-2.0, 4.0]])
    # which inputs are None is fixed by the first call, as in MXNet
    with pytest.raises(ValueError, match="argument structure does not match"):
        net(x, x)
    net.hybridize()
    s, r = net(x, x)
    assert np.array_equal(s.asnumpy(), [[-2.0, 4.0]])


def test_grad_req_add_and_null():
    a, b = _twins()
    x = mx.nd.array(np.random.RandomState(4).randn(2, 1, 4, 4))
    for net in (a, b):
        for name, p in net.collect_params().items():
            if p.grad_req != "null":
                p.grad_req = "null" if name.endswith("d1_bias") else "add"
        net.zero_grad()
        _step(net, x)
        _step(net, x)
    ga = [p.grad().asnumpy() for p in a.collect_params().values() if p.grad_req != "null"]
    gb = [p.grad().asnumpy() for p in b.collect_params().values() if p.grad_req != "null"]
    assert _same(ga, gb)
    single = _twins()[1]
    _, g1, _ = _step(single, x)
    # two accumulated steps with the moving statistics of the first: compare the first layer,
    # whose gradient does not depend on them, with twice one step
    assert np.allclose(gb[0], 2 * g1[0], rtol=1e-5)


def test_parameters_read_at_every_call():
    a, b = _twins()
    x = mx.nd.ones((1, 1, 4, 4))
    y0 = b(x).asnumpy()
    for net in (a, b):
        w = net.d1.weight
        w.set_data(w.data() * 3)
    y1 = b(x).asnumpy()
    assert not np.array_equal(y0, y1)
    assert np.array_equal(a(x).asnumpy(), y1)


def test_block_called_twice_in_one_recording():
    class Twice(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.d = Dense(4, 4, act="relu")

        def forward(self, x):       # a plain Block-like forward calling a hybridized child
            return self.d(self.d(x) * 0.5)

    a, b = Twice(), Twice()
    for net in (a, b):
        net.initialize()
    b.d.weight.set_data(a.d.weight.data())
    b.d.bias.set_data(a.d.bias.data())
    b.d.hybridize()
    x = mx.nd.array(np.random.RandomState(5).randn(3, 4))
    ga, gb = [], []
    for net, out in ((a, ga), (b, gb)):
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        out.extend([net.d.weight.grad().asnumpy(), net.d.bias.grad().asnumpy()])
    assert _same(ga, gb)


def test_dropout_stays_random():
    class Drop(HybridBlock):
        def hybrid_forward(self, F, x):
            return F.Dropout(x, p=0.5)

    net = Drop()
    net.hybridize()
    x = mx.nd.ones((64, 64))
    masks = []
    for _ in range(3):
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward()
        out = y.asnumpy()
        assert set(np.unique(out)) <= {0.0, 2.0}
        # the gradient uses this call's mask
        assert np.array_equal(x.grad.asnumpy(), out)
        masks.append(out)
    assert not np.array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[1], masks[2])
    assert np.array_equal(net(x).asnumpy(), x.asnumpy())      # predict mode: identity


def test_create_graph_is_refused_clearly():
    _, b = _twins()
    x = mx.nd.ones((1, 1, 4, 4))
    x.attach_grad()
    with autograd.record():
        y = b(x)
    with pytest.raises(NotImplementedError, match="HybridBlock .*create_graph"):
        autograd.grad(y, [x], create_graph=True)


# ---------------------------------------------------------------- errors

def test_value_dependent_control_flow_names_the_block():
    class Branchy(HybridBlock):
        def hybrid_forward(self, F, x):
            if x.sum() > 0:
                return x * 2
            return x

    class Reader(HybridBlock):
        def hybrid_forward(self, F, x):
            return x * float(x.asnumpy().sum())

    for cls in (Branchy, Reader):
        net = cls(prefix="odd_")
        assert np.array_equal(net(mx.nd.ones((2,))).asnumpy(),
                              np.ones(2) * 2)         # imperatively fine
        net.hybridize()
        with pytest.raises(TraceError, match=r"HybridBlock odd \(%s\)" % cls.__name__):
            net(mx.nd.ones((2,)))


def test_value_dependent_child_is_named():
    class Branchy(HybridBlock):
        def hybrid_forward(self, F, x):
            return x if x.sum() > 0 else -x

    class Outer(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.inner = Branchy()

        def hybrid_forward(self, F, x):
            return self.inner(x) + 1

    net = Outer(prefix="outer_")
    net.hybridize()
    with pytest.raises(TraceError, match=r"HybridBlock outer_branchy0 \(Branchy\)"):
        net(mx.nd.ones((2,)))


def test_wrong_number_of_inputs():
    _, b = _twins()
    with pytest.raises(TypeError, match=r"HybridBlock %s \(Net\): hybrid_forward cannot take "
                       r"2 inputs" % b.name):
        b(mx.nd.ones((1, 1, 4, 4)), mx.nd.ones((1,)))
    data = mx.sym.var("data")
    net = SymbolBlock(mx.sym.relu(data), data)
    with pytest.raises(ValueError, match="SymbolBlock: expected 1 inputs"):
        net(mx.nd.ones((2,)), mx.nd.ones((2,)))


def test_input_shape_disagreeing_with_parameters_names_the_layer():
    _, b = _twins()
    with pytest.raises(ValueError, match=r"HybridBlock %s \(Net\).*in %s \(Conv\)"
                       % (b.name, b.conv.name)):
        b(mx.nd.ones((2, 3, 4, 4)))             # 3 channels where the weight takes 1
    assert b(mx.nd.ones((2, 1, 4, 4))).shape == (2, 3)      # still usable


def test_non_array_input():
    _, b = _twins()
    with pytest.raises(ValueError, match="must be \\(nested\\) list of Symbol or NDArray"):
        b(mx.nd.ones((1, 1, 4, 4)), 3)


# ---------------------------------------------------------------- 2.x blocks

def test_2x_block_runs_imperatively_with_one_warning():
    class Scale2(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.w = gluon.Parameter("w", shape=(3,), init=mx.init.One())

        def forward(self, x):
            return x * self.w.data()

    net = Scale2()
    net.initialize()
    net.hybridize()
    x = mx.np.ones((2, 3))
    with pytest.warns(UserWarning, match="runs this block imperatively"):
        y = net(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = net(x)
    assert np.array_equal(y.asnumpy(), np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="cannot be exported"):
        net.export("/nonexistent/never")


def test_2x_block_inside_a_hybridized_1x_container():
    # MXNet 2.x's model zoo style: 2.x blocks (forward) held by a HybridSequential; the
    # container's trace meets the 2.x child on Symbols and runs imperatively (it raised
    # "a hybridized block takes arrays (or None), got a Symbol")
    class Residual2(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.body = mx.gluon.nn.Dense(3, in_units=3)

        def forward(self, x):
            return mx.npx.relu(x + self.body(x))

    mx.npx.set_np()
    try:
        with mx.name.NameManager():
            seq = mx.gluon.nn.HybridSequential()
            seq.add(Residual2(), mx.gluon.nn.Dense(2, in_units=3))
        seq.initialize(mx.init.Xavier())
        x = mx.np.array(np.random.RandomState(0).randn(4, 3))
        expected = seq(x).asnumpy()
        seq.hybridize()
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            y = seq(x)
        # the container (for its child) and the child itself, each once
        assert sorted(str(w.message).split(":")[0] for w in rec) == [
            "HybridBlock hybridsequential0 (HybridSequential)",
            "HybridBlock residual20 (Residual2)"]
        assert "its child residual20 (Residual2) defines forward()" in str(rec[0].message) + \
            str(rec[1].message)
        assert np.array_equal(y.asnumpy(), expected)
        assert np.array_equal(seq(x).asnumpy(), expected)
    finally:
        mx.npx.reset_np()


# ---------------------------------------------------------------- export and SymbolBlock

def test_export_imports_round_trip(tmp_path):
    a, b = _twins()
    x = mx.nd.array(np.random.RandomState(6).randn(2, 1, 4, 4))
    with pytest.raises(RuntimeError, match="hybridize"):
        a.export(str(tmp_path / "early"))
    expected = b(x).asnumpy()
    path = str(tmp_path / "net")
    b.export(path, epoch=3)
    assert os.path.exists(path + "-symbol.json") and os.path.exists(path + "-0003.params")
    saved = mx.nd.load(path + "-0003.params")
    names = {p.name for p in b.collect_params().values()}
    assert {k[4:] for k in saved} == names
    assert {k[:4] for k in saved} == {"arg:", "aux:"}
    assert all(k.startswith("aux:") == k.endswith(("running_mean", "running_var"))
               for k in saved)
    net = SymbolBlock.imports(path + "-symbol.json", ["data"], path + "-0003.params")
    assert np.array_equal(net(x).asnumpy(), expected)
    # differentiable: the same gradients as the block it came from
    _, gb, _ = _step(b, x)
    y, gn, _ = _step(net, x)
    by_name = dict(zip([p.name for p in b.collect_params().values() if p.grad_req != "null"],
                       gb))
    mine = [p.name for p in net.collect_params().values() if p.grad_req != "null"]
    assert all(np.array_equal(by_name[n], g) for n, g in zip(mine, gn))


def test_mxnet_exported_fixture_loads():
    prefix = os.path.join(FIXTURES, "gluon_hybridize_mxnet")
    ref = np.load(prefix + ".npz")
    net = SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
    x = mx.nd.array(ref["x"])
    np.testing.assert_allclose(net(x).asnumpy(), ref["out"], rtol=1e-5, atol=1e-5)
    x.attach_grad()
    with autograd.record():
        y = net(x)
        loss = (y ** 2).sum()
    loss.backward()
    np.testing.assert_allclose(y.asnumpy(), ref["train_out"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.asnumpy(), ref["grad:x"], rtol=1e-5, atol=1e-5)
    for name, p in net.collect_params().items():
        if p.grad_req != "null":
            np.testing.assert_allclose(p.grad().asnumpy(), ref["grad:" + name], rtol=1e-5,
                                       atol=1e-5)
        else:
            np.testing.assert_allclose(p.data().asnumpy(), ref["after:" + name], rtol=1e-5,
                                       atol=1e-6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), y.asnumpy() * 0 + net(x).asnumpy())


def test_symbol_block_inside_a_traced_block():
    data = mx.sym.var("data")
    inner = SymbolBlock(mx.sym.FullyConnected(data, num_hidden=3, name="fc"), data)
    inner.initialize(mx.init.One())

    class Outer(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.inner = inner

        def hybrid_forward(self, F, x):
            return F.relu(self.inner(x)) * 2

    net = Outer()
    x = mx.nd.ones((2, 4))
    expected = net(x).asnumpy()
    assert np.array_equal(expected, np.full((2, 3), 10.0))
    net.hybridize()
    with autograd.record():
        y = net(x)
    y.backward()
    assert np.array_equal(y.asnumpy(), expected)
    assert np.array_equal(inner.params["fc_bias"].grad().asnumpy(), np.full(3, 4.0))
    assert "fc_weight" in net._cached_op.last.symbol.list_arguments()


def test_imports_bad_files(tmp_path):
    _, b = _twins()
    b(mx.nd.ones((1, 1, 4, 4)))
    path = str(tmp_path / "net")
    b.export(path)
    text = open(path + "-symbol.json").read()
    bad = tmp_path / "bad-symbol.json"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="bad-symbol.json.*corrupt or truncated"):
        SymbolBlock.imports(str(bad), ["data"])
    with pytest.raises(ValueError, match="not arguments of the Symbol"):
        SymbolBlock.imports(path + "-symbol.json", ["input"], path + "-0000.params")
    blob = open(path + "-0000.params", "rb").read()
    cut = tmp_path / "cut.params"
    cut.write_bytes(blob[: len(blob) - 7])
    with pytest.raises(Exception, match="cut.params"):
        SymbolBlock.imports(path + "-symbol.json", ["data"], str(cut))
    with pytest.raises(FileNotFoundError):
        SymbolBlock.imports(str(tmp_path / "missing-symbol.json"), ["data"])


def test_symbol_block_deferred_shapes():
    data = mx.sym.var("data")
    out = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    net = SymbolBlock(out, data)
    net.initialize(mx.init.One())
    y = net(mx.nd.ones((3, 5)))
    assert net.params["fc_weight"].shape == (2, 5)
    assert np.array_equal(y.asnumpy(), np.full((3, 2), 6.0))


def test_dropout_seeded_equals_imperative():
    class DropNet(Net):
        def hybrid_forward(self, F, x):
            h = F.Dropout(F.relu(self.bn(self.conv(x))), p=0.5)
            return self.d1(F.Dropout(self.d0(h), p=0.3))

    a, b = _twins(DropNet)
    x = mx.nd.array(np.random.RandomState(8).randn(2, 1, 4, 4))
    for seed in (1, 2):
        mx.random.seed(seed)
        ya, ga, _ = _step(a, x)
        mx.random.seed(seed)
        yb, gb, _ = _step(b, x)
        assert np.array_equal(ya, yb) and _same(ga, gb)


def test_deferred_parameters_then_traced():
    class Lazy(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.weight = self.params.get("weight", shape=(2, 0),
                                              allow_deferred_init=True)

        def infer_shape(self, x):
            self.weight.shape = (2, x.shape[1])

        def hybrid_forward(self, F, x, weight):
            return F.FullyConnected(x, weight, num_hidden=2, no_bias=True)

    net = Lazy()
    net.initialize(mx.init.One())
    net.hybridize()
    x = mx.nd.ones((3, 4))
    first = net(x)              # imperatively: completes the weight's shape
    assert net.weight.shape == (2, 4)
    second = net(x)             # traced
    assert np.array_equal(first.asnumpy(), second.asnumpy())
    assert len(net._cached_op.graphs) == 1


def test_parameter_changed_dtype_retraces():
    _, b = _twins()
    x = mx.nd.ones((1, 1, 4, 4))
    b(x)
    graph = b._cached_op
    b.d1.bias.cast("float64")           # one Parameter, behind the block's back
    y = b(x)
    assert b._cached_op is graph and len(graph.graphs) == 1
    assert y.dtype == np.float64


def test_signatures_are_bounded(monkeypatch):
    from fastgrad.gluon import _hybrid

    monkeypatch.setattr(_hybrid, "MAX_SIGNATURES", 2)

    class Double(HybridBlock):
        def hybrid_forward(self, F, x):
            return x * 2

    net = Double()
    net.hybridize()
    for n in (1, 2, 1, 3):
        assert np.array_equal(net(mx.nd.ones((n,))).asnumpy(), np.full(n, 2.0))
    assert [k[2][0] for k in net._cached_op.graphs] == [(1,), (3,)]


def test_export_after_one_deferred_call_and_float64(tmp_path):
    class Lazy(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.weight = self.params.get("weight", shape=(2, 0),
                                              allow_deferred_init=True)
                self.bias = self.params.get("bias", shape=(2,))

        def infer_shape(self, x):
            self.weight.shape = (2, x.shape[1])

        def hybrid_forward(self, F, x, weight, bias):
            return F.FullyConnected(x, weight, bias, num_hidden=2)

    net = Lazy(prefix="lazy_")
    net.initialize()
    net.cast("float64")
    net.hybridize()
    x = mx.nd.ones((3, 4), dtype="float64")
    y = net(x)                          # imperative (deferred shapes), traced as well
    path = str(tmp_path / "lazy")
    net.export(path)
    # the variables carry the Parameters' current shape and dtype (after cast and deferral)
    data = mx.sym.var("data", dtype="float64")
    block = SymbolBlock(mx.sym.load(path + "-symbol.json"), data)
    assert block.params["lazy_weight"].dtype == np.float64
    block.collect_params().load(path + "-0000.params")
    assert np.array_equal(block(x).asnumpy(), y.asnumpy())
    assert repr(block).splitlines() == ["SymbolBlock(", "<Symbol lazy_fullyconnected0> "
                                        ": 1 -> 1", ")"]
    # without a declared input dtype the Parameters are float32, as in MXNet
    assert SymbolBlock.imports(path + "-symbol.json", "data").params["lazy_bias"].dtype \
        == np.float32


def test_weight_used_twice_in_one_graph():
    class Tied(HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.weight = self.params.get("weight", shape=(4, 4))
                self.other = self.params.get("other", shape=(3, 4))

        def hybrid_forward(self, F, x, weight, other):
            h = F.relu(F.FullyConnected(x, weight, no_bias=True, num_hidden=4))
            h = F.FullyConnected(h, weight, no_bias=True, num_hidden=4)
            return F.FullyConnected(h, other, no_bias=True, num_hidden=3)

    a, b = _twins(Tied)
    x = mx.nd.array(np.random.RandomState(9).randn(5, 4))
    ya, ga, _ = _step(a, x)
    yb, gb, _ = _step(b, x)
    assert np.array_equal(ya, yb) and _same(ga, gb)
    traced = b._cached_op.last
    flipped = dict(zip(traced.arg_names, traced.transposed))
    # the tied weight feeds two transposes: bound as it is; the other as its transpose
    assert not flipped[b.weight.name] and flipped[b.other.name]


def test_recorded_in_predict_mode():
    a, b = _twins()
    x = mx.nd.array(np.random.RandomState(10).randn(3, 1, 4, 4))
    results = []
    for net in (a, b):
        with autograd.record(train_mode=False):     # moving statistics used, not updated
            y = net(x)
            loss = (y * y).sum()
        loss.backward()
        params = net.collect_params().values()
        results.append((y.asnumpy(), [p.grad().asnumpy() for p in params
                                      if p.grad_req != "null"],
                        [p.data().asnumpy() for p in params]))
    (ya, ga, pa), (yb, gb, pb) = results
    assert np.array_equal(ya, yb) and _same(ga, gb) and _same(pa, pb)


def test_backward_with_retain_graph_twice_equals_imperative():
    # A pass that retains the graph leaves the executor's values alone (Note [Slot lifetimes]
    # in _plan.pyx): a second backward through the same call gives the same gradients, which
    # 'add' accumulates, as imperatively.
    a, b = _twins()
    x = mx.nd.array(np.random.RandomState(6).randn(3, 1, 4, 4))
    grads = []
    for net in (a, b):
        for p in net.collect_params().values():
            if p.grad_req != "null":
                p.grad_req = "add"
                p.zero_grad()
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward(retain_graph=True)
        once = [p.grad().asnumpy().copy() for p in net.collect_params().values()
                if p.grad_req != "null"]
        loss.backward()
        twice = [p.grad().asnumpy().copy() for p in net.collect_params().values()
                 if p.grad_req != "null"]
        assert _same([2 * g for g in once], twice)
        grads.append(twice)
    assert _same(grads[0], grads[1])
    with pytest.raises(Exception, match="retain_graph"):
        loss.backward()         # the last pass did not retain it


def test_a_pass_that_does_not_retain_releases_the_values_backward_has_read():
    # Each value is dropped once the last step reading it has run, as the tape drops a node's
    # (Note [Slot lifetimes] in _plan.pyx): after such a backward the executor holds none of
    # the eight 2 MiB results of tanh its rules read; a pass that retains the graph keeps them.
    class Chain(HybridBlock):
        def hybrid_forward(self, F, x):
            for _ in range(8):
                x = F.tanh(x)
            return x

    import tracemalloc
    net = Chain()
    net.initialize()
    net.hybridize()
    start = np.linspace(-1, 1, 512 * 512).reshape(512, 512)
    want = np.ones_like(start)
    v = start
    for _ in range(8):
        v = np.tanh(v)
        want = want * (1 - v * v)
    x = mx.nd.array(start, dtype="float64")
    x.attach_grad()
    held = {}
    for retain in (False, True, False):
        with autograd.record():
            y = net(x)
        tracemalloc.start()
        try:
            with autograd.record():
                y = net(x)
            y.backward(retain_graph=retain)
            del y
            held[retain] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        np.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-13)
    mib = 1 << 20
    assert held[True] >= 16 * mib, held[True] / mib
    assert held[False] <= 5 * mib, held[False] / mib    # x.grad, the output buffer
