"""fastgrad's Module.fit against MXNet 1.9.1's on the same problems (fixtures made by
tests/fixtures/make_module_fixtures.py): the same initial parameters (read from the
MXNet-written .params), data order and optimizer give the parameters MXNet had after each
epoch; MXNet's checkpoints load in fastgrad and predict what MXNet predicted, and
fastgrad's own checkpoints are byte-compatible (the same keys, shapes and dtypes)."""

import os

import numpy as np
import pytest

import fastgrad as mx

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                    "module")

# name: (dtype, batch, last_batch_handle, optimizer, optimizer_params, label_name, metric,
#        tolerance) -- the cases of make_module_fixtures.py
CASES = {
    "mlp64": ("float64", 8, "pad", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
              "softmax_label", "acc", 1e-10),
    "mlp32_adam": ("float32", 8, "roll_over", "adam", {"learning_rate": 0.01},
                   "softmax_label", "acc", 1e-5),
    "lenet_bn32": ("float32", 8, "pad", "sgd", {"learning_rate": 0.05, "momentum": 0.9},
                   "softmax_label", "acc", 1e-5),
    "lenet_bn64": ("float64", 8, "pad", "nag", {"learning_rate": 0.05, "momentum": 0.9,
                                                "wd": 1e-3}, "softmax_label", "acc", 1e-10),
    "linreg64": ("float64", 10, "pad", "sgd", {"learning_rate": 0.05}, "lin_reg_label", "mse",
                 1e-10),
}


def _close(actual, expected, tol, what):
    actual = actual.asnumpy() if hasattr(actual, "asnumpy") else np.asarray(actual)
    expected = expected.asnumpy() if hasattr(expected, "asnumpy") else np.asarray(expected)
    assert actual.dtype == expected.dtype, what
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_matches_mxnet_after_each_epoch(name, tmp_path):
    dtype, batch, last, optimizer, opt_params, label_name, metric, tol = CASES[name]
    prefix = os.path.join(HERE, name)
    data = np.load(prefix + ".npz")
    symbol = mx.sym.load(prefix + "-symbol.json")
    arg_params, aux_params = mx.model.load_params(prefix + "-init", 0)
    train = mx.io.NDArrayIter(mx.nd.array(data["x"], dtype=dtype),
                              mx.nd.array(data["y"], dtype=dtype), batch, shuffle=False,
                              last_batch_handle=last, label_name=label_name)
    seen = []

    def after_epoch(epoch, sym, args, auxs):
        seen.append(epoch)
        expected_args, expected_auxs = mx.model.load_params(prefix, epoch + 1)
        assert sorted(args) == sorted(expected_args)
        assert sorted(auxs) == sorted(expected_auxs)
        for k in expected_args:
            _close(args[k], expected_args[k], tol, "%s epoch %d %s" % (name, epoch + 1, k))
        for k in expected_auxs:
            _close(auxs[k], expected_auxs[k], tol, "%s epoch %d %s" % (name, epoch + 1, k))

    mod = mx.mod.Module(symbol, label_names=[label_name])
    mod.fit(train, num_epoch=3, optimizer=optimizer, optimizer_params=opt_params,
            arg_params=arg_params, aux_params=aux_params, eval_metric=metric,
            epoch_end_callback=[after_epoch,
                                mx.callback.do_checkpoint(str(tmp_path / name))])
    assert seen == [0, 1, 2]
    test = mx.io.NDArrayIter(mx.nd.array(data["x"], dtype=dtype), None, batch, shuffle=False)
    _close(mod.predict(test), data["pred"], tol * 10, name + " predictions")
    # fastgrad's checkpoint holds what MXNet's holds
    ours = mx.nd.load(str(tmp_path / name) + "-0003.params")
    theirs = mx.nd.load(prefix + "-0003.params")
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        assert ours[k].shape == theirs[k].shape and ours[k].dtype == theirs[k].dtype, k


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_checkpoint_predicts_the_same(name):
    dtype, batch, _, _, _, label_name, metric, tol = CASES[name]
    prefix = os.path.join(HERE, name)
    data = np.load(prefix + ".npz")
    mod = mx.mod.Module.load(prefix, 3, label_names=[label_name])
    test = mx.io.NDArrayIter(mx.nd.array(data["x"], dtype=dtype), None, batch)
    scored = mx.io.NDArrayIter(mx.nd.array(data["x"], dtype=dtype),
                               mx.nd.array(data["y"], dtype=dtype), batch, label_name=label_name)
    mod.bind(scored.provide_data, scored.provide_label, for_training=False)
    _close(mod.predict(test), data["pred"], tol * 10, name)
    (_, value), = mod.score(scored, metric)
    np.testing.assert_allclose(value, float(data["score"]), rtol=1e-6)
