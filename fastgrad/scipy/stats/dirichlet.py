"""The Dirichlet distribution: ``fastgrad.scipy.stats.dirichlet`` (``scipy.stats.dirichlet``).

``x`` has the components along its first axis (``(K,)`` or ``(K, N)``, as in SciPy) and
``alpha`` is a vector of ``K`` concentrations; differentiable in both.
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import unwrap
from fastgrad.scipy import special
from fastgrad.scipy.stats._common import as_array


def logpdf(x, alpha):
    """The log of the probability density."""
    x, alpha = as_array(x), as_array(alpha)
    if alpha.ndim != 1 or x.shape[0] != alpha.shape[0]:
        raise ValueError("fastgrad.scipy.stats.dirichlet.logpdf: x must have the %d "
                         "components of alpha along its first axis, got shape %s"
                         % (alpha.shape[0] if alpha.ndim else 0, x.shape))
    data = unwrap(x)
    if _onp.any(data <= 0) or _onp.any(_onp.abs(data.sum(0) - 1) > 1e-9 * data.shape[0]
                                        + _onp.finfo(data.dtype).eps * 10):
        raise ValueError("fastgrad.scipy.stats.dirichlet.logpdf: x must lie in the open "
                         "simplex (positive, summing to 1 along the first axis)")
    a = F.reshape(alpha, (-1,) + (1,) * (x.ndim - 1))
    return (F.sum(special.xlogy(a - 1, x), axis=0) + special.gammaln(F.sum(alpha))
            - F.sum(special.gammaln(alpha)))


def pdf(x, alpha):
    """The probability density."""
    return F.exp(logpdf(x, alpha))


__all__ = ["logpdf", "pdf"]
