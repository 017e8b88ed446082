"""The chi-squared distribution: ``fastgrad.scipy.stats.chi2`` (``scipy.stats.chi2``), the
gamma distribution with shape ``df / 2`` and scale 2."""

from fastgrad.scipy.stats import gamma as _gamma
from fastgrad.scipy.stats._common import as_array


def _args(df, scale):
    # Python numbers stay numbers (weak: a float32 x keeps its dtype)
    return (df / 2 if type(df) in (int, float) else as_array(df) / 2,
            scale * 2 if type(scale) in (int, float) else as_array(scale) * 2)


def logpdf(x, df, loc=0.0, scale=1.0):
    """The log of the probability density."""
    a, s = _args(df, scale)
    return _gamma.logpdf(x, a, loc, s)


def pdf(x, df, loc=0.0, scale=1.0):
    """The probability density."""
    a, s = _args(df, scale)
    return _gamma.pdf(x, a, loc, s)


def cdf(x, df, loc=0.0, scale=1.0):
    """The distribution function (not differentiable in ``df``)."""
    a, s = _args(df, scale)
    return _gamma.cdf(x, a, loc, s)


def logcdf(x, df, loc=0.0, scale=1.0):
    """The log of the distribution function."""
    a, s = _args(df, scale)
    return _gamma.logcdf(x, a, loc, s)


def sf(x, df, loc=0.0, scale=1.0):
    """The survival function."""
    a, s = _args(df, scale)
    return _gamma.sf(x, a, loc, s)


def logsf(x, df, loc=0.0, scale=1.0):
    """The log of the survival function."""
    a, s = _args(df, scale)
    return _gamma.logsf(x, a, loc, s)


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
