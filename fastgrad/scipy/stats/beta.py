"""The beta distribution: ``fastgrad.scipy.stats.beta`` (``scipy.stats.beta``). ``cdf``/``sf``
and their logs are differentiable in ``x``, ``loc`` and ``scale``, not in ``a`` and ``b``
(no closed form: they raise)."""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import as_array, standardize, inside, log_or_neg_inf


def logpdf(x, a, b, loc=0.0, scale=1.0):
    """The log of the probability density (``-inf`` outside ``[loc, loc + scale]``)."""
    z, log_scale = standardize(x, loc, scale)
    a, b = as_array(a, like=z), as_array(b, like=z)
    mask, zs = inside(z, 0.0, 1.0)
    value = (special.xlogy(a - 1, zs) + special.xlog1py(b - 1, -zs) - special.betaln(a, b)
             - log_scale)
    return F.where(mask, value, -_onp.inf)


def pdf(x, a, b, loc=0.0, scale=1.0):
    """The probability density."""
    return F.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0.0, scale=1.0):
    """The distribution function (the regularized incomplete beta function)."""
    z = standardize(x, loc, scale)[0]
    mask, zs = inside(z, 0.0, 1.0)
    return F.where(mask, special.betainc(a, b, zs), _onp.where(_onp.asarray(z) > 1, 1.0, 0.0))


def sf(x, a, b, loc=0.0, scale=1.0):
    """The survival function."""
    return 1.0 - cdf(x, a, b, loc, scale)


def logcdf(x, a, b, loc=0.0, scale=1.0):
    """The log of the distribution function."""
    return log_or_neg_inf(cdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0.0, scale=1.0):
    """The log of the survival function."""
    return log_or_neg_inf(sf(x, a, b, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
