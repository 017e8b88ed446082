"""mx.init (also mx.initializer): MXNet 1.9.1's initializers.

``tests/fixtures/mxnet_init.json`` (written by ``make_init_fixtures.py`` with MXNet 1.9.1)
holds what MXNet asks its random generator for (distribution and parameters: Xavier's fan
computation, MSRAPrelu's magnitude, ...), Orthogonal's output for a given draw, and the
values of the deterministic initializers and of the name-suffix rules.
"""

import builtins
import json
import logging
import os
import warnings

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import initializer

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "mxnet_init.json")
with open(FIXTURE) as _f:
    MXNET = json.load(_f)

# the labels of the fixture, as fastgrad initializers
INITS = {"Uniform()": initializer.Uniform(), "Uniform(0.5)": initializer.Uniform(0.5),
         "Normal(0.2)": initializer.Normal(0.2), "Xavier()": initializer.Xavier(),
         "Xavier('gaussian', 'in', 2)": initializer.Xavier("gaussian", "in", 2),
         "Xavier('uniform', 'out', 2.34)": initializer.Xavier("uniform", "out", 2.34),
         "Xavier('gaussian', 'avg', 1)": initializer.Xavier("gaussian", "avg", 1),
         "MSRAPrelu()": initializer.MSRAPrelu(),
         "MSRAPrelu('in', 0.1)": initializer.MSRAPrelu("in", 0.1),
         "Bilinear()": initializer.Bilinear(), "LSTMBias()": initializer.LSTMBias(),
         "LSTMBias(2.5)": initializer.LSTMBias(2.5), "LSTMBias(3.0)": initializer.LSTMBias(3.0),
         "Constant(0.25)": initializer.Constant(0.25), "Zero()": initializer.Zero(),
         "One()": initializer.One()}


@pytest.fixture
def recorded_draws(monkeypatch):
    """Replace the generator's uniform/normal by recorders of (kind, low|loc, high|scale)."""
    calls = []

    def recorder(kind):
        def draw(a, b, size=None, dtype=None, **kwargs):
            calls.append([kind, float(a), float(b)])
            return mx.np.zeros(size, dtype=dtype)
        return draw

    monkeypatch.setattr(initializer._random, "uniform", recorder("uniform"))
    monkeypatch.setattr(initializer._random, "normal", recorder("normal"))
    return calls


@pytest.mark.parametrize("case", MXNET["scales"], ids=lambda c: "%s-%s" % (c["init"], c["shape"]))
def test_distribution_and_scale_equal_mxnets(case, recorded_draws):
    INITS[case["init"]](mx.init.InitDesc("layer_weight"), mx.nd.zeros(tuple(case["shape"])))
    assert len(recorded_draws) == len(case["calls"]) == 1
    kind, a, b = recorded_draws[0]
    assert kind == case["calls"][0][0]
    assert (a, b) == pytest.approx(tuple(case["calls"][0][1:]), rel=1e-15)


@pytest.mark.parametrize("case", MXNET["orthogonal"], ids=lambda c: str(c["shape"]))
def test_orthogonal_equals_mxnet_on_the_same_draw(case, monkeypatch):
    draw = onp.array(case["draw"], dtype=onp.float32)
    expected_kind = case["calls"][0][0]

    def fixed(a, b, size=None, dtype=None, **kwargs):
        assert size == draw.shape and (a, b) == tuple(case["calls"][0][1:])
        return mx.np.array(draw)

    monkeypatch.setattr(initializer._random, expected_kind, fixed)
    arr = mx.nd.zeros(tuple(case["shape"]))
    mx.init.Orthogonal(case["scale"], case["rand_type"])(mx.init.InitDesc("w_weight"), arr)
    # Both take the SVD of the same float32 matrix. Singular vectors are defined up to sign
    # (LAPACK builds pick differently) and the last bits may differ: compare with each
    # vector's sign fixed (its largest entry positive).
    def signs_fixed(value):
        m = onp.asarray(value, dtype=onp.float64).reshape(draw.shape)
        vectors = m if m.shape[0] < m.shape[1] else m.T      # v's rows, or u's columns
        picked = vectors[onp.arange(len(vectors)), abs(vectors).argmax(axis=1)]
        return vectors * onp.sign(picked)[:, None]
    onp.testing.assert_allclose(signs_fixed(arr.asnumpy()), signs_fixed(case["value"]),
                                rtol=0, atol=2e-6)


@pytest.mark.parametrize("shape", [(3, 8), (8, 3), (4, 2, 3), (5, 5)])
@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
def test_orthogonal_rows_or_columns_are_orthonormal(shape, rand_type):
    mx.random.seed(0)
    arr = mx.nd.zeros(shape)
    mx.init.Orthogonal(scale=2.0, rand_type=rand_type)(mx.init.InitDesc("w_weight"), arr)
    m = arr.asnumpy().reshape(shape[0], -1).astype(onp.float64) / 2.0
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    onp.testing.assert_allclose(gram, onp.eye(gram.shape[0]), atol=1e-5)


