"""The Poisson distribution: ``fastgrad.scipy.stats.poisson`` (``scipy.stats.poisson``).

Differentiable in the mean ``mu``; the count ``k`` is discrete and is read as a constant.
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import unwrap
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import as_array, log_or_neg_inf


def _count(k, loc):
    return _onp.asarray(unwrap(k), dtype=_onp.float64) - _onp.asarray(unwrap(loc))


def logpmf(k, mu, loc=0):
    """The log of the probability mass (``-inf`` off the non-negative integers)."""
    k = _count(k, loc)
    mu = as_array(mu)
    ok = (k >= 0) & (k == _onp.floor(k))
    ks = _onp.where(ok, k, 0.0)
    value = special.xlogy(ks, mu) - mu - special.gammaln(ks + 1)
    return F.where(ok, value, -_onp.inf)


def pmf(k, mu, loc=0):
    """The probability mass."""
    return F.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """The distribution function ``P(K <= k)`` (the regularized upper incomplete gamma
    function of ``floor(k) + 1`` at ``mu``)."""
    k = _onp.floor(_count(k, loc))
    ok = k >= 0
    return F.where(ok, special.gammaincc(_onp.where(ok, k, 0.0) + 1, as_array(mu)), 0.0)


def sf(k, mu, loc=0):
    """The survival function ``P(K > k)``."""
    k = _onp.floor(_count(k, loc))
    ok = k >= 0
    return F.where(ok, special.gammainc(_onp.where(ok, k, 0.0) + 1, as_array(mu)), 1.0)


def logcdf(k, mu, loc=0):
    """The log of the distribution function."""
    return log_or_neg_inf(cdf(k, mu, loc))


def logsf(k, mu, loc=0):
    """The log of the survival function."""
    return log_or_neg_inf(sf(k, mu, loc))


__all__ = ["logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"]
