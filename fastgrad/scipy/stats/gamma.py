"""The gamma distribution: ``fastgrad.scipy.stats.gamma`` (``scipy.stats.gamma``), shape
``a``. ``cdf``/``sf`` and their logs are differentiable in ``x``, ``loc`` and ``scale``;
their derivative in ``a`` has no closed form and raises."""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import as_array, standardize, inside, log_or_neg_inf


def logpdf(x, a, loc=0.0, scale=1.0):
    """The log of the probability density (``-inf`` for ``x < loc``)."""
    z, log_scale = standardize(x, loc, scale)
    a = as_array(a, like=z)
    mask, zs = inside(z, 0.0)
    value = special.xlogy(a - 1, zs) - zs - special.gammaln(a) - log_scale
    return F.where(mask, value, -_onp.inf)


def pdf(x, a, loc=0.0, scale=1.0):
    """The probability density."""
    return F.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0.0, scale=1.0):
    """The distribution function (the regularized lower incomplete gamma function)."""
    mask, zs = inside(standardize(x, loc, scale)[0], 0.0)
    return F.where(mask, special.gammainc(a, zs), 0.0)


def sf(x, a, loc=0.0, scale=1.0):
    """The survival function."""
    mask, zs = inside(standardize(x, loc, scale)[0], 0.0)
    return F.where(mask, special.gammaincc(a, zs), 1.0)


def logcdf(x, a, loc=0.0, scale=1.0):
    """The log of the distribution function."""
    return log_or_neg_inf(cdf(x, a, loc, scale))


def logsf(x, a, loc=0.0, scale=1.0):
    """The log of the survival function."""
    return log_or_neg_inf(sf(x, a, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
