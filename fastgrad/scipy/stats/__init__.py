"""Differentiable probability distributions: ``fastgrad.scipy.stats`` (``scipy.stats``).

Each distribution is a module of functions (``norm.logpdf(x, loc, scale)``), as in HIPS
autograd's ``autograd.scipy.stats``; values and parameters broadcast and are all
differentiable, except where noted (a discrete value, a parameter whose derivative has no
closed form: those raise ``NotImplementedError`` naming the op and argument).
"""

from fastgrad.scipy.stats import (norm, t, gamma, beta, chi2, poisson,  # noqa: F401
                                  multivariate_normal, dirichlet)

__all__ = ["norm", "t", "gamma", "beta", "chi2", "poisson", "multivariate_normal",
           "dirichlet"]
