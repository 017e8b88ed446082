"""gluon.rnn: the fused RNN/LSTM/GRU layers and the recurrent cells (MXNet 1.9.1's).

Values, gradients, reprs and ``save_parameters`` files come from MXNet 1.9.1
(``tests/fixtures/make_gluon_rnn.py`` made ``gluon_rnn.npz``, float64); other checks are
float64 central differences along random directions, the fused layer against the same
network unrolled from cells, and hybridized against imperative (bit for bit)."""
import json
import os
import tempfile

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, gluon, nd
from fastgrad.gluon import rnn

from tests._helpers import central_difference, assert_fd_close

FIXTURE = onp.load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "fixtures", "gluon_rnn.npz"))
T, N, I, H = 4, 3, 5, 6
MODES = ["rnn_relu", "rnn_tanh", "lstm", "gru"]
CONFIGS = {"2bi_tnc": dict(num_layers=2, bidirectional=True, layout="TNC"),
           "1uni_ntc": dict(num_layers=1, bidirectional=False, layout="NTC")}


def make_layer(mode, hidden=H, **kwargs):
    if mode.startswith("rnn_"):
        return rnn.RNN(hidden, activation=mode[4:], **kwargs)
    return {"lstm": rnn.LSTM, "gru": rnn.GRU}[mode](hidden, **kwargs)


def f64(a):
    return nd.array(a, dtype="float64")


def short(block):
    return {k[len(block.prefix):]: v for k, v in block.collect_params().items()}


def load_params(key, params):
    names = sorted(k[len(key) + 7:] for k in FIXTURE.files if k.startswith(key + ".param."))
    assert sorted(params) == names
    for name in names:
        params[name].set_data(f64(FIXTURE["%s.param.%s" % (key, name)]))


def check_against_fixture(key, params, inputs, run, rtol=1e-10, atol=1e-12):
    """Run ``run(inputs)`` with the fixture's parameters; compare outputs and the gradients of
    the fixture's weighted sum with MXNet's."""
    load_params(key, params)
    for v in inputs.values():
        v.attach_grad()
    with autograd.record():
        results = run(inputs)
        loss = sum((r * f64(FIXTURE["%s.w%d" % (key, i)])).sum()
                   for i, r in enumerate(results))
    loss.backward()
    for i, r in enumerate(results):
        onp.testing.assert_allclose(r.asnumpy(), FIXTURE["%s.out%d" % (key, i)], rtol=rtol,
                                    atol=atol, err_msg="output %d" % i)
    for name, p in params.items():
        onp.testing.assert_allclose(p.grad().asnumpy(), FIXTURE["%s.grad.%s" % (key, name)],
                                    rtol=rtol, atol=atol, err_msg="gradient of " + name)
    for name, v in inputs.items():
        onp.testing.assert_allclose(v.grad.asnumpy(), FIXTURE["%s.ingrad.%s" % (key, name)],
                                    rtol=rtol, atol=atol, err_msg="gradient of " + name)


def fixture_inputs(key, names):
    return {n: f64(FIXTURE["%s.in.%s" % (key, n)]) for n in names}


# ---------------------------------------------------------------- layers against MXNet

@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", MODES)
def test_layer_equals_mxnet(mode, config):
    key = "layer.%s.%s" % (mode, config)
    layer = make_layer(mode, dtype="float64", **CONFIGS[config])
    assert repr(layer) == str(FIXTURE[key + ".repr_before"])
    layer.initialize()
    n_states = 2 if mode == "lstm" else 1
    inputs = fixture_inputs(key, ["x"] + ["s%d" % i for i in range(n_states)])
    layer(inputs["x"], [inputs["s%d" % i] for i in range(n_states)])
    assert repr(layer) == str(FIXTURE[key + ".repr"])

    def run(inp):
        out, states = layer(inp["x"], [inp["s%d" % i] for i in range(n_states)])
        return [out] + list(states)
    # MXNet's CPU kernel of the fused operator is about float32-accurate even in float64
    # (tests/api/test_rnn.py sees the same); the cells below agree to float64 rounding
    check_against_fixture(key, short(layer), inputs, run, rtol=1e-5, atol=1e-6)


def test_layer_parameter_names_are_mxnets():
    layer = rnn.LSTM(4, num_layers=2, bidirectional=True, prefix="lstm0_")
    names = list(layer.collect_params().keys())
    assert names[:5] == ["lstm0_l0_i2h_weight", "lstm0_l0_h2h_weight", "lstm0_l0_i2h_bias",
                         "lstm0_l0_h2h_bias", "lstm0_r0_i2h_weight"]
    assert len(names) == 16 and names[-1] == "lstm0_r1_h2h_bias"
    assert layer.l1_i2h_weight.shape == (16, 8)
    assert rnn.GRU(3, prefix="gru0_").l0_h2h_weight.shape == (9, 3)


