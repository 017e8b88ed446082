"""Misuse gets a clear exception: the right type, naming the op, the argument and the fault.

Each case is one row: a description, a function that misuses fastgrad, the exception type and
a pattern its message must match. Never a crash, a hang or a silently wrong gradient.
"""

import json

import numpy as onp
import pytest

import fastgrad as mx
from fastgrad import autograd, np, npx, nd


def var(values=(1.0, 2.0), dtype=onp.float64):
    x = np.array(onp.asarray(values, dtype=dtype))
    x.attach_grad()
    return x


def recorded(f):
    x = var()
    with autograd.record():
        y = f(x)
    return x, y


def _backward_twice():
    x, y = recorded(lambda t: (t * t).sum())
    y.backward()
    y.backward()


def _grad_twice():
    x, y = recorded(lambda t: np.sin(t).sum())
    autograd.grad(y, [x])
    autograd.grad(y, [x])


def _function_called_twice():
    class F(autograd.Function):
        def forward(self, x):
            return x * 2

        def backward(self, dy):
            return dy * 2

    f = F()
    f(var())
    f(var())


def _function_returning(grads):
    class F(autograd.Function):
        def forward(self, x, y):
            return x * y

        def backward(self, dy):
            return grads(dy)

    x, y = var(), var()
    with autograd.record():
        z = F()(x, y)
    z.backward()


def _function_raising():
    class F(autograd.Function):
        def forward(self, x):
            return x + 1

        def backward(self, dy):
            raise ZeroDivisionError("custom failure in backward")

    x = var()
    with autograd.record():
        y = F()(x)
    y.backward()


def _function_forward_returns_list_of_numbers():
    class F(autograd.Function):
        def forward(self, x):
            return [1.0, 2.0]

        def backward(self, dy):
            return dy

    with autograd.record():
        F()(var())


def _inplace_then_backward():
    w = var([3.0, 4.0])
    x = var()
    with autograd.record():
        y = (x * w).sum()
    w[0] = 0.0
    y.backward()


def _bind(sym_fn, args, **kw):
    return sym_fn().bind(mx.cpu(), args, **kw)


def _with_op(name):
    doc = json.loads(_two_plus().tojson(layout="fastgrad"))
    doc["nodes"][-1]["op"] = name
    return json.dumps(doc)


def _two_plus():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    return 2 * a + b


