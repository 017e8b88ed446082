"""gluon.Block and HybridBlock, imperative side (MXNet 1.9.1's behaviour).

Names, reprs, file keys, error messages, outputs and gradients of the 1.x MLP come from
MXNet 1.9.1 (``tests/fixtures/make_gluon_params.py`` made ``gluon_params.json`` and the
``.params`` files from the blocks in ``tests/fixtures/gluon_blocks.py``); other values are
closed forms or float64 central differences."""
import contextlib
import copy
import io
import json
import os
import sys
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon
from fastgrad.gluon import Block, HybridBlock, Parameter, DeferredInitializationError, nn

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
sys.path.insert(0, FIXTURES)
import gluon_blocks  # noqa: E402

with open(os.path.join(FIXTURES, "gluon_params.json")) as _f:
    MX = json.load(_f)
MX_DIR = "/work/main/tests/fixtures/"     # where the fixture script ran (in its messages)


def fixture(name):
    return os.path.join(FIXTURES, name)


def mx_message(key, path):
    """MXNet's message with the fixture's file path replaced by ``path``."""
    kind, text = MX[key]
    return kind, text.replace(MX_DIR + "gluon_mlp.params", path)


def raised(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001
        return type(err).__name__, str(err)
    return None


@pytest.fixture
def names():
    """A fresh name counter, as the fixture script used (``mx.name.NameManager()``)."""
    with mx.name.NameManager():
        yield


@pytest.fixture
def np_mode():
    mx.npx.set_np()
    yield
    mx.npx.reset_np()


def mlp(**kwargs):
    return gluon_blocks.MLP(gluon, hidden=4, out=3, **kwargs)


# ---------------------------------------------------------------- names (MXNet's)
def test_names_reprs_and_keys_as_mxnet(names):
    net = mlp()
    assert repr(net) == MX["mlp_repr"]
    assert list(net.collect_params().keys()) == MX["mlp_collect_keys"]
    assert repr(net.collect_params()) == MX["mlp_collect_repr"]
    assert list(net._collect_params_with_prefix().keys()) == MX["mlp_structural_keys"]
    assert list(net.collect_params('.*weight').keys()) == MX["mlp_select_weight"]
    assert net(mx.sym.var('data')).list_arguments() == MX["symbol_arguments"]


def test_prefixes_sharing_and_nested_scopes_as_mxnet(names):
    a = gluon_blocks.Affine(gluon, 2)
    b = gluon_blocks.Affine(gluon, 2)
    c = gluon_blocks.Affine(gluon, 2, prefix='mine_')
    d = gluon_blocks.Affine(gluon, 2, params=a.collect_params())
    nest = gluon_blocks.Nest(gluon)
    got = {
        "a": [a.name, a.prefix, list(a.collect_params().keys())],
        "b": [b.name, b.prefix, list(b.collect_params().keys())],
        "c": [c.name, c.prefix, list(c.collect_params().keys())],
        "d": [d.name, d.prefix, list(d.collect_params().keys()), d.weight is a.weight],
        "nest": [nest.name, list(nest.collect_params().keys()),
                 list(nest._collect_params_with_prefix().keys())],
    }
    assert got == MX["names"]
    assert repr(nest) == MX["nest_repr"]


def test_block_names_share_the_symbol_counter(names):
    # MXNet names blocks with the current mx.name manager, as symbols (MXNet 1.9.1 prints
    # affine0, outer_affine0_, affine1_ here)
    mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2)   # fullyconnected0
    assert gluon_blocks.Affine(gluon, 2).name == 'affine0'
    with mx.name.Prefix('outer_'):
        assert gluon_blocks.Affine(gluon, 2).prefix == 'outer_affine0_'
    assert gluon_blocks.Affine(gluon, 2).prefix == 'affine1_'


def test_empty_prefix_block_has_no_scope(names):
    class Net(HybridBlock):
        def __init__(self):
            super().__init__(prefix='')
            with self.name_scope():
                self.inner = gluon_blocks.Affine(gluon, 2)

        def hybrid_forward(self, F, x):
            return self.inner(x)

    net = Net()
    assert net.prefix == '' and net.name == ''
    assert net.inner.prefix == 'affine0_'