def test_lstm_projection_equals_mxnet_and_finite_differences():
    key = "layer.lstmp"
    layer = rnn.LSTM(H, num_layers=2, bidirectional=True, projection_size=3, dtype="float64")
    layer.initialize()
    inputs = fixture_inputs(key, ["x", "s0", "s1"])
    assert [s.shape for s in layer.begin_state(N)] == [(4, N, 3), (4, N, H)]
    layer(inputs["x"], [inputs["s0"], inputs["s1"]])
    assert layer.l1_i2h_weight.shape == (4 * H, 6) and layer.r1_h2r_weight.shape == (3, H)
    load_params(key, short(layer))
    out, states = layer(inputs["x"], [inputs["s0"], inputs["s1"]])
    for i, r in enumerate([out] + states):
        onp.testing.assert_allclose(r.asnumpy(), FIXTURE["%s.out%d" % (key, i)], rtol=1e-5,
                                    atol=1e-6)
    # MXNet 1.9.1 has no CPU backward for the projection: finite differences instead
    check_directional_gradients(layer, lambda x: layer(x, [inputs["s0"], inputs["s1"]]),
                                inputs["x"])


def test_layer_save_keys_and_mxnet_files():
    for name, bi in (("bi", True), ("uni", False)):
        layer = rnn.LSTM(H, num_layers=2, bidirectional=bi, input_size=I)
        assert sorted(layer._collect_params_with_prefix()) == list(FIXTURE["save.%s.keys" % name])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "lstm.params")
            FIXTURE["save.%s.file" % name].tofile(path)
            layer.load_parameters(path)
            y = layer(nd.array(FIXTURE["save.%s.x" % name]))
            onp.testing.assert_allclose(y.asnumpy(), FIXTURE["save.%s.y" % name], rtol=1e-5,
                                        atol=1e-6)
            # and back: fastgrad's file has MXNet's keys and loads into a fresh layer
            layer.save_parameters(path)
            again = rnn.LSTM(H, num_layers=2, bidirectional=bi)
            again.load_parameters(path)
            assert (again(nd.array(FIXTURE["save.%s.x" % name])) == y).asnumpy().all()


# ---------------------------------------------------------------- cells against MXNet

def make_cell(kind):
    return {"rnn": rnn.RNNCell, "lstm": rnn.LSTMCell, "gru": rnn.GRUCell}[kind](H, prefix="c_")


@pytest.mark.parametrize("valid", ["full", "valid"])
@pytest.mark.parametrize("merge", ["merge", "list"])
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_cell_unroll_equals_mxnet(kind, merge, valid):
    key = "cell.%s.%s.%s" % (kind, merge, valid)
    cell = make_cell(kind)
    assert repr(cell) == str(FIXTURE["cell.%s.repr_before" % kind])
    cell.cast("float64")
    cell.initialize()
    n = len(cell.state_info())
    inputs = fixture_inputs(key, ["x"] + ["s%d" % i for i in range(n)])
    cell.unroll(T, inputs["x"], begin_state=[inputs["s%d" % i] for i in range(n)])
    assert repr(cell) == str(FIXTURE["cell.%s.repr" % kind])

    def run(inp):
        out, states = cell.unroll(T, inp["x"], begin_state=[inp["s%d" % i] for i in range(n)],
                                  layout="NTC", merge_outputs=merge == "merge",
                                  valid_length=f64([4, 1, 3]) if valid == "valid" else None)
        assert isinstance(out, list) == (merge == "list")
        return (out if isinstance(out, list) else [out]) + list(states)
    check_against_fixture(key, short(cell), inputs, run)


def test_bidirectional_cell_with_valid_length_equals_mxnet():
    key = "cell.bi"
    cell = rnn.BidirectionalCell(rnn.LSTMCell(H, prefix="l_"), rnn.LSTMCell(H, prefix="r_"))
    cell.cast("float64")
    cell.initialize()
    inputs = fixture_inputs(key, ["x", "s0", "s1", "s2", "s3"])
    begin = [inputs["s%d" % i] for i in range(4)]
    cell.unroll(T, inputs["x"], begin_state=begin, layout="TNC")
    assert repr(cell) == str(FIXTURE[key + ".repr"])

    def run(inp):
        out, states = cell.unroll(T, inp["x"], begin_state=[inp["s%d" % i] for i in range(4)],
                                  layout="TNC", merge_outputs=True, valid_length=f64([4, 1, 3]))
        return [out] + list(states)
    check_against_fixture(key, dict(cell.collect_params().items()), inputs, run)