CASES = [
    # ---- heads and head gradients
    ("head gradient of the wrong shape", lambda: (lambda x, y: y.backward(onp.ones(3)))(
        *recorded(lambda t: t * 2)), ValueError, r"head gradient 0 has shape \(3,\)"),
    ("wrong number of head gradients", lambda: (lambda x, y: autograd.backward(
        [y], [onp.ones(2), onp.ones(2)]))(*recorded(lambda t: t * 2)), ValueError,
     "1 heads but 2 head gradients"),
    ("head is not an array", lambda: autograd.backward([1.0]), TypeError,
     "must be a fastgrad array|not a fastgrad array"),
    ("backward of something not recorded", lambda: np.ones(2).backward(), RuntimeError,
     "no recorded history"),
    ("backward of an op computed outside record", lambda: (var() * 2).backward(),
     RuntimeError, "no recorded history"),
    ("backward twice without retain_graph", _backward_twice, RuntimeError, "retain_graph=True"),
    ("grad twice without retain_graph", _grad_twice, RuntimeError,
     "already freed.*retain_graph=True"),
    # ---- variables and grad()
    ("unknown grad_req", lambda: var().attach_grad("sometimes"), ValueError,
     "grad_req must be one of"),
    ("grad_req of the wrong type", lambda: var().attach_grad(3), ValueError,
     "grad_req must be one of"),
    ("attach_grad on a bool array", lambda: np.array(onp.array([True])).attach_grad(),
     TypeError, "numeric arrays.*bool"),
    ("an array of strings", lambda: np.array(onp.array(["a", "b"])),
     TypeError, "fastgrad.array: argument 'object'.*numbers"),
    ("attach_grad with a sparse stype", lambda: var().attach_grad(stype="csr"), ValueError,
     "dense"),
    ("mark_variables with lists of different lengths",
     lambda: autograd.mark_variables([var(), var()], [np.zeros(2)]), ValueError,
     "2 variables but 1 gradients"),
    ("mark_variables with a gradient of the wrong shape",
     lambda: autograd.mark_variables(var(), np.zeros(3)), ValueError,
     r"gradient shape \(3,\) does not match"),
    ("mark_variables with grad_reqs of the wrong length",
     lambda: autograd.mark_variables([var(), var()], [np.zeros(2), np.zeros(2)], ["write"]),
     ValueError, "2 variables but 1 grad_reqs"),
    ("mark_variables with a non-array", lambda: autograd.mark_variables([[1.0]], [np.zeros(1)]),
     TypeError, "variable 0 is a list"),
    ("grad with respect to an unreached variable",
     lambda: autograd.grad(recorded(lambda t: t * 2)[1], [var()]), ValueError,
     "variable 0.*not reached.*allow_unused"),
    ("grad with respect to an array without history",
     lambda: autograd.grad(recorded(lambda t: t * 2)[1], [np.ones(2)]), ValueError,
     "variable 0.*no recorded history"),
    ("grad with an empty list of variables",
     lambda: autograd.grad(recorded(lambda t: t * 2)[1], []), ValueError, "empty"),
    ("grad with a variable that is not an array",
     lambda: autograd.grad(recorded(lambda t: t * 2)[1], [onp.ones(2)]), TypeError,
     "variable 0 is a ndarray, not a fastgrad array"),
    # ---- custom Functions
    ("Function called twice", _function_called_twice, RuntimeError, "only once"),
    ("Function.backward returns too few gradients", lambda: _function_returning(
        lambda dy: dy), ValueError, "returned 1 gradients but forward took 2 inputs"),
    ("Function.backward returns a gradient of the wrong shape", lambda: _function_returning(
        lambda dy: (dy, np.ones(5))), ValueError, r"shape \(5,\) for input 1"),
    ("Function.backward returns a non-array", lambda: _function_returning(
        lambda dy: (dy, "grad")), TypeError, "gradient 1 is a str"),
    ("Function.backward raises", _function_raising, ZeroDivisionError,
     "custom failure in backward"),
    ("Function.forward returns numbers", _function_forward_returns_list_of_numbers, TypeError,
     "forward must return a fastgrad array"),
    # ---- ops and shapes
    ("shapes that do not broadcast", lambda: var() + np.ones(3), ValueError,
     r"fastgrad.add\(array of shape \(2,\)"),
    ("matmul of mismatched shapes", lambda: np.ones((2, 3)) @ np.ones((2, 3)), ValueError,
     "fastgrad.matmul"),
    ("reshape to an incompatible size", lambda: np.reshape(var(), (3,)), ValueError,
     "fastgrad.reshape"),
    ("sum over an axis that does not exist", lambda: np.sum(var(), axis=3),
     onp.exceptions.AxisError, "axis 3"),
    ("unknown keyword argument to an op", lambda: np.sin(var(), bogus=1), TypeError,
     "sin.*bogus"),
    ("too many arguments to an op", lambda: mx.np.exp(var(), 1, 2, 3), TypeError, "exp"),
    ("missing array argument", lambda: mx.np.multiply(var()), TypeError,
     "multiply.*takes 2 array arguments"),
    ("elemwise op on different shapes", lambda: nd.elemwise_add(nd.ones((2,)), nd.ones((3,))),
     ValueError, "elemwise_add.*shapes"),
    ("NumPy function fastgrad does not support", lambda: onp.busday_count(var(), var()),
     TypeError, "busday_count|fastgrad does not support"),
    ("NumPy ufunc method fastgrad does not support", lambda: onp.add.accumulate(var()),
     TypeError, "numpy.add.accumulate"),
    ("dropout with an invalid probability", lambda: npx.dropout(var(), p=1.5), ValueError,
     "p must be in"),
    ("unknown activation", lambda: npx.activation(var(), act_type="swishy"), ValueError,
     "unknown act_type"),
    ("an object array of non-numbers", lambda: np.array(onp.array([object()], dtype=object)),
     TypeError, "fastgrad.array: argument 'object'.*object"),
    ("an op on an object array", lambda: np.sin(onp.array([object()], dtype=object)),
     TypeError, "fastgrad.sin"),
    ("an array placed on a GPU", lambda: np.zeros((2,), ctx=mx.gpu(0)), ValueError, "CPU only"),
    # ---- in-place writes
    ("in-place add inside record on a recorded array",
     lambda: recorded(lambda t: t.__iadd__(1)), RuntimeError, "in-place addition"),
    ("setitem inside record on a variable",
     lambda: recorded(lambda t: t.__setitem__(0, 1.0)), RuntimeError,
     r"in-place assignment.*variable"),
    ("setitem inside record with repeated indices",
     lambda: recorded(lambda t: (t * 2).__setitem__(onp.array([0, 0]), 1.0)), IndexError,
     r"repeated indices"),
    ("mutating a saved array then backward", _inplace_then_backward, RuntimeError,
     "multiply.*modified in place"),
    # ---- symbols and executors
    ("malformed JSON graph", lambda: mx.sym.load_json("{not json"), ValueError,
     "not valid JSON"),
    ("JSON graph without its header", lambda: mx.sym.load_json(json.dumps(
        {"nodes": [], "heads": []})), ValueError, "missing"),
    ("JSON graph naming an unknown op", lambda: mx.sym.load_json(_with_op("os.system")),
     ValueError, "unknown op 'os.system'"),
    ("binding with a missing argument", lambda: _bind(_two_plus, {"a": np.ones(2)}),
     ValueError, "b"),
    ("binding with an unknown argument",
     lambda: _bind(_two_plus, {"a": np.ones(2), "b": np.ones(2), "c": np.ones(2)}),
     ValueError, "c"),
    ("unknown keyword in forward", lambda: _bind(
        _two_plus, {"a": np.ones(2), "b": np.ones(2)}).forward(z=np.ones(2)), ValueError,
     "'z' is not an argument"),
    ("copy_params_from with an unknown name", lambda: _bind(
        _two_plus, {"a": np.ones(2), "b": np.ones(2)}).copy_params_from({"q": np.ones(2)}),
     ValueError, "q"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_misuse_raises_a_clear_error(case):
    _, fn, exc_type, pattern = case
    with pytest.raises(exc_type, match=pattern) as info:
        fn()
    text = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert text.strip(), "the error has no message"


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def test_failed_backward_leaves_variables_gradients_untouched():
    x = var()
    x.grad[:] = 7.0
    with pytest.raises(ValueError):
        with autograd.record():
            y = x * 2
        y.backward(onp.ones(3))
    onp.testing.assert_array_equal(x.grad.asnumpy(), [7.0, 7.0])


def test_registry_is_read_only():
    from fastgrad._ops._registry import REGISTRY
    with pytest.raises(TypeError):
        REGISTRY["sin"] = None
    with pytest.raises(AttributeError):
        REGISTRY["sin"].forward = None
