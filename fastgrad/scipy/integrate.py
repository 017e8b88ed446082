"""Differentiable ODE integration: ``fastgrad.scipy.integrate`` (``scipy.integrate``).

``odeint`` is ``autograd.scipy.integrate.odeint`` of HIPS autograd: SciPy's ``odeint``
(LSODA) integrates forward, and the gradient with respect to the initial state, the times
and the extra arguments comes from the adjoint method (Note [ODE adjoint]).

Note [ODE adjoint]
~~~~~~~~~~~~~~~~~~
For ``dy/dt = f(y, t, *args)`` observed at ``t_0 < ... < t_{T-1}`` and the gradients ``g_i``
of a loss with respect to ``y(t_i)``, the adjoint ``a(t) = dL/dy(t)`` obeys
``da/dt = -a^T df/dy``, and ``dL/dargs`` accumulates ``-a^T df/dargs`` along the way. One
backward integration per interval, from ``t_i`` down to ``t_{i-1}``, carries the state
``[y, a, dL/dt_0, dL/dargs]`` (``y`` is integrated backward again rather than stored, as in
HIPS autograd and Chen et al. 2018); ``g_{i-1}`` is added to ``a`` at each observation, and
the gradient with respect to ``t_i`` is ``g_i . f(y_i, t_i)`` (``t_0``'s is minus the sum of
the others plus the integral). The vector-Jacobian products ``a^T df/d(y, t, args)`` are
fastgrad backward passes through ``func``, so ``func`` is written with fastgrad ops (or
NumPy functions on fastgrad arrays) like any recorded function. The gradient is accurate to
the tolerances ``rtol``/``atol`` of the integrations (pass tighter ones for tight gradients).

The gradient is computed once: it has no history, so ``create_graph=True`` through
``odeint`` raises ``NotImplementedError`` rather than give a silently-zero second order.
"""

import numpy as _onp

from fastgrad._core import _engine
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._core._custom_function import Function
from fastgrad._core._state import is_recording, set_recording
from fastgrad._ops._table_special import _scipy

__all__ = ["odeint"]


def _call(func, y, t, args, shape):
    """``func(y, t, *args)`` on fastgrad arrays, flattened to a NumPy vector."""
    out = func(_wrap(y.reshape(shape)), _wrap(_onp.asarray(t, dtype=y.dtype)),
               *[_wrap(a) if isinstance(a, _onp.ndarray) else a for a in args])
    return _onp.asarray(unwrap(out), dtype=y.dtype).reshape(-1)


def _vjp(func, y, t, args, shape, array_pos, cot):
    """``f(y, t, args)`` and ``cot^T df/dy``, ``cot^T df/dt``, ``cot^T df/dargs[k]`` (flat)."""
    yv = _wrap(y.reshape(shape).copy())
    tv = _wrap(_onp.asarray(t, dtype=y.dtype))
    call = [a for a in args]
    variables = [yv, tv]
    for k in array_pos:
        call[k] = _wrap(_onp.array(args[k], copy=True))
        variables.append(call[k])
    for v in variables:
        v.attach_grad()
    prev = set_recording(True)
    try:
        out = func(yv, tv, *call)
        if not isinstance(out, ndarray):
            out = _wrap(_onp.asarray(out, dtype=y.dtype))
    finally:
        set_recording(prev)
    value = _onp.asarray(unwrap(out), dtype=y.dtype).reshape(-1)
    # autograd.grad's backward pass (the engine's, a layer below this one), no graph kept
    grads = _engine.run_backward([out], [_wrap(cot.reshape(out.shape))], variables,
                                 False, False, True, True)  # retain, create, train, unused
    flat = [_onp.asarray(unwrap(g), dtype=y.dtype).reshape(-1) for g in grads]
    return value, flat


