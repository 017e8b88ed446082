"""The normal distribution: ``fastgrad.scipy.stats.norm`` (``scipy.stats.norm``).

Examples
--------
>>> from fastgrad import np
>>> from fastgrad.scipy.stats import norm
>>> norm.logpdf(np.array([0., 1.]), loc=np.array([0., 0.]), scale=2.)
array([-1.6120857, -1.7370857])
"""

import math

from fastgrad._api import _functions as F
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import standardize

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def logpdf(x, loc=0.0, scale=1.0):
    """The log of the probability density."""
    z, log_scale = standardize(x, loc, scale)
    return -0.5 * z * z - log_scale - _HALF_LOG_2PI


def pdf(x, loc=0.0, scale=1.0):
    """The probability density."""
    return F.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """The distribution function ``P(X <= x)``."""
    return special.ndtr(standardize(x, loc, scale)[0])


def logcdf(x, loc=0.0, scale=1.0):
    """The log of the distribution function, accurate in the lower tail."""
    return special.log_ndtr(standardize(x, loc, scale)[0])


def sf(x, loc=0.0, scale=1.0):
    """The survival function ``P(X > x)``."""
    return special.ndtr(-standardize(x, loc, scale)[0])


def logsf(x, loc=0.0, scale=1.0):
    """The log of the survival function, accurate in the upper tail."""
    return special.log_ndtr(-standardize(x, loc, scale)[0])


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