# ---------------------------------------------------------------- values against MXNet
def test_mxnet_params_load_and_give_mxnet_outputs_and_gradients(names):
    net = mlp()
    net.load_parameters(fixture("gluon_mlp.params"))
    x = mx.nd.array(MX["x"])
    with autograd.record():
        y = net(x)
        loss = (y * y).sum()
    loss.backward()
    onp.testing.assert_allclose(y.asnumpy(), MX["y"], rtol=1e-5, atol=1e-6)
    for key, param in net._collect_params_with_prefix().items():
        onp.testing.assert_allclose(param.data().asnumpy(), MX["values"][key], rtol=0, atol=0)
        onp.testing.assert_allclose(param.grad().asnumpy(), MX["grads"][key], rtol=1e-5,
                                    atol=1e-5)


def test_legacy_prefixed_file_loads(names):
    # written by collect_params().save(strip_prefix=net.prefix) in MXNet 1.9.1
    assert sorted(mx.nd.load(fixture("gluon_mlp_legacy.params"))) == [
        'affine0_bias', 'affine0_weight', 'affine1_bias', 'affine1_weight']
    net = mlp()
    net.load_parameters(fixture("gluon_mlp_legacy.params"))
    onp.testing.assert_allclose(net(mx.nd.array(MX["x"])).asnumpy(), MX["legacy_y"],
                                rtol=1e-5, atol=1e-6)


def test_np_format_file_loads_as_np_arrays(names, np_mode):
    net = mlp()
    net.load_parameters(fixture("gluon_mlp_np.params"))
    assert type(net.hidden.weight.data()) is mx.np.ndarray     # MXNet: mxnet.numpy
    assert list(mlp().hidden.weight.shape) == MX["np_shape_deferred"]
    y = net(mx.np.array(MX["x"]))
    assert type(y) is mx.np.ndarray
    onp.testing.assert_allclose(y.asnumpy(), MX["y"], rtol=1e-5, atol=1e-6)


