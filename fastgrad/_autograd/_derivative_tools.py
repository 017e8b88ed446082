"""Jacobians, Hessians and their products with vectors, built on ``grad``.

All of them take a function ``f`` of one fastgrad array and the point ``x``; ``f`` is run
inside ``autograd.record()``. With ``create_graph=True`` the result keeps its history, so it
can be differentiated again.

Note [Forward mode by double backward]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
fastgrad's rules are differentiable, so a Jacobian-vector product needs no forward-mode rules:
``u -> J(x)^T u`` is linear in ``u``, and its gradient with respect to ``u`` along ``v`` is
``J(x) v``. ``jvp`` computes it with two reverse passes.
"""

import numpy as _onp

from fastgrad._core._array import ndarray, _wrap, unwrap
from fastgrad._core._state import set_recording
from fastgrad._core._engine import run_backward
from fastgrad._api import _functions as _F


def _variable(x):
    """``x`` itself if it has history (to keep differentiating through it), else a variable
    sharing its data."""
    if not isinstance(x, ndarray):
        x = _wrap(_onp.asarray(x))
    if x.node is not None:
        return x
    v = x.detach()
    v.attach_grad()
    return v


def _grad(heads, variables, head_grads, create_graph):
    return run_backward(heads, head_grads, variables, True, create_graph, True, True)


def _call(f, x):
    prev = set_recording(True)
    try:
        out = f(x)
    finally:
        set_recording(prev)
    if not isinstance(out, ndarray):
        raise TypeError("the function must return a fastgrad array, got %s"
                        % type(out).__name__)
    return out


def vjp(f, x, v, create_graph=False):
    """The vector-Jacobian product ``v^T J_f(x)`` (shape of ``x``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.np.array([1., 2.])
    >>> mx.autograd.vjp(lambda t: t * t, x, mx.np.array([1., 1.]))
    array([2., 4.])
    """
    xv = _variable(x)
    out = _call(f, xv)
    return _grad([out], [xv], [v], create_graph)[0]


def jvp(f, x, v, create_graph=False):
    """The Jacobian-vector product ``J_f(x) v`` (shape of ``f(x)``).

    Computed by two reverse passes (Note [Forward mode by double backward]).

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.np.array([1., 2.])
    >>> mx.autograd.jvp(lambda t: t * t, x, mx.np.array([1., 0.]))
    array([2., 0.])
    """
    xv = _variable(x)
    out = _call(f, xv)
    u = _wrap(_onp.zeros_like(unwrap(out)))
    u.attach_grad()
    prev = set_recording(True)
    try:
        g = run_backward([out], [u], [xv], True, True, True, True)[0]
        inner = (g * v).sum()
    finally:
        set_recording(prev)
    return run_backward([inner], None, [u], create_graph, create_graph, True, True)[0]


def jacobian(f, x, create_graph=False):
    """The Jacobian of ``f`` at ``x``, of shape ``f(x).shape + x.shape``.

    One reverse pass per element of ``f(x)``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.autograd.jacobian(lambda t: t * t, mx.np.array([1., 2.]))
    array([[2., 0.],
           [0., 4.]])
    """
    xv = _variable(x)
    out = _call(f, xv)
    out_shape = out.shape
    rows = []
    n = int(_onp.prod(out_shape))
    for i in range(n):
        e = _onp.zeros(n, dtype=out.dtype)
        e[i] = 1
        rows.append(_grad([out], [xv], [e.reshape(out_shape)], create_graph)[0])
    if create_graph:
        return _F.reshape(_F.stack(rows), out_shape + xv.shape)
    data = _onp.stack([unwrap(r) for r in rows]).reshape(out_shape + xv.shape)
    return _wrap(data, type(xv))


def hessian(f, x, create_graph=False):
    """The Hessian of a scalar function ``f`` at ``x``, of shape ``x.shape + x.shape``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.autograd.hessian(lambda t: (t ** 3).sum(), mx.np.array([1., 2.]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    def gradient(t):
        out = _call(f, t)
        if out.size != 1:
            raise ValueError("hessian: f must return a single value, got shape %s"
                             % (out.shape,))
        return run_backward([out], None, [t], True, True, True, True)[0]
    return jacobian(gradient, x, create_graph=create_graph)


def hvp(f, x, v, create_graph=False):
    """The Hessian-vector product ``H_f(x) v`` of a scalar function ``f`` (shape of ``x``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> mx.autograd.hvp(lambda t: (t ** 3).sum(), mx.np.array([1., 2.]),
    ...                 mx.np.array([1., 1.]))
    array([ 6., 12.])
    """
    xv = _variable(x)
    out = _call(f, xv)
    prev = set_recording(True)
    try:
        g = run_backward([out], None, [xv], True, True, True, True)[0]
        inner = (g * v).sum()
    finally:
        set_recording(prev)
    return run_backward([inner], None, [xv], create_graph, create_graph, True, True)[0]