def test_sequential_stack_with_dropout_and_residual_equals_mxnet():
    key = "cell.stack"
    stack = rnn.SequentialRNNCell(prefix="s_")
    with stack.name_scope():
        stack.add(rnn.LSTMCell(H, prefix="a_"))
        stack.add(rnn.DropoutCell(0.0))
        stack.add(rnn.ResidualCell(rnn.GRUCell(H, prefix="b_")))
    stack.cast("float64")
    stack.initialize()
    inputs = fixture_inputs(key, ["x", "s0", "s1", "s2"])
    stack.unroll(T, inputs["x"], begin_state=[inputs["s%d" % i] for i in range(3)])
    assert repr(stack) == str(FIXTURE[key + ".repr"])
    assert len(stack) == 3 and isinstance(stack[2], rnn.ResidualCell)

    def run(inp):
        out, states = stack.unroll(T, inp["x"], begin_state=[inp["s%d" % i] for i in range(3)],
                                   merge_outputs=True)
        return [out] + list(states)
    check_against_fixture(key, dict(stack.collect_params().items()), inputs, run)
    zoneout = rnn.ZoneoutCell(rnn.GRUCell(H, prefix="z_"), zoneout_outputs=0.25,
                              zoneout_states=0.5)
    assert repr(zoneout) == str(FIXTURE["cell.zoneout.repr"])


def test_sequence_operators_equal_mxnet():
    data, lengths = f64(FIXTURE["seq.data"]), f64([2, 4, 1])
    cases = [(nd.SequenceLast(data, lengths, use_sequence_length=True), "seq.last"),
             (nd.SequenceLast(nd.swapaxes(data, 0, 1), lengths, use_sequence_length=True,
                              axis=1), "seq.last_axis1"),
             (nd.SequenceReverse(data, lengths, use_sequence_length=True), "seq.reverse"),
             (nd.SequenceMask(data, lengths, use_sequence_length=True, value=-1), "seq.mask")]
    for got, key in cases:
        assert (got.asnumpy() == FIXTURE[key]).all(), key
    # symbolic forms give the same values
    d, l = mx.sym.var("d"), mx.sym.var("l")
    for op, key in ((mx.sym.SequenceLast, "seq.last"), (mx.sym.SequenceReverse, "seq.reverse")):
        got = op(d, l, use_sequence_length=True).eval(d=data, l=lengths)[0]
        assert (got.asnumpy() == FIXTURE[key]).all(), key
    with pytest.raises(ValueError, match="axis must be 0"):
        nd.SequenceReverse(data, axis=1)
    with pytest.raises(ValueError, match=r"SequenceLast: every sequence_length must be in"):
        nd.SequenceLast(data, f64([0, 1, 1]), use_sequence_length=True)


# ---------------------------------------------------------------- gradients, consistency

