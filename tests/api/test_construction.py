"""Arrays built from recorded arrays keep their history and NumPy's dtype.

Issue 12, items 3 and 8 (Note [History through construction] in fastgrad/_api/_construction.py).
Gradients are checked against float64 finite differences of the same expression in NumPy.
"""
import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import assert_close, numerical_grad  # noqa: E402

XV = onp.array([0.5, 1.5, -2.0])
YV = onp.array([1.0, -0.25, 3.0])


def var(values):
    a = np.array(onp.array(values, dtype=onp.float64))
    a.attach_grad()
    return a


def check(fg, ref, n_vars=1):
    """``fg(x[, y])`` with fastgrad against finite differences of ``ref`` in NumPy."""
    vs = [var(XV), var(YV)][:n_vars]
    with autograd.record():
        out = fg(*vs)
    assert out.dtype == onp.float64, out.dtype
    assert out.node is not None
    assert_close(out, ref(*[XV, YV][:n_vars]), rtol=1e-12)
    got = autograd.grad(out, vs)
    expected = numerical_grad(ref, *[XV, YV][:n_vars])
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=1e-6, atol=1e-8)


CASES = {
    "array of a list": (lambda x: np.array([x, 2 * x, x * x]),
                        lambda x: onp.array([x, 2 * x, x * x])),
    "array of an array": (lambda x: np.array(x) * x, lambda x: onp.array(x) * x),
    "array with a dtype": (lambda x: np.array(x, dtype="float64") ** 2, lambda x: x ** 2),
    "asarray of a list": (lambda x: np.asarray([x, np.sin(x)]),
                          lambda x: onp.asarray([x, onp.sin(x)])),
    "nested lists": (lambda x: np.array([[x[0], x[1]], [x[2], 2.0]]) ** 2,
                     lambda x: onp.array([[x[0], x[1]], [x[2], 2.0]]) ** 2),
    "list with constants": (lambda x: np.array([x, onp.ones(3), [1.0, 2.0, 3.0]]) * x,
                            lambda x: onp.array([x, onp.ones(3), [1.0, 2.0, 3.0]]) * x),
    "append": (lambda x: np.append([x, x], x), lambda x: onp.append([x, x], x)),
    "mean of a list": (lambda x: np.mean([x, x ** 3]), lambda x: onp.mean([x, x ** 3])),
    "std of a list": (lambda x: np.std([x, x ** 3]), lambda x: onp.std([x, x ** 3])),
    "var of a list": (lambda x: np.var([x, x ** 3]), lambda x: onp.var([x, x ** 3])),
    "sum of a list": (lambda x: np.sum([x, x ** 3]), lambda x: onp.sum([x, x ** 3])),
    "norm of a list": (lambda x: np.linalg.norm([x, x ** 3]),
                       lambda x: onp.linalg.norm([x, x ** 3])),
    "op on a tuple": (lambda x: np.sin((x, 2 * x)), lambda x: onp.sin((x, 2 * x))),
    "stack": (lambda x: np.stack([x, x * x], axis=1), lambda x: onp.stack([x, x * x], 1)),
    "concatenate": (lambda x: np.concatenate([x, [x[0] * 3]]),
                    lambda x: onp.concatenate([x, [x[0] * 3]])),
    "r_": (lambda x: np.r_[x, 2 * x, 1.0, [3.0, 4.0]],
           lambda x: onp.r_[x, 2 * x, 1.0, [3.0, 4.0]]),
    "r_ with a slice": (lambda x: np.r_[x, 0:3] * np.r_[0:6],
                        lambda x: onp.r_[x, 0:3] * onp.r_[0:6]),
    "c_": (lambda x: np.c_[x, x * x] ** 2, lambda x: onp.c_[x, x * x] ** 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_construction_keeps_history_and_float64(name):
    fg, ref = CASES[name]
    check(fg, ref)


def test_array_of_a_tuple_of_two_variables():
    check(lambda x, y: np.array((x, y)) ** 2 * np.array([[1.0], [3.0]]),
          lambda x, y: onp.array((x, y)) ** 2 * onp.array([[1.0], [3.0]]), n_vars=2)


def test_list_dtype_follows_numpy():
    x = var(XV)
    assert np.array([x[0], 2.0]).dtype == onp.float64
    assert np.array([x[0], 2]).dtype == onp.float64
    assert np.array([1, 2]).dtype == onp.float32            # Python numbers: MXNet default
    f32 = np.array(onp.array([1.0, 2.0], dtype="float32"))
    f32.attach_grad()
    with autograd.record():
        y = np.array([f32, f32 * 2])
    assert y.dtype == onp.float32 and y.node is not None


def test_array_of_a_variable_copies_with_history():
    x = var(XV)
    with autograd.record():
        c = np.array(x)
    assert c is not x and c.node is not None
    c_data = c.asnumpy()
    assert_close(c_data, XV)
    assert np.asarray(x) is x


def test_numpy_stack_of_fastgrad_arrays_dispatches():
    # NumPy dispatches functions whose argument list holds fastgrad arrays.
    x = var(XV)
    with autograd.record():
        y = onp.stack([x, x * x]).sum() + onp.concatenate([x, x]).sum()
    assert y.node is not None
    assert_close(autograd.grad(y, [x])[0], 3 + 2 * XV)


def test_numpy_functions_on_plain_lists_cannot_record():
    # Documented limit: NumPy converts a list's elements itself (no dispatch), so the result
    # is a plain NumPy value without history, never a wrong recorded gradient.
    x = var(XV)
    with autograd.record():
        m = onp.mean([x, x ** 3])
    assert not isinstance(m, np.ndarray)


def test_wrapped_arrays_keep_history_through_array_ufunc():
    from numpy.lib.mixins import NDArrayOperatorsMixin

    class Wrapped(NDArrayOperatorsMixin):
        """A minimal duck array holding a fastgrad array, as xarray's DataArray does."""

        def __init__(self, data):
            self.data = data

        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            inputs = [i.data if isinstance(i, Wrapped) else i for i in inputs]
            return Wrapped(getattr(ufunc, method)(*inputs, **kwargs))

        def __array_function__(self, func, types, args, kwargs):
            args = [a.data if isinstance(a, Wrapped) else a for a in args]
            return Wrapped(func(*args, **kwargs))

    x = var(XV)
    with autograd.record():
        w = Wrapped(x)
        h = onp.sin(w) * x + np.exp(x) * w - x / w
        total = onp.sum(h)
    assert isinstance(h, Wrapped) and isinstance(total, Wrapped)
    (g,) = autograd.grad(total.data, [x])
    expected, = numerical_grad(lambda v: onp.sin(v) * v + onp.exp(v) * v - 1.0, XV)
    assert_close(g, expected, rtol=1e-6)


class UfuncOnly:
    """A duck array holding a fastgrad array with ``__array_ufunc__`` but no
    ``__array_function__`` and an ``__array__`` that converts (as xarray's DataArray)."""

    def __init__(self, data):
        self.data = data

    def __array__(self, dtype=None, copy=None):
        return onp.asarray(self.data, dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [i.data if isinstance(i, UfuncOnly) else i for i in inputs]
        return UfuncOnly(getattr(ufunc, method)(*inputs, **kwargs))


def test_fastgrad_ufunc_ops_called_on_a_wrapper_keep_the_history_inside_it():
    """fastgrad.np.exp(wrapper) defers to the wrapper's __array_ufunc__ (Note [Foreign
    arrays]): the history of the fastgrad array inside survives (issue 25's xarray case)."""
    x = var(XV)
    with autograd.record():
        w = np.exp(UfuncOnly(2.0 * x))
        inner = np.add(w, x)
        total = np.sum(inner.data)
    assert isinstance(w, UfuncOnly) and isinstance(inner, UfuncOnly)
    (g,) = autograd.grad(total, [x])
    assert_close(g, 2.0 * onp.exp(2.0 * XV) + 1.0, rtol=1e-12)


def test_other_fastgrad_ops_refuse_a_wrapper_while_recording_and_convert_it_otherwise():
    x = var(XV)
    with autograd.record():
        with pytest.raises(TypeError, match=r"fastgrad\.sum: argument 0 is a .*UfuncOnly.*"
                                            r"history would be lost"):
            np.sum(UfuncOnly(x * x))
    assert float(np.sum(UfuncOnly(np.array(XV)))) == pytest.approx(onp.sum(XV), rel=1e-15)


def test_ndarray_returns_notimplemented_for_foreign_operands():
    class Other:
        __array_ufunc__ = None          # NumPy's way to opt out of ufuncs

        def __radd__(self, other):
            return "Other.__radd__"

    x = var(XV)
    assert x + Other() == "Other.__radd__"


# ---------------------------------------------------------------- item 8: bad inputs
@pytest.mark.parametrize("value", [
    onp.array([object(), object()], dtype=object),
    onp.array(["a", None], dtype=object),
    [[1.0, 2.0], [3.0]],
    ["a", "b"],
    [1.0, None],
])
def test_non_numeric_or_ragged_input_raises_type_error_naming_the_argument(value):
    with pytest.raises(TypeError, match="fastgrad.array: argument 'object'"):
        np.array(value)


def test_object_array_of_numbers_is_converted():
    a = np.array(onp.array([1, 2.5], dtype=object))
    assert a.dtype == onp.float64 and a.asnumpy().tolist() == [1.0, 2.5]


def test_ragged_list_of_recorded_arrays_raises_type_error():
    x = var(XV)
    with pytest.raises(TypeError, match="fastgrad.array: argument 'object'.*ragged"):
        np.array([x, x[:2]])
    with pytest.raises(TypeError, match="fastgrad.sum: argument 0.*ragged"):
        np.sum([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="fastgrad.sin: argument 0"):
        np.sin(["a", "b"])


def test_r_string_directives_are_a_clear_error():
    with pytest.raises(NotImplementedError, match="fastgrad.r_: string directives"):
        np.r_["0,2", var(XV)]
