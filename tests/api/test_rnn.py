"""``npx.rnn`` against MXNet 1.9.1 itself (``tests/fixtures/make_rnn.py``): outputs, final
states and the gradients in the data, the flat parameters and the initial states, for every
mode, one layer and two bidirectional layers."""
import os

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import np, npx

from _helpers import FIXTURES

FIXTURE = onp.load(os.path.join(FIXTURES, "rnn.npz"))
KEYS = sorted({k.split(".")[0] for k in FIXTURE.files})


@pytest.mark.parametrize("key", KEYS)
def test_rnn_equals_mxnet(key):
    mode, layers, kind = key.rsplit("_", 2)
    names = [k.split(".")[-1] for k in FIXTURE.files if k.startswith(key + ".in.")]
    arrays = {n: np.array(FIXTURE["%s.in.%s" % (key, n)]) for n in names}
    for a in arrays.values():
        a.attach_grad()
    with mx.autograd.record():
        res = npx.rnn(mode=mode, state_size=5, num_layers=int(layers),
                      bidirectional=kind == "bi", state_outputs=True, **arrays)
        loss = sum((r * np.array(FIXTURE["%s.w%d" % (key, i)])).sum()
                   for i, r in enumerate(res))
    loss.backward()
    # MXNet's CPU kernel rounds like float32 even for float64 data (differences ~1e-7 of the
    # values); any error of layout or formula would be of the order of the values themselves.
    for i, r in enumerate(res):
        onp.testing.assert_allclose(r.asnumpy(), FIXTURE["%s.out%d" % (key, i)], rtol=2e-6,
                                    atol=1e-7, err_msg="output %d" % i)
    for n, a in arrays.items():
        onp.testing.assert_allclose(a.grad.asnumpy(), FIXTURE["%s.grad.%s" % (key, n)],
                                    rtol=2e-6, atol=1e-7, err_msg="gradient of %s" % n)


def test_rnn_errors_name_the_argument():
    x, s = np.ones((2, 1, 3)), np.zeros((1, 1, 4))
    with pytest.raises(TypeError, match="state_cell"):
        npx.rnn(x, np.ones(100), s, mode="lstm", state_size=4, num_layers=1)
    with pytest.raises(TypeError, match="'mode'"):
        npx.rnn(x, np.ones(100), s, state_size=4, num_layers=1)
    with pytest.raises(ValueError, match=r"parameters has shape \(100,\).*needs \(36,\)"):
        npx.rnn(x, np.ones(100), s, mode="rnn_tanh", state_size=4, num_layers=1)
    with pytest.raises(ValueError, match=r"sequence_length has shape \(2,\).*\(1,\)"):
        npx.rnn(x, np.ones(36), s, mode="rnn_tanh", state_size=4, num_layers=1,
                use_sequence_length=True, sequence_length=np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"sequence_length must be in \[1, 2\]"):
        npx.rnn(x, np.ones(36), s, mode="rnn_tanh", state_size=4, num_layers=1,
                use_sequence_length=True, sequence_length=np.array([3.0]))