def check_directional_gradients(block, forward, x, seed=3):
    """autograd's gradients of a weighted sum of ``forward(x)`` against central differences
    along one random direction per parameter and for the input."""
    rng = onp.random.default_rng(seed)

    def outputs(x):
        out = forward(x)
        return [out[0]] + list(out[1]) if isinstance(out, tuple) else [out]
    ws = [f64(rng.uniform(0.5, 1.5, o.shape)) for o in outputs(x)]

    def loss(x):
        return sum((o * w).sum() for o, w in zip(outputs(x), ws))
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        total = loss(x)
    total.backward()
    for name, p in list(block.collect_params().items()) + [("x", None)]:
        value = x if p is None else p.data()
        grad = x.grad if p is None else p.grad()
        direction = rng.standard_normal(value.shape)
        base = value.asnumpy().copy()

        def phi(t):
            moved = f64(base + t * direction)
            if p is None:
                return float(loss(moved).asnumpy().sum())
            p.set_data(moved)
            try:
                return float(loss(x).asnumpy().sum())
            finally:
                p.set_data(f64(base))
        assert_fd_close(float((grad.asnumpy() * direction).sum()), central_difference(phi),
                        what=name, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode", ["rnn_tanh", "lstm", "gru"])   # (relu's kink: fixture only)
def test_layer_gradients_equal_finite_differences(mode):
    layer = make_layer(mode, hidden=3, num_layers=2, bidirectional=True, layout="NTC",
                       dtype="float64")
    layer.initialize(mx.init.Uniform(0.7))
    x = f64(onp.random.default_rng(1).uniform(-1, 1, (2, 3, 2)))
    states = [f64(onp.random.default_rng(2).uniform(-1, 1, s.shape))
              for s in layer.begin_state(2)]
    layer(x, states)
    check_directional_gradients(layer, lambda v: layer(v, states), x)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_cell_gradients_equal_finite_differences_with_valid_length(kind):
    cell = {"rnn": rnn.RNNCell, "lstm": rnn.LSTMCell, "gru": rnn.GRUCell}[kind](3)
    cell.cast("float64")
    cell.initialize(mx.init.Uniform(0.7))
    x = f64(onp.random.default_rng(1).uniform(-1, 1, (3, 3, 2)))
    cell.unroll(3, x, layout="TNC")

    def forward(v):
        out, states = cell.unroll(3, v, layout="TNC", merge_outputs=True,
                                  valid_length=f64([3, 1, 2]))
        return out, states
    check_directional_gradients(cell, forward, x)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_fused_layer_equals_unfused_cells(mode, bidirectional):
    layer = make_layer(mode, hidden=4, num_layers=2, bidirectional=bidirectional,
                       layout="NTC", input_size=3, dtype="float64")
    layer.initialize(mx.init.Uniform(0.5))
    stack = layer._unfuse()
    assert set(stack.collect_params().keys()) == set(layer.collect_params().keys())
    x = f64(onp.random.default_rng(5).uniform(-1, 1, (2, 5, 3)))
    begin = [f64(onp.random.default_rng(6).uniform(-1, 1, s.shape))
             for s in layer.begin_state(2)]
    w = f64(onp.random.default_rng(7).uniform(-1, 1, (2, 5, 4 * (2 if bidirectional else 1))))
    with autograd.record():
        fused, fused_states = layer(x, begin)
        (fused * w).sum().backward()
    fused_grads = {k: p.grad().asnumpy().copy() for k, p in layer.collect_params().items()}
    # the cells' states: per layer and direction [h(, c)], the fused ones stacked by layer
    per_cell = len(begin)
    cell_begin = [begin[j][i] for i in range(begin[0].shape[0]) for j in range(per_cell)]
    with autograd.record():
        unrolled, cell_states = stack.unroll(5, x, begin_state=cell_begin, layout="NTC",
                                             merge_outputs=True)
        (unrolled * w).sum().backward()
    onp.testing.assert_allclose(unrolled.asnumpy(), fused.asnumpy(), rtol=1e-12, atol=1e-13)
    for j in range(per_cell):
        stacked = onp.stack([s.asnumpy() for s in cell_states[j::per_cell]])
        onp.testing.assert_allclose(stacked, fused_states[j].asnumpy(), rtol=1e-12,
                                    atol=1e-13)
    for k, p in layer.collect_params().items():
        onp.testing.assert_allclose(p.grad().asnumpy(), fused_grads[k], rtol=1e-10,
                                    atol=1e-12, err_msg=k)


def test_layouts_agree_and_begin_state():
    tnc = rnn.GRU(4, num_layers=2, layout="TNC", prefix="g_")
    ntc = rnn.GRU(4, num_layers=2, layout="NTC", prefix="g_", params=tnc.collect_params())
    tnc.initialize()
    x = nd.random.uniform(shape=(5, 3, 2))
    a = tnc(x)
    b = ntc(nd.swapaxes(x, 0, 1))
    assert (nd.swapaxes(b, 0, 1) == a).asnumpy().all()
    states = tnc.begin_state(3, func=nd.ones)
    assert len(states) == 1 and states[0].shape == (2, 3, 4) and states[0].asnumpy().all()
    out, new = tnc(x, states[0])       # a single state array is accepted
    assert out.shape == (5, 3, 4) and new[0].shape == (2, 3, 4)
    assert [s.shape for s in rnn.LSTMCell(4).begin_state(batch_size=2)] == [(2, 4), (2, 4)]
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(4))
    stack.add(rnn.GRUCell(5))
    assert [s.shape for s in stack.begin_state(batch_size=2)] == [(2, 4), (2, 4), (2, 5)]


def test_hybridized_equals_imperative_bit_for_bit():
    x = nd.random.uniform(shape=(3, 4, 2))
    for layer in (rnn.LSTM(5, num_layers=2, bidirectional=True, layout="NTC"),
                  rnn.GRU(3), rnn.RNN(3, activation="tanh")):
        layer.initialize()
        with autograd.record():
            y = layer(x)
        y.backward()
        grads = {k: p.grad().asnumpy().copy() for k, p in layer.collect_params().items()}
        layer.hybridize()
        with autograd.record():
            y2 = layer(x)
        y2.backward()
        assert (y2.asnumpy() == y.asnumpy()).all()
        for k, p in layer.collect_params().items():
            assert (p.grad().asnumpy() == grads[k]).all(), k
    cell = rnn.LSTMCell(4)
    cell.initialize()
    out, _ = cell.unroll(4, x, merge_outputs=True)
    cell.hybridize()
    out2, _ = cell.unroll(4, x, merge_outputs=True)
    assert (out2.asnumpy() == out.asnumpy()).all()


def test_layer_inside_hybridized_sequential():
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(rnn.LSTM(4, bidirectional=True))
        net.add(gluon.nn.Dense(3, flatten=True))
    net.initialize()
    x = nd.random.uniform(shape=(2, 3, 5))
    y = net(x)
    net.hybridize()
    assert (net(x).asnumpy() == y.asnumpy()).all()