def test_summary_prints_mxnets_table(names):
    net = mlp()
    net.load_parameters(fixture("gluon_mlp.params"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        net.summary(mx.nd.array(MX["x"]))
    assert out.getvalue() == MX["summary"]
    assert not net.hidden._forward_hooks      # its hooks are gone


def test_load_errors_are_mxnets(names, tmp_path):
    path = fixture("gluon_mlp.params")
    mlp()                   # the fixture script made mlp0 first
    small = gluon_blocks.Affine(gluon, 3, in_units=5, prefix='only_')
    assert raised(lambda: small.load_parameters(path)) == mx_message("load_missing_all", path)
    big = gluon_blocks.MLP3(gluon, hidden=4, out=3)
    assert raised(lambda: big.load_parameters(path)) == mx_message("load_missing", path)
    wrong = gluon_blocks.MLP(gluon, hidden=6, out=3)
    kind, text = raised(lambda: wrong.load_parameters(path))
    assert (kind, text) == tuple(MX["load_misshaped"]), text
    # MXNet lists the block's own prefixed names here; fastgrad lists the names it can load
    kind, text = raised(lambda: small.load_parameters(path, allow_missing=True))
    assert kind == "ValueError"
    assert text == ("Parameter 'hidden.weight' loaded from file '%s' is not present in "
                    "ParameterDict, which contains parameters 'weight', 'bias'. Set "
                    "ignore_extra=True to ignore. " % path)
    small.load_parameters(path, allow_missing=True, ignore_extra=True)   # nothing to load


def test_uninitialised_and_deferred_messages_are_mxnets(names):
    net = mlp()
    net.initialize()
    assert raised(lambda: net.hidden.weight.data()) == tuple(MX["deferred_data"])
    assert raised(lambda: Parameter('w', shape=(2,)).data()) == tuple(MX["uninit_data"])
    assert list(net.hidden.weight.shape) == MX["deferred_shape_before"]
    net(mx.nd.ones((2, 5)))
    assert net.hidden.weight.shape == (4, 5) and net.output.weight.shape == (3, 4)


def test_forward_before_initialize_names_the_parameter(names):
    net = mlp()
    with pytest.raises(RuntimeError, match="Parameter 'mlp0_affine0_weight' has not been "
                                           "initialized"):
        net(mx.nd.ones((1, 5)))


# ---------------------------------------------------------------- save/load round trips
def test_save_load_round_trip_and_deduplicate(names, tmp_path):
    net = mlp()
    net.initialize()
    net(mx.nd.ones((1, 5)))
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    assert sorted(mx.nd.load(path)) == sorted(MX["mlp_structural_keys"])
    other = mlp()
    other.load_parameters(path, ctx=mx.cpu(0))
    x = mx.nd.array(MX["x"])
    onp.testing.assert_array_equal(other(x).asnumpy(), net(x).asnumpy())

    class Tied(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.a = gluon_blocks.Affine(gluon, 2, in_units=2)
                self.b = gluon_blocks.Affine(gluon, 2, in_units=2, params=self.a.params)

        def hybrid_forward(self, F, x):
            return self.b(self.a(x))

    tied = Tied()
    tied.initialize()
    tied.save_parameters(path)
    assert sorted(mx.nd.load(path)) == ['a.bias', 'a.weight', 'b.bias', 'b.weight']
    tied.save_parameters(path, deduplicate=True)
    assert sorted(mx.nd.load(path)) == ['b.bias', 'b.weight']   # MXNet keeps the last name
    again = Tied()
    again.load_parameters(path)     # a shared parameter is found under either name
    onp.testing.assert_array_equal(again.a.weight.data().asnumpy(),
                                   tied.a.weight.data().asnumpy())


def test_load_casts_dtype_on_request(names, tmp_path):
    net = gluon_blocks.Affine(gluon, 2, in_units=3)
    net.initialize()
    path = str(tmp_path / "p.params")
    net.cast('float64')
    net.save_parameters(path)
    fresh = gluon_blocks.Affine(gluon, 2, in_units=3)
    with pytest.raises(AssertionError, match="dtype incompatible .* Set cast_dtype=True"):
        fresh.load_parameters(path)
    fresh.load_parameters(path, cast_dtype=True)
    assert fresh.weight.data().dtype == onp.float32
    fresh.load_parameters(path, cast_dtype=True, dtype_source='saved')
    assert fresh.weight.data().dtype == onp.float64


def test_save_params_and_load_params_are_deprecated_aliases(names, tmp_path):
    net = mlp()
    net.initialize()
    net(mx.nd.ones((1, 5)))
    path = str(tmp_path / "old.params")
    with pytest.warns(UserWarning, match="save_params is deprecated"):
        net.save_params(path)
    assert sorted(mx.nd.load(path)) == ['affine0_bias', 'affine0_weight', 'affine1_bias',
                                        'affine1_weight']
    other = mlp()
    with pytest.warns(UserWarning, match="load_params is deprecated"):
        other.load_params(path)
    onp.testing.assert_array_equal(other.output.bias.data().asnumpy(),
                                   net.output.bias.data().asnumpy())


# ---------------------------------------------------------------- attributes
class Leaf(HybridBlock):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.weight = self.params.get('weight', shape=(units,))

    def hybrid_forward(self, F, x, weight):
        return x * weight


def test_attribute_assignment_registers_and_replaces(names):
    class Net(Block):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.layer = Leaf(2)
                self.w = self.params.get('w', shape=(1,))

    net = Net()
    first = net.layer
    assert list(net._children) == ['layer'] and net._reg_params == {'w': net.w}
    with net.name_scope():
        net.layer = Leaf(3)
    assert net._children['layer'] is net.layer is not first
    assert list(net.collect_params().keys()) == ['net0_w', 'net0_leaf1_weight']
    with pytest.raises(TypeError, match="Net: cannot replace attribute 'w' .a Parameter. by a "
                                        "NoneType"):
        net.w = None
    with pytest.raises(TypeError, match="cannot replace attribute 'layer'"):
        net.layer = 3
    with pytest.raises(AssertionError, match="Net: overriding Parameter attribute 'w' is not "
                                             "allowed"):
        net.w = Parameter('other', shape=(1,))
    net.register_child(gluon_blocks.Affine(gluon, 1))
    assert list(net._children) == ['layer', '1']


def test_unregistered_container_warns(names):
    class Net(Block):
        def __init__(self):
            super().__init__()
            self.layers = [gluon_blocks.Affine(gluon, 2)]

        def forward(self, x):
            return self.layers[0](x)

    with pytest.warns(UserWarning, match='"Net.layers" is an unregistered container with '
                                         'Blocks'):
        Net().collect_params()


def test_hybrid_block_children_must_be_hybrid(names):
    class Plain(Block):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match="Children of HybridBlock must also be HybridBlock"):
        HybridBlock().register_child(Plain())


def test_apply_cast_zero_grad_and_hooks(names):
    net = mlp()
    seen = []
    assert net.apply(lambda b: seen.append(b.name)) is net
    assert seen == ['mlp0_affine0', 'mlp0_affine1', 'mlp0']    # children first
    net.initialize()
    calls = []
    pre = net.hidden.register_forward_pre_hook(lambda b, args: calls.append(('pre', b.name,
                                                                             args[0].shape)))
    post = net.hidden.register_forward_hook(lambda b, args, out: calls.append(('post',
                                                                              out.shape)))
    x = mx.nd.ones((2, 5))
    net(x)
    assert calls == [('pre', 'mlp0_affine0', (2, 5)), ('post', (2, 4))]
    pre.detach()
    with post:
        net(x)
    net(x)
    assert calls[2:] == [('post', (2, 4))]
    net.cast('float64')
    assert all(p.dtype == 'float64' for p in net.collect_params().values())
    with autograd.record():
        loss = net(mx.nd.ones((2, 5), dtype='float64')).sum()
    loss.backward()
    assert net.hidden.weight.grad().dtype == onp.float64
    net.zero_grad()
    assert all(onp.all(p.grad().asnumpy() == 0) for p in net.collect_params().values())


def test_gradients_match_finite_differences_float64(names):
    net = mlp()
    net.initialize(mx.init.Uniform(0.5))
    net.cast('float64')
    rng = onp.random.default_rng(1)
    x = rng.uniform(-1, 1, (3, 5))
    net(mx.nd.array(x, dtype='float64'))

    def loss_value():
        return float((net(mx.nd.array(x, dtype='float64')) ** 2).sum().asscalar())

    with autograd.record():
        loss = (net(mx.nd.array(x, dtype='float64')) ** 2).sum()
    loss.backward()
    for param in net.collect_params().values():
        value = param.data().asnumpy().copy()
        numeric = onp.zeros_like(value)
        for index in onp.ndindex(value.shape):
            for sign in (1, -1):
                shifted = value.copy()
                shifted[index] += sign * 1e-6
                param.set_data(mx.nd.array(shifted, dtype='float64'))
                numeric[index] += sign * loss_value() / 2e-6
        param.set_data(mx.nd.array(value, dtype='float64'))
        onp.testing.assert_allclose(param.grad().asnumpy(), numeric, rtol=1e-6, atol=1e-7)


def test_grad_req_null_parameter_gets_no_gradient(names):
    net = mlp()
    # Weights of ones: with random ones, all 4 hidden ReLUs are off for the input of ones one
    # time in 16 (whatever the test before left in the global generator), and the output's
    # gradient is then zero too.
    net.initialize(mx.init.One())
    net.hidden.collect_params().setattr('grad_req', 'null')
    with autograd.record():
        loss = net(mx.nd.ones((2, 5))).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        net.hidden.weight.grad()
    assert net.output.weight.grad().asnumpy().any()


def test_params_arrive_in_the_type_of_the_input(names):
    net = mlp()
    net.initialize()
    assert type(net(mx.nd.ones((1, 5)))) is mx.nd.NDArray
    out = net(mx.np.ones((1, 5)))
    assert type(out) is mx.np.ndarray
    with autograd.record():
        loss = out = net(mx.np.ones((1, 5))).sum()
    loss.backward()
    assert out.shape == () and net.hidden.weight.grad().shape == (4, 5)


def test_hybrid_forward_on_symbols_and_mixed_inputs(names):
    net = gluon_blocks.Affine(gluon, 2)
    out = net(mx.sym.var('data'))
    assert isinstance(out, mx.sym.Symbol)
    assert out.list_arguments() == ['data', 'affine0_weight', 'affine0_bias']

    class Two(HybridBlock):
        def hybrid_forward(self, F, x, y):
            return x + y

    with pytest.raises(ValueError, match="mixed NDArrays and Symbols"):
        Two()(mx.nd.ones((1,)), mx.sym.var('y'))
    with pytest.raises(ValueError, match="there must be one NDArray or one Symbol"):
        Two()(1, 2)


# ---------------------------------------------------------------- 2.x style
class Scale(HybridBlock):
    """A 2.x block: Parameter attributes, forward on mx.np arrays, infer_shape for the
    deferred dimension."""

    def __init__(self):
        super().__init__()
        self.weight = Parameter('weight', shape=(-1,), allow_deferred_init=True)
        self.bias = Parameter('bias', shape=(1,), init=mx.init.Zero())

    def infer_shape(self, x):
        self.weight.shape = (x.shape[-1],)

    def forward(self, x):
        return x * self.weight.data() + self.bias.data()


def test_2x_block_structural_names_np_arrays_and_deferred_init(names):
    net = Scale()
    assert list(net.collect_params().keys()) == ['weight', 'bias']
    net.initialize(mx.init.One())
    with pytest.raises(DeferredInitializationError):
        net.weight.data()
    out = net(mx.np.array([[1.0, 2.0, 3.0]]))
    assert type(out) is mx.np.ndarray and net.weight.shape == (3,)
    assert type(net.weight.data()) is mx.np.ndarray
    with autograd.record():
        loss = net(mx.np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum()
    loss.backward()
    # d/dw sum(x * w + b) = column sums of x; d/db = number of elements
    assert net.weight.grad().asnumpy().tolist() == [5, 7, 9]
    assert net.bias.grad().asnumpy().tolist() == [6]


def test_2x_nested_structural_names_and_share_parameters(names, tmp_path):
    class Two(HybridBlock):
        def __init__(self):
            super().__init__()
            self.first = Scale()
            self.second = Scale()

        def forward(self, x):
            return self.second(self.first(x))

    net = Two()
    assert list(net.collect_params().keys()) == ['first.weight', 'first.bias',
                                                 'second.weight', 'second.bias']
    net.initialize()
    net(mx.np.ones((2, 3)))
    path = str(tmp_path / "two.params")
    net.save_parameters(path)
    other = Two()
    other.load_parameters(path)
    assert other.first.weight.shape == (3,)
    onp.testing.assert_array_equal(other.second.weight.data().asnumpy(),
                                   net.second.weight.data().asnumpy())
    shared = Two().share_parameters(net.collect_params())
    assert shared.first.weight is net.first.weight and shared.second.bias is net.second.bias
    with pytest.warns(UserWarning, match="Parameter name nothing.weight is not in the current "
                                         "model!"):
        Two().share_parameters({'nothing.weight': net.first.weight})
    with pytest.raises(ValueError, match="'shared' should be in type of Dict"):
        Two().share_parameters([net.first.weight])


def test_2x_block_without_infer_shape_explains(names):
    class NoInfer(HybridBlock):
        def __init__(self):
            super().__init__()
            self.weight = Parameter('weight', shape=(-1,), allow_deferred_init=True)

        def forward(self, x):
            return x * self.weight.data()

    net = NoInfer()
    net.initialize()
    with pytest.raises(ValueError, match="Deferred initialization failed because shape cannot "
                                         "be inferred. NoInfer defines forward"):
        net(mx.np.ones((2,)))


def test_share_parameters_by_1x_names(names):
    a = gluon_blocks.Affine(gluon, 2, in_units=3)
    b = gluon_blocks.Affine(gluon, 2, in_units=3)
    b.share_parameters({'affine1_weight': a.weight})     # by b's own parameter name
    assert b.weight is a.weight and b.params['affine1_weight'] is a.weight
    assert b.bias is not a.bias
    b.share_parameters(a._collect_params_with_prefix())   # by structural name
    assert b.bias is a.bias


def test_hybridize_sets_the_flag_recursively(names):
    net = mlp()
    net.hybridize(static_alloc=True)
    assert net._active and net.hidden._active and net.output._active
    net.initialize()
    x = mx.nd.array(MX["x"])
    first = net(x)
    net.hybridize(False)
    assert not net._active and not net.hidden._active
    onp.testing.assert_allclose(net(x).asnumpy(), first.asnumpy(), rtol=1e-6)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter('always')
        net.hidden.register_forward_hook(lambda *a: None)
        net.hidden.hybridize()
    assert any("is being hybridized while still having forward hook" in str(r.message)
               for r in rec)


def test_summary_refuses_a_hybridized_block(names):
    net = mlp()
    net.initialize()
    net.hybridize()
    with pytest.raises(AssertionError, match="must not be hybridized to print summary"):
        net.summary(mx.nd.ones((1, 5)))


def test_an_error_in_a_forward_pass_names_the_innermost_block(names):
    net = mlp()
    net.initialize()
    net(mx.nd.ones((2, 5)))
    with pytest.raises(ValueError) as info:
        net(mx.nd.ones((2, 7)))         # the first layer was made for 5 inputs
    notes = [n for n in getattr(info.value, "__notes__", []) if "forward pass of block" in n]
    assert notes == ["(raised in the forward pass of block 'mlp0_affine0', a Affine)"]


def test_deepcopy_gives_an_independent_trainable_network(names):
    net = mlp()
    net.load_parameters(fixture("gluon_mlp.params"))
    twin = copy.deepcopy(net)
    assert twin.hidden.weight is not net.hidden.weight
    assert twin.hidden.weight.name == net.hidden.weight.name
    x = mx.nd.array(MX["x"])
    with autograd.record():
        loss = (twin(x) ** 2).sum()
    loss.backward()       # MXNet 1.9.1 fails here: its copies are not autograd variables
    for key, param in twin._collect_params_with_prefix().items():
        onp.testing.assert_allclose(param.grad().asnumpy(), MX["grads"][key], rtol=1e-5,
                                    atol=1e-5)
    twin.hidden.weight.set_data(mx.nd.zeros((4, 5)))
    assert net.hidden.weight.data().asnumpy().any()


class Traced(HybridBlock):
    """A deferred weight and no infer_shape: the default traces hybrid_forward on Symbols."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.weight = self.params.get('weight', shape=(units, 0), allow_deferred_init=True)
            self.bias = self.params.get('bias', shape=(units,), init='zeros')

    def hybrid_forward(self, F, x, weight, bias):
        return F.FullyConnected(x, weight, bias, num_hidden=self.weight.shape[0])


def test_default_infer_shape_traces_the_block(names):
    class Two(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.a = Traced(3)
                self.b = Traced(2)

        def hybrid_forward(self, F, x):
            return self.b(self.a(x))

    net = Two()
    net.initialize()
    net.infer_shape(mx.nd.ones((4, 7)))
    assert net.a.weight.shape == (3, 7) and net.b.weight.shape == (2, 3)
    fresh = Two()
    fresh.initialize()
    assert fresh(mx.nd.ones((4, 7))).shape == (4, 2)
    assert fresh.a.weight.shape == (3, 7)


def test_truncated_or_foreign_files_raise_naming_the_file(names, tmp_path):
    net = gluon_blocks.Affine(gluon, 2, in_units=3)
    net.initialize()
    path = str(tmp_path / "t.params")
    net.save_parameters(path)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(ValueError, match="t.params: not a valid MXNet NDArray file: truncated"):
        net.load_parameters(path)
    mx.nd.save(path, [mx.nd.ones((2,))])
    with pytest.raises(ValueError, match="holds 1 unnamed arrays"):
        net.load_parameters(path)


def test_block_save_writes_mxnets_structure_and_load_restores_names(names, tmp_path):
    def build():
        seq = nn.HybridSequential()
        with seq.name_scope():
            seq.add(nn.Dense(3, in_units=2), nn.Dense(2, in_units=3))
        return seq

    seq = build()
    seq.initialize(mx.init.One())
    prefix = str(tmp_path / "seq")
    seq.save(prefix)
    with open(prefix + "-model.json") as f:
        assert json.load(f) == MX["block_save_json"]      # what MXNet 1.9.1 writes
    assert sorted(mx.nd.load(prefix + "-model.params")) == ['0.bias', '0.weight', '1.bias',
                                                            '1.weight']
    other = build()                 # created later: hybridsequential1, dense2, dense3
    assert other[0].name == 'hybridsequential1_dense0'
    other.load(prefix)
    assert other.name == 'hybridsequential0' and other[0].name == 'hybridsequential0_dense0'
    assert list(other[0].params.keys()) == ['hybridsequential0_dense0_weight',
                                            'hybridsequential0_dense0_bias']
    assert other[1].weight.data().asnumpy().tolist() == [[1, 1, 1], [1, 1, 1]]
    with pytest.raises(ValueError, match="does not describe this network"):
        gluon_blocks.Affine(gluon, 2, in_units=2).load(prefix)


def test_collect_params_refuses_two_parameters_of_one_name(names):
    class Twice(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.a = Leaf(2, prefix='same_')
                self.b = Leaf(2, prefix='same_')

        def hybrid_forward(self, F, x):
            return self.b(self.a(x))

    # MXNet 1.9.1 raises the same AssertionError from ParameterDict.update
    with pytest.raises(AssertionError, match="different Parameters with the same name "
                                             "'twice0_same_weight'"):
        Twice().collect_params()


def test_a_1x_parameter_shared_by_attribute_keeps_its_name(names):
    class Holder(HybridBlock):
        def __init__(self, other):
            super().__init__()
            self.w = other.weight             # not made by self.params.get
            with self.name_scope():
                self.inner = other

        def hybrid_forward(self, F, x, w):
            return self.inner(x) * w

    holder = Holder(Leaf(2))
    assert list(holder.collect_params().keys()) == ['leaf0_weight']
    assert list(holder._collect_params_with_prefix().keys()) == ['w', 'inner.weight']


def test_collect_params_also_finds_structural_names(names):
    net = mlp()
    params = net.collect_params()
    assert params['hidden.weight'] is params['mlp0_affine0_weight'] is net.hidden.weight
    assert 'output.bias' in params and 'mlp0_affine1_bias' in params
    assert list(params.keys()) == MX["mlp_collect_keys"]    # keys stay MXNet 1.x's
    assert 'output.bias' not in net.collect_params('.*weight')
    with pytest.raises(KeyError):
        params['hidden.nothing']


def test_default_infer_shape_under_set_np(names, np_mode):
    layer = Traced(3)
    assert layer.weight.shape == (3, -1)
    assert layer.weight.var().list_attr()['__shape__'] == '(3, 0)'   # a Symbol's unknown
    layer.initialize()
    out = layer(mx.np.ones((2, 5)))
    assert out.shape == (2, 3) and layer.weight.shape == (3, 5)
    assert layer.weight.var().list_attr()['__shape__'] == '(3, 5)'


def test_2x_block_parameter_added_after_a_call_is_completed_too(names):
    net = Scale()
    net.initialize()
    net(mx.np.ones((1, 3)))
    net.extra = Parameter('extra', shape=(-1,), allow_deferred_init=True)
    net.extra.initialize()

    def infer_shape(x):
        net.extra.shape = (x.shape[-1],)

    net.infer_shape = infer_shape
    net(mx.np.ones((1, 3)))
    assert net.extra.data().shape == (3,)


class Affine2x(HybridBlock):
    """The 2.x-style twin of gluon_blocks.Affine: Parameter attributes and forward."""

    def __init__(self, units, in_units):
        super().__init__()
        self.weight = Parameter('weight', shape=(units, in_units))
        self.bias = Parameter('bias', shape=(units,))

    def forward(self, x):
        return mx.npx.fully_connected(x, self.weight.data(), self.bias.data(),
                                      num_hidden=self.bias.shape[0])


class MLP2x(HybridBlock):
    def __init__(self):
        super().__init__()
        self.hidden = Affine2x(4, 5)
        self.output = Affine2x(3, 4)

    def forward(self, x):
        return self.output(mx.npx.relu(self.hidden(x)))


def test_mxnet_1x_file_loads_into_a_2x_block(names):
    net = MLP2x()
    assert list(net.collect_params().keys()) == MX["mlp_structural_keys"]
    net.load_parameters(fixture("gluon_mlp.params"))
    x = mx.np.array(MX["x"])
    with autograd.record():
        y = net(x)
        loss = (y * y).sum()
    loss.backward()
    assert type(y) is mx.np.ndarray
    onp.testing.assert_allclose(y.asnumpy(), MX["y"], rtol=1e-5, atol=1e-6)
    for key, param in net.collect_params().items():
        onp.testing.assert_allclose(param.grad().asnumpy(), MX["grads"][key], rtol=1e-5,
                                    atol=1e-5)
