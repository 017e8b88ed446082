"""The multivariate normal distribution: ``fastgrad.scipy.stats.multivariate_normal``.

``x`` has the components along its last axis; ``mean`` is a vector, ``cov`` a matrix (a
number or a vector gives an isotropic or diagonal covariance). Differentiable in ``x``,
``mean`` and ``cov`` through a Cholesky factorization.

Note [Singular covariance]
~~~~~~~~~~~~~~~~~~~~~~~~~~
With ``allow_singular=True`` (and in ``entropy``) the density lives on the range of ``cov``,
as in SciPy: the eigenvalues above SciPy's cutoff (``1e6 * eps * max |eigenvalue|`` in
float64, ``1e3 * eps * ...`` in float32) make the rank and the pseudo-determinant, and the
Mahalanobis distance uses the pseudo-inverse; points off the support get ``-inf``. The
projector ``P`` onto that range is computed from ``cov``'s values and held constant, and the
functions are written with ``M = P cov P + (I - P)``, which is invertible:
``log pdet(cov) = log det M`` and ``pinv(cov) = P M^{-1} P``. So the gradient with respect
to ``cov`` is ``pinv(cov)``-shaped (``d log pdet = pinv(cov)``, ``d maha = -pinv dev dev^T
pinv``), the derivative along the covariances of the same rank, which is as far as the
gradient exists: off that set the rank, and the function, jump. Higher orders
differentiate the same formula with the support held fixed. With a non-singular ``cov``
the two paths agree.
"""

import math

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import unwrap
from fastgrad._api._linalg import linalg as _np_linalg
from fastgrad.scipy import linalg
from fastgrad.scipy.stats._common import as_array


def _cov(cov, d):
    cov = as_array(cov)
    if cov.ndim == 0:
        return cov * _onp.eye(d)
    if cov.ndim == 1:
        return F.diag(cov)
    return cov


def _support(cov, who):
    """The projector onto the range of ``cov``, its complement, the rank and the eigenvectors
    of the null space, as NumPy constants (Note [Singular covariance])."""
    c = _onp.asarray(unwrap(cov))
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError("fastgrad.scipy.stats.multivariate_normal.%s: cov must be a square "
                         "matrix, got shape %s" % (who, c.shape))
    s, v = _onp.linalg.eigh(c)
    factor = 1e3 if c.dtype == _onp.float32 else 1e6
    eps = factor * _onp.finfo(c.dtype).eps * (_onp.max(_onp.abs(s)) if s.size else 0.0)
    if s.size and _onp.min(s) < -eps:
        raise ValueError("fastgrad.scipy.stats.multivariate_normal.%s: cov must be symmetric "
                         "positive semidefinite" % who)
    keep = s > eps
    rng = v[:, keep]
    proj = rng @ rng.T
    return proj, _onp.eye(c.shape[0], dtype=c.dtype) - proj, int(keep.sum()), v[:, ~keep], \
        1e3 * eps


def _singular_logpdf(x, mean, cov, d):
    cov = _cov(cov, d)
    proj, comp, rank, null, tol = _support(cov, "logpdf")
    proj = proj.astype(unwrap(cov).dtype)
    comp = comp.astype(unwrap(cov).dtype)
    m = F.matmul(F.matmul(proj, cov), proj) + comp
    _, log_pdet = _np_linalg.slogdet(m)
    diff = x if mean is None else x - mean
    rows = F.reshape(diff, (-1, d))
    pr = F.matmul(rows, proj)                                    # dev on the support
    maha = F.sum(pr * F.transpose(_np_linalg.solve(m, F.transpose(pr))), axis=-1)
    out = -0.5 * (rank * math.log(2 * math.pi) + log_pdet + maha)
    if rank < d:
        off = _onp.linalg.norm(unwrap(rows) @ null, axis=-1) >= tol
        if off.any():
            out = F.where(off, -_onp.inf, out)
    out = F.reshape(out, diff.shape[:-1])
    return F.squeeze(out) if 1 in out.shape else out


def logpdf(x, mean=None, cov=1.0, allow_singular=False):
    """The log of the probability density; one value per row of ``x``, with axes of length
    one squeezed as SciPy does (a number for one point). ``allow_singular=True`` accepts a
    positive semidefinite ``cov``: the density on its range (Note [Singular covariance])."""
    x = as_array(x)
    d = x.shape[-1] if x.ndim else 1
    if allow_singular:
        return _singular_logpdf(x, mean, cov, d)
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


def entropy(mean=None, cov=1.0):
    """The differential entropy, ``(rank (log 2 pi + 1) + log pdet(cov)) / 2``
    (``scipy.stats.multivariate_normal.entropy``, which accepts a singular ``cov`` as
    well); differentiable in ``cov`` (Note [Singular covariance])."""
    mean_ = None if mean is None else as_array(mean)
    cov = as_array(cov)
    d = mean_.shape[-1] if mean_ is not None and mean_.ndim else \
        (cov.shape[-1] if cov.ndim else 1)
    cov = _cov(cov, d)
    proj, comp, rank, _, _ = _support(cov, "entropy")
    dtype = unwrap(cov).dtype
    m = F.matmul(F.matmul(proj.astype(dtype), cov), proj.astype(dtype)) + comp.astype(dtype)
    _, log_pdet = _np_linalg.slogdet(m)
    return 0.5 * (rank * (math.log(2 * math.pi) + 1) + log_pdet)


def _no_cdf(*args, **kwargs):
    raise NotImplementedError("fastgrad.scipy.stats.multivariate_normal.cdf: no closed form "
                              "(SciPy integrates numerically); not differentiable here")


cdf = logcdf = _no_cdf

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "entropy"]