def test_symbolic_unroll_names_and_shapes():
    cell = rnn.LSTMCell(100, prefix="rnn_")
    inputs = [mx.sym.Variable("rnn_t%d_data" % i) for i in range(3)]
    outputs, _ = cell.unroll(3, inputs)
    outputs = mx.sym.Group(outputs)
    assert sorted(cell.collect_params().keys()) == ["rnn_h2h_bias", "rnn_h2h_weight",
                                                    "rnn_i2h_bias", "rnn_i2h_weight"]
    assert outputs.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output",
                                      "rnn_t2_out_output"]
    _, outs, _ = outputs.infer_shape(rnn_t0_data=(10, 50), rnn_t1_data=(10, 50),
                                     rnn_t2_data=(10, 50))
    assert outs == [(10, 100), (10, 100), (10, 100)]
    bi = rnn.BidirectionalCell(rnn.GRUCell(8, prefix="l_"), rnn.GRUCell(8, prefix="r_"),
                               output_prefix="bi_")
    outputs, states = bi.unroll(3, mx.sym.var("data"), layout="NTC", merge_outputs=True)
    _, outs, _ = outputs.infer_shape(data=(2, 3, 5))
    assert outs == [(2, 3, 16)]
    # begin states made from a whole time-major Symbol (Note [Symbolic begin states])
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(4))
    stack.add(rnn.GRUCell(3))
    outputs, states = stack.unroll(5, mx.sym.var("data"), layout="TNC", merge_outputs=True)
    assert outputs.infer_shape(data=(5, 2, 6))[1] == [(5, 2, 3)]
    assert [s.infer_shape(data=(5, 2, 6))[1] for s in states] == [[(2, 4)], [(2, 4)], [(2, 3)]]
    vardrop = gluon.contrib.rnn.VariationalDropoutCell(rnn.GRUCell(3), drop_inputs=0.3)
    outputs, _ = vardrop.unroll(5, mx.sym.var("data"), merge_outputs=True)
    assert outputs.infer_shape(data=(2, 5, 6))[1] == [(2, 5, 3)]


# ---------------------------------------------------------------- training mode, sequence lengths

def test_dropout_only_in_training():
    layer = rnn.LSTM(8, num_layers=3, dropout=0.5)
    plain = rnn.LSTM(8, num_layers=3, params=layer.collect_params(), prefix=layer.prefix)
    assert repr(layer) == "LSTM(None -> 8, TNC, num_layers=3, dropout=0.5)"
    layer.initialize()
    x = nd.random.uniform(shape=(4, 6, 3))
    predicted = layer(x)
    assert (predicted == plain(x)).asnumpy().all()
    with autograd.record():
        trained = layer(x)
        trained.sum().backward()
    assert not (trained == predicted).asnumpy().all()
    assert onp.isfinite(layer.l0_i2h_weight.grad().asnumpy()).all()
    layer.hybridize()                       # the traced graph drops out in training only
    assert (layer(x) == predicted).asnumpy().all()
    with autograd.record():
        first, second = layer(x), layer(x)
    assert not (first == predicted).asnumpy().all() and not (first == second).asnumpy().all()
    cell = rnn.DropoutCell(0.5)
    y, states = cell.unroll(4, x, layout="TNC", merge_outputs=True)
    assert (y == x).asnumpy().all() and states == []
    with autograd.record():
        y, _ = cell.unroll(4, x, layout="TNC", merge_outputs=True)
    dropped = y.asnumpy() == 0
    assert dropped.any() and (y.asnumpy()[~dropped] == 2 * x.asnumpy()[~dropped]).all()
    base = rnn.GRUCell(4)
    zoneout = rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5)
    zoneout.initialize()
    out, _ = zoneout.unroll(4, x, layout="TNC", merge_outputs=True)
    base._modified = False
    plain_out, _ = base.unroll(4, x, layout="TNC", merge_outputs=True)
    base._modified = True
    assert (out == plain_out).asnumpy().all()
    with autograd.record():
        zoned, _ = zoneout.unroll(4, x, layout="TNC", merge_outputs=True)
    assert not (zoned == plain_out).asnumpy().all()


def test_fused_sequence_lengths_equal_per_sequence_runs():
    layer = rnn.LSTM(4, num_layers=2, bidirectional=True, use_sequence_length=True,
                     dtype="float64")
    layer.initialize()
    x = f64(onp.random.default_rng(0).uniform(-1, 1, (5, 3, 2)))
    lengths = [5, 2, 3]
    out, (h, c) = layer(x, layer.begin_state(3, dtype="float64"), f64(lengths))
    for i, n in enumerate(lengths):
        one, (h1, c1) = layer(x[:n, i:i + 1], layer.begin_state(1, dtype="float64"),
                              f64([n]))
        onp.testing.assert_allclose(out[:n, i:i + 1].asnumpy(), one.asnumpy(), rtol=1e-12,
                                    atol=1e-15)
        assert (out[n:, i].asnumpy() == 0).all()
        onp.testing.assert_allclose(h[:, i:i + 1].asnumpy(), h1.asnumpy(), rtol=1e-12, atol=1e-15)
        onp.testing.assert_allclose(c[:, i:i + 1].asnumpy(), c1.asnumpy(), rtol=1e-12, atol=1e-15)
    layer.hybridize()                       # the lengths are an input of the traced graph
    out2, (h2, c2) = layer(x, layer.begin_state(3, dtype="float64"), f64(lengths))
    assert (out2.asnumpy() == out.asnumpy()).all() and (c2.asnumpy() == c.asnumpy()).all()
    out3, _ = layer(x, layer.begin_state(3, dtype="float64"), f64([1, 1, 1]))
    assert (out3[1:].asnumpy() == 0).all()


