"""Student's t distribution: ``fastgrad.scipy.stats.t`` (``scipy.stats.t``).

The distribution functions (``cdf``, ``sf`` and their logs) are differentiable in ``x``,
``loc`` and ``scale``; their derivative in ``df`` has no closed form and raises.
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import as_array, standardize, log_or_neg_inf


def logpdf(x, df, loc=0.0, scale=1.0):
    """The log of the probability density."""
    z, log_scale = standardize(x, loc, scale)
    df = as_array(df, like=z)
    return (special.gammaln((df + 1) / 2) - special.gammaln(df / 2)
            - 0.5 * F.log(df * _onp.pi) - log_scale - (df + 1) / 2 * F.log1p(z * z / df))


def pdf(x, df, loc=0.0, scale=1.0):
    """The probability density."""
    return F.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0.0, scale=1.0):
    """The distribution function."""
    return special.stdtr(df, standardize(x, loc, scale)[0])


def sf(x, df, loc=0.0, scale=1.0):
    """The survival function."""
    return special.stdtr(df, -standardize(x, loc, scale)[0])


def logcdf(x, df, loc=0.0, scale=1.0):
    """The log of the distribution function."""
    return log_or_neg_inf(cdf(x, df, loc, scale))


def logsf(x, df, loc=0.0, scale=1.0):
    """The log of the survival function."""
    return log_or_neg_inf(sf(x, df, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