@pytest.mark.parametrize("case", MXNET["values"], ids=lambda c: "%s-%s" % (c["init"], c["shape"]))
def test_deterministic_initializers_equal_mxnets(case):
    arr = mx.nd.full(tuple(case["shape"]), 7.0)
    INITS[case["init"]](mx.init.InitDesc("some_weight"), arr)
    assert arr.dtype == onp.float32
    onp.testing.assert_array_equal(arr.asnumpy(), onp.array(case["value"], dtype=onp.float32))


@pytest.mark.parametrize("case", MXNET["dispatch"],
                         ids=lambda c: "%s-%s-%s" % (c["form"], c["name"], c.get("attr", "")))
def test_the_name_suffix_rules_equal_mxnets(case):
    arr = mx.nd.full(tuple(case["shape"]) if "shape" in case else (2,), 7.0)
    if case["form"] == "attr":
        attr = (mx.init.Constant(2.0) if case["attr"] == "Constant(2.0) instance"
                else case["attr"])
        mx.init.Uniform()(mx.init.InitDesc(case["name"], {"__init__": attr}), arr)
    else:
        desc = mx.init.InitDesc(case["name"]) if case["form"] == "desc" else case["name"]
        call = lambda: mx.init.Constant(0.5)(desc, arr)  # noqa: E731
        if "error" in case:
            with pytest.raises(getattr(builtins, case["error"])) as info:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    call()
            assert str(info.value) == case["message"]
            return
        if case["form"] == "legacy":
            with pytest.warns(DeprecationWarning, match="init\\(str, NDArray\\) has been "
                              "deprecated"):
                call()
        else:
            call()
    onp.testing.assert_array_equal(arr.asnumpy(), onp.array(case["value"], dtype=onp.float32))


def test_dumps_equal_mxnets_and_create_reads_them_back():
    ours = {"Uniform()": mx.init.Uniform(), "Normal(0.5)": mx.init.Normal(0.5),
            "Xavier(factor_type='in', magnitude=2.34)": mx.init.Xavier(factor_type="in",
                                                                        magnitude=2.34),
            "MSRAPrelu()": mx.init.MSRAPrelu(), "Orthogonal()": mx.init.Orthogonal(),
            "Zero()": mx.init.Zero(), "One()": mx.init.One(), "Bilinear()": mx.init.Bilinear(),
            "LSTMBias()": mx.init.LSTMBias(), "Constant(1.5)": mx.init.Constant(1.5),
            "Constant(nd [1, 2])": mx.init.Constant(mx.nd.array([1, 2]))}
    assert set(ours) == set(MXNET["dumps"])
    for label, init in ours.items():
        text = init.dumps()
        assert text == MXNET["dumps"][label], label
        again = mx.init.create(text)
        assert type(again) is type(init) and again.dumps() == text
    assert mx.init.create('{"initializer": "normal", "sigma": 0.3}') == mx.init.Normal(0.3)
    assert mx.init.create({"initializer": "xavier", "magnitude": 2}) == mx.init.Xavier(
        magnitude=2)
    assert isinstance(mx.init.create("zeros"), mx.init.Zero)
    assert isinstance(mx.init.create("ONES"), mx.init.One)
    assert mx.init.Uniform(0.1) == mx.init.Uniform(0.1) != mx.init.Uniform(0.2)
    x = mx.init.Xavier()
    assert mx.init.create(x) is x
    with pytest.raises(ValueError, match="foo is not registered. Please register with "
                       "initializer.register first"):
        mx.init.create("foo")
    with pytest.raises(ValueError, match="already an instance"):
        mx.init.create(x, 3)


def test_random_initializers_fill_in_place_with_their_distribution():
    mx.random.seed(11)
    big = mx.nd.zeros((200, 300))
    before = big
    mx.init.Xavier()(mx.init.InitDesc("w_weight"), big)
    assert big is before and big.dtype == onp.float32
    values = big.asnumpy()
    bound = onp.sqrt(3.0 / 250.0)
    assert abs(values).max() <= bound and abs(values).max() > 0.99 * bound
    assert abs(values.mean()) < 0.01 * bound
    assert values.std() == pytest.approx(bound / onp.sqrt(3), rel=0.02)   # uniform's std
    g = mx.np.zeros((300, 200), dtype="float64")
    mx.init.Normal(0.5)(mx.init.InitDesc("w_weight"), g)
    assert g.dtype == onp.float64
    assert g.asnumpy().std() == pytest.approx(0.5, rel=0.02)
    assert abs(g.asnumpy().mean()) < 0.01


def test_mx_random_seed_makes_initializers_repeatable():
    def draw(seed):
        mx.random.seed(seed)
        arr = mx.nd.zeros((4, 5))
        mx.init.Xavier("gaussian")(mx.init.InitDesc("w_weight"), arr)
        return arr.asnumpy()
    onp.testing.assert_array_equal(draw(5), draw(5))
    assert not onp.array_equal(draw(5), draw(6))