def test_lstm_state_clipping():
    layer = rnn.LSTM(4, state_clip_min=-0.1, state_clip_max=0.1)
    layer.initialize(mx.init.Uniform(2))
    _, (h, c) = layer(nd.random.uniform(-3, 3, shape=(3, 2, 5)), layer.begin_state(2))
    assert onp.abs(c.asnumpy()).max() <= 0.1 + 1e-7


# ---------------------------------------------------------------- deferred sizes, errors

def test_deferred_input_size():
    layer = rnn.LSTM(10)
    assert repr(layer) == "LSTM(None -> 10, TNC)"
    layer.initialize()
    layer(nd.ones((3, 2, 7)))
    assert layer.l0_i2h_weight.shape == (40, 7)
    assert repr(layer) == "LSTM(7 -> 10, TNC)"
    cell = rnn.GRUCell(10)
    cell.initialize()
    cell.hybridize()
    cell.unroll(3, nd.ones((2, 3, 7)))
    assert cell.i2h_weight.shape == (30, 7)
    assert repr(cell) == "GRUCell(7 -> 30)"
    layer = rnn.GRU(3, num_layers=2, bidirectional=True)
    layer.initialize()
    layer.infer_shape(nd.ones((2, 2, 6)), layer.begin_state(2))
    assert layer.l0_i2h_weight.shape == (9, 6) and layer.r0_i2h_weight.shape == (9, 6)


def test_errors_name_the_layer_and_argument():
    with pytest.raises(ValueError, match="Invalid layout"):
        rnn.LSTM(4, layout="CNT")
    with pytest.raises(ValueError, match="activation"):
        rnn.RNN(4, activation="sigmoid")
    layer = rnn.LSTM(4, prefix="lstm9_")
    layer.initialize()
    layer(nd.ones((2, 3, 5)))
    with pytest.raises(ValueError,
                       match=r"LSTM lstm9.*7 features.*lstm9_l0_i2h_weight.*\(16, 5\)"):
        layer(nd.ones((2, 3, 7)))
    with pytest.raises(ValueError, match=r"Invalid recurrent state shape. Expecting \(1, 3, 4\)"):
        layer(nd.ones((2, 3, 5)), [nd.zeros((1, 2, 4)), nd.zeros((1, 2, 4))])
    with pytest.raises(ValueError, match="expected 2 state"):
        layer(nd.ones((2, 3, 5)), [nd.zeros((1, 3, 4))])
    cell = rnn.RNNCell(4, prefix="cell9_")
    cell.initialize()
    cell.unroll(2, nd.ones((3, 2, 5)))
    with pytest.raises(ValueError, match=r"RNNCell cell9.*\(3, 6\).*cell9_i2h_weight"):
        cell.unroll(2, nd.ones((3, 2, 6)))
    with pytest.raises(ValueError, match="length=3 but the inputs have 2 steps"):
        cell.unroll(3, nd.ones((3, 2, 5)))
    with pytest.raises(ValueError, match="layout must be 'NTC' or 'TNC'"):
        cell.unroll(2, nd.ones((3, 2, 5)), layout="NCT")
    with pytest.raises(NotImplementedError, match="cannot be stepped"):
        rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2))(nd.ones((1, 2)), [])
    base = rnn.GRUCell(2)
    rnn.ResidualCell(base)
    with pytest.raises(AssertionError, match="modifier"):
        base.begin_state(batch_size=1)
    with pytest.raises(AssertionError, match="already modified"):
        rnn.ZoneoutCell(base)


