"""The multivariate normal distribution: ``fastgrad.scipy.stats.multivariate_normal``.

``x`` has the components along its last axis; ``mean`` is a vector, ``cov`` a matrix (a
number or a vector gives an isotropic or diagonal covariance). Differentiable in ``x``,
``mean`` and ``cov`` through a Cholesky factorization.
"""

import math

import numpy as _onp

from fastgrad import _functions as F
from fastgrad._linalg import linalg as _np_linalg
from fastgrad.scipy import linalg
from fastgrad.scipy.stats._common import as_array


def _cov(cov, d):
    cov = as_array(cov)
    if cov.ndim == 0:
        return cov * _onp.eye(d)
    if cov.ndim == 1:
        return F.diag(cov)
    return cov


def logpdf(x, mean=None, cov=1.0, allow_singular=False):
    """The log of the probability density; one value per row of ``x``, with axes of length
    one squeezed as SciPy does (a number for one point)."""
    if allow_singular:
        raise NotImplementedError("fastgrad.scipy.stats.multivariate_normal.logpdf: "
                                  "allow_singular=True is not supported")
    x = as_array(x)
    d = x.shape[-1] if x.ndim else 1
    diff = x if mean is None else x - mean
    factor = _np_linalg.cholesky(_cov(cov, d))
    rows = F.reshape(diff, (-1, d))
    y = linalg.solve_triangular(factor, F.transpose(rows), lower=True)
    maha = F.sum(y * y, axis=0)
    log_det = 2 * F.sum(F.log(F.diagonal(factor)))
    out = -0.5 * (d * math.log(2 * math.pi) + log_det + maha)
    out = F.reshape(out, diff.shape[:-1])
    return F.squeeze(out) if 1 in out.shape else out     # as SciPy: one point, one number


def pdf(x, mean=None, cov=1.0, allow_singular=False):
    """The probability density."""
    return F.exp(logpdf(x, mean, cov, allow_singular))


def _no_cdf(*args, **kwargs):
    raise NotImplementedError("fastgrad.scipy.stats.multivariate_normal.cdf: no closed form "
                              "(SciPy integrates numerically); not differentiable here")


cdf = logcdf = _no_cdf

__all__ = ["logpdf", "pdf", "cdf", "logcdf"]