def test_numpy_arrays_and_other_dtypes_are_filled():
    a = onp.zeros((2, 3), dtype=onp.float16)
    mx.init.One()(mx.init.InitDesc("w_weight"), a)
    assert a.dtype == onp.float16 and (a == 1).all()
    b = mx.np.zeros((4,), dtype="float64")
    mx.init.LSTMBias(0.5)(mx.init.InitDesc("b_bias", {"__init__": "lstmbias"}), b)
    assert b.asnumpy().tolist() == [0.0, 1.0, 0.0, 0.0]    # create('lstmbias'): forget_bias 1


def test_errors_name_the_parameter_and_the_argument():
    with pytest.raises(ValueError, match="Xavier initializer cannot be applied to vector "
                       "fc_weight. It requires at least 2D."):
        mx.init.Xavier()(mx.init.InitDesc("fc_weight"), mx.nd.zeros((3,)))
    with pytest.raises(ValueError, match="Incorrect factor type 'sum' for fc_weight"):
        mx.init.Xavier(factor_type="sum")(mx.init.InitDesc("fc_weight"), mx.nd.zeros((3, 2)))
    with pytest.raises(ValueError, match="Unknown random type 'poisson' for fc_weight"):
        mx.init.Xavier("poisson")(mx.init.InitDesc("fc_weight"), mx.nd.zeros((3, 2)))
    with pytest.raises(ValueError, match="rand_type must be 'uniform' or 'normal'"):
        mx.init.Orthogonal(rand_type="x")(mx.init.InitDesc("fc_weight"), mx.nd.zeros((3, 2)))
    with pytest.raises(ValueError, match="Bilinear initializer needs a 4-D weight"):
        mx.init.Bilinear()(mx.init.InitDesc("up_weight"), mx.nd.zeros((3, 2)))
    with pytest.raises(NotImplementedError, match="Must override it"):
        mx.init.Initializer()(mx.init.InitDesc("fc_weight"), mx.nd.zeros((3, 2)))
    with pytest.raises(NotImplementedError, match="FusedRNNCell"):
        mx.init.FusedRNN(None, 4, 1, "lstm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match="arr must be NDArray"):
            mx.init.One()("fc_weight", [1.0, 2.0])


def test_load_and_mixed(tmp_path):
    saved = {"arg:fc_weight": mx.nd.array([[1.0, 2.0]]), "aux:bn_moving_mean": mx.nd.array([3.0]),
             "other": mx.nd.array([4.0])}
    path = str(tmp_path / "p.params")
    mx.nd.save(path, saved)
    for source in (saved, path):
        load = mx.init.Load(source, default_init=mx.init.Constant(9.0))
        w = mx.nd.zeros((1, 2))
        load("fc_weight", w)
        assert w.asnumpy().tolist() == [[1.0, 2.0]]
        m = mx.nd.zeros((1,))
        load("bn_moving_mean", m)
        assert m.asnumpy().tolist() == [3.0]
        d = mx.nd.zeros((2, 2))
        load(mx.init.InitDesc("missing_weight"), d)
        assert (d.asnumpy() == 9.0).all()
    with pytest.raises(ValueError, match="Parameter fc_weight cannot be initialized from "
                       r"loading. Shape mismatch, target \(2, 2\) vs loaded \(1, 2\)"):
        mx.init.Load(saved)("fc_weight", mx.nd.zeros((2, 2)))
    with pytest.raises(ValueError, match="Cannot Initialize nothing. Not found"):
        mx.init.Load(saved)("nothing", mx.nd.zeros((2, 2)))

    mixed = mx.init.Mixed(["bias", ".*"], [mx.init.Zero(), mx.init.Constant(0.5)])
    b = mx.nd.full((2,), 3.0)
    mixed(mx.init.InitDesc("bias_of_x", {"__init__": "zeros"}), b)   # 'bias' matches at start
    w = mx.nd.zeros((2,))
    mixed(mx.init.InitDesc("fc_bias"), w)                           # '.*': Constant, bias rule
    assert b.asnumpy().tolist() == [0.0, 0.0] and w.asnumpy().tolist() == [0.0, 0.0]
    w = mx.nd.zeros((2, 2))
    mixed(mx.init.InitDesc("fc_weight"), w)
    assert (w.asnumpy() == 0.5).all()
    with pytest.raises(ValueError, match="did not match any pattern"):
        mx.init.Mixed(["bias"], [mx.init.Zero()])(mx.init.InitDesc("fc_weight"), w)


def test_register_alias_and_verbosity(caplog):
    @mx.init.register
    @mx.init.alias("halves_for_test")
    class HalvesForTest(mx.init.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 0.5

    for name in ("halvesfortest", "halves_for_test"):
        arr = mx.nd.zeros((2,))
        mx.init.create(name)(mx.init.InitDesc("w_weight"), arr)
        assert arr.asnumpy().tolist() == [0.5, 0.5]
    with pytest.raises(TypeError, match="subclass of Initializer"):
        mx.init.register(dict)
    init = mx.init.One().set_verbosity(True)
    with caplog.at_level(logging.INFO):
        init(mx.init.InitDesc("fc_weight"), mx.nd.zeros((2, 2)))
    assert "Initialized fc_weight as weight: 1.0" in caplog.text