def test_export_is_mxnet_json_and_imports_back():
    """A hybridized block unrolling a cell, and a fused layer, export in MXNet's own JSON
    (MXNet 1.9.1's SymbolBlock.imports reads these files: checked by hand with the oracle)
    and load back with the same outputs."""
    class Unrolled(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.cell = rnn.LSTMCell(3)

        def hybrid_forward(self, F, seq):
            return self.cell.unroll(2, seq, merge_outputs=True)[0]

    class Masked(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.cell = rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3))

        def hybrid_forward(self, F, seq, valid_length):
            out, states = self.cell.unroll(2, seq, merge_outputs=True,
                                           valid_length=valid_length)
            return out, states[0]

    x = nd.random.uniform(shape=(2, 2, 4))
    lengths = nd.array([2, 1])
    for net, args, names in (
            (Unrolled(), (x,), ["data"]),
            (Masked(), (x, lengths), ["data0", "data1"]),
            # as MXNet: the states made for the call are the graph's second input
            (rnn.GRU(3, num_layers=2, layout="NTC", bidirectional=True), (x,),
             ["data0", "data1"])):
        net.initialize()
        net.hybridize()
        net(*args)
        y = net(*args)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "net")
            net.export(path, epoch=0)
            with open(path + "-symbol.json") as f:
                assert "arg_nodes" in json.load(f)         # MXNet's format, not fastgrad's
            back = gluon.SymbolBlock.imports(path + "-symbol.json", names,
                                             path + "-0000.params")
            if isinstance(net, rnn.GRU):
                args = (x, net.begin_state(2)[0])
            got = back(*args)
            for a, b in zip(got if isinstance(got, list) else [got],
                            y if isinstance(y, tuple) else [y]):
                assert (a.asnumpy() == b.asnumpy()).all()
    layer = rnn.GRU(3)
    layer.initialize()
    layer.hybridize()
    states = layer.begin_state(2)
    alone = layer(x)
    out, new_states = layer(x, states)      # the other form traces again
    assert (out.asnumpy() == alone.asnumpy()).all() and new_states[0].shape == (1, 2, 3)
    assert layer(x).shape == (2, 2, 3)


# ---------------------------------------------------------------- gluon.contrib.rnn

def test_lstmp_cell_equals_fused_projection_layer():
    layer = rnn.LSTM(5, num_layers=2, projection_size=3, input_size=4, dtype="float64",
                     prefix="p_")
    layer.initialize(mx.init.Uniform(0.5))
    stack = rnn.HybridSequentialRNNCell(prefix="p_")
    with stack.name_scope():
        for i in range(2):
            stack.add(gluon.contrib.rnn.LSTMPCell(5, 3, prefix="l%d_" % i))
    stack.cast("float64")
    stack.initialize()
    assert repr(stack[0]) == "LSTMPCell(None -> 20 -> 3)"
    x = f64(onp.random.default_rng(0).uniform(-1, 1, (4, 2, 4)))
    stack.unroll(4, x, layout="TNC")
    for name, p in stack.collect_params().items():
        p.set_data(layer.collect_params()[name].data())
    fused, (h, c) = layer(x, layer.begin_state(2, dtype="float64"))
    cells, states = stack.unroll(4, x, layout="TNC", merge_outputs=True)
    onp.testing.assert_allclose(cells.asnumpy(), fused.asnumpy(), rtol=1e-12, atol=1e-14)
    onp.testing.assert_allclose(onp.stack([states[0].asnumpy(), states[2].asnumpy()]),
                                h.asnumpy(), rtol=1e-12, atol=1e-14)
    onp.testing.assert_allclose(onp.stack([states[1].asnumpy(), states[3].asnumpy()]),
                                c.asnumpy(), rtol=1e-12, atol=1e-14)


def test_variational_dropout_shares_its_mask_over_time():
    base = rnn.RNNCell(50, activation="tanh")
    cell = gluon.contrib.rnn.VariationalDropoutCell(base, drop_outputs=0.5)
    assert repr(cell) == "VariationalDropoutCell(p_out = 0.5, p_state = 0.0)"
    cell.initialize()
    x = nd.random.uniform(shape=(2, 6, 3))
    out, _ = cell.unroll(6, x, merge_outputs=True)
    base._modified = False
    plain, _ = base.unroll(6, x, merge_outputs=True)
    base._modified = True
    assert (out == plain).asnumpy().all()                   # predict mode: no dropout
    for stepped in (False, True):
        states = cell.begin_state(batch_size=2)
        cell.reset()
        with autograd.record():
            if stepped:                                     # state dropout steps the cell
                cell.drop_states = 0.5
                dropped, _ = cell.unroll(6, x, merge_outputs=True)
            else:
                dropped, _ = cell.unroll(6, x, merge_outputs=True)
        zeros = dropped.asnumpy() == 0
        assert zeros.any() and (zeros == zeros[:, :1, :]).all()   # the same units every step
    with pytest.raises(AssertionError, match="variational state dropout"):
        gluon.contrib.rnn.VariationalDropoutCell(
            rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2)), drop_states=0.5)


