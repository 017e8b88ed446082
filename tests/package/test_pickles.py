"""Objects pickled by an earlier fastgrad load (Note [Pickled paths] in fastgrad/__init__.py).

``tests/fixtures/pickles_6b3cdcb.pkl`` was written by fastgrad 6b3cdcb
(``tests/fixtures/make_pickles.py``), whose array type lived in ``fastgrad._array``.
"""

# move.py: keep old paths (this file names the modules as 6b3cdcb had them)
import os
import pickle
import pickletools

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import gluon, nd, np

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                       "pickles_6b3cdcb.pkl")


@pytest.fixture(scope="module")
def loaded():
    with open(FIXTURE, "rb") as f:
        return pickle.load(f)


def test_the_fixture_names_the_old_module():
    with open(FIXTURE, "rb") as f:
        names = {arg for _, arg, _ in pickletools.genops(f.read()) if isinstance(arg, str)}
    assert "fastgrad._array" in names


@pytest.mark.parametrize("name", ["np_float64", "np_float32", "np_int64", "nd_float32"])
def test_arrays_load_with_their_type_dtype_and_values(loaded, name):
    array, kind = loaded["objects"][name]
    expected = loaded["values"][name]
    assert type(array) is (nd.NDArray if kind == "NDArray" else np.ndarray)
    assert array.dtype == expected.dtype and array.shape == expected.shape
    onp.testing.assert_array_equal(array.asnumpy(), expected)
    assert pickle.loads(pickle.dumps(array)).asnumpy().tolist() == expected.tolist()


def test_an_op_loads_as_the_registered_op(loaded):
    op, _ = loaded["objects"]["op_sin"]
    assert op is np.sin


def test_a_symbol_loads_and_evaluates(loaded):
    sym, arguments = loaded["objects"]["symbol"]
    assert sym.list_arguments() == arguments
    out = sym.eval(x=nd.array([-1.0, 0.5]))[0]
    onp.testing.assert_allclose(out.asnumpy(), [0.0, 2.0])


def test_trainer_states_load_into_a_trainer(loaded):
    states, optimizer = loaded["objects"]["trainer_states"]
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(mx.init.Constant(0.5))
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    trainer._updaters[0].set_states(states)
    assert type(trainer._updaters[0].optimizer).__name__.lower() == optimizer
    assert len(trainer._updaters[0].states) == 2