class _ODEInt(Function):
    """The recorded call of ``odeint`` (Note [ODE adjoint])."""

    def __init__(self, func, args, array_pos, kwargs):
        super().__init__()
        self.func, self.args, self.array_pos, self.kwargs = func, args, array_pos, kwargs

    def _odeint(self, fun, y0, t, args=()):
        return _scipy("integrate").odeint(fun, y0, t, args=args, **self.kwargs)

    def forward(self, y0, t, *arrays):
        y0n = _onp.asarray(unwrap(y0), dtype=_onp.result_type(unwrap(y0), _onp.float64))
        self.dtype = _onp.asarray(unwrap(y0)).dtype
        self.shape = y0n.shape
        self.tn = _onp.asarray(unwrap(t), dtype=_onp.float64)
        args = list(self.args)
        for k, a in zip(self.array_pos, arrays):
            args[k] = _onp.asarray(unwrap(a), dtype=_onp.float64)
        self.argsn = args
        shape, func = self.shape, self.func

        def rhs(y, tt):
            return _call(func, y, tt, args, shape)
        yt = self._odeint(rhs, y0n.reshape(-1), self.tn)
        self.yt = yt
        return _wrap(yt.reshape(self.tn.shape + shape).astype(self.dtype, copy=False))

    def backward(self, g):
        if is_recording():
            raise NotImplementedError(
                "fastgrad.scipy.integrate.odeint: the adjoint gradient is computed once and "
                "is not differentiable again (create_graph=True); Note [ODE adjoint]")
        func, shape, args, pos = self.func, self.shape, self.argsn, self.array_pos
        yt, tn = self.yt, self.tn
        T, D = yt.shape
        g = _onp.asarray(unwrap(g), dtype=_onp.float64).reshape(T, D)
        sizes = [args[k].size for k in pos]
        n_args = sum(sizes)

        def unpack(x):
            return x[:D], x[D:2 * D], x[2 * D], x[2 * D + 1:]

        def augmented(state, tt):
            y, a, _, _ = unpack(state)
            dy, (vy, vt, *va) = _vjp(func, y, tt, args, shape, pos, -a)
            return _onp.concatenate([dy, vy, vt.reshape(1)] + va)

        vjp_y = g[-1].copy()
        vjp_t0 = 0.0
        vjp_args = _onp.zeros(n_args)
        time_vjps = []
        for i in range(T - 1, 0, -1):
            cur = float(_onp.dot(_call(func, yt[i], tn[i], args, shape), g[i]))
            time_vjps.append(cur)
            vjp_t0 -= cur
            state = _onp.concatenate([yt[i], vjp_y, [vjp_t0], vjp_args])
            out = self._odeint(augmented, state, _onp.array([tn[i], tn[i - 1]]))
            _, vjp_y, vjp_t0, vjp_args = unpack(out[1])
            vjp_y = vjp_y + g[i - 1]
        time_vjps.append(vjp_t0)
        grad_t = _onp.array(time_vjps[::-1]).reshape(tn.shape)
        grads = [_wrap(vjp_y.reshape(shape).astype(self.dtype, copy=False)), _wrap(grad_t)]
        start = 0
        for k, size in zip(pos, sizes):
            grads.append(_wrap(vjp_args[start:start + size].reshape(args[k].shape)))
            start += size
        return tuple(grads)


def odeint(func, y0, t, args=(), rtol=None, atol=None, **kwargs):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` and return ``y`` at
    every time of ``t`` (``scipy.integrate.odeint``, shape ``(len(t),) + y0.shape``);
    differentiable once in ``y0``, ``t`` and the array arguments in ``args``, by the adjoint
    method (Note [ODE adjoint]). ``func`` takes and returns fastgrad arrays. Keyword
    arguments go to SciPy's ``odeint``, for the forward and the adjoint integrations.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.functional import grad
    >>> from fastgrad.scipy.integrate import odeint
    >>> def y1(k):                     # y' = -k y, y(0) = 1: y(1) = exp(-k)
    ...     t = np.array([0.0, 1.0], dtype="float64")
    ...     return odeint(lambda y, t, k: -k * y, np.array([1.0], dtype="float64"), t,
    ...                   args=(k,), rtol=1e-10, atol=1e-10)[1, 0]
    >>> round(float(grad(y1)(np.array(0.5, dtype="float64"))), 6)   # -exp(-0.5)
    -0.606531
    """
    if kwargs.get("Dfun") is not None or kwargs.get("full_output"):
        raise NotImplementedError("fastgrad.scipy.integrate.odeint: Dfun and full_output "
                                  "are not supported")
    if not callable(func):
        raise TypeError("fastgrad.scipy.integrate.odeint: func must be callable, got %r"
                        % (type(func).__name__,))
    if not isinstance(args, tuple):
        args = (args,)
    if rtol is not None:
        kwargs["rtol"] = rtol
    if atol is not None:
        kwargs["atol"] = atol
    y0 = y0 if isinstance(y0, ndarray) else _wrap(_onp.asarray(y0, dtype=_onp.float64))
    t = t if isinstance(t, ndarray) else _wrap(_onp.asarray(t, dtype=_onp.float64))
    if t.ndim != 1:
        raise ValueError("fastgrad.scipy.integrate.odeint: t must be a vector of times, got "
                         "shape %s" % (t.shape,))
    pos = [k for k, a in enumerate(args) if isinstance(a, (ndarray, _onp.ndarray))]
    arrays = [a if isinstance(a, ndarray) else _wrap(a) for a in (args[k] for k in pos)]
    return _ODEInt(func, args, pos, kwargs)(y0, t, *arrays)