def test_symbolic_rnn_operator_infers_its_shapes_and_binds():
    """MXNet 1.x's sym.RNN with every input left to shape inference (as MXNet's
    test_operator.py::test_rnn_with_new_param and the dropout tests use it)."""
    for mode, gates in (("rnn_relu", 1), ("gru", 3), ("lstm", 4)):
        sym = mx.sym.RNN(mode=mode, num_layers=2, bidirectional=True, state_outputs=False,
                         state_size=4, name="rnn")
        names = ["rnn_data", "rnn_parameters", "rnn_state"] + (
            ["rnn_state_cell"] if mode == "lstm" else [])
        assert sym.list_arguments() == names
        args, outs, _ = sym.infer_shape(rnn_data=(5, 2, 7))
        size = 2 * gates * (4 * 7 + 4 * 4 + 2 * 4) + 2 * gates * (4 * 8 + 4 * 4 + 2 * 4)
        assert args[1] == (size,) and args[2] == (4, 2, 4) and outs == [(5, 2, 8)]
        values = {"rnn_data": nd.random.uniform(-1, 1, shape=(5, 2, 7)),
                  "rnn_parameters": nd.random.uniform(-0.5, 0.5, shape=(size,)),
                  "rnn_state": nd.zeros((4, 2, 4))}
        if mode == "lstm":
            values["rnn_state_cell"] = nd.zeros((4, 2, 4))
        ex = sym.bind(mx.cpu(), values)
        ex.forward(is_train=False)
        expected = nd.RNN(*[values[n] for n in names], mode=mode, num_layers=2,
                          bidirectional=True, state_size=4)
        assert (ex.output_dict["rnn_output"].asnumpy() == expected.asnumpy()).all()
    x = mx.sym.var("x")
    lstm = mx.sym.RNN(data=x, parameters=mx.sym.var("params"), state=mx.sym.var("state"),
                      state_cell=mx.sym.var("state_cell"), state_size=5, num_layers=3,
                      mode="lstm", p=0.5, state_outputs=True, name="LSTM")
    exe = lstm.simple_bind(ctx=mx.cpu(), x=(6, 3, 4))
    assert [o.shape for o in exe.forward(is_train=True)] == [(6, 3, 5), (3, 3, 5), (3, 3, 5)]


@pytest.mark.parametrize("hybrid", [False, True])
def test_lstm_language_model_trains_as_mxnet(hybrid):
    """Embedding -> 2-layer LSTM -> Dense trained 20 steps by gluon.Trainer (SGD with
    momentum) on MXNet's data and initial weights: the losses MXNet 1.9.1 printed."""
    rng = onp.random.default_rng(0)
    vocab, embed, hidden, steps, batch = 30, 8, 16, 7, 4
    data = rng.integers(0, vocab, size=(20, steps + 1, batch))

    class LM(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.emb = gluon.nn.Embedding(vocab, embed)
                self.rnn = rnn.LSTM(hidden, num_layers=2, input_size=embed)
                self.out = gluon.nn.Dense(vocab, flatten=False, in_units=hidden)

        def hybrid_forward(self, F, x):
            return self.out(self.rnn(self.emb(x)))

    net = LM(prefix="lm_")
    net.initialize()
    for name, p in sorted(net.collect_params().items()):
        p.set_data(nd.array(rng.uniform(-0.3, 0.3, p.shape)))
    if hybrid:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for step in range(20):
        with autograd.record():
            loss = loss_fn(net(nd.array(data[step, :steps])), nd.array(data[step, 1:]))
        loss.backward()
        trainer.step(batch * steps)
        losses.append(float(loss.mean().asscalar()))
    expected = FIXTURE["lm.losses.%s" % ("hybrid" if hybrid else "imperative")]
    onp.testing.assert_allclose(losses, expected, rtol=1e-5)


def test_a_cell_unrolled_on_symbols_names_each_parameter_once():
    """Every step of an unrolled cell uses the Parameter's one variable (MXNet's
    test_gluon_rnn.py::test_residual), and a cast afterwards declares the new dtype."""
    cell = gluon.rnn.ResidualCell(gluon.rnn.GRUCell(4, prefix="rnn_"))
    inputs = [mx.sym.var("rnn_t%d_data" % i) for i in range(2)]
    outputs, _ = cell.unroll(2, inputs)
    group = mx.sym.Group(outputs)
    assert sorted(group.list_arguments()) == sorted(
        ["rnn_t0_data", "rnn_t1_data", "rnn_i2h_weight", "rnn_i2h_bias", "rnn_h2h_weight",
         "rnn_h2h_bias"])
    zeros = {"rnn_i2h_weight": (12, 4), "rnn_i2h_bias": (12,), "rnn_h2h_weight": (12, 4),
             "rnn_h2h_bias": (12,)}
    args = {k: mx.nd.zeros(s) for k, s in zeros.items()}
    x = onp.arange(6.0).reshape(3, 2).repeat(2, axis=1)
    out = group.eval(rnn_t0_data=mx.nd.array(x), rnn_t1_data=mx.nd.array(x), **args)
    # zero weights: every gate is sigmoid(0) = 0.5 and the candidate tanh(0) = 0, so the
    # state is half the previous one (0, then 0) and the residual adds the input back
    onp.testing.assert_allclose(out[0].asnumpy(), x, rtol=0, atol=0)
    param = cell.base_cell.i2h_weight
    first = param.var()
    assert param.var() is first
    assert first.infer_type()[0] == [onp.dtype("float32")]
    param.cast("float64")
    assert param.var() is not first
    assert param.var().infer_type()[0] == [onp.dtype("float64")]
