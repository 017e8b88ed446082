"""Differentiable special functions: ``fastgrad.scipy.special`` (``scipy.special``).

Each function is an op of the derivative table (``_table_special.py``) or a composition of
ops. Arguments without a closed-form derivative (the order of ``polygamma``, ``iv``, ``jv``,
``jn``...; the shape ``a`` of ``gammainc``/``gammaincc``; ``a`` and ``b`` of ``betainc``) raise
``NotImplementedError`` naming the op and the argument when they are variables.

Examples
--------
>>> from fastgrad import np
>>> from fastgrad.functional import grad
>>> from fastgrad.scipy import special
>>> grad(special.gammaln)(np.array(3.0, dtype="float64"))     # digamma(3) = 1.5 - euler_gamma
array(0.92278434, dtype=float64)
"""

import numpy as _onp

from fastgrad._api import _functions as _F
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._ops._registry import REGISTRY as _P
from fastgrad._ops._table_special import _scipy

gamma = _P["gamma"]
gammaln = _P["gammaln"]
rgamma = _P["rgamma"]
digamma = psi = _P["digamma"]
polygamma = _P["polygamma"]
beta = _P["beta"]
betaln = _P["betaln"]
betainc = _P["betainc"]
gammainc = _P["gammainc"]
gammaincc = _P["gammaincc"]
erf = _P["erf"]
erfc = _P["erfc"]
erfinv = _P["erfinv"]
erfcinv = _P["erfcinv"]
expit = _P["sigmoid"]
logit = _P["logit"]
ndtr = _P["ndtr"]
log_ndtr = _P["log_ndtr"]
ndtri = _P["ndtri"]
xlogy = _P["xlogy"]
xlog1py = _P["xlog1py"]
i0 = _P["i0"]
i1 = _P["i1"]
i0e = _P["i0e"]
i1e = _P["i1e"]
iv = _P["iv"]
ive = _P["ive"]
jv = _P["jv"]
yv = _P["yv"]
j0 = _P["j0"]
j1 = _P["j1"]
y0 = _P["y0"]
y1 = _P["y1"]
stdtr = _P["stdtr"]


def jn(n, x):
    """The Bessel function of the first kind of integer order ``n`` (``scipy.special.jn``);
    differentiable in ``x``."""
    return jv(n, x)


def yn(n, x):
    """The Bessel function of the second kind of integer order ``n`` (``scipy.special.yn``);
    differentiable in ``x``."""
    return yv(n, x)


def gammasgn(x):
    """The sign of the gamma function (``scipy.special.gammasgn``); not differentiable."""
    return _wrap(_onp.asarray(_scipy("special").gammasgn(unwrap(x))))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d``
    (``scipy.special.multigammaln``), differentiable in ``a``."""
    d = int(d)
    if _onp.any(_onp.asarray(unwrap(a)) <= 0.5 * (d - 1)):
        raise ValueError("fastgrad.scipy.special.multigammaln: a must be larger than "
                         "(d - 1) / 2 = %g" % (0.5 * (d - 1)))
    out = d * (d - 1) / 4.0 * float(_onp.log(_onp.pi))
    for j in range(d):
        out = gammaln(_F.subtract(a, 0.5 * j)) + out
    return out


def _flat_axis(name, op, x, axis):
    if axis is None:
        x = x if isinstance(x, ndarray) else _F.asarray(_onp.asarray(x, dtype=float))
        return _F.reshape(op(_F.reshape(x, (-1,)), -1), x.shape)
    return op(x, int(axis))


def softmax(x, axis=None):
    """``exp(x) / sum(exp(x))`` over ``axis`` (all elements when None;
    ``scipy.special.softmax``)."""
    return _flat_axis("softmax", _P["softmax"], x, axis)


def log_softmax(x, axis=None):
    """``x - logsumexp(x)`` over ``axis`` (all elements when None;
    ``scipy.special.log_softmax``)."""
    return _flat_axis("log_softmax", _P["log_softmax"], x, axis)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow (``scipy.special.logsumexp``),
    differentiable in ``a`` and ``b``.

    With ``return_sign=True`` returns ``(log|s|, sign(s))`` for ``s = sum(b * exp(a))``, which
    may be negative when ``b`` is; without it a negative sum gives NaN, as in SciPy.

    Examples
    --------
    >>> from fastgrad import np
    >>> from fastgrad.scipy.special import logsumexp
    >>> logsumexp(np.array([0., 0.]), b=np.array([1., -0.5]), return_sign=True)
    (array(-0.6931472), array(1.))
    """
    ax = _F._axis(axis)
    if b is None and not return_sign:
        return _P["logsumexp"](a, ax, bool(keepdims))
    if not isinstance(a, ndarray):
        a = _F.asarray(_onp.asarray(a, dtype=float))
    shift = _onp.max(unwrap(a), axis=ax, keepdims=True) if unwrap(a).size else \
        _onp.zeros([1] * a.ndim)
    shift = _onp.where(_onp.isfinite(shift), shift, 0).astype(a.dtype)   # a constant
    terms = _F.exp(a - shift)
    if b is not None:
        terms = terms * b
    s = _F.sum(terms, axis=ax, keepdims=True)
    sign = _wrap(_onp.sign(unwrap(s)))
    out = _F.log(s * sign) + shift
    if not keepdims:
        axes = tuple(range(out.ndim)) if ax is None else ax
        out = _F.squeeze(out, axes)
        sign = _F.squeeze(sign, axes)
    if return_sign:
        return out, sign
    return _F.where(unwrap(sign) < 0, _onp.nan, out)


__all__ = ["gamma", "gammaln", "rgamma", "digamma", "psi", "polygamma", "multigammaln",
           "beta", "betaln", "betainc", "gammainc", "gammaincc", "gammasgn", "erf", "erfc",
           "erfinv", "erfcinv", "expit", "logit", "ndtr", "log_ndtr", "ndtri", "xlogy",
           "xlog1py", "logsumexp", "softmax", "log_softmax", "i0", "i1", "i0e", "i1e", "iv",
           "ive", "jv", "yv", "j0", "j1", "y0", "y1", "jn", "yn", "stdtr"]
